"""`bookie cluster up|status|down` and the metadata views, end to end as a developer runs
them (docs/walkthrough.md): a real ZooKeeper and three bookie daemons."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from api.cluster.local_bookies import alive as _alive, port_free as _port_free
from tests.support.servers import ROOT
from tests.support.zookeeper import free_port


def bookie(*argv: str, stdin: str | None = None,
           env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bookie", *argv], cwd=ROOT, input=stdin,
                          env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})),
                          capture_output=True, text=True, timeout=300)


def consecutive_free_ports(count: int) -> int:
    while True:  # bounded in practice: a free port is rarely followed by taken ones
        base = free_port()
        if base + count < 65536 and all(_port_free(base + i) for i in range(count)):
            return base


def test_up_status_write_read_list_delete_down(tmp_path):
    home = str(tmp_path / "cluster")
    base = consecutive_free_ports(3)
    up = bookie("cluster", "up", "--bookies", "3", "--dir", home, "--base-port", str(base))
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.load(open(os.path.join(home, "cluster.json")))
    uri = state["metadataServiceUri"]
    try:
        assert f"metadata service: {uri}" in up.stdout
        for i in range(3):
            assert f"bookie 127.0.0.1:{base + i}: http://127.0.0.1:{base + i}" in up.stdout
        status = bookie("cluster", "status", "--dir", home)
        assert status.returncode == 0
        rows = [line.split() for line in status.stdout.splitlines()[2:-1]]
        assert [(r[0], r[1], r[2]) for r in rows] == [
            (f"127.0.0.1:{base + i}", "writable", "writable") for i in range(3)], status.stdout
        assert status.stdout.splitlines()[-1] == "under-replicated ledgers: 0", status.stdout

        url = f"http://127.0.0.1:{base}"
        written = bookie("ledger", "write", "--url", url, "--metadata-service-uri", uri,
                         stdin="a\nb\nc\n")
        assert written.returncode == 0, written.stderr
        ledger = json.loads(written.stdout)
        assert ledger["lastEntryId"] == 2
        read = bookie("ledger", "read", "--url", url, "--ledger", str(ledger["ledgerId"]),
                      "--metadata-service-uri", uri)
        assert read.stdout == "a\nb\nc\n"
        listed = bookie("ledger", "list", "--json", "--metadata-service-uri", uri)
        row = json.loads(listed.stdout)
        assert row["ledgerId"] == ledger["ledgerId"] and row["state"] == "CLOSED"
        replicated = bookie("ledger", "write", "--metadata-service-uri", uri, "--ensemble", "3",
                            "--write-quorum", "2", "--ack-quorum", "2", stdin="x\ny\nz\n")
        assert replicated.returncode == 0, replicated.stderr
        made = json.loads(replicated.stdout)
        assert made["lastEntryId"] == 2 and len(made["ensembles"][0][1]) == 3
        back = bookie("ledger", "read", "--ledger", str(made["ledgerId"]),
                      "--metadata-service-uri", uri)
        assert back.returncode == 0 and back.stdout == "x\ny\nz\n", back.stderr
        tailed = bookie("ledger", "tail", "--ledger", str(made["ledgerId"]),
                        "--metadata-service-uri", uri)  # closed: it ends by itself
        assert tailed.returncode == 0 and tailed.stdout == "x\ny\nz\n", tailed.stderr
        recovered = bookie("ledger", "recover", "--ledger", str(made["ledgerId"]),
                           "--metadata-service-uri", uri)
        assert json.loads(recovered.stdout)["state"] == "CLOSED"
        assert bookie("ledger", "delete", "--ledger", str(made["ledgerId"]),
                      "--metadata-service-uri", uri).returncode == 0
        deleted = bookie("ledger", "delete", "--ledger", str(ledger["ledgerId"]),
                         "--metadata-service-uri", uri)
        assert deleted.returncode == 0 and json.loads(deleted.stdout)["deleted"] is True
        assert bookie("ledger", "list", "--metadata-service-uri", uri).stdout == ""
    finally:
        down = bookie("cluster", "down", "--dir", home)
    assert down.returncode == 0, down.stdout
    assert "cluster stopped" in down.stdout
    assert not any(_alive(b["pid"]) for b in state["bookies"])
    assert not _alive(state["zookeeper"]["pid"])
    assert not os.path.exists(os.path.join(home, "cluster.json"))


def test_status_and_down_without_a_cluster_say_so(tmp_path):
    for command in ("status", "down"):
        done = bookie("cluster", command, "--dir", str(tmp_path))
        assert done.returncode == 1 and "bookie cluster up' first" in done.stdout


def test_the_exported_uri_serves_every_command_and_add_grows_the_cluster(tmp_path):
    """`up` prints the export line; with BOOKIE_METADATA_SERVICE_URI set no command needs
    --metadata-service-uri (ledger, shell, cluster init); `add` starts one more bookie on the
    next port, ready and registered, and `down` stops it with the others."""
    home = str(tmp_path / "cluster")
    base = consecutive_free_ports(4)
    rpc = consecutive_free_ports(4)
    while rpc <= base + 4 and base <= rpc + 4:  # two ranges apart
        rpc = consecutive_free_ports(4)
    up = bookie("cluster", "up", "--bookies", "2", "--dir", home, "--base-port", str(base),
                "--rpc-base-port", str(rpc))
    assert up.returncode == 0, up.stdout + up.stderr
    uri = json.load(open(os.path.join(home, "cluster.json")))["metadataServiceUri"]
    try:
        assert f"export BOOKIE_METADATA_SERVICE_URI={uri}" in up.stdout
        for i in range(2):  # each also speaks BookKeeper's protocol (issue 28)
            assert f"http://127.0.0.1:{base + i}, bookie-rpc 127.0.0.1:{rpc + i}" in up.stdout
        added = bookie("cluster", "add", "--dir", home)
        assert added.returncode == 0, added.stdout + added.stderr
        assert f"bookie 127.0.0.1:{base + 2}: http://127.0.0.1:{base + 2}, bookie-rpc " \
               f"127.0.0.1:{rpc + 2}" in added.stdout
        env = {"BOOKIE_METADATA_SERVICE_URI": uri}
        listed = bookie("shell", "listbookies", env=env)
        assert listed.returncode == 0, listed.stderr
        assert [line.split()[0] for line in listed.stdout.splitlines()] == [
            f"127.0.0.1:{base + i}" for i in range(3)]
        written = bookie("ledger", "write", "--ensemble", "3", "--write-quorum", "2",
                         "--ack-quorum", "2", stdin="p\nq\n", env=env)
        assert written.returncode == 0, written.stderr
        made = json.loads(written.stdout)
        read = bookie("ledger", "read", "--ledger", str(made["ledgerId"]), env=env)
        assert read.returncode == 0 and read.stdout == "p\nq\n", read.stderr
        init = bookie("cluster", "init", env=env)  # the first bookie initialised it
        assert init.returncode == 1 and "already initialised" in init.stderr
    finally:
        down = bookie("cluster", "down", "--dir", home)
    assert down.returncode == 0, down.stdout
    assert f"stopping bookie 127.0.0.1:{base + 2}" in down.stdout



def test_a_tls_cluster_up_and_the_commands_over_it(tmp_path):
    """`bookie cluster up --tls`: a CA and a certificate per bookie, HTTPS with mutual TLS;
    the variables it prints are all `bookie ledger` needs; without them it is refused."""
    home = str(tmp_path / "cluster")
    base = consecutive_free_ports(3)
    up = bookie("cluster", "up", "--tls", "--bookies", "3", "--dir", home,
                "--base-port", str(base))
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.load(open(os.path.join(home, "cluster.json")))
    uri = state["metadataServiceUri"]
    try:
        for i in range(3):
            assert f"bookie 127.0.0.1:{base + i}: https://127.0.0.1:{base + i}" in up.stdout
        env = dict(line.split()[1].split("=", 1) for line in up.stdout.splitlines()
                   if line.startswith("export BOOKIE_TLS_"))
        assert set(env) == {"BOOKIE_TLS_TRUST_FILE", "BOOKIE_TLS_CLIENT_CERT_FILE",
                            "BOOKIE_TLS_CLIENT_KEY_FILE"}
        status = bookie("cluster", "status", "--dir", home)
        rows = [line.split() for line in status.stdout.splitlines()[2:-1]]
        assert [r[2] for r in rows] == ["writable"] * 3, status.stdout
        made = bookie("ledger", "write", "--metadata-service-uri", uri, "--ensemble", "3",
                      "--write-quorum", "2", "--ack-quorum", "2", stdin="x\ny\n", env=env)
        assert made.returncode == 0, made.stderr
        ledger_id = str(json.loads(made.stdout)["ledgerId"])
        back = bookie("ledger", "read", "--ledger", ledger_id, "--metadata-service-uri", uri,
                      env=env)
        assert back.returncode == 0 and back.stdout == "x\ny\n", back.stderr
        single = bookie("ledger", "write", "--url", f"https://127.0.0.1:{base}",
                        "--metadata-service-uri", uri, stdin="s\n", env=env)
        assert single.returncode == 0, single.stderr
        refused = bookie("ledger", "read", "--ledger", ledger_id,
                         "--metadata-service-uri", uri)  # no CA, no client certificate
        assert refused.returncode != 0 and refused.stdout == "", refused.stderr
        assert "certificate" in refused.stderr.lower(), refused.stderr
    finally:
        down = bookie("cluster", "down", "--dir", home)
    assert down.returncode == 0, down.stdout


def test_up_with_racks_and_hosts_places_each_bookie_and_topology_shows_and_exports_it(tmp_path):
    """`up --hosts 2 --racks 2`: each bookie publishes its place (docs/cluster.md §6), `add`
    continues the layout, `topology` lists them, writes Pulsar's rack map and a script for
    BookKeeper's ScriptBasedMapping, and warns that one address holds several racks."""
    home = str(tmp_path / "cluster")
    base = consecutive_free_ports(4)
    up = bookie("cluster", "up", "--bookies", "3", "--hosts", "2", "--racks", "2", "--dir",
                home, "--base-port", str(base), "--placement", "host")
    assert up.returncode == 0, up.stdout + up.stderr
    uri = json.load(open(os.path.join(home, "cluster.json")))["metadataServiceUri"]
    try:
        assert f"on port {base} at /zone-0/rack-0 on host-0" in up.stdout
        assert f"on port {base + 1} at /zone-0/rack-1 on host-1" in up.stdout
        added = bookie("cluster", "add", "--dir", home)
        assert added.returncode == 0 and "at /zone-0/rack-1 on host-1" in added.stdout
        script = tmp_path / "topology.sh"
        shown = bookie("cluster", "topology", "--metadata-service-uri", uri,
                       "--write-rack-map", "--script", str(script))
        rows = [line.split() for line in shown.stdout.splitlines()[1:5]]
        assert rows == [[f"127.0.0.1:{base + i}", f"/zone-0/rack-{i % 2}", f"host-{i % 2}",
                         "registration"] for i in range(4)], shown.stdout
        assert "wrote Pulsar's rack map /bookies: 4 bookies set" in shown.stdout
        assert shown.returncode == 1 and "bookies at 127.0.0.1 stand in different racks" \
            in shown.stdout
        again = bookie("cluster", "topology", "--metadata-service-uri", uri)
        assert [line.split()[-1] for line in again.stdout.splitlines()[1:5]] == \
            ["map"] * 4  # "rack map": the map written above wins now
        resolved = subprocess.run(["sh", str(script), "127.0.0.1", "10.9.9.9"],
                                  capture_output=True, text=True, check=True)
        assert resolved.stdout.split() == ["/zone-0/rack-0", "/default-region/default-rack"]
        cluster_json = json.load(open(os.path.join(home, "cluster.json")))
        assert cluster_json["bookies"][3]["place"]["placement_policy"] == "host"
    finally:
        down = bookie("cluster", "down", "--dir", home)
    assert down.returncode == 0, down.stdout
