"""BookKeeper's admin REST API (docs/admin-api.md) on a standalone bookie, over real HTTP on
127.0.0.1: every path of BookKeeper's router answered with BookKeeper's status, or refused
with the documented reason; the Pulsar chart's probes against a bookie that has not
finished starting, a writable one and a read-only one."""

from __future__ import annotations

import os
import re

import aiohttp
import pytest

from api.admin.app import admin_listener
from api.client import BookieClient
from bookie.entry import frame_entry, master_key
from bookie.node import Bookie
from tests.support.bk_admin import ROUTER_PATHS, ROUTER_SOURCE, admin_bookie, call

KEY = master_key(b"admin-api")
STANDALONE = "metadata_service_uri is not set, this is a standalone bookie"


def test_the_router_list_is_bookkeepers():
    """The test's list is HttpRouter.java's constants (read here when the mirror is on this
    machine; the list in tests/support/bk_admin.py is the record otherwise)."""
    repo, path = ROUTER_SOURCE
    if os.path.isdir(repo):
        import subprocess  # noqa: PLC0415

        source = subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], check=True,
                                capture_output=True, text=True).stdout
        constants = re.findall(r'public static final String \w+\s*=\s*"([^"]+)"', source)
        assert sorted(constants) == sorted(ROUTER_PATHS)
    assert len(ROUTER_PATHS) == len(set(ROUTER_PATHS)) == 30


# (method, path with query, body, expected status, what the body holds): one row at least
# per router path. Rows run in order on one bookie holding ledger 7 (entries 0-2).
STANDALONE_CONTRACT = [
    ("GET", "/heartbeat", None, 200, "OK\n"),
    ("GET", "/api/v1/config/server_config", None, 200, '"admin_port": 0'),
    ("PUT", "/api/v1/config/server_config", '{"a": "b"}', 403, "read once at start"),
    ("GET", "/metrics", None, 200, "bookie_journal_fsync_seconds"),
    ("POST", "/metrics", None, 403, "POST is forbidden. Should be GET method"),
    ("GET", "/api/v1/ledger/list", None, 200, '{"7": null}'),
    ("GET", "/api/v1/ledger/metadata?ledger_id=7", None, 404, STANDALONE),
    ("GET", "/api/v1/ledger/metadata", None, 404, "Not found method. Should be GET method"),
    ("GET", "/api/v1/ledger/read?ledger_id=7", None, 200,
     '{"0": "entry 0", "1": "entry 1", "2": "entry 2"}'),
    ("GET", "/api/v1/ledger/read?ledger_id=7&start_entry_id=1&end_entry_id=1", None, 200,
     '{"1": "entry 1"}'),
    ("GET", "/api/v1/ledger/read?ledger_id=7&start_entry_id=2&end_entry_id=1", None, 500,
     "conflict with page"),
    ("GET", "/api/v1/bookie/list_bookies", None, 404, STANDALONE),
    ("GET", "/api/v1/bookie/list_bookie_info", None, 404, STANDALONE),
    ("GET", "/api/v1/bookie/last_log_mark", None, 200, "LastLogMark: Journal Id - "),
    ("GET", "/api/v1/bookie/list_disk_file", None, 200, '"journal files": "'),
    ("GET", "/api/v1/bookie/list_disk_file?file_type=index", None, 200,
     '{"index files": ""}'),
    ("PUT", "/api/v1/bookie/expand_storage", None, 403, "does not apply"),
    ("GET", "/api/v1/bookie/expand_storage", None, 404, "Should be PUT method"),
    ("GET", "/api/v1/bookie/gc", None, 200, '{"is_in_force_gc": "false"}'),
    ("PUT", "/api/v1/bookie/gc", '{"forceMajor": false, "forceMinor": true}', 200,
     '"Triggered GC on BookieServer: 127.0.0.1:'),
    ("POST", "/api/v1/bookie/gc", None, 405, "Not allowed method"),
    ("GET", "/api/v1/bookie/gc_details", None, 200, '"majorCompactionCounter": '),
    ("PUT", "/api/v1/bookie/gc/suspend_compaction", '{"suspendMajor": true}', 200,
     '"Suspend majorGC on BookieServer: 127.0.0.1:'),
    ("GET", "/api/v1/bookie/gc/suspend_compaction", None, 200,
     '{"isMajorGcSuspended": "true", "isMinorGcSuspended": "true"}'),
    ("PUT", "/api/v1/bookie/gc/suspend_compaction", '{}', 400,
     "No suspendMajor or suspendMinor params found"),
    ("PUT", "/api/v1/bookie/gc/resume_compaction", '{"resumeMinor": true}', 200,
     '", Resume minorGC on BookieServer: 127.0.0.1:'),
    ("GET", "/api/v1/bookie/gc/resume_compaction", None, 404, "Not found method"),
    ("GET", "/api/v1/bookie/state", None, 200,
     '{"running": true, "readOnly": false, "shuttingDown": false, '
     '"availableForHighPriorityWrites": true}'),
    ("PUT", "/api/v1/bookie/state", None, 404, "Only support GET method"),
    ("GET", "/api/v1/bookie/sanity", None, 200, '{"passed": true, "readOnly": false}'),
    ("GET", "/api/v1/bookie/state/readonly", None, 200, '{"readOnly": false}'),
    ("PUT", "/api/v1/bookie/state/readonly", '{"readOnly": false}', 200, '{"readOnly": false}'),
    ("DELETE", "/api/v1/bookie/state/readonly", None, 404, "Should be GET or PUT method"),
    ("GET", "/api/v1/bookie/is_ready", None, 200, "OK"),
    ("GET", "/api/v1/bookie/info", None, 200, '"freeSpace": '),
    ("GET", "/api/v1/bookie/cluster_info", None, 404, STANDALONE),
    ("GET", "/api/v1/bookie/entry_location_compact", None, 200, '/locations": false}'),
    ("PUT", "/api/v1/bookie/entry_location_compact", '{"entryLocationRocksDBCompact": true}',
     200, '"Triggered entry Location RocksDB compact on bookie:127.0.0.1:'),
    ("PUT", "/api/v1/bookie/entry_location_compact",
     '{"entryLocationRocksDBCompact": true, "entryLocations": "/elsewhere"}', 400,
     "is invalid"),
    ("PUT", "/api/v1/bookie/entry_location_compact", None, 400, "Empty request body"),
    ("GET", "/api/v1/autorecovery/status", None, 404, STANDALONE),
    ("PUT", "/api/v1/autorecovery/bookie", '{"bookie_src": ["127.0.0.1:1"]}', 404, STANDALONE),
    ("PUT", "/api/v1/autorecovery/bookie", None, 404, "No request body provide."),
    ("GET", "/api/v1/autorecovery/list_under_replicated_ledger", None, 404, STANDALONE),
    ("GET", "/api/v1/autorecovery/who_is_auditor", None, 404, STANDALONE),
    ("PUT", "/api/v1/autorecovery/trigger_audit", None, 404, STANDALONE),
    ("GET", "/api/v1/autorecovery/trigger_audit", None, 404, "Should be PUT method"),
    ("GET", "/api/v1/autorecovery/lost_bookie_recovery_delay", None, 404, STANDALONE),
    ("PUT", "/api/v1/autorecovery/decommission", '{"bookie_src": "127.0.0.1:1"}', 404,
     STANDALONE),
    ("PUT", "/api/v1/autorecovery/decommission", '{}', 404,
     "Request body not contains bookie_src."),
    ("DELETE", "/api/v1/ledger/delete", None, 404, "Should provide ledger_id=<id>"),
    ("GET", "/api/v1/ledger/delete?ledger_id=7", None, 404, "Should be DELETE method"),
    ("DELETE", "/api/v1/ledger/delete?ledger_id=7", None, 200, '"Deleted ledger: 7"'),
    ("GET", "/api/v1/ledger/list", None, 200, "{}"),
]


def test_the_standalone_contract_covers_every_router_path():
    covered = {row[1].split("?")[0] for row in STANDALONE_CONTRACT}
    assert covered == set(ROUTER_PATHS)


async def test_every_router_path_answers_bookkeepers_status_on_a_standalone_bookie(
        bookie_config):
    async with admin_bookie(bookie_config) as running:
        async with BookieClient(running.url) as client:
            for i in range(3):
                await client.add_entry(7, i, frame_entry(7, i, i - 1, 7 * (i + 1),
                                                         f"entry {i}".encode()), KEY)
        failures = []
        async with aiohttp.ClientSession() as session:
            for verb, path, body, status, expected in STANDALONE_CONTRACT:
                answer = await call(session, running.admin + path, verb, body)
                print(f"{verb} {path} -> {answer.status} {answer.body[:120]!r}")
                if answer.status != status or expected not in answer.body:
                    failures.append(f"{verb} {path}: {answer.status} {answer.body[:200]!r}, "
                                    f"expected {status} with {expected!r}")
            assert await call(session, running.admin + "/api/v1/nothing") == \
                type(answer)(404, "404: Not Found")
        assert failures == []


async def test_pulsar_probes_on_a_writable_then_read_only_then_writable_bookie(bookie_config):
    """Liveness GET /api/v1/bookie/state 200 throughout; readiness GET is_ready 200 "OK":
    a read-only bookie is running (BookKeeper's BookieIsReadyService), readOnly says so."""
    async with admin_bookie(bookie_config) as running:
        async with aiohttp.ClientSession() as session:
            state = await call(session, running.admin + "/api/v1/bookie/state")
            ready = await call(session, running.admin + "/api/v1/bookie/is_ready")
            assert (state.status, state.json()["running"], state.json()["readOnly"]) == \
                (200, True, False)
            assert (ready.status, ready.body) == (200, "OK")
            put = await call(session, running.admin + "/api/v1/bookie/state/readonly", "PUT",
                             '{"readOnly": true}')
            assert (put.status, put.json()) == (200, {"readOnly": True})
            assert running.bookie.readonly_reasons == {"operator"}
            state = await call(session, running.admin + "/api/v1/bookie/state")
            ready = await call(session, running.admin + "/api/v1/bookie/is_ready")
            assert (state.status, state.json()) == (200, {
                "running": True, "readOnly": True, "shuttingDown": False,
                "availableForHighPriorityWrites": True})
            assert (ready.status, ready.body) == (200, "OK")
            assert (await call(session, running.admin + "/api/v1/bookie/state/readonly")
                    ).json() == {"readOnly": True}
            put = await call(session, running.admin + "/api/v1/bookie/state/readonly", "PUT",
                             '{"readOnly": false}')
            assert (put.status, put.json()) == (200, {"readOnly": False})
            assert running.bookie.state.value == "writable"


async def test_pulsar_probes_before_the_bookie_runs_and_while_it_stops(bookie_config):
    """Not started yet (what the listener sees before replay ends): liveness 200 with
    running false, readiness 503 "Bookie is not fully started yet"; the same once it is
    stopping, with shuttingDown true."""
    config = bookie_config.replace(admin_port=0)
    bookie = Bookie(config)
    async with admin_listener(bookie, "127.0.0.1:1") as port:
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:
            state = await call(session, base + "/api/v1/bookie/state")
            ready = await call(session, base + "/api/v1/bookie/is_ready")
            assert (state.status, state.json()["running"], state.json()["shuttingDown"]) == \
                (200, False, False)
            assert (ready.status, ready.body) == (503, "Bookie is not fully started yet")
            await bookie.start()
            try:
                ready = await call(session, base + "/api/v1/bookie/is_ready")
                assert (ready.status, ready.body) == (200, "OK")
            finally:
                bookie.begin_shutdown()
            state = await call(session, base + "/api/v1/bookie/state")
            ready = await call(session, base + "/api/v1/bookie/is_ready")
            assert (state.status, state.json()["running"], state.json()["shuttingDown"]) == \
                (200, False, True)
            assert ready.status == 503
        await bookie.close()


async def test_admin_token_guards_the_paths_that_change_something(bookie_config):
    """AD2: with admin_token set, PUT/POST/DELETE need the bearer token (401 without it);
    GETs (the probes) stay open."""
    async with admin_bookie(bookie_config.replace(admin_token="s3cret")) as running:
        async with aiohttp.ClientSession() as session:
            url = running.admin + "/api/v1/bookie/state/readonly"
            refused = await call(session, url, "PUT", '{"readOnly": true}')
            assert refused.status == 401 and running.bookie.state.value == "writable"
            # AD3: the operator sees it, in the refusals metric and in the log.
            assert running.bookie.stats.http_refused[
                ("admin_state_readonly", "401", "EUA")] == 1
            allowed = await call(session, url, "PUT", '{"readOnly": true}',
                                 Authorization="Bearer s3cret")
            assert (allowed.status, allowed.json()) == (200, {"readOnly": True})
            assert (await call(session, running.admin + "/api/v1/bookie/is_ready")).status == 200
            config = await call(session, running.admin + "/api/v1/config/server_config")
            assert config.json()["admin_token"] == "<redacted>"


@pytest.mark.parametrize("body", ['{"readOnly": ', "[1]"])
async def test_a_body_that_is_not_a_json_object_is_500_as_bookkeepers(bookie_config, body):
    async with admin_bookie(bookie_config) as running:
        async with aiohttp.ClientSession() as session:
            answer = await call(session, running.admin + "/api/v1/bookie/state/readonly",
                                "PUT", body)
            assert answer.status == 500 and answer.body.startswith("ERROR handling request")
            assert running.bookie.state.value == "writable"
