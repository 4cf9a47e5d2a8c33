"""The bookie node: storage, journal and checkpoints composed; the only asyncio bridge.

BookKeeper's BookieImpl. Every public coroutine runs on the event loop; storage and journal
are synchronous and run on their own threads (DESIGN.md §3.7). Journal completions reach the
loop through one ``call_soon_threadsafe`` per group; blocking reads go to a 2-thread executor.

States (DESIGN.md §3.6); each arrow names the function that takes it:

     STARTING
        │ dirs ok [Bookie.start]                  bad dir, missing journal or
        ▼                                         corrupt record: FAILED, exit 1
     REPLAYING
        │ replay and checkpoint done [Bookie.start]
        ▼
     WRITABLE ◄───────────────────────────────┐
        │ operator flag [Bookie.set_readonly]  │ flag cleared [Bookie.set_readonly]
        │ disk full [Bookie.set_disk_full]     │ space back [Bookie.set_disk_full]
        │ write/fsync error [Bookie.fail_io]   │ (reasons full and operator only)
        ▼                                      │
     READ_ONLY(full | operator | io) ──────────┘
        reason io: only a restart leaves it

     REPLAYING, WRITABLE, READ_ONLY ──SIGTERM [Bookie.close]──► STOPPING: drain, checkpoint

Invariants (DESIGN.md §1):
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
import dataclasses
import enum
import logging
import time

from bookie import __version__
from bookie import entry as entry_mod
from bookie.checkpoint import Checkpointer, CheckpointThread, list_journal_ids, read_last_mark
from bookie.config import BookieConfig
from bookie.disk import Disk, OsDisk, atomic_replace
from bookie.disk_monitor import DiskMonitor, DiskPolicy
from bookie.entry import DigestType
from bookie.errors import (BadDigest, BadRequest, BookieError, Fenced, IOFailure, NoEntry,
                           NoLedger, ReadOnly, TooManyRequests, Unauthorized)
from bookie.gc import GarbageCollector
from bookie.identity import check_or_create
from bookie.recovery import ReplayReport, Replayer
from bookie.stats import Stats
from bookie.storage import LedgerStorage
from journal import format as jformat
from journal.group_commit import GroupCommitPolicy
from journal.journal import Journal
from ledgerindex import keys
from ledgerindex.keys import LedgerState

log = logging.getLogger("bookie.node")

ZERO_KEY = bytes(20)
OPERATOR_READONLY = "READONLY"   # in the ledger dir's current/: the operator's flag
SANITY_LEDGER_ID = 0x7FFF_FFFF_FFFF_FF00
SANITY_KEY = entry_mod.master_key(b"bookie-sanity")


class BookieState(enum.Enum):
    STARTING = "starting"
    REPLAYING = "replaying"
    WRITABLE = "writable"
    READ_ONLY = "read_only"
    STOPPING = "stopping"
    FAILED = "failed"


#: Allowed transitions (h11 style); anything else is a programmer error.
TRANSITIONS = {
    BookieState.STARTING: {BookieState.REPLAYING, BookieState.FAILED, BookieState.STOPPING},
    BookieState.REPLAYING: {BookieState.WRITABLE, BookieState.READ_ONLY, BookieState.FAILED,
                            BookieState.STOPPING},
    BookieState.WRITABLE: {BookieState.READ_ONLY, BookieState.STOPPING},
    BookieState.READ_ONLY: {BookieState.WRITABLE, BookieState.STOPPING},
    BookieState.STOPPING: set(),
    BookieState.FAILED: {BookieState.STOPPING},
}


@dataclasses.dataclass
class LedgerRuntime:
    """What the node knows of a ledger beyond its persisted state."""

    lac: int = -1                  # N4: raised by completed adds and explicit LACs
    last_entry_id: int = -1        # largest entry id admitted (cache or storage)
    journaled_key: bytes | None = None  # the key of this process's last LEDGER_KEY record
    waiters: list = dataclasses.field(default_factory=list)  # (gt, future) long polls


class Bookie:
    """One bookie. Thread-safety: public methods on the event loop only."""

    def __init__(self, config: BookieConfig, disk: Disk | None = None) -> None:
        self.config = config
        self.disk = disk or OsDisk()
        self.state = BookieState.STARTING
        self.readonly_reasons: set[str] = set()
        self.failure: str | None = None
        self.storage = LedgerStorage(self.disk, config)
        self.journal: Journal | None = None
        self.checkpoints: CheckpointThread | None = None
        self.replay_report: ReplayReport | None = None
        self.last_checkpoint = None
        self._runtime: dict[int, LedgerRuntime] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reads = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="read")
        self._ready = asyncio.Event()
        self.started_at = time.time()
        self.stats = Stats()
        self.identity: dict | None = None
        self.disk_monitor = DiskMonitor(
            DiskPolicy(config.disk_usage_warn_threshold, config.disk_usage_threshold,
                       config.disk_usage_lwm_threshold),
            {"journal": config.journal_dir, "ledgers": config.ledger_dir})
        self.gc = GarbageCollector(self.storage, counters=self.stats.gc)
        self.last_gc = None
        self._gc_lock = asyncio.Lock()   # one GC run at a time: periodic or requested
        self._gc_task: asyncio.Task | None = None
        self._lac_waiters = 0
        self._monitor_task: asyncio.Task | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def _move(self, new: BookieState) -> None:
        assert new in TRANSITIONS[self.state], f"bookie state {self.state} -> {new}"
        if new is not self.state:
            log.info("bookie state %s -> %s%s", self.state.value, new.value,
                     f" ({', '.join(sorted(self.readonly_reasons))})"
                     if new is BookieState.READ_ONLY else "")
        self.state = new

    async def start(self) -> None:
        """Replay, checkpoint, open a new journal; then WRITABLE. Raises on a refusal."""
        self._loop = asyncio.get_running_loop()
        self._move(BookieState.REPLAYING)
        try:
            await self._loop.run_in_executor(None, self._open_and_replay)
            self._start_journal()
        except BaseException as exc:
            self.failure = str(exc)
            self._move(BookieState.FAILED)
            raise
        self._start_checkpoints()
        self.poll_disks()
        self._move(BookieState.READ_ONLY if self.readonly_reasons else BookieState.WRITABLE)
        self._monitor_task = asyncio.create_task(self._monitor_disks(), name="disk-monitor")
        if self.config.gc_interval_ms > 0:
            self._gc_task = asyncio.create_task(self._gc_periodically(), name="gc")
        self._ready.set()

    def _open_and_replay(self) -> None:
        """On a worker thread: open storage, replay journals, checkpoint to the replay end."""
        self.identity = check_or_create(self.disk, self.config.journal_dir,
                                        self.config.ledger_dir)
        if self.disk.exists(self._operator_flag_path):
            self.readonly_reasons.add("operator")
        self.storage.open()
        journal_ids = list_journal_ids(self.disk, self.config.journal_dir)
        mark = read_last_mark(self.disk, self.config.ledger_dir, journals=bool(journal_ids))
        replayer = Replayer(self.disk, self.config, self.storage)
        # Published before the run: its counters are the replay's live progress (STATUS=).
        self.replay_report = replayer.report
        end = replayer.run(mark, journal_ids)
        self._checkpointer = Checkpointer(self.disk, self.storage, self.config.journal_dir,
                                          lambda: end, self.config.journal_backups_count)
        self.last_checkpoint = self._checkpointer.run(delete_journals=False)

    def _start_journal(self) -> None:
        policy = GroupCommitPolicy(group_wait_ms_max=self.config.group_max_wait_ms,
                                   group_bytes_max=self.config.group_max_bytes)
        self.journal = Journal(
            self.disk, self.config.journal_dir, policy=policy,
            max_bytes=self.config.journal_max_bytes,
            prealloc_bytes=self.config.journal_prealloc_bytes,
            complete_group=self._complete_group_threadsafe,
            on_io_error=lambda exc: self._call_threadsafe(self.fail_io, exc),
            on_flush=self.stats.on_journal_flush)
        self.journal.start()
        self._checkpointer.current_mark = self.journal.current_mark

    def _start_checkpoints(self) -> None:
        self.checkpoints = CheckpointThread(
            self._checkpointer, self.config.checkpoint_interval_ms / 1000.0,
            on_io_error=lambda exc: self._call_threadsafe(self.fail_io, exc),
            on_done=self._checkpoint_done)
        self.checkpoints.start()

    def _checkpoint_done(self, result) -> None:
        self.last_checkpoint = result
        self.stats.on_checkpoint(result.phase_s)
        log.info("checkpoint: lastMark %x/%d, %d entries, %d bytes, %.1f ms, journals deleted %s",
                 result.mark.journal_id, result.mark.offset, result.entries, result.bytes,
                 sum(v for k, v in result.phase_s.items() if k in ("flush", "lastmark",
                                                                   "retention")) * 1000,
                 [f"{i:x}" for i in result.journals_deleted] or "none")

    def _call_threadsafe(self, fn, *args) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)

    def begin_shutdown(self) -> None:
        """SIGTERM, first half: refuse new writes and release every long poll at once."""
        if self.state is not BookieState.STOPPING:
            self._move(BookieState.STOPPING)
        if self._monitor_task is not None:
            self._monitor_task.cancel()
        if self._gc_task is not None:
            self._gc_task.cancel()
        for runtime in self._runtime.values():
            for _gt, future in runtime.waiters:
                if not future.done():
                    future.set_result(None)
            runtime.waiters.clear()

    async def close(self) -> None:
        """SIGTERM, second half: drain the journal, final checkpoint, close storage."""
        self.begin_shutdown()
        await asyncio.get_running_loop().run_in_executor(None, self._close_sync)
        self._reads.shutdown(wait=True)

    def _close_sync(self) -> None:
        if self.checkpoints is not None:
            self.checkpoints.stop()
            self.gc.abort()  # the checkpoint thread is joined: no GC step runs any more
        failed_io = "io" in self.readonly_reasons
        if self.journal is not None:
            self.journal.close()
        if self.journal is not None and not failed_io and self.failure is None:
            try:
                self._checkpointer.run(delete_journals=False)
            except Exception:
                log.exception("final checkpoint failed; replay will recover on next start")
        if not failed_io:
            self.storage.close()

    # -- state --------------------------------------------------------------------------

    def fail_io(self, exc: BaseException) -> None:
        """A write or fsync failed on the durable path: read-only until restart (§1.5)."""
        if self.failure is None:
            self.failure = f"I/O error: {exc}"
            log.error("I/O failure, bookie is read-only until restart: %s", exc)
        self.readonly_reasons.add("io")
        if self.checkpoints is not None:
            self.checkpoints.halt()
        if self.state is BookieState.WRITABLE:
            self._move(BookieState.READ_ONLY)

    def set_readonly(self, reason: str, on: bool) -> None:
        """Operator flag or disk-full monitor; ``io`` is never cleared here."""
        assert reason in ("operator", "full")
        (self.readonly_reasons.add if on else self.readonly_reasons.discard)(reason)
        if self.state not in (BookieState.WRITABLE, BookieState.READ_ONLY):
            return
        target = BookieState.READ_ONLY if self.readonly_reasons else BookieState.WRITABLE
        if target is not self.state:
            self._move(target)

    @property
    def ready(self) -> bool:
        return self.state is BookieState.WRITABLE

    def _check_writable(self, privileged: bool) -> None:
        """Fences, recovery adds and explicit LACs pass a read-only state unless it is io."""
        if self.state is BookieState.WRITABLE:
            return
        if self.state is BookieState.READ_ONLY and privileged \
                and "io" not in self.readonly_reasons:
            free = self.disk_monitor.min_free_bytes()
            if free is None or free >= self.config.disk_reserved_bytes:
                return
            raise ReadOnly(f"bookie is read-only and only {free} bytes are free, below the "
                           f"{self.config.disk_reserved_bytes} reserved for ledger recovery")
        reason = ", ".join(sorted(self.readonly_reasons)) or self.state.value
        if self.state is BookieState.READ_ONLY and "io" in self.readonly_reasons:
            raise IOFailure(f"bookie is read-only after an I/O error: {self.failure}")
        raise ReadOnly(f"bookie is not writable ({reason})")

    def _check_serving(self) -> None:
        if self.state in (BookieState.STARTING, BookieState.REPLAYING):
            raise ReadOnly("bookie is replaying its journal")
        if self.state is BookieState.FAILED:
            raise IOFailure(f"bookie failed to start: {self.failure}")

    @property
    def _operator_flag_path(self) -> str:
        return f"{self.config.ledger_dir}/{OPERATOR_READONLY}"

    def poll_disks(self) -> None:
        """One disk-usage check: full -> READ_ONLY(full); back under the low water -> clear."""
        was_warn = self.disk_monitor.warn
        try:
            full = self.disk_monitor.poll(self.disk.usage)
        except OSError as exc:
            log.error("disk usage check failed: %s", exc)
            return
        if self.disk_monitor.warn and not was_warn:
            log.warning("disk usage over the warn threshold: %s", self._usage_text())
        if full != ("full" in self.readonly_reasons):
            log.warning("disk %s: %s", "full" if full else "usable again", self._usage_text())
            self.set_readonly("full", full)

    def _usage_text(self) -> str:
        return ", ".join(f"{name} {u.used_ratio:.1%} used, {u.free_bytes} free"
                         for name, u in self.disk_monitor.usage.items())

    async def _monitor_disks(self) -> None:
        interval = self.config.disk_check_interval_ms / 1000.0
        while True:
            await asyncio.sleep(interval)
            self.poll_disks()

    async def set_operator_readonly(self, on: bool) -> None:
        """The operator's read-only flag, persisted in the ledger dir (survives restarts)."""
        self._check_serving()
        path = self._operator_flag_path
        await self._write_outside_checkpoint(self._persist_flag, path, on)
        self.set_readonly("operator", on)

    async def _write_outside_checkpoint(self, write, *args) -> None:
        """A durable write off the checkpoint (operator flag, delete tombstone): its failure
        makes the bookie read-only ``io`` like every other write failure (DESIGN.md §1.5),
        not only a 500 for the one request."""
        try:
            await self._loop.run_in_executor(None, write, *args)
        except (IOFailure, OSError) as exc:
            self.fail_io(exc)
            if isinstance(exc, IOFailure):
                raise
            raise IOFailure(f"{getattr(write, '__name__', 'write')}: {exc}") from exc

    def _persist_flag(self, path: str, on: bool) -> None:
        if on:
            atomic_replace(self.disk, path, b"read-only set by the operator\n")
        elif self.disk.exists(path):
            self.disk.unlink(path)
            self.disk.fsync_dir(self.config.ledger_dir)

    # -- ledger state -------------------------------------------------------------------

    def _runtime_of(self, ledger_id: int) -> LedgerRuntime:
        runtime = self._runtime.get(ledger_id)
        if runtime is None:
            runtime = self._runtime[ledger_id] = self._load_runtime(ledger_id)
        return runtime

    def _load_runtime(self, ledger_id: int) -> LedgerRuntime:
        """From storage (RocksDB and one pread): on the read executor for adds (N6)."""
        runtime = LedgerRuntime()
        last = self.storage.last_entry_id(ledger_id)
        runtime.last_entry_id = -1 if last is None else last
        runtime.lac = self._stored_lac(ledger_id, runtime.last_entry_id)
        return runtime

    async def _prefetch(self, ledger_id: int, entry_ids) -> dict[int, bytes | None]:
        """N6: what admission needs from disk, read off the loop before it: the ledger's
        runtime on its first touch since start, and the stored copies of re-added entries.
        Admission then compares a re-add with the write cache (memory) or these copies; a
        stored copy cannot change meanwhile, since every add enters the cache first."""
        if ledger_id not in self._runtime:
            loaded = await self._loop.run_in_executor(self._reads, self._load_runtime,
                                                      ledger_id)
            self._runtime.setdefault(ledger_id, loaded)
        last = self._runtime[ledger_id].last_entry_id
        again = [entry_id for entry_id in entry_ids if entry_id <= last]
        if not again:
            return {}
        return await self._loop.run_in_executor(self._reads, self._stored_copies, ledger_id,
                                                again)

    def _stored_copies(self, ledger_id: int, entry_ids: list[int]) -> dict[int, bytes | None]:
        copies = {}
        for entry_id in entry_ids:
            try:
                copies[entry_id] = self.storage.get_entry(ledger_id, entry_id)
            except IOFailure:
                copies[entry_id] = None  # unreadable copy: the new one, journaled, replaces it
        return copies

    def _stored_lac(self, ledger_id: int, last_entry_id: int) -> int:
        """After a restart: max(explicit LAC body, last stored entry's piggybacked LAC)."""
        lac = -1
        state = self.storage.ledgers.get(ledger_id)
        if state is not None and state.explicit_lac:
            lac = entry_mod.parse_lac_body(state.explicit_lac)[1]
        if last_entry_id >= 0:
            try:
                data = self.storage.get_entry(ledger_id, last_entry_id)
            except IOFailure:
                data = None  # reported when the entry itself is read
            if data is not None and len(data) >= 24:
                lac = max(lac, entry_mod.piggybacked_lac(data))
        return lac

    def _existing_state(self, ledger_id: int) -> LedgerState:
        state = self.storage.ledgers.get(ledger_id)
        if state is None or not state.exists:
            raise NoLedger(f"ledger {ledger_id} is unknown to this bookie")
        return state

    def _check_key(self, ledger_id: int, state: LedgerState, master_key: bytes) -> None:
        if state.master_key not in (b"", ZERO_KEY) and state.master_key != master_key:
            raise Unauthorized(f"master key does not match ledger {ledger_id}'s")

    def _ledger_for_write(self, ledger_id: int, master_key: bytes,
                          digest_type: DigestType | None,
                          default_digest: DigestType | None = DigestType.CRC32C
                          ) -> LedgerState:
        """The ledger's state as a write would leave it (not yet stored). Raises on refusal.

        A fence passes ``default_digest=None``: fencing a ledger this bookie never saw (ensemble
        recovery) must not fix its digest type; the first add or explicit LAC names it."""
        state = self.storage.ledgers.get(ledger_id)
        if state is not None and not state.exists:
            raise NoLedger(f"ledger {ledger_id} was deleted")
        dtype = digest_type or default_digest
        if state is None:
            return LedgerState(master_key=master_key, digest_type=int(dtype) if dtype else 0)
        self._check_key(ledger_id, state, master_key)
        changes = {}
        if state.master_key in (b"", ZERO_KEY):
            changes["master_key"] = master_key
        if digest_type is not None and state.digest_type not in (0, int(digest_type)):
            raise BadRequest(f"ledger {ledger_id} has digest type "
                             f"{DigestType(state.digest_type).header_name}, not "
                             f"{digest_type.header_name}")
        if state.digest_type == 0 and dtype is not None:
            changes["digest_type"] = int(dtype)
        return dataclasses.replace(state, **changes) if changes else state

    def _store_state(self, ledger_id: int, old: LedgerState | None, new: LedgerState) -> None:
        if new is not old:
            self.storage.ledgers.set(ledger_id, new)  # N3: before the record is queued

    # -- journal bridge -----------------------------------------------------------------

    def _complete_group_threadsafe(self, tokens: list, error: BaseException | None) -> None:
        self._call_threadsafe(self._complete_group, tokens, error)

    def _complete_group(self, tokens: list, error: BaseException | None) -> None:
        for future, ledger_id, lac in tokens:
            if error is None and lac is not None:
                self._raise_lac(ledger_id, lac)
            if future is not None and not future.done():  # None: a deferred-sync add
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

    def _submit(self, record: bytes | None, ledger_id: int, lac: int | None = None):
        future = self._loop.create_future()
        try:
            self.journal.submit(record, (future, ledger_id, lac))
        except BookieError:
            raise
        except Exception as exc:
            raise IOFailure(f"journal refused a record: {exc}") from exc
        return future

    def _journal_key_once(self, ledger_id: int, runtime: LedgerRuntime, key: bytes) -> None:
        """FORMATS.md §3.8: a master-key record before the first record about a ledger, and
        again when a "no key" (zero) ledger takes a real key, so replay learns it too."""
        if runtime.journaled_key != key:
            self.journal.submit(jformat.encode_master_key(ledger_id, key), None)
            runtime.journaled_key = key

    def _admit(self, size: int) -> None:
        """Back-pressure (DESIGN.md §3.1 step 3): bounded journal queue and write cache."""
        if self.journal.queued_bytes + size > self.config.journal_queue_max_bytes:
            raise TooManyRequests("journal queue is full")
        cache = self.storage.cache
        if cache.active_bytes > self.config.write_cache_max_bytes // 2:
            self.checkpoints.trigger()
            if cache.total_bytes + size > self.config.write_cache_max_bytes:
                raise TooManyRequests("write cache is full; a checkpoint is running")

    def _raise_lac(self, ledger_id: int, lac: int) -> None:
        runtime = self._runtime.get(ledger_id)
        if runtime is None or lac <= runtime.lac:
            return
        runtime.lac = lac
        if runtime.waiters:
            still = []
            for gt, future in runtime.waiters:
                if lac > gt:
                    if not future.done():
                        future.set_result(None)
                else:
                    still.append((gt, future))
            runtime.waiters = still

    # -- the ledger operations ----------------------------------------------------------

    async def add_entry(self, ledger_id: int, entry_id: int, data: bytes, master_key: bytes,
                        digest_type: DigestType | None = None, recovery: bool = False,
                        deferred_sync: bool = False) -> None:
        """Store one framed entry; returns once durable (N1). Body ids must match the path."""
        stored = await self._prefetch(ledger_id, (entry_id,))
        future = self._add_nowait(ledger_id, entry_id, data, master_key, digest_type,
                                  recovery, deferred_sync, stored)
        if future is not None:
            await future  # N5

    def _add_nowait(self, ledger_id, entry_id, data, master_key, digest_type, recovery,
                    deferred_sync, stored):
        """Admit and queue one add; the future completes when durable (None if deferred)."""
        old, state = self._admit_ledger(ledger_id, master_key, digest_type, recovery)
        self._admit_entry(ledger_id, entry_id, data, state, recovery, stored)
        self._admit(len(data))
        return self._queue_adds(ledger_id, ((entry_id, data),), old, state, deferred_sync)

    def _admit_ledger(self, ledger_id, master_key, digest_type, recovery):
        """The checks of an add that concern the ledger, changing nothing: (stored state,
        state after the add)."""
        self._check_writable(privileged=recovery)
        old = self.storage.ledgers.get(ledger_id)
        state = self._ledger_for_write(ledger_id, master_key, digest_type)
        if state.fenced and not recovery:
            raise Fenced(f"ledger {ledger_id} is fenced")
        return old, state

    def _admit_entry(self, ledger_id, entry_id, data, state, recovery, stored):
        """The checks of one entry of an admitted ledger, changing nothing."""
        dtype = DigestType(state.digest_type)
        entry_mod.check_entry_shape(data, dtype)
        check_storable(ledger_id, entry_id, entry_mod.piggybacked_lac(data))
        if self.config.verify_digest and dtype.verifiable:
            entry_mod.verify_entry(data, dtype)
        if entry_id <= self._runtime_of(ledger_id).last_entry_id:
            self._check_same_bytes(ledger_id, entry_id, data, stored)

    def _queue_adds(self, ledger_id, entries, old, state, deferred_sync):
        """Cache and journal admitted entries of one ledger; returns the future of the last
        record (None if deferred). One future covers them all: the journal syncs its queue
        in order (Q2), so the group holding the last record ends after every earlier one,
        and the LAC raised then is the highest the entries carry (N4)."""
        runtime = self._runtime_of(ledger_id)
        self._store_state(ledger_id, old, state)
        lac = -1
        for entry_id, data in entries:
            self.storage.add_entry(ledger_id, entry_id, data)  # W1: cache before journal
            runtime.last_entry_id = max(runtime.last_entry_id, entry_id)
            lac = max(lac, entry_mod.piggybacked_lac(data))
        self._journal_key_once(ledger_id, runtime, state.master_key)
        records = [jformat.encode_add(data) for _, data in entries]
        for record in records[:-1]:
            self.journal.submit(record, None)  # no token: the last record's answers for it
        if deferred_sync:
            # N4: acknowledged now, but its LAC counts only once its group is synced: a LAC
            # raised at enqueue could be read and then taken back by a crash (kill -9 drill).
            self.journal.submit(records[-1], (None, ledger_id, lac))
            return None
        return self._submit(records[-1], ledger_id, lac)

    def _check_same_bytes(self, ledger_id: int, entry_id: int, data: bytes,
                          stored: dict[int, bytes | None]) -> None:
        """A re-add must carry identical bytes (client retry); different bytes are refused.
        The cached copy is the newest; else the stored one ``_prefetch`` read (N6)."""
        existing = self.storage.get_cached(ledger_id, entry_id)
        if existing is None:
            existing = stored.get(entry_id)
        if existing is not None and existing != data:
            raise BadRequest(f"entry {ledger_id}/{entry_id} already exists with different "
                             f"bytes; refusing to overwrite it")

    async def add_batch(self, ledger_id: int, entries: list[tuple[int, bytes]],
                        master_key: bytes, digest_type: DigestType | None = None,
                        recovery: bool = False, deferred_sync: bool = False) -> list[int]:
        """Several adds of one ledger, admitted as a whole and queued together, so one
        journal group covers them and a refused batch stores nothing."""
        if len({entry_id for entry_id, _ in entries}) != len(entries):
            raise BadRequest("a batch names the same entry id twice")
        stored = await self._prefetch(ledger_id, [entry_id for entry_id, _ in entries])
        old, state = self._admit_ledger(ledger_id, master_key, digest_type, recovery)
        for entry_id, data in entries:
            self._admit_entry(ledger_id, entry_id, data, state, recovery, stored)
        self._admit(sum(len(data) for _, data in entries))
        future = self._queue_adds(ledger_id, entries, old, state, deferred_sync)
        if future is not None:
            await asyncio.shield(future)  # N5
        return [entry_id for entry_id, _ in entries]

    async def fence(self, ledger_id: int, master_key: bytes) -> tuple[int, int]:
        """Fence a ledger (creating it, as BookKeeper does for recovery); durable before 200."""
        self._check_serving()
        self._check_writable(privileged=True)
        check_storable(ledger_id)
        old = self.storage.ledgers.get(ledger_id)
        state = self._ledger_for_write(ledger_id, master_key, None, default_digest=None)
        runtime = self._runtime_of(ledger_id)
        self._admit(16)
        self._store_state(ledger_id, old, dataclasses.replace(state, fenced=True))  # N3
        self._journal_key_once(ledger_id, runtime, state.master_key)
        await asyncio.shield(self._submit(jformat.encode_fence(ledger_id), ledger_id))
        return runtime.lac, runtime.last_entry_id

    async def write_lac(self, ledger_id: int, master_key: bytes, body: bytes) -> int:
        """Store an explicit LAC body (FORMATS.md §6.4); durable before 200 (N2)."""
        self._check_serving()
        self._check_writable(privileged=True)
        body_ledger, lac = entry_mod.parse_lac_body(body)
        if body_ledger != ledger_id:
            raise BadRequest(f"explicit-LAC body names ledger {body_ledger}, the path {ledger_id}")
        check_storable(ledger_id, lac=lac)
        state = self._existing_state(ledger_id)
        self._check_key(ledger_id, state, master_key)
        dtype = DigestType(state.digest_type) if state.digest_type else None
        if self.config.verify_digest and dtype is not None and dtype.verifiable \
                and not entry_mod.lac_digest_ok(body, dtype):
            raise BadDigest(f"explicit-LAC body digest does not match for ledger {ledger_id}")
        runtime = self._runtime_of(ledger_id)
        self._admit(len(body))
        if entry_mod.lac_body_advances(state.explicit_lac, body):
            self._store_state(ledger_id, state,
                              dataclasses.replace(state, explicit_lac=bytes(body)))
        self._journal_key_once(ledger_id, runtime, state.master_key)
        record = jformat.encode_explicit_lac(ledger_id, body)
        await asyncio.shield(self._submit(record, ledger_id, lac))
        return runtime.lac

    async def force(self, ledger_id: int, master_key: bytes) -> int:
        """Answer once every earlier add of the ledger, deferred-sync ones too, is durable."""
        self._check_serving()
        state = self._existing_state(ledger_id)
        self._check_key(ledger_id, state, master_key)
        if "io" in self.readonly_reasons:
            raise IOFailure(f"bookie is read-only after an I/O error: {self.failure}")
        runtime = self._runtime_of(ledger_id)
        await asyncio.shield(self._submit(None, ledger_id))
        return runtime.last_entry_id

    async def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        """The stored bytes; ``entry_id`` -1 reads the last entry (DESIGN.md §3.3)."""
        self._check_serving()
        self._existing_state(ledger_id)
        if entry_id == -1:
            last = self._runtime_of(ledger_id).last_entry_id
            if last < 0:
                raise NoEntry(f"ledger {ledger_id} has no entries")
            entry_id = last
        data = self.storage.get_cached(ledger_id, entry_id)
        if data is None:
            data = await self._loop.run_in_executor(self._reads, self.storage.get_entry,
                                                    ledger_id, entry_id)
        if data is None:
            raise NoEntry(f"entry {ledger_id}/{entry_id} is not stored on this bookie")
        return data

    async def read_lac(self, ledger_id: int, wait_for_gt: int | None = None,
                       timeout_ms: int = 0) -> int:
        """The LAC (N4); with ``wait_for_gt`` long-poll until it passes it or time runs out."""
        self._check_serving()
        self._existing_state(ledger_id)
        runtime = self._runtime_of(ledger_id)
        if wait_for_gt is None or runtime.lac > wait_for_gt or timeout_ms <= 0 \
                or self.state is BookieState.STOPPING:
            return runtime.lac
        if self._lac_waiters >= self.config.max_lac_waiters:
            raise TooManyRequests(f"{self._lac_waiters} LAC long polls are waiting already")
        future = self._loop.create_future()
        runtime.waiters.append((wait_for_gt, future))
        self._lac_waiters += 1
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000.0)
        except asyncio.TimeoutError:
            pass
        finally:
            self._lac_waiters -= 1
            runtime.waiters = [w for w in runtime.waiters if w[1] is not future]
        return runtime.lac

    def last_entry_id(self, ledger_id: int) -> int:
        self._existing_state(ledger_id)
        return self._runtime_of(ledger_id).last_entry_id

    def ledger_state(self, ledger_id: int) -> LedgerState:
        return self._existing_state(ledger_id)

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete a ledger: a synced tombstone before returning (§1.3); its entries stop
        being readable at once; later adds get NoLedger; GC reclaims the space."""
        self._check_serving()
        state = self.storage.ledgers.get(ledger_id)
        if state is None:
            raise NoLedger(f"ledger {ledger_id} is unknown to this bookie")
        if "io" in self.readonly_reasons:
            raise IOFailure(f"bookie is read-only after an I/O error: {self.failure}")
        if state.exists:
            await self._write_outside_checkpoint(self.storage.delete_ledger, ledger_id)
        runtime = self._runtime.pop(ledger_id, None)
        for _gt, future in (runtime.waiters if runtime else ()):
            if not future.done():
                future.set_result(None)

    def list_ledgers(self, start: int, limit: int) -> tuple[list[int], int | None]:
        """Live ledger ids >= start, at most ``limit``, and where the next page starts."""
        self._check_serving()
        ids = [i for i in self.storage.ledgers.ledger_ids(start, limit + 2)
               if i != SANITY_LEDGER_ID][:limit + 1]
        if len(ids) > limit:
            return ids[:limit], ids[limit]
        return ids, None

    async def sanity(self) -> dict:
        """Write and read back an entry of a reserved ledger through the real path."""
        self._check_serving()
        runtime = self._runtime_of(SANITY_LEDGER_ID)
        entry_id = runtime.last_entry_id + 1
        payload = f"sanity {time.time():.6f}".encode()
        data = entry_mod.frame_entry(SANITY_LEDGER_ID, entry_id, entry_id - 1, entry_id,
                                     payload)
        started = time.monotonic()
        await self.add_entry(SANITY_LEDGER_ID, entry_id, data, SANITY_KEY, DigestType.CRC32C)
        written = time.monotonic()
        back = await self.read_entry(SANITY_LEDGER_ID, entry_id)
        if back != data:
            raise IOFailure(f"sanity entry {entry_id} read back different bytes")
        return {"ok": True, "ledgerId": SANITY_LEDGER_ID, "entryId": entry_id,
                "writeMs": round((written - started) * 1000, 3),
                "readMs": round((time.monotonic() - written) * 1000, 3)}

    async def run_gc(self, force: str | None = None):
        """One garbage collection run now (``POST /v1/bookie/gc``), after a checkpoint so
        that deletes have reached the index; ``force`` "minor" or "major" also compacts now,
        suspended or not (bookie/gc.py G6)."""
        self._check_serving()
        if force not in (None, "minor", "major"):
            raise BadRequest(f"force must be minor or major, not {force!r}")
        self._check_gc_possible()
        # Shielded: a client that goes away never leaves a run half-driven.
        return await asyncio.shield(self._spawn_gc(force, checkpoint_first=True))

    def gc_status(self) -> dict:
        """``GET /v1/bookie/gc``: running, last run, totals, settings."""
        status = self.gc.status_json()
        status["diskWarn"] = self.disk_monitor.warn
        return status

    def set_gc_suspended(self, on: bool) -> dict:
        """Suspend or resume periodic GC and unforced compaction (in memory, like
        BookKeeper's suspendMajorGC/suspendMinorGC; a restart resumes)."""
        if on != self.gc.suspended:
            log.info("garbage collection %s by the operator", "suspended" if on else "resumed")
        self.gc.suspended = on
        return self.gc_status()

    def _check_gc_possible(self) -> None:
        if self.checkpoints is None or "io" in self.readonly_reasons:
            raise ReadOnly("garbage collection is not running")

    def _spawn_gc(self, force: str | None, checkpoint_first: bool) -> asyncio.Task:
        task = asyncio.ensure_future(self._gc_locked(force, checkpoint_first))
        # Retrieved here too, so a run cut short by shutdown is never an unretrieved error.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    async def _gc_locked(self, force: str | None, checkpoint_first: bool):
        async with self._gc_lock:
            self._check_gc_possible()
            if checkpoint_first:
                await asyncio.shield(asyncio.wrap_future(self.checkpoints.request()))
            return await self._drive_gc(force)

    async def _drive_gc(self, force: str | None):
        """Each step runs on the checkpoint thread (never during a checkpoint, DESIGN.md
        §3.4); throttle waits happen here, so checkpoints run meanwhile."""
        run = self.gc.begin(force, disk_warn=self.disk_monitor.warn)
        while True:
            future = self.checkpoints.submit(lambda: self._gc_step(run))
            wait, error = await asyncio.shield(asyncio.wrap_future(future))
            if error is not None:
                self.fail_io(error)  # the index or the ledger dir failed (§1.5)
                raise error
            if wait is None:
                self.last_gc = run.result
                return run.result
            if wait > 0:
                await asyncio.sleep(wait)

    def _gc_step(self, run):
        """On the checkpoint thread: one GC step; its I/O error is returned, not raised."""
        try:
            return self.gc.step(run), None
        except IOFailure as exc:
            return None, exc

    async def _gc_periodically(self) -> None:
        interval = self.config.gc_interval_ms / 1000.0
        while True:
            await asyncio.sleep(interval)
            if self.gc.suspended or self.state not in (BookieState.WRITABLE,
                                                       BookieState.READ_ONLY) \
                    or "io" in self.readonly_reasons:
                continue
            try:
                await asyncio.shield(self._spawn_gc(None, checkpoint_first=False))
            except asyncio.CancelledError:
                raise
            except Exception:  # reported; the next period tries again
                log.exception("periodic garbage collection failed")

    async def checkpoint(self):
        """Run a checkpoint now and return its result (``POST /v1/bookie/checkpoint``)."""
        self._check_serving()
        if self.checkpoints is None:
            raise ReadOnly("bookie is not running checkpoints")
        return await asyncio.wrap_future(self.checkpoints.request())

    async def wait_ready(self) -> None:
        await self._ready.wait()

    async def read_range(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        """Entries first..last, at most ``max_read_batch`` or 8 MiB, stopping where the
        ledger ends; the first one missing is NoEntry."""
        self._check_serving()
        self._existing_state(ledger_id)
        last = min(last, first + self.config.max_read_batch - 1)
        found = await self._loop.run_in_executor(self._reads, self._read_range_sync,
                                                 ledger_id, first, last)
        if not found:
            raise NoEntry(f"entry {ledger_id}/{first} is not stored on this bookie")
        return found

    def _read_range_sync(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        found, size = [], 0
        for entry_id in range(first, last + 1):
            data = self.storage.get_entry(ledger_id, entry_id)
            if data is None or (found and size + len(data) > READ_BATCH_BYTES_MAX):
                break
            found.append(data)
            size += len(data)
        return found

    async def ledger_info(self, ledger_id: int) -> dict:
        self._check_serving()
        state = self._existing_state(ledger_id)
        runtime = self._runtime_of(ledger_id)
        entries, size = await self._ledger_usage(ledger_id)
        return {"ledgerId": ledger_id, "fenced": state.fenced, "lac": runtime.lac,
                "lastEntryId": runtime.last_entry_id, "entries": entries, "bytes": size}

    async def _ledger_usage(self, ledger_id: int) -> tuple[int, int]:
        """O(cached entries), off the loop; a ledger whose counters are not known (a crash
        mid-checkpoint, an older data dir) is recounted once, on the checkpoint thread."""
        usage = await self._loop.run_in_executor(self._reads, self.storage.ledger_usage,
                                                 ledger_id)
        if usage is None:
            await asyncio.wrap_future(self.checkpoints.submit(
                lambda: self.storage.recount_usage(ledger_id)))
            usage = await self._loop.run_in_executor(self._reads, self.storage.ledger_usage,
                                                     ledger_id)
        return usage if usage is not None else (0, 0)

    def info(self) -> dict:
        journal = self.journal
        mark = self._checkpointer.persisted if hasattr(self, "_checkpointer") else None
        return {
            "version": __version__,
            "state": self.state.value,
            "readOnlyReasons": sorted(self.readonly_reasons),
            "failure": self.failure,
            "dirs": {"journal": self.config.journal_dir, "ledgers": self.config.ledger_dir},
            "freeBytes": self._free_bytes(),
            "currentJournalId": journal.current_journal_id if journal else None,
            "currentEntryLogId": self.storage.entry_logger.current_log_id,
            "lastMark": [mark.journal_id, mark.offset] if mark else None,
            "replay": self.replay_report.to_json() if self.replay_report else None,
            "instanceId": (self.identity or {}).get("instanceId"),
            "disks": {name: {"path": u.path, "totalBytes": u.total_bytes,
                             "freeBytes": u.free_bytes, "level": u.level.value}
                      for name, u in self.disk_monitor.usage.items()},
            "lastCheckpoint": _checkpoint_json(self.last_checkpoint),
            "lastGc": self.last_gc.to_json() if self.last_gc else None,
        }

    def _free_bytes(self) -> dict:
        free = {}
        for name, path in (("journal", self.config.journal_dir),
                           ("ledgers", self.config.ledger_dir)):
            try:
                free[name] = self.disk.free_bytes(path)
            except OSError:
                free[name] = None
        return free


READ_BATCH_BYTES_MAX = 8 * 1024 * 1024


def check_storable(ledger_id: int, entry_id: int | None = None, lac: int | None = None) -> None:
    """Refuse (400 EBADREQ) before journaling any id the indexes cannot store (issue 13
    bug 1: an acknowledged entry 2**63-1 failed every later checkpoint and every replay,
    so the bookie never started again). The ranges come from ledgerindex/keys.py only."""
    if not 0 <= ledger_id <= keys.LEDGER_ID_MAX:
        raise BadRequest(f"ledger id {ledger_id} is not in 0..{keys.LEDGER_ID_MAX}")
    if entry_id is not None and not 0 <= entry_id <= keys.ENTRY_ID_MAX:
        raise BadRequest(f"entry id {entry_id} is not in 0..{keys.ENTRY_ID_MAX}: the index "
                         f"cannot store it")
    if lac is not None and not keys.LAC_MIN <= lac <= keys.ENTRY_ID_MAX:
        raise BadRequest(f"LAC {lac} of ledger {ledger_id} is not in "
                         f"{keys.LAC_MIN}..{keys.ENTRY_ID_MAX}")


def _checkpoint_json(result) -> dict | None:
    if result is None:
        return None
    return {"lastMark": [result.mark.journal_id, result.mark.offset], "entries": result.entries,
            "bytes": result.bytes, "journalsDeleted": list(result.journals_deleted),
            "phaseSeconds": {k: round(v, 6) for k, v in result.phase_s.items()}}
