"""ledgerindex.kv writes BookKeeper's table format (issue 37): block-based format_version 5 with
kxxHash checksums, in every database, and still opens the format-6 databases it wrote before.

The SST footers are read by tests/support/rocksdb_tools.py, no RocksDB involved, so these run
whatever ``ldb`` the machine has; tests/integration/test_index_opens_in_debian_ldb.py has
Debian's RocksDB 7.8 read a real bookie's index.
"""

from __future__ import annotations

import glob
import os

import pytest
# The one rocksdict import outside ledgerindex/kv.py: it builds the options kv.py used before
# issue 37, which kv.py no longer can, to write a database as the old code did.
import rocksdict

from ledgerindex import keys
from ledgerindex.kv import KeyValueStore
from tests.support.rocksdb_tools import Footer, footers

BOOKKEEPER_FORMAT = Footer(format_version=5, checksum="kxxHash")
#: What rocksdict's RocksDB writes by default (RocksDB 9.0 and later: 9.7.3 and 9.8.4 in the
#: rocksdict versions pyproject.toml allows): the format of every index written before
#: issue 37.
ROCKSDICT_DEFAULT_FORMAT = Footer(format_version=6, checksum="kXXH3")


def location_pairs(ledgers: range, entries: range) -> dict[bytes, bytes]:
    return {keys.encode_location_key(ledger, entry):
            keys.encode_location_value((ledger << 32) + entry + 1)
            for ledger in ledgers for entry in entries}


def options_file(path) -> str:
    [latest] = sorted(glob.glob(os.path.join(path, "OPTIONS-*")))[-1:]
    with open(latest) as file:
        return file.read()


def write_as_before_issue_37(path, pairs: dict[bytes, bytes], *, lz4: bool) -> None:
    """The database the code before issue 37 wrote: kv._options as it was then, with
    rocksdict's default table format (no format version or checksum type set)."""
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_keep_log_file_num(10)
    if lz4:
        options.set_compression_type(rocksdict.DBCompressionType.lz4())
        table = rocksdict.BlockBasedOptions()
        table.set_block_size(64 * 1024)
        table.set_bloom_filter(10, False)
        options.set_block_based_table_factory(table)
    db = rocksdict.Rdict(os.fspath(path), options)
    try:
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in pairs.items():
            batch.put(key, value)
        db.write(batch)
        db.flush()
    finally:
        db.close()


def read_all(path, *, lz4: bool) -> dict[bytes, bytes]:
    with KeyValueStore.open(path, lz4=lz4, create=False, read_only=True) as kv:
        return dict(kv.items())


@pytest.mark.parametrize("lz4", [True, False], ids=["locations", "ledgers"])
def test_a_new_database_writes_format_5_with_xxhash(tmp_path, lz4):
    path = tmp_path / "db"
    pairs = location_pairs(range(1, 4), range(0, 500))
    with KeyValueStore.open(path, lz4=lz4) as kv:
        kv.write_batch(pairs.items())
    found = footers(path)
    assert found and set(found.values()) == {BOOKKEEPER_FORMAT}, found
    written = options_file(path)
    assert "  format_version=5\n" in written and "  checksum=kxxHash\n" in written
    assert read_all(path, lz4=lz4) == pairs


@pytest.mark.parametrize("lz4", [True, False], ids=["locations", "ledgers"])
def test_a_format_6_database_opens_and_new_files_take_format_5(tmp_path, lz4):
    path = tmp_path / "db"
    old = location_pairs(range(1, 5), range(0, 1000))
    write_as_before_issue_37(path, old, lz4=lz4)
    before = footers(path)
    assert set(before.values()) == {ROCKSDICT_DEFAULT_FORMAT}, before
    assert "  format_version=6\n" in options_file(path)

    # Today's code opens it, reads it and writes beside it: the flush on close is a new file.
    new = location_pairs(range(5, 7), range(0, 1000))
    rewritten = {key: b"\x00" * 7 + b"\x2a" for key in list(old)[::7]}
    with KeyValueStore.open(path, lz4=lz4, create=False) as kv:
        assert dict(kv.items()) == old
        kv.write_batch([*new.items(), *rewritten.items()])
    mixed = footers(path)
    assert {name: mixed[name] for name in before} == before  # the old file is untouched
    assert {f for name, f in mixed.items() if name not in before} == {BOOKKEEPER_FORMAT}
    expected = {**old, **new, **rewritten}
    assert read_all(path, lz4=lz4) == expected  # one read across both formats

    # A compaction rewrites the old file: then every file is BookKeeper's format.
    with KeyValueStore.open(path, lz4=lz4, create=False) as kv:
        kv.compact_range()
    after = footers(path)
    assert after and set(after.values()) == {BOOKKEEPER_FORMAT}, after
    assert not set(after) & set(before)
    assert "  format_version=5\n" in options_file(path)
    assert read_all(path, lz4=lz4) == expected
