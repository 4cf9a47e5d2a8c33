"""GET /metrics: the bookie's stats in Prometheus text format, with Prometheus names.

A custom collector reads ``bookie.stats`` and the node's state at scrape time, into a
registry of this app's own (so several bookies in one process never share metrics).

    bookie_request_seconds{op,code}                 histogram, per route and status
    bookie_http_requests_refused_total{op,code,error}  counter, error answers by route,
                                                    HTTP status and error code (EUA, ...)
    bookie_bk_requests_refused_total{op,status}     counter, non-EOK answers on bookie_port
                                                    by BookKeeper operation (ADD_ENTRY, ...)
                                                    and status name (EFENCED, ...); a frame
                                                    closing the connection is FRAME CLOSED
    bookie_journal_fsync_seconds                    histogram
    bookie_journal_group_entries / _group_bytes     histograms, per flush
    bookie_journal_flush_total{reason}              counter
    bookie_journal_queue_records / _queue_bytes     gauges
    bookie_writable                                 gauge, 1 when WRITABLE
    bookie_read_only{reason}                        gauge
    bookie_disk_free_bytes{dir} / _disk_used_ratio  gauges
    bookie_checkpoint_seconds{phase}                histogram
    bookie_checkpoint_total                         counter
    bookie_replay_records / _bytes / _files         gauges of the last replay
    bookie_lac_waiters                              gauge
    bookie_zk_registered                            gauge, 1 while registered in ZooKeeper
                                                    (a cluster bookie: metadata_service_uri)
    bookie_autorecovery_underreplicated_ledgers     gauge, ledgers marked under-replicated
    bookie_autorecovery_auditor                     gauge, 1 while this bookie audits
    bookie_autorecovery_{ledgers_replicated,fragments_replaced,entries_copied,bytes_copied,
                         failures,placement_moves}_total  counters of this bookie's worker
    bookie_autorecovery_copies_in_progress          gauge, its fragment copies under way
    bookie_placement_{not_adhering,refused}_total{caller}  counters (docs/cluster.md §6)
    bookie_autorecovery_placement_{not_adhering,softly_adhering}_ledgers  gauges, the
                                                    auditor's last placement check
                                                    in ZooKeeper (cluster; refreshed every 2 s)
    bookie_gc_running / _suspended                  gauges, 1 while a run goes / suspended
    bookie_gc_runs_total                            counter
    bookie_gc_reclaimed_bytes_total{how}            counter, how = deletion | compaction
    bookie_gc_logs_deleted_total / _logs_compacted_total / _logs_quarantined_total  counters
    bookie_gc_entries_moved_total / _compaction_written_bytes_total                 counters
    bookie_gc_index_ledgers_cleaned_total / _problems_total                         counters
    bookie_gc_last_run_seconds / _last_run_timestamp_seconds                        gauges
    (operations, for deploy/grafana and deploy/prometheus)
    bookie_write_cache_bytes / _write_cache_max_bytes    gauges: fill and budget
    bookie_checkpoint_last_timestamp_seconds             gauge, wall clock of the last one
    bookie_checkpoint_interval_seconds                   gauge, the configured period
    bookie_checkpoint_lag_bytes                          gauge, journal bytes past lastMark
    bookie_journal_disk_bytes / _entrylog_disk_bytes     gauges, bytes of *.txn / *.log
    bookie_disk_warn_ratio / _disk_full_ratio            gauges, the configured thresholds
    (BookKeeper's own names, beside these: api/server/metrics_bk.py, metrics_bk_bookie.py)
    bookkeeper_server_<OP>, bookie_journal_JOURNAL_*     summaries by success, in ms
    bookie_SERVER_STATUS, bookie_WRITE_BYTES, ...        its bookie's, GC's and dirs'
"""

from __future__ import annotations


from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, \
    HistogramMetricFamily

from api.server.keys import BOOKIE
from api.server.metrics_bk import BookKeeperCollector, observe_http
from api.server.metrics_bk_bookie import BookieBkCollector, \
    generate_latest  # noqa: F401 (re-exported: BookKeeper's counters, MK1)
from bookie.disk_monitor import files_bytes
from bookie.stats import Histogram

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _placement(service):
    """PP3's process-wide counts by caller (api/client/placement.py, reached through the
    service: this room imports no client module), and the auditor's last placement check."""
    counts = service.placement_counts
    for name, by_caller, doc in (
            ("not_adhering", counts.not_adhering, "placements made though a write set "
             "breaks the policy (not strict), by caller"),
            ("refused", counts.refused, "placements refused: strict, and no choice meets "
             "the policy, by caller")):
        family = CounterMetricFamily(f"bookie_placement_{name}", doc, labels=["caller"])
        for caller in counts.CALLERS:
            family.add_metric([caller], by_caller[caller])
        yield family
    report = service.auditor.placement_report if service.auditor is not None else None
    if report is not None and service.elected:
        for name, value in (("not_adhering", report.not_adhering),
                            ("softly_adhering", report.softly_adhering)):
            yield GaugeMetricFamily(f"bookie_autorecovery_placement_{name}_ledgers",
                                    f"closed ledgers {name.replace('_', ' ')} to the "
                                    f"placement policy at the auditor's last check",
                                    value=value)


def _histogram(name: str, doc: str, labels=(), children=None) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    for values, hist in (children or {}).items():
        family.add_metric(list(values), hist.cumulative(), hist.sum)
    return family


def _single(name: str, doc: str, hist: Histogram) -> HistogramMetricFamily:
    return _histogram(name, doc, (), {(): hist})


class BookieCollector:
    def __init__(self, bookie) -> None:
        self.bookie = bookie

    def collect(self):
        yield from self._journal()
        yield from self._state()
        yield from self._checkpoints()
        yield from self._gc()
        yield from self._operations()
        yield from self._refusals()
        yield from self._port_budget()

    def _journal(self):
        stats = self.bookie.stats
        yield _histogram("bookie_request_seconds", "HTTP request latency by route and status",
                         ("op", "code"), stats.requests.children)
        yield _single("bookie_journal_fsync_seconds", "journal fdatasync latency",
                      stats.journal_fsync)
        yield _single("bookie_journal_group_entries", "records per group commit",
                      stats.group_entries)
        yield _single("bookie_journal_group_bytes", "bytes per group commit", stats.group_bytes)
        flushes = CounterMetricFamily("bookie_journal_flush", "group flushes by reason",
                                      labels=["reason"])
        for reason, count in sorted(stats.flushes.items()):
            flushes.add_metric([reason], count)
        yield flushes
        yield GaugeMetricFamily("bookie_journal_queue_records", "records queued, not synced",
                                value=self.bookie.journal_queued_records)
        yield GaugeMetricFamily("bookie_journal_queue_bytes", "bytes queued, not synced",
                                value=self.bookie.journal_queued_bytes)

    def _state(self):
        bookie = self.bookie
        yield GaugeMetricFamily("bookie_writable", "1 while the bookie accepts writes",
                                value=1 if bookie.ready else 0)
        read_only = GaugeMetricFamily("bookie_read_only", "read-only reasons in force",
                                      labels=["reason"])
        for reason in ("full", "operator", "io"):
            read_only.add_metric([reason], 1 if reason in bookie.readonly_reasons else 0)
        yield read_only
        free = GaugeMetricFamily("bookie_disk_free_bytes", "free bytes", labels=["dir"])
        used = GaugeMetricFamily("bookie_disk_used_ratio", "used fraction", labels=["dir"])
        for name, usage in bookie.disk_monitor.usage.items():
            free.add_metric([name], usage.free_bytes)
            used.add_metric([name], usage.used_ratio)
        yield free
        yield used
        placement = bookie.storage.placement
        yield GaugeMetricFamily("bookie_ledger_dirs_full", "ledger dirs full, taking no new "
                                "ledgers (docs/design.md §3.8)", value=len(placement.full))
        yield CounterMetricFamily("bookie_ledgers_placed_off_full", "new ledgers placed in "
                                  "another dir than ledgerId mod count, theirs being full",
                                  value=placement.moved_by_full)
        yield GaugeMetricFamily("bookie_lac_waiters", "LAC long polls waiting",
                                value=bookie._lac_waiters)
        if bookie.config.metadata_service_uri:
            yield GaugeMetricFamily("bookie_zk_registered", "1 while registered in ZooKeeper",
                                    value=int(bookie.registration is not None))
            if bookie.underreplicated_ledgers is not None:
                yield GaugeMetricFamily(
                    "bookie_autorecovery_underreplicated_ledgers",
                    "ledgers marked under-replicated in ZooKeeper (BookKeeper's layout)",
                    value=bookie.underreplicated_ledgers)
            service = getattr(bookie, "autorecovery", None)
            if service is not None:
                yield GaugeMetricFamily("bookie_autorecovery_auditor",
                                        "1 while this bookie's autorecovery is the auditor",
                                        value=int(service.elected))
                stats = service.worker.stats if service.worker is not None else None
                for name, doc in (("ledgers_replicated", "ledgers this worker made whole"),
                                  ("fragments_replaced", "fragments copied and replaced"),
                                  ("entries_copied", "entries copied to new bookies"),
                                  ("bytes_copied", "bytes copied to new bookies"),
                                  ("failures", "failed re-replication attempts"),
                                  ("placement_moves", "copies moved for the placement "
                                   "policy (docs/cluster.md §6)")):
                    yield CounterMetricFamily(f"bookie_autorecovery_{name}", doc,
                                              value=getattr(stats, name) if stats else 0)
                yield GaugeMetricFamily("bookie_autorecovery_copies_in_progress",
                                        "fragment copies this worker has under way",
                                        value=stats.copies_in_progress if stats else 0)
                yield from _placement(service)

    def _checkpoints(self):
        stats = self.bookie.stats
        yield _histogram("bookie_checkpoint_seconds", "checkpoint duration by phase",
                         ("phase",), stats.checkpoint_phases.children)
        yield CounterMetricFamily("bookie_checkpoint", "checkpoints completed",
                                  value=stats.checkpoints)
        report = self.bookie.replay_report
        for name, value in (("records", report.records if report else 0),
                            ("bytes", report.bytes if report else 0),
                            ("files", len(report.files) if report else 0)):
            yield GaugeMetricFamily(f"bookie_replay_{name}", f"{name} replayed at start",
                                    value=value)


    def _gc(self):
        gc, totals = self.bookie.gc, self.bookie.stats.gc
        yield GaugeMetricFamily("bookie_gc_running", "1 while a GC run is in progress",
                                value=1 if gc.running is not None else 0)
        yield GaugeMetricFamily("bookie_gc_suspended", "1 while the operator suspended GC",
                                value=1 if gc.suspended else 0)
        yield CounterMetricFamily("bookie_gc_runs", "GC runs completed", value=totals.runs)
        reclaimed = CounterMetricFamily("bookie_gc_reclaimed_bytes", "bytes given back",
                                        labels=["how"])
        reclaimed.add_metric(["deletion"], totals.bytes_reclaimed_deletion)
        reclaimed.add_metric(["compaction"], totals.bytes_reclaimed_compaction)
        yield reclaimed
        for name, doc, value in (
                ("logs_deleted", "entry logs deleted whole", totals.logs_deleted),
                ("logs_compacted", "entry logs compacted", totals.logs_compacted),
                ("logs_quarantined", "corrupt entry logs quarantined", totals.logs_quarantined),
                ("entries_moved", "entries moved by compaction", totals.entries_moved),
                ("compaction_written_bytes", "bytes compaction wrote",
                 totals.bytes_written_compaction),
                ("index_ledgers_cleaned", "deleted ledgers whose leftover locations GC removed",
                 totals.ledgers_index_cleaned),
                ("problems", "problems GC reported", totals.problems)):
            yield CounterMetricFamily(f"bookie_gc_{name}", doc, value=value)
        yield GaugeMetricFamily("bookie_gc_last_run_seconds", "duration of the last GC run",
                                value=totals.last_run_s)
        yield GaugeMetricFamily("bookie_gc_last_run_timestamp_seconds",
                                "when the last GC run finished", value=totals.last_run_finished_at)


    def _operations(self):
        bookie, config = self.bookie, self.bookie.config
        cache, last = bookie.storage.cache, bookie.last_checkpoint
        yield GaugeMetricFamily("bookie_write_cache_bytes", "bytes in the write cache "
                                "(active and flushing halves)", value=cache.total_bytes)
        yield GaugeMetricFamily("bookie_write_cache_max_bytes", "write cache budget",
                                value=config.write_cache_max_bytes)
        yield GaugeMetricFamily("bookie_checkpoint_last_timestamp_seconds",
                                "when the last checkpoint finished (0: none yet)",
                                value=last.finished_at if last else 0)
        yield GaugeMetricFamily("bookie_checkpoint_interval_seconds", "checkpoint period",
                                value=config.checkpoint_interval_ms / 1000)
        yield GaugeMetricFamily("bookie_checkpoint_lag_bytes", "journal bytes synced since the "
                                "persisted lastMark (a lower bound across a journal roll)",
                                value=_checkpoint_lag_bytes(bookie))
        yield GaugeMetricFamily("bookie_journal_disk_bytes", "bytes of journal files",
                                value=sum(files_bytes(d, ".txn")
                                          for d in config.journal_dirs_current))
        yield GaugeMetricFamily("bookie_entrylog_disk_bytes", "bytes of entry log files",
                                value=sum(files_bytes(d, ".log")
                                          for d in config.ledger_dirs_current))
        yield GaugeMetricFamily("bookie_disk_warn_ratio", "used fraction that warns",
                                value=config.disk_usage_warn_threshold)
        yield GaugeMetricFamily("bookie_disk_full_ratio", "used fraction that makes the bookie "
                                "read-only", value=config.disk_usage_threshold)


    def _refusals(self):
        stats = self.bookie.stats
        for name, doc, labels, counts in (
                ("bookie_http_requests_refused", "HTTP error answers by route, status and "
                 "error code", ["op", "code", "error"], stats.http_refused),
                ("bookie_bk_requests_refused", "non-EOK answers on the BookKeeper-protocol "
                 "port by operation and status", ["op", "status"], stats.bk_refused)):
            family = CounterMetricFamily(name, doc, labels=labels)
            for values, count in sorted(counts.items()):
                family.add_metric(list(values), count)
            yield family


    def _port_budget(self):
        """bookie_port's budget (docs/bookkeeper-protocol.md §8), when it listens."""
        budget = self.bookie.stats.bk_port_budget
        if budget is None:
            return
        for name, doc, value in (
                ("bookie_bk_connections", "connections open on bookie_port",
                 len(budget.connections)),
                ("bookie_bk_requests_in_progress", "requests other than adds begun and not "
                 "yet answered (PB1)", budget.in_progress),
                ("bookie_bk_answer_bytes", "answers made and not yet read by their clients, "
                 "as last counted (PB2)", budget.answer_bytes),
                ("bookie_bk_request_bytes", "request bytes held: read ahead and reserved "
                 "partial frames (PB3)", budget.request_bytes),
                ("bookie_bk_read_bytes", "bytes reserved by reads in progress for their "
                 "answers (PB7)", budget.read_bytes),
                ("bookie_bk_answer_bytes_peak", "the most bookie_bk_answer_bytes and "
                 "bookie_bk_read_bytes held together, as last counted (PB7)",
                 budget.peak_answer_bytes),
                ("bookie_bk_connections_waiting", "connections not reading until the "
                 "port's budget has room", len(budget.waiting)),
                ("bookie_bk_adds_waiting", "adds decoded and not yet begun: waiting for "
                 "room in the journal queue or write cache, or for a slot of "
                 "bookie_max_pending_adds (AW1)", budget.adds_held)):
            yield GaugeMetricFamily(name, doc, value=value)
        yield CounterMetricFamily("bookie_bk_requests_waited", "requests that waited for "
                                  "the port's budget before they were begun (PB1, PB2)",
                                  value=budget.deferred_total)
        yield CounterMetricFamily("bookie_bk_adds_waited", "adds that waited for room or "
                                  "a slot before they were begun (AW1)",
                                  value=budget.adds_waited_total)
        yield CounterMetricFamily("bookie_bk_reads_resized", "reads whose entry was larger "
                                  "than their allowance, read again at its size (PB7)",
                                  value=budget.resized_total)


def _checkpoint_lag_bytes(bookie) -> int:
    """Journal bytes written since the last checkpoint's marks, over every journal."""
    last = bookie.last_checkpoint
    if not bookie.journals or last is None:
        return 0
    lag = 0
    for journal, mark in zip(bookie.journals, last.marks or (last.mark,)):
        current = journal.current_mark()
        lag += max(0, current.offset - mark.offset) \
            if current.journal_id == mark.journal_id else current.offset
    return lag


class BodyBudgetCollector:
    """bookie_request_body_bytes_held / _max_bytes: the HTTP layer's body budget (BB1)."""

    def __init__(self, budget) -> None:
        self.budget = budget

    def collect(self):
        yield GaugeMetricFamily("bookie_request_body_bytes_held",
                                "request body bytes held by handlers now",
                                value=self.budget.held_bytes)
        yield GaugeMetricFamily("bookie_request_body_max_bytes",
                                "request body bytes that may be held at once",
                                value=self.budget.max_bytes)


def make_registry(bookie, body_budget=None) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BookieCollector(bookie))
    registry.register(BookKeeperCollector(bookie))  # BookKeeper's names (metrics_bk.py)
    registry.register(BookieBkCollector(bookie))  # and its bookie's (metrics_bk_bookie.py)
    if body_budget is not None:
        registry.register(BodyBudgetCollector(body_budget))
    return registry


def route_op(request: web.Request) -> str:
    """The ``op`` label of a request: its route handler's name, or no_route."""
    route = request.match_info.route
    return getattr(route.handler, "__name__", "unknown") if route.resource else "no_route"


def observe_request(request: web.Request, status: int, seconds: float) -> None:
    """Latency by route handler and status (called by the one API middleware), and under
    BookKeeper's names for the routes that are BookKeeper operations (metrics_bk.py MB2)."""
    op, stats = route_op(request), request.app[BOOKIE].stats
    stats.requests.labelled(op, str(status)).observe(seconds)
    observe_http(stats, request, op, status, seconds)
