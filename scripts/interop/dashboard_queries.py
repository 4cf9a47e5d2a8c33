"""Extract the Prometheus queries of Grafana dashboards into tests/data/pulsar_dashboards/
queries.json, which tests/integration/test_pulsar_dashboards.py runs against a real
Prometheus (docs/operations.md §3.1). The test data is what the dashboards ask Prometheus,
not the dashboards: each dashboard's query variables (as Grafana resolves ``$job`` and
``$instance``) and the expression of every panel target outside a "Cluster..." row.

    python -m scripts.interop.dashboard_queries --source URL@COMMIT DASHBOARD.json... > OUT

Refresh it from the dashboards the Pulsar helm chart downloads (lhotari/pulsar-grafana-
dashboards, pulsar/bookkeeper.json and pulsar/bookkeeper-compaction.json) and name their
commit with --source.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def dashboard_exprs(dashboard: dict) -> list[str]:
    """Every panel target's expression, in order, outside a row titled "Cluster..." (those
    need a whole cluster registered in ZooKeeper)."""
    exprs: list[str] = []

    def walk(panels, cluster_row: bool) -> None:
        for panel in panels:
            if panel.get("type") == "row":
                cluster_row = panel.get("title", "").startswith("Cluster")
            walk(panel.get("panels", []), cluster_row)
            if not cluster_row:
                exprs.extend(t["expr"].strip() for t in panel.get("targets", [])
                             if t.get("expr", "").strip())
    walk(dashboard.get("panels", []), False)
    return exprs


def variable_queries(dashboard: dict) -> list[str]:
    variables = dashboard.get("templating", {}).get("list", [])
    return [v.get("definition") or v["query"] for v in variables if v.get("type") == "query"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="where the dashboards came from")
    parser.add_argument("dashboards", nargs="+", help="Grafana dashboard JSON files")
    args = parser.parse_args(argv)
    out = {"source": args.source, "dashboards": {}}
    for path in args.dashboards:
        with open(path, encoding="utf-8") as handle:
            dashboard = json.load(handle)
        out["dashboards"][os.path.basename(path)] = {
            "title": dashboard.get("title", ""), "variables": variable_queries(dashboard),
            "exprs": dashboard_exprs(dashboard)}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
