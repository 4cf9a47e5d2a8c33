"""make_app(bookie): the aiohttp application for docs/http-api.md.

The bookie is started by a ``cleanup_ctx`` in the background, so ``/health`` answers and
``/ready`` says 503 while the journal replays; the same context closes the bookie (drain,
checkpoint) when the app shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import web

from api import wire
from api.server import metrics, openapi, routes_bookie, routes_ledgers
from api.server.body_budget import BodyBudget
from api.server.error_middleware import error_middleware
from api.server.keys import BODY_BUDGET, BOOKIE, REFUSALS, REGISTRY
from api.server.refusals import RefusalLog
from bookie.node import Bookie

log = logging.getLogger("bookie.api")

BATCH_BODY_MAX = wire.BATCH_BODY_MAX  # kept importable here


def make_app(bookie: Bookie, start_bookie: bool = True) -> web.Application:
    app = web.Application(middlewares=[error_middleware],
                          client_max_size=max(BATCH_BODY_MAX, bookie.config.max_entry_size + 4))
    app[BOOKIE] = bookie
    app[BODY_BUDGET] = BodyBudget(bookie.config.request_bodies_max_bytes,
                                  bookie.config.request_body_timeout_ms / 1000)
    app[REGISTRY] = metrics.make_registry(bookie, app[BODY_BUDGET])
    app[REFUSALS] = RefusalLog("http", bookie.stats.http_refused)
    app.add_routes(routes_bookie.routes)
    app.add_routes(routes_ledgers.routes)
    app.router.add_get("/metrics", serve_metrics)
    app.router.add_get("/openapi.json", serve_openapi)
    if start_bookie:
        app.cleanup_ctx.append(_bookie_lifecycle)
    app.on_shutdown.append(_release_waiters)
    return app


async def serve_metrics(request: web.Request) -> web.Response:
    body = metrics.generate_latest(request.app[REGISTRY])
    return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE})


async def serve_openapi(request: web.Request) -> web.Response:
    config = request.app[BOOKIE].config
    return web.json_response(openapi.spec_for(config.admin_token is not None))


async def _bookie_lifecycle(app: web.Application):
    bookie = app[BOOKIE]
    task = asyncio.create_task(bookie.start(), name="bookie-start")
    task.add_done_callback(_report_start_failure)
    yield
    if not task.done():
        await asyncio.wait([task])
    await bookie.close()


def _report_start_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("bookie failed to start: %s", task.exception())


async def _release_waiters(app: web.Application) -> None:
    app[BOOKIE].begin_shutdown()


@contextlib.asynccontextmanager
async def serving(bookie: Bookie, host: str, port: int, shutdown_timeout_s: float = 30.0,
                  ssl_context=None):
    """Serve ``bookie`` on host:port (0 picks a free port); yields the bound port. With
    ``ssl_context`` (api/tls.py) the listener speaks HTTPS only: a plain HTTP request fails
    its handshake.

    On exit the bookie refuses new writes and releases long polls, then the server stops
    accepting and waits for in-flight requests (which the still-running journal completes).
    Closing the bookie itself (drain + checkpoint) is the caller's next step.
    """
    runner = web.AppRunner(make_app(bookie, start_bookie=False), handle_signals=False,
                           access_log=None, shutdown_timeout=shutdown_timeout_s)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=ssl_context)
        await site.start()
        yield runner.addresses[0][1]
    finally:
        bookie.begin_shutdown()
        await runner.cleanup()
