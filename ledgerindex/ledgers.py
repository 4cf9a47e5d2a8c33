"""The ``ledgers`` index: ledgerId -> LedgerState (BookKeeper's LedgerMetadataIndex).

Implements docs/formats.md §7.2 over ``ledgerindex.kv``; values come from ``keys``.

The whole index lives in memory, loaded at open. Changes are applied in memory, marked dirty
and written by ``flush`` in one batch at the checkpoint (docs/formats.md §8.2 step 6): until then
the journal records (LEDGER_KEY, FENCE, EXPLICIT_LAC) are the durable copy. A deletion is
different: ``mark_deleted`` writes its tombstone at once with ``sync=True``.

Invariants:
    M1. A deleted ledger stays as a tombstone (``exists=False``), written and synced before
        ``mark_deleted`` returns, so replay of older journal records never re-creates it
        (docs/design.md §1.3). Only ``purge`` removes a tombstone. On disk it sits under its
        own key and key L is deleted in the same batch (K7, LR1 in ``ledger_records``).
    M2. No write of an older state overtakes a newer one: ``flush`` and ``mark_deleted``
        serialize their RocksDB writes, and ``flush`` snapshots under that order, so a flush
        racing a deletion can never write the live state over the tombstone.
    M7. ``revive`` is the only way back from a tombstone: a synced fresh state, written
        after the ledger's locations are gone, so no old location survives into the new
        ledger (GC's dead set and the pending deletes are the storage's to clear).
    M3. A change made while a flush is writing is not lost: ``flush`` takes the dirty set and
        clears it in one step under the lock, so the change stays dirty for the next flush.
    M4. Negative keys that are not ours (BookKeeper's storage-state flags under -0xeefd) are
        not ledgers: never loaded, rewritten or deleted here.
    M5. A ``LedgerData`` value without the bookie extension (BookKeeper wrote it) is read as
        is, digest type and usage not known, and gets the extension on the ledger's next
        state write, not at load. An index of the older BKLD form is carried over at open
        (``index_upgrade``, IU1-IU3), before anything else writes to it.
    M6. Usage counters on disk are never ahead of or behind the ``locations`` index unseen:
        a checkpoint that will change counters first writes the usage-pending key, synced,
        naming those ledgers (``begin_usage``), and the ``flush`` that writes the counters
        deletes the key in the same batch. A pending key found at load means a checkpoint
        died in between: those ledgers' counters become not known (K5), written so by the
        next flush, and are recounted from the index. A pending ledger with no state at load
        was created by that checkpoint: when replay creates it again its counters start not
        known (its entries may be indexed already), and until then the key keeps its id.
"""

from __future__ import annotations

import dataclasses
import hmac
import os
import threading
from typing import Callable

from bookie.errors import NoLedger, Unauthorized
from ledgerindex import index_upgrade, keys, ledger_records
from ledgerindex.keys import LedgerState
from ledgerindex.kv import KeyValueStore


def _all_zeros(key: bytes) -> bool:
    """BookKeeper's ArrayUtil.isArrayAllZeros; an empty key counts as all zeros."""
    return not key.strip(b"\0")


class LedgerMetadataIndex:
    """Ledger states, in memory, flushed to RocksDB at checkpoints.

    Thread-safety: mutated from the asyncio loop thread (``set``, ``set_master_key``,
    ``set_fenced``, ``mark_deleted``...), flushed from the checkpoint thread. ``_lock`` guards
    the in-memory dict and the dirty set and is never held across I/O, so ``set`` never waits
    on a disk. ``_write_lock`` orders RocksDB writes (M2); it is taken before ``_lock``.
    ``mark_deleted`` and ``purge`` block for a synced write, and may wait for a running flush.
    ``get`` and ``is_deleted`` take no lock: one dict lookup is atomic under the GIL.
    """

    def __init__(self, kv: KeyValueStore) -> None:
        self.kv = kv
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._dirty: set[int] = set()
        #: Which keys are on disk (LR1), kept up to date by every write below.
        self._records = ledger_records.load(kv.items(), kv.path)
        self._states: dict[int, LedgerState] = self._records.states
        #: Keys left untouched (M4), counted for logs and tests.
        self.reserved_key_count = self._records.reserved_key_count
        #: Values BookKeeper wrote, without the bookie extension (M5).
        self.ledger_data_count = self._records.forms.get(keys.FORM_BOOKKEEPER, 0)
        #: Whether the usage-pending key is on disk (M6): the next flush deletes it.
        self._usage_pending = False
        #: Pending ids that had no state at load: a ledger the dead checkpoint created. Its
        #: entries may be indexed already, so when replay creates it again its usage is not
        #: known; the pending key keeps naming it until then (M6).
        self._suspects: set[int] = set()
        self._forget_pending_usage(self._records.pending)
        #: Ledgers rewritten by the carry-over of an older index at this open (M5).
        self.upgraded_count = 0
        if not kv.read_only and not self._records.format_present:
            self.upgraded_count = index_upgrade.carry_over(kv, self._records)

    @classmethod
    def open(cls, path: str | os.PathLike, *, create: bool = True,
             read_only: bool = False) -> "LedgerMetadataIndex":
        """Open ``<dir>/current/ledgers``, load it, carry an older form over (M5)."""
        return cls(KeyValueStore.open(path, create=create, read_only=read_only))

    def _forget_pending_usage(self, pending: list[int]) -> None:
        """M6: a checkpoint died between the pending key and the counters' write."""
        self._usage_pending = True if pending else self._usage_pending
        for ledger_id in pending:
            state = self._states.get(ledger_id)
            if state is None:
                self._suspects.add(ledger_id)
            elif state.exists and state.usage_known:
                self._states[ledger_id] = state.with_(entry_count=keys.USAGE_UNKNOWN,
                                                      byte_count=keys.USAGE_UNKNOWN)
                self._dirty.add(ledger_id)

    # --- reads ------------------------------------------------------------------------

    def get(self, ledger_id: int) -> LedgerState | None:
        """The ledger's state, None if unknown. A deleted ledger's state is its tombstone,
        with ``exists=False`` (M1): callers check ``exists`` before treating it as live."""
        return self._states.get(ledger_id)

    def is_deleted(self, ledger_id: int) -> bool:
        """Whether the ledger has a tombstone (M1): replay skips its records."""
        state = self._states.get(ledger_id)
        return state is not None and not state.exists

    def ledger_ids(self, start: int = 0, limit: int | None = None) -> list[int]:
        """Sorted ids of live ledgers >= ``start``, at most ``limit`` of them."""
        with self._lock:
            ids = sorted(i for i, s in self._states.items() if s.exists and i >= start)
        return ids if limit is None else ids[:limit]

    def __len__(self) -> int:
        """The number of live ledgers."""
        with self._lock:
            return sum(1 for state in self._states.values() if state.exists)

    @property
    def format_current(self) -> bool:
        """Whether the format key is on disk: no value of the older BKLD form is left (M5)."""
        return self._records.format_present

    @property
    def writer_mark(self) -> int | None:
        """The journal id in the writer mark at open (bookie/writer_mark.py), None if none."""
        return self._records.writer_mark

    def forget_usage(self) -> None:
        """WM2 (bookie/writer_mark.py): every live ledger's counters become not known."""
        with self._lock:
            self._forget_pending_usage(list(self._states))

    @property
    def dirty_count(self) -> int:
        with self._lock:
            return len(self._dirty)

    # --- changes in memory, written by flush ------------------------------------------

    def set(self, ledger_id: int, state: LedgerState) -> None:
        """Replace the ledger's state in memory; written by the next ``flush``.

        Raises NoLedger for a deleted ledger (M1); deletion itself is ``mark_deleted``.
        """
        _check_ledger_id(ledger_id)
        if not state.exists:
            raise ValueError(f"ledger {ledger_id}: use mark_deleted to delete a ledger")
        with self._lock:
            if ledger_id not in self._states and not state.usage_known:
                if ledger_id in self._suspects:  # a dead checkpoint may have indexed some (M6)
                    self._suspects.discard(ledger_id)
                else:
                    # A new ledger holds nothing indexed, so its counters start known at 0, 0
                    # (docs/formats.md §7.2), as ``set_master_key`` starts them: left "not
                    # known", its first ledger info walked it in the index (U2's recount).
                    state = dataclasses.replace(state, entry_count=0, byte_count=0)
            self._set_locked(ledger_id, state)

    def _set_locked(self, ledger_id: int, state: LedgerState) -> None:
        current = self._states.get(ledger_id)
        if current is not None and not current.exists:
            raise NoLedger(f"ledger {ledger_id} was deleted")
        if current != state:
            self._states[ledger_id] = state
            self._dirty.add(ledger_id)

    def set_master_key(self, ledger_id: int, master_key: bytes,
                       digest_type: int = 0) -> LedgerState:
        """Apply docs/formats.md §7.2's state rules (LedgerMetadataIndex.setMasterKey).

        A new ledger is created existing, unfenced, with this key. A stored all-zero key is
        replaced. A different key raises Unauthorized, unless the given key is all zeros,
        which BookKeeper accepts without change. A deleted ledger raises NoLedger (M1).
        ``digest_type`` fills a digest type not known yet (docs/formats.md §9.4); a known one is
        kept: comparing it with a request's is the caller's decision.
        """
        _check_ledger_id(ledger_id)
        master_key = bytes(master_key)
        with self._lock:
            current = self._states.get(ledger_id)
            if current is None:  # a new ledger: nothing stored yet, so its usage is known...
                usage = keys.USAGE_UNKNOWN if ledger_id in self._suspects else 0
                self._suspects.discard(ledger_id)  # ...unless a dead checkpoint indexed some
                state = LedgerState(master_key=master_key, digest_type=int(digest_type),
                                    entry_count=usage, byte_count=usage)
            else:
                state = _with_master_key(ledger_id, current, master_key, digest_type)
            self._set_locked(ledger_id, state)
            return state

    def update(self, ledger_id: int, **changes) -> LedgerState:
        """Change fields of a live ledger's state (e.g. ``fenced=True``); NoLedger if none."""
        _check_ledger_id(ledger_id)
        with self._lock:
            current = self._states.get(ledger_id)
            if current is None or not current.exists:
                state = "was deleted" if current is not None else "does not exist"
                raise NoLedger(f"ledger {ledger_id} {state}")
            state = current.with_(**changes)
            self._set_locked(ledger_id, state)
            return state

    def set_fenced(self, ledger_id: int) -> bool:
        """Fence the ledger; False if it was already fenced (BookKeeper's setFenced)."""
        current = self.get(ledger_id)
        if current is not None and current.exists and current.fenced:
            return False
        self.update(ledger_id, fenced=True)
        return True

    def set_limbo(self, ledger_id: int, limbo: bool = True) -> LedgerState:
        return self.update(ledger_id, limbo=limbo)

    def set_explicit_lac(self, ledger_id: int, body: bytes) -> LedgerState:
        """Keep the raw explicit-LAC body (docs/formats.md §6.4)."""
        return self.update(ledger_id, explicit_lac=bytes(body))

    # --- usage counters (M6) ------------------------------------------------------------

    def begin_usage(self, ledger_ids) -> None:
        """Write the usage-pending key naming ``ledger_ids``, synced (M6), before the index
        batch whose entries their counters will include."""
        with self._lock:
            suspects = set(self._suspects)
        value = keys.encode_usage_pending(set(ledger_ids) | suspects)
        with self._write_lock:
            self.kv.put(keys.encode_ledger_key(keys.USAGE_PENDING_LEDGER_ID), value, sync=True)
            self._usage_pending = True

    def add_usage(self, deltas: dict[int, tuple[int, int]]) -> None:
        """Add (entries, bytes) to live ledgers whose usage is known; written by ``flush``."""
        with self._lock:
            for ledger_id, (entries, size) in deltas.items():
                current = self._states.get(ledger_id)
                if current is None or not current.exists or not current.usage_known:
                    continue
                self._set_locked(ledger_id, current.with_(
                    entry_count=current.entry_count + entries,
                    byte_count=current.byte_count + size))

    def set_usage(self, ledger_id: int, entries: int, size: int) -> None:
        """A recount's result for a live ledger (M6); written by the next ``flush``."""
        with self._lock:
            current = self._states.get(ledger_id)
            if current is not None and current.exists:
                self._set_locked(ledger_id, current.with_(entry_count=entries, byte_count=size))

    def flush(self, sync: bool = True) -> int:
        """Write every dirty state in one batch (docs/formats.md §8.2 step 6). Returns the count.

        The dirty set is taken and cleared under the lock (M3); on a failed write it is
        restored, so memory still says what is not durable (no retry here: docs/design.md §1.5).
        """
        with self._write_lock:
            with self._lock:
                taken = {i: self._states[i] for i in self._dirty}
                self._dirty.clear()
                suspects = set(self._suspects)
            puts, deletes = ledger_records.writes_for_all(taken.items(), self._records)
            pending = self._usage_pending
            # The counters written here settle the pending key, except for suspects replay
            # has not created yet: the key keeps naming those (M6).
            pending_key = keys.encode_ledger_key(keys.USAGE_PENDING_LEDGER_ID)
            if pending and suspects:
                puts.append((pending_key, keys.encode_usage_pending(suspects)))
            elif pending:
                deletes.append(pending_key)
            try:
                self.kv.write_batch(puts, deletes=deletes, sync=sync)
            except BaseException:
                with self._lock:
                    self._dirty.update(taken)
                raise
            self._usage_pending = self._usage_pending and not pending or bool(suspects)
        return len(taken)

    # --- durable at once --------------------------------------------------------------

    def mark_deleted(self, ledger_id: int) -> bool:
        """Write the ledger's tombstone with ``sync=True`` before returning (M1).

        Works for a ledger never seen too, so that replay cannot create it from journal
        records. Returns whether a live ledger was deleted.
        """
        _check_ledger_id(ledger_id)
        with self._write_lock:
            with self._lock:
                current = self._states.get(ledger_id)
                tombstone = (current or LedgerState()).with_(exists=False)
                self._states[ledger_id] = tombstone
                # The tombstone is written below; a pending live state must never follow it.
                self._dirty.discard(ledger_id)
            puts, deletes = ledger_records.writes_for(ledger_id, tombstone, self._records)
            try:
                self.kv.write_batch(puts, deletes=deletes, sync=True)
            except BaseException:
                with self._lock:
                    self._dirty.add(ledger_id)
                raise
        return current is not None and current.exists

    def revive(self, ledger_id: int,
               revived: Callable[[LedgerState], LedgerState]) -> None:
        """Turn a tombstone back into a new, empty ledger, synced (M7): ``revived`` of the
        tombstone (the node's rule, W7 in bookie/write_rules.py, keeps its key and fences
        it). Only for a copy a cluster bookie's GC deleted because the metadata placed it
        elsewhere, now placed here again; the caller has removed every location of it
        first. Not a tombstone: no-op."""
        _check_ledger_id(ledger_id)
        with self._write_lock:
            with self._lock:
                current = self._states.get(ledger_id)
                if current is None or current.exists:
                    return
            fresh = revived(current)
            if not fresh.exists:
                raise ValueError(f"ledger {ledger_id}: a revived state must exist")
            puts, deletes = ledger_records.writes_for(ledger_id, fresh, self._records)
            self.kv.write_batch(puts, deletes=deletes, sync=True)
            with self._lock:
                self._states[ledger_id] = fresh
                self._dirty.discard(ledger_id)

    def purge(self, ledger_id: int, *, moved: bool = False) -> None:
        """Remove a tombstone entirely, synced. The ledger id becomes unknown again. Only
        safe once no journal that replay may read holds records of the ledger (else replay
        would re-create it): the garbage collector's decision. A live ledger raises
        ValueError (``mark_deleted`` it first), unless ``moved``: its state is synced in
        another ledger dir (MH2 in bookie/ledger_move.py)."""
        _check_ledger_id(ledger_id)
        with self._write_lock:
            with self._lock:
                current = self._states.get(ledger_id)
                if current is not None and current.exists and not moved:
                    raise ValueError(f"ledger {ledger_id} is live; mark_deleted it first")
            self.kv.write_batch([], deletes=ledger_records.purge_deletes(ledger_id,
                                                                         self._records),
                                sync=True)
            with self._lock:
                self._states.pop(ledger_id, None)
                self._dirty.discard(ledger_id)

    def put_tombstones(self, tombstones: dict[int, LedgerState]) -> None:
        """Write these whole tombstones (a rebuild keeps the old index's), synced, in one
        batch (M1). Each must have ``exists=False``."""
        if any(state.exists for state in tombstones.values()):
            raise ValueError("a tombstone must not exist")
        with self._write_lock:
            puts, deletes = ledger_records.writes_for_all(tombstones.items(), self._records)
            self.kv.write_batch(puts, deletes=deletes, sync=True)
            with self._lock:
                self._states.update(tombstones)
                self._dirty.difference_update(tombstones)

    def deleted_ids(self) -> list[int]:
        """Sorted ids of tombstones, for the garbage collector."""
        with self._lock:
            return sorted(i for i, s in self._states.items() if not s.exists)

    def close(self) -> None:
        """Close without flushing: states reach disk only through ``flush`` at a checkpoint,
        in the order docs/formats.md §8.2 sets."""
        self.kv.close()


def _check_ledger_id(ledger_id: int) -> None:
    if not 0 <= ledger_id <= keys.MAX_ID:
        raise ValueError(f"ledger id {ledger_id} is not in 0..2**63-1")


def _with_master_key(ledger_id: int, current: LedgerState, master_key: bytes,
                     digest_type: int) -> LedgerState:
    if not current.exists:
        raise NoLedger(f"ledger {ledger_id} was deleted")
    state = current
    if _all_zeros(current.master_key):
        state = state.with_(master_key=master_key)
    elif not hmac.compare_digest(current.master_key, master_key) and \
            not _all_zeros(master_key):  # constant time: the key is a secret
        raise Unauthorized(f"ledger {ledger_id}: master key differs from the stored one")
    if state.digest_type == 0 and digest_type:
        state = state.with_(digest_type=int(digest_type))
    return state
