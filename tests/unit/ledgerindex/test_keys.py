"""ledgerindex.keys: location and ledger codecs: LedgerData with the bookie extension, the
older BKLD LedgerState, markers and tombstone keys."""

from __future__ import annotations

import struct

import pytest

from bookie.entry import DigestType, master_key
from ledgerindex import keys
from ledgerindex.keys import LedgerState, LedgerStateCorrupt
from tests.support.legacy_ledger_state import encode_bkld

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


# --- today's value: LedgerData with the bookie extension ------------------------------


def test_design_example_ledger_with_usage_is_ledger_data_then_the_extension():
    state = LedgerState(master_key=SECRET_KEY, digest_type=DigestType.CRC32C,
                        entry_count=5, byte_count=205)
    value = keys.encode_ledger_state(state)
    assert value == (bytes.fromhex("08 01 10 00 1a 14".replace(" ", "")) + SECRET_KEY
                     + bytes.fromhex("c23e 09 0801 1003 1805 20cd01".replace(" ", "")))
    assert keys.decode_ledger_value(value) == (state, keys.FORM_OURS)


def test_fields_1_to_5_are_what_bookkeeper_writes_and_reads_first():
    body = bytes(range(20))
    state = LedgerState(fenced=True, limbo=True, digest_type=2, master_key=SECRET_KEY,
                        explicit_lac=body)
    value = keys.encode_ledger_state(state)
    assert value.startswith(ledger_data(fenced=True, lac=body, limbo=True) + b"\xc2\x3e")
    assert keys.decode_ledger_state(value) == state


def test_tombstone_value_is_exists_false_and_its_key_is_16_bytes_bookkeeper_skips():
    value = keys.encode_ledger_state(LedgerState(exists=False, master_key=SECRET_KEY))
    assert value[:2] == b"\x08\x00" and keys.decode_ledger_state(value).exists is False
    key = keys.encode_tombstone_key(7)
    assert key == bytes.fromhex("ffffffffffff4ff3" "0000000000000007")
    assert struct.unpack(">q", key[:8])[0] < 0  # BookKeeper parses only keys >= 0
    assert keys.decode_tombstone_key(key) == 7
    assert keys.decode_tombstone_key(keys.encode_ledger_key(7)) is None


def test_empty_explicit_lac_is_not_none():
    value = keys.encode_ledger_state(LedgerState(explicit_lac=b""))
    assert keys.decode_ledger_state(value).explicit_lac == b""


def test_a_value_without_the_extension_is_bookkeepers_with_nothing_known():
    state, form = keys.decode_ledger_value(ledger_data())
    assert form == keys.FORM_BOOKKEEPER
    assert state.digest_type == 0 and not state.usage_known


def test_markers_are_ledger_data_bookkeepers_check_parses():
    pending = keys.encode_usage_pending([7, 3, 7])
    assert pending[:6] == bytes.fromhex("080010001a00")  # exists, fenced, empty masterKey
    assert keys.decode_usage_pending(pending) == [3, 7]
    assert keys.decode_marker(keys.encode_marker(journal_id=0x1234)).journal_id == 0x1234


def test_the_raw_pending_form_is_read_only_while_allowed():
    raw = bytes.fromhex("0000000000000003" "0000000000000007")
    assert keys.decode_usage_pending(raw, raw_allowed=True) == [3, 7]
    with pytest.raises(LedgerStateCorrupt, match="not a marker"):
        keys.decode_usage_pending(raw)


EXT = pb_field(1, 1)


@pytest.mark.parametrize("extension, reason", [
    (pb_field(1, 2), "extension version 2 is not 1"),
    (pb_field(3, 5), "extension version None"),
    (EXT + pb_field(7, 1), "extension field 7 at offset 2 is not known"),
    (EXT + pb_field(3, 5), "one usage counter without the other"),
    (EXT + pb_field(2, b"x"), "field 2 at offset 2 has wire type 2"),
    (EXT + pb_field(2, 3) + pb_field(2, 3), "field 2 appears twice"),
], ids=lambda case: case if isinstance(case, str) else "")
def test_an_extension_not_wholly_understood_is_refused(extension, reason):
    with pytest.raises(LedgerStateCorrupt, match=reason):
        keys.decode_ledger_state(ledger_data() + pb_field(1000, extension))


def test_a_second_extension_and_marker_fields_on_a_ledger_are_refused():
    with pytest.raises(LedgerStateCorrupt, match="second extension"):
        keys.decode_ledger_state(ledger_data() + pb_field(1000, EXT) * 2)
    with pytest.raises(LedgerStateCorrupt, match="marker fields"):
        keys.decode_ledger_state(ledger_data() + pb_field(1000, EXT + pb_field(5, 1)))


def test_encoder_refuses_what_the_format_cannot_hold():
    with pytest.raises(ValueError, match="digest type 5"):
        keys.encode_ledger_state(LedgerState(digest_type=5))
    with pytest.raises(ValueError, match="neither both -1"):
        keys.encode_ledger_state(LedgerState(entry_count=-1, byte_count=3))


# --- the older BKLD value (read while an index is carried over) -----------------------


def test_formats_example_bkld_secret_key_crc32c_still_reads():
    state = LedgerState(master_key=SECRET_KEY, digest_type=DigestType.CRC32C)
    value = encode_bkld(state)
    assert value[:32] == (bytes.fromhex("424b4c44 02 01 03 14".replace(" ", ""))
                          + SECRET_KEY + bytes(4))
    assert value[32:] == b"\xff" * 16 and len(value) == 48  # usage not known (K5)
    assert keys.decode_ledger_value(value) == (state, keys.FORM_BKLD)
    v1 = bytes.fromhex("424b4c44 01 01 03 14".replace(" ", "")) + SECRET_KEY + bytes(4)
    assert keys.decode_ledger_state(v1) == state


def test_bkld_flags_and_explicit_lac_read():
    body = bytes(range(20))
    state = LedgerState(exists=False, fenced=True, limbo=True, digest_type=2,
                        master_key=SECRET_KEY, explicit_lac=body)
    value = encode_bkld(state)
    assert value[5] == 0x0E
    assert value[28:32] == struct.pack(">I", 20) and value[32:52] == body
    assert keys.decode_ledger_state(value) == state


def test_with_returns_a_changed_copy():
    state = LedgerState(master_key=SECRET_KEY)
    fenced = state.with_(fenced=True)
    assert fenced.fenced and not state.fenced and fenced.master_key == SECRET_KEY


GOOD = encode_bkld(LedgerState(master_key=SECRET_KEY, digest_type=3, entry_count=5,
                               byte_count=50))


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
