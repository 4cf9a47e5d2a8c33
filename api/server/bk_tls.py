"""TLS on ``bookie_port`` (docs/bookkeeper-protocol.md §9), as Apache BookKeeper does it: a
connection starts plain, the client sends a v3 START_TLS request, the bookie answers EOK
with a ``startTLSResponse``, and both ends turn that same TCP connection into TLS, the
client starting the handshake. Also the other exchange a connection may open with, AUTH
(answered as BookKeeper's bookie without an authentication provider answers it). Read in
BookKeeper's ``BookieRequestProcessor.processStartTLSRequestV3``,
``AuthHandler.ServerSideHandler``, ``BookieAuthZFactory`` and
``PerChannelBookieClient.initiateTLS``; written here.

A mixin of ``bk_listener.BkConnection`` (as ``bk_adds.AddPath``): it uses the connection's
``listener``, ``ops``, ``peer``, ``transport``, ``buffer``, ``inbox``, ``outbox``, ``v3``,
``_send``, ``_flush``, ``_refuse``, ``_decode_v2``, ``_finished`` and ``reading_stopped``.

Invariants:
    TS1. The EOK answer to START_TLS is the last plain byte the bookie writes: reading is
         paused as the request is decoded (so the client's ClientHello is never taken as
         a frame), answers already queued and that answer are written, then the transport
         becomes TLS (``loop.start_tls``, server side; asyncio and uvloop alike). Answers
         completing during the handshake wait for it and go out encrypted. Bytes the
         client sent after START_TLS and before reading its answer are no handshake: the
         connection is closed.
    TS2. A listener without a TLS context answers START_TLS EBADREQ and stays plain
         (BookKeeper's answer). A second START_TLS on a TLS connection closes it:
         BookKeeper's bookie fails to add a second TLS handler and closes the channel.
    TS3. A failed handshake (no client certificate where one is required, one of another
         CA, not TLS at all) closes the connection and is a refusal (START_TLS CLOSED,
         counted and logged with its reason and peer, api/server/refusals.py).
    TS4. With mutual TLS (the context requires a client certificate, api/tls.py TL1) a
         connection is answered only AUTH and START_TLS until its handshake succeeded:
         every other request is EUA (v3 status, v2 code), does nothing and is a refusal.
         BookKeeper refuses so only with an authorization provider (BookieAuthZFactory);
         here mutual TLS alone does it (docs/bookkeeper-protocol.md, "TLS").
    TS5. The context is the HTTPS listener's own object (bookie/cli.py): a reload, on SIGHUP
         or by the refresh poll (api/tls.py TL2, api/tls_refresh.py TR1), reaches the new
         handshakes of both listeners at once.
    TS6. ``tls_authorized_roles`` set: after the handshake the client certificate's role
         (its first OU's ``0:`` part, first role, as BookKeeper's ``CertUtils``) must be
         one of them, else the connection stays refused as in TS4 and the refusal is
         counted (START_TLS EUA); BookKeeper's client then sees EUA on every request.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from api.bkproto import v2, v3
from api.bkproto.status import v3_status
from api.bkproto.v2 import ProtocolError
from bookie.errors import BadRequest

log = logging.getLogger("bookie.bkproto")

AUTH_DISABLED_PLUGIN = "AuthDisabledPlugin"  # AuthProviderFactoryFactory's name
START_TLS_V3, AUTH_V3 = v3.OPERATIONS["START_TLS"], v3.OPERATIONS["AUTH"]
#: The v3 operations answered by the connection itself, not by ``bk_ops``.
SESSION_V3 = frozenset((START_TLS_V3, AUTH_V3))
#: A client gets this long to finish its handshake (asyncio's own default is 60 s).
HANDSHAKE_TIMEOUT_S = 30.0
_V3_NAMES = {number: name for name, number in v3.OPERATIONS.items()}
_V2_NAMES = {v2.ADDENTRY: "ADD_ENTRY", v2.READENTRY: "READ_ENTRY",
             v2.BATCH_READ_ENTRY: "BATCH_READ_ENTRY"}


class ListenerTls:
    """What one listener does about TLS: its context (None: START_TLS is EBADREQ), whether
    plain requests are refused (TS4) and the roles a client certificate must carry (TS6)."""

    def __init__(self, context: ssl.SSLContext | None, roles: str | None = None) -> None:
        self.context = context
        self.mutual = context is not None and context.verify_mode == ssl.CERT_REQUIRED
        #: ``tls_authorized_roles``, split on ',' as BookKeeper splits authorizedRoles.
        self.roles = frozenset(r.strip() for r in (roles or "").split(",") if r.strip())


def cert_role(peercert: dict | None) -> str | None:
    """TS6: the role of a certificate (``SSLObject.getpeercert()``): its first OU, split on
    ';' into ``code:value`` parts, the value of code 0, split on ',', the first one."""
    for rdn in (peercert or {}).get("subject", ()):
        for name, value in rdn:
            if name != "organizationalUnitName":
                continue
            for part in value.split(";"):
                code, colon, names = part.partition(":")
                if colon and code.strip() == "0":
                    return names.split(",")[0].strip()
            return None  # only the first OU counts, as BookKeeper reads it
    return None


def auth_v3(ops, request) -> bytes:
    response = ops.v3_response(request, v3.STATUS["EOK"])
    response.authResponse.authPluginName = AUTH_DISABLED_PLUGIN
    response.authResponse.payload = b""
    return v3.frame(response)


def auth_v2(request: v2.Request) -> bytes:
    message = v3.AuthMessage()
    message.authPluginName = AUTH_DISABLED_PLUGIN
    message.payload = b""
    return v2.encode_auth_response(request.version, message.SerializeToString())


class TlsSession:
    """The START_TLS and AUTH half of ``bk_listener.BkConnection``."""

    #: TS4: plain requests are refused (a mutual-TLS listener, before a good handshake).
    gated = False
    #: TS1: between START_TLS and the end of the handshake; nothing is written or decoded.
    upgrading = False
    secure = False

    def _session_v3(self, request) -> bool:
        """A v3 AUTH or START_TLS; False when the connection decodes no further frame."""
        if request.header.operation == AUTH_V3:
            self._send(auth_v3(self.ops, request))
            return True
        return self._start_tls(request)

    def _start_tls(self, request) -> bool:
        tls = self.listener.tls
        if tls.context is None:  # TS2
            error = BadRequest("START_TLS: this listener has no TLS")
            self.ops.refused("START_TLS", error, self.peer)
            self._send(v3.frame(self.ops.v3_response(request, v3_status(error))))
            return True
        if self.secure:  # TS2
            self._refuse("a second START_TLS on a TLS connection", "START_TLS")
            return False
        # TS1: no read until the transport is TLS; what is queued leaves before the answer.
        self.upgrading = True
        self.transport.pause_reading()
        response = self.ops.v3_response(request, v3.STATUS["EOK"])
        response.startTLSResponse.SetInParent()
        self.outbox.append(v3.frame(response))
        self.transport.write(b"".join(self.outbox))
        self.outbox.clear()
        self.outbox_bytes = 0
        self.in_flight += 1  # BL3: a shutdown waits (bounded) for the handshake too
        self.idle.clear()
        asyncio.get_running_loop().create_task(self._upgrade(tls))
        return True

    async def _upgrade(self, tls: ListenerTls) -> None:
        raw = self.transport
        try:
            if self.buffer or self.inbox:  # TS1
                raise ConnectionError("the client sent bytes after START_TLS before its "
                                      "answer; they are no TLS handshake")
            secured = await asyncio.get_running_loop().start_tls(
                raw, self, tls.context, server_side=True,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        except (OSError, ssl.SSLError, asyncio.TimeoutError, RuntimeError) as exc:
            # TS3. start_tls closed the transport already, except for our own refusal.
            self.upgrading = False
            self._refuse(f"TLS handshake failed: {exc!r}", "START_TLS")
            self._finished(None)
            return
        self.transport, self.secure, self.upgrading = secured, True, False
        secured.set_write_buffer_limits(high=self.listener.write_buffer_high)
        self.reading_stopped.clear()  # start_tls resumed reading; BL1 decides afresh
        if tls.mutual:
            self.gated = not self._authorized(tls, secured)
        self._flush()
        self._finished(None)

    def _authorized(self, tls: ListenerTls, secured) -> bool:
        """TS6 (TS4 for a certificate whose role is not authorized)."""
        if not tls.roles:
            return True
        role = cert_role(secured.get_extra_info("peercert"))
        if role in tls.roles:
            return True
        self.ops.refusals.refused(("START_TLS", "EUA"), f"client certificate role {role!r} "
                                  "is not in tls_authorized_roles", self.peer)
        return False

    def _gated_dispatch(self, packet) -> bool:
        """TS4: a request on a connection that must first start TLS; False when the
        connection decodes no further frame."""
        packet = bytes(packet)
        if self.v3:
            try:
                request = v3.decode_request(packet)
            except ProtocolError:
                self.v3 = False  # for good, as in the listener's own dispatch
            else:
                operation = request.header.operation
                if operation in SESSION_V3:
                    return self._session_v3(request)
                self._refuse_plain(_V3_NAMES.get(operation, "UNKNOWN"))
                self._send(v3.frame(self.ops.v3_response(request, v3.STATUS["EUA"])))
                return True
        request = self._decode_v2(packet)
        if request is None:
            return False
        if request.opcode == v2.AUTH:
            self._send(auth_v2(request))
            return True
        self._refuse_plain(_V2_NAMES.get(request.opcode, "UNKNOWN"))
        if request.opcode == v2.BATCH_READ_ENTRY:
            self._send(v2.encode_batch_response(request.version, v2.EUA, request.ledger_id,
                                                request.entry_id, request.request_id, ()))
        else:
            self._send(v2.encode_response(request.version, request.opcode, v2.EUA,
                                          request.ledger_id, request.entry_id))
        return True

    def _refuse_plain(self, name: str) -> None:
        why = ("this bookie requires mutual TLS: START_TLS first" if not self.secure else
               "the client certificate's role is not in tls_authorized_roles")
        self.ops.refusals.refused((name, "EUA"), why, self.peer)
