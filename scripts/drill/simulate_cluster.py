#!/usr/bin/env python3
"""Deterministic simulation of the replication protocol (tests/support/simulation/).

    .venv/bin/python scripts/drill/simulate_cluster.py --seeds 10000 --first-seed 0 [--shrink]
                                                 [--verbose] [--topology]

Each seed builds a plan (quorums, a writer killed mid-stream, faults before, during and
between recoveries, racing and dying recoveries, a replication worker, GC from metadata on
every bookie, a bookie back with its old id after being replaced; ZooKeeper faults, more
ledgers and deletes, a zombie writer, a wrong password, BookKeeper's recovery framing, Qa=1)
and runs the real
client code on a virtual-time loop against in-memory bookies; S1-S5 of docs/cluster.md §5 are
checked. With --topology each seed runs on 9 bookies on 3 hosts in 3 racks and 3 zones, its
clients placing by a rack, zone or host policy, and loses a whole rack for good (TOPO and RACK
of tests/support/simulation/topology.py are checked too). One summary line; on any violation, exit 1 and print each failing seed (its trace,
shrunk with --shrink). A seed is reproducible: rerun with --seeds 1 --first-seed SEED.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tests.support.simulation.scenario import run_seed, run_topology_seed  # noqa: E402
from tests.support.simulation.shrink import report, shrink  # noqa: E402

#: Failing seeds printed in full at most (the rest are listed by number).
REPORTED_MAX = 5


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--shrink", action="store_true", help="shrink failing seeds' faults")
    parser.add_argument("--verbose", action="store_true", help="one line per seed")
    parser.add_argument("--topology", action="store_true",
                        help="9 bookies on 3 hosts/racks/zones, placement policies, a rack lost")
    args = parser.parse_args(argv)
    started = time.monotonic()
    failing: list[int] = []
    by_property: collections.Counter = collections.Counter()
    faults: collections.Counter = collections.Counter()
    acked = recoveries = gc_deletes = returns = revived = 0
    extra: collections.Counter = collections.Counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        outcome = (run_topology_seed if args.topology else run_seed)(seed)
        acked += outcome.acked
        recoveries += outcome.recoveries
        faults.update(outcome.faults)
        gc_deletes += outcome.gc_deletes
        returns += outcome.returns
        revived += outcome.revived
        extra.update(zombies=outcome.zombies, deletes=outcome.deletes,
                     wrong_password_refusals=outcome.wrong_password_refusals,
                     reframed=outcome.reframed, zk_errors=outcome.zk_errors,
                     rack_losses=outcome.rack_losses)
        if outcome.failed:
            failing.append(seed)
            by_property.update({v.split(":")[0] for v in outcome.violations})
        if args.verbose:
            print(f"seed={seed} acked={outcome.acked} violations={outcome.violations}",
                  flush=True)
    seconds = time.monotonic() - started
    properties = ",".join(f"{p}:{n}" for p, n in sorted(by_property.items())) or "-"
    print(f"seeds={args.seeds} first_seed={args.first_seed} violations={len(failing)} "
          f"by_property={properties} entries_acked={acked} recoveries={recoveries} "
          f"faults=pause:{faults['pause']},crash:{faults['crash']},"
          f"partition:{faults['partition']},zk-hang:{faults['zk-hang']},"
          f"zk-uncertain:{faults['zk-uncertain']},zk-expire:{faults['zk-expire']} "
          f"zk_errors={extra['zk_errors']} gc_deletes={gc_deletes} returns={returns} "
          f"revived={revived} deletes={extra['deletes']} zombies={extra['zombies']} "
          f"wrong_password_refusals={extra['wrong_password_refusals']} "
          f"reframed={extra['reframed']} rack_losses={extra['rack_losses']} "
          f"seconds={seconds:.1f}", flush=True)
    for seed in failing[:REPORTED_MAX]:
        outcome = shrink(seed, topology=args.topology) if args.shrink else \
            (run_topology_seed if args.topology else run_seed)(seed)
        print(f"\n=== seed {seed}{' (shrunk)' if args.shrink else ''} ===")
        print(report(outcome))
    if len(failing) > REPORTED_MAX:
        print(f"\nfailing seeds not shown: {failing[REPORTED_MAX:]}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
