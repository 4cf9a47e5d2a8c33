"""CrashingDisk: the real filesystem, but SIGKILL at the k-th sync or rename matching a glob.

Crash model "kill -9" of docs/design.md §2.2: completed writes stay in the page cache (A2), the
process dies just before the k-th matching durability event, so that event never happens.
Crash points are I/O events, never hooks in production code (docs/design.md §9.4).
"""

from __future__ import annotations

import fnmatch
import os
import signal

from bookie.disk import OsDisk, OsFile

EVENTS = ("fsync", "fdatasync", "rename", "fsync_dir")
#: Every kind a CrashingDisk can crash at: unlinks too, for crash stories whose step is a
#: deletion (compaction's old log); not in the default, which the older sweeps count by.
ALL_EVENTS = EVENTS + ("unlink",)


class _Counter:
    def __init__(self, crash_at: int, pattern: str, kinds: tuple[str, ...]) -> None:
        self.crash_at = crash_at
        self.pattern = pattern
        self.kinds = kinds
        self.count = 0

    def event(self, kind: str, path: str) -> None:
        if kind not in self.kinds or not fnmatch.fnmatch(path, self.pattern):
            return
        self.count += 1
        if self.count == self.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)


class CrashingFile(OsFile):
    __slots__ = ("counter",)

    def fdatasync(self) -> None:
        self.counter.event("fdatasync", self.path)
        super().fdatasync()

    def fsync(self) -> None:
        self.counter.event("fsync", self.path)
        super().fsync()


class CrashingDisk(OsDisk):
    def __init__(self, crash_at: int, pattern: str = "*", kinds: tuple[str, ...] = EVENTS):
        self.counter = _Counter(crash_at, pattern, kinds)

    def _wrap(self, handle: OsFile) -> CrashingFile:
        wrapped = CrashingFile(handle.path, handle.fd)
        wrapped.counter = self.counter
        return wrapped

    def create(self, path: str) -> CrashingFile:
        return self._wrap(super().create(path))

    def open(self, path: str, writable: bool = False) -> CrashingFile:
        return self._wrap(super().open(path, writable))

    def rename(self, src: str, dst: str) -> None:
        self.counter.event("rename", dst)
        super().rename(src, dst)

    def fsync_dir(self, path: str) -> None:
        self.counter.event("fsync_dir", path)
        super().fsync_dir(path)

    def unlink(self, path: str) -> None:
        self.counter.event("unlink", path)
        super().unlink(path)
