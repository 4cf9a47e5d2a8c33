"""docs/formats.md §7 byte for byte: ``locations`` and ``ledgers`` keys and values.

Literal bytes copied from docs/formats.md (and hand-built BookKeeper ``LedgerData`` values), so a
codec change that breaks the contract fails here even if it still round-trips.
"""

from __future__ import annotations

import pytest

from bookie.entry import DigestType, master_key
from ledgerindex import keys
from ledgerindex.keys import LedgerState, LedgerStateCorrupt

SECRET_KEY = bytes.fromhex("e793cbc379107648537183605cd361d3bb789a39")  # docs/formats.md §6.3


def test_secret_master_key_matches_formats():
    assert master_key(b"secret") == SECRET_KEY


def test_formats_7_2_example_byte_for_byte():
    # "ledger with the secret key, not fenced, no LAC:
    #  42 4B 4C 44 01 01 03 14 e7 93 … 9a 39 00 00 00 00 (32 bytes, digest type CRC32C)"
    # Version 1, as docs/formats.md gives it, is read: its usage counters are not known (K5).
    expected = bytes.fromhex("424B4C44 01 01 03 14".replace(" ", "")) + SECRET_KEY + bytes(4)
    state = LedgerState(exists=True, fenced=False, digest_type=DigestType.CRC32C,
                        master_key=SECRET_KEY)
    assert len(expected) == 32 and expected[8:10] == b"\xe7\x93" and expected[26:28] == b"\x9a\x39"
    assert keys.decode_ledger_state(expected) == state
    assert not keys.decode_ledger_state(expected).usage_known


def test_version_2_is_the_example_plus_the_usage_trailer():
    # The older BKLD value, still read while an index is carried over: version byte 02 and,
    # after the explicit-LAC body, i64 entries and i64 bytes, big-endian.
    state = LedgerState(digest_type=DigestType.CRC32C, master_key=SECRET_KEY,
                        entry_count=10, byte_count=0x0102)
    value = (bytes.fromhex("424B4C44 02 01 03 14".replace(" ", "")) + SECRET_KEY + bytes(4)
             + bytes.fromhex("000000000000000A" "0000000000000102"))
    assert keys.decode_ledger_value(value) == (state, keys.FORM_BKLD)


def test_formats_7_2_ledger_data_example_byte_for_byte():
    # "ledger with the secret key, not fenced, no LAC, 5 entries of 205 bytes, CRC32C:
    #  08 01 10 00 1a 14 e7 93 … 9a 39 c2 3e 09 08 01 10 03 18 05 20 cd 01"
    expected = (bytes.fromhex("0801 1000 1a14".replace(" ", "")) + SECRET_KEY
                + bytes.fromhex("c23e 09 0801 1003 1805 20cd01".replace(" ", "")))
    state = LedgerState(digest_type=DigestType.CRC32C, master_key=SECRET_KEY,
                        entry_count=5, byte_count=205)
    assert keys.encode_ledger_state(state) == expected
    assert keys.decode_ledger_state(expected) == state


def test_fields_1_to_5_then_the_extension_with_every_flag():
    body = bytes(range(20))
    value = keys.encode_ledger_state(LedgerState(fenced=True, limbo=True, digest_type=1,
                                                 master_key=SECRET_KEY, explicit_lac=body))
    assert value == (bytes.fromhex("0801 1001 1a14".replace(" ", "")) + SECRET_KEY
                     + bytes.fromhex("2214") + body + bytes.fromhex("2801")
                     + bytes.fromhex("c23e 04 0801 1001".replace(" ", "")))


def test_the_projects_negative_keys_are_bookkeepers_to_skip():
    assert keys.encode_ledger_key(keys.USAGE_PENDING_LEDGER_ID) == bytes.fromhex(
        "FFFFFFFFFFFF4FF4")
    assert keys.encode_ledger_key(keys.WRITER_MARK_LEDGER_ID) == bytes.fromhex(
        "FFFFFFFFFFFF4FF2")
    assert keys.encode_ledger_key(keys.FORMAT_LEDGER_ID) == bytes.fromhex("FFFFFFFFFFFF4FF1")
    assert keys.encode_tombstone_key(9) == bytes.fromhex("FFFFFFFFFFFF4FF3" "0000000000000009")
    assert keys.USAGE_PENDING_LEDGER_ID != keys.STORAGE_STATE_LEDGER_ID
    # A marker: exists=false, fenced=false, masterKey="", extension {version 1, ids 3, 7}.
    assert keys.encode_usage_pending([7, 3, 7]) == bytes.fromhex(
        "0800 1000 1a00 c23e 06 0801 2803 2807".replace(" ", ""))
    assert keys.encode_marker() == bytes.fromhex("0800 1000 1a00 c23e 02 0801".replace(" ", ""))


def test_bookkeeper_ledger_data_in_ledgers_is_read():
    # LedgerData{exists: true, fenced: true, masterKey: <secret>, explicitLac: <16 bytes>,
    # limbo: false}: tags 08 10 1A 22 28 in field-number order, as protobuf-java writes.
    lac_body = bytes.fromhex("0000000000000001" "0000000000000005")
    value = (bytes.fromhex("0801" "1001" "1a14") + SECRET_KEY
             + bytes.fromhex("2210") + lac_body + bytes.fromhex("2800"))
    assert value[0] == 0x08
    assert keys.decode_ledger_state(value) == LedgerState(
        exists=True, fenced=True, limbo=False, digest_type=0, master_key=SECRET_KEY,
        explicit_lac=lac_body)


def test_first_byte_42_is_bkld_never_ledger_data():
    assert (0x42 >> 3, 0x42 & 0x07) == (8, 2)  # would be field 8, length-delimited
    with pytest.raises(LedgerStateCorrupt, match="magic"):
        keys.decode_ledger_state(b"\x42" + bytes(11))


def test_storage_state_flags_key():
    assert keys.encode_ledger_key(-0xEEFD) == bytes.fromhex("FFFFFFFFFFFF1103")


def test_locations_key_and_value_layout():
    assert keys.encode_location_key(0x0102, 0x0304) == bytes.fromhex(
        "0000000000000102" "0000000000000304")
    # docs/formats.md §5.3: log 2a, first entry (pos 1028) = 0x0000002A00000404.
    assert keys.encode_location_value((0x2A << 32) | 1028) == bytes.fromhex("0000002A00000404")
