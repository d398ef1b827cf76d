"""Kafka 4.0's internal-topic records in ``kafkalog dump``: golden tests.

The records are encoded by ``kafka_schema_writer`` (a test-only encoder that reads Kafka's JSON
schema files in ``tests/data/kafka-4.0-schemas``, independent of ``kafkalog.protocol``), written
into log segments, and dumped. The expected lines are written by hand from Kafka's
``DumpLogSegments`` (``CoordinatorRecordMessageParser``: ``{"type":..,"data":..}`` keys,
``{"version":..,"data":..}`` values, ``<DELETE>``; ``RemoteMetadataLogMessageParser``: the Java
object's ``toString``; ``ClusterMetadataLogMessageParser``) and the generated ``JsonConverter``s
(camelCase names in schema order, tagged fields only when not at their default, uuids as
base64, bytes as base64).
"""

from __future__ import annotations

import base64
import io
import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_schema_writer import coordinator_record, framed_record, json_name, load, write

from kafkalog import FileRecords, RecordBatchBuilder
from kafkalog import tools as cli
from kafkalog.protocol import (
    REMOTE_LOG_METADATA_RECORDS,
    MessageReader,
    coordinator_record_schemas,
    read_message,
    share_coordinator_record_schemas,
)

TS = 1_700_000_000_000
ORDERS = "b3JkZXJzLXRvcGljLWlkIQ"  # base64 of b"orders-topic-id!"
SEGMENT = "c2VnbWVudC11dWlkLTAwMQ"  # base64 of b"segment-uuid-001"


def dump(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(["dump", *map(str, args)], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def segment(tmp_path: Path, records: list[tuple[bytes | None, bytes | None]]) -> Path:
    path = tmp_path / "00000000000000000000.log"
    b = RecordBatchBuilder(2, base_offset=0)
    for key, value in records:
        b.append(key, value, timestamp=TS)
    with FileRecords.open(path, create=True) as fr:
        fr.append(b.build())
    return path


def key_payloads(path: Path, decoder: str) -> list[str]:
    """Each record line's text from its ``key:`` (or ``payload:``) on."""
    rc, out, err = dump("--files", path, decoder)
    assert rc == 0, err
    out_lines = []
    for line in out.splitlines():
        if line.startswith("| offset:"):
            at = line.find(" key: ")
            out_lines.append(line[at + 1:] if at >= 0 else line[line.index(" payload: ") + 1:])
    return out_lines


def json_records(path: Path, decoder: str) -> list[dict]:
    rc, out, err = dump("--files", path, decoder, "--json")
    assert rc == 0, err
    return [o for o in map(json.loads, out.splitlines()) if o["type"] == "record"]


# -- __consumer_offsets: the consumer and share group records -----------------------------------

OFFSETS_GOLDEN = [
    (("ConsumerGroupMetadataKey", {"groupId": "g1"}, "ConsumerGroupMetadataValue", {"epoch": 5}),
     'key: {"type":"3","data":{"groupId":"g1"}} payload: {"version":"0","data":{"epoch":5}}'),
    (("ConsumerGroupPartitionMetadataKey", {"groupId": "g1"}, "ConsumerGroupPartitionMetadataValue",
      {"topics": [{"topicId": ORDERS, "topicName": "orders", "numPartitions": 2, "partitionMetadata": []}]}),
     'key: {"type":"4","data":{"groupId":"g1"}} payload: {"version":"0","data":{"topics":[{"topicId":"'
     + ORDERS + '","topicName":"orders","numPartitions":2,"partitionMetadata":[]}]}}'),
    (("ConsumerGroupMemberMetadataKey", {"groupId": "g1", "memberId": "m1"}, "ConsumerGroupMemberMetadataValue",
      {"instanceId": None, "rackId": "r1", "clientId": "c1", "clientHost": "/127.0.0.1",
       "subscribedTopicNames": ["orders"], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 45000,
       "serverAssignor": "uniform"}),
     'key: {"type":"5","data":{"groupId":"g1","memberId":"m1"}} payload: {"version":"0","data":{"instanceId":null,'
     '"rackId":"r1","clientId":"c1","clientHost":"/127.0.0.1","subscribedTopicNames":["orders"],'
     '"subscribedTopicRegex":null,"rebalanceTimeoutMs":45000,"serverAssignor":"uniform"}}'),
    (("ConsumerGroupMemberMetadataKey", {"groupId": "g1", "memberId": "m2"}, "ConsumerGroupMemberMetadataValue",
      {"instanceId": "i2", "rackId": None, "clientId": "c2", "clientHost": "/10.0.0.2",
       "subscribedTopicNames": [], "subscribedTopicRegex": "ord.*", "rebalanceTimeoutMs": 1000,
       "serverAssignor": None,
       "classicMemberMetadata": {"sessionTimeoutMs": 45000,
                                 "supportedProtocols": [{"name": "range", "metadata": b"\x00\x01"}]}}),
     'key: {"type":"5","data":{"groupId":"g1","memberId":"m2"}} payload: {"version":"0","data":{"instanceId":"i2",'
     '"rackId":null,"clientId":"c2","clientHost":"/10.0.0.2","subscribedTopicNames":[],'
     '"subscribedTopicRegex":"ord.*","rebalanceTimeoutMs":1000,"serverAssignor":null,"classicMemberMetadata":'
     '{"sessionTimeoutMs":45000,"supportedProtocols":[{"name":"range","metadata":"AAE="}]}}}'),
    (("ConsumerGroupTargetAssignmentMetadataKey", {"groupId": "g1"}, "ConsumerGroupTargetAssignmentMetadataValue",
      {"assignmentEpoch": 5}),
     'key: {"type":"6","data":{"groupId":"g1"}} payload: {"version":"0","data":{"assignmentEpoch":5}}'),
    (("ConsumerGroupTargetAssignmentMemberKey", {"groupId": "g1", "memberId": "m1"},
      "ConsumerGroupTargetAssignmentMemberValue", {"topicPartitions": [{"topicId": ORDERS, "partitions": [0, 1]}]}),
     'key: {"type":"7","data":{"groupId":"g1","memberId":"m1"}} payload: {"version":"0","data":{"topicPartitions":'
     '[{"topicId":"' + ORDERS + '","partitions":[0,1]}]}}'),
    (("ConsumerGroupCurrentMemberAssignmentKey", {"groupId": "g1", "memberId": "m1"},
      "ConsumerGroupCurrentMemberAssignmentValue",
      {"memberEpoch": 5, "previousMemberEpoch": 4, "state": 0,
       "assignedPartitions": [{"topicId": ORDERS, "partitions": [0, 1]}], "partitionsPendingRevocation": []}),
     'key: {"type":"8","data":{"groupId":"g1","memberId":"m1"}} payload: {"version":"0","data":{"memberEpoch":5,'
     '"previousMemberEpoch":4,"state":0,"assignedPartitions":[{"topicId":"' + ORDERS + '","partitions":[0,1]}],'
     '"partitionsPendingRevocation":[]}}'),
    (("ShareGroupPartitionMetadataKey", {"groupId": "s1"}, "ShareGroupPartitionMetadataValue",
      {"topics": [{"topicId": ORDERS, "topicName": "orders", "numPartitions": 2,
                   "partitionMetadata": [{"partition": 0, "racks": ["r1", "r2"]}]}]}),
     'key: {"type":"9","data":{"groupId":"s1"}} payload: {"version":"0","data":{"topics":[{"topicId":"' + ORDERS
     + '","topicName":"orders","numPartitions":2,"partitionMetadata":[{"partition":0,"racks":["r1","r2"]}]}]}}'),
    (("ShareGroupMemberMetadataKey", {"groupId": "s1", "memberId": "sm1"}, "ShareGroupMemberMetadataValue",
      {"rackId": None, "clientId": "share-c1", "clientHost": "/127.0.0.1", "subscribedTopicNames": ["orders"]}),
     'key: {"type":"10","data":{"groupId":"s1","memberId":"sm1"}} payload: {"version":"0","data":{"rackId":null,'
     '"clientId":"share-c1","clientHost":"/127.0.0.1","subscribedTopicNames":["orders"]}}'),
    (("ShareGroupMetadataKey", {"groupId": "s1"}, "ShareGroupMetadataValue", {"epoch": 2}),
     'key: {"type":"11","data":{"groupId":"s1"}} payload: {"version":"0","data":{"epoch":2}}'),
    (("ShareGroupTargetAssignmentMetadataKey", {"groupId": "s1"}, "ShareGroupTargetAssignmentMetadataValue",
      {"assignmentEpoch": 2}),
     'key: {"type":"12","data":{"groupId":"s1"}} payload: {"version":"0","data":{"assignmentEpoch":2}}'),
    (("ShareGroupTargetAssignmentMemberKey", {"groupId": "s1", "memberId": "sm1"},
      "ShareGroupTargetAssignmentMemberValue", {"topicPartitions": [{"topicId": ORDERS, "partitions": [1]}]}),
     'key: {"type":"13","data":{"groupId":"s1","memberId":"sm1"}} payload: {"version":"0","data":'
     '{"topicPartitions":[{"topicId":"' + ORDERS + '","partitions":[1]}]}}'),
    (("ShareGroupCurrentMemberAssignmentKey", {"groupId": "s1", "memberId": "sm1"},
      "ShareGroupCurrentMemberAssignmentValue",
      {"memberEpoch": 2, "previousMemberEpoch": 1, "state": 0,
       "assignedPartitions": [{"topicId": ORDERS, "partitions": [1]}]}),
     'key: {"type":"14","data":{"groupId":"s1","memberId":"sm1"}} payload: {"version":"0","data":{"memberEpoch":2,'
     '"previousMemberEpoch":1,"state":0,"assignedPartitions":[{"topicId":"' + ORDERS + '","partitions":[1]}]}}'),
    (("ShareGroupStatePartitionMetadataKey", {"groupId": "s1"}, "ShareGroupStatePartitionMetadataValue",
      {"initializedTopics": [{"topicId": ORDERS, "topicName": "orders", "partitions": [0, 1]}],
       "deletingTopics": [{"topicId": SEGMENT, "topicName": "old"}]}),
     'key: {"type":"15","data":{"groupId":"s1"}} payload: {"version":"0","data":{"initializedTopics":[{"topicId":"'
     + ORDERS + '","topicName":"orders","partitions":[0,1]}],"deletingTopics":[{"topicId":"' + SEGMENT
     + '","topicName":"old"}]}}'),
    (("ConsumerGroupRegularExpressionKey", {"groupId": "g1", "regularExpression": "ord.*"},
      "ConsumerGroupRegularExpressionValue", {"topics": ["orders", "ordinals"], "version": 7, "timestamp": TS}),
     'key: {"type":"16","data":{"groupId":"g1","regularExpression":"ord.*"}} payload: {"version":"0","data":'
     '{"topics":["orders","ordinals"],"version":7,"timestamp":1700000000000}}'),
    # Tombstones
    (("ConsumerGroupCurrentMemberAssignmentKey", {"groupId": "g1", "memberId": "m1"}, None, None),
     'key: {"type":"8","data":{"groupId":"g1","memberId":"m1"}} payload: <DELETE>'),
    (("ShareGroupMetadataKey", {"groupId": "s1"}, None, None),
     'key: {"type":"11","data":{"groupId":"s1"}} payload: <DELETE>'),
]


def test_consumer_and_share_group_records_print_as_kafka_4(tmp_path: Path) -> None:
    records = [coordinator_record(*spec) for spec, _ in OFFSETS_GOLDEN]
    records.append((struct.pack(">h", 17) + b"\x00\x01g", b"\x00\x00"))  # a type Kafka 4.0 does not declare
    path = segment(tmp_path, records)
    expected = [text for _, text in OFFSETS_GOLDEN]
    expected.append(f"key: Unknown record type 17 at offset {len(OFFSETS_GOLDEN)}, skipping.")
    assert key_payloads(path, "--offsets-decoder") == expected
    # --json carries the same objects; an unknown type is a decodeError.
    objects = json_records(path, "--offsets-decoder")
    for obj, text in zip(objects, expected):
        if "payload: <DELETE>" in text:
            assert obj["value"] is None
        elif "Unknown record type" not in text:
            key_text, _, payload_text = text.removeprefix("key: ").partition(" payload: ")
            assert (obj["key"], obj["value"]) == (json.loads(key_text), json.loads(payload_text))
    assert "Unknown record type 17" in objects[-1]["decodeError"]


@pytest.mark.parametrize("record_type", range(3, 17))
def test_every_new_group_record_type_is_declared_with_kafkas_type_number(tmp_path: Path, record_type: int) -> None:
    """Each schema file's key version is the record type kafkalog decodes it as."""
    key_message, value_message = coordinator_record_schemas(record_type)
    name = key_message.name
    key, value = coordinator_record(name, {"groupId": "g", "memberId": "m", "regularExpression": "r"},
                                    value_message.name, {})
    assert struct.unpack_from(">h", key)[0] == record_type
    obj = json_records(segment(tmp_path, [(key, value)]), "--offsets-decoder")[0]
    assert "decodeError" not in obj and obj["key"]["type"] == str(record_type)


def test_bad_coordinator_records_are_reported_and_skipped(tmp_path: Path) -> None:
    good_key, _ = coordinator_record("ShareGroupMetadataKey", {"groupId": "s1"}, None, None)
    path = segment(tmp_path, [(good_key, b"\x00\x00\x00"), (good_key, b"\x00\x07" + write(
        "ShareGroupMetadataValue", {"epoch": 1}, 0))])
    lines = key_payloads(path, "--offsets-decoder")
    assert lines[0].startswith("key: Error at offset 0, skipping. Could not read record with version 0 from value's")
    assert lines[1].startswith("key: Error at offset 1, skipping.")


# -- __share_group_state ---------------------------------------------------------------------------

SHARE_STATE_GOLDEN = [
    (("ShareSnapshotKey", {"groupId": "s1", "topicId": ORDERS, "partition": 0}, "ShareSnapshotValue",
      {"snapshotEpoch": 1, "stateEpoch": 2, "leaderEpoch": 3, "startOffset": 10,
       "stateBatches": [{"firstOffset": 10, "lastOffset": 12, "deliveryState": 2, "deliveryCount": 1}]}),
     'key: {"type":"0","data":{"groupId":"s1","topicId":"' + ORDERS + '","partition":0}} payload: {"version":"0",'
     '"data":{"snapshotEpoch":1,"stateEpoch":2,"leaderEpoch":3,"startOffset":10,"stateBatches":[{"firstOffset":10,'
     '"lastOffset":12,"deliveryState":2,"deliveryCount":1}]}}'),
    (("ShareUpdateKey", {"groupId": "s1", "topicId": ORDERS, "partition": 0}, "ShareUpdateValue",
      {"snapshotEpoch": 1, "leaderEpoch": 3, "startOffset": -1,
       "stateBatches": [{"firstOffset": 13, "lastOffset": 13, "deliveryState": 4, "deliveryCount": 5}]}),
     'key: {"type":"1","data":{"groupId":"s1","topicId":"' + ORDERS + '","partition":0}} payload: {"version":"0",'
     '"data":{"snapshotEpoch":1,"leaderEpoch":3,"startOffset":-1,"stateBatches":[{"firstOffset":13,"lastOffset":13,'
     '"deliveryState":4,"deliveryCount":5}]}}'),
    (("ShareSnapshotKey", {"groupId": "s1", "topicId": ORDERS, "partition": 1}, None, None),
     'key: {"type":"0","data":{"groupId":"s1","topicId":"' + ORDERS + '","partition":1}} payload: <DELETE>'),
]


def test_share_group_state_decoder(tmp_path: Path) -> None:
    records = [coordinator_record(*spec) for spec, _ in SHARE_STATE_GOLDEN]
    records.append((struct.pack(">h", 2) + b"\x00\x01g", b"\x00\x00"))
    path = segment(tmp_path, records)
    assert key_payloads(path, "--share-group-state-decoder") == [
        *(text for _, text in SHARE_STATE_GOLDEN), "key: Unknown record type 2 at offset 3, skipping.",
    ]
    objects = json_records(path, "--share-group-state-decoder")
    assert objects[0]["value"]["data"]["stateBatches"][0]["deliveryState"] == 2
    assert share_coordinator_record_schemas(1)[0].name == "ShareUpdateKey"


def test_share_group_state_decoder_without_key_stops_as_kafka(tmp_path: Path) -> None:
    path = segment(tmp_path, [(None, b"\x00\x00")])
    rc, out, err = dump("--files", path, "--share-group-state-decoder")
    assert "using share group state topic decoder (message had a missing key)" in out + err


# -- __remote_log_metadata ---------------------------------------------------------------------------

SEGMENT_ID = {"topicIdPartition": {"name": "orders", "id": ORDERS, "partition": 0}, "id": SEGMENT}
SEGMENT_ID_TEXT = f"RemoteLogSegmentId{{topicIdPartition={ORDERS}:orders-0, id={SEGMENT}}}"
REMOTE_GOLDEN = [
    (("RemoteLogSegmentMetadataRecord", {
        "remoteLogSegmentId": SEGMENT_ID, "startOffset": 0, "endOffset": 99, "brokerId": 1, "maxTimestampMs": TS,
        "eventTimestampMs": TS + 1, "segmentLeaderEpochs": [{"leaderEpoch": 3, "offset": 50},
                                                            {"leaderEpoch": 0, "offset": 0}],
        "segmentSizeInBytes": 4096, "customMetadata": None, "remoteLogSegmentState": 0}),
     f"payload: RemoteLogSegmentMetadata{{remoteLogSegmentId={SEGMENT_ID_TEXT}, startOffset=0, endOffset=99, "
     f"brokerId=1, maxTimestampMs={TS}, eventTimestampMs={TS + 1}, segmentLeaderEpochs={{0=0, 3=50}}, "
     "segmentSizeInBytes=4096, customMetadata=Optional.empty, state=COPY_SEGMENT_STARTED}"),
    (("RemoteLogSegmentMetadataUpdateRecord", {
        "remoteLogSegmentId": SEGMENT_ID, "brokerId": 1, "eventTimestampMs": TS + 2, "customMetadata": b"abc",
        "remoteLogSegmentState": 1}),
     f"payload: RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={SEGMENT_ID_TEXT}, "
     f"customMetadata=Optional[CustomMetadata{{3 bytes}}], state=COPY_SEGMENT_FINISHED, eventTimestampMs={TS + 2}, "
     "brokerId=1}"),
    (("RemotePartitionDeleteMetadataRecord", {
        "topicIdPartition": {"name": "orders", "id": ORDERS, "partition": 0}, "brokerId": 2,
        "eventTimestampMs": TS + 3, "remotePartitionDeleteState": 0}),
     f"payload: RemotePartitionDeleteMetadata{{topicPartition={ORDERS}:orders-0, state=DELETE_PARTITION_MARKED, "
     f"eventTimestampMs={TS + 3}, brokerId=2}}"),
    (("RemoteLogSegmentMetadataSnapshotRecord", {
        "segmentId": SEGMENT, "startOffset": 100, "endOffset": 199, "brokerId": 1, "maxTimestampMs": TS,
        "eventTimestampMs": TS + 4, "segmentLeaderEpochs": [{"leaderEpoch": 4, "offset": 100}],
        "segmentSizeInBytes": 2048, "customMetadata": b"", "remoteLogSegmentState": 3}),
     f"payload: RemoteLogSegmentMetadataSnapshot{{segmentId={SEGMENT}, startOffset=100, endOffset=199, "
     f"maxTimestampMs={TS}, segmentLeaderEpochs={{4=100}}, segmentSizeInBytes=2048, "
     "customMetadata=Optional[CustomMetadata{0 bytes}], state=DELETE_SEGMENT_FINISHED}"),
]


def test_remote_log_metadata_decoder(tmp_path: Path) -> None:
    path = segment(tmp_path, [(None, framed_record(name, values)) for (name, values), _ in REMOTE_GOLDEN])
    assert key_payloads(path, "--remote-log-metadata-decoder") == [text for _, text in REMOTE_GOLDEN]
    objects = json_records(path, "--remote-log-metadata-decoder")
    assert [o["value"]["type"] for o in objects] == [
        "RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate", "RemotePartitionDeleteMetadata",
        "RemoteLogSegmentMetadataSnapshot",
    ]
    assert objects[1]["value"]["data"]["customMetadata"] == "YWJj"


def test_remote_log_metadata_errors_as_the_java_constructors_throw(tmp_path: Path) -> None:
    base = dict(REMOTE_GOLDEN[0][0][1])
    bad = [
        framed_record("RemoteLogSegmentMetadataRecord", {**base, "startOffset": -1}),
        framed_record("RemoteLogSegmentMetadataRecord", {**base, "endOffset": -5, "startOffset": 3}),
        framed_record("RemoteLogSegmentMetadataRecord", {**base, "segmentLeaderEpochs": []}),
        framed_record("RemoteLogSegmentMetadataRecord", {**base, "remoteLogSegmentState": 9}),
        framed_record("RemotePartitionDeleteMetadataRecord", {**REMOTE_GOLDEN[2][0][1], "remotePartitionDeleteState": 7}),
        b"\x01\x09\x00",  # api key 9: unknown
        framed_record("RemotePartitionDeleteMetadataRecord", REMOTE_GOLDEN[2][0][1]) + b"\x00",
        None,
    ]
    lines = key_payloads(segment(tmp_path, [(None, v) for v in bad]), "--remote-log-metadata-decoder")
    assert lines == [
        "payload: Error at offset 0, skipping. Unexpected start offset = -1. StartOffset for a remote segment "
        "cannot be negative",
        "payload: Error at offset 1, skipping. Unexpected end offset = -5. EndOffset for a remote segment cannot be "
        "less than startOffset = 3",
        "payload: Error at offset 2, skipping. segmentLeaderEpochs can not be null or empty",
        "payload: Error at offset 3, skipping. state can not be null",
        "payload: Error at offset 4, skipping. null",
        "payload: Error at offset 5, skipping. org.apache.kafka.common.errors.UnsupportedVersionException: "
        "Unknown metadata id 9",
        "payload: Error at offset 6, skipping. Found 1 byte(s) of garbage after 2",
        "payload: Error at offset 7, skipping. null",
    ]


# -- __transaction_state (KIP-890) and __cluster_metadata (Kafka 4.0) ---------------------------------


def test_transaction_log_value_with_kip890_tagged_fields(tmp_path: Path) -> None:
    """Kafka 4's TransactionLogMessageParser: the generated JSON, KIP-890's tagged fields where
    the schema declares them (after producerId; clientTransactionVersion last), only when set."""
    key = struct.pack(">h", 0) + struct.pack(">h", 3) + b"tx1"
    fields = {"producerId": 1000, "producerEpoch": 2, "transactionTimeoutMs": 60000, "transactionStatus": 1,
              "transactionPartitions": [{"topic": "orders", "partitionIds": [0]}],
              "transactionLastUpdateTimestampMs": TS, "transactionStartTimestampMs": TS}
    v1 = struct.pack(">h", 1) + write("TransactionLogValue", {
        **fields, "previousProducerId": 999, "nextProducerId": 1001, "clientTransactionVersion": 2}, 1)
    v1_plain = struct.pack(">h", 1) + write("TransactionLogValue", fields, 1)
    v0 = struct.pack(">h", 0) + write("TransactionLogValue", fields, 0)
    path = segment(tmp_path, [(key, v1), (key, v1_plain), (key, v0)])
    key_text = 'key: {"type":"0","data":{"transactionalId":"tx1"}}'
    rest = ('"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":1,"transactionPartitions":'
            f'[{{"topic":"orders","partitionIds":[0]}}],"transactionLastUpdateTimestampMs":{TS},'
            f'"transactionStartTimestampMs":{TS}')
    lines = key_payloads(path, "--transaction-log-decoder")
    assert lines == [
        key_text + ' payload: {"version":"1","data":{"producerId":1000,"previousProducerId":999,'
        '"nextProducerId":1001,' + rest + ',"clientTransactionVersion":2}}',
        key_text + ' payload: {"version":"1","data":{"producerId":1000,' + rest + '}}',
        key_text + ' payload: {"version":"0","data":{"producerId":1000,' + rest + '}}',
    ]
    first = json_records(path, "--transaction-log-decoder")[0]["value"]["data"]
    assert (first["previousProducerId"], first["nextProducerId"], first["clientTransactionVersion"]) == (999, 1001, 2)


def test_transaction_log_record_without_key(tmp_path: Path) -> None:
    """Kafka's tool stops at a record without key (exit status 1); the message is Kafka 4's."""
    rc, out, _ = dump("--files", segment(tmp_path, [(None, b"\x00\x00")]), "--transaction-log-decoder")
    assert rc == 1
    assert out.splitlines()[-1].endswith(
        "key: Error at offset 0, skipping. Failed to decode message at offset 0 using the specified decoder "
        "(message had a missing key)"
    )


def test_clear_elr_record(tmp_path: Path) -> None:
    path = segment(tmp_path, [(None, framed_record("ClearElrRecord", {"topicName": "orders"})),
                              (None, framed_record("ClearElrRecord", {"topicName": ""}))])
    assert key_payloads(path, "--cluster-metadata-decoder") == [
        'payload: {"type":"CLEAR_ELR_RECORD","version":0,"data":{"topicName":"orders"}}',
        'payload: {"type":"CLEAR_ELR_RECORD","version":0,"data":{"topicName":""}}',
    ]


# -- every schema, random values: the independent writer and kafkalog's reader agree ------------------

_INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def _field_strategy(field: dict, common: dict) -> st.SearchStrategy:
    t = field["type"]
    nullable = "nullableVersions" in field
    if t.startswith("[]"):
        element = t[2:]
        if element in _INT_RANGES or element in ("string", "uuid", "bytes", "bool", "uint16"):
            inner = _field_strategy({"type": element}, common)
        else:
            inner = _struct_strategy(field.get("fields") or common[element]["fields"], common)
        base = st.lists(inner, max_size=3)
    elif t in _INT_RANGES:
        bits = _INT_RANGES[t]
        base = st.integers(-(2**bits), 2**bits - 1)
    elif t == "uint16":
        base = st.integers(0, 2**16 - 1)
    elif t == "bool":
        base = st.booleans()
    elif t == "string":
        base = st.text(max_size=8)
    elif t == "bytes":
        base = st.binary(max_size=8)
    elif t == "uuid":
        base = st.binary(min_size=16, max_size=16).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("="))
    else:
        base = _struct_strategy(field.get("fields") or common[t]["fields"], common)
    return st.one_of(st.none(), base) if nullable else base


def _struct_strategy(fields: list[dict], common: dict) -> st.SearchStrategy:
    return st.fixed_dictionaries({json_name(f["name"]): _field_strategy(f, common) for f in fields})


def _schema_values(name: str) -> st.SearchStrategy:
    schema = load(name)
    common = {s["name"]: s for s in schema.get("commonStructs", [])}
    return _struct_strategy(schema["fields"], common)


def _comparable(value):
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k != "_tagged_fields"}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


_VALUE_SCHEMAS = (
    [(coordinator_record_schemas(t)[1], coordinator_record_schemas(t)[1].name) for t in range(3, 17)]
    + [(share_coordinator_record_schemas(t)[1], share_coordinator_record_schemas(t)[1].name) for t in (0, 1)]
    + [(m, m.name) for _, m in REMOTE_LOG_METADATA_RECORDS.values()]
)


@pytest.mark.parametrize("message,name", _VALUE_SCHEMAS, ids=[n for _, n in _VALUE_SCHEMAS])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_schema_writer_and_kafkalog_reader_agree(message, name, data) -> None:
    values = data.draw(_schema_values(name))
    decoded = read_message(message, MessageReader(write(name, values, 0)), 0)
    assert _comparable(decoded) == values
