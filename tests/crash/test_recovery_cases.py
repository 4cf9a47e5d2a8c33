"""Replay on start (bookie/recovery.py): each row of its decision table, on journals built
byte for byte with journal/format.py, started through a real Bookie on a real data dir."""

from __future__ import annotations

import os

import pytest

from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import DigestType, frame_entry, frame_lac, master_key
from bookie.errors import BadRequest, CorruptRecord, Fenced, IOFailure, NoEntry
from bookie.recovery import MissingJournal
from journal import format as jf
from journal.reader import JournalReader
from tests.support.servers import running_bookie

KEY = master_key(b"replay")
JOURNAL_ID = 0x100


def _config(data_dir: str, **changes) -> BookieConfig:
    return BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                        journal_prealloc_bytes=65536, **changes)


def _entry(ledger_id: int, entry_id: int, payload: bytes = b"p" * 64) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id, payload)


def _write_journal(data_dir: str, records: list[bytes], journal_id: int = JOURNAL_ID,
                   tail: bytes = b"", version: int = 6, flushed: bool = True
                   ) -> tuple[str, list[int]]:
    """A journal holding ``records`` as one group (padded to 512 when ``flushed``, as every
    completed group flush is), then ``tail``; returns path and record offsets."""
    directory = os.path.join(data_dir, "journal", "current")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, jf.journal_file_name(journal_id))
    body = bytearray(jf.encode_header(version))
    offsets = []
    for record in records:
        offsets.append(len(body))
        body += record
    if flushed and records:
        body += jf.padding_record(len(body))
    with open(path, "wb") as handle:
        handle.write(bytes(body) + tail)
    return path, offsets


def _basic_records(ledger_id: int = 1, count: int = 5) -> list[bytes]:
    records = [jf.encode_master_key(ledger_id, KEY)]
    records += [jf.encode_add(_entry(ledger_id, i)) for i in range(count)]
    return records


async def test_fresh_data_dir_starts_with_an_empty_report(data_dir):
    async with running_bookie(_config(data_dir)) as running:
        report = running.bookie.replay_report
        assert report.files == [] and report.records == 0 and report.dropped == []


async def test_every_record_kind_is_replayed(data_dir):
    records = _basic_records(1, 3) + [
        jf.encode_master_key(2, KEY), jf.encode_fence(2),
        jf.encode_explicit_lac(1, frame_lac(1, 7))]
    _write_journal(data_dir, records)
    async with running_bookie(_config(data_dir)) as running:
        bookie = running.bookie
        assert [await bookie.read_entry(1, i) for i in range(3)] == [_entry(1, i)
                                                                     for i in range(3)]
        assert await bookie.read_lac(1) == 7
        with pytest.raises(Fenced):
            await bookie.add_entry(2, 0, _entry(2, 0), KEY)
        report = bookie.replay_report
        assert (report.adds, report.keys, report.fences, report.lacs) == (3, 2, 1, 1)


@pytest.mark.parametrize("cut", [1, 4, 5, 20, 40])
async def test_torn_last_record_is_cut_reported_and_saved_aside(data_dir, cut):
    records = _basic_records(1, 4)
    path, offsets = _write_journal(data_dir, records)
    with open(path, "r+b") as handle:
        handle.truncate(offsets[-1] + cut)
    # The cut is counted to the last non-zero byte: zeros after it carry nothing (they are
    # what preallocation holds anyway).
    lost = records[-1][:cut].rstrip(b"\0")
    async with running_bookie(_config(data_dir)) as running:
        bookie = running.bookie
        assert [await bookie.read_entry(1, i) for i in range(3)] == [_entry(1, i)
                                                                     for i in range(3)]
        with pytest.raises(NoEntry):
            await bookie.read_entry(1, 3)
        dropped = bookie.replay_report.dropped
        if not lost:
            assert dropped == []  # only zeros after the last whole record: a clean end
            return
        assert [(d.path, d.offset, d.bytes) for d in dropped] == [(path, offsets[-1], len(lost))]
        with open(dropped[0].saved_as, "rb") as handle:
            assert handle.read() == lost


async def test_torn_record_inside_zeros_fails_its_digest_and_is_dropped(data_dir):
    records = _basic_records(1, 3)
    torn = bytearray(records[-1])
    torn[len(torn) // 2:] = bytes(len(torn) - len(torn) // 2)  # power loss: middle lost (A1)
    path, offsets = _write_journal(data_dir, records[:-1] + [bytes(torn)], tail=bytes(4096))
    async with running_bookie(_config(data_dir)) as running:
        bookie = running.bookie
        # The ledger's type was learned from entry 0, which verifies as CRC32C.
        assert [await bookie.read_entry(1, i) for i in range(2)] == [_entry(1, i)
                                                                     for i in range(2)]
        with pytest.raises(NoEntry):
            await bookie.read_entry(1, 2)
        (dropped,) = bookie.replay_report.dropped
        assert dropped.offset == offsets[-1] and "digest" in dropped.reason


async def test_torn_record_of_a_known_crc_ledger_is_dropped_and_reported(data_dir):
    # First life: ledger 1 learns its digest type and is checkpointed.
    async with running_bookie(_config(data_dir)) as running:
        await running.bookie.add_entry(1, 0, _entry(1, 0), KEY, DigestType.CRC32C)
    torn = bytearray(jf.encode_add(_entry(1, 1)))
    torn[40:] = bytes(len(torn) - 40)
    path, offsets = _write_journal(data_dir, [bytes(torn)], journal_id=2**62,
                                   tail=bytes(1024), flushed=False)
    async with running_bookie(_config(data_dir)) as running:
        bookie = running.bookie
        assert await bookie.read_entry(1, 0) == _entry(1, 0)
        with pytest.raises(NoEntry):
            await bookie.read_entry(1, 1)
        dropped = [d for d in bookie.replay_report.dropped if d.path == path]
        assert [d.offset for d in dropped] == [offsets[0]]  # the group never completed


def _garbled(entry: bytes, keep: int) -> bytes:
    """A power-loss tear seen in the sweep (seed 2059255462, k=128): a group's write cut
    short over preallocated zeros that came back as garbage, so a record keeps its header and
    ``keep`` bytes, then holds garbage of its own length."""
    return entry[:keep] + bytes((b * 7 + 1) & 0xFF for b in entry[keep:])


async def test_torn_first_entry_of_a_new_ledger_is_dropped_by_its_key_records_type(data_dir):
    """Regression (power-loss sweep, CI): the ledger is new since the checkpoint, so the
    ledgers index does not hold its digest type; before the key record carried it, replay
    could not check the entry and stored garbage as entry 0, never sent by any client."""
    torn = _garbled(_entry(4, 0, b"q" * 900), 115)
    records = [jf.encode_master_key(4, KEY, int(DigestType.CRC32C)), jf.encode_add(torn)]
    path, offsets = _write_journal(data_dir, records, tail=bytes(4096))
    async with running_bookie(_config(data_dir)) as running:
        bookie = running.bookie
        with pytest.raises(NoEntry):
            await bookie.read_entry(4, 0)
        (dropped,) = bookie.replay_report.dropped
        assert (dropped.path, dropped.offset) == (path, offsets[1])
        assert "digest" in dropped.reason
        # The type is the ledger's now: the client's retry of entry 0 is checked by it.
        assert bookie.storage.ledgers.get(4).digest_type == DigestType.CRC32C
        await bookie.add_entry(4, 0, _entry(4, 0), KEY)
        assert await bookie.read_entry(4, 0) == _entry(4, 0)


async def test_a_mac_ledgers_key_record_keeps_its_unverifiable_entries(data_dir):
    """The bookie cannot check a MAC digest (it has no MAC key): an entry of a ledger named
    MAC by its key record is replayed as is, and the type holds against a later add."""
    mac_entry = frame_entry(5, 0, -1, 0, b"m" * 64, DigestType.MAC, key=b"mac key")
    records = [jf.encode_master_key(5, KEY, int(DigestType.MAC)), jf.encode_add(mac_entry)]
    _write_journal(data_dir, records)
    async with running_bookie(_config(data_dir)) as running:
        bookie = running.bookie
        assert await bookie.read_entry(5, 0) == mac_entry
        assert bookie.replay_report.dropped == []
        with pytest.raises(BadRequest):
            await bookie.add_entry(5, 1, _entry(5, 1), KEY, DigestType.CRC32C)


async def test_the_live_path_journals_each_ledgers_digest_type_with_its_key(data_dir):
    """What the two tests above replay is what the live path writes (formats.md §3.8): the
    key record names the type of a ledger's first add; a fence of a ledger this bookie never
    saw names none, and the first add after it journals the key again with the type."""
    async with running_bookie(_config(data_dir)) as running:
        bookie = running.bookie
        for entry_id in range(2):
            crc32_entry = frame_entry(1, entry_id, entry_id - 1, 0, b"c", DigestType.CRC32)
            await bookie.add_entry(1, entry_id, crc32_entry, KEY, DigestType.CRC32)
        await bookie.fence(2, KEY)
        await bookie.add_entry(2, 0, _entry(2, 0), KEY, recovery=True)
    keys = []
    directory = os.path.join(data_dir, "journal", "current")
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".txn")):
        with JournalReader(OsDisk(), os.path.join(directory, name)) as reader:
            keys += [(r.ledger_id, r.digest_type) for r in reader.scan()
                     if r.kind is jf.RecordKind.LEDGER_KEY]
    assert keys == [(1, int(DigestType.CRC32)), (2, 0), (2, int(DigestType.CRC32C))]


async def test_missing_marked_journal_refuses_to_start(data_dir):
    ledger_dir = os.path.join(data_dir, "ledgers", "current")
    os.makedirs(ledger_dir)
    with open(os.path.join(ledger_dir, "lastMark"), "wb") as handle:
        handle.write(jf.LogMark(0x55, 1024).encode())
    _write_journal(data_dir, _basic_records(), journal_id=0x56)
    with pytest.raises(MissingJournal, match="55.txn"):
        async with running_bookie(_config(data_dir)):
            pass


async def test_corrupt_record_followed_by_valid_ones_refuses_to_start(data_dir):
    records = _basic_records(1, 6)
    garbage = (-77 & 0xFFFFFFFF).to_bytes(4, "big") + b"\xab" * 508
    body = jf.encode_header() + b"".join(records[:3])
    pad = jf.padding_record(len(body))
    aligned_rest = b"".join(records[3:])
    path, _ = _write_journal(data_dir, [])
    with open(path, "wb") as handle:
        handle.write(body + pad + garbage + aligned_rest)
    bad_offset = len(body) + len(pad)
    with pytest.raises(CorruptRecord) as raised:
        async with running_bookie(_config(data_dir)):
            pass
    assert raised.value.offset == bad_offset and raised.value.path == path


async def test_skip_corrupt_journal_records_starts_and_reports(data_dir):
    records = _basic_records(1, 6)
    body = jf.encode_header() + b"".join(records[:3])
    pad = jf.padding_record(len(body))
    path, _ = _write_journal(data_dir, [])
    with open(path, "wb") as handle:
        handle.write(body + pad + (-77 & 0xFFFFFFFF).to_bytes(4, "big") + b"\xab" * 508
                     + b"".join(records[3:]))
    config = _config(data_dir, skip_corrupt_journal_records=True)
    async with running_bookie(config) as running:
        bookie = running.bookie
        assert await bookie.read_entry(1, 1) == _entry(1, 1)
        assert [d.offset for d in bookie.replay_report.dropped] == [len(body) + len(pad)]


async def test_v3_journal_needing_replay_refuses_to_start(data_dir):
    directory = os.path.join(data_dir, "journal", "current")
    os.makedirs(directory)
    with open(os.path.join(directory, "5.txn"), "wb") as handle:
        handle.write(b"BKLG" + (3).to_bytes(4, "big") + bytes(64))
    with pytest.raises(IOFailure, match="5.txn"):
        async with running_bookie(_config(data_dir)):
            pass


async def test_different_bytes_for_a_stored_entry_are_reported_not_overwritten(data_dir):
    first, second = _entry(1, 0, b"first"), _entry(1, 0, b"other")
    _write_journal(data_dir, [jf.encode_master_key(1, KEY), jf.encode_add(first),
                              jf.encode_add(second)])
    async with running_bookie(_config(data_dir)) as running:
        assert await running.bookie.read_entry(1, 0) == first
        (conflict,) = running.bookie.replay_report.conflicts
        assert "1/0" in conflict


async def test_the_same_entry_framed_again_is_no_conflict(data_dir):
    """W6 on replay: a journal (BookKeeper's, after its recovery wrote an entry back) may
    hold an entry twice, framed with another LAC; it is the same entry, the first copy
    stays, and nothing is reported."""
    first = _entry(1, 0, b"first")
    again = frame_entry(1, 0, 7, 0, b"first")
    assert again != first
    _write_journal(data_dir, [jf.encode_master_key(1, KEY), jf.encode_add(first),
                              jf.encode_add(again)])
    async with running_bookie(_config(data_dir)) as running:
        assert await running.bookie.read_entry(1, 0) == first
        assert running.bookie.replay_report.conflicts == []


async def test_restart_after_clean_stop_replays_nothing_twice(data_dir):
    async with running_bookie(_config(data_dir)) as running:
        for i in range(10):
            await running.bookie.add_entry(3, i, _entry(3, i), KEY)
    async with running_bookie(_config(data_dir)) as running:
        assert running.bookie.replay_report.adds == 0
        assert [await running.bookie.read_entry(3, i) for i in range(10)] == [
            _entry(3, i) for i in range(10)]
