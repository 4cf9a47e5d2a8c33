"""Property tests of ledgerindex.keys: round trips, key order, bounded total decoding."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ledgerindex import keys
from ledgerindex.keys import LedgerState, LedgerStateCorrupt

ids = st.integers(min_value=0, max_value=2**63 - 1)
states = st.builds(
    LedgerState,
    exists=st.booleans(), fenced=st.booleans(), limbo=st.booleans(),
    digest_type=st.integers(min_value=0, max_value=4),
    master_key=st.binary(max_size=300),
    explicit_lac=st.none() | st.binary(max_size=64),
).flatmap(lambda state: st.one_of(
    st.just(state),
    st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)).map(
        lambda usage: state.with_(entry_count=usage[0], byte_count=usage[1]))))


def pb_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def ledger_data(state: LedgerState) -> bytes:
    """BookKeeper's LedgerData for ``state``, fields in number order (protobuf-java)."""
    out = b"\x08" + pb_varint(int(state.exists)) + b"\x10" + pb_varint(int(state.fenced))
    out += b"\x1a" + pb_varint(len(state.master_key)) + state.master_key
    if state.explicit_lac is not None:
        out += b"\x22" + pb_varint(len(state.explicit_lac)) + state.explicit_lac
    return out + b"\x28" + pb_varint(int(state.limbo))


@given(states)
def test_ledger_state_round_trips_and_bookkeeper_reads_fields_1_to_5(state):
    value = keys.encode_ledger_state(state)
    assert keys.decode_ledger_value(value) == (state, keys.FORM_OURS)
    # BookKeeper drops field 1000 when it rewrites the value: what is left is its LedgerData.
    cut = value.rindex(b"\xc2\x3e")
    assert keys.decode_ledger_state(value[:cut]) == state.with_(
        digest_type=0, entry_count=-1, byte_count=-1)


@given(states)
def test_no_strict_prefix_of_a_value_passes_for_the_whole(state):
    # A protobuf cut at a field boundary can parse (fields 4, 5 and the extension are
    # optional); it must never read back as the same state with our extension.
    value = keys.encode_ledger_state(state)
    for end in range(len(value)):
        try:
            decoded = keys.decode_ledger_value(value[:end])
        except LedgerStateCorrupt:
            continue
        assert decoded != (state, keys.FORM_OURS), f"prefix of {end} bytes: {value[:end].hex()}"


@given(states)
def test_bookkeeper_ledger_data_decodes_to_the_same_state_without_digest_type(state):
    # LedgerData carries neither digest type nor usage counters: both read as not known.
    expected = state.with_(digest_type=0, entry_count=-1, byte_count=-1)
    assert keys.decode_ledger_state(ledger_data(state)) == expected


@given(st.binary(max_size=80))
def test_any_bytes_decode_or_raise_ledger_state_corrupt(data):
    try:
        state = keys.decode_ledger_state(data)
    except LedgerStateCorrupt:
        return
    assert isinstance(state, LedgerState)


@given(ids, ids, ids, ids)
def test_location_key_order_is_ledger_then_entry_order(l1, e1, l2, e2):
    k1, k2 = keys.encode_location_key(l1, e1), keys.encode_location_key(l2, e2)
    assert (k1 < k2) == ((l1, e1) < (l2, e2))
    assert keys.decode_location_key(k1) == (l1, e1)


@given(ids)
def test_location_value_and_ledger_key_round_trip(value):
    assert keys.decode_location_value(keys.encode_location_value(value)) == value
    assert keys.decode_ledger_key(keys.encode_ledger_key(value)) == value
