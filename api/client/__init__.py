"""Python clients of the bookie: BookieClient (HTTP) and the ledger library."""

from api.client.bookie_client import BookieClient

__all__ = ["BookieClient"]
