"""Which logs to clean and how far: the part of Kafka's ``LogCleanerManager`` that reads a log.

The *dirty* section starts at the checkpointed first dirty offset (``cleaner-offset-checkpoint``)
and ends at the first *uncleanable* offset: the earliest of the last stable offset, the active
segment and the first segment within ``min.compaction.lag.ms`` of now. A log must be cleaned
now, whatever its dirty ratio, once its oldest dirty segment is past ``max.compaction.lag.ms``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .log import Log
from .segment import LogSegment
from .varint import INT64_MAX as _INT64_MAX

_log = logging.getLogger("kafkalog.cleaner")

#: Kafka's "no timestamp yet" bound for the compaction-delay computation (``Long.MAX_VALUE``).


def non_active_segments_from(log: Log, offset: int) -> list[LogSegment]:
    """Kafka's ``nonActiveLogSegmentsFrom``: the segments from the one holding ``offset`` up to
    the active one (excluded)."""
    active = log.active_segment
    if offset > active.base_offset:
        return []
    return log.log_segments(offset, active.base_offset)


def _first_batch_timestamp(segment: LogSegment) -> int:
    """The first batch's max timestamp (Kafka's ``getFirstBatchTimestamp``); max int64 when empty."""
    for batch in segment.log.batches():
        return batch.max_timestamp
    return _INT64_MAX


def cleanable_offsets(log: Log, last_clean_offset: int | None, now_ms: int) -> tuple[int, int, bool]:
    """``(first dirty offset, first uncleanable offset, checkpoint needs resetting)`` (Kafka's
    ``cleanableOffsets``). A checkpoint below the log start or past the log end resets to the
    log start. Cleaning stops at the earliest of the last stable offset, the active segment and
    the first segment within ``min.compaction.lag.ms`` of now."""
    log_start = log.log_start_offset
    checkpointed = log_start if last_clean_offset is None else last_clean_offset
    if checkpointed < log_start:
        first_dirty, reset = log_start, True
    elif checkpointed > log.log_end_offset:
        _log.warning(
            "the checkpointed dirty offset %d of %s is past its log end %d; resetting to the log start %d",
            checkpointed, log.directory.name, log.log_end_offset, log_start,
        )  # fmt: skip
        first_dirty, reset = log_start, True
    else:
        first_dirty, reset = checkpointed, False
    candidates = [log.last_stable_offset, log.active_segment.base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in non_active_segments_from(log, first_dirty):
            if segment.largest_timestamp > now_ms - lag:
                candidates.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates)), reset


def max_compaction_delay(log: Log, first_dirty_offset: int, now_ms: int) -> int:
    """How far past ``max.compaction.lag.ms`` the oldest dirty segment is (0 when not):
    positive means the log must be cleaned now, whatever its dirty ratio."""
    stamps = [
        t for t in (_first_batch_timestamp(s) for s in non_active_segments_from(log, first_dirty_offset)) if t > 0
    ]
    earliest = min(stamps, default=_INT64_MAX)
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


@dataclass
class LogToClean:
    """A log and the part of it a pass may clean (Kafka's ``LogToClean``)."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False
    horizon_due: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @classmethod
    def of(cls, log: Log, first_dirty: int, uncleanable: int, need_compaction_now: bool = False) -> LogToClean:
        # Kafka's calculateCleanableBytes: cleaning stops at a segment boundary.
        non_active = non_active_segments_from(log, uncleanable)
        first_uncleanable = (non_active[0] if non_active else log.active_segment).base_offset
        cleanable = sum(s.size for s in log.log_segments(min(first_dirty, first_uncleanable), first_uncleanable))
        clean = sum(s.size for s in log.log_segments(-1, first_dirty))
        return cls(log, first_dirty, first_uncleanable, clean, cleanable, need_compaction_now)


def log_to_clean(log: Log, now_ms: int, *, write: bool = True) -> LogToClean:
    """The cleanable part of ``log`` now; with ``write``, a checkpoint outside the log is reset
    to the log start on disk (Kafka's ``grabFilthiestCompactedLog`` step for one log)."""
    first_dirty, uncleanable, reset = cleanable_offsets(log, log.cleaner_checkpoint, now_ms)
    if reset and write:
        log.checkpoint_cleaner_offset(first_dirty)
    delay = max_compaction_delay(log, first_dirty, now_ms)
    return LogToClean.of(log, first_dirty, uncleanable, delay > 0)


def earliest_delete_horizon(log: Log, first_dirty_offset: int, after_ms: int) -> int | None:
    """The earliest batch delete horizon in the clean section that is later than ``after_ms``
    (None without one): when a pass is due to remove expired tombstones and markers."""
    earliest = None
    for segment in log.log_segments(0, first_dirty_offset):
        for batch in segment.log.batches():
            horizon = batch.delete_horizon_ms
            if horizon is not None and horizon > after_ms and (earliest is None or horizon < earliest):
                earliest = horizon
    return earliest
