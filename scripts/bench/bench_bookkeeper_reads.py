"""Catch-up reads side by side, in one run (issue 41; docs/bookkeeper-protocol.md §6): one of
OUR bookies, BookKeeper's with DbLedgerStorage (its default, Pulsar's) and BookKeeper's with
SortedLedgerStorage, each holding a backlog written by BookKeeper's own client and read back
by it (scripts/interop/java/ReadBench.java: BenchReadThroughputLatency's read loop, with the client's
throttle and protocol as flags). Each bookie is pinned to core 0, the Java client to core 1.

    sudo BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/bench/bench_bookkeeper_reads.py \\
        [--backlog-mb 200,1024] [--rounds 3] [--quorum 1,1,1] [--cases batch-v2,single-v2,single-v3]

Per round, per storage (rounds interleave the storages, so a drift of the machine hits each):
a fresh ZooKeeper and bookie(s); for each backlog size one ledger of 1 KiB entries; then
- hot: each case at once, in the order given (the first right after the write);
- cold: for each case the bookies stopped cleanly, the page cache dropped
  (``echo 3 > /proc/sys/vm/drop_caches``, root only: without it cold runs are skipped, and
  said so), the bookies started again, then the read.
Prints every run, then per case the median entries/s of the rounds with their spread, and
ours / the faster BookKeeper storage, and how busy the bookies' core and the client's were
during the reads (near 100%, that side is the limit). ``--floor`` also measures the disk's
own sequential and 4 KiB random read rates in the same run, as entries/s of 1 KiB.

BookKeeper's bookies run as shipped (bkenv.sh: -Xms1g -Xmx1g -XX:MaxDirectMemorySize=2g),
over the launcher's Netty (NIO for a build on Debian's 4.1.48, which has no native epoll);
a side ``db-epoll`` or ``sorted-epoll`` runs them over epoll on the Netty 4.2 jars of
``BOOKKEEPER_NETTY_JARS`` (scripts/interop/bk_netty.py), ``-flush`` (``db-epoll-flush``) with
``journalFlushWhenQueueEmpty=true``, ``-nosync`` with ``journalSyncData=false`` (a diagnosis
only: SIDE_FLAGS). The report says which transport each side's
bookies ran. ``--profile DIR``
records our bookie with py-spy during each of its reads (a profile run: its figures are not
comparable).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.interop import bk_netty  # noqa: E402
from scripts.bench.bench_bookies_per_host import cpu_times  # noqa: E402
from scripts.bench.disk_floor import cold_caches_possible, disk_floor, drop_caches  # noqa: E402
from scripts.interop.interop_run import Failed, Interop, say  # noqa: E402

JAVA = os.path.join(ROOT, "scripts", "interop", "java", "ReadBench.java")
ENTRY = 1024
STORAGES = {
    "ours": None,
    "db": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
    "sorted": "org.apache.bookkeeper.bookie.SortedLedgerStorage",
}
CASES = ("batch-v2", "single-v2", "single-v3")
BUSY = "bookie core busy"
CLIENT_BUSY = "client core busy"
#: BookKeeper's bookie as its distribution starts it (bkenv.sh).
BK_JAVA_OPTS = "-Xms1g -Xmx1g -XX:MaxDirectMemorySize=2g"
#: What a side's name may add to its storage, "-" apart ("db-epoll-flush").
SIDE_FLAGS = {
    "epoll": "its bookies over epoll, on the Netty 4.2 jars of BOOKKEEPER_NETTY_JARS "
             "(scripts/interop/bk_netty.py)",
    "flush": "journalFlushWhenQueueEmpty=true: its journal syncs as soon as no add waits, as "
             "ours does, not after grouping adds for up to journalMaxGroupWaitMSec (2 ms)",
    "nosync": "journalSyncData=false: its journal never syncs, so an add is acknowledged "
              "unsafe. A diagnosis, never a peer: whether the disk's sync is its limit",
}
#: The bookie settings each flag adds (epoll is the JVM's: bk_netty.py).
SIDE_CONF = {"epoll": "", "flush": "journalFlushWhenQueueEmpty=true\n",
             "nosync": "journalSyncData=false\n"}


def side_conf(flags: list[str]) -> str:
    return "".join(SIDE_CONF[flag] for flag in flags)


def is_peer(side: str) -> bool:
    """Whether ours is compared with ``side``: a BookKeeper side that acknowledges what it
    has not synced (-nosync) is a diagnosis, not a peer."""
    store, flags = parse_side(side)
    return store != "ours" and "nosync" not in flags


def parse_side(name: str) -> tuple[str, list[str]]:
    """A side's storage and flags: "db-epoll-flush" -> ("db", ["epoll", "flush"])."""
    store, *flags = name.split("-")
    if store not in STORAGES or not set(flags) <= set(SIDE_FLAGS) or \
            (flags and store == "ours"):
        raise SystemExit(f"no side {name!r}: a storage of {', '.join(STORAGES)}, then for "
                         f"BookKeeper's any of -{', -'.join(SIDE_FLAGS)}")
    return store, flags


class Side(Interop):
    """One storage's ZooKeeper and bookies, every bookie process pinned to core 0."""

    def __init__(self, launcher: str, workdir: str, storage: str) -> None:
        super().__init__(launcher, workdir, 0)
        self.storage = storage
        self.store, flags = parse_side(storage)
        self.epoll, self.flags = "epoll" in flags, flags
        self.bookies: list[dict] = []
        self.uri = ""

    def spawn(self, argv: list[str], log: str) -> subprocess.Popen:
        self.env = dict(os.environ, JAVA_OPTS=bk_netty.bookie_java_opts(BK_JAVA_OPTS,
                                                                      self.epoll))
        return super().spawn(["taskset", "-c", "0", *argv], log)

    def start(self, count: int) -> None:
        os.makedirs(self.dir, exist_ok=True)
        self.uri = self.start_zookeeper("zk")
        if self.storage != "ours":
            self.bk("shell", "-conf", self.shell_conf(self.uri), "initnewcluster")
        for n in range(count):
            if self.storage == "ours":
                # The same pending-add bound as BookKeeper's bookie below.
                bookie = self.start_ours(f"b{n}", self.uri, "--bookie-max-pending-adds",
                                         "100000")
            else:
                bookie = self.start_theirs(
                    f"b{n}", self.uri, f"ledgerStorageClass={STORAGES[self.store]}\n"
                    "maxPendingAddRequestsPerThread=100000\nmaxPendingReadRequestsPerThread=100000\n"
                    + side_conf(self.flags))
            self.bookies.append(bookie)
        self.wait_registered(self.uri, [b["id"] for b in self.bookies])
        self.check_transport()

    def check_transport(self) -> None:
        """Which transport BookKeeper's serving bookies run (epoll if asked, bk_netty)."""
        if self.storage != "ours":
            for bookie in self.bookies:
                bk_netty.checked(self.storage, bookie["proc"].pid, bookie["log"], self.epoll)

    def cold_restart(self) -> None:
        for bookie in self.bookies:
            self.stop_bookie(bookie)
        drop_caches()
        for bookie in self.bookies:
            self.restart(bookie)
        self.wait_registered(self.uri, [b["id"] for b in self.bookies])
        self.check_transport()

    def java(self, *args: str) -> list[str]:
        """ReadBench's output line, the client pinned to core 1."""
        argv = ["taskset", "-c", "1", self.launcher, "class", JAVA, *args]
        # The JVM as the bookie's: with the default (a quarter of the heap) the client runs
        # out of direct memory holding 100,000 single reads' answers.
        done = subprocess.run(argv, capture_output=True, text=True, timeout=3600,
                              cwd=self.dir, stdin=subprocess.DEVNULL,
                              env=dict(os.environ, JAVA_OPTS=BK_JAVA_OPTS))
        lines = [line.split() for line in done.stdout.splitlines()
                 if line[:2] in ("W ", "R ", "L ", "T ", "P ")]
        if done.returncode != 0 or not lines:
            with open(os.path.join(self.dir, f"readbench-{args[0]}.log"), "w") as handle:
                handle.write(done.stdout + done.stderr)
            said = [line for line in done.stdout.splitlines() if line.startswith("E ")]
            raise Failed(f"ReadBench {args[0]} exited {done.returncode}: "
                         + ("; ".join(said) or (done.stdout + done.stderr)[-3000:]))
        return lines[-1]

    def write(self, entries: int, quorum: tuple[int, int, int]) -> int:
        line = self.java("write", self.uri, str(entries), *map(str, quorum), "1000", "1")
        return int(line[1])

    def read(self, ledger: int, case: str, throttle: int,
             profile: str | None) -> tuple[float, float, float]:
        """Entries/s of one read, and how busy the bookies' core and the client's were
        meanwhile: the bookies' core's busy seconds over the read loop's (the client's JVM
        start, outside the loop, leaves core 0 idle), and the client JVM's own CPU time in
        the loop over the loop's. Near 1.0 that side is the limit."""
        mode, protocol = case.split("-")
        spy = None
        if profile is not None and self.storage == "ours":
            spy = subprocess.Popen([_py_spy(), "record", "--nonblocking", "--threads", "-r",
                                    "200", "-f", "raw", "-o", profile, "-p",
                                    str(self.bookies[0]["proc"].pid)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        before = cpu_times()
        try:
            line = self.java("read", self.uri, str(ledger), mode,
                             "1" if protocol == "v2" else "0", str(throttle))
        finally:
            if spy is not None:
                spy.send_signal(2)
                spy.wait(60)
        busy = (cpu_times()["0"][0] - before["0"][0]) / os.sysconf("SC_CLK_TCK")
        entries, ms = int(line[1]), max(int(line[2]), 1)
        return entries * 1000.0 / ms, busy * 1000.0 / ms, int(line[4]) / ms


def _py_spy() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.path.exists(beside) else "py-spy"


def one_round(args, base: str, index: int, storage: str, results: dict) -> None:
    side = Side(args.launcher, os.path.join(base, f"{index}-{storage}"), storage)
    try:
        side.start(args.quorum[0])
        ledgers = {mb: side.write(mb * 1024 * 1024 // ENTRY, args.quorum)
                   for mb in args.backlog_mb}
        temps = ("hot", "cold") if args.cold else ("hot",)
        for temp in temps:
            for mb, ledger in ledgers.items():
                for case in args.cases:
                    if temp == "cold":
                        side.cold_restart()
                    profile = None if args.profile is None else os.path.join(
                        args.profile, f"{index}-{mb}MB-{temp}-{case}.txt")
                    rate, busy, client = side.read(ledger, case, args.throttle, profile)
                    for key, value in (((mb, temp, case), rate), ((mb, temp, case, BUSY), busy),
                                       ((mb, temp, case, CLIENT_BUSY), client)):
                        results.setdefault(key, {}).setdefault(storage, []).append(value)
                    say(f"round {index + 1} {storage:>12} {mb:>5} MB {temp:>4} {case:>9}: "
                        f"{rate:>9,.0f} entries/s, bookie core {busy:.0%} busy, "
                        f"client {client:.0%}")
    finally:
        side.stop_all()
        if not args.keep:
            shutil.rmtree(side.dir, ignore_errors=True)  # GBs each: never left behind
        os.sync()  # the next side starts on a quiet disk


def report(args, results: dict, floor: dict | None) -> None:
    quorum = "/".join(map(str, args.quorum))
    say(f"Catch-up reads, 1 KiB entries, E/Qw/Qa {quorum}, single reads throttled at "
        f"{args.throttle:,}/s, medians of {args.rounds} interleaved rounds (min-max); "
        f"BookKeeper's bookies over {bk_netty.seen()}:")
    for key, by_storage in results.items():
        if len(key) == 4:  # a core's busy fraction in the case just printed
            medians = {s: statistics.median(v) for s, v in by_storage.items()}
            say(f"  {'':>23}  {key[3]}: " +
                "  ".join(f"{s} {m:.0%}" for s, m in medians.items()))
            continue
        mb, temp, case = key
        cells, medians = [], {}
        for storage in args.storages:
            rates = by_storage.get(storage, [])
            if rates:
                medians[storage] = statistics.median(rates)
                cells.append(f"{storage} {medians[storage]:>9,.0f} "
                             f"({min(rates):,.0f}-{max(rates):,.0f})")
        theirs = [m for s, m in medians.items() if is_peer(s)]
        ratio = (f"  ours/best BK {medians['ours'] / max(theirs):.2f}x"
                 if theirs and "ours" in medians else "")
        say(f"  {mb:>5} MB {temp:>4} {case:>9}: " + "  ".join(cells) + ratio)
    if floor is not None:
        say(f"  disk floor: sequential {floor['seq_mb_s']:,.0f} MB/s = "
            f"{floor['seq_entries_s']:,.0f} entries/s; random 4 KiB "
            f"{floor['random_iops']:,.0f} reads/s (one entry a read)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"))
    parser.add_argument("--backlog-mb", default="200,1024",
                        help="backlog sizes in MiB of 1 KiB entries, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--storages", default="ours,db,sorted",
                        help="sides, of ours, db (DbLedgerStorage), sorted "
                        "(SortedLedgerStorage); BookKeeper's with -epoll (over epoll: "
                        "BOOKKEEPER_NETTY_JARS, scripts/interop/bk_netty.py) and/or -flush "
                        "(journalFlushWhenQueueEmpty=true), e.g. db-epoll-flush")
    parser.add_argument("--cases", default=",".join(CASES),
                        help="batch-v2 (BP-62 batch reads of 1,000), single-v2, single-v3")
    parser.add_argument("--quorum", default="1,1,1", help="E,Qw,Qa; E bookies per side")
    parser.add_argument("--throttle", type=int, default=200_000,
                        help="the client's throttle for single reads (BookKeeper's 5,000 "
                        "measures the client)")
    parser.add_argument("--no-cold", dest="cold", action="store_false")
    parser.add_argument("--floor", action="store_true",
                        help="measure the disk's sequential and random read rates too")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs")
    parser.add_argument("--profile", help="py-spy raw profiles of our bookie, into this dir")
    args = parser.parse_args(argv)
    if not args.launcher:
        print("no BookKeeper launcher: pass --launcher or set BOOKKEEPER_LAUNCHER")
        return 2
    args.launcher = os.path.abspath(args.launcher)
    args.backlog_mb = [int(x) for x in args.backlog_mb.split(",")]
    args.storages = args.storages.split(",")
    for side in args.storages:
        parse_side(side)  # a bad name fails now, not after the sides before it ran
    args.cases = args.cases.split(",")
    args.quorum = tuple(int(x) for x in args.quorum.split(","))
    if "batch-v3" in args.cases:
        print("batch-v3: BookKeeper's client refuses batch reads over v3 (and then hangs)")
        return 2
    if args.cold and not cold_caches_possible():
        say("cold runs skipped: dropping the page cache needs root (/proc/sys/vm/drop_caches)")
        args.cold = False
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    base = tempfile.mkdtemp(prefix="bench-bk-reads-", dir=os.environ.get("BENCH_DIR"))
    results: dict = {}
    try:
        floor = disk_floor(base) if args.floor and cold_caches_possible() else None
        for index in range(args.rounds):
            for storage in args.storages:
                one_round(args, base, index, storage, results)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    report(args, results, floor)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
