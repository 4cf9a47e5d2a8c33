"""compaction_throttle (bookie/compaction.py CP4): by bytes, or by entries as BookKeeper's
isThrottleByBytes=false with compactionRateByEntries. A real entry log on disk compacted
through GarbageCollector, its limiter built from the settings, waits counted on an injected
clock."""

from __future__ import annotations

import pytest

from bookie.compaction import RateLimiter
from bookie.config import BookieConfig, ConfigError
from bookie.disk import OsDisk
from bookie.gc import GarbageCollector
from bookie.storage import LedgerStorage
from entrylog.format import SIZE
from tests.unit.bookie.test_gc_compaction import fill


@pytest.fixture
def open_storage(tmp_path):
    opened = []

    def make(**settings) -> LedgerStorage:
        config = BookieConfig(data_dir=str(tmp_path / "data"), entrylog_max_bytes=8192,
                              **settings)
        storage = LedgerStorage(OsDisk(), config)
        storage.open()
        opened.append(storage)
        return storage
    yield make
    for storage in opened:
        storage.close()


def _compact(storage: LedgerStorage) -> tuple[list[float], object]:
    """A forced major compaction on a clock that moves only by the waits asked."""
    clock = [0.0]
    gc = GarbageCollector(storage, clock=lambda: clock[0])
    run = gc.begin(force="major")
    waits = []
    while (wait := gc.step(run)) is not None:
        if wait > 0:
            waits.append(wait)
            clock[0] += wait
    return waits, run.result


def test_throttled_by_entries_each_copied_entry_costs_one_permit_whatever_its_size(
        open_storage):
    # 1 byte/s would take hours for these bytes: by entries, bytes do not count.
    storage = open_storage(compaction_throttle="entries", compaction_rate_entries=10,
                           compaction_rate_bytes=1)
    written = fill(storage, [0, 9], 20)
    storage.delete_ledger(9)  # its 20 entries are scanned and dropped: no permit
    storage.flush()
    waits, result = _compact(storage)
    assert result.entries_moved == 20
    assert len(waits) == 20  # asked per entry: one 0.1 s wait after each of the 20 copies
    assert all(w == pytest.approx(0.1) for w in waits)
    assert sum(waits) == pytest.approx(20 / 10)
    assert all(storage.get_entry(0, e) == written[(0, e)] for e in range(20))


def test_throttled_by_bytes_reads_and_copies_count_their_bytes(open_storage):
    storage = open_storage(compaction_rate_bytes=10_000, compaction_rate_entries=1)
    written = fill(storage, [0, 9], 20)
    storage.delete_ledger(9)
    storage.flush()
    waits, result = _compact(storage)
    assert result.entries_moved == 20
    record = len(written[(0, 0)]) + SIZE.size
    scanned = 40 * record  # both ledgers read, only ledger 0 written
    assert sum(waits) >= (scanned + 20 * record) / 10_000 * 0.9


def test_the_limiter_counts_units_as_its_throttle_says():
    clock = [0.0]
    entries = RateLimiter(4, lambda: clock[0], per_entry=True)
    entries.read(1 << 20)
    assert entries.delay_s() == 0.0
    entries.copied(1 << 20)
    assert entries.delay_s() == pytest.approx(0.25)
    unthrottled = RateLimiter(0, lambda: clock[0], per_entry=True)
    unthrottled.copied(1)
    assert unthrottled.delay_s() == 0.0
    by_bytes = RateLimiter.of(BookieConfig(compaction_rate_bytes=1000), lambda: clock[0])
    by_bytes.read(500)
    by_bytes.copied(500)
    assert by_bytes.delay_s() == pytest.approx(1.0)


def test_compaction_throttle_is_bytes_or_entries():
    assert BookieConfig().compaction_throttle == "bytes"
    assert BookieConfig().compaction_rate_entries == 1000  # BookKeeper's default
    with pytest.raises(ConfigError, match="compaction_throttle"):
        BookieConfig().replace(compaction_throttle="time")
    with pytest.raises(ConfigError, match="compaction_rate_entries"):
        BookieConfig().replace(compaction_rate_entries=-1)
