"""The v3 ADD_ENTRY hot path without a protobuf message (BK5, docs/bookkeeper-protocol.md §5a):
a plain add request is read field by field from its bytes, and its answer is built as bytes.

Per add, protobuf's message objects cost more than the add's own admission (parsing,
then a Python object per field read, then the header serialized again for the answer).
This module reads only the one layout BookKeeper's client writes for an add: the
``Request`` with its ``header`` (version, operation ADD_ENTRY, txnId, optional priority)
then its ``addRequest`` (ledgerId, entryId, masterKey, body, optional writeFlags and
flag), every field once, in field-number order, as protobuf's Java serializer writes them.

Invariants:
    VA1. ``parse_add`` returns a ``PlainAdd`` only for bytes protobuf would parse into a
         whole ADD_ENTRY request with exactly those values; for anything else (another
         operation, another field order, an unknown or repeated field, a request context,
         a varint of 10 bytes, a negative id, an enum value outside its type) it returns
         None and the caller takes protobuf's path, which decides as before. It never
         raises. A property test holds it to protobuf on generated and mutated requests.
    VA2. The answer's header is the request's header bytes, as BookKeeper copies the
         request's header into its answer; ``encode_add_response`` is byte for byte what
         protobuf serializes (a property test checks it).
"""

from __future__ import annotations

import re
import struct
from typing import NamedTuple

from api.bkproto.pbwire import INT32, ONE_BYTE, V4, V9, uvarint, varint_value

_I32 = struct.Struct(">i")


_new = tuple.__new__  # a NamedTuple built without its Python-level __new__ (hot path)


class PlainAdd(NamedTuple):
    header: bytes  # the request's serialized BKPacketHeader, for the answer (VA2)
    ledger_id: int
    entry_id: int
    master_key: bytes
    body: bytes
    write_flags: int
    recovery: bool


#: A plain add up to its body, in the order protobuf writes it: header (length < 128:
#: version 3 (others take protobuf's path, which refuses them, BK6), operation ADD_ENTRY,
#: txnId, optional priority), then addRequest (field 101: length, ledgerId, entryId, a
#: 20-byte masterKey as BookKeeper's always is, the body's length). Matching is C; what it
#: cannot say (lengths agree, the optional tail) is checked after it.
_PLAIN_ADD = re.compile(
    rb"\x0a([\x00-\x7f])(\x08\x03\x10\x02\x18" + V9 + rb"(?:\x20" + V4 + rb")?)"
    rb"\xaa\x06(" + V9 + rb")\x08(" + V9 + rb")\x10(" + V9 + rb")\x1a\x14(.{20})"
    rb"\x22(" + V4 + rb")", re.DOTALL)


def parse_add(packet) -> PlainAdd | None:
    """A plain v3 add's fields, or None: protobuf's path decides (VA1). ``packet`` is bytes
    or a memoryview of the frame (then the body is the one copy made of it)."""
    match = _PLAIN_ADD.match(packet)
    if match is None:
        return None
    header_length, header, add_length, ledger_id, entry_id, key, body_length = \
        match.groups()
    at, end = match.end(), len(packet)
    body_end = at + varint_value(body_length)
    if header_length[0] != len(header) or body_end > end or \
            match.start(3) + len(add_length) + varint_value(add_length) != end:
        return None
    write_flags, recovery = 0, False
    if body_end != end:
        tail = _tail(packet, body_end, end)
        if tail is None:
            return None
        write_flags, recovery = tail
    ledger = ledger_id[0] if len(ledger_id) == 1 else varint_value(ledger_id)
    return _new(PlainAdd, (header, ledger, varint_value(entry_id), key,
                           bytes(packet[at:body_end]), write_flags, recovery))


def _tail(data: bytes, at: int, end: int) -> tuple[int, bool] | None:
    """The add's optional writeFlags (int32, not negative) then flag (RECOVERY_ADD, the
    one value), and nothing after them; None for anything else."""
    write_flags, recovery = 0, False
    if data[at] == 0x28:
        flags = INT32.match(data, at + 1)
        if flags is None:
            return None
        write_flags, at = varint_value(flags.group()), flags.end()
    if data[at:at + 3] == b"\xa0\x06\x01":  # flag: field 100
        recovery, at = True, at + 3
    return (write_flags, recovery) if at == end else None


def encode_add_response(header: bytes, status: int, ledger_id: int, entry_id: int) -> bytes:
    """A framed ADD_ENTRY ``Response``: ``header`` is the request's serialized
    BKPacketHeader (VA2). The addResponse is at most 25 bytes: its length is one byte."""
    code = uvarint(status)
    body = b"".join((b"\x08", code, b"\x10", uvarint(ledger_id), b"\x18",
                     uvarint(entry_id)))
    data = b"".join((b"\x0a", uvarint(len(header)), header, b"\x10", code,
                     b"\xaa\x06", ONE_BYTE[len(body)], body))  # addResponse: field 101
    return _I32.pack(len(data)) + data
