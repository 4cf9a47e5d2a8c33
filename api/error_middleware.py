"""The one exception -> JSON error translator (DESIGN.md §7).

A ``BookieError`` becomes ``{"error": code, "message": ...}`` with its status (and
``Retry-After`` for 503s); aiohttp's own oversize refusal becomes ``413 ETOOLARGE`` rather
than its HTML page; routing refusals (404 no route, 405) keep their status with ``EBADREQ``;
anything else is ``500 EIO`` with the traceback logged. Handlers build no errors.
"""

from __future__ import annotations

import logging

from aiohttp import web

from bookie.errors import BookieError, TooLarge, Unavailable

log = logging.getLogger("bookie.api")


def error_response(exc: BookieError) -> web.Response:
    headers = {}
    if isinstance(exc, Unavailable):
        headers["Retry-After"] = str(exc.retry_after_s)
    return web.json_response({"error": exc.code, "message": exc.message},
                             status=exc.status, headers=headers)


@web.middleware
async def error_middleware(request: web.Request, handler):
    try:
        return await handler(request)
    except BookieError as exc:
        return error_response(exc)
    except web.HTTPRequestEntityTooLarge as exc:
        return error_response(TooLarge(f"request body over the limit: {exc.text}"))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return web.json_response({"error": "EBADREQ", "message": exc.reason},
                                 status=exc.status, headers={"Allow": exc.headers["Allow"]}
                                 if "Allow" in exc.headers else None)
    except Exception:  # a bug: answer EIO and keep serving
        log.exception("unhandled error on %s %s", request.method, request.path)
        return web.json_response({"error": "EIO", "message": "internal error; see the log"},
                                 status=500)
