"""A minimal HTTP/1.1 client for the writer's hot path: POST a batch, read the answer.

aiohttp's client costs ~120 us of CPU per request (measured with scripts/bench/bench_http.py's
raw-socket load generator beside it); a writer sends thousands of batches a second, so the
batch adds (``BookieClient.add_batch_body``) go through this one instead (~15 us). Every
other request keeps aiohttp. What it speaks is the subset the bookie's server answers a
POST with: a status line, headers, a body of ``Content-Length`` bytes, keep-alive.

Invariants:
    RH1. One request at a time per connection; a connection whose request did not end with
         a whole answer (an error, a timeout, a cancel) is closed, never reused: a late
         answer can never be taken for the next request's.
    RH2. An answer without Content-Length, or a connection that closes before the whole
         answer, is an error (ConnectionError: an OSError, a bookie failure to the writer).
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse

#: Idle keep-alive connections kept per bookie (a writer has up to 4 batches in flight).
IDLE_CONNECTIONS_MAX = 8
_HEAD_MAX = 64 * 1024


class _Answer:
    __slots__ = ("status", "head", "body")

    def __init__(self, status: int, head: bytes, body: bytes) -> None:
        self.status, self.head, self.body = status, head, body

    def header(self, name: bytes) -> str | None:
        """A header's value (the first), ``name`` in lower case."""
        for line in self.head.split(b"\r\n")[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == name:
                return value.strip().decode("latin-1")
        return None


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self._buffer = bytearray()
        self._waiter: asyncio.Future | None = None
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.keep_alive = True

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._waiter is None or self._waiter.done():
            return
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > _HEAD_MAX:
                self._fail(ConnectionError("HTTP answer head over 64 KiB"))
            return
        head = bytes(self._buffer[:end])
        answer = _Answer(0, head, b"")
        length = answer.header(b"content-length")
        if length is None or not length.isdigit():
            self._fail(ConnectionError(f"HTTP answer without Content-Length: {head[:200]!r}"))
            return
        if len(self._buffer) < end + 4 + int(length):
            return
        try:
            answer.status = int(head[9:12])
        except ValueError:
            self._fail(ConnectionError(f"not an HTTP status line: {head[:100]!r}"))
            return
        answer.body = bytes(self._buffer[end + 4:end + 4 + int(length)])
        del self._buffer[:end + 4 + int(length)]
        if (answer.header(b"connection") or "").lower() == "close":
            self.keep_alive = False
        self._waiter.set_result(answer)

    def _fail(self, error: BaseException) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self.close()

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionResetError(
                f"connection closed before the whole answer ({exc or 'EOF'})"))

    async def request(self, head: bytes, body: bytes) -> _Answer:
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(head)
        self.transport.write(body)
        return await self._waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class RawHttpPool:
    """Keep-alive connections to one ``http://host:port`` or ``https://host:port`` (TLS with
    ``ssl_context``, or the system's default verification). One event loop."""

    def __init__(self, base_url: str, ssl_context=None) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or parsed.hostname is None:
            raise ValueError(f"{base_url!r} is not an http(s)://host:port URL")
        tls = parsed.scheme == "https"
        self.host, self.port = parsed.hostname, parsed.port or (443 if tls else 80)
        # The host name is checked against the certificate as aiohttp checks it.
        self._ssl = (ssl_context or ssl.create_default_context()) if tls else None
        self._host_header = f"Host: {parsed.netloc}\r\n".encode()
        self._idle: list[_Connection] = []

    async def post(self, path: str, headers: dict, body: bytes) -> _Answer:
        head = [f"POST {path} HTTP/1.1\r\n".encode(), self._host_header]
        head.extend(f"{name}: {value}\r\n".encode() for name, value in headers.items())
        head.append(f"Content-Length: {len(body)}\r\n\r\n".encode())
        connection = self._idle.pop() if self._idle else None
        if connection is None or connection.closed:
            _, connection = await asyncio.get_running_loop().create_connection(
                _Connection, self.host, self.port, ssl=self._ssl)
        try:
            answer = await connection.request(b"".join(head), body)
        except BaseException:
            connection.close()  # RH1: never reused after an unfinished request
            raise
        if connection.keep_alive and not connection.closed and \
                len(self._idle) < IDLE_CONNECTIONS_MAX:
            self._idle.append(connection)
        else:
            connection.close()
        return answer

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()
