"""docs/formats.md §10: entry logs the project writes parse with Apache BookKeeper's readers.

``BookKeeperRules`` below ports DefaultEntryLogger.scanEntryLog and
extractEntryLogMetadataFromIndex (docs/formats.md §5.6) line by line, in the tests' own code: it
never imports entrylog.reader. The golden logs in tests/data/golden/ are written by our
writer (make_golden_entrylog.py); the test regenerates them and compares byte for byte.
"""

from __future__ import annotations

import os
import struct

import pytest

from bookie.disk import OsDisk
from bookie.entry import DigestType, entry_digest_ok, mac_key
from entrylog.reader import EntryLogReader
from tests.data.golden import make_golden_entrylog as golden
from tests.unit.entrylog.entrylog_support import (
    CRC32_REFERENCE, CRC32C_REFERENCE, expected_totals, make_entry, write_log,
)

LOGFILE_HEADER_SIZE = 1024
HEADER_WITH_LEDGERS_MAP = 1
INVALID_LID = -1
LEDGERS_MAP_ENTRY_ID = -2
LEDGERS_MAP_HEADER_SIZE = 4 + 8 + 8 + 4
LEDGERS_MAP_ENTRY_SIZE = 8 + 8
LEDGERS_MAP_MAX_BATCH_SIZE = 10000


class BookKeeperRules:
    """DefaultEntryLogger's two readers over a file's bytes, as Apache BookKeeper has them."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.batch_lens: list[tuple[int, int]] = []  # (batchLen, n) of every batch read

    def read(self, pos: int, size: int) -> bytes:
        return self.data[pos:pos + size]  # BufferedReadChannel.read: short at the end

    def scan_entry_log(self) -> tuple[list[tuple[int, int, bytes]], int, str]:
        """scanEntryLog: [(ledgerId, offset of the size field, entry)], stop pos, why."""
        found = []
        pos = LOGFILE_HEADER_SIZE
        while True:
            if pos >= len(self.data):
                return found, pos, "eof"
            header = self.read(pos, 12)  # headerBuffer: entry size + ledger id
            if len(header) != 12:
                return found, pos, "short read for entry size"
            offset = pos
            entry_size, ledger_id = struct.unpack(">iq", header)
            if entry_size <= 0:  # hitting padding
                pos += 1
                continue
            pos += 4
            if ledger_id == INVALID_LID:  # skip this entry
                pos += entry_size
                continue
            entry = self.read(pos, entry_size)
            if len(entry) != entry_size:
                return found, offset, "short read for ledger entry"
            found.append((ledger_id, offset, entry))
            pos += entry_size

    def extract_metadata_from_index(self) -> dict[int, int]:
        """extractEntryLogMetadataFromIndex; raises IOError where BookKeeper throws."""
        header = self.read(0, LOGFILE_HEADER_SIZE)
        _magic, version, map_offset, ledgers_count = struct.unpack_from(">4siqi", header)
        if version < HEADER_WITH_LEDGERS_MAP:
            raise IOError(f"No ledgers map index found, version {version}")
        if map_offset == 0:
            raise IOError("No ledgers map found, do scan to double confirm")
        max_map_size = LEDGERS_MAP_HEADER_SIZE + \
            LEDGERS_MAP_ENTRY_SIZE * LEDGERS_MAP_MAX_BATCH_SIZE
        ledgers: dict[int, int] = {}
        offset = map_offset
        while offset < len(self.data):
            size_buffer = self.read(offset, 4)
            if len(size_buffer) != 4:
                raise IOError("Short read of the ledgers map size")
            ledgers_map_size = struct.unpack(">i", size_buffer)[0]
            if ledgers_map_size <= 0:
                break
            if ledgers_map_size > max_map_size:
                raise IOError("ledgers map batch larger than its buffer")
            ledgers_map = self.read(offset + 4, ledgers_map_size)
            if len(ledgers_map) != ledgers_map_size:
                raise IOError("Short read of the ledgers map")
            lid, entry_id, count = struct.unpack_from(">qqi", ledgers_map)
            if lid != INVALID_LID:
                raise IOError(f"Cannot deserialize ledgers map from ledger {lid}")
            if entry_id != LEDGERS_MAP_ENTRY_ID:
                raise IOError(f"Cannot deserialize ledgers map from entryId {entry_id}")
            cursor = 20
            for _ in range(count):
                if cursor + 16 > ledgers_map_size:
                    raise IOError("ledgers map batch ends early")  # IndexOutOfBounds
                ledger_id, size = struct.unpack_from(">qq", ledgers_map, cursor)
                cursor += 16
                ledgers[ledger_id] = ledgers.get(ledger_id, 0) + size  # addLedgerSize
            if cursor != ledgers_map_size:  # ledgersMap.isReadable()
                raise IOError("Invalid entry size when reading ledgers map")
            self.batch_lens.append((ledgers_map_size, count))
            offset += ledgers_map_size + 4
        if len(ledgers) != ledgers_count:
            raise IOError(f"Not all ledgers were found in ledgers map index. expected: "
                          f"{ledgers_count} -- found: {len(ledgers)}")
        return ledgers


def assert_conforms(data: bytes, log_id: int, records, locations, finalized: bool) -> None:
    """docs/formats.md §10, entry logs: both BookKeeper readers accept the file."""
    rules = BookKeeperRules(data)
    found, stop, why = rules.scan_entry_log()
    assert (stop, why) == (len(data), "eof")  # every byte consumed, no short read
    # Every entry at its recorded location (LocationsIndexRebuildOp adds 4).
    assert [(log_id << 32) | (offset + 4) for _, offset, _ in found] == locations
    assert [(ledger_id, entry) for ledger_id, _, entry in found] == records
    scanned_totals: dict[int, int] = {}
    for ledger_id, _, entry in found:
        scanned_totals[ledger_id] = scanned_totals.get(ledger_id, 0) + len(entry) + 4
    if not finalized:
        with pytest.raises(IOError, match="No ledgers map found"):
            rules.extract_metadata_from_index()
        return
    index_totals = rules.extract_metadata_from_index()  # accepted: no fallback to scanning
    ledgers_count = struct.unpack_from(">i", data, 16)[0]
    assert ledgers_count == len(index_totals) == sum(n for _, n in rules.batch_lens)
    assert all(batch_len == 20 + 16 * n for batch_len, n in rules.batch_lens)
    assert all(0 < n <= LEDGERS_MAP_MAX_BATCH_SIZE for _, n in rules.batch_lens)
    assert index_totals == scanned_totals == expected_totals(records)


@pytest.mark.parametrize("name,log_id,finalized", [golden.FINALIZED, golden.UNFINALIZED])
def test_golden_log_is_what_our_writer_writes(name, log_id, finalized):
    data, _ = golden.build(log_id, finalized)
    with open(os.path.join(golden.GOLDEN_DIR, name), "rb") as handle:
        assert handle.read() == data, f"regenerate with {golden.__file__}"


@pytest.mark.parametrize("name,log_id,finalized", [golden.FINALIZED, golden.UNFINALIZED])
def test_golden_log_parses_with_bookkeeper_rules(name, log_id, finalized):
    _, locations = golden.build(log_id, finalized)
    with open(os.path.join(golden.GOLDEN_DIR, name), "rb") as handle:
        data = handle.read()
    assert_conforms(data, log_id, golden.golden_records(), locations, finalized)


def test_golden_finalized_log_has_one_batch():
    with open(os.path.join(golden.GOLDEN_DIR, golden.FINALIZED[0]), "rb") as handle:
        rules = BookKeeperRules(handle.read())
    assert len(rules.extract_metadata_from_index()) == 4
    assert rules.batch_lens == [(20 + 16 * 4, 4)]


@pytest.mark.parametrize("name,log_id,finalized", [golden.FINALIZED, golden.UNFINALIZED])
def test_golden_log_reads_back_through_our_reader(name, log_id, finalized):
    path = os.path.join(golden.GOLDEN_DIR, name)
    _, locations = golden.build(log_id, finalized)
    with EntryLogReader(OsDisk(), path, log_id=log_id) as reader:
        assert [f.location for f in reader.scan()] == locations and reader.end.clean
        totals, source = reader.ledger_totals()
        assert source == ("ledgersMap" if finalized else "scan")
        assert totals == expected_totals(golden.golden_records())


def test_golden_entries_carry_valid_digests():
    # Cross-checked with crcmod: the golden CRCs are the reference algorithms' values.
    for ledger_id, entry in golden.golden_records():
        digest_type = golden.LEDGERS[ledger_id]
        key = mac_key(b"secret") if digest_type is DigestType.MAC else None
        assert entry_digest_ok(entry, digest_type, key)
        covered = entry[:32] + entry[32 + digest_type.digest_length:]
        if digest_type is DigestType.CRC32C:
            assert entry[32:36] == struct.pack(">I", CRC32C_REFERENCE(covered))
        elif digest_type is DigestType.CRC32:
            assert entry[32:40] == struct.pack(">Q", CRC32_REFERENCE(covered))


def test_10001_ledgers_parse_with_bookkeeper_rules(tmp_path):
    records = [(ledger_id, make_entry(ledger_id, 0, b"%d" % ledger_id))
               for ledger_id in range(10_001)]
    path, locations, _ = write_log(tmp_path, 0x7, records)
    with open(path, "rb") as handle:
        data = handle.read()
    assert_conforms(data, 0x7, records, locations, finalized=True)
    rules = BookKeeperRules(data)
    rules.extract_metadata_from_index()
    assert rules.batch_lens == [(20 + 16 * 10_000, 10_000), (36, 1)]


def test_bookkeeper_rules_refuse_a_wrong_ledgers_count(tmp_path):
    # The ported reader is strict where BookKeeper is: the project's readers then scan.
    path, _, _ = write_log(tmp_path, 0x7, [(1, make_entry(1, 0))])
    with open(path, "rb") as handle:
        data = bytearray(handle.read())
    data[16:20] = struct.pack(">i", 2)
    with pytest.raises(IOError, match="Not all ledgers"):
        BookKeeperRules(bytes(data)).extract_metadata_from_index()
