"""BookKeeper's own client recovers its ledgers on our bookies (issue 35): a real run, not in
CI, as scripts/interop_bookkeeper.py is.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/drill_bookkeeper_recovery.py \
        --rounds 10 --seed 1 [--mixed]

Each round, seeded:
  1. BookKeeper's Java client (scripts/java/RecoveryDrill.java, compiled at run time by
     Java's source launcher against the launcher's classpath) writes 3/2/2 CRC32C ledgers of
     1 KiB entries with ``--in-flight`` adds outstanding per ledger (1,000 by default),
     recording every add it saw acknowledged.
  2. A fault while it writes: none, kill -9 of one bookie, of two in turn, of all at once
     (each restarted on its data), or a ZooKeeper restart; then the writer is SIGKILLed with
     its adds in flight.
  3. BookKeeper's ``openLedger`` (fence, read past the LAC, write back, close) of each of the
     round's ledgers, each bounded by ``--recover-timeout`` (30 s).
Checks, each ledger: recovery returned in time; it closed at or above the last acknowledged
entry; every entry up to the close reads back byte for byte (payloads are a function of
ledger and entry, so every acknowledged one is checked). ``--mixed``: 2 of BookKeeper's
bookies beside 3 of ours, so every ensemble of 3 mixes both kinds.

Prints one line a round and a summary; exit 0 only if every check held. Every process it
starts is stopped by PID; everything lives under --dir.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from interop_bookkeeper import Failed, Interop, say  # noqa: E402

from api.cluster.local_zookeeper import free_port  # noqa: E402

JAVA = os.path.join(ROOT, "scripts", "java", "RecoveryDrill.java")
FAULTS = ("writer", "kill1", "kill2", "killall", "zk")


class Drill(Interop):
    """Interop's processes and cluster, plus restarts on the same ports and data."""

    def start_ours(self, name: str, uri: str, *flags: str) -> dict:
        home = os.path.join(self.dir, name)
        os.makedirs(home, exist_ok=True)
        http, rpc = free_port(), free_port()
        argv = [sys.executable, "-m", "bookie", "serve", "--data-dir",
                os.path.join(home, "data"), "--host", "127.0.0.1", "--port", str(http),
                "--bookie-port", str(rpc), "--metadata-service-uri", uri,
                "--autorecovery-daemon-enabled", "false", *flags]
        bookie = {"id": f"127.0.0.1:{http}", "rpc": rpc, "home": home, "argv": argv,
                  "log": os.path.join(home, "bookie.log"), "kind": "ours"}
        bookie["proc"] = self.spawn(argv, bookie["log"])
        self.ours[bookie["id"]] = bookie
        return bookie

    def kill9(self, bookie: dict) -> None:
        bookie["proc"].send_signal(signal.SIGKILL)
        bookie["proc"].wait()

    def restart(self, bookie: dict) -> None:
        bookie["proc"] = self.spawn(bookie["argv"], bookie["log"])

    def restart_zookeeper(self) -> None:
        self.zk.stop()
        self.zk.start()

    def java(self, *args: str, **kw) -> subprocess.Popen:
        argv = [self.launcher, "class", JAVA, *args]
        return subprocess.Popen(argv, cwd=self.dir, stdin=subprocess.DEVNULL, **kw)


def read_acks(path: str) -> tuple[list[int], dict[int, int], list[str]]:
    """(ledgers created, the highest acknowledged entry of each, add errors seen)."""
    created, acked, errors = [], collections.defaultdict(lambda: -1), []
    with open(path) as handle:
        for line in handle:
            if not line.endswith("\n"):
                break  # the writer was killed mid-line
            parts = line.split()
            if parts[0] == "C":
                created.append(int(parts[1]))
            elif parts[0] == "A":
                ledger, entry = int(parts[1]), int(parts[2])
                acked[ledger] = max(acked[ledger], entry)
            elif parts[0] == "E":
                errors.append(line.strip())
    return created, dict(acked), errors


def wait_for_acks(path: str, ledgers: int, at_least: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if os.path.exists(path):
            created, acked, _ = read_acks(path)
            if len(created) == ledgers and all(acked.get(i, -1) >= at_least for i in created):
                return
        time.sleep(0.1)  # noqa: sleep-ok (bounded poll of another process's progress)
    raise Failed(f"the writer did not reach {at_least} acknowledged adds a ledger in "
                 f"{timeout_s:.0f} s")


def fault(drill: Drill, kind: str, bookies: list[dict], rng: random.Random, uri: str) -> None:
    ids = [b["id"] for b in bookies]
    if kind == "kill1":
        victims = [rng.choice(bookies)]
    elif kind == "kill2":
        victims = rng.sample(bookies, 2)
    elif kind == "killall":
        for bookie in bookies:
            drill.kill9(bookie)
        for bookie in bookies:
            drill.restart(bookie)
        drill.wait_registered(uri, ids)
        return
    elif kind == "zk":
        drill.restart_zookeeper()
        return
    else:
        return
    for victim in victims:  # in turn: each back before the next goes
        drill.kill9(victim)
        time.sleep(rng.uniform(0.2, 1.0))  # noqa: sleep-ok (the fault's seeded length)
        drill.restart(victim)
        drill.wait_registered(uri, ids)


def one_round(drill: Drill, args, uri: str, bookies: list[dict], rng: random.Random,
              number: int) -> dict:
    kind = FAULTS[number % len(FAULTS)] if args.fault == "cycle" else args.fault
    acks = os.path.join(drill.dir, f"acks-{number}.txt")
    with open(os.path.join(drill.dir, f"writer-{number}.log"), "wb") as log:
        writer = drill.java("write", uri, str(args.ledgers), str(args.in_flight), acks,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_acks(acks, args.ledgers, rng.randrange(2_000, 6_000), 120)
        fault(drill, kind, bookies, rng, uri)
        time.sleep(rng.uniform(0.0, 1.0))  # noqa: sleep-ok (seeded: let adds pile up again)
    finally:
        writer.send_signal(signal.SIGKILL)  # adds in flight, by design
        writer.wait()
    created, acked, errors = read_acks(acks)
    started = time.monotonic()
    try:
        out = subprocess.run([drill.launcher, "class", JAVA, "recover", uri,
                              str(args.recover_timeout), *map(str, created)],
                             cwd=drill.dir, capture_output=True, text=True,
                             timeout=args.recover_timeout * len(created) + 300)
    except subprocess.TimeoutExpired as expired:  # counted as a failed round, not a crash
        out = subprocess.CompletedProcess(expired.cmd, -9, expired.stdout or "",
                                          f"recover did not end: {expired}")
        out.stdout = out.stdout.decode() if isinstance(out.stdout, bytes) else out.stdout
    results = {int(line.split()[1]): line.split()[2:] for line in out.stdout.splitlines()
               if line.startswith("R ")}
    problems = []
    for ledger in created:
        result = results.get(ledger)
        if result is None:
            problems.append(f"ledger {ledger}: no answer ({out.stderr[-300:]!r})")
        elif result[0] != "ok":
            problems.append(f"ledger {ledger}: {' '.join(result)}")
        elif int(result[1]) < acked.get(ledger, -1):
            problems.append(f"ledger {ledger}: closed at {result[1]}, below the last "
                            f"acknowledged entry {acked[ledger]}")
    closes = [int(r[2]) for r in results.values() if r and r[0] == "ok"]
    return {"fault": kind, "ledgers": len(created), "acked": sum(a + 1 for a in acked.values()),
            "add_errors": len(errors), "problems": problems,
            "recover_ms_max": max(closes, default=0),
            "seconds": round(time.monotonic() - started, 1)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"),
                        help="BookKeeper's `bk` wrapper (default $BOOKKEEPER_LAUNCHER)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--ledgers", type=int, default=4, help="ledgers a round (4)")
    parser.add_argument("--in-flight", type=int, default=1000,
                        help="adds outstanding per ledger (1000)")
    parser.add_argument("--fault", choices=("cycle",) + FAULTS, default="cycle",
                        help="the fault of every round; cycle: each in turn (default)")
    parser.add_argument("--recover-timeout", type=int, default=30,
                        help="seconds openLedger may take, per ledger (30)")
    parser.add_argument("--mixed", action="store_true",
                        help="2 of BookKeeper's bookies beside 3 of ours")
    parser.add_argument("--dir", default=None, help="work dir (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    if not args.launcher:
        parser.error("BookKeeper's launcher: --launcher or $BOOKKEEPER_LAUNCHER")
    seed = random.SystemRandom().randrange(2**31) if args.seed is None else args.seed
    rng = random.Random(seed)
    workdir = args.dir or tempfile.mkdtemp(prefix="bk-recovery-drill-")
    drill = Drill(args.launcher, workdir, 0)
    totals = collections.Counter()
    failures = []
    try:
        uri = drill.start_zookeeper("cluster")
        ours = [drill.start_ours(f"ours-{i}", uri) for i in range(3 if args.mixed else 4)]
        drill.wait_registered(uri, [b["id"] for b in ours])
        theirs = [drill.start_theirs(f"bk-{i}", uri) for i in range(2)] if args.mixed else []
        drill.wait_registered(uri, [b["id"] for b in ours + theirs])
        for number in range(args.rounds):
            result = one_round(drill, args, uri, ours, rng, number)
            totals.update(acked=result["acked"], ledgers=result["ledgers"],
                          problems=len(result["problems"]))
            totals[f"fault_{result['fault']}"] += 1
            totals["recover_ms_max"] = max(totals["recover_ms_max"], result["recover_ms_max"])
            say(f"round {number}: fault={result['fault']} ledgers={result['ledgers']} "
                f"acked={result['acked']} add_errors={result['add_errors']} "
                f"recover_ms_max={result['recover_ms_max']} "
                f"{'ok' if not result['problems'] else 'FAILED'}")
            for problem in result["problems"]:
                say(f"  {problem}")
            failures += result["problems"]
    except Failed as error:
        failures.append(str(error))
        say(f"FAILED: {error}")
    finally:
        drill.stop_all()
        if args.dir is None and not failures:
            shutil.rmtree(workdir, ignore_errors=True)
    faults = ",".join(f"{k[6:]}:{v}" for k, v in sorted(totals.items()) if k.startswith("fault_"))
    say(f"rounds={args.rounds} mixed={args.mixed} ledgers={totals['ledgers']} "
        f"acked={totals['acked']} not_recovered={totals['problems']} faults={faults} "
        f"recover_ms_max={totals['recover_ms_max']} seed={seed}"
        + ("" if not failures else f" FAILED (kept {workdir})"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
