"""FN1 (bookie/node/writes.py ``fence``, issue 36 item 8): only a ledger's first fence is
journaled and synced, as BookKeeper logs only the first; every later fencing read (a
recovering client sends one to each bookie, and retries) answers once that record is
durable, without a record of its own. The journal files are read back with the project's
own reader."""

from __future__ import annotations

import asyncio
import glob
import os

import pytest

from bookie.disk import OsDisk
from bookie.entry import master_key
from bookie.errors import Unauthorized
from journal.format import RecordKind
from journal.reader import JournalReader
from tests.support.servers import running_bookie

KEY = master_key(b"fence-once")


def fence_records(config, ledger_id: int) -> int:
    count = 0
    for path in sorted(glob.glob(os.path.join(config.journal_dir, "*.txn"))):
        with JournalReader(OsDisk(), path) as reader:
            count += sum(1 for record in reader.scan()
                         if record.kind is RecordKind.FENCE and record.ledger_id == ledger_id)
    return count


async def test_only_the_first_fence_of_a_ledger_is_journaled(bookie_config):
    async with running_bookie(bookie_config) as running:
        bookie = running.bookie
        # Ten at once (one recovering client's reads) and then ten more, one by one.
        answers = await asyncio.gather(*(bookie.fence(3, KEY) for _ in range(10)))
        assert set(answers) == {(-1, -1)}
        for _ in range(10):
            assert await bookie.fence(3, KEY) == (-1, -1)
        with pytest.raises(Unauthorized):  # FN1 checks the key before it answers
            await bookie.fence(3, master_key(b"someone else"))
        assert bookie.ledger_state(3).fenced
    assert fence_records(bookie_config, 3) == 1
    # After a restart the fence replayed from the journal is durable: no record either.
    async with running_bookie(bookie_config) as running:
        assert await running.bookie.fence(3, KEY) == (-1, -1)
    assert fence_records(bookie_config, 3) == 1
