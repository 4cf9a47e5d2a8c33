"""In-memory twins of the metadata service: the ledger store (CAS on version, as
api/client/zookeeper.py's ZkMetadataStore) and the under-replication markers and locks (the
methods api/cluster/autorecovery/worker.py calls on api/cluster/underreplication.py's class).

Invariants:
    SM1. ``write`` succeeds only at the stored version and stores version + 1 (MD1): of two
         racing writers exactly one wins, the other gets BadVersion.
    SM2. Every successful write is traced with the state and ensembles it stored, so a
         violation's trace shows every metadata step; ``history`` keeps them for the checker.
    SM3. Each call takes one seeded network delay before it acts (ZooKeeper is a server too);
         its effect happens at one instant, so the CAS stays atomic.
    SM4. zk-hang: a call waits until the hang is healed, ZK_ANSWER_S (virtual) at most, then
         raises ZkUnavailable, what api/client/zk_bound.py raises past its bound (ZK5). A
         write that timed out is still queued, as kazoo queues it: it is applied once the
         hang heals (its caller was told "not known whether it happened").
    SM5. zk-uncertain: a write, create or delete is applied, then its caller gets
         ZkUnavailable (the connection lost before the answer: zk_call's ConnectionLoss).
    SM6. zk-expire: the session ends; a write in flight fails with ZkUnavailable, not
         applied (zk_call's SessionExpiredError); a read in flight is asked again (zk_read
         retries within its bound); the ephemeral replication locks go with the session
         (``on_expire``: SimUnderreplication.expire).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random

from api.client.metadata import BadVersion, LedgerExists, LedgerMetadata
from api.client.zookeeper import ZK_ANSWER_S, ZkUnavailable
from bookie.errors import NoLedger
from tests.support.simulation.processes import detached
from tests.support.simulation.trace import Trace

HOSTS = "sim-zk:2181"


def describe(metadata: LedgerMetadata) -> str:
    segments = " ".join(f"({first},[{','.join(members)}])"
                        for first, members in metadata.ensembles)
    end = f" last={metadata.last_entry_id}" if metadata.closed else ""
    return f"v{metadata.version} {metadata.state.value}{end} {segments}"


class SimMetadataStore:
    def __init__(self, rng: random.Random, trace: Trace, delay_s=(0.0005, 0.005)) -> None:
        self.rng, self.trace, self.delay_s = rng, trace, delay_s
        self.ledgers: dict[int, LedgerMetadata] = {}
        self.history: list[tuple[float, LedgerMetadata]] = []
        self._next = 0
        self.hung = 0  # nested zk-hang faults (FI1)
        self.uncertain = 0  # nested zk-uncertain faults
        self.session = 0  # bumped by zk-expire
        self._healed = asyncio.Event()
        self._healed.set()
        self.on_expire: list = []
        self.zk_errors = 0  # ZkUnavailable raised to callers

    # -- ZooKeeper faults (SM4-SM6) --------------------------------------------------------

    def zk_strike(self, kind: str) -> None:
        if kind == "zk-hang":
            self.hung += 1
            self._healed.clear()
        elif kind == "zk-uncertain":
            self.uncertain += 1
        else:
            self.session += 1
            for callback in self.on_expire:
                callback()

    def zk_heal(self, kind: str) -> None:
        if kind == "zk-hang" and self.hung:
            self.hung -= 1
            if not self.hung:
                self._healed.set()
        elif kind == "zk-uncertain" and self.uncertain:
            self.uncertain -= 1

    def _unavailable(self, why: str = "") -> ZkUnavailable:
        self.zk_errors += 1
        return ZkUnavailable(HOSTS, why)

    async def _hop(self, write: bool = False, apply=None) -> None:
        """SM3, with SM4's wait and SM6's end of session (raising what the real store
        raises)."""
        session = self.session
        await asyncio.sleep(self.rng.uniform(*self.delay_s))  # noqa: sleep-ok (virtual: a hop)
        if self.hung:
            try:
                await asyncio.wait_for(self._healed.wait(), ZK_ANSWER_S)
            except asyncio.TimeoutError:
                if write and apply is not None:
                    detached(self._queued(apply))  # SM4: kazoo sends it once back
                raise self._unavailable() from None
        if self.session != session:
            if write:
                raise self._unavailable("lost the connection before it answered "
                                        "(SessionExpiredError)")
            await self._hop()  # SM6: zk_read asks again

    async def _queued(self, apply) -> None:
        await self._healed.wait()
        try:
            apply()
            self.trace("metadata: a write queued during the hang lands now (SM4)")
        except (BadVersion, NoLedger, LedgerExists):
            pass

    async def _write_call(self, apply):
        """A write, create or delete: SM4-SM6 around ``apply`` (the change at one instant)."""
        await self._hop(write=True, apply=apply)
        result = apply()
        if self.uncertain:
            self.trace("metadata: applied, but its answer is lost (zk-uncertain)")
            raise self._unavailable("lost the connection before it answered (ConnectionLoss)")
        return result

    async def create(self, metadata: LedgerMetadata) -> LedgerMetadata:
        return await self._write_call(lambda: self._create(metadata))

    def _create(self, metadata: LedgerMetadata) -> LedgerMetadata:
        ledger_id = self._next if metadata.ledger_id is None else metadata.ledger_id
        if ledger_id in self.ledgers:
            raise LedgerExists(f"ledger {ledger_id} exists")
        self._next = max(self._next, ledger_id + 1)
        stored = dataclasses.replace(metadata, ledger_id=ledger_id, version=1, ctime_ms=1)
        self._store(stored, "create")
        return stored

    async def read(self, ledger_id: int) -> LedgerMetadata:
        await self._hop()
        if ledger_id not in self.ledgers:
            raise NoLedger(f"ledger {ledger_id} has no metadata")
        return self.ledgers[ledger_id]

    async def write(self, metadata: LedgerMetadata) -> LedgerMetadata:
        return await self._write_call(lambda: self._write(metadata))

    def _write(self, metadata: LedgerMetadata) -> LedgerMetadata:
        current = self.ledgers.get(metadata.ledger_id)
        if current is None:
            raise NoLedger(f"ledger {metadata.ledger_id} has no metadata")
        if current.version != metadata.version:  # SM1
            self.trace(f"metadata CAS at v{metadata.version} lost (at v{current.version})")
            raise BadVersion(f"ledger {metadata.ledger_id}: at version {current.version}, "
                             f"the update was based on {metadata.version}")
        stored = dataclasses.replace(metadata, version=current.version + 1)
        self._store(stored, "write")
        return stored

    async def delete(self, ledger_id: int, version: int) -> None:
        await self._write_call(lambda: self._delete(ledger_id, version))

    def _delete(self, ledger_id: int, version: int) -> None:
        current = self.ledgers.get(ledger_id)
        if current is None:
            raise NoLedger(f"ledger {ledger_id} has no metadata")
        if current.version != version:
            raise BadVersion(f"ledger {ledger_id}: at version {current.version}")
        del self.ledgers[ledger_id]
        self.trace(f"metadata delete L{ledger_id}")

    async def harness_read(self, ledger_id: int) -> LedgerMetadata:
        """The scenario's own look (not a client's): SM3's hop, no ZooKeeper fault."""
        await asyncio.sleep(self.rng.uniform(*self.delay_s))  # noqa: sleep-ok (virtual: a hop)
        if ledger_id not in self.ledgers:
            raise NoLedger(f"ledger {ledger_id} has no metadata")
        return self.ledgers[ledger_id]

    async def ledger_ids(self) -> list[int]:
        await self._hop()
        return sorted(self.ledgers)

    async def close(self) -> None:
        pass

    def _store(self, metadata: LedgerMetadata, how: str) -> None:
        self.ledgers[metadata.ledger_id] = metadata
        self.history.append((asyncio.get_running_loop().time(), metadata))
        self.trace(f"metadata {how} {describe(metadata)}")  # SM2


class SimUnderreplication:
    """The markers and locks of docs/cluster.md §4 in memory, for ReplicationWorker and
    MetadataGc (api/cluster/gc_metadata.py). Synchronous like the kazoo class (the callers
    run it through asyncio.to_thread, inline on the virtual loop). One instance per run:
    GC and workers share its locks."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.markers: dict[int, tuple[list[str], int, int]] = {}  # id -> (replicas, ctime, v)
        self.locks: set[int] = set()
        self.leaving: set[str] = set()
        self.disabled = False

    def enabled(self) -> bool:
        return not self.disabled

    def decommissioning(self) -> set[str]:
        return set(self.leaving)

    def mark(self, ledger_id: int, replicas) -> bool:
        old = self.markers.get(ledger_id)
        if old is None:
            self.markers[ledger_id] = (sorted(set(replicas)), 0, 0)
        else:
            new = [r for r in sorted(set(replicas)) if r not in old[0]]
            if not new:
                return False
            self.markers[ledger_id] = (old[0] + new, old[1], old[2] + 1)
        self.trace(f"underreplicated L{ledger_id} marked for {sorted(set(replicas))}")
        return True

    def marker(self, ledger_id: int):
        found = self.markers.get(ledger_id)
        return None if found is None else (list(found[0]), found[1], found[2])

    def marked(self) -> list[int]:
        return sorted(self.markers)

    def poll(self, skip=frozenset()):
        for ledger_id in self.marked():  # ascending, not shuffled: determinism
            if ledger_id in skip or ledger_id in self.locks:
                continue
            self.locks.add(ledger_id)
            return (ledger_id, *self.marker(ledger_id))
        return None

    def try_lock(self, ledger_id: int) -> bool:
        """The ledger's replication lock whether it is marked or not (GC's GM2 around an
        over-replicated delete): the same lock ``poll`` takes, so a worker that holds it
        blocks this, and ``poll`` skips a ledger whose lock GC holds (UR3)."""
        if ledger_id in self.locks:
            return False
        self.locks.add(ledger_id)
        return True

    def release(self, ledger_id: int) -> None:
        self.locks.discard(ledger_id)

    def expire(self) -> None:
        """SM6: the locks are ephemeral znodes of the session that just ended."""
        if self.locks:
            self.trace(f"underreplication: session expired, locks {sorted(self.locks)} gone")
        self.locks.clear()

    def mark_replicated(self, ledger_id: int, version: int) -> bool:
        found = self.markers.get(ledger_id)
        if found is not None and found[2] != version:
            self.release(ledger_id)
            return False
        self.markers.pop(ledger_id, None)
        self.release(ledger_id)
        self.trace(f"underreplicated L{ledger_id} replicated")
        return True
