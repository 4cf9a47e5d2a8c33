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

from bookie.bkconf_unmapped import IGNORED_GROUPS, REFUSED_GROUPS
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


def _throttle(text: str) -> str:
    return "bytes" if _bool(text) else "entries"


def _zero_below_1(text: str) -> int:
    return max(_int(text), 0)


def _frame_to_entry(text: str) -> int:
    return _int(text) - FRAME_OVERHEAD


MAPPED: tuple[Mapped, ...] = (
    Mapped("bookiePort", "bookie_port", _int, "as is"),
    Mapped("zkTimeout", "zk_session_timeout_ms", _int, "ms, as is"),
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
    Mapped("isForceGCAllowWhenNoSpace", "gc_force_when_full", _bool, "as is"),
    Mapped("isThrottleByBytes", "compaction_throttle", _throttle,
           "true: bytes, false: entries (absent: ours, bytes)"),
    Mapped("compactionRateByEntries", "compaction_rate_entries", _int,
           "entries/s, as is (0 = unthrottled)"),
    Mapped("tlsCertFilesRefreshDurationSeconds", "tls_refresh_interval_s", _zero_below_1,
           "s; 0 or less (off) becomes 0"),
    Mapped("autoRecoveryDaemonEnabled", "autorecovery_daemon_enabled", _bool, "as is"),
    Mapped("lostBookieRecoveryDelay", "lost_bookie_recovery_delay_s", _int, "s, as is"),
    Mapped("openLedgerRereplicationGracePeriod", "open_ledger_rereplication_grace_period_s",
           _ms_to_s, "ms ÷ 1000, rounded up"),
    Mapped("replicationRateByBytes", "rereplication_rate_bytes", _unthrottled_below_1,
           "bytes/s; -1 (unthrottled) becomes 0"),
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
    "indexDirectories": "`index_dirs` (ledger dir i's RocksDB indexes in index dir i's "
                        "current/); the same dirs as ledgerDirectories: ignored; another "
                        "count than ledgerDirectories: refused, exit 78",
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
    "allowLoopback": "false with a loopback `host`, or a `bookie_id` whose host resolves to "
                     "one: exit 78, as BookKeeper refuses to start",
    "useHostNameAsBookieID": "true: `bookie_id` = <this host's canonical name>:<bookiePort> "
                             "(advertisedAddress wins, as in BookKeeper); false: ignored",
    "useShortHostName": "with useHostNameAsBookieID: the name up to its first dot",
    "bookieId": "`bookie_id`, as is (wins over the others, as in BookKeeper)",
    "compactionRate": "`compaction_rate_entries` when compactionRateByEntries is not set "
                      "(BookKeeper's older key), else ignored",
    "auditorReplicasCheckInterval": "`replicas_check_interval_s`, s (0 = never, both); "
                                    "with auditorPeriodicCheckInterval, the shorter non-zero",
    "auditorPeriodicCheckInterval": "`replicas_check_interval_s` too: the replica check "
                                    "covers BookKeeper's check of all ledgers (every "
                                    "closed fragment's entries on each of its bookies)",
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
    "forceAllowCompaction": (("true",), "a requested compaction (POST /v1/bookie/gc with "
                                        "force, the admin API's gc) runs whenever its "
                                        "threshold is above 0, whatever the intervals"),
    "disableServerSocketBind": (("false",), "the bookie always listens"),
    "enableLocalTransport": (("false",), "no in-JVM transport"),
    "localConsistencyCheckOnStartup": (("false",), "scrubbing is offline: bookie shell "
                                                   "scrub"),
    "localScrubInterval": (("0",), "scrubbing is offline: bookie shell scrub"),
    "dataIntegrityChecking": (("false",), "no data-integrity cookie stamping"),
    "dataIntegrityStampMissingCookies": (("false",), "no data-integrity cookie stamping"),
    "maxAddsInProgressLimit": (("0",), "adds are bounded per connection "
                                       "(bookie_max_pending_adds: more wait) and by "
                                       "journal_queue_max_bytes"),
    "minorCompactionMaxTimeMillis": (("-1", "0"), "compaction is bounded by "
                                                  "compaction_rate_bytes, not by time"),
    "majorCompactionMaxTimeMillis": (("-1", "0"), "compaction is bounded by "
                                                  "compaction_rate_bytes, not by time"),
}


IGNORED = {key: why for why, keys in IGNORED_GROUPS.items() for key in keys}
REFUSED = {key: why for why, keys in REFUSED_GROUPS.items() for key in keys}
KNOWN = set(MAPPED_BY_KEY) | set(SPECIAL) | set(AS_OURS) | set(IGNORED) | set(REFUSED)

_classes = [set(MAPPED_BY_KEY), set(SPECIAL), set(AS_OURS), set(IGNORED), set(REFUSED)]
assert sum(map(len, _classes)) == len(KNOWN), "BK1: a key is in two classes"
