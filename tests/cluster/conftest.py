"""The cluster tests' fixtures (``zookeeper``, ``zk_uri``) live in tests/conftest.py, shared
with tests/deploy/ (a cluster bookie's metrics); ``start_bookies`` is the cluster tests' own."""

from __future__ import annotations

import signal
import subprocess

import pytest

from tests.support.servers import Daemon
from tests.support.zookeeper import free_port

#: No checkpoint during a test unless it asks; small journal files.
QUIET_FLAGS = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB")


@pytest.fixture
def start_bookies(tmp_path, zk_uri):
    """``start_bookies(count, *flags, name="b")``: that many bookie daemons of the test's
    cluster, each on its own port (kept across restarts); every one still running at the end
    is resumed (a test may have paused it with SIGSTOP) and stopped by PID."""
    started: list[Daemon] = []

    def start(count: int, *flags: str, name: str = "b") -> list[Daemon]:
        daemons = []
        for i in range(count):
            daemon = Daemon(str(tmp_path / f"{name}{i}" / "data"), *QUIET_FLAGS, *flags,
                            "--metadata-service-uri", zk_uri, "--port", str(free_port()))
            started.append(daemon)  # before start: one that fails to get ready is stopped too
            daemons.append(daemon.start())
        return daemons
    yield start
    for daemon in started:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.proc.send_signal(signal.SIGCONT)
            try:
                daemon.terminate(timeout_s=30)
            except subprocess.TimeoutExpired:  # a drain that cannot finish: no leftovers
                daemon.kill9()
