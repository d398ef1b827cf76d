"""The broker's admin APIs with real admin clients: kafka-python's KafkaAdminClient and
confluent-kafka's AdminClient create and delete topics, add partitions, describe and alter
topic configs (the change checked on the live log and after a restart) and delete records,
errors included. Then: a restart finishing an interrupted DeleteTopics, Produce v0-2 message
sets stored as v2 batches with their codec, kcat (Debian's librdkafka 2.0.2) compressing gzip,
snappy and lz4 once Produce is advertised from v0, and one log line per client for unsupported
requests.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import subprocess
import uuid

import pytest
from conftest import scaled, wait_until
from test_broker import RawClient, create, produce_body

from kafkalog import protocol as p
from kafkalog.broker import METADATA_FILE, Broker
from kafkalog.memory_records_builder import RecordBatchBuilder
from kafkalog.compression import Compression

kafka = pytest.importorskip("kafka", reason="needs kafka-python (pip install 'kafka-python>=3.0')")
confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka")
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KNewPartitions
from kafka.admin import NewTopic as KNewTopic

T0 = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path):
    with Broker(tmp_path / "logs", config={"log.retention.check.interval.ms": "3600000"}) as b:
        yield b


@pytest.fixture
def kadmin(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(scaled(30_000)))
    yield admin
    admin.close()


@pytest.fixture
def cadmin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def produce_values(broker: Broker, topic: str, values: list[bytes], partition: int = 0) -> None:
    with RawClient(broker.bootstrap) as raw:
        builder = RecordBatchBuilder(2)
        for i, value in enumerate(values):
            builder.append(b"k%d" % i, value, timestamp=T0 + i)
        _, body = raw.call(p.ApiKey.PRODUCE, 8, produce_body(topic, builder.build(), partition=partition))
        assert body["responses"][0]["partition_responses"][0]["error_code"] == 0


def result(futures: dict, key):
    return futures[key].result(timeout=scaled(30))


# -- kafka-python's KafkaAdminClient ----------------------------------------------------------------


def test_kafka_python_topics_partitions_and_records(broker, kadmin) -> None:
    kadmin.create_topics([KNewTopic("kp", 1, 1)])
    produce_values(broker, "kp", [b"v%d" % i for i in range(10)])
    # CreatePartitions: more works, the same or fewer is INVALID_PARTITIONS (37).
    kadmin.create_partitions({"kp": KNewPartitions(3)})
    assert broker.topics["kp"] == 3 and (broker.log_dir / "kp-2").is_dir()
    with pytest.raises(kafka.errors.InvalidPartitionsError):
        kadmin.create_partitions({"kp": KNewPartitions(2)})
    kadmin.create_partitions({"kp": KNewPartitions(5)}, validate_only=True)
    assert broker.topics["kp"] == 3
    # DeleteRecords: the low watermark is the new log start offset; past the end is refused.
    out = kadmin.delete_records({KTopicPartition("kp", 0): 4})
    assert out[KTopicPartition("kp", 0)]["low_watermark"] == 4
    assert broker.log("kp", 0).log_start_offset == 4
    with pytest.raises(kafka.errors.OffsetOutOfRangeError):
        kadmin.delete_records({KTopicPartition("kp", 0): 11})
    # DeleteTopics: renamed "-delete", then removed; unknown topics are UNKNOWN_TOPIC_OR_PARTITION.
    kadmin.delete_topics(["kp"])
    assert "kp" not in broker.topics
    wait_until(lambda: not [d for d in os.listdir(broker.log_dir) if d.startswith("kp-")], 30, "-delete dirs removed")
    assert "kp" not in json.loads((broker.log_dir / METADATA_FILE).read_text())["topics"]
    with pytest.raises(kafka.errors.UnknownTopicOrPartitionError):
        kadmin.delete_topics(["kp"])
    # A deleted topic can be created again, empty.
    kadmin.create_topics([KNewTopic("kp", 1, 1)])
    assert broker.log("kp", 0).log_end_offset == 0


def test_kafka_python_configs(broker, kadmin, tmp_path) -> None:
    kadmin.create_topics([KNewTopic("kpc", 1, 1, topic_configs={"retention.ms": "3600000"})])
    described = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kpc")], config_filter="all")
    configs = described["topic"]["kpc"]
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["cleanup.policy"]["value"] == "delete"
    # IncrementalAlterConfigs: SET, APPEND to a list, DELETE; in effect on the live log at once.
    kadmin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "kpc", {
        "segment.bytes": "1024", "cleanup.policy": ("APPEND", "compact"), "retention.ms": ("DELETE", None)})])
    log = broker.log("kpc", 0)
    assert log.config.segment_bytes == 1024 and set(log.config.cleanup_policy) == {"delete", "compact"}
    assert log.config.retention_ms == 7 * 24 * 3_600_000
    produce_values(broker, "kpc", [b"x" * 250 for _ in range(3)])
    produce_values(broker, "kpc", [b"y" * 250 for _ in range(3)])
    assert len(broker.log("kpc", 0).segments) == 2  # the new segment.bytes rolled the log
    with RawClient(broker.bootstrap) as raw:  # (kafka-python refuses unknown names itself)
        _, body = raw.call(p.ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"resources": [{
            "resource_type": 2, "resource_name": "kpc", "configs": [
                {"name": "no.such.config", "config_operation": 0, "value": "1"}]}], "validate_only": False})
        assert body["responses"][0]["error_code"] == p.ErrorCode.INVALID_CONFIG
        assert body["responses"][0]["error_message"] == "Unknown topic config name: no.such.config"
    # kafka-python reports per-resource errors in its result (and refuses unknown names itself).
    out = kadmin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "kpc", {"segment.bytes": "-5"})])
    assert out["topic"]["kpc"].startswith("[Error 40] InvalidConfigurationError: segment.bytes")
    out = kadmin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "kpc", {"segment.ms": ("APPEND", "5")})])
    assert "Error 40" in out["topic"]["kpc"] and "append is not allowed" in out["topic"]["kpc"]
    with RawClient(broker.bootstrap) as raw:  # unknown topics; broker settings are read-only here
        _, body = raw.call(p.ApiKey.ALTER_CONFIGS, 2, {"resources": [
            {"resource_type": 2, "resource_name": "nope", "configs": [{"name": "segment.bytes", "value": "2048"}]},
            {"resource_type": 4, "resource_name": "0", "configs": [{"name": "num.io.threads", "value": "4"}]}],
            "validate_only": False})
        assert [r["error_code"] for r in body["responses"]] == [
            p.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, p.ErrorCode.INVALID_REQUEST]
    broker_configs = kadmin.describe_configs([KConfigResource(ConfigResourceType.BROKER, "0")],
                                             config_filter="all")["broker"]["0"]
    assert broker_configs["num.io.threads"]["read_only"] is True
    assert broker_configs["log.retention.check.interval.ms"]["value"] == "3600000"
    assert json.loads((broker.log_dir / METADATA_FILE).read_text())["topics"]["kpc"]["configs"] == {
        "segment.bytes": "1024", "cleanup.policy": "delete,compact"}


def test_config_changes_survive_a_restart(tmp_path) -> None:
    with Broker(tmp_path) as broker, RawClient(broker.bootstrap) as raw:
        assert create(raw, "persisted") == 0
        _, body = raw.call(p.ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": 2, "resource_name": "persisted", "configs": [
                {"name": "retention.bytes", "config_operation": 0, "value": "12345"}]}], "validate_only": False})
        assert body["responses"][0]["error_code"] == 0
    with Broker(tmp_path) as broker:
        assert broker.log("persisted", 0).config.retention_bytes == 12345


# -- confluent-kafka's AdminClient ------------------------------------------------------------------


def test_confluent_admin_calls(broker, cadmin) -> None:
    result(cadmin.create_topics([NewTopic("ck", 2, 1)]), "ck")
    produce_values(broker, "ck", [b"v%d" % i for i in range(6)])
    result(cadmin.create_partitions([NewPartitions("ck", 4)]), "ck")
    assert broker.topics["ck"] == 4
    with pytest.raises(confluent_kafka.KafkaException) as e:
        result(cadmin.create_partitions([NewPartitions("ck", 3)]), "ck")
    assert e.value.args[0].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    # DescribeConfigs with synonyms and sources; AlterConfigs and IncrementalAlterConfigs.
    resource = ConfigResource("topic", "ck")
    entries = result(cadmin.describe_configs([resource]), resource)
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"
    change = ConfigResource("topic", "ck", incremental_configs=[
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)])
    result(cadmin.incremental_alter_configs([change]), change)
    assert broker.log("ck", 1).config.max_message_bytes == 2000
    entries = result(cadmin.describe_configs([resource]), resource)
    assert entries["max.message.bytes"].value == "2000"
    assert entries["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    with RawClient(broker.bootstrap) as raw:  # the new limit refuses a larger batch
        builder = RecordBatchBuilder(2)
        builder.append(b"k", b"z" * 3000, timestamp=T0)
        _, body = raw.call(p.ApiKey.PRODUCE, 8, produce_body("ck", builder.build()))
        assert body["responses"][0]["partition_responses"][0]["error_code"] == p.ErrorCode.MESSAGE_TOO_LARGE
    bad = ConfigResource("topic", "ck", incremental_configs=[
        ConfigEntry("bogus.key", "1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(confluent_kafka.KafkaException) as e:
        result(cadmin.incremental_alter_configs([bad]), bad)
    assert e.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    replace = ConfigResource("topic", "ck", set_config={"retention.ms": "60000"})
    result(cadmin.alter_configs([replace]), replace)  # AlterConfigs: the overrides become exactly this set
    assert broker.log("ck", 0).config.retention_ms == 60000 and broker.log("ck", 0).config.max_message_bytes != 2000
    # DeleteRecords, then DeleteTopics.
    deleted = cadmin.delete_records([CTopicPartition("ck", 0, 2)])
    low = deleted[CTopicPartition("ck", 0, 2)].result(timeout=scaled(30))
    assert low.low_watermark == 2 == broker.log("ck", 0).log_start_offset
    result(cadmin.delete_topics(["ck"]), "ck")
    assert "ck" not in broker.topics
    with pytest.raises(confluent_kafka.KafkaException) as e:
        result(cadmin.delete_topics(["ck"]), "ck")
    assert e.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


# -- deletion across restarts ---------------------------------------------------------------------


def test_a_restart_finishes_an_interrupted_delete(tmp_path) -> None:
    with Broker(tmp_path) as broker:
        with RawClient(broker.bootstrap) as raw:
            assert create(raw, "doomed", partitions=2) == 0
            assert create(raw, "kept") == 0
        produce_values(broker, "doomed", [b"a", b"b"])
    # A crash after the metadata write and the first rename: the topic is "deleting", one
    # partition directory already "-delete", the other not yet renamed.
    meta = json.loads((tmp_path / METADATA_FILE).read_text())
    del meta["topics"]["doomed"]
    meta["deleting"] = ["doomed"]
    (tmp_path / METADATA_FILE).write_text(json.dumps(meta))
    os.rename(tmp_path / "doomed-0", tmp_path / f"doomed-0.{uuid.uuid4().hex}-delete")
    with Broker(tmp_path) as broker:
        assert broker.topics == {"kept": 1}
        wait_until(lambda: sorted(d for d in os.listdir(tmp_path) if d.startswith("doomed")) == [],
                   30, "the interrupted deletion finished")
        assert "deleting" not in json.loads((tmp_path / METADATA_FILE).read_text())
    with Broker(tmp_path) as broker:
        assert broker.topics == {"kept": 1}


def test_deleting_a_topic_answers_its_long_polls_and_appends(broker) -> None:
    from test_broker import fetch_body

    with RawClient(broker.bootstrap) as raw, RawClient(broker.bootstrap) as poller:
        assert create(raw, "gone") == 0
        sent = poller.send(p.ApiKey.FETCH, 11, fetch_body([("gone", 0, 0)], max_wait=int(scaled(60_000))))
        wait_until(lambda: broker._topics["gone"].partitions[0].waiters, 30, "the long poll waits")
        _, body = raw.call(p.ApiKey.DELETE_TOPICS, 5, {"topic_names": ["gone"], "timeout_ms": 1000})
        assert body["responses"][0]["error_code"] == 0
        cid, fetched = poller.receive(p.ApiKey.FETCH, 11)
        assert cid == sent
        assert fetched["responses"][0]["partitions"][0]["error_code"] == p.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        builder = RecordBatchBuilder(2)
        builder.append(b"k", b"v", timestamp=T0)
        _, body = raw.call(p.ApiKey.PRODUCE, 8, produce_body("gone", builder.build()))
        assert body["responses"][0]["partition_responses"][0]["error_code"] == p.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_topic_deletion_rules(tmp_path) -> None:
    with Broker(tmp_path, config={"delete.topic.enable": "false"}) as broker, RawClient(broker.bootstrap) as raw:
        assert create(raw, "stays") == 0
        for version, code in ((2, p.ErrorCode.INVALID_REQUEST), (5, p.ErrorCode.TOPIC_DELETION_DISABLED)):
            _, body = raw.call(p.ApiKey.DELETE_TOPICS, version, {"topic_names": ["stays"], "timeout_ms": 1000})
            assert body["responses"][0]["error_code"] == code
    with Broker(tmp_path) as broker, RawClient(broker.bootstrap) as raw:
        _, body = raw.call(p.ApiKey.DELETE_TOPICS, 5, {"topic_names": ["stays", "stays", "__consumer_offsets"],
                                                      "timeout_ms": 1000})
        codes = [r["error_code"] for r in body["responses"]]
        assert codes == [p.ErrorCode.INVALID_REQUEST, p.ErrorCode.INVALID_REQUEST, p.ErrorCode.INVALID_TOPIC_EXCEPTION]
        assert broker.topics == {"stays": 1}


# -- Produce v0-2 and kcat ------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_produce_v0_to_v2_message_sets_are_stored_as_v2(broker, magic, codec) -> None:
    topic = f"legacy-{magic}-{codec.name.lower()}"
    with RawClient(broker.bootstrap) as raw:
        assert create(raw, topic) == 0
        for version in range(3):
            builder = RecordBatchBuilder(magic, codec)
            for i in range(3):
                builder.append(b"k%d" % i, b"value %d" % i, timestamp=T0 + i)
            _, body = raw.call(p.ApiKey.PRODUCE, version, produce_body(topic, builder.build()))
            part = body["responses"][0]["partition_responses"][0]
            assert (part["error_code"], part["base_offset"]) == (0, 3 * version)
    batches = [b for s in broker.log(topic, 0).segments for b in s.log.batches()]
    assert [(b.magic, b.compression, b.base_offset) for b in batches] == [(2, codec, 0), (2, codec, 3), (2, codec, 6)]
    records = [r for b in batches for r in b.records()]
    assert [(r.offset, r.key, r.value) for r in records] == [(i, b"k%d" % (i % 3), b"value %d" % (i % 3))
                                                            for i in range(9)]
    assert {r.timestamp for r in records} == ({-1} if magic == 0 else {T0, T0 + 1, T0 + 2})


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_kafka_python_speaking_kafka_0_10_is_stored_as_v2(broker, codec) -> None:
    """kafka-python told the broker is 0.10.1 sends magic-1 message sets with Produce v2."""
    topic = f"old-client-{codec}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 1), compression_type=codec,
                             linger_ms=20)
    for i in range(50):
        producer.send(topic, b"value %d" % i, key=b"k%d" % i, timestamp_ms=T0 + i)
    producer.flush(timeout=scaled(30))
    producer.close()
    batches = [b for s in broker.log(topic, 0).segments for b in s.log.batches()]
    assert {(b.magic, b.compression) for b in batches} == {(2, Compression[codec.upper()])}
    records = [r for b in batches for r in b.records()]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (i, b"k%d" % i, b"value %d" % i, T0 + i) for i in range(50)]


def test_produce_v2_corrupt_message_set_is_refused(broker) -> None:
    with RawClient(broker.bootstrap) as raw:
        assert create(raw, "legacy-corrupt") == 0
        builder = RecordBatchBuilder(1, Compression.GZIP)
        builder.append(b"k", b"v", timestamp=T0)
        data = bytearray(builder.build().buffer)
        data[-3] ^= 0xFF
        _, body = raw.call(p.ApiKey.PRODUCE, 2, produce_body("legacy-corrupt", bytes(data)))
        assert body["responses"][0]["partition_responses"][0]["error_code"] == p.ErrorCode.CORRUPT_MESSAGE
    assert broker.log("legacy-corrupt", 0).log_end_offset == 0


KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="needs kcat (Debian: apt-get install kcat)")
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_kcat_compresses(broker, tmp_path, codec) -> None:
    topic = f"kcat-{codec}"
    with RawClient(broker.bootstrap) as raw:
        assert create(raw, topic) == 0
    lines = b"".join(b"message number %d with some repeated text text text\n" % i for i in range(200))
    subprocess.run([KCAT, "-b", broker.bootstrap, "-t", topic, "-p", "0", "-P", "-z", codec,
                    "-X", "linger.ms=50"], input=lines, check=True, timeout=scaled(60), capture_output=True)
    batches = [b for s in broker.log(topic, 0).segments for b in s.log.batches()]
    assert batches and {b.compression for b in batches} == {Compression[codec.upper()]}
    # The codec bits (attributes & 7) in the segment file itself.
    data = (broker.log_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()
    attributes = struct.unpack_from(">h", data, 8 + 4 + 4 + 1 + 4)[0]
    assert attributes & 0x7 == Compression[codec.upper()].value
    values = [r.value for b in batches for r in b.records()]
    assert values == lines.splitlines()


# -- unsupported requests -------------------------------------------------------------------------


def test_unsupported_requests_are_logged_once_per_client(broker, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="kafkalog.broker")
    for _ in range(3):
        with RawClient(broker.bootstrap) as raw:
            raw.sock.sendall(_frame(61, 0, "curious"))
            assert raw.closed_by_peer(scaled(10))
    with RawClient(broker.bootstrap) as raw:
        raw.sock.sendall(_frame(61, 0, "another"))
        assert raw.closed_by_peer(scaled(10))
    with RawClient(broker.bootstrap) as raw:  # a feature: transactions, asked for twice
        for _ in range(2):
            _, body = raw.call(p.ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": "tx", "transaction_timeout_ms": 1000})
            assert body["error_code"] == p.ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    lines = [r.getMessage() for r in caplog.records if "does not support" in r.getMessage()]
    assert len([m for m in lines if "'curious'" in m]) == 1
    assert len([m for m in lines if "'another'" in m]) == 1
    assert "API key 61 v0" in lines[0] and "127.0.0.1" in lines[0]
    assert len([m for m in lines if "'raw-test'" in m and "transactions" in m]) == 1


def _frame(api_key: int, version: int, client_id: str) -> bytes:
    """A request frame (header v1, empty body) for an API the broker does not serve."""
    cid = client_id.encode()
    body = struct.pack(">hhih", api_key, version, 7, len(cid)) + cid
    return struct.pack(">i", len(body)) + body


def test_describe_configs_of_unsupported_resources(broker) -> None:
    with RawClient(broker.bootstrap) as raw:
        _, body = raw.call(p.ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 8, "resource_name": "0", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "17", "configuration_keys": None},
            {"resource_type": 2, "resource_name": "missing", "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False})
    assert [r["error_code"] for r in body["results"]] == [
        p.ErrorCode.INVALID_REQUEST, p.ErrorCode.INVALID_REQUEST, p.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_elect_leaders_on_one_node_is_never_needed(broker) -> None:
    """A single node leads every partition it has, and it is every partition's preferred
    replica: ElectLeaders (key 43) answers ELECTION_NOT_NEEDED, or UNKNOWN_TOPIC_OR_PARTITION."""
    with RawClient(broker.bootstrap) as raw:
        create(raw, "solo", 2)
        _, body = raw.call(p.ApiKey.ELECT_LEADERS, 1, {"election_type": 0, "timeout_ms": 1000, "topic_partitions": [
            {"topic": "solo", "partitions": [0, 1, 5]}]})
    assert body["error_code"] == 0
    [topic] = body["replica_election_results"]
    assert topic["topic"] == "solo"
    assert [(r["partition_id"], r["error_code"]) for r in topic["partition_result"]] == [
        (0, p.ErrorCode.ELECTION_NOT_NEEDED), (1, p.ErrorCode.ELECTION_NOT_NEEDED),
        (5, p.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
