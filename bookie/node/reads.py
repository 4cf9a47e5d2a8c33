"""The ledger read operations: entries, ranges, the ledger list and ledger info.

Reads of stored entries run on the 2-thread read executor; the write cache is read on the
loop (memory only).
"""

from __future__ import annotations

import asyncio

from bookie.errors import NoEntry
from bookie.node.read_queue import Oversize, ReadGroup
from bookie.node.writes import SANITY_LEDGER_ID
from entrylog.run_reader import Bound
from ledgerindex.keys import LedgerState

READ_BATCH_BYTES_MAX = 8 * 1024 * 1024
#: A held read examines at most this many ids per entry it may return (max_read_batch): a
#: bookie that holds few ids of a range still answers in bounded time.
HELD_SCAN_FACTOR = 4


class LedgerReads:
    """Mixin of ``Bookie``: reads, listing, per-ledger figures."""

    async def read_entry(self, ledger_id: int, entry_id: int, limit: int = 0) -> bytes:
        """The stored bytes; ``entry_id`` -1 reads the last entry (docs/design.md §3.3).
        With a ``limit``, ``Oversize(size)`` for an entry larger (read_queue.py RQ6)."""
        ledger_id, entry_id, data = self.begin_read(ledger_id, entry_id, limit)
        if isinstance(data, asyncio.Future):
            data = await data
        return stored(ledger_id, entry_id, data)

    def begin_read(self, ledger_id: int, entry_id: int, limit: int = 0) -> tuple:
        """``read_entry`` without a coroutine (the listener's plain reads, BK7): the ids
        read (-1 made the last entry's) and the write cache's bytes, or the read queue's
        future of the stored bytes (None: not stored), for ``stored``. Raises as
        ``read_entry`` does for a bookie not serving or a ledger it does not know."""
        self._check_serving()
        self._existing_state(ledger_id)
        if entry_id == -1:
            entry_id = self._last_entry_of(ledger_id)
        data = self.storage.get_cached(ledger_id, entry_id)
        if data is None:
            return ledger_id, entry_id, self._read_queue.read(ledger_id, entry_id, limit)
        if limit and len(data) > limit:
            return ledger_id, entry_id, Oversize(len(data))
        self.stats.read_bytes += len(data)
        return ledger_id, entry_id, data

    def begin_reads(self, asked: list, answer, allowance: int = 0) -> ReadGroup:
        """``begin_read`` for many (the listener's plain reads of one begin, RQ4): each of
        ``asked`` (a tuple of ledger id, entry id, and what the caller keeps; -1 reads the
        last entry) gets its outcome (bytes, None: not stored, or the exception
        ``begin_read`` would raise) in the group, which ``answer`` gets once they are all
        in, from a loop callback, never within this call. The bookie's state and each
        ledger are checked once a run of reads: nothing changes them within this call.
        With an ``allowance`` (read_queue.py RQ6), an entry larger than it is
        ``Oversize(size)``, the write cache's bytes too."""
        group = ReadGroup(len(asked), answer, allowance)
        queued = []
        known = -1  # the ledger checked last
        cached = self.storage.get_cached
        for index, read in enumerate(asked):
            ledger_id, entry_id = read[0], read[1]
            try:
                if ledger_id != known:
                    self._check_serving()
                    self._existing_state(ledger_id)
                    known = ledger_id
                if entry_id == -1:
                    entry_id = self._last_entry_of(ledger_id)
                data = cached(ledger_id, entry_id)
                if data is not None:
                    if allowance and len(data) > allowance:
                        data = Oversize(len(data))  # RQ6
                    else:
                        self.stats.read_bytes += len(data)
            except Exception as exc:  # noqa: BLE001 - this read's own outcome (RQ2)
                known, data = -1, exc
            if data is None:
                queued.append((ledger_id, entry_id, group, index))
            else:
                group.landed(index, data)
        if queued:
            self._read_queue.read_group(queued)
        else:  # every outcome at hand: still answered from a callback
            self._loop.call_soon(group.finish)
        return group

    def _last_entry_of(self, ledger_id: int) -> int:
        last = self._runtime_of(ledger_id).last_entry_id
        if last < 0:
            raise NoEntry(f"ledger {ledger_id} has no entries")
        return last

    async def read_range(self, ledger_id: int, first: int, last: int,
                         step: int = 1) -> list[bytes]:
        """Entries first, first+step, ... <= last, at most ``max_read_batch`` or 8 MiB,
        stopping at the first one missing (where the ledger ends); none at all is NoEntry."""
        self._check_serving()
        self._existing_state(ledger_id)
        last = min(last, first + (self.config.max_read_batch - 1) * step)
        found = await self._loop.run_in_executor(self._reads, self._read_range_sync,
                                                 ledger_id, first, last, step)
        if not found:
            raise NoEntry(f"entry {ledger_id}/{first} is not stored on this bookie")
        self.stats.read_bytes += sum(map(len, found))
        return found

    async def read_batch_framed(self, ledger_id: int, first: int, last: int,
                                max_framed: int, first_max: int | None = None):
        """The body of a v2 batch read's answer: entries from ``first`` as
        ``read_range`` takes them, each framed by its 4-byte size, within ``max_framed``
        bytes so framed (the first one always, unless it is larger than ``first_max``:
        then ``Oversize`` of it, nothing read but its size); NoEntry when there is none."""
        self._check_serving()
        self._existing_state(ledger_id)
        last = min(last, first + self.config.max_read_batch - 1)
        bound = Bound(READ_BATCH_BYTES_MAX, max_framed, first_max)
        pieces = await self._loop.run_in_executor(self._reads, self.storage.get_batch,
                                                  ledger_id, first, last, bound, True)
        if not bound.count:
            if bound.oversize:
                return Oversize(bound.oversize)
            raise NoEntry(f"entry {ledger_id}/{first} is not stored on this bookie")
        body = b"".join(pieces)
        self.stats.read_bytes += len(body) - 4 * bound.count  # without the size frames
        return body

    def _read_range_sync(self, ledger_id: int, first: int, last: int,
                         step: int) -> list[bytes]:
        if step == 1:
            return self.storage.get_entries(ledger_id, first, last, READ_BATCH_BYTES_MAX)
        found, size = [], 0
        for entry_id in range(first, last + 1, step):
            data = self.storage.get_entry(ledger_id, entry_id)
            if data is None or (found and size + len(data) > READ_BATCH_BYTES_MAX):
                break
            found.append(data)
            size += len(data)
        return found

    async def read_held(self, ledger_id: int, first: int, last: int,
                        step: int = 1) -> tuple[list[bytes], int]:
        """The entries this bookie holds among ids first, first+step, ... <= last, in id
        order, gaps skipped (a striped ledger's bookie holds only some ids of a range), and
        the last id covered: the reply covers the ids up to it, the caller asks again from
        the next one. Bounded by ``max_read_batch`` entries, 8 MiB and
        HELD_SCAN_FACTOR * max_read_batch ids; the first id is always covered."""
        self._check_serving()
        self._existing_state(ledger_id)
        # Ids past the last one stored are not held: the reply covers them without a lookup
        # each (an add racing this read is as if it came after it).
        last_stored = self._runtime_of(ledger_id).last_entry_id
        bounded = min(last, first + (HELD_SCAN_FACTOR * self.config.max_read_batch - 1) * step)
        if bounded >= last_stored:
            bounded = last
        found, covered = await self._loop.run_in_executor(
            self._reads, self._read_held_sync, ledger_id, first, bounded, step, last_stored)
        self.stats.read_bytes += sum(map(len, found))
        return found, covered

    def _read_held_sync(self, ledger_id: int, first: int, last: int, step: int,
                        last_stored: int) -> tuple[list[bytes], int]:
        found, size = [], 0
        limit = self.config.max_read_batch
        for entry_id in range(first, min(last, last_stored) + 1, step):
            data = self.storage.get_entry(ledger_id, entry_id)
            if data is not None:
                if found and (len(found) == limit or size + len(data) > READ_BATCH_BYTES_MAX):
                    return found, entry_id - step
                found.append(data)
                size += len(data)
        return found, last

    async def entry_id_ranges(self, ledger_id: int) -> list[list[int]]:
        """The ids stored for a ledger as ``[[first, last], ...]`` runs. The cache is read
        before the index: an entry a checkpoint moves meanwhile leaves the cache only once
        the index has it, so it is seen in one or the other."""
        self._check_serving()
        self._existing_state(ledger_id)
        cached = self.storage.cache.entry_ids(ledger_id)
        indexed = await self._loop.run_in_executor(self._reads, self.storage.indexed_entry_ids,
                                                   ledger_id)
        return _runs(sorted(set(cached).union(indexed)))

    def last_entry_id(self, ledger_id: int) -> int:
        self._existing_state(ledger_id)
        return self._runtime_of(ledger_id).last_entry_id

    def ledger_state(self, ledger_id: int) -> LedgerState:
        return self._existing_state(ledger_id)

    def list_ledgers(self, start: int, limit: int) -> tuple[list[int], int | None]:
        """Live ledger ids >= start, at most ``limit``, and where the next page starts."""
        self._check_serving()
        ids = [i for i in self.storage.ledgers.ledger_ids(start, limit + 2)
               if i != SANITY_LEDGER_ID][:limit + 1]
        if len(ids) > limit:
            return ids[:limit], ids[limit]
        return ids, None

    async def ledger_info(self, ledger_id: int) -> dict:
        self._check_serving()
        state = self._existing_state(ledger_id)
        runtime = self._runtime_of(ledger_id)
        entries, size = await self._ledger_usage(ledger_id)
        return {"ledgerId": ledger_id, "fenced": state.fenced, "lac": runtime.lac,
                "lastEntryId": runtime.last_entry_id, "entries": entries, "bytes": size}

    async def _ledger_usage(self, ledger_id: int) -> tuple[int, int]:
        """O(cached entries), off the loop; a ledger whose counters are not known (a crash
        mid-checkpoint, an older data dir) is recounted once, on the checkpoint thread."""
        usage = await self._loop.run_in_executor(self._reads, self.storage.ledger_usage,
                                                 ledger_id)
        if usage is None:
            await asyncio.wrap_future(self.checkpoints.submit(
                lambda: self.storage.recount_usage(ledger_id)))
            usage = await self._loop.run_in_executor(self._reads, self.storage.ledger_usage,
                                                     ledger_id)
        return usage if usage is not None else (0, 0)


def stored(ledger_id: int, entry_id: int, data):
    """The bytes ``begin_read`` found, or NoEntry when it found none."""
    if data is None:
        raise not_stored(ledger_id, entry_id)
    return data


def not_stored(ledger_id: int, entry_id: int) -> NoEntry:
    return NoEntry(f"entry {ledger_id}/{entry_id} is not stored on this bookie")


def _runs(ids: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for entry_id in ids:
        if runs and runs[-1][1] == entry_id - 1:
            runs[-1][1] = entry_id
        else:
            runs.append([entry_id, entry_id])
    return runs
