"""The re-replication rate limit (api/cluster/autorecovery/throttle.py) on the simulator's
virtual-time loop: no burst at the start, at most one second of burst after an idle spell."""

from __future__ import annotations

import asyncio

from api.cluster.autorecovery.throttle import Throttle
from tests.support.simulation.loop import VirtualTimeLoop

MiB = 1 << 20


def _run(coroutine):
    loop = VirtualTimeLoop(deadline=3600)
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(coroutine)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def test_bytes_taken_never_run_ahead_of_the_rate():
    async def copy() -> list[tuple[float, int]]:
        loop, throttle, taken, seen = asyncio.get_running_loop(), Throttle(10 * MiB), 0, []
        began = loop.time()
        for _ in range(200):
            await throttle.take(MiB // 4)
            taken += MiB // 4
            seen.append((loop.time() - began, taken))
        return seen
    seen = _run(copy())
    # Each take may start once the bytes before it fit: taken - this take <= rate x elapsed.
    assert all(taken - MiB // 4 <= 10 * MiB * elapsed + 1 for elapsed, taken in seen)
    assert seen[-1][0] >= (50 * MiB - MiB // 4) / (10 * MiB)


def test_an_idle_spell_buys_at_most_one_second():
    async def copy() -> float:
        loop, throttle = asyncio.get_running_loop(), Throttle(MiB)
        await throttle.take(1)
        await asyncio.sleep(60)  # noqa: sleep-ok (virtual time: an idle minute)
        began = loop.time()
        for _ in range(3):
            await throttle.take(MiB)  # 1 s of bytes from the bucket, then 2 s of waiting
        return loop.time() - began
    assert 1.99 <= _run(copy()) <= 2.01


def test_rate_zero_is_unlimited():
    async def copy() -> float:
        loop, throttle = asyncio.get_running_loop(), Throttle(0)
        began = loop.time()
        for _ in range(1000):
            await throttle.take(MiB)
        return loop.time() - began
    assert _run(copy()) == 0
