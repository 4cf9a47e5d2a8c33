"""BookKeeper's ledger paths: ledger/list, ledger/metadata, ledger/read, ledger/delete.

A cluster bookie answers from the cluster, as BookKeeper does: the metadata in ZooKeeper,
entries read through the replicated client (api/client/ensemble.py: no recovery, no
fencing, up to the last add confirmed, as BookKeeperAdmin.readEntries), a delete of the
metadata (each bookie's GC then drops its copies). A standalone bookie has no metadata: it
lists, reads and deletes its own ledgers (as /v1/ledgers), and ledger/metadata is 404
(AC1).
"""

from __future__ import annotations

import base64

from aiohttp import web

from api.admin.common import BOOKIE, CLUSTER, as_json, method, refused_without_token, text
from api.client.metadata import LedgerMetadata
from bookie.entry import DigestType, payload_of

routes = web.RouteTableDef()
LIST_PAGE = 100        # ListLedgerService.LIST_LEDGER_BATCH_SIZE
ENTRIES_PAGE = 1000    # ReadLedgerEntryService.ENTRIES_PER_PAE
METADATA_FORMAT_VERSION = 3


def metadata_json(metadata: LedgerMetadata) -> dict:
    """LedgerMetadataImpl as Jackson writes it: its getters' names."""
    def raw(value) -> str:
        data = value.encode() if isinstance(value, str) else bytes(value)
        return base64.b64encode(data).decode()
    return {"ledgerId": metadata.ledger_id,
            "allEnsembles": {str(first): list(members) for first, members in metadata.ensembles},
            "ensembleSize": metadata.ensemble_size,
            "writeQuorumSize": metadata.write_quorum, "ackQuorumSize": metadata.ack_quorum,
            "ctime": metadata.ctime_ms, "password": raw(metadata.password),
            "digestType": DigestType(metadata.digest_type).name,
            "lastEntryId": metadata.last_entry_id, "length": metadata.length,
            "closed": metadata.closed, "state": metadata.state.value,
            "customMetadata": {k: raw(v) for k, v in metadata.custom.items()},
            "metadataFormatVersion": METADATA_FORMAT_VERSION, "ctoken": 0}


async def _ids(request: web.Request) -> list[int]:
    cluster = request.app[CLUSTER]
    if cluster.standalone:
        bookie = request.app[BOOKIE]
        found, start = [], 0
        while start is not None:
            page, start = bookie.list_ledgers(start, 10_000)
            found.extend(page)
        return found
    return sorted(await (await cluster.bk("ledger list")).store.ledger_ids())


@routes.route("*", "/api/v1/ledger/list")
async def list_ledgers(request: web.Request) -> web.Response:
    """GET {id: null}; ?print_metadata=true {id: metadata} (a standalone bookie's: null),
    with ?page=N the N-th hundred (BookKeeper's window: page 1 holds ledgers 1-99 of the
    listing, page N>1 100(N-1)..100N-1)."""
    if method(request) != "GET":
        return text("Not found method. Should be GET method", 404)
    with_metadata = request.query.get("print_metadata") == "true"
    page = int(request.query["page"]) if with_metadata and "page" in request.query else -1
    ids = await _ids(request)
    if not with_metadata:
        return as_json({str(i): None for i in ids})
    if page > 0:
        first, last = (page - 1) * LIST_PAGE, (page - 1) * LIST_PAGE + LIST_PAGE - 1
        ids = [i for n, i in enumerate(ids, start=1) if first <= n <= last]
    cluster = request.app[CLUSTER]
    if cluster.standalone:
        return as_json({str(i): None for i in ids})
    store = (await cluster.bk("ledger list")).store
    return as_json({str(i): metadata_json(await store.read(i)) for i in ids})


@routes.route("*", "/api/v1/ledger/metadata")
async def ledger_metadata(request: web.Request) -> web.Response:
    """GET ?ledger_id=N {"N": metadata}; an unknown ledger fails (500), as BookKeeper's."""
    if method(request) != "GET" or "ledger_id" not in request.query:
        return text("Not found method. Should be GET method", 404)
    ledger_id = int(request.query["ledger_id"])
    bk = await request.app[CLUSTER].bk("ledger metadata")
    return as_json({str(ledger_id): metadata_json(await bk.store.read(ledger_id))})


def _entry_range(query) -> tuple[int, int, dict]:
    """(first, last or -1, the output's page line) from BookKeeper's parameters."""
    first = int(query.get("start_entry_id", 0))
    last = int(query.get("end_entry_id", -1))
    page = int(query.get("page", -1))
    output = {}
    if page > 0:
        page_first = (page - 1) * ENTRIES_PAGE
        page_last = page_first + ENTRIES_PAGE - 1
        if first == 0 or first < page_first:
            first = page_first
        if last == -1 or last > page_last:
            last = page_last
        output["Entries for page: "] = str(page)
    return first, last, output


def _ascii(payload: bytes) -> str:
    return payload.decode("ascii", errors="replace")  # new String(bytes, US_ASCII)


@routes.route("*", "/api/v1/ledger/read")
async def read_ledger(request: web.Request) -> web.Response:
    """GET ?ledger_id=N[&start_entry_id&end_entry_id|&page] {"entryId": payload as ASCII}."""
    if method(request) != "GET" or "ledger_id" not in request.query:
        return text("Not found method. Should be GET method, with ledger_id provided", 404)
    ledger_id = int(request.query["ledger_id"])
    first, last, output = _entry_range(request.query)
    if last != -1 and first > last:
        return text(f"parameter for start_entry_id: {first} and end_entry_id: {last} "
                    f"conflict with page={request.query.get('page', -1)}", 500)
    cluster = request.app[CLUSTER]
    if cluster.standalone:
        bookie = request.app[BOOKIE]
        digest = DigestType(bookie.ledger_state(ledger_id).digest_type or DigestType.CRC32C)
        end = bookie.last_entry_id(ledger_id) if last == -1 else last
        while first <= end:
            entries = await bookie.read_range(ledger_id, first, end)
            for offset, entry in enumerate(entries):
                output[str(first + offset)] = _ascii(payload_of(entry, digest))
            first += len(entries)
        return as_json(output)
    bk = await cluster.bk("ledger read")
    metadata = await bk.store.read(ledger_id)
    reader = await bk.open_ledger(ledger_id, metadata.password, recover=False)
    lac = await reader.read_lac()
    end = lac if last == -1 else min(last, lac)
    if first <= end:
        async for entry in reader.read_range(first, end):
            output[str(entry.entry_id)] = _ascii(entry.payload)
    return as_json(output)


@routes.route("*", "/api/v1/ledger/delete")
async def delete_ledger(request: web.Request) -> web.Response:
    """DELETE ?ledger_id=N: the ledger's metadata (a cluster bookie) or this bookie's copy
    (a standalone one, as DELETE /v1/ledgers/N)."""
    if method(request) != "DELETE":
        return text("Not found method. Should be DELETE method", 404)
    if "ledger_id" not in request.query:
        return text("Not ledger found. Should provide ledger_id=<id>", 404)
    refusal = refused_without_token(request)
    if refusal is not None:
        return refusal
    ledger_id = int(request.query["ledger_id"])
    cluster = request.app[CLUSTER]
    if cluster.standalone:
        await request.app[BOOKIE].delete_ledger(ledger_id)
    else:
        await (await cluster.bk("ledger delete")).delete_ledger(ledger_id)
    return as_json(f"Deleted ledger: {ledger_id}")
