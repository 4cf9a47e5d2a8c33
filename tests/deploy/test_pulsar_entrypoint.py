"""What the Pulsar helm chart runs in a bookie pod, run on this host (docs/operations.md §9):
deploy/pulsar/'s bin/ and conf/ laid out as the image's /pulsar (deploy/pulsar/Dockerfile
copies them so), the chart's configmap as environment (tests/support/pulsar_chart.py), a real
ZooKeeper, and the chart's own shell scripts, verbatim but for the Java-only lines: the
cluster-initialize job, the bookie's init container, then its main container. The bookie must
answer the chart's probes on its http port, register under its pod-style id
(useHostNameAsBookieID: <canonical hostname>:<bookiePort>), take writes and serve them, export
its metrics there, and stop cleanly on SIGTERM.

Containers cannot run on these machines (docs/operations.md §9 says what was not run); what
the container would run is run here. Two differences from a pod, both environment: the
bookie listens on 127.0.0.1 (BOOKIE_HOST, the tests' network rule; in a pod bin/pulsar
listens on every interface), and allowLoopback=true, since this host's name resolves to
127.0.0.1 (a pod's resolves to its own address)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest
from kazoo.client import KazooClient

from api.client.ensemble import BookKeeper
from bookie.bkconf_identity import canonical_hostname
from tests.support.pulsar_chart import INIT_JOB, MAIN, PULSAR_CONF, VERIFY_CLUSTER_ID, \
    chart_environment, probe
from tests.support.servers import ROOT
from tests.support.zookeeper import free_port

DEPLOY = os.path.join(ROOT, "deploy", "pulsar")

@pytest.fixture(params=["our conf", "Pulsar's conf", "an index volume"])
def pod(request, tmp_path, zookeeper):
    """The image's /pulsar (bin/, conf/, data/) and the pod's environment; its
    conf/bookkeeper.conf ours (deploy/pulsar/conf) or Pulsar's shipped file, as an operator
    who mounts Pulsar's own over it would have."""
    home = tmp_path / "pulsar"
    for part in ("bin", "conf"):
        shutil.copytree(os.path.join(DEPLOY, part), home / part)
    if request.param == "Pulsar's conf":
        shutil.copy(PULSAR_CONF, home / "conf" / "bookkeeper.conf")
    prefix = f"/pulsar-{uuid.uuid4().hex[:8]}"
    http_port, bookie_port = free_port(), free_port()
    index = str(home / "data" / "bookkeeper" / "index") \
        if request.param == "an index volume" else None  # bookkeeper.volumes.index.enabled
    env = {**os.environ, "PYTHONPATH": ROOT, "BK_PYTHON": sys.executable,
           **chart_environment(zookeeper.hosts, prefix, http_port,
                               root=str(home / "data" / "bookkeeper"), index_dir=index),
           "bookiePort": str(bookie_port), "allowLoopback": "true",
           "BOOKIE_HOST": "127.0.0.1", "BOOKIE_PORT": str(free_port())}
    return {"home": home, "env": env, "prefix": prefix, "zk": zookeeper.hosts, "index": index,
            "http": http_port, "bookie_port": bookie_port,
            "uri": f"zk://{zookeeper.hosts}{prefix}/ledgers"}


def _sh(pod, script: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["timeout", str(int(timeout_s)), "sh", "-c", script], cwd=pod["home"],
                          env=pod["env"], capture_output=True, text=True, timeout=timeout_s + 10)


def _until(what: str, predicate, proc, log_path, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        assert proc.poll() is None, f"the bookie exited ({proc.returncode}) before {what}:\n" \
                                    + log_path.read_text()
        time.sleep(0.1)  # noqa: sleep-ok (bounded poll of a probe, as the kubelet's)
    pytest.fail(f"timed out waiting for {what}:\n" + log_path.read_text())


async def _write_and_read(uri: str) -> list[bytes]:
    async with await BookKeeper.connect(uri) as bk:
        writer = await bk.create_ledger(1, 1, 1, password=b"pulsar")
        for i in range(50):
            await writer.append(b"entry %d" % i)
        await writer.close()
        reader = await bk.open_ledger(writer.ledger_id, b"pulsar", recover=False)
        return [entry.payload for entry in await reader.read_range(0, 49)]


def test_the_charts_scripts_initialise_the_cluster_and_run_a_bookie(pod):
    job = _sh(pod, INIT_JOB.format(zk=pod["zk"], prefix=pod["prefix"]))
    assert job.returncode == 0, job.stdout + job.stderr
    assert 'created for pulsar cluster "test"' in job.stdout, job.stdout + job.stderr
    again = _sh(pod, INIT_JOB.format(zk=pod["zk"], prefix=pod["prefix"]))  # a re-run of the job
    assert "bookkeeper cluster already initialized" in again.stdout, again.stdout + again.stderr
    verified = _sh(pod, VERIFY_CLUSTER_ID)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    log_path = pod["home"] / "bookie.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["sh", "-c", MAIN], cwd=pod["home"], env=pod["env"],
                                stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{pod['http']}"
    try:
        # liveness, then readiness (the startup and readiness probes' path)
        _until("the liveness probe", lambda: probe(base + "/api/v1/bookie/state")[0] == 200,
               proc, log_path)
        _until("the readiness probe", lambda: probe(base + "/api/v1/bookie/is_ready")[0] == 200,
               proc, log_path)
        bookie_id = f"{canonical_hostname()}:{pod['bookie_port']}"
        zk = KazooClient(hosts=pod["zk"])
        zk.start(timeout=15)
        try:
            available = zk.get_children(f"{pod['prefix']}/ledgers/available")
            cookie, _ = zk.get(f"{pod['prefix']}/ledgers/cookies/{bookie_id}")
        finally:
            zk.stop()
            zk.close()
        assert bookie_id in available, available
        assert str(pod["home"] / "data" / "bookkeeper" / "journal") in cookie.decode()
        with socket.create_connection(("127.0.0.1", pod["bookie_port"]), timeout=10):
            pass  # BookKeeper's protocol on the chart's bookie port
        entries = asyncio.run(_write_and_read(pod["uri"]))
        assert [bytes(e) for e in entries] == [b"entry %d" % i for i in range(50)]
        status, metrics = probe(base + "/metrics")  # the chart's prometheus.io/port
        assert status == 200 and b"bookie_" in metrics
    finally:
        proc.send_signal(signal.SIGTERM)  # the kubelet's stop: `exec` made the bookie the PID
        code = proc.wait(60)
    log_text = log_path.read_text()
    assert code == 0, log_text
    assert "Applying config useHostNameAsBookieID = true" in log_text
    assert "bookie stopped cleanly" in log_text, log_text
    # the data is on the chart's volumes' mount points
    assert os.listdir(pod["home"] / "data" / "bookkeeper" / "journal" / "current")
    assert (pod["home"] / "data" / "bookkeeper" / "ledgers" / "current").is_dir()
    indexes = pod["home"] / "data" / "bookkeeper" / ("index" if pod["index"] else "ledgers")
    assert (indexes / "current" / "locations").is_dir()  # where DbLedgerStorage keeps them
    assert (indexes / "current" / "ledgers").is_dir()
