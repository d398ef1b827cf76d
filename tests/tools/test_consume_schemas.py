"""``kafkalog consume -s [key=|value=]FORMAT -r DIR|URL``: records decoded with Schema Registry's
schemas (kafkalog.schema_registry), data written by confluent-kafka's serializers
(tests/registry_fixtures.py): with ``-J`` a decoded value is a JSON object followed by its schema
id, in ``-f`` output compact JSON; a record that does not decode is reported with its offset and
reading goes on (exit status 1); nothing is written."""

from __future__ import annotations

import json

import pytest
from registry_fixtures import registry_data, serve_registry  # noqa: F401
from test_consume import consume, digest

from kafkalog import FileRecords
from kafkalog.schema_registry import make_decoder, open_schema_store, to_json


def envelopes(out: bytes) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def expected(registry_data, topic: str, fmt: str = "registry") -> list:
    """Each record's value decoded by kafkalog.schema_registry itself (the writer's schema, as
    kcat decodes: no reader subject), as JSON."""
    decoder = make_decoder(fmt, open_schema_store(registry_data.log_dir))
    values = [r.value for seg in sorted((registry_data.log_dir / f"{topic}-0").glob("*.log"))
              for r in FileRecords.open(seg).records()]
    assert len(values) == len(registry_data.expected[topic])
    return [json.loads(to_json(decoder.decode(v))) for v in values]


@pytest.mark.parametrize("topic,fmt", [("orders", "avro"), ("shipments", "avro"), ("payments", "protobuf"),
                                       ("events", "json"), ("orders", "registry"), ("payments", "registry")])
def test_decoded_values_in_json_envelopes(registry_data, topic, fmt) -> None:
    before = digest(registry_data.log_dir)
    status, out, err = consume(str(registry_data.log_dir), "-t", topic, "-J", "-s", f"value={fmt}")
    assert (status, err) == (0, "")
    got = envelopes(out)
    assert [e["payload"] for e in got] == expected(registry_data, topic, fmt)
    if topic != "orders":  # one writer version: the subject's own values
        assert [e["payload"] for e in got] == [json.loads(to_json(v)) for v in registry_data.expected[topic]]
    assert all(isinstance(e["value_schema_id"], int) for e in got if e["payload"] is not None)
    assert digest(registry_data.log_dir) == before


def test_format_output_and_keys(registry_data) -> None:
    status, out, err = consume(str(registry_data.log_dir), "-t", "orders", "-s", "key=string", "-s", "value=avro",
                               "-f", "%k=%s\\n", "-r", str(registry_data.schemas_dir))
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert [json.loads(line.split(b"=", 1)[1]) for line in lines[:-1]] == expected(registry_data, "orders", "avro")[:-1]
    assert lines[0].startswith(b"k0={")
    assert lines[-1].endswith(b"=")  # the tombstone: an empty value, as kcat prints a null one


def test_schemas_from_a_registry_url(registry_data) -> None:
    with serve_registry(registry_data.registered) as (url, requests):
        status, out, err = consume(str(registry_data.log_dir), "-t", "payments", "-J", "-s", "value=registry", "-r", url)
    assert (status, err) == (0, "")
    assert [e["payload"] for e in envelopes(out)] == expected(registry_data, "payments")
    assert "/schemas/ids/6" in requests or any(r.startswith("/schemas/ids/") for r in requests)


def test_records_that_do_not_decode_are_reported_and_reading_goes_on(registry_data) -> None:
    status, out, err = consume(str(registry_data.log_dir), "-t", "bad", "-J", "-s", "value=registry")
    assert status == 1
    got = envelopes(out)
    failed = [e for e in got if "payload_error" in e]
    assert failed and all(e["payload"] is None for e in failed)
    for e in failed:
        assert f"at offset {e['offset']}:" in err
    status, out, err = consume(str(registry_data.log_dir), "-t", "bad", "-s", "value=registry", "-f", "%o %s\\n")
    assert status == 1 and "Failed to format message in bad [0] at offset" in err


def test_avro_without_schemas_is_an_error(tmp_path) -> None:
    from test_consume import build_logdir

    logdir = build_logdir(tmp_path)
    status, out, err = consume(str(logdir), "-t", "mix", "-s", "value=avro")
    assert status == 1 and out == b"" and "_schemas" in err
