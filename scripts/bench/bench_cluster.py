#!/usr/bin/env python3
"""The replicated path at the bookies' speed: the cluster client beside a raw bookie, same run.

    .venv/bin/python scripts/bench/bench_cluster.py --runs 3
        [--entries 20000] [--in-flight 256] [--baseline-seconds 2] [--latency-appends 2000]
        [--beyond-lac 20000] [--rerep-mib 192] [--rerep-limit-mib 16]
        [--rows raw,floor,appends,latency,read,tail,recovery,rerep] [--rerep-kib 1,64]

Starts, on 127.0.0.1 only, a ZooKeeper (Debian's package) and 4 bookie daemons
(``python -m bookie serve``); every thread of every bookie is pinned to CPU 0 and this
process, which is the client (and the baseline's load generator), to CPU 1, so the two
sides never share a core; ZooKeeper (metadata only) may use both. Everything is stopped
by PID at the end and the temp dirs removed. All entries are 1 KiB framed (988-byte
payload + 36 bytes of header and CRC32C) unless a row says otherwise. Rows:

  raw bookie        one of those same daemons driven by scripts/bench/bench_http.py's raw-socket
                    load generator: batches of 256 (the writer's POST batch), 8 connections
                    (twice its batches in flight per bookie): the most this bookie adds per
                    second.
  asyncio floor     the ``append()`` tasks style with no writer and no I/O (a task, a
                    semaphore slot and a future per append): no library gets that style
                    below it.
  appends           --entries appends through BookKeeper/EnsembleWriter at E/Qw/Qa 1/1/1
                    (on the raw baseline's bookie), 3/2/2 and 3/3/2, each in three styles:
                    ``append()`` as tasks, --in-flight of them outstanding; ``append_async``
                    futures, a window of --in-flight; ``append_many`` of 256, 4 calls in
                    flight. Ratios: 1/1/1 to the raw bookie, 3/2/2 and 3/3/2 to 1/1/1
                    (all bookies share CPU 0, so a bookie-bound ratio tops out near 1/Qw).
  latency           one appender, 1 in flight, 3/2/2: p50/p99 of ``await append()``.
  read              ``read_range`` over a closed 3/2/2 ledger of --entries entries.
  tail              a second client's ``tail(0)`` over an open 3/2/2 ledger of --entries
                    entries until it has seen them all (catch-up).
  recovery          (a) a 3/2/2 ledger whose writer died with 1,000 appends in flight;
                    (b) one with --beyond-lac entries on its bookies, none confirmed (written
                    straight to the bookies with piggybacked LAC -1): ``open_ledger`` with
                    recovery from a second client, its time and the closed end.
  re-replication    per sub-run a fresh set of 4 bookies (in-bookie autorecovery off): closed
                    3/2/2 ledgers holding --rerep-mib MiB, the bookie most ledgers name is
                    killed, its ledgers marked under-replicated, and a ReplicationWorker in
                    this process copies them back (MiB/s = bytes it copied / time until no
                    marker is left), at 1 KiB and 64 KiB entries unthrottled and at 1 KiB
                    with --rerep-limit-mib. Meanwhile a foreground writer appends 1 KiB
                    entries, 8 in flight, to a 3/2/2 ledger on the 3 survivors: its add p99
                    alone (a few seconds) and during the copy.

Each row prints a rate and the client's CPU per entry (``time.process_time()`` of this
process, all its threads, over the row, divided by the entries; for the raw bookie, the load
generator's), and, where the bookies are the main cluster's, the bookies' CPU per entry (all
4 daemons, /proc/<pid>/stat: 10 ms ticks, so coarse for small --entries). Before each row
every bookie is checkpointed and left to go idle, so no row pays for the flush of what the
one before it wrote. With --runs N the whole set runs N times (the same main cluster, fresh
re-replication clusters) and a table of every row's median closes the output. A script that
prints: no figure here is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.bench import bench_http  # noqa: E402  (the raw-socket load generator of the baseline)

from api.client.codec import LedgerCodec  # noqa: E402
from api.client.distribution import write_set  # noqa: E402
from api.client.ensemble import BookKeeper, EnsembleWriter  # noqa: E402
from api.client.ensemble_queue import BATCH_ENTRIES_MAX, BATCHES_IN_FLIGHT_MAX  # noqa: E402
from api.client.fragments import referenced_bookies  # noqa: E402
from api.client.metadata import LedgerMetadata  # noqa: E402
from api.cluster.autorecovery.throttle import Throttle  # noqa: E402
from api.cluster.autorecovery.worker import ReplicationWorker  # noqa: E402
from api.cluster.local_zookeeper import ZooKeeperServer, free_port  # noqa: E402
from api.cluster.underreplication import Underreplication  # noqa: E402
from tests.support.servers import Daemon  # noqa: E402

MiB = 1 << 20
PASSWORD = b"bench"
# The same 1 KiB framed entry as the baseline's, so entries/s compare one to one.
PAYLOAD = b"c" * len(bench_http.PAYLOAD)
FLAGS = ("--journal-prealloc-bytes", "16MiB")
# Re-replication clusters: the copy must be this process's worker alone, not the auditor
# and worker every cluster bookie runs by default.
RR_FLAGS = (*FLAGS, "--autorecovery-daemon-enabled", "false")
BOOKIE_CPU, CLIENT_CPU = 0, 1
# Raw ledger ids far above any id ZooKeeper's sequence hands the clients' ledgers.
BASELINE_LEDGER = 10**9
RAW_CONNECTIONS = 2 * BATCHES_IN_FLIGHT_MAX  # the raw baseline's connections
MANY_CHUNK, MANY_CALLS = 256, 4  # append_many: 256 payloads a call, 4 calls in flight
FOREGROUND_IN_FLIGHT, FOREGROUND_WARM_S, FOREGROUND_ALONE_S = 8, 0.5, 3.0
RECOVERY_IN_FLIGHT = 1000
DIRECT_BATCH = 256  # entries per add_batch when writing past the LAC by hand
REREP_LEDGERS = 8
REREP_TIMEOUT_S = 900.0
WARM_UP_ENTRIES = 2000
CONNECT_SETTLE_S = 1.0
# Idle: the bookies together below this share of one core over IDLE_WINDOW_S.
IDLE_SHARE, IDLE_WINDOW_S, IDLE_WAIT_MAX_S = 0.1, 0.5, 30.0


# -- processes ------------------------------------------------------------------------------


def pin(pid: int, cpus: str) -> None:
    """Every thread the process has now; threads it starts later inherit their creator's."""
    subprocess.run(["taskset", "-a", "-cp", cpus, str(pid)], check=True,
                   stdout=subprocess.DEVNULL)


def bookie_id(daemon: Daemon) -> str:
    return daemon.url.rsplit("/", 1)[-1]  # a bookie id is the host:port it serves on


def start_bookies(root: str, uri: str, count: int, flags=FLAGS) -> list[Daemon]:
    bookies = []
    try:
        for i in range(count):
            daemon = Daemon(os.path.join(root, f"b{i}", "data"), *flags,
                            "--metadata-service-uri", uri, "--port", str(free_port())).start()
            bookies.append(daemon)
            pin(daemon.proc.pid, str(BOOKIE_CPU))
    except BaseException:
        stop_bookies(bookies)
        raise
    return bookies


def stop_bookies(bookies: list[Daemon]) -> None:
    for daemon in bookies:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.terminate()


def alive(bookies: list[Daemon]) -> list[Daemon]:
    return [d for d in bookies if d.proc is not None and d.proc.poll() is None]


async def quiet(bk: BookKeeper, bookies: list[Daemon]) -> None:
    """Before a row: every bookie checkpointed (its write cache flushed) and then idle, so
    the flush of what the previous row wrote (the raw baseline writes ~300 MiB) is not
    charged to the next row. A checkpoint the row's own data triggers still counts: that
    is the bookie's cost of those entries."""
    running = alive(bookies)
    await asyncio.gather(*(bk.client(bookie_id(d)).checkpoint() for d in running))
    pids = [d.proc.pid for d in running]
    deadline = time.monotonic() + IDLE_WAIT_MAX_S
    while time.monotonic() < deadline:
        before = sum(bench_http._cpu_seconds(pid) for pid in pids)
        await asyncio.sleep(IDLE_WINDOW_S)  # noqa: sleep-ok (sampling the bookies' CPU)
        if sum(bench_http._cpu_seconds(pid) for pid in pids) - before < \
                IDLE_SHARE * IDLE_WINDOW_S:
            return


# -- measuring ------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """The q-quantile of seconds, in ms (nan for none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else math.nan


@dataclasses.dataclass
class Stretch:
    """One measured stretch: wall time, this process's CPU (the client, all its threads)
    and the bookies' CPU (to see which side set the rate)."""

    pids: tuple[int, ...]
    wall: float = 0.0
    client: float = 0.0
    bookies: float = 0.0

    def __post_init__(self) -> None:
        self.wall, self.client = time.perf_counter(), time.process_time()
        self.bookies = sum(bench_http._cpu_seconds(pid) for pid in self.pids)

    def end(self, entries: int) -> dict:
        elapsed = time.perf_counter() - self.wall
        bookies = sum(bench_http._cpu_seconds(pid) for pid in self.pids) - self.bookies
        return {"rate": entries / elapsed, "seconds": elapsed,
                "client_us": (time.process_time() - self.client) * 1e6 / entries,
                "bookie_us": bookies * 1e6 / entries if self.pids else math.nan}


class Table:
    """Rows printed as they are measured, kept per run for the medians at the end."""

    WIDTH = 46

    def __init__(self) -> None:
        self.rows: dict[str, tuple[str, list[dict]]] = {}

    def add(self, label: str, fmt: str, **values) -> dict:
        self.rows.setdefault(label, (fmt, []))[1].append(values)
        print(f"  {label:<{self.WIDTH}} {fmt.format(**values)}", flush=True)
        return values

    def summary(self, runs: int) -> None:
        print(f"\nmedian of {runs} run(s):", flush=True)
        for label, (fmt, samples) in self.rows.items():
            median = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
            print(f"  {label:<{self.WIDTH}} {fmt.format(**median)}", flush=True)


RATE = ("{rate:>9,.0f} entries/s  client {client_us:6.1f} us/entry  "
        "bookies {bookie_us:6.1f} us/entry")


# -- writing --------------------------------------------------------------------------------


async def writer_on(bk: BookKeeper, members: tuple[str, ...], quorums, password: bytes
                    ) -> EnsembleWriter:
    """A writer whose ensemble is chosen here, not at random by ``create_ledger``."""
    size, write_quorum, ack_quorum = quorums
    metadata = await bk.store.create(LedgerMetadata(
        ledger_id=None, ensemble_size=size, write_quorum=write_quorum, ack_quorum=ack_quorum,
        password=password, ensembles=((0, tuple(members)),)))
    return EnsembleWriter(bk, metadata, LedgerCodec.for_password(
        metadata.ledger_id, password, metadata.digest_type))


async def by_tasks(writer: EnsembleWriter, count: int, in_flight: int,
                   payload: bytes = PAYLOAD) -> None:
    """Today's style: each ``append()`` a task, ``in_flight`` of them outstanding."""
    gate = asyncio.Semaphore(in_flight)

    async def one() -> None:
        try:
            await writer.append(payload)
        finally:
            gate.release()
    tasks = []
    for _ in range(count):
        await gate.acquire()
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)


async def by_futures(writer: EnsembleWriter, count: int, in_flight: int,
                     payload: bytes = PAYLOAD) -> None:
    """``append_async`` futures, a window of ``in_flight``: the oldest is awaited when full
    (completions come in entry order, so the oldest is the first to finish)."""
    window: collections.deque = collections.deque()
    for _ in range(count):
        if len(window) >= in_flight:
            await window.popleft()
        window.append(await writer.append_async(payload))
    await asyncio.gather(*window)


async def by_many(writer: EnsembleWriter, count: int, _in_flight: int = 0,
                  payload: bytes = PAYLOAD) -> None:
    """``append_many`` of MANY_CHUNK payloads, MANY_CALLS calls in flight."""
    chunk = [payload] * MANY_CHUNK
    running: collections.deque = collections.deque()
    for start in range(0, count, MANY_CHUNK):
        if len(running) >= MANY_CALLS:
            await running.popleft()
        running.append(asyncio.ensure_future(writer.append_many(
            chunk[:min(MANY_CHUNK, count - start)])))
    await asyncio.gather(*running)


STYLES = {"append() tasks": by_tasks, "append_async window": by_futures,
          "append_many 256 x4": by_many}


async def filled(bk: BookKeeper, quorums, count: int, close: bool) -> EnsembleWriter:
    writer = await bk.create_ledger(*quorums, password=PASSWORD)
    await by_many(writer, count)
    if close:
        await writer.close()
    return writer


# -- rows: the raw bookie and appends --------------------------------------------------------


async def raw_baseline(table: Table, daemon: Daemon, args, run: int) -> float:
    """What the bookie takes, as raw HTTP: RAW_CONNECTIONS connections (twice the writer's
    batches in flight per bookie), each one POST of BATCH_ENTRIES_MAX entries at a time."""
    measured = await bench_http.measure(
        daemon.url, daemon.proc.pid, RAW_CONNECTIONS, BATCH_ENTRIES_MAX,
        args.baseline_seconds, BASELINE_LEDGER + run * 100_000)
    table.add(f"raw bookie, {RAW_CONNECTIONS} x POST of {BATCH_ENTRIES_MAX}",
              RATE + "  p99 {p99_ms:.2f} ms/batch",
              rate=measured["rate"], client_us=measured["load_us"] / BATCH_ENTRIES_MAX,
              bookie_us=measured["server_us"] / BATCH_ENTRIES_MAX, p99_ms=measured["p99_ms"])
    return measured["rate"]


async def task_floor(table: Table, count: int, in_flight: int) -> None:
    """The ``append() tasks`` style's own cost with no writer and no I/O: a task per append,
    a semaphore for the window, a future each, completed in turns of the loop. No library
    can take a row of that style below it."""
    loop = asyncio.get_running_loop()
    gate, waiting = asyncio.Semaphore(in_flight), []

    async def one() -> None:
        try:
            future = loop.create_future()
            waiting.append(future)
            await future
        finally:
            gate.release()

    async def complete() -> None:
        while True:
            await asyncio.sleep(0)  # noqa: sleep-ok (a turn of the loop, as a reply's)
            done, waiting[:] = list(waiting), []
            for future in done:
                future.set_result(None)
    completer = asyncio.ensure_future(complete())
    began_cpu, began = time.process_time(), time.perf_counter()
    tasks = []
    for _ in range(count):
        await gate.acquire()
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)
    cpu, elapsed = time.process_time() - began_cpu, time.perf_counter() - began
    completer.cancel()
    table.add("asyncio floor of append() tasks, no I/O", RATE,
              rate=count / elapsed, client_us=cpu * 1e6 / count, bookie_us=float("nan"))


async def append_row(table: Table, bk: BookKeeper, pids, quorums, style: str, args,
                     one_bookie: str, reference: float, against: str) -> float:
    if quorums == (1, 1, 1):
        writer = await writer_on(bk, (one_bookie,), quorums, PASSWORD)
    else:
        writer = await bk.create_ledger(*quorums, password=PASSWORD)
    stretch = Stretch(pids)
    await STYLES[style](writer, args.entries, args.in_flight)
    values = stretch.end(args.entries)
    await writer.close()
    table.add("%d/%d/%d %s" % (*quorums, style), RATE + "  {ratio:.2f}x " + against,
              ratio=values["rate"] / reference, **_rate(values))
    return values["rate"]


def _rate(values: dict) -> dict:
    return {key: values[key] for key in ("rate", "client_us", "bookie_us")}


async def appends(table: Table, bk: BookKeeper, bookies: list[Daemon], args,
                  raw: float) -> None:
    pids, one_bookie = [d.proc.pid for d in bookies], bookie_id(bookies[0])
    for style in STYLES:
        await quiet(bk, bookies)
        single = await append_row(table, bk, pids, (1, 1, 1), style, args, one_bookie, raw,
                                  "raw")
        for quorums in ((3, 2, 2), (3, 3, 2)):
            await quiet(bk, bookies)
            # Every bookie shares one core: Qw copies of each entry cost Qw times the
            # bookie CPU of 1/1/1, so ~1/Qw of its rate is all a bookie-bound run can get.
            await append_row(table, bk, pids, quorums, style, args, one_bookie, single,
                             f"1/1/1 (1/Qw = {1 / quorums[1]:.2f})")


async def warm_up(bk: BookKeeper, bookies: list[Daemon]) -> None:
    """This client's connections to every bookie opened, and the code paths run once,
    before the first row counts."""
    size = len(bookies)
    writer = await bk.create_ledger(size, size, size, password=PASSWORD)
    await by_many(writer, WARM_UP_ENTRIES)
    await writer.close()


async def latency(table: Table, bk: BookKeeper, pids, count: int) -> None:
    writer = await bk.create_ledger(3, 2, 2, password=PASSWORD)
    samples = []
    stretch = Stretch(pids)
    for _ in range(count):
        began = time.perf_counter()
        await writer.append(PAYLOAD)
        samples.append(time.perf_counter() - began)
    values = stretch.end(count)
    await writer.close()
    table.add("3/2/2 append(), 1 in flight",
              "p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  client {client_us:6.1f} us/entry",
              p50=pct(samples, 0.5), p99=pct(samples, 0.99), client_us=values["client_us"])


# -- rows: reading ----------------------------------------------------------------------------


async def full_read(table: Table, bk: BookKeeper, pids, count: int, hush) -> None:
    writer = await filled(bk, (3, 2, 2), count, close=True)
    await hush()
    stretch = Stretch(pids)
    reader = await bk.open_ledger(writer.ledger_id, PASSWORD, recover=False)
    seen = 0
    async for _ in reader.read_range(0, reader.metadata.last_entry_id):
        seen += 1
    values = stretch.end(seen)
    table.add("3/2/2 read_range of a closed ledger", RATE + "  ({mib:.1f} MiB/s)",
              mib=values["rate"] * len(PAYLOAD) / MiB, **_rate(values))


async def tail_catch_up(table: Table, bk: BookKeeper, uri: str, pids, count: int,
                        hush) -> None:
    writer = await filled(bk, (3, 2, 2), count, close=False)
    # The LAC travels piggybacked on the next add and this writer sends no explicit LAC:
    # one more append tells the bookies that the first ``count`` are confirmed, else a
    # tail stops short of the last ones written (they are above every LAC it can see).
    await writer.append(PAYLOAD)
    await hush()
    async with await BookKeeper.connect(uri) as other:
        # The second client's session set-up runs on in kazoo's threads for a while after
        # connect returns; it is not the catch-up (this process's CPU counts every thread).
        await asyncio.sleep(CONNECT_SETTLE_S)  # noqa: sleep-ok (not a measured part)
        stretch = Stretch(pids)
        reader = await other.open_ledger(writer.ledger_id, PASSWORD, recover=False)
        seen = await _tail(reader, count)
        values = stretch.end(seen)
    await writer.close()
    table.add("3/2/2 tail(0) catch-up, writer open", RATE, **_rate(values))


async def _tail(reader, count: int) -> int:
    entries = reader.tail(0)
    seen = 0
    try:
        async for entry in entries:
            if entry.entry_id != seen:
                raise SystemExit(f"tail gave entry {entry.entry_id}, expected {seen}")
            seen += 1
            if seen == count:
                break
    finally:
        await entries.aclose()  # its held reads and LAC polls end here, not at GC
    return seen


# -- rows: recovery ---------------------------------------------------------------------------


async def recovery_in_flight(table: Table, bk: BookKeeper, uri: str) -> None:
    writer = await bk.create_ledger(3, 2, 2, password=PASSWORD)
    for _ in range(100):
        await writer.append(PAYLOAD)
    pending = [asyncio.ensure_future(writer.append(PAYLOAD)) for _ in range(RECOVERY_IN_FLIGHT)]
    while writer.lac < 400:  # mid-stream: some acked, some on fewer than Qa, some unsent
        await asyncio.sleep(0.001)  # noqa: sleep-ok (a benchmark's poll)
    for task in [*pending, *writer._tasks]:  # the writer dies, its sends with it
        task.cancel()
    told = writer.lac
    async with await BookKeeper.connect(uri) as other:
        started = time.perf_counter()  # open_ledger alone, not the new session's set-up
        reader = await other.open_ledger(writer.ledger_id, PASSWORD)
        seconds = time.perf_counter() - started
    table.add(f"recovery, writer died, {RECOVERY_IN_FLIGHT} in flight",
              "{ms:7.0f} ms  writer's LAC {lac:.0f}, closed at entry {end:.0f}",
              ms=seconds * 1000, lac=told,
              end=reader.metadata.last_entry_id)


async def recovery_beyond_lac(table: Table, bk: BookKeeper, uri: str, count: int,
                              hush) -> None:
    """Entries the bookies hold but no LAC confirms: recovery must read and write back
    every one of them before it can close."""
    writer = await bk.create_ledger(3, 2, 2, password=PASSWORD)
    await write_unconfirmed(bk, writer, count)
    await hush()
    async with await BookKeeper.connect(uri) as other:
        started = time.perf_counter()
        reader = await other.open_ledger(writer.ledger_id, PASSWORD)
        seconds = time.perf_counter() - started
    table.add(f"recovery, {count} entries beyond the LAC",
              "{ms:7.0f} ms  closed at entry {end:.0f} (expected {want:.0f})",
              ms=seconds * 1000, end=reader.metadata.last_entry_id,
              want=count - 1)


async def write_unconfirmed(bk: BookKeeper, writer: EnsembleWriter, count: int) -> None:
    """Each entry straight to its write set's bookies, piggybacked LAC -1: the writer's
    bytes, as if it died before any acknowledgement reached a bookie."""
    codec, members = writer.codec, writer.ensemble
    size, quorum = writer.metadata.ensemble_size, writer.metadata.write_quorum
    frames: dict[int, list[bytes]] = {index: [] for index in range(size)}
    length = 0
    for entry_id in range(count):
        length += len(PAYLOAD)
        framed = codec.frame(entry_id, -1, length, PAYLOAD)
        for index in write_set(entry_id, size, quorum):
            frames[index].append(framed)

    async def send(index: int) -> None:
        client = bk.client(members[index])
        for at in range(0, len(frames[index]), DIRECT_BATCH):
            await client.add_batch(writer.ledger_id, frames[index][at:at + DIRECT_BATCH],
                                   codec.master_key, codec.digest_type.header_name)
    await asyncio.gather(*(send(index) for index in frames))


# -- rows: re-replication ---------------------------------------------------------------------


class Foreground:
    """1 KiB appends, FOREGROUND_IN_FLIGHT in flight, to a 3/2/2 ledger on given bookies;
    each latency kept with the time it ended."""

    def __init__(self, bk: BookKeeper, ensemble: tuple[str, ...]) -> None:
        self.bk, self.ensemble = bk, ensemble
        self.samples: list[tuple[float, float]] = []
        self.stop = asyncio.Event()

    async def run(self) -> None:
        writer = await writer_on(self.bk, self.ensemble, (3, 2, 2), b"foreground")

        async def lane() -> None:
            while not self.stop.is_set():
                began = time.perf_counter()
                await writer.append(PAYLOAD)
                now = time.perf_counter()
                self.samples.append((now, now - began))
        await asyncio.gather(*(lane() for _ in range(FOREGROUND_IN_FLIGHT)))
        await writer.close()

    def p99(self, start: float, end: float) -> float:
        return pct([s for at, s in self.samples if start <= at <= end], 0.99)


async def write_closed(bk: BookKeeper, size: int, total: int) -> list[int]:
    """Closed 3/2/2 ledgers of ``size``-byte entries holding ``total`` bytes in all."""
    payload = os.urandom(size)
    per_ledger = max(1, total // size // REREP_LEDGERS)
    ids = []
    for _ in range(max(1, total // (per_ledger * size))):
        writer = await bk.create_ledger(3, 2, 2, password=PASSWORD)
        await by_many(writer, per_ledger, payload=payload)
        await writer.close()
        ids.append(writer.ledger_id)
    return ids


async def most_named(bk: BookKeeper, ids: list[int]) -> tuple[str, list[int]]:
    """The bookie the most ledgers name, and those ledgers."""
    naming: dict[str, list[int]] = collections.defaultdict(list)
    for ledger_id in ids:
        for member in referenced_bookies(await bk.store.read(ledger_id)):
            naming[member].append(ledger_id)
    victim = max(naming, key=lambda b: len(naming[b]))
    return victim, naming[victim]


async def copy_until_done(worker: ReplicationWorker, ur: Underreplication
                          ) -> tuple[float, float]:
    """``run_once`` until it finds nothing and no marker is left: (start, end)."""
    began = time.perf_counter()
    deadline = began + REREP_TIMEOUT_S
    while True:
        if not await worker.run_once():
            if not await asyncio.to_thread(ur.marked):
                break
            await asyncio.sleep(0.05)  # noqa: sleep-ok (a failed ledger's back-off)
        if time.perf_counter() > deadline:
            raise SystemExit(f"re-replication not done after {REREP_TIMEOUT_S:.0f} s "
                             f"(stats {worker.stats})")
    return began, time.perf_counter()


async def rereplication(table: Table, zookeeper: ZooKeeperServer, root: str, tag: str,
                        size: int, limit_mib: float, args) -> None:
    uri = f"zk://{zookeeper.hosts}/{tag}/ledgers"
    bookies = start_bookies(os.path.join(root, tag), uri, 4, RR_FLAGS)
    try:
        async with await BookKeeper.connect(uri) as bk:
            await _rereplicate(table, bk, bookies, size, limit_mib, args)
    finally:
        stop_bookies(bookies)
        shutil.rmtree(os.path.join(root, tag), ignore_errors=True)


async def _rereplicate(table: Table, bk: BookKeeper, bookies: list[Daemon], size: int,
                       limit_mib: float, args) -> None:
    ids = await write_closed(bk, size, args.rerep_mib * MiB)
    victim, marked = await most_named(bk, ids)
    by_id = {bookie_id(d): d for d in bookies}
    by_id[victim].kill9()
    await quiet(bk, bookies)
    survivors = tuple(b for b in by_id if b != victim)
    foreground = Foreground(bk, survivors)
    load = asyncio.create_task(foreground.run())
    await asyncio.sleep(FOREGROUND_WARM_S)  # noqa: sleep-ok (its connections, not counted)
    alone_from = time.perf_counter()
    await asyncio.sleep(FOREGROUND_ALONE_S)  # noqa: sleep-ok (the foreground alone)
    ur = Underreplication(bk.store.client, bk.store.root, "bench-cluster")
    await asyncio.to_thread(ur.ensure)
    for ledger_id in marked:
        await asyncio.to_thread(ur.mark, ledger_id, [victim])
    # Grace 0: every marked ledger is closed, the grace (RW7) is for open ones only.
    worker = ReplicationWorker(bk, ur, 0, Throttle(int(limit_mib * MiB)), asyncio.Event())
    stretch = Stretch(tuple(by_id[b].proc.pid for b in survivors))
    began, done = await copy_until_done(worker, ur)
    cpu = stretch.end(1)  # per "entry" = the whole copy: seconds of CPU, in us
    foreground.stop.set()
    await load
    copied = worker.stats.bytes_copied
    # The copy's outcome, not only its speed: no ledger may name the lost bookie now.
    left = [i for i in marked if victim in referenced_bookies(await bk.store.read(i))]
    values = {"mib_s": copied / MiB / (done - began), "mib": copied / MiB, "s": done - began,
              "ledgers": len(marked), "left": len(left),
              "p99_alone": foreground.p99(alone_from, began),
              "p99_during": foreground.p99(began, done),
              # CPU busy over the copy, in cores: which side set the rate (the foreground
              # writer's share is in both: it runs meanwhile).
              "client_cores": cpu["client_us"] / 1e6 / cpu["seconds"],
              "bookie_cores": cpu["bookie_us"] / 1e6 / cpu["seconds"]}
    fmt = ("{mib_s:7.1f} MiB/s  ({mib:.1f} MiB of {ledgers:.0f} ledgers in {s:.2f} s, "
           "{left:.0f} still name the lost bookie)  foreground add p99 {p99_alone:.2f} ms "
           "alone, {p99_during:.2f} ms during; CPU busy: client {client_cores:.2f}, "
           "bookies {bookie_cores:.2f} cores")
    label = f"re-replication, {size // 1024} KiB entries"
    if limit_mib:
        # The bucket starts empty (throttle.py): the whole copy's rate is at most the limit.
        label += f", limit {limit_mib:g} MiB/s"
    table.add(label, fmt, **values)


# -- the run ----------------------------------------------------------------------------------


#: Row groups --rows can name, in the order a run takes them.
ROW_GROUPS = ("raw", "floor", "appends", "latency", "read", "tail", "recovery", "rerep")


async def one_run(table: Table, zookeeper: ZooKeeperServer, uri: str, bookies, root: str,
                  args, run: int) -> None:
    pids = tuple(d.proc.pid for d in bookies)
    rows = args.rows
    async with await BookKeeper.connect(uri) as bk:
        def hush():  # between a row's set-up (writes) and its measured part
            return quiet(bk, bookies)
        await warm_up(bk, bookies)
        await hush()
        raw = None
        if "raw" in rows or "appends" in rows:  # the appends' ratios need it
            raw = await raw_baseline(table, bookies[0], args, run)
        if "floor" in rows:
            await task_floor(table, args.entries, args.in_flight)
        if "appends" in rows:
            await appends(table, bk, bookies, args, raw)
            await hush()
        if "latency" in rows:
            await latency(table, bk, pids, args.latency_appends)
        if "read" in rows:
            await full_read(table, bk, pids, args.entries, hush)
        if "tail" in rows:
            await tail_catch_up(table, bk, uri, pids, args.entries, hush)
        if "recovery" in rows:
            await hush()
            await recovery_in_flight(table, bk, uri)
            await recovery_beyond_lac(table, bk, uri, args.beyond_lac, hush)
    if "rerep" not in rows:
        return
    for size, limit in ((1024, 0), (64 * 1024, 0), (1024, args.rerep_limit_mib)):
        if size in args.rerep_kib:
            await rereplication(table, zookeeper, root, f"rr{run}-{size}-{limit:g}", size,
                                limit, args)


def header(args, bookies: list[Daemon], zookeeper: ZooKeeperServer) -> None:
    pids = ", ".join(str(d.proc.pid) for d in bookies)
    print(f"bookies (pids {pids}): every thread on cpu {BOOKIE_CPU} (taskset -a); this "
          f"process (pid {os.getpid()}, the client and the load generator) on cpu "
          f"{sorted(os.sched_getaffinity(0))}; ZooKeeper (pid {zookeeper.proc.pid}) on cpus "
          f"{sorted(os.sched_getaffinity(zookeeper.proc.pid))}", flush=True)
    print(f"entries {args.entries} x {len(PAYLOAD) + 36} B framed, in flight "
          f"{args.in_flight}, runs {args.runs}, event loop asyncio, python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cpus", flush=True)


async def main_async(args, root: str, zookeeper: ZooKeeperServer) -> None:
    uri = f"zk://{zookeeper.hosts}/ledgers"
    bookies = start_bookies(os.path.join(root, "main"), uri, 4)
    try:
        header(args, bookies, zookeeper)
        table = Table()
        for run in range(args.runs):
            print(f"run {run + 1}/{args.runs}", flush=True)
            await one_run(table, zookeeper, uri, bookies, root, args, run)
        table.summary(args.runs)
    finally:
        stop_bookies(bookies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="repeat the set; medians at the end")
    parser.add_argument("--entries", type=int, default=20000)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--baseline-seconds", type=float, default=2.0)
    parser.add_argument("--latency-appends", type=int, default=2000)
    parser.add_argument("--beyond-lac", type=int, default=20000)
    parser.add_argument("--rerep-mib", type=int, default=192)
    parser.add_argument("--rerep-limit-mib", type=float, default=16.0)
    parser.add_argument("--rows", default=",".join(ROW_GROUPS),
                        help=f"the row groups to run, comma-separated, of "
                             f"{','.join(ROW_GROUPS)} (default: all; appends also run raw)")
    parser.add_argument("--rerep-kib", default="1,64",
                        help="entry sizes of the re-replication rows, KiB (default 1,64)")
    args = parser.parse_args()
    args.rows = set(args.rows.split(","))
    unknown = args.rows - set(ROW_GROUPS)
    if unknown:
        parser.error(f"--rows: unknown {','.join(sorted(unknown))}; rows are "
                     f"{','.join(ROW_GROUPS)}")
    args.rerep_kib = {int(kib) * 1024 for kib in args.rerep_kib.split(",")}
    root = tempfile.mkdtemp(prefix="bench-cluster-")
    # ZooKeeper first, so it does not inherit this process's pin; then the pin, before any
    # thread or daemon starts (they inherit it; the daemons are moved to their own core).
    zookeeper = ZooKeeperServer(os.path.join(root, "zk")).start()
    try:
        os.sched_setaffinity(0, {CLIENT_CPU})
        asyncio.run(main_async(args, root, zookeeper))
    finally:
        zookeeper.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
