"""docs/walkthrough.md's cluster session, run as written there but with a real ledger (5,000
entries) and the default re-replication throttle (issue 54): three bookies, a ledger on all
three, one killed, `cluster status` showing it down, the ledger under-replicated for as long as
no bookie can take its copies, `cluster add` giving one, and autorecovery copying onto it.

The one difference from the doc: lost_bookie_recovery_delay_s is 1 s here (the doc waits the
default 30 s); the ZooKeeper session expiry of the killed bookie (10 s) is the same."""

from __future__ import annotations

import json
import os
import signal
import time

from tests.cluster.test_cluster_cli import bookie, consecutive_free_ports
from tests.support.servers import ROOT

ENTRIES = 5000
DEADLINE_S = 90.0
WALKTHROUGH = os.path.join(ROOT, "docs", "walkthrough.md")


def _rows(status_stdout: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in status_stdout.splitlines()
            if line.startswith("127.0.0.1:")}


def _until(what: str, check, deadline_s: float = DEADLINE_S):
    deadline = time.monotonic() + deadline_s
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"not within {deadline_s:.0f} s: {what}"
        time.sleep(0.5)  # noqa: sleep-ok (poll interval of a bounded wait)


def test_the_doc_runs_these_commands():
    """The session below is the doc's: its commands are there, in this order."""
    text = open(WALKTHROUGH).read()
    at = 0
    for command in ("$ bookie cluster up --bookies 3", "| bookie ledger write --ensemble 3",
                    "$ kill -9", "$ bookie cluster status", "$ bookie shell listunderreplicated",
                    "$ bookie cluster add", "$ bookie shell listunderreplicated",
                    "$ bookie ledger read --ledger 0", "$ bookie cluster down"):
        found = text.find(command, at)
        assert found >= 0, f"docs/walkthrough.md no longer runs {command!r} after offset {at}"
        at = found + len(command)
    assert "REREPLICATION_RATE_BYTES" not in text  # the copy is never throttled to be seen


def test_the_walkthrough_session_with_a_real_ledger_at_the_default_throttle(tmp_path):
    home = str(tmp_path / "cluster")
    base = consecutive_free_ports(4)
    delay = {"BOOKIE_LOST_BOOKIE_RECOVERY_DELAY_S": "1"}
    up = bookie("cluster", "up", "--bookies", "3", "--dir", home, "--base-port", str(base),
                env=delay)
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.load(open(os.path.join(home, "cluster.json")))
    env = {"BOOKIE_METADATA_SERVICE_URI": state["metadataServiceUri"]}
    try:
        payloads = [f"entry {i:05d}" for i in range(ENTRIES)]
        written = bookie("ledger", "write", "--ensemble", "3", "--write-quorum", "2",
                         "--ack-quorum", "2", stdin="".join(p + "\n" for p in payloads), env=env)
        assert written.returncode == 0, written.stderr
        ledger = json.loads(written.stdout)
        assert ledger["lastEntryId"] == ENTRIES - 1
        victim = next(b for b in state["bookies"] if b["id"] == ledger["ensembles"][0][1][0])
        os.kill(victim["pid"], signal.SIGKILL)

        status = bookie("cluster", "status", "--dir", home)
        assert status.returncode == 0, status.stdout + status.stderr
        rows = _rows(status.stdout)
        assert set(rows) == {b["id"] for b in state["bookies"]}, status.stdout
        assert rows[victim["id"]][2] == "down", status.stdout  # at once, still registered

        def marked():
            found = bookie("shell", "listunderreplicated", env=env)
            return found if "1 ledger(s) under-replicated" in found.stdout else None
        listed = _until("the auditor marks the ledger", marked)
        assert f"missing {victim['id']}" in listed.stdout and listed.returncode == 1
        # No bookie outside the ensemble: the marker stays, whatever the throttle.
        status = bookie("cluster", "status", "--dir", home)
        assert "under-replicated ledgers: 1" in status.stdout, status.stdout
        assert _rows(status.stdout)[victim["id"]][1:3] == ["no", "down"], status.stdout

        added = bookie("cluster", "add", "--dir", home, env=delay)
        assert added.returncode == 0, added.stdout + added.stderr
        _until("autorecovery copies the ledger onto the new bookie", lambda: bookie(
            "shell", "listunderreplicated", env=env).returncode == 0)
        info = json.loads(bookie("ledger", "list", "--json", env=env).stdout)
        assert victim["id"] not in info["ensembles"][0][1]
        assert f"127.0.0.1:{base + 3}" in info["ensembles"][0][1]
        read = bookie("ledger", "read", "--ledger", str(ledger["ledgerId"]), env=env)
        assert read.returncode == 0 and read.stdout.splitlines() == payloads, read.stderr
        status = bookie("cluster", "status", "--dir", home)
        assert "under-replicated ledgers: 0" in status.stdout, status.stdout
    finally:
        down = bookie("cluster", "down", "--dir", home)
    assert down.returncode == 0, down.stdout
