"""Single-entry reads that arrive together are served together (issue 41).

A reader that asks entry by entry (BookKeeper's ``readEntries`` over v2 or v3, one request an
entry) sends thousands of requests a second. Handing each one to the read executor on its own
cost more than the read itself (a profile of 100,000 single reads: a quarter of the bookie's
time in ``ThreadPoolExecutor.submit``, its futures and the worker's wake-up). Here a read
waits in a queue; each executor job takes every read queued when it starts, serves them in
order, and answers them all with one wake-up of the loop.

Invariants:
    RQ1. At most ``jobs`` jobs run at once (the read threads), each with at most ``batch``
        reads: a read never waits for more than the reads ahead of it, and an idle bookie
        starts a job in the same loop turn, so a lone read costs what it cost before. The
        job starts at the turn's end, with every read begun in it.
    RQ2. Each read gets its own outcome: its bytes, None (not stored), or its own exception;
        one failing read fails no other.
    RQ3. Reads of one ledger's ascending entries, each at most STRIDE_MAX ids past the
        one before, taken by one job are read as one list (``get_listed``): one index
        iteration over their span, and one file read where they lie together. A striped
        ledger's bookie is asked every E-th id or so (issue 41: at 3/2/2 every third),
        which consecutive runs alone never caught.
    RQ4. A group (``ReadGroup``, the listener's plain reads of one begin) is answered once,
        with every read's outcome in the order asked, when its last read lands; a
        cancelled group is never answered.
    RQ5. A cancelled read leaves the queue by the end of the loop turn it was cancelled
        in (a cancelled group's reads, a read whose future was cancelled), unread: the
        listener frees a lost connection's budget at once (PB5), so reads kept queued
        for it would let a client that sends reads and disconnects, over and over, grow
        the queue without bound (issue 53). What a lost connection still costs is what
        jobs already took: at most ``jobs`` x ``batch`` reads.
    RQ6. A group's ``allowance`` (api/server/bk_budget.py PB7) bounds what each of its reads
        holds: an entry larger than it lands as ``Oversize(size)``, its bytes not kept
        (entrylog/run_reader.py RR4), and the group counts it in ``resized``. A run (RQ3)
        joins only reads of one allowance. A read by future may have a limit of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable

from entrylog.format import Oversize

__all__ = ["BATCH_MAX", "STRIDE_MAX", "Oversize", "ReadGroup", "ReadQueue"]

#: RQ1: the most reads one job takes.
BATCH_MAX = 256
#: RQ3: the most ids one read of a run may be past the one before it. The index iteration
#: reads every id this bookie holds in the run's span, so a wider stride reads more that
#: was not asked for: 8 covers ensembles up to 8 read in order.
STRIDE_MAX = 8

#: (ledger id, entry id, the future or group it lands in, its index in the group or the
#: future's limit, RQ6).
Read = tuple


class ReadGroup:
    """Reads begun together whose outcomes are wanted together (RQ4): one callback for
    all of them, not a future and a loop callback each (issue 41: the listener's single
    reads cost more in those than in the read itself)."""

    __slots__ = ("outcomes", "left", "answer", "cancelled", "on_cancel", "allowance",
                 "resized")

    def __init__(self, size: int, answer: Callable[["ReadGroup"], None],
                 allowance: int = 0) -> None:
        self.outcomes: list = [None] * size  # bytes, None, Oversize or an exception
        self.left = size
        self.answer = answer
        self.cancelled = False
        self.on_cancel: Callable[[], None] | None = None  # the queue's RQ5 purge
        self.allowance = allowance  # RQ6: 0 for none
        self.resized = 0  # RQ6: outcomes that are Oversize

    def landed(self, index: int, outcome) -> bool:
        """Whether this was the group's last read: then ``finish`` is due."""
        self.outcomes[index] = outcome
        if outcome.__class__ is Oversize:
            self.resized += 1
        self.left -= 1
        return not self.left

    def finish(self) -> None:
        """A loop callback of its own: what the answer does (begin more reads, fail) is
        not within the read queue's."""
        if not self.cancelled:
            self.answer(self)

    def cancel(self) -> None:
        self.cancelled = True
        if self.on_cancel is not None:
            self.on_cancel()


def _limit(read: Read) -> int:
    """RQ6: a group's allowance, or the limit a future's read was asked with."""
    sink = read[2]
    return sink.allowance if sink.__class__ is ReadGroup else read[3]


def _cancelled(sink) -> bool:
    if sink.__class__ is ReadGroup:
        return sink.cancelled
    return sink.cancelled()


_BYTES = (bytes, bytearray, memoryview)


class ReadQueue:
    """Reads of stored entries for the loop, served on ``executor`` in batches."""

    def __init__(self, loop: asyncio.AbstractEventLoop, executor: concurrent.futures.Executor,
                 get_entry: Callable[[int, int], bytes | None],
                 get_listed: Callable[[int, list[int], int], list],
                 max_bytes: int, jobs: int = 2, batch: int = BATCH_MAX,
                 stats=None) -> None:
        self._loop = loop
        self._executor = executor
        self._get_entry = get_entry
        self._get_listed = get_listed
        self._jobs_max = jobs
        self._batch = batch
        self._max_bytes = max_bytes
        self._queued: list[Read] = []
        self._jobs = 0
        self._start_soon = False  # a _start_queued is scheduled
        self._purge_soon = False  # a _purge is scheduled (RQ5)
        self.stats = stats  # bookie/stats.py: read_bytes of the bytes answered

    def __len__(self) -> int:
        """Reads queued, not yet taken by a job."""
        return len(self._queued)

    def read(self, ledger_id: int, entry_id: int, limit: int = 0) -> asyncio.Future:
        """A future of the entry's bytes, or None if it is not stored (with a ``limit``,
        RQ6: Oversize for an entry larger)."""
        future = self._loop.create_future()
        self._queued.append((ledger_id, entry_id, future, limit))  # a future's index: its limit
        future.add_done_callback(self._cancelled_future)
        self._wanted()
        return future

    def read_group(self, reads: list[Read]) -> None:
        """Queue ``reads``, each (ledger id, entry id, its ReadGroup, its index) (RQ4)."""
        if reads:
            reads[0][2].on_cancel = self._purge_later
        self._queued.extend(reads)
        self._wanted()

    def _cancelled_future(self, future: asyncio.Future) -> None:
        if future.cancelled():
            self._purge_later()

    def _purge_later(self) -> None:
        """RQ5, once a loop turn however many cancel in it (a lost connection's groups)."""
        if not self._purge_soon:
            self._purge_soon = True
            self._loop.call_soon(self._purge)

    def _purge(self) -> None:
        self._purge_soon = False
        self._queued = [read for read in self._queued if not _cancelled(read[2])]

    def _wanted(self) -> None:
        if self._jobs < self._jobs_max and not self._start_soon:
            # RQ1: at the end of this loop turn, not now, so that the reads begun in the
            # same turn (a slice of requests, or those whose slots the last job's answers
            # freed) go as one job, not the first alone and the rest after it.
            self._start_soon = True
            self._loop.call_soon(self._start_queued)

    def _start_queued(self) -> None:
        self._start_soon = False
        while self._queued and self._jobs < self._jobs_max:
            self._start()

    def _start(self) -> None:
        taken, self._queued = self._queued[:self._batch], self._queued[self._batch:]
        self._jobs += 1
        job = self._executor.submit(self._serve, taken)
        job.add_done_callback(
            lambda done: self._loop.call_soon_threadsafe(self._answer, taken, done))

    def _serve(self, taken: list[Read]) -> list:
        """On a read thread: each read's bytes, None, or exception (RQ2), in order."""
        outcomes: list = []
        start = 0
        while start < len(taken):
            ledger_id, previous, sink = taken[start][0], taken[start][1], taken[start][2]
            limit = _limit(taken[start])  # RQ6
            end = start + 1
            while end < len(taken) and taken[end][0] == ledger_id and \
                    0 < taken[end][1] - previous <= STRIDE_MAX and \
                    (taken[end][2] is sink or _limit(taken[end]) == limit):
                previous = taken[end][1]
                end += 1
            outcomes.extend(self._serve_run(ledger_id, [r[1] for r in taken[start:end]],
                                            limit))
            start = end
        return outcomes

    def _serve_run(self, ledger_id: int, entry_ids: list[int], limit: int) -> list:
        found: list = []
        if len(entry_ids) > 1:  # RQ3
            try:
                found = self._get_listed(ledger_id, entry_ids, self._max_bytes, limit)
            except Exception:  # noqa: BLE001 - each read below gets its own outcome (RQ2)
                found = []
        outcomes: list = list(found)  # a prefix: it stops at the byte bound
        for entry_id in entry_ids[len(found):]:
            try:
                outcomes.append(self._get_entry(ledger_id, entry_id, limit))
            except Exception as error:  # noqa: BLE001 - RQ2: this read's own outcome
                outcomes.append(error)
        return outcomes

    def _answer(self, taken: list[Read], done: concurrent.futures.Future) -> None:
        self._jobs -= 1
        error = done.exception()
        outcomes = done.result() if error is None else [error] * len(taken)
        if self.stats is not None:
            self.stats.read_bytes += sum(len(outcome) for outcome in outcomes
                                         if outcome.__class__ in _BYTES)
        for (_, _, sink, index), outcome in zip(taken, outcomes):
            if sink.__class__ is ReadGroup:
                if sink.landed(index, outcome):
                    self._loop.call_soon(sink.finish)
            elif sink.done():
                continue  # its requester went away
            elif isinstance(outcome, BaseException):
                sink.set_exception(outcome)
            else:
                sink.set_result(outcome)
        if not self._start_soon:  # after the answers' callbacks, which may read more (RQ1)
            self._start_soon = True
            self._loop.call_soon(self._start_queued)
