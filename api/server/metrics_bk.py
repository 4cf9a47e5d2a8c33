"""BookKeeper's metric names, beside ours (docs/operations.md §3.1): the per-operation
stats of bookie/op_stats.py as Apache BookKeeper's Prometheus provider renders an
OpStatsLogger, so that BookKeeper's dashboards and alerts query this bookie unchanged.

    bookkeeper_server_<OP>{success="true|false",quantile="0.5|...|1.0"}  summary, ms
    bookkeeper_server_<OP>_count{success} / _sum{success}              (sum in ms)
    bookie_journal_JOURNAL_ADD_ENTRY / _JOURNAL_SYNC{journalIndex="0",...}  summary, ms
    bookie_journal_JOURNAL_QUEUE_SIZE{journalIndex="0"}                 counter, records
                                                    (metrics_bk_bookie.py's BkCounter)

Invariants:
    MB1. As BookKeeper's PrometheusTextFormat.writeOpStat: type summary; both success
         values always present, each with quantiles 0.5, 0.75, 0.95, 0.99, 0.999, 0.9999,
         1.0 (NaN over an empty window), then _count and _sum; latencies in milliseconds.
    MB2. Both listeners count in the same series (BookKeeper's bookie has one): bookie_port
         by api/server/bk_timing.py, HTTP here (``observe_http``), where an answer below
         400 is a success and the route's one timing is both X_REQUEST and X.
    MB3. Ours are unchanged: this collector only adds families.

BookKeeper's counters have no _total suffix (JOURNAL_QUEUE_SIZE is one there, moved up and
down); prometheus_client would add it, so metrics_bk_bookie.py writes them (its MK1).
"""

from __future__ import annotations

import math
import time

from aiohttp import web
from prometheus_client.core import Metric

from bookie.op_stats import JOURNAL_OPS, QUANTILES, SERVER_OPS

_QUANTILE_TEXT = tuple(repr(q) for q in QUANTILES)  # "0.5" ... "1.0", BookKeeper's spelling
#: BookKeeper's label of the journal's stats (Journal.java's scopeLabel): one journal here.
JOURNAL_LABELS = {"journalIndex": "0"}

#: MB2: HTTP routes (their handlers' names) and the BookKeeper operation each counts as.
#: A read of a range is one READ_ENTRY request, as BookKeeper counts a batch read.
HTTP_OPS = {"add_entry": "ADD_ENTRY", "add_batch": "ADD_ENTRY", "read_entry": "READ_ENTRY",
            "read_range": "READ_ENTRY", "fence": "READ_ENTRY_FENCE", "read_lac": "READ_LAC",
            "write_lac": "WRITE_LAC", "force": "FORCE_LEDGER",
            "entry_id_ranges": "GET_LIST_OF_ENTRIES_OF_LEDGER"}
#: Set by the add_batch route: how many entries the batch added.
BATCH_ENTRIES = web.RequestKey("bk_batch_entries", int)


def observe_http(stats, request, op: str, status: int, seconds: float) -> None:
    """MB2 for one HTTP answer of route ``op`` (error_middleware's timing). A batch add
    counts its entries when it succeeded (``add_batch`` tells how many, ``BATCH_ENTRIES``)."""
    name = HTTP_OPS.get(op)
    if name is None:
        return
    count = 1
    if name == "READ_LAC" and "wait_for_gt" in request.query:
        name = "READ_ENTRY_LONG_POLL"  # BookKeeper's long poll is a READ_ENTRY
    elif op == "add_batch":
        count = request.get(BATCH_ENTRIES, 1)
    ok = status < 400
    request_stat, processing = stats.ops.pair(name)
    request_stat.record(ok, seconds, count)
    processing.record(ok, seconds, count)


def _summary(name: str, doc: str, stat, labels: dict) -> Metric:
    """MB1: one OpStat as BookKeeper writes it."""
    family = Metric(name, doc, "summary")
    for success, latency in (("false", stat.failed), ("true", stat.ok)):
        for text, value in zip(_QUANTILE_TEXT, latency.quantiles()):
            family.add_sample(name, {"success": success, "quantile": text, **labels},
                              value * 1000.0 if not math.isnan(value) else value)
        family.add_sample(name + "_count", {"success": success, **labels}, latency.count)
        family.add_sample(name + "_sum", {"success": success, **labels}, latency.sum * 1000.0)
    return family


class BookKeeperCollector:
    """MB1-MB3 over one bookie's ``stats.ops`` and journal."""

    def __init__(self, bookie) -> None:
        self.bookie = bookie

    def collect(self):
        ops = self.bookie.stats.ops
        ops.rotate_if_due(time.monotonic())
        for name in SERVER_OPS:
            yield _summary(f"bookkeeper_server_{name}", f"BookKeeper's {name} (ms)",
                           ops.get(name), {})
        for name in JOURNAL_OPS:
            yield _summary(f"bookie_journal_{name}", f"BookKeeper's {name} (ms)",
                           ops.get(name), JOURNAL_LABELS)
        # JOURNAL_QUEUE_SIZE, a counter there: metrics_bk_bookie.py writes BookKeeper's.
