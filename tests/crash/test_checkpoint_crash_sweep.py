"""Crash at every step of the checkpoint order (docs/design.md §3.4), kill -9 model.

The daemon runs on a CrashingDisk that SIGKILLs it at the k-th fsync, fdatasync, rename or
dir fsync under the ledger dir: entry-log appends and rolls (trailer, header rewrite),
``lastId`` and ``lastMark`` (temp file, fsync, rename, dir fsync). The sweep runs k = 1, 2, ...
until a run finishes the workload without crashing (SQLite ``crash9.test``), so every such
event of the workload is a crash point once. After each crash a normal restart must read back
every acknowledged add byte-identical, keep the fence and the explicit LAC.
"""

from __future__ import annotations

import pytest

from api.client import BookieClient
from bookie.entry import frame_entry, frame_lac, master_key
from bookie.errors import Fenced
from tests.support.servers import Daemon

KEY = master_key(b"sweep")
FLAGS = ("--entrylog-max-bytes", "16KiB", "--checkpoint-interval-ms", "3600000",
         "--journal-prealloc-bytes", "64KiB")
PATTERN = "*/ledgers/current*"


class Acked:
    def __init__(self) -> None:
        self.entries: dict[tuple[int, int], bytes] = {}
        self.fenced: set[int] = set()
        self.lac: dict[int, int] = {}


async def _workload(url: str, acked: Acked) -> bool:
    """Adds, a fence, an explicit LAC and checkpoints; False when the daemon died."""
    async with BookieClient(url) as client:
        try:
            for round_no in range(2):
                for ledger_id in (1, 2, 3):
                    if ledger_id in acked.fenced:
                        continue
                    for i in range(12):
                        entry_id = round_no * 12 + i
                        data = frame_entry(ledger_id, entry_id, entry_id - 1, entry_id,
                                           bytes([entry_id % 251]) * (700 + 37 * i))
                        await client.add_entry(ledger_id, entry_id, data, KEY)
                        acked.entries[(ledger_id, entry_id)] = data
                if round_no == 0:
                    await client.fence(2, KEY)
                    acked.fenced.add(2)
                    await client.write_lac(3, KEY, frame_lac(3, 5))
                    acked.lac[3] = 5
                await client.checkpoint()
        except Exception:
            return False
    return True


async def _verify(url: str, acked: Acked) -> None:
    async with BookieClient(url) as client:
        for (ledger_id, entry_id), data in acked.entries.items():
            assert await client.read_entry(ledger_id, entry_id) == data, (ledger_id, entry_id)
        for ledger_id in acked.fenced:
            with pytest.raises(Fenced):
                await client.add_entry(ledger_id, 99, frame_entry(ledger_id, 99, -1, 0, b"x"),
                                       KEY)
        for ledger_id, lac in acked.lac.items():
            assert await client.read_lac(ledger_id) >= lac


@pytest.mark.timeout(900)
async def test_crash_at_every_checkpoint_step_loses_no_acked_write(tmp_path):
    crash_points = 0
    for k in range(1, 200):
        data_dir = str(tmp_path / f"k{k}" / "data")
        acked = Acked()
        daemon = Daemon(data_dir, *FLAGS, crash_at=(k, PATTERN))
        try:
            daemon.start()
        except RuntimeError:
            finished = False  # crashed in the start-up checkpoint, before serving
        else:
            finished = await _workload(daemon.url, acked)
        # The SIGTERM checkpoint is a crash point too: -9 there means keep sweeping.
        code = daemon.terminate() if finished else daemon.proc.wait(60)
        if code == 0:
            break
        assert code == -9, f"k={k}: the daemon exited {code}, not by SIGKILL"
        crash_points += 1
        restarted = Daemon(data_dir, *FLAGS).start()
        await _verify(restarted.url, acked)
        assert restarted.terminate() == 0, restarted.log_text()
    else:
        pytest.fail("the workload never finished: the sweep did not reach a crash-free run")
    print(f"checkpoint crash sweep: {crash_points} crash points, k={k} ran clean")
    assert crash_points >= 10, f"only {crash_points} crash points: the sweep covers too little"
