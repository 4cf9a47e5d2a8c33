"""entrylog/log_ids.py: lastId-based allocation (docs/formats.md §5.7)."""

from __future__ import annotations

import pytest

from bookie.disk import OsDisk
from bookie.errors import IOFailure
from entrylog.log_ids import LogIdAllocator
from tests.unit.entrylog.entrylog_support import RecordingDisk


def allocator(*dirs, disk=None) -> LogIdAllocator:
    return LogIdAllocator(disk or OsDisk(), [str(d) for d in dirs])


def test_first_id_in_an_empty_dir_is_0(tmp_path):
    ids = allocator(tmp_path)
    assert ids.last_id == -1
    assert ids.allocate() == 0
    assert (tmp_path / "lastId").read_bytes() == b"0\n"
    assert ids.allocate() == 1
    assert (tmp_path / "lastId").read_bytes() == b"1\n"


def test_last_id_is_the_last_allocated_not_the_next(tmp_path):
    (tmp_path / "lastId").write_bytes(b"2a\n")
    assert allocator(tmp_path).allocate() == 0x2B
    assert (tmp_path / "lastId").read_bytes() == b"2b\n"


def test_uppercase_last_id_is_read(tmp_path):
    (tmp_path / "lastId").write_bytes(b"2A")
    assert allocator(tmp_path).allocate() == 0x2B


@pytest.mark.parametrize("content", [b"", b"0\n", b"zz\n", b"\xff\n", b"-5\n"])
def test_unusable_last_id_falls_back_to_the_largest_log(tmp_path, content):
    (tmp_path / "lastId").write_bytes(content)
    for name in ("3.log", "10.log", "ff.txn", "1f.log.torn-1024", "VERSION"):
        (tmp_path / name).write_bytes(b"")
    assert allocator(tmp_path).allocate() == 0x11


def test_existing_logs_and_compacting_files_are_skipped(tmp_path):
    (tmp_path / "lastId").write_bytes(b"2\n")
    for name in ("3.log", "4.log.compacting", "6.log"):
        (tmp_path / name).write_bytes(b"")
    ids = allocator(tmp_path)
    assert ids.allocate() == 5
    assert ids.allocate() == 7


def test_startup_takes_the_maximum_over_dirs_and_writes_every_dir(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "lastId").write_bytes(b"5\n")
    (second / "9.log").write_bytes(b"")
    ids = allocator(first, second)
    assert ids.last_id == 9
    assert ids.allocate() == 10
    assert (first / "lastId").read_bytes() == (second / "lastId").read_bytes() == b"a\n"


def test_last_id_is_written_atomically_and_durably(tmp_path):
    # LI1: temp file, fsync, rename, dir fsync, all before the caller creates the log.
    disk = RecordingDisk()
    ids = allocator(tmp_path, disk=disk)
    disk.events.clear()
    ids.allocate()
    assert disk.events == [("create", "lastId.tmp"), ("write", "lastId.tmp", 0, 2),
                           ("fsync", "lastId.tmp"), ("rename", "lastId.tmp", "lastId"),
                           ("fsync_dir",)]


def test_stale_tmp_is_deleted_at_startup(tmp_path):
    (tmp_path / "lastId").write_bytes(b"4\n")
    (tmp_path / "lastId.tmp").write_bytes(b"9")
    ids = allocator(tmp_path)
    assert not (tmp_path / "lastId.tmp").exists()
    assert ids.allocate() == 5


def test_ids_never_wrap(tmp_path):
    # LI2 and docs/formats.md §9.7: BookKeeper wraps to 0; the project goes read-only.
    (tmp_path / "lastId").write_bytes(b"7ffffffe\n")
    ids = allocator(tmp_path)
    assert ids.allocate() == 2**31 - 1
    with pytest.raises(IOFailure, match="log ids exhausted"):
        ids.allocate()
    assert (tmp_path / "lastId").read_bytes() == b"7fffffff\n"


def test_exhausted_when_only_taken_ids_remain(tmp_path):
    (tmp_path / "lastId").write_bytes(b"7ffffffe\n")
    (tmp_path / "7fffffff.log").write_bytes(b"")
    with pytest.raises(IOFailure, match="log ids exhausted"):
        allocator(tmp_path).allocate()


def test_failed_write_never_hands_the_id_out_again(tmp_path):
    disk = RecordingDisk(fail_on="rename")
    ids = allocator(tmp_path, disk=disk)
    with pytest.raises(IOFailure, match="injected"):
        ids.allocate()
    disk.fail_on = None
    assert ids.allocate() == 1
