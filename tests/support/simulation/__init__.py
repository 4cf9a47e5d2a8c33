"""A deterministic simulator of the replication protocol (FoundationDB / TigerBeetle style).

The real client code (api/client/ensemble*.py, api/cluster/autorecovery/worker.py) runs unmodified on
a virtual-time event loop (loop.py) against in-memory bookies (bookie.py) behind a seeded,
faulty network (network.py), an in-memory metadata store and under-replication twin
(metadata.py). Each bookie runs the real GC from metadata (api/cluster/gc_metadata.py,
gc.py) against the same twins, and lifts a tombstone for a recovery add as W5 does. A seed
picks a plan (plan.py): quorums, a writer that dies mid-stream, faults before, during and
between recoveries, a bookie back with its old id after a worker replaced it, a later loss;
late.py adds ZooKeeper faults (metadata.py), more ledgers and deletes (ledgers.py), a zombie
writer (zombie.py), a wrong password (intruder.py), BookKeeper's recovery framing
(network.py) and Qa=1; scenario.py runs it, endgame.py ends it, checker.py checks S1-S5 of
docs/cluster.md §5, shrink.py reduces a failing plan's faults. Entry point:
scripts/drill/simulate_cluster.py; tests: tests/simulation/.

Module dependencies point one way: loop, trace, processes <- bookie <- network <- faults,
metadata <- gc, checker, clients, plan <- late, ledgers, zombie, intruder, endgame <-
scenario <- shrink.
"""
