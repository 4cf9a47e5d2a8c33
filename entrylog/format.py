"""BKLO entry logs. Implements docs/formats.md, "Entry log".

Byte layout, integers big-endian:
    offset  size   field
    0       4      magic b"BKLO"
    4       4      header version; 1 = the log may end with a ledgersMap
    8       8      ledgersMap offset; 0 while the log is active
    16      4      ledger count in the ledgersMap; 0 while the log is active
    20      1004   zeros
    1024    ...    entries: i32 size | size bytes, starting ledgerId, entryId
    ...            on roll: ledgersMap batches, framed as entries of ledgerId -1

ledgersMap batch (docs/formats.md §5.4), at most 10,000 ledgers each, ascending ledger id:
    0       4      batchLen (i32) = 20 + 16 * n, the bytes after this field
    4       8      -1 (INVALID_LID)
    12      8      -2 (LEDGERS_MAP_ENTRY_ID)
    20      4      n (i32), 1..10000
    24      16 n   n x (ledgerId i64, totalBytes i64); totalBytes = sum of (size + 4)

Location (docs/formats.md §5.3): (logId << 32) | pos, pos = offset of the entry's ledgerId, so
the size field is at pos - 4 and a real location is never 0.

lastId (docs/formats.md §5.7): the last allocated log id as lowercase hex, then "\\n".

Invariants:
    E1. Bytes 8..20 are rewritten only after the ledgersMap is fsynced, so a non-zero
        offset always points at a whole trailer.
    E2. A log with offset 0 is read by scanning, which stops at the first short or
        zero-size entry (where the writer stopped) and reports that offset. Zero or
        negative sizes followed by more records are skipped a byte at a time, as
        BookKeeper's scanEntryLog does, with a warning.
    E3. Every record is at least 16 bytes (ledgerId, entryId); a size of 1..15 is
        corruption, never a torn tail.
    E4. pos stays below 2**32: logs roll at 1 GiB at most.

Versions:
    0  no ledgersMap (read only)
    1  ledgersMap trailer (written)

Pure: no file is opened here (docs/design.md §5 rule 6).
"""

from __future__ import annotations

import dataclasses
import struct

MAGIC = b"BKLO"
HEADER_SIZE = 1024
HEADER_VERSION = 1
HEADER_VERSION_V0 = 0
HEADER = struct.Struct(">4siqi1004x")
assert HEADER.size == HEADER_SIZE

#: Bytes 8..19 of the header, rewritten in place when the log is finalized (E1).
HEADER_PATCH_OFFSET = 8
HEADER_PATCH = struct.Struct(">qi")
assert HEADER_PATCH.size == 12

INVALID_LID = -1
LEDGERS_MAP_ENTRY_ID = -2
LEDGERS_MAP_MAX_BATCH_SIZE = 10000
MIN_ENTRY_SIZE = 16

SIZE = struct.Struct(">i")
#: A record's size followed by the entry's ledgerId and entryId: one unpack per record.
RECORD_HEAD = struct.Struct(">iqq")
assert RECORD_HEAD.size == 20
MAP_BATCH_HEAD = struct.Struct(">iqqi")
assert MAP_BATCH_HEAD.size == 24
MAP_PAIR = struct.Struct(">qq")
#: batchLen counts the ids and n (20 bytes) and the pairs, not the batchLen field itself.
MAP_BATCH_FIXED = MAP_BATCH_HEAD.size - SIZE.size
MAP_BATCH_LEN_MAX = MAP_BATCH_FIXED + MAP_PAIR.size * LEDGERS_MAP_MAX_BATCH_SIZE

MAX_LOG_ID = 2**31 - 1
MAX_POS = 2**32 - 1
#: BookKeeper's default and maximum logSizeLimit (E4).
LOG_SIZE_LIMIT_MAX = 1024 * 1024 * 1024

LOG_SUFFIX = ".log"
COMPACTING_SUFFIX = ".log.compacting"
LAST_ID_NAME = "lastId"
LAST_ID_TMP_NAME = "lastId.tmp"
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


@dataclasses.dataclass(frozen=True)
class LogHeader:
    magic: bytes
    version: int
    map_offset: int
    ledgers_count: int

    @property
    def has_ledgers_map(self) -> bool:
        """Whether the index path applies (docs/formats.md §5.6): version 1, offset and count set."""
        return self.version >= 1 and self.map_offset > 0 and self.ledgers_count > 0


def encode_header(version: int = HEADER_VERSION, map_offset: int = 0,
                  ledgers_count: int = 0) -> bytes:
    return HEADER.pack(MAGIC, version, map_offset, ledgers_count)


def decode_header(data) -> LogHeader:
    """Decode the first 1024 bytes of a log. Checks nothing: see ``header_problem``."""
    magic, version, map_offset, ledgers_count = HEADER.unpack_from(data, 0)
    return LogHeader(magic, version, map_offset, ledgers_count)


def header_problem(data) -> str | None:
    """Why the first bytes of a log are corrupt (docs/formats.md §5.6, "Magic and version").

    A file of 8 bytes or more whose first 8 bytes are not zero must carry magic BKLO and
    version 0 or 1. Zeros are an allocated, never written header (A1), read by scanning.
    """
    if len(data) < 8 or bytes(data[:8]) == bytes(8):
        return None
    magic = bytes(data[:4])
    if magic != MAGIC:
        return f"magic {magic.hex()} is not BKLO (424b4c4f)"
    version = SIZE.unpack_from(data, 4)[0]
    if version not in (HEADER_VERSION_V0, HEADER_VERSION):
        return f"header version {version} is not 0 or 1"
    return None


def encode_header_patch(map_offset: int, ledgers_count: int) -> bytes:
    """Bytes 8..19 of a finalized header: ledgersMap offset and ledger count (E1)."""
    assert map_offset >= HEADER_SIZE and ledgers_count > 0
    return HEADER_PATCH.pack(map_offset, ledgers_count)


def make_location(log_id: int, pos: int) -> int:
    assert 0 <= log_id <= MAX_LOG_ID, log_id
    assert HEADER_SIZE + SIZE.size <= pos <= MAX_POS, pos  # E4; 0 stays "absent"
    return (log_id << 32) | pos


def split_location(location: int) -> tuple[int, int]:
    """(logId, pos) of a location; pos is the entry's first byte, its size is at pos - 4."""
    return location >> 32, location & 0xFFFFFFFF


def encode_ledgers_map(totals: dict[int, int]) -> bytes:
    """The ledgersMap trailer: batches of at most 10,000 ledgers in ascending id order."""
    ledger_ids = sorted(totals)
    parts = []
    for start in range(0, len(ledger_ids), LEDGERS_MAP_MAX_BATCH_SIZE):
        batch = ledger_ids[start:start + LEDGERS_MAP_MAX_BATCH_SIZE]
        n = len(batch)
        parts.append(MAP_BATCH_HEAD.pack(
            MAP_BATCH_FIXED + MAP_PAIR.size * n, INVALID_LID, LEDGERS_MAP_ENTRY_ID, n))
        pairs = []
        for ledger_id in batch:
            assert ledger_id >= 0 and totals[ledger_id] > 0, (ledger_id, totals[ledger_id])
            pairs.append(ledger_id)
            pairs.append(totals[ledger_id])
        parts.append(struct.pack(f">{2 * n}q", *pairs))
    return b"".join(parts)


def decode_ledgers_map_batch(data, offset: int = 0) -> tuple[list[tuple[int, int]], int]:
    """One batch starting at ``offset`` (its batchLen field): (pairs, offset after it).

    ``data`` must hold the whole batch. Raises ValueError naming what is wrong, with the
    rules of BookKeeper's extractEntryLogMetadataFromIndex (docs/formats.md §5.6 index path).
    """
    if len(data) - offset < MAP_BATCH_HEAD.size:
        raise ValueError(f"ledgersMap batch at {offset} is shorter than its 24-byte head")
    batch_len, ledger_id, entry_id, n = MAP_BATCH_HEAD.unpack_from(data, offset)
    if not MAP_BATCH_FIXED <= batch_len <= MAP_BATCH_LEN_MAX:
        raise ValueError(f"ledgersMap batchLen {batch_len} is out of range")
    if ledger_id != INVALID_LID or entry_id != LEDGERS_MAP_ENTRY_ID:
        raise ValueError(f"ledgersMap batch ids are {ledger_id}/{entry_id}, not -1/-2")
    if not 0 <= n <= LEDGERS_MAP_MAX_BATCH_SIZE or batch_len != MAP_BATCH_FIXED + 16 * n:
        raise ValueError(f"ledgersMap batchLen {batch_len} does not match {n} ledgers")
    end = offset + SIZE.size + batch_len
    if len(data) < end:
        raise ValueError(f"ledgersMap batch at {offset} ends past the data ({end})")
    values = struct.unpack_from(f">{2 * n}q", data, offset + MAP_BATCH_HEAD.size)
    return list(zip(values[0::2], values[1::2])), end


def log_file_name(log_id: int) -> str:
    """``<hex id>.log``, lowercase, no padding (docs/formats.md §1, §2)."""
    assert 0 <= log_id <= MAX_LOG_ID, log_id
    return f"{log_id:x}{LOG_SUFFIX}"


def compacting_file_name(log_id: int) -> str:
    return f"{log_id:x}{COMPACTING_SUFFIX}"


def parse_hex_id(text: str) -> int | None:
    """A hex id (either case, no sign, no prefix, no underscores), or None."""
    if not text or any(ch not in _HEX_DIGITS for ch in text):
        return None
    return int(text, 16)


def parse_log_id(name: str) -> int | None:
    """The id of a file named like ``^[0-9a-fA-F]+\\.log$`` (LedgerDirUtil), else None."""
    if not name.endswith(LOG_SUFFIX):
        return None
    return parse_hex_id(name[:-len(LOG_SUFFIX)])


def encode_last_id(log_id: int) -> bytes:
    assert 0 <= log_id <= MAX_LOG_ID, log_id
    return f"{log_id:x}\n".encode("ascii")


def decode_last_id(data: bytes) -> int | None:
    """The first line of a lastId file parsed as base 16, or None if it does not parse."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    line = text.split("\n", 1)[0].strip()
    return parse_hex_id(line)


class Oversize:
    """What a read with a byte limit gets for an entry larger than it: the entry's size,
    not its bytes (api/server/bk_budget.py PB7: a read in progress holds no more than it
    reserved; the reader re-reads it at its size when that fits)."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    def __repr__(self) -> str:
        return f"Oversize({self.size})"

    def __eq__(self, other) -> bool:
        return other.__class__ is Oversize and other.size == self.size

    __hash__ = None  # type: ignore[assignment]
