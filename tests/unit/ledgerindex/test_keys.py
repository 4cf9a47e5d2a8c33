"""ledgerindex.keys: location and ledger codecs, BKLD LedgerState, BookKeeper LedgerData."""

from __future__ import annotations

import struct

import pytest

from bookie.entry import DigestType, master_key
from ledgerindex import keys
from ledgerindex.keys import LedgerState, LedgerStateCorrupt

SECRET_KEY = master_key(b"secret")


def pb_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def pb_field(number: int, value: int | bytes) -> bytes:
    """One proto2 field: varint for ints (wire type 0), length-delimited for bytes (2)."""
    if isinstance(value, int):
        return pb_varint(number << 3) + pb_varint(value)
    return pb_varint(number << 3 | 2) + pb_varint(len(value)) + value


def ledger_data(exists=True, fenced=False, key=SECRET_KEY, lac=None, limbo=None) -> bytes:
    """BookKeeper's LedgerData as protobuf-java writes it: fields in number order."""
    out = pb_field(1, int(exists)) + pb_field(2, int(fenced)) + pb_field(3, key)
    if lac is not None:
        out += pb_field(4, lac)
    if limbo is not None:
        out += pb_field(5, int(limbo))
    return out


# --- locations ------------------------------------------------------------------------


def test_location_key_is_ledger_then_entry_big_endian():
    key = keys.encode_location_key(1, 2)
    assert key == bytes.fromhex("0000000000000001" "0000000000000002")
    assert keys.decode_location_key(key) == (1, 2)


def test_location_value_of_formats_example():
    # docs/formats.md §5.3: log 2a, first entry at pos 1028.
    value = keys.encode_location_value(0x2A << 32 | 1028)
    assert value == bytes.fromhex("0000002a00000404")
    assert keys.decode_location_value(value) == 0x0000002A00000404


@pytest.mark.parametrize("decode, size", [(keys.decode_location_key, 16),
                                          (keys.decode_location_value, 8),
                                          (keys.decode_ledger_key, 8)])
def test_fixed_size_decoders_reject_other_lengths(decode, size):
    with pytest.raises(ValueError, match=f"expected {size}"):
        decode(bytes(size - 1))
    with pytest.raises(ValueError, match=f"expected {size}"):
        decode(bytes(size + 1))


def test_storage_state_key_is_negative_ledger_id():
    key = keys.encode_ledger_key(keys.STORAGE_STATE_LEDGER_ID)
    assert key == bytes.fromhex("ffffffffffff1103")
    assert keys.decode_ledger_key(key) == -0xEEFD


# --- BKLD ----------------------------------------------------------------------------


def test_formats_example_secret_key_crc32c_is_32_bytes():
    state = LedgerState(master_key=SECRET_KEY, digest_type=DigestType.CRC32C)
    value = keys.encode_ledger_state(state)
    assert value[:32] == (bytes.fromhex("424b4c44 02 01 03 14".replace(" ", ""))
                          + SECRET_KEY + bytes(4))
    assert value[32:] == b"\xff" * 16 and len(value) == 48  # usage not known (K5)
    assert keys.decode_ledger_state(value) == state
    v1 = bytes.fromhex("424b4c44 01 01 03 14".replace(" ", "")) + SECRET_KEY + bytes(4)
    assert keys.decode_ledger_state(v1) == state


def test_every_flag_and_explicit_lac_round_trip():
    body = bytes(range(20))
    state = LedgerState(exists=True, fenced=True, limbo=True, digest_type=2,
                        master_key=SECRET_KEY, explicit_lac=body)
    value = keys.encode_ledger_state(state)
    assert value[5] == 0x0F
    assert value[28:32] == struct.pack(">I", 20) and value[32:52] == body
    assert keys.decode_ledger_state(value) == state


def test_tombstone_has_exists_flag_clear():
    value = keys.encode_ledger_state(LedgerState(exists=False, master_key=SECRET_KEY))
    assert value[5] == 0x00
    assert keys.decode_ledger_state(value).exists is False


def test_empty_explicit_lac_with_flag_set_is_not_none():
    state = LedgerState(explicit_lac=b"")
    value = keys.encode_ledger_state(state)
    assert value == b"BKLD\x02\x09\x00\x00" + bytes(4) + b"\xff" * 16
    assert keys.decode_ledger_state(value).explicit_lac == b""


def test_with_returns_a_changed_copy():
    state = LedgerState(master_key=SECRET_KEY)
    fenced = state.with_(fenced=True)
    assert fenced.fenced and not state.fenced and fenced.master_key == SECRET_KEY


def test_encoder_refuses_what_the_struct_cannot_hold():
    with pytest.raises(ValueError, match="digest type 5"):
        keys.encode_ledger_state(LedgerState(digest_type=5))
    with pytest.raises(ValueError, match="256 bytes"):
        keys.encode_ledger_state(LedgerState(master_key=bytes(256)))


GOOD = keys.encode_ledger_state(LedgerState(master_key=SECRET_KEY, digest_type=3,
                                            entry_count=5, byte_count=50))


@pytest.mark.parametrize("value, reason", [
    (b"", "empty"),
    (b"\x00" + GOOD[1:], "starts with byte 00"),
    (b"\xff" + GOOD[1:], "starts with byte ff"),
    (b"BKLX" + GOOD[4:], "magic 424b4c58 is not BKLD"),
    (GOOD[:4] + b"\x03" + GOOD[5:], r"version 3 is not one of \(1, 2\)"),
    (GOOD[:5] + b"\x11" + GOOD[6:], "unknown bits 0x10"),
    (GOOD[:6] + b"\x09" + GOOD[7:], "digest type 9"),
    (GOOD[:11], "shorter than the 12-byte minimum"),
    (GOOD[:7] + b"\x30" + GOOD[8:], "master key length 48 runs past the end"),
    (GOOD[:28] + struct.pack(">I", 1), "explicit-LAC length 1 at offset 28 runs past"),
    (GOOD + b"\x00", "1 trailing bytes after offset 48"),
    (GOOD[:28] + struct.pack(">I", 1) + b"\x00" + GOOD[32:], "length 1 with flag 0x08"),
    (GOOD[:40], "usage counters at offset 32 run past the end"),
    (GOOD[:32] + struct.pack(">qq", -1, 50), r"usage counters \(-1, 50\)"),
    (GOOD[:4] + b"\x01" + GOOD[5:], "16 trailing bytes after offset 32"),
], ids=lambda case: case if isinstance(case, str) else "")
def test_corrupt_bkld_names_the_rule(value, reason):
    with pytest.raises(LedgerStateCorrupt, match=reason):
        keys.decode_ledger_state(value)


def test_corrupt_is_a_value_error():
    assert issubclass(LedgerStateCorrupt, ValueError)


# --- LedgerData ----------------------------------------------------------------------


def test_bookkeeper_ledger_data_starts_with_08_and_decodes():
    value = ledger_data(fenced=True)
    assert value[:1] == b"\x08"
    assert keys.decode_ledger_state(value) == LedgerState(
        exists=True, fenced=True, master_key=SECRET_KEY, digest_type=0)


def test_ledger_data_optional_fields():
    body = bytes(24)
    state = keys.decode_ledger_state(ledger_data(lac=body, limbo=True))
    assert state.explicit_lac == body and state.limbo is True


def test_ledger_data_unknown_fields_of_every_wire_type_are_skipped():
    unknown = (pb_field(6, 300) + pb_field(7, b"future")
               + pb_varint(8 << 3 | 1) + bytes(8) + pb_varint(9 << 3 | 5) + bytes(4))
    value = ledger_data()[:2] + unknown + ledger_data()[2:]
    assert keys.decode_ledger_state(value) == LedgerState(master_key=SECRET_KEY)


def test_ledger_data_last_occurrence_wins_and_bool_is_nonzero():
    value = ledger_data() + pb_field(2, 300)
    assert keys.decode_ledger_state(value).fenced is True


@pytest.mark.parametrize("value, reason", [
    (pb_field(1, 1) + pb_field(2, 0), "lacks required field masterKey"),
    (pb_field(1, 1) + pb_field(3, SECRET_KEY), "lacks required field fenced"),
    (ledger_data()[:-1], "length 20 runs past the end"),
    (ledger_data() + b"\x30", "varint at offset 27 runs past the end"),
    (ledger_data() + b"\x30" + b"\xff" * 10 + b"\x01", "longer than 10 bytes"),
    (ledger_data() + b"\x30" + b"\xff" * 9 + b"\x7f", "exceeds 64 bits"),
    (ledger_data() + pb_field(4, 1), "explicitLac \\(4\\) at offset 26 has wire type 0"),
    (ledger_data() + pb_field(2, b"\x01"), "fenced \\(2\\) at offset 26 has wire type 2"),
    (ledger_data() + b"\x33", "unsupported wire type 3"),
    (ledger_data() + b"\x00\x01", "field number 0"),
    (ledger_data() + pb_varint(9 << 3 | 5) + bytes(3), "field 9 at offset 26 runs past"),
], ids=lambda case: case if isinstance(case, str) else "")
def test_corrupt_ledger_data_names_the_rule(value, reason):
    with pytest.raises(LedgerStateCorrupt, match=reason):
        keys.decode_ledger_state(value)


def test_byte_42_cannot_start_a_ledger_data():
    # K3: tag 0x42 would be field 8, wire type 2, so the first byte decides the format.
    assert (0x42 >> 3, 0x42 & 7) == (8, 2)
