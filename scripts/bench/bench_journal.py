"""Benchmark the journal alone: durable 1 KiB adds/s and latency against raw fdatasync loops.

    .venv/bin/python scripts/bench/bench_journal.py [--seconds 3] [--writers 1,16,64,256] [--dir D]
        [--loop uvloop|asyncio]

Writers are asyncio tasks awaiting a future that the journal's complete_group resolves with
one ``loop.call_soon_threadsafe`` per group, as the node does (docs/design.md §3.1). Baselines are
measured in the same run on the same disk (docs/design.md §11): a raw loop of 1 KiB append +
fdatasync on a growing file, the same on a pre-zeroed file, and for each point a raw write +
fdatasync loop at the group size the journal was observed to use. Every figure is bounded by
--seconds; files are warmed (zero-filled) before they are measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bookie.cli import run_event_loop  # noqa: E402
from bookie.disk import OsDisk  # noqa: E402
from bookie.entry import frame_entry  # noqa: E402
from journal.format import encode_add  # noqa: E402
from journal.group_commit import GroupCommitPolicy  # noqa: E402
from journal.journal import Journal  # noqa: E402

ENTRY_BYTES = 1024
PREZEROED_BYTES = 256 << 20


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


def raw_sync_loop(directory: str, write_bytes: int, seconds: float, prezeroed: bool):
    """(syncs/s, p50 s, p99 s) of write + fdatasync at the file's end or over zeros."""
    path = os.path.join(directory, f"raw-{write_bytes}-{int(prezeroed)}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if prezeroed:
            zeros = bytes(1 << 20)
            for offset in range(0, PREZEROED_BYTES, len(zeros)):
                os.pwrite(fd, zeros, offset)
            os.fsync(fd)
        data = os.urandom(write_bytes)
        latencies, offset = [], 0
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()
        while time.perf_counter() < deadline:
            if prezeroed and offset + write_bytes > PREZEROED_BYTES:
                offset = 0  # wrap: still an overwrite of allocated blocks
            begin = time.perf_counter()
            os.pwrite(fd, data, offset)
            os.fdatasync(fd)
            latencies.append(time.perf_counter() - begin)
            offset += write_bytes
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        os.unlink(path)
    latencies.sort()
    return len(latencies) / elapsed, percentile(latencies, 0.5), percentile(latencies, 0.99)


def sequential_write_mb_s(directory: str, total: int = 256 << 20) -> float:
    """The disk's own streaming write rate: 1 MiB writes, fdatasync every 16 MiB. The
    journal writes each byte twice (its zero-filled preallocation, then the record), so
    half of this bounds the journal's record bytes/s, whatever the CPU."""
    path = os.path.join(directory, "sequential")
    data = os.urandom(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for index in range(total >> 20):
            os.pwrite(fd, data, index << 20)
            if index % 16 == 15:
                os.fdatasync(fd)
        os.fdatasync(fd)
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        os.unlink(path)
    return total / elapsed / 1e6


class FlushStats:
    """on_flush callback: groups, records and bytes written while measuring."""

    def __init__(self) -> None:
        self.measuring = False
        self.groups = self.records = self.bytes = 0

    def __call__(self, reason, count, written, sync_seconds) -> None:
        if self.measuring:
            self.groups += 1
            self.records += count
            self.bytes += written


class Point:
    """One measured point: ``writers`` asyncio tasks, each with one durable add in flight."""

    def __init__(self, directory: str, writers: int) -> None:
        self.loop = asyncio.get_running_loop()
        self.stats = FlushStats()
        self.journal = Journal(OsDisk(), directory, policy=GroupCommitPolicy(),
                               complete_group=self.complete_group, on_flush=self.stats)
        self.writers = writers
        self.stop = False
        self.latencies: list[float] = []

    def complete_group(self, tokens, exc) -> None:
        """On the journal thread: one hand-off to the loop per group, as the node does."""
        self.loop.call_soon_threadsafe(self.resolve, tokens, exc)

    @staticmethod
    def resolve(tokens, exc) -> None:
        for future in tokens:
            if not future.done():
                if exc is None:
                    future.set_result(None)
                else:
                    future.set_exception(exc)

    async def writer(self, index: int, payload: bytes) -> None:
        entry = frame_entry(index, 0, -1, len(payload), payload)
        assert len(entry) == ENTRY_BYTES
        perf, submit, stats = time.perf_counter, self.journal.submit, self.stats
        while not self.stop:
            future = self.loop.create_future()
            begin = perf()
            submit(encode_add(entry), future)
            await future
            if stats.measuring:
                self.latencies.append(perf() - begin)

    async def run(self, seconds: float, warmup: float):
        """(adds/s, p50 s, p99 s, FlushStats) after ``warmup`` seconds of the same load."""
        self.journal.start()
        payload = os.urandom(ENTRY_BYTES - 36)
        tasks = [asyncio.ensure_future(self.writer(i, payload)) for i in range(self.writers)]
        try:
            await asyncio.sleep(warmup)
            self.stats.measuring = True
            started = time.perf_counter()
            await asyncio.sleep(seconds)
            self.stats.measuring = False
            elapsed = time.perf_counter() - started
            self.stop = True
            await asyncio.gather(*tasks)
        finally:
            self.journal.close()
        latencies = sorted(self.latencies)
        return (len(latencies) / elapsed, percentile(latencies, 0.5),
                percentile(latencies, 0.99), self.stats)


async def journal_point(directory: str, writers: int, seconds: float, warmup: float):
    return await Point(directory, writers).run(seconds, warmup)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measured point")
    parser.add_argument("--writers", default="1,16,64,256")
    parser.add_argument("--dir", default=None, help="directory on the disk to measure")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop",
                        help="the writers' event loop (default uvloop, as the daemon runs "
                             "where it is installed)")
    args = parser.parse_args(argv)
    base = tempfile.mkdtemp(prefix="bench-journal-", dir=args.dir)
    try:
        run(base, args.seconds, [int(w) for w in args.writers.split(",")], args.loop)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


def run(base: str, seconds: float, writer_counts: list[int], event_loop: str) -> None:
    """Each point is printed beside baselines measured just before and after it."""
    warmup = min(1.0, seconds / 3)
    baseline_seconds = min(seconds, 2.0)
    append = raw_sync_loop(base, ENTRY_BYTES, baseline_seconds, prezeroed=False)
    print(f"disk: {base}; event loop: {event_loop}")
    print(f"raw 1 KiB append + fdatasync: {append[0]:.0f}/s, p50 {append[1] * 1e6:.0f} us, "
          f"p99 {append[2] * 1e6:.0f} us (growing file, for reference)")
    streaming = sequential_write_mb_s(base)
    print(f"sequential write (1 MiB writes, fdatasync every 16 MiB): {streaming:.0f} MB/s; "
          f"the journal writes its bytes twice (zeros, then records), so records are bounded "
          f"by ~{streaming / 2:.0f} MB/s = ~{streaming / 2 * 1e6 / 1060:.0f} 1 KiB adds/s")
    print()
    print(f"{'writers':>7} {'adds/s':>9} {'p50 us':>7} {'p99 us':>7} {'groups/s':>9} "
          f"{'rec/grp':>7} {'grp KiB':>7} {'raw1K/s':>8} {'raw1K p50':>9} {'x raw1K':>7} "
          f"{'raw@grp rec/s':>13} {'x raw@grp':>9} {'disk MB/s':>9}")
    for writers in writer_counts:
        directory = os.path.join(base, f"journal-{writers}")
        os.makedirs(directory)
        zeroed = raw_sync_loop(base, ENTRY_BYTES, baseline_seconds, prezeroed=True)
        rate, p50, p99, stats = run_event_loop(journal_point(directory, writers, seconds,
                                                             warmup), event_loop)
        groups = max(stats.groups, 1)
        per_group = stats.records / groups
        group_bytes = max(512, int(stats.bytes / groups))
        raw = raw_sync_loop(base, group_bytes, baseline_seconds, prezeroed=True)
        raw_records = raw[0] * per_group
        print(f"{writers:>7} {rate:>9.0f} {p50 * 1e6:>7.0f} {p99 * 1e6:>7.0f} "
              f"{stats.groups / seconds:>9.0f} {per_group:>7.1f} {group_bytes / 1024:>7.1f} "
              f"{zeroed[0]:>8.0f} {zeroed[1] * 1e6:>9.0f} {rate / zeroed[0]:>7.2f} "
              f"{raw_records:>13.0f} {rate / raw_records:>9.2f} "
              f"{2 * stats.bytes / seconds / 1e6:>9.0f}")
        shutil.rmtree(directory, ignore_errors=True)
    print()
    print("raw1K: 1 KiB write + fdatasync loop on a pre-zeroed file, measured just before "
          "the point;")
    print("  x raw1K = adds/s over it (budget >= 0.8 at 1 writer).")
    print("raw@grp: write + fdatasync loop at the observed group size, measured just after;")
    print("  x raw@grp = adds/s over its syncs/s x records per group (docs/design.md §11).")
    print("disk MB/s: records written per second, twice (the zero-filled preallocation ahead of"
          " them).")
    print("targets: 64 writers >= 250k adds/s (docs/design.md §11).")


if __name__ == "__main__":
    sys.exit(main())
