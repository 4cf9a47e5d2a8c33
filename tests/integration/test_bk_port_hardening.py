"""A hostile or careless client of ``bookie_port`` gets bounded memory, its share of the bookie
and clear answers, and others are served meanwhile (api/server/bk_listener.py BL1/BL3,
api/server/bk_budget.py PB1-PB5, docs/bookkeeper-protocol.md §8). Real TCP on 127.0.0.1 to a
real bookie."""

from __future__ import annotations

import asyncio
import contextlib
import struct

import aiohttp
from api.bkproto import v2, v3
from api.server.bk_budget import Limits
from api.server.bk_listener import BkListener
from bookie.errors import NoEntry
from tests.integration.test_bk_listener import KEY, entry
from tests.support.bk_client import BkClient
from tests.support.conditions import until
from tests.support.servers import running_bookie

S = v3.STATUS


@contextlib.asynccontextmanager
async def listener_of(bookie, **limits):
    """A BkListener over ``bookie`` served on a free port: (listener, port)."""
    listener = BkListener(bookie, bookie.config.bookie_max_pending_adds, **limits)
    server = await asyncio.get_running_loop().create_server(listener.protocol, "127.0.0.1", 0)
    try:
        yield listener, server.sockets[0].getsockname()[1]
    finally:
        server.close()
        listener.close()
        await listener.drained(5)
        await server.wait_closed()


async def test_a_closing_listener_begins_no_add_while_it_waits_for_requests_in_flight(
        bookie_config):
    """BL3 (issue 36 item 8): shutdown waits up to 30 s for requests in flight; an add sent
    meanwhile on another connection is not read, not stored and not answered."""
    async with running_bookie(bookie_config) as running:
        bookie = running.bookie
        async with listener_of(bookie) as (listener, port), \
                BkClient.connect(port) as poller, BkClient.connect(port) as writer:
            assert (await writer.add(4, 0, KEY, entry(4, 0))).status == S["EOK"]
            await poller.send(v3.frame(poller.request(
                "READ_ENTRY", ledgerId=4, entryId=-1, previousLAC=0, timeOut=60_000, flag=2)))
            await until(lambda: bookie._lac_waiters == 1, "the long poll waits")
            listener.close()
            draining = asyncio.ensure_future(listener.drained(30))
            await writer.send(v3.frame(writer.request(
                "ADD_ENTRY", ledgerId=4, entryId=1, masterKey=KEY, body=entry(4, 1))))
            # The long poll ends when the LAC passes 0: an add through the bookie itself.
            await bookie.add_entry(4, 2, entry(4, 2, lac=1), KEY)
            await draining
            answer = v3.decode_response(await poller.read_frame())
            assert answer.status == S["EOK"] and answer.readResponse.maxLAC == 1
            try:  # closed, the add never answered (a reset: it was never read)
                assert await writer.closed_by_peer()
            except ConnectionResetError:
                pass
        try:
            await bookie.read_entry(4, 1)
        except NoEntry:
            pass
        else:
            raise AssertionError("an add sent after the listener closed was stored")


BIG = entry(20, 0, payload=b"r" * (256 << 10))  # one 256 KiB entry, read over and over


async def scrape(url: str) -> dict[str, float]:
    """The bookie's unlabelled metrics, by name."""
    async with aiohttp.ClientSession() as session:
        async with session.get(url + "/metrics") as reply:
            text = await reply.text()
    return {name: float(value) for name, _, value in
            (line.partition(" ") for line in text.splitlines())
            if name and not name.startswith("#") and "{" not in name}


async def open_client(port: int) -> BkClient:
    """A connection the test closes itself (``BkClient.connect`` closes at its block's end)."""
    return BkClient(*await asyncio.open_connection("127.0.0.1", port))


def unread_answers(listener) -> list[int]:
    """Bytes of answers each connection's client left unread, as the bookie holds them."""
    return [c.transport.get_write_buffer_size() for c in listener.connections
            if c.transport is not None and not c.transport.is_closing()]


async def hold_unread_reads(port: int, count: int):
    """A client that asks for ``count`` reads of BIG and reads none of the answers."""
    client = await open_client(port)
    await client.send(b"".join(v2.encode_read(20, 0) for _ in range(count)))
    return client


async def test_a_client_that_reads_no_answers_holds_a_bounded_share(bookie_config):
    """PB1/PB2 (issue 36 item 1): 400 reads of a 256 KiB entry, answers unread. Before, each
    was begun and its answer queued (100 MiB here; 610 MiB RSS with 1 MiB answers in the
    review); now a connection begins at most its share of reads and stops once its client
    leaves connection_buffer bytes unread. Another client is served all along."""
    limits = Limits(per_connection=8, connection_buffer=1 << 20)
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits) as (listener, port):
        await running.bookie.add_entry(20, 0, BIG, KEY)
        hostile = await hold_unread_reads(port, 400)
        try:
            await until(lambda: listener.budget.deferred_total > 0, "reads wait (PB1/PB2)")
            async with BkClient.connect(port) as other:
                for i in range(20):  # served while the hostile connection waits
                    read = await other.call_v2(v2.encode_read(20, 0))
                    assert (read.rc, read.data) == (v2.EOK, BIG)
                    added = await other.call_v2(v2.encode_add(21, i, KEY, entry(21, i)))
                    assert added.rc == v2.EOK
            held = max(unread_answers(listener))
            assert held <= limits.connection_buffer + limits.per_connection * (len(BIG) + 64)
            assert listener.budget.in_progress <= limits.per_connection
            metrics = await scrape(running.url)  # what an operator sees meanwhile
            assert metrics["bookie_bk_connections"] == 1
            assert metrics["bookie_bk_requests_waited_total"] > 0
            assert metrics["bookie_bk_connections_waiting"] == 1
            assert 0 < metrics["bookie_bk_answer_bytes"] <= held
        finally:
            await hostile.close()


async def test_requests_in_progress_on_the_whole_port_stay_within_their_bound(
        bookie_config):
    """PB1, the whole port (BookKeeper's maxReadsInProgressLimit): three clients that pour
    reads in never have more than max_in_progress begun at once; every read is answered,
    and another client is served meanwhile."""
    limits = Limits(per_connection=50, max_in_progress=4)
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits) as (listener, port):
        small = entry(25, 0)
        await running.bookie.add_entry(25, 0, small, KEY)
        # From the entry log: a read of the write cache is answered as it is begun
        # (bk_reads.py), and never stays in progress.
        await running.bookie.checkpoint()
        pourers = [await open_client(port) for _ in range(3)]
        try:
            for client in pourers:
                await client.send(b"".join(v2.encode_read(25, 0) for _ in range(300)))
            async with BkClient.connect(port) as other:
                read = await other.call_v2(v2.encode_read(25, 0))
                assert (read.rc, read.data) == (v2.EOK, small)
            for client in pourers:
                for _ in range(300):
                    answer = v2.decode_response(await client.read_frame())
                    assert (answer.rc, answer.data) == (v2.EOK, small)
            assert listener.budget.peak_in_progress == limits.max_in_progress
            assert listener.budget.deferred_total > 0
        finally:
            for client in pourers:
                await client.close()


async def test_the_port_stops_beginning_reads_for_clients_that_hold_its_answer_budget(
        bookie_config):
    """PB2, the whole port: three clients that read nothing hold at most answers_max (plus
    the reads they had begun) between them; a client that reads its answers is served."""
    limits = Limits(per_connection=4, connection_buffer=8 << 20, answers_max=2 << 20)
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits) as (listener, port):
        await running.bookie.add_entry(20, 0, BIG, KEY)
        hostile = [await hold_unread_reads(port, 200) for _ in range(3)]
        try:
            await until(lambda: listener.budget.deferred_total > 0
                        and listener.budget.in_progress == 0, "every hostile read waits")
            async with BkClient.connect(port) as other:
                for _ in range(10):
                    read = await other.call_v2(v2.encode_read(20, 0))
                    assert (read.rc, read.data) == (v2.EOK, BIG)
            held = sum(unread_answers(listener))
            assert held <= limits.answers_max + 3 * limits.per_connection * (len(BIG) + 64)
        finally:
            for client in hostile:
                await client.close()


async def test_a_frame_that_never_comes_whole_is_closed_and_its_bytes_freed(bookie_config):
    """PB3 (issue 36 item 7): half-sent frames are reserved from requests_max; a frame not
    whole within frame_timeout closes its connection; one whose reservation does not fit
    waits; small requests of other clients are served meanwhile."""
    limits = Limits(requests_max=3 * ((1 << 20) + 4), frame_timeout_s=0.5)
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits) as (listener, port):
        half = struct.pack(">i", 1 << 20) + b"\0" * 1000  # announces 1 MiB, sends 1 KB
        stalled = [await open_client(port) for _ in range(4)]
        try:
            for client in stalled:
                await client.send(half)
            await until(lambda: sum(bool(c.frame_reserved) for c in listener.connections) == 3
                        and any(c.frame_waiting for c in listener.connections),
                        "three frames reserved, the fourth waiting")
            assert listener.budget.request_bytes <= limits.requests_max
            async with BkClient.connect(port) as other:
                assert (await other.add(22, 0, KEY, entry(22, 0))).status == S["EOK"]
            for client in stalled:  # each is closed in its turn, none left holding bytes
                try:
                    assert await client.closed_by_peer(timeout_s=10)
                except ConnectionResetError:
                    pass
            await until(lambda: listener.budget.request_bytes == 0, "every reservation freed")
            assert running.bookie.stats.bk_refused[("FRAME", "CLOSED")] == 4
        finally:
            for client in stalled:
                await client.close()


async def test_long_polls_have_a_share_per_connection_and_die_with_it(bookie_config):
    """PB4/PB5 (issue 36 item 6): one connection takes at most its share of the bookie's
    long-poll slots (more are ETOOMANYREQUESTS, another connection still polls), and the
    polls of a connection that goes away are cancelled at once, not after their timeout."""
    limits = Limits(polls_per_connection=3)
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits) as (listener, port):
        bookie = running.bookie
        await bookie.add_entry(23, 0, entry(23, 0), KEY)
        greedy = await open_client(port)
        polls = [greedy.request("READ_ENTRY", ledgerId=23, entryId=-1, previousLAC=0,
                                timeOut=600_000, flag=2) for _ in range(4)]
        await greedy.send(b"".join(v3.frame(r) for r in polls))
        refused = v3.decode_response(await greedy.read_frame())
        assert refused.header.txnId == polls[3].header.txnId
        assert refused.status == S["ETOOMANYREQUESTS"]
        assert refused.readResponse.status == S["ETOOMANYREQUESTS"]
        await until(lambda: bookie._lac_waiters == 3, "three polls wait")
        async with BkClient.connect(port) as other:
            await other.send(v3.frame(other.request(
                "READ_ENTRY", ledgerId=23, entryId=-1, previousLAC=0, timeOut=600_000,
                flag=2)))
            await until(lambda: bookie._lac_waiters == 4, "another connection still polls")
            await greedy.close()
            await until(lambda: bookie._lac_waiters == 1, "the lost connection's polls end")
            for entry_id in (1, 2):  # entry 2 carries LAC 1, past the poll's previousLAC 0
                await bookie.add_entry(23, entry_id, entry(23, entry_id), KEY)
            answer = v3.decode_response(await other.read_frame())
            assert answer.status == S["EOK"] and answer.readResponse.maxLAC == 1


async def test_a_frame_larger_than_the_request_budget_still_comes_in_its_turn(bookie_config):
    """PB3: a reservation always fits an empty budget, so a frame larger than
    requests_max is not kept waiting for ever (the setting is validated to hold one whole
    frame; Limits here are set directly)."""
    limits = Limits(requests_max=64 << 10)
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits) as (listener, port), \
            BkClient.connect(port) as client:
        big = entry(24, 0, payload=b"b" * (200 << 10))
        assert (await client.add(24, 0, KEY, big)).status == S["EOK"]
        assert listener.budget.request_bytes == 0
        assert await running.bookie.read_entry(24, 0) == big


async def test_a_connection_over_its_answer_bound_is_served_once_its_client_reads(
        bookie_config):
    """PB6: answers unread past connection_buffer but below the transport's high-water mark
    (so no pause_writing, and no resume_writing after it) stop a connection's reads; once
    its client reads them all, the rest are begun and answered. Before, nothing woke the
    connection: its reads waited for ever (BookKeeper's client timed out cold single reads
    this way, with the high-water mark at connection_buffer, through answers counted while
    queued for the loop turn's write)."""
    limits = Limits(per_connection=4, connection_buffer=64 << 10)
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits, write_buffer_high=64 << 20) \
            as (listener, port):
        await running.bookie.add_entry(20, 0, BIG, KEY)
        client = await hold_unread_reads(port, 40)
        try:
            await until(lambda: listener.budget.deferred_total > 0
                        and listener.budget.in_progress == 0, "the reads wait (PB2)")
            for _ in range(40):
                answer = v2.decode_response(await client.read_frame(timeout_s=20))
                assert (answer.rc, answer.data) == (v2.EOK, BIG)
        finally:
            await client.close()


async def test_reads_of_large_entries_hold_a_bounded_share_in_bytes(bookie_config):
    """PB7 (issue 53 item 4): one client pipelines 300 reads of 1 MiB entries, from the
    entry log (runs and single reads) and the write cache, and reads no answer. Before,
    PB1 let all 300 begin (300 <= 500), and their answers, 300 MiB, were held at once;
    now each read reserves an allowance before it begins, an entry larger than it is read
    again at its size when that fits, and the connection holds at most
    connection_buffer + one entry + 128 bytes. Every read is still answered, right."""
    limits = Limits()  # the defaults: 500 reads a connection, 4 MiB of unread answers
    big = [entry(30, e, payload=bytes([e]) * (1 << 20)) for e in range(10)]
    cached = entry(31, 0, payload=b"c" * (1 << 20))
    bound = limits.connection_buffer + len(cached) + 128
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits) as (listener, port):
        for e, data in enumerate(big):
            await running.bookie.add_entry(30, e, data, KEY)
        await running.bookie.checkpoint()  # ledger 30 from the entry log
        await running.bookie.add_entry(31, 0, cached, KEY)  # ledger 31 from the write cache
        asked = [(30, e % 10) for e in range(200)] + [(31, 0)] * 100
        client = await open_client(port)
        try:
            await client.send(b"".join(v2.encode_read(*read) for read in asked))
            await until(lambda: listener.budget.in_progress == 0
                        and sum(unread_answers(listener)) > 0, "the reads stall")
            held = max(unread_answers(listener))
            metrics = await scrape(running.url)
            answered = []  # v2 answers go out as they complete, matched by ids (§5)
            for _ in asked:
                answer = v2.decode_response(await client.read_frame())
                assert answer.rc == v2.EOK
                assert answer.data == (big[answer.entry_id] if answer.ledger_id == 30
                                       else cached)
                answered.append((answer.ledger_id, answer.entry_id))
            assert sorted(answered) == sorted(asked)
            # Before another connection reads: the port's figures are as last counted, and
            # this connection's are not counted again once its client has read them all.
            peak = listener.budget.peak_answer_bytes
            async with BkClient.connect(port) as reader:  # over v3 (v3_read.py), -1 too
                reads = [reader.request("READ_ENTRY", ledgerId=ledger_id, entryId=entry_id)
                         for ledger_id, entry_id in [(30, e) for e in range(10)] + [(31, -1)]]
                answers = await reader.pipeline(reads)
                for request in reads:
                    answer = answers[request.header.txnId]
                    read = request.readRequest
                    assert answer.status == S["EOK"] and answer.readResponse.entryId == \
                        read.entryId
                    assert answer.readResponse.body == \
                        (big[read.entryId] if read.ledgerId == 30 else cached)
            budget = listener.budget
            print(f"held {held}, peak {peak}, bound {bound}")
            assert held <= bound and peak <= bound
            assert budget.resized_total >= len(asked) - 10
            assert 0 < metrics["bookie_bk_answer_bytes_peak"] <= bound
            assert metrics["bookie_bk_reads_resized_total"] > 0
            assert 0 <= metrics["bookie_bk_read_bytes"] <= bound
            await until(lambda: budget.read_bytes == 0, "every reservation released")
        finally:
            await client.close()


async def test_batch_reads_of_large_entries_hold_a_bounded_share_in_bytes(bookie_config):
    """PB7 for v2 batch reads (bk_reads.py PRD6): 40 pipelined batches of up to four 1 MiB
    entries, answers unread. Before, all 40 began and held their 4 MiB each (160 MiB); now
    each reserves a share of the room, its maxSize cut to it, a first entry larger than it
    read again at its size: the connection holds at most connection_buffer + one entry
    (its batch answer's own bytes and the read's 128). Every batch still answers its first
    entry and those after it that fit, a maxSize under the first entry included."""
    limits = Limits()
    big = [entry(32, e, payload=bytes([e]) * (1 << 20)) for e in range(10)]
    bound = limits.connection_buffer + len(big[0]) + 4 + 36 + 128
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits) as (listener, port):
        for e, data in enumerate(big):
            await running.bookie.add_entry(32, e, data, KEY)
        await running.bookie.checkpoint()
        asked = {n: (n % 10, 64 if n % 7 == 0 else 16 << 20) for n in range(40)}
        client = await open_client(port)
        try:
            await client.send(b"".join(v2.encode_batch_read(32, first, n, 4, max_size)
                                       for n, (first, max_size) in asked.items()))
            await until(lambda: listener.budget.in_progress == 0
                        and sum(unread_answers(listener)) > 0, "the batches stall")
            held = max(unread_answers(listener))
            for _ in range(len(asked)):
                batch = v2.decode_response(await client.read_frame())
                first, max_size = asked.pop(batch.request_id)
                assert batch.rc == v2.EOK and 1 <= len(batch.entries) <= 4
                assert list(batch.entries) == big[first:first + len(batch.entries)]
                if max_size == 64:
                    assert len(batch.entries) == 1
            assert not asked
            budget = listener.budget
            print(f"held {held}, peak {budget.peak_answer_bytes}, bound {bound}")
            assert held <= bound and budget.peak_answer_bytes <= bound
            assert budget.resized_total > 0
            await until(lambda: budget.read_bytes == 0, "every reservation released")
        finally:
            await client.close()


async def test_reads_through_the_whole_path_hold_a_bounded_share_in_bytes(bookie_config):
    """PB7 for reads that run as tasks (bk_room.py TR1-TR3): 100 v3 reads protobuf
    decodes (a master key set), 100 READ_LACs whose last entry is 1 MiB and 20 fencing v2
    reads, pipelined, answers unread. Before, PB1 let all 220 begin and their answers,
    ~220 MiB, were held at once; now each reserves 4 KiB and its answer's head, and an
    entry larger is read again at its size once that fits: at most connection_buffer + one
    entry + 128 bytes. Every one is answered right."""
    limits = Limits()
    big = [entry(33, e, payload=bytes([e]) * (1 << 20)) for e in range(10)]
    bound = limits.connection_buffer + len(big[0]) + 128
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits) as (listener, port):
        for e, data in enumerate(big):
            await running.bookie.add_entry(33, e, data, KEY)
        await running.bookie.checkpoint()
        client = BkClient(*await asyncio.open_connection("127.0.0.1", port))
        try:
            reads = [client.request("READ_ENTRY", ledgerId=33, entryId=n % 10, masterKey=KEY)
                     for n in range(100)]
            lacs = [client.request("READ_LAC", ledgerId=33) for _ in range(100)]
            fences = [v2.encode_read(33, n % 10, v2.FLAG_DO_FENCING, KEY) for n in range(20)]
            await client.send(b"".join(v3.frame(r) for r in reads + lacs))
            await until(lambda: listener.budget.in_progress == 0
                        and sum(unread_answers(listener)) > 0, "the reads stall")
            held = max(unread_answers(listener))
            answers = {}
            while len(answers) < len(reads) + len(lacs):
                answer = v3.decode_response(await client.read_frame())
                answers[answer.header.txnId] = answer
            for request in reads:
                answer = answers[request.header.txnId].readResponse
                assert answer.status == S["EOK"]
                assert answer.body == big[request.readRequest.entryId]
            for request in lacs:
                answer = answers[request.header.txnId].readLacResponse
                assert answer.status == S["EOK"] and answer.lastEntryBody == big[9]
            await client.send(b"".join(fences))  # v2 from here: the connection switches
            await until(lambda: listener.budget.in_progress == 0
                        and sum(unread_answers(listener)) > 0, "the fencing reads stall")
            held = max(held, *unread_answers(listener))
            answered = [v2.decode_response(await client.read_frame()) for _ in fences]
            assert sorted((a.rc, a.entry_id) for a in answered) == \
                sorted((v2.EOK, n % 10) for n in range(20))
            assert all(a.data == big[a.entry_id] for a in answered)
            budget = listener.budget
            print(f"held {held}, peak {budget.peak_answer_bytes}, bound {bound}")
            assert held <= bound and budget.peak_answer_bytes <= bound
            assert budget.resized_total >= 200
            await until(lambda: budget.read_bytes == 0, "every reservation released")
        finally:
            await client.close()


async def test_a_lost_connections_reads_waiting_for_their_size_leave_nothing_held(
        bookie_config):
    """PB5 with PB7: a client leaves plain reads, batch reads, whole-path reads and a
    fencing read of 1 MiB entries waiting to be read again at their size, then goes. Its
    slots and reservations all come back (none counted twice, none left), the fence is
    whole, and another client is served."""
    limits = Limits()
    big = [entry(34, e, payload=bytes([e]) * (1 << 20)) for e in range(4)]
    async with running_bookie(bookie_config) as running, \
            listener_of(running.bookie, limits=limits) as (listener, port):
        for e, data in enumerate(big):
            await running.bookie.add_entry(34, e, data, KEY)
        await running.bookie.checkpoint()
        budget = listener.budget
        client = BkClient(*await asyncio.open_connection("127.0.0.1", port))
        await client.send(b"".join(
            [v3.frame(client.request("READ_ENTRY", ledgerId=34, entryId=n % 4,
                                     masterKey=KEY)) for n in range(30)]
            + [v3.frame(client.request("READ_LAC", ledgerId=34)) for _ in range(30)]
            + [v3.frame(client.request("READ_ENTRY", ledgerId=34, entryId=0, flag=1,
                                       masterKey=KEY))]
            + [v3.frame(client.request("READ_ENTRY", ledgerId=34, entryId=n % 4))
               for n in range(30)]))
        await until(lambda: budget.in_progress == 0 and sum(unread_answers(listener)) > 0
                    and budget.resized_total > 0, "the reads wait for their size")
        await client.close()
        await until(lambda: not listener.connections and budget.in_progress == 0
                    and budget.read_bytes == 0, "the lost connection's budget comes back")
        assert running.bookie.ledger_state(34).fenced
        resized = budget.resized_total
        second = await open_client(port)
        try:  # v2, with batch reads this time, then gone again
            await second.send(b"".join([v2.encode_read(34, n % 4) for n in range(30)]
                                       + [v2.encode_batch_read(34, 0, n, 4, 16 << 20)
                                          for n in range(30)]))
            await until(lambda: budget.in_progress == 0 and budget.resized_total > resized
                        and sum(unread_answers(listener)) > 0, "the reads wait for their size")
        finally:
            await second.close()
        await until(lambda: not listener.connections and budget.in_progress == 0
                    and budget.read_bytes == 0, "the lost connection's budget comes back")
        async with BkClient.connect(port) as other:
            read = await other.call_v2(v2.encode_read(34, 3))
            assert (read.rc, read.data) == (v2.EOK, big[3])
        assert budget.read_bytes == 0 and budget.in_progress == 0
