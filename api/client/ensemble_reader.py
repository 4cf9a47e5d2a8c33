"""Reading a replicated ledger through its metadata (docs/cluster.md §3): each entry from its
write set with fallback and speculative reads, the LAC over the last segment, and a tail that
follows the LAC long poll across the ensemble to the end of a closed ledger.

Invariants (S4, BookKeeper's ReadOnlyLedgerHandle):
    RD1. A reader's LAC never goes back: ``read_lac`` and the tail keep the highest they saw,
         and a closed ledger's LAC is its lastEntryId.
    RD2. ``read_entry``/``read_range`` serve only entries at or below that LAC (looked up
         once more before refusing) and never past a closed ledger's end; above it they
         raise BeyondLastConfirmed. An entry above the LAC may still be lost by recovery.
"""

from __future__ import annotations

import asyncio
from api.client.bookies import BOOKIE_FAILURES, Bookies
from api.client.codec import LedgerCodec, LedgerEntry
from api.client.distribution import bookies_of
from api.client.metadata import LedgerMetadata
from bookie.errors import NoEntry, NoLedger


#: How long one LAC long poll of a tail waits before the tail looks at the metadata again.
TAIL_POLL_MS = 2000


class BeyondLastConfirmed(NoEntry):
    """RD2: the entry is above the reader's LAC, or past a closed ledger's end."""


class EnsembleReader:
    """Reads one replicated ledger through its metadata: each entry from its write set, one
    replica after another on error; the first that verifies wins."""

    def __init__(self, bk: Bookies, metadata: LedgerMetadata, codec: LedgerCodec) -> None:
        self.bk, self.metadata, self.codec = bk, metadata, codec
        self.ledger_id = metadata.ledger_id
        self.lac = metadata.last_entry_id if metadata.closed else -1  # RD1

    async def read_entry(self, entry_id: int) -> LedgerEntry:
        """One entry at or below the LAC (RD2), from its write set."""
        await self._check_confirmed(entry_id)
        return await self._read_replicas(entry_id)

    async def _check_confirmed(self, last: int) -> None:
        if self.metadata.closed:
            if last > self.metadata.last_entry_id:
                raise BeyondLastConfirmed(
                    f"entry {self.ledger_id}/{last} is past the end of the closed ledger "
                    f"(last entry {self.metadata.last_entry_id})")
            return
        if last > self.lac:
            await self.read_lac()
        if last > self.lac:
            raise BeyondLastConfirmed(f"entry {self.ledger_id}/{last} is above the last add "
                                      f"confirmed ({self.lac})")

    async def _read_replicas(self, entry_id: int) -> LedgerEntry:
        """From the entry's write set: one replica, the next on an error, and the next too
        when one stays silent for ``speculative_read_s`` (a speculative read); the first that
        verifies wins (S3: every replica holds the same bytes)."""
        replicas = list(bookies_of(self.metadata.ensembles, entry_id,
                                   self.metadata.write_quorum))
        asked: dict[asyncio.Future, str] = {}
        errors: list[BaseException] = []

        def ask_next() -> None:
            if replicas:
                bookie_id = replicas.pop(0)
                asked[asyncio.ensure_future(self._read_one(bookie_id, entry_id))] = bookie_id
        ask_next()
        try:
            while asked:
                done, _ = await asyncio.wait(asked, timeout=self.bk.speculative_read_s,
                                             return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    ask_next()  # speculative: a slow replica, ask the next one too
                    continue
                for future in done:
                    asked.pop(future)
                    if future.exception() is None:
                        return future.result()
                    errors.append(future.exception())
                    ask_next()
        finally:
            for future in asked:
                future.cancel()
        missing = [e for e in errors if isinstance(e, (NoEntry, NoLedger))]
        raise (missing or errors or [NoEntry(f"entry {self.ledger_id}/{entry_id}: no "
                                             f"replica")])[-1]

    async def _read_one(self, bookie_id: str, entry_id: int) -> LedgerEntry:
        data = await asyncio.wait_for(
            self.bk.client(bookie_id).read_entry(self.ledger_id, entry_id),
            self.bk.read_timeout_s)
        return self.codec.decode(data, entry_id)

    async def tail(self, first: int = 0):
        """Every entry from ``first`` on, each once, in order, as the LAC passes it (S4),
        until the end of the ledger once it is closed."""
        next_id = first
        while True:
            lac = await self._poll_lac(next_id - 1)
            self.lac = max(self.lac, lac)
            while next_id <= lac:
                yield await self._read_fresh(next_id)
                next_id += 1
            if lac < next_id:  # nothing new: is the ledger closed?
                self.metadata = await self.bk.store.read(self.ledger_id)
                if self.metadata.closed:
                    for entry_id in range(next_id, self.metadata.last_entry_id + 1):
                        yield await self._read_fresh(entry_id)
                    return

    async def _read_fresh(self, entry_id: int) -> LedgerEntry:
        """A tail's read: on failure the metadata is read again (an ensemble change may have
        placed the entry elsewhere since this reader opened) and the read retried once."""
        try:
            return await self._read_replicas(entry_id)
        except (NoEntry, NoLedger, *BOOKIE_FAILURES):
            self.metadata = await self.bk.store.read(self.ledger_id)
            return await self._read_replicas(entry_id)

    async def _poll_lac(self, known: int) -> int:
        """The LAC long poll on every bookie of the last segment: the first answer above
        ``known``, or ``known`` after TAIL_POLL_MS."""
        async def one(bookie_id: str) -> int:
            try:
                return await asyncio.wait_for(self.bk.client(bookie_id).read_lac(
                    self.ledger_id, wait_for_gt=known, timeout_ms=TAIL_POLL_MS),
                    TAIL_POLL_MS / 1000 + self.bk.read_timeout_s)
            except (NoLedger, *BOOKIE_FAILURES):
                return -1
        polls = [asyncio.ensure_future(one(b)) for b in self.metadata.ensembles[-1][1]]
        try:
            for future in asyncio.as_completed(polls):
                lac = await future
                if lac > known:
                    return lac
            return known
        finally:
            for future in polls:
                future.cancel()

    async def read_lac(self) -> int:
        """The highest LAC the last segment's bookies report, never below one this reader
        saw before (RD1; -1: none); entries up to it are acknowledged, so readable from
        their write sets. A closed ledger's is its last entry id."""
        if self.metadata.closed:
            return self.metadata.last_entry_id
        lacs = [self.lac]
        for bookie_id in self.metadata.ensembles[-1][1]:
            try:
                lacs.append(await asyncio.wait_for(
                    self.bk.client(bookie_id).read_lac(self.ledger_id), self.bk.read_timeout_s))
            except (NoLedger, *BOOKIE_FAILURES):
                continue
        self.lac = max(lacs)
        return self.lac

    async def read_range(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first``..``last``, all at or below the LAC (RD2)."""
        await self._check_confirmed(last)
        return [await self._read_replicas(e) for e in range(first, last + 1)]
