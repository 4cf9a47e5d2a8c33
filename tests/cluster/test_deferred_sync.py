"""Deferred sync on a replicated ledger (issue 55 item 2; api/client/ensemble_writer.py DS4),
on real bookies and ZooKeeper, over HTTP and over BookKeeper's protocol: adds complete
before they are durable, the LAC moves only by force(), which asks every bookie of the
ensemble, and close forces first."""

from __future__ import annotations

import re
import urllib.request

import pytest

from api.client import BookKeeper, IOFailure
from api.client.metadata import MetadataState


def force_calls(daemon) -> int:
    with urllib.request.urlopen(daemon.url + "/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(r'^bookkeeper_server_FORCE_LEDGER_count\{success="true"\} (\S+)', text,
                      re.M)
    return int(float(found.group(1))) if found else 0


@pytest.mark.parametrize("protocol", ["http", "bk"])
async def test_deferred_sync_adds_wait_for_force_to_be_confirmed(start_bookies, zk_uri,
                                                                  protocol):
    daemons = start_bookies(3, "--bookie-port", "0")
    async with await BookKeeper.connect(zk_uri, protocol=protocol) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=b"pw", deferred_sync=True)
        assert await writer.append_many([b"e%d" % i for i in range(10)]) == range(10)
        assert (writer.pushed, writer.lac) == (9, -1)   # acknowledged, not yet durable
        reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)
        assert await reader.read_last_add_confirmed() == -1   # nothing confirmed to readers
        assert len(await reader.read_unconfirmed(0, 9)) == 10

        assert await writer.force() == 9 and writer.lac == 9
        if protocol == "bk":   # every bookie of the ensemble was asked, over FORCE_LEDGER
            assert [force_calls(d) for d in daemons] == [1, 1, 1]
        await writer.append(b"e10")                     # carries LAC 9 to its bookies,
        # which count it once entry 10 is synced (N4 in bookie/node/writes.py): the force
        assert await writer.force() == 10
        assert await reader.read_last_add_confirmed() == 9
        await writer.append(b"e11")
        assert await writer.close() == 11               # forced first (DS4)
        metadata = await bk.store.read(writer.ledger_id)
        assert (metadata.state, metadata.last_entry_id) == (MetadataState.CLOSED, 11)


async def test_a_deferred_sync_writer_fails_rather_than_change_its_ensemble(start_bookies,
                                                                            zk_uri):
    daemons = start_bookies(4)
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(3, 3, 2, password=b"pw", deferred_sync=True)
        await writer.append(b"first")
        victim = next(d for d in daemons if d.url.endswith(writer.ensemble[0]))
        victim.kill9()
        with pytest.raises(IOFailure, match="deferred-sync"):
            for i in range(50):   # some add reaches the dead bookie and fails the writer
                await writer.append(b"x%d" % i)
        metadata = await bk.store.read(writer.ledger_id)
        assert metadata.ensembles == ((0, writer.ensemble),)   # no ensemble change
