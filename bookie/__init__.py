"""A BookKeeper-style bookie. See README.md."""

__version__ = "0.1.0"
