"""Journal retention (docs/design.md §1.8, docs/formats.md §3.9) through the real checkpoint over HTTP:
journals wholly below the persisted lastMark are deleted, journal_backups_count of them kept,
and what is kept still replays."""

from __future__ import annotations

import os
import random

from api.client import BookieClient
from bookie.config import BookieConfig
from bookie.entry import frame_entry, master_key
from journal.format import parse_journal_id
from tests.support.servers import running_bookie

KEY = master_key(b"retention")


def journal_ids(config: BookieConfig) -> list[int]:
    ids = (parse_journal_id(name) for name in os.listdir(config.journal_dir))
    return sorted(i for i in ids if i is not None)


async def test_journals_below_the_last_mark_are_deleted_keeping_the_backups_count(
        data_dir, seed):
    rng = random.Random(seed)
    config = BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                          journal_max_bytes=64 * 1024, journal_prealloc_bytes=16 * 1024,
                          journal_backups_count=2)
    written = {}
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        for entry_id in range(500):  # about 1 KiB records: several 64 KiB journals
            payload = rng.randbytes(1000)
            data = frame_entry(1, entry_id, entry_id - 1, len(payload), payload)
            await client.add_entry(1, entry_id, data, KEY)
            written[entry_id] = data
        before = journal_ids(config)
        assert len(before) >= 6

        result = await client.checkpoint()

        mark_id = result["lastMark"][0]
        after = journal_ids(config)
        below = [i for i in before if i < mark_id]
        assert sorted(result["journalsDeleted"]) == below[:-2]
        assert [i for i in after if i < mark_id] == below[-2:]  # the newest two kept
        assert [i for i in after if i >= mark_id] == [i for i in before if i >= mark_id]
        assert (await client.checkpoint())["journalsDeleted"] == []  # nothing more to do
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        for entry_id, data in written.items():
            assert await client.read_entry(1, entry_id) == data
