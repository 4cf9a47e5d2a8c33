"""The journal: queue -> one thread -> group write -> fdatasync -> mark -> completions.

Apache BookKeeper's Journal and ForceWriteThread in one thread (docs/design.md §3.1 steps 5-7,
§3.7): one sync in flight keeps up with the disk's sync rate, and records that arrive during
a sync form the next group. Implements docs/formats.md §3.8 (writer rules) and §3.9 (ids).

Flush, in order (docs/formats.md §3.8):
    1. append a padding record, so the group ends 512-aligned (J1)
    2. one write of the whole group           ! crash: a prefix persists (A1); nothing of
                                                 the group was acknowledged; replay cuts it
    3. one fdatasync                          ! crash: same; after an error, fail (A5)
    4. mark := (journal id, position)         the checkpoint may now persist it
    5. complete_group(tokens, None)           the node acknowledges adds, fences, LACs, forces

Invariants:
    Q1. A token is completed only after the fdatasync of the group holding its record, or
        with an IOFailure; every submitted token is completed exactly once, or its submit
        raised.
    Q2. The mark only moves forward, and every record before it is synced.
    Q3. After a write or fdatasync error nothing more is written and the sync is never retried
        (A5): on_io_error is called once, first; then the failed group and everything queued
        after it complete with IOFailure, and submit raises from then on.

Thread-safety: ``submit``, ``current_mark``, ``current_journal_id``, ``queued_count``,
``queued_bytes`` and ``close`` may be called from any thread; ``submit`` costs a deque append,
and a notify only while the journal thread waits. The queued_* counters are exact when one
thread submits (the node's loop, docs/design.md §3.7). Callbacks run on the journal thread.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Callable

from bookie.errors import IOFailure
from journal.file import DEFAULT_PREALLOC_BYTES, TEMP_SUFFIX, JournalChannel
from journal.format import ALIGNMENT, LogMark, padding_record, parse_journal_id
from journal.group_commit import FlushReason, GroupCommitPolicy, should_flush

if TYPE_CHECKING:
    from bookie.disk import Disk

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 2 << 30  # journalMaxSizeMB
_UNBOUNDED = 1 << 62


def _ignore(exc: BaseException) -> None:
    pass


class _Group:
    """Records gathered for one write; ``since``: the conservative start of the oldest wait."""

    __slots__ = ("records", "tokens", "count", "bytes", "since")

    def __init__(self) -> None:
        self.records: list = []
        self.tokens: list = []
        self.count = 0
        self.bytes = 0
        self.since = 0.0


class Journal:
    """Group-committing journal writer. See the module docstring for thread-safety."""

    def __init__(self, disk: "Disk", journal_dir: str, *,
                 policy: GroupCommitPolicy = GroupCommitPolicy(),
                 max_bytes: int = DEFAULT_MAX_BYTES,
                 prealloc_bytes: int = DEFAULT_PREALLOC_BYTES,
                 complete_group: Callable[[list, BaseException | None], None],
                 on_io_error: Callable[[BaseException], None] = _ignore,
                 on_flush: Callable[[FlushReason, int, int, float], None] | None = None,
                 on_group_done: Callable[[int, float, bool], None] | None = None,
                 on_new_file: Callable[[int], None] = _ignore,
                 clock: Callable[[], float] = time.monotonic,
                 alignment: int = ALIGNMENT) -> None:
        self._disk = disk
        self._journal_dir = journal_dir
        self._policy = policy
        self._max_bytes = max_bytes
        self._prealloc_bytes = prealloc_bytes
        self._complete_group = complete_group
        self._on_io_error = on_io_error
        self._on_flush = on_flush
        # (records, seconds since the thread took the group's first record, durable?): the
        # add-to-durable latency (BookKeeper's JOURNAL_ADD_ENTRY), one clock read a group.
        self._on_group_done = on_group_done
        self._on_new_file = on_new_file  # WM1 (bookie/writer_mark.py); raises IOFailure
        self._clock = clock
        self._alignment = alignment
        self._queue: collections.deque = collections.deque()
        # A binary semaphore: held while the thread may sleep; a submit releases it to wake
        # the thread. A C lock costs less per wake-up than a Condition (measured ~5 us).
        self._wakeup = threading.Lock()
        self._wakeup.acquire()
        self._waiting = False  # the thread is, or is about to be, blocked on _wakeup
        self._closing = False
        self._rejection: str | None = None  # why submit raises: closed or failed
        self._submitted_count = self._submitted_bytes = 0  # written by submitters only
        self._done_count = self._done_bytes = 0  # written by the journal thread only
        #: Groups written and not yet fdatasynced (0 or 1: the thread syncs what it wrote),
        #: BookKeeper's JOURNAL_FORCE_WRITE_QUEUE_SIZE; written by the journal thread only.
        self.syncing = 0
        self._mark = LogMark(0, 0)
        self._channel: JournalChannel | None = None
        self._thread: threading.Thread | None = None

    # -- any thread ---------------------------------------------------------------------

    def start(self) -> None:
        """Create the next journal file (docs/formats.md §3.9) and start the "journal" thread."""
        assert self._thread is None and not self._closing, "start() once, before close()"
        journal_id = self._next_journal_id()
        self._channel = self._create_channel(journal_id)
        self._mark = LogMark(journal_id, self._channel.position)
        self._thread = threading.Thread(target=self._run, name="journal", daemon=False)
        self._thread.start()

    def submit(self, record: bytes | None, token: object) -> None:
        """Queue a record (an encode_* output) or, with None, a FORCE marker; see Q1."""
        if self._rejection is not None:
            raise IOFailure(self._rejection)
        item = (record, token)
        self._queue.append(item)
        self._submitted_count += 1
        if record is not None:
            self._submitted_bytes += len(record)
        if self._rejection is not None:
            self._reclaim(item)  # closed or failed meanwhile: the thread may never see it
        if self._waiting:
            # One wake per wait: cleared here, the adds that follow in the same gap skip the
            # release (and the RuntimeError of a second one, ~3 us an add at 64 clients).
            self._waiting = False
            self._wake()

    def _wake(self) -> None:
        try:
            self._wakeup.release()
        except RuntimeError:
            pass  # released already: the thread will see the queue anyway

    def _reclaim(self, item: tuple) -> None:
        """Take ``item`` back and raise, unless the thread already took it (then it completes).

        Exactly one of this remove and the thread's popleft gets the item (deque ops are
        atomic), so the token is completed once or its submit raises (Q1).
        """
        try:
            self._queue.remove(item)
        except ValueError:
            return
        self._submitted_count -= 1
        if item[0] is not None:
            self._submitted_bytes -= len(item[0])
        raise IOFailure(self._rejection or "journal is closed")

    def current_mark(self) -> LogMark:
        """(journal id, offset after the last synced group): every record before it is synced."""
        return self._mark

    @property
    def current_journal_id(self) -> int:
        return self._mark.journal_id

    @property
    def queued_count(self) -> int:
        """Records and markers submitted but not yet synced (or failed)."""
        return self._submitted_count - self._done_count

    @property
    def queued_bytes(self) -> int:
        return self._submitted_bytes - self._done_bytes

    def close(self) -> None:
        """Flush and sync everything queued, stop the thread and join it. Idempotent."""
        if self._rejection is None:
            self._rejection = "journal is closed"
        self._closing = True
        self._wake()
        thread = self._thread
        if thread is None:
            self._fail_queued(IOFailure("journal closed before it started"))
        elif thread is not threading.current_thread():
            thread.join()

    # -- the journal thread -------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # a bug: fail what is queued so no caller waits forever
            self._fail(IOFailure(f"journal thread died: {exc!r}"), _Group())
            raise
        finally:
            self._channel.close()

    def _loop(self) -> None:
        policy, clock, queue = self._policy, self._clock, self._queue
        group = _Group()
        since = clock()  # no record now queued arrived before this
        while True:
            self._gather(group, since)
            now = clock()
            reason = should_flush(policy, (now - group.since) * 1000.0, group.bytes,
                                  group.count, not queue)
            if reason is None and self._closing and group.count:
                reason = FlushReason.SHUTDOWN
            if reason is not None:
                if not self._flush(group, reason):
                    return
                group, since = _Group(), now
                continue
            if self._closing and not queue:
                return
            timeout = None
            if group.count:
                timeout = policy.group_wait_ms_max / 1000.0 - (now - group.since)
                timeout = min(max(0.0, timeout), threading.TIMEOUT_MAX)
            self._wait(timeout)
            since = clock()

    def _gather(self, group: _Group, since: float, bounded: bool = True) -> None:
        """Move queued records into ``group``, up to the policy's limits when ``bounded``."""
        popleft = self._queue.popleft
        records, tokens = group.records, group.tokens
        count, size = group.count, group.bytes
        if count == 0:
            group.since = since
        bytes_max = entries_max = _UNBOUNDED
        if bounded:
            bytes_max = self._policy.group_bytes_max
            entries_max = self._policy.group_entries_max or _UNBOUNDED
        while size < bytes_max and count < entries_max:
            try:
                record, token = popleft()
            except IndexError:
                break
            count += 1
            if record is not None:
                records.append(record)
                size += len(record)
            if token is not None:  # None: a deferred-sync add, acknowledged already
                tokens.append(token)
        group.count, group.bytes = count, size

    def _wait(self, timeout: float | None) -> None:
        # _waiting is set before the queue is checked, and submit appends before it reads
        # _waiting, so a record is either seen here or wakes the thread. A stale release only
        # makes the next wait return at once; the loop then looks at the queue again.
        self._waiting = True
        try:
            if not self._queue and not self._closing:
                self._wakeup.acquire(timeout=-1 if timeout is None else timeout)
        finally:
            self._waiting = False

    def _flush(self, group: _Group, reason: FlushReason) -> bool:
        """Write, sync, mark, complete (module docstring). False after an I/O failure."""
        channel = self._channel
        written = 0
        sync_seconds = 0.0
        if group.bytes:
            records = group.records
            padding = padding_record(channel.position + group.bytes, self._alignment)
            if padding:
                records.append(padding)
            buffer = records[0] if len(records) == 1 else b"".join(records)
            written = len(buffer)
            failure, sync_seconds = self._write_and_sync(channel, buffer)
            if failure is not None:
                self._fail(failure, group)
                return False
            self._mark = LogMark(channel.journal_id, channel.position)  # Q2
            channel.drop_synced()
        self._done_count += group.count
        self._done_bytes += group.bytes
        if group.tokens:
            self._complete_group(group.tokens, None)
        if self._on_flush is not None:
            self._on_flush(reason, group.count, written, sync_seconds)
        if self._on_group_done is not None:
            self._on_group_done(group.count, self._clock() - group.since, True)
        if channel.position > self._max_bytes:
            return self._roll()
        return True

    def _write_and_sync(self, channel: JournalChannel, buffer: bytes):
        """(None, sync seconds), or (IOFailure, 0) naming file, offset and errno (A5)."""
        offset = channel.position
        try:
            channel.append(buffer)
        except OSError as exc:
            return self._io_failure("write", len(buffer), offset, exc), 0.0
        started = self._clock()
        self.syncing = 1
        try:
            channel.fdatasync()
        except OSError as exc:
            return self._io_failure("fdatasync", len(buffer), offset, exc), 0.0
        finally:
            self.syncing = 0
        return None, self._clock() - started

    def _io_failure(self, operation: str, size: int, offset: int, exc: OSError) -> IOFailure:
        failure = IOFailure(f"journal {self._channel.path}: {operation} of {size} bytes at "
                            f"offset {offset} failed: errno {exc.errno} ({exc.strerror})")
        failure.__cause__ = exc
        return failure

    def _roll(self) -> bool:
        """Close the full file and continue in id + 1 (docs/formats.md §3.8 "Rolling")."""
        old = self._channel
        try:
            channel = self._create_channel(old.journal_id + 1)
        except IOFailure as failure:
            self._fail(failure, _Group())
            return False
        self._channel = channel
        old.close()
        self._mark = LogMark(channel.journal_id, channel.position)
        return True

    def _fail(self, failure: IOFailure, group: _Group) -> None:
        """Q3: complete the failed group and everything queued with ``failure``; tell once."""
        # Tell first, before a submit is refused and before any waiter fails: a caller that
        # hands all three to one loop in order has turned read-only before any submitter
        # hears of the failure (found by the EIO tests). A record submitted meanwhile is
        # queued and failed below.
        self._on_io_error(failure)
        self._rejection = str(failure)  # before the last gather: a later submit reclaims
        log.error("%s; the journal takes no more records", failure)
        self._complete_failed(group, failure)
        self._fail_queued(failure)

    def _fail_queued(self, failure: IOFailure) -> None:
        group = _Group()
        self._gather(group, 0.0, bounded=False)
        self._complete_failed(group, failure)

    def _complete_failed(self, group: _Group, failure: IOFailure) -> None:
        self._done_count += group.count
        self._done_bytes += group.bytes
        if group.tokens:
            self._complete_group(group.tokens, failure)
        if self._on_group_done is not None and group.count:
            # A group gathered only to be failed (since 0.0) waited an unknown time: 0.
            self._on_group_done(group.count, self._clock() - group.since if group.since
                                else 0.0, False)

    # -- files --------------------------------------------------------------------------

    def _next_journal_id(self) -> int:
        """Largest existing id + 1, or now in ms + 1 in an empty dir (Journal.run)."""
        try:
            names = self._disk.listdir(self._journal_dir)
        except OSError as exc:
            raise IOFailure(f"cannot list journal dir {self._journal_dir}: {exc}") from exc
        self._remove_cut_creations(names)
        ids = [i for i in map(parse_journal_id, names) if i is not None]
        base = max(ids) if ids else time.time_ns() // 1_000_000
        return base + 1

    def _remove_cut_creations(self, names: list[str]) -> None:
        """Delete ``<id>.txn.tmp`` files: creations a crash cut short, never holding a
        record (journal/file.py crash story), and never read."""
        for name in names:
            if name.endswith(".txn" + TEMP_SUFFIX):
                log.warning("removing %s: a journal creation a crash cut short", name)
                try:
                    self._disk.unlink(os.path.join(self._journal_dir, name))
                except OSError as exc:
                    raise IOFailure(f"cannot remove {name} in {self._journal_dir}: "
                                    f"{exc}") from exc

    def _create_channel(self, journal_id: int) -> JournalChannel:
        try:
            channel = JournalChannel.create(self._disk, self._journal_dir, journal_id,
                                            self._prealloc_bytes, self._alignment)
        except OSError as exc:
            raise IOFailure(f"cannot create journal {journal_id:x}.txn in "
                            f"{self._journal_dir}: {exc}") from exc
        self._on_new_file(journal_id)
        return channel
