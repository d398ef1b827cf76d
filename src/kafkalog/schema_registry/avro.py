"""Avro payloads (fastavro): the writer schema of the record's id, resolved to a reader schema.

Schema Registry's Avro serializer writes the record with the schema registered under the id,
as Avro binary without a container (``schemaless``). Referenced schemas (``references``: each
``name`` is the full name of an Avro named type) are parsed first so that the schema can name
their types. With a subject given, the subject's version is the *reader* schema: Avro's schema
resolution (fields added with a default are filled in, removed fields skipped, promotions
applied) turns every writer version into it, as a consumer with ``specific.avro.reader`` or
``use.latest.version`` would. The payload must be read to its last byte: bytes left over mean
the payload is not what the schema describes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

from ..errors import SchemaDecodeError, SchemaError
from .extras import require
from .schema import AVRO, Schema
from .store import SchemaStore
from .wire import HEADER, Framed, unframe


def parse_avro(store: SchemaStore | None, schema: Schema) -> Any:
    """``schema`` (and the named types it references) parsed by fastavro."""
    fastavro = require("fastavro")
    named: dict[str, Any] = {}
    try:
        if store is not None:
            for _ref, target in store.references(schema):
                fastavro.parse_schema(json.loads(target.schema), named_schemas=named)
        return fastavro.parse_schema(json.loads(schema.schema), named_schemas=named)
    except SchemaError:
        raise
    except Exception as e:  # fastavro raises SchemaParseException, ValueError, KeyError, ...
        raise SchemaError(f"the Avro schema does not parse: {e}", schema_id=schema.id,
                          subject=schema.subject) from None


class AvroPayloadDecoder:
    """Avro records of any writer id, resolved to the subject's version when one is given."""

    def __init__(self, store: SchemaStore, subject: str | None = None, version: int | None = None) -> None:
        self._fastavro = require("fastavro")
        self.store = store
        self.subject = subject
        self.version = version
        self._writers: dict[int, Any] = {}
        self._reader: tuple[Schema, Any] | None = None

    def reader(self) -> tuple[Schema, Any] | None:
        """The reader schema (the subject's version) and its parsed form, or None."""
        if self.subject is None:
            return None
        if self._reader is None:
            schema = self.store.subject_version(self.subject, self.version)
            if schema.schema_type != AVRO:
                raise SchemaError(f"is a {schema.schema_type} schema, not AVRO", schema_id=schema.id,
                                  subject=self.subject)
            self._reader = (schema, parse_avro(self.store, schema))
        return self._reader

    def writer(self, schema: Schema) -> Any:
        parsed = self._writers.get(schema.id)
        if parsed is None:
            parsed = self._writers[schema.id] = parse_avro(self.store, schema)
        return parsed

    def reader_for(self, schema: Schema) -> Callable[[bytes | memoryview], Any]:
        """A function decoding whole wire-format values written with ``schema`` (its header
        already checked by the caller): the per-record path, with everything looked up once."""
        writer = self.writer(schema)
        reader = self.reader()
        target = None if reader is None or reader[0].id == schema.id else reader[1]
        schemaless_reader = self._fastavro.schemaless_reader
        fail = self._failure

        def read(data: bytes | memoryview) -> Any:
            buf = io.BytesIO(data)
            buf.seek(HEADER.size)
            try:
                obj = schemaless_reader(buf, writer, target)
            except Exception as e:  # EOFError, UnicodeDecodeError, SchemaResolutionError, IndexError, ...
                raise fail(e, schema, len(data) - HEADER.size) from None
            if buf.tell() != len(data):
                raise fail(None, schema, len(data) - HEADER.size, len(data) - buf.tell())
            return obj

        return read

    def _failure(self, e: Exception | None, schema: Schema, size: int, left: int = 0) -> SchemaDecodeError:
        subject = self.subject or schema.subject
        if e is None:
            return SchemaDecodeError(f"{left} bytes left after the Avro record ({size} bytes): the payload is "
                                     "not what its writer schema describes", schema_id=schema.id, subject=subject)
        if type(e).__name__ == "SchemaResolutionError":
            reader = self.reader()
            what = f"does not resolve to the reader schema (id {reader[0].id if reader else '?'})"
        else:
            what = "does not decode with its writer schema"
        return SchemaDecodeError(f"the Avro payload ({size} bytes) {what}: {type(e).__name__}: {e}",
                                 schema_id=schema.id, subject=subject)

    def decode_framed(self, data: bytes | memoryview, schema: Schema | None = None) -> Any:
        """The record in ``data`` (wire format); ``schema`` is the id's schema if already known."""
        return self.decode_payload(unframe(data), schema)

    def decode_payload(self, framed: Framed, schema: Schema | None = None) -> Any:
        """The record in the payload of ``framed``; ``schema`` is the id's schema if known."""
        if schema is None:
            schema = self.store.schema(framed.schema_id)
        writer = self.writer(schema)
        reader = self.reader()
        payload = framed.payload
        buf = io.BytesIO(payload)
        try:
            obj = self._fastavro.schemaless_reader(
                buf, writer, None if reader is None or reader[0].id == schema.id else reader[1])
        except Exception as e:  # EOFError, UnicodeDecodeError, SchemaResolutionError, IndexError, ...
            raise self._failure(e, schema, len(payload)) from None
        if buf.tell() != len(payload):
            raise self._failure(None, schema, len(payload), len(payload) - buf.tell())
        return obj
