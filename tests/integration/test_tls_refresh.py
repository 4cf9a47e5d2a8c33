"""tls_refresh_interval_s (api/tls_refresh.py TR1-TR4; BookKeeper's
tlsCertFilesRefreshDurationSeconds): a real daemon on 127.0.0.1 whose certificate is
rotated in place as the kubelet rotates a mounted secret (cert-manager's), with no SIGHUP:
new handshakes of the HTTPS listener and of START_TLS on bookie_port get the new one; a
broken file keeps the old one serving and is logged once."""

from __future__ import annotations

import asyncio
import os
import signal
import time

from api.cluster.certs import Issued, make_ca, make_cert, serial_of
from api.tls import client_context
from tests.integration.test_bk_tls import _serial
from tests.integration.test_tls import _served_serial, _wait_for_log
from tests.support.bk_client import BkClient
from tests.support.servers import Daemon

ERROR = "certificate not reloaded, the old one stays"


class MountedSecret:
    """A directory laid out as the kubelet's atomic writer lays out a secret volume:
    ``tls.crt`` -> ``..data/tls.crt``, ``..data`` -> ``..<version>``; a rotation writes a
    new version dir and renames a new ``..data`` link over the old one (one rename)."""

    def __init__(self, root: str, ca: Issued) -> None:
        self.root, self.ca, self.version = root, ca, 0
        os.makedirs(root)
        self.rotate()
        for name in ("tls.crt", "tls.key"):
            os.symlink(os.path.join("..data", name), os.path.join(root, name))
        self.cert_file = os.path.join(root, "tls.crt")
        self.key_file = os.path.join(root, "tls.key")

    def rotate(self) -> int:
        """A new certificate and key in place; the new serial."""
        self.version += 1
        name = f"..2026_12_03_{self.version:02d}"
        issued = make_cert(self.ca, os.path.join(self.root, name), "tls")
        os.rename(issued.cert_file, os.path.join(self.root, name, "tls.crt"))
        os.rename(issued.key_file, os.path.join(self.root, name, "tls.key"))
        link = os.path.join(self.root, "..data_tmp")
        os.symlink(name, link)
        os.rename(link, os.path.join(self.root, "..data"))
        return serial_of(os.path.join(self.root, name, "tls.crt"))


def _until_served(daemon: Daemon, ca_file: str, serial: int, bound_s: float = 10.0) -> None:
    """New handshakes until one serves ``serial``: the poll's reload is seen only there."""
    deadline = time.monotonic() + bound_s
    while (seen := _served_serial(daemon.url, ca_file)) != serial:
        assert time.monotonic() < deadline, f"still serving {seen:x}, not {serial:x}"
        assert daemon.proc.poll() is None, daemon.log_text()
        time.sleep(0.05)  # noqa: sleep-ok (bounded poll of new handshakes)


async def _start_tls_serial(port: int, ca_file: str) -> int:
    async with BkClient.connect(port) as client:
        await client.start_tls(client_context(ca_file))
        return _serial(client.peer_certificate())


def test_a_certificate_rotated_in_place_is_served_without_sighup(tmp_path):
    ca = make_ca(str(tmp_path / "ca"))
    secret = MountedSecret(str(tmp_path / "secret"), ca)
    first = serial_of(secret.cert_file)
    daemon = Daemon(str(tmp_path / "data"), "--bookie-port", "0", "--tls-cert-file",
                    secret.cert_file, "--tls-key-file", secret.key_file,
                    "--tls-refresh-interval-s", "1", client_ssl=client_context(ca.cert_file)
                    ).start()
    try:
        assert _served_serial(daemon.url, ca.cert_file) == first
        renewed = secret.rotate()
        assert renewed != first
        _until_served(daemon, ca.cert_file, renewed)
        # TS5: START_TLS on bookie_port shares the context the poll reloaded.
        assert asyncio.run(_start_tls_serial(daemon.bk_port, ca.cert_file)) == renewed
        assert ERROR not in daemon.log_text()

        # A broken certificate written in place (no rename): the renewed one stays.
        with open(os.path.realpath(secret.cert_file), "w") as handle:
            handle.write("-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n")
        _wait_for_log(daemon, ERROR, bound_s=10.0)
        deadline = time.monotonic() + 3.5  # three more polls see the same broken bytes
        while time.monotonic() < deadline:
            assert _served_serial(daemon.url, ca.cert_file) == renewed
            time.sleep(0.1)  # noqa: sleep-ok (the old chain observed over several polls)
        assert daemon.log_text().count(ERROR) == 1  # TR3: once per state of the files

        third = secret.rotate()  # the next good rotation is taken again
        _until_served(daemon, ca.cert_file, third)
        assert daemon.log_text().count(ERROR) == 1
    finally:
        daemon.terminate()


def test_without_the_interval_files_are_read_again_only_on_sighup(tmp_path):
    """The default (0): a rotation is not picked up by itself; SIGHUP still reloads it."""
    ca = make_ca(str(tmp_path / "ca"))
    secret = MountedSecret(str(tmp_path / "secret"), ca)
    first = serial_of(secret.cert_file)
    daemon = Daemon(str(tmp_path / "data"), "--tls-cert-file", secret.cert_file,
                    "--tls-key-file", secret.key_file,
                    client_ssl=client_context(ca.cert_file)).start()
    try:
        renewed = secret.rotate()
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert _served_serial(daemon.url, ca.cert_file) == first
            time.sleep(0.1)  # noqa: sleep-ok (nothing may change over this span)
        daemon.proc.send_signal(signal.SIGHUP)
        _wait_for_log(daemon, "reloaded; new connections use it")
        assert _served_serial(daemon.url, ca.cert_file) == renewed
    finally:
        daemon.terminate()
