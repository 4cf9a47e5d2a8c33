"""Bookie endpoints of docs/http-api.md: health, readiness, info and admin actions."""

from __future__ import annotations

import hmac

from aiohttp import web

from api.server.info_json import bookie_info
from api.server.keys import BOOKIE
from bookie.errors import BadRequest, BookieError

routes = web.RouteTableDef()


class Forbidden(BookieError):
    """An admin endpoint on a non-loopback address with no admin token configured."""

    code, status = "EUA", 403


class MissingToken(BookieError):
    """An admin endpoint without (or with a wrong) bearer token, one being configured: 401
    with ``WWW-Authenticate`` (RFC 9110 §15.5.2), since credentials would let it through."""

    code, status = "EUA", 401


def require_admin(request: web.Request) -> None:
    """Admin endpoints need the bearer token when one is set; without one they are refused
    unless the server listens on a loopback address (docs/http-api.md, "Bookie endpoints")."""
    config = request.app[BOOKIE].config
    token = config.admin_token
    if token is None:
        if config.host not in ("127.0.0.1", "localhost", "::1") \
                and not config.host.startswith("127."):
            raise Forbidden("admin endpoints need admin_token on a non-loopback address")
        return
    given = request.headers.get("Authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        raise MissingToken("admin endpoint: missing or wrong Authorization: Bearer token")


@routes.get("/health")
async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


@routes.get("/ready")
async def ready(request: web.Request) -> web.Response:
    """Writable, and for a cluster bookie also registered in ZooKeeper: ready means
    serving and findable by clients (docs/cluster.md §2)."""
    bookie = request.app[BOOKIE]
    registered = bookie.registration is not None
    ready = bookie.ready and (registered or not bookie.config.metadata_service_uri)
    body = {"ready": ready, "state": bookie.state.value,
            "reasons": sorted(bookie.readonly_reasons), "registered": registered}
    return web.json_response(body, status=200 if ready else 503)


@routes.get("/v1/bookie/info")
async def info(request: web.Request) -> web.Response:
    return web.json_response(bookie_info(request.app[BOOKIE]))


@routes.post("/v1/bookie/checkpoint")
async def checkpoint(request: web.Request) -> web.Response:
    require_admin(request)
    result = await request.app[BOOKIE].checkpoint()
    return web.json_response({"lastMark": [result.mark.journal_id, result.mark.offset],
                              "entries": result.entries, "bytes": result.bytes,
                              "journalsDeleted": list(result.journals_deleted)})


@routes.post("/v1/bookie/gc")
async def gc(request: web.Request) -> web.Response:
    """Run garbage collection now; ``?force=minor|major`` also compacts now (an addition to
    docs/http-api.md, as are GET and PUT below)."""
    require_admin(request)
    force = request.query.get("force")
    if force not in (None, "minor", "major"):
        raise BadRequest("force must be minor or major")
    result = await request.app[BOOKIE].run_gc(force)
    return web.json_response(result.to_json())


@routes.get("/v1/bookie/gc")
async def gc_status(request: web.Request) -> web.Response:
    return web.json_response(request.app[BOOKIE].gc_status())


@routes.put("/v1/bookie/gc")
async def put_gc(request: web.Request) -> web.Response:
    """Suspend or resume periodic GC and unforced compaction: body {"suspended": bool}."""
    require_admin(request)
    flag = await _flag_from_body(request, "suspended")
    return web.json_response(request.app[BOOKIE].set_gc_suspended(flag))


async def _flag_from_body(request: web.Request, name: str) -> bool:
    """The boolean ``name`` of a JSON body {name: true|false}; BadRequest otherwise."""
    try:
        body = await request.json()
        flag = body[name]
    except (ValueError, KeyError, TypeError):
        raise BadRequest(f'body must be JSON {{"{name}": true|false}}') from None
    if not isinstance(flag, bool):
        raise BadRequest(f'"{name}" must be true or false')
    return flag


@routes.get("/v1/bookie/sanity")
async def sanity(request: web.Request) -> web.Response:
    return web.json_response(await request.app[BOOKIE].sanity())


@routes.get("/v1/bookie/readonly")
async def get_readonly(request: web.Request) -> web.Response:
    bookie = request.app[BOOKIE]
    return web.json_response({"readOnly": bookie.state.value == "read_only",
                              "reasons": sorted(bookie.readonly_reasons)})


@routes.put("/v1/bookie/readonly")
async def put_readonly(request: web.Request) -> web.Response:
    """The operator's read-only flag (an addition to docs/http-api.md): body {"readOnly": bool}."""
    require_admin(request)
    flag = await _flag_from_body(request, "readOnly")
    bookie = request.app[BOOKIE]
    await bookie.set_operator_readonly(flag)
    return web.json_response({"readOnly": bookie.state.value == "read_only",
                              "reasons": sorted(bookie.readonly_reasons)})
