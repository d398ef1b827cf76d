"""Kafka's replication guarantees on a ZooKeeper-coordinated cluster of three broker processes,
with real clients: these need the replication data plane (``kafkalog.broker._replica_manager``)
as well as the coordination, and skip, saying so, until both are present."""

from __future__ import annotations

import importlib.util
import threading

import pytest
from conftest import scaled, wait_until
from zk_cluster import (  # noqa: F401 - fixtures
    Cluster,
    cluster,
    cluster_factory,
    needs_zookeeper,
    wait_for_znode,
    zk,
    zookeeper,
)

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [
    needs_zookeeper,
    pytest.mark.skipif(importlib.util.find_spec("kafkalog.broker._replica_manager") is None,
                       reason="needs the replication data plane (kafkalog.broker._replica_manager, issue 26's "
                              "other half)"),
    pytest.mark.timeout_guard(300),
]


def _create(cluster: Cluster, name: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3, config=config)],
                        operation_timeout=scaled(20))[name].result(scaled(30))


def _state(zk, topic: str) -> dict:
    return wait_for_znode(zk, f"/brokers/topics/{topic}/partitions/0/state")


def _consume_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        wait_until(lambda: _poll_into(consumer, values) or len(values) >= expected, 60, f"{expected} records read")
    finally:
        consumer.close()
    return values


def _poll_into(consumer, values: list[bytes]) -> bool:
    message = consumer.poll(0.2)
    if message is not None and message.error() is None:
        values.append(message.value())
    return False


def test_acknowledged_records_survive_leader_kills(cluster, zk) -> None:
    _create(cluster, "jepsen", {"min.insync.replicas": "2"})
    acked: list[bytes] = []
    lock = threading.Lock()
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 2,
                                         "message.timeout.ms": int(scaled(60) * 1000)})

    def on_delivery(err, message) -> None:
        if err is None:
            with lock:
                acked.append(message.value())

    sent = 0

    def produce(n: int) -> None:
        nonlocal sent
        for _ in range(n):
            producer.produce("jepsen", value=b"%08d" % sent, on_delivery=on_delivery)
            sent += 1
            producer.poll(0)

    produce(200)
    for _ in range(2):  # kill the leader, keep producing, bring it back
        leader = _state(zk, "jepsen")["leader"]
        cluster.brokers[leader].kill()
        wait_for_znode(zk, "/brokers/topics/jepsen/partitions/0/state", lambda s: s["leader"] not in (leader, -1), 60)
        produce(200)
        cluster.brokers[leader].start()
        wait_for_znode(zk, "/brokers/topics/jepsen/partitions/0/state", lambda s: len(s["isr"]) == 3, 60)
    assert producer.flush(scaled(60)) == 0
    values = _consume_all(cluster.bootstrap, "jepsen", len(acked))
    assert values[: len(acked)] == sorted(acked)  # every acknowledged record, once and in order
    assert len(values) == len(set(values))


def test_acks_all_is_refused_with_two_brokers_down_and_acks_1_still_works(cluster, zk) -> None:
    _create(cluster, "fragile", {"min.insync.replicas": "2"})
    leader = _state(zk, "fragile")["leader"]
    for broker_id in {1, 2, 3} - {leader}:
        cluster.brokers[broker_id].kill()
    wait_for_znode(zk, "/brokers/topics/fragile/partitions/0/state", lambda s: s["isr"] == [leader], 60)
    errors: list = []
    strict = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                       "message.timeout.ms": 5000, "retries": 0})
    strict.produce("fragile", b"x", on_delivery=lambda err, m: errors.append(err))
    strict.flush(scaled(30))
    assert errors and errors[0] is not None and errors[0].name() == "NOT_ENOUGH_REPLICAS"
    loose = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1"})
    results: list = []
    loose.produce("fragile", b"y", on_delivery=lambda err, m: results.append(err))
    loose.flush(scaled(30))
    assert results == [None]
