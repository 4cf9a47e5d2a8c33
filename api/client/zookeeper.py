"""Ledger metadata and membership reads in ZooKeeper, BookKeeper's layout (docs/cluster.md §1):
the client library's ZooKeeper side, with its parts api/client/zk_bound.py (every call's bound,
ZK5; re-exported here), api/client/zk_ids.py (new ledger ids) and api/client/metadata_uri.py
(the metadata service URI; ``parse_uri`` re-exported here). A bookie's registration, cookies
and the cluster's instance id are api/cluster/zookeeper.py's.

``ZkMetadataStore`` is a ``LedgerMetadataStore`` (api/client/metadata.py): ledger znodes at
BookKeeper's hierarchical paths (api/client/metadata_paths.py: 31-bit ids in the legacy
layout, larger ones in the long one) holding the v3 format (api/client/metadata_format.py),
ids from BookKeeper's ``idgen`` and, past 2^31, ``idgen-long`` (api/client/zk_ids.py), every
update a compare-and-set on the znode's version. Our ``LedgerMetadata.version`` is the znode
version plus one, so 0 keeps meaning "not stored yet" as in the file store.

Invariants:
    ZK1. An id comes from a sequential znode the server numbered: two creators, in one process
         or many, never get the same id; a taken id (an explicit create got there first) is
         skipped, never overwritten (create fails on an existing znode).
    ZK2. write and delete name the version they read: of racing writers exactly one wins and
         the others get BadVersion, their change not applied.
    ZK3. The layout znode is written once, by whoever comes first, with BookKeeper's text.
    ZK6. Listing walks both layouts under the root: every ledger znode is found, whichever
         side of 2^31 its id is.
    ZK7. A create stores a random creator token (cToken), as BookKeeper's
         AbstractZkLedgerManager does; a create that finds its znode already there reads
         it, and takes it as its own if the token is its own (its first attempt was
         applied, the answer lost), else it is another's (LedgerExists).

Thread-safety: kazoo's client is thread-safe; the async methods run its (ZK5-bounded) blocking
calls on worker threads (``asyncio.to_thread``) to keep the loop free.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import time
from typing import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoAuthError, NodeExistsError, NoNodeError

from api.client import metadata_format
from api.client.fragments import referenced_bookies
from api.client.topology import rack_map_path
from api.client.metadata import BadVersion, LedgerExists, LedgerMetadata, MetadataError
from api.client.metadata_paths import is_level, ledger_id_of, ledger_path
from api.client.metadata_uri import parse_uri
from api.client.zk_auth import new_client, refused
from api.client.zk_bound import ZK_ANSWER_S, ZkUnavailable, zk_call, zk_read, zk_start, zk_watch
from api.client.zk_ids import LedgerIds
from bookie.errors import NoLedger

__all__ = ["ZK_ANSWER_S", "ZkUnavailable", "zk_call", "zk_read", "zk_start", "zk_watch",
           "KazooClient",
           "alive_bookies", "bookie_scheme", "bookie_service_info", "read_rack_map",
           "ZkMetadataStore", "parse_uri", "writable_bookies"]

log = logging.getLogger("api.client.zookeeper")
LAYOUT = b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1\n"


class ZkMetadataStore:
    def __init__(self, uri: str, client: KazooClient | None = None) -> None:
        self.uri = uri
        self.hosts, self.root = parse_uri(uri)
        self.client = client or new_client(self.hosts)
        self._owns_client = client is None
        self._started = False
        self._ids = LedgerIds(self.client, self.root)

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
                                     ctime_ms=metadata.ctime_ms or int(time.time() * 1000),
                                     ctoken=metadata.ctoken or secrets.randbelow(2**63 - 1) + 1)
        data = metadata_format.encode(stored)
        if metadata.ledger_id is not None:
            return self._create_at(stored, metadata.ledger_id, data)
        while True:  # ZK1: skip ids an explicit create already took
            ledger_id = self._ids.next()
            try:
                return self._create_at(stored, ledger_id, data)
            except LedgerExists:
                continue

    def _create_at(self, stored: LedgerMetadata, ledger_id: int, data: bytes) -> LedgerMetadata:
        try:
            zk_call(self.client.create_async, ledger_path(self.root, ledger_id), data,
                    makepath=True)
        except NodeExistsError:
            try:  # ZK7
                if self._read(ledger_id).ctoken == stored.ctoken:
                    return dataclasses.replace(stored, ledger_id=ledger_id)
            except NoLedger:
                pass  # there and gone again: not knowably ours
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

    def ledgers_naming(self, bookie_id: str) -> list[int]:
        """The ledgers whose ensembles name ``bookie_id`` (one scan of the metadata; a
        ledger deleted meanwhile is skipped): what a decommission still has to move."""
        found = []
        for ledger_id in self._ledger_ids():
            try:
                metadata = self._read(ledger_id)
            except NoLedger:
                continue
            if bookie_id in referenced_bookies(metadata):
                found.append(ledger_id)
        return found

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
    return bookie_service_info(client, root, bookie_id)[0]


def bookie_service_info(client: KazooClient, root: str, bookie_id: str
                        ) -> tuple[str | None, dict[str, str] | None, str | None]:
    """(scheme, properties, address) of a registered bookie's service info: the scheme as
    ``bookie_scheme`` says; the properties (its place, api/client/topology.py), None if it
    is not registered, empty if its info is not ours to read (an Apache BookKeeper
    bookie's); the host:port of its HTTP endpoint, which is its id unless the id was set
    (bookie_id: a Pulsar chart pod's DNS name and bookiePort), None without one."""
    endpoints, properties = bookie_registration(client, root, bookie_id)
    http = [(protocol, host, port) for _, host, port, protocol in endpoints or ()
            if protocol in ("http", "https")]
    if not http:
        return None, properties, None
    protocol, host, port = http[0]
    return protocol, properties, f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bookie_registration(client: KazooClient, root: str, bookie_id: str
                        ) -> tuple[list[tuple[str, str, int, str]] | None,
                                   dict[str, str] | None]:
    """(endpoints as (id, host, port, protocol), properties) of a registered bookie's
    service info; (None, None) if it is not registered, ([], {}) if its znode holds no
    service info we can read (an older Apache BookKeeper bookie's is empty)."""
    for path in (f"{root}/available/{bookie_id}", f"{root}/available/readonly/{bookie_id}"):
        try:
            data, _ = zk_read(client.get_async, path)
        except NoNodeError:
            continue
        except NoAuthError:
            raise refused("read", path) from None
        try:
            return (metadata_format.decode_service_info(data),
                    metadata_format.decode_service_info_properties(data))
        except Exception:  # noqa: BLE001 - not a service info: nothing published
            return [], {}
    return None, None


def read_rack_map(client: KazooClient, root: str) -> bytes | None:
    """Pulsar's rack map (api/client/topology.py), None where there is none, or where its
    ACL keeps this client out (said once in the log): the map is optional, and a ledger's
    creation must not fail on it (the registrations still place the bookies)."""
    path = rack_map_path(root)
    try:
        return zk_read(client.get_async, path)[0]
    except NoNodeError:
        return None
    except NoAuthError:
        if not _RACK_MAP_REFUSED:
            _RACK_MAP_REFUSED.append(True)
            log.warning("Pulsar's rack map %s is not readable with this client's ZooKeeper "
                        "credentials: placing by the bookies' registrations alone",
                        path)
        return None


_RACK_MAP_REFUSED: list = []  # the warning above, once a process


def alive_bookies(client: KazooClient, root: str) -> set[str]:
    """Every registered bookie, writable or read-only (a read-only bookie is alive: its
    copies are readable), as autorecovery counts them."""
    alive = set(writable_bookies(client, root))
    try:
        alive.update(zk_read(client.get_children_async, f"{root}/available/readonly"))
    except NoNodeError:
        pass
    return alive
