"""Bounds against slow or greedy clients (api/server/body_budget.py BB1, BB2): bodies
held at once are capped (503 ETOOMANYREQUESTS + Retry-After past it, before reading), and a
body that does not arrive in time is answered 400, freeing what it held. Real HTTP on
127.0.0.1, a raw socket for the slow client."""

from __future__ import annotations

import asyncio
import dataclasses
import json

from api.client import BookieClient
from bookie.entry import DigestType, frame_entry, master_key
from bookie.errors import TooManyRequests
from tests.support.servers import running_bookie

KEY = master_key(b"bounds")
HELD = 768 * 1024


def entry(entry_id: int, size: int = 100) -> bytes:
    return frame_entry(4, entry_id, entry_id - 1, size, bytes(size), DigestType.CRC32C)


async def _stall_a_body(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Announce a 768 KiB batch, send a little of it, then stop sending."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write((f"POST /v1/ledgers/4/entries HTTP/1.1\r\nHost: {host}\r\n"
                  f"X-Master-Key: {KEY.hex()}\r\nContent-Type: application/x-bookie-entries\r\n"
                  f"Content-Length: {HELD}\r\n\r\n").encode() + b"\0" * 1000)
    await writer.drain()
    return reader, writer


async def _status_and_body(reader: asyncio.StreamReader) -> tuple[int, dict]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    status = int(head.split(b" ", 2)[1])
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    return status, json.loads(await reader.readexactly(length))


async def _until_held(client: BookieClient, size: int) -> None:
    """The stalled request's handler has reserved its bytes (bounded poll of /metrics)."""
    for _ in range(4000):
        async with client.session.get(client.base_url + "/metrics") as reply:
            text = await reply.text()
        held = next(float(line.split()[1]) for line in text.splitlines()
                    if line.startswith("bookie_request_body_bytes_held "))
        if held >= size:
            return
        await asyncio.sleep(0.005)  # noqa: sleep-ok (bounded poll of the server's state)
    raise AssertionError("the stalled request never reserved its bytes")


async def test_bodies_held_at_once_are_capped_and_a_stalled_body_times_out(bookie_config):
    config = dataclasses.replace(bookie_config, request_bodies_max_bytes=1 << 20,
                                 request_body_timeout_ms=500)
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        await client.add_entry(4, 0, entry(0), KEY)
        reader, writer = await _stall_a_body(running.url)
        await _until_held(client, HELD)
        big = [entry(e, 300 * 1024) for e in (1,)]
        try:
            await client.add_batch(4, big, KEY)
            refused = None
        except TooManyRequests as error:
            refused = error
        assert refused is not None and refused.retry_after_s > 0
        status, body = await _status_and_body(reader)
        assert status == 400 and body["error"] == "EBADREQ" and "did not arrive" in \
            body["message"]
        writer.close()
        assert await client.add_batch(4, big, KEY) == [1]  # the budget was given back
