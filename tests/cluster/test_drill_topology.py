"""scripts/drill/drill_topology.py, short (docs/performance.md's figures come from its long runs): a
rack lost for good under writers loses no acknowledged entry, and autorecovery restores the
copies and the placement once a new rack comes up."""

from __future__ import annotations

import subprocess
import sys

from tests.support.servers import ROOT


def test_a_short_topology_drill_loses_nothing_and_restores_placement():
    done = subprocess.run([sys.executable, "scripts/drill/drill_topology.py", "--rounds", "2",
                           "--ledgers", "3", "--entries", "90", "--seed", "39"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " lost=0 violations=0 " in summary and "racks_lost=2" in summary, summary
    rounds = [line for line in done.stdout.splitlines() if line.startswith("round ")]
    assert len(rounds) == 2 and all(" lost=0 " in line for line in rounds), rounds
