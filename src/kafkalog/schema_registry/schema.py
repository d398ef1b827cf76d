"""A schema as Schema Registry keeps it: id, text, type, references, and where it was registered.

Schema Registry's ``SchemaValue`` (the value of a ``SCHEMA`` record in ``_schemas``, and the
body of ``GET /schemas/ids/{id}``) carries the schema text, its ``schemaType`` (absent means
``AVRO``), and ``references``: other subjects' versions the schema imports, each under a
``name`` (the Avro named type's full name, the ``.proto`` file's import path, the JSON Schema's
``$ref`` URL).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Schema Registry's schema types (``AvroSchema.TYPE``, ``ProtobufSchema.TYPE``, ``JsonSchema.TYPE``).
AVRO = "AVRO"
PROTOBUF = "PROTOBUF"
JSON = "JSON"
SCHEMA_TYPES = (AVRO, PROTOBUF, JSON)


@dataclass(frozen=True)
class SchemaReference:
    """A reference from one schema to a subject's version (``SchemaReference``)."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class Schema:
    """One registered schema.

    Attributes:
        id: the registry's global id (what the wire format carries).
        schema: the schema text (Avro JSON, ``.proto`` source, JSON Schema).
        schema_type: ``AVRO``, ``PROTOBUF`` or ``JSON``.
        references: the subjects' versions it imports.
        subject, version: where it was found (None when fetched by id only).
        deleted: soft-deleted (still readable by id, as the registry serves it).
    """

    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = ()
    subject: str | None = None
    version: int | None = None
    deleted: bool = False
