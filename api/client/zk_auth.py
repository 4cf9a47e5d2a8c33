"""ZooKeeper authentication and the ACL of every znode the cluster creates
(docs/operations.md §7, §7.1).

Two kinds of credentials, ``user:password`` each, one at a time:

* ZooKeeper's ``digest`` scheme (settings ``zk_digest``/``zk_digest_file``): the session
  sends ``user:password`` and each znode gets ``digest:user:<hash>`` with every permission.
* SASL DIGEST-MD5 (settings ``zk_sasl``/``zk_sasl_file``): the session logs in as a user of
  ZooKeeper's JAAS ``Server`` section (``DigestLoginModule``), a challenge-response that
  never sends the password, and each znode gets ``sasl:user`` with every permission: the
  ACL Apache BookKeeper's own tools create (``zkEnableSecurity=true``: ``CREATOR_ALL_ACL``,
  which ZooKeeper expands to ``sasl:<the login's user>`` for a DIGEST-MD5 session), so
  either side reads and changes what the other created with the same JAAS user.

A process finds them, in order: what it was told with ``use`` (the daemon, from its
settings), else the environment: ``BOOKIE_ZK_DIGEST`` (user:password) or
``BOOKIE_ZK_DIGEST_FILE`` (a file holding it), ``BOOKIE_ZK_SASL`` or ``BOOKIE_ZK_SASL_FILE``.
Never a command-line flag: a command line is visible to every local user. With credentials,
every kazoo client of the project (``new_client``) authenticates its session and creates
each znode with that one ACL entry; nothing is readable or writable by others
(``world:anyone`` gets nothing, not even read: BookKeeper's ``zkEnableSecurity`` gives its
znodes ``CREATOR_ALL_ACL`` alone, and every reader here, the shell, the pipeline,
monitoring, authenticates the same way). Without credentials znodes are created open
(``world:anyone:cdrwa``), as before.

Invariants:
    ZA1. The password is in the kazoo session's auth data (or SASL options) and the digest
         ACL's hash, never in a log line, an error or ``repr`` (``Credentials.__repr__``
         hides it).
    ZA2. ZooKeeper checks DELETE and CREATE on the parent: so the cluster's root znode
         itself gets the ACL (``ensure_path`` creates it with the default ACL), or an
         outsider could delete its children.
    ZA3. Digest and SASL credentials exclude each other (settings: ConfigError; the
         environment: CredentialsError naming both variables): the two schemes' ACLs are
         different identities, and a tree with both would be half unreadable to each.
    ZA4. A SASL login ZooKeeper refuses is an error naming the user and the hosts
         (``login_refused``), never a session that goes on unauthenticated: kazoo then
         fails the session (AUTH_FAILED) and every request queued or made on it with
         AuthFailedError, which api/client/zk_bound.py's bounded calls turn into that error.
         kazoo then closes the session (state CLOSED) at once, and a request made after that
         fails with ConnectionClosedError instead: so each client made here remembers a
         refused login (``login_was_refused``), and the bounded calls check it before they
         take a closed connection for an outage.
"""

from __future__ import annotations

import dataclasses
import os
import weakref

from kazoo.client import KazooClient
from kazoo.protocol.states import KeeperState
from kazoo.security import ACL, Id, Permissions, make_digest_acl

from api.client.metadata import MetadataError

DIGEST_ENV, DIGEST_FILE_ENV = "BOOKIE_ZK_DIGEST", "BOOKIE_ZK_DIGEST_FILE"
SASL_ENV, SASL_FILE_ENV = "BOOKIE_ZK_SASL", "BOOKIE_ZK_SASL_FILE"
#: The SASL mechanism of ZooKeeper's DigestLoginModule and BookKeeper's JAAS Client login.
SASL_MECHANISM = "DIGEST-MD5"


class CredentialsError(ValueError):
    """Credentials that cannot be used; the message names where they came from, never them."""


@dataclasses.dataclass(frozen=True)
class Credentials:
    user: str
    password: str = dataclasses.field(repr=False)
    scheme: str = "digest"  # or "sasl"

    def __repr__(self) -> str:  # ZA1
        return (f"Credentials(user={self.user!r}, password=<hidden>, "
                f"scheme={self.scheme!r})")

    @property
    def who(self) -> str:
        return f"SASL user {self.user!r}" if self.scheme == "sasl" else f"user {self.user!r}"

    @classmethod
    def parse(cls, text: str, source: str, scheme: str = "digest") -> "Credentials":
        user, sep, password = text.strip().partition(":")
        if not sep or not user or not password:
            raise CredentialsError(f"ZooKeeper credentials from {source} are not "
                                   f"user:password")
        return cls(user, password, scheme)


_told: list[Credentials | None] = []  # ``use``'s value, once told


def _read(value: str | None, path: str | None, sources: tuple[str, str],
          scheme: str) -> Credentials | None:
    if value:
        return Credentials.parse(value, sources[0], scheme)
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                return Credentials.parse(handle.read(), f"{sources[1]} ({path})", scheme)
        except OSError as exc:
            raise CredentialsError(f"ZooKeeper credentials file {path}: "
                                   f"{exc.strerror}") from None
    return None


def resolve(digest: str | None = None, digest_file: str | None = None,
            sasl: str | None = None, sasl_file: str | None = None) -> Credentials | None:
    """Credentials from these settings, else from the environment; None: open znodes."""
    if (digest, digest_file, sasl, sasl_file) == (None, None, None, None):
        env = os.environ.get
        digest, digest_file = env(DIGEST_ENV), env(DIGEST_FILE_ENV)
        sasl, sasl_file = env(SASL_ENV), env(SASL_FILE_ENV)
        names = (DIGEST_ENV, DIGEST_FILE_ENV, SASL_ENV, SASL_FILE_ENV)
        digest_sources = (DIGEST_ENV, f"the file ${DIGEST_FILE_ENV} names")
        sasl_sources = (SASL_ENV, f"the file ${SASL_FILE_ENV} names")
    else:
        names = ("zk_digest", "zk_digest_file", "zk_sasl", "zk_sasl_file")
        digest_sources = ("setting zk_digest", "setting zk_digest_file")
        sasl_sources = ("setting zk_sasl", "setting zk_sasl_file")
    if (digest or digest_file) and (sasl or sasl_file):  # ZA3
        raise CredentialsError(f"ZooKeeper digest credentials ({names[0]}/{names[1]}) and "
                               f"SASL credentials ({names[2]}/{names[3]}) are both set: "
                               f"give one kind")
    return (_read(digest, digest_file, digest_sources, "digest")
            or _read(sasl, sasl_file, sasl_sources, "sasl"))


def use(credentials: Credentials | None) -> None:
    """This process's credentials from now on (the daemon's, from its settings)."""
    _told[:] = [credentials]


def current() -> Credentials | None:
    return _told[0] if _told else resolve()


def acl(credentials: Credentials) -> list[ACL]:
    """The one ACL entry of every znode these credentials create."""
    if credentials.scheme == "sasl":
        # What ZooKeeper makes of BookKeeper's CREATOR_ALL_ACL for a DIGEST-MD5 login:
        # the login's user under the sasl scheme (tests/cluster/test_zookeeper_sasl.py
        # checks against a real server), so both sides' znodes have one owner.
        return [ACL(Permissions.ALL, Id("sasl", credentials.user))]
    return [make_digest_acl(credentials.user, credentials.password, all=True)]


#: The session timeout of this process's ZooKeeper sessions, in seconds (``use_session_
#: timeout``: the daemon's zk_session_timeout_ms, BookKeeper's zkTimeout).
_session_timeout_s = [10.0]


def use_session_timeout(seconds: float) -> None:
    """This process's ZooKeeper session timeout from now on (the daemon's setting)."""
    _session_timeout_s[0] = seconds


def new_client(hosts: str, timeout: float | None = None, **kwargs) -> KazooClient:
    """A kazoo client authenticated with this process's credentials (if any), creating
    every znode with their ACL alone (ZA2: the root too, by ``ensure_path``); its session
    timeout ``timeout`` s, by default this process's (``use_session_timeout``)."""
    timeout = _session_timeout_s[0] if timeout is None else timeout
    credentials = current()
    if credentials is not None and credentials.scheme == "sasl":
        kwargs["sasl_options"] = {"mechanism": SASL_MECHANISM,
                                  "username": credentials.user,
                                  "password": credentials.password}
        kwargs["default_acl"] = acl(credentials)
    elif credentials is not None:
        kwargs["auth_data"] = [("digest", f"{credentials.user}:{credentials.password}")]
        kwargs["default_acl"] = acl(credentials)
    client = KazooClient(hosts=hosts, timeout=timeout, **kwargs)
    client.add_listener(lambda _state: _note_refusal(client))
    return client


#: ZA4: the clients whose login ZooKeeper refused (weak: a client's owner drops it freely).
_REFUSED: weakref.WeakSet = weakref.WeakSet()


def _note_refusal(client: KazooClient) -> None:
    """A state listener (kazoo's thread): kazoo sets AUTH_FAILED just before it tells the
    listeners the session is LOST, and CLOSED right after, so this is the one moment the
    cause can be seen."""
    if client.client_state == KeeperState.AUTH_FAILED:
        _REFUSED.add(client)


def login_was_refused(client: KazooClient) -> bool:
    """ZA4: ZooKeeper refused this client's login (its session is closed for good)."""
    return client in _REFUSED


def login_refused(hosts: str) -> MetadataError:
    """ZA4: the error for a SASL login ZooKeeper refused (kazoo's AuthFailedError on any
    request of the session): the hosts and the user, never the password (ZA1)."""
    credentials = current()
    who = "no credentials" if credentials is None else credentials.who
    return MetadataError(f"ZooKeeper at {hosts} refused the login of {who} "
                         f"({SASL_MECHANISM}): a wrong password, or a user its JAAS Server "
                         f"section does not list ({SASL_ENV}, {SASL_FILE_ENV} or zk_sasl; "
                         f"docs/operations.md §7)")


def refused(operation: str, path: str) -> MetadataError:
    """The error for a ZooKeeper NoAuth: the path, what was tried, and whose credentials
    (the user, never the password, ZA1)."""
    credentials = current()
    who = "no credentials" if credentials is None else credentials.who
    return MetadataError(f"ZooKeeper refused to {operation} {path}: not authorized with "
                         f"{who}; the cluster's znodes belong to other credentials "
                         f"(zk_digest, {DIGEST_ENV} or {DIGEST_FILE_ENV}; zk_sasl, "
                         f"{SASL_ENV} or {SASL_FILE_ENV}; docs/operations.md §7)")
