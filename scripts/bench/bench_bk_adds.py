"""The add path's cost on bookie_port, in-process (docs/operations.md §3's per-operation
metrics are measured with it): one bookie and its BookKeeper-protocol listener in this
process (pinned to core 0), a client process (core 1) pipelining v3 adds of 1 KiB entries
over real TCP on 127.0.0.1 with a bounded number outstanding. Prints adds/s and the bookie
process's CPU microseconds per add (loop and journal threads together), the number a
change to the hot path moves even when the disk's fsync bounds the rate.

    .venv/bin/python scripts/bench/bench_bk_adds.py [--seconds 10] [--outstanding 1000] [--runs 3]

Needs no Java: the client is a plain socket writing frames built with api/bkproto. The
journal lives in a temp dir (its fdatasync is the file system's), deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

_I32 = struct.Struct(">i")
LEDGER = 7


def _frames(count: int, first_txn: int) -> list[bytes]:
    from api.bkproto import v3
    from bookie.entry import DigestType, frame_entry, master_key

    key = master_key(b"bench")
    frames = []
    for entry_id in range(count):
        request = v3.Request()
        request.header.version = v3.PROTOCOL_VERSIONS["VERSION_THREE"]
        request.header.operation = v3.OPERATIONS["ADD_ENTRY"]
        request.header.txnId = first_txn + entry_id
        add = request.addRequest
        add.ledgerId, add.entryId, add.masterKey = LEDGER, entry_id, key
        add.body = frame_entry(LEDGER, entry_id, entry_id - 1, 0, b"x" * 1024,
                               DigestType.CRC32C)
        frames.append(v3.frame(request))
    return frames


def client(port: int, seconds: float, outstanding: int) -> None:
    """The client process: adds until ``seconds`` pass, then prints how many were answered."""
    frames = _frames(int(seconds * 150_000), 1)
    sock = socket.create_connection(("127.0.0.1", port))
    started = time.monotonic()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sent = answered = 0
    buffer = b""
    deadline = started + seconds
    while time.monotonic() < deadline and sent < len(frames):
        window = min(outstanding - (sent - answered), len(frames) - sent)
        if window > 0:
            sock.sendall(b"".join(frames[sent:sent + window]))
            sent += window
        buffer += sock.recv(1 << 20)
        at = 0
        while len(buffer) - at >= 4:
            length = _I32.unpack_from(buffer, at)[0]
            if len(buffer) - at - 4 < length:
                break
            at += 4 + length
            answered += 1
        buffer = buffer[at:]
    print(answered, time.monotonic() - started, flush=True)


async def serve_and_measure(seconds: float, outstanding: int) -> tuple[float, float]:
    from api.server.bk_listener import bk_serving
    from bookie.config import BookieConfig
    from tests.support.servers import running_bookie

    with tempfile.TemporaryDirectory(prefix="bench-bk-adds-") as data_dir:
        config = BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                              journal_prealloc_bytes=64 << 20)
        async with running_bookie(config) as running:
            async with bk_serving(running.bookie, "127.0.0.1", 0) as port:
                argv = ["taskset", "-c", "1", sys.executable, os.path.abspath(__file__),
                        "--client", str(port), "--seconds", str(seconds),
                        "--outstanding", str(outstanding)]
                cpu = resource.getrusage(resource.RUSAGE_SELF)
                process = await asyncio.create_subprocess_exec(
                    *argv, stdout=subprocess.PIPE)
                out, _ = await process.communicate()
                after = resource.getrusage(resource.RUSAGE_SELF)
        # The client's own clock: it builds its frames before it connects (bookie idle).
        answered, elapsed = out.decode().split()[-2:]
        adds = int(answered)
        elapsed = float(elapsed)
        cpu_s = (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)
        return adds / elapsed, cpu_s / adds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--outstanding", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args.client, args.seconds, args.outstanding)
        return
    os.sched_setaffinity(0, {0})
    rates, costs = [], []
    for run in range(args.runs):
        rate, cost = asyncio.run(serve_and_measure(args.seconds, args.outstanding))
        rates.append(rate)
        costs.append(cost)
        print(f"run {run + 1}: {rate:,.0f} adds/s, {cost:.2f} us CPU an add", flush=True)
    print(f"median: {statistics.median(rates):,.0f} adds/s, "
          f"{statistics.median(costs):.2f} us CPU an add")


if __name__ == "__main__":
    main()
