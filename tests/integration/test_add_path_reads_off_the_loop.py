"""N6 (bookie/node.py): the add path reads nothing from disk on the event loop. The first
add to a ledger after a restart (its runtime: RocksDB floor lookup and the last entry's
pread) and a re-add's comparison with the stored copy run on the read executor (issue 13:
synchronous RocksDB and disk reads stalled every other request on the loop)."""

from __future__ import annotations

import threading

from api.client import BookieClient
from bookie.entry import DigestType, frame_entry, master_key
from tests.support.servers import running_bookie

KEY = master_key(b"off-the-loop")


def entry(entry_id: int) -> bytes:
    return frame_entry(12, entry_id, entry_id - 1, 5 * (entry_id + 1), b"bytes",
                       DigestType.CRC32C)


def _record_threads(storage, calls: list) -> None:
    """Note the thread of every storage read the add path may make; the reads still run."""
    for name in ("get_entry", "last_entry_id"):
        real = getattr(storage, name)

        def traced(*args, _real=real, _name=name):
            calls.append((_name, threading.current_thread()))
            return _real(*args)
        setattr(storage, name, traced)


async def test_first_touch_and_re_add_read_storage_on_the_executor(bookie_config):
    async with running_bookie(bookie_config) as running, BookieClient(running.url) as client:
        for entry_id in range(3):
            await client.add_entry(12, entry_id, entry(entry_id), KEY)
        await client.checkpoint()
    async with running_bookie(bookie_config) as running, BookieClient(running.url) as client:
        calls: list = []
        _record_threads(running.bookie.storage, calls)
        loop_thread = threading.current_thread()
        await client.add_entry(12, 3, entry(3), KEY)       # first touch since the restart
        await client.add_entry(12, 1, entry(1), KEY)       # a re-add: compared, stored copy
        await client.add_batch(12, [entry(2), entry(4)], KEY)
        names = {name for name, _ in calls}
        assert names == {"get_entry", "last_entry_id"}, calls
        assert [name for name, thread in calls if thread is loop_thread] == []
