"""api/bkproto/v3.py against golden bytes worked out by hand from BookkeeperProtocol.proto's
field numbers and protobuf's wire format (tag = number << 3 | wire type; varints), not from
the module's own output."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.bkproto import v3
from api.bkproto.v2 import ProtocolError
from bookie.entry import frame_entry

KEY = bytes(range(20))
HELLO = frame_entry(1, 0, -1, 5, b"hello")  # 41 bytes
HEADER_ADD_TXN7 = "0a06" "0803" "1002" "1807"  # header: VERSION_THREE, ADD_ENTRY, txnId 7
MINUS_ONE = "ffffffffffffffffff01"  # int64 -1 as a varint: ten bytes


def _request(operation: str, txn: int):
    request = v3.Request()
    request.header.version = v3.PROTOCOL_VERSIONS["VERSION_THREE"]
    request.header.operation = v3.OPERATIONS[operation]
    request.header.txnId = txn
    return request


def test_a_recovery_add_request_byte_for_byte():
    request = _request("ADD_ENTRY", 7)
    add = request.addRequest
    add.ledgerId, add.entryId, add.masterKey, add.body = 1, 0, KEY, HELLO
    add.flag = 1  # RECOVERY_ADD
    # addRequest is field 101: tag 101 << 3 | 2 = 810 = varint aa 06; its flag is field 100:
    # tag 800 = varint a0 06, value 1.
    body = "0801" "1000" "1a14" + KEY.hex() + "2229" + HELLO.hex() + "a00601"
    golden = bytes.fromhex(HEADER_ADD_TXN7 + "aa06" + f"{len(body) // 2:02x}" + body)
    assert v3.frame(request) == len(golden).to_bytes(4, "big") + golden
    parsed = v3.decode_request(golden)
    assert parsed.addRequest.body == HELLO and parsed.addRequest.flag == 1
    assert parsed.HasField("addRequest") and not parsed.HasField("readRequest")


def test_a_fencing_long_poll_read_request_byte_for_byte():
    request = _request("READ_ENTRY", 9)
    read = request.readRequest
    read.ledgerId, read.entryId, read.masterKey = 5, -1, KEY
    read.previousLAC, read.timeOut, read.flag = 41, 2000, 1  # FENCE_LEDGER
    body = "0805" "10" + MINUS_ONE + "1a14" + KEY.hex() + "2029" "28d00f" "a00601"
    golden = bytes.fromhex("0a06" "0803" "1001" "1809" "a206" + f"{len(body) // 2:02x}"
                           + body)
    assert request.SerializeToString() == golden  # readRequest: field 100, tag a2 06


def test_responses_byte_for_byte_with_v3_status_numbers():
    response = v3.Response()
    response.header.version, response.header.operation, response.header.txnId = 3, 2, 7
    response.status = v3.STATUS["EFENCED"]
    add = response.addResponse
    add.status, add.ledgerId, add.entryId = v3.STATUS["EFENCED"], 1, 0
    # status 504 = varint f8 03; addResponse field 101 (aa 06), 7 bytes.
    golden = bytes.fromhex(HEADER_ADD_TXN7 + "10f803" "aa0607" "08f803" "1001" "1800")
    assert v3.frame(response) == len(golden).to_bytes(4, "big") + golden
    assert v3.decode_response(golden).addResponse.status == 504


def test_every_operation_has_its_body_fields_at_bookkeepers_numbers():
    numbers = {name: number for name, (_, _, number) in v3.BODY_FIELDS.items()}
    assert numbers == {"READ_ENTRY": 100, "ADD_ENTRY": 101, "AUTH": 102, "WRITE_LAC": 103,
                       "READ_LAC": 104, "GET_BOOKIE_INFO": 105, "START_TLS": 106,
                       "FORCE_LEDGER": 107, "GET_LIST_OF_ENTRIES_OF_LEDGER": 108}
    for name, (request_field, response_field, number) in v3.BODY_FIELDS.items():
        assert v3.Request.DESCRIPTOR.fields_by_name[request_field].number == number
        assert v3.Response.DESCRIPTOR.fields_by_name[response_field].number == number


@pytest.mark.parametrize("packet, why", [
    (bytes.fromhex("0a0408031002"), "missing required fields: header.txnId"),
    (bytes.fromhex("0a06080310021807aa0602"), "not a v3 request"),  # body cut short
    (bytes.fromhex("02010002") + KEY, "not a v3 request"),  # a v2 frame
])
def test_bytes_that_are_no_whole_request_are_a_protocol_error(packet, why):
    with pytest.raises(ProtocolError) as error:
        v3.decode_request(packet)
    assert why in str(error.value)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=80))
def test_any_bytes_decode_to_a_request_or_a_protocol_error(packet):
    """BP3: garbage gets ProtocolError, never another exception."""
    try:
        request = v3.decode_request(packet)
    except ProtocolError:
        return
    assert request.IsInitialized()
