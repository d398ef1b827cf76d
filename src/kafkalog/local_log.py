"""The segment files of one partition: Kafka's ``LocalLog``.

A :class:`LocalLog` owns the partition directory's segments and does what only touches them:
reading whole batches up to a limit, rolling a new segment, deleting segments (renamed
``.deleted`` now, removed after ``file.delete.delay.ms`` on the log's scheduler), and the
crash-safe swap of a cleaned segment (``.cleaned`` -> ``.swap`` -> in place). Offsets, producer
state, leader epochs and checkpoints are the partition log's (:class:`kafkalog.log.Log`), which
holds the lock every call here runs under, except reads (they work on a snapshot of the
segment list).
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Callable
from pathlib import Path
from enum import Enum
from typing import NamedTuple

from .log_config import LogConfig
from .durable import fsync_dir_now, fsync_file, register_dir_syncer
from .errors import KafkalogError, LogClosedError
from .file_records import FileRecords
from .filenames import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    log_file,
    offset_index_file,
    time_index_file,
    txn_index_file,
)
from .leader_epoch_cache import LeaderEpochFileCache
from .record import NO_TIMESTAMP
from .scheduler import Scheduler
from .segment import LogSegment, TimestampAndOffset
from .log_segments import LogSegments
from .transaction_index import AbortedTxn

_log = logging.getLogger("kafkalog.log")

#: ListOffsets' special timestamps (Kafka's ``ListOffsetsRequest``).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


class FetchIsolation(Enum):
    """How far a read may go (Kafka's ``FetchIsolation``): a follower reads to the log end, a
    read_uncommitted consumer to the high watermark, a read_committed one to the last stable
    offset."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


class LogOffsetMetadata(NamedTuple):
    """An offset and where it is: its segment's base offset and the byte position in it."""

    offset: int
    segment_base_offset: int
    position: int


def _after_swap_step(step: str) -> None:
    """Called between the steps of :meth:`LocalLog.replace_segments`; crash tests replace it to
    kill the process there."""


def segment_files(directory: Path, base_offset: int, suffix: str = "") -> tuple[Path, ...]:
    """The four files of the segment at ``base_offset`` (log, offset, time and transaction
    index), with ``suffix`` appended."""
    return tuple(
        f(directory, base_offset, suffix) for f in (log_file, offset_index_file, time_index_file, txn_index_file)
    )


def roll_jitter(config: LogConfig) -> int:
    """Kafka's ``randomSegmentJitter``: uniform in [0, min(segment.jitter.ms, segment.ms))."""
    bound = min(config.segment_jitter_ms, config.segment_ms)
    return random.randrange(bound) if bound > 0 else 0


def _flush_segment(segment: LogSegment) -> None:
    try:
        segment.flush()
    except LogClosedError:
        pass  # deleted meanwhile (retention or truncation): nothing of it is left to flush


class LocalLog:
    """The segments of one partition directory and their files (Kafka's ``LocalLog``).

    Not thread-safe by itself: :class:`kafkalog.log.Log` serialises the changes.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: LogSegments,
        *,
        clock: Callable[[], int],
        scheduler: Scheduler,
    ) -> None:
        self.directory = directory
        self.config = config
        self.segments = segments
        self.clock = clock
        self.scheduler = scheduler
        # Segments rolled over whose final bytes (the trim, the last time-index entry) are not
        # yet fsynced. The directory is fsynced only after them (:meth:`sync_dir`), under
        # ``_dir_lock``, which a roll holds too: a newer segment's name never becomes durable
        # before the data of the segments below it.
        self._unsynced: dict[int, LogSegment] = {}
        self._unsynced_files: list[Path] = []  # written without fsync (a roll's producer snapshot)
        self._dir_lock = threading.Lock()
        register_dir_syncer(directory, self.sync_dir)

    def close(self) -> None:
        """Stop routing the directory's fsyncs through :meth:`sync_dir`."""
        register_dir_syncer(self.directory, None)

    def jitter(self) -> int:
        """A new segment's roll jitter (:func:`roll_jitter`)."""
        return roll_jitter(self.config)

    # -- reading -----------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, end: LogOffsetMetadata, max_offset: int | None, min_one_message: bool
    ) -> FileRecords:
        """Kafka's ``LocalLog.read`` once the offset is known to be in range: whole batches from
        the one holding ``offset``, up to ``max_offset`` (or ``end``, the published log end)."""
        segments = self.segments
        limit = end if max_offset is None or max_offset >= end.offset else self.offset_metadata(max_offset)
        if offset >= limit.offset:
            return self.empty_read()
        segment = segments.floor(offset)
        while segment is not None:
            if segment.base_offset < limit.segment_base_offset:
                max_position = segment.size
            elif segment.base_offset == limit.segment_base_offset:
                max_position = limit.position
            else:
                break
            records = segment.read(offset, max_bytes, max_position, min_one_message)
            if records is not None:
                return records
            segment = segments.higher(segment.base_offset)
        return self.empty_read()

    def empty_read(self) -> FileRecords:
        """An empty slice of the active segment (Kafka's ``emptyFetchDataInfo``)."""
        active = self.segments.last
        assert active is not None
        return active.log.slice(0, 0)

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset`` is: the position of the batch holding it."""
        segments = self.segments
        segment = segments.floor(offset)
        if segment is None:
            return LogOffsetMetadata(offset=offset, segment_base_offset=offset, position=0)
        found = segment.translate_offset(offset)
        if found is None:
            higher = segments.higher(segment.base_offset)
            if higher is not None:
                return LogOffsetMetadata(offset=offset, segment_base_offset=higher.base_offset, position=0)
            return LogOffsetMetadata(offset=offset, segment_base_offset=segment.base_offset, position=segment.size)
        return LogOffsetMetadata(offset=offset, segment_base_offset=segment.base_offset, position=found.position)

    def fetch_offset_by_timestamp(
        self, timestamp: int, *, log_start_offset: int, log_end_offset: int, cache: LeaderEpochFileCache
    ) -> TimestampAndOffset | None:
        """Kafka's ``fetchOffsetByTimestamp`` over the local segments (see
        :meth:`kafkalog.log.Log.offset_for_timestamp`)."""
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            earliest = cache.earliest_entry
            epoch = earliest.epoch if earliest is not None and earliest.start_offset <= log_start_offset else None
            return TimestampAndOffset(timestamp=NO_TIMESTAMP, offset=log_start_offset, leader_epoch=epoch)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(timestamp=NO_TIMESTAMP, offset=log_end_offset, leader_epoch=cache.latest_epoch)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return TimestampAndOffset(timestamp=NO_TIMESTAMP, offset=-1, leader_epoch=-1)  # no tiered storage
        segments = self.segments.values()
        if timestamp == MAX_TIMESTAMP:
            return self.max_timestamp_offset()
        if timestamp < 0:
            raise ValueError(f"invalid ListOffsets timestamp {timestamp}")
        for segment in segments:
            # Kafka: the first segment whose largest timestamp (or mtime without one) reaches it.
            if segment.largest_timestamp >= timestamp:
                return segment.find_offset_by_timestamp(timestamp, log_start_offset)
        return None

    def max_timestamp_offset(self) -> TimestampAndOffset | None:
        """Kafka 3.8's MAX_TIMESTAMP: the first record holding the largest timestamp."""
        best = max(self.segments.values(), key=lambda s: s.max_timestamp_so_far)
        ts = best.max_timestamp_so_far
        if ts < 0:
            return None
        position = best.offset_index.lookup(best.offset_of_max_timestamp_so_far).position
        for batch in best.log.slice(position).batches():
            if batch.max_timestamp == ts and batch.magic > 0:
                for record in batch.records():
                    if record.timestamp == ts:
                        epoch = batch.partition_leader_epoch
                        return TimestampAndOffset(
                            timestamp=ts, offset=record.offset, leader_epoch=epoch if epoch >= 0 else None
                        )
                return None
        return None

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from the
        segments' transaction indexes (Kafka's ``collectAbortedTransactions``)."""
        segments = self.segments
        first = segments.floor(start_offset) or segments.first
        found: list[AbortedTxn] = []
        if first is None:
            return found
        # Every later segment too, until one index says it is complete: a transaction is
        # indexed in the segment of its marker, which may lie past ``upper_bound_offset``.
        for segment in segments.values(first.base_offset):
            txns, complete = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            found.extend(txns)
            if complete:
                break
        return found

    # -- writing -----------------------------------------------------------------------------

    def undo_append(self, segment: LogSegment, position: int, end_offset: int) -> None:
        """Cut a failed write back off (disk full): the segment stays as it was."""
        try:
            if segment.log.size_in_bytes > position:
                segment.log.truncate_to(position)
            fd = segment.log.fileno()
            if not self.config.preallocate and os.fstat(fd).st_size > position:
                os.ftruncate(fd, position)  # the part of a short write that did land
            segment.offset_index.truncate_to(end_offset)
            segment.time_index.truncate_to(end_offset)
        except OSError:
            _log.exception("could not undo a failed append to %s", segment.log.path)

    def roll(self, new_offset: int) -> LogSegment:
        """Start the active segment at ``new_offset`` (Kafka's ``LocalLog.roll``)."""
        active = self.segments.last
        assert active is not None
        if new_offset in self.segments:
            if active.base_offset == new_offset and active.size == 0:
                # KAFKA-6388: an empty active segment whose index is "full"; replace it.
                _log.warning("rolling over the empty active segment at %d", new_offset)
                return self.create_and_delete_segment(new_offset, active)
            raise KafkalogError(
                f"trying to roll a new log segment at {new_offset} while one already exists", file=str(self.directory)
            )
        if new_offset < active.base_offset:
            raise KafkalogError(
                f"trying to roll a new log segment at {new_offset}, below the active segment's {active.base_offset}",
                file=str(self.directory),
            )
        for path in segment_files(self.directory, new_offset):
            if path.exists():
                _log.warning("newly rolled segment file %s already exists; deleting it first", path)
                path.unlink()
        with self._dir_lock:
            active.on_become_inactive()
            self._unsynced[active.base_offset] = active
            new_segment = LogSegment.open(
                self.directory, new_offset, self.config, roll_jitter_ms=self.jitter(), clock=self.clock
            )
            self.segments.add(new_segment)
        return new_segment

    @property
    def has_unsynced(self) -> bool:
        """Whether a rolled segment's final bytes (or a file :meth:`add_unsynced_file` named)
        still wait for their fsync."""
        return bool(self._unsynced or self._unsynced_files)

    def add_unsynced_file(self, path: Path) -> None:
        """``path`` was renamed into place unsynced: fsync it before the directory next is, so
        its name never becomes durable before its content."""
        with self._dir_lock:
            self._unsynced_files.append(path)

    def flush(self, segments: list[LogSegment]) -> None:
        """fsync ``segments``, every rolled segment not yet fsynced, and the directory (Kafka's
        ``LocalLog.flush``)."""
        for segment in segments:
            _flush_segment(segment)
        self.sync_dir()

    def sync_dir(self) -> None:
        """fsync the directory, after the rolled segments not yet fsynced: the directory entry
        of a segment may become durable only once the data below it is (else a power cut leaves
        a hole in the offsets: an empty or short segment followed by a newer one)."""
        with self._dir_lock:
            for base, segment in sorted(self._unsynced.items()):
                if self.segments.get(base) is segment:
                    _flush_segment(segment)
            self._unsynced.clear()
            for path in self._unsynced_files:
                fsync_file(path)
            self._unsynced_files.clear()
            fsync_dir_now(self.directory)

    # -- truncating and deleting ----------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> list[LogSegment]:
        """Delete the segments above ``offset`` and cut the active one there (Kafka's
        ``LocalLog.truncateTo``); returns the deleted segments. ``offset`` is in the log."""
        doomed = [s for s in self.segments.values() if s.base_offset > offset]
        self.remove_and_delete_segments(doomed)
        active = self.segments.last
        assert active is not None
        active.truncate_to(offset)
        active.resize_indexes(self.config.segment_index_bytes)
        # Durable now: the cut-off bytes would otherwise come back at a power cut, inside a
        # segment below the recovery point (trusted) and beside the records that replace them.
        _flush_segment(active)
        self.sync_dir()
        return doomed

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment; an empty one at ``offset`` replaces them."""
        segments = self.segments.values()
        self.remove_and_delete_segments(segments[:-1])
        self.create_and_delete_segment(offset, segments[-1])

    def create_and_delete_segment(self, offset: int, old: LogSegment) -> LogSegment:
        """Kafka's ``createAndDeleteSegment``: the new segment exists before the old one goes."""
        if offset == old.base_offset:
            old.change_file_suffixes("", DELETED_SUFFIX)
        new = LogSegment.open(self.directory, offset, self.config, roll_jitter_ms=self.jitter(), clock=self.clock)
        self.segments.add(new)
        if offset != old.base_offset:
            self.segments.remove(old.base_offset)
        self.delete_segment_files([old])
        return new

    def remove_and_delete_segments(self, doomed: list[LogSegment]) -> None:
        """Take ``doomed`` out of the segment list and delete their files."""
        for segment in doomed:
            self.segments.remove(segment.base_offset)
        self.delete_segment_files(doomed)

    def delete_segment_files(self, doomed: list[LogSegment]) -> None:
        """Rename to ``.deleted`` now, delete after ``file.delete.delay.ms`` (Kafka's
        ``deleteSegmentFiles``)."""
        for segment in doomed:
            if not segment.log.path.endswith(DELETED_SUFFIX):
                segment.change_file_suffixes("", DELETED_SUFFIX)
        if doomed:
            self.sync_dir()

        def delete() -> None:
            for segment in doomed:
                segment.delete_if_exists()

        self.schedule_delete(delete)

    def schedule_unlink(self, paths: list[Path]) -> None:
        """Remove ``paths`` after ``file.delete.delay.ms``."""

        def delete() -> None:
            for path in paths:
                path.unlink(missing_ok=True)

        self.schedule_delete(delete)

    def schedule_delete(self, task: Callable[[], None]) -> None:
        """Run ``task`` after ``file.delete.delay.ms`` (at once when it is 0)."""
        delay = self.config.file_delete_delay_ms
        if delay == 0:
            task()
        else:
            self.scheduler.schedule(delay / 1000.0, task)

    # -- the cleaner's swap ------------------------------------------------------------------

    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A new, empty segment whose files end in ``.cleaned`` (Kafka's
        ``createNewCleanedSegment``); stale ``.cleaned`` files of that offset go first."""
        for path in segment_files(self.directory, base_offset, CLEANED_SUFFIX):
            path.unlink(missing_ok=True)
        return LogSegment.open(self.directory, base_offset, self.config, suffix=CLEANED_SUFFIX, clock=self.clock)

    def replace_segments(self, new_segment: LogSegment, old_segments: list[LogSegment]) -> list[LogSegment]:
        """Kafka's ``LocalLog.replaceSegments``, crash-safely: rename the ``.cleaned`` segment
        ``.swap``; rename the old segments ``.deleted`` (their files go after
        ``file.delete.delay.ms``); rename the ``.swap`` files into place. A crash between any two
        steps loads as the old segments (before the ``.swap`` rename is durable) or the new one
        (after): see :mod:`kafkalog.log_loader`. Returns the old segments taken out of the list."""
        new_segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        self.sync_dir()
        _after_swap_step("swap")
        self.segments.add(new_segment)
        removed = []
        for segment in old_segments:
            if segment.base_offset != new_segment.base_offset:
                self.segments.remove(segment.base_offset)
                removed.append(segment)
            segment.change_file_suffixes("", DELETED_SUFFIX)
            _after_swap_step("deleted")
        self.sync_dir()
        _after_swap_step("all-deleted")
        new_segment.change_file_suffixes(SWAP_SUFFIX, "")
        self.sync_dir()
        _after_swap_step("done")

        def delete() -> None:
            for segment in old_segments:
                segment.delete_if_exists()

        self.schedule_delete(delete)
        return removed
