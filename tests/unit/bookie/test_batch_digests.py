"""The batch add's digest loop (``bookie.entry.first_bad_digest``, issue 18) finds the same
entries the per-entry check finds, for every verifiable digest type; its CRC32C answers are
cross-checked with crcmod (the independent reference)."""

from __future__ import annotations

import struct

import crcmod.predefined
import pytest

from bookie.entry import DigestType, entry_digest_ok, first_bad_digest, frame_entry

CRC32C_REFERENCE = crcmod.predefined.mkCrcFun("crc-32c")
CRC32_REFERENCE = crcmod.predefined.mkCrcFun("crc-32")


@pytest.mark.parametrize("digest_type", [DigestType.CRC32C, DigestType.CRC32])
def test_first_bad_digest_names_the_first_damaged_entry(digest_type):
    entries = [frame_entry(9, e, e - 1, e * 10, bytes([e]) * (10 + e), digest_type)
               for e in range(50)]
    assert first_bad_digest(entries, digest_type) == -1
    for damaged in (0, 17, 49):
        copy = list(entries)
        body = bytearray(copy[damaged])
        body[-1] ^= 1  # a payload bit
        copy[damaged] = bytes(body)
        assert first_bad_digest(copy, digest_type) == damaged
        assert [i for i, e in enumerate(copy) if not entry_digest_ok(e, digest_type)] == \
            [damaged]
    if digest_type is DigestType.CRC32C:
        for entry in entries:
            assert struct.unpack(">I", entry[32:36])[0] == CRC32C_REFERENCE(
                entry[:32] + entry[36:])
    else:  # entry_digest_ok's CRC32 fast path (the binary protocol's adds), against crcmod
        for entry in entries:
            assert struct.unpack(">Q", entry[32:40])[0] == CRC32_REFERENCE(
                entry[:32] + entry[40:])


@pytest.mark.parametrize("digest_type", [DigestType.CRC32C, DigestType.CRC32])
def test_a_damaged_header_or_stored_digest_is_caught_too(digest_type):
    entries = [frame_entry(9, e, -1, 0, b"x" * 20, digest_type) for e in range(3)]
    for at in (20, 33):  # the piggybacked LAC's bytes are covered; so is the digest
        body = bytearray(entries[1])
        body[at] ^= 0x80
        assert first_bad_digest([entries[0], bytes(body), entries[2]], digest_type) == 1
