"""BKLG journal files and the lastMark. Implements docs/formats.md §3 and §4; pure (JournalChannel).

Header, integers big-endian (docs/formats.md §3.1, §3.2):
    offset  size   field
    0       4      magic b"BKLG"
    4       4      version (i32): 4, 5 or 6; the project writes 6
    8       504    zeros (V5+ only; a V4 header is the first 8 bytes alone)
    512     ...    records (V5+); 8 in V4

Record framing (§3.3, §3.4); offsets within the payload, after the i32 len:
    len: i32      payload bytes, not counting these 4; 0xFFFFFF00 = padding (V5+)
    0       8     ledgerId (i64)
    8       8     entryId (i64): >= 0 data; negative: meta
    data          the entry exactly as the client framed it (len >= 24)
    -0x1000 key   16: keyLen (i32) = len - 20 | 20: master key         (V3+)
                  the project's form: keyLen = len - 21, then 1 byte: the ledger's digest
                  type (1..4), so replay can check a new ledger's entries (J4)
    -0x2000 fence nothing more; len = 16                                (V4+)
    -0x8000 LAC   16: bufLen (i32) = len - 20, >= 16 | 20: LAC body     (V6+)
    -0x4000       FORCE: a queue marker, never written

Padding record (§3.5, V5+):
    0       4     0xFFFFFF00 (PADDING_MASK)
    4       4     padLen (i32) >= 0
    8       padLen zeros
    Writer: P = position after the group, A = alignment, r = P mod A; r = 0: none;
    gap = A - r; gap >= 8: padLen = gap - 8; gap < 8: padLen = A - (8 - gap).

lastMark (§4.2), 16 bytes:
    0       8     journal id (i64)
    8       8     offset (i64): absolute, header included; the end of a synced group

Invariants:
    J1. After every group flush the position is a multiple of ALIGNMENT (V5+), so every V5+
        mark offset and every group boundary is 512-aligned; readers rely on it (reader.py).
    J2. Everything after the last record is zero up to the end of the file (§3.6): a reader
        stops at the first zero length word.
    J3. len is never 0 for a record and never below 16: every payload starts with two i64 ids.
    J4. A master-key record carries the ledger's digest type once the bookie knows it: the
        ledger state holding it reaches RocksDB only at a checkpoint, and without it replay
        could not tell a torn first entry of a new ledger from a good one. Apache
        BookKeeper's readers read keyLen bytes of key and ignore the byte after it.

Versions:
    1-3  read by Apache BookKeeper only; the project refuses to replay them (§3.1)
    4    8-byte header, fence records, no padding (read)
    5    512-byte header, padding records, aligned flushes (read)
    6    explicit-LAC records (written)
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import struct

MAGIC = b"BKLG"
V1, V2, V3, V4, V5, V6 = 1, 2, 3, 4, 5, 6
CURRENT_VERSION = V6
MIN_READ_VERSION = V4
HEADER_SIZE = 512  # SECTOR_SIZE in V5+, whatever the alignment
ALIGNMENT = 512  # journalAlignmentSize
V4_HEADER_SIZE = 8

PADDING_MASK = -0x100
METAENTRY_ID_LEDGER_KEY = -0x1000
METAENTRY_ID_FENCE_KEY = -0x2000
METAENTRY_ID_FORCE_LEDGER = -0x4000
METAENTRY_ID_LEDGER_EXPLICITLAC = -0x8000

#: Smallest payload: ledgerId and entryId (J3). A data record also holds the piggybacked LAC.
MIN_RECORD_LEN = 16
MIN_DATA_RECORD_LEN = 24
#: Meta records with an inner length: ledgerId, entryId, then keyLen or bufLen.
META_PREFIX_LEN = 20
MIN_EXPLICIT_LAC_BODY = 16
#: The digest-type byte after a master key (J4): ``LedgerMetadataFormat.DigestType`` 1..4.
KEY_TRAILER_LEN = 1
MAX_DIGEST_TYPE = 4

HEADER_PREFIX = struct.Struct(">4si")
assert HEADER_PREFIX.size == 8
V5_HEADER = struct.Struct(">4si504x")
assert V5_HEADER.size == HEADER_SIZE
LEN = struct.Struct(">i")
assert LEN.size == 4
#: len | ledgerId | entryId: the fixed part every record starts with.
RECORD_PREFIX = struct.Struct(">iqq")
assert RECORD_PREFIX.size == 20
#: len | ledgerId | entryId | keyLen or bufLen.
META_RECORD_PREFIX = struct.Struct(">iqqi")
assert META_RECORD_PREFIX.size == 24
PADDING_PREFIX = struct.Struct(">ii")
assert PADDING_PREFIX.size == 8
MARK = struct.Struct(">qq")
assert MARK.size == 16

#: The meta kinds' entry ids, each with the first version allowed to hold it (§3.4).
META_MIN_VERSION = {
    METAENTRY_ID_LEDGER_KEY: V3,
    METAENTRY_ID_FENCE_KEY: V4,
    METAENTRY_ID_LEDGER_EXPLICITLAC: V6,
}


def header_size(version: int) -> int:
    """Where records start: 512 in V5+, 8 in V2..V4, 0 in V1."""
    if version >= V5:
        return HEADER_SIZE
    return V4_HEADER_SIZE if version >= V2 else 0


def encode_header(version: int = CURRENT_VERSION) -> bytes:
    """The file header: 512 bytes for V5+, 8 for V2..V4, none for V1 (test fixtures)."""
    assert V1 <= version <= V6, version
    if version >= V5:
        return V5_HEADER.pack(MAGIC, version)
    if version >= V2:
        return HEADER_PREFIX.pack(MAGIC, version)
    return b""


def detect_version(first8: bytes) -> int | None:
    """The version per docs/formats.md §3.2 from the file's first (up to) 8 bytes.

    None is the project's *empty journal* (shorter than 8 bytes or 8 zero bytes: a crash
    during creation). Bytes without the magic are V1, as in Apache BookKeeper. The caller
    treats a version outside 1..6 as corruption.
    """
    if len(first8) < 8 or first8 == bytes(8):
        return None
    magic, version = HEADER_PREFIX.unpack_from(first8, 0)
    if magic != MAGIC:
        return V1
    return version


def foreign_reason(first: bytes, file_size: int) -> str | None:
    """Why a file without the magic is not a V1 journal either; None if it could be one.

    V1 has no header (detect_version calls any other bytes V1, as BookKeeper does), so a
    text file or an entry log would be "an unsupported V1 journal". A real V1 file starts
    with a data record: i32 len >= MIN_DATA_RECORD_LEN that fits the file, then a ledger id
    >= 0. Anything else is named as not a journal at all (docs/formats.md §3.2).
    """
    if first[:4] == MAGIC or len(first) < 12:
        return None
    length = LEN.unpack_from(first, 0)[0]
    ledger_id = int.from_bytes(first[4:12], "big", signed=True)
    if MIN_DATA_RECORD_LEN <= length <= file_size - LEN.size and ledger_id >= 0:
        return None
    return (f"no {MAGIC.decode()} header, and as a header-less V1 journal its first record "
            f"would be {length} bytes long in a {file_size}-byte file")


def encode_add(entry: bytes) -> bytes:
    """A data record: i32 len, then the entry as the client framed it."""
    assert len(entry) >= MIN_DATA_RECORD_LEN, len(entry)
    return LEN.pack(len(entry)) + entry


def encode_adds(entries) -> bytes:
    """``encode_add`` of each (entryId, entry) pair, joined: each entry copied once."""
    datas = [entry for _, entry in entries]
    if not datas:
        return b""
    sizes = list(map(len, datas))
    assert min(sizes) >= MIN_DATA_RECORD_LEN, min(sizes)
    return b"".join(itertools.chain.from_iterable(zip(map(LEN.pack, sizes), datas)))


def _meta_with_body(ledger_id: int, entry_id: int, body: bytes) -> bytes:
    assert ledger_id >= 0, ledger_id
    return META_RECORD_PREFIX.pack(META_PREFIX_LEN + len(body), ledger_id, entry_id,
                                   len(body)) + body


def encode_master_key(ledger_id: int, key: bytes, digest_type: int = 0) -> bytes:
    """A master-key record (BookieImpl.createMasterKeyEntry): len 20 + keyLen, and one more
    byte, the digest type, when it is known (J4; 0 = not known, BookKeeper's exact form)."""
    assert 0 <= digest_type <= MAX_DIGEST_TYPE, digest_type
    record = _meta_with_body(ledger_id, METAENTRY_ID_LEDGER_KEY, key)
    if not digest_type:
        return record
    return LEN.pack(META_PREFIX_LEN + len(key) + KEY_TRAILER_LEN) + record[4:] + \
        bytes((digest_type,))


def encode_fence(ledger_id: int) -> bytes:
    """A fence record (LedgerDescriptor.createLedgerFenceEntry): len 16."""
    assert ledger_id >= 0, ledger_id
    return RECORD_PREFIX.pack(MIN_RECORD_LEN, ledger_id, METAENTRY_ID_FENCE_KEY)


def encode_explicit_lac(ledger_id: int, body: bytes) -> bytes:
    """An explicit-LAC record (BookieImpl.createExplicitLACEntry): the body kept whole."""
    assert len(body) >= MIN_EXPLICIT_LAC_BODY, len(body)
    return _meta_with_body(ledger_id, METAENTRY_ID_LEDGER_EXPLICITLAC, body)


def padding_length(position: int, alignment: int = ALIGNMENT) -> int:
    """padLen of the padding record written at ``position``; -1 when none is needed."""
    assert alignment >= ALIGNMENT and alignment % ALIGNMENT == 0, alignment
    remainder = position % alignment
    if remainder == 0:
        return -1
    gap = alignment - remainder
    if gap >= PADDING_PREFIX.size:
        return gap - PADDING_PREFIX.size
    # The 8-byte prefix does not fit before the boundary: run to the one after (§3.5 rule 4).
    return alignment - (PADDING_PREFIX.size - gap)


def padding_record(position: int, alignment: int = ALIGNMENT) -> bytes:
    """The padding record that brings ``position`` to the next flush boundary (J1)."""
    pad_len = padding_length(position, alignment)
    if pad_len < 0:
        return b""
    return PADDING_PREFIX.pack(PADDING_MASK, pad_len) + bytes(pad_len)


@dataclasses.dataclass(frozen=True, order=True)
class LogMark:
    """A position in the journal sequence (BookKeeper's LogMark); compares by id, then offset."""

    journal_id: int
    offset: int

    def encode(self) -> bytes:
        return MARK.pack(self.journal_id, self.offset)

    @classmethod
    def decode(cls, data: bytes) -> "LogMark":
        """The mark in the first 16 bytes. Callers apply §4.4's rules for short or long files."""
        if len(data) < MARK.size:
            raise ValueError(f"a lastMark needs 16 bytes, got {len(data)}")
        journal_id, offset = MARK.unpack_from(data, 0)
        return cls(journal_id, offset)


class RecordKind(enum.Enum):
    DATA = "data"
    LEDGER_KEY = "ledger_key"
    FENCE = "fence"
    EXPLICIT_LAC = "explicit_lac"
    UNKNOWN_META = "unknown_meta"
    PADDING = "padding"  # only from JournalReader.scan(include_padding=True)


META_KINDS = {
    METAENTRY_ID_LEDGER_KEY: RecordKind.LEDGER_KEY,
    METAENTRY_ID_FENCE_KEY: RecordKind.FENCE,
    METAENTRY_ID_LEDGER_EXPLICITLAC: RecordKind.EXPLICIT_LAC,
}


@dataclasses.dataclass(frozen=True, slots=True)
class JournalRecord:
    """One record as found in a journal.

    offset: of the len field. size: 4 + len (padding: 8 + padLen).
    payload: DATA the whole entry; LEDGER_KEY the key; EXPLICIT_LAC the body; others b"".
    digest_type: a LEDGER_KEY record's trailing digest type (J4), 0 when it has none.
    A PADDING record has ledger_id and entry_id -1.
    """

    offset: int
    size: int
    kind: RecordKind
    ledger_id: int
    entry_id: int
    payload: bytes
    digest_type: int = 0

    @property
    def end(self) -> int:
        return self.offset + self.size


def journal_file_name(journal_id: int) -> str:
    """``<hex id>.txn``: lowercase hex, no padding (docs/formats.md §2)."""
    assert journal_id >= 0, journal_id
    return f"{journal_id:x}.txn"


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def parse_journal_id(name: str) -> int | None:
    """The id of a journal file name, or None if ``name`` is not one.

    Names end in ``.txn``; the part before the first ``.`` is base 16 (docs/formats.md §2).
    """
    if not name.endswith(".txn"):
        return None
    stem = name.split(".", 1)[0]
    if not stem or not set(stem) <= _HEX_DIGITS:
        return None
    return int(stem, 16)
