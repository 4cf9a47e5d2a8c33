"""Issue 35 (bug H): with ZooKeeper gone after connect, every ZooKeeper call gives up after
ZK_ANSWER_S (ZK5, api/client/zk_bound.py) with ZkUnavailable, a MetadataError, instead of
waiting for ZooKeeper for as long as it is away; a CLI says so, without a traceback.

ZooKeeper is paused with SIGSTOP, the hang case: the server keeps its TCP connections open
and answers nothing. Each test runs its own server (the session's shared one must not
stop) and resumes it in a ``finally``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

import api.client.zk_bound as zookeeper_module  # where the bound is read
from api.client.metadata import LedgerMetadata, MetadataState
from api.client.zookeeper import ZkMetadataStore, ZkUnavailable
from api.cluster.local_zookeeper import ZooKeeperServer
from api.cluster.underreplication import Underreplication

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOUND_S = 2.0  # ZK_ANSWER_S in-process, to keep the test short
SLACK_S = 3.0  # thread hand-offs on a busy machine
OUTER_S = 60.0  # only keeps a regression from hanging the suite


@pytest.fixture
def server(tmp_path):
    started = ZooKeeperServer(str(tmp_path / "zk")).start()
    yield started
    started.stop()


@contextmanager
def paused(server: ZooKeeperServer):
    os.kill(server.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)


async def _fails_within_the_bound(name: str, call):
    began = time.monotonic()
    try:
        await call()
    except ZkUnavailable as exc:
        return name, time.monotonic() - began, str(exc)
    raise AssertionError(f"{name} did not fail with ZooKeeper paused")


async def test_every_kind_of_call_gives_up_after_the_bound(server, monkeypatch):
    monkeypatch.setattr(zookeeper_module, "ZK_ANSWER_S", BOUND_S)
    store = await ZkMetadataStore(f"zk://{server.hosts}/ledgers").__aenter__()
    try:
        ur = Underreplication(store.client, store.root, "me")
        await asyncio.to_thread(ur.ensure)
        ledger = await store.create(LedgerMetadata(ledger_id=None))
        other = await store.create(LedgerMetadata(ledger_id=None))
        await asyncio.to_thread(ur.mark, ledger.ledger_id, ["gone:3181"])
        assert await asyncio.to_thread(ur.try_lock, ledger.ledger_id)
        _, _, marker_version = await asyncio.to_thread(ur.marker, ledger.ledger_id)
        closed = dataclasses.replace(ledger, state=MetadataState.CLOSED)
        calls = {
            "close's compare-and-set": lambda: store.write(closed),
            "create": lambda: store.create(LedgerMetadata(ledger_id=None)),
            "delete": lambda: store.delete(other.ledger_id, other.version),
            "read": lambda: store.read(ledger.ledger_id),
            "lock": lambda: asyncio.to_thread(ur.try_lock, other.ledger_id),
            "marker": lambda: asyncio.to_thread(ur.mark, other.ledger_id, ["gone:3181"]),
            "marker transaction": lambda: asyncio.to_thread(
                ur.mark_replicated, ledger.ledger_id, marker_version),
        }
        with paused(server):
            results = await asyncio.wait_for(asyncio.gather(
                *(_fails_within_the_bound(name, call) for name, call in calls.items())),
                OUTER_S)
        for name, elapsed, message in results:
            assert elapsed <= BOUND_S + SLACK_S, (name, elapsed)
            assert message.startswith(f"ZooKeeper at {server.hosts} "), message
        # Back again: the store answers, and the lock whose take was not answered (kazoo
        # sent it once ZooKeeper was back) is this session's, so taken, not lost (ZK5).
        assert (await asyncio.wait_for(store.read(ledger.ledger_id), OUTER_S)).ledger_id \
            == ledger.ledger_id
        assert await asyncio.to_thread(ur.try_lock, other.ledger_id)
        rival = await ZkMetadataStore(f"zk://{server.hosts}/ledgers").__aenter__()
        try:
            assert not await asyncio.to_thread(
                Underreplication(rival.client, rival.root, "rival").try_lock, other.ledger_id)
        finally:
            await rival.close()
    finally:
        await store.close()


def test_a_cli_says_zookeeper_did_not_answer_without_a_traceback(server):
    """The real bound (a subprocess): connecting to a paused ZooKeeper gives up after it."""
    uri = f"zk://{server.hosts}/ledgers"
    commands = {"ledger": ["ledger", "delete", "--ledger", "1", "--metadata-service-uri", uri],
                "cluster": ["cluster", "init", "--metadata-service-uri", uri],
                "shell": ["shell", "listbookies", "--metadata-service-uri", uri]}
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    env.pop("BOOKIE_METADATA_SERVICE_URI", None)
    with paused(server):
        running = {name: subprocess.Popen([sys.executable, "-m", "bookie", *argv], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True)
                   for name, argv in commands.items()}
        try:
            done = {name: (proc.communicate(timeout=OUTER_S + zookeeper_module.ZK_ANSWER_S),
                           proc.returncode) for name, proc in running.items()}
        finally:
            for proc in running.values():
                if proc.poll() is None:
                    proc.kill()
    said = f"ZooKeeper at {server.hosts} did not answer in {zookeeper_module.ZK_ANSWER_S:.0f} s"
    for name, ((out, err), code) in done.items():
        assert code != 0, (name, out, err)
        assert err.strip().endswith(said), (name, err)
        assert len(err.strip().splitlines()) == 1, (name, err)  # no traceback, no log


def test_a_bookie_stops_on_sigterm_with_zookeeper_gone(tmp_path):
    """Issue 35 (H, found by the recovery drill): with ZooKeeper stopped, SIGTERM's
    unregister failed (ZkUnavailable), the exception ended the event loop with a traceback,
    and the bookie's own threads kept the process alive, checkpointing, for ever: a bookie
    that could not be stopped. It warns, goes on draining, checkpoints and exits 0 (its
    registration is ephemeral: it goes with the session)."""
    from tests.support.servers import Daemon  # noqa: PLC0415

    zk = ZooKeeperServer(str(tmp_path / "zk")).start()
    daemon = Daemon(str(tmp_path / "b" / "data"), "--metadata-service-uri",
                    f"zk://{zk.hosts}/ledgers", "--autorecovery-daemon-enabled", "false")
    daemon.start()  # ready: registered, and no autorecovery still starting
    try:
        zk.stop()
        code = daemon.terminate(OUTER_S + zookeeper_module.ZK_ANSWER_S)
    finally:
        if daemon.proc.poll() is None:
            daemon.kill9()
    log = daemon.log_text()
    assert code == 0, log[-2000:]
    assert "Traceback" not in log
    assert "could not unregister from ZooKeeper" in log


async def test_a_bookie_that_cannot_join_its_cluster_closes_and_exits_1(tmp_path, bookie_config):
    """The other half (seen in the same test's first runs): ZooKeeper gone while the bookie
    joined its cluster after replay (the autorecovery's own ZooKeeper client could not
    connect). The error escaped, with a traceback, and the running bookie's threads kept
    the process alive. Now: logged, the bookie closed (its journal drained and checkpointed)
    and exit 1, as a refused start."""
    import bookie.cli as cli  # noqa: PLC0415
    from bookie.node import Bookie, BookieState  # noqa: PLC0415

    node = Bookie(bookie_config)

    async def joining():
        raise ZkUnavailable("127.0.0.1:1")

    code = await asyncio.wait_for(cli._run_until_stopped(
        node, asyncio.Event(), cli.Notifier(), before_ready=(joining,)), OUTER_S)
    assert code == 1
    assert node.state is BookieState.STOPPING
    assert not node.journal._thread.is_alive()  # the non-daemon thread that kept it alive
