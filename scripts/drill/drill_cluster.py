#!/usr/bin/env python3
"""Cluster drill (docs/cluster.md §5): break bookies, writers, recoveries and ZooKeeper; check S1-S6.

    .venv/bin/python scripts/drill/drill_cluster.py [--rounds 200] [--seconds 1800] [--seed N]
                                              [--no-partitions] [--zk-acl] [--tls]

With ``--zk-acl`` every process of the drill authenticates to ZooKeeper with credentials made
for the run, and every znode it creates is theirs alone (docs/operations.md §7). With
``--tls`` the bookies serve HTTPS only with mutual TLS, certificates of a CA made for the run
(docs/operations.md §6): every client, helper script and autorecovery worker shows one.

A real ZooKeeper (Debian's package) and 5 bookie daemons, each on a fixed port (a restarted
bookie keeps its id), each in a network namespace of the drill's own on a bridge
(tests/support/netns.py). Without root or ``ip netns`` the drill refuses to run (exit 2, the
reason printed) unless ``--no-partitions`` is given. Bookies run GC every 2-5 s with a 3 s
metadata grace (GM1, GM2 of api/cluster/gc_metadata.py), so GC deletes copies during the drill.
Every round, writers append to new replicated ledgers at E/Qw/Qa = 3/2/2 and 3/3/2 while one
fault, never more than the quorums tolerate at once, strikes:

    kill      kill -9 of a bookie (restarted at the end of the round, same data dir)
    pause     SIGSTOP of a bookie for 0.5-2 s, then SIGCONT (a partition it does not notice)
    zk        a ZooKeeper restart (same port and data dir)
    writer    a writer process is killed with SIGKILL mid-stream (appends in flight); this
              process recovers its ledger
    recover2  two clients recover one ledger at once
    partition a bookie's network link goes down for 1-3 s, then up
    lose      kill -9 of a bookie for good: a new bookie (a new id, an empty data dir) takes
              its place, and before the next round autorecovery (inside the bookies:
              docs/cluster.md §4) must have copied every fragment it held to live bookies,
              checked bookie by bookie; over a run the drill loses more bookies than any
              quorum tolerates at once
    recfault  a fault during recovery: a writer process is killed as in ``writer``; while
              this process recovers its ledger, one bookie of the last segment (one being
              fenced or fenced already) is paused (SIGSTOP) or killed -9, then healed
              (SIGCONT, or restarted with its data dir); an undecided recovery is retried
    recdie    the recovering process dies: a writer process is killed as in ``writer``, a
              recovery of its ledger runs in a process of its own, maybe a bookie of the last
              segment is paused or killed under it, and it is SIGKILLed after 0-0.45 s; the
              bookie is healed; then a second recovery runs under a different fault (another
              bookie of the last segment killed if the first was paused, else paused)
    return    kill -9 of a bookie; autorecovery replaces it in every ensemble (as for
              ``lose``), then it comes back with its old id and old data dir: its copies are
              over-replicated now and GM2 deletes them; it may be lost again later
    closerace appends racing close() on one writer (four tasks appending while another
              closes), then appends after close: every append must fail or be acknowledged
              with an id <= the closed lastEntryId (S2)
    none      no fault

After the round every ledger is closed by its writer or recovered, then checked: S1 every
acknowledged entry reads back byte-identical through the metadata; S2 the closed end is at
least every acknowledged entry, and no append is acknowledged above it (closerace); S3 two
clients read the same bytes and the same end, every recovery of a ledger reported the same
end, and every replica of every entry up to the end, read bookie by bookie from each bookie
of its write set (BookieClient.read_entry), holds the same bytes as acknowledged (or, for an
entry never acknowledged, as the readers read); S4 the LAC a writer reported never went back,
a reader's ``EnsembleReader.read_lac()`` never goes back across calls, and a read above the
reader's LAC (an open ledger; unless the reader's own ``lac`` covers the entry once it
served it: a reader may ask the bookies again) or past lastEntryId (a closed one) is
refused with NoEntry;
S5 recovery never closes below an acknowledged entry (an undecided recovery is retried).

The replica rule of S3: other bytes on any replica are a violation at once. A replica that
lacks an entry is not, at once: a write set member may legitimately miss an entry of a
CLOSED ledger (a 3/3/2 add acknowledged at Qa whose third copy was cut off by a kill, a
pause or the close; a recovery write-back that reached Qa only). Finding those is the
auditor's replica check (every 5 s), and putting them back is a worker's. So a missing copy
on a live bookie becomes a suspect; it is a violation only if it is still missing (read again
through the then current metadata) once two replica checks ended after it was seen (so one
started after it) and its ledger carries no under-replication marker. A copy on a bookie
that is not registered is the lost-bookie path's (``lose``/``return`` wait for it). At the
end the drill waits (bounded) for every suspect to become due and no marker to be left.
Old ledgers are deleted now and then (GM1 then deletes their copies).

At the end S6: a bookie whose data dir is wiped must refuse to start. One summary line, like
the kill -9 drill's (GC deletes read from the bookies' logs: "GC from metadata: ..."); exit 1
on any violation, 2 when partitions cannot be made.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import hashlib
import os
import re
import random
import shutil
import secrets
import signal
import sys
import tempfile
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from api.client import zk_auth  # noqa: E402
from api.client.codec import LedgerCodec  # noqa: E402
from api.client.distribution import bookies_of  # noqa: E402
from api.client.ensemble import BookKeeper, RecoveryUndecided  # noqa: E402
from api.client.ensemble_reader import BOOKIE_FAILURES  # noqa: E402
from api.client.fragments import referenced_bookies  # noqa: E402
from api.cluster.underreplication import Underreplication  # noqa: E402
from bookie.errors import NoEntry, NoLedger  # noqa: E402
from api.cluster.local_zookeeper import ZooKeeperServer, free_port  # noqa: E402
from tests.support import netns  # noqa: E402
from tests.support.bk_api import BkApi  # noqa: E402
from tests.support.servers import Daemon  # noqa: E402

#: Each fault and its weight in the round mix.
#: A round that has not ended after this long is reported STUCK and ends the drill.
ROUND_TIMEOUT_S = 600.0
#: Starts of ZooKeeper tried after a 'zk' fault before the drill gives up.
ZK_RESTARTS = 3
FAULTS = {"kill": 2, "pause": 2, "zk": 1, "writer": 2, "recover2": 1, "partition": 2,
          "lose": 1, "recfault": 2, "recdie": 2, "return": 1, "closerace": 2, "none": 1}
QUORUMS = ((3, 2, 2), (3, 3, 2))
FLAGS = ("--checkpoint-interval-ms", "2000", "--journal-prealloc-bytes", "1MiB",
         "--gc-metadata-grace-ms", "3000", "--lost-bookie-recovery-delay-s", "3",
         "--open-ledger-rereplication-grace-period-s", "5", "--rereplication-rate-bytes", "0",
         "--replicas-check-interval-s", "5")
#: Each bookie's GC runs every this many ms (drawn per bookie), GM1/GM2 before each run.
GC_INTERVAL_MS = (2000, 5000)
#: A bookie's log line of a GC-from-metadata run (api/cluster/member.py).
GC_LOG = re.compile(r"GC from metadata: deleted ledgers \[([^\]]*)\].*?placed elsewhere now "
                    r"\[([^\]]*)\]")
#: How long the end of the run waits for every missing-copy suspect to be judged.
SETTLE_DEADLINE_S = 120.0
#: How long autorecovery may take to restore a lost bookie's copies before it is a violation.
REREPLICATION_DEADLINE_S = 180.0
TIMEOUTS = {"add_timeout_s": 2.0, "read_timeout_s": 2.0}

#: The writer of the "writer" fault, a process of its own: it creates a 3/2/2 ledger, prints
#: its id, then appends --entries entries (64 in flight) and prints each acknowledged id.
CHILD_WRITER = """
import asyncio, sys
sys.path.insert(0, sys.argv[3])
from api.client.ensemble import BookKeeper
from scripts.drill.drill_cluster import payload_of

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

#: The recovery of the "recdie" fault, a process of its own (SIGKILLed mid-recovery): it
#: prints "started" once connected, then "closed <lastEntryId>" if it gets that far.
CHILD_RECOVERY = """
import asyncio, sys
sys.path.insert(0, sys.argv[3])
from api.client.ensemble import BookKeeper

async def main(uri, ledger_id):
    async with await BookKeeper.connect(uri, add_timeout_s=2.0, read_timeout_s=2.0) as bk:
        print("started", flush=True)
        reader = await bk.open_ledger(ledger_id, b"drill")
        print("closed", reader.metadata.last_entry_id, flush=True)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def _make_run_pki(pki: str) -> None:
    """--tls: the run's CA and the clients' certificate, named in the environment so this
    process, its helper scripts and the bookies' autorecovery all use them
    (api/tls.py client_context_from_env)."""
    from api.cluster.certs import make_ca, make_cert  # noqa: PLC0415
    from api.tls import CLIENT_CERT_ENV, CLIENT_KEY_ENV, TRUST_ENV  # noqa: PLC0415

    ca = make_ca(pki, "drill CA")
    client = make_cert(ca, pki, "drill-client")
    os.environ.update({TRUST_ENV: ca.cert_file, CLIENT_CERT_ENV: client.cert_file,
                       CLIENT_KEY_ENV: client.key_file})


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
        self.ends: list[int] = []  # every end a recovery of it reported (S3)
        self.expected: dict[int, bytes | None] | None = None  # entry -> bytes, once checked
        self.round = 0


class Drill:
    def __init__(self, args, root: str) -> None:
        self.args, self.root = args, root
        self.rng = random.Random(args.seed)
        self.partitions = None if args.partitions else "off (--no-partitions)"
        self.network = netns.TestNetwork(args.bookies) if args.partitions else None
        host = self.network.host_address if self.network else "127.0.0.1"
        self.zookeeper = ZooKeeperServer(os.path.join(root, "zookeeper"), host=host)
        #: Exit codes of ZooKeeper deaths no fault caused (reported; the drill restarts it).
        self.zookeeper_deaths: list[int] = []
        self._zk_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="zk")
        self.bookies: list[Daemon] = []
        self.uri = ""
        self.violations: list[str] = []
        self.faults = {name: 0 for name in FAULTS}
        self.acked = 0
        self.ledgers = 0
        self.everything: list[Ledger] = []  # every ledger of the run, for re-replication
        self.lost_bookies: list[str] = []
        self.rereplication_s: list[float] = []
        self.daemons: list[Daemon] = []  # every bookie ever started (their logs: GC deletes)
        self.faults_during_recovery = 0
        self.returns = 0
        self.close_races = 0
        self.deleted = 0  # old ledgers deleted (GM1 then deletes their copies)
        self.above_lac = 0  # reads above a reader's LAC or a closed end that were served
        self.replicas_read = 0
        self.bk_reads = 0  # --bk-protocol: replicas read over BookKeeper's protocol
        self.bk_apis: dict[str, BkApi] = {}
        #: (ledger, entry, bookie) -> the replica-check ctimes seen since (S3 replica rule)
        self.suspects: dict[tuple[int, int, str], list[int]] = {}
        self.suspect_base: dict[tuple[int, int, str], int] = {}

    # -- the cluster ---------------------------------------------------------------------

    def start(self) -> None:
        """ZooKeeper and the bookies (the test network is made first, by run())."""
        self.zookeeper.start()
        self.uri = f"zk://{self.zookeeper.hosts}/ledgers"
        for i in range(self.args.bookies):
            self.bookies.append(self._new_bookie(i, f"bookie-{i}").start())

    def _new_bookie(self, index: int, name: str) -> Daemon:
        """A bookie in slot ``index`` (its network namespace), a new port: a new id."""
        where = () if self.network is None else ("--host", self.network.address(index))
        tls, client_ssl = self._tls_flags(index)
        daemon = Daemon(os.path.join(self.root, name, "data"), *FLAGS,
                        "--gc-interval-ms", str(self.rng.randint(*GC_INTERVAL_MS)),
                        "--metadata-service-uri", self.uri, "--port", str(free_port()),
                        *where, *tls, *(("--bookie-port", "0") if self.args.bk_protocol else ()),
                        prefix=self.network.prefix(index) if self.network else (),
                        client_ssl=client_ssl)
        self.daemons.append(daemon)
        return daemon

    def _tls_flags(self, index: int) -> tuple[tuple[str, ...], object]:
        """--tls: slot ``index``'s certificate (its address in the names), mutual TLS with
        the run's CA; and the context the readiness poll connects with."""
        if not self.args.tls:
            return (), None
        from api.cluster.certs import Issued, make_cert  # noqa: PLC0415
        from api.tls import client_context  # noqa: PLC0415

        pki = os.path.join(self.root, "pki")
        host = "127.0.0.1" if self.network is None else self.network.address(index)
        leaf = make_cert(Issued(os.path.join(pki, "ca.pem"), os.path.join(pki, "ca-key.pem")),
                         pki, f"slot{index}", hosts=(host, "127.0.0.1"))
        flags = ("--tls-cert-file", leaf.cert_file, "--tls-key-file", leaf.key_file,
                 "--tls-ca-file", os.path.join(pki, "ca.pem"))
        return flags, client_context(os.path.join(pki, "ca.pem"), leaf.cert_file,
                                     leaf.key_file)

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

    def _bookie(self, bookie_id: str) -> Daemon | None:
        """The running-or-not member with that id (None: lost for good)."""
        return next((d for d in self.bookies if d.url.endswith("//" + bookie_id)), None)

    def gc_deletes(self) -> tuple[int, int]:
        """(GM1, GM2) deletes over the run, from every bookie's log."""
        gm1 = gm2 = 0
        for daemon in self.daemons:
            try:
                text = daemon.log_text()
            except OSError:
                continue
            for missing, moved in GC_LOG.findall(text):
                gm1 += len([i for i in missing.split(",") if i.strip()])
                gm2 += len([i for i in moved.split(",") if i.strip()])
        return gm1, gm2

    # -- a round -------------------------------------------------------------------------

    async def round(self, number: int) -> str:
        proc = self.zookeeper.proc
        if proc is not None and proc.poll() is not None:  # it died outside any 'zk' fault
            self.zookeeper_deaths.append(proc.returncode)
            print(f"ZooKeeper exited by itself (code {proc.returncode}) before round "
                  f"{number}; restarting it", file=sys.stderr, flush=True)
            await self._on_zk_thread(self._restart_zookeeper)
        every = self.args.lose_every
        if every and number % every == 0:
            fault = "lose"
        else:
            mix = {name: FAULTS[name] for name in self.args.faults}
            fault = self.rng.choices(list(mix), weights=list(mix.values()))[0]
        self.faults[fault] += 1
        before = len(self.violations)
        ledgers = [Ledger(QUORUMS[i % 2]) for i in range(self.args.writers)]
        returning = None  # the bookie of a "return" round, down until autorecovery is done
        async with await BookKeeper.connect(self.uri, **TIMEOUTS) as bk:
            for ledger in ledgers:
                e, qw, qa = ledger.quorums
                ledger.writer = await bk.create_ledger(e, qw, qa, password=b"drill")
                ledger.ledger_id = ledger.writer.ledger_id
            self.ledgers += len(ledgers)
            tail_bk = await BookKeeper.connect(self.uri, **TIMEOUTS)  # another client
            if fault in ("writer", "recfault", "recdie"):
                # ledger 0 is written by a process of its own, then killed
                await ledgers[0].writer.close()
                ledgers[0] = Ledger((3, 2, 2))
                await self._child_writer(ledgers[0])
            for ledger in ledgers:
                ledger.round = number
            writers = [asyncio.create_task(self._write(ledger)) for ledger in ledgers
                       if ledger.writer is not None]
            tails = [asyncio.create_task(self._tail(tail_bk, ledger)) for ledger in ledgers]
            tails += [asyncio.create_task(self._probe(tail_bk, ledger)) for ledger in ledgers]
            undo = await self._inject(fault, ledgers, writers)
            if fault == "return":
                returning, undo = undo, None
            await asyncio.gather(*writers, return_exceptions=True)
            if undo is not None:
                await undo()
            await self._end(bk, ledgers, fault)
            done, late = await asyncio.wait(tails, timeout=120)
            for task in late:
                task.cancel()
            await tail_bk.close()
            for ledger, task in zip(ledgers + ledgers, tails):
                if task in late or task.exception() is not None:
                    why = "still running" if task in late else repr(task.exception())
                    self.violations.append(f"tail of ledger {ledger.ledger_id}: {why}")
        await self._check(ledgers)
        self.everything.extend(ledgers)
        if fault == "lose":
            await self._await_rereplication(self.lost_bookies[-1])
        if returning is not None:
            victim, bookie_id = returning
            await self._await_rereplication(bookie_id)
            await asyncio.to_thread(victim.start)  # the old id, the old data dir
            self.returns += 1
        await self._delete_old(number)
        return f"fault={fault} ledgers={len(ledgers)} acked={sum(len(l.acked) for l in ledgers)}" \
               f" bad={len(self.violations) - before}"

    async def _delete_old(self, number: int) -> None:
        """Now and then delete a ledger of an earlier round: GM1 then deletes its copies."""
        old = [ledger for ledger in self.everything if ledger.round < number]
        if not old or self.rng.random() < 0.5:
            return
        ledger = self.rng.choice(old)
        async with await BookKeeper.connect(self.uri, **TIMEOUTS) as bk:
            await bk.delete_ledger(ledger.ledger_id)
        self.everything.remove(ledger)
        self.suspects = {k: v for k, v in self.suspects.items() if k[0] != ledger.ledger_id}
        self.deleted += 1

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

    async def _probe(self, bk, ledger: Ledger) -> None:
        """S4 through one reader until the ledger is closed: ``read_lac()`` never goes back
        across calls, and the entry above it is refused (NoEntry) unless the reader's own
        LAC (``reader.lac``) covers it once read; once closed, a new reader's read past
        lastEntryId is refused. A read that fails otherwise (a bookie
        down) is neither."""
        lid = ledger.ledger_id
        reader = await bk.open_ledger(lid, b"drill", recover=False)
        seen, went_back, served = -1, [], []
        while True:
            metadata = await bk.store.read(lid)
            if metadata.closed:
                reader = await bk.open_ledger(lid, b"drill", recover=False)
                probe = metadata.last_entry_id + 1
            else:
                lac = await reader.read_lac()
                if lac < seen:
                    went_back.append((seen, lac))
                seen = max(seen, lac)
                probe = lac + 1
            try:
                await reader.read_entry(probe)
                # A reader may learn a higher LAC to serve a read (it asks the bookies
                # again): shown an entry is fine only if its own LAC now covers it (no
                # ``lac`` attribute: it has no LAC of its own, a violation).
                if metadata.closed or getattr(reader, "lac", -1) < probe:
                    served.append(("past the end" if metadata.closed else "above the LAC",
                                   probe))
            except NoEntry:
                pass
            except (NoLedger, *BOOKIE_FAILURES):
                pass
            if metadata.closed:
                break
            await asyncio.sleep(0.1)  # noqa: sleep-ok (the probe's pace)
        if went_back:
            self.violations.append(f"S4 ledger {lid}: read_lac() went back {len(went_back)} "
                                   f"times, first from {went_back[0][0]} to {went_back[0][1]}")
        for kind in ("above the LAC", "past the end"):
            probes = [entry_id for how, entry_id in served if how == kind]
            if probes:
                self.above_lac += len(probes)
                self.violations.append(f"S4 ledger {lid}: {len(probes)} reads {kind} were "
                                       f"served, first of entry {probes[0]}")

    @staticmethod
    async def _nothing() -> None:
        pass

    async def _strike(self, bk, ledger_id: int, how: str, spare=()):
        """Pause or kill -9 one running bookie of the ledger's last segment (not one of
        ``spare``); returns (its id, a coroutine function that heals it)."""
        metadata = await bk.store.read(ledger_id)
        running = [d for b in metadata.ensembles[-1][1] if b not in spare
                   and (d := self._bookie(b)) is not None and d.proc.poll() is None]

        async def nothing() -> None:
            pass
        if not running:
            return None, nothing
        victim = self.rng.choice(running)
        if how == "pause":
            victim.proc.send_signal(signal.SIGSTOP)

            async def heal() -> None:
                victim.proc.send_signal(signal.SIGCONT)
        else:
            victim.kill9()

            async def heal() -> None:
                await asyncio.to_thread(victim.start)
        return victim.url.rsplit("/", 1)[-1], heal

    async def _recover_under_fault(self, ledger: Ledger, how: str, spare=()) -> str | None:
        """A recovery of the ledger while ``how`` strikes a bookie of its last segment after
        0-0.3 s; healed after 0.5-2 s; then retried until decided (S5). Returns the bookie
        struck."""
        async with await BookKeeper.connect(self.uri, **TIMEOUTS) as bk:
            recovery = asyncio.create_task(bk.open_ledger(ledger.ledger_id, b"drill"))
            await asyncio.sleep(self.rng.uniform(0.0, 0.3))  # noqa: sleep-ok (mid-recovery)
            struck, heal = None, None
            if not recovery.done():  # a fault during recovery, not after it
                struck, heal = await self._strike(bk, ledger.ledger_id, how, spare)
            if struck is not None:
                self.faults_during_recovery += 1
            else:
                heal = self._nothing
            await asyncio.wait({recovery}, timeout=self.rng.uniform(0.5, 2.0))
            await heal()
            try:
                reader = await asyncio.wait_for(recovery, 120)
                ledger.ends.append(reader.metadata.last_entry_id)
                ledger.closed = True
                return struck
            except Exception as exc:  # noqa: BLE001 - judged below, then retried
                if not (isinstance(exc, (RecoveryUndecided, OSError, TimeoutError))
                        or "IN_RECOVERY" in str(exc)):
                    self.violations.append(f"ledger {ledger.ledger_id}: recovery under a "
                                           f"{how} fault: {exc!r}")
        await self._recover(ledger, 1)
        return struck

    async def _recover_dying(self, ledger: Ledger) -> None:
        """The recdie fault: a recovery in a process of its own, maybe under a bookie fault,
        SIGKILLed after 0-0.45 s; then a second recovery under a different bookie fault."""
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD_RECOVERY, self.uri, str(ledger.ledger_id), ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env=dict(os.environ, PYTHONPATH=ROOT))
        try:
            await asyncio.wait_for(child.stdout.readline(), 60)  # "started": connected
        except asyncio.TimeoutError:
            self.violations.append(f"ledger {ledger.ledger_id}: the recovery process did not "
                                   f"connect in 60 s")
        first = self.rng.choice(("kill", "kill", "pause", "none"))  # kills change ensembles
        struck, heal = None, self._nothing
        await asyncio.sleep(self.rng.uniform(0.0, 0.15))  # noqa: sleep-ok (mid-recovery)
        if first != "none" and child.returncode is None:
            async with await BookKeeper.connect(self.uri, **TIMEOUTS) as bk:
                struck, heal = await self._strike(bk, ledger.ledger_id, first)
            self.faults_during_recovery += struck is not None
        await asyncio.sleep(self.rng.uniform(0.0, 0.3))  # noqa: sleep-ok (mid-recovery)
        if child.returncode is None:
            child.kill()
            self.faults_during_recovery += 1
        for line in (await child.stdout.read()).split(b"\n"):
            words = line.split()
            if len(words) == 2 and words[0] == b"closed":
                ledger.ends.append(int(words[1]))
        await child.wait()
        await heal()
        second = "kill" if first == "pause" else "pause"
        await self._recover_under_fault(ledger, second, spare=(struck,) if struck else ())

    async def _close_race(self, ledger: Ledger) -> None:
        """Four tasks append while another closes the writer; then appends after the close.
        Every append must fail or be acknowledged with an id <= the closed end (S2)."""
        writer, closed_at = ledger.writer, []
        after_close: list[int] = []

        async def appender(rng: random.Random) -> None:
            while True:
                payload = rng.randbytes(rng.randint(10, 500))
                try:
                    entry_id = await writer.append(payload)
                except Exception:  # noqa: BLE001 - refused: fine
                    return
                ledger.acked[entry_id] = payload
                if closed_at:
                    after_close.append(entry_id)
                if len(after_close) > 50:
                    return
        tasks = [asyncio.create_task(appender(random.Random(self.rng.random())))
                 for _ in range(4)]
        await asyncio.sleep(self.rng.uniform(0.0, 0.1))  # noqa: sleep-ok (appends in flight)
        self.close_races += 1
        try:
            closed_at.append(await writer.close())
        except Exception:  # noqa: BLE001 - fenced or failed: recovered at the end
            ledger.writer = None
            await asyncio.gather(*tasks, return_exceptions=True)
            return
        ledger.writer = None
        ledger.closed = True
        for _ in range(3):  # appends after close
            payload = self.rng.randbytes(100)
            try:
                entry_id = await asyncio.wait_for(writer.append(payload), 10)
            except Exception:  # noqa: BLE001 - refused: as it must be
                continue
            ledger.acked[entry_id] = payload
            after_close.append(entry_id)
        done, late = await asyncio.wait(tasks, timeout=30)
        for task in late:
            task.cancel()
        above = sorted(e for e in after_close if e > closed_at[0])
        if above:
            self.violations.append(
                f"S2 close race ledger {ledger.ledger_id}: closed at {closed_at[0]}, "
                f"{len(above)} appends acknowledged after close above it: {above[:8]}")

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
            await self._on_zk_thread(self.zookeeper.stop)
            await asyncio.sleep(self.rng.uniform(0.1, 1.0))  # noqa: sleep-ok (ZK is down)
            await self._on_zk_thread(self._restart_zookeeper)
            return nothing
        if fault in ("writer", "recfault", "recdie"):
            await self._kill_child_writer(ledgers[0])
            return nothing
        if fault == "return":  # down until autorecovery moved its copies (round())
            victim = self.rng.choice([d for d in self.bookies if d.proc.poll() is None])
            victim.kill9()
            return victim, victim.url.rsplit("/", 1)[-1]
        if fault == "closerace":
            await self._close_race(ledgers[-1])
            return nothing
        if fault == "recover2":
            ledgers[0].writer = None  # left open: two clients recover it at the end
        return nothing

    async def _on_zk_thread(self, call) -> None:
        """Stopping and starting ZooKeeper get a thread of their own: while it is down, the
        clients' reads block the default executor's threads until it is back (kazoo waits
        for a connection), and a restart queued behind them would never run."""
        await asyncio.get_running_loop().run_in_executor(self._zk_thread, call)

    def _restart_zookeeper(self) -> None:
        """The same port and data dir; a start that fails (a slow JVM on a loaded machine)
        is tried again, so a fault never leaves the cluster without its ZooKeeper."""
        for attempt in range(1, ZK_RESTARTS + 1):
            try:
                self.zookeeper.start()
                return
            except (RuntimeError, TimeoutError, OSError) as exc:
                print(f"ZooKeeper restart {attempt}/{ZK_RESTARTS} failed: {exc}",
                      file=sys.stderr, flush=True)
                self.zookeeper.stop()
        raise RuntimeError(f"ZooKeeper did not come back after {ZK_RESTARTS} starts")

    def zookeeper_up(self) -> bool:
        proc = self.zookeeper.proc
        return proc is not None and proc.poll() is None

    async def _end(self, bk, ledgers, fault: str) -> None:
        """Close each ledger with its writer, or recover it (twice at once for recover2)."""
        for ledger in ledgers:
            if ledger.closed:
                continue  # closerace closed it
            if ledger.writer is not None:
                try:
                    await ledger.writer.close()
                    ledger.closed = True
                    continue
                except Exception:  # noqa: BLE001 - fenced or failed: recover it
                    pass
            if ledger is ledgers[0] and fault == "recfault":
                await self._recover_under_fault(ledger, self.rng.choice(("pause", "kill")))
                continue
            if ledger is ledgers[0] and fault == "recdie":
                await self._recover_dying(ledger)
                continue
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
            ledger.ends.extend(ends)
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
            await self._judge_suspects(a)
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
        if any(e != end for e in ledger.ends):
            self.violations.append(f"S3 ledger {lid}: recoveries reported ends "
                                   f"{sorted(set(ledger.ends))}, the metadata {end}")
        values: dict[int, bytes] = {}
        for entry_id in range(end + 1):
            try:
                got_a = (await reader_a.read_entry(entry_id)).payload
                got_b = (await reader_b.read_entry(entry_id)).payload
            except Exception as exc:  # noqa: BLE001 - named below
                self.violations.append(f"S1 ledger {lid} entry {entry_id}: {exc!r}")
                continue
            values[entry_id] = got_a
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
        expected = {e: ledger.acked.get(e, values.get(e)) for e in range(end + 1)}
        await self._check_replicas(a, ledger, expected, suspect=True)

    # -- S3 on every replica (the rule: the module's docstring) ----------------------------

    async def _check_replicas(self, bk, ledger: Ledger, expected: dict[int, bytes | None],
                              suspect: bool, only=None) -> list[tuple[int, str]]:
        """Read every entry of ``expected`` from each bookie the current metadata's write set
        names. Other bytes: a violation. Missing on a live bookie: returned, and with
        ``suspect`` recorded as a suspect (judged later). ``only``: entry ids to read."""
        lid = ledger.ledger_id
        metadata = await bk.store.read(lid)
        codec = LedgerCodec.for_password(lid, b"drill", metadata.digest_type)
        alive = await bk.alive_bookies()
        gate = asyncio.Semaphore(16)

        async def one(entry_id: int, holder: str):
            async with gate:
                try:
                    data = await asyncio.wait_for(
                        self._read_replica(bk, holder, lid, entry_id), 5.0)
                except (NoEntry, NoLedger):
                    return entry_id, holder, None
                except Exception as exc:  # noqa: BLE001 - down or slow: not judged
                    return entry_id, holder, exc
            try:
                return entry_id, holder, codec.decode(data, entry_id).payload
            except Exception as exc:  # noqa: BLE001 - a copy that does not verify
                return entry_id, holder, ValueError(f"does not verify: {exc!r}")
        entries = sorted(only if only is not None else expected)
        jobs = [one(entry_id, holder) for entry_id in entries
                for holder in bookies_of(metadata.ensembles, entry_id, metadata.write_quorum)
                if holder in alive]
        missing, other = [], []
        for entry_id, holder, got in await asyncio.gather(*jobs):
            self.replicas_read += 1
            if got is None:
                missing.append((entry_id, holder))
            elif isinstance(got, ValueError):
                other.append((entry_id, holder, str(got)))
            elif isinstance(got, bytes) and expected.get(entry_id) is not None \
                    and got != expected[entry_id]:
                other.append((entry_id, holder, "other bytes"))
        for entry_id, holder, why in other[:5]:
            self.violations.append(f"S3 ledger {lid} entry {entry_id}: the replica on {holder}: "
                                   f"{why}")
        if len(other) > 5:
            self.violations.append(f"S3 ledger {lid}: {len(other) - 5} more bad replicas")
        if suspect and missing:
            ur = Underreplication(bk.store.client, bk.store.root)
            base = await asyncio.to_thread(ur.replicas_check_ctime_ms) or 0
            for entry_id, holder in missing:
                key = (lid, entry_id, holder)
                self.suspects.setdefault(key, [])
                self.suspect_base.setdefault(key, base)
                ledger.expected = expected
        return missing

    async def _read_replica(self, bk, holder: str, ledger_id: int, entry_id: int) -> bytes:
        """One replica's stored bytes; with --bk-protocol even entries are read over
        BookKeeper's protocol (the bookie_port listener, under the same faults), the rest
        over HTTP."""
        if self.args.bk_protocol and entry_id % 2 == 0:
            api = await self._bk_api(holder)
            if api is not None:
                data = await api.read_entry(ledger_id, entry_id)
                self.bk_reads += 1
                return data
        return await bk.client(holder).read_entry(ledger_id, entry_id)

    async def _bk_api(self, holder: str) -> BkApi | None:
        api = self.bk_apis.get(holder)
        if api is not None and not api.pump.done():
            return api
        daemon = self._bookie(holder)
        if daemon is None or daemon.bk_port is None or daemon.proc.poll() is not None:
            return None
        host = urllib.parse.urlsplit(daemon.url).hostname
        self.bk_apis[holder] = api = await asyncio.wait_for(
            BkApi.connect(daemon.bk_port, None, host), 2.0)
        return api

    async def _judge_suspects(self, bk, final: bool = False) -> int:
        """Each suspect (a copy missing on a live bookie) whose ledger is unmarked and that
        two replica checks ended after: read again through the current metadata; still
        missing is a violation. Returns how many suspects are left undecided."""
        if not self.suspects:
            return 0
        ur = Underreplication(bk.store.client, bk.store.root)
        ctime = await asyncio.to_thread(ur.replicas_check_ctime_ms) or 0
        marked = set(await asyncio.to_thread(ur.marked))
        due: dict[int, set[int]] = {}
        for key, seen in list(self.suspects.items()):
            if ctime > self.suspect_base[key] and ctime not in seen:
                seen.append(ctime)
            if len(seen) >= 2 and key[0] not in marked:
                due.setdefault(key[0], set()).add(key[1])
        by_id = {ledger.ledger_id: ledger for ledger in self.everything}
        for lid, entry_ids in due.items():
            for key in [k for k in self.suspects if k[0] == lid and k[1] in entry_ids]:
                del self.suspects[key]
            ledger = by_id.get(lid)
            if ledger is None or ledger.expected is None:
                continue  # deleted meanwhile
            try:
                still = await self._check_replicas(bk, ledger, ledger.expected, suspect=False,
                                                   only=entry_ids)
            except NoLedger:
                continue
            if still:
                self.violations.append(
                    f"S3 ledger {lid}: {len(still)} copies still missing after two replica "
                    f"checks and no marker, e.g. entry {still[0][0]} on {still[0][1]}")
        return len(self.suspects)

    async def settle(self) -> None:
        """The end of the run: every suspect judged, within SETTLE_DEADLINE_S."""
        started = time.monotonic()
        async with await BookKeeper.connect(self.uri, **TIMEOUTS) as bk:
            while await self._judge_suspects(bk, final=True):
                if time.monotonic() - started > SETTLE_DEADLINE_S:
                    ur = Underreplication(bk.store.client, bk.store.root)
                    marked = await asyncio.to_thread(ur.marked)
                    self.violations.append(
                        f"S3: {len(self.suspects)} missing copies undecided after "
                        f"{SETTLE_DEADLINE_S:.0f} s (ledgers still marked: {marked[:10]})")
                    return
                await asyncio.sleep(0.5)  # noqa: sleep-ok (bounded poll of the auditor)

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
    if args.partitions and netns.unavailable():
        print(f"refusing to run: partitions need network namespaces: {netns.unavailable()} "
              f"(or pass --no-partitions)", flush=True)
        return 2
    drill = Drill(args, root)
    started = time.monotonic()
    try:
        drill.network and drill.network.create()
    except (RuntimeError, OSError) as exc:
        drill.network.close()
        print(f"refusing to run: cannot make the test network: {exc} (or pass "
              f"--no-partitions)", flush=True)
        return 2
    drill.start()
    rounds = 0
    try:
        for number in range(1, args.rounds + 1):
            if time.monotonic() - started > args.seconds:
                break
            try:  # bounded: a round that hangs (say, on a ZooKeeper that never came back)
                line = await asyncio.wait_for(drill.round(number), ROUND_TIMEOUT_S)
            except asyncio.TimeoutError:
                drill.violations.append(f"STUCK round {number}: no end after "
                                        f"{ROUND_TIMEOUT_S:.0f} s (ZooKeeper "
                                        f"{'up' if drill.zookeeper_up() else 'down'})")
                break
            rounds = number
            if args.verbose:
                print(f"round {number} {line}", flush=True)
        await drill.settle()
        drill.check_wiped_bookie_refused()
    finally:
        for api in drill.bk_apis.values():
            await api.close()
        drill.stop()
    for violation in drill.violations:
        print(f"VIOLATION {violation}", flush=True)
    faults = ",".join(f"{name}:{count}" for name, count in drill.faults.items())
    lost = sum(1 for v in drill.violations if v.startswith(("S1", "S2")))
    partitions = "on" if drill.network is not None else drill.partitions.replace(" ", "-")
    gm1, gm2 = drill.gc_deletes()
    print(f"rounds={rounds} acked={drill.acked} lost={lost} violations={len(drill.violations)}"
          f" ledgers={drill.ledgers} faults={faults} partitions={partitions}"
          f" lost_bookies={len(drill.lost_bookies)}"
          f" rereplication_s_max={max(drill.rereplication_s, default=0):.1f}"
          f" faults_during_recovery={drill.faults_during_recovery}"
          f" gc_deletes={gm1 + gm2} gm2_deletes={gm2} deleted={drill.deleted}"
          f" returns={drill.returns} close_races={drill.close_races}"
          f" above_lac_served={drill.above_lac} replicas_read={drill.replicas_read}"
          + (f" bk_protocol_reads={drill.bk_reads}" if args.bk_protocol else "")
          + f" zk_deaths={len(drill.zookeeper_deaths)}"
          f" seconds={time.monotonic() - started:.0f} seed={args.seed}", flush=True)
    return 1 if drill.violations else 0


def _stop_on_sigterm(signum, frame) -> None:
    """SIGTERM ends the drill like Ctrl-C: the finally blocks stop every bookie and
    ZooKeeper it started and remove its network namespaces."""
    raise KeyboardInterrupt


def main(argv=None) -> int:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200,
                        help="rounds to run (default 200); each ends with S1-S5 checked")
    parser.add_argument("--seconds", type=float, default=1800,
                        help="stop starting rounds after this long (default 1800)")
    parser.add_argument("--seed", type=int, default=random.randrange(2**31),
                        help="the seed of every choice (default: random, printed)")
    parser.add_argument("--bookies", type=int, default=5, help="bookie daemons (default 5)")
    parser.add_argument("--writers", type=int, default=3,
                        help="writer ledgers a round (default 3)")
    parser.add_argument("--entries", type=int, default=100,
                        help="entries each writer appends a round (default 100)")
    parser.add_argument("--lose-every", type=int, default=0, metavar="K",
                        help="every K-th round loses a bookie for good (beside the random "
                             "faults, which include it too)")
    parser.add_argument("--faults", type=lambda text: text.split(","), default=list(FAULTS),
                        metavar="A,B", help="only these faults in the random mix (default: "
                                            "all, weighted)")
    parser.add_argument("--tls", action="store_true",
                        help="bookies serve HTTPS only with mutual TLS (a CA made for the "
                             "run; every client and autorecovery shows a certificate)")
    parser.add_argument("--zk-acl", action="store_true",
                        help="ZooKeeper digest auth and ACLs on (docs/operations.md §7): "
                             "credentials made for the run, every process of it uses them")
    parser.add_argument("--bk-protocol", action="store_true",
                        help="bookies also listen on BookKeeper's protocol (bookie_port, "
                             "docs/bookkeeper-protocol.md); the replica checks read every other "
                             "entry over it")
    parser.add_argument("--verbose", action="store_true",
                        help="a line a round (its fault, counts, violations)")
    parser.add_argument("--no-partitions", dest="partitions", action="store_false",
                        help="no network namespaces (partition rounds then do nothing); "
                             "without it the drill refuses to run where it cannot make them")
    args = parser.parse_args(argv)
    unknown = [name for name in args.faults if name not in FAULTS]
    if unknown:
        parser.error(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    if args.zk_acl:
        # In the environment: the daemons, the helper scripts and this process's clients
        # all authenticate with it, and every znode of the run is theirs alone.
        os.environ[zk_auth.DIGEST_ENV] = f"drill:{secrets.token_hex(16)}"
    root = tempfile.mkdtemp(prefix="drill-cluster-")
    if args.tls:
        _make_run_pki(os.path.join(root, "pki"))
    try:
        code = asyncio.run(run(args, root))
    finally:
        if not args.verbose:
            shutil.rmtree(root, ignore_errors=True)
    return code


if __name__ == "__main__":
    exit_code = 130  # interrupted (SIGTERM, Ctrl-C) unless main returns
    try:
        exit_code = main()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # Bounded: threads still blocked in a ZooKeeper call of a client whose ZooKeeper
        # the drill has stopped would hold interpreter exit for ever; leave without them.
        os._exit(exit_code)
