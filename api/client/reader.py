"""LedgerReader: reads and tails one ledger over one bookie (BookKeeper's ReadHandle).

Invariants:
    L6. Readers return only entries whose ids and digest verify; ``tail`` yields entries up
        to the bookie's LAC only, each exactly once, in id order.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

from api.client.bookie_client import BookieClient
from api.client.codec import LedgerCodec, LedgerEntry
from api.client.entry_stream import EntryStream
from api.client.metadata import LedgerMetadataStore
from api.client.retry import _client_for
from bookie.entry import DigestType
from bookie.errors import NoEntry, NoLedger


class LedgerReader:
    """Reads and follows one ledger (BookKeeper's ReadHandle), verifying every entry (L6).

    ``read_entry`` and ``read_range`` read what the bookie holds, confirmed or not (like
    readUnconfirmed); ``read_last`` and ``tail`` stay at or below the LAC.
    Thread-safety: one event loop; its tasks may share a reader.
    """

    def __init__(self, client: BookieClient, owns_client: bool, codec: LedgerCodec,
                 metadata_store: LedgerMetadataStore | None = None,
                 missing_ledger_poll_s: float = 0.1) -> None:
        self._client, self._owns_client = client, owns_client
        self.codec = codec
        self._store = metadata_store
        self.missing_ledger_poll_s = missing_ledger_poll_s

    @classmethod
    async def open(cls, bookie: BookieClient | str, ledger_id: int,
                   password: bytes | str = b"",
                   digest_type: DigestType | str = DigestType.CRC32C, *,
                   metadata_store: LedgerMetadataStore | None = None) -> "LedgerReader":
        """A reader; the password is needed to verify MAC digests only. With a metadata
        store the digest type comes from the ledger's metadata."""
        if metadata_store is not None:
            digest_type = (await metadata_store.read(ledger_id)).digest_type
        client, owned = _client_for(bookie)
        return cls(client, owned, LedgerCodec.for_password(ledger_id, password, digest_type),
                   metadata_store)

    async def __aenter__(self) -> "LedgerReader":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_client:
            await self._client.close()

    @property
    def ledger_id(self) -> int:
        return self.codec.ledger_id

    async def read_lac(self, wait_for_gt: int | None = None, timeout_ms: int = 0) -> int:
        """The bookie's LAC; with ``wait_for_gt`` long-poll until it passes that."""
        return await self._client.read_lac(self.ledger_id, wait_for_gt, timeout_ms)

    async def read_entry(self, entry_id: int) -> LedgerEntry:
        """One entry; -1 reads the last entry the bookie stored (maybe unconfirmed)."""
        data = await self._client.read_entry(self.ledger_id, entry_id)
        return self.codec.decode(data, None if entry_id == -1 else entry_id)

    async def read_last(self) -> LedgerEntry:
        """The last confirmed entry, the one at the LAC; NoEntry if nothing is confirmed."""
        lac = await self.read_lac()
        if lac < 0:
            raise NoEntry(f"ledger {self.ledger_id} has no confirmed entries")
        return await self.read_entry(lac)

    def read_range(self, first: int, last: int) -> EntryStream:
        """Entries first..last, all of them (NoEntry names the first missing one):
        ``await`` gives a list, ``async for`` streams them, as on a replicated ledger."""
        async def entries():
            async for batch in self.iter_range(first, last):
                for entry in batch:
                    yield entry
        return EntryStream(entries)

    read = read_range  # BookKeeper's ReadHandle.read(first, last)

    async def iter_range(self, first: int, last: int) -> AsyncIterator[list[LedgerEntry]]:
        """Entries first..last as the bookie's range reads return them (each at most
        ``max_read_batch`` entries or 8 MiB), verified."""
        if first < 0 or last < first:
            raise ValueError(f"bad range {first}..{last}")
        next_id = first
        while next_id <= last:
            datas = await self._client.read_range(self.ledger_id, next_id, last)
            if not datas:
                raise NoEntry(f"entry {self.ledger_id}/{next_id} is not stored")
            yield [self.codec.decode(data, next_id + i) for i, data in enumerate(datas)]
            next_id += len(datas)

    async def tail(self, first: int = 0, until: int | None = None,
                   poll_timeout_ms: int = 10_000) -> AsyncIterator[LedgerEntry]:
        """Follow the ledger from ``first``: yield each confirmed entry once, in order (L6).

        Waits with the LAC long poll. Ends after ``until`` or, with a metadata store, at the
        end of a ledger its metadata says is closed; otherwise runs until the caller stops.
        """
        next_id, lac = first, first - 1
        while until is None or next_id <= until:
            if next_id <= lac:
                stop = lac if until is None else min(lac, until)
                async with contextlib.aclosing(self.iter_range(next_id, stop)) as batches:
                    async for batch in batches:
                        for entry in batch:
                            yield entry
                        next_id = batch[-1].entry_id + 1
                continue
            closed_at = await self._closed_at()
            if closed_at is not None:
                if next_id > closed_at:
                    return
                lac = closed_at
                continue
            lac = await self._poll_lac(next_id - 1, poll_timeout_ms)

    async def _closed_at(self) -> int | None:
        """The last entry of a ledger closed in metadata; None if open or no store."""
        if self._store is None:
            return None
        metadata = await self._store.read(self.ledger_id)
        return metadata.last_entry_id if metadata.closed else None

    async def _poll_lac(self, known: int, timeout_ms: int) -> int:
        try:
            return await self._client.read_lac(self.ledger_id, known, timeout_ms)
        except NoLedger:
            # The bookie learns of a ledger at its first add; there is nothing to long-poll
            # on before that, so poll at a fixed pace.
            await asyncio.sleep(self.missing_ledger_poll_s)
            return known
