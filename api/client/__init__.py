"""Python clients of the bookie: BookieClient (HTTP), BkBookieClient (BookKeeper's protocol,
api/client/bkport/), the single-bookie ledger library (LedgerWriter, LedgerReader,
recover_ledger, delete_ledger) and the replicated client (BookKeeper). Every error they
raise is exported here (issue 55)."""

from api.client.bkport.client import BkBookieClient
from api.client.bkport.errors import NotOnBookKeeperProtocol
from api.client.bookie_client import BookieClient
from api.client.deletion import delete_ledger
from api.client.ensemble import BookKeeper
from api.client.ensemble_errors import LedgerClosed, NotEnoughBookies, RecoveryUndecided
from api.client.ensemble_reader import BeyondLastConfirmed
from api.client.entry_stream import EntryStream
from api.client.ledger import (DigestMismatch, LedgerClosedError, LedgerCodec, LedgerEntry,
                               LedgerReader, LedgerWriter, RecoveryResult, WriterOptions,
                               recover_ledger)
from api.client.metadata import (BadVersion, FileMetadataStore, LedgerExists, LedgerMetadata,
                                 LedgerMetadataStore, MetadataError, MetadataState)
from bookie.errors import (BadDigest, BadRequest, BookieError, CorruptRecord, Fenced,
                           IOFailure, NoEntry, NoLedger, ReadOnly, TooLarge, TooManyRequests,
                           Unauthorized, Unavailable)

__all__ = [
    "BadDigest", "BadRequest", "BadVersion", "BeyondLastConfirmed", "BkBookieClient",
    "BookKeeper", "BookieClient", "BookieError", "CorruptRecord", "DigestMismatch",
    "EntryStream", "Fenced", "FileMetadataStore", "IOFailure", "LedgerClosed",
    "LedgerClosedError", "LedgerCodec", "LedgerEntry", "LedgerExists", "LedgerMetadata",
    "LedgerMetadataStore", "LedgerReader", "LedgerWriter", "MetadataError", "MetadataState",
    "NoEntry", "NoLedger", "NotEnoughBookies", "NotOnBookKeeperProtocol", "ReadOnly",
    "RecoveryResult", "RecoveryUndecided", "TooLarge", "TooManyRequests", "Unauthorized",
    "Unavailable", "WriterOptions", "delete_ledger", "recover_ledger",
]
