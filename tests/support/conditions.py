"""Waiting for a condition in an asyncio test: the event loop runs meanwhile, and the test
fails with the condition named when it does not hold in time (never a fixed sleep)."""

from __future__ import annotations

import asyncio
import time


async def until(predicate, what: str, timeout_s: float = 10.0) -> None:
    """Return once ``predicate()`` is true; AssertionError naming ``what`` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.005)  # noqa: sleep-ok (a bounded poll of the condition)
