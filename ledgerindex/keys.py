"""RocksDB keys and values of the ledger indexes. Implements docs/formats.md §7.

A pure format module: imports only ``struct`` and ``dataclasses``, never opens a file.

``locations`` (docs/formats.md §7.1), integers big-endian:
    part    offset  size  field
    key     0       8     ledgerId (i64)
    key     8       8     entryId (i64)
    value   0       8     location (i64) = logId << 32 | pos (docs/formats.md §5.3); 0 = absent

``ledgers`` (docs/formats.md §7.2): key = ledgerId (i64, 8 bytes BE). Negative keys are not ledgers
(BookKeeper keeps storage-state flags under -0xeefd = ``FF FF FF FF FF FF 11 03``).
Value, the project's ``LedgerState`` struct (written):
    offset  size  field
    0       4     magic b"BKLD" = 42 4B 4C 44
    4       1     version (u8) = 2 (1 is read: no usage trailer, usage not known)
    5       1     flags (u8): 0x01 exists, 0x02 fenced, 0x04 limbo, 0x08 explicit LAC present
    6       1     digest type (u8): 1 CRC32, 2 MAC, 3 CRC32C, 4 DUMMY; 0 = not known yet
    7       1     k = master key length (u8), normally 20
    8       k     master key, SHA1("ledger" || password) (docs/formats.md §6.3)
    8+k     4     n = explicit-LAC body length (u32, BE); 0 when flag 0x08 is clear
    12+k    n     explicit-LAC body (docs/formats.md §6.4)
    12+k+n  8     entries stored (i64, BE), version 2 only; -1 = not known (K5)
    20+k+n  8     bytes stored (i64, BE), sum of entry lengths, version 2 only; -1 = not known
Usage-pending key (the project's, version 2): key = ``USAGE_PENDING_LEDGER_ID`` (-0xB00C, a
negative key, so BookKeeper and M4 never read it as a ledger), value = the ledger ids (i64 BE
each, ascending) whose usage counters a checkpoint was changing when it wrote the key (K6).
Or Apache BookKeeper's proto2 ``LedgerData`` (read only), fields in number order:
    tag  field            type            tag byte
    1    exists           required bool   08
    2    fenced           required bool   10
    3    masterKey        required bytes  1A
    4    explicitLac      optional bytes  22
    5    limbo            optional bool   28

Invariants:
    K1. Location keys sort bytewise as (ledgerId, entryId) for ids >= 0, so a ledger's entries
        are one contiguous key range and its last entry is one floor lookup.
    K2. A value is decoded whole or rejected: a value is ``BKLD`` v1 exactly 12 + k + n bytes
        long, or a ``LedgerData`` consumed to its last byte. Anything else raises
        ``LedgerStateCorrupt`` naming what was wrong, never a partial state.
    K3. The first byte decides the format: ``42`` cannot start a ``LedgerData`` (it would be
        field 8, wire type 2) and BookKeeper's values start with ``08`` (field 1).
    K4. Decoders are bounded: every length is checked against the bytes left before slicing.
    K5. Usage counters are both -1 (not known: version 1, ``LedgerData``, a rebuilt index, or
        a checkpoint that may have died between the index and the states) or both >= 0.
    K6. The usage-pending value is a whole number of ids, each a valid ledger id.

Versions:
    1  BKLD LedgerState without usage counters (read)
    2  BKLD LedgerState with usage counters (written; ledger info in O(1): docs/formats.md §7.2)
    -  protobuf LedgerData of Apache BookKeeper's DbLedgerStorage (read; rewritten as BKLD on
       the ledger's next state write)
"""

from __future__ import annotations

import dataclasses
import struct

LOCATION_KEY = struct.Struct(">qq")
assert LOCATION_KEY.size == 16
LOCATION_VALUE = struct.Struct(">q")
assert LOCATION_VALUE.size == 8
LEDGER_KEY = struct.Struct(">q")
assert LEDGER_KEY.size == 8

#: magic, version, flags, digest type, master key length.
STATE_HEADER = struct.Struct(">4sBBBB")
assert STATE_HEADER.size == 8
STATE_LAC_LENGTH = struct.Struct(">I")
assert STATE_LAC_LENGTH.size == 4

STATE_MAGIC = b"BKLD"
STATE_VERSION = 2
STATE_VERSIONS_READ = (1, 2)
#: entries, bytes (version 2 trailer, K5).
STATE_USAGE = struct.Struct(">qq")
assert STATE_USAGE.size == 16
USAGE_UNKNOWN = -1
FLAG_EXISTS = 0x01
FLAG_FENCED = 0x02
FLAG_LIMBO = 0x04
FLAG_EXPLICIT_LAC = 0x08
KNOWN_FLAGS = FLAG_EXISTS | FLAG_FENCED | FLAG_LIMBO | FLAG_EXPLICIT_LAC

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
#: The project's usage-pending key (K6); negative, so never a ledger, and not BookKeeper's.
USAGE_PENDING_LEDGER_ID = -0xB00C

# LedgerData field numbers (DbLedgerStorageDataFormats.proto).
_PB_EXISTS, _PB_FENCED, _PB_MASTER_KEY, _PB_EXPLICIT_LAC, _PB_LIMBO = 1, 2, 3, 4, 5
_PB_VARINT, _PB_FIXED64, _PB_BYTES, _PB_FIXED32 = 0, 1, 2, 5
_PB_FIELD_WIRE = {_PB_EXISTS: _PB_VARINT, _PB_FENCED: _PB_VARINT, _PB_MASTER_KEY: _PB_BYTES,
                  _PB_EXPLICIT_LAC: _PB_BYTES, _PB_LIMBO: _PB_VARINT}
_PB_NAMES = {_PB_EXISTS: "exists", _PB_FENCED: "fenced", _PB_MASTER_KEY: "masterKey",
             _PB_EXPLICIT_LAC: "explicitLac", _PB_LIMBO: "limbo"}
_PB_MAX_VARINT_BYTES = 10


class LedgerStateCorrupt(ValueError):
    """A ``ledgers`` value that is neither a valid BKLD struct nor a ``LedgerData`` (K2).

    The message names the rule broken and the values found; ``ledgers.py`` adds the database
    path and the ledger id.
    """


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


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerState:
    """What the bookie keeps about one ledger (BookKeeper's ``LedgerData``, plus digest type).

    ``exists = False`` is a tombstone: the ledger was deleted, and the record stays so that
    replay never re-creates it from older journal records (docs/design.md §1.3).
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
    """The BKLD version 2 value of ``state`` (docs/formats.md §7.2 plus the usage trailer)."""
    _check_usage(state.entry_count, state.byte_count)
    if not 0 <= state.digest_type <= MAX_DIGEST_TYPE:
        raise ValueError(f"digest type {state.digest_type} is not 0..{MAX_DIGEST_TYPE}")
    if len(state.master_key) > 0xFF:
        raise ValueError(f"master key of {len(state.master_key)} bytes does not fit a u8 length")
    flags = ((FLAG_EXISTS if state.exists else 0) | (FLAG_FENCED if state.fenced else 0)
             | (FLAG_LIMBO if state.limbo else 0))
    body = b""
    if state.explicit_lac is not None:
        flags |= FLAG_EXPLICIT_LAC
        body = bytes(state.explicit_lac)
        if len(body) > 0xFFFFFFFF:
            raise ValueError(f"explicit-LAC body of {len(body)} bytes does not fit a u32 length")
    key = bytes(state.master_key)
    return b"".join((
        STATE_HEADER.pack(STATE_MAGIC, STATE_VERSION, flags, state.digest_type, len(key)),
        key, STATE_LAC_LENGTH.pack(len(body)), body,
        STATE_USAGE.pack(state.entry_count, state.byte_count)))


def _check_usage(entries: int, size: int) -> None:
    if (entries < 0 or size < 0) and (entries, size) != (USAGE_UNKNOWN, USAGE_UNKNOWN):
        raise ValueError(f"usage counters ({entries}, {size}) are neither both -1 nor both >= 0")


def encode_usage_pending(ledger_ids) -> bytes:
    """The usage-pending value (K6): the ids, ascending, i64 BE each."""
    ids = sorted(set(ledger_ids))
    for ledger_id in ids:
        if not 0 <= ledger_id <= MAX_ID:
            raise ValueError(f"ledger id {ledger_id} is not in 0..2**63-1")
    return struct.pack(f">{len(ids)}q", *ids)


def decode_usage_pending(data: bytes) -> list[int]:
    """The ids of a usage-pending value (K6); LedgerStateCorrupt if it is not one."""
    data = bytes(data)
    if len(data) % LEDGER_KEY.size:
        raise LedgerStateCorrupt(
            f"usage-pending value of {len(data)} bytes is not a whole number of i64 ids")
    ids = list(struct.unpack(f">{len(data) // LEDGER_KEY.size}q", data))
    if any(i < 0 for i in ids):
        raise LedgerStateCorrupt(f"usage-pending value holds a negative id: {_excerpt(data)}")
    return ids


def decode_ledger_state(data: bytes) -> LedgerState:
    """Decode a ``ledgers`` value, BKLD struct or BookKeeper ``LedgerData`` (K2, K3).

    Raises LedgerStateCorrupt naming what was wrong.
    """
    data = bytes(data)
    if not data:
        raise LedgerStateCorrupt("empty ledger state value")
    if data[0] == STATE_MAGIC[0]:
        return _decode_bkld(data)
    if data[0] == 0x08:
        return _decode_ledger_data(data)
    raise LedgerStateCorrupt(
        f"ledger state value starts with byte {data[0]:02x}, neither 42 (BKLD) nor 08 "
        f"(LedgerData): {_excerpt(data)}")


def _excerpt(data: bytes, limit: int = 48) -> str:
    """Hex of the first ``limit`` bytes, for error messages (values may be large)."""
    text = data[:limit].hex()
    return text + ("…" if len(data) > limit else "") + f" ({len(data)} bytes)"


def _decode_bkld(data: bytes) -> LedgerState:
    if len(data) < STATE_HEADER.size + STATE_LAC_LENGTH.size:
        raise LedgerStateCorrupt(
            f"BKLD value of {len(data)} bytes is shorter than the 12-byte minimum: "
            f"{_excerpt(data)}")
    magic, version, flags, digest_type, key_length = STATE_HEADER.unpack_from(data, 0)
    if magic != STATE_MAGIC:
        raise LedgerStateCorrupt(f"magic {magic.hex()} is not BKLD (424b4c44)")
    if version not in STATE_VERSIONS_READ:
        raise LedgerStateCorrupt(f"BKLD version {version} is not one of {STATE_VERSIONS_READ}")
    if flags & ~KNOWN_FLAGS:
        raise LedgerStateCorrupt(
            f"flags {flags:#04x} have unknown bits {flags & ~KNOWN_FLAGS:#04x}")
    if digest_type > MAX_DIGEST_TYPE:
        raise LedgerStateCorrupt(f"digest type {digest_type} is not 0..{MAX_DIGEST_TYPE}")
    key_end = STATE_HEADER.size + key_length
    if key_end + STATE_LAC_LENGTH.size > len(data):
        raise LedgerStateCorrupt(
            f"master key length {key_length} runs past the end of the {len(data)}-byte value")
    (lac_length,) = STATE_LAC_LENGTH.unpack_from(data, key_end)
    body_start = key_end + STATE_LAC_LENGTH.size
    if body_start + lac_length > len(data):
        raise LedgerStateCorrupt(
            f"explicit-LAC length {lac_length} at offset {key_end} runs past the end of the "
            f"{len(data)}-byte value")
    body_end = body_start + lac_length
    usage_end = body_end + (STATE_USAGE.size if version == 2 else 0)
    if usage_end > len(data):
        raise LedgerStateCorrupt(
            f"usage counters at offset {body_end} run past the end of the {len(data)}-byte value")
    if usage_end != len(data):
        raise LedgerStateCorrupt(
            f"{len(data) - usage_end} trailing bytes after offset {usage_end}")
    entries = size = USAGE_UNKNOWN
    if version == 2:
        entries, size = STATE_USAGE.unpack_from(data, body_end)
        try:
            _check_usage(entries, size)
        except ValueError as error:
            raise LedgerStateCorrupt(str(error)) from None
    has_lac = bool(flags & FLAG_EXPLICIT_LAC)
    if lac_length and not has_lac:
        raise LedgerStateCorrupt(
            f"explicit-LAC length {lac_length} with flag 0x08 (explicit LAC present) clear")
    return LedgerState(
        exists=bool(flags & FLAG_EXISTS), fenced=bool(flags & FLAG_FENCED),
        limbo=bool(flags & FLAG_LIMBO), digest_type=digest_type,
        master_key=data[STATE_HEADER.size:key_end],
        explicit_lac=data[body_start:body_end] if has_lac else None,
        entry_count=entries, byte_count=size)


# --- LedgerData: a minimal proto2 reader ------------------------------------------------


def _read_varint(data: bytes, offset: int) -> tuple[int, int]:
    """(value, next offset) of the base-128 varint at ``offset``; at most 10 bytes (K4)."""
    value = 0
    for index in range(_PB_MAX_VARINT_BYTES):
        if offset + index >= len(data):
            raise LedgerStateCorrupt(f"LedgerData varint at offset {offset} runs past the end")
        byte = data[offset + index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            if value >> 64:
                raise LedgerStateCorrupt(f"LedgerData varint at offset {offset} exceeds 64 bits")
            return value, offset + index + 1
    raise LedgerStateCorrupt(f"LedgerData varint at offset {offset} is longer than 10 bytes")


def _read_field(data: bytes, offset: int) -> tuple[int, int, int | bytes, int]:
    """(field number, wire type, value, next offset) of the field at ``offset``."""
    tag, position = _read_varint(data, offset)
    number, wire = tag >> 3, tag & 7
    if number == 0:
        raise LedgerStateCorrupt(f"LedgerData field number 0 at offset {offset}")
    if wire == _PB_VARINT:
        value, position = _read_varint(data, position)
        return number, wire, value, position
    if wire == _PB_BYTES:
        length, position = _read_varint(data, position)
        if position + length > len(data):
            raise LedgerStateCorrupt(
                f"LedgerData field {number} at offset {offset}: length {length} runs past the "
                f"end of the {len(data)}-byte value")
        return number, wire, data[position:position + length], position + length
    # Fixed-width fields are only ever unknown ones here; skip them like any proto reader.
    width = {_PB_FIXED64: 8, _PB_FIXED32: 4}.get(wire)
    if width is None:
        raise LedgerStateCorrupt(
            f"LedgerData field {number} at offset {offset} has unsupported wire type {wire}")
    if position + width > len(data):
        raise LedgerStateCorrupt(
            f"LedgerData field {number} at offset {offset} runs past the end")
    return number, wire, data[position:position + width], position + width


def _decode_ledger_data(data: bytes) -> LedgerState:
    """Apache BookKeeper's ``LedgerData`` (docs/formats.md §7.2); unknown fields are skipped."""
    fields: dict[int, int | bytes] = {}
    offset = 0
    while offset < len(data):
        number, wire, value, next_offset = _read_field(data, offset)
        expected_wire = _PB_FIELD_WIRE.get(number)
        if expected_wire is not None:
            if wire != expected_wire:
                raise LedgerStateCorrupt(
                    f"LedgerData field {_PB_NAMES[number]} ({number}) at offset {offset} has "
                    f"wire type {wire}, expected {expected_wire}")
            fields[number] = value  # proto2: the last occurrence of a field wins
        offset = next_offset
    for number in (_PB_EXISTS, _PB_FENCED, _PB_MASTER_KEY):
        if number not in fields:
            raise LedgerStateCorrupt(
                f"LedgerData lacks required field {_PB_NAMES[number]} ({number}): "
                f"{_excerpt(data)}")
    return LedgerState(
        exists=bool(fields[_PB_EXISTS]), fenced=bool(fields[_PB_FENCED]),
        limbo=bool(fields.get(_PB_LIMBO, 0)), digest_type=0,
        master_key=bytes(fields[_PB_MASTER_KEY]), explicit_lac=fields.get(_PB_EXPLICIT_LAC))
