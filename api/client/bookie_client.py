"""BookieClient: one bookie over HTTP, every docs/http-api.md endpoint, the server's error classes.

An error reply ``{"error": CODE, ...}`` is raised as the ``bookie.errors`` class with that
code (``ReadOnly``, ``Fenced``, ...), carrying ``retry_after_s`` for 503s, so callers handle
the same exceptions whether they talk to a ``Bookie`` in process or over HTTP.
"""

from __future__ import annotations

import aiohttp

from api import wire
from api.client.raw_http import RawHttpPool
from api.tls import client_context_from_env
from bookie.errors import BookieError, IOFailure, Unavailable, error_for_code


class BookieClient:
    """Thread-safety: one event loop; share one client among that loop's tasks."""

    def __init__(self, base_url: str, admin_token: str | None = None,
                 session: aiohttp.ClientSession | None = None,
                 connections: int = 256, ssl_context=None) -> None:
        """``ssl_context`` (api/tls.py ``client_context``) for an ``https://`` bookie: the
        CA that signed its certificate, and this client's certificate where the bookie
        asks for one. None: ``BOOKIE_TLS_TRUST_FILE`` and friends from the environment
        (api/tls.py), else the system's CAs (an https bookie with a private CA then fails
        verification, as it must)."""
        self.base_url = base_url.rstrip("/")
        self.admin_token = admin_token
        self._own_session = session is None
        self._session = session
        self._connections = connections
        if ssl_context is None and self.base_url.startswith("https://"):
            ssl_context = client_context_from_env()  # BOOKIE_TLS_TRUST_FILE and friends
        self._ssl = ssl_context
        self._raw: RawHttpPool | None = None  # the batch adds' connections

    async def __aenter__(self) -> "BookieClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._connections,
                                               ssl=self._ssl if self._ssl is not None else True),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
        return self._session

    async def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    # -- plumbing -----------------------------------------------------------------------

    async def _request(self, method: str, path: str, *, headers=None, data=None, params=None,
                       admin: bool = False, raw: bool = False, reply_header: str | None = None):
        """The reply's JSON, or with ``raw`` its body; with ``reply_header`` also that
        header's value: (body, value)."""
        headers = dict(headers or {})
        if admin and self.admin_token:
            headers["Authorization"] = f"Bearer {self.admin_token}"
        async with self.session.request(method, self.base_url + path, headers=headers,
                                        data=data, params=params) as reply:
            body = await reply.read()
            if reply.status >= 400:
                raise _error_from(reply.status, reply.headers, body)
            if reply_header is not None:
                return body, reply.headers.get(reply_header)
            if raw:
                return body
            return await reply.json(content_type=None) if body else {}

    @staticmethod
    def _write_headers(master_key: bytes, digest_type: str | None, recovery: bool,
                       deferred_sync: bool) -> dict:
        headers = {"X-Master-Key": master_key.hex()}
        if digest_type:
            headers["X-Digest-Type"] = digest_type
        if recovery:
            headers["X-Recovery-Add"] = "true"
        if deferred_sync:
            headers["X-Write-Flags"] = "deferred-sync"
        return headers

    # -- ledger endpoints ---------------------------------------------------------------

    async def add_entry(self, ledger_id: int, entry_id: int, entry: bytes, master_key: bytes,
                        digest_type: str | None = None, recovery: bool = False,
                        deferred_sync: bool = False) -> dict:
        headers = self._write_headers(master_key, digest_type, recovery, deferred_sync)
        headers["Content-Type"] = wire.ENTRY_CONTENT_TYPE
        return await self._request("PUT", f"/v1/ledgers/{ledger_id}/entries/{entry_id}",
                                   headers=headers, data=entry)

    async def add_batch(self, ledger_id: int, entries: list[bytes], master_key: bytes,
                        digest_type: str | None = None, recovery: bool = False,
                        deferred_sync: bool = False) -> list[int]:
        headers = self._write_headers(master_key, digest_type, recovery, deferred_sync)
        headers["Content-Type"] = wire.BATCH_CONTENT_TYPE
        reply = await self._request("POST", f"/v1/ledgers/{ledger_id}/entries", headers=headers,
                                    data=wire.encode_batch(entries))
        return reply["entryIds"]

    async def add_batch_body(self, ledger_id: int, body: bytes, master_key: bytes,
                             digest_type: str | None = None, recovery: bool = False,
                             deferred_sync: bool = False) -> None:
        """``add_batch`` of a body already encoded (``wire.encode_batch``, or a join of
        ``frame_batch_item`` frames), over the lean client of api/client/raw_http.py: the
        writer's hot path."""
        headers = self._write_headers(master_key, digest_type, recovery, deferred_sync)
        headers["Content-Type"] = wire.BATCH_CONTENT_TYPE
        if self._raw is None:
            self._raw = RawHttpPool(self.base_url, self._ssl)
        answer = await self._raw.post(f"/v1/ledgers/{ledger_id}/entries", headers, body)
        if answer.status >= 400:
            retry_after = answer.header(b"retry-after")
            raise _error_from(answer.status,
                              {"Retry-After": retry_after} if retry_after else {}, answer.body)

    async def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        return await self._request("GET", f"/v1/ledgers/{ledger_id}/entries/{entry_id}",
                                   raw=True)

    async def read_range(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        body = await self._request("GET", f"/v1/ledgers/{ledger_id}/entries",
                                   params={"from": str(first), "to": str(last)}, raw=True)
        return wire.decode_batch(body, 2**31 - 1, 2**31 - 1) if body else []

    async def read_held(self, ledger_id: int, first: int, last: int,
                        step: int = 1) -> tuple[list[bytes], int]:
        """(the entries the bookie holds among first, first+step, ... <= last, the last id it
        examined): the reply covers the ids up to that one; ask again from the next."""
        body, scanned = await self.read_held_body(ledger_id, first, last, step)
        return (wire.decode_batch(body, 2**31 - 1, 2**31 - 1) if body else []), scanned

    async def read_held_body(self, ledger_id: int, first: int, last: int,
                             step: int = 1) -> tuple[bytes, int]:
        """``read_held`` with the reply's batch body left whole, for a caller that splits
        and verifies it in one pass (api/client/codec.py ``decode_frames``)."""
        body, scanned = await self._request(
            "GET", f"/v1/ledgers/{ledger_id}/entries", reply_header=wire.LAST_SCANNED_HEADER,
            params={"from": str(first), "to": str(last), "held": "true", "step": str(step)})
        if scanned is None:
            raise IOFailure(f"held read answered without {wire.LAST_SCANNED_HEADER}")
        return body, int(scanned)

    async def fence(self, ledger_id: int, master_key: bytes) -> dict:
        return await self._request("POST", f"/v1/ledgers/{ledger_id}/fence",
                                   headers={"X-Master-Key": master_key.hex()})

    async def read_lac(self, ledger_id: int, wait_for_gt: int | None = None,
                       timeout_ms: int | None = None) -> int:
        params = {}
        if wait_for_gt is not None:
            params["wait_for_gt"] = str(wait_for_gt)
            params["timeout_ms"] = str(timeout_ms or 0)
        reply = await self._request("GET", f"/v1/ledgers/{ledger_id}/lac", params=params)
        return reply["lac"]

    async def write_lac(self, ledger_id: int, master_key: bytes, body: bytes) -> int:
        reply = await self._request("PUT", f"/v1/ledgers/{ledger_id}/lac", data=body,
                                    headers={"X-Master-Key": master_key.hex(),
                                             "Content-Type": wire.ENTRY_CONTENT_TYPE})
        return reply["lac"]

    async def force(self, ledger_id: int, master_key: bytes) -> int:
        reply = await self._request("POST", f"/v1/ledgers/{ledger_id}/force",
                                    headers={"X-Master-Key": master_key.hex()})
        return reply["lastEntryId"]

    async def ledger_info(self, ledger_id: int) -> dict:
        return await self._request("GET", f"/v1/ledgers/{ledger_id}")

    async def entry_id_ranges(self, ledger_id: int) -> list[list[int]]:
        """``[[first, last], ...]`` of the entry ids the bookie stores for the ledger."""
        reply = await self._request("GET", f"/v1/ledgers/{ledger_id}/entry-ids")
        return [[int(a), int(b)] for a, b in reply["ranges"]]

    async def list_ledgers(self, start: int = 0, limit: int | None = None) -> dict:
        params = {"start": str(start)}
        if limit is not None:
            params["limit"] = str(limit)
        return await self._request("GET", "/v1/ledgers", params=params)

    async def delete_ledger(self, ledger_id: int) -> dict:
        return await self._request("DELETE", f"/v1/ledgers/{ledger_id}", admin=True)

    # -- bookie endpoints ---------------------------------------------------------------

    async def health(self) -> dict:
        return await self._request("GET", "/health")

    async def ready(self) -> bool:
        async with self.session.get(self.base_url + "/ready") as reply:
            await reply.read()
            return reply.status == 200

    async def info(self) -> dict:
        return await self._request("GET", "/v1/bookie/info")

    async def checkpoint(self) -> dict:
        return await self._request("POST", "/v1/bookie/checkpoint", admin=True)


def _error_from(status: int, headers, body: bytes) -> BookieError:
    """The server's error class for a reply (unknown or non-JSON replies: IOFailure)."""
    import json  # noqa: PLC0415

    try:
        payload = json.loads(body)
        code, message = payload["error"], payload.get("message", "")
    except (ValueError, KeyError, TypeError):
        return IOFailure(f"HTTP {status}: {body[:200]!r}")
    error = error_for_code(code)(message)
    if isinstance(error, Unavailable) and "Retry-After" in headers:
        try:
            error.retry_after_s = float(headers["Retry-After"])
        except ValueError:
            pass
    error.http_status = status
    return error
