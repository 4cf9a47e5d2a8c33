"""A full disk, for real (docs/design.md §3.6): a 64 MiB tmpfs mounted by the test (as root).

Filled under load by a ballast file beside the bookie's own writes: the bookie goes
READ_ONLY(full) and plain adds get 503 EREADONLY, every acknowledged add still reads back,
fences, recovery adds and explicit LACs still pass while free space is above the reserved
floor and get 503 below it; once space is freed the bookie is writable again by itself.
Where mounting is impossible (not root) the test skips with the reason; that is not a pass.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from api.client import BookieClient
from bookie.config import BookieConfig
from bookie.entry import frame_entry, frame_lac, master_key
from bookie.errors import ReadOnly
from tests.support import small_fs
from tests.support.servers import running_bookie

KEY = master_key(b"full")
MiB = 1 << 20
SIZE = 64 * MiB
RESERVED = 8 * MiB        # privileged writes stop below this much free space
FULL_FREE = 11 * MiB      # ballast leaves this much: over 80 % used, above the floor
FLOOR_FREE = 5 * MiB      # then this much: below the floor


def _config(data_dir: str) -> BookieConfig:
    return BookieConfig(data_dir=data_dir, port=0, journal_prealloc_bytes=64 * 1024,
                        journal_max_bytes=1 * MiB, entrylog_max_bytes=1 * MiB,
                        checkpoint_interval_ms=200, disk_check_interval_ms=20,
                        disk_usage_threshold=0.80, disk_usage_warn_threshold=0.70,
                        disk_usage_lwm_threshold=0.60, disk_reserved_bytes=RESERVED)


def _entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id, bytes([entry_id % 251]) * 1024)


def _free(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _grow_ballast(path: str, mount: str, leave_free: int) -> None:
    """Append to the ballast, synced, until the file system has about ``leave_free`` left."""
    with open(path, "ab") as handle:
        while (room := _free(mount) - leave_free) > 0:
            handle.write(b"\xba" * min(room, MiB))
            handle.flush()
            os.fsync(handle.fileno())


async def _until(predicate, what: str, timeout_s: float = 20.0):
    """Poll an async predicate with a bound (the disk monitor runs every 20 ms)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.02)  # noqa: sleep-ok (bounded poll of the monitor's effect)
    pytest.fail(f"timed out waiting for {what}")


class Load:
    """Writers adding to their own ledgers until the bookie refuses with EREADONLY."""

    def __init__(self, client: BookieClient, acked_before_fill: int = 200) -> None:
        self.client = client
        self.acked: dict[tuple[int, int], bytes] = {}
        self.refusals: list[ReadOnly] = []
        self.acked_before_fill = acked_before_fill
        self.under_load = asyncio.Event()  # set once that many adds are acknowledged

    async def writer(self, ledger_id: int) -> None:
        for entry_id in range(1_000_000):
            data = _entry(ledger_id, entry_id)
            try:
                await self.client.add_entry(ledger_id, entry_id, data, KEY)
            except ReadOnly as refusal:
                self.refusals.append(refusal)
                return
            self.acked[(ledger_id, entry_id)] = data
            if len(self.acked) >= self.acked_before_fill:
                self.under_load.set()

    async def wait_under_load(self, writers: list[asyncio.Task]) -> None:
        """Until ``acked_before_fill`` adds are acknowledged; a writer ending first fails."""
        waiter = asyncio.ensure_future(self.under_load.wait())
        await asyncio.wait([waiter, *writers], timeout=30, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        assert self.under_load.is_set(), [w.exception() for w in writers if w.done()]

    async def check_acked(self) -> None:
        for (ledger_id, entry_id), data in self.acked.items():
            assert await self.client.read_entry(ledger_id, entry_id) == data


@pytest.fixture
def small_tmpfs(tmp_path):
    reason = small_fs.unavailable()
    if reason is not None:
        pytest.skip(f"full-disk test needs a real small file system: {reason}")
    with small_fs.tmpfs(str(tmp_path / "fs"), SIZE) as mount:
        yield mount


async def test_full_disk_goes_read_only_keeps_data_and_comes_back_by_itself(small_tmpfs):
    mount = small_tmpfs
    ballast = os.path.join(mount, "ballast")
    async with running_bookie(_config(os.path.join(mount, "data"))) as running:
        async with BookieClient(running.url) as client:
            load = Load(client)
            writers = [asyncio.create_task(load.writer(ledger)) for ledger in (1, 2, 3)]
            await load.wait_under_load(writers)
            await asyncio.to_thread(_grow_ballast, ballast, mount, FULL_FREE)
            await asyncio.wait_for(asyncio.gather(*writers), 30)  # each ends on EREADONLY
            await _read_only_full(client, load)
            await _privileged_pass_above_the_floor(client, load)
            await asyncio.to_thread(_grow_ballast, ballast, mount, FLOOR_FREE)
            await _privileged_refused_below_the_floor(client, running)
            os.unlink(ballast)
            freed = time.monotonic()
            await _until(client.ready, "writable again after space came back")
            back_s = time.monotonic() - freed
            await client.add_entry(5, 0, _entry(5, 0), KEY)  # a plain add: 200 again
            await load.check_acked()
    print(f"full disk: {len(load.acked)} adds acked and intact, {len(load.refusals)} writers "
          f"refused 503 EREADONLY at {FULL_FREE // MiB} MiB free; fence, recovery add, "
          f"explicit LAC passed there and 503 at {FLOOR_FREE // MiB} MiB (floor "
          f"{RESERVED // MiB} MiB); writable again {back_s * 1000:.0f} ms after freeing")


async def _read_only_full(client: BookieClient, load: Load) -> None:
    assert load.refusals and all(r.code == "EREADONLY" and r.http_status == 503
                                 for r in load.refusals)
    info = await client.info()
    assert info["state"] == "read_only" and info["readOnlyReasons"] == ["full"], info
    assert await client.ready() is False
    await load.check_acked()  # reads are served, every acknowledged add is intact
    with pytest.raises(ReadOnly):
        await client.add_entry(4, 0, _entry(4, 0), KEY)


async def _privileged_pass_above_the_floor(client: BookieClient, load: Load) -> None:
    """Ledger recovery needs fence, recovery adds and explicit LACs on a full bookie."""
    await client.fence(1, KEY)
    last = max(entry for ledger, entry in load.acked if ledger == 2)
    data = _entry(2, last + 1)
    await client.add_entry(2, last + 1, data, KEY, recovery=True)
    load.acked[(2, last + 1)] = data
    await client.write_lac(2, KEY, frame_lac(2, last))


async def _privileged_refused_below_the_floor(client: BookieClient, running) -> None:
    async def below() -> bool:
        free = running.bookie.disk_monitor.min_free_bytes()
        return free is not None and free < RESERVED

    await _until(below, "the monitor to see free space below the reserved floor")
    with pytest.raises(ReadOnly, match="reserved"):
        await client.fence(3, KEY)
    with pytest.raises(ReadOnly, match="reserved"):
        await client.add_entry(3, 10**5, _entry(3, 10**5), KEY, recovery=True)
