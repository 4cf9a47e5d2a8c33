"""The admin listener: ``admin_listener`` serves BookKeeper's admin REST API on
``admin_port`` beside the /v1 listener (bookie/cli.py), for as long as the bookie runs.

It opens before the journal replay, as the /v1 listener does, so the Pulsar chart's
liveness probe (GET /api/v1/bookie/state) answers 200 during a long replay and its
readiness probe (GET /api/v1/bookie/is_ready) 503 until the bookie serves. BookKeeper's own
listener opens only after replay, refusing connections until then (docs/admin-api.md).

Unknown paths are aiohttp's 404, as vert.x's router answers them; an exception a handler
does not turn into BookKeeper's answer is 500 with its message (vert.x's answer to a
handler that throws is 500 too), logged.

Invariant:
    AD3. Every answer of 400 or more is an operator-visible refusal: counted in
         bookie_http_requests_refused_total{op="admin_<handler>",code,error} (error EUA
         for a missing or wrong token, ADMIN otherwise) and logged with the method, path
         and peer, rate-limited as every refusal (api/server/refusals.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import web

from api.admin import (routes_autorecovery, routes_bookie, routes_cluster, routes_gc,
                       routes_ledger)
from api.admin.cluster import AdminCluster, NotCluster
from api.admin.common import BOOKIE, BOOKIE_ID, CLUSTER, STATE, text
from api.server.metrics import route_op
from api.server.refusals import RefusalLog
from bookie.node import Bookie

log = logging.getLogger("bookie.admin")
#: AD3: every answer of 400 or more is counted in bookie_http_requests_refused_total (op
#: ``admin_<handler>``, its status, EUA for a missing token) and logged, rate-limited.
REFUSALS = web.AppKey("admin_refusals", RefusalLog)
BODY_MAX = 1 << 20  # every admin body is a small JSON object


@web.middleware
async def _answers(request: web.Request, handler):
    try:
        response = await handler(request)
    except NotCluster as exc:
        response = text(str(exc), 404)
    except web.HTTPException:
        raise
    except Exception as exc:  # noqa: BLE001 - a failure BookKeeper's handler does not name
        log.warning("admin %s %s failed: %s", request.method, request.path_qs, exc)
        response = text(f"ERROR handling request: {exc}", 500)
    if response.status >= 400:  # AD3
        error = "EUA" if response.status in (401, 403) else "ADMIN"
        request.app[REFUSALS].refused(
            (f"admin_{route_op(request)}", str(response.status), error),
            f"{request.method} {request.path}", request.remote)
    return response


def make_admin_app(bookie: Bookie, bookie_id: str) -> web.Application:
    app = web.Application(middlewares=[_answers], client_max_size=BODY_MAX)
    app[BOOKIE] = bookie
    app[BOOKIE_ID] = bookie_id
    app[CLUSTER] = AdminCluster(bookie.config, bookie_id)
    app[STATE] = {}
    app[REFUSALS] = RefusalLog("admin", bookie.stats.http_refused)
    for module in (routes_bookie, routes_gc, routes_cluster, routes_autorecovery,
                   routes_ledger):
        app.add_routes(module.routes)
    app.on_cleanup.append(_close)
    return app


async def _close(app: web.Application) -> None:
    """Background work handed off by PUTs stops with the listener; ZooKeeper's markers
    keep what it did (the replication workers carry on without it)."""
    state = app[STATE]
    tasks = [*state.get("moves", ()), *state.get("gc_runs", ())]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await app[CLUSTER].close()


@contextlib.asynccontextmanager
async def admin_listener(bookie: Bookie, bookie_id: str, ssl_context=None):
    """BookKeeper's admin API on ``admin_port`` when it is set (yields its bound port),
    else nothing (yields None). ``ssl_context``: the /v1 listener's, so HTTPS there means
    HTTPS here (BookKeeper's httpServerTlsEnable)."""
    config = bookie.config
    if config.admin_port is None:
        yield None
        return
    runner = web.AppRunner(make_admin_app(bookie, bookie_id), handle_signals=False,
                           access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, config.host, config.admin_port, reuse_address=True,
                           ssl_context=ssl_context)
        await site.start()
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
