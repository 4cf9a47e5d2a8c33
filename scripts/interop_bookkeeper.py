"""Apache BookKeeper's own tools against this project's bookies (issue 28): a real run, not
in CI. Run it through scripts/interop_bookkeeper.sh.

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
  3. A mixed cluster on one ZooKeeper (scripts/interop_bookkeeper_mixed.py), 2 BookKeeper
     bookies and 2 of ours: BookKeeper's client writes 3/2/2 ledgers (every ensemble of 3
     out of 2+2 mixes both kinds); one is left open by a killed writer and recovered by
     BookKeeper's `readledger -r` (fencing on our bookies); then one of our bookies is
     killed and BookKeeper's own autorecovery copies its ledgers' entries onto the others,
     BookKeeper's bookies and ours.

``--tls``: our bookies with TLS and mutual TLS on both listeners (HTTPS, and bookie_port
through BookKeeper's START_TLS) and the role check (scripts/bk_tls_peer.py); BookKeeper's
bookies in step 3 the same (TLSContextFactory, tlsClientAuthentication, BookieAuthZFactory).
BookKeeper's benchmark gets the client keys as system properties (it has no -conf), its
shell and autorecovery in their -conf files; every BookKeeper client must log its TLS
connections (bk_tls_peer.TLS_CONNECTED), and a shell without TLS keys must be refused
(BKUnauthorizedAccessException). Our read-backs use HTTPS with the run's CA.

Every process it starts is stopped by PID at the end; everything lives under --dir.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from api.cluster.local_zookeeper import ZooKeeperServer, free_port  # noqa: E402
from bk_tls_peer import TLS_CONNECTED, TlsPeer, plain_client_refused  # noqa: E402

BENCH_CLASS = "org.apache.bookkeeper.benchmark.BenchThroughputLatency"
PASSWORD = "benchPasswd"  # BenchThroughputLatency's default


class Failed(Exception):
    pass


def say(line: str) -> None:
    print(line, flush=True)


def check(condition: bool, what: str) -> None:
    if not condition:
        raise Failed(what)
    say(f"  checked: {what}")


class Interop:
    def __init__(self, launcher: str, workdir: str, seconds: int,
                 tls: TlsPeer | None = None) -> None:
        self.launcher = launcher
        self.dir = workdir
        self.seconds = seconds
        self.tls = tls  # every bookie with mutual TLS, every client through START_TLS
        self.procs: list[subprocess.Popen] = []
        self.zk: ZooKeeperServer | None = None
        self.ours: dict[str, dict] = {}

    # -- processes -------------------------------------------------------------------

    def bk(self, *args: str, timeout_s: float = 300.0, check_rc: bool = True,
           env: dict | None = None) -> str:
        """One BookKeeper command to its end; its output (log lines included)."""
        argv = [self.launcher, *args]
        # In the work dir: BenchThroughputLatency drops its latencyDump.dat where it runs.
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              cwd=self.dir, env=env)
        output = done.stdout + done.stderr
        if check_rc and done.returncode != 0:
            raise Failed(f"{' '.join(args[:3])} exited {done.returncode}: "
                         f"{_tail(output)}")
        return output

    def bk_class(self, name: str, *args: str, **kw) -> str:
        # A `bk` wrapper's `bk class NAME`; a distribution's bin/bookkeeper takes NAME.
        if os.path.basename(self.launcher) == "bk":
            return self.bk("class", name, *args, **kw)
        return self.bk(name, *args, **kw)

    def spawn(self, argv: list[str], log: str) -> subprocess.Popen:
        handle = open(log, "ab")
        proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=ROOT)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        if self.zk is not None:
            self.zk.stop()
            self.zk = None

    # -- a cluster ---------------------------------------------------------------------

    def start_zookeeper(self, name: str) -> str:
        self.zk = ZooKeeperServer(os.path.join(self.dir, name, "zookeeper")).start()
        return f"zk://127.0.0.1:{self.zk.port}/ledgers"

    def start_ours(self, name: str, uri: str, *flags: str) -> dict:
        home = os.path.join(self.dir, name)
        os.makedirs(home, exist_ok=True)
        http, rpc = free_port(), free_port()
        proc = self.spawn([sys.executable, "-m", "bookie", "serve", "--data-dir",
                           os.path.join(home, "data"), "--host", "127.0.0.1", "--port",
                           str(http), "--bookie-port", str(rpc), "--metadata-service-uri",
                           uri, "--autorecovery-daemon-enabled", "false", *flags,
                           *(self.tls.bookie_flags() if self.tls else ())],
                          os.path.join(home, "bookie.log"))
        bookie = {"id": f"127.0.0.1:{http}", "rpc": rpc, "proc": proc, "home": home,
                  "data": os.path.join(home, "data"), "kind": "ours"}
        self.ours[bookie["id"]] = bookie
        return bookie

    def start_theirs(self, name: str, uri: str, extra_conf: str = "") -> dict:
        home = os.path.join(self.dir, name)
        os.makedirs(home, exist_ok=True)
        port = free_port()
        conf = os.path.join(home, "bk.conf")
        with open(conf, "w") as handle:
            handle.write(f"bookiePort={port}\nadvertisedAddress=127.0.0.1\nallowLoopback=true\n"
                         f"journalDirectories={home}/journal\nledgerDirectories={home}/ledgers\n"
                         f"metadataServiceUri={uri}\n"
                         "ledgerStorageClass=org.apache.bookkeeper.bookie.SortedLedgerStorage\n"
                         "httpServerEnabled=false\n"
                         "statsProviderClass=org.apache.bookkeeper.stats.NullStatsProvider\n"
                         "dataIntegrityCheckingEnabled=false\nautoRecoveryDaemonEnabled=false\n"
                         + extra_conf + (self.tls.bookie_conf() if self.tls else ""))
        proc = self.spawn([self.launcher, "bookie", "--conf", conf],
                          os.path.join(home, "bookie.log"))
        return {"id": f"127.0.0.1:{port}", "proc": proc, "home": home, "kind": "BookKeeper"}

    def shell_conf(self, uri: str, bookie: dict | None = None) -> str:
        name = "shell.conf" if bookie is None else f"shell-{bookie['rpc']}.conf"
        path = os.path.join(self.dir, name)
        with open(path, "w") as handle:
            handle.write(f"metadataServiceUri={uri}\nallowLoopback=true\n")
            if self.tls is not None:
                handle.write(self.tls.client_conf())
            if bookie is not None:  # bookiesanity's "local bookie" is the one this names
                handle.write(f"bookieId={bookie['id']}\nbookiePort={bookie['rpc']}\n"
                             "advertisedAddress=127.0.0.1\n")
        return path

    def wait_registered(self, uri: str, bookie_ids: list[str], timeout_s: float = 90) -> None:
        conf = self.shell_conf(uri)
        deadline = time.monotonic() + timeout_s
        while True:
            listed = set(re.findall(r"BookieID:(\S+?),", self.bk("shell", "-conf", conf,
                                                                  "listbookies", "-rw")))
            if set(bookie_ids) <= listed:
                return
            if time.monotonic() > deadline:
                raise Failed(f"bookies {sorted(set(bookie_ids) - listed)} never registered")
            time.sleep(1)  # noqa: sleep-ok (bounded poll of another process's start)

    def bench(self, uri: str, *extra: str) -> tuple[int, float]:
        zk = uri.split("//", 1)[1].split("/", 1)[0]
        output = self.bk_class(BENCH_CLASS, "-time", str(self.seconds), "-entrysize", "1024",
                               "-ensemble", "3", "-quorum", "2", "-ackQuorum", "2",
                               "-throttle", "1000", "-skipwarmup", "-zookeeper", zk, *extra,
                               env=self.java_env())
        self.used_tls(output, f"BenchThroughputLatency {' '.join(extra) or 'v3'}")
        done = re.search(r"Benchmark complete \{completions=(\d+)", output)
        p99 = re.search(r"99th percentile latency \{latency=([\d.]+)", output)
        if done is None:
            raise Failed(f"BenchThroughputLatency did not complete: {_tail(output)}")
        return int(done.group(1)), float(p99.group(1)) if p99 else float("nan")

    def java_env(self) -> dict | None:
        """The environment of BookKeeper's tools without -conf: with --tls, the client keys
        as system properties (JAVA_OPTS)."""
        return None if self.tls is None else self.tls.env()

    def used_tls(self, output: str, what: str) -> None:
        """With --tls: BookKeeper's client logged, in ``output``, connections through
        START_TLS (TLS_CONNECTED with the bookie); it is printed with the bookies."""
        if self.tls is None:
            return
        lines = re.findall(re.escape(TLS_CONNECTED) + r"[^\n]*", output)
        if not lines:
            raise Failed(f"{what}: no '{TLS_CONNECTED}' in its output: {_tail(output)}")
        bookies = sorted({b for line in lines for b in re.findall(r"bookieId=([^,}\s]+)", line)})
        say(f"  checked: {what} used TLS: '{TLS_CONNECTED}' for {', '.join(bookies)}")

    # -- our side's checks -------------------------------------------------------------

    def ledgers(self, uri: str) -> dict[int, object]:
        from api.client.zookeeper import ZkMetadataStore  # noqa: PLC0415

        async def read():
            store = ZkMetadataStore(uri).start()
            try:
                return {i: await store.read(i) for i in await store.ledger_ids()}
            finally:
                await store.close()

        return asyncio.run(read())

    def read_back(self, uri: str, ledger_id: int) -> tuple[int, int]:
        """(entries, payload bytes) of a ledger read whole through our replicated client."""
        from api.client.ensemble import BookKeeper  # noqa: PLC0415

        async def read():
            async with await BookKeeper.connect(uri) as bk:
                reader = await bk.open_ledger(ledger_id, PASSWORD)
                entries = size = 0
                last = reader.lac
                if last >= 0:
                    async for entry in reader.read_range(0, last):
                        entries += 1
                        size += len(entry.payload)
                return entries, size

        return asyncio.run(read())


def _tail(text: str, lines: int = 15) -> str:
    useful = [line for line in text.splitlines() if not line.startswith("\tat ")]
    return "\n".join(useful[-lines:])


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
        scrub = subprocess.run([sys.executable, "-m", "bookie", "shell", "scrub", "--data-dir",
                                bookie["data"]], capture_output=True, text=True, cwd=ROOT)
        check(scrub.returncode == 0, f"bookie shell scrub on {bookie['id']}'s files: "
              f"{scrub.stdout.strip().splitlines()[-1] if scrub.stdout.strip() else ''}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"),
                        help="BookKeeper's launcher: a bk wrapper, or a "
                             "distribution's bin/bookkeeper (default $BOOKKEEPER_LAUNCHER)")
    parser.add_argument("--dir", default=None, help="work dir (default: a new temp dir)")
    parser.add_argument("--seconds", type=int, default=5, help="each benchmark's run time")
    parser.add_argument("--steps", default="1,3", help="which steps: 1 (with 2), 3")
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
    from interop_bookkeeper_mixed import step_mixed  # noqa: PLC0415 (it imports this module)

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
    # Through the module, not __main__: interop_bookkeeper_mixed imports it, and its Failed
    # must be the one main() catches.
    import interop_bookkeeper  # noqa: PLC0415

    sys.exit(interop_bookkeeper.main(sys.argv[1:]))
