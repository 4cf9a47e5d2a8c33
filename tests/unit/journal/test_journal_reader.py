"""journal/reader.py: scan rules of docs/formats.md §3.7; torn tail against corruption (DESIGN §6)."""

from __future__ import annotations

import struct

import pytest

from bookie.disk import OsDisk
from bookie.entry import frame_entry, frame_lac, master_key
from bookie.errors import CorruptRecord, IOFailure, ScanEnd
from journal import reader as reader_module
from journal.format import (
    PADDING_MASK, RecordKind, encode_add, encode_explicit_lac, encode_fence, encode_header,
    encode_master_key, padding_record)
from journal.reader import JournalReader, NotAJournal, UnsupportedJournalVersion

KEY = master_key(b"secret")
META_RECORD = struct.Struct(">iqqi")


def entry(ledger_id: int, entry_id: int, payload: bytes = b"hello") -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, 5 * (entry_id + 1), payload)


def build(groups: list[list[bytes]], version: int = 6, tail: int = 4096) -> bytearray:
    """A journal as a writer lays it out: header, groups padded to 512 (V5+), then zeros."""
    data = bytearray(encode_header(version))
    for group in groups:
        for record in group:
            data += record
        if version >= 5:
            data += padding_record(len(data))
    data += bytes(tail)
    return data


def write(tmp_path, data: bytes, name: str = "1.txn") -> str:
    path = tmp_path / name
    path.write_bytes(bytes(data))
    return str(path)


def scan(path: str, *args, **kwargs):
    """(records, end, reader) of a whole scan."""
    with JournalReader(OsDisk(), path) as reader:
        records = list(reader.scan(*args, **kwargs))
    return records, reader.end, reader


GROUPS = [
    [encode_master_key(1, KEY), encode_add(entry(1, 0)), encode_add(entry(1, 1, b"x" * 700))],
    [encode_fence(1), encode_explicit_lac(1, frame_lac(1, 1))],
    [encode_add(entry(2, 0, b"y" * 1000))],
]


def test_scan_returns_every_kind_with_its_payload(tmp_path):
    path = write(tmp_path, build(GROUPS))
    records, end, reader = scan(path)
    assert reader.version == 6
    assert [(r.kind, r.ledger_id, r.entry_id) for r in records] == [
        (RecordKind.LEDGER_KEY, 1, -0x1000), (RecordKind.DATA, 1, 0), (RecordKind.DATA, 1, 1),
        (RecordKind.FENCE, 1, -0x2000), (RecordKind.EXPLICIT_LAC, 1, -0x8000),
        (RecordKind.DATA, 2, 0)]
    assert records[0].payload == KEY
    assert records[1].payload == entry(1, 0)
    assert records[3].payload == b""
    assert records[4].payload == frame_lac(1, 1)
    assert records[0].offset == 512 and records[0].size == 44
    assert records[1].offset == 556 and records[1].size == 45
    assert all(a.end == b.offset for a, b in zip(records[:2], records[1:3]))
    assert end == ScanEnd(len(build(GROUPS, tail=0)), 0, "clean")
    assert end.offset % 512 == 0 and end.clean


@pytest.mark.parametrize("digest_type", [1, 2, 3, 4])
def test_a_master_key_record_brings_the_digest_type_after_its_key(tmp_path, digest_type):
    groups = [[encode_master_key(1, KEY, digest_type), encode_add(entry(1, 0))],
              [encode_master_key(2, KEY)]]
    records, end, _ = scan(write(tmp_path, build(groups)))
    assert [(r.kind, r.payload, r.digest_type) for r in records] == [
        (RecordKind.LEDGER_KEY, KEY, digest_type), (RecordKind.DATA, entry(1, 0), 0),
        (RecordKind.LEDGER_KEY, KEY, 0)]
    assert records[0].size == 45 and records[0].end == records[1].offset and end.clean


def test_padding_is_counted_and_yielded_on_request(tmp_path):
    path = write(tmp_path, build(GROUPS))
    records, end, reader = scan(path)
    assert reader.padding_records == 3
    with_padding, end_again, _ = scan(path, include_padding=True)
    padding = [r for r in with_padding if r.kind is RecordKind.PADDING]
    assert len(padding) == 3 and end_again == end
    assert sum(r.size for r in padding) == reader.padding_bytes
    assert all(r.end % 512 == 0 and r.payload == b"" for r in padding)
    assert [r for r in with_padding if r.kind is not RecordKind.PADDING] == records


def test_scan_from_a_mark_skips_what_is_before_it(tmp_path):
    data = build(GROUPS)
    path = write(tmp_path, data)
    all_records, end, _ = scan(path)
    mark = all_records[3].offset  # group 2 starts at an aligned offset
    assert mark % 512 == 0
    records, end_from_mark, _ = scan(path, mark)
    assert records == all_records[3:] and end_from_mark == end
    assert scan(path, 0)[0] == scan(path, -5)[0] == all_records


def test_scan_from_inside_the_header_is_corruption(tmp_path):
    path = write(tmp_path, build(GROUPS))
    with pytest.raises(CorruptRecord) as info:
        scan(path, 100)
    assert info.value.offset == 100 and info.value.path == path


def test_scan_from_the_end_of_the_file_finds_nothing(tmp_path):
    data = build(GROUPS)
    path = write(tmp_path, data)
    records, end, _ = scan(path, len(data))
    assert records == [] and end == ScanEnd(len(data), 0, "clean")


@pytest.mark.parametrize("content", [b"", b"\x00" * 3, bytes(8), bytes(4096)])
def test_empty_journal_is_not_an_error(tmp_path, content):
    records, end, reader = scan(write(tmp_path, content))
    assert records == [] and reader.version is None
    assert end == ScanEnd(0, 0, "clean")


def test_empty_journal_with_stray_bytes_reports_them(tmp_path):
    records, end, _ = scan(write(tmp_path, b"BKL"))
    assert records == [] and end.offset == 0 and end.cut_bytes == 3 and not end.clean


@pytest.mark.parametrize("version", [2, 3])
def test_v2_and_v3_are_refused_naming_file_and_version(tmp_path, version):
    path = write(tmp_path, build([[encode_add(entry(1, 0))]], version=version))
    with pytest.raises(UnsupportedJournalVersion) as info:
        scan(path)
    assert isinstance(info.value, IOFailure)
    assert info.value.version == version and path in str(info.value)
    assert f"version {version}" in str(info.value)


def test_v1_file_without_magic_is_refused(tmp_path):
    path = write(tmp_path, encode_add(entry(1, 0)) + bytes(100))
    with pytest.raises(UnsupportedJournalVersion) as info:
        scan(path)
    assert info.value.version == 1


@pytest.mark.parametrize("content", [b"# A BookKeeper bookie\n" * 40,  # a text file
                                     b"BKLO" + bytes(1020),  # an entry log
                                     struct.pack(">iq", 40, -5) + bytes(60)])  # ledger -5
def test_a_file_that_cannot_be_a_v1_journal_is_named_not_a_journal(tmp_path, content):
    path = write(tmp_path, content)
    with pytest.raises(NotAJournal) as info:
        scan(path)
    assert isinstance(info.value, CorruptRecord) and info.value.offset == 0
    assert "not a journal" in str(info.value) and "version 1" not in str(info.value)


@pytest.mark.parametrize("version", [0, 7, -1])
def test_version_outside_1_to_6_is_corruption(tmp_path, version):
    path = write(tmp_path, b"BKLG" + struct.pack(">i", version) + bytes(600))
    with pytest.raises(CorruptRecord) as info:
        scan(path)
    assert info.value.offset == 4


def test_v5_file_cut_inside_its_header_holds_no_records(tmp_path):
    records, end, reader = scan(write(tmp_path, encode_header(5)[:300]))
    assert reader.version == 5 and records == [] and end.clean


def test_v4_journal_has_no_padding_and_starts_at_8(tmp_path):
    groups = [[encode_master_key(1, KEY), encode_add(entry(1, 0))], [encode_fence(1)]]
    records, end, reader = scan(write(tmp_path, build(groups, version=4)))
    assert reader.version == 4 and records[0].offset == 8
    assert [r.kind for r in records] == [RecordKind.LEDGER_KEY, RecordKind.DATA,
                                         RecordKind.FENCE]
    assert end == ScanEnd(8 + 44 + 45 + 20, 0, "clean")


def test_padding_in_a_v4_journal_is_a_negative_length(tmp_path):
    data = build([[encode_add(entry(1, 0))]], version=4)
    data[8 + 45:8 + 45 + 8] = struct.pack(">ii", PADDING_MASK, 0)
    records, end, _ = scan(write(tmp_path, data))
    assert len(records) == 1
    assert end.offset == 8 + 45 and "negative length" in end.reason


@pytest.mark.parametrize("version, record", [
    (5, encode_explicit_lac(1, frame_lac(1, 0))),
    (4, encode_explicit_lac(1, frame_lac(1, 0))),
])
def test_meta_record_below_its_version_is_damage(tmp_path, version, record):
    data = build([[encode_add(entry(1, 0)), record]], version=version)
    records, end, _ = scan(write(tmp_path, data))
    assert len(records) == 1 and end.offset == records[0].end
    assert "V%d" % version in end.reason


def test_unknown_meta_records_come_back_skippable(tmp_path):
    unknown = struct.pack(">iqq", 24, 3, -0x77) + b"12345678"
    records, end, _ = scan(write(tmp_path, build([[unknown, encode_add(entry(3, 0))]])))
    assert records[0].kind is RecordKind.UNKNOWN_META and records[0].payload == b""
    assert records[0].entry_id == -0x77 and records[1].kind is RecordKind.DATA and end.clean


def bad_record_cases():
    """(name, record bytes) each damage by rule 4 of the reader."""
    return [
        ("negative length", struct.pack(">i", -5) + bytes(40)),
        ("length below 16", struct.pack(">iq", 8, 1) + bytes(4)),
        ("length above maximum", struct.pack(">iqq", 6 << 20, 1, 0) + bytes(40)),
        ("data without LAC", struct.pack(">iqq", 20, 1, 0) + bytes(4)),
        ("negative ledger id", struct.pack(">iq", 41, -2) + entry(1, 0)[8:]),
        ("key length mismatch", META_RECORD.pack(40, 1, -0x1000, 19) + KEY),
        ("key length two short", META_RECORD.pack(42, 1, -0x1000, 20) + KEY + b"\x03\x03"),
        ("key record with digest type 0", META_RECORD.pack(41, 1, -0x1000, 20) + KEY + b"\0"),
        ("key record with digest type 9", META_RECORD.pack(41, 1, -0x1000, 20) + KEY + b"\x09"),
        ("short explicit LAC body", META_RECORD.pack(32, 1, -0x8000, 12) + bytes(12)),
        ("meta too short for its inner length", struct.pack(">iqq", 16, 1, -0x1000)),
    ]


@pytest.mark.parametrize("name, bad", bad_record_cases())
def test_bad_record_followed_by_zeros_is_a_torn_tail(tmp_path, name, bad):
    good = encode_add(entry(1, 0))
    data = bytearray(encode_header() + good + bad) + bytes(2048)
    records, end, _ = scan(write(tmp_path, data))
    assert [r.payload for r in records] == [entry(1, 0)]
    assert end.offset == 512 + len(good)
    assert end.cut_bytes == len(bad.rstrip(b"\0")), name
    assert not end.clean


@pytest.mark.parametrize("name, bad", bad_record_cases())
def test_bad_record_followed_by_valid_groups_is_corruption(tmp_path, name, bad):
    first = [encode_add(entry(1, 0)), bad]
    data = build([first, [encode_add(entry(1, 1))], [encode_fence(1)]])
    path = write(tmp_path, data)
    damage = 512 + len(first[0])
    with pytest.raises(CorruptRecord) as info:
        scan(path)
    assert info.value.offset == damage and info.value.path == path, name
    assert "valid records follow at offset 1024" in info.value.reason


def test_skip_invalid_ends_the_file_at_the_corruption(tmp_path):
    first = [encode_add(entry(1, 0)), struct.pack(">i", -7) + bytes(30)]
    data = build([first, [encode_add(entry(1, 1))]])
    records, end, _ = scan(write(tmp_path, data), skip_invalid=True)
    assert [r.entry_id for r in records] == [0]
    assert end.offset == 512 + 45 and end.reason.startswith("skipped corrupt")
    assert end.cut_bytes == len(bytes(data).rstrip(b"\0")) - end.offset


def test_record_running_past_end_of_file_is_torn(tmp_path):
    data = build([[encode_add(entry(1, 0)), encode_add(entry(1, 1, b"z" * 300))]], tail=0)
    cut = 512 + 45 + 100
    records, end, _ = scan(write(tmp_path, data[:cut]))
    assert [r.entry_id for r in records] == [0]
    assert end == ScanEnd(557, 100, end.reason)
    assert "record length 336 runs past end of file" in end.reason


def test_length_word_cut_by_end_of_file(tmp_path):
    data = build([[encode_add(entry(1, 0))]], tail=0)[:557] + b"\x00\x01"
    records, end, _ = scan(write(tmp_path, data))
    assert len(records) == 1 and end.offset == 557 and end.cut_bytes == 2


def test_padding_running_past_end_of_file_is_torn(tmp_path):
    data = build([[encode_add(entry(1, 0))]], tail=0)
    records, end, _ = scan(write(tmp_path, data[:-10]))
    assert len(records) == 1 and end.offset == 557 and end.cut_bytes == 8
    assert "padding" in end.reason


def test_padding_ending_off_a_boundary_is_damage(tmp_path):
    data = build([[encode_add(entry(1, 0))]])
    data[557 + 4:557 + 8] = struct.pack(">i", 100)
    records, end, _ = scan(write(tmp_path, data))
    assert len(records) == 1 and end.offset == 557 and "unaligned" in end.reason


def test_zero_length_word_followed_by_valid_records_is_corruption(tmp_path):
    data = build([[encode_add(entry(1, 0))], [encode_add(entry(1, 1))], [encode_fence(1)]])
    data[1024:1028] = bytes(4)  # the second group's length word is lost
    with pytest.raises(CorruptRecord) as info:
        scan(write(tmp_path, data))
    assert info.value.offset == 1024
    assert "valid records follow at offset 1536" in info.value.reason


def test_zero_length_word_in_the_last_group_is_reported_as_torn(tmp_path):
    # Records after the lost length word start at unknown offsets: they are cut and reported.
    data = build([[encode_add(entry(1, 0))], [encode_add(entry(1, 1)), encode_fence(1)]])
    data[1024:1028] = bytes(4)
    records, end, _ = scan(write(tmp_path, data))
    assert len(records) == 1 and end.offset == 1024
    assert end.cut_bytes == len(bytes(data).rstrip(b"\0")) - 1024
    assert "zero length word followed by non-zero bytes" in end.reason


def test_zero_length_word_followed_by_garbage_is_a_torn_tail(tmp_path):
    data = build([[encode_add(entry(1, 0))]])
    data[1030:1040] = b"\xee" * 10
    records, end, _ = scan(write(tmp_path, data))
    assert len(records) == 1 and end == ScanEnd(1024, 16, end.reason)


def test_record_torn_inside_zeros_is_cut_when_its_group_never_ended(tmp_path):
    # The entry's last bytes never reached the disk: they read as zeros, and no padding follows.
    full = encode_add(entry(1, 1, b"payload"))
    torn = full[:-4] + bytes(4)
    data = bytearray(encode_header() + encode_add(entry(1, 0)) + torn) + bytes(4096)
    records, end, _ = scan(write(tmp_path, data))
    assert [r.entry_id for r in records] == [0]
    assert end.offset == 557 and end.cut_bytes == len(torn.rstrip(b"\0"))
    assert "torn inside preallocated zeros" in end.reason


def test_record_with_a_non_zero_last_byte_is_kept_although_its_group_never_ended(tmp_path):
    data = bytearray(encode_header() + encode_add(entry(1, 0)) + encode_add(entry(1, 1)))
    data += bytes(4096)
    records, end, _ = scan(write(tmp_path, data))
    assert [r.entry_id for r in records] == [0, 1]
    assert end == ScanEnd(512 + 90, 0, "clean")


def test_record_ending_in_zero_on_a_boundary_is_kept(tmp_path):
    # A group may end exactly aligned without padding; its records were synced and acked.
    payload = b"a" * (508 - 36 - 1) + b"\x00"
    record = encode_add(entry(1, 0, payload))
    assert len(record) == 512
    records, end, _ = scan(write(tmp_path, encode_header() + record + bytes(1024)))
    assert len(records) == 1 and end == ScanEnd(1024, 0, "clean")


def test_fence_record_is_never_taken_as_torn_inside_zeros(tmp_path):
    data = encode_header() + encode_add(entry(1, 0)) + encode_fence(1) + bytes(1024)
    records, end, _ = scan(write(tmp_path, data))
    assert [r.kind for r in records] == [RecordKind.DATA, RecordKind.FENCE] and end.clean


def test_v4_corruption_is_found_at_unaligned_offsets(tmp_path):
    good = [encode_add(entry(1, 0)), struct.pack(">i", -9) + bytes(30)]
    data = build([good + [encode_add(entry(1, 1)), encode_fence(1)]], version=4)
    with pytest.raises(CorruptRecord) as info:
        scan(write(tmp_path, data))
    assert info.value.offset == 8 + 45
    records, end, _ = scan(write(tmp_path, data, "2.txn"), skip_invalid=True)
    assert len(records) == 1 and end.reason.startswith("skipped corrupt")


def test_max_entry_size_bounds_record_lengths(tmp_path):
    big = encode_add(entry(1, 0, b"b" * 200_000))
    path = write(tmp_path, build([[big]]))
    with JournalReader(OsDisk(), path, max_entry_size=100_000) as reader:
        records = list(reader.scan())
        assert records == [] and "exceeds the maximum" in reader.end.reason
    assert len(scan(path)[0]) == 1


def test_records_larger_than_a_read_chunk_and_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(reader_module, "CHUNK_BYTES", 1000)
    sizes = [5, 990, 1000, 3000, 17, 2500, 0, 999]
    groups = [[encode_add(entry(4, i, bytes([i + 1]) * size)) for i, size in enumerate(sizes)],
              [encode_fence(4)]]
    records, end, reader = scan(write(tmp_path, build(groups)), include_padding=True)
    data_records = [r for r in records if r.kind is RecordKind.DATA]
    assert [len(r.payload) - 36 for r in data_records] == sizes
    assert end.clean and reader.padding_records == 2


def test_big_journal_round_trips(tmp_path):
    groups = [[encode_add(entry(5, g * 10 + i, bytes([g % 251 + 1]) * 1000)) for i in range(10)]
              for g in range(600)]  # ~6 MiB: more than one 4 MiB read
    records, end, _ = scan(write(tmp_path, build(groups)))
    assert [r.entry_id for r in records] == list(range(6000))
    assert end.clean


class FailingReads(OsDisk):
    def open(self, path, writable=False):
        handle = super().open(path, writable)
        real_read = handle.read_at

        class Handle:
            def __getattr__(self, name):
                return getattr(handle, name)

            def read_at(self, offset, size):
                if offset >= 512:
                    raise OSError(5, "Input/output error")
                return real_read(offset, size)
        return Handle()


def test_read_error_is_an_io_failure_naming_the_file(tmp_path):
    path = write(tmp_path, build(GROUPS))
    with JournalReader(FailingReads(), path) as reader:
        with pytest.raises(IOFailure) as info:
            list(reader.scan())
    assert path in str(info.value) and "offset 512" in str(info.value)
