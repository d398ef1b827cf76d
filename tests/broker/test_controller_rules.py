"""The controller's decisions as pure functions (no ZooKeeper): Kafka's rack-unaware replica
assignment and the leader/ISR rules of ``_controller.Controller._next_state``."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.broker._cluster_config import ClusterConfig
from kafkalog.broker._controller import Controller
from kafkalog.broker._replica_assignment import assign_replicas, start_index_for_added
from kafkalog.broker._zk import NO_LEADER, PartitionState
from kafkalog.errors import InvalidConfigError


def test_assignment_matches_kafkas_own_test_vector() -> None:
    # Kafka's AdminZkClientTest.testReplicaAssignment (brokers 0-4, 10 partitions, RF 3, start 0)
    expected = {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}
    assert assign_replicas(10, 3, [4, 3, 2, 1, 0], fixed_start_index=0) == expected


@given(st.integers(1, 40), st.integers(1, 6), st.integers(0, 2**32))
def test_assignment_is_balanced_and_never_repeats_a_broker(partitions, brokers, seed) -> None:
    ids = list(range(10, 10 + brokers))
    rf = min(brokers, 3)
    plan = assign_replicas(partitions, rf, ids, rng=random.Random(seed))
    assert sorted(plan) == list(range(partitions))
    leaders = [r[0] for r in plan.values()]
    for replicas in plan.values():
        assert len(replicas) == rf == len(set(replicas)) and set(replicas) <= set(ids)
    counts = [leaders.count(b) for b in ids]
    assert max(counts) - min(counts) <= 1  # leaders spread round-robin


def test_assignment_refuses_what_kafka_refuses() -> None:
    with pytest.raises(InvalidConfigError, match="Replication factor: 4 larger than available brokers: 3."):
        assign_replicas(1, 4, [1, 2, 3])
    with pytest.raises(InvalidConfigError):
        assign_replicas(0, 1, [1])
    with pytest.raises(InvalidConfigError):
        assign_replicas(1, 0, [1])


def test_added_partitions_continue_the_placement() -> None:
    first = assign_replicas(3, 2, [1, 2, 3], fixed_start_index=1)
    start = start_index_for_added([1, 2, 3], first[0][0])
    added = assign_replicas(3, 2, [1, 2, 3], fixed_start_index=start, start_partition=3)
    assert sorted(added) == [3, 4, 5]
    assert [r[0] for r in added.values()] == [first[0][0], first[1][0], first[2][0]]


def _controller(unclean: bool = False) -> Controller:
    c = Controller(None, 1, ClusterConfig(zookeeper_connect="127.0.0.1:1", unclean_leader_election=unclean),  # type: ignore[arg-type]
                   lambda topic: None)
    c._epoch, c._epoch_version = 5, 4
    return c


def _next(state, replicas, live, usable=None, unclean=False, preferred=False):
    return _controller()._next_state(state, replicas, set(live), set(live if usable is None else usable), unclean,
                                     preferred=preferred)


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_in_assignment_order() -> None:
    new = _next(PartitionState(1, 3, (1, 3, 2), 4, 7), (1, 2, 3), live={2, 3})
    assert new == PartitionState(2, 4, (3, 2), 5, 7)


def test_without_a_live_isr_member_the_partition_goes_offline_keeping_the_last_member() -> None:
    new = _next(PartitionState(1, 3, (1,), 4, 7), (1, 2), live={2})
    assert new == PartitionState(NO_LEADER, 4, (1,), 5, 7)
    assert _next(new, (1, 2), live={2}) is None  # and stays so: 2 is out of sync


def test_unclean_election_takes_the_first_live_replica() -> None:
    new = _next(PartitionState(NO_LEADER, 4, (1,), 4, 8), (1, 2), live={2}, unclean=True)
    assert new == PartitionState(2, 5, (2,), 5, 8)


def test_a_dead_follower_leaves_the_isr_with_a_new_leader_epoch() -> None:
    new = _next(PartitionState(1, 0, (1, 2, 3), 1, 0), (1, 2, 3), live={1, 2})
    assert new == PartitionState(1, 1, (1, 2), 5, 0)


def test_controlled_shutdown_moves_leadership_but_never_uncleanly() -> None:
    moved = _next(PartitionState(1, 0, (1, 2), 1, 0), (1, 2, 3), live={1, 2, 3}, usable={2, 3}, unclean=True)
    assert moved == PartitionState(2, 1, (2,), 5, 0)
    kept = _next(PartitionState(1, 0, (1,), 1, 0), (1, 2), live={1, 2}, usable={2}, unclean=True)
    assert kept is None  # the only in-sync replica keeps leading until it stops


def test_preferred_election_needs_the_preferred_replica_in_the_isr() -> None:
    assert _next(PartitionState(2, 1, (2, 3), 1, 0), (1, 2, 3), live={1, 2, 3}, preferred=True) is None
    new = _next(PartitionState(2, 1, (2, 3, 1), 1, 0), (1, 2, 3), live={1, 2, 3}, preferred=True)
    assert new == PartitionState(1, 2, (2, 3, 1), 5, 0)


def test_the_znode_json_is_kafkas() -> None:
    state = PartitionState(2, 7, (2, 3), 4)
    assert state.encode() == b'{"controller_epoch":4,"leader":2,"version":1,"leader_epoch":7,"isr":[2,3]}'
    assert PartitionState.decode("x", state.encode(), 9) == PartitionState(2, 7, (2, 3), 4, 9)


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b'{"leader":1}', b'{"leader":"x","leader_epoch":0,"isr":[],"controller_epoch":1}',
                                  b'{"leader":1,"leader_epoch":0,"isr":5,"controller_epoch":1}', b"\xff\xfe"])
def test_a_malformed_state_znode_is_a_typed_error_naming_the_path(data) -> None:
    from kafkalog.errors import KafkalogError

    with pytest.raises(KafkalogError, match="/brokers/topics/t/partitions/0/state"):
        PartitionState.decode("/brokers/topics/t/partitions/0/state", data, 0)


def test_registrations_and_assignments_parse_as_kafka_writes_them() -> None:
    from kafkalog.broker._zk import TopicAssignment, broker_json, parse_broker, split_connect
    from kafkalog.errors import KafkalogError

    assert parse_broker("/brokers/ids/1", broker_json("127.0.0.1", 9092)) == ("127.0.0.1", 9092)
    # a registration Kafka 3.x wrote (two listeners): the first endpoint
    kafka = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","INTERNAL":"PLAINTEXT"},'
             b'"endpoints":["PLAINTEXT://kafka-1:9092","INTERNAL://kafka-1:19092"],"jmx_port":-1,"features":{},'
             b'"host":"kafka-1","timestamp":"1700000000000","port":9092,"version":5}')
    assert parse_broker("/brokers/ids/1", kafka) == ("kafka-1", 9092)
    with pytest.raises(KafkalogError, match="/brokers/ids/2"):
        parse_broker("/brokers/ids/2", b'{"version":5}')
    written = TopicAssignment("AAAAAAAAAAAAAAAAAAAAAA", {1: (2, 3), 0: (1, 2)}).encode()
    assert written == (b'{"version":3,"partitions":{"0":[1,2],"1":[2,3]},"adding_replicas":{},"removing_replicas":{},'
                       b'"topic_id":"AAAAAAAAAAAAAAAAAAAAAA"}')
    assert TopicAssignment.decode("t", written, 3) == TopicAssignment("AAAAAAAAAAAAAAAAAAAAAA", {0: (1, 2), 1: (2, 3)}, 3)
    with pytest.raises(KafkalogError, match="/brokers/topics/x"):
        TopicAssignment.decode("/brokers/topics/x", b'{"partitions":{"a":[1]}}', 0)
    assert split_connect("h1:2181,h2:2181/kafka/") == ("h1:2181,h2:2181", "/kafka")
    with pytest.raises(InvalidConfigError, match="zookeeper.connect"):
        split_connect("nohost")
