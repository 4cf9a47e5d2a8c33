"""Crash at every step of garbage collection and compaction (bookie/compaction.py's crash
story), kill -9 model (docs/design.md §2.2).

A data dir is prepared once by a normal daemon: interleaved ledgers, some deleted, so that a
forced major compaction has several logs to rewrite and GC has whole logs to delete. Then, for
k = 1, 2, ... on a fresh copy, a daemon on a CrashingDisk that SIGKILLs itself at the k-th
fsync, fdatasync, rename, dir fsync **or unlink** under the ledger dir runs
``POST /v1/bookie/gc?force=major``, until a run finishes without crashing (SQLite
``crash9.test``). Unlinks count too, so the crash between the index switch and the deletion of
the old log (step 7) is a crash point of its own. After each crash a normal restart must:

- leave no ``*.log.compacting`` (deleted at start);
- read every live entry back byte-identical, and keep deleted ledgers deleted;
- finish the interrupted work with another forced run that reports no problem;
- and, once stopped, hold no index location that points at a missing entry log.

The crashing daemon is the shared ``Daemon`` with ``crash_events=ALL_EVENTS``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil

import aiohttp
import pytest

from api.client import BookieClient
from bookie.entry import frame_entry, master_key
from bookie.errors import NoLedger
from entrylog.format import parse_log_id
from ledgerindex import keys
from ledgerindex.kv import KeyValueStore
from tests.support.crashing_disk import ALL_EVENTS
from tests.support.servers import Daemon

KEY = master_key(b"gc-sweep")
FLAGS = ("--entrylog-max-bytes", "16KiB", "--checkpoint-interval-ms", "3600000",
         "--journal-prealloc-bytes", "64KiB", "--gc-interval-ms", "0",
         "--compaction-rate-bytes", "0")
PATTERN = "*/ledgers/current*"
LIVE, DELETED = (0, 2), (1, 3)


async def _prepare(url: str) -> dict:
    """Interleaved ledgers 0-2 (a third dead after the delete: under the major threshold), a
    ledger 3 with logs of its own (deleted whole), a re-add; returns the live entries."""
    rng = random.Random(7)
    live = {}
    async with BookieClient(url) as client:
        for entry_id in range(24):
            for ledger_id in (0, 1, 2):
                payload = rng.randbytes(rng.randrange(600, 1200))
                data = frame_entry(ledger_id, entry_id, entry_id - 1, len(payload), payload)
                await client.add_entry(ledger_id, entry_id, data, KEY)
                live[(ledger_id, entry_id)] = data
            if entry_id % 6 == 5:
                await client.checkpoint()
        for entry_id in range(30):
            payload = rng.randbytes(900)
            data = frame_entry(3, entry_id, entry_id - 1, len(payload), payload)
            await client.add_entry(3, entry_id, data, KEY)
        await client.checkpoint()
        await client.add_entry(0, 3, live[(0, 3)], KEY)  # identical re-add: a newer location
        for ledger_id in DELETED:
            await client.delete_ledger(ledger_id)
        await client.checkpoint()
    return {k: v for k, v in live.items() if k[0] in LIVE}


async def _force_gc(url: str) -> dict | None:
    """POST /v1/bookie/gc?force=major; None when the daemon died under it."""
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(url + "/v1/bookie/gc", params={"force": "major"}) as reply:
                status, text = reply.status, await reply.text()
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
        return None
    assert status == 200, text
    return json.loads(text)


async def _verify_live(url: str, live: dict) -> None:
    async with BookieClient(url) as client:
        for key, data in live.items():
            assert await client.read_entry(*key) == data, key
        for ledger_id in DELETED:
            with pytest.raises(NoLedger):
                await client.read_entry(ledger_id, 0)


def _compacting_files(data_dir: str) -> list[str]:
    ledger_dir = os.path.join(data_dir, "ledgers", "current")
    return [n for n in os.listdir(ledger_dir) if n.endswith(".log.compacting")]


def _dangling_locations(data_dir: str) -> list[tuple[int, int, int]]:
    """Index keys whose location names an entry log that is not there (read offline)."""
    ledger_dir = os.path.join(data_dir, "ledgers", "current")
    logs = {parse_log_id(n) for n in os.listdir(ledger_dir)} - {None}
    dangling = []
    with KeyValueStore.open(os.path.join(ledger_dir, "locations"), read_only=True) as kv:
        for key, value in kv.items():
            location = keys.decode_location_value(value)
            if location and location >> 32 not in logs:
                dangling.append((*keys.decode_location_key(key), location))
    return dangling


@pytest.mark.timeout(900)
async def test_crash_at_every_gc_and_compaction_step_loses_no_live_entry_and_leaves_no_orphan(
        tmp_path):
    template = str(tmp_path / "template" / "data")
    daemon = Daemon(template, *FLAGS).start()
    live = await _prepare(daemon.url)
    assert daemon.terminate() == 0, daemon.log_text()
    crash_points = 0
    for k in range(1, 400):
        data_dir = str(tmp_path / f"k{k}" / "data")
        shutil.copytree(template, data_dir)
        daemon = Daemon(data_dir, *FLAGS, crash_at=(k, PATTERN), crash_events=ALL_EVENTS)
        try:
            daemon.start()
        except RuntimeError:
            result = None  # crashed in start-up, before serving
        else:
            result = await _force_gc(daemon.url)
        code = daemon.terminate() if result is not None else daemon.proc.wait(60)
        if code == 0:
            assert result["problems"] == [] and result["logsCompacted"], result
            break
        assert code == -9, f"k={k}: the daemon exited {code}, not by SIGKILL"
        crash_points += 1
        restarted = Daemon(data_dir, *FLAGS).start()
        assert _compacting_files(data_dir) == [], f"k={k}"
        await _verify_live(restarted.url, live)
        again = await _force_gc(restarted.url)
        assert again is not None and again["problems"] == [], (k, again)
        await _verify_live(restarted.url, live)
        assert restarted.terminate() == 0, restarted.log_text()
        assert _dangling_locations(data_dir) == [], f"k={k}"
        shutil.rmtree(os.path.dirname(data_dir))
    else:
        pytest.fail("the sweep never reached a crash-free run")
    print(f"gc/compaction crash sweep: {crash_points} crash points, k={k} ran clean")
    assert crash_points >= 20, f"only {crash_points} crash points: the sweep covers too little"
