"""The one interpreter of Kafka's message schemas: it decodes and encodes any :class:`Struct`
declared in ``_types.py`` terms, and writes decoded messages as Kafka's ``JsonConverter`` does.

Messages are plain dicts (nested lists of dicts for arrays of structs); decoding fills fields a
version lacks with their defaults, encoding takes a missing field as its default and ignores
fields the version lacks. Unknown tagged fields are kept raw under ``"_tagged_fields"``.

**Two readers, one walk.** :class:`Reader` is the broker's: bounds-checked, every length and
count compared with the bytes present before anything is read or allocated (an array count
against the smallest size its elements could have), every failure a :class:`ProtocolError`
with the byte position in the frame — never an ``IndexError`` or ``struct.error``.
:class:`MessageReader` reads as Kafka's generated ``read(Readable, version)`` does, failing
with the message Kafka's exception would carry (the dump prints it). Strings that are not UTF-8
decode with replacement characters, as Java's ``new String(bytes, UTF_8)`` does.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from ._types import (
    BOOL,
    BYTES,
    COMPACT_LENGTH_MIN_SIZE,
    FIXED,
    INT8,
    INT16,
    INT32,
    LENGTH_SIZE,
    RECORDS,
    STRING,
    STRING_MAX,
    TAGGED_FIELDS_MIN_SIZE,
    UUID,
    UUID_SIZE,
    UVARINT_MAX,
    Array,
    Message,
    ProtocolError,
    Struct,
    _Prim,
)

#: An unsigned varint holds 7 bits a byte, at most 5 bytes for 32 bits (Kafka's
#: ``ByteUtils.readUnsignedVarint``).
_VARINT_BITS = 7
_VARINT_MASK = (1 << _VARINT_BITS) - 1
_VARINT_MORE = 1 << _VARINT_BITS
_VARINT_MAX_BYTES = 5
_INT32_BITS = 32

_I16 = INT16.fmt
_I32 = INT32.fmt


def as_bytes_view(data: bytes | bytearray | memoryview) -> memoryview:
    """``data`` as a flat memoryview of unsigned bytes (no copy)."""
    if isinstance(data, memoryview) and data.format == "B":
        return data
    return memoryview(data).cast("B")


# -- decoding -------------------------------------------------------------------------------------


class Reader:
    """A bounds-checked cursor over a frame (``buf[pos:end]``)."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = as_bytes_view(data)
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def error(self, reason: str, position: int | None = None) -> ProtocolError:
        return ProtocolError(reason, position=self.pos if position is None else position)

    def need(self, n: int, what: str) -> None:
        if self.end - self.pos < n:
            raise self.error(f"{what}: {n} bytes needed, {self.end - self.pos} left in the frame")

    def fixed(self, fmt: struct.Struct, what: str) -> int:
        self.need(fmt.size, what)
        (value,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return value

    def _uvarint(self, what: str) -> tuple[int, int] | None:
        """(value, start) of an unsigned varint, or None when it runs past 5 bytes."""
        value = shift = 0
        start = self.pos
        for _ in range(_VARINT_MAX_BYTES):
            self.need(1, what)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & _VARINT_MASK) << shift
            if not b & _VARINT_MORE:
                return value, start
            shift += _VARINT_BITS
        return None

    def uvarint(self, what: str) -> int:
        start = self.pos
        read = self._uvarint(what)
        if read is None:
            raise self.error(f"{what}: unsigned varint longer than {_VARINT_MAX_BYTES} bytes", start)
        value, start = read
        if value > UVARINT_MAX:
            raise self.error(f"{what}: unsigned varint {value} does not fit {_INT32_BITS} bits", start)
        return value

    def take(self, n: int, what: str) -> memoryview:
        self.need(n, what)
        view = self.buf[self.pos:self.pos + n]
        self.pos += n
        return view

    def _length(self, compact: bool, int16: bool, what: str) -> int:
        if compact:
            return self.uvarint(what) - 1
        return self.fixed(_I16 if int16 else _I32, what)

    def string(self, nullable: bool, compact: bool, what: str, name: str = "") -> str | None:
        start = self.pos
        n = self._length(compact, True, what)
        if compact and n > STRING_MAX:
            raise self.error(f"{what}: string length {n} above {STRING_MAX}", start)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.error(f"{what}: invalid string length {n}" + (" (null in a non-nullable field)" if n == -1 else ""),
                             start)
        return str(self.take(n, what), "utf-8", "replace")

    def bytes_(self, nullable: bool, compact: bool, what: str, name: str = "") -> memoryview | None:
        start = self.pos
        n = self._length(compact, False, what)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.error(f"{what}: invalid length {n}", start)
        return self.take(n, what)

    def count(self, nullable: bool, compact: bool, min_size: int, what: str, name: str = "") -> int | None:
        start = self.pos
        n = self._length(compact, False, what)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.error(f"{what}: invalid array length {n}", start)
        # Never trust a count beyond what the remaining bytes could hold.
        if n * min_size > self.end - self.pos:
            raise self.error(
                f"{what}: array of {n} elements (at least {min_size} bytes each) but {self.end - self.pos} "
                "bytes left in the frame", start
            )
        return n

    def tag_order(self, tag: int, previous: int, what: str, start: int) -> None:
        """Tags must ascend (Kafka writes them sorted; a repeat would be ambiguous)."""
        if tag <= previous:
            raise self.error(f"{what}: tag {tag} out of order (after {previous})", start)

    def tagged_fields(self, what: str) -> dict[int, bytes]:
        """The tagged fields that end a flexible struct, raw."""
        return _decode_tagged(self, None, 0, {}, what)


def _int32(value: int) -> int:
    """Java's ``(int)`` of an unsigned 32-bit value."""
    value &= UVARINT_MAX
    return value - (1 << _INT32_BITS) if value >> (_INT32_BITS - 1) else value


class MessageReader(Reader):
    """Reads as Kafka's generated ``read(Readable, version)`` over a ``ByteBufferAccessor``
    does, failing with the message Kafka's exception carries (no position: the dump prints the
    message). Running out of bytes is a ``BufferUnderflowException``, whose message is null."""

    __slots__ = ()

    def error(self, reason: str, position: int | None = None) -> ProtocolError:
        return ProtocolError(reason)

    def need(self, n: int, what: str) -> None:
        if self.end - self.pos < n:
            raise self.error("null")

    def uvarint(self, what: str) -> int:
        read = self._uvarint(what)
        if read is None:
            raise self.error(
                f"Varint is too long, the most significant bit in the {_VARINT_MAX_BYTES}th byte is set")
        return _int32(read[0])  # readUnsignedVarint returns a Java int

    def take(self, n: int, what: str) -> memoryview:
        if n < 0:  # a tagged field's size above 2**31: Java's NegativeArraySizeException
            raise self.error(str(n))
        if n > self.remaining:
            raise self.error(f"Error reading byte array of {n} byte(s): only {self.remaining} byte(s) available")
        view = self.buf[self.pos:self.pos + n]
        self.pos += n
        return view

    def _null(self, nullable: bool, name: str) -> None:
        if not nullable:
            raise self.error(f"non-nullable field {name} was serialized as null")

    def string(self, nullable: bool, compact: bool, what: str, name: str = "") -> str | None:
        n = self._length(compact, True, what)
        if n < 0:
            return self._null(nullable, name)
        if n > STRING_MAX:
            raise self.error(f"string field {name} had invalid length {n}")
        return str(self.take(n, what), "utf-8", "replace")

    def bytes_(self, nullable: bool, compact: bool, what: str, name: str = "") -> memoryview | None:
        n = self._length(compact, False, what)
        if n < 0:
            return self._null(nullable, name)
        return self.take(n, what)

    def count(self, nullable: bool, compact: bool, min_size: int, what: str, name: str = "") -> int | None:
        n = self._length(compact, False, what)
        if n < 0:
            return self._null(nullable, name)
        if n > self.remaining:
            raise self.error(
                f"Tried to allocate a collection of size {n}, but there are only {self.remaining} bytes remaining.")
        return n

    def tag_order(self, tag: int, previous: int, what: str, start: int) -> None:
        """The generated readers take tags in any order."""


def min_size(type_: Any, version: int, compact: bool) -> int:
    """The fewest bytes a value of ``type_`` can take at ``version``."""
    if isinstance(type_, _Prim):
        return type_.compact_min_size if compact else type_.min_size
    if isinstance(type_, Array):
        return COMPACT_LENGTH_MIN_SIZE if compact else LENGTH_SIZE
    size = sum(min_size(f.type, version, compact) for f in type_.fields if f.present(version) and f.tag is None)
    return size + (TAGGED_FIELDS_MIN_SIZE if compact else 0)


def _decode_value(r: Reader, type_: Any, nullable: bool, version: int, compact: bool, what: str, name: str,
                  tagged: bool = False) -> Any:
    if type_ in FIXED:
        return r.fixed(type_.fmt, what)
    if type_ is BOOL:
        r.need(1, what)
        value = r.buf[r.pos] != 0
        r.pos += 1
        return value
    if type_ is UUID:
        r.need(UUID_SIZE, what)
        return base64.urlsafe_b64encode(r.take(UUID_SIZE, what)).decode("ascii").rstrip("=")  # Uuid.toString
    if type_ is STRING:
        return r.string(nullable, compact, what, name)
    if type_ is BYTES:
        view = r.bytes_(nullable, compact, what, name)
        return None if view is None else bytes(view)
    if type_ is RECORDS:
        return r.bytes_(nullable, compact, what, name)
    if isinstance(type_, Array):
        element = type_.element
        n = r.count(nullable, compact, min_size(element, version, compact), what, name)
        if n is None:
            return None
        return [_decode_value(r, element, False, version, compact, f"{what}[{i}]", f"{name} element")
                for i in range(n)]
    if nullable:
        # A nullable struct has a presence marker: a varint in a tagged field, else a byte.
        absent = r.uvarint(what) <= 0 if tagged else r.fixed(INT8.fmt, what) < 0
        if absent:
            return None
    return decode_struct(r, type_, version, compact, what)


def _decode_tagged(r: Reader, struct_: Struct | None, version: int, out: dict[str, Any], what: str) -> dict[int, bytes]:
    """Read the tagged fields ending a flexible struct: known ones into ``out`` (read in place,
    as Kafka's generated code does), the rest returned raw by tag."""
    n = r.uvarint(f"{what} tagged field count")
    raw: dict[int, bytes] = {}
    previous = -1
    for _ in range(n):
        start = r.pos
        tag = r.uvarint(f"{what} tag")
        r.tag_order(tag, previous, what, start)
        previous = tag
        size = r.uvarint(f"{what} tag {tag} size")
        known = None if struct_ is None else struct_.tagged(tag, version)
        if known is None:
            raw[tag] = bytes(r.take(size, f"{what} tag {tag}"))
        else:
            out[known.name] = _decode_value(r, known.type, known.nullable_in(version), version, True,
                                            f"{what}.{known.name}", known.name, tagged=True)
    return raw


def decode_struct(r: Reader, struct_: Struct, version: int, compact: bool, what: str) -> dict[str, Any]:
    """Decode ``struct_`` at ``version`` from ``r`` (``compact``: a flexible version)."""
    out: dict[str, Any] = {}
    for f in struct_.fields:
        if f.tag is None and f.present(version):
            out[f.name] = _decode_value(r, f.type, f.nullable_in(version), version, compact, f"{what}.{f.name}", f.name)
        else:
            out[f.name] = f.default_value()
    if compact:
        tags = _decode_tagged(r, struct_, version, out, what)
        if tags:
            out["_tagged_fields"] = tags
    return out


def read_message(message: Message, reader: Reader, version: int) -> dict[str, Any]:
    """Decode ``message`` at ``version`` (read by the caller, as Kafka's serdes do) from ``reader``.

    Raises:
        ProtocolError: a version the message lacks, or bytes that do not hold it.
    """
    if not message.has_version(version):
        raise reader.error(f"Can't read version {version} of {message.name}")
    return decode_struct(reader, message.struct, version, message.flexible(version), message.name)


def write_message(message: Message, values: dict[str, Any], version: int) -> bytes:
    """Encode ``message`` at ``version`` (without the version prefix, which the caller writes).

    Raises:
        ProtocolError: a version the message lacks, or a value that does not fit its field.
    """
    if not message.has_version(version):
        raise ProtocolError(f"Can't write version {version} of {message.name}")
    w = Writer()
    encode_struct(w, message.struct, values, version, message.flexible(version), message.name)
    return bytes(w.buf)


# -- JSON -----------------------------------------------------------------------------------------


def to_json(schema: Struct | Message, values: dict[str, Any], version: int) -> dict[str, Any]:
    """``<Message>JsonConverter.write(message, version)``, as a dict in Kafka's field order:
    fields the version lacks are left out, tagged fields at their default too, bytes become
    base64 (Jackson's ``BinaryNode``)."""
    out: dict[str, Any] = {}
    for f in schema.fields:
        if not f.present(version):
            continue
        value = values.get(f.name)
        if f.tag is not None and value == f.default:
            continue  # tagged fields are written only when not at their default
        out[f.name] = _json_value(f.type, value, version)
    return out


def _json_value(type_: Any, value: Any, version: int) -> Any:
    if value is None:
        return None
    if isinstance(type_, Struct):
        return to_json(type_, value, version)
    if isinstance(type_, Array):
        return [_json_value(type_.element, v, version) for v in value]
    if type_ is BYTES:
        return base64.b64encode(value).decode("ascii")
    return value


# -- encoding -------------------------------------------------------------------------------------


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint of ``value``."""
    out = bytearray()
    while value > _VARINT_MASK:
        out.append((value & _VARINT_MASK) | _VARINT_MORE)
        value >>= _VARINT_BITS
    out.append(value)
    return bytes(out)


class Writer:
    """Builds a frame as byte chunks and out-of-line record parts (file slices)."""

    __slots__ = ("buf", "parts", "size")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[Any] = []
        self.size = 0  # bytes in the finished parts

    def external(self, part: Any, size: int) -> None:
        if self.buf:
            self.size += len(self.buf)
            self.parts.append(bytes(self.buf))
            self.buf = bytearray()
        self.parts.append(part)
        self.size += size

    def finish(self) -> tuple[list[Any], int]:
        if self.buf:
            self.size += len(self.buf)
            self.parts.append(bytes(self.buf))
            self.buf = bytearray()
        return self.parts, self.size


def is_bytes_like(value: Any) -> bool:
    return isinstance(value, (bytes, bytearray, memoryview))


def _records_size(value: Any) -> int:
    if is_bytes_like(value):
        return memoryview(value).nbytes
    if isinstance(value, (list, tuple)):
        return sum(_records_size(v) for v in value)
    return int(value.size_in_bytes)


def _write_records(w: Writer, value: Any) -> None:
    if is_bytes_like(value):
        w.buf += value
    elif isinstance(value, (list, tuple)):
        for part in value:
            _write_records(w, part)
    else:
        size = int(value.size_in_bytes)
        if size:
            w.external(value, size)


def _encode_length(w: Writer, n: int, compact: bool, int16: bool = False) -> None:
    if compact:
        w.buf += uvarint(n + 1)
    elif int16:
        w.buf += _I16.pack(n)
    else:
        w.buf += _I32.pack(n)


def encode_value(w: Writer, type_: Any, value: Any, nullable: bool, version: int, compact: bool, what: str,
                 tagged: bool = False) -> None:
    """Append ``value`` of ``type_`` to ``w``."""
    if type_ in FIXED:
        try:
            w.buf += type_.fmt.pack(value)
        except struct.error as e:
            raise ProtocolError(f"{what}: {value!r} is not a valid {type_.name} ({e})") from None
        return
    if type_ is BOOL:
        w.buf.append(1 if value else 0)
        return
    if type_ is UUID:
        data = base64.urlsafe_b64decode(value + "==")
        if len(data) != UUID_SIZE:
            raise ProtocolError(f"{what}: {value!r} is not a valid uuid")
        w.buf += data
        return
    if isinstance(type_, Struct):
        if nullable:  # the presence marker _decode_value reads
            present = value is not None
            if tagged:
                w.buf += uvarint(1 if present else 0)
            else:
                w.buf += INT8.fmt.pack(1 if present else -1)
            if not present:
                return
        encode_struct(w, type_, value, version, compact, what)
        return
    if value is None:
        if not nullable:
            raise ProtocolError(f"{what}: null in a non-nullable field (version {version})")
        _encode_length(w, -1, compact, int16=type_ is STRING)
        return
    if type_ is STRING:
        data = value.encode("utf-8")
        if len(data) > STRING_MAX:
            raise ProtocolError(f"{what}: string of {len(data)} bytes above {STRING_MAX}")
        _encode_length(w, len(data), compact, int16=True)
        w.buf += data
    elif type_ is BYTES:
        _encode_length(w, len(value), compact)
        w.buf += value
    elif type_ is RECORDS:
        _encode_length(w, _records_size(value), compact)
        _write_records(w, value)
    else:  # an Array
        _encode_length(w, len(value), compact)
        for i, element in enumerate(value):
            encode_value(w, type_.element, element, False, version, compact, f"{what}[{i}]")


def encode_struct(w: Writer, struct_: Struct, value: dict[str, Any], version: int, compact: bool, what: str) -> None:
    """Append ``value`` as ``struct_`` at ``version`` to ``w``; known tagged fields away from
    their default are written with the raw ones in ``"_tagged_fields"``."""
    tags: dict[int, bytes] = dict(value.get("_tagged_fields") or {}) if compact and isinstance(value, dict) else {}
    for f in struct_.fields:
        if not f.present(version):
            continue
        v = value.get(f.name, f.default) if isinstance(value, dict) else getattr(value, f.name)
        if f.tag is None:
            encode_value(w, f.type, v, f.nullable_in(version), version, compact, f"{what}.{f.name}")
        elif compact and v != f.default:
            tagged = Writer()
            encode_value(tagged, f.type, v, f.nullable_in(version), version, True, f"{what}.{f.name}", tagged=True)
            tags[f.tag] = bytes(tagged.buf)
    if compact:
        w.buf += uvarint(len(tags))
        for tag in sorted(tags):
            data = tags[tag]
            w.buf += uvarint(tag) + uvarint(len(data))
            w.buf += data
