"""A small client of BookKeeper's binary protocol for tests: real TCP to a bookie's
``bookie_port``, requests built with api/bkproto, answers matched by txnId (v3) or read in
order of arrival (v2)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct

from api.bkproto import v2, v3

_I32 = struct.Struct(">i")


class BkClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.txn = itertools.count(1)

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, port: int, host: str = "127.0.0.1"):
        """``async with BkClient.connect(port) as client``: one TCP connection."""
        reader, writer = await asyncio.open_connection(host, port)
        client = cls(reader, writer)
        try:
            yield client
        finally:
            await client.close()

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass

    # -- raw frames ----------------------------------------------------------------------

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self, timeout_s: float = 30.0) -> bytes:
        """One answer frame's bytes; IncompleteReadError when the bookie closed."""
        header = await asyncio.wait_for(self.reader.readexactly(4), timeout_s)
        return await asyncio.wait_for(
            self.reader.readexactly(_I32.unpack(header)[0]), timeout_s)

    async def closed_by_peer(self, timeout_s: float = 30.0) -> bool:
        """Whether the bookie closes the connection (EOF) before sending anything more."""
        data = await asyncio.wait_for(self.reader.read(1), timeout_s)
        return data == b""

    # -- v3 ------------------------------------------------------------------------------

    def request(self, operation: str, **body):
        """A v3 Request for ``operation`` with the next txnId, body fields from ``body``."""
        request = v3.Request()
        request.header.version = v3.PROTOCOL_VERSIONS["VERSION_THREE"]
        request.header.operation = v3.OPERATIONS[operation]
        request.header.txnId = next(self.txn)
        field = getattr(request, v3.BODY_FIELDS[operation][0])
        field.SetInParent()
        for name, value in body.items():
            setattr(field, name, value)
        return request

    async def call(self, request):
        """Send one v3 request, return its answer (the next frame: no other in flight)."""
        await self.send(v3.frame(request))
        response = v3.decode_response(await self.read_frame())
        assert response.header.txnId == request.header.txnId
        return response

    async def pipeline(self, requests) -> dict[int, object]:
        """Send every request at once, then collect the answers by txnId (any order)."""
        await self.send(b"".join(v3.frame(r) for r in requests))
        answers = {}
        while len(answers) < len(requests):
            response = v3.decode_response(await self.read_frame())
            answers[response.header.txnId] = response
        return answers

    async def add(self, ledger_id: int, entry_id: int, key: bytes, entry: bytes, **extra):
        return await self.call(self.request("ADD_ENTRY", ledgerId=ledger_id,
                                            entryId=entry_id, masterKey=key, body=entry,
                                            **extra))

    async def read(self, ledger_id: int, entry_id: int, **extra):
        return await self.call(self.request("READ_ENTRY", ledgerId=ledger_id,
                                            entryId=entry_id, **extra))

    async def start_tls(self, context, server_hostname: str = "127.0.0.1"):
        """BookKeeper's upgrade (api/server/bk_tls.py): a v3 START_TLS, then, if answered
        EOK, this client starts the TLS handshake on the same connection. Returns the
        answer; raises what the handshake raises."""
        answer = await self.call(self.request("START_TLS"))
        if answer.status == v3.STATUS["EOK"]:
            await self.writer.start_tls(context, server_hostname=server_hostname)
        return answer

    def peer_certificate(self) -> bytes | None:
        """The server's certificate (DER) on a TLS connection."""
        ssl_object = self.writer.get_extra_info("ssl_object")
        return None if ssl_object is None else ssl_object.getpeercert(binary_form=True)

    # -- v2 ------------------------------------------------------------------------------

    async def call_v2(self, frame: bytes) -> v2.Response:
        await self.send(frame)
        return v2.decode_response(await self.read_frame())
