"""BookKeeper's bookie paths that report or switch this bookie's state: heartbeat, config,
metrics, state, is_ready, info, state/readonly, sanity, last_log_mark, list_disk_file,
expand_storage (docs/admin-api.md). GC's paths are in routes_gc.py.

What BookKeeper's StateManager says, from this bookie's states (bookie/state.py):

    running        WRITABLE or READ_ONLY (BookKeeper: after its journal replay, until
                   shutdown); REPLAYING, STARTING, STOPPING and FAILED are not running
    readOnly       READ_ONLY, for any reason (operator, full, io)
    shuttingDown   STOPPING
    availableForHighPriorityWrites
                   the writes a read-only bookie still takes (fences, recovery adds,
                   explicit LACs) would pass: no ``io`` failure and the free space above
                   disk_reserved_bytes (ST3)
"""

from __future__ import annotations

import dataclasses
import os

from aiohttp import web

from api.admin.common import (BOOKIE, PROMETHEUS_CONTENT_TYPE, STATE, as_json, json_object,
                              method, refused_without_token, text)
from api.server import metrics
from bookie.config import SETTINGS_BY_NAME
from bookie.node import Bookie, BookieState

routes = web.RouteTableDef()
NOT_STARTED = "Bookie is not fully started yet"  # BookieIsReadyService's words


def running(bookie: Bookie) -> bool:
    return bookie.state in (BookieState.WRITABLE, BookieState.READ_ONLY)


def high_priority_writes(bookie: Bookie) -> bool:
    free = bookie.disk_monitor.min_free_bytes()
    return "io" not in bookie.readonly_reasons and (
        free is None or free >= bookie.config.disk_reserved_bytes)


@routes.route("*", "/heartbeat")
async def heartbeat(request: web.Request) -> web.Response:
    return text("OK\n")  # HeartbeatService: any method


@routes.route("*", "/api/v1/config/server_config")
async def server_config(request: web.Request) -> web.Response:
    """GET: the effective settings under this project's names, secrets redacted. PUT is
    refused: settings are read once at start (BookKeeper changes its in-memory copy)."""
    verb = method(request)
    if verb == "GET":
        config = request.app[BOOKIE].config
        values = {name: ("<redacted>" if SETTINGS_BY_NAME[name].secret and value is not None
                         else value)
                  for name, value in dataclasses.asdict(config).items()}
        return as_json(values)
    if verb == "PUT":
        return refused_without_token(request) or text(
            "settings are read once at start (TOML file, BOOKIE_* variables, flags); this "
            "bookie changes none at runtime", 403)
    return text("Request body not found. should contains k-v pairs", 404)


@routes.route("*", "/metrics")
async def serve_metrics(request: web.Request) -> web.Response:
    if method(request) != "GET":
        return text(f"{request.method} is forbidden. Should be GET method", 403)
    state = request.app[STATE]
    if "registry" not in state:  # the bookie's own collectors, as /metrics of the /v1 port
        state["registry"] = metrics.make_registry(request.app[BOOKIE])
    body = metrics.generate_latest(state["registry"])
    return web.Response(body=body, headers={"Content-Type": PROMETHEUS_CONTENT_TYPE})


@routes.route("*", "/api/v1/bookie/state")
async def bookie_state(request: web.Request) -> web.Response:
    """The Pulsar chart's liveness probe: 200 in every state the process is up in."""
    if method(request) != "GET":
        return text("Only support GET method to retrieve bookie state.", 404)
    bookie = request.app[BOOKIE]
    return as_json({"running": running(bookie),
                    "readOnly": bookie.state is BookieState.READ_ONLY,
                    "shuttingDown": bookie.state is BookieState.STOPPING,
                    "availableForHighPriorityWrites": high_priority_writes(bookie)})


@routes.route("*", "/api/v1/bookie/is_ready")
async def is_ready(request: web.Request) -> web.Response:
    """The Pulsar chart's readiness and startup probe: 200 "OK" once running and not
    shutting down; a cluster bookie also registered in ZooKeeper (BookKeeper registers
    within its start, before it runs; ours right after replay, the /ready rule)."""
    if method(request) != "GET":
        return text("Only support GET method check if bookie is ready.", 404)
    bookie = request.app[BOOKIE]
    registered = bookie.registration is not None or not bookie.config.metadata_service_uri
    if running(bookie) and registered:
        return text("OK")
    return text(NOT_STARTED, 503)


@routes.route("*", "/api/v1/bookie/info")
async def info(request: web.Request) -> web.Response:
    """freeSpace and totalSpace summed over the ledger dirs' file systems, each counted
    once, as BookKeeper sums its ledger dirs'."""
    if method(request) != "GET":
        return text("Only GET is supported.", 404)
    total, free = request.app[BOOKIE].ledger_space()
    return as_json({"freeSpace": free, "totalSpace": total})


@routes.route("*", "/api/v1/bookie/state/readonly")
async def state_readonly(request: web.Request) -> web.Response:
    """GET {"readOnly": bool}; PUT {"readOnly": bool} sets or clears the operator's
    read-only flag (persisted, as PUT /v1/bookie/readonly) and answers the state after."""
    verb = method(request)
    bookie = request.app[BOOKIE]
    if verb == "PUT":
        refusal = refused_without_token(request)
        if refusal is not None:
            return refusal
        body = await json_object(request)
        if body is None:
            raise ValueError("no request body: expected {\"readOnly\": true|false}")
        wanted = bool(body.get("readOnly", False))  # a missing field is false, as Jackson's
        if not running(bookie):
            return text(NOT_STARTED, 503)
        now_readonly = bookie.state is BookieState.READ_ONLY
        if now_readonly and not wanted and "io" in bookie.readonly_reasons:
            return text("Bookie is read-only after an I/O failure until it restarts, cannot "
                        "transit to writable mode", 400)  # BookKeeper's forceReadOnly answer
        if wanted != ("operator" in bookie.readonly_reasons):
            await bookie.set_operator_readonly(wanted)
    elif verb != "GET":
        return text("Unsupported method. Should be GET or PUT method", 404)
    return as_json({"readOnly": bookie.state is BookieState.READ_ONLY})


@routes.route("*", "/api/v1/bookie/sanity")
async def sanity(request: web.Request) -> web.Response:
    """An entry written and read back through the real path (GET /v1/bookie/sanity); a
    read-only bookie is not tested, as BookKeeper skips a forceReadOnly one."""
    if method(request) != "GET":
        return text("Only support GET method to retrieve bookie sanity state.", 404)
    bookie = request.app[BOOKIE]
    if bookie.state is BookieState.READ_ONLY:
        return as_json({"passed": False, "readOnly": True})
    try:
        passed = bool((await bookie.sanity())["ok"])
    except Exception:  # noqa: BLE001 - a failed test is the answer, as SanityTestCommand's
        passed = False
    return as_json({"passed": passed, "readOnly": False})


@routes.route("*", "/api/v1/bookie/last_log_mark")
async def last_log_mark(request: web.Request) -> web.Response:
    """The lastMark of every journal the last checkpoint persisted, in BookKeeper's words
    (one key per journal dir, as its handler)."""
    if method(request) != "GET":
        return text("Not found method. Should be GET method", 404)
    marks = request.app[BOOKIE].persisted_marks
    if not marks:
        return text("ERROR handling request: no lastMark yet, the bookie has not finished "
                    "replaying its journal", 404)
    return as_json({f"LastLogMark: Journal Id - {mark.journal_id}({mark.journal_id:x}.txn)":
                    f"Pos - {mark.offset}" for mark in marks})


def _files(directory: str, suffix: str) -> str:
    """Names ending in ``suffix``, by their hex id, each followed by a tab (BookKeeper's)."""
    try:
        names = [n for n in os.listdir(directory) if n.endswith(suffix)]
    except FileNotFoundError:
        return ""

    def key(name: str):
        stem = name[:-len(suffix)]
        try:
            return (0, int(stem, 16), name)
        except ValueError:
            return (1, 0, name)
    return "".join(f"{name}\t" for name in sorted(names, key=key))


@routes.route("*", "/api/v1/bookie/list_disk_file")
async def list_disk_file(request: web.Request) -> web.Response:
    """Journal (.txn) and entry log (.log) files; the index is RocksDB, as BookKeeper's
    DbLedgerStorage, so "index files" (.idx) is empty."""
    if method(request) != "GET":
        return text("Not found method. Should be GET method", 404)
    config = request.app[BOOKIE].config
    kind = request.query.get("file_type")
    kinds = (kind,) if kind in ("journal", "entrylog", "index") else (
        "journal", "entrylog", "index")
    found = {"journal": ("journal files", config.journal_dirs_current, ".txn"),
             "entrylog": ("entrylog files", config.ledger_dirs_current, ".log"),
             "index": ("index files", config.ledger_dirs_current, ".idx")}
    return as_json({found[k][0]: "".join(_files(d, found[k][2]) for d in found[k][1])
                    for k in kinds})


@routes.route("*", "/api/v1/bookie/expand_storage")
async def expand_storage(request: web.Request) -> web.Response:
    """Refused: the number of ledger dirs is fixed when the bookie is created (ID1 in
    bookie/identity.py), so there is no list of ledger dirs to grow."""
    if method(request) != "PUT":
        return text("Not found method. Should be PUT method", 404)
    return refused_without_token(request) or text(
        "expand_storage does not apply: this bookie's ledger dirs are fixed when it is "
        "created (ledger_dirs); adding one is not supported", 403)
