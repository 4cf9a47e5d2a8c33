"""What crosses HTTP besides JSON: ids, headers and i32-framed entry batches. Pure.

Batch (docs/http-api.md, "A batch"), ``Content-Type: application/x-bookie-entries``, big-endian:
    offset  size  field
    0       4     length n (i32) of the first entry
    4       n     the entry bytes
    ...           further frames, nothing else

Invariant:
    B1. Every length is checked against the remaining bytes and ``max_entry_size`` before
        slicing; a zero or negative length is refused (a length of 0 is never data).
"""

from __future__ import annotations

import struct

from bookie.errors import BadRequest, TooLarge

BATCH_CONTENT_TYPE = "application/x-bookie-entries"
ENTRY_CONTENT_TYPE = "application/octet-stream"
_I32 = struct.Struct(">i")
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
#: A held range read's reply header: the last entry id the bookie examined.
LAST_SCANNED_HEADER = "X-Last-Scanned"
#: Largest ``step`` of a held range read (an ensemble is never this large).
READ_STEP_MAX = 1024
#: Largest batch body (single entries are checked against max_entry_size).
BATCH_BODY_MAX = 64 * 1024 * 1024


def parse_i64(text: str, what: str) -> int:
    """A decimal signed 64-bit integer, strictly: ASCII digits only (str.isdigit would let
    "²" through), no "+", spaces or underscores."""
    digits = text[1:] if text.startswith("-") else text
    if not (0 < len(digits) <= 19 and digits.isascii() and digits.isdigit()):
        raise BadRequest(f"{what} {text[:40]!r} is not a decimal 64-bit integer")
    value = int(text)
    if not I64_MIN <= value <= I64_MAX:
        raise BadRequest(f"{what} {text} is out of the signed 64-bit range")
    return value


def parse_ledger_id(text: str) -> int:
    value = parse_i64(text, "ledger id")
    if value < 0:
        raise BadRequest(f"ledger id {value} is negative")
    return value


def parse_entry_id(text: str, allow_last: bool = False) -> int:
    value = parse_i64(text, "entry id")
    if value < 0 and not (allow_last and value == -1):
        raise BadRequest(f"entry id {value} is negative" + (" (only -1, the last entry, is "
                                                            "allowed)" if allow_last else ""))
    return value


def parse_master_key(value: str | None) -> bytes:
    if value is None:
        raise BadRequest("X-Master-Key header is required")
    # Pairs of hex digits and nothing else: bytes.fromhex would also take spaces between
    # pairs, which the OpenAPI pattern (and any other client) does not expect.
    if len(value) % 2 or not _HEX_DIGITS.issuperset(value):
        raise BadRequest("X-Master-Key is not hex")
    key = bytes.fromhex(value)
    if not 1 <= len(key) <= 255:
        raise BadRequest(f"X-Master-Key of {len(key)} bytes (1..255 allowed; BookKeeper uses 20)")
    return key


def parse_flag(value: str | None, name: str) -> bool:
    if value is None:
        return False
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no", ""):
        return False
    raise BadRequest(f"{name} {value!r} is not true or false")


def parse_strict_flag(value: str, name: str) -> bool:
    """``true`` or ``false`` and nothing else (a query flag the OpenAPI names as an enum)."""
    if value not in ("true", "false"):
        raise BadRequest(f"{name} {value[:40]!r} is not true or false")
    return value == "true"


def parse_write_flags(value: str | None) -> bool:
    """Whether ``X-Write-Flags`` asks for deferred sync (the only flag there is)."""
    if value is None or not value.strip():
        return False
    flags = {f.strip().lower() for f in value.split(",") if f.strip()}
    unknown = flags - {"deferred-sync"}
    if unknown:
        raise BadRequest(f"X-Write-Flags has unknown flag(s) {', '.join(sorted(unknown))}")
    return True


def encode_batch(entries) -> bytes:
    parts = []
    for entry in entries:
        parts.append(_I32.pack(len(entry)))
        parts.append(entry)
    return b"".join(parts)


def decode_batch(body: bytes, max_entry_size: int, max_count: int) -> list[bytes]:
    """Split a batch body into entries (B1). Raises BadRequest or TooLarge naming the offset."""
    entries, offset, end = [], 0, len(body)
    view = memoryview(body)
    while offset < end:
        if end - offset < 4:
            raise BadRequest(f"batch: {end - offset} stray bytes at offset {offset}")
        (length,) = _I32.unpack_from(body, offset)
        if length <= 0:
            raise BadRequest(f"batch: frame length {length} at offset {offset}")
        if length > max_entry_size:
            raise TooLarge(f"batch: entry of {length} bytes at offset {offset} is over "
                           f"max_entry_size {max_entry_size}")
        if offset + 4 + length > end:
            raise BadRequest(f"batch: frame at offset {offset} runs past the body's end")
        if len(entries) >= max_count:
            raise BadRequest(f"batch: more than {max_count} entries")
        entries.append(bytes(view[offset + 4:offset + 4 + length]))
        offset += 4 + length
    if not entries:
        raise BadRequest("batch is empty")
    return entries
