"""entrylog/writer.py: BufferedLogChannel creates, appends, syncs and finalizes (§5.5)."""

from __future__ import annotations

import os
import struct

import pytest

from bookie.disk import OsDisk
from bookie.errors import IOFailure
from entrylog import format as fmt
from entrylog.writer import BufferedLogChannel
from tests.unit.entrylog.entrylog_support import RecordingDisk, make_entry, write_log


def test_formats_5_4_example_byte_for_byte(tmp_path):
    entry = make_entry(1, 0)  # docs/formats.md §6.5 CRC32C vector: 41 bytes
    assert entry.hex() == ("0000000000000001" "0000000000000000" "ffffffffffffffff"
                           "0000000000000005" "e3a5f74d" "68656c6c6f")
    path, locations, _ = write_log(tmp_path, 1, [(1, entry)])
    data = open(path, "rb").read()
    assert locations == [(1 << 32) | 1028]
    assert len(data) == 1024 + 4 + 41 + 40
    assert data[:4] == b"BKLO" and data[4:8] == b"\x00\x00\x00\x01"
    assert data[8:20] == bytes.fromhex("00 00 00 00 00 00 04 2D 00 00 00 01")
    assert data[20:1024] == bytes(1004)
    assert data[1024:1028] == bytes.fromhex("00000029") and data[1028:1069] == entry
    assert data[1069:] == bytes.fromhex(
        "00000024" + "ff" * 8 + "ff" * 7 + "fe" + "00000001"
        + "0000000000000001" + "000000000000002d")


def test_create_writes_an_active_header(tmp_path):
    channel = BufferedLogChannel.create(OsDisk(), str(tmp_path), 0x2A)
    assert channel.path == str(tmp_path / "2a.log")
    assert open(channel.path, "rb").read() == fmt.encode_header(1, 0, 0)
    assert (channel.position, channel.log_id, channel.ledger_totals) == (1024, 0x2A, {})
    channel.close()


def test_create_fsyncs_the_dir_before_relying_on_the_name(tmp_path):
    disk = RecordingDisk()
    BufferedLogChannel.create(disk, str(tmp_path), 3).close()
    assert disk.events == [("create", "3.log"), ("fsync_dir",), ("write", "3.log", 0, 1024)]


def test_create_refuses_an_existing_log(tmp_path):
    (tmp_path / "3.log").write_bytes(b"old")
    with pytest.raises(IOFailure, match="cannot create"):
        BufferedLogChannel.create(OsDisk(), str(tmp_path), 3)
    assert (tmp_path / "3.log").read_bytes() == b"old"


def test_compacting_log_has_its_own_name(tmp_path):
    channel = BufferedLogChannel.create(OsDisk(), str(tmp_path), 3, compacting=True)
    assert channel.path == str(tmp_path / "3.log.compacting")
    channel.close()


def test_add_entry_returns_locations_and_tracks_totals(tmp_path):
    channel = BufferedLogChannel.create(OsDisk(), str(tmp_path), 7)
    first, second = make_entry(4, 0), make_entry(9, 0, b"abc")
    assert channel.add_entry(4, first) == (7 << 32) | 1028
    assert channel.add_entry(9, second) == (7 << 32) | (1028 + 45)
    assert channel.add_entry(4, first) == (7 << 32) | (1028 + 45 + 43)
    assert channel.position == 1024 + 45 + 43 + 45
    assert channel.ledger_totals == {4: 90, 9: 43}
    channel.close()


def test_records_stay_buffered_until_the_buffer_fills_or_a_flush(tmp_path):
    channel = BufferedLogChannel.create(OsDisk(), str(tmp_path), 7, write_buffer_bytes=100)
    channel.add_entry(1, make_entry(1, 0))
    assert os.path.getsize(channel.path) == 1024 and channel.written_position == 1024
    channel.add_entry(1, make_entry(1, 1))
    channel.add_entry(1, make_entry(1, 2))
    assert os.path.getsize(channel.path) == 1024 + 135 == channel.written_position
    channel.add_entry(1, make_entry(1, 3))
    channel.flush_and_sync()
    assert os.path.getsize(channel.path) == 1024 + 180 == channel.synced_position
    assert open(channel.path, "rb").read(20)[8:] == bytes(12)  # still active
    channel.close()


def test_flush_and_sync_is_write_then_fdatasync(tmp_path):
    disk = RecordingDisk()
    channel = BufferedLogChannel.create(disk, str(tmp_path), 3)
    channel.add_entry(1, make_entry(1, 0))
    disk.events.clear()
    channel.flush_and_sync()
    assert disk.events == [("write", "3.log", 1024, 45), ("fdatasync", "3.log")]
    channel.close()


def test_finalize_order_is_records_map_fsync_header_fsync(tmp_path):
    # E1: the header points at the trailer only after the trailer is fsynced.
    disk = RecordingDisk()
    channel = BufferedLogChannel.create(disk, str(tmp_path), 3)
    channel.add_entry(1, make_entry(1, 0))
    channel.add_entry(2, make_entry(2, 0))
    disk.events.clear()
    assert channel.finalize() is True
    assert disk.events == [
        ("write", "3.log", 1024, 90),
        ("write", "3.log", 1114, 2 * 16 + 24),
        ("fsync", "3.log"),
        ("write", "3.log", 8, 12),
        ("fsync", "3.log"),
    ]
    data = open(channel.path, "rb").read()
    assert fmt.decode_header(data) == fmt.LogHeader(b"BKLO", 1, 1114, 2)
    assert len(data) == 1114 + 56 == channel.position


def test_finalize_of_an_empty_log_deletes_it(tmp_path):
    disk = RecordingDisk()
    channel = BufferedLogChannel.create(disk, str(tmp_path), 3)
    disk.events.clear()
    assert channel.finalize() is False
    assert not (tmp_path / "3.log").exists()
    assert disk.events == [("unlink", "3.log"), ("fsync_dir",)]


def test_finalized_channel_is_closed(tmp_path):
    _, _, channel = write_log(tmp_path, 3, [(1, make_entry(1, 0))])
    with pytest.raises(IOFailure, match="closed"):
        channel.add_entry(1, make_entry(1, 1))


def test_would_exceed_counts_the_size_field(tmp_path):
    channel = BufferedLogChannel.create(OsDisk(), str(tmp_path), 3)
    assert not channel.would_exceed(41, 1024 + 45)
    assert channel.would_exceed(42, 1024 + 45)
    channel.close()


@pytest.mark.parametrize("operation", ["write", "fdatasync"])
def test_io_error_fails_the_channel_for_good(tmp_path, operation):
    # EW2, A5: no retry after a failed write or sync.
    disk = RecordingDisk(fail_on=operation, fail_after=1 if operation == "write" else 0)
    channel = BufferedLogChannel.create(disk, str(tmp_path), 3)
    channel.add_entry(1, make_entry(1, 0))
    with pytest.raises(IOFailure, match="injected"):
        channel.flush_and_sync()
    assert channel.failed
    calls = dict(disk.calls)
    for action in (lambda: channel.add_entry(1, make_entry(1, 1)), channel.flush_and_sync,
                   channel.finalize):
        with pytest.raises(IOFailure, match="failed earlier"):
            action()
    assert disk.calls == calls


def test_failed_trailer_fsync_leaves_the_header_unpatched(tmp_path):
    disk = RecordingDisk(fail_on="fsync")
    channel = BufferedLogChannel.create(disk, str(tmp_path), 3)
    channel.add_entry(1, make_entry(1, 0))
    with pytest.raises(IOFailure):
        channel.finalize()
    data = open(channel.path, "rb").read()
    assert data[8:20] == bytes(12)
    assert ("write", "3.log", 8, 12) not in disk.events


def test_entry_of_another_ledger_is_a_programmer_error(tmp_path):
    channel = BufferedLogChannel.create(OsDisk(), str(tmp_path), 3)
    with pytest.raises(AssertionError):
        channel.add_entry(2, make_entry(1, 0))
    with pytest.raises(AssertionError):
        channel.add_entry(1, struct.pack(">q", 1) + b"short")
    channel.close()


def test_synced_bytes_far_behind_the_end_leave_the_page_cache(tmp_path):
    # entrylog_cache_keep_bytes: after a sync, bytes more than the window behind the end
    # are dropped (whole MiB steps); the recent window stays cached for catching-up
    # readers, and every byte still reads back.
    import mmap

    from entrylog.writer import CACHE_DROP_STEP_BYTES
    from tests.support.page_cache import resident_pages

    keep = 2 << 20
    channel = BufferedLogChannel.create(OsDisk(), str(tmp_path), 1, cache_keep_bytes=keep)
    entries = [make_entry(3, entry_id, bytes([entry_id % 251]) * 2000) for entry_id in range(3000)]  # ~6 MiB
    locations = [channel.add_entry(3, entry) for entry in entries[:1500]]
    channel.flush_and_sync()
    locations += [channel.add_entry(3, entry) for entry in entries[1500:]]
    channel.flush_and_sync()
    end = (channel.synced_position - keep) // CACHE_DROP_STEP_BYTES * CACHE_DROP_STEP_BYTES
    assert channel.dropped_end == end >= 3 << 20
    resident = resident_pages(channel.path)
    page = mmap.PAGESIZE
    assert not any(resident[:end // page])
    assert all(resident[-(-(channel.synced_position - keep) // page):])
    channel.finalize()
    with open(channel.path, "rb") as handle:
        data = handle.read()
    for entry, location in zip(entries, locations):
        position = location & 0xFFFFFFFF
        assert data[position:position + len(entry)] == entry


def test_without_a_window_every_page_stays_cached(tmp_path):
    from tests.support.page_cache import resident_pages

    channel = BufferedLogChannel.create(OsDisk(), str(tmp_path), 1)  # BookKeeper's way
    for entry_id in range(2000):
        channel.add_entry(3, make_entry(3, entry_id, bytes([entry_id % 251]) * 2000))
    channel.flush_and_sync()
    assert channel.dropped_end == 0 and all(resident_pages(channel.path))
    channel.finalize()
