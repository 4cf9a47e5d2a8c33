"""The write cache: entries added since the last checkpoint (DbLedgerStorage's WriteCache).

Two halves, as in BookKeeper: adds go to the *active* half; a checkpoint swaps it out to be
the *flushing* half, appends the flushing half to the entry log in (ledgerId, entryId) order,
indexes it, then drops it. Reads look in the active half, then the flushing one.

Invariants:
    W1. An add enters the cache before its journal record is queued (docs/formats.md §8.1), so
        every journal record below a mark taken before ``swap()`` is in the flushing half or
        already flushed. This is what makes the checkpoint's mark safe (docs/design.md §3.4).
    W2. An entry is in at most one place the reader can see as newest: the active half wins
        over the flushing one, and both over the entry log.
    W3. Once the flushing half is ``counted`` (its new entries are in the ledgers' usage
        counters, U3 in ``bookie/ledger_usage.py``), ``uncounted_sizes`` leaves it out, and
        leaves out the active half's re-adds of its entries too.

Thread-safety: ``put``, ``get``, ``drop_ledger`` run on the loop (or the replay thread);
``swap`` and ``clear_flushing`` on the checkpoint thread. One lock guards the references and
the byte counts; the halves' dicts are only mutated under it.
"""

from __future__ import annotations

import collections
import threading
from typing import Iterator


class _Half:
    __slots__ = ("entries", "last_entry", "bytes", "counted")

    def __init__(self) -> None:
        self.entries: dict[int, dict[int, bytes]] = {}
        self.last_entry: dict[int, int] = {}
        self.bytes = 0
        self.counted = False

    def put(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        ledger = self.entries.get(ledger_id)
        if ledger is None:
            ledger = self.entries[ledger_id] = {}
        old = ledger.get(entry_id)
        ledger[entry_id] = data
        self.bytes += len(data) - (len(old) if old is not None else 0)
        if entry_id > self.last_entry.get(ledger_id, -1):
            self.last_entry[ledger_id] = entry_id

    def drop(self, ledger_id: int) -> None:
        ledger = self.entries.pop(ledger_id, None)
        self.last_entry.pop(ledger_id, None)
        if ledger:
            self.bytes -= sum(len(v) for v in ledger.values())


#: The most entries of one ledger a checkpoint handles in one step (flushing_runs).
FLUSH_RUN_ENTRIES = 2048


class WriteCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = _Half()
        self._flushing = _Half()

    def put(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        with self._lock:
            self._active.put(ledger_id, entry_id, data)

    def put_run(self, ledger_id: int, entries) -> None:
        """Several (entryId, bytes) of one ledger under one lock (a batch add)."""
        with self._lock:
            half = self._active
            ledger = half.entries.get(ledger_id)
            if ledger is None:
                ledger = half.entries[ledger_id] = {}
            added = 0
            for entry_id, data in entries:
                old = ledger.get(entry_id)
                ledger[entry_id] = data
                added += len(data) - (len(old) if old is not None else 0)
            half.bytes += added
            last = max(entry_id for entry_id, _ in entries)
            if last > half.last_entry.get(ledger_id, -1):
                half.last_entry[ledger_id] = last

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        # Reading the two references without the lock is safe: a swap between the two
        # lookups moves the entry from active to flushing, where the second lookup finds it.
        found = self._active.entries.get(ledger_id)
        if found is not None:
            data = found.get(entry_id)
            if data is not None:
                return data
        found = self._flushing.entries.get(ledger_id)
        return found.get(entry_id) if found is not None else None

    def last_entry_id(self, ledger_id: int) -> int | None:
        with self._lock:
            a = self._active.last_entry.get(ledger_id, -1)
            f = self._flushing.last_entry.get(ledger_id, -1)
        last = max(a, f)
        return last if last >= 0 else None

    def entry_ids(self, ledger_id: int) -> list[int]:
        """The ledger's cached entry ids, both halves."""
        with self._lock:
            return [*self._active.entries.get(ledger_id, {}),
                    *self._flushing.entries.get(ledger_id, {})]

    def uncounted_sizes(self, ledger_id: int) -> dict[int, int]:
        """{entryId: length} of the ledger's cached entries not in its usage counters (W3)."""
        with self._lock:
            flushing = self._flushing.entries.get(ledger_id, {})
            active = self._active.entries.get(ledger_id, {})
            if self._flushing.counted:
                return {e: len(d) for e, d in active.items() if e not in flushing}
            merged = {e: len(d) for e, d in flushing.items()}
            merged.update((e, len(d)) for e, d in active.items())
            return merged

    def mark_flushing_counted(self) -> None:
        with self._lock:
            self._flushing.counted = True

    def drop_ledger(self, ledger_id: int) -> None:
        """Forget a deleted ledger's cached entries in both halves."""
        with self._lock:
            self._active.drop(ledger_id)
            self._flushing.drop(ledger_id)

    @property
    def active_bytes(self) -> int:
        return self._active.bytes

    @property
    def total_bytes(self) -> int:
        return self._active.bytes + self._flushing.bytes

    def entry_count(self) -> int:
        """Entries in both halves (a scrape's count: one pass over the ledgers)."""
        with self._lock:
            return sum(len(ledger) for half in (self._active, self._flushing)
                       for ledger in half.entries.values())

    def swap(self) -> int:
        """Make the active half the flushing one (checkpoint step 2); returns its bytes.

        The previous flushing half must have been cleared: one checkpoint at a time.
        """
        with self._lock:
            assert not self._flushing.entries, "swap() while a flush is still in progress"
            self._flushing, self._active = self._active, _Half()
            return self._flushing.bytes

    def flushing_runs(self) -> Iterator[tuple[int, list[tuple[int, bytes]]]]:
        """``flushing_chunks`` as (ledgerId, [(entryId, bytes), ...]) pairs."""
        for ledger_id, ids, datas in self.flushing_chunks():
            yield ledger_id, list(zip(ids, datas))

    def flushing_chunks(self) -> Iterator[tuple[int, list[int], list[bytes]]]:
        """The flushing half as (ledgerId, [entryId, ...], [bytes, ...]) runs, both
        ascending, a ledger's entries in runs of at most FLUSH_RUN_ENTRIES (checkpoint step
        3): built by C loops (map), not a Python step an entry.

        Bounded runs keep every C-level step of the checkpoint (sort, join, buffer copy)
        short: it holds the GIL throughout, and one ledger's whole half (100k entries, 100
        MiB) in one step stalled the event loop for ~0.6 s, and every add in flight with it."""
        half = self._flushing
        for ledger_id in sorted(half.entries):
            ledger = half.entries.get(ledger_id)
            if ledger is None:  # dropped by a delete while we iterate
                continue
            ids = sorted(ledger)  # ints, mostly in order already: a short sort
            for start in range(0, len(ids), FLUSH_RUN_ENTRIES):
                chunk = ids[start:start + FLUSH_RUN_ENTRIES]
                yield ledger_id, chunk, list(map(ledger.__getitem__, chunk))  # C loops

    def flushing_sorted(self) -> Iterator[tuple[int, int, bytes]]:
        """The flushing half in (ledgerId, entryId) order (checkpoint step 3)."""
        half = self._flushing
        for ledger_id in sorted(half.entries):
            ledger = half.entries.get(ledger_id)
            if ledger is None:  # dropped by a delete while we iterate
                continue
            for entry_id in sorted(ledger):
                data = ledger.get(entry_id)
                if data is not None:
                    yield ledger_id, entry_id, data

    def clear_flushing(self) -> None:
        with self._lock:
            old, self._flushing = self._flushing, _Half()
        # Freed outside the lock and a ledger slice at a time: adds wait on the lock, and
        # one dict of 100k entries freed in one C call holds the GIL for tens of ms.
        for ledger in old.entries.values():
            if len(ledger) <= FLUSH_RUN_ENTRIES:
                ledger.clear()
                continue
            ids = list(ledger)
            for start in range(0, len(ids), FLUSH_RUN_ENTRIES):
                collections.deque(map(ledger.__delitem__, ids[start:start + FLUSH_RUN_ENTRIES]),
                                  maxlen=0)
