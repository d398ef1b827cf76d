"""Protobuf payloads: the registry's ``.proto`` compiled at run time, the message indexes honoured."""

from __future__ import annotations

from typing import Any

from ..errors import SchemaError
from .schema import Schema
from .store import SchemaStore


class ProtobufPayloadDecoder:
    """Protobuf messages of any writer id (being built: raises until it lands)."""

    def __init__(self, store: SchemaStore) -> None:
        self.store = store

    def decode_framed(self, data: bytes | memoryview, schema: Schema | None = None) -> Any:
        raise SchemaError("Protobuf decoding is not built yet", schema_id=None if schema is None else schema.id)
