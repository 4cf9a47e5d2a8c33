"""Apache BookKeeper's own tools against this project's bookies (docs/bookkeeper-protocol.md §6):
a real run, not in CI. Run it through scripts/interop/interop_bookkeeper.sh.

BookKeeper is a test peer here, as ZooKeeper is: its launcher comes from ``--launcher`` or
$BOOKKEEPER_LAUNCHER (a ``bk`` wrapper whose ``bk class NAME`` runs a class, or a BookKeeper distribution's own
``bin/bookkeeper``); nothing of it is imported or shipped.

Steps (each prints what it checked and ends "ok" or "FAILED: why"):
  1. BookKeeper's BenchThroughputLatency, v3 and -useV2, writes 3/2/2 ledgers to 3 of our
     bookies; each ledger reads back whole through our replicated client (digests checked
     as the metadata's type says) and, with the bookies stopped, `bookie shell scrub` finds
     every stored entry sound.
  2. BookKeeper's shell on the same cluster: listbookies, whatisinstanceid, ledgermetadata,
     readledger, bookiesanity (on each of our bookies).
  3. A mixed cluster on one ZooKeeper (scripts/interop/interop_bookkeeper_mixed.py), 2 BookKeeper
     bookies and 2 of ours: BookKeeper's client writes 3/2/2 ledgers (every ensemble of 3
     out of 2+2 mixes both kinds); one is left open by a killed writer and recovered by
     BookKeeper's `readledger -r` (fencing on our bookies); then one of our bookies is
     killed and BookKeeper's own autorecovery copies its ledgers' entries onto the others,
     BookKeeper's bookies and ours.

``--tls``: our bookies with TLS and mutual TLS on both listeners (HTTPS, and bookie_port
through BookKeeper's START_TLS) and the role check (scripts/interop/bk_tls_peer.py); BookKeeper's
bookies in step 3 the same (TLSContextFactory, tlsClientAuthentication, BookieAuthZFactory).
BookKeeper's benchmark gets the client keys as system properties (it has no -conf), its
shell and autorecovery in their -conf files; every BookKeeper client must log its TLS
connections (bk_tls_peer.TLS_CONNECTED), and a shell without TLS keys must be refused
(BKUnauthorizedAccessException). Our read-backs use HTTPS with the run's CA.

Every process it starts is stopped by PID at the end; everything lives under --dir.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.interop.bk_tls_peer import TlsPeer, plain_client_refused  # noqa: E402
from scripts.interop.interop_bookkeeper_mixed import step_mixed  # noqa: E402
from scripts.interop.interop_run import Failed, Interop, check, say  # noqa: E402
from tests.support.dir_layout import parse_dirs  # noqa: E402



def step_bench_and_shell(run: Interop) -> None:
    say("step 1: BookKeeper's BenchThroughputLatency (v3, then -useV2) on 3 of our bookies")
    uri = run.start_zookeeper("cluster-ours")
    ours = [run.start_ours(f"ours-{i}", uri) for i in range(3)]
    run.wait_registered(uri, [b["id"] for b in ours])
    for protocol, extra in (("v3", ()), ("v2", ("-useV2",))):
        completions, p99 = run.bench(uri, *extra)
        say(f"  bench {protocol}: {completions} entries acknowledged, p99 {p99:.1f} ms")
        check(completions > 0, f"BenchThroughputLatency {protocol} wrote entries")
    ledgers = run.ledgers(uri)
    check(len(ledgers) >= 2, f"{len(ledgers)} ledgers in the metadata")
    for ledger_id, metadata in sorted(ledgers.items()):
        entries, size = run.read_back(uri, ledger_id)
        check(entries == metadata.last_entry_id + 1 and size == metadata.length,
              f"ledger {ledger_id} ({metadata.digest_type.name}, {metadata.state.name}) reads "
              f"back whole through our client: {entries} entries, {size} bytes")
    say("step 2: BookKeeper's shell against our bookies")
    conf = run.shell_conf(uri)
    listed = re.findall(r"bookieAddr=BookieID:(\S+?), IP:\S+, Port:(\d+)",
                        run.bk("shell", "-conf", conf, "listbookies", "-rw"))
    check({(b["id"], str(b["rpc"])) for b in ours} <= set(listed),
          f"listbookies resolves each of our bookies to its bookie-rpc port: {listed}")
    instance = re.search(r"readInstanceId=([0-9a-f-]+)",
                         run.bk("shell", "-conf", conf, "whatisinstanceid"))
    check(instance is not None, f"whatisinstanceid reads {instance and instance.group(1)}")
    first = min(ledgers)
    meta = run.bk("shell", "-conf", conf, "ledgermetadata", "-l", str(first))
    check(f"lastEntryId={ledgers[first].last_entry_id}" in meta,
          f"ledgermetadata decodes ledger {first}")
    read = run.bk("shell", "-conf", conf, "readledger", "-l", str(first), "-fe", "0",
                  "-le", "9")
    count = len(re.findall(r"Entry Id: ?(\d+)|entryId=(\d+)", read))
    check(count >= 10, f"readledger reads entries 0..9 of ledger {first} ({count} lines)")
    run.used_tls(read, "readledger")
    for bookie in ours:
        out = run.bk("shell", "-conf", run.shell_conf(uri, bookie), "bookiesanity")
        check("Bookie sanity test succeeded" in out, f"bookiesanity on {bookie['id']}")
        run.used_tls(out, f"bookiesanity on {bookie['id']}")
    if run.tls is not None:  # last: its failed ledger is in no step's way
        say("  checked: a BookKeeper shell without TLS keys is refused: "
            + plain_client_refused(run.launcher, run.dir, uri))
    run.stop_all()
    for bookie in ours:
        for where in [("--ledger-dir", d) for d in bookie["ledger_dirs"]] or [()]:
            scrub = subprocess.run([sys.executable, "-m", "bookie", "shell", "scrub",
                                    "--data-dir", bookie["data"], *where],
                                   capture_output=True, text=True, cwd=ROOT)
            check(scrub.returncode == 0, f"bookie shell scrub on {bookie['id']}'s files "
                  f"{' '.join(where)}: "
                  f"{scrub.stdout.strip().splitlines()[-1] if scrub.stdout.strip() else ''}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"),
                        help="BookKeeper's launcher: a bk wrapper, or a "
                             "distribution's bin/bookkeeper (default $BOOKKEEPER_LAUNCHER)")
    parser.add_argument("--dir", default=None, help="work dir (default: a new temp dir)")
    parser.add_argument("--seconds", type=int, default=5, help="each benchmark's run time")
    parser.add_argument("--steps", default="1,3", help="which steps: 1 (with 2), 3")
    parser.add_argument("--dirs", type=parse_dirs, metavar="L,J",
                        help="our bookies with L ledger dirs and J journal dirs, e.g. 3,2")
    parser.add_argument("--tls", action="store_true", help="mutual TLS on every bookie, "
                        "every BookKeeper client through START_TLS")
    args = parser.parse_args(argv)
    if not args.launcher or shutil.which(args.launcher) is None:
        say("no BookKeeper launcher: pass --launcher or set BOOKKEEPER_LAUNCHER "
            "(e.g. a distribution's bin/bookkeeper, or a `bk` wrapper with bk class NAME)")
        return 2
    workdir = args.dir or tempfile.mkdtemp(prefix="interop-bk-")
    os.makedirs(workdir, exist_ok=True)
    say(f"work dir {workdir}; BookKeeper launcher {args.launcher}"
        + ("; mutual TLS on every bookie" if args.tls else ""))
    tls = TlsPeer(os.path.join(workdir, "pki")) if args.tls else None
    if tls is not None:  # our read-backs in this process: HTTPS with the CA
        os.environ.update(tls.our_client_env())
    run = Interop(os.path.abspath(args.launcher), workdir, args.seconds, tls)
    run.dirs = args.dirs
    steps = {"1": step_bench_and_shell, "3": step_mixed}
    try:
        for step in args.steps.split(","):
            steps[step](run)
            run.stop_all()
            run.ours.clear()
    except (Failed, RuntimeError, subprocess.TimeoutExpired) as exc:
        say(f"FAILED: {exc}")
        return 1
    finally:
        run.stop_all()
    say("ok: every step passed" + (" over TLS" if tls else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
