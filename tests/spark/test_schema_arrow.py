"""Avro, Protobuf and JSON Schema types as Arrow and Spark types (the table in
``kafkalog.spark._schema_arrow``), with values written by fastavro through the decoder."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import uuid

import pytest

pytest.importorskip("pyarrow")
fastavro = pytest.importorskip("fastavro")

import pyarrow as pa  # noqa: E402

from kafkalog.errors import SchemaError  # noqa: E402
from kafkalog.schema_registry import Schema, TopicSchemaStore  # noqa: E402
from kafkalog.spark._formats import FormatOptions  # noqa: E402
from kafkalog.spark._schema_arrow import Decoding, avro_arrow_type, json_arrow_type, spark_ddl  # noqa: E402
from registry_fixtures import schema_record  # noqa: E402

RICH = {
    "type": "record", "name": "Rich", "namespace": "t",
    "fields": [
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "tod", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "BLUE"]}},
        {"name": "raw", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "either", "type": ["null", "int", "string"]},
        {"name": "again", "type": "Color"},
        {"name": "f", "type": "float"},
    ],
}
VALUE = {
    "price": decimal.Decimal("12.34"), "day": dt.date(2024, 2, 29),
    "at": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc),
    "local": dt.datetime(2024, 1, 2, 3, 4, 5, 678901), "tod": dt.time(1, 2, 3, 4000),
    "uid": uuid.UUID("12345678-1234-5678-1234-567812345678"), "color": "BLUE", "raw": b"abcd",
    "attrs": {"a": 1}, "either": 7, "again": "RED", "f": 0.5,
}


def framed(schema_id: int, schema: dict, value: dict) -> bytes:
    buf = io.BytesIO(b"\x00" + schema_id.to_bytes(4, "big"))
    buf.seek(5)
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    return buf.getvalue()


def store_of(*schemas: Schema) -> TopicSchemaStore:
    return TopicSchemaStore.from_records(schema_record(s) for s in schemas)


def test_avro_logical_types_unions_enums_fixed_maps(tmp_path, monkeypatch):
    store = store_of(Schema(1, json.dumps(RICH), subject="rich-value", version=1))
    typ, _ = avro_arrow_type(store, store.schema(1))
    assert spark_ddl(typ) == (
        "struct<`price`: decimal(10, 2), `day`: date, `at`: timestamp, `local`: timestamp_ntz, `tod`: string, "
        "`uid`: string, `color`: string, `raw`: binary, `attrs`: map<string, bigint>, `either`: string, "
        "`again`: string, `f`: float>")
    import kafkalog.spark._formats as formats

    monkeypatch.setitem(formats._stores, (str(tmp_path), "null"), store)  # the store of that location
    decoding = Decoding(FormatOptions(value_format="avro"), str(tmp_path), "rich")
    batch = pa.RecordBatch.from_pydict({"key": pa.array([None, None], pa.binary()),
                                        "value": pa.array([framed(1, RICH, VALUE), b"\x00\x00\x00\x00\x01"])})
    out = decoding.apply(batch, "rich")
    got = out.column("value").to_pylist()[0]
    assert got["price"] == decimal.Decimal("12.34") and got["day"] == dt.date(2024, 2, 29)
    assert got["at"] == VALUE["at"] and got["local"] == VALUE["local"]
    assert (got["tod"], got["uid"], got["either"]) == ("01:02:03.004000", str(VALUE["uid"]), "7")
    assert (got["raw"], got["attrs"], got["again"]) == (b"abcd", [("a", 1)], "RED")
    assert out.column("value").to_pylist()[1] is None
    assert out.column("valueError").to_pylist()[0] is None and "does not decode" in out.column("valueError")[1].as_py()


def test_recursive_avro_types_have_no_arrow_type():
    node = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    store = store_of(Schema(1, json.dumps(node), subject="n", version=1))
    with pytest.raises(SchemaError, match="Node is recursive"):
        avro_arrow_type(store, store.schema(1))


def test_json_schema_types():
    schema = {
        "type": "object", "definitions": {"p": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "properties": {
            "n": {"type": ["integer", "null"]}, "s": {"type": "string"}, "ok": {"type": "boolean"},
            "pt": {"$ref": "#/definitions/p"}, "xs": {"type": "array", "items": {"type": "string"}},
            "any": {}, "bag": {"type": "object"},
        },
    }
    typ, convert = json_arrow_type(Schema(1, json.dumps(schema), "JSON"))
    assert spark_ddl(typ) == ("struct<`n`: bigint, `s`: string, `ok`: boolean, `pt`: struct<`x`: double>, "
                              "`xs`: array<string>, `any`: string, `bag`: string>")
    value = convert({"n": 1, "any": [1, {"a": None}], "bag": {"k": "v"}})
    assert pa.array([value], typ).to_pylist()[0] | {} == {
        "n": 1, "s": None, "ok": None, "pt": None, "xs": None, "any": '[1,{"a":null}]', "bag": '{"k":"v"}'}


def test_a_value_that_does_not_fit_the_type_is_an_error(tmp_path, monkeypatch):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    store = store_of(Schema(3, json.dumps(schema), "JSON", subject="e-value", version=1))
    import kafkalog.spark._formats as formats

    monkeypatch.setitem(formats._stores, (str(tmp_path), "null"), store)  # the store of that location
    decoding = Decoding(FormatOptions(value_format="json", value_subject="e-value"), str(tmp_path), None)
    header = b"\x00\x00\x00\x00\x03"
    batch = pa.RecordBatch.from_pydict({"key": pa.array([None, None], pa.binary()),
                                        "value": pa.array([header + b'{"n": 1}', header + b'{"n": "one"}'])})
    out = decoding.apply(batch, "e")
    assert out.column("value").to_pylist() == [{"n": 1}, None]
    assert "does not fit the column type" in out.column("valueError")[1].as_py()


V1 = 'syntax = "proto3";\npackage ev;\nmessage Item {\n  int64 id = 1;\n  string name = 2;\n  string old = 3;\n}\n'
V2 = 'syntax = "proto3";\npackage ev;\nmessage Item {\n  int64 id = 1;\n  string name = 2;\n  int32 qty = 4;\n}\n'


def test_protobuf_versions_matched_to_the_latest_by_field_name(tmp_path, monkeypatch):
    pytest.importorskip("grpc_tools")
    from registry_fixtures import _compile_proto

    store = store_of(Schema(1, V1, "PROTOBUF", subject="items-value", version=1),
                     Schema(2, V2, "PROTOBUF", subject="items-value", version=2))
    import kafkalog.spark._formats as formats

    monkeypatch.setitem(formats._stores, (str(tmp_path), "null"), store)
    item1 = _compile_proto({"v1.proto": V1})("ev.Item")
    item2 = _compile_proto({"v2.proto": V2})("ev.Item")
    values = [b"\x00\x00\x00\x00\x01\x00" + item1(id=1, name="a", old="x").SerializeToString(),
              b"\x00\x00\x00\x00\x02\x00" + item2(id=2, name="b", qty=5).SerializeToString()]
    decoding = Decoding(FormatOptions(value_format="protobuf"), str(tmp_path), "items")
    batch = pa.RecordBatch.from_pydict({"key": pa.array([None, None], pa.binary()), "value": pa.array(values)})
    out = decoding.apply(batch, "items")
    assert spark_ddl(out.schema.field("value").type) == "struct<`id`: bigint, `name`: string, `qty`: int>"
    assert out.column("value").to_pylist() == [{"id": 1, "name": "a", "qty": None}, {"id": 2, "name": "b", "qty": 5}]
    assert out.column("valueError").to_pylist() == [None, None]
