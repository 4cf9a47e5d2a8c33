"""The one exception -> JSON error translator (docs/design.md §7), and the request timer.

A ``BookieError`` becomes ``{"error": code, "message": ...}`` with its status (and
``Retry-After`` for 503s); aiohttp's own oversize refusal becomes ``413 ETOOLARGE`` rather
than its HTML page; routing refusals (404 no route, 405) keep their status with ``EBADREQ``;
anything else is ``500 EIO`` with the traceback logged. Handlers build no errors.

The latency of every request, errors included, is recorded here too (``api/server/metrics.py``
names the metric): one middleware, not two, since each layer costs a coroutine frame and a
call on every add. So is every error answer, counted by route, status and code and logged
at WARN with its peer, rate-limited (``api/server/refusals.py``); answers a handler returns
itself (``/ready``'s 503 while replaying) report a state and are no refusal.
"""

from __future__ import annotations

import logging
import time

from aiohttp import web

from api.server.keys import REFUSALS
from api.server.metrics import observe_request, route_op
from bookie.errors import BookieError, TooLarge, Unavailable

log = logging.getLogger("bookie.api")


def error_response(exc: BookieError) -> web.Response:
    headers = {}
    if isinstance(exc, Unavailable):
        headers["Retry-After"] = str(exc.retry_after_s)
    if exc.status == 401:  # only the admin bearer token answers 401
        headers["WWW-Authenticate"] = 'Bearer realm="bookie admin"'
    return web.json_response({"error": exc.code, "message": exc.message},
                             status=exc.status, headers=headers)


@web.middleware
async def error_middleware(request: web.Request, handler):
    started = time.perf_counter()
    try:
        response = await handler(request)
    except Exception as exc:  # noqa: BLE001 (translated, a bug logged, by _translate)
        response, code, message = _translate(request, exc)
        _refused(request, response.status, code, message)
    observe_request(request, response.status, time.perf_counter() - started)
    return response


def _refused(request: web.Request, status: int, code: str, message: str) -> None:
    """Counted and logged (rate-limited) with the peer, as bookie_port does
    (docs/operations.md §3)."""
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    request.app[REFUSALS].refused((route_op(request), str(status), code), message,
                                  peer or request.remote)


def _translate(request: web.Request, exc: Exception) -> tuple[web.Response, str, str]:
    """The answer to ``exc``, with its error code and message."""
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        exc = TooLarge(f"request body over the limit: {exc.text}")
    if isinstance(exc, BookieError):
        return error_response(exc), exc.code, exc.message
    if isinstance(exc, web.HTTPException):
        if exc.status < 400:
            raise exc
        return web.json_response({"error": "EBADREQ", "message": exc.reason},
                                 status=exc.status, headers={"Allow": exc.headers["Allow"]}
                                 if "Allow" in exc.headers else None), "EBADREQ", exc.reason
    log.error("unhandled error on %s %s", request.method, request.path, exc_info=exc)
    return web.json_response({"error": "EIO", "message": "internal error; see the log"},
                             status=500), "EIO", f"internal error: {exc!r}"
