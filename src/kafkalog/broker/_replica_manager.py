"""The broker's replica side (Kafka's ``ReplicaManager`` with ``Partition``'s leader logic):
which partitions this broker leads or follows, the follower fetcher threads, the leader's view
of its followers, the high watermark, and ISR changes.

**The contract with the coordination layer.** A coordination layer (ZooKeeper's, or a test's
double) constructs the broker with two callables and then tells it each partition's state:

- ``brokers() -> {broker id: (host, port)}``: the live brokers;
- ``alter_isr(topic, partition, leader_epoch, new_isr, partition_epoch) -> int | None``:
  propose an ISR (Kafka's AlterPartition, or a ``zkVersion`` conditional write); the new
  partition epoch, or None when the write lost a race (the leader then waits for the next
  :meth:`ReplicaManager.apply_partition_state`);
- :meth:`ReplicaManager.apply_partition_state` (Kafka's LeaderAndIsr): this broker becomes the
  partition's leader (``makeLeader``), a follower (``makeFollower``: its fetcher for the new
  leader starts with KIP-320 truncation), or, not being a replica, stops serving it;
- :meth:`ReplicaManager.stop_partition` (Kafka's StopReplica).

Both calls are made once the broker is started (they raise RuntimeError before) and return once
applied. ``brokers()`` is called from the event loop and from the fetcher threads, ``alter_isr``
from the broker's thread pool: both must be thread-safe, and ``alter_isr`` may block (a
ZooKeeper write). The coordination layer also sets :attr:`ReplicaManager.controller_id` (what
Metadata answers) and may register :meth:`ReplicaManager.add_role_listener` callbacks (a group
coordinator loading and unloading ``__consumer_offsets`` partitions).

Without a coordination layer the broker is a single node: :class:`ReplicaManager` then uses a
local implementation of both callables (this broker is the only live broker, leads everything
it hosts, with an ISR of itself), and its logs are unreplicated, so the broker behaves as it
always has.

**The leader's rules.** A follower's Fetch (``replica_id`` >= 0) records the follower's log end
(its fetch offset) and when it was last caught up (:class:`FollowerState`); the high watermark
moves to the least log end of the ISR (:meth:`PartitionState.high_watermark_candidate`); a
follower that reaches the high watermark joins the ISR, one not caught up for
``replica.lag.time.max.ms`` leaves it (checked every half of that, as Kafka's
``isr-expiration`` task); both through ``alter_isr``. Each high watermark move wakes the
requests waiting on the partition (acks=all produces and long-polling fetches:
``_Partition.notify``).

Thread safety: the methods the coordination layer calls may be called from any thread (they
run on the broker's event loop and wait for it); everything else belongs to the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import KafkalogError
from ..protocol import ErrorCode
from ._config import topic_defaults
from ._fetcher import FetcherSettings, ReplicaFetcher
from ._partition_state import NO_LEADER, FollowerState, PartitionState

if TYPE_CHECKING:
    from ._state import _BrokerState, _Partition

_log = logging.getLogger(__package__)

BrokersFn = Callable[[], dict[int, tuple[str, int]]]
AlterIsrFn = Callable[[str, int, int, list[int], int], "int | None"]
#: ``(topic, partition, is_leader, leader_epoch)`` after a role change.
RoleListener = Callable[[str, int, bool, int], None]

_MS = 1000
#: Kafka checks the ISR every half of ``replica.lag.time.max.ms`` (``ReplicaManager.startup``).
_ISR_CHECK_FRACTION = 2
#: How long a call from another thread waits for the event loop (role changes may truncate).
_APPLY_TIMEOUT_S = 120
#: How long stopping waits for a fetcher thread (its socket is closed, so it returns at once).
_FETCHER_JOIN_S = 30


def _now_ms() -> int:
    """A monotonic clock in milliseconds (lag is measured, never compared with wall time)."""
    return int(time.monotonic() * _MS)


class ReplicaManager:
    """The partitions' roles and the replication machinery of one broker (see the module
    docstring).

    Args:
        broker: the broker (its state: topics, logs, config, event loop).
        brokers: the coordination layer's live brokers, or None for a single node.
        alter_isr: the coordination layer's ISR proposal, or None for a single node.
    """

    def __init__(self, broker: _BrokerState, *, brokers: BrokersFn | None = None,
                 alter_isr: AlterIsrFn | None = None) -> None:
        if (brokers is None) != (alter_isr is None):
            raise ValueError("brokers and alter_isr are given together (a coordination layer) or not at all")
        self._broker = broker
        self.broker_id = broker.config.node_id
        #: Whether a coordination layer drives this broker (its logs are then replicated).
        self.replicated = brokers is not None
        self._brokers: BrokersFn = brokers if brokers is not None else self._local_brokers
        self._alter_isr: AlterIsrFn = alter_isr if alter_isr is not None else self._local_alter_isr
        #: The controller Metadata names: this broker on a single node; the coordination layer sets it.
        self.controller_id = -1 if self.replicated else self.broker_id
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._listeners: list[RoleListener] = []
        self._tasks: set[asyncio.Task] = set()
        self._loop_thread: int | None = None
        config = broker.config
        self._fetcher_settings = FetcherSettings(
            broker_id=self.broker_id, max_bytes=config.replica_fetch_max_bytes,
            response_max_bytes=config.replica_fetch_response_max_bytes, wait_max_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes, backoff_ms=config.replica_fetch_backoff_ms,
        )

    # -- the single-node coordination -----------------------------------------------------------

    def _local_brokers(self) -> dict[int, tuple[str, int]]:
        return {self.broker_id: (self._broker.advertised_host, self._broker.port)}

    @staticmethod
    def _local_alter_isr(topic: str, partition: int, leader_epoch: int, new_isr: list[int],
                         partition_epoch: int) -> int | None:
        return partition_epoch + 1  # nobody else writes: every proposal wins

    # -- facts ------------------------------------------------------------------------------------

    def brokers(self) -> dict[int, tuple[str, int]]:
        """The live brokers (id -> host, port), as the coordination layer knows them."""
        return dict(self._brokers())

    def initial_state(self, topic: str, index: int, latest_epoch: int | None) -> PartitionState:
        """A newly opened partition's state: on a single node, led here at the log's latest epoch
        (as the broker always did); with a coordination layer, no role until it says."""
        if self.replicated:
            return PartitionState(self.broker_id)
        epoch = latest_epoch if latest_epoch is not None and latest_epoch > 0 else 0
        me = [self.broker_id]
        return PartitionState(self.broker_id, leader=self.broker_id, leader_epoch=epoch, partition_epoch=0,
                              replicas=me, isr=list(me))

    def min_insync_replicas(self, topic: str) -> int:
        """The topic's ``min.insync.replicas`` (its override, else the broker's default)."""
        t = self._broker._topics.get(topic)
        overrides = t.overrides if t is not None else {}
        value = overrides.get("min.insync.replicas", topic_defaults(self._broker.config)["min.insync.replicas"])
        try:
            return int(value)
        except ValueError:
            return 1

    def add_role_listener(self, listener: RoleListener) -> None:
        """Call ``listener(topic, partition, is_leader, leader_epoch)`` on the event loop after
        every role change of a hosted partition (a group coordinator loads its groups when it
        becomes the leader of a ``__consumer_offsets`` partition and unloads them when it stops)."""
        self._listeners.append(listener)

    def _role_changed(self, partition: _Partition) -> None:
        state = partition.state
        for listener in self._listeners:
            try:
                listener(partition.topic, partition.index, state.is_leader, state.leader_epoch)
            except Exception:  # a listener's failure must not undo the role change
                _log.exception("role listener failed for %s-%d", partition.topic, partition.index)

    def fetcher(self, source: int) -> ReplicaFetcher | None:
        """The fetcher thread for a source broker, if one runs (for tests and inspection)."""
        return self._fetchers.get(source)

    # -- the coordination layer's calls (any thread) ------------------------------------------------

    def apply_partition_state(self, topic: str, partition: int, *, leader: int, leader_epoch: int, isr: list[int],
                              replicas: list[int], partition_epoch: int) -> None:
        """Take a partition's state from the coordination layer (Kafka's LeaderAndIsr): become its
        leader, a follower of ``leader``, or stop serving it when this broker is not among
        ``replicas``. Idempotent; a state with an older leader epoch (or the same leader epoch
        and an older or equal partition epoch) is ignored. A partition this broker does not host
        yet is created (its topic with the broker's default settings if unknown).

        Raises:
            RuntimeError: the broker is not started.
            KafkalogError, OSError: the partition's log could not be opened.
        """
        self._on_loop(self._apply(topic, partition, leader, leader_epoch, list(isr), list(replicas), partition_epoch))

    def stop_partition(self, topic: str, partition: int, delete: bool) -> None:
        """Stop serving a partition (Kafka's StopReplica): stop fetching it, refuse its requests
        (NOT_LEADER_OR_FOLLOWER); with ``delete``, delete its log, and the topic here once every
        partition of it hosted here is deleted.

        Raises:
            RuntimeError: the broker is not started.
        """
        self._on_loop(self._stop(topic, partition, delete))

    def _on_loop(self, coro: Any) -> None:
        loop = self._broker._loop
        if loop is None or not loop.is_running():
            coro.close()
            raise RuntimeError("the broker is not started")
        if threading.get_ident() == self._loop_thread:
            # On the loop itself (a coordination task of the broker's): run without waiting.
            task = loop.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        future: concurrent.futures.Future = asyncio.run_coroutine_threadsafe(coro, loop)
        future.result(_APPLY_TIMEOUT_S)

    # -- lifecycle (the event loop) -------------------------------------------------------------------

    async def start(self) -> None:
        """Start the periodic ISR check and high watermark checkpoint (replicated mode only)."""
        self._loop_thread = threading.get_ident()
        if self.replicated:
            self._spawn(self._isr_check_loop())
            self._spawn(self._checkpoint_loop())

    async def stop(self) -> None:
        """Stop the periodic tasks and every fetcher thread (before the logs close)."""
        for task in list(self._tasks):
            task.cancel()
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        for fetcher in fetchers:
            fetcher.shutdown()
        loop = asyncio.get_running_loop()
        for fetcher in fetchers:
            await loop.run_in_executor(None, fetcher.join, _FETCHER_JOIN_S)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- role changes (the event loop) ------------------------------------------------------------------

    async def _apply(self, topic: str, index: int, leader: int, leader_epoch: int, isr: list[int],
                     replicas: list[int], partition_epoch: int) -> None:
        broker = self._broker
        partition = broker._partition(topic, index)
        if self.broker_id not in replicas:
            if partition is not None:
                self._remove_from_fetchers([(topic, index)])
                state = partition.state
                if leader_epoch >= state.leader_epoch:
                    with partition.role_lock:
                        state.leader, state.leader_epoch, state.partition_epoch = leader, leader_epoch, partition_epoch
                        state.replicas, state.isr = replicas, isr
                        state.become_follower()
                    partition.notify()
                    self._role_changed(partition)
            return
        if partition is None:
            partition = await broker._ensure_partition(topic, index)
        state = partition.state
        if leader_epoch < state.leader_epoch or (
            leader_epoch == state.leader_epoch and partition_epoch <= state.partition_epoch
        ):
            _log.debug("ignoring the state of %s-%d at leader epoch %d, partition epoch %d: it has %d, %d", topic, index,
                       leader_epoch, partition_epoch, state.leader_epoch, state.partition_epoch)
            return
        new_epoch = leader_epoch > state.leader_epoch
        if not new_epoch and leader == state.leader:
            # The same leadership with a new ISR or replica set (a partition epoch bump).
            state.partition_epoch, state.replicas, state.isr = partition_epoch, replicas, isr
            state.pending_isr = None
            if state.is_leader:
                now = _now_ms()
                for r in replicas:
                    if r != self.broker_id:
                        state.followers.setdefault(r, FollowerState(last_caught_up_ms=now))
                self._maybe_increment_high_watermark(partition)
            partition.notify()
            return
        # Leader appends wait for the role change (and a change waits for an append under way).
        with partition.role_lock:
            was_leader = state.is_leader
            state.leader_epoch, state.partition_epoch = leader_epoch, partition_epoch
            state.replicas, state.isr = replicas, isr
            state.leader = leader
            if leader == self.broker_id:
                if not was_leader:
                    state.leading_since_epoch = leader_epoch
                self._make_leader(partition)
            else:
                self._make_follower(partition)
        partition.notify()  # waiting produces answer NOT_LEADER_OR_FOLLOWER or re-check; long polls re-read
        self._role_changed(partition)

    def _make_leader(self, partition: _Partition) -> None:
        """Kafka's ``Partition.makeLeader``: stop fetching, record where the epoch starts, reset
        the followers' states, and move the high watermark if the ISR allows it."""
        key = (partition.topic, partition.index)
        self._remove_from_fetchers([key])
        log = partition.log
        state = partition.state
        log.maybe_assign_epoch_start_offset(state.leader_epoch, log.log_end_offset)
        state.become_leader(log.log_end_offset, _now_ms())
        _log.info("broker %d leads %s-%d in epoch %d from offset %d (ISR %s)", self.broker_id, *key,
                  state.leader_epoch, log.log_end_offset, state.isr)
        self._maybe_increment_high_watermark(partition)

    def _make_follower(self, partition: _Partition) -> None:
        """Kafka's ``Partition.makeFollower`` and ``ReplicaManager.makeFollowers``: stop serving
        produce, and (re)start fetching from the new leader, which answers where to truncate."""
        key = (partition.topic, partition.index)
        state = partition.state
        state.become_follower()
        self._remove_from_fetchers([key])
        if state.leader == NO_LEADER:
            _log.info("%s-%d has no leader (epoch %d): not fetching", *key, state.leader_epoch)
            return
        fetcher = self._fetchers.get(state.leader)
        if fetcher is None:
            source = state.leader
            fetcher = ReplicaFetcher(source, lambda: self._brokers().get(source), self._fetcher_settings,
                                     self._fetched_threadsafe)
            self._fetchers[source] = fetcher
        fetcher.add_partitions({key: (partition.log, state.leader_epoch)})
        _log.info("broker %d follows %s-%d from broker %d in epoch %d", self.broker_id, *key, state.leader,
                  state.leader_epoch)

    def stop_fetching(self, keys: list[tuple[str, int]]) -> None:
        """No fetcher writes to these partitions once this returns (their topic is being deleted)."""
        self._remove_from_fetchers(keys)

    def _remove_from_fetchers(self, keys: list[tuple[str, int]]) -> None:
        for source, fetcher in list(self._fetchers.items()):
            fetcher.remove_partitions(keys)
            if not fetcher.partition_count:
                # Kafka's shutdownIdleFetcherThreads: the thread goes; its join runs in the background.
                del self._fetchers[source]
                fetcher.shutdown()
                assert self._broker._loop is not None
                self._broker._loop.run_in_executor(None, fetcher.join, _FETCHER_JOIN_S)

    async def _stop(self, topic: str, index: int, delete: bool) -> None:
        partition = self._broker._partition(topic, index)
        if partition is None:
            return
        self._remove_from_fetchers([(topic, index)])
        state = partition.state
        with partition.role_lock:
            state.leader = NO_LEADER
            state.replicas = [r for r in state.replicas if r != self.broker_id]
            # Kafka forgets a stopped partition: the next state given for it is taken even at the
            # same leader epoch.
            state.partition_epoch = -1
            state.become_follower()
        partition.notify()
        self._role_changed(partition)
        if delete:
            await self._broker._delete_partition(topic, index)

    def _fetched_threadsafe(self, keys: list[tuple[str, int]]) -> None:
        """A fetcher changed these follower logs: wake what waits on them (on the loop)."""
        loop = self._broker._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._notify, keys)
            except RuntimeError:
                pass  # the loop closed meanwhile (shutdown)

    def _notify(self, keys: list[tuple[str, int]]) -> None:
        for topic, index in keys:
            partition = self._broker._partition(topic, index)
            if partition is not None:
                partition.notify()

    # -- the leader's rules (the event loop) --------------------------------------------------------------

    def follower_fetched(self, partition: _Partition, replica: int, fetch_offset: int) -> None:
        """A follower's Fetch from ``fetch_offset`` (it has everything below): record it, let it
        join the ISR if it has caught up, and move the high watermark (Kafka's
        ``Partition.updateFollowerFetchState``)."""
        state = partition.state
        follower = state.followers.get(replica)
        if follower is None:
            return  # not a replica of this partition (Kafka answers its fetch all the same)
        log = partition.log
        follower.update(fetch_offset, log.log_end_offset, _now_ms())
        expanded = state.isr_to_expand(replica, log.high_watermark)
        if expanded is not None:
            self._propose_isr(partition, expanded)
        self._maybe_increment_high_watermark(partition)

    def _maybe_increment_high_watermark(self, partition: _Partition) -> bool:
        """Move the leader's high watermark to the least log end of the ISR (Kafka's
        ``maybeIncrementLeaderHW``), waking the requests waiting on it; whether it moved."""
        log = partition.log
        if not log.replicated or not partition.state.is_leader or log.closed:
            return False
        candidate = partition.state.high_watermark_candidate(log.log_end_offset)
        if candidate <= log.high_watermark:
            return False
        try:
            log.maybe_increment_high_watermark(min(candidate, log.log_end_offset))
        except (ValueError, KafkalogError):
            return False
        partition.notify()
        return True

    def after_append(self, partition: _Partition) -> None:
        """A leader append: with an ISR of one the high watermark moves now."""
        self._maybe_increment_high_watermark(partition)

    async def await_replication(self, waiting: list[tuple[_Partition, int, int]], timeout_ms: int) -> list[ErrorCode]:
        """Kafka's DelayedProduce for acks=all: each ``(partition, required offset, leader
        epoch of the append)`` waits until the partition's high watermark reaches the required
        offset, then answers NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
        ``min.insync.replicas`` meanwhile, or NOT_LEADER_OR_FOLLOWER when leadership moved;
        REQUEST_TIMED_OUT once ``timeout_ms`` is over. Woken by the partitions' high watermark
        moves and role changes (``_Partition.notify``), never by polling. Also for a
        coordinator's own appends (an offset commit is acks=all in Kafka)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, timeout_ms) / _MS
        codes: list[ErrorCode | None] = [None] * len(waiting)
        pending = list(range(len(waiting)))
        while True:
            still = []
            for i in pending:
                partition, required, epoch = waiting[i]
                code = self._replication_result(partition, required, epoch)
                if code is None:
                    still.append(i)
                else:
                    codes[i] = code
            pending = still
            remaining = deadline - loop.time()
            if not pending or remaining <= 0 or self._broker._stopping:
                break
            waiter = loop.create_future()
            for i in pending:
                waiting[i][0].waiters.add(waiter)
            try:
                await asyncio.wait({waiter}, timeout=remaining)
            finally:
                for i in pending:
                    waiting[i][0].waiters.discard(waiter)
        return [ErrorCode.REQUEST_TIMED_OUT if code is None else code for code in codes]

    def _replication_result(self, partition: _Partition, required: int, epoch: int) -> ErrorCode | None:
        """Kafka's ``Partition.checkEnoughReplicasReachOffset``: None while waiting."""
        state = partition.state
        # Kafka asks only whether this broker still leads: a new leader epoch of the same
        # leadership (the controller's ISR shrink after a follower died) keeps the produce
        # waiting; a leadership lost since the append (even if regained) answers it, as Kafka's
        # makeFollower did at the loss.
        if not state.is_leader or epoch < state.leading_since_epoch or partition.log.closed:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER  # moved, deleted or shutting down: retriable
        if partition.log.high_watermark < required:
            return None
        if len(state.maximal_isr) < self.min_insync_replicas(partition.topic):
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def _propose_isr(self, partition: _Partition, new_isr: list[int]) -> None:
        """Send an ISR proposal through ``alter_isr`` (one in flight a partition, as Kafka's
        AlterPartitionManager); the answer is applied on the loop."""
        state = partition.state
        state.pending_isr = new_isr
        epoch, partition_epoch = state.leader_epoch, state.partition_epoch
        key = (partition.topic, partition.index)
        _log.info("broker %d proposes ISR %s for %s-%d (was %s)", self.broker_id, new_isr, *key, state.isr)

        async def propose() -> None:
            try:
                result = await self._broker._in_executor(self._alter_isr, key[0], key[1], epoch, new_isr,
                                                         partition_epoch)
            except Exception:  # the coordination layer's failure must not kill the loop's task
                _log.exception("alter_isr for %s-%d failed", *key)
                result = None
            if state.leader_epoch != epoch or state.pending_isr is not new_isr:
                return  # a newer state arrived meanwhile
            state.pending_isr = None
            if result is None:
                _log.info("ISR proposal for %s-%d lost a race: waiting for the next partition state", *key)
                return
            state.isr, state.partition_epoch = list(new_isr), max(state.partition_epoch, result)
            self._maybe_increment_high_watermark(partition)
            partition.notify()

        self._spawn(propose())

    async def _isr_check_loop(self) -> None:
        """Kafka's ``isr-expiration`` task: every half of ``replica.lag.time.max.ms``, drop the
        followers not caught up for that long from the ISR of each partition led here."""
        lag = self._broker.config.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(lag / _ISR_CHECK_FRACTION / _MS)
            self.check_isr()

    def check_isr(self) -> None:
        """One ISR check (the periodic task's body)."""
        lag = self._broker.config.replica_lag_time_max_ms
        now = _now_ms()
        for partition in self._broker._hosted_partitions():
            state = partition.state
            if state.is_leader and not partition.log.closed:
                shrunk = state.isr_to_shrink(now, lag)
                if shrunk is not None:
                    self._propose_isr(partition, shrunk)

    async def _checkpoint_loop(self) -> None:
        """Write every replica's high watermark every
        ``replica.high.watermark.checkpoint.interval.ms`` (Kafka's ``highwatermark-checkpoint``)."""
        interval = self._broker.config.replica_high_watermark_checkpoint_interval_ms / _MS
        while True:
            await asyncio.sleep(interval)
            logs = [p.log for p in self._broker._hosted_partitions() if not p.log.closed]
            if logs:
                await self._broker._in_executor(_checkpoint_all, logs)


def _checkpoint_all(logs: list) -> None:
    """Each replica writes its line of the directory's ``replication-offset-checkpoint``."""
    for log in logs:
        try:
            log.checkpoint_high_watermark()
        except (KafkalogError, OSError) as e:
            _log.error("high watermark checkpoint of %s failed: %s", log.directory, e)
