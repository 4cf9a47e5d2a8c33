"""A private CA and its certificates for a local cluster (``bookie cluster up --tls``) and
the TLS tests: made on the spot with the ``cryptography`` package, never committed.

``make_ca(dir)`` writes ``ca.pem`` and ``ca-key.pem``; ``make_cert(ca, dir, name, hosts)``
writes ``<name>.pem`` and ``<name>-key.pem``: a leaf for server and client use (both
extended key usages), its subject alternative names the given host names and IP addresses.
Keys are EC P-256, written unencrypted unless a password is given, with mode 0600.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 365


@dataclasses.dataclass(frozen=True)
class Issued:
    cert_file: str
    key_file: str


def make_ca(directory: str, name: str = "bookie test CA") -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return _write(directory, "ca", cert, key, None)


def make_cert(ca: Issued, directory: str, name: str, hosts=("127.0.0.1", "localhost"),
              password: bytes | None = None, role: str | None = None) -> Issued:
    """A leaf certificate of ``ca`` for ``hosts``; ``role``: its OU is ``0:<role>``, the
    role BookKeeper's BookieAuthZFactory (and tls_authorized_roles) reads."""
    with open(ca.cert_file, "rb") as handle:
        ca_cert = x509.load_pem_x509_certificate(handle.read())
    with open(ca.key_file, "rb") as handle:
        ca_key = serialization.load_pem_private_key(handle.read(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    names = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)] + (
                [] if role is None else
                [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, f"0:{role}")])))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    return _write(directory, name, cert, key, password)


def serial_of(cert_file: str) -> int:
    with open(cert_file, "rb") as handle:
        return x509.load_pem_x509_certificate(handle.read()).serial_number


def _write(directory: str, name: str, cert, key, password: bytes | None) -> Issued:
    os.makedirs(directory, exist_ok=True)
    cert_file = os.path.join(directory, f"{name}.pem")
    key_file = os.path.join(directory, f"{name}-key.pem")
    encryption = (serialization.BestAvailableEncryption(password) if password
                  else serialization.NoEncryption())
    with open(cert_file, "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM))
    descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8, encryption))
    return Issued(cert_file, key_file)
