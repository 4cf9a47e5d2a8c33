#!/usr/bin/env python3
"""`GET /v1/ledgers/{L}` latency by ledger size, beside `GET /health` in the same run.

    .venv/bin/python scripts/bench/bench_ledger_info.py [--sizes 1000,60000] [--calls 200]

Starts a real bookie daemon on 127.0.0.1 with a temp data dir (stopped by PID at the end),
writes one ledger per size in batches of 1000 1 KiB entries, checkpoints, then prints p50/p99
of ledger info per size and of `/health` (the HTTP floor), and p50/p99 of an unrelated entry
read while two clients call ledger info on the largest ledger in a loop (docs/drills.md "Track
record": before, info read every entry: 0.4 s at 60k entries, and an unrelated read waited 0.8 s
behind it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import aiohttp  # noqa: E402

from api.client import BookieClient  # noqa: E402
from bookie.entry import frame_entry, master_key  # noqa: E402

KEY = master_key(b"bench")
PAYLOAD = b"i" * (1024 - 36)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def wait_ready(url: str, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < end:
            try:
                async with session.get(url + "/ready") as reply:
                    if reply.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise SystemExit(f"bookie at {url} not ready within {deadline_s} s")


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def timed(call, count: int) -> list[float]:
    out = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        out.append(time.perf_counter() - start)
    return out


async def run(url: str, sizes: list[int], calls: int) -> None:
    async with BookieClient(url) as client, aiohttp.ClientSession() as session:
        for ledger_id, size in enumerate(sizes, start=1):
            for first in range(0, size, 1000):
                batch = [frame_entry(ledger_id, e, e - 1, 0, PAYLOAD)
                         for e in range(first, min(size, first + 1000))]
                await client.add_batch(ledger_id, batch, KEY)
        await client.checkpoint()

        async def health():
            async with session.get(url + "/health") as reply:
                await reply.read()

        base = await timed(health, calls)
        print(f"GET /health (baseline)        p50 {pct(base, .5):7.2f} ms  p99 {pct(base, .99):7.2f} ms")
        for ledger_id, size in enumerate(sizes, start=1):
            info = await client.ledger_info(ledger_id)
            assert info["entries"] == size, info
            got = await timed(lambda: client.ledger_info(ledger_id), calls)
            print(f"GET ledger info, {size:>7} entries p50 {pct(got, .5):7.2f} ms  "
                  f"p99 {pct(got, .99):7.2f} ms  ({statistics.median(got) / statistics.median(base):.2f}x /health)")
        big = len(sizes)
        stop = asyncio.Event()

        async def hammer():
            while not stop.is_set():
                await client.ledger_info(big)

        hammers = [asyncio.create_task(hammer()) for _ in range(2)]
        reads = await timed(lambda: client.read_entry(1, 0), calls)
        stop.set()
        await asyncio.gather(*hammers)
        print(f"unrelated read beside 2 info loops p50 {pct(reads, .5):7.2f} ms  p99 {pct(reads, .99):7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,60000")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    data = tempfile.mkdtemp(prefix="bench-info-")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "bookie", "serve", "--data-dir", data,
                             "--port", str(port)], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        asyncio.run(wait_ready(url))
        asyncio.run(run(url, sizes, args.calls))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
