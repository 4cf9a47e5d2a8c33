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
from bookie.errors import IOFailure

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


def _reference_entry(digest_type: DigestType, ledger_id: int, entry_id: int, payload: bytes,
                     password: bytes) -> bytes:
    header = struct.pack(">qqqq", ledger_id, entry_id, entry_id - 1, entry_id * 7)
    return header + reference_digest(digest_type, header + payload, password) + payload


@settings(max_examples=200, deadline=None)
@given(digests, ids, st.lists(st.tuples(payloads, st.booleans()), min_size=1, max_size=12),
       passwords, st.data())
def test_a_batch_body_is_split_and_checked_as_each_entry_alone(digest_type, ledger_id, items,
                                                               password, data):
    """decode_frames (a held read's reply, in one pass) keeps exactly the frames that decode
    keeps alone, with the same fields, and names the ones it refuses; with framed=True the
    values are the framed entries themselves."""
    codec = LedgerCodec.for_password(ledger_id, password, digest_type)
    frames, expected_good, expected_bad = [], [], []
    for entry_id, (payload, damaged) in enumerate(items):
        entry = bytearray(_reference_entry(digest_type, ledger_id, entry_id, payload, password))
        if damaged and digest_type is not DigestType.DUMMY:  # DUMMY: nothing to find
            at = data.draw(st.integers(min_value=32, max_value=len(entry) - 1))
            entry[at] ^= 0x01  # the digest or the payload: what a damaged copy holds
            expected_bad.append(entry_id)
        else:
            expected_good.append((entry_id, bytes(entry)))
        frames.append(bytes(entry))
    body = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    good, bad = codec.decode_frames(body)
    assert [(i, e) for i, e in good] == [(i, codec.decode(f, i)) for i, f in expected_good]
    assert [m.entry_id for m in bad] == expected_bad
    assert all(isinstance(m, DigestMismatch) for m in bad)
    framed, _ = codec.decode_frames(body, framed=True)
    assert [(i, bytes(f)) for i, f in framed] == expected_good


@pytest.mark.parametrize("digest_type", list(DigestType))
def test_a_batch_body_with_broken_framing_is_refused_whole(digest_type):
    codec = LedgerCodec.for_password(3, b"pw", digest_type)
    frame = codec.frame(0, -1, 1, b"x")
    whole = struct.pack(">i", len(frame)) + frame
    for body in (whole[:-1], whole + b"\0\0", struct.pack(">i", 0) + whole,
                 struct.pack(">i", -5) + whole):
        with pytest.raises(IOFailure):
            codec.decode_frames(body)


@pytest.mark.parametrize("digest_type", list(DigestType))
def test_a_frame_of_another_ledger_or_too_short_is_refused_alone(digest_type):
    codec = LedgerCodec.for_password(3, b"pw", digest_type)
    other = LedgerCodec.for_password(4, b"pw", digest_type)
    ours = [codec.frame(0, -1, 1, b"a"), other.frame(1, 0, 2, b"b"), b"short",
            codec.frame(2, 1, 3, b"c")]
    good, bad = codec.decode_frames(b"".join(struct.pack(">i", len(f)) + f for f in ours))
    assert [i for i, _ in good] == [0, 2] and len(bad) == 2
