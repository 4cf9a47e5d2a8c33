"""RW10 (api/cluster/autorecovery/worker.py, issue 54): a cluster with no spare bookie keeps a
lost bookie's ledger under-replicated, its worker failing and backing off (1 s doubling to
60 s); a bookie added then is used at once, not once the back-off (here 32 s) runs out. Three
bookie daemons without autorecovery, one `bookie autorecovery` process (the only worker),
a real ZooKeeper."""

from __future__ import annotations

import asyncio
import time

from api.client.ensemble import BookKeeper
from api.cluster.underreplication import Underreplication
from tests.cluster.test_autorecovery import (FLAGS, PASSWORD, autorecovery_process,  # noqa: F401
                                             bookie_id, cleanup, start_bookies, wait_until)
from tests.support.servers import Daemon

FAILED = "re-replication of ledger %d failed"
#: Failures before the spare comes: the worker's next attempt would be 2**FAILURES s later.
FAILURES = 6
#: From the spare's start to the ledger being whole: far under the back-off left (32 s).
SOON_S = 15.0


async def test_a_bookie_added_takes_the_copies_at_once_whatever_the_back_off(
        tmp_path, zk_uri, cleanup):  # noqa: F811
    bookies = start_bookies(tmp_path, zk_uri, 3, "--autorecovery-daemon-enabled", "false")
    cleanup.extend(bookies)
    worker = autorecovery_process(tmp_path, zk_uri, "worker")
    cleanup.append(worker)
    log = tmp_path / "worker.log"
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=PASSWORD)
        await writer.append_many(b"entry %d" % i for i in range(5000))
        await writer.close()
        ur = Underreplication(bk.store.client, bk.store.root)
        bookies[0].kill9()  # every bookie is in the ensemble: no target for its copies

        async def failed_enough():
            return log.read_text().count(FAILED % writer.ledger_id) >= FAILURES
        await wait_until(failed_enough, f"{FAILURES} failed attempts (no spare)", 120)
        assert await asyncio.to_thread(ur.marker, writer.ledger_id) is not None
        started = time.monotonic()
        spare = Daemon(str(tmp_path / "spare" / "data"), *FLAGS, "--autorecovery-daemon-enabled",
                       "false", "--metadata-service-uri", zk_uri)
        cleanup.append(spare)
        spare.start()
        await wait_until(lambda: asyncio.to_thread(
            lambda: ur.marker(writer.ledger_id) is None), "the ledger whole again", SOON_S)
        assert time.monotonic() - started < SOON_S
        members = (await bk.store.read(writer.ledger_id)).ensembles[0][1]
        assert bookie_id(spare) in members and bookie_id(bookies[0]) not in members
