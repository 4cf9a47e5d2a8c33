"""The replicated client over BookKeeper's protocol (api/client/bkport/, docs/ledger_client.md
"Transports"): a 3/2/2 ledger written, read and recovered with ``protocol="bk"`` on bookies
that also speak HTTP, with the bookies' own counters showing that no ledger call went over
HTTP; and ``protocol="auto"`` choosing per bookie from its registration (PT1-PT2)."""

from __future__ import annotations

import re
import ssl
import urllib.request

import pytest

from api.client.bkport.client import BkBookieClient
from api.client.bkport.transport import ProtocolTransport
from api.client.bookie_client import BookieClient
from api.client.ensemble import BookKeeper
from api.client.metadata import MetadataState
from api.client.zookeeper import ZkMetadataStore
from api.server.metrics_bk import HTTP_OPS
from bookie.errors import Fenced
from tests.support.bk_registration import register_as_bookkeeper
from tests.cluster.conftest import QUIET_FLAGS
from tests.support.tls import pki_under


def metrics(daemon, tls=None) -> str:
    with urllib.request.urlopen(daemon.url + "/metrics", timeout=10, context=tls) as reply:
        return reply.read().decode()


def http_ledger_calls(text: str) -> int:
    """Ledger calls the bookie answered over HTTP (bookie_request_seconds by route)."""
    total = 0
    for op, count in re.findall(r'^bookie_request_seconds_count\{[^}]*op="(\w+)"[^}]*\} (\S+)',
                                text, re.M):
        if op in HTTP_OPS:
            total += float(count)
    return int(total)


def bk_port_calls(text: str, op: str) -> int:
    """Successful ``op`` answers: BookKeeper's series, both listeners (metrics_bk.py MB2)."""
    found = re.search(rf'^bookkeeper_server_{op}_count\{{success="true"\}} (\S+)', text, re.M)
    return int(float(found.group(1))) if found else 0


async def test_a_3_2_2_ledger_written_read_and_recovered_over_the_bookkeeper_protocol(
        start_bookies, zk_uri):
    daemons = start_bookies(4, "--bookie-port", "0")
    payloads = [f"entry {i} ".encode() * (i % 7 + 1) for i in range(60)]
    async with await BookKeeper.connect(zk_uri, protocol="bk") as bk:
        writer = await bk.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2,
                                        password=b"pw")
        assert [await writer.append(p) for p in payloads[:10]] == list(range(10))
        assert await writer.append_many(payloads[10:]) == range(10, 60)
        assert await writer.close() == 59
        ensemble = (await bk.store.read(writer.ledger_id)).ensembles[0][1]
        for bookie_id in ensemble:  # every client of the ensemble is the BK one, at bookie-rpc
            client = bk.client(bookie_id)
            assert isinstance(client, BkBookieClient)
            assert client.address.endswith(":%d" % next(
                d.bk_port for d in daemons if d.url.endswith(bookie_id)))

        open_writer = await bk.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2,
                                             password=b"pw")
        for p in payloads[:25]:
            await open_writer.append(p)  # left open: its writer "dies" here

        async with await BookKeeper.connect(zk_uri, protocol="bk") as other:
            reader = await other.open_ledger(writer.ledger_id, b"pw", recover=False)
            assert [e.payload for e in await reader.read_range(0, 59)] == payloads
            assert [e.payload for e in await reader.read_range(17, 17)] == [payloads[17]]
            recovered = await other.open_ledger(open_writer.ledger_id, b"pw")  # fence + close
            metadata = await other.store.read(open_writer.ledger_id)
            assert metadata.state is MetadataState.CLOSED and metadata.last_entry_id == 24
            assert [e.payload for e in await recovered.read_range(0, 24)] == payloads[:25]
        with pytest.raises(Fenced):  # EN3: the fence, over BookKeeper's protocol, holds
            await open_writer.append(b"after recovery")

    texts = [metrics(d) for d in daemons]
    assert [http_ledger_calls(t) for t in texts] == [0, 0, 0, 0]
    assert sum(bk_port_calls(t, "ADD_ENTRY") for t in texts) >= 2 * 60 + 2 * 25
    assert sum(bk_port_calls(t, "READ_ENTRY_FENCE") + bk_port_calls(t, "READ_ENTRY")
               for t in texts) > 0


async def test_auto_takes_http_where_registered_and_bk_where_only_bookie_rpc_is(
        start_bookies, zk_uri, zk):
    (daemon,) = start_bookies(1, "--bookie-port", "0")
    ours = daemon.url.rsplit("/", 1)[-1]
    theirs = register_as_bookkeeper(zk, zk_uri, daemon)
    store = ZkMetadataStore(zk_uri)
    store.start()
    try:
        auto = ProtocolTransport(store)
        assert sorted(await auto.writable_bookies()) == sorted([ours, theirs])
        assert not auto.uses_bk(ours) and auto.uses_bk(theirs)
        assert isinstance(auto.client(ours), BookieClient)
        bk_client = auto.client(theirs)
        assert isinstance(bk_client, BkBookieClient) and bk_client.address == theirs
        assert await bk_client.ready()
        await bk_client.close()
        assert not ProtocolTransport(store, protocol="http").uses_bk(theirs)
        # PT1: with TLS, "auto" still takes HTTPS for ours and BookKeeper's protocol (with
        # START_TLS, given the context) for theirs; "bk" takes it for both.
        tls = ssl.create_default_context()
        tls_auto = ProtocolTransport(store, tls=tls)
        await tls_auto.learn([ours, theirs])
        assert not tls_auto.uses_bk(ours) and tls_auto.uses_bk(theirs)
        assert tls_auto.client(theirs).connection.tls is tls
        tls_bk = ProtocolTransport(store, tls=tls, protocol="bk")
        await tls_bk.learn([ours])
        assert tls_bk.uses_bk(ours) and tls_bk.client(ours).connection.tls is tls
    finally:
        await store.close()


async def test_a_3_2_2_ledger_over_start_tls_on_mutual_tls_bookies(tmp_path, zk_uri):
    """PT1 and connection.py KC6: protocol="bk" with a TLS context on bookies whose
    bookie_port asks for client certificates (and refuses plain requests EUA, bk_tls.py
    TS4): every ledger call goes over BookKeeper's protocol, through START_TLS, none over
    HTTPS, none refused."""
    pki = pki_under(str(tmp_path))
    daemons = [pki.daemon(str(tmp_path / f"t{i}" / "data"), f"bookie{i}", *QUIET_FLAGS,
                          "--bookie-port", "0", "--metadata-service-uri", zk_uri)
               for i in range(3)]
    try:
        for daemon in daemons:
            daemon.start()
        payloads = [f"tls entry {i} ".encode() * (i % 5 + 1) for i in range(40)]
        async with await BookKeeper.connect(zk_uri, tls=pki.client_context(),
                                            protocol="bk") as bk:
            writer = await bk.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2,
                                            password=b"pw")
            assert await writer.append_many(payloads) == range(0, 40)
            assert await writer.close() == 39
            for bookie_id in (await bk.store.read(writer.ledger_id)).ensembles[0][1]:
                client = bk.client(bookie_id)
                assert isinstance(client, BkBookieClient)
                assert client.connection.tls is not None
        async with await BookKeeper.connect(zk_uri, tls=pki.client_context(),
                                            protocol="bk") as other:
            reader = await other.open_ledger(writer.ledger_id, b"pw")
            assert [e.payload for e in await reader.read_range(0, 39)] == payloads
        texts = [metrics(d, pki.client_context()) for d in daemons]
        assert [http_ledger_calls(t) for t in texts] == [0, 0, 0]
        assert sum(bk_port_calls(t, "ADD_ENTRY") for t in texts) >= 2 * 40
        assert not any(re.search(r"^bookie_bk_requests_refused_total\{", t, re.M)
                       for t in texts)
    finally:
        for daemon in daemons:
            if daemon.proc is not None and daemon.proc.poll() is None:
                daemon.terminate()
