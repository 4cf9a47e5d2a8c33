"""api/wire.py: ids, headers and batch framing are parsed strictly and refused clearly."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, strategies as st

from api import wire
from bookie.errors import BadRequest, TooLarge


@pytest.mark.parametrize("text", ["", "²", "١٢", "+1", " 1", "1_0", "0x10", "1.0",
                                  "99999999999999999999", "9223372036854775808", "--1"])
def test_non_decimal_or_out_of_range_ids_are_bad_requests(text):
    with pytest.raises(BadRequest):
        wire.parse_i64(text, "id")


@given(st.integers(-(2**63), 2**63 - 1))
def test_every_i64_round_trips(value):
    assert wire.parse_i64(str(value), "id") == value


def test_ledger_ids_are_non_negative_and_entry_minus_one_only_for_reads():
    assert wire.parse_ledger_id("0") == 0
    with pytest.raises(BadRequest):
        wire.parse_ledger_id("-1")
    assert wire.parse_entry_id("-1", allow_last=True) == -1
    with pytest.raises(BadRequest):
        wire.parse_entry_id("-1")


@given(st.lists(st.binary(min_size=1, max_size=100), min_size=1, max_size=20))
def test_batches_round_trip(entries):
    assert wire.decode_batch(wire.encode_batch(entries), 100, 100) == entries


@pytest.mark.parametrize("body, error", [
    (b"", BadRequest), (b"\x00\x00", BadRequest), (struct.pack(">i", 0), BadRequest),
    (struct.pack(">i", -5) + b"x", BadRequest), (struct.pack(">i", 10) + b"short", BadRequest),
    (struct.pack(">i", 101) + b"x" * 101, TooLarge)])
def test_bad_batch_framing_names_the_problem(body, error):
    with pytest.raises(error):
        wire.decode_batch(body, 100, 100)


def test_write_flags_and_master_key():
    assert wire.parse_write_flags("deferred-sync") is True
    assert wire.parse_write_flags(None) is False
    with pytest.raises(BadRequest):
        wire.parse_write_flags("sync-later")
    assert wire.parse_master_key("00ff") == b"\x00\xff"
    for bad in (None, "zz", ""):
        with pytest.raises(BadRequest):
            wire.parse_master_key(bad)


@pytest.mark.parametrize("value", ["ab cd", "abc", " abcd", "", "zz"])
def test_a_master_key_is_pairs_of_hex_digits_and_nothing_else(value):
    """As the OpenAPI pattern says (issue 13): bytes.fromhex alone took spaces between pairs."""
    with pytest.raises(BadRequest):
        wire.parse_master_key(value)
    assert wire.parse_master_key("aBcd") == b"\xab\xcd"
