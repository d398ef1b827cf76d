"""A cluster of real ``kafkalog broker`` processes coordinated by a real ZooKeeper server:
registration, controller election, topic creation, leader election on broker loss (clean and
unclean), controlled shutdown, preferred-leader election, deletion and partition addition, as
ZooKeeper-mode Kafka writes them in ZooKeeper. Every wait is bounded (``wait_until``)."""

from __future__ import annotations

import json

import pytest

from conftest import scaled, wait_until
from zk_cluster import (  # noqa: F401 - fixtures
    Cluster,
    cluster,
    cluster_factory,
    needs_zookeeper,
    read_committed,
    wait_for_znode,
    zk,
    zookeeper,
    znode_json,
)

confluent_admin = pytest.importorskip("confluent_kafka.admin")
from confluent_kafka import ElectionType, TopicPartition  # noqa: E402

pytestmark = [needs_zookeeper, pytest.mark.timeout_guard(120)]


def _admin(cluster: Cluster):
    return confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})


def _create(cluster: Cluster, name: str, partitions: int = 1, rf: int = 3, *, assignment=None, config=None) -> None:
    if assignment is not None:
        topic = confluent_admin.NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment,
                                         config=config or {})
    else:
        topic = confluent_admin.NewTopic(name, num_partitions=partitions, replication_factor=rf, config=config or {})
    admin = _admin(cluster)  # kept alive until the result is in
    admin.create_topics([topic], operation_timeout=scaled(20))[name].result(scaled(30))


def _state(zk, topic: str, partition: int = 0) -> dict:
    return znode_json(zk, f"/brokers/topics/{topic}/partitions/{partition}/state")


def _wait_state(zk, topic: str, predicate, partition: int = 0, seconds: float = 30) -> dict:
    return wait_for_znode(zk, f"/brokers/topics/{topic}/partitions/{partition}/state", predicate, seconds)


def test_brokers_register_and_one_becomes_controller_with_kafkas_json(cluster, zk) -> None:
    wait_until(lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"], 20, "three registrations")
    for broker_id, broker in cluster.brokers.items():
        reg, stat = zk.get(f"/brokers/ids/{broker_id}")
        reg = json.loads(reg)
        host, port = broker.address.rsplit(":", 1)
        assert stat.ephemeralOwner != 0
        assert reg == {
            "features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": [f"PLAINTEXT://{host}:{port}"], "jmx_port": -1, "port": int(port), "host": host,
            "version": 5, "timestamp": reg["timestamp"],
        }
        assert reg["timestamp"].isdigit()
    controller = wait_for_znode(zk, "/controller")
    assert set(controller) == {"version", "brokerid", "timestamp", "kraftControllerEpoch"}
    assert controller["version"] == 2 and controller["brokerid"] in (1, 2, 3)
    assert controller["kraftControllerEpoch"] == -1
    assert zk.get("/controller")[1].ephemeralOwner != 0
    assert zk.get("/controller_epoch")[0] == b"1"
    cluster_id = znode_json(zk, "/cluster/id")
    assert cluster_id["version"] == "1" and len(cluster_id["id"]) == 22
    # Metadata answers from every broker name every live broker and the controller
    for broker in cluster.brokers.values():
        md = confluent_admin.AdminClient({"bootstrap.servers": broker.address}).list_topics(timeout=scaled(10))
        assert sorted(md.brokers) == [1, 2, 3]
        assert md.controller_id == controller["brokerid"]
        assert md.cluster_id == cluster_id["id"]


def test_topic_creation_with_rf_3_writes_kafkas_assignment_and_state(cluster, zk) -> None:
    _create(cluster, "orders", partitions=6, rf=3)
    topic = znode_json(zk, "/brokers/topics/orders")
    assert topic["version"] == 3 and topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
    assert len(topic["topic_id"]) == 22
    assert sorted(topic["partitions"]) == [str(p) for p in range(6)]
    leaders = []
    for p, replicas in topic["partitions"].items():
        assert sorted(replicas) == [1, 2, 3]
        state = _wait_state(zk, "orders", lambda s: True, int(p))
        assert state == {"controller_epoch": 1, "leader": replicas[0], "version": 1, "leader_epoch": 0,
                         "isr": replicas}
        leaders.append(replicas[0])
    # Kafka's rack-unaware assignment spreads the leaders: two partitions each
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    assert znode_json(zk, "/config/topics/orders") == {"version": 1, "config": {}}
    md = _admin(cluster).list_topics("orders", timeout=scaled(10))
    for p, meta in md.topics["orders"].partitions.items():
        assert meta.leader == topic["partitions"][str(p)][0]
        assert meta.replicas == topic["partitions"][str(p)] and meta.isrs == topic["partitions"][str(p)]


def test_the_assignment_given_is_kept_and_a_factor_above_the_brokers_is_refused(cluster, zk) -> None:
    _create(cluster, "given", assignment=[[3, 1], [2, 3]])
    assert znode_json(zk, "/brokers/topics/given")["partitions"] == {"0": [3, 1], "1": [2, 3]}
    assert _wait_state(zk, "given", lambda s: True, 1)["leader"] == 2
    with pytest.raises(Exception) as e:
        _create(cluster, "toobig", partitions=1, rf=4)
    assert "INVALID_REPLICATION_FACTOR" in str(e.value) or "larger than available brokers" in str(e.value)
    assert not zk.exists("/brokers/topics/toobig")


def test_killing_the_controller_elects_another(cluster, zk) -> None:
    first = wait_for_znode(zk, "/controller")["brokerid"]
    cluster.brokers[first].kill()
    second = wait_for_znode(zk, "/controller", lambda c: c["brokerid"] != first, 40)["brokerid"]
    assert second in {1, 2, 3} - {first}
    assert zk.get("/controller_epoch")[0] == b"2"


def test_killing_a_leader_moves_leadership_to_an_isr_member(cluster, zk) -> None:
    _create(cluster, "events", partitions=1, rf=3)
    before = _wait_state(zk, "events", lambda s: True)
    replicas = znode_json(zk, "/brokers/topics/events")["partitions"]["0"]
    dead = before["leader"]
    cluster.brokers[dead].kill()
    after = _wait_state(zk, "events", lambda s: s["leader"] != dead, seconds=40)
    assert after["leader"] == [r for r in replicas if r != dead][0]  # first live ISR member in assignment order
    assert after["leader_epoch"] == before["leader_epoch"] + 1
    assert after["isr"] == [r for r in before["isr"] if r != dead]
    assert after["controller_epoch"] >= 1
    wait_until(lambda: _admin(cluster).list_topics("events", timeout=scaled(10)).topics["events"]
               .partitions[0].leader == after["leader"], 20, "Metadata naming the new leader")


def _two_replica_topic(cluster: Cluster, zk, name: str, config=None) -> None:
    _create(cluster, name, assignment=[[1, 2]], config=config)
    _wait_state(zk, name, lambda s: s["leader"] == 1 and s["isr"] == [1, 2])


def _produce_acked(cluster: Cluster, topic: str, values: list[bytes]) -> None:
    """Produce ``values`` with ``acks=all`` and assert every one is acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 0,
                         "message.timeout.ms": int(scaled(30) * 1000)})
    errors: list = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, m: errors.append(err))
    assert producer.flush(scaled(60)) == 0
    assert errors == [None] * len(values)


def _read_committed(cluster: Cluster, topic: str) -> list[bytes]:
    """Every value below the partition's high watermark, as a read_committed consumer reads them."""
    from confluent_kafka import Consumer

    probe = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unclean-check", "log_level": 0})
    try:
        high = probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=scaled(10))[1]
    finally:
        probe.close()
    return read_committed(cluster.bootstrap, topic, high, group="unclean-check")


def _leave_only_broker_1_with_acked_records(cluster: Cluster, zk, topic: str) -> tuple[list[bytes], list[bytes]]:
    """Records on both replicas, then broker 2 killed and more records acknowledged by broker 1
    alone (ISR [1], min.insync.replicas 1), then broker 1 killed: the partition has no leader.
    Returns (the records both had, the records only broker 1 had)."""
    both = [b"both %d" % i for i in range(5)]
    _produce_acked(cluster, topic, both)
    cluster.brokers[2].kill()
    _wait_state(zk, topic, lambda s: s["isr"] == [1], seconds=40)
    only_1 = [b"only on 1: %d" % i for i in range(5)]
    _produce_acked(cluster, topic, only_1)
    cluster.brokers[1].kill()
    return both, only_1


def test_unclean_election_off_keeps_the_partition_offline_until_an_isr_member_returns(cluster, zk) -> None:
    _two_replica_topic(cluster, zk, "careful")
    both, only_1 = _leave_only_broker_1_with_acked_records(cluster, zk, "careful")
    offline = _wait_state(zk, "careful", lambda s: s["leader"] == -1, seconds=40)
    assert offline["isr"] == [1]  # Kafka keeps the last ISR member
    md = _admin(cluster).list_topics("careful", timeout=scaled(10)).topics["careful"].partitions[0]
    assert md.leader == -1 and md.error is not None and md.error.name() == "LEADER_NOT_AVAILABLE"
    cluster.brokers[2].start()  # out of sync: must not lead
    wait_until(lambda: zk.exists("/brokers/ids/2"), 20, "broker 2 registered again")
    controller = wait_for_znode(zk, "/controller")
    assert _state(zk, "careful")["leader"] == -1
    cluster.brokers[1].start()
    back = _wait_state(zk, "careful", lambda s: s["leader"] == 1, seconds=40)
    assert back["isr"][0] == 1 and back["leader_epoch"] > offline["leader_epoch"]
    assert controller["brokerid"] in (2, 3)
    # availability waited for the ISR member: no acknowledged record is lost
    _wait_state(zk, "careful", lambda s: sorted(s["isr"]) == [1, 2], seconds=40)
    assert _read_committed(cluster, "careful") == both + only_1


def test_unclean_election_on_elects_the_out_of_sync_replica(cluster, zk) -> None:
    _two_replica_topic(cluster, zk, "available", config={"unclean.leader.election.enable": "true"})
    assert znode_json(zk, "/config/topics/available")["config"] == {"unclean.leader.election.enable": "true"}
    both, only_1 = _leave_only_broker_1_with_acked_records(cluster, zk, "available")
    _wait_state(zk, "available", lambda s: s["leader"] == -1, seconds=40)
    cluster.brokers[2].start()
    elected = _wait_state(zk, "available", lambda s: s["leader"] == 2, seconds=40)
    assert elected["isr"] == [2]
    # the price of availability: the records only broker 1 had are lost, although acknowledged
    assert _read_committed(cluster, "available") == both
    after = [b"after the unclean election"]
    _produce_acked(cluster, "available", after)
    # broker 1 returns as a follower of the new epoch: it truncates its divergent records
    # (OffsetsForLeaderEpoch / the diverging epoch) and copies the new leader's
    cluster.brokers[1].start()
    _wait_state(zk, "available", lambda s: sorted(s["isr"]) == [1, 2], seconds=40)
    assert _read_committed(cluster, "available") == both + after
    # and broker 1's own files now hold the new leader's records, not its lost ones
    wait_until(lambda: _replica_values(cluster.brokers[1].log_dir / "available-0") == both + after, 30,
               "broker 1's replica matching the new leader's")


def _replica_values(directory) -> list[bytes]:
    """The values in a replica's segment files (read-only), in offset order."""
    from kafkalog import FileRecords

    values: list[bytes] = []
    for path in sorted(directory.glob("*.log")):
        with FileRecords.open(path) as records:
            values += [r.value for batch in records.batches() if not batch.is_control for r in batch.records()]
    return values


def test_controlled_shutdown_moves_leadership_before_the_broker_exits(cluster, zk) -> None:
    _create(cluster, "graceful", partitions=3, rf=3)
    leaders = {p: _wait_state(zk, "graceful", lambda s: True, p)["leader"] for p in range(3)}
    leaving = leaders[0]
    assert cluster.brokers[leaving].terminate() == 0
    for p in range(3):
        state = _state(zk, "graceful", p)
        assert state["leader"] != leaving and leaving not in state["isr"]
    assert "every leadership moved" in cluster.brokers[leaving].stderr()


def test_elect_leaders_restores_the_preferred_leader(cluster_factory, zk) -> None:
    for broker_id in (1, 2, 3):
        cluster_factory.add(broker_id, auto_leader_rebalance_enable="false")
    _create(cluster_factory, "pref", assignment=[[1, 2, 3]])
    _wait_state(zk, "pref", lambda s: s["leader"] == 1)
    cluster_factory.brokers[1].kill()
    moved = _wait_state(zk, "pref", lambda s: s["leader"] == 2, seconds=40)
    admin = _admin(cluster_factory)
    tp = TopicPartition("pref", 0)
    # the preferred replica is down: it cannot be elected
    result = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(scaled(30))
    assert result[tp] is not None and result[tp].name() == "PREFERRED_LEADER_NOT_AVAILABLE"
    cluster_factory.brokers[1].start()
    # the leader takes broker 1 back into the ISR once it has caught up (the replica manager)
    _wait_state(zk, "pref", lambda s: 1 in s["isr"], seconds=60)
    result = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(scaled(30))
    assert result[tp] is None
    state = _state(zk, "pref")
    assert state["leader"] == 1 and state["leader_epoch"] == moved["leader_epoch"] + 1
    result = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(scaled(30))
    assert result[tp].name() == "ELECTION_NOT_NEEDED"
    assert not zk.exists("/admin/preferred_replica_election")


def test_auto_leader_rebalance_gives_leadership_back(cluster_factory, zk) -> None:
    for broker_id in (1, 2, 3):
        cluster_factory.add(broker_id, leader_imbalance_check_interval_seconds="1")
    _create(cluster_factory, "rebalanced", assignment=[[1, 2, 3]])
    _wait_state(zk, "rebalanced", lambda s: s["leader"] == 1)
    cluster_factory.brokers[1].kill()
    _wait_state(zk, "rebalanced", lambda s: s["leader"] == 2, seconds=40)
    cluster_factory.brokers[1].start()
    _wait_state(zk, "rebalanced", lambda s: s["leader"] == 1, seconds=60)


def test_topic_deletion_and_partition_addition_across_brokers(cluster, zk) -> None:
    _create(cluster, "grow", partitions=2, rf=2)
    before = znode_json(zk, "/brokers/topics/grow")
    admin = _admin(cluster)
    admin.create_partitions([confluent_admin.NewPartitions("grow", 5)])["grow"].result(scaled(30))
    after = znode_json(zk, "/brokers/topics/grow")
    assert after["topic_id"] == before["topic_id"]
    assert sorted(after["partitions"]) == ["0", "1", "2", "3", "4"]
    assert all(len(set(r)) == 2 for r in after["partitions"].values())
    for p in range(5):
        _wait_state(zk, "grow", lambda s: s["leader"] in (1, 2, 3), p)
    hosts = {b for r in after["partitions"].values() for b in r}
    wait_until(lambda: all((cluster.brokers[b].log_dir / "grow-0").exists() or b not in after["partitions"]["0"]
                           for b in hosts), 20, "replicas of grow-0 opened")
    admin.delete_topics(["grow"], operation_timeout=scaled(20))["grow"].result(scaled(30))
    wait_until(lambda: not any(zk.exists(f"{root}/grow") for root in ("/brokers/topics", "/config/topics",
                                                                       "/admin/delete_topics")),
               20, "the topic's znodes removed (the deletion request last, as Kafka does)")
    wait_until(lambda: all(not (b.log_dir / f"grow-{p}").exists() for b in cluster.brokers.values() for p in range(5)),
               30, "every broker dropped its replicas")


def test_partition_state_writes_are_versioned(cluster, zk) -> None:
    """A write with a stale version (a deposed leader's ISR change) is refused by ZooKeeper."""
    from kazoo.exceptions import BadVersionError

    _create(cluster, "fenced", partitions=1, rf=3)
    path = "/brokers/topics/fenced/partitions/0/state"
    _wait_state(zk, "fenced", lambda s: True)
    data, stat = zk.get(path)
    zk.set(path, data, version=stat.version)
    with pytest.raises(BadVersionError):
        zk.set(path, data, version=stat.version)


def test_an_expired_session_registers_again_and_contests_the_controller(zookeeper, zk, tmp_path) -> None:
    from kafkalog.broker import Broker

    config = {"broker.id": "7", "zookeeper.connect": zookeeper.connect, "zookeeper.session.timeout.ms": "6000"}
    with Broker(tmp_path / "b7", config=config) as broker:
        wait_for_znode(zk, "/controller", lambda c: c["brokerid"] == 7)
        owner = zk.get("/brokers/ids/7")[1].ephemeralOwner
        epoch = int(zk.get("/controller_epoch")[0])
        broker._cluster.zk.expire_session_for_test()
        # a new session: registered again under it, and the controller role contested again
        wait_until(lambda: zk.exists("/brokers/ids/7") and zk.get("/brokers/ids/7")[1].ephemeralOwner != owner,
                   30, "broker 7 registered under a new session")
        wait_until(lambda: int(zk.get("/controller_epoch")[0]) == epoch + 1, 30, "a new controller epoch")
        assert znode_json(zk, "/controller")["brokerid"] == 7
        assert broker._cluster.controller.active and broker._cluster.controller.epoch == epoch + 1
    wait_until(lambda: not zk.exists("/brokers/ids/7"), 20, "the registration gone with the session")


def test_a_broker_id_in_use_is_refused(cluster_factory) -> None:
    cluster_factory.add(1)
    clash = cluster_factory.brokers[1]
    from zk_cluster import BrokerProcess

    twin = BrokerProcess(1, clash.log_dir.with_name("twin"), dict(clash.config))
    with pytest.raises(AssertionError) as e:
        twin.start()
    assert "broker.id 1 is already registered" in str(e.value)


def test_zookeeper_unreachable_fails_the_start_with_a_clear_message(tmp_path) -> None:
    from kafkalog.broker import Broker
    from kafkalog.errors import KafkalogError
    from kafkalog.tools._zookeeper import free_port

    config = {"zookeeper.connect": f"127.0.0.1:{free_port()}", "zookeeper.connection.timeout.ms": "1000"}
    with pytest.raises(KafkalogError, match="did not answer within 1 s"):
        Broker(tmp_path / "alone", config=config).run_in_thread()


def test_cluster_up_starts_zookeeper_and_brokers_and_stops_them(tmp_path) -> None:
    import os
    import select
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "kafkalog", "cluster", "up", str(tmp_path / "c"), "--brokers", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        import queue
        import threading

        lines: queue.Queue[str] = queue.Queue()  # select() cannot see lines already buffered
        threading.Thread(target=lambda: [lines.put(line.strip()) for line in proc.stdout], daemon=True).start()
        first, second = lines.get(timeout=scaled(90)), lines.get(timeout=scaled(30))
        lines = [first, second]
        connect = lines[0].removeprefix("zookeeper.connect=")
        bootstrap = lines[1].removeprefix("bootstrap.servers=")
        assert len(bootstrap.split(",")) == 3
        admin = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
        # each broker learns the others' registrations through its ZooKeeper watch, a moment
        # after they listen (as Kafka's UpdateMetadata reaches brokers): wait for the event
        def complete() -> bool:
            md = admin.list_topics(timeout=scaled(10))
            return sorted(md.brokers) == [1, 2, 3] and md.controller_id in (1, 2, 3)

        wait_until(complete, 30, "every broker and the controller in Metadata")
        from kazoo.client import KazooClient

        client = KazooClient(hosts=connect)
        client.start(timeout=scaled(10))
        try:
            assert sorted(client.get_children("/brokers/ids")) == ["1", "2", "3"]
        finally:
            client.stop()
            client.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(scaled(60)) == 0
        assert "cluster stopped" in proc.stderr.read()
        for i in (1, 2, 3):
            assert (tmp_path / "c" / f"broker-{i}" / "kafkalog-broker.json").exists()
            assert "every leadership moved" in (tmp_path / "c" / f"broker-{i}.log").read_text()
    finally:
        if proc.poll() is None:
            # Ctrl-C first: the supervisor stops its brokers and ZooKeeper (each in its own
            # session, a SIGKILL of the supervisor would leave them running)
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(scaled(60))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_producer_ids_come_from_one_block_sequence_across_brokers(cluster, zk) -> None:
    import struct
    import socket

    def init_producer_id(address: str) -> int:
        host, port = address.rsplit(":", 1)
        # InitProducerId v0: null transactional id, timeout
        body = struct.pack(">hhih", 22, 0, 1, -1) + struct.pack(">hi", -1, 60000)
        with socket.create_connection((host, int(port)), timeout=scaled(10)) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", s.recv(4))[0]
            data = b""
            while len(data) < size:
                data += s.recv(size - len(data))
        _, _, error, producer_id, _ = struct.unpack(">iihqh", data)
        assert error == 0
        return producer_id

    ids = [init_producer_id(b.address) for b in cluster.brokers.values()]
    assert len(set(ids)) == 3 and sorted(i // 1000 for i in ids) == [0, 1, 2]
    block = znode_json(zk, "/latest_producer_id_block")
    assert block["version"] == 1 and block["block_start"] == "2000" and block["block_end"] == "2999"


def test_find_coordinator_names_the_leader_of_the_groups_offsets_partition(cluster, zk) -> None:
    from kafkalog.protocol import partition_for

    # the first FindCoordinator creates __consumer_offsets with offsets.topic.replication.factor 3
    # and answers COORDINATOR_NOT_AVAILABLE (the client retries) while its leaders are elected
    assert _find(cluster, "g1") is None
    wait_until(lambda: zk.exists("/brokers/topics/__consumer_offsets"), 30, "__consumer_offsets created")
    topic = znode_json(zk, "/brokers/topics/__consumer_offsets")
    assert len(topic["partitions"]) == 50 and all(len(r) == 3 for r in topic["partitions"].values())
    assert znode_json(zk, "/config/topics/__consumer_offsets")["config"]["cleanup.policy"] == "compact"
    p = partition_for("g1", 50)
    leader = _wait_state(zk, "__consumer_offsets", lambda s: s["leader"] > 0, p)["leader"]
    wait_until(lambda: _find(cluster, "g1") == leader, 30, "FindCoordinator naming the partition's leader")
    # the other brokers answer the group's requests NOT_COORDINATOR (16)
    # (each broker's view of the partition state arrives by its own watch: wait for it)
    for broker_id, broker in cluster.brokers.items():
        expected = (lambda c: c == 16) if broker_id != leader else (lambda c: c != 16)
        wait_until(lambda b=broker, ok=expected: ok(_heartbeat(b.address, "g1")), 30,
                   f"broker {broker_id} answering as {'the' if broker_id == leader else 'not the'} coordinator")


def _heartbeat(address: str, group: str) -> int:
    """A Heartbeat v0 for ``group`` (generation 0, an unknown member); its error code."""
    import socket
    import struct

    host, port = address.rsplit(":", 1)
    key = group.encode()
    body = (struct.pack(">hhih", 12, 0, 2, -1) + struct.pack(">h", len(key)) + key + struct.pack(">i", 0)
            + struct.pack(">h", 1) + b"m")
    with socket.create_connection((host, int(port)), timeout=scaled(10)) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    return struct.unpack(">ih", data[:6])[1]


def test_offsets_topic_waits_for_enough_brokers(cluster_factory, zk) -> None:
    cluster_factory.add(1)
    cluster_factory.add(2)
    assert _find(cluster_factory, "g") is None  # 2 alive < offsets.topic.replication.factor 3
    assert not zk.exists("/brokers/topics/__consumer_offsets")


def _find(cluster: Cluster, group: str) -> int | None:
    import socket
    import struct

    broker = next(iter(cluster.brokers.values()))
    host, port = broker.address.rsplit(":", 1)
    key = group.encode()
    body = struct.pack(">hhih", 10, 0, 1, -1) + struct.pack(">h", len(key)) + key
    with socket.create_connection((host, int(port)), timeout=scaled(10)) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    _, error, node = struct.unpack(">ihi", data[:10])
    return node if error == 0 else None
