"""A bookie's duties as a cluster member (docs/cluster.md §2): its cookie and registration,
and the wiring of GC from metadata (api/cluster/gc_metadata.py, GM1-GM3).

Wired by the composition root (``bookie serve`` with ``metadata_service_uri``):
``check_cookie`` runs before the bookie starts (before replay, so a bookie that forgot its
data serves nothing); ``start`` runs after replay and before READY=1: it writes the cookie on
first start (in ZooKeeper and as ``current/VERSION`` beside the data dirs) and registers
``available/<host:port>`` (or ``available/readonly/<host:port>``); every change of the
bookie's state moves the node; ``stop`` removes it before the bookie drains (ZR3 in
api/client/zookeeper.py).

Invariants:
    CK1. A bookie whose ZooKeeper cookie differs from the cookie in any of its data dirs
         (``current/VERSION``: another bookie's dirs, other dirs), or whose dirs are empty
         while ZooKeeper holds its cookie, does not start: it could answer ENOENTRY for
         entries it acknowledged, and recovery would then truncate them (BookKeeper's
         Cookie.verify).
    CK2. Every cookie carries the cluster's instance id (``<root>/INSTANCEID``, ZK4), not
         the data dir's. A bookie whose dirs' cookie names another cluster instance (its
         ZooKeeper was re-formatted, or belongs to another cluster) does not start. The
         first bookie of a tree with no cookies creates INSTANCEID; a tree with cookies but
         no INSTANCEID (made before instance ids) needs ``bookie cluster init`` once.
    CK3. A cookie from before instance ids (its instanceId is the data dir's own, in both
         ZooKeeper and the dirs, and the two agree) is upgraded once to the cluster's id:
         it proves the dirs are this bookie's as well as a new one would.
    CK4. Dirs without our identity (``IDENTITY``, bookie/identity.py), as BookKeeper's
         bookie leaves them, start only if every one holds the cookie ZooKeeper holds: the
         cookie is then all that tells a wiped disk, as BookKeeper's own check refuses a dir
         whose cookie is missing.
Cookies name the configured dirs as BookKeeper's do; our older form is read and rewritten
(CF1, CF2 in api/cluster/cookie_forms.py).
"""

from __future__ import annotations

import asyncio
import logging

import os

from api.client.metadata_format import (MetadataFormatError, decode_cookie, encode_cookie,
                                       encode_service_info)
from api.client.metadata import MetadataError
from api.client.zookeeper import ZkMetadataStore
from api.cluster.cookie_forms import configured_dirs, in_configured_form
from api.cluster.placement_config import published_place
from api.cluster.gc_metadata import MetadataGc
from api.cluster.underreplication import Underreplication
from api.cluster.zookeeper import (ZkCookies, ZkRegistration, cluster_instance_id,
                                   count_underreplicated, create_cluster_instance_id)
from bookie.bkconf_identity import WILDCARDS, registered_bookie_id
from bookie.disk import atomic_replace
from bookie.errors import BookieError
from bookie.identity import instance_id
from bookie.node import SANITY_LEDGER_ID, Bookie, BookieState

COOKIE_FILE = "VERSION"  # BookKeeper's name for the cookie in current/
#: How often the under-replicated ledger count (bookie_autorecovery_underreplicated_ledgers)
#: is read from ZooKeeper: off the scrape, which must not wait on ZooKeeper.
UNDERREPLICATED_REFRESH_S = 2.0


def advertised_host(host: str, bookie_id: str) -> str:
    """The host a client connects to, in the registration's endpoints: the listened host,
    or, listening on every interface (a Pulsar chart pod), the bookie id's host (its pod
    DNS name with useHostNameAsBookieID), else this host's name."""
    if host not in WILDCARDS:
        return host
    return bookie_id.rsplit(":", 1)[0]  # registered_bookie_id never leaves a wildcard


class CookieMismatch(BookieError):
    """CK1, CK2: the data dirs are not what this bookie's cookie in ZooKeeper says, or
    belong to another cluster instance."""

log = logging.getLogger("bookie.cluster")


class ClusterMember:
    def __init__(self, bookie: Bookie, uri: str, host: str, port: int,
                 rpc_port: int | None = None) -> None:
        self.bookie = bookie
        self.bookie_id = registered_bookie_id(bookie.config.bookie_id, host, port)
        info = encode_service_info(advertised_host(host, self.bookie_id), port,
                                   bookie.config.tls, rpc_port, published_place(bookie.config))
        self.registration = ZkRegistration(uri, self.bookie_id, info,
                                           on_change=self._changed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._moves: asyncio.Lock | None = None
        self.uri = uri
        self.cookies = ZkCookies(self.registration.client, self.registration.root)
        self.metadata = ZkMetadataStore(uri, client=self.registration.client)
        self.gc_metadata = MetadataGc(
            self.bookie_id, self.metadata,
            Underreplication(self.registration.client, self.registration.root, self.bookie_id),
            bookie.config.gc_metadata_grace_ms / 1000.0, bookie.delete_ledger)
        self.autorecovery = None  # api.cluster.autorecovery.service.AutoRecovery, when enabled
        self._leaving = False  # stop() has begun: losing the registration is expected

    def _changed(self, path: str | None) -> None:
        """From any thread: what /ready, /v1/bookie/info and the metrics say."""
        self.bookie.registration = path
        if path is None and self._leaving:  # stop() unregistered it: a normal stop
            log.info("bookie %s unregistered from ZooKeeper: stopping", self.bookie_id)
        elif path is None:  # the session was lost (ZR2 registers it again on reconnect)
            log.warning("bookie %s is not registered in ZooKeeper", self.bookie_id)
        else:
            log.info("bookie registered as %s", path)

    async def check_cookie(self) -> None:
        """CK1, before replay. Raises CookieMismatch naming both sides and the override."""
        await asyncio.to_thread(self.registration.start)
        await asyncio.to_thread(self._check_cookie)

    def _check_cookie(self) -> None:
        config = self.bookie.config
        self.instance_id = self._cluster_instance()
        local = instance_id(self.bookie.disk, config.journal_dirs_current,
                            config.ledger_dirs_current, config.separate_index_dirs)
        stored = self._dir_cookies()
        mine = first = next((in_configured_form(c, config) for _, c in stored if c is not None),
                            None)
        found = self.cookies.read(self.bookie_id)
        theirs = None if found is None else in_configured_form(decode_cookie(found[0]), config)
        override = (f"bookie shell cookie delete --metadata-service-uri {self.uri} "
                    f"--bookie-id {self.bookie_id}")
        if mine is not None and local is not None and theirs is not None and \
                mine["instanceId"] == local != self.instance_id and \
                dict(theirs, instanceId=local) == mine and \
                theirs["instanceId"] in (local, self.instance_id):  # CK3
            log.info("bookie %s: cookie upgraded from data-dir instance %s to cluster "
                     "instance %s", self.bookie_id, local, self.instance_id)
            mine = theirs = dict(mine, instanceId=self.instance_id)
        if mine is not None and mine["instanceId"] != self.instance_id:
            raise CookieMismatch(
                f"the data dirs {config.journal_dir} and {config.ledger_dir} belong to cluster "
                f"instance {mine['instanceId']} (their cookie, current/{COOKIE_FILE}), but "
                f"{self.uri} is cluster instance {self.instance_id}: that ZooKeeper was "
                f"re-formatted or is another cluster's. Point the bookie at its own cluster, "
                f"or give it empty data dirs to join this one as a new bookie.")  # CK2
        if theirs is None:
            return  # first start in this cluster: written after replay (start)
        if mine is None:
            raise CookieMismatch(
                f"ZooKeeper holds the cookie of bookie {self.bookie_id} (cluster instance "
                f"{theirs['instanceId']}, journal {theirs['journalDir']}), but its data dirs "
                f"{config.journal_dir} and {config.ledger_dir} are empty: a wiped or replaced "
                f"disk must not serve as this bookie. If its data is truly gone, let "
                f"autorecovery restore the copies, then: {override}")
        if mine != theirs:
            raise CookieMismatch(
                f"ZooKeeper's cookie of bookie {self.bookie_id} names journal "
                f"{theirs['journalDir']} and ledger dirs {theirs['ledgerDirs']}; its data dirs "
                f"({config.journal_dir}) hold the cookie of bookie {mine['bookieHost']} "
                f"(journal {mine['journalDir']}): these are not this bookie's dirs. To "
                f"accept them: {override}")  # CK1
        odd = [path for path, cookie in stored  # CK1 for every dir, not only the first
               if cookie is not None and in_configured_form(cookie, config) not in (first, theirs)]
        if odd:
            raise CookieMismatch(
                f"{', '.join(odd)}: another cookie than the one the other data dirs of bookie "
                f"{self.bookie_id} and ZooKeeper hold: these are not all this bookie's dirs "
                f"(a disk swapped in from another bookie?); nothing was changed")
        if local is None:  # CK4: no identity (BookKeeper's dirs): every dir holds the cookie
            missing = [path for path, cookie in stored if cookie is None]
            if missing:
                raise CookieMismatch(
                    f"{', '.join(missing)}: no cookie, while the other data dirs of bookie "
                    f"{self.bookie_id} hold its cookie: a wiped or replaced disk must not "
                    f"serve as this bookie. If its data is truly gone, let autorecovery "
                    f"restore the copies, then: {override}")
        self._rewrite_outdated(stored, found, theirs)

    def _rewrite_outdated(self, stored: list, found: tuple, cookie: dict) -> None:
        """CK3 and CF2: a cookie that proved these dirs this bookie's, read in an older form
        (the data dir's instance id, or each dir's ``current/``), is rewritten once:
        ZooKeeper's first (compare-and-set), then the dirs'. A crash between leaves
        ZooKeeper's new and the dirs' old one, which the next start reads as the same cookie
        and finishes. A cookie already current, BookKeeper's own included, is not touched."""
        data = encode_cookie(cookie["bookieHost"], cookie["journalDir"], cookie["ledgerDirs"],
                             cookie["instanceId"], cookie.get("indexDirs"))
        if decode_cookie(found[0]) != cookie:
            self.cookies.replace(self.bookie_id, data, found[1])
            log.info("bookie %s: rewrote its cookie in ZooKeeper naming %s", self.bookie_id,
                     cookie["journalDir"])
        for path, old in stored:
            if old is not None and old != cookie:
                atomic_replace(self.bookie.disk, path, data)

    def _cluster_instance(self) -> str:
        """CK2: the cluster's instance id, made here if this is the first bookie of a tree."""
        client, root = self.registration.client, self.registration.root
        found = cluster_instance_id(client, root)
        if found is not None:
            return found
        if self.cookies.bookie_ids():
            raise CookieMismatch(
                f"{self.uri} holds bookies' cookies but no INSTANCEID (a cluster made before "
                f"instance ids): initialise it once with: bookie cluster init "
                f"--metadata-service-uri {self.uri}")
        created, ours = create_cluster_instance_id(client, root)
        if ours:
            log.info("initialised cluster %s: instance %s", self.uri, created)
        return created

    def _dir_cookies(self) -> list[tuple[str, dict | None]]:
        """Each dir's ``current/VERSION`` path and cookie (None where it has none)."""
        config, disk = self.bookie.config, self.bookie.disk
        found = []
        for directory in _every_dir(config):
            path, cookie = os.path.join(directory, COOKIE_FILE), None
            if disk.exists(path):
                handle = disk.open(path)
                try:
                    cookie = decode_cookie(handle.read_at(0, 1 << 16))
                except MetadataFormatError as exc:
                    raise CookieMismatch(f"{path} is not a bookie cookie ({exc}); the data "
                                         f"dirs cannot be verified") from None
                finally:
                    handle.close()
            found.append((path, cookie))
        return found

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._moves = asyncio.Lock()
        await asyncio.to_thread(self.registration.start)
        await asyncio.to_thread(self._write_cookie)
        await self._register()
        self.bookie.add_gc_prelude(self.delete_unlisted)
        self.bookie.may_revive = self.gc_metadata.listed  # GM3
        self._counter = self._loop.create_task(self._count_underreplicated(),
                                               name="zk-underreplicated")
        self.bookie.add_state_listener(self._on_state)
        if self.bookie.config.autorecovery_daemon_enabled:
            from api.cluster.autorecovery.service import AutoRecovery  # noqa: PLC0415

            self.autorecovery = await AutoRecovery(self.uri, self.bookie_id,
                                                   self.bookie.config).start()
            self.bookie.autorecovery = self.autorecovery  # its figures in /metrics

    async def delete_unlisted(self) -> list[int]:
        """Before each GC run (api/cluster/gc_metadata.py): the ids deleted."""
        local = [i for i in self.bookie.storage.ledgers.ledger_ids() if i != SANITY_LEDGER_ID]
        return await self.gc_metadata.run(local)

    def _write_cookie(self) -> None:
        """First start: the cookie in ZooKeeper and beside the data dirs (both, every time
        one is missing; the ZooKeeper one is never replaced here)."""
        config, disk = self.bookie.config, self.bookie.disk
        dirs = configured_dirs(config)  # CF1
        data = encode_cookie(self.bookie_id, dirs["journalDir"], dirs["ledgerDirs"],
                             self.instance_id, dirs.get("indexDirs"))
        if self.cookies.read(self.bookie_id) is None:
            self.cookies.create(self.bookie_id, data)
            log.info("wrote the cookie of bookie %s to ZooKeeper", self.bookie_id)
        for directory in _every_dir(config):
            path = os.path.join(directory, COOKIE_FILE)
            if not disk.exists(path):
                atomic_replace(disk, path, data)

    def _on_state(self, state: BookieState) -> None:
        if state in (BookieState.WRITABLE, BookieState.READ_ONLY):
            self._loop.create_task(self._register(), name="zk-registration")

    async def _register(self) -> None:
        async with self._moves:  # one move at a time, in the order the states came
            readonly = self.bookie.state is not BookieState.WRITABLE
            if self.registration.path is not None and readonly == self.registration.readonly:
                return
            try:
                await asyncio.to_thread(self.registration.register, readonly)
            except Exception:  # noqa: BLE001 - reported; the session listener retries
                log.exception("registering bookie %s in ZooKeeper failed", self.bookie_id)

    async def _count_underreplicated(self) -> None:
        while True:
            try:
                self.bookie.underreplicated_ledgers = await asyncio.to_thread(
                    count_underreplicated, self.registration.client, self.registration.root)
            except Exception as exc:  # noqa: BLE001 - a lost session: the next round retries
                log.warning("counting under-replicated ledgers failed: %s", exc)
            await asyncio.sleep(UNDERREPLICATED_REFRESH_S)

    async def stop(self) -> None:
        """SIGTERM, before draining: clients stop choosing this bookie (ZR3)."""
        self._leaving = True
        if self.autorecovery is not None:
            self.bookie.autorecovery = None
            await self.autorecovery.stop()
            self.autorecovery = None
        counter = getattr(self, "_counter", None)
        if counter is not None:
            counter.cancel()
        try:
            await asyncio.to_thread(self.registration.unregister)
        except MetadataError as exc:  # ZooKeeper gone: stopping must not wait on it
            log.warning("could not unregister from ZooKeeper (%s); the registration is "
                        "ephemeral and goes with the session. Stopping anyway", exc)
        finally:
            await asyncio.to_thread(self.registration.stop)

    async def close(self) -> None:
        """A start refused: nothing was registered; only the session goes."""
        await asyncio.to_thread(self.registration.stop)


def _every_dir(config) -> tuple[str, ...]:
    """Every journal, ledger and index dir's ``current/``: each holds the cookie (VERSION),
    as BookKeeper stamps its index dirs."""
    return config.journal_dirs_current + config.ledger_dirs_current + \
        config.separate_index_dirs
