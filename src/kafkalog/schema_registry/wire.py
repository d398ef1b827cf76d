"""Schema Registry's wire format: the framing in front of every serialized key or value.

| bytes | field | rule |
|---|---|---|
| 1 | magic byte | 0 (``AbstractKafkaSchemaSerDe.MAGIC_BYTE``) |
| 4 | schema id | big-endian int32, the registry's global id |
| varints | message indexes | Protobuf only: a zigzag varint count, then that many zigzag varint indexes into the file's nested message types; a count of 0 alone means ``[0]`` (the first message) |
| rest | payload | Avro binary, Protobuf message, JSON text |
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import SchemaDecodeError

#: ``AbstractKafkaSchemaSerDe.MAGIC_BYTE``.
MAGIC_BYTE = 0
#: The magic byte and the big-endian schema id.
HEADER = struct.Struct(">bI")
assert HEADER.size == 5
#: More message indexes than this is not a real nesting depth: the bytes are not the format.
MAX_MESSAGE_INDEXES = 256


class Framed(NamedTuple):
    """A payload cut out of the wire format."""

    schema_id: int
    payload: memoryview
    #: Protobuf's message indexes (None when not read).
    message_indexes: list[int] | None = None


def is_framed(data: bytes | memoryview) -> bool:
    """Whether ``data`` starts like the wire format (a zero magic byte and a schema id)."""
    return len(data) >= HEADER.size and data[0] == MAGIC_BYTE


def unframe(data: bytes | memoryview) -> Framed:
    """The schema id and the payload of ``data`` (raises :class:`SchemaDecodeError`)."""
    if len(data) < HEADER.size:
        raise SchemaDecodeError(f"{len(data)} bytes: Schema Registry's wire format needs at least "
                                f"{HEADER.size} (magic byte 0 and a 4-byte schema id)")
    magic, schema_id = HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise SchemaDecodeError(f"unknown magic byte {data[0]} (Schema Registry's wire format starts with 0)")
    return Framed(schema_id, memoryview(data)[HEADER.size:])


def _zigzag_varint(view: memoryview, pos: int, schema_id: int) -> tuple[int, int]:
    """One zigzag varint (Kafka's ``ByteUtils.readVarint``) at ``pos``: (value, next position)."""
    raw = shift = 0
    while True:
        if pos >= len(view):
            raise SchemaDecodeError("the Protobuf message indexes end inside a varint", schema_id=schema_id)
        byte = view[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 28:
            raise SchemaDecodeError("a Protobuf message index varint is longer than 5 bytes", schema_id=schema_id)
    return (raw >> 1) ^ -(raw & 1), pos


def unframe_protobuf(data: bytes | memoryview) -> Framed:
    """:func:`unframe`, then the Protobuf message-index list (``MessageIndexes.readFrom``)."""
    framed = unframe(data)
    view = framed.payload
    count, pos = _zigzag_varint(view, 0, framed.schema_id)
    if count == 0:
        return Framed(framed.schema_id, view[pos:], [0])  # the common case: the first message
    if not 0 < count <= MAX_MESSAGE_INDEXES:
        raise SchemaDecodeError(f"{count} Protobuf message indexes (expected 1 to {MAX_MESSAGE_INDEXES})",
                                schema_id=framed.schema_id)
    indexes = []
    for _ in range(count):
        index, pos = _zigzag_varint(view, pos, framed.schema_id)
        if index < 0:
            raise SchemaDecodeError(f"negative Protobuf message index {index}", schema_id=framed.schema_id)
        indexes.append(index)
    return Framed(framed.schema_id, view[pos:], indexes)
