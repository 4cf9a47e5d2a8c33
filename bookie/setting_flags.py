"""The setting flags of ``bookie serve``, ``bookie autorecovery`` and ``bookie config show``,
grouped by topic.

Every setting is a flag ``--name`` (dashes for underscores; bookie/config.py). ``--help``
lists only the settings of ``COMMON``, under their topics, and says that ``--help-all``
lists them all; ``--help-all`` prints every flag, grouped the same way. Absent flags stay
None, so that the lower layers (file, environment) show through.

Invariant SF1: every setting of bookie/settings.py is in exactly one topic of ``TOPICS``
(asserted at import), so no flag can go missing from ``--help-all``.
"""

from __future__ import annotations

import argparse
import collections

from bookie.settings import SETTINGS, SETTINGS_BY_NAME, Setting

#: (title, description, setting names), in the order ``--help`` prints them.
TOPICS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("storage", "where the data lives and how it is checked and flushed",
     ("data_dir", "journal_dirs", "ledger_dirs", "index_dirs", "checkpoint_interval_ms",
      "write_cache_max_bytes", "entrylog_max_bytes", "entrylog_cache_keep_bytes",
      "max_entry_size", "verify_digest", "skip_corrupt_journal_records")),
    ("journal", "the journal files and group commit",
     ("journal_max_bytes", "journal_prealloc_bytes", "journal_backups_count",
      "journal_queue_max_bytes", "group_max_wait_ms", "group_max_bytes")),
    ("network", "the listeners: HTTP, BookKeeper's protocol, BookKeeper's admin API",
     ("host", "port", "bookie_port", "admin_port", "admin_token", "event_loop")),
    ("cluster", "ZooKeeper membership, GC from metadata and autorecovery (docs/cluster.md)",
     ("metadata_service_uri", "bookie_id", "zk_digest", "zk_digest_file", "zk_sasl",
      "zk_sasl_file", "zk_session_timeout_ms", "gc_metadata_grace_ms", "autorecovery_daemon_enabled", "lost_bookie_recovery_delay_s",
      "open_ledger_rereplication_grace_period_s", "rereplication_rate_bytes",
      "replicas_check_interval_s")),
    ("placement", "where copies go: this bookie's location and the placement policy",
     ("topology_location", "topology_host", "placement_policy",
      "placement_min_racks_per_write_quorum", "placement_min_zones_per_write_quorum",
      "placement_desired_zones_per_write_quorum", "placement_strict",
      "placement_check_interval_s")),
    ("TLS", "HTTPS, START_TLS and mutual TLS (docs/operations.md, \"TLS\")",
     ("tls_cert_file", "tls_key_file", "tls_key_password", "tls_ca_file",
      "tls_authorized_roles", "tls_trust_file", "tls_client_cert_file", "tls_client_key_file",
      "tls_min_version", "tls_refresh_interval_s")),
    ("disk", "disk usage: when the bookie goes read-only and back",
     ("disk_usage_threshold", "disk_usage_warn_threshold", "disk_usage_lwm_threshold",
      "disk_check_interval_ms", "disk_reserved_bytes")),
    ("GC and compaction", "deleting ledgers and rewriting entry logs",
     ("gc_interval_ms", "minor_compaction_threshold", "minor_compaction_interval_ms",
      "major_compaction_threshold", "major_compaction_interval_ms", "compaction_throttle",
      "compaction_rate_bytes", "compaction_rate_entries", "gc_force_when_full")),
    ("limits", "what one request or connection may hold, and for how long",
     ("max_read_batch", "max_lac_waiters", "request_body_timeout_ms",
      "request_bodies_max_bytes", "bookie_max_pending_adds", "bookie_add_wait_ms",
      "bookie_max_reads_per_connection", "bookie_max_reads_in_progress",
      "bookie_connection_buffer_bytes", "bookie_answer_bytes_max", "bookie_request_bytes_max",
      "bookie_frame_timeout_ms", "bookie_long_polls_per_connection")),
    ("logging", "the log lines on stderr",
     ("log_format", "log_level")),
)

#: The flags plain ``--help`` shows: what a first start needs.
COMMON = frozenset(("data_dir", "journal_dirs", "ledger_dirs", "host", "port", "bookie_port",
                    "admin_port", "metadata_service_uri", "tls_cert_file", "tls_key_file",
                    "log_format", "log_level"))

_placed = collections.Counter(name for _, _, names in TOPICS for name in names)
assert _placed == collections.Counter(s.name for s in SETTINGS), "SF1: " + ", ".join(
    sorted(set(_placed.elements()) ^ set(SETTINGS_BY_NAME)) or
    [name for name, count in _placed.items() if count > 1])
assert COMMON <= set(SETTINGS_BY_NAME)


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def flag_help(setting: Setting) -> str:
    default_text = "none" if setting.default is None else setting.default
    return f"{setting.help} (default {default_text}; env BOOKIE_{setting.name.upper()})"


class _HelpAll(argparse.Action):
    """``--help-all``: every setting flag's help put back, the help printed, exit 0."""

    def __init__(self, option_strings, dest, hidden=(), quiet_groups=(), **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.hidden, self.quiet_groups = hidden, quiet_groups

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        for action, text in self.hidden:
            action.help = text
        for group, description in self.quiet_groups:
            group.description = description
        parser.epilog = None
        parser.print_help()
        parser.exit()


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One ``--name`` flag per setting, in one argument group per topic; ``--help`` shows
    COMMON's, ``--help-all`` every one. The usage line says ``[--SETTING VALUE ...]`` for
    them all (one line, not forty)."""
    parser.usage = parser.format_usage().split(": ", 1)[1].strip() + \
        " [--help-all] [--SETTING VALUE ...]"
    hidden, quiet_groups = [], []
    for title, description, names in TOPICS:
        shown = COMMON.intersection(names)
        group = parser.add_argument_group(f"{title} settings",
                                          description if shown else None)
        if not shown:  # a title alone prints nothing: argparse skips an empty section
            quiet_groups.append((group, description))
        for name in names:
            setting = SETTINGS_BY_NAME[name]
            text = flag_help(setting)
            action = group.add_argument(flag_of(name), dest=name, default=None,
                                        metavar=setting.kind.__name__.upper(), help=text)
            if name not in COMMON:
                action.help = argparse.SUPPRESS  # until --help-all
                hidden.append((action, text))
    parser.add_argument("--help-all", action=_HelpAll, hidden=tuple(hidden),
                        quiet_groups=tuple(quiet_groups),
                        help="show every setting's flag, by topic, and exit")
    parser.epilog = (f"{len(hidden)} more settings are not shown: --help-all lists every "
                     f"one, by topic. Each is also a TOML key of --config and a BOOKIE_* "
                     f"variable (docs/operations.md §2).")
