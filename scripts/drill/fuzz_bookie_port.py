#!/usr/bin/env python3
"""Seeded fuzz of the BookKeeper-protocol port (issue 36): hostile clients beside a checking
one, against a real bookie daemon, and the daemon's memory peak against its budget.

Each seed is one round of ``--seconds``: ``--actors`` hostile clients, each of a kind drawn
from the seed, and one checking client. The kinds:
    v2, v3   well-formed requests (adds, reads, fences, batch reads, LAC calls) mutated at
             random: flipped bytes, random versions, flags and opcodes, cut or padded bodies,
             and now and then a frame length that lies; each read for answers it ignores
    half     frames that announce up to max_entry_size and send a part, then stall
    unread   hundreds of reads of a 1 MiB entry whose answers it never reads
    slam     a burst of adds and reads, then a reset connection (SO_LINGER 0)
    polls    many LAC long polls, then gone
    large    hundreds of pipelined reads (v2 and v3) of several 1 MiB entries, some from the
             write cache, whose answers it reads slowly (api/server/bk_budget.py PB7)
The checking client adds and reads back its own entries over v3 and v2 all along: every
answer must come, within 30 s, and be right. After every round the daemon must be alive.

The daemon runs with a small budget (api/server/bk_budget.py, docs/bookkeeper-protocol.md
§8); its peak RSS (VmHWM) must stay within its RSS before the first round plus that budget
plus ``--slack-mib`` (Python's allocator keeps freed memory). Prints one line a round and
the peak; exit 1 on any failure.

    scripts/drill/fuzz_bookie_port.py --seeds 1-20 --seconds 3
    scripts/drill/fuzz_bookie_port.py --repo /path/to/an/older/checkout   # the same fuzz, old code
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from api.bkproto import v2, v3  # noqa: E402
from bookie.entry import frame_entry, master_key  # noqa: E402
from tests.support.servers import Daemon  # noqa: E402

KEY = master_key(b"fuzz")
MIB = 1 << 20
BIG_LEDGER, CHECK_LEDGER = 7, 9
KINDS = ("v2", "v3", "half", "unread", "slam", "polls", "large")
#: Large entries of BIG_LEDGER: the first ones checkpointed to the entry log, the rest in
#: the write cache (the large kind asks for them all).
BIG_ENTRIES, BIG_LOGGED = 6, 4
#: The daemon's budget in this fuzz (the flags of bookie serve). Reads in progress are at
#: their defaults (1,000 a port, 500 a connection): since PB7 their bytes are bounded by the
#: answer budget, not by their count (before, 500 reads of 1 MiB held 500 MiB).
BUDGET = {"--max-entry-size": str(MIB + 4096), "--bookie-request-bytes-max": str(32 * MIB),
          "--bookie-answer-bytes-max": str(32 * MIB), "--bookie-max-reads-in-progress": "1000",
          "--bookie-max-reads-per-connection": "500",
          "--bookie-connection-buffer-bytes": str(MIB), "--bookie-frame-timeout-ms": "2000",
          "--bookie-long-polls-per-connection": "50", "--max-lac-waiters": "200"}
#: Request bytes, answer bytes, and PB7's slack: one entry (and its answer's head) per
#: connection that began a read holding nothing (the actors and the checker's two).
REQUEST_BYTES = ANSWER_BYTES = 32 * MIB
ENTRY_SLACK = MIB + 4096 + 128


def budget_bytes(actors: int) -> int:
    return REQUEST_BYTES + ANSWER_BYTES + (actors + 2) * ENTRY_SLACK


def entry(ledger_id: int, entry_id: int, size: int = 64) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, 0, b"f" * size)


def rss_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def v3_request(rng: random.Random, txn: int) -> bytes:
    request = v3.Request()
    request.header.version = v3.PROTOCOL_VERSIONS["VERSION_THREE"]
    request.header.txnId = txn
    operation = rng.choice(["ADD_ENTRY", "READ_ENTRY", "READ_LAC", "WRITE_LAC",
                            "FORCE_LEDGER", "GET_BOOKIE_INFO", "START_TLS", "AUTH"])
    request.header.operation = v3.OPERATIONS[operation]
    body = getattr(request, v3.BODY_FIELDS[operation][0])
    body.SetInParent()
    ledger_id, entry_id = rng.randrange(100, 110), rng.randrange(-1, 20)
    if operation == "ADD_ENTRY":
        body.ledgerId, body.entryId, body.masterKey = ledger_id, entry_id, KEY
        body.body = entry(ledger_id, max(entry_id, 0))
        if rng.random() < 0.3:
            body.flag = 1
    elif operation == "READ_ENTRY":
        body.ledgerId, body.entryId = ledger_id, entry_id
        if rng.random() < 0.3:
            body.flag, body.masterKey = rng.choice([1, 2]), KEY
        if rng.random() < 0.2:
            body.previousLAC, body.timeOut = rng.randrange(-1, 30), rng.randrange(0, 3000)
    elif operation in ("READ_LAC", "FORCE_LEDGER"):
        body.ledgerId = ledger_id
    return request.SerializeToString()


def v2_request(rng: random.Random) -> bytes:
    ledger_id, entry_id = rng.randrange(100, 110), rng.randrange(0, 20)
    choice = rng.randrange(4)
    if choice == 0:
        return v2.encode_add(ledger_id, entry_id, KEY, entry(ledger_id, entry_id))[4:]
    if choice == 1:
        return v2.encode_read(ledger_id, entry_id)[4:]
    if choice == 2:
        return v2.encode_read(ledger_id, entry_id, v2.FLAG_DO_FENCING, KEY)[4:]
    return v2.encode_batch_read(ledger_id, entry_id, rng.randrange(1 << 30),
                                rng.randrange(-1, 50), rng.randrange(0, 1 << 22))[4:]


def mutate(rng: random.Random, packet: bytes) -> bytes:
    data = bytearray(packet)
    for _ in range(rng.randrange(4)):
        kind = rng.randrange(5)
        if kind == 0 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif kind == 1 and data:
            data[0] = rng.randrange(256)  # v2: the version byte; v3: a protobuf tag
        elif kind == 2 and len(data) > 2:
            data[2:4] = rng.randbytes(2)  # v2: the flags
        elif kind == 3:
            del data[rng.randrange(len(data) + 1):]
        else:
            data += rng.randbytes(rng.randrange(1, 64))
    length = len(data)
    if rng.random() < 0.05:  # a length that lies: the connection is refused or waits
        length = rng.choice([0, -1, length + rng.randrange(1, 1000), 1 << 30])
    return struct.pack(">i", length) + bytes(data)


async def drain(reader: asyncio.StreamReader) -> None:
    while await reader.read(1 << 16):
        pass


async def actor(kind: str, rng: random.Random, port: int, deadline: float) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    draining = asyncio.ensure_future(drain(reader)) if kind in ("v2", "v3", "polls") else None
    try:
        while time.monotonic() < deadline:
            if kind in ("v2", "v3"):
                packets = [v2_request(rng) if kind == "v2" else v3_request(rng, i)
                           for i in range(rng.randrange(1, 20))]
                writer.write(b"".join(mutate(rng, p) for p in packets))
            elif kind == "half":
                writer.write(struct.pack(">i", rng.randrange(1 << 16, MIB)) +
                             rng.randbytes(rng.randrange(1, 1 << 12)))
                await writer.drain()
                await asyncio.sleep(deadline - time.monotonic())  # noqa: sleep-ok (stall)
            elif kind == "unread":
                writer.write(b"".join(v2.encode_read(BIG_LEDGER, 0) for _ in range(300)))
                await writer.drain()
                await asyncio.sleep(deadline - time.monotonic())  # noqa: sleep-ok (stall)
            elif kind == "large":
                await large_reads(rng, reader, writer, deadline)
                break
            elif kind == "slam":
                writer.write(b"".join(v2.encode_read(BIG_LEDGER, 0) for _ in range(50)) +
                             v2.encode_add(101, rng.randrange(50), KEY, entry(101, 0)))
                await writer.drain()
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                break
            else:  # polls
                request = v3.Request()
                request.header.version = v3.PROTOCOL_VERSIONS["VERSION_THREE"]
                request.header.operation = v3.OPERATIONS["READ_ENTRY"]
                read = request.readRequest
                read.ledgerId, read.entryId, read.previousLAC = CHECK_LEDGER, -1, 1 << 40
                read.timeOut, read.flag = 600_000, 2
                frames = []
                for txn in range(80):
                    request.header.txnId = txn
                    frames.append(v3.frame(request))
                writer.write(b"".join(frames))
                await writer.drain()
                await asyncio.sleep(rng.random() * (deadline - time.monotonic()))  # noqa: sleep-ok
                break
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        if draining is not None:
            draining.cancel()
        writer.close()


def v3_read(ledger_id: int, entry_id: int, txn: int) -> bytes:
    request = v3.Request()
    request.header.version = v3.PROTOCOL_VERSIONS["VERSION_THREE"]
    request.header.operation = v3.OPERATIONS["READ_ENTRY"]
    request.header.txnId = txn
    request.readRequest.ledgerId, request.readRequest.entryId = ledger_id, entry_id
    return v3.frame(request)


async def large_reads(rng: random.Random, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter, deadline: float) -> None:
    """PB7: pipelined reads of large entries, their answers read slowly (a chunk, then a
    pause), until the deadline."""
    count = rng.randrange(100, 400)
    if rng.random() < 0.5:
        frames = [v2.encode_read(BIG_LEDGER, rng.randrange(BIG_ENTRIES)) for _ in range(count)]
    else:
        frames = [v3_read(BIG_LEDGER, rng.randrange(BIG_ENTRIES), txn) for txn in range(count)]
    writer.write(b"".join(frames))
    await writer.drain()
    chunk, pause = rng.choice([1 << 12, 1 << 16]), rng.choice([0.005, 0.02, 0.1])
    while time.monotonic() < deadline:
        if not await reader.read(chunk):
            return
        await asyncio.sleep(pause)  # noqa: sleep-ok (a slow reader, by design)


async def checker(port: int, deadline: float, first_id: int) -> int:
    """Adds and reads back over v3 and v2 until the deadline; returns the adds checked."""
    from tests.support.bk_client import BkClient

    entry_id = first_id
    async with BkClient.connect(port) as c3, BkClient.connect(port) as c2:
        while time.monotonic() < deadline:
            data = entry(CHECK_LEDGER, entry_id)
            added = await c3.add(CHECK_LEDGER, entry_id, KEY, data)
            assert added.status == v3.STATUS["EOK"], f"add {entry_id}: {added.status}"
            read = await c3.read(CHECK_LEDGER, entry_id)
            assert read.readResponse.body == data, f"v3 read {entry_id}"
            old = await c2.call_v2(v2.encode_read(CHECK_LEDGER, entry_id))
            assert (old.rc, old.data) == (v2.EOK, data), f"v2 read {entry_id}: rc {old.rc}"
            entry_id += 1
    return entry_id - first_id


async def one_round(seed: int, args, port: int, first_id: int) -> int:
    rng = random.Random(seed)
    deadline = time.monotonic() + args.seconds
    kinds = [rng.choice(args.kinds) for _ in range(args.actors)]
    actors = [asyncio.ensure_future(actor(k, random.Random(rng.random()), port, deadline))
              for k in kinds]
    try:
        checked = await asyncio.wait_for(checker(port, deadline, first_id), args.seconds + 30)
    finally:
        await asyncio.wait(actors, timeout=args.seconds + 5)
        for task in actors:
            task.cancel()
    print(f"seed {seed}: {' '.join(sorted(kinds))}; checked {checked} adds", flush=True)
    return checked


def known_flags(repo: str) -> dict:
    """The budget flags the daemon of ``repo`` knows (an older checkout lacks some).
    ``--help-all`` lists every setting's flag since issue 54 (``--help`` only the common
    ones); a checkout older than that has no ``--help-all`` and lists them all in ``--help``."""
    for flag in ("--help-all", "--help"):
        done = subprocess.run([sys.executable, "-m", "bookie", "serve", flag], cwd=repo,
                              env=dict(os.environ, PYTHONPATH=repo), capture_output=True,
                              text=True)
        if done.returncode == 0:
            break
    done.check_returncode()
    usage = done.stdout
    return {flag: value for flag, value in BUDGET.items() if flag in usage}


async def checkpoint(daemon: Daemon) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.post(daemon.url + "/v1/bookie/checkpoint") as reply:
            assert reply.status < 300, reply.status


async def main_async(args, daemon: Daemon) -> int:
    from tests.support.bk_client import BkClient

    port = daemon.bk_port
    async with BkClient.connect(port) as client:  # the entries the unread clients ask for
        for entry_id in range(BIG_ENTRIES):
            if entry_id == BIG_LOGGED:  # the first ones move to the entry log
                await checkpoint(daemon)
            big = entry(BIG_LEDGER, entry_id, MIB - 64 - entry_id)
            added = await client.add(BIG_LEDGER, entry_id, KEY, big)
            assert added.status == v3.STATUS["EOK"]
    baseline = rss_kib(daemon.proc.pid, "VmRSS")
    budget = budget_bytes(args.actors)
    limit = baseline + (budget >> 10) + args.slack_mib * 1024
    first_id, failures = 0, 0
    for seed in args.seed_list:
        try:
            first_id += await one_round(seed, args, port, first_id)
        except (AssertionError, TimeoutError, ConnectionError, asyncio.IncompleteReadError) \
                as exc:
            print(f"seed {seed}: FAIL checking client: {exc!r}", flush=True)
            failures += 1
            break
        if daemon.proc.poll() is not None:
            print(f"seed {seed}: FAIL the daemon exited {daemon.proc.returncode}", flush=True)
            return 1
    peak = rss_kib(daemon.proc.pid, "VmHWM")
    print(f"memory: RSS {baseline / 1024:.0f} MiB before the rounds, peak {peak / 1024:.0f} "
          f"MiB; budget {budget / MIB:.0f} MiB + slack {args.slack_mib} MiB -> limit "
          f"{limit / 1024:.0f} MiB", flush=True)
    if peak > limit:
        print("FAIL: the peak is over the limit", flush=True)
        failures += 1
    print("PASS" if not failures else f"FAIL ({failures})", flush=True)
    return 1 if failures else 0


def parse_seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1-10", help="seeds, e.g. 7 or 1-20 (default 1-10)")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of a round")
    parser.add_argument("--actors", type=int, default=8, help="hostile clients a round")
    parser.add_argument("--slack-mib", type=int, default=96,
                        help="MiB allowed above the budget (allocator, caches; default 96)")
    parser.add_argument("--repo", default=ROOT, help="the checkout whose bookie runs")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"the hostile kinds drawn from (default {','.join(KINDS)})")
    args = parser.parse_args()
    args.kinds = args.kinds.split(",")
    args.seed_list = parse_seeds(args.seeds)
    flags = known_flags(args.repo)
    if len(flags) < len(BUDGET):
        print(f"note: {args.repo} knows {len(flags)} of the {len(BUDGET)} budget flags",
              flush=True)
    with tempfile.TemporaryDirectory(prefix="fuzz-port-") as tmp:
        daemon = Daemon(os.path.join(tmp, "data"), "--bookie-port", "0",
                        *[x for pair in flags.items() for x in pair],
                        cwd=args.repo)
        daemon.start()
        try:
            return asyncio.run(main_async(args, daemon))
        finally:
            daemon.terminate(timeout_s=60)


if __name__ == "__main__":
    sys.exit(main())
