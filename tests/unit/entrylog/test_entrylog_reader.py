"""entrylog/reader.py: point reads, the index path, the scan path (docs/formats.md §5.6)."""

from __future__ import annotations

import struct

import pytest

from bookie.disk import OsDisk
from bookie.errors import CorruptRecord, IOFailure, ScanEnd
from entrylog import format as fmt
from entrylog.reader import EntryLogReader
from tests.unit.entrylog.entrylog_support import expected_totals, make_entry, write_log


def record(entry: bytes) -> bytes:
    return struct.pack(">i", len(entry)) + entry


def raw_log(tmp_path, body: bytes, header: bytes | None = None, name: str = "5.log"):
    path = tmp_path / name
    path.write_bytes((fmt.encode_header() if header is None else header) + body)
    return str(path)


def reader(path, **kwargs) -> EntryLogReader:
    return EntryLogReader(OsDisk(), str(path), **kwargs)


def scan_all(path, **kwargs):
    r = reader(path, **kwargs)
    found = list(r.scan())
    return r, found


RECORDS = [(1, make_entry(1, 0)), (2, make_entry(2, 0, b"x" * 100)), (1, make_entry(1, 1))]


def test_scan_finds_every_entry_at_its_location(tmp_path):
    path, locations, _ = write_log(tmp_path, 5, RECORDS)
    r, found = scan_all(path)
    assert [f.location for f in found] == locations
    assert [(f.ledger_id, f.entry_id, f.entry) for f in found] == \
        [(lid, struct.unpack_from(">q", e, 8)[0], e) for lid, e in RECORDS]
    assert [f.offset + 4 for f in found] == [loc & 0xFFFFFFFF for loc in locations]
    assert found[0].offset == 1024 and found[0].location == (5 << 32) | 1028
    assert r.end.clean and not r.corrupt
    assert r.end.offset == 1024 + sum(len(e) + 4 for _, e in RECORDS) + 24 + 2 * 16


def test_scan_without_payload_gives_sizes_not_bytes(tmp_path):
    path, _, _ = write_log(tmp_path, 5, RECORDS)
    found = list(reader(path).scan(payload=False))
    assert [f.entry for f in found] == [None] * 3
    assert [f.size for f in found] == [len(e) for _, e in RECORDS]


def test_scan_from_a_record_boundary(tmp_path):
    path, locations, _ = write_log(tmp_path, 5, RECORDS)
    second = (locations[1] & 0xFFFFFFFF) - 4
    found = list(reader(path).scan(from_offset=second))
    assert [f.location for f in found] == locations[1:]
    with pytest.raises(ValueError):
        list(reader(path).scan(from_offset=100))


@pytest.mark.parametrize("chunk", [20, 21, 23, 37, 45, 64, 150, 1000])
def test_scan_is_the_same_at_every_chunk_size(tmp_path, chunk):
    records = [(i % 3, make_entry(i % 3, i, b"p" * (i * 7 % 90))) for i in range(40)]
    path, locations, _ = write_log(tmp_path, 5, records)
    r, found = scan_all(path, scan_chunk_bytes=chunk)
    assert [f.location for f in found] == locations
    assert [f.entry for f in found] == [e for _, e in records]
    assert r.end.clean


def test_read_entry_checks_the_ids(tmp_path):
    path, locations, _ = write_log(tmp_path, 5, RECORDS)
    r = reader(path)
    for (ledger_id, entry), location in zip(RECORDS, locations):
        entry_id = struct.unpack_from(">q", entry, 8)[0]
        assert r.read_entry(location & 0xFFFFFFFF, ledger_id, entry_id) == entry
        assert r.read_entry(location & 0xFFFFFFFF) == entry
    pos = locations[0] & 0xFFFFFFFF
    with pytest.raises(IOFailure, match="wrong entry"):
        r.read_entry(pos, 2, 0)
    with pytest.raises(IOFailure, match="wrong entry"):
        r.read_entry(pos, 1, 1)


def test_read_entry_larger_than_the_read_ahead(tmp_path):
    big = make_entry(3, 9, bytes(range(256)) * 40)
    path, locations, _ = write_log(tmp_path, 5, [(1, make_entry(1, 0)), (3, big)])
    assert reader(path).read_entry(locations[1] & 0xFFFFFFFF, 3, 9) == big


def test_read_entry_with_a_bad_size_is_corruption(tmp_path):
    path = raw_log(tmp_path, struct.pack(">i", 7) + bytes(40))
    with pytest.raises(CorruptRecord) as caught:
        reader(path).read_entry(1028, 0, 0)
    assert caught.value.offset == 1024 and "7" in caught.value.reason


def test_read_entry_outside_the_entries_fails(tmp_path):
    path, locations, _ = write_log(tmp_path, 5, RECORDS)
    r = reader(path)
    with pytest.raises(IOFailure, match="inside the header"):
        r.read_entry(20, 1, 0)
    with pytest.raises(IOFailure, match="ends before"):
        r.read_entry(10_000, 1, 0)


def test_read_entry_cut_short_fails(tmp_path):
    entry = make_entry(1, 0, b"y" * 5000)
    path = raw_log(tmp_path, record(entry)[:3000])
    with pytest.raises(IOFailure, match="cut short"):
        reader(path).read_entry(1028, 1, 0)


def test_finalized_log_reads_through_the_index_path(tmp_path):
    path, _, _ = write_log(tmp_path, 5, RECORDS)
    r = reader(path)
    assert r.ledgers_map() == expected_totals(RECORDS) == {1: 45 + 45, 2: 36 + 100 + 4}
    assert r.map_problem is None
    assert r.ledger_totals() == (expected_totals(RECORDS), "ledgersMap")


def test_10001_ledgers_make_two_batches_and_both_paths_agree(tmp_path):
    records = [(ledger_id, make_entry(ledger_id, 0)) for ledger_id in range(10_001)]
    path, _, channel = write_log(tmp_path, 5, records)
    r = reader(path)
    header = r.header
    assert header.ledgers_count == 10_001
    data = open(path, "rb").read()
    first_len = struct.unpack_from(">i", data, header.map_offset)[0]
    second_at = header.map_offset + 4 + first_len
    assert first_len == 20 + 16 * 10_000
    assert struct.unpack_from(">iqqi", data, second_at) == (36, -1, -2, 1)
    assert second_at + 40 == len(data)
    index_totals = r.ledgers_map()
    assert index_totals == expected_totals(records)
    scan_totals = {}
    for found in reader(path).scan(payload=False):
        scan_totals[found.ledger_id] = scan_totals.get(found.ledger_id, 0) + found.size + 4
    assert scan_totals == index_totals


def patch_header(path, version=None, offset=None, count=None):
    with open(path, "r+b") as handle:
        header = fmt.decode_header(handle.read(1024))
        handle.seek(0)
        handle.write(fmt.encode_header(
            header.version if version is None else version,
            header.map_offset if offset is None else offset,
            header.ledgers_count if count is None else count))


@pytest.mark.parametrize("patch,problem", [
    (dict(offset=0, count=0), "no ledgersMap"),
    (dict(offset=0), "no ledgersMap"),
    (dict(count=0), "no ledgersMap"),
    (dict(version=0), "no ledgersMap"),
    (dict(count=3), "holds 2 ledgers"),
    (dict(count=1), "holds 2 ledgers"),
    (dict(offset=10**9), "outside the file"),
    (dict(offset=512), "outside the file"),
    (dict(offset=1024), "ids"),
])
def test_doubtful_index_falls_back_to_the_scan(tmp_path, patch, problem):
    path, _, _ = write_log(tmp_path, 5, RECORDS)
    patch_header(path, **patch)
    r = reader(path)
    assert r.ledgers_map() is None
    assert problem in r.map_problem
    assert r.ledger_totals() == (expected_totals(RECORDS), "scan")


def test_unfinalized_log_reads_through_the_scan(tmp_path):
    path, locations, _ = write_log(tmp_path, 5, RECORDS, finalize=False)
    r = reader(path)
    assert r.header == fmt.LogHeader(b"BKLO", 1, 0, 0)
    assert r.ledger_totals() == (expected_totals(RECORDS), "scan")
    assert [f.location for f in r.scan()] == locations and r.end.clean


def test_zero_byte_log_has_no_entries(tmp_path):
    path = tmp_path / "5.log"
    path.write_bytes(b"")
    r = reader(path)
    assert r.header is None
    assert r.ledger_totals() == ({}, "scan")
    assert r.end == ScanEnd(0, 0, "clean")


def test_header_only_log_has_no_entries(tmp_path):
    path = raw_log(tmp_path, b"")
    r = reader(path)
    assert r.ledger_totals() == ({}, "scan")
    assert r.end == ScanEnd(1024, 0, "clean")


def test_torn_header_has_no_entries(tmp_path):
    path = tmp_path / "5.log"
    path.write_bytes(fmt.encode_header()[:500])
    r = reader(path)
    assert r.header is None and list(r.scan()) == []
    assert r.end == ScanEnd(0, 500, "header cut short")


def test_zero_header_is_scanned(tmp_path):
    path = raw_log(tmp_path, record(make_entry(1, 0)), header=bytes(1024))
    r = reader(path)
    assert r.header.version == 0
    assert r.ledger_totals() == ({1: 45}, "scan")


@pytest.mark.parametrize("header", [b"BKLG" + bytes(1020),
                                    fmt.encode_header()[:4] + b"\x00\x00\x00\x07" + bytes(1016),
                                    b"garbage!"])
def test_foreign_magic_or_version_is_corruption(tmp_path, header):
    path = raw_log(tmp_path, record(make_entry(1, 0)), header=header)
    with pytest.raises(CorruptRecord) as caught:
        list(reader(path).scan())
    assert caught.value.offset == 0
    with pytest.raises(CorruptRecord):
        reader(path).ledger_totals()


def test_zero_padding_between_records_is_skipped(tmp_path):
    body = record(make_entry(1, 0)) + bytes(13) + record(make_entry(1, 1)) + bytes(3000) + \
        record(make_entry(2, 0))
    r, found = scan_all(path := raw_log(tmp_path, body))
    assert [(f.ledger_id, f.entry_id) for f in found] == [(1, 0), (1, 1), (2, 0)]
    assert found[1].offset == 1024 + 45 + 13
    assert r.padding_bytes == 13 + 3000 and r.end.clean
    assert reader(path, scan_chunk_bytes=64).ledger_totals() == ({1: 90, 2: 45}, "scan")


def test_negative_size_is_skipped_a_byte_at_a_time(tmp_path):
    body = record(make_entry(1, 0)) + b"\xff\xff\xff\xff\x80" + record(make_entry(1, 1))
    r, found = scan_all(raw_log(tmp_path, body))
    assert [f.entry_id for f in found] == [0, 1]
    assert r.padding_bytes == 5 and r.end.clean


def test_zero_tail_ends_the_scan_where_the_zeros_start(tmp_path):
    body = record(make_entry(1, 0)) + record(make_entry(1, 1)) + bytes(5000)
    for chunk in (64, 1 << 20):
        r, found = scan_all(raw_log(tmp_path, body), scan_chunk_bytes=chunk)
        assert [f.entry_id for f in found] == [0, 1]
        assert r.end == ScanEnd(1024 + 90, 5000, "padding tail")
        assert not r.corrupt


@pytest.mark.parametrize("size", [1, 8, 15])
def test_size_below_16_stops_the_scan_as_corruption(tmp_path, size):
    body = record(make_entry(1, 0)) + struct.pack(">i", size) + bytes(40) + \
        record(make_entry(1, 1))
    r, found = scan_all(raw_log(tmp_path, body))
    assert [f.entry_id for f in found] == [0]
    assert r.corrupt and r.end.offset == 1024 + 45
    assert r.end.reason.startswith("corrupt") and r.end.cut_bytes == len(body) - 45


def test_size_below_16_in_the_last_bytes_is_corruption(tmp_path):
    body = record(make_entry(1, 0)) + struct.pack(">i", 9) + b"abc"
    r, found = scan_all(raw_log(tmp_path, body))
    assert len(found) == 1 and r.corrupt


def test_torn_record_ends_the_scan_at_its_offset(tmp_path):
    last = record(make_entry(1, 1, b"z" * 200))
    body = record(make_entry(1, 0)) + last[:100]
    r, found = scan_all(raw_log(tmp_path, body))
    assert [f.entry_id for f in found] == [0]
    assert r.end.offset == 1024 + 45 and r.end.cut_bytes == 100
    assert not r.end.clean and not r.corrupt


def test_torn_size_field_ends_the_scan(tmp_path):
    body = record(make_entry(1, 0)) + b"\x00\x00\x01"
    r, found = scan_all(raw_log(tmp_path, body))
    assert len(found) == 1
    assert r.end == ScanEnd(1024 + 45, 3, "size field cut short")


def test_map_batches_are_skipped_by_the_scan(tmp_path):
    body = record(make_entry(1, 0)) + fmt.encode_ledgers_map({1: 45, 2: 7}) + \
        record(make_entry(2, 0))
    r, found = scan_all(raw_log(tmp_path, body))
    assert [(f.ledger_id, f.entry_id) for f in found] == [(1, 0), (2, 0)]
    assert r.end.clean


def test_oversize_entry_is_read_with_a_warning(tmp_path):
    big = make_entry(1, 0, b"q" * 500)
    path, locations, _ = write_log(tmp_path, 5, [(1, big)])
    r, found = scan_all(path, max_entry_size=100)
    assert [f.entry for f in found] == [big] and r.oversize_entries == 1
    assert reader(path, max_entry_size=100).read_entry(locations[0] & 0xFFFFFFFF, 1, 0) == big


def test_zeros_after_the_trailer_end_the_index_path(tmp_path):
    path, _, _ = write_log(tmp_path, 5, RECORDS)
    with open(path, "ab") as handle:
        handle.write(bytes(64))
    assert reader(path).ledger_totals() == (expected_totals(RECORDS), "ledgersMap")


def test_ledger_split_over_two_batches_is_summed(tmp_path):
    # Readers must not depend on how batches group ledgers (docs/formats.md §5.4).
    entries = record(make_entry(1, 0)) + record(make_entry(2, 0))
    trailer = fmt.encode_ledgers_map({2: 45}) + fmt.encode_ledgers_map({1: 45})
    path = raw_log(tmp_path, entries + trailer,
                   header=fmt.encode_header(1, 1024 + len(entries), 2))
    assert reader(path).ledger_totals() == ({1: 45, 2: 45}, "ledgersMap")


def test_torn_trailer_falls_back_to_the_scan(tmp_path):
    path, _, _ = write_log(tmp_path, 5, RECORDS)
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-5])
    r = reader(path)
    assert r.ledgers_map() is None and "ends past" in r.map_problem
    assert r.ledger_totals() == (expected_totals(RECORDS), "scan")


def test_log_id_comes_from_the_name(tmp_path):
    path, _, _ = write_log(tmp_path, 0x2A, RECORDS[:1])
    assert reader(path).log_id == 0x2A
    compacting = tmp_path / "2b.log.compacting"
    compacting.write_bytes(open(path, "rb").read())
    assert reader(compacting).log_id == 0x2B
    other = tmp_path / "golden.log"
    other.write_bytes(b"")
    with pytest.raises(ValueError):
        reader(other)
    assert reader(other, log_id=3).log_id == 3


def test_missing_file_is_an_io_failure(tmp_path):
    with pytest.raises(IOFailure, match="cannot open"):
        reader(tmp_path / "9.log")
