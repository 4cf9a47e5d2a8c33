"""The ``locations`` index: (ledgerId, entryId) -> entry-log location (EntryLocationIndex).

Implements docs/formats.md §7.1 over ``ledgerindex.kv``; keys and values come from ``keys``.

Invariants:
    LO1. Locations are written only by the checkpoint, after the entry-log bytes they point at
        are fsynced, in ``sync=True`` batches (docs/design.md §3.3 R1, docs/formats.md §8.2 step 5):
        chunks of ``WRITE_CHUNK``, the last one synced, which syncs the WAL under all of
        them. A crash between chunks leaves some locations written, each pointing at synced
        bytes, and lastMark unmoved: replay re-adds every entry (checkpoint step 4!).
    LO2. Stored ids are in 0..2**63-2 and locations are > 0: entry id 2**63-1 is the end
        bound of a ledger's key range (last entry, delete), and location 0 means "absent".
    LO3. A ledger's keys are [(L, 0), (L, 2**63-1)): one contiguous range (K1), so the last
        entry is one floor lookup and a delete is one range tombstone.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from bookie.errors import IOFailure
from ledgerindex import keys
from ledgerindex.kv import KeyValueStore

#: Puts per RocksDB write. rocksdict holds the GIL through a write (measured: 62-117 ms for
#: one batch of 100k keys, the event loop stalled all along, and the adds' p99 with it); a
#: chunk of 2048 holds it ~1.3 ms, and the loop runs between chunks.
WRITE_CHUNK = 2048

#: The exclusive end of a ledger's entry ids in ``locations`` (LO3).
END_ENTRY_ID = keys.MAX_ID


class EntryLocationIndex:
    """Where each flushed entry lives in the entry logs.

    Thread-safety: safe for concurrent use (RocksDB is). The checkpoint thread writes
    (``add_batch``, ``delete_ledgers``); the read executor and the loop read.
    """

    def __init__(self, kv: KeyValueStore) -> None:
        self.kv = kv

    @classmethod
    def open(cls, path: str | os.PathLike, *, create: bool = True,
             read_only: bool = False) -> "EntryLocationIndex":
        """Open ``<ledger dir>/current/locations`` with LZ4 blocks, as BookKeeper does."""
        return cls(KeyValueStore.open(path, lz4=True, create=create, read_only=read_only))

    def get(self, ledger_id: int, entry_id: int) -> int | None:
        """The entry's location, or None if it has none (missing key or value 0, §7.1)."""
        if not (0 <= ledger_id <= keys.MAX_ID and 0 <= entry_id <= keys.MAX_ID):
            return None  # no such key can be stored (LO2); negative ids do not encode in order
        key = keys.encode_location_key(ledger_id, entry_id)
        value = self.kv.get(key)
        if value is None:
            return None
        location = self._decode(key, value)
        return location or None

    def add_batch(self, items: Iterable[tuple[int, int, int]], sync: bool = True) -> int:
        """Store (ledgerId, entryId, location) triples, in ``WRITE_CHUNK`` batches (LO1).

        Every triple is checked before anything is written (LO2). With ``sync``, durable
        when it returns: the last chunk's synced write syncs the WAL under the earlier ones.
        Not atomic as a whole: every caller tolerates a prefix (LO1; compaction's switch
        leaves the old log in place until its index moves are all durable). Returns the
        count written."""
        items = list(items)
        if not items:
            return 0
        ledgers, entries, locations = zip(*items)  # columns: the checks and keys are C loops
        if not (min(ledgers) >= 0 and max(ledgers) <= keys.LEDGER_ID_MAX and min(entries) >= 0
                and max(entries) <= keys.ENTRY_ID_MAX and min(locations) > 0):
            for ledger_id, entry_id, location in items:  # LO2: all checked first; name it
                _check_ids(ledger_id, entry_id)
                if location <= 0:
                    raise ValueError(
                        f"location {location} of entry {ledger_id}/{entry_id} is not positive")
        key, value = keys.LOCATION_KEY.pack, keys.LOCATION_VALUE.pack  # K1
        written = 0
        for start in range(0, len(items), WRITE_CHUNK):
            end = start + WRITE_CHUNK
            written += self.kv.write_batch(
                list(zip(map(key, ledgers[start:end], entries[start:end]),
                         map(value, locations[start:end]))),
                sync=sync and end >= len(items))
        return written

    def item_windows(self, size: int) -> Iterator[tuple]:
        """The whole index in key order, ``size`` entries at a time, decoded in bulk:
        (ledgerIds, entryIds, locations) per window (``keys.decode_location_items``)."""
        for chunk in self.kv.item_chunks(size):
            try:
                yield keys.decode_location_items(chunk)
            except ValueError as error:
                raise IOFailure(f"RocksDB {self.kv.path}: {error}") from error

    def last_entry_id(self, ledger_id: int) -> int | None:
        """The largest stored entry id of the ledger, or None (docs/formats.md §7.1).

        The floor of (L, 2**63-2), i.e. the largest key strictly below (L, 2**63-1); it
        belongs to L only if its first 8 bytes are L, else L has no entries here.
        """
        if not 0 <= ledger_id <= keys.MAX_ID:
            return None
        found = self.kv.floor(keys.encode_location_key(ledger_id, END_ENTRY_ID - 1))
        if found is None:
            return None
        key, _ = found
        found_ledger_id, entry_id = self._decode_key(key)
        return entry_id if found_ledger_id == ledger_id else None

    def entries(self, ledger_id: int, first_entry_id: int = 0) -> Iterator[tuple[int, int]]:
        """(entryId, location) of the ledger's stored entries from ``first_entry_id`` on."""
        _check_ids(ledger_id, first_entry_id)
        start, end = _ledger_range(ledger_id, first_entry_id)
        for key, value in self.kv.items(start, end):
            location = self._decode(key, value)
            if location:
                yield self._decode_key(key)[1], location

    def locate_range(self, ledger_id: int, first_entry_id: int,
                     last_entry_id: int) -> dict[int, int]:
        """{entryId: location} of the ledger's stored entries in first..last: one bounded
        iteration decoded in one unpack, where ``get`` per id costs a lookup each (a batch
        read's index step)."""
        _check_ids(ledger_id, first_entry_id)
        _check_ids(ledger_id, last_entry_id)
        pairs = self.kv.items_list(keys.encode_location_key(ledger_id, first_entry_id),
                                   keys.encode_location_key(ledger_id, last_entry_id + 1),
                                   last_entry_id - first_entry_id + 1)
        try:
            _, entry_ids, locations = keys.decode_location_items(pairs)
        except ValueError as error:
            raise IOFailure(f"RocksDB {self.kv.path}: {error}") from error
        return {e: location for e, location in zip(entry_ids, locations) if location}

    def find_in_log(self, ledger_ids: Iterable[int], log_id: int) -> tuple[int, int] | None:
        """The first (ledgerId, entryId) of these ledgers whose location is in ``log_id``, or
        None: the check before an entry log is deleted (GC's G7). It reads the ledgers'
        locations: nothing for deleted ledgers (their range is gone), one pass over a live
        ledger's entries for compaction, which has just read each of them anyway."""
        for ledger_id in ledger_ids:
            for entry_id, location in self.entries(ledger_id):
                if location >> 32 == log_id:
                    return ledger_id, entry_id
        return None

    def count_and_max(self, ledger_id: int) -> tuple[int, int | None]:
        """(number of stored entries, largest entry id or None): a full range scan."""
        count, last = 0, None
        for entry_id, _ in self.entries(ledger_id):
            count, last = count + 1, entry_id
        return count, last

    def delete_ledger(self, ledger_id: int, sync: bool = True) -> None:
        """Remove all of the ledger's locations with one range tombstone (docs/formats.md §7.1)."""
        self.delete_ledgers((ledger_id,), sync=sync)

    def delete_ledgers(self, ledger_ids: Iterable[int], sync: bool = True) -> int:
        """One batch of ``deleteRange((L, 0), (L, 2**63-1))`` per ledger (§8.2 step 9).

        BookKeeper's exact range, not [(L, 0), (L+1, 0)): L+1 overflows i64 at L = 2**63-1,
        and the keys BookKeeper's range leaves, (L, 2**63-1) and (L, negative id), are never
        written (LO2), so both implementations leave the same keys behind. Returns the count.
        """
        ranges = []
        for ledger_id in ledger_ids:
            _check_ids(ledger_id, 0)
            ranges.append(_ledger_range(ledger_id, 0))
        return self.kv.write_batch((), delete_ranges=ranges, sync=sync)

    def compact(self) -> None:
        """Compact the whole index, e.g. after many deletions (range tombstones cost reads)."""
        self.kv.compact_range()

    def close(self) -> None:
        self.kv.close()

    def _decode(self, key: bytes, value: bytes) -> int:
        try:
            return keys.decode_location_value(value)
        except ValueError as error:
            raise IOFailure(f"RocksDB {self.kv.path}: key {key.hex()}: {error}") from error

    def _decode_key(self, key: bytes) -> tuple[int, int]:
        try:
            return keys.decode_location_key(key)
        except ValueError as error:
            raise IOFailure(f"RocksDB {self.kv.path}: {error}") from error


def _check_ids(ledger_id: int, entry_id: int) -> None:
    if not 0 <= ledger_id <= keys.LEDGER_ID_MAX:
        raise ValueError(f"ledger id {ledger_id} is not in 0..{keys.LEDGER_ID_MAX}")
    if not 0 <= entry_id <= keys.ENTRY_ID_MAX:
        raise ValueError(f"entry id {entry_id} of ledger {ledger_id} is not in "
                         f"0..{keys.ENTRY_ID_MAX}")


def _ledger_range(ledger_id: int, first_entry_id: int) -> tuple[bytes, bytes]:
    return (keys.encode_location_key(ledger_id, first_entry_id),
            keys.encode_location_key(ledger_id, END_ENTRY_ID))
