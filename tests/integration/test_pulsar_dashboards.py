"""The Pulsar helm chart's BookKeeper dashboards, ours and our alert rules, against a real
Prometheus (Debian's ``prometheus``) scraping a real bookie on 127.0.0.1 after adds, reads,
a delete and a forced GC (api/server/metrics_bk_bookie.py MK1-MK3, docs/operations.md §3.1).

Every query of the chart's two dashboards (tests/data/pulsar_dashboards/queries.json,
extracted from them by scripts/interop/dashboard_queries.py), with its template variables resolved as
Grafana would (``$job`` and ``$instance`` from ``label_values(bookie_SERVER_STATUS, ...)``),
returns data, except those that read a name of ``UNFILLED`` (each with its reason, from
api/server/metrics_bk_names.py), which must return nothing. Every query of
deploy/grafana/bookie-dashboard.json outside its cluster row does too, and every series our
alert rules read exists. The cluster row and bookie-cluster-alerts.yml need a registered
bookie: tests/deploy/test_deploy_files.py serves them from one.

Prometheus gets the chart's ``kubernetes_pod_name`` label from the scrape config, as the
chart's kubernetes_sd relabelling gives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import time

import aiohttp
import pytest

from api.client import BookieClient
from api.server.metrics_bk_names import NAMES, STATSDOC
from bookie.config import BookieConfig
from bookie.entry import frame_entry, master_key
from bookie.errors import BookieError
from tests.deploy.test_deploy_files import STANDALONE_RULES, _rule_exprs, metric_names, \
    served_series
from scripts.interop.dashboard_queries import dashboard_exprs, variable_queries
from tests.support.servers import running_bookie

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The chart's dashboards' queries (scripts/interop/dashboard_queries.py made it from them).
QUERIES = os.path.join(ROOT, "tests", "data", "pulsar_dashboards", "queries.json")
OURS = os.path.join(ROOT, "deploy", "grafana", "bookie-dashboard.json")
KEY = master_key(b"pulsar-dashboards")
JOB, PODS = "bookie", ("bookie-0", "bookie-1")
#: Names the chart's dashboards query that this bookie does not export (MK2), with the
#: reason the names table gives.
UNFILLED = {name: row.reason for name, row in NAMES.items() if not row.exported}
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def prometheus(tmp_path, targets: dict[str, str]):
    """A real Prometheus scraping each target (pod name -> host:port) every 0.5 s."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: apt-get install -y prometheus (.ci/run does this)"
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # YAML is a superset of JSON
        "global": {"scrape_interval": "500ms", "scrape_timeout": "400ms"},
        "scrape_configs": [{"job_name": JOB, "static_configs": [
            {"targets": [target], "labels": {"kubernetes_pod_name": pod}}
            for pod, target in targets.items()]}]}))
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen([binary, f"--config.file={config}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Prom:
    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session, self.url = session, url

    async def query(self, expr: str) -> list:
        async with self.session.get(self.url + "/api/v1/query",
                                    params={"query": expr}) as reply:
            body = await reply.json()
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]

    async def label_values(self, label: str, match: str) -> list[str]:
        async with self.session.get(self.url + f"/api/v1/label/{label}/values",
                                    params={"match[]": match}) as reply:
            body = await reply.json()
        assert body["status"] == "success", body
        return body["data"]

    async def until(self, expr: str, timeout_s: float = 30.0) -> list:
        """Poll ``expr`` until it returns data (Prometheus up, scraped enough)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                result = await self.query(expr)
                if result:
                    return result
            assert time.monotonic() < deadline, f"{expr} never returned data"
            await asyncio.sleep(0.1)  # noqa: sleep-ok (bounded poll of Prometheus)


def _queries() -> dict:
    with open(QUERIES, encoding="utf-8") as handle:
        return json.load(handle)["dashboards"]


def _ours() -> dict:
    with open(OURS, encoding="utf-8") as handle:
        return json.load(handle)


def resolve(expr: str, variables: dict[str, str]) -> str:
    for name, value in sorted(variables.items(), key=lambda item: -len(item[0])):
        expr = expr.replace("$" + name, value).replace("${" + name + "}", value)
    assert "$" not in expr, expr
    return expr


def names_in(expr: str) -> set[str]:
    """BookKeeper's names ``expr`` reads: an OpStatsLogger's _count and _sum are its."""
    names = set()
    for name in metric_names([expr]):
        base = re.sub(r"_(count|sum)$", "", name)
        names.add(base if base in NAMES and name not in NAMES else name)
    return names


async def load(url: str) -> None:
    """Adds over HTTP in two ledgers (several entry logs), reads (one of a missing entry),
    a LAC read, a checkpoint, a delete and a forced major GC: every family has a reason
    to move."""
    rng = random.Random(56)
    async with BookieClient(url) as client:
        for ledger_id in (1, 2):
            for entry_id in range(40):
                payload = rng.randbytes(900)
                await client.add_entry(ledger_id, entry_id, frame_entry(
                    ledger_id, entry_id, entry_id - 1, len(payload), payload), KEY)
        for entry_id in range(10):
            await client.read_entry(2, entry_id)
        await client.read_range(2, 0, 9)
        with pytest.raises(BookieError):  # an error answer: "Errors by status" has one
            await client.read_entry(2, 999)
        await client.read_lac(2)
        await client.checkpoint()
        await client.delete_ledger(1)
        async with client.session.post(url + "/v1/bookie/gc",
                                       params={"force": "major"}) as reply:
            assert reply.status == 200, await reply.text()
        for entry_id in range(10):  # after the checkpoint: read from the entry logs
            await client.read_entry(2, entry_id)


async def test_pulsar_dashboards_ours_and_alerts_return_data(tmp_path):
    """Two bookies, as the dashboards count them: bookie-0 writable under the load, with
    two ledger dirs (ledger 1 in the second, ledger 2 in the first: id mod 2), bookie-1
    read-only by the operator's flag."""
    configs = [BookieConfig(data_dir=str(tmp_path / pod), port=0,
                            journal_prealloc_bytes=1 << 20, entrylog_max_bytes=16 * 1024,
                            checkpoint_interval_ms=3_600_000, gc_interval_ms=0,
                            compaction_rate_bytes=0) for pod in PODS]
    configs[0] = configs[0].replace(ledger_dirs=",".join(
        str(tmp_path / f"ledgers{i}") for i in range(2)))
    async with running_bookie(configs[0]) as served, \
            running_bookie(configs[1]) as read_only:
        await load(served.url)
        await check_served(served.url)
        read_only.bookie.set_readonly("operator", True)
        targets = {pod: bookie.url.removeprefix("http://")
                   for pod, bookie in zip(PODS, (served, read_only))}
        with prometheus(tmp_path, targets) as url:
            async with aiohttp.ClientSession() as session:
                prom = Prom(session, url)
                # Three scrapes of each at least, so that rate() and irate() have two points.
                await prom.until("count(count_over_time(bookie_SERVER_STATUS[1m]) >= 3) == 2")
                await check_values(prom, served.bookie.config.ledger_dirs_current)
                await check_pulsar_dashboards(prom)
                await check_ours(prom, list(targets.values()))


async def check_served(url: str) -> None:
    """MK1, MK2: every name the table says is exported is served, with BookKeeper's
    type; none it says is not."""
    async with aiohttp.ClientSession() as session:
        async with session.get(url + "/metrics") as reply:
            text = await reply.text()
    served = served_series(text)
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    for row in NAMES.values():
        present = {row.name, row.name + "_count", row.name + "_sum"} & served
        if row.exported:
            assert row.name in served, f"{row.name} is in the table as exported"
            assert types[row.name] == row.type, (row.name, types[row.name], row.type)
        else:
            assert not present, f"{row.name} is served: the table says {row.reason!r}"
    assert len(STATSDOC) == 133
    assert sum(NAMES[name].exported for name in STATSDOC) >= 46


async def check_values(prom: Prom, dirs) -> None:
    """A few of BookKeeper's names hold what the load did, not only a series; the per-dir
    ones by ledgerDir."""
    async def value(expr: str) -> float:
        result = await prom.query(expr)
        assert result, expr
        return float(result[0]["value"][1])

    assert await value('bookie_SERVER_STATUS{kubernetes_pod_name="bookie-0"}') == 1.0
    assert await value('bookie_SERVER_STATUS{kubernetes_pod_name="bookie-1"}') == 0.0
    one = '{kubernetes_pod_name="bookie-0"}'
    assert await value(f"bookie_WRITE_BYTES{one}") > 80 * 900
    assert await value(f"bookie_READ_BYTES{one}") > 30 * 900
    assert await value(f"sum(bookie_ledger_writable_dirs{one})") == 2.0
    assert await value(f"count(bookie_ledgers_count{one})") == 2.0
    kept, deleted = ({"ledgerDir": d, "indexDir": d, "kubernetes_pod_name": "bookie-0"}
                     for d in dirs)

    def at(name: str, labels: dict) -> str:
        return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"

    for name, in_kept, in_deleted in (
            ("bookie_ledgers_count", 1, 0), ("bookie_ACTIVE_LEDGER_TOTAL", 1, 0),
            ("bookie_DELETED_LEDGER_TOTAL", 0, 1), ("bookie_MAJOR_COMPACTION_TOTAL", 1, 1),
            ("bookie_ACTIVE_ENTRY_LOG_TOTAL", None, 0)):
        if in_kept is not None:
            assert await value(at(name, kept)) == in_kept, name
        assert await value(at(name, deleted)) == in_deleted, name
    assert await value(at("bookie_ACTIVE_ENTRY_LOG_TOTAL", kept)) >= 1
    assert await value(at("bookie_RECLAIMED_DELETION_SPACE_BYTES", deleted)) > 0
    assert await value(at("bookie_RECLAIMED_DELETION_SPACE_BYTES", kept)) == 0
    assert await value(at("bookie_entries_count", kept)) >= 40
    # MK1: BookKeeper's counter, under its own name (no _total) and typed counter.
    assert await prom.query("bookie_WRITE_BYTES_total") == []


async def check_pulsar_dashboards(prom: Prom) -> None:
    dashboards = _queries()
    main, compaction = dashboards["bookkeeper.json"], dashboards["bookkeeper-compaction.json"]
    # The variables, as Grafana resolves them: without bookie_SERVER_STATUS there is no
    # job and no instance, and every query naming them returns nothing.
    assert main["variables"] == [
        "label_values(bookie_SERVER_STATUS,job)",
        'label_values(bookie_SERVER_STATUS{job="$job"},kubernetes_pod_name)']
    assert await prom.label_values("job", "bookie_SERVER_STATUS") == [JOB]
    pods = await prom.label_values("kubernetes_pod_name", f'bookie_SERVER_STATUS{{job="{JOB}"}}')
    assert pods == list(PODS)
    variables = {"job": JOB, "instance": "|".join(pods)}  # Grafana's "All" of a multi value
    empty, queried = [], set()
    for path, total in ((main, 51), (compaction, 8)):
        exprs = path["exprs"]
        assert len(exprs) == total, (path["title"], len(exprs))
        for expr in exprs:
            names = names_in(expr)
            queried |= names
            result = await prom.query(resolve(expr, variables))
            unfilled = names & set(UNFILLED)
            if unfilled:
                assert result == [], (expr, "now has data: update metrics_bk_names.py")
                empty.append(expr)
            else:
                assert result, f"{expr} returned nothing"
    # Last count: 5 of the main dashboard's 51 queries are empty, each for a reason.
    assert len(empty) == 5, empty
    assert len(queried) == 25, sorted(queried)
    assert sorted(queried - set(NAMES)) == [], "a queried name the table does not know"
    assert sorted(n for n in queried if not NAMES[n].exported) == [
        "bookie_read_cache_hits", "bookie_read_cache_misses", "bookie_read_cache_size",
        "bookie_read_entry", "bookie_readahead_batch_count",
        "bookkeeper_server_thread_executor_queue"]


async def check_ours(prom: Prom, targets: list[str]) -> None:
    assert variable_queries(_ours()) == ["label_values(bookie_writable, instance)"]
    assert sorted(await prom.label_values("instance", "bookie_writable")) == sorted(targets)
    variables = {"instance": "|".join(targets), "__rate_interval": "1m", "__interval": "15s"}
    exprs = dashboard_exprs(_ours())
    assert len(exprs) >= 50, len(exprs)
    for expr in exprs:
        assert await prom.query(resolve(expr, variables)), f"{expr} returned nothing"
    # Alert rules are conditions (empty while nothing fires): each series one reads exists.
    names = metric_names(_rule_exprs(STANDALONE_RULES)) | {"up"}
    for name in sorted(names):
        assert await prom.query(name), f"{name} (an alert rule reads it) has no series"
