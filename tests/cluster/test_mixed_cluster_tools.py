"""Our cluster tools where a bookie is Apache BookKeeper's (issue 55 item 5), on real
daemons and ZooKeeper: a registration as BookKeeper's bookie writes it (no http endpoint,
only bookie-rpc) fronts one of our bookies' BookKeeper port under an id of its own, so
every call the tools make to that "BookKeeper bookie" must go over BookKeeper's protocol.
Before the BookKeeper-protocol transport, list_bookie_info left such a bookie out and
`bookie ledger read|recover` failed on its entries."""

from __future__ import annotations

import json
import subprocess
import sys

import aiohttp

from api.client.ensemble import BookKeeper
from tests.support.bk_admin import call
from tests.support.bk_registration import register_as_bookkeeper
from tests.support.servers import ROOT


def bookie(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bookie", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


async def test_admin_and_ledger_commands_reach_a_bookkeeper_bookie(start_bookies, zk, zk_uri):
    admin, rpc = start_bookies(2, "--admin-port", "0", "--bookie-port", "0")
    theirs = register_as_bookkeeper(zk, zk_uri, rpc)
    ours = admin.url.removeprefix("http://")

    async with aiohttp.ClientSession() as session:
        infos = await call(session, admin.admin_url + "/api/v1/bookie/list_bookie_info")
    assert infos.status == 200 and theirs in infos.json(), infos.body
    assert infos.json()[theirs].startswith(": {Free: ")

    # A ledger on exactly our bookie and the "BookKeeper" one, written and left open.
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(ensemble=3, write_quorum=3, ack_quorum=3,
                                        password=b"pw")
        assert theirs in writer.ensemble
        for i in range(5):
            await writer.append(b"entry %d" % i)
    uri = zk_uri
    recovered = bookie("ledger", "recover", "--ledger", str(writer.ledger_id),
                       "--password", "pw", "--metadata-service-uri", uri)
    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(recovered.stdout)["lastEntryId"] == 4
    read = bookie("ledger", "read", "--ledger", str(writer.ledger_id), "--password", "pw",
                  "--metadata-service-uri", uri)
    assert read.returncode == 0 and read.stdout.splitlines() == [
        f"entry {i}" for i in range(5)], read.stderr
    info = bookie("ledger", "info", "--ledger", str(writer.ledger_id),
                  "--metadata-service-uri", uri)
    assert info.returncode == 0 and theirs in info.stdout, info.stderr
    assert ours in info.stdout
