"""Pulsar's shipped bookkeeper.conf with the Pulsar helm chart's configmap applied
(tests/support/pulsar_chart.py, bookie/conf_from_env.py), through the real parser
(bookie/bkconf.py): what each key the chart and the file set becomes, and the short list of
what is still refused, each with the reason the operator sees at start."""

from __future__ import annotations

import shutil

from bookie import bkconf, conf_from_env
from bookie.bkconf_identity import canonical_hostname, default_address, registered_bookie_id
from tests.support.pulsar_chart import PULSAR_CONF, chart_environment

#: Refused, with why: the only keys of Pulsar's file and the chart not honoured here.
STILL_REFUSED = {
    "journalFormatVersionToWrite",  # 5: journals are written as V6 (a superset BookKeeper reads)
}


def _read(tmp_path, **chart):
    path = tmp_path / "bookkeeper.conf"
    shutil.copy(PULSAR_CONF, path)
    env = {**chart_environment("zk-0.zk:2181,zk-1.zk:2181", "/pulsar", 8000, **chart),
           "allowLoopback": "true"}
    conf_from_env.apply_file(str(path), env, say=lambda _: None)
    conf = bkconf.read(str(path))
    return conf, {name: value for name, (value, _) in conf.settings.items()}


def test_every_key_of_pulsars_file_and_the_chart_is_honoured_but_one(tmp_path):
    conf, settings = _read(tmp_path)
    classes = {(kind, key) for kind, key, *_ in conf.notes}
    assert {key for kind, key in classes if kind == "unknown"} == set()
    assert {key for kind, key in classes if kind == "refused"} == STILL_REFUSED
    assert settings["bookie_id"] == f"{canonical_hostname()}:3181"  # useHostNameAsBookieID
    assert settings["metadata_service_uri"] == \
        "zk+hierarchical://zk-0.zk:2181,zk-1.zk:2181/pulsar/ledgers"
    assert settings["admin_port"] == 8000  # the chart's probes and Prometheus port
    assert settings["zk_session_timeout_ms"] == 30_000
    assert settings["gc_force_when_full"] is True
    assert settings["tls_refresh_interval_s"] == 300
    assert (settings["compaction_throttle"], settings["compaction_rate_entries"]) == \
        ("entries", 1000)
    assert settings["replicas_check_interval_s"] == 604_800
    assert settings["autorecovery_daemon_enabled"] is False
    assert settings["journal_backups_count"] == 0
    assert settings["data_dir"] == "/pulsar/data/bookkeeper"
    assert (settings["disk_usage_threshold"], settings["disk_usage_warn_threshold"],
            settings["disk_usage_lwm_threshold"]) == (0.95, 0.9, 0.85)


def test_each_refusal_is_one_line_of_the_start_summary_with_its_reason(tmp_path):
    conf, _ = _read(tmp_path)
    lines = [line for _, line in bkconf.summary(conf)]
    refused = [line for line in lines if "refused, not honoured" in line]
    assert len(refused) == 1
    assert "journalFormatVersionToWrite=5" in refused[0] and "V6" in refused[0]
    ignored = next(line for line in lines if "ignored" in line)
    for key in ("useV2WireProtocol=true", "defaultRocksdbConf=", "numReadWorkerThreads=8"):
        assert key in ignored, ignored


def test_a_bookie_on_every_interface_registers_under_this_hosts_address():
    """bin/pulsar listens on 0.0.0.0: without a bookie id the id must still be an address
    (BookKeeper's default interface IP), never 0.0.0.0:PORT."""
    assert registered_bookie_id(None, "0.0.0.0", 3180) == f"{default_address()}:3180"
    assert registered_bookie_id(None, "127.0.0.1", 3180) == "127.0.0.1:3180"
    assert registered_bookie_id("bookie-0.bookies:3181", "0.0.0.0", 3180) == \
        "bookie-0.bookies:3181"
