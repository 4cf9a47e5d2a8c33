"""Helpers for the entry log tests: entries whose digests are cross-checked with crcmod.

Not a test module. Imported as ``tests.unit.entrylog.entrylog_support``.
"""

from __future__ import annotations

import os
import struct

import crcmod.predefined

from bookie.disk import OsDisk
from bookie.entry import ENTRY_HEADER, DigestType, frame_entry
from entrylog.writer import BufferedLogChannel

CRC32C_REFERENCE = crcmod.predefined.mkCrcFun("crc-32c")
CRC32_REFERENCE = crcmod.predefined.mkCrcFun("crc-32")


def make_entry(ledger_id: int, entry_id: int, payload: bytes = b"hello",
               digest_type: DigestType = DigestType.CRC32C, lac: int = -1) -> bytes:
    """A framed entry; its CRC is recomputed with crcmod and must agree."""
    entry = frame_entry(ledger_id, entry_id, lac, len(payload), payload, digest_type)
    covered = ENTRY_HEADER.pack(ledger_id, entry_id, lac, len(payload)) + payload
    if digest_type is DigestType.CRC32C:
        assert entry[32:36] == struct.pack(">I", CRC32C_REFERENCE(covered))
    elif digest_type is DigestType.CRC32:
        assert entry[32:40] == struct.pack(">Q", CRC32_REFERENCE(covered))
    return entry


def write_log(ledger_dir, log_id: int, records, finalize: bool = True, **kwargs):
    """Write ``records`` [(ledger_id, entry)] through BufferedLogChannel.

    Returns (path, locations, channel); the channel is finalized or flushed and closed.
    """
    channel = BufferedLogChannel.create(OsDisk(), str(ledger_dir), log_id, **kwargs)
    locations = [channel.add_entry(ledger_id, entry) for ledger_id, entry in records]
    if finalize:
        channel.finalize()
    else:
        channel.flush_and_sync()
        channel.close()
    return os.path.join(str(ledger_dir), f"{log_id:x}.log"), locations, channel


def expected_totals(records) -> dict[int, int]:
    totals: dict[int, int] = {}
    for ledger_id, entry in records:
        totals[ledger_id] = totals.get(ledger_id, 0) + len(entry) + 4
    return totals


class RecordingFile:
    """A DiskFile that logs every write and sync into its disk's ``events``."""

    def __init__(self, disk: "RecordingDisk", inner) -> None:
        self._disk = disk
        self._inner = inner
        self.path = inner.path

    def write_at(self, offset, data):
        self._disk.events.append(("write", os.path.basename(self.path), offset, len(data)))
        self._disk.maybe_fail("write")
        self._inner.write_at(offset, data)

    def read_at(self, offset, size):
        return self._inner.read_at(offset, size)

    def size(self):
        return self._inner.size()

    def fdatasync(self):
        self._disk.events.append(("fdatasync", os.path.basename(self.path)))
        self._disk.maybe_fail("fdatasync")
        self._inner.fdatasync()

    def fsync(self):
        self._disk.events.append(("fsync", os.path.basename(self.path)))
        self._disk.maybe_fail("fsync")
        self._inner.fsync()

    def close(self):
        self._inner.close()


class RecordingDisk:
    """OsDisk that records file creations, writes, syncs, renames and unlinks, in order.

    ``fail_on`` names an operation ("write", "fsync", "fdatasync", "rename", "fsync_dir")
    that raises OSError(EIO) from its ``fail_after``-th call on (0 = the first).
    """

    def __init__(self, fail_on: str | None = None, fail_after: int = 0) -> None:
        self._os = OsDisk()
        self.events: list[tuple] = []
        self.fail_on = fail_on
        self.fail_after = fail_after
        self.calls: dict[str, int] = {}

    def maybe_fail(self, operation: str) -> None:
        count = self.calls.get(operation, 0)
        self.calls[operation] = count + 1
        if operation == self.fail_on and count >= self.fail_after:
            raise OSError(5, f"injected {operation} failure")

    def create(self, path):
        self.events.append(("create", os.path.basename(path)))
        return RecordingFile(self, self._os.create(path))

    def open(self, path, writable=False):
        return RecordingFile(self, self._os.open(path, writable))

    def exists(self, path):
        return self._os.exists(path)

    def listdir(self, path):
        return self._os.listdir(path)

    def makedirs(self, path):
        self._os.makedirs(path)

    def unlink(self, path):
        self.events.append(("unlink", os.path.basename(path)))
        self._os.unlink(path)

    def rename(self, src, dst):
        self.events.append(("rename", os.path.basename(src), os.path.basename(dst)))
        self.maybe_fail("rename")
        self._os.rename(src, dst)

    def fsync_dir(self, path):
        self.events.append(("fsync_dir",))
        self.maybe_fail("fsync_dir")
        self._os.fsync_dir(path)

    def file_size(self, path):
        return self._os.file_size(path)

    def free_bytes(self, path):
        return self._os.free_bytes(path)
