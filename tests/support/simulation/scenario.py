"""Run one seed's plan (plan.py) on a virtual-time loop against the real client code
(EnsembleWriter, Recovery, EnsembleReader, ReplicationWorker, MetadataGc on every bookie),
and check it (checker.py).

After the plan's phases and a full heal: the return phase (plan.returns), then repair rounds
(workers take whatever is still marked under-replicated), a few seconds of GC on the final
state, and the final checks (endgame.py): S1-S5, S1 after GC, LIVE (closed, and no wedged
marker), per ledger (ledgers.py), DL1 for deleted ones. Beside the main ledger's story: a
zombie writer (zombie.py), a wrong password (intruder.py), BookKeeper's recovery framing
(network.py), ZooKeeper faults (metadata.py SM4-SM6), all chosen by late.py.

Determinism (SC1): the plan comes from ``random.Random(seed)``, the run's delays from its
own ``random.Random``, and the global ``random`` (the client's ``random.sample`` and
``random.choice``) is seeded at the start; the loop is virtual (loop.py VL2). Two runs of a
seed give the same trace.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import random

from api.cluster.autorecovery.throttle import Throttle
from api.cluster.autorecovery.worker import ReplicationWorker
from api.client.ensemble import BookKeeper
from api.client.placement import PlacementCounts
from tests.support.simulation.checker import Checker
from tests.support.simulation.clients import CLIENT_ERRORS, PASSWORD, TIMEOUTS
from tests.support.simulation.endgame import Endgame
from tests.support.simulation.faults import FaultInjector
from tests.support.simulation.gc import BookieGc
from tests.support.simulation.intruder import Intruder
from tests.support.simulation.late import make_plan
from tests.support.simulation.ledgers import SideLedgers
from tests.support.simulation.loop import Stuck, VirtualTimeLoop
from tests.support.simulation.metadata import SimMetadataStore, SimUnderreplication
from tests.support.simulation.network import SimNetwork, SimTransport
from tests.support.simulation.plan import Plan
from tests.support.simulation.processes import Processes, detached
from tests.support.simulation.topology import layout, lose_rack, placement_of, topology_plan
from tests.support.simulation.trace import Trace
from tests.support.simulation.zombie import GatedStore, Zombie

#: A writer that has not finished by then (pauses that outlast its ensemble changes) is
#: killed; a run whose virtual time passes RUN_MAX_S is stuck (loop.py VL3): a violation.
WRITE_PHASE_MAX_S, RUN_MAX_S = 10.0, 600.0


@dataclasses.dataclass
class Outcome:
    plan: Plan
    trace: Trace
    violations: list[str]
    acked: int
    recoveries: int
    faults: collections.Counter
    gc_deletes: int = 0  # GC deletes (GM2: the ledger is always listed)
    returns: int = 0  # bookies back with their old id after a worker replaced them
    revived: int = 0  # tombstones a recovery add lifted (W5)
    zombies: int = 0  # zombie writers resumed after recovery closed their ledger
    wrong_password_refusals: int = 0  # Unauthorized answers to the intruder
    deletes: int = 0  # other ledgers deleted from the metadata (DL1 checked)
    rack_losses: int = 0  # whole racks lost for good (topology.py RACK)
    reframed: int = 0  # recovery adds framed again with another LAC (W6)
    zk_errors: int = 0  # ZkUnavailable raised to a caller (SM4-SM6)

    @property
    def failed(self) -> bool:
        return bool(self.violations)


class _Run(Endgame):
    def __init__(self, plan: Plan, loop: VirtualTimeLoop) -> None:
        self.plan, self.loop = plan, loop
        self.trace = Trace()
        self.rng = random.Random(f"run-{plan.seed}")
        self.net = SimNetwork(self.rng, self.trace, drop_p=plan.drop_p)
        for bookie_id in plan.bookies:
            self.net.add_bookie(bookie_id)
        self.net.reframe = plan.reframe
        self.store = SimMetadataStore(self.rng, self.trace)
        self.checker = Checker(self.trace)
        self.faults = FaultInjector(self.net, self.trace, self._last_segment, self.store)
        self.processes = Processes(loop)
        self.ledger_id = -1
        self.recoveries = 0
        self.acked_event = asyncio.Event()
        self.ur = SimUnderreplication(self.trace)  # one for the run: GC and workers share it
        self.gcs: dict[str, BookieGc] = {}
        self.store.on_expire.append(self.ur.expire)
        self.lost: set[str] = set()  # bookies lost for good (down at the end)
        self.returns = 0
        self.side = SideLedgers(self)
        self.zombie = Zombie(self)
        self.intruder = Intruder(self)
        self.writer = self.driver = None
        self.placement_counts = PlacementCounts()  # PP3's counts of this run's clients
        self.placement = placement_of(plan, self.placement_counts)
        if plan.topology:
            self.net.topology = layout(plan.bookies)
        self.rack_losses = 0

    def _last_segment(self) -> tuple[str, ...]:
        metadata = self.store.ledgers.get(self.ledger_id)
        return metadata.ensembles[-1][1] if metadata else tuple(self.plan.bookies)

    def bk(self, name: str) -> BookKeeper:
        store = GatedStore(self.store, self.net, name) if name == "writer" else self.store
        return BookKeeper(store, transport=SimTransport(self.net, name),
                          placement=self.placement, **TIMEOUTS)

    def phase(self, name: str) -> None:
        self.trace(f"PHASE {name}")
        self.faults.cancel_pending()
        self.faults.schedule(f for f in self.plan.faults if f.phase == name)

    async def main(self) -> None:
        plan = self.plan
        writer = await self.bk("writer").create_ledger(
            plan.ensemble, plan.write_quorum, plan.ack_quorum, password=PASSWORD)
        self.ledger_id, self.writer = writer.ledger_id, writer
        self.side.start()
        if plan.gc_grace is not None:
            for bookie_id in plan.bookies:
                gc = BookieGc(self.net.bookies[bookie_id], self.store, self.ur, plan.gc_grace,
                              random.Random(f"gc-{plan.seed}-{bookie_id}"), self.trace)
                self.gcs[bookie_id] = gc
                detached(gc.run_forever())
        self.phase("write")
        probe = self.processes.spawn("reader#0", self._probe()) if plan.reader_probe else None
        await self._write_phase(writer)
        if probe is not None:
            self.processes.kill("reader#0")
        self.phase("r1")
        self.side.schedule_deletes()
        await self._r1()
        if not plan.zombie_late:
            await self.zombie.resume(self.driver)
        self.phase("between")
        self.faults.heal_lasting()
        await asyncio.sleep(0.25)  # noqa: sleep-ok (virtual time: the plan's gap)
        self.phase("r2")
        if plan.intruder == "r2":
            self.processes.spawn("intruder", self.intruder.act(self.ledger_id))
        await self._r2()
        for attempt in range(3):
            if (await self.store.harness_read(self.ledger_id)).closed:
                break
            self.trace("HEAL everything, then retry recovery")
            self.faults.heal_all()
            await asyncio.sleep(2.0)  # noqa: sleep-ok (virtual time: healed first)
            await self._recover(f"recovery#{4 + attempt}")
        if plan.worker_after:
            await self._worker_after()
        self.faults.heal_all()
        await asyncio.sleep(5.0)  # noqa: sleep-ok (virtual: messages on the wire land)
        await self.side.recover_open()
        if plan.returns:
            await self._return()
        if plan.lose_rack is not None:
            await lose_rack(self)
        if plan.intruder == "late":
            await self.processes.spawn("intruder", self.intruder.act(self.ledger_id))
        await self.zombie.resume(self.driver)
        await self._repair()
        await asyncio.sleep(self.final_gc_s())  # noqa: sleep-ok (virtual: GC on the final state)
        await self._final()

    # -- the writer ------------------------------------------------------------------------

    async def _write_phase(self, writer) -> None:
        self.driver = driver = self.processes.spawn("writer", self._write(writer))
        if self.plan.kill_after is None:
            try:
                await asyncio.wait_for(asyncio.shield(driver), WRITE_PHASE_MAX_S)
            except asyncio.TimeoutError:
                self.trace("writer: stalled (its faults outlast it); killed at the deadline")
                self.processes.kill("writer")
            return
        deadline = self.loop.time() + WRITE_PHASE_MAX_S
        while len(self.checker.acked) < self.plan.kill_after and not driver.done():
            self.acked_event.clear()
            acked = self.loop.create_task(self.acked_event.wait())
            await asyncio.wait([driver, acked], return_when=asyncio.FIRST_COMPLETED,
                               timeout=max(0.0, deadline - self.loop.time()))
            acked.cancel()
            if self.loop.time() >= deadline:
                self.trace("writer: stalled (its faults outlast it); killed at the deadline")
                break
        await asyncio.sleep(self.plan.kill_delay)  # noqa: sleep-ok (virtual: the plan's delay)
        if self.plan.zombie:
            self.zombie.pause()
            return
        killed = self.processes.kill("writer")
        self.trace(f"writer: KILLED ({killed} tasks cancelled)")

    async def _write(self, writer) -> None:
        plan = self.plan
        window = asyncio.Semaphore(plan.window)
        appends = []

        async def one(i: int) -> None:
            payload = f"seed{plan.seed}-append{i}-".encode() * (1 + i % 3)
            try:
                entry_id = await writer.append(payload)
                self.checker.ack(entry_id, payload)
                self.acked_event.set()
            except CLIENT_ERRORS as exc:
                self.trace(f"writer: append #{i} failed: {type(exc).__name__}")
            finally:
                window.release()
        for i in range(plan.entries):
            await window.acquire()
            appends.append(asyncio.ensure_future(one(i)))
        if plan.zombie:  # ZW2: it never closes; what it appends after resuming is checked
            await asyncio.gather(*appends)
            return
        if plan.close_race:
            closing = asyncio.ensure_future(writer.close())
            await asyncio.sleep(0)  # noqa: sleep-ok (one turn: close starts before the append)
            await window.acquire()
            appends.append(asyncio.ensure_future(one(plan.entries)))
        else:
            await asyncio.gather(*appends)
            closing = asyncio.ensure_future(writer.close())
        try:
            self.checker.closed("writer", await closing)
        except CLIENT_ERRORS as exc:
            self.trace(f"writer: close failed: {type(exc).__name__}")
        await asyncio.gather(*appends)

    async def _probe(self) -> None:
        """S4: a tailing reader (no recovery) asks the LAC and tries the entry after it."""
        await asyncio.sleep(0.005)  # noqa: sleep-ok (virtual: after the writer began)
        reader = await self.bk("reader#0").open_ledger(self.ledger_id, PASSWORD,
                                                       recover=False)
        while True:
            try:
                lac = await reader.read_lac()
                self.checker.lac_told("reader#0", lac)
                try:
                    await reader.read_entry(lac + 1)
                    # Served only if the reader looked the LAC up again and it now covers
                    # the entry (RD2): then it was told that LAC before being shown it.
                    self.checker.lac_told("reader#0", reader.lac)
                    if reader.lac < lac + 1:
                        self.checker.shown_above_lac("reader#0", lac + 1, reader.lac)
                except CLIENT_ERRORS:
                    pass
            except CLIENT_ERRORS:
                pass
            await asyncio.sleep(0.01)  # noqa: sleep-ok (virtual: the probe's rhythm)

    # -- recovery ------------------------------------------------------------------------

    async def _recover(self, name: str) -> None:
        self.recoveries += 1
        self.trace(f"{name}: starts")
        try:
            before = await self.store.harness_read(self.ledger_id)
            reader = await self.bk(name).open_ledger(self.ledger_id, PASSWORD)
            if before.closed:  # nothing to recover: it only sees the end
                self.checker.sees_end(name, reader.metadata.last_entry_id)
            else:
                self.checker.closed(name, reader.metadata.last_entry_id)
        except CLIENT_ERRORS as exc:
            self.trace(f"{name}: failed: {type(exc).__name__}: {exc}")

    async def _r1(self) -> None:
        plan = self.plan
        first = self.processes.spawn("recovery#1", self._recover("recovery#1"))
        tasks = [first]
        if plan.r1_mode == "two":
            await asyncio.sleep(plan.r1_cancel_at / 100)  # noqa: sleep-ok (virtual: plan)
            tasks.append(self.processes.spawn("recovery#2", self._recover("recovery#2")))
        if plan.r1_mode == "cancel":
            done, _ = await asyncio.wait([first], timeout=plan.r1_cancel_at)
            if not done:
                self.processes.kill("recovery#1")
                self.trace("recovery#1: KILLED mid-way")
        await asyncio.wait(tasks, timeout=120)

    async def _r2(self) -> None:
        if self.plan.r2_mode == "worker":
            await self.processes.spawn("worker", self._worker_open())
        else:
            await self.processes.spawn("recovery#3", self._recover("recovery#3"))

    async def _worker_pass(self, leaving: set[str], replicas: list[str]) -> None:
        self.ur.leaving = set(leaving)
        self.ur.mark(self.ledger_id, replicas)
        try:
            await self._worker_run("worker")
        finally:
            self.ur.leaving = set()
        metadata = await self.store.harness_read(self.ledger_id)
        if metadata.closed:
            self.checker.closed("worker", metadata.last_entry_id)

    async def _worker_run(self, name: str, worker=None) -> None:
        """One ReplicationWorker round over the run's markers (a fresh worker unless
        given, on the loop's virtual clock)."""
        worker = worker or ReplicationWorker(
            self.bk(name), self.ur, grace_s=0.0, throttle=Throttle(0), wake=asyncio.Event(),
            clock=asyncio.get_running_loop().time,
            repair_placement=bool(self.plan.topology))
        self.recoveries += 1
        try:
            await asyncio.wait_for(worker.run_once(), 120)
        except CLIENT_ERRORS as exc:
            self.trace(f"{name}: failed: {type(exc).__name__}")
        self.trace(f"{name}: pass done, stats {dataclasses.astuple(worker.stats)}")

    async def _worker_open(self) -> None:
        """The worker finds an open ledger on a bookie being decommissioned: it recovers it."""
        metadata = await self.store.harness_read(self.ledger_id)
        leaving = self.rng.choice(metadata.ensembles[-1][1])
        self.trace(f"worker: {leaving} is being decommissioned")
        await self._worker_pass({leaving}, [leaving])

    async def _worker_after(self) -> None:
        metadata = await self.store.harness_read(self.ledger_id)
        bookies = sorted({b for _, members in metadata.ensembles for b in members})
        lost = self.rng.choice(bookies)
        await self.processes.spawn("worker", self._worker_pass(set(), [lost]))

def _quiet() -> None:
    for name in ("api", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def run_plan(plan: Plan) -> Outcome:
    """Run one plan to its end on a fresh virtual-time loop (SC1)."""
    _quiet()
    random.seed(plan.seed)
    loop = VirtualTimeLoop(deadline=RUN_MAX_S)
    asyncio.set_event_loop(loop)
    run = _Run(plan, loop)
    try:
        loop.run_until_complete(run.main())
    except Stuck as exc:
        run.checker.violation("LIVE", f"stuck: {exc}")
    finally:
        leftover = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in leftover:
            task.cancel()
        if leftover:
            try:
                loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
            except Stuck:
                pass
        asyncio.set_event_loop(None)
        loop.close()
    return Outcome(plan, run.trace, run.checker.violations, len(run.checker.acked),
                   run.recoveries, run.faults.counts,
                   gc_deletes=sum(gc.deletes for gc in run.gcs.values()), returns=run.returns,
                   revived=sum(b.revived for b in run.net.bookies.values()),
                   zombies=int(plan.zombie), wrong_password_refusals=run.intruder.refused,
                   deletes=run.side.deletes, reframed=run.net.reframed,
                   zk_errors=run.store.zk_errors, rack_losses=run.rack_losses)


def run_seed(seed: int, faults=None) -> Outcome:
    """A seed's plan, with ``faults`` instead of its own if given (shrinking)."""
    plan = make_plan(seed)
    if faults is not None:
        plan = dataclasses.replace(plan, faults=tuple(faults))
    return run_plan(plan)


def run_topology_seed(seed: int, placed_by: str | None = None) -> Outcome:
    """A seed on the topology (topology.py): 9 bookies, 3 hosts, racks and zones."""
    return run_plan(topology_plan(seed, placed_by))
