"""A bookie's side of ZooKeeper (docs/cluster.md §1-§2): its registration under
``available/``, the cookies, the cluster's instance id, and the count of under-replicated
ledgers its metrics show. The cluster room's kazoo importer beside underreplication.py.

Invariants:
    ZK4. ``<root>/INSTANCEID`` (the cluster's id: a UUID as UTF-8 text, BookKeeper's
         format) is created once, never replaced: of racing creators one wins and every
         other reads the winner's id.
"""

from __future__ import annotations

import threading
import uuid
from typing import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from api.client.zk_auth import new_client, refused
from api.client.topology import rack_map_path
from api.client.zookeeper import parse_uri, zk_call, zk_read, zk_start


class ZkRegistration:
    """A bookie's membership: ``<root>/available/<id>`` while writable, ``available/readonly/
    <id>`` while read-only, both ephemeral (docs/cluster.md §2).

    Invariants:
        ZR1. At most one of the two znodes is ours at a time: the other is deleted first.
        ZR2. After a session expiry (kazoo state LOST) the node is re-created as soon as a
             new session connects, in the state the bookie is in then.
        ZR3. ``unregister`` deletes the node before the caller drains: clients stop choosing
             a bookie that is about to go.
    Thread-safety: ``register``/``unregister`` from one caller thread at a time; the session
    listener runs on kazoo's thread and re-registers there.
    """

    def __init__(self, uri: str, bookie_id: str, data: bytes,
                 on_change: Callable[[str | None], None] = lambda path: None) -> None:
        self.hosts, self.root = parse_uri(uri)
        self.bookie_id = bookie_id
        self.data = data
        self.on_change = on_change
        self.client = new_client(self.hosts)
        self.readonly = False
        self.path: str | None = None
        self._wanted = False
        self._lost = False
        self._lock = threading.Lock()  # a re-registration on kazoo's thread vs register()

    def start(self) -> None:
        if self.client.state == KazooState.CONNECTED:
            return
        self.client.add_listener(self._session)
        zk_start(self.client)
        zk_call(self.client.ensure_path_async, f"{self.root}/available/readonly")

    def register(self, readonly: bool) -> str:
        self._wanted, self.readonly = True, readonly
        return self._place()

    def _place(self) -> str:
        with self._lock:
            return self._place_locked()

    def _place_locked(self) -> str:
        writable = f"{self.root}/available/{self.bookie_id}"
        readonly = f"{self.root}/available/readonly/{self.bookie_id}"
        target, other = (readonly, writable) if self.readonly else (writable, readonly)
        self._delete(other)  # ZR1
        self._delete(target)  # a node of a session before ours: replaced, not shared
        try:
            zk_call(self.client.create_async, target, self.data, ephemeral=True)
        except NoAuthError:
            raise refused("register at", target) from None
        self.path = target
        self.on_change(target)
        return target

    def unregister(self) -> None:
        with self._lock:
            self._wanted = False
            for path in (f"{self.root}/available/{self.bookie_id}",
                         f"{self.root}/available/readonly/{self.bookie_id}"):
                self._delete(path)
            self.path = None
        self.on_change(None)

    def _delete(self, path: str) -> None:
        try:
            zk_call(self.client.delete_async, path)
        except NoNodeError:
            pass
        except NoAuthError:
            raise refused("delete", path) from None

    def _session(self, state) -> None:
        """ZR2. Runs on kazoo's thread, which must not block: the work is spawned."""
        if state == KazooState.LOST:
            self._lost = True
            self.path = None
            self.on_change(None)
        elif state == KazooState.CONNECTED and self._lost and self._wanted:
            self._lost = False
            self.client.handler.spawn(self._place)

    def stop(self) -> None:
        self.client.remove_listener(self._session)
        self.client.stop()
        self.client.close()


class ZkCookies:
    """Bookies' cookies at ``<root>/cookies/<bookieId>`` (docs/cluster.md §2), on a client the
    caller owns and has started."""

    def __init__(self, client: KazooClient, root: str) -> None:
        self.client, self.root = client, root

    def _path(self, bookie_id: str) -> str:
        return f"{self.root}/cookies/{bookie_id}"

    def read(self, bookie_id: str) -> tuple[bytes, int] | None:
        """(cookie text, znode version), None if this bookie has none."""
        try:
            data, stat = zk_read(self.client.get_async, self._path(bookie_id))
        except NoNodeError:
            return None
        except NoAuthError:
            raise refused("read the cookie", self._path(bookie_id)) from None
        return data, stat.version

    def create(self, bookie_id: str, data: bytes) -> None:
        """First start only: a cookie already there (another bookie won) raises."""
        try:
            zk_call(self.client.create_async, self._path(bookie_id), data, makepath=True)
        except NoAuthError:
            raise refused("create the cookie", self._path(bookie_id)) from None

    def replace(self, bookie_id: str, data: bytes, version: int) -> None:
        """Compare-and-set of a cookie at the version read (kazoo's BadVersionError if it
        changed meanwhile: the caller's start fails and is retried)."""
        zk_call(self.client.set_async, self._path(bookie_id), data, version=version)

    def delete(self, bookie_id: str) -> bool:
        try:
            zk_call(self.client.delete_async, self._path(bookie_id))
        except NoNodeError:
            return False
        return True

    def bookie_ids(self) -> list[str]:
        try:
            return sorted(zk_read(self.client.get_children_async, f"{self.root}/cookies"))
        except NoNodeError:
            return []


def cluster_instance_id(client: KazooClient, root: str) -> str | None:
    """The cluster's instance id from ``<root>/INSTANCEID`` (ZK4), None if not initialised."""
    try:
        data, _ = zk_read(client.get_async, f"{root}/INSTANCEID")
    except NoNodeError:
        return None
    except NoAuthError:
        raise refused("read", f"{root}/INSTANCEID") from None
    return data.decode("utf-8").strip()


def create_cluster_instance_id(client: KazooClient, root: str) -> tuple[str, bool]:
    """ZK4: (the instance id, whether this call created it)."""
    instance = str(uuid.uuid4())
    try:
        zk_call(client.create_async, f"{root}/INSTANCEID", instance.encode("utf-8"),
                makepath=True)
        return instance, True
    except NodeExistsError:
        return cluster_instance_id(client, root), False
    except NoAuthError:
        raise refused("create", f"{root}/INSTANCEID") from None


def tree_exists(client: KazooClient, root: str) -> bool:
    """Whether the cluster's ledgers root znode exists (BookKeeper's "metadata exists")."""
    return zk_read(client.exists_async, root) is not None


def init_new_cluster(client: KazooClient, root: str) -> tuple[str, bool]:
    """``initnewcluster`` (bookie/shell/bk_cluster.py): the root, ``available/readonly`` and
    INSTANCEID (ZK4), as BookKeeper's ZKRegistrationManager.initNewCluster creates them;
    (the instance id, whether this call created it). A tree that has a root but no
    INSTANCEID gets one (BookKeeper refuses any existing root)."""
    try:
        zk_call(client.ensure_path_async, f"{root}/available/readonly")
    except NoAuthError:
        raise refused("create", f"{root}/available/readonly") from None
    return create_cluster_instance_id(client, root)


def count_underreplicated(client: KazooClient, root: str) -> int:
    """Ledgers marked under-replicated: ``urL<id>`` znodes below
    ``<root>/underreplication/ledgers`` (BookKeeper's ZkLedgerUnderreplicationManager layout,
    4-hex-digit levels), 0 when there is no such tree yet."""
    def walk(path: str, depth: int) -> int:
        try:
            children = zk_read(client.get_children_async, path)
        except NoNodeError:
            return 0
        found = sum(1 for name in children if name.startswith("urL"))
        if depth < 4:
            found += sum(walk(f"{path}/{name}", depth + 1) for name in children
                         if not name.startswith("urL"))
        return found

    return walk(f"{root}/underreplication/ledgers", 0)


def write_rack_map(client: KazooClient, root: str, data: bytes) -> None:
    """Pulsar's rack map (``/bookies``, api/client/topology.py), created or replaced whole:
    what ``pulsar-admin bookies set-bookie-rack`` leaves there."""
    path = rack_map_path(root)
    try:
        zk_call(client.create_async, path, data, makepath=True)
    except NodeExistsError:
        zk_call(client.set_async, path, data)
    except NoAuthError:
        raise refused("write", path) from None


class ShellRefusal(Exception):
    """A zookeeper-shell command ZooKeeper refused, in ZooKeeperMain's words
    (api/cluster/zk_shell.py ZS2)."""


def shell_command(client: KazooClient, command: str, path: str, data: bytes = b"") -> str:
    """What ``pulsar zookeeper-shell COMMAND PATH`` prints (api/cluster/zk_shell.py ZS1),
    each call bounded (ZK5); ShellRefusal for a missing or existing node or a refused ACL."""
    try:
        if command == "ls":
            return "[" + ", ".join(sorted(zk_read(client.get_children_async, path))) + "]"
        if command == "create":
            zk_call(client.create_async, path, data)
            return f"Created {path}"
        value, stat = zk_read(client.get_async, path)
        if command == "stat":
            return (f"version = {stat.version}\nnumChildren = {stat.numChildren}\n"
                    f"dataLength = {stat.dataLength}")
        return value.decode("utf-8", "replace") if value else "null"
    except NoNodeError:
        raise ShellRefusal(f"Node does not exist: {path}") from None
    except NodeExistsError:
        raise ShellRefusal(f"Node already exists: {path}") from None
    except NoAuthError:
        raise ShellRefusal(f"Insufficient permission : {path}") from None
