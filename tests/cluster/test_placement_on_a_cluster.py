"""Placement by topology on a real cluster (docs/cluster.md §6): bookies publish where they
stand, and every caller of the placement policy keeps each write set across racks: ledger
creation, a writer's ensemble change, recovery's replacement, the replication worker's
target, and the auditor's placement check with the worker's repair (PP1, PC1, PR1).

Six bookies on three racks, two in each: with a 3/2 ensemble each write set is a pair of
them, so only one bookie (the other one of the lost bookie's rack) keeps a replacement
across racks. Random placement (the code before this) keeps all three racks in 40% of
ensembles and picks the one right replacement one time in three.
"""

from __future__ import annotations

import asyncio
import urllib.request

import pytest

from api.client.ensemble import BookKeeper
from api.client.placement import (MEETS_STRICT, Placement, PlacementCounts, PlacementNotMet,
                                  PlacementRules)
from api.client.topology import Location, encode_rack_map
from api.cluster.zookeeper import write_rack_map
from scripts.drill.drill_cluster import payload_of
from tests.cluster.test_autorecovery import (FLAGS, PASSWORD, bookie_id, cleanup,  # noqa: F401
                                             fully_replicated, wait_until)
from tests.support.servers import Daemon

RACKS = 3


def start_racked(tmp_path, zk_uri, count: int, *extra: str) -> dict[str, Daemon]:
    """Bookie i in rack i mod 3 (zone i mod 3), on host i: {bookie id: daemon}."""
    daemons = [Daemon(str(tmp_path / f"b{i}" / "data"), *FLAGS, *extra,
                      "--topology-location", f"/zone-{i % RACKS}/rack-{i % RACKS}",
                      "--topology-host", f"host-{i}", "--metadata-service-uri",
                      zk_uri).start() for i in range(count)]
    return {bookie_id(d): d for d in daemons}


def rack_policy(**rules) -> Placement:
    return Placement(PlacementRules(policy="rack", **rules), PlacementCounts())


async def segments_adhere(bk: BookKeeper, ledger_id: int) -> bool:
    metadata = await bk.store.read(ledger_id)
    named = sorted({b for _, members in metadata.ensembles for b in members})
    where = await bk.transport.locations(named)
    return all(bk.placement.adherence(members, metadata.write_quorum, where) == MEETS_STRICT
               for _, members in metadata.ensembles)


async def write(bk: BookKeeper, entries: int, close: bool = True, **quorums):
    quorums = {"ensemble": 3, "write_quorum": 2, "ack_quorum": 2, **quorums}
    writer = await bk.create_ledger(password=PASSWORD, **quorums)
    payloads = [payload_of(writer.ledger_id, e) for e in range(entries)]
    for payload in payloads:
        await writer.append(payload)
    if close:
        await writer.close()
    return writer, payloads


async def test_new_ledgers_span_the_racks_the_bookies_publish_and_the_rack_map_wins(
        tmp_path, zk_uri, cleanup):
    bookies = start_racked(tmp_path, zk_uri, 6)
    cleanup.extend(bookies.values())
    async with await BookKeeper.connect(zk_uri, placement=rack_policy()) as bk:
        for _ in range(15):
            writer, _ = await write(bk, 1)
            assert await segments_adhere(bk, writer.ledger_id), writer.metadata.ensembles
        assert not bk.placement.counts.not_adhering
        # Pulsar's rack map puts five bookies in one rack: it beats their registrations,
        # and two racks cannot hold a 3/3 ensemble over three racks.
        ids = sorted(bookies)
        moved = {b: Location("/zone-9/rack-9", f"h{n}") for n, b in enumerate(ids[:5])}
        await asyncio.to_thread(write_rack_map, bk.store.client, bk.store.root,
                                encode_rack_map(moved))
        where = await bk.transport.locations(ids)
        assert [where[b].location for b in ids[:5]] == ["/zone-9/rack-9"] * 5
        assert where[ids[5]].location.startswith("/zone-")  # its registration's
        await write(bk, 1)  # not strict: placed, and counted as not adhering
        assert bk.placement.counts.not_adhering == {"create": 1}
        strict = rack_policy(min_racks=3, strict=True)
        async with await BookKeeper.connect(zk_uri, placement=strict) as strict_bk:
            before = await strict_bk.store.ledger_ids()
            with pytest.raises(PlacementNotMet, match="strict rack-aware placement"):
                await strict_bk.create_ledger(3, 3, 2, password=PASSWORD)
            assert await strict_bk.store.ledger_ids() == before  # nothing was created
            assert strict.counts.refused == {"create": 1}


async def test_a_writer_s_ensemble_change_and_recovery_replace_within_the_rack(
        tmp_path, zk_uri, cleanup):
    bookies = start_racked(tmp_path, zk_uri, 6)
    cleanup.extend(bookies.values())
    async with await BookKeeper.connect(zk_uri, placement=rack_policy()) as bk:
        writer, _ = await write(bk, 10, close=False)
        where = await bk.transport.locations(sorted(bookies))
        victim = writer.metadata.ensembles[0][1][0]
        bookies[victim].kill9()
        for e in range(10, 30):  # the change: the victim's adds fail, it is replaced
            await writer.append(payload_of(writer.ledger_id, e))
        replaced = writer.metadata.ensembles[-1][1][0]
        assert replaced != victim and where[replaced].rack == where[victim].rack
        await writer.close()
        assert await segments_adhere(bk, writer.ledger_id)
        # Recovery: an open 3/3/2 ledger whose writer is gone; a bookie of its ensemble is
        # down, so recovery's write-back replaces it (RC1) by placement.
        writer, _ = await write(bk, 10, close=False, ensemble=3, write_quorum=3)
        members = writer.metadata.ensembles[-1][1]
        # Not the victim's rack: its other bookie is dead (yet still registered until its
        # session expires), so no bookie of that rack could take the lost one's place.
        lost = next(b for b in members if where[b].rack != where[victim].rack)
        bookies[lost].kill9()
        async with await BookKeeper.connect(zk_uri, placement=rack_policy()) as other:
            reader = await other.open_ledger(writer.ledger_id, PASSWORD)
        final = reader.metadata.ensembles[-1][1]
        assert lost not in final, reader.metadata.ensembles
        newcomer = next(b for b in final if b not in members)
        assert where[newcomer].rack == where[lost].rack
        assert await segments_adhere(bk, writer.ledger_id)


async def test_the_worker_re_replicates_a_lost_bookie_into_its_rack(tmp_path, zk_uri, cleanup):
    bookies = start_racked(tmp_path, zk_uri, 6)
    cleanup.extend(bookies.values())
    async with await BookKeeper.connect(zk_uri, placement=rack_policy()) as bk:
        written = {}
        for _ in range(6):
            writer, payloads = await write(bk, 20)
            written[writer.ledger_id] = payloads
        victim = writer.metadata.ensembles[0][1][1]
        bookies[victim].kill9()

        async def restored():
            return not await fully_replicated(bk, written, {victim})
        await wait_until(restored, f"the copies on {victim} back on other bookies")
        for ledger_id in written:
            assert await segments_adhere(bk, ledger_id), (await bk.store.read(ledger_id))


async def test_the_auditor_finds_ledgers_placed_across_too_few_racks_and_workers_move_them(
        tmp_path, zk_uri, cleanup):
    bookies = start_racked(tmp_path, zk_uri, 6, "--placement-check-interval-s", "1")
    cleanup.extend(bookies.values())
    async with await BookKeeper.connect(zk_uri, placement=rack_policy()) as bk:
        random_bk = await BookKeeper.connect(zk_uri, placement=Placement(PlacementRules(
            policy="random"), PlacementCounts()))
        written = {}
        async with random_bk:
            while len(written) < 4:  # ledgers that break the policy, as random placement does
                writer, payloads = await write(random_bk, 30)
                if not await segments_adhere(bk, writer.ledger_id):
                    written[writer.ledger_id] = payloads

        async def repaired():
            return all([await segments_adhere(bk, i) for i in written])
        await wait_until(repaired, "every ledger's write sets across two racks")
        assert not await fully_replicated(bk, written, set())  # every copy where it belongs

        async def gauge_zero():
            texts = [await asyncio.to_thread(metrics, d) for d in bookies.values()]
            return any("bookie_autorecovery_placement_not_adhering_ledgers 0.0" in text
                       for text in texts)
        await wait_until(gauge_zero, "the auditor's gauge at 0 ledgers not adhering")
        moves = sum(float(line.split()[-1]) for d in bookies.values()
                    for line in metrics(d).splitlines()
                    if line.startswith("bookie_autorecovery_placement_moves_total"))
        assert moves >= len(written)


def metrics(daemon: Daemon) -> str:
    return urllib.request.urlopen(daemon.url + "/metrics", timeout=10).read().decode()


async def test_a_writer_does_not_flap_between_two_dead_bookies_of_one_rack(
        tmp_path, zk_uri, cleanup):
    """DS3: a rack's two bookies die at once; both stay registered until their ZooKeeper
    sessions expire (10 s). The rack policy prefers the dead rack's other bookie as the
    replacement; before DS3 the writer then replaced that one by the first again, and back,
    a metadata write each time, until the sessions expired."""
    daemons = [Daemon(str(tmp_path / f"b{i}" / "data"), *FLAGS, "--topology-location",
                      f"/zone-0/rack-{rack}", "--topology-host", f"host-{i}",
                      "--metadata-service-uri", zk_uri).start()
               for i, rack in enumerate((0, 0, 1, 1, 2))]
    cleanup.extend(daemons)
    bookies = {bookie_id(d): d for d in daemons}
    async with await BookKeeper.connect(zk_uri, placement=rack_policy()) as bk:
        writer, _ = await write(bk, 5, close=False)
        where = await bk.transport.locations(sorted(bookies))
        first = writer.metadata.ensembles[0][1]
        dead = [b for b in bookies if where[b].rack.endswith("rack-0")]
        assert len(set(dead) & set(first)) == 1  # one member, one spare of rack 0
        for bookie in dead:
            bookies[bookie].kill9()
        for e in range(5, 25):
            await writer.append(payload_of(writer.ledger_id, e))
        segments = writer.metadata.ensembles
        # At most two changes (member -> spare -> a live one), each one metadata write; a
        # change at the same first entry rewrites the last segment, so count the writes.
        assert writer.metadata.version <= 3, (writer.metadata.version, segments)
        assert not set(dead) & set(segments[-1][1])
        await writer.close()


async def test_a_bookie_s_published_place_is_read_again_once_a_minute_old(zookeeper, zk_uri):
    """A long-lived client (an auditor, a worker) sees a bookie that re-registered with a
    new place, in a real ZooKeeper: the registration is read again after LOCATION_TTL_S."""
    from api.client import bookies
    from api.client.metadata_format import encode_service_info
    from api.client.zookeeper import ZkMetadataStore

    store = ZkMetadataStore(zk_uri).start()
    try:
        path = f"{store.root}/available/10.0.0.1:3181"
        store.client.create(path, encode_service_info(
            "10.0.0.1", 3181, properties={"topology.location": "/z/old"}), makepath=True)
        transport = bookies.HttpTransport(store)
        assert (await transport.locations(["10.0.0.1:3181"]))["10.0.0.1:3181"].location == \
            "/z/old"
        store.client.set(path, encode_service_info(
            "10.0.0.1", 3181, properties={"topology.location": "/z/new"}))
        assert (await transport.locations(["10.0.0.1:3181"]))["10.0.0.1:3181"].location == \
            "/z/old"  # within the minute: the place it read
        transport._learned_at["10.0.0.1:3181"] -= bookies.LOCATION_TTL_S + 1
        assert (await transport.locations(["10.0.0.1:3181"]))["10.0.0.1:3181"].location == \
            "/z/new"
    finally:
        await store.close()
