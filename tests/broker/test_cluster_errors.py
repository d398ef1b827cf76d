"""What a client gets from a ZooKeeper-mode cluster in each failure case, as raw protocol
answers (error codes and Metadata fields) checked against ZooKeeper-mode Kafka's
``KafkaApis``/``ReplicaManager``/``Partition``/``ZkMetadataCache`` rules:

- Metadata of a partition whose leader died (before and after the controller's election) and of
  an offline partition: LEADER_NOT_AVAILABLE, leader -1, the ZooKeeper ISR and leader epoch,
  ``offline_replicas`` naming the dead brokers, the dead broker gone from the broker list (and
  v0's filtering of dead replicas with REPLICA_NOT_AVAILABLE);
- Produce/Fetch/ListOffsets/DeleteRecords/OffsetForLeaderEpoch to a follower or a broker
  without the replica: NOT_LEADER_OR_FOLLOWER (a consumer's Fetch v11+ may read a follower);
- a stale ``current_leader_epoch``: FENCED_LEADER_EPOCH, a newer one: UNKNOWN_LEADER_EPOCH;
- acks=all below ``min.insync.replicas``: NOT_ENOUGH_REPLICAS;
- a deleted topic, a partition not added yet: UNKNOWN_TOPIC_OR_PARTITION;
- CreateTopics above the live brokers: INVALID_REPLICATION_FACTOR;
- ElectLeaders PREFERRED and UNCLEAN: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
  ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, and the unclean election itself.

One cluster (ZooKeeper and brokers 1, 2, 3) serves the whole module: each test that stops
brokers starts them again before it ends. Every wait is for an event (a znode, an answer),
bounded by ``scaled``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import scaled, wait_until
from kafkalog import protocol as p
from kafkalog.tools._zookeeper import ZooKeeperServer
from test_broker import RawClient, fetch_body, one_batch, produce_body
from zk_cluster import Cluster, KazooClient, needs_zookeeper, wait_for_znode, znode_json

pytestmark = [needs_zookeeper, pytest.mark.timeout_guard(180)]

E = p.ErrorCode


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[tuple[Cluster, KazooClient]]:
    """ZooKeeper, brokers 1-3 (no automatic rebalance: leaders move only when a test moves
    them) and a kazoo client, for the whole module."""
    root = tmp_path_factory.mktemp("cluster-errors")
    server = ZooKeeperServer(root / "zookeeper")
    server.start(timeout_s=scaled(30))
    cluster = Cluster(server, root)
    client = None
    try:
        for broker_id in (1, 2, 3):
            cluster.add(broker_id, auto_leader_rebalance_enable="false")
        client = KazooClient(hosts=server.connect)
        client.start(timeout=scaled(10))
        wait_until(lambda: sorted(client.get_children("/brokers/ids")) == ["1", "2", "3"], 30, "three brokers")
        yield cluster, client
    finally:
        if client is not None:
            client.stop()
            client.close()
        cluster.stop()
        server.stop()


def _raw(cluster: Cluster, broker_id: int) -> RawClient:
    raw = RawClient(cluster.brokers[broker_id].address)
    raw.sock.settimeout(scaled(30))
    return raw


def _restart_dead(cluster: Cluster, zk: KazooClient) -> None:
    """Start every killed broker again and wait for its registration (the next test's cluster)."""
    for broker in cluster.brokers.values():
        if not broker.alive:
            broker.start()
    wait_until(lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"], 30, "three brokers again")


def _state(zk: KazooClient, topic: str, predicate=lambda s: True, partition: int = 0) -> dict:
    return wait_for_znode(zk, f"/brokers/topics/{topic}/partitions/{partition}/state", predicate, 40)


def _create(raw: RawClient, name: str, assignment: list[list[int]], configs: dict[str, str] | None = None) -> dict:
    _, body = raw.call(p.ApiKey.CREATE_TOPICS, 4, {"topics": [{
        "name": name, "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": i, "broker_ids": r} for i, r in enumerate(assignment)],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": int(scaled(20) * 1000), "validate_only": False})
    return body["topics"][0]


def _metadata(raw: RawClient, topics: list[str] | None, version: int = 8) -> dict:
    body = {"topics": None if topics is None else [{"name": t} for t in topics], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
    if version == 0 and topics is not None:
        body["topics"] = [{"name": t} for t in topics]
    return raw.call(p.ApiKey.METADATA, version, body)[1]


def _partition_md(raw: RawClient, topic: str, partition: int = 0, version: int = 8) -> dict:
    md = _metadata(raw, [topic], version)
    parts = {x["partition_index"]: x for x in md["topics"][0]["partitions"]}
    return parts[partition]


def _produce(raw: RawClient, topic: str, *, acks: int = -1, partition: int = 0) -> int:
    _, body = raw.call(p.ApiKey.PRODUCE, 8, produce_body(topic, one_batch(), acks=acks, partition=partition))
    return body["responses"][0]["partition_responses"][0]["error_code"]


def _fetch(raw: RawClient, topic: str, *, version: int = 12, epoch: int = -1, partition: int = 0) -> dict:
    body = fetch_body([(topic, partition, 0)])
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = epoch
    return raw.call(p.ApiKey.FETCH, version, body)[1]["responses"][0]["partitions"][0]


def _list_offsets(raw: RawClient, topic: str, *, epoch: int = -1) -> int:
    _, body = raw.call(p.ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [{
        "name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": epoch, "timestamp": -1}]}]})
    return body["topics"][0]["partitions"][0]["error_code"]


def _delete_records(raw: RawClient, topic: str) -> int:
    _, body = raw.call(p.ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout_ms": int(scaled(10) * 1000)})
    return body["topics"][0]["partitions"][0]["error_code"]


def _offset_for_epoch(raw: RawClient, topic: str, *, epoch: int = -1) -> int:
    _, body = raw.call(p.ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [{
        "topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": epoch, "leader_epoch": 0}]}]})
    return body["topics"][0]["partitions"][0]["error_code"]


def _elect(raw: RawClient, election_type: int, parts: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, str]]:
    topics: dict[str, list[int]] = {}
    for t, q in parts:
        topics.setdefault(t, []).append(q)
    _, body = raw.call(p.ApiKey.ELECT_LEADERS, 2, {
        "election_type": election_type, "timeout_ms": int(scaled(20) * 1000),
        "topic_partitions": [{"topic": t, "partitions": qs} for t, qs in topics.items()]})
    assert body["error_code"] == 0
    return {(r["topic"], x["partition_id"]): (x["error_code"], x["error_message"])
            for r in body["replica_election_results"] for x in r["partition_result"]}


PREFERRED, UNCLEAN = 0, 1


def _served(raw: RawClient, topic: str, epoch: int) -> bool:
    """Whether this broker serves ``topic``-0 as its leader at ``epoch`` (the replica manager
    has applied the state ZooKeeper shows)."""
    return _list_offsets(raw, topic, epoch=epoch) == E.NONE


# -- a follower, a broker without the replica, leader epochs ------------------------------------


def test_requests_to_a_follower_or_a_stranger_get_not_leader_or_follower(shared) -> None:
    cluster, zk = shared
    with _raw(cluster, 1) as leader, _raw(cluster, 2) as follower, _raw(cluster, 3) as stranger:
        assert _create(leader, "placed", [[1, 2]])["error_code"] == 0
        state = _state(zk, "placed", lambda s: s["isr"] == [1, 2])
        wait_until(lambda: _served(leader, "placed", state["leader_epoch"]), 30, "broker 1 leading placed-0")
        assert _produce(leader, "placed") == E.NONE
        # the follower: Kafka's Partition.getLocalLog(requireLeader = true)
        wait_until(lambda: _produce(follower, "placed") == E.NOT_LEADER_OR_FOLLOWER, 30,
                   "broker 2 applying its follower state")
        assert _fetch(follower, "placed", version=10)["error_code"] == E.NOT_LEADER_OR_FOLLOWER
        assert _list_offsets(follower, "placed") == E.NOT_LEADER_OR_FOLLOWER
        assert _delete_records(follower, "placed") == E.NOT_LEADER_OR_FOLLOWER
        assert _offset_for_epoch(follower, "placed") == E.NOT_LEADER_OR_FOLLOWER
        # KIP-392: a consumer's Fetch v11+ carries client metadata and may read a follower (up
        # to the follower's high watermark); no replica selector, so no preferred read replica
        served = _fetch(follower, "placed", version=11)
        assert served["error_code"] == E.NONE and served["preferred_read_replica"] == -1
        # a broker without a replica of a partition the cluster has (ReplicaManager.getPartitionOrError)
        wait_until(lambda: _produce(stranger, "placed") == E.NOT_LEADER_OR_FOLLOWER, 30,
                   "broker 3 knowing placed from its metadata")
        assert _fetch(stranger, "placed", version=11)["error_code"] == E.NOT_LEADER_OR_FOLLOWER
        assert _list_offsets(stranger, "placed") == E.NOT_LEADER_OR_FOLLOWER
        assert _delete_records(stranger, "placed") == E.NOT_LEADER_OR_FOLLOWER
        # a partition the topic does not have
        assert _produce(leader, "placed", partition=7) == E.UNKNOWN_TOPIC_OR_PARTITION


def test_current_leader_epoch_older_is_fenced_newer_is_unknown(shared) -> None:
    cluster, zk = shared
    with _raw(cluster, 1) as leader, _raw(cluster, 2) as follower:
        assert _create(leader, "epochs", [[1, 2]])["error_code"] == 0
        _state(zk, "epochs", lambda s: s["isr"] == [1, 2])
        # the preferred replica leads: nothing to elect, the epoch stays
        assert _elect(leader, PREFERRED, [("epochs", 0)])[("epochs", 0)][0] == E.ELECTION_NOT_NEEDED
        epoch = _state(zk, "epochs")["leader_epoch"]
        wait_until(lambda: _served(leader, "epochs", epoch), 30, "broker 1 leading epochs-0")
        # Partition.checkCurrentLeaderEpoch, before the leader check
        assert _fetch(leader, "epochs", epoch=epoch + 1)["error_code"] == E.UNKNOWN_LEADER_EPOCH
        assert _list_offsets(leader, "epochs", epoch=epoch + 1) == E.UNKNOWN_LEADER_EPOCH
        assert _offset_for_epoch(leader, "epochs", epoch=epoch + 1) == E.UNKNOWN_LEADER_EPOCH
        assert _fetch(follower, "epochs", epoch=epoch + 1)["error_code"] == E.UNKNOWN_LEADER_EPOCH
        assert _fetch(leader, "epochs", epoch=epoch)["error_code"] == E.NONE
        assert _offset_for_epoch(leader, "epochs", epoch=epoch) == E.NONE
        # broker 2 stops: the controller shrinks the ISR and bumps the leader epoch
        cluster.brokers[2].kill()
        try:
            shrunk = _state(zk, "epochs", lambda s: s["isr"] == [1])
            assert shrunk["leader"] == 1 and shrunk["leader_epoch"] > epoch
            wait_until(lambda: _served(leader, "epochs", shrunk["leader_epoch"]), 30, "broker 1 at the new epoch")
            assert _fetch(leader, "epochs", epoch=epoch)["error_code"] == E.FENCED_LEADER_EPOCH
            assert _list_offsets(leader, "epochs", epoch=epoch) == E.FENCED_LEADER_EPOCH
            assert _offset_for_epoch(leader, "epochs", epoch=epoch) == E.FENCED_LEADER_EPOCH
            part = _partition_md(leader, "epochs")
            assert (part["error_code"], part["leader_id"], part["leader_epoch"]) == (E.NONE, 1, shrunk["leader_epoch"])
            assert part["replica_nodes"] == [1, 2] and part["isr_nodes"] == [1] and part["offline_replicas"] == [2]
            # Metadata v0 (errorUnavailableEndpoints): dead replicas filtered, REPLICA_NOT_AVAILABLE
            v0 = _partition_md(leader, "epochs", version=0)
            assert (v0["error_code"], v0["leader_id"], v0["replica_nodes"], v0["isr_nodes"]) == (
                E.REPLICA_NOT_AVAILABLE, 1, [1], [1])
        finally:
            _restart_dead(cluster, zk)


# -- two brokers of three down ------------------------------------------------------------------


def test_two_of_three_down_offline_partitions_min_isr_and_unclean_election(shared) -> None:
    cluster, zk = shared
    with _raw(cluster, 1) as raw:
        assert _create(raw, "durable", [[1, 2, 3]], {"min.insync.replicas": "2"})["error_code"] == 0
        assert _create(raw, "lonely", [[2, 3]])["error_code"] == 0
        _state(zk, "durable", lambda s: s["isr"] == [1, 2, 3])
        lonely = _state(zk, "lonely", lambda s: s["isr"] == [2, 3])
        wait_until(lambda: _served(raw, "durable", 0), 30, "broker 1 leading durable-0")
        assert _produce(raw, "durable") == E.NONE
    try:
        cluster.brokers[3].kill()
        _state(zk, "lonely", lambda s: s["isr"] == [2])
        _state(zk, "durable", lambda s: s["isr"] == [1, 2])
        cluster.brokers[2].kill()
        with _raw(cluster, 1) as raw:
            # the broker list drops the dead as soon as their registrations go; a partition
            # whose leader is dead answers LEADER_NOT_AVAILABLE with leader -1 whether or not
            # the controller has written its election yet
            wait_until(lambda: [b["node_id"] for b in _metadata(raw, [])["brokers"]] == [1], 40,
                       "Metadata listing broker 1 alone")
            part = _partition_md(raw, "lonely")
            assert (part["error_code"], part["leader_id"]) == (E.LEADER_NOT_AVAILABLE, -1)
            assert part["offline_replicas"] == [2, 3]
            # the controller: no ISR member alive and unclean election off -> offline, ISR keeps
            # its last member (Kafka's removeReplicasFromIsr), leader epoch bumped
            offline = _state(zk, "lonely", lambda s: s["leader"] == -1)
            assert offline["isr"] == [2] and offline["leader_epoch"] > lonely["leader_epoch"]
            wait_until(lambda: _partition_md(raw, "lonely")["leader_epoch"] == offline["leader_epoch"], 30,
                       "broker 1's cache at the offline state")
            part = _partition_md(raw, "lonely")
            assert part == {"error_code": E.LEADER_NOT_AVAILABLE, "partition_index": 0, "leader_id": -1,
                            "leader_epoch": offline["leader_epoch"], "replica_nodes": [2, 3], "isr_nodes": [2],
                            "offline_replicas": [2, 3]}
            v0 = _partition_md(raw, "lonely", version=0)
            assert (v0["error_code"], v0["leader_id"], v0["replica_nodes"], v0["isr_nodes"]) == (
                E.LEADER_NOT_AVAILABLE, -1, [], [])
            # Produce to the offline partition: broker 1 has no replica of it
            assert _produce(raw, "lonely") == E.NOT_LEADER_OR_FOLLOWER
            # min.insync.replicas 2 with the ISR at [1]: acks=all refused, acks=1 taken
            durable = _state(zk, "durable", lambda s: s["isr"] == [1])
            wait_until(lambda: _served(raw, "durable", durable["leader_epoch"]), 30, "broker 1 at durable's epoch")
            assert _produce(raw, "durable", acks=-1) == E.NOT_ENOUGH_REPLICAS
            assert _produce(raw, "durable", acks=1) == E.NONE
            # CreateTopics above the live brokers
            _, body = raw.call(p.ApiKey.CREATE_TOPICS, 4, {"topics": [{
                "name": "toobig", "num_partitions": 1, "replication_factor": 2, "assignments": [], "configs": []}],
                "timeout_ms": 5000, "validate_only": False})
            assert body["topics"][0]["error_code"] == E.INVALID_REPLICATION_FACTOR
            assert body["topics"][0]["error_message"] == "Replication factor: 2 larger than available brokers: 1."
            # ElectLeaders UNCLEAN with no live replica at all
            assert _elect(raw, UNCLEAN, [("lonely", 0)])[("lonely", 0)] == (
                E.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                "Failed to elect leader for partition lonely-0 under strategy OfflinePartitionLeaderElectionStrategy(true)")
            # broker 3 (out of sync) returns: with unclean election off it must not lead ...
            cluster.brokers[3].start()
            wait_until(lambda: 3 in [b["node_id"] for b in _metadata(raw, [])["brokers"]], 40, "broker 3 back")
            assert _state(zk, "lonely")["leader"] == -1
            # ... until an administrator asks for an unclean election (Kafka 2.4+'s ElectLeaders UNCLEAN)
            results = _elect(raw, UNCLEAN, [("lonely", 0), ("durable", 0), ("nowhere", 0)])
            assert results[("lonely", 0)] == (E.NONE, None)
            # its leader is alive (Errors.ELECTION_NOT_NEEDED's own message)
            assert results[("durable", 0)] == (E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
            assert results[("nowhere", 0)] == (E.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elected = _state(zk, "lonely")
            assert elected["leader"] == 3 and elected["isr"] == [3]
            assert elected["leader_epoch"] == offline["leader_epoch"] + 1
            # the preferred replica (2) is dead: PREFERRED_LEADER_NOT_AVAILABLE
            code, message = _elect(raw, PREFERRED, [("lonely", 0)])[("lonely", 0)]
            assert code == E.PREFERRED_LEADER_NOT_AVAILABLE
            assert message == ("Failed to elect leader for partition lonely-0 under strategy "
                               "PreferredReplicaPartitionLeaderElectionStrategy")
            assert _elect(raw, PREFERRED, [("durable", 0)])[("durable", 0)][0] == E.ELECTION_NOT_NEEDED
        with _raw(cluster, 3) as three:
            wait_until(lambda: _produce(three, "lonely") == E.NONE, 30, "broker 3 leading lonely-0")
    finally:
        _restart_dead(cluster, zk)


# -- topic deletion and partition addition ------------------------------------------------------


def test_a_deleted_topic_and_a_partition_not_added_yet_are_unknown(shared) -> None:
    cluster, zk = shared
    with _raw(cluster, 1) as raw, _raw(cluster, 2) as other:
        assert _create(raw, "doomed", [[1, 2]])["error_code"] == 0
        epoch = _state(zk, "doomed", lambda s: s["isr"] == [1, 2])["leader_epoch"]
        wait_until(lambda: _served(raw, "doomed", epoch), 30, "broker 1 leading doomed-0")
        assert _produce(raw, "doomed", partition=1) == E.UNKNOWN_TOPIC_OR_PARTITION
        _, body = raw.call(p.ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": "doomed", "count": 2,
                                                                        "assignments": [{"broker_ids": [2, 1]}]}],
                                                            "timeout_ms": int(scaled(20) * 1000), "validate_only": False})
        assert body["results"][0]["error_code"] == E.NONE
        wait_until(lambda: _produce(other, "doomed", partition=1) == E.NONE, 30, "broker 2 leading doomed-1")
        _, body = raw.call(p.ApiKey.DELETE_TOPICS, 4, {"topic_names": ["doomed"], "timeout_ms": int(scaled(20) * 1000)})
        assert body["responses"][0]["error_code"] == E.NONE
        for client in (raw, other):
            wait_until(lambda c=client: _produce(c, "doomed") == E.UNKNOWN_TOPIC_OR_PARTITION, 30,
                       "the deletion known to every broker")
            assert _fetch(client, "doomed")["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
            assert _list_offsets(client, "doomed") == E.UNKNOWN_TOPIC_OR_PARTITION
            assert _delete_records(client, "doomed") == E.UNKNOWN_TOPIC_OR_PARTITION
            md = _metadata(client, ["doomed"])["topics"][0]
            assert (md["error_code"], md["partitions"]) == (E.UNKNOWN_TOPIC_OR_PARTITION, [])
        _, body = raw.call(p.ApiKey.DELETE_TOPICS, 4, {"topic_names": ["doomed"], "timeout_ms": 1000})
        assert body["responses"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION


# -- the controller and controlled shutdown -----------------------------------------------------


def test_metadata_names_the_new_controller_and_a_stopped_broker_leaves_the_lists(shared) -> None:
    cluster, zk = shared
    first = wait_for_znode(zk, "/controller")["brokerid"]
    other = next(b for b in (1, 2, 3) if b != first)
    try:
        cluster.brokers[first].kill()
        second = wait_for_znode(zk, "/controller", lambda c: c["brokerid"] != first, 40)["brokerid"]
        with _raw(cluster, other) as raw:
            # (each from its own watch: /controller and /brokers/ids)
            wait_until(lambda: (md := _metadata(raw, []))["controller_id"] == second
                       and first not in [b["node_id"] for b in md["brokers"]], 30,
                       "Metadata naming the new controller and not the dead one")
        _restart_dead(cluster, zk)
        # a controlled shutdown (SIGTERM): the broker leaves the leaders and the ISRs first
        with _raw(cluster, other) as raw:
            assert _create(raw, "handover", [[3, 1, 2]])["error_code"] == 0
            _state(zk, "handover", lambda s: s["isr"] == [3, 1, 2])
            assert cluster.brokers[3].terminate() == 0
            state = znode_json(zk, "/brokers/topics/handover/partitions/0/state")
            assert state["leader"] == 1 and state["isr"] == [1, 2]
            wait_until(lambda: _partition_md(raw, "handover")["leader_id"] == 1, 30, "Metadata naming broker 1")
            part = _partition_md(raw, "handover")
            assert (part["error_code"], part["isr_nodes"], part["offline_replicas"]) == (E.NONE, [1, 2], [3])
    finally:
        _restart_dead(cluster, zk)
