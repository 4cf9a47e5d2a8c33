"""Whatever the write path acknowledges survives a checkpoint and a restart, over its whole
id and header space (issue 13: an acknowledged entry id 2**63-1 bricked the bookie).

Hypothesis draws sequences of adds (single and batch, recovery and deferred-sync), explicit
LACs and fences with ids at and around every boundary of ledgerindex/keys.py, digest types,
master keys and piggybacked LACs, and sends them over real HTTP. Each answer must be a 200 or
one of docs/http-api.md's errors; then a checkpoint must succeed, the bookie must stay writable, and
after a clean restart every acknowledged entry reads back byte for byte.
"""

from __future__ import annotations

import asyncio
import tempfile

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from api.client import BookieClient
from bookie.config import BookieConfig
from bookie.entry import DigestType, frame_entry, frame_lac, master_key
from bookie.errors import BookieError, IOFailure
from ledgerindex.keys import ENTRY_ID_MAX, LAC_MIN, LEDGER_ID_MAX
from tests.support.servers import running_bookie

I64_MAX = 2**63 - 1
LEDGER_IDS = st.sampled_from([0, 1, 2, LEDGER_ID_MAX]) | st.integers(0, I64_MAX)
ENTRY_IDS = st.sampled_from([0, 1, 2, 3, ENTRY_ID_MAX - 1, ENTRY_ID_MAX, ENTRY_ID_MAX + 1]) \
    | st.integers(0, I64_MAX)
LACS = st.sampled_from([LAC_MIN - 1, LAC_MIN, 0, 1, ENTRY_ID_MAX, ENTRY_ID_MAX + 1,
                        -(2**63), I64_MAX]) | st.integers(-(2**63), I64_MAX)
KEYS = st.sampled_from([master_key(b"a"), master_key(b"b"), bytes(20)])
DIGESTS = st.sampled_from([DigestType.CRC32C, DigestType.CRC32, DigestType.DUMMY])

ADD = st.tuples(st.just("add"), LEDGER_IDS, ENTRY_IDS, LACS, KEYS, DIGESTS, st.booleans(),
                st.booleans(), st.binary(max_size=64))
BATCH = st.tuples(st.just("batch"), LEDGER_IDS, st.lists(ENTRY_IDS, min_size=1, max_size=4,
                                                         unique=True), LACS, KEYS, DIGESTS,
                  st.booleans())
LAC = st.tuples(st.just("lac"), LEDGER_IDS, LACS, KEYS, DIGESTS)
FENCE = st.tuples(st.just("fence"), LEDGER_IDS, KEYS)
OPERATIONS = st.lists(st.one_of(ADD, ADD, BATCH, LAC, FENCE), min_size=1, max_size=25)


def _entry(ledger_id, entry_id, lac, digest, payload=b"payload") -> bytes:
    return frame_entry(ledger_id, entry_id, lac, len(payload), payload, digest)


async def _apply(client: BookieClient, op, acked: dict) -> None:
    kind = op[0]
    try:
        if kind == "add":
            _, ledger, entry_id, lac, key, digest, recovery, deferred, payload = op
            data = _entry(ledger, entry_id, lac, digest, payload)
            await client.add_entry(ledger, entry_id, data, key, digest.header_name, recovery,
                                   deferred)
            acked.setdefault((ledger, entry_id), data)  # W6: a re-add keeps the held copy
        elif kind == "batch":
            _, ledger, ids, lac, key, digest, recovery = op
            datas = [_entry(ledger, e, lac, digest) for e in ids]
            await client.add_batch(ledger, datas, key, digest.header_name, recovery)
            for entry_id, data in zip(ids, datas):
                acked.setdefault((ledger, entry_id), data)
        elif kind == "lac":
            _, ledger, lac, key, digest = op
            await client.write_lac(ledger, key, frame_lac(ledger, lac, digest))
        else:
            _, ledger, key = op
            await client.fence(ledger, key)
    except IOFailure:
        raise  # 500 is never an answer to bad input
    except BookieError:
        pass  # a refusal of docs/http-api.md's table; nothing of it was acknowledged


async def _run(operations, data_dir: str) -> None:
    config = BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                          journal_prealloc_bytes=1 << 20)
    acked: dict = {}
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        for op in operations:
            await _apply(client, op, acked)
        await client.checkpoint()
        assert (await client.info())["state"] == "writable"
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        assert (await client.info())["state"] == "writable"
        for (ledger, entry_id), data in acked.items():
            assert await client.read_entry(ledger, entry_id) == data


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(operations=OPERATIONS)
# W6 (bookie/write_rules.py): the same entry again under a newer LAC is answered 200 and
# the bookie keeps the copy it held; the model once took the second copy as the stored one.
@example(operations=[("batch", 1, [0], -1, master_key(b"a"), DigestType.CRC32C, False),
                     ("batch", 1, [0], 0, master_key(b"a"), DigestType.CRC32C, False)])
def test_every_acknowledged_write_survives_a_checkpoint_and_a_restart(operations):
    with tempfile.TemporaryDirectory() as data_dir:
        asyncio.run(_run(operations, data_dir))
