"""Protobuf's wire pieces for the listener's hand-written v3 codecs (v3_add.py, v3_read.py):
varints matched as bytes patterns, their values, and varints written.

Only the shapes those codecs serve are here: a varint of a value below 2**63 (at most 9
bytes, so never a negative int64, which protobuf writes in 10), and of a uint32 below 2**28.
Anything else does not match, and the request takes protobuf's own path.
"""

from __future__ import annotations

import re

U64 = 0xFFFF_FFFF_FFFF_FFFF
ONE_BYTE = [bytes((value,)) for value in range(0x80)]

#: A varint below 2**63, below 2**28, and of an int32 that is not negative.
V9, V4 = rb"[\x80-\xff]{0,8}[\x00-\x7f]", rb"[\x80-\xff]{0,3}[\x00-\x7f]"
INT32 = re.compile(rb"[\x80-\xff]{0,3}[\x00-\x7f]|[\x80-\xff]{4}[\x00-\x07]", re.DOTALL)


def varint_value(varint: bytes) -> int:
    """The value of a varint the patterns above matched (so well formed, below 2**63);
    ids and lengths below 2**21 without a loop."""
    size = len(varint)
    if size == 1:
        return varint[0]
    if size == 2:
        return (varint[0] & 0x7F) | varint[1] << 7
    if size == 3:
        return (varint[0] & 0x7F) | (varint[1] & 0x7F) << 7 | varint[2] << 14
    value = shift = 0
    for byte in varint:
        value |= (byte & 0x7F) << shift
        shift += 7
    return value


def uvarint(value: int) -> bytes:
    """Protobuf's varint of an int64/uint64/enum value (negatives as their 64-bit two's
    complement, ten bytes, as protobuf writes them); ids below 2**21 without a loop."""
    if 0 <= value < 0x80:
        return ONE_BYTE[value]
    if 0 < value < 0x4000:
        return bytes((0x80 | (value & 0x7F), value >> 7))
    if 0 < value < 0x20_0000:
        return bytes((0x80 | (value & 0x7F), 0x80 | ((value >> 7) & 0x7F), value >> 14))
    value &= U64
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)
