"""A full ledger dir through a kill -9 (docs/design.md §3.8, bookie/storage_routes.py PL2;
issue 58's review): three ledger dirs, dir 1 a real 16 MiB tmpfs filled past
disk_usage_threshold. Ledger 7 (7 mod 3 = 1) is placed in dir 2 while the bookie runs; the
daemon is SIGKILLed before any checkpoint writes the ledger's state; replay must place it in
dir 2 again, where its later adds go, not in the full dir 1 for good.
Where mounting is impossible (not root) the test skips with the reason; that is not a pass.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

from api.client import BookieClient
from bookie.entry import frame_entry, master_key
from tests.support import small_fs
from tests.support.conditions import until
from tests.support.servers import Daemon

KEY = master_key(b"full-dir")
MiB = 1 << 20


def _entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id, b"%d/%d " % (
        ledger_id, entry_id) * 40)


def _info(url: str) -> dict:
    with urllib.request.urlopen(url + "/v1/bookie/info", timeout=10) as reply:
        return json.load(reply)


def _fill(mount: str, used_ratio: float) -> None:
    st = os.statvfs(mount)
    total = st.f_blocks * st.f_frsize
    with open(os.path.join(mount, "ballast"), "wb") as handle:
        while (room := st.f_bavail * st.f_frsize - int(total * (1 - used_ratio))) > 0:
            handle.write(b"\xba" * min(room, MiB))
            handle.flush()
            os.fsync(handle.fileno())
            st = os.statvfs(mount)


@pytest.fixture
def full_dir(tmp_path):
    reason = small_fs.unavailable()
    if reason is not None:
        pytest.skip(f"a full ledger dir needs a real small file system: {reason}")
    with small_fs.tmpfs(str(tmp_path / "ledgers1"), 16 * MiB) as mount:
        yield mount


async def test_a_ledger_placed_off_a_full_dir_stays_off_it_after_kill9(tmp_path, full_dir):
    ledger_dirs = ",".join([str(tmp_path / "ledgers0"), full_dir, str(tmp_path / "ledgers2")])
    flags = ("--ledger-dirs", ledger_dirs, "--journal-dirs", str(tmp_path / "journal"),
             "--checkpoint-interval-ms", "3600000", "--gc-interval-ms", "0",
             "--disk-check-interval-ms", "20", "--disk-usage-threshold", "0.8",
             "--disk-usage-warn-threshold", "0.7", "--disk-usage-lwm-threshold", "0.6")
    data_dir = str(tmp_path / "data")
    daemon = Daemon(data_dir, *flags).start()
    try:
        _fill(full_dir, 0.9)
        await until(lambda: _full(daemon.url), "dir 1 seen full", timeout_s=20)
        async with BookieClient(daemon.url) as client:
            for entry_id in range(5):
                await client.add_entry(7, entry_id, _entry(7, entry_id), KEY)
        assert _info(daemon.url)["ledgersByDir"] == [0, 0, 1]  # PL2 while it runs
    finally:
        daemon.kill9()  # before any checkpoint: ledger 7's state is only in the journal
    daemon = Daemon(data_dir, *flags).start()
    try:
        assert _info(daemon.url)["ledgersByDir"] == [0, 0, 1]  # replay placed it off dir 1
        async with BookieClient(daemon.url) as client:
            await client.add_entry(7, 5, _entry(7, 5), KEY)
            for entry_id in range(6):
                assert await client.read_entry(7, entry_id) == _entry(7, entry_id)
            await client.checkpoint()
        assert _info(daemon.url)["ledgersByDir"] == [0, 0, 1]
    finally:
        assert daemon.terminate() == 0


def _full(url: str) -> bool:
    """Ledger dir 1 (the tmpfs) is full, the others are not."""
    levels = {d["path"]: d["level"] for d in _info(url)["disks"].values()}
    return [level for path, level in levels.items() if "ledgers1" in path] == ["full"]
