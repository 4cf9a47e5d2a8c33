"""ZooKeeper calls with a bound on the wait (ZK5): every kazoo call of the project goes through
``zk_start``, ``zk_read``, ``zk_call`` or ``zk_watch`` here, split from api/client/zookeeper.py
(the metadata store, which re-exports them) so its parts (api/client/zk_ids.py) can use them.

Invariants:
    ZK5. No ZooKeeper call of the project waits for its answer longer than ZK_ANSWER_S, the
         connect included (every kazoo call goes through ``zk_start``, ``zk_read``,
         ``zk_call`` or ``zk_watch``; tests/contract/test_zk_bound.py checks; a watch
         recipe's first read is kazoo's own, preceded by a bounded one). Past it the caller gets
         ZkUnavailable, a MetadataError. A read is retried inside the bound (it changes
         nothing). A write, create, delete or transaction is tried once, and its
         ZkUnavailable means "not known whether it happened": kazoo still sends a request it
         queued once ZooKeeper is back. So it is never taken for a definite failure: a
         compare-and-set's caller re-reads before it trusts either outcome (ZK2), a lock's
         taker counts a lock its own session holds as taken (Underreplication.try_lock), and
         an ephemeral create that did happen goes with the session.
"""

from __future__ import annotations

import time

from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from api.client.metadata import MetadataError
from api.client.zk_auth import login_refused, login_was_refused

__all__ = ["ZK_ANSWER_S", "ZkUnavailable", "zk_call", "zk_read", "zk_start", "zk_watch"]

#: ZK5's bound, in seconds. Longer than a session's default timeout (10 s, zk_auth.
#: new_client), so a ZooKeeper restart or failover the session survives is ridden out;
#: short enough that a writer's close, a recovery or an operator's command reports an
#: outage instead of hanging through it (kazoo queues a request while disconnected, for
#: ever). A longer session (zk_session_timeout_ms, BookKeeper's zkTimeout: Pulsar's 30 s)
#: keeps the registration longer through an outage; a call still gives up after this.
ZK_ANSWER_S = 15.0
#: A read's pauses between attempts after a lost connection: from 0.1 s, doubling, to 2 s.
READ_BACKOFF_S = (0.1, 2.0)


class ZkUnavailable(MetadataError):
    """ZooKeeper did not answer within ZK_ANSWER_S (or lost the connection before it did).
    After a write, create, delete or transaction: not known whether it happened (ZK5)."""

    def __init__(self, hosts: str, why: str = "") -> None:
        super().__init__(f"ZooKeeper at {hosts} "
                         f"{why or f'did not answer in {ZK_ANSWER_S:.0f} s'}")
        self.hosts = hosts


def _client(owner):
    """The kazoo client of a method's owner (a client, or a transaction for commit_async)."""
    owner = getattr(owner, "__self__", owner)
    return getattr(owner, "client", owner)


def _hosts(owner) -> str:
    """host:port,... of a kazoo client, or of the client of a method's owner."""
    client = _client(owner)
    return ",".join(f"{host}:{port}" for host, port in getattr(client, "hosts", None) or ())


def _closed(async_method, exc: Exception) -> MetadataError:
    """A lost or closed session: the refused login it followed (ZA4: kazoo closes the
    session right after AUTH_FAILED, so a later request sees ConnectionClosedError), else
    ZkUnavailable."""
    if login_was_refused(_client(async_method)):
        return login_refused(_hosts(async_method))
    return ZkUnavailable(_hosts(async_method), f"lost the connection before it "
                                               f"answered ({type(exc).__name__})")


def _answer(async_method, args, kwargs, timeout_s: float):
    try:
        return async_method(*args, **kwargs).get(timeout=max(timeout_s, 0.0))
    except KazooTimeoutError:
        raise ZkUnavailable(_hosts(async_method)) from None
    except AuthFailedError:  # ZA4 (api/client/zk_auth.py): the SASL login was refused
        raise login_refused(_hosts(async_method)) from None


def zk_call(async_method, *args, **kwargs):
    """ZK5: one write, create, delete or commit (``client.set_async``, ``create_async``,
    ``delete_async``, ``ensure_path_async``, ``transaction().commit_async``), its answer
    awaited ZK_ANSWER_S at most; ZkUnavailable then, or on a lost connection: not retried,
    since it may have happened."""
    try:
        return _answer(async_method, args, kwargs, ZK_ANSWER_S)
    except (ConnectionLoss, SessionExpiredError) as exc:
        raise _closed(async_method, exc) from None


def zk_read(async_method, *args, **kwargs):
    """ZK5: a read (``client.get_async``, ``get_children_async``, ``exists_async``), tried
    again after a lost connection or session until ZK_ANSWER_S have passed since it began;
    ZkUnavailable then."""
    deadline = time.monotonic() + ZK_ANSWER_S
    pause, longest = READ_BACKOFF_S
    while True:
        try:
            return _answer(async_method, args, kwargs, deadline - time.monotonic())
        except (ConnectionLoss, SessionExpiredError) as exc:
            if login_was_refused(_client(async_method)):  # ZA4: closed for good, at once
                raise _closed(async_method, exc) from None
            if time.monotonic() + pause >= deadline:
                raise ZkUnavailable(_hosts(async_method)) from None
            time.sleep(pause)  # a reconnect takes a moment: do not spin on a dead socket
            pause = min(pause * 2, longest)


def zk_watch(client: KazooClient, recipe: str, path: str, func):
    """kazoo's ``DataWatch`` or ``ChildrenWatch`` (``recipe``) on ``path``. Its first read is
    kazoo's own, unbounded: a bounded read just before it reports a ZooKeeper already gone
    (ZK5) instead of waiting for it; only one gone in between is still waited for."""
    zk_read(client.exists_async, path)
    return getattr(client, recipe)(path, func)


def zk_start(client: KazooClient) -> None:
    """ZK5: connect (if not connected), waiting ZK_ANSWER_S at most. On ZkUnavailable the
    client keeps trying in the background until its owner stops it."""
    if client.state != KazooState.CONNECTED and \
            not client.start_async().wait(timeout=ZK_ANSWER_S):
        if login_was_refused(client):  # ZA4
            raise login_refused(_hosts(client))
        raise ZkUnavailable(_hosts(client))
