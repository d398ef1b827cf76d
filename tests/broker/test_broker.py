"""kafkalog.broker with real Kafka clients: kafka-python and confluent-kafka (librdkafka).

The interop matrix produces 10,000 messages (keys, values, headers, timestamps) with each client,
codec and acknowledgement mode, reads them back with both clients (assign + seek) and checks
them exactly, the codec bits of the stored batches and the sendfile byte counter. Then: several
partitions, acks=0, ListOffsets, CreateTopics and its errors, long polls and fetches across
segments over a raw socket, a SIGKILL in the middle of acks=all produces with flush.messages=1,
a clean SIGTERM, and hostile clients (garbage, huge length prefixes, ../ topic names, versions
above the advertised maximum).
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from conftest import scaled

from kafkalog import protocol as p
from kafkalog.broker import METADATA_FILE, Broker, validate_topic_name
from kafkalog.memory_records_builder import RecordBatchBuilder
from kafkalog.compression import Compression
from kafkalog.log import CLEAN_SHUTDOWN_FILE, Log
from kafkalog.memory_records import MemoryRecords

try:  # the clients are test extras; the raw-protocol tests run without them
    import confluent_kafka
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
except ImportError:
    confluent_kafka = None
try:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition
except ImportError:
    KafkaProducer = None

needs_confluent = pytest.mark.skipif(confluent_kafka is None, reason="needs confluent-kafka (pip install 'confluent-kafka>=2.4')")
needs_kafka_python = pytest.mark.skipif(KafkaProducer is None, reason="needs kafka-python (pip install 'kafka-python>=3.0')")

N = 10_000
T0 = 1_700_000_000_000
CODECS = ["lz4", "zstd", "gzip", "snappy"]
MODES = ["acks1", "idempotent"]
CLIENTS = ["kafka-python", "confluent"]
CONSUMER_GROUP = "kafkalog-tests"  # librdkafka insists on one; only assign() is used


def messages(n: int = N, seed: int = 8) -> list[tuple[bytes, bytes, list[tuple[str, bytes]], int]]:
    """(key, value, headers, timestamp) for ``n`` messages; values of up to ~200 bytes, text
    with a random tail (compressible, so that clients keep the codec), a few empty."""
    rnd = random.Random(seed)
    return [
        (b"key-%d" % i, (b"payload %d " % i) * rnd.randint(0, 12) + rnd.randbytes(rnd.randint(0, 24)),
         [("trace", b"%d" % i), ("empty", b"")], T0 + i)
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("broker")) as b:
        yield b


# -- clients ---------------------------------------------------------------------------------------


def produce(client: str, broker: Broker, topic: str, msgs, *, codec: str = "none", mode: str = "acks1",
            acks: int | str | None = None) -> list[tuple[int, int]]:
    """Produce ``msgs`` and return (partition, offset) of each, from the delivery reports."""
    idempotent = mode == "idempotent"
    if client == "confluent":
        producer = Producer({
            "bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 20,
            "enable.idempotence": idempotent, "acks": acks if acks is not None else ("all" if idempotent else 1),
            "log_level": 3, "message.timeout.ms": 15000,
        })
        where: list[tuple[int, int] | None] = [None] * len(msgs)

        def report(i):
            def done(err, msg):
                assert err is None, err
                where[i] = (msg.partition(), msg.offset())
            return done

        for i, (key, value, headers, ts) in enumerate(msgs):
            while True:
                try:
                    producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts, on_delivery=report(i))
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
        assert producer.flush(15) == 0
        return where  # type: ignore[return-value]
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, compression_type=None if codec == "none" else codec, linger_ms=20,
        enable_idempotence=idempotent, acks=acks if acks is not None else ("all" if idempotent else 1),
        request_timeout_ms=10000, max_block_ms=10000,
    )
    try:
        futures = [producer.send(topic, key=k, value=v, headers=h, timestamp_ms=ts) for k, v, h, ts in msgs]
        producer.flush(15)
        if acks == 0:
            return []
        return [(m.partition, m.offset) for m in (f.get(timeout=15) for f in futures)]
    finally:
        producer.close(5)


def consume(client: str, broker: Broker, topic: str, partitions: list[int], count: int) -> list[tuple]:
    """Read ``count`` messages from offset 0 of ``partitions`` (assign + seek, no group):
    (partition, offset, key, value, headers, timestamp, create time?) in arrival order."""
    got: list[tuple] = []
    deadline = time.monotonic() + scaled(15)
    if client == "confluent":
        consumer = Consumer({
            "bootstrap.servers": broker.bootstrap, "group.id": CONSUMER_GROUP, "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": 50, "log_level": 3,
        })
        try:
            consumer.assign([CTopicPartition(topic, part, 0) for part in partitions])
            while len(got) < count and time.monotonic() < deadline:
                for m in consumer.consume(count, 0.2):
                    assert m.error() is None, m.error()
                    ts_type, ts = m.timestamp()
                    got.append((m.partition(), m.offset(), m.key(), m.value(), m.headers() or [], ts,
                                ts_type == confluent_kafka.TIMESTAMP_CREATE_TIME))
        finally:
            consumer.close()
        return got
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50,
                             request_timeout_ms=10000)
    try:
        tps = [KTopicPartition(topic, part) for part in partitions]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(200, max_records=count).values():
                got.extend((m.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp, m.timestamp_type == 0)
                           for m in records)
    finally:
        consumer.close()
    return got


def expected(msgs, where) -> list[tuple]:
    return [(part, offset, k, v, h, ts, True) for (k, v, h, ts), (part, offset) in zip(msgs, where)]


def stored_batches(broker: Broker, topic: str, partition: int = 0):
    return [batch for segment in broker.log(topic, partition).segments for batch in segment.log.batches()]


# -- the interop matrix ------------------------------------------------------------------------------


@needs_confluent
@needs_kafka_python
@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_interop_matrix(broker, client, codec, mode) -> None:
    topic = f"matrix-{client}-{codec}-{mode}"
    msgs = messages(seed=zlib.crc32(topic.encode()))
    where = produce(client, broker, topic, msgs, codec=codec, mode=mode)
    assert where == [(0, i) for i in range(N)]
    batches = stored_batches(broker, topic)
    # librdkafka silently falls back to no compression when an API it wants is missing. (Both
    # clients also send a batch uncompressed when the codec would make it larger.)
    compressed = sum(b.count for b in batches if b.compression.kafka_name == codec)
    assert {b.compression.kafka_name for b in batches} <= {codec, "none"} and compressed >= 0.95 * N
    assert sum(b.count for b in batches) == N and batches[-1].last_offset == N - 1
    if mode == "idempotent":
        assert {b.producer_id for b in batches} != {-1} and len({b.producer_id for b in batches}) == 1
        assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]
    else:
        assert {b.producer_id for b in batches} == {-1}
    before = broker.sendfile_bytes
    for reader in CLIENTS:  # the producing client and the other one
        assert consume(reader, broker, topic, [0], N) == expected(msgs, where), f"read by {reader}"
    stored = sum(b.size_in_bytes for b in batches)
    deadline = time.monotonic() + scaled(5)  # the broker counts once a send has returned
    while broker.sendfile_bytes - before < 2 * stored and time.monotonic() < deadline:
        time.sleep(0.01)
    assert broker.sendfile_bytes - before >= 2 * stored  # each reader got every byte by sendfile


@needs_confluent
@needs_kafka_python
@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENTS)
def test_three_partitions(broker, client) -> None:
    topic = f"three-{client}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)
    msgs = messages(seed=3)
    where = produce(client, broker, topic, msgs, codec="lz4")
    assert {part for part, _ in where} == {0, 1, 2}
    want = sorted(expected(msgs, where))
    for reader in CLIENTS:
        assert sorted(consume(reader, broker, topic, [0, 1, 2], N)) == want
    for part in range(3):
        log = broker.log(topic, part)
        assert log.log_end_offset == sum(1 for q, _ in where if q == part)


@needs_confluent
@needs_kafka_python
@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENTS)
def test_acks_zero(broker, client) -> None:
    topic = f"acks0-{client}"
    msgs = messages(1000, seed=0)
    produce(client, broker, topic, msgs, codec="lz4", acks=0)
    got = consume(client, broker, topic, [0], len(msgs))
    assert [(g[2], g[3]) for g in got] == [(k, v) for k, v, _, _ in msgs]


def test_acks_zero_gets_no_reply(broker) -> None:
    """An acks=0 Produce is not answered: the next reply on the connection is the next request's."""
    with RawClient(broker) as raw:
        raw.call(p.ApiKey.METADATA, 8, {"topics": [{"name": "acks0-raw"}], "allow_auto_topic_creation": True})
        batch = one_batch()
        raw.send(p.ApiKey.PRODUCE, 8, produce_body("acks0-raw", batch, acks=0), correlation_id=100)
        cid, body = raw.call(p.ApiKey.API_VERSIONS, 3, {"client_software_name": "raw",
                                                          "client_software_version": "1"}, correlation_id=101)
        assert cid == 101 and body["error_code"] == 0
    assert broker.log("acks0-raw", 0).log_end_offset == 1


def test_acks_zero_failure_closes_the_connection(broker) -> None:
    """Kafka closes an acks=0 producer's connection when its produce fails."""
    with RawClient(broker) as raw:
        batch = one_batch()
        raw.send(p.ApiKey.PRODUCE, 8, produce_body("no-such-topic-for-acks0", batch, acks=0))
        assert raw.closed_by_peer()


@needs_confluent
@needs_kafka_python
@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENTS)
def test_list_offsets(broker, client) -> None:
    topic = f"offsets-{client}"
    msgs = messages(2000, seed=5)
    produce(client, broker, topic, msgs, codec="zstd")
    if client == "confluent":
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": CONSUMER_GROUP, "log_level": 3})
        try:
            assert consumer.get_watermark_offsets(CTopicPartition(topic, 0), timeout=10) == (0, 2000)
            found = consumer.offsets_for_times(
                [CTopicPartition(topic, 0, T0 + 1234)], timeout=10)
            assert found[0].offset == 1234 and found[0].error is None
            late = consumer.offsets_for_times([CTopicPartition(topic, 0, T0 + 10**9)], timeout=10)
            assert late[0].offset == -1  # no record at or after it: Kafka answers offset -1
        finally:
            consumer.close()
    else:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
        try:
            tp = KTopicPartition(topic, 0)
            assert consumer.beginning_offsets([tp]) == {tp: 0}
            assert consumer.end_offsets([tp]) == {tp: 2000}
            found = consumer.offsets_for_times({tp: T0 + 1234})[tp]
            assert (found.offset, found.timestamp) == (1234, T0 + 1234)
            assert consumer.offsets_for_times({tp: T0 + 10**9})[tp] is None
        finally:
            consumer.close()


@needs_confluent
@needs_kafka_python
@pytest.mark.slow
def test_create_topics_and_its_errors(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    futures = admin.create_topics([
        NewTopic("created", 2, 1, config={"segment.bytes": "16384", "message.timestamp.type": "LogAppendTime"}),
        NewTopic("../escape", 1, 1),
        NewTopic("replicated", 1, 3),
        NewTopic("badconfig", 1, 1, config={"segment.bytes": "1"}),
        NewTopic("unknownconfig", 1, 1, config={"no.such.config": "1"}),
        NewTopic("zero", 0, 1),
    ], operation_timeout=10)
    assert futures["created"].result(10) is None  # (do not pop: the dict is confluent-kafka's own)
    codes = {}
    for name, future in futures.items():
        if name == "created":
            continue
        with pytest.raises(confluent_kafka.KafkaException) as info:
            future.result(10)
        codes[name] = info.value.args[0].code()
    assert codes == {"../escape": 17, "replicated": 38, "badconfig": 40, "unknownconfig": 40, "zero": 37}
    assert broker.topics["created"] == 2
    assert broker.log("created", 1).config.segment_bytes == 16384
    assert broker.log("created", 1).config.log_append_time
    with pytest.raises(confluent_kafka.KafkaException) as info:
        admin.create_topics([NewTopic("created", 2, 1)])["created"].result(10)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS
    assert not (broker.log_dir.parent / "escape-0").exists() and not list(broker.log_dir.glob("*escape*"))
    # kafka-python's admin client sees the same answers.
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import TopicAlreadyExistsError

    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        kadmin.create_topics([KNewTopic("created-by-kafka-python", 1, 1)])
        with pytest.raises(TopicAlreadyExistsError):
            kadmin.create_topics([KNewTopic("created", 1, 1)])
    finally:
        kadmin.close()
    assert "created-by-kafka-python" in broker.topics


# -- a raw client ----------------------------------------------------------------------------------


class RawClient:
    """A blocking Kafka protocol client on kafkalog.protocol (no decoding shortcuts)."""

    def __init__(self, broker: Broker | str) -> None:
        address = broker.bootstrap if isinstance(broker, Broker) else broker
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation_id = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: dict, correlation_id: int | None = None) -> int:
        if correlation_id is None:
            self.correlation_id += 1
            correlation_id = self.correlation_id
        self.sock.sendall(p.encode_request(api_key, version, correlation_id, body, client_id="raw-test"))
        return correlation_id

    def receive_frame(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def receive(self, api_key: int, version: int) -> tuple[int, dict]:
        return p.decode_response(api_key, version, self.receive_frame())

    def call(self, api_key: int, version: int, body: dict, correlation_id: int | None = None) -> tuple[int, dict]:
        sent = self.send(api_key, version, body, correlation_id)
        cid, response = self.receive(api_key, version)
        assert cid == sent
        return cid, response

    def _exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def closed_by_peer(self, timeout: float = 5) -> bool:
        """Whether the broker closes the connection (within ``timeout``) without sending anything."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False


def one_batch(value: bytes = b"v", **kwargs) -> MemoryRecords:
    builder = RecordBatchBuilder(2, **kwargs)
    builder.append(b"k", value, timestamp=T0)
    return builder.build()


def produce_body(topic: str, records: MemoryRecords | bytes, *, acks: int = -1, partition: int = 0,
                 transactional_id: str | None = None) -> dict:
    data = records.buffer if isinstance(records, MemoryRecords) else records
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": bytes(data)}]}]}


def fetch_body(parts: list[tuple[str, int, int]], *, max_bytes: int = 50 << 20, partition_max: int = 50 << 20,
               max_wait: int = 0, min_bytes: int = 1) -> dict:
    topics: dict[str, list] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append({"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                                             "log_start_offset": -1, "partition_max_bytes": partition_max})
    return {"replica_id": -1, "max_wait_ms": max_wait, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()], "forgotten_topics_data": [],
            "rack_id": ""}


def raw_produce(raw: RawClient, topic: str, values: list[bytes], *, codec: Compression = Compression.NONE,
                version: int = 8, **kwargs) -> dict:
    builder = RecordBatchBuilder(2, codec, **kwargs)
    for i, value in enumerate(values):
        builder.append(b"k%d" % i, value, timestamp=T0 + i)
    _, body = raw.call(p.ApiKey.PRODUCE, version, produce_body(topic, builder.build()))
    return body["responses"][0]["partition_responses"][0]


def create(raw: RawClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> int:
    _, body = raw.call(p.ApiKey.CREATE_TOPICS, 4, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}], "timeout_ms": 5000})
    return body["topics"][0]["error_code"]


# -- fetch semantics over the raw protocol ------------------------------------------------------------


def test_fetch_spans_segments_and_answers_every_partition(broker) -> None:
    with RawClient(broker) as raw:
        assert create(raw, "segmented", configs={"segment.bytes": "4096"}) == 0
        for i in range(40):
            assert raw_produce(raw, "segmented", [bytes([i]) * 300] * 3)["error_code"] == 0
        log = broker.log("segmented", 0)
        assert len(log.segments) > 5
        before = broker.sendfile_bytes
        _, body = raw.call(p.ApiKey.FETCH, 11, fetch_body([("segmented", 0, 0), ("segmented", 7, 0),
                                                           ("nowhere", 0, 0), ("segmented", 0, 10_000)]))
        parts = [part for t in body["responses"] for part in t["partitions"]]
        assert [(x["partition_index"], x["error_code"]) for x in parts] == [(0, 0), (7, 3), (0, 1), (0, 3)]  # grouped by topic
        first = parts[0]
        assert (first["high_watermark"], first["last_stable_offset"], first["log_start_offset"]) == (120, 120, 0)
        assert first["aborted_transactions"] is None and first["preferred_read_replica"] == -1
        records = MemoryRecords(bytes(first["records"]))
        offsets = [r.offset for r in records.records()]
        assert offsets == list(range(120))  # every segment, in one response
        deadline = time.monotonic() + scaled(5)  # the broker counts once its send has returned
        while broker.sendfile_bytes - before < log.size and time.monotonic() < deadline:
            time.sleep(0.01)
        assert broker.sendfile_bytes - before == len(first["records"]) == log.size


def test_fetch_limits(broker) -> None:
    """partition_max_bytes and max_bytes bound a response, but the first batch comes whole."""
    with RawClient(broker) as raw:
        assert create(raw, "limits") == 0
        for _ in range(5):
            raw_produce(raw, "limits", [b"x" * 1000] * 4)
        batch_size = stored_batches(broker, "limits")[0].size_in_bytes
        _, body = raw.call(p.ApiKey.FETCH, 11, fetch_body([("limits", 0, 0)], partition_max=1))
        assert len(body["responses"][0]["partitions"][0]["records"]) == batch_size
        # As Kafka's, a response may end inside a batch; clients drop the partial tail.
        _, body = raw.call(p.ApiKey.FETCH, 11, fetch_body([("limits", 0, 0)], partition_max=2 * batch_size + 10))
        records = body["responses"][0]["partitions"][0]["records"]
        assert len(records) == 2 * batch_size + 10 and len(list(MemoryRecords(bytes(records)).batches())) == 2
        # The first partition with data may exceed max_bytes; the next ones get what is left.
        _, body = raw.call(p.ApiKey.FETCH, 11, fetch_body([("limits", 0, 0), ("limits", 0, 8)], max_bytes=10))
        sizes = [len(x["records"]) for x in body["responses"][0]["partitions"]]
        assert sizes == [batch_size, 0]


def test_fetch_long_poll_is_woken_by_an_append(broker) -> None:
    with RawClient(broker) as raw, RawClient(broker) as other:
        assert create(raw, "longpoll") == 0
        raw_produce(raw, "longpoll", [b"first"])
        start = time.monotonic()
        _, body = raw.call(p.ApiKey.FETCH, 11, fetch_body([("longpoll", 0, 1)], max_wait=300))
        waited = time.monotonic() - start
        assert body["responses"][0]["partitions"][0]["records"] == b"" and 0.25 < waited < scaled(3)
        # A wait far longer than the test may take: only the append can end it (else the hang
        # guard fails the test), so no clock is read.
        raw.send(p.ApiKey.FETCH, 11, fetch_body([("longpoll", 0, 1)], max_wait=2**31 - 1))
        time.sleep(0.2)
        raw_produce(other, "longpoll", [b"second"])
        _, body = raw.receive(p.ApiKey.FETCH, 11)
        assert [r.value for r in MemoryRecords(bytes(body["responses"][0]["partitions"][0]["records"])).records()] == [
            b"second"]


def test_replies_go_back_in_request_order(broker) -> None:
    with RawClient(broker) as raw:
        assert create(raw, "ordered") == 0
        raw_produce(raw, "ordered", [b"x"])
        sent = [
            (raw.send(p.ApiKey.FETCH, 11, fetch_body([("ordered", 0, 1)], max_wait=200)), p.ApiKey.FETCH, 11),
            (raw.send(p.ApiKey.API_VERSIONS, 0, {}), p.ApiKey.API_VERSIONS, 0),
            (raw.send(p.ApiKey.METADATA, 1, {"topics": None}), p.ApiKey.METADATA, 1),
            (raw.send(p.ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "ordered", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                    "timestamp": -1}]}]}), p.ApiKey.LIST_OFFSETS, 5),
        ]
        for cid, key, version in sent:
            assert raw.receive(key, version)[0] == cid


# -- produce rules ----------------------------------------------------------------------------------


def test_produce_errors(broker) -> None:
    with RawClient(broker) as raw:
        assert create(raw, "rules") == 0
        ok = raw_produce(raw, "rules", [b"a", b"b"])
        assert (ok["error_code"], ok["base_offset"], ok["log_start_offset"]) == (0, 0, 0)
        assert raw_produce(raw, "rules", [b"c"])["base_offset"] == 2
        assert raw_produce(raw, "no-such-topic", [b"x"])["error_code"] == p.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # zstd needs Produce v7; two batches in one partition are refused (Kafka's validateRecords).
        assert raw_produce(raw, "rules", [b"z"], codec=Compression.ZSTD, version=6)["error_code"] == 76
        two = bytes(one_batch().buffer) * 2
        _, body = raw.call(p.ApiKey.PRODUCE, 8, produce_body("rules", two))
        assert body["responses"][0]["partition_responses"][0]["error_code"] == p.ErrorCode.INVALID_RECORD
        # A flipped bit: CORRUPT_MESSAGE with the reason in the v8 error message.
        bad = bytearray(one_batch(b"value").buffer)
        bad[-3] ^= 0x40
        _, body = raw.call(p.ApiKey.PRODUCE, 8, produce_body("rules", bytes(bad)))
        answer = body["responses"][0]["partition_responses"][0]
        assert answer["error_code"] == p.ErrorCode.CORRUPT_MESSAGE and "crc" in answer["error_message"].lower()
        _, body = raw.call(p.ApiKey.PRODUCE, 8, produce_body("rules", b"", acks=2))
        assert body["responses"][0]["partition_responses"][0]["error_code"] == p.ErrorCode.INVALID_REQUIRED_ACKS
        txn = one_batch(producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
        _, body = raw.call(p.ApiKey.PRODUCE, 8, produce_body("rules", txn, transactional_id="tx"))
        assert body["responses"][0]["partition_responses"][0]["error_code"] == 53
    assert broker.log("rules", 0).log_end_offset == 3


def test_idempotent_retry_is_answered_with_the_original_offset(broker) -> None:
    with RawClient(broker) as raw:
        _, init = raw.call(p.ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 1000})
        assert init["error_code"] == 0 and init["producer_epoch"] == 0
        pid = init["producer_id"]
        assert create(raw, "retries") == 0
        raw_produce(raw, "retries", [b"other"])
        first = raw_produce(raw, "retries", [b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)
        again = raw_produce(raw, "retries", [b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)
        assert (first["error_code"], again["error_code"]) == (0, 0) and first["base_offset"] == again["base_offset"] == 1
        gap = raw_produce(raw, "retries", [b"c"], producer_id=pid, producer_epoch=0, base_sequence=5)
        assert gap["error_code"] == p.ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert broker.log("retries", 0).log_end_offset == 3


def test_transactions_and_coordinators_are_refused_clearly(broker) -> None:
    with RawClient(broker) as raw:
        _, body = raw.call(p.ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": "tx", "transaction_timeout_ms": 1000})
        assert (body["error_code"], body["producer_id"]) == (p.ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
        # a transactional id's coordinator: a non-retriable error at once (clients fail fast)
        _, body = raw.call(p.ApiKey.FIND_COORDINATOR, 2, {"key": "tx", "key_type": 1})
        assert body["error_code"] == p.ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert "no transaction coordinator" in body["error_message"] and body["node_id"] == -1


def test_metadata(broker) -> None:
    with RawClient(broker) as raw:
        _, body = raw.call(p.ApiKey.METADATA, 8, {"topics": [{"name": "auto-made"}, {"name": "../x"}],
                                                  "allow_auto_topic_creation": True,
                                                  "include_topic_authorized_operations": True})
        assert body["brokers"] == [{"node_id": 0, "host": "127.0.0.1", "port": broker.port, "rack": None}]
        made, bad = body["topics"]
        assert made["error_code"] == 0 and [x["partition_index"] for x in made["partitions"]] == [0]
        assert made["partitions"][0]["leader_id"] == 0 and made["partitions"][0]["isr_nodes"] == [0]
        assert made["topic_authorized_operations"] > 0
        assert (bad["name"], bad["error_code"]) == ("../x", p.ErrorCode.INVALID_TOPIC_EXCEPTION)
        _, body = raw.call(p.ApiKey.METADATA, 8, {"topics": [{"name": "not-made"}], "allow_auto_topic_creation": False})
        assert body["topics"][0]["error_code"] == p.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        _, body = raw.call(p.ApiKey.METADATA, 0, {"topics": []})  # v0: empty means all
        assert "auto-made" in {t["name"] for t in body["topics"]} and "not-made" not in broker.topics


# -- hostile clients ----------------------------------------------------------------------------------


def _still_serves(broker: Broker) -> None:
    with RawClient(broker) as raw:
        _, body = raw.call(p.ApiKey.API_VERSIONS, 0, {})
        assert body["error_code"] == 0


@pytest.mark.parametrize("payload", [
    pytest.param(b"\x00\x00\x00\x10" + bytes(range(200, 216)), id="garbage"),
    pytest.param(b"\x7f\xff\xff\xff" + b"x" * 100, id="huge-length"),
    pytest.param(b"\xff\xff\xff\xfe", id="negative-length"),
    pytest.param(struct.pack(">ihhih", 8, 11, 5, 1, -1), id="unknown-api-key"),
    pytest.param(struct.pack(">ihhih", 8, 0, 9, 1, -1), id="produce-above-max"),
    pytest.param(struct.pack(">ihhih", 9, 1, 12, 1, -1) + b"\x00", id="fetch-above-max"),
    pytest.param(struct.pack(">ihhih", 8, 1, 3, 1, -1), id="fetch-below-min"),
    pytest.param(struct.pack(">ihhih", 12, 0, 8, 1, -1) + b"\x00\x00", id="truncated-body"),
])
def test_hostile_requests_close_only_their_connection(broker, payload) -> None:
    with RawClient(broker) as bystander, RawClient(broker) as hostile:
        bystander.call(p.ApiKey.API_VERSIONS, 0, {})
        hostile.sock.sendall(payload)
        assert hostile.closed_by_peer()
        _, body = bystander.call(p.ApiKey.METADATA, 1, {"topics": None})  # the other connection is untouched
        assert body["brokers"][0]["port"] == broker.port
    _still_serves(broker)


def test_fuzzed_bodies_never_disturb_the_broker(broker) -> None:
    """Valid headers of every served API and version, then random or cut bodies: each gets an
    answer or a closed connection, and the broker keeps serving."""
    rnd = random.Random(11)
    versions = [(spec.key, v) for spec in p.APIS.values() for v in range(spec.min_version, spec.max_version + 1)]
    for i in range(60):
        api_key, version = rnd.choice(versions)
        header = struct.pack(">hhih", api_key, version, i, 3) + b"fuz" + (b"\x00" if api_key == 18 and version == 3 else b"")
        body = rnd.randbytes(rnd.randint(0, 64))
        if i % 2:  # a valid body cut short, with a byte flipped
            valid = p.encode_body(api_key, version, {"topics": [], "topic_data": [], "client_software_name": "a",
                                                     "client_software_version": "1"})
            body = bytearray(valid[: rnd.randint(0, len(valid))]) if valid else bytearray(body)
            if body:
                body[rnd.randrange(len(body))] ^= 0xFF
        frame = header + bytes(body)
        with RawClient(broker) as raw:
            raw.sock.sendall(struct.pack(">i", len(frame)) + frame)
            raw.sock.settimeout(5)
            try:
                raw.receive_frame()
            except (ConnectionError, socket.timeout):
                pass
    _still_serves(broker)


def test_a_large_request_is_read_whole(broker) -> None:
    """A 3 MiB batch (above max.message.bytes) is read, refused with MESSAGE_TOO_LARGE, and the
    connection goes on."""
    with RawClient(broker) as raw:
        assert create(raw, "large") == 0
        answer = raw_produce(raw, "large", [os.urandom(1 << 20) for _ in range(3)])
        assert answer["error_code"] == p.ErrorCode.MESSAGE_TOO_LARGE
        assert raw_produce(raw, "large", [b"small"])["base_offset"] == 0


def test_a_client_that_stops_mid_request_does_not_block_others(broker) -> None:
    with RawClient(broker) as stuck:
        stuck.sock.sendall(struct.pack(">i", 1000) + b"\x00\x03")  # promises 1000 bytes, sends 2
        _still_serves(broker)
        stuck.sock.shutdown(socket.SHUT_WR)
        assert stuck.closed_by_peer()
    _still_serves(broker)


def test_api_versions_above_the_maximum_gets_the_v0_error(broker) -> None:
    with RawClient(broker) as raw:
        frame = struct.pack(">hhih", 18, 7, 99, 3) + b"raw" + b"\x00" + b"\x04new\x021\x00"
        raw.sock.sendall(struct.pack(">i", len(frame)) + frame)
        cid, body = raw.receive(p.ApiKey.API_VERSIONS, 0)
        assert cid == 99 and body["error_code"] == p.ErrorCode.UNSUPPORTED_VERSION
        assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 3}]
        _, body = raw.call(p.ApiKey.API_VERSIONS, 3, {"client_software_name": "raw", "client_software_version": "1.0"})
        assert body["api_keys"] == p.supported_api_versions()
        _, body = raw.call(p.ApiKey.API_VERSIONS, 3, {"client_software_name": "-bad", "client_software_version": "1"})
        assert body["error_code"] == p.ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("name", ["../x", "..", ".", "a/b", "x" * 250, "", "a\x00b", "tópico"])
def test_topic_names_cannot_escape_the_log_directory(broker, name) -> None:
    assert validate_topic_name(name) is not None
    before = set(os.listdir(broker.log_dir.parent))
    with RawClient(broker) as raw:
        assert create(raw, name) == p.ErrorCode.INVALID_TOPIC_EXCEPTION
        _, body = raw.call(p.ApiKey.METADATA, 8, {"topics": [{"name": name}], "allow_auto_topic_creation": True})
        assert body["topics"][0]["error_code"] == p.ErrorCode.INVALID_TOPIC_EXCEPTION
        assert raw_produce(raw, name, [b"x"])["error_code"] == p.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert set(os.listdir(broker.log_dir.parent)) == before
    assert name not in broker.topics


def test_topic_name_rules(broker) -> None:
    assert validate_topic_name("a" * 249) is None and validate_topic_name("Orders_v2.eu-1") is None
    with RawClient(broker) as raw:
        assert create(raw, "metrics_eu") == 0
        _, body = raw.call(p.ApiKey.CREATE_TOPICS, 4, {"topics": [{
            "name": "metrics.eu", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]})
        answer = body["topics"][0]
        assert answer["error_code"] == p.ErrorCode.INVALID_TOPIC_EXCEPTION and "collides" in answer["error_message"]


# -- lifecycle: state on disk, restart, SIGTERM, SIGKILL ------------------------------------------------


def test_state_survives_a_restart(tmp_path) -> None:
    with Broker(tmp_path) as first:
        with RawClient(first) as raw:
            assert create(raw, "kept", 2, {"segment.bytes": "20000"}) == 0
            ids = [raw.call(p.ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None})[1]["producer_id"] for _ in range(3)]
            raw_produce(raw, "kept", [b"x"] * 5)
    assert ids == [0, 1, 2]
    meta = json.loads((tmp_path / METADATA_FILE).read_text())
    assert meta["topics"]["kept"]["partitions"] == 2 and meta["next_producer_id_block"] == 1000
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    with Broker(tmp_path) as second:
        assert second.topics == {"kept": 2}
        assert second.log("kept", 0).config.segment_bytes == 20000
        assert second.log("kept", 0).log_end_offset == 5
        with RawClient(second) as raw:
            again = raw.call(p.ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None})[1]["producer_id"]
            assert again == 1000  # a new block: ids of the old one are never reused
            _, body = raw.call(p.ApiKey.METADATA, 2, {"topics": None})
            assert body["cluster_id"] == meta["cluster_id"]


def test_a_directory_without_broker_metadata_is_served_as_it_is(tmp_path) -> None:
    with Log.open(tmp_path / "legacy-3") as log:
        log.append(one_batch())
    with Broker(tmp_path) as broker:
        assert broker.topics == {"legacy": 4}  # partitions 0-2 are created beside the found one
        assert broker.log("legacy", 3).log_end_offset == 1
    with pytest.raises(Exception, match="in use by another broker"):
        with Broker(tmp_path) as one, Broker(tmp_path):
            del one


def _start_process(log_dir: Path, *config: str) -> tuple[subprocess.Popen, str]:
    args = [sys.executable, "-m", "kafkalog.broker", "--log-dir", str(log_dir), "--listen", "127.0.0.1:0",
            "--log-level", "WARNING"]
    for item in config:
        args += ["--config", item]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    ready, _, _ = select.select([proc.stdout], [], [], 15)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("listening on "):
        proc.kill()
        raise AssertionError(f"broker did not start: {line!r} {proc.stderr.read()}")
    address = line.split()[-1]
    assert line == f"listening on {address}\n" and address.startswith("127.0.0.1:")
    return proc, address


class _Address:
    def __init__(self, address: str) -> None:
        self.bootstrap = address


@needs_confluent
@needs_kafka_python
@pytest.mark.slow
def test_sigkill_during_acks_all_loses_no_acknowledged_message(tmp_path) -> None:
    proc, address = _start_process(tmp_path, "flush.messages=1")
    acked: dict[int, tuple[bytes, bytes]] = {}
    sent = [0]
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": address, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 2, "message.timeout.ms": 5000, "log_level": 0})

    def report(err, msg):
        if err is None:
            acked[msg.offset()] = (msg.key(), msg.value())

    def keep_producing() -> None:  # until after the kill, so appends are in flight when it lands
        i = 0
        while not stop.is_set():
            try:
                producer.produce("crash", key=b"%d" % i, value=b"value-%d" % i * 3, on_delivery=report)
                i += 1
            except BufferError:
                time.sleep(0.001)
            producer.poll(0)
        sent[0] = i
        producer.poll(0.5)  # the reports of what was acknowledged before the kill

    worker = threading.Thread(target=keep_producing)
    worker.start()
    try:
        deadline = time.monotonic() + scaled(15)
        while len(acked) < 3000 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(acked) >= 3000, "the producer did not get going"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        time.sleep(0.1)
    finally:
        stop.set()
        worker.join(15)
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
    acknowledged = dict(acked)
    producer.purge()
    producer.flush(0)
    i = sent[0]
    assert i > len(acknowledged)  # some were in flight
    proc, address = _start_process(tmp_path)
    try:
        end = Consumer({"bootstrap.servers": address, "group.id": CONSUMER_GROUP, "log_level": 3})
        low, high = end.get_watermark_offsets(CTopicPartition("crash", 0), timeout=10)
        end.close()
        assert high >= len(acknowledged)
        got = {m[1]: (m[2], m[3]) for m in consume("confluent", _Address(address), "crash", [0], high)}
        missing = [offset for offset in acknowledged if got.get(offset) != acknowledged[offset]]
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. offset {missing[0]}"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        proc.stdout.close()
        proc.stderr.close()


def test_sigterm_finishes_and_closes_every_log(tmp_path) -> None:
    proc, address = _start_process(tmp_path)
    try:
        with RawClient(address) as raw:
            assert create(raw, "graceful") == 0
            raw_produce(raw, "graceful", [b"x"] * 10)
            # A long poll in flight when the signal arrives is answered, not dropped.
            cid = raw.send(p.ApiKey.FETCH, 11, fetch_body([("graceful", 0, 10)], max_wait=30_000))
            time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            assert raw.receive(p.ApiKey.FETCH, 11)[0] == cid
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    with Log.open(tmp_path / "graceful-0") as log:
        assert log.log_end_offset == 10 and log.load_stats.recovered_segments == 0  # a clean shutdown


def test_in_process_stop_answers_in_flight_requests(tmp_path) -> None:
    broker = Broker(tmp_path).run_in_thread()
    try:
        with RawClient(broker) as raw:
            assert create(raw, "inflight") == 0
            raw_produce(raw, "inflight", [b"x"])
            cid = raw.send(p.ApiKey.FETCH, 11, fetch_body([("inflight", 0, 1)], max_wait=30_000))
            time.sleep(0.1)
            stopper = threading.Thread(target=broker.shutdown)
            stopper.start()
            assert raw.receive(p.ApiKey.FETCH, 11)[0] == cid
            stopper.join(15)
            assert raw.closed_by_peer()
    finally:
        broker.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_without_sendfile_the_bytes_are_copied(tmp_path, monkeypatch) -> None:
    """Where the event loop cannot sendfile, the same response goes out by pread + write."""
    import asyncio

    async def unavailable(self, *args, **kwargs):
        raise asyncio.SendfileNotAvailableError("not here")

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "sendfile", unavailable)
    with Broker(tmp_path) as broker, RawClient(broker) as raw:
        assert create(raw, "copied") == 0
        raw_produce(raw, "copied", [b"a" * 100, b"b" * 100])
        _, body = raw.call(p.ApiKey.FETCH, 11, fetch_body([("copied", 0, 0)]))
        records = bytes(body["responses"][0]["partitions"][0]["records"])
        assert [r.value for r in MemoryRecords(records).records()] == [b"a" * 100, b"b" * 100]
        deadline = time.monotonic() + scaled(5)  # the broker counts once its send has returned
        while broker.copied_bytes < len(records) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (broker.copied_bytes, broker.sendfile_bytes) == (len(records), 0)


def test_bad_state_stops_the_start_with_a_clear_error(tmp_path, capsys) -> None:
    from kafkalog.broker import main
    from kafkalog.errors import (
        CorruptCheckpointError,
        InvalidConfigError,
        KafkalogError,
    )

    (tmp_path / METADATA_FILE).write_text('{"version": 0, "topics": {"../x": {"partitions": 1}}}')
    with pytest.raises(CorruptCheckpointError, match="delete it to rediscover"):
        Broker(tmp_path).run_in_thread()
    assert main(["--log-dir", str(tmp_path), "--listen", "127.0.0.1:0"]) == 1
    assert "malformed broker metadata" in capsys.readouterr().err
    (tmp_path / METADATA_FILE).unlink()
    (tmp_path / "huge-99999").mkdir()
    with pytest.raises(KafkalogError, match="beyond this broker's limit"):
        Broker(tmp_path).run_in_thread()
    with pytest.raises(InvalidConfigError, match="num.partitions"):
        Broker(tmp_path, config={"num.partitions": "0"})
    with pytest.raises(InvalidConfigError, match="compression.type"):
        Broker(tmp_path, config={"compression.type": "gzip"})
