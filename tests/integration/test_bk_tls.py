"""TLS on ``bookie_port`` (docs/bookkeeper-protocol.md §9, api/server/bk_tls.py TS1-TS6):
BookKeeper's START_TLS upgrade over real TCP on 127.0.0.1, with certificates made at test time
by a private CA (api/cluster/certs.py), on asyncio's loop and on uvloop (the daemon's
default)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import ssl

import pytest
import uvloop

from api.bkproto import v2, v3
from api.cluster.certs import make_ca, make_cert, serial_of
from api.server.bk_listener import BkListener
from api.tls import client_context, reload_server_context, server_context
from bookie.entry import frame_entry, master_key
from tests.integration.test_tls import _wait_for_log
from tests.support.bk_client import BkClient
from tests.support.servers import Daemon, running_bookie

KEY = master_key(b"bk-tls")
S = v3.STATUS


def entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, 0, b"over tls %d" % entry_id)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, the bookie's certificate, clients of that CA (with roles and without), and a
    client of another CA."""
    root = str(tmp_path_factory.mktemp("bkpki"))
    ca = make_ca(os.path.join(root, "ca"))
    other = make_ca(os.path.join(root, "other"), "another CA")
    return {"ca": ca, "root": root, "server": make_cert(ca, os.path.join(root, "s"), "bookie"),
            "client": make_cert(ca, os.path.join(root, "c"), "client"),
            "writer": make_cert(ca, os.path.join(root, "w"), "writer", role="writer"),
            "reader": make_cert(ca, os.path.join(root, "r"), "reader", role="reader"),
            "stranger": make_cert(other, os.path.join(root, "x"), "stranger")}


def bookie_context(pki, mutual: bool, cert=None) -> ssl.SSLContext:
    cert = cert or pki["server"]
    return server_context(cert.cert_file, cert.key_file,
                          pki["ca"].cert_file if mutual else None)


def client_of(pki, who: str | None = "client") -> ssl.SSLContext:
    if who is None:
        return client_context(pki["ca"].cert_file)
    return client_context(pki["ca"].cert_file, pki[who].cert_file, pki[who].key_file)


@dataclasses.dataclass
class Served:
    bookie: object
    listener: BkListener
    port: int

    def connection(self):
        """The listener's one connection (after a round trip it exists)."""
        (only,) = self.listener.connections
        return only


@contextlib.asynccontextmanager
async def tls_listener(config, context):
    async with running_bookie(config) as running:
        listener = BkListener(running.bookie, 1000, ssl_context=context)
        server = await asyncio.get_running_loop().create_server(
            listener.protocol, "127.0.0.1", 0)
        try:
            yield Served(running.bookie, listener, server.sockets[0].getsockname()[1])
        finally:
            server.close()
            for connection in list(listener.connections):
                connection.transport.close()
            await server.wait_closed()


async def _round_trip_over_tls(config, pki, mutual: bool) -> None:
    async with tls_listener(config, bookie_context(pki, mutual)) as served, \
            BkClient.connect(served.port) as client:
        answer = await client.start_tls(client_of(pki))
        assert answer.status == S["EOK"] and answer.HasField("startTLSResponse")
        assert client.peer_certificate() is not None  # TS1: the connection is TLS now
        for entry_id in range(3):
            added = await client.add(4, entry_id, KEY, entry(4, entry_id))
            assert added.status == S["EOK"], added
        read = await client.read(4, 1)
        assert read.status == S["EOK"] and read.readResponse.body == entry(4, 1)
        # v2 after START_TLS, as BookKeeper's client with useV2WireProtocol does.
        v2_read = await client.call_v2(v2.encode_read(4, 2))
        assert (v2_read.rc, v2_read.data) == (v2.EOK, entry(4, 2))
        v2_add = await client.call_v2(v2.encode_add(4, 3, KEY, entry(4, 3)))
        assert v2_add.rc == v2.EOK
        assert served.bookie.stats.bk_refused == {}


async def test_start_tls_then_v3_and_v2_adds_and_reads_travel_over_tls(bookie_config, pki):
    await _round_trip_over_tls(bookie_config, pki, mutual=False)


def test_start_tls_with_mutual_tls_on_uvloop(bookie_config, pki):
    """uvloop is the daemon's default loop: its start_tls takes the same steps (TS1)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_round_trip_over_tls(bookie_config, pki, mutual=True))


async def test_mutual_tls_refuses_plain_requests_eua_and_stores_nothing(bookie_config, pki):
    """TS4: before START_TLS only AUTH and START_TLS are answered; the rest is EUA."""
    async with tls_listener(bookie_config, bookie_context(pki, True)) as served:
        async with BkClient.connect(served.port) as plain:
            added = await plain.add(9, 0, KEY, entry(9, 0))
            assert added.status == S["EUA"]
            assert (await plain.read(9, 0)).status == S["EUA"]
            lac = await plain.call(plain.request("READ_LAC", ledgerId=9))
            assert lac.status == S["EUA"]
            auth = await plain.call(plain.request("AUTH", authPluginName="AuthDisabledPlugin",
                                                  payload=b""))
            assert auth.status == S["EOK"]  # the opening exchange is still answered
        async with BkClient.connect(served.port) as plain_v2:
            assert (await plain_v2.call_v2(v2.encode_add(9, 1, KEY, entry(9, 1)))).rc == v2.EUA
            assert (await plain_v2.call_v2(v2.encode_read(9, 1))).rc == v2.EUA
            batch = await plain_v2.call_v2(v2.encode_batch_read(9, 0, 5, 10, 1 << 20))
            assert batch.rc == v2.EUA
        assert served.bookie.storage.ledgers.get(9) is None  # nothing stored
        async with BkClient.connect(served.port) as secured:
            assert (await secured.start_tls(client_of(pki))).status == S["EOK"]
            read = await secured.read(9, 0)
            assert read.status in (S["ENOLEDGER"], S["ENOENTRY"]), read
        assert served.bookie.stats.bk_refused == {
            ("ADD_ENTRY", "EUA"): 2, ("READ_ENTRY", "EUA"): 2, ("READ_LAC", "EUA"): 1,
            ("BATCH_READ_ENTRY", "EUA"): 1,
            ("READ_ENTRY", "ENOLEDGER" if read.status == S["ENOLEDGER"] else "ENOENTRY"): 1}


@pytest.mark.parametrize("who", [None, "stranger"])
async def test_a_client_without_a_certificate_of_the_ca_fails_its_handshake(
        bookie_config, pki, who):
    """TS3: no client certificate, or one of another CA: the handshake fails, the
    connection is closed, the refusal counted; nothing was served."""
    async with tls_listener(bookie_config, bookie_context(pki, True)) as served, \
            BkClient.connect(served.port) as client:
        context = client_context(pki["ca"].cert_file)
        if who is not None:
            context.load_cert_chain(pki[who].cert_file, pki[who].key_file)
        connection = None
        with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
            answer = await client.call(client.request("START_TLS"))
            assert answer.status == S["EOK"]
            connection = served.connection()
            await client.writer.start_tls(context, server_hostname="127.0.0.1")
            # TLS 1.3: the client's handshake ends before the bookie checked its
            # certificate; the refusal reaches it as its first read fails.
            await client.add(9, 0, KEY, entry(9, 0))
        assert connection is not None
        await asyncio.wait_for(connection.idle.wait(), 30)  # the handshake's end (BL3)
        assert served.bookie.stats.bk_refused == {("START_TLS", "CLOSED"): 1}
        assert connection.transport.is_closing()
        assert served.bookie.storage.ledgers.get(9) is None


async def test_a_second_start_tls_closes_the_connection(bookie_config, pki):
    """TS2, as BookKeeper's bookie (a second TLS handler fails, the channel closes)."""
    async with tls_listener(bookie_config, bookie_context(pki, False)) as served, \
            BkClient.connect(served.port) as client:
        assert (await client.start_tls(client_of(pki))).status == S["EOK"]
        await client.send(v3.frame(client.request("START_TLS")))
        assert await client.closed_by_peer()
        assert served.bookie.stats.bk_refused == {("START_TLS", "CLOSED"): 1}


async def test_a_reloaded_certificate_serves_new_connections(bookie_config, pki, tmp_path):
    """TS5: the listener holds the very context SIGHUP reloads (api/tls.py TL2)."""
    own = make_cert(pki["ca"], str(tmp_path / "rotating"), "bookie")
    context = bookie_context(pki, True, own)
    async with tls_listener(bookie_config, context) as served, \
            BkClient.connect(served.port) as before:
        assert (await before.start_tls(client_of(pki))).status == S["EOK"]
        assert _serial(before.peer_certificate()) == serial_of(own.cert_file)
        renewed = make_cert(pki["ca"], str(tmp_path / "rotating"), "bookie")  # same files
        reload_server_context(context, renewed.cert_file, renewed.key_file)
        async with BkClient.connect(served.port) as after:
            assert (await after.start_tls(client_of(pki))).status == S["EOK"]
            assert _serial(after.peer_certificate()) == serial_of(renewed.cert_file)
            assert (await after.add(2, 0, KEY, entry(2, 0))).status == S["EOK"]
        assert (await before.read(2, 0)).status == S["EOK"]  # the old session stays


async def test_authorized_roles_are_read_from_the_certificate_ou(bookie_config, pki):
    """TS6: tls_authorized_roles as BookKeeper's BookieAuthZFactory: OU 0:<role>."""
    config = dataclasses.replace(bookie_config, tls_ca_file=pki["ca"].cert_file,
                                 tls_authorized_roles="writer, admin")
    async with tls_listener(config, bookie_context(pki, True)) as served:
        async with BkClient.connect(served.port) as writer:
            await writer.start_tls(client_of(pki, "writer"))
            assert (await writer.add(6, 0, KEY, entry(6, 0))).status == S["EOK"]
        for who in ("reader", "client"):  # another role; no role at all
            async with BkClient.connect(served.port) as other:
                assert (await other.start_tls(client_of(pki, who))).status == S["EOK"]
                assert (await other.add(6, 1, KEY, entry(6, 1))).status == S["EUA"]
                assert (await other.read(6, 0)).status == S["EUA"]
        assert served.bookie.stats.bk_refused == {
            ("START_TLS", "EUA"): 2, ("ADD_ENTRY", "EUA"): 2, ("READ_ENTRY", "EUA"): 2}


def test_a_mutual_tls_daemon_serves_start_tls_and_reloads_it_on_sighup(tmp_path, pki):
    """bookie/cli.py: bookie_port gets the HTTPS listener's context (uvloop, the default
    loop), refuses plain requests, and SIGHUP's reload reaches it."""
    own = make_cert(pki["ca"], str(tmp_path / "rotating"), "bookie")
    daemon = Daemon(str(tmp_path / "data"), "--bookie-port", "0", "--tls-cert-file",
                    own.cert_file, "--tls-key-file", own.key_file, "--tls-ca-file",
                    pki["ca"].cert_file, client_ssl=client_of(pki)).start()
    try:
        async def session() -> tuple[int, int]:
            async with BkClient.connect(daemon.bk_port) as plain:
                refused = (await plain.add(3, 0, KEY, entry(3, 0))).status
            async with BkClient.connect(daemon.bk_port) as secured:
                assert (await secured.start_tls(client_of(pki))).status == S["EOK"]
                assert (await secured.add(3, 0, KEY, entry(3, 0))).status == S["EOK"]
                return refused, _serial(secured.peer_certificate())
        refused, served = asyncio.run(session())
        assert refused == S["EUA"] and served == serial_of(own.cert_file)
        renewed = make_cert(pki["ca"], str(tmp_path / "rotating"), "bookie")
        daemon.proc.send_signal(signal.SIGHUP)
        _wait_for_log(daemon, "reloaded; new connections use it")
        assert asyncio.run(session())[1] == serial_of(renewed.cert_file)
    finally:
        daemon.terminate()


def _serial(der: bytes) -> int:
    from cryptography import x509  # noqa: PLC0415 (the one test helper that parses one)

    return x509.load_der_x509_certificate(der).serial_number
