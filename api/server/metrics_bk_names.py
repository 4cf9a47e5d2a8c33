"""Every bookie-side metric name Apache BookKeeper declares (its ``@StatsDoc`` fields in
the bookie's, storage's and request classes, with the LedgerDirsManager gauges of
BookKeeperServerStats.java and the thread pool gauge the chart's dashboard queries), as its
Prometheus provider writes it: exported here or why not, and the name of ours it mirrors.
docs/operations.md §3.1 renders it (scripts/gen_docs.py); tests/integration/
test_pulsar_dashboards.py holds the dashboards to it.

A name is exported (``reason`` empty) by api/server/metrics_bk.py or metrics_bk_bookie.py,
with BookKeeper's type and labels (MK1); the others have no counterpart here (MK2).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Name:
    name: str
    type: str            # BookKeeper's: counter, gauge or summary (an OpStatsLogger)
    source: str          # the BookKeeper class declaring it
    labels: str = ""     # BookKeeper's labels beyond success/quantile
    ours: str = ""       # the name of ours it mirrors, where one does
    reason: str = ""     # why it is not exported; empty when it is

    @property
    def exported(self) -> bool:
        return not self.reason


_DIR = "ledgerDir, indexDir"
_JOURNAL = "journalIndex"
_INTERLEAVED = "InterleavedLedgerStorage's; this bookie is DbLedgerStorage-shaped"
_NO_READ_CACHE = "no read-ahead cache: reads go to the entry log through the page cache"
_NO_THREADS = "no request thread pools: one event loop and a read executor"
_UNTIMED = "this stage is not timed on its own"
_DIRECT = "no direct-I/O entry logger"
_PER_LEDGER = "no entry log per ledger"

_ROWS = [
    # BookieStateManager
    Name("bookie_SERVER_STATUS", "gauge", "BookieStateManager", ours="bookie_writable, "
         "bookie_read_only, bookie_zk_registered"),
    Name("bookie_SERVER_SANITY", "gauge", "BookieStateManager",
         reason="no periodic sanity check (GET /v1/bookie/sanity runs one on demand)"),
    # BookieStats
    Name("bookie_WRITE_BYTES", "counter", "BookieStats"),
    Name("bookie_READ_BYTES", "counter", "BookieStats"),
    Name("bookie_BOOKIE_FORCE_LEDGER", "counter", "BookieStats",
         ours="bookkeeper_server_FORCE_LEDGER_count"),
    Name("bookie_BOOKIE_ADD_ENTRY", "summary", "BookieStats",
         reason="the add inside the bookie is not timed apart from ADD_ENTRY"),
    Name("bookie_BOOKIE_RECOVERY_ADD_ENTRY", "summary", "BookieStats",
         reason="recovery adds are timed with the others, under ADD_ENTRY"),
    Name("bookie_BOOKIE_READ_ENTRY", "summary", "BookieStats",
         reason="the read inside the bookie is not timed apart from READ_ENTRY"),
    Name("bookie_BOOKIE_GET_LIST_OF_ENTRIES_OF_LEDGER", "summary", "BookieStats",
         reason="timed only as bookkeeper_server_GET_LIST_OF_ENTRIES_OF_LEDGER"),
    Name("bookie_BOOKIE_ADD_ENTRY_BYTES", "summary", "BookieStats",
         reason="no distribution of entry sizes (bookie_WRITE_BYTES counts their sum)"),
    Name("bookie_BOOKIE_READ_ENTRY_BYTES", "summary", "BookieStats",
         reason="no distribution of entry sizes (bookie_READ_BYTES counts their sum)"),
    Name("bookie_JOURNAL_DIRS", "gauge", "BookieStats"),
    Name("bookie_JOURNAL_QUEUE_MAX_SIZE", "gauge", "BookieStats",
         reason="the journal queue is bounded in bytes (bookie_journal_JOURNAL_MEMORY_MAX), "
         "not in records"),
    # JournalStats
    Name("bookie_journal_JOURNAL_ADD_ENTRY", "summary", "JournalStats", _JOURNAL),
    Name("bookie_journal_JOURNAL_FORCE_LEDGER", "summary", "JournalStats", _JOURNAL,
         reason="a force's journal marker is timed with the adds' groups"),
    Name("bookie_journal_JOURNAL_SYNC", "summary", "JournalStats", _JOURNAL,
         ours="bookie_journal_fsync_seconds"),
    Name("bookie_journal_JOURNAL_FORCE_WRITE_ENQUEUE", "summary", "JournalStats", _JOURNAL,
         reason="no force-write thread: the journal thread syncs what it wrote"),
    Name("bookie_journal_JOURNAL_CREATION_LATENCY", "summary", "JournalStats", _JOURNAL,
         reason=_UNTIMED),
    Name("bookie_journal_JOURNAL_FLUSH_LATENCY", "summary", "JournalStats", _JOURNAL,
         reason=_UNTIMED),
    Name("bookie_journal_JOURNAL_PROCESS_TIME_LATENCY", "summary", "JournalStats", _JOURNAL,
         reason=_UNTIMED),
    Name("bookie_journal_JOURNAL_QUEUE_LATENCY", "summary", "JournalStats", _JOURNAL,
         reason=_UNTIMED),
    Name("bookie_journal_JOURNAL_FORCE_WRITE_GROUPING_TOTAL", "summary", "JournalStats",
         _JOURNAL, reason="one group is one force write here: always 1"),
    Name("bookie_journal_JOURNAL_FORCE_WRITE_BATCH_ENTRIES", "summary", "JournalStats",
         _JOURNAL, ours="bookie_journal_group_entries",
         reason="kept as our histogram, not as a summary of values"),
    Name("bookie_journal_JOURNAL_FORCE_WRITE_BATCH_BYTES", "summary", "JournalStats",
         _JOURNAL, ours="bookie_journal_group_bytes",
         reason="kept as our histogram, not as a summary of values"),
    Name("bookie_journal_JOURNAL_QUEUE_SIZE", "counter", "JournalStats", _JOURNAL,
         ours="bookie_journal_queue_records"),
    Name("bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE", "counter", "JournalStats",
         _JOURNAL),
    Name("bookie_journal_JOURNAL_NUM_FLUSH_MAX_WAIT", "counter", "JournalStats", _JOURNAL,
         ours='bookie_journal_flush_total{reason="max_wait"}'),
    Name("bookie_journal_JOURNAL_NUM_FLUSH_MAX_OUTSTANDING_BYTES", "counter", "JournalStats",
         _JOURNAL, ours='bookie_journal_flush_total{reason="max_bytes"}'),
    Name("bookie_journal_JOURNAL_NUM_FLUSH_EMPTY_QUEUE", "counter", "JournalStats", _JOURNAL,
         ours='bookie_journal_flush_total{reason="queue_empty"}'),
    Name("bookie_journal_JOURNAL_WRITE_BYTES", "counter", "JournalStats", _JOURNAL,
         ours="bookie_journal_group_bytes_sum"),
    Name("bookie_journal_JOURNAL_MEMORY_MAX", "gauge", "JournalStats", _JOURNAL),
    Name("bookie_journal_JOURNAL_MEMORY_USED", "gauge", "JournalStats", _JOURNAL,
         ours="bookie_journal_queue_bytes"),
    # GarbageCollectorStats (per ledger dir under DbLedgerStorage)
    Name("bookie_MINOR_COMPACTION_TOTAL", "counter", "GarbageCollectorStats", _DIR),
    Name("bookie_MAJOR_COMPACTION_TOTAL", "counter", "GarbageCollectorStats", _DIR),
    Name("bookie_ENTRY_LOCATION_COMPACTION_TOTAL", "counter", "GarbageCollectorStats", _DIR,
         reason="no periodic compaction of the locations index: GC compacts the key range "
         "of each deleted ledger"),
    Name("bookie_RECLAIMED_DELETION_SPACE_BYTES", "counter", "GarbageCollectorStats", _DIR,
         ours='bookie_gc_reclaimed_bytes_total{how="deletion"}'),
    Name("bookie_RECLAIMED_COMPACTION_SPACE_BYTES", "counter", "GarbageCollectorStats",
         _DIR, ours='bookie_gc_reclaimed_bytes_total{how="compaction"}'),
    Name("bookie_RECLAIM_FAILED_TO_DELETE", "counter", "GarbageCollectorStats", _DIR,
         ours="bookie_gc_problems_total",
         reason="a log GC may not delete is one of bookie_gc_problems_total"),
    Name("bookie_DELETED_LEDGER_TOTAL", "counter", "GarbageCollectorStats", _DIR),
    Name("bookie_THREAD_RUNTIME", "summary", "GarbageCollectorStats", _DIR,
         ours="bookie_gc_last_run_seconds", reason="only the last run's duration is kept"),
    Name("bookie_ACTIVE_ENTRY_LOG_TOTAL", "gauge", "GarbageCollectorStats", _DIR),
    Name("bookie_ACTIVE_ENTRY_LOG_SPACE_BYTES", "gauge", "GarbageCollectorStats", _DIR),
    Name("bookie_ENTRY_LOG_SPACE_BYTES", "gauge", "GarbageCollectorStats", _DIR,
         ours="bookie_entrylog_disk_bytes"),
    Name("bookie_ACTIVE_LEDGER_TOTAL", "gauge", "GarbageCollectorStats", _DIR),
    Name("bookie_GC_LEDGER_RUNTIME", "summary", "GarbageCollectorStats", _DIR,
         reason=_UNTIMED),
    Name("bookie_COMPACT_RUNTIME", "summary", "GarbageCollectorStats", _DIR,
         reason=_UNTIMED),
    Name("bookie_EXTRACT_META_RUNTIME", "summary", "GarbageCollectorStats", _DIR,
         reason=_UNTIMED),
    Name("bookie_ENTRY_LOG_COMPACT_RATIO", "gauge", "GarbageCollectorStats", _DIR,
         reason="not kept"),
    # DbLedgerStorageStats (per ledger dir)
    Name("bookie_add_entry", "summary", "DbLedgerStorageStats", _DIR,
         reason="the write cache insert is not timed"),
    Name("bookie_read_entry", "summary", "DbLedgerStorageStats", _DIR,
         reason="the storage read is not timed apart from READ_ENTRY"),
    Name("bookie_read_locations_index_time", "counter", "DbLedgerStorageStats", _DIR,
         reason=_UNTIMED),
    Name("bookie_read_entrylog_time", "counter", "DbLedgerStorageStats", _DIR,
         reason=_UNTIMED),
    Name("bookie_write_cache_hits", "counter", "DbLedgerStorageStats", _DIR,
         reason="reads from the write cache are not counted apart"),
    Name("bookie_write_cache_misses", "counter", "DbLedgerStorageStats", _DIR,
         reason="reads from the write cache are not counted apart"),
    Name("bookie_read_cache_hits", "counter", "DbLedgerStorageStats", _DIR,
         reason=_NO_READ_CACHE),
    Name("bookie_read_cache_misses", "counter", "DbLedgerStorageStats", _DIR,
         reason=_NO_READ_CACHE),
    Name("bookie_readahead_batch_count", "summary", "DbLedgerStorageStats", _DIR,
         reason=_NO_READ_CACHE),
    Name("bookie_readahead_batch_size", "summary", "DbLedgerStorageStats", _DIR,
         reason=_NO_READ_CACHE),
    Name("bookie_readahead_time", "counter", "DbLedgerStorageStats", _DIR,
         reason=_NO_READ_CACHE),
    Name("bookie_flush", "summary", "DbLedgerStorageStats", _DIR,
         ours="bookie_checkpoint_seconds", reason="kept as our checkpoint histogram"),
    Name("bookie_flush_entrylog", "summary", "DbLedgerStorageStats", _DIR,
         ours='bookie_checkpoint_seconds{phase="append"}',
         reason="kept as our checkpoint histogram"),
    Name("bookie_flush_locations_index", "summary", "DbLedgerStorageStats", _DIR,
         ours='bookie_checkpoint_seconds{phase="index"}',
         reason="kept as our checkpoint histogram"),
    # Its @StatsDoc says flush-locations-index twice; the field registers this one.
    Name("bookie_flush_ledger_index", "summary", "DbLedgerStorageStats", _DIR,
         reason="kept as our checkpoint histogram"),
    Name("bookie_flush_size", "summary", "DbLedgerStorageStats", _DIR,
         reason="no distribution of flush sizes"),
    Name("bookie_throttled_write_requests", "counter", "DbLedgerStorageStats", _DIR,
         ours="bookie_bk_adds_waited_total",
         reason="adds wait for room at the port (AW1), not in the storage"),
    Name("bookie_throttled_write", "summary", "DbLedgerStorageStats", _DIR,
         ours="bookie_bk_adds_waited_total",
         reason="adds wait for room at the port (AW1), not in the storage"),
    Name("bookie_rejected_write_requests", "counter", "DbLedgerStorageStats", _DIR,
         ours="bookie_bk_requests_refused_total",
         reason="refusals are counted by operation and status"),
    Name("bookie_write_cache_size", "gauge", "DbLedgerStorageStats", _DIR,
         ours="bookie_write_cache_bytes"),
    Name("bookie_write_cache_count", "gauge", "DbLedgerStorageStats", _DIR),
    Name("bookie_read_cache_size", "gauge", "DbLedgerStorageStats", _DIR,
         reason=_NO_READ_CACHE),
    Name("bookie_read_cache_count", "gauge", "DbLedgerStorageStats", _DIR,
         reason=_NO_READ_CACHE),
    # DbLedgerStorage, EntryLocationIndexStats, LedgerMetadataIndexStats
    Name("bookie_readahead_max_batch_size", "gauge", "DbLedgerStorage",
         reason=_NO_READ_CACHE),
    Name("bookie_write_cache_max_size", "gauge", "DbLedgerStorage",
         ours="bookie_write_cache_max_bytes"),
    Name("bookie_entries_count", "gauge", "EntryLocationIndexStats", _DIR),
    Name("bookie_lookup_entry_location", "summary", "EntryLocationIndexStats", _DIR,
         reason=_UNTIMED),
    Name("bookie_get_last_entry_in_ledger", "summary", "EntryLocationIndexStats", _DIR,
         reason=_UNTIMED),
    Name("bookie_ledgers_count", "gauge", "LedgerMetadataIndexStats", _DIR),
    # LedgerDirsManager (BookKeeperServerStats' LD_* constants, no @StatsDoc)
    Name("bookie_ledger_writable_dirs", "gauge", "LedgerDirsManager",
         ours="bookie_ledger_dirs_full"),
    Name("bookie_ledger_num_dirs", "gauge", "LedgerDirsManager"),
    # RequestStats (scope bookkeeper_server)
    *[Name(f"bookkeeper_server_{op}", "summary", "RequestStats",
           ours="bookie_request_seconds" if op.startswith(("ADD_ENTRY", "READ_ENTRY")) else "")
      for op in ("ADD_ENTRY_REQUEST", "ADD_ENTRY", "READ_ENTRY_REQUEST", "READ_ENTRY",
                 "FORCE_LEDGER", "FORCE_LEDGER_REQUEST", "READ_ENTRY_FENCE_REQUEST",
                 "READ_ENTRY_FENCE_READ", "READ_ENTRY_LONG_POLL_READ",
                 "READ_ENTRY_LONG_POLL_REQUEST", "WRITE_LAC_REQUEST", "WRITE_LAC",
                 "READ_LAC_REQUEST", "READ_LAC", "GET_BOOKIE_INFO_REQUEST", "GET_BOOKIE_INFO",
                 "GET_LIST_OF_ENTRIES_OF_LEDGER_REQUEST", "GET_LIST_OF_ENTRIES_OF_LEDGER")],
    Name("bookkeeper_server_WRITE_THREAD_QUEUED_LATENCY", "summary", "RequestStats",
         reason=_NO_THREADS),
    Name("bookkeeper_server_READ_ENTRY_SCHEDULING_DELAY", "summary", "RequestStats",
         reason=_NO_THREADS),
    Name("bookkeeper_server_ADD_ENTRY_REJECTED", "counter", "RequestStats",
         ours='bookie_bk_requests_refused_total{op="ADD_ENTRY",status="ETOOMANYREQUESTS"}',
         reason="adds wait for room (AW1); one refused after the wait is counted by status"),
    Name("bookkeeper_server_READ_ENTRY_REJECTED", "counter", "RequestStats",
         ours="bookie_bk_connections_waiting",
         reason="reads wait for the port's budget (PB1) rather than being rejected"),
    Name("bookkeeper_server_READ_ENTRY_FENCE_WAIT", "summary", "RequestStats",
         reason="a fence is one journal record, timed as READ_ENTRY_FENCE_READ"),
    Name("bookkeeper_server_READ_ENTRY_LONG_POLL_PRE_WAIT", "summary", "RequestStats",
         reason=_UNTIMED),
    Name("bookkeeper_server_READ_ENTRY_LONG_POLL_WAIT", "summary", "RequestStats",
         ours="bookie_lac_waiters", reason=_UNTIMED),
    Name("bookkeeper_server_READ_LAST_ENTRY_NOENTRY_ERROR", "counter", "RequestStats",
         ours='bookie_bk_requests_refused_total{status="ENOENTRY"}',
         reason="refusals are counted by operation and status"),
    Name("bookkeeper_server_CHANNEL_WRITE", "summary", "RequestStats", reason=_UNTIMED),
    Name("bookkeeper_server_ADD_ENTRY_BLOCKED", "summary", "RequestStats",
         ours="bookie_bk_adds_waiting", reason="kept as our gauge of adds waiting (AW1)"),
    Name("bookkeeper_server_READ_ENTRY_BLOCKED", "summary", "RequestStats",
         ours="bookie_bk_connections_waiting",
         reason="kept as our gauge of connections waiting (PB1)"),
    # Thread pools (OrderedExecutor's, no @StatsDoc): the chart's dashboard queries them.
    Name("bookkeeper_server_thread_executor_queue", "gauge", "OrderedExecutor", "thread",
         reason=_NO_THREADS),
    # EntryMemTableStats, IndexInMemPageMgrStats, IndexPersistenceMgrStats, Interleaved
    *[Name(f"bookie_{n}", t, source, reason=_INTERLEAVED) for n, t, source in (
        ("SKIP_LIST_SNAPSHOT", "summary", "EntryMemTableStats"),
        ("SKIP_LIST_PUT_ENTRY", "summary", "EntryMemTableStats"),
        ("SKIP_LIST_GET_ENTRY", "summary", "EntryMemTableStats"),
        ("SKIP_LIST_FLUSH_BYTES", "counter", "EntryMemTableStats"),
        ("SKIP_LIST_THROTTLING", "counter", "EntryMemTableStats"),
        ("SKIP_LIST_THROTTLING_LATENCY", "summary", "EntryMemTableStats"),
        ("INDEX_INMEM_ILLEGAL_STATE_RESET", "counter", "IndexInMemPageMgrStats"),
        ("INDEX_INMEM_ILLEGAL_STATE_DELETE", "counter", "IndexInMemPageMgrStats"),
        ("LEDGER_CACHE_NUM_EVICTED_LEDGERS", "counter", "IndexPersistenceMgrStats"),
        ("PENDING_GET_FILE_INFO", "counter", "IndexPersistenceMgrStats"),
        ("WRITE_FILE_INFO_CACHE_SIZE", "gauge", "IndexPersistenceMgrStats"),
        ("READ_FILE_INFO_CACHE_SIZE", "gauge", "IndexPersistenceMgrStats"),
        ("STORAGE_GET_OFFSET", "summary", "InterleavedLedgerStorage"),
        ("STORAGE_GET_ENTRY", "summary", "InterleavedLedgerStorage"))],
    # EntryLogManagerForEntryLogPerLedger
    *[Name(f"bookie_entrylogger_{n}", t, "EntryLogManagerForEntryLogPerLedger",
           reason=_PER_LEDGER) for n, t in (
        ("NUM_OF_WRITE_ACTIVE_LEDGERS", "counter"),
        ("NUM_OF_WRITE_LEDGERS_REMOVED_CACHE_EXPIRY", "counter"),
        ("NUM_OF_WRITE_LEDGERS_REMOVED_CACHE_MAXSIZE", "counter"),
        ("NUM_LEDGERS_HAVING_MULTIPLE_ENTRYLOGS", "counter"),
        ("ENTRYLOGS_PER_LEDGER", "summary"))],
    # DirectEntryLoggerStats
    *[Name(f"bookie_entrylog_{n}", t, "DirectEntryLoggerStats", reason=_DIRECT)
      for n, t in (("add_entry", "summary"), ("read_entry", "summary"), ("flush", "summary"),
                   ("writer_flush", "summary"), ("read_block", "summary"),
                   ("open_reader", "counter"), ("close_reader", "counter"),
                   ("cached_reader_closed", "counter"))],
]

NAMES: dict[str, Name] = {row.name: row for row in _ROWS}
assert len(NAMES) == len(_ROWS), "a name twice"
#: Names of BookKeeper's @StatsDoc declarations (the others: LedgerDirsManager's, the pool's).
STATSDOC = tuple(n for n, row in NAMES.items()
                 if row.source not in ("LedgerDirsManager", "OrderedExecutor"))

