"""The cluster drill's CI version (scripts/drill_cluster.py): ten rounds of bookie kills,
pauses, ZooKeeper restarts, dead writers and racing recoveries, S1-S6 checked every round."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.servers import ROOT


def test_cluster_drill_10_rounds_lose_nothing_and_violate_nothing(seed):
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "drill_cluster.py"), "--rounds", "10",
         "--seconds", "240", "--seed", str(seed), "--entries", "60"],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
        timeout=300)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, f"drill failed (seed {seed}):\n{done.stdout}\n{done.stderr[-3000:]}"
    assert summary.startswith("rounds=10 ") and " lost=0 violations=0 " in summary, summary
    print(summary)
