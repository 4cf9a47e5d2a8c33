"""BookKeeper's paths about the cluster's bookies: bookie/list_bookies,
bookie/list_bookie_info and bookie/cluster_info, from the registrations and cookies in
ZooKeeper (api/client/zookeeper.py, api/cluster/zookeeper.py) and each bookie's own
GET /v1/bookie/info; a standalone bookie answers each 404 (AC1)."""

from __future__ import annotations

import asyncio
import decimal

from aiohttp import web

from api.admin.common import CLUSTER, as_json, method, text
from api.client.zookeeper import writable_bookies
from api.cluster.zookeeper import ZkCookies

routes = web.RouteTableDef()
INFO_TIMEOUT_S = 5.0


async def _membership(request: web.Request, what: str) -> tuple[set[str], set[str]]:
    """(writable, read-only) registered bookies."""
    bk = await request.app[CLUSTER].bk(what)
    alive = await bk.alive_bookies()
    writable = set(await asyncio.to_thread(writable_bookies, bk.store.client, bk.store.root))
    return writable & alive, alive - writable


@routes.route("*", "/api/v1/bookie/list_bookies")
async def list_bookies(request: web.Request) -> web.Response:
    """GET {bookieId: hostname|null}: writable ones, or ?type=ro the read-only ones;
    ?print_hostnames=true gives each id's host part (a bookie id here is host:port)."""
    if method(request) != "GET":
        return text("Not found method. Should be GET method", 404)
    writable, readonly = await _membership(request, "list_bookies")
    chosen = readonly if request.query.get("type") == "ro" else writable
    hostnames = request.query.get("print_hostnames") == "true"
    return as_json({b: (b.rsplit(":", 1)[0] if hostnames else None) for b in sorted(chosen)})


def readable(value: int) -> str:
    """ListBookieInfoService.getReadable: "(1.234GB)" in powers of 1000, truncated to three
    decimals; "" below 1000."""
    units = ("", "KB", "MB", "GB", "TB")
    count, number = 0, decimal.Decimal(value)
    while number >= 1000 and count < len(units) - 1:
        number /= 1000
        count += 1
    if count == 0:
        return ""
    shown = number.quantize(decimal.Decimal("0.001"), rounding=decimal.ROUND_DOWN).normalize()
    return f"({shown:f}{units[count]})"


@routes.route("*", "/api/v1/bookie/list_bookie_info")
async def list_bookie_info(request: web.Request) -> web.Response:
    """GET each registered bookie's free and total ledger-disk bytes, in BookKeeper's text,
    and the sums under "ClusterInfo: "; a bookie that does not answer is left out
    (BookKeeper's getBookieInfo leaves out those that fail); 404 when none answers."""
    if method(request) != "GET":
        return text("Not found method. Should be GET method", 404)
    bk = await request.app[CLUSTER].bk("list_bookie_info")

    async def ask(bookie_id: str):
        try:
            info = await asyncio.wait_for(bk.client(bookie_id).info(), INFO_TIMEOUT_S)
            disk = info["disks"]["ledgers"]
            return bookie_id, int(disk["freeBytes"]), int(disk["totalBytes"])
        except Exception:  # noqa: BLE001 - not one of ours, gone, or slow: left out
            return None
    answers = [a for a in await asyncio.gather(*(ask(b) for b in sorted(
        await bk.alive_bookies()))) if a is not None]
    if not answers:
        return text("Not found any Bookie info.", 404)
    output = {}
    for bookie_id, free, total in answers:
        output[bookie_id] = (f": {{Free: {free}{readable(free)}, Total: {total}"
                             f"{readable(total)}}},")
    free = sum(a[1] for a in answers)
    total = sum(a[2] for a in answers)
    output["ClusterInfo: "] = f"{{Free: {free}{readable(free)}, Total: {total}{readable(total)}}}"
    return as_json(output)


@routes.route("*", "/api/v1/bookie/cluster_info")
async def cluster_info(request: web.Request) -> web.Response:
    """GET BookKeeper's ClusterInfo: total bookies are those with a cookie (BookKeeper's
    getAllBookies), writable and read-only those registered, the rest unavailable."""
    if method(request) != "GET":
        return text("Only GET is supported.", 404)
    cluster = request.app[CLUSTER]
    ur = await cluster.underreplication("cluster_info")
    bk = await cluster.bk("cluster_info")
    writable, readonly = await _membership(request, "cluster_info")

    def read() -> tuple:
        cookies = set(ZkCookies(bk.store.client, bk.store.root).bookie_ids())
        return ur.marked(), ur.enabled(), ur.auditor(), cookies
    marked, enabled, auditor, cookies = await asyncio.to_thread(read)
    total = len(cookies | writable | readonly)
    return as_json({"auditorElected": auditor is not None, "auditorId": auditor or "",
                    "clusterUnderReplicated": bool(marked),
                    "ledgerReplicationEnabled": enabled,
                    "totalBookiesCount": total, "writableBookiesCount": len(writable),
                    "readonlyBookiesCount": len(readonly),
                    "unavailableBookiesCount": total - len(writable) - len(readonly)})
