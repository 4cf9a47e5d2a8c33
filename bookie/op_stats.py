"""Per-operation outcome and latency, as Apache BookKeeper's OpStatsLogger keeps them
(docs/operations.md §3.1): for each operation a count, a sum and a latency distribution,
apart for successes and failures. ``api/server/metrics_bk.py`` renders them under
BookKeeper's names; this module is plain Python, like ``bookie/stats.py``.

Invariants:
    OS1. ``observe(seconds, n)`` is a few integer updates and one C bisect, whatever ``n``:
         a run of adds answered together is recorded once, weighted by its size, so the
         hot path pays per run, not per add.
    OS2. Quantiles are of a window: the observations since the rotation before last, which
         ``rotate`` makes at most every ``window_s`` (at scrape time). Between 1 and 2
         windows of data, as BookKeeper's Prometheus provider gives the last full minute
         (its rollover); before the first rotation, everything since start. No
         observation in the window: NaN, as BookKeeper.
    OS3. Counts and sums are since start and only grow (Prometheus counters).

Thread-safety: observations come from the loop (listeners) and the journal thread (the
journal's two); each ``observe`` is a handful of updates under the GIL and no lock, as
``bookie/stats.py``. A scrape racing one may see a count one ahead of its sum.
"""

from __future__ import annotations

import bisect
import math

#: Bucket bounds in seconds: 1 us to ~134 s, 8 a doubling (each ~9 % wider than the one
#: before). Quantiles interpolate inside a bucket, so their error stays within that step;
#: BookKeeper's sketch is exact to ~1 % of rank, which no dashboard threshold can tell.
BOUNDS = tuple(1e-6 * 2 ** (i / 8) for i in range(8 * 27 + 1))
#: BookKeeper's quantiles (PrometheusTextFormat.writeOpStat), in its order.
QUANTILES = (0.5, 0.75, 0.95, 0.99, 0.999, 0.9999, 1.0)
#: BookKeeper's default prometheusStatsLatencyRolloverSeconds.
WINDOW_S = 60.0

_bisect = bisect.bisect_left


class Latency:
    """Weighted counts by bucket (``counts[i]``: observations <= ``BOUNDS[i]``, the last
    one above every bound), their number and their sum in seconds (OS1, OS3)."""

    __slots__ = ("counts", "count", "sum", "since", "before")

    def __init__(self) -> None:
        self.counts = [0] * (len(BOUNDS) + 1)
        self.count = 0
        self.sum = 0.0
        # OS2: snapshots of counts at the last two rotations.
        self.since = self.before = None

    def observe(self, seconds: float, n: int = 1) -> None:
        self.counts[_bisect(BOUNDS, seconds)] += n
        self.count += n
        self.sum += seconds * n

    def rotate(self) -> None:
        self.before, self.since = self.since, list(self.counts)

    def quantiles(self, qs=QUANTILES) -> list[float]:
        """Seconds at each quantile of the window (OS2); NaN for each when it is empty."""
        window = self.counts if self.before is None else \
            [now - then for now, then in zip(self.counts, self.before)]
        total = sum(window)
        if total <= 0:
            return [math.nan] * len(qs)
        out, running, index = [], 0, 0
        for q in qs:
            rank = q * total
            while index < len(window) - 1 and running + window[index] < rank:
                running += window[index]
                index += 1
            out.append(_value_at(index, window[index], rank - running))
        return out


def _value_at(index: int, in_bucket: int, rank_in_bucket: float) -> float:
    """Linear interpolation inside bucket ``index``, as histogram_quantile does."""
    low = BOUNDS[index - 1] if index > 0 else 0.0
    high = BOUNDS[index] if index < len(BOUNDS) else BOUNDS[-1]
    if in_bucket <= 0 or index >= len(BOUNDS):
        return high
    return low + (high - low) * min(1.0, rank_in_bucket / in_bucket)


class OpStat:
    """One operation: ``ok`` and ``failed`` (BookKeeper's success="true" and "false")."""

    __slots__ = ("ok", "failed")

    def __init__(self) -> None:
        self.ok = Latency()
        self.failed = Latency()

    def record(self, success: bool, seconds: float, n: int = 1) -> None:
        (self.ok if success else self.failed).observe(seconds, n)


#: BookKeeper's request stats (RequestStats, scope bookkeeper_server): each operation as
#: the request (X_REQUEST: from its arrival to its answer) and its processing (X: from when
#: it was begun to its outcome), the names BookKeeper's dashboards query.
SERVER_OPS = ("ADD_ENTRY_REQUEST", "ADD_ENTRY",
              "READ_ENTRY_REQUEST", "READ_ENTRY",
              "READ_ENTRY_FENCE_REQUEST", "READ_ENTRY_FENCE_READ",
              "READ_ENTRY_LONG_POLL_REQUEST", "READ_ENTRY_LONG_POLL_READ",
              "WRITE_LAC_REQUEST", "WRITE_LAC", "READ_LAC_REQUEST", "READ_LAC",
              "FORCE_LEDGER_REQUEST", "FORCE_LEDGER",
              "GET_BOOKIE_INFO_REQUEST", "GET_BOOKIE_INFO",
              "GET_LIST_OF_ENTRIES_OF_LEDGER_REQUEST", "GET_LIST_OF_ENTRIES_OF_LEDGER")
#: BookKeeper's journal stats (JournalStats, scope bookie_journal).
JOURNAL_OPS = ("JOURNAL_ADD_ENTRY", "JOURNAL_SYNC")


class OpStats:
    """Every operation's ``OpStat`` as an attribute of its BookKeeper name, so the hot path
    reaches one with an attribute load (``stats.ops.ADD_ENTRY``)."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        for name in SERVER_OPS + JOURNAL_OPS:
            setattr(self, name, OpStat())
        # The fencing read's X is _FENCE_READ, the long poll's _LONG_POLL_READ, as
        # BookKeeper's ReadEntryProcessorV3 picks them.
        self.pairs = {}
        for request in SERVER_OPS[0::2]:
            name = request[:-len("_REQUEST")]
            self.pairs[name] = (getattr(self, request), getattr(self, SERVER_OPS[
                SERVER_OPS.index(request) + 1]))
        self.window_s = window_s
        self.rotated_at: float | None = None

    def get(self, name: str) -> OpStat:
        return getattr(self, name)

    def pair(self, name: str) -> tuple[OpStat, OpStat]:
        """(X_REQUEST, X) of server operation ``name`` (the names without _REQUEST)."""
        return self.pairs[name]

    def rotate_if_due(self, now: float) -> None:
        """OS2, at scrape time: every listener's scrape sees the same windows."""
        if self.rotated_at is None:
            self.rotated_at = now
            return
        if now - self.rotated_at < self.window_s:
            return
        self.rotated_at = now
        for name in SERVER_OPS + JOURNAL_OPS:
            stat = getattr(self, name)
            stat.ok.rotate()
            stat.failed.rotate()
