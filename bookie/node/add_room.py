"""Room for adds in the journal queue and the write cache, and the adds that wait for it.

An add takes room in two bounded places before it is acknowledged: the journal queue
(``journal_queue_max_bytes``, freed as each group is synced) and the write cache
(``write_cache_max_bytes``, freed when a checkpoint has flushed its other half). Over HTTP a
full one is a 503 with Retry-After at once (docs/http-api.md). On ``bookie_port`` it is a
wait (issue 57): BookKeeper's client takes any refusal for a failed bookie and changes the
ensemble, while BookKeeper's own bookie blocks on its journal's queue (``journalQueueSize``)
and DbLedgerStorage waits up to ``dbStorage_maxThrottleTimeMs`` for its write cache. The
listener holds a connection's adds, not reading it, and asks here when they may go
(api/server/bk_add_wait.py).

Invariants:
    AR1. First come, first served: while anyone waits, an add that was not waiting first
         waits behind them, even where its own bytes would fit; the waiters are let go in
         the order they came, and one that still does not fit keeps the others behind it.
    AR2. Every wait is looked at again: after every journal group that synced (its bytes
         left the queue before its completion was sent to the loop: journal.py), after
         every checkpoint (the flushed half of the write cache is cleared by then), and,
         failing both, every ``ROOM_RECHECK_S`` while anyone waits. Each waiter's own
         deadline (``bookie_add_wait_ms``) ends its wait with a refusal, counted and logged
         as every refusal is.
    AR3. Asking for room changes nothing but this: a write cache whose active half would
         pass its share starts a checkpoint, which is what frees it. The answer is monotone
         in the bytes asked for and kept by admitting part of them (room for a + b is room
         for b once a is in), and an add told "room" is admitted in the same loop turn, so
         nothing else takes that room in between.
"""

from __future__ import annotations

import asyncio
import collections

from bookie.errors import TooManyRequests

#: AR2's fallback: how often waiters look at the room when no group or checkpoint said so.
ROOM_RECHECK_S = 0.05


class AddRoom:
    """Mixin of ``Bookie``: the room check every add passes, and the queue of waiters.

    A waiter is any object with ``room_freed() -> bool``: called (on the loop, oldest
    first) when room may have come; it asks ``enter_room`` again and answers True when it
    no longer waits (it went, or it is gone), False when it still waits at the head."""

    def _init_room(self) -> None:
        self._room_waiters: collections.OrderedDict = collections.OrderedDict()
        self._room_timer: asyncio.TimerHandle | None = None

    def room_for(self, size: int) -> str | None:
        """Why ``size`` bytes of adds find no room now, or None when they fit (AR3)."""
        if self.journal_queued_bytes + size > self.config.journal_queue_max_bytes:
            return "journal queue is full"
        cache, cache_max = self.storage.cache, self.config.write_cache_max_bytes
        # AR3: monotone in ``size`` and kept by admitting part of it, so a slice told "room"
        # for all its adds keeps room for each one: the active half past its share with
        # them (a checkpoint is due) and both halves past the budget with them.
        if cache.active_bytes + size > cache_max // 2:
            self.checkpoints.trigger()
            if cache.total_bytes + size > cache_max:
                return "write cache is full; a checkpoint is running"
        return None

    def _admit(self, size: int) -> None:
        """Back-pressure on every add (docs/design.md §3.1 step 3): no room is a refusal
        here; the BookKeeper-protocol listener asked ``enter_room`` first and waited."""
        why = self.room_for(size)
        if why is not None:
            raise TooManyRequests(why)

    @property
    def room_waiting(self) -> int:
        return len(self._room_waiters)

    def enter_room(self, waiter, size: int) -> bool:
        """True when ``waiter`` may admit ``size`` bytes of adds now (then it is no longer
        waiting); else it waits, in its place if it was waiting already (AR1)."""
        return self.enter_room_for(waiter, (size,), size) == 1

    def enter_room_for(self, waiter, sizes, total: int) -> int:
        """How many of the adds ``sizes`` (bytes each, ``total`` together) ``waiter`` may
        admit now, in order: all (then it no longer waits), or a first part that fits (it
        waits at the head for the rest), or none (it waits, in its place if it was waiting
        already: AR1)."""
        waiters = self._room_waiters
        if waiters and next(iter(waiters)) is not waiter:
            if waiter not in waiters:
                self._room_wait(waiter)
            return 0
        if self.room_for(total) is None:
            if waiters:
                del waiters[waiter]
            return len(sizes)
        fit, taken = 0, 0
        for size in sizes:  # the slow path: the first part that fits
            if self.room_for(taken + size) is not None:
                break
            taken += size
            fit += 1
        if waiter not in waiters:
            self._room_wait(waiter)
        return fit

    def _room_wait(self, waiter) -> None:
        self._room_waiters[waiter] = None
        if self._room_timer is None and self._loop is not None:
            self._room_timer = self._loop.call_later(ROOM_RECHECK_S, self._room_recheck)

    def leave_room(self, waiter) -> None:
        """``waiter`` waits no more (its deadline passed, or its connection is gone)."""
        if self._room_waiters.pop(waiter, 0) is None:
            self._room_freed()  # it may have been the head that kept the others behind

    def _room_recheck(self) -> None:
        self._room_timer = None
        self._room_freed()
        if self._room_waiters and self._loop is not None and not self._loop.is_closed():
            self._room_timer = self._loop.call_later(ROOM_RECHECK_S, self._room_recheck)

    def _room_freed(self) -> None:
        """AR1/AR2: let the waiters go, oldest first, until one still does not fit."""
        waiters = self._room_waiters
        while waiters:
            head = next(iter(waiters))
            if not head.room_freed():
                return
            waiters.pop(head, None)

    def _room_freed_threadsafe(self) -> None:
        """From the checkpoint thread (AR2): a look on the loop, only when anyone waits (a
        waiter that came meanwhile has the recheck timer)."""
        if self._room_waiters:
            self._call_threadsafe(self._room_freed)

    async def until_room(self, size: int, wait_s: float) -> None:
        """Wait (AR1) until ``size`` bytes of adds fit, at most ``wait_s``; then raise the
        refusal. For an add begun as a coroutine (a ledger's first touch, a re-add), whose
        room is asked only once what it had to read is read."""
        waiter = _FutureWaiter(self, size, self._loop.create_future())
        if self.enter_room(waiter, size):
            return
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), wait_s)
        except asyncio.TimeoutError:
            self.leave_room(waiter)
            raise TooManyRequests(f"{self.room_for(size) or 'no room'}: waited "
                                  f"{wait_s * 1000:.0f} ms") from None
        finally:
            if not waiter.future.done():  # cancelled: its place goes to the next
                waiter.future.cancel()
                self.leave_room(waiter)


class _FutureWaiter:
    """A coroutine's place in the queue: its future is set once its bytes fit."""

    __slots__ = ("bookie", "size", "future")

    def __init__(self, bookie: AddRoom, size: int, future: asyncio.Future) -> None:
        self.bookie, self.size, self.future = bookie, size, future

    def room_freed(self) -> bool:
        if self.future.done():
            return True
        if self.bookie.enter_room(self, self.size):
            self.future.set_result(None)
            return True
        return False
