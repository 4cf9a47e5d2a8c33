"""A byte-rate limit (a token bucket) for re-replication: foreground adds keep their latency
while a lost bookie's data is copied (BookKeeper's replicationRateByBytes)."""

from __future__ import annotations

import asyncio


class Throttle:
    """``await take(n)`` returns once ``n`` more bytes fit the rate. Rate 0: unlimited.

    The bucket starts empty (no burst at the start: from the first take on, the bytes taken
    stay at or under rate x elapsed) and holds at most one second of bytes, so an idle spell
    buys no burst longer than that. Time is the running loop's clock (monotonic; virtual
    under the simulator). One event loop."""

    def __init__(self, rate_bytes_per_s: int) -> None:
        self.rate = rate_bytes_per_s
        self._tokens = 0.0
        self._at: float | None = None

    async def take(self, size: int) -> None:
        if self.rate <= 0:
            return
        now = asyncio.get_running_loop().time()
        if self._at is not None:
            self._tokens = min(float(self.rate), self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= size
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.rate)  # noqa: sleep-ok (the rate limit)
