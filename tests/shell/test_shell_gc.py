"""``gc``: one garbage collection run on a stopped bookie's data dir, written by a real bookie.

The data dir (made once, copied per test): ledgers 11 (live), 12 and 13 (deleted), each
written in one checkpoint, so most of their entry logs hold one ledger; then ledgers 14 (live)
and 15 (deleted) one entry each per checkpoint, so their logs are about half dead. Every log is
rolled: the bookie stopped cleanly, which finalizes the active log.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys

import pytest

from bookie.disk import OsDisk
from bookie.entry import DigestType
from entrylog.reader import EntryLogReader
from ledgerindex.ledgers import LedgerMetadataIndex
from ledgerindex.locations import EntryLocationIndex
from tests.shell.shell_support import KEY, entry, run, small_config
from tests.support.servers import ROOT, Daemon, running_bookie

LIVE = {11: 90, 14: 30}
DELETED = {12: 90, 13: 90, 15: 30}


async def _write(data_dir: str) -> None:
    async with running_bookie(small_config(data_dir)) as running:
        bookie = running.bookie
        for ledger_id in (11, 12, 13):
            for entry_id in range(LIVE.get(ledger_id) or DELETED[ledger_id]):
                await bookie.add_entry(ledger_id, entry_id, entry(ledger_id, entry_id), KEY,
                                       DigestType.CRC32C)
            await bookie.checkpoint()
        for entry_id in range(30):
            for ledger_id in (14, 15):
                await bookie.add_entry(ledger_id, entry_id, entry(ledger_id, entry_id), KEY,
                                       DigestType.CRC32C)
            await bookie.checkpoint()
        for ledger_id in DELETED:
            await bookie.delete_ledger(ledger_id)


@pytest.fixture(scope="module")
def gc_data_dir_master(tmp_path_factory) -> str:
    path = os.path.join(str(tmp_path_factory.mktemp("gc-master")), "data")
    asyncio.run(_write(path))
    return path


@pytest.fixture
def data_dir(gc_data_dir_master, tmp_path) -> str:
    path = os.path.join(str(tmp_path), "data")
    shutil.copytree(gc_data_dir_master, path)
    return path


def _ledger_dir(data_dir: str) -> str:
    return os.path.join(data_dir, "ledgers", "current")


def _log_sizes(data_dir: str) -> dict[str, int]:
    folder = _ledger_dir(data_dir)
    return {name: os.path.getsize(os.path.join(folder, name))
            for name in os.listdir(folder) if name.endswith(".log")}


def _ledgers_maps(data_dir: str) -> dict[int, dict[int, int]]:
    maps = {}
    for name in _log_sizes(data_dir):
        log_id = int(name[:-len(".log")], 16)
        with EntryLogReader(OsDisk(), os.path.join(_ledger_dir(data_dir), name), log_id) as r:
            maps[log_id] = r.ledgers_map()
    assert all(m is not None for m in maps.values())  # every log was rolled
    return maps


def _live_fraction(ledgers_map: dict[int, int]) -> float:
    live = sum(size for ledger_id, size in ledgers_map.items() if ledger_id in LIVE)
    return live / sum(ledgers_map.values())


def _assert_live_entries_read_back(data_dir: str) -> None:
    """A bookie starts on the collected dir; live entries are byte-identical, deleted
    ledgers stay deleted."""
    async def read_all() -> None:
        async with running_bookie(small_config(data_dir)) as running:
            bookie = running.bookie
            for ledger_id, count in LIVE.items():
                for entry_id in range(count):
                    assert await bookie.read_entry(ledger_id, entry_id) == \
                        entry(ledger_id, entry_id)
            for ledger_id in DELETED:
                assert bookie.storage.ledgers.is_deleted(ledger_id)

    asyncio.run(read_all())


def test_gc_deletes_the_logs_of_deleted_ledgers_and_reports_the_bytes(capsys, data_dir):
    maps = _ledgers_maps(data_dir)
    sizes = _log_sizes(data_dir)
    dead = sorted(log_id for log_id, m in maps.items() if not set(m) & set(LIVE))
    assert len(dead) >= 3 and len(dead) < len(maps)

    result = run(capsys, "gc", "--data-dir", data_dir, "--json", "--no-progress")

    assert result.code == 0, result.err
    assert result.err == ""
    [summary] = result.records
    assert summary["type"] == "summary" and summary["force"] is None
    assert sorted(summary["logsDeleted"]) == dead
    assert summary["logsScanned"] == len(maps)
    freed = sum(sizes[f"{log_id:x}.log"] for log_id in dead)
    assert summary["bytesReclaimedByDeletion"] == freed == summary["bytesReclaimed"]
    assert sum(sizes.values()) - sum(_log_sizes(data_dir).values()) == freed
    assert summary["compaction"] is None and summary["logsCompacted"] == []
    assert summary["quarantined"] == [] and summary["problems"] == []
    assert set(_ledgers_maps(data_dir)) == set(maps) - set(dead)
    _assert_live_entries_read_back(data_dir)


def test_a_second_run_finds_nothing_and_the_text_output_says_so(capsys, data_dir):
    first = run(capsys, "gc", "--data-dir", data_dir)
    assert first.code == 0
    dead = sorted(log_id for log_id, m in _ledgers_maps(data_dir).items()
                  if not set(m) & set(LIVE))
    assert dead == []
    deleted_line = next(line for line in first.out.splitlines()
                        if line.startswith("logs deleted: "))
    assert ".log" in deleted_line and "bytes)" in deleted_line
    second = run(capsys, "gc", "--data-dir", data_dir)
    assert second.code == 0
    assert "logs deleted: none (0 B, 0 bytes)" in second.out
    assert "compaction: not run (not forced)" in second.out
    assert "quarantined: none" in second.out


def test_force_major_compacts_the_half_dead_logs_and_live_entries_read_back(
        capsys, data_dir, tmp_path):
    maps = _ledgers_maps(data_dir)
    sizes = _log_sizes(data_dir)
    mixed = {log_id for log_id, m in maps.items() if set(m) >= {14, 15}}
    assert mixed
    expected = {log_id for log_id, m in maps.items()
                if set(m) & set(LIVE) and _live_fraction(m) < 0.8}
    assert mixed <= expected
    config = tmp_path / "bookie.toml"
    config.write_text("compaction_rate_bytes = 0\n")  # unthrottled: the test never waits

    result = run(capsys, "gc", "--data-dir", data_dir, "--json", "--force", "major",
                 "--config", config, "--no-progress")

    assert result.code == 0, result.err
    [summary] = result.records
    assert summary["compaction"] == "major" and summary["force"] == "major"
    assert set(summary["logsCompacted"]) == expected
    assert summary["entriesMoved"] > 0 and summary["bytesReclaimedByCompaction"] > 0
    assert sum(sizes.values()) - sum(_log_sizes(data_dir).values()) == \
        summary["bytesReclaimed"] == \
        summary["bytesReclaimedByDeletion"] + summary["bytesReclaimedByCompaction"]
    after = _ledgers_maps(data_dir)
    assert not set(after) & (expected | set(summary["logsDeleted"]))
    assert all(not set(m) & set(DELETED) for m in after.values())
    assert run(capsys, "check-index", "--data-dir", data_dir).code == 0
    _assert_live_entries_read_back(data_dir)


def test_force_minor_leaves_logs_above_the_minor_threshold(capsys, data_dir):
    maps = _ledgers_maps(data_dir)
    sizes = _log_sizes(data_dir)
    mixed = {log_id for log_id, m in maps.items() if set(m) >= {14, 15}}
    assert mixed and all(0.2 <= _live_fraction(maps[log_id]) for log_id in mixed)
    result = run(capsys, "gc", "--data-dir", data_dir, "--json", "--force", "minor")
    assert result.code == 0, result.err
    [summary] = result.records
    assert summary["compaction"] == "minor" and summary["logsCompacted"] == []
    after = _log_sizes(data_dir)
    assert all(after[f"{log_id:x}.log"] == sizes[f"{log_id:x}.log"] for log_id in mixed)


def test_locations_a_crash_left_behind_are_cleaned_and_their_logs_deleted(capsys, data_dir):
    # A crash after the synced tombstone lost the pending range delete (storage R3).
    ledgers = LedgerMetadataIndex.open(os.path.join(_ledger_dir(data_dir), "ledgers"))
    ledgers.mark_deleted(11)
    ledgers.close()
    held = {log_id for log_id, m in _ledgers_maps(data_dir).items() if set(m) == {11}}
    assert held
    result = run(capsys, "gc", "--data-dir", data_dir, "--json")
    assert result.code == 0, result.err
    [summary] = result.records
    assert summary["ledgersIndexCleaned"] == 1 and held <= set(summary["logsDeleted"])
    locations = EntryLocationIndex.open(os.path.join(_ledger_dir(data_dir), "locations"),
                                        read_only=True)
    try:
        assert list(locations.entries(11)) == [] and len(list(locations.entries(14))) == 30
    finally:
        locations.close()


def test_a_corrupt_log_is_quarantined_and_the_exit_code_is_1(capsys, data_dir):
    maps = _ledgers_maps(data_dir)
    bad = min(log_id for log_id, m in maps.items() if set(m) == {12})
    path = os.path.join(_ledger_dir(data_dir), f"{bad:x}.log")
    with open(path, "r+b") as handle:
        handle.write(b"XXXX")  # not BKLO: a corrupt log (docs/formats.md §5.6)

    result = run(capsys, "gc", "--data-dir", data_dir, "--json")

    assert result.code == 1
    [problem] = result.of_type("problem")
    assert f"entry log {bad:x} is corrupt" in problem["reason"]
    [summary] = result.of_type("summary")
    assert summary["quarantined"] == [path + ".quarantined"]
    assert os.path.exists(path + ".quarantined") and not os.path.exists(path)
    assert bad not in summary["logsDeleted"] and summary["logsDeleted"]
    _assert_live_entries_read_back(data_dir)


def test_a_missing_dir_or_one_that_is_no_bookies_is_refused_untouched(capsys, tmp_path):
    missing = run(capsys, "gc", "--data-dir", tmp_path / "typo")
    assert missing.code == 2 and "no data dir at" in missing.err
    assert not (tmp_path / "typo").exists()
    empty = tmp_path / "empty"
    (empty / "ledgers" / "current").mkdir(parents=True)
    refused = run(capsys, "gc", "--data-dir", empty, "--json")
    assert refused.code == 2 and "is not a bookie data dir" in refused.err
    assert refused.out == ""
    assert os.listdir(empty / "ledgers" / "current") == []


def test_a_bad_setting_is_a_usage_error(capsys, data_dir, tmp_path):
    config = tmp_path / "bookie.toml"
    config.write_text("no_such_setting = 1\n")
    result = run(capsys, "gc", "--data-dir", data_dir, "--config", config)
    assert result.code == 2 and "bad configuration" in result.err


def test_gc_refuses_while_a_bookie_runs_on_the_data_dir(capsys, data_dir):
    before = _log_sizes(data_dir)
    daemon = Daemon(data_dir).start()
    try:
        result = run(capsys, "gc", "--data-dir", data_dir)
        assert result.code == 2 and "a bookie is running" in result.err
        assert set(before) <= set(_log_sizes(data_dir))
    finally:
        assert daemon.terminate() == 0
    assert run(capsys, "gc", "--data-dir", data_dir).code == 0


def test_the_real_cli_explains_gc():
    reply = subprocess.run([sys.executable, "-m", "bookie", "shell", "gc", "--help"],
                           cwd=ROOT, capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=ROOT))
    assert reply.returncode == 0, reply.stderr
    text = " ".join(reply.stdout.split())
    assert "STOPPED bookie" in text and "--force {minor,major}" in text
    assert "Exit 0 done, 1" in text
