"""Run the Pulsar helm chart's scripts inside the built image (deploy/pulsar/Dockerfile), as
far as this machine allows: ``buildah run --isolation chroot`` (containers themselves cannot
run here; docs/operations.md §9), the host's network, a real ZooKeeper on 127.0.0.1.

    buildah --storage-driver vfs bud --isolation chroot -f deploy/pulsar/Dockerfile \\
        -t localhost/bookie-pulsar:test .
    .venv/bin/python -m scripts.demo.pulsar_image_check [--image localhost/bookie-pulsar:test]

It runs, inside the image, the chart's cluster-initialize job, the bookie's init container
and its main container (tests/support/pulsar_chart.py, the same scripts the host test runs),
with the chart's configmap as environment; then, from the host, the chart's probes, a ledger
written and read back through the registration, and /metrics; then SIGTERM, which must end
the bookie cleanly. One line per step; exit 0 when every step held.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from api.client.ensemble import BookKeeper
from tests.support.pulsar_chart import INIT_JOB, MAIN, VERIFY_CLUSTER_ID, chart_environment, \
    probe
from tests.support.zookeeper import ZooKeeperServer, free_port

STORAGE = ("--storage-driver", "vfs")


def _buildah(*argv: str) -> list[str]:
    return ["buildah", *STORAGE, *argv]


def _run_in(container: str, env: dict[str, str], script: str) -> list[str]:
    envs = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
    return _buildah("run", "--isolation", "chroot", "--workingdir", "/pulsar", *envs,
                    container, "--", "sh", "-c", script)


def _until(predicate, timeout_s: float = 90.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (from /proc/PID/task/*/children), depth first."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                children = [int(c) for c in handle.read().split()]
        except FileNotFoundError:
            continue
        for child in children:
            found += [child, *_descendants(child)]
    return found


def _bookie_pid(pid: int) -> int | None:
    """The bookie's own process under buildah run (which does not forward SIGTERM: it kills
    its child), the one the kubelet's SIGTERM reaches in a pod through `exec`."""
    for child in _descendants(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as handle:
                if b"bookie.bk_entry" in handle.read():
                    return child
        except FileNotFoundError:
            continue
    return None


async def _ledger(uri: str) -> bool:
    async with await BookKeeper.connect(uri) as bk:
        writer = await bk.create_ledger(1, 1, 1, password=b"pulsar")
        for i in range(20):
            await writer.append(b"entry %d" % i)
        await writer.close()
        reader = await bk.open_ledger(writer.ledger_id, b"pulsar", recover=False)
        got = [e.payload for e in await reader.read_range(0, 19)]
    return got == [b"entry %d" % i for i in range(20)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="localhost/bookie-pulsar:test")
    args = parser.parse_args(argv)
    if shutil.which("buildah") is None:
        print("pulsar_image_check: buildah is not installed", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="pulsar-image-")
    zookeeper = ZooKeeperServer(os.path.join(work, "zk")).start()
    container = subprocess.run(_buildah("from", "-q", args.image), capture_output=True,
                               text=True, check=True).stdout.strip()
    prefix, http_port, bookie_port = f"/pulsar-{uuid.uuid4().hex[:8]}", free_port(), free_port()
    env = {**chart_environment(zookeeper.hosts, prefix, http_port),
           "bookiePort": str(bookie_port), "allowLoopback": "true",
           "BOOKIE_HOST": "127.0.0.1", "BOOKIE_PORT": str(free_port())}
    results: list[tuple[str, bool]] = []

    def step(name: str, ok: bool, detail: str = "") -> bool:
        results.append((name, ok))
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}",
              flush=True)
        return ok

    proc = None
    try:
        job = subprocess.run(_run_in(container, env, INIT_JOB.format(
            zk=zookeeper.hosts, prefix=prefix)), capture_output=True, text=True, timeout=120)
        step("cluster-initialize job", job.returncode == 0 and "created for pulsar" in job.stdout,
             job.stdout + job.stderr)
        verify = subprocess.run(_run_in(container, env, VERIFY_CLUSTER_ID), capture_output=True,
                                text=True, timeout=120)
        step("init container (whatisinstanceid)", verify.returncode == 0,
             verify.stdout + verify.stderr)
        log_path = os.path.join(work, "bookie.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(_run_in(container, env, MAIN), stdout=log,
                                    stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{http_port}"
        step("liveness probe", _until(lambda: probe(base + "/api/v1/bookie/state")[0] == 200))
        step("readiness probe", _until(lambda: probe(base + "/api/v1/bookie/is_ready")[0] == 200),
             open(log_path).read()[-2000:])
        step("a ledger written and read back",
             asyncio.run(_ledger(f"zk://{zookeeper.hosts}{prefix}/ledgers")))
        step("/metrics on the http port", probe(base + "/metrics")[0] == 200)
    finally:
        if proc is not None:
            bookie = _bookie_pid(proc.pid)
            os.kill(bookie, signal.SIGTERM) if bookie else proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait(10)
            text = open(os.path.join(work, "bookie.log")).read()
            step("SIGTERM stops the bookie cleanly",
                 code == 0 and "bookie stopped cleanly" in text, f"exit {code}: {text[-1500:]}")
        subprocess.run(_buildah("rm", container), capture_output=True)
        zookeeper.stop()
        shutil.rmtree(work, ignore_errors=True)
    failed = [name for name, ok in results if not ok]
    print(f"pulsar_image_check: {len(results) - len(failed)}/{len(results)} steps held"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
