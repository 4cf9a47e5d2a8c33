"""Compound faults (the compound-faults issue): a fault during recovery, an append racing
close, reads at and above the LAC; each on a real ZooKeeper and real bookie daemons, each
failing on the code the issue was filed against."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import signal

import pytest

from api.client.codec import LedgerCodec
from api.client.distribution import bookies_of
from api.client.ensemble import BookKeeper, LedgerClosed, RecoveryUndecided
from api.client.ensemble_reader import BeyondLastConfirmed
from api.client.ensemble_recovery import Recovery
from api.client.metadata import MetadataState
from api.cluster.autorecovery.throttle import Throttle
from api.cluster.autorecovery.worker import ReplicationWorker
from api.cluster.underreplication import Underreplication
from bookie.errors import NoEntry, NoLedger
from tests.cluster.test_autorecovery import wait_until
from tests.support.servers import Daemon

FAST = {"add_timeout_s": 2.0, "read_timeout_s": 2.0}


async def copy_on(bk: BookKeeper, bookie_id: str, ledger_id: int, entry_id: int,
                  just_resumed: bool) -> bytes:
    """The bookie's copy. A bookie just resumed from SIGSTOP may still be working through
    the adds it was sent before the pause (the writer went on at Qa = 2 of its 3 acks), and
    a read of it can overtake them: its copy is waited for, within wait_until's deadline."""
    async def read():
        try:
            return await bk.client(bookie_id).read_entry(ledger_id, entry_id)
        except (NoEntry, NoLedger):
            if just_resumed:
                return None
            raise
    if just_resumed:
        return await wait_until(read, f"entry {ledger_id}/{entry_id} on resumed {bookie_id}")
    return await read()


@pytest.fixture
def bookies(start_bookies):
    return start_bookies(4)


def by_id(bookies) -> dict[str, Daemon]:
    return {d.url.split("//", 1)[1]: d for d in bookies}


def pause(daemon: Daemon) -> None:
    daemon.proc.send_signal(signal.SIGSTOP)


def resume(daemon: Daemon) -> None:
    daemon.proc.send_signal(signal.SIGCONT)


async def test_a_failed_recoverys_replacement_does_not_let_the_next_recovery_truncate(
        bookies, zk_uri):
    """Bug A at 2/2/2 with A, B and spares C, D: 20 entries acked (bookie LAC 9), the writer
    dies. Recovery 1 runs with B, C and D paused: A fences, the write-back of entry 10 to B
    times out, so do the replacements: RecoveryUndecided. Then B, C, D resume and A pauses.
    Recovery 2 must fence B (not an empty replacement) and close at 19: every acked entry
    reads back. Before the fix recovery 1 committed (10, [A, C]) and recovery 2 closed at 10."""
    daemons = by_id(bookies)
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await bk.create_ledger(2, 2, 2, password=b"pw")
        for i in range(10):
            await writer.append(b"e%d" % i)
        acked = await asyncio.gather(*(writer.append(b"e%d" % i) for i in range(10, 20)))
        assert acked == list(range(10, 20))
        first, second = writer.ensemble  # the writer now "dies": no close
        spares = [b for b in daemons if b not in writer.ensemble]
        codec = LedgerCodec.for_password(writer.ledger_id, b"pw", writer.metadata.digest_type)

        for bookie_id in (second, *spares):
            pause(daemons[bookie_id])
        try:
            with pytest.raises(RecoveryUndecided):
                await Recovery(bk, await bk.store.read(writer.ledger_id), codec).run()
        finally:
            for bookie_id in (second, *spares):
                resume(daemons[bookie_id])
        after_failure = await bk.store.read(writer.ledger_id)

        pause(daemons[first])
        try:
            reader = await bk.open_ledger(writer.ledger_id, b"pw")
            assert reader.metadata.state is MetadataState.CLOSED
            assert reader.metadata.last_entry_id == 19
            entries = await reader.read_range(0, 19)
        finally:
            resume(daemons[first])
        assert [e.payload for e in entries] == [b"e%d" % i for i in range(20)]
        assert after_failure.state is MetadataState.IN_RECOVERY
        assert after_failure.ensembles == ((0, (first, second)),)  # RC1: nothing committed
        # The close committed recovery's replacement of the paused bookie (RC1), and every
        # bookie the metadata names for an entry holds it (RC3: Qw copies, not Qa).
        assert first not in reader.metadata.ensembles[-1][1]
        for entry_id in range(20):
            for bookie_id in bookies_of(reader.metadata.ensembles, entry_id, 2):
                if bookie_id != first:
                    data = await bk.client(bookie_id).read_entry(writer.ledger_id, entry_id)
                    assert codec.decode(data, entry_id).payload == b"e%d" % entry_id


async def test_d_no_append_is_acknowledged_after_close(bookies, zk_uri):
    """Bug D: one task appends while another closes. Every append that began before the
    close is waited for and lies at or below the closed end; every later one fails with
    LedgerClosed. Before the fix appends up to 199 were acked on a ledger closed at 182."""
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=b"pw")
        acked: list[int] = []
        refused = 0
        closed_at: list[int] = []

        async def appender() -> None:
            nonlocal refused
            for i in range(200):
                try:
                    acked.append(await writer.append(b"x%d" % i))
                except LedgerClosed:
                    refused += 1

        async def closer() -> None:
            while len(acked) < 50:
                await asyncio.sleep(0)  # noqa: sleep-ok (yields only: the close starts amid the appends)
            closed_at.append(await writer.close())

        await asyncio.gather(appender(), closer())
        metadata = await bk.store.read(writer.ledger_id)
        assert metadata.state is MetadataState.CLOSED
        assert metadata.last_entry_id == closed_at[0]
        assert acked and max(acked) <= metadata.last_entry_id  # S2
        assert refused == 200 - len(acked) > 0
        with pytest.raises(LedgerClosed):
            await writer.append(b"after")
        assert await writer.close() == closed_at[0]  # a second close: the same end


async def test_s4_reads_above_the_lac_and_past_the_end_are_refused(bookies, zk_uri):
    """S4 (RD1, RD2): a reader of an open ledger reads entries up to the LAC the bookies
    report, is refused above it, and its LAC never goes back; on a closed ledger the end is
    the limit. Before the fix read_entry served an entry above the LAC."""
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=b"pw")
        for i in range(5):
            await writer.append(b"e%d" % i)
        # Entry 4 is acked, but only entry 5 would carry LAC 4: the bookies' LAC is 3.
        reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)
        assert await reader.read_lac() == 3
        assert (await reader.read_entry(3)).payload == b"e3"
        with pytest.raises(BeyondLastConfirmed):
            await reader.read_entry(4)  # stored on its bookies, but not confirmed to readers
        with pytest.raises(BeyondLastConfirmed):
            await reader.read_range(0, 4)
        await writer.append(b"e5")
        assert (await reader.read_entry(4)).payload == b"e4"  # the LAC is looked up again
        assert reader.lac == 4
        # Only entry 5's bookies report LAC 4; with both paused the others say 3, and the
        # reader's LAC must not go back (RD1). Before the fix read_lac() returned 3 here.
        daemons = by_id(bookies)
        fives = bookies_of(writer.metadata.ensembles, 5, 2)
        for bookie_id in fives:
            pause(daemons[bookie_id])
        try:
            assert await reader.read_lac() == 4
        finally:
            for bookie_id in fives:
                resume(daemons[bookie_id])
        await writer.close()
        closed = await bk.open_ledger(writer.ledger_id, b"pw")
        assert await closed.read_lac() == 5
        assert [e.payload for e in await closed.read_range(0, 5)] == [
            b"e%d" % i for i in range(6)]
        with pytest.raises(BeyondLastConfirmed):
            await closed.read_entry(6)


@pytest.fixture
def gc_bookies(start_bookies):
    """Three bookies whose GC runs only when asked and deletes at the first sighting."""
    return start_bookies(3, "--gc-interval-ms", "0", "--gc-metadata-grace-ms", "0")


async def closed_ledger_with_a_stray_copy(bk: BookKeeper, daemons):
    """A closed 2/2/2 ledger, and a full copy of it on the third bookie, which the metadata
    does not name: what a worker leaves before its compare-and-set, or GM2's prey."""
    writer = await bk.create_ledger(2, 2, 2, password=b"pw")
    for i in range(6):
        await writer.append(b"e%d" % i)
    await writer.close()
    stray = next(b for b in daemons if b not in writer.ensemble)
    reader = await bk.open_ledger(writer.ledger_id, b"pw")
    datas = [writer.codec.frame(e.entry_id, e.lac, e.length, e.payload)
             for e in await reader.read_range(0, 5)]
    await bk.client(stray).add_batch(writer.ledger_id, datas, writer.codec.master_key,
                                     writer.codec.digest_type.header_name, recovery=True)
    return writer, stray, datas


async def gc(bk: BookKeeper, bookie_id: str) -> dict:
    return await bk.client(bookie_id)._request("POST", "/v1/bookie/gc", admin=True)


async def test_b_a_copy_gc_deleted_is_taken_again_by_a_recovery_add(gc_bookies, zk_uri):
    """Bug B: GM2's delete leaves a tombstone; a later recovery add of the same ledger (a
    worker placing a copy there again) was refused "was deleted" for ever, wedging
    re-replication. Now the tombstone of a ledger the metadata lists is lifted (W5), the
    copy is taken, and a GC run after the metadata names the bookie keeps it whole."""
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        daemons = by_id(gc_bookies)
        writer, stray, datas = await closed_ledger_with_a_stray_copy(bk, daemons)
        client = bk.client(stray)
        await gc(bk, stray)  # GM2: closed, not placed there, not marked
        with pytest.raises(NoLedger):
            await client.read_entry(writer.ledger_id, 0)
        await client.add_batch(writer.ledger_id, datas, writer.codec.master_key,
                               writer.codec.digest_type.header_name, recovery=True)
        metadata = await bk.store.read(writer.ledger_id)
        first, members = metadata.ensembles[0]
        await bk.store.write(dataclasses.replace(
            metadata, ensembles=((first, (members[0], stray)),)))  # as a worker's CAS
        result = await gc(bk, stray)
        assert result["problems"] == []
        for entry_id, data in enumerate(datas):
            assert await client.read_entry(writer.ledger_id, entry_id) == data
        # Kept across a restart too: the revived state and its locations are durable.
        daemons[stray].terminate()
        daemons[stray].start()
        await client.close()
        bk._clients.pop(stray)
        for entry_id, data in enumerate(datas):
            assert await bk.client(stray).read_entry(writer.ledger_id, entry_id) == data
        # A ledger deleted from the metadata keeps its tombstone (ids are never reused).
        await bk.delete_ledger(writer.ledger_id)
        await gc(bk, stray)
        with pytest.raises(NoLedger):
            await bk.client(stray).add_batch(writer.ledger_id, datas, writer.codec.master_key,
                                             writer.codec.digest_type.header_name,
                                             recovery=True)


async def test_c_gc_never_deletes_a_copy_while_a_worker_holds_the_ledgers_lock(
        gc_bookies, zk_uri):
    """Bug C: GM2 read the markers, then the metadata, then deleted, holding nothing; a
    worker copying to this bookie and compare-and-setting it in meanwhile lost its copy.
    Now GM2 checks and deletes under the ledger's replication lock (GM2, as BookKeeper's
    removeOverReplicatedLedgers): while a worker holds it the copy stays."""
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        daemons = by_id(gc_bookies)
        writer, stray, datas = await closed_ledger_with_a_stray_copy(bk, daemons)
        worker_side = Underreplication(bk.store.client, bk.store.root, "worker-under-test")
        assert await asyncio.to_thread(worker_side.try_lock, writer.ledger_id)
        await gc(bk, stray)
        assert await bk.client(stray).read_entry(writer.ledger_id, 5) == datas[5]
        await asyncio.to_thread(worker_side.release, writer.ledger_id)
        await gc(bk, stray)
        with pytest.raises(NoLedger):
            await bk.client(stray).read_entry(writer.ledger_id, 5)


@pytest.fixture
def quiet_bookies(start_bookies):
    """Four bookies without autorecovery of their own: the test drives one worker."""
    return start_bookies(4, "--gc-interval-ms", "0", "--autorecovery-daemon-enabled", "false")


def worker_of(bk: BookKeeper) -> ReplicationWorker:
    ur = Underreplication(bk.store.client, bk.store.root, "worker-under-test")
    return ReplicationWorker(bk, ur, grace_s=0.0, throttle=Throttle(0), wake=asyncio.Event())


async def closed_ledger(bk: BookKeeper, quorums, count: int = 8):
    writer = await bk.create_ledger(*quorums, password=b"pw")
    for i in range(count):
        await writer.append(b"e%d" % i)
    await writer.close()
    return writer


async def test_rw6_a_marked_bookie_that_came_back_whole_is_not_replaced(quiet_bookies, zk_uri):
    """The worker replaced every bookie a marker named, even one that came back holding
    all its entries (a needless copy, then GM2's delete). Now it asks the bookie what it
    holds (RW6): whole, it stays; missing entries, it is replaced."""
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await closed_ledger(bk, (3, 3, 2))
        came_back = writer.ensemble[1]
        worker = worker_of(bk)
        assert await worker.replicate(writer.ledger_id, {came_back}) is True
        assert (await bk.store.read(writer.ledger_id)).ensembles == writer.metadata.ensembles
        await bk.client(came_back).delete_ledger(writer.ledger_id)  # its copy is gone
        assert await worker.replicate(writer.ledger_id, {came_back}) is True
        metadata = await bk.store.read(writer.ledger_id)
        assert came_back not in metadata.ensembles[0][1]
        assert worker.stats.fragments_replaced == 1


async def test_rw5_a_target_that_refuses_is_ruled_out(quiet_bookies, zk_uri):
    """A worker picked its target at random and failed the whole attempt when that target
    refused (a paused bookie here; a tombstone before W5): with that bookie drawn every
    time, the ledger stayed under-replicated. Now the next candidate takes the copy (RW5).
    The draw is pinned so that the refusing bookie is asked first."""
    daemons = by_id(quiet_bookies)
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await closed_ledger(bk, (2, 2, 2))
        lost = writer.ensemble[1]
        daemons[lost].terminate()  # unregistered: its fragment is bad
        candidates = [b for b in await bk.writable_bookies() if b not in writer.ensemble]
        assert len(candidates) == 2
        refusing = candidates[0]
        pause(daemons[refusing])
        try:
            seed = next(s for s in range(100) if shuffled(candidates, s)[0] == refusing)
            random.seed(seed)  # the worker's one draw: the refusing bookie first
            assert await worker_of(bk).replicate(writer.ledger_id, {lost}) is True
        finally:
            resume(daemons[refusing])
        metadata = await bk.store.read(writer.ledger_id)
        assert metadata.ensembles[0][1] == (writer.ensemble[0], candidates[1])
        reader = await bk.open_ledger(writer.ledger_id, b"pw")
        assert [e.payload for e in await reader.read_range(0, 7)] == [
            b"e%d" % i for i in range(8)]


def shuffled(items: list, seed: int) -> list:
    items = list(items)
    random.Random(seed).shuffle(items)
    return items


async def test_rw7_an_old_marker_does_not_cut_an_open_ledgers_grace_short(quiet_bookies, zk_uri):
    """The worker timed an open ledger's grace from the marker's ctime, which is never
    refreshed when another bookie is added to it: a marker made long ago for an older loss
    let a worker fence at once a ledger whose writer could still replace the new loss
    itself. Now the grace counts from the worker's own first sighting (RW7)."""
    daemons = by_id(quiet_bookies)
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=b"pw")
        await writer.append(b"e0")
        lost = writer.ensemble[0]
        daemons[lost].terminate()
        ur = Underreplication(bk.store.client, bk.store.root)
        await asyncio.to_thread(ur.mark, writer.ledger_id, [lost])
        path = ur.marker_path(writer.ledger_id)
        data, _ = await asyncio.to_thread(bk.store.client.get, path)
        old = data.replace(data[data.index(b"ctime"):].split(b"\n")[0], b"ctime: 1")
        await asyncio.to_thread(bk.store.client.set, path, old)  # marked in 1970
        worker = ReplicationWorker(bk, ur, grace_s=30.0, throttle=Throttle(0),
                                   wake=asyncio.Event())
        wait = await worker.replicate(writer.ledger_id, {lost})
        assert isinstance(wait, float) and 29.0 < wait <= 30.0
        assert (await bk.store.read(writer.ledger_id)).state is MetadataState.OPEN
        assert await writer.append(b"e1") == 1  # the writer was not fenced


async def test_racing_recoveries_with_a_paused_bookie_converge(bookies, zk_uri):
    """Two recoveries of one ledger at once, a bookie of its ensemble paused: each replaces
    it in its own view only (RC1), one close wins, the other returns the winner's metadata
    (no change of one undoes the other's), and every bookie the final metadata names for an
    entry holds it (RC3)."""
    daemons = by_id(bookies)
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await bk.create_ledger(3, 3, 2, password=b"pw")
        for i in range(10):
            await writer.append(b"e%d" % i)
        await asyncio.gather(*(writer.append(b"e%d" % i) for i in range(10, 20)))
        paused = writer.ensemble[2]
        codec = LedgerCodec.for_password(writer.ledger_id, b"pw", writer.metadata.digest_type)
        pause(daemons[paused])
        try:
            opened = await bk.store.read(writer.ledger_id)
            first, second = await asyncio.gather(Recovery(bk, opened, codec).run(),
                                                 Recovery(bk, opened, codec).run())
        finally:
            resume(daemons[paused])
        final = await bk.store.read(writer.ledger_id)
        for result in (first, second):
            assert result.state is MetadataState.CLOSED
            assert (result.last_entry_id, result.ensembles) == (19, final.ensembles)
        assert paused not in final.ensembles[-1][1]
        for entry_id in range(20):
            for bookie_id in bookies_of(final.ensembles, entry_id, 3):
                data = await copy_on(bk, bookie_id, writer.ledger_id, entry_id,
                                     just_resumed=bookie_id == paused)
                assert codec.decode(data, entry_id).payload == b"e%d" % entry_id


async def test_rc2_a_workers_change_to_an_earlier_segment_survives_a_recovery(bookies, zk_uri):
    """RC2: while a ledger is IN_RECOVERY a replication worker may still replace a bookie of
    an earlier, closed segment. The recovery's close keeps that change (and its own view of
    the last segment) instead of refusing the close or undoing the worker's replacement."""
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await bk.create_ledger(2, 2, 2, password=b"pw")
        for i in range(4):
            await writer.append(b"e%d" % i)
        await writer._replace(0, writer.ensemble[0])  # a second segment from entry 4
        for i in range(4, 8):
            await writer.append(b"e%d" % i)
        codec = LedgerCodec.for_password(writer.ledger_id, b"pw", writer.metadata.digest_type)
        recovery = Recovery(bk, await bk.store.read(writer.ledger_id), codec)
        await recovery._mark_in_recovery()
        marked = await bk.store.read(writer.ledger_id)
        (first, members), last_segment = marked.ensembles
        spare = next(b for b in by_id(bookies) if b not in members and b not in last_segment[1])
        for entry_id in range(4):  # what a worker does: copy, then compare-and-set
            data = await bk.client(members[1]).read_entry(writer.ledger_id, entry_id)
            await bk.client(spare).add_entry(writer.ledger_id, entry_id, data,
                                             codec.master_key, codec.digest_type.header_name,
                                             recovery=True)
        moved = ((first, (members[0], spare)), last_segment)
        await bk.store.write(dataclasses.replace(marked, ensembles=moved))
        closed = await recovery.run()
        assert closed.state is MetadataState.CLOSED and closed.last_entry_id == 7
        assert closed.ensembles == moved
        reader = await bk.open_ledger(writer.ledger_id, b"pw")
        assert [e.payload for e in await reader.read_range(0, 7)] == [
            b"e%d" % i for i in range(8)]
