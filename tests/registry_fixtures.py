"""Schema Registry test data made by the real serializers, and a registry HTTP endpoint.

confluent-kafka's ``AvroSerializer``, ``ProtobufSerializer`` and ``JSONSerializer``, with its
``mock://`` schema-registry client, serialize the values; they are appended to a ``Log`` per
topic, and the registered schemas are written to ``_schemas-0`` in Schema Registry's own record
format (the key and value JSON of ``SchemaRegistryKey``/``SchemaValue``, as the registry's
``KafkaStore`` writes them). For Protobuf, ``_schemas`` holds the ``.proto`` source (what the
registry keeps) while the mock client keeps what the Python serializer registered (a base64
``FileDescriptorProto``); the HTTP endpoint serves the latter, so both forms are read.

The real Schema Registry is a JVM service not installed here: :func:`serve_registry` is a small
``http.server`` on 127.0.0.1 answering the REST paths the decoder uses.

    data = build_registry_data(tmp_path)      # data.log_dir, data.expected[topic], ...
    with serve_registry(data.registered) as url: ...
"""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kafkalog import Log, LogConfig, RecordBatchBuilder
from kafkalog.schema_registry import Schema, SchemaReference

TS = 1_700_000_000_000
_MOCK = itertools.count()

# -- the schemas ---------------------------------------------------------------------------------

ORDER_V1 = {
    "type": "record", "name": "Order", "namespace": "com.example",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
#: v2: ``note`` removed, ``currency`` added with a default (a BACKWARD-compatible change).
ORDER_V2 = {
    "type": "record", "name": "Order", "namespace": "com.example",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "currency", "type": "string", "default": "EUR"},
    ],
}
ADDRESS = {
    "type": "record", "name": "Address", "namespace": "com.example",
    "fields": [{"name": "street", "type": "string"}, {"name": "zip", "type": "int"}],
}
#: References ``com.example.Address`` (subject ``address``, version 1).
SHIPMENT = {
    "type": "record", "name": "Shipment", "namespace": "com.example",
    "fields": [{"name": "order_id", "type": "long"}, {"name": "to", "type": "com.example.Address"}],
}

COMMON_PROTO = """syntax = "proto3";
package kafkalog.test;

message Money {
  string currency = 1;
  int64 units = 2;
}
"""
PAYMENT_PROTO = """syntax = "proto3";
package kafkalog.test;

import "common.proto";

message Payment {
  int64 id = 1;
  string payer = 2;
  Money total = 3;
  repeated string tags = 4;
  Status status = 5;
  map<string, int32> counts = 6;
  optional string memo = 7;
  bytes blob = 8;

  enum Status {
    UNKNOWN = 0;
    PAID = 1;
    REFUNDED = 2;
  }

  message Line {
    string sku = 1;
    int32 qty = 2;
  }
}

message Refund {
  int64 payment_id = 1;
  string reason = 2;
}
"""

EVENT_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Event",
    "type": "object",
    "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["kind", "n"],
    "additionalProperties": False,
}


# -- the data --------------------------------------------------------------------------------------


@dataclass
class RegistryData:
    """What :func:`build_registry_data` wrote."""

    log_dir: Path
    #: topic -> the decoded value of each record, in offset order (None for a null value).
    expected: dict[str, list[Any]] = field(default_factory=dict)
    #: The schemas as the mock registry holds them (what the HTTP endpoint serves).
    registered: list[Schema] = field(default_factory=list)
    #: subject -> version -> id.
    ids: dict[str, dict[int, int]] = field(default_factory=dict)

    @property
    def schemas_dir(self) -> Path:
        return self.log_dir / "_schemas-0"


def _compile_proto(sources: dict[str, str]) -> Any:
    """Message classes for the ``.proto`` sources (protoc from grpcio-tools, a private pool)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    with tempfile.TemporaryDirectory() as tmp:
        for name, text in sources.items():
            (Path(tmp) / name).write_text(text)
        out = Path(tmp) / "set.pb"
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"--descriptor_set_out={out}",
                        "--include_imports", *sources], check=True, cwd=tmp, capture_output=True, timeout=120)
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for fdp in fds.file:
        pool.Add(fdp)
    return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def _append(log: Log, values: list[tuple[bytes | None, bytes | None]], start: int = 0) -> None:
    for n, (key, value) in enumerate(values):
        b = RecordBatchBuilder()
        b.append(key, value, timestamp=TS + start + n)
        log.append(b.build())


def _write_topic(log_dir: Path, topic: str, values: list[tuple[bytes | None, bytes | None]]) -> None:
    with Log.open(log_dir / f"{topic}-0", LogConfig(retention_ms=-1)) as log:
        _append(log, values)


def _registry_key(keytype: str, **fields: Any) -> bytes:
    # SchemaRegistryKey's JSON: keytype first, then the subclass's fields, magic last
    return json.dumps({"keytype": keytype, **fields}, separators=(",", ":")).encode()


def schema_record(schema: Schema, *, deleted: bool = False) -> tuple[bytes, bytes]:
    """A ``SCHEMA`` record of ``_schemas`` (``SchemaKey`` magic 1, ``SchemaValue``)."""
    value: dict[str, Any] = {"subject": schema.subject, "version": schema.version, "id": schema.id}
    if schema.schema_type != "AVRO":
        value["schemaType"] = schema.schema_type  # absent for Avro, as the registry writes it
    if schema.references:
        value["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                               for r in schema.references]
    value["schema"] = schema.schema
    value["deleted"] = deleted
    key = _registry_key("SCHEMA", subject=schema.subject, version=schema.version, magic=1)
    return key, json.dumps(value, separators=(",", ":")).encode()


def write_schemas_topic(log_dir: Path, records: list[tuple[bytes, bytes | None]]) -> None:
    """``_schemas-0`` holding ``records`` (a NOOP first, as a starting registry writes one)."""
    noop = (_registry_key("NOOP", magic=0), None)
    config = (_registry_key("CONFIG", subject=None, magic=0), b'{"compatibilityLevel":"BACKWARD"}')
    _write_topic(log_dir, "_schemas", [noop, config, *records])


def _registered(client: Any) -> list[Schema]:
    out = []
    for subject in sorted(client.get_subjects()):
        for version in client.get_versions(subject):
            reg = client.get_version(subject, version)
            refs = tuple(SchemaReference(r.name, r.subject, r.version) for r in reg.schema.references or ())
            out.append(Schema(reg.schema_id, reg.schema.schema_str, reg.schema.schema_type or "AVRO", refs,
                              subject, version))
    return out


def build_registry_data(root: Path) -> RegistryData:
    """Topics written by the real serializers, and their ``_schemas`` partition, under
    ``root/kafka-logs``:

    - ``orders``: Avro, 3 records with ``ORDER_V1``, then 3 with ``ORDER_V2``, then a null value;
    - ``shipments``: Avro ``SHIPMENT``, which references ``ADDRESS``;
    - ``payments``: Protobuf ``Payment`` (message index [0]) and ``Refund`` ([1]), importing
      ``common.proto``;
    - ``events``: JSON Schema ``EVENT_SCHEMA``;
    - ``bad``: an unknown id, a corrupt Avro payload, a payload with trailing bytes, no magic byte.

    ``_schemas`` also has a subject ``gone-value`` (soft-deleted with DELETE_SUBJECT) and
    ``dropped-value`` (soft-deleted, then hard-deleted by a tombstone).
    """
    from confluent_kafka.schema_registry import Schema as CSchema
    from confluent_kafka.schema_registry import SchemaReference as CRef
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    log_dir = root / "kafka-logs"
    data = RegistryData(log_dir)
    client = SchemaRegistryClient.new_client({"url": f"mock://kafkalog-{next(_MOCK)}-{id(root)}"})

    def ctx(topic: str) -> SerializationContext:
        return SerializationContext(topic, MessageField.VALUE)

    # Avro, with an evolution
    orders_v1 = [{"id": i, "customer": f"c{i}", "amount": i * 1.5, "note": None if i % 2 else f"n{i}",
                  "tags": ["a"] * i} for i in range(3)]
    orders_v2 = [{"id": i, "customer": f"c{i}", "amount": i * 1.5, "tags": [], "currency": "USD"} for i in range(3, 6)]
    ser1 = AvroSerializer(client, json.dumps(ORDER_V1))
    ser2 = AvroSerializer(client, json.dumps(ORDER_V2))
    values = [(b"k%d" % o["id"], ser1(o, ctx("orders"))) for o in orders_v1]
    values += [(b"k%d" % o["id"], ser2(o, ctx("orders"))) for o in orders_v2]
    values.append((b"k6", None))
    _write_topic(log_dir, "orders", values)
    # read with the latest version: v1's note dropped, currency filled with its default
    data.expected["orders"] = [{k: v for k, v in o.items() if k != "note"} | {"currency": "EUR"} for o in orders_v1]
    data.expected["orders"] += orders_v2 + [None]

    # Avro with a reference
    client.register_schema("address", CSchema(json.dumps(ADDRESS), "AVRO"))
    shipment_schema = CSchema(json.dumps(SHIPMENT), "AVRO", [CRef("com.example.Address", "address", 1)])
    ser = AvroSerializer(client, shipment_schema)
    shipments = [{"order_id": i, "to": {"street": f"s{i}", "zip": 1000 + i}} for i in range(3)]
    _write_topic(log_dir, "shipments", [(None, ser(s, ctx("shipments"))) for s in shipments])
    data.expected["shipments"] = shipments

    # Protobuf: two top-level messages (indexes [0] and [1]), an import
    message = _compile_proto({"common.proto": COMMON_PROTO, "payment.proto": PAYMENT_PROTO})
    Payment, Refund, Money = (message(f"kafkalog.test.{n}") for n in ("Payment", "Refund", "Money"))
    conf = {"use.deprecated.format": False}
    pser = ProtobufSerializer(Payment, client, conf)
    rser = ProtobufSerializer(Refund, client, conf)
    p1 = Payment(id=1, payer="ann", total=Money(currency="EUR", units=12), tags=["x", "y"],
                 status=Payment.Status.Value("PAID"), counts={"a": 1}, memo="hi", blob=b"\x00\xff")
    p2 = Payment(id=2**40, payer="bob")
    r1 = Refund(payment_id=1, reason="broken")
    _write_topic(log_dir, "payments", [(None, pser(p1, ctx("payments"))), (None, pser(p2, ctx("payments"))),
                                       (None, rser(r1, ctx("payments")))])
    data.expected["payments"] = [
        {"id": 1, "payer": "ann", "total": {"currency": "EUR", "units": 12}, "tags": ["x", "y"], "status": "PAID",
         "counts": {"a": 1}, "memo": "hi", "blob": b"\x00\xff"},
        {"id": 2**40, "payer": "bob", "total": None, "tags": [], "status": "UNKNOWN", "counts": {}, "memo": None,
         "blob": b""},
        {"payment_id": 1, "reason": "broken"},
    ]

    # JSON Schema
    jser = JSONSerializer(json.dumps(EVENT_SCHEMA), client)
    events = [{"kind": "click", "n": 1}, {"kind": "view", "n": 2}]
    _write_topic(log_dir, "events", [(None, jser(e, ctx("events"))) for e in events])
    data.expected["events"] = events

    data.registered = _registered(client)
    for s in data.registered:
        data.ids.setdefault(s.subject, {})[s.version] = s.id

    # records that must not decode
    order_id = data.ids["orders-value"][2]
    good = values[3][1]
    _write_topic(log_dir, "bad", [
        (None, b"\x00" + (999).to_bytes(4, "big") + good[5:]),      # unknown id
        (None, b"\x00" + order_id.to_bytes(4, "big") + b"\x02\x80"),  # corrupt: ends inside the record
        (None, good + b"\x01\x02"),                                  # bytes left after the record
        (None, b"\x01" + good[1:]),                                  # not the wire format
    ])

    # _schemas: what the registry wrote, Protobuf as .proto source
    proto_source = {"common.proto": COMMON_PROTO, "payments-value": PAYMENT_PROTO}
    records = []
    for s in data.registered:
        if s.schema_type == "PROTOBUF":
            s = Schema(s.id, proto_source[s.subject], s.schema_type, s.references, s.subject, s.version)
        records.append(schema_record(s))
    next_id = max(s.id for s in data.registered) + 1
    gone = Schema(next_id, json.dumps({"type": "string"}), "AVRO", (), "gone-value", 1)
    dropped = Schema(next_id + 1, json.dumps({"type": "long"}), "AVRO", (), "dropped-value", 1)
    records += [schema_record(gone), schema_record(dropped)]
    records.append((_registry_key("DELETE_SUBJECT", subject="gone-value", magic=0),
                    b'{"subject":"gone-value","version":1}'))
    records.append(schema_record(dropped, deleted=True))
    records.append((schema_record(dropped)[0], None))  # the hard delete: a tombstone
    data.ids["gone-value"] = {1: gone.id}
    data.ids["dropped-value"] = {1: dropped.id}
    write_schemas_topic(log_dir, records)
    return data


# -- a registry endpoint ---------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    schemas: list[Schema] = []
    requests: list[str] = []

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    @staticmethod
    def _body(s: Schema, with_subject: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"subject": s.subject, "version": s.version, "id": s.id} if with_subject else {}
        if s.schema_type != "AVRO":
            body["schemaType"] = s.schema_type
        if s.references:
            body["references"] = [{"name": r.name, "subject": r.subject, "version": r.version} for r in s.references]
        body["schema"] = s.schema
        return body

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = urllib.parse.urlsplit(self.path).path
        type(self).requests.append(path)
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        schemas = type(self).schemas
        if parts[:2] == ["schemas", "ids"] and len(parts) == 3 and parts[2].isdigit():
            for s in schemas:
                if s.id == int(parts[2]):
                    return self._send(200, self._body(s, False))
            return self._send(404, {"error_code": 40403, "message": "Schema not found"})
        if parts == ["subjects"]:
            return self._send(200, sorted({s.subject for s in schemas}))
        if len(parts) >= 3 and parts[0] == "subjects" and parts[2] == "versions":
            versions = sorted((s for s in schemas if s.subject == parts[1]), key=lambda s: s.version)
            if not versions:
                return self._send(404, {"error_code": 40401, "message": f"Subject '{parts[1]}' not found."})
            if len(parts) == 3:
                return self._send(200, [s.version for s in versions])
            want = versions[-1] if parts[3] == "latest" else next(
                (s for s in versions if str(s.version) == parts[3]), None)
            if want is None:
                return self._send(404, {"error_code": 40402, "message": "Version not found."})
            return self._send(200, self._body(want, True))
        return self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})


@contextlib.contextmanager
def serve_registry(schemas: list[Schema]) -> Iterator[tuple[str, list[str]]]:
    """A Schema Registry REST endpoint on 127.0.0.1 serving ``schemas``: (its URL, the paths
    requested)."""
    handler = type("Handler", (_Handler,), {"schemas": list(schemas), "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="registry", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# -- pytest fixtures (import them by name into a test module) --------------------------------------

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def registry_data(tmp_path_factory) -> RegistryData:
    """The data of :func:`build_registry_data`, built once per session."""
    pytest.importorskip("confluent_kafka.schema_registry.avro")
    pytest.importorskip("fastavro")
    pytest.importorskip("grpc_tools")
    return build_registry_data(tmp_path_factory.mktemp("registry"))


@pytest.fixture
def registry_url(registry_data):
    """(URL, requested paths) of a registry endpoint serving what the mock registry holds."""
    with serve_registry(registry_data.registered) as served:
        yield served
