"""One hosted partition's replication state (Kafka's ``cluster/Partition.scala`` and
``cluster/Replica.scala``): its role, leader epoch, partition epoch, replicas and in-sync
replica set (ISR), and on the leader what each follower's fetches have shown.

The rules live here as methods over plain fields, so that the decisions (when a follower counts
as caught up, who falls out of the ISR, where the high watermark may go) are each in one place;
:class:`~kafkalog.broker._replica_manager.ReplicaManager` applies them to the logs and the
network.

Not thread-safe: a PartitionState belongs to the broker's event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: "No leader" (Kafka's ``LeaderAndIsr.NoLeader``) and an unknown offset or time.
NO_LEADER = -1
_UNKNOWN = -1


@dataclass
class FollowerState:
    """What the leader knows of one follower (Kafka's ``Replica``'s ``ReplicaState``).

    ``log_end_offset`` is the offset of the follower's last Fetch (it has everything below it);
    ``last_caught_up_ms`` the last time it was known to have reached the leader's log end.
    """

    log_end_offset: int = _UNKNOWN
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_log_end_offset: int = _UNKNOWN

    def update(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int) -> None:
        """Kafka's ``Replica.updateFetchStateOrThrow``: a fetch at or past the leader's log end
        makes the follower caught up now; a fetch reaching the log end the leader had at the
        follower's previous fetch makes it caught up as of that previous fetch."""
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_ms = now_ms


@dataclass
class PartitionState:
    """A partition's replication state as the coordination layer last gave it, plus the
    leader's view of its followers.

    Invariants: ``leader_epoch`` and ``partition_epoch`` never go back; ``followers`` holds an
    entry for every replica but this broker while it leads, and nothing otherwise;
    ``pending_isr`` is the ISR of an ``alter_isr`` proposal in flight (None when there is none).
    """

    broker_id: int
    leader: int = NO_LEADER
    leader_epoch: int = _UNKNOWN
    partition_epoch: int = _UNKNOWN
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending_isr: list[int] | None = None
    #: The log end offset when this broker became leader in ``leader_epoch`` (Kafka's
    #: ``leaderEpochStartOffsetOpt``): a follower joins the ISR only once it has reached it.
    leader_epoch_start_offset: int = _UNKNOWN
    #: The leader epoch in which this broker's current, unbroken leadership began (unknown: led
    #: since it opened the partition, as a single node does). A later epoch of the same
    #: leadership (ZooKeeper mode's controller bumps it on every ISR change it makes) does not
    #: move it; losing the leadership and regaining it does.
    leading_since_epoch: int = _UNKNOWN

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    @property
    def is_follower(self) -> bool:
        return self.leader != self.broker_id and self.broker_id in self.replicas

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the high watermark and min.insync.replicas count with while a change is in
        flight (Kafka's ``maximalIsr``): the current ISR plus any replica being added."""
        if self.pending_isr is None:
            return self.isr
        return sorted(set(self.isr) | set(self.pending_isr))

    def become_leader(self, log_end_offset: int, now_ms: int) -> None:
        """Kafka's ``Partition.makeLeader``: every other replica's state starts over (unknown log
        end, caught up as of now, so a slow follower gets ``replica.lag.time.max.ms`` to fetch)."""
        self.leader_epoch_start_offset = log_end_offset
        self.followers = {
            r: FollowerState(last_caught_up_ms=now_ms if r in self.isr else 0)
            for r in self.replicas if r != self.broker_id
        }
        self.pending_isr = None

    def become_follower(self) -> None:
        """Kafka's ``Partition.makeFollower``: the leader-side state is dropped."""
        self.followers = {}
        self.pending_isr = None
        self.leader_epoch_start_offset = _UNKNOWN

    def high_watermark_candidate(self, leader_log_end_offset: int) -> int:
        """Where the leader's high watermark may go: the least log end offset of the (maximal)
        ISR, the leader's own included (Kafka's ``maybeIncrementLeaderHW``); a member not heard
        from since this broker became leader holds it at -1 (no move)."""
        candidate = leader_log_end_offset
        for r in self.maximal_isr:
            if r != self.broker_id:
                follower = self.followers.get(r)
                candidate = min(candidate, _UNKNOWN if follower is None else follower.log_end_offset)
        return candidate

    def isr_to_expand(self, replica: int, high_watermark: int) -> list[int] | None:
        """The ISR with ``replica`` added if it should join (Kafka's ``isFollowerInSync``: its
        log end has reached the high watermark and the start of the leader's epoch), else None."""
        if replica in self.isr or replica not in self.replicas or self.pending_isr is not None:
            return None
        follower = self.followers.get(replica)
        if follower is None:
            return None
        if follower.log_end_offset >= high_watermark and follower.log_end_offset >= self.leader_epoch_start_offset:
            return sorted(set(self.isr) | {replica})
        return None

    def isr_to_shrink(self, now_ms: int, lag_ms: int) -> list[int] | None:
        """The ISR without the followers not caught up for more than ``lag_ms`` (Kafka's
        ``getOutOfSyncReplicas``, ``replica.lag.time.max.ms``), or None when all are in sync."""
        if self.pending_isr is not None:
            return None
        out = [
            r for r in self.isr
            if r != self.broker_id and now_ms - self.followers.get(r, FollowerState()).last_caught_up_ms > lag_ms
        ]
        if not out:
            return None
        return [r for r in self.isr if r not in out]
