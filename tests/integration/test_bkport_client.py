"""BkBookieClient (api/client/bkport/) against a real bookie daemon's ``bookie_port``: the
calls the replicated client makes, over BookKeeper's v3 protocol, with BookieClient's answers
and errors (BC1-BC4), and the connection's rules (KC1-KC5). Real TCP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import re
import urllib.request

import pytest

from api import wire
from api.client import BookieClient
from api.client.bkport.client import BkBookieClient
from api.client.bkport.connection import ConnectionLost
from api.client.bkport.errors import NotOnBookKeeperProtocol
from api.client.codec import LedgerCodec
from bookie.errors import BadRequest, Fenced, NoEntry, NoLedger, Unauthorized
from tests.support.servers import Daemon
from tests.support.zookeeper import free_port

QUIET = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    started = Daemon(str(tmp_path_factory.mktemp("bkport") / "data"), *QUIET,
                     "--bookie-port", "0").start()
    yield started
    started.terminate()


def codec(ledger_id: int, password: bytes = b"pw") -> LedgerCodec:
    return LedgerCodec.for_password(ledger_id, password)


def payload(c: LedgerCodec, entry_id: int) -> bytes:
    return f"entry {entry_id} of {c.ledger_id} ".encode() * 3


def frames(c: LedgerCodec, ids) -> list[bytes]:
    return [c.frame(e, e - 1, 0, payload(c, e)) for e in ids]


def read_requests(daemon) -> int:
    """READ_ENTRY requests the bookie answered (v3 reads and v2 batch reads alike)."""
    with urllib.request.urlopen(daemon.url + "/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(r'^bookkeeper_server_READ_ENTRY_REQUEST_count\{success="true"\} (\S+)',
                      text, re.M)
    return int(float(found.group(1))) if found else 0


def client_of(daemon) -> BkBookieClient:
    return BkBookieClient(f"127.0.0.1:{daemon.bk_port}")


async def test_adds_read_back_byte_for_byte_on_both_ports(daemon):
    c = codec(101)
    entries = frames(c, range(3))
    async with client_of(daemon) as bk, BookieClient(daemon.url) as http:
        for entry_id, data in enumerate(entries):
            assert await bk.add_entry(101, entry_id, data, c.master_key) == \
                {"ledgerId": 101, "entryId": entry_id}
        for entry_id, data in enumerate(entries):
            assert await bk.read_entry(101, entry_id) == data
            assert await http.read_entry(101, entry_id) == data  # stored as sent
        assert await bk.read_range(101, 0, 5) == entries
        assert await bk.read_lac(101) == 1  # entry 2's piggybacked LAC
        assert bk.connection.connections_made == 1  # KC1: one connection for all of it


async def test_pipelined_adds_and_held_reads(daemon):
    c = codec(102)
    entries = frames(c, range(300))
    async with client_of(daemon) as bk:
        assert await bk.add_batch(102, entries[:200], c.master_key) == list(range(200))
        batch = b"".join(c.frame_batch_item(e, e - 1, 0, payload(c, e))
                         for e in range(200, 300))
        await bk.add_batch_body(102, batch, c.master_key)
        reads_before = read_requests(daemon)
        held, scanned = await bk.read_held(102, 0, 299)  # BC5: one v2 batch read
        assert scanned == 299 and held == entries
        assert read_requests(daemon) - reads_before == 1 and bk.batches.offered
        held, scanned = await bk.read_held(102, 250, 400)  # BV1: the run up to a missing id
        assert scanned == 299 and held == entries[250:]
        assert await bk.read_held(102, 300, 400) == ([], 300)
        held, scanned = await bk.read_held(102, 1, 400, step=3)
        assert [c.decode(h, None).entry_id for h in held] == list(range(1, 300, 3))[:128]
        assert scanned == 1 + 127 * 3
        body, scanned = await bk.read_held_body(102, 290, 320)
        assert scanned == 299 and wire.decode_batch(body, 2**20, 100) == entries[290:]
        assert bk.connection.connections_made == 1


async def test_fence_then_adds_are_refused_fenced_and_recovery_adds_pass(daemon):
    c = codec(103)
    entries = frames(c, range(6))
    async with client_of(daemon) as bk:
        await bk.add_batch(103, entries[:5], c.master_key)
        assert await bk.fence(103, c.master_key) == {"lac": 3, "lastEntryId": 4}
        with pytest.raises(Fenced):
            await bk.add_entry(103, 5, entries[5], c.master_key)
        with pytest.raises(Fenced):  # BC2: Fenced ranks first whatever else failed
            await bk.add_batch(103, [entries[5], b"\0" * 40], c.master_key)
        await bk.add_entry(103, 5, entries[5], c.master_key, recovery=True)
        assert await bk.read_entry(103, 5) == entries[5]
        # A ledger with no entry fences too: nothing to report.
        assert await bk.fence(104, codec(104).master_key) == {"lac": -1, "lastEntryId": -1}


async def test_statuses_are_the_http_clients_errors(daemon):
    c = codec(105)
    async with client_of(daemon) as bk:
        await bk.add_entry(105, 0, frames(c, [0])[0], c.master_key)
        with pytest.raises(NoEntry):
            await bk.read_entry(105, 7)
        with pytest.raises(NoLedger):
            await bk.read_entry(999_999, 0)
        with pytest.raises(Unauthorized):
            await bk.add_entry(105, 1, frames(c, [1])[0], codec(105, b"other").master_key)
        with pytest.raises(BadRequest):  # bytes that do not name ledger 105, entry 1
            await bk.add_entry(105, 1, frames(c, [2])[0], c.master_key)
        assert await bk.read_held(105, 5, 9) == ([], 5)  # BC5: a batch, its first missing
        assert await bk.read_held(105, 5, 9, step=2) == ([], 9)  # BC3: none, all examined
        with pytest.raises(NoEntry):  # as HTTP's: a range read of nothing
            await bk.read_range(105, 5, 9)
        with pytest.raises(NoLedger):  # BC3: the first id's error is the call's
            await bk.read_held(999_999, 0, 9)
        for call in (bk.ledger_info(105), bk.list_ledgers(), bk.delete_ledger(105),
                     bk.checkpoint(), bk.health()):
            with pytest.raises(NotOnBookKeeperProtocol) as raised:  # BC4
                await call
            assert isinstance(raised.value, BadRequest)
            assert raised.value.operation in str(raised.value)


async def test_lac_long_poll_answers_with_the_next_entry_piggybacked(daemon):
    c = codec(106)
    entries = frames(c, range(4))
    async with client_of(daemon) as bk:
        await bk.add_batch(106, entries[:2], c.master_key)  # LAC 0
        assert await bk.read_lac_long_poll(106, 0, 100) == (0, None)  # timed out
        poll = asyncio.ensure_future(bk.read_lac_long_poll(106, 0, 30_000))
        await bk.add_entry(106, 2, entries[2], c.master_key)  # LAC 1
        assert await asyncio.wait_for(poll, 20) == (1, entries[1])
        waiting = asyncio.ensure_future(bk.read_lac(106, wait_for_gt=1, timeout_ms=30_000))
        await bk.add_entry(106, 3, entries[3], c.master_key)  # LAC 2
        assert await asyncio.wait_for(waiting, 20) == 2


async def test_write_lac_read_lac_force_and_the_entry_list(daemon):
    c = codec(107)
    entries = frames(c, [*range(5), *range(10, 13)])
    async with client_of(daemon) as bk:
        for data in entries:
            await bk.add_entry(107, c.decode(data, None).entry_id, data, c.master_key,
                               deferred_sync=True)
        assert await bk.force(107, c.master_key) == 12
        assert await bk.read_lac(107) == 11
        assert await bk.write_lac(107, c.master_key, c.lac_body(12)) == 12
        assert await bk.read_lac(107) == 12
        assert (await bk.fence(107, c.master_key))["lac"] == 12  # the explicit LAC counts
        assert await bk.entry_id_ranges(107) == [[0, 4], [10, 12]]
        assert await bk.force(999_998, c.master_key) == -1  # FL1: EOK, nothing held
        info = await bk.info()
        assert 0 < info["disks"]["ledgers"]["freeBytes"] <= info["disks"]["ledgers"]["totalBytes"]
        assert await bk.ready()


async def test_a_lost_connection_fails_pending_requests_and_the_next_call_reconnects(tmp_path):
    flags = (*QUIET, "--port", str(free_port()), "--bookie-port", str(free_port()))
    data_dir = str(tmp_path / "data")
    daemon = Daemon(data_dir, *flags).start()
    c = codec(108)
    entries = frames(c, range(2))
    try:
        async with client_of(daemon) as bk:
            await bk.add_batch(108, entries, c.master_key)
            polls = [asyncio.ensure_future(bk.read_lac_long_poll(108, 0, 60_000))
                     for _ in range(3)]
            assert await bk.read_entry(108, 1) == entries[1]  # the polls were sent first
            daemon.kill9()
            for poll in polls:  # KC3: at once, not after the 60 s poll
                with pytest.raises(ConnectionLost):
                    await asyncio.wait_for(poll, 10)
            with pytest.raises(OSError):  # nothing listens: the connect fails
                await bk.read_entry(108, 0)
            daemon = Daemon(data_dir, *flags).start()
            assert await bk.read_entry(108, 1) == entries[1]  # KC4
            assert bk.connection.connections_made == 2
    finally:
        if daemon.proc.poll() is None:
            daemon.terminate()
