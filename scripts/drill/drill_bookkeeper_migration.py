"""A rolling replacement, end to end (docs/operations.md §5.7): BookKeeper's bookies replaced
by ours one by one with BookKeeper's own ``decommissionbookie`` and autorecovery while
BookKeeper's client writes and tails, then the same in reverse. A real run, not in CI.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/drill/drill_bookkeeper_migration.py \
        [--rate 300] [--streams 3] [--entries-per-ledger 3000]

  1. 3 of BookKeeper's bookies on a new cluster (``initnewcluster``), BookKeeper's
     autorecovery (auditor and worker) running throughout.
  2. BookKeeper's Java client (scripts/interop/java/MigrationDrill.java) writes ``--streams`` chains
     of 3/2/2 ledgers of 1 KiB entries, each rolled after ``--entries-per-ledger`` adds as a
     Pulsar topic rolls its ledgers, at ``--rate`` adds a second a stream; another of its
     clients tails each chain as a consumer does, ledger after ledger.
  3. Forward: 3 of ours join; each BookKeeper bookie in turn is stopped and
     ``decommissionbookie``d, until only ours remain. Reverse: 3 new BookKeeper bookies
     join; each of ours in turn is stopped and decommissioned.
  4. The writer stops (closing its ledgers), the tailer reads to the end.
Checks: no ledger names a decommissioned bookie, and its cookie is gone; the writer's
acknowledgements never stalled past --stall-max (a hung client call would); every
acknowledged entry is at or below its ledger's close; the tailer read every ledger whole,
every entry once and in order, byte for byte; every copy is on its write set, byte for
byte (RecoveryDrill.java held). Prints each phase's time and the write rate during it.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.drill.drill_bookkeeper_recovery import Drill, held_on_write_sets, repair  # noqa: E402
from scripts.interop.interop_run import Failed, check, say  # noqa: E402
from scripts.interop.interop_bookkeeper_operator import (cookie_ids, naming, run_checked, shell,  # noqa: E402
                                         wait_for)

JAVA = os.path.join(ROOT, "scripts", "interop", "java", "MigrationDrill.java")


class AckWatch:
    """Counts the writer's acknowledgements once a second; the longest stall seen."""

    def __init__(self, path: str) -> None:
        self.path, self.count, self.stall_max = path, 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "AckWatch":
        self._thread.start()
        return self

    def _run(self) -> None:
        last_change, offset = time.monotonic(), 0
        while not self._stop.wait(1.0):
            if not os.path.exists(self.path):
                continue
            with open(self.path, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            complete = chunk[:chunk.rfind(b"\n") + 1]
            offset += len(complete)
            added = complete.count(b"\nA ") + complete.startswith(b"A ")
            now = time.monotonic()
            if added:
                self.count += added
                last_change = now
            self.stall_max = max(self.stall_max, now - last_change)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def decommission(run: Drill, uri: str, conf: str, bookie: dict) -> float:
    started = time.monotonic()
    run.stop(bookie["proc"])
    shell(run, conf, "decommissionbookie", "-bookieid", bookie["id"], timeout_s=1800)
    seconds = time.monotonic() - started
    left = naming(run, uri, bookie["id"])
    check(not left, f"decommissionbookie {bookie['id']} ({bookie['kind']}) in {seconds:.0f} s; "
          f"no ledger names it")
    return seconds


def phase(run: Drill, uri: str, conf: str, watch: AckWatch, name: str, joining, leaving):
    started, acked = time.monotonic(), watch.count
    run.wait_registered(uri, [b["id"] for b in joining])
    for bookie in leaving:
        decommission(run, uri, conf, bookie)
    seconds = time.monotonic() - started
    rate = (watch.count - acked) / seconds
    say(f"{name}: {len(leaving)} {leaving[0]['kind']} bookies replaced by {len(joining)} "
        f"{joining[0]['kind']} ones in {seconds:.0f} s, writes meanwhile {rate:.0f} entries/s")
    return seconds, rate


def read_ledgers_file(path: str):
    chains, closes, failed = collections.defaultdict(list), {}, {}
    with open(path) as handle:
        for line in handle:
            parts = line.split()
            if parts[0] == "C":
                chains[int(parts[1])].append(int(parts[2]))
            elif parts[0] == "Z":
                closes[int(parts[1])] = int(parts[2])
            elif parts[0] == "F":
                failed[int(parts[1])] = parts[2]
    return chains, closes, failed


def final_checks(run: Drill, uri: str, acks: str, tailed: str, stall_max_s: float,
                 watch: AckWatch) -> int:
    chains, closes, failed = read_ledgers_file(acks + ".ledgers")
    metadata = run.ledgers(uri)
    ledgers = sorted(i for chain in chains.values() for i in chain)
    acked, errors = collections.defaultdict(lambda: -1), []
    with open(acks) as handle:
        for line in handle:
            parts = line.split()
            if parts[0] == "A":
                acked[int(parts[1])] = max(acked[int(parts[1])], int(parts[2]))
            elif parts[0] == "E":
                errors.append(line.strip())
    check(watch.stall_max < stall_max_s, f"the writer's acknowledgements never stalled "
          f"{stall_max_s:.0f} s (longest {watch.stall_max:.1f} s); {len(errors)} adds failed "
          f"(each answered, none hung){': ' + errors[0] if errors else ''}")
    below = [i for i in ledgers if acked[i] > metadata[i].last_entry_id]
    check(not below and all(metadata[i].state.name == "CLOSED" for i in ledgers),
          f"{len(ledgers)} ledgers closed ({len(failed)} by recovery), every acknowledged "
          f"entry at or below its ledger's close")
    read, problems = {}, []
    with open(tailed) as handle:
        for line in handle:
            parts = line.split()
            if parts[0] == "T":
                read[int(parts[1])] = int(parts[2])
            elif parts[0] == "X":
                problems.append(line.strip())
    short = [i for i in ledgers if read.get(i) != metadata[i].last_entry_id + 1]
    check(not problems and not short, f"the tailer read all {sum(read.values())} entries of "
          f"{len(read)} ledgers once, in order, byte for byte"
          + (f"; problems {problems[:3]} short {short[:5]}" if problems or short else ""))
    missing, held_problems = held_on_write_sets(run, uri, ledgers)
    if missing and not held_problems:
        held_problems = repair(run, uri, ledgers, True, 99)
    check(not held_problems, f"every copy of {len(ledgers)} ledgers on its write set, byte "
          f"for byte" + (f" ({missing} left off by BookKeeper's client, put back by "
                         f"autorecovery)" if missing else "") + "; ".join(held_problems[:2]))
    return sum(acked[i] + 1 for i in ledgers)


def run_drill(run: Drill, args) -> None:
    uri = run.start_zookeeper("cluster")
    conf = run.shell_conf(uri)
    shell(run, conf, "initnewcluster")
    theirs = [run.start_theirs(f"bk-{i}", uri) for i in range(3)]
    run.wait_registered(uri, [b["id"] for b in theirs])
    recovery = run.autorecovery("BookKeeper", uri, 0)
    acks, stop, tailed = (os.path.join(run.dir, name) for name in ("acks.txt", "stop",
                                                                    "tailed.txt"))
    writer = run.spawn([run.launcher, "class", JAVA, "write", uri, str(args.streams), "100",
                        str(args.entries_per_ledger), str(args.rate), acks, stop],
                       os.path.join(run.dir, "writer.log"))
    tailer = run.spawn([run.launcher, "class", JAVA, "tail", uri, acks, stop, tailed],
                       os.path.join(run.dir, "tailer.log"))
    watch = AckWatch(acks).start()
    try:
        wait_for("the writer acknowledging adds", lambda: watch.count > 1000, 120)
        ours = [run.start_ours(f"ours-{i}", uri) for i in range(3)]
        forward = phase(run, uri, conf, watch, "forward", ours, theirs)
        new_theirs = [run.start_theirs(f"bk-new-{i}", uri) for i in range(3)]
        reverse = phase(run, uri, conf, watch, "reverse", new_theirs, ours)
        with open(stop, "w"):
            pass
        for proc, what in ((writer, "writer"), (tailer, "tailer")):
            try:
                proc.wait(300)
            except subprocess.TimeoutExpired:
                raise Failed(f"the {what} did not end within 300 s of the stop") from None
            check(proc.returncode == 0, f"the {what} ended, exit {proc.returncode}")
    finally:
        watch.stop()
        run.stop(recovery)
    total = final_checks(run, uri, acks, tailed, args.stall_max, watch)
    cookies = cookie_ids(uri)
    kept = [b["id"] for b in theirs + ours if b["id"] in cookies]
    check(not kept, f"every decommissioned bookie's cookie is gone (left: {cookies})")
    say(f"migration streams={args.streams} rate={args.rate:.0f}/s/stream acked={total} "
        f"forward_s={forward[0]:.0f} forward_rate={forward[1]:.0f} "
        f"reverse_s={reverse[0]:.0f} reverse_rate={reverse[1]:.0f} "
        f"stall_max_s={watch.stall_max:.1f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"),
                        help="BookKeeper's `bk` wrapper (default $BOOKKEEPER_LAUNCHER)")
    parser.add_argument("--streams", type=int, default=3, help="writer chains (3)")
    parser.add_argument("--rate", type=float, default=300.0,
                        help="adds a second, each stream (300)")
    parser.add_argument("--entries-per-ledger", type=int, default=3000,
                        help="adds before a stream rolls to a new ledger (3000)")
    parser.add_argument("--stall-max", type=float, default=30.0,
                        help="seconds without an acknowledgement that fail the run (30)")
    parser.add_argument("--dir", default=None, help="work dir (default: a temp dir, removed "
                                                    "when every check held)")
    args = parser.parse_args(argv)
    return run_checked(parser, args, "bk-migration-", lambda run: run_drill(run, args))

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
