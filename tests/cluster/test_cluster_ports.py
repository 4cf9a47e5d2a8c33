"""`bookie cluster up`'s ports (issue 54): a port an earlier run left in TIME-WAIT is free for
a bookie, so `up` takes it; and a cluster dir keeps its ZooKeeper port across `down`/`up`, so
an exported BOOKIE_METADATA_SERVICE_URI stays right."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket

from api.cluster.local_bookies import port_free
from tests.cluster.test_cluster_cli import bookie, consecutive_free_ports
from tests.support.servers import Daemon
from tests.support.zookeeper import free_port


def _time_wait_on(port: int) -> None:
    """Leave a connection on ``port`` in TIME-WAIT: the server side closes first (the side
    that closes first holds TIME-WAIT), as a bookie does when it stops. The listener binds
    as a bookie's server does (asyncio's reuse_address): a TIME-WAIT socket keeps its
    listener's SO_REUSEADDR, which decides whether a later bind may share the port."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen()
        client = socket.create_connection(("127.0.0.1", port), timeout=5)
        served, _ = listener.accept()
        served.close()  # FIN from the server first: its end goes to TIME-WAIT
        client.recv(1)  # the FIN arrived (b"")
        client.close()


def _plain_bind_refused(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def test_a_port_in_time_wait_is_free_and_a_bookie_binds_it(tmp_path):
    port = free_port()
    _time_wait_on(port)
    # The situation of the issue: a bind without SO_REUSEADDR (the old port_free) refuses it.
    assert _plain_bind_refused(port), "no TIME-WAIT made: the test proves nothing"
    assert port_free(port)
    daemon = Daemon(str(tmp_path / "b" / "data"), "--port", str(port)).start()
    try:
        assert daemon.url == f"http://127.0.0.1:{port}"
        assert not port_free(port)  # a port a bookie listens on is taken
    finally:
        daemon.terminate(timeout_s=30)


def _uri(home: str) -> str:
    with open(os.path.join(home, "cluster.json")) as handle:
        return json.load(handle)["metadataServiceUri"]


def test_up_again_in_the_same_dir_keeps_the_zookeeper_port(tmp_path):
    home = str(tmp_path / "cluster")
    base = consecutive_free_ports(1)
    first = bookie("cluster", "up", "--bookies", "1", "--dir", home, "--base-port", str(base))
    assert first.returncode == 0, first.stdout + first.stderr
    uri = _uri(home)
    down = bookie("cluster", "down", "--dir", home)
    assert down.returncode == 0, down.stdout
    again = bookie("cluster", "up", "--bookies", "1", "--dir", home, "--base-port", str(base))
    try:
        assert again.returncode == 0, again.stdout + again.stderr
        assert _uri(home) == uri and f"export BOOKIE_METADATA_SERVICE_URI={uri}" in again.stdout
        listed = bookie("shell", "listbookies", env={"BOOKIE_METADATA_SERVICE_URI": uri})
        assert listed.returncode == 0 and listed.stdout.split()[0] == f"127.0.0.1:{base}", \
            listed.stdout + listed.stderr
    finally:
        assert bookie("cluster", "down", "--dir", home).returncode == 0


def test_down_kills_a_zookeeper_that_outlives_sigterm(tmp_path):
    """`cluster down` once failed after 120 s with ZooKeeper's JVM still up after SIGTERM
    (the TLS cluster test, on a loaded machine). A ZooKeeper that cannot act on SIGTERM
    (stopped with SIGSTOP: the signal stays pending) is killed after
    ZOOKEEPER_STOP_TIMEOUT_S, said in a line, and `down` succeeds."""
    home = str(tmp_path / "cluster")
    base = consecutive_free_ports(1)
    up = bookie("cluster", "up", "--bookies", "1", "--dir", home, "--base-port", str(base))
    assert up.returncode == 0, up.stdout + up.stderr
    with open(os.path.join(home, "cluster.json")) as handle:
        zookeeper_pid = json.load(handle)["zookeeper"]["pid"]
    os.kill(zookeeper_pid, signal.SIGSTOP)
    try:
        down = bookie("cluster", "down", "--dir", home)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(zookeeper_pid, signal.SIGCONT)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "after SIGTERM: SIGKILL" in down.stdout, down.stdout
    assert not os.path.exists(f"/proc/{zookeeper_pid}") or \
        open(f"/proc/{zookeeper_pid}/stat").read().split()[2] == "Z"
