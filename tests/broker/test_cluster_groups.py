"""Consumer groups across a ZooKeeper-coordinated cluster of three broker processes: a group's
coordinator is the leader of its ``__consumer_offsets`` partition, loads the group when it
becomes the leader and drops it when it stops; committed offsets survive the coordinator's
SIGKILL (Kafka's GroupCoordinator.onElection/onResignation, commits written with acks=-1)."""

from __future__ import annotations

import pytest
from conftest import scaled, wait_until
from test_broker import RawClient
from zk_cluster import (  # noqa: F401 - fixtures
    Cluster,
    cluster_factory,
    needs_zookeeper,
    wait_for_znode,
    zk,
    zookeeper,
)

from kafkalog.protocol import ApiKey, ErrorCode, partition_for

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [needs_zookeeper, pytest.mark.timeout_guard(400)]

#: A small __consumer_offsets keeps each leader's loads short; the mapping uses this count.
OFFSETS_PARTITIONS = 5
TOPIC = "orders"
GROUP = "billing"


@pytest.fixture
def groups_cluster(cluster_factory) -> Cluster:
    """Three brokers with a five-partition ``__consumer_offsets`` (RF 3, min ISR 2) and no
    preferred-leader moves, so leadership changes only when the test causes one."""
    for broker_id in (1, 2, 3):
        cluster_factory.add(broker_id, offsets_topic_num_partitions=str(OFFSETS_PARTITIONS),
                            min_insync_replicas="2", auto_leader_rebalance_enable="false",
                            group_initial_rebalance_delay_ms="0")
    admin = AdminClient({"bootstrap.servers": cluster_factory.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)],
                        operation_timeout=scaled(20))[TOPIC].result(scaled(30))
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster_factory.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(TOPIC, value=b"%d" % i)
    assert producer.flush(scaled(30)) == 0
    return cluster_factory


def _offsets_state(zk) -> dict:
    """The state znode of the group's ``__consumer_offsets`` partition, once it has a leader."""
    p = partition_for(GROUP, OFFSETS_PARTITIONS)
    return wait_for_znode(zk, f"/brokers/topics/__consumer_offsets/partitions/{p}/state",
                          lambda s: s["leader"] > 0, scaled(30))


def _consumer(bootstrap: str) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000})


def _committed(bootstrap: str) -> int | None:
    """The group's committed offset of orders-0 (confluent-kafka; None while unavailable)."""
    consumer = _consumer(bootstrap)
    try:
        tp = consumer.committed([confluent_kafka.TopicPartition(TOPIC, 0)], timeout=scaled(5))[0]
    except confluent_kafka.KafkaException:
        return None
    finally:
        consumer.close()
    return None if tp.error is not None or tp.offset < 0 else tp.offset


def _commit(bootstrap: str, offset: int) -> bool:
    consumer = _consumer(bootstrap)
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, offset)], asynchronous=False)
        return True
    except confluent_kafka.KafkaException:
        return False  # the coordinator moved meanwhile: the client's retry is the test's loop
    finally:
        consumer.close()


def _raw_commit(address: str, offset: int) -> int:
    """A standalone OffsetCommit v2 (generation -1) of orders-0 sent to one broker; its code."""
    with RawClient(address) as client:
        _, response = client.call(ApiKey.OFFSET_COMMIT, 2, {
            "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1, "topics": [{"name": TOPIC, "partitions": [{
                "partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                "commit_timestamp": -1, "committed_metadata": ""}]}]})
    return response["topics"][0]["partitions"][0]["error_code"]


def _raw_fetch(address: str) -> tuple[int, int]:
    """OffsetFetch v3 of orders-0 from one broker: (error code, committed offset)."""
    with RawClient(address) as client:
        _, response = client.call(ApiKey.OFFSET_FETCH, 3, {
            "group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]})
    if response["error_code"] != ErrorCode.NONE:
        return response["error_code"], -1
    return ErrorCode.NONE, response["topics"][0]["partitions"][0]["committed_offset"]


def test_committed_offsets_survive_the_coordinators_kill(groups_cluster, zk) -> None:
    cluster = groups_cluster
    # a consumer of the group reads and commits (confluent-kafka finds the coordinator itself)
    consumer = _consumer(cluster.bootstrap)
    consumer.subscribe([TOPIC])
    read = []
    try:
        wait_until(lambda: _read_into(consumer, read) or len(read) >= 7, 60, "7 records read")
        consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 7)], asynchronous=False)
    finally:
        consumer.close()
    assert _committed(cluster.bootstrap) == 7

    old = _offsets_state(zk)
    coordinator = old["leader"]
    survivors = [b for b in cluster.brokers if b != coordinator]
    cluster.brokers[coordinator].kill()
    # the controller elects a new leader of the group's partition from its ISR
    new = wait_for_znode(zk, f"/brokers/topics/__consumer_offsets/partitions/"
                             f"{partition_for(GROUP, OFFSETS_PARTITIONS)}/state",
                         lambda s: s["leader"] in survivors and s["leader_epoch"] > old["leader_epoch"], scaled(60))
    new_coordinator = cluster.brokers[new["leader"]]

    # the new coordinator has loaded the acknowledged commit (confluent-kafka and kafka-python)
    wait_until(lambda: _committed(cluster.bootstrap) == 7, 60, "the commit read from the new coordinator")
    kp = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        assert kp.committed(kafka.TopicPartition(TOPIC, 0)) == 7
        # a commit after the move is served by the new coordinator
        kp.commit({kafka.TopicPartition(TOPIC, 0): kafka.OffsetAndMetadata(12, "", -1)})
        assert kp.committed(kafka.TopicPartition(TOPIC, 0)) == 12
    finally:
        kp.close()
    assert _raw_fetch(new_coordinator.address) == (ErrorCode.NONE, 12)
    # the other survivor is a follower of the partition: NOT_COORDINATOR, and never writes it
    other = next(cluster.brokers[b] for b in survivors if b != new["leader"])
    assert _raw_fetch(other.address)[0] == ErrorCode.NOT_COORDINATOR
    assert _raw_commit(other.address, 99) == ErrorCode.NOT_COORDINATOR

    # the old coordinator comes back as a follower: it catches up and answers NOT_COORDINATOR
    cluster.brokers[coordinator].start()
    wait_for_znode(zk, f"/brokers/topics/__consumer_offsets/partitions/{partition_for(GROUP, OFFSETS_PARTITIONS)}"
                       "/state", lambda s: coordinator in s["isr"], scaled(60))
    restarted = cluster.brokers[coordinator].address
    assert _raw_fetch(restarted)[0] == ErrorCode.NOT_COORDINATOR
    assert _raw_commit(restarted, 99) == ErrorCode.NOT_COORDINATOR
    assert _committed(cluster.bootstrap) == 12


def test_a_coordinator_that_loses_leadership_answers_not_coordinator(groups_cluster, zk) -> None:
    cluster = groups_cluster
    wait_until(lambda: _commit(cluster.bootstrap, 3), 60, "a first commit")
    state = _offsets_state(zk)
    coordinator = cluster.brokers[state["leader"]]
    wait_until(lambda: _raw_fetch(coordinator.address) == (ErrorCode.NONE, 3), 30, "the coordinator serving")
    # a controlled shutdown moves its leaderships away before it exits: the broker resigns
    # (the group's requests to it now get NOT_COORDINATOR), then stops
    assert coordinator.terminate() == 0
    moved = wait_for_znode(zk, f"/brokers/topics/__consumer_offsets/partitions/"
                               f"{partition_for(GROUP, OFFSETS_PARTITIONS)}/state",
                           lambda s: s["leader"] not in (-1, state["leader"]), scaled(60))
    # the commit made after the move is served (and kept) by the new leader
    wait_until(lambda: _commit(cluster.bootstrap, 9), 60, "a commit after the move")
    assert _raw_fetch(cluster.brokers[moved["leader"]].address) == (ErrorCode.NONE, 9)
    coordinator.start()
    wait_until(lambda: _raw_fetch(coordinator.address)[0] == ErrorCode.NOT_COORDINATOR, 30,
               "the restarted broker answering NOT_COORDINATOR")
    assert _raw_commit(coordinator.address, 99) == ErrorCode.NOT_COORDINATOR
    assert _committed(cluster.bootstrap) == 9


def _read_into(consumer, values: list) -> bool:
    message = consumer.poll(0.2)
    if message is not None and message.error() is None:
        values.append(message.value())
    return False
