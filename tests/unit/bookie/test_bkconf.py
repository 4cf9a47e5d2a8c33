"""bk_server.conf (bookie/bkconf.py, bookie/properties.py, bookie/bkconf_keys.py): the syntax
BookKeeper reads, each unit conversion, each refusal, precedence and sources."""

from __future__ import annotations

import logging
import re
import subprocess
import sys

import pytest

from bookie import bkconf
from bookie.bkconf_keys import AS_OURS, KNOWN, MAPPED, REFUSED
from bookie.config import EXIT_BAD_CONFIG, ConfigError
from bookie.properties import parse_properties
from bookie.settings import MiB
from tests.support.servers import ROOT

SHIPPED = f"{ROOT}/tests/data/bk_server.conf"


def _conf(tmp_path, text: str) -> str:
    path = tmp_path / "bk_server.conf"
    path.write_text(text, encoding="latin-1")
    return str(path)


def _load(tmp_path, text: str, **kwargs):
    return bkconf.load_settings(_conf(tmp_path, text), environ=kwargs.pop("environ", {}),
                                **kwargs)


# -- syntax -------------------------------------------------------------------------------


def test_java_properties_syntax():
    props = parse_properties(
        "# comment\n! also a comment\n   \n"
        "a=1\n"
        "b : two words \n"
        "c 3\n"
        "  d=\\\n    continued\\\n  again\n"
        "e=back\\\\\n"
        "f=tab\\there \\u0041\n"
        "g\\=key=v\n"
        "dirs=/a, /b\\,c ,/d\n")
    values = {key: (p.value, p.line) for key, p in props.items()}
    assert values == {"a": ("1", 4), "b": ("two words", 5), "c": ("3", 6),
                      "d": ("continuedagain", 7), "e": ("back\\", 10),
                      "f": ("tab\there A", 11), "g=key": ("v", 12),
                      "dirs": ("/a, /b,c ,/d", 13)}
    assert props["dirs"].items == ("/a", "/b,c", "/d")


def test_a_key_given_twice_is_refused_naming_both_lines():
    with pytest.raises(ConfigError, match="bookiePort is given twice \\(lines 1 and 3\\)"):
        parse_properties("bookiePort=1\n#\nbookiePort=2\n")


def test_every_key_of_bookkeepers_shipped_file_is_known_commented_or_not():
    text = open(SHIPPED, encoding="latin-1").read()
    keys = set(re.findall(r"^#? ?([a-zA-Z][\w.]*)=", text, re.MULTILINE))
    assert len(keys) > 200 and keys - KNOWN == set()


# -- one test per unit conversion ---------------------------------------------------------

CONVERSIONS = [
    ("bookiePort", "3181", "bookie_port", 3181),
    ("advertisedAddress", "127.0.0.2", "host", "127.0.0.2"),
    ("journalMaxGroupWaitMSec", "5", "group_max_wait_ms", 5.0),
    ("journalBufferedWritesThreshold", "1048576", "group_max_bytes", MiB),
    ("journalMaxSizeMB", "512", "journal_max_bytes", 512 * MiB),
    ("journalPreAllocSizeMB", "4", "journal_prealloc_bytes", 4 * MiB),
    ("journalMaxBackups", "7", "journal_backups_count", 7),
    ("journalMaxMemorySizeMb", "32", "journal_queue_max_bytes", 32 * MiB),
    ("dbStorage_writeCacheMaxSizeMb", "128", "write_cache_max_bytes", 128 * MiB),
    ("logSizeLimit", "536870912", "entrylog_max_bytes", 512 * MiB),
    ("flushInterval", "60000", "checkpoint_interval_ms", 60_000),
    ("nettyMaxFrameSizeBytes", "5242880", "max_entry_size", 5 * MiB - 4096),
    ("skipReplayJournalInvalidRecord", "true", "skip_corrupt_journal_records", True),
    ("diskUsageThreshold", "0.97", "disk_usage_threshold", 0.97),
    ("diskUsageWarnThreshold", "0.85", "disk_usage_warn_threshold", 0.85),
    ("diskUsageLwmThreshold", "0.8", "disk_usage_lwm_threshold", 0.8),
    ("diskCheckInterval", "10000", "disk_check_interval_ms", 10_000),
    ("gcWaitTime", "600000", "gc_interval_ms", 600_000),
    ("minorCompactionThreshold", "0.1", "minor_compaction_threshold", 0.1),
    ("minorCompactionInterval", "3600", "minor_compaction_interval_ms", 3_600_000),
    ("majorCompactionThreshold", "0.5", "major_compaction_threshold", 0.5),
    ("majorCompactionInterval", "86400", "major_compaction_interval_ms", 86_400_000),
    ("compactionRateByBytes", "1000000", "compaction_rate_bytes", 1_000_000),
    ("autoRecoveryDaemonEnabled", "false", "autorecovery_daemon_enabled", False),
    ("lostBookieRecoveryDelay", "60", "lost_bookie_recovery_delay_s", 60),
    ("openLedgerRereplicationGracePeriod", "30500", "open_ledger_rereplication_grace_period_s",
     31),
    ("replicationRateByBytes", "-1", "rereplication_rate_bytes", 0),
    ("zkTimeout", "30000", "zk_session_timeout_ms", 30_000),
    ("isForceGCAllowWhenNoSpace", "true", "gc_force_when_full", True),
    ("isThrottleByBytes", "false", "compaction_throttle", "entries"),
    ("compactionRateByEntries", "500", "compaction_rate_entries", 500),
    ("tlsCertFilesRefreshDurationSeconds", "-1", "tls_refresh_interval_s", 0),
    ("ensemblePlacementPolicy", "org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy",
     "placement_policy", "zone"),
    ("minNumRacksPerWriteQuorum", "3", "placement_min_racks_per_write_quorum", 3),
    ("minNumZonesPerWriteQuorum", "1", "placement_min_zones_per_write_quorum", 1),
    ("desiredNumZonesPerWriteQuorum", "4", "placement_desired_zones_per_write_quorum", 4),
    ("auditorPeriodicPlacementPolicyCheckInterval", "600", "placement_check_interval_s", 600),
    ("maxPendingAddRequestsPerThread", "500", "bookie_max_pending_adds", 500),
    ("dbStorage_maxThrottleTimeMs", "2500", "bookie_add_wait_ms", 2500),
    ("maxReadsInProgressLimit", "0", "bookie_max_reads_in_progress", 10_000_000),
]


def test_every_mapped_key_has_its_conversion_test():
    assert {key for key, *_ in CONVERSIONS} == {m.key for m in MAPPED}


@pytest.mark.parametrize("key, text, setting, expected", CONVERSIONS,
                         ids=[c[0] for c in CONVERSIONS])
def test_unit_conversion(tmp_path, key, text, setting, expected):
    config, sources, _ = _load(tmp_path, f"# a bookie\n{key}={text}\n")
    assert getattr(config, setting) == expected
    assert sources[setting] == "bk_server.conf:2"


@pytest.mark.parametrize("text, strict", [
    ("", False),
    ("enforceMinNumRacksPerWriteQuorum=true\n", True),
    ("enforceMinNumRacksPerWriteQuorum=true\nenforceStrictZoneawarePlacement=false\n", True),
    ("ensemblePlacementPolicy=org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy\n",
     True),
    ("ensemblePlacementPolicy=org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy\n"
     "enforceStrictZoneawarePlacement=false\nenforceMinNumRacksPerWriteQuorum=true\n", False),
])
def test_each_policy_takes_its_own_enforce_key_and_bookkeepers_default(tmp_path, text,
                                                                         strict):
    """Review of issue 39: either key used to overwrite the other (the later line won), and
    the zone policy was not strict by default as BookKeeper's is."""
    config, _, _ = _load(tmp_path, text or "# nothing\n")
    assert config.placement_strict is strict


def test_a_bad_value_is_refused_naming_file_line_and_key(tmp_path):
    with pytest.raises(ConfigError, match=r"bk_server.conf:1 journalMaxSizeMB=lots: not a "
                                          r"value for journal_max_bytes"):
        _load(tmp_path, "journalMaxSizeMB=lots\n")
    with pytest.raises(ConfigError, match="bookie_port = 70000 is above its maximum"):
        _load(tmp_path, "bookiePort=70000\n")
    with pytest.raises(ConfigError, match="RegionAwareEnsemblePlacementPolicy: not one of"):
        _load(tmp_path, "ensemblePlacementPolicy=org.apache.bookkeeper.client."
                        "RegionAwareEnsemblePlacementPolicy\n")


# -- directories, metadata, TLS -----------------------------------------------------------


def test_journal_and_ledger_directories_become_data_dir(tmp_path):
    config, sources, _ = _load(tmp_path, "journalDirectories=/srv/bk/journal/\n"
                                         "ledgerDirectories=/srv/bk/ledgers\n")
    assert config.data_dir == "/srv/bk" and config.journal_dir == "/srv/bk/journal/current"
    assert config.ledger_dir == "/srv/bk/ledgers/current"
    assert sources["data_dir"] == "bk_server.conf:1 bk_server.conf:2"


def test_several_directories_become_journal_dirs_and_ledger_dirs(tmp_path):
    config, sources, _ = _load(tmp_path, "journalDirectories=/j1/bk,/j2/bk/\n"
                                         "ledgerDirectories=/d1/bk,/d2/bk,/d3/bk\n")
    assert config.journal_dirs_current == ("/j1/bk/current", "/j2/bk/current")
    assert config.ledger_dirs_current == ("/d1/bk/current", "/d2/bk/current", "/d3/bk/current")
    assert sources["journal_dirs"] == "bk_server.conf:1"
    assert sources["ledger_dirs"] == "bk_server.conf:2"


def test_bookkeeper_s_default_directories_are_taken_as_they_are(tmp_path):
    config, _, _ = _load(tmp_path, "journalDirectories=/tmp/bk-txn\n"
                                   "ledgerDirectories=/tmp/bk-data\n")
    assert (config.journal_dir, config.ledger_dir) == ("/tmp/bk-txn/current",
                                                       "/tmp/bk-data/current")


def test_index_directories_become_index_dirs_one_per_ledger_dir(tmp_path):
    """The Pulsar helm chart's bookkeeper.volumes.index.enabled: the indexes on their own
    volume, ledger dir i's in index dir i (DbLedgerStorage)."""
    config, sources, conf = _load(tmp_path, "journalDirectories=/j/bk\n"
                                            "ledgerDirectories=/d1/bk,/d2/bk\n"
                                            "indexDirectories=/i1/bk,/i2/bk/\n")
    assert config.index_dirs_current == ("/i1/bk/current", "/i2/bk/current")
    assert config.ledger_dirs_current == ("/d1/bk/current", "/d2/bk/current")
    assert sources["index_dirs"] == "bk_server.conf:3" and not conf.notes
    config, _, _ = _load(tmp_path, "journalDirectories=/pulsar/data/bookkeeper/journal\n"
                                   "ledgerDirectories=/pulsar/data/bookkeeper/ledgers\n"
                                   "indexDirectories=/pulsar/data/bookkeeper/index\n")
    assert config.data_dir == "/pulsar/data/bookkeeper"
    assert config.index_dirs_current == ("/pulsar/data/bookkeeper/index/current",)


def test_index_directories_equal_to_the_ledger_directories_are_ignored(tmp_path):
    config, _, conf = _load(tmp_path, "journalDirectories=/d/journal\n"
                                      "ledgerDirectories=/d/ledgers\n"
                                      "indexDirectories=/d/ledgers/\n")
    assert config.index_dirs is None and config.index_dirs_current == config.ledger_dirs_current
    assert [(n[0], n[1]) for n in conf.notes] == [("ignored", "indexDirectories")]


def test_another_count_of_index_directories_is_refused_naming_both_keys(tmp_path):
    with pytest.raises(ConfigError, match=r"bk_server.conf:3 indexDirectories=/i1,/i2: 2 "
                                          r"dir\(s\) but ledgerDirectories has 3"):
        _load(tmp_path, "journalDirectories=/j\nledgerDirectories=/d1,/d2,/d3\n"
                        "indexDirectories=/i1,/i2\n")
    with pytest.raises(ConfigError, match="indexDirectories=/i1,/i2: 2 dir"):
        _load(tmp_path, "indexDirectories=/i1,/i2\n")  # our one default ledger dir


def test_the_metadata_service_from_zk_servers_and_root(tmp_path):
    config, sources, _ = _load(tmp_path, "zkServers=zk1:2181,zk2:2181\n"
                                         "zkLedgersRootPath=/bk/ledgers\n")
    assert config.metadata_service_uri == "zk://zk1:2181,zk2:2181/bk/ledgers"
    config, sources, conf = _load(tmp_path, "zkServers=zk1:2181\nmetadataServiceUri="
                                            "zk+hierarchical://zk9:2181/ledgers\n")
    assert config.metadata_service_uri == "zk+hierarchical://zk9:2181/ledgers"
    assert ("ignored", "zkServers") in {(n[0], n[1]) for n in conf.notes}


def test_pem_tls_keys_map_onto_both_listeners_tls(tmp_path):
    password = tmp_path / "pw"
    password.write_text("s3cret\n")
    config, sources, _ = _load(tmp_path, (
        "tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory\n"
        "tlsKeyStoreType=PEM\ntlsKeyStore=/k.pem\ntlsCertificatePath=/c.pem\n"
        f"tlsKeyStorePasswordPath={password}\n"
        "tlsTrustStoreType=PEM\ntlsTrustStore=/ca.pem\ntlsClientAuthentication=true\n"
        "tlsEnabledProtocols=TLSv1.3\n"
        "bookieAuthProviderFactoryClass=org.apache.bookkeeper.tls.BookieAuthZFactory\n"
        "authorizedRoles=writer,reader\n"))
    assert (config.tls_key_file, config.tls_cert_file, config.tls_key_password) == (
        "/k.pem", "/c.pem", "s3cret")
    assert (config.tls_trust_file, config.tls_ca_file, config.tls_min_version) == (
        "/ca.pem", "/ca.pem", "1.3")
    assert config.tls_authorized_roles == "writer,reader"
    assert sources["tls_ca_file"] == "bk_server.conf:7 bk_server.conf:8"


def test_tls_keys_without_a_provider_factory_are_ignored_as_bookkeeper_does(tmp_path):
    config, _, conf = _load(tmp_path, "tlsKeyStoreType=PEM\ntlsCertificatePath=/c.pem\n")
    assert config.tls_cert_file is None
    assert {n[1] for n in conf.notes if n[0] == "ignored"} == {"tlsKeyStoreType",
                                                               "tlsCertificatePath"}


# -- one test per refusal -----------------------------------------------------------------

LISTED_REFUSALS = [(key, "some-other-value") for key in sorted(AS_OURS)] + [
    (key, "1") for key in sorted(REFUSED)]


@pytest.mark.parametrize("key, value", LISTED_REFUSALS, ids=[k for k, _ in LISTED_REFUSALS])
def test_a_refused_key_is_listed_once_at_warn_and_the_bookie_starts(tmp_path, caplog, key,
                                                                    value):
    text = f"{key}={value}\n"
    _, _, conf = _load(tmp_path, text)
    assert [(n[0], n[1]) for n in conf.notes] == [("refused", key)]
    with caplog.at_level(logging.INFO, logger="bookie.bkconf"):
        bkconf.log_summary(conf)
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "refused" in record.getMessage()
    assert len(re.findall(rf"(?<![\w.]){re.escape(key)}=", record.getMessage())) == 1


def test_as_ours_values_are_ignored_not_refused(tmp_path):
    _, _, conf = _load(tmp_path, "journalSyncData=true\nzkTimeout=10000\n"
                                 "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb."
                                 "DbLedgerStorage\n")
    assert {n[0] for n in conf.notes} == {"ignored"}


def test_an_unknown_key_is_listed_at_warn(tmp_path, caplog):
    _, _, conf = _load(tmp_path, "bookiePrt=3181\n")
    with caplog.at_level(logging.INFO, logger="bookie.bkconf"):
        bkconf.log_summary(conf)
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "unknown" in record.getMessage()
    assert "bookiePrt=3181 (line 1)" in record.getMessage()


def test_a_password_key_s_value_is_never_listed(tmp_path):
    _, _, conf = _load(tmp_path, "httpServerKeyStorePassword=hunter2\npasswd=hunter3\n")
    assert "hunter" not in bkconf.render_notes(conf) + str(bkconf.summary(conf))


STARTS_REFUSED = [
    ("one of the two", "ledgerDirectories=/d/ledgers\n", "ledgerDirectories=/d/ledgers: set "
     "journalDirectories and ledgerDirectories together"),
    ("flat layout", "metadataServiceUri=zk+flat://zk:2181/ledgers\n", "hierarchical layout"),
    ("tls factory", "tlsProviderFactoryClass=com.example.Tls\n", "only org.apache"),
    ("jks default", "tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory\n",
     "tlsKeyStoreType is not set: this bookie reads PEM"),
    ("pkcs12", "tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory\n"
     "tlsKeyStoreType=PKCS12\n", "tlsKeyStoreType=PKCS12: this bookie reads PEM"),
    ("no certificate", "tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory\n"
     "tlsKeyStoreType=PEM\ntlsKeyStore=/k.pem\n", "tlsCertificatePath is required"),
    ("jks trust", "tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory\n"
     "tlsKeyStoreType=PEM\ntlsKeyStore=/k.pem\ntlsCertificatePath=/c.pem\n"
     "tlsTrustStore=/t.jks\n", "tlsTrustStoreType is not set: .*PEM trust stores"),
    ("client auth without trust", "tlsProviderFactoryClass=org.apache.bookkeeper.tls."
     "TLSContextFactory\ntlsKeyStoreType=PEM\ntlsKeyStore=/k.pem\ntlsCertificatePath=/c.pem\n"
     "tlsClientAuthentication=true\n", "tlsClientAuthentication=true: needs tlsTrustStore"),
    ("old protocols", "tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory\n"
     "tlsKeyStoreType=PEM\ntlsKeyStore=/k.pem\ntlsCertificatePath=/c.pem\n"
     "tlsEnabledProtocols=TLSv1,TLSv1.1\n", "TLSv1.2 and TLSv1.3 only"),
    ("sasl clients", "bookieAuthProviderFactoryClass=org.apache.bookkeeper.sasl."
     "SASLBookieAuthProviderFactory\n", "the clients this class would check"),
    ("zk security", "zkEnableSecurity=true\nzkServers=zk:2181\n",
     "zkEnableSecurity=true: give the ZooKeeper credentials"),
    ("loopback", "allowLoopback=false\n", "allowLoopback=false: host 127.0.0.1: a loopback"),
    ("loopback id", "allowLoopback=false\nbookieId=localhost:3181\n",
     "allowLoopback=false: bookie id localhost:3181 \\(localhost is 127.0.0.1"),
    ("bad id", "bookieId=readonly\n", "bookieId=readonly: not a bookie id"),
]


@pytest.mark.parametrize("name, text, message", STARTS_REFUSED, ids=[s[0] for s in STARTS_REFUSED])
def test_what_cannot_be_honoured_refuses_the_start_naming_the_keys(tmp_path, name, text,
                                                                   message):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


def test_compaction_rate_is_compaction_rate_by_entries_unless_that_is_set(tmp_path):
    """BookKeeper's getCompactionRateByEntries falls back to the older compactionRate."""
    config, sources, _ = _load(tmp_path, "compactionRate=700\n")
    assert config.compaction_rate_entries == 700 and sources["compaction_rate_entries"] == \
        "bk_server.conf:1"
    config, _, conf = _load(tmp_path, "compactionRate=700\ncompactionRateByEntries=900\n")
    assert config.compaction_rate_entries == 900
    assert ("ignored", "compactionRate") in {(n[0], n[1]) for n in conf.notes}


def test_zk_security_is_honoured_with_credentials_from_the_environment(tmp_path):
    config, _, conf = _load(tmp_path, "zkEnableSecurity=true\nzkServers=zk:2181\n",
                            environ={"BOOKIE_ZK_SASL": "bookie:pw"})
    assert config.zk_sasl == "bookie:pw" and ("checked", "zkEnableSecurity") in {
        (n[0], n[1]) for n in conf.notes}


# -- precedence and sources ---------------------------------------------------------------


def test_precedence_defaults_conf_toml_env_flags(tmp_path):
    toml = tmp_path / "bookie.toml"
    toml.write_text("journal_backups_count = 9\n")
    config, sources, _ = _load(
        tmp_path, "journalMaxBackups=7\ngcWaitTime=1000\nflushInterval=5000\n"
        "journalMaxSizeMB=64\n", config_file=str(toml),
        environ={"BOOKIE_GC_INTERVAL_MS": "2000"}, flags={"checkpoint_interval_ms": "3000"})
    assert (config.journal_backups_count, config.gc_interval_ms,
            config.checkpoint_interval_ms, config.journal_max_bytes) == (9, 2000, 3000, 64 * MiB)
    assert sources["journal_backups_count"].startswith("file ")
    assert (sources["gc_interval_ms"], sources["checkpoint_interval_ms"]) == ("env", "flag")
    assert sources["journal_max_bytes"] == "bk_server.conf:4"
    assert sources["port"] == "default"


def test_config_show_names_the_file_line_of_each_value_and_lists_the_rest(tmp_path):
    conf = _conf(tmp_path, "bookiePort=3181\npermittedStartupUsers=root\nhttpServerPort=8080\n")
    result = subprocess.run([sys.executable, "-m", "bookie", "config", "show", "--conf", conf],
                            capture_output=True, cwd=ROOT, timeout=60, text=True)
    assert result.returncode == 0, result.stderr
    assert "bookie_port = 3181  # bk_server.conf:1" in result.stdout
    assert "# bk_server.conf:2 permittedStartupUsers=root: refused: " in result.stdout
    assert "# bk_server.conf:3 httpServerPort=8080: ignored: httpServerEnabled is not true" \
        in result.stdout


def test_http_server_enabled_serves_bookkeepers_admin_api_on_http_server_port(tmp_path):
    """httpServerEnabled=true maps httpServerPort (default 8000) onto admin_port."""
    assert _load(tmp_path, "httpServerEnabled=true\nhttpServerPort=8081\n")[0].admin_port \
        == 8081
    assert _load(tmp_path, "httpServerEnabled=true\n")[0].admin_port == 8000
    assert _load(tmp_path, "httpServerEnabled=false\nhttpServerPort=8081\n")[0].admin_port \
        is None


def test_pulsars_metadata_store_uri_is_taken(tmp_path):
    uri = "metadata-store:zk:127.0.0.1:2181/ledgers"
    assert _load(tmp_path, f"metadataServiceUri={uri}\n")[0].metadata_service_uri == uri
