"""BookKeeper's operator commands on our clusters (docs/bookkeeper-protocol.md §6): a real run,
not in CI, as scripts/interop/interop_bookkeeper.py is.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/interop_bookkeeper_operator.py \
        [--clusters ours,mixed]

For each cluster (``ours``: 5 of our bookies; ``mixed``: 3 of ours beside 2 of BookKeeper's,
on one ZooKeeper), BookKeeper's own shell does what an operator does, and each result is
checked, not just the exit code:
  1. ``simpletest -e 3 -w 2 -a 2``: a ledger written and read back by the shell.
  2. BookKeeper's Java client (scripts/interop/java/RecoveryDrill.java) writes 3/2/2 ledgers with
     1,000 adds in flight and is SIGKILLed; ``readledger -r`` recovers one of them (closed at
     or above its last acknowledged entry), ``openLedger`` the others; every copy on its
     write set, byte for byte.
  3. ``lostbookierecoverydelay -set 3600``, our auditor alone (no worker), one of our
     bookies killed: ``listunderreplicated`` is empty while the delay holds; after
     ``triggeraudit`` it lists exactly the ledgers that name the killed bookie.
  4. ``recover -f BOOKIE`` (BookKeeper's manual re-replication): no ledger names it after,
     every copy is on its write set; our worker then clears the markers
     (``listunderreplicated`` empty).
  5. ``decommissionbookie -bookieid BOOKIE`` of another of ours, stopped, with autorecovery
     running (ours on an all-ours cluster, BookKeeper's on a mixed one) and the delay still
     3600 s (decommissionbookie's own triggeraudit is what moves the copies): it returns,
     no ledger names the bookie, its cookie is gone, every copy is on its write set.
  6. ``updateBookieInLedger -sb OLD -db NEW``: one of ours restarted on a new address with
     its data (a re-IP); every ledger that named the old id names the new one, and every
     copy is on its write set (read from the bookie at its new address).
Prints a line per check and "ok" or "FAILED: why"; exit 0 only if every check held. Every
process it starts is stopped by PID; everything lives under --dir.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.drill.drill_bookkeeper_recovery import (JAVA, Drill, held_on_write_sets, read_acks,  # noqa: E402
                                       repair, wait_for_acks)
from scripts.interop.interop_run import Failed, check, say  # noqa: E402

from api.cluster.local_zookeeper import free_port  # noqa: E402

LEDGERS = 4


def shell(run: Drill, conf: str, *args: str, timeout_s: float = 300) -> str:
    """One ``bk shell`` command to its end; its whole output is kept in shell-N-COMMAND.log
    (BookKeeper's shell can exit 0 on a failure: its output is checked too)."""
    shell.runs = getattr(shell, "runs", 0) + 1
    done = subprocess.run([run.launcher, "shell", "-conf", conf, *args], cwd=run.dir,
                          capture_output=True, text=True, timeout=timeout_s)
    out = done.stdout + done.stderr
    log = os.path.join(run.dir, f"shell-{shell.runs}-{args[0]}.log")
    with open(log, "w") as handle:
        handle.write(out)
    if done.returncode != 0 or "Failed to process command" in out \
            or "Exception in thread" in out:
        raise Failed(f"bk shell {' '.join(args)} exited {done.returncode} (output in {log})")
    return out


def naming(run: Drill, uri: str, bookie_id: str) -> list[int]:
    return sorted(i for i, m in run.ledgers(uri).items()
                  if any(bookie_id in members for _first, members in m.ensembles))


def under_replicated(run: Drill, conf: str) -> dict[int, list[str]]:
    """listunderreplicated -pmr: {ledger: its missing replicas}, from the shell's log lines
    ("Under-replicated ledger {ledgerId=N}", then "Missing replica {missingReplica=ID}")."""
    out = shell(run, conf, "listunderreplicated", "-pmr")
    found: dict[int, list[str]] = {}
    last = None
    for line in out.splitlines():
        ledger = re.search(r"Under-replicated ledger \{ledgerId=(\d+)\}", line)
        replica = re.search(r"Missing replica \{missingReplica=([^}]+)\}", line)
        if ledger:
            last = int(ledger.group(1))
            found[last] = []
        elif replica and last is not None:
            found[last].append(replica.group(1))
    return found


def cookie_ids(uri: str) -> list[str]:
    """The bookie ids with a cookie under the cluster's ``cookies/``."""
    from kazoo.client import KazooClient  # noqa: PLC0415

    hosts, root = uri.split("//", 1)[1].split("/", 1)
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=15)
    try:
        return sorted(zk.get_children(f"/{root}/cookies"))
    finally:
        zk.stop()
        zk.close()


def wait_for(what: str, condition, timeout_s: float = 120):
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise Failed(f"not within {timeout_s:.0f} s: {what}")
        time.sleep(1)  # noqa: sleep-ok (bounded poll of another process's work)


def all_on_write_sets(run: Drill, uri: str, mixed: bool, what: str) -> None:
    ledgers = sorted(run.ledgers(uri))
    missing, problems = held_on_write_sets(run, uri, ledgers)
    repaired = missing
    if missing and not problems:
        problems = repair(run, uri, ledgers, mixed, int(time.time()))
    check(not problems, f"{what}: every copy of ledgers {ledgers} on its write set, byte for "
          f"byte" + (f" ({repaired} left off by BookKeeper's client, put back by "
                     f"autorecovery)" if repaired else "") + "; ".join(problems[:3]))


def step_simpletest(run: Drill, conf: str) -> None:
    out = shell(run, conf, "simpletest", "-e", "3", "-w", "2", "-a", "2", "-n", "500")
    written = re.search(r"(\d+) entries written to ledger (\d+)", out)
    check(written is not None and written.group(1) == "500",
          f"simpletest: {written and written.group(0)}, read back by the shell")


def step_recovery(run: Drill, uri: str, conf: str, mixed: bool) -> None:
    kind = "mixed" if mixed else "ours"  # each cluster its own files
    acks = os.path.join(run.dir, f"acks-{kind}.txt")
    with open(os.path.join(run.dir, f"writer-{kind}.log"), "wb") as log:
        writer = run.java("write", uri, str(LEDGERS), "1000", acks, stdout=log,
                          stderr=subprocess.STDOUT)
    try:
        wait_for_acks(acks, LEDGERS, 3000, 120)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    created, acked, _errors = read_acks(acks)
    first, rest = created[0], created[1:]
    check(run.ledgers(uri)[first].state.name == "OPEN", f"ledger {first} left OPEN by the "
          f"killed writer, {acked.get(first, -1) + 1} adds acknowledged")
    shell(run, conf, "readledger", "-r", "-l", str(first), "-fe", "0", "-le", "0")
    closed = run.ledgers(uri)[first]
    check(closed.state.name == "CLOSED" and closed.last_entry_id >= acked.get(first, -1),
          f"readledger -r closed ledger {first} at {closed.last_entry_id}, at or above its "
          f"last acknowledged entry {acked.get(first, -1)}")
    out = subprocess.run([run.launcher, "class", JAVA, "recover", uri, "30", *map(str, rest)],
                         cwd=run.dir, capture_output=True, text=True, timeout=600).stdout
    for ledger in rest:
        result = re.search(rf"^R {ledger} (\S+) (-?\d+)", out, re.M)
        check(result is not None and result.group(1) == "ok"
              and int(result.group(2)) >= acked.get(ledger, -1),
              f"openLedger closed ledger {ledger} at {result and result.group(2)} (last "
              f"acknowledged {acked.get(ledger, -1)}), read back byte for byte")
    all_on_write_sets(run, uri, mixed, "after recovery")


def step_triggeraudit_and_recover(run: Drill, uri: str, conf: str, victim: dict) -> None:
    shell(run, conf, "lostbookierecoverydelay", "-set", "3600")
    auditor = run.spawn([sys.executable, "-m", "bookie", "autorecovery",
                         "--metadata-service-uri", uri, "--without-worker"],
                        os.path.join(run.dir, f"auditor-{victim['kind']}-{victim['rpc']}.log"))
    try:
        expected = naming(run, uri, victim["id"])
        check(bool(expected), f"{victim['id']} is named by ledgers {expected}")
        run.kill9(victim)
        wait_for(f"{victim['id']} gone from listbookies",
                 lambda: victim["id"] not in run.bk("shell", "-conf", conf, "listbookies",
                                                    "-rw"))
        check(under_replicated(run, conf) == {},
              "listunderreplicated: nothing while lostBookieRecoveryDelay (3600 s) holds")
        shell(run, conf, "triggeraudit")
        found = wait_for("the gone bookie's ledgers marked after triggeraudit",
                         lambda: (lambda marked: marked if sorted(marked) == expected
                                  else None)(under_replicated(run, conf)), 60)
        check(all(victim["id"] in replicas for replicas in found.values()),
              f"triggeraudit: listunderreplicated lists ledgers {sorted(found)}, each missing "
              f"{victim['id']}")
    finally:
        run.stop(auditor)
    out = shell(run, conf, "recover", "-f", victim["id"], timeout_s=900)
    check(naming(run, uri, victim["id"]) == [],
          f"recover {victim['id']}: no ledger names it any more "
          f"({len(out.splitlines())} lines of output)")
    worker = run.spawn([sys.executable, "-m", "bookie", "autorecovery",
                        "--metadata-service-uri", uri], os.path.join(run.dir, f"worker-{victim['rpc']}.log"))
    try:
        wait_for("our worker clearing the markers", lambda: under_replicated(run, conf) == {})
        check(True, "listunderreplicated empty once our worker found every copy in place")
    finally:
        run.stop(worker)


def step_decommission(run: Drill, uri: str, conf: str, leaving: dict, mixed: bool) -> None:
    expected = naming(run, uri, leaving["id"])
    check(bool(expected), f"{leaving['id']} (to decommission) is named by ledgers {expected}")
    if mixed:
        recovery = run.autorecovery("BookKeeper", uri, 0)
    else:
        recovery = run.autorecovery("ours", uri, 0)
    try:
        # decommissionbookie gives up at once when no auditor is elected yet
        wait_for("an auditor elected", lambda: re.search(
            r"Current auditor \{auditor=\S+\}", run.bk("shell", "-conf", conf, "whoisauditor",
                                                   check_rc=False)), 120)
        run.stop(leaving["proc"])
        started = time.monotonic()
        out = shell(run, conf, "decommissionbookie", "-bookieid", leaving["id"],
                    timeout_s=900)
        seconds = time.monotonic() - started
    finally:
        run.stop(recovery)
    check(naming(run, uri, leaving["id"]) == [],
          f"decommissionbookie {leaving['id']} returned in {seconds:.0f} s; no ledger names "
          f"it ({len(out.splitlines())} lines of output)")
    cookies = cookie_ids(uri)
    check(leaving["id"] not in cookies, f"its cookie is gone (cookies left: {sorted(cookies)})")


def step_update_bookie_in_ledger(run: Drill, uri: str, conf: str, moving: dict,
                                 mixed: bool) -> None:
    """A bookie of ours comes back on a new address with its data (a re-IP, here a new
    port): BookKeeper's ``updateBookieInLedger`` points the metadata at its new id."""
    old_id = moving["id"]
    expected = naming(run, uri, old_id)
    check(bool(expected), f"{old_id} (to move) is named by ledgers {expected}")
    run.stop(moving["proc"])
    port = str(free_port())
    argv = list(moving["argv"])
    argv[argv.index("--port") + 1] = port
    moving.update(argv=argv, id=f"127.0.0.1:{port}")
    run.restart(moving)
    run.wait_registered(uri, [moving["id"]])
    shell(run, conf, "updateBookieInLedger", "-sb", old_id, "-db", moving["id"], "-s", "100",
          timeout_s=600)
    check(naming(run, uri, old_id) == [] and naming(run, uri, moving["id"]) == expected,
          f"updateBookieInLedger {old_id} -> {moving['id']}: ledgers {expected} name the new "
          f"id, none the old")


def one_cluster(run: Drill, kind: str) -> None:
    say(f"cluster {kind}: " + ("5 of our bookies" if kind == "ours"
                               else "3 of ours and 2 of BookKeeper's"))
    mixed = kind == "mixed"
    uri = run.start_zookeeper(f"cluster-{kind}")
    ours = [run.start_ours(f"{kind}-ours-{i}", uri) for i in range(3 if mixed else 5)]
    run.wait_registered(uri, [b["id"] for b in ours])
    theirs = [run.start_theirs(f"{kind}-bk-{i}", uri) for i in range(2)] if mixed else []
    run.wait_registered(uri, [b["id"] for b in ours + theirs])
    conf = run.shell_conf(uri)
    step_simpletest(run, conf)
    step_recovery(run, uri, conf, mixed)
    victim = max(ours, key=lambda b: len(naming(run, uri, b["id"])))
    step_triggeraudit_and_recover(run, uri, conf, victim)
    leaving = max((b for b in ours if b is not victim),
                  key=lambda b: len(naming(run, uri, b["id"])))
    step_decommission(run, uri, conf, leaving, mixed)
    moving = max((b for b in ours if b is not victim and b is not leaving),
                 key=lambda b: len(naming(run, uri, b["id"])))
    step_update_bookie_in_ledger(run, uri, conf, moving, mixed)
    all_on_write_sets(run, uri, mixed, "at the end")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"),
                        help="BookKeeper's `bk` wrapper (default $BOOKKEEPER_LAUNCHER)")
    parser.add_argument("--clusters", default="ours,mixed",
                        help="which clusters, in order: ours, mixed (default both)")
    parser.add_argument("--dir", default=None, help="work dir (default: a temp dir, removed "
                                                    "when every check held)")
    args = parser.parse_args(argv)

    def every_cluster(run: Drill) -> None:
        for kind in args.clusters.split(","):
            one_cluster(run, kind)
            run.stop_all()
            run.ours.clear()
    return run_checked(parser, args, "bk-operator-", every_cluster)


def run_checked(parser, args, prefix: str, body) -> int:
    """These scripts' common frame: BookKeeper's launcher required; ``body(run)`` in a work
    dir that is kept when a check failed (removed when all held, unless --dir named it);
    every process started stopped by PID however it ends. Exit 0 only if all held."""
    if not args.launcher:
        parser.error("BookKeeper's launcher: --launcher or $BOOKKEEPER_LAUNCHER")
    workdir = args.dir or tempfile.mkdtemp(prefix=prefix)
    run = Drill(os.path.abspath(args.launcher), workdir, 0)
    failed = None
    try:
        body(run)
    except (Failed, subprocess.TimeoutExpired) as exc:
        failed = exc
        say(f"FAILED: {exc} (kept {workdir})")
    finally:
        run.stop_all()
    if failed is None:
        say("ok: every check held")
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
