"""RocksDB keys and values of the ledger indexes. Implements docs/formats.md §7.

A pure format module: imports only ``struct``, ``dataclasses`` and the two value codecs
(``ledger_data``, ``bkld_legacy``), never opens a file.

``locations`` (docs/formats.md §7.1), integers big-endian:
    part    offset  size  field
    key     0       8     ledgerId (i64)
    key     8       8     entryId (i64)
    value   0       8     location (i64) = logId << 32 | pos (docs/formats.md §5.3); 0 = absent

``ledgers`` (docs/formats.md §7.2), keys i64 big-endian:
    key                         value
    L >= 0 (8 bytes)            a live ledger: BookKeeper's ``LedgerData``, with the bookie
                                extension (ledgerindex/ledger_data.py) when this bookie wrote it
    -0xB00D ‖ L (16 bytes)      the tombstone of deleted ledger L: ``LedgerData`` exists=false
    -0xB00C (8 bytes)           usage-pending key: marker with the ledger ids (K6)
    -0xB00E (8 bytes)           writer mark: marker with the newest journal id we created
    -0xB00F (8 bytes)           format key: marker; its presence means every value is new-form
    -0xEEFD (8 bytes)           BookKeeper's storage-state flags, never ours (M4)
A *marker* is a ``LedgerData`` with exists=false, fenced=false, masterKey="" and the
extension, so that BookKeeper's ``check-db-ledgers-index`` parses every value.
Older values of this project, BKLD ``LedgerState`` at L (tombstones there with exists=0) and a
raw usage-pending value (i64 ids), are read while the format key is absent
(ledgerindex/bkld_legacy.py, ledgerindex/index_upgrade.py).

Invariants:
    K1. Location keys sort bytewise as (ledgerId, entryId) for ids >= 0, so a ledger's entries
        are one contiguous key range and its last entry is one floor lookup.
    K2. A value is decoded whole or rejected: anything else raises ``LedgerStateCorrupt``
        naming what was wrong, never a partial state.
    K3. The first byte decides the format: ``08`` is ``LedgerData`` (field 1 first, as
        BookKeeper writes it), ``42`` is the older BKLD struct (it cannot start a
        ``LedgerData``: it would be field 8, wire type 2).
    K4. Decoders are bounded: every length is checked against the bytes left before slicing.
    K5. Usage counters are both -1 (not known: no extension, a rebuilt index, or a checkpoint
        that may have died between the index and the states) or both >= 0.
    K6. The usage-pending value names whole, valid ledger ids.
    K7. Every key BookKeeper's DbLedgerStorage parses (first 8 bytes >= 0) holds a value it
        reads, and a deleted ledger is absent there, which is BookKeeper's own state for it:
        BookKeeper must never take adds into a ledger we deleted (docs/formats.md §7.2).
"""

from __future__ import annotations

import dataclasses
import struct

import ledgerindex.bkld_legacy as bkld_legacy
import ledgerindex.ledger_data as ledger_data
from ledgerindex.ledger_data import LedgerRecord

LOCATION_KEY = struct.Struct(">qq")
assert LOCATION_KEY.size == 16
LOCATION_VALUE = struct.Struct(">q")
assert LOCATION_VALUE.size == 8
LEDGER_KEY = struct.Struct(">q")
assert LEDGER_KEY.size == 8
TOMBSTONE_KEY = struct.Struct(">qq")
assert TOMBSTONE_KEY.size == 16

USAGE_UNKNOWN = ledger_data.NOT_KNOWN
#: Largest digest type number of docs/formats.md §6.2 (DUMMY); 0 means "not known yet".
MAX_DIGEST_TYPE = 4
MAX_ID = 2**63 - 1
#: What the indexes can store, the one place the write path's accepted ranges come from
#: (an id the index cannot store must be refused before it is journaled, or every checkpoint
#: and every replay of it fails: docs/drills.md "Track record"). Ledger ids: any non-negative
#: i64. Entry ids: 0..2**63-2, since (L, 2**63-1) is the end of a ledger's key range (LO2 in
#: locations.py). A LAC is an entry id or -1 (none).
LEDGER_ID_MAX = MAX_ID
ENTRY_ID_MAX = MAX_ID - 1
LAC_MIN = -1
#: BookKeeper's storage-state flags key (docs/formats.md §7.2); not a ledger.
STORAGE_STATE_LEDGER_ID = -0xEEFD
#: The project's negative keys: never ledgers, and not BookKeeper's (it skips them, K7).
USAGE_PENDING_LEDGER_ID = -0xB00C
TOMBSTONE_PREFIX_ID = -0xB00D
WRITER_MARK_LEDGER_ID = -0xB00E
FORMAT_LEDGER_ID = -0xB00F
#: What a value was written by: this bookie now, BookKeeper (no extension), or this project
#: before the format key (BKLD).
FORM_OURS, FORM_BOOKKEEPER, FORM_BKLD = "ours", "bookkeeper", "bkld"

#: One exception for every malformed ``ledgers`` value, whatever its form (K2).
LedgerStateCorrupt = ledger_data.LedgerDataCorrupt


# --- locations --------------------------------------------------------------------------


def encode_location_key(ledger_id: int, entry_id: int) -> bytes:
    """The 16-byte ``locations`` key: ledgerId ‖ entryId, both i64 big-endian (K1)."""
    return LOCATION_KEY.pack(ledger_id, entry_id)


def decode_location_items(pairs: list[tuple[bytes, bytes]]) -> tuple:
    """(ledgerIds, entryIds, locations) of many ``locations`` (key, value) pairs at once: one
    join and one unpack, not two unpacks a pair (bulk readers: scrub). ValueError unless
    every key is 16 bytes and every value 8 (K1)."""
    n = len(pairs)
    blob = b"".join(part for pair in pairs for part in pair)
    if len(blob) != (LOCATION_KEY.size + LOCATION_VALUE.size) * n:
        raise ValueError("locations keys and values are not 16 and 8 bytes (docs/formats.md §7.1)")
    fields = struct.unpack(f">{3 * n}q", blob)
    return fields[0::3], fields[1::3], fields[2::3]


def decode_location_key(key: bytes) -> tuple[int, int]:
    """(ledgerId, entryId) of a ``locations`` key; ValueError unless it is 16 bytes."""
    if len(key) != LOCATION_KEY.size:
        raise ValueError(f"locations key of {len(key)} bytes, expected 16: {bytes(key).hex()}")
    return LOCATION_KEY.unpack(key)


def encode_location_value(location: int) -> bytes:
    """The 8-byte ``locations`` value: the location as i64 big-endian (docs/formats.md §5.3)."""
    return LOCATION_VALUE.pack(location)


def decode_location_value(value: bytes) -> int:
    """The location in a ``locations`` value; ValueError unless it is 8 bytes."""
    if len(value) != LOCATION_VALUE.size:
        raise ValueError(
            f"locations value of {len(value)} bytes, expected 8: {bytes(value).hex()}")
    return LOCATION_VALUE.unpack(value)[0]


# --- ledgers ----------------------------------------------------------------------------


def encode_ledger_key(ledger_id: int) -> bytes:
    """The 8-byte ``ledgers`` key: ledgerId as i64 big-endian."""
    return LEDGER_KEY.pack(ledger_id)


def decode_ledger_key(key: bytes) -> int:
    """The ledgerId of a ``ledgers`` key; ValueError unless it is 8 bytes."""
    if len(key) != LEDGER_KEY.size:
        raise ValueError(f"ledgers key of {len(key)} bytes, expected 8: {bytes(key).hex()}")
    return LEDGER_KEY.unpack(key)[0]


def encode_tombstone_key(ledger_id: int) -> bytes:
    """The 16-byte key of ledger ``ledger_id``'s tombstone: -0xB00D ‖ L (K7)."""
    return TOMBSTONE_KEY.pack(TOMBSTONE_PREFIX_ID, ledger_id)


def decode_tombstone_key(key: bytes) -> int | None:
    """The ledger id of a tombstone key, None if ``key`` is not one."""
    if len(key) != TOMBSTONE_KEY.size:
        return None
    prefix, ledger_id = TOMBSTONE_KEY.unpack(key)
    return ledger_id if prefix == TOMBSTONE_PREFIX_ID and ledger_id >= 0 else None


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerState:
    """What the bookie keeps about one ledger (BookKeeper's ``LedgerData``, plus digest type).

    ``exists = False`` is a tombstone: the ledger was deleted, and the record stays (under
    its tombstone key, K7) so that replay never re-creates it from older journal records
    (docs/design.md §1.3).
    ``digest_type`` is a ``bookie.entry.DigestType`` number, 0 while not known (docs/formats.md §9.4).
    ``explicit_lac`` is the raw explicit-LAC body (docs/formats.md §6.4), None if never set.
    """

    exists: bool = True
    fenced: bool = False
    limbo: bool = False
    digest_type: int = 0
    master_key: bytes = b""
    explicit_lac: bytes | None = None
    #: Entries and bytes stored (K5); -1 while not known, recounted from the index then.
    entry_count: int = USAGE_UNKNOWN
    byte_count: int = USAGE_UNKNOWN

    @property
    def usage_known(self) -> bool:
        return self.entry_count >= 0

    def with_(self, **changes) -> "LedgerState":
        """A copy with ``changes`` applied (the state is frozen, so it can be shared)."""
        return dataclasses.replace(self, **changes)



def encode_ledger_state(state: LedgerState) -> bytes:
    """The ``LedgerData`` value of ``state`` with the bookie extension (docs/formats.md §7.2)."""
    if not 0 <= state.digest_type <= MAX_DIGEST_TYPE:
        raise ValueError(f"digest type {state.digest_type} is not 0..{MAX_DIGEST_TYPE}")
    return ledger_data.encode(LedgerRecord(
        exists=state.exists, fenced=state.fenced, master_key=bytes(state.master_key),
        explicit_lac=state.explicit_lac, limbo=state.limbo, digest_type=state.digest_type,
        entry_count=state.entry_count, byte_count=state.byte_count))


def decode_ledger_value(data: bytes) -> tuple[LedgerState, str]:
    """(state, form) of a ``ledgers`` value (K2, K3): form is FORM_OURS, FORM_BOOKKEEPER (no
    extension: digest type and usage not known) or FORM_BKLD. LedgerStateCorrupt otherwise."""
    data = bytes(data)
    if not data:
        raise LedgerStateCorrupt("empty ledger state value")
    if data[0] == 0x42:
        return _state_of(bkld_legacy.decode_bkld(data)), FORM_BKLD
    if data[0] != 0x08:
        raise LedgerStateCorrupt(
            f"ledger state value starts with byte {data[0]:02x}, neither 08 (LedgerData) nor "
            f"42 (BKLD): {ledger_data.excerpt(data)}")
    record = ledger_data.decode(data)
    if record.ledger_ids or record.journal_id is not None:
        raise LedgerStateCorrupt("a ledger's value carries marker fields (ids, journal id)")
    if record.digest_type > MAX_DIGEST_TYPE:
        raise LedgerStateCorrupt(f"digest type {record.digest_type} is not 0..{MAX_DIGEST_TYPE}")
    return _state_of(record), FORM_OURS if record.extension else FORM_BOOKKEEPER


def decode_ledger_state(data: bytes) -> LedgerState:
    """The state of a ``ledgers`` value in any form (``decode_ledger_value``)."""
    return decode_ledger_value(data)[0]


def _state_of(record: LedgerRecord) -> LedgerState:
    return LedgerState(
        exists=record.exists, fenced=record.fenced, limbo=record.limbo,
        digest_type=record.digest_type, master_key=bytes(record.master_key),
        explicit_lac=None if record.explicit_lac is None else bytes(record.explicit_lac),
        entry_count=record.entry_count, byte_count=record.byte_count)


# --- markers: the usage-pending key, the writer mark, the format key ----------------------


def encode_marker(ledger_ids=(), journal_id: int | None = None) -> bytes:
    """A marker value: ``LedgerData`` exists=false, no key, with the extension (K7)."""
    return ledger_data.encode(LedgerRecord(
        exists=False, fenced=False, master_key=b"", ledger_ids=tuple(ledger_ids),
        journal_id=journal_id))


def decode_marker(data: bytes) -> LedgerRecord:
    """The fields of a marker value; LedgerStateCorrupt unless it is one."""
    data = bytes(data)
    record = ledger_data.decode(data) if data[:1] == b"\x08" else None
    if record is None or record.exists or not record.extension:
        raise LedgerStateCorrupt(f"not a marker value: {ledger_data.excerpt(data)}")
    return record


def encode_usage_pending(ledger_ids) -> bytes:
    """The usage-pending value (K6): a marker naming the ids, ascending."""
    ids = sorted(set(ledger_ids))
    for ledger_id in ids:
        if not 0 <= ledger_id <= MAX_ID:
            raise ValueError(f"ledger id {ledger_id} is not in 0..2**63-1")
    return encode_marker(ledger_ids=ids)


def decode_usage_pending(data: bytes, *, raw_allowed: bool = False) -> list[int]:
    """The ids of a usage-pending value (K6); with ``raw_allowed`` (no format key yet) also
    the older raw form, i64 BE ids. LedgerStateCorrupt if it is neither."""
    data = bytes(data)
    if raw_allowed and (not data or data[0] != 0x08):
        return _decode_raw_pending(data)
    ids = list(decode_marker(data).ledger_ids)
    if any(i > MAX_ID for i in ids):
        raise LedgerStateCorrupt(f"usage-pending value holds an id above 2**63-1: {ids}")
    return ids


def _decode_raw_pending(data: bytes) -> list[int]:
    if len(data) % LEDGER_KEY.size:
        raise LedgerStateCorrupt(
            f"usage-pending value of {len(data)} bytes is not a whole number of i64 ids")
    ids = list(struct.unpack(f">{len(data) // LEDGER_KEY.size}q", data))
    if any(i < 0 for i in ids):
        raise LedgerStateCorrupt(
            f"usage-pending value holds a negative id: {ledger_data.excerpt(data)}")
    return ids
