"""A real EIO on the real path (docs/design.md §1.5, A5), without device-mapper.

The bookie's data dir is an ext4 file system on a loop device whose sparse 64 MiB image lives
on a 24 MiB tmpfs (tests/support/small_fs.py). Adds fill it until the tmpfs under the image
is full: the loop device then fails writes, and the kernel answers the next fsync or
fdatasync with an error (EIO or ENOSPC from the failed device write; EROFS once ext4 has
aborted its journal). The failing add is answered 500 EIO, the bookie turns
READ_ONLY(io) and nothing brings it back short of a restart. Then the image is given room,
repaired with e2fsck (its journal was aborted) and mounted again, and a restarted bookie reads
back every add that was acknowledged before the failure.

device-mapper's 'error' and 'flakey' targets would inject EIO more precisely, but this
kernel has no device-mapper (``dmsetup targets``: "/dev/mapper/control: open failed: No such
device"); the loop-over-full-tmpfs device gives a real EIO from the real write path instead.
Needs root; skips with the reason elsewhere, and a skip is not a pass.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os

import pytest

from api.client import BookieClient
from bookie.config import BookieConfig
from bookie.entry import frame_entry, master_key
from bookie.errors import BookieError, IOFailure
from tests.support import small_fs
from tests.support.servers import release_after_io_failure, running_bookie

KEY = master_key(b"real eio")
MiB = 1 << 20
PAYLOAD = 16 * 1024
ADD_BYTES_MAX = 120 * MiB  # far past what the tmpfs under the image holds: EIO comes first


def _config(data_dir: str) -> BookieConfig:
    return BookieConfig(data_dir=data_dir, port=0, journal_prealloc_bytes=1 * MiB,
                        journal_max_bytes=8 * MiB, entrylog_max_bytes=8 * MiB,
                        checkpoint_interval_ms=100)


def _entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id,
                       bytes([(ledger_id * 31 + entry_id) % 251]) * PAYLOAD)


class Writers:
    def __init__(self, client: BookieClient) -> None:
        self.client = client
        self.acked: dict[tuple[int, int], bytes] = {}
        self.errors: list[BookieError] = []

    async def run(self, ledger_id: int) -> None:
        for entry_id in range(ADD_BYTES_MAX // PAYLOAD // 4):
            data = _entry(ledger_id, entry_id)
            try:
                await self.client.add_entry(ledger_id, entry_id, data, KEY)
            except BookieError as error:  # anything but 500 EIO fails the test below
                self.errors.append(error)
                return
            self.acked[(ledger_id, entry_id)] = data


@pytest.fixture
def loop_fs(tmp_path):
    reason = small_fs.unavailable(loop=True)
    if reason is not None:
        pytest.skip(f"real-device EIO test needs a loop-mounted ext4: {reason}")
    with small_fs.loop_ext4_on_small_backing(str(tmp_path), 24 * MiB, 64 * MiB) as fs:
        yield fs


@pytest.mark.timeout(180)
async def test_real_eio_fails_the_add_sticks_read_only_and_loses_no_acked_add(loop_fs):
    config = _config(os.path.join(loop_fs.mountpoint, "data"))
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as client:
            writers = Writers(client)
            await asyncio.wait_for(asyncio.gather(*(writers.run(i) for i in (1, 2, 3, 4))), 120)
            assert writers.errors, "the device never failed: nothing was tested"
            assert all(isinstance(e, IOFailure) and e.http_status == 500
                       for e in writers.errors), [f"{e.code}: {e}" for e in writers.errors]
            failure = await _stuck_read_only(client, running)
        release_after_io_failure(running.bookie)  # or the unmount below finds it busy
    acked = dict(writers.acked)
    await _repair_and_restart(loop_fs, config, acked)
    print(f"real EIO: {len(acked)} adds acked before the device failed "
          f"({len(acked) * PAYLOAD // MiB} MiB), {len(writers.errors)} answered 500 EIO; "
          f"read-only: {failure}; all {len(acked)} read back after e2fsck and restart")


async def _stuck_read_only(client: BookieClient, running) -> str:
    info = await client.info()
    assert info["state"] == "read_only" and "io" in info["readOnlyReasons"], info
    with pytest.raises(IOFailure):
        await client.add_entry(9, 0, _entry(9, 0), KEY)
    await client._request("PUT", "/v1/bookie/readonly", data=json.dumps({"readOnly": False}),
                          headers={"Content-Type": "application/json"}, admin=True)
    running.bookie.poll_disks()
    assert (await client.info())["state"] == "read_only"
    assert await client.ready() is False
    return info["failure"]


async def _repair_and_restart(fs, config: BookieConfig, acked: dict) -> None:
    fs.unmount()
    small_fs.resize_tmpfs(fs.backing, 128 * MiB)
    assert fs.fsck() in (0, 1, 2), "e2fsck could not repair the image"
    fs.mount()
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as client:
            for (ledger_id, entry_id), data in acked.items():
                assert await client.read_entry(ledger_id, entry_id) == data, \
                    f"acked entry {ledger_id}/{entry_id} lost after the device failed"


def _fill(path: str, limit_bytes: int = 64 * MiB) -> OSError:
    """Write and fsync a filler file until the device under it fails; the error it gave."""
    chunk = os.urandom(MiB)
    with open(path, "wb") as handle:
        for _ in range(limit_bytes // MiB):
            try:
                handle.write(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            except OSError as error:
                return error
    raise AssertionError(f"{limit_bytes} bytes written and synced: the device never failed")


@pytest.mark.timeout(180)
async def test_a_failed_delete_tombstone_write_makes_the_bookie_read_only_io(loop_fs):
    """docs/design.md §1.5 outside the checkpoint (issue 13, "also fix"): a ledger deletion's
    tombstone is a synced RocksDB write of its own; when the device fails it, the delete is
    answered 500 EIO and the bookie turns READ_ONLY(io), as for every other failed write."""
    config = _config(os.path.join(loop_fs.mountpoint, "data"))
    config = dataclasses.replace(config, checkpoint_interval_ms=3_600_000)
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as client:
            for entry_id in range(3):
                await client.add_entry(5, entry_id, _entry(5, entry_id), KEY)
            await client.checkpoint()
            filler = _fill(os.path.join(loop_fs.mountpoint, "filler"))
            assert (await client.info())["state"] == "writable"  # nothing else noticed yet
            with pytest.raises(IOFailure):
                await client.delete_ledger(5)
            info = await client.info()
            assert info["state"] == "read_only" and "io" in info["readOnlyReasons"], info
            assert "ledgers" in info["failure"], info["failure"]
        release_after_io_failure(running.bookie)
    print(f"filler failed with {filler!r}; delete answered 500 EIO; failure: {info['failure']}")
