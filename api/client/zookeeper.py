"""Ledger metadata and membership reads in ZooKeeper, BookKeeper's layout (docs/cluster.md §1):
the client library's one kazoo importer (a bookie's registration, cookies and the cluster's
instance id are api/cluster/zookeeper.py's).

``ZkMetadataStore`` is a ``LedgerMetadataStore`` (api/client/metadata.py): ledger znodes at
BookKeeper's hierarchical paths holding the v3 format (api/client/metadata_format.py), ids
from ``<root>/idgen/ID-`` ephemeral sequential znodes (ZkLedgerIdGenerator), every update a
compare-and-set on the znode's version. Our ``LedgerMetadata.version`` is the znode version
plus one, so 0 keeps meaning "not stored yet" as in the file store.

Invariants:
    ZK1. An id comes from a sequential znode the server numbered: two creators, in one process
         or many, never get the same id; a taken id (an explicit create got there first) is
         skipped, never overwritten (create fails on an existing znode).
    ZK2. write and delete name the version they read: of racing writers exactly one wins and
         the others get BadVersion, their change not applied.
    ZK3. The layout znode is written once, by whoever comes first, with BookKeeper's text.
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

Thread-safety: kazoo's client is thread-safe; the async methods run its (ZK5-bounded) blocking
calls on worker threads (``asyncio.to_thread``) to keep the loop free.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import (AuthFailedError, BadVersionError, ConnectionLoss, NoAuthError,
                              NodeExistsError, NoNodeError, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

__all__ = ["ZK_ANSWER_S", "ZkUnavailable", "zk_call", "zk_read", "zk_start", "zk_watch",
           "KazooClient",
           "alive_bookies", "bookie_scheme", "ZkMetadataStore", "parse_uri",
           "writable_bookies"]

from api.client import metadata_format
from api.client.metadata import BadVersion, LedgerExists, LedgerMetadata, MetadataError
from api.client.metadata_paths import is_level, ledger_id_of, ledger_path
from api.client.metadata_uri import parse_uri
from api.client.zk_auth import login_refused, new_client, refused
from bookie.errors import NoLedger

LAYOUT = b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1\n"
#: ZK5's bound, in seconds. Longer than a session's timeout (10 s, zk_auth.new_client), so
#: a ZooKeeper restart or failover the session survives is ridden out; short enough that a
#: writer's close, a recovery or an operator's command reports an outage instead of
#: hanging through it (kazoo queues a request while disconnected, for ever).
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


def _hosts(owner) -> str:
    """host:port,... of a kazoo client, or of the client of a method's owner (a client, or a
    transaction for commit_async)."""
    owner = getattr(owner, "__self__", owner)
    client = getattr(owner, "client", owner)
    return ",".join(f"{host}:{port}" for host, port in getattr(client, "hosts", None) or ())


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
        raise ZkUnavailable(_hosts(async_method), f"lost the connection before it "
                                                  f"answered ({type(exc).__name__})") from None


def zk_read(async_method, *args, **kwargs):
    """ZK5: a read (``client.get_async``, ``get_children_async``, ``exists_async``), tried
    again after a lost connection or session until ZK_ANSWER_S have passed since it began;
    ZkUnavailable then."""
    deadline = time.monotonic() + ZK_ANSWER_S
    pause, longest = READ_BACKOFF_S
    while True:
        try:
            return _answer(async_method, args, kwargs, deadline - time.monotonic())
        except (ConnectionLoss, SessionExpiredError):
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
        raise ZkUnavailable(_hosts(client))


class ZkMetadataStore:
    def __init__(self, uri: str, client: KazooClient | None = None) -> None:
        self.uri = uri
        self.hosts, self.root = parse_uri(uri)
        self.client = client or new_client(self.hosts)
        self._owns_client = client is None
        self._started = False

    # -- connection ----------------------------------------------------------------------

    def start(self) -> "ZkMetadataStore":
        if not self._started:
            zk_start(self.client)
            try:
                zk_call(self.client.ensure_path_async, self.root + "/idgen")
            except NoAuthError:
                raise refused("create", self.root + "/idgen") from None
            try:  # ZK3; exists first (it needs no permission): a reader need not create
                if zk_read(self.client.exists_async, self.root + "/LAYOUT") is None:
                    zk_call(self.client.create_async, self.root + "/LAYOUT", LAYOUT)
            except NodeExistsError:
                pass
            except NoAuthError:
                raise refused("create", self.root + "/LAYOUT") from None
            self._started = True
        return self

    async def __aenter__(self) -> "ZkMetadataStore":
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_client:
            await asyncio.to_thread(self._stop)

    def _stop(self) -> None:
        self.client.stop()
        self.client.close()

    # -- LedgerMetadataStore -------------------------------------------------------------

    async def create(self, metadata: LedgerMetadata) -> LedgerMetadata:
        return await asyncio.to_thread(self._create, metadata)

    async def read(self, ledger_id: int) -> LedgerMetadata:
        return await asyncio.to_thread(self._read, ledger_id)

    async def write(self, metadata: LedgerMetadata) -> LedgerMetadata:
        return await asyncio.to_thread(self._write, metadata)

    async def delete(self, ledger_id: int, version: int) -> None:
        await asyncio.to_thread(self._delete, ledger_id, version)

    async def ledger_ids(self) -> list[int]:
        return await asyncio.to_thread(self._ledger_ids)

    def watch(self, ledger_id: int, callback: Callable[[LedgerMetadata | None], None]):
        """Call ``callback`` with the ledger's metadata now and after every change (None once
        it is deleted), on kazoo's thread; returns the watcher (kazoo's DataWatch)."""
        self.start()

        def changed(data, stat, event=None):
            if data is None or stat is None:
                callback(None)
                return False  # deleted: stop watching
            callback(metadata_format.decode(data, ledger_id, stat.version + 1))
            return True

        return zk_watch(self.client, "DataWatch", ledger_path(self.root, ledger_id), changed)

    # -- blocking calls ------------------------------------------------------------------

    def _create(self, metadata: LedgerMetadata) -> LedgerMetadata:
        self.start()
        stored = dataclasses.replace(metadata, version=1,
                                     ctime_ms=metadata.ctime_ms or int(time.time() * 1000))
        data = metadata_format.encode(stored)
        if metadata.ledger_id is not None:
            return self._create_at(stored, metadata.ledger_id, data)
        while True:  # ZK1: skip ids an explicit create already took
            ledger_id = self._next_id()
            try:
                return self._create_at(stored, ledger_id, data)
            except LedgerExists:
                continue

    def _next_id(self) -> int:
        try:
            path = zk_call(self.client.create_async, self.root + "/idgen/ID-", b"",
                           ephemeral=True, sequence=True)
        except NoAuthError:
            raise refused("create a ledger id under", self.root + "/idgen") from None
        try:
            zk_call(self.client.delete_async, path)
        except NoNodeError:
            pass
        return int(path.rsplit("ID-", 1)[1])

    def _create_at(self, stored: LedgerMetadata, ledger_id: int, data: bytes) -> LedgerMetadata:
        try:
            zk_call(self.client.create_async, ledger_path(self.root, ledger_id), data,
                    makepath=True)
        except NodeExistsError:
            raise LedgerExists(f"ledger {ledger_id} already has metadata in "
                               f"{self.uri}") from None
        except NoAuthError:
            raise refused("create", ledger_path(self.root, ledger_id)) from None
        return dataclasses.replace(stored, ledger_id=ledger_id)

    def _read(self, ledger_id: int) -> LedgerMetadata:
        self.start()
        try:
            data, stat = zk_read(self.client.get_async, ledger_path(self.root, ledger_id))
        except NoNodeError:
            raise NoLedger(f"ledger {ledger_id} has no metadata in {self.uri}") from None
        except NoAuthError:
            raise refused("read", ledger_path(self.root, ledger_id)) from None
        return metadata_format.decode(data, ledger_id, stat.version + 1)

    def _write(self, metadata: LedgerMetadata) -> LedgerMetadata:
        self.start()
        if metadata.ledger_id is None or metadata.version < 1:
            raise MetadataError("write needs metadata read from the store (an id, a version)")
        path = ledger_path(self.root, metadata.ledger_id)
        try:  # ZK2
            stat = zk_call(self.client.set_async, path, metadata_format.encode(metadata),
                           metadata.version - 1)
        except BadVersionError:
            raise BadVersion(f"ledger {metadata.ledger_id}: metadata moved past version "
                             f"{metadata.version}") from None
        except NoNodeError:
            raise NoLedger(f"ledger {metadata.ledger_id} has no metadata in "
                           f"{self.uri}") from None
        except NoAuthError:
            raise refused("write", path) from None
        return dataclasses.replace(metadata, version=stat.version + 1)

    def _delete(self, ledger_id: int, version: int) -> None:
        self.start()
        try:
            zk_call(self.client.delete_async, ledger_path(self.root, ledger_id),
                    version=version - 1)
        except BadVersionError:
            raise BadVersion(f"ledger {ledger_id}: metadata moved past version "
                             f"{version}") from None
        except NoNodeError:
            raise NoLedger(f"ledger {ledger_id} has no metadata in {self.uri}") from None
        except NoAuthError:
            raise refused("delete", ledger_path(self.root, ledger_id)) from None

    def _ledger_ids(self) -> list[int]:
        self.start()
        found: list[int] = []
        self._walk(self.root, [], found)
        return sorted(found)

    def slices(self) -> list[list[str]]:
        """The ledger tree's second-level znodes as [level1, level2]: disjoint slices of the
        id space (10^4 ids each below 2^31-1), each walkable on its own (the replica check
        job's tasks)."""
        self.start()
        found = []
        for first in self._children(self.root):
            if is_level(first, 0):
                found.extend([first, second] for second in
                             self._children(f"{self.root}/{first}") if is_level(second, 1))
        return found

    def ledger_ids_below(self, parts: list[str]) -> list[int]:
        """The ledger ids in one slice (``slices``), ascending."""
        self.start()
        found: list[int] = []
        self._walk("/".join((self.root, *parts)), list(parts), found)
        return sorted(found)

    def _children(self, path: str) -> list[str]:
        try:
            return zk_read(self.client.get_children_async, path)
        except NoNodeError:
            return []

    def _walk(self, path: str, parts: list[str], found: list[int]) -> None:
        try:
            children = zk_read(self.client.get_children_async, path)
        except NoNodeError:
            return  # deleted meanwhile
        for name in children:
            ledger_id = ledger_id_of(parts + [name])
            if ledger_id is not None:
                found.append(ledger_id)
            elif len(parts) < 4 and is_level(name, len(parts)):
                self._walk(f"{path}/{name}", parts + [name], found)


def writable_bookies(client: KazooClient, root: str) -> list[str]:
    """The ids of the bookies registered writable (``available/``, not ``readonly``)."""
    try:
        return sorted(name for name in zk_read(client.get_children_async,
                                               f"{root}/available")
                      if name != "readonly")
    except NoNodeError:
        return []


def bookie_scheme(client: KazooClient, root: str, bookie_id: str) -> str | None:
    """``http`` or ``https``: the protocol a registered bookie's service info names (an
    https bookie speaks TLS only); None if it is not registered or names neither."""
    for path in (f"{root}/available/{bookie_id}", f"{root}/available/readonly/{bookie_id}"):
        try:
            data, _ = zk_read(client.get_async, path)
        except NoNodeError:
            continue
        except NoAuthError:
            raise refused("read", path) from None
        try:
            endpoints = metadata_format.decode_service_info(data)
        except Exception:  # noqa: BLE001 - not ours (an Apache BookKeeper bookie's): no scheme
            return None
        for _, _, _, protocol in endpoints:
            if protocol in ("http", "https"):
                return protocol
        return None
    return None


def alive_bookies(client: KazooClient, root: str) -> set[str]:
    """Every registered bookie, writable or read-only (a read-only bookie is alive: its
    copies are readable), as autorecovery counts them."""
    alive = set(writable_bookies(client, root))
    try:
        alive.update(zk_read(client.get_children_async, f"{root}/available/readonly"))
    except NoNodeError:
        pass
    return alive
