"""The ledger library against a real bookie on 127.0.0.1: round trips for every digest type,
digest checks that catch a byte flipped on disk or in flight, tailing, the writer's pipeline
(entry order, LAC, length, batching, retries on 503, fencing) and explicit LACs."""

from __future__ import annotations

import asyncio
import os
import random

import aiohttp
import pytest
from aiohttp import web

from api.client import (BookieClient, DigestMismatch, LedgerReader, LedgerWriter,
                        WriterOptions, recover_ledger)
from bookie.disk import OsDisk
from bookie.entry import DigestType
from bookie.errors import Fenced, TooManyRequests
from entrylog.reader import EntryLogReader
from tests.support.servers import running_bookie

PASSWORD = b"ledger-tests"
WAIT_S = 60  # bounds a failure; never a synchronisation


def payload(entry_id: int, size: int = 100) -> bytes:
    stem = f"entry-{entry_id}-".encode()
    return (stem * (size // len(stem) + 1))[:size]


async def write_entries(url: str, ledger_id: int, count: int, digest="crc32c",
                        options: WriterOptions | None = None, size: int = 100) -> LedgerWriter:
    writer = await LedgerWriter.create(url, ledger_id, PASSWORD, digest,
                                       options=options)
    futures = [await writer.append_async(payload(i, size)) for i in range(count)]
    assert await asyncio.gather(*futures) == list(range(count))
    return writer


class FaultyProxy:
    """A tiny HTTP proxy in front of the bookie that can damage replies, refuse requests with
    503 or hold them, so client behaviour on faults is tested deterministically."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.writes = 0                  # add requests seen (PUT and POST of entries)
        self.busy = lambda number: False   # answer 503 without forwarding
        self.lose = lambda number: False   # forward, then answer 503 (the ack is lost)
        self.flip_reads = False          # flip a payload byte in every entry read
        self.gate = asyncio.Event()      # cleared: every add request waits here
        self.gate.set()
        self.hold = lambda number: False   # these add requests wait for ``release``
        self.release = asyncio.Event()
        self.answered: asyncio.Queue = asyncio.Queue()  # numbers of add requests answered
        self.url = ""

    async def __aenter__(self) -> "FaultyProxy":
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._session = aiohttp.ClientSession()
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self._runner.cleanup()
        await self._session.close()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        is_write = request.method in ("PUT", "POST") and "/entries" in request.path
        if is_write:
            self.writes += 1
            number = self.writes
            await self.gate.wait()
            if self.hold(number):
                await self.release.wait()
            if self.busy(number):
                return self._busy()
        headers = {k: v for k, v in request.headers.items()
                   if k.lower().startswith("x-") or k.lower() == "content-type"}
        async with self._session.request(request.method, self.target + request.path_qs,
                                         headers=headers, data=body) as reply:
            data, status = await reply.read(), reply.status
            reply_headers = {k: v for k, v in reply.headers.items()
                             if k.lower() in ("content-type", "retry-after")}
        if is_write:
            self.answered.put_nowait(number)
        if is_write and self.lose(number):
            return self._busy()
        if self.flip_reads and request.method == "GET" and "/entries" in request.path \
                and status == 200:
            data = bytearray(data)
            data[-1] ^= 0x01  # the last byte: payload in a single read and in a batch
            data = bytes(data)
        return web.Response(body=data, status=status, headers=reply_headers)

    @staticmethod
    def _busy() -> web.Response:
        return web.json_response({"error": "ETOOMANYREQUESTS", "message": "proxy says busy"},
                                 status=503, headers={"Retry-After": "0"})


# -- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize("digest", list(DigestType), ids=lambda d: d.header_name)
async def test_round_trip_for_each_digest_type(server, digest):
    writer = await write_entries(server.url, 1, 50, digest.header_name,
                                 WriterOptions(batch_max_entries=7))
    assert (writer.lac, writer.length) == (49, 50 * 100)
    assert await writer.close() == 49
    async with await LedgerReader.open(server.url, 1, PASSWORD, digest) as reader:
        entries = await reader.read_range(0, 49)
        assert [e.payload for e in entries] == [payload(i) for i in range(50)]
        assert [e.length for e in entries] == [(i + 1) * 100 for i in range(50)]  # L4
        assert all(-1 <= e.lac < e.entry_id for e in entries)                      # L3
        assert [e.lac for e in entries] == sorted(e.lac for e in entries)
        assert (await reader.read_entry(17)).payload == payload(17)
        assert (await reader.read_last()).entry_id == 49
        assert (await reader.read_entry(-1)).entry_id == 49
        assert await reader.read_lac() == 49  # close published the last entry


async def test_mac_ledger_read_with_the_wrong_password_fails_its_digest_check(server):
    await (await write_entries(server.url, 2, 3, "mac")).close()
    async with await LedgerReader.open(server.url, 2, b"not-it", "mac") as reader:
        with pytest.raises(DigestMismatch) as raised:
            await reader.read_entry(1)
    assert raised.value.entry_id == 1 and raised.value.code == "EIO"


async def test_range_reads_are_batched_by_the_bookie_and_joined_by_the_reader(bookie_config):
    config = bookie_config.replace(max_read_batch=16)
    async with running_bookie(config) as running:
        await (await write_entries(running.url, 3, 100)).close()
        async with await LedgerReader.open(running.url, 3, PASSWORD) as reader:
            batches = [batch async for batch in reader.iter_range(0, 99)]
            entries = await reader.read_range(5, 99)
    assert [len(b) for b in batches] == [16] * 6 + [4]
    assert [e.entry_id for e in entries] == list(range(5, 100))


# -- digests catch damage -------------------------------------------------------------------


def _entry_location(ledger_dir: str, ledger_id: int, entry_id: int) -> tuple[str, int]:
    """(entry log path, offset of the entry's first byte), found by scanning the logs."""
    for name in sorted(os.listdir(ledger_dir)):
        if not name.endswith(".log"):
            continue
        path = os.path.join(ledger_dir, name)
        with EntryLogReader(OsDisk(), path) as reader:
            for scanned in reader.scan(payload=False):
                if (scanned.ledger_id, scanned.entry_id) == (ledger_id, entry_id):
                    return path, scanned.location
    raise AssertionError(f"entry {ledger_id}/{entry_id} is in no entry log")


@pytest.mark.parametrize("digest", [DigestType.CRC32C, DigestType.MAC],
                         ids=lambda d: d.header_name)
async def test_a_byte_flipped_on_disk_is_caught_by_the_readers_digest_check(
        bookie_config, digest):
    async with running_bookie(bookie_config) as running:
        await (await write_entries(running.url, 4, 10, digest.header_name)).close()
        async with BookieClient(running.url) as client:
            await client.checkpoint()
    path, location = _entry_location(bookie_config.ledger_dir, 4, 6)
    offset = location + 32 + digest.digest_length + 5  # a payload byte
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0x20]))
    async with running_bookie(bookie_config) as running:  # a fresh start: cold cache
        async with await LedgerReader.open(running.url, 4, PASSWORD, digest) as reader:
            with pytest.raises(DigestMismatch) as raised:
                await reader.read_entry(6)
            assert raised.value.entry_id == 6
            with pytest.raises(DigestMismatch):
                await reader.read_range(0, 9)
            assert [e.payload for e in await reader.read_range(0, 5)] == \
                [payload(i) for i in range(6)]


async def test_a_byte_flipped_in_flight_is_caught_by_the_readers_digest_check(server):
    await (await write_entries(server.url, 5, 5)).close()
    async with FaultyProxy(server.url) as proxy:
        proxy.flip_reads = True
        async with await LedgerReader.open(proxy.url, 5, PASSWORD) as reader:
            with pytest.raises(DigestMismatch):
                await reader.read_entry(2)
            with pytest.raises(DigestMismatch):
                await reader.read_range(0, 4)
            proxy.flip_reads = False
            assert (await reader.read_entry(2)).payload == payload(2)


# -- tailing --------------------------------------------------------------------------------


async def _follow(reader: LedgerReader, last: int, seen: list, progress: asyncio.Queue):
    async for entry in reader.tail():
        seen.append((entry.entry_id, entry.payload))
        progress.put_nowait(entry.entry_id)
        if entry.entry_id == last:
            return


async def _seen_up_to(progress: asyncio.Queue, entry_id: int) -> None:
    while await progress.get() < entry_id:
        pass


async def test_tail_sees_every_entry_exactly_once_while_a_writer_appends(server, seed):
    rng = random.Random(seed)
    rounds = [rng.randrange(1, 40) for _ in range(12)]
    total = sum(rounds)
    options = WriterOptions(explicit_lac_interval_ms=10, batch_max_entries=rng.choice([1, 8]))
    reader = await LedgerReader.open(server.url, 6, PASSWORD)
    seen, progress = [], asyncio.Queue()
    # The follower starts before the ledger exists and long-polls as it grows.
    follower = asyncio.create_task(_follow(reader, total - 1, seen, progress))
    writer = await LedgerWriter.create(server.url, 6, PASSWORD, options=options)
    next_id = 0
    for count in rounds:
        futures = [await writer.append_async(payload(next_id + i)) for i in range(count)]
        next_id += count
        await asyncio.gather(*futures)
        if rng.random() < 0.5:  # sometimes wait for the follower, sometimes race ahead
            await asyncio.wait_for(_seen_up_to(progress, next_id - 1), WAIT_S)
    await writer.close()
    await asyncio.wait_for(follower, WAIT_S)
    await reader.close()
    assert seen == [(i, payload(i)) for i in range(total)]


async def test_tail_until_stops_and_tail_from_the_middle_starts_there(server):
    await (await write_entries(server.url, 7, 20)).close()
    async with await LedgerReader.open(server.url, 7, PASSWORD) as reader:
        got = [e.entry_id async for e in reader.tail(first=12, until=15)]
    assert got == [12, 13, 14, 15]


async def test_an_idle_writer_publishes_its_lac_explicitly(server, client):
    writer = await write_entries(server.url, 8, 3, options=WriterOptions(
        explicit_lac_interval_ms=10, batch_max_entries=1, requests_in_flight_max=1))
    # The last add carried LAC 1; only the explicit LAC tells readers about entry 2.
    assert await client.read_lac(8, wait_for_gt=1, timeout_ms=WAIT_S * 1000) == 2
    await writer.close()


# -- the writer's pipeline ------------------------------------------------------------------


async def test_503s_and_lost_acks_are_retried_without_reordering_or_duplicates(server, client):
    async with FaultyProxy(server.url) as proxy:
        proxy.busy = lambda number: number % 3 == 0
        proxy.lose = lambda number: number % 5 == 0  # stored, but the client hears 503
        options = WriterOptions(batch_max_entries=7, requests_in_flight_max=4,
                                retry_after_max_s=0.0)
        writer = await write_entries(proxy.url, 9, 300, options=options)
        assert writer.lac == 299
        await writer.close()
        assert proxy.writes > 300 // 7
    info = await client.ledger_info(9)
    assert (info["entries"], info["lastEntryId"]) == (300, 299)
    async with await LedgerReader.open(server.url, 9, PASSWORD) as reader:
        entries = await reader.read_range(0, 299)
    assert [e.payload for e in entries] == [payload(i) for i in range(300)]
    assert [e.length for e in entries] == [(i + 1) * 100 for i in range(300)]


async def test_retries_on_503_are_bounded_then_every_append_fails(server):
    async with FaultyProxy(server.url) as proxy:
        proxy.busy = lambda number: True
        writer = await LedgerWriter.create(proxy.url, 10, PASSWORD, options=WriterOptions(
            retries_max=3, retry_after_max_s=0.0))
        with pytest.raises(TooManyRequests):
            await writer.append(b"never stored")
        assert proxy.writes == 4  # the first try and three retries
        with pytest.raises(TooManyRequests):
            await writer.append(b"refused at once")
        assert proxy.writes == 4
        assert await writer.close() == -1


async def test_acks_complete_in_entry_order_with_many_requests_in_flight(server):
    writer = await LedgerWriter.create(server.url, 11, PASSWORD, options=WriterOptions(
        batch_max_entries=1, requests_in_flight_max=32))
    completed = []
    futures = []
    for i in range(200):
        future = await writer.append_async(payload(i))
        future.add_done_callback(lambda f: completed.append(f.result()))
        futures.append(future)
    await asyncio.gather(*futures)
    assert completed == list(range(200))
    await writer.close()


async def test_acks_out_of_order_still_complete_in_entry_order(server, client):
    async with FaultyProxy(server.url) as proxy:
        proxy.hold = lambda number: number == 1  # entry 0's request is slow
        writer = await LedgerWriter.create(proxy.url, 17, PASSWORD, options=(
            WriterOptions(batch_max_entries=1, requests_in_flight_max=4)))
        completed = []
        futures = [await writer.append_async(payload(i)) for i in range(12)]
        for future in futures:
            future.add_done_callback(lambda f: completed.append(f.result()))
        answered = set()
        while answered != set(range(2, 13)):  # entries 1..11 are stored and answered
            answered.add(await asyncio.wait_for(proxy.answered.get(), WAIT_S))
        assert (await client.ledger_info(17))["entries"] == 11
        assert completed == [] and writer.lac == -1  # nothing passes entry 0 (L2)
        proxy.release.set()
        assert await asyncio.gather(*futures) == list(range(12))
        assert completed == list(range(12)) and writer.lac == 11
        await writer.close()


async def test_a_fenced_writer_stops_with_efenced_and_sends_nothing_more(server):
    async with FaultyProxy(server.url) as proxy:
        writer = await write_entries(proxy.url, 12, 10)
        proxy.gate.clear()  # hold the next adds inside the proxy
        in_flight = [await writer.append_async(payload(10 + i)) for i in range(50)]
        result = await recover_ledger(server.url, 12, PASSWORD)  # straight to the bookie
        assert result.lac == 9
        proxy.gate.set()
        outcomes = await asyncio.gather(*in_flight, return_exceptions=True)
        assert all(isinstance(o, Fenced) for o in outcomes)
        writes = proxy.writes
        with pytest.raises(Fenced):
            await writer.append(b"late")
        assert proxy.writes == writes  # no retry, no new request
        assert isinstance(writer.error, Fenced) and writer.lac == 9
        assert await writer.close() == 9
    async with await LedgerReader.open(server.url, 12, PASSWORD) as reader:
        assert await reader.read_lac() == 9
        assert (await reader.read_last()).payload == payload(9)


async def test_append_waits_for_room_when_the_pipeline_is_full(server):
    writer = await LedgerWriter.create(server.url, 13, PASSWORD, options=WriterOptions(
        adds_in_flight_max=4, batch_max_entries=2))
    futures = [await writer.append_async(payload(i)) for i in range(40)]
    assert await asyncio.gather(*futures) == list(range(40))
    await writer.close()


async def test_deferred_sync_adds_are_confirmed_by_force(server, client):
    writer = await LedgerWriter.create(server.url, 14, PASSWORD, options=WriterOptions(
        deferred_sync=True))
    assert [await writer.append(payload(i)) for i in range(5)] == list(range(5))
    assert writer.lac == -1  # acknowledged, not yet known durable
    assert await writer.force() == 4
    assert writer.length == 500
    assert await writer.close() == 4
    assert await client.read_lac(14) == 4


async def test_open_appends_after_the_last_entry_and_keeps_the_length(server):
    await (await write_entries(server.url, 15, 3)).close()
    async with await LedgerWriter.open(server.url, 15, PASSWORD) as writer:
        assert (writer.lac, writer.length) == (2, 300)
        assert await writer.append(payload(3)) == 3
    async with await LedgerReader.open(server.url, 15, PASSWORD) as reader:
        last = await reader.read_last()
    assert (last.entry_id, last.length, last.lac) == (3, 400, 2)


async def test_writes_after_close_are_refused(server):
    from api.client import LedgerClosedError

    writer = await write_entries(server.url, 16, 1)
    await writer.close()
    with pytest.raises(LedgerClosedError):
        await writer.append(b"too late")
