"""A refusal is never silent (docs/operations.md §3). Every non-EOK answer of either listener
of a real bookie on 127.0.0.1 is counted in ``/metrics`` by operation and status, and logged at
WARN with its reason and its peer (api/server/refusals.py); EOK answers are not counted."""

from __future__ import annotations

import asyncio
import logging
import re

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from api.bkproto import v2, v3
from tests.integration.test_bk_listener import KEY, OTHER_KEY, entry, listening
from tests.support.bk_client import BkClient
from tests.support.servers import running_bookie

S = v3.STATUS


async def refused_counts(url: str, family: str, labels: tuple[str, ...]) -> dict:
    """The samples of ``family`` served by ``url``/metrics, by their label values."""
    async with aiohttp.ClientSession() as session:
        async with session.get(url + "/metrics") as reply:
            text = await reply.text()
    return {tuple(sample.labels[label] for label in labels): sample.value
            for metrics in text_string_to_metric_families(text)
            for sample in metrics.samples if sample.name == family + "_total"}


def warnings(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == "bookie.refusals" and record.levelno == logging.WARNING]


async def test_every_refusal_on_bookie_port_is_counted_by_op_and_status(bookie_config,
                                                                       caplog):
    caplog.set_level(logging.WARNING, logger="bookie.refusals")
    async with listening(bookie_config) as bk:
        async with BkClient.connect(bk.port) as client:
            peer = "127.0.0.1:%d" % client.writer.get_extra_info("sockname")[1]
            for entry_id in range(2):  # EOK answers, counted nowhere
                assert (await client.add(5, entry_id, KEY, entry(5, entry_id))).status == 0
            wrong = await client.add(5, 2, OTHER_KEY, entry(5, 2))  # begun at once
            assert wrong.status == S["EUA"]
            recovery = await client.add(5, 2, OTHER_KEY, entry(5, 2), flag=1)  # a task's
            assert recovery.status == S["EUA"]
            run = await client.pipeline([client.request(  # a run refused, then one by one
                "ADD_ENTRY", ledgerId=5, entryId=i, masterKey=OTHER_KEY, body=entry(5, i))
                for i in range(2, 5)])
            assert {answer.status for answer in run.values()} == {S["EUA"]}
            assert (await client.read(6, 0)).status == S["ENOLEDGER"]
            assert (await client.read(5, 9)).status == S["ENOENTRY"]
            assert (await client.read(5, -1, flag=1)).status == S["EUA"]  # fence, no key
            assert (await client.read(5, -1, flag=1, masterKey=KEY)).status == 0
            assert (await client.add(5, 2, KEY, entry(5, 2))).status == S["EFENCED"]
            ids = await client.add(7, 0, KEY, entry(7, 1))  # the entry's own ids differ
            assert ids.status == S["EBADREQ"]
            lac = await client.call(client.request("READ_LAC", ledgerId=6))
            assert lac.status == S["ENOLEDGER"]
            assert (await client.call(client.request("START_TLS"))).status == S["EBADREQ"]
            ranged = v3.Request()
            ranged.header.version, ranged.header.txnId = 3, 99
            ranged.header.operation = v3.OPERATIONS["RANGE_READ_ENTRY"]
            assert (await client.call(ranged)).status == S["EBADREQ"]
            old = client.request("READ_ENTRY", ledgerId=5, entryId=0)
            old.header.version = 2
            assert (await client.call(old)).status == S["EBADVERSION"]
        async with BkClient.connect(bk.port) as client:  # v2
            batch = await client.call_v2(v2.encode_batch_read(5, 9, 1, 10, 1 << 20))
            assert batch.rc == v2.ENOENTRY
            assert (await client.call_v2(v2.encode_read(6, 0))).rc == v2.ENOLEDGER
            fenced = await client.call_v2(v2.encode_add(5, 2, KEY, entry(5, 2)))
            assert fenced.rc == v2.EFENCED
        async with BkClient.connect(bk.port) as client:
            await client.send(v2.frame(b"\xff" * 40))
            assert await client.closed_by_peer()
        assert await refused_counts(bk.url, "bookie_bk_requests_refused",
                                    ("op", "status")) == {
            ("ADD_ENTRY", "EUA"): 5, ("ADD_ENTRY", "EFENCED"): 2, ("ADD_ENTRY", "EBADREQ"): 1,
            ("READ_ENTRY", "ENOLEDGER"): 2, ("READ_ENTRY", "ENOENTRY"): 1,
            ("READ_ENTRY", "EUA"): 1, ("READ_ENTRY", "EBADVERSION"): 1,
            ("READ_LAC", "ENOLEDGER"): 1, ("START_TLS", "EBADREQ"): 1,
            ("RANGE_READ_ENTRY", "EBADREQ"): 1, ("BATCH_READ_ENTRY", "ENOENTRY"): 1,
            ("FRAME", "CLOSED"): 1}
    logged = warnings(caplog)
    for what in ("ADD_ENTRY EUA", "ADD_ENTRY EFENCED", "ADD_ENTRY EBADREQ", "READ_ENTRY ENOLEDGER",
                 "READ_ENTRY ENOENTRY", "READ_ENTRY EBADVERSION", "READ_LAC ENOLEDGER",
                 "START_TLS EBADREQ", "RANGE_READ_ENTRY EBADREQ"):
        assert any(line.startswith(f"bookie_port refused {what} from {peer}: ")
                   for line in logged), (what, logged)
    assert any(line.startswith(f"bookie_port refused READ_ENTRY EUA from {peer}: ")
               and "carries no master key" in line for line in logged), logged
    for what in ("BATCH_READ_ENTRY ENOENTRY", "FRAME CLOSED"):
        assert any(re.match(rf"bookie_port refused {what} from 127\.0\.0\.1:\d+: .", line)
                   for line in logged), (what, logged)


async def http_get(port: int, path: str) -> tuple[int, str]:
    """GET ``path`` over a connection of its own: (HTTP status, the client's host:port)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: bookie\r\nConnection: close\r\n\r\n"
                     .encode())
        status = int((await reader.readline()).split()[1])
        await reader.read()
        return status, "127.0.0.1:%d" % writer.get_extra_info("sockname")[1]
    finally:
        writer.close()


async def test_every_error_answer_over_http_is_counted_and_logged(bookie_config, caplog):
    caplog.set_level(logging.WARNING, logger="bookie.refusals")
    async with running_bookie(bookie_config) as running, aiohttp.ClientSession() as session:
        url = running.url + "/v1/ledgers/8/entries/"
        for entry_id, key, status in ((0, KEY, 200), (1, OTHER_KEY, 403)):
            async with session.put(url + str(entry_id), data=entry(8, entry_id),
                                   headers={"X-Master-Key": key.hex()}) as reply:
                assert reply.status == status
        port = int(running.url.rsplit(":", 1)[1])
        status, peer = await http_get(port, "/v1/ledgers/9/entries/0")
        assert status == 404
        assert (await http_get(port, "/no/such/route"))[0] == 404
        assert await refused_counts(running.url, "bookie_http_requests_refused",
                                    ("op", "code", "error")) == {
            ("add_entry", "403", "EUA"): 1, ("read_entry", "404", "ENOLEDGER"): 1,
            ("no_route", "404", "EBADREQ"): 1}
    logged = warnings(caplog)
    assert f"http refused read_entry 404 ENOLEDGER from {peer}: ledger 9 is unknown to this " \
           "bookie" in logged, logged
    assert any(re.match(r"http refused add_entry 403 EUA from 127\.0\.0\.1:\d+: master key",
                        line) for line in logged), logged
    assert any(re.match(r"http refused no_route 404 EBADREQ from 127\.0\.0\.1:\d+: Not Found",
                        line) for line in logged), logged
