"""The writer's lean HTTP client (api/client/raw_http.py, RH1-RH2) against a real bookie on
127.0.0.1: batch adds land, errors come back as the server's error classes, connections are
kept alive, and one whose request did not finish is never reused."""

from __future__ import annotations

import asyncio

import pytest

from api import wire
from api.client import BookieClient
from bookie.entry import frame_entry
from bookie.errors import BadRequest, Fenced, Unauthorized

KEY = b"k" * 20


def _entries(ledger_id: int, count: int, first: int = 0) -> list[bytes]:
    return [frame_entry(ledger_id, e, e - 1, e, b"raw-%d" % e) for e in range(first,
                                                                              first + count)]


async def test_batch_adds_land_and_connections_are_kept_alive(client: BookieClient):
    for first in (0, 10, 20):
        await client.add_batch_body(31, wire.encode_batch(_entries(31, 10, first)), KEY,
                                    "crc32c")
    assert await client.read_range(31, 0, 29) == _entries(31, 30)
    assert len(client._raw._idle) == 1  # one connection, reused for all three


async def test_errors_are_the_servers_error_classes(client: BookieClient):
    await client.add_batch_body(32, wire.encode_batch(_entries(32, 2)), KEY, "crc32c")
    with pytest.raises(Unauthorized):
        await client.add_batch_body(32, wire.encode_batch(_entries(32, 1, 2)), b"x" * 20)
    with pytest.raises(BadRequest, match="batch"):
        await client.add_batch_body(32, b"\x00\x00\x00\x05abc", KEY)
    await client.fence(32, KEY)
    with pytest.raises(Fenced):
        await client.add_batch_body(32, wire.encode_batch(_entries(32, 1, 2)), KEY)
    # Recovery adds pass the fence.
    await client.add_batch_body(32, wire.encode_batch(_entries(32, 1, 2)), KEY,
                                recovery=True)
    assert await client.read_entry(32, 2) == _entries(32, 1, 2)[0]


async def test_a_connection_whose_request_was_cancelled_is_not_reused(client: BookieClient):
    await client.add_batch_body(33, wire.encode_batch(_entries(33, 1)), KEY, "crc32c")
    kept = client._raw._idle[0]
    task = asyncio.ensure_future(client.add_batch_body(
        33, wire.encode_batch(_entries(33, 2000, 1)), KEY))
    await asyncio.sleep(0)  # noqa: sleep-ok (one loop turn: the request is on the wire)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert kept.closed and kept not in client._raw._idle  # RH1
    await client.add_batch_body(33, wire.encode_batch(_entries(33, 1, 5000)), KEY)
    assert client._raw._idle and client._raw._idle[0] is not kept
