"""BookKeeper's own client recovers its ledgers on our bookies (issue 35): a real run, not in
CI, as scripts/interop/interop_bookkeeper.py is.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/drill/drill_bookkeeper_recovery.py \
        --rounds 10 --seed 1 [--mixed | --tls]

Each round, seeded:
  1. BookKeeper's Java client (scripts/interop/java/RecoveryDrill.java, compiled at run time by
     Java's source launcher against the launcher's classpath) writes 3/2/2 CRC32C ledgers of
     1 KiB entries with ``--in-flight`` adds outstanding per ledger (1,000 by default),
     recording every add it saw acknowledged.
  2. A fault while it writes: none, kill -9 of one bookie, of two in turn, of all at once
     (each restarted on its data), a ZooKeeper restart, or one of our bookies lost for good
     (kill -9, never restarted; "lost-ours" and "lost-bk" name whose autorecovery moves its
     copies, ours or BookKeeper's; "return": ours moves them, then the bookie comes back
     with its old id and data); then the writer is SIGKILLed with its adds in flight.
  3. BookKeeper's ``openLedger`` (fence, read past the LAC, write back, close) of each of the
     round's ledgers, each bounded by ``--recover-timeout`` (30 s).
  4. After a loss: autorecovery runs until no ledger's metadata names the lost bookie
     (bounded, 300 s); a new bookie of ours takes its place in the pool (or it returns).
  5. Once checked, the round's ledgers are deleted by BookKeeper's client (deleteLedger),
     as a topic's retention would: every round starts from a cluster of the same size, and
     the bookies' GC from metadata runs under the drill.
Checks, each ledger: recovery returned in time; it closed at or above the last acknowledged
entry; every entry up to the close reads back byte for byte (payloads are a function of
ledger and entry, so every acknowledged one is checked); every entry is on every bookie of
its write set, byte for byte, as BookKeeper's client reads each copy from each bookie
(after a loss: every ledger that named the lost bookie, whichever round wrote it). Copies
BookKeeper's client itself left off a write set (apache/bookkeeper#3005: an add completed
by the replaced bookie's ack is never sent to its replacement) are counted as "repaired"
when autorecovery's replica check puts them back within 300 s; a copy that differs, or one
still missing then, fails the round. ``--mixed``: 2 of BookKeeper's
bookies beside 3 of ours, so every ensemble of 3 mixes both kinds; a loss is moved by the
fault's autorecovery (ours reads and writes BookKeeper's bookies over their protocol since
issue 55; before, every mixed loss and repair was BookKeeper's), and copies are mended by
``--mixed-repair`` (ours by default). ``--tls``: our
bookies with mutual TLS on both ports (scripts/interop/bk_tls_peer.py); BookKeeper's client does
START_TLS, and a client without TLS keys must get BKUnauthorizedAccessException.

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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.interop.bk_tls_peer import TlsPeer, connected_over_tls, plain_client_refused  # noqa: E402
from scripts.interop.interop_run import Failed, Interop, say  # noqa: E402


JAVA = os.path.join(ROOT, "scripts", "interop", "java", "RecoveryDrill.java")
FAULTS = ("writer", "kill1", "kill2", "killall", "zk", "lost-ours", "lost-bk", "return")
#: Faults that take one of our bookies away until autorecovery (ours or BookKeeper's) has
#: moved every copy it held: "lost" ones never come back, "return" comes back with its old id
#: and data once the metadata no longer names it.
LOSSES = {"lost-ours": "ours", "lost-bk": "BookKeeper", "return": "ours"}


class Drill(Interop):
    """Interop's processes and cluster, plus restarts on the same ports and data."""

    def kill9(self, bookie: dict) -> None:
        bookie["proc"].send_signal(signal.SIGKILL)
        bookie["proc"].wait()

    def restart_zookeeper(self) -> None:
        self.zk.stop()
        self.zk.start()

    def autorecovery(self, kind: str, uri: str, number: int) -> subprocess.Popen:
        log = os.path.join(self.dir, f"autorecovery-{number}.log")
        if kind == "ours":
            return self.spawn([sys.executable, "-m", "bookie", "autorecovery",
                               "--metadata-service-uri", uri, "--lost-bookie-recovery-delay-s",
                               "0", "--replicas-check-interval-s", "0"], log)
        return self.spawn([self.launcher, "autorecovery", "--conf", self.shell_conf(uri)], log)

    def stop(self, proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

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


def fault(drill: Drill, kind: str, bookies: list[dict], rng: random.Random,
          uri: str) -> dict | None:
    """Strike the fault; the bookie it took away for good (LOSSES), if any."""
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
    elif kind in LOSSES:
        victim = rng.choice(bookies)
        drill.kill9(victim)
        return victim
    else:
        return
    for victim in victims:  # in turn: each back before the next goes
        drill.kill9(victim)
        time.sleep(rng.uniform(0.2, 1.0))  # noqa: sleep-ok (the fault's seeded length)
        drill.restart(victim)
        drill.wait_registered(uri, ids)


def start_writer(drill: Drill, args, uri: str, number: int) -> tuple[subprocess.Popen, str]:
    """BookKeeper's writer of round ``number`` (RecoveryDrill.java write), and its ack file."""
    acks = os.path.join(drill.dir, f"acks-{number}.txt")
    with open(os.path.join(drill.dir, f"writer-{number}.log"), "wb") as log:
        writer = drill.java("write", uri, str(args.ledgers), str(args.in_flight), acks,
                            stdout=log, stderr=subprocess.STDOUT)
    return writer, acks


def one_round(drill: Drill, args, uri: str, bookies: list[dict], rng: random.Random,
              number: int) -> dict:
    kind = FAULTS[number % len(FAULTS)] if args.fault == "cycle" else args.fault
    writer, acks = start_writer(drill, args, uri, number)
    try:
        wait_for_acks(acks, args.ledgers, rng.randrange(2_000, 6_000), 120)
        lost = fault(drill, kind, bookies, rng, uri)
        time.sleep(rng.uniform(0.0, 1.0))  # noqa: sleep-ok (seeded: let adds pile up again)
    finally:
        writer.send_signal(signal.SIGKILL)  # adds in flight, by design
        writer.wait()
    created, acked, errors = read_acks(acks)
    started = time.monotonic()
    problems, closes = recovered(drill, uri, created, acked, args.recover_timeout)
    moved_s, checked = None, list(created)
    if lost is not None and not problems:
        moved, moved_s = replace_lost(drill, uri, bookies, lost, kind, number, problems,
                                      args.mixed)
        checked = sorted(set(created) | moved)
    repaired = 0
    if not problems:
        missing, held_problems = held_on_write_sets(drill, uri, checked)
        if missing and not held_problems:  # BookKeeper's client left copies off (BK-3005)
            repaired = missing
            held_problems = repair(drill, uri, checked,
                                   args.mixed_repair if args.mixed else "", number)
        problems += held_problems
    if not problems:  # checked: deleted, as a topic's retention would, so rounds stay alike
        out = subprocess.run([drill.launcher, "class", JAVA, "delete", uri,
                              *map(str, checked)], cwd=drill.dir, capture_output=True,
                             text=True, timeout=300).stdout
        problems += [f"deleteLedger: {line}" for line in out.splitlines()
                     if line.startswith("D ") and " ok" not in line]
    return {"fault": kind, "repaired": repaired, "ledgers": len(created), "acked": sum(a + 1 for a in acked.values()),
            "add_errors": len(errors), "problems": problems,
            "recover_ms_max": max(closes, default=0),
            "seconds": round(time.monotonic() - started, 1), "moved_s": moved_s}


def recovered(drill: Drill, uri: str, created: list[int], acked: dict[int, int],
              timeout_s: int) -> tuple[list[str], list[int]]:
    """BookKeeper's ``openLedger`` of each ledger (RecoveryDrill.java recover): the problems
    (no answer, a failure, a close below the last acknowledged entry) and each recovery's
    milliseconds."""
    try:
        out = subprocess.run([drill.launcher, "class", JAVA, "recover", uri, str(timeout_s),
                              *map(str, created)], cwd=drill.dir, capture_output=True,
                             text=True, timeout=timeout_s * len(created) + 300)
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
    return problems, [int(r[2]) for r in results.values() if r and r[0] == "ok"]


def replace_lost(drill: Drill, uri: str, bookies: list[dict], lost: dict, kind: str,
                 number: int, problems: list[str],
                 mixed: bool = False) -> tuple[set[int], float | None]:
    """Autorecovery (ours or BookKeeper's, LOSSES[kind]) moves every copy the lost bookie
    held; then it returns with its old id and data ("return"), or a new bookie of ours takes
    its place in the pool. The ledgers that named it, and how long the move took. On a
    mixed cluster too (since issue 55: ours reads and writes BookKeeper's bookies over
    their protocol, api/client/bkport/); before, it was always BookKeeper's there."""
    recovery_kind = LOSSES[kind]
    named = {i for i, m in drill.ledgers(uri).items()
             if any(lost["id"] in members for _first, members in m.ensembles)}
    started = time.monotonic()
    recovery = drill.autorecovery(recovery_kind, uri, number)
    try:
        while True:
            left = [i for i, m in drill.ledgers(uri).items()
                    if any(lost["id"] in members for _first, members in m.ensembles)]
            if not left:
                break
            if time.monotonic() - started > 300 or recovery.poll() is not None:
                problems.append(f"{recovery_kind} autorecovery: ledgers {left} still name "
                                f"the lost bookie {lost['id']} after "
                                f"{time.monotonic() - started:.0f} s")
                return named, None
            time.sleep(1)  # noqa: sleep-ok (bounded wait for another process's work)
    finally:
        drill.stop(recovery)
    moved_s = round(time.monotonic() - started, 1)
    if kind == "return":
        drill.restart(lost)
    else:
        bookies.remove(lost)
        bookies.append(drill.start_ours(f"ours-r{number}", uri))
    drill.wait_registered(uri, [b["id"] for b in bookies])
    return named, moved_s


def held_on_write_sets(drill: Drill, uri: str, ledgers) -> tuple[int, list[str]]:
    """Every entry up to each ledger's close is on every bookie of its write set, byte for
    byte, as BookKeeper's own client reads each copy from each bookie (RecoveryDrill.java
    held). (copies missing, problems): a copy that differs, or a ledger not checked, is a
    problem at once; missing copies are for the caller to judge (see repair)."""
    out = subprocess.run([drill.launcher, "class", JAVA, "held", uri, *map(str, ledgers)],
                         cwd=drill.dir, capture_output=True, text=True, timeout=900)
    checked = {int(line.split()[1]): [int(n) for n in line.split()[2:]]
               for line in out.stdout.splitlines() if line.startswith("H ")}
    problems, missing = [], 0
    for ledger in ledgers:
        if ledger not in checked:
            problems.append(f"ledger {ledger}: held check gave no answer "
                            f"({out.stderr[-300:]!r})")
        elif checked[ledger][2]:
            problems.append(f"ledger {ledger}: {checked[ledger][2]} copies differ from what "
                            f"was written: " + "; ".join(
                                line for line in out.stdout.splitlines()
                                if line.startswith(f"W {ledger} ")))
        missing += checked.get(ledger, [0, 0, 0])[1]
    return missing, problems


def repair(drill: Drill, uri: str, ledgers, mixed: str, number: int) -> list[str]:
    """Copies missing from a write set right after the writer's own ensemble change are
    BookKeeper's client's doing, not a bookie's: an add that the replaced bookie had
    acknowledged is completed by the ack it no longer counts (apache/bookkeeper#3005, #4097),
    so its copy is never sent to the replacement. Autorecovery's replica check is what
    finds and mends those: ours (on a mixed cluster too, since issue 55: it reads
    BookKeeper's bookies over their protocol), or with ``--mixed-repair bookkeeper``
    BookKeeper's auditor, whose checkAllLedgers reads every bookie over BookKeeper's
    protocol. The round passes only if every copy is on its write set within 300 s."""
    started = time.monotonic()
    if mixed == "bookkeeper":
        conf = drill.shell_conf(uri)
        with open(conf, "a") as handle:
            handle.write("auditorPeriodicCheckInterval=5\n")
        recovery = drill.spawn([drill.launcher, "autorecovery", "--conf", conf],
                               os.path.join(drill.dir, f"repair-{number}.log"))
    else:
        recovery = drill.spawn([sys.executable, "-m", "bookie", "autorecovery",
                                "--metadata-service-uri", uri, "--replicas-check-interval-s",
                                "1"], os.path.join(drill.dir, f"repair-{number}.log"))
    try:
        while True:
            time.sleep(5)  # noqa: sleep-ok (bounded wait for another process's work)
            missing, problems = held_on_write_sets(drill, uri, ledgers)
            if problems or not missing:
                return problems
            if time.monotonic() - started > 300 or recovery.poll() is not None:
                return [f"{missing} copies still missing from their write sets "
                        f"{time.monotonic() - started:.0f} s into autorecovery's repair"]
    finally:
        drill.stop(recovery)


def parse_args(argv: list[str]) -> argparse.Namespace:
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
                        help="2 of BookKeeper's bookies beside 3 of ours (a lost bookie's "
                             "copies moved by the fault's autorecovery: ours for lost-ours "
                             "and return, BookKeeper's for lost-bk)")
    parser.add_argument("--storage", choices=("sorted", "db"), default="sorted",
                        help="with --mixed: BookKeeper's bookies' ledger storage "
                             "(SortedLedgerStorage, as before, or DbLedgerStorage, which "
                             "answers no entry list: our replica check copies what it "
                             "cannot check)")
    parser.add_argument("--mixed-repair", choices=("ours", "bookkeeper"), default="ours",
                        help="with --mixed: whose autorecovery mends copies BookKeeper's "
                             "client left off a write set (default ours; before issue 55 "
                             "always BookKeeper's)")
    parser.add_argument("--tls", action="store_true", help="mutual TLS on our bookies' "
                        "ports, BookKeeper's client through START_TLS (not with --mixed)")
    parser.add_argument("--dir", default=None, help="work dir (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    if not args.launcher or (args.tls and args.mixed):
        parser.error("BookKeeper's launcher: --launcher or $BOOKKEEPER_LAUNCHER; --tls is "
                     "for our bookies only, not --mixed")
    return args


def start_cluster(drill: Drill, args, workdir: str):
    """ZooKeeper, our bookies (with TLS if asked: a plain client must then be refused) and,
    when mixed, two of BookKeeper's. Returns (uri, ours, tls)."""
    uri = drill.start_zookeeper("cluster")
    tls = TlsPeer(os.path.join(workdir, "pki")) if args.tls else None
    if tls is not None:  # every client from here on, BookKeeper's and ours, uses TLS
        os.environ.update(tls.env())
    ours = [drill.start_ours(f"ours-{i}", uri, *(tls.bookie_flags() if tls else ()))
            for i in range(3 if args.mixed else 4)]
    drill.wait_registered(uri, [b["id"] for b in ours])
    if tls is not None:
        say(f"PASS plain client refused: {plain_client_refused(args.launcher, workdir, uri)}")
    theirs = [drill.start_theirs(f"bk-{i}", uri, storage=args.storage)
              for i in range(2)] if args.mixed else []
    drill.wait_registered(uri, [b["id"] for b in ours + theirs])
    return uri, ours, tls


def tally(totals: collections.Counter, result: dict, number: int) -> None:
    """One round's result into the totals, and its line."""
    totals.update(acked=result["acked"], ledgers=result["ledgers"],
                  problems=len(result["problems"]))
    totals[f"fault_{result['fault']}"] += 1
    totals["recover_ms_max"] = max(totals["recover_ms_max"], result["recover_ms_max"])
    totals["moved_s_max"] = max(totals["moved_s_max"], result["moved_s"] or 0)
    totals["repaired"] += result["repaired"]
    say(f"round {number}: fault={result['fault']} ledgers={result['ledgers']} "
        f"acked={result['acked']} add_errors={result['add_errors']} "
        f"recover_ms_max={result['recover_ms_max']} "
        + (f"moved_s={result['moved_s']} " if result["moved_s"] is not None else "")
        + (f"repaired={result['repaired']} " if result["repaired"] else "")
        + f"{'ok' if not result['problems'] else 'FAILED'}")
    for problem in result["problems"]:
        say(f"  {problem}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    seed = random.SystemRandom().randrange(2**31) if args.seed is None else args.seed
    rng = random.Random(seed)
    workdir = args.dir or tempfile.mkdtemp(prefix="bk-recovery-drill-")
    drill = Drill(args.launcher, workdir, 0)
    totals = collections.Counter()
    failures = []
    try:
        uri, ours, tls = start_cluster(drill, args, workdir)
        for number in range(args.rounds):
            result = one_round(drill, args, uri, ours, rng, number)
            tally(totals, result, number)
            failures += result["problems"]
        if tls is not None and not connected_over_tls(os.path.join(workdir, "writer-0.log")):
            raise Failed("BookKeeper's writer did not log a TLS connection")
    except (Failed, RuntimeError) as error:
        failures.append(str(error))
        say(f"FAILED: {error}")
    finally:
        drill.stop_all()
        if args.dir is None and not failures:
            shutil.rmtree(workdir, ignore_errors=True)
    faults = ",".join(f"{k[6:]}:{v}" for k, v in sorted(totals.items()) if k.startswith("fault_"))
    say(f"rounds={args.rounds} mixed={args.mixed} tls={args.tls} ledgers={totals['ledgers']} "
        f"acked={totals['acked']} not_recovered={totals['problems']} faults={faults} "
        f"recover_ms_max={totals['recover_ms_max']} moved_s_max={totals['moved_s_max']} "
        f"repaired={totals['repaired']} seed={seed}"
        + ("" if not failures else f" FAILED (kept {workdir})"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
