"""Our ledger metadata is BookKeeper's v3 format (docs/cluster.md §1).

Checked three ways: a golden byte string for one ledger; a decoder written here from the
wire format and BookKeeper's field numbers alone (no protobuf package, no project code), run
over what the ZooKeeper driver stored; and the .proto file against the descriptor in code.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from api.client import metadata_format
from api.client.metadata import LedgerExists, LedgerMetadata, MetadataState
from api.client.metadata_format import HEADER, MetadataFormatError, decode, encode
from bookie.entry import DigestType

PROTO = pathlib.Path(metadata_format.__file__).parent / "proto" / "LedgerMetadataFormat.proto"

LEDGER = LedgerMetadata(
    ledger_id=5, digest_type=DigestType.CRC32C, state=MetadataState.CLOSED, last_entry_id=9,
    length=1000, ctime_ms=1_700_000_000_000, custom={"app": "x"}, ensemble_size=3,
    write_quorum=2, ack_quorum=2, password=b"pw",
    ensembles=((0, ("127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183")),))
#: quorumSize 2, ensembleSize 3, length 1000, lastEntryId 9, state CLOSED, one segment of
#: three bookies from entry 0, digestType CRC32C, password "pw", ackQuorumSize 2, ctime,
#: customMetadata {app: x}, cToken 0 (BookKeeper's LedgerMetadataSerDe writes it in every
#: format-3 record, 0 when none was set; ours did not before issue 55); field-number order,
#: as protobuf-java writes it.
GOLDEN = bytes.fromhex(
    "426f6f6b69654d65746164617461466f726d617456657273696f6e09330a"  # header
    "5a"  # varint length 90
    "0802" "1003" "18e807" "2009" "2803"
    "3232" "0a0e3132372e302e302e313a33313831" "0a0e3132372e302e302e313a33313832"
    "0a0e3132372e302e302e313a33313833" "1000"
    "3803" "42027077" "4802" "5080d095ffbc31" "5a08" "0a03617070" "120178" "6000")


def test_one_ledger_byte_for_byte():
    assert encode(LEDGER) == GOLDEN
    assert decode(GOLDEN, 5, 1) == LEDGER.__class__(**{**LEDGER.__dict__, "version": 1})


def varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            return value, i
        shift += 7


def fields(data: bytes) -> list[tuple[int, object]]:
    """(field number, value) pairs: wire types 0 (varint) and 2 (bytes) only."""
    out, i = [], 0
    while i < len(data):
        key, i = varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(data, i)
        elif wire == 2:
            length, i = varint(data, i)
            value, i = data[i:i + length], i + length
        else:
            raise AssertionError(f"wire type {wire} in ledger metadata")
        out.append((number, value))
    return out


def independent_decode(value: bytes) -> dict:
    assert value.startswith(b"BookieMetadataFormatVersion\t3\n")
    length, start = varint(value, len(b"BookieMetadataFormatVersion\t3\n"))
    body = value[start:]
    assert len(body) == length
    out: dict = {"segments": [], "custom": {}}
    names = {1: "Qw", 2: "E", 3: "length", 4: "lastEntryId", 5: "state", 7: "digestType",
             8: "password", 9: "Qa", 10: "ctime", 12: "cToken"}
    for number, item in fields(body):
        if number == 6:
            segment = fields(item)
            out["segments"].append((dict(segment)[2], [m.decode() for n, m in segment if n == 1]))
        elif number == 11:
            entry = dict(fields(item))
            out["custom"][entry[1].decode()] = entry[2]
        else:
            out[names[number]] = item
    return out


async def test_what_the_zookeeper_driver_stored_decodes_independently(zk_uri):
    from api.client.metadata_service import open_metadata_store
    from api.client.metadata_paths import ledger_path

    async with open_metadata_store(zk_uri) as store:
        made = await store.create(LEDGER.__class__(**{**LEDGER.__dict__, "ledger_id": None}))
        raw, _ = store.client.get(ledger_path(store.root, made.ledger_id))
    found = independent_decode(raw)
    assert (found["Qw"], found["E"], found["Qa"]) == (2, 3, 2)
    assert (found["length"], found["lastEntryId"], found["state"]) == (1000, 9, 3)
    assert found["digestType"] == 3 and found["password"] == b"pw"
    assert found["segments"] == [(0, ["127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"])]
    assert found["custom"] == {"app": b"x"} and found["ctime"] == 1_700_000_000_000
    # ZK7: a creator token, as BookKeeper's ZooKeeper ledger manager stores one, kept by
    # every later write (a close here), and one's own found again by a create that finds
    # the znode there
    assert found["cToken"] == made.ctoken > 0
    async with open_metadata_store(zk_uri) as store:
        closed = await store.write(await store.read(made.ledger_id))
        raw, _ = store.client.get(ledger_path(store.root, made.ledger_id))
        assert independent_decode(raw)["cToken"] == made.ctoken == closed.ctoken
        again = await store.create(made.__class__(**{**made.__dict__, "version": 0}))
        assert again.ledger_id == made.ledger_id
        with pytest.raises(LedgerExists):
            await store.create(made.__class__(**{**made.__dict__, "version": 0, "ctoken": 7}))


def test_the_proto_file_and_the_descriptor_in_code_agree():
    text = PROTO.read_text()
    in_file = set(re.findall(r"(required|optional|repeated)\s+(\w+)\s+(\w+)\s*=\s*(\d+)", text))
    in_code = set()
    messages = metadata_format._descriptor().message_type
    message = messages[0]
    types = {5: "int32", 3: "int64", 9: "string", 12: "bytes"}
    for proto in [m for top in messages for m in (top, *top.nested_type)]:
        for field in proto.field:
            label = {1: "optional", 2: "required", 3: "repeated"}[field.label]
            kind = field.type_name.rsplit(".", 1)[-1] if field.type_name else types[field.type]
            in_code.add((label, kind, field.name, str(field.number)))
    # and the message class in use was built from exactly that descriptor
    assert [f.number for f in metadata_format.DESCRIPTOR.fields] == \
        [f.number for f in message.field]
    assert in_file == in_code


@pytest.mark.parametrize("damage, reason", [
    (b"BookieMetadataFormatVersion\t2\n\x00", "does not start with"),
    (HEADER + b"\x05\x08\x01", "says 5 bytes"),
    (HEADER + b"\x02\x08\x01", "lacks"),
])
def test_damaged_metadata_is_refused_with_a_reason(damage, reason):
    with pytest.raises(MetadataFormatError, match=reason):
        decode(damage)
