"""The operator's autorecovery commands against a real ZooKeeper: listunderreplicated,
autorecovery enable|disable|status|set-delay (decommission: tests/cluster/test_autorecovery.py)."""

from __future__ import annotations

import json

from api.client.zookeeper import parse_uri
from api.cluster.underreplication import Underreplication
from bookie.shell import main as shell


def run(capsys, *argv) -> tuple[int, list[dict]]:
    code = shell([*argv, "--json"])
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line.strip()]


def test_listunderreplicated_shows_markers_and_locks(zk, zk_uri, capsys):
    _, root = parse_uri(zk_uri)
    ur = Underreplication(zk, root, "worker-9")
    ur.ensure()
    code, rows = run(capsys, "listunderreplicated", "--metadata-service-uri", zk_uri)
    assert code == 0 and rows == []
    ur.mark(12, ["127.0.0.1:1"])
    ur.mark(2**40 + 3, ["127.0.0.1:2", "127.0.0.1:3"])
    assert ur.poll(skip={12})[0] == 2**40 + 3  # locked by worker-9
    code, rows = run(capsys, "listunderreplicated", "--metadata-service-uri", zk_uri)
    assert code == 1  # problems: ledgers are under-replicated
    assert [(r["ledgerId"], r["replicas"], r["lockedBy"]) for r in rows] == [
        (12, ["127.0.0.1:1"], None), (2**40 + 3, ["127.0.0.1:2", "127.0.0.1:3"], "worker-9")]
    assert shell(["listunderreplicated", "--metadata-service-uri", zk_uri]) == 1
    text = capsys.readouterr().out
    assert "2 ledger(s) under-replicated" in text and "locked by worker-9" in text


def test_autorecovery_switch_and_delay(zk, zk_uri, capsys):
    _, root = parse_uri(zk_uri)
    uri = ("--metadata-service-uri", zk_uri)
    code, [status] = run(capsys, "autorecovery", "status", *uri)
    assert code == 0 and status["enabled"] and status["auditor"] is None
    code, [row] = run(capsys, "autorecovery", "disable", *uri)
    assert code == 0 and row["changed"] and zk.exists(f"{root}/underreplication/disable")
    code, [row] = run(capsys, "autorecovery", "disable", *uri)
    assert not row["changed"]  # already
    code, [row] = run(capsys, "autorecovery", "set-delay", "45", *uri)
    assert code == 0 and zk.get(f"{root}/underreplication/lostBookieRecoveryDelay")[0] == b"45"
    code, [status] = run(capsys, "autorecovery", "status", *uri)
    assert not status["enabled"] and status["lostBookieRecoveryDelay"] == 45
    code, [row] = run(capsys, "autorecovery", "enable", *uri)
    assert row["enabled"] and zk.exists(f"{root}/underreplication/disable") is None
    assert shell(["autorecovery", "set-delay", *uri]) == 2  # no number
