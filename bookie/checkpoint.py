"""Checkpoint: make the write cache durable in entry logs and indexes, then move lastMark.

BookKeeper's SyncThread and Journal.LastLogMark. The order (docs/design.md §3.4, docs/formats.md §8.2):

    # Checkpoint. Each step is durable before the next one starts.
    #   1. mark = journal.current_mark()   First, of every journal (CM1). Adds enter the write cache before the journal
    #                                      queue (W1), so every record below the mark is in
    #                                      the cache or already flushed.
    #   2-4. storage.flush(): swap the cache, append sorted, fsync the log, index batch with
    #        sync=True, ledger states with sync=True (bookie/storage.py tells its crash story)
    #   5. lastMark := mark                temp file, fsync, rename, fsync dir; in every
    #                                      ledger dir, lastMark.<i> per journal if several
    #   6. delete journals wholly below the mark, keeping journal_backups_count
    # 3! Crash during 3: the log holds entries no index points at. Replay from the old mark
    #    writes them again; GC reclaims the orphans.
    # 4! Crash between 4 and 5: replay re-adds indexed entries. Same bytes, same entry: the
    #    add is idempotent and costs only space.
    # 5! Crash between 5 and 6: extra journals stay; the next checkpoint deletes them.

Invariants:
    C1. lastMark only moves forward; writing a smaller mark is an assertion failure (§1.7).
    C2. A journal file is deleted only when it lies wholly below the persisted mark (§1.8).
    C3. An I/O error ends the checkpoint with the mark unmoved; the caller turns the bookie
        read-only (§1.5).

Thread-safety: ``Checkpointer.run`` on the checkpoint thread only (``CheckpointThread``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Callable, Sequence

from bookie.disk import atomic_replace
from bookie.errors import IOFailure
from journal.format import LogMark, parse_journal_id, journal_file_name
from journal.retention import journals_to_delete

if TYPE_CHECKING:
    from bookie.disk import Disk
    from bookie.storage_dirs import DirsStorage

log = logging.getLogger("bookie.checkpoint")

LAST_MARK = "lastMark"


def last_mark_name(journal_index: int, journals: int) -> str:
    """docs/formats.md §4.1: ``lastMark`` with one journal dir, ``lastMark.<i>`` with several
    (BookKeeper's Journal names them so)."""
    return LAST_MARK if journals == 1 else f"{LAST_MARK}.{journal_index}"


def read_last_mark(disk: "Disk", ledger_dirs: str | Sequence[str], *, journals: bool = True,
                   quiet: bool = False, name: str = LAST_MARK) -> LogMark:
    """docs/formats.md §4.4: the largest mark over the ledger dirs holding one (BookKeeper
    writes it to every ledger dir); missing or short everywhere -> (0, 0) with a warning.

    A missing lastMark with no journal at all is a new data dir, not a problem: said once, at
    INFO. ``quiet`` for a second reader of the same file (the Checkpointer at start)."""
    dirs = [ledger_dirs] if isinstance(ledger_dirs, str) else list(ledger_dirs)
    found = [m for m in (_read_one(disk, os.path.join(d, name)) for d in dirs) if m is not None]
    if found:
        return max(found)
    if quiet:
        pass
    elif journals:
        log.warning("no %s in %s: replaying every journal", name, ", ".join(dirs))
    else:
        log.info("new data dir: no %s and no journal in %s yet", name, ", ".join(dirs))
    return LogMark(0, 0)


def _read_one(disk: "Disk", path: str) -> LogMark | None:
    if disk.exists(path + ".tmp"):
        disk.unlink(path + ".tmp")  # a checkpoint died before its rename (atomic_replace)
    if not disk.exists(path):
        return None
    handle = disk.open(path)
    try:
        data = handle.read_at(0, 4096)
    finally:
        handle.close()
    if len(data) < 16:
        log.warning("%s is %d bytes, shorter than 16: not a mark", path, len(data))
        return None
    if len(data) > 16:
        log.warning("%s is %d bytes, longer than 16: reading the first 16", path, len(data))
    return LogMark.decode(data[:16])


def write_last_mark(disk: "Disk", ledger_dirs: str | Sequence[str], mark: LogMark,
                    name: str = LAST_MARK) -> None:
    """Into every ledger dir, as BookKeeper: the mark survives the loss of any one of them."""
    for ledger_dir in [ledger_dirs] if isinstance(ledger_dirs, str) else ledger_dirs:
        atomic_replace(disk, os.path.join(ledger_dir, name), mark.encode())


def list_journal_ids(disk: "Disk", journal_dir: str) -> list[int]:
    if not disk.exists(journal_dir):
        return []
    ids = (parse_journal_id(name) for name in disk.listdir(journal_dir))
    return sorted(i for i in ids if i is not None)


@dataclasses.dataclass(frozen=True)
class CheckpointResult:
    mark: LogMark                 # the first journal's (the only one unless journal_dirs)
    entries: int
    bytes: int
    journals_deleted: tuple[int, ...]
    phase_s: dict
    finished_at: float = 0.0  # wall clock (time.time()), for the checkpoint-lag alert
    marks: tuple[LogMark, ...] = ()   # every journal's, in journal order

    @property
    def did_work(self) -> bool:
        """Whether the run wrote entries or deleted journals. A periodic checkpoint of an
        idle bookie does neither, and is logged at DEBUG, not INFO (bookie/node/bookie.py):
        its mark may still move, over a new journal's header or a fence or LAC record,
        which is not news."""
        return bool(self.entries or self.bytes or self.journals_deleted)


class Checkpointer:
    """The checkpoint order over every journal. ``current_marks`` gives each journal's
    in-memory mark (or replay's ends), in the order of ``journal_dirs``.

    CM1. Every journal's mark is taken before the write cache is swapped (step 1 for each
         journal), and each journal's ``lastMark.<i>`` moves only after every ledger dir
         flushed (SD1): a ledger's records all go to one journal (ledgerId mod count), so
         each mark covers what it says for every ledger in every dir."""

    def __init__(self, disk: "Disk", storage: "DirsStorage", journal_dirs: Sequence[str],
                 current_marks: Callable[[], list[LogMark]], backups: int) -> None:
        self.disk = disk
        self.storage = storage
        self.journal_dirs = list(journal_dirs)
        self.names = [last_mark_name(i, len(self.journal_dirs))
                      for i in range(len(self.journal_dirs))]
        self.current_marks = current_marks
        self.backups = backups
        self.persisted_marks = [read_last_mark(disk, storage.ledger_dirs, quiet=True, name=n)
                                for n in self.names]

    @property
    def persisted(self) -> LogMark:
        """The first journal's persisted mark."""
        return self.persisted_marks[0]

    def run(self, delete_journals: bool = True) -> CheckpointResult:
        t0 = time.monotonic()
        marks = list(self.current_marks())  # step 1, first (W1, CM1)
        assert len(marks) == len(self.names), (marks, self.names)
        stats = self.storage.flush()  # steps 2-4
        t1 = time.monotonic()
        for index, mark in enumerate(marks):
            persisted = self.persisted_marks[index]
            if mark > persisted:
                write_last_mark(self.disk, self.storage.ledger_dirs, mark,
                                self.names[index])  # step 5
                self.persisted_marks[index] = mark
            else:
                assert mark == persisted, f"mark {mark} behind persisted {persisted} (C1)"
        t2 = time.monotonic()
        deleted = self._delete_old_journals() if delete_journals else []
        phases = {"flush": t1 - t0, "append": stats.append_s, "index": stats.index_s,
                  "lastmark": t2 - t1, "retention": time.monotonic() - t2}
        return CheckpointResult(marks[0], stats.entries, stats.bytes, tuple(deleted), phases,
                                time.time(), tuple(marks))

    def _delete_old_journals(self) -> list[int]:
        """Step 6 (C2): only files wholly below their journal's persisted mark, keeping
        ``backups`` in each journal dir."""
        deleted = []
        for journal_dir, persisted in zip(self.journal_dirs, self.persisted_marks):
            doomed = journals_to_delete(list_journal_ids(self.disk, journal_dir),
                                        persisted, self.backups)
            for journal_id in doomed:
                assert journal_id < persisted.journal_id
                self.disk.unlink(os.path.join(journal_dir, journal_file_name(journal_id)))
            if doomed:
                self.disk.fsync_dir(journal_dir)
            deleted += doomed
        return deleted


class CheckpointThread:
    """Runs checkpoints on one thread: periodic, on request, and when asked by cache pressure.

    ``request()`` returns a concurrent future; requests that arrive while one runs are served
    by the next run (each run snapshots a fresh mark, so it covers every earlier request).
    An I/O error calls ``on_io_error`` first, then fails the pending futures and refuses later
    requests (C3); the thread then stops checkpointing, since the storage state is unknown (A5).
    """

    def __init__(self, checkpointer: Checkpointer, interval_s: float,
                 on_io_error: Callable[[BaseException], None],
                 on_done: Callable[[CheckpointResult], None] | None = None) -> None:
        self.checkpointer = checkpointer
        self.interval_s = interval_s
        self.on_io_error = on_io_error
        self.on_done = on_done
        self._cond = threading.Condition()
        self._jobs: list[tuple[Callable[[], object], concurrent.futures.Future]] = []
        self._waiters: list[concurrent.futures.Future] = []
        self._wanted = False
        self._stopping = False
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="checkpoint", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._cond:
            if self._failed is not None or self._stopping:
                future.set_exception(IOFailure(f"checkpoints stopped: {self._failed}"))
                return future
            self._waiters.append(future)
            self._wanted = True
            self._cond.notify()
        return future

    def submit(self, job: Callable[[], object]) -> concurrent.futures.Future:
        """Run ``job`` on the checkpoint thread between checkpoints (GC, compaction)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._cond:
            if self._failed is not None or self._stopping:
                future.set_exception(IOFailure(f"checkpoint thread stopped: {self._failed}"))
                return future
            self._jobs.append((job, future))
            self._cond.notify()
        return future

    def trigger(self) -> None:
        """Ask for a checkpoint soon without waiting for it (write cache pressure)."""
        with self._cond:
            self._wanted = True
            self._cond.notify()

    def _loop(self) -> None:
        deadline = time.monotonic() + self.interval_s
        while True:
            with self._cond:
                while not (self._wanted or self._stopping or self._jobs) \
                        and time.monotonic() < deadline:
                    self._cond.wait(max(0.0, deadline - time.monotonic()))
                if self._stopping:
                    return
                jobs, self._jobs = self._jobs, []
                if not jobs or time.monotonic() >= deadline:
                    self._wanted = True
                waiters, self._waiters = self._waiters, []
                wanted, self._wanted = self._wanted, False
            self._run_jobs(jobs)
            if not wanted:
                continue
            deadline = time.monotonic() + self.interval_s
            if not self._run_once(waiters):
                return

    @staticmethod
    def _run_jobs(jobs) -> None:
        for job, future in jobs:
            try:
                result = job()
            except BaseException as exc:  # the caller gets the error; the thread goes on
                _settle(future, error=exc)
            else:
                _settle(future, result)

    def _run_once(self, waiters: list[concurrent.futures.Future]) -> bool:
        try:
            result = self.checkpointer.run(delete_journals=True)
        except BaseException as exc:  # C3: any failure leaves the mark where it was
            log.error("checkpoint failed, mark unmoved at %s: %s",
                      self.checkpointer.persisted, exc)
            # Tell first, before ``_failed`` refuses new requests and before any waiter
            # fails: the node is read-only before any requester hears of the failure (a
            # request racing the failure was refused while /ready still said 200).
            self.on_io_error(exc)
            with self._cond:
                self._failed = exc
                waiters += self._waiters
                self._waiters = []
            for future in waiters:
                _settle(future, error=exc if isinstance(exc, IOFailure) else IOFailure(str(exc)))
            return False
        if self.on_done is not None:
            self.on_done(result)
        for future in waiters:
            _settle(future, result)
        return True

    def halt(self) -> None:
        """Stop checkpointing without waiting (an I/O error elsewhere: A5, nothing more is
        written; the journal holds every acknowledged record for replay). Pending requests
        fail now: the thread will not serve them (a hang found by the power-loss sweep)."""
        self._fail_pending(self._take_pending(), "checkpoints halted after an I/O error")

    def stop(self) -> None:
        """Stop the thread after the run in progress; pending requests fail."""
        waiters = self._take_pending()
        if self._thread.is_alive():
            self._thread.join()
        self._fail_pending(waiters, "bookie is stopping")

    def _take_pending(self) -> list[concurrent.futures.Future]:
        """Mark the thread stopping and take every request and job it has not started."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
            waiters, self._waiters = self._waiters, []
            waiters += [future for _job, future in self._jobs]
            self._jobs = []
        return waiters

    @staticmethod
    def _fail_pending(waiters: list[concurrent.futures.Future], why: str) -> None:
        for future in waiters:
            _settle(future, error=IOFailure(why))


def _settle(future: concurrent.futures.Future, result: object = None,
            error: BaseException | None = None) -> None:
    """Complete a request's future. A requester that stopped waiting (an HTTP handler
    cancelled at shutdown, through ``asyncio.wrap_future``) cancelled it: completing it
    then raises InvalidStateError, which must not kill the checkpoint thread."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass  # cancelled, or completed already (stop() racing halt())
