"""The client's retry policy and pipeline limits: what is re-sent, how often, how long apart.

A request is re-sent only where re-sending is safe: 503 (the bookie refused before storing)
and transport errors (it may or may not have been applied; a re-sent entry is byte-identical,
L1 in ``writer.py``, which the bookie accepts as the same entry).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Awaitable, Callable

import aiohttp

from api.client.bookie_client import BookieClient
from bookie.errors import BookieError, IOFailure, Unavailable

#: Failures after which a request may or may not have been applied: safe to re-send (L1).
TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError)


@dataclasses.dataclass(frozen=True)
class WriterOptions:
    """Pipeline limits. Every queue and batch is bounded (docs/design.md §10.1)."""

    batch_max_entries: int = 100          # queued adds sent as one POST batch; 1 = no batching
    batch_max_bytes: int = 4 * 1024 * 1024
    requests_in_flight_max: int = 8
    adds_in_flight_max: int = 2_000       # appended, not yet acknowledged: append waits
    adds_in_flight_bytes_max: int = 64 * 1024 * 1024
    # Acknowledged adds wait for earlier ones to complete in order (L2). They hold no bytes,
    # so they may outnumber the unacknowledged ones by this factor before append waits:
    # one slow request then stalls completions, not sending.
    unresolved_factor: int = 4
    retries_max: int = 10                 # per request, on 503 and transport errors
    retry_after_max_s: float = 5.0        # cap on the bookie's Retry-After and on backoff
    explicit_lac_interval_ms: int = 200   # idle time before an explicit LAC; 0 = never
    deferred_sync: bool = False           # BookKeeper's WriteFlag.DEFERRED_SYNC

    def __post_init__(self) -> None:
        for name in ("batch_max_entries", "batch_max_bytes", "requests_in_flight_max",
                     "adds_in_flight_max", "adds_in_flight_bytes_max", "unresolved_factor"):
            if getattr(self, name) < 1:
                raise ValueError(f"WriterOptions.{name} must be at least 1")
        if self.retries_max < 0 or self.retry_after_max_s < 0 \
                or self.explicit_lac_interval_ms < 0:
            raise ValueError("WriterOptions: retries and intervals cannot be negative")

def _backoff_s(exc: BaseException, attempt: int, cap_s: float) -> float:
    """The bookie's Retry-After for a 503; exponential from 50 ms for transport errors."""
    if isinstance(exc, Unavailable):
        return min(float(exc.retry_after_s), cap_s)
    return min(0.05 * 2 ** (attempt - 1), cap_s)

async def _retrying(call: Callable[[], Awaitable], options: WriterOptions,
                    stop: Callable[[], BaseException | None] = lambda: None):
    """``call()``, re-sent on 503 and transport errors (L1), at most ``retries_max`` times.

    ``stop`` is asked before each retry: an error it returns ends the retries (the writer
    failed elsewhere, L5). Other BookieErrors (fenced, refused) are never retried.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except (Unavailable, *TRANSPORT_ERRORS) as exc:
            attempt += 1
            if attempt > options.retries_max:
                if isinstance(exc, BookieError):
                    raise
                raise IOFailure(f"bookie unreachable after {attempt} attempts: {exc!r}") \
                    from exc
            stopped = stop()
            if stopped is not None:
                raise stopped from exc
            await asyncio.sleep(_backoff_s(exc, attempt, options.retry_after_max_s))

def _client_for(bookie: BookieClient | str) -> tuple[BookieClient, bool]:
    """A BookieClient and whether this library owns (and so closes) it."""
    if isinstance(bookie, BookieClient):
        return bookie, False
    return BookieClient(bookie), True
