"""ZooKeeper digest authentication and the ACL of every znode the cluster creates
(docs/operations.md §7, issue 27).

Credentials are ``user:password`` for ZooKeeper's ``digest`` scheme. A process finds them,
in order: what it was told with ``use`` (the daemon, from its ``zk_digest`` or
``zk_digest_file`` settings), else the environment: ``BOOKIE_ZK_DIGEST`` (user:password) or
``BOOKIE_ZK_DIGEST_FILE`` (a file holding it). Never a command-line flag: a command line is
visible to every local user. With credentials, every kazoo client of the project
(``new_client``) authenticates its session and creates each znode with one ACL entry,
``digest:user:<hash>`` with every permission; nothing is readable or writable by others
(``world:anyone`` gets nothing, not even read: Apache BookKeeper's own ``zkEnableSecurity``
gives its znodes ``CREATOR_ALL_ACL`` alone, and every reader here, the shell, the
pipeline, monitoring, authenticates the same way). Without credentials znodes are created
open (``world:anyone:cdrwa``), as before.

Invariants:
    ZA1. The password is in the kazoo session's auth data and the ACL's hash, never in a
         log line, an error or ``repr`` (``Credentials.__repr__`` hides it).
    ZA2. ZooKeeper checks DELETE and CREATE on the parent: so the cluster's root znode
         itself gets the ACL (``ensure_path`` creates it with the default ACL), or an
         outsider could delete its children.
"""

from __future__ import annotations

import dataclasses
import os

from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from api.client.metadata import MetadataError

DIGEST_ENV, DIGEST_FILE_ENV = "BOOKIE_ZK_DIGEST", "BOOKIE_ZK_DIGEST_FILE"


class CredentialsError(ValueError):
    """Credentials that cannot be used; the message names where they came from, never them."""


@dataclasses.dataclass(frozen=True)
class Credentials:
    user: str
    password: str = dataclasses.field(repr=False)

    def __repr__(self) -> str:  # ZA1
        return f"Credentials(user={self.user!r}, password=<hidden>)"

    @classmethod
    def parse(cls, text: str, source: str) -> "Credentials":
        user, sep, password = text.strip().partition(":")
        if not sep or not user or not password:
            raise CredentialsError(f"ZooKeeper credentials from {source} are not "
                                   f"user:password")
        return cls(user, password)


_told: list[Credentials | None] = []  # ``use``'s value, once told


def resolve(digest: str | None = None, digest_file: str | None = None
            ) -> Credentials | None:
    """Credentials from these settings, else from the environment; None: open znodes."""
    if digest is None and digest_file is None:
        digest, digest_file = os.environ.get(DIGEST_ENV), os.environ.get(DIGEST_FILE_ENV)
        sources = (DIGEST_ENV, f"the file ${DIGEST_FILE_ENV} names")
    else:
        sources = ("setting zk_digest", "setting zk_digest_file")
    if digest:
        return Credentials.parse(digest, sources[0])
    if digest_file:
        try:
            with open(digest_file, encoding="utf-8") as handle:
                return Credentials.parse(handle.read(), f"{sources[1]} ({digest_file})")
        except OSError as exc:
            raise CredentialsError(f"ZooKeeper credentials file {digest_file}: "
                                   f"{exc.strerror}") from None
    return None


def use(credentials: Credentials | None) -> None:
    """This process's credentials from now on (the daemon's, from its settings)."""
    _told[:] = [credentials]


def current() -> Credentials | None:
    return _told[0] if _told else resolve()


def new_client(hosts: str, timeout: float = 10.0, **kwargs) -> KazooClient:
    """A kazoo client authenticated with this process's credentials (if any), creating
    every znode with their ACL alone (ZA2: the root too, by ``ensure_path``)."""
    credentials = current()
    if credentials is not None:
        kwargs["auth_data"] = [("digest", f"{credentials.user}:{credentials.password}")]
        kwargs["default_acl"] = [make_digest_acl(credentials.user, credentials.password,
                                                 all=True)]
    return KazooClient(hosts=hosts, timeout=timeout, **kwargs)


def refused(operation: str, path: str) -> MetadataError:
    """The error for a ZooKeeper NoAuth: the path, what was tried, and whose credentials
    (the user, never the password, ZA1)."""
    credentials = current()
    who = "no credentials" if credentials is None else f"user {credentials.user!r}"
    return MetadataError(f"ZooKeeper refused to {operation} {path}: not authorized with "
                         f"{who}; the cluster's znodes belong to other credentials "
                         f"(zk_digest, {DIGEST_ENV} or {DIGEST_FILE_ENV}; "
                         f"docs/operations.md §7)")
