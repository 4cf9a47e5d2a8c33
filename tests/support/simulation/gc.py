"""GC from metadata on each in-memory bookie: the real MetadataGc (api/cluster/gc_metadata.py)
run periodically on virtual time, its ``delete`` the bookie's own delete (a synced tombstone),
its ``listed`` the bookie's ``may_revive`` (W5).

Invariants:
    SG1. A bookie's GC is part of its process: it runs only while the bookie is up and not
         paused, a crash kills the run in progress (a delete after the crash is refused)
         and the restarted bookie starts a new MetadataGc (a restart forgets, GM1).
    SG2. The GC reads the metadata over its own connection with its own seeded delays
         (``GcStoreView``), so adding GC does not shift the run's other random choices; a
         read's answer is sometimes slow to come back (GC busy with other ledgers, a slow
         ZooKeeper): the metadata GC acts on may be stale, which is what its lock is for.
    SG3. Every GC delete is traced with the entries it took (``deleted``), so the checker
         can tell a named copy lost to GC from an entry never written there.
"""

from __future__ import annotations

import asyncio
import random

from api.cluster.gc_metadata import MetadataGc
from bookie.errors import NoLedger
from tests.support.simulation.bookie import SimBookie
from tests.support.simulation.trace import Trace

#: Seconds between a bookie's GC runs (uniform) and the chance and range of a slow answer.
GC_EVERY_S = (0.5, 2.0)
SLOW_P, SLOW_S, FAST_S = 0.25, (0.02, 0.3), (0.0005, 0.005)


class GcStoreView:
    """SG2: the LedgerMetadataStore calls MetadataGc makes, on the store's state."""

    def __init__(self, store, rng: random.Random) -> None:
        self.store, self.rng = store, rng

    async def _hop(self, slow: bool = False) -> None:
        span = SLOW_S if slow and self.rng.random() < SLOW_P else FAST_S
        await asyncio.sleep(self.rng.uniform(*span))  # noqa: sleep-ok (virtual time: a network hop)

    async def ledger_ids(self) -> list[int]:
        await self._hop()
        found = sorted(self.store.ledgers)
        await self._hop(slow=True)
        return found

    async def read(self, ledger_id: int):
        await self._hop()
        found = self.store.ledgers.get(ledger_id)
        await self._hop(slow=True)
        if found is None:
            raise NoLedger(f"ledger {ledger_id} has no metadata")
        return found


class BookieGc:
    """SG1-SG3 for one bookie."""

    def __init__(self, bookie: SimBookie, store, ur, grace_s: float, rng: random.Random,
                 trace: Trace) -> None:
        self.bookie, self.ur, self.grace_s, self.rng, self.trace = bookie, ur, grace_s, rng, \
            trace
        self.view = GcStoreView(store, rng)
        self.deletes = 0
        self.deleted: dict[int, set[int]] = {}  # ledger -> entry ids GC deleted here
        self._gc: MetadataGc | None = None
        self._epoch = -1
        bookie.may_revive = self._listed

    async def _listed(self, ledger_id: int) -> bool:
        return await self._current().listed(ledger_id)

    def _current(self) -> MetadataGc:
        if self._gc is None or self._epoch != self.bookie.epoch:  # SG1: a restart forgets
            self._epoch = self.bookie.epoch
            self._gc = MetadataGc(self.bookie.bookie_id, self.view, self.ur, self.grace_s,
                                  self._delete_in(self.bookie.epoch),
                                  clock=asyncio.get_running_loop().time)
        return self._gc

    def _delete_in(self, epoch: int):
        async def delete(ledger_id: int) -> None:
            await self.bookie.running.wait()
            if self.bookie.down or self.bookie.epoch != epoch:
                raise ConnectionAbortedError("the bookie crashed during its GC run")  # SG1
            ledger = self.bookie.memory.get(ledger_id)
            held = set(ledger.entries) if ledger is not None else set()
            self.deleted.setdefault(ledger_id, set()).update(held)
            self.trace(f"GC {self.bookie.bookie_id}: deletes L{ledger_id} "
                       f"(held {len(held)} entries)")
            try:
                await self.bookie.delete_ledger(ledger_id)
            except asyncio.CancelledError:
                if self.bookie.epoch == epoch:
                    raise
                raise ConnectionAbortedError("the bookie crashed during the delete") from None
            self.deletes += 1
        return delete

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.rng.uniform(*GC_EVERY_S))  # noqa: sleep-ok (virtual)
            if self.bookie.down:
                continue
            await self.bookie.running.wait()
            gc = self._current()
            local = sorted(i for i, ledger in self.bookie.memory.items() if not ledger.deleted)
            try:
                await gc.run(local)
            except (OSError, NoLedger):
                pass  # SG1: crashed meanwhile (or the ledger went): the next run
