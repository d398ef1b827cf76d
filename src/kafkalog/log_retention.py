"""The log start offset and retention of a partition log: the side of Kafka's ``UnifiedLog``
``deleteRecords``/``maybeIncrementLogStartOffset`` and ``deleteOldSegments`` that touches files.

A :class:`LogRetention` is a collaborator of :class:`kafkalog.log.Log`: the log holds one, keeps
its offsets (log start, recovery point, high watermark) and its lock, and delegates to it what
follows a move of the log start offset -- checkpoint before the epoch cache, producer state
after -- and the deletion of the segments retention drops, so those rules read in one place.
The plan itself is :func:`kafkalog.offline_retention.plan_retention`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from .errors import OffsetOutOfRangeError
from .leader_epoch_cache import LeaderEpochFileCache
from .local_log import LocalLog
from .log_config import LogConfig
from .log_directory import LogDir
from .log_segments import LogSegments
from .offline_retention import RetentionPlan, plan_retention
from .producer_state.manager import ProducerStateManager
from .segment import LogSegment

_log = logging.getLogger("kafkalog.log")


class LogRetention:
    """Moves of the log start offset and deletion of old segments for one partition log.

    It holds no offset of its own: the log passes the offsets it keeps to each call. Not
    thread-safe: the log calls it under its lock.

    Args:
        directory: the partition directory (named in errors).
        tp: the partition, as the log directory's checkpoints key it.
        segments: the log's segments (read to plan, entries removed by deletion).
        local: the log's local part, which removes and deletes segment files.
        logdir: the log directory, whose ``log-start-offset-checkpoint`` is written.
        leader_epoch_cache, producer_state: truncated from the start when the start moves.
    """

    def __init__(
        self,
        *,
        directory: Path,
        tp: tuple[str, int],
        segments: LogSegments,
        local: LocalLog,
        logdir: LogDir,
        leader_epoch_cache: LeaderEpochFileCache,
        producer_state: ProducerStateManager,
    ) -> None:
        self._directory = directory
        self._tp = tp
        self._segments = segments
        self._local = local
        self._logdir = logdir
        self._leader_epoch_cache = leader_epoch_cache
        self._producer_state = producer_state

    def check_delete_records(self, before_offset: int, high_watermark: int) -> None:
        """Kafka's DeleteRecords rule: the log start offset never passes the high watermark.

        Raises:
            OffsetOutOfRangeError: ``before_offset`` is above ``high_watermark``.
        """
        if before_offset > high_watermark:
            topic, partition = self._tp
            raise OffsetOutOfRangeError(
                f"cannot increment the log start offset to {before_offset} of partition "
                f"{topic}-{partition} since it is larger than the high watermark {high_watermark}",
                file=str(self._directory),
            )

    def log_start_offset_moved(self, offset: int) -> None:
        """Persist a new log start offset and drop what lies below it."""
        # The checkpoint first: a kill before the epoch cache is truncated leaves entries below
        # the start, which the loader trims; the other order would lose epochs still in use.
        self._logdir.write_offset(self._logdir.log_starts, self._tp, offset)
        self._leader_epoch_cache.truncate_from_start(offset)
        self._producer_state.on_log_start_offset_incremented(offset)

    def plan(
        self, config: LogConfig, now_ms: int, *, log_start_offset: int, log_end_offset: int, high_watermark: int
    ) -> RetentionPlan:
        """What retention would delete now, and why (a dry run)."""
        return plan_retention(
            self._segments.values(),
            config,
            now_ms,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            high_watermark=high_watermark,
        )

    def delete_segments(self, plan: RetentionPlan, *, roll: Callable[[], LogSegment]) -> int:
        """Delete the segments of ``plan`` (Kafka's ``deleteSegments``): renamed ``.deleted`` now,
        removed after ``file.delete.delay.ms``, with their producer snapshots. ``roll`` starts a
        new active segment when the plan deletes the active one. Returns the base offset of the
        first remaining segment: the new log start offset."""
        doomed = [self._segments.get(d.base_offset) for d in plan.deletions]
        if plan.needs_roll:
            new = roll()
            if doomed[-1] is new:
                doomed = doomed[:-1]
        segments = [s for s in doomed if s is not None]
        topic, partition = self._tp
        for d in plan.deletions:
            _log.info("deleting segment %d of %s-%s: %s (%s)", d.base_offset, topic, partition, d.reason, d.detail)
        self._local.remove_and_delete_segments(segments)
        self.delete_producer_snapshots(segments)
        return self._segments.first.base_offset  # type: ignore[union-attr]

    def delete_producer_snapshots(self, segments: list[LogSegment]) -> None:
        """The producer snapshots at the base offsets of deleted ``segments`` go with them
        (renamed ``.deleted`` now, removed after ``file.delete.delay.ms``)."""
        paths = [self._producer_state.remove_and_mark_snapshot_for_deletion(s.base_offset) for s in segments]
        paths = [path for path in paths if path is not None]
        if paths:
            self._local.schedule_unlink(paths)
