"""Every value the write path accepts is storable by every layer below it (issue 13 bug 1).

An acknowledged entry 2**63-1 made every later checkpoint fail (the index cannot store it:
(L, 2**63-1) ends a ledger's key range), the bookie went read-only, and every restart replayed
the record into the same failure: any client could take the bookie offline. The accepted
ranges are derived here from ledgerindex/keys.py, the one place that states them.
"""

from __future__ import annotations

import pytest

from api.client import BookieClient
from bookie.entry import DigestType, frame_entry, frame_lac, master_key
from bookie.errors import BadRequest, NoEntry, NoLedger
from ledgerindex.keys import ENTRY_ID_MAX, LAC_MIN, LEDGER_ID_MAX
from tests.support.servers import running_bookie

KEY = master_key(b"ids")


def entry(ledger_id: int, entry_id: int, lac: int | None = None) -> bytes:
    lac = entry_id - 1 if lac is None else lac
    return frame_entry(ledger_id, entry_id, lac, 5, b"bytes", DigestType.CRC32C)


async def _restart_and_read(config, ledger_id: int, entry_id: int, expected: bytes) -> None:
    async with running_bookie(config) as running:
        async with BookieClient(running.url) as client:
            assert await client.read_entry(ledger_id, entry_id) == expected
            assert (await client.info())["state"] == "writable"


async def test_the_largest_storable_ids_are_acked_and_survive_checkpoint_and_restart(
        server, client, bookie_config):
    top = entry(LEDGER_ID_MAX, ENTRY_ID_MAX, ENTRY_ID_MAX - 1)
    await client.add_entry(LEDGER_ID_MAX, ENTRY_ID_MAX, top, KEY)
    await client.write_lac(LEDGER_ID_MAX, KEY, frame_lac(LEDGER_ID_MAX, ENTRY_ID_MAX))
    await client.checkpoint()
    assert (await client.info())["state"] == "writable"
    await server.bookie.close()
    await _restart_and_read(bookie_config, LEDGER_ID_MAX, ENTRY_ID_MAX, top)


@pytest.mark.parametrize("recovery", [False, True])
async def test_an_entry_id_past_the_index_range_is_refused_before_journaling(
        server, client, bookie_config, recovery):
    first = ENTRY_ID_MAX + 1
    with pytest.raises(BadRequest, match="cannot store"):
        await client.add_entry(7, first, entry(7, first), KEY, recovery=recovery)
    with pytest.raises(BadRequest, match="cannot store"):
        await client.add_batch(7, [entry(7, 0), entry(7, first)], KEY, recovery=recovery)
    with pytest.raises(NoLedger):
        await client.read_entry(7, 0)  # the refused batch stored nothing
    await client.add_entry(7, 0, entry(7, 0), KEY)
    await client.checkpoint()  # bug 1: this failed and made the bookie read-only
    assert (await client.info())["state"] == "writable"
    await server.bookie.close()
    await _restart_and_read(bookie_config, 7, 0, entry(7, 0))


@pytest.mark.parametrize("lac", [LAC_MIN - 1, ENTRY_ID_MAX + 1, -(2**63)])
async def test_a_lac_that_is_no_entry_id_is_refused(client, lac):
    with pytest.raises(BadRequest, match="LAC"):
        await client.add_entry(8, 0, entry(8, 0, lac), KEY)
    await client.add_entry(8, 0, entry(8, 0), KEY)
    with pytest.raises(BadRequest, match="LAC"):
        await client.write_lac(8, KEY, frame_lac(8, lac))
    assert await client.read_lac(8) == -1


async def test_reads_of_unstorable_ids_answer_no_entry_not_eio(client):
    await client.add_entry(9, 0, entry(9, 0), KEY)
    with pytest.raises(NoEntry):
        await client.read_entry(9, ENTRY_ID_MAX + 1)
