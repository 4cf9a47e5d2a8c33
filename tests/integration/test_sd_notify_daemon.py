"""The real daemon under a service manager: with NOTIFY_SOCKET set it says STATUS while it
replays a large journal, READY=1 only after replay, WATCHDOG=1 at half of WATCHDOG_USEC, and
STOPPING=1 at SIGTERM, in that order (deploy/systemd/bookie.service relies on each)."""

from __future__ import annotations

import json
import socket
import time
import urllib.request

from api.client import BookieClient
from bookie.entry import DigestType, frame_entry, master_key
from tests.support.servers import Daemon
from tests.support.zookeeper import free_port

KEY = master_key(b"notify")
ENTRY_PAYLOAD = 16 * 1024
BATCHES, BATCH_ENTRIES = 48, 100          # 48 x 100 x 16 KiB = 75 MiB of journal to replay
WATCHDOG_USEC = 200_000                   # pings every 0.1 s


async def _write_a_large_journal(url: str) -> int:
    payload = bytes(range(256)) * (ENTRY_PAYLOAD // 256)
    async with BookieClient(url) as client:
        for batch in range(BATCHES):
            first = batch * BATCH_ENTRIES
            entries = [frame_entry(3, e, e - 1, (e + 1) * ENTRY_PAYLOAD, payload,
                                   DigestType.CRC32C) for e in range(first, first + BATCH_ENTRIES)]
            await client.add_batch(3, entries, KEY)
    return BATCHES * BATCH_ENTRIES


def _messages(sock: socket.socket, until, bound_s: float = 120.0) -> list[str]:
    """Datagrams until ``until(messages)`` holds; bounded."""
    out: list[str] = []
    deadline = time.monotonic() + bound_s
    while not until(out):
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            out.append(sock.recv(65536).decode())
        except TimeoutError:
            raise AssertionError(f"no datagram within the bound; got {out}") from None
    return out


def _fields(message: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in message.split("\n"))


async def test_notify_status_during_replay_then_ready_watchdog_and_stopping(tmp_path):
    data_dir = str(tmp_path / "data")
    # No checkpoint while writing, so that the restart replays everything written.
    quiet = ("--checkpoint-interval-ms", "86400000", "--write-cache-max-bytes", "1GiB",
             "--journal-max-bytes", "16MiB")
    writer = Daemon(data_dir, *quiet).start()
    entries = await _write_a_large_journal(writer.url)
    writer.kill9()

    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        daemon = Daemon(data_dir, *quiet, "--port", str(free_port()),
                        env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": str(WATCHDOG_USEC)})
        daemon.start(wait_ready=False)
        try:
            before = _messages(sock, lambda got: bool(got) and "READY=1" in got[-1])
            with urllib.request.urlopen(daemon.url + "/v1/bookie/info", timeout=10) as reply:
                replay = json.load(reply)["replay"]
            pings = _messages(sock, lambda got: got.count("WATCHDOG=1") >= 3)
        finally:
            daemon.proc.send_signal(15)
        after = _messages(sock, lambda got: any("STOPPING=1" in m for m in got))
        assert daemon.proc.wait(120) == 0

    statuses = [_fields(m)["STATUS"] for m in before if m.startswith("STATUS=")]
    print(f"{len(statuses)} STATUS lines before READY: {statuses}")
    assert statuses[0] == "replaying journals"
    progress = [s for s in statuses[1:] if s.startswith("replaying journal file")]
    assert all("MiB" in s for s in progress)
    ready = _fields(before[-1])
    assert ready["READY"] == "1"
    assert replay["records"] >= entries and len(replay["files"]) >= 4
    assert (f"replayed {len(replay['files'])} journal file(s), {replay['records']} records"
            in ready["STATUS"])
    # WATCHDOG=1 may already arrive during replay (the loop turns while replay runs on its
    # thread); after READY it keeps coming at the interval.
    assert all(m == "WATCHDOG=1" for m in before[:-1] if not m.startswith("STATUS="))
    assert pings.count("WATCHDOG=1") >= 3
    stopping = [m for m in after if "STOPPING=1" in m]
    assert len(stopping) == 1 and not any("READY=1" in m for m in after)
    assert all(m == "WATCHDOG=1" for m in after[:after.index(stopping[0])])
