"""The listener's add path (docs/bookkeeper-protocol.md §5a; BK5, split from
bk_listener.py): adds arrive decoded from a slice of frames, are begun together after it,
and each is answered in the protocol it came in, from its journal future's callback.

Invariants (bk_listener.py BL1, bk_ops.py BK1/BK5):
    AP1. An add is answered exactly once: EOK once its record is durable (or queued, for
         deferred sync), else the status of the error that refused it; every non-EOK answer
         is counted as a refusal.
    AP2. Adds beyond ``max_pending_adds`` on a connection, or that find no room in the
         journal queue or the write cache, wait (bk_add_wait.py AW1-AW4); only a wait
         past ``bookie_add_wait_ms`` is answered ETOOMANYREQUESTS, storing nothing.
    AP3. Every answer is counted in ADD_ENTRY_REQUEST by outcome (bk_timing.py BT1/BT2),
         and in ADD_ENTRY when it was begun; a run answered together is recorded once,
         weighted by its size, from one clock read (bookie/op_stats.py OS1).
"""

from __future__ import annotations

import asyncio
import struct

from api.bkproto import v2, v3, v3_add
from api.bkproto.status import v2_code, v3_status
from api.server.bk_add_wait import AddWait
from api.server.bk_ops import ADD_FLAG_RECOVERY, DEFERRED_SYNC, unexpected
from api.server.bk_timing import now, refused as refused_early
from bookie.errors import BadRequest, IOFailure
from bookie.node import NOT_NOW

_V3_OK = v3.STATUS["EOK"]
#: A v2 add's answer in one pack (v2.encode_response's bytes: a unit test checks it): the
#: frame's length, the header word of each version a client sends, rc, the ids.
_V2_ADD_ANSWER = struct.Struct(">iIiqq").pack
_V2_ANSWER_LENGTH = v2.RESPONSE_HEADERS_SIZE
_V2_ADD_HEADERS = {version: v2.pack_header(version, v2.ADDENTRY) for version in (0, 1, 2)}


class AddPath(AddWait):
    """The add half of ``bk_listener.BkConnection`` (a mixin: the hot path calls its
    methods on the connection itself, with no extra hop). Uses the connection's ``ops``,
    ``listener``, ``peer``, ``arrived``, ``pending_adds``, ``in_flight``, ``idle``,
    ``_send``, ``_send_all``, ``_flow``, ``_finished``, ``slice_at`` and ``op_stats``."""

    # An arrived add is a plain tuple (one per add on the hot path): ledger id, entry id,
    # entry, master key, recovery, deferred sync, and whom to answer: the v3 request's
    # header bytes, or the v2 request's protocol version (an int). See _reply.

    def _v3_plain_add(self, add: v3_add.PlainAdd) -> None:
        header, ledger_id, entry_id, key, body, write_flags, recovery = add
        self.arrived.append((ledger_id, entry_id, body, key, recovery,
                             bool(write_flags & DEFERRED_SYNC), header))

    def _v2_add(self, request: v2.Request) -> None:
        self.arrived.append((request.ledger_id, request.entry_id, request.body,
                             request.master_key, request.recovery, False, request.version))

    def _v3_add(self, request) -> None:
        """A v3 add that took protobuf's path (any layout the hot path does not read)."""
        add = request.addRequest
        refused = self.ops.v3_version_refused(request, "ADD_ENTRY", self.peer,
                                              self.slice_at[0])  # BK6
        if refused is not None:
            self._send(refused)
            return
        if not request.HasField("addRequest"):
            self.ops.refused("ADD_ENTRY", BadRequest("ADD_ENTRY without its addRequest"),
                             self.peer)
            refused_early(self.op_stats, "ADD_ENTRY", self.slice_at[0])
            self._send(v3.frame(self.ops.v3_response(request, v3.STATUS["EBADREQ"])))
            return
        self._v3_plain_add(v3_add.PlainAdd(
            request.header.SerializeToString(), add.ledgerId, add.entryId, add.masterKey,
            add.body, add.writeFlags, add.HasField("flag") and add.flag == ADD_FLAG_RECOVERY))

    @staticmethod
    def _reply(add: tuple, error: Exception | None) -> bytes:
        """The answer to an arrived add, in the protocol it came in."""
        reply_to = add[6]
        if reply_to.__class__ is bytes:  # v3: the request's header
            return v3_add.encode_add_response(
                reply_to, _V3_OK if error is None else v3_status(error), add[0], add[1])
        header = _V2_ADD_HEADERS.get(reply_to)
        if header is None:  # another version than BookKeeper's clients send: the encoder
            return v2.encode_response(reply_to, v2.ADDENTRY, v2_code(error), add[0], add[1])
        return _V2_ADD_ANSWER(_V2_ANSWER_LENGTH, header, 0 if error is None else v2_code(error),
                              add[0], add[1])

    def _begin_arrived(self) -> None:
        """The adds of one decoded slice: begun now, or held while they wait (AP2)."""
        if self.arrived:
            arrived, self.arrived = self.arrived, []
            self._begin_or_hold(arrived)

    def _begin_adds(self, arrived: list) -> None:
        """BK5: adds that have room, begun together: those of one ledger (same key and
        flags) as one run, one admission and one journal item; recovery adds, lone adds
        and runs that must go one by one each alone. Every add keeps its own answer."""
        runs: dict[tuple, list] = {}
        for add in arrived:
            if add[4]:  # recovery
                self._add_one(add)
            else:
                runs.setdefault((add[0], add[3], add[5]), []).append(add)
        for (ledger_id, key, deferred), adds in runs.items():
            if len(adds) == 1:
                for add in adds:
                    self._add_one(add)
                continue
            try:
                outcome = self.ops.begin_add_run(ledger_id, [(a[1], a[2]) for a in adds], key,
                                                 deferred)
            except Exception:  # noqa: BLE001 - refused whole, stored nothing: one by one
                outcome = NOT_NOW
            if outcome is NOT_NOW:
                for add in adds:
                    self._add_one(add)
            elif outcome is None:  # deferred sync: acknowledged once queued
                for add in adds:
                    self._send(self._reply(add, None))
                self._record(None, len(adds), self.slice_at, now())
            else:
                self._track(outcome, adds)

    def _add_one(self, add) -> None:
        """BK5 for one add (AP2 gave it its slot and room): begin it and answer from its
        durable future's callback (a task only when it must read first)."""
        ledger_id, entry_id, data, key, recovery, deferred, _ = add
        try:
            outcome = self.ops.begin_add(ledger_id, entry_id, data, key, recovery, deferred)
        except Exception as exc:  # noqa: BLE001 - a refused add is an answer (BK1)
            unexpected("add", exc)
            self.ops.refused("ADD_ENTRY", exc, self.peer)
            self._record(exc, 1, self.slice_at, now())
            self._send(self._reply(add, exc))
            return
        if outcome is None:  # deferred sync: acknowledged once queued
            self._record(None, 1, self.slice_at, now())
            self._send(self._reply(add, None))
            return
        if not isinstance(outcome, asyncio.Future):
            outcome = asyncio.ensure_future(outcome)
        self._track(outcome, [add])

    def _track(self, future: asyncio.Future, adds: list) -> None:
        self.in_flight += len(adds)
        self.pending_adds += len(adds)
        self.idle.clear()
        times = self.slice_at
        future.add_done_callback(lambda done: self._added(done, adds, times))
        self._flow()

    def _added(self, done: asyncio.Future, adds: list, times: tuple) -> None:
        error = None
        if done.cancelled():
            error = IOFailure("the add was cancelled (shutting down)")
        elif done.exception() is not None:
            error = done.exception()
            unexpected("add", error)
        if error is not None:  # one test per run: EOK runs pay nothing more (BK1)
            self.ops.refused("ADD_ENTRY", error, self.peer, len(adds))
        self.pending_adds -= len(adds)
        reply = self._reply
        self._send(b"".join([reply(add, error) for add in adds]))  # one outbox item a run
        self._record(error, len(adds), times, now())
        if self.held:
            self._own_slot_freed()  # bk_add_wait.py AW2
        self._finished(None, len(adds))

    def _record(self, error, count: int, times: tuple, at: float) -> None:
        """AP3: ``count`` adds of the slice ``times`` (arrived, begun) answered at ``at``."""
        stats = self.op_stats
        if error is None:
            stats.ADD_ENTRY_REQUEST.ok.observe(at - times[0], count)
            stats.ADD_ENTRY.ok.observe(at - times[1], count)
        else:
            stats.ADD_ENTRY_REQUEST.failed.observe(at - times[0], count)
            stats.ADD_ENTRY.failed.observe(at - times[1], count)
