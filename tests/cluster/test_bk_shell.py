"""``bookkeeper shell`` (bookie/bk_entry.py, bookie/shell/bk_*.py) against a real ZooKeeper,
run as the Pulsar helm chart runs it: a bookkeeper.conf named by $BOOKIE_CONF (or found as
conf/bookkeeper.conf), BookKeeper's single-dash flags, the exit codes its loops test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

from api.client.metadata_format import decode_check_ctime, encode_cookie
from tests.support.bk_shell import ENTRY, launcher_env
from tests.support.bk_shell import conf as _conf, hierarchical as _hierarchical, run as _run
from tests.support.servers import Daemon
from tests.support.zookeeper import free_port

def test_whatisinstanceid_fails_until_initnewcluster(tmp_path, zookeeper, zk):
    uri, root = _hierarchical(zookeeper)
    conf = {"BOOKIE_CONF": _conf(tmp_path / "bookkeeper.conf", uri)}
    missing = _run("shell", "whatisinstanceid", env=conf)
    assert missing.returncode == 255, missing  # BK1: the chart's `until` loop goes round
    assert "doesn't exist in ZooKeeper" in missing.stderr
    made = _run("shell", "initnewcluster", env=conf)
    assert made.returncode == 0, made
    instance = zk.get(f"{root}/INSTANCEID")[0].decode()
    assert f"Successfully initiated cluster. ZKServers: {zookeeper.hosts} ledger root path: " \
           f"{root} instanceId: {instance}" in made.stdout
    assert zk.exists(f"{root}/available/readonly") and zk.exists(f"{root}/LAYOUT")
    shown = _run("shell", "whatisinstanceid", env=conf)
    assert shown.returncode == 0, shown
    assert shown.stdout.strip() == f"Metadata Service Uri: {uri} InstanceId: {instance}"
    again = _run("shell", "initnewcluster", env=conf)
    assert again.returncode == 1 and f"Ledger root path: {root} already exists" in again.stderr
    listed = _run("shell", "listunderreplicated", env=conf)  # ours, its URI from the conf
    assert listed.returncode == 0 and "0 ledger(s) under-replicated" in listed.stdout, listed
    assert zk.get(f"{root}/INSTANCEID")[0].decode() == instance  # ZK4: never replaced


def test_a_root_without_instanceid_is_not_initialised(tmp_path, zookeeper, zk):
    uri, root = _hierarchical(zookeeper)
    zk.ensure_path(f"{root}/available")  # e.g. a client made the tree first
    os.makedirs(tmp_path / "conf")
    _conf(tmp_path / "conf" / "bookkeeper.conf", uri)  # BE1: found in the working dir
    assert _run("shell", "whatisinstanceid", cwd=str(tmp_path)).returncode == 255
    assert _run("shell", "initnewcluster", cwd=str(tmp_path)).returncode == 0
    shown = _run("shell", "whatisinstanceid", cwd=str(tmp_path))
    assert shown.returncode == 0 and "InstanceId: " in shown.stdout


def test_explicit_conf_wins_and_json(tmp_path, zookeeper, zk):
    uri, root = _hierarchical(zookeeper)
    other, _ = _hierarchical(zookeeper)
    zk.create(f"{root}/INSTANCEID", b"1234-instance", makepath=True)
    env = {"BOOKIE_CONF": _conf(tmp_path / "other.conf", other)}
    shown = _run("shell", "-conf", _conf(tmp_path / "bk.conf", uri), "whatisinstanceid",
                 "--json", env=env)
    assert shown.returncode == 0, shown
    assert '"instanceId":"1234-instance"' in shown.stdout


def test_whatisinstanceid_fails_when_zookeeper_is_unreachable(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = {"BOOKIE_CONF": _conf(tmp_path / "bk.conf", f"zk://127.0.0.1:{port}/ledgers")}
    done = _run("shell", "whatisinstanceid", env=conf)
    assert done.returncode == 255 and "Traceback" not in done.stderr  # BS2


def test_no_metadata_service_uri_is_a_failure_not_a_default(tmp_path):
    (tmp_path / "bk.conf").write_text("zkServers=\n")
    done = _run("shell", "whatisinstanceid", env={"BOOKIE_CONF": str(tmp_path / "bk.conf")})
    assert done.returncode == 255 and "no metadata service URI" in done.stderr  # BS1


def test_bookieformat_as_the_chart_runs_it_lets_a_wiped_bookie_rejoin(tmp_path, zookeeper,
                                                                      zk):
    uri, root = _hierarchical(zookeeper)
    data = tmp_path / "bookie"
    port = free_port()
    conf = _conf(tmp_path / "bookkeeper.conf", uri, data)
    env = {"BOOKIE_CONF": conf, "BOOKIE_PORT": str(port)}
    assert _run("shell", "initnewcluster", env=env).returncode == 0
    daemon = Daemon(str(data), "--conf", conf, "--port", str(port)).start()
    assert daemon.terminate() == 0
    me = f"127.0.0.1:{port}"
    assert zk.exists(f"{root}/cookies/{me}")
    assert os.listdir(data / "journal" / "current")
    refused = _run("shell", "bookieformat", "-nonInteractive", env=env)
    assert refused.returncode == 1 and "aborted" in refused.stderr  # BF1
    assert os.listdir(data / "journal" / "current")
    declined = _run("shell", "bookieformat", env=env, stdin="x\nN\n")
    assert declined.returncode == 1 and "(Y or N)" in declined.stdout
    done = _run("shell", "bookieformat", "-nonInteractive", "-force", "-deleteCookie", env=env)
    assert done.returncode == 0, done
    assert "Bookie format completed successfully" in done.stdout
    assert os.listdir(data / "journal") == [] and os.listdir(data / "ledgers") == []  # BF2
    assert zk.exists(f"{root}/cookies/{me}") is None
    again = Daemon(str(data), "--conf", conf, "--port", str(port)).start()  # a new member
    try:
        assert zk.exists(f"{root}/cookies/{me}")
        running = _run("shell", "bookieformat", "-nonInteractive", "-force", env=env)
        assert running.returncode == 255 and "locked" in running.stderr  # BF3
        assert os.listdir(data / "ledgers" / "current")
    finally:
        assert again.terminate() == 0
    nothing = _run("shell", "bookieformat", "-n", "-f", "-d", env=env)
    assert nothing.returncode == 0, nothing
    gone = _run("shell", "bookieformat", "-n", "-f", "-d", env=env)
    assert gone.returncode == 255 and f"Cookie not found for bookie '{me}'" in gone.stderr


def test_initbookie_checks_dirs_registration_and_cookie(tmp_path, zookeeper, zk):
    uri, root = _hierarchical(zookeeper)
    data = tmp_path / "bookie"
    port = free_port()
    env = {"BOOKIE_CONF": _conf(tmp_path / "bookkeeper.conf", uri, data),
           "BOOKIE_PORT": str(port)}
    assert _run("shell", "initnewcluster", env=env).returncode == 0
    fresh = _run("shell", "initbookie", env=env)
    assert fresh.returncode == 0, fresh
    me = f"127.0.0.1:{port}"
    zk.create(f"{root}/cookies/{me}", encode_cookie(me, "/j", ["/l"], "x"), makepath=True)
    held = _run("shell", "initbookie", env=env)
    assert held.returncode == 1 and "Cookie still exists" in held.stderr
    (data / "journal").mkdir(parents=True)
    (data / "journal" / "x").write_text("")
    busy = _run("shell", "initbookie", env=env)
    assert busy.returncode == 1 and "is existing and its not empty" in busy.stderr


def test_forceauditchecks_moves_the_last_runs_back(tmp_path, zookeeper, zk):
    uri, root = _hierarchical(zookeeper)
    env = {"BOOKIE_CONF": _conf(tmp_path / "bookkeeper.conf", uri)}
    assert _run("shell", "forceauditchecks", env=env).returncode == 255  # no check chosen
    done = _run("shell", "forceauditchecks", "-calc", "-rc", "-ppc", env=env)
    assert done.returncode == 0, done
    assert "Resetting ReplicasCheckCTime" in done.stdout
    now_ms = time.time() * 1000
    for znode in ("checkallledgersctime", "placementpolicycheckctime", "replicascheckctime"):
        ctime = decode_check_ctime(znode, zk.get(f"{root}/underreplication/{znode}")[0])
        assert 20 * 86400_000 < now_ms - ctime < 22 * 86400_000, (znode, ctime)


def test_bookkeeper_usage_errors_exit_as_bookkeeper(tmp_path):
    assert _run("shell", "bookieformat", "-bogus").returncode == 255
    assert _run("nosuchcommand").returncode == 1
    assert _run("shell", "-localbookie", "whatisinstanceid").returncode == 255


def _first_line(*args: str, env: dict, cwd: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*ENTRY, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=launcher_env(env), cwd=cwd, text=True)
    return proc, proc.stdout.readline()  # the ready line (RL1), or "" if it exits first


def test_bookkeeper_bookie_and_autorecovery_start_from_bookie_conf(tmp_path, zookeeper, zk):
    uri, root = _hierarchical(zookeeper)
    data, port = tmp_path / "bookie", free_port()
    env = {"BOOKIE_CONF": _conf(tmp_path / "bookkeeper.conf", uri, data),
           "BOOKIE_PORT": str(port)}
    bookie, line = _first_line("bookie", env=env, cwd=str(tmp_path))
    try:
        assert line.strip() == f"bookie listening on http://127.0.0.1:{port}", \
            bookie.stderr.read() if not line else line
        assert zk.exists(f"{root}/available/127.0.0.1:{port}")  # registered from the conf
        assert os.listdir(data / "journal" / "current")  # its dirs are the conf's
        recovery, line = _first_line("autorecovery", env=env, cwd=str(tmp_path))
        try:
            assert line.startswith("autorecovery running as ") and uri in line, line
        finally:
            recovery.send_signal(signal.SIGTERM)
            assert recovery.wait(60) == 0
    finally:
        bookie.send_signal(signal.SIGTERM)
        assert bookie.wait(60) == 0


def test_a_key_only_the_bookie_refuses_does_not_stop_zookeeper_commands(tmp_path, zookeeper,
                                                                         zk):
    uri, root = _hierarchical(zookeeper)
    path = _conf(tmp_path / "bookkeeper.conf", uri, tmp_path / "bookie")
    with open(path, "a") as handle:  # JKS key stores: `bookie serve` exits 78 (BC3)
        handle.write("tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory\n")
    env = {"BOOKIE_CONF": path}
    made = _run("shell", "initnewcluster", env=env)
    assert made.returncode == 0 and "tlsKeyStoreType" in made.stderr, made  # BS4, said
    shown = _run("shell", "whatisinstanceid", env=env)
    assert shown.returncode == 0 and shown.stdout.startswith(f"Metadata Service Uri: {uri} ")
    wiped = _run("shell", "bookieformat", "-nonInteractive", "-force", env=env)
    assert wiped.returncode == 255 and "bad configuration" in wiped.stderr  # its dirs: no
