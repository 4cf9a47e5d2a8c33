"""Python clients of the bookie: BookieClient (HTTP), BkBookieClient (BookKeeper's protocol,
api/client/bkport/) and the ledger library."""

from api.client.bkport.client import BkBookieClient
from api.client.bkport.errors import NotOnBookKeeperProtocol
from api.client.bookie_client import BookieClient
from api.client.ledger import (DigestMismatch, LedgerClosedError, LedgerCodec, LedgerEntry,
                               LedgerReader, LedgerWriter, RecoveryResult, WriterOptions,
                               recover_ledger)
from api.client.metadata import (BadVersion, FileMetadataStore, LedgerExists, LedgerMetadata,
                                 LedgerMetadataStore, MetadataError, MetadataState)

__all__ = [
    "BadVersion", "BkBookieClient", "BookieClient", "DigestMismatch", "FileMetadataStore",
    "LedgerClosedError", "LedgerCodec", "LedgerEntry", "LedgerExists", "LedgerMetadata",
    "LedgerMetadataStore", "LedgerReader", "LedgerWriter", "MetadataError", "MetadataState",
    "NotOnBookKeeperProtocol", "RecoveryResult", "WriterOptions", "recover_ledger",
]
