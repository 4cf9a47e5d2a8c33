"""The v3 READ_ENTRY hot path without a protobuf message (BK7, docs/bookkeeper-protocol.md
§5a): a plain read request is read from its bytes, and its answer is built as bytes.

A reader that asks entry by entry over v3 (BookKeeper's ``readEntries`` when it cannot
batch) sends a request per entry. Protobuf's message objects cost more per request than
the read itself when the entry is in the page cache (parse, a Python object per field, the
header copied into the answer, the answer serialized), as they did for adds (v3_add.py).
This module reads only the layout BookKeeper's client writes for a plain read: the
``Request``'s ``header`` (version 3, operation READ_ENTRY, txnId, optional priority) then
its ``readRequest`` with ledgerId and entryId and nothing else: no flag (a fencing read or
a piggybacked long poll), no masterKey, previousLAC or timeOut, no request context.

Invariants:
    VR1. ``parse_read`` returns a ``PlainRead`` only for bytes protobuf would parse into a
         whole READ_ENTRY request with exactly those values and none of the fields above;
         for anything else it returns None and the caller takes protobuf's path, which
         decides as before. It never raises. A property test holds it to protobuf on
         generated and mutated requests.
    VR2. The answer's header is the request's header bytes, as BookKeeper copies the
         request's header into its answer; ``encode_read_response`` is byte for byte what
         protobuf serializes for the same answer (a property test checks it).
"""

from __future__ import annotations

import re
import struct
from typing import NamedTuple

from api.bkproto.pbwire import V4, V9, uvarint, varint_value

_I32 = struct.Struct(">i")
_new = tuple.__new__  # a NamedTuple built without its Python-level __new__ (hot path)


class PlainRead(NamedTuple):
    header: bytes  # the request's serialized BKPacketHeader, for the answer (VR2)
    ledger_id: int
    entry_id: int


#: A plain read, whole, in the order protobuf writes it: header (length < 128: version 3,
#: operation READ_ENTRY, txnId, optional priority), then readRequest (field 100: its
#: length, ledgerId, entryId). Matching is C; the two lengths are checked after it.
_PLAIN_READ = re.compile(
    rb"\x0a([\x00-\x7f])(\x08\x03\x10\x01\x18" + V9 + rb"(?:\x20" + V4 + rb")?)"
    rb"\xa2\x06([\x00-\x7f])\x08(" + V9 + rb")\x10(" + V9 + rb")\Z", re.DOTALL)


def parse_read(packet) -> PlainRead | None:
    """A plain v3 read's fields, or None: protobuf's path decides (VR1). ``packet`` is
    bytes or a memoryview of the frame."""
    match = _PLAIN_READ.match(packet)
    if match is None:
        return None
    header_length, header, read_length, ledger_id, entry_id = match.groups()
    if header_length[0] != len(header) or \
            read_length[0] != 2 + len(ledger_id) + len(entry_id):
        return None
    return _new(PlainRead, (header, varint_value(ledger_id), varint_value(entry_id)))


def encode_read_response(header: bytes, status: int, ledger_id: int, entry_id: int,
                         body=None, max_lac: int | None = None) -> bytes:
    """A framed READ_ENTRY ``Response`` (VR2): ``header`` is the request's serialized
    BKPacketHeader; ``body`` (the entry) and ``max_lac`` only where the answer has them."""
    code = uvarint(status)
    pieces = [b"".join((b"\x08", code, b"\x10", uvarint(ledger_id), b"\x18",
                        uvarint(entry_id)))]
    if body is not None:
        pieces += (b"\x22" + uvarint(len(body)), body)
    if max_lac is not None:
        pieces.append(b"\x28" + uvarint(max_lac))
    read_length = sum(map(len, pieces))
    prefix = b"".join((b"\x0a", uvarint(len(header)), header, b"\x10", code,
                       b"\xa2\x06", uvarint(read_length)))  # readResponse: field 100
    return b"".join((_I32.pack(len(prefix) + read_length), prefix, *pieces))  # one copy
