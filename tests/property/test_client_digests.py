"""Digests agree with an independent implementation, and framing round-trips.

The references are crcmod's predefined 'crc-32c' and 'crc-32' and the standard library's
hmac + hashlib, never bookie.entry's own code; the byte layout is rebuilt here with struct
from docs/formats.md §6 (i64 fields, CRC32 as an i64 with zero high bytes, CRC32C as an i32).
"""

from __future__ import annotations

import hashlib
import hmac
import struct

import crcmod.predefined
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.client import DigestMismatch, LedgerCodec
from bookie import entry as framing
from bookie.entry import DigestType

CRC32C = crcmod.predefined.mkCrcFun("crc-32c")
CRC32 = crcmod.predefined.mkCrcFun("crc-32")

i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
ids = st.integers(min_value=0, max_value=2**63 - 1)
payloads = st.binary(max_size=4096)
passwords = st.binary(max_size=64)
digests = st.sampled_from(list(DigestType))


def reference_digest(digest_type: DigestType, covered: bytes, password: bytes) -> bytes:
    if digest_type is DigestType.CRC32C:
        return struct.pack(">I", CRC32C(covered))
    if digest_type is DigestType.CRC32:
        return struct.pack(">Q", CRC32(covered))  # 4 zero bytes, then the CRC
    if digest_type is DigestType.MAC:
        key = hashlib.sha1(b"mac" + password).digest()
        return hmac.new(key, covered, hashlib.sha1).digest()
    return b""


def test_the_references_match_formats_md_check_values():
    assert CRC32(b"123456789") == 0xCBF43926
    assert CRC32C(b"123456789") == 0xE3069283
    codec = LedgerCodec.for_password(1, b"secret", DigestType.CRC32C)
    assert codec.frame(0, -1, 5, b"hello").hex() == (
        "0000000000000001" "0000000000000000" "ffffffffffffffff" "0000000000000005"
        "e3a5f74d" "68656c6c6f")
    assert codec.master_key.hex() == "e793cbc379107648537183605cd361d3bb789a39"


@settings(max_examples=300, deadline=None)
@given(digests, ids, ids, i64, i64, payloads, passwords)
def test_entry_digests_agree_with_crcmod_and_hmac(digest_type, ledger_id, entry_id, lac,
                                                  length, payload, password):
    codec = LedgerCodec.for_password(ledger_id, password, digest_type)
    framed = codec.frame(entry_id, lac, length, payload)
    header = struct.pack(">qqqq", ledger_id, entry_id, lac, length)
    expected = reference_digest(digest_type, header + payload, password)
    assert framed == header + expected + payload
    assert codec.master_key == hashlib.sha1(b"ledger" + password).digest()


@settings(max_examples=300, deadline=None)
@given(digests, ids, i64, passwords)
def test_explicit_lac_bodies_agree_with_crcmod_and_hmac(digest_type, ledger_id, lac, password):
    codec = LedgerCodec.for_password(ledger_id, password, digest_type)
    head = struct.pack(">qq", ledger_id, lac)
    body = codec.lac_body(lac)
    assert body == head + reference_digest(digest_type, head, password)
    assert framing.parse_lac_body(body) == (ledger_id, lac)
    assert framing.lac_digest_ok(body, digest_type, codec.mac_key)


@settings(max_examples=300, deadline=None)
@given(digests, ids, ids, i64, i64, payloads, passwords)
def test_framing_round_trips_through_the_readers_decoder(digest_type, ledger_id, entry_id,
                                                         lac, length, payload, password):
    codec = LedgerCodec.for_password(ledger_id, password, digest_type)
    framed = codec.frame(entry_id, lac, length, payload)
    entry = codec.decode(framed, entry_id)
    assert (entry.ledger_id, entry.entry_id, entry.lac, entry.length, entry.payload) == (
        ledger_id, entry_id, lac, length, payload)
    assert framing.entry_ids(framed) == (ledger_id, entry_id)
    assert framing.piggybacked_lac(framed) == lac
    assert framing.payload_of(framed, digest_type) == payload


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([DigestType.CRC32C, DigestType.CRC32, DigestType.MAC]), ids, ids,
       payloads, passwords, st.data())
def test_any_single_flipped_bit_is_caught(digest_type, ledger_id, entry_id, payload, password,
                                          data):
    codec = LedgerCodec.for_password(ledger_id, password, digest_type)
    framed = bytearray(codec.frame(entry_id, entry_id - 1, len(payload), payload))
    bit = data.draw(st.integers(min_value=0, max_value=len(framed) * 8 - 1))
    framed[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(DigestMismatch):
        codec.decode(bytes(framed), entry_id)
