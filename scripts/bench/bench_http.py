#!/usr/bin/env python3
"""Durable 1 KiB adds over HTTP, beside a bare aiohttp POST endpoint measured in the same run.

    .venv/bin/python scripts/bench/bench_http.py [--seconds 5] [--clients 1,16,64] [--batches 1,100]
        [--loop uvloop|asyncio] [--server-cpus 0|0,1] [--tls]

Starts (on 127.0.0.1 only, each stopped by PID at the end):
  * a real bookie daemon (`python -m bookie serve`) on a temp data dir, pinned to core 0;
  * a bare aiohttp app whose POST handler reads the same body and answers JSON, pinned to
    core 0 (the baseline: the HTTP ceiling of this machine for this request shape);
  * for batches, a second bare app that also splits the frames and CRCs each entry (the
    least work any bookie must do per entry, docs/design.md §11);
  * a third, "durable": the bare handlers plus the bookie's own Journal (group commit, one
    fdatasync per group), answering after the sync: the floor of a durable add here.
All on the same event loop (--loop, default uvloop as the daemon). Also printed: a plain
page-cache write baseline (this VM's memory may be cold: see page_cache_write_mib_s), the
503 answers (back-pressure, retried after 10 ms) and the bookie's peak RSS.
The load generator runs here, pinned to core 1 (docs/design.md §11), with one ledger per client.
Prints adds/s, p50/p99 and server CPU microseconds per request per point, the ratio to
the bare endpoint, and the load generator's CPU per request (it must not be what limits). Targets
(docs/design.md §11): single adds >= 0.85x the bare endpoint at 64 clients, p99 within 2x of
its p99; batches of 100 x 1 KiB >= 200k entries/s at 16 clients and >= 0.6x the split+CRC
baseline.
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from bookie.entry import frame_entry, master_key  # noqa: E402

KEY = master_key(b"bench")
PAYLOAD = b"b" * (1024 - 36)  # 1 KiB framed entries (32-byte header + 4-byte CRC32C)

BARE_SERVER = """
import asyncio, os, sys
from aiohttp import web
if sys.argv[-1] != "asyncio":
    try:  # the same loop as the bookie (bookie/cli.py run_event_loop)
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
async def handle(request):
    body = await request.read()
    return web.json_response({"ledgerId": 1, "entryId": len(body)})
import struct, crc32c
FRAME = struct.Struct(">i")
def split_crc(body):
    # The least any bookie must do per entry (issue 18's second baseline): split the
    # batch's frames and compute each entry's CRC32C (header, then payload after the digest).
    view, offset, ids = memoryview(body), 0, 0
    crc = crc32c.crc32c
    while offset < len(body):
        (length,) = FRAME.unpack_from(body, offset)
        entry = view[offset + 4:offset + 4 + length]
        crc(entry[36:], crc(entry[:32]))
        offset += 4 + length
        ids += 1
    return ids
async def handle_split(request):
    ids = split_crc(await request.read())
    return web.json_response({"ledgerId": 1, "entryIds": list(range(ids))})
# "durable": the bare handlers, and the body journaled by the bookie's own Journal (group
# commit, one fdatasync per group, one wake-up of the loop per group) before the answer:
# the floor of any durable add on this machine, without the bookie's checks, write cache,
# index or checkpoints.
JOURNAL = []
async def start_journal(app):
    import shutil, tempfile
    from bookie.disk import OsDisk
    from journal.journal import Journal
    loop = asyncio.get_running_loop()
    def resolve(tokens, error):
        for future in tokens:
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)  # a failed sync must not count as an add
    directory = tempfile.mkdtemp(prefix="bench-durable-")
    journal = Journal(OsDisk(), directory, complete_group=lambda tokens, error:
                      loop.call_soon_threadsafe(resolve, tokens, error))
    journal.start()
    JOURNAL.append(journal)
    yield
    journal.close()
    shutil.rmtree(directory, ignore_errors=True)
async def durable(record):
    future = asyncio.get_running_loop().create_future()
    JOURNAL[0].submit(record, future)
    await future
async def handle_durable(request):
    body = await request.read()
    await durable(encode_add(body))
    return web.json_response({"ledgerId": 1, "entryId": len(body)})
async def handle_durable_batch(request):
    body = await request.read()
    ids = split_crc(body)
    await durable(body)  # a batch body is its entries' journal records
    return web.json_response({"ledgerId": 1, "entryIds": list(range(ids))})
app = web.Application(client_max_size=64 << 20)
mode = sys.argv[2]
if mode == "durable":
    from journal.format import encode_add
    app.cleanup_ctx.append(start_journal)
app.router.add_put("/v1/ledgers/{ledger}/entries/{entry}",
                   handle_durable if mode == "durable" else handle)
app.router.add_post("/v1/ledgers/{ledger}/entries", {
    "split": handle_split, "durable": handle_durable_batch}.get(mode, handle))
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=lambda *a: print(
    "bookie listening on http://127.0.0.1:" + sys.argv[1], flush=True), access_log=None)
"""


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(argv: list[str], cpus: str = "0") -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(["taskset", "-c", cpus, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    line = proc.stdout.readline().decode()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.strip().rsplit(" ", 1)[-1]


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; one request in flight, as one client of a bookie.

    Raw bytes, not aiohttp's client: an aiohttp client costs ~120 us of CPU per request, so
    on its one core it, not the server, would set the bare endpoint's rate (measured: ~9.5k/s
    bare at 64 clients, the load generator at 100% of its core). This one costs ~15 us."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._waiter: asyncio.Future | None = None
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0 or self._waiter is None:
            return
        head = bytes(self._buffer[:end]).lower()
        at = head.find(b"content-length:")
        length = int(head[at + 15:].split(b"\r\n", 1)[0]) if at >= 0 else 0
        if len(self._buffer) < end + 4 + length:
            return
        status = int(head[9:12])
        del self._buffer[:end + 4 + length]
        waiter, self._waiter = self._waiter, None
        waiter.set_result(status)

    def connection_lost(self, exc) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionError(f"connection lost: {exc}"))

    async def request(self, data: bytes) -> int:
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(data)
        return await self._waiter

    def close(self) -> None:
        self._transport.close()


#: The client TLS context for https:// servers (--tls): trusts the run's private CA.
CLIENT_TLS = None


async def _connect(url: str) -> _Connection:
    host, port = url.rsplit("/", 1)[-1].split(":")
    tls = CLIENT_TLS if url.startswith("https://") else None
    _, connection = await asyncio.get_running_loop().create_connection(
        _Connection, host, int(port), ssl=tls, server_hostname=host if tls else None)
    return connection


def _request(method: str, path: str, body: bytes) -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Master-Key: {KEY.hex()}\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body


async def wait_ready(url: str) -> None:
    for _ in range(2000):
        try:
            connection = await _connect(url)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        status = await connection.request(b"GET /ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        connection.close()
        if status in (200, 404):  # the bare server has no /ready
            return
        await asyncio.sleep(0.01)
    raise SystemExit(f"{url} never became ready")


def _next_request(ledger_id: int, entry_id: int, batch: int) -> bytes:
    if batch == 1:
        data = frame_entry(ledger_id, entry_id, entry_id - 1, entry_id, PAYLOAD)
        return _request("PUT", f"/v1/ledgers/{ledger_id}/entries/{entry_id}", data)
    data = b"".join(len(e).to_bytes(4, "big") + e for e in (
        frame_entry(ledger_id, i, i - 1, i, PAYLOAD) for i in range(entry_id, entry_id + batch)))
    return _request("POST", f"/v1/ledgers/{ledger_id}/entries", data)


async def _client(url, ledger_id, batch, deadline, latencies, counts):
    connection = await _connect(url)
    try:
        entry_id = 0
        while time.perf_counter() < deadline:
            request = _next_request(ledger_id, entry_id, batch)  # built before the clock
            started = time.perf_counter()
            status = await connection.request(request)
            while status == 503:  # back-pressure (write cache or journal queue full): counted
                counts[1] += 1
                await asyncio.sleep(0.01)
                status = await connection.request(request)
            if status != 200:
                raise SystemExit(f"ledger {ledger_id} entry {entry_id}: HTTP {status}")
            latencies.append(time.perf_counter() - started)
            counts[0] += batch
            entry_id += batch
    finally:
        connection.close()


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, all its threads (proc(5))."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(url: str, pid: int, clients: int, batch: int, seconds: float,
                  base_ledger: int) -> dict:
    latencies: list[float] = []
    counts = [0, 0]  # entries acknowledged, 503 answers
    warm = time.perf_counter() + min(1.0, seconds / 4)
    await asyncio.gather(*(_client(url, base_ledger + i, batch, warm, [], [0, 0])
                           for i in range(clients)))
    server_cpu, own_cpu = _cpu_seconds(pid), time.process_time()
    started = time.perf_counter()
    deadline = started + seconds
    await asyncio.gather(*(_client(url, base_ledger + 10_000 + i, batch, deadline, latencies,
                                   counts) for i in range(clients)))
    elapsed = time.perf_counter() - started
    requests = len(latencies)
    latencies.sort()
    return {"rate": counts[0] / elapsed, "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
            "server_us": (_cpu_seconds(pid) - server_cpu) * 1e6 / requests,
            "load_us": (time.process_time() - own_cpu) * 1e6 / requests,
            "refused": counts[1]}


def page_cache_write_mib_s(directory: str, mib: int = 256) -> float:
    """A plain baseline: buffered sequential 1 MiB writes of a new file, no sync. On a VM
    whose memory the host backs lazily, pages never touched before cost ~10x more to fill
    (measured 507 against 5067 MiB/s here), and every write of the bookie pays that too:
    figures from two runs compare only beside this."""
    path = os.path.join(directory, "page-cache-baseline")
    data = os.urandom(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for index in range(mib):
            os.pwrite(fd, data, index << 20)
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        os.unlink(path)
    return mib / elapsed


async def run_tls(args) -> None:
    """--tls: the same bookie daemon plain and with TLS (a private CA made for the run),
    point by point in the same run: what TLS costs."""
    global CLIENT_TLS
    from api.cluster.certs import make_ca, make_cert  # noqa: PLC0415
    from api.tls import client_context  # noqa: PLC0415

    os.sched_setaffinity(0, {1})
    tmp = tempfile.mkdtemp(prefix="bench-http-tls-")
    ca = make_ca(os.path.join(tmp, "pki"))
    leaf = make_cert(ca, os.path.join(tmp, "pki"), "bookie")
    CLIENT_TLS = client_context(ca.cert_file)
    print(f"servers on cpus {args.server_cpus}, load generator on cpu 1; event loop: "
          f"{args.loop}; TLS: {CLIENT_TLS.minimum_version.name}+ with an EC P-256 "
          f"certificate", flush=True)
    daemon = [sys.executable, "-m", "bookie", "serve", "--port", "0", "--event-loop", args.loop]
    plain, plain_url = start_server([*daemon, "--data-dir", os.path.join(tmp, "plain")],
                                    args.server_cpus)
    tls, tls_url = start_server([*daemon, "--data-dir", os.path.join(tmp, "tls"),
                                 "--tls-cert-file", leaf.cert_file,
                                 "--tls-key-file", leaf.key_file], args.server_cpus)
    try:
        for url in (plain_url, tls_url):
            await wait_ready(url)
        print(f"{'clients':>7} {'batch':>5} | {'plain/s':>9} {'p50ms':>6} {'p99ms':>6} "
              f"{'cpu':>4} | {'tls/s':>9} {'p50ms':>6} {'p99ms':>6} {'cpu':>4} | ratio | "
              f"load cpu plain/tls")
        ledger = 1
        for batch in args.batches:
            for clients in args.clients:
                base = await measure(plain_url, plain.pid, clients, batch, args.seconds,
                                     ledger)
                real = await measure(tls_url, tls.pid, clients, batch, args.seconds, ledger)
                ledger += 100_000
                print(f"{clients:>7} {batch:>5} | {_point(base)} | {_point(real)} | "
                      f"{real['rate'] / base['rate']:.2f}x | {base['load_us']:.0f}/"
                      f"{real['load_us']:.0f} us", flush=True)
    finally:
        for proc in (plain, tls):
            proc.terminate()
            proc.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)


async def run(args) -> None:
    os.sched_setaffinity(0, {1})
    tmp = tempfile.mkdtemp(prefix="bench-http-")
    print(f"servers on cpus {args.server_cpus}, load generator on cpu 1; "
          f"event loop: {args.loop}; page-cache write baseline: "
          f"{page_cache_write_mib_s(tmp):.0f} MiB/s", flush=True)
    port = _free_port()
    cpus = args.server_cpus
    bare, bare_url = start_server([sys.executable, "-c", BARE_SERVER, str(port), "plain",
                                   args.loop], cpus)
    split_port = _free_port()
    split, split_url = start_server([sys.executable, "-c", BARE_SERVER, str(split_port),
                                     "split", args.loop], cpus)
    durable_port = _free_port()
    durable, durable_url = start_server([sys.executable, "-c", BARE_SERVER, str(durable_port),
                                         "durable", args.loop], cpus)
    bookie, bookie_url = start_server([sys.executable, "-m", "bookie", "serve", "--data-dir",
                                       os.path.join(tmp, "data"), "--port", "0",
                                       "--event-loop", args.loop], cpus)
    try:
        for url in (bare_url, split_url, durable_url, bookie_url):
            await wait_ready(url)
        await report(args, (bare_url, bare.pid), (bookie_url, bookie.pid),
                     (split_url, split.pid), (durable_url, durable.pid))
        print(f"peak RSS: bookie {_peak_rss_mib(bookie.pid):.0f} MiB, bare "
              f"{_peak_rss_mib(bare.pid):.0f} MiB (bound: write_cache_max_bytes 256 MiB + "
              f"journal_queue_max_bytes 64 MiB + request_bodies_max_bytes 256 MiB + the "
              f"interpreter and RocksDB)", flush=True)
    finally:
        for proc in (bookie, bare, split, durable):
            proc.terminate()
            proc.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)


async def report(args, bare: tuple[str, int], bookie: tuple[str, int],
                 split: tuple[str, int], durable: tuple[str, int]) -> None:
    """One line per point; cpu: the server's (all threads) and the load generator's CPU
    microseconds per request, to show which side set the rate. For batches, a second
    baseline: the bare endpoint that also splits the frames and CRCs each entry. Last, the
    durable floor: the bare endpoint (split + CRC for batches) that also journals the body
    with the bookie's Journal and answers after its group's fdatasync."""
    print(f"{'clients':>7} {'batch':>5} | {'bare/s':>9} {'p50ms':>6} {'p99ms':>6} {'cpu':>4} | "
          f"{'bookie/s':>9} {'p50ms':>6} {'p99ms':>6} {'cpu':>4} | ratio | load cpu | "
          f"split+crc/s  ratio | durable/s  p99ms  cpu ratio")
    ledger = 1
    for batch in args.batches:
        for clients in args.clients:
            base = await measure(*bare, clients, batch, args.seconds, ledger)
            real = await measure(*bookie, clients, batch, args.seconds, ledger)
            extra = " |" + " " * 19
            if batch > 1:
                floor = await measure(*split, clients, batch, args.seconds, ledger)
                extra = f" | {floor['rate']:>11.0f}  {real['rate'] / floor['rate']:.2f}x"
            least = await measure(*durable, clients, batch, args.seconds, ledger)
            extra += (f" | {least['rate']:>9.0f} {least['p99_ms']:>6.2f} "
                      f"{least['server_us']:>4.0f} {real['rate'] / least['rate']:.2f}x")
            ledger += 100_000
            print(f"{clients:>7} {batch:>5} | {_point(base)} | {_point(real)} | "
                  f"{real['rate'] / base['rate']:.2f}x | {base['load_us']:.0f}/"
                  f"{real['load_us']:.0f} us{extra}"
                  + (f" | {real['refused']} answers 503 (back-pressure)"
                     if real["refused"] else ""), flush=True)


def _peak_rss_mib(pid: int) -> float:
    """VmHWM of a process (proc(5)): its peak resident set."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _point(m: dict) -> str:
    return (f"{m['rate']:>9.0f} {m['p50_ms']:>6.2f} {m['p99_ms']:>6.2f} "
            f"{m['server_us']:>4.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="per point (default 5)")
    parser.add_argument("--clients", default="1,16,64", help="comma-separated client counts")
    parser.add_argument("--batches", default="1,100", help="entries per request")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop",
                        help="the servers' event loop (default uvloop, as the daemon runs "
                             "where it is installed)")
    parser.add_argument("--server-cpus", default="0",
                        help="taskset list for the servers (default 0: one core; 0,1 measures "
                             "them unpinned, sharing core 1 with the load generator)")
    parser.add_argument("--tls", action="store_true",
                        help="instead: the bookie plain and with TLS side by side, point by "
                             "point (a private CA made for the run, issue 27)")
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    args.batches = [int(b) for b in args.batches.split(",")]
    asyncio.run(run_tls(args) if args.tls else run(args))


if __name__ == "__main__":
    main()
