"""Helpers for the ``bookie shell`` tests: running a command, data dirs written by real bookies,
and entry logs written byte by byte the way docs/formats.md §5 says Apache BookKeeper writes them.

Not a test module. Imported as ``tests.shell.shell_support``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import struct
import urllib.request

import crc32c

from bookie.config import BookieConfig
from bookie.entry import DigestType, frame_entry, frame_lac, mac_key, master_key
from bookie.shell import main as shell_main

KEY = master_key(b"secret")
MAC_KEY = mac_key(b"secret")
#: Ledgers of the generated data dir and their digest types.
LEDGER_TYPES = {1: DigestType.CRC32C, 2: DigestType.CRC32, 3: DigestType.MAC,
                4: DigestType.DUMMY, 5: DigestType.CRC32C, 6: DigestType.CRC32C}
SMALL = dict(checkpoint_interval_ms=3_600_000, journal_prealloc_bytes=4096,
             journal_max_bytes=65536, entrylog_max_bytes=16384, journal_backups_count=1000)


@dataclasses.dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]

    def of_type(self, kind: str) -> list[dict]:
        return [r for r in self.records if r.get("type") == kind]


def run(capsys, *argv) -> Result:
    """``bookie shell ARGV`` in this process; stdout and stderr captured."""
    capsys.readouterr()
    code = shell_main([str(a) for a in argv])
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def entry(ledger_id: int, entry_id: int, size: int = 300) -> bytes:
    digest_type = LEDGER_TYPES.get(ledger_id, DigestType.CRC32C)
    payload = bytes((ledger_id * 31 + entry_id + i) % 251 for i in range(size))
    key = MAC_KEY if digest_type is DigestType.MAC else None
    return frame_entry(ledger_id, entry_id, entry_id - 1, (entry_id + 1) * size, payload,
                       digest_type, key)


def small_config(data_dir: str) -> BookieConfig:
    return BookieConfig(data_dir=data_dir, port=0, **SMALL)


# -- a data dir written by real bookies ---------------------------------------------------


def make_bookie_data_dir(data_dir: str) -> None:
    """Three sessions on one data dir, with small rolls (several journals and entry logs):

    1. in process, clean: ledgers 1 (CRC32C), 2 (CRC32), 3 (MAC), 4 (DUMMY), 5 (fenced),
       an explicit LAC on ledger 1, checkpoints between
    2. a daemon killed (SIGKILL) at its first entry log fdatasync, inside a checkpoint: the
       log holds entries of ledgers 6 and 1 that no index points at, and no ledgersMap
    3. in process, clean: replay adds those entries again, to a later log (the index points
       at the later copies; the first ones are superseded)
    """
    asyncio.run(_session_one(small_config(data_dir)))
    _session_two_crashes(data_dir)
    asyncio.run(_session_three(small_config(data_dir)))


async def _session_one(config: BookieConfig) -> None:
    from tests.support.servers import running_bookie

    async with running_bookie(config) as running:
        bookie = running.bookie
        for entry_id in range(30):
            await bookie.add_entry(1, entry_id, entry(1, entry_id), KEY, DigestType.CRC32C)
        await bookie.checkpoint()
        for ledger_id, count in ((2, 15), (3, 8), (4, 8), (5, 5)):
            for entry_id in range(count):
                await bookie.add_entry(ledger_id, entry_id, entry(ledger_id, entry_id), KEY,
                                       LEDGER_TYPES[ledger_id])
        await bookie.write_lac(1, KEY, frame_lac(1, 29))
        await bookie.fence(5, KEY)
        await bookie.checkpoint()
        for entry_id in range(30, 40):
            await bookie.add_entry(1, entry_id, entry(1, entry_id), KEY, DigestType.CRC32C)


def _session_two_crashes(data_dir: str) -> None:
    from tests.support.servers import Daemon

    daemon = Daemon(data_dir, *_flags(), crash_at=(1, "*.log"))
    daemon.start()
    try:
        for entry_id in range(10):
            _http_add(daemon.url, 6, entry_id, entry(6, entry_id))
        for entry_id in range(40, 45):
            _http_add(daemon.url, 1, entry_id, entry(1, entry_id))
        try:
            _http(daemon.url + "/v1/bookie/checkpoint", b"", "POST", {})
        except OSError:
            pass  # the daemon died inside the checkpoint, as planned
    finally:
        daemon.proc.wait(60)
    assert daemon.proc.returncode == -9, daemon.log_text()


async def _session_three(config: BookieConfig) -> None:
    from tests.support.servers import running_bookie

    async with running_bookie(config) as running:
        assert running.bookie.replay_report.adds >= 15


def _flags() -> list[str]:
    flags = []
    for name, value in SMALL.items():
        flags += ["--" + name.replace("_", "-"), str(value)]
    return flags


def _http_add(url: str, ledger_id: int, entry_id: int, data: bytes) -> None:
    headers = {"X-Master-Key": KEY.hex(), "X-Digest-Type": LEDGER_TYPES[ledger_id].header_name,
               "Content-Type": "application/octet-stream"}
    _http(f"{url}/v1/ledgers/{ledger_id}/entries/{entry_id}", data, "PUT", headers)


def _http(url: str, data: bytes, method: str, headers: dict) -> bytes:
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as reply:
        return reply.read()


# -- Apache BookKeeper's entry log writer, as docs/formats.md §5 describes it -------------------


def bk_crc32c_entry(ledger_id: int, entry_id: int, size: int) -> bytes:
    """A CRC32C entry (§6.1) of exactly ``size`` bytes, digest computed here with crc32c."""
    head = struct.pack(">qqqq", ledger_id, entry_id, entry_id - 1, (entry_id + 1) * size)
    payload = bytes((entry_id + i) % 253 for i in range(size - 36))
    return head + struct.pack(">I", crc32c.crc32c(payload, crc32c.crc32c(head))) + payload


def bk_entry_log(path: str, records: list[tuple[int, bytes]], finalize: bool = True,
                 batch_size: int = 10_000) -> dict[int, int]:
    """Header (§5.1), ``[size][entry]`` records (§5.2), then, when finalized, the ledgersMap
    batches (§5.4, BufferedLogChannel.appendLedgersMap) and the header patch of bytes 8..19.
    Returns the ledgers map written."""
    body = bytearray(b"BKLO" + struct.pack(">iqi", 1, 0, 0) + bytes(1004))
    totals: dict[int, int] = {}
    for ledger_id, data in records:
        body += struct.pack(">i", len(data)) + data
        totals[ledger_id] = totals.get(ledger_id, 0) + len(data) + 4
    if finalize and totals:
        map_offset = len(body)
        ids = sorted(totals)
        for start in range(0, len(ids), batch_size):
            batch = ids[start:start + batch_size]
            body += struct.pack(">iqqi", 20 + 16 * len(batch), -1, -2, len(batch))
            for ledger_id in batch:
                body += struct.pack(">qq", ledger_id, totals[ledger_id])
        body[8:20] = struct.pack(">qi", map_offset, len(totals))
    with open(path, "wb") as handle:
        handle.write(body)
    return totals
