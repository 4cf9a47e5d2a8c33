"""Garbage collection and compaction over real HTTP on 127.0.0.1: POST/GET/PUT
/v1/bookie/gc, metrics, the periodic run, the disk warn threshold, and concurrent adds and
reads during GC and compaction."""

from __future__ import annotations

import asyncio
import os
import random
import time

import pytest

from api.client import BookieClient
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry, master_key
from bookie.errors import NoLedger
from entrylog.format import HEADER_SIZE, encode_ledgers_map, parse_log_id
from entrylog.reader import EntryLogReader
from tests.support.servers import running_bookie

KEY = master_key(b"gc-tests")


def config_for(data_dir: str, **changes) -> BookieConfig:
    return BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                        journal_prealloc_bytes=1 << 20, entrylog_max_bytes=16 * 1024,
                        compaction_rate_bytes=0, gc_interval_ms=0).replace(**changes)


def entry(ledger_id: int, entry_id: int, rng: random.Random, size: int = 900) -> bytes:
    payload = rng.randbytes(size)
    return frame_entry(ledger_id, entry_id, entry_id - 1, len(payload), payload)


async def gc_post(client: BookieClient, force: str | None = None, status: int = 200) -> dict:
    params = {"force": force} if force is not None else None
    async with client.session.post(client.base_url + "/v1/bookie/gc", params=params) as reply:
        assert reply.status == status, await reply.text()
        return await reply.json()


async def gc_get(client: BookieClient) -> dict:
    async with client.session.get(client.base_url + "/v1/bookie/gc") as reply:
        assert reply.status == 200
        return await reply.json()


async def gc_put(client: BookieClient, body, status: int = 200) -> dict:
    async with client.session.put(client.base_url + "/v1/bookie/gc", json=body) as reply:
        assert reply.status == status, await reply.text()
        return await reply.json()


def entry_log_bytes(data_dir: str) -> dict[int, int]:
    """Entry log id -> size, for every entry log in the data dir. RocksDB's files are left
    out: they change size with its own compactions (and its WALs are named ``*.log`` too)."""
    ledger_dir = os.path.join(data_dir, "ledgers", "current")
    sizes = {}
    for name in os.listdir(ledger_dir):
        log_id = parse_log_id(name)
        if log_id is not None:
            sizes[log_id] = os.path.getsize(os.path.join(ledger_dir, name))
    return sizes


def ledgers_map_of(ledger_dir: str, log_id: int) -> dict[int, int] | None:
    path = os.path.join(ledger_dir, f"{log_id:x}.log")
    with EntryLogReader(OsDisk(), path, log_id) as reader:
        return reader.ledgers_map()


async def add_all(client, ledger_ids, count, rng, written) -> None:
    for entry_id in range(count):
        for ledger_id in ledger_ids:
            data = entry(ledger_id, entry_id, rng)
            await client.add_entry(ledger_id, entry_id, data, KEY)
            written[(ledger_id, entry_id)] = data


async def test_deleted_ledgers_logs_are_gone_after_gc_and_space_grew_by_their_ledgers_maps(
        data_dir, seed):
    rng = random.Random(seed)
    config = config_for(data_dir)
    written: dict = {}
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        for ledger_id in (0, 1, 2, 3):  # one ledger after the other: mostly one per log
            await add_all(client, [ledger_id], 40, rng, written)
            await client.checkpoint()
        for ledger_id in (0, 2):
            await client.delete_ledger(ledger_id)
        before = entry_log_bytes(data_dir)
        active = (await client.info())["currentEntryLogId"]
        maps = {i: ledgers_map_of(config.ledger_dir, i) for i in before if i != active}
        dead = {i: m for i, m in maps.items() if m is not None and set(m) <= {0, 2}}
        said = sum(HEADER_SIZE + sum(m.values()) + len(encode_ledgers_map(m))
                   for m in dead.values())
        assert len(dead) >= 4

        result = await gc_post(client)

        after = entry_log_bytes(data_dir)
        assert sorted(result["logsDeleted"]) == sorted(dead)
        assert not set(dead) & set(after)
        assert sum(before.values()) - sum(after.values()) == said
        assert result["bytesReclaimedByDeletion"] == said == result["bytesReclaimed"]
        for (ledger_id, entry_id), data in written.items():
            if ledger_id in (0, 2):
                with pytest.raises(NoLedger):
                    await client.read_entry(ledger_id, entry_id)
            else:
                assert await client.read_entry(ledger_id, entry_id) == data
        status = await gc_get(client)
        assert status["lastRun"]["logsDeleted"] == result["logsDeleted"]
        assert status["totals"]["bytesReclaimedByDeletion"] == said


async def test_forced_compaction_keeps_live_entries_identical_and_frees_the_rest(
        data_dir, seed):
    rng = random.Random(seed)
    written: dict = {}
    async with running_bookie(config_for(data_dir)) as running, \
            BookieClient(running.url) as client:
        for entry_id in range(30):  # interleaved ledgers: every log holds all four
            for ledger_id in (0, 1, 2, 3):
                data = entry(ledger_id, entry_id, rng)
                await client.add_entry(ledger_id, entry_id, data, KEY)
                written[(ledger_id, entry_id)] = data
            if entry_id % 3 == 2:
                await client.checkpoint()
        await client.delete_ledger(1)
        await client.delete_ledger(3)
        await client.checkpoint()
        before = entry_log_bytes(data_dir)
        unforced = await gc_post(client)
        assert unforced["compaction"] is None and unforced["logsCompacted"] == []

        result = await gc_post(client, "major")

        assert result["compaction"] == "major" and result["problems"] == []
        assert len(result["logsCompacted"]) >= 3
        after = entry_log_bytes(data_dir)
        assert sum(before.values()) - sum(after.values()) == result["bytesReclaimed"] > 0
        assert result["bytesReclaimedByCompaction"] > 0
        for (ledger_id, entry_id), data in written.items():
            if ledger_id in (0, 2):
                assert await client.read_entry(ledger_id, entry_id) == data
    async with running_bookie(config_for(data_dir)) as running, \
            BookieClient(running.url) as client:  # and after a restart
        for (ledger_id, entry_id), data in written.items():
            if ledger_id in (0, 2):
                assert await client.read_entry(ledger_id, entry_id) == data


async def test_gc_status_suspend_resume_force_and_metrics(data_dir, seed):
    rng = random.Random(seed)
    written: dict = {}
    async with running_bookie(config_for(data_dir)) as running, \
            BookieClient(running.url) as client:
        status = await gc_get(client)
        assert status["running"] is False and status["suspended"] is False
        assert status["lastRun"] is None and status["settings"]["intervalMs"] == 0
        await add_all(client, [0, 5], 20, rng, written)
        await client.checkpoint()
        await client.delete_ledger(5)

        assert (await gc_put(client, {"suspended": True}))["suspended"] is True
        assert (await gc_get(client))["suspended"] is True
        result = await gc_post(client, "major")  # forced: runs although suspended
        assert result["compaction"] == "major"
        await gc_put(client, {"suspended": "yes"}, status=400)
        await gc_put(client, [], status=400)
        await gc_post(client, "medium", status=400)
        assert (await gc_put(client, {"suspended": False}))["suspended"] is False

        status = await gc_get(client)
        assert status["totals"]["runs"] == 1
        assert status["totals"]["logsCompacted"] + status["totals"]["logsDeleted"] >= 1
        async with client.session.get(client.base_url + "/metrics") as reply:
            text = await reply.text()
        assert "bookie_gc_runs_total 1.0" in text
        assert 'bookie_gc_reclaimed_bytes_total{how="compaction"}' in text
        assert 'bookie_gc_reclaimed_bytes_total{how="deletion"}' in text
        assert "bookie_gc_suspended 0.0" in text and "bookie_gc_running 0.0" in text
        for (ledger_id, entry_id), data in written.items():
            if ledger_id == 0:
                assert await client.read_entry(ledger_id, entry_id) == data


async def test_the_periodic_run_collects_without_being_asked(data_dir, seed):
    rng = random.Random(seed)
    written: dict = {}
    async with running_bookie(config_for(data_dir, gc_interval_ms=50)) as running, \
            BookieClient(running.url) as client:
        await add_all(client, [7], 60, rng, written)
        await client.checkpoint()
        await client.delete_ledger(7)
        await client.checkpoint()  # the active log rolls only at the next add or close
        await add_all(client, [8], 1, rng, written)
        await client.checkpoint()
        deadline = time.monotonic() + 30
        while (await gc_get(client))["totals"]["logsDeleted"] < 3:
            assert time.monotonic() < deadline, await gc_get(client)
            await asyncio.sleep(0.02)  # noqa: sleep-ok (bounded poll of the periodic run)
        assert await client.read_entry(8, 0) == written[(8, 0)]


async def test_compaction_waits_while_a_disk_is_over_the_warn_threshold_unless_forced(
        data_dir, seed):
    rng = random.Random(seed)
    written: dict = {}
    # A warn threshold of 1%: any real disk is over it. Minor compaction is due at once.
    config = config_for(data_dir, disk_usage_warn_threshold=0.01,
                        minor_compaction_interval_ms=1)
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        await add_all(client, [0, 1], 20, rng, written)
        await client.delete_ledger(1)
        result = await gc_post(client)
        assert result["compaction"] is None
        assert "warn threshold" in result["compactionSkipped"]
        assert (await gc_get(client))["diskWarn"] is True
        assert (await gc_post(client, "minor"))["compaction"] == "minor"
    async with running_bookie(config_for(data_dir, minor_compaction_interval_ms=1)) \
            as running, BookieClient(running.url) as client:
        assert (await gc_post(client))["compaction"] == "minor"  # due, nothing in the way


class Mixed:
    """Writers, readers and a collector sharing one client: the concurrent workload."""

    def __init__(self, client: BookieClient, rng: random.Random, doomed: list[int]) -> None:
        self.client, self.rng, self.doomed = client, rng, doomed
        self.acked: dict = {}
        self.failures: list = []
        self.stop = asyncio.Event()
        self.first_ack = asyncio.Event()
        self.runs = 0
        self.deleted: set[int] = set()

    async def writer(self, ledger_id: int) -> None:
        rng, acked = self.rng, self.acked
        for entry_id in range(120):
            data = entry(ledger_id, entry_id, rng, rng.randrange(100, 2000))
            await self.client.add_entry(ledger_id, entry_id, data, KEY)
            acked[(ledger_id, entry_id)] = data
            self.first_ack.set()
            if entry_id % 15 == 14:  # a re-add of identical bytes: a newer location (compaction CP2)
                old = rng.randrange(entry_id)
                await self.client.add_entry(ledger_id, old, acked[(ledger_id, old)], KEY)

    async def reader(self) -> None:
        await self.first_ack.wait()
        while not self.stop.is_set():
            key = self.rng.choice([k for k in self.acked if k[0] < 100])
            try:
                if await self.client.read_entry(*key) != self.acked[key]:
                    self.failures.append(("different bytes", key))
            except Exception as exc:  # any error is a failure here
                self.failures.append((repr(exc), key))

    async def collector(self) -> None:
        while not self.stop.is_set():
            if self.runs < len(self.doomed):
                await self.client.delete_ledger(self.doomed[self.runs])
                self.deleted.add(self.doomed[self.runs])
            result = await gc_post(self.client, self.rng.choice(["minor", "major", None]))
            self.failures.extend(result["problems"])
            self.runs += 1


async def test_gc_and_compaction_with_concurrent_adds_and_reads_lose_nothing(data_dir, seed):
    rng = random.Random(seed)
    config = config_for(data_dir, write_cache_max_bytes=1 << 20)
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        mixed = Mixed(client, rng, list(range(100, 106)))
        await add_all(client, mixed.doomed, 10, rng, mixed.acked)
        others = [asyncio.create_task(mixed.reader()) for _ in range(3)]
        others.append(asyncio.create_task(mixed.collector()))
        await asyncio.gather(*(mixed.writer(ledger_id) for ledger_id in (0, 1, 2, 3)))
        mixed.stop.set()
        await asyncio.gather(*others)
        assert mixed.failures == [] and mixed.runs >= 3
        assert (await gc_post(client, "major"))["problems"] == []
        totals = (await gc_get(client))["totals"]
        assert totals["logsCompacted"] >= 1 and totals["entriesMoved"] >= 1
        for key, data in mixed.acked.items():
            if key[0] not in mixed.deleted:
                assert await client.read_entry(*key) == data, key
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        # The collector deletes one doomed ledger per run, so how many it deleted depends on
        # how many runs fit beside the writers: the rest are live and must read back.
        for key, data in mixed.acked.items():
            if key[0] in mixed.deleted:
                with pytest.raises(NoLedger):
                    await client.read_entry(*key)
            else:
                assert await client.read_entry(*key) == data, key
