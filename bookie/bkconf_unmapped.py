"""bk_server.conf's keys that map onto no setting (bookie/bkconf_keys.py's IGNORED and
REFUSED classes), grouped by the reason ``bookie config show`` and the start's summary give:
data only, split from bookie/bkconf_keys.py so each table stays one screen of one kind."""

from __future__ import annotations


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
        "bookieAddressResolverEnabled storeSystemTimeAsLedgerCreationTime available "
        "useV2WireProtocol"),
    "the auditor checks for lost bookies every second and on each change of the "
    "registrations (api/cluster/autorecovery/auditor.py), more often than any interval "
    "asks": _keys("auditorPeriodicBookieCheckInterval"),
    "a re-replication copy is bounded by bytes in flight (4 MiB) and "
    "rereplication_rate_bytes, not by a count of entries": _keys(
        "rereplicationEntryBatchSize"),
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
    "auditorReplicasCheckInterval, auditorPeriodicCheckInterval and "
    "auditorPeriodicPlacementPolicyCheckInterval are settings": _keys(
        "auditorLedgerVerificationPercentage "
        "auditorMaxNumberOfConcurrentOpenLedgerOperations "
        "auditorAcquireConcurrentOpenLedgerOperationsTimeOutMSec "
        "inFlightReadEntryNumInLedgerChecker repairedPlacementPolicyNotAdheringBookieEnabled "
        "underreplicatedLedgerRecoveryGracePeriod lockReleaseOfFailedLedgerGracePeriod "
        "rwRereplicateBackoffMs zkReplicationTaskRateLimit "
        "storeSystemTimeAsLedgerUnderreplicatedMarkTime localScrubRateLimit"),
    "the bookie listens on host (or advertisedAddress); an interface name is not "
    "resolved": _keys("listeningInterface"),
    "no extra server components or registration managers are loaded": _keys(
        "extraServerComponents ignoreExtraServerComponentsStartupFailures "
        "registrationManagerClass"),
    "no start-up user check: run the bookie as its systemd unit's user": _keys(
        "permittedStartupUsers"),
    "OpenSSL's default cipher suites of tls_min_version and later are used": _keys(
        "tlsEnabledCipherSuites"),
}
