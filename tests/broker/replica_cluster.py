"""A test-only stand-in for the coordination layer (ZooKeeper's, in production): brokers in this
process on 127.0.0.1, a table of partition states, ``brokers()`` and ``alter_isr()`` with
ZooKeeper's conditional-write semantics, and elections that push the new state to every live
broker with ``apply_partition_state`` (Kafka's LeaderAndIsr). Test code only."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.broker import Broker


@dataclass
class PartitionRecord:
    """What ZooKeeper's ``/brokers/topics/<t>/partitions/<p>/state`` would hold."""

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    partition_epoch: int = 0
    history: list[list[int]] = field(default_factory=list)  # every ISR written, in order


class Cluster:
    """Brokers 0..n-1 under ``root``, and the partition states they are told."""

    def __init__(self, root: Path, size: int, config: dict[str, str] | None = None) -> None:
        self.root = root
        self.size = size
        self.config = dict(config or {})
        self._lock = threading.RLock()
        self.running: dict[int, Broker] = {}
        self.live: dict[int, tuple[str, int]] = {}
        self.partitions: dict[tuple[str, int], PartitionRecord] = {}

    # -- the coordination layer's two callables ------------------------------------------------

    def brokers(self) -> dict[int, tuple[str, int]]:
        with self._lock:
            return dict(self.live)

    def alter_isr(self, topic: str, partition: int, leader_epoch: int, new_isr: list[int],
                  partition_epoch: int) -> int | None:
        """A conditional write: refused when the caller's view (leader epoch, partition epoch)
        is not the current one, as a ``zkVersion`` mismatch is."""
        with self._lock:
            record = self.partitions[(topic, partition)]
            if record.leader_epoch != leader_epoch or record.partition_epoch != partition_epoch:
                return None
            record.isr = sorted(new_isr)
            record.partition_epoch += 1
            record.history.append(list(record.isr))
            return record.partition_epoch

    # -- brokers -------------------------------------------------------------------------------

    def start(self, broker_id: int) -> Broker:
        """Start (or restart) a broker in its own directory; it then learns every partition state."""
        config = {"broker.id": str(broker_id), **self.config}
        broker = Broker(self.root / f"broker{broker_id}", config=config, brokers=self.brokers,
                        alter_isr=self.alter_isr)
        broker.run_in_thread()
        with self._lock:
            self.running[broker_id] = broker
            self.live[broker_id] = (broker.advertised_host, broker.port)
            states = dict(self.partitions)
        for (topic, index), record in states.items():
            self._apply(broker, topic, index, record)
        return broker

    def stop(self, broker_id: int) -> None:
        """Stop a broker cleanly; it leaves the live set first (its ZooKeeper session ends)."""
        with self._lock:
            broker = self.running.pop(broker_id)
            self.live.pop(broker_id, None)
        broker.shutdown()

    def stop_all(self) -> None:
        for broker_id in list(self.running):
            self.stop(broker_id)

    # -- partition states ------------------------------------------------------------------------

    def create_topic(self, topic: str, replicas: list[int], partitions: int = 1) -> None:
        """Each partition led by the first replica in epoch 0, every replica in sync."""
        with self._lock:
            for index in range(partitions):
                self.partitions[(topic, index)] = PartitionRecord(replicas[0], 0, sorted(replicas), list(replicas))
        for index in range(partitions):
            self.push(topic, index)

    def elect(self, topic: str, index: int, leader: int, isr: list[int] | None = None) -> PartitionRecord:
        """A new leader (and ISR) in the next leader epoch, pushed to the live brokers."""
        with self._lock:
            record = self.partitions[(topic, index)]
            record.leader = leader
            record.leader_epoch += 1
            record.partition_epoch += 1
            if isr is not None:
                record.isr = sorted(isr)
        self.push(topic, index)
        return record

    def push(self, topic: str, index: int) -> None:
        with self._lock:
            record = self.partitions[(topic, index)]
            targets = list(self.running.values())
        for broker in targets:
            self._apply(broker, topic, index, record)

    def record(self, topic: str, index: int = 0) -> PartitionRecord:
        with self._lock:
            r = self.partitions[(topic, index)]
            return PartitionRecord(r.leader, r.leader_epoch, list(r.isr), list(r.replicas), r.partition_epoch,
                                   [list(h) for h in r.history])

    @staticmethod
    def _apply(broker: Broker, topic: str, index: int, record: PartitionRecord) -> None:
        broker.replica_manager.apply_partition_state(
            topic, index, leader=record.leader, leader_epoch=record.leader_epoch, isr=list(record.isr),
            replicas=list(record.replicas), partition_epoch=record.partition_epoch)

    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.running.values())
