"""The OpenAPI 3.0 description of docs/http-api.md, served at GET /openapi.json.

Hand-written, so it says what docs/http-api.md says (not what a framework infers). A contract test
checks that every route of the app is described here and that the document validates, and
schemathesis (every check, tests/integration/test_fuzz_api.py) that the server does exactly
what it says: every status an operation answers is listed, every value the schema allows is
accepted and every value it refuses is refused. Numeric bounds come from the modules that
enforce them (``ledgerindex.keys``, ``api.wire``), never typed twice.

What a schema cannot say, and the server still refuses with 400: an entry body whose ids
differ from the path, a digest that does not match, a digest type other than the ledger's,
a re-add with different bytes, ``to`` below ``from``.
"""

from __future__ import annotations

from api.wire import I64_MAX, LAST_SCANNED_HEADER, READ_STEP_MAX
from bookie import __version__
from ledgerindex.keys import ENTRY_ID_MAX, LEDGER_ID_MAX

_ERROR = {"$ref": "#/components/schemas/Error"}
_OCTETS = {"type": "string", "format": "binary"}


def _errors(*statuses: int) -> dict:
    text = {400: "EBADREQ or EBADDIGEST",
            401: "EUA: missing or wrong admin bearer token (WWW-Authenticate: Bearer)",
            403: "EUA: wrong master key; on an admin endpoint, a non-loopback address with "
                 "no admin token configured", 404: "ENOLEDGER or ENOENTRY",
            409: "EFENCED", 413: "ETOOLARGE", 500: "EIO",
            503: "EREADONLY or ETOOMANYREQUESTS (Retry-After set)"}
    return {str(s): {"description": text[s],
                     "content": {"application/json": {"schema": _ERROR}}}
            for s in statuses}


def _json(description: str, properties: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {
        "type": "object", "properties": properties}}}}


def _param(name: str, where: str, schema: dict, required: bool, text: str) -> dict:
    return {"name": name, "in": where, "required": required, "schema": schema,
            "description": text}


_I64 = {"type": "integer", "format": "int64"}


def _ids(low: int, high: int) -> dict:
    return {"type": "integer", "format": "int64", "minimum": low, "maximum": high}


_LEDGER = _param("ledger", "path", _ids(0, LEDGER_ID_MAX), True, "ledger id, decimal")
#: An add names an id the index can store (ledgerindex/keys.py); a read may name any i64 >= -1.
_ENTRY_WRITE = _param("entry", "path", _ids(0, ENTRY_ID_MAX), True, "entry id, decimal")
_ENTRY_READ = _param("entry", "path", _ids(-1, I64_MAX), True,
                     "entry id, decimal; -1 reads the last entry")
_KEY = _param("X-Master-Key", "header",
              {"type": "string", "pattern": "^(?:[0-9a-fA-F]{2}){1,255}$"}, True,
              "the ledger's master key, 1..255 bytes in hex (BookKeeper's: SHA-1 of the "
              "password, 20 bytes)")
_WRITE_HEADERS = [
    _KEY,
    _param("X-Digest-Type", "header", {"type": "string",
                                       "enum": ["crc32c", "crc32", "mac", "dummy"]},
           False, "digest type, on a ledger's first add"),
    _param("X-Recovery-Add", "header", {"type": "string", "enum": ["true", "false"]}, False,
           "let the add through a fence"),
    _param("X-Write-Flags", "header", {"type": "string", "enum": ["deferred-sync"]}, False,
           "acknowledge once queued; force makes it durable"),
]
#: Admin operations' security when an admin token is configured; without one the server
#: checks nothing (loopback) or refuses them all with 403 (other addresses): ``spec_for``.
_ADMIN = [{"bearer": []}]
_IDS = {"ledgerId": _I64, "entryId": _I64}


def _op(summary: str, responses: dict, parameters=(), body=None, admin=False) -> dict:
    op = {"summary": summary, "responses": responses, "parameters": list(parameters)}
    if body is not None:
        op["requestBody"] = body
    if admin:
        op["security"] = _ADMIN
        op["responses"] = {**responses, **_errors(401)}
    return op


def _body(content_type: str, text: str) -> dict:
    return {"required": True, "description": text,
            "content": {content_type: {"schema": _OCTETS}}}


_ENTRY_PATHS = {
    "/v1/ledgers/{ledger}/entries/{entry}": {
        "put": _op("Add one entry; 200 once durable in the journal",
                   {"200": _json("stored", _IDS), **_errors(400, 403, 404, 409, 413, 500, 503)},
                   [_LEDGER, _ENTRY_WRITE, *_WRITE_HEADERS],
                   _body("application/octet-stream", "a BookKeeper-framed entry")),
        "get": _op("Read one entry", {"200": {"description": "the entry bytes", "content": {
            "application/octet-stream": {"schema": _OCTETS}}}, **_errors(400, 404, 500, 503)},
                   [_LEDGER, _ENTRY_READ]),
    },
    "/v1/ledgers/{ledger}/entries": {
        "post": _op("Add a batch of entries; 200 once all are durable",
                    {"200": _json("stored", {"ledgerId": _I64, "entryIds": {
                        "type": "array", "items": _I64}}),
                     **_errors(400, 403, 404, 409, 413, 500, 503)},
                    [_LEDGER, *_WRITE_HEADERS],
                    _body("application/x-bookie-entries", "i32 length | entry frames")),
        "get": _op("Read a range of entries (at most max_read_batch or 8 MiB); with "
                   "held=true, the entries this bookie holds among from, from+step, ... <= to",
                   {"200": {"description": "a batch; with held=true, X-Last-Scanned is the "
                                           "last id examined and the batch may be empty",
                            "headers": {LAST_SCANNED_HEADER: {"schema": _I64, "description":
                                "held=true only: the reply covers the ids up to this one"}},
                            "content": {"application/x-bookie-entries": {"schema": _OCTETS}}},
                    **_errors(400, 404, 500, 503)},
                   [_LEDGER, _param("from", "query", _ids(0, I64_MAX), True, "first entry id"),
                    _param("to", "query", _ids(0, I64_MAX), True,
                           "last entry id (inclusive), not below from"),
                    _param("held", "query", {"type": "string", "enum": ["true", "false"]},
                           False, "true: skip the ids this bookie does not hold instead of "
                                  "stopping at the first (a striped ledger's bookie)"),
                    _param("step", "query", _ids(1, READ_STEP_MAX), False,
                           "read ids from, from+step, ... (default 1)")]),
    },
}

_LEDGER_PATHS = {
    "/v1/ledgers/{ledger}/fence": {
        "post": _op("Fence a ledger; 200 once durable",
                    {"200": _json("fenced", {"lac": _I64, "lastEntryId": _I64}),
                     **_errors(400, 403, 404, 500, 503)}, [_LEDGER, _KEY])},
    "/v1/ledgers/{ledger}/lac": {
        "get": _op("The ledger's LAC; long-polls with wait_for_gt and timeout_ms",
                   {"200": _json("the LAC", {"lac": _I64}), **_errors(400, 404, 503)},
                   [_LEDGER, _param("wait_for_gt", "query", _I64, False, "wait for LAC > N"),
                    _param("timeout_ms", "query", {"type": "integer", "minimum": 0,
                                                   "maximum": 600000}, False, "bound")]),
        "put": _op("Write an explicit LAC (WriteLac body); 200 once durable",
                   {"200": _json("stored", {"lac": _I64}), **_errors(400, 403, 404, 500, 503)},
                   [_LEDGER, _KEY], _body("application/octet-stream",
                                          "i64 ledgerId, i64 lac, digest"))},
    "/v1/ledgers/{ledger}/force": {
        "post": _op("Make every earlier add of the ledger durable",
                    {"200": _json("durable", {"lastEntryId": _I64}),
                     **_errors(400, 403, 404, 500, 503)}, [_LEDGER, _KEY])},
    "/v1/ledgers/{ledger}/entry-ids": {
        "get": _op("The ids of the entries this bookie stores for the ledger, as ranges "
                   "(autorecovery's replica check)",
                   {"200": _json("stored ids", {"ledgerId": _I64, "ranges": {
                       "type": "array", "items": {"type": "array", "items": _I64,
                                                  "minItems": 2, "maxItems": 2}}}),
                    **_errors(400, 404, 500, 503)}, [_LEDGER])},
    "/v1/ledgers/{ledger}": {
        "get": _op("Ledger summary", {"200": _json("summary", {
            "ledgerId": _I64, "fenced": {"type": "boolean"}, "lac": _I64,
            "lastEntryId": _I64, "entries": _I64, "bytes": _I64}), **_errors(400, 404, 503)},
                   [_LEDGER]),
        "delete": _op("Delete a ledger (admin)", {"200": _json("deleted", {}),
                                                  **_errors(400, 403, 404, 500, 503)},
                      [_LEDGER], admin=True)},
    "/v1/ledgers": {
        "get": _op("List ledgers", {"200": _json("a page", {
            "ledgers": {"type": "array", "items": _I64},
            "next": {"type": "integer", "format": "int64", "nullable": True}}),
            **_errors(400, 503)},
                   [_param("start", "query", _ids(0, LEDGER_ID_MAX), False, "first ledger id"),
                    _param("limit", "query", {"type": "integer", "minimum": 1,
                                              "maximum": 100000}, False, "")])},
}

_ANY = {"type": "object", "additionalProperties": True}
_BOOKIE_PATHS = {
    "/health": {"get": _op("The process serves", {"200": _json("ok", {
        "status": {"type": "string"}})})},
    "/ready": {"get": _op("Replay done and writable", {
        "200": _json("ready", {"ready": {"type": "boolean"}}),
        "503": _json("not ready", {"ready": {"type": "boolean"}})})},
    "/metrics": {"get": _op("Prometheus text format", {"200": {
        "description": "metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}})},
    "/openapi.json": {"get": _op("This document", {"200": _json("OpenAPI", {})})},
    "/v1/bookie/info": {"get": _op("Version, dirs, free bytes, state, journal and entry log "
                                   "ids, lastMark, last replay report",
                                   {"200": {"description": "info", "content": {
                                       "application/json": {"schema": _ANY}}}})},
    "/v1/bookie/checkpoint": {"post": _op("Run a checkpoint (admin)", {
        "200": _json("done", {"lastMark": {"type": "array", "items": _I64}}),
        **_errors(403, 500, 503)}, admin=True)},
    "/v1/bookie/gc": {
        "post": _op("Run garbage collection (admin); force=minor|major also compacts now", {
            "200": _json("what was removed", {
                "logsDeleted": {"type": "array", "items": _I64}, "bytesReclaimed": _I64,
                "bytesReclaimedByDeletion": _I64, "bytesReclaimedByCompaction": _I64,
                "logsCompacted": {"type": "array", "items": _I64},
                "quarantined": {"type": "array", "items": {"type": "string"}},
                "problems": {"type": "array", "items": {"type": "string"}}}),
            **_errors(400, 403, 500, 503)},
            [_param("force", "query", {"type": "string", "enum": ["minor", "major"]}, False,
                    "compact logs under the minor or major threshold now")], admin=True),
        "get": _op("Garbage collection status: running, last run, totals", {
            "200": _json("status", {"running": {"type": "boolean"},
                                    "suspended": {"type": "boolean"},
                                    "lastRun": {"type": "object", "nullable": True},
                                    "totals": _ANY})}),
        "put": _op("Suspend or resume periodic GC and unforced compaction (admin)", {
            "200": _json("status", {"suspended": {"type": "boolean"}}),
            **_errors(400, 403, 503)},
            body={"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["suspended"],
                "properties": {"suspended": {"type": "boolean"}}}}}}, admin=True)},
    "/v1/bookie/sanity": {"get": _op("Write and read a reserved ledger", {
        "200": _json("ok", {"ok": {"type": "boolean"}}), **_errors(500, 503)})},
    "/v1/bookie/readonly": {
        "get": _op("The read-only state", {"200": _json("state", {
            "readOnly": {"type": "boolean"}})}),
        "put": _op("Set or clear the operator's read-only flag (admin)", {
            "200": _json("state", {"readOnly": {"type": "boolean"}}),
            **_errors(400, 403, 503)},
            body={"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["readOnly"],
                "properties": {"readOnly": {"type": "boolean"}}}}}}, admin=True)},
}

SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "bookie", "version": __version__,
             "description": "A BookKeeper-compatible bookie over HTTP (docs/http-api.md)"},
    "paths": {**_ENTRY_PATHS, **_LEDGER_PATHS, **_BOOKIE_PATHS},
    "components": {
        "schemas": {"Error": {"type": "object", "required": ["error", "message"],
                              "properties": {"error": {"type": "string"},
                                             "message": {"type": "string"}}}},
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    },
}


def spec_for(admin_token_set: bool) -> dict:
    """The document as this server enforces it: admin operations need the bearer token only
    when one is configured (docs/http-api.md, "Bookie endpoints"), so without one they say ``[]``."""
    if admin_token_set:
        return SPEC
    paths = {path: {method: ({**op, "security": []} if "security" in op else op)
                    for method, op in item.items()}
             for path, item in SPEC["paths"].items()}
    return {**SPEC, "paths": paths}
