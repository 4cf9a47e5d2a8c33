"""TLS on the bookie's listener (docs/operations.md §6, api/tls.py TL1-TL3): real daemons on
127.0.0.1, certificates made at test time by a private CA (api/cluster/certs.py), never
committed."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

import aiohttp
import pytest

from api.client import BookieClient
from api.cluster.certs import make_ca, make_cert, serial_of
from api.tls import client_context
from bookie.entry import frame_entry, master_key
from tests.support.servers import ROOT, Daemon

KEY = master_key(b"tls")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, the bookie's certificate, a client certificate of that CA, and one of another."""
    root = str(tmp_path_factory.mktemp("pki"))
    ca = make_ca(os.path.join(root, "ca"))
    other_ca = make_ca(os.path.join(root, "other"), "another CA")
    return {"ca": ca, "server": make_cert(ca, os.path.join(root, "server"), "bookie"),
            "client": make_cert(ca, os.path.join(root, "client"), "client"),
            "stranger": make_cert(other_ca, os.path.join(root, "stranger"), "stranger"),
            "root": root}


def _tls_daemon(tmp_path, pki, *extra, env=None, cert=None) -> Daemon:
    cert = cert or pki["server"]
    trust = client_context(pki["ca"].cert_file, pki["client"].cert_file,
                           pki["client"].key_file)
    return Daemon(str(tmp_path / "data"), "--tls-cert-file", cert.cert_file,
                  "--tls-key-file", cert.key_file, *extra, env=env, client_ssl=trust)


def entry(entry_id: int) -> bytes:
    return frame_entry(1, entry_id, entry_id - 1, entry_id, b"over tls %d" % entry_id)


async def _round_trip(url: str, context) -> list[bytes]:
    async with BookieClient(url, ssl_context=context) as client:
        await client.add_entry(1, 0, entry(0), KEY)
        await client.add_batch_body(1, b"".join(  # the lean client of batch adds, over TLS
            len(entry(i)).to_bytes(4, "big") + entry(i) for i in (1, 2)), KEY)
        return await client.read_range(1, 0, 2)


def test_a_tls_bookie_serves_https_to_a_client_that_trusts_its_ca(tmp_path, pki):
    daemon = _tls_daemon(tmp_path, pki).start()
    try:
        assert daemon.url.startswith("https://127.0.0.1:")
        got = asyncio.run(_round_trip(daemon.url, client_context(pki["ca"].cert_file)))
        assert got == [entry(0), entry(1), entry(2)]
    finally:
        daemon.terminate()


def test_outsiders_are_refused_without_the_ca_and_in_plain_http(tmp_path, pki):
    daemon = _tls_daemon(tmp_path, pki).start()
    try:
        async def attempts():
            failures = []
            # The system's CAs do not include the private one: verification fails.
            async with BookieClient(daemon.url) as client:
                with pytest.raises(aiohttp.ClientConnectorCertificateError):
                    await client.health()
            # Plain HTTP to the TLS port: its handshake fails, no answer comes.
            plain = daemon.url.replace("https://", "http://")
            async with BookieClient(plain) as client:
                with pytest.raises((aiohttp.ClientError, ConnectionError)) as info:
                    await client.health()
                failures.append(info.value)
            return failures
        assert asyncio.run(attempts())
        assert daemon.proc.poll() is None  # refusing them cost the bookie nothing
    finally:
        daemon.terminate()


def test_mutual_tls_takes_only_clients_of_its_ca(tmp_path, pki):
    daemon = _tls_daemon(tmp_path, pki, "--tls-ca-file", pki["ca"].cert_file).start()
    try:
        ca = pki["ca"].cert_file

        async def as_client(issued) -> None:
            context = client_context(ca, issued.cert_file, issued.key_file) if issued \
                else client_context(ca)
            async with BookieClient(daemon.url, ssl_context=context) as client:
                await client.health()
        asyncio.run(as_client(pki["client"]))
        for outsider in (None, pki["stranger"]):  # no certificate; another CA's
            with pytest.raises((aiohttp.ClientError, ConnectionError, ssl.SSLError)):
                asyncio.run(as_client(outsider))
    finally:
        daemon.terminate()


def _served_serial(url: str, ca_file: str) -> int:
    host, port = url.split("//", 1)[1].split(":")
    context = client_context(ca_file)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            der = tls.getpeercert(binary_form=True)
    from cryptography import x509  # noqa: PLC0415
    return x509.load_der_x509_certificate(der).serial_number


def _wait_for_log(daemon: Daemon, text: str, bound_s: float = 30.0) -> None:
    """Until the daemon logs ``text`` (what it did is observable there), bounded."""
    deadline = time.monotonic() + bound_s
    while text not in daemon.log_text():
        assert time.monotonic() < deadline, f"no {text!r} in {daemon.log_path}"
        assert daemon.proc.poll() is None, daemon.log_text()
        time.sleep(0.02)  # noqa: sleep-ok (bounded poll of the daemon's log)


def test_sighup_reloads_the_certificate_without_dropping_the_listener(tmp_path, pki):
    own = make_cert(pki["ca"], str(tmp_path / "rotating"), "bookie")
    daemon = _tls_daemon(tmp_path, pki, cert=own).start()
    try:
        first = _served_serial(daemon.url, pki["ca"].cert_file)
        assert first == serial_of(own.cert_file)
        renewed = make_cert(pki["ca"], str(tmp_path / "rotating"), "bookie")  # same files
        assert serial_of(renewed.cert_file) != first
        daemon.proc.send_signal(signal.SIGHUP)
        _wait_for_log(daemon, "reloaded; new connections use it")
        assert _served_serial(daemon.url, pki["ca"].cert_file) == serial_of(renewed.cert_file)
        # A broken file on the next SIGHUP: logged, the good certificate stays.
        with open(own.key_file, "w") as handle:
            handle.write("not a key")
        daemon.proc.send_signal(signal.SIGHUP)
        _wait_for_log(daemon, "certificate not reloaded, the old one stays")
        assert _served_serial(daemon.url, pki["ca"].cert_file) == serial_of(renewed.cert_file)
    finally:
        daemon.terminate()


def test_a_certificate_that_does_not_load_refuses_the_start_naming_it(tmp_path, pki):
    missing = str(tmp_path / "nowhere.pem")
    result = subprocess.run(
        [sys.executable, "-m", "bookie", "serve", "--data-dir", str(tmp_path / "data"),
         "--port", "0", "--tls-cert-file", missing, "--tls-key-file", missing],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=dict(os.environ,
                                                                       PYTHONPATH=ROOT))
    assert result.returncode == 78, result.stderr
    assert missing in result.stderr and "TLS" in result.stderr
    half = subprocess.run(
        [sys.executable, "-m", "bookie", "serve", "--data-dir", str(tmp_path / "data"),
         "--port", "0", "--tls-cert-file", pki["server"].cert_file],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=dict(os.environ,
                                                                       PYTHONPATH=ROOT))
    assert half.returncode == 78 and "tls_key_file" in half.stderr


def test_tls_1_3_only_refuses_a_tls_1_2_client(tmp_path, pki):
    daemon = _tls_daemon(tmp_path, pki, "--tls-min-version", "1.3").start()
    try:
        old = client_context(pki["ca"].cert_file)
        old.maximum_version = ssl.TLSVersion.TLSv1_2

        async def health(context) -> None:
            async with BookieClient(daemon.url, ssl_context=context) as client:
                await client.health()
        with pytest.raises((aiohttp.ClientError, ConnectionError, ssl.SSLError)):
            asyncio.run(health(old))
        asyncio.run(health(client_context(pki["ca"].cert_file)))
    finally:
        daemon.terminate()


def test_an_encrypted_key_with_its_password_in_the_environment(tmp_path, pki):
    secret = "correct horse battery staple"
    locked = make_cert(pki["ca"], str(tmp_path / "locked"), "bookie",
                       password=secret.encode())
    daemon = _tls_daemon(tmp_path, pki, env={"BOOKIE_TLS_KEY_PASSWORD": secret},
                         cert=locked).start()
    try:
        async def look() -> list[str]:
            async with BookieClient(daemon.url, ssl_context=client_context(
                    pki["ca"].cert_file)) as client:
                info = await client._request("GET", "/v1/bookie/info", raw=True)
                metrics = await client._request("GET", "/metrics", raw=True)
                return [info.decode(), metrics.decode()]
        seen = asyncio.run(look())
    finally:
        daemon.terminate()
    for text in (*seen, daemon.log_text()):
        assert secret not in text


def test_sighup_on_a_bookie_without_tls_does_not_stop_it(tmp_path):
    """Issue 36: SIGHUP's handler was installed only with TLS, so on a plain bookie
    SIGHUP's default action killed it (a `systemctl reload`, a terminal closing)."""
    daemon = Daemon(str(tmp_path / "data")).start()
    try:
        daemon.proc.send_signal(signal.SIGHUP)
        _wait_for_log(daemon, "SIGHUP: no TLS configured, nothing to reload")
        assert daemon.proc.poll() is None
        assert daemon.terminate() == 0
    finally:
        if daemon.proc.poll() is None:
            daemon.kill9()
