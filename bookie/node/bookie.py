"""The ``Bookie`` facade: composition, lifecycle, and the state the other modules consult.

BookKeeper's BookieImpl. Every public coroutine runs on the event loop; storage and journal
are synchronous and run on their own threads (docs/design.md §3.7). The jobs live one per module
of this package and are mixed into ``Bookie``: ledger writes, reads, LAC waiters, the journal
bridge, the GC driver, disk watching; the state machine itself is ``bookie/state.py``.

Invariants (docs/design.md §1):
    N1. An add is answered only after the fsync of the journal group holding its record,
        unless deferred-sync (then at enqueue); ``force`` answers after every earlier add.
    N2. A fence, master key and explicit LAC are durable before their 200.
    N3. Ledger state changes (new ledger, fenced, explicit LAC body) are made in memory
        before their journal record is queued, so a checkpoint whose mark covers the record
        also persists the state (the analogue of W1 for ledger state).
    N4. The LAC a reader sees rises only on completion of a durable record, so it never
        runs ahead of what survives a crash and never goes backwards after a restart.
    N5. A client disconnect never changes what reaches the disk: the record is queued before
        anything is awaited, and a cancelled wait cancels only its own future, which
        ``_complete_group`` then skips. A single add awaits its future directly (it is its
        only waiter; a shield per add cost ~5 us on the hot path); others go through
        ``asyncio.shield``. (N6's reads come before admission: a request cancelled there
        was never admitted, so nothing of it was acknowledged or queued.)
    N6. The add path reads nothing from disk on the loop: the ledger's runtime on its first
        touch since start, and the stored copy a re-add is compared with, are read on the
        read executor before admission (``_prefetch``); admission itself touches memory only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time

from bookie.checkpoint import (Checkpointer, CheckpointThread, last_mark_name, list_journal_ids,
                               read_last_mark)
from bookie.config import BookieConfig
from bookie.disk import Disk, OsDisk
from bookie.disk_monitor import DiskMonitor, DiskPolicy, watched_dirs
from bookie.errors import ReadOnly
from bookie.gc_dirs import DirsGc
from bookie.identity import check_or_create
from bookie.node.add_room import AddRoom
from bookie.node.disk_watch import DiskWatch
from bookie.node.gc_driver import GcDriver
from bookie.node.journal_bridge import JournalBridge
from bookie.node.lac_waiters import LacWaiters
from bookie.node.read_queue import ReadQueue
from bookie.node.reads import READ_BATCH_BYTES_MAX, LedgerReads
from bookie.node.runtime import LedgerRuntime, LedgerRuntimes
from bookie.node.writes import LedgerWrites
from bookie.recovery import ReplayReport, Replayer
from bookie.state import BookieState, NodeState
from bookie.stats import Stats
from bookie.storage_dirs import DirsStorage
from bookie import writer_mark
from journal.group_commit import GroupCommitPolicy
from journal.journal import Journal

log = logging.getLogger("bookie.node")


class Bookie(LedgerWrites, LedgerReads, LacWaiters, LedgerRuntimes, JournalBridge, AddRoom,
             GcDriver, DiskWatch):
    """One bookie. Thread-safety: public methods on the event loop only."""

    def __init__(self, config: BookieConfig, disk: Disk | None = None) -> None:
        self.config = config
        self.disk = disk or OsDisk()
        self._node_state = NodeState()
        #: Where a cluster bookie is registered in ZooKeeper (api/cluster/member.py), None
        #: when it is not (standalone, not yet, or lost with the session).
        self.registration: str | None = None
        #: Ledgers marked under-replicated in ZooKeeper, as last counted (a cluster bookie).
        self.underreplicated_ledgers: int | None = None
        self.autorecovery = None  # a cluster bookie's AutoRecovery service, for /metrics
        #: A cluster bookie's answer to "may a recovery add bring back this tombstoned
        #: ledger?" (its metadata still lists it: GC deleted a copy placed elsewhere, and
        #: autorecovery places one here again). None: never (a standalone bookie).
        self.may_revive = None
        self.storage = DirsStorage(self.disk, config)
        self.journals: list[Journal] = []
        self.checkpoints: CheckpointThread | None = None
        self.replay_report: ReplayReport | None = None
        self.last_checkpoint = None
        self._runtime: dict[int, LedgerRuntime] = {}
        self._loading: dict[int, asyncio.Future] = {}  # runtime loads in flight (N6)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reads = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="read")
        self._read_queue: ReadQueue | None = None  # single reads, batched (set in start)
        self._ready = asyncio.Event()
        self.started_at = time.time()
        self.stats = Stats()
        self.identity: dict | None = None
        self.disk_monitor = DiskMonitor(
            DiskPolicy(config.disk_usage_warn_threshold, config.disk_usage_threshold,
                       config.disk_usage_lwm_threshold),
            watched_dirs(config.journal_dirs_current, config.ledger_dirs_current,
                         config.index_dirs_current))
        self.gc = DirsGc(self.storage.units, counters=self.stats.gc,
                         placement=self.storage.placement)
        self.last_gc = None
        self._gc_lock = asyncio.Lock()   # one GC run at a time: periodic or requested
        self._gc_task: asyncio.Task | None = None
        self._gc_preludes: list = []
        self._lac_waiters = 0
        self._monitor_task: asyncio.Task | None = None
        self._init_room()

    # -- the state (bookie/state.py) ----------------------------------------------------

    @property
    def state(self) -> BookieState:
        return self._node_state.state

    @property
    def readonly_reasons(self) -> set[str]:
        return self._node_state.readonly_reasons

    @property
    def failure(self) -> str | None:
        return self._node_state.failure

    def add_state_listener(self, listener) -> None:
        """``listener(new_state)`` after every change of state, on the loop."""
        self._node_state.add_listener(listener)

    def fail_io(self, exc: BaseException) -> None:
        """A write or fsync failed on the durable path: read-only until restart (§1.5)."""
        if self._node_state.fail_io(exc):
            log.error("I/O failure, bookie is read-only until restart: %s", exc)
        if self.checkpoints is not None:
            self.checkpoints.halt()

    def set_readonly(self, reason: str, on: bool) -> None:
        """Operator flag or disk-full monitor; ``io`` is never cleared here."""
        self._node_state.set_readonly(reason, on)

    @property
    def ready(self) -> bool:
        return self._node_state.ready

    def _check_writable(self, privileged: bool) -> None:
        """Fences, recovery adds and explicit LACs pass a read-only state unless it is io."""
        self._node_state.check_writable(privileged, self.disk_monitor.min_free_bytes,
                                        self.config.disk_reserved_bytes)

    def _check_serving(self) -> None:
        self._node_state.check_serving()

    check_serving = _check_serving  # for listeners that read the index before an add

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Replay, checkpoint, open a new journal; then WRITABLE. Raises on a refusal."""
        self._loop = asyncio.get_running_loop()
        self._read_queue = ReadQueue(self._loop, self._reads, self.storage.get_entry,
                                     self.storage.get_listed, READ_BATCH_BYTES_MAX,
                                     stats=self.stats)
        self._node_state.move(BookieState.REPLAYING)
        try:
            await self._loop.run_in_executor(None, self._open_and_replay)
            self._start_journal()
        except BaseException as exc:
            self._node_state.fail_start(exc)
            raise
        self._start_checkpoints()
        self.poll_disks()
        self._node_state.serving_after_replay()
        self._monitor_task = asyncio.create_task(self._monitor_disks(), name="disk-monitor")
        if self.config.gc_interval_ms > 0:
            self._gc_task = asyncio.create_task(self._gc_periodically(), name="gc")
        self._ready.set()

    def _open_and_replay(self) -> None:
        """On a worker thread: open storage, replay journals, checkpoint to the replay end."""
        config = self.config
        self.identity = check_or_create(self.disk, config.journal_dirs_current,
                                        config.ledger_dirs_current, config.separate_index_dirs)
        if self.disk.exists(self._operator_flag_path):
            self.readonly_reasons.add("operator")
        self.storage.open()
        writer_mark.forget_usage_if_written_by_another(  # WM2, before replay counts anything
            self.storage, list_journal_ids(self.disk, config.journal_dirs_current[0]))
        self.check_disks_before_replay()  # PL2: replay must not place into a full dir
        replayer = Replayer(self.disk, config, self.storage)
        # Published before the run: its counters are the replay's live progress (STATUS=).
        self.replay_report = replayer.report
        ends = []
        count = len(config.journal_dirs_current)
        for index, journal_dir in enumerate(config.journal_dirs_current):
            journal_ids = list_journal_ids(self.disk, journal_dir)
            mark = read_last_mark(self.disk, self.storage.ledger_dirs, journals=bool(journal_ids),
                                  name=last_mark_name(index, count))
            ends.append(replayer.run(mark, journal_ids, journal_dir))
        self._checkpointer = Checkpointer(self.disk, self.storage, config.journal_dirs_current,
                                          lambda: ends, config.journal_backups_count)
        self.last_checkpoint = self._checkpointer.run(delete_journals=False)
        self.storage.replayed()  # PL1: every ledger with entries has its state now

    def _start_journal(self) -> None:
        policy = GroupCommitPolicy(group_wait_ms_max=self.config.group_max_wait_ms,
                                   group_bytes_max=self.config.group_max_bytes)
        for index, journal_dir in enumerate(self.config.journal_dirs_current):  # a thread each
            marks = {"on_new_file": self._mark_writer} if index == 0 else {}  # WM1
            journal = Journal(
                self.disk, journal_dir, policy=policy,
                max_bytes=self.config.journal_max_bytes,
                prealloc_bytes=self.config.journal_prealloc_bytes,
                complete_group=self._complete_group_threadsafe,
                on_io_error=lambda exc: self._call_threadsafe(self.fail_io, exc),
                on_flush=self.stats.on_journal_flush, on_group_done=self.stats.on_journal_group,
                **marks)
            self.journals.append(journal)
            journal.start()
        journals = list(self.journals)
        self._checkpointer.current_marks = lambda: [j.current_mark() for j in journals]

    def _mark_writer(self, journal_id: int) -> None:
        writer_mark.mark_writer(self.storage, journal_id)

    def _start_checkpoints(self) -> None:
        self.checkpoints = CheckpointThread(
            self._checkpointer, self.config.checkpoint_interval_ms / 1000.0,
            on_io_error=lambda exc: self._call_threadsafe(self.fail_io, exc),
            on_done=self._checkpoint_done)
        self.checkpoints.start()

    def _checkpoint_done(self, result) -> None:
        self._room_freed_threadsafe()  # add_room.py AR2: the flushed half is cleared
        self.last_checkpoint = result
        self.stats.on_checkpoint(result.phase_s)
        # INFO only when the run changed something: an idle bookie's periodic checkpoint
        # (every checkpoint_interval_ms) is not news.
        log.log(logging.INFO if result.did_work else logging.DEBUG,
                "checkpoint: lastMark %x/%d, %d entries, %d bytes, %.1f ms, journals deleted %s",
                result.mark.journal_id, result.mark.offset, result.entries, result.bytes,
                sum(v for k, v in result.phase_s.items() if k in ("flush", "lastmark",
                                                                  "retention")) * 1000,
                [f"{i:x}" for i in result.journals_deleted] or "none")

    def begin_shutdown(self) -> None:
        """SIGTERM, first half: refuse new writes and release every long poll at once."""
        if self.state is not BookieState.STOPPING:
            self._node_state.move(BookieState.STOPPING)
        if self._monitor_task is not None:
            self._monitor_task.cancel()
        if self._gc_task is not None:
            self._gc_task.cancel()
        for runtime in self._runtime.values():
            self._release_waiters(runtime)

    async def close(self) -> None:
        """SIGTERM, second half: drain the journal, final checkpoint, close storage."""
        self.begin_shutdown()
        await asyncio.get_running_loop().run_in_executor(None, self._close_sync)
        self._reads.shutdown(wait=True)

    def _close_sync(self) -> None:
        if self.checkpoints is not None:
            self.checkpoints.stop()
            self.gc.abort()  # the checkpoint thread is joined: no GC step runs any more
        failed_io = self._node_state.failed_io
        for journal in self.journals:
            journal.close()
        if self.journals and not failed_io and self.failure is None:
            try:
                self._checkpointer.run(delete_journals=False)
            except Exception:
                log.exception("final checkpoint failed; replay will recover on next start")
        if not failed_io:
            self.storage.close()

    async def checkpoint(self):
        """Run a checkpoint now and return its result (``POST /v1/bookie/checkpoint``)."""
        self._check_serving()
        if self.checkpoints is None:
            raise ReadOnly("bookie is not running checkpoints")
        return await asyncio.wrap_future(self.checkpoints.request())

    async def wait_ready(self) -> None:
        await self._ready.wait()

    @property
    def persisted_marks(self) -> list:
        """Every journal's lastMark on disk, in journal order; empty before the first
        checkpoint."""
        checkpointer = getattr(self, "_checkpointer", None)
        return list(checkpointer.persisted_marks) if checkpointer is not None else []

    @property
    def persisted_mark(self):
        """The (first journal's) lastMark on disk, None before the first checkpoint."""
        checkpointer = getattr(self, "_checkpointer", None)
        return checkpointer.persisted if checkpointer is not None else None
