"""``pulsar zookeeper-shell`` (api/cluster/zk_shell.py ZS1-ZS3) against a real ZooKeeper, run
as the Pulsar helm chart's cluster-initialize job runs it: the loop on ``ls`` and the ``create
... && initnewcluster`` chain depend on its exit codes."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid

SHELL = [sys.executable, "-m", "api.cluster.zk_shell"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SHELL, *args], capture_output=True, text=True, timeout=60)


def test_create_then_ls_get_as_the_chart_runs_them(zookeeper, zk):
    prefix = f"/pulsar-{uuid.uuid4().hex[:8]}"
    missing = _run("-r", "-server", zookeeper.hosts, "ls", prefix)
    assert missing.returncode == 1 and f"Node does not exist: {prefix}" in missing.stderr  # ZS2
    made = _run("-server", zookeeper.hosts, "create", prefix)
    assert made.returncode == 0 and made.stdout.strip() == f"Created {prefix}"
    assert zk.exists(prefix) is not None
    zk.create(f"{prefix}/b", b"x")
    zk.create(f"{prefix}/a", b"hello")
    listed = _run("-r", "-server", zookeeper.hosts, "ls", prefix)
    assert listed.returncode == 0 and listed.stdout.strip() == "[a, b]"  # ZS1
    got = _run("-server", zookeeper.hosts, "get", f"{prefix}/a")
    assert got.returncode == 0 and got.stdout.strip() == "hello"
    again = _run("-server", zookeeper.hosts, "create", prefix)
    assert again.returncode == 1 and f"Node already exists: {prefix}" in again.stderr  # ZS2
    read_only = _run("-r", "-server", zookeeper.hosts, "create", f"{prefix}/c")
    assert read_only.returncode == 1 and zk.exists(f"{prefix}/c") is None


def test_unreachable_zookeeper_exits_1_within_its_timeout():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = _run("-server", f"127.0.0.1:{port}", "ls", "/")
    assert done.returncode == 1 and "cannot connect or no answer" in done.stderr  # ZS3
