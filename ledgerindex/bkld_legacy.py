"""The bookie's older ``ledgers`` value, the BKLD ``LedgerState`` struct (read only).

docs/formats.md §7.2 ("Older values"). Written by this project before the index became
BookKeeper's ``LedgerData`` with the bookie extension (ledgerindex/ledger_data.py); read at
start while an index is carried over (ledgerindex/index_upgrade.py), never written.

    offset  size  field
    0       4     magic b"BKLD" = 42 4B 4C 44
    4       1     version (u8): 1 (no usage trailer) or 2
    5       1     flags (u8): 0x01 exists, 0x02 fenced, 0x04 limbo, 0x08 explicit LAC present
    6       1     digest type (u8): 1 CRC32, 2 MAC, 3 CRC32C, 4 DUMMY; 0 = not known yet
    7       1     k = master key length (u8), normally 20
    8       k     master key
    8+k     4     n = explicit-LAC body length (u32, BE); 0 when flag 0x08 is clear
    12+k    n     explicit-LAC body
    12+k+n  8     entries stored (i64, BE), version 2 only; -1 = not known
    20+k+n  8     bytes stored (i64, BE), version 2 only; -1 = not known

K2: a value is exactly 12 + k + n bytes (version 1) or 28 + k + n (version 2), or it is
rejected whole. K3: ``42`` cannot start a ``LedgerData`` (it would be field 8, wire type 2).
"""

from __future__ import annotations

import struct

from ledgerindex.ledger_data import NOT_KNOWN, LedgerRecord, excerpt
from ledgerindex.ledger_data import LedgerDataCorrupt as LedgerStateCorrupt

#: magic, version, flags, digest type, master key length.
STATE_HEADER = struct.Struct(">4sBBBB")
assert STATE_HEADER.size == 8
STATE_LAC_LENGTH = struct.Struct(">I")
assert STATE_LAC_LENGTH.size == 4
STATE_MAGIC = b"BKLD"
STATE_VERSIONS_READ = (1, 2)
#: entries, bytes (version 2 trailer).
STATE_USAGE = struct.Struct(">qq")
assert STATE_USAGE.size == 16
FLAG_EXISTS = 0x01
FLAG_FENCED = 0x02
FLAG_LIMBO = 0x04
FLAG_EXPLICIT_LAC = 0x08
KNOWN_FLAGS = FLAG_EXISTS | FLAG_FENCED | FLAG_LIMBO | FLAG_EXPLICIT_LAC
MAX_DIGEST_TYPE = 4


def _check_usage(entries: int, size: int) -> None:
    if (entries < 0 or size < 0) and (entries, size) != (NOT_KNOWN, NOT_KNOWN):
        raise ValueError(f"usage counters ({entries}, {size}) are neither both -1 nor both >= 0")


def decode_bkld(data: bytes) -> LedgerRecord:
    """The fields of a BKLD value (K2, K4); LedgerStateCorrupt naming what is wrong."""
    data = bytes(data)
    if len(data) < STATE_HEADER.size + STATE_LAC_LENGTH.size:
        raise LedgerStateCorrupt(
            f"BKLD value of {len(data)} bytes is shorter than the 12-byte minimum: "
            f"{excerpt(data)}")
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
    entries = size = NOT_KNOWN
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
    return LedgerRecord(
        exists=bool(flags & FLAG_EXISTS), fenced=bool(flags & FLAG_FENCED),
        limbo=bool(flags & FLAG_LIMBO), digest_type=digest_type,
        master_key=data[STATE_HEADER.size:key_end],
        explicit_lac=data[body_start:body_end] if has_lac else None,
        entry_count=entries, byte_count=size)
