"""The listener's plain reads (BK7, docs/bookkeeper-protocol.md §5a): a READ_ENTRY that
neither fences nor polls, over v2 or v3, begun with the other plain reads of its slice of
bytes as one group, with no task and, over v3, no protobuf message (v3_read.py), and
answered with them from one callback (bookie/node/read_queue.py RQ4).

A reader that asks entry by entry sends a request per entry; a task, three coroutines and,
over v3, protobuf's objects per request cost the bookie's one core more than the read. So
did a future, its loop callback and the budget's checks per read (issue 41's profile), so
the reads of a slice are begun, read and answered as a group.

Invariants (bk_requests.py PB1/PB2/PB5, bk_ops.py BK1, bk_timing.py BT1/BT2):
    PRD1. A plain read is a READ: it begins only when the port's budget has room, and
         counts in PB1 until answered; else it waits in the connection's deferred queue,
         as every read does, and is begun from there the same way, with no task. A group
         begins as many of its reads as PB1 has room for (PB2 is checked once for them:
         beginning a read answers nothing, so what PB2 counts cannot change between
         them); the rest wait, first in the queue.
    PRD2. Its answer is what the whole path (``BkOperations.v2``/``v3``) answers for the
         same request, byte for byte: the entry, and over v3 the ledger's LAC read after
         it (maxLAC); for an error its status alone, counted and logged as a refusal and
         in READ_ENTRY's stats as failed.
    PRD3. A read whose connection is lost is cancelled (PB5): its group is never
         answered, and its reads are counted done with no answer at once.
    PRD4. Requests keep their order of arrival into the budget: the plain reads decoded
         so far are begun (or queued) before any other request of the slice, and before
         its adds (as when each read began alone, at its decode).
    PRD5. A group holds its reads' reservations (bk_budget.py PB7) until it is answered
         or its connection is lost. A read that landed ``Oversize`` is not answered: it
         gives its PB1 slot back and waits first in the connection's queue (RESIZED)
         until a slot and its entry's size fit; then it is read again alone, with that
         allowance. (Kept in PB1 while waiting, a client that reads nothing would hold
         its slots for ever, and two such clients every slot of the port.)
    PRD6. A v2 batch read that neither fences (BATCH) is a READ whose reservation (PB7)
         cuts its maxSize; one whose first entry is larger lands ``Oversize`` and is
         RESIZED as a plain read is, then read again with its first entry's size.
"""

from __future__ import annotations

import asyncio
import functools

from api.bkproto import v2, v3_read
from api.bkproto.status import v2_code, v3_status
from api.server import bk_timing
from api.server.bk_budget import ANSWER_HEAD
from api.server.bk_ops import BATCH_HEAD, unexpected
from api.server.bk_requests import PLAINS, READ, RESIZED
from api.server.bk_room import TaskRoom
from bookie.node.read_queue import Oversize
from bookie.node.reads import not_stored


class ReadPath:
    """The plain-read half of ``bk_listener.BkConnection`` (a mixin, as ``AddPath``).
    Uses the connection's ``ops``, ``budget``, ``peer``, ``slice_at``, ``op_stats``,
    ``requests_in_progress``, ``_request``, ``_count_begun`` and ``_count_done_many``.
    A read is (ledger id, entry id, reply_to, arrived): ``reply_to`` is a v3 request's
    header bytes or a v2 request's version, ``arrived`` its slice's arrival (BT2)."""

    def _init_reads(self) -> None:
        self.plain_arrived: list[tuple] = []  # decoded, not yet begun (PRD4)
        self.plain_groups: dict = {}  # ReadGroup -> (reads, begun, reserved), not answered
        self.read_reserved = 0  # PB7: this connection's part of budget.read_bytes

    def _plain_read(self, ledger_id: int, entry_id: int, reply_to) -> None:
        self.plain_arrived.append((ledger_id, entry_id, reply_to, self.slice_at[0]))

    def _begin_plain_arrived(self) -> None:
        """PRD4: the slice's plain reads so far go to the budget, as one group."""
        reads = self.plain_arrived
        if reads:
            self.plain_arrived = []
            self._request(PLAINS, reads)

    def _begin_plains(self, reads: list) -> list:
        """PRD1, once the budget said a read may begin: as many of ``reads`` as PB1 has
        room for begin as one group; the rest are returned, to wait. Answered from a
        callback of the loop, never within this call."""
        limits, budget = self.budget.limits, self.budget
        room = min(limits.per_connection - self.requests_in_progress,
                   limits.max_in_progress - budget.in_progress)
        count, allowance = budget.reserve_reads(self, min(len(reads), room))  # PB7
        if len(reads) > count:
            reads, rest = reads[:count], reads[count:]
        else:
            rest = []
        self._count_begun(PLAINS, count)
        begun = bk_timing.now()
        self.plain_groups[self.ops.bookie.begin_reads(reads, self._plains_landed, allowance)] \
            = (reads, begun, count * (allowance + ANSWER_HEAD))
        return rest

    def _plains_landed(self, group) -> None:
        reads, begun, reserved = self.plain_groups.pop(group)
        budget = self.budget
        budget.release_reads(self, reserved)  # PB7: their answers count in PB2 from here
        stats = self.op_stats.pair("READ_ENTRY")
        at = bk_timing.now()
        lacs: dict = {}  # read once a ledger: nothing changes it within this callback
        if group.resized:
            answers = self._resize(reads, group.outcomes, begun, at, stats, lacs)
        else:
            answers = [self._plain_answer(read, outcome, begun, at, stats, lacs)
                       for read, outcome in zip(reads, group.outcomes)]
        self._count_done_many(len(reads), answers)
        budget.charge_answers(self, self.unread_answers())

    def _resize(self, reads: list, outcomes: list, begun: float, at: float, stats: tuple,
                lacs: dict) -> list:
        """PRD5: the answers of a group some of whose reads landed Oversize; those wait
        first in the queue, out of PB1, to be read again at their size."""
        answers, resized = [], []
        for read, outcome in zip(reads, outcomes):
            if outcome.__class__ is Oversize:
                resized.append((read, outcome.size, begun))
            else:
                answers.append(self._plain_answer(read, outcome, begun, at, stats, lacs))
        self.budget.resized_total += len(resized)
        deferred = self.deferred
        if deferred and deferred[0][0] == RESIZED:
            deferred[0][1].extend(resized)
        else:
            deferred.appendleft((RESIZED, resized))
        return answers

    def _reread(self, resized: list) -> bool:
        """PRD5: read again, alone, each of ``resized`` whose size fits now (PB7), in
        order; whether none is left."""
        budget = self.budget
        limits = budget.limits
        while resized:
            read, size, begun = resized[0]
            if self.requests_in_progress >= limits.per_connection \
                    or budget.in_progress >= limits.max_in_progress \
                    or not budget.reread_fits(self, size + ANSWER_HEAD):  # PB1, PB7
                return False
            del resized[0]
            self._count_begun(PLAINS, 1)
            if begun is None:  # PRD6: a batch, (request, arrived)
                self._begin_batch(read[0], read[1], size + ANSWER_HEAD)
                continue
            if begun.__class__ is TaskRoom:  # bk_room.py TR2: size counts its answer's head
                begun.granted(size)
                continue
            budget.hold_reads(self, size + ANSWER_HEAD)
            self.plain_groups[self.ops.bookie.begin_reads([read], self._plains_landed, size)] \
                = ([read], begun, size + ANSWER_HEAD)
        return True

    def _plain_answer(self, read: tuple, outcome, begun: float, at: float, stats: tuple,
                      lacs: dict) -> bytes:
        """PRD2: one read's answer, from ``outcome`` (bytes, None: not stored, or the
        exception the read raised); it names the entry id asked (-1 too), as the whole
        path's does."""
        ledger_id, entry_id, reply_to, arrived = read
        v3_answer = reply_to.__class__ is bytes
        data = lac = error = None
        if outcome is None:
            error = not_stored(ledger_id, entry_id)
        elif isinstance(outcome, BaseException):
            error = outcome
        else:
            data = outcome
            if v3_answer:
                lac = lacs.get(ledger_id)
                if lac is None:
                    try:
                        lac = self.ops.bookie.lac_now(ledger_id)
                    except Exception as exc:  # noqa: BLE001 - every outcome is an answer (BK1)
                        lac = exc
                    lacs[ledger_id] = lac
                if isinstance(lac, BaseException):
                    error, data, lac = lac, None, None
        if error is not None:
            unexpected("READ_ENTRY", error)
            self.ops.refused("READ_ENTRY", error, self.peer)
        ok = error is None
        stats[0].record(ok, at - arrived)  # BT1/BT2: READ_ENTRY_REQUEST, READ_ENTRY
        stats[1].record(ok, at - begun)
        if v3_answer:
            return v3_read.encode_read_response(reply_to, v3_status(error), ledger_id,
                                                entry_id, data, lac)
        return v2.encode_response(reply_to, v2.READENTRY, v2_code(error), ledger_id,
                                  entry_id, b"" if data is None else data)

    def _begin_batch(self, request, arrived: float, reserved: int = 0) -> None:
        """PRD6, counted in PB1 already: its reservation held (``reserved`` when it is
        read again: its first entry's answer), its maxSize cut to it, its task begun."""
        first_max = None
        if reserved:
            self.budget.hold_reads(self, reserved)
        else:
            reserved = self.budget.reserve_batch(self, request.max_size)
            first_max = reserved - ANSWER_HEAD - BATCH_HEAD - 4  # its first entry's bytes
        capped = request._replace(max_size=min(request.max_size, reserved - ANSWER_HEAD))
        task = asyncio.get_running_loop().create_task(
            self.ops.v2(capped, self.peer, arrived, first_max))
        self.cancellable.add(task)
        task.add_done_callback(functools.partial(self._batch_done, request, arrived,
                                                 reserved))
        self._flow()

    def _batch_done(self, request, arrived: float, reserved: int, task) -> None:
        self.budget.release_reads(self, reserved)  # PB7: its answer counts in PB2 next
        oversize = None if task.cancelled() or task.exception() is not None \
            else task.result()
        if oversize is None or oversize.__class__ is bytes:
            self._answered(READ, None, task)
            return
        self.cancellable.discard(task)
        self.budget.resized_total += 1
        self._resize_one(((request, arrived), oversize.size + BATCH_HEAD + 4, None))
        self._count_done(READ, None)

    def _resize_one(self, item: tuple) -> None:
        deferred = self.deferred
        if deferred and deferred[0][0] == RESIZED:
            deferred[0][1].append(item)
        else:
            deferred.appendleft((RESIZED, [item]))

    def _drop_plains(self) -> None:
        """PRD3: the connection is gone; its groups are never answered."""
        groups, self.plain_groups = self.plain_groups, {}
        self.plain_arrived = []
        for group in groups:
            group.cancel()
        # PB7: the groups' reservations; a batch's or task's comes back as its task ends.
        self.budget.release_reads(self, sum(g[2] for g in groups.values()))
        if groups:
            self._count_done_many(sum(len(reads) for reads, *_ in groups.values()), ())
