"""BookKeeper's metric names beside ours (docs/operations.md §3.1, api/server/metrics_bk.py
MB1-MB3, bk_timing.py BT1-BT3): on one real bookie with its three listeners on 127.0.0.1,
adds, reads, fencing reads, long polls, LAC reads and writes and forces over bookie_port
(v3 and v2) and over HTTP are counted by outcome under bookkeeper_server_*, with sane
quantiles in milliseconds, the journal's under bookie_journal_*, on /metrics of the HTTP
listener and of the admin listener alike."""

from __future__ import annotations

import asyncio
import contextlib
import math

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from api.bkproto import v2, v3
from api.client import BookieClient
from api.server.bk_listener import bk_serving
from bookie.entry import DigestType, frame_entry, frame_lac, master_key
from bookie.errors import BookieError
from tests.support.bk_admin import admin_bookie
from tests.support.bk_client import BkClient

KEY = master_key(b"bk-names")
OTHER_KEY = master_key(b"not the writer")
S = v3.STATUS
QUANTILES = ("0.5", "0.75", "0.95", "0.99", "0.999", "0.9999", "1.0")


def entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, 0, b"p" * 64, DigestType.CRC32C)


@contextlib.asynccontextmanager
async def three_listeners(config):
    """(bookie, HTTP url, admin url, bookie_port) of one started bookie."""
    async with admin_bookie(config) as served:
        async with bk_serving(served.bookie, "127.0.0.1", 0) as port:
            yield served, port


async def scrape(url: str) -> tuple[str, dict]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url + "/metrics") as reply:
            assert reply.status == 200
            text = await reply.text()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return text, samples


def sample(samples: dict, name: str, **labels) -> float:
    return samples[(name, frozenset(labels.items()))]


def counts(samples: dict, op: str, **labels) -> tuple[int, int]:
    """(successes, failures) of one of BookKeeper's op stats."""
    return (int(sample(samples, f"{op}_count", success="true", **labels)),
            int(sample(samples, f"{op}_count", success="false", **labels)))


def assert_sane_quantiles(samples: dict, op: str, success: str = "true", **labels) -> None:
    """MB1: ms, ordered, within the window's range, the mean between p0 and max."""
    values = [sample(samples, op, success=success, quantile=q, **labels) for q in QUANTILES]
    assert all(not math.isnan(v) for v in values), (op, values)
    assert values == sorted(values), (op, values)
    assert 0.0 <= values[0] and values[-1] < 30_000.0, (op, values)
    count = sample(samples, f"{op}_count", success=success, **labels)
    mean = sample(samples, f"{op}_sum", success=success, **labels) / count
    # Interpolated bounds: a quantile is within one bucket (~9 %) of the true value.
    assert mean <= values[-1] * 1.1, (op, mean, values)


async def test_bookie_port_operations_are_counted_under_bookkeepers_names(bookie_config):
    async with three_listeners(bookie_config) as (served, port):
        async with BkClient.connect(port) as client, BkClient.connect(port) as poller:
            answers = await client.pipeline([  # one run of 5 adds (BK5), counted as 5
                client.request("ADD_ENTRY", ledgerId=1, entryId=i, masterKey=KEY,
                               body=entry(1, i)) for i in range(5)])
            assert {a.status for a in answers.values()} == {S["EOK"]}
            assert (await client.add(1, 5, OTHER_KEY, entry(1, 5))).status == S["EUA"]
            for entry_id in (0, 1, 2):
                assert (await client.read(1, entry_id)).status == S["EOK"]
            assert (await client.read(1, 99)).status == S["ENOENTRY"]
            async with BkClient.connect(port) as old:  # a v2 client: a connection of its own
                assert (await old.call_v2(v2.encode_read(1, 3))).rc == v2.EOK
            for entry_id in range(2):
                await client.add(2, entry_id, KEY, entry(2, entry_id))
            fenced = await client.read(2, 0, flag=1, masterKey=KEY)
            assert fenced.status == S["EOK"]
            assert (await client.read(2, 0, flag=1, masterKey=OTHER_KEY)).status == S["EUA"]
            polled = await poller.read(1, -1, previousLAC=0, timeOut=10, flag=2)
            assert polled.status == S["EOK"]
            lac_body = frame_lac(1, 4, DigestType.CRC32C)
            assert (await client.call(client.request(
                "WRITE_LAC", ledgerId=1, lac=4, masterKey=KEY, body=lac_body))).status == \
                S["EOK"]
            assert (await client.call(client.request("READ_LAC", ledgerId=1))).status == \
                S["EOK"]
            assert (await client.call(client.request("READ_LAC", ledgerId=77))).status == \
                S["ENOLEDGER"]
            assert (await client.call(client.request("FORCE_LEDGER", ledgerId=1))).status == \
                S["EOK"]
        for url in (served.url, served.admin):  # the HTTP listener's and the admin's
            text, samples = await scrape(url)
            server = "bookkeeper_server_"
            assert counts(samples, server + "ADD_ENTRY_REQUEST") == (7, 1)
            assert counts(samples, server + "ADD_ENTRY") == (7, 1)
            assert counts(samples, server + "READ_ENTRY_REQUEST") == (4, 1)  # v3 and v2
            assert counts(samples, server + "READ_ENTRY") == (4, 1)
            assert counts(samples, server + "READ_ENTRY_FENCE_REQUEST") == (1, 1)
            assert counts(samples, server + "READ_ENTRY_FENCE_READ") == (1, 1)
            assert counts(samples, server + "READ_ENTRY_LONG_POLL_REQUEST") == (1, 0)
            assert counts(samples, server + "READ_ENTRY_LONG_POLL_READ") == (1, 0)
            assert counts(samples, server + "WRITE_LAC_REQUEST") == (1, 0)
            assert counts(samples, server + "READ_LAC_REQUEST") == (1, 1)
            assert counts(samples, server + "FORCE_LEDGER_REQUEST") == (1, 0)
            for op in ("ADD_ENTRY_REQUEST", "ADD_ENTRY", "READ_ENTRY_REQUEST",
                       "READ_ENTRY_FENCE_REQUEST", "READ_ENTRY_LONG_POLL_REQUEST"):
                assert_sane_quantiles(samples, server + op)
            assert_sane_quantiles(samples, server + "ADD_ENTRY_REQUEST", "false")
            # No failure in the window: NaN, as BookKeeper writes an empty sketch.
            assert math.isnan(sample(samples, server + "FORCE_LEDGER", success="false",
                                     quantile="0.99"))
            # MB1: BookKeeper's type and label values (prometheus_client writes the labels
            # sorted, quantile first; PromQL does not see an order).
            assert "# TYPE bookkeeper_server_ADD_ENTRY_REQUEST summary" in text
            assert 'bookkeeper_server_ADD_ENTRY_REQUEST{quantile="0.99",success="true"} ' \
                in text
            # The journal made every add durable (and the fence, the LAC): at least 7.
            journal = {"journalIndex": "0"}
            assert counts(samples, "bookie_journal_JOURNAL_ADD_ENTRY", **journal)[0] >= 7
            assert counts(samples, "bookie_journal_JOURNAL_SYNC", **journal)[0] >= 1
            assert_sane_quantiles(samples, "bookie_journal_JOURNAL_ADD_ENTRY", **journal)
            assert_sane_quantiles(samples, "bookie_journal_JOURNAL_SYNC", **journal)
            # A counter of BookKeeper's, under its own name (metrics_bk_bookie.py MK1; the
            # Python parser would call its sample ..._total, Prometheus does not).
            assert "# TYPE bookie_journal_JOURNAL_QUEUE_SIZE counter" in text
            assert 'bookie_journal_JOURNAL_QUEUE_SIZE{journalIndex="0"} 0.0' in text
            # MB3: ours unchanged beside them.
            assert ("bookie_bk_requests_refused_total",
                    frozenset({"op": "ADD_ENTRY", "status": "EUA"}.items())) in samples


async def test_http_operations_are_counted_under_bookkeepers_names(bookie_config):
    async with three_listeners(bookie_config) as (served, _port):
        async with BookieClient(served.url) as client:
            for entry_id in range(3):
                await client.add_entry(3, entry_id, entry(3, entry_id), KEY)
            await client.add_batch(3, [entry(3, 3), entry(3, 4)], KEY)  # 2 adds
            with pytest.raises(BookieError):
                await client.add_entry(3, 5, entry(3, 5), OTHER_KEY)
            await client.read_entry(3, 0)
            await client.read_range(3, 0, 4)
            with pytest.raises(BookieError):
                await client.read_entry(3, 99)
            assert await client.read_lac(3) == 3
            assert await client.read_lac(3, wait_for_gt=2, timeout_ms=10) == 3  # long poll
            await client.write_lac(3, KEY, frame_lac(3, 4, DigestType.CRC32C))
            await client.force(3, KEY)
            await client.add_entry(4, 0, entry(4, 0), KEY)
            await client.fence(4, KEY)
        _text, samples = await scrape(served.url)
        server = "bookkeeper_server_"
        assert counts(samples, server + "ADD_ENTRY_REQUEST") == (6, 1)
        assert counts(samples, server + "ADD_ENTRY") == (6, 1)
        assert counts(samples, server + "READ_ENTRY_REQUEST") == (2, 1)
        assert counts(samples, server + "READ_ENTRY_LONG_POLL_REQUEST") == (1, 0)
        assert counts(samples, server + "READ_LAC_REQUEST") == (1, 0)
        assert counts(samples, server + "WRITE_LAC") == (1, 0)
        assert counts(samples, server + "FORCE_LEDGER") == (1, 0)
        assert counts(samples, server + "READ_ENTRY_FENCE_REQUEST") == (1, 0)
        for op in ("ADD_ENTRY_REQUEST", "READ_ENTRY_REQUEST", "READ_ENTRY_FENCE_REQUEST"):
            assert_sane_quantiles(samples, server + op)


async def test_quantiles_follow_the_window(bookie_config):
    """OS2: after two rotations the quantiles are of the last window only, while the counts
    keep growing; an empty window is NaN."""
    async with three_listeners(bookie_config) as (served, port):
        ops = served.bookie.stats.ops
        ops.window_s = 0.0  # rotate on every scrape
        async with BkClient.connect(port) as client:
            await client.add(5, 0, KEY, entry(5, 0))
            await scrape(served.url)  # starts the clock
            await scrape(served.url)  # rotation 1: the add is before it
            await scrape(served.url)  # rotation 2: the window holds nothing
            _text, samples = await scrape(served.url)
            op = "bookkeeper_server_ADD_ENTRY_REQUEST"
            assert counts(samples, op) == (1, 0)
            assert math.isnan(sample(samples, op, success="true", quantile="0.5"))
            await client.add(5, 1, KEY, entry(5, 1))  # recorded before its answer is written
            _text, samples = await scrape(served.url)
            assert counts(samples, op) == (2, 0)
            assert not math.isnan(sample(samples, op, success="true", quantile="0.5"))
