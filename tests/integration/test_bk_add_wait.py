"""Adds on bookie_port wait for room instead of being refused (issue 57;
api/server/bk_add_wait.py AW1-AW4, bookie/node/add_room.py AR1-AR3), on a real bookie over
real TCP. The journal is held at its fdatasync by FaultyDisk (the real filesystem with a
sequence point), the write cache by a job that holds the checkpoint thread: the conditions
an operator meets under a burst, made to last as long as the test needs."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading

from api.bkproto import v2, v3
from api.server.bk_listener import bk_serving
from bookie.entry import DigestType, frame_entry, master_key
from tests.integration.test_bk_port_hardening import scrape
from tests.support.bk_client import BkClient
from tests.support.conditions import until
from tests.support.faulty_disk import FaultyDisk
from tests.support.servers import running_bookie

KEY = master_key(b"bk-add-wait")
S = v3.STATUS
KiB, MiB = 1024, 1024 * 1024


def entry(ledger_id: int, entry_id: int, size: int = 16 * KiB) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, 0, b"w" * size, DigestType.CRC32C)


@contextlib.asynccontextmanager
async def listening(config, disk=None):
    async with running_bookie(config, disk=disk) as running:
        async with bk_serving(running.bookie, "127.0.0.1", 0) as port:
            running.bookie.url = running.url  # for scrape()
            yield running.bookie, port


def listener_of(bookie):
    return bookie.stats.bk_port_budget


def held(bookie) -> int:
    return listener_of(bookie).adds_held


async def v2_adds(client: BkClient, ledger_id: int, ids, size: int = 16 * KiB) -> dict:
    """Pipeline v2 adds from a task of their own (the bookie may stop reading them, so the
    sender must not be what the test waits on); their answers, by entry id."""
    frames = b"".join(v2.encode_add(ledger_id, i, KEY, entry(ledger_id, i, size)) for i in ids)
    sending = asyncio.create_task(client.send(frames))
    answers = {}
    while len(answers) < len(ids):
        answer = v2.decode_response(await client.read_frame())
        answers[answer.entry_id] = answer.rc
    await sending
    return answers


async def stored_ids(bookie, ledger_id: int) -> set[int]:
    ranges = await bookie.entry_id_ranges(ledger_id)
    return {i for first, last in ranges for i in range(first, last + 1)}


async def first_entry(port: int, ledger_id: int) -> None:
    """Load the ledger's runtime, so the adds after it take the hot path (BK5)."""
    async with BkClient.connect(port) as client:
        answer = await client.call_v2(v2.encode_add(ledger_id, 0, KEY, entry(ledger_id, 0)))
        assert answer.rc == v2.EOK


async def test_adds_beyond_the_pending_bound_wait_and_every_one_is_stored(bookie_config):
    """AP2: a connection over bookie_max_pending_adds waits for its own adds, refuses none
    (the old listener answered all but two of these ETOOMANYREQUESTS)."""
    config = dataclasses.replace(bookie_config, bookie_max_pending_adds=2)
    async with listening(config) as (bookie, port), BkClient.connect(port) as client:
        requests = [client.request("ADD_ENTRY", ledgerId=4, entryId=i, masterKey=KEY,
                                   body=entry(4, i, 64)) for i in range(50)]
        answers = await client.pipeline(requests)
        assert {answers[r.header.txnId].status for r in requests} == {S["EOK"]}
        assert bookie.stats.bk_refused == {}
        assert listener_of(bookie).adds_waited_total > 0
        assert await stored_ids(bookie, 4) == set(range(50))


async def test_a_full_journal_queue_makes_the_connection_wait_and_loses_nothing(
        bookie_config):
    """The issue's burst: more 16 KiB adds in flight than journal_queue_max_bytes holds.
    While the journal is held the adds wait (the connection not reading), another
    connection's reads are still served, and once it syncs every add is acknowledged and
    stored, none refused."""
    disk = FaultyDisk()
    config = dataclasses.replace(bookie_config, journal_queue_max_bytes=1 * MiB)
    async with listening(config, disk) as (bookie, port):
        await first_entry(port, 9)
        sync = disk.hold("fdatasync", "*.txn")
        async with BkClient.connect(port) as writer, BkClient.connect(port) as reader:
            adds = asyncio.create_task(v2_adds(writer, 9, range(1, 161)))
            await until(lambda: held(bookie) > 0, "adds held for the journal queue")
            assert sync.reached.is_set()
            waiting = next(c for c in listener_of(bookie).connections if c.held)
            assert waiting.reading_stopped.is_set() and waiting.held_for_room
            answer = await reader.call_v2(v2.encode_read(9, 0))  # reads go on
            assert (answer.rc, answer.data) == (v2.EOK, entry(9, 0))
            metrics = await scrape(bookie.url)  # what an operator sees meanwhile
            assert metrics["bookie_bk_adds_waiting"] == held(bookie) > 0
            assert metrics["bookie_bk_adds_waited_total"] >= held(bookie)
            sync.release()
            answers = await adds
        assert set(answers.values()) == {v2.EOK} and len(answers) == 160
        assert bookie.stats.bk_refused == {}
        assert await stored_ids(bookie, 9) == set(range(161))
        assert held(bookie) == 0 and listener_of(bookie).request_bytes == 0  # AW3


async def test_an_add_that_waits_past_bookie_add_wait_ms_is_refused_and_not_stored(
        bookie_config):
    """AW2: the bound on a wait (BookKeeper's dbStorage_maxThrottleTimeMs) ends it with
    ETOOMANYREQUESTS, counted as a refusal; what was refused is not stored, what was
    acknowledged is."""
    disk = FaultyDisk()
    config = dataclasses.replace(bookie_config, journal_queue_max_bytes=1 * MiB,
                                 bookie_add_wait_ms=200)
    async with listening(config, disk) as (bookie, port):
        await first_entry(port, 5)
        sync = disk.hold("fdatasync", "*.txn")
        async with BkClient.connect(port) as client:
            adds = asyncio.create_task(v2_adds(client, 5, range(1, 161)))
            await until(lambda: bookie.stats.bk_refused, "a wait past bookie_add_wait_ms")
            sync.release()
            answers = await adds
        refused = {i for i, rc in answers.items() if rc == v2.ETOOMANYREQUESTS}
        acked = {i for i, rc in answers.items() if rc == v2.EOK}
        assert refused and acked and len(refused) + len(acked) == 160
        assert bookie.stats.bk_refused == {("ADD_ENTRY", "ETOOMANYREQUESTS"): len(refused)}
        assert await stored_ids(bookie, 5) == acked | {0}


async def test_a_full_write_cache_waits_for_the_checkpoint_that_empties_it(bookie_config):
    """The write cache's half of the issue: full while a checkpoint cannot run yet, the
    adds wait (DbLedgerStorage's throttle) and go once the checkpoint has flushed it."""
    config = dataclasses.replace(bookie_config, write_cache_max_bytes=1 * MiB)
    async with listening(config) as (bookie, port):
        await first_entry(port, 12)
        gate, busy = threading.Event(), threading.Event()
        blocker = bookie.checkpoints.submit(lambda: (busy.set(), gate.wait(30)))
        await until(busy.is_set, "the checkpoint thread held")
        async with BkClient.connect(port) as client:
            adds = asyncio.create_task(v2_adds(client, 12, range(1, 121)))
            await until(lambda: held(bookie) > 0, "adds held for the write cache")
            assert "write cache" in bookie.room_for(16 * KiB)
            gate.set()
            answers = await adds
        await asyncio.wrap_future(blocker)
        assert set(answers.values()) == {v2.EOK}
        assert await stored_ids(bookie, 12) == set(range(121))


async def test_waiters_go_first_come_first_served(bookie_config):
    """AR1: a small add that would fit waits behind a large one that came first, and goes
    once the large one has gone. The first client leaves while it waits: a connection
    that is not reading cannot see that (BookKeeper's with autoread off cannot either), so
    its held add goes in its turn and its answer is dropped (PB5); the held bytes all come
    back (AW3, AW4)."""
    disk = FaultyDisk()
    config = dataclasses.replace(bookie_config, journal_queue_max_bytes=1 * MiB)
    async with listening(config, disk) as (bookie, port):
        await first_entry(port, 20)
        await first_entry(port, 21)
        sync = disk.hold("fdatasync", "*.txn")
        async with BkClient.connect(port) as first, BkClient.connect(port) as second:
            await first.send(v2.encode_add(20, 1, KEY, entry(20, 1, 600 * KiB)) +
                             v2.encode_add(20, 2, KEY, entry(20, 2, 600 * KiB)))
            await until(lambda: held(bookie) == 1, "the second large add held")
            await second.send(v2.encode_add(21, 1, KEY, entry(21, 1, 64)))
            await until(lambda: held(bookie) == 2, "the small add held behind it")
            assert bookie.room_for(len(entry(21, 1, 64))) is None  # it would fit (AR1)
            await first.close()
            sync.release()
            answer = v2.decode_response(await second.read_frame())
            assert (answer.rc, answer.entry_id) == (v2.EOK, 1)
            await until(lambda: len(listener_of(bookie).connections) == 1, "first gone")
        assert await stored_ids(bookie, 21) == {0, 1}
        assert await stored_ids(bookie, 20) == {0, 1, 2}
        assert held(bookie) == 0 and listener_of(bookie).request_bytes == 0
        assert bookie.room_waiting == 0


async def test_a_burst_over_a_small_cache_and_journal_is_never_refused(bookie_config):
    """AR3: a slice told "room" keeps it for every add. Pipelined v3 adds of three ledgers
    over a 1 MiB write cache and journal queue, checkpoints running as the cache fills:
    every add is acknowledged. Before AR3's monotone check a slice whose active half
    crossed its share partway had its later runs refused (10 of 1,200 in the first round)."""
    config = dataclasses.replace(bookie_config, write_cache_max_bytes=1 * MiB,
                                 journal_queue_max_bytes=1 * MiB)
    async with listening(config) as (bookie, port), BkClient.connect(port) as client:
        for start in range(0, 1200, 400):
            requests = [client.request("ADD_ENTRY", ledgerId=ledger, entryId=i, masterKey=KEY,
                                       body=entry(ledger, i))
                        for i in range(start, start + 400) for ledger in (1, 2, 3)]
            answers = await client.pipeline(requests)
            assert {answers[r.header.txnId].status for r in requests} == {S["EOK"]}
        assert bookie.stats.bk_refused == {}
        for ledger in (1, 2, 3):
            assert await stored_ids(bookie, ledger) == set(range(1200))
