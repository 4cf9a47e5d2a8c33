"""BookKeeper's v3 protocol: ``BookkeeperProtocol.proto``'s ``Request`` and ``Response``
(protobuf, proto2), each frame an i32 length then one serialized message.

The message classes are built from a descriptor written here field by field from
BookKeeper's numbers (as api/client/metadata_format.py builds its metadata messages), so
neither protoc nor generated code is needed; protobuf does every varint (except a plain
add's, read and answered by v3_add.py on the listener's hot path). Message and package
names are ours; the bytes depend only on field numbers and types.

Operations (``OperationType``) and status codes (``StatusCode``) carry BookKeeper's numbers;
note that v3's status numbers differ from v2's return codes (EFENCED is 504 here, 104 there).

Invariants:
    BP3. ``decode_request`` raises ``ProtocolError`` for bytes that are not a whole,
         initialized ``Request`` (a parse error or a required field missing), never
         anything else: the listener then tries v2 (BookKeeper's RequestDecoder does), or
         answers EBADREQ.
"""

from __future__ import annotations

import struct

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from api import protodesc
from api.bkproto.v2 import ProtocolError

_F = descriptor_pb2.FieldDescriptorProto
_REQ, _OPT, _REP = _F.LABEL_REQUIRED, _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_PKG = "bkwire"

PROTOCOL_VERSIONS = {"VERSION_ONE": 1, "VERSION_TWO": 2, "VERSION_THREE": 3}
STATUS = {"EOK": 0, "ENOLEDGER": 402, "ENOENTRY": 403, "EBADREQ": 404, "EIO": 501,
          "EUA": 502, "EBADVERSION": 503, "EFENCED": 504, "EREADONLY": 505,
          "ETOOMANYREQUESTS": 506, "EUNKNOWNLEDGERSTATE": 507}
OPERATIONS = {"READ_ENTRY": 1, "ADD_ENTRY": 2, "RANGE_READ_ENTRY": 3, "RANGE_ADD_ENTRY": 4,
              "AUTH": 5, "WRITE_LAC": 6, "READ_LAC": 7, "GET_BOOKIE_INFO": 8, "START_TLS": 9,
              "FORCE_LEDGER": 10, "GET_LIST_OF_ENTRIES_OF_LEDGER": 11, "BATCH_READ_ENTRY": 12}
#: Request/Response fields holding each operation's body (the same numbers on both sides).
BODY_FIELDS = {"READ_ENTRY": ("readRequest", "readResponse", 100),
               "ADD_ENTRY": ("addRequest", "addResponse", 101),
               "AUTH": ("authRequest", "authResponse", 102),
               "WRITE_LAC": ("writeLacRequest", "writeLacResponse", 103),
               "READ_LAC": ("readLacRequest", "readLacResponse", 104),
               "GET_BOOKIE_INFO": ("getBookieInfoRequest", "getBookieInfoResponse", 105),
               "START_TLS": ("startTLSRequest", "startTLSResponse", 106),
               "FORCE_LEDGER": ("forceLedgerRequest", "forceLedgerResponse", 107),
               "GET_LIST_OF_ENTRIES_OF_LEDGER": ("getListOfEntriesOfLedgerRequest",
                                                 "getListOfEntriesOfLedgerResponse", 108)}


def _field(message, name, number, kind, label=_OPT, type_name=None, default=None):
    protodesc.field(message, name, number, kind, label,
                    type_name and f".{_PKG}.{type_name}", default)


def _message(file, name: str, fields) -> descriptor_pb2.DescriptorProto:
    message = file.message_type.add(name=name)
    for spec in fields:
        _field(message, *spec)
    return message


def _descriptor() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="bkwire_protocol.proto", package=_PKG,
                                              syntax="proto2")
    protodesc.enum(file, "ProtocolVersion", PROTOCOL_VERSIONS)
    protodesc.enum(file, "StatusCode", STATUS)
    protodesc.enum(file, "OperationType", OPERATIONS)
    i64, i32, u32, u64 = _F.TYPE_INT64, _F.TYPE_INT32, _F.TYPE_UINT32, _F.TYPE_UINT64
    data, text, enum, msg = _F.TYPE_BYTES, _F.TYPE_STRING, _F.TYPE_ENUM, _F.TYPE_MESSAGE
    _message(file, "BKPacketHeader", [
        ("version", 1, enum, _REQ, "ProtocolVersion"), ("operation", 2, enum, _REQ,
                                                        "OperationType"),
        ("txnId", 3, u64, _REQ), ("priority", 4, u32, _OPT, None, "0")])
    _message(file, "ContextPair", [("key", 1, text, _REQ), ("value", 2, text, _REQ)])
    read = _message(file, "ReadRequest", [
        ("ledgerId", 1, i64, _REQ), ("entryId", 2, i64, _REQ), ("masterKey", 3, data),
        ("previousLAC", 4, i64), ("timeOut", 5, i64)])
    protodesc.enum(read, "Flag", {"FENCE_LEDGER": 1, "ENTRY_PIGGYBACK": 2})
    _field(read, "flag", 100, enum, _OPT, "ReadRequest.Flag")
    add = _message(file, "AddRequest", [
        ("ledgerId", 1, i64, _REQ), ("entryId", 2, i64, _REQ), ("masterKey", 3, data, _REQ),
        ("body", 4, data, _REQ), ("writeFlags", 5, i32)])
    protodesc.enum(add, "Flag", {"RECOVERY_ADD": 1})
    _field(add, "flag", 100, enum, _OPT, "AddRequest.Flag")
    _message(file, "StartTLSRequest", [])
    _message(file, "WriteLacRequest", [
        ("ledgerId", 1, i64, _REQ), ("lac", 2, i64, _REQ), ("masterKey", 3, data, _REQ),
        ("body", 4, data, _REQ)])
    _message(file, "ForceLedgerRequest", [("ledgerId", 1, i64, _REQ)])
    _message(file, "ReadLacRequest", [("ledgerId", 1, i64, _REQ)])
    info = _message(file, "GetBookieInfoRequest", [("requested", 1, i64)])
    protodesc.enum(info, "Flags", {"TOTAL_DISK_CAPACITY": 1, "FREE_DISK_SPACE": 2})
    _message(file, "GetListOfEntriesOfLedgerRequest", [("ledgerId", 1, i64, _REQ)])
    _message(file, "AuthMessage", [("authPluginName", 1, text, _REQ),
                                   ("payload", 2, data, _REQ)])
    status = ("status", 1, enum, _REQ, "StatusCode")
    _message(file, "ReadResponse", [
        status, ("ledgerId", 2, i64, _REQ), ("entryId", 3, i64, _REQ), ("body", 4, data),
        ("maxLAC", 5, i64), ("lacUpdateTimestamp", 6, i64)])
    _message(file, "AddResponse", [status, ("ledgerId", 2, i64, _REQ),
                                   ("entryId", 3, i64, _REQ)])
    _message(file, "WriteLacResponse", [status, ("ledgerId", 2, i64, _REQ)])
    _message(file, "ForceLedgerResponse", [status, ("ledgerId", 2, i64, _REQ)])
    _message(file, "ReadLacResponse", [status, ("ledgerId", 2, i64, _REQ),
                                       ("lacBody", 3, data), ("lastEntryBody", 4, data)])
    _message(file, "GetBookieInfoResponse", [status, ("totalDiskCapacity", 2, i64),
                                             ("freeDiskSpace", 3, i64)])
    _message(file, "GetListOfEntriesOfLedgerResponse", [
        status, ("ledgerId", 2, i64, _REQ), ("availabilityOfEntriesOfLedger", 3, data)])
    _message(file, "StartTLSResponse", [])
    kinds = {"readRequest": "ReadRequest", "addRequest": "AddRequest",
             "authRequest": "AuthMessage", "writeLacRequest": "WriteLacRequest",
             "readLacRequest": "ReadLacRequest", "getBookieInfoRequest": "GetBookieInfoRequest",
             "startTLSRequest": "StartTLSRequest", "forceLedgerRequest": "ForceLedgerRequest",
             "getListOfEntriesOfLedgerRequest": "GetListOfEntriesOfLedgerRequest",
             "readResponse": "ReadResponse", "addResponse": "AddResponse",
             "authResponse": "AuthMessage", "writeLacResponse": "WriteLacResponse",
             "readLacResponse": "ReadLacResponse",
             "getBookieInfoResponse": "GetBookieInfoResponse",
             "startTLSResponse": "StartTLSResponse", "forceLedgerResponse": "ForceLedgerResponse",
             "getListOfEntriesOfLedgerResponse": "GetListOfEntriesOfLedgerResponse"}
    request = _message(file, "Request", [("header", 1, msg, _REQ, "BKPacketHeader")])
    response = _message(file, "Response", [("header", 1, msg, _REQ, "BKPacketHeader"),
                                           ("status", 2, enum, _REQ, "StatusCode")])
    for request_field, response_field, number in BODY_FIELDS.values():
        _field(request, request_field, number, msg, _OPT, kinds[request_field])
        _field(response, response_field, number, msg, _OPT, kinds[response_field])
    _field(request, "requestContext", 200, msg, _REP, "ContextPair")
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_descriptor())


def _class(name: str):
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PKG}.{name}"))


Request, Response = _class("Request"), _class("Response")
AuthMessage = _class("AuthMessage")
_I32 = struct.Struct(">i")


def decode_request(packet: bytes):
    """One frame's bytes (without the length word) as a Request message (BP3)."""
    return _parse(Request(), packet, "request")


def decode_response(packet: bytes):
    return _parse(Response(), packet, "response")


def _parse(message, packet: bytes, what: str):
    """``message`` parsed from ``packet`` and whole, or ProtocolError saying why (BP3)."""
    try:
        message.ParseFromString(bytes(packet))
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise ProtocolError(f"not a v3 {what}: {exc}") from None
    if not message.IsInitialized():
        missing = ", ".join(message.FindInitializationErrors())
        raise ProtocolError(f"v3 {what} missing required fields: {missing}")
    return message


def frame(message) -> bytes:
    """A framed message: i32 length, then its serialization."""
    data = message.SerializeToString()
    return _I32.pack(len(data)) + data
