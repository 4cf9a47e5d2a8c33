"""api/bkproto/v2.py against golden bytes written out from BookKeeper's v2 layout (the
module docstring's tables, BookieProtocol.PacketHeader), not from the module's own output."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.bkproto import v2
from bookie.entry import frame_entry
from tests.support.mutate import mutated

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


def _as_arrived(packet: bytes):
    """What decode_request then the listener's _v2_add make of a packet (bk_adds.AddPath),
    or None when it is not an add decode_request takes."""
    try:
        request = v2.decode_request(packet)
    except v2.ProtocolError:
        return None
    if request.opcode != v2.ADDENTRY:
        return None
    return (request.ledger_id, request.entry_id, request.body, request.master_key,
            request.recovery, False, request.version)


def _add_packet(version, flags, ledger_id, entry_id, payload) -> bytes:
    frame = v2.encode_add(ledger_id, entry_id, KEY, frame_entry(ledger_id, entry_id, -1, 0,
                                                                payload), flags, version)
    return frame[4:]


@settings(max_examples=300)
@given(st.integers(0, 3), st.sampled_from([0, v2.FLAG_RECOVERY_ADD, v2.FLAG_HIGH_PRIORITY,
                                           v2.FLAG_DO_FENCING | v2.FLAG_RECOVERY_ADD]),
       st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.binary(max_size=64),
       st.binary(max_size=8), st.data())
def test_plain_add_is_decode_request_then_the_listeners_add(version, flags, ledger_id,
                                                             entry_id, payload, before, data):
    """PV1: where plain_add reads an add it is exactly the slow path's arrived add, read in
    place at any offset of a larger buffer; where it steps aside (None) only the slow path
    decides. Mutated packets too: a flipped header, a cut key."""
    packet = _add_packet(version, flags, ledger_id, entry_id, payload)
    for candidate in (packet, mutated(packet, data)):
        buffer = before + candidate + b"tail"
        fast = v2.plain_add(buffer, len(before), len(candidate))
        slow = _as_arrived(candidate)
        if fast is not None:
            assert fast == slow and type(fast[2]) is bytes and type(fast[3]) is bytes
        elif candidate == packet and version in (1, 2):
            raise AssertionError("a plain v1/v2 add must take the fast path")


@given(st.sampled_from([0, 1, 2, 3]), st.sampled_from([None, "Fenced", "TooManyRequests",
                                                       "NoLedger"]),
       st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1))
def test_the_listeners_v2_add_answer_is_encode_response(version, error, ledger_id, entry_id):
    """bk_adds.AddPath._reply's one-pack v2 answer is v2.encode_response's bytes."""
    from api.bkproto.status import v2_code
    from api.server.bk_adds import AddPath
    from bookie import errors

    failure = None if error is None else getattr(errors, error)("x")
    add = (ledger_id, entry_id, b"", KEY, False, False, version)
    assert AddPath._reply(add, failure) == v2.encode_response(
        version, v2.ADDENTRY, v2_code(failure), ledger_id, entry_id)
