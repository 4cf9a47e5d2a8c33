"""SimDisk: an in-memory ``Disk`` that can lose power (crash model "power loss", docs/design.md §2.2).

After SQLite's ``test6.c`` crash VFS and LevelDB's fault-injection env. Every file keeps the
content reads see (the page cache) and, apart, its *durable* content as of its last fsync or
fdatasync, with the list of writes made since. Every directory keeps its entries and, apart,
its durable entries as of its last dir fsync, with the creates, renames and unlinks made since.

``crash_at=k`` makes the k-th matching sync (fsync, fdatasync, dir fsync) or rename raise
``SimulatedCrash`` instead of happening (so it never takes effect, as CrashingDisk's SIGKILL);
from then on every operation raises: the machine is off. ``after_power_loss(seed)`` returns the
disk as it comes back up:
  * each file holds its durable content with each unsynced write, in order, by seed: kept,
    dropped, cut to a prefix, replaced by garbage or by zeros (A1: an unsynced range may read
    back as old bytes, zeros or garbage);
  * each directory holds its durable entries; by seed either none or an in-order prefix of
    the unsynced creates, renames and unlinks survives (a journaling file system commits
    metadata in order, and may commit it before any fsync asks). A directory whose own entry
    is lost takes its whole subtree with it.
What an fsync promised (A3) and a dir fsync persisted (A4) always survives; nothing else is
promised. RocksDB is outside the seam: whatever uses SimDisk keeps RocksDB on a real dir.

Thread-safety: one lock serializes every operation (the bookie's journal, checkpoint and read
threads share a disk).
"""

from __future__ import annotations

import dataclasses
import errno
import fnmatch
import os
import random
import threading

SYNC_KINDS = ("fsync", "fdatasync", "fsync_dir")
EVENT_KINDS = SYNC_KINDS + ("rename",)
#: How an unsynced write comes back after power loss, with its weight.
WRITE_FATES = (("kept", 35), ("dropped", 35), ("prefix", 10), ("garbage", 10), ("zeros", 10))
TOTAL_BYTES = 1 << 40


class SimulatedCrash(OSError):
    """The simulated machine lost power; every later operation on its disk fails."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EIO, message)


@dataclasses.dataclass(eq=False)
class _File:
    data: bytearray = dataclasses.field(default_factory=bytearray)      # what reads see
    durable: bytearray = dataclasses.field(default_factory=bytearray)   # as of the last sync
    pending: list = dataclasses.field(default_factory=list)             # (offset, bytes)


@dataclasses.dataclass(eq=False)
class _Dir:
    entries: dict = dataclasses.field(default_factory=dict)   # name -> _File | _Dir
    durable: dict = dataclasses.field(default_factory=dict)   # as of the last dir fsync
    pending: list = dataclasses.field(default_factory=list)   # (name, node or None)

    def put(self, name: str, node) -> None:
        if node is None:
            del self.entries[name]
        else:
            self.entries[name] = node
        self.pending.append((name, node))


@dataclasses.dataclass(frozen=True)
class Event:
    number: int
    kind: str
    path: str


class SimFile:
    """An open file on a SimDisk (the DiskFile protocol)."""

    __slots__ = ("path", "_disk", "_node")

    def __init__(self, disk: "SimDisk", path: str, node: _File) -> None:
        self.path = path
        self._disk = disk
        self._node = node

    def write_at(self, offset: int, data) -> None:
        data = bytes(data)
        with self._disk.lock:
            self._disk.check_alive()
            node = self._node
            if len(node.data) < offset:
                node.data.extend(bytes(offset - len(node.data)))
            node.data[offset:offset + len(data)] = data
            node.pending.append((offset, data))

    def read_at(self, offset: int, size: int) -> bytes:
        with self._disk.lock:
            self._disk.check_alive()
            return bytes(self._node.data[offset:offset + size])

    def size(self) -> int:
        with self._disk.lock:
            self._disk.check_alive()
            return len(self._node.data)

    def fdatasync(self) -> None:
        self._sync("fdatasync")

    def fsync(self) -> None:
        self._sync("fsync")

    def _sync(self, kind: str) -> None:
        with self._disk.lock:
            self._disk.event(kind, self.path)
            self._node.durable = bytearray(self._node.data)
            self._node.pending.clear()

    def drop_cache(self, offset: int, length: int) -> None:
        pass  # a hint about the page cache, which the simulation has no model of

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"SimFile({self.path!r})"


class SimDisk:
    """The Disk protocol in memory, under ``root`` (a directory that exists durably)."""

    def __init__(self, root: str, crash_at: int | None = None, pattern: str = "*",
                 kinds: tuple[str, ...] = EVENT_KINDS, _root_node: _Dir | None = None) -> None:
        self.root = os.path.abspath(root)
        self.crash_at = crash_at
        self.pattern = pattern
        self.kinds = kinds
        self.lock = threading.RLock()
        self.events: list[Event] = []      # every matching event that happened, in order
        self.crashed_at: Event | None = None
        self._tree = _root_node or _Dir()

    # -- crash points ---------------------------------------------------------------------

    def check_alive(self) -> None:
        if self.crashed_at is not None:
            raise SimulatedCrash(f"power is off since {self.crashed_at}")

    def event(self, kind: str, path: str) -> None:
        """Count a sync or rename; the ``crash_at``-th matching one crashes instead."""
        self.check_alive()
        if kind not in self.kinds or not fnmatch.fnmatch(path, self.pattern):
            return
        event = Event(len(self.events) + 1, kind, path)
        if event.number == self.crash_at:
            self.crashed_at = event
            raise SimulatedCrash(f"power lost at {event}")
        self.events.append(event)

    @property
    def reached_crash_point(self) -> bool:
        return self.crashed_at is not None and self.crashed_at.kind != "end"

    def crash_now(self) -> None:
        """Lose power now (the end of a workload that never reached its crash point)."""
        with self.lock:
            if self.crashed_at is None:
                self.crashed_at = Event(len(self.events) + 1, "end", "")

    # -- paths ------------------------------------------------------------------------------

    def _parts(self, path: str) -> list[str]:
        path = os.path.abspath(path)
        if path == self.root:
            return []
        assert path.startswith(self.root + os.sep), f"{path} is outside the SimDisk {self.root}"
        return path[len(self.root) + 1:].split(os.sep)

    def _node(self, path: str):
        node = self._tree
        for part in self._parts(path):
            if not isinstance(node, _Dir) or part not in node.entries:
                return None
            node = node.entries[part]
        return node

    def _parent(self, path: str) -> tuple[_Dir, str]:
        parts = self._parts(path)
        assert parts, "the root has no parent here"
        parent = self._node(os.path.join(self.root, *parts[:-1]))
        if not isinstance(parent, _Dir):
            raise FileNotFoundError(errno.ENOENT, "no such directory", os.path.dirname(path))
        return parent, parts[-1]

    def _file(self, path: str) -> _File:
        node = self._node(path)
        if not isinstance(node, _File):
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return node

    # -- the Disk protocol --------------------------------------------------------------------

    def create(self, path: str) -> SimFile:
        with self.lock:
            self.check_alive()
            parent, name = self._parent(path)
            if name in parent.entries:
                raise FileExistsError(errno.EEXIST, "file exists", path)
            node = _File()
            parent.put(name, node)
            return SimFile(self, path, node)

    def open(self, path: str, writable: bool = False) -> SimFile:
        with self.lock:
            self.check_alive()
            return SimFile(self, path, self._file(path))

    def exists(self, path: str) -> bool:
        with self.lock:
            self.check_alive()
            return self._node(path) is not None

    def listdir(self, path: str) -> list[str]:
        with self.lock:
            self.check_alive()
            node = self._node(path)
            if not isinstance(node, _Dir):
                raise FileNotFoundError(errno.ENOENT, "no such directory", path)
            return sorted(node.entries)

    def makedirs(self, path: str) -> None:
        with self.lock:
            self.check_alive()
            node = self._tree
            for part in self._parts(path):
                child = node.entries.get(part)
                if child is None:
                    child = _Dir()
                    node.put(part, child)
                elif not isinstance(child, _Dir):
                    raise FileExistsError(errno.EEXIST, "a file is in the way", path)
                node = child

    def unlink(self, path: str) -> None:
        with self.lock:
            self.check_alive()
            parent, name = self._parent(path)
            if not isinstance(parent.entries.get(name), _File):
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            parent.put(name, None)

    def rename(self, src: str, dst: str) -> None:
        with self.lock:
            self.event("rename", dst)
            source, src_name = self._parent(src)
            target, dst_name = self._parent(dst)
            node = source.entries.get(src_name)
            if node is None:
                raise FileNotFoundError(errno.ENOENT, "no such file", src)
            source.put(src_name, None)
            target.put(dst_name, node)

    def fsync_dir(self, path: str) -> None:
        with self.lock:
            self.event("fsync_dir", path)
            node = self._node(path)
            if not isinstance(node, _Dir):
                raise FileNotFoundError(errno.ENOENT, "no such directory", path)
            node.durable = dict(node.entries)
            node.pending.clear()

    def file_size(self, path: str) -> int:
        with self.lock:
            self.check_alive()
            return len(self._file(path).data)

    def free_bytes(self, path: str) -> int:
        return TOTAL_BYTES // 2

    def usage(self, path: str) -> tuple[int, int]:
        return TOTAL_BYTES, TOTAL_BYTES // 2

    # -- power loss ---------------------------------------------------------------------------

    def after_power_loss(self, seed: int, fate: str | None = None,
                         dir_changes: bool | None = None) -> "SimDisk":
        """The disk as it comes back after losing power now (module docstring). Tests may
        force one ``fate`` on every unsynced write, and keep (True) or forget (False) every
        unsynced directory change instead of drawing."""
        with self.lock:
            self.crash_now()
            restorer = _Restorer(random.Random(seed), fate, dir_changes)
            return SimDisk(self.root, _root_node=restorer.directory(self._tree))

    def describe(self) -> str:
        return f"crashed at {self.crashed_at}" if self.crashed_at else \
            f"{len(self.events)} events, no crash"


class _Restorer:
    """Builds the post-power-loss tree; each node is restored once (names may share it)."""

    def __init__(self, rng: random.Random, fate: str | None, dir_changes: bool | None) -> None:
        self.rng = rng
        self.done: dict[int, object] = {}
        self.fates = [name for name, _ in WRITE_FATES] if fate is None else [fate]
        self.weights = [weight for _, weight in WRITE_FATES] if fate is None else [1]
        self.dir_changes = dir_changes

    def _dir_changes_kept(self, count: int) -> int:
        if self.dir_changes is not None:
            return count if self.dir_changes else 0
        return self.rng.randint(0, count) if self.rng.random() < 0.5 else 0

    def directory(self, node: _Dir) -> _Dir:
        if id(node) in self.done:
            return self.done[id(node)]
        entries = dict(node.durable)
        if node.pending:
            for name, child in node.pending[:self._dir_changes_kept(len(node.pending))]:
                if child is None:
                    entries.pop(name, None)
                else:
                    entries[name] = child
        restored = _Dir()
        self.done[id(node)] = restored
        for name, child in sorted(entries.items()):
            restored.entries[name] = (self.directory(child) if isinstance(child, _Dir)
                                      else self.file(child))
        restored.durable = dict(restored.entries)
        return restored

    def file(self, node: _File) -> _File:
        if id(node) in self.done:
            return self.done[id(node)]
        data = bytearray(node.durable)
        for offset, written in node.pending:
            fate = self.rng.choices(self.fates, self.weights)[0]
            piece = self._piece(fate, written)
            if piece is None:
                continue
            if len(data) < offset:
                data.extend(bytes(offset - len(data)))
            data[offset:offset + len(piece)] = piece
        restored = _File(data=data, durable=bytearray(data))
        self.done[id(node)] = restored
        return restored

    def _piece(self, fate: str, written: bytes) -> bytes | None:
        if fate == "kept":
            return written
        if fate == "dropped" or not written:
            return None
        if fate == "prefix":  # a torn write: some bytes reached the media, not all
            return written[:self.rng.randrange(1, len(written))] if len(written) > 1 else None
        if fate == "garbage":
            return self.rng.randbytes(len(written))
        return bytes(len(written))
