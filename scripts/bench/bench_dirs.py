#!/usr/bin/env python3
"""Several journal and ledger dirs against one, each dir on its own device (docs/design.md §3.8).

    sudo .venv/bin/python scripts/bench/bench_dirs.py [--backend loop|tmpfs|dir] [--seconds 10]
        [--runs 3] [--outstanding 2000] [--ledgers 24] [--layouts one,split,many]

Layouts, measured in the same run on the same kind of device:
  one    journal and ledger dir on device 0 (one disk: the baseline)
  split  journal on device 0, ledger dir on device 1 (the journal on its own disk)
  many   journals on devices 0 and 1, ledger dirs on devices 2, 3 and 4
Backends (each device a fresh file system, unmounted and detached at the end):
  loop   ext4 on a loop device over a sparse file on this VM's disk (/var/tmp): real
         fdatasyncs, but every device's syncs end on the same virtual disk
  tmpfs  one tmpfs per device: fsync costs nothing, so only CPU and threads show
  dir    plain directories on the disk of /var/tmp (no root needed; one real disk)
Per point: one bookie in this process (pinned to core 0) serving BookKeeper's protocol on
127.0.0.1, a client process (core 1) pipelining v3 adds of 1 KiB entries round-robin over
``--ledgers`` ledgers with ``--outstanding`` in flight, for ``--seconds``; checkpoints held
off (write cache 2 GiB) so the window measures the journals. Then one checkpoint of the
whole backlog is timed: the ledger dirs' flush. Prints adds/s, p50/p99 add latency and the
checkpoint's MiB/s, medians over ``--runs``, each layout beside "one".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import select
import shutil
import signal
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
LAYOUTS = {"one": ((0,), (0,)), "split": ((0,), (1,)), "many": ((0, 1), (2, 3, 4))}
DEVICE_BYTES = 4 << 30


# -- the client process -------------------------------------------------------------------

def _frame(ledger_id: int, entry_id: int, txn: int, body: bytes) -> bytes:
    from api.bkproto import v3
    from bookie.entry import DigestType, frame_entry, master_key

    request = v3.Request()
    request.header.version = v3.PROTOCOL_VERSIONS["VERSION_THREE"]
    request.header.operation = v3.OPERATIONS["ADD_ENTRY"]
    request.header.txnId = txn
    add = request.addRequest
    add.ledgerId, add.entryId, add.masterKey = ledger_id, entry_id, master_key(b"bench")
    add.body = frame_entry(ledger_id, entry_id, entry_id - 1, 0, body, DigestType.CRC32C)
    return v3.frame(request)


def client(port: int, seconds: float, outstanding: int, ledgers: int, rate: int,
           warmup: float) -> None:
    """Adds at ``rate`` a second (0: as fast as answers come) with at most ``outstanding``
    in flight, until ``seconds`` pass; prints adds answered EOK, elapsed, p50 and p99
    latency (ms) of the adds sent after ``warmup`` seconds (the journals' first
    preallocations), and the answers that were not EOK. A fixed rate measures latency at
    the same offered load for every layout."""
    from api.bkproto import v3

    eok, refused = v3.STATUS["EOK"], 0

    body = b"x" * 1024
    next_entry = [0] * ledgers
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    started = time.monotonic()
    deadline, txn, buffer = started + seconds, 0, b""
    measured_from = started + warmup
    while (now := time.monotonic()) < deadline:
        due = int((now - started) * rate) if rate else txn + outstanding
        frames = []
        while len(sent_at) < outstanding and txn < due:
            ledger = txn % ledgers
            frames.append(_frame(ledger + 1, next_entry[ledger], txn, body))
            next_entry[ledger] += 1
            sent_at[txn] = time.monotonic()
            txn += 1
        if frames:
            sock.sendall(b"".join(frames))
        if not select.select([sock], [], [], 0.001)[0]:
            continue
        buffer += sock.recv(1 << 20)
        at, now = 0, time.monotonic()
        while len(buffer) - at >= 4:
            length = _I32.unpack_from(buffer, at)[0]
            if len(buffer) - at - 4 < length:
                break
            response = v3.Response.FromString(buffer[at + 4:at + 4 + length])
            sent = sent_at.pop(response.header.txnId)
            status = response.addResponse.status if response.HasField("addResponse") \
                else response.status
            if status != eok:
                refused += 1
            elif sent >= measured_from:
                latencies.append(now - sent)
            at += 4 + length
        buffer = buffer[at:]
    elapsed = time.monotonic() - measured_from
    latencies.sort()
    p50, p99 = (latencies[int(len(latencies) * q)] * 1000 for q in (0.5, 0.99))
    print(len(latencies), elapsed, p50, p99, refused, flush=True)


# -- devices ------------------------------------------------------------------------------

def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout.strip()


BLKIO = "/sys/fs/cgroup/blkio"


def _throttle(loop: str, iops: int, mib_s: int) -> None:
    """Give a loop device a disk's write budget (cgroup v1 blkio, this root cgroup: every
    bio to the device, writeback included); 0, 0 lifts it."""
    device = os.stat(loop).st_rdev
    rule = f"{os.major(device)}:{os.minor(device)}"
    for name, value in (("write_iops_device", iops), ("write_bps_device", mib_s << 20)):
        with open(os.path.join(BLKIO, f"blkio.throttle.{name}"), "w") as handle:
            handle.write(f"{rule} {value}\n")


@contextlib.contextmanager
def devices(backend: str, count: int, base: str, throttle: tuple[int, int] | None = None):
    """``count`` mount points, each its own file system (or plain dirs for "dir"); loop
    devices with ``throttle`` (write IOPS, MiB/s) each get that budget."""
    mounts, loops = [], []
    try:
        for index in range(count):
            mount = os.path.join(base, f"dev{index}")
            os.makedirs(mount)
            if backend == "tmpfs":
                _run("mount", "-t", "tmpfs", "-o", f"size={DEVICE_BYTES}", "tmpfs", mount)
                mounts.append(mount)
            elif backend == "loop":
                image = os.path.join(base, f"dev{index}.img")
                with open(image, "wb") as handle:
                    handle.truncate(DEVICE_BYTES)  # sparse: blocks come as ext4 writes
                loops.append(_run("losetup", "-f", "--show", image))
                _run("mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                     loops[-1])
                _run("mount", loops[-1], mount)
                mounts.append(mount)
                if throttle:
                    _throttle(loops[-1], *throttle)
        yield [os.path.join(base, f"dev{i}") for i in range(count)]
    finally:
        for mount in reversed(mounts):
            subprocess.run(["umount", mount], check=False)
        for loop in loops:
            if throttle:
                _throttle(loop, 0, 0)
            subprocess.run(["losetup", "-d", loop], check=False)


# -- one point ----------------------------------------------------------------------------

async def measure(layout: str, mounts: list[str], args: argparse.Namespace, run: int) -> dict:
    from api.server.bk_listener import bk_serving
    from bookie.config import BookieConfig
    from tests.support.servers import running_bookie

    journals, ledgers = LAYOUTS[layout]
    tag = f"{layout}-{run}"
    config = BookieConfig(
        data_dir=os.path.join(mounts[0], tag), port=0,
        journal_queue_max_bytes=256 << 20, gc_interval_ms=0,
        journal_dirs=",".join(os.path.join(mounts[d], tag, "journal") for d in journals),
        ledger_dirs=",".join(os.path.join(mounts[d], tag, "ledgers") for d in ledgers))
    async with running_bookie(config) as running:
        async with bk_serving(running.bookie, "127.0.0.1", 0) as port:
            argv = ["taskset", "-c", "1", sys.executable, os.path.abspath(__file__),
                    "--client", str(port), "--seconds", str(args.seconds),
                    "--outstanding", str(args.outstanding), "--ledgers", str(args.ledgers),
                    "--rate", str(args.rate), "--warmup", str(args.warmup)]
            flushes = _Flushes(running.bookie)
            process = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.PIPE)
            out, _ = await process.communicate()
            flushes.stop()
    for device in set(journals + ledgers):  # the next point starts on empty devices
        shutil.rmtree(os.path.join(mounts[device], tag), ignore_errors=True)
    answered, elapsed, p50, p99, refused = out.decode().split()[-5:]
    if int(refused):
        raise RuntimeError(f"{layout}: {refused} adds were not answered EOK (a device too "
                           f"small?): the point does not count")
    return {"rate": int(answered) / float(elapsed), "p50": float(p50), "p99": float(p99),
            "checkpoints": flushes.count, "flush_mib_s": flushes.mib_s()}


class _Flushes:
    """The checkpoints that ran during the window: how many, and their flush MiB/s."""

    def __init__(self, bookie) -> None:
        self.count, self.bytes, self.seconds = 0, 0, 0.0
        self._checkpoints = bookie.checkpoints
        self._done = self._checkpoints.on_done
        self._checkpoints.on_done = self._on_done

    def _on_done(self, result) -> None:
        self.count += 1
        self.bytes += result.bytes
        self.seconds += result.phase_s["flush"]
        self._done(result)

    def stop(self) -> None:
        self._checkpoints.on_done = self._done

    def mib_s(self) -> float:
        return self.bytes / self.seconds / (1 << 20) if self.seconds else 0.0


def _report(results: dict[str, list[dict]]) -> None:
    def median(layout: str, key: str) -> float:
        return statistics.median(point[key] for point in results[layout])
    for layout in results:
        versus = ""
        if "one" in results and layout != "one":
            versus = (f"; vs one: adds {median(layout, 'rate') / median('one', 'rate'):.2f}x, "
                      f"p99 {median(layout, 'p99') / median('one', 'p99'):.2f}x")
        print(f"{layout:5s} median of {len(results[layout])}: {_line(results[layout], median, layout)}"
              f"{versus}", flush=True)


def _line(points, median, layout) -> str:
    return (f"{median(layout, 'rate'):,.0f} adds/s, p50 {median(layout, 'p50'):.2f} ms, "
            f"p99 {median(layout, 'p99'):.2f} ms; {median(layout, 'checkpoints'):.0f} "
            f"checkpoints flushing at {median(layout, 'flush_mib_s'):,.0f} MiB/s")


def _budget(text: str) -> tuple[int, int] | None:
    iops, mib_s = (int(part) for part in text.split(","))
    return (iops, mib_s) if iops or mib_s else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("loop", "tmpfs", "dir"), default="loop")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--outstanding", type=int, default=2000)
    parser.add_argument("--ledgers", type=int, default=24)
    parser.add_argument("--rate", type=int, default=0,
                        help="adds offered a second (default 0: as fast as answered)")
    parser.add_argument("--layouts", default="one,split,many")
    parser.add_argument("--warmup", type=float, default=3.0,
                        help="seconds at the start not measured")
    parser.add_argument("--throttle", type=_budget, default=(300, 30), metavar="IOPS,MIBS",
                        help="loop: each device's write budget, so that five devices stay "
                             "below this VM's one disk and act as five (default 300,30; "
                             "0,0: none)")
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args.client, args.seconds, args.outstanding, args.ledgers, args.rate,
               args.warmup)
        return 0
    if args.backend != "dir" and os.geteuid() != 0:
        print(f"--backend {args.backend} mounts file systems: run as root, or --backend dir")
        return 2
    layouts = args.layouts.split(",")
    os.sched_setaffinity(0, {0})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unmount and detach on TERM too
    results: dict[str, list[dict]] = {layout: [] for layout in layouts}
    with tempfile.TemporaryDirectory(prefix="bench-dirs-", dir="/var/tmp") as base:
        throttle = args.throttle if args.backend == "loop" else None
        with devices(args.backend, 5, base, throttle) as mounts:
            print(f"backend {args.backend}: devices {', '.join(mounts)}"
                  + (f"; each throttled to {throttle[0]} write IOPS and {throttle[1]} MiB/s"
                     if throttle else ""), flush=True)
            for run in range(args.runs):
                order = layouts[run % len(layouts):] + layouts[:run % len(layouts)]
                for layout in order:  # interleaved and rotated: drift hits each alike
                    point = asyncio.run(measure(layout, mounts, args, run))
                    results[layout].append(point)
                    print(f"run {run + 1} {layout}: "
                          f"{_line([point], lambda _l, k: point[k], layout)}", flush=True)
    _report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
