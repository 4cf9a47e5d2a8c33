"""Reading a replicated ledger through its metadata (docs/cluster.md §3): each entry from its
write set with fallback and speculative reads, the LAC over the last segment, and a tail that
follows the LAC long poll across the ensemble to the end of a closed ledger.

Invariants (S4, BookKeeper's ReadOnlyLedgerHandle):
    RD1. A reader's LAC never goes back: ``read_lac`` and the tail keep the highest they saw,
         and a closed ledger's LAC is its lastEntryId.
    RD2. ``read_entry``/``read_range`` serve only entries at or below that LAC (looked up
         once more before refusing) and never past a closed ledger's end; above it they
         raise BeyondLastConfirmed. An entry above the LAC may still be lost by recovery.
    RD3. A range (``read_range``, a tail catching up) is read in windows of held reads
         (api/client/batch_read.py), a few windows in flight, and yielded in entry order,
         each entry verified; an id a batch did not bring (a bookie down, slow, short or
         holding a corrupt copy) is read entry by entry from its write set as above.
         Memory is bounded by the windows in flight, not by the range.
"""

from __future__ import annotations

import asyncio
import collections
import logging

from api.client.batch_read import WINDOW_IDS, WINDOWS_IN_FLIGHT, HeldRead, held_read, plan
from api.client.bookies import BOOKIE_FAILURES, Bookies
from api.client.codec import LedgerCodec, LedgerEntry
from api.client.distribution import bookies_of
from api.client.entry_stream import EntryStream
from api.client.metadata import LedgerMetadata
from bookie.errors import NoEntry, NoLedger


log = logging.getLogger("api.client.ensemble")
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
        #: Bookies whose held read failed or lagged: later windows read from other replicas.
        self._avoid: set[str] = set()

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
        until the end of the ledger once it is closed. Catching up is a batched read (RD3)."""
        next_id = first
        while True:
            lac = await self._poll_lac(next_id - 1)
            self.lac = max(self.lac, lac)
            if next_id > lac:  # nothing new: is the ledger closed?
                self.metadata = await self.bk.store.read(self.ledger_id)
                if not self.metadata.closed:
                    continue
                lac = self.metadata.last_entry_id
            async for window in self._windows_fresh(next_id, lac):
                for entry in window:
                    yield entry
                next_id += len(window)
            if self.metadata.closed and next_id > self.metadata.last_entry_id:
                return

    async def _windows_fresh(self, first: int, last: int):
        """A tail's read, window by window: on failure the metadata is read again (an
        ensemble change may have placed entries elsewhere since this reader opened) and
        the rest read once more."""
        next_id = first
        try:
            async for window in self._stream_windows(first, last):
                yield window
                next_id += len(window)
        except (NoEntry, NoLedger, *BOOKIE_FAILURES):
            self.metadata = await self.bk.store.read(self.ledger_id)
            self._avoid.clear()
            async for window in self._stream_windows(next_id, last):
                yield window

    async def _poll_lac(self, known: int, timeout_ms: int = TAIL_POLL_MS) -> int:
        """The LAC long poll on every bookie of the last segment: the first answer above
        ``known``, or ``known`` after ``timeout_ms``."""
        async def one(bookie_id: str) -> int:
            try:
                return await asyncio.wait_for(self.bk.client(bookie_id).read_lac(
                    self.ledger_id, wait_for_gt=known, timeout_ms=timeout_ms),
                    timeout_ms / 1000 + self.bk.read_timeout_s)
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

    def read_range(self, first: int, last: int) -> EntryStream:
        """Entries ``first``..``last``, all at or below the LAC (RD2), batched (RD3):
        ``async for entry in reader.read_range(a, b)`` streams, ``await`` gives a list."""
        async def confirmed():
            await self._check_confirmed(last)
            async for window in self._stream_windows(first, last):
                for entry in window:  # one async generator level per entry, not two
                    yield entry
        return EntryStream(confirmed)

    # -- BookKeeper's ReadHandle names (org.apache.bookkeeper.client.api, issue 55) ------

    read = read_range  # ReadHandle.read(first, last)

    def read_unconfirmed(self, first: int, last: int) -> EntryStream:
        """Entries ``first``..``last`` whatever the LAC (ReadHandle.readUnconfirmed): what
        the write sets hold now, which recovery may still cut off above the LAC. NoEntry
        names the first id no replica holds."""
        if first < 0 or last < first:
            raise ValueError(f"bad range {first}..{last}")

        async def held():
            async for window in self._stream_windows(first, last):
                for entry in window:
                    yield entry
        return EntryStream(held)

    async def batch_read(self, first: int, max_count: int, max_size: int) -> list[LedgerEntry]:
        """ReadHandle.batchRead: confirmed entries from ``first`` on, at most ``max_count``
        of them and, past the first, at most ``max_size`` payload bytes in all."""
        if max_count < 1:
            raise ValueError(f"max_count {max_count} < 1")
        await self._check_confirmed(first)
        end = self.metadata.last_entry_id if self.metadata.closed else self.lac
        found, size = [], 0
        async for entry in self.read_range(first, min(first + max_count - 1, end)):
            if found and size + len(entry.payload) > max_size:
                break
            found.append(entry)
            size += len(entry.payload)
        return found

    @property
    def last_add_confirmed(self) -> int:
        """The LAC this reader knows, without asking (ReadHandle.getLastAddConfirmed)."""
        return self.lac

    @property
    def is_closed(self) -> bool:
        return self.metadata.closed

    @property
    def length(self) -> int:
        """A closed ledger's length in payload bytes (0 while it is open, as BookKeeper's)."""
        return self.metadata.length

    async def read_last_add_confirmed(self) -> int:
        """ReadHandle.readLastAddConfirmed: the LAC asked of every bookie of the last
        segment (RD1)."""
        return await self.read_lac()

    async def try_read_last_add_confirmed(self) -> int:
        """ReadHandle.tryReadLastAddConfirmed: the first answer of the last segment's
        bookies, without waiting for the others; may be behind ``read_last_add_confirmed``,
        never behind what this reader saw (RD1)."""
        if self.metadata.closed:
            return self.metadata.last_entry_id

        async def one(bookie_id: str) -> int:
            return await asyncio.wait_for(self.bk.client(bookie_id).read_lac(self.ledger_id),
                                          self.bk.read_timeout_s)
        asks = [asyncio.ensure_future(one(b)) for b in self.metadata.ensembles[-1][1]]
        try:
            for answer in asyncio.as_completed(asks):
                try:
                    self.lac = max(self.lac, await answer)
                    break
                except (NoLedger, *BOOKIE_FAILURES):
                    continue
        finally:
            for ask in asks:
                ask.cancel()
        return self.lac

    async def read_last_add_confirmed_and_entry(self, entry_id: int, timeout_ms: int
                                                ) -> tuple[int, LedgerEntry | None]:
        """ReadHandle.readLastAddConfirmedAndEntry: wait up to ``timeout_ms`` (the LAC
        long poll) for the LAC to reach ``entry_id``; (the LAC, the entry once it is
        confirmed, else None)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while self.lac < entry_id and not self.metadata.closed:
            left_ms = int((deadline - loop.time()) * 1000)
            if left_ms <= 0:
                return self.lac, None
            self.lac = max(self.lac, await self._poll_lac(max(self.lac, entry_id - 1),
                                                          min(left_ms, TAIL_POLL_MS)))
        if entry_id > self.lac:
            return self.lac, None
        return self.lac, await self._read_replicas(entry_id)

    # -- batched reads (RD3) -------------------------------------------------------------

    def _windows(self, first: int, last: int):
        """(first, last, ensemble) of each window, none crossing a segment boundary."""
        segments = self.metadata.ensembles
        for at, (segment_first, members) in enumerate(segments):
            segment_last = segments[at + 1][0] - 1 if at + 1 < len(segments) else last
            low, high = max(first, segment_first), min(last, segment_last)
            for start in range(low, high + 1, WINDOW_IDS):
                yield start, min(start + WINDOW_IDS - 1, high), members

    async def _stream_windows(self, first: int, last: int):
        """The windows of ``[first, last]`` in order, each a list of its entries, with up to
        WINDOWS_IN_FLIGHT read ahead."""
        windows = self._windows(first, last)
        running: collections.deque = collections.deque()

        def launch() -> None:
            while len(running) < WINDOWS_IN_FLIGHT:
                window = next(windows, None)
                if window is None:
                    return
                running.append(asyncio.ensure_future(self._read_window(*window)))
        try:
            launch()
            while running:
                entries = await running.popleft()
                launch()
                yield entries
        finally:
            for task in running:
                task.cancel()

    async def _read_window(self, first: int, last: int, members) -> list[LedgerEntry]:
        """One window: its held reads at once, each entry verified; what they did not bring
        in ``batch_wait_s`` (a lagging bookie), entry by entry (RD3)."""
        avoid = {i for i, b in enumerate(members) if b in self._avoid}
        reads = plan(len(members), self.metadata.write_quorum, first, last, avoid=avoid)
        found: dict[int, LedgerEntry] = {}  # verified as they arrive (_verified)
        tasks = {asyncio.ensure_future(self._held(members[read.index], read, found)): read
                 for read in reads}
        try:
            lagging = set(tasks)
            while lagging:  # a batch lags once a wait brings nothing (large entries take
                held = len(found)  # several replies: progress, not a total, is the test)
                _, lagging = await asyncio.wait(lagging, timeout=self._batch_wait_s())
                if len(found) == held:
                    break
        finally:
            for task in tasks:
                task.cancel()
        for task in lagging:
            self._avoid.add(members[tasks[task].index])
        ids = range(first, last + 1)
        if len(found) < len(ids):
            missing = [e for e in ids if e not in found]
            for entry in await asyncio.gather(*(self._read_replicas(e) for e in missing)):
                found[entry.entry_id] = entry
        return [found[e] for e in ids]

    def _verified(self, body: bytes) -> list[tuple[int, LedgerEntry]]:
        """A held reply's entries that verify; one that does not is left for the next
        replica (RD3) and logged."""
        good, bad = self.codec.decode_frames(body)
        for mismatch in bad:
            log.warning("ledger %d: %s", self.ledger_id, mismatch)
        return good

    async def _held(self, bookie_id: str, read: HeldRead, found: dict[int, LedgerEntry]
                    ) -> None:
        _, error = await held_read(self.bk.client(bookie_id), self.ledger_id, read,
                                   self.bk.read_timeout_s, found, self._verified)
        if error is not None:
            self._avoid.add(bookie_id)
            log.info("ledger %d: held read of %d..%d from %s failed (%s); those entries one "
                     "by one", self.ledger_id, read.first, read.last, bookie_id, error)

    def _batch_wait_s(self) -> float:
        """How long a window waits for its held reads before reading the rest entry by
        entry: a batch takes longer than one entry, so several speculative read times."""
        return 4 * self.bk.speculative_read_s
