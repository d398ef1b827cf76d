"""Schema-aware decoding: Schema Registry's schemas and wire format, Avro, Protobuf, JSON Schema.

One implementation shared by ``kafkalog dump`` (``--value-decoder``), ``kafkalog consume``
(``-s``/``-r``) and the Python and Spark readers (``valueFormat``)::

    from kafkalog.schema_registry import open_schema_store, make_decoder

    store = open_schema_store("/var/lib/kafka/data")      # holds _schemas-0; or a registry URL
    decoder = make_decoder("avro", store, subject="orders-value")
    decoder.decode(record.value)                          # -> dict
    decoder.decode_to_json(record.value)                  # -> '{"id":1,...}'

Formats: ``avro``, ``protobuf``, ``json``, ``string``, ``bytes``, ``registry`` (by the
registry's schema type). Avro, Protobuf and JSON Schema validation need the extra
``kafkalog[schemas]`` (fastavro, protobuf, grpcio-tools, jsonschema), imported only when used.
"""

from .decoder import FORMATS, Decoder, make_decoder, to_json
from .schema import Schema, SchemaReference
from .store import SCHEMAS_TOPIC, SchemaStore, open_schema_store
from .topic_store import TopicSchemaStore
from .registry_client import RegistrySchemaStore
from .wire import Framed, unframe, unframe_protobuf

__all__ = [
    "open_schema_store",
    "make_decoder",
    "SchemaStore",
    "TopicSchemaStore",
    "RegistrySchemaStore",
    "Decoder",
    "Schema",
    "SchemaReference",
    "FORMATS",
    "SCHEMAS_TOPIC",
    "to_json",
    "Framed",
    "unframe",
    "unframe_protobuf",
]
