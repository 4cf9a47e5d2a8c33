"""Replicated ledgers (docs/cluster.md §3): entries on exactly their
write set, acknowledged at Qa, read back through the metadata; an ensemble change when a
bookie of the ensemble is killed, committed before any affected entry is acknowledged."""

from __future__ import annotations

import asyncio
import signal

import pytest

from api.client import BookieClient
from api.client.distribution import bookies_of, write_set
from api.client.ensemble import BookKeeper, RecoveryUndecided
from api.client.metadata import MetadataState
from bookie.errors import Fenced, NoEntry, NoLedger
from tests.support.servers import Daemon

FLAGS = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB")


def test_the_round_robin_schedule():
    assert [write_set(e, 3, 2) for e in range(4)] == [[0, 1], [1, 2], [2, 0], [0, 1]]
    assert write_set(7, 5, 5) == [2, 3, 4, 0, 1]
    with pytest.raises(ValueError):
        write_set(0, 2, 3)
    ensembles = ((0, ("a", "b", "c")), (5, ("a", "d", "c")))
    assert bookies_of(ensembles, 4, 2) == ["b", "c"] and bookies_of(ensembles, 5, 2) == ["c", "a"]
    assert bookies_of(ensembles, 7, 2) == ["d", "c"]


@pytest.fixture
def bookies(tmp_path, zk_uri):
    daemons = [Daemon(str(tmp_path / f"b{i}" / "data"), *FLAGS, "--metadata-service-uri",
                      zk_uri).start() for i in range(4)]
    yield daemons
    for daemon in daemons:
        if daemon.proc is not None and daemon.proc.poll() is None:
            assert daemon.terminate() == 0


async def stored_on(bookie_id: str, ledger_id: int, entry_id: int) -> bool:
    async with BookieClient(f"http://{bookie_id}") as client:
        try:
            await client.read_entry(ledger_id, entry_id)
            return True
        except NoEntry:
            return False
        except Exception:  # noqa: BLE001 - NoLedger: the bookie never saw the ledger
            return False


async def test_entries_live_on_exactly_their_write_set_and_read_back(bookies, zk_uri):
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, password=b"pw",
                                        custom_metadata={"application": "tests"})
        ids = [await writer.append(f"entry {i}".encode()) for i in range(12)]
        assert ids == list(range(12)) and writer.lac == 11
        assert await writer.close() == 11
        metadata = await bk.store.read(writer.ledger_id)
        assert metadata.state is MetadataState.CLOSED and metadata.last_entry_id == 11
        assert metadata.custom == {"application": "tests"}   # kept across the close's CAS
        ensemble = metadata.ensembles[0][1]
        everyone = [d.url.rsplit("/", 1)[-1] for d in bookies]
        for entry_id in range(12):
            holders = bookies_of(metadata.ensembles, entry_id, 2)
            for bookie_id in everyone:
                expected = bookie_id in holders
                assert await stored_on(bookie_id, writer.ledger_id, entry_id) == expected
        assert len(set(ensemble)) == 3
        reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)
        entries = await reader.read_range(0, 11)
        assert [e.payload for e in entries] == [f"entry {i}".encode() for i in range(12)]
        await bk.delete_ledger(writer.ledger_id)  # the metadata goes; bookies' GC follows
        with pytest.raises(NoLedger):
            await bk.store.read(writer.ledger_id)


async def test_a_killed_bookie_is_replaced_and_every_acked_entry_reads_back(bookies, zk_uri):
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, password=b"pw")
        for i in range(10):
            await writer.append(f"before {i}".encode())
        victim_id = writer.ensemble[1]
        victim = next(d for d in bookies if d.url.endswith(victim_id))
        victim.kill9()
        acked = [await writer.append(f"after {i}".encode()) for i in range(20)]
        assert acked == list(range(10, 30))
        await writer.close()
        metadata = await bk.store.read(writer.ledger_id)
        assert len(metadata.ensembles) == 2 and victim_id not in metadata.ensembles[-1][1]
        assert metadata.ensembles[-1][0] <= 10  # the new segment starts at the LAC + 1 then
        reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)
        payloads = [e.payload for e in await reader.read_range(0, 29)]
        assert payloads == [f"before {i}".encode() for i in range(10)] + [
            f"after {i}".encode() for i in range(20)]


async def test_recovery_closes_a_dead_writers_ledger_at_its_last_acknowledged_entry(bookies,
                                                                                      zk_uri):
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, password=b"pw")
        for i in range(15):
            await writer.append(f"e{i}".encode())  # acknowledged; the writer then "dies"
        async with await BookKeeper.connect(zk_uri) as other:  # another process's client
            reader = await other.open_ledger(writer.ledger_id, b"pw")  # recovers first
            assert reader.metadata.state is MetadataState.CLOSED
            assert reader.metadata.last_entry_id == 14  # S2: >= every acknowledged entry
            assert reader.metadata.length == sum(len(f"e{i}") for i in range(15))
            entries = await reader.read_range(0, 14)
            assert [e.payload for e in entries] == [f"e{i}".encode() for i in range(15)]
            again = await other.open_ledger(writer.ledger_id, b"pw")  # CLOSED: as it is
            assert again.metadata.last_entry_id == 14
        with pytest.raises(Fenced):  # the old writer is fenced out (S2)
            await writer.append(b"late")


async def test_recovery_refuses_to_decide_without_enough_fenced_bookies(bookies, zk_uri):
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, password=b"pw")
        for i in range(5):
            await writer.append(b"x")
        for bookie_id in writer.ensemble[:2]:  # two of three gone: Qa of a write set unknown
            next(d for d in bookies if d.url.endswith(bookie_id)).kill9()
        with pytest.raises(RecoveryUndecided):
            await bk.open_ledger(writer.ledger_id, b"pw")
        metadata = await bk.store.read(writer.ledger_id)
        assert metadata.state is MetadataState.IN_RECOVERY  # S5: not truncated, not closed


async def test_a_silent_replica_does_not_hold_a_read_speculative_reads(bookies, zk_uri):
    """The first replica of every entry is paused (SIGSTOP) and reads wait an hour for an
    answer: without the speculative read to the next replica this test could not finish."""
    async with await BookKeeper.connect(zk_uri, read_timeout_s=3600,
                                        speculative_read_s=0.2) as bk:
        writer = await bk.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2, password=b"p")
        for i in range(6):
            await writer.append(f"s{i}".encode())
        await writer.close()
        reader = await bk.open_ledger(writer.ledger_id, b"p", recover=False)
        silent = next(d for d in bookies if d.url.endswith(reader.metadata.ensembles[0][1][0]))
        silent.proc.send_signal(signal.SIGSTOP)
        try:
            for entry_id in range(0, 6, 3):  # entries whose write set starts at the silent one
                assert (await reader.read_entry(entry_id)).payload == f"s{entry_id}".encode()
        finally:
            silent.proc.send_signal(signal.SIGCONT)


async def test_a_tail_follows_the_lac_across_the_ensemble_to_the_closed_end(bookies, zk_uri):
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2, password=b"t")
        reader = await bk.open_ledger(writer.ledger_id, b"t", recover=False)
        seen: list[bytes] = []

        async def follow() -> None:
            async for entry in reader.tail(0):
                seen.append(entry.payload)

        follower = asyncio.ensure_future(follow())
        for i in range(20):
            await writer.append(f"t{i}".encode())
        await writer.close()
        await asyncio.wait_for(follower, 60)  # ends by itself at the closed end
        assert seen == [f"t{i}".encode() for i in range(20)]  # each once, in order (S4)
