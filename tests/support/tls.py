"""A private CA for tests (api/cluster/certs.py) and mutual-TLS bookie daemons under it."""

from __future__ import annotations

import dataclasses
import os

from api.cluster.certs import Issued, make_ca, make_cert
from api.tls import client_context
from tests.support.servers import Daemon


@dataclasses.dataclass
class LocalPki:
    """A CA and a client certificate of it, files under ``directory``."""

    directory: str
    ca: Issued
    client: Issued

    @classmethod
    def make(cls, directory: str) -> "LocalPki":
        ca = make_ca(directory)
        return cls(directory, ca, make_cert(ca, directory, "client"))

    def client_context(self):
        """What a client of these bookies trusts and shows (mutual TLS)."""
        return client_context(self.ca.cert_file, self.client.cert_file, self.client.key_file)

    def daemon(self, data_dir: str, name: str, *flags: str) -> Daemon:
        """A bookie serving HTTPS only with a certificate of its own, every client made to
        show one of this CA (``--tls-ca-file``); not started."""
        leaf = make_cert(self.ca, self.directory, name)
        return Daemon(data_dir, *flags, "--tls-cert-file", leaf.cert_file,
                      "--tls-key-file", leaf.key_file, "--tls-ca-file", self.ca.cert_file,
                      client_ssl=self.client_context())


def pki_under(root: str) -> LocalPki:
    return LocalPki.make(os.path.join(root, "pki"))
