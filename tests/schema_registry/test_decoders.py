"""Decoders over data written by confluent-kafka's real serializers: Avro (evolution, references),
Protobuf (.proto source and serialized descriptors, message indexes), JSON Schema; the registry
read offline from ``_schemas`` and over HTTP give the same values; bad records give typed errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import FileRecords, SchemaError, make_decoder, open_schema_store
from kafkalog.errors import SchemaDecodeError, UnknownSchemaError
from kafkalog.schema_registry import to_json, unframe_protobuf
from registry_fixtures import registry_data, serve_registry  # noqa: F401


def values(data, topic: str) -> list[bytes | None]:
    with FileRecords.open(data.log_dir / f"{topic}-0" / "00000000000000000000.log") as records:
        return [r.value for r in records.records()]


@pytest.fixture(params=["topic", "url"])
def store(request, registry_data):
    """The same schemas from ``_schemas`` (Protobuf as .proto source) and from a registry URL
    (Protobuf as a serialized descriptor, as the Python serializer registered it)."""
    if request.param == "topic":
        yield open_schema_store(registry_data.log_dir)
    else:
        with serve_registry(registry_data.registered) as (url, _):
            yield open_schema_store(url)


@pytest.mark.parametrize("fmt", ["avro", "registry"])
def test_avro_across_an_evolution_read_with_the_latest_version(registry_data, store, fmt):
    dec = make_decoder(fmt, store, subject="orders-value")
    assert [dec.decode(v) for v in values(registry_data, "orders")] == registry_data.expected["orders"]


def test_avro_with_each_writer_schema(registry_data, store):
    dec = make_decoder("avro", store)  # no subject: every record as its writer wrote it
    got = [dec.decode(v) for v in values(registry_data, "orders")]
    assert "note" in got[0] and "currency" not in got[0]
    assert got[3]["currency"] == "USD" and "note" not in got[3]


def test_avro_read_with_an_older_version(registry_data, store):
    dec = make_decoder("avro", store, subject="orders-value", version=1)
    v2 = dec.decode(values(registry_data, "orders")[3])  # v2 has no `note`: v1's default fills it
    assert v2 == {"id": 3, "customer": "c3", "amount": 4.5, "note": None, "tags": []}
    assert dec.decode(values(registry_data, "orders")[0])["note"] == "n0"


def test_avro_that_does_not_resolve(registry_data, store):
    dec = make_decoder("avro", store, subject="shipments-value")  # another record altogether
    with pytest.raises(SchemaDecodeError, match="subject 'shipments-value': .*does not resolve to the reader schema"):
        dec.decode(values(registry_data, "orders")[0])


def test_avro_references_are_named_types(registry_data, store):
    dec = make_decoder("registry", store)
    assert [dec.decode(v) for v in values(registry_data, "shipments")] == registry_data.expected["shipments"]


@pytest.mark.parametrize("fmt", ["protobuf", "registry"])
def test_protobuf_messages_by_index_with_an_import(registry_data, store, fmt):
    dec = make_decoder(fmt, store)
    assert [dec.decode(v) for v in values(registry_data, "payments")] == registry_data.expected["payments"]
    framed = [unframe_protobuf(v).message_indexes for v in values(registry_data, "payments")]
    assert framed == [[0], [0], [1]]


def test_json_schema_values_and_validation(registry_data, store):
    raw = values(registry_data, "events")
    assert [make_decoder("json").decode(v) for v in raw] == registry_data.expected["events"]
    strict = make_decoder("json", store, validate=True)
    assert [strict.decode(v) for v in raw] == registry_data.expected["events"]
    assert make_decoder("registry", store).decode(raw[0]) == registry_data.expected["events"][0]
    invalid = raw[0][:5] + b'{"kind": "x"}'
    with pytest.raises(SchemaDecodeError, match=r"schema id \d+.*: the value does not match .*'n' is a required"):
        strict.decode(invalid)
    assert make_decoder("json").decode(invalid) == {"kind": "x"}  # no validation asked


def test_a_format_refuses_another_schema_type(registry_data, store):
    with pytest.raises(SchemaDecodeError, match="is a PROTOBUF schema, not AVRO"):
        make_decoder("avro", store).decode(values(registry_data, "payments")[0])


def test_bad_records_give_typed_errors(registry_data, store):
    dec = make_decoder("avro", store, subject="orders-value")
    unknown, corrupt, trailing, no_magic = values(registry_data, "bad")
    with pytest.raises(UnknownSchemaError, match="schema id 999"):
        dec.decode(unknown)
    order_id = registry_data.ids["orders-value"][2]
    with pytest.raises(SchemaDecodeError, match=f"schema id {order_id}, subject 'orders-value': the Avro payload"):
        dec.decode(corrupt)
    with pytest.raises(SchemaDecodeError, match="2 bytes left after the Avro record"):
        dec.decode(trailing)
    with pytest.raises(SchemaDecodeError, match="unknown magic byte 1"):
        dec.decode(no_magic)
    with pytest.raises(SchemaDecodeError, match="at least 5"):
        dec.decode(b"\x00\x00")


def test_corrupt_protobuf_payloads(registry_data, store):
    dec = make_decoder("protobuf", store)
    good = values(registry_data, "payments")[0]
    with pytest.raises(SchemaDecodeError, match="is not a kafkalog.test.Payment"):
        dec.decode(good[:-3])  # cut inside a field
    with pytest.raises(SchemaDecodeError, match="unknown fields"):
        dec.decode(good + b"\xf8\x07\x01")  # field 127: not in the writer's schema
    with pytest.raises(SchemaDecodeError, match="message index 5 at depth 0"):
        dec.decode(good[:5] + b"\x02\x0a" + good[6:])


def test_decode_to_json(registry_data):
    store = open_schema_store(registry_data.log_dir)
    payment = values(registry_data, "payments")[0]
    assert make_decoder("protobuf", store).decode_to_json(payment).startswith('{"id":1,"payer":"ann"')
    assert '"blob":"AP8="' in make_decoder("protobuf", store).decode_to_json(payment)
    assert make_decoder("avro", store).decode_to_json(None) == "null"
    assert to_json({"a": 1}) == '{"a":1}'


def _zigzag(n: int) -> bytes:
    raw, out = (n << 1) ^ (n >> 63), bytearray()
    while True:
        if raw < 0x80:
            return bytes(out + bytes([raw]))
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7


@given(st.lists(st.integers(0, 2**20), min_size=1, max_size=8), st.binary(max_size=20))
def test_message_indexes_round_trip(indexes, payload):
    data = b"\x00\x00\x00\x00\x05" + _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes) + payload
    framed = unframe_protobuf(data)
    assert (framed.schema_id, framed.message_indexes, bytes(framed.payload)) == (5, indexes, payload)


@given(st.binary(max_size=12))
def test_any_bytes_decode_or_raise_a_schema_error(data):
    try:
        unframe_protobuf(data)
    except SchemaError:
        pass


def test_a_missing_extra_names_the_install(monkeypatch, registry_data):
    monkeypatch.setitem(__import__("sys").modules, "fastavro", None)  # `import fastavro` fails
    store = open_schema_store(registry_data.log_dir)
    with pytest.raises(SchemaError, match=r"needs fastavro .*pip install 'kafkalog\[schemas\]'"):
        make_decoder("avro", store).decode(values(registry_data, "orders")[0])
