"""Journals against docs/formats.md §10, read by an independent port of Journal.scanJournal.

``bookkeeper_scan`` below is written from docs/formats.md §3.2 and §3.7 alone, the way Apache
BookKeeper's ``Journal.scanJournal`` and ``JournalChannel`` read: no project extras, and it
imports nothing from journal/. It checks the golden files of tests/data/golden/ and the live
output of our writer: V6 header, every record consumed, every padding record ending on a
512-byte boundary, the scan stopping at a zero length word, only zeros after it. Every CRC
is recomputed with crcmod.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import random
import struct
import threading

import crcmod.predefined
import pytest

from bookie.disk import OsDisk
from bookie.entry import frame_entry, frame_lac, master_key
from journal.format import encode_add, encode_explicit_lac, encode_fence, encode_master_key
from journal.journal import Journal
from journal.reader import JournalReader

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "golden")
crc32c = crcmod.predefined.mkCrcFun("crc-32c")
_crc32 = crcmod.predefined.mkCrcFun("crc-32")

LEDGER_KEY, FENCE, FORCE, EXPLICIT_LAC = -0x1000, -0x2000, -0x4000, -0x8000
PADDING = struct.unpack(">i", b"\xff\xff\xff\x00")[0]


@dataclasses.dataclass
class BkScan:
    version: int
    records: list  # (offset of len, payload)
    paddings: list  # (offset, padLen)
    stop: int
    stop_reason: str


def bookkeeper_scan(data: bytes) -> BkScan:
    """docs/formats.md §3.2 version detection, then §3.7 steps 1-6 from after the header."""
    version = 1
    if len(data) >= 8 and data[:4] == b"BKLG":
        version = struct.unpack(">i", data[4:8])[0]
    assert 1 <= version <= 6, f"corruption: version {version}"
    position = 512 if version >= 5 else (8 if version >= 2 else 0)
    scan = BkScan(version, [], [], position, "")
    while True:
        if len(data) - position < 4:
            scan.stop, scan.stop_reason = position, "end of file"
            return scan
        length = struct.unpack_from(">i", data, position)[0]
        if length == 0:
            scan.stop, scan.stop_reason = position, "zero length"
            return scan
        if version >= 5 and length == PADDING:
            pad_length = struct.unpack_from(">i", data, position + 4)[0]
            scan.paddings.append((position, pad_length))
            position += 8 + pad_length
            continue
        assert length > 0, f"corruption: negative length {length} at {position}"
        if len(data) - position - 4 < length:
            scan.stop, scan.stop_reason = position, "torn"
            return scan
        scan.records.append((position, data[position + 4:position + 4 + length]))
        position += 4 + length


def check_meta_and_digests(scan: BkScan) -> list:
    """Decode every record per docs/formats.md §3.4; data digests checked with crcmod's CRC32C."""
    decoded = []
    for offset, payload in scan.records:
        ledger_id, entry_id = struct.unpack_from(">qq", payload, 0)
        if entry_id >= 0:
            # CRC32C (4 bytes), or CRC32 (8 bytes, the high 4 zero: docs/formats.md §6.2)
            digest = crc32c(payload[:32] + payload[36:]).to_bytes(4, "big")
            crc32_digest = _crc32(payload[:32] + payload[40:]).to_bytes(8, "big")
            assert payload[32:36] == digest or payload[32:40] == crc32_digest, \
                f"data record at {offset}: neither its CRC32C nor its CRC32 matches"
            decoded.append(("data", ledger_id, entry_id, payload))
        elif entry_id == FENCE:
            assert len(payload) == 16 and scan.version >= 4
            decoded.append(("fence", ledger_id, entry_id, b""))
        else:
            assert entry_id in (LEDGER_KEY, EXPLICIT_LAC), f"entry id {entry_id} at {offset}"
            inner = struct.unpack_from(">i", payload, 16)[0]
            body = payload[20:20 + inner]
            if entry_id == LEDGER_KEY and inner == len(payload) - 21:
                # The project's digest-type byte after the key (formats.md §3.4): BookKeeper
                # reads keyLen bytes of key and never looks at it.
                assert 1 <= payload[-1] <= 4, f"key record at {offset}: type {payload[-1]}"
            else:
                assert inner == len(payload) - 20
            if entry_id == EXPLICIT_LAC:
                assert scan.version >= 6 and inner >= 16
                assert struct.unpack_from(">q", body, 0)[0] == ledger_id
                assert crc32c(body[:16]).to_bytes(4, "big") == body[16:20]
            decoded.append(("key" if entry_id == LEDGER_KEY else "lac", ledger_id, entry_id,
                            body))
    return decoded


def check_conformance(data: bytes, version: int) -> BkScan:
    """docs/formats.md §10: what Apache BookKeeper's reader needs of a journal file."""
    scan = bookkeeper_scan(data)
    assert scan.version == version
    if version >= 5:
        assert data[:512] == b"BKLG" + struct.pack(">i", version) + bytes(504)
    assert scan.stop_reason == "zero length", scan.stop_reason
    assert not data[scan.stop:].strip(b"\0"), "only zeros after the last record"
    if version >= 5:
        assert scan.stop % 512 == 0
        for offset, pad_length in scan.paddings:
            assert pad_length >= 0 and (offset + 8 + pad_length) % 512 == 0
            assert data[offset + 8:offset + 8 + pad_length] == bytes(pad_length)
    else:
        assert scan.paddings == []
    check_meta_and_digests(scan)
    return scan


def load_generator():
    spec = importlib.util.spec_from_file_location(
        "make_golden_journal", os.path.join(GOLDEN, "make_golden_journal.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def golden(name: str) -> bytes:
    with open(os.path.join(GOLDEN, name), "rb") as handle:
        return handle.read()


def ours(path: str) -> list:
    with JournalReader(OsDisk(), path) as reader:
        records = [(r.offset, r.kind.value, r.ledger_id, r.entry_id) for r in reader.scan()]
        assert reader.end.clean
    return records


# One generator writes every golden journal (tests/data/golden/make_golden_journal.py, from
# struct and docs/formats.md's tables, independent of journal/); what the project's own writer
# writes is checked against the same rules by test_our_writer_output_parses_by_bookkeeper_rules.
NAMES = ("journal-v4.txn", "journal-v5.txn", "journal-v6.txn")


@pytest.mark.parametrize("name", NAMES)
def test_golden_files_are_what_the_generator_writes(name):
    data = golden(name)
    assert len(data) < 64 * 1024
    assert load_generator().build(name) == data


@pytest.mark.parametrize("name, version", [(name, int(name[-5])) for name in NAMES])
def test_golden_files_parse_by_bookkeeper_rules_and_ours_agree(name, version):
    scan = check_conformance(golden(name), version)
    kinds = {"data": "data", "fence": "fence", "key": "ledger_key", "lac": "explicit_lac"}
    expected = [(offset, kinds[kind], ledger_id, entry_id) for (offset, _), (kind, ledger_id,
                entry_id, _) in zip(scan.records, check_meta_and_digests(scan))]
    assert ours(os.path.join(GOLDEN, name)) == expected


def test_v6_golden_has_the_required_cases():
    data = golden("journal-v6.txn")
    scan = check_conformance(data, 6)
    pads = {(offset + 8 + pad_length) % 512 == 0 and (512 - offset % 512, pad_length)
            for offset, pad_length in scan.paddings}
    assert (8, 0) in pads  # gap 8: an 8-byte padding record, padLen 0
    assert (7, 511) in pads  # gap 7: the record runs to the boundary after the next
    decoded = check_meta_and_digests(scan)
    assert {kind for kind, *_ in decoded} == {"data", "fence", "key", "lac"}
    # a group that ends on a boundary gets no padding record
    ends = [offset + 4 + len(payload) for offset, payload in scan.records]
    assert any(end % 512 == 0 and end not in {o for o, _ in scan.paddings} for end in ends)


def test_v4_and_v5_golden_cases():
    v4 = check_conformance(golden("journal-v4.txn"), 4)
    assert v4.records[0][0] == 8 and len(golden("journal-v4.txn")[:8]) == 8
    assert "fence" in {kind for kind, *_ in check_meta_and_digests(v4)}
    v5 = check_conformance(golden("journal-v5.txn"), 5)
    facts = load_generator().GOLDEN_FACTS["journal-v5.txn"]
    assert v5.records[0][0] == 512 and len(v5.paddings) == facts["padding"]


def entry(ledger_id: int, entry_id: int, payload: bytes) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id + len(payload), payload)


def test_our_writer_output_parses_by_bookkeeper_rules(tmp_path):
    """Four threads submit adds of assorted sizes, keys, fences and explicit LACs."""
    completed, lock, done = [], threading.Lock(), threading.Event()
    total = 4 * 302

    def complete_group(tokens, exc):
        assert exc is None
        with lock:
            completed.extend(tokens)
            if len(completed) == total:
                done.set()

    journal = Journal(OsDisk(), str(tmp_path), complete_group=complete_group,
                      prealloc_bytes=1 << 20)
    journal.start()

    def writer(ledger_id: int) -> None:
        rng = random.Random(ledger_id)
        # Ledgers 1-3 as the bookie writes them (a digest type after the key), 0 as
        # BookKeeper does.
        journal.submit(encode_master_key(ledger_id, master_key(b"pw%d" % ledger_id),
                                         digest_type=ledger_id), "key")
        for entry_id in range(300):
            if entry_id % 50 == 49:
                journal.submit(encode_explicit_lac(ledger_id, frame_lac(ledger_id, entry_id)),
                               "lac")
            else:
                size = rng.choice([0, 1, 100, 1000, 3000])
                journal.submit(encode_add(entry(ledger_id, entry_id, rng.randbytes(size))), 1)
        journal.submit(encode_fence(ledger_id), "fence")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert done.wait(30)
    finally:
        journal.close()  # the journal thread is not a daemon: always join it
    [name] = os.listdir(tmp_path)
    with open(tmp_path / name, "rb") as handle:
        data = handle.read()
    scan = check_conformance(data, 6)
    assert len(scan.records) == total
    assert scan.stop == journal.current_mark().offset
    decoded = check_meta_and_digests(scan)
    assert sorted(kind for kind, *_ in decoded) == sorted(
        ["key"] * 4 + ["lac"] * 24 + ["data"] * 1176 + ["fence"] * 4)
    assert len(ours(str(tmp_path / name))) == total


def test_worked_example_of_formats_3_10_byte_for_byte(tmp_path):
    key = hashlib.sha1(b"ledger" + b"secret").digest()
    assert key.hex() == "e793cbc379107648537183605cd361d3bb789a39"
    hello = bytes.fromhex("0000000000000001" "0000000000000000" "ffffffffffffffff"
                          "0000000000000005" "e3a5f74d" "68656c6c6f")
    assert crc32c(hello[:32] + hello[36:]) == 0xE3A5F74D
    assert frame_entry(1, 0, -1, 5, b"hello") == hello
    done = threading.Event()
    journal = Journal(OsDisk(), str(tmp_path), complete_group=lambda t, e: done.set())
    journal.submit(encode_master_key(1, master_key(b"secret")), "key")
    journal.submit(encode_add(hello), "entry")
    journal.start()  # both records are queued: one group, one flush
    try:
        assert done.wait(10)
        mark = journal.current_mark()
    finally:
        journal.close()
    expected = (bytes.fromhex("424b4c4700000006") + bytes(504)
                + bytes.fromhex("00000028" "0000000000000001" "fffffffffffff000" "00000014")
                + key
                + bytes.fromhex("00000029") + hello
                + bytes.fromhex("ffffff00" "0000019f") + bytes(415))
    assert len(expected) == 1024
    with open(tmp_path / os.listdir(tmp_path)[0], "rb") as handle:
        data = handle.read()
    assert data[:1024] == expected
    assert not data[1024:].strip(b"\0")
    assert mark.offset == 1024 and mark.journal_id == journal.current_journal_id
    assert bookkeeper_scan(data).stop == 1024
