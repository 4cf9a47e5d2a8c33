"""deploy/: the settings file matches the settings table, the systemd units verify, the alert
rules and every dashboard expression pass promtool, and every metric the dashboard and the
rules query is served, BookKeeper's own names too (api/server/metrics_bk.py).

These run the real tools (systemd-analyze from the image's systemd, promtool from Debian's
`prometheus` package, which .ci/run installs) and a real bookie; a missing tool fails the test
with the package to install, never skips it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from bookie.config import SETTINGS, load_config
from bookie.config_render import render_defaults

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")
STANDALONE_RULES = os.path.join(DEPLOY, "prometheus", "bookie-alerts.yml")
CLUSTER_RULES = os.path.join(DEPLOY, "prometheus", "bookie-cluster-alerts.yml")
DASHBOARD = os.path.join(DEPLOY, "grafana", "bookie-dashboard.json")
UNITS = ("bookie.service", "bookie@.service")
#: The dashboard's cluster row and the cluster rules query these; a cluster bookie serves them
#: (bookie_zk_registered with metadata_service_uri set; the under-replication gauge on the
#: auditor's bookie, with autorecovery).
CLUSTER_METRICS = {"bookie_zk_registered", "bookie_autorecovery_underreplicated_ledgers",
                   "bookie_autorecovery_placement_not_adhering_ledgers"}
#: Served by the auditor alone, once its placement check ran (the alert's max() over the
#: cluster sees that bookie's): tests/cluster/test_placement_on_a_cluster.py reads it there.
AUDITOR_METRICS = {"bookie_autorecovery_placement_not_adhering_ledgers"}
#: BookKeeper's names the dashboard and the rules query, as BookKeeper's dashboards do
#: (docs/operations.md §3.1): add and read rates by outcome and their quantiles, the journal.
BOOKKEEPER_METRICS = {"bookkeeper_server_ADD_ENTRY_REQUEST",
                      "bookkeeper_server_ADD_ENTRY_REQUEST_count",
                      "bookkeeper_server_READ_ENTRY_REQUEST",
                      "bookkeeper_server_READ_ENTRY_REQUEST_count",
                      "bookkeeper_server_READ_ENTRY_FENCE_REQUEST_count",
                      "bookkeeper_server_READ_ENTRY_LONG_POLL_REQUEST_count",
                      "bookie_journal_JOURNAL_ADD_ENTRY", "bookie_journal_JOURNAL_SYNC",
                      "bookie_journal_JOURNAL_QUEUE_SIZE"}


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is missing: apt-get install -y {package} (.ci/run does this)"
    return path


def test_deploy_bookie_toml_is_the_settings_table_at_its_defaults():
    with open(os.path.join(DEPLOY, "bookie.toml")) as handle:
        text = handle.read()
    assert text == render_defaults(), "deploy/bookie.toml is stale: bookie config defaults > it"
    for setting in SETTINGS:
        assert re.search(rf"^# {setting.name} =", text, re.MULTILINE), setting.name


def test_uncommenting_every_setting_in_bookie_toml_gives_the_defaults(tmp_path):
    with open(os.path.join(DEPLOY, "bookie.toml")) as handle:
        lines = [line[2:] for line in handle if re.match(r"^# [a-z_]+ = .", line)]
    path = tmp_path / "all.toml"
    path.write_text("".join(lines))
    assert len(tomllib.loads(path.read_text())) == sum(s.default is not None for s in SETTINGS)
    config, sources = load_config(str(path), {}, environ={})
    for setting in SETTINGS:
        assert getattr(config, setting.name) == setting.default, setting.name
        if setting.default is not None:
            assert sources[setting.name].startswith("file"), setting.name


def test_bookie_config_defaults_prints_the_same_file():
    done = subprocess.run([sys.executable, "-m", "bookie", "config", "defaults"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout == render_defaults()


@pytest.mark.parametrize("unit", UNITS)
def test_systemd_unit_verifies_without_a_warning(unit, tmp_path):
    analyze = _tool("systemd-analyze", "systemd")
    with open(os.path.join(DEPLOY, "systemd", unit)) as handle:
        text = handle.read()
    for line in ("Type=notify", "Restart=on-failure", "WatchdogSec=", "NotifyAccess=main"):
        assert line in text, line
    # verify checks that ExecStart's program exists: point it at this checkout's console
    # script, the one a deployment installs at /opt/bookie/.venv/bin/bookie.
    bookie_bin = os.path.join(os.path.dirname(sys.executable), "bookie")
    assert os.access(bookie_bin, os.X_OK), bookie_bin
    name = unit.replace("@.", "@1.")
    (tmp_path / name).write_text(text.replace("/opt/bookie/.venv/bin/bookie", bookie_bin))
    done = subprocess.run([analyze, "verify", str(tmp_path / name)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if name in line] == [], done.stderr


@pytest.mark.parametrize("rules", [STANDALONE_RULES, CLUSTER_RULES])
def test_alert_rules_pass_promtool(rules):
    promtool = _tool("promtool", "prometheus")
    done = subprocess.run([promtool, "check", "rules", rules], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def _rule_exprs(path: str) -> list[str]:
    # The rule files are plain YAML written by hand; promtool (above) parses them for real.
    # Here only the expressions are needed: each `expr:` with its folded continuation lines.
    exprs, current = [], None
    with open(path) as handle:
        for line in handle:
            stripped = line.strip()
            if stripped.startswith("expr:"):
                current = [stripped[len("expr:"):].strip(" >-")]
                exprs.append(current)
            elif current is not None and stripped and ":" not in stripped.split(" ")[0]:
                current.append(stripped)
            else:
                current = None
    return [" ".join(part for part in expr if part) for expr in exprs]


def _dashboard_exprs(cluster: bool) -> list[str]:
    with open(DASHBOARD) as handle:
        dashboard = json.load(handle)
    exprs, in_cluster_row = [], False
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            in_cluster_row = panel["title"].startswith("Cluster")
            continue
        if in_cluster_row == cluster:
            exprs.extend(target["expr"] for target in panel["targets"])
    return exprs


def metric_names(exprs: list[str]) -> set[str]:
    names = set()
    for expr in exprs:
        without_labels = re.sub(r"\{[^}]*\}", "", expr)
        identifiers = re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", without_labels)
        names.update(name for name in identifiers
                      if name.startswith(("bookie_", "bookkeeper_")))
    return names


def served_series(metrics_text: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in metrics_text.splitlines()
            if line and not line.startswith("#")}


def test_the_queries_name_metrics_at_all():
    standalone = metric_names(_dashboard_exprs(False) + _rule_exprs(STANDALONE_RULES))
    cluster = metric_names(_dashboard_exprs(True) + _rule_exprs(CLUSTER_RULES))
    assert len(standalone) >= 25, standalone
    assert cluster == CLUSTER_METRICS
    assert sorted(BOOKKEEPER_METRICS - standalone) == []
    rules = metric_names(_rule_exprs(STANDALONE_RULES))
    assert {"bookkeeper_server_ADD_ENTRY_REQUEST", "bookkeeper_server_ADD_ENTRY_REQUEST_count",
            "bookkeeper_server_READ_ENTRY_REQUEST"} <= rules


def test_every_dashboard_expression_passes_promtool(tmp_path):
    """promtool's own PromQL parser on each panel's query: as a recording rule each (the
    dashboard's $instance is inside a label matcher's string, which PromQL takes as is)."""
    promtool = _tool("promtool", "prometheus")
    exprs = _dashboard_exprs(False) + _dashboard_exprs(True)
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for number, expr in enumerate(exprs):
        lines += [f"      - record: dashboard:expr_{number}", f"        expr: {json.dumps(expr)}"]
    path = tmp_path / "dashboard-rules.yml"
    path.write_text("\n".join(lines) + "\n")
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout


async def test_every_metric_the_dashboard_and_rules_query_is_served(server, client):
    # Traffic first, so that per-route and per-phase series exist as they do in production.
    from bookie.entry import DigestType, frame_entry, master_key
    key = master_key(b"pw")
    for entry_id in range(3):
        await client.add_entry(7, entry_id, frame_entry(7, entry_id, entry_id - 1, 5 * (entry_id
                                                        + 1), b"hello", DigestType.CRC32C), key)
    await client.read_entry(7, 0)
    await client.read_range(7, 0, 2)
    await client.read_lac(7)
    await client.checkpoint()
    async with client.session.get(server.url + "/metrics") as reply:
        served = served_series(await reply.text())
    wanted = metric_names(_dashboard_exprs(False) + _rule_exprs(STANDALONE_RULES))
    assert sorted(wanted - served) == []


def test_a_cluster_bookie_serves_the_cluster_row_and_rules_metrics(tmp_path, zookeeper, zk_uri):
    """The dashboard's cluster row and bookie-cluster-alerts.yml, against a cluster bookie
    (a daemon registered in a real ZooKeeper): every metric they query is served, and the
    under-replication gauge follows the markers in ZooKeeper."""
    import time
    import urllib.request

    from kazoo.client import KazooClient

    from api.client.zookeeper import parse_uri
    from tests.support.servers import Daemon

    # No autorecovery in it: its worker would take the marker below (a ledger without
    # metadata has nothing to put back) before the gauge is read.
    daemon = Daemon(str(tmp_path / "data"), "--metadata-service-uri", zk_uri,
                    "--journal-prealloc-bytes", "1MiB",
                    "--autorecovery-daemon-enabled", "false").start()
    client = KazooClient(hosts=zookeeper.hosts)
    client.start(timeout=15)

    def metric(name: str) -> float | None:
        text = urllib.request.urlopen(daemon.url + "/metrics", timeout=10).read().decode()
        values = [float(line.split()[-1]) for line in text.splitlines()
                  if line.startswith(name + " ")]
        return values[0] if values else None

    def poll(name: str, value: float, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while metric(name) != value:
            assert time.monotonic() < deadline, f"{name} never became {value}"
            time.sleep(0.1)  # noqa: sleep-ok (bounded poll of a daemon's 2 s refresh)

    try:
        poll("bookie_autorecovery_underreplicated_ledgers", 0.0)
        text = urllib.request.urlopen(daemon.url + "/metrics", timeout=10).read().decode()
        wanted = metric_names(_dashboard_exprs(True) + _rule_exprs(CLUSTER_RULES))
        assert sorted(wanted - AUDITOR_METRICS - served_series(text)) == []
        assert metric("bookie_zk_registered") == 1.0
        _, root = parse_uri(zk_uri)
        client.create(f"{root}/underreplication/ledgers/0000/0000/0000/0005/urL0000000005",
                      b"", makepath=True)  # BookKeeper's marker of ledger 5
        poll("bookie_autorecovery_underreplicated_ledgers", 1.0)
    finally:
        client.stop()
        client.close()
        assert daemon.terminate() == 0
