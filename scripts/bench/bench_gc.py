#!/usr/bin/env python3
"""Compaction speed, throttled and not, and what it costs adds, in one run.

    .venv/bin/python scripts/bench/bench_gc.py [--data-mib 96] [--throttle-mib 32] [--clients 4]

1. Prepares a data dir with a bookie daemon (`python -m bookie serve`, 127.0.0.1 only):
   three ledgers interleaved in 4 MiB entry logs (a checkpoint after every round), then two
   of them deleted, so every log is a third live: under the major threshold (0.8).
2. For compaction_rate_bytes = 0 (unthrottled) and then --throttle-mib, on a fresh copy of
   that dir, a daemon pinned to core 0 (the load generator runs on core 1, docs/design.md §11):
     * warm-up: --clients clients add --adds 1 KiB entries each, not counted;
     * baseline: the same again with no compaction running: p50/p99 add latency;
     * the same adders again while `POST /v1/bookie/gc?force=major` runs, until it ends:
       p50/p99 add latency during compaction, and the compaction's MB/s: bytes of the
       compacted logs (read) and bytes written, over the run's own duration.
   Each daemon is stopped by PID (SIGTERM, then SIGKILL after a bound).
Prints each figure beside its baseline from the same run, and the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
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
from entrylog.format import parse_log_id  # noqa: E402

KEY = master_key(b"bench-gc")
MiB = 1024 * 1024
STOP_TIMEOUT_S = 60
COMMON_FLAGS = ["--entrylog-max-bytes", "4MiB", "--checkpoint-interval-ms", "3600000",
                "--gc-interval-ms", "0", "--journal-prealloc-bytes", "16MiB"]


class DaemonProc:
    """A bookie daemon subprocess on 127.0.0.1, stopped by its PID."""

    def __init__(self, data_dir: str, extra: list[str], core: str | None) -> None:
        env = dict(os.environ, PYTHONPATH=ROOT)
        pin = ["taskset", "-c", core] if core is not None and shutil.which("taskset") else []
        self.proc = subprocess.Popen(
            [*pin, sys.executable, "-m", "bookie", "serve", "--data-dir", data_dir,
             "--host", "127.0.0.1", "--port", "0", *COMMON_FLAGS, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
        line = self.proc.stdout.readline().decode()
        if "listening on" not in line:
            self.stop()
            raise SystemExit(f"bookie did not start: {line!r}")
        self.url = line.strip().rsplit(" ", 1)[-1]

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                try:
                    async with session.get(self.url + "/ready") as reply:
                        if reply.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.02)
        raise SystemExit(f"{self.url} not ready after {timeout_s}s")

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def entry(ledger_id: int, entry_id: int, payload: bytes) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, len(payload), payload)


async def prepare(data_dir: str, data_mib: int, deadline: float) -> None:
    """Three ledgers interleaved in every log, then two deleted (a third live)."""
    daemon = DaemonProc(data_dir, ["--compaction-rate-bytes", "0"], None)
    try:
        await daemon.wait_ready()
        payload = os.urandom(4096 - 36)
        per_round = 64   # entries per ledger per round: 3 x 256 KiB between checkpoints
        rounds = max(1, data_mib * MiB // (3 * per_round * 4096))
        async with BookieClient(daemon.url) as client:
            for round_no in range(rounds):
                if time.monotonic() > deadline:
                    raise SystemExit("out of time while preparing the data dir")
                first = round_no * per_round
                for ledger_id in (1, 2, 3):
                    await client.add_batch(ledger_id, [entry(ledger_id, first + i, payload)
                                                       for i in range(per_round)], KEY)
                await client.checkpoint()
            await client.delete_ledger(2)
            await client.delete_ledger(3)
            await client.checkpoint()
    finally:
        daemon.stop()


async def adder(client: BookieClient, ledger_id: int, latencies: list, stop, count: int):
    payload = os.urandom(1024 - 36)
    entry_id = 0
    while (count and entry_id < count) or (not count and not stop.is_set()):
        data = entry(ledger_id, entry_id, payload)
        started = time.perf_counter()
        await client.add_entry(ledger_id, entry_id, data, KEY)
        latencies.append(time.perf_counter() - started)
        entry_id += 1


async def measure(data_dir: str, rate_bytes: int, args, ledger_base: int) -> dict:
    ledger_dir = os.path.join(data_dir, "ledgers", "current")
    sizes = {parse_log_id(n): os.path.getsize(os.path.join(ledger_dir, n))
             for n in os.listdir(ledger_dir) if parse_log_id(n) is not None}
    daemon = DaemonProc(data_dir, ["--compaction-rate-bytes", str(rate_bytes)], "0")
    try:
        await daemon.wait_ready()
        async with BookieClient(daemon.url) as client:
            warm: list[float] = []   # first touch of the journal and caches: not counted
            await asyncio.gather(*(adder(client, ledger_base + 200 + i, warm, None, args.adds)
                                   for i in range(args.clients)))
            idle: list[float] = []
            await asyncio.gather(*(adder(client, ledger_base + i, idle, None, args.adds)
                                   for i in range(args.clients)))
            busy: list[float] = []
            stop = asyncio.Event()
            adders = [asyncio.create_task(adder(client, ledger_base + 100 + i, busy, stop, 0))
                      for i in range(args.clients)]
            async with client.session.post(daemon.url + "/v1/bookie/gc",
                                           params={"force": "major"}) as reply:
                result = await reply.json()
            stop.set()
            await asyncio.gather(*adders)
    finally:
        daemon.stop()
    read_bytes = sum(sizes.get(i, 0) for i in result["logsCompacted"])
    return {"rate": rate_bytes, "result": result, "read_mb_s": read_bytes / MiB /
            result["seconds"], "written_mb_s": result["bytesWrittenByCompaction"] / MiB /
            result["seconds"], "read_bytes": read_bytes, "idle": idle, "busy": busy}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def report(point: dict) -> None:
    result, idle, busy = point["result"], point["idle"], point["busy"]
    name = "unthrottled" if not point["rate"] else f"throttle {point['rate'] / MiB:.0f} MiB/s"
    print(f"\ncompaction, {name}: {len(result['logsCompacted'])} logs, "
          f"{point['read_bytes'] / MiB:.1f} MiB read, "
          f"{result['bytesWrittenByCompaction'] / MiB:.1f} MiB written in "
          f"{result['seconds']:.2f} s")
    moved = (point["read_bytes"] + result["bytesWrittenByCompaction"]) / MiB
    print(f"  compaction          {point['read_mb_s']:8.1f} MiB/s read  "
          f"{point['written_mb_s']:8.1f} MiB/s written  "
          f"({moved / result['seconds']:.1f} MiB/s read+written; "
          f"problems {result['problems']})")
    print(f"  add latency idle    p50 {pct(idle, 0.5):7.2f} ms  p99 {pct(idle, 0.99):7.2f} ms  "
          f"({len(idle)} adds)")
    print(f"  add latency busy    p50 {pct(busy, 0.5):7.2f} ms  p99 {pct(busy, 0.99):7.2f} ms  "
          f"({len(busy)} adds, {statistics.mean(busy) * 1000:.2f} ms mean)")
    print(f"  p99 busy / idle     {pct(busy, 0.99) / pct(idle, 0.99):.2f}x")


async def main_async(args) -> None:
    deadline = time.monotonic() + args.timeout_s
    work = tempfile.mkdtemp(prefix="bench-gc-")
    try:
        template = os.path.join(work, "template", "data")
        await prepare(template, args.data_mib, deadline)
        points = []
        for number, rate in enumerate((0, args.throttle_mib * MiB)):
            if time.monotonic() > deadline:
                raise SystemExit("out of time")
            data_dir = os.path.join(work, f"run{number}", "data")
            shutil.copytree(template, data_dir)
            points.append(await measure(data_dir, rate, args, 1000 * (number + 1)))
            shutil.rmtree(os.path.dirname(data_dir))
        for point in points:
            report(point)
        free, held = points
        print(f"\nthrottled / unthrottled compaction speed: "
              f"{held['read_mb_s'] / free['read_mb_s']:.2f}x; add p99 during compaction: "
              f"{pct(free['busy'], 0.99):.2f} ms unthrottled, {pct(held['busy'], 0.99):.2f} ms "
              f"throttled, vs {pct(free['idle'], 0.99):.2f} / {pct(held['idle'], 0.99):.2f} ms "
              f"idle")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-mib", type=int, default=96, help="entry data written")
    parser.add_argument("--throttle-mib", type=int, default=32,
                        help="compaction_rate_bytes of the throttled point, MiB/s")
    parser.add_argument("--clients", type=int, default=4, help="concurrent adders")
    parser.add_argument("--adds", type=int, default=500, help="adds per client, idle")
    parser.add_argument("--timeout-s", type=float, default=600, help="bound on the whole run")
    args = parser.parse_args()
    if shutil.which("taskset"):
        os.sched_setaffinity(0, {1 % os.cpu_count()})
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
