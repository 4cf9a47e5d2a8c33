"""TL2 (issue 36, item 2): a SIGHUP reload that fails leaves the live context serving the old
chain. The rotation case that broke it: the new certificate is in place but the key is
still the old one (between the two renames). OpenSSL put the new certificate into the live
context, then refused the key, and every later handshake failed while the log said "the old
one stays". Real contexts, real handshakes on 127.0.0.1; certificates made at test time."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from api.cluster.certs import make_ca, make_cert, serial_of
from api.tls import TlsSetupError, client_context, reload_server_context, server_context


def _served_serial(context: ssl.SSLContext, ca_file: str) -> int:
    """One TLS handshake against ``context``: the serial of the certificate it served."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    outcome: dict = {}

    def serve() -> None:
        connection, _ = listener.accept()
        try:
            with context.wrap_socket(connection, server_side=True):
                pass
        except (ssl.SSLError, OSError) as exc:
            outcome["server"] = exc

    server = threading.Thread(target=serve)
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                client_context(ca_file).wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
    finally:
        server.join(10)
        listener.close()
    from cryptography import x509  # noqa: PLC0415

    return x509.load_der_x509_certificate(der).serial_number


def test_a_reload_of_a_new_certificate_with_the_old_key_keeps_the_old_chain(tmp_path):
    ca = make_ca(str(tmp_path / "ca"))
    old = make_cert(ca, str(tmp_path / "old"), "bookie")
    new = make_cert(ca, str(tmp_path / "new"), "bookie")
    context = server_context(old.cert_file, old.key_file)
    assert _served_serial(context, ca.cert_file) == serial_of(old.cert_file)
    with pytest.raises(TlsSetupError):
        reload_server_context(context, new.cert_file, old.key_file)  # mid-rotation
    assert _served_serial(context, ca.cert_file) == serial_of(old.cert_file)
    reload_server_context(context, new.cert_file, new.key_file)  # the rotation done
    assert _served_serial(context, ca.cert_file) == serial_of(new.cert_file)

