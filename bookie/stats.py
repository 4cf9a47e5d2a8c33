"""Counters and histograms the node keeps; ``api/server/metrics.py`` exposes them to Prometheus.

Plain Python objects, not Prometheus ones, so the core does not depend on a metrics library
or on a process-wide registry (several bookies in one test process each keep their own).

Thread-safety: observations come from the loop, the journal thread and the checkpoint thread.
Each ``observe`` is a few integer updates under the GIL; a scrape racing an observation may
see a count one ahead of its sum, which Prometheus tolerates. No lock on the hot path.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading

from bookie.op_stats import OpStats

LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                     0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
COUNT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
BYTES_BUCKETS = (1024, 4096, 16384, 65536, 262144, 524288, 1048576, 4194304, 16777216)


class Histogram:
    """Cumulative-bucket histogram: ``counts[i]`` observations <= ``buckets[i]``, then +Inf."""

    __slots__ = ("buckets", "counts", "sum", "count")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """(upper bound, cumulative count) pairs, ending with ("+Inf", count)."""
        out, running = [], 0
        for bound, count in zip(self.buckets, self.counts):
            running += count
            out.append((repr(float(bound)), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out


class HistogramFamily:
    """Histograms by label values, created on first use."""

    def __init__(self, labels: tuple[str, ...], buckets: tuple[float, ...]) -> None:
        self.labels = labels
        self.buckets = buckets
        self.children: dict[tuple[str, ...], Histogram] = {}

    def labelled(self, *values: str) -> Histogram:
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = Histogram(self.buckets)
        return child


@dataclasses.dataclass
class ReplayProgress:
    files_total: int = 0
    files_done: int = 0
    bytes_done: int = 0
    records: int = 0


@dataclasses.dataclass
class GcCounters:
    """Totals since start of garbage collection and compaction (checkpoint thread)."""

    runs: int = 0
    logs_deleted: int = 0
    bytes_reclaimed_deletion: int = 0
    logs_compacted: int = 0
    bytes_reclaimed_compaction: int = 0
    entries_moved: int = 0
    bytes_written_compaction: int = 0
    ledgers_index_cleaned: int = 0
    ledgers_settled: int = 0
    logs_quarantined: int = 0
    problems: int = 0
    last_run_s: float = 0.0
    last_run_finished_at: float = 0.0   # wall clock, seconds since the epoch

    def to_json(self) -> dict:
        return {"runs": self.runs, "logsDeleted": self.logs_deleted,
                "bytesReclaimedByDeletion": self.bytes_reclaimed_deletion,
                "logsCompacted": self.logs_compacted,
                "bytesReclaimedByCompaction": self.bytes_reclaimed_compaction,
                "entriesMoved": self.entries_moved,
                "bytesWrittenByCompaction": self.bytes_written_compaction,
                "ledgersIndexCleaned": self.ledgers_index_cleaned,
                "logsQuarantined": self.logs_quarantined, "problems": self.problems}


class Stats:
    def __init__(self) -> None:
        self.requests = HistogramFamily(("op", "code"), LATENCY_BUCKETS_S)
        self.journal_fsync = Histogram(LATENCY_BUCKETS_S)
        self.group_entries = Histogram(COUNT_BUCKETS)
        self.group_bytes = Histogram(BYTES_BUCKETS)
        self.flushes: dict[str, int] = {}
        # Entry bytes taken into the write cache by adds and answered to reads (loop only),
        # BookKeeper's WRITE_BYTES and READ_BYTES (api/server/metrics_bk_bookie.py).
        self.write_bytes = 0
        self.read_bytes = 0
        self.checkpoint_phases = HistogramFamily(("phase",), LATENCY_BUCKETS_S)
        self.checkpoints = 0
        self.replay = ReplayProgress()
        self.lac_waiters = 0
        self.gc = GcCounters()
        # Non-EOK answers by label values, counted by api/server/refusals.py: BookKeeper's
        # protocol (op, status) and HTTP (op, code, error).
        self.bk_refused: dict[tuple[str, str], int] = {}
        self.http_refused: dict[tuple[str, str, str], int] = {}
        # The BookKeeper-protocol port's budget (api/server/bk_budget.py), once it listens.
        self.bk_port_budget = None
        # Per-operation outcome and latency under BookKeeper's names, both listeners and
        # the journal (bookie/op_stats.py; rendered by api/server/metrics_bk.py).
        self.ops = OpStats()
        #: The journal hooks run on every journal dir's thread (docs/design.md §3.8): one at
        #: a time, so that no count is lost between two threads' read-modify-writes.
        self._journal_lock = threading.Lock()

    def on_journal_flush(self, reason, count: int, size: int, sync_s: float) -> None:
        """The journal's ``on_flush`` hook (a journal thread)."""
        with self._journal_lock:
            self._journal_flush(reason, count, size, sync_s)

    def _journal_flush(self, reason, count: int, size: int, sync_s: float) -> None:
        self.journal_fsync.observe(sync_s)
        if size:  # a group of FORCE markers alone writes and syncs nothing
            self.ops.JOURNAL_SYNC.ok.observe(sync_s)
        self.group_entries.observe(count)
        self.group_bytes.observe(size)
        name = getattr(reason, "name", str(reason)).lower()
        self.flushes[name] = self.flushes.get(name, 0) + 1

    def on_journal_group(self, count: int, seconds: float, ok: bool) -> None:
        """The journal's ``on_group_done`` hook (journal thread): ``count`` records made
        durable (or failed) ``seconds`` after the journal thread took the group's first."""
        with self._journal_lock:
            self.ops.JOURNAL_ADD_ENTRY.record(ok, seconds, count)

    def on_checkpoint(self, phases: dict[str, float]) -> None:
        self.checkpoints += 1
        for phase, seconds in phases.items():
            self.checkpoint_phases.labelled(phase).observe(seconds)
