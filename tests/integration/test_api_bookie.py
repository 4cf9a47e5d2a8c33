"""Bookie and admin endpoints over real HTTP on 127.0.0.1: delete, list, info, metrics,
OpenAPI, sanity, read-only, admin token, back-pressure, long-poll bounds."""

from __future__ import annotations

import asyncio
import dataclasses

import aiohttp
import pytest
from openapi_spec_validator import validate

from api.client import BookieClient
from bookie.entry import frame_entry, frame_lac, master_key
from bookie.errors import (BadRequest, NoLedger, ReadOnly, TooManyRequests, Unauthorized)
from tests.support.servers import running_bookie

KEY = master_key(b"admin-tests")


def entry(ledger_id, entry_id, payload=b"y" * 200):
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id, payload)


async def test_delete_makes_entries_unreadable_at_once_and_later_adds_404(client):
    for i in range(3):
        await client.add_entry(1, i, entry(1, i), KEY)
    await client.checkpoint()
    await client.add_entry(1, 3, entry(1, 3), KEY)  # one in the write cache too
    assert await client.delete_ledger(1) == {}
    for i in range(4):
        with pytest.raises(NoLedger):
            await client.read_entry(1, i)
    with pytest.raises(NoLedger):
        await client.add_entry(1, 4, entry(1, 4), KEY)
    with pytest.raises(NoLedger):
        await client.add_entry(1, 0, entry(1, 0), KEY, recovery=True)
    assert await client.delete_ledger(1) == {}  # a retried delete succeeds
    with pytest.raises(NoLedger):
        await client.delete_ledger(999)


async def test_deleted_ledger_stays_deleted_after_restart(bookie_config):
    async with running_bookie(bookie_config) as running:
        async with BookieClient(running.url) as client:
            for i in range(3):
                await client.add_entry(2, i, entry(2, i), KEY)
            await client.delete_ledger(2)
    async with running_bookie(bookie_config) as running:  # replay sees the adds again
        async with BookieClient(running.url) as client:
            with pytest.raises(NoLedger):
                await client.read_entry(2, 0)
            assert 2 not in (await client.list_ledgers())["ledgers"]


async def test_list_ledgers_pages(client):
    for ledger_id in (5, 7, 9, 11, 13):
        await client.add_entry(ledger_id, 0, entry(ledger_id, 0), KEY)
    page = await client.list_ledgers(start=0, limit=2)
    assert page == {"ledgers": [5, 7], "next": 9}
    page = await client.list_ledgers(start=page["next"], limit=2)
    assert page == {"ledgers": [9, 11], "next": 13}
    assert await client.list_ledgers(start=13, limit=2) == {"ledgers": [13], "next": None}
    with pytest.raises(BadRequest):
        await client.list_ledgers(start=0, limit=0)


async def test_ledger_info_counts_entries_and_bytes(client):
    datas = [entry(20, i, b"z" * (100 + i)) for i in range(5)]
    for i, data in enumerate(datas[:3]):
        await client.add_entry(20, i, data, KEY)
    await client.checkpoint()
    for i, data in enumerate(datas[3:], start=3):
        await client.add_entry(20, i, data, KEY)
    info = await client.ledger_info(20)
    assert info == {"ledgerId": 20, "fenced": False, "lac": 3, "lastEntryId": 4,
                    "entries": 5, "bytes": sum(len(d) for d in datas)}


async def test_bookie_info_names_dirs_state_ids_and_marks(client, bookie_config):
    await client.add_entry(21, 0, entry(21, 0), KEY)
    await client.checkpoint()
    info = await client.info()
    assert info["state"] == "writable" and info["readOnlyReasons"] == []
    assert info["dirs"] == {"journal": bookie_config.journal_dir,
                            "ledgers": bookie_config.ledger_dir,
                            "journalDirs": [bookie_config.journal_dir],
                            "ledgerDirs": [bookie_config.ledger_dir],
                            "indexDirs": [bookie_config.ledger_dir]}
    assert info["lastMarks"] == [info["lastMark"]] and len(info["ledgersByDir"]) == 1
    assert info["freeBytes"]["journal"] > 0 and info["currentJournalId"] > 0
    assert info["currentEntryLogId"] is not None and info["lastMark"][0] > 0
    assert info["replay"]["files"] == [] and info["instanceId"]
    assert info["version"]


async def test_metrics_use_prometheus_names(client, server):
    await client.add_entry(22, 0, entry(22, 0), KEY)
    await client.checkpoint()
    async with aiohttp.ClientSession() as session:
        async with session.get(server.url + "/metrics") as reply:
            assert reply.status == 200
            text = await reply.text()
    assert 'bookie_request_seconds_count{code="200",op="add_entry"} 1.0' in text
    for name in (
                 "bookie_journal_fsync_seconds_count", "bookie_journal_group_entries_sum",
                 "bookie_journal_flush_total{reason=", "bookie_journal_queue_records",
                 "bookie_writable 1.0", "bookie_disk_free_bytes{dir=\"journal\"}",
                 "bookie_checkpoint_seconds_bucket{le=", "bookie_replay_records",
                 "bookie_read_only{reason=\"io\"} 0.0"):
        assert name in text, name


async def test_openapi_describes_every_route_and_validates(server):
    async with aiohttp.ClientSession() as session:
        async with session.get(server.url + "/openapi.json") as reply:
            spec = await reply.json()
    validate(spec)
    from api.server.app import make_app

    app = make_app(server.bookie, start_bookie=False)
    routes = {(r.method.lower(), r.resource.canonical) for r in app.router.routes()
              if r.method != "HEAD"}
    described = {(method, path) for path, ops in spec["paths"].items() for method in ops}
    assert routes == described


async def test_sanity_writes_and_reads_through_the_real_path(server):
    async with aiohttp.ClientSession() as session:
        for expected_entry in (0, 1):
            async with session.get(server.url + "/v1/bookie/sanity") as reply:
                body = await reply.json()
                assert reply.status == 200 and body["ok"] and body["entryId"] == expected_entry
    async with BookieClient(server.url) as client:
        assert (await client.list_ledgers())["ledgers"] == []  # the reserved ledger is hidden


async def test_operator_read_only_refuses_adds_but_not_fence_recovery_or_lac(bookie_config):
    async with running_bookie(bookie_config) as running:
        async with aiohttp.ClientSession() as session, BookieClient(running.url) as client:
            await client.add_entry(30, 0, entry(30, 0), KEY)
            async with session.put(running.url + "/v1/bookie/readonly",
                                   json={"readOnly": True}) as reply:
                assert (await reply.json()) == {"readOnly": True, "reasons": ["operator"]}
            with pytest.raises(ReadOnly) as refused:
                await client.add_entry(30, 1, entry(30, 1), KEY)
            assert refused.value.retry_after_s > 0
            assert not await client.ready()
            await client.add_entry(30, 1, entry(30, 1), KEY, recovery=True)
            await client.write_lac(30, KEY, frame_lac(30, 1))
            assert (await client.fence(30, KEY))["lastEntryId"] == 1
            assert await client.read_entry(30, 1) == entry(30, 1)
    async with running_bookie(bookie_config) as running:  # the flag is persisted
        async with aiohttp.ClientSession() as session, BookieClient(running.url) as client:
            with pytest.raises(ReadOnly):
                await client.add_entry(31, 0, entry(31, 0), KEY)
            async with session.put(running.url + "/v1/bookie/readonly",
                                   json={"readOnly": False}) as reply:
                assert (await reply.json())["readOnly"] is False
            await client.add_entry(31, 0, entry(31, 0), KEY)


async def test_admin_endpoints_need_the_bearer_token_when_one_is_set(bookie_config):
    config = dataclasses.replace(bookie_config, admin_token="s3cret")
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as anonymous:
            with pytest.raises(Unauthorized):
                await anonymous.checkpoint()
            await anonymous.add_entry(40, 0, entry(40, 0), KEY)
            with pytest.raises(Unauthorized):
                await anonymous.delete_ledger(40)
        async with BookieClient(running.url, admin_token="wrong") as wrong:
            with pytest.raises(Unauthorized):
                await wrong.checkpoint()
        async with BookieClient(running.url, admin_token="s3cret") as admin:
            assert "lastMark" in await admin.checkpoint()
            assert await admin.delete_ledger(40) == {}


async def test_admin_endpoints_are_refused_on_a_non_loopback_address_without_a_token(
        bookie_config):
    # Configured for all interfaces but served on 127.0.0.1 by the fixture: no traffic leaves.
    config = dataclasses.replace(bookie_config, host="0.0.0.0")
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as client:
            with pytest.raises(Unauthorized, match="non-loopback"):
                await client.checkpoint()


async def test_full_journal_queue_is_503_with_retry_after_and_stores_nothing(bookie_config):
    config = dataclasses.replace(bookie_config, journal_queue_max_bytes=1024 * 1024)
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as client:
            await client.add_entry(50, 0, entry(50, 0), KEY)
            batch = [entry(50, i, b"q" * 200_000) for i in range(1, 8)]  # 1.4 MB in one go
            with pytest.raises(TooManyRequests) as refused:
                await client.add_batch(50, batch, KEY)
            assert refused.value.retry_after_s > 0
            assert (await client.ledger_info(50))["lastEntryId"] == 0


async def test_lac_long_polls_are_bounded(bookie_config):
    config = dataclasses.replace(bookie_config, max_lac_waiters=1)
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as client:
            await client.add_entry(60, 0, entry(60, 0), KEY)
            first = asyncio.create_task(client.read_lac(60, wait_for_gt=5, timeout_ms=60_000))
            while running.bookie._lac_waiters == 0:  # bounded by the test timeout
                await asyncio.sleep(0)  # noqa: sleep-ok (yield to the loop until it waits)
            with pytest.raises(TooManyRequests):
                await client.read_lac(60, wait_for_gt=5, timeout_ms=60_000)
            await client.write_lac(60, KEY, frame_lac(60, 6))
            assert await asyncio.wait_for(first, 30) == 6


async def test_a_client_that_disconnects_mid_add_does_not_lose_a_queued_add(server):
    data = entry(70, 0)
    head = (f"PUT /v1/ledgers/70/entries/0 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"X-Master-Key: {KEY.hex()}\r\nContent-Length: {len(data)}\r\n\r\n").encode()
    host, port = server.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head + data)
    await writer.drain()
    writer.close()  # gone before the reply
    async with BookieClient(server.url) as client:
        for _ in range(10_000):  # bounded poll: the add completes without its client
            try:
                assert await client.read_entry(70, 0) == data
                break
            except NoLedger:
                await asyncio.sleep(0.001)  # noqa: sleep-ok (bounded poll)
        else:
            pytest.fail("the add of a disconnected client never became readable")
        assert await client.force(70, KEY) == 0
