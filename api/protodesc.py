"""Protobuf descriptors written in code, field by field, from BookKeeper's .proto files (no
generated modules, no protoc at build time): the two helpers both of this project's
protobuf formats use, BookKeeper's wire protocol (``api/bkproto/v3.py``) and its ZooKeeper
formats (``api/client/metadata_format.py``)."""

from __future__ import annotations

from google.protobuf import descriptor_pb2

FieldKind = descriptor_pb2.FieldDescriptorProto


def field(message, name: str, number: int, kind: int, label: int = FieldKind.LABEL_OPTIONAL,
          type_name: str | None = None, default: str | None = None) -> None:
    """Add a field to a DescriptorProto; ``type_name`` fully qualified (".pkg.Message")."""
    added = message.field.add(name=name, number=number, type=kind, label=label)
    if type_name:
        added.type_name = type_name
    if default is not None:
        added.default_value = default


def enum(parent, name: str, values: dict[str, int]) -> None:
    """Add an enum to a FileDescriptorProto or DescriptorProto."""
    added = parent.enum_type.add(name=name)
    for value_name, number in values.items():
        added.value.add(name=value_name, number=number)
