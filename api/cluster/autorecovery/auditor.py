"""The auditor (BookKeeper's Auditor, docs/cluster.md §4): one per cluster, while elected.

Each round (on a change of ``available/`` or ``available/readonly/``, or every
AUDIT_INTERVAL_S) it reads who is alive (writable or read-only), notes since when each
bookie it knows of is gone, and once one has been gone ``lostBookieRecoveryDelay`` seconds
(ZooKeeper's value, the setting stored there first) marks every ledger whose ensembles name
it. Bookies being decommissioned count as lost at once. The replica check runs every
``replicas_check_interval_s`` (its last run is in ZooKeeper, so a new auditor keeps the
rhythm); the placement check every ``placement_check_interval_s`` (placement_check.py).

Invariants:
    AU1. Marking is idempotent (UR1): a new auditor that takes over mid-marking marks the
         same ledgers again and loses nothing; it learns the gone bookies from the
         metadata (referenced, not alive), and starts their delay when it takes over.
    AU2. Nothing is marked while autorecovery is disabled (BookKeeper skips its audits).
    AU3. A bookie is forgotten once no ledger's metadata names it any more.
    AU4. BookKeeper's ``triggeraudit`` (and its ``decommissionbookie``, which calls it)
         rewrites lostBookieRecoveryDelay with the value it has; a rewrite to the same
         value, or to 0, makes every bookie gone now lost at once, whatever the delay
         (BookKeeper's Auditor: "reset to its previous value, so starting AuditTask"). It
         waits, as BookKeeper's does, while autorecovery is disabled.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from api.client.ensemble import BookKeeper
from api.client.fragments import referenced_bookies
from api.client.zookeeper import zk_call, zk_watch
from api.cluster.autorecovery.placement_check import PlacementReport, check_placement
from api.cluster.autorecovery.replica_check import check_ledgers
from api.cluster.underreplication import Underreplication
from bookie.errors import NoLedger

log = logging.getLogger("api.cluster.autorecovery")
AUDIT_INTERVAL_S = 1.0
#: While lost bookies are still referenced, the metadata is scanned again this often (new
#: markers for ledgers a writer moved meanwhile are cheap: UR1 writes nothing twice).
RESCAN_INTERVAL_S = 5.0
#: Fault injection for the failover test only (tests/cluster/test_autorecovery.py): a pause
#: after each marker, so that the auditor's process can be killed mid-marking for sure.
MARK_PAUSE_S = float(os.environ.get("BKTEST_AUDITOR_MARK_PAUSE_S", "0"))


class Auditor:
    def __init__(self, bk: BookKeeper, ur: Underreplication, delay_default_s: int,
                 replicas_check_interval_s: int, wake: asyncio.Event,
                 placement_check_interval_s: int = 0) -> None:
        self.bk, self.ur = bk, ur
        self.placement_check_interval_s = placement_check_interval_s
        self.placement_report: PlacementReport | None = None  # the last placement check
        self._placement_due = time.monotonic() + placement_check_interval_s
        self.delay_default_s = delay_default_s
        self.replicas_check_interval_s = replicas_check_interval_s
        self.wake = wake
        self.gone_since: dict[str, float] = {}
        self.known: set[str] = set()  # bookies seen alive or named by metadata
        self._last_scan = 0.0
        self._lost_scanned: frozenset = frozenset()
        self._delay_written: tuple[int, int] | None = None  # AU4: (seconds, znode version)
        #: bookie -> (lost or being decommissioned, ledgers naming it) as last logged at INFO:
        #: the rescans every RESCAN_INTERVAL_S say it again only at DEBUG (issue 54).
        self._reported: dict[str, tuple[str, int]] = {}

    async def run(self, still_elected) -> None:
        """Audit until ``still_elected()`` (a coroutine function) says otherwise."""
        await asyncio.to_thread(self.ur.lost_bookie_delay_s, self.delay_default_s)
        self._stopped = False
        await asyncio.to_thread(self._watch, asyncio.get_running_loop())
        await self._learn_gone_from_metadata()
        try:
            await self._rounds(still_elected)
        finally:
            self._stopped = True  # the watches end at their next event

    async def _rounds(self, still_elected) -> None:
        while await still_elected():
            self.wake.clear()
            try:
                await self.audit_once()
                await self._maybe_check_replicas()
                await self._maybe_check_placement()
            except Exception:  # noqa: BLE001 - a lost session, a restart: next round
                log.exception("audit round failed; retrying")
            try:
                await asyncio.wait_for(self.wake.wait(), AUDIT_INTERVAL_S)
            except asyncio.TimeoutError:
                pass

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Membership changes wake the loop at once (kazoo's thread -> the loop)."""
        def changed(children) -> bool:
            loop.call_soon_threadsafe(self.wake.set)
            return not self._stopped
        root = self.bk.store.root
        for path in (f"{root}/available", f"{root}/available/readonly"):
            zk_call(self.bk.store.client.ensure_path_async, path)
            zk_watch(self.bk.store.client, "ChildrenWatch", path, changed)

    async def _alive(self) -> set[str]:
        return await self.bk.alive_bookies()

    async def _learn_gone_from_metadata(self) -> None:
        """AU1: after a failover, the bookies metadata names that are not alive are gone
        from now on (this auditor never saw them leave)."""
        alive = await self._alive()
        now = time.monotonic()
        self.known = set(alive)
        for bookie_id in (await self._references()):
            if bookie_id not in alive:
                self.gone_since.setdefault(bookie_id, now)

    def _triggered(self, written: tuple[int, int] | None) -> None:
        """AU4: a trigger makes the gone bookies lost for good (until they come back).
        Called only while autorecovery is enabled: a rewrite stays unseen until then."""
        before, self._delay_written = self._delay_written, written
        if before is None or written is None or written[1] == before[1]:
            return
        if written[0] in (0, before[0]):
            log.info("auditor: audit triggered (lostBookieRecoveryDelay rewritten as %d s): "
                     "gone bookies %s are lost now", written[0], sorted(self.gone_since))
            for bookie_id in self.gone_since:
                self.gone_since[bookie_id] = float("-inf")
            self._lost_scanned = frozenset()

    async def _references(self) -> dict[str, set[int]]:
        """bookie id -> the ledgers whose ensembles name it (one metadata scan)."""
        found: dict[str, set[int]] = {}
        for ledger_id in await self.bk.store.ledger_ids():
            try:
                metadata = await self.bk.store.read(ledger_id)
            except NoLedger:
                continue  # deleted meanwhile
            for bookie_id in referenced_bookies(metadata):
                found.setdefault(bookie_id, set()).add(ledger_id)
        self._last_scan = time.monotonic()
        return found

    async def audit_once(self) -> int:
        """One round; returns the number of markers written."""
        alive = await self._alive()
        now = time.monotonic()
        for bookie_id in alive:
            self.gone_since.pop(bookie_id, None)
            self._reported.pop(bookie_id, None)  # back: a new loss is news again
        for bookie_id in self.known - alive:  # seen alive before, gone now
            self.gone_since.setdefault(bookie_id, now)
        self.known |= alive
        decommissioning = await asyncio.to_thread(self.ur.decommissioning)
        enabled = await asyncio.to_thread(self.ur.enabled)
        written = await asyncio.to_thread(self.ur.lost_bookie_delay_written)
        delay = written[0] if written is not None else 0
        if enabled:
            self._triggered(written)
        lost = {b for b, since in self.gone_since.items() if now - since >= delay}
        lost |= decommissioning
        if not lost or not enabled:  # AU2
            return 0
        if lost == self._lost_scanned and now - self._last_scan < RESCAN_INTERVAL_S:
            return 0
        references = await self._references()
        self._lost_scanned = frozenset(lost)
        marked = 0
        for bookie_id in sorted(lost):
            ledgers = references.get(bookie_id, set())
            if not ledgers and bookie_id not in decommissioning:
                self.gone_since.pop(bookie_id, None)  # AU3
                self.known.discard(bookie_id)
                self._reported.pop(bookie_id, None)
                continue
            newly = 0
            for ledger_id in sorted(ledgers):
                if await asyncio.to_thread(self.ur.mark, ledger_id, [bookie_id]):
                    newly += 1
                    if MARK_PAUSE_S:
                        await asyncio.sleep(MARK_PAUSE_S)  # noqa: sleep-ok (fault injection)
            marked += newly
            if ledgers:
                self._say_lost(bookie_id, "being decommissioned" if bookie_id in
                               decommissioning else "lost", len(ledgers), newly)
        # bookies only named by metadata that this auditor never saw alive
        for bookie_id in references:
            if bookie_id not in alive:
                self.gone_since.setdefault(bookie_id, now)
        return marked

    def _say_lost(self, bookie_id: str, kind: str, ledgers: int, newly: int) -> None:
        """INFO when something changed (new markers, another count, first time), else
        DEBUG: a bookie lost for an hour is said once, not every RESCAN_INTERVAL_S."""
        news = newly or self._reported.get(bookie_id) != (kind, ledgers)
        self._reported[bookie_id] = (kind, ledgers)
        log.log(logging.INFO if news else logging.DEBUG,
                "auditor: bookie %s is %s; %d ledgers name it (%d newly marked)",
                bookie_id, kind, ledgers, newly)

    async def _maybe_check_replicas(self) -> None:
        interval = self.replicas_check_interval_s
        if interval <= 0 or not await asyncio.to_thread(self.ur.enabled):
            return
        last = await asyncio.to_thread(self.ur.replicas_check_ctime_ms)
        if last is not None and time.time() * 1000 - last < interval * 1000:
            return
        await self.check_replicas()

    async def _maybe_check_placement(self) -> None:
        """Every placement_check_interval_s of this auditor's reign, while enabled (AU2)."""
        interval = self.placement_check_interval_s
        if interval <= 0 or time.monotonic() < self._placement_due or \
                not await asyncio.to_thread(self.ur.enabled):
            return
        self._placement_due = time.monotonic() + interval

        async def mark(ledger_id: int) -> bool:
            return await asyncio.to_thread(self.ur.mark, ledger_id, [])
        self.placement_report = await check_placement(
            self.bk, await self.bk.store.ledger_ids(), mark)

    async def check_replicas(self):
        alive = await self._alive()

        async def mark(ledger_id: int, bookies) -> None:
            await asyncio.to_thread(self.ur.mark, ledger_id, bookies)
        result = await check_ledgers(self.bk, await self.bk.store.ledger_ids(), alive, mark)
        await asyncio.to_thread(self.ur.set_replicas_check_ctime_ms, int(time.time() * 1000))
        log.info("replica check: %d ledgers in %.1f s, %d missing copies (%s)",
                 result.ledgers, result.seconds, len(result.missing),
                 sorted(result.missing)[:20])
        return result
