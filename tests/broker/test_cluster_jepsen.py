"""Issue 26's Jepsen-style test of Kafka's replication guarantees on three ``kafkalog broker``
processes coordinated by a real ZooKeeper server, and the ``acks=all`` refusals.

The scenario: one idempotent ``acks=all`` producer (confluent-kafka) writes sequence numbers to
a topic with replication factor 3 and ``min.insync.replicas=2`` while a nemesis SIGKILLs and
restarts the partition leader, SIGSTOPs a follower past ``replica.lag.time.max.ms`` (the ISR
shrinks) and SIGCONTs it (the ISR expands), kills the controller and expires a broker's
ZooKeeper session. Afterwards a read_committed consumer reads every acknowledged record exactly
once and in order, and ``kafkalog dump`` of the three replicas shows the same records below the
high watermark, offset by offset.

The refusals: with two of three brokers down ``acks=all`` is refused (NOT_ENOUGH_REPLICAS) and
nothing becomes readable while ``acks=1`` still works; a batch appended while the ISR was full
but committed only after it shrank below ``min.insync.replicas`` is answered
NOT_ENOUGH_REPLICAS_AFTER_APPEND (Kafka's ``Partition.checkEnoughReplicasReachOffset``), and
REQUEST_TIMED_OUT when the request's timeout comes first. Every wait is for an event (a znode,
an offset), bounded by :func:`conftest.wait_until`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import scaled, wait_until
from test_broker import RawClient, produce_body
from zk_cluster import (  # noqa: F401 - fixtures
    Cluster,
    cluster_factory,
    needs_zookeeper,
    read_committed,
    wait_for_znode,
    zk,
    zookeeper,
)

from kafkalog import RecordBatchBuilder
from kafkalog import protocol as p
from kafkalog.protocol import ErrorCode

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [needs_zookeeper, pytest.mark.timeout_guard(300)]

TOPIC = "jepsen"
#: Low for the test, so a stopped follower leaves the ISR in seconds (Kafka's default is 30 s),
#: but below the brokers' ZooKeeper session timeout (6 s in zk_cluster), so the leader's ISR
#: check, not the session expiry, removes it.
LAG_MS = 3000


# -- the cluster and its state --------------------------------------------------------------------


def _start_cluster(cluster: Cluster, **config: str) -> None:
    for broker_id in (1, 2, 3):
        cluster.add(broker_id, replica_lag_time_max_ms=str(LAG_MS), **config)


def _create(cluster: Cluster, name: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3, config=config)],
                        operation_timeout=scaled(20))[name].result(scaled(30))


def _state_path(topic: str) -> str:
    return f"/brokers/topics/{topic}/partitions/0/state"


def _state(zk, topic: str) -> dict:
    return wait_for_znode(zk, _state_path(topic))


def _wait_state(zk, topic: str, predicate, what_seconds: float = 60) -> dict:
    return wait_for_znode(zk, _state_path(topic), predicate, what_seconds)


def _wait_full_isr(zk, topic: str) -> dict:
    return _wait_state(zk, topic, lambda s: s["leader"] > 0 and sorted(s["isr"]) == [1, 2, 3], 90)


def _list_offset(address: str, topic: str, isolation_level: int = 0) -> tuple[int, int]:
    """ListOffsets v4 (latest) on one broker: (error code, offset). Read uncommitted that is the
    high watermark, read committed the last stable offset (the same here: no transactions)."""
    with RawClient(address) as raw:
        raw.sock.settimeout(scaled(10))
        _, body = raw.call(p.ApiKey.LIST_OFFSETS, 4, {
            "replica_id": -1, "isolation_level": isolation_level,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                       "timestamp": -1}]}]})
    answer = body["topics"][0]["partitions"][0]
    return answer["error_code"], answer["offset"]


def _wait_serving(address: str, topic: str) -> None:
    """Wait until the broker at ``address`` serves as the partition's leader (it applies the
    partition state by its own ZooKeeper watch, after the znode is written)."""
    wait_until(lambda: _list_offset(address, topic)[0] == ErrorCode.NONE, 30, f"{address} leading {topic}-0")


def _leader_high_watermark(cluster: Cluster, zk, topic: str) -> int:
    leader = _state(zk, topic)["leader"]
    code, offset = _list_offset(cluster.brokers[leader].address, topic)
    assert code == ErrorCode.NONE, f"ListOffsets on leader {leader}: {ErrorCode(code).name}"
    return offset


def _dump(directory: Path) -> list[dict]:
    """Every record of a replica, as ``kafkalog dump --print-data-log --value-decoder string
    --json`` (the CLI, read-only) prints it, in offset order: offset, partition leader epoch, producer
    id and epoch, sequence and value of each."""
    segments = sorted(str(s) for s in directory.glob("*.log"))
    assert segments, f"no segment in {directory}"
    out = subprocess.run([sys.executable, "-m", "kafkalog", "dump", "--files", *segments, "--print-data-log",
                          "--value-decoder", "string", "--json"],
                         capture_output=True, text=True, timeout=scaled(60), check=True).stdout
    records = []
    batch: dict = {}
    for line in out.splitlines():
        entry = json.loads(line)
        if entry.get("type") == "batch":
            batch = entry
        elif entry.get("type") == "record":
            records.append({"offset": entry["offset"], "leader_epoch": batch["partitionLeaderEpoch"],
                            "producer": (batch["producerId"], batch["producerEpoch"]),
                            "sequence": entry["sequence"], "value": entry["value"]})
    return records


# -- the producer -----------------------------------------------------------------------------------


@dataclass
class SequenceProducer:
    """One thread producing sequence numbers (``%08d``) with an idempotent ``acks=all``
    confluent-kafka producer until stopped or ``limit`` records are sent; ``acked`` collects the
    acknowledged ones, ``errors`` every delivery failure."""

    bootstrap: str
    topic: str
    limit: int = 200_000
    acked: list[int] = field(default_factory=list)
    errors: list = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._producer = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": int(scaled(120) * 1000), "queue.buffering.max.messages": 2000,
            "log_level": 0, "error_cb": self._on_error})
        self._thread = threading.Thread(target=self._run, name="jepsen-producer", daemon=True)

    def _on_error(self, err) -> None:
        if err.fatal():
            with self._lock:
                self.errors.append(err)

    def _on_delivery(self, err, message) -> None:
        with self._lock:
            if err is None:
                self.acked.append(int(message.value()))
            else:
                self.errors.append(err)

    def _run(self) -> None:
        while self.sent < self.limit and not self._stop.is_set():
            try:
                self._producer.produce(self.topic, value=b"%08d" % self.sent, on_delivery=self._on_delivery)
            except BufferError:  # the queue is full (no leader yet): wait for deliveries
                self._producer.poll(0.1)
                continue
            self.sent += 1
            # a steady trickle, not a flood: every nemesis step happens mid-stream
            self._producer.poll(0.002)

    def start(self) -> None:
        self._thread.start()

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_for_progress(self, more: int = 50, seconds: float = 60) -> None:
        """Wait until ``more`` further records are acknowledged (the cluster takes writes again)."""
        target = self.acked_count() + more
        wait_until(lambda: self.acked_count() >= target or not self._thread.is_alive(), seconds,
                   f"{more} more acknowledged records")

    def stop_and_flush(self) -> None:
        """Stop producing and wait for every delivery report; the thread must still have been
        producing (below ``limit``), so every nemesis step happened mid-stream."""
        assert self._thread.is_alive(), f"the producer reached its limit of {self.limit} early"
        self._stop.set()
        self._thread.join(scaled(30))
        assert not self._thread.is_alive()
        assert self._producer.flush(scaled(120)) == 0, "records still undelivered"


# -- the nemesis ----------------------------------------------------------------------------------------


def _wait_registered_again(zk, broker_id: int, old_owner: int | None = None) -> None:
    def registered() -> bool:
        stat = zk.exists(f"/brokers/ids/{broker_id}")
        return stat is not None and stat.ephemeralOwner != old_owner

    wait_until(registered, 60, f"broker {broker_id} registered (again)")


def _restart(cluster: Cluster, zk, broker_id: int) -> None:
    """Start a killed broker once its old session's registration is gone (Kafka refuses a
    broker id still registered)."""
    wait_until(lambda: not zk.exists(f"/brokers/ids/{broker_id}"), 60, f"broker {broker_id}'s old session expired")
    cluster.brokers[broker_id].start()
    _wait_registered_again(zk, broker_id)


def kill_and_restart_leader(cluster: Cluster, zk, topic: str, producer: SequenceProducer) -> None:
    """SIGKILL the partition leader; an ISR member takes over and writes go on; restart it and
    wait until it is back in the ISR."""
    before = _wait_full_isr(zk, topic)
    leader = before["leader"]
    cluster.brokers[leader].kill()
    _wait_state(zk, topic, lambda s: s["leader"] not in (leader, -1) and s["leader_epoch"] > before["leader_epoch"])
    producer.wait_for_progress()
    _restart(cluster, zk, leader)
    _wait_full_isr(zk, topic)


def stop_follower_past_lag(cluster: Cluster, zk, topic: str, producer: SequenceProducer) -> None:
    """SIGSTOP a follower: the leader drops it from the ISR after ``replica.lag.time.max.ms``
    and writes go on with two; SIGCONT: it catches up and the leader takes it back."""
    state = _wait_full_isr(zk, topic)
    follower = next(r for r in state["isr"] if r != state["leader"])
    process = cluster.brokers[follower].proc
    process.send_signal(signal.SIGSTOP)
    try:
        _wait_state(zk, topic, lambda s: follower not in s["isr"])
        producer.wait_for_progress()
    finally:
        process.send_signal(signal.SIGCONT)
    _wait_full_isr(zk, topic)


def kill_two_leaders_in_a_row(cluster: Cluster, zk, topic: str, producer: SequenceProducer) -> None:
    """SIGKILL the leader, then the leader elected next: the last broker leads with an ISR of
    one, below ``min.insync.replicas``, so ``acks=all`` is refused (NOT_ENOUGH_REPLICAS, which
    the producer retries) until both are restarted and writes go on."""
    state = _wait_full_isr(zk, topic)
    first = state["leader"]
    cluster.brokers[first].kill()
    second = _wait_state(zk, topic, lambda s: s["leader"] not in (first, -1))["leader"]
    cluster.brokers[second].kill()
    _wait_state(zk, topic, lambda s: s["leader"] not in (first, second, -1) and len(s["isr"]) == 1)
    _restart(cluster, zk, first)
    _restart(cluster, zk, second)
    producer.wait_for_progress()
    _wait_full_isr(zk, topic)


def kill_and_restart_controller(cluster: Cluster, zk, topic: str, producer: SequenceProducer) -> None:
    """SIGKILL the controller (found in /controller): another broker takes the role, with the
    next epoch; restart the old one."""
    _wait_full_isr(zk, topic)
    first = wait_for_znode(zk, "/controller")["brokerid"]
    epoch = int(zk.get("/controller_epoch")[0])
    cluster.brokers[first].kill()
    wait_for_znode(zk, "/controller", lambda c: c["brokerid"] != first, 60)
    assert int(zk.get("/controller_epoch")[0]) > epoch
    producer.wait_for_progress()
    _restart(cluster, zk, first)
    _wait_full_isr(zk, topic)


def expire_session(cluster: Cluster, zk, topic: str, producer: SequenceProducer) -> None:
    """Expire the partition leader's ZooKeeper session: SIGSTOP it past
    ``zookeeper.session.timeout.ms`` until its ephemeral /brokers/ids/N is gone (the controller
    moves the leadership away), then SIGCONT: it finds its session expired and registers
    again under a new one, and follows the new leader."""
    state = _wait_full_isr(zk, topic)
    victim = state["leader"]
    owner = zk.exists(f"/brokers/ids/{victim}").ephemeralOwner
    process = cluster.brokers[victim].proc
    process.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: not zk.exists(f"/brokers/ids/{victim}"), 60, f"broker {victim}'s session expired")
        _wait_state(zk, topic, lambda s: s["leader"] not in (victim, -1))
    finally:
        process.send_signal(signal.SIGCONT)
    _wait_registered_again(zk, victim, owner)
    producer.wait_for_progress()
    _wait_full_isr(zk, topic)


# -- the checks ---------------------------------------------------------------------------------------


def _wait_replicas_agree(cluster: Cluster, zk, topic: str) -> int:
    """Wait until the ISR is all three and every replica holds the records below the leader's
    high watermark, which equals the leader's log end (nothing is in flight); that high watermark."""
    _wait_full_isr(zk, topic)
    ends: dict[int, int] = {}

    def agreed() -> bool:
        high_watermark = _leader_high_watermark(cluster, zk, topic)
        for broker_id, broker in cluster.brokers.items():
            records = _dump(broker.log_dir / f"{topic}-0")
            ends[broker_id] = records[-1]["offset"] + 1 if records else 0
        ends[0] = high_watermark
        return len(set(ends.values())) == 1

    wait_until(agreed, 90, f"the three replicas and the high watermark agreeing (last seen {ends})")
    return ends[0]


def test_acknowledged_records_survive_the_nemesis(cluster_factory, zk) -> None:
    _start_cluster(cluster_factory)
    _create(cluster_factory, TOPIC, {"min.insync.replicas": "2"})
    _wait_full_isr(zk, TOPIC)
    producer = SequenceProducer(cluster_factory.bootstrap, TOPIC)
    producer.start()
    producer.wait_for_progress(100)

    kill_and_restart_leader(cluster_factory, zk, TOPIC, producer)
    stop_follower_past_lag(cluster_factory, zk, TOPIC, producer)
    kill_and_restart_leader(cluster_factory, zk, TOPIC, producer)
    kill_and_restart_controller(cluster_factory, zk, TOPIC, producer)
    expire_session(cluster_factory, zk, TOPIC, producer)
    kill_two_leaders_in_a_row(cluster_factory, zk, TOPIC, producer)
    kill_and_restart_leader(cluster_factory, zk, TOPIC, producer)

    producer.stop_and_flush()
    assert producer.errors == []
    acked = producer.acked
    assert len(acked) == producer.sent  # nothing failed: every record sent was acknowledged
    high_watermark = _wait_replicas_agree(cluster_factory, zk, TOPIC)

    # (a) every acknowledged record once and in order (unacknowledged ones may appear: none here)
    values = [int(v) for v in read_committed(cluster_factory.bootstrap, TOPIC, high_watermark)]
    assert values == sorted(set(values)), "a duplicate or a reordering"
    assert set(acked) <= set(values), f"acknowledged but lost: {sorted(set(acked) - set(values))[:20]}"

    # (b) the replicas are identical below the high watermark, offset by offset
    dumps = {b: [r for r in _dump(broker.log_dir / f"{TOPIC}-0") if r["offset"] < high_watermark]
             for b, broker in cluster_factory.brokers.items()}
    assert [r["offset"] for r in dumps[1]] == list(range(high_watermark))
    assert dumps[1] == dumps[2] == dumps[3]
    assert [int(r["value"]) for r in dumps[1]] == values
    # the nemesis moved the leadership: the records carry several leader epochs
    assert len({r["leader_epoch"] for r in dumps[1]}) > 1


# -- the refusals -----------------------------------------------------------------------------------


def _batch(value: bytes):
    builder = RecordBatchBuilder(2)
    builder.append(b"k", value, timestamp=1_700_000_000_000)
    return builder.build()


def _raw_produce(address: str, topic: str, value: bytes, *, acks: int, timeout_ms: int) -> dict:
    """One Produce v8 of one record over the raw protocol; the partition's answer."""
    body = produce_body(topic, _batch(value), acks=acks)
    body["timeout_ms"] = timeout_ms
    with RawClient(address) as raw:
        raw.sock.settimeout(timeout_ms / 1000 + scaled(30))
        _, answer = raw.call(p.ApiKey.PRODUCE, 8, body)
    return answer["responses"][0]["partition_responses"][0]


def test_acks_all_is_refused_with_two_brokers_down_and_nothing_becomes_readable(cluster_factory, zk) -> None:
    _start_cluster(cluster_factory)
    _create(cluster_factory, "fragile", {"min.insync.replicas": "2"})
    leader = _wait_full_isr(zk, "fragile")["leader"]
    address = cluster_factory.brokers[leader].address
    _wait_serving(address, "fragile")
    first = _raw_produce(address, "fragile", b"before", acks=-1, timeout_ms=int(scaled(30) * 1000))
    assert first["error_code"] == ErrorCode.NONE and first["base_offset"] == 0
    wait_until(lambda: _list_offset(address, "fragile") == (0, 1), 30, "the first record committed")
    for broker_id in {1, 2, 3} - {leader}:
        cluster_factory.brokers[broker_id].kill()
    _wait_state(zk, "fragile", lambda s: s["isr"] == [leader])
    # The leader applies the ISR of one (its own watch) before it refuses: wait for that event.
    # A probe that arrives before it is appended (the leader still counts three in sync) and
    # committed once the ISR of one applies (NOT_ENOUGH_REPLICAS_AFTER_APPEND or a timeout, as
    # Kafka answers): such probes are in the log, a refused one never.
    probes: list[tuple[str, int]] = []

    def refused() -> bool:
        value = f"probe {len(probes)}"
        probes.append((value, _raw_produce(address, "fragile", value.encode(), acks=-1, timeout_ms=5000)["error_code"]))
        return probes[-1][1] == ErrorCode.NOT_ENOUGH_REPLICAS

    wait_until(refused, 30, "acks=all refused with NOT_ENOUGH_REPLICAS")
    appended = [value for value, code in probes if code != ErrorCode.NOT_ENOUGH_REPLICAS]
    assert all(code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                        ErrorCode.REQUEST_TIMED_OUT) for _, code in probes), probes
    before = ["before", *appended]
    wait_until(lambda: _list_offset(address, "fragile") == (0, len(before)), 30, "the appended probes committed")
    assert ErrorCode.NOT_ENOUGH_REPLICAS == 19  # Kafka's number, as clients see it
    # confluent-kafka sees Kafka's code too
    errors: list = []
    strict = confluent_kafka.Producer({"bootstrap.servers": address, "acks": "all", "retries": 0,
                                       "message.timeout.ms": int(scaled(10) * 1000), "log_level": 0})
    strict.produce("fragile", b"refused", on_delivery=lambda err, m: errors.append(err))
    strict.flush(scaled(30))
    assert len(errors) == 1 and errors[0] is not None and errors[0].name() == "NOT_ENOUGH_REPLICAS"
    # refused before the append: the log end, the high watermark and what a consumer reads stay put
    assert _list_offset(address, "fragile") == (0, len(before))
    assert _list_offset(address, "fragile", isolation_level=1) == (0, len(before))
    assert [r["value"] for r in _dump(cluster_factory.brokers[leader].log_dir / "fragile-0")] == before
    # acks=1 needs only the leader
    loose = _raw_produce(address, "fragile", b"loose", acks=1, timeout_ms=5000)
    assert loose["error_code"] == ErrorCode.NONE and loose["base_offset"] == len(before)
    results: list = []
    client = confluent_kafka.Producer({"bootstrap.servers": address, "acks": "1", "log_level": 0})
    client.produce("fragile", b"loose too", on_delivery=lambda err, m: results.append(err))
    client.flush(scaled(30))
    assert results == [None]
    # the ISR of one is the whole ISR: the acks=1 records are committed and readable, the refused never
    expected = [*before, "loose", "loose too"]
    wait_until(lambda: _list_offset(address, "fragile") == (0, len(expected)), 30, "the acks=1 records committed")
    assert read_committed(address, "fragile", len(expected)) == [v.encode() for v in expected]
    assert [r["value"] for r in _dump(cluster_factory.brokers[leader].log_dir / "fragile-0")] == expected


def test_a_batch_committed_after_the_isr_fell_below_min_isr_is_not_enough_replicas_after_append(
        cluster_factory, zk) -> None:
    # a long session timeout: the stopped followers leave the ISR by the leader's lag check
    # (replica.lag.time.max.ms), not by their sessions expiring
    _start_cluster(cluster_factory, zookeeper_session_timeout_ms="30000")
    _create(cluster_factory, "shrinking", {"min.insync.replicas": "2"})
    state = _wait_full_isr(zk, "shrinking")
    leader = state["leader"]
    address = cluster_factory.brokers[leader].address
    _wait_serving(address, "shrinking")
    followers = [cluster_factory.brokers[b].proc for b in state["isr"] if b != leader]
    for process in followers:
        process.send_signal(signal.SIGSTOP)
    try:
        # the ISR is still three: both batches are appended; the first times out waiting
        timed_out = _raw_produce(address, "shrinking", b"timed out", acks=-1, timeout_ms=200)
        assert timed_out["error_code"] == ErrorCode.REQUEST_TIMED_OUT == 7  # Kafka's number
        assert _list_offset(address, "shrinking") == (0, 0)  # appended (base offset 0), not committed
        # the second waits until the leader drops both followers (after replica.lag.time.max.ms):
        # then the high watermark passes it, with an ISR of one below min.insync.replicas 2
        late = _raw_produce(address, "shrinking", b"after append", acks=-1, timeout_ms=int(scaled(60) * 1000))
        assert late["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND == 20  # Kafka's number
        assert _state(zk, "shrinking")["isr"] == [leader]
        # as in Kafka, both batches are in the log and committed: the error says the write is
        # under-replicated, not that it did not happen
        assert _list_offset(address, "shrinking") == (0, 2)
        refused = _raw_produce(address, "shrinking", b"refused", acks=-1, timeout_ms=5000)
        assert refused["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
    finally:
        for process in followers:
            process.send_signal(signal.SIGCONT)
    _wait_full_isr(zk, "shrinking")
    for broker in cluster_factory.brokers.values():
        wait_until(lambda b=broker: [r["value"] for r in _dump(b.log_dir / "shrinking-0")] == ["timed out",
                                                                                               "after append"],
                   60, f"broker {broker.broker_id} replicating both batches")
