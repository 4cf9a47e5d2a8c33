"""The daemon as operators run it: `python -m bookie serve` in a subprocess."""

from __future__ import annotations

import asyncio
import os
import time

from api.client import BookieClient
from bookie.entry import frame_entry, master_key
from tests.support.servers import Daemon

KEY = master_key(b"lifecycle")


async def test_sigterm_drains_checkpoints_and_exits_0_releasing_long_polls(tmp_path):
    data_dir = str(tmp_path / "data")
    daemon = Daemon(data_dir).start()
    async with BookieClient(daemon.url) as client:
        for i in range(20):
            await client.add_entry(1, i, frame_entry(1, i, i - 1, i, b"d" * 100), KEY)
        poll = asyncio.create_task(client.read_lac(1, wait_for_gt=100, timeout_ms=120_000))
        await _until_waiting(daemon.url)  # SIGTERM must find the poll inside the server
        info = await client.info()
        started = time.monotonic()
        daemon.proc.terminate()
        assert await asyncio.wait_for(poll, 60) == 18  # released, not timed out
        code = await asyncio.get_running_loop().run_in_executor(None, daemon.proc.wait, 60)
    assert code == 0
    assert time.monotonic() - started < 60
    assert info["state"] == "writable"
    restarted = Daemon(data_dir).start()
    async with BookieClient(restarted.url) as client:
        replay = (await client.info())["replay"]
        assert replay["adds"] == 0  # the shutdown checkpoint covered every add
        assert await client.read_entry(1, 19) == frame_entry(1, 19, 18, 19, b"d" * 100)
    assert restarted.terminate() == 0


async def _until_waiting(url: str) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        for _ in range(5000):  # bounded poll of the server's own gauge
            async with session.get(url + "/metrics") as reply:
                if "bookie_lac_waiters 1.0" in await reply.text():
                    return
            await asyncio.sleep(0.002)  # noqa: sleep-ok (bounded poll)
    raise AssertionError("the long poll never reached the server")


def test_a_refused_start_exits_1_naming_the_problem(tmp_path):
    data_dir = str(tmp_path / "data")
    daemon = Daemon(data_dir).start()
    assert daemon.terminate() == 0
    identity = os.path.join(data_dir, "ledgers", "current", "IDENTITY")
    with open(identity, "r+") as handle:
        text = handle.read().replace('"format": 1', '"format": 7')
        handle.seek(0)
        handle.write(text)
        handle.truncate()
    refused = Daemon(data_dir)
    try:
        refused.start()
    except RuntimeError:
        pass
    assert refused.proc.wait(60) == 1
    assert "format version 7, this bookie knows 1" in refused.log_text()
