"""Every setting of the bookie: name, type, default, help and bounds, in one table.

docs/http-api.md's table names come first and are contracts; the rest are this project's
additions (docs/operations.md §2.1). ``bookie.config`` loads, checks and renders them; this
module is the table alone, so that it can grow without the loader growing with it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    kind: type
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    secret: bool = False


SETTINGS: tuple[Setting, ...] = (
    # docs/http-api.md's table: these names are contracts.
    Setting("data_dir", str, "./data", "root of the journal and ledger dirs"),
    Setting("host", str, "127.0.0.1", "listen address"),
    Setting("port", int, 3180, "listen port (0 picks a free one)", 0, 65535),
    Setting("admin_token", str, None, "bearer token for admin endpoints", secret=True),
    Setting("metadata_service_uri", str, None,
            "the cluster's ZooKeeper, zk://host:port[,host:port]/ledgers (docs/cluster.md); "
            "unset: a standalone bookie"),
    Setting("journal_max_bytes", int, 2 * GiB, "journal file roll size", 64 * KiB, 2**62),
    Setting("entrylog_max_bytes", int, 1 * GiB,
            "entry log roll size; the log is finalized with its ledgersMap", 4 * KiB, 1 * GiB),
    Setting("checkpoint_interval_ms", int, 10_000, "periodic checkpoint", 1, 86_400_000),
    Setting("group_max_wait_ms", float, 2.0,
            "longest an add waits for its group commit to start", 0, 1000),
    Setting("max_entry_size", int, 5 * MiB, "largest entry body", 64, 64 * MiB),
    Setting("verify_digest", bool, True, "recompute CRC digests on add and replay"),
    # Additions (docs/operations.md §2.1).
    Setting("group_max_bytes", int, 512 * KiB,
            "bytes buffered before a group is flushed (journalBufferedWritesThreshold)",
            512, 256 * MiB),
    Setting("journal_prealloc_bytes", int, 16 * MiB,
            "zero-filled journal preallocation chunk", 4 * KiB, 1 * GiB),
    Setting("journal_dirs", str, None,
            "comma-separated journal dirs, each with its own journal and group-commit "
            "thread; a ledger's records go to journal ledgerId mod count "
            "(journalDirectories); unset: <data_dir>/journal"),
    Setting("ledger_dirs", str, None,
            "comma-separated ledger dirs, each with its own entry logs, index and disk "
            "check; a new ledger goes to dir ledgerId mod count, or the next one not full "
            "(ledgerDirectories); unset: <data_dir>/ledgers"),
    Setting("index_dirs", str, None,
            "comma-separated index dirs, one per ledger dir (same count): ledger dir i keeps "
            "its RocksDB indexes in index dir i's current/locations and current/ledgers, "
            "e.g. on a faster disk (indexDirectories); unset: in each ledger dir"),
    Setting("journal_backups_count", int, 5,
            "journal files below lastMark kept (journalMaxBackups)", 0, 10_000),
    Setting("journal_queue_max_bytes", int, 64 * MiB,
            "bytes queued for the journal before adds get 503", 1 * MiB, 16 * GiB),
    Setting("write_cache_max_bytes", int, 256 * MiB,
            "write cache budget; a checkpoint starts at half", 1 * MiB, 64 * GiB),
    Setting("max_read_batch", int, 1000, "most entries in one range read", 1, 1_000_000),
    Setting("skip_corrupt_journal_records", bool, False,
            "on replay, abandon the rest of a journal at a corrupt record instead of "
            "refusing to start (skipReplayJournalInvalidRecord)"),
    Setting("disk_usage_threshold", float, 0.95,
            "used fraction of a data dir's disk at which the bookie goes read-only", 0.01, 1.0),
    Setting("disk_usage_warn_threshold", float, 0.90,
            "used fraction at which a warning is logged and compaction pauses", 0.01, 1.0),
    Setting("disk_usage_lwm_threshold", float, 0.90,
            "used fraction below which a full bookie becomes writable again", 0.01, 1.0),
    Setting("disk_check_interval_ms", int, 1000, "how often disk usage is checked", 10,
            3_600_000),
    Setting("disk_reserved_bytes", int, 16 * MiB,
            "free bytes kept for fences, recovery adds and explicit LACs while read-only",
            0, 1 << 50),
    Setting("max_lac_waiters", int, 10_000, "most concurrent LAC long polls", 1, 10_000_000),
    Setting("request_body_timeout_ms", int, 30_000,
            "longest a request body may take to arrive (400 after it)", 1, 3_600_000),
    Setting("request_bodies_max_bytes", int, 256 * MiB,
            "request body bytes held at once; past it requests get 503", 1 * MiB, 64 * GiB),
    Setting("gc_interval_ms", int, 900_000,
            "how often garbage collection runs (gcWaitTime); 0 = only on request",
            0, 7 * 86_400_000),
    Setting("gc_metadata_grace_ms", int, 3_600_000,
            "a cluster bookie deletes a local ledger its metadata no longer lists once it has "
            "been missing this long (seen at GC runs); 0 = at the first GC that misses it",
            0, 30 * 86_400_000),
    Setting("autorecovery_daemon_enabled", bool, True,
            "a cluster bookie also runs autorecovery: a vote in the auditor election and a "
            "replication worker (autoRecoveryDaemonEnabled)"),
    Setting("lost_bookie_recovery_delay_s", int, 30,
            "how long a bookie may be gone before the auditor marks its ledgers "
            "under-replicated; the first auditor stores it in ZooKeeper, where it is then "
            "read (lostBookieRecoveryDelay)", 0, 30 * 86_400),
    Setting("open_ledger_rereplication_grace_period_s", int, 30,
            "how long an open ledger whose last segment lost a bookie is left to its writer "
            "before autorecovery fences and closes it (openLedgerRereplicationGracePeriod)",
            0, 30 * 86_400),
    Setting("rereplication_rate_bytes", int, 32 * MiB,
            "bytes per second a replication worker may copy; 0 = unthrottled "
            "(replicationRateByBytes)", 0, 1 << 40),
    Setting("replicas_check_interval_s", int, 86_400,
            "how often the auditor asks every bookie which entries it holds and marks ledgers "
            "missing copies; 0 = never (auditorPeriodicReplicasCheckInterval)",
            0, 365 * 86_400),
    Setting("topology_location", str, None,
            "this bookie's network location, /zone/rack (BookKeeper's /region/rack; a "
            "one-level /rack is in default-region), published in its registration for "
            "placement (docs/cluster.md §6); unset: /default-region/default-rack"),
    Setting("topology_host", str, None,
            "the machine this bookie runs on, for host-aware placement (several bookies on "
            "one host share it); unset: the host of the bookie's id"),
    Setting("placement_policy", str, "rack",
            "where this bookie's autorecovery places copies: random, host (no two copies of "
            "an entry on one host), rack (minNumRacksPerWriteQuorum), zone (min and desired "
            "zones per write set); BookKeeper's ensemblePlacementPolicy",
            choices=("random", "host", "rack", "zone")),
    Setting("placement_min_racks_per_write_quorum", int, 2,
            "rack policy: racks every write set spans, at most Qw (minNumRacksPerWriteQuorum)",
            1, 64),
    Setting("placement_min_zones_per_write_quorum", int, 2,
            "zone policy: zones every write set must span (minNumZonesPerWriteQuorum)", 1, 64),
    Setting("placement_desired_zones_per_write_quorum", int, 3,
            "zone policy: zones a write set spans to meet the policy strictly "
            "(desiredNumZonesPerWriteQuorum)", 1, 64),
    Setting("placement_strict", bool, False,
            "refuse a placement that breaks the policy instead of placing it anyway and "
            "counting it; also keeps bookies of the default rack out "
            "(enforceMinNumRacksPerWriteQuorum, enforceStrictZoneawarePlacement)"),
    Setting("placement_check_interval_s", int, 0,
            "how often the auditor finds closed ledgers whose write sets break the placement "
            "policy and marks them for the workers to repair; 0 = never "
            "(auditorPeriodicPlacementPolicyCheckInterval)", 0, 365 * 86_400),
    Setting("minor_compaction_threshold", float, 0.2,
            "minor compaction rewrites logs whose live fraction is below this; 0 = off",
            0.0, 1.0),
    Setting("minor_compaction_interval_ms", int, 3_600_000,
            "least time between minor compactions; 0 = only when forced", 0, 30 * 86_400_000),
    Setting("major_compaction_threshold", float, 0.8,
            "major compaction rewrites logs whose live fraction is below this; 0 = off",
            0.0, 1.0),
    Setting("major_compaction_interval_ms", int, 86_400_000,
            "least time between major compactions; 0 = only when forced", 0, 30 * 86_400_000),
    Setting("gc_force_when_full", bool, False,
            "while a ledger or journal dir is over disk_usage_warn_threshold, compact (major "
            "threshold) at every GC run instead of pausing, and start a run as soon as it goes "
            "over (BookKeeper's isForceGCAllowWhenNoSpace; the Pulsar chart sets it): space "
            "comes back sooner, at the risk of filling the disk with the copies first"),
    Setting("compaction_throttle", str, "bytes",
            "what the compaction throttle counts: bytes (compaction_rate_bytes) or entries "
            "re-added (compaction_rate_entries); BookKeeper's isThrottleByBytes, whose "
            "default is entries", choices=("bytes", "entries")),
    Setting("compaction_rate_bytes", int, 32 * MiB,
            "compaction_throttle bytes: bytes per second compaction may read plus write "
            "(compactionRateByBytes); 0 = unthrottled", 0, 1 << 40),
    Setting("compaction_rate_entries", int, 1000,
            "compaction_throttle entries: entries per second compaction may re-add, "
            "whatever their size (compactionRateByEntries); 0 = unthrottled", 0, (1 << 31) - 1),
    Setting("entrylog_cache_keep_bytes", int, 256 * MiB,
            "synced bytes of the active entry log kept in the page cache behind its end; "
            "older ones are dropped after each checkpoint (reads of them go to the disk)",
            0, 2**62),
    Setting("bookie_port", int, None,
            "port of the second listener, Apache BookKeeper's own binary protocol (v2 and "
            "v3 on one port; START_TLS when tls_cert_file is set; docs/"
            "bookkeeper-protocol.md); BookKeeper's default is 3181; unset: off; 0 picks a "
            "free one", 0, 65535),
    Setting("admin_port", int, None,
            "port of Apache BookKeeper's admin REST API (its httpServerPort: /api/v1/bookie/"
            "state, /api/v1/bookie/is_ready, autorecovery, ledgers; docs/admin-api.md), "
            "served beside the others; BookKeeper's default is 8000; unset: off; 0 picks a "
            "free one", 0, 65535),
    Setting("bookie_max_pending_adds", int, 10_000,
            "adds in flight on one BookKeeper-protocol connection; more wait, the connection "
            "not reading (docs/bookkeeper-protocol.md §8; BookKeeper's "
            "maxPendingAddRequestsPerThread)", 1, 1_000_000),
    Setting("bookie_add_wait_ms", int, 10_000,
            "how long a BookKeeper-protocol add may wait for room in the journal queue or "
            "the write cache, or for a slot of bookie_max_pending_adds, before it is "
            "answered ETOOMANYREQUESTS (BookKeeper's dbStorage_maxThrottleTimeMs); 0: "
            "refused at once", 0, 3_600_000),
    Setting("bookie_max_reads_per_connection", int, 500,
            "requests other than adds one BookKeeper-protocol connection may have begun and "
            "not yet answered; more wait, the connection not reading (docs/"
            "bookkeeper-protocol.md §8)", 1, 1_000_000),
    Setting("bookie_max_reads_in_progress", int, 1_000,
            "the same, for every connection of the port together (BookKeeper's "
            "maxReadsInProgressLimit)", 1, 10_000_000),
    Setting("bookie_connection_buffer_bytes", int, 4 * MiB,
            "answers a BookKeeper-protocol client may leave unread before its connection "
            "stops reading and begins no read", 64 * KiB, 1 * GiB),
    Setting("bookie_answer_bytes_max", int, 256 * MiB,
            "answers unread by every BookKeeper-protocol client together before no "
            "connection begins a read", 1 * MiB, 1 << 40),
    Setting("bookie_request_bytes_max", int, 256 * MiB,
            "bytes of BookKeeper-protocol requests held at once: read ahead of decoding, "
            "and frames not yet whole (their announced length)", 1 * MiB, 1 << 40),
    Setting("bookie_frame_timeout_ms", int, 30_000,
            "a BookKeeper-protocol frame must come whole within this of its start, else "
            "its connection is closed", 100, 3_600_000),
    Setting("bookie_long_polls_per_connection", int, 2_500,
            "LAC long polls one BookKeeper-protocol connection may hold of max_lac_waiters; "
            "more are answered ETOOMANYREQUESTS", 1, 10_000_000),
    Setting("event_loop", str, "uvloop",
            "the daemon's event loop: uvloop where it is installed (asyncio's own otherwise)",
            choices=("uvloop", "asyncio")),
    Setting("zk_digest", str, None,
            "ZooKeeper digest credentials user:password: the session authenticates and "
            "every znode it creates is that identity's alone (docs/operations.md §7); give "
            "it in the environment (BOOKIE_ZK_DIGEST) or the TOML file, not as a flag",
            secret=True),
    Setting("zk_digest_file", str, None, "a file holding the ZooKeeper user:password"),
    Setting("zk_sasl", str, None,
            "ZooKeeper SASL (DIGEST-MD5) credentials user:password, a user of ZooKeeper's JAAS "
            "Server section: the session logs in and every znode it creates is sasl:user's "
            "alone, the ACL of BookKeeper's zkEnableSecurity tools (docs/operations.md §7); "
            "not with zk_digest; give it in the environment (BOOKIE_ZK_SASL) or the TOML "
            "file, not as a flag", secret=True),
    Setting("zk_sasl_file", str, None, "a file holding the ZooKeeper SASL user:password"),
    Setting("zk_session_timeout_ms", int, 10_000,
            "ZooKeeper session timeout: past it without ZooKeeper, the bookie's registration "
            "(an ephemeral znode) is gone (BookKeeper's zkTimeout)", 1_000, 600_000),
    Setting("bookie_id", str, None,
            "the id this bookie registers, and keeps its cookie, under in its cluster "
            "(BookKeeper's bookieId; with --conf, useHostNameAsBookieID gives "
            "<hostname>:<bookiePort>); unset: host:port. Changing it makes another bookie "
            "of the same disks: the cookie check refuses that"),
    Setting("tls_cert_file", str, None,
            "PEM certificate chain of the HTTPS listener; set with tls_key_file, the bookie "
            "serves HTTPS only (docs/operations.md, \"TLS\"); unset: plain HTTP"),
    Setting("tls_key_file", str, None, "PEM private key of tls_cert_file"),
    Setting("tls_key_password", str, None,
            "password of an encrypted tls_key_file (give it in the environment or the "
            "TOML file, not as a flag: a command line is visible to every local user)",
            secret=True),
    Setting("tls_ca_file", str, None,
            "PEM CA bundle: when set, every client must present a certificate it signed "
            "(mutual TLS)"),
    Setting("tls_authorized_roles", str, None,
            "comma-separated roles, one of which a client certificate must carry on "
            "bookie_port (its OU's 0:<role>, as BookKeeper's BookieAuthZFactory and "
            "authorizedRoles); needs tls_ca_file; unset: any certificate of the CA"),
    Setting("tls_trust_file", str, None,
            "PEM CA bundle that signed the other bookies' certificates, for this process's "
            "own connections to them (autorecovery); default tls_ca_file"),
    Setting("tls_client_cert_file", str, None,
            "PEM certificate this process shows when it connects to bookies that ask for "
            "one (mutual TLS); default tls_cert_file"),
    Setting("tls_client_key_file", str, None, "PEM private key of tls_client_cert_file"),
    Setting("tls_min_version", str, "1.2", "oldest TLS version accepted",
            choices=("1.2", "1.3")),
    Setting("tls_refresh_interval_s", int, 0,
            "how often tls_cert_file and tls_key_file are read again: when their bytes "
            "changed (a secret rotated in place, as cert-manager does), new handshakes of "
            "every listener get the new chain, as on SIGHUP; one that does not load is "
            "logged once and the old one stays (tlsCertFilesRefreshDurationSeconds); "
            "0 = only on SIGHUP", 0, 30 * 86_400),
    Setting("log_format", str, "text", "log line format", choices=("text", "json")),
    Setting("log_level", str, "info", "log level",
            choices=("debug", "info", "warning", "error")),
)
SETTINGS_BY_NAME = {s.name: s for s in SETTINGS}
