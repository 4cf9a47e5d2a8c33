"""Crash model kill -9 (docs/design.md §2.2): the drill, short, and the regressions it found.

``scripts/drill/drill_kill9.py`` SIGKILLs a real daemon under concurrent load (adds, batch adds,
deferred-sync adds + force, fences, explicit LACs, deletes, checkpoints, GC), by timer or at
the k-th journal, entry-log, lastMark or ledger-dir sync, restarts it and checks every
invariant after each restart. CI runs 20 rounds; the long run is by hand (docs/drills.md).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys

import pytest

from api.client import BookieClient
from bookie.config import BookieConfig
from bookie.entry import frame_entry, master_key
from tests.support.faulty_disk import FaultyDisk
from tests.support.servers import ROOT, running_bookie

KEY = master_key(b"lac")


def _drill(tmp_path, seed, rounds: int, *extra: str) -> tuple[str, list[int]]:
    """Run scripts/drill/drill_kill9.py; (stdout, its summary's numbers: rounds, acked, lost,
    phantom, violations, then bk_protocol_ok when the drill prints it)."""
    drill = os.path.join(ROOT, "scripts", "drill", "drill_kill9.py")
    run = subprocess.run([sys.executable, drill, "--rounds", str(rounds), "--seconds", "180",
                          "--seed", str(seed), "--data-dir", str(tmp_path), *extra],
                         capture_output=True, text=True, timeout=230, cwd=ROOT)
    print(run.stdout[-4000:], run.stderr[-4000:])
    assert run.returncode == 0, f"drill failed (seed {seed}):\n{run.stdout[-4000:]}"
    summary = re.search(r"^rounds=(\d+) acked=(\d+) lost=(\d+) phantom=(\d+) violations=(\d+)"
                        r"(?:.* bk_protocol_ok=(\d+))?", run.stdout, re.M)
    assert summary, run.stdout[-2000:]
    return run.stdout, [int(g) for g in summary.groups() if g is not None]


@pytest.mark.timeout(240)
def test_kill9_drill_20_rounds_lose_no_acknowledged_write(tmp_path, seed):
    _, (rounds, acked, lost, phantom, violations) = _drill(tmp_path, seed, 20)
    assert rounds == 20 and acked > 0 and (lost, phantom, violations) == (0, 0, 0)


@pytest.mark.timeout(240)
def test_kill9_drill_with_3_ledger_dirs_and_2_journals_loses_nothing(tmp_path, seed):
    """docs/design.md §3.8: the drill with ledger_dirs of 3 and journal_dirs of 2; its crash
    targets' globs match every dir, so the k-th sync of any of them can be the kill."""
    out, (rounds, acked, lost, phantom, violations) = _drill(tmp_path, seed, 12, "--dirs", "3,2")
    assert rounds == 12 and acked > 0 and (lost, phantom, violations) == (0, 0, 0)
    assert "ledger dirs 3, journal dirs 2" in out


@pytest.mark.timeout(240)
def test_kill9_drill_with_bookkeeper_protocol_writers_loses_nothing(tmp_path, seed):
    """Issue 28: the same drill with the bookie_port listener on and every other writer on
    BookKeeper's protocol (v3 adds, deferred adds + FORCE_LEDGER, fencing reads, WRITE_LAC,
    long-poll LAC reads): what it acknowledged survives every SIGKILL too."""
    out, numbers = _drill(tmp_path, seed, 10, "--protocol", "mixed")
    rounds, acked, lost, phantom, violations, over_bk = numbers
    assert rounds == 10 and acked > 0 and over_bk > 0
    assert (lost, phantom, violations) == (0, 0, 0)
    assert "final check:" in out and "clean stop exit 0" in out


def _entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id, b"d" * 100)


async def test_lac_of_a_deferred_add_counts_only_once_durable(data_dir):
    """Regression (found by the kill -9 drill, "LAC 110 after restart, 120 reported before"):
    a deferred-sync add raised the LAC at enqueue, so a reader could see a LAC that a crash
    then took back (N4)."""
    disk = FaultyDisk()
    config = BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                          journal_prealloc_bytes=64 * 1024)
    async with running_bookie(config, disk=disk) as running:
        async with BookieClient(running.url) as client:
            for entry_id in range(2):
                await client.add_entry(1, entry_id, _entry(1, entry_id), KEY)
            assert await client.read_lac(1) == 0
            hold = disk.hold("fdatasync", "*.txn")
            await client.add_entry(1, 2, _entry(1, 2), KEY, deferred_sync=True)  # acked
            assert await asyncio.to_thread(hold.reached.wait, 30)  # its group is unsynced
            assert await client.read_lac(1) == 0  # not 1: entry 2 is not durable yet
            hold.release()
            assert await client.force(1, KEY) == 2
            assert await client.read_lac(1) == 1  # durable now
