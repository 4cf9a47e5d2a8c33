"""A byte-rate limit (a token bucket) for re-replication: foreground adds keep their latency
while a lost bookie's data is copied (BookKeeper's replicationRateByBytes)."""

from __future__ import annotations

import asyncio
import time


class Throttle:
    """``await take(n)`` returns once ``n`` more bytes fit the rate. Rate 0: unlimited.
    The bucket holds at most one second of bytes, so an idle spell buys no burst longer
    than that. One event loop."""

    def __init__(self, rate_bytes_per_s: int) -> None:
        self.rate = rate_bytes_per_s
        self._tokens = 0.0  # no burst at the start: the average from then on stays at the rate
        self._at = time.monotonic()

    async def take(self, size: int) -> None:
        if self.rate <= 0:
            return
        now = time.monotonic()
        self._tokens = min(float(self.rate), self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= size
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.rate)  # noqa: sleep-ok (the rate limit)
