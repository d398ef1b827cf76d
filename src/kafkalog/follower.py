"""A follower's decisions that hold no network state: how far to truncate after a leader change,
and how to take what a fetch returned (Kafka's ``AbstractFetcherThread`` and
``ReplicaFetcherThread``, as pure functions over a :class:`~kafkalog.log.Log` and the leader's
answers).

A follower that becomes one (or whose fetch the leader answers with a diverging epoch) must cut
its log back to where it agrees with the leader's before it appends anything, or two replicas
could hold different records at one offset:

- **KIP-101**: ask the leader for the end offset of the follower's latest epoch
  (OffsetsForLeaderEpoch) and truncate to it, not to the high watermark (which may be stale and
  lose committed records, or keep records the new leader never had).
- **KIP-279**: when the leader answers with an epoch the follower does not know, truncate to the
  end of the follower's largest epoch below it and ask again (:attr:`Truncation.completed` is
  False): the logs may diverge more than once.
- **KIP-320**: a leader that sees a follower's fetch diverge answers with the diverging epoch and
  its end offset (:meth:`Log.diverging_epoch`); the follower truncates by the same rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .errors import UnexpectedAppendOffsetError
from .leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, OffsetAndEpoch

if TYPE_CHECKING:
    from .log import Log
    from .log_append import LogAppendInfo
    from .memory_records import MemoryRecords


class Truncation(NamedTuple):
    """Where a follower truncates (Kafka's ``OffsetTruncationState``): ``offset``, and whether it
    is done (``completed``) or must ask the leader again after this cut (KIP-279)."""

    offset: int
    completed: bool


def truncation_for(log: Log, leader: OffsetAndEpoch | None, *, fetch_offset: int) -> Truncation:
    """Where ``log`` truncates given the leader's end offset for the epoch it asked about (the
    OffsetsForLeaderEpoch answer) or a fetch's diverging epoch (Kafka's
    ``getOffsetTruncationState``).

    Args:
        log: the follower's log.
        leader: the leader's answer; None (or an undefined end offset) when the leader could
            not say.
        fetch_offset: where the follower would fetch from without an answer (its high
            watermark, or its log end offset when it tracks epochs): used when the leader's
            answer is undefined.
    """
    if leader is None or leader.offset == UNDEFINED_EPOCH_OFFSET:
        # The leader knows no end for that epoch: fall back to the initial fetch offset.
        return Truncation(fetch_offset, True)
    end = log.log_end_offset
    if leader.leader_epoch == UNDEFINED_EPOCH:
        # An answer without an epoch (old protocol versions): the leader's offset alone.
        return Truncation(min(leader.offset, end), True)
    mine = log.end_offset_for_epoch(leader.leader_epoch)
    if mine is None:
        # The follower tracked no epochs then: the leader's offset (post-KIP-101, pre-KIP-279).
        return Truncation(min(leader.offset, end), True)
    if mine.leader_epoch != leader.leader_epoch:
        # KIP-279: the leader's epoch is unknown here. Cut to the end of the follower's largest
        # epoch below it and ask again with the follower's now latest epoch.
        return Truncation(min(mine.offset, end), False)
    return Truncation(min(mine.offset, leader.offset, end), True)


def truncate(log: Log, truncation: Truncation) -> bool:
    """Apply ``truncation`` to ``log`` (whole batches from ``truncation.offset`` on go; the
    high watermark, epochs and producer state follow). Returns whether anything was removed."""
    return log.truncate_to(truncation.offset)


def append_fetched(log: Log, records: MemoryRecords | bytes | bytearray | memoryview) -> LogAppendInfo:
    """Append a fetch response's records as a follower, recovering as Kafka's
    ``Partition.appendRecordsToFollowerOrFutureReplica`` does when the leader's log start offset
    falls inside the first batch (after DeleteRecords): an empty follower log starts again at
    that batch's first offset.

    Raises:
        UnexpectedAppendOffsetError: the records do not continue the log otherwise.
    """
    try:
        return log.append_as_follower(records)
    except UnexpectedAppendOffsetError as e:
        end = log.log_end_offset
        if (
            end == log.log_start_offset
            and e.first_offset is not None
            and e.last_offset is not None
            and e.first_offset < end <= e.last_offset
        ):
            log.truncate_fully_and_start_at(e.first_offset)
            return log.append_as_follower(records)
        raise


def apply_leader_offsets(log: Log, *, high_watermark: int, log_start_offset: int) -> int | None:
    """Take the leader's high watermark and log start offset from a fetch response, in Kafka's
    order (``ReplicaFetcherThread.processPartitionData``): the high watermark first, clamped to
    the follower's log, then the log start offset. Returns the new high watermark if it moved."""
    moved = log.maybe_update_high_watermark(high_watermark)
    if log_start_offset <= log.high_watermark:
        log.maybe_increment_log_start_offset(log_start_offset, "leader offset incremented")
    return moved


def fetch_offset_after_out_of_range(log: Log, *, leader_log_start_offset: int, leader_log_end_offset: int) -> int:
    """Where a follower fetches from after the leader answered OFFSET_OUT_OF_RANGE (Kafka's
    ``fetchOffsetAndTruncate``): behind an unclean leader, truncate to its end; ahead of the
    leader's start, keep fetching from the log end; behind it, start the log again there."""
    end = log.log_end_offset
    if leader_log_end_offset < end:
        # An unclean election made a replica that was behind the leader: follow its end.
        log.truncate_to(leader_log_end_offset)
        return leader_log_end_offset
    if leader_log_start_offset > end:
        log.truncate_fully_and_start_at(leader_log_start_offset)
        return leader_log_start_offset
    return end
