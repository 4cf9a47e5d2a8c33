"""BookKeeper's autorecovery paths: status, bookie, list_under_replicated_ledger,
who_is_auditor, trigger_audit, lost_bookie_recovery_delay, decommission. Each reads or
writes autorecovery's tree in ZooKeeper (BookKeeper's own layout, api/cluster/
underreplication.py) on the admin listener's session (api/admin/cluster.py); a standalone
bookie answers each 404 (AC1)."""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import web

from api.admin.cluster import NotCluster
from api.admin.common import (CLUSTER, STATE, as_json, body_text, json_object, method,
                              refused_without_token, text)
from api.admin.moving import move_off

routes = web.RouteTableDef()
log = logging.getLogger("bookie.admin")


def _true(value) -> bool:
    return str(value).lower() == "true"  # Java's Boolean.parseBoolean


@routes.route("*", "/api/v1/autorecovery/status")
async def status(request: web.Request) -> web.Response:
    """GET {"enabled": bool}; PUT ?enabled=true|false switches it (the disable znode)."""
    verb = method(request)
    if verb not in ("GET", "PUT"):
        return text("Not found method. Should be GET or PUT method", 404)
    ur = await request.app[CLUSTER].underreplication("autorecovery status")
    if verb == "PUT":
        refusal = refused_without_token(request)
        if refusal is not None:
            return refusal
        if "enabled" not in request.query:
            return text(f"Param 'enabled' not found in {dict(request.query)}", 400)
        await asyncio.to_thread(ur.set_enabled, _true(request.query["enabled"]))
    return as_json({"enabled": await asyncio.to_thread(ur.enabled)})


def _hand_off(request: web.Request, coroutine) -> None:
    """Run the move in the background; keep it referenced and its failure logged."""
    tasks = request.app[STATE].setdefault("moves", set())
    task = asyncio.ensure_future(coroutine)
    tasks.add(task)

    def done(t: asyncio.Task) -> None:
        tasks.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.error("moving a bookie's copies failed: %s", t.exception())
    task.add_done_callback(done)


@routes.route("*", "/api/v1/autorecovery/bookie")
async def recover_bookie(request: web.Request) -> web.Response:
    """PUT {"bookie_src": ["host:port"], "delete_cookie": bool}: its ledgers are marked
    under-replicated until none names it (api/admin/moving.py), then its cookie deleted if
    asked. BookKeeper checks the body before the method, so does this."""
    raw = await body_text(request)
    if raw is None:
        return text("No request body provide.", 404)
    try:
        body = json.loads(raw)
        sources = body.get("bookie_src") or []
        if isinstance(sources, str) or not all(isinstance(s, str) for s in sources):
            raise ValueError("bookie_src must be a list of bookie ids")
    except (ValueError, AttributeError) as exc:
        return text(f"ERROR parameters: {exc}", 404)
    if method(request) != "PUT" or not sources:
        return text("Not found method. Should be PUT method", 404)
    refusal = refused_without_token(request)
    if refusal is not None:
        return refusal
    cluster = request.app[CLUSTER]
    ur = await cluster.underreplication("autorecovery bookie")
    bk = await cluster.bk("autorecovery bookie")
    _hand_off(request, move_off(bk, ur, sources[0], decommission=False,
                                delete_cookie=_true(body.get("delete_cookie", False))))
    return text("Success send recovery request command.")


@routes.route("*", "/api/v1/autorecovery/list_under_replicated_ledger")
async def list_under_replicated(request: web.Request) -> web.Response:
    """GET [ledger ids], or with ?printmissingreplica {id: [missing replicas]};
    ?missingreplica=B keeps those missing B, ?excludingmissingreplica=B drops them; 404
    when none is marked."""
    if method(request) != "GET":
        return text("Not found method. Should be GET method", 404)
    including = request.query.get("missingreplica", "").strip()
    excluding = request.query.get("excludingmissingreplica", "").strip()
    with_replicas = "printmissingreplica" in request.query
    try:
        ur = await request.app[CLUSTER].underreplication("list_under_replicated_ledger")

        def collect() -> dict[int, list[str]]:
            found = {}
            for ledger_id in ur.marked():
                marker = ur.marker(ledger_id)
                if marker is None:
                    continue  # replicated meanwhile
                replicas = marker[0]
                if (including and including not in replicas) or \
                        (excluding and excluding in replicas):
                    continue
                found[ledger_id] = replicas
            return found
        found = await asyncio.to_thread(collect)
    except NotCluster:
        raise  # AC1's own refusal
    except Exception as exc:  # noqa: BLE001 - ListUnderReplicatedLedgerService's 404
        return text(f"Exception when get.{exc}", 404)
    if not found:
        return text("No under replicated ledgers found", 404)
    if with_replicas:
        return as_json({str(k): v for k, v in found.items()})
    return as_json(list(found))


@routes.route("*", "/api/v1/autorecovery/who_is_auditor")
async def who_is_auditor(request: web.Request) -> web.Response:
    if method(request) != "GET":
        return text("Not found method. Should be GET method", 404)
    ur = await request.app[CLUSTER].underreplication("who_is_auditor")
    auditor = await asyncio.to_thread(ur.auditor)
    if auditor is None:
        return text("No auditor elected", 404)
    return text(f"Auditor: {auditor}")


@routes.route("*", "/api/v1/autorecovery/trigger_audit")
async def trigger_audit(request: web.Request) -> web.Response:
    """PUT: lostBookieRecoveryDelay written again with its own value, which the auditor
    takes as BookKeeper's triggerAudit (AU4): bookies gone now count as lost at once."""
    if method(request) != "PUT":
        return text("Not found method. Should be PUT method", 404)
    refusal = refused_without_token(request)
    if refusal is not None:
        return refusal
    cluster = request.app[CLUSTER]
    ur = await cluster.underreplication("trigger_audit")

    def trigger() -> None:
        if not ur.enabled():
            raise RuntimeError("Autorecovery is disabled. So giving up!")
        delay = ur.lost_bookie_delay_s(cluster.config.lost_bookie_recovery_delay_s)
        ur.set_lost_bookie_delay_s(delay)
    try:
        await asyncio.to_thread(trigger)
    except Exception as exc:  # noqa: BLE001 - TriggerAuditService's 404 for any failure
        return text(f"Exception when do operation.{exc}", 404)
    return text("Success trigger audit.")


@routes.route("*", "/api/v1/autorecovery/lost_bookie_recovery_delay")
async def lost_bookie_recovery_delay(request: web.Request) -> web.Response:
    """GET the delay stored in ZooKeeper; PUT {"delay_seconds": N} stores it."""
    verb = method(request)
    if verb == "PUT":
        refusal = refused_without_token(request)
        if refusal is not None:
            return refusal
        body = await json_object(request)
        if body is None:
            return text("Null request body for lostBookieRecoveryDelay.", 404)
        if "delay_seconds" not in body:
            return text("Request body not contains lostBookieRecoveryDelay.", 404)
        seconds = body["delay_seconds"]
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
            raise ValueError(f"delay_seconds must be an integer >= 0, not {seconds!r}")  # 500
        ur = await request.app[CLUSTER].underreplication("lost_bookie_recovery_delay")
        await asyncio.to_thread(ur.set_lost_bookie_delay_s, seconds)
        return text(f"Success set lostBookieRecoveryDelay to {seconds}")
    if verb == "GET":
        ur = await request.app[CLUSTER].underreplication("lost_bookie_recovery_delay")
        written = await asyncio.to_thread(ur.lost_bookie_delay_written)
        if written is None:
            return text("Exception when get lostBookieRecoveryDelay.no lostBookieRecoveryDelay "
                        "in ZooKeeper yet: no auditor has run", 404)
        return text(f"lostBookieRecoveryDelay value: {written[0]}")
    return text("Not found method. Should be PUT method", 404)


@routes.route("*", "/api/v1/autorecovery/decommission")
async def decommission(request: web.Request) -> web.Response:
    """PUT {"bookie_src": "host:port"[, "delete_cookie": true]}: `bookie shell
    decommission` in the background (api/admin/moving.py, MV1 and MV2)."""
    if method(request) != "PUT":
        return text("Not found method. Should be PUT method", 404)
    refusal = refused_without_token(request)
    if refusal is not None:
        return refusal
    body = await json_object(request)
    if body is None:
        return text("Null request body for DecommissionService.", 404)
    source = body.get("bookie_src")
    if not isinstance(source, str) or ":" not in source:
        return text("Request body not contains bookie_src.", 404)
    cluster = request.app[CLUSTER]
    ur = await cluster.underreplication("decommission")
    bk = await cluster.bk("decommission")
    _hand_off(request, move_off(bk, ur, source, decommission=True,
                                delete_cookie=_true(body.get("delete_cookie", False))))
    return text(f"Success send decommission Bookie command {source}")
