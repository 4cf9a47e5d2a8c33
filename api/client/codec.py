"""Entry framing and checking for one ledger: the client's side of docs/formats.md §6.

Entries are framed and checked by ``bookie.entry``, the one framing module the server
shares; the master key is SHA1("ledger" || password) and a MAC ledger's HMAC key
SHA1("mac" || password), as BookKeeper derives them.
"""

from __future__ import annotations

import dataclasses
import struct
import typing

import crc32c as _crc32c

from bookie import entry as framing
from bookie.entry import DigestType
from bookie.errors import IOFailure


class DigestMismatch(IOFailure):
    """An entry read back does not verify: its digest or ids are not what was written.

    An IOFailure (EIO), not a BadDigest: BadDigest is a BadRequest, the bookie refusing a
    malformed add, a caller's mistake not worth retrying. Here the request was fine and the
    stored or transported bytes are damaged, the condition the bookie itself reports as
    CorruptRecord (an IOFailure) when its own scan finds it (BookKeeper: BKDigestMatchException).
    """

    def __init__(self, ledger_id: int, entry_id: int, reason: str) -> None:
        super().__init__(f"entry {ledger_id}/{entry_id}: {reason}")
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.reason = reason

class LedgerEntry(typing.NamedTuple):
    """One verified entry (docs/formats.md §6.1): ids, piggybacked LAC, ledger length, payload.
    Immutable; a named tuple, not a frozen dataclass: one is built per entry read, and a
    frozen dataclass's __init__ cost ~1 us of a batched read's ~5 us per entry."""

    ledger_id: int
    entry_id: int
    lac: int
    length: int
    payload: bytes


#: A batch frame's i32 length, the entry header and a CRC32C digest: what ``decode_frames``
#: reads of each frame in one unpack (docs/http-api.md "A batch", docs/formats.md §6.1).
_CRC32C_FRAME_HEAD = struct.Struct(">iqqqqI")
_FRAME_LENGTH = struct.Struct(">i")
_CRC32C_HEAD = framing.METADATA_LENGTH + 4
_new_tuple = tuple.__new__  # LedgerEntry(...) runs a Python __new__: 0.3 us an entry more


def digest_type_of(value: DigestType | str) -> DigestType:
    """A DigestType from itself or docs/http-api.md's header spelling (crc32c, crc32, mac, dummy)."""
    return value if isinstance(value, DigestType) else DigestType.from_header(value)

def _password_bytes(password: bytes | str) -> bytes:
    return password.encode() if isinstance(password, str) else bytes(password)

@dataclasses.dataclass(frozen=True)
class LedgerCodec:
    """A ledger's id, digest type and keys: frames and verifies its entries (pure)."""

    ledger_id: int
    digest_type: DigestType
    master_key: bytes
    mac_key: bytes | None

    @classmethod
    def for_password(cls, ledger_id: int, password: bytes | str,
                     digest_type: DigestType | str = DigestType.CRC32C) -> "LedgerCodec":
        secret = _password_bytes(password)
        dtype = digest_type_of(digest_type)
        return cls(ledger_id, dtype, framing.master_key(secret),
                   framing.mac_key(secret) if dtype is DigestType.MAC else None)

    def frame(self, entry_id: int, lac: int, length: int, payload: bytes) -> bytes:
        return framing.frame_entry(self.ledger_id, entry_id, lac, length, payload,
                                   self.digest_type, self.mac_key)

    def frame_batch_item(self, entry_id: int, lac: int, length: int, payload: bytes) -> bytes:
        """The framed entry with its i32 length in front, a frame of a batch body."""
        return framing.frame_batch_item(self.ledger_id, entry_id, lac, length, payload,
                                        self.digest_type, self.mac_key)

    def lac_body(self, lac: int) -> bytes:
        return framing.frame_lac(self.ledger_id, lac, self.digest_type, self.mac_key)

    def decode_frames(self, body: bytes, framed: bool = False
                      ) -> tuple[list[tuple[int, typing.Any]], list[DigestMismatch]]:
        """A batch body (docs/http-api.md "A batch", a held read's reply) split and checked
        as ``decode`` checks one entry: ((entry id, entry) of every frame that verifies,
        the mismatch of every frame that does not). With ``framed`` the value is the framed
        entry itself, a view of ``body`` (a copy to send on: re-replication), not a
        LedgerEntry. Raises IOFailure if the body's framing itself is broken (a length past
        its end): then no frame of it can be trusted.

        The CRC32C path reads each frame in place, one unpack and two CRC calls over views
        of the body: the only copy made is the payload (a batched read's hot loop), and
        with ``framed`` none."""
        if self.digest_type is not DigestType.CRC32C:
            return self._decode_frames_slowly(body, framed)
        good: list[tuple[int, LedgerEntry]] = []
        bad: list[DigestMismatch] = []
        view = memoryview(body)
        crc, head_of, length_of = _crc32c.crc32c, _CRC32C_FRAME_HEAD.unpack_from, \
            _FRAME_LENGTH.unpack_from
        own, header, head = self.ledger_id, framing.METADATA_LENGTH, _CRC32C_HEAD
        offset, end = 0, len(body)
        while offset < end:
            start = offset + 4
            length = length_of(body, offset)[0] if start <= end else -1
            stop = start + length
            if length <= 0 or stop > end:
                raise IOFailure(f"ledger {own}: batch reply frame at offset {offset} of "
                                f"{end} bytes has length {length}")
            if length < head:
                bad.append(DigestMismatch(own, -1, f"{length} bytes, shorter than the "
                                                   f"{head}-byte header and digest"))
            else:
                _, ledger_id, entry_id, lac, size, stored = head_of(body, offset)
                if ledger_id != own:
                    bad.append(DigestMismatch(own, entry_id, f"the bookie returned entry "
                                                             f"{ledger_id}/{entry_id}"))
                elif crc(view[start + head:stop], crc(view[start:start + header])) != stored:
                    bad.append(DigestMismatch(own, entry_id, "crc32c digest does not match "
                                                             "its bytes"))
                elif framed:
                    good.append((entry_id, view[start:stop]))
                else:
                    good.append((entry_id, _new_tuple(LedgerEntry, (
                        ledger_id, entry_id, lac, size, body[start + head:stop]))))
            offset = stop
        return good, bad

    def _decode_frames_slowly(self, body: bytes, framed: bool
                              ) -> tuple[list[tuple[int, typing.Any]], list[DigestMismatch]]:
        good, bad = [], []
        view = memoryview(body)
        offset, end = 0, len(body)
        while offset < end:
            length = _FRAME_LENGTH.unpack_from(body, offset)[0] if offset + 4 <= end else -1
            if length <= 0 or offset + 4 + length > end:
                raise IOFailure(f"ledger {self.ledger_id}: batch reply frame at offset "
                                f"{offset} of {end} bytes has length {length}")
            data = view[offset + 4:offset + 4 + length]
            try:
                entry = self.decode(data, None)
                good.append((entry.entry_id, data if framed else entry))
            except DigestMismatch as exc:
                bad.append(exc)
            offset += 4 + length
        return good, bad

    def decode(self, data: bytes, entry_id: int | None) -> LedgerEntry:
        """Verify ids and digest (L6); ``entry_id`` None accepts any id (a read of -1)."""
        shown = "?" if entry_id is None else entry_id
        need = framing.METADATA_LENGTH + self.digest_type.digest_length
        if len(data) < need:
            raise DigestMismatch(self.ledger_id, shown, f"{len(data)} bytes, shorter than "
                                 f"the {need}-byte header and digest")
        ledger_id, found_id, lac, length = framing.ENTRY_HEADER.unpack_from(data, 0)
        if ledger_id != self.ledger_id or (entry_id is not None and found_id != entry_id):
            raise DigestMismatch(self.ledger_id, shown,
                                 f"the bookie returned entry {ledger_id}/{found_id}")
        if not framing.entry_digest_ok(data, self.digest_type, self.mac_key):
            raise DigestMismatch(self.ledger_id, found_id,
                                 f"{self.digest_type.header_name} digest does not match "
                                 f"its bytes")
        return LedgerEntry(ledger_id, found_id, lac, length,
                           framing.payload_of(data, self.digest_type))
