"""I/O errors on the durable path (docs/design.md §1.5, A5), injected through the Disk seam.

A real in-process bookie over HTTP on a FaultyDisk (tests/support/faulty_disk.py): a write,
fdatasync or rename error on the journal, an entry log or lastMark means the add is not
acknowledged (500 EIO), the bookie turns READ_ONLY(io) and stays so until a restart (no
operator flag or disk check clears it), no failed fsync is ever retried or reported as a
success, and after a restart every acknowledged add is back.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import threading

import aiohttp
import pytest

from api.client import BookieClient
from bookie.checkpoint import CheckpointThread
from bookie.config import BookieConfig
from bookie.entry import frame_entry, frame_lac, master_key
from bookie.errors import IOFailure, NoEntry
from journal import format as jformat
from journal.journal import Journal
from tests.support.faulty_disk import FaultyDisk
from tests.support.servers import release_after_io_failure, running_bookie

KEY = master_key(b"eio")


def _config(data_dir: str) -> BookieConfig:
    return BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                        journal_prealloc_bytes=64 * 1024, entrylog_max_bytes=64 * 1024)


def _entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id, b"e" * 300)


async def _add_acked(client: BookieClient, ledger_id: int, count: int) -> dict[int, bytes]:
    acked = {}
    for entry_id in range(count):
        await client.add_entry(ledger_id, entry_id, _entry(ledger_id, entry_id), KEY)
        acked[entry_id] = _entry(ledger_id, entry_id)
    return acked


async def _assert_eio(awaitable) -> IOFailure:
    with pytest.raises(IOFailure) as raised:
        await awaitable
    assert raised.value.code == "EIO" and raised.value.http_status == 500
    return raised.value


async def _assert_stuck_read_only(client: BookieClient, running) -> None:
    """READ_ONLY(io): writes of every kind are 500 EIO; neither the operator flag nor a disk
    check brings the bookie back; /ready stays 503."""
    await _assert_eio(client.add_entry(1, 100, _entry(1, 100), KEY))
    await _assert_eio(client.fence(1, KEY))
    await _assert_eio(client.write_lac(1, KEY, frame_lac(1, 0)))
    await _assert_eio(client.force(1, KEY))
    await client._request("PUT", "/v1/bookie/readonly", data=json.dumps({"readOnly": False}),
                          headers={"Content-Type": "application/json"}, admin=True)
    running.bookie.poll_disks()
    info = await client.info()
    assert info["state"] == "read_only" and "io" in info["readOnlyReasons"], info
    assert await client.ready() is False


async def _restart_and_check(data_dir: str, acked: dict[int, bytes], ledger_id: int = 1,
                             not_acked: dict[int, bytes] | None = None) -> None:
    """A restart on a healthy disk: writable, every acked add back, unacked ones absent or
    byte-identical to what was sent (an unacknowledged write may have reached the disk)."""
    async with running_bookie(_config(data_dir)) as running:
        async with BookieClient(running.url) as client:
            assert await client.ready() is True
            for entry_id, data in acked.items():
                assert await client.read_entry(ledger_id, entry_id) == data
            for entry_id, data in (not_acked or {}).items():
                try:
                    assert await client.read_entry(ledger_id, entry_id) == data
                except NoEntry:
                    pass
            await client.add_entry(ledger_id, 1000, _entry(ledger_id, 1000), KEY, recovery=True)


@pytest.mark.parametrize("op, error", [("write", errno.EIO), ("fdatasync", errno.EIO),
                                       ("write", errno.ENOSPC)])
async def test_journal_error_fails_the_add_and_read_only_lasts_until_restart(data_dir, op,
                                                                             error):
    disk = FaultyDisk()
    async with running_bookie(_config(data_dir), disk=disk) as running:
        async with BookieClient(running.url) as client:
            acked = await _add_acked(client, 1, 5)
            disk.fail(op, "*.txn", error=error)
            await _assert_eio(client.add_entry(1, 5, _entry(1, 5), KEY))
            await _assert_stuck_read_only(client, running)
            for entry_id, data in acked.items():  # reads are still served
                assert await client.read_entry(1, entry_id) == data
    release_after_io_failure(running.bookie)
    assert [call[0] for call in disk.injected] == [op]
    await _restart_and_check(data_dir, acked, not_acked={5: _entry(1, 5)})


async def test_failed_journal_fdatasync_is_never_retried_nor_reported_as_success(data_dir):
    # Linux may drop the dirty pages after a failed fsync and let the next one succeed
    # (fsyncgate, A5): only the first fdatasync fails here, so a retry would "succeed".
    disk = FaultyDisk()
    async with running_bookie(_config(data_dir), disk=disk) as running:
        async with BookieClient(running.url) as client:
            acked = await _add_acked(client, 1, 3)
            await client.add_entry(2, 0, _entry(2, 0), KEY, deferred_sync=True)
            await client.force(2, KEY)
            # Acknowledged once queued: its group syncs now or fails with the ones below.
            await client.add_entry(2, 1, _entry(2, 1), KEY, deferred_sync=True)
            rule = disk.fail("fdatasync", "*.txn", times=1)
            results = await asyncio.gather(
                *(client.add_entry(1, i, _entry(1, i), KEY) for i in range(3, 9)),
                client.force(2, KEY), return_exceptions=True)
            assert all(isinstance(r, IOFailure) and r.code == "EIO" for r in results), results
            await _assert_stuck_read_only(client, running)
            # Every journal fdatasync since the rule is counted by it (not by a count taken
            # before: the deferred add's group may sync in between): exactly one, and it
            # failed. So it was never retried and nothing was synced after it.
            assert (rule.seen, rule.failed) == (1, 1)
    release_after_io_failure(running.bookie)
    await _restart_and_check(data_dir, acked)


@pytest.mark.parametrize("op, pattern", [("fdatasync", "*.log"), ("write", "*.log"),
                                         ("fsync", "*lastMark.tmp"), ("rename", "*lastMark"),
                                         ("fsync_dir", "*/ledgers/current")])
async def test_checkpoint_error_leaves_last_mark_and_turns_read_only(data_dir, op, pattern):
    # A failed dir fsync comes after the rename: the new name may or may not be durable,
    # and either mark is safe, since the flush it covers completed before the rename.
    disk = FaultyDisk()
    config = _config(data_dir)
    mark_path = os.path.join(config.ledger_dir, "lastMark")
    async with running_bookie(config, disk=disk) as running:
        async with BookieClient(running.url) as client:
            acked = await _add_acked(client, 1, 20)
            await client.checkpoint()  # a first lastMark, then more adds for the next one
            for entry_id in range(20, 30):
                await client.add_entry(1, entry_id, _entry(1, entry_id), KEY)
                acked[entry_id] = _entry(1, entry_id)
            with open(mark_path, "rb") as handle:
                mark_before = handle.read()
            disk.fail(op, pattern)
            await _assert_eio(client.checkpoint())
            with open(mark_path, "rb") as handle:
                mark_after = handle.read()
            if op != "fsync_dir":
                assert mark_after == mark_before  # C3: the mark did not move
            assert mark_after >= mark_before  # big-endian (id, offset): never backwards
            assert running.bookie._checkpointer.persisted.encode() == mark_before
            await _assert_stuck_read_only(client, running)
            for entry_id, data in acked.items():
                assert await client.read_entry(1, entry_id) == data
    release_after_io_failure(running.bookie)
    await _restart_and_check(data_dir, acked)


async def test_a_checkpoint_requested_before_an_io_error_fails_instead_of_hanging(data_dir):
    """Regression (found by the power-loss sweep): an I/O error halted the checkpoint thread
    and left requests already queued for it pending forever."""
    disk = FaultyDisk()
    async with running_bookie(_config(data_dir), disk=disk) as running:
        async with BookieClient(running.url) as client:
            acked = await _add_acked(client, 1, 5)
            hold = disk.hold("fdatasync", "*.log")
            first = asyncio.create_task(client.checkpoint())
            assert await asyncio.to_thread(hold.reached.wait, 30)  # the thread is mid-run
            queued = running.bookie.checkpoints.request()  # waits for the next run
            disk.fail("fdatasync", "*.txn")
            await _assert_eio(client.add_entry(1, 5, _entry(1, 5), KEY))  # -> READ_ONLY(io)
            with pytest.raises(IOFailure):
                await asyncio.wait_for(asyncio.wrap_future(queued), 30)
            hold.release()
            await asyncio.wait_for(asyncio.gather(first, return_exceptions=True), 30)
    release_after_io_failure(running.bookie)
    await _restart_and_check(data_dir, acked)


def test_the_journal_reports_its_io_error_before_failing_the_waiters(tmp_path):
    """Regression (found by these EIO tests, intermittently): the journal failed its waiters
    before telling the node, so a 500 EIO could be answered while /ready still said 200 and
    the state writable. Both reach the loop in call order: telling first closes the gap."""
    order: list[str] = []
    done = threading.Event()

    def complete_group(tokens, error):
        order.append("waiters failed" if error is not None else "waiters ok")
        if error is not None:
            done.set()

    disk = FaultyDisk()
    journal = Journal(disk, str(tmp_path), complete_group=complete_group,
                      on_io_error=lambda error: order.append("io error told"),
                      prealloc_bytes=64 * 1024)
    journal.start()
    try:
        disk.fail("fdatasync", "*.txn")
        journal.submit(jformat.encode_add(_entry(1, 0)), "token")
        assert done.wait(30)
    finally:
        journal.close()
    assert order == ["io error told", "waiters failed"]


def test_a_failed_checkpoint_reports_its_io_error_before_failing_the_requests():
    """The same order for checkpoints: the node is read-only before a requester hears."""
    order: list[str] = []

    class Failing:
        persisted = None

        def run(self, delete_journals: bool):
            raise IOFailure("injected: entry log fsync failed")

    thread = CheckpointThread(Failing(), 3600.0,
                              on_io_error=lambda error: order.append("io error told"))
    request = thread.request()
    request.add_done_callback(lambda future: order.append("request failed"))
    thread.start()
    with pytest.raises(IOFailure):
        request.result(30)
    thread.stop()
    assert order == ["io error told", "request failed"]


def test_a_record_submitted_while_the_journal_tells_its_io_error_fails_only_after(tmp_path):
    """Regression: the journal refused submits before telling the node, so an add racing
    the failure could be answered 500 EIO while the bookie was still writable."""
    order: list[str] = []
    telling, told = threading.Event(), threading.Event()
    late_done = threading.Event()

    def on_io_error(error):
        telling.set()
        assert told.wait(30), "the test never let the journal go on"
        order.append("io error told")

    def complete_group(tokens, error):
        order.extend(f"{token} {'failed' if error else 'synced'}" for token in tokens)
        if "late" in tokens:
            late_done.set()

    disk = FaultyDisk()
    journal = Journal(disk, str(tmp_path), complete_group=complete_group,
                      on_io_error=on_io_error, prealloc_bytes=64 * 1024)
    journal.start()
    try:
        disk.fail("fdatasync", "*.txn")
        journal.submit(jformat.encode_add(_entry(1, 0)), "first")
        assert telling.wait(30)
        journal.submit(jformat.encode_add(_entry(1, 1)), "late")  # not refused: not told yet
        told.set()
        assert late_done.wait(30)
    finally:
        told.set()
        journal.close()
    assert order == ["io error told", "first failed", "late failed"]


def test_a_checkpoint_requested_while_the_io_error_is_told_fails_only_after():
    """Regression: the checkpoint thread refused new requests before telling the node, so a
    checkpoint racing the failure could be answered 500 EIO while /ready still said 200."""
    order: list[str] = []
    telling, told = threading.Event(), threading.Event()

    class Failing:
        persisted = None

        def run(self, delete_journals: bool):
            raise IOFailure("injected: entry log fsync failed")

    def on_io_error(error):
        telling.set()
        assert told.wait(30), "the test never let the checkpoint thread go on"
        order.append("io error told")

    thread = CheckpointThread(Failing(), 3600.0, on_io_error=on_io_error)
    thread.request()
    thread.start()
    try:
        assert telling.wait(30)
        racing = thread.request()
        assert not racing.done()  # not refused before the node was told
        racing.add_done_callback(lambda future: order.append("racing request failed"))
        told.set()
        with pytest.raises(IOFailure):
            racing.result(30)
    finally:
        told.set()
        thread.stop()
    assert order == ["io error told", "racing request failed"]


async def test_a_failed_operator_flag_write_makes_the_bookie_read_only_io(data_dir):
    """docs/design.md §1.5 outside the checkpoint too: the operator flag's fsync failing answered
    500 but left the bookie writable (issue 13, "also fix")."""
    disk = FaultyDisk()
    disk.fail("fsync", "*READONLY.tmp")
    config = BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                          journal_prealloc_bytes=1 << 20)
    async with running_bookie(config, disk=disk) as running:
        async with aiohttp.ClientSession() as session:
            async with session.put(running.url + "/v1/bookie/readonly",
                                   json={"readOnly": True}) as reply:
                assert reply.status == 500 and (await reply.json())["error"] == "EIO"
        assert "io" in running.bookie.readonly_reasons
        assert not running.bookie.ready
        release_after_io_failure(running.bookie)
