"""recover_ledger: close a ledger whose writer died (BookKeeper's LedgerRecoveryOp, one bookie).

Invariants:
    RC1. Fence first: once the fence is durable no non-recovery add can land, so the entries
        the bookie holds are all there will ever be, and the writer that lost the race gets
        EFENCED on its next add.
    RC2. Entries up to the fenced LAC were acknowledged; entries after it are checked one by
        one from the LAC: the first missing entry or failed digest ends the ledger before it.
    RC3. Nothing needs a recovery add on a single bookie: the fence's journal record follows
        every add admitted before it, so when the fence is durable they all are.
    RC4. The final LAC is published as an explicit LAC before the metadata says CLOSED, so a
        reader that sees the ledger closed finds the bookie's LAC at its end.
"""

from __future__ import annotations

import dataclasses
import logging

from api.client.bookie_client import BookieClient
from api.client.codec import LedgerCodec
from api.client.ledger_end import _scan_tail, _TailScan
from api.client.metadata import BadVersion, LedgerMetadata, LedgerMetadataStore, MetadataState
from api.client.retry import WriterOptions, _client_for, _retrying
from bookie.entry import DigestType

log = logging.getLogger("api.client.ledger")


@dataclasses.dataclass(frozen=True)
class RecoveryResult:
    """Where recovery closed a ledger: ``lac`` is its last entry (-1: empty)."""

    ledger_id: int
    lac: int
    length: int
    fenced_lac: int        # the bookie's LAC when fenced
    last_entry_id: int     # the last entry the bookie held; > lac if entries were cut
    cut: str | None        # why entries after lac were left out, if any were
    already_closed: bool = False

async def recover_ledger(bookie: BookieClient | str, ledger_id: int,
                         password: bytes | str = b"",
                         digest_type: DigestType | str = DigestType.CRC32C, *,
                         metadata_store: LedgerMetadataStore | None = None,
                         options: WriterOptions | None = None) -> RecoveryResult:
    """Close a ledger whose writer died (RC1-RC4) and return where it ends.

    Idempotent: a second recovery finds the same end. With a metadata store the ledger goes
    IN_RECOVERY, then CLOSED; a ledger already CLOSED there is returned as it is.
    """
    options = options or WriterOptions()
    client, owned = _client_for(bookie)
    try:
        metadata = None
        if metadata_store is not None:
            metadata = await _begin_recovery(metadata_store, ledger_id)
            if metadata.closed:
                return RecoveryResult(ledger_id, metadata.last_entry_id, metadata.length,
                                      metadata.last_entry_id, metadata.last_entry_id, None,
                                      already_closed=True)
            digest_type = metadata.digest_type
        codec = LedgerCodec.for_password(ledger_id, password, digest_type)
        fenced = await _retrying(lambda: client.fence(ledger_id, codec.master_key), options)
        scan = await _scan_tail(client, codec, fenced["lac"], fenced["lastEntryId"])
        if scan.final >= 0:  # RC4
            await _retrying(lambda: client.write_lac(ledger_id, codec.master_key,
                                                     codec.lac_body(scan.final)), options)
        if metadata is not None:
            await _finish_recovery(metadata_store, metadata, scan)
        if scan.cut:
            log.info("ledger %d recovered at entry %d: %s", ledger_id, scan.final, scan.cut)
        return RecoveryResult(ledger_id, scan.final, scan.length, fenced["lac"],
                              fenced["lastEntryId"], scan.cut)
    finally:
        if owned:
            await client.close()

async def _begin_recovery(store: LedgerMetadataStore, ledger_id: int,
                          attempts_max: int = 10) -> LedgerMetadata:
    """OPEN -> IN_RECOVERY by compare-and-set; a CLOSED ledger comes back unchanged."""
    for _ in range(attempts_max):
        metadata = await store.read(ledger_id)
        if metadata.state is not MetadataState.OPEN:
            return metadata
        try:
            return await store.write(dataclasses.replace(metadata,
                                                         state=MetadataState.IN_RECOVERY))
        except BadVersion:
            continue  # a writer or another recoverer moved it: look again
    raise BadVersion(f"ledger {ledger_id}: metadata kept changing during recovery")

async def _finish_recovery(store: LedgerMetadataStore, metadata: LedgerMetadata,
                           scan: _TailScan) -> None:
    closed = dataclasses.replace(metadata, state=MetadataState.CLOSED,
                                 last_entry_id=scan.final, length=scan.length)
    try:
        await store.write(closed)
    except BadVersion:
        current = await store.read(metadata.ledger_id)
        # Two recoverers reach the same end (recovery is deterministic); anything else is a
        # conflict the caller must see.
        if not (current.closed and current.last_entry_id == scan.final):
            raise
