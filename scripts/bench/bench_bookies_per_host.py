#!/usr/bin/env python3
"""Several bookies on one host as a way to use a machine (docs/operations.md §5.9): 1, 2 and 4
bookie daemons on the cores left after the client, against the same offered load.

    .venv/bin/python scripts/bench/bench_bookies_per_host.py [--counts 1,2,4] [--seconds 15]
        [--runs 3] [--outstanding 2000] [--ledgers 24] [--bookie-cores 0] [--client-core 1]

Per point: N bookie daemons (``bookie serve`` with ``bookie_port``, each its own process,
data dir and journal on this machine's disk under /var/tmp), all pinned to
``--bookie-cores``; one client process pinned to ``--client-core`` pipelining v3 adds of 1 KiB
entries over ``--ledgers`` ledgers, ledger L on bookie L mod N (E=Qw=Qa=1: the bookies'
capacity, not a quorum's), ``--outstanding`` in flight in all, over BookKeeper's v2 protocol
(its packed frames cost the client ~1.3 us each against ~6 us for v3's protobuf, so one
client core outruns the bookies). Each point also prints how busy the bookies' cores and
the client's core were (/proc/stat): a bookie core near 100% is the limit. Prints adds/s and p50/p99 add
latency, medians over ``--runs`` interleaved runs, each count beside N=1 measured in the same
run. A bookie is a Python process: one core's worth of its work runs at a time (the GIL),
so the figures say what N processes get from the cores they are given.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tests.support.zookeeper import free_port  # noqa: E402

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_RESPONSE = struct.Struct(">Iiqq")  # v2: header, rc, ledgerId, entryId
SEND_AHEAD = 4 << 20  # bytes of frames a connection may have unsent
WARMUP_S = 3.0


def cpu_times() -> dict[str, tuple[int, int]]:
    """(busy, total) jiffies of each cpu<N> from /proc/stat."""
    found = {}
    with open("/proc/stat") as stat:
        for line in stat:
            name, *values = line.split()
            if name.startswith("cpu") and name != "cpu":
                numbers = [int(v) for v in values[:8]]
                idle = numbers[3] + numbers[4]  # idle + iowait
                found[name[3:]] = (sum(numbers) - idle, sum(numbers))
    return found


def busy(before, after, cores: str) -> float:
    """Busy fraction of ``cores`` (a taskset list, "0" or "0,2") between two samples."""
    spent = total = 0
    for core in cores.split(","):
        spent += after[core][0] - before[core][0]
        total += after[core][1] - before[core][1]
    return spent / total if total else 0.0


def client(ports: list[int], seconds: float, outstanding: int, ledgers: int,
           bookie_cores: str, entry_size: int = 1024, connections: int = 1) -> None:
    """v2 adds (BookKeeper's packed protocol: the cheapest frames to build, so the client's
    one core outruns the bookies') as fast as answers come, ledger L to bookie L mod N,
    over ``connections`` connections a bookie; prints the EOK adds after the warm-up, the
    seconds measured, p50 and p99 (ms), the answers not EOK, and this client's core and the
    bookies' cores busy fractions over the measured window.

    It never blocks on a send: a bookie that stops reading (back-pressure, issue 57) must
    not stop this client reading its answers, as a Netty client does not. Frames are built
    only while a connection has less than SEND_AHEAD bytes not yet taken by its socket. A
    connection the bookie closes is dropped, its adds in flight counted as not EOK."""
    raw = _RawAdds(ports, connections, ledgers, entry_size)
    started = time.monotonic()
    deadline, raw.measured_from = started + seconds, started + WARMUP_S
    cpu_from = None
    while (now := time.monotonic()) < deadline and len(raw.dead) < len(raw.socks):
        if cpu_from is None and now >= raw.measured_from:
            cpu_from = cpu_times()
        raw.fill(outstanding)
        raw.pump()
    cpu_to = cpu_times()
    refused = raw.refused + raw.lost()
    latencies = sorted(raw.latencies)
    p50, p99 = ((latencies[int(len(latencies) * q)] * 1000 if latencies else float("nan"))
                for q in (0.5, 0.99))
    mine = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    print(len(latencies), time.monotonic() - raw.measured_from, p50, p99, refused,
          busy(cpu_from or cpu_to, cpu_to, mine), busy(cpu_from or cpu_to, cpu_to, bookie_cores),
          flush=True)


class _RawAdds:
    """The raw client's connections, adds in flight and answers (``client``)."""

    def __init__(self, ports: list[int], connections: int, ledgers: int,
                 entry_size: int) -> None:
        from api.bkproto import v2
        from bookie.entry import DigestType, frame_entry, master_key

        self.socks = []
        for port in ports:
            for _ in range(connections):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setblocking(False)
                self.socks.append(sock)
        self.body, self.key = b"x" * entry_size, master_key(b"bench")
        self.header = _U32.pack(v2.pack_header(v2.CURRENT_PROTOCOL_VERSION, v2.ADDENTRY))
        self.frame_entry, self.crc32c = frame_entry, DigestType.CRC32C
        self.answer_min = 4 + v2.RESPONSE_HEADERS_SIZE
        self.ledgers, self.next_entry = ledgers, [0] * ledgers
        self.sent_at: dict = {}
        self.latencies: list[float] = []
        self.buffers = {sock: b"" for sock in self.socks}
        self.pending = {sock: bytearray() for sock in self.socks}
        self.dead: set = set()  # connections the bookie closed
        self.sent = self.refused = 0
        self.measured_from = 0.0

    def fill(self, outstanding: int) -> None:
        """Build frames up to ``outstanding`` adds in flight, SEND_AHEAD a connection."""
        while len(self.sent_at) < outstanding and len(self.dead) < len(self.socks):
            ledger = self.sent % self.ledgers
            sock = self.socks[ledger % len(self.socks)]
            if sock in self.dead:
                self.sent += 1  # its ledgers are written no more
                continue
            if len(self.pending[sock]) >= SEND_AHEAD:
                return
            entry_id = self.next_entry[ledger]
            entry = self.frame_entry(ledger + 1, entry_id, entry_id - 1, 0, self.body,
                                     self.crc32c)
            self.pending[sock] += _I32.pack(len(self.header) + len(self.key) + len(entry)) \
                + self.header + self.key
            self.pending[sock] += entry
            self.next_entry[ledger] += 1
            self.sent_at[(ledger + 1, entry_id)] = time.monotonic()
            self.sent += 1

    def pump(self) -> None:
        """Send what the sockets take, read the answers that came (1 ms at most)."""
        live = [sock for sock in self.socks if sock not in self.dead]
        readable, writable, _ = select.select(
            live, [sock for sock in live if self.pending[sock]], [], 0.001)
        for sock in writable:
            try:
                taken = sock.send(self.pending[sock])
            except BlockingIOError:
                continue
            except OSError:  # the bookie closed it: its adds in flight are lost
                self.dead.add(sock)
                continue
            del self.pending[sock][:taken]
        for sock in readable:
            try:
                received = sock.recv(1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                received = b""
            if not received:
                self.dead.add(sock)
                continue
            self._answers(sock, self.buffers[sock] + received)

    def _answers(self, sock, buffer: bytes) -> None:
        at, now = 0, time.monotonic()
        while len(buffer) - at >= self.answer_min:
            _, rc, ledger_id, entry_id = _RESPONSE.unpack_from(buffer, at + 4)
            at += 4 + _I32.unpack_from(buffer, at)[0]
            sent_time = self.sent_at.pop((ledger_id, entry_id))
            if rc != 0:
                self.refused += 1
            elif sent_time >= self.measured_from:
                self.latencies.append(now - sent_time)
        self.buffers[sock] = buffer[at:]

    def lost(self) -> int:
        """Adds in flight on connections the bookie closed (said on stderr)."""
        if self.dead:
            print(f"{len(self.dead)} of {len(self.socks)} connections closed by the bookie",
                  file=sys.stderr)
        return sum(1 for ledger_id, _ in self.sent_at
                   if self.socks[(ledger_id - 1) % len(self.socks)] in self.dead)


def _start(count: int, base: str, cores: str) -> list[tuple[subprocess.Popen, int]]:
    bookies = []
    for i in range(count):
        port, rpc = free_port(), free_port()
        home = os.path.join(base, f"bookie-{i}")
        os.makedirs(home)
        proc = subprocess.Popen(
            ["taskset", "-c", cores, sys.executable, "-m", "bookie", "serve", "--data-dir",
             os.path.join(home, "data"), "--port", str(port), "--bookie-port", str(rpc),
             "--journal-queue-max-bytes", "256MiB", "--gc-interval-ms", "0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=open(os.path.join(home, "log"), "wb"),
            text=True)
        bookies.append((proc, rpc))
    for proc, _ in bookies:  # ready: its second line names the bookie_port
        for _ in range(2):
            if not proc.stdout.readline():
                raise RuntimeError(f"a bookie exited; see its log under {base}")
    return bookies


def measure(count: int, args, run: int) -> dict:
    base = tempfile.mkdtemp(prefix=f"bookies-{count}-{run}-", dir="/var/tmp")
    bookies = _start(count, base, args.bookie_cores)
    try:
        out = subprocess.run(
            ["taskset", "-c", args.client_core, sys.executable, os.path.abspath(__file__),
             "--client", ",".join(str(rpc) for _, rpc in bookies), "--seconds",
             str(args.seconds + WARMUP_S), "--outstanding", str(args.outstanding),
             "--ledgers", str(args.ledgers), "--bookie-cores", args.bookie_cores],
            capture_output=True, text=True, check=True)
    finally:
        for proc, _ in bookies:
            proc.terminate()
        for proc, _ in bookies:
            proc.wait(timeout=120)
        shutil.rmtree(base, ignore_errors=True)
    answered, elapsed, p50, p99, refused, client_busy, bookies_busy = out.stdout.split()[-7:]
    if int(refused):
        raise RuntimeError(f"{count} bookies: {refused} adds not answered EOK")
    return {"rate": int(answered) / float(elapsed), "p50": float(p50), "p99": float(p99),
            "client_busy": float(client_busy), "bookies_busy": float(bookies_busy)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="1,2,4")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--outstanding", type=int, default=2000)
    parser.add_argument("--ledgers", type=int, default=24)
    parser.add_argument("--bookie-cores", default="0")
    parser.add_argument("--client-core", default="1")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--entry-size", type=int, default=1024, help=argparse.SUPPRESS)
    parser.add_argument("--connections", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client([int(p) for p in args.client.split(",")], args.seconds, args.outstanding,
               args.ledgers, args.bookie_cores, args.entry_size, args.connections)
        return 0
    counts = [int(c) for c in args.counts.split(",")]
    print(f"bookies on cores {args.bookie_cores}, client on core {args.client_core}, "
          f"{args.outstanding} adds of 1 KiB in flight over {args.ledgers} ledgers, "
          f"{args.seconds:.0f} s windows, {args.runs} interleaved runs", flush=True)
    results: dict[int, list[dict]] = {count: [] for count in counts}
    for run in range(args.runs):
        for count in counts:
            point = measure(count, args, run)
            results[count].append(point)
            print(f"run {run} bookies={count}: {point['rate']:,.0f} adds/s, p50 "
                  f"{point['p50']:.1f} ms, p99 {point['p99']:.1f} ms; busy: bookies' cores "
                  f"{point['bookies_busy']:.0%}, client's {point['client_busy']:.0%}",
                  flush=True)
    one = statistics.median(p["rate"] for p in results[counts[0]])
    for count in counts:
        rates = [p["rate"] for p in results[count]]
        rate = statistics.median(rates)
        print(f"bookies={count} median of {args.runs}: {rate:,.0f} adds/s "
              f"({min(rates):,.0f}-{max(rates):,.0f}) = {rate / one:.2f}x of {counts[0]}, "
              f"p50 {statistics.median(p['p50'] for p in results[count]):.1f} ms, p99 "
              f"{statistics.median(p['p99'] for p in results[count]):.1f} ms, bookies' cores "
              f"{statistics.median(p['bookies_busy'] for p in results[count]):.0%} busy, "
              f"client's {statistics.median(p['client_busy'] for p in results[count]):.0%}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
