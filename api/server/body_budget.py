"""Bounds on request bodies against slow or greedy clients.

Invariants:
    BB1. The bytes of request bodies held at once (announced by Content-Length, or the
         route's limit when a body is chunked) never exceed ``request_bodies_max_bytes``:
         past it a request is refused at once with 503 ETOOMANYREQUESTS and Retry-After,
         before its body is read, so many greedy clients cannot exhaust memory.
    BB2. A body must arrive within ``request_body_timeout_ms``: a client that sends a header
         and then trickles (or stops) is answered 400 EBADREQ and its reservation freed,
         instead of holding a handler and its bytes forever.
Reservations are released when the handler ends, whatever it raised.

Thread-safety: event loop only (plain integer arithmetic between awaits).
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from bookie.errors import BadRequest, TooLarge, TooManyRequests


class BodyBudget:
    def __init__(self, max_bytes: int, timeout_s: float) -> None:
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.held_bytes = 0

    @contextlib.contextmanager
    def reserve(self, size: int):
        """Hold ``size`` bytes of the budget for the duration of the block (BB1)."""
        if self.held_bytes + size > self.max_bytes:
            raise TooManyRequests(f"request bodies of {self.held_bytes} bytes are held; "
                                  f"{size} more would pass request_bodies_max_bytes "
                                  f"({self.max_bytes})")
        self.held_bytes += size
        try:
            yield
        finally:
            self.held_bytes -= size

    async def read(self, request: web.Request, limit: int) -> bytes:
        """The whole body, at most ``limit`` bytes, within the timeout (BB2)."""
        if request.content_length is not None and request.content_length > limit:
            raise TooLarge(f"body of {request.content_length} bytes is over the limit of "
                           f"{limit}")
        try:
            # asyncio.timeout, not wait_for: the read stays in the handler's own task, so a
            # body already received is taken without yielding to the loop (a client that
            # sent it all and hung up still gets its add stored).
            async with asyncio.timeout(self.timeout_s):
                body = await request.read()
        except TimeoutError:
            raise BadRequest(f"the request body did not arrive within "
                             f"{self.timeout_s * 1000:.0f} ms") from None
        if len(body) > limit:
            raise TooLarge(f"body of {len(body)} bytes is over the limit of {limit}")
        return body

    def announced(self, request: web.Request, limit: int) -> int:
        """Bytes to reserve for a request: its Content-Length, or the limit if chunked."""
        length = request.content_length
        return limit if length is None else min(length, limit)
