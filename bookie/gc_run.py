"""One garbage collection run's state and result, kept between its steps (bookie/gc.py)."""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bookie.compaction import LogCompaction


@dataclasses.dataclass
class GcResult:
    compaction: str | None = None        # "minor", "major" or None (not due, off, suspended)
    compaction_skipped: str | None = None
    logs_scanned: int = 0
    logs_deleted: list[int] = dataclasses.field(default_factory=list)
    bytes_reclaimed_deletion: int = 0
    logs_compacted: list[int] = dataclasses.field(default_factory=list)
    bytes_reclaimed_compaction: int = 0
    entries_moved: int = 0
    bytes_written_compaction: int = 0
    ledgers_index_cleaned: int = 0
    ledgers_settled: int = 0             # tombstoned ledgers phase 1 made dead (G1)
    # Phase 2's rolled logs with live bytes, as BookKeeper's ACTIVE_ENTRY_LOG_* gauges.
    logs_live: int = 0
    log_bytes_live: int = 0
    log_bytes_total: int = 0
    quarantined: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    finished_at: float = 0.0
    dirs: list | None = None             # several ledger dirs: each dir's result, in order

    @property
    def bytes_reclaimed(self) -> int:
        return self.bytes_reclaimed_deletion + self.bytes_reclaimed_compaction

    def to_json(self) -> dict:
        return {"logsScanned": self.logs_scanned, "logsDeleted": self.logs_deleted,
                "bytesReclaimed": self.bytes_reclaimed,
                "bytesReclaimedByDeletion": self.bytes_reclaimed_deletion,
                "compaction": self.compaction, "compactionSkipped": self.compaction_skipped,
                "logsCompacted": self.logs_compacted,
                "bytesReclaimedByCompaction": self.bytes_reclaimed_compaction,
                "entriesMoved": self.entries_moved,
                "bytesWrittenByCompaction": self.bytes_written_compaction,
                "ledgersIndexCleaned": self.ledgers_index_cleaned,
                "quarantined": self.quarantined, "problems": self.problems,
                "seconds": round(self.seconds, 6), "finishedAt": round(self.finished_at, 3),
                **({"ledgerDirs": [d.to_json() for d in self.dirs]} if self.dirs else {})}


def count_run(counters, result: GcResult) -> None:
    """A finished run into the GC totals (bookie/stats.py GcCounters)."""
    counters.runs += 1
    counters.logs_deleted += len(result.logs_deleted)
    counters.bytes_reclaimed_deletion += result.bytes_reclaimed_deletion
    counters.logs_compacted += len(result.logs_compacted)
    counters.bytes_reclaimed_compaction += result.bytes_reclaimed_compaction
    counters.entries_moved += result.entries_moved
    counters.bytes_written_compaction += result.bytes_written_compaction
    counters.ledgers_index_cleaned += result.ledgers_index_cleaned
    counters.ledgers_settled += result.ledgers_settled
    counters.logs_quarantined += len(result.quarantined)
    counters.problems += len(result.problems)
    counters.last_run_s = result.seconds
    counters.last_run_finished_at = result.finished_at


def merge_results(results: list[GcResult]) -> GcResult:
    """The runs of several ledger dirs as one run (bookie/gc_dirs.py). Log ids are per
    dir, so the lists are by dir, in dir order; ``dirs`` keeps each dir's own result."""
    merged = GcResult(compaction=results[0].compaction,
                      compaction_skipped=results[0].compaction_skipped)
    for result in results:
        for name in ("logs_scanned", "bytes_reclaimed_deletion", "bytes_reclaimed_compaction",
                     "entries_moved", "bytes_written_compaction", "ledgers_index_cleaned",
                     "ledgers_settled", "logs_live", "log_bytes_live", "log_bytes_total",
                     "seconds"):
            setattr(merged, name, getattr(merged, name) + getattr(result, name))
        for name in ("logs_deleted", "logs_compacted", "quarantined", "problems"):
            getattr(merged, name).extend(getattr(result, name))
        merged.finished_at = max(merged.finished_at, result.finished_at)
    merged.dirs = results
    return merged


@dataclasses.dataclass(frozen=True)
class LogMeta:
    """What a rolled log holds (G3): bytes per ledger (Σ size + 4) and its file size."""

    totals: dict[int, int]
    size: int


class RunPhase(enum.Enum):
    INDEX = "index"
    LOGS = "logs"
    COMPACT = "compact"
    DONE = "done"


class GcRun:
    """The state of one run between its steps."""

    def __init__(self, compaction: str | None, threshold: float, forced: bool,
                 started: float) -> None:
        self.phase = RunPhase.INDEX
        self.threshold = threshold
        self.forced = forced
        self.started = started
        self.result = GcResult(compaction=compaction)
        self.fresh: list[int] | None = None          # tombstones phase 1 has yet to settle
        self.to_examine: list[int] = []
        self.usage: dict[int, tuple[int, int]] = {}   # log id -> (live bytes, total bytes)
        self.candidates: list[int] = []
        self.current: LogCompaction | None = None

    def progress_json(self) -> dict:
        current = self.current
        return {"phase": self.phase.value, "compaction": self.result.compaction,
                "logsLeft": len(self.to_examine) + len(self.candidates),
                "compacting": None if current is None else {
                    "logId": current.log_id, "step": current.phase.value,
                    "entriesCopied": current.entries_copied, "bytesRead": current.bytes_read}}
