"""journal/format.py: header, record builders, padding rule, LogMark, names (FORMATS §3, §4)."""

from __future__ import annotations

import struct

import pytest

from journal import format as jf
from journal.format import (
    ALIGNMENT, HEADER_SIZE, MAGIC, PADDING_MASK, JournalRecord, LogMark, RecordKind,
    detect_version, encode_add, encode_explicit_lac, encode_fence, encode_header,
    encode_master_key, journal_file_name, padding_length, padding_record, parse_journal_id)


def test_constants_are_bookkeepers():
    assert MAGIC == b"BKLG"
    assert (jf.V4, jf.V5, jf.V6, jf.CURRENT_VERSION) == (4, 5, 6, 6)
    assert HEADER_SIZE == ALIGNMENT == 512
    assert PADDING_MASK == -0x100
    assert struct.pack(">i", PADDING_MASK) == bytes.fromhex("ffffff00")
    assert jf.METAENTRY_ID_LEDGER_KEY == -0x1000
    assert jf.METAENTRY_ID_FENCE_KEY == -0x2000
    assert jf.METAENTRY_ID_FORCE_LEDGER == -0x4000
    assert jf.METAENTRY_ID_LEDGER_EXPLICITLAC == -0x8000


def test_v6_header_is_magic_version_then_504_zeros():
    header = encode_header()
    assert len(header) == 512
    assert header[:8] == bytes.fromhex("424b4c4700000006")
    assert header[8:] == bytes(504)


def test_v5_header_is_512_bytes_and_v2_to_v4_headers_are_8():
    assert encode_header(5) == bytes.fromhex("424b4c4700000005") + bytes(504)
    for version in (2, 3, 4):
        assert encode_header(version) == b"BKLG" + struct.pack(">i", version)
    assert encode_header(1) == b""


@pytest.mark.parametrize("first8, version", [
    (b"", None), (b"BKLG", None), (bytes(7), None), (bytes(8), None),
    (b"BKLG\x00\x00\x00\x06", 6), (b"BKLG\x00\x00\x00\x04", 4), (b"BKLG\x00\x00\x00\x07", 7),
    (b"BKLG\xff\xff\xff\xff", -1), (b"\x00\x00\x00\x28\x00\x00\x00\x00", 1),
    (b"bklg\x00\x00\x00\x06", 1),
])
def test_detect_version_follows_the_reader_steps(first8, version):
    assert detect_version(first8) == version


def test_header_size_by_version():
    assert [jf.header_size(v) for v in range(1, 7)] == [0, 8, 8, 8, 512, 512]


def test_encode_add_is_length_then_entry():
    entry = bytes(range(41))
    assert encode_add(entry) == b"\x00\x00\x00\x29" + entry


def test_encode_add_refuses_an_entry_without_ids_and_lac():
    with pytest.raises(AssertionError):
        encode_add(bytes(23))


def test_master_key_record_layout():
    key = bytes(range(20))
    record = encode_master_key(7, key)
    assert len(record) == 44
    assert record[:4] == b"\x00\x00\x00\x28"  # len 40 = 20 + keyLen
    assert record[4:12] == struct.pack(">q", 7)
    assert record[12:20] == bytes.fromhex("fffffffffffff000")
    assert record[20:24] == b"\x00\x00\x00\x14"
    assert record[24:] == key


def test_master_key_record_with_its_digest_type_is_bookkeepers_record_and_one_byte():
    """formats.md §3.4: BookKeeper's replay reads len, ids, keyLen and keyLen bytes of key and
    never looks at the byte after them, so the digest type rides there unseen."""
    key = bytes(range(20))
    record = encode_master_key(7, key, digest_type=3)
    plain = encode_master_key(7, key)
    assert len(record) == 45 and record[:4] == b"\x00\x00\x00\x29"  # len 41
    assert record[4:44] == plain[4:] and record[44:] == b"\x03"
    assert encode_master_key(7, key, digest_type=0) == plain


def test_fence_record_layout():
    assert encode_fence(1) == (b"\x00\x00\x00\x10" + struct.pack(">q", 1)
                               + bytes.fromhex("ffffffffffffe000"))


def test_explicit_lac_record_keeps_the_body_whole():
    body = struct.pack(">qq", 3, 9) + b"\xaa\xbb\xcc\xdd"
    record = encode_explicit_lac(3, body)
    assert record[:4] == struct.pack(">i", 20 + len(body))
    assert record[12:20] == bytes.fromhex("ffffffffffff8000")
    assert record[20:24] == struct.pack(">i", len(body))
    assert record[24:] == body
    with pytest.raises(AssertionError):
        encode_explicit_lac(3, bytes(15))


@pytest.mark.parametrize("position, pad_len, size, next_position", [
    (601, 415, 423, 1024),
    (1016, 0, 8, 1024),
    (1017, 511, 519, 1536),  # gap 7
    (1019, 509, 517, 1536),
    (1023, 505, 513, 1536),
    (1024, -1, 0, 1024),
    (512, -1, 0, 512),
    (513, 503, 511, 1024),
])
def test_padding_table_of_formats_3_5(position, pad_len, size, next_position):
    assert padding_length(position) == pad_len
    record = padding_record(position)
    assert len(record) == size
    assert position + size == next_position
    if size:
        assert record[:4] == bytes.fromhex("ffffff00")
        assert struct.unpack(">i", record[4:8])[0] == pad_len
        assert record[8:] == bytes(pad_len)


def test_every_padding_record_ends_on_a_boundary():
    for alignment in (512, 4096):
        for position in range(alignment * 3, alignment * 5):
            assert (position + len(padding_record(position, alignment))) % alignment == 0


def test_padding_refuses_an_alignment_that_is_not_sectors():
    with pytest.raises(AssertionError):
        padding_record(5, alignment=100)


def test_log_mark_bytes_of_formats_4_2():
    mark = LogMark(0x18F2A1B2C3D, 1024)
    encoded = mark.encode()
    assert encoded == bytes.fromhex("0000018f2a1b2c3d0000000000000400")
    assert LogMark.decode(encoded) == mark
    assert LogMark.decode(encoded + b"extra") == mark


def test_log_mark_decode_refuses_short_data():
    with pytest.raises(ValueError):
        LogMark.decode(bytes(15))


def test_log_marks_compare_by_journal_id_then_offset():
    assert LogMark(1, 9999) < LogMark(2, 512) < LogMark(2, 1024)
    assert max(LogMark(3, 0), LogMark(2, 4096)) == LogMark(3, 0)
    with pytest.raises(Exception):
        LogMark(1, 2).offset = 3  # frozen


def test_journal_record_is_frozen_and_knows_its_end():
    record = JournalRecord(512, 44, RecordKind.LEDGER_KEY, 1, -0x1000, b"k")
    assert record.end == 556
    with pytest.raises(Exception):
        record.offset = 0


def test_journal_file_names_are_lowercase_hex():
    assert journal_file_name(0x1A2B) == "1a2b.txn"
    assert journal_file_name(0x18F2A1B2C3D) == "18f2a1b2c3d.txn"
    assert parse_journal_id(journal_file_name(12345678901)) == 12345678901


@pytest.mark.parametrize("name, journal_id", [
    ("1a2b.txn", 0x1A2B), ("1A2B.txn", 0x1A2B), ("0.txn", 0), ("1a.old.txn", 0x1A),
    ("1a2b.log", None), ("1a2b.txn.tmp", None), (".txn", None), ("0x1a.txn", None),
    ("1_0.txn", None), ("-1.txn", None), ("g1.txn", None), (" 1.txn", None), ("lastMark", None),
])
def test_parse_journal_id(name, journal_id):
    assert parse_journal_id(name) == journal_id


def test_format_module_imports_only_pure_modules():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(jf))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported <= {"__future__", "struct", "dataclasses", "enum", "itertools", "zlib", "hmac",
                        "hashlib", "crc32c"}
    assert "open(" not in inspect.getsource(jf)


def test_encode_adds_is_encode_add_of_each_entry_joined():
    from bookie.entry import frame_entry

    entries = [(e, frame_entry(3, e, e - 1, 0, bytes([e]) * e)) for e in range(40)]
    assert jf.encode_adds(entries) == b"".join(jf.encode_add(data) for _, data in entries)
    assert jf.encode_adds([]) == b""
