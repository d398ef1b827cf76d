"""The Python reader with ``key_format``/``value_format``: dicts from ``read_records``, Arrow
structs from ``read_arrow`` (types from the subject's version, evolution resolved), per-record
errors in ``value_error``/``valueError``, and nothing written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("fastavro")

import pyarrow as pa  # noqa: E402

from kafkalog.errors import InvalidConfigError, SchemaError  # noqa: E402
from kafkalog.spark import read_arrow, read_records  # noqa: E402
from registry_fixtures import registry_data, serve_registry  # noqa: E402,F401


def digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_records_as_dicts_resolved_to_the_latest_version(registry_data):
    before = digest(registry_data.log_dir)
    got = list(read_records(registry_data.log_dir, topics=["orders"], key_format="string", value_format="avro"))
    assert [r.value for r in got] == registry_data.expected["orders"]
    assert [r.key for r in got] == [f"k{i}" for i in range(7)]
    assert all(r.value_error is None and r.key_error is None for r in got)
    assert digest(registry_data.log_dir) == before


def test_records_with_an_older_reader_version(registry_data):
    got = list(read_records(registry_data.log_dir / "orders-0", value_format="avro", value_schema_version=1))
    assert got[4].value == {"id": 4, "customer": "c4", "amount": 6.0, "note": None, "tags": []}


@pytest.mark.parametrize("topic, fmt", [("payments", "protobuf"), ("events", "json"), ("shipments", "registry")])
def test_records_of_every_format(registry_data, topic, fmt):
    got = [r.value for r in read_records(registry_data.log_dir, topics=[topic], value_format=fmt)]
    assert got == registry_data.expected[topic]


def test_bad_records_have_an_error_not_a_value(registry_data):
    got = list(read_records(registry_data.log_dir, topics=["bad"], value_format="avro", value_subject="orders-value"))
    assert [r.value for r in got] == [None] * 4
    assert "schema id 999" in got[0].value_error and "unknown magic byte 1" in got[3].value_error


def test_arrow_structs_typed_by_the_subject(registry_data):
    batches = list(read_arrow(registry_data.log_dir, topics=["orders"], value_format="avro", key_format="string"))
    table = pa.Table.from_batches(batches)
    assert table.schema.field("value").type == pa.struct([
        ("id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64()),
        ("tags", pa.list_(pa.string())), ("currency", pa.string())])
    assert table.schema.field("key").type == pa.string()
    assert table.column("value").to_pylist() == registry_data.expected["orders"]
    assert table.column("valueError").to_pylist() == [None] * 7
    assert table.schema.names[-2:] == ["keyError", "valueError"]


def test_arrow_protobuf_keeps_one_message_type(registry_data):
    table = pa.Table.from_batches(list(read_arrow(registry_data.log_dir, topics=["payments"], value_format="protobuf")))
    values, errors = table.column("value").to_pylist(), table.column("valueError").to_pylist()
    assert values[0]["total"] == {"currency": "EUR", "units": 12} and values[0]["counts"] == [("a", 1)]
    assert values[2] is None and errors[2] == "the record holds a kafkalog.test.Refund, not the column's kafkalog.test.Payment"


def test_arrow_json_with_and_without_a_subject(registry_data):
    typed = pa.Table.from_batches(list(read_arrow(registry_data.log_dir, topics=["events"], value_format="json",
                                                  value_subject="events-value")))
    assert typed.schema.field("value").type == pa.struct([("kind", pa.string()), ("n", pa.int64())])
    text = pa.Table.from_batches(list(read_arrow(registry_data.log_dir, topics=["events"], value_format="json")))
    assert [json.loads(v) for v in text.column("value").to_pylist()] == registry_data.expected["events"]


def test_a_registry_url(registry_data):
    with serve_registry(registry_data.registered) as (url, _):
        got = [r.value for r in read_records(registry_data.log_dir, topics=["payments"], value_format="registry",
                                             schema_registry=url)]
    assert got == registry_data.expected["payments"]


def test_bad_options(registry_data):
    with pytest.raises(InvalidConfigError, match="value_format must be one of binary, string"):
        list(read_records(registry_data.log_dir, value_format="xml"))
    with pytest.raises(InvalidConfigError, match="value_schema_version must be a version number"):
        list(read_records(registry_data.log_dir, value_format="avro", value_schema_version="0"))
    with pytest.raises(SchemaError, match="subject 'nope'"):
        list(read_arrow(registry_data.log_dir, topics=["orders"], value_format="avro", value_subject="nope"))
