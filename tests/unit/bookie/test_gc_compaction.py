"""Compaction (bookie/compaction.py) over a real LedgerStorage: files, RocksDB, no HTTP."""

from __future__ import annotations

import os

import pytest

from bookie.compaction import LogCompaction, Phase, RateLimiter
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry
from bookie.gc import GarbageCollector
from bookie.storage import LedgerStorage
from entrylog.format import HEADER_SIZE, SIZE
from entrylog.reader import EntryLogReader
from ledgerindex.keys import encode_location_key


@pytest.fixture
def storage(tmp_path):
    config = BookieConfig(data_dir=str(tmp_path / "data"), entrylog_max_bytes=8192,
                          compaction_rate_bytes=0)
    opened = LedgerStorage(OsDisk(), config)
    opened.open()
    yield opened
    opened.close()


def entry(ledger_id: int, entry_id: int, size: int = 500) -> bytes:
    payload = os.urandom(size)
    return frame_entry(ledger_id, entry_id, entry_id - 1, len(payload), payload)


def fill(storage: LedgerStorage, ledger_ids, count: int) -> dict:
    """Interleaved ledgers: each checkpoint flush appends one entry of each."""
    written = {}
    for entry_id in range(count):
        for ledger_id in ledger_ids:
            data = entry(ledger_id, entry_id)
            storage.add_entry(ledger_id, entry_id, data)
            written[(ledger_id, entry_id)] = data
        storage.flush()
    storage.entry_logger._finish_active()  # roll: every log is a rolled one
    return written


def log_bytes(storage: LedgerStorage) -> int:
    ledger_dir = storage.ledger_dir
    return sum(os.path.getsize(os.path.join(ledger_dir, name))
               for name in os.listdir(ledger_dir) if name.endswith(".log"))


def log_of(storage: LedgerStorage, ledger_id: int, entry_id: int) -> int:
    return storage.locations.get(ledger_id, entry_id) >> 32


def test_compaction_keeps_every_live_entry_byte_identical_and_frees_the_rest(storage):
    written = fill(storage, [0, 1, 2], 30)
    old_logs = storage.entry_logger.log_ids()
    storage.delete_ledger(1)
    storage.delete_ledger(2)
    storage.flush()
    before = log_bytes(storage)

    result = GarbageCollector(storage).run(force="major")

    assert result.compaction == "major" and result.problems == []
    assert sorted(result.logs_compacted) == old_logs  # a third live each: under 0.8
    assert not set(old_logs) & set(storage.entry_logger.log_ids())
    for entry_id in range(30):
        assert storage.get_entry(0, entry_id) == written[(0, entry_id)]
        assert log_of(storage, 0, entry_id) not in old_logs
    assert result.entries_moved == 30
    live = sum(len(written[(0, e)]) + SIZE.size for e in range(30))
    assert result.bytes_written_compaction == live
    after = log_bytes(storage)
    assert before - after == result.bytes_reclaimed_compaction > 0
    assert after < live + 2 * HEADER_SIZE * len(storage.entry_logger.log_ids())
    assert not [n for n in os.listdir(storage.ledger_dir) if n.endswith(".compacting")]


def test_entries_the_index_does_not_locate_in_the_log_are_not_copied(storage):
    written = fill(storage, [0, 4], 12)
    first = log_of(storage, 0, 0)
    # A re-add of identical bytes moves (0, 0) to a later log; (4, 0) loses its location
    # as a checkpoint that crashed before its index batch would leave it (an orphan).
    storage.add_entry(0, 0, written[(0, 0)])
    storage.flush()
    newer = storage.locations.get(0, 0)
    storage.locations.kv.delete(encode_location_key(4, 0), sync=True)
    in_first = [k for k in written if storage.locations.get(*k) is not None
                and log_of(storage, *k) == first]
    storage.delete_ledger(4)
    storage.flush()

    compaction = LogCompaction(storage, first, RateLimiter(0))
    compaction.step(float("inf"))

    assert compaction.phase is Phase.DONE
    assert compaction.entries_copied == len([k for k in in_first if k[0] == 0])
    assert storage.locations.get(0, 0) == newer
    assert storage.get_entry(0, 0) == written[(0, 0)]
    assert first not in storage.entry_logger.log_ids()


class StepClock:
    """Each reading advances one tick, so ``step(clock() + 3)`` does one action."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> float:
        self.now += 1
        return self.now


class Paused(Exception):
    pass


class PausingCompaction(LogCompaction):
    """Stops before step 6, as a run does when a checkpoint takes the thread between steps."""

    paused = True

    def _switch(self) -> None:
        if self.paused:
            raise Paused()
        super()._switch()


def test_a_newer_location_written_between_copy_and_switch_is_not_overwritten(storage):
    written = fill(storage, [0, 6], 12)
    target = log_of(storage, 0, 0)
    compaction = PausingCompaction(storage, target, RateLimiter(0))
    with pytest.raises(Paused):
        compaction.step(float("inf"))
    assert compaction.phase is Phase.SWITCH and compaction.entries_moved == 0
    # A checkpoint between two steps writes a newer location for (0, 0) (compaction CP2).
    storage.add_entry(0, 0, written[(0, 0)])
    storage.flush()
    newer = storage.locations.get(0, 0)
    compaction.paused = False
    compaction.step(float("inf"))
    assert compaction.phase is Phase.DONE
    assert storage.locations.get(0, 0) == newer
    assert compaction.entries_moved == compaction.entries_copied - 1
    for key, data in written.items():
        assert storage.get_entry(*key) == data


def test_a_read_holding_a_location_of_a_deleted_log_retries_through_the_index(storage):
    written = fill(storage, [0, 8], 10)
    storage.delete_ledger(8)
    storage.flush()
    stale = storage.locations.get(0, 3)
    GarbageCollector(storage).run(force="major")
    assert storage.locations.get(0, 3) != stale
    real_get = storage.locations.get
    calls = []

    def racing_get(ledger_id, entry_id):
        calls.append((ledger_id, entry_id))
        # The first lookup happened before the switch: it still sees the old location.
        return stale if len(calls) == 1 else real_get(ledger_id, entry_id)

    storage.locations.get = racing_get
    try:
        assert storage.get_entry(0, 3) == written[(0, 3)]  # R4, not EIO
    finally:
        storage.locations.get = real_get
    assert len(calls) == 2


def test_the_throttle_counts_bytes_read_and_written_and_makes_steps_wait(storage):
    written = fill(storage, [0, 9], 20)
    storage.delete_ledger(9)
    storage.flush()
    clock = [0.0]
    limiter = RateLimiter(10_000, lambda: clock[0])
    limiter.consume(5_000)
    assert limiter.delay_s() == pytest.approx(0.5)
    clock[0] += 10.0  # idle time leaves only a small burst of credit (BURST_S)
    limiter.consume(0)
    assert limiter.delay_s() == 0.0
    gc = GarbageCollector(storage, clock=lambda: clock[0])
    gc.limiter = RateLimiter(10_000, lambda: clock[0])
    run = gc.begin(force="major")
    waits = []
    while (wait := gc.step(run)) is not None:
        waits.append(wait)
        clock[0] += wait
    result = run.result
    assert len(waits) > 5 and all(w > 0 for w in waits)
    moved_bytes = sum(len(written[(0, e)]) + SIZE.size for e in range(20))
    assert result.bytes_written_compaction == moved_bytes
    assert sum(waits) >= moved_bytes * 2 / 10_000 * 0.9  # read + written, at 10 kB/s
    assert all(storage.get_entry(0, e) == written[(0, e)] for e in range(20))


def test_a_log_corrupt_mid_scan_aborts_its_compaction_and_is_quarantined(storage):
    written = fill(storage, [0, 10], 12)
    storage.delete_ledger(10)
    storage.flush()
    target = log_of(storage, 0, 0)
    path = storage.entry_logger.log_path(target)
    with EntryLogReader(storage.disk, path, target) as reader:
        found = list(reader.scan(payload=False))
    middle = found[len(found) // 2]
    with open(path, "r+b") as handle:  # its ledgersMap stays valid; the scan hits this
        handle.seek(middle.offset)
        handle.write((7).to_bytes(4, "big"))
    before = {k: storage.locations.get(*k) for k in written}

    result = GarbageCollector(storage).run(force="major")

    assert any(q.endswith(f"{target:x}.log.quarantined") for q in result.quarantined)
    assert not [n for n in os.listdir(storage.ledger_dir) if n.endswith(".compacting")]
    for key in written:
        if before[key] is not None and before[key] >> 32 == target:
            assert storage.locations.get(*key) == before[key]  # untouched
    readable = [e for e in range(12) if before[(0, e)] >> 32 == target
                and (before[(0, e)] & 0xFFFFFFFF) - 4 < middle.offset]
    assert readable and all(storage.get_entry(0, e) == written[(0, e)] for e in readable)
    others = [e for e in range(12) if before[(0, e)] >> 32 != target]
    assert all(storage.get_entry(0, e) == written[(0, e)] for e in others)


def test_abort_drops_the_compacting_file_and_leaves_the_old_log_in_use(storage):
    written = fill(storage, [0, 12], 12)
    storage.delete_ledger(12)
    storage.flush()
    target = log_of(storage, 0, 0)
    clock = StepClock()
    compaction = LogCompaction(storage, target, RateLimiter(0), clock)
    compaction.step(clock() + 3)
    compaction.step(clock() + 3)
    compacting = [n for n in os.listdir(storage.ledger_dir) if n.endswith(".compacting")]
    assert len(compacting) == 1 and compaction.phase is Phase.COPY
    compaction.abort("the bookie is stopping")
    assert compaction.phase is Phase.ABORTED
    assert not [n for n in os.listdir(storage.ledger_dir) if n.endswith(".compacting")]
    assert target in storage.entry_logger.log_ids()
    assert all(storage.get_entry(0, e) == written[(0, e)] for e in range(12))


def test_a_compaction_leftover_is_deleted_at_start(tmp_path):
    config = BookieConfig(data_dir=str(tmp_path / "data"), entrylog_max_bytes=8192)
    first = LedgerStorage(OsDisk(), config)
    first.open()
    fill(first, [0], 4)
    channel = first.entry_logger.create_compaction_log()
    channel.add_entry(0, entry(0, 0))
    channel.flush_and_sync()  # a crash here leaves the partial copy behind
    channel.close()
    first.close()
    assert os.path.exists(channel.path)
    again = LedgerStorage(OsDisk(), config)
    again.open()
    try:
        assert not os.path.exists(channel.path)
        assert again.entry_logger.create_compaction_log().log_id > channel.log_id
    finally:
        again.close()
