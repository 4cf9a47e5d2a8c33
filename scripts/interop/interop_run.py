"""The runner the interop scripts share (scripts/interop/interop_bookkeeper.py and its steps, and
the drills and interop scripts built on it): our bookies and BookKeeper's processes on one
work dir, stopped by PID; ``check`` prints what it checked or raises ``Failed``."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from api.cluster.local_zookeeper import ZooKeeperServer, free_port  # noqa: E402
from scripts.interop.bk_tls_peer import TLS_CONNECTED, TlsPeer  # noqa: E402
from tests.support.dir_layout import dir_lists  # noqa: E402

BENCH_CLASS = "org.apache.bookkeeper.benchmark.BenchThroughputLatency"
PASSWORD = "benchPasswd"  # BenchThroughputLatency's default
STORAGE_CLASSES = {
    "sorted": "org.apache.bookkeeper.bookie.SortedLedgerStorage",
    "db": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
}


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
        self.dirs: tuple[int, int] | None = None  # our bookies' (ledger, journal) dir counts
        self.env: dict | None = None  # the bookies' environment (None: this one's)
        self.root = ROOT  # the checkout our bookies run from (another: an A/B of old code)

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
                                stdin=subprocess.DEVNULL, cwd=self.root, env=self.env)
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
        ledger_list, journal_list = dir_lists(home, *self.dirs) if self.dirs else ("", "")
        ledger_dirs = ledger_list.split(",") if ledger_list else []
        dirs = ("--ledger-dirs", ledger_list, "--journal-dirs", journal_list) \
            if self.dirs else ()
        argv = [sys.executable, "-m", "bookie", "serve", "--data-dir",
                os.path.join(home, "data"), "--host", "127.0.0.1", "--port", str(http),
                "--bookie-port", str(rpc), "--metadata-service-uri", uri,
                "--autorecovery-daemon-enabled", "false", *flags, *dirs,
                *(self.tls.bookie_flags() if self.tls else ())]
        log = os.path.join(home, "bookie.log")
        bookie = {"id": f"127.0.0.1:{http}", "rpc": rpc, "proc": self.spawn(argv, log),
                  "home": home, "data": os.path.join(home, "data"), "kind": "ours",
                  "ledger_dirs": ledger_dirs, "argv": argv, "log": log}
        self.ours[bookie["id"]] = bookie
        return bookie

    def start_theirs(self, name: str, uri: str, extra_conf: str = "",
                     storage: str = "sorted") -> dict:
        """BookKeeper's bookie: ``storage`` "sorted" (SortedLedgerStorage, as before) or
        "db" (DbLedgerStorage, BookKeeper's default and Pulsar's)."""
        home = os.path.join(self.dir, name)
        os.makedirs(home, exist_ok=True)
        port = free_port()
        conf = os.path.join(home, "bk.conf")
        with open(conf, "w") as handle:
            handle.write(f"bookiePort={port}\nadvertisedAddress=127.0.0.1\nallowLoopback=true\n"
                         f"journalDirectories={home}/journal\nledgerDirectories={home}/ledgers\n"
                         f"metadataServiceUri={uri}\n"
                         f"ledgerStorageClass={STORAGE_CLASSES[storage]}\n"
                         "httpServerEnabled=false\n"
                         "statsProviderClass=org.apache.bookkeeper.stats.NullStatsProvider\n"
                         "dataIntegrityCheckingEnabled=false\nautoRecoveryDaemonEnabled=false\n"
                         + extra_conf + (self.tls.bookie_conf() if self.tls else ""))
        argv, log = [self.launcher, "bookie", "--conf", conf], os.path.join(home, "bookie.log")
        return {"id": f"127.0.0.1:{port}", "proc": self.spawn(argv, log), "home": home,
                "kind": "BookKeeper", "argv": argv, "log": log}

    def stop_bookie(self, bookie: dict) -> None:
        """SIGTERM, a clean shutdown (SIGKILL after 60 s)."""
        bookie["proc"].send_signal(signal.SIGTERM)
        try:
            bookie["proc"].wait(60)
        except subprocess.TimeoutExpired:
            bookie["proc"].kill()
            bookie["proc"].wait()

    def restart(self, bookie: dict) -> None:
        """The same bookie again: its ports, conf and data."""
        bookie["proc"] = self.spawn(bookie["argv"], bookie["log"])

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
