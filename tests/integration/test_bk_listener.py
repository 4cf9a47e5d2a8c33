"""The BookKeeper-protocol listener (docs/bookkeeper-protocol.md) on a real bookie over real
TCP: every operation of both protocols, the same state as the HTTP API, pipelining,
back-pressure and bad input (api/server/bk_listener.py BL1-BL3, bk_ops.py BK1-BK4)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import struct

import pytest

from api.bkproto import availability, v2, v3
from api.client import BookieClient
from api.server.bk_listener import BkListener, bk_serving
from bookie.entry import (DigestType, entry_digest_ok, entry_ids, frame_entry, frame_lac,
                          mac_key, master_key)
from bookie.errors import NoLedger
from tests.support.bk_client import BkClient
from tests.support.servers import running_bookie

KEY = master_key(b"bk-listener")
OTHER_KEY = master_key(b"someone else")
S = v3.STATUS


def entry(ledger_id: int, entry_id: int, lac: int | None = None, payload: bytes = b"p" * 64,
          dtype: DigestType = DigestType.CRC32C) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1 if lac is None else lac, 0, payload,
                       dtype)


@dataclasses.dataclass
class Listening:
    bookie: object
    url: str
    port: int


@contextlib.asynccontextmanager
async def listening(config):
    async with running_bookie(config) as running:
        async with bk_serving(running.bookie, "127.0.0.1", 0) as port:
            yield Listening(running.bookie, running.url, port)


@pytest.fixture
async def bk(bookie_config):
    async with listening(bookie_config) as served:
        yield served


@contextlib.asynccontextmanager
async def own_listener(bookie, **limits):
    """A BkListener with its own limits (BL1) over ``bookie``: (listener, port)."""
    listener = BkListener(bookie, 100_000, **limits)
    server = await asyncio.get_running_loop().create_server(listener.protocol, "127.0.0.1", 0)
    try:
        yield listener, server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_v3_adds_read_back_over_both_protocols_and_http(bk):
    async with BkClient.connect(bk.port) as client:
        for entry_id in range(3):
            answer = await client.add(7, entry_id, KEY, entry(7, entry_id))
            assert answer.status == S["EOK"] and answer.addResponse.status == S["EOK"]
            assert (answer.addResponse.ledgerId, answer.addResponse.entryId) == (7, entry_id)
        read = await client.read(7, 1)
        assert read.status == S["EOK"] and read.readResponse.body == entry(7, 1)
        assert read.readResponse.maxLAC == 1  # entry 2 piggybacks LAC 1
        assert not bk.bookie.ledger_state(7).fenced  # an unset flag is no FENCE_LEDGER
        last = await client.read(7, -1)  # LAST_ADD_CONFIRMED reads the last entry
        assert last.readResponse.body == entry(7, 2)
        missing = await client.read(7, 9)
        assert missing.status == S["ENOENTRY"] and not missing.readResponse.HasField("body")
        assert (await client.read(8, 0)).status == S["ENOLEDGER"]
    async with BookieClient(bk.url) as http:
        assert await http.read_entry(7, 2) == entry(7, 2)
    async with BkClient.connect(bk.port) as client:  # a fresh connection speaks v2
        read = await client.call_v2(v2.encode_read(7, 0))
        assert (read.rc, read.data) == (v2.EOK, entry(7, 0))


async def test_v2_add_read_and_batch_read(bk):
    async with BkClient.connect(bk.port) as client:
        for entry_id in range(5):
            answer = await client.call_v2(v2.encode_add(3, entry_id, KEY, entry(3, entry_id)))
            assert (answer.opcode, answer.rc, answer.ledger_id, answer.entry_id) == \
                (v2.ADDENTRY, v2.EOK, 3, entry_id)
        batch = await client.call_v2(v2.encode_batch_read(3, 1, 77, 10, 1 << 20))
        assert (batch.rc, batch.request_id) == (v2.EOK, 77)
        assert list(batch.entries) == [entry(3, i) for i in range(1, 5)]
        one_entry = len(entry(3, 0)) + 4
        small = await client.call_v2(v2.encode_batch_read(3, 0, 78, 0,
                                                          24 + 8 + 4 + 2 * one_entry))
        assert len(small.entries) == 2  # maxSize counts the frame as BookKeeper counts it
        none = await client.call_v2(v2.encode_batch_read(3, 9, 79, 10, 1 << 20))
        assert (none.rc, none.request_id, none.entries) == (v2.ENOENTRY, 79, ())
        wrong = await client.call_v2(v2.encode_add(3, 5, OTHER_KEY, entry(3, 5)))
        assert wrong.rc == v2.EUA


async def test_pipelined_v3_adds_are_answered_by_txn_id(bk):
    async with BkClient.connect(bk.port) as client:
        requests = [client.request("ADD_ENTRY", ledgerId=11, entryId=i, masterKey=KEY,
                                   body=entry(11, i)) for i in range(300)]
        answers = await client.pipeline(requests)
        assert sorted(answers) == [r.header.txnId for r in requests]
        for request in requests:
            answer = answers[request.header.txnId]
            assert answer.status == S["EOK"]
            assert answer.addResponse.entryId == request.addRequest.entryId
    assert await bk.bookie.entry_id_ranges(11) == [[0, 299]]


async def test_a_client_that_does_not_read_its_answers_stops_the_connection_reading(bk):
    """BL1: answers buffered past the write-buffer high mark pause reading (nothing is
    buffered without bound); once the client reads, reading resumes and every add is
    answered and stored. The high mark is 1 KiB here and both ends' socket buffers are
    shrunk, so a few thousand small answers are enough."""
    async with own_listener(bk.bookie, write_buffer_high=1024) as (listener, port):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=1024)
        client = BkClient(reader, writer)
        try:
            assert (await client.add(60, 0, KEY, entry(60, 0))).status == S["EOK"]
            (connection,) = listener.connections
            connection.transport.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # fixed: no autotuning
            requests = [client.request("ADD_ENTRY", ledgerId=60, entryId=i, masterKey=KEY,
                                       body=entry(60, i)) for i in range(1, 3001)]
            sending = asyncio.ensure_future(client.send(b"".join(v3.frame(r) for r in requests)))
            await connection.reading_stopped.wait()  # the client reads nothing meanwhile
            answers = {}
            while len(answers) < len(requests):
                response = v3.decode_response(await client.read_frame())
                answers[response.header.txnId] = response.status
            await sending
            assert set(answers.values()) == {S["EOK"]}
            assert not connection.reading_stopped.is_set()
            assert await bk.bookie.entry_id_ranges(60) == [[0, 3000]]
        finally:
            await client.close()


async def test_requests_read_ahead_of_decoding_past_the_inbox_bound_stop_the_reading(bk):
    """BL1: bytes read but not yet decoded are bounded. With the bound at 1 byte every
    read stops the reading until its slices are decoded; every add is still answered
    and stored, and reading resumes."""
    async with own_listener(bk.bookie, inbox_high=1) as (listener, port):
        async with BkClient.connect(port) as client:
            assert (await client.add(61, 0, KEY, entry(61, 0))).status == S["EOK"]
            (connection,) = listener.connections
            stopped = asyncio.ensure_future(connection.reading_stopped.wait())
            requests = [client.request("ADD_ENTRY", ledgerId=61, entryId=i, masterKey=KEY,
                                       body=entry(61, i)) for i in range(1, 1001)]
            answers = await client.pipeline(requests)
            assert stopped.done()  # the reading stopped at least once on the way
            assert {answer.status for answer in answers.values()} == {S["EOK"]}
            assert not connection.reading_stopped.is_set() and connection.inbox_bytes == 0
            assert await bk.bookie.entry_id_ranges(61) == [[0, 1000]]


async def test_requests_read_but_not_decoded_when_the_connection_closes_are_not_begun(bk):
    """BL1/BL3: a closing connection (refused, shut down, or its client gone) decodes no
    more of what it read ahead: no answer could reach the client, so none of those
    requests is begun. The inbox is dropped and the connection goes idle."""
    async with own_listener(bk.bookie) as (listener, port):
        async with BkClient.connect(port) as client:
            assert (await client.add(62, 0, KEY, entry(62, 0))).status == S["EOK"]
            (connection,) = listener.connections
            frames = b"".join(v3.frame(client.request(
                "ADD_ENTRY", ledgerId=62, entryId=i, masterKey=KEY, body=entry(62, i)))
                for i in range(1, 11))
            connection.data_received(frames)  # read from the socket, not yet decoded ...
            connection.transport.close()  # ... when the connection closes
            await connection.idle.wait()
            assert connection.inbox == [] and connection.inbox_bytes == 0
            assert await bk.bookie.entry_id_ranges(62) == [[0, 0]]


async def test_fencing_read_fences_then_recovery_adds_pass(bk):
    async with BkClient.connect(bk.port) as client:
        await client.add(5, 0, KEY, entry(5, 0))
        unkeyed = await client.read(5, 0, flag=1)
        assert unkeyed.status == S["EUA"] and not bk.bookie.ledger_state(5).fenced
        assert (await client.read(5, 0, flag=1, masterKey=OTHER_KEY)).status == S["EUA"]
        fenced = await client.read(5, 0, flag=1, masterKey=KEY)
        assert fenced.status == S["EOK"] and fenced.readResponse.body == entry(5, 0)
        assert bk.bookie.ledger_state(5).fenced
        assert (await client.add(5, 1, KEY, entry(5, 1))).status == S["EFENCED"]
        recovery = await client.add(5, 1, KEY, entry(5, 1), flag=1)
        assert recovery.status == S["EOK"]
        beyond = await client.read(5, 7, flag=1, masterKey=KEY)
        assert beyond.status == S["ENOENTRY"]  # fenced all the same: answers follow the fence
    async with BkClient.connect(bk.port) as client:
        await client.send(v2.encode_read(6, 0, v2.FLAG_DO_FENCING, KEY))
        answer = v2.decode_response(await client.read_frame())
        assert answer.rc == v2.ENOENTRY and bk.bookie.ledger_state(6).fenced
        add = await client.call_v2(v2.encode_add(6, 0, KEY, entry(6, 0)))
        assert add.rc == v2.EFENCED


async def test_bookkeepers_recovery_write_back_of_held_entries_is_answered_eok(bk):
    """W6 (issue 35): BookKeeper's LedgerRecoveryOp fences, reads past the LAC and writes
    each entry back as a recovery add framed with the recovering handle's LAC, so its bytes
    differ from the held copy in the LAC and the digest. Over both protocols that is EOK
    (it was EBADREQ, and BookKeeper's openLedger changed ensembles for ever); the held
    copy stays; another payload under the same id is still EBADREQ."""
    async with BkClient.connect(bk.port) as client:
        for i in range(3):
            assert (await client.add(8, i, KEY, entry(8, i))).status == S["EOK"]
        assert (await client.read(8, 2, flag=1, masterKey=KEY)).status == S["EOK"]
        for i in range(3):
            again = entry(8, i, lac=1)
            if i != 2:
                assert again != entry(8, i)
            assert (await client.add(8, i, KEY, again, flag=1)).status == S["EOK"]
        other = await client.add(8, 1, KEY, entry(8, 1, payload=b"q" * 64), flag=1)
        assert other.status == S["EBADREQ"]
    async with BkClient.connect(bk.port) as client:
        add = await client.call_v2(v2.encode_add(8, 1, KEY, entry(8, 1, lac=2),
                                                 v2.FLAG_RECOVERY_ADD))
        assert add.rc == v2.EOK
    for i in range(3):
        assert await bk.bookie.read_entry(8, i) == entry(8, i)
    mac = mac_key(b"bk-listener")
    async with BkClient.connect(bk.port) as client:  # MAC: stored as DUMMY (§4)
        first = frame_entry(9, 0, -1, 64, b"m" * 64, DigestType.MAC, mac)
        assert (await client.add(9, 0, KEY, first)).status == S["EOK"]
        assert bk.bookie.ledger_state(9).digest_type == DigestType.DUMMY
        again = frame_entry(9, 0, 0, 64, b"m" * 64, DigestType.MAC, mac)
        assert again[32:52] != first[32:52]
        assert (await client.add(9, 0, KEY, again, flag=1)).status == S["EOK"]
        other = frame_entry(9, 0, -1, 64, b"n" * 64, DigestType.MAC, mac)
        assert (await client.add(9, 0, KEY, other, flag=1)).status == S["EBADREQ"]
    assert await bk.bookie.read_entry(9, 0) == first


async def test_long_poll_waits_for_the_lac_and_piggybacks_the_next_entry(bk):
    async with BkClient.connect(bk.port) as writer, BkClient.connect(bk.port) as poller:
        for entry_id in range(2):
            await writer.add(9, entry_id, KEY, entry(9, entry_id))
        now = await poller.read(9, -1, previousLAC=-1, timeOut=10, flag=2)
        assert now.readResponse.maxLAC == 0 and now.readResponse.entryId == 0
        assert now.readResponse.body == entry(9, 0)
        request = poller.request("READ_ENTRY", ledgerId=9, entryId=-1, previousLAC=0,
                                 timeOut=30_000, flag=2)
        await poller.send(v3.frame(request))
        waiting = asyncio.ensure_future(poller.read_frame())
        done, _ = await asyncio.wait([waiting], timeout=0.2)
        assert not done  # LAC 0 is not past previousLAC 0 yet
        await writer.add(9, 2, KEY, entry(9, 2))  # piggybacks LAC 1
        answer = v3.decode_response(await waiting).readResponse
        assert (answer.status, answer.maxLAC, answer.entryId) == (S["EOK"], 1, 1)
        assert answer.body == entry(9, 1)
        timed_out = await poller.read(9, -1, previousLAC=5, timeOut=20, flag=2)
        assert timed_out.status == S["EOK"] and timed_out.readResponse.maxLAC == 1
        assert not timed_out.readResponse.HasField("body")
        bad = await poller.read(9, 3, previousLAC=0, timeOut=10, flag=2)
        assert bad.status == S["EBADREQ"]


async def test_lac_force_info_and_entry_list(bk):
    async with BkClient.connect(bk.port) as client:
        assert (await client.call(client.request("READ_LAC", ledgerId=12))).status == \
            S["ENOLEDGER"]
        for entry_id in (0, 1, 2, 5, 6):
            await client.add(12, entry_id, KEY, entry(12, entry_id, lac=-1),
                             writeFlags=0x1)  # DEFERRED_SYNC: acknowledged before its fsync
        forced = await client.call(client.request("FORCE_LEDGER", ledgerId=12))
        assert forced.status == S["EOK"] and forced.forceLedgerResponse.ledgerId == 12
        lac_body = frame_lac(12, 6, DigestType.CRC32C)
        written = await client.call(client.request("WRITE_LAC", ledgerId=12, lac=6,
                                                   masterKey=KEY, body=lac_body))
        assert written.status == S["EOK"]
        refused = await client.call(client.request("WRITE_LAC", ledgerId=12, lac=6,
                                                   masterKey=OTHER_KEY, body=lac_body))
        assert refused.status == S["EUA"]
        lac = (await client.call(client.request("READ_LAC", ledgerId=12))).readLacResponse
        assert lac.status == S["EOK"]
        assert (lac.lacBody, lac.lastEntryBody) == (lac_body, entry(12, 6, lac=-1))
        listed = await client.call(client.request("GET_LIST_OF_ENTRIES_OF_LEDGER",
                                                  ledgerId=12))
        body = listed.getListOfEntriesOfLedgerResponse
        assert availability.decode(body.availabilityOfEntriesOfLedger) == [0, 1, 2, 5, 6]
        info = await client.call(client.request("GET_BOOKIE_INFO", requested=3))
        total, free = bk.bookie.disk.usage(bk.bookie.config.data_dir)
        assert info.getBookieInfoResponse.totalDiskCapacity == total
        assert 0 < info.getBookieInfoResponse.freeDiskSpace <= total


async def test_auth_and_start_tls_are_answered_as_by_a_bookie_without_them(bk):
    async with BkClient.connect(bk.port) as client:
        auth = await client.call(client.request("AUTH", authPluginName="AuthDisabledPlugin",
                                                payload=b""))
        assert auth.status == S["EOK"]
        assert auth.authResponse.authPluginName == "AuthDisabledPlugin"
        tls = await client.call(client.request("START_TLS"))
        assert tls.status == S["EBADREQ"]
        ranged = v3.Request()
        ranged.header.version, ranged.header.txnId = 3, 99
        ranged.header.operation = v3.OPERATIONS["RANGE_READ_ENTRY"]
        assert (await client.call(ranged)).status == S["EBADREQ"]
        old = client.request("READ_LAC", ledgerId=1)
        old.header.version = 2
        assert (await client.call(old)).status == S["EBADVERSION"]
    async with BkClient.connect(bk.port) as client:
        message = v3.AuthMessage(authPluginName="AuthDisabledPlugin", payload=b"")
        await client.send(v2.frame(struct.pack(">I", v2.pack_header(2, v2.AUTH))
                                   + message.SerializeToString()))
        frame = await client.read_frame()
        assert struct.unpack_from(">I", frame)[0] == v2.pack_header(2, v2.AUTH)
        assert v3.AuthMessage.FromString(frame[4:]).authPluginName == "AuthDisabledPlugin"


async def test_ledgers_take_the_digest_type_their_first_entry_proves(bk):
    """BK4: the protocol names no digest type; CRC32 (BookKeeper's Java default) must not be
    stored as CRC32C, or replay would drop its entries as torn."""
    async with BkClient.connect(bk.port) as client:
        for ledger_id, dtype in ((20, DigestType.CRC32), (21, DigestType.CRC32C),
                                 (22, DigestType.DUMMY)):
            answer = await client.add(ledger_id, 0, KEY, entry(ledger_id, 0, dtype=dtype))
            assert answer.status == S["EOK"]
            assert bk.bookie.ledger_state(ledger_id).digest_type == int(dtype)
        damaged = bytearray(entry(20, 1, dtype=DigestType.CRC32))
        damaged[-1] ^= 1
        assert (await client.add(20, 1, KEY, bytes(damaged))).status == S["EBADREQ"]
        ids = await client.add(20, 1, KEY, entry(20, 2, dtype=DigestType.CRC32))
        assert ids.status == S["EBADREQ"]  # the entry's own ids differ from the request's


@pytest.mark.parametrize("garbage", [
    struct.pack(">i", 1 << 30),                    # a length over the frame limit
    struct.pack(">i", -5),                         # a negative length
    struct.pack(">i", 0),                          # an empty frame
    v2.frame(struct.pack(">I", v2.pack_header(2, 42)) + bytes(16)),  # unknown v2 opcode
    v2.frame(b"\xff" * 40),                        # neither v3 nor v2
], ids=["huge", "negative", "empty", "unknown-opcode", "junk"])
async def test_bad_frames_close_the_connection_and_store_nothing(bk, garbage):
    async with BkClient.connect(bk.port) as client:
        await client.send(garbage + v2.encode_add(30, 0, KEY, entry(30, 0)))
        assert await client.closed_by_peer()
    async with BkClient.connect(bk.port) as client:  # the listener lives on
        assert (await client.read(30, 0)).status == S["ENOLEDGER"]


async def test_a_truncated_frame_stores_nothing(bk):
    async with BkClient.connect(bk.port) as client:
        whole = v3.frame(client.request("ADD_ENTRY", ledgerId=31, entryId=0, masterKey=KEY,
                                        body=entry(31, 0)))
        await client.send(whole[:-3])
    async with BkClient.connect(bk.port) as client:
        assert (await client.read(31, 0)).status == S["ENOLEDGER"]


async def test_pipelined_adds_of_a_ledger_keep_their_own_answers(bk):
    """BK5: adds that arrive together go to the journal as one run; a run refused as a
    whole (one damaged entry) is added one by one, so only that add is refused."""
    async with BkClient.connect(bk.port) as client:
        await client.add(40, 0, KEY, entry(40, 0))  # the ledger's runtime is loaded
        bodies = {i: entry(40, i) for i in range(1, 21)}
        damaged = bytearray(bodies[7])
        damaged[-1] ^= 1
        bodies[7] = bytes(damaged)
        requests = [client.request("ADD_ENTRY", ledgerId=40, entryId=i, masterKey=KEY,
                                   body=body) for i, body in bodies.items()]
        answers = await client.pipeline(requests)
        statuses = {r.addRequest.entryId: answers[r.header.txnId].status for r in requests}
        assert statuses == {i: S["EBADREQ"] if i == 7 else S["EOK"] for i in bodies}
        assert await bk.bookie.entry_id_ranges(40) == [[0, 6], [8, 20]]
        await client.read(40, 0, flag=1, masterKey=KEY)  # fence it
        fenced = [client.request("ADD_ENTRY", ledgerId=40, entryId=i, masterKey=KEY,
                                 body=entry(40, i)) for i in range(21, 26)]
        answers = await client.pipeline(fenced)
        assert {a.status for a in answers.values()} == {S["EFENCED"]}
        assert await bk.bookie.entry_id_ranges(40) == [[0, 6], [8, 20]]


async def test_adds_the_hot_path_leaves_to_protobuf_are_answered_alike(bk):
    """VA1: an add with a request context goes through protobuf's path and is stored and
    answered as a plain add is; one whose master key is not 20 bytes (not a BookKeeper
    key) is refused there with EBADREQ, and nothing is stored."""
    async with BkClient.connect(bk.port) as client:
        plain = await client.add(41, 0, KEY, entry(41, 0))
        with_context = client.request("ADD_ENTRY", ledgerId=41, entryId=1, masterKey=KEY,
                                      body=entry(41, 1))
        pair = with_context.requestContext.add()
        pair.key, pair.value = "trace", "on"
        answer = await client.call(with_context)
        assert answer.header == with_context.header
        assert (answer.status, answer.addResponse.status) == (S["EOK"], S["EOK"])
        assert answer.addResponse.entryId == 1 and plain.addResponse.entryId == 0
        assert await bk.bookie.entry_id_ranges(41) == [[0, 1]]
        short_key = await client.add(42, 0, b"short", entry(42, 0))
        assert short_key.addResponse.status == S["EBADREQ"]
        assert (await client.read(42, 0)).status == S["ENOLEDGER"]


async def test_a_frame_split_across_reads_is_put_back_together(bk):
    async with BkClient.connect(bk.port) as client:
        first = client.request("ADD_ENTRY", ledgerId=41, entryId=0, masterKey=KEY,
                               body=entry(41, 0))
        second = client.request("ADD_ENTRY", ledgerId=41, entryId=1, masterKey=KEY,
                                body=entry(41, 1))
        whole = v3.frame(second)
        for cut in (2, 7, len(whole) - 1):  # inside the length word, the header, the body
            await client.send(v3.frame(first) + whole[:cut])
            assert v3.decode_response(await client.read_frame()).status == S["EOK"]
            await client.send(whole[cut:])  # entry 1 again: an identical re-add is EOK
            answer = v3.decode_response(await client.read_frame())
            assert (answer.header.txnId, answer.status) == (second.header.txnId, S["EOK"])
    assert await bk.bookie.entry_id_ranges(41) == [[0, 1]]


def _mutations(rng, valid: list[bytes]) -> bytes:
    """One fuzz input: random bytes, or valid frames with bytes flipped, cut or spliced."""
    choice = rng.random()
    if choice < 0.2:
        return rng.randbytes(rng.randint(1, 200))
    data = bytearray(b"".join(rng.sample(valid, rng.randint(1, 3))))
    if choice < 0.6:
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif choice < 0.8:
        del data[rng.randrange(len(data)):]
    else:
        at = rng.randrange(len(data))
        data[at:at] = rng.randbytes(rng.randint(1, 40))
    return bytes(data)


async def test_fuzzed_frames_never_crash_the_listener_or_store_a_torn_entry(bk, seed):
    """Seeded mutations of valid v2 and v3 frames (and plain noise), each on its own
    connection: whatever the listener answers or closes, it keeps serving, and every entry
    it stores is whole: its own ids are where it is stored, and in a ledger of a CRC type
    its digest verifies. (A mutated frame that is still a well-formed add is a request like
    any other: its bytes are what a client sent; one that first reaches a ledger makes it
    DUMMY, BK4, as BookKeeper stores everything unchecked.)"""
    import random  # noqa: PLC0415

    rng = random.Random(seed)
    sent = {(50, e): entry(50, e) for e in range(8)}
    sent.update({(51, e): entry(51, e, dtype=DigestType.CRC32) for e in range(8)})
    async with BkClient.connect(bk.port) as client:
        valid = [v3.frame(client.request("ADD_ENTRY", ledgerId=lid, entryId=e, masterKey=KEY,
                                         body=data)) for (lid, e), data in sent.items()]
        valid += [v3.frame(client.request("READ_ENTRY", ledgerId=50, entryId=e))
                  for e in range(4)]
    valid += [v2.encode_add(lid, e, KEY, data) for (lid, e), data in sent.items()]
    valid += [v2.encode_read(51, 0), v2.encode_batch_read(50, 0, 9, 4, 1 << 20)]
    for _ in range(150):
        async with BkClient.connect(bk.port) as client:
            await client.send(_mutations(rng, valid))
            try:  # drain what it answers until it closes or goes quiet
                while await asyncio.wait_for(client.reader.read(65536), 0.05):
                    pass
            except (asyncio.TimeoutError, ConnectionError):
                pass
    async with BkClient.connect(bk.port) as client:  # still serving
        assert (await client.read(9999, 0)).status == S["ENOLEDGER"]
    ledgers, _ = bk.bookie.list_ledgers(0, 1000)
    checked = 0
    for ledger_id in ledgers:
        dtype = bk.bookie.ledger_state(ledger_id).digest_type
        for first, last in await bk.bookie.entry_id_ranges(ledger_id):
            for entry_id in range(first, last + 1):
                stored = await bk.bookie.read_entry(ledger_id, entry_id)
                assert entry_ids(stored) == (ledger_id, entry_id)
                if dtype and DigestType(dtype).verifiable:
                    assert entry_digest_ok(stored, DigestType(dtype))
                checked += 1
    assert checked > 0


async def test_adds_while_the_bookie_replays_are_refused_readonly_then_stored(bookie_config):
    """BK4a (issue 35): BookKeeper's client, reconnecting to a bookie restarted after a kill,
    sent adds while it replayed its journal; each was answered EIO from an AttributeError
    (the index is not open yet). They are EREADONLY, as any add before replay ends, and the
    same adds are stored once the bookie serves."""
    from bookie.node.bookie import Bookie  # noqa: PLC0415

    bookie = Bookie(bookie_config)  # not started: what a listener sees before replay ends
    async with own_listener(bookie) as (_listener, port):
        async with BkClient.connect(port) as client:
            requests = [client.request("ADD_ENTRY", ledgerId=9, entryId=i, masterKey=KEY,
                                       body=entry(9, i)) for i in range(3)]
            answers = await client.pipeline(requests)
            assert [answers[r.header.txnId].status for r in requests] == [S["EREADONLY"]] * 3
            await bookie.start()
            try:
                answers = await client.pipeline(requests)
                assert [answers[r.header.txnId].status for r in requests] == [S["EOK"]] * 3
            finally:
                bookie.begin_shutdown()
                await bookie.close()


async def test_force_of_a_ledger_this_bookie_holds_nothing_of_is_eok(bk):
    """FL1 (issue 36, item 4): BookKeeper's client sends FORCE_LEDGER to every bookie of the
    ensemble; in a striped deferred-sync ledger one may hold no entry yet. BookKeeper's
    bookie forces its journal and answers EOK; ours answered ENOLEDGER, so force() failed
    with BKNoSuchLedgerExistsException. HTTP's force of an unknown ledger stays 404."""
    async with BkClient.connect(bk.port) as client:
        forced = await client.call(client.request("FORCE_LEDGER", ledgerId=77))
        assert forced.status == S["EOK"] and forced.forceLedgerResponse.ledgerId == 77
    assert bk.bookie.storage.ledgers.get(77) is None  # the force created nothing
    with pytest.raises(NoLedger):
        await bk.bookie.force(77, KEY)


@pytest.mark.parametrize("version", [3, 0x7F, 0x80, 0xFF])
async def test_v2_requests_of_a_version_bookkeeper_does_not_serve_are_ebadversion(bk, version):
    """BK6 (issue 36, item 5): BookKeeper's bookie serves v2 versions 0-2 (its signed byte
    makes 0x80-0xFF negative) and answers EBADVERSION to others, storing nothing. Ours
    stored version-3 adds; a version byte of 0x80 or more broke the answer's encoder, so
    the add was stored but never answered, and the adds behind it in the same slice were
    neither answered nor stored."""
    async with BkClient.connect(bk.port) as client:
        await client.send(v2.encode_add(30, 0, KEY, entry(30, 0), version=version)
                          + v2.encode_read(30, 0, version=version)
                          + v2.encode_add(30, 1, KEY, entry(30, 1)))
        answers = [v2.decode_response(await client.read_frame()) for _ in range(3)]
    assert [(a.opcode, a.rc) for a in answers] == [
        (v2.ADDENTRY, v2.EBADVERSION), (v2.READENTRY, v2.EBADVERSION), (v2.ADDENTRY, v2.EOK)]
    assert await bk.bookie.entry_id_ranges(30) == [[1, 1]]  # only the served add
    assert bk.bookie.stats.bk_refused[("ADD_ENTRY", "EBADVERSION")] == 1


async def test_v3_adds_of_another_header_version_are_ebadversion(bk):
    """BK6: a v3 add whose header says VERSION_ONE or VERSION_TWO was stored (the add path
    skipped the version check every other v3 request has); BookKeeper answers EBADVERSION."""
    async with BkClient.connect(bk.port) as client:
        for version in (1, 2):
            request = client.request("ADD_ENTRY", ledgerId=31, entryId=0, masterKey=KEY,
                                     body=entry(31, 0))
            request.header.version = version
            assert (await client.call(request)).status == S["EBADVERSION"]
        assert (await client.add(31, 1, KEY, entry(31, 1))).status == S["EOK"]
    assert await bk.bookie.entry_id_ranges(31) == [[1, 1]]
