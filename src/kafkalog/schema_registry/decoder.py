"""Decoders: a key's or a value's bytes to a Python object, by format.

| format | bytes | object |
|---|---|---|
| ``bytes`` | anything | the bytes |
| ``string`` | UTF-8 | ``str`` (invalid UTF-8 is an error, not replaced) |
| ``json`` | JSON text, or Schema Registry's wire format around JSON (JSON Schema) | what ``json.loads`` gives; framed values are validated against their schema when asked |
| ``avro`` | wire format around Avro binary | ``dict`` (records), decoded with the writer schema of the id, resolved to the subject's reader schema when one is given |
| ``protobuf`` | wire format, message indexes, Protobuf message | ``dict`` with the ``.proto`` field names |
| ``registry`` | wire format | as the registry's ``schemaType`` of the id says (Avro, Protobuf or JSON) |

A null key or value decodes to None in every format. Every failure is a
:class:`~kafkalog.errors.SchemaError` (:class:`~kafkalog.errors.UnknownSchemaError` for an id
the store does not have, :class:`~kafkalog.errors.SchemaDecodeError` for bytes that do not
decode) naming the schema id and subject; the caller adds the record's offset.

:meth:`Decoder.decode_to_json` writes the object as compact JSON text: bytes as base64 (as
Kafka Connect's JSON converter writes them), decimals as strings (exact), dates, times and
timestamps in ISO 8601, UUIDs as strings.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid
from abc import ABC, abstractmethod
from typing import Any

from ..errors import SchemaDecodeError, SchemaError
from .schema import AVRO, JSON, PROTOBUF, Schema
from .store import SchemaStore
from .wire import HEADER, MAGIC_BYTE, is_framed, unframe

#: The formats :func:`make_decoder` knows.
FORMATS = ("avro", "protobuf", "json", "string", "bytes", "registry")
#: The formats whose bytes carry a schema id, and the registry's type each expects.
_SCHEMA_TYPES = {"avro": AVRO, "protobuf": PROTOBUF, "json": JSON}


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if isinstance(obj, decimal.Decimal):
        return str(obj)
    if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
        return obj.isoformat()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} has no JSON form")


def to_json(obj: Any) -> str:
    """``obj`` (a decoded key or value) as compact JSON text (the module docstring's rules)."""
    return json.dumps(obj, default=_json_default, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=True)


class Decoder(ABC):
    """Decodes keys or values of one format (make one with :func:`make_decoder`).

    Attributes:
        format: one of :data:`FORMATS`.
        store: the schema store (None for ``bytes``, ``string`` and plain ``json``).
        subject, version: the reader schema's subject and version (None: the writer's schema;
            version None: the subject's latest).
    """

    def __init__(self, format: str, store: SchemaStore | None = None, *, subject: str | None = None,
                 version: int | None = None) -> None:
        self.format = format
        self.store = store
        self.subject = subject
        self.version = version

    def decode(self, data: bytes | memoryview | None) -> Any:
        """``data`` as a Python object (None stays None); raises :class:`SchemaError`."""
        if data is None:
            return None
        return self._decode(data)

    @abstractmethod
    def _decode(self, data: bytes | memoryview) -> Any:
        """``data`` (not None) decoded."""

    def decode_to_json(self, data: bytes | memoryview | None) -> str:
        """``data`` decoded, as compact JSON text (``null`` for None)."""
        return to_json(self.decode(data))

    @property
    def reader_schema(self) -> Schema | None:
        """The subject's schema records are resolved to (None without a subject)."""
        if self.subject is None or self.store is None:
            return None
        return self.store.subject_version(self.subject, self.version)

    def __repr__(self) -> str:
        where = f", subject={self.subject!r}" if self.subject else ""
        return f"{type(self).__name__}({self.format!r}{where})"


class BytesDecoder(Decoder):
    """``bytes``: the bytes themselves."""

    def _decode(self, data: bytes | memoryview) -> bytes:
        return bytes(data)


class StringDecoder(Decoder):
    """``string``: UTF-8 text (Kafka's ``StringDeserializer``), strictly."""

    def _decode(self, data: bytes | memoryview) -> str:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise SchemaDecodeError(f"not UTF-8 at byte {e.start}: {e.reason}") from None


class JsonDecoder(Decoder):
    """``json``: JSON text; a value in Schema Registry's wire format (JSON Schema's serializer)
    has its header cut off first (JSON text never starts with a zero byte), and is validated
    against the schema of its id when ``validate`` is set."""

    def __init__(self, format: str, store: SchemaStore | None = None, *, subject: str | None = None,
                 version: int | None = None, validate: bool = False) -> None:
        super().__init__(format, store, subject=subject, version=version)
        self.validate = validate
        self._validators: dict[int, Any] = {}

    def _decode(self, data: bytes | memoryview) -> Any:
        schema_id = None
        if is_framed(data):
            framed = unframe(data)
            schema_id, data = framed.schema_id, framed.payload
        try:
            obj = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise SchemaDecodeError(f"not JSON: {e}", schema_id=schema_id) from None
        if schema_id is not None and self.validate:
            self._validator(schema_id)(obj)
        return obj

    def _validator(self, schema_id: int) -> Any:
        check = self._validators.get(schema_id)
        if check is None:
            if self.store is None:
                raise SchemaError("validating JSON Schema values needs a schema store (--schema-registry)",
                                  schema_id=schema_id)
            from .json_schema import validator

            check = self._validators[schema_id] = validator(self.store, self.store.schema(schema_id))
        return check


class RegistryDecoder(Decoder):
    """``avro``, ``protobuf``, ``registry``: Schema Registry's wire format, decoded with the
    schema of the id (by the registry's schema type for ``registry``; a ``avro``/``protobuf``
    decoder refuses an id of another type)."""

    def __init__(self, format: str, store: SchemaStore | None = None, *, subject: str | None = None,
                 version: int | None = None, validate: bool = False) -> None:
        if store is None:
            raise SchemaError(f"the {format} format needs a schema store: a _schemas directory or a "
                              "registry URL (--schema-registry / schema_registry=)", subject=subject)
        super().__init__(format, store, subject=subject, version=version)
        self.validate = validate
        self._by_type: dict[str, Any] = {}
        self._schemas: dict[int, Schema] = {}  # by id: a registered id never changes its schema
        self._fast: dict[int, Any] = {}  # Avro ids seen: the whole per-record path in one function

    def _type_decoder(self, schema_type: str, schema_id: int) -> Any:
        decoder = self._by_type.get(schema_type)
        if decoder is not None:
            return decoder
        if schema_type == AVRO:
            from .avro import AvroPayloadDecoder

            decoder = AvroPayloadDecoder(self.store, self.subject, self.version)
        elif schema_type == PROTOBUF:
            from .protobuf import ProtobufPayloadDecoder

            decoder = ProtobufPayloadDecoder(self.store)
        elif schema_type == JSON:
            decoder = JsonDecoder("json", self.store, validate=self.validate)
        else:
            raise SchemaDecodeError(f"unknown schema type {schema_type!r}", schema_id=schema_id)
        self._by_type[schema_type] = decoder
        return decoder

    def message_name(self, data: bytes | memoryview) -> str | None:
        """The full name of the Protobuf message ``data`` holds (by its id and message indexes),
        or None when its schema is not Protobuf."""
        framed = unframe(data)
        schema = self._schema(framed.schema_id)
        if schema.schema_type != PROTOBUF:
            return None
        return self._type_decoder(PROTOBUF, framed.schema_id).message_name(data, schema)

    def _schema(self, schema_id: int) -> Schema:
        schema = self._schemas.get(schema_id)
        if schema is None:
            schema = self._schemas[schema_id] = self.store.schema(schema_id)
        return schema

    def _decode(self, data: bytes | memoryview) -> Any:
        if len(data) >= HEADER.size and data[0] == MAGIC_BYTE:
            fast = self._fast.get(int.from_bytes(data[1:HEADER.size], "big"))
            if fast is not None:
                return fast(data)
        framed = unframe(data)
        schema = self._schema(framed.schema_id)
        expected = _SCHEMA_TYPES.get(self.format)
        if expected is not None and schema.schema_type != expected:
            raise SchemaDecodeError(f"is a {schema.schema_type} schema, not {expected} (format {self.format!r}; "
                                    "use 'registry' to decode by the registry's type)",
                                    schema_id=framed.schema_id, subject=schema.subject)
        decoder = self._by_type.get(schema.schema_type) or self._type_decoder(schema.schema_type, framed.schema_id)
        if schema.schema_type == AVRO:
            self._fast[framed.schema_id] = decoder.reader_for(schema)
            return decoder.decode_payload(framed, schema)
        if schema.schema_type == JSON:
            return decoder._decode(data)
        return decoder.decode_framed(data, schema)


def make_decoder(fmt: str, store: SchemaStore | None = None, *, subject: str | None = None,
                 version: int | None = None, validate: bool = False) -> Decoder:
    """A decoder for format ``fmt`` (one of :data:`FORMATS`; see the module's table).

    Args:
        fmt: ``avro``, ``protobuf``, ``json``, ``string``, ``bytes`` or ``registry``.
        store: where schema ids are looked up (:func:`open_schema_store`); needed by ``avro``,
            ``protobuf`` and ``registry``, and by ``json`` to validate.
        subject: the subject whose schema records are read with (Avro: the reader schema that
            every writer version is resolved to; the Spark reader takes its struct type from it).
        version: the subject's version (default: the latest not deleted).
        validate: check JSON Schema values against their schema (needs ``jsonschema``).

    Raises:
        SchemaError: an unknown format, or a format that needs a store given none.
    """
    fmt = fmt.lower()
    if fmt == "bytes":
        return BytesDecoder(fmt)
    if fmt == "string":
        return StringDecoder(fmt)
    if fmt == "json":
        return JsonDecoder(fmt, store, subject=subject, version=version, validate=validate)
    if fmt in ("avro", "protobuf", "registry"):
        return RegistryDecoder(fmt, store, subject=subject, version=version, validate=validate)
    raise SchemaError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
