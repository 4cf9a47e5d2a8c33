"""A torn last journal record is cut cleanly at every byte offset; mid-file damage is corruption.

Claim (docs/design.md §1.4, §6): replay never takes a torn record for data and never drops an
earlier one. The journal is written by the real writer (Journal, on OsDisk); then its last
record is damaged from every byte offset to its end, in three shapes:

    truncate   the file ends there (kill -9 during an extending write; A2)
    zero       the bytes read as zeros up to the preallocated end (power loss; A1)
    garble     the bytes are random and non-zero (power loss; A1), from the ``seed`` fixture:
               seed=N is printed on failure and ``--seed N`` replays it

Every scan must return exactly the records before the damaged one and end at its offset,
except where garbling leaves a length word that frames a syntactically valid record: that
record comes back with its entry garbled, and the entry digest (checked by replay) fails.
"""

from __future__ import annotations

import os
import random
import threading

import crcmod.predefined
import pytest

from bookie.disk import OsDisk
from bookie.entry import DigestType, entry_digest_ok, frame_entry, master_key
from bookie.errors import CorruptRecord
from journal.format import RecordKind, encode_add, encode_fence, encode_master_key
from journal.group_commit import GroupCommitPolicy
from journal.journal import Journal
from journal.reader import JournalReader
from tests.support.counting_clock import CountingClock

_crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def entry(ledger_id: int, entry_id: int, payload: bytes) -> bytes:
    framed = frame_entry(ledger_id, entry_id, entry_id - 1, entry_id + len(payload), payload)
    assert digest_ok_by_crcmod(framed) and entry_digest_ok(framed, DigestType.CRC32C)
    return framed


def digest_ok_by_crcmod(framed: bytes) -> bool:
    """The CRC32C digest check done independently of bookie.entry (crcmod reference)."""
    return _crc32c(framed[:32] + framed[36:]).to_bytes(4, "big") == framed[32:36]


def payload(size: int, fill: int) -> bytes:
    return bytes([fill]) * (size - 1) + b"\x7f"  # a non-zero last byte: see the reader's rule


def write_journal(directory: str, groups: list[list[bytes]]) -> str:
    """Write ``groups`` through Journal, one flush per group; return the file's path."""
    done = threading.Event()
    total = sum(len(group) for group in groups)
    completed: list = []

    def complete_group(tokens, exc):
        assert exc is None
        completed.extend(tokens)
        if len(completed) == total:
            done.set()

    # The thread flushes only when the (fake) oldest wait passes 1 ms: the test moves the
    # clock once the thread has gathered a whole group, so each group is exactly one flush.
    clock = CountingClock()
    flushed: list[int] = []
    journal = Journal(OsDisk(), directory, complete_group=complete_group,
                      prealloc_bytes=64 * 1024, clock=clock,
                      on_flush=lambda reason, count, size, seconds: flushed.append(count),
                      policy=GroupCommitPolicy(group_wait_ms_max=1.0,
                                               flush_when_queue_empty=False))
    journal.start()
    try:
        for group in groups:
            done.clear()
            total = len(completed) + len(group)
            for index, record in enumerate(group):
                journal.submit(record, (len(completed), index))
            # Three more clock reads: the thread has run a gather that began after the
            # submits (it reads the clock after each wait and after each gather).
            clock.wait_reads(clock.reads + 3)
            clock.now += 1.0
            assert done.wait(10)
    finally:
        journal.close()  # the journal thread is not a daemon: always join it
    assert flushed == [len(group) for group in groups]
    [name] = os.listdir(directory)
    return os.path.join(directory, name)


KEY = encode_master_key(1, master_key(b"secret"))
FIRST_GROUPS = [[KEY, encode_add(entry(1, 0, b"hello")), encode_add(entry(1, 1, payload(300, 1)))],
                [encode_fence(2), encode_add(entry(1, 2, payload(700, 2)))]]
LAST_GROUPS = {
    "alone": [encode_add(entry(1, 3, b"hello"))],  # starts aligned, 45 bytes
    "after a record": [encode_add(entry(1, 3, payload(1000, 3))),
                       encode_add(entry(1, 4, b"world"))],  # starts unaligned
    "across a boundary": [encode_add(entry(1, 3, payload(1500, 4)))],
    "ending aligned": [encode_add(entry(1, 3, payload(476, 5)))],  # 512 bytes: no padding
}


def scan(path: str, **kwargs):
    with JournalReader(OsDisk(), path) as reader:
        records = list(reader.scan(**kwargs))
    return records, reader.end


@pytest.fixture(params=sorted(LAST_GROUPS))
def journal(request, tmp_path):
    """(path, intact bytes, records before the last one, the last record)."""
    path = write_journal(str(tmp_path), FIRST_GROUPS + [LAST_GROUPS[request.param]])
    with open(path, "rb") as handle:
        intact = handle.read()
    records, end = scan(path)
    assert end.clean and len(records) == 5 + len(LAST_GROUPS[request.param])
    for record in records:
        if record.kind is RecordKind.DATA:
            assert digest_ok_by_crcmod(record.payload)
    return path, intact, records[:-1], records[-1]


def garble(rng: random.Random, original: bytes) -> bytes:
    """Random non-zero bytes, each different from the byte it replaces."""
    out = bytearray()
    for byte in original:
        value = rng.randrange(1, 256)
        out.append(value if value != byte else value % 255 + 1)
    return bytes(out)


def rewrite(path: str, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def test_truncated_last_record_is_cut_at_its_offset(journal):
    path, intact, earlier, last = journal
    for k in range(last.size):
        rewrite(path, intact[:last.offset + k])
        records, end = scan(path)
        assert records == earlier, f"k={k}"
        assert end.offset == last.offset, f"k={k} {end}"
        assert end.cut_bytes == len(intact[last.offset:last.offset + k].rstrip(b"\0"))


def test_last_record_torn_inside_zeros_is_cut_at_its_offset(journal):
    path, intact, earlier, last = journal
    ends_aligned = last.end % 512 == 0
    for k in range(last.size):
        torn = intact[:last.offset + k] + bytes(len(intact) - last.offset - k)
        rewrite(path, torn)
        records, end = scan(path)
        if ends_aligned and k >= 4:
            # The group ended on a boundary without padding, as an acknowledged one may: the
            # reader cannot tell, so the zero-filled entry comes back and its digest fails.
            assert records[:-1] == earlier and records[-1].offset == last.offset, f"k={k}"
            assert not entry_digest_ok(records[-1].payload, DigestType.CRC32C), f"k={k}"
            assert not digest_ok_by_crcmod(records[-1].payload), f"k={k}"
            continue
        assert records == earlier, f"k={k} {records[len(earlier):]}"
        assert end.offset == last.offset, f"k={k} {end}"


def test_garbled_last_record_is_cut_or_fails_its_digest(journal, seed):
    path, intact, earlier, last = journal
    rng = random.Random(seed)
    for k in range(last.size):
        garbage = garble(rng, intact[last.offset + k:last.end])
        rewrite(path, intact[:last.offset + k] + garbage + intact[last.end:])
        records, end = scan(path)
        where = f"seed={seed} k={k} end={end}"
        assert records[:len(earlier)] == earlier, where
        extra = records[len(earlier):]
        if not extra:
            assert end.offset == last.offset and end.cut_bytes > 0, where
        for record in extra:
            assert record.offset == last.offset or record.kind is not RecordKind.DATA, where
            assert record.kind in (RecordKind.DATA, RecordKind.UNKNOWN_META), where
            if record.kind is RecordKind.DATA:
                assert not entry_digest_ok(record.payload, DigestType.CRC32C), where
                assert not digest_ok_by_crcmod(record.payload), where


MIDDLE_GROUPS = [[KEY, encode_add(entry(1, 0, b"hello"))],
                 [encode_add(entry(1, 1, payload(200, 6))), encode_add(entry(1, 2, b"hello"))],
                 [encode_add(entry(1, 3, b"world"))]]


@pytest.mark.parametrize("damaged", [1, 2])
def test_garbage_in_the_middle_followed_by_valid_records_is_corruption(tmp_path, damaged,
                                                                      seed):
    path = write_journal(str(tmp_path), MIDDLE_GROUPS)
    intact_records, _ = scan(path)
    target = [r for r in intact_records if r.kind is RecordKind.DATA][damaged]
    rng = random.Random(seed)
    garbage = bytes([0x80 | rng.randrange(128)]) + rng.randbytes(60)  # a negative length
    with open(path, "r+b") as handle:
        handle.seek(target.offset)
        handle.write(garbage)
    with pytest.raises(CorruptRecord) as info:
        scan(path)
    assert info.value.offset == target.offset, f"seed={seed}"
    assert info.value.path == path and str(target.offset) in str(info.value)
    records, end = scan(path, skip_invalid=True)
    assert records == intact_records[:intact_records.index(target)], f"seed={seed}"
    assert end.offset == target.offset and end.reason.startswith("skipped corrupt")
    assert end.cut_bytes > 0
