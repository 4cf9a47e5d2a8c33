"""entrylog/format.py: header, locations, ledgersMap batches, names, lastId."""

from __future__ import annotations

import struct

import pytest

from entrylog import format as fmt
from tests.unit.entrylog.entrylog_support import CRC32C_REFERENCE, make_entry


def test_header_is_1024_bytes_magic_version_offset_count():
    data = fmt.encode_header()
    assert len(data) == fmt.HEADER_SIZE == 1024
    assert data[:4] == b"BKLO" == bytes.fromhex("424b4c4f")
    assert data[4:8] == b"\x00\x00\x00\x01"
    assert data[8:1024] == bytes(1016)
    assert fmt.decode_header(data) == fmt.LogHeader(b"BKLO", 1, 0, 0)


def test_header_fields_are_big_endian():
    data = fmt.encode_header(1, 1069, 1)
    assert data[8:20] == bytes.fromhex("000000000000042d00000001")
    header = fmt.decode_header(data)
    assert (header.map_offset, header.ledgers_count) == (1069, 1)
    assert header.has_ledgers_map


@pytest.mark.parametrize("version,offset,count,expected", [
    (0, 1069, 1, False), (1, 0, 1, False), (1, 1069, 0, False), (1, 1069, 1, True)])
def test_index_path_needs_version_offset_and_count(version, offset, count, expected):
    assert fmt.decode_header(fmt.encode_header(version, offset, count)).has_ledgers_map \
        is expected


def test_header_patch_is_bytes_8_to_19():
    assert fmt.HEADER_PATCH_OFFSET == 8
    assert fmt.encode_header_patch(1069, 1) == bytes.fromhex("000000000000042d00000001")
    assert fmt.encode_header(1, 1069, 1)[8:20] == fmt.encode_header_patch(1069, 1)


@pytest.mark.parametrize("data,problem", [
    (b"", None),
    (b"BKL", None),                                   # fewer than 8 bytes: no rule applies
    (bytes(1024), None),                              # allocated, never written
    (fmt.encode_header(), None),
    (fmt.encode_header(version=0), None),
    (b"BKLG" + bytes(1020), "magic"),
    (b"BKLO\x00\x00\x00\x02" + bytes(1016), "version 2"),
    (b"BKLO\xff\xff\xff\xff", "version -1"),
    (b"\x00\x00\x00\x00\x00\x00\x00\x01", "magic"),
])
def test_magic_and_version_rule(data, problem):
    found = fmt.header_problem(data)
    if problem is None:
        assert found is None
    else:
        assert problem in found


def test_location_example_of_formats_5_3():
    assert fmt.make_location(0x2A, 1028) == 0x0000002A00000404
    assert fmt.split_location(0x0000002A00000404) == (0x2A, 1028)


def test_location_round_trips_at_the_limits():
    for log_id, pos in [(0, 1028), (fmt.MAX_LOG_ID, fmt.MAX_POS), (1, 2**31)]:
        assert fmt.split_location(fmt.make_location(log_id, pos)) == (log_id, pos)


def test_location_inside_the_header_is_a_programmer_error():
    with pytest.raises(AssertionError):
        fmt.make_location(1, 1024)
    with pytest.raises(AssertionError):
        fmt.make_location(2**31, 1028)


def test_ledgers_map_example_of_formats_5_4():
    entry = make_entry(1, 0)
    assert len(entry) == 41 and entry[32:36].hex() == "e3a5f74d"
    assert CRC32C_REFERENCE(b"123456789") == 0xE3069283
    trailer = fmt.encode_ledgers_map({1: 41 + 4})
    assert trailer == bytes.fromhex(
        "00000024" "ffffffffffffffff" "fffffffffffffffe" "00000001"
        "0000000000000001" "000000000000002d")
    pairs, end = fmt.decode_ledgers_map_batch(trailer)
    assert pairs == [(1, 45)] and end == 40


def test_ledgers_map_of_10001_ledgers_is_two_batches():
    totals = {ledger_id: 100 + ledger_id for ledger_id in range(10_001)}
    trailer = fmt.encode_ledgers_map(totals)
    assert len(trailer) == 2 * 24 + 16 * 10_001
    first, end = fmt.decode_ledgers_map_batch(trailer)
    assert struct.unpack_from(">i", trailer, 0)[0] == 20 + 16 * 10_000
    assert len(first) == 10_000 and end == 24 + 16 * 10_000
    second, end2 = fmt.decode_ledgers_map_batch(trailer, end)
    assert second == [(10_000, 10_100)] and end2 == len(trailer)
    assert struct.unpack_from(">i", trailer, end)[0] == 36
    assert dict(first + second) == totals


def test_ledgers_map_is_in_ascending_ledger_order():
    pairs, _ = fmt.decode_ledgers_map_batch(fmt.encode_ledgers_map({9: 20, 3: 30, 5: 40}))
    assert pairs == [(3, 30), (5, 40), (9, 20)]


def test_empty_ledgers_map_is_no_bytes():
    assert fmt.encode_ledgers_map({}) == b""


@pytest.mark.parametrize("mutate,reason", [
    (lambda b: b[:4] + struct.pack(">q", 7) + b[12:], "ids"),
    (lambda b: b[:12] + struct.pack(">q", -3) + b[20:], "ids"),
    (lambda b: struct.pack(">i", 52) + b[4:] + bytes(16), "does not match"),
    (lambda b: b[:20] + struct.pack(">i", 2) + b[24:], "does not match"),
    (lambda b: b[:39], "ends past"),
    (lambda b: b[:10], "shorter"),
    (lambda b: struct.pack(">i", 200_000) + b[4:], "out of range"),
])
def test_bad_ledgers_map_batch_is_refused(mutate, reason):
    good = fmt.encode_ledgers_map({1: 45})
    with pytest.raises(ValueError, match=reason):
        fmt.decode_ledgers_map_batch(mutate(good))


@pytest.mark.parametrize("log_id,name", [(0, "0.log"), (0x2A, "2a.log"),
                                         (fmt.MAX_LOG_ID, "7fffffff.log")])
def test_log_file_names_are_lowercase_hex(log_id, name):
    assert fmt.log_file_name(log_id) == name
    assert fmt.parse_log_id(name) == log_id
    assert fmt.compacting_file_name(log_id) == name + ".compacting"


@pytest.mark.parametrize("name,expected", [
    ("2A.log", 0x2A), ("00ff.log", 0xFF), (".log", None), ("2a.log.compacting", None),
    ("2a.txn", None), ("0x2a.log", None), ("2_a.log", None), ("+2a.log", None),
    ("2a.LOG", None), ("lastId", None), ("2a.log.torn-1024", None), (" 2a.log", None)])
def test_parse_log_id_matches_ledger_dir_util_regex(name, expected):
    assert fmt.parse_log_id(name) == expected


def test_last_id_text():
    assert fmt.encode_last_id(0x2A) == b"2a\n"
    assert fmt.decode_last_id(b"2a\n") == 0x2A
    assert fmt.decode_last_id(b"2A") == 0x2A
    assert fmt.decode_last_id(b"2a\nrubbish") == 0x2A
    assert fmt.decode_last_id(b"2a\r\n") == 0x2A
    for bad in (b"", b"\n", b"zz\n", b"0x2a\n", b"\xff\xfe", b"-1\n"):
        assert fmt.decode_last_id(bad) is None


def test_format_module_is_pure():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(fmt))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported <= {"__future__", "struct", "dataclasses", "enum", "zlib", "hmac",
                        "hashlib", "crc32c"}
    assert "open(" not in inspect.getsource(fmt)
