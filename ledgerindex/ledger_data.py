"""BookKeeper's ``LedgerData`` with the bookie's extension field. docs/formats.md §7.2.

A pure format module (imports only ``dataclasses``), a minimal proto2 codec of its own: the
project does not depend on protobuf.

``LedgerData`` (DbLedgerStorageDataFormats.proto), fields written in number order, as
BookKeeper writes them, so every value starts with ``08``:
    tag  field            type            tag byte
    1    exists           required bool   08
    2    fenced           required bool   10
    3    masterKey        required bytes  1A
    4    explicitLac      optional bytes  22   (written when set)
    5    limbo            optional bool   28   (written when true)
    1000 bookie extension bytes           C2 3E (written by this bookie; BookKeeper skips it)

The bookie extension, a nested message, every field wire type 0 (varint):
    1  extension version, 1 (required)
    2  digest type (docs/formats.md §6.2); absent = 0, not known
    3  entries stored  \\ both present or both absent (absent = not known, K5)
    4  bytes stored    /
    5  ledger ids, repeated (the usage-pending key only)
    6  newest journal id this bookie created (the writer mark only)

Invariants:
    LD1. An absent extension means BookKeeper wrote (or rewrote) the value: digest type and
         usage counters are not known. BookKeeper's LightProto reader skips field 1000
         (wire type 2) and its writer drops it, so a record BookKeeper changed shows it.
    LD2. A field of the extension this code does not know, an extension version other than
         1, or a wire type other than the one listed, is corruption: the extension is ours
         and is never half understood.
    LD3. Decoding is bounded and whole: every length is checked before slicing, varints are
         at most 10 bytes and 64 bits, and the value is consumed to its last byte.
"""

from __future__ import annotations

import dataclasses

EXTENSION_FIELD = 1000
EXTENSION_VERSION = 1
EXTENSION_TAG = bytes.fromhex("c23e")  # (1000 << 3) | 2 as a varint
NOT_KNOWN = -1

_EXISTS, _FENCED, _MASTER_KEY, _EXPLICIT_LAC, _LIMBO = 1, 2, 3, 4, 5
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
_WIRE = {_EXISTS: _VARINT, _FENCED: _VARINT, _MASTER_KEY: _BYTES, _EXPLICIT_LAC: _BYTES,
         _LIMBO: _VARINT, EXTENSION_FIELD: _BYTES}
_NAMES = {_EXISTS: "exists", _FENCED: "fenced", _MASTER_KEY: "masterKey",
          _EXPLICIT_LAC: "explicitLac", _LIMBO: "limbo", EXTENSION_FIELD: "extension"}
_EXT_VERSION, _EXT_DIGEST, _EXT_ENTRIES, _EXT_BYTES, _EXT_IDS, _EXT_JOURNAL = 1, 2, 3, 4, 5, 6
_MAX_VARINT_BYTES = 10


class LedgerDataCorrupt(ValueError):
    """A value that is not a valid ``LedgerData`` (with a valid extension, LD2, LD3)."""


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerRecord:
    """The fields of one ``LedgerData`` value; ``extension`` False when it had none (LD1)."""

    exists: bool
    fenced: bool
    master_key: bytes
    explicit_lac: bytes | None = None
    limbo: bool = False
    extension: bool = True
    digest_type: int = 0
    entry_count: int = NOT_KNOWN
    byte_count: int = NOT_KNOWN
    ledger_ids: tuple[int, ...] = ()
    journal_id: int | None = None


def encode(record: LedgerRecord) -> bytes:
    """The value of ``record``: fields 1-5 as BookKeeper writes them, then the extension."""
    out = bytearray(b"\x08" + _varint(int(record.exists)) + b"\x10" + _varint(int(record.fenced)))
    out += _bytes_field(_MASTER_KEY, bytes(record.master_key))
    if record.explicit_lac is not None:
        out += _bytes_field(_EXPLICIT_LAC, bytes(record.explicit_lac))
    if record.limbo:
        out += b"\x28\x01"
    if record.extension:
        out += _bytes_field(EXTENSION_FIELD, _encode_extension(record))
    return bytes(out)


def _encode_extension(record: LedgerRecord) -> bytes:
    if (record.entry_count < 0 or record.byte_count < 0) and \
            (record.entry_count, record.byte_count) != (NOT_KNOWN, NOT_KNOWN):
        raise ValueError(f"usage counters ({record.entry_count}, {record.byte_count}) are "
                         f"neither both -1 nor both >= 0")
    out = bytearray(_varint_field(_EXT_VERSION, EXTENSION_VERSION))
    if record.digest_type:
        out += _varint_field(_EXT_DIGEST, record.digest_type)
    if record.entry_count >= 0:
        out += _varint_field(_EXT_ENTRIES, record.entry_count)
        out += _varint_field(_EXT_BYTES, record.byte_count)
    for ledger_id in record.ledger_ids:
        out += _varint_field(_EXT_IDS, ledger_id)
    if record.journal_id is not None:
        out += _varint_field(_EXT_JOURNAL, record.journal_id)
    return bytes(out)


def _varint(value: int) -> bytes:
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{value} does not fit an unsigned 64-bit varint")
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3 | _VARINT) + _varint(value)


def _bytes_field(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | _BYTES) + _varint(len(value)) + value


# --- decoding ---------------------------------------------------------------------------


def decode(data: bytes) -> LedgerRecord:
    """Decode a whole ``LedgerData`` value (LD3); unknown fields outside the extension are
    skipped as BookKeeper's reader skips them. Raises LedgerDataCorrupt."""
    data = bytes(data)
    fields: dict[int, int | bytes] = {}
    for number, wire, value, offset in _fields(data):
        expected = _WIRE.get(number)
        if expected is None:
            continue  # a field of a newer BookKeeper: skipped, as LightProto does
        if wire != expected:
            raise LedgerDataCorrupt(f"LedgerData field {_NAMES[number]} ({number}) at offset "
                                    f"{offset} has wire type {wire}, expected {expected}")
        if number == EXTENSION_FIELD and number in fields:
            raise LedgerDataCorrupt(f"LedgerData has a second extension at offset {offset}")
        fields[number] = value  # proto2: the last occurrence of a field wins
    for number in (_EXISTS, _FENCED, _MASTER_KEY):
        if number not in fields:
            raise LedgerDataCorrupt(f"LedgerData lacks required field {_NAMES[number]} "
                                    f"({number}): {excerpt(data)}")
    record = LedgerRecord(
        exists=bool(fields[_EXISTS]), fenced=bool(fields[_FENCED]),
        master_key=bytes(fields[_MASTER_KEY]), explicit_lac=fields.get(_EXPLICIT_LAC),
        limbo=bool(fields.get(_LIMBO, 0)), extension=False)
    extension = fields.get(EXTENSION_FIELD)
    if extension is None:
        return record
    return dataclasses.replace(record, extension=True, **_decode_extension(extension))


def _decode_extension(data: bytes) -> dict:
    values: dict[int, int] = {}
    ids: list[int] = []
    for number, wire, value, offset in _fields(data):
        if number not in (_EXT_VERSION, _EXT_DIGEST, _EXT_ENTRIES, _EXT_BYTES, _EXT_IDS,
                          _EXT_JOURNAL):
            raise LedgerDataCorrupt(f"bookie extension field {number} at offset {offset} is "
                                    f"not known (LD2): {excerpt(data)}")
        if wire != _VARINT:
            raise LedgerDataCorrupt(f"bookie extension field {number} at offset {offset} has "
                                    f"wire type {wire}, expected 0")
        if number == _EXT_IDS:
            ids.append(value)
        elif number in values:
            raise LedgerDataCorrupt(f"bookie extension field {number} appears twice")
        else:
            values[number] = value
    if values.get(_EXT_VERSION) != EXTENSION_VERSION:
        raise LedgerDataCorrupt(f"bookie extension version {values.get(_EXT_VERSION)} is not "
                                f"{EXTENSION_VERSION} (LD2)")
    if (_EXT_ENTRIES in values) != (_EXT_BYTES in values):
        raise LedgerDataCorrupt("bookie extension has one usage counter without the other")
    return {"digest_type": values.get(_EXT_DIGEST, 0),
            "entry_count": values.get(_EXT_ENTRIES, NOT_KNOWN),
            "byte_count": values.get(_EXT_BYTES, NOT_KNOWN),
            "ledger_ids": tuple(ids), "journal_id": values.get(_EXT_JOURNAL)}


def _fields(data: bytes):
    """(number, wire type, value, offset) of each field of ``data``, to its last byte."""
    offset = 0
    while offset < len(data):
        number, wire, value, next_offset = _read_field(data, offset)
        yield number, wire, value, offset
        offset = next_offset


def _read_varint(data: bytes, offset: int) -> tuple[int, int]:
    """(value, next offset) of the base-128 varint at ``offset``; at most 10 bytes (LD3)."""
    value = 0
    for index in range(_MAX_VARINT_BYTES):
        if offset + index >= len(data):
            raise LedgerDataCorrupt(f"LedgerData varint at offset {offset} runs past the end")
        byte = data[offset + index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            if value >> 64:
                raise LedgerDataCorrupt(f"LedgerData varint at offset {offset} exceeds 64 bits")
            return value, offset + index + 1
    raise LedgerDataCorrupt(f"LedgerData varint at offset {offset} is longer than 10 bytes")


def _read_field(data: bytes, offset: int) -> tuple[int, int, int | bytes, int]:
    tag, position = _read_varint(data, offset)
    number, wire = tag >> 3, tag & 7
    if number == 0:
        raise LedgerDataCorrupt(f"LedgerData field number 0 at offset {offset}")
    if wire == _VARINT:
        value, position = _read_varint(data, position)
        return number, wire, value, position
    if wire == _BYTES:
        length, position = _read_varint(data, position)
        if position + length > len(data):
            raise LedgerDataCorrupt(
                f"LedgerData field {number} at offset {offset}: length {length} runs past the "
                f"end of the {len(data)}-byte value")
        return number, wire, data[position:position + length], position + length
    # Fixed-width fields can only be unknown ones; skipped as LightProto skips them.
    width = {_FIXED64: 8, _FIXED32: 4}.get(wire)
    if width is None:
        raise LedgerDataCorrupt(
            f"LedgerData field {number} at offset {offset} has unsupported wire type {wire}")
    if position + width > len(data):
        raise LedgerDataCorrupt(f"LedgerData field {number} at offset {offset} runs past the end")
    return number, wire, data[position:position + width], position + width


def excerpt(data: bytes, limit: int = 48) -> str:
    """Hex of the first ``limit`` bytes, for error messages (values may be large)."""
    text = bytes(data[:limit]).hex()
    return text + ("…" if len(data) > limit else "") + f" ({len(data)} bytes)"
