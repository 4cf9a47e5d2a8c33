"""Autorecovery's state in ZooKeeper (docs/cluster.md §4), BookKeeper's own layout
(ZkLedgerUnderreplicationManager, ZkLedgerAuditorManager), so its tools and ours read one tree:

    <root>/underreplication/LAYOUT                   text: type "BASIC", version 1
    <root>/underreplication/ledgers/hhhh/hhhh/hhhh/hhhh/urL<id, 10 digits>
                                                     a marker: UnderreplicatedLedgerFormat text
                                                     (replica*: the bookies whose copies are
                                                     missing; ctime: when marked, ms)
    <root>/underreplication/locks/urL<id>            ephemeral: a worker holds the ledger
    <root>/underreplication/auditorelection/V_<seq>  ephemeral sequential votes; the lowest is
                                                     the auditor, who writes its vote's text
                                                     into auditorelection itself
    <root>/underreplication/disable                  exists while autorecovery is disabled
    <root>/underreplication/lostBookieRecoveryDelay  decimal seconds, as BookKeeper stores it
    <root>/underreplication/replicascheckctime       ReplicasCheckFormat, binary as BookKeeper
                                                     writes it (our old text still read): the
                                                     last check (checkallledgersctime and
                                                     placementpolicycheckctime alike)
    <root>/underreplication/decommissioning/<id>     this project's addition (BookKeeper's
                                                     readers ignore it): a live bookie whose
                                                     copies are being moved off

The hex levels split the 64-bit id into four 16-bit parts (0xcafebeef0000feed ->
cafe/beef/0000/feed).

Invariants:
    UR1. A marker only grows while it exists: marking again merges new replicas into it by a
         compare-and-set; it never drops one.
    UR2. A worker deletes a marker only at the version it saw when it took the lock: a bookie
         marked after that keeps the marker for another round.
    UR3. A lock has one holder (an ephemeral create), and goes with the holder's session.
    UR4. Election: the vote with the lowest sequence number is the auditor; a session that
         lost its vote votes again, at the back of the line.
Thread-safety: blocking kazoo calls, each bounded (ZK5, api/client/zk_bound.py); the async
callers run them on worker threads.
"""

from __future__ import annotations

import random
import time

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from api.client.metadata import MetadataError
from api.client.metadata_format import (AuditorVoteFormat, LedgerRereplicationLayoutFormat,
                                        LockDataFormat, decode_check_ctime, encode_check_ctime,
                                        UnderreplicatedLedgerFormat, from_text, to_text)
from api.client.zookeeper import ZkUnavailable, zk_call, zk_read

LAYOUT_TYPE, LAYOUT_VERSION = "BASIC", 1
VOTE_PREFIX = "V_"


def marker_parent(base: str, ledger_id: int) -> str:
    levels = [f"{(ledger_id >> shift) & 0xFFFF:04x}" for shift in (48, 32, 16, 0)]
    return "/".join((f"{base}/ledgers", *levels))


def marker_name(ledger_id: int) -> str:
    return f"urL{ledger_id:010d}"


def ledger_of_marker(name: str) -> int | None:
    digits = name[3:]
    return int(digits) if name.startswith("urL") and digits.isdigit() else None


class Underreplication:
    """One cluster's markers, locks, switches and election (UR1-UR4), on a started client."""

    def __init__(self, client: KazooClient, root: str, holder_id: str = "") -> None:
        self.client, self.root = client, root
        self.base = f"{root}/underreplication"
        self.holder_id = holder_id
        self._vote: str | None = None
        #: Marked ledgers of the last walk not tried yet (``poll``), in random order.
        self._candidates: list[int] = []
        #: Names of locks a take may have made (its answer lost): ours if this session's.
        self._uncertain: set[str] = set()

    # -- layout and switches -------------------------------------------------------------

    def ensure(self) -> None:
        for path in ("ledgers", "locks", "auditorelection", "decommissioning"):
            zk_call(self.client.ensure_path_async, f"{self.base}/{path}")
        layout = LedgerRereplicationLayoutFormat(type=LAYOUT_TYPE, version=LAYOUT_VERSION)
        try:
            zk_call(self.client.create_async, f"{self.base}/LAYOUT", to_text(layout))
        except NodeExistsError:
            found = from_text(LedgerRereplicationLayoutFormat,
                              zk_read(self.client.get_async, f"{self.base}/LAYOUT")[0])
            if (found.type, found.version) != (LAYOUT_TYPE, LAYOUT_VERSION):
                raise MetadataError(f"{self.base}/LAYOUT is {found.type}:{found.version}, "
                                    f"this client knows {LAYOUT_TYPE}:{LAYOUT_VERSION}")

    def enabled(self) -> bool:
        return zk_read(self.client.exists_async, f"{self.base}/disable") is None

    def set_enabled(self, enabled: bool) -> bool:
        """Returns whether anything changed."""
        try:
            if enabled:
                zk_call(self.client.delete_async, f"{self.base}/disable")
            else:
                zk_call(self.client.create_async, f"{self.base}/disable", b"", makepath=True)
            return True
        except (NoNodeError, NodeExistsError):
            return False

    def lost_bookie_delay_s(self, default: int | None = None) -> int:
        """The delay in ZooKeeper; ``default`` is stored first if there is none (BookKeeper's
        initializeLostBookieRecoveryDelay: the first auditor's setting wins)."""
        path = f"{self.base}/lostBookieRecoveryDelay"
        if default is not None:
            try:
                zk_call(self.client.create_async, path, str(int(default)).encode(),
                        makepath=True)
            except NodeExistsError:
                pass
        written = self.lost_bookie_delay_written()
        return written[0] if written is not None else int(default or 0)

    def lost_bookie_delay_written(self) -> tuple[int, int] | None:
        """(seconds, znode version) of the stored delay, None if there is none: a new
        version with the same seconds is BookKeeper's ``triggeraudit`` (AU4)."""
        try:
            data, stat = zk_read(self.client.get_async, f"{self.base}/lostBookieRecoveryDelay")
        except NoNodeError:
            return None
        return int(data.decode().strip()), stat.version

    def set_lost_bookie_delay_s(self, seconds: int) -> None:
        path = f"{self.base}/lostBookieRecoveryDelay"
        try:
            zk_call(self.client.set_async, path, str(int(seconds)).encode())
        except NoNodeError:
            zk_call(self.client.create_async, path, str(int(seconds)).encode(), makepath=True)

    def replicas_check_ctime_ms(self) -> int | None:
        try:
            data = zk_read(self.client.get_async, f"{self.base}/replicascheckctime")[0]
        except NoNodeError:
            return None
        return decode_check_ctime("replicascheckctime", data)

    def set_replicas_check_ctime_ms(self, ctime_ms: int) -> None:
        self.set_check_ctime_ms("replicascheckctime", ctime_ms)

    def set_check_ctime_ms(self, znode: str, ctime_ms: int) -> None:
        """One of BookKeeper's auditor last-run times (metadata_format.CHECK_CTIMES)."""
        data, path = encode_check_ctime(znode, ctime_ms), f"{self.base}/{znode}"
        try:
            zk_call(self.client.set_async, path, data)
        except NoNodeError:
            zk_call(self.client.create_async, path, data, makepath=True)

    def decommissioning(self) -> set[str]:
        try:
            return set(zk_read(self.client.get_children_async,
                                         f"{self.base}/decommissioning"))
        except NoNodeError:
            return set()

    def set_decommissioning(self, bookie_id: str, on: bool) -> None:
        path = f"{self.base}/decommissioning/{bookie_id}"
        try:
            if on:
                zk_call(self.client.create_async, path, b"", makepath=True)
            else:
                zk_call(self.client.delete_async, path)
        except (NoNodeError, NodeExistsError):
            pass

    # -- markers (UR1, UR2) ----------------------------------------------------------------

    def marker_path(self, ledger_id: int) -> str:
        return f"{marker_parent(self.base, ledger_id)}/{marker_name(ledger_id)}"

    def mark(self, ledger_id: int, replicas) -> bool:
        """Mark the ledger under-replicated for ``replicas``; True if the marker changed."""
        path = self.marker_path(ledger_id)
        wanted = sorted(set(replicas))
        while True:
            try:
                data, stat = zk_read(self.client.get_async, path)
            except NoNodeError:
                marker = UnderreplicatedLedgerFormat(replica=wanted,
                                                     ctime=int(time.time() * 1000))
                try:
                    zk_call(self.client.create_async, path, to_text(marker), makepath=True)
                    return True
                except NodeExistsError:
                    continue  # marked meanwhile: merge into it
            marker = from_text(UnderreplicatedLedgerFormat, data)
            new = [r for r in wanted if r not in marker.replica]
            if not new:
                return False
            marker.replica.extend(new)  # UR1: merged, never replaced
            try:
                zk_call(self.client.set_async, path, to_text(marker), stat.version)
                return True
            except (BadVersionError, NoNodeError):
                continue

    def marker(self, ledger_id: int) -> tuple[list[str], int, int] | None:
        """(replicas, ctime ms, znode version) of a ledger's marker, None if unmarked."""
        try:
            data, stat = zk_read(self.client.get_async, self.marker_path(ledger_id))
        except NoNodeError:
            return None
        marker = from_text(UnderreplicatedLedgerFormat, data)
        return list(marker.replica), marker.ctime, stat.version

    def marked(self) -> list[int]:
        """Every marked ledger id, ascending."""
        found: list[int] = []

        def walk(path: str, depth: int) -> None:
            try:
                children = zk_read(self.client.get_children_async, path)
            except NoNodeError:
                return
            for name in children:
                if depth == 4:
                    ledger_id = ledger_of_marker(name)
                    if ledger_id is not None:
                        found.append(ledger_id)
                else:
                    walk(f"{path}/{name}", depth + 1)
        walk(f"{self.base}/ledgers", 0)
        return sorted(found)

    def lock_holder(self, ledger_id: int) -> str | None:
        try:
            data, _ = zk_read(self.client.get_async,
                              f"{self.base}/locks/{marker_name(ledger_id)}")
        except NoNodeError:
            return None
        return from_text(LockDataFormat, data).bookieId or "?"

    # -- locks (UR2, UR3) ------------------------------------------------------------------

    def poll(self, skip=frozenset()) -> tuple[int, list[str], int, int] | None:
        """Lock one marked ledger nobody holds (random, as BookKeeper shuffles), not in
        ``skip``: (ledger id, replicas, ctime ms, marker version), or None.

        Candidates come from the last walk of the marker tree while it has untried ones
        left: a walk is five reads one after another, and one per ledger was a fifth of a
        re-replication's time at 24 MiB a ledger. A stale candidate costs one read (its
        marker is checked before the lock is taken), and None is said only after a fresh
        walk found nothing to take."""
        if self._candidates:
            taken = self._take_one(skip)
            if taken is not None:
                return taken
        self._candidates = self.marked()
        random.shuffle(self._candidates)
        return self._take_one(skip)

    def _take_one(self, skip) -> tuple[int, list[str], int, int] | None:
        locked = set(self._locks()) - self._uncertain
        while self._candidates:
            ledger_id = self._candidates.pop()
            if ledger_id in skip or marker_name(ledger_id) in locked:
                continue
            found = self.marker(ledger_id)
            if found is not None and self.try_lock(ledger_id):
                return ledger_id, *found
        return None

    def try_lock(self, ledger_id: int) -> bool:
        """Take the ledger's replication lock (``locks/urL<id>``, ephemeral) whether it is
        marked or not, as BookKeeper's GC does around an over-replicated delete; False if
        someone holds it. A take whose answer was lost (ZkUnavailable, ZK5) may have made
        the lock: the next take here finds it this session's and has it, where it would
        otherwise stay, unreleased, as long as the session."""
        path = f"{self.base}/locks/{marker_name(ledger_id)}"
        try:
            zk_call(self.client.create_async, path,
                    to_text(LockDataFormat(bookieId=self.holder_id)), ephemeral=True,
                    makepath=True)
        except ZkUnavailable:
            self._uncertain.add(marker_name(ledger_id))
            raise
        except NodeExistsError:
            stat = zk_read(self.client.exists_async, path)
            if marker_name(ledger_id) not in self._uncertain or stat is None or \
                    stat.ephemeralOwner != (self.client.client_id or (None,))[0]:
                return False
        self._uncertain.discard(marker_name(ledger_id))
        return True

    def _locks(self) -> list[str]:
        try:
            return zk_read(self.client.get_children_async, f"{self.base}/locks")
        except NoNodeError:
            return []

    def release(self, ledger_id: int) -> None:
        try:
            zk_call(self.client.delete_async, f"{self.base}/locks/{marker_name(ledger_id)}")
        except NoNodeError:
            pass

    def mark_replicated(self, ledger_id: int, version: int) -> bool:
        """UR2: delete the marker if it is still at ``version`` (then its empty levels), and
        release the lock. False if it was marked again meanwhile (it stays).

        The marker and the lock go in one transaction: one ZooKeeper write (one fsync of
        its log) where two were, and no moment when the lock is gone but the marker that
        was replicated is not (another worker would take the ledger only to find nothing)."""
        path = self.marker_path(ledger_id)
        transaction = self.client.transaction()
        transaction.delete(path, version=version)
        transaction.delete(f"{self.base}/locks/{marker_name(ledger_id)}")
        if zk_call(transaction.commit_async)[0] is not True:
            # Rolled back whole (marked again, already gone, or the lock is not there):
            # one step at a time, each outcome as it is.
            try:
                zk_call(self.client.delete_async, path, version=version)
            except BadVersionError:
                self.release(ledger_id)
                return False
            except NoNodeError:
                pass
            self.release(ledger_id)
        parent = path.rsplit("/", 1)[0]
        for _ in range(4):  # the hex levels, as BookKeeper cleans them
            try:
                zk_call(self.client.delete_async, parent)
            except (NotEmptyError, NoNodeError):
                break
            parent = parent.rsplit("/", 1)[0]
        return True

    # -- auditor election (UR4) ------------------------------------------------------------

    def vote(self) -> str:
        """This holder's vote; made (again) if it has none or its session lost it."""
        if self._vote is None or zk_read(self.client.exists_async, self._vote) is None:
            self._vote = zk_call(
                self.client.create_async, f"{self.base}/auditorelection/{VOTE_PREFIX}",
                to_text(AuditorVoteFormat(bookieId=self.holder_id)), ephemeral=True,
                sequence=True, makepath=True)
        return self._vote

    def _votes(self) -> list[str]:
        children = [c for c in zk_read(self.client.get_children_async,
                                                 f"{self.base}/auditorelection")
                    if c.startswith(VOTE_PREFIX)]
        return sorted(children, key=lambda c: int(c[len(VOTE_PREFIX):]))

    def elected(self, on_change=None, announce: bool = True) -> bool:
        """Whether this holder is the auditor (``announce``: then write its id into the
        election znode, as BookKeeper does). If not, ``on_change`` is called (on kazoo's
        thread) once the vote ahead of ours goes: time to look again."""
        mine = self.vote().rsplit("/", 1)[1]
        votes = self._votes()
        if votes and votes[0] == mine:
            if announce:
                zk_call(self.client.set_async, f"{self.base}/auditorelection",
                        to_text(AuditorVoteFormat(bookieId=self.holder_id)))
            return True
        ahead = votes[votes.index(mine) - 1] if mine in votes else None
        if ahead is None or zk_read(
                self.client.exists_async, f"{self.base}/auditorelection/{ahead}",
                watch=(lambda event: on_change()) if on_change else None) is None:
            return self.elected(on_change, announce) if ahead is not None else False
        return False

    def withdraw(self) -> None:
        if self._vote is not None:
            try:
                zk_call(self.client.delete_async, self._vote)
            except NoNodeError:
                pass
            self._vote = None

    def auditor(self) -> str | None:
        """The elected auditor's id (the lowest vote's), None if nobody runs one."""
        try:
            votes = self._votes()
        except NoNodeError:
            return None
        for vote in votes:
            try:
                data, _ = zk_read(self.client.get_async,
                                  f"{self.base}/auditorelection/{vote}")
                return from_text(AuditorVoteFormat, data).bookieId
            except NoNodeError:
                continue
        return None
