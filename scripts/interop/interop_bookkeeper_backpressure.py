"""BookKeeper's own client under a burst of large adds: does it change ensembles? (issue 57;
docs/bookkeeper-protocol.md §5). A real run against the real peer, not in CI.

BookKeeper's BenchThroughputLatency writes 16 KiB entries at 3/2/2 with many adds in flight
(``--throttle``, 5,000 by default: about 40 MB in flight a bookie, past a journal queue of
``--journal-queue-mb``, 8 MiB, on every bookie, ours and BookKeeper's) to 4 bookies, so
that a bookie the client takes for failed can be replaced. The queue is small, not the
burst large, so that each add is still answered within the client's 5 s timeout on this
2-core machine (a burst of 20,000 took longer than that on every side).
It runs against 4 of ours and then against 4 of BookKeeper's (DbLedgerStorage, then
SortedLedgerStorage), each cluster on its own ZooKeeper. For each it prints the entries
acknowledged, the ledgers' ensembles from their metadata (one ensemble each: no ensemble
change), and for ours the refusals our bookies counted (bookie_bk_requests_refused_total).
BookKeeper's client answers any add refusal with an ensemble change (PendingAddOp), so the
check is: one ensemble per ledger, and 0 refusals on ours.

``--repo DIR`` runs our bookies from another checkout (the code before issue 57), to show
that this check fails there. The launcher comes from ``--launcher`` or
$BOOKKEEPER_LAUNCHER; every process it starts is stopped by PID at the end.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/interop_bookkeeper_backpressure.py
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.interop.interop_run import BENCH_CLASS, Failed, Interop, check, say  # noqa: E402

DB_STORAGE = "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n"
# As Pulsar's chart runs it: room for the burst, the write cache at BookKeeper's default.
THEIRS_CONF = "maxPendingAddRequestsPerThread=10000\n"
#: The benchmark's JVM holds every add in flight in direct memory (twice, one a replica):
#: 20,000 of 16 KiB overflowed the launcher's 512 MiB and failed in the client itself.
CLIENT_JAVA_OPTS = "-Xms2g -Xmx2g -XX:MaxDirectMemorySize=4g"
#: BookKeeper's bookies as bkenv.sh ships them (DbLedgerStorage's caches are direct memory).
BOOKIE_JAVA_OPTS = "-Xms1g -Xmx1g -XX:MaxDirectMemorySize=2g"


def burst(run: Interop, uri: str, args) -> tuple[int, str]:
    """BenchThroughputLatency's run: (entries acknowledged, its output)."""
    zk = uri.split("//", 1)[1].split("/", 1)[0]
    output = run.bk_class(BENCH_CLASS, "-time", str(args.seconds), "-entrysize",
                          str(args.entry_size), "-ensemble", "3", "-quorum", "2",
                          "-ackQuorum", "2", "-throttle", str(args.throttle), "-ledgers",
                          str(args.ledgers), "-skipwarmup", "-zookeeper", zk,
                          *(("-useV2",) if args.v2 else ()), check_rc=False,
                          timeout_s=args.seconds + 240,
                          env=dict(os.environ, JAVA_OPTS=CLIENT_JAVA_OPTS))
    done = re.search(r"Benchmark complete \{completions=(\d+)", output)
    return (int(done.group(1)) if done else -1), output


def ensembles(run: Interop, uri: str) -> dict[int, int]:
    return {ledger_id: len(metadata.ensembles)
            for ledger_id, metadata in run.ledgers(uri).items()}


def add_counts(bookie: dict) -> tuple[int, int]:
    """(adds refused, adds that waited: 0 on code without issue 57's waits) by our bookie's
    metrics."""
    with urllib.request.urlopen(f"http://{bookie['id']}/metrics", timeout=10) as reply:
        lines = reply.read().decode().splitlines()
    refused = sum(float(line.rsplit(" ", 1)[1]) for line in lines
                  if line.startswith("bookie_bk_requests_refused_total{")
                  and 'op="ADD_ENTRY"' in line)
    waited = sum(float(line.rsplit(" ", 1)[1]) for line in lines
                 if line.startswith("bookie_bk_adds_waited_total "))
    return int(refused), int(waited)


def side(run: Interop, name: str, args) -> dict:
    uri = run.start_zookeeper(f"cluster-{name}")
    queue = args.journal_queue_mb
    if name == "ours":
        run.env = dict(os.environ, BOOKIE_JOURNAL_QUEUE_MAX_BYTES=str(queue << 20))
        bookies = [run.start_ours(f"{name}-{i}", uri) for i in range(4)]
    else:
        run.bk("shell", "-conf", run.shell_conf(uri), "initnewcluster")  # a fresh tree
        run.env = dict(os.environ, JAVA_OPTS=BOOKIE_JAVA_OPTS)
        conf = THEIRS_CONF + f"journalMaxMemorySizeMb={queue}\n" + \
            (DB_STORAGE if name == "db" else "")
        bookies = [run.start_theirs(f"{name}-{i}", uri, conf) for i in range(4)]
    run.wait_registered(uri, [b["id"] for b in bookies])
    acked, output = burst(run, uri, args)
    with open(os.path.join(run.dir, f"bench-{name}.log"), "w") as handle:
        handle.write(output)
    first = re.search(r"[^\n]*(?:ERROR|WARN)[^\n]*", output)
    if first:
        say(f"  {name}: the client's first warning: {first.group(0)[:300]}")
    counts = ensembles(run, uri)
    counts_of = [add_counts(b) for b in bookies] if name == "ours" else None
    refusals = sum(c[0] for c in counts_of) if counts_of else None
    waited = sum(c[1] for c in counts_of) if counts_of else None
    errors = len(re.findall(r"(?i)ensemble change|Write error|Failed to write", output))
    for bookie in bookies:
        run.stop_bookie(bookie)
    run.zk.stop()
    run.zk = None
    return {"side": name, "acked": acked, "ensembles": counts, "refused": refusals,
            "waited": waited, "client_errors": errors}


def report(result: dict, seconds: int) -> None:
    changes = sum(n - 1 for n in result["ensembles"].values())
    refused = "" if result["refused"] is None else \
        f", our bookies refused {result['refused']} adds and held {result['waited']} a while"
    say(f"  {result['side']}: {result['acked']} adds acknowledged "
        f"({result['acked'] / seconds:,.0f}/s), {len(result['ensembles'])} ledgers, "
        f"{changes} ensemble changes{refused}, client log lines about failed writes or "
        f"ensemble changes: {result['client_errors']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"))
    parser.add_argument("--dir", help="work dir (default: a new temporary one, removed)")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--throttle", type=int, default=5_000, help="adds in flight")
    parser.add_argument("--journal-queue-mb", type=int, default=8,
                        help="every bookie's journal queue: ours journal_queue_max_bytes, "
                        "BookKeeper's journalMaxMemorySizeMb (small, so that the burst "
                        "fills it while each add still answers within the client's 5 s)")
    parser.add_argument("--entry-size", type=int, default=16_384)
    parser.add_argument("--ledgers", type=int, default=4)
    parser.add_argument("--v2", action="store_true", help="the client speaks v2")
    parser.add_argument("--sides", default="ours,db,sorted")
    parser.add_argument("--repo", help="run our bookies from this checkout instead")
    args = parser.parse_args()
    if not args.launcher:
        parser.error("no BookKeeper launcher: --launcher or BOOKKEEPER_LAUNCHER")
    workdir = args.dir or tempfile.mkdtemp(prefix="bk-backpressure-")
    run = Interop(args.launcher, workdir, args.seconds)
    if args.repo:
        run.root = os.path.abspath(args.repo)
    say(f"BenchThroughputLatency: {args.entry_size} B entries, 3/2/2 on 4 bookies, "
        f"journal queues of {args.journal_queue_mb} MiB, "
        f"{args.throttle} adds in flight, {args.ledgers} ledgers, {args.seconds} s, "
        f"{'v2' if args.v2 else 'v3'}; ours from {run.root}")
    results = []
    try:
        for name in args.sides.split(","):
            results.append(side(run, name, args))
            report(results[-1], args.seconds)
        for result in results:
            changes = sum(n - 1 for n in result["ensembles"].values())
            if result["side"] == "ours":
                check(changes == 0 and result["refused"] == 0 and result["acked"] > 0,
                      f"ours: every ledger kept one ensemble and no add was refused "
                      f"({changes} changes, {result['refused']} refused)")
    except Failed as failure:
        say(f"FAILED: {failure}")
        return 1
    finally:
        run.stop_all()
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    say("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
