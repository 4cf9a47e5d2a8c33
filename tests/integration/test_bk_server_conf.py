"""BookKeeper's own shipped conf/bk_server.conf starts our bookie (docs/operations.md §8): the
daemon, `python -m bookie serve --conf FILE`, with only the directories and ports rewritten as
an operator would (a temp dir, free ports, the test's ZooKeeper); every key it does not map is
listed once at start (bookie/bkconf.py BC1)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from bookie.properties import parse_properties
from tests.support.servers import ROOT
from tests.support.zookeeper import free_port

SHIPPED = os.path.join(ROOT, "tests", "data", "bk_server.conf")
#: The keys of the shipped file this bookie takes (the rest must each be listed once).
TAKEN = {"bookiePort", "journalDirectories", "ledgerDirectories", "metadataServiceUri",
         "zkTimeout"}  # zk_session_timeout_ms


def _rewritten(tmp_path, zk_hosts: str, bookie_port: int) -> str:
    """The shipped file with its directories and ports changed, nothing else."""
    text = open(SHIPPED, encoding="latin-1").read()
    changes = {"journalDirectories": str(tmp_path / "data" / "journal"),
               "ledgerDirectories": str(tmp_path / "data" / "ledgers"),
               "bookiePort": str(bookie_port),
               "metadataServiceUri": f"zk+hierarchical://{zk_hosts}/ledgers",
               "zkServers": zk_hosts}
    for key, value in changes.items():
        text, count = re.subn(rf"^{key}=.*$", f"{key}={value}", text, flags=re.MULTILINE)
        assert count == 1, key
    path = tmp_path / "bk_server.conf"
    path.write_text(text, encoding="latin-1")
    return str(path)


def test_bookkeepers_shipped_bk_server_conf_starts_a_bookie(tmp_path, zookeeper):
    bookie_port = free_port()
    conf = _rewritten(tmp_path, zookeeper.hosts, bookie_port)
    log_path = tmp_path / "daemon.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "bookie", "serve", "--conf", conf,
                                 "--port", "0"], stdout=subprocess.PIPE, stderr=log,
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    try:
        first = proc.stdout.readline().decode()
        second = proc.stdout.readline().decode()
        assert "listening on http://127.0.0.1:" in first, (first, log_path.read_text())
        assert second.strip() == f"bookie-rpc listening on 127.0.0.1:{bookie_port}", second
        url = first.strip().rsplit(" ", 1)[-1]
        _until_ready(proc, url, log_path)
        with urllib.request.urlopen(url + "/v1/bookie/info", timeout=10) as reply:
            info = json.load(reply)
        with socket.create_connection(("127.0.0.1", bookie_port), timeout=10):
            pass  # BookKeeper's protocol is served on bookiePort
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log_path.read_text()
    assert info["state"] == "writable"
    # the data is where the file put it: journalDirectories/current, ledgerDirectories/current
    assert os.listdir(tmp_path / "data" / "journal" / "current")
    assert os.path.isfile(tmp_path / "data" / "ledgers" / "current" / "IDENTITY")
    log_text = log_path.read_text()
    props = parse_properties(open(conf, encoding="latin-1").read())
    assert TAKEN <= set(props)
    for key in sorted(set(props) - TAKEN):
        listed = re.findall(rf"(?<![\w.]){re.escape(key)}=", log_text)
        assert len(listed) == 1, f"{key} listed {len(listed)} times:\n{log_text}"
    for key in TAKEN:
        assert not re.search(rf"(?<![\w.]){re.escape(key)}=", log_text), key
    ignored = [line for line in log_text.splitlines() if "key(s) ignored" in line]
    assert len(ignored) == 1 and " INFO " in ignored[0], ignored


def _until_ready(proc, url: str, log_path) -> None:
    for _ in range(600):  # bounded: 60 s
        if proc.poll() is not None:
            raise AssertionError(f"bookie exited {proc.returncode}: {log_path.read_text()}")
        try:
            with urllib.request.urlopen(url + "/ready", timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)  # noqa: sleep-ok (bounded poll)
    raise AssertionError(f"never ready: {log_path.read_text()}")
