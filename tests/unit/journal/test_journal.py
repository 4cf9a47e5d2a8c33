"""journal/journal.py: group commit thread, completions, marks, rolls, I/O failure (DESIGN §3)."""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest

from bookie.disk import OsDisk
from bookie.entry import frame_entry, master_key
from bookie.errors import IOFailure
from journal.format import (
    LogMark, RecordKind, encode_add, encode_fence, encode_master_key, journal_file_name,
    parse_journal_id)
from journal.group_commit import FlushReason, GroupCommitPolicy
from journal.journal import Journal
from journal.reader import JournalReader
from tests.support.counting_clock import CountingClock

WAIT_S = 10.0  # bounds a failure; never a synchronisation


def add(ledger_id: int, entry_id: int, payload: bytes = b"hello") -> bytes:
    return encode_add(frame_entry(ledger_id, entry_id, entry_id - 1, entry_id + 1, payload))


class Completions:
    """Records complete_group calls; tests wait on its condition, never sleep."""

    def __init__(self, log: list | None = None) -> None:
        self.calls: list[tuple[list, BaseException | None]] = []
        self.cond = threading.Condition()
        self.log = log

    def __call__(self, tokens: list, exc: BaseException | None) -> None:
        with self.cond:
            self.calls.append((list(tokens), exc))
            if self.log is not None:
                self.log.append(("complete", list(tokens)))
            self.cond.notify_all()

    def tokens(self) -> list:
        with self.cond:
            return [token for tokens, _ in self.calls for token in tokens]

    def wait_tokens(self, count: int) -> None:
        with self.cond:
            done = self.cond.wait_for(
                lambda: sum(len(tokens) for tokens, _ in self.calls) >= count, WAIT_S)
        assert done, f"only {self.tokens()} completed"


class FlushLog:
    def __init__(self) -> None:
        self.flushes: list[tuple[FlushReason, int, int, float]] = []

    def __call__(self, reason, count, size, seconds) -> None:
        self.flushes.append((reason, count, size, seconds))


class LoggingDisk(OsDisk):
    """OsDisk that logs fdatasyncs into a shared list, and can fail writes or syncs on demand."""

    def __init__(self, log: list | None = None) -> None:
        self.log = log if log is not None else []
        self.fail_write = self.fail_sync = False
        self.entered = threading.Event()  # the failing call has started
        self.release = threading.Event()  # let it raise
        self.release.set()
        self.syncs = 0

    def create(self, path):
        return _LoggingFile(super().create(path), self)


class _LoggingFile:
    def __init__(self, handle, disk: LoggingDisk) -> None:
        self._handle = handle
        self._disk = disk
        self.path = handle.path

    def write_at(self, offset, data):
        if self._disk.fail_write:
            self._disk.entered.set()
            assert self._disk.release.wait(WAIT_S)
            raise OSError(errno.EIO, "Input/output error")
        self._handle.write_at(offset, data)

    def fdatasync(self):
        self._disk.syncs += 1
        if self._disk.fail_sync:
            self._disk.entered.set()
            assert self._disk.release.wait(WAIT_S)
            raise OSError(errno.EIO, "Input/output error")
        self._handle.fdatasync()
        self._disk.log.append(("fdatasync",))

    def drop_cache(self, offset, length):
        self._handle.drop_cache(offset, length)

    def __getattr__(self, name):
        return getattr(self._handle, name)


def journal_files(directory) -> list[str]:
    names = [n for n in os.listdir(directory) if parse_journal_id(n) is not None]
    return [os.path.join(directory, n) for n in sorted(names, key=parse_journal_id)]


def read_records(path):
    with JournalReader(OsDisk(), path) as reader:
        records = list(reader.scan())
    return records, reader.end


_made: list[Journal] = []


@pytest.fixture(autouse=True)
def close_journals():
    """The journal thread is not a daemon: a failed test must still join it."""
    yield
    while _made:
        _made.pop().close()


def make(tmp_path, completions, **kwargs) -> Journal:
    kwargs.setdefault("prealloc_bytes", 64 * 1024)
    disk = kwargs.pop("disk", OsDisk())
    journal = Journal(disk, str(tmp_path), complete_group=completions, **kwargs)
    _made.append(journal)
    return journal


def test_start_allocates_now_in_ms_plus_one_in_an_empty_dir(tmp_path):
    journal = make(tmp_path, Completions())
    before = time.time_ns() // 1_000_000
    journal.start()
    after = time.time_ns() // 1_000_000
    try:
        assert before + 1 <= journal.current_journal_id <= after + 1
        assert journal.current_mark() == LogMark(journal.current_journal_id, 512)
        assert os.listdir(tmp_path) == [journal_file_name(journal.current_journal_id)]
    finally:
        journal.close()


def test_start_continues_after_the_largest_existing_id(tmp_path):
    for name in ("a.txn", "1f.txn", "zz.txn", "30.log", "lastMark"):
        (tmp_path / name).write_bytes(b"")
    journal = make(tmp_path, Completions())
    journal.start()
    journal.close()
    assert journal.current_journal_id == 0x20
    assert (tmp_path / "20.txn").exists()


def test_start_removes_journal_creations_a_crash_cut_short(tmp_path):
    # A crash during creation leaves <id>.txn.tmp (journal/file.py): never a journal, so
    # neither read nor counted for the next id, and removed; other .tmp files are left.
    (tmp_path / "1f.txn").write_bytes(b"")
    (tmp_path / "25.txn.tmp").write_bytes(b"\x01garbage")
    (tmp_path / "lastMark.tmp").write_bytes(b"x")
    journal = make(tmp_path, Completions())
    journal.start()
    journal.close()
    assert journal.current_journal_id == 0x20
    assert sorted(os.listdir(tmp_path)) == ["1f.txn", "20.txn", "lastMark.tmp"]


def test_start_in_a_missing_dir_is_an_io_failure(tmp_path):
    journal = make(tmp_path / "missing", Completions())
    with pytest.raises(IOFailure):
        journal.start()
    journal.close()


def test_thread_is_named_journal_and_not_a_daemon(tmp_path):
    journal = make(tmp_path, Completions())
    journal.start()
    try:
        threads = [t for t in threading.enumerate() if t.name == "journal"]
        assert len(threads) == 1 and not threads[0].daemon
    finally:
        journal.close()
    assert not any(t.name == "journal" for t in threading.enumerate())


def test_records_complete_in_order_only_after_their_fdatasync(tmp_path):
    log: list = []
    completions = Completions(log)
    journal = make(tmp_path, completions, disk=LoggingDisk(log))
    journal.start()
    journal.submit(encode_master_key(1, master_key(b"secret")), "key")
    for i in range(200):
        journal.submit(add(1, i), i)
    completions.wait_tokens(201)
    journal.close()
    assert completions.tokens() == ["key"] + list(range(200))
    assert all(exc is None for _, exc in completions.calls)
    for index, event in enumerate(log):  # Q1: every completion follows a sync
        if event[0] == "complete":
            assert log[index - 1] == ("fdatasync",)
    records, end = read_records(journal_files(tmp_path)[0])
    assert records[0].kind is RecordKind.LEDGER_KEY
    assert [r.entry_id for r in records[1:]] == list(range(200))
    assert end.clean and journal.current_mark() == LogMark(journal.current_journal_id,
                                                           end.offset)
    assert end.offset % 512 == 0


def test_none_tokens_are_dropped_and_force_markers_complete_with_their_group(tmp_path):
    completions = Completions()
    clock = CountingClock(start=1000.0)
    journal = make(tmp_path, completions, clock=clock,
                   policy=GroupCommitPolicy(group_entries_max=3))
    journal.submit(add(1, 0), None)  # deferred-sync: acknowledged already
    journal.submit(add(1, 1), None)
    journal.submit(None, "force")  # FORCE: no bytes, completes after the group's sync
    journal.submit(add(1, 2), None)  # a group with no token to complete
    journal.submit(None, "force-2")
    journal.start()
    completions.wait_tokens(2)
    journal.close()
    assert completions.calls == [(["force"], None), (["force-2"], None)]
    records, _ = read_records(journal_files(tmp_path)[0])
    assert [r.entry_id for r in records] == [0, 1, 2]


def test_a_group_of_force_markers_alone_completes_without_io(tmp_path):
    completions = Completions()
    disk = LoggingDisk()
    journal = make(tmp_path, completions, disk=disk)
    journal.submit(None, "f1")
    journal.submit(None, "f2")
    journal.start()
    completions.wait_tokens(2)
    journal.close()
    assert completions.calls == [(["f1", "f2"], None)]
    assert disk.syncs == 0
    assert journal.current_mark().offset == 512


def test_groups_form_by_bytes_and_entries(tmp_path):
    completions, flushes = Completions(), FlushLog()
    record = add(1, 0, b"p" * 410)
    assert len(record) == 450
    journal = make(tmp_path, completions, on_flush=flushes, clock=CountingClock(start=1000.0),
                   policy=GroupCommitPolicy(group_bytes_max=1000, group_entries_max=2))
    for i in range(3):
        journal.submit(record, i)
    journal.start()
    completions.wait_tokens(3)
    journal.close()
    assert [call[0] for call in completions.calls] == [[0, 1], [2]]
    assert [f[:2] for f in flushes.flushes] == [(FlushReason.MAX_ENTRIES, 2),
                                                (FlushReason.QUEUE_EMPTY, 1)]
    journal = make(tmp_path, completions, on_flush=flushes, clock=CountingClock(start=1000.0),
                   policy=GroupCommitPolicy(group_bytes_max=1000))
    flushes.flushes.clear()
    for i in range(7):
        journal.submit(record, i)
    journal.start()
    journal.close()
    assert [f[:2] for f in flushes.flushes] == [(FlushReason.MAX_BYTES, 3)] * 2 + [
        (FlushReason.QUEUE_EMPTY, 1)]
    assert [f[2] for f in flushes.flushes] == [1536, 1536, 512]  # records + padding


def test_max_wait_flushes_when_queue_empty_flush_is_off(tmp_path):
    completions, flushes, clock = Completions(), FlushLog(), CountingClock(start=1000.0)
    journal = make(tmp_path, completions, on_flush=flushes, clock=clock,
                   policy=GroupCommitPolicy(group_wait_ms_max=2.0, flush_when_queue_empty=False))
    journal.start()
    journal.submit(add(1, 0), "lone")
    reads = clock.reads
    clock.wait_reads(reads + 6)  # the thread has looked at the clock again and again
    assert completions.tokens() == [] and flushes.flushes == []
    clock.now += 0.0021
    completions.wait_tokens(1)
    journal.close()
    assert flushes.flushes[0][:2] == (FlushReason.MAX_WAIT, 1)


def test_roll_after_the_size_limit_starts_the_next_id_at_512(tmp_path):
    completions = Completions()
    journal = make(tmp_path, completions, clock=CountingClock(start=1000.0), max_bytes=2048,
                   prealloc_bytes=4096, policy=GroupCommitPolicy(group_entries_max=1))
    record = add(1, 0, b"r" * 960)
    assert len(record) == 1000  # each group: 1000 bytes + 24 of padding
    for i in range(5):
        journal.submit(record, i)
    journal.start()
    first = journal.current_journal_id
    completions.wait_tokens(5)
    journal.close()
    paths = journal_files(tmp_path)
    assert [parse_journal_id(os.path.basename(p)) for p in paths] == [first, first + 1,
                                                                      first + 2]
    counts = [len(read_records(p)[0]) for p in paths]
    assert counts == [2, 2, 1]
    assert journal.current_mark() == LogMark(first + 2, 1536)
    assert all(read_records(p)[1].clean for p in paths)


def test_mark_after_a_roll_is_the_new_file_header_end(tmp_path):
    completions = Completions()
    journal = make(tmp_path, completions, clock=CountingClock(start=1000.0), max_bytes=600,
                   prealloc_bytes=4096)
    journal.start()
    first = journal.current_journal_id
    journal.submit(add(1, 0), "a")
    completions.wait_tokens(1)
    journal.close()  # the roll follows the completions; close joins the thread
    assert journal.current_mark() == LogMark(first + 1, 512)
    assert len(journal_files(tmp_path)) == 2


def test_close_drains_everything_queued_and_is_idempotent(tmp_path):
    completions = Completions()
    journal = make(tmp_path, completions)
    for i in range(1000):
        journal.submit(add(2, i), i)
    assert journal.queued_count == 1000
    assert journal.queued_bytes == 1000 * len(add(2, 0))
    journal.start()
    journal.close()
    journal.close()
    assert completions.tokens() == list(range(1000))
    assert journal.queued_count == 0 and journal.queued_bytes == 0
    records, end = read_records(journal_files(tmp_path)[0])
    assert len(records) == 1000 and end.clean
    with pytest.raises(IOFailure):
        journal.submit(add(2, 1000), "late")


def test_close_before_start_fails_what_was_queued(tmp_path):
    completions = Completions()
    journal = make(tmp_path, completions)
    journal.submit(add(1, 0), "early")
    journal.close()
    assert completions.tokens() == ["early"]
    assert isinstance(completions.calls[0][1], IOFailure)


def test_submits_racing_close_either_complete_once_or_raise(tmp_path):
    completions = Completions()
    journal = make(tmp_path, completions)
    journal.start()
    accepted: list[int] = []
    started = threading.Event()

    def submitter() -> None:
        for i in range(1_000_000):
            try:
                journal.submit(add(3, i % 1000), i)
            except IOFailure:
                return
            accepted.append(i)
            started.set()

    thread = threading.Thread(target=submitter)
    thread.start()
    assert started.wait(WAIT_S)
    journal.close()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert completions.tokens() == accepted
    assert all(exc is None for _, exc in completions.calls)


def test_concurrent_submitters_each_token_completes_once_in_per_thread_order(tmp_path):
    completions = Completions()
    journal = make(tmp_path, completions)
    journal.start()
    barrier = threading.Barrier(8)

    def submitter(index: int) -> None:
        barrier.wait()
        for i in range(300):
            journal.submit(add(index, i), (index, i))

    threads = [threading.Thread(target=submitter, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    completions.wait_tokens(8 * 300)
    journal.close()
    tokens = completions.tokens()
    assert sorted(tokens) == [(n, i) for n in range(8) for i in range(300)]
    for n in range(8):
        assert [i for m, i in tokens if m == n] == list(range(300))


def test_write_error_fails_the_group_and_everything_queued_after_it(tmp_path):
    completions, errors = Completions(), []
    disk = LoggingDisk()
    journal = make(tmp_path, completions, disk=disk, on_io_error=errors.append)
    journal.start()
    journal.submit(add(1, 0), "ok")
    completions.wait_tokens(1)
    disk.release.clear()
    disk.fail_write = True
    journal.submit(add(1, 1), "a")
    assert disk.entered.wait(WAIT_S)  # the thread is inside the failing write
    journal.submit(add(1, 2), "b")
    journal.submit(None, "force")
    disk.release.set()
    completions.wait_tokens(4)
    journal.close()
    assert completions.calls[1][0] == ["a"] and completions.calls[2][0] == ["b", "force"]
    failure = completions.calls[1][1]
    assert isinstance(failure, IOFailure) and completions.calls[2][1] is failure
    path = journal_files(tmp_path)[0]
    assert path in str(failure) and "write" in str(failure)
    assert "offset 1024" in str(failure) and f"errno {errno.EIO}" in str(failure)
    assert errors == [failure]
    with pytest.raises(IOFailure):
        journal.submit(add(1, 3), "after")
    assert journal.current_mark().offset == 1024 and journal.queued_count == 0


def test_fdatasync_error_is_never_retried(tmp_path):
    completions, errors = Completions(), []
    disk = LoggingDisk()
    journal = make(tmp_path, completions, disk=disk, on_io_error=errors.append)
    journal.start()
    disk.fail_sync = True
    journal.submit(add(1, 0), "a")
    completions.wait_tokens(1)
    with pytest.raises(IOFailure):
        journal.submit(add(1, 1), "b")
    journal.close()
    assert disk.syncs == 1  # A5
    assert len(errors) == 1 and "fdatasync" in str(errors[0])
    assert completions.calls == [(["a"], errors[0])]
    assert journal.current_mark().offset == 512  # Q2: the failed group is not below the mark


def test_on_flush_reports_count_written_bytes_and_sync_time(tmp_path):
    completions, flushes = Completions(), FlushLog()
    journal = make(tmp_path, completions, on_flush=flushes)
    journal.submit(add(1, 0), 0)
    journal.submit(encode_fence(1), 1)
    journal.start()
    journal.close()
    [(reason, count, size, seconds)] = flushes.flushes
    assert reason is FlushReason.QUEUE_EMPTY and count == 2 and size == 512
    assert seconds >= 0.0


def test_a_failing_completion_callback_stops_the_journal_loudly(tmp_path):
    calls = []

    def complete_group(tokens, exc):
        calls.append((tokens, exc))
        if exc is None:
            raise RuntimeError("bug in the caller")

    errors = []
    journal = Journal(OsDisk(), str(tmp_path), complete_group=complete_group,
                      on_io_error=errors.append, prealloc_bytes=4096)
    _made.append(journal)
    journal.start()
    hook_called = threading.Event()
    old_hook = threading.excepthook
    threading.excepthook = lambda args: hook_called.set()
    try:
        journal.submit(add(1, 0), "a")
        assert hook_called.wait(WAIT_S)
    finally:
        threading.excepthook = old_hook
    journal.close()
    assert len(errors) == 1 and "journal thread died" in str(errors[0])
    with pytest.raises(IOFailure):
        journal.submit(add(1, 1), "b")
