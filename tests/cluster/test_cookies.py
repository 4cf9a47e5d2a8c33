"""Cookies (REPLICATION.md §2, CK1): written at first start to ZooKeeper and beside the data
dirs; a wiped data dir, or another bookie's, refuses to start while ZooKeeper holds this
bookie's cookie, naming both sides and the command that overrides it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from api.client.metadata_format import decode_cookie
from api.client.zookeeper import parse_uri
from tests.support.servers import ROOT, Daemon
from tests.support.zookeeper import free_port

FLAGS = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB")


def shell(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bookie", "shell", *argv], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
                          text=True, timeout=60)


def refused(daemon: Daemon) -> str:
    with pytest.raises(RuntimeError, match="exited 1"):
        daemon.start()
    return daemon.log_text()


def test_a_wiped_data_dir_refuses_to_start_until_the_cookie_is_deleted(tmp_path, zk, zk_uri):
    _, root = parse_uri(zk_uri)
    port = free_port()
    data = str(tmp_path / "data")
    flags = (*FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port))
    first = Daemon(data, *flags).start()
    bookie_id = f"127.0.0.1:{port}"
    assert first.terminate() == 0
    cookie = decode_cookie(zk.get(f"{root}/cookies/{bookie_id}")[0])
    identity = open(os.path.join(data, "journal", "current", "IDENTITY")).read()
    assert cookie["bookieHost"] == bookie_id and cookie["instanceId"] in identity
    for current in ("journal/current", "ledgers/current"):  # the copy beside the dirs
        assert decode_cookie(open(os.path.join(data, current, "VERSION"), "rb").read()) == cookie

    shutil.rmtree(data)  # the disk was replaced
    log = refused(Daemon(data, *flags))
    assert f"ZooKeeper holds the cookie of bookie {bookie_id}" in log
    assert cookie["instanceId"] in log and "are empty" in log
    override = (f"bookie shell cookie delete --metadata-service-uri {zk_uri} "
                f"--bookie-id {bookie_id}")
    assert override in log

    shown = shell("cookie", "show", "--metadata-service-uri", zk_uri, "--bookie-id", bookie_id)
    assert shown.returncode == 0 and cookie["instanceId"] in shown.stdout
    deleted = shell(*override.split()[2:])
    assert deleted.returncode == 0, deleted.stderr
    again = Daemon(data, *flags).start()  # a new member on the new disk: a new cookie
    try:
        new = decode_cookie(zk.get(f"{root}/cookies/{bookie_id}")[0])
        assert new["instanceId"] != cookie["instanceId"]
    finally:
        assert again.terminate() == 0


def test_another_bookies_data_dir_refuses_to_start(tmp_path, zk_uri):
    port_a, port_b = free_port(), free_port()
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for data, port in ((a, port_a), (b, port_b)):
        daemon = Daemon(data, *FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port))
        assert daemon.start().terminate() == 0
    swapped = Daemon(b, *FLAGS, "--metadata-service-uri", zk_uri, "--port", str(port_a))
    log = refused(swapped)
    assert f"cookie of bookie 127.0.0.1:{port_a} names instance" in log
    assert "its data dirs hold instance" in log


def test_no_cookie_no_bookie_id_is_a_usage_error(zk_uri):
    done = shell("cookie", "show", "--metadata-service-uri", zk_uri)
    assert done.returncode == 2 and "needs --bookie-id" in done.stderr
    absent = shell("cookie", "show", "--metadata-service-uri", zk_uri, "--bookie-id", "h:1")
    assert absent.returncode == 1 and "no cookie of bookie h:1" in absent.stderr
