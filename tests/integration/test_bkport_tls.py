"""START_TLS in the client's BookKeeper-protocol connection (api/client/bkport/connection.py
KC6-KC7) against real bookie daemons' ``bookie_port`` with TLS (api/server/bk_tls.py): the
connection starts plain, START_TLS, then TLS on the same socket; mutual TLS; a bookie without
TLS; a CA that is not the bookie's. Certificates of a private CA made at test time, real TCP
on 127.0.0.1, no mocks."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import ssl
import struct
import urllib.request

import pytest
import uvloop

from api.bkproto import v3
from api.client import BookieClient
from api.client.bkport.client import BkBookieClient
from api.client.bkport.connection import ConnectionLost, StartTlsFailed
from api.client.bookies import BOOKIE_FAILURES
from api.client.codec import LedgerCodec
from api.cluster.certs import make_ca, make_cert, serial_of
from api.tls import client_context
from bookie.errors import NoLedger, Unauthorized
from tests.integration.test_bk_tls import bookie_context, tls_listener
from tests.support.servers import Daemon

QUIET = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("bkport-pki"))
    ca = make_ca(os.path.join(root, "ca"))
    other = make_ca(os.path.join(root, "other"), "another CA")
    return {"ca": ca, "root": root, "server": make_cert(ca, os.path.join(root, "s"), "bookie"),
            "client": make_cert(ca, os.path.join(root, "c"), "client"),
            "reader": make_cert(ca, os.path.join(root, "r"), "reader", role="reader"),
            "other-ca": other}


def trusting(pki, cert: str | None = "client", ca: str = "ca") -> ssl.SSLContext:
    if cert is None:
        return client_context(pki[ca].cert_file)
    return client_context(pki[ca].cert_file, pki[cert].cert_file, pki[cert].key_file)


@pytest.fixture(scope="module")
def mutual(tmp_path_factory, pki):
    """A daemon whose bookie_port takes START_TLS and asks for a client certificate of the
    CA (refusing plain requests EUA, TS4)."""
    started = Daemon(str(tmp_path_factory.mktemp("bkport-mtls") / "data"), *QUIET,
                     "--bookie-port", "0", "--tls-cert-file", pki["server"].cert_file,
                     "--tls-key-file", pki["server"].key_file, "--tls-ca-file",
                     pki["ca"].cert_file, client_ssl=trusting(pki)).start()
    yield started
    started.terminate()


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    started = Daemon(str(tmp_path_factory.mktemp("bkport-plain") / "data"), *QUIET,
                     "--bookie-port", "0").start()
    yield started
    started.terminate()


def refused(daemon, context=None) -> dict[tuple[str, str], int]:
    """``bookie_bk_requests_refused_total`` by (op, status), from the daemon's metrics."""
    with urllib.request.urlopen(daemon.url + "/metrics", timeout=10, context=context) as reply:
        text = reply.read().decode()
    found = re.findall(r'^bookie_bk_requests_refused_total\{op="(\w+)",status="(\w+)"\} (\S+)',
                       text, re.M)
    return {(op, status): int(float(n)) for op, status, n in found}


def frames(ledger_id: int, count: int) -> tuple[LedgerCodec, list[bytes]]:
    c = LedgerCodec.for_password(ledger_id, b"pw")
    return c, [c.frame(e, e - 1, 0, b"over START_TLS %d " % e * 5) for e in range(count)]


def peer_serial(bk: BkBookieClient) -> int:
    """The serial number of the certificate the bookie showed on this client's connection."""
    from cryptography import x509  # noqa: PLC0415 (test-only parse)

    ssl_object = bk.connection._wire.transport.get_extra_info("ssl_object")
    assert ssl_object is not None, "the connection is not TLS"
    return x509.load_der_x509_certificate(ssl_object.getpeercert(True)).serial_number


async def _mutual_round_trip(mutual, pki) -> None:
    c, entries = frames(201, 40)
    async with BkBookieClient(f"127.0.0.1:{mutual.bk_port}", tls=trusting(pki)) as bk:
        assert await bk.add_batch(201, entries, c.master_key) == list(range(40))
        assert [await bk.read_entry(201, e) for e in range(3)] == entries[:3]
        assert await bk.read_range(201, 0, 39) == entries
        assert await bk.read_lac(201) == 38
        assert peer_serial(bk) == serial_of(pki["server"].cert_file)  # KC6: TLS, checked
        assert bk.connection.connections_made == 1
    async with BookieClient(mutual.url, ssl_context=trusting(pki)) as http:
        assert await http.read_entry(201, 39) == entries[39]  # stored as sent


async def test_adds_and_reads_over_start_tls_with_mutual_tls(mutual, pki):
    """The bookie refuses every plain request EUA (TS4): answers at all mean the bytes
    went over TLS, with this client's certificate; and none was refused."""
    before = refused(mutual, trusting(pki))
    await _mutual_round_trip(mutual, pki)
    assert refused(mutual, trusting(pki)) == before
    c, entries = frames(202, 1)
    async with BkBookieClient(f"127.0.0.1:{mutual.bk_port}") as bare:  # no TLS: refused
        with pytest.raises(Unauthorized):
            await bare.add_entry(202, 0, entries[0], c.master_key)


def test_start_tls_on_uvloop(mutual, pki):
    """uvloop's start_tls (a client may run on it, as the daemon does) takes the same steps."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_mutual_round_trip(mutual, pki))


async def test_a_client_without_a_certificate_is_refused_clearly(mutual, pki):
    """Mutual TLS: the bookie ends the handshake of a client showing no certificate (TS3).
    Under TLS 1.3 the client learns it at its first read (KC7); either way the error says
    TLS, is a bookie failure, and nothing is stored."""
    c, entries = frames(203, 1)
    before = refused(mutual, trusting(pki)).get(("START_TLS", "CLOSED"), 0)
    async with BkBookieClient(f"127.0.0.1:{mutual.bk_port}", tls=trusting(pki, None)) as bk:
        with pytest.raises((ConnectionLost, StartTlsFailed), match="TLS") as caught:
            await bk.add_entry(203, 0, entries[0], c.master_key)
        assert isinstance(caught.value, BOOKIE_FAILURES)
        assert re.search("certificate", str(caught.value), re.I), caught.value
    assert refused(mutual, trusting(pki))[("START_TLS", "CLOSED")] == before + 1
    async with BookieClient(mutual.url, ssl_context=trusting(pki)) as http:
        with pytest.raises(NoLedger):
            await http.read_entry(203, 0)


async def test_a_bookie_of_another_ca_fails_the_handshake_clearly(mutual, pki):
    """KC6: the bookie's certificate is not of the CA this client trusts: the connect fails,
    StartTlsFailed naming the handshake, and no request leaves in the clear."""
    c, entries = frames(204, 1)
    async with BkBookieClient(f"127.0.0.1:{mutual.bk_port}",
                              tls=trusting(pki, None, ca="other-ca")) as bk:
        with pytest.raises(StartTlsFailed, match="TLS handshake with bookie .* failed: "
                                                 ".*certificate verify failed"):
            await bk.add_entry(204, 0, entries[0], c.master_key)
        with pytest.raises(StartTlsFailed):  # KC4's next attempt: TLS again, never plain
            await bk.read_entry(204, 0)
        assert bk.connection.connections_made == 0


async def test_a_bookie_without_tls_refuses_start_tls_and_nothing_goes_in_plain(plain, pki):
    """KC6: EBADREQ to START_TLS fails the connect; the add is never sent in the clear (the
    bookie, which would take it, stores nothing), every later call fails the same way."""
    c, entries = frames(205, 1)
    async with BkBookieClient(f"127.0.0.1:{plain.bk_port}", tls=trusting(pki)) as bk:
        for _ in range(2):
            with pytest.raises(StartTlsFailed, match="refused START_TLS .*EBADREQ"):
                await bk.add_entry(205, 0, entries[0], c.master_key)
        assert bk.connection.connections_made == 0
    assert refused(plain)[("START_TLS", "EBADREQ")] == 2
    async with BookieClient(plain.url) as http:
        with pytest.raises(NoLedger):
            await http.read_entry(205, 0)


async def test_one_way_tls_the_bookie_sees_a_tls_connection(bookie_config, pki):
    """A bookie with TLS and no client certificates asked (no tls_ca_file): the bookie's
    own connection is TLS after START_TLS (bk_tls.py ``secure``)."""
    c, entries = frames(206, 5)
    async with tls_listener(bookie_config, bookie_context(
            {"server": pki["server"], "ca": pki["ca"]}, mutual=False)) as served:
        async with BkBookieClient(f"127.0.0.1:{served.port}", tls=trusting(pki, None)) as bk:
            assert await bk.add_batch(206, entries, c.master_key) == list(range(5))
            assert await bk.read_range(206, 0, 4) == entries
            connection = served.connection()
            assert connection.secure and connection.transport.get_extra_info("ssl_object")
        assert served.bookie.stats.bk_refused == {}


async def test_a_certificate_whose_role_is_not_authorized_is_unauthorized_at_connect(
        bookie_config, pki):
    """TS6: the handshake completes, then the bookie answers EUA: the connect's one request
    over TLS (KC6) reports it as Unauthorized; no add is sent."""
    config = dataclasses.replace(bookie_config, tls_ca_file=pki["ca"].cert_file,
                                 tls_authorized_roles="writer")
    c, entries = frames(207, 1)
    async with tls_listener(config, bookie_context(
            {"server": pki["server"], "ca": pki["ca"]}, mutual=True)) as served:
        async with BkBookieClient(f"127.0.0.1:{served.port}",
                                  tls=trusting(pki, "reader")) as bk:
            with pytest.raises(Unauthorized, match="not authorized"):
                await bk.add_entry(207, 0, entries[0], c.master_key)
        assert served.bookie.stats.bk_refused == {("START_TLS", "EUA"): 1,
                                                  ("GET_BOOKIE_INFO", "EUA"): 1}


async def test_a_peer_that_never_answers_start_tls_gets_nothing_else_and_times_out(pki):
    """KC6 under KC1: the first bytes are START_TLS and, unanswered, nothing follows (no
    request in plain); the connect fails in connect_timeout_s (not the request's 60 s), a
    bookie failure, and the connection is closed."""
    received: asyncio.Future = asyncio.get_running_loop().create_future()

    async def peer(reader, writer):
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        first = v3.decode_request(await reader.readexactly(length))
        rest = await reader.read()  # to the client's close
        received.set_result((first.header.operation, rest))
        writer.close()

    server = await asyncio.start_server(peer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with BkBookieClient(f"127.0.0.1:{port}", connect_timeout_s=0.5,
                                  request_timeout_s=60, tls=trusting(pki)) as bk:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(bk.add_entry(1, 0, b"x" * 40, b"k" * 20), 30)
            assert await asyncio.wait_for(received, 30) == (v3.OPERATIONS["START_TLS"], b"")
    finally:
        server.close()
        await server.wait_closed()
