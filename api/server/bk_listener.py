"""The bookie's second listener: Apache BookKeeper's binary protocol on TCP, for
BookKeeper's own clients, tools and bookies (docs/bookkeeper-protocol.md).

Frames are an i32 length and that many bytes. A connection starts in v3 (protobuf) and
switches to v2 (packed) for good at the first frame that is not a v3 request, as
BookKeeper's ``RequestDecoder`` does; one port serves both. Each request is answered by
``bk_ops.BkOperations`` (the same ``Bookie`` calls as the HTTP routes), answers go out in
the order they complete (clients match them by txnId, or by ids in v2).

Invariants:
    BL1. Bounded memory per connection: a frame over ``max_frame`` closes the connection
         once its length is decoded, before the rest of it is collected; adds beyond
         ``max_pending_adds``, or without room in the journal queue or write cache, wait
         (bk_add_wait.py AW1-AW4); with twice that many
         requests in flight, more than INBOX_HIGH bytes read but not yet decoded, or the
         client not reading its answers (the transport's write buffer past
         bookie_connection_buffer_bytes, bk_budget.py PB2), the connection stops reading
         until they drain.
    BL2. A frame neither protocol can take closes the connection (logged with the peer):
         after garbage no later frame boundary can be trusted. Nothing of it was admitted,
         so nothing is half written.
    BL3. No request outlives the listener unanswered: on close the listener stops
         accepting and stops reading (a request read but not yet decoded is dropped, none
         is begun: a shutting-down bookie takes no new add in its idle wait), waits
         (bounded) for the requests in flight, then closes connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import struct

from api.bkproto import v2, v3, v3_add, v3_read
from api.bkproto.v2 import ProtocolError
from api.server.bk_adds import AddPath
from api.server.bk_budget import FramePath, Limits, PortBudget
from api.server.bk_ops import BkOperations
from api.server.bk_reads import ReadPath
from api.server.bk_timing import now
from api.server.bk_requests import BATCH, RequestPath, v2_kind, v3_kind
from api.server.bk_tls import SESSION_V3, ListenerTls, TlsSession, auth_v2

log = logging.getLogger("bookie.bkproto")

_I32 = struct.Struct(">i")
plain_v2_add = v2.plain_add
#: Room for a request's own fields around the largest entry (master key, ids, protobuf).
FRAME_OVERHEAD = 4096
#: BL1's "read ahead of decoding": requests read but not yet decoded, past which the
#: connection stops reading until decoding catches up.
INBOX_HIGH = 32 << 20
#: Bytes decoded per loop turn before the loop reads its sockets again (~250 1 KiB adds).
DECODE_SLICE = 256 << 10
_ADD_V3 = v3.OPERATIONS["ADD_ENTRY"]


class BkConnection(AddPath, ReadPath, RequestPath, FramePath, TlsSession, asyncio.Protocol):
    """One client connection: framing, protocol choice, pipelining and back-pressure."""

    def __init__(self, listener: "BkListener") -> None:
        self.listener = listener
        self.ops = listener.ops
        self.buffer = bytearray()
        self.inbox: list[bytes] = []  # read, not yet decoded (a slice a loop turn)
        self.inbox_bytes = 0
        self.outbox: list[bytes] = []
        self.outbox_bytes = 0  # their sum, kept as they come: PB2 asks before every begin
        self.arrived: list[tuple] = []  # adds of the slice being decoded, begun after it (BK5)
        self.v3 = True
        self.transport: asyncio.Transport | None = None
        self.pending_adds = 0
        self.in_flight = 0
        self.reading_stopped = asyncio.Event()  # set while reading is paused (BL1)
        self.writing_paused = False
        self.idle = asyncio.Event()
        self.idle.set()
        self.budget = listener.budget
        self._init_requests()
        self._init_reads()
        self._init_add_wait()
        self.frame_reserved = 0  # PB3: the reservation of the frame being collected
        self.frame_waiting = False  # PB3: its reservation did not fit; not reading
        self.frame_timer: asyncio.TimerHandle | None = None
        self.gated = listener.tls.mutual  # bk_tls.py TS4
        # bk_timing.py BT2: when the oldest undecoded bytes came, and the slice being
        # decoded's (arrived, begun): one clock read a burst and one a slice, none a request.
        self.inbox_at = 0.0
        self.slice_at = (0.0, 0.0)
        self.op_stats = listener.ops.op_stats

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        transport.set_write_buffer_limits(high=self.listener.write_buffer_high)
        self.listener.connections.add(self)
        if self.listener.closing:
            self.stop_reading()

    def connection_lost(self, exc) -> None:
        self.listener.connections.discard(self)
        self.buffer.clear()
        budget = self.budget
        budget.forget(self)
        budget.release(self.inbox_bytes + self.frame_reserved)  # PB3
        self.inbox.clear()
        self.inbox_bytes = self.frame_reserved = 0
        self._stop_frame_timer()
        self._drop_held()  # bk_add_wait.py AW4
        self._drop_requests()  # PB5
        if budget.waiting:
            budget.wake()

    def pause_writing(self) -> None:
        self.writing_paused = True
        self._flow()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.budget.charge_answers(self, self.transport.get_write_buffer_size())  # PB2
        if self.deferred:
            self._begin_deferred()
        self._flow()

    def budget_freed(self) -> None:
        """PortBudget.wake: slots or bytes were freed; try what waits for them again."""
        if self.transport is None or self.transport.is_closing():
            return
        if self.frame_waiting:
            self._reserve_frame()
        if self.deferred:
            self._begin_deferred()
        self._flow()

    def data_received(self, data: bytes) -> None:
        # Read eagerly, decode a slice per loop turn: the loop gets back to the socket
        # between slices, so the client's requests leave its buffers for ours (as
        # BookKeeper's bookie reads into its request queues). Against BookKeeper's Java
        # client at -throttle 90000 (v3) this took ours from ~71,000 to ~88,000 adds/s
        # (docs/bookkeeper-protocol.md §6): that client slows as its own heap fills.
        if not self.inbox:
            asyncio.get_running_loop().call_soon(self._decode_slice)
            self.idle.clear()  # BL3: not idle until decoded
            self.inbox_at = now()
        self.inbox.append(data)
        self.inbox_bytes += len(data)
        self.budget.hold(len(data))  # PB3
        if self.inbox_bytes > self.listener.inbox_high or self.budget.requests_over:
            self._flow()  # BL1, PB3

    def _decode_slice(self) -> None:
        inbox = self.inbox
        if self.transport.is_closing() or self.listener.closing:
            # Refused (BL2), shut down or gone: no answer can reach the client (BL3: a
            # listener shutting down begins nothing more), so what is left is not decoded
            # and nothing of it begun.
            inbox.clear()
            self.budget.release(self.inbox_bytes)
            self.inbox_bytes = 0
        elif self.held:
            return  # AW1: a let-go schedules the next slice
        else:
            taken, size = 0, 0
            while taken < len(inbox) and size < DECODE_SLICE:
                size += len(inbox[taken])
                taken += 1
            chunks = inbox[:taken]
            del inbox[:taken]
            begun = now()
            self.slice_at = (self.inbox_at, begun)
            if inbox:  # the rest came after inbox_at; begun is the bound it has (BT2)
                self.inbox_at = begun
            self.inbox_bytes -= size
            self.budget.release(size)
            self._decode(chunks[0] if taken == 1 else b"".join(chunks))
        if self.held:
            pass  # bk_add_wait.py AW1: decoding goes on when the held adds go
        elif inbox:
            asyncio.get_running_loop().call_soon(self._decode_slice)
        elif self.in_flight == 0:
            self.idle.set()
        self._flow()

    def _decode(self, data: bytes) -> None:
        if self.buffer:
            self.buffer += data
            data = bytes(self.buffer)
            self.buffer.clear()
        at, size = 0, len(data)
        limit = self.listener.max_frame
        view = memoryview(data)
        while size - at >= 4 and not self.upgrading:  # bk_tls.py TS1
            length = _I32.unpack_from(data, at)[0]
            if not 0 < length <= limit:
                self._refuse(f"frame length {length} is not within 1..{limit}")
                return
            if size - at - 4 < length:
                break
            if not self.v3 and not self.gated:
                add = plain_v2_add(data, at + 4, length)  # v2.py PV1: no view, no Request
                if add is not None:
                    self.arrived.append(add)
                    at += 4 + length
                    continue
            packet = view[at + 4:at + 4 + length]  # a view: each decoder copies what it keeps
            at += 4 + length
            if not self._dispatch(packet):
                return
        if at < size:
            self.buffer += view[at:]  # a frame's start: kept until the rest comes
        self._frame_collected(at > 0)
        self._begin_plain_arrived()  # bk_reads.py PRD4: before the slice's adds
        self._begin_arrived()

    def _dispatch(self, packet: bytes) -> bool:
        if self.gated:
            return self._gated_dispatch(packet)
        if self.v3:
            add = v3_add.parse_add(packet)
            if add is not None:
                self._v3_plain_add(add)
                return True
            read = v3_read.parse_read(packet)
            if read is not None:  # bk_reads.py
                self._plain_read(read.ledger_id, read.entry_id, read.header)
                return True
            packet = packet.tobytes()  # protobuf's path (and v2's after it) take bytes
            try:
                request = v3.decode_request(packet)
            except ProtocolError:
                self.v3 = False  # for good, as BookKeeper's RequestDecoder
            else:
                if request.header.operation == _ADD_V3:
                    self._v3_add(request)
                elif request.header.operation in SESSION_V3:
                    self._begin_plain_arrived()  # bk_reads.py PRD4
                    return self._session_v3(request)
                else:
                    self._request(v3_kind(request), self._v3_whole(request), request)
                return True
        request = self._decode_v2(packet)
        if request is None:
            return False
        refused = self.ops.v2_version_refused(request, self.peer)  # BK6
        if refused is not None:
            self._send(refused)
        elif request.opcode == v2.ADDENTRY:
            self._v2_add(request)
        elif request.opcode == v2.AUTH:
            self._send(auth_v2(request))
        elif request.opcode == v2.READENTRY and not request.fencing:  # bk_reads.py
            self._plain_read(request.ledger_id, request.entry_id, request.version)
        elif request.opcode == v2.BATCH_READ_ENTRY and not request.fencing:  # PRD6
            self._request(BATCH, (request, self.slice_at[0]))
        else:
            self._request(v2_kind(request), self._v2_whole(request))
        return True

    def _v3_whole(self, request):
        return functools.partial(self.ops.v3, request, self.peer, self.slice_at[0])

    def _v2_whole(self, request: v2.Request):
        return functools.partial(self.ops.v2, request, self.peer, self.slice_at[0])

    def _decode_v2(self, packet) -> v2.Request | None:
        """A v2 request, or None when the frame is none (BL2: refused, connection closed)."""
        try:
            return v2.decode_request(packet)
        except ProtocolError as exc:
            self._refuse(str(exc))
            return None

    def _finished(self, data: bytes | None, count: int = 1) -> None:
        self.in_flight -= count
        if data is not None:
            self._send(data)
        if self.in_flight == 0 and not self.held:
            self.idle.set()
        self._flow()

    def _send(self, data: bytes) -> None:
        self._send_all((data,))

    def _send_all(self, datas) -> None:
        """Queue answers; the answers of one loop turn (a journal group's adds complete
        together) leave in one write, not one system call each."""
        if self.transport is None or self.transport.is_closing():
            return
        if not self.outbox:
            asyncio.get_running_loop().call_soon(self._flush)
        for data in datas:
            self.outbox.append(data)
            self.outbox_bytes += len(data)

    def _flush(self) -> None:
        if self.upgrading:
            return  # bk_tls.py TS1: kept for the TLS transport
        if self.outbox and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(self.outbox))
            self.budget.charge_answers(self, self.transport.get_write_buffer_size())  # PB2
        self.outbox.clear()
        self.outbox_bytes = 0
        self._answers_written()

    def stop_reading(self) -> None:
        """BL3: for good (the listener is closing); ``_flow`` never resumes it."""
        if self.transport is not None and not self.transport.is_closing() \
                and not self.reading_stopped.is_set():
            self.transport.pause_reading()
            self.reading_stopped.set()

    def _flow(self) -> None:
        """BL1: read while the client reads its answers and requests in flight are bounded."""
        if self.transport is None or self.transport.is_closing() or self.listener.closing \
                or self.upgrading:  # bk_tls.py TS1
            return
        busy = (self.writing_paused or self.inbox_bytes > self.listener.inbox_high
                or self.in_flight >= 2 * self.listener.max_pending_adds
                or self.deferred or self.frame_waiting or self.held  # PB1-PB3, AW1
                or (self.inbox_bytes and self.budget.requests_over))
        paused = self.reading_stopped.is_set()
        if busy and not paused:
            self.transport.pause_reading()
            self.reading_stopped.set()
        elif not busy and paused:
            self.reading_stopped.clear()
            self.transport.resume_reading()

    def _refuse(self, why: str, what: str = "FRAME") -> None:
        """BL2: the reads and adds that came whole before the bad frame are still begun."""
        self._begin_plain_arrived()
        self._begin_arrived()
        # No status answers it: counted and logged as the refusal of a FRAME (or of
        # START_TLS, bk_tls.py TS2/TS3), CLOSED.
        self.ops.refusals.refused((what, "CLOSED"), f"{why}; connection closed", self.peer)
        self.buffer.clear()
        self.transport.close()


class BkListener:
    def __init__(self, bookie, max_pending_adds: int,
                 write_buffer_high: int | None = None, inbox_high: int = INBOX_HIGH,
                 limits: Limits | None = None, ssl_context=None) -> None:
        self.ops = BkOperations(bookie)
        self.tls = ListenerTls(ssl_context, bookie.config.tls_authorized_roles)
        self.max_frame = bookie.config.max_entry_size + FRAME_OVERHEAD
        self.max_pending_adds = max_pending_adds
        self.budget = PortBudget(limits or Limits())
        self.budget.connections = self.connections = set()
        bookie.stats.bk_port_budget = self.budget  # api/server/metrics.py
        self.write_buffer_high = self.budget.limits.connection_buffer \
            if write_buffer_high is None else write_buffer_high
        self.inbox_high = inbox_high
        self.closing = False  # BL3: shutting down, no more requests read

    def protocol(self) -> BkConnection:
        return BkConnection(self)

    def close(self) -> None:
        """BL3's first half: no connection reads another request (what was read and not yet
        decoded is dropped, nothing of it begun); requests in flight are still answered."""
        self.closing = True
        for connection in self.connections:
            connection.stop_reading()
            connection.refuse_held()  # bk_add_wait.py AW4

    async def drained(self, timeout_s: float) -> None:
        """BL3's second half: wait (bounded) for the requests in flight, then close."""
        connections = list(self.connections)
        waits = [asyncio.create_task(c.idle.wait()) for c in connections]
        if waits:
            _done, late = await asyncio.wait(waits, timeout=timeout_s)
            for task in late:
                task.cancel()
        for connection in connections:
            if connection.transport is not None:
                connection.transport.close()


@contextlib.asynccontextmanager
async def bk_serving(bookie, host: str, port: int, shutdown_timeout_s: float = 30.0,
                     ssl_context=None):
    """Serve BookKeeper's protocol for ``bookie`` on host:port (0 picks a free port); yields
    the bound port. On exit: BL3. ``ssl_context``: START_TLS's (bk_tls.py), None for none."""
    listener = BkListener(bookie, bookie.config.bookie_max_pending_adds,
                          limits=Limits.of(bookie.config), ssl_context=ssl_context)
    server = await asyncio.get_running_loop().create_server(
        listener.protocol, host, port, reuse_address=True)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        listener.close()
        await listener.drained(shutdown_timeout_s)
        await server.wait_closed()
