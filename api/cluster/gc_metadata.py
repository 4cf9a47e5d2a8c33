"""GC from metadata (docs/cluster.md §2): which local copies a cluster bookie deletes because
the metadata no longer wants them here, and which tombstones a recovery add may lift.

Run before each GC run with the bookie's local ledger ids; ``delete`` is the bookie's delete
(a synced tombstone). The store and the under-replication state are injected, so the
deterministic simulator runs this same code against its in-memory twins.

Invariants:
    GM1. GC deletes a local ledger only after metadata has failed to list it at GC runs
         spanning ``gc_metadata_grace_ms`` (a ledger whose metadata is being created, or a
         listing that raced a create, is only ever seen missing briefly); a restart forgets
         the observations, which delays a deletion, never hastens one.
    GM2. GC deletes a local ledger that metadata lists but no longer places on this bookie
         (autorecovery or decommission moved its copies: BookKeeper's GcOverreplicatedLedger)
         only if the ledger is CLOSED (an open ledger's writer may still choose this bookie),
         names bookies at all, is not marked under-replicated (a worker may be copying to
         this bookie before its compare-and-set names it), and was seen so at GC runs
         spanning ``gc_metadata_grace_ms``. The last check and the delete run under the
         ledger's replication lock (``underreplication/locks/urL<id>``, as BookKeeper's
         GarbageCollectorThread.removeOverReplicatedLedgers): a worker copies to this bookie
         and compare-and-sets it in only while holding that lock, so the delete never
         takes a copy the metadata names.
    GM3. A copy GM2 deleted leaves a tombstone, but the metadata still lists the ledger, so
         a later recovery add (a worker placing a copy here again) revives it (W5 in
         bookie/node/writes.py): GM2 never wedges re-replication.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

from api.client.fragments import referenced_bookies
from api.client.metadata import LedgerMetadata, LedgerMetadataStore
from bookie.errors import NoLedger

log = logging.getLogger("bookie.cluster")


class MetadataGc:
    """GM1-GM3 for one bookie. ``ur`` is an Underreplication (or its twin): ``marked``,
    ``marker``, ``try_lock``, ``release``; its blocking calls run off the loop."""

    def __init__(self, bookie_id: str, store: LedgerMetadataStore, ur, grace_s: float,
                 delete: Callable[[int], Awaitable[None]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.bookie_id, self.store, self.ur = bookie_id, store, ur
        self.grace_s, self.delete, self.clock = grace_s, delete, clock
        self._missing: dict[int, float] = {}  # ledger id -> when metadata first lacked it
        self._moved: dict[int, float] = {}  # ledger id -> when first seen placed elsewhere

    async def run(self, local: list[int]) -> list[int]:
        """Delete the local ledgers metadata has not listed for the grace period (GM1), and
        those it places on other bookies only (GM2). Returns the ids deleted."""
        listed = set(await self.store.ledger_ids())
        now = self.clock()
        self._missing = {i: t for i, t in self._missing.items() if i in local}
        deleted = []
        for ledger_id in local:
            if ledger_id in listed:
                self._missing.pop(ledger_id, None)
                continue
            first = self._missing.setdefault(ledger_id, now)
            if now - first >= self.grace_s:
                await self.delete(ledger_id)
                self._missing.pop(ledger_id)
                deleted.append(ledger_id)
        moved = []
        for ledger_id in await self._placed_elsewhere([i for i in local if i in listed], now):
            if await self._delete_placed_elsewhere(ledger_id):
                moved.append(ledger_id)
            self._moved.pop(ledger_id, None)
        if deleted or self._missing or moved:
            log.info("GC from metadata: deleted ledgers %s; %d missing from metadata for less "
                     "than the grace period; deleted copies placed elsewhere now %s", deleted,
                     len(self._missing), moved)
        return deleted + moved

    async def listed(self, ledger_id: int) -> bool:
        """GM3: whether the metadata lists the ledger (then a recovery add may lift its
        tombstone: ids are never reused, so it was not deleted by a client)."""
        try:
            await self.store.read(ledger_id)
            return True
        except NoLedger:
            return False

    def _no_longer_here(self, metadata: LedgerMetadata, marked: bool) -> bool:
        """GM2's condition on one ledger's metadata."""
        return metadata.closed and bool(metadata.ensembles) and not marked and \
            self.bookie_id not in referenced_bookies(metadata)

    async def _delete_placed_elsewhere(self, ledger_id: int) -> bool:
        """GM2's last check and the delete, under the ledger's replication lock."""
        if not await asyncio.to_thread(self.ur.try_lock, ledger_id):
            return False  # a worker holds it: look again at a later run
        try:
            marked = await asyncio.to_thread(self.ur.marker, ledger_id) is not None
            try:
                metadata = await self.store.read(ledger_id)
            except NoLedger:
                return False  # deleted meanwhile: GM1 takes it at a later run
            if not self._no_longer_here(metadata, marked):
                return False
            await self.delete(ledger_id)
            return True
        finally:
            await asyncio.to_thread(self.ur.release, ledger_id)

    async def _placed_elsewhere(self, listed_local: list[int], now: float) -> list[int]:
        """GM2: the listed local ledgers whose copies here are no longer needed."""
        marked = set(await asyncio.to_thread(self.ur.marked))
        found = []
        for ledger_id in listed_local:
            try:
                metadata = await self.store.read(ledger_id)
            except NoLedger:
                continue  # deleted meanwhile: GM1 takes it at a later run
            if not self._no_longer_here(metadata, ledger_id in marked):
                self._moved.pop(ledger_id, None)
                continue
            first = self._moved.setdefault(ledger_id, now)
            if now - first >= self.grace_s:
                found.append(ledger_id)
        still = set(listed_local)
        self._moved = {i: t for i, t in self._moved.items() if i in still}
        return found
