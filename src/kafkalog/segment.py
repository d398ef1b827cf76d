"""A log segment: ``<base>.log`` with its ``.index``, ``.timeindex`` and ``.txnindex``, as
Kafka's ``LogSegment`` writes, reads, searches and recovers them.

Index rule (Kafka's ``LogSegment.append`` and ``recover``): before a batch is counted, if the
bytes appended since the last index entry are *strictly greater* than ``index.interval.bytes``,
add the offset entry ``(last offset of this batch, start position of this batch)`` and the time
entry ``(max timestamp so far, offset of that max)`` — the time entry only if the timestamp
grew — and reset the count; then count the batch. The first batch is never indexed. When the
segment is rolled or closed a last time entry is added for the max timestamp (if new). Recovery
applies the same rule while validating every batch, so rebuilt indexes equal the ones written at
append time byte for byte.

Segments speak only batch-level facts: offsets, positions, sizes and max timestamps from batch
headers. Not thread-safe: the partition log serialises appends, truncation and close; reads
(``read``, ``translate_offset``, lookups) may run beside each other.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from .log_config import LogConfig
from .errors import (
    CorruptIndexError,
    InvalidOffsetError,
)
from .file_records import FileRecords
from .filenames import log_file, offset_index_file, time_index_file, txn_index_file
from .index import OffsetIndex, TimeIndex, TimestampOffset
from .leader_epoch_cache import LeaderEpochFileCache
from .producer_state.manager import ProducerStateManager
from .memory_records import MemoryRecords
from .record import LOG_OVERHEAD, MAGIC_V2
from .recordbatch import HEADER, HEADER_FIELDS, RECORD_BATCH_OVERHEAD
from .segment_recovery import MAX_RELATIVE_OFFSET, RecoveryStep, SegmentRecovery
from .transaction_index import AbortedTxn, TransactionIndex
from .transaction_tracker import TransactionTracker



class LogOffsetPosition(NamedTuple):
    """Where a batch is: its last offset, its position in the file and its size."""

    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    """The answer of a timestamp search: a record's timestamp and offset, and its batch's
    partition leader epoch (None when unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogSegment:
    """One segment of a partition log.

    Use :meth:`open`. Attributes ``log`` (the :class:`FileRecords`), ``offset_index``,
    ``time_index`` and ``txn_index`` are the files; the indexes open lazily.
    """

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        base_offset: int,
        config: LogConfig,
        *,
        roll_jitter_ms: int = 0,
        clock: Callable[[], int] | None = None,
        read_only: bool = False,
    ) -> None:
        self.log = log
        self.read_only = read_only
        # Held while the files are fsynced and while they are closed: a flush running on the
        # log's background thread (the flush after a roll) and a deletion on the caller's
        # thread (file.delete.delay.ms=0) must not interleave, or the fsync meets a closed
        # descriptor. A flush after the close raises LogClosedError.
        self._files_lock = threading.RLock()
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.config = config
        self.index_interval_bytes = config.index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._clock = clock or _now_ms
        self.created_ms = self._clock()
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        # The max timestamp so far and the offset recorded for it; read from the time index's
        # last entry on first use (Kafka's maxTimestampAndOffsetSoFar).
        self._max_loaded = False
        self._max_ts = -1
        self._max_ts_offset = -1

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike,
        base_offset: int,
        config: LogConfig | None = None,
        *,
        suffix: str = "",
        roll_jitter_ms: int = 0,
        clock: Callable[[], int] | None = None,
        read_only: bool = False,
    ) -> LogSegment:
        """Open the segment of ``base_offset`` in ``directory``, creating its log if absent.

        Args:
            directory: the partition directory.
            base_offset: the segment's first offset (its file name).
            config: segment and index settings (Kafka's defaults when None).
            suffix: a transient suffix of all its files (``.cleaned``, ``.swap``), or "".
            roll_jitter_ms: this segment's jitter subtracted from ``segment_ms``.
            clock: epoch milliseconds (for time-based rolling); defaults to the wall clock.
            read_only: open an existing segment without creating or writing anything.
        """
        config = config or LogConfig()
        directory = Path(directory)
        path = log_file(directory, base_offset, suffix)
        created = not read_only and not path.exists()
        if read_only:
            log = FileRecords.open(path)
        else:
            preallocate = config.segment_bytes if config.preallocate else 0
            try:
                log = FileRecords.open(path, create=True, preallocate=preallocate)
            except OSError:
                if created:  # reserving the space failed (a full disk): leave no empty file
                    path.unlink(missing_ok=True)
                raise
        max_index = config.segment_index_bytes
        segment = cls(
            log,
            OffsetIndex(offset_index_file(directory, base_offset, suffix), base_offset, max_index, writable=not read_only),
            TimeIndex(time_index_file(directory, base_offset, suffix), base_offset, max_index, writable=not read_only),
            TransactionIndex(txn_index_file(directory, base_offset, suffix), base_offset, writable=not read_only),
            base_offset,
            config,
            roll_jitter_ms=roll_jitter_ms,
            clock=clock,
            read_only=read_only,
        )
        if created:
            # A new segment gets its preallocated index files now, as a broker's active segment
            # has them; an existing segment's indexes open lazily on first use.
            try:
                segment.offset_index.entries
                segment.time_index.entries
            except OSError:
                segment.delete_if_exists()  # nothing of a segment that could not be created stays
                raise
        return segment

    @classmethod
    def empty_in_memory(
        cls, directory: str | os.PathLike, base_offset: int, config: LogConfig, *, clock: Callable[[], int] | None = None
    ) -> LogSegment:
        """Read-only: the empty segment a writable open would create for an empty log, with no
        file (its log reads the null device, its indexes live in memory)."""
        directory = Path(directory)
        max_index = config.segment_index_bytes
        return cls(
            FileRecords.open(os.devnull),
            OffsetIndex(offset_index_file(directory, base_offset), base_offset, max_index, in_memory=True),
            TimeIndex(time_index_file(directory, base_offset), base_offset, max_index, in_memory=True),
            TransactionIndex(txn_index_file(directory, base_offset), base_offset, in_memory=True),
            base_offset,
            config,
            clock=clock,
            read_only=True,
        )

    # -- facts -------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes in the log file."""
        return self.log.size_in_bytes

    def _load_max(self) -> None:
        self._max_ts, self._max_ts_offset = self.time_index.last_entry
        self._max_loaded = True

    def _set_max(self, timestamp: int, offset: int) -> None:
        self._max_ts, self._max_ts_offset, self._max_loaded = timestamp, offset, True

    @property
    def max_timestamp_so_far(self) -> int:
        if not self._max_loaded:
            self._load_max()
        return self._max_ts

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        if not self._max_loaded:
            self._load_max()
        return self._max_ts_offset

    @property
    def last_modified_ms(self) -> int:
        return os.stat(self.log.path).st_mtime_ns // 1_000_000

    @property
    def largest_timestamp(self) -> int:
        """The largest timestamp in the segment, or the log file's mtime when it has none."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    @property
    def next_offset(self) -> int:
        """The offset after the segment's last batch (the base offset when empty): a scan of
        batch headers from the last offset index entry."""
        position = self.offset_index.lookup(self.offset_index.last_offset).position
        last = None
        for batch in self.log.slice(position).batches():
            last = batch
        return self.base_offset if last is None else last.next_offset

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.log.path!r})"

    # -- appending ---------------------------------------------------------------------------------

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise InvalidOffsetError(
                f"detected offset overflow at offset {offset} in segment with base offset {self.base_offset}",
                file=self.log.path,
            )

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        relative = offset - self.base_offset
        return 0 <= relative <= MAX_RELATIVE_OFFSET

    def append(
        self,
        records: MemoryRecords,
        *,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
    ) -> None:
        """Append batches whose offsets are already assigned, indexing them by Kafka's rule.

        Args:
            records: the batches.
            largest_offset: the last offset in ``records``.
            largest_timestamp: the largest (batch max) timestamp in ``records``.
            offset_of_max_timestamp: the offset Kafka records for that timestamp (the last
                offset of the batch holding it).

        Raises:
            InvalidOffsetError: ``largest_offset`` is beyond the int32 range of the base offset.
            OSError: a write failed (``ENOSPC``: the disk is full). Nothing of the append stays:
                the log is cut back to its size before it and an index entry written for it is
                removed, so the segment is as it was and the next append may retry.
        """
        size = records.size_in_bytes
        if size <= 0:
            return
        position = self.log.size_in_bytes
        if not 0 <= largest_offset - self.base_offset <= MAX_RELATIVE_OFFSET:
            self._ensure_offset_in_range(largest_offset)
        if not self._max_loaded:
            self._load_max()
        before = (self._rolling_based_timestamp, self._max_ts, self._max_ts_offset, self._bytes_since_last_index_entry)
        try:
            self._append_at(records, position, size, largest_offset, largest_timestamp, offset_of_max_timestamp)
        except OSError:
            self._rolling_based_timestamp, self._max_ts, self._max_ts_offset, self._bytes_since_last_index_entry = before
            if self.log.size_in_bytes > position:
                self.log.truncate_to(position)
            raise

    def _append_at(
        self,
        records: MemoryRecords,
        position: int,
        size: int,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
    ) -> None:
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        self.log.append(records)  # a failed write leaves the file as it was (FileRecords.append)
        if largest_timestamp > self._max_ts:
            self._max_ts, self._max_ts_offset = largest_timestamp, offset_of_max_timestamp
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            # An index write fails with ENOSPC on a full disk (index.py writes with pwrite, never
            # through the map) and then counts nothing; undo the offset entry if the time one fails.
            self.offset_index.append(largest_offset, position)
            try:
                self.time_index.maybe_append(self._max_ts, self._max_ts_offset)
            except OSError:
                self.offset_index.truncate_to(largest_offset)
                raise
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def append_job(self, *, max_segment_bytes: int, segment_ms: int, now_ms: int) -> tuple | None:
        """This segment as a compiled append writes it (the tuple of
        :class:`kafkalog.append_request.SegmentJob`: descriptors, sizes, counters and the roll
        settings of the log now), or None when the append must go through :meth:`append` (an
        index in memory, a remote file, or a roll due by the clock alone)."""
        target = self.log.append_target()
        offsets = self.offset_index.append_target()
        times = self.time_index.append_target()
        if target is None or offsets is None or times is None:
            return None
        fd, position = target
        if self._rolling_based_timestamp is None:
            self._load_first_batch_timestamp()
        roll_ts = self._rolling_based_timestamp if self._rolling_based_timestamp is not None else -1
        roll_ms = segment_ms - self.roll_jitter_ms
        if roll_ts < 0 and position > 0 and now_ms - self.created_ms > roll_ms:
            return None  # shouldRoll by the segment's age on the clock: the pure path rolls
        if not self._max_loaded:
            self._load_max()
        return (
            fd, position, self.base_offset, max_segment_bytes, roll_ts, roll_ms, self.index_interval_bytes,
            self._bytes_since_last_index_entry, *offsets, *times, self._max_ts, self._max_ts_offset,
        )

    def note_request(
        self, position: int, size: int, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int, indexed: int
    ) -> None:
        """Count what a compiled append wrote at ``position`` (what :meth:`_append_at` counts
        for its own write): the log's size, the max timestamp, the index entries it wrote
        (``indexed``: 1 an offset entry, 2 also a time entry)."""
        if position == 0:
            self._rolling_based_timestamp = max_timestamp
        self.log.note_appended(position, size)
        if max_timestamp > self._max_ts:
            self._max_ts, self._max_ts_offset = max_timestamp, offset_of_max_timestamp
        if indexed:
            self.offset_index.note_appended(last_offset, position)
            if indexed == 2:
                self.time_index.note_appended(self._max_ts, self._max_ts_offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def append_batches(self, records: MemoryRecords) -> None:
        """Append ``records`` (batches whose offsets are assigned), taking offsets and timestamps
        from their headers (how a follower, the cleaner or a copy tool appends): the bytes in
        one write, and the index entries an :meth:`append` per batch would add (Kafka's rule
        applied batch by batch: an entry before a batch once ``index.interval.bytes`` have
        gone by without one, at the batch's last offset).

        Raises:
            InvalidOffsetError: a batch's last offset is beyond the int32 range of the base offset
                (nothing is written).
            OSError: a write failed; nothing of the append stays (as :meth:`append`).
        """
        batches = _batch_extents(records)
        if len(batches) <= 1:
            for last, max_ts, _ in batches:
                self.append(records, largest_offset=last, largest_timestamp=max_ts, offset_of_max_timestamp=last)
            return
        for last, _, _ in batches:
            if not 0 <= last - self.base_offset <= MAX_RELATIVE_OFFSET:
                self._ensure_offset_in_range(last)
        if not self._max_loaded:
            self._load_max()
        position = self.log.size_in_bytes
        before = (self._rolling_based_timestamp, self._max_ts, self._max_ts_offset, self._bytes_since_last_index_entry)
        rolling, max_ts, max_ts_offset, since = before
        interval = self.index_interval_bytes
        entries: list[tuple[int, int, int, int]] = []  # (offset, position, max timestamp, its offset)
        at = position
        for last, batch_max_ts, size in batches:
            if at == 0:
                rolling = batch_max_ts
            if batch_max_ts > max_ts:
                max_ts, max_ts_offset = batch_max_ts, last
            if since > interval:
                entries.append((last, at, max_ts, max_ts_offset))
                since = 0
            since += size
            at += size
        try:
            self.log.append(records)  # a failed write leaves the file as it was (FileRecords.append)
            for offset, entry_position, entry_ts, entry_ts_offset in entries:
                self.offset_index.append(offset, entry_position)
                self.time_index.maybe_append(entry_ts, entry_ts_offset)
        except OSError:
            if entries:  # index writes fail with ENOSPC and count nothing; drop what this added
                self.offset_index.truncate_to(entries[0][0])
                self.time_index.truncate_to(entries[0][0])
            if self.log.size_in_bytes > position:
                self.log.truncate_to(position)
            raise
        self._rolling_based_timestamp, self._max_ts, self._max_ts_offset = rolling, max_ts, max_ts_offset
        self._bytes_since_last_index_entry = since

    def update_txn_index(self, producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int) -> None:
        """Record an aborted transaction (a completed transaction that was aborted)."""
        self.txn_index.append(AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset))

    # -- reading -----------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset is >= ``offset``: index floor, then a scan of
        batch headers (Kafka's ``translateOffset``). None if the offset is past the end."""
        mapping = self.offset_index.lookup(offset)
        start = max(mapping.position, starting_position)
        for batch in self.log.slice(start).batches():
            if batch.last_offset >= offset:
                return LogOffsetPosition(
                    offset=batch.last_offset,
                    position=batch.position,
                    size=batch.size_in_bytes,
                )  # type: ignore[arg-type]
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = True
    ) -> FileRecords | None:
        """A slice of the log from the batch holding ``start_offset``, at most ``max_size`` bytes
        (at least that whole first batch with ``min_one_message``) and not past
        ``max_position``. None if ``start_offset`` is past the end of the segment.

        Raises:
            ValueError: a negative ``max_size``.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for log read from segment {self.log.path}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        if max_position is None:
            max_position = self.size
        adjusted = max(max_size, found.size) if min_one_message else max_size
        if adjusted == 0 or max_position == -1:
            return self.log.slice(found.position, 0)
        fetch_size = min(max_position - found.position, adjusted)
        return self.log.slice(found.position, max(0, fetch_size))

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None) -> TimestampAndOffset | None:
        """The first record with timestamp >= ``timestamp`` and offset >= ``starting_offset``
        (Kafka's ``findOffsetByTimestamp``), or None."""
        if starting_offset is None:
            starting_offset = self.base_offset
        floor = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(floor.offset, starting_offset)).position
        for batch in self.log.slice(position).batches():
            if batch.max_timestamp >= timestamp:
                for record in batch.records():
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        epoch = batch.partition_leader_epoch
                        return TimestampAndOffset(
                            timestamp=record.timestamp, offset=record.offset, leader_epoch=epoch if epoch >= 0 else None
                        )
        return None

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions in ``[fetch_offset, upper_bound_offset)``, and whether complete."""
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def _largest_timestamp_after(self, position: int) -> TimestampOffset:
        best = TimestampOffset(-1, -1)
        for batch in self.log.slice(position).batches():
            if batch.max_timestamp > best.timestamp:
                best = TimestampOffset(batch.max_timestamp, batch.last_offset)
        return best

    def _read_largest_timestamp(self) -> TimestampOffset:
        last = self.time_index.last_entry
        position = self.offset_index.lookup(last.offset).position
        after = self._largest_timestamp_after(position)
        return after if after.timestamp > last.timestamp else last

    # -- recovery and truncation -------------------------------------------------------------------

    def recover(
        self,
        max_message_size: int | None = None,
        *,
        ongoing_txns: dict[int, int] | None = None,
        producer_state: ProducerStateManager | None = None,
        leader_epoch_cache: LeaderEpochFileCache | None = None,
    ) -> int:
        """Rebuild the indexes from the log, truncating it at the first invalid byte.

        Resets the three indexes, validates every batch (size, CRC-32C or CRC-32, counts),
        rebuilds the offset and time indexes by the append rule and the transaction index from
        the markers, truncates the log after the last valid batch, trims the indexes
        (:mod:`kafkalog.segment_recovery` holds the per-batch rule and the scan).

        Args:
            max_message_size: a batch larger than this counts as invalid (None: no limit
                beyond the file).
            ongoing_txns: producer id -> first offset of transactions open at the segment's
                start (from producer state); updated in place as transactions complete.
            producer_state: instead of ``ongoing_txns``, the partition's producer state as of
                the segment's start; every v2 batch is applied to it (as replication applies
                it) and the transactions it completes go to the transaction index, as Kafka's
                ``LogSegment.recover`` does.
            leader_epoch_cache: assigned each newer partition leader epoch met (Kafka's rule).

        Returns:
            The number of bytes truncated.

        """
        self._reset_indexes()
        last = self.time_index.last_entry
        step = RecoveryStep(
            self.base_offset, self.index_interval_bytes, offset_index=self.offset_index, time_index=self.time_index,
            max_timestamp=(last.timestamp, last.offset),
        )
        recovery = SegmentRecovery(
            step, self.txn_index, tracker=None if producer_state is not None else TransactionTracker(ongoing_txns),
            producer_state=producer_state, leader_epoch_cache=leader_epoch_cache,
        )
        log = self.log if max_message_size is None else FileRecords.open(self.log.path, max_batch_size=max_message_size)
        try:
            recovery.run(log)
        finally:
            if log is not self.log:
                log.close()
        self._set_max(step.max_timestamp, step.offset_of_max_timestamp)
        truncated = self.log.size_in_bytes - step.valid_bytes
        if self.read_only:
            self._cut_in_memory(step.valid_bytes)
        else:
            self.log.truncate_to(step.valid_bytes)
        self.offset_index.trim_to_valid_size()
        step.finish()
        self.time_index.trim_to_valid_size()
        # Kafka's recover leaves the bytes-since-last-entry count alone (0 on a freshly opened
        # segment), so appends after recovery count from zero again.
        return truncated

    def _reset_indexes(self) -> None:
        """Empty the three indexes for a recovery (read-only: new ones in memory)."""
        if self.read_only:
            self.indexes_in_memory()
        else:
            self.offset_index.reset()
            self.time_index.reset()
            self.txn_index.reset()
        self._max_loaded = False

    def indexes_in_memory(self, *, time_index_only: bool = False) -> None:
        """Read-only: give the segment empty indexes built in memory (what recovery rebuilds, or
        the empty time index a segment without one gets), leaving the files untouched."""
        directory, base, max_index = Path(self.log.path).parent, self.base_offset, self.config.segment_index_bytes
        suffix = Path(self.log.path).name[len(Path(log_file(directory, base)).name) :]
        self.time_index.close()
        self.time_index = TimeIndex(time_index_file(directory, base, suffix), base, max_index, in_memory=True)
        if time_index_only:
            return
        self.offset_index.close()
        self.txn_index.close()
        self.offset_index = OffsetIndex(offset_index_file(directory, base, suffix), base, max_index, in_memory=True)
        self.txn_index = TransactionIndex(txn_index_file(directory, base, suffix), base, in_memory=True)

    def _cut_in_memory(self, valid_bytes: int) -> None:
        """Read-only: end the segment at ``valid_bytes`` without truncating the file."""
        old = self.log
        self.log = FileRecords.open(old.path, end=valid_bytes)
        old.close()

    def truncate_to(self, offset: int) -> int:
        """Remove every batch from the one holding ``offset`` on, with their index entries;
        return the bytes removed (Kafka's ``truncateTo``)."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        removed = 0 if mapping is None else self.log.truncate_to(mapping.position)
        if self.log.size_in_bytes == 0:
            self.created_ms = self._clock()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far >= 0:
            self._set_max(*self._read_largest_timestamp())
        return removed

    # -- rolling -----------------------------------------------------------------------------------

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            for batch in self.log.batches():
                self._rolling_based_timestamp = batch.max_timestamp
                break

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """How long this segment has been open, by the first batch's timestamp when it has one
        (Kafka's ``timeWaitedForRoll``), else by the wall clock since creation."""
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp if self._rolling_based_timestamp is not None else -1
        return message_timestamp - ts if ts >= 0 else now_ms - self.created_ms

    def should_roll(
        self,
        *,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int | None = None,
        max_segment_bytes: int | None = None,
        max_segment_ms: int | None = None,
    ) -> bool:
        """Whether the next append must go to a new segment (Kafka's ``shouldRoll``): it would
        not fit ``segment.bytes``, the segment is older than ``segment.ms`` minus jitter, an
        index is full, or the offsets would overflow the relative range."""
        now_ms = self._clock() if now_ms is None else now_ms
        max_bytes = self.config.segment_bytes if max_segment_bytes is None else max_segment_bytes
        max_ms = self.config.segment_ms if max_segment_ms is None else max_segment_ms
        reached_roll_ms = self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > max_ms - self.roll_jitter_ms
        size = self.size
        return (
            size > max_bytes - messages_size
            or (size > 0 and reached_roll_ms)
            or self.offset_index.is_full
            or self.time_index.is_full
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    def on_become_inactive(self) -> None:
        """Called when a newer segment takes over: final time entry, trim the indexes and the
        log's preallocation (Kafka's ``onBecomeInactiveSegment``)."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()

    def resize_indexes(self, size: int) -> None:
        """Grow (or shrink) both indexes' files, as the log does for its active segment."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- files -------------------------------------------------------------------------------------

    def sanity_check(self) -> None:
        """Check that the index files exist and are sane; a CorruptIndexError means the
        segment needs :meth:`recover` (Kafka's loader recovers on a missing offset index too).
        Call it before anything opens the indexes: opening creates a missing file."""
        for index in (self.offset_index, self.time_index):
            if not index.path.exists():
                raise CorruptIndexError("index file does not exist", file=str(index.path))
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        self.txn_index.sanity_check()

    def flush(self) -> None:
        """fsync the log and the indexes.

        Raises:
            LogClosedError: the segment was closed (deleted) before.
        """
        with self._files_lock:
            self.log.flush()
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()

    def close(self) -> None:
        """Final time entry, trim and close every file."""
        with self._files_lock:
            if self.log.closed:
                return
            if not self.read_only and self._max_loaded:
                self.time_index.maybe_append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
                )
            self.offset_index.close()
            self.time_index.close()
            self.txn_index.close()
            self.log.close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file from ``old_suffix`` to ``new_suffix`` (``""``, ``.cleaned``,
        ``.swap``, ``.deleted``), each atomically."""

        def renamed(path: os.PathLike | str) -> Path:
            path = Path(path)
            name = path.name
            if old_suffix and not name.endswith(old_suffix):
                raise ValueError(f"{name} does not end with {old_suffix!r}")
            stem = name[: len(name) - len(old_suffix)] if old_suffix else name
            return path.with_name(stem + new_suffix)

        self.log.rename_to(renamed(self.log.path))
        self.offset_index.rename_to(renamed(self.offset_index.path))
        self.time_index.rename_to(renamed(self.time_index.path))
        self.txn_index.rename_to(renamed(self.txn_index.path))

    def delete_if_exists(self) -> None:
        """Close and delete every file of the segment."""
        with self._files_lock:
            path = self.log.path
            self.log.close()
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            self.offset_index.delete_if_exists()
            self.time_index.delete_if_exists()
            self.txn_index.delete_if_exists()


_FIELD = {name: i for i, (name, _, _) in enumerate(HEADER_FIELDS)}
_LENGTH, _MAGIC = _FIELD["length"], _FIELD["magic"]
_LAST_OFFSET_DELTA, _MAX_TIMESTAMP = _FIELD["last_offset_delta"], _FIELD["max_timestamp"]


def _batch_extents(records: MemoryRecords) -> list[tuple[int, int, int]]:
    """(last offset, max timestamp, entry size) of each batch of ``records``, as
    ``records.batches()`` gives them. Whole v2 batches are read with one header unpack each, no
    batch object (the cleaner appends thousands per chunk); at anything else -- another magic,
    a size that does not frame -- the batch iterator takes over, which raises what is wrong."""
    buf = records.buffer
    end, max_batch = len(buf), records.max_batch_size
    unpack = HEADER.unpack_from
    out: list[tuple[int, int, int]] = []
    pos = 0
    while pos < end:
        if end - pos < RECORD_BATCH_OVERHEAD:
            break
        f = unpack(buf, pos)
        length = f[_LENGTH]
        if f[_MAGIC] != MAGIC_V2 or not RECORD_BATCH_OVERHEAD - LOG_OVERHEAD <= length <= max_batch \
                or length > end - pos - LOG_OVERHEAD:
            break
        out.append((f[0] + f[_LAST_OFFSET_DELTA], f[_MAX_TIMESTAMP], length + LOG_OVERHEAD))
        pos += length + LOG_OVERHEAD
    if pos < end:
        return [(b.last_offset, b.max_timestamp, b.size_in_bytes) for b in records.batches()]
    return out
