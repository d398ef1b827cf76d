"""The record schemas of ``kafkalog.protocol`` (``__consumer_offsets``, ``__transaction_state``,
the consumer protocol, KRaft control records) through the same interpreter as the broker's
APIs: round trips at every version, tagged fields, and the messages Kafka's generated readers
fail with (the dump prints them)."""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog import protocol as p

MESSAGES = [
    p.TRANSACTION_LOG_KEY,
    p.TRANSACTION_LOG_VALUE,
    p.CONSUMER_PROTOCOL_SUBSCRIPTION,
    p.CONSUMER_PROTOCOL_ASSIGNMENT,
    *[m for record_type in range(9) if (pair := p.coordinator_record_schemas(record_type)) for m in pair],
    *[message for _, message in p.KRAFT_CONTROL_RECORDS.values()],
]
CASES = [(m, v) for m in dict.fromkeys(MESSAGES) for v in range(m.versions[0], m.versions[1] + 1)]
_BOUNDS = {p.INT8: 7, p.INT16: 15, p.INT32: 31, p.INT64: 63}
_UUIDS = st.binary(min_size=16, max_size=16).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("="))


def values(type_, version: int, nullable: bool):
    """A strategy for values of ``type_`` at ``version`` (None only where nullable)."""
    if type_ in _BOUNDS:
        base = st.integers(-(2 ** _BOUNDS[type_]), 2 ** _BOUNDS[type_] - 1)
    elif type_ is p.UINT16:
        base = st.integers(0, 2**16 - 1)
    elif type_ is p.UUID:
        base = _UUIDS
    elif type_ is p.STRING:
        base = st.text(max_size=8)
    elif type_ is p.BYTES:
        base = st.binary(max_size=8)
    elif isinstance(type_, p.Array):
        base = st.lists(values(type_.element, version, False), max_size=3)
    else:
        base = st.fixed_dictionaries({f.name: values(f.type, version, f.nullable_in(version))
                                      for f in p.iter_fields(type_, version)})
    return st.one_of(st.none(), base) if nullable else base


@pytest.mark.parametrize("message, version", CASES, ids=[f"{m.name}-v{v}" for m, v in CASES])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_record_schema_round_trips(message, version, data) -> None:
    value = data.draw(values(message.struct, version, False))
    encoded = p.write_message(message, value, version)
    decoded = p.read_message(message, p.MessageReader(encoded), version)
    assert p.to_json(message, decoded, version) == p.to_json(message, value, version)


def test_a_known_tagged_field_is_read_in_place_and_left_out_of_json_at_its_default() -> None:
    _, member = p.coordinator_record_schemas(5)
    value = {"instanceId": None, "rackId": "r", "clientId": "c", "clientHost": "/h", "subscribedTopicNames": ["t"],
             "subscribedTopicRegex": None, "rebalanceTimeoutMs": 5, "serverAssignor": "range",
             "classicMemberMetadata": None}
    plain = p.write_message(member, value, 0)
    assert "classicMemberMetadata" not in p.to_json(member, p.read_message(member, p.MessageReader(plain), 0), 0)
    classic = {"sessionTimeoutMs": 45000, "supportedProtocols": [{"name": "range", "metadata": b"\x01"}]}
    tagged = p.write_message(member, {**value, "classicMemberMetadata": classic}, 0)
    assert len(tagged) > len(plain)
    out = p.to_json(member, p.read_message(member, p.MessageReader(tagged), 0), 0)
    assert out["classicMemberMetadata"] == {"sessionTimeoutMs": 45000,
                                            "supportedProtocols": [{"name": "range", "metadata": "AQ=="}]}


def _read_error(message, data: bytes, version: int) -> str:
    with pytest.raises(p.ProtocolError) as info:
        p.read_message(message, p.MessageReader(data), version)
    assert info.value.position is None  # the dump prints Kafka's message alone
    return str(info.value)


def test_the_reader_fails_with_the_messages_of_kafkas_generated_readers() -> None:
    key, _ = p.coordinator_record_schemas(1)
    assert _read_error(key, b"", 7) == "Can't read version 7 of OffsetCommitKey"
    assert _read_error(key, b"\x00", 1) == "null"  # BufferUnderflowException
    assert _read_error(key, b"\xff\xff", 1) == "non-nullable field group was serialized as null"
    assert _read_error(key, b"\x00\x05ab", 1) == "Error reading byte array of 5 byte(s): only 2 byte(s) available"
    subscription = p.CONSUMER_PROTOCOL_SUBSCRIPTION
    assert _read_error(subscription, struct.pack(">i", 1000), 0) == (
        "Tried to allocate a collection of size 1000, but there are only 0 bytes remaining."
    )
    _, partition_metadata = p.coordinator_record_schemas(4)  # flexible: a compact array first
    assert _read_error(partition_metadata, b"\xff\xff\xff\xff\xff", 0) == (
        "Varint is too long, the most significant bit in the 5th byte is set"
    )


def test_a_string_array_element_is_named_as_kafka_names_it() -> None:
    data = struct.pack(">i", 1) + struct.pack(">h", -1)
    assert _read_error(p.CONSUMER_PROTOCOL_SUBSCRIPTION, data, 0) == (
        "non-nullable field topics element was serialized as null"
    )


def test_the_kraft_control_records_are_keyed_by_control_type() -> None:
    assert {k: label for k, (label, _) in p.KRAFT_CONTROL_RECORDS.items()} == {
        3: "SnapshotHeader", 4: "SnapshotFooter", 5: "KRaftVersion", 6: "KRaftVoters",
    }
