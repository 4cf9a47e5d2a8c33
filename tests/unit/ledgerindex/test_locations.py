"""ledgerindex.locations: EntryLocationIndex (docs/formats.md §7.1) over a real RocksDB."""

from __future__ import annotations

import glob
import os

import pytest

from bookie.errors import IOFailure
from ledgerindex import keys
from ledgerindex.locations import EntryLocationIndex

MAX = 2**63 - 1


def loc(log_id: int, pos: int) -> int:
    return log_id << 32 | pos


@pytest.fixture
def index(tmp_path):
    index = EntryLocationIndex.open(tmp_path / "locations")
    yield index
    index.close()


def test_get_of_a_missing_entry_is_none(index):
    assert index.get(1, 0) is None


def test_add_batch_then_get(index):
    assert index.add_batch([(1, 0, loc(1, 1028)), (1, 1, loc(1, 2000))]) == 2
    assert index.get(1, 0) == loc(1, 1028)
    assert index.get(1, 1) == loc(1, 2000)


def test_a_later_location_replaces_an_earlier_one(index):
    # Replay re-adds entries already flushed: the location moves to the new copy (§8.4).
    index.add_batch([(1, 0, loc(1, 1028))])
    index.add_batch([(1, 0, loc(2, 1028))])
    assert index.get(1, 0) == loc(2, 1028)


def test_a_stored_zero_value_means_no_entry(index):
    index.kv.put(keys.encode_location_key(5, 3), bytes(8))
    assert index.get(5, 3) is None
    assert list(index.entries(5)) == []


def test_negative_or_out_of_range_ids_are_simply_absent_on_get(index):
    assert index.get(-1, 0) is None and index.get(1, -1) is None and index.get(2**63, 0) is None


@pytest.mark.parametrize("bad, message", [
    ((-1, 0, 1028), "ledger id -1"),
    ((1, -1, 1028), "entry id -1 of ledger 1"),
    ((1, MAX, 1028), "entry id 9223372036854775807"),
    ((1, 2, 0), "location 0 of entry 1/2"),
])
def test_add_batch_checks_every_item_before_writing_any(index, bad, message):
    with pytest.raises(ValueError, match=message):
        index.add_batch([(1, 0, loc(1, 1028)), bad])
    assert index.get(1, 0) is None


def test_a_value_of_the_wrong_size_is_an_io_failure_naming_path_and_key(index, tmp_path):
    key = keys.encode_location_key(7, 1)
    index.kv.put(key, b"\x01\x02")
    with pytest.raises(IOFailure, match=f"{tmp_path / 'locations'}: key {key.hex()}: "
                                        "locations value of 2 bytes"):
        index.get(7, 1)


# --- last entry: a floor lookup of (L, 2**63-1) ----------------------------------------


def test_last_entry_id_of_an_empty_index_is_none(index):
    assert index.last_entry_id(0) is None and index.last_entry_id(MAX) is None


def test_last_entry_id_ignores_neighbouring_ledgers(index):
    index.add_batch([(9, 0, 1028), (9, 7, 2000), (11, 0, 1028), (11, 3, 2000)])
    assert index.last_entry_id(10) is None
    assert index.last_entry_id(9) == 7
    assert index.last_entry_id(11) == 3
    assert index.last_entry_id(12) is None


def test_last_entry_id_of_ledger_zero(index):
    index.add_batch([(0, 0, 1028), (0, 41, 2000), (1, 5, 3000)])
    assert index.last_entry_id(0) == 41


def test_last_entry_id_with_large_entry_ids(index):
    index.add_batch([(3, 2**32, 1028), (3, MAX - 1, 2000)])
    assert index.last_entry_id(3) == MAX - 1


def test_last_entry_id_near_the_largest_ledger_ids(index):
    index.add_batch([(MAX - 1, 5, 1028), (MAX, 0, 2000), (MAX, 9, 3000)])
    assert index.last_entry_id(MAX) == 9
    assert index.last_entry_id(MAX - 1) == 5
    assert index.last_entry_id(MAX - 2) is None


def test_last_entry_id_is_strictly_below_the_end_key(index):
    # docs/formats.md §7.1: "the largest key strictly below (L, 2**63-1)". Such a key is never
    # written here (LO2), but a foreign one is not taken as an entry.
    index.add_batch([(4, 2, 1028)])
    index.kv.put(keys.encode_location_key(4, MAX), keys.encode_location_value(2000))
    assert index.last_entry_id(4) == 2


# --- iteration and deletion ------------------------------------------------------------


def test_entries_in_entry_id_order_from_a_first_id(index):
    index.add_batch([(2, e, 1028 + e) for e in (5, 0, 300, 1)] + [(1, 9, 1), (3, 0, 1)])
    assert list(index.entries(2)) == [(0, 1028), (1, 1029), (5, 1033), (300, 1328)]
    assert [e for e, _ in index.entries(2, first_entry_id=2)] == [5, 300]
    assert index.count_and_max(2) == (4, 300)
    assert index.count_and_max(4) == (0, None)


def test_delete_ledger_removes_only_that_ledger(index):
    index.add_batch([(l, e, 1028) for l in (4, 5, 6) for e in range(10)])
    index.delete_ledger(5)
    assert index.last_entry_id(5) is None and index.get(5, 0) is None
    assert index.count_and_max(4) == (10, 9) and index.count_and_max(6) == (10, 9)


def test_delete_of_the_largest_ledger_id(index):
    index.add_batch([(MAX, 0, 1028), (MAX, MAX - 1, 2000), (MAX - 1, 0, 1028)])
    index.delete_ledger(MAX)
    assert index.last_entry_id(MAX) is None
    assert index.get(MAX - 1, 0) == 1028


def test_delete_ledgers_is_one_batch_and_compaction_keeps_the_rest(index):
    index.add_batch([(l, e, 1028) for l in range(10) for e in range(100)])
    assert index.delete_ledgers([1, 3, 5]) == 3
    index.compact()
    assert [l for l in range(10) if index.last_entry_id(l) is not None] == [0, 2, 4, 6, 7, 8, 9]


def test_reopen_sees_the_batch(tmp_path):
    with_index = EntryLocationIndex.open(tmp_path / "locations")
    with_index.add_batch([(1, 0, 1028)])
    with_index.close()
    reopened = EntryLocationIndex.open(tmp_path / "locations", create=False)
    try:
        assert reopened.get(1, 0) == 1028
    finally:
        reopened.close()


def test_synced_add_batch_survives_kill_9(tmp_path, killed_child):
    killed_child(f"""
        from ledgerindex.locations import EntryLocationIndex
        index = EntryLocationIndex.open({str(tmp_path / 'locations')!r})
        index.add_batch([(7, e, (1 << 32) | (1028 + e)) for e in range(500)], sync=True)
    """, how="exit")
    index = EntryLocationIndex.open(tmp_path / "locations")
    try:
        assert index.last_entry_id(7) == 499
        assert index.get(7, 250) == (1 << 32) | 1278
    finally:
        index.close()


def test_synced_delete_survives_kill_9(tmp_path, killed_child):
    index = EntryLocationIndex.open(tmp_path / "locations")
    index.add_batch([(7, 0, 1028), (8, 0, 1028)])
    index.close()
    killed_child(f"""
        from ledgerindex.locations import EntryLocationIndex
        index = EntryLocationIndex.open({str(tmp_path / 'locations')!r})
        index.delete_ledger(7, sync=True)
    """)
    index = EntryLocationIndex.open(tmp_path / "locations")
    try:
        assert index.get(7, 0) is None and index.get(8, 0) == 1028
    finally:
        index.close()


def test_locations_are_stored_with_lz4(tmp_path):
    index = EntryLocationIndex.open(tmp_path / "locations")
    index.close()
    options = "".join(open(p).read()
                      for p in glob.glob(os.path.join(tmp_path, "locations", "OPTIONS-*")))
    assert "compression=kLZ4Compression" in options


def test_a_batch_larger_than_a_write_chunk_is_written_whole(index, monkeypatch):
    # rocksdict holds the GIL through a write: large batches go in chunks, only the last
    # synced (its WAL sync covers the earlier ones), and the count is of all of them.
    from ledgerindex import locations

    monkeypatch.setattr(locations, "WRITE_CHUNK", 100)
    syncs = []
    write_batch = index.kv.write_batch

    def recording(puts, *args, sync=True, **kwargs):
        syncs.append((len(puts), sync))
        return write_batch(puts, *args, sync=sync, **kwargs)

    monkeypatch.setattr(index.kv, "write_batch", recording)
    items = [(3, entry_id, loc(1, 1024 + entry_id)) for entry_id in range(250)]
    assert index.add_batch(items, sync=True) == 250
    assert syncs == [(100, False), (100, False), (50, True)]
    assert [index.get(3, entry_id) for entry_id in range(250)] == [location for _, _, location in items]
    syncs.clear()
    assert index.add_batch(items[:10], sync=False) == 10
    assert syncs == [(10, False)]
