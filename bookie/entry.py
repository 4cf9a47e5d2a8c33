"""Entry framing and digests (BookKeeper's DigestManager). Implements docs/formats.md §6.

A pure leaf shared by the server (digest check on add and replay), the readers (scrub) and
the client library (framing). Imports only the standard library and ``crc32c``.

Entry layout, integers big-endian (docs/formats.md §6.1):
    offset  size  field
    0       8     ledgerId (i64)
    8       8     entryId (i64)
    16      8     lastAddConfirmed (i64): the piggybacked LAC; -1 if none
    24      8     length (i64): the ledger's total length including this payload
    32      D     digest, D by type (CRC32 8, MAC 20, CRC32C 4, DUMMY 0)
    32+D    ...   payload

The digest covers bytes 0..31 then the payload, skipping the digest bytes.

Explicit-LAC body (docs/formats.md §6.4): ledgerId i64 | lac i64 | digest over those 16 bytes.

Invariants:
    D1. CRC32 is stored as an i64 whose high 4 bytes are zero; CRC32C as an i32 (BookKeeper).
    D2. The master key is SHA1("ledger" || password); the MAC key is SHA1("mac" || password).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import itertools
import operator
import struct
import zlib

import crc32c as _crc32c

from bookie.errors import BadDigest, BadRequest

METADATA_LENGTH = 32
LAC_METADATA_LENGTH = 16
MASTER_KEY_LENGTH = 20

ENTRY_HEADER = struct.Struct(">qqqq")
assert ENTRY_HEADER.size == METADATA_LENGTH
IDS = struct.Struct(">qq")
#: Where the payload starts behind each CRC digest (docs/formats.md §6.1, §6.2): the hot loops that
#: check CRCs in place (scrub, the pipeline) slice with these. CRC32 is stored in 8 bytes.
CRC32C_PAYLOAD_OFFSET = METADATA_LENGTH + 4
CRC32_PAYLOAD_OFFSET = METADATA_LENGTH + 8
assert IDS.size == 16
_I32 = struct.Struct(">I")
_I64 = struct.Struct(">Q")


class DigestType(enum.IntEnum):
    """``LedgerMetadataFormat.DigestType`` numbers; 0 means "not known yet" in ledger state."""

    CRC32 = 1
    MAC = 2
    CRC32C = 3
    DUMMY = 4

    @property
    def digest_length(self) -> int:
        return _DIGEST_LENGTH[self]

    @property
    def header_name(self) -> str:
        """The spelling of docs/http-api.md's ``X-Digest-Type`` header."""
        return self.name.lower()

    @classmethod
    def from_header(cls, value: str | None) -> "DigestType":
        if value is None or value == "":
            return cls.CRC32C
        try:
            return cls[value.strip().upper()]
        except KeyError:
            raise BadRequest(
                f"X-Digest-Type {value!r} is not one of crc32c, crc32, mac, dummy") from None

    @property
    def verifiable(self) -> bool:
        """Whether the bookie can check this type without the password (CRC types only)."""
        return self in _VERIFIABLE


_DIGEST_LENGTH = {DigestType.CRC32: 8, DigestType.MAC: 20, DigestType.CRC32C: 4,
                  DigestType.DUMMY: 0}
_VERIFIABLE = frozenset((DigestType.CRC32, DigestType.CRC32C))  # a set: asked on every add


#: BookKeeper's "no key": 20 zero bytes (a fence or LAC read before the key is known). It
#: never conflicts with a real key and is replaced by the first one (docs/formats.md §7.2).
ZERO_KEY = bytes(20)


def master_key(password: bytes) -> bytes:
    """BookKeeper's ``MacDigestManager.genDigest("ledger", password)`` (D2)."""
    return hashlib.sha1(b"ledger" + password).digest()


def mac_key(password: bytes) -> bytes:
    """The HMAC-SHA1 key of a MAC ledger: SHA1("mac" || password) (D2)."""
    return hashlib.sha1(b"mac" + password).digest()


def crc32c(data, value: int = 0) -> int:
    """Castagnoli CRC over ``data``, continuing from ``value`` (hardware-accelerated)."""
    return _crc32c.crc32c(data, value)


def compute_digest(digest_type: DigestType, parts, key: bytes | None = None) -> bytes:
    """The stored digest bytes over the concatenation of ``parts`` (bytes-like objects)."""
    if digest_type is DigestType.CRC32C:
        value = 0
        for part in parts:
            value = _crc32c.crc32c(part, value)
        return _I32.pack(value)
    if digest_type is DigestType.CRC32:
        value = 0
        for part in parts:
            value = zlib.crc32(part, value)
        return _I64.pack(value)  # D1
    if digest_type is DigestType.MAC:
        if key is None:
            raise ValueError("a MAC digest needs the ledger's MAC key")
        mac = hmac.new(key, digestmod=hashlib.sha1)
        for part in parts:
            mac.update(part)
        return mac.digest()
    return b""


def _digest_for(header: bytes, payload: bytes, digest_type: DigestType,
                key: bytes | None) -> bytes:
    if digest_type is DigestType.CRC32C:  # the default, on every add: no tuple, no loop
        return _I32.pack(_crc32c.crc32c(payload, _crc32c.crc32c(header)))
    return compute_digest(digest_type, (header, payload), key)


def frame_entry(ledger_id: int, entry_id: int, lac: int, length: int, payload: bytes,
                digest_type: DigestType = DigestType.CRC32C, key: bytes | None = None) -> bytes:
    """Build a BookKeeper entry: header, digest, payload. ``key`` is the MAC key for MAC."""
    header = ENTRY_HEADER.pack(ledger_id, entry_id, lac, length)
    return b"".join((header, _digest_for(header, payload, digest_type, key), payload))


def frame_batch_item(ledger_id: int, entry_id: int, lac: int, length: int, payload: bytes,
                     digest_type: DigestType = DigestType.CRC32C,
                     key: bytes | None = None) -> bytes:
    """``frame_entry`` with the i32 length in front: one frame of a batch body
    (docs/http-api.md, "A batch"), so a batch is one join of these (the writer's hot path)."""
    header = ENTRY_HEADER.pack(ledger_id, entry_id, lac, length)
    digest = _digest_for(header, payload, digest_type, key)
    return b"".join((_I32.pack(METADATA_LENGTH + len(digest) + len(payload)), header, digest,
                     payload))


def entry_ids(entry) -> tuple[int, int]:
    """(ledgerId, entryId) of a framed entry. Raises BadRequest if it is too short."""
    if len(entry) < IDS.size:
        raise BadRequest(f"entry of {len(entry)} bytes is shorter than its 16-byte ids")
    return IDS.unpack_from(entry, 0)


#: Where an entry's piggybacked LAC sits (docs/formats.md §6.1): after ledgerId and entryId.
LAC_OFFSET = 16
_LAC = struct.Struct(">q")


def piggybacked_lac(entry) -> int:
    """The writer's LAC stored at bytes 16..23 of an entry (docs/formats.md §6.1)."""
    return _LAC.unpack_from(entry, LAC_OFFSET)[0]


def has_piggybacked_lac(entry) -> bool:
    """Whether ``entry`` is long enough to hold one (shell tools show damaged records too)."""
    return len(entry) >= LAC_OFFSET + _LAC.size


def payload_of(entry, digest_type: DigestType) -> bytes:
    return bytes(entry[METADATA_LENGTH + digest_type.digest_length:])


def check_entry_shape(entry, digest_type: DigestType) -> None:
    """Raise BadRequest unless ``entry`` is long enough to hold its header and digest."""
    need = METADATA_LENGTH + digest_type.digest_length
    if len(entry) < need:
        raise BadRequest(
            f"entry of {len(entry)} bytes is shorter than the {need}-byte header and "
            f"{digest_type.header_name} digest")


def digest_mismatch(entry, digest_type: DigestType, key: bytes | None = None) -> str | None:
    """Why a framed entry's stored digest does not match its bytes, or None: the one digest
    check (the add path, replay, scrub's slow path, the pipeline). Needs the key for MAC."""
    end = METADATA_LENGTH + digest_type.digest_length
    if len(entry) < end:
        return (f"entry of {len(entry)} bytes is shorter than its header and "
                f"{digest_type.header_name} digest")
    view = memoryview(entry)
    expected = compute_digest(digest_type, (view[:METADATA_LENGTH], view[end:]), key)
    stored = bytes(view[METADATA_LENGTH:end])
    if stored == expected:
        return None
    return (f"{digest_type.header_name} digest mismatch: stored {stored.hex()}, "
            f"computed {expected.hex()}")


def entry_digest_ok(entry, digest_type: DigestType, key: bytes | None = None) -> bool:
    """Whether a framed entry's stored digest matches its bytes. Needs the key for MAC."""
    crc_digest = _CRC_DIGESTS.get(digest_type)
    if crc_digest is not None and len(entry) >= METADATA_LENGTH + crc_digest[2]:
        # Every read of the default type (CRC32C), every binary-protocol add of BookKeeper's
        # Java default (CRC32): no copies, no message.
        crc, stored_of, width = crc_digest
        view = memoryview(entry)
        return crc(view[METADATA_LENGTH + width:], crc(view[:METADATA_LENGTH])) == \
            stored_of(entry, METADATA_LENGTH)[0]
    return digest_mismatch(entry, digest_type, key) is None


#: The CRC digests checked without digest_mismatch's copies: (crc function, the stored
#: value's reader, its width). D1: CRC32 is stored as a u64, CRC32C as a u32.
_CRC_DIGESTS = {DigestType.CRC32C: (_crc32c.crc32c, _I32.unpack_from, 4),
                DigestType.CRC32: (zlib.crc32, _I64.unpack_from, 8)}


_HEAD = operator.itemgetter(slice(0, METADATA_LENGTH))
_TAILS = {width: operator.itemgetter(slice(METADATA_LENGTH + width, None)) for width in (4, 8)}
_FIRST = operator.itemgetter(0)


def first_bad_digest(entries, digest_type: DigestType, key: bytes | None = None) -> int:
    """The index of the first entry whose digest does not match its bytes, -1 if none: a
    batch's digests in one tight loop (the batch add). Shapes must have been checked."""
    crc_digest = _CRC_DIGESTS.get(digest_type)
    if crc_digest is not None:
        # entry_digest_ok's CRC check, inlined with local names: this loop runs once per
        # entry of every add.
        # entry_digest_ok's CRC check over every entry in C loops (map over views: no
        # copy, no Python step an entry); the index is looked for only when one differs.
        crc, stored_of, width = crc_digest
        views = list(map(memoryview, entries))
        heads = map(crc, map(_HEAD, views))
        computed = list(map(crc, map(_TAILS[width], views), heads))
        stored = list(map(_FIRST, map(stored_of, entries, itertools.repeat(METADATA_LENGTH))))
        if computed == stored:
            return -1
        return next(index for index, (mine, theirs) in enumerate(zip(computed, stored))
                    if mine != theirs)
    for index, entry in enumerate(entries):
        if not entry_digest_ok(entry, digest_type, key):
            return index
    return -1


def verify_entry(entry, digest_type: DigestType, key: bytes | None = None) -> None:
    """Raise BadDigest (with both digests named) if the entry's digest does not match."""
    check_entry_shape(entry, digest_type)
    if not entry_digest_ok(entry, digest_type, key):
        ledger_id, entry_id = entry_ids(entry)
        d = digest_type.digest_length
        found = bytes(entry[METADATA_LENGTH:METADATA_LENGTH + d]).hex()
        raise BadDigest(
            f"entry {ledger_id}/{entry_id}: {digest_type.header_name} digest {found} does not "
            f"match its bytes")


def frame_lac(ledger_id: int, lac: int, digest_type: DigestType = DigestType.CRC32C,
              key: bytes | None = None) -> bytes:
    """Build an explicit-LAC (WriteLac) body: ledgerId, lac, digest over those 16 bytes."""
    head = IDS.pack(ledger_id, lac)
    return head + compute_digest(digest_type, (head,), key)


def parse_lac_body(body) -> tuple[int, int]:
    """(ledgerId, lac) of an explicit-LAC body; BadRequest if shorter than 16 bytes."""
    if len(body) < LAC_METADATA_LENGTH:
        raise BadRequest(f"explicit-LAC body of {len(body)} bytes is shorter than 16")
    return IDS.unpack_from(body, 0)


def lac_body_advances(stored, body) -> bool:
    """Whether ``body`` raises the explicit LAC above ``stored`` (a body or None). The LAC
    only moves forward: a late, lower explicit LAC (the client's idle LAC timer racing
    close()) must not replace a higher one, in memory, in the index or on replay."""
    if stored is None or len(stored) < LAC_METADATA_LENGTH:
        return True
    return parse_lac_body(body)[1] > parse_lac_body(stored)[1]


def lac_digest_ok(body, digest_type: DigestType, key: bytes | None = None) -> bool:
    d = digest_type.digest_length
    if len(body) != LAC_METADATA_LENGTH + d:
        return False
    view = memoryview(body)
    expected = compute_digest(digest_type, (view[:LAC_METADATA_LENGTH],), key)
    return view[LAC_METADATA_LENGTH:] == expected
