"""The listener's plain reads (BK7, docs/bookkeeper-protocol.md §5a): a READ_ENTRY that
neither fences nor polls, over v2 or v3, begun in the listener's own callback and answered
from its read's future's, with no task and, over v3, no protobuf message (v3_read.py).

A reader that asks entry by entry sends a request per entry; a task, three coroutines and,
over v3, protobuf's objects per request cost the bookie's one core more than the read.

Invariants (bk_requests.py PB1/PB2/PB5, bk_ops.py BK1, bk_timing.py BT1/BT2):
    PRD1. A plain read is a READ: it begins only when the port's budget has room, and
         counts in PB1 until answered; else it waits in the connection's deferred queue,
         as every read does, and is begun from there the same way, with no task.
    PRD2. Its answer is what the whole path (``BkOperations.v2``/``v3``) answers for the
         same request, byte for byte: the entry, and over v3 the ledger's LAC read after
         it (maxLAC); for an error its status alone, counted and logged as a refusal and
         in READ_ENTRY's stats as failed.
    PRD3. A read whose connection is lost is cancelled (PB5): the read queue skips it, and
         it is counted done with no answer.
"""

from __future__ import annotations

import asyncio
import functools

from api.bkproto import v2, v3_read
from api.bkproto.status import v2_code, v3_status
from api.server import bk_timing
from api.server.bk_ops import unexpected
from api.server.bk_requests import PLAIN, READ
from bookie.node.reads import stored


class ReadPath:
    """The plain-read half of ``bk_listener.BkConnection`` (a mixin, as ``AddPath``).
    Uses the connection's ``ops``, ``cancellable``, ``peer``, ``slice_at``, ``op_stats``,
    ``_request`` and ``_count_done``. ``reply_to`` is a v3 request's header bytes or a v2
    request's version."""

    def _plain_read(self, ledger_id: int, entry_id: int, reply_to) -> None:
        """Begin one plain read when the budget has room, else keep it until it has (PRD1)."""
        self._request(PLAIN, functools.partial(self._begin_plain, ledger_id, entry_id,
                                               reply_to, self.slice_at[0]))

    def _begin_plain(self, ledger_id: int, entry_id: int, reply_to, arrived: float) -> None:
        """PRD1: counted begun by the caller. Its answer is made in a callback of the loop,
        never within this call: a begin that answered at once would end a request (and
        begin what waits for its slot) inside the loop that begins them."""
        asked = (ledger_id, entry_id, reply_to, arrived, bk_timing.now())
        loop = asyncio.get_running_loop()
        try:
            read = self.ops.bookie.begin_read(ledger_id, entry_id)
        except Exception as exc:  # noqa: BLE001 - every outcome is an answer (BK1)
            loop.call_soon(self._read_answer, asked, None, exc)
            return
        data = read[2]
        if isinstance(data, asyncio.Future):
            self.cancellable.add(data)  # PRD3
            data.add_done_callback(lambda done: self._read_landed(done, asked, read))
        else:  # the write cache's
            loop.call_soon(self._read_answer, asked, read, None)

    def _read_landed(self, done: asyncio.Future, asked: tuple, read: tuple) -> None:
        self.cancellable.discard(done)
        if done.cancelled():  # PRD3: its connection is gone
            self._count_done(READ, None)
            return
        error = done.exception()
        self._read_answer(asked, None if error else (read[0], read[1], done.result()), error)

    def _read_answer(self, asked: tuple, read: tuple | None, error) -> None:
        """PRD2: ``read`` is (ledger id, entry id read, bytes or None) when no error came."""
        ledger_id, entry_id, reply_to, arrived, begun = asked
        v3_answer = reply_to.__class__ is bytes
        data = lac = None
        if error is None:
            try:
                data = stored(*read)
                if v3_answer:
                    lac = self.ops.bookie.lac_now(ledger_id)
            except Exception as exc:  # noqa: BLE001 - every outcome is an answer (BK1)
                error = exc
        if error is not None:
            unexpected("READ_ENTRY", error)
            self.ops.refused("READ_ENTRY", error, self.peer)
            data = lac = None
        bk_timing.answered(self.op_stats, "READ_ENTRY", error is None, arrived, begun)
        if v3_answer:
            answer = v3_read.encode_read_response(reply_to, v3_status(error), ledger_id,
                                                  entry_id, data, lac)
        else:
            answer = v2.encode_response(reply_to, v2.READENTRY, v2_code(error), ledger_id,
                                        entry_id, b"" if data is None else data)
        self._count_done(READ, answer)
