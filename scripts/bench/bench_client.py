"""Benchmark one pipelined LedgerWriter beside the raw HTTP batch path, in the same run.

    .venv/bin/python scripts/bench/bench_client.py [--seconds 2] [--rounds 3] [--sizes 1024,65536]
        [--no-pin]

Starts its own bookie (``python -m bookie serve --data-dir <tmp> --port 0`` on 127.0.0.1,
its URL parsed from the "listening on" line), pinned to CPU 0 with this process on CPU 1
when there are two (docs/design.md §11), and stops it by PID with SIGTERM. For each entry size:

    raw batch   the baseline: BookieClient.add_batch of 100 freshly framed entries per POST,
                as many POSTs in flight as the writer may have; an entry's latency is its
                request's.
    writer      one LedgerWriter with its defaults (queued adds batched up to 100 per
                request, 8 requests in flight); latency is append_async -> acknowledged,
                queueing in the pipeline included, sampled on every 8th entry.
    writer/1    the same writer with batching off: one PUT per entry, 8 in flight.
    one add     latency without queueing: ``await writer.append`` one at a time, beside
                ``BookieClient.add_entry`` one at a time (its baseline).

Each figure runs --rounds times for --seconds, the modes interleaved so that a slow moment
of the machine (or a checkpoint) does not land on one mode only; the rate printed is the
median round's, the latencies are pooled. A warm-up first touches the journal's fresh
pages (first-touch page-cache costs swing write figures 2-10x). 503 replies are counted;
the raw path honours Retry-After like the writer does. The periodic checkpoint is off and a
checkpoint runs before every figure instead, so that none lands inside one figure only
(a full write cache still triggers one, in any mode).
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
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from api.client import BookieClient, LedgerWriter, WriterOptions  # noqa: E402
from bookie.entry import frame_entry, master_key  # noqa: E402
from bookie.errors import Unavailable  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAW_BATCH = 100
LATENCY_SAMPLE = 8
PASSWORD = b"bench"


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


# -- the bookie ------------------------------------------------------------------------------


def start_bookie(data_dir: str, pin: bool) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bookie", "serve", "--data-dir", data_dir, "--host", "127.0.0.1",
         "--port", "0", "--log-level", "warning", "--checkpoint-interval-ms", "3600000"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT))
    line = proc.stdout.readline().decode()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"bench_client: the bookie did not start: {line!r}")
    url = line.strip().rsplit(" ", 1)[-1]
    if pin:
        os.sched_setaffinity(proc.pid, {0})
        os.sched_setaffinity(0, {1})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/ready", timeout=5) as reply:
                if reply.status == 200:
                    return proc, url
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.05)  # a bounded readiness poll
    proc.kill()
    raise SystemExit("bench_client: the bookie was not ready within 60 s")


def stop_bookie(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


# -- the measurements -------------------------------------------------------------------------


class Figure:
    """One mode at one size: latencies pooled over rounds, the median round's rate."""

    def __init__(self, name: str, size: int) -> None:
        self.name, self.size = name, size
        self.latencies: list[float] = []
        self.rates: list[float] = []
        self.busy = 0

    def add_round(self, count: int, elapsed_s: float) -> None:
        self.rates.append(count / elapsed_s if elapsed_s > 0 else 0.0)

    @property
    def rate(self) -> float:
        ordered = sorted(self.rates)
        return ordered[len(ordered) // 2] if ordered else 0.0

    def row(self, baseline: "Figure | None") -> str:
        ordered = sorted(self.latencies)
        ratio = f"{self.rate / baseline.rate:5.2f}x" if baseline and baseline.rate else "  -   "
        return (f"{self.size // 1024:>4} KiB  {self.name:<40} {self.rate:>10,.0f} "
                f"{self.rate * self.size / 2**20:>8.1f} {percentile(ordered, 0.5) * 1e3:>8.2f} "
                f"{percentile(ordered, 0.99) * 1e3:>8.2f}  {ratio}  {self.busy:>5}  "
                f"{min(self.rates, default=0):,.0f}..{max(self.rates, default=0):,.0f}")


async def run_writer(url: str, ledger_id: int, size: int, seconds: float, figure: Figure,
                     options: WriterOptions) -> None:
    """One pipelined writer appending as fast as its pipeline admits, for ``seconds``.

    Latency is sampled on every LATENCY_SAMPLE-th entry: a timing callback on every entry
    costs more client CPU than the pipeline itself and would slow what it measures.
    """
    payload = os.urandom(size)
    writer = await LedgerWriter.create(url, password=PASSWORD, ledger_id=ledger_id, options=options)

    def acked(_future: asyncio.Future, began: float) -> None:
        figure.latencies.append(time.perf_counter() - began)

    count, started = 0, time.perf_counter()
    while time.perf_counter() < started + seconds:
        began = time.perf_counter()
        future = await writer.append_async(payload)
        if count % LATENCY_SAMPLE == 0:
            future.add_done_callback(lambda f, b=began: acked(f, b))
        count += 1
    await future  # the last add: acknowledged after every earlier one (L2)
    figure.add_round(count, time.perf_counter() - started)
    await writer.close()


async def run_one_at_a_time(url: str, ledger_id: int, size: int, seconds: float,
                            figure: Figure, raw: bool) -> None:
    """Sequential adds: with nothing queued, latency is the add's own round trip."""
    payload, key = os.urandom(size), master_key(PASSWORD)
    async with BookieClient(url) as client:
        writer = None if raw else await LedgerWriter.create(client, password=PASSWORD,
                                                            ledger_id=ledger_id)
        started = time.perf_counter()
        entry_id = 0
        while time.perf_counter() < started + seconds:
            began = time.perf_counter()
            if writer is None:
                await client.add_entry(ledger_id, entry_id, frame_entry(
                    ledger_id, entry_id, entry_id - 1, (entry_id + 1) * size, payload), key)
            else:
                await writer.append(payload)
            figure.latencies.append(time.perf_counter() - began)
            entry_id += 1
        figure.add_round(entry_id, time.perf_counter() - started)
        if writer is not None:
            await writer.close()


async def _raw_batch(client: BookieClient, ledger_id: int, entries: list[bytes],
                     figure: Figure) -> None:
    key = master_key(PASSWORD)
    began = time.perf_counter()
    while True:
        try:
            await client.add_batch(ledger_id, entries, key, digest_type="crc32c")
            break
        except Unavailable as exc:
            figure.busy += 1
            await asyncio.sleep(min(float(exc.retry_after_s), 5.0))
    figure.latencies.extend([time.perf_counter() - began] * len(entries))


async def run_raw(url: str, ledger_id: int, size: int, seconds: float, figure: Figure,
                  in_flight: int = 8) -> None:
    """The baseline: POST batches of 100 entries, framed here, ``in_flight`` at a time."""
    payload = os.urandom(size)
    next_id = [0]

    async def sender(client: BookieClient, deadline: float) -> None:
        while time.perf_counter() < deadline:
            first = next_id[0]
            next_id[0] += RAW_BATCH
            entries = [frame_entry(ledger_id, i, i - 1, (i + 1) * size, payload)
                       for i in range(first, first + RAW_BATCH)]
            await _raw_batch(client, ledger_id, entries, figure)

    async with BookieClient(url) as client:
        started = time.perf_counter()
        await asyncio.gather(*(sender(client, started + seconds) for _ in range(in_flight)))
        figure.add_round(next_id[0], time.perf_counter() - started)


#: (name, runner, index of the baseline row); rounds run the modes interleaved.
MODES = [
    (f"raw POST batch x{RAW_BATCH}, 8 in flight", run_raw, None),
    ("LedgerWriter (batch<=100, 8 in flight)",
     lambda *a: run_writer(*a, WriterOptions()), 0),
    ("LedgerWriter, no batching (8 in flight)",
     lambda *a: run_writer(*a, WriterOptions(batch_max_entries=1)), 0),
    ("raw PUT, 1 in flight", lambda *a: run_one_at_a_time(*a, raw=True), None),
    ("LedgerWriter.append, 1 in flight", lambda *a: run_one_at_a_time(*a, raw=False), 3),
]


async def measure(url: str, sizes: list[int], seconds: float, rounds: int) -> list[str]:
    rows, ledger_ids = [], iter(range(1, 1 << 30))
    for size in sizes:
        await run_raw(url, next(ledger_ids), size, max(0.5, seconds / 2), Figure("warm", size))
        figures = [Figure(name, size) for name, _run, _base in MODES]
        async with BookieClient(url) as client:
            for _ in range(rounds):
                for (_name, run, _base), figure in zip(MODES, figures):
                    await client.checkpoint()  # each figure starts with an empty write cache
                    await run(url, next(ledger_ids), size, seconds, figure)
        rows += [figure.row(None if base is None else figures[base])
                 for (_name, _run, base), figure in zip(MODES, figures)]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="per figure and round (default 2)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of all modes, interleaved; rates are the median round's "
                        "(default 3)")
    parser.add_argument("--sizes", default="1024,65536", help="entry payload sizes in bytes")
    parser.add_argument("--no-pin", action="store_true", help="do not pin server and client")
    parser.add_argument("--dir", help="parent of the bookie's temporary data dir")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    pin = not args.no_pin and hasattr(os, "sched_setaffinity") and os.cpu_count() >= 2
    data_dir = tempfile.mkdtemp(prefix="bench-client-", dir=args.dir)
    proc, url = start_bookie(os.path.join(data_dir, "data"), pin)
    try:
        rows = asyncio.run(measure(url, sizes, args.seconds, args.rounds))
    finally:
        stop_bookie(proc)
        shutil.rmtree(data_dir, ignore_errors=True)
    print(f"bench_client: {args.rounds} rounds x {args.seconds:g} s per figure, median round; "
          f"bookie pid {proc.pid} at {url}; "
          f"{'server on CPU 0, client on CPU 1' if pin else 'not pinned'}; "
          f"Python {sys.version.split()[0]}")
    print(f"{'size':>8}  {'mode':<40} {'entries/s':>10} {'MiB/s':>8} {'p50 ms':>8} "
          f"{'p99 ms':>8}  {'vs raw':>6}  {'503s':>5}  rounds' entries/s")
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
