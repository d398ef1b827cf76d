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
from typing import Any

from ..errors import SchemaDecodeError, SchemaError
from .extras import require
from .schema import AVRO, Schema
from .store import SchemaStore
from .wire import Framed, unframe


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

    def decode_framed(self, data: bytes | memoryview, schema: Schema | None = None) -> Any:
        """The record in ``data`` (wire format); ``schema`` is the id's schema if already known."""
        return self.decode_payload(unframe(data), schema)

    def decode_payload(self, framed: Framed, schema: Schema | None = None) -> Any:
        """The record in the payload of ``framed``; ``schema`` is the id's schema if known."""
        if schema is None:
            schema = self.store.schema(framed.schema_id)
        writer = self._writers.get(schema.id) or self.writer(schema)
        reader = self._reader if self._reader is not None or self.subject is None else self.reader()
        fastavro = self._fastavro
        payload = framed.payload
        buf = io.BytesIO(payload)
        subject = self.subject or schema.subject
        try:
            if reader is None or reader[0].id == schema.id:
                obj = fastavro.schemaless_reader(buf, writer, None)
            else:
                obj = fastavro.schemaless_reader(buf, writer, reader[1])
        except Exception as e:  # EOFError, UnicodeDecodeError, SchemaResolutionError, IndexError, ...
            kind = "does not resolve to" if type(e).__name__ == "SchemaResolutionError" else "does not decode with"
            target = f"the reader schema (id {reader[0].id})" if kind.startswith("does not resolve") else "its writer schema"
            raise SchemaDecodeError(f"the Avro payload ({len(payload)} bytes) {kind} {target}: "
                                    f"{type(e).__name__}: {e}", schema_id=schema.id, subject=subject) from None
        left = len(payload) - buf.tell()
        if left:
            raise SchemaDecodeError(f"{left} bytes left after the Avro record ({len(payload)} bytes): the "
                                    "payload is not what its writer schema describes",
                                    schema_id=schema.id, subject=subject)
        return obj
