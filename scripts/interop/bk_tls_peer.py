"""``--tls`` for the scripts that run Apache BookKeeper against our bookies: a private CA
made on the spot (api/cluster/certs.py), the flags that give our bookies TLS on both listeners
with mutual TLS (bookie_port through BookKeeper's START_TLS, docs/bookkeeper-protocol.md §9),
and the keys BookKeeper's Java client takes for it.

BookKeeper's tools without a ``-conf`` (``bk bench``, scripts/interop/java/*.java's
``new ClientConfiguration()``) read the keys as Java system properties once
``-Dorg.apache.bookkeeper.conf.readsystemproperties=true`` is set: they go in JAVA_OPTS,
which BookKeeper's launchers pass to the JVM. Our own HTTP clients (read-backs, our
autorecovery) read BOOKIE_TLS_* from the environment (api/tls.py).
"""

from __future__ import annotations

import os
import re
import subprocess

from api.cluster.certs import make_ca, make_cert
from api.tls import CLIENT_CERT_ENV, CLIENT_KEY_ENV, TRUST_ENV

#: The role of BookKeeper's client certificate (OU "0:bkclient"); our bookies are given it
#: as tls_authorized_roles, as a BookKeeper bookie is given authorizedRoles.
ROLE = "bkclient"
TLS_FACTORY = "org.apache.bookkeeper.tls.TLSContextFactory"
READ_SYSTEM_PROPERTIES = "-Dorg.apache.bookkeeper.conf.readsystemproperties=true"
#: What BookKeeper's client logs once START_TLS and the handshake succeeded.
TLS_CONNECTED = "Successfully connected to bookie using TLS"


class TlsPeer:
    """A CA, one certificate for our bookies (127.0.0.1) and one for BookKeeper's client."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.ca = make_ca(directory, "bookkeeper interop CA")
        self.bookie = make_cert(self.ca, directory, "bookie")
        self.client = make_cert(self.ca, directory, "bk-client", role=ROLE)

    def bookie_flags(self) -> list[str]:
        """Our bookie: HTTPS and bookie_port's START_TLS, each client made to show a
        certificate of the CA with the role ROLE."""
        return ["--tls-cert-file", self.bookie.cert_file, "--tls-key-file",
                self.bookie.key_file, "--tls-ca-file", self.ca.cert_file,
                "--tls-authorized-roles", ROLE]

    def client_keys(self) -> dict[str, str]:
        """BookKeeper's client configuration for START_TLS with a PEM key and CA."""
        return {"tlsProviderFactoryClass": TLS_FACTORY, "tlsProvider": "JDK",
                "tlsKeyStoreType": "PEM", "tlsKeyStore": self.client.key_file,
                "tlsCertificatePath": self.client.cert_file, "tlsTrustStoreType": "PEM",
                "tlsTrustStore": self.ca.cert_file, "tlsClientAuthentication": "true"}

    def client_conf(self) -> str:
        """client_keys as lines of a BookKeeper ``-conf`` file (shell, autorecovery)."""
        return "".join(f"{key}={value}\n" for key, value in self.client_keys().items())

    def bookie_conf(self) -> str:
        """Lines of a BookKeeper bookie's conf: the same mutual TLS and role check as ours
        (BookKeeper's TLSContextFactory with tlsClientAuthentication and BookieAuthZFactory;
        the key names are a client's, the bookie's own key and certificate in them)."""
        keys = {**self.client_keys(), "tlsKeyStore": self.bookie.key_file,
                "tlsCertificatePath": self.bookie.cert_file,
                "bookieAuthProviderFactoryClass": "org.apache.bookkeeper.tls.BookieAuthZFactory",
                "authorizedRoles": ROLE}
        return "".join(f"{key}={value}\n" for key, value in keys.items())

    def our_client_env(self) -> dict[str, str]:
        """BOOKIE_TLS_* for our own clients (api/tls.py client_context_from_env): HTTPS with
        the CA and the client certificate."""
        return {TRUST_ENV: self.ca.cert_file, CLIENT_CERT_ENV: self.client.cert_file,
                CLIENT_KEY_ENV: self.client.key_file}

    def java_opts(self, base: str = "-Xmx512m") -> str:
        return " ".join([base, READ_SYSTEM_PROPERTIES,
                         *(f"-D{key}={value}" for key, value in self.client_keys().items())])

    def env(self, base: dict | None = None) -> dict[str, str]:
        """``base`` (default os.environ) with JAVA_OPTS for BookKeeper's clients and
        BOOKIE_TLS_* for ours."""
        env = dict(os.environ if base is None else base)
        env["JAVA_OPTS"] = self.java_opts(env.get("JAVA_OPTS") or "-Xmx512m")
        env.update(self.our_client_env())
        return env


def plain_env() -> dict[str, str]:
    """os.environ without the TLS keys: a BookKeeper client that does not START_TLS."""
    env = dict(os.environ)
    opts = [o for o in env.get("JAVA_OPTS", "").split() if not o.startswith("-Dtls")
            and o != READ_SYSTEM_PROPERTIES]
    env["JAVA_OPTS"] = " ".join(opts) or "-Xmx512m"
    for name in (TRUST_ENV, CLIENT_CERT_ENV, CLIENT_KEY_ENV):
        env.pop(name, None)
    return env


def plain_client_refused(launcher: str, workdir: str, uri: str) -> str:
    """BookKeeper's ``shell simpletest`` with no TLS keys against our mutual-TLS bookies:
    the line that shows its refusal (BKUnauthorizedAccessException, the EUA of bk_tls.py
    TS4); raises RuntimeError when it was not refused."""
    conf = os.path.join(workdir, "plain-client.conf")
    with open(conf, "w") as handle:
        handle.write(f"metadataServiceUri={uri}\nallowLoopback=true\n")
    done = subprocess.run([launcher, "shell", "-conf", conf, "simpletest", "-e", "3", "-w",
                           "2", "-a", "2", "-n", "10"], env=plain_env(), cwd=workdir,
                          capture_output=True, text=True, timeout=300)
    text = done.stdout + done.stderr
    refused = re.search(r"[^\n]*BKUnauthorizedAccessException[^\n]*", text)
    # simpletest exits 0 when it fails too: its output tells (/path/to/bk's README).
    if refused is None or "entries written to ledger" in text:
        raise RuntimeError(f"a plain BookKeeper client was not refused: {text[-1500:]}")
    return refused.group(0).strip()[:200]


def connected_over_tls(log_file: str) -> bool:
    with open(log_file, errors="replace") as handle:
        return TLS_CONNECTED in handle.read()
