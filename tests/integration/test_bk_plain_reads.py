"""Plain reads on ``bookie_port`` (api/server/bk_reads.py PRD1-PRD3, api/bkproto/v3_read.py):
a READ_ENTRY that neither fences nor polls takes the listener's task-free path, and its
answer is byte for byte the whole path's (bk_ops.py), over v3 and v2, for an entry in the
write cache, one in the entry log, the last entry (-1), a missing entry and an unknown
ledger; refusals and stats count alike. Real TCP on 127.0.0.1 to a real bookie."""

from __future__ import annotations

import asyncio
import threading

import pytest

from api.bkproto import v2, v3
from api.server.bk_budget import Limits
from api.server.bk_ops import BkOperations
from tests.integration.test_bk_listener import KEY, entry
from tests.integration.test_bk_port_hardening import listener_of, open_client
from tests.support.bk_client import BkClient
from tests.support.conditions import until
from tests.support.servers import running_bookie

S = v3.STATUS
CASES = [(60, 0), (60, 1), (61, 0), (61, -1), (60, 9), (62, 0)]  # log, log, cache, -1, gone


async def _stored(bookie) -> None:
    """Ledger 60 in the entry log (checkpointed), ledger 61 in the write cache."""
    for entry_id in range(2):
        await bookie.add_entry(60, entry_id, entry(60, entry_id), KEY)
    await bookie.checkpoint()
    for entry_id in range(2):
        await bookie.add_entry(61, entry_id, entry(61, entry_id), KEY)


def _reordered(request) -> bytes:
    """The same request with readRequest before header: protobuf reads it alike, the
    hot path leaves it to protobuf (VR1): the whole path answers it."""
    read, header = request.readRequest.SerializeToString(), request.header.SerializeToString()
    packet = b"\xa2\x06" + bytes([len(read)]) + read + b"\x0a" + bytes([len(header)]) + header
    return len(packet).to_bytes(4, "big") + packet


def _counted(monkeypatch, owner, name: str) -> list:
    """Calls of ``owner.name`` (the real one, still called), to tell the paths apart."""
    calls, real = [], getattr(owner, name)

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


@pytest.fixture
async def served(bookie_config):
    """A bookie holding ``_stored``'s entries, and its listener: (bookie, listener, port)."""
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie) as (listener, port):
        await _stored(running.bookie)
        yield running.bookie, listener, port


async def test_v3_plain_reads_answer_as_the_whole_path_byte_for_byte(served, monkeypatch):
    bookie, _listener, port = served
    decoded = _counted(monkeypatch, v3, "decode_request")
    async with BkClient.connect(port) as client:
        for ledger_id, entry_id in CASES:
            request = client.request("READ_ENTRY", ledgerId=ledger_id, entryId=entry_id)
            refused = dict(bookie.stats.bk_refused)
            await client.send(v3.frame(request))
            fast = await client.read_frame()
            # No protobuf message: the hot path (VR1); -1 is a 10-byte varint, left
            # to protobuf.
            assert len(decoded) == (entry_id < 0)
            fast_refused = _new_refusals(refused, bookie.stats.bk_refused)
            refused = dict(bookie.stats.bk_refused)
            await client.send(_reordered(request))
            assert await client.read_frame() == fast, (ledger_id, entry_id)
            assert len(decoded) == 1 + (entry_id < 0)  # protobuf's path
            decoded.clear()
            assert _new_refusals(refused, bookie.stats.bk_refused) == fast_refused
            answer = v3.decode_response(fast)
            if (ledger_id, entry_id) in ((60, 1), (61, 0)):
                assert answer.readResponse.body == entry(ledger_id, entry_id)
        statuses = {}
        for ledger_id, entry_id in CASES:
            answer = await client.read(ledger_id, entry_id)
            statuses[(ledger_id, entry_id)] = answer.readResponse.status
    assert statuses == {(60, 0): S["EOK"], (60, 1): S["EOK"], (61, 0): S["EOK"],
                        (61, -1): S["EOK"], (60, 9): S["ENOENTRY"],
                        (62, 0): S["ENOLEDGER"]}
    read_stats = bookie.stats.ops.pair("READ_ENTRY")[0]
    assert read_stats.ok.count == 3 * 4 and read_stats.failed.count == 3 * 2


def _new_refusals(before: dict, after: dict) -> dict:
    return {key: after[key] - before.get(key, 0) for key in after
            if after[key] != before.get(key, 0)}


async def test_v2_plain_reads_answer_as_the_whole_path_byte_for_byte(served, monkeypatch):
    bookie, listener, port = served
    whole = BkOperations(bookie)
    begun_whole = _counted(monkeypatch, listener.ops, "v2")
    async with BkClient.connect(port) as client:
        for ledger_id, entry_id in CASES:
            frame = v2.encode_read(ledger_id, entry_id)
            await client.send(frame)
            fast = await client.read_frame()
            assert len(fast).to_bytes(4, "big") + fast == \
                await whole.v2(v2.decode_request(frame[4:])), (ledger_id, entry_id)
            answer = v2.decode_response(fast)
            assert answer.rc == (v2.EOK if (ledger_id, entry_id) in CASES[:4] else
                                 v2.ENOENTRY if ledger_id == 60 else v2.ENOLEDGER)
    assert not begun_whole  # every one answered on the listener's own path (PRD2)


async def test_plain_reads_that_wait_for_the_budget_are_begun_as_plain_reads(
        bookie_config, monkeypatch):
    """PRD1: with 2 reads in progress a connection, 300 pipelined reads mostly wait; every
    one is still answered in full, none through protobuf or a task, and the port's count
    of reads in progress never passes the bound."""
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=Limits(per_connection=2)) as (listener, port):
        await _stored(running.bookie)
        decoded = _counted(monkeypatch, v3, "decode_request")
        begun_whole = _counted(monkeypatch, listener.ops, "v3")
        async with BkClient.connect(port) as client:
            requests = [client.request("READ_ENTRY", ledgerId=60 + i % 2, entryId=i % 2)
                        for i in range(300)]
            answers = await client.pipeline(requests)
        for request in requests:
            read = answers[request.header.txnId].readResponse
            assert read.status == S["EOK"]
            assert read.body == entry(request.readRequest.ledgerId, request.readRequest.entryId)
        assert listener.budget.deferred_total > 0 and listener.budget.peak_in_progress == 2
        assert not decoded and not begun_whole


async def test_plain_reads_of_a_lost_connection_end_unanswered(served, monkeypatch):
    """PRD3: reads waiting for the read threads when their connection goes are cancelled
    and counted done; the port's count of reads in progress comes back to 0 and the bookie
    serves the next client."""
    bookie, listener, port = served
    groups, read_group = [], bookie._read_queue.read_group
    monkeypatch.setattr(bookie._read_queue, "read_group",
                        lambda reads: groups.append(reads[0][2]) or read_group(reads))
    held, started = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        held.wait(30)

    loop = asyncio.get_running_loop()
    blocks = [loop.run_in_executor(bookie._reads, hold) for _ in range(4)]
    try:
        await loop.run_in_executor(None, started.wait, 30)
        lost = await open_client(port)
        await lost.send(b"".join(v2.encode_read(60, i % 2) for i in range(50)))
        await until(lambda: listener.budget.in_progress == 50, "50 reads begun")
        await lost.close()
        await until(lambda: not listener.connections and listener.budget.in_progress == 0,
                    "the connection and its reads are gone")
        assert sum(len(group.outcomes) for group in groups) == 50
        assert all(group.cancelled for group in groups)
    finally:
        held.set()
        await asyncio.gather(*blocks)
    async with BkClient.connect(port) as client:
        read = await client.call_v2(v2.encode_read(60, 1))
        assert (read.rc, read.data) == (v2.EOK, entry(60, 1))


async def test_plain_reads_sent_together_answer_each_as_alone(served):
    """PRD2 for a group: CASES sent in one write (the log, the write cache, -1, a missing
    entry, an unknown ledger: one group, some outcomes at hand, some from the read
    threads) get the answers each gets sent alone, over v2 and v3."""
    _bookie, _listener, port = served
    frames = [v2.encode_read(ledger_id, entry_id) for ledger_id, entry_id in CASES]
    async with BkClient.connect(port) as client:
        alone = []
        for frame in frames:
            await client.send(frame)
            alone.append(await client.read_frame())
        await client.send(b"".join(frames))
        together = [await client.read_frame() for _ in frames]
    assert sorted(together) == sorted(alone)
    async with BkClient.connect(port) as client:
        requests = [client.request("READ_ENTRY", ledgerId=ledger_id, entryId=entry_id)
                    for ledger_id, entry_id in CASES]
        alone = [await client.call(request) for request in requests]
        again = [client.request("READ_ENTRY", ledgerId=r.readRequest.ledgerId,
                                entryId=r.readRequest.entryId) for r in requests]
        answers = await client.pipeline(again)
    for first, request in zip(alone, again):
        answer = answers[request.header.txnId]
        answer.header.txnId = first.header.txnId
        assert answer == first, request.readRequest


async def test_plain_reads_are_begun_before_the_requests_after_them(bookie_config):
    """PRD4: with one request in progress a connection, two plain reads then a READ_LAC
    sent in one write are begun, and so answered, in that order: the reads are not held
    back to the slice's end behind the READ_LAC."""
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=Limits(per_connection=1)) as (_listener, port):
        await _stored(running.bookie)
        async with BkClient.connect(port) as client:
            requests = [client.request("READ_ENTRY", ledgerId=60, entryId=0),
                        client.request("READ_ENTRY", ledgerId=60, entryId=1),
                        client.request("READ_LAC", ledgerId=60)]
            await client.send(b"".join(v3.frame(request) for request in requests))
            order = [v3.decode_response(await client.read_frame()).header.txnId
                     for _ in requests]
    assert order == [request.header.txnId for request in requests]
