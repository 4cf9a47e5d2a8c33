"""Disk usage and the operator's read-only flag: the two reasons that come and go.

A durable write made outside the checkpoint (the flag, a deletion's tombstone) fails like
every other: the bookie turns read-only ``io`` (docs/design.md §1.5).
"""

from __future__ import annotations

import asyncio
import logging
import os

from bookie.disk import atomic_replace
from bookie.errors import IOFailure

log = logging.getLogger("bookie.node")

OPERATOR_READONLY = "READONLY"   # in the ledger dir's current/: the operator's flag


class DiskWatch:
    """Mixin of ``Bookie``: the disk monitor loop, the operator flag, free bytes."""

    @property
    def _operator_flag_path(self) -> str:
        return f"{self.config.ledger_dir}/{OPERATOR_READONLY}"

    def check_disks_before_replay(self) -> None:
        """PL2 through a restart: the full ledger dirs are known before replay places a
        ledger. A ledger placed off its full hashed dir whose state no checkpoint wrote yet
        (a kill -9) is placed again by replay; with no dir known full it went back to the
        full one for good (issue 58's review). On the replay thread; nothing else runs."""
        try:
            self.disk_monitor.poll(self.disk.usage)
        except OSError as exc:
            log.error("disk usage check before replay failed: %s", exc)
            return
        self._place_off_full(self.disk_monitor.full_ledger_dirs())

    def poll_disks(self) -> None:
        """One disk-usage check: full -> READ_ONLY(full); back under the low water -> clear."""
        was_warn = getattr(self, "_warn_said", False)
        try:
            full = self.disk_monitor.poll(self.disk.usage)
        except OSError as exc:
            log.error("disk usage check failed: %s", exc)
            return
        self._warn_said = self.disk_monitor.warn
        if self.disk_monitor.warn and not was_warn:
            log.warning("disk usage over the warn threshold: %s", self._usage_text())
            self.force_gc_when_full()
        self._place_off_full(self.disk_monitor.full_ledger_dirs())
        if full != ("full" in self.readonly_reasons):
            log.warning("disk %s: %s", "full" if full else "usable again", self._usage_text())
            self.set_readonly("full", full)

    def _place_off_full(self, full_dirs: set[int]) -> None:
        """PL2: a full ledger dir takes no new ledgers while another can."""
        placement = self.storage.placement
        if full_dirs != placement.full and len(placement.units) > 1:
            log.warning("ledger dirs full (or their index dirs), taking no new ledgers: %s",
                        [placement.units[i].ledger_dir for i in sorted(full_dirs)] or "none")
        placement.full = full_dirs

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
        makes the bookie read-only ``io`` like every other write failure (docs/design.md §1.5),
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

    def ledger_space(self) -> tuple[int, int]:
        """(total, free) bytes over the ledger dirs' file systems, each counted once (as
        BookKeeper's getTotalDiskSpace and getTotalFreeSpace); the bookie info request's."""
        seen, total, free = set(), 0, 0
        for path in self.config.ledger_dirs_current:
            while not os.path.isdir(path) and os.path.dirname(path) != path:
                path = os.path.dirname(path)  # before the first start made it: its parent's
            device = os.stat(path).st_dev
            if device not in seen:
                seen.add(device)
                size, left = self.disk.usage(path)
                total, free = total + size, free + left
        return total, free

    def free_bytes(self) -> dict:
        """Free bytes of every journal, ledger and index dir's file system (None if
        unknown), by the disk monitor's names (``journal``, ``ledgers``, ``ledgers.1``,
        ``index``...)."""
        free = {}
        for name, path in self.disk_monitor.paths.items():
            try:
                free[name] = self.disk.free_bytes(path)
            except OSError:
                free[name] = None
        return free
