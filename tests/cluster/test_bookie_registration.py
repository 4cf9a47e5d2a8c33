"""A cluster bookie in ZooKeeper (docs/cluster.md §2): registered after replay, moved with its
read-only state, re-registered after its session expires, removed before it drains."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

from kazoo.client import KazooClient

from api.client.metadata_format import decode_service_info
from api.client.zookeeper import parse_uri
from api.cluster.zookeeper import ZkRegistration
from tests.support.servers import ROOT, Daemon

FLAGS = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB")


def wait_for(check, timeout_s: float = 30.0):
    """Poll ``check`` until it returns something true; bounded."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)  # noqa: sleep-ok (bounded poll of another process's state)
    raise TimeoutError(f"{check.__name__} not true after {timeout_s}s")


def get_json(url: str) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as error:  # /ready answers 503 while read-only
        return json.loads(error.read())


def put_readonly(url: str, on: bool) -> None:
    request = urllib.request.Request(url + "/v1/bookie/readonly", method="PUT",
                                     data=json.dumps({"readOnly": on}).encode(),
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).read()


def test_registered_moved_with_read_only_and_removed_before_draining(tmp_path, zk, zk_uri):
    _, root = parse_uri(zk_uri)
    daemon = Daemon(str(tmp_path / "data"), *FLAGS, "--metadata-service-uri", zk_uri).start()
    bookie_id = daemon.url.rsplit("/", 1)[-1]
    writable, readonly = f"{root}/available/{bookie_id}", f"{root}/available/readonly/{bookie_id}"
    try:
        data, _ = zk.get(writable)  # registered before /ready said 200
        host, port = bookie_id.rsplit(":", 1)
        assert decode_service_info(data) == [("http", host, int(port), "http")]
        assert get_json(daemon.url + "/ready")["registered"] is True
        info = get_json(daemon.url + "/v1/bookie/info")
        assert info["registered"] and info["registration"] == writable
        metrics = urllib.request.urlopen(daemon.url + "/metrics", timeout=10).read().decode()
        assert "bookie_zk_registered 1.0" in metrics

        listed = subprocess.run(
            [sys.executable, "-m", "bookie", "shell", "listbookies", "--json",
             "--metadata-service-uri", zk_uri], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
            capture_output=True, text=True, timeout=60)
        assert json.loads(listed.stdout) == {"type": "bookie", "bookieId": bookie_id,
                                             "state": "writable",
                                             "endpoints": [f"http://{bookie_id}"]}

        put_readonly(daemon.url, True)
        wait_for(lambda: zk.exists(readonly) and not zk.exists(writable))
        assert get_json(daemon.url + "/v1/bookie/info")["registration"] == readonly
        put_readonly(daemon.url, False)
        wait_for(lambda: zk.exists(writable) and not zk.exists(readonly))
    finally:
        code = daemon.terminate()
    assert code == 0
    assert not zk.exists(writable) and not zk.exists(readonly)
    log = daemon.log_text()
    unregistered = log.index(f"bookie {bookie_id} unregistered from ZooKeeper: stopping")
    # Draining starts with the move to STOPPING (Bookie.close): the node went before it.
    assert unregistered < log.rindex("-> stopping"), "removed only after draining began"


def test_a_standalone_bookie_says_it_is_not_registered(tmp_path):
    daemon = Daemon(str(tmp_path / "data"), *FLAGS).start()
    try:
        assert get_json(daemon.url + "/ready")["registered"] is False
        metrics = urllib.request.urlopen(daemon.url + "/metrics", timeout=10).read().decode()
        assert "bookie_zk_registered" not in metrics
    finally:
        assert daemon.terminate() == 0


def expire_session(zookeeper, client: KazooClient) -> None:
    """Kazoo's own trick: a second client on the same session id, closed, ends the session
    on the server; the first then gets SESSION_EXPIRED (kazoo state LOST)."""
    twin = KazooClient(hosts=zookeeper.hosts, client_id=client.client_id)
    twin.start(timeout=15)
    twin.stop()
    twin.close()


def test_registration_comes_back_after_the_session_expires(zookeeper, zk, zk_uri):
    _, root = parse_uri(zk_uri)
    changes: list = []
    registration = ZkRegistration(zk_uri, "127.0.0.1:9", b"", on_change=changes.append)
    registration.start()
    try:
        path = registration.register(readonly=False)
        owner = zk.exists(path).ephemeralOwner
        expire_session(zookeeper, registration.client)
        wait_for(lambda: None in changes)  # told: not registered
        def registered_anew():
            stat = zk.exists(path)
            return stat if stat is not None and stat.ephemeralOwner != owner else None

        again = wait_for(registered_anew)
        assert again.ephemeralOwner == registration.client.client_id[0]
        wait_for(lambda: changes[-1] == path)  # and told so, once the node is made
    finally:
        registration.unregister()
        registration.stop()
    assert not zk.exists(path)


def test_the_bookkeeper_protocol_port_is_registered_as_bookie_rpc(tmp_path, zk, zk_uri):
    """Issue 28: with bookie_port set the daemon prints a second ready line and registers
    that port as BookKeeper's bookies do (id "bookie", protocol "bookie-rpc"), where
    BookKeeper's address resolver looks; the port answers BookKeeper's protocol."""
    import asyncio  # noqa: PLC0415

    from tests.support.bk_client import BkClient  # noqa: PLC0415

    _, root = parse_uri(zk_uri)
    daemon = Daemon(str(tmp_path / "data"), *FLAGS, "--metadata-service-uri", zk_uri,
                    "--bookie-port", "0").start()
    bookie_id = daemon.url.rsplit("/", 1)[-1]
    try:
        data, _ = zk.get(f"{root}/available/{bookie_id}")
        host, port = bookie_id.rsplit(":", 1)
        assert decode_service_info(data) == [("http", host, int(port), "http"),
                                             ("bookie", host, daemon.bk_port, "bookie-rpc")]

        async def ask_info():
            async with BkClient.connect(daemon.bk_port) as client:
                return await client.call(client.request("GET_BOOKIE_INFO", requested=3))

        answer = asyncio.run(ask_info())
        assert answer.status == 0 and answer.getBookieInfoResponse.totalDiskCapacity > 0
    finally:
        assert daemon.terminate() == 0


def test_a_clean_sigterm_logs_no_warning_and_says_it_unregistered(start_bookies):
    """Issue 54: every clean stop logged "WARNING ... is not registered in ZooKeeper": the
    bookie's own unregistering (ZR3) was reported as a lost registration."""
    daemon, = start_bookies(1)
    assert daemon.terminate() == 0
    log = daemon.log_text()
    bookie_id = daemon.url.rsplit("/", 1)[-1]
    assert f"INFO    bookie.cluster: bookie {bookie_id} unregistered from ZooKeeper: " \
           f"stopping" in log, log
    assert [line for line in log.splitlines() if " WARNING " in line or " ERROR " in line] \
        == [], log
    assert "bookie stopped cleanly after " in log.splitlines()[-1], log
