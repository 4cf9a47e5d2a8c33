"""PB7 for the listener's reads that run as tasks (api/server/bk_budget.py PB7): a read
through the whole path (a v3 read protobuf decodes, a fencing read over v2 or v3) and
READ_LAC's last entry. The listener begins such a task with a ``TaskRoom`` in ``ROOM``
(a context variable: the task's own, copied when it is created), and ``bk_ops`` reads
its entry through ``read_entry`` here.

Invariants:
    TR1. Such a task reserves RESERVE_MIN (an entry of up to 4 KiB and its answer) before
         it begins, within its connection's room as a plain read does (may_begin), and
         holds it until its answer goes to the transport, or it ends without one.
    TR2. An entry larger than its reservation is not held: the task gives its reservation
         and its PB1 slot back, waits first in the connection's queue (RESIZED, as a
         plain read does, bk_reads.py PRD5) until a slot and the entry's size fit, then
         reads it with that size reserved. Kept in PB1 while it waits, a client that reads
         nothing would hold its slots for ever.
    TR3. A task waiting when its connection is lost goes on at once, its PB1 slot counted
         again (its end counts it done): a fence's task must finish (PB5), its answer
         dropped; a cancelled read's task ends.
A long poll's piggybacked entry (PB4, not PB1) is not bounded here.
"""

from __future__ import annotations

import asyncio
import contextvars

from api.server.bk_budget import ANSWER_HEAD, RESERVE_MIN
from entrylog.format import Oversize

#: The running task's room, None outside the listener's tasks (HTTP, polls).
ROOM: contextvars.ContextVar = contextvars.ContextVar("bk_room", default=None)


class TaskRoom:
    """One task's reservation on its connection (TR1-TR3)."""

    __slots__ = ("connection", "reserved", "future")

    def __init__(self, connection) -> None:
        self.connection = connection
        self.reserved = RESERVE_MIN
        self.future: asyncio.Future | None = None
        connection.budget.hold_reads(connection, RESERVE_MIN)

    async def wait(self, size: int) -> None:
        """TR2: until ``size`` bytes are held for this task."""
        connection = self.connection
        budget = connection.budget
        budget.release_reads(connection, self.reserved)
        self.reserved = 0
        connection.requests_in_progress -= 1
        budget.in_progress -= 1
        connection.in_flight -= 1
        budget.resized_total += 1
        self.future = asyncio.get_running_loop().create_future()
        connection._resize_one((None, size, self))
        connection._begin_deferred()
        if budget.waiting:
            budget.wake()
        await self.future

    def granted(self, size: int) -> None:
        """TR2, from the connection's queue: its PB1 slot is counted again already."""
        self.connection.budget.hold_reads(self.connection, size)
        self.reserved = size
        if not self.future.done():
            self.future.set_result(None)

    def dropped(self) -> None:
        """TR3."""
        self.connection._count_begun("read", 1)
        if not self.future.done():
            self.future.set_result(None)

    def release(self) -> None:
        self.connection.budget.release_reads(self.connection, self.reserved)
        self.reserved = 0


async def read_entry(bookie, ledger_id: int, entry_id: int):
    """``bookie.read_entry`` within the running task's room, if it has one (TR1, TR2)."""
    room = ROOM.get()
    if room is None:
        return await bookie.read_entry(ledger_id, entry_id)
    limit = room.reserved - ANSWER_HEAD
    while True:
        data = await bookie.read_entry(ledger_id, entry_id, limit)
        if data.__class__ is not Oversize:
            return data
        limit = data.size  # -1 may name a newer, larger entry by the next read
        await room.wait(limit + ANSWER_HEAD)
