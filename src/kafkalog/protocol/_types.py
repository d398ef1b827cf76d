"""The vocabulary of Kafka's message schemas (``clients/src/main/resources/common/message/*.json``):
primitive types, fields with the versions they exist in, arrays, structs and versioned messages,
plus the one error type every decoding failure raises.

A schema is data: a :class:`Struct` of :class:`Field` s in Kafka's order. The interpreter in
``_codec.py`` reads and writes any of them; the tables in ``_apis.py`` (the broker's requests and
responses) and ``_records.py`` (the coordinator and control records the dump decodes) declare
them with :func:`_f`.

**Primitive types** (big-endian): int8/16/32/64, uint16, bool (one byte, non-zero is true),
uuid (16 bytes), string (int16 length, -1 = null), bytes/records (int32 length, -1 = null),
array (int32 count, -1 = null). Flexible versions use compact forms: unsigned varint length + 1
(0 = null), and every struct ends with tagged fields (unsigned varint count, then per field:
tag, size, bytes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ..errors import KafkalogError


class ProtocolError(KafkalogError, ValueError):
    """Bytes that are not a well-formed Kafka request, response or record (Kafka's
    ``InvalidRequestException``); ``position`` is the byte position in the frame."""


class UnsupportedApiError(ProtocolError):
    """A request for an API key or version this module does not implement. Kafka closes the
    connection on these (except ApiVersions, answered in the v0 layout)."""

    def __init__(self, reason: str, *, api_key: int = -1, api_version: int = -1, correlation_id: int | None = None,
                 file: str | None = None, position: int | None = 0) -> None:
        super().__init__(reason, file=file, position=position)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id

    def __reduce__(self):
        return (type(self), (self.reason,), dict(self.__dict__))


# -- primitive types ------------------------------------------------------------------------------

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
UVARINT_MAX = 2**32 - 1
#: Kafka: a string field holds at most Short.MAX_VALUE bytes.
STRING_MAX = 2**15 - 1
#: The highest version a schema can name (versions are int16).
VERSION_MAX = 2**15
#: Bytes of a ``uuid`` field (two longs).
UUID_SIZE = 16
#: Bytes of the length of a non-compact string (int16) and of bytes or an array (int32).
STRING_LENGTH_SIZE = 2
LENGTH_SIZE = 4
#: Bytes of the smallest compact length (an unsigned varint) and of an empty tagged-field count.
COMPACT_LENGTH_MIN_SIZE = 1
TAGGED_FIELDS_MIN_SIZE = 1


class _Prim:
    """A fixed-size or length-prefixed primitive type."""

    __slots__ = ("name", "fmt", "min_size", "compact_min_size", "zero")

    def __init__(self, name: str, fmt: struct.Struct | None, min_size: int, compact_min_size: int, zero: Any) -> None:
        self.name = name
        self.fmt = fmt
        self.min_size = min_size
        self.compact_min_size = compact_min_size
        self.zero = zero

    def __repr__(self) -> str:
        return self.name.upper()


def _fixed(name: str, fmt: str, zero: Any = 0) -> _Prim:
    s = struct.Struct(fmt)
    return _Prim(name, s, s.size, s.size, zero)


INT8 = _fixed("int8", ">b")
INT16 = _fixed("int16", ">h")
INT32 = _fixed("int32", ">i")
INT64 = _fixed("int64", ">q")
UINT16 = _fixed("uint16", ">H")
FLOAT64 = _fixed("float64", ">d", 0.0)
BOOL = _Prim("bool", None, 1, 1, False)
#: Decoded as Kafka's ``Uuid.toString``: URL-safe base64 without padding.
UUID = _Prim("uuid", None, UUID_SIZE, UUID_SIZE, "AAAAAAAAAAAAAAAAAAAAAA")
STRING = _Prim("string", None, STRING_LENGTH_SIZE, COMPACT_LENGTH_MIN_SIZE, "")
BYTES = _Prim("bytes", None, LENGTH_SIZE, COMPACT_LENGTH_MIN_SIZE, b"")
#: A Kafka ``records`` field: bytes on the wire; decoded as a memoryview of the frame, encoded
#: from bytes, a file slice (anything with ``size_in_bytes``, sent separately) or a list of them.
RECORDS = _Prim("records", None, LENGTH_SIZE, COMPACT_LENGTH_MIN_SIZE, b"")

#: The fixed-size integer types.
INTS = (INT8, INT16, INT32, INT64, UINT16)
#: Every fixed-size type (read and written with its ``fmt``).
FIXED = (*INTS, FLOAT64)


def _versions(spec: str) -> tuple[int, int]:
    """Kafka's version range notation: ``"3+"``, ``"8-10"``, ``"0"``, ``"none"``."""
    if spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), VERSION_MAX)
    if "-" in spec:
        low, high = spec.split("-")
        return (int(low), int(high))
    return (int(spec), int(spec))


@dataclass(frozen=True, eq=False)
class Field:
    """One field of a schema: its name, type, the versions it exists in, the versions it may be
    null in, its default (used when a version lacks it or an encoder is not given it), and for a
    tagged field its tag (written only when it differs from the default)."""

    name: str
    type: Any  # a primitive, an Array or a Struct
    versions: tuple[int, int] = (0, VERSION_MAX)
    nullable: tuple[int, int] = (1, 0)
    default: Any = None
    tag: int | None = None

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable_in(self, version: int) -> bool:
        return self.nullable[0] <= version <= self.nullable[1]

    def default_value(self) -> Any:
        if isinstance(self.default, list):
            return list(self.default)
        return self.default


@dataclass(frozen=True, eq=False)
class Array:
    """An array of a primitive type or of a :class:`Struct`."""

    element: Any  # a primitive or a Struct


@dataclass(frozen=True, eq=False)
class Struct:
    """A sequence of fields (a message body or an array element)."""

    fields: tuple[Field, ...]

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def tagged(self, tag: int, version: int) -> Field | None:
        """The field with ``tag`` at ``version``, or None for a tag this schema does not know."""
        for f in self.fields:
            if f.tag == tag and f.present(version):
                return f
        return None


@dataclass(frozen=True, eq=False)
class Message:
    """A versioned top-level message that is not an API body (a record key or value, a consumer
    protocol blob): Kafka's name, the versions it has, its first flexible version (None for
    ``"flexibleVersions": "none"``) and its fields."""

    name: str
    versions: tuple[int, int]
    first_flexible: int | None
    struct: Struct

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.struct.fields

    def has_version(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def flexible(self, version: int) -> bool:
        return self.first_flexible is not None and version >= self.first_flexible


_NO_DEFAULT = object()


def _f(name: str, type_: Any, versions: str = "0+", *, nullable: str = "none", default: Any = _NO_DEFAULT,
       tag: int | None = None) -> Field:
    """A field as Kafka's JSON spec writes it; a list as the type is an array of that struct."""
    if isinstance(type_, list):  # an array of structs, written inline
        type_ = Array(Struct(tuple(type_)))
    if default is _NO_DEFAULT:
        if isinstance(type_, Array):
            default = []
        elif isinstance(type_, _Prim):
            default = type_.zero
        else:
            default = None
    return Field(name, type_, _versions(versions), _versions(nullable), default, tag)


def _struct(*fields: Field) -> Struct:
    return Struct(tuple(fields))


def _message(name: str, versions: str, flexible: str, *fields: Field) -> Message:
    """A :class:`Message` as Kafka's JSON spec heads it (``"validVersions"``,
    ``"flexibleVersions"``)."""
    return Message(name, _versions(versions), None if flexible == "none" else _versions(flexible)[0],
                   Struct(tuple(fields)))
