"""BookKeeper's admin REST API for the tests: every path of its router, as
bookkeeper-http/http-server/src/main/java/org/apache/bookkeeper/http/HttpRouter.java names
them (copied by hand from the constants, in the file's order), and an admin listener over a
real bookie on 127.0.0.1."""

from __future__ import annotations

import contextlib
import dataclasses

import aiohttp

from tests.support.servers import running_bookie

#: HttpRouter.java's endpoint constants, in its order.
ROUTER_PATHS = (
    "/heartbeat", "/api/v1/config/server_config", "/metrics",
    "/api/v1/ledger/delete", "/api/v1/ledger/list", "/api/v1/ledger/metadata",
    "/api/v1/ledger/read",
    "/api/v1/bookie/list_bookies", "/api/v1/bookie/list_bookie_info",
    "/api/v1/bookie/last_log_mark", "/api/v1/bookie/list_disk_file",
    "/api/v1/bookie/expand_storage", "/api/v1/bookie/gc", "/api/v1/bookie/gc_details",
    "/api/v1/bookie/gc/suspend_compaction", "/api/v1/bookie/gc/resume_compaction",
    "/api/v1/bookie/state", "/api/v1/bookie/sanity", "/api/v1/bookie/state/readonly",
    "/api/v1/bookie/is_ready", "/api/v1/bookie/info", "/api/v1/bookie/cluster_info",
    "/api/v1/bookie/entry_location_compact",
    "/api/v1/autorecovery/status", "/api/v1/autorecovery/bookie",
    "/api/v1/autorecovery/list_under_replicated_ledger",
    "/api/v1/autorecovery/who_is_auditor", "/api/v1/autorecovery/trigger_audit",
    "/api/v1/autorecovery/lost_bookie_recovery_delay", "/api/v1/autorecovery/decommission",
)
ROUTER_SOURCE = ("/work/.mirror/apache+bookkeeper/repo",
                 "bookkeeper-http/http-server/src/main/java/org/apache/bookkeeper/http/"
                 "HttpRouter.java")


@dataclasses.dataclass
class Answer:
    status: int
    body: str

    def json(self):
        import json  # noqa: PLC0415

        return json.loads(self.body)


async def call(session: aiohttp.ClientSession, url: str, method: str = "GET",
               body: str | None = None, **headers) -> Answer:
    async with session.request(method, url, data=body, headers=headers or None) as reply:
        return Answer(reply.status, await reply.text())


@dataclasses.dataclass
class AdminBookie:
    bookie: object
    url: str        # the /v1 listener
    admin: str      # the admin listener


@contextlib.asynccontextmanager
async def admin_bookie(config):
    """A started bookie on 127.0.0.1 with both listeners (admin_port 0: a free port)."""
    from api.admin.app import admin_listener  # noqa: PLC0415 (here: the daemon tests need none)

    config = config.replace(admin_port=0)
    async with running_bookie(config) as running:
        bookie_id = running.url.removeprefix("http://")
        async with admin_listener(running.bookie, bookie_id) as port:
            yield AdminBookie(running.bookie, running.url, f"http://127.0.0.1:{port}")
