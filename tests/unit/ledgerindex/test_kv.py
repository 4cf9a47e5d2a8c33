"""ledgerindex.kv: KeyValueStore over a real RocksDB in tmp_path."""

from __future__ import annotations

import glob
import os

import pytest

from bookie.errors import IOFailure
from ledgerindex import kv as kv_module
from ledgerindex.kv import KeyValueStore


@pytest.fixture
def store(tmp_path):
    kv = KeyValueStore.open(tmp_path / "db")
    yield kv
    kv.close()


def fill(kv, *names):
    kv.write_batch([(name, name.upper()) for name in names])


def test_get_of_a_missing_key_is_none(store):
    assert store.get(b"nope") is None


def test_put_then_get_and_delete(store):
    store.put(b"k", b"v")
    store.put(b"s", b"w", sync=True)
    assert (store.get(b"k"), store.get(b"s")) == (b"v", b"w")
    store.delete(b"k", sync=True)
    assert store.get(b"k") is None


def test_write_batch_applies_puts_deletes_and_ranges(store):
    fill(store, b"a", b"b", b"c", b"d", b"e")
    count = store.write_batch([(b"f", b"F")], deletes=[b"a"], delete_ranges=[(b"c", b"e")])
    assert count == 3
    assert list(store.items()) == [(b"b", b"B"), (b"e", b"E"), (b"f", b"F")]


def test_in_one_batch_a_deletion_wins_over_a_put(store):
    store.write_batch([(b"x", b"1"), (b"y", b"2")], deletes=[b"x"],
                      delete_ranges=[(b"y", b"z")])
    assert store.get(b"x") is None and store.get(b"y") is None


def test_an_empty_batch_writes_nothing(store):
    assert store.write_batch([]) == 0


def test_delete_range_end_is_exclusive(store):
    fill(store, b"a", b"b", b"c")
    store.delete_range(b"a", b"c")
    assert list(store.items()) == [(b"c", b"C")]


def test_reversed_range_is_refused_before_rocksdb_sees_it(store):
    # RocksDB would accept it into the WAL, fail, and then fail every later write.
    with pytest.raises(ValueError, match="below start"):
        store.delete_range(b"b", b"a")
    with pytest.raises(ValueError, match="below start"):
        store.write_batch([], delete_ranges=[(b"b", b"a")])
    store.put(b"still", b"writable")
    assert store.get(b"still") == b"writable"


def test_floor_is_largest_key_at_or_below(store):
    fill(store, b"b", b"d")
    assert store.floor(b"a") is None
    assert store.floor(b"b") == (b"b", b"B")
    assert store.floor(b"c") == (b"b", b"B")
    assert store.floor(b"zzz") == (b"d", b"D")


def test_items_between_start_and_exclusive_end(store):
    fill(store, b"a", b"b", b"c", b"d")
    assert [k for k, _ in store.items(b"b", b"d")] == [b"b", b"c"]
    assert [k for k, _ in store.items(start=b"bb")] == [b"c", b"d"]
    assert [k for k, _ in store.items(end=b"b")] == [b"a"]
    assert list(store.items(b"x", b"y")) == []


def test_items_is_a_snapshot_of_when_it_started(store):
    fill(store, b"a", b"b")
    iterator = store.items()
    assert next(iterator) == (b"a", b"A")
    store.put(b"c", b"C")
    assert list(iterator) == [(b"b", b"B")]


def test_checkpoint_is_a_consistent_copy(store, tmp_path):
    fill(store, b"a", b"b")
    store.checkpoint(tmp_path / "copy")
    store.put(b"c", b"C")
    with KeyValueStore.open(tmp_path / "copy", read_only=True) as copy:
        assert list(copy.items()) == [(b"a", b"A"), (b"b", b"B")]


def test_checkpoint_to_an_existing_path_is_an_io_failure_naming_the_db(store, tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(IOFailure, match=f"RocksDB {tmp_path / 'db'}: checkpoint"):
        store.checkpoint(tmp_path / "taken")


def test_read_only_instance_reads_and_refuses_writes(tmp_path):
    with KeyValueStore.open(tmp_path / "db") as primary:
        fill(primary, b"a")
    with KeyValueStore.open(tmp_path / "db", read_only=True) as replica:
        assert replica.get(b"a") == b"A"
        with pytest.raises(AssertionError, match="read-only"):
            replica.put(b"b", b"B")


def test_read_only_open_beside_a_running_writer(store, tmp_path):
    # bookie shell export-index reads the index of a running bookie (docs/design.md §8).
    fill(store, b"a")
    store.sync()
    with KeyValueStore.open(tmp_path / "db", read_only=True) as replica:
        assert replica.get(b"a") == b"A"


def test_secondary_follows_the_primary_after_catch_up(store, tmp_path):
    fill(store, b"a")
    secondary = KeyValueStore.open(tmp_path / "db", secondary_path=tmp_path / "secondary")
    try:
        assert secondary.get(b"a") == b"A"
        store.put(b"b", b"B", sync=True)
        secondary.catch_up()
        assert secondary.get(b"b") == b"B"
    finally:
        secondary.close()


@pytest.mark.parametrize("flags", [dict(create=False), dict(read_only=True)])
def test_opening_a_missing_db_without_create_fails_and_creates_nothing(tmp_path, flags):
    with pytest.raises(IOFailure, match=f"RocksDB {tmp_path / 'absent'}: open failed"):
        KeyValueStore.open(tmp_path / "absent", **flags)
    assert not (tmp_path / "absent").exists()


def test_a_second_writer_is_refused_by_the_lock(store, tmp_path):
    with pytest.raises(IOFailure, match=f"RocksDB {tmp_path / 'db'}: open failed.*lock"):
        KeyValueStore.open(tmp_path / "db")


def test_rocksdb_status_errors_become_io_failure_and_others_pass():
    with pytest.raises(IOFailure, match="RocksDB /x: put failed: IO error: disk"):
        with kv_module._io("/x", "put"):
            raise Exception("IO error: disk")
    with pytest.raises(KeyError):
        with kv_module._io("/x", "put"):
            raise KeyError("raw mode only support bytes")


def test_close_is_idempotent_and_use_after_close_is_a_programmer_error(tmp_path):
    kv = KeyValueStore.open(tmp_path / "db")
    kv.close()
    kv.close()
    assert kv.closed
    with pytest.raises(AssertionError, match="after close"):
        kv.get(b"a")


def test_reopen_after_close_sees_the_data(tmp_path):
    with KeyValueStore.open(tmp_path / "db") as kv:
        fill(kv, b"a")
    with KeyValueStore.open(tmp_path / "db") as kv:
        assert kv.get(b"a") == b"A"


def test_synced_batch_survives_kill_9(tmp_path, killed_child):
    killed_child(f"""
        from ledgerindex.kv import KeyValueStore
        kv = KeyValueStore.open({str(tmp_path / 'db')!r})
        kv.write_batch([(b"k%04d" % i, b"v") for i in range(1000)], sync=True)
    """)
    with KeyValueStore.open(tmp_path / "db") as kv:
        assert sum(1 for _ in kv.items()) == 1000


def test_sync_makes_earlier_unsynced_puts_durable_before_os_exit(tmp_path, killed_child):
    killed_child(f"""
        from ledgerindex.kv import KeyValueStore
        kv = KeyValueStore.open({str(tmp_path / 'db')!r})
        kv.put(b"a", b"1")
        kv.put(b"b", b"2")
        kv.sync()
    """, how="exit")
    with KeyValueStore.open(tmp_path / "db") as kv:
        assert list(kv.items()) == [(b"a", b"1"), (b"b", b"2")]


def test_unsynced_put_survives_kill_9_through_the_page_cache(tmp_path, killed_child):
    # V1 and A2: RocksDB write()s each WAL record before put returns; no fsync needed.
    killed_child(f"""
        from ledgerindex.kv import KeyValueStore
        kv = KeyValueStore.open({str(tmp_path / 'db')!r})
        kv.put(b"a", b"1", sync=False)
    """)
    with KeyValueStore.open(tmp_path / "db") as kv:
        assert kv.get(b"a") == b"1"


# --- LZ4 (docs/formats.md §7: BookKeeper compresses locations with LZ4) --------------------


def test_this_rocksdb_build_supports_lz4(tmp_path):
    with KeyValueStore.open(tmp_path / "db", lz4=True):
        pass
    log = (tmp_path / "db" / "LOG").read_text()
    assert "kLZ4Compression supported: 1" in log


def test_lz4_store_writes_lz4_blocks_and_reopens_with_any_options(tmp_path):
    path = tmp_path / "db"
    with KeyValueStore.open(path, lz4=True) as kv:
        kv.write_batch([(i.to_bytes(16, "big"), (i % 7).to_bytes(8, "big"))
                        for i in range(20_000)])
    options = "".join(open(p).read() for p in glob.glob(os.path.join(path, "OPTIONS-*")))
    assert "compression=kLZ4Compression" in options
    tables = [open(p, "rb").read() for p in glob.glob(os.path.join(path, "*.sst"))]
    # Each table's properties block says "rocksdb.compression" = "LZ4"; the block shares key
    # prefixes, so the name is stored as "ression" after "rocksdb.comparator"'s "rocksdb.comp".
    assert tables and all(b"ressionLZ4" in t for t in tables)
    raw_bytes = 20_000 * 24
    assert sum(len(t) for t in tables) < raw_bytes / 2  # the blocks really are compressed
    # The compression is recorded per block: a reader needs LZ4 support, not our options.
    for flags in (dict(), dict(read_only=True)):
        with KeyValueStore.open(path, **flags) as kv:
            assert kv.get((19_999).to_bytes(16, "big")) == (19_999 % 7).to_bytes(8, "big")
            assert sum(1 for _ in kv.items()) == 20_000



def test_item_chunks_yield_every_pair_in_key_order_in_bounded_lists(store):
    pairs = [(i.to_bytes(4, "big"), bytes([i % 256]) * 3) for i in range(1000)]
    store.write_batch(pairs[::-1])
    chunks = list(store.item_chunks(64))
    assert all(1 <= len(chunk) <= 64 for chunk in chunks)
    assert [pair for chunk in chunks for pair in chunk] == pairs
