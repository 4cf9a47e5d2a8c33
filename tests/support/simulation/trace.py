"""The simulator's trace: what happened, when, in one list, for a violation's report.

Events are kept as (virtual time, text). Two runs of one seed must give equal traces: the
determinism test compares them, so no event may carry an object id, a wall-clock time or the
iteration order of a set of strings (Python randomizes string hashes per process).
"""

from __future__ import annotations

import asyncio


class Trace:
    def __init__(self) -> None:
        self.events: list[tuple[float, str]] = []

    def __call__(self, text: str) -> None:
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:
            now = -1.0
        self.events.append((now, text))

    def lines(self) -> list[str]:
        return [f"t={at:.3f} {text}" for at, text in self.events]

    def text(self) -> str:
        return "\n".join(self.lines())
