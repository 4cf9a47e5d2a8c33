"""BookKeeper's GC paths: gc (trigger, state), gc_details, gc/suspend_compaction,
gc/resume_compaction, and entry_location_compact (the location index's RocksDB), each
through ``Bookie``'s GC driver (bookie/node/gc_driver.py) or its location index.

This bookie has one suspend switch for periodic GC and unforced compaction
(PUT /v1/bookie/gc); BookKeeper has one each for major and minor compaction. So suspending
either suspends both, resuming either resumes both, and GET reports the one switch for
both (docs/admin-api.md, "Differences").
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from aiohttp import web

from api.admin.common import (BOOKIE, BOOKIE_ID, STATE, as_json, json_object, method,
                              refused_without_token, text)
from api.admin.routes_bookie import NOT_STARTED, running

routes = web.RouteTableDef()
log = logging.getLogger("bookie.admin")


def _flag(value) -> bool:
    """Jackson's Boolean.parseBoolean(String.valueOf(x)): only a true or "true" is true."""
    return str(value).lower() == "true"


@routes.route("*", "/api/v1/bookie/gc")
async def gc(request: web.Request) -> web.Response:
    """PUT starts a GC run and answers at once, as BookKeeper's forceGC does; body
    {"forceMajor": bool, "forceMinor": bool} (default: not suspended) chooses the forced
    compaction. GET {"is_in_force_gc": "true"|"false"}."""
    verb = method(request)
    bookie = request.app[BOOKIE]
    try:
        if verb == "PUT":
            refusal = refused_without_token(request)
            if refusal is not None:
                return refusal
            body = await json_object(request) or {}
            allowed = not bookie.gc.suspended
            major = _flag(body.get("forceMajor", allowed))
            minor = _flag(body.get("forceMinor", allowed))
            task = asyncio.ensure_future(
                bookie.run_gc("major" if major else "minor" if minor else None))
            request.app[STATE].setdefault("gc_runs", set()).add(task)
            task.add_done_callback(lambda t: _gc_done(request.app[STATE], t))
            await asyncio.sleep(0)  # its checks (serving, not failed) run before its 1st await
            if task.done() and task.exception() is not None:
                raise task.exception()
            return as_json(f"Triggered GC on BookieServer: {request.app[BOOKIE_ID]}")
        if verb == "GET":
            run = bookie.gc.running
            return as_json({"is_in_force_gc": str(run is not None and run.forced).lower()})
    except Exception as exc:  # noqa: BLE001 - TriggerGCService answers 400 to any failure
        return text(f"Failed to handle the request, exception: {exc}", 400)
    return text("Not allowed method. Should be PUT to trigger GC, Or GET to get Force GC "
                "state.", 405)


def _gc_done(state: dict, task: asyncio.Task) -> None:
    state["gc_runs"].discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("gc run requested on the admin port failed: %s", task.exception())


@routes.route("*", "/api/v1/bookie/gc_details")
async def gc_details(request: web.Request) -> web.Response:
    """One GarbageCollectionStatus per ledger dir, as DbLedgerStorage lists one per
    directory's collector (bookie/gc_dirs.py)."""
    if method(request) != "GET":
        return text("Only support GET method to retrieve GC details. If you want to trigger "
                    "gc, send a POST to gc endpoint.", 404)
    gcs = request.app[BOOKIE].gc
    run = gcs.running
    state = request.app[STATE]
    return as_json([_gc_status(gc_, run if run is not None and run.index == index else None,
                               state) for index, gc_ in enumerate(gcs.gcs)])


def _gc_status(gc_, run, state: dict) -> dict:
    """One dir's GarbageCollectionStatus; ``run`` the run over every dir if it is at this
    dir now."""
    kind = run.result.compaction if run is not None else None
    (minors, last_minor), (majors, last_major) = gc_.compactions["minor"], \
        gc_.compactions["major"]
    return {"forceCompacting": run is not None and run.forced and kind is not None,
            "majorCompacting": kind == "major", "minorCompacting": kind == "minor",
            "lastMajorCompactionTime": last_major, "lastMinorCompactionTime": last_minor,
            "lastEntryLocationCompactionTime": state.get("location_compacted_at", 0),
            "majorCompactionCounter": majors, "minorCompactionCounter": minors,
            "entryLocationCompactionCounter": state.get("location_compactions", 0)}


async def _switch(request: web.Request, verb_name: str, suspend: bool) -> web.Response:
    refusal = refused_without_token(request)
    if refusal is not None:
        return refusal
    body = await json_object(request)
    if body is None:
        return text("Empty request body", 400)
    major, minor = body.get(f"{verb_name}Major"), body.get(f"{verb_name}Minor")
    if major is None and minor is None:
        return text(f"No {verb_name}Major or {verb_name}Minor params found", 400)
    for value in (major, minor):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{verb_name}Major/{verb_name}Minor must be booleans")  # 500
    output, bookie_id, verb = "", request.app[BOOKIE_ID], verb_name.capitalize()
    if major:
        output = f"{verb} majorGC on BookieServer: {bookie_id}"
    if minor:  # appended with its comma even alone, as BookKeeper's handler does
        output += f", {verb} minorGC on BookieServer: {bookie_id}"
    if major or minor:
        request.app[BOOKIE].set_gc_suspended(suspend)
    return as_json(output)


@routes.route("*", "/api/v1/bookie/gc/suspend_compaction")
async def suspend_compaction(request: web.Request) -> web.Response:
    verb = method(request)
    if verb == "PUT":
        return await _switch(request, "suspend", True)
    if verb == "GET":
        suspended = str(request.app[BOOKIE].gc.suspended).lower()
        return as_json({"isMajorGcSuspended": suspended, "isMinorGcSuspended": suspended})
    return text("Not found method. Should be PUT to suspend major or minor compaction, Or "
                "GET to get compaction state.", 404)


@routes.route("*", "/api/v1/bookie/gc/resume_compaction")
async def resume_compaction(request: web.Request) -> web.Response:
    if method(request) == "PUT":
        return await _switch(request, "resume", False)
    return text("Not found method. Should be PUT to resume major or minor compaction, Or GET "
                "to get compaction state.", 404)


@routes.route("*", "/api/v1/bookie/entry_location_compact")
async def entry_location_compact(request: web.Request) -> web.Response:
    """PUT {"entryLocationRocksDBCompact": true[, "entryLocations": "<path>"]} compacts the
    entry location index (ledgerindex/locations.py) on the checkpoint thread, so never
    during a flush; answers at once. GET {"<path>": compacting}."""
    verb = method(request)
    bookie = request.app[BOOKIE]
    state = request.app[STATE]
    paths = [os.path.join(d, "locations") for d in bookie.config.index_dirs_current]
    if verb == "GET":  # one key per ledger dir's index, as BookKeeper's
        return as_json({path: bool(state.get("location_compacting")) for path in paths})
    if verb != "PUT":
        return text("Not found method. Should be PUT to trigger entry location compact, Or "
                    "GET to get entry location compact state.", 405)
    refusal = refused_without_token(request)
    if refusal is not None:
        return refusal
    try:
        body = await json_object(request)
    except ValueError as exc:  # BookKeeper's ParseJsonException: 400 with its message
        return as_json(str(exc), 400)
    if body is None:
        return text("Empty request body", 400)
    if not body.get("entryLocationRocksDBCompact", False):
        return as_json("Not trigger Entry Location RocksDB compact.")
    wanted = str(body.get("entryLocations", "") or "").strip()
    if wanted and not set(wanted.split(",")) <= set(paths):
        return as_json(f"Specified trigger compact entryLocations: {wanted} is invalid. "
                       f"Bookie entry location RocksDB path: [{', '.join(paths)}].", 400)
    if not running(bookie) or bookie.checkpoints is None:
        return text(NOT_STARTED, 503)
    if not state.get("location_compacting"):
        state["location_compacting"] = True
        loop = asyncio.get_running_loop()
        named = set(wanted.split(",")) if wanted else set(paths)  # only those, as BookKeeper
        units = [u for u, path in zip(bookie.storage.units, paths) if path in named]
        future = bookie.checkpoints.submit(lambda: [u.locations.compact() for u in units])
        future.add_done_callback(lambda f: loop.call_soon_threadsafe(_compacted, state, f))
    bookie_id = request.app[BOOKIE_ID]
    if wanted:
        return as_json(f"Triggered entry Location RocksDB: {wanted} compact on "
                       f"bookie:{bookie_id}.")
    return as_json(f"Triggered entry Location RocksDB compact on bookie:{bookie_id}")


def _compacted(state: dict, future) -> None:
    state["location_compacting"] = False
    if future.exception() is not None:
        log.warning("entry location index compaction failed: %s", future.exception())
        return
    state["location_compactions"] = state.get("location_compactions", 0) + 1
    state["location_compacted_at"] = int(time.time() * 1000)
