"""The entry logger of one ledger dir: the active log, rolling, point reads of any log.

BookKeeper's DefaultEntryLogger with EntryLogManagerForSingleEntryLog: one log is appended
at a time; it rolls when the next record would pass ``max_bytes`` (docs/formats.md §5.5 step 4).
A log is created on the first add after open or a roll, never reopened for append after a
restart (§5.5 step 6), and deleted instead of finalized if it holds no entries.

Invariants (with E1..E4 of entrylog/format.py, W1..W2 of entrylog/writer.py):
    EL1. A rolled log is finalized (trailer, fsync, header, fsync: E1) before the next log
        is created, so at most one log per dir is without its ledgersMap.
    EL2. Every location returned by add_entry is durable once flush() returns: the active
        log is fdatasynced, and rolled ones were synced when they were finalized.
    EL3. A read handle is closed only when no reader thread is using it.
    EL4. A quarantined log is still read by location: the index may point into the part of it
        that is whole, and an entry the index knows answers EIO only if it cannot be read.

Thread-safety: ``open``, ``add_entry``, ``flush``, ``delete_log``, the compaction calls
(``create_compaction_log``, ``install_compaction_log``, ``quarantine_log``), ``close`` and
``abandon`` belong to one thread (the checkpoint thread). ``read_entry`` may run at the same
time on other threads (the read executor): it reads through separate read-only handles with
pread (no shared file position), under a lock that guards only the handle cache, and refuses
a location of the active log that is not yet in the file (R1 says the index never hands one
out).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from typing import TYPE_CHECKING, Callable

from bookie.errors import BadRequest, IOFailure, TooLarge
from entrylog.format import (
    COMPACTING_SUFFIX, LOG_SIZE_LIMIT_MAX, MIN_ENTRY_SIZE, SIZE, log_file_name,
    parse_log_id, split_location,
)
from entrylog.log_ids import LogIdAllocator
from entrylog.reader import DEFAULT_MAX_ENTRY_SIZE, EntryLogReader
from entrylog.run_reader import Bound, read_run
from entrylog.writer import WRITE_BUFFER_BYTES, BufferedLogChannel

if TYPE_CHECKING:
    from bookie.disk import Disk

log = logging.getLogger(__name__)

READ_HANDLES_MAX = 64
#: A log GC found corrupt is renamed to this suffix (``<hex>.log.quarantined``): no Apache
#: BookKeeper reader matches it (they take ``^[0-9a-fA-F]+\.log$``), GC and compaction stop
#: looking at it, and point reads of locations the index still holds keep working (EL4).
QUARANTINED_SUFFIX = ".log.quarantined"
LogFinalizedCallback = Callable[[int, dict[int, int]], None]


class _ReadHandle:
    """A cached reader and how many threads are inside it (EL3)."""

    __slots__ = ("reader", "users", "evicted")

    def __init__(self, reader: EntryLogReader) -> None:
        self.reader = reader
        self.users = 0
        self.evicted = False


class EntryLogger:
    """Appends entries to entry logs in one ledger dir and reads them back by location.

    See the module docstring for the owning threads.
    """

    def __init__(self, disk: Disk, ledger_dir_current: str, *,
                 max_bytes: int = LOG_SIZE_LIMIT_MAX,
                 max_entry_size: int = DEFAULT_MAX_ENTRY_SIZE,
                 on_log_finalized: LogFinalizedCallback | None = None,
                 read_handles_max: int = READ_HANDLES_MAX,
                 write_buffer_bytes: int = WRITE_BUFFER_BYTES,
                 cache_keep_bytes: int | None = None) -> None:
        if not 0 < max_bytes <= LOG_SIZE_LIMIT_MAX:
            raise ValueError(f"max_bytes {max_bytes} is not in 1..{LOG_SIZE_LIMIT_MAX} (E4)")
        assert read_handles_max >= 1
        self._disk = disk
        self.ledger_dir = ledger_dir_current
        self.max_bytes = max_bytes
        self.max_entry_size = max_entry_size
        self._on_log_finalized = on_log_finalized
        self._read_handles_max = read_handles_max
        self._write_buffer_bytes = write_buffer_bytes
        self._cache_keep_bytes = cache_keep_bytes  # for active logs (BufferedLogChannel)
        self._allocator: LogIdAllocator | None = None
        self._active: BufferedLogChannel | None = None
        self._failure: str | None = None
        self._lock = threading.Lock()
        self._readers: collections.OrderedDict[int, _ReadHandle] = collections.OrderedDict()

    # ----------------------------------------------------------------- lifecycle

    def open(self) -> None:
        """Delete leftovers of a crash and set up id allocation. No log is created yet."""
        self._delete_compacting_leftovers()
        self._allocator = LogIdAllocator(self._disk, [self.ledger_dir])

    def close(self) -> None:
        """Finalize the active log (or delete it if empty); close every read handle."""
        try:
            if self._active is not None and self._failure is None:
                self._guarded(self._finish_active)
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Close every handle and write nothing. After an I/O failure anywhere on the
        durable path nothing more is written (A5), yet a process that lives on (an embedder,
        a test restarting the bookie) must not keep the files, nor their file system, busy.
        The active log keeps header offset 0 and is scanned when read (E2)."""
        if self._active is not None:
            self._active.close()
            self._active = None
        with self._lock:
            handles = list(self._readers.values())
            self._readers.clear()
        for handle in handles:
            handle.reader.close()

    @property
    def current_log_id(self) -> int | None:
        active = self._active
        return None if active is None else active.log_id

    def log_ids(self) -> list[int]:
        """Ids of the ``*.log`` files in the dir, ascending."""
        ids = (parse_log_id(name) for name in self._listdir())
        return sorted(log_id for log_id in ids if log_id is not None)

    def log_path(self, log_id: int) -> str:
        return os.path.join(self.ledger_dir, log_file_name(log_id))

    # ----------------------------------------------------------------- writing

    def add_entry(self, ledger_id: int, entry: bytes) -> int:
        """Append one entry; its location. Buffered: durable only after flush() (EL2)."""
        size = len(entry)
        if size < MIN_ENTRY_SIZE:
            raise BadRequest(f"entry of {size} bytes is shorter than its 16-byte ids")
        if size > self.max_entry_size:
            raise TooLarge(f"entry of {size} bytes is above the maximum {self.max_entry_size}")
        return self._guarded(lambda: self._append(ledger_id, entry))

    def add_run(self, ledger_id: int, entries: list[bytes]) -> list[int]:
        """Append entries of one ledger in order (a checkpoint's sorted run): their
        locations, as ``add_entry`` one by one would give them (rolls included, EL1), built
        with one buffer extend per log. Buffered: durable only after flush() (EL2)."""
        for entry in entries:
            size = len(entry)
            if size < MIN_ENTRY_SIZE:
                raise BadRequest(f"entry of {size} bytes is shorter than its 16-byte ids")
            if size > self.max_entry_size:
                raise TooLarge(f"entry of {size} bytes is above the maximum "
                               f"{self.max_entry_size}")
        return self._guarded(lambda: self._append_run(ledger_id, entries))

    def _append_run(self, ledger_id: int, entries: list[bytes]) -> list[int]:
        locations: list[int] = []
        at = 0
        while at < len(entries):
            active = self._active
            if active is None:
                active = self._create_log()
            room, used, take = self.max_bytes - active.position, 0, 0
            for entry in entries[at:]:
                need = SIZE.size + len(entry)
                # An empty log takes its first entry whatever its size (as _append does).
                if used + need > room and (take or active.has_entries):
                    break
                used, take = used + need, take + 1
            if take == 0:
                self._finish_active()  # EL1
                continue
            locations.extend(active.add_run(ledger_id, entries[at:at + take]))
            at += take
        return locations

    def flush(self) -> None:
        """Make every location returned so far durable (EL2)."""
        if self._active is not None:
            self._guarded(self._active.flush_and_sync)
        else:
            self._check_writable()

    def _append(self, ledger_id: int, entry: bytes) -> int:
        active = self._active
        # An empty log is never rolled: the entry would not fit in the next one either.
        if active is not None and active.has_entries and \
                active.would_exceed(len(entry), self.max_bytes):
            self._finish_active()  # EL1
            active = None
        if active is None:
            active = self._create_log()
        return active.add_entry(ledger_id, entry)

    def _create_log(self) -> BufferedLogChannel:
        assert self._allocator is not None, "EntryLogger.open() first"
        log_id = self._allocator.allocate()  # lastId is durable before the file exists (L1)
        channel = BufferedLogChannel.create(self._disk, self.ledger_dir, log_id,
                                            write_buffer_bytes=self._write_buffer_bytes,
                                            cache_keep_bytes=self._cache_keep_bytes)
        self._active = channel
        log.info("entry log %x created", log_id)
        return channel

    def _finish_active(self) -> None:
        channel = self._active
        assert channel is not None
        kept = channel.finalize()
        self._active = None
        if not kept:
            log.info("entry log %x held no entries and was deleted", channel.log_id)
            return
        log.info("entry log %x finalized at %d bytes, %d ledgers", channel.log_id,
                 channel.position, len(channel.ledger_totals))
        if self._on_log_finalized is not None:
            self._on_log_finalized(channel.log_id, dict(channel.ledger_totals))

    # ----------------------------------------------------------------- compaction

    def create_compaction_log(self) -> BufferedLogChannel:
        """A new ``<hex>.log.compacting`` (docs/formats.md §5.8) under a freshly allocated id.

        The id comes from the same allocator as active logs (lastId durable first, L1), so
        the file never collides with a log and is never appended to by a checkpoint.
        """
        assert self._allocator is not None, "EntryLogger.open() first"
        log_id = self._guarded(self._allocator.allocate)
        return self._guarded(lambda: BufferedLogChannel.create(
            self._disk, self.ledger_dir, log_id, compacting=True,
            write_buffer_bytes=self._write_buffer_bytes))

    def install_compaction_log(self, channel: BufferedLogChannel) -> None:
        """Rename a finalized ``.log.compacting`` to ``.log`` and fsync the dir (§1.6).

        Only after this may an index location point into the log: readers open ``.log``.
        """
        path = self.log_path(channel.log_id)
        try:
            self._disk.rename(channel.path, path)
            self._disk.fsync_dir(self.ledger_dir)
        except OSError as err:
            raise IOFailure(f"cannot install compacted log {path}: {err}") from err

    def quarantine_log(self, log_id: int) -> str:
        """Rename a rolled log to ``<hex>.log.quarantined`` (EL4); returns the new path."""
        path, target = self.log_path(log_id), self._quarantined_path(log_id)
        try:
            self._forget_and(log_id, lambda: self._disk.rename(path, target))
            self._disk.fsync_dir(self.ledger_dir)
        except OSError as err:
            raise IOFailure(f"cannot quarantine entry log {path}: {err}") from err
        return target

    def delete_log(self, log_id: int) -> None:
        """Delete a rolled log (GC, compaction): its read handle first, then the file."""
        path = self.log_path(log_id)
        try:
            self._forget_and(log_id, lambda: self._disk.unlink(path))
            self._disk.fsync_dir(self.ledger_dir)
        except OSError as err:
            raise IOFailure(f"cannot delete entry log {path}: {err}") from err

    def _forget_and(self, log_id: int, remove_name) -> None:
        """Forget a rolled log's read handle and remove its name in one step under the
        handle lock (EL3: users keep theirs). Apart, a read between the two cached a fresh
        handle to the doomed file, and its space stayed used until eviction or restart
        (docs/drills.md "Track record"); under the lock a later open finds the name gone."""
        if log_id == self.current_log_id:
            raise ValueError(f"entry log {log_id:x} is the active log")
        with self._lock:
            handle = self._readers.pop(log_id, None)
            if handle is not None:
                self._evict(handle)
            remove_name()

    def _quarantined_path(self, log_id: int) -> str:
        return self.log_path(log_id) + QUARANTINED_SUFFIX[len(".log"):]

    def _guarded(self, action):
        # W2 at this level: after one I/O failure every later write fails too (A5).
        self._check_writable()
        try:
            return action()
        except IOFailure as err:
            self._failure = str(err)
            raise

    def _check_writable(self) -> None:
        if self._failure is not None:
            raise IOFailure(f"entry logger of {self.ledger_dir} failed earlier: "
                            f"{self._failure}")

    # ----------------------------------------------------------------- reading

    def read_entry(self, location: int, ledger_id: int, entry_id: int, limit: int = 0):
        """The entry at ``location`` in any log; IOFailure if it is not that entry (§1.10);
        with a ``limit``, ``Oversize`` for an entry larger than it (reader.read_entry)."""
        log_id, pos = split_location(location)
        active = self._active
        if active is not None and active.log_id == log_id and \
                pos - SIZE.size >= active.written_position:
            raise IOFailure(f"entry {ledger_id}/{entry_id} at {pos} of entry log {log_id:x} "
                            f"is not written yet (R1)")
        handle = self._acquire(log_id)
        try:
            return handle.reader.read_entry(pos, ledger_id, entry_id, limit)
        finally:
            self._release(handle)

    def read_run(self, log_id: int, ledger_id: int, run: list[tuple[int, int]],
                 bound: Bound, framed: bool = False, limit: int = 0) -> list:
        """The entries of a run ((entryId, position) in log ``log_id``; run_reader's RR1)
        as far as ``bound`` takes them, in one read where they lie together; IOFailure as
        ``read_entry``."""
        active = self._active
        if active is not None and active.log_id == log_id and \
                run[-1][1] - SIZE.size >= active.written_position:
            raise IOFailure(f"entries of ledger {ledger_id} up to {run[-1][1]} of entry log "
                            f"{log_id:x} are not written yet (R1)")
        handle = self._acquire(log_id)
        try:
            return read_run(handle.reader, ledger_id, run, bound, framed, limit)
        finally:
            self._release(handle)

    def _acquire(self, log_id: int) -> _ReadHandle:
        with self._lock:
            handle = self._readers.get(log_id)
            if handle is None:
                handle = _ReadHandle(self._open_reader(log_id))
                self._readers[log_id] = handle
                while len(self._readers) > self._read_handles_max:
                    self._evict(self._readers.popitem(last=False)[1])
            else:
                self._readers.move_to_end(log_id)
            handle.users += 1
            return handle

    def _release(self, handle: _ReadHandle) -> None:
        with self._lock:
            handle.users -= 1
            if handle.evicted and handle.users == 0:
                handle.reader.close()

    @staticmethod
    def _evict(handle: _ReadHandle) -> None:
        # Called under the lock. EL3: a handle in use is closed by its last user instead.
        handle.evicted = True
        if handle.users == 0:
            handle.reader.close()

    def _open_reader(self, log_id: int) -> EntryLogReader:
        path = self.log_path(log_id)
        try:
            return EntryLogReader(self._disk, path, log_id, self.max_entry_size)
        except IOFailure as err:
            if not isinstance(err.__cause__, FileNotFoundError):
                raise
            quarantined = self._quarantined_path(log_id)
            if self._disk.exists(quarantined):  # EL4
                return EntryLogReader(self._disk, quarantined, log_id, self.max_entry_size)
            raise IOFailure(f"entry log {log_file_name(log_id)} is missing: {path}") from err

    # ----------------------------------------------------------------- startup

    def _listdir(self) -> list[str]:
        try:
            return self._disk.listdir(self.ledger_dir)
        except OSError as err:
            raise IOFailure(f"cannot list ledger dir {self.ledger_dir}: {err}") from err

    def _delete_compacting_leftovers(self) -> None:
        # docs/formats.md §5.8: a .log.compacting was never renamed into place, so no index
        # location points into it; the entries are still in the old log.
        leftovers = [n for n in self._listdir() if n.endswith(COMPACTING_SUFFIX)]
        if not leftovers:
            return
        try:
            for name in leftovers:
                log.warning("deleting leftover compaction file %s", name)
                self._disk.unlink(os.path.join(self.ledger_dir, name))
            self._disk.fsync_dir(self.ledger_dir)
        except OSError as err:
            raise IOFailure(f"cannot delete compaction leftovers in {self.ledger_dir}: "
                            f"{err}") from err
