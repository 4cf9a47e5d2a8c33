"""Batch reads over a real LedgerStorage (files, RocksDB): ``get_entries`` and ``get_listed``
(a striped ledger's every third id) answer exactly what point reads answer, in a few file
reads, and ``get_batch(framed=True)`` exactly the body of a
v2 batch answer framed entry by entry (entrylog/run_reader.py RR1-RR3, issue 41)."""

from __future__ import annotations

import os

import pytest

from bookie.config import BookieConfig
from bookie.disk import OsDisk, OsFile
from bookie.entry import frame_entry
from bookie.errors import IOFailure
from bookie.storage import LedgerStorage
from entrylog.format import SIZE
from entrylog.run_reader import RUN_GAP_BYTES, RUN_SPAN_BYTES, Bound, joins

BIG = 1 << 30


@pytest.fixture
def storage(tmp_path):
    opened = LedgerStorage(OsDisk(), BookieConfig(data_dir=str(tmp_path / "data")))
    opened.open()
    yield opened
    opened.close()


def entry(ledger_id: int, entry_id: int, size: int) -> bytes:
    payload = os.urandom(size)
    return frame_entry(ledger_id, entry_id, entry_id - 1, len(payload), payload)


def fill(storage, ledger_ids, flushes: int, per_flush: int, size=lambda e: 1000) -> dict:
    """Ledgers interleaved flush by flush, ``per_flush`` entries of each a flush."""
    written = {}
    for flush in range(flushes):
        for ledger_id in ledger_ids:
            for entry_id in range(flush * per_flush, (flush + 1) * per_flush):
                data = entry(ledger_id, entry_id, size(entry_id))
                storage.add_entry(ledger_id, entry_id, data)
                written[(ledger_id, entry_id)] = data
        storage.flush()
    return written


@pytest.fixture
def file_reads(monkeypatch):
    """How many preads the entry logs get (the real reads, counted on their way)."""
    count = [0]
    real = OsFile.read_at

    def counted(self, offset, size):
        count[0] += 1
        return real(self, offset, size)

    monkeypatch.setattr(OsFile, "read_at", counted)
    return count


def test_a_range_is_what_point_reads_give_in_a_few_file_reads(storage, file_reads):
    # Entries of 6 KiB every 7th (past a point read's 4 KiB read-ahead, and past a run's
    # averaged tail), three ledgers interleaved flush by flush.
    written = fill(storage, [0, 1, 2], flushes=4, per_flush=50,
                   size=lambda e: 6000 if e % 7 == 3 else 1000)
    for ledger_id, first, last in [(1, 0, 199), (0, 37, 163), (2, 190, 250), (1, 199, 199)]:
        file_reads[0] = 0
        ranged = storage.get_entries(ledger_id, first, last, BIG)
        ranged_reads = file_reads[0]
        file_reads[0] = 0
        pointed = [storage.get_entry(ledger_id, e) for e in range(first, min(last, 199) + 1)]
        assert ranged == pointed == [written[(ledger_id, e)]
                                     for e in range(first, min(last, 199) + 1)]
        if len(pointed) > 100:  # one read per flush's run, plus the large entries' own
            assert ranged_reads <= 4 + len(pointed) // 7 + 1 < file_reads[0] // 3


def test_a_range_takes_cached_entries_and_stops_at_a_gap_and_at_the_byte_bound(storage):
    written = fill(storage, [5], flushes=2, per_flush=10)  # 0..19 in the logs
    for entry_id in (20, 21, 23):  # in the write cache; 22 never written
        written[(5, entry_id)] = data = entry(5, entry_id, 1000)
        storage.add_entry(5, entry_id, data)
    assert storage.get_entries(5, 15, 30, BIG) == [written[(5, e)] for e in range(15, 22)]
    size = len(written[(5, 0)])
    assert storage.get_entries(5, 0, 19, 3 * size) == [written[(5, e)] for e in range(3)]
    assert storage.get_entries(5, 0, 19, 1) == [written[(5, 0)]]  # the first one always
    assert storage.get_entries(5, 22, 23, BIG) == []
    assert storage.get_entries(6, 0, 9, BIG) == []  # no such ledger


def striped(storage, ledger_ids, flushes: int, per_flush: int) -> dict:
    """What one bookie of a 3/2/2 ledger holds: the ids whose write set names it, two of
    every three (e % 3 != 2), ledgers interleaved flush by flush."""
    written = {}
    for flush in range(flushes):
        for ledger_id in ledger_ids:
            for entry_id in range(flush * per_flush, (flush + 1) * per_flush):
                if entry_id % 3 != 2:
                    written[(ledger_id, entry_id)] = data = entry(ledger_id, entry_id, 1000)
                    storage.add_entry(ledger_id, entry_id, data)
        storage.flush()
    return written


def test_a_list_of_every_third_id_is_what_point_reads_give_in_a_few_file_reads(storage,
                                                                              file_reads):
    # The reads a 3/2/2 ledger's reader sends this bookie: every third id, of the ids it
    # holds two in three (issue 41: one lookup and one pread each before).
    written = striped(storage, [0, 1], flushes=3, per_flush=150)
    for entry_id in (450, 453):  # and two still in the write cache
        written[(1, entry_id)] = data = entry(1, entry_id, 1000)
        storage.add_entry(1, entry_id, data)
    asked = list(range(0, 457, 3))  # 456 is stored nowhere: None, and the list goes on
    file_reads[0] = 0
    listed = storage.get_listed(1, asked, BIG)
    assert listed == [written.get((1, e)) for e in asked]
    assert file_reads[0] <= 3  # a run a flush, where point reads took one each
    gapped = [1, 2, 4, 5, 7]  # 2 and 5 are not on this bookie
    assert storage.get_listed(0, gapped, BIG) == [written.get((0, e)) for e in gapped]
    size = len(written[(1, 0)])
    assert storage.get_listed(1, asked, 3 * size) == [written[(1, e)] for e in asked[:3]]
    assert storage.get_listed(1, asked, 1) == [written[(1, 0)]]  # the first one always
    assert storage.get_listed(7, [0, 3], BIG) == [None, None]  # no such ledger


def test_a_damaged_entry_in_a_run_fails_the_range_as_its_point_read_fails(storage):
    fill(storage, [3], flushes=1, per_flush=20)
    location = storage.locations.get(3, 12)
    path = storage.entry_logger.log_path(location >> 32)
    with open(path, "r+b") as handle:  # its stored ledger id: another ledger's
        handle.seek(location & 0xFFFFFFFF)
        handle.write((4).to_bytes(8, "big"))
    with pytest.raises(IOFailure, match="wrong entry"):
        storage.get_entry(3, 12)
    with pytest.raises(IOFailure, match="wrong entry"):
        storage.get_entries(3, 0, 19, BIG)
    assert len(storage.get_entries(3, 0, 11, BIG)) == 12


def test_runs_join_close_positions_of_one_log_within_the_span():
    log = 7 << 32
    assert joins(log | 1100, log | 1100, log | 2150)
    assert not joins(log | 1100, log | 2150, log | 1100)  # backwards
    assert not joins(log | 1100, log | 1100, (8 << 32) | 2150)  # another log
    assert not joins(log | 1100, log | 1100, log | (1100 + RUN_GAP_BYTES + 1))
    assert not joins(log | 1100, log | (1100 + RUN_SPAN_BYTES - 10),
                     log | (1100 + RUN_SPAN_BYTES + 10))


def framed(entries: list[bytes]) -> bytes:
    return b"".join(SIZE.pack(len(e)) + e for e in entries)


def test_a_framed_batch_is_the_entries_framed_one_by_one_within_its_bounds(storage):
    written = fill(storage, [0, 1], flushes=3, per_flush=40,
                   size=lambda e: 6000 if e % 9 == 4 else 900)
    for entry_id in (120, 121):  # and two still in the write cache
        written[(1, entry_id)] = data = entry(1, entry_id, 700)
        storage.add_entry(1, entry_id, data)
    wanted = [written[(1, e)] for e in range(122)]
    bound = Bound(BIG)
    assert b"".join(storage.get_batch(1, 0, 200, bound, framed=True)) == framed(wanted)
    assert bound.count == 122 and bound.payload == sum(map(len, wanted))
    # A v2 answer's maxSize: entries while their framed sizes fit, the first one always.
    fits = sum(len(e) + 4 for e in wanted[:50])
    for max_framed, count in ((fits, 50), (fits - 1, 49), (1, 1)):
        bound = Bound(BIG, max_framed)
        body = b"".join(storage.get_batch(1, 0, 121, bound, framed=True))
        assert (body, bound.count) == (framed(wanted[:count]), count)
    bound = Bound(sum(map(len, wanted[:30])))  # the payload bound (8 MiB a batch)
    assert b"".join(storage.get_batch(1, 0, 121, bound, framed=True)) == framed(wanted[:30])


def test_a_batch_whose_first_entry_is_over_its_first_max_takes_nothing_but_its_size(storage):
    """PB7 (issue 53): a listener's batch read bounds its first entry too (``first_max``):
    over it, nothing is taken and ``oversize`` is its size, from the log and the write
    cache; within it, the batch is as before."""
    written = fill(storage, [9], flushes=1, per_flush=5, size=lambda e: 6000)
    written[(9, 5)] = data = entry(9, 5, 6000)
    storage.add_entry(9, 5, data)  # in the write cache
    size = len(written[(9, 0)])
    for first in (0, 5):
        bound = Bound(BIG, None, size - 1)
        assert storage.get_batch(9, first, 5, bound) == [] and bound.oversize == size
    bound = Bound(BIG, None, size)
    assert storage.get_batch(9, 0, 5, bound) == [written[(9, e)] for e in range(6)]
