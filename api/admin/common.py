"""What every admin handler shares: BookKeeper's way of naming a method, its plain-text and
JSON answers, the admin-token rule, and the app's keys.

Invariants:
    AD1. A path answers the status BookKeeper's handler gives for the same request
         (bookkeeper-server/.../server/http/service/*.java); where this bookie cannot do
         what the path asks, it answers a status BookKeeper's handler uses, with a body
         that says why (docs/admin-api.md, "Differences").
    AD2. With ``admin_token`` set, every request that changes something (PUT, POST,
         DELETE) needs ``Authorization: Bearer <token>``; without one, such requests are
         refused on a non-loopback address: the /v1 rule (api/server/routes_bookie.py).
         BookKeeper's own listener has no authentication; reads stay open, as /v1's.
"""

from __future__ import annotations

import hmac
import json

from aiohttp import web

from bookie.node import Bookie

BOOKIE = web.AppKey("admin_bookie", Bookie)
#: "host:port" this bookie is known by (its registration's name; BookKeeper's bookie id).
BOOKIE_ID = web.AppKey("admin_bookie_id", str)
CLUSTER = web.AppKey("admin_cluster", object)       # api.admin.cluster.AdminCluster
STATE = web.AppKey("admin_state", dict)            # background tasks and flags of this app

#: BookKeeper's Prometheus content type (MetricsService.PROMETHEUS_CONTENT_TYPE_004).
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def method(request: web.Request) -> str:
    """The method as BookKeeper's vert.x handler sees it: POST, PUT and DELETE are
    themselves, anything else is GET (VertxAbstractHandler.convertMethod)."""
    return request.method if request.method in ("POST", "PUT", "DELETE") else "GET"


def text(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/plain")


def as_json(value, status: int = 200) -> web.Response:
    """A JSON body as BookKeeper's JsonUtil writes it (a string is a JSON string too)."""
    return web.Response(text=json.dumps(value), status=status,
                        content_type="application/json")


async def body_text(request: web.Request) -> str | None:
    """The request body, None when there is none (BookKeeper's ``getBody() == null``)."""
    if not request.body_exists:
        return None
    data = await request.text()
    return data if data.strip() else None


async def json_object(request: web.Request) -> dict | None:
    """The body as a JSON object; None without a body. A body that is not a JSON object
    raises ValueError, which the app answers 500 as BookKeeper's JsonUtil exception does."""
    raw = await body_text(request)
    if raw is None:
        return None
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"request body is not a JSON object: {raw[:80]!r}")
    return value


def refused_without_token(request: web.Request) -> web.Response | None:
    """AD2: None when the request may change something, else the refusal to send."""
    if method(request) == "GET":
        return None
    config = request.app[BOOKIE].config
    token = config.admin_token
    if token is None:
        if config.host in LOOPBACK or config.host.startswith("127."):
            return None
        return text("admin paths that change something need admin_token on a non-loopback "
                    "address", 403)
    given = request.headers.get("Authorization", "")
    if hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return None
    response = text("missing or wrong Authorization: Bearer token", 401)
    response.headers["WWW-Authenticate"] = 'Bearer realm="bookie admin"'
    return response
