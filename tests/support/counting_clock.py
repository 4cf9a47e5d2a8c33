"""A clock a test moves by hand, counting its reads, so a test knows a thread has looked at it.

``wait_reads(n)`` waits (bounded) until the clock was read ``n`` times: the synchronisation
point the journal tests use instead of sleeping (docs/design.md §9).
"""

from __future__ import annotations

import threading

WAIT_S = 10.0  # bounds a failure; never a synchronisation


class CountingClock:
    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.reads = 0
        self.cond = threading.Condition()

    def __call__(self) -> float:
        with self.cond:
            self.reads += 1
            self.cond.notify_all()
            return self.now

    def wait_reads(self, count: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.reads >= count, WAIT_S)
