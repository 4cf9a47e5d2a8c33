"""The v3 ADD_ENTRY hot path (api/bkproto/v3_add.py VA1-VA2) held to protobuf: on every
request it takes, its fields are protobuf's; on anything else it steps aside (None); its
answers are protobuf's bytes. Golden bytes worked out by hand from BookkeeperProtocol.proto's
field numbers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.bkproto import v3, v3_add
from tests.support.mutate import mutated

KEY = bytes(range(20))

# Request{header{version=3, operation=ADD_ENTRY, txnId=300}, addRequest{ledgerId=5,
# entryId=129, masterKey=00..13, body="abc", flag=RECOVERY_ADD}}: 300 = ac 02, 129 = 81 01,
# field 101 length-delimited = aa 06, field 100 varint = a0 06.
GOLDEN = bytes.fromhex("0a07" "0803" "1002" "18ac02"
                       "aa06" "23" "0805" "108101" "1a14" + KEY.hex() + "2203616263" "a00601")


def test_a_hand_worked_add_request_is_read_field_by_field():
    add = v3_add.parse_add(GOLDEN)
    assert add == v3_add.PlainAdd(bytes.fromhex("08031002" "18ac02"), 5, 129, KEY, b"abc", 0,
                                  True)
    parsed = v3.decode_request(GOLDEN)  # the same bytes are protobuf's request
    assert (parsed.addRequest.ledgerId, parsed.addRequest.entryId) == (5, 129)


def _request(txn, version, priority, ledger_id, entry_id, key, body, write_flags, recovery):
    request = v3.Request()
    request.header.version, request.header.operation = version, v3.OPERATIONS["ADD_ENTRY"]
    request.header.txnId = txn
    if priority is not None:
        request.header.priority = priority
    add = request.addRequest
    add.ledgerId, add.entryId, add.masterKey, add.body = ledger_id, entry_id, key, body
    if write_flags is not None:
        add.writeFlags = write_flags
    if recovery:
        add.flag = 1
    return request


def _protobuf_view(packet: bytes):
    """What protobuf's path makes of ``packet``: the PlainAdd it means, or None for a
    request that is not a whole ADD_ENTRY."""
    try:
        request = v3.decode_request(packet)
    except v3.ProtocolError:
        return None
    add = request.addRequest
    if request.header.operation != v3.OPERATIONS["ADD_ENTRY"] or \
            not request.HasField("addRequest"):
        return None
    return (request.header, add.ledgerId, add.entryId, add.masterKey, add.body,
            add.writeFlags, add.HasField("flag") and add.flag == 1)


def _agrees(packet: bytes) -> bool:
    """VA1: a PlainAdd only where protobuf reads the same add; never an exception."""
    fast = v3_add.parse_add(packet)
    assert v3_add.parse_add(memoryview(packet)) == fast  # the listener passes a view
    if fast is None:
        return True
    header = v3.Request().header.__class__()
    header.ParseFromString(fast.header)
    return _protobuf_view(packet) == (header, *fast[1:])


ADDS = st.builds(_request, st.integers(0, 2**64 - 1), st.sampled_from([1, 2, 3]),
                 st.none() | st.integers(0, 2**32 - 1), st.integers(-2, 2**63 - 1),
                 st.integers(-2, 2**63 - 1),
                 st.binary(min_size=20, max_size=20) | st.binary(max_size=40),
                 st.binary(max_size=300), st.none() | st.integers(-2**31, 2**31 - 1),
                 st.booleans())


@given(ADDS)
def test_every_add_protobuf_writes_is_read_as_protobuf_reads_it(request):
    packet = request.SerializeToString()
    assert _agrees(packet)
    add = request.addRequest
    served = add.ledgerId >= 0 and add.entryId >= 0 and add.writeFlags >= 0 and \
        request.header.txnId < 2**63 and request.header.priority < 2**28 and \
        len(add.masterKey) == 20
    # Negative ids and flags, and txnIds from 2**63, are 10-byte varints; priorities are
    # small; BookKeeper's master keys are 20 bytes (a SHA-1): anything else is left to
    # protobuf (VA1). So are headers of VERSION_ONE and VERSION_TWO, which that path
    # refuses EBADVERSION (BK6, issue 36).
    if served:
        assert (v3_add.parse_add(packet) is not None) == (request.header.version == 3)


@given(ADDS, st.data())
def test_mutated_adds_are_read_as_protobuf_reads_them_or_left_to_it(request, data):
    assert _agrees(mutated(request.SerializeToString(), data))


def test_requests_it_does_not_take_are_left_to_protobuf():
    add = _request(1, 3, None, 5, 6, KEY, b"x", None, False)
    with_context = v3.Request()
    with_context.CopyFrom(add)
    pair = with_context.requestContext.add()
    pair.key, pair.value = "k", "v"
    read = v3.Request()
    read.header.version, read.header.operation, read.header.txnId = 3, 1, 9
    read.readRequest.ledgerId, read.readRequest.entryId = 5, 6
    for other in (with_context, read):
        assert v3_add.parse_add(other.SerializeToString()) is None
    assert v3_add.parse_add(add.SerializeToString()) is not None
    # Fields out of order: protobuf takes them, the hot path leaves them to it.
    swapped = add.addRequest.SerializeToString()
    reordered = add.header.SerializeToString()
    packet = b"\xaa\x06" + bytes([len(swapped)]) + swapped + b"\x0a" + \
        bytes([len(reordered)]) + reordered
    assert v3_add.parse_add(packet) is None and v3.decode_request(packet).header.txnId == 1


@given(st.integers(min_value=0, max_value=2**63 - 1), st.sampled_from(sorted(v3.STATUS.values())),
       st.integers(min_value=-2**63, max_value=2**63 - 1),
       st.integers(min_value=-2**63, max_value=2**63 - 1), st.integers(0, 3))
def test_the_hand_built_add_response_is_what_protobuf_serializes(txn, status, ledger_id,
                                                                entry_id, priority):
    request = _request(txn, 3, priority or None, 1, 2, KEY, b"", None, False)
    response = v3.Response()
    response.header.CopyFrom(request.header)
    response.status = status
    response.addResponse.status = status
    response.addResponse.ledgerId, response.addResponse.entryId = ledger_id, entry_id
    assert v3_add.encode_add_response(request.header.SerializeToString(), status, ledger_id,
                                      entry_id) == v3.frame(response)
