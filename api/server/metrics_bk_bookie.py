"""BookKeeper's bookie-side metric names (its ``@StatsDoc`` declarations and the constants of
BookKeeperServerStats.java), beside ours, so that the Pulsar helm chart's dashboards
(``pulsar/bookkeeper.json``, ``pulsar/bookkeeper-compaction.json``) query this bookie
unchanged. The request and journal latencies are api/server/metrics_bk.py's; every name
BookKeeper declares, exported or not and why, is api/server/metrics_bk_names.py's table
(docs/operations.md §3.1).

    bookie_SERVER_STATUS                          gauge: 1 writable, 0 read-only, -1 not
                                                  serving (starting, stopping, failed) or a
                                                  cluster bookie not registered
    bookie_WRITE_BYTES / _READ_BYTES              counters, entry bytes added and read
    bookie_BOOKIE_FORCE_LEDGER                    counter, force requests
    bookie_JOURNAL_DIRS                           gauge
    bookie_journal_JOURNAL_{QUEUE_SIZE,WRITE_BYTES,NUM_FLUSH_MAX_WAIT,
        NUM_FLUSH_MAX_OUTSTANDING_BYTES,NUM_FLUSH_EMPTY_QUEUE,FORCE_WRITE_QUEUE_SIZE}
        {journalIndex}                            counters
    bookie_journal_JOURNAL_MEMORY_{MAX,USED}{journalIndex}            gauges, bytes
    bookie_{write_cache_size,write_cache_count,ledgers_count,entries_count}{ledgerDir,
        indexDir}                                 gauges, as DbLedgerStorage's per dir
    bookie_write_cache_max_size                   gauge, the budget of every dir together
    bookie_ledger_writable_dirs / _num_dirs       gauges, LedgerDirsManager's
    bookie_{ACTIVE_ENTRY_LOG_TOTAL,ACTIVE_ENTRY_LOG_SPACE_BYTES,ENTRY_LOG_SPACE_BYTES,
        ACTIVE_LEDGER_TOTAL}{ledgerDir,indexDir}  gauges, GarbageCollectorThread's
    bookie_{RECLAIMED_DELETION_SPACE_BYTES,RECLAIMED_COMPACTION_SPACE_BYTES,
        DELETED_LEDGER_TOTAL,MAJOR_COMPACTION_TOTAL,MINOR_COMPACTION_TOTAL}{ledgerDir,
        indexDir}                                 counters

Invariants:
    MK1. Each name is BookKeeper's as its Prometheus provider writes it (scope, then the
         name, ``-`` made ``_``), with BookKeeper's type and labels. Its counters have no
         ``_total`` suffix: they are ``BkCounter`` families, which ``generate_latest``
         here writes under their own name (prometheus_client would add the suffix).
    MK2. A name is exported only when this bookie has the thing it counts; the others are
         listed with the reason in metrics_bk_names.py, never served as a constant 0.
    MK3. Ours keep their names (api/server/metrics.py): this collector only adds families.

The per-dir labels are BookKeeper's SingleDirectoryDbLedgerStorage's: ``ledgerDir`` the
dir's ``current/`` path and ``indexDir`` the same path (our indexes live in the ledger dir,
as BookKeeper's do without ``indexDirectories``). The journal's are one ``journalIndex``,
"0", over every journal dir, as metrics_bk.py's.
"""

from __future__ import annotations

import re

from prometheus_client import generate_latest as _generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from api.server.metrics_bk import JOURNAL_LABELS
from bookie.state import BookieState

DIR_LABELS = ("ledgerDir", "indexDir")
_SERVING = {BookieState.WRITABLE: 1, BookieState.READ_ONLY: 0}


class BkCounter(Metric):
    """MK1: a BookKeeper counter, its samples named as the family."""

    def __init__(self, name: str, doc: str, labels=()) -> None:
        super().__init__(name, doc, "counter")
        self.label_names = tuple(labels)

    def add_metric(self, values, value: float) -> None:
        self.add_sample(self.name, dict(zip(self.label_names, values)), value)


def _counter(name: str, doc: str, value: float, labels: dict | None = None) -> BkCounter:
    family = BkCounter(name, doc, tuple(labels or ()))
    family.add_metric(tuple((labels or {}).values()), value)
    return family


def generate_latest(registry) -> bytes:
    """prometheus_client's text format, with MK1's counters under their own names."""
    raw: set[str] = set()

    class Watched:
        @staticmethod
        def collect():
            for family in registry.collect():
                if isinstance(family, BkCounter):
                    raw.add(family.name)
                yield family

    text = _generate_latest(Watched()).decode()
    if raw:
        text = re.sub(r"^# (HELP|TYPE) (\S+)_total ",
                      lambda m: f"# {m[1]} {m[2]} " if m[2] in raw else m[0], text,
                      flags=re.MULTILINE)
    return text.encode()


def server_status(bookie) -> int:
    """BookieStateManager's SERVER_STATUS: -1 unregistered, 0 read-only, 1 writable."""
    status = _SERVING.get(bookie.state, -1)
    if bookie.config.metadata_service_uri and bookie.registration is None:
        return -1
    return status


class BookieBkCollector:
    """MK1-MK3 over one bookie (see the module docstring)."""

    def __init__(self, bookie) -> None:
        self.bookie = bookie

    def collect(self):
        yield from self._bookie()
        yield from self._journal()
        yield from self._dirs()
        yield from self._gc()

    def _bookie(self):
        bookie, stats = self.bookie, self.bookie.stats
        yield GaugeMetricFamily("bookie_SERVER_STATUS", "Bookie status (1 writable, 0 "
                                "read-only, -1 not serving or unregistered)",
                                value=server_status(bookie))
        yield _counter("bookie_WRITE_BYTES", "total bytes written to a bookie",
                       stats.write_bytes)
        yield _counter("bookie_READ_BYTES", "total bytes read from a bookie",
                       stats.read_bytes)
        force = stats.ops.FORCE_LEDGER
        yield _counter("bookie_BOOKIE_FORCE_LEDGER", "total force operations occurred on a "
                       "bookie", force.ok.count + force.failed.count)
        yield GaugeMetricFamily("bookie_JOURNAL_DIRS", "number of configured journal "
                                "directories", value=len(bookie.config.journal_dirs_current))

    def _journal(self):
        bookie, stats = self.bookie, self.bookie.stats
        flushes = stats.flushes
        for name, doc, value in (
                ("JOURNAL_QUEUE_SIZE", "The journal queue size: records queued, not yet "
                 "synced", bookie.journal_queued_records),
                ("JOURNAL_WRITE_BYTES", "The number of bytes appended to the journal",
                 stats.group_bytes.sum),
                ("JOURNAL_NUM_FLUSH_MAX_WAIT", "The number of journal flushes triggered by "
                 "MAX_WAIT time", flushes.get("max_wait", 0)),
                ("JOURNAL_NUM_FLUSH_MAX_OUTSTANDING_BYTES", "The number of journal flushes "
                 "triggered by MAX_OUTSTANDING_BYTES", flushes.get("max_bytes", 0)),
                ("JOURNAL_NUM_FLUSH_EMPTY_QUEUE", "The number of journal flushes triggered "
                 "when journal queue becomes empty", flushes.get("queue_empty", 0)),
                ("JOURNAL_FORCE_WRITE_QUEUE_SIZE", "The force write queue size: groups "
                 "written, not yet synced", sum(j.syncing for j in bookie.journals))):
            yield _counter(f"bookie_journal_{name}", doc, value, JOURNAL_LABELS)
        for name, doc, value in (
                ("JOURNAL_MEMORY_MAX", "The max amount of memory in bytes that can be used "
                 "by the bookie journal", bookie.config.journal_queue_max_bytes),
                ("JOURNAL_MEMORY_USED", "The actual amount of memory in bytes currently "
                 "used by the bookie journal", bookie.journal_queued_bytes)):
            family = GaugeMetricFamily(f"bookie_journal_{name}", doc,
                                       labels=list(JOURNAL_LABELS))
            family.add_metric(list(JOURNAL_LABELS.values()), value)
            yield family

    def _units(self):
        """(label values, LedgerStorage, GarbageCollector, its totals) per ledger dir."""
        gc = self.bookie.gc
        for unit, collector, totals in zip(self.bookie.storage.units, gc.gcs,
                                           gc.dir_counters):
            yield (unit.ledger_dir, unit.ledger_dir), unit, collector, totals

    def _dirs(self):
        bookie = self.bookie
        families = {name: GaugeMetricFamily(f"bookie_{name}", doc, labels=list(DIR_LABELS))
                    for name, doc in (
                        ("write_cache_size", "Current number of bytes in write cache"),
                        ("write_cache_count", "Current number of entries in write cache"),
                        ("ledgers_count", "Current number of ledgers"),
                        ("entries_count", "Current number of entries"))}
        for labels, unit, _gc, _totals in self._units():
            families["write_cache_size"].add_metric(labels, unit.cache.total_bytes)
            families["write_cache_count"].add_metric(labels, unit.cache.entry_count())
            families["ledgers_count"].add_metric(
                labels, len(unit.ledgers) if unit.ledgers is not None else 0)
            families["entries_count"].add_metric(labels, _estimated_entries(unit))
        yield from families.values()
        yield GaugeMetricFamily("bookie_write_cache_max_size", "the configured write cache "
                                "size", value=bookie.config.write_cache_max_bytes)
        placement = bookie.storage.placement
        yield GaugeMetricFamily("bookie_ledger_writable_dirs", "ledger dirs taking new "
                                "ledgers (not full)",
                                value=len(placement.units) - len(placement.full))
        yield GaugeMetricFamily("bookie_ledger_num_dirs", "ledger dirs",
                                value=len(placement.units))

    def _gc(self):
        gauges = {name: GaugeMetricFamily(f"bookie_{name}", doc, labels=list(DIR_LABELS))
                  for name, doc in (
                      ("ACTIVE_ENTRY_LOG_TOTAL", "Current number of active entry log files"),
                      ("ACTIVE_ENTRY_LOG_SPACE_BYTES", "Current number of active entry log "
                       "space bytes"),
                      ("ENTRY_LOG_SPACE_BYTES", "Current number of total entry log space "
                       "bytes"),
                      ("ACTIVE_LEDGER_TOTAL", "Current number of active ledgers"))}
        counters = {name: BkCounter(f"bookie_{name}", doc, DIR_LABELS)
                    for name, doc in (
                        ("RECLAIMED_DELETION_SPACE_BYTES", "Number of disk space bytes "
                         "reclaimed via deleting entry log files"),
                        ("RECLAIMED_COMPACTION_SPACE_BYTES", "Number of disk space bytes "
                         "reclaimed via compacting entry log files"),
                        ("DELETED_LEDGER_TOTAL", "Number of ledgers deleted by garbage "
                         "collection"),
                        ("MAJOR_COMPACTION_TOTAL", "Number of major compactions"),
                        ("MINOR_COMPACTION_TOTAL", "Number of minor compactions"))}
        for labels, unit, collector, totals in self._units():
            last = collector.last_result  # phase 2 of the last run, as BookKeeper's
            gauges["ACTIVE_ENTRY_LOG_TOTAL"].add_metric(labels, last.logs_live if last else 0)
            gauges["ACTIVE_ENTRY_LOG_SPACE_BYTES"].add_metric(
                labels, last.log_bytes_live if last else 0)
            gauges["ENTRY_LOG_SPACE_BYTES"].add_metric(
                labels, last.log_bytes_total if last else 0)
            gauges["ACTIVE_LEDGER_TOTAL"].add_metric(
                labels, len(unit.ledgers) if unit.ledgers is not None else 0)
            for name, value in (
                    ("RECLAIMED_DELETION_SPACE_BYTES", totals.bytes_reclaimed_deletion),
                    ("RECLAIMED_COMPACTION_SPACE_BYTES", totals.bytes_reclaimed_compaction),
                    ("DELETED_LEDGER_TOTAL", totals.ledgers_settled),
                    ("MAJOR_COMPACTION_TOTAL", collector.compactions["major"][0]),
                    ("MINOR_COMPACTION_TOTAL", collector.compactions["minor"][0])):
                counters[name].add_metric(labels, value)
        yield from gauges.values()
        yield from counters.values()


def _estimated_entries(unit) -> int:
    """RocksDB's estimate of the locations index's keys, as BookKeeper's entries-count."""
    if unit.locations is None:
        return 0
    value = unit.locations.kv.property_value("rocksdb.estimate-num-keys")
    return int(value) if value else 0
