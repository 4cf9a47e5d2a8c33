"""Regenerate tests/data/bk_dirs/ (issue 58 item 2): the data dirs of a DbLedgerStorage bookie
of BookKeeper, written by BookKeeper's own client and killed -9, for CI's test of our bookie
on BookKeeper's dirs (tests/cluster/test_bookkeeper_dirs.py), which needs no BookKeeper.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/make_bk_dir_fixtures.py

  1. ZooKeeper, ``initnewcluster``, one BookKeeper bookie (DbLedgerStorage, 1 MB journal
     preallocation, GC every second, no periodic checkpoint).
  2. scripts/interop/java/FixtureWriter.java ``checkpointed``: ledgers "closed", "fenced",
     "lac" and "deleted" (deleteLedger; BookKeeper's GC drops it). The bookie is then
     stopped with SIGTERM, which flushes its write cache: these are in entry logs and
     indexes, and the checkpoint's lastMark is past them.
  3. The bookie again; ``journal``: ledgers "journal" and "journal-fenced", then kill -9:
     these exist only in the journal, past lastMark.
  4. The two dirs go into tests/data/bk_dirs/dbledgerstorage-kill9.tar.gz (RocksDB's LOG
     files left out) and what was written into expected.json.
Checks before writing: "deleted" is gone from BookKeeper's ledgers index after step 2 (else
it says so and exits 1: run it again).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from api.cluster.local_zookeeper import free_port  # noqa: E402
from scripts.interop.interop_run import STORAGE_CLASSES, Failed, Interop, say  # noqa: E402

JAVA = os.path.join(ROOT, "scripts", "interop", "java", "FixtureWriter.java")
OUT = os.path.join(ROOT, "tests", "data", "bk_dirs")
TARBALL = "dbledgerstorage-kill9.tar.gz"


def bookie_conf(home: str, uri: str, port: int) -> str:
    conf = os.path.join(home, "bk_server.conf")
    with open(conf, "w") as handle:
        handle.write(f"bookiePort={port}\nadvertisedAddress=127.0.0.1\nallowLoopback=true\n"
                     f"journalDirectories={home}/journal\nledgerDirectories={home}/ledgers\n"
                     f"metadataServiceUri={uri}\nledgerStorageClass={STORAGE_CLASSES['db']}\n"
                     "httpServerEnabled=false\n"
                     "statsProviderClass=org.apache.bookkeeper.stats.NullStatsProvider\n"
                     "dataIntegrityCheckingEnabled=false\nautoRecoveryDaemonEnabled=false\n"
                     "journalPreAllocSizeMB=1\ngcWaitTime=1000\nflushInterval=3600000\n"
                     "dbStorage_writeCacheMaxSizeMb=16\ndbStorage_readAheadCacheMaxSizeMb=8\n")
    return conf


def written(lines: list[str]) -> dict:
    """FixtureWriter's "L role ledger last" and "LAC ledger lac" lines."""
    ledgers, lacs = {}, {}
    for line in lines:
        parts = line.split()
        if parts[:1] == ["L"]:
            ledgers[parts[1]] = {"ledger": int(parts[2]), "last": int(parts[3])}
        elif parts[:1] == ["LAC"]:
            lacs[int(parts[1])] = int(parts[2])
    for info in ledgers.values():
        if info["ledger"] in lacs:
            info["explicit_lac"] = lacs[info["ledger"]]
    return ledgers


def ledger_keys(ledgers_dir: str) -> set[int]:
    """The ledger ids in a stopped bookie's ``ledgers`` index (8-byte big-endian keys)."""
    from rocksdict import AccessType, Rdict  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as scratch:  # a copy: rocksdict adds a file of its own
        copy = shutil.copytree(ledgers_dir, os.path.join(scratch, "ledgers"))
        db = Rdict(copy, access_type=AccessType.read_only())
        try:
            return {int.from_bytes(k, "big", signed=True) for k in db.keys() if len(k) == 8}
        finally:
            db.close()


def run_phase(run: Interop, conf: str, mode: str, uri: str, stop: str, log: str) -> list[str]:
    bookie = run.spawn([run.launcher, "bookie", "--conf", conf], log)
    run.wait_registered(uri, [f"127.0.0.1:{bookie_port(conf)}"], timeout_s=120)
    with open(os.path.join(run.dir, f"writer-{mode}.log"), "wb") as errors:
        writer = subprocess.Popen([run.launcher, "class", JAVA, mode, uri], cwd=run.dir,
                                  stdout=subprocess.PIPE, stderr=errors, text=True)
    lines = []
    try:
        for line in writer.stdout:  # ends at the writer's exit, or at its LAC line (journal)
            lines.append(line.strip())
            if mode == "journal" and line.startswith("LAC "):
                break
    finally:
        bookie.send_signal(signal.SIGKILL if stop == "kill9" else signal.SIGTERM)
        bookie.wait(120)
        writer.kill()
        writer.wait()
    if not any(line.startswith("LAC ") for line in lines):
        raise Failed(f"FixtureWriter {mode} did not finish: see {run.dir}/writer-{mode}.log")
    return lines


def bookie_port(conf: str) -> int:
    return int(re.search(r"^bookiePort=(\d+)", open(conf).read(), re.M).group(1))


def pack(home: str) -> None:
    os.makedirs(OUT, exist_ok=True)

    def keep(info: tarfile.TarInfo):
        name = os.path.basename(info.name)
        if name.startswith("LOG") or name == "LOCK":
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    with tarfile.open(os.path.join(OUT, TARBALL), "w:gz") as tar:
        for part in ("journal", "ledgers"):
            tar.add(os.path.join(home, part), arcname=part, filter=keep)


def main() -> int:
    launcher = os.environ.get("BOOKKEEPER_LAUNCHER")
    if not launcher:
        print("BOOKKEEPER_LAUNCHER: BookKeeper's `bk` wrapper", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="bk-fixtures-")
    run = Interop(launcher, work, 0)
    try:
        uri = run.start_zookeeper("zk")
        run.bk("shell", "-conf", run.shell_conf(uri), "initnewcluster")
        home = os.path.join(work, "bk")
        os.makedirs(home)
        conf, log = bookie_conf(home, uri, free_port()), os.path.join(work, "bookie.log")
        before = written(run_phase(run, conf, "checkpointed", uri, "term", log))
        if before["deleted"]["ledger"] in ledger_keys(os.path.join(home, "ledgers", "current",
                                                                   "ledgers")):
            raise Failed("BookKeeper's GC had not dropped the deleted ledger before the stop: "
                         "run again")
        after = written(run_phase(run, conf, "journal", uri, "kill9", log))
        cookie = open(os.path.join(home, "journal", "current", "VERSION")).read()
        pack(home)
        expected = {"tarball": TARBALL, "password": "fixture", "digest": "CRC32C",
                    "entry_size": 1024, "bookie_id": f"127.0.0.1:{bookie_port(conf)}",
                    "written_dir": home, "cookie": cookie,
                    "checkpointed": before, "journal_only": after,
                    "fenced": ["fenced", "journal-fenced"], "deleted": ["deleted"],
                    "bookkeeper": "4.18.0-SNAPSHOT (apache/bookkeeper 9590a97f, "
                                  "built from source)"}
        with open(os.path.join(OUT, "expected.json"), "w") as handle:
            json.dump(expected, handle, indent=1, sort_keys=True)
            handle.write("\n")
        size = os.path.getsize(os.path.join(OUT, TARBALL))
        say(f"ok: wrote {os.path.join(OUT, TARBALL)} ({size} bytes) and expected.json: "
            f"{sorted(before)} then {sorted(after)}")
        shutil.rmtree(work, ignore_errors=True)
        return 0
    except Failed as error:
        say(f"FAILED: {error} (kept {work})")
        return 1
    finally:
        run.stop_all()


if __name__ == "__main__":
    sys.exit(main())
