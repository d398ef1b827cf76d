"""Log compaction: Kafka's log cleaner, with its rules, its swap protocol and its 24-byte slots.

Three parts, as in Kafka:

- :class:`~kafkalog.cleaner_offset_map.OffsetMap` (Kafka's ``SkimpyOffsetMap``, :mod:`kafkalog.cleaner_offset_map`):
  fixed memory, open addressing, a 16-byte MD5 digest of the key and an 8-byte offset per slot.
- :class:`Cleaner` (Kafka's ``Cleaner``): pure; everything it needs -- the map, an I/O
  :class:`~kafkalog.cleaner_stats.Throttler`, a clock, an abort check -- is passed in. One pass maps the dirty range
  (latest offset per key; aborted transactions and control batches skipped), then rewrites the
  log from its start to the end of what was mapped, group by group, through
  :func:`kafkalog.memory_records.filter_to`, and swaps each group's ``.cleaned`` segment in with
  :meth:`kafkalog.log.Log.replace_segments`.
- :class:`LogCleaner` (Kafka's ``LogCleaner`` + ``LogCleanerManager``): chooses the work
  (dirty ratio, compaction lags, first uncleanable offset -- read from the log by
  :mod:`kafkalog.cleaner_manager` --, filthiest log first, the ``cleaner-offset-checkpoint``),
  runs once (:meth:`LogCleaner.clean`) or as a background thread
  over many logs, and sets aside a log whose cleaning failed (uncleanable, with the reason)
  while it carries on with the others.

The rules, each from Kafka's cleaner (comments name them where the code applies them):

- A keyed record stays if its offset is at least the map's offset for its key; records past the
  mapped range stay; records without a key go.
- Tombstones (null values): a v2 batch gets a delete horizon (now + ``delete.retention.ms``) the
  first time a pass keeps a tombstone in it; a later pass after the horizon removes them.
  v0/v1 tombstones stay while their segment's mtime is within ``delete.retention.ms`` of the
  last cleaned segment's mtime (Kafka's legacy rule).
- Transactions: nothing at or past the last stable offset is cleaned; aborted data goes; a
  marker goes once its transaction has no data left and its own horizon has passed; aborted
  transactions that still have data are written to the new ``.txnindex``.
- Producer state: the batch holding an active producer's last data offset (or, with no data,
  its last marker) is kept, as an empty header if need be, and so is the last batch of a pass.

Where Kafka has had bugs, the behaviour here is Kafka's corrected one: tombstones get their
horizon from the pass that first keeps them (KIP-534), markers are never keyed into the map,
aborted transactions are collected over whole segments so a partial pass keeps their index
entries, and an emptied v0/v1 batch is dropped rather than failing the log.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from . import native
from .cleaner_filter import CleanedTransactionMetadata, CleanerFilter
from .cleaner_manager import (  # noqa: F401 (cleanable_offsets, max_compaction_delay: importable here too)
    LogToClean,
    cleanable_offsets,
    earliest_delete_horizon,
    log_to_clean,
    max_compaction_delay,
)
from .cleaner_stats import (  # noqa: F401
    REASONS,
    CleanerProgress,
    CleanerStats,
    SegmentCleanStats,
    Throttler,
)
from .errors import InvalidConfigError, KafkalogError, LogCleaningAbortedError
from .log import Log
from .cleaner_offset_map import OffsetMap
from .producer_state.manager import LastRecord
from .record import MAGIC_V2, RecordBatch
from .memory_records import FilterResult, MemoryRecords, filter_to, records_span
from .segment import LogSegment
from .varint import INT32_MAX

_log = logging.getLogger("kafkalog.cleaner")

# Kafka's broker defaults (log.cleaner.*).
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_IO_BUFFER_SIZE = 512 * 1024
DEFAULT_LOAD_FACTOR = 0.9
DEFAULT_BACKOFF_MS = 15_000



class _RunCounts(NamedTuple):
    """The counts of a compiled filter run that ``clean_into`` reads (as a FilterResult's)."""

    bytes_read: int
    records_read: int
    records_retained: int
    bytes_retained: int
    batches_rewritten: int
    empty_batches: int
    horizons_set: int


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def group_segments_by_size(
    segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[LogSegment]]:
    """Consecutive segments grouped so each group's log, offset index and time index sizes stay
    within the limits and its offsets within one segment's int32 range (Kafka's
    ``groupSegmentsBySize``); each group is rewritten into one segment."""
    groups: list[list[LogSegment]] = []
    i, n = 0, len(segments)
    while i < n:
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.size_in_bytes
        time_size = segments[i].time_index.size_in_bytes
        i += 1
        while i < n:
            seg = segments[i]
            # The last offset of seg, bounded by the next segment's base (or the uncleanable offset).
            last = segments[i + 1].base_offset - 1 if i + 1 < n else first_uncleanable_offset - 1
            if not (
                log_size + seg.size <= max_size
                and index_size + seg.offset_index.size_in_bytes <= max_index_size
                and time_size + seg.time_index.size_in_bytes <= max_index_size
                and (seg.size == 0 or last - group[-1].base_offset <= INT32_MAX)
            ):
                break
            group.append(seg)
            log_size += seg.size
            index_size += seg.offset_index.size_in_bytes
            time_size += seg.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


# ----------------------------------------------------------------------------------------------
# The cleaner


class Cleaner:
    """One cleaner (Kafka's ``Cleaner``): maps the dirty range of a log and rewrites the log up
    to the end of what it mapped. Pure: the offset map, throttler, clock and abort check are
    given; it keeps no state between passes.

    Args:
        offset_map: the map (cleared at the start of each pass).
        io_buffer_size: about how many bytes are read, filtered and written at a time.
        load_factor: how full the map may get (Kafka's ``log.cleaner.io.buffer.load.factor``).
        throttler: the I/O budget shared by reads and writes.
        clock: epoch ms, for delete horizons and segment times.
        check_done: called often with the log; raise
            :class:`~kafkalog.errors.LogCleaningAbortedError` in it to stop the pass.
        progress: called with a :class:`CleanerProgress` after each chunk.
    """

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE // 2,
        load_factor: float = DEFAULT_LOAD_FACTOR,
        throttler: Throttler | None = None,
        clock: Callable[[], int] | None = None,
        check_done: Callable[[Log], None] | None = None,
        progress: Callable[[CleanerProgress], None] | None = None,
    ) -> None:
        if not 0 < load_factor <= 1:
            raise InvalidConfigError(f"the offset map load factor must be in (0, 1], not {load_factor}")
        if offset_map.slots * load_factor <= 1:
            raise InvalidConfigError(
                "the offset map is too small to hold even one key, so cleaning would never progress; "
                "raise the dedupe buffer size"
            )
        self.offset_map = offset_map
        self.io_buffer_size = max(io_buffer_size, 1024)
        self.load_factor = load_factor
        self.throttler = throttler or Throttler()
        self.clock = clock or _now_ms
        self.check_done = check_done or (lambda log: None)
        self.progress = progress

    # -- one pass ---------------------------------------------------------------------------

    def clean(
        self, cleanable: LogToClean, now_ms: int | None = None, *, dry_run: bool = False, count_keys: bool = False
    ) -> tuple[int, CleanerStats]:
        """Clean ``cleanable.log`` once; return the first offset not cleaned and the figures.
        With ``dry_run`` everything is decided and counted but nothing is written; with
        ``count_keys`` removals are also counted per key."""
        now = self.clock() if now_ms is None else now_ms
        log = cleanable.log
        stats = CleanerStats(
            log=log.directory.name, first_dirty_offset=cleanable.first_dirty_offset, rounds=1, dry_run=dry_run,
            removed_by_key={} if count_keys else None,
        )  # fmt: skip
        started = time.monotonic()
        throttled_before = self.throttler.slept_s
        truncations = log.truncations
        # Kafka: v0/v1 tombstones may go when their segment is older than the last clean
        # segment's mtime minus delete.retention.ms.
        clean_section = log.log_segments(0, cleanable.first_dirty_offset)
        legacy_horizon = clean_section[-1].last_modified_ms - log.config.delete_retention_ms if clean_section else 0

        upper = cleanable.first_uncleanable_offset
        self.build_offset_map(log, cleanable.first_dirty_offset, upper, stats)
        if self.offset_map.latest_offset < cleanable.first_dirty_offset - 1:
            # Nothing dirty (a pass for tombstone horizons only): the clean section is still
            # rewritten, its keys each appear once there, so an empty map keeps them all.
            self.offset_map.update_latest_offset(cleanable.first_dirty_offset - 1)
        end_offset = self.offset_map.latest_offset + 1
        stats.map_s = time.monotonic() - started
        stats.map_entries = self.offset_map.size
        stats.map_slots = self.offset_map.slots

        txns = CleanedTransactionMetadata()
        segments = log.log_segments(0, end_offset)
        groups = group_segments_by_size(segments, log.config.segment_bytes, log.config.segment_index_bytes, upper)
        total = sum(s.size for s in segments)
        done = 0
        for group in groups:
            done = self.clean_segments(log, group, now, stats, txns, legacy_horizon, upper, truncations, done, total)
        stats.groups = len(groups)
        stats.keyless_records = stats.removed.get("keyless", 0)
        stats.tombstones_removed = stats.removed.get("tombstone", 0)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end_offset = end_offset
        stats.throttled_s = self.throttler.slept_s - throttled_before
        stats.elapsed_s = time.monotonic() - started
        return end_offset, stats

    def clean_segments(
        self,
        log: Log,
        segments: list[LogSegment],
        now_ms: int,
        stats: CleanerStats,
        txns: CleanedTransactionMetadata,
        legacy_horizon_ms: int,
        upper_bound_offset: int,
        truncations: int,
        done: int = 0,
        total: int = 0,
    ) -> int:
        """Rewrite one group of segments into a ``.cleaned`` segment and swap it in (in a dry
        run, only count)."""
        cleaned = None if stats.dry_run else log.create_cleaned_segment(segments[0].base_offset)
        txns.cleaned_segment = cleaned
        try:
            last_records = log.last_records_of_active_producers()
            for i, segment in enumerate(segments):
                # Aborted transactions over the whole segment, so the new index is complete.
                upper = segments[i + 1].base_offset if i + 1 < len(segments) else segment.next_offset
                txns.add_aborted(log.collect_aborted_transactions(segment.base_offset, upper))
                retain_legacy = segment.last_modified_ms > legacy_horizon_ms
                self.clean_into(
                    log, segment, cleaned, now_ms, retain_legacy, txns, last_records, upper_bound_offset, stats,
                    done, total,
                )  # fmt: skip
                done += segment.size
            if cleaned is not None:
                cleaned.on_become_inactive()
                cleaned.flush()
                # The new segment keeps the mtime of the last one it replaces (retention and the
                # legacy tombstone rule read it).
                mtime_ns = os.stat(segments[-1].log.path).st_mtime_ns
                os.utime(cleaned.log.path, ns=(mtime_ns, mtime_ns))
                self.check_done(log)
                log.replace_segments(cleaned, segments, truncations=truncations)
        except BaseException:
            if cleaned is not None:
                try:
                    cleaned.delete_if_exists()
                except OSError:
                    _log.exception("could not delete the cleaned segment %s", cleaned.log.path)
            raise
        stats.segments_cleaned += len(segments)
        return done

    def clean_into(
        self,
        log: Log,
        source: LogSegment,
        dest: LogSegment | None,
        now_ms: int,
        retain_legacy_deletes: bool,
        txns: CleanedTransactionMetadata,
        last_records: dict[int, LastRecord],
        upper_bound_offset: int,
        stats: CleanerStats,
        done: int = 0,
        total: int = 0,
    ) -> None:
        """Copy what the map keeps of ``source`` into ``dest`` (Kafka's ``cleanInto``); with no
        ``dest`` (a dry run) only count."""
        record_filter = CleanerFilter(
            now_ms, log.config.delete_retention_ms, self.offset_map, retain_legacy_deletes, txns, last_records,
            upper_bound_offset,
        )  # fmt: skip
        if stats.removed_by_key is not None:
            record_filter.by_key = Counter()
        seg = SegmentCleanStats(base_offset=source.base_offset, size=source.size)
        out = bytearray()
        for result in self._filtered(log, source, record_filter, out):
            self.throttler.maybe_throttle(result.bytes_read)
            stats.bytes_read += result.bytes_read
            stats.records_read += result.records_read
            stats.records_written += result.records_retained
            stats.bytes_written += result.bytes_retained
            stats.batches_rewritten += result.batches_rewritten
            stats.empty_batches += result.empty_batches
            stats.horizons_set += result.horizons_set
            seg.records_kept += result.records_retained
            seg.bytes_kept += result.bytes_retained
            if out and dest is not None:
                # Appended batch by batch, each indexed at its header's last offset and max
                # timestamp, as LogSegment.recover rebuilds the index. Kafka's cleanInto appends each read
                # buffer's output at once with dest.append(result.maxOffset, ...), filterTo's
                # maxOffset being the last *kept* record's offset; a rewritten v2 batch keeps its
                # original lastOffset (buildRetainedRecordsInto overrides it), so Kafka's entry can
                # name an offset inside the batch, which its own recovery would not write and
                # `verify` rejects.
                dest.append_batches(MemoryRecords(out))
                self.throttler.maybe_throttle(len(out))
            done += result.bytes_read
            if self.progress is not None:
                self.progress(CleanerProgress(log.directory.name, "clean", done, total))
        seg.removed = dict(record_filter.removed)
        seg.records_read = seg.records_kept + sum(seg.removed.values())
        stats.segments.append(seg)
        for reason, n in seg.removed.items():
            stats.removed[reason] = stats.removed.get(reason, 0) + n
        if record_filter.by_key:
            merged = Counter(stats.removed_by_key)
            merged.update(record_filter.by_key)
            stats.removed_by_key = dict(merged)

    def _filtered(
        self, log: Log, source: LogSegment, record_filter: CleanerFilter, out: bytearray
    ) -> Iterator[FilterResult | _RunCounts]:
        """``filter_to`` over the segment chunk by chunk, ``out`` holding each chunk's output
        when its counts are yielded. On the compiled core each read of ``io_buffer_size`` bytes
        goes first to :meth:`CleanerFilter.filter_run` (its run of plain data batches in one
        call); an entry the run does not take goes through ``filter_to`` alone, read and checked
        as :meth:`_chunks` reads it (so damage raises the same error)."""
        if native.ext is None or record_filter.by_key is not None:
            for chunk in self._chunks(log, source, 0):
                self.check_done(log)
                out.clear()
                yield filter_to(chunk, record_filter, out)
            return
        records = source.log
        position, end, max_batch = 0, records.size_in_bytes, records.max_batch_size
        while position < end:
            self.check_done(log)
            out.clear()
            data = records.read(position, min(self.io_buffer_size, end - position))
            run = record_filter.filter_run(data, 0, len(data), max_batch)
            if run is not None and run.batches:
                out += run.output
                position += run.stop
                yield _RunCounts(run.stop, run.records_read, run.records_retained, run.bytes_retained,
                                 run.batches_rewritten, run.empty_batches, run.horizons_set)
                continue
            batch = next(records.slice(position).batches(validate=True, strict=True), None)
            if batch is None:
                return
            position += batch.size_in_bytes
            yield filter_to([batch], record_filter, out)

    # -- the offset map ---------------------------------------------------------------------

    def build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        """Map the latest offset of every key in ``[start, end)`` until the map reaches its load
        factor (Kafka's ``buildOffsetMap``); the map's latest offset says where that was."""
        offset_map = self.offset_map
        offset_map.clear()
        dirty = log.log_segments(start, end)
        txns = CleanedTransactionMetadata()
        txns.add_aborted(log.collect_aborted_transactions(start, end))
        total = sum(s.size for s in dirty)
        done = 0
        for i, segment in enumerate(dirty):
            self.check_done(log)
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            full, read = self._map_segment(log, segment, start, next_start, txns, stats, done, total)
            done += read
            if full:
                _log.debug("offset map of %s full in segment %d", log.directory.name, segment.base_offset)
                return

    def _map_segment(
        self,
        log: Log,
        segment: LogSegment,
        start: int,
        next_segment_start: int,
        txns: CleanedTransactionMetadata,
        stats: CleanerStats,
        done: int,
        total: int,
    ) -> tuple[bool, int]:
        offset_map = self.offset_map
        max_entries = int(offset_map.slots * self.load_factor)
        position = segment.offset_index.lookup(start).position
        if native.ext is not None:
            return self._map_segment_runs(log, segment, position, start, next_segment_start, txns, stats, done, total)
        read = 0
        for chunk in self._chunks(log, segment, position):
            self.check_done(log)
            chunk_bytes = 0
            for batch in chunk:
                chunk_bytes += batch.size_in_bytes
                if self._map_one(batch, start, max_entries, txns, stats):
                    stats.map_bytes_read += chunk_bytes
                    return True, read + chunk_bytes
            self.throttler.maybe_throttle(chunk_bytes)
            stats.map_bytes_read += chunk_bytes
            read += chunk_bytes
            if self.progress is not None:
                self.progress(CleanerProgress(log.directory.name, "map", done + read, total))
        # An offset gap at the segment's end: what was mapped reaches the next segment.
        offset_map.update_latest_offset(next_segment_start - 1)
        return False, read

    def _map_one(
        self, batch: RecordBatch, start: int, max_entries: int, txns: CleanedTransactionMetadata, stats: CleanerStats
    ) -> bool:
        """Map one checked batch (markers and aborted data are only followed); True when the
        map reached ``max_entries`` in it (the pass ends there)."""
        if batch.is_control:
            txns.on_control_batch(batch, batch.records())
            stats.map_records_read += 1
        elif txns.on_batch(batch):
            stats.map_records_read += batch.count or 0  # aborted: not mapped
        else:
            full, records = self._map_batch(batch, start, max_entries)
            if full:
                return True
            stats.map_records_read += records
        if batch.last_offset >= start:
            self.offset_map.update_latest_offset(batch.last_offset)
        return False

    def _map_segment_runs(
        self,
        log: Log,
        segment: LogSegment,
        position: int,
        start: int,
        next_segment_start: int,
        txns: CleanedTransactionMetadata,
        stats: CleanerStats,
        done: int,
        total: int,
    ) -> tuple[bool, int]:
        """:meth:`_map_segment` on the compiled core: the segment read ``io_buffer_size`` bytes
        at a time, each read's run of plain data batches (whole, CRC-checked, uncompressed,
        non-transactional v2) mapped by one compiled call (:meth:`OffsetMap.put_run`); an entry
        the run does not take (a marker, transactional or compressed data, a legacy message, a
        batch larger than the read, damage) goes through :meth:`_map_one` alone, read and
        checked as :meth:`_chunks` reads it (so damage raises the same error)."""
        offset_map = self.offset_map
        max_entries = int(offset_map.slots * self.load_factor)
        source = segment.log
        end = source.size_in_bytes
        max_batch = source.max_batch_size
        read = 0
        while position < end:
            self.check_done(log)
            data = source.read(position, min(self.io_buffer_size, end - position))
            stop, batches, records, max_last, full = offset_map.put_run(data, 0, len(data), max_batch, start, max_entries)
            step = stop
            stats.map_records_read += records
            if batches:
                txns.passed(max_last)  # what on_batch records for data outside transactions
            if full:
                stats.map_bytes_read += step
                return True, read + step
            if not batches:
                batch = next(source.slice(position).batches(validate=True, strict=True), None)
                if batch is None:
                    break
                step = batch.size_in_bytes
                if self._map_one(batch, start, max_entries, txns, stats):
                    stats.map_bytes_read += step
                    return True, read + step
            self.throttler.maybe_throttle(step)
            stats.map_bytes_read += step
            read += step
            position += step
            if self.progress is not None:
                self.progress(CleanerProgress(log.directory.name, "map", done + read, total))
        offset_map.update_latest_offset(next_segment_start - 1)
        return False, read

    def _map_batch(self, batch: RecordBatch, start: int, max_entries: int) -> tuple[bool, int]:
        """Put the keys of a data batch's records at or past ``start``: ``(full, records)``,
        full when the map reached ``max_entries`` first (the rest of the batch is not mapped)."""
        offset_map = self.offset_map
        count = batch.count
        if native.ext is not None and batch.magic >= MAGIC_V2 and count:
            data, begin, end = records_span(batch)
            try:
                return offset_map.put_batch(data, begin, end, count, batch.base_offset, start, max_entries), count
            except native.Invalid:
                pass  # the pure loop below raises the typed error
        records = batch.records()
        for record in records:
            key = record.key
            if key is not None and record.offset >= start:
                if offset_map.size >= max_entries:
                    return True, len(records)
                offset_map.put(key, record.offset)
        return False, len(records)

    def _chunks(self, log: Log, segment: LogSegment, position: int) -> Iterable[list[RecordBatch]]:
        """The segment's batches from ``position``, checked (CRC and structure), in runs of
        about ``io_buffer_size`` bytes. A damaged batch raises with its file and position; the
        log is then set aside as uncleanable rather than rewritten around the damage."""
        chunk: list[RecordBatch] = []
        size = 0
        source = segment.log.slice(position) if position else segment.log
        # Unlike Kafka's fixed buffers (grown up to max.message.bytes, failing the log beyond),
        # a batch of any size the file holds is read whole: a compacted topic may hold batches
        # written before its limit was lowered.
        for batch in source.batches(validate=True, strict=True):
            chunk.append(batch)
            size += batch.size_in_bytes
            if size >= self.io_buffer_size:
                yield chunk
                chunk, size = [], 0
        if chunk:
            yield chunk


# ----------------------------------------------------------------------------------------------
# The shell: run once, or in the background over many logs


class LogCleaner:
    """Compacts logs whose ``cleanup.policy`` includes ``compact`` (Kafka's ``LogCleaner``).

    Run once with :meth:`clean` (this log, now), or add logs and :meth:`start` a background
    thread that cleans the filthiest log whose dirty ratio is over ``min.cleanable.dirty.ratio``
    (or whose ``max.compaction.lag.ms`` has passed, or whose tombstone horizons have) every
    ``backoff_ms`` until :meth:`stop`.

    Args:
        dedupe_buffer_size: bytes for the offset map (Kafka's ``log.cleaner.dedupe.buffer.size``).
        io_buffer_size: bytes of I/O buffers (Kafka's ``log.cleaner.io.buffer.size``; half for
            reading).
        load_factor: how full the offset map may get.
        io_max_bytes_per_second: the I/O budget (Kafka's ``log.cleaner.io.max.bytes.per.second``).
        backoff_ms: the background thread's sleep when nothing is cleanable.
        uncleanable_retry_ms: how long a log whose cleaning failed is left alone before the
            background thread tries it again (:meth:`clean` always tries).
        clock: epoch ms.
        progress: called with a :class:`CleanerProgress` as cleaning goes.
        on_stats: called with the :class:`CleanerStats` of every finished cleaning.
    """

    def __init__(
        self,
        *,
        dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
        load_factor: float = DEFAULT_LOAD_FACTOR,
        io_max_bytes_per_second: float = math.inf,
        backoff_ms: int = DEFAULT_BACKOFF_MS,
        uncleanable_retry_ms: int = 3_600_000,
        clock: Callable[[], int] | None = None,
        progress: Callable[[CleanerProgress], None] | None = None,
        on_stats: Callable[[CleanerStats], None] | None = None,
    ) -> None:
        self.clock = clock or _now_ms
        self.throttler = Throttler(io_max_bytes_per_second)
        self.offset_map = OffsetMap(dedupe_buffer_size)
        self.cleaner = Cleaner(
            self.offset_map,
            io_buffer_size=io_buffer_size // 2,
            load_factor=load_factor,
            throttler=self.throttler,
            clock=self.clock,
            check_done=self._check_done,
            progress=progress,
        )
        self.backoff_ms = backoff_ms
        self.uncleanable_retry_ms = uncleanable_retry_ms
        self.on_stats = on_stats
        self._logs: dict[str, Log] = {}
        self._uncleanable: dict[str, tuple[str, int]] = {}  # directory -> (reason, when)
        self._horizons: dict[str, int | None] = {}  # directory -> earliest horizon not yet acted on
        self._last_pass: dict[str, int] = {}  # directory -> "now" of its last pass
        self._lock = threading.Condition()
        self._in_progress: str | None = None
        self._run_lock = threading.Lock()  # one pass at a time: the map is shared
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_stats: CleanerStats | None = None

    # -- run once ---------------------------------------------------------------------------

    def clean(
        self, log: Log, now_ms: int | None = None, *, dry_run: bool = False, count_keys: bool = False
    ) -> CleanerStats | None:
        """Compact ``log`` now if anything in it is cleanable: dirty records below its first
        uncleanable offset (whatever the dirty ratio), or batches whose tombstone or marker
        delete horizon has passed. Passes repeat until the dirty range is done (a full offset
        map ends a pass early). Returns the figures, or None when there was nothing to do.

        With ``dry_run`` one pass decides and counts everything (by reason, per segment, and
        with ``count_keys`` per key) but writes nothing: no segment, no checkpoint. Its
        ``end_offset`` below the first uncleanable offset means more passes would follow.

        Raises:
            InvalidConfigError: the log's ``cleanup.policy`` does not include ``compact``.
            LogCleaningAbortedError: the log changed underneath (truncation, retention, close)
                or :meth:`stop` was called; nothing half-done is left.
            KafkalogError, OSError: the log could not be read or written (it is also marked
                uncleanable, with the reason).
        """
        if not log.config.compact:
            raise InvalidConfigError(
                f"cleanup.policy of {log.directory.name} is {','.join(log.config.cleanup_policy)}; it does not include compact",
                file=str(log.directory),
            )
        total: CleanerStats | None = None
        while True:
            now = self.clock() if now_ms is None else now_ms
            ltc = log_to_clean(log, now, write=not dry_run)
            if ltc.cleanable_bytes == 0 and not self._horizon_due(log, ltc, now):
                break
            if total is not None and ltc.first_dirty_offset >= ltc.first_uncleanable_offset:
                break  # a horizon-only pass already ran
            if dry_run:
                with self._run_lock:
                    return self.cleaner.clean(ltc, now, dry_run=True, count_keys=count_keys)[1]
            stats = self._clean_log(ltc, now, count_keys)
            if total is None:
                total = stats
            else:
                total.add(stats)
            if stats.end_offset >= ltc.first_uncleanable_offset or stats.end_offset <= ltc.first_dirty_offset:
                break
        if total is not None:
            self.last_stats = total
        return total

    def _horizon_due(self, log: Log, ltc: LogToClean, now: int) -> bool:
        """Whether a batch in the clean section has a delete horizon that has passed since the
        log's last pass here (one that passed before it was already acted on: the batch is a
        marker whose transaction still has data, and waits for the data to go)."""
        key = str(log.directory)
        last_pass = self._last_pass.get(key, -1)
        if key not in self._horizons:
            self._horizons[key] = earliest_delete_horizon(log, ltc.first_dirty_offset, last_pass)
        earliest = self._horizons[key]
        return earliest is not None and earliest <= now

    def _clean_log(self, ltc: LogToClean, now: int, count_keys: bool = False) -> CleanerStats:
        log = ltc.log
        key = str(log.directory)
        with self._lock:
            while self._in_progress == key:
                self._lock.wait()
            self._in_progress = key
        try:
            with self._run_lock:
                try:
                    end, stats = self.cleaner.clean(ltc, now, count_keys=count_keys)
                except LogCleaningAbortedError:
                    raise
                except (KafkalogError, OSError, ValueError, OverflowError) as e:
                    reason = f"{type(e).__name__}: {e}"
                    _log.warning("marking %s uncleanable: %s", log.directory, reason)
                    with self._lock:
                        self._uncleanable[key] = (reason, self.clock())
                    raise
            log.checkpoint_cleaner_offset(end)
            self._horizons.pop(key, None)  # horizons changed: rescan when next asked
            self._last_pass[key] = now
            with self._lock:
                self._uncleanable.pop(key, None)
            _log.info("%s", stats.summary())
            if self.on_stats is not None:
                self.on_stats(stats)
            return stats
        finally:
            with self._lock:
                self._in_progress = None
                self._lock.notify_all()

    def _check_done(self, log: Log) -> None:
        if self._stop.is_set() and self._thread is not None:
            raise LogCleaningAbortedError("the cleaner is stopping", file=str(log.directory))
        if log.closed:
            raise LogCleaningAbortedError("the log was closed during cleaning", file=str(log.directory))

    # -- many logs --------------------------------------------------------------------------

    @property
    def uncleanable(self) -> dict[str, str]:
        """Partition directory -> why its last cleaning failed."""
        with self._lock:
            return {k: reason for k, (reason, _) in self._uncleanable.items()}

    def add_log(self, log: Log) -> None:
        """Let the background thread clean ``log`` (when its policy includes compact)."""
        with self._lock:
            self._logs[str(log.directory)] = log

    def clean_filthiest(self, now_ms: int | None = None) -> CleanerStats | None:
        """One round of the background loop: clean the filthiest cleanable log, if any (Kafka's
        ``grabFilthiestCompactedLog`` + ``cleanLog``)."""
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            logs = [log for key, log in self._logs.items() if not self._is_set_aside(key, now)]
        candidates = []
        for log in logs:
            if log.closed or not log.config.compact:
                continue
            try:
                ltc = log_to_clean(log, now)
                if ltc.total_bytes == 0:
                    continue
                if (
                    (ltc.need_compaction_now and ltc.cleanable_bytes > 0)
                    or ltc.cleanable_ratio > log.config.min_cleanable_dirty_ratio
                    or self._horizon_due(log, ltc, now)
                ):
                    candidates.append(ltc)
            except (KafkalogError, OSError) as e:
                with self._lock:
                    self._uncleanable[str(log.directory)] = (f"{type(e).__name__}: {e}", now)
                _log.warning("marking %s uncleanable: %s", log.directory, e)
        if not candidates:
            return None
        filthiest = max(candidates, key=lambda c: c.cleanable_ratio)
        try:
            return self._clean_log(filthiest, now)
        except LogCleaningAbortedError:
            return None
        except (KafkalogError, OSError, ValueError, OverflowError):
            return None  # recorded as uncleanable; the others carry on

    def _is_set_aside(self, key: str, now: int) -> bool:
        entry = self._uncleanable.get(key)
        if entry is None:
            return False
        if now - entry[1] >= self.uncleanable_retry_ms:
            return False  # time to try again
        return True

    def start(self) -> None:
        """Start the background thread."""
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="kafkalog-cleaner", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the background thread: a pass in progress is aborted (its ``.cleaned`` files
        deleted, the log untouched) and the thread joined."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.clean_filthiest()
            except Exception:  # the thread must survive anything one log throws
                _log.exception("log cleaner round failed")
                cleaned = None
            if cleaned is None:
                self._stop.wait(self.backoff_ms / 1000.0)

    def __enter__(self) -> LogCleaner:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
