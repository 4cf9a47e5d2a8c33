"""A real bookie's RocksDB index opens in Debian's ``ldb`` (RocksDB 7.8 on bookworm), older than
rocksdict's RocksDB 9.8 and as old as the RocksDB 7.9/7.10 of BookKeeper 4.16/4.17 (issue 37,
docs/formats.md §7): ``ldb scan`` reads every location and ledger state back, decoded with our
own codecs, equal to what our index reads; every table file is BookKeeper's format 5 with
kxxHash.

Before issue 37 ldb refused both databases: "Corrupt or unsupported format_version: 6".
Without ldb the test fails, never skips (docs/design.md: a skip is not a pass);
scripts/test.sh installs Debian's ``rocksdb-tools``.
"""

from __future__ import annotations

import os

import pytest

from api.client import BookieClient
from bookie.entry import DigestType, frame_entry, master_key
from ledgerindex import keys
from ledgerindex.ledgers import LedgerMetadataIndex
from ledgerindex.locations import EntryLocationIndex
from tests.support import rocksdb_tools
from tests.support.servers import running_bookie

KEY = master_key(b"ldb")
#: Ledger -> entries written; ledger 12 is fenced after its adds.
WRITTEN = {11: 300, 12: 40, 2**40 + 3: 5}
FENCED = 12


@pytest.fixture(scope="module")
def ldb():
    reason = rocksdb_tools.missing()
    if reason is not None:
        pytest.fail(reason)  # never a skip: CI installs it, and a skip is not a pass
    print(rocksdb_tools.version())


def entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, 0, b"e%d" % entry_id * 9,
                       DigestType.CRC32C)


def listing(path: str) -> dict[str, tuple[int, int]]:
    return {name: (os.stat(os.path.join(path, name)).st_size,
                   os.stat(os.path.join(path, name)).st_mtime_ns) for name in os.listdir(path)}


async def write_and_close(config) -> None:
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as client:
            for ledger_id, count in WRITTEN.items():
                await client.add_batch(ledger_id, [entry(ledger_id, e) for e in range(count)],
                                       KEY, "crc32c")
            await client.fence(FENCED, KEY)
            # The checkpoint writes the locations to RocksDB; the clean close flushes its
            # memtable, so what ldb reads below is in SST files, not only in the WAL.
            await client.checkpoint()


def wal_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(path, name)) for name in os.listdir(path)
               if name.endswith(".log"))


async def test_debian_ldb_reads_every_location_and_ledger_back(ldb, bookie_config):
    await write_and_close(bookie_config)
    locations_dir = os.path.join(bookie_config.ledger_dir, "locations")
    ledgers_dir = os.path.join(bookie_config.ledger_dir, "ledgers")
    for path in (locations_dir, ledgers_dir):
        assert wal_bytes(path) == 0, f"{path}: records left only in the WAL"

    before = {path: listing(path) for path in (locations_dir, ledgers_dir)}
    scanned_locations = rocksdb_tools.ldb_scan(locations_dir)
    scanned_ledgers = rocksdb_tools.ldb_scan(ledgers_dir)
    assert {path: listing(path) for path in before} == before  # ldb scan wrote nothing

    # Every written entry's location, decoded by our codecs from ldb's bytes, is ours.
    by_ldb = {keys.decode_location_key(key): keys.decode_location_value(value)
              for key, value in scanned_locations.items()}
    written = {(ledger_id, e) for ledger_id, count in WRITTEN.items() for e in range(count)}
    assert set(by_ldb) == written
    index = EntryLocationIndex.open(locations_dir, create=False, read_only=True)
    try:
        assert {key: index.get(*key) for key in sorted(written)} == by_ldb
        assert all(location > 0 for location in by_ldb.values())
    finally:
        index.close()

    # And every ledger's state.
    by_ldb_states = {keys.decode_ledger_key(key): keys.decode_ledger_state(value)
                     for key, value in scanned_ledgers.items()
                     if keys.decode_ledger_key(key) >= 0}
    assert set(by_ldb_states) == set(WRITTEN)
    # Besides the ledgers, only the format key and the writer mark (docs/formats.md §7.2),
    # valid markers.
    marker_key = keys.encode_ledger_key(keys.FORMAT_LEDGER_ID)
    mark_key = keys.encode_ledger_key(keys.WRITER_MARK_LEDGER_ID)
    assert set(scanned_ledgers) - {keys.encode_ledger_key(i) for i in WRITTEN} == \
        {marker_key, mark_key}
    assert keys.decode_marker(scanned_ledgers[marker_key]).ledger_ids == ()
    assert keys.decode_marker(scanned_ledgers[mark_key]).journal_id > 0
    ledgers = LedgerMetadataIndex.open(ledgers_dir, create=False, read_only=True)
    try:
        assert {ledger_id: ledgers.get(ledger_id) for ledger_id in WRITTEN} == by_ldb_states
    finally:
        ledgers.close()
    assert [state.master_key for state in by_ldb_states.values()] == [KEY] * len(WRITTEN)
    assert {i for i, state in by_ldb_states.items() if state.fenced} == {FENCED}

    # Every table file: BookKeeper's format, and Debian's sst_dump opens each one.
    for path in (locations_dir, ledgers_dir):
        found = rocksdb_tools.footers(path)
        assert found and set(found.values()) == {rocksdb_tools.Footer(5, "kxxHash")}, found
        assert rocksdb_tools.sst_dump_refusals(path) == []
