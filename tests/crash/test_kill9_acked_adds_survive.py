"""Crash model kill -9 (docs/design.md §2.2): a real daemon under concurrent load is SIGKILLed at a
seeded moment; after restart every acknowledged add reads back byte-identical, fenced ledgers
stay fenced, explicit LACs hold, and master keys still hold."""

from __future__ import annotations

import asyncio
import random

import pytest

from api.client import BookieClient
from bookie.entry import frame_entry, frame_lac, master_key
from bookie.errors import BookieError, Fenced, Unauthorized
from tests.support.servers import Daemon

KEY = master_key(b"kill9")
SMALL_ROLLS = ("--journal-max-bytes", "256KiB", "--entrylog-max-bytes", "128KiB",
               "--checkpoint-interval-ms", "50", "--journal-prealloc-bytes", "64KiB")


class Ledger:
    def __init__(self, ledger_id: int) -> None:
        self.ledger_id = ledger_id
        self.acked: dict[int, bytes] = {}
        self.next_entry = 0
        self.fenced = False
        self.explicit_lac = -1

    def frame(self, rng: random.Random) -> tuple[int, bytes]:
        entry_id = self.next_entry
        self.next_entry += 1
        payload = rng.randbytes(rng.randrange(1, 3000))
        return entry_id, frame_entry(self.ledger_id, entry_id, entry_id - 1, entry_id, payload)


async def _writer(client, ledger: Ledger, rng: random.Random, acks: asyncio.Queue) -> None:
    while True:
        entry_id, data = ledger.frame(rng)
        try:
            await client.add_entry(ledger.ledger_id, entry_id, data, KEY)
        except (BookieError, OSError, asyncio.TimeoutError, Exception):
            return  # the daemon died; this add was never acknowledged
        ledger.acked[entry_id] = data
        await acks.put(1)


async def _fencer(client, ledger: Ledger) -> None:
    try:
        await client.fence(ledger.ledger_id, KEY)
        ledger.fenced = True
    except Exception:
        pass


async def _lac_writer(client, ledger: Ledger) -> None:
    try:
        await client.write_lac(ledger.ledger_id, KEY, frame_lac(ledger.ledger_id, 0))
        ledger.explicit_lac = 0
    except Exception:
        pass


async def _load_until_killed(daemon: Daemon, ledgers: list[Ledger], rng: random.Random,
                             kill_after_acks: int) -> None:
    acks: asyncio.Queue = asyncio.Queue()
    async with BookieClient(daemon.url) as client:
        tasks = [asyncio.create_task(_writer(client, ledger, random.Random(rng.random()), acks))
                 for ledger in ledgers[:-1]]
        for _ in range(kill_after_acks):
            await asyncio.wait_for(acks.get(), 60)
            if rng.random() < 0.01:
                tasks.append(asyncio.create_task(_fencer(client, ledgers[-1])))
                tasks.append(asyncio.create_task(_lac_writer(client, ledgers[0])))
        daemon.kill9()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)


async def _check_after_restart(daemon: Daemon, ledgers: list[Ledger]) -> int:
    checked = 0
    async with BookieClient(daemon.url) as client:
        for ledger in ledgers:
            for entry_id, data in ledger.acked.items():
                assert await client.read_entry(ledger.ledger_id, entry_id) == data, \
                    f"acked entry {ledger.ledger_id}/{entry_id} changed after kill -9"
                checked += 1
            if ledger.acked:
                with pytest.raises(Unauthorized):
                    await client.add_entry(ledger.ledger_id, 10**9, frame_entry(
                        ledger.ledger_id, 10**9, -1, 0, b"x"), master_key(b"wrong"))
            if ledger.fenced:
                with pytest.raises(Fenced):
                    await client.add_entry(ledger.ledger_id, 0, frame_entry(
                        ledger.ledger_id, 0, -1, 0, b"late"), KEY)
            if ledger.explicit_lac >= 0:
                assert await client.read_lac(ledger.ledger_id) >= ledger.explicit_lac
    return checked


@pytest.mark.timeout(600)
async def test_every_acked_add_survives_kill9_under_load(tmp_path, seed):
    rng = random.Random(seed)
    data_dir = str(tmp_path / "data")
    ledgers: list[Ledger] = []
    total_checked = 0
    for round_no in range(4):
        base = round_no * 100
        round_ledgers = [Ledger(base + i) for i in range(8)]
        ledgers += round_ledgers
        daemon = Daemon(data_dir, *SMALL_ROLLS).start()
        await _load_until_killed(daemon, round_ledgers, rng, rng.randrange(50, 400))
        daemon = Daemon(data_dir, *SMALL_ROLLS).start()
        total_checked += await _check_after_restart(daemon, ledgers)
        assert daemon.terminate() == 0
    print(f"kill -9 rounds=4 acked_checked={total_checked}")
    assert total_checked > 0
