"""Retention as pure functions: (segments, config, now) -> which segments to delete, and why.

Kafka's ``UnifiedLog.deleteOldSegments`` applies three passes in order, each over what the
previous left:

1. **log start offset**: a segment goes when the *next* segment's base offset is <= the log
   start offset (``delete_records`` moved the start past it). This pass runs for every
   cleanup policy.
2. **size** (``retention.bytes`` >= 0, policy includes delete): while the log is larger than the
   limit, the oldest segments whose removal keeps it >= the limit go.
3. **time** (``retention.ms`` >= 0, policy includes delete): a segment goes when
   ``now - largest_timestamp > retention.ms``.

Each pass walks from the oldest segment and stops at the first one it keeps
(``LocalLog.deletableSegments``), never deletes a segment ending above the high watermark, and
never deletes an empty last (active) segment. When a pass would delete every segment, the log
must roll first so that one segment remains (``needs_roll``).

**Future timestamps.** Kafka's time rule compares against the segment's largest timestamp, so a
segment holding a timestamp in the future is kept until that moment has passed plus
``retention.ms`` — and, since each pass stops at the first segment it keeps, so is every segment
after it. kafkalog follows Kafka's rule unchanged, so that the same directory expires the same
way under both. What prevents the pinning is the append-time bound Kafka added for it (KIP-937):
``message.timestamp.after.max.ms`` rejects batches timestamped too far ahead at append time
(Kafka 4.0 defaults it to one hour; set it so for the same protection on 3.8 defaults). Data
already on disk with future timestamps expires when its time comes, as under Kafka.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from .checkpoint import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile
from .log_config import LogConfig
from .errors import KafkalogError
from .file_records import FileRecords
from .filenames import partition_of, segment_base_offset, segment_logs


class SegmentInfo(Protocol):
    """What retention asks of a segment (a :class:`~kafkalog.segment.LogSegment` has it)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def largest_timestamp(self) -> int: ...


class Deletion(NamedTuple):
    """One segment to delete, the rule that selected it, and the numbers behind the rule."""

    base_offset: int
    reason: str  # "log-start-offset", "retention.bytes" or "retention.ms"
    detail: str


class RetentionPlan(NamedTuple):
    """What :func:`plan_retention` decided.

    Attributes:
        deletions: the segments to delete, oldest first.
        needs_roll: every segment is to go, so the log must roll a new active segment first
            (if the last deletable segment is the empty segment the roll creates, it stays).
        new_log_start_offset: the first remaining segment's base offset once they are gone
            (the log end offset if all go), or None if nothing is deleted; the log start offset
            becomes the larger of it and the current one (it never moves back).
    """

    deletions: list[Deletion]
    needs_roll: bool
    new_log_start_offset: int | None


def _deletable(segments, log_end_offset: int, high_watermark: int, predicate) -> int:
    """How many of the oldest segments a pass deletes (Kafka's ``deletableSegments``)."""
    n = 0
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else log_end_offset
        last_and_empty = i + 1 == len(segments) and segment.size == 0
        if high_watermark >= upper and not last_and_empty and predicate(i, segment):
            n += 1
        else:
            break
    return n


def plan_retention(
    segments: Sequence[SegmentInfo],
    config: LogConfig,
    now_ms: int,
    *,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int | None = None,
) -> RetentionPlan:
    """Decide which segments retention deletes, as Kafka does, without touching anything.

    Args:
        segments: the log's segments, oldest first (the last is the active one).
        config: ``cleanup.policy``, ``retention.bytes`` and ``retention.ms`` are used.
        now_ms: the current time.
        log_start_offset: the log's start offset.
        log_end_offset: the log's end offset.
        high_watermark: segments ending above it are kept (defaults to the log end offset).

    Returns:
        The plan; applying it is :meth:`kafkalog.log.Log.delete_old_segments`'s job, and
        reporting it is a dry run.
    """
    planner = _Planner(segments, log_end_offset, log_end_offset if high_watermark is None else high_watermark)
    planner.below_log_start(log_start_offset)
    if config.delete:
        if config.retention_bytes >= 0:
            planner.beyond_retention_bytes(config.retention_bytes)
        if config.retention_ms >= 0:
            planner.older_than_retention_ms(config.retention_ms, now_ms)
    return planner.plan()


class _Planner:
    """One plan in the making: Kafka's passes, each deleting from the oldest of the segments
    that remain (only those ending at or below the high watermark, never the active one
    without a roll: :func:`_deletable`)."""

    def __init__(self, segments: Sequence[SegmentInfo], log_end_offset: int, high_watermark: int) -> None:
        self._remaining = list(segments)
        self._log_end_offset = log_end_offset
        self._hw = high_watermark
        self._deletions: list[Deletion] = []
        self._needs_roll = False

    def _run_pass(self, reason: str, predicate, detail) -> None:
        remaining = self._remaining
        n = _deletable(remaining, self._log_end_offset, self._hw, predicate)
        if n == 0:
            return
        if n == len(remaining):
            self._needs_roll = True
        self._deletions.extend(Deletion(s.base_offset, reason, detail(s)) for s in remaining[:n])
        self._remaining = remaining[n:]

    def below_log_start(self, log_start_offset: int) -> None:
        """1. The log start offset moved past whole segments."""
        remaining = self._remaining

        def start_breached(i: int, segment) -> bool:
            return i + 1 < len(remaining) and remaining[i + 1].base_offset <= log_start_offset

        self._run_pass(
            "log-start-offset",
            start_breached,
            lambda s: f"the next segment starts at or below the log start offset {log_start_offset}",
        )

    def beyond_retention_bytes(self, retention_bytes: int) -> None:
        """2. Size: delete the oldest while the log stays at or above the limit."""
        total = sum(s.size for s in self._remaining)
        if total < retention_bytes:
            return
        diff = total - retention_bytes

        def size_breached(i: int, segment) -> bool:
            nonlocal diff
            if diff - segment.size >= 0:
                diff -= segment.size
                return True
            return False

        self._run_pass(
            "retention.bytes",
            size_breached,
            lambda s: f"log of {total} bytes exceeds retention.bytes = {retention_bytes}",
        )

    def older_than_retention_ms(self, retention_ms: int, now_ms: int) -> None:
        """3. Time: the segment's largest timestamp is older than retention.ms."""

        def time_breached(i: int, segment) -> bool:
            return now_ms - segment.largest_timestamp > retention_ms

        self._run_pass(
            "retention.ms",
            time_breached,
            lambda s: (
                f"largest timestamp {s.largest_timestamp} is {now_ms - s.largest_timestamp} ms before now "
                f"(retention.ms = {retention_ms})"
            ),
        )

    def plan(self) -> RetentionPlan:
        new_start = None
        if self._deletions:
            # Everything gone: the segment the roll creates starts at the log end offset.
            new_start = self._remaining[0].base_offset if self._remaining else self._log_end_offset
        return RetentionPlan(self._deletions, self._needs_roll, new_start)


# -- offline: a partition directory read from its files, nothing opened for writing ----------------


class RetentionSegment(NamedTuple):
    """What retention asks of a segment (:class:`kafkalog.offline_retention.SegmentInfo`), read from
    the files: base offset, size, largest timestamp (the file's mtime when it has none, as in
    Kafka), and the offsets it holds."""

    base_offset: int
    size: int
    largest_timestamp: int
    path: str
    last_offset: int | None


class OfflineRetention(NamedTuple):
    """:func:`plan_partition_retention`'s answer: the plan and what it was computed from."""

    plan: RetentionPlan
    segments: list[RetentionSegment]
    log_start_offset: int
    log_end_offset: int


#: How much of a segment without a valid batch is looked at to tell preallocated zeros from data.
_FIRST_BYTES = 4096


def _segment_facts(log_path: Path) -> RetentionSegment:
    """Size, largest batch max timestamp and last offset of a segment (a header scan).

    Raises:
        KafkalogError: the file holds no valid batch and is not all zeros at its start.
    """
    largest = -1
    last = None
    with FileRecords.open(log_path) as fr:
        size = fr.size_in_bytes
        try:
            for batch in fr.batches():
                if batch.max_timestamp > largest:
                    largest = batch.max_timestamp
                last = batch.last_offset
        except KafkalogError as e:
            # A damaged tail: retention looks at what is readable, as Kafka's index does. But a
            # file with no batch at all, and bytes other than a preallocated segment's zeros, is
            # no Kafka log: calling it empty would hide that.
            if last is None and any(fr.read(0, min(size, _FIRST_BYTES))):
                raise KafkalogError(
                    f"not Kafka log data: no valid batch here ({e.reason}); kafkalog verify says what is wrong",
                    file=str(log_path),
                    position=0,
                ) from None
    if largest < 0:
        largest = log_path.stat().st_mtime_ns // 1_000_000
    return RetentionSegment(segment_base_offset(log_path), size, largest, str(log_path), last)


def plan_partition_retention(directory: str | os.PathLike, config: LogConfig, now_ms: int) -> OfflineRetention:
    """What :meth:`kafkalog.log.Log.delete_old_segments` would delete in a partition directory
    now, computed without opening the log: nothing is written, no lock is taken, no recovery
    runs.

    The inputs are those :class:`~kafkalog.log.Log` uses: each segment's size and largest
    timestamp (the largest batch max timestamp, read from the batch headers, which is what the
    time index's last entry holds on a cleanly closed segment), the log start offset (the
    larger of the first segment's base offset and the log directory's
    ``log-start-offset-checkpoint``), and the log end offset as the high watermark.

    Raises:
        KafkalogError: no segments in ``directory``; a segment without a valid batch that is not
            preallocated zeros (no Kafka log data); a corrupt ``log-start-offset-checkpoint``.
        OSError: the files cannot be read.
    """
    directory = Path(directory)
    logs = segment_logs(directory)
    if not logs:
        raise KafkalogError("no log segments in this directory", file=str(directory))
    segments = [_segment_facts(p) for p in logs]
    log_start = segments[0].base_offset
    tp = partition_of(directory)
    checkpoint = directory.parent / LOG_START_OFFSET_CHECKPOINT
    if tp is not None and checkpoint.exists():
        log_start = max(log_start, OffsetCheckpointFile(checkpoint).read().get(tp, 0))
    last = segments[-1]
    log_end = last.base_offset if last.last_offset is None else last.last_offset + 1
    plan = plan_retention(segments, config, now_ms, log_start_offset=log_start, log_end_offset=log_end)
    return OfflineRetention(plan, segments, log_start, log_end)
