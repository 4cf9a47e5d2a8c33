"""Every key of Apache BookKeeper's bk_server.conf, and what ``bookie serve --conf`` does
with it: the table alone (``bookie.bkconf`` reads the file and applies it).

Keys and units are those of BookKeeper's ``ServerConfiguration`` and
``AbstractConfiguration`` and of its shipped ``conf/bk_server.conf``. Four classes:

* ``MAPPED``: the value becomes one of our settings, converted to its unit;
* ``SPECIAL``: mapped or checked by code in ``bookie.bkconf`` (directories, the metadata
  service, TLS, authentication, ZooKeeper ACLs, loopback), several keys together;
* ``AS_OURS``: behaviour this bookie has in one fixed form: a value asking for that form is
  ignored, any other is refused (listed at WARN, not honoured);
* ``IGNORED`` / ``REFUSED``: no meaning here / a behaviour this bookie does not have, for any
  value.

Invariant BK1: the classes are disjoint, and a key is in one of them or it is unknown.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from bookie.settings import MiB

#: Our BookKeeper listener's frame bound is max_entry_size plus this (api/server/
#: bk_listener.py FRAME_OVERHEAD); nettyMaxFrameSizeBytes bounds the whole frame.
FRAME_OVERHEAD = 4096


@dataclasses.dataclass(frozen=True)
class Mapped:
    key: str
    setting: str
    convert: Callable[[str], Any]
    unit: str  # the conversion, as the docs table shows it


def _int(text: str) -> int:
    return int(text.strip())


def _mb(text: str) -> int:
    return _int(text) * MiB


def _s_to_ms(text: str) -> int:
    return _int(text) * 1000


def _ms_to_s(text: str) -> int:
    # Rounded up: a grace period or delay is never shortened by the conversion.
    return math.ceil(_int(text) / 1000)


def _ratio(text: str) -> float:
    return float(text.strip())


#: ensemblePlacementPolicy's classes and our placement_policy (docs/cluster.md §6).
_POLICIES = {f"org.apache.bookkeeper.client.{name}EnsemblePlacementPolicy": policy
             for name, policy in (("Rackaware", "rack"), ("Zoneaware", "zone"),
                                  ("Default", "random"))}


def _policy(text: str) -> str:
    if text.strip() not in _POLICIES:
        raise ValueError(f"{text.strip()}: not one of {', '.join(sorted(_POLICIES))}")
    return _POLICIES[text.strip()]


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):  # BookKeeper's getBoolean knows these two only
        raise ValueError(f"{text!r} is not true or false")
    return lowered == "true"


def _unthrottled_below_1(text: str) -> int:
    return max(_int(text), 0)  # BookKeeper's -1 and 0 both mean unthrottled; ours is 0


def _no_limit_at_0(text: str) -> int:
    value = _int(text)
    return 10_000_000 if value <= 0 else value  # BookKeeper's 0 = no limit: our maximum


def _frame_to_entry(text: str) -> int:
    return _int(text) - FRAME_OVERHEAD


MAPPED: tuple[Mapped, ...] = (
    Mapped("bookiePort", "bookie_port", _int, "as is"),
    Mapped("advertisedAddress", "host", str.strip,
           "as is: the address listened on and registered (ours has one for both)"),
    Mapped("journalMaxGroupWaitMSec", "group_max_wait_ms", _ratio, "ms, as is"),
    Mapped("journalBufferedWritesThreshold", "group_max_bytes", _int, "bytes, as is"),
    Mapped("journalMaxSizeMB", "journal_max_bytes", _mb, "MB × 1048576"),
    Mapped("journalPreAllocSizeMB", "journal_prealloc_bytes", _mb, "MB × 1048576"),
    Mapped("journalMaxBackups", "journal_backups_count", _int, "as is"),
    Mapped("journalMaxMemorySizeMb", "journal_queue_max_bytes", _mb, "MB × 1048576"),
    Mapped("dbStorage_writeCacheMaxSizeMb", "write_cache_max_bytes", _mb, "MB × 1048576"),
    Mapped("logSizeLimit", "entrylog_max_bytes", _int, "bytes, as is"),
    Mapped("flushInterval", "checkpoint_interval_ms", _int, "ms, as is"),
    Mapped("nettyMaxFrameSizeBytes", "max_entry_size", _frame_to_entry,
           f"bytes − {FRAME_OVERHEAD}: the same frame bound (our frames are the entry plus "
           f"{FRAME_OVERHEAD})"),
    Mapped("skipReplayJournalInvalidRecord", "skip_corrupt_journal_records", _bool, "as is"),
    Mapped("diskUsageThreshold", "disk_usage_threshold", _ratio, "fraction, as is"),
    Mapped("diskUsageWarnThreshold", "disk_usage_warn_threshold", _ratio, "fraction, as is"),
    Mapped("diskUsageLwmThreshold", "disk_usage_lwm_threshold", _ratio, "fraction, as is"),
    Mapped("diskCheckInterval", "disk_check_interval_ms", _int, "ms, as is"),
    Mapped("gcWaitTime", "gc_interval_ms", _int, "ms, as is"),
    Mapped("minorCompactionThreshold", "minor_compaction_threshold", _ratio, "fraction, as is"),
    Mapped("minorCompactionInterval", "minor_compaction_interval_ms", _s_to_ms, "s × 1000"),
    Mapped("majorCompactionThreshold", "major_compaction_threshold", _ratio, "fraction, as is"),
    Mapped("majorCompactionInterval", "major_compaction_interval_ms", _s_to_ms, "s × 1000"),
    Mapped("compactionRateByBytes", "compaction_rate_bytes", _int, "bytes/s, as is"),
    Mapped("autoRecoveryDaemonEnabled", "autorecovery_daemon_enabled", _bool, "as is"),
    Mapped("lostBookieRecoveryDelay", "lost_bookie_recovery_delay_s", _int, "s, as is"),
    Mapped("openLedgerRereplicationGracePeriod", "open_ledger_rereplication_grace_period_s",
           _ms_to_s, "ms ÷ 1000, rounded up"),
    Mapped("replicationRateByBytes", "rereplication_rate_bytes", _unthrottled_below_1,
           "bytes/s; -1 (unthrottled) becomes 0"),
    Mapped("auditorReplicasCheckInterval", "replicas_check_interval_s", _int,
           "s, as is (0 = never, both)"),
    Mapped("ensemblePlacementPolicy", "placement_policy", _policy,
           "Rackaware: rack, Zoneaware: zone, Default: random; another class: exit 78"),
    Mapped("minNumRacksPerWriteQuorum", "placement_min_racks_per_write_quorum", _int,
           "as is"),
    Mapped("minNumZonesPerWriteQuorum", "placement_min_zones_per_write_quorum", _int, "as is"),
    Mapped("desiredNumZonesPerWriteQuorum", "placement_desired_zones_per_write_quorum", _int,
           "as is"),
    Mapped("auditorPeriodicPlacementPolicyCheckInterval", "placement_check_interval_s", _int,
           "s, as is (0 = never, both)"),
    Mapped("maxPendingAddRequestsPerThread", "bookie_max_pending_adds", _int,
           "as is (ours bounds one connection)"),
    Mapped("dbStorage_maxThrottleTimeMs", "bookie_add_wait_ms", _int,
           "ms, as is (ours bounds the wait for the journal queue too)"),
    Mapped("maxReadsInProgressLimit", "bookie_max_reads_in_progress", _no_limit_at_0,
           "as is; 0 (no limit) becomes 10000000"),
)
MAPPED_BY_KEY = {m.key: m for m in MAPPED}

#: Keys ``bookie.bkconf`` handles together, with what it does (the docs table's text).
SPECIAL: dict[str, str] = {
    "httpServerEnabled": "true: BookKeeper's admin REST API on `admin_port` "
                         "(httpServerPort, default 8000; docs/admin-api.md); false: not served",
    "httpServerPort": "`admin_port` when httpServerEnabled=true, else ignored",
    "journalDirectories": "`journal_dirs` (each holds current/, as BookKeeper's; one "
                          "journal and group-commit thread per directory); `data_dir` D "
                          "when it is one D/journal and ledgerDirectories one D/ledgers; "
                          "without ledgerDirectories: refused, exit 78",
    "journalDirectory": "as journalDirectories (BookKeeper's older key; journalDirectories "
                        "wins when both are set)",
    "ledgerDirectories": "`ledger_dirs`, with journalDirectories (or `data_dir`, as there)",
    "indexDirectories": "the indexes live in the ledger directory: the same directory is "
                        "ignored, another is refused",
    "metadataServiceUri": "`metadata_service_uri`; zk:// and zk+hierarchical:// only, else "
                          "exit 78",
    "zkServers": "`metadata_service_uri` zk://zkServers/zkLedgersRootPath when "
                 "metadataServiceUri is not set (as BookKeeper)",
    "zkLedgersRootPath": "with zkServers (default /ledgers)",
    "tlsProviderFactoryClass": "TLSContextFactory turns TLS on (both listeners); other "
                               "classes: exit 78; unset: every other tls* key is ignored",
    "tlsKeyStoreType": "PEM only (BookKeeper's default is JKS): else exit 78",
    "tlsKeyStore": "`tls_key_file`",
    "tlsCertificatePath": "`tls_cert_file`",
    "tlsKeyStorePasswordPath": "the file is read into `tls_key_password`",
    "tlsTrustStoreType": "PEM only: else exit 78",
    "tlsTrustStore": "`tls_trust_file`, and `tls_ca_file` with tlsClientAuthentication",
    "tlsTrustStorePasswordPath": "ignored: a PEM trust store has no password",
    "tlsClientAuthentication": "true: `tls_ca_file` = tlsTrustStore (mutual TLS)",
    "tlsEnabledProtocols": "`tls_min_version`: the oldest of TLSv1.2, TLSv1.3 listed; "
                           "older versions are never accepted here",
    "bookieAuthProviderFactoryClass": "BookieAuthZFactory: authorizedRoles apply; any other "
                                      "class: exit 78 (its clients would go unchecked)",
    "authorizedRoles": "`tls_authorized_roles` with BookieAuthZFactory, else ignored",
    "zkEnableSecurity": "true needs `zk_sasl`/`zk_sasl_file` (or `zk_digest`/"
                        "`zk_digest_file`) in the environment or TOML file, else exit 78: "
                        "BookKeeper's JAAS file is not read",
    "allowLoopback": "false with a loopback `host`: exit 78, as BookKeeper refuses to start",
    "enforceMinNumRacksPerWriteQuorum": "`placement_strict` when ensemblePlacementPolicy is "
                                        "Rackaware (default false), else ignored",
    "enforceStrictZoneawarePlacement": "`placement_strict` when ensemblePlacementPolicy is "
                                       "Zoneaware (default true, as BookKeeper's), else ignored",
}

_DB = "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage"
_HIER = "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory"
#: key: (values asking for what this bookie does, why). Another value is refused.
AS_OURS: dict[str, tuple[tuple[str, ...], str]] = {
    "journalSyncData": (("true",), "an add is acknowledged only after its journal fsync"),
    "journalWriteData": (("true",), "every add is journaled"),
    "journalAdaptiveGroupWrites": (("true",), "adds are grouped into one journal write"),
    "journalFlushWhenQueueEmpty": (("false",), "a group waits group_max_wait_ms"),
    "journalBufferedEntriesThreshold": (("0",), "groups are bounded by bytes and wait only"),
    "journalFormatVersionToWrite": (("6",), "journals are written as V6 (docs/formats.md)"),
    "journalReuseFiles": (("false",), "journal files are never reused"),
    "ledgerStorageClass": ((_DB,), "the storage is DbLedgerStorage's layout: entry logs "
                                   "and RocksDB indexes (docs/formats.md)"),
    "ledgerManagerFactoryClass": ((_HIER,), "ledger metadata is in the hierarchical layout"),
    "ledgerManagerType": (("hierarchical",), "ledger metadata is in the hierarchical layout"),
    "entryLogPerLedgerEnabled": (("false",), "all ledgers share the active entry log"),
    "readOnlyModeEnabled": (("true",), "a full disk makes the bookie read-only, it never "
                                       "shuts down instead"),
    "forceReadOnlyBookie": (("false",), "the bookie starts writable; the admin endpoint "
                                        "turns it read-only"),
    "persistBookieStatusEnabled": (("false",), "read-only status is not kept over restarts"),
    "isThrottleByBytes": (("true",), "compaction is throttled by bytes "
                                     "(compactionRateByBytes)"),
    "isForceGCAllowWhenNoSpace": (("false",), "a full disk pauses compaction "
                                              "(docs/operations.md §5.1)"),
    "forceAllowCompaction": (("false",), "compaction is not forced on a full disk"),
    "useHostNameAsBookieID": (("false",), "the bookieId is host:bookie_port as given"),
    "useShortHostName": (("false",), "the bookieId is host:bookie_port as given"),
    "disableServerSocketBind": (("false",), "the bookie always listens"),
    "enableLocalTransport": (("false",), "no in-JVM transport"),
    "localConsistencyCheckOnStartup": (("false",), "scrubbing is offline: bookie shell "
                                                   "scrub"),
    "localScrubInterval": (("0",), "scrubbing is offline: bookie shell scrub"),
    "dataIntegrityChecking": (("false",), "no data-integrity cookie stamping"),
    "dataIntegrityStampMissingCookies": (("false",), "no data-integrity cookie stamping"),
    "zkTimeout": (("10000",), "the ZooKeeper session timeout is 10 s"),
    "tlsCertFilesRefreshDurationSeconds": (("0",), "certificates are reloaded on SIGHUP, "
                                                   "not polled"),
    "maxAddsInProgressLimit": (("0",), "adds are bounded per connection "
                                       "(bookie_max_pending_adds: more wait) and by "
                                       "journal_queue_max_bytes"),
    "minorCompactionMaxTimeMillis": (("-1", "0"), "compaction is bounded by "
                                                  "compaction_rate_bytes, not by time"),
    "majorCompactionMaxTimeMillis": (("-1", "0"), "compaction is bounded by "
                                                  "compaction_rate_bytes, not by time"),
}


def _keys(text: str) -> tuple[str, ...]:
    return tuple(text.split())


#: why: keys. Settings these name take no effect here, whatever their value.
IGNORED_GROUPS: dict[str, tuple[str, ...]] = {
    "JVM, Netty and thread-pool tuning of BookKeeper's Java implementation": _keys(
        "allocatorExitOnOutOfMemory allocatorLeakDetectionPolicy allocatorOutOfMemoryPolicy "
        "allocatorPoolingConcurrency allocatorPoolingPolicy byteBufAllocatorSizeInitial "
        "byteBufAllocatorSizeMax byteBufAllocatorSizeMin enableBusyWait serverNumIOThreads "
        "serverNumAcceptorThreads numAddWorkerThreads numReadWorkerThreads "
        "numHighPriorityWorkerThreads numLongPollWorkerThreads numJournalCallbackThreads "
        "numOfMemtableFlushThreads readWorkerThreadsThrottlingEnabled "
        "preserveMdcForTaskExecution enableTaskExecutionStats requestTimerNumTicks "
        "requestTimerTickDurationMs serverSockKeepalive serverTcpKeepCnt serverTcpKeepIdle "
        "serverTcpKeepIntvl serverTcpLinger serverTcpNoDelay serverWriteBufferHighWaterMark "
        "serverWriteBufferLowWaterMark readBufferSizeBytes writeBufferSizeBytes "
        "journalWriteBufferSizeKB journalChannelProvider journalRemoveFromPageCache "
        "journalPageCacheFlushIntervalMSec journalAlignmentSize "
        "org.apache.bookkeeper.conf.readsystemproperties"),
    "metrics: GET /metrics on `port` always serves Prometheus text": _keys(
        "statsProviderClass codahaleStatsCSVEndpoint codahaleStatsGraphiteEndpoint "
        "codahaleStatsJmxEndpoint codahaleStatsOutputFrequencySeconds codahaleStatsPrefix "
        "codahaleStatsSlf4jEndpoint prometheusStatsHttpAddress prometheusStatsHttpPort "
        "prometheusStatsLatencyRolloverSeconds enableStatistics exposeDefaultJVMMetrics "
        "limitStatsLogging sanityCheckMetricsEnabled"),
    "a client's setting, not a bookie's": _keys(
        "digestType passwd enableDigestTypeAutodetection "
        "reppDnsResolverClass networkTopologyScriptFileName networkTopologyScriptNumberArgs "
        "enforceMinNumFaultDomainsForWrite ignoreLocalNodeInPlacementPolicy "
        "stickyReadSEnabled reorderReadSequenceEnabled "
        "enableHealthCheck ledgerIdFormatterClass entryFormatterClass ledgerMetadataVersion "
        "bookieAddressResolverEnabled storeSystemTimeAsLedgerCreationTime available"),
    "stream storage and DistributedLog are not part of this bookie": _keys(
        "dlog.bkcAckQuorumSize dlog.bkcEnsembleSize dlog.bkcWriteQuorumSize "
        "storage.cluster.controller.schedule.interval.ms storage.range.store.dirs "
        "storage.serve.readonly.tables storageserver.grpc.port"),
    "the admin API listens on host, with the bookie's own TLS when tls_cert_file is "
    "set; its own key stores and server class are not configurable (docs/admin-api.md)":
    _keys(
        "httpServerHost httpServerClass httpServerTlsEnable "
        "httpServerKeyStorePath httpServerKeyStorePassword httpServerTrustStorePath "
        "httpServerTrustStorePassword"),
    "storage tuning of BookKeeper's other ledger storages (Sorted, Interleaved)": _keys(
        "sortedLedgerStorageEnabled skipListArenaChunkSize skipListArenaMaxAllocSize "
        "skipListSizeLimit fileInfoCacheInitialCapacity fileInfoMaxIdleTime "
        "fileInfoFormatVersionToWrite pageSize pageLimit openFileLimit "
        "maximumNumberOfActiveEntryLogs entryLogPerLedgerCounterLimitsMultFactor "
        "entrylogMapAccessExpiryTimeInSeconds"),
    "RocksDB tuning: the indexes' RocksDB options are fixed (ledgerindex/kv.py)": _keys(
        "dbStorage_rocksDB_blockCacheSize dbStorage_rocksDB_blockSize "
        "dbStorage_rocksDB_bloomFilterBitsPerKey dbStorage_rocksDB_checksum_type "
        "dbStorage_rocksDB_format_version dbStorage_rocksDB_logPath "
        "dbStorage_rocksDB_maxSizeInLevel1MB dbStorage_rocksDB_numFilesInLevel0 "
        "dbStorage_rocksDB_numLevels dbStorage_rocksDB_sstSizeInMB "
        "dbStorage_rocksDB_writeBufferSizeMB defaultRocksdbConf entryLocationRocksdbConf "
        "ledgerMetadataRocksdbConf maxOperationNumbersInSingleRocksdbWriteBatch "
        "entryLocationCompactionInterval"),
    "no read-ahead cache or direct I/O: reads go to the write cache, then the page cache": _keys(
        "dbStorage_readAheadCacheBatchBytesSize dbStorage_readAheadCacheBatchSize "
        "dbStorage_readAheadCacheMaxSizeMb dbStorage_directIOEntryLoggerMaxFdCacheTimeSeconds "
        "dbStorage_directIOEntryLoggerReadBufferSizeMB "
        "dbStorage_directIOEntryLoggerTotalReadBufferSizeMB "
        "dbStorage_directIOEntryLoggerTotalWriteBufferSizeMB"),
    "GC and compaction internals: a GC run checks ZooKeeper (gc_metadata_grace_ms) and "
    "compaction is throttled by compaction_rate_bytes": _keys(
        "gcEntryLogMetadataCacheEnabled gcEntryLogMetadataCachePath gcMetadataOpRateLimit "
        "gcOverreplicatedLedgerMaxConcurrentRequests gcOverreplicatedLedgerWaitTime "
        "verifyMetadataOnGC compactionMaxOutstandingRequests useTargetEntryLogSizeForGc "
        "useTransactionalCompaction flushEntrylogBytes entryLogFilePreallocationEnabled"),
    "bounded otherwise here: by bytes (journal_queue_max_bytes, "
    "bookie_connection_buffer_bytes) and per connection (bookie_max_reads_per_connection)": _keys(
        "journalQueueSize maxPendingReadRequestsPerThread maxBatchReadSize "
        "closeChannelOnResponseTimeout waitTimeoutOnResponseBackpressureMs"),
    "free space is kept by disk_reserved_bytes": _keys(
        "minUsableSizeForEntryLogCreation minUsableSizeForHighPriorityWrites "
        "minUsableSizeForIndexFileCreation"),
    "the number of journal and ledger dirs is fixed at creation: a change is refused at "
    "start (docs/design.md §3.8)": _keys("allowStorageExpansion"),
    "several dirs on one partition are allowed and not checked": _keys(
        "allowMultipleDirsUnderSameDiskPartition"),
    "read-only when every ledger dir or any journal dir is full; a full ledger dir takes no "
    "new ledgers (docs/design.md §3.8)": _keys("readOnlyModeOnAnyDiskFullEnabled"),
    "port 0 picks a free port here": _keys("allowEphemeralPorts"),
    "Python's ssl module (OpenSSL) is the TLS provider": _keys("tlsProvider"),
    "ZooKeeper retries and rates are the client library's": _keys(
        "zkRetryBackoffMaxMs zkRetryBackoffMaxRetries zkRetryBackoffStartMs "
        "zkRequestRateLimit"),
    "no obsolete metastore, shaded classes or class checks": _keys(
        "metastoreImplClass metastoreMaxEntriesPerScan shadedLedgerManagerFactoryClassPrefix "
        "allowShadedLedgerManagerFactoryClass ledgerManagerFactoryDisableClassCheck"),
    "the bookie process is watched by systemd (deploy/systemd), not by a death watch": _keys(
        "bookieDeathWatchInterval"),
}

#: why: keys. Any value asks for what this bookie does not do: listed at WARN.
REFUSED_GROUPS: dict[str, tuple[str, ...]] = {
    "the auditor's schedule and batching are fixed here (docs/cluster.md §4); only "
    "lostBookieRecoveryDelay, openLedgerRereplicationGracePeriod, replicationRateByBytes, "
    "auditorReplicasCheckInterval and auditorPeriodicPlacementPolicyCheckInterval are "
    "settings": _keys(
        "auditorPeriodicCheckInterval auditorPeriodicBookieCheckInterval "
        "auditorLedgerVerificationPercentage "
        "auditorMaxNumberOfConcurrentOpenLedgerOperations "
        "auditorAcquireConcurrentOpenLedgerOperationsTimeOutMSec "
        "inFlightReadEntryNumInLedgerChecker repairedPlacementPolicyNotAdheringBookieEnabled "
        "underreplicatedLedgerRecoveryGracePeriod lockReleaseOfFailedLedgerGracePeriod "
        "rwRereplicateBackoffMs rereplicationEntryBatchSize zkReplicationTaskRateLimit "
        "storeSystemTimeAsLedgerUnderreplicatedMarkTime localScrubRateLimit"),
    "the bookieId is host:bookie_port; custom ids and interfaces are not supported": _keys(
        "bookieId listeningInterface"),
    "no extra server components or registration managers are loaded": _keys(
        "extraServerComponents ignoreExtraServerComponentsStartupFailures "
        "registrationManagerClass"),
    "compaction is throttled by bytes only (compactionRateByBytes)": _keys(
        "compactionRate compactionRateByEntries"),
    "no start-up user check: run the bookie as its systemd unit's user": _keys(
        "permittedStartupUsers"),
    "OpenSSL's default cipher suites of tls_min_version and later are used": _keys(
        "tlsEnabledCipherSuites"),
}

IGNORED = {key: why for why, keys in IGNORED_GROUPS.items() for key in keys}
REFUSED = {key: why for why, keys in REFUSED_GROUPS.items() for key in keys}
KNOWN = set(MAPPED_BY_KEY) | set(SPECIAL) | set(AS_OURS) | set(IGNORED) | set(REFUSED)

_classes = [set(MAPPED_BY_KEY), set(SPECIAL), set(AS_OURS), set(IGNORED), set(REFUSED)]
assert sum(map(len, _classes)) == len(KNOWN), "BK1: a key is in two classes"
