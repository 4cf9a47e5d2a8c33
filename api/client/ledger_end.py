"""Where a ledger ends on the bookie: the scan past its LAC, used to open and to recover it."""

from __future__ import annotations

import dataclasses

from api.client.bookie_client import BookieClient
from api.client.codec import DigestMismatch, LedgerCodec
from api.client.metadata import LedgerExists, LedgerMetadata, LedgerMetadataStore
from bookie.errors import Fenced, NoEntry, NoLedger


@dataclasses.dataclass(frozen=True)
class _TailScan:
    final: int          # the last entry that verified, contiguously from the start
    length: int         # its length field (0 if none)
    cut: str | None

async def _scan_tail(client: BookieClient, codec: LedgerCodec, lac: int,
                     last_entry_id: int) -> _TailScan:
    """RC2: verify entries from the LAC (acknowledged, so it must verify) to the last one;
    the first gap or bad digest after the LAC ends the ledger before it."""
    final, length, next_id = -1, 0, max(lac, 0)
    while next_id <= last_entry_id:
        try:
            datas = await client.read_range(codec.ledger_id, next_id, last_entry_id)
        except NoEntry:
            if next_id <= lac:
                raise
            datas = []
        if not datas:
            return _TailScan(final, length, f"entry {next_id} is missing")
        for index, data in enumerate(datas):
            entry_id = next_id + index
            try:
                entry = codec.decode(data, entry_id)
            except DigestMismatch as exc:
                if entry_id <= lac:
                    raise  # an acknowledged entry is damaged: not ours to cut
                return _TailScan(final, length, str(exc))
            final, length = entry_id, entry.length
        next_id += len(datas)
    return _TailScan(final, length, None)

async def _require_unknown(client: BookieClient, ledger_id: int,
                           store: LedgerMetadataStore | None,
                           metadata: LedgerMetadata | None) -> None:
    """LedgerExists if the bookie already holds ``ledger_id`` (metadata made for it goes)."""
    try:
        await client.ledger_info(ledger_id)
    except NoLedger:
        return
    if store is not None and metadata is not None:
        await store.delete(ledger_id, metadata.version)
    raise LedgerExists(f"ledger {ledger_id} already exists on {client.base_url}; open it to "
                       f"append, or recover it")

async def _open_point(client: BookieClient, codec: LedgerCodec) -> tuple[int, int, int]:
    """(last entry id, length, bookie LAC) for a writer reopening an unfenced ledger."""
    await client.force(codec.ledger_id, codec.master_key)  # checks the key; makes the tail
    info = await client.ledger_info(codec.ledger_id)       # of a dead writer durable
    if info["fenced"]:
        raise Fenced(f"ledger {codec.ledger_id} is fenced (recovered); it cannot be reopened")
    scan = await _scan_tail(client, codec, info["lac"], info["lastEntryId"])
    if scan.final != info["lastEntryId"]:
        raise NoEntry(f"ledger {codec.ledger_id}: {scan.cut}; entries up to "
                      f"{info['lastEntryId']} are stored: recover the ledger instead")
    return scan.final, scan.length, info["lac"]
