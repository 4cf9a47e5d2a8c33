"""Driving garbage collection from the loop: requested and periodic runs, one at a time.

Every GC step runs on the checkpoint thread, never during a checkpoint (docs/design.md §3.4);
throttle waits happen on the loop, so checkpoints run between steps.
"""

from __future__ import annotations

import asyncio
import logging

from bookie.errors import BadRequest, IOFailure, ReadOnly
from bookie.state import BookieState

log = logging.getLogger("bookie.node")


class GcDriver:
    """Mixin of ``Bookie``: ``POST/GET/PUT /v1/bookie/gc`` and the periodic run."""

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

    def force_gc_when_full(self) -> None:
        """G6 with gc_force_when_full: a dir just went over the warn threshold, so a run
        that compacts starts now (BookKeeper's enableForceGC), unless one is going, GC is
        suspended, or the bookie is not serving yet (its first periodic run comes)."""
        if not self.config.gc_force_when_full or self.gc.suspended or self._gc_lock.locked() \
                or self.checkpoints is None or "io" in self.readonly_reasons \
                or self.state not in (BookieState.WRITABLE, BookieState.READ_ONLY):
            return
        log.warning("disk over the warn threshold with gc_force_when_full: compacting now")
        self._spawn_gc(None, checkpoint_first=True)

    def _check_gc_possible(self) -> None:
        if self.checkpoints is None or "io" in self.readonly_reasons:
            raise ReadOnly("garbage collection is not running")

    def _spawn_gc(self, force: str | None, checkpoint_first: bool) -> asyncio.Task:
        task = asyncio.ensure_future(self._gc_locked(force, checkpoint_first))
        # Retrieved here too, so a run cut short by shutdown is never an unretrieved error.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    def add_gc_prelude(self, prelude) -> None:
        """``await prelude()`` before every GC run, periodic or requested (a cluster bookie
        deletes there the ledgers its metadata no longer lists)."""
        self._gc_preludes.append(prelude)

    async def _gc_locked(self, force: str | None, checkpoint_first: bool):
        async with self._gc_lock:
            self._check_gc_possible()
            for prelude in self._gc_preludes:
                await prelude()
            if checkpoint_first or self._gc_preludes:  # a prelude's deletes reach the index
                await asyncio.shield(asyncio.wrap_future(self.checkpoints.request()))
            return await self._drive_gc(force)

    async def _drive_gc(self, force: str | None):
        """Each step runs on the checkpoint thread (never during a checkpoint, docs/design.md
        §3.4); throttle waits happen here, so checkpoints run meanwhile."""
        run = self.gc.begin(force, disk_warn=self.disk_monitor.warn_ledger_dirs())  # G6 per dir
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
