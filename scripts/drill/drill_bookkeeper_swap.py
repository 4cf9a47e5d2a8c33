"""Swap the software, keep the disks (issue 58): each round one bookie of a 4-bookie cluster
is stopped (kill -9 or SIGTERM, seeded) while BookKeeper's Java client writes, and started
again as the other implementation on the same dirs, with the same bk_server.conf, bookie id
and cookie. A real run, not in CI (tests/cluster/test_bookkeeper_dirs.py is CI's short
version, on dirs BookKeeper wrote).

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/drill/drill_bookkeeper_swap.py \
        --rounds 4 --seed 58 [--dirs 2,2]

  1. 4 of our bookies, each started with ``bookie serve -c <its bk.conf>``: DbLedgerStorage,
     GC every 3 s, minor and major compaction every 5 and 10 s on both sides.
  2. Round r swaps bookie ``r // 2 mod 4``: rounds 2k and 2k+1 take it ours -> BookKeeper ->
     ours. BookKeeper's client (scripts/interop/java/RecoveryDrill.java) writes ``--ledgers``
     3/2/2 ledgers throughout; the swap strikes after a seeded number of acknowledgements;
     the writer is SIGKILLed with adds in flight once the swapped bookie is registered again.
  3. BookKeeper's ``openLedger`` recovers every ledger of the round.
Checks: every ledger closed at or above its last acknowledged entry; every entry up to the
close is on every bookie of its write set byte for byte, read from each bookie by
BookKeeper's client (RecoveryDrill.java held), for this round's ledgers and the last
round's (written to the swapped bookie before it was swapped); copies BookKeeper's client
left off a write set (apache/bookkeeper#3005) must be put back by our autorecovery within
300 s. The last round's ledgers are then deleted by BookKeeper's client, so GC and compaction
run on both implementations' files. One line a round, one summary line; exit 0 only if
every check held. Every process is stopped by PID; everything lives under --dir.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from api.cluster.local_zookeeper import free_port  # noqa: E402
from scripts.drill.drill_bookkeeper_recovery import (JAVA, Drill, held_on_write_sets,  # noqa: E402
                                                    read_acks, recovered, repair,
                                                    start_writer, wait_for_acks)
from scripts.interop.interop_run import STORAGE_CLASSES, Failed, say  # noqa: E402
from tests.support.dir_layout import dir_lists, parse_dirs  # noqa: E402

#: Both sides read these keys (our mapping: docs/operations.md §8).
SWAP_CONF = """\
advertisedAddress=127.0.0.1
allowLoopback=true
ledgerStorageClass={storage}
httpServerEnabled=false
statsProviderClass=org.apache.bookkeeper.stats.NullStatsProvider
dataIntegrityCheckingEnabled=false
autoRecoveryDaemonEnabled=false
journalPreAllocSizeMB=4
gcWaitTime=3000
minorCompactionInterval=5
majorCompactionInterval=10
minorCompactionThreshold=0.2
majorCompactionThreshold=0.5
dbStorage_writeCacheMaxSizeMb=32
dbStorage_readAheadCacheMaxSizeMb=16
"""
BK_JAVA_OPTS = "-Xms256m -Xmx256m -XX:MaxDirectMemorySize=256m"


class SwapDrill(Drill):
    def start_swappable(self, name: str, uri: str) -> dict:
        """A bookie whose bk_server.conf both implementations start from (the same id,
        127.0.0.1:<bookiePort>, and dirs); it starts as ours."""
        home = os.path.join(self.dir, name)
        os.makedirs(home, exist_ok=True)
        ledgers, journals = dir_lists(home, *self.dirs) if self.dirs else \
            (os.path.join(home, "ledgers"), os.path.join(home, "journal"))
        rpc, http = free_port(), free_port()
        conf = os.path.join(home, "bk_server.conf")
        with open(conf, "w") as handle:
            handle.write(f"bookieId=127.0.0.1:{rpc}\nbookiePort={rpc}\n"
                         f"journalDirectories={journals}\n"
                         f"ledgerDirectories={ledgers}\nmetadataServiceUri={uri}\n"
                         + SWAP_CONF.format(storage=STORAGE_CLASSES["db"]))
        bookie = {"id": f"127.0.0.1:{rpc}", "rpc": rpc, "http": http, "home": home,
                  "conf": conf, "log": os.path.join(home, "bookie.log")}
        self.start_as(bookie, "ours")
        return bookie

    def start_as(self, bookie: dict, kind: str) -> None:
        if kind == "ours":
            argv = [sys.executable, "-m", "bookie", "serve", "-c", bookie["conf"],
                    "--port", str(bookie["http"]), "--gc-metadata-grace-ms", "2000"]
            self.env = None
        else:
            argv = [self.launcher, "bookie", "--conf", bookie["conf"]]
            self.env = dict(os.environ, JAVA_OPTS=BK_JAVA_OPTS)
        with open(bookie["log"], "a") as log:
            log.write(f"\n===== started as {kind} =====\n")
        bookie.update(kind=kind, argv=argv, proc=self.spawn(argv, bookie["log"]))
        self.env = None


def swap(drill: SwapDrill, bookie: dict, how: str, uri: str, ids: list[str]) -> None:
    """Stop the bookie (``how``: kill9 or term) and start it as the other implementation."""
    if how == "kill9":
        drill.kill9(bookie)
    else:
        drill.stop_bookie(bookie)
    drill.start_as(bookie, "BookKeeper" if bookie["kind"] == "ours" else "ours")
    drill.wait_registered(uri, ids, timeout_s=180)


def one_round(drill: SwapDrill, args, uri: str, bookies: list[dict], rng: random.Random,
              number: int, previous: list[int]) -> dict:
    victim = bookies[(number // 2) % len(bookies)]
    how, was = rng.choice(("kill9", "term")), victim["kind"]
    writer, acks = start_writer(drill, args, uri, number)
    try:
        wait_for_acks(acks, args.ledgers, rng.randrange(2_000, 6_000), 120)
        swap(drill, victim, how, uri, [b["id"] for b in bookies])
        wait_for_acks(acks, args.ledgers, 0, 60)
        time.sleep(rng.uniform(0.5, 2.0))  # noqa: sleep-ok (seeded: adds to the new side)
    finally:
        writer.send_signal(signal.SIGKILL)  # adds in flight, by design
        writer.wait()
    created, acked, errors = read_acks(acks)
    problems, _ = recovered(drill, uri, created, acked, args.recover_timeout)
    repaired = 0
    if not problems:
        missing, problems = held_on_write_sets(drill, uri, created + previous)
        if missing and not problems:  # BookKeeper's client left copies off (BK-3005)
            repaired = missing
            problems = repair(drill, uri, created + previous, "ours", number)
    if not problems and previous:  # deleted: GC and compaction of both sides run on them
        out = subprocess.run([drill.launcher, "class", JAVA, "delete", uri,
                              *map(str, previous)], cwd=drill.dir, capture_output=True,
                             text=True, timeout=300).stdout
        problems += [f"deleteLedger: {line}" for line in out.splitlines()
                     if line.startswith("D ") and " ok" not in line]
    return {"swap": f"{victim['id']}:{was}->{victim['kind']}:{how}", "created": created,
            "acked": sum(a + 1 for a in acked.values()), "add_errors": len(errors),
            "repaired": repaired, "problems": problems}


#: Log lines that say GC or compaction did work: ours (bookie/gc.py, bookie/compaction.py) and
#: BookKeeper's (GarbageCollectorThread, EntryLogCompactor).
GC_WORK = {"ours_compacted": "bookie.compaction: compacted entry log",
           "bk_compacted": "Removing entry log after compaction",
           "bk_removed": "Removing entry log metadata"}


def gc_work(bookies: list[dict]) -> dict[str, int]:
    """How often each side's GC and compaction did work, from the bookies' logs."""
    counts = dict.fromkeys(GC_WORK, 0)
    counts["ours_deleted"] = 0
    for bookie in bookies:
        with open(bookie["log"], errors="replace") as handle:
            for line in handle:
                for key, text in GC_WORK.items():
                    counts[key] += text in line
                if "bookie.gc: gc: " in line and " 0 logs deleted" not in line:
                    counts["ours_deleted"] += 1
    return counts


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"),
                        help="BookKeeper's `bk` wrapper (default $BOOKKEEPER_LAUNCHER)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds (4: two bookies, "
                        "each ours -> BookKeeper -> ours)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--ledgers", type=int, default=4, help="ledgers a round (4)")
    parser.add_argument("--in-flight", type=int, default=500,
                        help="adds outstanding per ledger (500)")
    parser.add_argument("--dirs", type=parse_dirs, default=None, metavar="L,J",
                        help="L ledger dirs and J journal dirs a bookie (default one each)")
    parser.add_argument("--recover-timeout", type=int, default=60,
                        help="seconds openLedger may take, per ledger (60)")
    parser.add_argument("--dir", default=None, help="work dir (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    if not args.launcher:
        parser.error("BookKeeper's launcher: --launcher or $BOOKKEEPER_LAUNCHER")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    seed = random.SystemRandom().randrange(2**31) if args.seed is None else args.seed
    rng = random.Random(seed)
    workdir = args.dir or tempfile.mkdtemp(prefix="bk-swap-drill-")
    drill = SwapDrill(args.launcher, workdir, 0)
    drill.dirs = args.dirs
    totals, failures, previous, bookies = collections.Counter(), [], [], []
    try:
        uri = drill.start_zookeeper("cluster")
        bookies = [drill.start_swappable(f"bookie-{i}", uri) for i in range(4)]
        drill.wait_registered(uri, [b["id"] for b in bookies], timeout_s=120)
        for number in range(args.rounds):
            result = one_round(drill, args, uri, bookies, rng, number, previous)
            previous = result["created"]
            totals.update(acked=result["acked"], ledgers=len(result["created"]),
                          repaired=result["repaired"], problems=len(result["problems"]))
            say(f"round {number}: swap={result['swap']} ledgers={len(result['created'])} "
                f"acked={result['acked']} add_errors={result['add_errors']} "
                + (f"repaired={result['repaired']} " if result["repaired"] else "")
                + ("ok" if not result["problems"] else "FAILED"))
            for problem in result["problems"]:
                say(f"  {problem}")
            failures += result["problems"]
            if result["problems"]:
                break
    except (Failed, RuntimeError, subprocess.TimeoutExpired) as error:
        failures.append(str(error))
        say(f"FAILED: {error}")
    finally:
        drill.stop_all()
        work = " ".join(f"{k}={v}" for k, v in gc_work(bookies).items())  # before rmtree
        if args.dir is None and not failures:
            shutil.rmtree(workdir, ignore_errors=True)
    dirs = "1,1" if args.dirs is None else ",".join(map(str, args.dirs))
    say(f"rounds={args.rounds} dirs={dirs} ledgers={totals['ledgers']} acked={totals['acked']} "
        f"not_recovered={totals['problems']} repaired={totals['repaired']} {work} seed={seed}"
        + ("" if not failures else f" FAILED (kept {workdir})"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
