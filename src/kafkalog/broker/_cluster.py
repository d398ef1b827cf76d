"""A broker's membership of a ZooKeeper-coordinated cluster: registration, the metadata cache,
the controller role, and the delivery of partition states to the replica manager.

**How a broker learns partition state.** ZooKeeper-mode Kafka's controller pushes
LeaderAndIsr and UpdateMetadata requests to every broker. Here each broker watches the znodes
instead — ``/brokers/ids`` (the live brokers), ``/controller``, ``/brokers/topics`` and every
topic's assignment and partition ``state`` — and keeps the answer in a :class:`MetadataCache`
that Metadata and FindCoordinator read. No inter-broker control RPC exists; the controller only
writes znodes. (docs/broker.md lists this as a deliberate difference.) For each partition this
broker replicates, every new state (leader, leader epoch, ISR, replicas, and the state znode's
version as the partition epoch) goes to ``ReplicaManager.apply_partition_state`` on the event
loop, in the order ZooKeeper reported them; a deleted topic's replicas go to ``stop_partition``.

**Sessions.** When the session expires ZooKeeper removes this broker's ephemeral znodes; on the
new session the broker registers again and contests the controller role again (Kafka's
``SessionExpirationListener``). kazoo's watches re-arm themselves on the new session.

**Controlled shutdown** (``controlled.shutdown.enable``) is a ZooKeeper exchange rather than
Kafka's ControlledShutdown request (key 7): the broker creates the ephemeral
``/kafkalog/controlled_shutdown/<id>``, the controller moves every leadership it can away and
writes the partitions it could not move into that znode, and the broker retries up to
``controlled.shutdown.max.retries`` times, ``controlled.shutdown.retry.backoff.ms`` apart, as
Kafka does, before it stops.

Thread-safety: watch callbacks run on kazoo's thread and only update the cache (atomically
replaced dicts) and hand work to the event loop; the rest runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import KafkalogError
from ._cluster_config import ClusterConfig
from ._controller import Controller
from ._zk import (
    BROKER_IDS_PATH,
    CONTROLLED_SHUTDOWN_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    PREFERRED_ELECTION_PATH,
    UNCLEAN_ELECTION_PATH,
    TOPICS_PATH,
    ZK_ERRORS,
    PartitionState,
    TopicAssignment,
    ZkClient,
    state_path,
    topic_path,
)

_log = logging.getLogger(__package__)


class PartitionListener(Protocol):
    """What the cluster tells about the partitions this broker replicates (the replica
    manager's side of ZooKeeper-mode Kafka's LeaderAndIsr and StopReplica)."""

    def apply_partition_state(self, topic: str, partition: int, *, leader: int, leader_epoch: int,
                              isr: list[int], replicas: list[int], partition_epoch: int) -> Any: ...

    def stop_partition(self, topic: str, partition: int, delete: bool) -> Any: ...


@dataclass
class MetadataCache:
    """What this broker knows of the cluster (Kafka's ``MetadataCache``), replaced piecewise
    by watch callbacks; readers take the current dicts, never iterate a dict being changed."""

    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    controller_id: int = -1
    assignments: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[tuple[str, int], PartitionState] = field(default_factory=dict)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.states.get((topic, partition))

    def leader_of(self, topic: str, partition: int) -> int:
        state = self.states.get((topic, partition))
        return state.leader if state is not None else -1


class ClusterMember:
    """One broker's part in the cluster.

    Args:
        broker_id: ``broker.id``.
        config: the cluster settings.
        topic_unclean: a topic's ``unclean.leader.election.enable`` override, or None.
    """

    def __init__(self, broker_id: int, config: ClusterConfig,
                 topic_unclean: Callable[[str], bool | None]) -> None:
        assert config.zookeeper_connect is not None
        self.broker_id = broker_id
        self.config = config
        self.zk = ZkClient(config.zookeeper_connect, session_timeout_ms=config.session_timeout_ms,
                           connection_timeout_ms=config.connect_timeout_ms)
        self.cache = MetadataCache()
        self.controller = Controller(self.zk, broker_id, config, topic_unclean)
        self._listener: PartitionListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deliveries: asyncio.Queue | None = None
        self._delivery_task: asyncio.Task | None = None
        self._watched_topics: set[str] = set()
        self._watch_lock = threading.Lock()
        self._address: tuple[str, int] | None = None
        self._stopping = False
        #: Set whenever the cache changes (for waits on the event loop).
        self._changed: asyncio.Event | None = None
        self.cluster_id = ""

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self, host: str, port: int, proposed_cluster_id: str, listener: PartitionListener) -> None:
        """Connect, register ``/brokers/ids/<id>``, start watching and contest the controller.

        Raises:
            KafkalogError: ZooKeeper did not answer, or the broker id is taken.
        """
        self._loop = asyncio.get_running_loop()
        self._listener = listener
        self._deliveries = asyncio.Queue()
        self._changed = asyncio.Event()
        self._address = (host, port)
        self._delivery_task = asyncio.create_task(self._deliver())
        await self._loop.run_in_executor(None, self._start_blocking, proposed_cluster_id)
        _log.info("broker %d joined the cluster %s through ZooKeeper at %s", self.broker_id, self.cluster_id,
                  self.config.zookeeper_connect)

    def _start_blocking(self, proposed_cluster_id: str) -> None:
        self.zk.start()
        try:
            self.cluster_id = self.zk.cluster_id(proposed_cluster_id)
            assert self._address is not None
            self.zk.register_broker(self.broker_id, *self._address)
            self.zk.on_session(self._on_session)
            self.zk.watch_children(BROKER_IDS_PATH, self._on_brokers)
            self.zk.watch_data(CONTROLLER_PATH, self._on_controller)
            self.zk.watch_children(TOPICS_PATH, self._on_topics)
            self.zk.watch_children(DELETE_TOPICS_PATH, lambda _: self.controller.notify("delete"))
            self.zk.watch_children(CONTROLLED_SHUTDOWN_PATH, lambda _: self.controller.notify("shutdown"))
            self.zk.watch_data(PREFERRED_ELECTION_PATH, lambda *_: self.controller.notify("preferred"))
            self.zk.watch_data(UNCLEAN_ELECTION_PATH, lambda *_: self.controller.notify("unclean"))
            self.controller.start()
        except BaseException:
            self.zk.stop()
            raise

    async def controlled_shutdown(self) -> bool:
        """Move this broker's leaderships away through the controller (bounded retries);
        whether none remained."""
        if self._loop is None or not self.config.controlled_shutdown:
            return False  # never started, or not asked for
        return await self._loop.run_in_executor(None, self._controlled_shutdown_blocking)

    def _controlled_shutdown_blocking(self) -> bool:
        self._stopping = True
        wait_s = self.config.request_timeout_ms / 1000
        for attempt in range(1, self.config.controlled_shutdown_max_retries + 1):
            try:
                self.zk.request_controlled_shutdown(self.broker_id)
                self.controller.notify("shutdown")
                remaining = self.zk.await_controlled_shutdown_answer(self.broker_id, wait_s)  # request.timeout.ms
                if remaining == []:
                    _log.info("controlled shutdown of broker %d: every leadership moved", self.broker_id)
                    return True
                _log.warning("controlled shutdown of broker %d, attempt %d: %s", self.broker_id, attempt,
                             "no answer from the controller" if remaining is None
                             else f"{len(remaining)} partitions could not be moved")
                self.zk.finish_controlled_shutdown(self.broker_id)
            except ZK_ERRORS as e:
                _log.warning("controlled shutdown of broker %d, attempt %d failed: %s", self.broker_id, attempt, e)
            time.sleep(self.config.controlled_shutdown_backoff_ms / 1000)
        return False

    async def stop(self) -> None:
        """Stop the controller role and close the session (the registration vanishes)."""
        self._stopping = True
        if self._loop is None:  # never started: nothing connected
            return
        await self._loop.run_in_executor(None, self._stop_blocking)
        if self._delivery_task is not None:
            self._delivery_task.cancel()

    def _stop_blocking(self) -> None:
        self.controller.stop()
        self.zk.stop()

    # -- watches (kazoo's thread) --------------------------------------------------------------------

    def _on_session(self, what: str) -> None:
        if what != "new" or self._stopping:
            return
        _log.warning("broker %d: new ZooKeeper session; registering again", self.broker_id)
        threading.Thread(target=self._reregister, name="kafkalog-zk-reregister", daemon=True).start()

    def _reregister(self) -> None:
        assert self._address is not None
        for _ in range(20):  # bounded: the session may be flapping
            try:
                self.zk.register_broker(self.broker_id, *self._address)
                break
            except ZK_ERRORS as e:
                _log.warning("registering broker %d again failed: %s", self.broker_id, e)
                time.sleep(0.5)
        self.controller.notify("session")

    def _on_brokers(self, children: list[str]) -> None:
        try:
            brokers = self.zk.brokers()
        except ZK_ERRORS as e:
            _log.warning("reading the live brokers failed: %s", e)
            brokers = {int(c): self.cache.brokers.get(int(c), ("", -1)) for c in children if c.isdigit()}
        self.cache.brokers = brokers
        self.controller.notify("brokers")
        self._post(None)

    def _on_controller(self, data: bytes | None, version: int | None) -> None:
        holder = -1
        if data:
            try:
                holder = int(json.loads(data)["brokerid"])
            except (ValueError, KeyError, TypeError):
                holder = -1
        self.cache.controller_id = holder
        if self._listener is not None and hasattr(self._listener, "controller_id"):
            self._listener.controller_id = holder  # what the replica manager's Metadata names
        self.controller.notify("elect")
        self._post(None)

    def _on_topics(self, children: list[str]) -> None:
        with self._watch_lock:
            new = [t for t in children if t not in self._watched_topics]
            self._watched_topics.update(new)
        for topic in new:
            self.zk.watch_data(topic_path(topic), lambda data, version, t=topic: self._on_topic(t, data, version))
        self.controller.notify("topics")

    def _on_topic(self, topic: str, data: bytes | None, version: int | None) -> bool | None:
        if data is None:
            old = self.cache.assignments.get(topic)
            assignments = dict(self.cache.assignments)
            assignments.pop(topic, None)
            self.cache.assignments = assignments
            self.cache.states = {k: v for k, v in self.cache.states.items() if k[0] != topic}
            with self._watch_lock:
                self._watched_topics.discard(topic)
            if old is not None:
                for partition, replicas in old.partitions.items():
                    if self.broker_id in replicas:
                        self._post(("stop", topic, partition))
            self._post(None)
            return False  # the watch ends with the topic; a re-created topic gets a new one
        try:
            assignment = TopicAssignment.decode(topic_path(topic), data, version or 0)
        except KafkalogError as e:
            _log.error("%s", e)
            return None
        old = self.cache.assignments.get(topic)
        self.cache.assignments = {**self.cache.assignments, topic: assignment}
        for partition in assignment.partitions:
            if old is None or partition not in old.partitions:
                self.zk.watch_data(state_path(topic, partition),
                                   lambda d, v, t=topic, p=partition: self._on_state(t, p, d, v))
        self.controller.notify("assignment")
        self._post(None)
        return None

    def _on_state(self, topic: str, partition: int, data: bytes | None, version: int | None) -> bool | None:
        assignment = self.cache.assignments.get(topic)
        if data is None:
            if assignment is None:
                return False  # the topic is gone: end this watch
            return None
        try:
            state = PartitionState.decode(state_path(topic, partition), data, version or 0)
        except KafkalogError as e:
            _log.error("%s", e)
            return None
        self.cache.states = {**self.cache.states, (topic, partition): state}
        replicas = assignment.partitions.get(partition, ()) if assignment is not None else ()
        if self.broker_id in replicas:
            self._post(("apply", topic, partition, state, list(replicas)))
        self._post(None)
        return None

    def _post(self, item: Any) -> None:
        """Hand a delivery (or just "the cache changed": None) to the event loop."""
        if self._loop is None or self._deliveries is None or self._loop.is_closed():
            return
        try:
            self._loop.call_soon_threadsafe(self._deliveries.put_nowait, item)
        except RuntimeError:
            pass  # the loop is closing

    # -- the event loop ----------------------------------------------------------------------------

    async def _deliver(self) -> None:
        """Apply partition states in the order ZooKeeper reported them."""
        assert self._deliveries is not None and self._changed is not None
        while True:
            item = await self._deliveries.get()
            if item is not None and self._listener is not None:
                try:
                    if item[0] == "apply":
                        _, topic, partition, state, replicas = item
                        result = self._listener.apply_partition_state(
                            topic, partition, leader=state.leader, leader_epoch=state.leader_epoch,
                            isr=list(state.isr), replicas=replicas, partition_epoch=state.zk_version)
                    else:
                        _, topic, partition = item
                        result = self._listener.stop_partition(topic, partition, True)
                    if inspect.isawaitable(result):
                        await result
                except Exception:  # noqa: BLE001 - one partition's failure must not stop the others'
                    _log.exception("applying %s to %s-%d failed", item[0], item[1], item[2])
            self._changed.set()
            self._changed = asyncio.Event()

    async def wait_for(self, condition: Callable[[MetadataCache], bool], timeout_s: float) -> bool:
        """Wait (bounded) until ``condition(cache)`` holds; whether it does."""
        assert self._loop is not None
        deadline = self._loop.time() + timeout_s
        while not condition(self.cache):
            left = deadline - self._loop.time()
            if left <= 0 or self._changed is None:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                return condition(self.cache)
        return True

    # -- the replica manager's callables --------------------------------------------------------------

    def live_brokers(self) -> dict[int, tuple[str, int]]:
        """Live broker id -> advertised (host, port) (the replica manager's ``brokers``)."""
        return dict(self.cache.brokers)

    def alter_isr(self, topic: str, partition: int, leader_epoch: int, new_isr: list[int],
                  partition_epoch: int) -> int | None:
        """A leader's ISR change as a versioned write of the state znode (ZooKeeper-mode Kafka's
        ``zkVersion`` check, the role AlterPartition plays since): the new partition epoch, or
        None when the znode moved (a new leader, or the controller changed the ISR). Blocking:
        call it from a thread."""
        current = self.cache.partition_state(topic, partition)
        controller_epoch = current.controller_epoch if current is not None else 0
        state = PartitionState(self.broker_id, leader_epoch, tuple(new_isr), controller_epoch, partition_epoch)
        try:
            return self.zk.update_partition_state(topic, partition, state)
        except ZK_ERRORS as e:
            _log.warning("changing the ISR of %s-%d failed: %s", topic, partition, e)
            return None

