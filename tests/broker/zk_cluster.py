"""Fixtures for cluster tests: a real ZooKeeper server (Debian's ``zookeeper`` package) on a
free loopback port, and ``kafkalog broker`` subprocesses joining it. Tests skip, saying why,
when ZooKeeper or kazoo is not installed."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkalog.tools._zookeeper import ZooKeeperServer, find_zookeeper

from conftest import scaled, wait_until

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError
except ImportError:  # pragma: no cover
    KazooClient = None
    NoNodeError = LookupError

needs_zookeeper = pytest.mark.skipif(
    find_zookeeper() is None or KazooClient is None,
    reason="needs a ZooKeeper server (apt-get install zookeeper: .ci/run does it as root) and kazoo "
           '(pip install "kafkalog[cluster]")',
)


@pytest.fixture
def zookeeper(tmp_path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper server on 127.0.0.1 with its data in the test's temporary directory."""
    server = ZooKeeperServer(tmp_path / "zookeeper")
    server.start(timeout_s=scaled(30))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk(zookeeper) -> Iterator[KazooClient]:
    """A kazoo client of the test's own, to look at the znodes."""
    client = KazooClient(hosts=zookeeper.connect)
    client.start(timeout=scaled(10))
    try:
        yield client
    finally:
        client.stop()
        client.close()


@dataclass
class BrokerProcess:
    broker_id: int
    log_dir: Path
    config: dict[str, str]
    proc: subprocess.Popen | None = None
    address: str = ""
    stderr_path: Path | None = None

    def start(self) -> None:
        """Start the broker process: on a free port the first time, on the same port when
        restarted (as a Kafka broker comes back at its listener's address: a client whose
        bootstrap brokers have all been restarted still finds the cluster)."""
        listen = self.address or "127.0.0.1:0"
        args = [sys.executable, "-m", "kafkalog.broker", "--log-dir", str(self.log_dir),
                "--listen", listen, "--log-level", "INFO"]
        for key, value in self.config.items():
            args += ["--config", f"{key}={value}"]
        self.stderr_path = self.log_dir.with_suffix(".stderr")
        err = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        err.close()
        ready, _, _ = select.select([self.proc.stdout], [], [], scaled(30))
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("listening on "):
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"broker {self.broker_id} did not start: {line!r}\n{self.stderr()}")
        self.address = line.split()[-1]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path else ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(scaled(10))

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM (a controlled shutdown) and wait for the exit; its status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(scaled(timeout))


@dataclass
class Cluster:
    zookeeper: ZooKeeperServer
    root: Path
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)

    def add(self, broker_id: int, **config: str) -> BrokerProcess:
        settings = {"broker.id": str(broker_id), "zookeeper.connect": self.zookeeper.connect,
                    "zookeeper.session.timeout.ms": "6000", "controlled.shutdown.retry.backoff.ms": "200",
                    **{k.replace("_", "."): v for k, v in config.items()}}
        broker = BrokerProcess(broker_id, self.root / f"broker-{broker_id}", settings)
        self.brokers[broker_id] = broker
        broker.start()
        return broker

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values() if b.alive)

    def stop(self) -> None:
        for broker in self.brokers.values():
            if broker.alive:
                broker.proc.send_signal(signal.SIGKILL)
                broker.proc.wait(scaled(10))


@pytest.fixture
def cluster_factory(zookeeper, tmp_path) -> Iterator[Cluster]:
    """An empty cluster: ``cluster.add(id, **config)`` starts a broker (config keys with '_'
    for '.'); every broker is killed afterwards."""
    cluster = Cluster(zookeeper, tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(cluster_factory) -> Cluster:
    """ZooKeeper and three brokers (ids 1, 2, 3)."""
    for broker_id in (1, 2, 3):
        cluster_factory.add(broker_id)
    return cluster_factory


def znode_json(zk: KazooClient, path: str):
    data, _ = zk.get(path)
    return json.loads(data)


def wait_for_znode(zk: KazooClient, path: str, predicate=lambda value: True, seconds: float = 20):
    """Wait (bounded) until ``path`` exists and its JSON satisfies ``predicate``; its JSON."""
    found = []

    def check() -> bool:
        try:
            value = znode_json(zk, path)
        except NoNodeError:  # absent, or deleted between two looks
            return False
        if predicate(value):
            found[:] = [value]
            return True
        return False

    wait_until(check, seconds, f"{path} matching the condition")
    return found[0]


def read_committed(bootstrap: str, topic: str, end: int, group: str = "read-committed-check") -> list[bytes]:
    """Every value a read_committed consumer (confluent-kafka) reads from partition 0 of
    ``topic``, from offset 0 up to ``end`` (exclusive); bounded."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    last = [-1]

    def read_some() -> bool:
        for message in consumer.consume(500, 0.2):
            if message.error() is None:
                values.append(message.value())
                last[0] = message.offset()
        return last[0] >= end - 1

    try:
        if end:
            wait_until(read_some, 90, f"a read_committed consumer reaching offset {end} of {topic}-0")
    finally:
        consumer.close()
    return values
