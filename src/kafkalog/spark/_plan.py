"""Planning a read (on the driver): the offsets wanted per partition, then input partitions.

Bounds follow Kafka's ListOffsets rules and Spark's precedence (a timestamp option over the
offsets option; ``earliest`` is the log start, ``latest`` the log end, or the last stable offset
under read_committed). Planning makes one :class:`_Slice` per segment overlapping the bounds,
split at offset-index entries every ``maxBytesPerPartition``; a segment outside the bounds is
never opened, and the first one is entered at the offset-index floor entry of the start. On a
remote filesystem planning fetches the indexes and a few batch headers where they point, never
a segment's body.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import FileRecords
from ..partition_view import SegmentView
from ..resync import batch_at, first_entry_after
from ..errors import InvalidOffsetError
from ._options import EARLIEST, LATEST, _ReadOptions
from ._partition import _PartitionLog

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"


@dataclass(frozen=True)
class _Bounds:
    """The offsets [start, end) wanted from one partition directory."""

    start: int
    end: int  # exclusive


@dataclass(frozen=True)
class _Slice:
    """A window of one segment file and the offsets wanted from it (picklable: Spark ships it
    to an executor)."""

    topic: str
    partition: int
    path: str
    base: int
    start_position: int
    end_position: int
    start_offset: int
    end_offset: int
    strict_end: bool  # the window ends at a batch boundary taken from the index
    aborted: tuple[tuple[int, int, int], ...] | None  # read_committed: (producer id, first offset, marker offset)


def _plan(plogs: Sequence[_PartitionLog], bounds: dict[str, _Bounds], options: _ReadOptions,
          time_floor: int | None = None) -> list[_Slice]:
    """Slices for the wanted offsets of each partition (``bounds`` by directory path; a glob may
    hold the same topic-partition in several directories): one per segment overlapping them,
    split at index entries every ``maxBytesPerPartition``; ``time_floor`` (a pushed lower
    bound on timestamps) also skips segments and leading index ranges wholly below it."""
    out: list[_Slice] = []
    ranges = _offset_ranges(
        [(plog.dir.path, bounds[plog.dir.path]) for plog in plogs if plog.dir.path in bounds], options.min_partitions
    )
    for plog in plogs:
        for b in ranges.get(plog.dir.path, ()):
            _plan_range(plog, b, options, time_floor, out)
    return out


def _offset_ranges(bounds: list[tuple[str, _Bounds]], min_partitions: int | None) -> dict[str, list[_Bounds]]:
    """Spark's ``KafkaOffsetRangeCalculator``: with ``minPartitions`` above the number of
    non-empty ranges, a range gets ``round(size / total * minPartitions)`` parts (at least one);
    the ranges left whole are taken out of the sums, and the rest share what remains of
    ``minPartitions``; a range is cut into parts of equal offsets (the last takes the rest)."""
    ranges = [(path, b) for path, b in bounds if b.end > b.start]
    if min_partitions is None or len(ranges) >= min_partitions:
        return {path: [b] for path, b in ranges}

    def parts_of(size: int, total: int, wanted: int) -> int:
        return max(_round_half_up(size / total * wanted), 1)

    total = sum(b.end - b.start for _, b in ranges)
    whole = {path for path, b in ranges if parts_of(b.end - b.start, total, min_partitions) == 1}
    split_total = total - sum(b.end - b.start for path, b in ranges if path in whole)
    split_wanted = max(min_partitions - len(whole), 1)
    out: dict[str, list[_Bounds]] = {}
    for path, b in ranges:
        size = b.end - b.start
        parts = 1 if path in whole else parts_of(size, split_total, split_wanted)
        remaining, start, pieces = size, b.start, []
        for k in range(parts):
            this = remaining // (parts - k)
            remaining -= this
            end = min(start + this, b.end)
            if end > start:
                pieces.append(_Bounds(start, end))
            start = end
        out[path] = pieces
    return out


def _round_half_up(x: float) -> int:
    """Scala's ``math.round``: halves round up (Python's ``round`` rounds them to even)."""
    return math.floor(x + 0.5)


def _plan_range(plog: _PartitionLog, b: _Bounds, options: _ReadOptions, time_floor: int | None,
                out: list[_Slice]) -> None:
    """The slices of one partition's offsets [b.start, b.end), appended to ``out``."""
    if b.start >= b.end:
        return
    aborted = None
    if options.read_committed:
        aborted = tuple(
            (t.producer_id, t.first_offset, t.last_offset)
            for t in plog.aborted_txns(b.start)
            if t.first_offset < b.end
        )
    segments = plog.segments
    for i, segment in enumerate(segments):
        nxt = segments[i + 1].base if i + 1 < len(segments) else None
        if segment.base >= b.end or (nxt is not None and nxt <= b.start):
            continue
        last = nxt is None
        start_offset = max(b.start, segment.base)
        if time_floor is not None:
            if plog.max_timestamp(i) < time_floor:
                continue
            times = segment.times
            if times.entries and times.entry(0).timestamp < time_floor:
                # every record up to the floor entry's offset is older than the floor
                start_offset = max(start_offset, times.lookup(time_floor - 1).offset + 1)
        with segment.open() as records:
            natural_end = min(plog.end_position if last else segment.size, records.size_in_bytes)
            end_position = natural_end
            start_position = plog.seek(segment, start_offset, records) if start_offset > segment.base else 0
            index = segment.offsets
            if b.end < (nxt if nxt is not None else plog.log_end_offset) and index.entries:
                # The batch at the entry after the first entry at or past the end starts
                # past the end, and so does everything after it.
                k = bisect.bisect_left(range(index.entries), b.end, key=lambda i: index.entry(i).offset)
                if k + 1 < index.entries:
                    position = index.entry(k + 1).position
                    if start_position < position < end_position and batch_at(records, position, segment.base):
                        end_position = position
            splits = _split_points(segment, records, start_position, end_position, options.max_bytes_per_partition)
        edges = [start_position, *splits, end_position]
        for k in range(len(edges) - 1):
            strict = k + 1 < len(edges) - 1 or end_position < natural_end  # ends at an index boundary
            out.append(_Slice(
                plog.dir.topic, plog.dir.partition, segment.path, segment.base, edges[k], edges[k + 1],
                start_offset, b.end, strict, aborted,
            ))


def _split_points(segment: SegmentView, records: FileRecords, start: int, end: int, max_bytes: int) -> list[int]:
    """Batch boundaries from the offset index, about ``max_bytes`` apart, inside (start, end)."""
    if end - start <= max_bytes:
        return []
    index = segment.offsets
    if not index.entries:
        return []
    points: list[int] = []
    target = start + max_bytes
    previous = start
    while target < end:
        k = first_entry_after(index, target) - 1
        if k < 0:
            break
        position = index.entry(k).position
        if previous < position < end and batch_at(records, position, segment.base):
            points.append(position)
            previous = position
        target = max(target, previous) + max_bytes
    return points


def _resolve_bounds(plogs: Sequence[_PartitionLog], options: _ReadOptions, *, streaming_start: bool = False) -> dict[str, _Bounds]:
    """Per partition, the offsets [start, end) the options ask for (Spark's precedence: a
    timestamp option over the offsets option)."""
    out: dict[str, _Bounds] = {}
    for plog in plogs:
        if not plog.segments:
            continue
        log_start = plog.log_start_offset
        top = plog.last_stable_offset() if options.read_committed else plog.log_end_offset
        start = _resolve_one(plog, options.starting, options.starting_ts, log_start, top, True, options)
        end = top if streaming_start else _resolve_one(plog, options.ending, options.ending_ts, log_start, top, False, options)
        out[plog.dir.path] = _Bounds(start, min(end, top))
    return out


def _resolve_one(plog: _PartitionLog, spec: Any, ts_spec: Any, log_start: int, top: int, starting: bool,
                 options: _ReadOptions) -> int:
    topic, partition = plog.dir.topic, plog.dir.partition
    if ts_spec is not None:
        ts = ts_spec if isinstance(ts_spec, int) else ts_spec.get(topic, {}).get(partition)
        if ts is not None:
            found = plog.offset_for_timestamp(ts)
            if found is not None:
                return found
            if starting and options.start_ts_strategy == "error":
                raise InvalidOffsetError(
                    f"no record at or after timestamp {ts} in {plog.tp} (startingOffsetsByTimestampStrategy=error; "
                    "set it to latest to read nothing from such partitions)",
                    file=plog.dir.path,
                )
            return top
    if isinstance(spec, dict):
        value = spec.get(topic, {}).get(partition)
        if value is None:
            value = EARLIEST if starting else LATEST
    else:
        value = EARLIEST if spec == "earliest" else LATEST
    if value == EARLIEST:
        return log_start
    if value == LATEST:
        return top
    if value < log_start:
        if options.fail_on_data_loss:
            raise InvalidOffsetError(
                f"offset {value} of {plog.tp} is below the log start offset {log_start}: the records were "
                "deleted (retention, DeleteRecords). Set failOnDataLoss=false to start at the log start",
                file=plog.dir.path,
            )
        _log.warning("kafkalog: offset %d of %s is below the log start %d; starting there", value, plog.tp, log_start)
        return log_start
    return value
