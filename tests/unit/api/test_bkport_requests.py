"""What BkBookieClient puts on the wire for each call, read back with api/bkproto's own
decoder, and how each v3 status comes back as an error (api/client/bkport/ BC1-BC4, KC2,
KC3). The peer is a TCP server on 127.0.0.1 that decodes each request with
``v3.decode_request`` and answers what the test says: the statuses and misbehaviours a
real bookie cannot be made to produce on demand (EIO, an unknown status, silence, garbage)."""

from __future__ import annotations

import asyncio
import contextlib
import struct

import pytest

from api.bkproto import availability, v3
from api.client.bkport.client import BkBookieClient
from api.client.bkport.connection import ConnectionLost
from api.client.bkport.errors import BUSY_RETRY_AFTER_S, status_error
from api.client.codec import LedgerCodec
from bookie import errors

C = LedgerCodec.for_password(7, b"pw")
_I32 = struct.Struct(">i")


class Peer:
    """Requests as decoded; ``answer(request) -> Response | bytes | None`` (None: silence)."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.requests: list = []

    async def serve(self, reader, writer) -> None:
        try:
            while True:
                length = _I32.unpack(await reader.readexactly(4))[0]
                request = v3.decode_request(await reader.readexactly(length))
                self.requests.append(request)
                reply = self.answer(request)
                if reply is not None:
                    writer.write(reply if isinstance(reply, bytes) else v3.frame(reply))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()  # a cancel too: the loop's end, not a failure of the test


@contextlib.asynccontextmanager
async def peer(answer):
    p = Peer(answer)
    server = await asyncio.start_server(p.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = BkBookieClient(f"127.0.0.1:{port}", request_timeout_s=5)
    try:
        yield client, p
    finally:
        await client.close()
        server.close()


def ok(request, **body):
    """An EOK answer to ``request`` with ``body``'s fields in its response body."""
    name = next(n for n, num in v3.OPERATIONS.items() if num == request.header.operation)
    response = v3.Response()
    response.header.CopyFrom(request.header)
    response.status = v3.STATUS["EOK"]
    field = getattr(response, v3.BODY_FIELDS[name][1])
    field.status = v3.STATUS["EOK"]
    for key, value in body.items():
        setattr(field, key, value)
    if name in ("READ_ENTRY", "ADD_ENTRY"):
        src = getattr(request, v3.BODY_FIELDS[name][0])
        field.ledgerId, field.entryId = src.ledgerId, src.entryId
    elif name != "GET_BOOKIE_INFO":
        field.ledgerId = getattr(request, v3.BODY_FIELDS[name][0]).ledgerId
    return response


def refused(request, status: str):
    response = ok(request)
    response.status = v3.STATUS[status]
    return response


async def test_adds_carry_key_body_and_flags_and_a_batch_is_sent_before_any_answer():
    entries = [C.frame(e, e - 1, 0, b"x") for e in range(3)]
    held: list = []

    def answer(request):
        held.append(request)
        if len(held) < 3:
            return None  # BC2: no answer until the whole batch has come
        return b"".join(v3.frame(ok(r)) for r in held)
    async with peer(answer) as (client, p):
        assert await client.add_batch(7, entries, C.master_key, recovery=True) == [0, 1, 2]
    adds = [r.addRequest for r in p.requests]
    assert [(a.ledgerId, a.entryId, a.body) for a in adds] == \
        [(7, e, entries[e]) for e in range(3)]
    assert all(a.masterKey == C.master_key and a.flag == 1 and not a.HasField("writeFlags")
               for a in adds)
    assert len({r.header.txnId for r in p.requests}) == 3  # KC5
    assert all(r.header.version == 3 for r in p.requests)


async def test_each_read_request_is_the_one_bookkeeper_sends():
    last = C.frame(4, 3, 0, b"last")
    answers = {1: lambda r: ok(r, body=last),
               7: lambda r: ok(r, lacBody=C.lac_body(5), lastEntryBody=last)}
    async with peer(lambda r: answers[r.header.operation](r)) as (client, p):
        assert await client.fence(7, C.master_key) == {"lac": 5, "lastEntryId": 4}
        fence, read_lac = p.requests[-2:]
        assert fence.readRequest.flag == 1 and fence.readRequest.entryId == -1
        assert fence.readRequest.masterKey == C.master_key
        assert read_lac.header.operation == v3.OPERATIONS["READ_LAC"]
        await client.read_lac_long_poll(7, 3, 250)
        poll = p.requests[-1].readRequest
        assert (poll.entryId, poll.previousLAC, poll.timeOut, poll.flag) == (-1, 3, 250, 2)
        await client.read_entry(7, 2)
        plain = p.requests[-1].readRequest
        assert not plain.HasField("flag") and not plain.HasField("masterKey") \
            and not plain.HasField("previousLAC")


async def test_entry_list_info_write_lac_and_force():
    ids = [0, 1, 2, 9]
    answers = {"GET_LIST_OF_ENTRIES_OF_LEDGER":
               lambda r: ok(r, availabilityOfEntriesOfLedger=availability.encode(ids)),
               "GET_BOOKIE_INFO": lambda r: ok(r, freeDiskSpace=5, totalDiskCapacity=9),
               "WRITE_LAC": ok, "FORCE_LEDGER": ok,
               "READ_LAC": lambda r: ok(r, lacBody=C.lac_body(8))}
    names = {num: name for name, num in v3.OPERATIONS.items()}
    async with peer(lambda r: answers[names[r.header.operation]](r)) as (client, p):
        assert await client.entry_id_ranges(7) == [[0, 2], [9, 9]]
        assert await client.info() == {"disks": {"ledgers": {"freeBytes": 5,
                                                             "totalBytes": 9}}}
        assert p.requests[-1].getBookieInfoRequest.requested == 3
        assert await client.write_lac(7, C.master_key, C.lac_body(8)) == 8
        write = p.requests[-2].writeLacRequest
        assert (write.lac, write.masterKey, write.body) == (8, C.master_key, C.lac_body(8))
        assert await client.force(7, C.master_key) == -1  # no entry: no last entry id
        assert p.requests[-2].forceLedgerRequest.ledgerId == 7


@pytest.mark.parametrize("status, error", [
    ("ENOLEDGER", errors.NoLedger), ("ENOENTRY", errors.NoEntry),
    ("EBADREQ", errors.BadRequest), ("EUA", errors.Unauthorized),
    ("EFENCED", errors.Fenced), ("EREADONLY", errors.ReadOnly),
    ("ETOOMANYREQUESTS", errors.TooManyRequests), ("EIO", errors.IOFailure),
    ("EBADVERSION", errors.BadRequest), ("EUNKNOWNLEDGERSTATE", errors.IOFailure)])
async def test_every_status_is_the_error_http_raises(status, error):
    async with peer(lambda r: refused(r, status)) as (client, _):
        with pytest.raises(error) as raised:
            await client.read_entry(7, 0)
    assert type(raised.value) is error
    assert raised.value.bk_status == v3.STATUS[status]


def test_too_many_requests_is_retryable_soon_and_unknown_statuses_are_io_failures():
    busy = status_error(v3.STATUS["ETOOMANYREQUESTS"], "ADD_ENTRY")
    assert isinstance(busy, errors.Unavailable) and busy.retry_after_s == BUSY_RETRY_AFTER_S
    assert type(status_error(12345, "READ_ENTRY")) is errors.IOFailure


async def test_ranked_batch_errors_say_fenced_first():
    statuses = iter(["ETOOMANYREQUESTS", "EFENCED", "EUA"])
    async with peer(lambda r: refused(r, next(statuses))) as (client, _):
        with pytest.raises(errors.Fenced):
            await client.add_batch(7, [C.frame(e, -1, 0, b"x") for e in range(3)],
                                   C.master_key)


async def test_a_silent_bookie_times_out_and_its_late_answer_is_dropped():
    held: list = []

    def answer(request):
        held.append(request)
        if len(held) == 1:
            return None  # KC2: never answered in time
        return v3.frame(ok(held[0], body=b"late")) + v3.frame(ok(request, body=b"right"))
    async with peer(answer) as (client, _):
        with pytest.raises(asyncio.TimeoutError):
            await client._call("READ_ENTRY", timeout_s=0.05, ledgerId=7, entryId=0)
        assert await client.read_entry(7, 1) == b"right"


async def test_garbage_from_the_peer_loses_the_connection_for_every_pending_call():
    async with peer(lambda r: _I32.pack(3) + b"bad" if r.readRequest.entryId == 2 else None) \
            as (client, _):
        pending = [asyncio.ensure_future(client.read_entry(7, e)) for e in range(3)]
        for call in pending:  # KC3: the two silent ones too
            with pytest.raises(ConnectionLost):
                await call


async def test_calls_on_a_connection_whose_send_failed_go_on_a_new_one_unwritten(caplog):
    # KC3/KC4: a send that failed (the bookie killed) closes the transport at once, but
    # asyncio calls connection_lost a turn later; every call before that wrote into the dead
    # transport, each write logged "socket.send() raised exception." (1,234 lines from one
    # writer in a drill) and each call then failed with the loss. Now a call that finds
    # the transport closing has written nothing, so it goes on a new connection.
    async with peer(lambda request: ok(request, lacBody=C.lac_body(3))) as (client, _):
        assert await client.read_lac(7) == 3
        calls = [asyncio.ensure_future(client.read_lac(7)) for _ in range(20)]
        client.connection._wire.transport.abort()  # as a failed send leaves it, the calls
        # already scheduled run before connection_lost
        with caplog.at_level("WARNING", logger="asyncio"):
            results = await asyncio.gather(*calls, return_exceptions=True)
        assert "socket.send() raised exception" not in caplog.text
        assert results == [3] * 20
        assert client.connection.connections_made == 2   # one new connection for them all


async def test_a_bookie_without_batch_reads_is_read_entry_by_entry_from_then_on():
    # BV3: BookKeeper before 4.17 has no BATCH_READ_ENTRY: its v2 decoder closes the
    # connection at one. The held read then goes entry by entry, and later ones too.
    batches = []

    async def serve(reader, writer) -> None:
        try:
            while True:
                length = _I32.unpack(await reader.readexactly(4))[0]
                packet = await reader.readexactly(length)
                if packet[0] == 2:        # a v2 header (version 2): not served here
                    batches.append(packet)
                    writer.close()
                    return
                request = v3.decode_request(packet)
                entry = C.frame(request.readRequest.entryId, -1, 1, b"x")
                writer.write(v3.frame(ok(request, body=entry)))
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    client = BkBookieClient(f"127.0.0.1:{server.sockets[0].getsockname()[1]}",
                            request_timeout_s=5)
    try:
        held, scanned = await client.read_held(7, 0, 2)
        assert scanned == 2 and [C.decode(h, i).entry_id for i, h in enumerate(held)] == \
            [0, 1, 2]
        assert client.batches.offered is False and len(batches) == 1
        assert len((await client.read_held(7, 3, 4))[0]) == 2
        assert len(batches) == 1                 # never asked again
    finally:
        await client.close()
        server.close()
