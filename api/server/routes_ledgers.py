"""Ledger endpoints of docs/http-api.md: parse -> one Bookie call -> render. Handlers build no errors."""

from __future__ import annotations

from aiohttp import web

from api import wire
from api.server.keys import BODY_BUDGET, BOOKIE
from api.server.metrics_bk import BATCH_ENTRIES
from api.server.routes_bookie import require_admin
from bookie.entry import DigestType, entry_ids
from bookie.errors import BadRequest

routes = web.RouteTableDef()


def _ids(request: web.Request, allow_last: bool = False) -> tuple[int, int]:
    info = request.match_info
    return (wire.parse_ledger_id(info["ledger"]),
            wire.parse_entry_id(info["entry"], allow_last=allow_last))


def _write_headers(request: web.Request) -> dict:
    headers = request.headers
    digest = headers.get("X-Digest-Type")
    return {
        "master_key": wire.parse_master_key(headers.get("X-Master-Key")),
        "digest_type": DigestType.from_header(digest) if digest is not None else None,
        "recovery": wire.parse_flag(headers.get("X-Recovery-Add"), "X-Recovery-Add"),
        "deferred_sync": wire.parse_write_flags(headers.get("X-Write-Flags")),
    }


@routes.put(r"/v1/ledgers/{ledger}/entries/{entry}")
async def add_entry(request: web.Request) -> web.Response:
    bookie = request.app[BOOKIE]
    ledger_id, entry_id = _ids(request)
    options = _write_headers(request)
    budget, limit = request.app[BODY_BUDGET], bookie.config.max_entry_size
    with budget.reserve(budget.announced(request, limit)):
        body = await budget.read(request, limit)
        if entry_ids(body) != (ledger_id, entry_id):
            raise BadRequest(f"body ids {entry_ids(body)} differ from the path ({ledger_id}, "
                             f"{entry_id})")
        await bookie.add_entry(ledger_id, entry_id, body, **options)
    # The hot path's answer, formatted directly: json.dumps of this dict cost ~4 us an add.
    return web.Response(body=b'{"ledgerId": %d, "entryId": %d}' % (ledger_id, entry_id),
                        content_type="application/json")


@routes.post(r"/v1/ledgers/{ledger}/entries")
async def add_batch(request: web.Request) -> web.Response:
    bookie = request.app[BOOKIE]
    ledger_id = wire.parse_ledger_id(request.match_info["ledger"])
    options = _write_headers(request)
    budget, limit = request.app[BODY_BUDGET], wire.BATCH_BODY_MAX
    with budget.reserve(budget.announced(request, limit)):
        body = await budget.read(request, limit)
        # The body is the entries' journal records (B1 = docs/formats.md's data record): the
        # journal takes it whole, decode_batch having checked every frame to its end.
        ids = await bookie.add_batch(ledger_id, _batch_pairs(bookie, ledger_id, body),
                                     records=bytes(body), **options)
    request[BATCH_ENTRIES] = len(ids)  # BookKeeper's ADD_ENTRY counts adds (metrics_bk.py)
    return web.json_response({"ledgerId": ledger_id, "entryIds": ids})


def _batch_pairs(bookie, ledger_id: int, body: bytes) -> list[tuple[int, bytes]]:
    entries = wire.decode_batch(body, bookie.config.max_entry_size,
                                bookie.config.max_read_batch * 10)
    pairs = []
    for entry in entries:
        body_ledger, entry_id = entry_ids(entry)
        if body_ledger != ledger_id or entry_id < 0:
            raise BadRequest(f"batch entry ids ({body_ledger}, {entry_id}) do not belong to "
                             f"ledger {ledger_id}")
        pairs.append((entry_id, entry))
    return pairs


@routes.get(r"/v1/ledgers/{ledger}/entries/{entry}")
async def read_entry(request: web.Request) -> web.Response:
    ledger_id, entry_id = _ids(request, allow_last=True)
    data = await request.app[BOOKIE].read_entry(ledger_id, entry_id)
    return web.Response(body=data, content_type=wire.ENTRY_CONTENT_TYPE)


@routes.get(r"/v1/ledgers/{ledger}/entries")
async def read_range(request: web.Request) -> web.Response:
    bookie = request.app[BOOKIE]
    ledger_id = wire.parse_ledger_id(request.match_info["ledger"])
    query = request.query
    if "from" not in query or "to" not in query:
        raise BadRequest("range read needs from= and to=")
    first = wire.parse_entry_id(query["from"])
    last = wire.parse_entry_id(query["to"])
    if last < first:
        raise BadRequest(f"to={last} is below from={first}")
    held = wire.parse_strict_flag(query.get("held", "false"), "held")
    step = wire.parse_i64(query.get("step", "1"), "step")
    if not 1 <= step <= wire.READ_STEP_MAX:
        raise BadRequest(f"step {step} is not within 1..{wire.READ_STEP_MAX}")
    if not held:
        entries = await bookie.read_range(ledger_id, first, last, step)
        return web.Response(body=wire.encode_batch(entries),
                            content_type=wire.BATCH_CONTENT_TYPE)
    entries, scanned = await bookie.read_held(ledger_id, first, last, step)
    return web.Response(body=wire.encode_batch(entries), content_type=wire.BATCH_CONTENT_TYPE,
                        headers={wire.LAST_SCANNED_HEADER: str(scanned)})


@routes.post(r"/v1/ledgers/{ledger}/fence")
async def fence(request: web.Request) -> web.Response:
    ledger_id = wire.parse_ledger_id(request.match_info["ledger"])
    key = wire.parse_master_key(request.headers.get("X-Master-Key"))
    lac, last = await request.app[BOOKIE].fence(ledger_id, key)
    return web.json_response({"lac": lac, "lastEntryId": last})


@routes.get(r"/v1/ledgers/{ledger}/lac")
async def read_lac(request: web.Request) -> web.Response:
    ledger_id = wire.parse_ledger_id(request.match_info["ledger"])
    query = request.query
    wait_for_gt = (wire.parse_i64(query["wait_for_gt"], "wait_for_gt")
                   if "wait_for_gt" in query else None)
    timeout_ms = wire.parse_i64(query.get("timeout_ms", "0"), "timeout_ms")
    if not 0 <= timeout_ms <= 600_000:
        raise BadRequest(f"timeout_ms {timeout_ms} is not within 0..600000")
    lac = await request.app[BOOKIE].read_lac(ledger_id, wait_for_gt, timeout_ms)
    return web.json_response({"lac": lac})


@routes.put(r"/v1/ledgers/{ledger}/lac")
async def write_lac(request: web.Request) -> web.Response:
    bookie = request.app[BOOKIE]
    ledger_id = wire.parse_ledger_id(request.match_info["ledger"])
    key = wire.parse_master_key(request.headers.get("X-Master-Key"))
    budget = request.app[BODY_BUDGET]
    with budget.reserve(budget.announced(request, 4096)):
        body = await budget.read(request, 4096)
        lac = await bookie.write_lac(ledger_id, key, body)
    return web.json_response({"lac": lac})


@routes.post(r"/v1/ledgers/{ledger}/force")
async def force(request: web.Request) -> web.Response:
    ledger_id = wire.parse_ledger_id(request.match_info["ledger"])
    key = wire.parse_master_key(request.headers.get("X-Master-Key"))
    last = await request.app[BOOKIE].force(ledger_id, key)
    return web.json_response({"lastEntryId": last})


@routes.get(r"/v1/ledgers/{ledger}")
async def ledger_info(request: web.Request) -> web.Response:
    ledger_id = wire.parse_ledger_id(request.match_info["ledger"])
    return web.json_response(await request.app[BOOKIE].ledger_info(ledger_id))


@routes.get(r"/v1/ledgers/{ledger}/entry-ids")
async def entry_id_ranges(request: web.Request) -> web.Response:
    ledger_id = wire.parse_ledger_id(request.match_info["ledger"])
    ranges = await request.app[BOOKIE].entry_id_ranges(ledger_id)
    return web.json_response({"ledgerId": ledger_id, "ranges": ranges})


@routes.delete(r"/v1/ledgers/{ledger}")
async def delete_ledger(request: web.Request) -> web.Response:
    require_admin(request)
    ledger_id = wire.parse_ledger_id(request.match_info["ledger"])
    await request.app[BOOKIE].delete_ledger(ledger_id)
    return web.json_response({})


@routes.get("/v1/ledgers")
async def list_ledgers(request: web.Request) -> web.Response:
    query = request.query
    start = wire.parse_ledger_id(query.get("start", "0"))
    limit = wire.parse_i64(query.get("limit", "1000"), "limit")
    if not 1 <= limit <= 100_000:
        raise BadRequest(f"limit {limit} is not within 1..100000")
    ids, following = request.app[BOOKIE].list_ledgers(start, limit)
    return web.json_response({"ledgers": ids, "next": following})
