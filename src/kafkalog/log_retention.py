"""The log start offset, retention, settings and deletion of a partition log: Kafka's
``UnifiedLog`` ``deleteRecords``/``maybeIncrementLogStartOffset``, ``deleteOldSegments``,
``updateConfig`` and the rename of ``LogManager.asyncDelete``.

A part of :class:`kafkalog.log.Log` (its base class), kept in a module of its own so that
the rules of moving the log start offset -- checkpoint before the epoch cache, producer state
after -- read in one place. The plan itself is :func:`kafkalog.offline_retention.plan_retention`'s.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from .log_config import LogConfig
from .durable import fsync_dir
from .errors import OffsetOutOfRangeError
from .filenames import delete_dir_name
from .offline_retention import RetentionPlan, plan_retention

if TYPE_CHECKING:  # pragma: no cover
    from .leader_epoch_cache import LeaderEpochFileCache
    from .producer_state.manager import ProducerStateManager

_log = logging.getLogger("kafkalog.log")


class LogStartAndRetention:
    """``delete_records``, ``plan_retention``, ``delete_old_segments``, ``update_config`` and
    ``rename_for_delete`` of :class:`~kafkalog.log.Log`
    (which holds the state they use: its lock, segments, offsets and log directory)."""

    directory: Path
    topic: str
    partition: int
    config: LogConfig
    leader_epoch_cache: LeaderEpochFileCache
    producer_state: ProducerStateManager
    _lock: threading.RLock
    _closed: bool
    _tp: tuple[str, int]
    _log_start_offset: int
    _recovery_point: int
    _high_watermark: int

    def update_config(self, config: LogConfig) -> None:
        """Apply new settings to the open log (Kafka's ``updateConfig``, after an AlterConfigs):
        the next append, roll, flush and retention pass read them. Existing segments keep the
        index interval they were created with, as in Kafka."""
        with self._lock:
            self._check_open()
            self.config = config
            self._local.config = config

    def rename_for_delete(self) -> Path:
        """Close the log, drop its checkpoint entries and rename its directory
        ``<topic>-<partition>.<uuid>-delete`` (Kafka's ``LogManager.asyncDelete``), durably; the
        files are removed later by whoever deletes that directory, and a ``-delete`` directory
        found at start is never loaded as a partition. Returns the new path.

        Raises:
            ReadOnlyLogError: a read-only open.
            OSError: the rename failed (the log is closed and forgotten all the same).
        """
        self._close_and_forget()
        target = self.directory.parent / delete_dir_name(self.topic, self.partition)
        os.rename(self.directory, target)
        fsync_dir(self.directory.parent)
        return target

    def _close_and_forget(self) -> None:
        """Close every file without the clean-shutdown work and remove the partition from the
        log directory's checkpoints (the first step of deleting the log)."""
        self._check_writable()
        # Pending background work (the flush after a roll) takes the lock: it runs first.
        self._scheduler.shutdown()
        with self._lock:
            if not self._closed:
                self._closed = True
                self._segments.close()
                self._local.close()
                self._logdir.release(self._tp, self.directory.name, clean=False)
            self._logdir.forget(self._tp)

    def delete_records(self, before_offset: int) -> int:
        """Advance the log start offset to ``before_offset`` (Kafka's DeleteRecords); the
        segments below it go at the next :meth:`delete_old_segments`. Returns the new start.

        Raises:
            OffsetOutOfRangeError: ``before_offset`` is above the high watermark.
        """
        self.maybe_increment_log_start_offset(before_offset, "client delete records request")
        return self._log_start_offset

    def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str) -> bool:
        """Advance the log start offset to ``new_log_start_offset`` if that is higher (Kafka's
        ``maybeIncrementLogStartOffset``): DeleteRecords on a leader, or a follower learning the
        leader's log start offset from a fetch. The epoch cache and producer state follow.
        Returns whether it moved.

        Raises:
            OffsetOutOfRangeError: ``new_log_start_offset`` is above the high watermark.
        """
        with self._lock:
            self._check_open()
            self._check_writable()
            if new_log_start_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot increment the log start offset to {new_log_start_offset} of partition "
                    f"{self.topic}-{self.partition} since it is larger than the high watermark {self.high_watermark}",
                    file=str(self.directory),
                )
            if new_log_start_offset <= self._log_start_offset:
                return False
            _log.info(
                "incrementing the log start offset of %s-%s to %d: %s",
                self.topic, self.partition, new_log_start_offset, reason,
            )
            self._increment_log_start_offset(new_log_start_offset)
            return True

    def _increment_log_start_offset(self, offset: int) -> None:
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        if self._recovery_point < offset:
            self._recovery_point = offset
        if self._high_watermark < offset:
            self._set_high_watermark(offset)
        # The checkpoint first: a kill before the epoch cache is truncated leaves entries below
        # the start, which the loader trims; the other order would lose epochs still in use.
        self._logdir.write_offset(self._logdir.log_starts, self._tp, offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.on_log_start_offset_incremented(offset)

    def plan_retention(self, now_ms: int | None = None) -> RetentionPlan:
        """What :meth:`delete_old_segments` would delete now, and why (a dry run)."""
        now = self._clock() if now_ms is None else now_ms
        return plan_retention(
            self._segments.values(),
            self.config,
            now,
            log_start_offset=self._log_start_offset,
            log_end_offset=self._end.offset,
            high_watermark=self.high_watermark,
        )

    def delete_old_segments(self, *, now_ms: int | None = None, dry_run: bool = False) -> RetentionPlan:
        """Apply retention (Kafka's ``deleteOldSegments``): segments below the log start offset,
        then beyond ``retention.bytes``, then older than ``retention.ms``. The log start offset
        advances to the first remaining segment before the files go (renamed ``.deleted``,
        removed after ``file.delete.delay.ms``). Returns the plan applied (or, with
        ``dry_run``, the plan that would be)."""
        with self._lock:
            self._check_open()
            plan = self.plan_retention(now_ms)
            if dry_run or not plan.deletions:
                return plan
            self._check_writable()
            doomed = [self._segments.get(d.base_offset) for d in plan.deletions]
            if plan.needs_roll:
                new = self._roll(None)
                if doomed[-1] is new:
                    doomed = doomed[:-1]
            doomed = [s for s in doomed if s is not None]
            for d in plan.deletions:
                _log.info(
                    "deleting segment %d of %s-%s: %s (%s)",
                    d.base_offset,
                    self.topic,
                    self.partition,
                    d.reason,
                    d.detail,
                )
            self._local.remove_and_delete_segments(doomed)  # type: ignore[arg-type]
            self._delete_producer_snapshots(doomed)  # type: ignore[arg-type]
            self._increment_log_start_offset(self._segments.first.base_offset)  # type: ignore[union-attr]
            return plan
