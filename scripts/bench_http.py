#!/usr/bin/env python3
"""Durable 1 KiB adds over HTTP, beside a bare aiohttp POST endpoint measured in the same run.

    .venv/bin/python scripts/bench_http.py [--seconds 5] [--clients 1,16,64]

Starts (on 127.0.0.1 only, each stopped by PID at the end):
  * a real bookie daemon (`python -m bookie serve`) on a temp data dir, pinned to core 0;
  * a bare aiohttp app whose POST handler reads the same body and answers JSON, pinned to
    core 0 (the baseline: the HTTP ceiling of this machine for this request shape).
The load generator runs here, pinned to core 1 (DESIGN.md §11), with one ledger per client.
Prints adds/s and p50/p99 per point, and the ratio to the bare endpoint. Target
(DESIGN.md §11): >= 0.8x the bare endpoint at 64 clients for single adds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import aiohttp  # noqa: E402

from bookie.entry import frame_entry, master_key  # noqa: E402

KEY = master_key(b"bench")
PAYLOAD = b"b" * (1024 - 36)  # 1 KiB framed entries (32-byte header + 4-byte CRC32C)

BARE_SERVER = """
import sys
from aiohttp import web
async def handle(request):
    body = await request.read()
    return web.json_response({"ledgerId": 1, "entryId": len(body)})
app = web.Application(client_max_size=64 << 20)
app.router.add_put("/v1/ledgers/{ledger}/entries/{entry}", handle)
app.router.add_post("/v1/ledgers/{ledger}/entries", handle)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=lambda *a: print(
    "bookie listening on http://127.0.0.1:" + sys.argv[1], flush=True), access_log=None)
"""


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(argv: list[str]) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(["taskset", "-c", "0", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    line = proc.stdout.readline().decode()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.strip().rsplit(" ", 1)[-1]


async def wait_ready(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(2000):
            try:
                async with session.get(url + "/ready") as reply:
                    if reply.status in (200, 404):  # the bare server has no /ready
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.01)
    raise SystemExit(f"{url} never became ready")


async def _client(session, url, ledger_id, batch, deadline, latencies, counts):
    entry_id = 0
    headers = {"X-Master-Key": KEY.hex()}
    while time.perf_counter() < deadline:
        if batch == 1:
            data = frame_entry(ledger_id, entry_id, entry_id - 1, entry_id, PAYLOAD)
            target, method = f"{url}/v1/ledgers/{ledger_id}/entries/{entry_id}", "PUT"
        else:
            data = b"".join(len(e).to_bytes(4, "big") + e for e in (
                frame_entry(ledger_id, i, i - 1, i, PAYLOAD)
                for i in range(entry_id, entry_id + batch)))
            target, method = f"{url}/v1/ledgers/{ledger_id}/entries", "POST"
        started = time.perf_counter()
        async with session.request(method, target, data=data, headers=headers) as reply:
            await reply.read()
            if reply.status != 200:
                raise SystemExit(f"{method} {target}: HTTP {reply.status}")
        latencies.append(time.perf_counter() - started)
        counts[0] += batch
        entry_id += batch


async def measure(url: str, clients: int, batch: int, seconds: float, base_ledger: int) -> dict:
    latencies: list[float] = []
    counts = [0]
    connector = aiohttp.TCPConnector(limit=clients + 4)
    async with aiohttp.ClientSession(connector=connector) as session:
        warm = time.perf_counter() + min(1.0, seconds / 4)
        await asyncio.gather(*(_client(session, url, base_ledger + i, batch, warm, [], [0])
                               for i in range(clients)))
        started = time.perf_counter()
        deadline = started + seconds
        await asyncio.gather(*(_client(session, url, base_ledger + 10_000 + i, batch, deadline,
                                       latencies, counts) for i in range(clients)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {"rate": counts[0] / elapsed, "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000}


async def run(args) -> None:
    os.sched_setaffinity(0, {1})
    tmp = tempfile.mkdtemp(prefix="bench-http-")
    port = _free_port()
    bare, bare_url = start_server([sys.executable, "-c", BARE_SERVER, str(port)])
    bookie, bookie_url = start_server([sys.executable, "-m", "bookie", "serve", "--data-dir",
                                       os.path.join(tmp, "data"), "--port", "0"])
    try:
        await wait_ready(bare_url)
        await wait_ready(bookie_url)
        await report(args, bare_url, bookie_url)
    finally:
        for proc in (bookie, bare):
            proc.terminate()
            proc.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)


async def report(args, bare_url: str, bookie_url: str) -> None:
    print(f"{'clients':>7} {'batch':>5} | {'bare/s':>9} {'p50ms':>6} {'p99ms':>6} | "
          f"{'bookie/s':>9} {'p50ms':>6} {'p99ms':>6} | ratio")
    ledger = 1
    for batch in args.batches:
        for clients in args.clients:
            bare = await measure(bare_url, clients, batch, args.seconds, ledger)
            real = await measure(bookie_url, clients, batch, args.seconds, ledger)
            ledger += 100_000
            print(f"{clients:>7} {batch:>5} | {bare['rate']:>9.0f} {bare['p50_ms']:>6.2f} "
                  f"{bare['p99_ms']:>6.2f} | {real['rate']:>9.0f} {real['p50_ms']:>6.2f} "
                  f"{real['p99_ms']:>6.2f} | {real['rate'] / bare['rate']:.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="per point (default 5)")
    parser.add_argument("--clients", default="1,16,64", help="comma-separated client counts")
    parser.add_argument("--batches", default="1,100", help="entries per request")
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    args.batches = [int(b) for b in args.batches.split(",")]
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
