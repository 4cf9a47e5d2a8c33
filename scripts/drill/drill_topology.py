#!/usr/bin/env python3
"""Topology drill (docs/cluster.md §6, issue 39): lose a whole rack, or a whole host, for good
while writers write, and check that no acknowledged entry is lost and that autorecovery
restores both the copies and the placement policy.

    .venv/bin/python scripts/drill/drill_topology.py [--rounds 4] [--policy rack|zone|host]
                                               [--ledgers 6] [--entries 300] [--seed N]

A real ZooKeeper and 9 bookie daemons on 127.0.0.1: bookie i on host-(i mod 3), which stands
in rack i mod 3 of zone i mod 3 (settings topology_location, topology_host), so a host is a
rack here and losing one is losing the other; the rounds alternate the names. Every bookie
runs autorecovery with the policy and the auditor's placement check every 2 s.

Each round: writers append to new ledgers (3/2/2 and 3/3/2, the clients placing by the
policy); after a third of the entries every bookie of one rack is killed -9 for good. The
writers go on (ensemble changes) and close; a ledger whose writer failed is recovered. Then:
    lost        every acknowledged entry reads back through the metadata, byte-identical:
                with write sets across racks, a rack holds at most one copy of an entry, and
                Qa = 2 racks survived (0 is the only passing figure)
    rebuilt     three new bookies come up in a new rack (new ids, empty dirs)
    restored    within 180 s no ledger names a lost bookie, nothing is marked, every
                segment meets the policy again (the auditor's check and the workers' moves),
                and each entry is on every bookie of its write set, read bookie by bookie
One line per round and a summary line; exit 1 on any violation.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from api.client.codec import LedgerCodec  # noqa: E402
from api.client.distribution import bookies_of  # noqa: E402
from api.client.ensemble import BookKeeper  # noqa: E402
from api.client.ensemble_reader import BOOKIE_FAILURES  # noqa: E402
from api.client.fragments import referenced_bookies  # noqa: E402
from api.client.placement import FAIL, Placement, PlacementCounts, PlacementRules  # noqa: E402
from api.cluster.local_zookeeper import ZooKeeperServer, free_port  # noqa: E402
from api.cluster.underreplication import Underreplication  # noqa: E402
from bookie.errors import BookieError  # noqa: E402
from scripts.drill.drill_cluster import payload_of  # noqa: E402
from tests.support.servers import Daemon  # noqa: E402

PASSWORD = b"topology"
QUORUMS = ((3, 2, 2), (3, 3, 2))
FLAGS = ("--checkpoint-interval-ms", "2000", "--journal-prealloc-bytes", "1MiB",
         "--gc-interval-ms", "3000", "--gc-metadata-grace-ms", "3000",
         "--lost-bookie-recovery-delay-s", "1", "--open-ledger-rereplication-grace-period-s",
         "3", "--rereplication-rate-bytes", "0", "--placement-check-interval-s", "2")
TIMEOUTS = {"add_timeout_s": 2.0, "read_timeout_s": 2.0}
RESTORE_DEADLINE_S = 180.0
RACKS = 3


class Drill:
    def __init__(self, args, root: str) -> None:
        self.args, self.root = args, root
        self.rng = random.Random(args.seed)
        self.rules = PlacementRules(policy=args.policy)
        self.counts = PlacementCounts()
        self.zookeeper = ZooKeeperServer(os.path.join(root, "zookeeper"))
        self.uri = ""
        self.bookies: dict[str, tuple[Daemon, int]] = {}  # id -> (daemon, rack)
        self.next_slot = 0
        self.written: dict[int, dict[int, bytes]] = {}  # ledger -> acked entry -> payload
        self.violations: list[str] = []
        self.lost_entries = 0
        self.restore_s: list[float] = []

    def start(self) -> None:
        self.zookeeper.start()
        self.uri = f"zk://{self.zookeeper.hosts}/ledgers"
        for i in range(3 * RACKS):
            self._bookie(i % RACKS)

    def _bookie(self, rack: int) -> str:
        slot, self.next_slot = self.next_slot, self.next_slot + 1
        daemon = Daemon(os.path.join(self.root, f"bookie-{slot}", "data"), *FLAGS,
                        "--placement-policy", self.args.policy,
                        "--topology-location", f"/zone-{rack}/rack-{rack}",
                        "--topology-host", f"host-{rack}", "--metadata-service-uri",
                        self.uri, "--port", str(free_port())).start()
        bookie_id = daemon.url.rsplit("/", 1)[-1]
        self.bookies[bookie_id] = (daemon, rack)
        return bookie_id

    def stop(self) -> None:
        for daemon, _ in self.bookies.values():
            if daemon.proc is not None and daemon.proc.poll() is None:
                daemon.terminate()
        self.zookeeper.stop()

    def connect(self):
        return BookKeeper.connect(self.uri, placement=Placement(self.rules, self.counts),
                                  **TIMEOUTS)

    # -- a round ---------------------------------------------------------------------------

    async def round(self, number: int) -> None:
        live_racks = sorted({rack for daemon, rack in self.bookies.values()
                             if daemon.proc.poll() is None})
        rack = self.rng.choice(live_racks)
        what = "rack" if number % 2 == 0 else "host"
        victims = sorted(b for b, (d, r) in self.bookies.items()
                         if r == rack and d.proc.poll() is None)
        started = time.monotonic()
        async with await self.connect() as bk:
            half = asyncio.Event()
            writes = [self._write(bk, QUORUMS[n % 2], half) for n in range(self.args.ledgers)]
            task = asyncio.gather(*writes)
            await half.wait()
            for bookie_id in victims:  # the whole rack (host) goes, for good
                self.bookies[bookie_id][0].kill9()
            ledgers = await task
            lost = await self._lost(bk, ledgers)
        for _ in range(RACKS):
            self._bookie(rack + RACKS * (number + 1))  # the rack rebuilt, a new one
        seconds = await self._restored(ledgers, set(victims))
        print(f"round {number}: lost {what} {what}-{rack} ({', '.join(victims)}) under "
              f"{len(ledgers)} writers; acked={sum(len(self.written[i]) for i in ledgers)} "
              f"lost={lost} restored_in={seconds:.1f}s "
              f"round_s={time.monotonic() - started:.1f}", flush=True)

    async def _write(self, bk, quorums, half: asyncio.Event) -> int:
        writer = await bk.create_ledger(*quorums, password=PASSWORD)
        acked = self.written.setdefault(writer.ledger_id, {})
        window = asyncio.Semaphore(32)

        async def one(entry_id: int) -> None:
            payload = payload_of(writer.ledger_id, entry_id)
            try:
                acked[await writer.append(payload)] = payload
            except (BookieError, *BOOKIE_FAILURES):
                pass  # not acknowledged: not promised
            finally:
                window.release()
                if len(acked) >= self.args.entries // 3:
                    half.set()
        tasks = []
        for entry_id in range(self.args.entries):
            await window.acquire()
            tasks.append(asyncio.ensure_future(one(entry_id)))
        await asyncio.gather(*tasks)
        try:
            await writer.close()
        except (BookieError, *BOOKIE_FAILURES):
            await bk.open_ledger(writer.ledger_id, PASSWORD)  # recovered and closed
        return writer.ledger_id

    async def _lost(self, bk, ledgers) -> int:
        """Acked entries that do not read back through the metadata, byte-identical."""
        lost = 0
        for ledger_id in ledgers:
            reader = await bk.open_ledger(ledger_id, PASSWORD)
            for entry_id, payload in sorted(self.written[ledger_id].items()):
                try:
                    read = (await reader.read_entry(entry_id)).payload
                except (BookieError, *BOOKIE_FAILURES) as exc:
                    read = exc
                if read != payload:
                    lost += 1
                    self.violations.append(f"ledger {ledger_id} entry {entry_id}: {read!r}")
        self.lost_entries += lost
        return lost

    # -- restored: copies and placement --------------------------------------------------------

    async def _restored(self, ledgers, gone: set[str]) -> float:
        started = time.monotonic()
        async with await self.connect() as bk:
            ur = Underreplication(bk.store.client, bk.store.root)
            while True:
                problems = await self._problems(bk, self.written, gone)
                if not problems and not await asyncio.to_thread(ur.marked):
                    break
                if time.monotonic() - started > RESTORE_DEADLINE_S:
                    self.violations.append(f"not restored after {RESTORE_DEADLINE_S:.0f} s: "
                                           f"{problems[:3]}")
                    return time.monotonic() - started
                await asyncio.sleep(0.5)  # noqa: sleep-ok (bounded poll of autorecovery)
            seconds = time.monotonic() - started
            self.restore_s.append(seconds)
            for ledger_id in ledgers:
                await self._copies(bk, ledger_id)
        return seconds

    async def _problems(self, bk, ledgers, gone: set[str]) -> list[str]:
        problems = []
        for ledger_id in ledgers:
            metadata = await bk.store.read(ledger_id)
            named = referenced_bookies(metadata)
            if named & gone:
                problems.append(f"ledger {ledger_id} names {sorted(named & gone)}")
                continue
            where = await bk.transport.locations(sorted(named))
            for first, members in metadata.ensembles:
                if bk.placement.adherence(members, metadata.write_quorum, where) == FAIL:
                    problems.append(f"ledger {ledger_id} segment {first} breaks the policy")
        return problems

    async def _copies(self, bk, ledger_id: int) -> None:
        """Each acked entry on every bookie of its write set, bookie by bookie."""
        metadata = await bk.store.read(ledger_id)
        codec = LedgerCodec.for_password(ledger_id, PASSWORD, metadata.digest_type)
        for entry_id, payload in sorted(self.written[ledger_id].items()):
            for holder in bookies_of(metadata.ensembles, entry_id, metadata.write_quorum):
                try:
                    entry = codec.decode(await bk.client(holder).read_entry(
                        ledger_id, entry_id), entry_id)
                    if entry.payload == payload:
                        continue
                    found = "other bytes"
                except (BookieError, *BOOKIE_FAILURES) as exc:
                    found = repr(exc)
                self.violations.append(f"ledger {ledger_id} entry {entry_id} on {holder}: "
                                       f"{found}")


async def run(args, root: str) -> int:
    drill = Drill(args, root)
    started = time.monotonic()
    try:
        await asyncio.to_thread(drill.start)
        for number in range(args.rounds):
            await drill.round(number)
    finally:
        await asyncio.to_thread(drill.stop)
    acked = sum(len(entries) for entries in drill.written.values())
    restore = max(drill.restore_s) if drill.restore_s else float("nan")
    counted = sum(drill.counts.not_adhering.values())
    print(f"rounds={args.rounds} policy={args.policy} seed={args.seed} racks_lost={args.rounds} "
          f"ledgers={len(drill.written)} acked={acked} lost={drill.lost_entries} "
          f"violations={len(drill.violations)} placements_not_adhering={counted} "
          f"restore_max_s={restore:.1f} seconds={time.monotonic() - started:.1f}", flush=True)
    for violation in drill.violations[:20]:
        print(f"VIOLATION {violation}")
    return 1 if drill.violations else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="racks lost (default 4)")
    parser.add_argument("--policy", default="rack", choices=("rack", "zone", "host"))
    parser.add_argument("--ledgers", type=int, default=6, help="writers a round (default 6)")
    parser.add_argument("--entries", type=int, default=300, help="entries a ledger")
    parser.add_argument("--seed", type=int, default=random.randrange(2**31))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="drill-topology-") as root:
        return asyncio.run(run(args, root))


if __name__ == "__main__":
    sys.exit(main())
