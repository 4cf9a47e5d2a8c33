#!/usr/bin/env python3
"""Cluster drill (REPLICATION.md §5): break bookies, writers and ZooKeeper; check S1-S6.

    .venv/bin/python scripts/drill_cluster.py [--rounds 200] [--seconds 1800] [--seed N]

A real ZooKeeper (Debian's package) and 5 bookie daemons on 127.0.0.1, each on a fixed port
(a restarted bookie keeps its id). Every round, writers append to new replicated ledgers at
E/Qw/Qa = 3/2/2 and 3/3/2 while one fault, never more than the quorums tolerate, strikes:

    kill      kill -9 of a bookie (restarted at the end of the round, same data dir)
    pause     SIGSTOP of a bookie for 0.5-2 s, then SIGCONT (a partition it does not notice)
    zk        a ZooKeeper restart (same port and data dir)
    writer    a writer process is killed with SIGKILL mid-stream (appends in flight); this
              process recovers its ledger
    recover2  two clients recover one ledger at once
    partition a bookie's network link goes down for 1-3 s, then up (each bookie runs in a
              network namespace of the drill's own on a bridge: tests/support/netns.py;
              without root the fault is skipped and the summary says why)
    lose      kill -9 of a bookie for good: a new bookie (a new id, an empty data dir) takes
              its place, and before the next round autorecovery (inside the bookies:
              REPLICATION.md §4) must have copied every fragment it held to live bookies,
              checked bookie by bookie; over a run the drill loses more bookies than any
              quorum tolerates at once
    none      no fault

After the round every ledger is closed by its writer or recovered, then checked: S1 every
acknowledged entry reads back byte-identical through the metadata; S2 the closed end is at
least every acknowledged entry; S3 two clients read the same bytes and the same end; S4 the
LAC a writer reported never went back; S5 recovery never closes below an acknowledged entry
(an undecided recovery is retried). At the end S6: a bookie whose data dir is wiped must
refuse to start. One summary line, like the kill -9 drill's; exit 1 on any violation.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import shutil
import signal
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from api.client.codec import LedgerCodec  # noqa: E402
from api.client.distribution import bookies_of  # noqa: E402
from api.client.ensemble import BookKeeper, RecoveryUndecided  # noqa: E402
from api.client.fragments import referenced_bookies  # noqa: E402
from api.client.underreplication import Underreplication  # noqa: E402
from bookie.errors import NoLedger  # noqa: E402
from api.local_zookeeper import ZooKeeperServer, free_port  # noqa: E402
from tests.support import netns  # noqa: E402
from tests.support.servers import Daemon  # noqa: E402

FAULTS = ("kill", "pause", "zk", "writer", "recover2", "partition", "lose", "none")
QUORUMS = ((3, 2, 2), (3, 3, 2))
FLAGS = ("--checkpoint-interval-ms", "2000", "--journal-prealloc-bytes", "1MiB",
         "--gc-interval-ms", "0", "--lost-bookie-recovery-delay-s", "3",
         "--open-ledger-rereplication-grace-period-s", "5", "--rereplication-rate-bytes", "0",
         "--replicas-check-interval-s", "5")
#: How long autorecovery may take to restore a lost bookie's copies before it is a violation.
REREPLICATION_DEADLINE_S = 180.0
TIMEOUTS = {"add_timeout_s": 2.0, "read_timeout_s": 2.0}

#: The writer of the "writer" fault, a process of its own: it creates a 3/2/2 ledger, prints
#: its id, then appends --entries entries (64 in flight) and prints each acknowledged id.
CHILD_WRITER = """
import asyncio, sys
sys.path.insert(0, sys.argv[3])
from api.client.ensemble import BookKeeper
from scripts.drill_cluster import payload_of

async def main(uri, count):
    async with await BookKeeper.connect(uri, add_timeout_s=2.0, read_timeout_s=2.0) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=b"drill")
        print("ledger", writer.ledger_id, flush=True)
        gate = asyncio.Semaphore(64)
        async def one(entry_id):
            try:
                print("acked", await writer.append(payload_of(writer.ledger_id, entry_id)),
                      flush=True)
            finally:
                gate.release()
        tasks = []
        for entry_id in range(count):
            await gate.acquire()
            tasks.append(asyncio.ensure_future(one(entry_id)))
        await asyncio.gather(*tasks)
        await asyncio.Event().wait()  # never closes: it is killed

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def payload_of(ledger_id: int, entry_id: int) -> bytes:
    """The child writer's bytes, known to the drill without being told them."""
    seed = hashlib.sha256(f"{ledger_id}:{entry_id}".encode()).digest()
    return (seed * 64)[:10 + (entry_id * 37) % 1990]


class Ledger:
    def __init__(self, quorums) -> None:
        self.quorums = quorums
        self.ledger_id: int | None = None
        self.acked: dict[int, bytes] = {}
        self.lacs: list[int] = []
        self.writer = None
        self.closed = False
        self.tailed: list[tuple[int, bytes]] = []  # what a tailing reader was shown
        self.child = None  # the writer process of the "writer" fault


class Drill:
    def __init__(self, args, root: str) -> None:
        self.args, self.root = args, root
        self.rng = random.Random(args.seed)
        self.partitions = netns.unavailable() if args.partitions else "off (--no-partitions)"
        self.network = None if self.partitions else netns.TestNetwork(args.bookies)
        host = self.network.host_address if self.network else "127.0.0.1"
        self.zookeeper = ZooKeeperServer(os.path.join(root, "zookeeper"), host=host)
        self.bookies: list[Daemon] = []
        self.uri = ""
        self.violations: list[str] = []
        self.faults = {name: 0 for name in FAULTS}
        self.acked = 0
        self.ledgers = 0
        self.everything: list[Ledger] = []  # every ledger of the run, for re-replication
        self.lost_bookies: list[str] = []
        self.rereplication_s: list[float] = []

    # -- the cluster ---------------------------------------------------------------------

    def start(self) -> None:
        if self.network is not None:
            self.network.create()
        self.zookeeper.start()
        self.uri = f"zk://{self.zookeeper.hosts}/ledgers"
        for i in range(self.args.bookies):
            self.bookies.append(self._new_bookie(i, f"bookie-{i}").start())

    def _new_bookie(self, index: int, name: str) -> Daemon:
        """A bookie in slot ``index`` (its network namespace), a new port: a new id."""
        where = () if self.network is None else ("--host", self.network.address(index))
        return Daemon(os.path.join(self.root, name, "data"), *FLAGS,
                      "--metadata-service-uri", self.uri, "--port", str(free_port()),
                      *where, prefix=self.network.prefix(index) if self.network else ())

    def stop(self) -> None:
        try:
            for daemon in self.bookies:
                if daemon.proc is not None and daemon.proc.poll() is None:
                    daemon.proc.send_signal(signal.SIGCONT)
                    daemon.terminate()
            self.zookeeper.stop()
        finally:
            if self.network is not None:
                self.network.close()

    def _bookie(self, bookie_id: str) -> Daemon:
        return next(d for d in self.bookies if d.url.endswith("//" + bookie_id))

    # -- a round -------------------------------------------------------------------------

    async def round(self, number: int) -> str:
        every = self.args.lose_every
        fault = "lose" if every and number % every == 0 else self.rng.choice(FAULTS)
        self.faults[fault] += 1
        ledgers = [Ledger(QUORUMS[i % 2]) for i in range(self.args.writers)]
        async with await BookKeeper.connect(self.uri, **TIMEOUTS) as bk:
            for ledger in ledgers:
                e, qw, qa = ledger.quorums
                ledger.writer = await bk.create_ledger(e, qw, qa, password=b"drill")
                ledger.ledger_id = ledger.writer.ledger_id
            self.ledgers += len(ledgers)
            tail_bk = await BookKeeper.connect(self.uri, **TIMEOUTS)  # another client
            if fault == "writer":  # ledger 0 is written by a process of its own, then killed
                await ledgers[0].writer.close()
                ledgers[0] = Ledger((3, 2, 2))
                await self._child_writer(ledgers[0])
            writers = [asyncio.create_task(self._write(ledger)) for ledger in ledgers
                       if ledger.writer is not None]
            tails = [asyncio.create_task(self._tail(tail_bk, ledger)) for ledger in ledgers]
            undo = await self._inject(fault, ledgers, writers)
            await asyncio.gather(*writers, return_exceptions=True)
            await undo()
            await self._end(bk, ledgers, fault)
            done, late = await asyncio.wait(tails, timeout=120)
            for task in late:
                task.cancel()
            await tail_bk.close()
            for ledger, task in zip(ledgers, tails):
                if task in late or task.exception() is not None:
                    why = "still running" if task in late else repr(task.exception())
                    self.violations.append(f"tail of ledger {ledger.ledger_id}: {why}")
        bad = await self._check(ledgers)
        self.everything.extend(ledgers)
        if fault == "lose":
            bad += await self._await_rereplication(self.lost_bookies[-1])
        return f"fault={fault} ledgers={len(ledgers)} acked={sum(len(l.acked) for l in ledgers)}" \
               f" bad={bad}"

    async def _write(self, ledger: Ledger) -> None:
        rng = random.Random(self.rng.random())
        for _ in range(self.args.entries):
            payload = rng.randbytes(rng.randint(10, 2000))
            try:
                entry_id = await ledger.writer.append(payload)
            except Exception:  # noqa: BLE001 - the writer stopped: not acknowledged
                return
            ledger.acked[entry_id] = payload
            ledger.lacs.append(ledger.writer.lac)

    async def _child_writer(self, ledger: Ledger):
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD_WRITER, self.uri, str(self.args.entries), ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env=dict(os.environ, PYTHONPATH=ROOT))
        line = (await asyncio.wait_for(child.stdout.readline(), 60)).decode().split()
        ledger.ledger_id = int(line[1])
        ledger.child = child
        self.ledgers += 1
        return child

    async def _kill_child_writer(self, ledger: Ledger) -> None:
        """SIGKILL once a random number of its appends were acknowledged: later ones are
        in flight. What it printed before dying is what it was acknowledged."""
        child, kill_after = ledger.child, self.rng.randint(5, max(6, self.args.entries // 2))
        while len(ledger.acked) < kill_after:
            line = await asyncio.wait_for(child.stdout.readline(), 60)
            if not line.endswith(b"\n"):
                break
            self._child_acked(ledger, line)
        child.kill()
        rest = await child.stdout.read()  # printed before it died
        for line in rest.split(b"\n")[:-1]:  # a line the kill cut short was never told
            self._child_acked(ledger, line + b"\n")
        await child.wait()

    @staticmethod
    def _child_acked(ledger: Ledger, line: bytes) -> None:
        words = line.split()
        if len(words) == 2 and words[0] == b"acked" and words[1].isdigit():
            entry_id = int(words[1])
            ledger.acked[entry_id] = payload_of(ledger.ledger_id, entry_id)

    async def _tail(self, bk, ledger: Ledger) -> None:
        """A reader following the ledger from entry 0 until its closed end (S3, S4)."""
        reader = await bk.open_ledger(ledger.ledger_id, b"drill", recover=False)
        async for entry in reader.tail(0):
            ledger.tailed.append((entry.entry_id, entry.payload))

    async def _inject(self, fault: str, ledgers, writers):
        # Strike while appends are in flight: after a few of the writers' entries.
        await asyncio.sleep(self.rng.uniform(0.0, 0.05))  # noqa: sleep-ok (a drill's timing)

        async def nothing() -> None:
            pass

        if fault == "kill":
            victim = self.rng.choice([d for d in self.bookies if d.proc.poll() is None])
            victim.kill9()

            async def restart() -> None:
                await asyncio.to_thread(victim.start)
            return restart
        if fault == "lose":
            index = self.rng.randrange(len(self.bookies))
            victim = self.bookies[index]
            victim.kill9()
            self.lost_bookies.append(victim.url.rsplit("/", 1)[-1])

            async def replace() -> None:  # a new member, never the lost one again
                fresh = self._new_bookie(index, f"bookie-{index}-new{len(self.lost_bookies)}")
                self.bookies[index] = await asyncio.to_thread(fresh.start)
            return replace
        if fault == "pause":
            victim = self.rng.choice(self.bookies)
            victim.proc.send_signal(signal.SIGSTOP)
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))  # noqa: sleep-ok (the pause)
            victim.proc.send_signal(signal.SIGCONT)
            return nothing
        if fault == "partition":
            if self.network is None:
                return nothing  # skipped: the summary says why
            index = self.rng.randrange(len(self.bookies))
            self.network.cut(index)
            await asyncio.sleep(self.rng.uniform(1.0, 3.0))  # noqa: sleep-ok (the partition)
            self.network.heal(index)
            return nothing
        if fault == "zk":
            await asyncio.to_thread(self.zookeeper.stop)
            await asyncio.sleep(self.rng.uniform(0.1, 1.0))  # noqa: sleep-ok (ZK is down)
            await asyncio.to_thread(self.zookeeper.start)
            return nothing
        if fault == "writer":
            await self._kill_child_writer(ledgers[0])
            return nothing
        if fault == "recover2":
            ledgers[0].writer = None  # left open: two clients recover it at the end
        return nothing

    async def _end(self, bk, ledgers, fault: str) -> None:
        """Close each ledger with its writer, or recover it (twice at once for recover2)."""
        for ledger in ledgers:
            if ledger.writer is not None:
                try:
                    await ledger.writer.close()
                    ledger.closed = True
                    continue
                except Exception:  # noqa: BLE001 - fenced or failed: recover it
                    pass
            copies = 2 if fault == "recover2" and ledger is ledgers[0] else 1
            await self._recover(ledger, copies)

    async def _recover(self, ledger: Ledger, copies: int) -> None:
        for attempt in range(20):  # S5: an undecided recovery is retried, never forced
            clients = [await BookKeeper.connect(self.uri, **TIMEOUTS) for _ in range(copies)]
            try:
                results = await asyncio.gather(*(c.open_ledger(ledger.ledger_id, b"drill")
                                                 for c in clients), return_exceptions=True)
            finally:
                for client in clients:
                    await client.close()
            ends = {r.metadata.last_entry_id for r in results if not isinstance(r, Exception)}
            errors = [r for r in results if isinstance(r, Exception)]
            if len(ends) > 1:
                self.violations.append(f"ledger {ledger.ledger_id}: concurrent recoveries "
                                       f"closed at {sorted(ends)}")
            if not errors:
                ledger.closed = True
                return
            if not all(isinstance(e, (RecoveryUndecided, OSError, TimeoutError))
                       or "IN_RECOVERY" in str(e) for e in errors):
                self.violations.append(f"ledger {ledger.ledger_id}: recovery: {errors[0]!r}")
                return
            await asyncio.sleep(0.2 * (attempt + 1))  # noqa: sleep-ok (retry backoff)
        self.violations.append(f"ledger {ledger.ledger_id}: recovery undecided 20 times")

    async def _check(self, ledgers) -> int:
        before = len(self.violations)
        async with await BookKeeper.connect(self.uri, **TIMEOUTS) as a, \
                await BookKeeper.connect(self.uri, **TIMEOUTS) as b:
            for ledger in ledgers:
                self.acked += len(ledger.acked)
                await self._check_ledger(ledger, a, b)
        return len(self.violations) - before

    async def _check_ledger(self, ledger: Ledger, a, b) -> None:
        lid = ledger.ledger_id
        if ledger.lacs != sorted(ledger.lacs):
            self.violations.append(f"S4 ledger {lid}: the LAC went back: {ledger.lacs}")
        reader_a = await a.open_ledger(lid, b"drill", recover=False)
        reader_b = await b.open_ledger(lid, b"drill", recover=False)
        end = reader_a.metadata.last_entry_id
        if not reader_a.metadata.closed:
            self.violations.append(f"ledger {lid}: left {reader_a.metadata.state.value}")
            return
        if ledger.acked and end < max(ledger.acked):
            self.violations.append(f"S2 ledger {lid}: closed at {end}, entry "
                                   f"{max(ledger.acked)} was acknowledged")
        if reader_b.metadata.last_entry_id != end:
            self.violations.append(f"S3 ledger {lid}: ends {end} and "
                                   f"{reader_b.metadata.last_entry_id}")
        for entry_id in range(end + 1):
            try:
                got_a = (await reader_a.read_entry(entry_id)).payload
                got_b = (await reader_b.read_entry(entry_id)).payload
            except Exception as exc:  # noqa: BLE001 - named below
                self.violations.append(f"S1 ledger {lid} entry {entry_id}: {exc!r}")
                continue
            if got_a != got_b:
                self.violations.append(f"S3 ledger {lid} entry {entry_id}: readers differ")
            if entry_id in ledger.acked and got_a != ledger.acked[entry_id]:
                self.violations.append(f"S1 ledger {lid} entry {entry_id}: other bytes")
            if entry_id < len(ledger.tailed) and ledger.tailed[entry_id][1] != got_a:
                self.violations.append(f"S3 ledger {lid} entry {entry_id}: the tail saw "
                                       f"other bytes")
        if [e for e, _ in ledger.tailed] != list(range(end + 1)):
            self.violations.append(f"S4 ledger {lid}: the tail showed entries "
                                   f"{[e for e, _ in ledger.tailed][:12]}... for an end of {end}")

    # -- autorecovery ----------------------------------------------------------------------

    async def _await_rereplication(self, lost: str) -> int:
        """After a bookie was lost for good: every ledger of the run stops naming it, a
        replica check (the auditor's, every 5 s) ends after that, and no marker is left,
        within REREPLICATION_DEADLINE_S; then each entry of the ledgers that named it is on
        every bookie of its write set, verified bookie by bookie (S1).

        The replica check is part of "full replication": a 3/3/2 entry acknowledged by two
        bookies while the third was killed (a kill round) has two copies until the check
        finds the third missing and a worker copies it."""
        before = len(self.violations)
        started = time.monotonic()
        async with await BookKeeper.connect(self.uri, **TIMEOUTS) as bk:
            ur = Underreplication(bk.store.client, bk.store.root)
            named = None
            moved_at_ms = None  # when no ledger named the lost bookie any more
            while True:
                naming = [ledger for ledger in self.everything
                          if lost in await self._named(bk, ledger.ledger_id)]
                named = naming if named is None else named
                if not naming and moved_at_ms is None:
                    moved_at_ms = time.time() * 1000
                checked = await asyncio.to_thread(ur.replicas_check_ctime_ms) or 0
                marked = await asyncio.to_thread(ur.marked)
                if moved_at_ms is not None and checked > moved_at_ms and not marked:
                    break
                if time.monotonic() - started > REREPLICATION_DEADLINE_S:
                    self.violations.append(
                        f"autorecovery: {len(naming)} ledgers still name lost bookie {lost}, "
                        f"{len(marked)} marked, after {REREPLICATION_DEADLINE_S:.0f} s")
                    return len(self.violations) - before
                await asyncio.sleep(0.5)  # noqa: sleep-ok (bounded poll of autorecovery)
            self.rereplication_s.append(time.monotonic() - started)
            for ledger in named:
                await self._check_copies(bk, ledger)
        return len(self.violations) - before

    @staticmethod
    async def _named(bk, ledger_id: int) -> set[str]:
        try:
            return referenced_bookies(await bk.store.read(ledger_id))
        except NoLedger:
            return set()

    async def _check_copies(self, bk, ledger: Ledger) -> None:
        lid = ledger.ledger_id
        metadata = await bk.store.read(lid)
        codec = LedgerCodec.for_password(lid, b"drill", metadata.digest_type)
        for entry_id in range(metadata.last_entry_id + 1):
            for holder in bookies_of(metadata.ensembles, entry_id, metadata.write_quorum):
                try:
                    entry = codec.decode(await bk.client(holder).read_entry(lid, entry_id),
                                         entry_id)
                except Exception as exc:  # noqa: BLE001 - named below
                    self.violations.append(f"S1 ledger {lid} entry {entry_id}: no copy on "
                                           f"{holder} after autorecovery: {exc!r}")
                    continue
                if entry_id in ledger.acked and entry.payload != ledger.acked[entry_id]:
                    self.violations.append(f"S1 ledger {lid} entry {entry_id}: other bytes on "
                                           f"{holder} after autorecovery")

    # -- the end -------------------------------------------------------------------------

    def check_wiped_bookie_refused(self) -> None:
        """S6: a bookie whose data dir was wiped cannot rejoin silently."""
        victim = self.bookies[-1]
        victim.terminate()
        shutil.rmtree(victim.data_dir)
        try:
            victim.start()
        except RuntimeError:
            if "cookie" in victim.log_text():
                return
        self.violations.append("S6: a bookie with a wiped data dir started")


async def run(args, root: str) -> int:
    drill = Drill(args, root)
    started = time.monotonic()
    drill.start()
    rounds = 0
    try:
        for number in range(1, args.rounds + 1):
            if time.monotonic() - started > args.seconds:
                break
            line = await drill.round(number)
            rounds = number
            if args.verbose:
                print(f"round {number} {line}", flush=True)
        drill.check_wiped_bookie_refused()
    finally:
        drill.stop()
    for violation in drill.violations:
        print(f"VIOLATION {violation}", flush=True)
    faults = ",".join(f"{name}:{count}" for name, count in drill.faults.items())
    lost = sum(1 for v in drill.violations if v.startswith(("S1", "S2")))
    partitions = "on" if drill.network is not None else \
        "skipped(" + drill.partitions.replace(" ", "-") + ")"
    print(f"rounds={rounds} acked={drill.acked} lost={lost} violations={len(drill.violations)}"
          f" ledgers={drill.ledgers} faults={faults} partitions={partitions}"
          f" lost_bookies={len(drill.lost_bookies)}"
          f" rereplication_s_max={max(drill.rereplication_s, default=0):.1f}"
          f" seconds={time.monotonic() - started:.0f} seed={args.seed}", flush=True)
    return 1 if drill.violations else 0


def _stop_on_sigterm(signum, frame) -> None:
    """SIGTERM ends the drill like Ctrl-C: the finally blocks stop every bookie and
    ZooKeeper it started and remove its network namespaces."""
    raise KeyboardInterrupt


def main(argv=None) -> int:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=1800)
    parser.add_argument("--seed", type=int, default=random.randrange(2**31))
    parser.add_argument("--bookies", type=int, default=5)
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--lose-every", type=int, default=0, metavar="K",
                        help="every K-th round loses a bookie for good (beside the random "
                             "faults, which include it too)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--no-partitions", dest="partitions", action="store_false",
                        help="no network namespaces (partition rounds then do nothing)")
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="drill-cluster-")
    try:
        code = asyncio.run(run(args, root))
    finally:
        if not args.verbose:
            shutil.rmtree(root, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
