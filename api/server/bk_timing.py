"""bookie_port's per-operation outcome and latency under BookKeeper's names
(bookie/op_stats.py, docs/operations.md §3.1): which of BookKeeper's request stats a
request counts in, and the two latencies it records.

Invariants:
    BT1. Every answer of an operation BookKeeper keeps request stats for is counted once
         in its X_REQUEST, success exactly when the answer is EOK; one that was begun is
         counted in its X too (a refusal before it was begun, BookKeeper's rejections,
         only in X_REQUEST).
    BT2. X_REQUEST runs from the arrival of the slice of bytes the request came in (one
         clock read a slice, bk_listener.py) to its answer; X from when it was begun. A
         refusal with no arrival time at hand counts 0 seconds.
    BT3. A READ_ENTRY is a fencing read when its FENCE_LEDGER flag is set, else a long
         poll when it carries previousLAC, else a read, as BookKeeper's
         ReadEntryProcessorV3 picks its stats; a v2 batch read counts as a read.
"""

from __future__ import annotations

from time import monotonic as now

_FENCE = 1  # ReadRequest.Flag.FENCE_LEDGER
#: v3 operations (besides READ_ENTRY) whose stats BookKeeper keeps under their own name.
_NAMED = frozenset(("READ_LAC", "WRITE_LAC", "FORCE_LEDGER", "GET_BOOKIE_INFO",
                    "GET_LIST_OF_ENTRIES_OF_LEDGER", "ADD_ENTRY"))


def v3_op(name: str | None, request) -> str | None:
    """BT3: the stats' base name of a v3 request named ``name``; None when none."""
    if name == "READ_ENTRY":
        if not request.HasField("readRequest"):
            return "READ_ENTRY"
        read = request.readRequest
        if read.HasField("flag") and read.flag == _FENCE:
            return "READ_ENTRY_FENCE"
        return "READ_ENTRY_LONG_POLL" if read.HasField("previousLAC") else "READ_ENTRY"
    return name if name in _NAMED else None


def v2_op(request) -> str:
    """BT3 for v2 reads and batch reads."""
    return "READ_ENTRY_FENCE" if request.fencing else "READ_ENTRY"


def answered(stats, op: str | None, ok: bool, arrived: float, begun: float) -> None:
    """BT1/BT2 for a request that was begun, answered now."""
    if op is None:
        return
    request, processing = stats.pair(op)
    at = now()
    request.record(ok, at - arrived)
    processing.record(ok, at - begun)


def refused(stats, op: str | None, arrived: float | None = None, count: int = 1) -> None:
    """BT1/BT2 for requests refused before they were begun (a bound, a bad version)."""
    if op is None:
        return
    request, _ = stats.pair(op)
    request.failed.observe(0.0 if arrived is None else now() - arrived, count)
