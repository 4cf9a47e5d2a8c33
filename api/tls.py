"""TLS contexts for both ends of the project's HTTP (docs/operations.md, "TLS").

The bookie's listener (``server_context``, from the ``tls_*`` settings) and every client of
a bookie (``client_context``) build their ``ssl.SSLContext`` here, so both sides agree on
what is accepted: TLS 1.2 at least (1.3 if asked), the system's default ciphers, and on the
client certificate verification with the host name checked.

Invariants:
    TL1. A server context with a CA bundle requires a client certificate signed by it
         (mutual TLS); without one no client certificate is asked for.
    TL2. ``reload_server_context`` loads the new chain into the same context: connections
         already open keep theirs, new handshakes get the new one, the listener never
         closes. A chain that does not load leaves the old one in place (the error is
         raised for the caller to log): it is loaded into a context of its own first, since
         OpenSSL swaps a certificate in before it refuses a key that does not match it.
    TL3. A secret (the key's password) is passed to OpenSSL and kept nowhere else.
"""

from __future__ import annotations

import contextlib
import os
import ssl

MIN_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


class TlsSetupError(ValueError):
    """A certificate, key or CA file that does not load; the message names the file."""


def server_context(cert_file: str, key_file: str, ca_file: str | None = None,
                   min_version: str = "1.2", key_password: str | None = None
                   ) -> ssl.SSLContext:
    """The HTTPS listener's context (TL1)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MIN_VERSIONS[min_version]
    load_chain(context, cert_file, key_file, key_password)
    if ca_file is not None:
        _load_ca(context, ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def reload_server_context(context: ssl.SSLContext, cert_file: str, key_file: str,
                          key_password: str | None = None,
                          chain: tuple[bytes, bytes] | None = None) -> None:
    """TL2: the new certificate chain for new handshakes. OpenSSL puts a certificate into
    the context before it checks the key against it, so a chain is first loaded into a
    context of its own; the live one is touched only once that worked, from the same bytes
    (each file read once, held in memory: a file replaced meanwhile cannot slip in).
    ``chain``: the files' bytes as ``read_chain`` gave them (the refresh poll, api/
    tls_refresh.py, loads what it compared); unset, they are read now."""
    data = chain if chain is not None else read_chain(cert_file, key_file)
    with _in_memory(data[0]) as cert_copy, _in_memory(data[1]) as key_copy:
        for target in (ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), context):
            load_chain(target, cert_copy, key_copy, key_password, (cert_file, key_file))


def read_chain(cert_file: str, key_file: str) -> tuple[bytes, bytes]:
    """The bytes of the certificate and key files, each read once (TlsSetupError naming the
    one that does not read)."""
    return _read(cert_file, "certificate"), _read(key_file, "key")


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise TlsSetupError(f"TLS {what} file {path} does not read: {exc.strerror}") from None


@contextlib.contextmanager
def _in_memory(data: bytes):
    """A path OpenSSL can open for ``data`` that is on no disk (a Linux memfd): a key is
    never copied to a file."""
    fd = os.memfd_create("bookie-tls", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def load_chain(context: ssl.SSLContext, cert_file: str, key_file: str,
               key_password: str | None, names: tuple[str, str] | None = None) -> None:
    """``names``: the files to name in errors when the paths are in-memory copies."""
    cert_name, key_name = names or (cert_file, key_file)
    for what, path, name in (("certificate", cert_file, cert_name), ("key", key_file,
                                                                      key_name)):
        if not os.path.isfile(path):  # OpenSSL's own error does not name the file
            raise TlsSetupError(f"TLS {what} file not found: {name}")
    try:
        context.load_cert_chain(cert_file, key_file, password=key_password)
    except (ssl.SSLError, OSError) as exc:
        # The reason only: never the password, which OpenSSL does not echo either.
        raise TlsSetupError(f"TLS certificate {cert_name} with key {key_name} does not "
                            f"load: {getattr(exc, 'reason', None) or exc}") from None


def client_context(ca_file: str | None = None, cert_file: str | None = None,
                   key_file: str | None = None, key_password: str | None = None
                   ) -> ssl.SSLContext:
    """A client's context: the server's certificate verified against ``ca_file`` (default:
    the system's CAs) with its host name checked; ``cert_file``/``key_file`` for a bookie
    that asks for client certificates (mutual TLS)."""
    with _loading_ca(ca_file):
        # With ca_file, only it is trusted (a private cluster CA), not the system's too.
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file is not None:
        load_chain(context, cert_file, key_file or cert_file, key_password)
    return context


def bookie_client_context(config) -> ssl.SSLContext | None:
    """The context of a bookie's (or an autorecovery process's) own connections to other
    bookies (``BookieConfig``): trust ``tls_trust_file``, else ``tls_ca_file`` (a cluster
    whose one CA signs bookies and clients); show ``tls_client_cert_file``, else the
    bookie's own certificate, which mutual TLS asks for. None when the process has no TLS
    settings: plain HTTP."""
    trust = config.tls_trust_file or config.tls_ca_file
    cert = config.tls_client_cert_file or config.tls_cert_file
    key = config.tls_client_key_file if config.tls_client_cert_file else config.tls_key_file
    if trust is None and cert is None:
        return None
    return client_context(trust, cert, key, config.tls_key_password)


#: What a client process (a ledger client, ``bookie ledger``, the pipeline, a drill) reads
#: when it is given no context: the same names as the daemon's settings.
TRUST_ENV, CLIENT_CERT_ENV, CLIENT_KEY_ENV = (
    "BOOKIE_TLS_TRUST_FILE", "BOOKIE_TLS_CLIENT_CERT_FILE", "BOOKIE_TLS_CLIENT_KEY_FILE")


def client_context_from_env() -> ssl.SSLContext | None:
    """A client's context from ``BOOKIE_TLS_TRUST_FILE`` (the CA that signed the bookies'
    certificates) and, for mutual TLS, ``BOOKIE_TLS_CLIENT_CERT_FILE`` and
    ``BOOKIE_TLS_CLIENT_KEY_FILE``; None when none is set (then a bookie registered as
    https is verified against the system's CAs)."""
    trust, cert = os.environ.get(TRUST_ENV), os.environ.get(CLIENT_CERT_ENV)
    if not trust and not cert:
        return None
    return client_context(trust or None, cert or None, os.environ.get(CLIENT_KEY_ENV) or None)


def _load_ca(context: ssl.SSLContext, ca_file: str) -> None:
    with _loading_ca(ca_file):
        context.load_verify_locations(cafile=ca_file)


@contextlib.contextmanager
def _loading_ca(ca_file: str | None):
    """A CA bundle that does not load, as a TlsSetupError naming the file."""
    try:
        yield
    except FileNotFoundError:
        raise TlsSetupError(f"TLS CA file not found: {ca_file}") from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsSetupError(f"TLS CA file {ca_file} does not load: "
                            f"{getattr(exc, 'reason', None) or exc}") from None
