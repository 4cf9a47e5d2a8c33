"""The v3 READ_ENTRY hot path (api/bkproto/v3_read.py VR1-VR2) held to protobuf: on every
request it takes, its fields are protobuf's and the request is a plain read; on anything
else it steps aside (None); its answers are protobuf's bytes. Golden bytes worked out by
hand from BookkeeperProtocol.proto's field numbers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.bkproto import v3, v3_read
from tests.support.mutate import mutated

# Request{header{version=3, operation=READ_ENTRY, txnId=300}, readRequest{ledgerId=5,
# entryId=129}}: 300 = ac 02, 129 = 81 01, field 100 length-delimited = a2 06.
GOLDEN = bytes.fromhex("0a07" "0803" "1001" "18ac02" "a206" "05" "0805" "108101")


def test_a_hand_worked_read_request_is_read_field_by_field():
    assert v3_read.parse_read(GOLDEN) == v3_read.PlainRead(bytes.fromhex("0803100118ac02"),
                                                           5, 129)
    parsed = v3.decode_request(GOLDEN)  # the same bytes are protobuf's request
    assert (parsed.readRequest.ledgerId, parsed.readRequest.entryId) == (5, 129)


def _request(txn, version, operation, priority, ledger_id, entry_id, extras):
    request = v3.Request()
    header = request.header
    header.version, header.operation, header.txnId = version, operation, txn
    if priority is not None:
        header.priority = priority
    read = request.readRequest
    read.ledgerId, read.entryId = ledger_id, entry_id
    for name, value in extras:
        setattr(read, name, value)
    return request


def _protobuf_view(packet: bytes):
    """What protobuf's path makes of ``packet``: the plain read it means, or None for a
    request that is not one (another operation, a flag, a key, a long poll, a context)."""
    try:
        request = v3.decode_request(packet)
    except v3.ProtocolError:
        return None
    read = request.readRequest
    if request.header.operation != v3.OPERATIONS["READ_ENTRY"] or \
            not request.HasField("readRequest") or request.requestContext or \
            any(read.HasField(name) for name in ("masterKey", "previousLAC", "timeOut",
                                                 "flag")):
        return None
    return request.header, read.ledgerId, read.entryId


def _protobuf_agrees(packet: bytes) -> bool:
    """Whether protobuf reads ``packet`` as the golden request's plain read."""
    view = _protobuf_view(packet)
    return view is not None and view[1:] == (5, 129)


def _agrees(packet: bytes) -> bool:
    """VR1: a PlainRead only where protobuf reads the same plain read; never an exception."""
    fast = v3_read.parse_read(packet)
    assert v3_read.parse_read(memoryview(packet)) == fast  # the listener passes a view
    if fast is None:
        return True
    header = v3.Request().header.__class__()
    header.ParseFromString(fast.header)
    return header.version == 3 and _protobuf_view(packet) == (header, *fast[1:])


EXTRAS = st.lists(st.sampled_from([("masterKey", b"k" * 20), ("previousLAC", 3),
                                   ("timeOut", 1000), ("flag", 1), ("flag", 2)]),
                  max_size=2)
READS = st.builds(_request, st.integers(0, 2**64 - 1), st.sampled_from([1, 2, 3]),
                  st.sampled_from([1, 1, 1, 2, 7]), st.none() | st.integers(0, 2**32 - 1),
                  st.integers(-2, 2**63 - 1), st.integers(-2, 2**63 - 1), EXTRAS)


@given(READS)
def test_every_read_protobuf_writes_is_read_as_protobuf_reads_it(request):
    packet = request.SerializeToString()
    assert _agrees(packet)
    read, header = request.readRequest, request.header
    plain = not read.ListFields()[2:] and header.operation == 1 and header.version == 3
    # Negative ids and txnIds from 2**63 are 10-byte varints, and priorities are small:
    # anything else is left to protobuf (VR1), as are VERSION_ONE and VERSION_TWO headers,
    # which that path refuses EBADVERSION (BK6).
    served = read.ledgerId >= 0 and read.entryId >= 0 and header.txnId < 2**63 and \
        header.priority < 2**28
    if served:
        assert (v3_read.parse_read(packet) is not None) == plain


@given(READS, st.data())
def test_mutated_reads_are_read_as_protobuf_reads_them_or_left_to_it(request, data):
    assert _agrees(mutated(request.SerializeToString(), data))


def test_reads_it_does_not_take_are_left_to_protobuf():
    plain = _request(1, 3, 1, None, 5, 6, ())
    with_context = v3.Request()
    with_context.CopyFrom(plain)
    pair = with_context.requestContext.add()
    pair.key, pair.value = "k", "v"
    fencing = _request(1, 3, 1, None, 5, 6, [("flag", 1), ("masterKey", b"k" * 20)])
    poll = _request(1, 3, 1, None, 5, -1, [("previousLAC", 4), ("timeOut", 10), ("flag", 2)])
    for other in (with_context, fencing, poll):
        assert v3_read.parse_read(other.SerializeToString()) is None
    assert v3_read.parse_read(plain.SerializeToString()) is not None
    # A length that is not its field's: the golden request with each length one off.
    for at, delta in ((1, 1), (1, -1), (11, 1), (11, -1)):
        bent = bytearray(GOLDEN)
        bent[at] += delta
        assert v3_read.parse_read(bytes(bent)) is None and not _protobuf_agrees(bytes(bent))
    # Fields out of order: protobuf takes them, the hot path leaves them to it.
    read, header = plain.readRequest.SerializeToString(), plain.header.SerializeToString()
    packet = b"\xa2\x06" + bytes([len(read)]) + read + b"\x0a" + bytes([len(header)]) + header
    assert v3_read.parse_read(packet) is None and v3.decode_request(packet).header.txnId == 1


@given(st.integers(min_value=0, max_value=2**63 - 1),
       st.sampled_from(sorted(v3.STATUS.values())),
       st.integers(min_value=-2**63, max_value=2**63 - 1),
       st.integers(min_value=-2**63, max_value=2**63 - 1), st.integers(0, 3),
       st.none() | st.binary(max_size=300), st.none() | st.integers(-2**63, 2**63 - 1))
def test_the_hand_built_read_response_is_what_protobuf_serializes(txn, status, ledger_id,
                                                                 entry_id, priority, body,
                                                                 max_lac):
    request = _request(txn, 3, 1, priority or None, 1, 2, ())
    response = v3.Response()
    response.header.CopyFrom(request.header)
    response.status = status
    read = response.readResponse
    read.status, read.ledgerId, read.entryId = status, ledger_id, entry_id
    if body is not None:
        read.body = body
    if max_lac is not None:
        read.maxLAC = max_lac
    assert v3_read.encode_read_response(request.header.SerializeToString(), status, ledger_id,
                                        entry_id, body, max_lac) == v3.frame(response)
