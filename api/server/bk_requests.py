"""The listener's requests other than adds (docs/bookkeeper-protocol.md §8): each is a kind,
begun when the port's budget has room for it (api/server/bk_budget.py PB1, PB2, PB4),
answered from its task, and cancelled with its connection when it changes nothing (PB5).

Kinds:
    READ    reads that change nothing: entries, batches, READ_LAC, the entry list, the
            bookie's info. Counted in PB1; cancelled when the connection is lost.
            PLAINS is a group of plain reads (READs), begun by a call, not a task, as
            many at once as PB1 has room for (bk_reads.py).
    CHANGE  requests whose effect must be whole once begun: fencing reads, WRITE_LAC,
            FORCE_LEDGER, AUTH, START_TLS. Counted in PB1; never cancelled.
    POLL    long polls (a READ_ENTRY with previousLAC and a timeout). Counted in PB4 only:
            a tailing client holds one per ledger for up to its timeout, which must not
            take the slots of its reads. Cancelled when the connection is lost.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging

from api.bkproto import v2, v3
from api.server import bk_timing
from api.server.bk_room import ROOM, TaskRoom
from bookie.errors import TooManyRequests

log = logging.getLogger("bookie.bkproto")

READ, CHANGE, POLL = "read", "change", "poll"
#: READs begun by a call, not a task, as a group: the listener's plain reads (bk_reads.py).
PLAINS = "plains"
#: Plain reads whose entry was larger than their allowance (bk_budget.py PB7), waiting
#: first in the queue to be read again at their size (bk_reads.py PRD5).
RESIZED = "resized"
#: A v2 batch read that does not fence: a READ whose reservation cuts its maxSize (PRD6).
BATCH = "batch"
_OP = v3.OPERATIONS
_READ_ONLY_V3 = {_OP["READ_LAC"], _OP["GET_BOOKIE_INFO"], _OP["GET_LIST_OF_ENTRIES_OF_LEDGER"]}
_ENTRY_V3 = {_OP["READ_ENTRY"], _OP["READ_LAC"]}
_FENCE = 1  # ReadRequest.Flag.FENCE_LEDGER
_TOO_MANY = v3.STATUS["ETOOMANYREQUESTS"]
#: How often connections waiting on PB2's bound for the whole port look again.
ANSWERS_RECHECK_S = 0.05


def v3_kind(request) -> str:
    operation = request.header.operation
    if operation == _OP["READ_ENTRY"] and request.HasField("readRequest"):
        read = request.readRequest
        if read.HasField("flag") and read.flag == _FENCE:
            return CHANGE
        if read.HasField("previousLAC") and read.HasField("timeOut") and read.timeOut > 0:
            return POLL
        return READ
    return READ if operation in _READ_ONLY_V3 else CHANGE


def _reads_entry(request) -> bool:
    """Whether a request's answer may carry an entry (bk_room.py TR1)."""
    if request.__class__ is v2.Request:
        return request.opcode == v2.READENTRY
    return request.header.operation in _ENTRY_V3


def v2_kind(request: v2.Request) -> str:
    return CHANGE if request.fencing or request.opcode == v2.AUTH else READ


class RequestPath:
    """The non-add half of ``bk_listener.BkConnection`` (a mixin, as ``bk_adds.AddPath``).
    Uses the connection's ``budget``, ``ops``, ``peer``, ``transport``, ``in_flight``,
    ``idle``, ``writing_paused``, ``_send``, ``_flow`` and ``_finished``."""

    def _init_requests(self) -> None:
        self.deferred: collections.deque = collections.deque()  # (kind, make): PB1/PB2
        self.requests_in_progress = 0
        self.polls = 0
        self.cancellable: set[asyncio.Task] = set()
        self.charged_answers = 0  # PB2: this connection's part of budget.answer_bytes

    def _request(self, kind: str, make, request=None) -> None:
        """Begin the request ``make()`` makes when the budget has room, else keep it (PB1,
        PB2); a long poll (``request``, v3) over PB4 is answered ETOOMANYREQUESTS. For
        PLAINS ``make`` is the list of reads."""
        if kind != PLAINS and self.plain_arrived:
            self._begin_plain_arrived()  # bk_reads.py PRD4: they came first
        if kind == POLL:
            if self.polls >= self.budget.limits.polls_per_connection:
                self.ops.refused("READ_ENTRY", TooManyRequests(
                    f"{self.polls} long polls wait on this connection already"), self.peer)
                bk_timing.refused(self.op_stats, "READ_ENTRY_LONG_POLL", self.slice_at[0])
                self._send(self._poll_refused(request))
            else:
                self._begin(kind, make)
            return
        if self.deferred or not self.budget.may_begin(self):
            self._defer(kind, make)
            return
        if kind == PLAINS:
            rest = self._begin_plains(make)  # answered from a callback, never within
            if rest:
                self._defer(PLAINS, rest)
            self._flow()
            return
        self._begin(kind, make)

    def _defer(self, kind: str, make) -> None:
        self.deferred.append((kind, make))  # never RESIZED: bk_reads.py puts those first
        self.budget.deferred_total += len(make) if kind == PLAINS else 1
        self._wait_for_budget()

    def _begin(self, kind: str, make) -> None:
        self._count_begun(kind)
        if kind == BATCH:
            self._begin_batch(*make)  # bk_reads.py PRD6
            return
        room = None
        if kind != POLL and _reads_entry(make.args[0]):  # bk_room.py TR1
            room = TaskRoom(self)
            token = ROOM.set(room)  # the task's context is a copy of this one
        task = asyncio.get_running_loop().create_task(make())
        if room is not None:
            ROOM.reset(token)
        if kind != CHANGE:
            self.cancellable.add(task)
        task.add_done_callback(functools.partial(self._answered, kind, room))
        self._flow()

    def _count_begun(self, kind: str, count: int = 1) -> None:
        """``count`` requests of ``kind`` begin: in flight, and in PB1's or PB4's count."""
        self.in_flight += count
        self.idle.clear()
        if kind == POLL:
            self.polls += 1
        else:
            self.requests_in_progress += count
            budget = self.budget
            budget.in_progress += count
            if budget.in_progress > budget.peak_in_progress:
                budget.peak_in_progress = budget.in_progress

    def _answered(self, kind: str, room, task: asyncio.Task) -> None:
        self.cancellable.discard(task)
        if room is not None:
            room.release()  # bk_room.py TR1: its answer counts in PB2 from here
        data = None
        if not task.cancelled():
            if task.exception() is not None:  # bk_ops answers every outcome: a bug here
                log.error("BookKeeper-protocol request from %s failed: %r", self.peer,
                          task.exception())
            else:
                data = task.result()
        self._count_done(kind, data)

    def _count_done(self, kind: str, data: bytes | None) -> None:
        """A request of ``kind`` ends with the answer ``data`` (None: none can be sent);
        what waited for its slot may begin."""
        if kind == POLL:
            self.polls -= 1
        else:
            self.requests_in_progress -= 1
            self.budget.in_progress -= 1
        self._finished(data)
        if self.deferred:
            self._begin_deferred()
        if kind != POLL and self.budget.waiting:
            self.budget.wake()

    def _count_done_many(self, count: int, answers) -> None:
        """``_count_done`` for ``count`` READs ended together with ``answers`` (none when
        none can be sent)."""
        self.requests_in_progress -= count
        self.budget.in_progress -= count
        self._send_all(answers)
        self._finished(None, count)
        if self.deferred:
            self._begin_deferred()
        if self.budget.waiting:
            self.budget.wake()

    def _begin_deferred(self) -> None:
        budget, deferred = self.budget, self.deferred
        while deferred:
            if deferred[0][0] == RESIZED:
                if not self._reread(deferred[0][1]):
                    break
                deferred.popleft()
                continue
            if not budget.may_begin(self):
                break
            kind, make = deferred.popleft()
            if kind != PLAINS:
                self._begin(kind, make)
                continue
            rest = self._begin_plains(make)  # PRD1: the rest wait first in the queue
            if rest:
                deferred.appendleft((PLAINS, rest))
        if self.deferred:
            self._wait_for_budget()
        self._flow()

    def _wait_for_budget(self) -> None:
        budget = self.budget
        budget.wait(self)
        # PB6: a wait must have an event that ends it. PB2's bounds have none of their
        # own (a client that reads its answers drains a socket buffer silently), unless
        # the transport paused writing (resume_writing) or requests of this connection
        # are in progress (their ends): otherwise look again after a while.
        if budget.answer_bytes > budget.limits.answers_max or \
                (not self.writing_paused and not self.requests_in_progress):
            budget.recheck_answers(asyncio.get_running_loop(), ANSWERS_RECHECK_S)

    def _answers_written(self) -> None:
        """PB6 after a turn's answers left for the transport (``_flush``): they counted
        in ``unread_answers`` while queued, and the transport may have sent some at once,
        below its high-water mark, so that no ``resume_writing`` comes: what waits looks
        again now."""
        if self.deferred and not self.writing_paused:
            self._begin_deferred()

    def unread_answers(self) -> int:
        """PB2: answers made and not yet read by the client (the loop turn's too, which
        leave in one write at its end)."""
        transport = self.transport
        queued = 0 if transport is None or transport.is_closing() \
            else transport.get_write_buffer_size()
        return queued + self.outbox_bytes

    def _poll_refused(self, request) -> bytes:
        """PB4's answer to a long poll over the connection's share."""
        response = self.ops.v3_response(request, _TOO_MANY)
        body = response.readResponse
        body.ledgerId, body.entryId = request.readRequest.ledgerId, request.readRequest.entryId
        body.status = _TOO_MANY
        return v3.frame(response)

    def _drop_requests(self) -> None:
        """PB5: the connection is gone; no answer can reach it."""
        for kind, make in self.deferred:
            if kind == RESIZED:
                for _read, _size, room in make:
                    if room.__class__ is TaskRoom:
                        room.dropped()  # bk_room.py TR3
        self.deferred.clear()
        self._drop_plains()  # bk_reads.py PRD3
        for task in list(self.cancellable):
            task.cancel()
        self.budget.charge_answers(self, 0)
