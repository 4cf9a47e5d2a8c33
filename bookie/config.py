"""Configuration: defaults < TOML file < ``BOOKIE_*`` environment < command-line flags
(with ``--conf``, BookKeeper's bk_server.conf between the defaults and the TOML file:
bookie/bkconf.py).

Every setting has three spellings (docs/http-api.md, "CLI"): TOML key ``name``, environment variable
``BOOKIE_NAME`` and flag ``--name`` (dashes for underscores). docs/http-api.md's table names are
contracts; the settings after them are this project's additions and are documented in
docs/operations.md §2.1. Unknown TOML keys and ``BOOKIE_*`` variables are rejected with the key
named, and every value is range-checked before the bookie touches a file.

``BookieConfig`` is frozen; ``load_config`` also returns where each value came from, for
``bookie config show``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from typing import Any, Mapping

from bookie.location import BadLocation, parse_location
from bookie.settings import SETTINGS, SETTINGS_BY_NAME, GiB, KiB, MiB, Setting

#: The process exit code for a configuration that does not validate (sysexits EX_CONFIG).
EXIT_BAD_CONFIG = 78
#: ZooKeeper credentials refused as flags (docs/operations.md §7): their ``_file`` twins
#: and the environment are the ways in.
PASSWORDS_NOT_FLAGS = ("zk_digest", "zk_sasl")


class ConfigError(ValueError):
    """A setting that is unknown, unparsable or out of range; the message names it."""


def split_dirs(listed: str | None, data_dir: str, default: str) -> list[str]:
    """``journal_dirs``/``ledger_dirs`` as paths: comma-separated as BookKeeper's
    journalDirectories and ledgerDirectories; unset, the one dir under ``data_dir``."""
    if listed is None:
        return [os.path.join(data_dir, default)]
    return [part.strip() for part in listed.split(",") if part.strip()]




@dataclasses.dataclass(frozen=True)
class BookieConfig:
    data_dir: str = "./data"
    host: str = "127.0.0.1"
    port: int = 3180
    admin_token: str | None = None
    metadata_service_uri: str | None = None
    journal_max_bytes: int = 2 * GiB
    entrylog_max_bytes: int = 1 * GiB
    checkpoint_interval_ms: int = 10_000
    group_max_wait_ms: float = 2.0
    max_entry_size: int = 5 * MiB
    verify_digest: bool = True
    group_max_bytes: int = 512 * KiB
    journal_prealloc_bytes: int = 16 * MiB
    journal_dirs: str | None = None
    ledger_dirs: str | None = None
    index_dirs: str | None = None
    journal_backups_count: int = 5
    journal_queue_max_bytes: int = 64 * MiB
    write_cache_max_bytes: int = 256 * MiB
    max_read_batch: int = 1000
    skip_corrupt_journal_records: bool = False
    disk_usage_threshold: float = 0.95
    disk_usage_warn_threshold: float = 0.90
    disk_usage_lwm_threshold: float = 0.90
    disk_check_interval_ms: int = 1000
    disk_reserved_bytes: int = 16 * MiB
    max_lac_waiters: int = 10_000
    request_body_timeout_ms: int = 30_000
    request_bodies_max_bytes: int = 256 * MiB
    gc_interval_ms: int = 900_000
    gc_metadata_grace_ms: int = 3_600_000
    autorecovery_daemon_enabled: bool = True
    lost_bookie_recovery_delay_s: int = 30
    open_ledger_rereplication_grace_period_s: int = 30
    rereplication_rate_bytes: int = 32 * MiB
    replicas_check_interval_s: int = 86_400
    topology_location: str | None = None
    topology_host: str | None = None
    placement_policy: str = "rack"
    placement_min_racks_per_write_quorum: int = 2
    placement_min_zones_per_write_quorum: int = 2
    placement_desired_zones_per_write_quorum: int = 3
    placement_strict: bool = False
    placement_check_interval_s: int = 0
    minor_compaction_threshold: float = 0.2
    minor_compaction_interval_ms: int = 3_600_000
    major_compaction_threshold: float = 0.8
    major_compaction_interval_ms: int = 86_400_000
    gc_force_when_full: bool = False
    compaction_throttle: str = "bytes"
    compaction_rate_bytes: int = 32 * MiB
    compaction_rate_entries: int = 1000
    entrylog_cache_keep_bytes: int = 256 * MiB
    bookie_port: int | None = None
    admin_port: int | None = None
    bookie_max_pending_adds: int = 10_000
    bookie_add_wait_ms: int = 10_000
    bookie_max_reads_per_connection: int = 500
    bookie_max_reads_in_progress: int = 1_000
    bookie_connection_buffer_bytes: int = 4 * MiB
    bookie_answer_bytes_max: int = 256 * MiB
    bookie_request_bytes_max: int = 256 * MiB
    bookie_frame_timeout_ms: int = 30_000
    bookie_long_polls_per_connection: int = 2_500
    event_loop: str = "uvloop"
    zk_digest: str | None = None
    zk_digest_file: str | None = None
    zk_sasl: str | None = None
    zk_sasl_file: str | None = None
    zk_session_timeout_ms: int = 10_000
    bookie_id: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_key_password: str | None = None
    tls_ca_file: str | None = None
    tls_authorized_roles: str | None = None
    tls_trust_file: str | None = None
    tls_client_cert_file: str | None = None
    tls_client_key_file: str | None = None
    tls_min_version: str = "1.2"
    tls_refresh_interval_s: int = 0
    log_format: str = "text"
    log_level: str = "info"

    @property
    def journal_dirs_current(self) -> tuple[str, ...]:
        """Each journal dir's ``current/``, in the order given (journal i of ledgerId mod n)."""
        return tuple(os.path.join(d, "current")
                     for d in split_dirs(self.journal_dirs, self.data_dir, "journal"))

    @property
    def ledger_dirs_current(self) -> tuple[str, ...]:
        """Each ledger dir's ``current/``, in the order given (docs/design.md §3.8)."""
        return tuple(os.path.join(d, "current")
                     for d in split_dirs(self.ledger_dirs, self.data_dir, "ledgers"))

    @property
    def index_dirs_current(self) -> tuple[str, ...]:
        """Each ledger dir's index dir's ``current/`` (holding ``locations`` and ``ledgers``),
        in the ledger dirs' order: index dir i serves ledger dir i, as BookKeeper's
        DbLedgerStorage pairs them; unset, each ledger dir's own ``current/``."""
        if self.index_dirs is None:
            return self.ledger_dirs_current
        return tuple(os.path.join(d, "current") for d in split_dirs(self.index_dirs, "", ""))

    @property
    def separate_index_dirs(self) -> tuple[str, ...]:
        """The index dirs' ``current/`` that are not their ledger dir's (each holds its own
        IDENTITY, VERSION and disk check, as BookKeeper's indexDirsManager)."""
        return tuple(i for i, d in zip(self.index_dirs_current, self.ledger_dirs_current)
                     if os.path.realpath(i) != os.path.realpath(d))

    @property
    def journal_dir(self) -> str:
        """The first journal dir's ``current/``: the only one unless ``journal_dirs``."""
        return self.journal_dirs_current[0]

    @property
    def ledger_dir(self) -> str:
        """The first ledger dir's ``current/``: the only one unless ``ledger_dirs``."""
        return self.ledger_dirs_current[0]

    @property
    def tls(self) -> bool:
        """Whether the listener serves HTTPS (and only HTTPS)."""
        return self.tls_cert_file is not None

    def replace(self, **changes) -> "BookieConfig":
        return validated(dataclasses.replace(self, **changes))


assert {f.name for f in dataclasses.fields(BookieConfig)} == set(SETTINGS_BY_NAME)
assert all(getattr(BookieConfig(), s.name) == s.default for s in SETTINGS)

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": KiB, "M": MiB, "G": GiB, "T": 1024 * GiB}


def _parse_int(text: str) -> int:
    """An integer, optionally with a binary size suffix: 64MiB, 2G, 512k."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not an integer or a size like 64MiB")
    unit = (match.group(2) or "").upper()[:1]
    return int(match.group(1)) * _UNITS[unit]


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean (true/false)")


def coerce(setting: Setting, value: Any) -> Any:
    """Turn a TOML value or a string from env/flags into the setting's type."""
    if value is None:
        return None
    try:
        if setting.kind is bool:
            return value if isinstance(value, bool) else _parse_bool(str(value))
        if setting.kind is int:
            if isinstance(value, bool):
                raise ValueError("a boolean is not an integer")
            return value if isinstance(value, int) else _parse_int(str(value))
        if setting.kind is float:
            if isinstance(value, bool):
                raise ValueError("a boolean is not a number")
            return float(value)
        return str(value)
    except ValueError as exc:
        raise ConfigError(f"setting {setting.name}: {exc}") from None


def check_range(setting: Setting, value: Any) -> None:
    if value is None:
        return
    if setting.minimum is not None and value < setting.minimum:
        raise ConfigError(f"setting {setting.name} = {value} is below its minimum "
                          f"{setting.minimum}")
    if setting.maximum is not None and value > setting.maximum:
        raise ConfigError(f"setting {setting.name} = {value} is above its maximum "
                          f"{setting.maximum}")
    if setting.choices and value not in setting.choices:
        raise ConfigError(f"setting {setting.name} = {value!r} is not one of "
                          f"{', '.join(setting.choices)}")


def validated(config: BookieConfig) -> BookieConfig:
    for setting in SETTINGS:
        check_range(setting, getattr(config, setting.name))
    if not (config.disk_usage_lwm_threshold <= config.disk_usage_threshold
            and config.disk_usage_warn_threshold <= config.disk_usage_threshold):
        raise ConfigError("settings disk_usage_lwm_threshold and disk_usage_warn_threshold "
                          "must not exceed disk_usage_threshold")
    if 0 < config.major_compaction_threshold < config.minor_compaction_threshold:
        raise ConfigError("setting minor_compaction_threshold must not exceed "
                          "major_compaction_threshold (BookKeeper's rule)")
    if (config.tls_cert_file is None) != (config.tls_key_file is None):
        raise ConfigError("settings tls_cert_file and tls_key_file go together: set both "
                          "for HTTPS, neither for plain HTTP")
    if config.tls_cert_file is None and (config.tls_ca_file or config.tls_key_password):
        raise ConfigError("settings tls_ca_file and tls_key_password need tls_cert_file and "
                          "tls_key_file (a process that only connects to TLS bookies sets "
                          "tls_trust_file)")
    if (config.zk_digest or config.zk_digest_file) and (config.zk_sasl or config.zk_sasl_file):
        # ZA3 (api/client/zk_auth.py): one identity owns the tree, under one scheme
        raise ConfigError("settings zk_digest/zk_digest_file and zk_sasl/zk_sasl_file "
                          "exclude each other: ZooKeeper digest or SASL credentials, not both")
    if config.bookie_request_bytes_max < config.max_entry_size + 4 * KiB:
        raise ConfigError(f"setting bookie_request_bytes_max ({config.bookie_request_bytes_max})"
                          f" must hold one whole frame: at least max_entry_size plus 4 KiB "
                          f"({config.max_entry_size + 4 * KiB})")
    _check_dirs(config)
    _check_placement(config)
    if config.bookie_id is not None and (not re.fullmatch(r"[a-zA-Z0-9:._\-]+", config.bookie_id)
                                         or config.bookie_id.lower() == "readonly"):
        raise ConfigError(f"setting bookie_id {config.bookie_id!r}: letters, digits and :._- "
                          f"only, and not 'readonly' (BookKeeper's rule for a bookie id)")
    if config.tls_authorized_roles is not None and not config.tls_ca_file:
        raise ConfigError("setting tls_authorized_roles needs tls_ca_file: a role is read "
                          "from the client certificate mutual TLS asks for")
    return config


def _check_placement(config: BookieConfig) -> None:
    """TP1: a malformed location is refused where it is written."""
    if config.topology_location is not None:
        try:
            parse_location(config.topology_location)
        except BadLocation as exc:
            raise ConfigError(f"setting topology_location: {exc}") from None
    if config.placement_min_zones_per_write_quorum > \
            config.placement_desired_zones_per_write_quorum:
        raise ConfigError("setting placement_min_zones_per_write_quorum must not exceed "
                          "placement_desired_zones_per_write_quorum")


def _check_dirs(config: BookieConfig) -> None:
    """Every journal, ledger and index dir named once, none inside another: two dirs sharing
    a ``current/`` would share files two owners write. An index dir may be its own ledger
    dir (the indexes beside the entry logs, as unset)."""
    for name in ("journal_dirs", "ledger_dirs", "index_dirs"):
        if getattr(config, name) is not None and not split_dirs(getattr(config, name), "", ""):
            raise ConfigError(f"setting {name} names no directory")
    if len(config.index_dirs_current) != len(config.ledger_dirs_current):
        raise ConfigError(  # DbLedgerStorage: "ledger and index dirs size not matched"
            f"setting index_dirs names {len(config.index_dirs_current)} dir(s) but "
            f"ledger_dirs {len(config.ledger_dirs_current)}: one index dir per ledger dir")
    every = [os.path.realpath(d)  # two names of one directory are one directory
             for d in config.journal_dirs_current + config.ledger_dirs_current
             + config.separate_index_dirs]
    kinds = ["journal"] * len(config.journal_dirs_current) + \
        ["ledger"] * len(config.ledger_dirs_current) + \
        ["index"] * len(config.separate_index_dirs)
    for i, path in enumerate(every):
        for j in range(i):
            if path == every[j] or path.startswith(every[j] + os.sep) \
                    or every[j].startswith(path + os.sep):
                raise ConfigError(f"{kinds[i]} dir {os.path.dirname(path)} and {kinds[j]} dir "
                                  f"{os.path.dirname(every[j])} overlap: each journal, "
                                  f"ledger and index dir must be its own directory")


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    data = data.get("bookie", data) if isinstance(data.get("bookie"), dict) else data
    unknown = sorted(set(data) - set(SETTINGS_BY_NAME))
    if unknown:
        raise ConfigError(f"config file {path}: unknown setting {unknown[0]!r}")
    return data


def _read_env(environ: Mapping[str, str]) -> dict[str, str]:
    found = {}
    for key, value in environ.items():
        if not key.startswith("BOOKIE_") or key == "BOOKIE_CONFIG":
            continue
        name = key[len("BOOKIE_"):].lower()
        if name not in SETTINGS_BY_NAME:
            raise ConfigError(f"environment variable {key}: unknown setting {name!r}")
        found[name] = value
    return found


def load_config(config_file: str | None = None, flags: Mapping[str, Any] | None = None,
                environ: Mapping[str, str] | None = None,
                underlay: Mapping[str, tuple[Any, str]] | None = None,
                ) -> tuple[BookieConfig, dict[str, str]]:
    """The effective config and, per setting, where it came from (default/file/env/flag).

    ``underlay``: {setting: (value, source)} between the defaults and the TOML file
    (bookie/bkconf.py's bk_server.conf, each value's source its file and line)."""
    environ = os.environ if environ is None else environ
    config_file = config_file or environ.get("BOOKIE_CONFIG")
    layers = [("file " + config_file, _read_toml(config_file))] if config_file else []
    layers.append(("env", _read_env(environ)))
    layers.append(("flag", {k: v for k, v in (flags or {}).items()
                            if k in SETTINGS_BY_NAME and v is not None}))
    values = {s.name: s.default for s in SETTINGS}
    sources = {s.name: "default" for s in SETTINGS}
    for name, (raw, source) in (underlay or {}).items():
        values[name] = coerce(SETTINGS_BY_NAME[name], raw)
        sources[name] = source
    for source, layer in layers:
        for name, raw in layer.items():
            values[name] = coerce(SETTINGS_BY_NAME[name], raw)
            sources[name] = source
    for name in PASSWORDS_NOT_FLAGS:  # a command line is visible to every local user
        if sources[name] == "flag":
            raise ConfigError(f"setting {name} holds a password: give it as BOOKIE_"
                              f"{name.upper()} or in the TOML file, or use {name}_file; "
                              f"never as a flag")
    return validated(BookieConfig(**values)), sources
