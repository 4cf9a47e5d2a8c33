"""Issue 39 in the simulator (docs/cluster.md §6): the real clients, recovery and workers place
by a topology, under the same faults as every seed, and a whole rack is lost for good.

A topology seed's plan is the seed's own (``make_plan``) with 9 bookies on 3 hosts, each host
in its own rack and zone (so losing a rack loses a host), a placement policy every client
uses (rack, zone or host; rack and zone sometimes strict) and, at Qa >= 2, one rack to lose
for good after the close. Its choices come from their own Random (``topology-<seed>``), so
the seed's other choices stay what ``make_plan`` draws (PL1).

Properties, beside S1-S5, LIVE, AUTH and DL1 (the grades are api/client/placement.py's own):
    TOPO  every segment of every ledger meets the policy, or a placement that broke it was
          counted (PP3): at the end, failing segments <= counted placements; with strict
          placement none fails.
    RACK  a rack lost for good loses no acknowledged entry when each write set then held
          its copies in distinct racks: at most one copy of any entry goes, fewer than Qa,
          and S1 holds as for one lost bookie. The loss is made only then (a run whose
          placement fell back says so in its trace and loses nothing); workers put the copies
          back, and TOPO is checked on what they chose.
"""

from __future__ import annotations

import dataclasses
import random

from api.client.fragments import referenced_bookies
from api.client.placement import (FAIL, Placement, PlacementCounts, PlacementNotMet,
                                  PlacementRules, adherence, write_sets)
from api.client.topology import Location
from bookie.errors import NoLedger
from tests.support.simulation.late import make_plan
from tests.support.simulation.plan import Plan

RACKS = 3
BOOKIES = tuple(f"b{i}" for i in range(3 * RACKS))


def layout(bookies) -> dict[str, Location]:
    """Bookie b<i> on host-(i mod 3), which stands in rack i mod 3 of zone i mod 3."""
    return {b: Location(f"/zone-{i % RACKS}/rack-{i % RACKS}", f"host-{i % RACKS}")
            for i, b in enumerate(bookies)}


def topology_plan(seed: int, placed_by: str | None = None) -> Plan:
    """The seed's plan on the topology. ``placed_by``: the policy the clients use instead
    of the one graded (a test of TOPO's teeth: random placement must be caught)."""
    plan = make_plan(seed)
    rng = random.Random(f"topology-{seed}")
    policy = rng.choice(("rack", "zone", "host"))
    strict = policy != "host" and rng.random() < 0.3  # host: 2 hosts cannot hold Qw=3
    lose = rng.randrange(RACKS) if plan.ack_quorum >= 2 and rng.random() < 0.7 else None
    return dataclasses.replace(plan, bookies=BOOKIES, topology=policy, strict=strict,
                               lose_rack=lose, returns=plan.returns and lose is None,
                               placed_by=placed_by or "")


def rules_of(plan: Plan) -> PlacementRules:
    return PlacementRules(policy=plan.topology, strict=plan.strict)


def placement_of(plan: Plan, counts: PlacementCounts) -> Placement | None:
    """What the run's clients place by (None: the default, no topology)."""
    if not plan.topology:
        return None
    if plan.placed_by:
        return Placement(PlacementRules(policy=plan.placed_by), counts)
    return Placement(rules_of(plan), counts)


async def _ledgers(run) -> list:
    found = []
    for ledger_id in [run.ledger_id, *run.side.ids.values()]:
        try:
            found.append(await run.store.harness_read(ledger_id))
        except NoLedger:
            continue  # deleted (DL1 checks it)
    return found


async def lose_rack(run) -> None:
    """RACK: after the close, the plan's rack goes for good, if the placement held."""
    rack = f"/zone-{run.plan.lose_rack}/rack-{run.plan.lose_rack}"
    victims = sorted(b for b, where in run.net.topology.items() if where.rack == rack)
    for metadata in await _ledgers(run):
        for first, members in metadata.ensembles:
            for ws in write_sets(members, metadata.write_quorum):
                if len({run.net.topology[b].rack for b in ws}) < len(ws):
                    run.trace(f"LOSE-RACK {rack} not made: ledger {metadata.ledger_id} "
                              f"segment {first} keeps two copies in one rack ({ws})")
                    return
    run.trace(f"LOSE-RACK {rack} for good: {victims}")
    main = run.store.ledgers.get(run.ledger_id)
    for bookie_id in victims:
        run.net.bookies[bookie_id].crash()
        run.lost.add(bookie_id)
        if main is not None and bookie_id in referenced_bookies(main):
            run.ur.mark(run.ledger_id, [bookie_id])  # the auditor saw it go
        run.side.lost(bookie_id)
    run.rack_losses += 1
    await run.processes.spawn("worker#rack", run._worker_run("worker#rack"))


async def check_placement(run) -> None:
    """TOPO over every ledger still listed, graded by the real policy."""
    rules, where = rules_of(run.plan), run.net.topology
    failing = [f"L{m.ledger_id}@{first}" for m in await _ledgers(run)
               for first, members in m.ensembles
               if adherence(rules, members, m.write_quorum, where) == FAIL]
    counted = sum(run.placement_counts.not_adhering.values())
    refused = sum(run.placement_counts.refused.values())
    run.trace(f"TOPO {rules.policy}{' strict' if rules.strict else ''}: "
              f"{len(failing)} failing segments, {counted} counted placements, "
              f"{refused} refused")
    if failing and (rules.strict or len(failing) > counted):
        run.checker.violation("TOPO", f"segments {failing} fail the {rules.policy} policy; "
                              f"{counted} placements were counted as failing it")


def offered(run):
    """LIVE's candidates under the run's placement (None: any up bookie): a strict policy
    lets a worker take only a target that keeps the write sets meeting it, as BookKeeper's
    enforced policies do, so a ledger that no up bookie can take by the policy stays marked
    (counted as refused, PP3) without being wedged. The real ``targets``, on its own counts
    and with the global Random put back, so the run's later choices stay what they were."""
    if run.placement is None:
        return None
    placement = Placement(run.placement.rules, PlacementCounts())

    def allowed(members, index, write_quorum, candidates):
        state = random.getstate()
        try:
            return placement.targets(members, index, write_quorum, candidates,
                                     run.net.topology)
        except PlacementNotMet:
            return []
        finally:
            random.setstate(state)
    return allowed
