"""BookKeeper's v2 ("pre-v3") binary protocol: frames, requests and responses, byte for byte
as ``BookieProtocol`` and ``BookieProtoEncoding.RequestEnDeCoderPreV3`` /
``ResponseEnDeCoderPreV3`` lay them out (read, not copied). Big-endian throughout.

Frame: ``i32 length`` then ``length`` bytes, the first four of them the packet header::

    header = version << 24 | opCode << 16 | flags      (version >= 1)
    header = opCode                                    (version 0: the oldest clients)

Requests (after the header):
    ADDENTRY (1)          masterKey[20], then the entry exactly as the client framed it
                          (its first 16 bytes are ledgerId and entryId)
    READENTRY (2)         ledgerId i64, entryId i64, masterKey[20] when FLAG_DO_FENCING and
                          version >= 2 (entryId -1: the LAC entry, BookieProtocol.LAST_ADD_CONFIRMED)
    BATCH_READ_ENTRY (7)  ledgerId i64, entryId i64, requestId i64, maxCount i32, maxSize i64,
                          masterKey[20] when fencing (BP-62)
    AUTH (3)              an AuthMessage (protobuf), answered as a bookie without auth

Responses (after the header, which carries flags 0):
    rc i32, ledgerId i64, entryId i64 (RESPONSE_HEADERS_SIZE = 24 with the header), then
    READENTRY             the entry bytes when rc = EOK
    BATCH_READ_ENTRY      requestId i64, then (i32 length, entry bytes) per entry
    AUTH                  no rc and no ids: the header, then the AuthMessage

Invariants:
    BP1. ``decode_request`` reads only whole frames and raises ``ProtocolError`` (never
         anything else) for a frame it cannot take: an unknown opcode, a body shorter than
         its fields, a master key cut short. The caller answers EBADREQ or closes.
    BP2. Encoders build exactly the bytes above; tests check them against struct-built
         golden bytes from this docstring's tables, not against this module.
"""

from __future__ import annotations

import dataclasses
import typing
import struct

ADDENTRY, READENTRY, AUTH, READ_LAC, WRITE_LAC, GET_BOOKIE_INFO, BATCH_READ_ENTRY = range(1, 8)
OPCODES = frozenset(range(1, 8))
CURRENT_PROTOCOL_VERSION = 2
MASTER_KEY_LENGTH = 20
LAST_ADD_CONFIRMED = -1

FLAG_NONE, FLAG_DO_FENCING, FLAG_RECOVERY_ADD, FLAG_HIGH_PRIORITY = 0x0, 0x1, 0x2, 0x4

# Return codes (BookieProtocol): v2 numbers, not v3's StatusCode numbers.
EOK, ENOLEDGER, ENOENTRY = 0, 1, 2
EBADREQ, EIO, EUA, EBADVERSION, EFENCED, EREADONLY, ETOOMANYREQUESTS = range(100, 107)
EUNKNOWNLEDGERSTATE = 107

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_IDS = struct.Struct(">qq")
_BATCH = struct.Struct(">qqqiq")
_RESPONSE = struct.Struct(">Iiqq")  # header (unsigned: any version byte), rc, ledgerId, entryId
RESPONSE_HEADERS_SIZE = _RESPONSE.size  # 24, BookKeeper's own name and value


class ProtocolError(ValueError):
    """A frame this protocol cannot take (BP1); the message says what and where."""


def pack_header(version: int, opcode: int, flags: int = 0) -> int:
    """PacketHeader.toInt: version 0 is the bare opcode."""
    if version == 0:
        return opcode
    return ((version & 0xFF) << 24) | ((opcode & 0xFF) << 16) | (flags & 0xFFFF)


def unpack_header(value: int) -> tuple[int, int, int]:
    """(version, opcode, flags) of a header read as an unsigned i32 (PacketHeader.get*)."""
    version = (value >> 24) & 0xFF
    if version == 0:
        return 0, value & 0xFF, 0
    return version, (value >> 16) & 0xFF, value & 0xFFFF


class Request(typing.NamedTuple):
    """One decoded request; a named tuple, not a frozen dataclass: one is built per add on
    the listener's hot path, and a frozen dataclass's __init__ cost ~2 us of it."""

    version: int
    opcode: int
    flags: int
    ledger_id: int = -1
    entry_id: int = -1
    master_key: bytes | None = None
    body: bytes = b""            # ADDENTRY: the framed entry; AUTH: the AuthMessage bytes
    request_id: int = 0          # BATCH_READ_ENTRY
    max_count: int = 0
    max_size: int = 0

    @property
    def fencing(self) -> bool:
        return bool(self.flags & FLAG_DO_FENCING)

    @property
    def recovery(self) -> bool:
        return bool(self.flags & FLAG_RECOVERY_ADD)


def decode_request(packet: bytes) -> Request:
    """One frame's bytes (without the length word) as a Request, or ProtocolError (BP1)."""
    if len(packet) < 4:
        raise ProtocolError(f"frame of {len(packet)} bytes has no packet header")
    version, opcode, flags = unpack_header(_U32.unpack_from(packet, 0)[0])
    rest = memoryview(packet)[4:]
    if opcode == ADDENTRY:
        if len(rest) < MASTER_KEY_LENGTH + _IDS.size:
            raise ProtocolError(f"ADDENTRY of {len(rest)} bytes: a master key and an entry "
                                f"need {MASTER_KEY_LENGTH + _IDS.size}")
        key = bytes(rest[:MASTER_KEY_LENGTH])
        ledger_id, entry_id = _IDS.unpack_from(rest, MASTER_KEY_LENGTH)
        return Request(version, opcode, flags, ledger_id, entry_id, key,
                       bytes(rest[MASTER_KEY_LENGTH:]))
    if opcode == READENTRY:
        _need(rest, _IDS.size, "READENTRY")
        ledger_id, entry_id = _IDS.unpack_from(rest, 0)
        key = _fence_key(rest, _IDS.size, version, flags, "READENTRY")
        return Request(version, opcode, flags, ledger_id, entry_id, key)
    if opcode == BATCH_READ_ENTRY:
        _need(rest, _BATCH.size, "BATCH_READ_ENTRY")
        ledger_id, entry_id, request_id, max_count, max_size = _BATCH.unpack_from(rest, 0)
        key = _fence_key(rest, _BATCH.size, version, flags, "BATCH_READ_ENTRY")
        return Request(version, opcode, flags, ledger_id, entry_id, key,
                       request_id=request_id, max_count=max_count, max_size=max_size)
    if opcode == AUTH:
        return Request(version, opcode, flags, body=bytes(rest))
    raise ProtocolError(f"unknown v2 opcode {opcode} (version {version}, flags {flags:#x})")


#: PV1: the header words' top halves (version << 8 | opcode) of the adds ``plain_add``
#: reads, and the least packet one can be (header, master key, the entry's ids).
_PLAIN_ADD_WORDS = frozenset({(1 << 8) | ADDENTRY, (2 << 8) | ADDENTRY})
_PLAIN_ADD_MIN = 4 + MASTER_KEY_LENGTH + _IDS.size


def plain_add(data: bytes, at: int, length: int) -> tuple | None:
    """PV1: the v2 ADDENTRY of version 1 or 2 (every add Pulsar and BookKeeper's client
    send) in ``data[at:at + length]`` as the listener's arrived add (bk_adds.AddPath: ledger
    id, entry id, entry, master key, recovery, deferred sync False, the version to answer
    in), read in place: exactly what ``decode_request`` then ``_v2_add`` make of it, without
    a view or a Request; None for any other packet (``decode_request`` decides it). A
    property test holds the two to each other."""
    if length < _PLAIN_ADD_MIN:
        return None
    word = _U32.unpack_from(data, at)[0]
    if word >> 16 not in _PLAIN_ADD_WORDS:
        return None
    ledger_id, entry_id = _IDS.unpack_from(data, at + 24)
    return (ledger_id, entry_id, data[at + 24:at + length], data[at + 4:at + 24],
            bool(word & FLAG_RECOVERY_ADD), False, word >> 24)


def _need(rest, size: int, what: str) -> None:
    if len(rest) < size:
        raise ProtocolError(f"{what} of {len(rest)} bytes: its fields need {size}")


def _fence_key(rest, at: int, version: int, flags: int, what: str) -> bytes | None:
    """The master key a fencing read carries (version >= 2 only, as BookKeeper reads it)."""
    if not (flags & FLAG_DO_FENCING and version >= 2):
        return None
    if len(rest) < at + MASTER_KEY_LENGTH:
        raise ProtocolError(f"fencing {what}: master key cut to {len(rest) - at} bytes")
    return bytes(rest[at:at + MASTER_KEY_LENGTH])


# -- encoders: the requests a client sends (tests, interop) and the bookie's answers --------


def frame(packet: bytes) -> bytes:
    return _I32.pack(len(packet)) + packet


def encode_add(ledger_id: int, entry_id: int, master_key: bytes, entry: bytes,
               flags: int = FLAG_NONE, version: int = CURRENT_PROTOCOL_VERSION) -> bytes:
    """A framed ADDENTRY; ``entry`` starts with its own ledgerId and entryId."""
    _check_key(master_key)
    if _IDS.unpack_from(entry, 0) != (ledger_id, entry_id):
        raise ValueError("the entry's own ids differ from the request's")
    return frame(_U32.pack(pack_header(version, ADDENTRY, flags)) + master_key + entry)


def encode_read(ledger_id: int, entry_id: int, flags: int = FLAG_NONE,
                master_key: bytes | None = None,
                version: int = CURRENT_PROTOCOL_VERSION) -> bytes:
    return frame(_U32.pack(pack_header(version, READENTRY, flags))
                 + _IDS.pack(ledger_id, entry_id) + _fence_tail(flags, version, master_key))


def encode_batch_read(ledger_id: int, entry_id: int, request_id: int, max_count: int,
                      max_size: int, flags: int = FLAG_NONE, master_key: bytes | None = None,
                      version: int = CURRENT_PROTOCOL_VERSION) -> bytes:
    return frame(_U32.pack(pack_header(version, BATCH_READ_ENTRY, flags))
                 + _BATCH.pack(ledger_id, entry_id, request_id, max_count, max_size)
                 + _fence_tail(flags, version, master_key))


def _fence_tail(flags: int, version: int, master_key: bytes | None) -> bytes:
    """The master key a fencing read ends with (version >= 2), the encoder's side of
    ``_fence_key``; nothing otherwise."""
    if not (flags & FLAG_DO_FENCING and version >= 2):
        return b""
    _check_key(master_key)
    return master_key


def encode_response(version: int, opcode: int, rc: int, ledger_id: int, entry_id: int,
                    data: bytes = b"") -> bytes:
    """A framed ADDENTRY or READENTRY answer (READENTRY carries ``data`` when rc = EOK)."""
    return frame(_RESPONSE.pack(pack_header(version, opcode, 0), rc, ledger_id, entry_id)
                 + data)


def encode_batch_response(version: int, rc: int, ledger_id: int, entry_id: int,
                          request_id: int, entries) -> bytes:
    return encode_batch_body_response(version, rc, ledger_id, entry_id, request_id,
                                      b"".join(_I32.pack(len(e)) + e for e in entries))


def encode_batch_body_response(version: int, rc: int, ledger_id: int, entry_id: int,
                               request_id: int, body: bytes) -> bytes:
    """A framed BATCH_READ_ENTRY answer whose entries are already framed in ``body`` (each
    its i32 size, then its bytes: the entry log's own layout, entrylog/run_reader.py)."""
    return b"".join((_I32.pack(RESPONSE_HEADERS_SIZE + 8 + len(body)),
                     _RESPONSE.pack(pack_header(version, BATCH_READ_ENTRY, 0), rc, ledger_id,
                                    entry_id), struct.pack(">q", request_id), body))


def encode_auth_response(version: int, auth_message: bytes) -> bytes:
    """A framed AUTH answer: the header, then the AuthMessage (no rc, no ids)."""
    return frame(_U32.pack(pack_header(version, AUTH, 0)) + auth_message)


@dataclasses.dataclass(frozen=True)
class Response:
    version: int
    opcode: int
    rc: int
    ledger_id: int
    entry_id: int
    data: bytes = b""
    request_id: int = 0
    entries: tuple[bytes, ...] = ()


def decode_response(packet: bytes) -> Response:
    """One response frame (without its length word): the client's side, for tests."""
    if len(packet) < RESPONSE_HEADERS_SIZE:
        raise ProtocolError(f"response of {len(packet)} bytes is shorter than its "
                            f"{RESPONSE_HEADERS_SIZE}-byte header")
    header, rc, ledger_id, entry_id = _RESPONSE.unpack_from(packet, 0)
    version, opcode, _ = unpack_header(header & 0xFFFFFFFF)
    rest = packet[RESPONSE_HEADERS_SIZE:]
    if opcode != BATCH_READ_ENTRY:
        return Response(version, opcode, rc, ledger_id, entry_id, bytes(rest))
    if len(rest) < 8:
        raise ProtocolError("BATCH_READ_ENTRY response without its request id")
    request_id = struct.unpack_from(">q", rest, 0)[0]
    entries, at = [], 8
    while at < len(rest):
        if len(rest) - at < 4:
            raise ProtocolError(f"batch response: {len(rest) - at} stray bytes")
        size = _I32.unpack_from(rest, at)[0]
        if size < 0 or at + 4 + size > len(rest):
            raise ProtocolError(f"batch response: entry of {size} bytes runs past the frame")
        entries.append(bytes(rest[at + 4:at + 4 + size]))
        at += 4 + size
    return Response(version, opcode, rc, ledger_id, entry_id, request_id=request_id,
                    entries=tuple(entries))


def _check_key(master_key: bytes | None) -> None:
    if master_key is None or len(master_key) != MASTER_KEY_LENGTH:
        raise ValueError(f"a v2 master key is {MASTER_KEY_LENGTH} bytes")
