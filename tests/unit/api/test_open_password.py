"""EN6 (api/client/ensemble.py): open_ledger with a wrong password is refused before any
bookie is asked, as BookKeeper's LedgerOpenOp refuses it; found by the simulator's intruder
(tests/support/simulation/intruder.py): the client opened, and recovered, a ledger with it."""

from __future__ import annotations

import asyncio
import random

import pytest

from api.client.ensemble import BookKeeper
from bookie.errors import Unauthorized
from tests.support.simulation.loop import VirtualTimeLoop
from tests.support.simulation.metadata import SimMetadataStore
from tests.support.simulation.network import SimNetwork, SimTransport
from tests.support.simulation.trace import Trace


def _run(scenario):
    loop = VirtualTimeLoop(deadline=600)
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(scenario())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


@pytest.mark.parametrize("closed", [False, True])
def test_a_wrong_password_neither_opens_nor_fences(closed):
    async def scenario():
        rng, trace = random.Random(1), Trace()
        net = SimNetwork(rng, trace)
        for bookie_id in ("b0", "b1", "b2"):
            net.add_bookie(bookie_id)
        store = SimMetadataStore(rng, trace)
        bk = BookKeeper(store, transport=SimTransport(net, "client"))
        writer = await bk.create_ledger(3, 2, 2, password=b"pw")
        await writer.append(b"one")
        if closed:
            await writer.close()
        with pytest.raises(Unauthorized):
            await bk.open_ledger(writer.ledger_id, b"not-pw")
        fenced = [b for b, bookie in net.bookies.items()
                  if bookie.memory.get(writer.ledger_id) and
                  bookie.memory[writer.ledger_id].fenced]
        reader = await bk.open_ledger(writer.ledger_id, b"pw")
        return fenced, (await reader.read_entry(0)).payload

    fenced, payload = _run(scenario)
    assert fenced == [] and payload == b"one"


def test_a_ledger_without_a_password_opens_with_any():
    async def scenario():
        rng, trace = random.Random(2), Trace()
        net = SimNetwork(rng, trace)
        for bookie_id in ("b0", "b1"):
            net.add_bookie(bookie_id)
        store = SimMetadataStore(rng, trace)
        bk = BookKeeper(store, transport=SimTransport(net, "client"))
        writer = await bk.create_ledger(2, 2, 2)
        await writer.append(b"x")
        await writer.close()
        return (await (await bk.open_ledger(writer.ledger_id, b"any")).read_entry(0)).payload

    assert _run(scenario) == b"x"
