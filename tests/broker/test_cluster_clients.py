"""Real clients in a consumer group on a ZooKeeper-coordinated cluster of three broker processes,
across a SIGKILL of a partition's leader and, separately, of the group's coordinator (issue 26).

For kafka-python, confluent-kafka (librdkafka), aiokafka and kafkajs (from npm, when ``node`` and
``npm`` exist), each client both produces (acks=all, idempotent) and consumes in a group, through
the member processes of tests/broker/group_member.py / group_member.js. The topic has three
partitions, replication factor 3 and min.insync.replicas=2, so every acknowledged record is on
two brokers at least. The clients must find the new leader (NOT_LEADER_OR_FOLLOWER, a broker
gone, metadata refreshed) and the new coordinator (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS) by themselves; in the end every acknowledged record was consumed at
least once, the committed offsets after the kills are at least those before, and a fresh member
of the group resumes from them.
"""

from __future__ import annotations

import pytest
from conftest import scaled, wait_until
from test_groups_clients import CLIENTS, Member, client, kafkajs_modules  # noqa: F401 - fixtures
from zk_cluster import (  # noqa: F401 - fixtures
    Cluster,
    cluster_factory,
    needs_zookeeper,
    wait_for_znode,
    zk,
    zookeeper,
)

from kafkalog.protocol import partition_for

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [needs_zookeeper]

#: A small __consumer_offsets keeps each leader's loads short.
OFFSETS_PARTITIONS = 3
PARTITIONS = 3
BATCH = 30
SESSION_MS = 6000


@pytest.fixture
def clients_cluster(cluster_factory) -> Cluster:
    """Three brokers; ``__consumer_offsets`` with three partitions (RF 3), min ISR 2, and no
    preferred-leader moves, so leadership changes only when the test causes one."""
    for broker_id in (1, 2, 3):
        cluster_factory.add(broker_id, offsets_topic_num_partitions=str(OFFSETS_PARTITIONS),
                            min_insync_replicas="2", auto_leader_rebalance_enable="false",
                            group_initial_rebalance_delay_ms="0")
    return cluster_factory


def _state(zk, topic: str, partition: int, predicate=lambda s: s["leader"] > 0) -> dict:
    return wait_for_znode(zk, f"/brokers/topics/{topic}/partitions/{partition}/state", predicate, scaled(60))


def _full_isr(zk, topic: str, partitions: int) -> None:
    """Wait until every partition of ``topic`` has a leader and all three replicas in its ISR."""
    for p in range(partitions):
        _state(zk, topic, p, lambda s: s["leader"] > 0 and len(s["isr"]) == 3)


def _committed(bootstrap: str, topic: str, group: str) -> dict[int, int] | None:
    """The group's committed offsets of ``topic`` read with confluent-kafka (an OffsetFetch sent to
    the coordinator it finds), or None while the coordinator cannot answer."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0,
                                         "enable.auto.commit": False})
    try:
        tps = consumer.committed([confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)],
                                 timeout=scaled(5))
    except confluent_kafka.KafkaException:
        return None
    finally:
        consumer.close()
    if any(tp.error is not None for tp in tps):
        return None
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


def _commit(member: Member) -> dict[int, int]:
    """The member commits what it consumed, retried (bounded) while its client reports a failure."""
    result: list[dict[int, int]] = []

    def attempt() -> bool:
        got = member.try_commit()
        if got is not None:
            result.append(got)
        return got is not None

    wait_until(attempt, 90, "a commit accepted")
    return result[0]


def _produced(member: Member, mark: int) -> list[int]:
    outcome = member.produced(mark)
    # acks=all with min ISR 2 and two of three brokers alive: nothing may fail for good
    assert outcome["failed"] == [], outcome
    return outcome["acked"]


def _consumed(member: Member, values: set[int], what: str) -> None:
    def check() -> bool:
        assert not member.has("error"), member.events
        with member._lock:
            seen = {int(v[1:]) for _, _, v in member.messages}
        return values <= seen

    wait_until(check, 90, what)


def _at_least(after: dict[int, int] | None, before: dict[int, int]) -> bool:
    return after is not None and all(after.get(p, -1) >= o for p, o in before.items())


@pytest.mark.parametrize("client", CLIENTS, indirect=True)
@pytest.mark.timeout_guard(300)
def test_a_group_across_a_leader_kill_and_a_coordinator_kill(clients_cluster, zk, client, kafkajs_modules) -> None:
    cluster = clients_cluster
    topic, group = f"orders-{client}", f"billing-{client}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3,
                                  config={"min.insync.replicas": "2"})],
                        operation_timeout=scaled(20))[topic].result(scaled(30))
    _full_isr(zk, topic, PARTITIONS)
    coordinator_partition = partition_for(group, OFFSETS_PARTITIONS)
    # the first FindCoordinator creates __consumer_offsets (COORDINATOR_NOT_AVAILABLE until its
    # leaders have loaded it): a running cluster has it before the clients come
    wait_until(lambda: _committed(cluster.bootstrap, topic, group) is not None, 60, "the group's coordinator")

    member = Member(client, cluster.bootstrap, topic, group, kafkajs_modules, session_ms=SESSION_MS)
    fresh = None
    acked: set[int] = set()
    try:
        # before any failure: produce, consume, commit
        acked |= set(_produced(member, member.start_produce(0, BATCH, PARTITIONS)))
        _consumed(member, acked, "the first batch consumed")
        first = _commit(member)
        assert _committed(cluster.bootstrap, topic, group) == first

        # SIGKILL the leader of a partition of the topic (not the coordinator: that is next),
        # producing meanwhile; the controller elects a leader from the ISR
        coordinator = _state(zk, "__consumer_offsets", coordinator_partition)["leader"]
        states = {p: _state(zk, topic, p) for p in range(PARTITIONS)}
        victim_partition = next(p for p, s in states.items() if s["leader"] != coordinator)
        leader = states[victim_partition]["leader"]
        cluster.brokers[leader].kill()
        mark = member.start_produce(BATCH, BATCH, PARTITIONS)
        _state(zk, topic, victim_partition, lambda s: s["leader"] not in (-1, leader)
               and s["leader_epoch"] > states[victim_partition]["leader_epoch"])
        acked |= set(_produced(member, mark))
        assert _at_least(_committed(cluster.bootstrap, topic, group), first)
        _consumed(member, acked, "the batch produced across the leader's kill consumed")
        second = _commit(member)
        assert _at_least(second, first)
        cluster.brokers[leader].start()
        _full_isr(zk, topic, PARTITIONS)
        _state(zk, "__consumer_offsets", coordinator_partition, lambda s: len(s["isr"]) == 3)

        # SIGKILL the group's coordinator (the leader of its __consumer_offsets partition),
        # committing and producing meanwhile; the new leader loads the group's offsets
        old = _state(zk, "__consumer_offsets", coordinator_partition)
        cluster.brokers[old["leader"]].kill()
        mark = member.start_produce(2 * BATCH, BATCH, PARTITIONS)
        _state(zk, "__consumer_offsets", coordinator_partition,
               lambda s: s["leader"] not in (-1, old["leader"]) and s["leader_epoch"] > old["leader_epoch"])
        # the new coordinator has loaded the offsets committed before the kill
        wait_until(lambda: _at_least(_committed(cluster.bootstrap, topic, group), second), 60,
                   "the new coordinator serving the offsets committed before its predecessor's kill")
        acked |= set(_produced(member, mark))
        _consumed(member, acked, "the batch produced across the coordinator's kill consumed")
        third = _commit(member)
        assert _at_least(third, second)
        wait_until(lambda: _at_least(_committed(cluster.bootstrap, topic, group), third), 60,
                   "the new coordinator serving the commit")
        cluster.brokers[old["leader"]].start()
        _full_isr(zk, topic, PARTITIONS)

        # the member leaves; a fresh member of the group resumes from the committed offsets
        member.close()
        committed = _committed(cluster.bootstrap, topic, group)
        assert committed is not None and _at_least(committed, third)
        fresh = Member(client, cluster.bootstrap, topic, group, kafkajs_modules, session_ms=SESSION_MS)
        acked |= set(_produced(fresh, fresh.start_produce(3 * BATCH, BATCH, PARTITIONS)))
        _consumed(fresh, set(range(3 * BATCH, 4 * BATCH)), "the fresh member reads the new records")
        with fresh._lock:
            resumed = list(fresh.messages)
        # nothing below the committed offsets: it did not start from the beginning
        assert all(o >= committed.get(p, 0) for p, o, _ in resumed), (committed, resumed)
        fresh.close()
    finally:
        for m in (member, fresh):
            if m is not None and m.proc.poll() is None:
                m.kill()
    # every acknowledged record was consumed by the group at least once
    seen = {int(v[1:]) for m in (member, fresh) for _, _, v in m.messages}
    assert acked == set(range(4 * BATCH)) and acked <= seen
