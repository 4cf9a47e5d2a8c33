"""What replay did (RP1 in bookie/recovery.py): files, counts, and every byte it did not apply.

Published before replay runs, so its counters are the replay's live progress (the daemon's
STATUS= line and ``/v1/bookie/info``).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Dropped:
    """Bytes replay did not apply (RP1)."""

    path: str
    offset: int
    bytes: int
    reason: str
    saved_as: str | None = None


@dataclasses.dataclass
class ReplayReport:
    mark_from: tuple[int, int] = (0, 0)
    mark_to: tuple[int, int] = (0, 0)
    files: list[str] = dataclasses.field(default_factory=list)
    records: int = 0
    adds: int = 0
    keys: int = 0
    fences: int = 0
    lacs: int = 0
    skipped: int = 0
    bytes: int = 0
    seconds: float = 0.0
    flushes: int = 0             # mid-replay flushes at the write cache's budget
    cache_peak_bytes: int = 0    # the most the write cache held during replay
    dropped: list[Dropped] = dataclasses.field(default_factory=list)
    conflicts: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)
