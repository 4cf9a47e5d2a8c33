"""An in-memory bookie that keeps the real bookie's rules (bookie/node/writes.py, runtime.py,
reads.py) and its durability contract, without disks, threads or HTTP.

Rules kept, as the real node does them: none is copied here, each is called from
bookie/write_rules.py, the functions the node (bookie/node/runtime.py, writes.py) calls:
    * add: a deleted ledger (tombstone) refuses with NoLedger("... was deleted")
      (``check_not_deleted``), except a recovery add when ``may_revive(ledger_id)``
      (MetadataGc.listed: the cluster's metadata still lists it) says so: then the
      tombstone's key is checked and the ledger comes back empty, fenced, with its key,
      durably (W5, W7: ``check_revive_key``, ``revived_state``); a stored master key that
      differs refuses with Unauthorized (``check_key``; a key never set is adopted,
      ``adopted_key``); a fenced ledger refuses a non-recovery add with Fenced, a recovery
      add passes (``check_fence``); an unknown ledger is created by its first add; a re-add
      stores the held copy or is refused (W6, ``held_copy``).
    * fence: creates the ledger if unknown (recovery fences bookies that never saw it),
      is set in memory at once (N3) and answered once durable with {"lac", "lastEntryId"}.
    * read: an unknown or deleted ledger is NoLedger, a missing entry NoEntry; reads see the
      write cache, i.e. entries not yet durable too (as the real cache does).
    * LAC: raised to the piggybacked LAC of an add only when that add is durable (N4).

Durability (SB1): every change goes to ``memory`` at once and to a journal of pending
records; a group commit, after a seeded "fsync" delay, applies the pending records to
``durable`` in order and only then answers them. A crash drops the journal's unsynced
records and memory becomes a copy of ``durable``: what a bookie acknowledged survives, what
it did not may be lost. A paused bookie (SIGSTOP) commits nothing until resumed.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import random

from api.client.fragments import ranges_of
from bookie import entry as framing
from bookie import write_rules
from bookie.entry import DigestType
from bookie.errors import BadRequest, NoEntry, NoLedger
from ledgerindex.keys import LedgerState
from tests.support.simulation.processes import detached


@dataclasses.dataclass
class SimLedger:
    master_key: bytes
    #: The ledger's digest type, learned from its first add as the real node learns it.
    digest_type: DigestType = DigestType.CRC32C
    fenced: bool = False
    deleted: bool = False
    lac: int = -1
    entries: dict[int, bytes] = dataclasses.field(default_factory=dict)

    @property
    def last_entry_id(self) -> int:
        return max(self.entries, default=-1)


class SimBookie:
    """One bookie's state and rules. ``net`` delivers requests to it (network.py)."""

    def __init__(self, bookie_id: str, rng: random.Random, fsync_s=(0.0005, 0.004)) -> None:
        self.bookie_id = bookie_id
        self.rng = rng
        self.fsync_s = fsync_s
        self.memory: dict[int, SimLedger] = {}
        self.durable: dict[int, SimLedger] = {}
        self._journal: list[tuple[object, asyncio.Future]] = []
        self._syncing = False
        self.epoch = 0  # bumped by every crash: work of an older epoch is lost
        self.down = False
        self.running = asyncio.Event()
        self.running.set()
        self._lac_waiters: list[tuple[int, int, asyncio.Future]] = []
        #: W5: an async callable (ledger id -> bool), as the real bookie's may_revive.
        self.may_revive = None
        self.revived = 0

    # -- faults -------------------------------------------------------------------------------

    def crash(self) -> None:
        """SB1: unsynced records are lost, memory is what was durable."""
        self.epoch += 1
        self.down = True
        for _, future in self._journal:
            future.cancel()
        self._journal.clear()
        self._syncing = False  # the old group commit sees the new epoch and stops
        self.memory = copy.deepcopy(self.durable)
        for _, _, waiter in self._lac_waiters:
            waiter.cancel()
        self._lac_waiters.clear()

    def restart(self) -> None:
        self.down = False

    def pause(self) -> None:
        self.running.clear()

    def resume(self) -> None:
        self.running.set()

    # -- the journal (SB1) --------------------------------------------------------------------

    def _record(self, ledger_id: int, change, lac: int | None = None) -> asyncio.Future:
        """Apply ``change(ledger)`` to memory now and to durable at the next group commit;
        the returned future completes then."""
        change(self.memory[ledger_id])
        future = asyncio.get_running_loop().create_future()

        def durable_change() -> None:
            live = self.memory[ledger_id]
            target = self.durable.setdefault(ledger_id, SimLedger(live.master_key,
                                                                  live.digest_type))
            change(target)
            if lac is not None:
                target.lac = max(target.lac, lac)
                if lac > live.lac:
                    live.lac = lac
                    self._wake_lac(ledger_id, live.lac)
        self._journal.append((durable_change, future))
        if not self._syncing:
            self._syncing = True
            detached(self._group_commit(self.epoch))
        return future

    async def _group_commit(self, epoch: int) -> None:
        try:
            while self._journal and self.epoch == epoch:
                await asyncio.sleep(self.rng.uniform(*self.fsync_s))  # noqa: sleep-ok (virtual)
                await self.running.wait()  # a paused bookie syncs nothing
                if self.epoch != epoch:
                    return  # crashed meanwhile: crash() dropped the records
                batch, self._journal = self._journal, []
                for change, future in batch:
                    change()
                    if not future.done():
                        future.set_result(None)
        finally:
            if self.epoch == epoch:
                self._syncing = False

    # -- admission (changes nothing) ------------------------------------------------------------

    def _writable_ledger(self, ledger_id: int, master_key: bytes) -> SimLedger | None:
        ledger = self.memory.get(ledger_id)
        if ledger is None:
            return None
        write_rules.check_not_deleted(ledger_id, not ledger.deleted)  # W8
        write_rules.check_key(ledger_id, ledger.master_key, master_key)
        return ledger

    def _readable_ledger(self, ledger_id: int) -> SimLedger:
        ledger = self.memory.get(ledger_id)
        if ledger is None or ledger.deleted:
            raise NoLedger(f"ledger {ledger_id} is unknown to this bookie")
        return ledger

    def _admit_adds(self, ledger_id, entries, master_key, recovery) -> list:
        """The entries to store: a re-add takes the held copy (W6), as the real node's."""
        ledger = self._writable_ledger(ledger_id, master_key)
        if ledger is None:
            return entries
        write_rules.check_fence(ledger_id, ledger.fenced, recovery)  # W8
        return [(entry_id, write_rules.held_copy(ledger_id, entry_id,
                                                 ledger.entries.get(entry_id), data,
                                                 ledger.digest_type))
                for entry_id, data in entries]

    # -- operations (called by the network on delivery) ----------------------------------------

    async def add_entries(self, ledger_id: int, datas: list[bytes], master_key: bytes,
                          recovery: bool, digest_type: str | None = None) -> list[int]:
        entries = []
        for data in datas:
            found_ledger, entry_id, _, _ = framing.ENTRY_HEADER.unpack_from(data, 0)
            if found_ledger != ledger_id:
                raise BadRequest(f"entry names ledger {found_ledger}, the path {ledger_id}")
            entries.append((entry_id, bytes(data)))
        if len({e for e, _ in entries}) != len(entries):
            raise BadRequest("a batch names the same entry id twice")
        if recovery:
            await self._revive_if_placed_here(ledger_id, master_key)
        entries = self._admit_adds(ledger_id, entries, master_key, recovery)
        self.memory.setdefault(ledger_id, SimLedger(master_key,
                                                    DigestType.from_header(digest_type)))
        lac = max(framing.piggybacked_lac(data) for _, data in entries)

        def change(ledger: SimLedger) -> None:
            ledger.master_key = write_rules.adopted_key(ledger.master_key, master_key)
            for entry_id, data in entries:
                ledger.entries[entry_id] = data
        await asyncio.shield(self._record(ledger_id, change, lac))
        return [entry_id for entry_id, _ in entries]

    async def _revive_if_placed_here(self, ledger_id: int, master_key: bytes) -> None:
        """W5: a recovery add to a tombstoned ledger the metadata still lists revives it
        empty (synced before the add goes on) instead of being refused; W7: with the
        tombstone's key only, and fenced. The metadata is read again after the revive, and
        a delete that landed meanwhile puts the tombstone back (bug G), as the node does."""
        ledger = self.memory.get(ledger_id)
        if ledger is None or not ledger.deleted or self.may_revive is None:
            return
        write_rules.check_revive_key(ledger_id, ledger.master_key, master_key)
        if not await self.may_revive(ledger_id):
            return
        ledger = self.memory.get(ledger_id)
        if ledger is None or not ledger.deleted:
            return  # revived meanwhile
        state = write_rules.revived_state(LedgerState(exists=False,
                                                      master_key=ledger.master_key))

        def change(ledger: SimLedger) -> None:
            ledger.deleted, ledger.fenced, ledger.lac = False, state.fenced, -1
            ledger.master_key = state.master_key
            ledger.entries.clear()
        await asyncio.shield(self._record(ledger_id, change))
        self.revived += 1
        if not await self.may_revive(ledger_id):
            await self.delete_ledger(ledger_id)
            raise NoLedger(f"ledger {ledger_id} was deleted from the metadata while its "
                           f"copy was being placed here again")

    async def fence(self, ledger_id: int, master_key: bytes) -> dict:
        self._writable_ledger(ledger_id, master_key)
        self.memory.setdefault(ledger_id, SimLedger(master_key))

        def change(ledger: SimLedger) -> None:
            ledger.master_key = write_rules.adopted_key(ledger.master_key, master_key)
            ledger.fenced = True
        await asyncio.shield(self._record(ledger_id, change))
        ledger = self.memory[ledger_id]
        return {"lac": ledger.lac, "lastEntryId": ledger.last_entry_id}

    def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        ledger = self._readable_ledger(ledger_id)
        if entry_id == -1:
            if not ledger.entries:
                raise NoEntry(f"ledger {ledger_id} has no entries")
            entry_id = ledger.last_entry_id
        data = ledger.entries.get(entry_id)
        if data is None:
            raise NoEntry(f"entry {ledger_id}/{entry_id} is not stored on this bookie")
        return data

    def read_range(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        ledger = self._readable_ledger(ledger_id)
        found = []
        for entry_id in range(first, last + 1):
            if entry_id not in ledger.entries:
                break
            found.append(ledger.entries[entry_id])
        if not found:
            raise NoEntry(f"entry {ledger_id}/{first} is not stored on this bookie")
        return found

    def read_held(self, ledger_id: int, first: int, last: int,
                  step: int) -> tuple[list[bytes], int]:
        """The real bookie's held read (bookie/node/reads.py), with a seeded short reply:
        a bookie may stop early at any id (its batch and byte limits)."""
        ledger = self._readable_ledger(ledger_id)
        if self.rng.random() < 0.1:
            last = min(last, first + step * self.rng.randrange(0, 64))
        found = [ledger.entries[e] for e in range(first, min(last, ledger.last_entry_id) + 1,
                                                  step) if e in ledger.entries]
        return found, last  # ids past the last one stored are not held

    async def read_lac(self, ledger_id: int, wait_for_gt: int | None,
                       timeout_ms: int | None) -> int:
        ledger = self._readable_ledger(ledger_id)
        if wait_for_gt is None or ledger.lac > wait_for_gt or not timeout_ms:
            return ledger.lac
        waiter = asyncio.get_running_loop().create_future()
        entry = (ledger_id, wait_for_gt, waiter)
        self._lac_waiters.append(entry)
        try:
            return await asyncio.wait_for(waiter, timeout_ms / 1000)
        except asyncio.TimeoutError:
            return self._readable_ledger(ledger_id).lac
        finally:
            if entry in self._lac_waiters:
                self._lac_waiters.remove(entry)

    def _wake_lac(self, ledger_id: int, lac: int) -> None:
        for waiting_ledger, gt, waiter in list(self._lac_waiters):
            if waiting_ledger == ledger_id and lac > gt and not waiter.done():
                waiter.set_result(lac)

    def entry_id_ranges(self, ledger_id: int) -> list[list[int]]:
        return ranges_of(self._readable_ledger(ledger_id).entries)

    def ledger_info(self, ledger_id: int) -> dict:
        ledger = self._readable_ledger(ledger_id)
        return {"ledgerId": ledger_id, "fenced": ledger.fenced, "lac": ledger.lac,
                "lastEntryId": ledger.last_entry_id, "entries": len(ledger.entries),
                "bytes": sum(len(d) for d in ledger.entries.values())}

    async def delete_ledger(self, ledger_id: int) -> dict:
        if ledger_id not in self.memory:
            raise NoLedger(f"ledger {ledger_id} is unknown to this bookie")

        def change(ledger: SimLedger) -> None:
            ledger.deleted = True
            ledger.entries.clear()
        await asyncio.shield(self._record(ledger_id, change))
        return {}
