"""The data source's ``keyFormat``/``valueFormat``: ``key``/``value`` as Spark structs typed by
the subject's version, equal to what the Python decoder gives across a schema evolution, with
``valueError`` for records that do not decode; on local paths and on S3."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
pytest.importorskip("fastavro")

from moto_s3 import s3, s3_server  # noqa: E402,F401
from registry_fixtures import registry_data  # noqa: E402,F401
from spark_fixtures import spark  # noqa: E402,F401

from kafkalog import make_decoder, open_schema_store  # noqa: E402
from kafkalog.spark import read_records  # noqa: E402

pytestmark = [pytest.mark.spark]


def plain(value):
    """A Spark value as plain Python (rows as dicts, recursively)."""
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def load(spark, path, **options):
    reader = spark.read.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


@pytest.mark.timeout_guard(300)
def test_avro_structs_across_an_evolution(spark, registry_data):
    df = load(spark, registry_data.log_dir, subscribe="orders", valueFormat="avro", keyFormat="string")
    schema = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert schema["value"] == "struct<id:bigint,customer:string,amount:double,tags:array<string>,currency:string>"
    assert schema["key"] == "string" and list(schema)[-2:] == ["keyError", "valueError"]
    rows = df.orderBy("offset").collect()
    store = open_schema_store(registry_data.log_dir)
    decoder = make_decoder("avro", store, subject="orders-value")
    raw = [r.value for r in read_records(registry_data.log_dir, topics=["orders"])]
    assert [plain(r.value) for r in rows] == [decoder.decode(v) for v in raw] == registry_data.expected["orders"]
    assert [r.key for r in rows] == [f"k{i}" for i in range(7)]
    assert all(r.valueError is None for r in rows)


@pytest.mark.timeout_guard(300)
def test_protobuf_json_and_errors(spark, registry_data):
    payments = load(spark, registry_data.log_dir / "payments-0", valueFormat="protobuf").orderBy("offset").collect()
    assert plain(payments[0].value)["total"] == {"currency": "EUR", "units": 12}
    assert plain(payments[0].value)["counts"] == {"a": 1}
    assert payments[2].value is None and "kafkalog.test.Refund" in payments[2].valueError
    events = load(spark, registry_data.log_dir, subscribe="events", valueFormat="json",
                  valueSubject="events-value").orderBy("offset").collect()
    assert [plain(r.value) for r in events] == registry_data.expected["events"]
    bad = load(spark, registry_data.log_dir, subscribe="bad", valueFormat="avro",
               valueSubject="orders-value", valueSchemaVersion="2").orderBy("offset").collect()
    assert [r.value for r in bad] == [None] * 4
    assert "schema id 999" in bad[0].valueError and "bytes left after the Avro record" in bad[2].valueError


@pytest.mark.timeout_guard(300)
def test_several_topics_need_a_subject(spark, registry_data):
    with pytest.raises(Exception, match="need a subject for their column type"):
        load(spark, registry_data.log_dir, valueFormat="avro").schema  # noqa: B018


@pytest.mark.timeout_guard(600)
def test_avro_structs_on_s3(spark, s3, registry_data):
    s3.put_dir(registry_data.log_dir, "s3://schemas/logs")
    df = load(spark, "s3://schemas/logs", subscribe="orders", valueFormat="avro",
              storageOptions=json.dumps(s3.options))
    assert [plain(r.value) for r in df.orderBy("offset").collect()] == registry_data.expected["orders"]
