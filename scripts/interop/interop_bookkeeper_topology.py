#!/usr/bin/env python3
"""A mixed cluster agrees on where each bookie stands (docs/cluster.md §6, issue 39): BookKeeper's
own client, placing by its RackawareEnsemblePlacementPolicy with ScriptBasedMapping over the
script ``bookie cluster topology --script`` writes, and our client, placing by the places our
bookies publish, grade each other's ensembles the same way.

    sudo BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/interop_bookkeeper_topology.py

BookKeeper resolves a bookie's rack by its address, so the bookies need addresses of their
own: three network namespaces of the script's own on a bridge (tests/support/netns.py; root
and iproute2), one a host, each in its own rack and zone, two of our bookies in each (their
``topology_location`` /zone-i/rack-i, ``topology_host`` host-i). ZooKeeper listens on the
bridge. Steps, each printed as "ok"/"FAILED":
  1. `bookie cluster topology` lists the six, each from its registration, and writes the
     script; BookKeeper's ScriptBasedMapping resolves each address as we do.
  2. BookKeeper's client creates 3/2/2 ledgers with minNumRacksPerWriteQuorum=2 enforced:
     every ensemble spans three racks, and our rack policy grades every segment as meeting it.
  3. Our client (rack policy, strict) creates ledgers: BookKeeper's policy grades each
     MEETS_STRICT; a ledger our client placed with two copies in one rack is FAIL for both.
Exit 0 when every check holds, 1 otherwise, 2 when it cannot run here.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from api.client.ensemble import BookKeeper  # noqa: E402
from api.client.placement import (FAIL, MEETS_STRICT, Placement, PlacementCounts,  # noqa: E402
                                  PlacementRules)
from api.cluster.local_zookeeper import ZooKeeperServer, free_port  # noqa: E402
from tests.support import netns  # noqa: E402
from tests.support.servers import Daemon  # noqa: E402

JAVA = os.path.join(ROOT, "scripts", "interop", "java", "TopologyCheck.java")
HOSTS = 3
FLAGS = ("--checkpoint-interval-ms", "2000", "--journal-prealloc-bytes", "1MiB",
         "--autorecovery-daemon-enabled", "false")
failures: list[str] = []


def check(condition: bool, what: str) -> None:
    print(f"  {'ok' if condition else 'FAILED'}: {what}", flush=True)
    if not condition:
        failures.append(what)


def java(launcher: str, *args: str) -> list[list[str]]:
    done = subprocess.run([launcher, "class", JAVA, *args], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"TopologyCheck {args[0]} exited {done.returncode}: "
                           f"{(done.stdout + done.stderr)[-2000:]}")
    return [line.split() for line in done.stdout.splitlines() if line[:2] in ("L ", "G ", "R ")]


def start_bookies(network, uri: str, root: str, daemons: list) -> dict[str, int]:
    """Two of ours in each namespace: bookie id -> its host index."""
    placed = {}
    for i in range(2 * HOSTS):
        host = i % HOSTS
        daemon = Daemon(os.path.join(root, f"ours-{i}", "data"), *FLAGS,
                        "--host", network.address(host), "--port", str(free_port()),
                        "--bookie-port", str(free_port()), "--metadata-service-uri", uri,
                        "--topology-location", f"/zone-{host}/rack-{host}",
                        "--topology-host", f"host-{host}", prefix=network.prefix(host))
        daemons.append(daemon)
        daemon.start()
        placed[daemon.url.rsplit("/", 1)[-1]] = host
    return placed


def step_script(launcher: str, network, uri: str, root: str) -> str:
    print("step 1: the places, and BookKeeper's ScriptBasedMapping over our script", flush=True)
    script = os.path.join(root, "topology.sh")
    done = subprocess.run([sys.executable, "-m", "bookie", "cluster", "topology",
                           "--metadata-service-uri", uri, "--script", script],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    print(done.stdout, end="")
    rows = [line.split() for line in done.stdout.splitlines()[1:] if line.count(" ") > 2
            and line.startswith("10.")]
    check(done.returncode == 0 and len(rows) == 2 * HOSTS and
          all(row[3] == "registration" for row in rows),
          f"`bookie cluster topology` lists {len(rows)} bookies from their registrations, "
          f"one rack per address (exit {done.returncode})")
    addresses = [network.address(h) for h in range(HOSTS)]
    resolved = {r[1]: r[2] for r in java(launcher, "resolve", script, *addresses)}
    check(resolved == {a: f"/zone-{h}/rack-{h}" for h, a in enumerate(addresses)},
          f"ScriptBasedMapping resolves {resolved}")
    return script


async def grade_ours(uri: str, ledger_ids) -> dict[int, set[str]]:
    rules = Placement(PlacementRules(policy="rack", strict=True), PlacementCounts())
    async with await BookKeeper.connect(uri, placement=rules) as bk:
        grades = {}
        for ledger_id in ledger_ids:
            metadata = await bk.store.read(ledger_id)
            where = await bk.transport.locations(
                sorted({b for _, members in metadata.ensembles for b in members}))
            grades[ledger_id] = {rules.adherence(m, metadata.write_quorum, where)
                                 for _, m in metadata.ensembles}
        return grades


async def ours_create(uri: str, policy: str, count: int, within=None) -> list[int]:
    placement = Placement(PlacementRules(policy=policy, strict=policy != "random"),
                          PlacementCounts())
    created = []
    async with await BookKeeper.connect(uri, placement=placement) as bk:
        for _ in range(count):
            if within is not None:  # only these: the ledger breaks the policy
                original = bk.writable_bookies
                bk.writable_bookies = lambda: _only(original, within)
            writer = await bk.create_ledger(3, 2, 2, password=b"topology")
            for e in range(5):
                await writer.append(f"entry {e}".encode())
            await writer.close()
            created.append(writer.ledger_id)
    return created


async def _only(original, within: set[str]) -> list[str]:
    return [b for b in await original() if b in within]


def steps_placement(launcher: str, uri: str, script: str, placed: dict[str, int]) -> None:
    print("step 2: BookKeeper's client places; ours grades", flush=True)
    made = java(launcher, "create", uri, script, "12")
    ensembles = {int(row[1]): row[2].split(",") for row in made if row[1] != "-1"}
    check(len(ensembles) == 12, f"BookKeeper's client created {len(ensembles)} of 12 ledgers "
          f"({[' '.join(r) for r in made if r[1] == '-1'][:1]})")
    check(all(len({placed[b] for b in e}) == 3 for e in ensembles.values()),
          "every ensemble BookKeeper chose spans three racks")
    grades = asyncio.run(grade_ours(uri, sorted(ensembles)))
    check(all(g == {MEETS_STRICT} for g in grades.values()),
          f"our rack policy grades each of BookKeeper's segments MEETS_STRICT ({grades})")
    print("step 3: ours places; BookKeeper's policy grades", flush=True)
    ours = asyncio.run(ours_create(uri, "rack", 8))
    theirs = {int(r[1]): r[3] for r in java(launcher, "grade", uri, script, *map(str, ours))}
    check(set(theirs.values()) == {"MEETS_STRICT"} and len(theirs) == len(ours),
          f"BookKeeper grades our {len(ours)} ledgers {sorted(set(theirs.values()))}")
    # Rack 0's two bookies and one of rack 1: in a 3/2 ensemble every pair is a write set,
    # so the two of rack 0 share one.
    close = {b for b, h in placed.items() if h == 0} | {min(b for b, h in placed.items()
                                                           if h == 1)}
    bad = asyncio.run(ours_create(uri, "random", 1, within=close))
    theirs = [r[3] for r in java(launcher, "grade", uri, script, *map(str, bad))]
    ours_grade = asyncio.run(grade_ours(uri, bad))[bad[0]]
    check(theirs == ["FAIL"] and ours_grade == {FAIL},
          f"a ledger with two bookies of one rack: BookKeeper says {theirs}, ours "
          f"{sorted(ours_grade)}")


def main() -> int:
    launcher = os.environ.get("BOOKKEEPER_LAUNCHER")
    reason = netns.unavailable() or (None if launcher else "needs BOOKKEEPER_LAUNCHER")
    if reason:
        print(f"interop_bookkeeper_topology: cannot run here: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="interop-topology-") as root:
        network = netns.TestNetwork(HOSTS).create()
        zookeeper = ZooKeeperServer(os.path.join(root, "zookeeper"),
                                    host=network.host_address)
        daemons = []
        try:
            zookeeper.start()
            uri = f"zk://{zookeeper.hosts}/ledgers"
            placed = start_bookies(network, uri, root, daemons)
            script = step_script(launcher, network, uri, root)
            steps_placement(launcher, uri, script, placed)
        finally:
            for daemon in daemons:
                if daemon.proc is not None and daemon.proc.poll() is None:
                    daemon.terminate()
            zookeeper.stop()
            network.close()
    print(f"interop topology: {'all checks hold' if not failures else failures}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
