"""Running ``bookkeeper`` (bookie/bk_entry.py) as the Pulsar helm chart does, for
tests/cluster/test_bk_shell*.py: a subprocess with a bookkeeper.conf and the chart's
launcher variables."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from tests.support.servers import ROOT

ENTRY = [sys.executable, "-m", "bookie.bk_entry"]


def launcher_env(env: dict | None = None) -> dict:
    """This environment without BOOKIE_* settings, with the chart's BOOKIE_MEM (BE2)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BOOKIE_")}
    environ.update({"PYTHONPATH": ROOT, "BOOKIE_MEM": "-Xmx128M", **(env or {})})
    return environ


def run(*args: str, env: dict | None = None, cwd: str | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*ENTRY, *args], capture_output=True, text=True, timeout=90,
                          env=launcher_env(env), cwd=cwd or ROOT, input=stdin)


def conf(path, uri: str, data_dir=None) -> str:
    """A Pulsar-style bookkeeper.conf: metadataServiceUri set, zkServers empty."""
    lines = [f"metadataServiceUri={uri}", "zkServers=", "zkLedgersRootPath=/ledgers"]
    if data_dir is not None:
        lines += [f"journalDirectories={data_dir}/journal",
                  f"ledgerDirectories={data_dir}/ledgers"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def hierarchical(zookeeper) -> tuple[str, str]:
    prefix = f"/p{uuid.uuid4().hex[:10]}"
    return f"zk+hierarchical://{zookeeper.hosts}{prefix}/ledgers", f"{prefix}/ledgers"
