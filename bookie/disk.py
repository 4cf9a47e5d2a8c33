"""The disk seam: every byte the bookie writes, syncs, renames or reads goes through a ``Disk``.

``OsDisk`` is the real filesystem. Tests substitute ``SimDisk`` (power loss: unsynced writes
kept, dropped or garbled) and ``CrashingDisk`` (SIGKILL at the k-th fsync or rename), so that
crash points are I/O events, never hooks in production code (docs/design.md §9.4). This is the only
module that calls ``os.fsync``, ``os.fdatasync``, ``os.rename`` or ``os.replace`` (§5.5).
RocksDB is outside the seam.

Assumptions (docs/design.md §2.1), cited by number in callers:
    A1. No atomic sectors: a crash may leave any prefix of a write.
    A2. The page cache survives kill -9, not power loss.
    A3. A successful fdatasync means stable media.
    A4. A dir fsync persists create and rename; a rename is atomic.
    A5. After a write or fsync error the file's state is unknown: never retry the fsync.

Thread-safety: a ``DiskFile`` is used by one thread at a time (its owner's); ``OsDisk`` itself
holds no state and may be shared.
"""

from __future__ import annotations

import errno
import os
from typing import Protocol


class DiskFile(Protocol):
    path: str

    def write_at(self, offset: int, data) -> None:
        """Write all of ``data`` at ``offset`` (pwrite). Raises OSError on failure."""

    def read_at(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset``; fewer only at the end of the file."""

    def size(self) -> int:
        """The file's current length in bytes."""

    def fdatasync(self) -> None: ...

    def fsync(self) -> None: ...

    def drop_cache(self, offset: int, length: int) -> None:
        """A hint: the page cache may forget this range, already synced (see OsFile)."""

    def close(self) -> None: ...


class Disk(Protocol):
    def create(self, path: str) -> DiskFile:
        """Create a new file for reading and writing; FileExistsError if it exists."""

    def open(self, path: str, writable: bool = False) -> DiskFile: ...

    def exists(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]: ...

    def makedirs(self, path: str) -> None: ...

    def unlink(self, path: str) -> None: ...

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace ``dst`` with ``src`` (A4); durable only after fsync_dir."""

    def fsync_dir(self, path: str) -> None: ...

    def file_size(self, path: str) -> int: ...

    def free_bytes(self, path: str) -> int: ...

    def usage(self, path: str) -> tuple[int, int]:
        """(total, free) bytes of the filesystem holding ``path``."""


class OsFile:
    """A file on the real filesystem, addressed by offset (no shared file position)."""

    __slots__ = ("path", "fd")

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd

    def write_at(self, offset: int, data) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self.fd, view, offset)
            if written <= 0:  # pwrite never returns 0 for a non-empty buffer on Linux
                raise OSError(errno.EIO, f"short write to {self.path} at {offset}")
            view = view[written:]
            offset += written

    def read_at(self, offset: int, size: int) -> bytes:
        data = os.pread(self.fd, size, offset)
        if len(data) == size or not data:
            return data
        parts = [data]  # a short read is rare (signals); loop until size or EOF
        got = len(data)
        while got < size:
            more = os.pread(self.fd, size - got, offset + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def fdatasync(self) -> None:
        os.fdatasync(self.fd)

    def fsync(self) -> None:
        os.fsync(self.fd)

    def drop_cache(self, offset: int, length: int) -> None:
        """posix_fadvise DONTNEED over a synced range (BookKeeper's
        journalRemoveFromPageCache). Nothing reads a synced journal while the bookie runs:
        its pages would only crowd the cache, and pages freed are reused by the next writes
        (on this machine's VM, filling a page never touched before costs ~10x more, docs/design.md
        §11). A hint: bytes and durability are unchanged, so a failure is ignored."""
        if length > 0 and hasattr(os, "posix_fadvise"):
            try:
                os.posix_fadvise(self.fd, offset, length, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __repr__(self) -> str:
        return f"OsFile({self.path!r})"


class OsDisk:
    """The real filesystem."""

    def create(self, path: str) -> OsFile:
        return OsFile(path, os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))

    def open(self, path: str, writable: bool = False) -> OsFile:
        flags = (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC
        return OsFile(path, os.open(path, flags))

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def file_size(self, path: str) -> int:
        return os.stat(path).st_size

    def free_bytes(self, path: str) -> int:
        st = os.statvfs(path)
        return st.f_bavail * st.f_frsize

    def usage(self, path: str) -> tuple[int, int]:
        st = os.statvfs(path)
        return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def will_need(handle: DiskFile, start: int, length: int) -> None:
    """Ask the kernel to start reading a range of an ``OsFile`` (posix_fadvise WILLNEED);
    a no-op for other files (test disks) and where the call is missing. A hint only:
    reading works without it, so its failure is ignored."""
    fd = getattr(handle, "fd", None)
    if fd is None or not hasattr(os, "posix_fadvise"):
        return
    try:
        os.posix_fadvise(fd, start, length, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass


def atomic_replace(disk: Disk, path: str, data: bytes) -> None:
    """Make ``path`` hold ``data``, old or new after any crash, never a mix.

    Crash story (A1, A4):
        1. write data to <path>.tmp      ! crash: a partial .tmp, ignored and deleted at start
        2. fsync <path>.tmp              ! crash: same
        3. rename over <path>            ! crash: old or new name, both whole (A4)
        4. fsync the directory           only now may anything rely on the new contents
    """
    tmp = path + ".tmp"
    if disk.exists(tmp):
        disk.unlink(tmp)
    handle = disk.create(tmp)
    try:
        handle.write_at(0, data)
        handle.fsync()
    finally:
        handle.close()
    disk.rename(tmp, path)
    disk.fsync_dir(os.path.dirname(os.path.abspath(path)))


def create_durably(disk: Disk, path: str) -> DiskFile:
    """Create ``path`` and fsync its directory, so the name survives power loss (§1.6)."""
    handle = disk.create(path)
    disk.fsync_dir(os.path.dirname(os.path.abspath(path)))
    return handle


def makedirs_durably(disk: Disk, path: str) -> None:
    """Create ``path`` and its missing parents, fsyncing each new directory's parent (§1.6).

    Without it a power loss may forget a directory made at first start, and every journal
    and log fsynced inside it with it (found by the power-loss sweep, docs/design.md §2.2).
    """
    missing = []
    head = os.path.abspath(path)
    while not disk.exists(head):
        missing.append(head)
        head = os.path.dirname(head)
    disk.makedirs(path)
    for created in reversed(missing):
        disk.fsync_dir(os.path.dirname(created))
