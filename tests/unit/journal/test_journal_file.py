"""journal/file.py: creation, zero-filled preallocation, appends (docs/formats.md §3.6, §3.8)."""

from __future__ import annotations

import os

import pytest

from bookie.disk import OsDisk
from journal.file import JournalChannel
from journal.format import encode_header
from tests.support.page_cache import resident_pages

CHUNK = 64 * 1024


class RecordingDisk(OsDisk):
    """OsDisk that logs the durability-relevant calls in order."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def create(self, path):
        self.calls.append(("create", os.path.basename(path)))
        return RecordingFile(super().create(path), self.calls)

    def fsync_dir(self, path):
        self.calls.append(("fsync_dir", path))
        super().fsync_dir(path)

    def rename(self, src, dst):
        self.calls.append(("rename", os.path.basename(src), os.path.basename(dst)))
        super().rename(src, dst)


class RecordingFile:
    def __init__(self, handle, calls) -> None:
        self._handle = handle
        self._calls = calls
        self.path = handle.path

    def write_at(self, offset, data):
        self._calls.append(("write", offset, len(data)))
        self._handle.write_at(offset, data)

    def fsync(self):
        self._calls.append(("fsync",))
        self._handle.fsync()

    def fdatasync(self):
        self._calls.append(("fdatasync",))
        self._handle.fdatasync()

    def __getattr__(self, name):
        return getattr(self._handle, name)


def read(path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def test_create_writes_a_v6_header_and_zeros_to_the_chunk_boundary(tmp_path):
    channel = JournalChannel.create(OsDisk(), str(tmp_path), 0x1A2B, prealloc_bytes=CHUNK)
    try:
        assert channel.path == str(tmp_path / "1a2b.txn")
        assert channel.journal_id == 0x1A2B and channel.position == 512
        data = read(channel.path)
        assert len(data) == CHUNK
        assert data[:512] == encode_header(6)
        assert data[512:] == bytes(CHUNK - 512)
    finally:
        channel.close()


def test_preallocation_is_real_zeros_not_a_sparse_file(tmp_path):
    channel = JournalChannel.create(OsDisk(), str(tmp_path), 1, prealloc_bytes=1 << 20)
    channel.close()
    stat = os.stat(channel.path)
    assert stat.st_size == 1 << 20
    assert stat.st_blocks * 512 >= stat.st_size  # every block allocated


def test_create_makes_the_name_durable_before_returning(tmp_path):
    disk = RecordingDisk()
    channel = JournalChannel.create(disk, str(tmp_path), 7, prealloc_bytes=CHUNK)
    channel.close()
    names = [call[0] for call in disk.calls]
    assert disk.calls[0] == ("create", "7.txn.tmp")  # no reader takes a .tmp name
    assert disk.calls[1] == ("write", 0, 512)
    # header and zeros written and fsynced under the temp name, then renamed, then the
    # directory fsynced (docs/design.md §1.6): the journal's name only ever names a synced header
    assert names[-3:] == ["fsync", "rename", "fsync_dir"]
    assert disk.calls[-2] == ("rename", "7.txn.tmp", "7.txn")
    assert set(names[1:-3]) == {"write"}
    assert sum(call[2] for call in disk.calls if call[0] == "write") == CHUNK
    assert channel.path == str(tmp_path / "7.txn")
    assert sorted(os.listdir(tmp_path)) == ["7.txn"]


def test_create_replaces_a_temp_file_a_crash_left_behind(tmp_path):
    (tmp_path / "7.txn.tmp").write_bytes(b"\x13garbage of a creation cut short")
    JournalChannel.create(OsDisk(), str(tmp_path), 7, prealloc_bytes=CHUNK).close()
    assert sorted(os.listdir(tmp_path)) == ["7.txn"]
    assert read(str(tmp_path / "7.txn"))[:8] == b"BKLG\x00\x00\x00\x06"


def test_create_refuses_an_existing_id(tmp_path):
    JournalChannel.create(OsDisk(), str(tmp_path), 3, prealloc_bytes=CHUNK).close()
    with pytest.raises(FileExistsError):
        JournalChannel.create(OsDisk(), str(tmp_path), 3, prealloc_bytes=CHUNK)


def test_append_within_the_chunk_keeps_the_size(tmp_path):
    channel = JournalChannel.create(OsDisk(), str(tmp_path), 1, prealloc_bytes=CHUNK)
    channel.append(b"a" * 1000)
    channel.append(memoryview(b"b" * 24))
    channel.fdatasync()
    channel.close()
    data = read(channel.path)
    assert channel.position == 1536 and len(data) == CHUNK
    assert data[512:1536] == b"a" * 1000 + b"b" * 24
    assert data[1536:] == bytes(CHUNK - 1536)


def test_append_past_the_end_extends_by_whole_zero_chunks(tmp_path):
    disk = RecordingDisk()
    channel = JournalChannel.create(disk, str(tmp_path), 1, prealloc_bytes=CHUNK)
    channel.append(b"x" * (CHUNK - 600))
    assert os.path.getsize(channel.path) == CHUNK
    channel.append(b"y" * 100)  # crosses the boundary
    assert os.path.getsize(channel.path) == 2 * CHUNK
    channel.append(b"z" * (3 * CHUNK))  # more than a chunk at once
    channel.close()
    size = os.path.getsize(channel.path)
    assert size == 5 * CHUNK and size >= channel.position
    data = read(channel.path)
    assert data[channel.position:] == bytes(size - channel.position)  # F1
    assert data[512 + CHUNK - 600:512 + CHUNK - 500] == b"y" * 100
    # zeros are written before the data that lands in them
    writes = [call for call in disk.calls if call[0] == "write"]
    y_write = writes.index(("write", 512 + CHUNK - 600, 100))
    assert writes[y_write - 1][1] < 2 * CHUNK and writes[y_write - 1][1] >= CHUNK


def test_chunk_is_rounded_down_to_the_alignment(tmp_path):
    channel = JournalChannel.create(OsDisk(), str(tmp_path), 1, prealloc_bytes=5000,
                                    alignment=1024)
    assert channel.chunk_bytes == 4096 and os.path.getsize(channel.path) == 4096
    channel.append(b"q" * 4000)
    channel.close()
    assert os.path.getsize(channel.path) == 8192


def test_fdatasync_reaches_the_file(tmp_path):
    disk = RecordingDisk()
    channel = JournalChannel.create(disk, str(tmp_path), 1, prealloc_bytes=CHUNK)
    channel.append(b"r" * 10)
    channel.fdatasync()
    channel.close()
    assert disk.calls[-2:] == [("write", 512, 10), ("fdatasync",)]


def test_synced_bytes_leave_the_page_cache_but_the_tail_and_zeros_ahead_stay(tmp_path):
    # BookKeeper's journalRemoveFromPageCache: nothing reads a synced journal while the
    # bookie runs; its pages are dropped (and reused for the next writes), all but a lag
    # behind the position: the page the next group starts in is never read back from disk.
    from journal.file import DROP_LAG_BYTES, DROP_STEP_BYTES
    import mmap

    channel = JournalChannel.create(OsDisk(), str(tmp_path), 1, prealloc_bytes=16 << 20)
    # The same writes, never dropped: the kernel may evict clean pages of either file under
    # memory pressure (a flake seen once beside BookKeeper's JVMs), so the tail is held to
    # what the kernel kept of this one, not to "every page".
    control = JournalChannel.create(OsDisk(), str(tmp_path), 2, prealloc_bytes=16 << 20)
    try:
        group = os.urandom(256 * 1024)
        for _ in range(20):  # 5 MiB, synced group by group as the journal thread does
            for file in (channel, control):
                file.append(group)
                file.fdatasync()
            channel.drop_synced()
        position = channel.position
        expected_end = (position - DROP_LAG_BYTES) // DROP_STEP_BYTES * DROP_STEP_BYTES
        assert channel.dropped_end == expected_end >= 3 << 20
        page = mmap.PAGESIZE
        resident, kept = resident_pages(channel.path), resident_pages(control.path)
        assert not any(resident[:expected_end // page])
        tail = slice((position - DROP_LAG_BYTES) // page + 1, None)  # the tail and zeros
        assert sum(resident[tail]) >= sum(kept[tail]) - len(kept[tail]) // 10
    finally:
        channel.close()
        control.close()
    # dropping changes no byte: everything written is still there, zeros after it
    data = read(channel.path)
    assert data[512:position] == group * 20 and data[position:] == bytes(len(data) - position)
