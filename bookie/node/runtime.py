"""What the node knows of each ledger beyond its persisted state, and the checks on it.

The ledger's runtime (LAC, last entry, the key last journaled, LAC long polls) is loaded from
storage on the first touch since start; on the add path that load happens on the read
executor (N6), never on the loop.
"""

from __future__ import annotations

import asyncio
import dataclasses

from bookie import entry as entry_mod
from bookie import write_rules
from bookie.entry import ZERO_KEY, DigestType
from bookie.errors import BadRequest, IOFailure, NoLedger
from ledgerindex.keys import LedgerState


@dataclasses.dataclass
class LedgerRuntime:
    """What the node knows of a ledger beyond its persisted state."""

    lac: int = -1                  # N4: raised by completed adds and explicit LACs
    last_entry_id: int = -1        # largest entry id admitted (cache or storage)
    journaled_key: bytes | None = None  # the key of this process's last LEDGER_KEY record
    journaled_digest: int = 0      # and the digest type it carried (journal/format.py J4)
    waiters: list = dataclasses.field(default_factory=list)  # (gt, future) long polls
    fence_record: object = None    # FN1: the future of this process's fence record, if any


class LedgerRuntimes:
    """Mixin of ``Bookie``: per-ledger runtime and the state checks of every operation."""

    def _runtime_of(self, ledger_id: int) -> LedgerRuntime:
        runtime = self._runtime.get(ledger_id)
        if runtime is None:
            runtime = self._runtime[ledger_id] = self._load_runtime(ledger_id)
        return runtime

    def _load_runtime(self, ledger_id: int) -> LedgerRuntime:
        """From storage (RocksDB and one pread): on the read executor for adds (N6)."""
        runtime = LedgerRuntime()
        last = self.storage.last_entry_id(ledger_id)
        runtime.last_entry_id = -1 if last is None else last
        runtime.lac = self._stored_lac(ledger_id, runtime.last_entry_id)
        return runtime

    def runtime_loaded(self, ledger_id: int) -> bool:
        return ledger_id in self._runtime

    async def load_runtime(self, ledger_id: int) -> None:
        """N6: the ledger's runtime loaded on the read executor, once however many adds ask
        at a time: a new ledger's first burst (thousands of adds in flight from one client)
        must not queue one load each on the executor, which held them all for ~0.7 s."""
        if ledger_id in self._runtime:
            return
        loading = self._loading.get(ledger_id)
        if loading is None or loading.done():  # a finished load may be stale (a delete since)
            loading = self._loading[ledger_id] = self._loop.run_in_executor(
                self._reads, self._load_runtime, ledger_id)
            loading.add_done_callback(lambda done: self._forget_load(ledger_id, done))
        loaded = await asyncio.shield(loading)
        self._runtime.setdefault(ledger_id, loaded)

    def _forget_load(self, ledger_id: int, done) -> None:
        if self._loading.get(ledger_id) is done:  # not a newer load of the same ledger
            del self._loading[ledger_id]

    async def _prefetch(self, ledger_id: int, entry_ids) -> dict[int, bytes | None]:
        """N6: what admission needs from disk, read off the loop before it: the ledger's
        runtime on its first touch since start, and the stored copies of re-added entries.
        Admission then compares a re-add with the write cache (memory) or these copies; a
        stored copy cannot change meanwhile, since every add enters the cache first."""
        await self.load_runtime(ledger_id)
        last = self._runtime[ledger_id].last_entry_id
        again = [entry_id for entry_id in entry_ids if entry_id <= last]
        if not again:
            return {}
        return await self._loop.run_in_executor(self._reads, self._stored_copies, ledger_id,
                                                again)

    def _stored_copies(self, ledger_id: int, entry_ids: list[int]) -> dict[int, bytes | None]:
        copies = {}
        for entry_id in entry_ids:
            try:
                copies[entry_id] = self.storage.get_entry(ledger_id, entry_id)
            except IOFailure:
                copies[entry_id] = None  # unreadable copy: the new one, journaled, replaces it
        return copies

    def _stored_lac(self, ledger_id: int, last_entry_id: int) -> int:
        """After a restart: max(explicit LAC body, last stored entry's piggybacked LAC)."""
        lac = -1
        state = self.storage.ledgers.get(ledger_id)
        if state is not None and state.explicit_lac:
            lac = entry_mod.parse_lac_body(state.explicit_lac)[1]
        if last_entry_id >= 0:
            try:
                data = self.storage.get_entry(ledger_id, last_entry_id)
            except IOFailure:
                data = None  # reported when the entry itself is read
            if data is not None and len(data) >= 24:
                lac = max(lac, entry_mod.piggybacked_lac(data))
        return lac

    def _existing_state(self, ledger_id: int) -> LedgerState:
        state = self.storage.ledgers.get(ledger_id)
        if state is None or not state.exists:
            raise NoLedger(f"ledger {ledger_id} is unknown to this bookie")
        return state

    def _check_key(self, ledger_id: int, state: LedgerState, master_key: bytes) -> None:
        write_rules.check_key(ledger_id, state.master_key, master_key)  # W8

    def _ledger_for_write(self, ledger_id: int, master_key: bytes,
                          digest_type: DigestType | None,
                          default_digest: DigestType | None = DigestType.CRC32C
                          ) -> LedgerState:
        """The ledger's state as a write would leave it (not yet stored). Raises on refusal.

        A fence passes ``default_digest=None``: fencing a ledger this bookie never saw (ensemble
        recovery) must not fix its digest type; the first add or explicit LAC names it."""
        state = self.storage.ledgers.get(ledger_id)
        if state is not None:
            write_rules.check_not_deleted(ledger_id, state.exists)  # W8
        dtype = digest_type or default_digest
        if state is None:
            return LedgerState(master_key=master_key, digest_type=int(dtype) if dtype else 0)
        self._check_key(ledger_id, state, master_key)
        changes = {}
        if state.master_key in (b"", ZERO_KEY):
            changes["master_key"] = master_key
        if digest_type is not None and state.digest_type not in (0, int(digest_type)):
            raise BadRequest(f"ledger {ledger_id} has digest type "
                             f"{DigestType(state.digest_type).header_name}, not "
                             f"{digest_type.header_name}")
        if state.digest_type == 0 and dtype is not None:
            changes["digest_type"] = int(dtype)
        return dataclasses.replace(state, **changes) if changes else state

    def _store_state(self, ledger_id: int, old: LedgerState | None, new: LedgerState) -> None:
        if new is not old:
            self.storage.ledgers.set(ledger_id, new)  # N3: before the record is queued
