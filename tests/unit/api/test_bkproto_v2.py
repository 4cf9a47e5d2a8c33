"""api/bkproto/v2.py against golden bytes written out from BookKeeper's v2 layout (the
module docstring's tables, BookieProtocol.PacketHeader), not from the module's own output."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.bkproto import v2
from bookie.entry import frame_entry

KEY = bytes(range(20))
HELLO = frame_entry(1, 0, -1, 5, b"hello")  # docs/formats.md §6.5, 41 bytes
HELLO_HEX = ("0000000000000001" "0000000000000000" "ffffffffffffffff" "0000000000000005"
             "e3a5f74d" "68656c6c6f")
KEY_HEX = KEY.hex()


def test_the_packet_header_packs_as_packetheader_toint():
    assert v2.pack_header(2, v2.ADDENTRY, v2.FLAG_RECOVERY_ADD) == 0x02010002
    assert v2.pack_header(0, v2.READENTRY, v2.FLAG_DO_FENCING) == 0x00000002  # v0: opcode
    assert v2.unpack_header(0x02070005) == (2, 7, 5)
    assert v2.unpack_header(0x00000002) == (0, 2, 0)


def test_a_recovery_add_request_byte_for_byte():
    golden = bytes.fromhex("00000041" "02010002" + KEY_HEX + HELLO_HEX)
    assert HELLO.hex() == HELLO_HEX
    assert v2.encode_add(1, 0, KEY, HELLO, v2.FLAG_RECOVERY_ADD) == golden
    request = v2.decode_request(golden[4:])
    assert (request.version, request.opcode, request.ledger_id, request.entry_id) == \
        (2, v2.ADDENTRY, 1, 0)
    assert request.recovery and not request.fencing
    assert request.master_key == KEY and request.body == HELLO


def test_a_fencing_read_of_the_lac_entry_carries_the_key():
    golden = bytes.fromhex("00000028" "02020001" "0000000000000007" "ffffffffffffffff"
                           + KEY_HEX)
    assert v2.encode_read(7, v2.LAST_ADD_CONFIRMED, v2.FLAG_DO_FENCING, KEY) == golden
    request = v2.decode_request(golden[4:])
    assert request.fencing and request.master_key == KEY and request.entry_id == -1


def test_a_plain_read_and_a_version_0_read_carry_no_key():
    assert v2.encode_read(7, 3) == bytes.fromhex(
        "00000014" "02020000" "0000000000000007" "0000000000000003")
    oldest = bytes.fromhex("00000002" "0000000000000007" "0000000000000003")
    request = v2.decode_request(oldest)
    assert (request.version, request.opcode, request.master_key) == (0, v2.READENTRY, None)


def test_a_batch_read_request_byte_for_byte():
    golden = bytes.fromhex("00000028" "02070000" "0000000000000003" "000000000000000a"
                           "0000000000000063" "00000005" "0000000000100000")
    assert v2.encode_batch_read(3, 10, 99, 5, 1 << 20) == golden
    request = v2.decode_request(golden[4:])
    assert (request.ledger_id, request.entry_id, request.request_id, request.max_count,
            request.max_size) == (3, 10, 99, 5, 1 << 20)


def test_responses_byte_for_byte():
    assert v2.encode_response(2, v2.ADDENTRY, v2.EOK, 1, 0) == bytes.fromhex(
        "00000018" "02010000" "00000000" "0000000000000001" "0000000000000000")
    fenced = v2.encode_response(2, v2.ADDENTRY, v2.EFENCED, 1, 5)
    assert fenced[8:12] == bytes.fromhex("00000068")  # EFENCED = 104
    read = v2.encode_response(2, v2.READENTRY, v2.EOK, 1, 0, HELLO)
    assert read == bytes.fromhex("00000041" "02020000" "00000000" "0000000000000001"
                                 "0000000000000000" + HELLO_HEX)
    assert v2.decode_response(read[4:]).data == HELLO
    batch = v2.encode_batch_response(2, v2.EOK, 1, 0, 99, [HELLO, b"xy"])
    assert batch == bytes.fromhex(
        "00000053" "02070000" "00000000" "0000000000000001" "0000000000000000"
        "0000000000000063" "00000029" + HELLO_HEX + "00000002" "7879")
    answer = v2.decode_response(batch[4:])
    assert answer.request_id == 99 and answer.entries == (HELLO, b"xy")


@pytest.mark.parametrize("packet, why", [
    (b"\x02\x01", "no packet header"),
    (bytes.fromhex("02090000"), "unknown v2 opcode 9"),
    (bytes.fromhex("02020000" "0000000000000007"), "READENTRY of 8 bytes"),
    (bytes.fromhex("02020001" "0000000000000007" "0000000000000003" "0001"),
     "master key cut to 2 bytes"),
    (bytes.fromhex("02010000") + KEY + b"\x00" * 8, "ADDENTRY of 28 bytes"),
    (bytes.fromhex("02070000" "0000000000000003"), "BATCH_READ_ENTRY of 8 bytes"),
])
def test_a_frame_it_cannot_take_is_a_protocol_error_naming_why(packet, why):
    with pytest.raises(v2.ProtocolError) as error:
        v2.decode_request(packet)
    assert why in str(error.value)


def test_encoders_refuse_what_bookkeeper_could_not_parse():
    with pytest.raises(ValueError):
        v2.encode_add(1, 0, KEY[:19], HELLO)
    with pytest.raises(ValueError):
        v2.encode_add(2, 0, KEY, HELLO)  # the entry names ledger 1
    with pytest.raises(ValueError):
        v2.encode_read(1, 0, v2.FLAG_DO_FENCING)  # fencing without a key


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=80))
def test_any_bytes_decode_to_a_request_or_a_protocol_error(packet):
    """BP1: garbage gets ProtocolError (EBADREQ or a closed connection), never a crash."""
    try:
        request = v2.decode_request(packet)
    except v2.ProtocolError:
        return
    assert request.opcode in v2.OPCODES
