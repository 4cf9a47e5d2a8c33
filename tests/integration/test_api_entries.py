"""Ledger endpoints over real HTTP on 127.0.0.1, with a real bookie on a real data dir."""

from __future__ import annotations

import aiohttp
import pytest

from bookie.entry import DigestType, frame_entry, frame_lac, mac_key, master_key
from bookie.errors import (BadDigest, BadRequest, Fenced, NoEntry, NoLedger, TooLarge,
                           Unauthorized)

KEY = master_key(b"secret")
OTHER_KEY = master_key(b"other")


def entry(ledger_id, entry_id, payload=b"x" * 100, lac=-1, digest=DigestType.CRC32C,
          key=None):
    return frame_entry(ledger_id, entry_id, lac, (entry_id + 1) * len(payload), payload,
                       digest, key)


async def test_acked_add_reads_back_byte_identical(client):
    data = entry(1, 0, b"hello")
    assert await client.add_entry(1, 0, data, KEY) == {"ledgerId": 1, "entryId": 0}
    assert await client.read_entry(1, 0) == data


@pytest.mark.parametrize("digest", list(DigestType))
async def test_round_trip_for_each_digest_type(client, digest):
    key = mac_key(b"secret") if digest is DigestType.MAC else None
    datas = [entry(7, i, bytes([i]) * 300, i - 1, digest, key) for i in range(5)]
    for i, data in enumerate(datas):
        await client.add_entry(7, i, data, KEY, digest_type=digest.header_name)
    assert [await client.read_entry(7, i) for i in range(5)] == datas
    assert await client.read_entry(7, -1) == datas[-1]


async def test_entry_minus_one_reads_the_last_entry_after_checkpoint(client):
    for i in range(3):
        await client.add_entry(2, i, entry(2, i), KEY)
    await client.checkpoint()
    assert await client.read_entry(2, -1) == entry(2, 2)
    assert [await client.read_entry(2, i) for i in range(3)] == [entry(2, i) for i in range(3)]


async def test_body_ids_that_differ_from_the_path_are_refused(client):
    with pytest.raises(BadRequest, match="differ from the path"):
        await client.add_entry(3, 1, entry(3, 0), KEY)
    with pytest.raises(NoLedger):
        await client.read_entry(3, 0)  # nothing was stored


@pytest.mark.parametrize("path", ["/v1/ledgers/abc/entries/0", "/v1/ledgers/-1/entries/0",
                                  "/v1/ledgers/1/entries/-5",
                                  "/v1/ledgers/99999999999999999999/entries/0"])
async def test_malformed_ids_are_400_ebadreq(server, path):
    async with aiohttp.ClientSession() as session:
        async with session.put(server.url + path, data=b"x" * 64,
                               headers={"X-Master-Key": KEY.hex()}) as reply:
            assert reply.status == 400
            assert (await reply.json())["error"] == "EBADREQ"


async def test_wrong_master_key_is_403_eua(client):
    await client.add_entry(4, 0, entry(4, 0), KEY)
    with pytest.raises(Unauthorized):
        await client.add_entry(4, 1, entry(4, 1), OTHER_KEY)
    with pytest.raises(Unauthorized):
        await client.fence(4, OTHER_KEY)
    with pytest.raises(NoEntry):
        await client.read_entry(4, 1)


async def test_bad_digest_is_400_ebaddigest_and_nothing_is_stored(client):
    data = bytearray(entry(5, 0))
    data[-1] ^= 0xFF
    with pytest.raises(BadDigest):
        await client.add_entry(5, 0, bytes(data), KEY)
    with pytest.raises(NoLedger):
        await client.read_entry(5, 0)


async def test_unknown_ledger_is_404_enoledger_and_missing_entry_404_enoentry(client):
    with pytest.raises(NoLedger):
        await client.read_entry(6, 0)
    await client.add_entry(6, 0, entry(6, 0), KEY)
    with pytest.raises(NoEntry):
        await client.read_entry(6, 1)


async def test_fence_refuses_later_adds_but_lets_recovery_adds_through(client):
    await client.add_entry(8, 0, entry(8, 0), KEY)
    reply = await client.fence(8, KEY)
    assert reply == {"lac": -1, "lastEntryId": 0}
    with pytest.raises(Fenced):
        await client.add_entry(8, 1, entry(8, 1, lac=0), KEY)
    await client.add_entry(8, 1, entry(8, 1, lac=0), KEY, recovery=True)
    assert await client.read_entry(8, 1) == entry(8, 1, lac=0)


async def test_fence_of_an_unknown_ledger_creates_it_fenced(client):
    assert await client.fence(9, KEY) == {"lac": -1, "lastEntryId": -1}
    with pytest.raises(Fenced):
        await client.add_entry(9, 0, entry(9, 0), KEY)


async def test_lac_is_the_max_of_piggybacked_and_explicit(client):
    for i in range(4):
        await client.add_entry(10, i, entry(10, i, lac=i - 1), KEY)
    assert await client.read_lac(10) == 2
    assert await client.write_lac(10, KEY, frame_lac(10, 3)) == 3
    assert await client.read_lac(10) == 3
    await client.write_lac(10, KEY, frame_lac(10, 1))
    assert await client.read_lac(10) == 3  # never backwards


async def test_explicit_lac_body_for_another_ledger_or_bad_digest_is_refused(client):
    await client.add_entry(11, 0, entry(11, 0), KEY)
    with pytest.raises(BadRequest):
        await client.write_lac(11, KEY, frame_lac(12, 0))
    body = bytearray(frame_lac(11, 0))
    body[-1] ^= 1
    with pytest.raises(BadDigest):
        await client.write_lac(11, KEY, bytes(body))
    with pytest.raises(NoLedger):
        await client.write_lac(13, KEY, frame_lac(13, 0))


async def test_lac_long_poll_is_woken_by_an_add(client):
    import asyncio

    await client.add_entry(14, 0, entry(14, 0), KEY)
    waiter = asyncio.create_task(client.read_lac(14, wait_for_gt=-1, timeout_ms=30_000))
    await client.add_entry(14, 1, entry(14, 1, lac=0), KEY)
    assert await asyncio.wait_for(waiter, 30) == 0


async def test_oversized_body_is_413_etoolarge_json(server, bookie_config):
    big = entry(15, 0, b"z" * (bookie_config.max_entry_size + 1))
    async with aiohttp.ClientSession() as session:
        async with session.put(server.url + "/v1/ledgers/15/entries/0", data=big,
                               headers={"X-Master-Key": KEY.hex()}) as reply:
            assert reply.status == 413
            assert (await reply.json())["error"] == "ETOOLARGE"


async def test_readding_identical_bytes_is_accepted_and_different_bytes_refused(client):
    await client.add_entry(16, 0, entry(16, 0, b"one"), KEY)
    await client.add_entry(16, 0, entry(16, 0, b"one"), KEY)
    with pytest.raises(BadRequest, match="different payload"):
        await client.add_entry(16, 0, entry(16, 0, b"two"), KEY)
    await client.checkpoint()
    await client.add_entry(16, 0, entry(16, 0, b"one"), KEY)
    with pytest.raises(BadRequest, match="different payload"):
        await client.add_entry(16, 0, entry(16, 0, b"two"), KEY)
    assert await client.read_entry(16, 0) == entry(16, 0, b"one")


def reframed(ledger_id, entry_id, payload, lac, length=None):
    """The entry as BookKeeper's recovery writes it back: another LAC, so another digest."""
    return frame_entry(ledger_id, entry_id, lac, length or (entry_id + 1) * len(payload),
                       payload, DigestType.CRC32C)


@pytest.mark.parametrize("checkpointed", [False, True], ids=["cached", "stored"])
@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
async def test_a_re_add_framed_again_with_a_newer_lac_is_the_same_entry(client, checkpointed,
                                                                       batch):
    """W6 (issue 35): BookKeeper's recovery writes each entry back framed with the
    recovering handle's LAC; a real bookie stores it, and refusing it (the old rule:
    identical bytes only) left BookKeeper's openLedger changing ensembles for ever. The
    held copy stays byte for byte; a different payload or length is still refused."""
    originals = [entry(19, i, b"p%d" % i, i - 1) for i in range(3)]
    await client.add_batch(19, originals, KEY)
    if checkpointed:
        await client.checkpoint()
    again = [reframed(19, i, b"p%d" % i, lac=5) for i in range(3)]
    assert again != originals
    if batch:
        assert await client.add_batch(19, again + [entry(19, 3, b"p3", 2)], KEY,
                                      recovery=True) == [0, 1, 2, 3]
    else:
        for i, data in enumerate(again):
            await client.add_entry(19, i, data, KEY, recovery=True)
        await client.add_entry(19, 3, entry(19, 3, b"p3", 2), KEY)
    assert await client.read_range(19, 0, 3) == originals + [entry(19, 3, b"p3", 2)]
    with pytest.raises(BadRequest, match="different payload"):
        await client.add_entry(19, 1, reframed(19, 1, b"xx", lac=5), KEY, recovery=True)
    with pytest.raises(BadRequest, match="different payload or length"):
        await client.add_entry(19, 1, reframed(19, 1, b"p1", lac=5, length=99), KEY)
    with pytest.raises(BadDigest):
        await client.add_entry(19, 1, again[1][:-1] + b"!", KEY)
    assert await client.read_entry(19, 1) == originals[1]


async def test_a_later_add_naming_another_digest_type_is_refused(client):
    await client.add_entry(17, 0, entry(17, 0), KEY, digest_type="crc32c")
    with pytest.raises(BadRequest, match="digest type"):
        await client.add_entry(17, 1, entry(17, 1, digest=DigestType.CRC32), KEY,
                               digest_type="crc32")


async def test_batch_add_and_range_read(client):
    datas = [entry(18, i, bytes([i]) * 50, i - 1) for i in range(20)]
    assert await client.add_batch(18, datas, KEY) == list(range(20))
    assert await client.read_range(18, 0, 19) == datas
    assert await client.read_range(18, 15, 40) == datas[15:]  # stops where the ledger ends


async def test_a_range_read_up_to_the_largest_id_ends_where_the_ledger_does(client):
    """`to` = 2**63 - 1, an id no entry can have (schemathesis found it a 500: the index's
    ValueError), reads to the ledger's end, as any `to` past it does."""
    largest = (1 << 63) - 1
    datas = [entry(largest, i) for i in range(3)]
    assert await client.add_batch(largest, datas, KEY) == [0, 1, 2]
    assert await client.read_range(largest, 0, largest) == datas
    assert await client.read_range(largest, 1, largest) == datas[1:]
    with pytest.raises(NoEntry):
        await client.read_range(largest, largest - 1, largest)


async def test_held_range_reads_skip_gaps_and_say_how_far_they_looked(client):
    """The held read (docs/http-api.md): the entries the bookie holds among from, from+step,
    ... <= to, gaps skipped, and X-Last-Scanned saying how far the answer covers."""
    held = [0, 1, 3, 4, 6, 9, 10]  # a striped ledger's bookie holds only some ids
    datas = {i: entry(23, i, bytes([i]) * 30, i - 1) for i in held}
    await client.add_batch(23, [datas[i] for i in held], KEY)
    assert await client.read_held(23, 0, 10) == ([datas[i] for i in held], 10)
    assert await client.read_held(23, 0, 10, 3) == ([datas[0], datas[3], datas[6],
                                                    datas[9]], 10)
    assert await client.read_held(23, 1, 7, 3) == ([datas[1], datas[4]], 7)
    assert await client.read_held(23, 2, 2) == ([], 2)  # an id not held: empty, covered
    # Past the last id stored nothing is held: covered without a lookup per id.
    assert await client.read_held(23, 11, 10**12) == ([], 10**12)
    # step without held=true reads ids from, from+step, ... up to the first missing one.
    assert await client.read_range(23, 0, 10) == [datas[0], datas[1]]
    with pytest.raises(NoLedger):
        await client.read_held(999_999, 0, 5)
    for bad in ({"held": "yes"}, {"held": "true", "step": "0"},
                {"held": "true", "step": "1025"}):
        reply = await client.session.get(f"{client.base_url}/v1/ledgers/23/entries",
                                         params={"from": "0", "to": "5", **bad})
        assert reply.status == 400, bad
        reply.release()


async def test_a_held_read_stops_at_max_read_batch_and_is_asked_again(bookie_config):
    from api.client import BookieClient
    from tests.support.servers import running_bookie

    async with running_bookie(bookie_config.replace(max_read_batch=3)) as running:
        async with BookieClient(running.url) as small:
            datas = [entry(24, i, bytes([i]) * 30, i - 1) for i in range(8)]
            await small.add_batch(24, datas, KEY)
            first, scanned = await small.read_held(24, 0, 7)
            assert (first, scanned) == (datas[:3], 2)
            rest, scanned = await small.read_held(24, 3, 7)
            assert (rest, scanned) == (datas[3:6], 5)


async def test_deferred_sync_adds_are_durable_after_force(client):
    for i in range(5):
        await client.add_entry(19, i, entry(19, i), KEY, deferred_sync=True)
    assert await client.force(19, KEY) == 4


async def test_health_and_ready(client):
    assert await client.health() == {"status": "ok"}
    assert await client.ready() is True


async def test_checkpoint_moves_last_mark_forward(client):
    await client.add_entry(20, 0, entry(20, 0), KEY)
    first = await client.checkpoint()
    await client.add_entry(20, 1, entry(20, 1), KEY)
    second = await client.checkpoint()
    assert tuple(second["lastMark"]) > tuple(first["lastMark"])
    assert (await client.info())["lastMark"] == second["lastMark"]


async def test_error_body_is_json_with_code_and_message(server):
    async with aiohttp.ClientSession() as session:
        async with session.get(server.url + "/v1/ledgers/404/entries/0") as reply:
            assert reply.status == 404
            body = await reply.json()
            assert body["error"] == "ENOLEDGER" and "404" in body["message"]


async def test_too_short_entry_is_400(client):
    with pytest.raises(BadRequest):
        await client.add_entry(21, 0, (21).to_bytes(8, "big") + bytes(8), KEY)


async def test_missing_master_key_is_400(server):
    async with aiohttp.ClientSession() as session:
        async with session.put(server.url + "/v1/ledgers/22/entries/0",
                               data=entry(22, 0)) as reply:
            assert reply.status == 400


async def test_too_large_is_raised_as_its_class(client, bookie_config):
    with pytest.raises(TooLarge):
        await client.add_entry(23, 0, entry(23, 0, b"q" * bookie_config.max_entry_size), KEY)


async def test_a_fence_does_not_fix_the_digest_type_of_a_ledger_it_creates(client):
    """Regression (found by the ledger client's recovery work): fencing an unknown ledger
    made it CRC32C, so a MAC ledger's recovery add and explicit LAC were refused."""
    await client.fence(50, KEY)
    data = frame_entry(50, 0, -1, 5, b"hello", DigestType.MAC, mac_key(b"secret"))
    await client.add_entry(50, 0, data, KEY, digest_type="mac", recovery=True)
    body = frame_lac(50, 0, DigestType.MAC, mac_key(b"secret"))
    assert await client.write_lac(50, KEY, body) == 0
    assert await client.read_entry(50, 0) == data
