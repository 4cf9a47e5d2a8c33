"""BookKeeper's admin REST API (docs/admin-api.md) on a cluster bookie, against a real
ZooKeeper and two bookie daemons: every router path that needs the cluster answered with
BookKeeper's status and fields (the standalone side: tests/integration/test_admin_api.py)."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from api.client.ensemble import BookKeeper
from api.client.zookeeper import parse_uri
from api.cluster.underreplication import Underreplication
from tests.support.bk_admin import call


async def _until(fn, bound_s: float = 30.0):
    deadline = time.monotonic() + bound_s
    while True:
        answer = await fn()
        if answer is not None:
            return answer
        assert time.monotonic() < deadline, "condition not met within the bound"
        await asyncio.sleep(0.2)  # noqa: sleep-ok (a bounded poll of ZooKeeper's state)


async def test_cluster_paths_answer_from_zookeeper(start_bookies, zk, zk_uri):
    b0, b1 = start_bookies(2, "--admin-port", "0")
    ids = sorted(d.url.removeprefix("http://") for d in (b0, b1))
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2,
                                        password=b"pw")
        for i in range(3):
            await writer.append(f"entry {i}".encode())
        await writer.close()
        ledger = writer.ledger_id
    admin = b0.admin_url
    _, root = parse_uri(zk_uri)
    ur = Underreplication(zk, root)
    async with aiohttp.ClientSession() as s:
        async def get(path, verb="GET", body=None):
            return await call(s, admin + path, verb, body)

        assert (await get("/api/v1/bookie/is_ready")).status == 200
        listed = await get("/api/v1/bookie/list_bookies")
        assert (listed.status, listed.json()) == (200, {b: None for b in ids})
        named = await get("/api/v1/bookie/list_bookies?print_hostnames=true")
        assert named.json() == {b: "127.0.0.1" for b in ids}
        assert (await get("/api/v1/bookie/list_bookies?type=ro")).json() == {}
        infos = await get("/api/v1/bookie/list_bookie_info")
        assert infos.status == 200 and set(infos.json()) == {*ids, "ClusterInfo: "}
        assert infos.json()[ids[0]].startswith(": {Free: ")

        async def auditor():
            answer = await get("/api/v1/autorecovery/who_is_auditor")
            return answer if answer.status == 200 else None
        elected = await _until(auditor)
        assert elected.body in {f"Auditor: {b}" for b in ids}
        cluster = await get("/api/v1/bookie/cluster_info")
        assert (cluster.status, cluster.json()) == (200, {
            "auditorElected": True, "auditorId": elected.body.removeprefix("Auditor: "),
            "clusterUnderReplicated": False, "ledgerReplicationEnabled": True,
            "totalBookiesCount": 2, "writableBookiesCount": 2, "readonlyBookiesCount": 0,
            "unavailableBookiesCount": 0})

        # ledgers: from the metadata in ZooKeeper, entries through the replicated client
        assert (await get("/api/v1/ledger/list")).json() == {str(ledger): None}
        meta = (await get(f"/api/v1/ledger/metadata?ledger_id={ledger}")).json()[str(ledger)]
        assert (meta["ensembleSize"], meta["writeQuorumSize"], meta["ackQuorumSize"],
                meta["lastEntryId"], meta["closed"], meta["state"], meta["digestType"]) == \
            (2, 2, 2, 2, True, "CLOSED", "CRC32C")
        assert sorted(meta["allEnsembles"]["0"]) == ids
        listed = (await get("/api/v1/ledger/list?print_metadata=true")).json()
        assert listed[str(ledger)]["lastEntryId"] == 2
        read = await get(f"/api/v1/ledger/read?ledger_id={ledger}&start_entry_id=1")
        assert (read.status, read.json()) == (200, {"1": "entry 1", "2": "entry 2"})

        # the autorecovery switch, BookKeeper's ?enabled= parameter
        assert (await get("/api/v1/autorecovery/status")).json() == {"enabled": True}
        assert (await get("/api/v1/autorecovery/status", "PUT")).status == 400
        off = await get("/api/v1/autorecovery/status?enabled=false", "PUT")
        assert (off.status, off.json()) == (200, {"enabled": False})
        assert zk.exists(f"{root}/underreplication/disable") is not None
        refused = await get("/api/v1/autorecovery/trigger_audit", "PUT")
        assert (refused.status, refused.body) == (
            404, "Exception when do operation.Autorecovery is disabled. So giving up!")

        # under-replicated ledgers (marked by hand while the workers are switched off)
        none = await get("/api/v1/autorecovery/list_under_replicated_ledger")
        assert (none.status, none.body) == (404, "No under replicated ledgers found")
        await asyncio.to_thread(ur.mark, 4242, ["127.0.0.1:9"])
        marked = await get("/api/v1/autorecovery/list_under_replicated_ledger")
        assert (marked.status, marked.json()) == (200, [4242])
        replicas = await get("/api/v1/autorecovery/list_under_replicated_ledger"
                             "?printmissingreplica")
        assert replicas.json() == {"4242": ["127.0.0.1:9"]}
        assert (await get("/api/v1/autorecovery/list_under_replicated_ledger"
                          "?missingreplica=127.0.0.1:8")).status == 404
        assert (await get("/api/v1/autorecovery/list_under_replicated_ledger"
                          "?excludingmissingreplica=127.0.0.1:8")).json() == [4242]
        zk.delete(ur.marker_path(4242))
        assert (await get("/api/v1/autorecovery/status?enabled=true", "PUT")).json() == \
            {"enabled": True}

        # the lost-bookie delay and a triggered audit (the delay rewritten: AU4)
        delay = await get("/api/v1/autorecovery/lost_bookie_recovery_delay")
        assert (delay.status, delay.body) == (200, "lostBookieRecoveryDelay value: 30")
        path = f"{root}/underreplication/lostBookieRecoveryDelay"
        version = zk.get(path)[1].version
        triggered = await get("/api/v1/autorecovery/trigger_audit", "PUT")
        assert (triggered.status, triggered.body) == (200, "Success trigger audit.")
        assert zk.get(path)[0] == b"30" and zk.get(path)[1].version == version + 1
        put = await get("/api/v1/autorecovery/lost_bookie_recovery_delay", "PUT",
                        '{"delay_seconds": 45}')
        assert (put.status, put.body) == (200, "Success set lostBookieRecoveryDelay to 45")
        assert (await get("/api/v1/autorecovery/lost_bookie_recovery_delay")).body == \
            "lostBookieRecoveryDelay value: 45"
        assert (await get("/api/v1/autorecovery/lost_bookie_recovery_delay", "PUT",
                          "{}")).status == 404

        # recover and decommission are handed off: a bookie no ledger names is done at once
        sent = await get("/api/v1/autorecovery/bookie", "PUT",
                         '{"bookie_src": ["127.0.0.1:9"], "delete_cookie": false}')
        assert (sent.status, sent.body) == (200, "Success send recovery request command.")
        sent = await get("/api/v1/autorecovery/decommission", "PUT",
                         '{"bookie_src": "127.0.0.1:9"}')
        assert (sent.status, sent.body) == (
            200, "Success send decommission Bookie command 127.0.0.1:9")

        async def finished():
            return True if not await asyncio.to_thread(ur.decommissioning) else None
        await _until(finished)

        # a delete removes the metadata; BookKeeper's read of it then fails (500)
        deleted = await get(f"/api/v1/ledger/delete?ledger_id={ledger}", "DELETE")
        assert (deleted.status, deleted.body) == (200, f'"Deleted ledger: {ledger}"')
        assert (await get("/api/v1/ledger/list")).json() == {}
        assert (await get(f"/api/v1/ledger/metadata?ledger_id={ledger}")).status == 500
