"""Consumer groups on kafkalog's broker with real clients: kafka-python, confluent-kafka
(librdkafka), aiokafka and kafkajs (from npm, when ``node`` and ``npm`` exist).

Each group member runs in its own process (``group_member.py`` / ``group_member.js``, JSON lines
on stdout, commands on stdin), so a test can SIGKILL one: a member that stops heartbeating.
For every client: subscribe, consume everything exactly once, commit, restart, resume at the
committed offset; two members split a 4-partition topic and take over each other's partitions
when one leaves and when one is killed; committed offsets survive a SIGKILL of the broker.
Session timeouts are short (clients' settings; the broker's ``group.min.session.timeout.ms``
allows them) so the whole file runs in about a minute.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import npm_modules, scaled, wait_until

from kafkalog.broker import Broker
from kafkalog.tools import committed_offsets

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test producer)")
from confluent_kafka import Producer

HERE = Path(__file__).resolve().parent
KAFKAJS_VERSION = "2.2.4"
SESSION_MS = 1500
PARTITIONS = 4
CONFIG = {"num.partitions": str(PARTITIONS), "offsets.topic.num.partitions": "5",
          "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500"}


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


CLIENTS = [
    pytest.param("kafka-python", marks=pytest.mark.skipif(not _has("kafka"), reason="needs kafka-python")),
    pytest.param("confluent"),
    pytest.param("aiokafka", marks=pytest.mark.skipif(not _has("aiokafka"), reason="needs aiokafka")),
    pytest.param("kafkajs"),
]


@pytest.fixture(scope="session")
def kafkajs_modules() -> Path | None:
    """kafkajs installed with npm into the node cache directory (once), or None without node/npm."""
    return npm_modules("kafkajs", KAFKAJS_VERSION)


@pytest.fixture
def client(request, kafkajs_modules) -> str:
    name = request.param
    if name == "kafkajs" and kafkajs_modules is None:
        pytest.skip("needs node and npm (kafkajs is installed from npm)")
    return name


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("groups"), config=CONFIG) as b:
        yield b


class Member:
    """One group member process and the events it reported."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, modules: Path | None,
                 session_ms: int = SESSION_MS) -> None:
        if client == "kafkajs":
            args = ["node", str(HERE / "group_member.js")]
            env = {**os.environ, "NODE_PATH": str(modules)}
        else:
            args = [sys.executable, str(HERE / "group_member.py")]
            env = dict(os.environ)
        self.proc = subprocess.Popen([*args, client, bootstrap, topic, group, str(session_ms)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.messages: list[tuple[int, int, str]] = []
        self.assigned: list[int] | None = None
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            with self._lock:
                self.events.append(event)
                if "msg" in event:
                    self.messages.append(tuple(event["msg"]))
                if "assigned" in event:
                    self.assigned = event["assigned"]

    def has(self, key: str) -> bool:
        with self._lock:
            return any(key in e for e in self.events)

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def commit(self) -> None:
        self.send("commit")
        wait_until(lambda: self.has("committed") or self.has("commit_failed"), 20, "the member committed")
        assert self.has("committed"), self.events

    def _next(self, keys: tuple[str, ...], after: int, seconds: float, what: str) -> dict:
        """The first event after index ``after`` holding one of ``keys`` (or an error: raised)."""
        found: list[dict] = []

        def check() -> bool:
            with self._lock:
                for event in self.events[after:]:
                    if "error" in event:
                        raise AssertionError(f"the member failed: {event['error']}")
                    if any(k in event for k in keys):
                        found.append(event)
                        return True
            return False

        wait_until(check, seconds, what)
        return found[0]

    def try_commit(self) -> dict[int, int] | None:
        """One commit of what the member consumed: {partition: offset}, or None when its client
        reported the commit failed (a coordinator moving)."""
        with self._lock:
            after = len(self.events)
        self.send("commit")
        event = self._next(("committed", "commit_failed"), after, 60, "the member's commit answered")
        return {int(p): o for p, o in event["committed"].items()} if "committed" in event else None

    def start_produce(self, start: int, count: int, partitions: int) -> int:
        """Start producing mSTART.. with the member's client (acks=all, idempotent, in the
        background); the mark to pass to ``produced``."""
        with self._lock:
            after = len(self.events)
        self.send(f"produce {start} {count} {partitions}")
        return after

    def produced(self, mark: int) -> dict[str, list[int]]:
        """The outcome of the produce started at ``mark``: {"acked": [i, ...], "failed": [i, ...]}."""
        return self._next(("produced",), mark, 150, "the member's produce finished")["produced"]

    def close(self) -> None:
        self.send("close")
        wait_until(lambda: self.has("closed") or self.has("error"), 30, "the member left the group")
        self.proc.wait(scaled(20))
        assert not self.has("error"), self.events

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(scaled(10))

    def received(self, n: int, what: str) -> None:
        wait_until(lambda: len(self.messages) >= n or self.has("error"), 30, what)
        assert not self.has("error"), self.events

    def holds(self, partitions: set[int]) -> bool:
        with self._lock:
            return self.assigned is not None and set(self.assigned) == partitions


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "gzip", "log_level": 3})  # kafkajs reads gzip without plugins
    for i in range(start, start + n):
        producer.produce(topic, f"m{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(scaled(15)) == 0


def _stop(*members: Member) -> None:
    for m in members:
        if m.proc.poll() is None:
            m.kill()


@pytest.mark.parametrize("client", CLIENTS, indirect=True)
@pytest.mark.timeout_guard(120)
def test_consume_everything_once_commit_and_resume(broker, client, kafkajs_modules) -> None:
    topic, group = f"once-{client}", f"g-once-{client}"
    produce(broker.bootstrap, topic, 200)
    first = Member(client, broker.bootstrap, topic, group, kafkajs_modules)
    try:
        first.received(200, "every message")
        first.commit()
        first.close()
    finally:
        _stop(first)
    assert sorted(v for _, _, v in first.messages) == sorted(f"m{i}" for i in range(200))  # exactly once
    assert len({(p, o) for p, o, _ in first.messages}) == 200
    produce(broker.bootstrap, topic, 40, start=200)
    second = Member(client, broker.bootstrap, topic, group, kafkajs_modules)
    try:
        second.received(40, "the messages after the committed offsets")
        second.commit()
        second.close()
    finally:
        _stop(second)
    assert sorted(v for _, _, v in second.messages) == sorted(f"m{i}" for i in range(200, 240))
    assert all(o >= 50 for _, o, _ in second.messages)  # each partition resumed at offset 50


@pytest.mark.parametrize("client", CLIENTS, indirect=True)
@pytest.mark.timeout_guard(180)
def test_two_members_split_a_topic_and_take_over(broker, client, kafkajs_modules) -> None:
    topic, group = f"split-{client}", f"g-split-{client}"
    everything = set(range(PARTITIONS))
    produce(broker.bootstrap, topic, 8)
    a = Member(client, broker.bootstrap, topic, group, kafkajs_modules)
    b = c = None
    try:
        wait_until(lambda: a.holds(everything), 30, "the first member holds every partition")
        b = Member(client, broker.bootstrap, topic, group, kafkajs_modules)

        def split(x: Member, y: Member) -> bool:
            with x._lock, y._lock:
                xs, ys = set(x.assigned or ()), set(y.assigned or ())
            return len(xs) == len(ys) == PARTITIONS // 2 and xs | ys == everything

        wait_until(lambda: split(a, b), 40, "two members split the partitions")
        b.close()  # leaves the group
        wait_until(lambda: a.holds(everything), 40, "the remaining member takes over on a leave")
        c = Member(client, broker.bootstrap, topic, group, kafkajs_modules)
        wait_until(lambda: split(a, c), 40, "a new member takes half")
        c.kill()  # stops heartbeating without leaving
        wait_until(lambda: a.holds(everything), 40, "the remaining member takes over after the session timeout")
        before = len(a.messages)
        produce(broker.bootstrap, topic, 20, start=1000)
        wait_until(lambda: {v for _, _, v in a.messages[before:]} >= {f"m{i}" for i in range(1000, 1020)},
                   30, "the survivor reads every partition")
        a.close()
    finally:
        _stop(*(m for m in (a, b, c) if m is not None))


# -- a SIGKILL of the broker --------------------------------------------------------------------------


def _start_broker(log_dir: Path) -> tuple[subprocess.Popen, str]:
    args = [sys.executable, "-m", "kafkalog.broker", "--log-dir", str(log_dir), "--listen", "127.0.0.1:0",
            "--log-level", "WARNING"]
    for key, value in CONFIG.items():
        args += ["--config", f"{key}={value}"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    ready, _, _ = select.select([proc.stdout], [], [], scaled(30))
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("listening on "):
        proc.kill()
        raise AssertionError(f"broker did not start: {line!r}")
    return proc, line.split()[-1]


@pytest.mark.parametrize("client", CLIENTS, indirect=True)
@pytest.mark.timeout_guard(150)
def test_committed_offsets_survive_a_broker_sigkill(tmp_path, client, kafkajs_modules) -> None:
    topic, group = "durable", "g-durable"
    proc, address = _start_broker(tmp_path)
    try:
        produce(address, topic, 100)
        member = Member(client, address, topic, group, kafkajs_modules)
        try:
            member.received(100, "every message")
            member.commit()
        finally:
            proc.send_signal(signal.SIGKILL)  # the member is still in the group
            proc.wait(scaled(10))
            _stop(member)
        committed = committed_offsets(tmp_path, group=group)  # read-only, from the files
        assert {(t, p): c.offset for (_, t, p), c in committed.items()} == {(topic, p): 25 for p in range(PARTITIONS)}
        proc, address = _start_broker(tmp_path)
        produce(address, topic, 8, start=100)
        member = Member(client, address, topic, group, kafkajs_modules)
        try:
            member.received(8, "the messages after the committed offsets")
            member.close()
        finally:
            _stop(member)
        assert sorted(v for _, _, v in member.messages) == sorted(f"m{i}" for i in range(100, 108))
    finally:
        proc.kill()
        proc.wait(scaled(10))


@pytest.mark.skipif(not _has("kafka"), reason="needs kafka-python")
@pytest.mark.timeout_guard(60)
def test_kafka_python_assign_and_seek_with_a_group_id(broker) -> None:
    """kafka-python with a group_id and assign(): fetches, commits and committed() answer."""
    from kafka import KafkaConsumer, TopicPartition

    produce(broker.bootstrap, "assigned", 12)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g-assigned", enable_auto_commit=False,
                             consumer_timeout_ms=3000)
    try:
        tps = [TopicPartition("assigned", p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        values = sorted(m.value.decode() for m in consumer)
        assert values == sorted(f"m{i}" for i in range(12))
        consumer.commit()
        assert [consumer.committed(tp) for tp in tps] == [3] * PARTITIONS
    finally:
        consumer.close()


@pytest.mark.timeout_guard(90)
def test_transactional_producers_fail_fast(broker) -> None:
    """FindCoordinator for a transactional id answers a non-retriable error: each client raises
    its fatal authorization error instead of retrying until a timeout."""
    from confluent_kafka import KafkaException

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-confluent", "log_level": 0})
    with pytest.raises(KafkaException) as caught:
        producer.init_transactions(60)
    error = caught.value.args[0]
    assert error.fatal() and error.code() == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if _has("kafka"):
        from kafka import KafkaProducer
        from kafka.errors import TransactionalIdAuthorizationFailedError

        kp = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="tx-kafka-python", max_block_ms=60_000)
        try:
            with pytest.raises(TransactionalIdAuthorizationFailedError):
                kp.init_transactions()
        finally:
            kp.close(0)
    if _has("aiokafka"):
        import asyncio

        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import TransactionalIdAuthorizationFailed

        async def aio() -> None:
            ap = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="tx-aiokafka")
            try:
                with pytest.raises(TransactionalIdAuthorizationFailed):
                    await asyncio.wait_for(ap.start(), 60)
            finally:
                await ap.stop()

        asyncio.run(aio())
