"""The group coordinator's storage and its rules over the raw protocol: ``__consumer_offsets``
in Kafka's exact layouts (every record of real brokers' files re-encodes to the same bytes with
the coordinator's encoders), Kafka's partition function, real directories loading into the
coordinator, compaction keeping the latest offset per group-topic-partition, tombstones on
delete, MEMBER_ID_REQUIRED, rebalances, static membership, and the admin calls of
kafka-python's and confluent-kafka's admin clients (ListGroups, DescribeGroups, OffsetDelete,
DeleteGroups).
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import scaled, wait_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog import FileRecords, Log, LogConfig, RecordBatchBuilder
from kafkalog import protocol as p
from kafkalog.broker import Broker
from kafkalog.errors import InvalidRecordError
from kafkalog.protocol import (
    CONSUMER_OFFSETS_TOPIC,
    GROUP_METADATA_VALUE,
    ConsumerOffsets,
    MessageReader,
    OffsetsLoader,
    coordinator_record_schemas,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_message,
    write_message,
)
from kafkalog.tools import committed_offsets, read_consumer_offsets

try:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
except ImportError:
    AdminClient = None
try:
    from kafka import KafkaAdminClient, OffsetAndMetadata
    from kafka import TopicPartition as KTopicPartition
except ImportError:
    KafkaAdminClient = None

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = [
    DATA / "consumer_offsets" / "seanorth__kafka-server" / "__consumer_offsets-16",
    DATA / "consumer_offsets" / "mscaldas2012__kafka-connect-spooldir" / "__consumer_offsets-37",
    DATA / "real" / "NikhilDighe9975__kafka_setup" / "__consumer_offsets-12",
    DATA / "real" / "getachew015__kafka-broker" / "__consumer_offsets-13",
]
SHARED = Path("/work/shared/corpus/real")
FAST = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "100"}
_VERSION = struct.Struct(">h")


class Raw:
    """A blocking protocol client on kafkalog.protocol."""

    def __init__(self, broker: Broker) -> None:
        self.sock = socket.create_connection((broker.host, broker.port), timeout=scaled(20))
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, api: p.ApiKey, version: int, body: dict) -> dict:
        self.correlation_id += 1
        self.sock.sendall(p.encode_request(api, version, self.correlation_id, body, client_id="raw"))
        size = struct.unpack(">i", self._exactly(4))[0]
        cid, response = p.decode_response(api, version, self._exactly(size))
        assert cid == self.correlation_id
        return response

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return out


def _records(directory: Path):
    for log in sorted(directory.glob("*.log")):
        with FileRecords.open(log) as records:
            for batch in records.batches(validate=True):
                if not batch.is_control:
                    yield from batch.records()


def _real_dirs() -> list[Path]:
    dirs = [d for d in REAL if d.is_dir()]
    if SHARED.is_dir():
        dirs += sorted(SHARED.glob("*/__consumer_offsets-*"))
    return dirs


# -- layouts and the partition function --------------------------------------------------------------


def test_partition_for_is_kafkas_string_hash() -> None:
    # Java: "".hashCode() == 0, "hello".hashCode() == 99162322, and "polygenelubricants".hashCode()
    # == Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0.
    assert partition_for("", 50) == 0
    assert partition_for("hello", 1000) == 99162322 % 1000
    assert partition_for("polygenelubricants", 7) == 0
    assert partition_for("\u00e9t\u00e9-\U0001f600", 50) == partition_for("\u00e9t\u00e9-\U0001f600", 50)
    # every group a real broker wrote sits in the partition Kafka's rule gives it (50 partitions)
    seen = 0
    for directory in _real_dirs():
        number = int(directory.name.rsplit("-", 1)[1])
        for record in _records(directory):
            record_type = _VERSION.unpack_from(record.key)[0]
            schemas = coordinator_record_schemas(record_type)
            if schemas is None or record_type > 2:
                continue
            reader = MessageReader(record.key)
            reader.fixed(_VERSION, "version")
            group = read_message(schemas[0], reader, record_type)["group"]
            assert partition_for(group, 50) == number, (group, directory)
            seen += 1
    assert seen > 0


def test_every_real_record_re_encodes_byte_for_byte() -> None:
    """Keys and values of real brokers' records decode and re-encode to the same bytes; the
    versions the coordinator writes (offset value 3 and 1, group value 3) through its own
    encoders."""
    through_encoders = 0
    for directory in _real_dirs():
        for record in _records(directory):
            record_type = _VERSION.unpack_from(record.key)[0]
            key_schema, value_schema = coordinator_record_schemas(record_type)
            reader = MessageReader(record.key)
            reader.fixed(_VERSION, "version")
            key = read_message(key_schema, reader, record_type)
            assert _VERSION.pack(record_type) + write_message(key_schema, key, record_type) == record.key
            if record_type in (0, 1):
                assert offset_commit_key(key["group"], key["topic"], key["partition"])[2:] == record.key[2:]
            if record.value is None:
                continue
            reader = MessageReader(record.value)
            version = reader.fixed(_VERSION, "version")
            value = read_message(value_schema, reader, version)
            assert _VERSION.pack(version) + write_message(value_schema, value, version) == record.value
            if record_type in (0, 1) and version in (1, 3):
                epoch = value["leaderEpoch"] if version == 3 else None
                expire = value["expireTimestamp"] if version == 1 else None
                encoded = offset_commit_value(value["offset"], None if epoch == -1 else epoch, value["metadata"],
                                              value["commitTimestamp"], expire)
                assert encoded == record.value
                through_encoders += 1
            if record_type == 2:
                assert group_metadata_key(key["group"]) == record.key
                if version == 3:
                    encoded = group_metadata_value(
                        value["protocolType"], value["generation"], value["protocol"], value["leader"],
                        value["currentStateTimestamp"], value["members"])
                    assert encoded == record.value
                    through_encoders += 1
    assert through_encoders > 0


def test_group_metadata_value_has_kafkas_layout() -> None:
    """GroupMetadataValue v3 spelled out by hand from Kafka's JSON schema."""
    member = {"memberId": "m", "groupInstanceId": None, "clientId": "c", "clientHost": "/h", "rebalanceTimeout": 5,
              "sessionTimeout": 6, "subscription": b"S", "assignment": b"A"}
    got = group_metadata_value("consumer", 7, "range", "m", 1234, [member])

    def s(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    expected = (
        struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 7) + s("range") + s("m") + struct.pack(">q", 1234)
        + struct.pack(">i", 1) + s("m") + struct.pack(">h", -1) + s("c") + s("/h") + struct.pack(">ii", 5, 6)
        + struct.pack(">i", 1) + b"S" + struct.pack(">i", 1) + b"A"
    )
    assert got == expected
    assert read_message(GROUP_METADATA_VALUE, MessageReader(got[2:]), 3)["members"][0]["groupInstanceId"] is None


# -- loading a real directory ------------------------------------------------------------------------


def _copy_as_full_topic(source: Path, log_dir: Path) -> None:
    """A real broker's partition copied beside the other 49 (empty), as a copy of a whole
    ``__consumer_offsets`` would be."""
    number = int(source.name.rsplit("-", 1)[1])
    for i in range(50):
        (log_dir / f"{CONSUMER_OFFSETS_TOPIC}-{i}").mkdir(parents=True)
    target = log_dir / source.name
    for f in source.iterdir():
        shutil.copy(f, target / f.name)
        (target / f.name).chmod(0o644)
    assert number < 50


@pytest.mark.timeout_guard(60)
def test_a_real_consumer_offsets_directory_loads_into_the_coordinator(tmp_path) -> None:
    source = REAL[0]
    _copy_as_full_topic(source, tmp_path)
    expected = committed_offsets(source)
    assert expected, "the sample holds committed offsets"
    group = next(iter(expected))[0]
    with Broker(tmp_path, config={"group.min.session.timeout.ms": "100"}) as broker:
        raw = Raw(broker)
        body = raw.call(p.ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": None})
        got = {(group, t["name"], q["partition_index"]): q["committed_offset"] for t in body["topics"]
               for q in t["partitions"]}
        assert got == {k: v.offset for k, v in expected.items()}
        listed = raw.call(p.ApiKey.LIST_GROUPS, 4, {"states_filter": []})["groups"]
        assert group in {g["group_id"] for g in listed}
        # a new commit for the group lands in Kafka's partition for it
        topic, partition = next(iter(expected))[1:]
        raw.call(p.ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": topic, "num_partitions": partition + 1,
                                                         "replication_factor": 1, "assignments": [], "configs": []}],
                                              "timeout_ms": 5000})
        body = raw.call(p.ApiKey.OFFSET_COMMIT, 2, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "committed_offset": 99,
                                                       "committed_metadata": "m"}]}]})
        assert body["topics"][0]["partitions"][0]["error_code"] == 0
        raw.close()
    reloaded = committed_offsets(tmp_path / source.name)
    assert reloaded[(group, topic, partition)].offset == 99
    assert reloaded[(group, topic, partition)].record_partition == partition_for(group, 50) == int(source.name[-2:])


# -- compaction and tombstones -------------------------------------------------------------------------


def _commit(raw: Raw, group: str, topic: str, offsets: dict[int, int], *, generation: int = -1,
            member: str = "", version: int = 2) -> list[int]:
    body = raw.call(p.ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member, "retention_time_ms": -1,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": q, "committed_offset": o, "committed_metadata": ""} for q, o in offsets.items()]}]})
    return [q["error_code"] for q in body["topics"][0]["partitions"]]


def _create(raw: Raw, topic: str, partitions: int) -> None:
    raw.call(p.ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                                                     "assignments": [], "configs": []}], "timeout_ms": 5000})


@pytest.mark.timeout_guard(90)
def test_compaction_keeps_the_latest_offset_per_group_topic_partition(tmp_path) -> None:
    config = {**FAST, "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "2048",
              "log.cleaner.backoff.ms": "20"}
    with Broker(tmp_path, config=config) as broker:
        raw = Raw(broker)
        _create(raw, "t", 3)
        for i in range(80):
            for group in ("g1", "g2"):
                assert _commit(raw, group, "t", {0: i, 1: 1000 + i, 2: 2000 + i}) == [0, 0, 0]
        log = broker.log(CONSUMER_OFFSETS_TOPIC, 0)
        # the log rolled several times (the active segment's base only grows; the segment count does
        # not, because the background cleaner may already be merging the cleaned ones)
        assert log.config.compact and log.active_segment.base_offset > 3 * 20
        written = log.log_end_offset

        def compacted() -> bool:  # everything below the active segment has been cleaned
            return log.cleaner_checkpoint == log.active_segment.base_offset

        wait_until(compacted, scaled(30), "the background cleaner compacted __consumer_offsets-0")
        assert sum(1 for _ in _records(log.directory)) < written / 2
        raw.close()
    loaded = read_consumer_offsets(tmp_path)
    assert {k: v.offset for k, v in loaded.offsets.items()} == {
        (g, "t", q): 79 + 1000 * q for g in ("g1", "g2") for q in range(3)}
    # per key, only the latest survives below the active segment
    keys: dict[bytes, int] = {}
    segments = sorted((tmp_path / f"{CONSUMER_OFFSETS_TOPIC}-0").glob("*.log"))
    for log_file in segments[:-1]:
        with FileRecords.open(log_file) as records:
            for batch in records.batches():
                for record in batch.records():
                    keys[record.key] = keys.get(record.key, 0) + 1
    assert keys and max(keys.values()) == 1
    # and the broker loads the compacted log back
    with Broker(tmp_path, config=config) as broker:
        raw = Raw(broker)
        body = raw.call(p.ApiKey.OFFSET_FETCH, 7, {"group_id": "g2", "topics": None, "require_stable": True})
        assert sorted((t["name"], q["partition_index"], q["committed_offset"]) for t in body["topics"]
                      for q in t["partitions"]) == [("t", 0, 79), ("t", 1, 1079), ("t", 2, 2079)]
        raw.close()


@pytest.mark.timeout_guard(60)
def test_delete_groups_and_offset_delete_write_tombstones(tmp_path) -> None:
    with Broker(tmp_path, config=FAST) as broker:
        raw = Raw(broker)
        _create(raw, "t", 2)
        assert _commit(raw, "gone", "t", {0: 5, 1: 6}) == [0, 0]
        assert _commit(raw, "kept", "t", {0: 7, 1: 8}) == [0, 0]
        body = raw.call(p.ApiKey.OFFSET_DELETE, 0, {"group_id": "kept", "topics": [
            {"name": "t", "partitions": [{"partition_index": 1}]}]})
        assert body["error_code"] == 0 and body["topics"][0]["partitions"][0]["error_code"] == 0
        body = raw.call(p.ApiKey.DELETE_GROUPS, 2, {"groups_names": ["gone", "never"]})
        assert [(r["group_id"], r["error_code"]) for r in body["results"]] == [
            ("gone", 0), ("never", p.ErrorCode.GROUP_ID_NOT_FOUND)]
        body = raw.call(p.ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "gone", "topics": None},
                                                               {"group_id": "kept", "topics": None}]})
        assert body["groups"][0]["topics"] == []
        assert [(q["partition_index"], q["committed_offset"]) for q in body["groups"][1]["topics"][0]["partitions"]] \
            == [(0, 7)]
        raw.close()
    loaded = read_consumer_offsets(tmp_path)
    assert {k: v.offset for k, v in loaded.offsets.items()} == {("kept", "t", 0): 7}
    tombstones = [r for d in tmp_path.glob(f"{CONSUMER_OFFSETS_TOPIC}-*") for r in _records(d) if r.value is None]
    assert len(tombstones) == 4  # gone's two offsets and its metadata, kept's t-1
    # kafkalog dump --offsets-decoder reads what the coordinator wrote
    segment = sorted((tmp_path / f"{CONSUMER_OFFSETS_TOPIC}-{partition_for('gone', 3)}").glob("*.log"))[0]
    out = subprocess.run([sys.executable, "-m", "kafkalog", "dump", "--files", str(segment), "--offsets-decoder"],
                         capture_output=True, text=True, check=True).stdout
    assert 'key: {"type":"1","data":{"group":"gone","topic":"t","partition":0}} payload: {"version":"3","data":' \
           '{"offset":5,"leaderEpoch":-1,"metadata":"","commitTimestamp":' in out
    assert 'key: {"type":"2","data":{"group":"gone"}} payload: <DELETE>' in out


# -- the protocol: joins, rebalances, static members ----------------------------------------------------


def _join(raw: Raw, group: str, member: str = "", *, version: int = 5, instance: str | None = None,
          session: int = 10_000, rebalance: int = 10_000, metadata: bytes = b"meta") -> dict:
    return raw.call(p.ApiKey.JOIN_GROUP, version, {
        "group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance, "member_id": member,
        "group_instance_id": instance, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": metadata}]})


def _sync(raw: Raw, group: str, generation: int, member: str, assignments: dict[str, bytes] | None = None,
          instance: str | None = None) -> dict:
    return raw.call(p.ApiKey.SYNC_GROUP, 3, {
        "group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]})


def _heartbeat(raw: Raw, group: str, generation: int, member: str, instance: str | None = None) -> int:
    return raw.call(p.ApiKey.HEARTBEAT, 3, {"group_id": group, "generation_id": generation, "member_id": member,
                                            "group_instance_id": instance})["error_code"]


@pytest.mark.timeout_guard(60)
def test_join_sync_heartbeat_and_a_rebalance(tmp_path) -> None:
    with Broker(tmp_path, config=FAST) as broker:
        a, b = Raw(broker), Raw(broker)
        first = _join(a, "g")
        assert first["error_code"] == p.ErrorCode.MEMBER_ID_REQUIRED and first["member_id"]
        ja = _join(a, "g", first["member_id"])
        assert ja["error_code"] == 0 and ja["leader"] == ja["member_id"] == first["member_id"]
        assert ja["generation_id"] == 1 and [m["metadata"] for m in ja["members"]] == [b"meta"]
        ma = ja["member_id"]
        assert _sync(a, "g", 1, ma, {ma: b"all"})["assignment"] == b"all"
        assert _heartbeat(a, "g", 1, ma) == 0
        assert _heartbeat(a, "g", 7, ma) == p.ErrorCode.ILLEGAL_GENERATION
        # b joins (v0: no MEMBER_ID_REQUIRED); its join waits until a rejoins
        result: dict = {}
        joiner = threading.Thread(target=lambda: result.update(_join(b, "g", version=0)))
        joiner.start()
        wait_until(lambda: _heartbeat(a, "g", 1, ma) == p.ErrorCode.REBALANCE_IN_PROGRESS, scaled(10),
                   "a heartbeat says a rebalance is in progress")
        ja2 = _join(a, "g", ma)
        joiner.join(scaled(10))
        assert ja2["generation_id"] == result["generation_id"] == 2 and ja2["leader"] == ma
        assert sorted(m["member_id"] for m in ja2["members"]) == sorted([ma, result["member_id"]])
        assert result["members"] == []
        mb = result["member_id"]
        synced: dict = {}
        waiter = threading.Thread(target=lambda: synced.update(_sync(b, "g", 2, mb)))
        waiter.start()
        assert _sync(a, "g", 2, ma, {ma: b"A", mb: b"B"})["assignment"] == b"A"
        waiter.join(scaled(10))
        assert synced["assignment"] == b"B"
        described = a.call(p.ApiKey.DESCRIBE_GROUPS, 4, {"groups": ["g"], "include_authorized_operations": False})
        group = described["groups"][0]
        assert (group["group_state"], group["protocol_data"]) == ("Stable", "range")
        assert sorted(m["member_assignment"] for m in group["members"]) == [b"A", b"B"]
        assert all(m["client_host"] == "/127.0.0.1" for m in group["members"])
        # b leaves: a is told to rejoin and ends up alone
        left = b.call(p.ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": [{"member_id": mb}]})
        assert left["error_code"] == 0 and left["members"][0]["error_code"] == 0
        assert _heartbeat(a, "g", 2, ma) == p.ErrorCode.REBALANCE_IN_PROGRESS
        ja3 = _join(a, "g", ma)
        assert ja3["generation_id"] == 3 and [m["member_id"] for m in ja3["members"]] == [ma]
        a.close()
        b.close()


@pytest.mark.timeout_guard(60)
def test_a_member_that_stops_heartbeating_is_removed(tmp_path) -> None:
    with Broker(tmp_path, config=FAST) as broker:
        a = Raw(broker)
        ja = _join(a, "g", version=3, session=300)
        ma = ja["member_id"]
        assert _sync(a, "g", 1, ma, {ma: b"x"})["error_code"] == 0

        def state() -> str:
            return a.call(p.ApiKey.DESCRIBE_GROUPS, 0, {"groups": ["g"]})["groups"][0]["group_state"]

        wait_until(lambda: state() == "Empty", scaled(10), "the silent member is removed")
        assert _heartbeat(a, "g", 1, ma) == p.ErrorCode.UNKNOWN_MEMBER_ID
        a.close()


@pytest.mark.timeout_guard(60)
def test_static_membership_rejoins_without_a_rebalance_and_fences_the_old_id(tmp_path) -> None:
    with Broker(tmp_path, config=FAST) as broker:
        a = Raw(broker)
        ja = _join(a, "g", instance="i-1")
        assert ja["error_code"] == 0  # a static member needs no MEMBER_ID_REQUIRED round
        old = ja["member_id"]
        assert _sync(a, "g", 1, old, {old: b"mine"}, instance="i-1")["assignment"] == b"mine"
        again = _join(a, "g", instance="i-1")  # the same instance restarted
        new = again["member_id"]
        assert new != old and again["generation_id"] == 1 and again["leader"] == new
        assert _heartbeat(a, "g", 1, old, instance="i-1") == p.ErrorCode.FENCED_INSTANCE_ID
        assert _heartbeat(a, "g", 1, new, instance="i-1") == 0
        assert _sync(a, "g", 1, new, instance="i-1")["assignment"] == b"mine"
        described = a.call(p.ApiKey.DESCRIBE_GROUPS, 4, {"groups": ["g"], "include_authorized_operations": False})
        member = described["groups"][0]["members"][0]
        assert (member["member_id"], member["group_instance_id"]) == (new, "i-1")
        left = a.call(p.ApiKey.LEAVE_GROUP, 4, {"group_id": "g", "members": [
            {"member_id": old, "group_instance_id": "i-1"}]})
        assert left["members"][0]["error_code"] == p.ErrorCode.FENCED_INSTANCE_ID
        a.close()


@pytest.mark.timeout_guard(30)
def test_group_requests_with_bad_arguments(tmp_path) -> None:
    with Broker(tmp_path, config=FAST) as broker:
        a = Raw(broker)
        assert _join(a, "", version=0)["error_code"] == p.ErrorCode.INVALID_GROUP_ID
        assert _join(a, "g", version=0, session=10)["error_code"] == p.ErrorCode.INVALID_SESSION_TIMEOUT
        assert _join(a, "g", "nobody", version=0)["error_code"] == p.ErrorCode.UNKNOWN_MEMBER_ID
        assert _sync(a, "g", 1, "nobody")["error_code"] == p.ErrorCode.UNKNOWN_MEMBER_ID
        assert _commit(a, "g", "missing-topic", {0: 1}) == [p.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert _commit(a, "g2", "missing-topic", {0: 1}, generation=3, member="m") == [p.ErrorCode.ILLEGAL_GENERATION]
        body = a.call(p.ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
        assert [(c["key"], c["error_code"], c["node_id"], c["port"]) for c in body["coordinators"]] == [
            ("a", 0, 0, broker.port), ("b", 0, 0, broker.port)]
        a.close()


# -- the admin clients ----------------------------------------------------------------------------------


@pytest.mark.skipif(AdminClient is None or KafkaAdminClient is None, reason="needs confluent-kafka and kafka-python")
@pytest.mark.timeout_guard(90)
def test_admin_clients_list_describe_delete_groups_and_offsets(tmp_path) -> None:
    with Broker(tmp_path, config=FAST) as broker:
        raw = Raw(broker)
        _create(raw, "t", 2)
        assert _commit(raw, "ga", "t", {0: 3, 1: 4}) == [0, 0]
        assert _commit(raw, "gb", "t", {0: 5}) == [0]
        raw.close()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_groups(request_timeout=scaled(10)).result()
        assert {g.group_id for g in listed.valid} == {"ga", "gb"}
        described = admin.describe_consumer_groups(["ga"], request_timeout=scaled(10))["ga"].result()
        assert described.group_id == "ga" and str(described.state).endswith("EMPTY")
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("ga")])["ga"].result()
        assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(0, 3), (1, 4)]
        admin.delete_consumer_groups(["gb"], request_timeout=scaled(10))["gb"].result()
        kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        try:
            assert [g["group_id"] for g in kadmin.list_groups()] == ["ga"]
            got = kadmin.list_group_offsets("ga")["ga"]
            assert {tp.partition: meta.offset for tp, meta in got.items()} == {0: 3, 1: 4}
            kadmin.alter_group_offsets("ga", {KTopicPartition("t", 0): OffsetAndMetadata(9, "", -1)})
            kadmin.delete_group_offsets("ga", [KTopicPartition("t", 1)])
            assert {tp.partition: m.offset for tp, m in kadmin.list_group_offsets("ga")["ga"].items()} == {0: 9}
            described = kadmin.describe_groups(["ga"])["ga"]
            assert described["group_state"] == "Empty"
            kadmin.delete_groups(["ga"])
            assert kadmin.list_groups() == []
        finally:
            kadmin.close()


@pytest.mark.timeout_guard(60)
def test_a_member_that_does_not_rejoin_in_the_rebalance_timeout_is_dropped(tmp_path) -> None:
    with Broker(tmp_path, config=FAST) as broker:
        a, b = Raw(broker), Raw(broker)
        ja = _join(a, "g", version=3, rebalance=300)
        ma = ja["member_id"]
        assert _sync(a, "g", 1, ma, {ma: b"x"})["error_code"] == 0
        jb = _join(b, "g", version=3, rebalance=300)  # a never rejoins: dropped after 300 ms
        assert jb["generation_id"] == 2 and jb["leader"] == jb["member_id"]
        assert [m["member_id"] for m in jb["members"]] == [jb["member_id"]]
        assert _heartbeat(a, "g", 1, ma) == p.ErrorCode.UNKNOWN_MEMBER_ID
        a.close()
        b.close()


@pytest.mark.timeout_guard(60)
def test_offsets_of_an_empty_group_expire_with_tombstones(tmp_path) -> None:
    with Broker(tmp_path, config=FAST) as broker:
        raw = Raw(broker)
        _create(raw, "t", 1)
        assert _commit(raw, "old", "t", {0: 5}) == [0]
        coordinator = broker._coordinator
        later = int(time.time() * 1000) + 8 * 24 * 3600 * 1000  # past offsets.retention.minutes (7 days)
        coordinator._clock = lambda: later
        expired = asyncio.run_coroutine_threadsafe(coordinator.expire_offsets(), broker._loop).result(scaled(10))
        assert expired == 1
        assert raw.call(p.ApiKey.LIST_GROUPS, 0, {})["groups"] == []
        raw.close()
    assert read_consumer_offsets(tmp_path).offsets == {}
    tombstones = [r for d in tmp_path.glob(f"{CONSUMER_OFFSETS_TOPIC}-*") for r in _records(d) if r.value is None]
    assert len(tombstones) == 2  # the offset, then the group


# -- round trips and garbage (hypothesis) -----------------------------------------------------------

_OPS = st.lists(st.tuples(
    st.sampled_from(["commit", "expiring", "delete", "group", "ungroup"]),
    st.sampled_from(["g1", "g\u00e9", ""]), st.sampled_from(["t", "u"]), st.integers(0, 2),
    st.integers(0, 2**63 - 1), st.one_of(st.none(), st.integers(0, 2**31 - 1)), st.text(max_size=6),
), max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_what_the_coordinator_writes_loads_back(tmp_path_factory, ops) -> None:
    """Offsets, tombstones and group metadata written with the coordinator's encoders load back
    (through ``kafkalog groups``' reader) as a dict model says."""
    directory = tmp_path_factory.mktemp("rt") / f"{CONSUMER_OFFSETS_TOPIC}-0"
    offsets: dict = {}
    groups: dict = {}
    log = Log.open(directory, LogConfig())
    try:
        for i, (op, group, topic, partition, offset, epoch, metadata) in enumerate(ops):
            builder = RecordBatchBuilder()
            if op in ("commit", "expiring"):
                expire = 10**12 + i if op == "expiring" else None
                builder.append(offset_commit_key(group, topic, partition),
                               offset_commit_value(offset, epoch, metadata, 10**12, expire), timestamp=10**12)
                offsets[(group, topic, partition)] = (offset, epoch if op == "commit" else None, metadata, expire)
            elif op == "delete":
                builder.append(offset_commit_key(group, topic, partition), None, timestamp=10**12)
                offsets.pop((group, topic, partition), None)
            elif op == "group":
                member = {"memberId": metadata, "groupInstanceId": None, "clientId": "c", "clientHost": "/h",
                          "rebalanceTimeout": 1, "sessionTimeout": 2, "subscription": b"s", "assignment": b""}
                builder.append(group_metadata_key(group),
                               group_metadata_value("consumer", partition, "range", metadata, 5, [member]),
                               timestamp=10**12)
                groups[group] = (partition, metadata)
            else:
                builder.append(group_metadata_key(group), None, timestamp=10**12)
                groups.pop(group, None)
            log.append(builder.build())
    finally:
        log.close()
    loaded = read_consumer_offsets(directory)
    assert {k: (v.offset, v.leader_epoch, v.metadata, v.expire_timestamp) for k, v in loaded.offsets.items()} == offsets
    assert {g: (m.generation, m.leader) for g, m in loaded.groups.items()} == groups
    assert all(m.members[0].member_id == m.leader for m in loaded.groups.values())


@settings(max_examples=200, deadline=None)
@given(key=st.binary(max_size=48), value=st.one_of(st.none(), st.binary(max_size=64)), flip=st.integers(0, 200))
def test_garbage_coordinator_records_raise_a_typed_error(key, value, flip) -> None:
    """Random keys and values, and real records with a byte flipped: a coordinator record that
    does not decode is an InvalidRecordError naming the partition and offset, never a crash."""
    real_key = offset_commit_key("group", "topic", 3)
    real_value = bytearray(offset_commit_value(7, 1, "meta", 10**12))
    real_value[flip % len(real_value)] ^= 0xFF
    for k, v in ((key, value), (real_key, bytes(real_value)), (group_metadata_key("g"), value)):
        loader = OffsetsLoader(ConsumerOffsets(), 4)
        try:
            loader.record(k, v, 9, file="seg.log", position=0)
        except InvalidRecordError as e:
            assert "__consumer_offsets-4" in str(e) and "offset 9" in str(e)


@pytest.mark.timeout_guard(20)
def test_stopping_answers_a_join_waiting_for_a_rebalance(tmp_path) -> None:
    broker = Broker(tmp_path, config=FAST).run_in_thread()
    a, b = Raw(broker), Raw(broker)
    ja = _join(a, "g", version=3, rebalance=600_000)
    assert _sync(a, "g", 1, ja["member_id"], {ja["member_id"]: b""})["error_code"] == 0
    result: dict = {}
    waiter = threading.Thread(target=lambda: result.update(_join(b, "g", version=3, rebalance=600_000)))
    waiter.start()  # waits for a, which never rejoins
    wait_until(lambda: _heartbeat(a, "g", 1, ja["member_id"]) == p.ErrorCode.REBALANCE_IN_PROGRESS, 10,
               "the rebalance started")
    broker.shutdown()  # must not wait for the rebalance timeout (10 minutes)
    waiter.join(scaled(10))
    assert result["error_code"] == p.ErrorCode.COORDINATOR_NOT_AVAILABLE
    a.close()
    b.close()
