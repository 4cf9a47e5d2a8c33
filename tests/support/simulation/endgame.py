"""The end of a run (scenario.py's ``_Run`` takes these methods): the return phase (a bookie
back with its old id after a worker replaced it, then another lost for good), the repair
rounds, and the final checks on the healed cluster.

Invariant:
    EG1. The final checks run on a healed cluster (FI2) after GC had its grace and a run
         more (``final_gc_s``), so a copy GC must delete is gone, and one it must keep is
         still there: S1 after GC and DL1 are decided, not racing a GC run.
    EG2. At Qa=1 no bookie is lost for good: an entry acknowledged by one bookie, at or
         below the LAC, is written back by no recovery (only entries above the LAC are) and
         copied by no worker until a bookie is marked, so its one copy may be all there is
         (BookKeeper promises no more), and losing that bookie for good loses it. S1 is
         checked at Qa=1 across crashes, pauses and returns, which keep durable data.
"""

from __future__ import annotations

import asyncio

from api.client.fragments import referenced_bookies
from api.cluster.autorecovery.throttle import Throttle
from api.cluster.autorecovery.worker import ReplicationWorker
from tests.support.simulation.clients import CLIENT_ERRORS, PASSWORD
from tests.support.simulation.gc import GC_EVERY_S
from tests.support.simulation.topology import check_placement, offered

#: The reader processes of the final check (the second reads in batches, RD3).
FINAL_READERS = ("reader#1", "reader#2")


class Endgame:
    """A mixin of scenario.py's ``_Run``: it holds the run's plan, network, store, checker."""

    def final_gc_s(self) -> float:
        """EG1: long enough for a GC run past its grace when a ledger was deleted."""
        if not self.gcs:
            return 0.0
        if not self.side.deleted_any():
            return 3.0
        return max(3.0, (self.plan.gc_grace or 0.0) + 2 * GC_EVERY_S[1] + 0.5)

    # -- a bookie back with its old id (GM2, W5) ----------------------------------------

    async def _return(self) -> None:
        plan = self.plan
        metadata = await self.store.harness_read(self.ledger_id)
        if not metadata.closed:
            return
        named = sorted(referenced_bookies(metadata))
        returning = named[plan.return_pick % len(named)]
        bookie = self.net.bookies[returning]
        self.trace(f"RETURN crash {returning}: a worker replaces it while it is down")
        bookie.crash()
        self.ur.mark(self.ledger_id, [returning])  # the auditor saw it go
        await self.processes.spawn("worker#return", self._worker_run("worker#return"))
        bookie.restart()
        metadata = await self.store.harness_read(self.ledger_id)
        replaced = returning not in referenced_bookies(metadata)
        self.returns += replaced
        self.trace(f"RETURN restart {returning} with its old id and data "
                   f"({'replaced: its copy is over-replicated' if replaced else 'still named'})")
        await asyncio.sleep(plan.return_wait)  # noqa: sleep-ok (virtual time: the plan's wait)
        if plan.ack_quorum == 1:  # EG2
            self.trace("LOSE none for good: at Qa=1 one copy may be all there is")
            return
        metadata = await self.store.harness_read(self.ledger_id)
        others = sorted(b for b in referenced_bookies(metadata) if b != returning)
        if not others:
            return
        lost = others[plan.lose_pick % len(others)]
        self.trace(f"LOSE {lost} for good")
        self.net.bookies[lost].crash()
        self.lost.add(lost)
        self.ur.mark(self.ledger_id, [lost])
        self.side.lost(lost)  # the auditor marks the other ledgers it held too
        await self.processes.spawn("worker#lose", self._worker_run("worker#lose"))

    async def _repair(self) -> None:
        """Workers take what is still marked, a few rounds apart (LIVE: no wedge). With
        other ledgers, one worker for all rounds, a pass per ledger in each: its retry
        back-off skips a ledger that just failed, as a long-lived worker's does, so one ledger
        failing again does not starve the others."""
        worker = None
        for attempt in range(4):
            if not self.ur.marked():
                return
            name = f"worker#repair{attempt}"
            if self.plan.side_ledgers:
                worker = worker or ReplicationWorker(
                    self.bk("worker#repair"), self.ur, grace_s=0.0, throttle=Throttle(0),
                    wake=asyncio.Event(), clock=asyncio.get_running_loop().time,
                    repair_placement=bool(self.plan.topology))
            for _ in range(1 + self.plan.side_ledgers):
                await self.processes.spawn(name, self._worker_run(name, worker))
            await asyncio.sleep(1.0)  # noqa: sleep-ok (virtual time between repair rounds)

    # -- the end -------------------------------------------------------------------------

    async def _final(self) -> None:
        metadata = await self.store.harness_read(self.ledger_id)
        replicas = {bookie_id: dict(bookie.memory[self.ledger_id].entries)
                    for bookie_id, bookie in self.net.bookies.items()
                    if self.ledger_id in bookie.memory}
        reads = {}
        if metadata.closed:
            for name in FINAL_READERS:
                reads[name] = await self._read_all(name, metadata.last_entry_id)
        self.checker.final(metadata, replicas, reads)
        up = {b for b, bookie in self.net.bookies.items() if not bookie.down}
        copies = {b: (bookie.memory[self.ledger_id].deleted,
                      set(bookie.memory[self.ledger_id].entries))
                  for b, bookie in self.net.bookies.items() if self.ledger_id in bookie.memory}
        deleted = {b: gc.deleted.get(self.ledger_id, set()) for b, gc in self.gcs.items()}
        self.checker.gc_kept_named_copies(metadata, copies, deleted, up)
        self.checker.not_wedged(metadata, self.ur.marker(self.ledger_id), up,
                                offered(self))
        await self.side.final(up)
        if self.plan.topology:
            await check_placement(self)  # TOPO

    async def _read_all(self, name: str, last: int,
                        ledger_id: int | None = None) -> dict[int, bytes | None]:
        ledger_id = self.ledger_id if ledger_id is None else ledger_id
        reader = await self.bk(name).open_ledger(ledger_id, PASSWORD)
        seen: dict[int, bytes | None] = {}
        if name == "reader#2" and last >= 0:  # the batched read (RD3), as far as it goes
            try:
                async for entry in reader.read_range(0, last):
                    seen[entry.entry_id] = entry.payload
            except CLIENT_ERRORS:
                pass
        for entry_id in range(len(seen), last + 1):
            try:
                seen[entry_id] = (await reader.read_entry(entry_id)).payload
            except CLIENT_ERRORS:
                seen[entry_id] = None
        return seen


