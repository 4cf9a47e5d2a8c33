"""Golden bytes of the v3 operations beyond add and read (issue 28): READ_LAC, WRITE_LAC,
FORCE_LEDGER, GET_BOOKIE_INFO, GET_LIST_OF_ENTRIES_OF_LEDGER (with BookKeeper's
AvailabilityOfEntriesOfLedger body), AUTH and START_TLS. Worked out by hand from
BookkeeperProtocol.proto's field numbers (tag = number << 3 | 2 for a message field, as a
varint) and the availability layout, not from the modules' own output."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.bkproto import availability, v3
from api.client.fragments import ranges_of

KEY = bytes(range(20))


def _header(operation: int, txn: int) -> str:
    return "0a06" "0803" f"10{operation:02x}" f"18{txn:02x}"


def _request(operation: str, txn: int, **body):
    request = v3.Request()
    request.header.version = 3
    request.header.operation = v3.OPERATIONS[operation]
    request.header.txnId = txn
    field = getattr(request, v3.BODY_FIELDS[operation][0])
    field.SetInParent()
    for name, value in body.items():
        setattr(field, name, value)
    return request


def _response(operation: str, txn: int, **body):
    response = v3.Response()
    response.header.version = 3
    response.header.operation = v3.OPERATIONS[operation]
    response.header.txnId = txn
    response.status = 0
    field = getattr(response, v3.BODY_FIELDS[operation][1])
    field.SetInParent()
    for name, value in body.items():
        setattr(field, name, value)
    return response


def _field(tag: str, body: str) -> str:
    return tag + f"{len(body) // 2:02x}" + body


@pytest.mark.parametrize("message, golden", [
    # readLacRequest is field 104: 104 << 3 | 2 = 834 = varint c2 06.
    (_request("READ_LAC", 3, ledgerId=12), _header(7, 3) + _field("c206", "080c")),
    # writeLacRequest, field 103 (ba 06): ledgerId, lac, masterKey, body.
    (_request("WRITE_LAC", 4, ledgerId=12, lac=6, masterKey=KEY, body=b"LLL"),
     _header(6, 4) + _field("ba06", "080c" "1006" "1a14" + KEY.hex() + "2203" "4c4c4c")),
    # forceLedgerRequest, field 107 (da 06).
    (_request("FORCE_LEDGER", 5, ledgerId=12), _header(10, 5) + _field("da06", "080c")),
    # getBookieInfoRequest, field 105 (ca 06): requested = TOTAL | FREE.
    (_request("GET_BOOKIE_INFO", 6, requested=3), _header(8, 6) + _field("ca06", "0803")),
    # getListOfEntriesOfLedgerRequest, field 108 (e2 06).
    (_request("GET_LIST_OF_ENTRIES_OF_LEDGER", 7, ledgerId=12),
     _header(11, 7) + _field("e206", "080c")),
    # authRequest, field 102 (b2 06): AuthMessage{authPluginName, payload}.
    (_request("AUTH", 8, authPluginName="AuthDisabledPlugin", payload=b""),
     _header(5, 8) + _field("b206", "0a12" + b"AuthDisabledPlugin".hex() + "1200")),
    # startTLSRequest, field 106 (d2 06): an empty message.
    (_request("START_TLS", 9), _header(9, 9) + "d20600"),
], ids=["read-lac", "write-lac", "force", "bookie-info", "list-entries", "auth", "start-tls"])
def test_requests_byte_for_byte(message, golden):
    assert message.SerializeToString() == bytes.fromhex(golden)
    assert v3.decode_request(bytes.fromhex(golden)) == message


@pytest.mark.parametrize("message, golden", [
    (_response("READ_LAC", 3, status=0, ledgerId=12, lacBody=b"LLL", lastEntryBody=b"EE"),
     _header(7, 3) + "1000" + _field("c206", "0800" "100c" "1a03" "4c4c4c" "2202" "4545")),
    (_response("WRITE_LAC", 4, status=0, ledgerId=12),
     _header(6, 4) + "1000" + _field("ba06", "0800" "100c")),
    (_response("FORCE_LEDGER", 5, status=0, ledgerId=12),
     _header(10, 5) + "1000" + _field("da06", "0800" "100c")),
    # totalDiskCapacity 1000 = varint e8 07, freeDiskSpace 300 = ac 02.
    (_response("GET_BOOKIE_INFO", 6, status=0, totalDiskCapacity=1000, freeDiskSpace=300),
     _header(8, 6) + "1000" + _field("ca06", "0800" "10e807" "18ac02")),
    (_response("AUTH", 8, authPluginName="AuthDisabledPlugin", payload=b""),
     _header(5, 8) + "1000" + _field("b206", "0a12" + b"AuthDisabledPlugin".hex() + "1200")),
], ids=["read-lac", "write-lac", "force", "bookie-info", "auth"])
def test_responses_byte_for_byte(message, golden):
    assert message.SerializeToString() == bytes.fromhex(golden)
    assert v3.decode_response(bytes.fromhex(golden)) == message


def _availability_golden() -> bytes:
    # ids 0,1,2 5,6 9: three runs of different sizes, so three groups, each period 0.
    header = struct.pack(">ii", 0, 3) + bytes(56)
    groups = [struct.pack(">qqii", first, first, size, 0) for first, size in
              ((0, 3), (5, 2), (9, 1))]
    return header + b"".join(groups)


def test_the_entry_list_response_carries_bookkeepers_availability_bytes():
    golden = _availability_golden()
    assert availability.encode([9, 0, 1, 2, 5, 6, 6]) == golden
    assert availability.encode_runs([[0, 2], [5, 6], [9, 9]]) == golden
    assert availability.decode(golden) == [0, 1, 2, 5, 6, 9]
    response = _response("GET_LIST_OF_ENTRIES_OF_LEDGER", 7, status=0, ledgerId=12,
                         availabilityOfEntriesOfLedger=golden)
    # 64 + 3 * 24 = 136 bytes = varint 88 01
    body = "0800" "100c" "1a8801" + golden.hex()
    expected = _header(11, 7) + "1000" + "e206" + f"{len(body) // 2:02x}01" + body
    assert response.SerializeToString() == bytes.fromhex(expected)


def test_a_periodic_group_decodes_to_every_sequence_it_spans():
    """A group BookKeeper's reader accepts though its writer never joins sequences (AV2):
    sequences of 2 every 10 ids, from 0 to 20."""
    data = struct.pack(">ii", 0, 1) + bytes(56) + struct.pack(">qqii", 0, 20, 2, 10)
    assert availability.decode(data) == [0, 1, 10, 11, 20, 21]


@pytest.mark.parametrize("data", [
    b"",
    struct.pack(">ii", 1, 0) + bytes(56),            # a newer header version
    struct.pack(">ii", 0, 2) + bytes(56) + bytes(24),  # fewer groups than it says
    struct.pack(">ii", 0, 1) + bytes(56) + struct.pack(">qqii", 5, 9, 1, 0),  # no period
])
def test_bytes_that_are_not_an_availability_are_refused(data):
    with pytest.raises(ValueError):
        availability.decode(data)


@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=300))
def test_availability_round_trips_any_ids(ids):
    assert availability.decode(availability.encode(ids)) == sorted(set(ids))  # AV1
    assert availability.encode_runs(ranges_of(ids)) == availability.encode(ids)
