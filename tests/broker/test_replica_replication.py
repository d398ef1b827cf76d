"""Replication between kafkalog brokers in one process, driven by a test double of the
coordination layer (``replica_cluster.py``): followers catch up and hold the leader's bytes,
acks=all waits for the in-sync replicas, min.insync.replicas refuses, the ISR shrinks and
expands, a leader change truncates a diverging follower (KIP-101/320), and real clients
produce and consume across it."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from conftest import scaled, wait_until
from replica_cluster import Cluster
from test_broker import RawClient, fetch_body, one_batch, produce_body

from kafkalog import protocol as p
from kafkalog.broker import Broker

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "replicated"
#: Quick fetch rounds and retries, so tests wait for events rather than for defaults.
FAST = {"replica.fetch.wait.max.ms": "50", "replica.fetch.backoff.ms": "20"}
#: A short replica.lag.time.max.ms for the tests that shrink the ISR, longer on a slow machine
#: (a follower busy for longer would leave the ISR when the test does not expect it).
SHORT_LAG = str(int(scaled(0.4) * 1000))


@pytest.fixture
def cluster(tmp_path: Path):
    c = Cluster(tmp_path, 3, FAST)
    yield c
    c.stop_all()


def leader_of(cluster: Cluster, topic: str = TOPIC, index: int = 0) -> Broker:
    return cluster.running[cluster.record(topic, index).leader]


def caught_up(cluster: Cluster, ids: list[int], topic: str = TOPIC) -> bool:
    logs = [cluster.running[i].log(topic, 0) for i in ids]
    return len({(log.log_end_offset, log.high_watermark) for log in logs}) == 1


def segment_bytes(broker: Broker, topic: str = TOPIC) -> dict[str, bytes]:
    directory = broker.log(topic, 0).directory
    return {f.name: f.read_bytes() for f in sorted(directory.glob("*.log"))}


def produce_raw(broker: Broker, values: list[bytes], *, acks: int = -1, timeout_ms: int = 5000,
                topic: str = TOPIC) -> dict:
    with RawClient(broker) as raw:
        batch = one_batch(values[0])
        body = produce_body(topic, batch, acks=acks)
        body["timeout_ms"] = timeout_ms
        _, response = raw.call(p.ApiKey.PRODUCE, 8, body)
    return response["responses"][0]["partition_responses"][0]


def test_followers_catch_up_byte_for_byte_and_real_clients_see_committed_records(cluster: Cluster) -> None:
    for i in range(3):
        cluster.start(i)
    cluster.create_topic(TOPIC, [0, 1, 2])
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True,
                                         "acks": "all", "linger.ms": 5, "log_level": 3})
    errors = []
    for i in range(300):
        producer.produce(TOPIC, key=b"k%d" % (i % 7), value=b"v%d" % i, partition=0,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(scaled(20)) == 0 and not errors
    leader = leader_of(cluster)
    assert leader.log(TOPIC, 0).high_watermark == 300  # acks=all answered: every replica had them
    wait_until(lambda: caught_up(cluster, [0, 1, 2]), 10, "the followers reaching the leader's high watermark")
    reference = segment_bytes(cluster.running[0])
    assert reference and all(segment_bytes(cluster.running[i]) == reference for i in (1, 2))
    # A consumer (kafka-python) reads everything committed, from the leader the Metadata names.
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), enable_auto_commit=False, fetch_max_wait_ms=50)
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[bytes] = []
        deadline = time.monotonic() + scaled(15)
        while len(got) < 300 and time.monotonic() < deadline:
            for records in consumer.poll(200).values():
                got.extend(m.value for m in records)
        assert got == [b"v%d" % i for i in range(300)]
    finally:
        consumer.close()


def test_metadata_lists_every_broker_leader_replicas_isr_and_offline(cluster: Cluster) -> None:
    for i in range(3):
        cluster.start(i)
    cluster.create_topic(TOPIC, [1, 2, 0])
    cluster.stop(0)
    with RawClient(cluster.running[2]) as raw:
        _, meta = raw.call(p.ApiKey.METADATA, 8, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
                                                  "include_cluster_authorized_operations": False,
                                                  "include_topic_authorized_operations": False})
    assert sorted(b["node_id"] for b in meta["brokers"]) == [1, 2]
    (part,) = meta["topics"][0]["partitions"]
    assert (part["error_code"], part["leader_id"], part["leader_epoch"]) == (0, 1, 0)
    assert (part["replica_nodes"], sorted(part["isr_nodes"]), part["offline_replicas"]) == ([1, 2, 0], [0, 1, 2], [0])


def test_acks_all_waits_for_the_follower_and_times_out_without_it(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 2, {**FAST, "replica.lag.time.max.ms": "600000"})
    try:
        cluster.start(0)
        cluster.start(1)
        cluster.create_topic(TOPIC, [0, 1])
        leader = cluster.running[0]
        assert produce_raw(leader, [b"a"])["error_code"] == 0
        wait_until(lambda: caught_up(cluster, [0, 1]), 10, "the follower catching up")
        cluster.stop(1)  # still in the ISR (lag allowed: 10 minutes)
        answer = produce_raw(leader, [b"b"], timeout_ms=300)
        assert answer["error_code"] == p.ErrorCode.REQUEST_TIMED_OUT
        assert answer["base_offset"] == 1  # appended on the leader, not committed
        assert leader.log(TOPIC, 0).high_watermark == 1
        assert produce_raw(leader, [b"c"], acks=1)["error_code"] == 0  # the leader alone answers acks=1
        # Consumers read only below the high watermark; a replica's ListOffsets sees the log end.
        with RawClient(leader) as raw:
            _, fetched = raw.call(p.ApiKey.FETCH, 12, fetch_body([(TOPIC, 0, 0)]))
            out = fetched["responses"][0]["partitions"][0]
            assert out["high_watermark"] == 1 and out["error_code"] == 0
            assert [b.last_offset for b in _batches(out["records"])] == [0]
            for replica_id, expected in ((-1, 1), (1, 3)):
                _, listed = raw.call(p.ApiKey.LIST_OFFSETS, 5, {
                    "replica_id": replica_id, "isolation_level": 0,
                    "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                               "timestamp": -1}]}]})
                assert listed["topics"][0]["partitions"][0]["offset"] == expected
        # The follower comes back: it catches up, the high watermark passes everything.
        cluster.start(1)
        wait_until(lambda: leader.log(TOPIC, 0).high_watermark == 3, 10, "the high watermark reaching 3")
        assert produce_raw(leader, [b"d"])["error_code"] == 0
    finally:
        cluster.stop_all()


def test_a_waiting_produce_survives_a_new_epoch_of_the_same_leadership(tmp_path: Path) -> None:
    """ZooKeeper mode's controller bumps the leader epoch when it drops a dead follower from the
    ISR; Kafka's DelayedProduce asks only whether the broker still leads, so an acks=all produce
    waiting for that follower is answered NONE once the smaller ISR has it. A leadership lost
    meanwhile answers it NOT_LEADER_OR_FOLLOWER."""
    import threading

    cluster = Cluster(tmp_path, 2, {**FAST, "replica.lag.time.max.ms": "600000"})
    try:
        cluster.start(0)
        cluster.start(1)
        cluster.create_topic(TOPIC, [0, 1])
        leader = cluster.running[0]
        assert produce_raw(leader, [b"a"])["error_code"] == 0
        cluster.stop(1)  # still in the ISR (lag allowed: 10 minutes)
        answers: list[dict] = []
        waiting = threading.Thread(target=lambda: answers.append(
            produce_raw(leader, [b"b"], timeout_ms=int(scaled(30_000)))))
        waiting.start()
        wait_until(lambda: leader.log(TOPIC, 0).log_end_offset == 2, 10, "the record appended on the leader")
        before = cluster.record(TOPIC).leader_epoch
        cluster.elect(TOPIC, 0, 0, isr=[0])  # the same leader, the next epoch, the dead follower out
        waiting.join(scaled(30))
        assert answers and answers[0]["error_code"] == 0 and answers[0]["base_offset"] == 1
        assert leader.log(TOPIC, 0).high_watermark == 2
        # an append in the new epoch carries it
        assert produce_raw(leader, [b"c"])["error_code"] == 0
        assert leader.log(TOPIC, 0).leader_epoch_cache.latest_epoch == before + 1
        # the leadership lost while a produce waits: NOT_LEADER_OR_FOLLOWER
        cluster.start(1)
        wait_until(lambda: 1 in cluster.record(TOPIC).isr, 30, "broker 1 back in the ISR")
        cluster.stop(1)
        answers.clear()
        waiting = threading.Thread(target=lambda: answers.append(
            produce_raw(leader, [b"d"], timeout_ms=int(scaled(30_000)))))
        waiting.start()
        wait_until(lambda: leader.log(TOPIC, 0).log_end_offset == 4, 10, "the record appended on the leader")
        cluster.elect(TOPIC, 0, -1, isr=[0])  # offline (as if broker 0 lost its session)
        cluster.elect(TOPIC, 0, 0, isr=[0])  # and elected again
        waiting.join(scaled(30))
        assert answers and answers[0]["error_code"] == p.ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        cluster.stop_all()


def test_min_insync_replicas_isr_shrink_and_expand(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 2, {**FAST, "replica.lag.time.max.ms": SHORT_LAG, "min.insync.replicas": "2"})
    try:
        cluster.start(0)
        cluster.start(1)
        cluster.create_topic(TOPIC, [0, 1])
        leader = cluster.running[0]
        assert produce_raw(leader, [b"a"])["error_code"] == 0
        cluster.stop(1)
        # In the ISR when appended; the ISR shrinks before the high watermark passes it.
        answer = produce_raw(leader, [b"b"], timeout_ms=int(scaled(30_000)))
        assert answer["error_code"] == p.ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert cluster.record(TOPIC).isr == [0]
        # Now refused before the append; acks=1 still works.
        end = leader.log(TOPIC, 0).log_end_offset
        assert produce_raw(leader, [b"c"])["error_code"] == p.ErrorCode.NOT_ENOUGH_REPLICAS
        assert leader.log(TOPIC, 0).log_end_offset == end
        assert produce_raw(leader, [b"d"], acks=1)["error_code"] == 0
        # A real client sees Kafka's error.
        from kafka import KafkaProducer
        from kafka.errors import NotEnoughReplicasError

        producer = KafkaProducer(bootstrap_servers=leader.bootstrap, acks="all", retries=0, request_timeout_ms=10000)
        try:
            with pytest.raises(NotEnoughReplicasError):
                producer.send(TOPIC, b"refused", partition=0).get(timeout=scaled(10))
        finally:
            producer.close()
        # The follower returns and rejoins once it reaches the high watermark.
        cluster.start(1)
        wait_until(lambda: cluster.record(TOPIC).isr == [0, 1], 10, "the ISR expanding")
        assert produce_raw(leader, [b"e"])["error_code"] == 0
        wait_until(lambda: caught_up(cluster, [0, 1]), 10, "the follower catching up")
        assert segment_bytes(cluster.running[0]) == segment_bytes(cluster.running[1])
        history = cluster.record(TOPIC).history
        assert history[0] == [0] and history[-1] == [0, 1]  # shrunk, then expanded (alter_isr)
    finally:
        cluster.stop_all()


def test_leader_change_truncates_the_old_leaders_uncommitted_suffix(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 2, {**FAST, "replica.lag.time.max.ms": "600000"})
    try:
        cluster.start(0)
        cluster.start(1)
        cluster.create_topic(TOPIC, [0, 1])
        old = cluster.running[0]
        for v in (b"a", b"b"):
            assert produce_raw(old, [v])["error_code"] == 0
        wait_until(lambda: caught_up(cluster, [0, 1]), 10, "the follower catching up")
        cluster.stop(1)
        for v in (b"x", b"y", b"z"):  # on the old leader only: never committed
            assert produce_raw(old, [v], acks=1)["error_code"] == 0
        cluster.stop(0)
        new = cluster.start(1)
        cluster.elect(TOPIC, 0, 1, isr=[1])
        for v in (b"c", b"d"):
            assert produce_raw(new, [v])["error_code"] == 0
        # The old leader returns as a follower: its epoch-0 suffix diverges and is cut (KIP-320).
        cluster.start(0)
        wait_until(lambda: caught_up(cluster, [0, 1]), 10, "the old leader catching up")
        follower_log = cluster.running[0].log(TOPIC, 0)
        values = [r.value for b in _batches(follower_log.read(0, 1 << 20)) for r in b]
        assert values == [b"a", b"b", b"c", b"d"]
        assert follower_log.truncations >= 1
        assert segment_bytes(cluster.running[0]) == segment_bytes(cluster.running[1])
        assert [tuple(e) for e in follower_log.leader_epoch_cache.entries] == [(0, 0), (1, 2)]
        wait_until(lambda: cluster.record(TOPIC).isr == [0, 1], 10, "the old leader rejoining the ISR")
    finally:
        cluster.stop_all()


def test_fencing_and_offsets_for_leader_epoch(cluster: Cluster) -> None:
    cluster.start(0)
    cluster.start(1)
    cluster.create_topic(TOPIC, [0, 1])
    leader, follower = cluster.running[0], cluster.running[1]
    assert produce_raw(leader, [b"a"])["error_code"] == 0
    cluster.elect(TOPIC, 0, 0)  # epoch 1, same leader
    assert produce_raw(leader, [b"b"])["error_code"] == 0
    wait_until(lambda: caught_up(cluster, [0, 1]), 10, "the follower catching up")

    def fetch(broker: Broker, epoch: int, *, replica_id: int = -1, last_fetched_epoch: int = -1, offset: int = 0):
        body = fetch_body([(TOPIC, 0, offset)])
        body["replica_id"] = replica_id
        part = body["topics"][0]["partitions"][0]
        part["current_leader_epoch"], part["last_fetched_epoch"] = epoch, last_fetched_epoch
        with RawClient(broker) as raw:
            _, response = raw.call(p.ApiKey.FETCH, 12, body)
        return response["responses"][0]["partitions"][0]

    assert fetch(leader, 0)["error_code"] == p.ErrorCode.FENCED_LEADER_EPOCH
    assert fetch(leader, 2)["error_code"] == p.ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch(leader, 1)["error_code"] == 0
    # a replica's fetch from a follower is refused, naming the leader (KIP-320's current_leader) ...
    stale = fetch(follower, 1, replica_id=2)
    assert stale["error_code"] == p.ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert stale["current_leader"] == {"leader_id": 0, "leader_epoch": 1}
    # ... a consumer's Fetch v11+ is served by the follower (KIP-392's fetchOnlyLeader = false),
    # up to the follower's high watermark
    served = fetch(follower, 1)
    assert served["error_code"] == 0 and served["high_watermark"] == follower.log(TOPIC, 0).high_watermark
    # KIP-320: a fetch at offset 5 claiming epoch 0 diverges where epoch 0 ends (offset 1).
    diverging = fetch(leader, 1, replica_id=1, last_fetched_epoch=0, offset=2)
    assert diverging["diverging_epoch"] == {"epoch": 0, "end_offset": 1}
    assert fetch(leader, 1, replica_id=1, last_fetched_epoch=1, offset=2)["diverging_epoch"]["epoch"] == -1
    assert produce_raw(follower, [b"x"])["error_code"] == p.ErrorCode.NOT_LEADER_OR_FOLLOWER

    def epochs(broker: Broker, version: int, asked: int, current: int = -1, replica_id: int = 1) -> dict:
        body = {"replica_id": replica_id, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": current, "leader_epoch": asked}]}]}
        with RawClient(broker) as raw:
            _, response = raw.call(p.ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body)
        return response["topics"][0]["partitions"][0]

    assert (epochs(leader, 4, 0)["leader_epoch"], epochs(leader, 4, 0)["end_offset"]) == (0, 1)
    assert (epochs(leader, 4, 1)["leader_epoch"], epochs(leader, 4, 1)["end_offset"]) == (1, 2)
    assert epochs(leader, 4, 0, current=0)["error_code"] == p.ErrorCode.FENCED_LEADER_EPOCH
    assert epochs(leader, 4, 0, current=5)["error_code"] == p.ErrorCode.UNKNOWN_LEADER_EPOCH
    assert epochs(follower, 4, 0)["error_code"] == p.ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert epochs(follower, 2, 0)["end_offset"] == 1  # before v3 a request is a debugging one: followers answer
    assert epochs(leader, 0, 1)["end_offset"] == 2
    with RawClient(follower) as raw:
        _, deleted = raw.call(p.ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "offset": 1}]}], "timeout_ms": 1000})
        assert deleted["topics"][0]["partitions"][0]["error_code"] == p.ErrorCode.NOT_LEADER_OR_FOLLOWER
        _, listed = raw.call(p.ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert listed["topics"][0]["partitions"][0]["error_code"] == p.ErrorCode.NOT_LEADER_OR_FOLLOWER
    # DeleteRecords on the leader reaches the follower through its fetches.
    with RawClient(leader) as raw:
        _, deleted = raw.call(p.ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "offset": 1}]}], "timeout_ms": 1000})
        assert deleted["topics"][0]["partitions"][0] == {"partition_index": 0, "low_watermark": 1, "error_code": 0}
    assert produce_raw(leader, [b"c"])["error_code"] == 0
    wait_until(lambda: follower.log(TOPIC, 0).log_start_offset == 1, 10, "the follower's log start moving")


def test_idempotent_producer_continues_across_a_leader_change(cluster: Cluster) -> None:
    for i in range(3):
        cluster.start(i)
    cluster.create_topic(TOPIC, [0, 1, 2])
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True,
                                         "acks": "all", "linger.ms": 5, "log_level": 3,
                                         "topic.metadata.refresh.interval.ms": 200, "retry.backoff.ms": 20})
    delivered = []

    def report(err, msg):
        assert err is None, err
        delivered.append(msg.value())

    for i in range(50):
        producer.produce(TOPIC, value=b"%d" % i, partition=0, on_delivery=report)
    assert producer.flush(scaled(20)) == 0
    wait_until(lambda: caught_up(cluster, [0, 1, 2]), 10, "the followers catching up")
    changes: list[tuple] = []
    for i in (0, 1):
        cluster.running[i].replica_manager.add_role_listener(lambda *change, i=i: changes.append((i, *change)))
    cluster.elect(TOPIC, 0, 1)
    assert sorted(changes) == [(0, TOPIC, 0, False, 1), (1, TOPIC, 0, True, 1)]  # for a coordinator's load/unload
    for i in range(50, 100):
        producer.produce(TOPIC, value=b"%d" % i, partition=0, on_delivery=report)
    assert producer.flush(scaled(30)) == 0
    new = cluster.running[1].log(TOPIC, 0)
    values = [r.value for b in _batches(new.read(0, 1 << 22)) for r in b]
    assert values == [b"%d" % i for i in range(100)]  # each once, in order
    assert sorted(delivered, key=int) == values


def records_from(log, offset: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of ``log`` from ``offset`` to its end, across segments."""
    out = []
    while offset < log.log_end_offset:
        batches = _batches(log.read(offset, 1 << 20))
        out.extend((r.offset, r.value) for b in batches for r in b if r.offset >= offset)
        offset = batches[-1].last_offset + 1
    return out


def _batches(records) -> list:
    """The batches of a fetch answer or a log read (file slices or bytes)."""
    from kafkalog.memory_records import MemoryRecords

    if isinstance(records, (bytes, bytearray, memoryview)):
        return list(MemoryRecords(bytes(records)).batches())
    if isinstance(records, list):
        return [b for part in records for b in _batches(part)]
    return list(records.batches())


def test_follower_with_an_epoch_the_leader_never_had_truncates_in_two_rounds(tmp_path: Path, caplog) -> None:
    """KIP-279: the follower's log has epochs 0 and 2, the leader's 0 and 1. The leader's
    diverging epoch names epoch 1, unknown to the follower, which cuts to the end of its epoch 0
    and asks again with OffsetsForLeaderEpoch before fetching."""
    from kafkalog import Log, RecordBatchBuilder

    def write(broker_id: int, epochs: list[tuple[int, list[bytes]]]) -> None:
        log = Log.open(tmp_path / f"broker{broker_id}" / f"{TOPIC}-0", replicated=True)
        for epoch, values in epochs:
            for v in values:
                b = RecordBatchBuilder()
                b.append(b"k", v, timestamp=1_700_000_000_000)
                log.append(b.build(), leader_epoch=epoch)
        log.close()

    write(0, [(0, [b"a", b"b"]), (1, [b"c", b"d", b"e"])])
    write(1, [(0, [b"a", b"b"]), (2, [b"X", b"Y"])])
    caplog.set_level(logging.DEBUG, logger="kafkalog.broker")
    cluster = Cluster(tmp_path, 2, FAST)
    try:
        cluster.start(0)
        cluster.start(1)
        with cluster._lock:
            from replica_cluster import PartitionRecord

            cluster.partitions[(TOPIC, 0)] = PartitionRecord(0, 3, [0], [0, 1], 0)
        cluster.push(TOPIC, 0)
        wait_until(lambda: caught_up(cluster, [0, 1]), 10, "the follower agreeing with the leader")
        follower_log = cluster.running[1].log(TOPIC, 0)
        assert [r.value for b in _batches(follower_log.read(0, 1 << 20)) for r in b] == [b"a", b"b", b"c", b"d", b"e"]
        assert [tuple(e) for e in follower_log.leader_epoch_cache.entries] == [(0, 0), (1, 2)]
        assert segment_bytes(cluster.running[0]) == segment_bytes(cluster.running[1])
        assert any("where the latest epochs" in r.getMessage() for r in caplog.records)  # the second round
    finally:
        cluster.stop_all()


def test_stopping_brokers_stops_their_fetcher_threads(cluster: Cluster) -> None:
    import threading

    for i in range(3):
        cluster.start(i)
    cluster.create_topic(TOPIC, [0, 1, 2], partitions=2)
    cluster.elect(TOPIC, 1, 2)
    assert produce_raw(leader_of(cluster), [b"a"])["error_code"] == 0
    names = lambda: [t.name for t in threading.enumerate() if t.name.startswith("kafkalog-replica-fetcher")]  # noqa: E731
    wait_until(lambda: len(names()) == 4, 10, "a fetcher per (follower, leader) pair")
    # A leader change moves the partition between fetchers; an idle one stops.
    cluster.elect(TOPIC, 1, 0)
    wait_until(lambda: sorted(names()) == ["kafkalog-replica-fetcher-1-0", "kafkalog-replica-fetcher-2-0"], 10,
               "the fetchers from broker 2 stopping")
    cluster.stop_all()
    wait_until(lambda: names() == [], 10, "every fetcher thread ending")


def test_a_consumer_long_poll_is_answered_when_the_high_watermark_moves(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 2, {**FAST, "replica.fetch.wait.max.ms": "2000"})
    try:
        cluster.start(0)
        cluster.start(1)
        cluster.create_topic(TOPIC, [0, 1])
        leader = cluster.running[0]
        with RawClient(leader) as poller:
            sent = poller.send(p.ApiKey.FETCH, 12, fetch_body([(TOPIC, 0, 0)], max_wait=int(scaled(30_000))))
            assert produce_raw(leader, [b"a"], acks=1)["error_code"] == 0
            cid, fetched = poller.receive(p.ApiKey.FETCH, 12)
        assert cid == sent
        out = fetched["responses"][0]["partitions"][0]
        # Answered once the follower had the record, not at the append: the records are committed.
        assert out["high_watermark"] == 1
        assert [r.value for b in _batches(out["records"]) for r in b] == [b"a"]
    finally:
        cluster.stop_all()


def test_a_follower_behind_the_leaders_log_start_starts_again_there(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 2, {**FAST, "replica.lag.time.max.ms": SHORT_LAG, "segment.bytes": "1024",
                                     "retention.ms": "-1"})
    try:
        cluster.start(0)
        cluster.start(1)
        cluster.create_topic(TOPIC, [0, 1])
        leader = cluster.running[0]
        assert produce_raw(leader, [b"a"])["error_code"] == 0
        wait_until(lambda: caught_up(cluster, [0, 1]), 10, "the follower catching up")
        cluster.stop(1)
        wait_until(lambda: cluster.record(TOPIC).isr == [0], 10, "the ISR shrinking")
        for i in range(20):
            assert produce_raw(leader, [b"x" * 200 + b"%d" % i], acks=1)["error_code"] == 0
        with RawClient(leader) as raw:
            _, deleted = raw.call(p.ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "offset": 15}]}], "timeout_ms": 1000})
        assert deleted["topics"][0]["partitions"][0]["low_watermark"] == 15
        leader.log(TOPIC, 0).delete_old_segments()
        cluster.start(1)  # its log ends at 1, below the leader's start: OFFSET_OUT_OF_RANGE
        wait_until(lambda: caught_up(cluster, [0, 1]), 10, "the follower starting again at the leader's start")
        follower_log = cluster.running[1].log(TOPIC, 0)
        assert follower_log.log_start_offset == 15 and [s.base_offset for s in follower_log.segments][0] >= 15
        leader_log = leader.log(TOPIC, 0)
        assert records_from(follower_log, 15) == records_from(leader_log, 15)
        assert [offset for offset, _ in records_from(follower_log, 15)] == list(range(15, 21))
        wait_until(lambda: cluster.record(TOPIC).isr == [0, 1], 10, "the follower rejoining the ISR")
    finally:
        cluster.stop_all()


def test_a_replica_moved_away_stops_and_stop_partition_deletes(cluster: Cluster) -> None:
    import threading

    cluster.start(0)
    cluster.start(1)
    cluster.create_topic(TOPIC, [0, 1])
    assert produce_raw(cluster.running[0], [b"a"])["error_code"] == 0
    wait_until(lambda: caught_up(cluster, [0, 1]), 10, "the follower catching up")
    gone = cluster.running[1]
    directory = gone.log(TOPIC, 0).directory
    # Reassigned to broker 0 alone (Kafka's LeaderAndIsr without broker 1): it stops fetching.
    with cluster._lock:
        record = cluster.partitions[(TOPIC, 0)]
        record.replicas, record.isr, record.leader_epoch = [0], [0], record.leader_epoch + 1
    cluster.push(TOPIC, 0)
    wait_until(lambda: not [t for t in threading.enumerate() if t.name == "kafkalog-replica-fetcher-1-0"], 10,
               "broker 1's fetcher stopping")
    with RawClient(gone) as raw:  # no longer a replica: not even a consumer's v12 fetch is served
        _, fetched = raw.call(p.ApiKey.FETCH, 12, fetch_body([(TOPIC, 0, 0)]))
    assert fetched["responses"][0]["partitions"][0]["error_code"] == p.ErrorCode.NOT_LEADER_OR_FOLLOWER
    # StopReplica with delete: the last hosted partition of the topic goes, and the topic here.
    gone.replica_manager.stop_partition(TOPIC, 0, True)
    assert TOPIC not in gone.topics and not directory.exists()
    assert produce_raw(cluster.running[0], [b"b"])["error_code"] == 0  # ISR [0]: committed at once


def test_replicas_checkpoint_their_high_watermark(tmp_path: Path) -> None:
    from kafkalog import Log

    cluster = Cluster(tmp_path, 2, {**FAST, "replica.high.watermark.checkpoint.interval.ms": "50"})
    try:
        cluster.start(0)
        cluster.start(1)
        cluster.create_topic(TOPIC, [0, 1])
        for v in (b"a", b"b", b"c"):
            assert produce_raw(cluster.running[0], [v])["error_code"] == 0
        wait_until(lambda: caught_up(cluster, [0, 1]), 10, "the follower catching up")
        checkpoint = tmp_path / "broker1" / "replication-offset-checkpoint"
        wait_until(lambda: checkpoint.exists() and f"{TOPIC} 0 3" in checkpoint.read_text(), 10,
                   "the periodic checkpoint")  # written while running, not only at shutdown
        cluster.stop_all()
        for broker_id in (0, 1):
            log = Log.open(tmp_path / f"broker{broker_id}" / f"{TOPIC}-0", read_only=True, replicated=True)
            assert log.high_watermark == 3
            log.close()
    finally:
        cluster.stop_all()
