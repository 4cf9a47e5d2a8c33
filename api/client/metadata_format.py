"""Ledger metadata in BookKeeper's v3 binary format (LedgerMetadataSerDe), docs/cluster.md §1.

    bytes   "BookieMetadataFormatVersion\\t3\\n"
    varint  n, the length of what follows (protobuf's varint32)
    n       protobuf LedgerMetadataFormat (api/client/proto/LedgerMetadataFormat.proto)

The message class is built from a descriptor written here field by field from BookKeeper's
numbers (the .proto file beside it is the same text for readers and tools; a test compares
them), so neither protoc nor generated code is needed. ``protobuf`` does every varint.

Invariants:
    MF1. ``decode(encode(m)) == m`` for every metadata this project writes (version and ledger
         id travel outside: the znode's version and path).
    MF2. A value that is not version 3, whose length prefix disagrees with its size, or whose
         message lacks a required field raises MetadataFormatError naming what is wrong.
"""

from __future__ import annotations

import dataclasses

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf.internal import decoder, encoder

from api import protodesc
from api.client.metadata import LedgerMetadata, MetadataError, MetadataState
from bookie.entry import DigestType

HEADER = b"BookieMetadataFormatVersion\t3\n"
_F = descriptor_pb2.FieldDescriptorProto


class MetadataFormatError(MetadataError):
    """Bytes that are not v3 ledger metadata (MF2)."""


def _descriptor() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="bookie_ledger_metadata.proto",
                                              package="bookie", syntax="proto2")
    msg = file.message_type.add(name="LedgerMetadataFormat")
    req = _F.LABEL_REQUIRED
    protodesc.field(msg, "quorumSize", 1, _F.TYPE_INT32, req)
    protodesc.field(msg, "ensembleSize", 2, _F.TYPE_INT32, req)
    protodesc.field(msg, "length", 3, _F.TYPE_INT64, req)
    protodesc.field(msg, "lastEntryId", 4, _F.TYPE_INT64)
    protodesc.enum(msg, "State", {"OPEN": 1, "IN_RECOVERY": 2, "CLOSED": 3})
    protodesc.field(msg, "state", 5, _F.TYPE_ENUM, req, ".bookie.LedgerMetadataFormat.State",
                    "OPEN")
    segment = msg.nested_type.add(name="Segment")
    protodesc.field(segment, "ensembleMember", 1, _F.TYPE_STRING, _F.LABEL_REPEATED)
    protodesc.field(segment, "firstEntryId", 2, _F.TYPE_INT64, req)
    protodesc.field(msg, "segment", 6, _F.TYPE_MESSAGE, _F.LABEL_REPEATED,
                    ".bookie.LedgerMetadataFormat.Segment")
    protodesc.enum(msg, "DigestType", {"CRC32": 1, "HMAC": 2, "CRC32C": 3, "DUMMY": 4})
    protodesc.field(msg, "digestType", 7, _F.TYPE_ENUM,
                    type_name=".bookie.LedgerMetadataFormat.DigestType")
    protodesc.field(msg, "password", 8, _F.TYPE_BYTES)
    protodesc.field(msg, "ackQuorumSize", 9, _F.TYPE_INT32)
    protodesc.field(msg, "ctime", 10, _F.TYPE_INT64)
    entry = msg.nested_type.add(name="cMetadataMapEntry")
    protodesc.field(entry, "key", 1, _F.TYPE_STRING)
    protodesc.field(entry, "value", 2, _F.TYPE_BYTES)
    protodesc.field(msg, "customMetadata", 11, _F.TYPE_MESSAGE, _F.LABEL_REPEATED,
                    ".bookie.LedgerMetadataFormat.cMetadataMapEntry")
    protodesc.field(msg, "cToken", 12, _F.TYPE_INT64)
    # BookieServiceInfoFormat (DataFormats.proto): what a registered bookie serves.
    info = file.message_type.add(name="BookieServiceInfoFormat")
    endpoint = info.nested_type.add(name="Endpoint")
    protodesc.field(endpoint, "id", 1, _F.TYPE_STRING, req)
    protodesc.field(endpoint, "port", 2, _F.TYPE_INT32, req)
    protodesc.field(endpoint, "host", 3, _F.TYPE_STRING, req)
    protodesc.field(endpoint, "protocol", 4, _F.TYPE_STRING, req)
    protodesc.field(endpoint, "auth", 5, _F.TYPE_STRING, _F.LABEL_REPEATED)
    protodesc.field(endpoint, "extensions", 6, _F.TYPE_STRING, _F.LABEL_REPEATED)
    protodesc.field(info, "endpoints", 6, _F.TYPE_MESSAGE, _F.LABEL_REPEATED,
                    ".bookie.BookieServiceInfoFormat.Endpoint")
    entry = info.nested_type.add(name="PropertiesEntry")  # map<string, string> properties
    entry.options.map_entry = True
    protodesc.field(entry, "key", 1, _F.TYPE_STRING)
    protodesc.field(entry, "value", 2, _F.TYPE_STRING)
    protodesc.field(info, "properties", 7, _F.TYPE_MESSAGE, _F.LABEL_REPEATED,
                    ".bookie.BookieServiceInfoFormat.PropertiesEntry")
    # CookieFormat (DataFormats.proto): a bookie's cookie, written in protobuf text format.
    cookie = file.message_type.add(name="CookieFormat")
    protodesc.field(cookie, "bookieHost", 1, _F.TYPE_STRING, req)
    protodesc.field(cookie, "journalDir", 2, _F.TYPE_STRING, req)
    protodesc.field(cookie, "ledgerDirs", 3, _F.TYPE_STRING, req)
    protodesc.field(cookie, "instanceId", 4, _F.TYPE_STRING)
    protodesc.field(cookie, "indexDirs", 5, _F.TYPE_STRING)
    # Autorecovery's znodes under underreplication/ (DataFormats.proto), all in text format.
    layout = file.message_type.add(name="LedgerRereplicationLayoutFormat")
    protodesc.field(layout, "type", 1, _F.TYPE_STRING, req)
    protodesc.field(layout, "version", 2, _F.TYPE_INT32, req)
    marker = file.message_type.add(name="UnderreplicatedLedgerFormat")
    protodesc.field(marker, "replica", 1, _F.TYPE_STRING, _F.LABEL_REPEATED)
    protodesc.field(marker, "ctime", 2, _F.TYPE_INT64)
    for name in ("LockDataFormat", "AuditorVoteFormat"):
        protodesc.field(file.message_type.add(name=name), "bookieId", 1, _F.TYPE_STRING)
    for name, field in (("ReplicasCheckFormat", "replicasCheckCTime"),
                        ("CheckAllLedgersFormat", "checkAllLedgersCTime"),
                        ("PlacementPolicyCheckFormat", "placementPolicyCheckCTime")):
        protodesc.field(file.message_type.add(name=name), field, 1, _F.TYPE_INT64)
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_descriptor())
DESCRIPTOR = _POOL.FindMessageTypeByName("bookie.LedgerMetadataFormat")
LedgerMetadataFormat = message_factory.GetMessageClass(DESCRIPTOR)
BookieServiceInfoFormat = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("bookie.BookieServiceInfoFormat"))


CookieFormat = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("bookie.CookieFormat"))


def _text_message(name: str):
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"bookie.{name}"))


LedgerRereplicationLayoutFormat = _text_message("LedgerRereplicationLayoutFormat")
UnderreplicatedLedgerFormat = _text_message("UnderreplicatedLedgerFormat")
LockDataFormat = _text_message("LockDataFormat")
AuditorVoteFormat = _text_message("AuditorVoteFormat")
ReplicasCheckFormat = _text_message("ReplicasCheckFormat")
#: The auditor's last-run times (BookKeeper's znodes checkallledgersctime,
#: placementpolicycheckctime, replicascheckctime under underreplication/): znode, message.
CHECK_CTIMES = {"checkallledgersctime": _text_message("CheckAllLedgersFormat"),
                "placementpolicycheckctime": _text_message("PlacementPolicyCheckFormat"),
                "replicascheckctime": ReplicasCheckFormat}


def encode_check_ctime(znode: str, ctime_ms: int) -> bytes:
    """An auditor check's last run as BookKeeper's ZkLedgerUnderreplicationManager writes
    it: the message in protobuf's binary form (``toByteArray``), unlike the other
    underreplication znodes, which are text."""
    message = CHECK_CTIMES[znode]
    return message(**{message.DESCRIPTOR.fields[0].name: ctime_ms}).SerializeToString()


def decode_check_ctime(znode: str, data: bytes) -> int | None:
    """The ms of ``encode_check_ctime``'s bytes; also the text form this project wrote
    before (a tree it made keeps working); None if the field is not set."""
    message = CHECK_CTIMES[znode]
    field = message.DESCRIPTOR.fields[0].name
    found = message()
    try:
        found.ParseFromString(bytes(data))
    except Exception:  # noqa: BLE001 - protobuf's DecodeError: not binary, try the text form
        found = message()
    if not found.HasField(field) and data:
        found = from_text(message, data)
    return getattr(found, field) if found.HasField(field) else None


def to_text(message) -> bytes:
    """A message in protobuf text format, as BookKeeper's ``toTextFormat`` writes znodes."""
    return text_format.MessageToString(message).encode()


def from_text(cls, data: bytes):
    """Parse ``cls`` from text format; MetadataFormatError naming the message otherwise."""
    message = cls()
    try:
        text_format.Parse(bytes(data).decode("utf-8", "replace"), message)
    except text_format.ParseError as error:
        raise MetadataFormatError(f"{cls.DESCRIPTOR.name}: {error}") from None
    return message
#: BookKeeper's Cookie.CURRENT_COOKIE_LAYOUT_VERSION: the first line of a cookie.
COOKIE_VERSION = 5


def encode_cookie(bookie_id: str, journal_dir: str, ledger_dirs: list[str],
                  instance_id: str | None, index_dirs: list[str] | None = None) -> bytes:
    """BookKeeper's cookie text (Cookie.toString): the layout version on its own line, then
    CookieFormat in protobuf text format; ledgerDirs (and indexDirs, only when given, as
    BookKeeper writes it only with indexDirectories) is "<count>\t<dir>\t..." as BookKeeper
    encodes a dir list."""
    cookie = CookieFormat(bookieHost=bookie_id, journalDir=journal_dir,
                          ledgerDirs=_dir_list(ledger_dirs))
    if instance_id:
        cookie.instanceId = instance_id
    if index_dirs:
        cookie.indexDirs = _dir_list(index_dirs)
    return f"{COOKIE_VERSION}\n{text_format.MessageToString(cookie)}".encode()


def decode_cookie(data: bytes) -> dict:
    """{bookieHost, journalDir, ledgerDirs: [...], instanceId[, indexDirs: [...]]} of a
    cookie; MetadataFormatError if it is not a version-4+ text cookie."""
    text = bytes(data).decode("utf-8", "replace")
    version, _, body = text.partition("\n")
    if not version.strip().isdigit() or int(version) < 4:
        raise MetadataFormatError(f"cookie layout version {version.strip()!r} is not 4 or later")
    cookie = CookieFormat()
    try:
        text_format.Parse(body, cookie)
    except text_format.ParseError as error:
        raise MetadataFormatError(f"cookie: {error}") from None
    decoded = {"bookieHost": cookie.bookieHost, "journalDir": cookie.journalDir,
               "ledgerDirs": _dirs_of(cookie.ledgerDirs), "instanceId": cookie.instanceId}
    if cookie.HasField("indexDirs") and cookie.indexDirs:
        decoded["indexDirs"] = _dirs_of(cookie.indexDirs)
    return decoded


def _dir_list(dirs: list[str]) -> str:
    return "\t".join([str(len(dirs)), *dirs])


def _dirs_of(encoded: str) -> list[str]:
    count, *dirs = encoded.split("\t")
    return dirs[:int(count)] if count.isdigit() else [encoded]


def encode_service_info(host: str, port: int, tls: bool = False,
                        rpc_port: int | None = None,
                        properties: dict[str, str] | None = None) -> bytes:
    """A registered bookie's znode data: its HTTP endpoint (docs/cluster.md §1), protocol
    ``https`` when its listener speaks TLS only (clients pick the scheme from it); then,
    when the bookie speaks Apache BookKeeper's protocol, the endpoint BookKeeper's own
    clients resolve (``DefaultBookieAddressResolver``: id ``bookie``, protocol
    ``bookie-rpc``, as a BookKeeper bookie publishes it)."""
    info = BookieServiceInfoFormat()
    info.endpoints.add(id="http", port=port, host=host, protocol="https" if tls else "http")
    if rpc_port is not None:
        info.endpoints.add(id="bookie", port=rpc_port, host=host, protocol="bookie-rpc")
    for key, value in sorted((properties or {}).items()):
        info.properties[key] = value  # the bookie's place (api/client/topology.py)
    return info.SerializeToString(deterministic=True)


def decode_service_info_properties(data: bytes) -> dict[str, str]:
    """The service info's ``properties`` map (a bookie's topology, among others)."""
    info = BookieServiceInfoFormat()
    info.ParseFromString(bytes(data))
    return dict(info.properties)


def decode_service_info(data: bytes) -> list[tuple[str, str, int, str]]:
    """(id, host, port, protocol) of each endpoint."""
    info = BookieServiceInfoFormat()
    info.ParseFromString(bytes(data))
    return [(e.id, e.host, e.port, e.protocol) for e in info.endpoints]

#: DigestType numbers are the same in docs/formats.md §6.2 and the message (MAC is "HMAC").
_STATES = {MetadataState.OPEN: 1, MetadataState.IN_RECOVERY: 2, MetadataState.CLOSED: 3}
_STATE_OF = {number: state for state, number in _STATES.items()}


def encode(metadata: LedgerMetadata) -> bytes:
    message = LedgerMetadataFormat(
        quorumSize=metadata.write_quorum, ensembleSize=metadata.ensemble_size,
        length=metadata.length, lastEntryId=metadata.last_entry_id,
        state=_STATES[metadata.state], digestType=int(metadata.digest_type),
        password=metadata.password, ackQuorumSize=metadata.ack_quorum,
        ctime=metadata.ctime_ms, cToken=metadata.ctoken)  # cToken always, as BookKeeper's
        # LedgerMetadataSerDe writes it in format 3 (0 when the creator set none)
    for first, members in metadata.ensembles:
        message.segment.add(ensembleMember=list(members), firstEntryId=first)
    for key, value in sorted(metadata.custom.items()):
        message.customMetadata.add(key=key, value=value.encode() if isinstance(value, str)
                                   else bytes(value))
    body = message.SerializeToString()
    return HEADER + encoder._VarintBytes(len(body)) + body


def decode(data: bytes, ledger_id: int | None = None, version: int = 0) -> LedgerMetadata:
    data = bytes(data)
    if not data.startswith(HEADER):
        raise MetadataFormatError(f"ledger metadata does not start with {HEADER!r}: "
                                  f"{data[:40]!r}")
    try:
        length, start = decoder._DecodeVarint32(data, len(HEADER))
    except Exception as error:  # noqa: BLE001 - protobuf raises its own DecodeError types
        raise MetadataFormatError(f"ledger metadata length prefix: {error}") from None
    if start + length != len(data):
        raise MetadataFormatError(f"ledger metadata says {length} bytes, holds "
                                  f"{len(data) - start}")
    message = LedgerMetadataFormat()
    try:
        message.ParseFromString(data[start:])
    except Exception as error:  # noqa: BLE001
        raise MetadataFormatError(f"ledger metadata message: {error}") from None
    if not message.IsInitialized():
        raise MetadataFormatError(f"ledger metadata lacks {message.FindInitializationErrors()}")
    return LedgerMetadata(
        ledger_id=ledger_id, version=version,
        digest_type=DigestType(message.digestType) if message.HasField("digestType")
        else DigestType.CRC32C,
        state=_STATE_OF[message.state], last_entry_id=message.lastEntryId
        if message.HasField("lastEntryId") else -1,
        length=message.length, ctime_ms=message.ctime,
        custom={entry.key: entry.value.decode("utf-8", "replace")
                for entry in message.customMetadata},
        ensemble_size=message.ensembleSize, write_quorum=message.quorumSize,
        ack_quorum=message.ackQuorumSize if message.HasField("ackQuorumSize")
        else message.quorumSize,
        ensembles=tuple((segment.firstEntryId, tuple(segment.ensembleMember))
                        for segment in message.segment),
        password=bytes(message.password),
        ctoken=message.cToken if message.HasField("cToken") else 0)


def without_store_fields(metadata: LedgerMetadata) -> LedgerMetadata:
    """What travels in the bytes (MF1): everything but the id and the version."""
    return dataclasses.replace(metadata, ledger_id=None, version=0)
