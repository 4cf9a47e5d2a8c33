"""One TCP connection to one bookie's BookKeeper-protocol port, v3 frames pipelined on it
(docs/bookkeeper-protocol.md §3, §5): many requests in flight, answers matched by txnId, as
BookKeeper's ``PerChannelBookieClient`` does over v3.

Invariants:
    KC1. Connecting takes at most ``connect_timeout_s`` (10 s, BookKeeper's
         ``clientConnectTimeoutMillis`` default); concurrent first calls share the one
         attempt, so a bookie gets one connection per client, never one per caller.
    KC2. Every request has a deadline (``timeout_s``); one past it fails with
         asyncio.TimeoutError (a bookie failure to the replicated client) and is forgotten:
         a late answer to it is dropped, never taken for another request's.
    KC3. A lost connection (EOF, reset, a frame that is not a v3 answer or is over
         ``FRAME_MAX``) fails every request pending on it with ``ConnectionLost``, at once,
         not after each one's timeout. Nothing on it is retried here: an add may or may
         not have been stored, and the caller decides (L1 in api/client/writer.py).
    KC4. The next call after a loss connects again (a new connection, KC1). A call that
         finds its transport closing (a send failed: asyncio runs connection_lost only a
         turn later) counts the connection lost (KC3) and, having written nothing, goes
         on a new one; before, it wrote into the dead transport, logged "socket.send()
         raised exception." and failed.
    KC5. Answers are read and matched in one place, the protocol's ``data_received``;
         txnIds come from one counter per client and are never reused, across
         reconnections too, so an answer matches at most the request it answers.
    KC6. With a TLS context the connect (KC1, under its timeout) sends a v3 START_TLS first
         and nothing else, takes only its EOK, then turns that TCP connection into TLS
         (``loop.start_tls``, the client starting the handshake, as BookKeeper's
         ``PerChannelBookieClient``), then asks GET_BOOKIE_INFO over TLS; only once that is
         answered is the connection handed to requests. That one round trip is there
         because under TLS 1.3 a bookie asking for client certificates refuses this
         client's only after the client's side of the handshake ended (it closes the
         connection): the connect reports it, where the first add would fail as
         ConnectionLost, "may or may not be stored" (KC3). The bookie's certificate is
         checked against the context's CA with the bookie's host as the name (an IP
         address is matched against the certificate's IP addresses, as the HTTPS client
         does). Any other START_TLS answer, a failed handshake, a connection closed after
         it or the time running out closes the connection and fails the connect:
         ``StartTlsFailed`` (an OSError, a bookie failure), ``Unauthorized`` for EUA;
         never a plain connection where TLS was asked.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import struct

from api.bkproto import v3
from api.bkproto.v2 import ProtocolError
from api.client.bkport.errors import OK, status_error
from bookie.errors import Unauthorized

CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
#: The largest answer taken: an entry (max_entry_size, 5 MiB by default) with its header,
#: with room to spare; anything longer is not a bookie speaking v3 (KC3).
FRAME_MAX = 64 * 1024 * 1024
_I32 = struct.Struct(">i")
_VERSION = v3.PROTOCOL_VERSIONS["VERSION_THREE"]


class ConnectionLost(ConnectionResetError):
    """The connection ended with this request unanswered (KC3): it may or may not have
    been applied. A ConnectionResetError, so an OSError: a bookie failure to the writer
    and the reader (api/client/bookies.py BOOKIE_FAILURES)."""


class StartTlsFailed(ConnectionError):
    """KC6: the bookie refused START_TLS (EBADREQ: no TLS on its BookKeeper port), or the
    TLS handshake failed; the connection was closed, nothing was sent in the clear. A
    ConnectionError, so an OSError: a bookie failure (api/client/bookies.py
    BOOKIE_FAILURES)."""


class _Wire(asyncio.Protocol):
    """A connection's answers matched to its pending requests (KC5). The owner has an
    ``address`` and ``forget(wire)``; a subclass for another framing (batch_v2.py) says how
    an answer is decoded and what it is matched by."""

    KIND = "v3"

    def __init__(self, owner) -> None:
        self.owner = owner
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, asyncio.Future] = {}
        self.buffer = bytearray()
        self.lost: BaseException | None = None
        self.answered = 0
        self.can_write: asyncio.Event = asyncio.Event()
        self.can_write.set()

    @staticmethod
    def decode_answer(packet: bytes):
        return v3.decode_response(packet)

    @staticmethod
    def answer_key(answer) -> int:
        return answer.header.txnId

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:  # KC5
        buffer = self.buffer
        buffer += data
        at = 0
        try:
            while len(buffer) - at >= 4:
                (length,) = _I32.unpack_from(buffer, at)
                if not 0 < length <= FRAME_MAX:
                    raise ProtocolError(f"answer frame of {length} bytes")
                if len(buffer) - at - 4 < length:
                    break
                response = self.decode_answer(bytes(buffer[at + 4:at + 4 + length]))
                at += 4 + length
                self.answered += 1
                future = self.pending.pop(self.answer_key(response), None)
                if future is not None and not future.done():  # KC2: late ones dropped
                    future.set_result(response)
        except ProtocolError as exc:
            self.fail(ConnectionLost(f"bookie {self.owner.address} sent what is not a "
                                     f"{self.KIND} answer: {exc}"))
            return
        finally:
            del buffer[:at]

    def closing(self) -> bool:
        """KC3: the transport is closing before connection_lost has run, as after a send
        that failed (the bookie was killed): asyncio reports it in a later loop turn, and
        every write before that only logs "socket.send() raised exception."."""
        return self.transport is not None and self.transport.is_closing()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def connection_lost(self, exc) -> None:
        self.fail(ConnectionLost(f"connection to bookie {self.owner.address} lost "
                                 f"({exc or 'closed by the bookie'})"))

    def fail(self, error: ConnectionLost) -> None:  # KC3
        if self.lost is None:
            self.lost = error
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        self.can_write.set()  # a writer waiting for room sees the loss
        if self.transport is not None:
            self.transport.close()
        self.owner.forget(self)


class BkConnection:
    """The connection to ``host:port``; one event loop, shared by its tasks."""

    def __init__(self, host: str, port: int, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 request_timeout_s: float = REQUEST_TIMEOUT_S,
                 tls: ssl.SSLContext | None = None) -> None:
        self.host, self.port = host, port
        #: KC6: START_TLS with this context on every connection; None: plain.
        self.tls = tls
        self.address = f"{host}:{port}"
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self._txn = itertools.count(1)  # KC5
        self._wire: _Wire | None = None
        self._connecting: asyncio.Future | None = None
        #: Connections made, for tests and the log: a reconnection adds one (KC4).
        self.connections_made = 0

    def forget(self, wire: _Wire) -> None:
        if self._wire is wire:
            self._wire = None

    async def _connected(self) -> _Wire:
        wire = self._wire
        if wire is not None and wire.lost is None:
            if not wire.closing():
                return wire
            wire.fail(ConnectionLost(f"connection to bookie {self.address} lost (a send "
                                     f"failed)"))
        if self._connecting is None:  # KC1: one attempt, shared
            self._connecting = asyncio.ensure_future(self._connect())
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None

    async def _connect(self) -> _Wire:
        wire = await asyncio.wait_for(self._open(), self.connect_timeout_s)  # KC1, KC6
        self._wire = wire
        self.connections_made += 1
        return wire

    async def _open(self) -> _Wire:
        loop = asyncio.get_running_loop()
        _, wire = await loop.create_connection(lambda: _Wire(self), self.host, self.port)
        if self.tls is None:
            return wire
        try:
            await self._start_tls(loop, wire)
        except BaseException:  # KC6: refused, failed or timed out: nothing goes on in plain
            wire.transport.close()
            raise
        return wire

    async def _ask(self, loop, wire: _Wire, request, lost: str):
        """KC6: ``request``'s answer on a connection not yet handed to requests;
        StartTlsFailed saying ``lost`` when the connection ends first."""
        txn = request.header.txnId
        future = wire.pending[txn] = loop.create_future()
        if wire.lost is None:
            wire.transport.write(v3.frame(request))
        else:
            future.set_exception(wire.lost)
        try:
            return await future
        except ConnectionLost as exc:
            raise StartTlsFailed(f"bookie {self.address} {lost} ({exc})") from None
        finally:
            wire.pending.pop(txn, None)

    async def _start_tls(self, loop, wire: _Wire) -> None:
        """KC6: START_TLS, its EOK, the handshake on the same connection, one answer."""
        answer = await self._ask(loop, wire, self.request("START_TLS"),
                                 "closed the connection before answering START_TLS")
        if answer.status != OK:
            error = status_error(answer.status, f"START_TLS on {self.address}")
            if isinstance(error, Unauthorized):
                raise error
            raise StartTlsFailed(f"bookie {self.address} refused START_TLS ({error}): it "
                                 f"has no TLS on this port; TLS was asked, so no plain "
                                 f"connection is made")
        if wire.buffer:  # the bookie's TLS starts only after our ClientHello (TS1)
            raise StartTlsFailed(f"bookie {self.address} sent bytes after its START_TLS "
                                 f"answer, before the TLS handshake")
        try:
            wire.transport = await loop.start_tls(
                wire.transport, wire, self.tls, server_hostname=self.host,
                ssl_handshake_timeout=self.connect_timeout_s)
        except (ssl.SSLError, OSError) as exc:
            raise StartTlsFailed(f"TLS handshake with bookie {self.address} failed: "
                                 f"{exc}") from exc
        answer = await self._ask(
            loop, wire, self.request("GET_BOOKIE_INFO"),
            "closed the TLS connection right after the handshake: it refused this client's "
            "certificate (a bookie asking for client certificates of its CA: none shown, "
            "or one it does not trust), or it failed")
        if answer.status == v3.STATUS["EUA"]:
            raise status_error(answer.status, f"bookie {self.address} over TLS (this "
                                              f"client's certificate is not authorized)")

    def request(self, operation: str):
        """A v3 Request of ``operation`` with its header filled in (the txnId too) and its
        body field present: the caller sets the body's fields."""
        request = v3.Request()
        header = request.header
        header.version = _VERSION
        header.operation = v3.OPERATIONS[operation]
        header.txnId = next(self._txn)
        getattr(request, v3.BODY_FIELDS[operation][0]).SetInParent()
        return request

    async def call(self, request, timeout_s: float | None = None):
        """The answer to ``request`` (a whole Response, any status); ConnectionLost (KC3),
        asyncio.TimeoutError (KC2), or the connect's OSError."""
        timeout_s = self.request_timeout_s if timeout_s is None else timeout_s
        wire = await self._connected()
        if not wire.can_write.is_set():
            await asyncio.wait_for(wire.can_write.wait(), timeout_s)
        if wire.lost is None and wire.closing():
            wire.fail(ConnectionLost(f"connection to bookie {self.address} lost (a send "
                                     f"failed)"))
        if wire.lost is not None:
            raise wire.lost
        txn = request.header.txnId
        future = asyncio.get_running_loop().create_future()
        wire.pending[txn] = future
        wire.transport.write(v3.frame(request))
        try:
            return await asyncio.wait_for(future, timeout_s)
        finally:
            wire.pending.pop(txn, None)  # KC2: answered, timed out or cancelled

    def close(self) -> None:
        wire, self._wire = self._wire, None
        if wire is not None:
            wire.fail(ConnectionLost(f"connection to bookie {self.address} closed by this "
                                     f"client"))
        if self._connecting is not None:
            self._connecting.cancel()
            self._connecting = None
