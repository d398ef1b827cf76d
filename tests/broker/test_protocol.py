"""kafkalog.protocol against kafka-python's own protocol classes (a test-only oracle).

kafka-python 3 builds its request and response classes from Kafka's JSON message specs, so for
every API and every version served, random messages (drawn from kafkalog's schema tables) must
encode to exactly the bytes kafka-python encodes, and decode back to themselves. Headers, the
KIP-511 ApiVersions fallback, file-slice records and hostile bytes are checked separately.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog import protocol as p
from kafkalog.file_records import FileRecords

kp_protocol = pytest.importorskip("kafka.protocol.api_message", reason="needs kafka-python>=3 (its JSON-built protocol)")
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse  # noqa: E402
from kafka.protocol.admin import (  # noqa: E402
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.consumer import (  # noqa: E402
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse  # noqa: E402
from kafka.protocol.metadata import (  # noqa: E402
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.admin.groups import (  # noqa: E402
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer.group import (  # noqa: E402
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.producer import (  # noqa: E402
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

ORACLE = {
    p.ApiKey.PRODUCE: (ProduceRequest, ProduceResponse),
    p.ApiKey.FETCH: (FetchRequest, FetchResponse),
    p.ApiKey.LIST_OFFSETS: (ListOffsetsRequest, ListOffsetsResponse),
    p.ApiKey.METADATA: (MetadataRequest, MetadataResponse),
    p.ApiKey.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    p.ApiKey.API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    p.ApiKey.CREATE_TOPICS: (CreateTopicsRequest, CreateTopicsResponse),
    p.ApiKey.INIT_PRODUCER_ID: (InitProducerIdRequest, InitProducerIdResponse),
    p.ApiKey.OFFSET_FOR_LEADER_EPOCH: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    p.ApiKey.DELETE_TOPICS: (DeleteTopicsRequest, DeleteTopicsResponse),
    p.ApiKey.DELETE_RECORDS: (DeleteRecordsRequest, DeleteRecordsResponse),
    p.ApiKey.DESCRIBE_CONFIGS: (DescribeConfigsRequest, DescribeConfigsResponse),
    p.ApiKey.ALTER_CONFIGS: (AlterConfigsRequest, AlterConfigsResponse),
    p.ApiKey.CREATE_PARTITIONS: (CreatePartitionsRequest, CreatePartitionsResponse),
    p.ApiKey.INCREMENTAL_ALTER_CONFIGS: (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    p.ApiKey.ELECT_LEADERS: (ElectLeadersRequest, ElectLeadersResponse),
    # the group coordinator's
    p.ApiKey.OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    p.ApiKey.OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    p.ApiKey.JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    p.ApiKey.HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    p.ApiKey.LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    p.ApiKey.SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    p.ApiKey.DESCRIBE_GROUPS: (DescribeGroupsRequest, DescribeGroupsResponse),
    p.ApiKey.LIST_GROUPS: (ListGroupsRequest, ListGroupsResponse),
    p.ApiKey.DELETE_GROUPS: (DeleteGroupsRequest, DeleteGroupsResponse),
    p.ApiKey.OFFSET_DELETE: (OffsetDeleteRequest, OffsetDeleteResponse),
}
CASES = [
    (spec.key, version, response)
    for spec in p.APIS.values()
    for version in range(spec.min_version, spec.max_version + 1)
    for response in (False, True)
]
EXAMPLES = settings(max_examples=max(12, settings.default.max_examples // 5))

_INT_BOUNDS = {p.INT8: 7, p.INT16: 15, p.INT32: 31, p.INT64: 63}
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def values(type_, version: int, nullable: bool):
    """A strategy for values of ``type_`` at ``version`` (None only where nullable)."""
    if type_ in _INT_BOUNDS:
        bits = _INT_BOUNDS[type_]
        base = st.integers(-(2**bits), 2**bits - 1)
    elif type_ is p.BOOL:
        base = st.booleans()
    elif type_ is p.STRING:
        base = _TEXT
    elif type_ in (p.BYTES, p.RECORDS):
        base = st.binary(max_size=40)
    elif isinstance(type_, p.Array):
        base = st.lists(values(type_.element, version, False), max_size=3)
    else:
        base = st.fixed_dictionaries({f.name: values(f.type, version, f.nullable_in(version))
                                      for f in p.iter_fields(type_, version)})
    return st.one_of(st.none(), base) if nullable else base


# kafka-python's names where they differ from the snake case of Kafka's JSON names.
KP_NAMES = {"cluster_authorized_operations": "authorized_operations",
            "topic_authorized_operations": "authorized_operations"}


def kp_build(cls, value):
    """kafka-python's message object for a kafkalog dict (nested structs become its classes)."""
    kwargs = {}
    for name, v in value.items():
        name = name if name in cls._struct.fields else KP_NAMES[name]
        field = cls._struct.fields[name]
        if field.is_struct_array() and v is not None:
            v = [kp_build(field.data_class, e) for e in v]
        elif field.is_struct() and v is not None:
            v = kp_build(field.data_class, v)
        elif getattr(field, "_type_str", None) == "bitfield":  # kafka-python: a set of bit numbers
            v = {bit for bit in range(32) if (v & 0xFFFFFFFF) >> bit & 1}
        kwargs[name] = v
    return cls(**kwargs)


def normalise(value):
    """memoryviews as bytes, so decoded dicts compare with the drawn ones."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def present_only(struct_, version, value):
    """``value`` restricted to the fields ``version`` has (decoding adds defaults for the rest)."""
    out = {}
    for f in p.iter_fields(struct_, version):
        v = value[f.name]
        if isinstance(f.type, p.Array) and isinstance(f.type.element, p.Struct) and v is not None:
            v = [present_only(f.type.element, version, e) for e in v]
        out[f.name] = v
    return out


@pytest.mark.parametrize("api_key,version,response", CASES,
                         ids=[f"{k.name.lower()}-v{v}-{'response' if r else 'request'}" for k, v, r in CASES])
@EXAMPLES
@given(data=st.data())
def test_body_matches_kafka_python(api_key, version, response, data) -> None:
    spec = p.APIS[api_key]
    schema = spec.response if response else spec.request
    value = data.draw(values(schema, version, False))
    ours = p.encode_body(api_key, version, value, response=response)
    oracle_cls = ORACLE[api_key][1 if response else 0]
    theirs = bytes(kp_build(oracle_cls[version], value).encode(version=version))
    assert ours == theirs
    decoded = p.decode_body(api_key, version, ours, response=response)
    assert present_only(schema, version, normalise(decoded)) == value
    assert p.encode_body(api_key, version, decoded, response=response) == ours


VERSIONS = [(spec.key, v) for spec in p.APIS.values() for v in range(spec.min_version, spec.max_version + 1)]
VERSION_IDS = [f"{k.name.lower()}-v{v}" for k, v in VERSIONS]
FEW = settings(max_examples=max(3, settings.default.max_examples // 20))


@pytest.mark.parametrize("api_key,version", VERSIONS, ids=VERSION_IDS)
@FEW
@given(data=st.data())
def test_decoding_kafka_python_requests_with_headers(api_key, version, data) -> None:
    """Whole frames kafka-python sends (header v1, or v2 for ApiVersions v3) decode field by field."""
    spec = p.APIS[api_key]
    value = data.draw(values(spec.request, version, False))
    request = kp_build(ORACLE[api_key][0][version], value)
    request.with_header(correlation_id=12345, client_id="kafka-python-oracle")
    frame = bytes(request.encode(header=True, framed=True))
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    decoded = p.decode_request(frame[4:])
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id, decoded.client_id) == (
        api_key, version, 12345, "kafka-python-oracle")
    assert present_only(spec.request, version, normalise(decoded.body)) == value
    assert p.encode_request(api_key, version, 12345, decoded.body, client_id="kafka-python-oracle") == frame


@pytest.mark.parametrize("api_key,version", VERSIONS, ids=VERSION_IDS)
@FEW
@given(data=st.data())
def test_response_frames_match_kafka_python(api_key, version, data) -> None:
    """Response header v0 (always, for ApiVersions) and the size prefix, as kafka-python frames them."""
    spec = p.APIS[api_key]
    value = data.draw(values(spec.response, version, False))
    response = kp_build(ORACLE[api_key][1][version], value)
    response.with_header(correlation_id=-7)
    theirs = bytes(response.encode(header=True, framed=True))
    ours = p.encode_response(api_key, version, -7, value)
    assert ours.size == len(theirs)
    assert ours.to_bytes() == theirs
    correlation_id, decoded = p.decode_response(api_key, version, theirs[4:])
    assert correlation_id == -7
    assert present_only(spec.response, version, normalise(decoded)) == value


def test_api_versions_fallback_is_the_v0_layout() -> None:
    """KIP-511: an ApiVersions request above v3 (header v2, body unread) is answered in v0."""
    frame = struct.pack(">hhi", 18, 9, 77) + struct.pack(">h", 3) + b"cli" + b"\x00" + b"\x05junk"
    request = p.decode_request(frame)
    assert request.unsupported_api_versions and request.body is None
    assert (request.api_version, request.correlation_id, request.client_id) == (9, 77, "cli")
    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    ours = p.encode_response(18, 0, 77, body).to_bytes()
    expected = ApiVersionsResponse[0](error_code=35, api_keys=[ApiVersionsResponse.ApiVersion(
        api_key=18, min_version=0, max_version=3)])
    expected.with_header(correlation_id=77)
    assert ours == bytes(expected.encode(header=True, framed=True))


def test_advertised_versions() -> None:
    assert {(v["api_key"], v["min_version"], v["max_version"]) for v in p.supported_api_versions()} == {
        (0, 0, 8), (1, 4, 12), (2, 1, 5), (3, 0, 8), (18, 0, 3), (19, 0, 4), (22, 0, 1), (23, 0, 4),
        (20, 0, 5), (21, 0, 2), (32, 0, 4), (33, 0, 2), (37, 0, 3), (44, 0, 1), (43, 0, 2)} | GROUP_API_VERSIONS


#: The group coordinator's APIs (FindCoordinator, OffsetCommit/Fetch, Join/Heartbeat/Leave/Sync,
#: DescribeGroups, ListGroups, DeleteGroups, OffsetDelete).
GROUP_API_VERSIONS = {(10, 0, 4), (8, 0, 8), (9, 1, 8), (11, 0, 9), (12, 0, 4), (13, 0, 5), (14, 0, 5), (15, 0, 5),
                      (16, 0, 5), (42, 0, 2), (47, 0, 0)}


def test_file_slices_stay_out_of_line(tmp_path) -> None:
    """A Fetch response with records from a file: the bytes equal the in-memory encoding, and
    the slices are separate parts (for sendfile) with the sizes counted in the length prefixes."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * 8)
    with FileRecords.open(path) as fr:
        slices = [fr.slice(10, 100), fr.slice(500, 1000)]
        body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
            {"topic": "t", "partitions": [
                {"partition_index": 0, "error_code": 0, "high_watermark": 5, "last_stable_offset": 5,
                 "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
                 "records": slices},
                {"partition_index": 1, "error_code": 3, "high_watermark": -1, "records": b""},
            ]}]}
        frame = p.encode_response(p.ApiKey.FETCH, 11, 1, body)
        assert [type(part) for part in frame.parts] == [bytes, FileRecords, FileRecords, bytes]
        assert frame.file_bytes == 1100
        in_memory = dict(body)
        in_memory["responses"] = [dict(body["responses"][0])]
        in_memory["responses"][0]["partitions"] = [dict(body["responses"][0]["partitions"][0]),
                                                   body["responses"][0]["partitions"][1]]
        in_memory["responses"][0]["partitions"][0]["records"] = fr.read(10, 100) + fr.read(500, 1000)
        assert frame.to_bytes() == p.encode_response(p.ApiKey.FETCH, 11, 1, in_memory).to_bytes()
        _, decoded = p.decode_response(p.ApiKey.FETCH, 11, frame.to_bytes()[4:])
        assert bytes(decoded["responses"][0]["partitions"][0]["records"]) == fr.read(10, 100) + fr.read(500, 1000)


# -- hostile bytes ---------------------------------------------------------------------------------


def _sample_frame() -> bytes:
    body = {"acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "orders", "partition_data": [{"index": 0, "records": b"x" * 30}, {"index": 1, "records": None}]}]}
    return p.encode_request(p.ApiKey.PRODUCE, 8, 3, body)[4:]


def test_every_truncation_is_a_protocol_error() -> None:
    frame = _sample_frame()
    for end in range(len(frame)):
        with pytest.raises(p.ProtocolError) as info:
            p.decode_request(frame[:end])
        assert info.value.position is not None and info.value.position <= end


@EXAMPLES
@given(st.binary(max_size=200))
def test_garbage_raises_only_protocol_errors(garbage) -> None:
    for frame in (garbage, _sample_frame()[:8] + garbage):
        try:
            p.decode_request(frame)
        except p.ProtocolError:
            pass


@EXAMPLES
@given(st.data())
def test_corrupted_bytes_raise_only_protocol_errors(data) -> None:
    frame = bytearray(_sample_frame())
    for _ in range(data.draw(st.integers(1, 4))):
        frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    try:
        p.decode_request(bytes(frame))
    except p.ProtocolError:
        pass


def test_huge_counts_and_lengths_are_refused_before_allocating() -> None:
    header = struct.pack(">hhih", 0, 8, 1, -1) + struct.pack(">hhi", -1, 1, 1000)
    # topic_data claims 2**31-1 topics in a frame of a few bytes.
    with pytest.raises(p.ProtocolError, match="array of 2147483647 elements"):
        p.decode_request(header + struct.pack(">i", 2**31 - 1) + b"\0" * 8)
    # records claims 1 GiB.
    topic = struct.pack(">h", 1) + b"t" + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 1 << 30)
    with pytest.raises(p.ProtocolError, match="1073741824 bytes needed"):
        p.decode_request(header + struct.pack(">i", 1) + topic + b"abc")
    with pytest.raises(p.ProtocolError, match="invalid array length -2"):
        p.decode_request(header + struct.pack(">i", -2))
    with pytest.raises(p.ProtocolError, match="invalid array length -1"):  # null where not nullable
        p.decode_request(header + struct.pack(">i", -1))


def test_flexible_lengths_are_checked() -> None:
    frame = struct.pack(">hhih", 18, 3, 1, 0) + b"\x00"
    assert p.decode_request(frame + b"\x02a\x021\x00").body == {
        "client_software_name": "a", "client_software_version": "1"}
    with pytest.raises(p.ProtocolError, match="varint longer than 5 bytes"):
        p.decode_request(frame + b"\xff\xff\xff\xff\xff\xff")
    with pytest.raises(p.ProtocolError, match="bytes needed"):
        p.decode_request(frame + b"\x7fabc")
    with pytest.raises(p.ProtocolError, match="invalid string length -1"):  # compact null
        p.decode_request(frame + b"\x00")
    with pytest.raises(p.ProtocolError, match="out of order"):
        p.decode_request(frame + b"\x02a\x021\x02\x05\x00\x01\x00")


def test_unknown_apis_and_versions() -> None:
    with pytest.raises(p.UnsupportedApiError) as info:
        p.decode_request(struct.pack(">hhih", 61, 0, 42, -1))  # DescribeProducers
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (61, 0, 42)
    # Below the Fetch versions and above the Produce versions served (Produce v9 is flexible: its
    # header has tagged fields).
    for key, version, tags in ((1, 3, b""), (0, 9, b"\x00")):
        with pytest.raises(p.UnsupportedApiError, match=f"{p.ApiKey(key).name} version"):
            p.decode_request(struct.pack(">hhih", key, version, 1, -1) + tags)
    with pytest.raises(p.UnsupportedApiError):
        p.encode_body(p.ApiKey.FETCH, 13, {})


def test_invalid_utf8_reads_with_replacement_as_java_does() -> None:
    frame = struct.pack(">hhih", 3, 1, 1, 2) + b"\xff\xfe" + struct.pack(">i", 1) + struct.pack(">h", 2) + b"\xc3\x28"
    request = p.decode_request(frame)
    assert request.client_id == "\ufffd\ufffd"
    assert request.body["topics"][0]["name"] == "\ufffd("


def test_encoding_refuses_values_that_do_not_fit() -> None:
    with pytest.raises(p.ProtocolError, match="acks"):
        p.encode_body(p.ApiKey.PRODUCE, 3, {"acks": 1 << 20, "timeout_ms": 0, "topic_data": []})
    with pytest.raises(p.ProtocolError, match="null in a non-nullable field"):
        p.encode_body(p.ApiKey.METADATA, 0, {"topics": None})
    assert p.encode_body(p.ApiKey.METADATA, 1, {"topics": None}) == b"\xff\xff\xff\xff"


def test_records_decode_without_copying() -> None:
    frame = _sample_frame()
    request = p.decode_request(frame)
    records = request.body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and bytes(records) == b"x" * 30
    assert records.obj is frame  # a view of the frame itself
