"""Corrupt files at start (docs/formats.md §1, docs/design.md §3.5, §1.10): each damage gets a message
naming file, offset and reason, and either a safe recovery or a refusal to start; an entry
the index knows but cannot read is 500 EIO, never a 404 (a false "no such entry" during
ledger recovery truncates a ledger).

    damage                                   outcome
    garbage in the middle of a journal       refuses to start (exit 1), names file + offset;
                                             --skip-corrupt-journal-records starts, reports
    a truncated entry log                    starts; its lost entries answer 500 EIO naming
                                             the log and position
    a missing (or short) lastMark            starts, replays every journal, warns
    a lastMark past the end of its journal   starts, replays that journal whole, warns
    a corrupt index entry (past a log's end,
    into another entry, mid-entry, a log
    that is gone)                            500 EIO naming log and position, never 404
"""

from __future__ import annotations

import logging
import os

import pytest

from api.client import BookieClient
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry, frame_lac, master_key
from bookie.errors import Fenced, IOFailure, NoEntry, NoLedger
from entrylog.format import log_file_name, make_location, split_location
from journal import format as jformat
from journal.reader import JournalReader
from ledgerindex.locations import EntryLocationIndex
from tests.support.servers import Daemon, running_bookie

KEY = master_key(b"corrupt")
NO_CHECKPOINTS = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "64KiB")


def _config(data_dir: str) -> BookieConfig:
    return BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                        journal_prealloc_bytes=64 * 1024, entrylog_max_bytes=8 * 1024)


def _entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id,
                       bytes([entry_id % 251]) * 700)


def _journals(data_dir: str) -> list[str]:
    directory = os.path.join(data_dir, "journal", "current")
    return sorted((os.path.join(directory, n) for n in os.listdir(directory)
                   if n.endswith(".txn")), key=lambda p: int(os.path.basename(p)[:-4], 16))


async def _write_then_kill9(data_dir: str, ledger_id: int, count: int) -> dict[int, bytes]:
    """A daemon acks ``count`` adds (one group each) and is SIGKILLed: all only in the journal."""
    daemon = Daemon(data_dir, *NO_CHECKPOINTS).start()
    acked = {}
    try:
        async with BookieClient(daemon.url) as client:
            for entry_id in range(count):
                await client.add_entry(ledger_id, entry_id, _entry(ledger_id, entry_id), KEY)
                acked[entry_id] = _entry(ledger_id, entry_id)
    finally:
        daemon.kill9()  # the point of the test, and never a daemon left behind
    return acked


async def test_garbage_in_the_middle_of_a_journal_refuses_to_start_naming_file_and_offset(
        tmp_path):
    data_dir = str(tmp_path / "data")
    acked = await _write_then_kill9(data_dir, 1, 12)
    path = _journals(data_dir)[-1]
    with JournalReader(OsDisk(), path) as reader:
        offsets = [record.offset for record in reader.scan() if record.kind.name == "DATA"]
    damaged = offsets[5]
    with open(path, "r+b") as handle:
        handle.seek(damaged)
        handle.write(b"\xff\xff\xff\x80" + b"\xab" * 60)  # a negative length, then garbage
    refused = Daemon(data_dir, *NO_CHECKPOINTS)
    try:
        with pytest.raises(RuntimeError):
            refused.start()
        assert refused.proc.wait(30) == 1
    finally:
        if refused.proc is not None and refused.proc.poll() is None:
            refused.kill9()  # it started after all: the test failed, stop what it started
    assert f"{path}: corrupt record at offset {damaged}" in refused.log_text()
    assert "refused to start" in refused.log_text()
    # The operator's way past it: start, skipping the rest of that file, and report it.
    daemon = Daemon(data_dir, *NO_CHECKPOINTS, "--skip-corrupt-journal-records", "true").start()
    try:
        async with BookieClient(daemon.url) as client:
            dropped = (await client.info())["replay"]["dropped"]
            assert [(d["path"], d["offset"]) for d in dropped] == [(path, damaged)]
            assert os.path.exists(dropped[0]["saved_as"])
            for entry_id in range(5):
                assert await client.read_entry(1, entry_id) == acked[entry_id]
    finally:
        assert daemon.terminate() == 0


async def _write_checkpointed(data_dir: str) -> dict[tuple[int, int], bytes]:
    """Ledgers 1 and 2, 30 entries each, in several rolled entry logs; clean stop."""
    written = {}
    async with running_bookie(_config(data_dir)) as running:
        for entry_id in range(30):
            for ledger_id in (1, 2):
                data = _entry(ledger_id, entry_id)
                await running.bookie.add_entry(ledger_id, entry_id, data, KEY)
                written[(ledger_id, entry_id)] = data
        await running.bookie.checkpoint()
    return written


async def _read_all_never_404(bookie, written: dict) -> dict[tuple[int, int], str]:
    """Read every written entry: bytes must match or the answer is EIO; never NoEntry."""
    failures = {}
    for (ledger_id, entry_id), data in sorted(written.items()):
        try:
            assert await bookie.read_entry(ledger_id, entry_id) == data
        except NoEntry:
            pytest.fail(f"false 404 for indexed entry {ledger_id}/{entry_id}")
        except IOFailure as exc:
            failures[(ledger_id, entry_id)] = str(exc)
    return failures


async def test_truncated_entry_log_answers_eio_naming_the_log_never_404(data_dir):
    written = await _write_checkpointed(data_dir)
    config = _config(data_dir)
    index = EntryLocationIndex.open(os.path.join(config.ledger_dir, "locations"))
    log_id, pos = split_location(index.get(1, 10))
    index.close()
    log_path = os.path.join(config.ledger_dir, log_file_name(log_id))
    with open(log_path, "r+b") as handle:
        handle.truncate(pos + 100)  # entry 1/10 is cut short; what followed it is gone
    async with running_bookie(config) as running:
        failures = await _read_all_never_404(running.bookie, written)
        assert (1, 10) in failures and log_path in failures[(1, 10)]
        assert all(log_path in message for message in failures.values())
        assert await running.bookie.read_entry(1, 0) == written[(1, 0)]
        with pytest.raises(IOFailure):
            await running.bookie.read_range(1, 5, 15)


@pytest.mark.parametrize("damage", ["missing", "short"])
async def test_missing_last_mark_replays_every_journal_with_a_warning(data_dir, caplog, damage):
    config = _config(data_dir)
    async with running_bookie(config) as running:
        bookie = running.bookie
        for entry_id in range(10):
            await bookie.add_entry(1, entry_id, _entry(1, entry_id), KEY)
        await bookie.checkpoint()
        for entry_id in range(10, 20):
            await bookie.add_entry(1, entry_id, _entry(1, entry_id), KEY)
        await bookie.add_entry(2, 0, _entry(2, 0), KEY)
        await bookie.fence(2, KEY)
        await bookie.add_entry(3, 0, _entry(3, 0), KEY)
        await bookie.delete_ledger(3)
        await bookie.write_lac(1, KEY, frame_lac(1, 18))
    mark = os.path.join(config.ledger_dir, "lastMark")
    if damage == "missing":
        os.unlink(mark)
    else:
        os.truncate(mark, 7)
    with caplog.at_level(logging.WARNING, logger="bookie.checkpoint"):
        async with running_bookie(config) as running:
            bookie = running.bookie
            assert bookie.replay_report.mark_from == (0, 0)
            assert [await bookie.read_entry(1, i) for i in range(20)] == [
                _entry(1, i) for i in range(20)]
            assert await bookie.read_lac(1) >= 18
            with pytest.raises(Fenced):
                await bookie.add_entry(2, 1, _entry(2, 1), KEY)
            with pytest.raises(NoLedger):
                await bookie.read_entry(3, 0)
    assert f"{config.ledger_dir}" in caplog.text and "replaying every journal" in caplog.text


async def test_last_mark_past_the_end_of_its_journal_replays_it_whole_with_a_warning(
        tmp_path, caplog):
    data_dir = str(tmp_path / "data")
    acked = await _write_then_kill9(data_dir, 1, 8)  # in the journal only: never checkpointed
    path = _journals(data_dir)[-1]
    journal_id = int(os.path.basename(path)[:-4], 16)
    size = os.path.getsize(path)
    ledger_dir = os.path.join(data_dir, "ledgers", "current")
    with open(os.path.join(ledger_dir, "lastMark"), "wb") as handle:
        handle.write(jformat.LogMark(journal_id, size + 4096).encode())
    with caplog.at_level(logging.WARNING, logger="bookie.recovery"):
        async with running_bookie(_config(data_dir)) as running:
            bookie = running.bookie
            for entry_id, data in acked.items():
                assert await bookie.read_entry(1, entry_id) == data
            assert any("past the end" in w for w in bookie.replay_report.warnings)
    assert f"{path}" in caplog.text and f"{size + 4096}" in caplog.text
    assert "past the end" in caplog.text
    # The first start's checkpoints moved the mark into a journal of their own (C1: never
    # back): the next start replays from there, without a warning, and loses nothing.
    async with running_bookie(_config(data_dir)) as running:
        bookie = running.bookie
        assert bookie.replay_report.warnings == []
        for entry_id, data in acked.items():
            assert await bookie.read_entry(1, entry_id) == data


def _bad_location(kind: str, index: EntryLocationIndex, good: int) -> int:
    log_id, pos = split_location(good)
    if kind == "past the log's end":
        return make_location(log_id, pos + (1 << 20))
    if kind == "into another entry":
        return index.get(2, 7)
    if kind == "into the middle of an entry":
        return make_location(log_id, pos + 37)
    assert kind == "a log that is gone"
    return make_location(999, pos)


@pytest.mark.parametrize("kind", ["past the log's end", "into another entry",
                                  "into the middle of an entry", "a log that is gone"])
async def test_corrupt_index_entry_answers_eio_never_404(data_dir, kind):
    written = await _write_checkpointed(data_dir)
    config = _config(data_dir)
    index = EntryLocationIndex.open(os.path.join(config.ledger_dir, "locations"))
    try:
        index.add_batch([(1, 12, _bad_location(kind, index, index.get(1, 12)))], sync=True)
    finally:
        index.close()
    async with running_bookie(config) as running:
        failures = await _read_all_never_404(running.bookie, written)
        assert list(failures) == [(1, 12)], failures
        assert ".log" in failures[(1, 12)], failures  # names the log file
        with pytest.raises(IOFailure):
            await running.bookie.read_range(1, 10, 14)
