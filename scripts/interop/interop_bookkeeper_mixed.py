"""Step 3 of scripts/interop/interop_bookkeeper.py (its docstring): a mixed cluster on one ZooKeeper,
2 of BookKeeper's bookies and 2 of ours. BookKeeper's client writes 3/2/2 ledgers whose
ensembles mix both kinds; a ledger left open by a killed writer is recovered by BookKeeper's
``readledger -r`` (fencing on our bookies); one of our bookies is killed and BookKeeper's own
autorecovery copies its ledgers' entries onto the others. With ``--tls`` every bookie has
mutual TLS, and each BookKeeper client's output (or log) must show its TLS connections.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.interop.interop_run import BENCH_CLASS, Failed, Interop, check, say  # noqa: E402


def step_mixed(run: Interop) -> None:
    say("step 3: a mixed cluster, 2 BookKeeper bookies and 2 of ours on one ZooKeeper")
    uri = run.start_zookeeper("cluster-mixed")
    ours = [run.start_ours(f"mixed-ours-{i}", uri) for i in range(2)]
    run.wait_registered(uri, [b["id"] for b in ours])  # ours format the tree first
    theirs = [run.start_theirs(f"mixed-bk-{i}", uri) for i in range(2)]
    everyone = ours + theirs
    run.wait_registered(uri, [b["id"] for b in everyone])
    completions, _p99 = run.bench(uri)
    check(completions > 0, f"BookKeeper's client wrote {completions} entries to 3/2/2 ledgers")
    ledgers = run.ledgers(uri)
    for ledger_id, metadata in sorted(ledgers.items()):
        members = set(metadata.ensembles[0][1])
        kinds = {"ours" if m in run.ours else "BookKeeper" for m in members}
        check(kinds == {"ours", "BookKeeper"}, f"ledger {ledger_id}'s ensemble {sorted(members)} "
              f"mixes both kinds")
    for bookie in theirs if run.tls is not None else ():  # each one the client wrote to
        if any(bookie["id"] in m.ensembles[0][1] for m in ledgers.values()):
            with open(os.path.join(bookie["home"], "bookie.log"), errors="replace") as log:
                protected = re.search(r"Session is protected[^\n]*", log.read())
            check(protected is not None, f"BookKeeper's bookie {bookie['id']} logged "
                  f"{protected.group(0).strip() if protected else 'no TLS session'}")
    conf = run.shell_conf(uri)
    _recover_open_ledger(run, uri, conf, ours)
    _rereplicate_a_killed_bookie(run, uri, conf, ours)


def _recover_open_ledger(run: Interop, uri: str, conf: str, ours: list[dict]) -> None:
    say("  an open ledger: a writer killed mid-run, recovered by BookKeeper's readledger -r")
    zk = uri.split("//", 1)[1].split("/", 1)[0]
    launcher = ([run.launcher, "class", BENCH_CLASS] if os.path.basename(run.launcher) == "bk"
                else [run.launcher, BENCH_CLASS])
    writer = subprocess.Popen([*launcher, "-time", "60", "-entrysize", "1024", "-ensemble",
                               "3", "-quorum", "2", "-ackQuorum", "2", "-throttle", "100",
                               "-skipwarmup", "-zookeeper", zk], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, cwd=run.dir,
                              env=run.java_env())
    try:
        for line in writer.stdout:  # once a second: "progress {requests=N, ..."
            written = re.search(r"progress \{requests=(\d+)", line)
            if written and int(written.group(1)) > 0:  # it is writing (TLS: connected)
                break
        open_id = max(run.ledgers(uri))
    finally:
        writer.kill()
        writer.wait()
    check(run.ledgers(uri)[open_id].state.name == "OPEN", f"ledger {open_id} is left OPEN")
    out = run.bk("shell", "-conf", conf, "readledger", "-r", "-l", str(open_id), "-fe", "0",
                 "-le", "0")
    run.used_tls(out, "readledger -r")
    recovered = run.ledgers(uri)[open_id]
    check(recovered.state.name == "CLOSED", f"BookKeeper's recovery closed ledger {open_id} "
          f"at entry {recovered.last_entry_id}")
    fenced = [b["id"] for b in ours if b["id"] in recovered.ensembles[-1][1]
              and _fenced(b, open_id)]
    check(bool(fenced), f"ledger {open_id} is fenced on our bookies {fenced}")


def _rereplicate_a_killed_bookie(run: Interop, uri: str, conf: str, ours: list[dict]) -> None:
    say("  BookKeeper's autorecovery re-replicates a killed bookie of ours")
    placed = run.ledgers(uri)

    def holding(bookie):
        return {i: m for i, m in placed.items()
                if any(bookie["id"] in members for _first, members in m.ensembles)}

    victim = max(ours, key=lambda bookie: len(holding(bookie)))
    before = holding(victim)
    check(bool(before), f"killing {victim['id']}, which holds ledgers {sorted(before)}")
    recovery = run.spawn([run.launcher, "autorecovery", "--conf", conf],
                         os.path.join(run.dir, "autorecovery.log"))
    victim["proc"].send_signal(signal.SIGKILL)
    victim["proc"].wait()
    deadline = time.monotonic() + 300
    while True:
        now = run.ledgers(uri)
        left = [i for i in before if any(victim["id"] in members
                                          for _first, members in now[i].ensembles)]
        if not left:
            break
        if time.monotonic() > deadline or recovery.poll() is not None:
            raise Failed(f"ledgers {left} still name the killed bookie {victim['id']}")
        time.sleep(2)  # noqa: sleep-ok (bounded wait for another process's work)
    with open(os.path.join(run.dir, "autorecovery.log"), errors="replace") as log:
        run.used_tls(log.read(), "BookKeeper's autorecovery")
    kinds = set()
    for ledger_id, metadata in sorted(before.items()):
        old = {m for _first, members in metadata.ensembles for m in members}
        new = {m for _first, members in now[ledger_id].ensembles for m in members} - old
        for member in sorted(new):
            kind = "ours" if member in run.ours else "BookKeeper"
            kinds.add(kind)
            held = _held_by(run, conf, ledger_id, member, now[ledger_id].last_entry_id)
            check(held > 0, f"ledger {ledger_id}: {victim['id']} replaced by {member} "
                  f"({kind}), which now holds {held} of its entries")
        out = run.bk("shell", "-conf", conf, "readledger", "-l", str(ledger_id), "-fe", "0",
                     "-le", str(now[ledger_id].last_entry_id))
        count = len(re.findall(r"Entry Id: ?(\d+)|entryId=(\d+)", out))
        check(count == now[ledger_id].last_entry_id + 1,
              f"BookKeeper's readledger reads all {count} entries of ledger {ledger_id}")
        run.used_tls(out, f"readledger of ledger {ledger_id}")
    say(f"  copies of the killed bookie went to: {', '.join(sorted(kinds))}")


def _held_by(run: Interop, conf: str, ledger_id: int, bookie_id: str, last: int) -> int:
    """How many entries of a ledger one bookie holds: ours say it over HTTP, BookKeeper's
    through its own readledger restricted to that bookie."""
    if bookie_id in run.ours:
        ranges = _get_json(f"{bookie_id}/v1/ledgers/{ledger_id}/entry-ids")["ranges"]
        return sum(last - first + 1 for first, last in ranges)
    out = run.bk("shell", "-conf", conf, "readledger", "-l", str(ledger_id), "-b", bookie_id,
                 "-fe", "0", "-le", str(last + 1), check_rc=False)  # -le is exclusive here
    with open(os.path.join(run.dir, f"readledger-{ledger_id}-{bookie_id}.txt"), "w") as dump:
        dump.write(out)
    return len(re.findall(r"\] - Entry \{", out))  # each entry it read ("Failed to read" else)


def _fenced(bookie: dict, ledger_id: int) -> bool:
    return bool(_get_json(f"{bookie['id']}/v1/ledgers/{ledger_id}")["fenced"])


def _get_json(where: str) -> dict:
    """GET from one of our bookies: HTTPS with BOOKIE_TLS_* (--tls), else HTTP."""
    from api.tls import client_context_from_env  # noqa: PLC0415

    context = client_context_from_env()
    url = f"{'http' if context is None else 'https'}://{where}"
    with urllib.request.urlopen(url, timeout=10, context=context) as reply:
        return json.load(reply)
