"""Our ``bookkeeper shell`` beside BookKeeper's own, on one ZooKeeper (issue 56): a real run,
not in CI, as scripts/interop/interop_bookkeeper.py is.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/interop_bookkeeper_shell.py

One bookkeeper.conf (Pulsar's form: metadataServiceUri=zk+hierarchical://HOST:PORT/PREFIX/
ledgers, zkServers empty) is given to both shells with ``-conf``. Checked, each both ways
where it applies (the tree one shell made, read by the other):
  1. ``whatisinstanceid`` before any init: both exit 255.
  2. ``initnewcluster`` (the prefix made first, as the chart's zookeeper-shell create does):
     the other's ``whatisinstanceid`` prints the same instance id (ours: BookKeeper's line
     ``Metadata Service Uri: URI InstanceId: ID``); a second ``initnewcluster`` exits 1 in
     both.
  3. ``cookie_generate`` with the same flags: the same bytes; ``cookie_get`` of a cookie
     created by ours: the same lines between BookKeeper's ``---``.
  4. ``forceauditchecks -calc -ppc -rc``: each shell's znodes decode to a time 21 days back
     in the other's format (BookKeeper's binary protobuf).
Prints a line per check and "ok" or "FAILED: why"; exit 0 only if every check held. The
ZooKeeper it starts is stopped by PID; everything lives under --dir.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.interop.interop_run import Failed, check, say  # noqa: E402

from api.client.metadata_format import decode_check_ctime  # noqa: E402
from api.client.zk_auth import new_client  # noqa: E402
from api.client.zookeeper import zk_read, zk_start  # noqa: E402
from api.cluster.local_zookeeper import ZooKeeperServer  # noqa: E402
from api.cluster.zookeeper import shell_command  # noqa: E402

OURS = [sys.executable, "-m", "bookie.bk_entry"]


def _run(argv: list[str], workdir: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=workdir,
                          env=env)


class Shells:
    def __init__(self, launcher: str, workdir: str, hosts: str) -> None:
        self.launcher, self.dir, self.hosts = launcher, workdir, hosts

    def conf(self, prefix: str) -> str:
        path = os.path.join(self.dir, f"{prefix.strip('/')}.conf")
        with open(path, "w") as handle:
            handle.write(f"metadataServiceUri=zk+hierarchical://{self.hosts}{prefix}/ledgers\n"
                         f"zkServers=\n")
        return path

    def bk(self, conf: str, *args: str) -> subprocess.CompletedProcess:
        return _run([self.launcher, "shell", "-conf", conf, *args], self.dir)

    def ours(self, conf: str, *args: str) -> subprocess.CompletedProcess:
        return _run([*OURS, "shell", "-conf", conf, *args], self.dir)


def _instance_line(out: str) -> str | None:
    """The instance id of either shell's whatisinstanceid output (BookKeeper's 4.18 logs it
    as readInstanceId=ID; ours prints its older line)."""
    for line in out.splitlines():
        for marker in ("readInstanceId=", " InstanceId: "):
            if marker in line:
                return line.split(marker, 1)[1].strip(" }")
    return None


def _mkdir(hosts: str, path: str) -> None:
    client = new_client(hosts)
    try:
        zk_start(client)
        shell_command(client, "create", path)
    finally:
        client.stop()
        client.close()


def _ctimes(hosts: str, root: str) -> dict[str, int | None]:
    client = new_client(hosts)
    try:
        zk_start(client)
        return {z: decode_check_ctime(z, zk_read(client.get_async,
                                                 f"{root}/underreplication/{z}")[0])
                for z in ("checkallledgersctime", "placementpolicycheckctime",
                          "replicascheckctime")}
    finally:
        client.stop()
        client.close()


def run_checks(shells: Shells) -> None:
    for maker, reader in (("bk", "ours"), ("ours", "bk")):
        prefix = f"/i{uuid.uuid4().hex[:8]}"
        conf = shells.conf(prefix)
        say(f"{maker}'s initnewcluster, {reader}'s whatisinstanceid ({prefix})")
        for who in (maker, reader):
            done = getattr(shells, who)(conf, "whatisinstanceid")
            check(done.returncode == 255, f"{who}'s whatisinstanceid before init exits 255 "
                                          f"(got {done.returncode})")
        _mkdir(shells.hosts, prefix)
        made = getattr(shells, maker)(conf, "initnewcluster")
        check(made.returncode == 0, f"{maker}'s initnewcluster exits 0")
        ids = {}
        for who in (maker, reader):
            done = getattr(shells, who)(conf, "whatisinstanceid")
            ids[who] = _instance_line(done.stdout + done.stderr)
            check(done.returncode == 0 and ids[who], f"{who}'s whatisinstanceid exits 0 with "
                                                     f"an id ({ids[who]})")
        check(ids["bk"] == ids["ours"], "both print the same instance id")
        for who in (maker, reader):
            again = getattr(shells, who)(conf, "initnewcluster")
            check(again.returncode == 1, f"{who}'s second initnewcluster exits 1 "
                                         f"(got {again.returncode})")
        force = getattr(shells, maker)(conf, "forceauditchecks", "-calc", "-ppc", "-rc")
        check(force.returncode == 0, f"{maker}'s forceauditchecks exits 0")
        now_ms = time.time() * 1000
        ctimes = _ctimes(shells.hosts, f"{prefix}/ledgers")
        check(all(c is not None and 20 * 86400e3 < now_ms - c < 22 * 86400e3
                  for c in ctimes.values()), f"{maker}'s check ctimes are 21 days back: "
                                             f"{ctimes}")
    _cookies(shells)


def _cookies(shells: Shells) -> None:
    prefix = f"/c{uuid.uuid4().hex[:8]}"
    conf = shells.conf(prefix)
    _mkdir(shells.hosts, prefix)
    check(shells.ours(conf, "initnewcluster").returncode == 0, "ours initialised " + prefix)
    files = {}
    for who in ("bk", "ours"):
        files[who] = os.path.join(shells.dir, f"{who}.cookie")
        done = getattr(shells, who)(conf, "cookie_generate", "10.0.0.1:3181", "-j", "/j",
                                    "-l", "/l1,/l2", "-o", files[who])
        check(done.returncode == 0, f"{who}'s cookie_generate exits 0")
    with open(files["bk"], "rb") as a, open(files["ours"], "rb") as b:
        check(a.read() == b.read(), "cookie_generate: the same bytes")
    check(shells.ours(conf, "cookie_create", "10.0.0.1:3181", "-cf", files["ours"])
          .returncode == 0, "ours created the cookie")
    shown = {}
    for who in ("bk", "ours"):
        out = getattr(shells, who)(conf, "cookie_get", "10.0.0.1:3181").stdout.splitlines()
        start = out.index("Cookie for bookie '10.0.0.1:3181' is:")
        end = out.index("---", start + 2)
        shown[who] = out[start:end + 1]
    check(shown["bk"] == shown["ours"], f"cookie_get: the same {len(shown['ours'])} lines")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"),
                        help="BookKeeper's launcher: a bk wrapper, or a distribution's "
                             "bin/bookkeeper (default $BOOKKEEPER_LAUNCHER)")
    parser.add_argument("--dir", default=None, help="work dir (default: a new temp dir)")
    args = parser.parse_args(argv)
    if not args.launcher:
        say("no BookKeeper launcher: pass --launcher or set BOOKKEEPER_LAUNCHER")
        return 2
    workdir = args.dir or tempfile.mkdtemp(prefix="interop-bk-shell-")
    os.makedirs(workdir, exist_ok=True)
    say(f"work dir {workdir}; BookKeeper launcher {args.launcher}")
    zookeeper = ZooKeeperServer(os.path.join(workdir, "zookeeper")).start()
    try:
        run_checks(Shells(args.launcher, workdir, zookeeper.hosts))
    except Failed as failed:
        say(f"FAILED: {failed}")
        return 1
    finally:
        zookeeper.stop()
    say("ok: every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
