"""Named cases from Apache BookKeeper's history (issue 16), each deterministic, on a real
ZooKeeper and real bookie daemons."""

from __future__ import annotations

import asyncio
import shutil
import signal

import pytest

from api.client.ensemble import BookKeeper
from api.client.metadata import MetadataState
from bookie.errors import BookieError
from tests.support.servers import Daemon
from tests.support.zookeeper import free_port

FLAGS = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB")
FAST = {"add_timeout_s": 2.0, "read_timeout_s": 2.0}


@pytest.fixture
def bookies(start_bookies):
    return start_bookies(4)


def daemon_of(bookies, bookie_id: str) -> Daemon:
    return next(d for d in bookies if d.url.endswith("//" + bookie_id))


async def written(bk: BookKeeper, count: int, quorums=(3, 2, 2)):
    writer = await bk.create_ledger(*quorums, password=b"pw")
    for i in range(count):
        await writer.append(f"e{i}".encode())
    return writer


async def test_bk2615_recovery_of_a_ledger_whose_last_segment_is_empty(bookies, zk_uri):
    """An ensemble change commits a segment at LAC+1; the writer dies before writing into it.
    Recovery starts at max(LAC, segment start - 1) and closes at the last acked entry."""
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await written(bk, 6)
        ensemble = list(writer.ensemble)
        await writer._replace(0, ensemble[0])  # the change alone: no entry in the new segment
        assert len(writer.metadata.ensembles) == 2 and writer.metadata.ensembles[-1][0] == 6
        reader = await bk.open_ledger(writer.ledger_id, b"pw")
        assert reader.metadata.state is MetadataState.CLOSED
        assert reader.metadata.last_entry_id == 5
        assert [e.payload for e in await reader.read_range(0, 5)] == [
            f"e{i}".encode() for i in range(6)]


async def test_bk1067_one_hanging_bookie_does_not_stall_recovery(bookies, zk_uri):
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await written(bk, 8)
        hung = daemon_of(bookies, writer.ensemble[2])
        hung.proc.send_signal(signal.SIGSTOP)
        try:
            reader = await asyncio.wait_for(bk.open_ledger(writer.ledger_id, b"pw"), 60)
            assert reader.metadata.last_entry_id == 7
        finally:
            hung.proc.send_signal(signal.SIGCONT)


async def test_bk2614_a_fence_lost_to_one_bookie_still_stops_the_old_writer(bookies, zk_uri):
    """The fence misses one bookie (paused); every write set still holds a fenced bookie, so
    the old writer can never gather Qa again: nothing it writes after the close is acked."""
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await written(bk, 5)
        missed = daemon_of(bookies, writer.ensemble[1])
        missed.proc.send_signal(signal.SIGSTOP)
        async with await BookKeeper.connect(zk_uri, **FAST) as other:
            reader = await other.open_ledger(writer.ledger_id, b"pw")
        missed.proc.send_signal(signal.SIGCONT)
        assert reader.metadata.last_entry_id == 4
        with pytest.raises(BookieError):
            await writer.append(b"after the close")  # S2: never acknowledged
        assert writer.lac == 4


async def test_bk1591_no_ack_before_the_ensemble_change_reaches_zookeeper(bookies, zk_uri,
                                                                          zookeeper):
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await written(bk, 3)
        victim = daemon_of(bookies, writer.ensemble[(3 + 1) % 3])  # in entry 3's write set
        victim.kill9()
        await asyncio.to_thread(zookeeper.stop)
        try:
            append = asyncio.ensure_future(writer.append(b"needs a new bookie"))
            done, _ = await asyncio.wait([append], timeout=6)  # > the 2 s add timeout
            assert not done, "acknowledged while the ensemble change could not be committed"
        finally:
            await asyncio.to_thread(zookeeper.start)
        assert await asyncio.wait_for(append, 60) == 3
        metadata = await bk.store.read(writer.ledger_id)
        assert len(metadata.ensembles) == 2 and victim.url.rsplit("/", 1)[-1] not in \
            metadata.ensembles[-1][1]


async def test_bk2908_a_wiped_bookie_cannot_truncate_a_ledger(bookies, zk_uri):
    """Its cookie keeps it out (S6), so recovery decides without it: the ledger keeps every
    acknowledged entry, never answered 'missing' by the empty disk."""
    async with await BookKeeper.connect(zk_uri, **FAST) as bk:
        writer = await written(bk, 10, quorums=(3, 3, 2))
        wiped = daemon_of(bookies, writer.ensemble[0])
        assert wiped.terminate() == 0
        shutil.rmtree(wiped.data_dir)
        with pytest.raises(RuntimeError, match="exited 1"):
            wiped.start()
        assert "cookie" in wiped.log_text()
        reader = await bk.open_ledger(writer.ledger_id, b"pw")
        assert reader.metadata.last_entry_id == 9
        assert [e.payload for e in await reader.read_range(0, 9)] == [
            f"e{i}".encode() for i in range(10)]


async def test_bk4651_concurrent_bookie_failures_with_adds_in_flight(tmp_path, zk_uri, bookies):
    """Two bookies of the ensemble die at once with adds in flight: two ensemble changes, the
    second built on the first's committed metadata; every acked entry reads back (3/3/3:
    losing two copies stays below the tolerance)."""
    extra = Daemon(str(tmp_path / "b-extra" / "data"), *FLAGS, "--metadata-service-uri",
                   zk_uri, "--port", str(free_port())).start()
    try:
        async with await BookKeeper.connect(zk_uri, **FAST) as bk:
            writer = await written(bk, 10, quorums=(3, 3, 3))
            victims = [daemon_of([*bookies, extra], b) for b in writer.ensemble[:2]]
            appends = [asyncio.ensure_future(writer.append(f"e{10 + i}".encode()))
                       for i in range(20)]
            for victim in victims:
                victim.kill9()
            assert await asyncio.gather(*appends) == list(range(10, 30))
            await writer.close()
            metadata = await bk.store.read(writer.ledger_id)
            gone = {v.url.rsplit("/", 1)[-1] for v in victims}
            assert not gone & set(metadata.ensembles[-1][1])
            reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)
            assert [e.payload for e in await reader.read_range(0, 29)] == [
                f"e{i}".encode() for i in range(30)]
    finally:
        extra.terminate()
