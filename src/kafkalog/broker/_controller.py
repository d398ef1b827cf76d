"""The cluster's controller (ZooKeeper-mode Kafka's ``KafkaController`` with its partition and
replica state machines), run by whichever broker holds the ``/controller`` znode.

**Election.** Every broker watches ``/controller``; when it is absent each tries to create it
and increment ``/controller_epoch`` in one multi-op (``_zk.ZkClient.try_become_controller``),
so exactly one wins and its epoch is new. Every later write of the controller carries a check
of the epoch znode's version: a controller that lost its session (a zombie) can write nothing.

**One thread, one decision.** As Kafka's ``ControllerEventManager``, watches only queue events;
one thread takes them and runs :meth:`Controller._reconcile`, which reads the live brokers, the
brokers shutting down, the deletion and election requests and every partition's assignment and
state, and writes what the rules below require. Events queued meanwhile are coalesced: one pass
reads the newest state, so a burst of watches costs one pass.

**Rules** (Kafka's ``PartitionStateMachine``/``ReplicaStateMachine``/``Election``):

- a new partition (no state znode) gets ``leader`` = its first live replica in assignment
  order, ``isr`` = its live replicas, ``leader_epoch`` 0;
- a partition whose leader is dead (or shutting down) gets the first replica in assignment order
  that is live, not shutting down and in the ISR (clean election), with ``leader_epoch`` + 1;
  without one, with ``unclean.leader.election.enable`` (the topic's, else the broker's) the first
  live replica becomes leader with ISR [itself]; otherwise the leader is -1 (offline) and the ISR
  keeps its last member, so the partition waits for an ISR member to return;
- a dead or shutting-down follower leaves the ISR (``leader_epoch`` + 1, as ZooKeeper-mode Kafka
  bumps it on every controller change), except the ISR's last member;
- a preferred-leader election (``/admin/preferred_replica_election``, ElectLeaders, or the
  automatic rebalance) makes the first replica leader when it is live and in the ISR;
- an unclean election asked by ElectLeaders UNCLEAN (``/kafkalog/unclean_leader_election``)
  elects a partition without a live leader as if ``unclean.leader.election.enable`` were true
  for it, whatever the topic's setting (Kafka's ``OfflinePartitionLeaderElectionStrategy(
  allowUnclean = true)`` for an admin-triggered election);
- a controlled shutdown (``/kafkalog/controlled_shutdown/<id>``) moves every leadership of that
  broker away, and the controller answers in the znode with what it could not move;
- a topic in ``/admin/delete_topics`` loses its znodes (brokers then drop their replicas).

Thread-safety: :meth:`notify` may be called from any thread; the rest runs on its own thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from ..errors import KafkalogError
from ._cluster_config import ClusterConfig
from ._zk import NO_LEADER, ZK_ERRORS, PartitionState, ZkClient

_log = logging.getLogger(__package__)

#: How long to wait before retrying a pass that failed (ZooKeeper unreachable meanwhile), in s.
_RETRY_S = 0.5
#: How long :meth:`Controller.stop` waits for the thread, in seconds.
_STOP_S = 10


class Controller:
    """The controller role of one broker: contests ``/controller`` and, while it holds it,
    keeps every partition's leader and ISR by Kafka's rules.

    Args:
        zk: the broker's ZooKeeper session.
        broker_id: this broker's id.
        config: the cluster settings (unclean election default, rebalance settings).
        topic_unclean: ``topic -> bool | None``: a topic's ``unclean.leader.election.enable``
            override (None: the broker's).
    """

    def __init__(self, zk: ZkClient, broker_id: int, config: ClusterConfig,
                 topic_unclean: Callable[[str], bool | None]) -> None:
        self._zk = zk
        self._id = broker_id
        self._config = config
        self._topic_unclean = topic_unclean
        self._events: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._epoch: int | None = None
        self._epoch_version: int | None = None
        self._next_rebalance = 0.0
        #: Leader elections this controller made (for tests and logs).
        self.elections = 0

    @property
    def active(self) -> bool:
        """Whether this broker is the controller."""
        return self._epoch is not None

    @property
    def epoch(self) -> int | None:
        """The controller epoch while active."""
        return self._epoch

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"kafkalog-controller-{self._id}", daemon=True)
        self._thread.start()
        self.notify("elect")

    def stop(self) -> None:
        """Stop the thread and give up ``/controller`` (if held)."""
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(_STOP_S)
        if self._epoch is not None:
            try:
                self._zk.resign(self._id)
            except ZK_ERRORS as e:
                _log.debug("resigning the controller role failed: %s", e)
            self._epoch = None

    def notify(self, event: str) -> None:
        """Something changed in ZooKeeper (``"elect"``, ``"session"``, or any other name for a
        change to reconcile)."""
        self._events.put(event)

    # -- the event thread ----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            timeout = None
            if self.active and self._config.auto_leader_rebalance:
                timeout = max(0.0, self._next_rebalance - time.monotonic())
            try:
                first = self._events.get(timeout=timeout)
            except queue.Empty:
                first = "rebalance"
            events = {first}
            while True:  # coalesce what queued meanwhile
                try:
                    events.add(self._events.get_nowait())
                except queue.Empty:
                    break
            if None in events:
                return
            try:
                self._handle(events)
            except ZK_ERRORS as e:
                _log.warning("controller %d: %s; retrying", self._id, e)
                time.sleep(_RETRY_S)  # the session may be reconnecting: bounded back-off
                self._events.put("retry")

    def _handle(self, events: set[str | None]) -> None:
        if "session" in events and self._epoch is not None:
            # a new session: our /controller node died with the old one (Kafka resigns, then
            # re-contests the election)
            _log.info("controller %d: ZooKeeper session renewed; resigning", self._id)
            self._epoch = None
        if "elect" in events or "session" in events or self._epoch is None:
            self._elect()
        if self._epoch is None:
            return
        rebalance = "rebalance" in events
        if rebalance:
            self._next_rebalance = time.monotonic() + self._config.imbalance_check_interval_s
        self._reconcile(rebalance=rebalance)

    def _elect(self) -> None:
        holder = self._zk.controller()
        if holder == self._id and self._epoch is not None:
            return
        if holder == self._id:
            # our node: this session's (keep the role, with its epoch) or the previous
            # session's (it vanishes with it, and its deletion brings us back here)
            held = self._zk.held_controller_epoch()
            if held is not None:
                self._epoch, self._epoch_version = held
            return
        if holder is not None and holder != self._id:
            if self._epoch is not None:
                _log.info("controller %d: broker %d is the controller now; resigning", self._id, holder)
            self._epoch = None
            return
        won = self._zk.try_become_controller(self._id)
        if won is None:
            self._epoch = None
            return
        self._epoch, self._epoch_version = won
        self._next_rebalance = time.monotonic() + self._config.imbalance_check_interval_s
        _log.info("broker %d is the controller (controller epoch %d)", self._id, self._epoch)

    # -- the rules -------------------------------------------------------------------------------

    def _reconcile(self, *, rebalance: bool) -> None:
        zk = self._zk
        assert self._epoch is not None and self._epoch_version is not None
        live = set(zk.brokers())
        shutting = set(zk.controlled_shutdowns()) & live
        usable = live - shutting
        for topic in zk.topics_to_delete():
            if zk.delete_topic(topic, self._epoch_version):
                _log.info("controller %d: deleted topic %s", self._id, topic)
            else:
                raise KafkalogError("fenced: the controller epoch moved (another controller)")
        preferred = zk.election_request()
        wanted = set(preferred or ())
        forced = zk.election_request(unclean=True)
        forced_unclean = set(forced or ())
        leads_remaining: dict[int, list[tuple[str, int]]] = {b: [] for b in shutting}
        imbalance: dict[int, list[tuple[str, int, PartitionState, tuple[int, ...]]]] = {}
        for topic in zk.topics():
            assignment = zk.assignment(topic)
            if assignment is None:
                continue
            unclean = self._topic_unclean(topic)
            if unclean is None:
                unclean = self._config.unclean_leader_election
            for partition, replicas in sorted(assignment.partitions.items()):
                state = zk.partition_state(topic, partition)
                if state is None:
                    self._initialize(topic, partition, replicas, live)
                    continue
                new = self._next_state(state, replicas, live, usable, unclean or (topic, partition) in forced_unclean,
                                       preferred=(topic, partition) in wanted)
                if new is not None:
                    if zk.update_partition_state(topic, partition, new, self._epoch_version) is None:
                        # a leader's ISR change won the race (or we are fenced): read again
                        self.notify("retry")
                        continue
                    if new.leader != state.leader:
                        self.elections += 1
                        _log.info("controller %d: %s-%d leader %d -> %d (leader epoch %d, isr %s)", self._id,
                                  topic, partition, state.leader, new.leader, new.leader_epoch, list(new.isr))
                    state = new
                if state.leader in leads_remaining and len(replicas) > 0:
                    leads_remaining[state.leader].append((topic, partition))
                if replicas and state.leader != replicas[0] and state.leader != NO_LEADER:
                    imbalance.setdefault(replicas[0], []).append((topic, partition, state, replicas))
        for broker, remaining in leads_remaining.items():
            zk.answer_controlled_shutdown(broker, remaining)
        if preferred is not None:
            zk.finish_election()
        if forced is not None:
            zk.finish_election(unclean=True)
        if rebalance:
            self._rebalance(imbalance, usable)

    def _initialize(self, topic: str, partition: int, replicas: tuple[int, ...], live: set[int]) -> None:
        """NewPartition -> OnlinePartition (``PartitionStateMachine.initializeLeaderAndIsrForPartitions``)."""
        alive = [r for r in replicas if r in live]
        if not alive:
            _log.warning("controller %d: %s-%d has no live replica among %s; it waits", self._id, topic,
                         partition, list(replicas))
            return
        assert self._epoch is not None and self._epoch_version is not None
        state = PartitionState(alive[0], 0, tuple(alive), self._epoch)
        if self._zk.create_partition_state(topic, partition, state, self._epoch_version) is None:
            self.notify("retry")

    def _next_state(self, state: PartitionState, replicas: tuple[int, ...], live: set[int], usable: set[int],
                    unclean: bool, *, preferred: bool) -> PartitionState | None:
        """The state the rules want for one partition, or None when it is right as it is."""
        assert self._epoch is not None
        isr = list(state.isr)
        leader = state.leader
        if leader == NO_LEADER or leader not in usable:
            clean = [r for r in replicas if r in usable and r in isr]
            if clean:
                leader = clean[0]
                isr = [r for r in isr if r in usable]
            elif leader in live and leader != NO_LEADER:
                # a controlled shutdown with no other ISR member to take over: the broker keeps
                # leading (Kafka's ControlledShutdownLeaderSelector never elects uncleanly)
                isr = [r for r in isr if r in live]
            elif unclean and any(r in usable for r in replicas):
                leader = next(r for r in replicas if r in usable)
                isr = [leader]
            else:
                leader = NO_LEADER
                # Kafka keeps the ISR's last member, so that only it (or an unclean election)
                # can lead again: nothing acknowledged is lost silently.
                remaining = [r for r in isr if r in usable]
                isr = remaining or ([state.leader] if state.leader in isr else isr[:1])
        else:
            remaining = [r for r in isr if r in usable]
            isr = remaining if remaining else isr
            if preferred and replicas and replicas[0] != leader and replicas[0] in usable and replicas[0] in isr:
                leader = replicas[0]
        if leader == state.leader and tuple(isr) == state.isr:
            return None
        return PartitionState(leader, state.leader_epoch + 1, tuple(isr), self._epoch, state.zk_version)

    def _rebalance(self, imbalance: dict[int, list[tuple[str, int, PartitionState, tuple[int, ...]]]],
                   usable: set[int]) -> None:
        """``KafkaController.checkAndTriggerAutoLeaderRebalance``: for each broker whose share of
        partitions it does not lead although preferred exceeds
        ``leader.imbalance.per.broker.percentage``, elect it where it is live and in the ISR."""
        if not imbalance:
            return
        preferred_counts: dict[int, int] = {}
        for topic in self._zk.topics():
            assignment = self._zk.assignment(topic)
            for replicas in (assignment.partitions.values() if assignment else ()):
                if replicas:
                    preferred_counts[replicas[0]] = preferred_counts.get(replicas[0], 0) + 1
        chosen = []
        for broker, items in imbalance.items():
            total = preferred_counts.get(broker, 0)
            if broker not in usable or not total or len(items) * 100 / total <= self._config.imbalance_percentage:
                continue
            chosen.extend((t, p) for t, p, state, _ in items if broker in state.isr)
        if chosen:
            _log.info("controller %d: leader imbalance; electing the preferred leaders of %d partitions",
                      self._id, len(chosen))
            self._zk.request_election(chosen)
