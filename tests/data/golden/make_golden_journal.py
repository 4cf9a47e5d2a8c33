"""Writes V4, V5 and V6 journals the way docs/formats.md §3 says Apache BookKeeper writes them.

    .venv/bin/python tests/data/golden/make_golden_journal.py

Independent of the project's journal code on purpose: every byte comes from ``struct`` and
the tables of docs/formats.md (§3.2 header, §3.3 framing, §3.4 record kinds, §3.5 padding with
Journal.writePaddingBytes' rule, §3.6 a preallocated zero tail, §6 entry framing and
digests through zlib and the crc32c package), so the shell's readers are checked against
the contract, not against our writer.

journal-v6.txn  V6: the worked example of §3.10 (key, "hello", padLen 415), then groups
                whose padding has gap 8 (padLen 0), gap 7 (511), gap 5 (509), gap 1 (505),
                gap 9 (1), none (a group ending aligned); a fence, a CRC32 ledger and an
                explicit-LAC record (V6 only)
journal-v5.txn  V5: the same kinds but no explicit LAC, padded groups
journal-v4.txn  V4: 8-byte header, key, fence and data records back to back, no padding
Each ends in 4096 bytes of preallocated zeros. ``GOLDEN_FACTS`` lists what readers must
find; tests/shell/test_shell_bookkeeper_files.py regenerates the files in memory and
compares them byte for byte before reading them.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib

import crc32c

GOLDEN_DIR = os.path.dirname(os.path.abspath(__file__))
ALIGN = 512
ZERO_TAIL = 4096
KEY_SECRET = hashlib.sha1(b"ledger" + b"secret").digest()  # §6.3: e793cbc3...
LEDGER_KEY, FENCE_KEY, EXPLICIT_LAC = -0x1000, -0x2000, -0x8000


def header(version: int) -> bytes:
    """§3.2: BKLG, version, and for V5+ zeros to 512 bytes."""
    head = b"BKLG" + struct.pack(">i", version)
    return head + bytes(ALIGN - 8) if version >= 5 else head


def crc32c_entry(ledger_id: int, entry_id: int, lac: int, length: int,
                 payload: bytes) -> bytes:
    """§6.1, CRC32C (§6.2): the digest over bytes 0..31 then the payload, an i32."""
    head = struct.pack(">qqqq", ledger_id, entry_id, lac, length)
    return head + struct.pack(">I", crc32c.crc32c(payload, crc32c.crc32c(head))) + payload


def crc32_entry(ledger_id: int, entry_id: int, lac: int, length: int, payload: bytes) -> bytes:
    """§6.2 CRC32: an i64 of 4 zero bytes then the zlib CRC."""
    head = struct.pack(">qqqq", ledger_id, entry_id, lac, length)
    return head + struct.pack(">Q", zlib.crc32(payload, zlib.crc32(head))) + payload


def data_record(entry: bytes) -> bytes:
    return struct.pack(">i", len(entry)) + entry


def key_record(ledger_id: int, key: bytes) -> bytes:
    """§3.4 master key: len 20 + keyLen, ledgerId, -0x1000, keyLen, key."""
    return struct.pack(">iqqi", 20 + len(key), ledger_id, LEDGER_KEY, len(key)) + key


def fence_record(ledger_id: int) -> bytes:
    return struct.pack(">iqq", 16, ledger_id, FENCE_KEY)


def lac_record(ledger_id: int, lac: int) -> bytes:
    """§3.4 explicit LAC whose body (§6.4) carries a CRC32C digest over its 16 bytes."""
    body = struct.pack(">qq", ledger_id, lac)
    body += struct.pack(">I", crc32c.crc32c(body))
    return struct.pack(">iqqi", 20 + len(body), ledger_id, EXPLICIT_LAC, len(body)) + body


def padding(position: int) -> bytes:
    """§3.5 Journal.writePaddingBytes for A = 512."""
    remainder = position % ALIGN
    if remainder == 0:
        return b""
    gap = ALIGN - remainder
    pad_len = gap - 8 if gap >= 8 else ALIGN - (8 - gap)
    return struct.pack(">ii", -0x100, pad_len) + bytes(pad_len)


def sized_record(ledger_id: int, entry_id: int, size: int) -> bytes:
    """A CRC32C data record of exactly ``size`` bytes (len field included; size >= 40)."""
    payload = bytes((entry_id + i) % 251 for i in range(size - 4 - 36))
    return data_record(crc32c_entry(ledger_id, entry_id, entry_id - 1, size, payload))


def journal(version: int, groups: list[list[bytes]]) -> bytes:
    """Header, then each group followed by its padding (V5+), then the zero tail (§3.6)."""
    body = bytearray(header(version))
    for group in groups:
        for record in group:
            body += record
        if version >= 5:
            body += padding(len(body))
    return bytes(body) + bytes(ZERO_TAIL)


def v6_groups() -> list[list[bytes]]:
    ledger2_key = hashlib.sha1(b"ledger" + b"other").digest()
    return [
        [key_record(1, KEY_SECRET), data_record(crc32c_entry(1, 0, -1, 5, b"hello"))],
        [sized_record(1, 1, 504)],                 # gap 8: padLen 0
        [sized_record(1, 2, 505)],                 # gap 7: padLen 511
        [sized_record(1, 3, 507)],                 # gap 5: padLen 509
        [sized_record(1, 4, 511)],                 # gap 1: padLen 505
        [sized_record(1, 5, 503)],                 # gap 9: padLen 1
        [sized_record(1, 6, 512)],                 # aligned: no padding record
        [key_record(2, ledger2_key),
         data_record(crc32_entry(2, 0, -1, 3, b"abc")), lac_record(1, 6), fence_record(2)],
    ]


def v5_groups() -> list[list[bytes]]:
    return [group for group in v6_groups()[:-1]] + [
        [key_record(3, KEY_SECRET), data_record(crc32_entry(3, 0, -1, 3, b"xyz")),
         fence_record(3)]]


def v4_groups() -> list[list[bytes]]:
    return [[key_record(1, KEY_SECRET), data_record(crc32c_entry(1, 0, -1, 5, b"hello")),
             sized_record(1, 1, 100), fence_record(1),
             key_record(4, KEY_SECRET), data_record(crc32_entry(4, 0, -1, 2, b"v4"))]]


FILES = {"journal-v6.txn": (6, v6_groups), "journal-v5.txn": (5, v5_groups),
         "journal-v4.txn": (4, v4_groups)}

#: What a reader must find: data records, meta records by kind, padding records, data end.
GOLDEN_FACTS = {
    "journal-v6.txn": {"data": 8, "ledger_key": 2, "fence": 1, "explicit_lac": 1,
                       "padding": 7, "end": 6144},
    "journal-v5.txn": {"data": 8, "ledger_key": 2, "fence": 1, "explicit_lac": 0,
                       "padding": 7, "end": 6144},
    "journal-v4.txn": {"data": 3, "ledger_key": 2, "fence": 1, "explicit_lac": 0,
                       "padding": 0, "end": 8 + 44 + 45 + 100 + 20 + 44 + 46},
}


def build(name: str) -> bytes:
    version, groups = FILES[name]
    return journal(version, groups())


def main() -> None:
    for name in FILES:
        data = build(name)
        with open(os.path.join(GOLDEN_DIR, name), "wb") as handle:
            handle.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
