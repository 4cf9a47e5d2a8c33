"""FaultyDisk: the real filesystem with injected I/O errors and sequence points, by operation.

``disk.fail("fdatasync", "*.txn")`` makes every later fdatasync of a journal raise
``OSError(EIO)`` (``after=n`` lets n matching calls through first, ``times`` bounds how many
fail, ``error`` picks the errno, e.g. ENOSPC). ``disk.hold("fdatasync", "*.txn")`` returns a
``Hold``: the next matching call blocks in its thread until ``release()`` (or
``release(error)``, which makes that call fail), and ``reached`` is set while it waits, so a
test can act at an exact point of the write path without sleeping (docs/design.md §9.3).
``calls`` records every operation with its path, so a test can show a failed fsync was never
retried (A5). Operations: write, fdatasync, fsync (files), create, rename, unlink, fsync_dir.

Thread-safety: rules and calls are guarded by a lock; a hold blocks only the calling thread.
"""

from __future__ import annotations

import dataclasses
import errno as errno_mod
import fnmatch
import os
import threading

from bookie.disk import OsDisk, OsFile

HOLD_TIMEOUT_S = 60.0


@dataclasses.dataclass
class Rule:
    op: str
    pattern: str
    error: int = errno_mod.EIO
    after: int = 0
    times: int | None = None
    seen: int = 0
    failed: int = 0

    def matches(self, op: str, path: str) -> bool:
        return op == self.op and fnmatch.fnmatch(path, self.pattern)

    def fires(self) -> bool:
        self.seen += 1
        if self.seen <= self.after or (self.times is not None and self.failed >= self.times):
            return False
        self.failed += 1
        return True


class Hold:
    """A sequence point on the write path: the matching call waits for ``release``."""

    def __init__(self, op: str, pattern: str) -> None:
        self.op = op
        self.pattern = pattern
        self.reached = threading.Event()
        self._released = threading.Event()
        self._error: int | None = None
        self.used = False

    def release(self, error: int | None = None) -> None:
        self._error = error
        self._released.set()

    def wait_here(self, path: str) -> None:
        self.reached.set()
        if not self._released.wait(HOLD_TIMEOUT_S):
            raise OSError(errno_mod.ETIMEDOUT, f"test hold on {self.op} {path} never released")
        if self._error is not None:
            raise OSError(self._error, os.strerror(self._error), path)


class FaultyFile(OsFile):
    __slots__ = ("disk",)

    def write_at(self, offset: int, data) -> None:
        self.disk.event("write", self.path)
        super().write_at(offset, data)

    def fdatasync(self) -> None:
        self.disk.event("fdatasync", self.path)
        super().fdatasync()

    def fsync(self) -> None:
        self.disk.event("fsync", self.path)
        super().fsync()


class FaultyDisk(OsDisk):
    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.holds: list[Hold] = []
        self.calls: list[tuple[str, str]] = []
        self.injected: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()

    def fail(self, op: str, pattern: str = "*", error: int = errno_mod.EIO, after: int = 0,
             times: int | None = None) -> Rule:
        rule = Rule(op, pattern, error, after, times)
        with self._lock:
            self.rules.append(rule)
        return rule

    def hold(self, op: str, pattern: str = "*") -> Hold:
        hold = Hold(op, pattern)
        with self._lock:
            self.holds.append(hold)
        return hold

    def event(self, op: str, path: str) -> None:
        """Record the call; block on a matching hold; raise if a rule fires."""
        with self._lock:
            self.calls.append((op, path))
            hold = next((h for h in self.holds if not h.used and h.op == op
                         and fnmatch.fnmatch(path, h.pattern)), None)
            if hold is not None:
                hold.used = True
            error = next((r.error for r in self.rules if r.matches(op, path) and r.fires()),
                         None)
            if error is not None:
                self.injected.append((op, path, error))
        if hold is not None:
            hold.wait_here(path)
        if error is not None:
            raise OSError(error, f"injected: {os.strerror(error)}", path)

    def count(self, op: str, pattern: str = "*") -> int:
        with self._lock:
            return sum(1 for o, p in self.calls if o == op and fnmatch.fnmatch(p, pattern))

    def _wrap(self, handle: OsFile) -> FaultyFile:
        wrapped = FaultyFile(handle.path, handle.fd)
        wrapped.disk = self
        return wrapped

    def create(self, path: str) -> FaultyFile:
        self.event("create", path)
        return self._wrap(super().create(path))

    def open(self, path: str, writable: bool = False) -> FaultyFile:
        return self._wrap(super().open(path, writable))

    def rename(self, src: str, dst: str) -> None:
        self.event("rename", dst)
        super().rename(src, dst)

    def unlink(self, path: str) -> None:
        self.event("unlink", path)
        super().unlink(path)

    def fsync_dir(self, path: str) -> None:
        self.event("fsync_dir", path)
        super().fsync_dir(path)
