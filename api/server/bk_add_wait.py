"""Adds that wait on ``bookie_port`` instead of being refused (issue 57): the connection's
side of bookie/node/add_room.py. docs/bookkeeper-protocol.md §5 and §8.

A decoded slice's adds are begun only when the bookie has room for their bytes (AR1) and
the connection has slots for them under ``bookie_max_pending_adds``. Otherwise they are
held: decoded, not begun, in the order they came, and the connection decodes nothing more
and stops reading, so the rest stays in the kernel's socket buffers and TCP pushes back on
the client, as BookKeeper's bookie blocks on its journal's queue.

Invariants:
    AW1. A connection's adds are begun in the order they arrived: while any is held, every
         later add is held behind it, and nothing more of the connection is decoded.
    AW2. Held adds are let go when the bookie says there is room (add_room.py AR2) or, for
         the pending bound, when one of the connection's own adds is answered; never later
         than ``bookie_add_wait_ms`` after any of them last went (a connection that goes
         on making progress is never refused): then every held add is answered
         ETOOMANYREQUESTS, counted and logged as a refusal, and nothing of it is stored.
    AW3. Held bytes count in the port's request bytes (bk_budget.py PB3) until they are
         begun, refused or dropped, so a waiting connection holds no more than its last
         decoded slice beyond the budget.
    AW4. A lost connection's held adds are dropped, never begun (no answer can reach it),
         and its place in the bookie's queue goes to the next; a closing listener answers
         them at once (bk_listener.py BL3), so that its drain does not wait for them.
"""

from __future__ import annotations

import asyncio

from api.server.bk_timing import now
from bookie.errors import TooManyRequests, Unavailable


class AddWait:
    """The held adds of one ``bk_listener.BkConnection`` (a mixin, as bk_adds.AddPath).
    Uses the connection's ``ops``, ``listener``, ``pending_adds``, ``budget``, ``inbox``,
    ``_begin_adds``, ``_send_all``, ``_record``, ``_flow``, ``_decode_slice``."""

    def _init_add_wait(self) -> None:
        self.held: list[tuple] = []
        self.held_bytes = 0
        self.held_for_room = False  # waiting in the bookie's queue, not for its own slots
        self.held_timer: asyncio.TimerHandle | None = None
        self.held_times = (0.0, 0.0)  # the oldest held add's slice (bk_timing.py BT2)

    def _begin_or_hold(self, adds: list[tuple], fresh: bool = True) -> None:
        """Begin what may be begun of ``adds`` now (AW1), hold the rest (``fresh``: they
        were just decoded, so a hold counts them in bookie_bk_adds_waited)."""
        if self.held:
            self._hold(adds, self.held_for_room, fresh)
            return
        slots = self.listener.max_pending_adds - self.pending_adds
        if slots <= 0:
            self._hold(adds, False, fresh)
            return
        go, rest = (adds, None) if len(adds) <= slots else (adds[:slots], adds[slots:])
        sizes = [len(add[2]) for add in go]
        fit = self.ops.bookie.enter_room_for(self, sizes, sum(sizes))
        if fit < len(go):  # AR1: the rest waits for room, in this connection's place
            if fit:
                self._begin_adds(go[:fit])
            self._hold(adds[fit:], True, fresh)
            return
        self._begin_adds(go)
        if rest:
            self._hold(rest, False, fresh)

    def _hold(self, adds: list[tuple], for_room: bool, fresh: bool) -> None:
        size = sum(len(add[2]) for add in adds)
        if not self.held:
            self.held_times = self.slice_at
        if self.held_timer is None:
            self._arm_held_timer()
        if fresh:
            self.budget.adds_waited_total += len(adds)
        self.held.extend(adds)
        self.held_bytes += size
        self.budget.adds_held += len(adds)
        self.budget.hold(size)  # AW3
        self.held_for_room = for_room
        self.idle.clear()
        self._flow()

    def _arm_held_timer(self) -> None:
        wait_s = self.ops.bookie.config.bookie_add_wait_ms / 1000
        self.held_timer = asyncio.get_running_loop().call_later(wait_s, self._held_late)

    def _stop_held_timer(self) -> None:
        if self.held_timer is not None:
            self.held_timer.cancel()
            self.held_timer = None

    def _take_held(self) -> list[tuple]:
        held, self.held = self.held, []
        self.budget.release(self.held_bytes)
        self.budget.adds_held -= len(held)
        self.held_bytes = 0
        return held

    def room_freed(self) -> bool:
        """add_room.py's waiter: True once this connection no longer waits for room."""
        if not self.held or not self.held_for_room or self.transport is None \
                or self.transport.is_closing():
            return True
        self._let_go()
        return not (self.held and self.held_for_room)

    def _own_slot_freed(self) -> None:
        """One of this connection's adds was answered: held adds may have a slot (AW2)."""
        if self.held and not self.held_for_room:
            self._let_go()

    def _let_go(self) -> None:
        """Begin what the held adds may begin now. AW2's clock runs from the last time any
        of them went: a connection that goes on making progress is never refused."""
        times, self.slice_at = self.slice_at, self.held_times  # answers timed from arrival
        before = len(self.held)
        try:
            self._begin_or_hold(self._take_held(), fresh=False)
        finally:
            self.slice_at = times
        if len(self.held) < before:
            self._stop_held_timer()
            if self.held:
                self._arm_held_timer()
        if not self.held:
            self._decode_more()

    def _decode_more(self) -> None:
        if self.inbox:
            asyncio.get_running_loop().call_soon(self._decode_slice)
        self._flow()

    def _held_late(self) -> None:
        """AW2: no held add went for ``bookie_add_wait_ms``: refuse every held add."""
        self.held_timer = None
        if not self.held:
            return
        why = self.ops.bookie.room_for(self.held_bytes) if self.held_for_room else None
        waited = self.ops.bookie.config.bookie_add_wait_ms
        self._answer_held(TooManyRequests(
            f"{why or 'too many adds in flight on this connection'}: waited {waited} ms"))
        self._decode_more()

    def _answer_held(self, error: Exception) -> None:
        if self.held_for_room:
            self.ops.bookie.leave_room(self)
        self._stop_held_timer()
        times = self.held_times
        held = self._take_held()
        self.ops.refused("ADD_ENTRY", error, self.peer, len(held))
        reply = self._reply
        self._send_all([reply(add, error) for add in held])
        self._record(error, len(held), times, now())
        if self.in_flight == 0 and not self.inbox:
            self.idle.set()

    def refuse_held(self) -> None:
        """AW4: the listener is closing; answer what waits rather than begin it."""
        if self.held:
            self._answer_held(Unavailable("the bookie is shutting down"))

    def _drop_held(self) -> None:
        """AW4: the connection is gone."""
        if self.held_for_room:
            self.ops.bookie.leave_room(self)
        self._stop_held_timer()
        self._take_held()
