"""BookKeeper's own tools on our cluster behind a SASL-secured ZooKeeper
(docs/operations.md §7.1): a real run, not in CI (CI has no BookKeeper), as
scripts/interop/interop_bookkeeper.py is.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/interop/interop_bookkeeper_zk_sasl.py

A ZooKeeper whose JAAS ``Server`` section lists one DIGEST-MD5 user
(api/cluster/local_zookeeper.py's SASL mode), three of our bookies logging in as that user
(``--zk-sasl-file``), and BookKeeper's tools with ``zkEnableSecurity=true`` and a JAAS
``Client`` section for the same user (``-Djava.security.auth.login.config`` through
JAVA_OPTS, which the ``bk`` wrapper passes to java; a distribution's ``bin/bookkeeper``
reads BOOKIE_EXTRA_OPTS, also set). Checks, each printed PASS or FAIL:
  1. ``listbookies -rw`` lists our three bookies;
  2. ``simpletest``: BookKeeper's client writes a ledger through our bookies, reads it back;
  3. ``listledgers`` lists it and one our client wrote; ``ledgermetadata`` reads both;
  4. the reverse: our client (same SASL user) reads the metadata BookKeeper's shell wrote;
  5. every znode under the root, BookKeeper's included, holds ``sasl:<user>`` ALL alone,
     except ``underreplication/lostBookieRecoveryDelay`` when BookKeeper's auditor created
     it: its code gives that one OPEN_ACL_UNSAFE (printed as a NOTE);
  6. BookKeeper's autorecovery for a bounded while: it starts, becomes the auditor, logs no
     NoAuth (and its own znodes pass check 5, which runs again after it);
  7. BookKeeper's shell without the JAAS login is refused (NoAuth).
Exit 0 only if every check passed. Every process it starts is stopped by PID; everything
lives under --dir (a temp dir, removed when all passed, unless --dir named it).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.drill.drill_bookkeeper_recovery import Drill  # noqa: E402
from scripts.interop.interop_run import Failed, say  # noqa: E402

from api.client import zk_auth  # noqa: E402
from api.client.zookeeper import ZkMetadataStore, parse_uri, zk_read, zk_start  # noqa: E402
from api.cluster.local_zookeeper import ZooKeeperServer, jaas_quote  # noqa: E402
from tests.cluster.credentialed import write_a_ledger  # noqa: E402

USER = "bookkeeper"
AUTORECOVERY_S = 25  # long enough for BookKeeper's auditor election and first checks
#: RecoveryDrill.java builds its ClientConfiguration in code: BookKeeper then reads
#: zkEnableSecurity from a system property, if told to read those.
READ_SYSTEM_PROPERTIES = (" -Dorg.apache.bookkeeper.conf.readsystemproperties=true"
                          " -DzkEnableSecurity=true")


class Run:
    def __init__(self, drill: Drill) -> None:
        self.drill = drill
        self.failures = 0

    def check(self, ok: bool, what: str, why: str = "") -> bool:
        say(f"PASS: {what}" if ok else f"FAIL: {what}" + (f" ({why})" if why else ""))
        self.failures += not ok
        return ok

    def bk(self, env: dict, *args: str, timeout_s: float = 300) -> str:
        """One BookKeeper command to its end; its whole output, also kept in a log file."""
        self.bk.__dict__["runs"] = self.bk.__dict__.get("runs", 0) + 1
        done = subprocess.run([self.drill.launcher, *args], cwd=self.drill.dir, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
        out = done.stdout + done.stderr
        with open(os.path.join(self.drill.dir, f"bk-{self.bk.runs}-{args[3]}.log"), "w") as h:
            h.write(out)
        return out


def java_env(jaas: str | None, extra: str = "") -> dict:
    """The environment of a BookKeeper tool: with ``jaas``, its ZooKeeper client logs in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOKIE_ZK_")}
    opts = "-Xmx512m" + (f" -Djava.security.auth.login.config={jaas}" if jaas else "") + extra
    env["JAVA_OPTS"] = env["BOOKIE_EXTRA_OPTS"] = opts
    return env


def write(path: str, text: str, mode: int = 0o600) -> str:
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as handle:
        handle.write(text)
    return path


def znode_acls(uri: str) -> dict[str, list]:
    """Every znode under the cluster's root and its ACL, read as our SASL user."""
    hosts, root = parse_uri(uri)
    client = zk_auth.new_client(hosts)
    zk_start(client)
    found: dict[str, list] = {}
    try:
        todo = [root]
        while todo:
            path = todo.pop()
            found[path] = zk_read(client.get_acls_async, path)[0]
            todo += [f"{path}/{c}" for c in zk_read(client.get_children_async, path)]
    finally:
        client.stop()
        client.close()
    return found


async def write_ours(uri: str) -> int:
    return await write_a_ledger(uri, b"ours")


async def read_metadata(uri: str, ledger_id: int):
    async with ZkMetadataStore(uri) as store:
        return await store.read(ledger_id)


def java_ledger(run: Run, uri: str, env: dict) -> int:
    """A ledger BookKeeper's Java client (scripts/interop/java/RecoveryDrill.java ``write``, logged
    in with SASL) creates on our bookies: its id, once some adds were acknowledged. The
    writer is then killed, so the ledger stays (open)."""
    drill = run.drill
    acks = os.path.join(drill.dir, "java-acks.txt")
    with open(os.path.join(drill.dir, "java-writer.log"), "ab") as log:
        writer = drill.java("write", uri, "1", "10", acks, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    drill.procs.append(writer)  # stopped by PID whatever happens
    deadline = time.monotonic() + 180  # the source launcher compiles it first
    text = ""
    while time.monotonic() < deadline and writer.poll() is None and \
            len(re.findall(r"^A ", text, re.M)) < 20:
        time.sleep(0.5)  # noqa: sleep-ok (bounded poll of another process's work)
        text = open(acks).read() if os.path.exists(acks) else ""
    drill.kill9({"proc": writer})
    created = re.search(r"^C (\d+)$", text, re.M)
    acked = len(re.findall(r"^A ", text, re.M))
    if not run.check(created is not None and acked >= 20,
                     f"BookKeeper's Java client (zkEnableSecurity, JAAS Client {USER}) "
                     f"created ledger {created and created.group(1)} and had {acked} adds "
                     f"acknowledged by our bookies", "see java-writer.log"):
        raise Failed("no ledger of BookKeeper's Java client")
    return int(created.group(1))


def all_sasl(run: Run, uri: str, when: str) -> None:
    acls = znode_acls(uri)
    only = zk_auth.acl(zk_auth.current())
    _, root = parse_uri(uri)
    other = {p: a for p, a in acls.items() if a != only}
    # BookKeeper's own auditor writes this one with ZooDefs.Ids.OPEN_ACL_UNSAFE whatever
    # zkEnableSecurity says (ZkLedgerUnderreplicationManager.initialize/
    # setLostBookieRecoveryDelay, 4.18): theirs, not ours; reported, not hidden.
    theirs_open = {p: a for p, a in other.items()
                   if p == f"{root}/underreplication/lostBookieRecoveryDelay"}
    for path, acl in theirs_open.items():
        say(f"NOTE: {path} holds {[f'{a.id.scheme}:{a.id.id}' for a in acl]}: BookKeeper's "
            f"auditor created it with OPEN_ACL_UNSAFE (its code, not zkEnableSecurity's ACL)")
    rest = {p: a for p, a in other.items() if p not in theirs_open}
    run.check(not rest, f"{when}: {len(acls) - len(theirs_open)} of {len(acls)} znodes under "
              f"the root hold sasl:{USER} ALL alone, every other one is the NOTE's",
              f"others: {sorted(rest.items())[:3]}")


@dataclasses.dataclass
class Secured:
    """The SASL cluster of one run: its URI, our bookies' ids, BookKeeper's confs and the
    environment with the JAAS login."""

    uri: str
    ids: list[str]
    jaas: str
    conf: str
    open_conf: str
    env: dict


def start_secured(run: Run) -> Secured:
    """A SASL ZooKeeper, three of our bookies logging in to it, and BookKeeper's confs."""
    drill = run.drill
    password = os.urandom(12).hex()
    drill.zk = ZooKeeperServer(os.path.join(drill.dir, "zookeeper"),
                               sasl_users={USER: password}).start()
    uri = f"zk://127.0.0.1:{drill.zk.port}/ledgers"
    sasl_file = write(os.path.join(drill.dir, "zk-sasl"), f"{USER}:{password}\n")
    zk_auth.use(zk_auth.Credentials(USER, password, "sasl"))  # this process's own client
    jaas = write(os.path.join(drill.dir, "jaas-client.conf"),
                 "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                 f"  username={jaas_quote(USER)}\n  password={jaas_quote(password)};\n}};\n")
    conf = write(os.path.join(drill.dir, "shell.conf"),
                 f"metadataServiceUri={uri}\nallowLoopback=true\nzkEnableSecurity=true\n")
    open_conf = write(os.path.join(drill.dir, "shell-unauthenticated.conf"),
                      f"metadataServiceUri={uri}\nallowLoopback=true\n")
    ours = [drill.start_ours(f"ours-{i}", uri, "--zk-sasl-file", sasl_file) for i in range(3)]
    return Secured(uri, sorted(b["id"] for b in ours), jaas, conf, open_conf, java_env(jaas))


def check_shell_and_clients(run: Run, sec: Secured) -> None:
    """BookKeeper's shell and Java client with the JAAS login, and ours, on each other's
    znodes."""
    deadline, listed = time.monotonic() + 90, set()
    while time.monotonic() < deadline and not set(sec.ids) <= listed:
        out = run.bk(sec.env, "shell", "-conf", sec.conf, "listbookies", "-rw")
        listed = set(re.findall(r"BookieID:(\S+?),", out))
        time.sleep(1)  # noqa: sleep-ok (bounded poll of our bookies' start)
    run.check(set(sec.ids) <= listed, f"listbookies -rw (zkEnableSecurity, JAAS Client "
              f"{USER}) lists our 3 bookies {sec.ids}", f"listed {sorted(listed)}")

    mine = asyncio.run(write_ours(sec.uri))
    out = run.bk(sec.env, "shell", "-conf", sec.conf, "simpletest", "-e", "3", "-w", "2",
                 "-a", "2", "-n", "100")
    written = re.search(r"(\d+) entries written to ledger (\d+)", out)
    run.check(written is not None and written.group(1) == "100"
              and "Failed to process command" not in out,
              f"simpletest: {written and written.group(0)} through our bookies, read back",
              out[-300:])
    # simpletest deletes its ledger at its end: one BookKeeper's Java client leaves stays.
    theirs = java_ledger(run, sec.uri, java_env(sec.jaas, READ_SYSTEM_PROPERTIES))

    out = run.bk(sec.env, "shell", "-conf", sec.conf, "listledgers")
    found = {int(n) for n in re.findall(r"ledgerI[Dd](?:: |=)(\d+)", out)}
    run.check({mine, theirs} <= found, f"listledgers lists ledger {mine} (our client's) and "
              f"{theirs} (BookKeeper's Java client's)", f"listed {sorted(found)}")
    for ledger in (mine, theirs):
        out = run.bk(sec.env, "shell", "-conf", sec.conf, "ledgermetadata", "-ledgerid",
                     str(ledger))
        run.check("ensembles" in out.lower() and "NoAuth" not in out,
                  f"ledgermetadata -ledgerid {ledger} reads its metadata", out[-300:])

    metadata = asyncio.run(read_metadata(sec.uri, theirs))
    run.check(len(metadata.ensembles[0][1]) == 3,
              f"our client (SASL user {USER}) reads the metadata BookKeeper's Java client "
              f"created for ledger {theirs}: state {metadata.state.value}, ensemble "
              f"{list(metadata.ensembles[0][1])}")


def check_autorecovery(run: Run, sec: Secured) -> None:
    """BookKeeper's autorecovery for a bounded while: it runs, becomes the auditor, and
    ZooKeeper refuses it nothing."""
    drill = run.drill
    log = os.path.join(drill.dir, "autorecovery.log")
    with open(log, "ab") as handle:  # Drill.spawn would not pass the JAAS login's env
        proc = subprocess.Popen([drill.launcher, "autorecovery", "--conf", sec.conf],
                                env=sec.env, stdout=handle, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=drill.dir)
    drill.procs.append(proc)  # stop_all stops it by PID whatever happens
    time.sleep(AUTORECOVERY_S)  # noqa: sleep-ok (a bounded run of BookKeeper's daemon)
    alive = proc.poll() is None
    drill.stop(proc)
    text = open(log, errors="replace").read()
    auditor = re.search(r"I'm starting as Auditor|becomes? (the )?auditor|Auditor.*elected",
                        text, re.IGNORECASE)
    run.check(alive and auditor is not None and "NoAuth" not in text,
              f"BookKeeper's autorecovery ran {AUTORECOVERY_S} s: "
              f"{auditor.group(0) if auditor else 'no auditor line'}, no NoAuth",
              f"alive={alive}; log {log}")


def body(run: Run) -> None:
    sec = start_secured(run)
    check_shell_and_clients(run, sec)
    all_sasl(run, sec.uri, "after simpletest")
    check_autorecovery(run, sec)
    all_sasl(run, sec.uri, "after autorecovery")
    out = run.bk(java_env(None), "shell", "-conf", sec.open_conf, "listbookies", "-rw",
                 timeout_s=120)
    run.check("NoAuth" in out and not set(sec.ids) & set(re.findall(r"BookieID:(\S+?),", out)),
              "BookKeeper's shell without the JAAS login: listbookies refused (NoAuth)",
              out[-300:])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"),
                        help="BookKeeper's `bk` wrapper (default $BOOKKEEPER_LAUNCHER)")
    parser.add_argument("--dir", default=None, help="work dir (default: a temp dir, removed "
                                                    "when every check passed)")
    args = parser.parse_args(argv)
    if not args.launcher:
        parser.error("BookKeeper's launcher: --launcher or $BOOKKEEPER_LAUNCHER")
    workdir = args.dir or tempfile.mkdtemp(prefix="bk-zk-sasl-")
    run = Run(Drill(os.path.abspath(args.launcher), workdir, 0))
    try:
        body(run)
    except Exception as exc:  # noqa: BLE001 (any error is a FAIL line, then the cleanup)
        run.check(False, "the run went to its end", f"{type(exc).__name__}: {exc}")
    finally:
        run.drill.stop_all()
    say(f"{'FAIL' if run.failures else 'PASS'}: {run.failures} check(s) failed"
        + (f" (kept {workdir})" if run.failures else ""))
    if not run.failures and args.dir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
