"""The ledger library over one bookie: the names, one module a job.

``codec.py`` frames and checks entries; ``retry.py`` the retry policy and limits;
``writer.py`` (with ``pipeline.py``) LedgerWriter; ``reader.py`` LedgerReader;
``recovery.py`` recover_ledger; ``ledger_end.py`` where a ledger ends on the bookie.
Invariants live with their code: L1-L5 in writer.py, L6 in reader.py, RC1-RC4 in recovery.py.
"""

from api.client.codec import DigestMismatch, LedgerCodec, LedgerEntry, digest_type_of
from api.client.reader import LedgerReader
from api.client.recovery import RecoveryResult, recover_ledger
from api.client.retry import TRANSPORT_ERRORS, WriterOptions
from api.client.writer import LedgerClosedError, LedgerWriter

__all__ = ["DigestMismatch", "LedgerClosedError", "LedgerCodec", "LedgerEntry", "LedgerReader",
           "LedgerWriter", "RecoveryResult", "TRANSPORT_ERRORS", "WriterOptions",
           "digest_type_of", "recover_ledger"]
