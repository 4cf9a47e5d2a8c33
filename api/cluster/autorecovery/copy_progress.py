"""What a replication worker has copied, for its log and the bookie's /metrics (issue 54).

A fragment's copy (worker.py ``_copy``) runs inside ``CopyProgress``: while it goes, a line
at most every PROGRESS_LOG_INTERVAL_S (entries and bytes so far out of the fragment's, the
rate since it started), then one line when it is done; an operator watching a big ledger's
copy sees it move, and a stalled one (a throttle set too low) shows its rate. The counts go
to ``WorkerStats``, which api/server/metrics.py exports as ``bookie_autorecovery_*``
(``copies_in_progress`` a gauge, the rest counters)."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Callable

log = logging.getLogger("api.cluster.autorecovery")
#: At most one progress line a copy this often (a copy shorter than this logs only "done").
PROGRESS_LOG_INTERVAL_S = 5.0


@dataclasses.dataclass
class WorkerStats:
    ledgers_replicated: int = 0
    fragments_replaced: int = 0
    entries_copied: int = 0
    bytes_copied: int = 0
    failures: int = 0
    placement_moves: int = 0  # copies moved for the placement policy (PR1)
    copies_in_progress: int = 0  # fragment copies under way (0 or 1 a worker)


def size_text(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


class CopyProgress:
    """``with CopyProgress(stats, what, total) as progress: ... progress.copied(n, size)``;
    ``what`` names the copy in its lines ("ledger 7: A's fragment of segment 0 to B")."""

    def __init__(self, stats: WorkerStats, what: str, total_entries: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stats, self.what, self.total = stats, what, total_entries
        self.clock = clock
        self.entries = self.bytes = 0

    def __enter__(self) -> "CopyProgress":
        self.started = self.clock()
        self._next_line = self.started + PROGRESS_LOG_INTERVAL_S
        self.stats.copies_in_progress += 1
        return self

    def copied(self, entries: int, size: int) -> None:
        """``entries`` more (``size`` bytes) are durable on the target."""
        self.entries += entries
        self.bytes += size
        self.stats.entries_copied += entries
        self.stats.bytes_copied += size
        now = self.clock()
        if now >= self._next_line and self.entries < self.total:  # the last: "copied"
            self._next_line = now + PROGRESS_LOG_INTERVAL_S
            log.info("%s: copying, %d of %d entries, %s, %s/s", self.what, self.entries,
                     self.total, size_text(self.bytes), self._rate(now))

    def _rate(self, now: float) -> str:
        return size_text(self.bytes / max(now - self.started, 1e-3))

    def __exit__(self, kind, exc, traceback) -> None:
        self.stats.copies_in_progress -= 1
        now = self.clock()
        if exc is None:
            log.info("%s: copied %d entries, %s in %.1f s, %s/s", self.what, self.entries,
                     size_text(self.bytes), now - self.started, self._rate(now))
        else:  # the caller says why; this says how far it got
            log.info("%s: copy stopped after %d of %d entries (%s)", self.what, self.entries,
                     self.total, size_text(self.bytes))
