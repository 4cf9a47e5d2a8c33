"""A cluster whose bookies speak TLS only, with mutual TLS (docs/operations.md §6): bookies
advertise ``https`` in their service info, the replicated client picks the scheme from it, and
the bookies' own autorecovery copies a lost bookie's data over TLS, showing its certificate.
Real daemons, a real ZooKeeper, certificates of a private CA made at test time."""

from __future__ import annotations

import asyncio
import json
import os

import aiohttp
import pytest

from api.bkproto import v3
from api.client.ensemble import BookKeeper
from api.client.zookeeper import bookie_scheme
from api.tls import client_context
from bookie.entry import frame_entry, master_key
from tests.cluster.test_autorecovery import (FLAGS, PASSWORD, bookie_id, fully_replicated,
                                             naming, wait_until, write_ledgers)
from tests.cluster.test_cluster_cli import bookie, consecutive_free_ports
from tests.support.bk_client import BkClient
from tests.support.tls import pki_under


@pytest.fixture
def tls_cluster(tmp_path, zk_uri):
    pki = pki_under(str(tmp_path))
    daemons = []
    try:
        for i in range(4):
            daemon = pki.daemon(str(tmp_path / f"b{i}" / "data"), f"bookie{i}", *FLAGS,
                                "--metadata-service-uri", zk_uri)
            daemons.append(daemon)
            daemon.start()
        yield daemons, pki.client_context()
    finally:
        for daemon in daemons:
            if daemon.proc is not None and daemon.proc.poll() is None:
                daemon.kill9()


async def test_a_tls_cluster_writes_reads_and_re_replicates_over_tls(tls_cluster, zk_uri):
    daemons, tls = tls_cluster
    assert all(d.url.startswith("https://") for d in daemons)
    async with await BookKeeper.connect(zk_uri, tls=tls) as bk:
        schemes = {await asyncio.to_thread(bookie_scheme, bk.store.client, bk.store.root,
                                           bookie_id(d)) for d in daemons}
        assert schemes == {"https"}  # BookieServiceInfo names the protocol
        written = await write_ledgers(bk, 4, 30)
        for ledger_id, payloads in written.items():
            reader = await bk.open_ledger(ledger_id, PASSWORD, recover=False)
            assert [e.payload for e in await reader.read_range(0, len(payloads) - 1)] == \
                payloads
        victim = daemons[0]
        assert await naming(bk, written, bookie_id(victim))
        victim.kill9()

        async def restored():
            return not await fully_replicated(bk, written, {bookie_id(victim)})
        # The survivors' autorecovery (auditor, workers) does this over TLS, showing the
        # bookies' own certificates to each other (mutual TLS).
        await wait_until(restored, "the lost bookie's copies re-replicated over TLS")
    async with await BookKeeper.connect(zk_uri) as outsider:  # no CA, no client cert
        ledger_id = sorted(written)[0]
        reader = await outsider.open_ledger(ledger_id, PASSWORD, recover=False)
        await outsider.alive_bookies()  # learns https from the registrations
        with pytest.raises(aiohttp.ClientConnectorCertificateError):  # no CA to trust
            await reader.read_entry(0)


def test_cluster_up_tls_gives_bookie_port_start_tls_and_says_so(tmp_path):
    """Issue 36: `cluster up --tls --rpc-base-port` used to leave bookie_port plain, every
    ledger readable and writable without a certificate; now it takes START_TLS with the
    cluster's certificates and refuses plain requests, and `up` prints that."""
    home = str(tmp_path / "cluster")
    base = consecutive_free_ports(1)
    rpc = consecutive_free_ports(1)
    while rpc == base:
        rpc = consecutive_free_ports(1)
    up = bookie("cluster", "up", "--bookies", "1", "--tls", "--dir", home, "--base-port",
                str(base), "--rpc-base-port", str(rpc))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"bookie-rpc 127.0.0.1:{rpc} (START_TLS, mutual TLS)" in up.stdout
        tls = json.load(open(os.path.join(home, "cluster.json")))["tls"]
        key, data = master_key(b"cluster"), frame_entry(5, 0, -1, 0, b"x")

        async def adds() -> tuple[int, int]:
            async with BkClient.connect(rpc) as plain:
                refused = (await plain.add(5, 0, key, data)).status
            async with BkClient.connect(rpc) as secured:
                await secured.start_tls(client_context(tls["ca"], tls["clientCert"],
                                                       tls["clientKey"]))
                return refused, (await secured.add(5, 0, key, data)).status
        assert asyncio.run(adds()) == (v3.STATUS["EUA"], v3.STATUS["EOK"])
    finally:
        assert bookie("cluster", "down", "--dir", home).returncode == 0
