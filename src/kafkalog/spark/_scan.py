"""Reading partition directories by offset and time bounds, in slices, into record columns.

The pyspark-free half of the Spark data source (``kafkalog.spark``), usable by any bulk reader:
find the ``<topic>-<partition>`` directories under a path, resolve offset and timestamp bounds
per partition through the offset and time indexes (Kafka's ListOffsets rules), plan windows of
segment files (one per segment, split at offset-index entries every ``maxBytesPerPartition``)
and read a window as :class:`~kafkalog.columnar.RecordColumns` of bounded size: CRCs checked,
aborted transactional data dropped for read_committed (Kafka's consumer algorithm over the
``.txnindex`` entries), control records left out, corrupt batches raised or skipped.

Bounds prune: a segment outside them is never opened, and the first one is entered at the
offset-index floor entry of the start. The directories may be live (a broker or a ``Log``
appending, rolling, deleting): indexes are read into memory rather than mapped, because a
writer trims the index of a segment it rolls and a mapped page past the new end would kill
the reader with SIGBUS; a segment deleted before it is read is data loss (raised or skipped).
"""

from __future__ import annotations

import glob as _glob
import json
import logging
import os
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..checkpoint import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile
from ..columnar import RecordColumns, decode_columns
from ..errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkalogError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnsupportedCodecError,
)
from ..file_records import FileRecords
from ..filenames import SNAPSHOT_SUFFIX, offset_index_file, time_index_file, txn_index_file
from ..index import AbortedTxn, TransactionIndex
from ..filenames import PARTITION_DIR
from ..producer_state import ProducerStateManager
from ..record import ControlRecordType, RecordBatch
from ..records import MemoryRecords, frame_entry

_log = logging.getLogger(__name__)

#: Topics skipped unless subscribed by name or ``includeInternalTopics=true``.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata", "__share_group_state"})

_SEGMENT_NAME = re.compile(r"^\d{20}\.log$")
_EARLIEST, _LATEST = -2, -1  # Spark's JSON codes
_READ_ERRORS = (CorruptRecordError, InvalidRecordError, TruncatedRecordError, UnsupportedCodecError, RecordTooLargeError)
_MiB = 1 << 20
# Batch bytes decoded together into one Arrow batch at most (with maxRecordsPerBatch records):
# large enough that Spark's per-batch costs vanish, small enough to stay in memory already
# mapped (fresh pages are slow to fault in on some VMs).
_CHUNK_BYTES = 16 * _MiB


# ----------------------------------------------------------------------------------------------
# Options


def _bool(options: Any, name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(f"option {name} must be true or false, not {raw!r}")
    return text == "true"


def _int(options: Any, name: str, default: int | None, minimum: int = 1) -> int | None:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(f"option {name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise InvalidConfigError(f"option {name} must be >= {minimum}, not {value}")
    return value


def _offsets_spec(options: Any, name: str, default: str) -> str | dict[str, dict[int, int]]:
    """``earliest``, ``latest`` or Spark's JSON ``{"topic": {"0": offset}}`` (-2 earliest, -1 latest)."""
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    return _per_partition_json(name, text, minimum=-2)


def _per_partition_json(name: str, text: str, *, minimum: int) -> dict[str, dict[int, int]]:
    try:
        parsed = json.loads(text)
        out = {}
        for topic, partitions in parsed.items():
            out[str(topic)] = {int(p): int(v) for p, v in partitions.items()}
    except (ValueError, TypeError, AttributeError):
        raise InvalidConfigError(f'option {name} must be earliest, latest or JSON like {{"topic": {{"0": 42}}}}, not {text!r}') from None
    for topic, partitions in out.items():
        for p, v in partitions.items():
            if v < minimum:
                raise InvalidConfigError(f"option {name}: {v} for {topic}-{p} is below {minimum}")
    return out


@dataclass(frozen=True)
class _ReadOptions:
    """Reading options, parsed and checked once on the driver (picklable)."""

    path: str
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    include_internal: bool = False
    starting: Any = "earliest"
    ending: Any = "latest"
    starting_ts: Any = None  # int ms for every partition, or {topic: {partition: ms}}
    ending_ts: Any = None
    start_ts_strategy: str = "error"
    read_committed: bool = False
    include_headers: bool = False
    fail_on_corruption: bool = True
    fail_on_data_loss: bool = True
    check_crcs: bool = True
    max_bytes_per_partition: int = 128 * _MiB
    max_records_per_batch: int = 65536
    push_filters: bool = False
    max_offsets_per_trigger: int | None = None
    stats_path: str | None = None

    @classmethod
    def parse(cls, options: Any, *, streaming: bool = False) -> _ReadOptions:
        path = options.get("path")
        if not path:
            raise InvalidConfigError('kafkalog needs a path: spark.read.format("kafkalog").load("/data/kafka-logs")')
        subscribe = options.get("subscribe")
        isolation = options.get("isolationLevel") or options.get("kafka.isolation.level") or "read_uncommitted"
        if isolation not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError(f"isolationLevel must be read_uncommitted or read_committed, not {isolation!r}")
        strategy = str(options.get("startingOffsetsByTimestampStrategy") or "error").lower()
        if strategy not in ("error", "latest"):
            raise InvalidConfigError(f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
        return cls(
            path=str(path),
            subscribe=tuple(t.strip() for t in subscribe.split(",") if t.strip()) if subscribe else None,
            subscribe_pattern=options.get("subscribePattern"),
            include_internal=_bool(options, "includeInternalTopics", False),
            starting=_offsets_spec(options, "startingOffsets", "latest" if streaming else "earliest"),
            ending=_offsets_spec(options, "endingOffsets", "latest"),
            starting_ts=_timestamp_spec(options, "startingTimestamp", "startingOffsetsByTimestamp"),
            ending_ts=None if streaming else _timestamp_spec(options, "endingTimestamp", "endingOffsetsByTimestamp"),
            start_ts_strategy=strategy,
            read_committed=isolation == "read_committed",
            include_headers=_bool(options, "includeHeaders", False),
            fail_on_corruption=_bool(options, "failOnCorruption", True),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            check_crcs=_bool(options, "checkCrcs", True),
            max_bytes_per_partition=_int(options, "maxBytesPerPartition", 128 * _MiB),  # type: ignore[arg-type]
            max_records_per_batch=_int(options, "maxRecordsPerBatch", 65536),  # type: ignore[arg-type]
            push_filters=_bool(options, "pushFilters", False),
            max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", None),
            stats_path=options.get("statsPath"),
        )


def _timestamp_spec(options: Any, single: str, per_partition: str) -> Any:
    """Spark's precedence: ``startingTimestamp`` over ``startingOffsetsByTimestamp``."""
    raw = options.get(single)
    if raw is not None:
        value = _int(options, single, None, minimum=0)
        return value
    raw = options.get(per_partition)
    if raw is not None:
        return _per_partition_json(per_partition, str(raw), minimum=0)
    return None



# ----------------------------------------------------------------------------------------------
# Discovering partition directories and segments (driver)


@dataclass(frozen=True)
class _PartitionDir:
    topic: str
    partition: int
    path: str


def _discover(options: _ReadOptions) -> list[_PartitionDir]:
    """Partition directories under ``options.path`` (a log directory, a partition directory or a
    glob of either), filtered by subscription; sorted by topic and partition."""
    matches = sorted(_glob.glob(options.path)) if _glob.has_magic(options.path) else [options.path]
    if not matches:
        raise InvalidConfigError(f"no directory matches {options.path!r}")
    pattern = re.compile(options.subscribe_pattern) if options.subscribe_pattern else None
    found: dict[str, _PartitionDir] = {}
    for match in matches:
        if not os.path.isdir(match):
            if not _glob.has_magic(options.path):
                raise InvalidConfigError("no such directory" if not os.path.exists(match) else "not a directory", file=match)
            continue
        candidates = [match] if _is_partition_dir(match) else [
            os.path.join(match, name) for name in sorted(os.listdir(match))
        ]
        for directory in candidates:
            parsed = PARTITION_DIR.match(os.path.basename(directory))
            if parsed is None or not os.path.isdir(directory):
                continue  # -delete, -future, -stray directories, staging, files
            topic, partition = parsed["topic"], int(parsed["partition"])
            if options.subscribe is not None:
                if topic not in options.subscribe:
                    continue
            elif pattern is not None:
                if not pattern.fullmatch(topic) or (topic in INTERNAL_TOPICS and not options.include_internal):
                    continue
            elif topic in INTERNAL_TOPICS and not options.include_internal:
                continue
            real = os.path.realpath(directory)
            found.setdefault(real, _PartitionDir(topic, partition, directory))
    return sorted(found.values(), key=lambda d: (d.topic, d.partition, d.path))


def _is_partition_dir(path: str) -> bool:
    """A directory named ``<topic>-<n>`` that holds segments (or is otherwise not a log dir)."""
    if PARTITION_DIR.match(os.path.basename(os.path.normpath(path))) is None:
        return False
    try:
        names = os.listdir(path)
    except OSError:
        return False
    if any(_SEGMENT_NAME.match(n) for n in names):
        return True
    return not any(PARTITION_DIR.match(n) and os.path.isdir(os.path.join(path, n)) for n in names)


def _segment_bases(directory: str) -> list[int]:
    """Base offsets of the segments (``<20 digits>.log``; transient suffixes excluded), sorted."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(n[:20]) for n in names if _SEGMENT_NAME.match(n))


def _log_path(directory: str, base: int) -> str:
    return os.path.join(directory, f"{base:020d}.log")


class _LiveIndex:
    """An offset or time index read into memory (never mapped), cut to its live entries.

    Columns ``keys`` and ``values`` (int64, absolute offsets): offset index (offset, position),
    time index (timestamp, offset). A live broker's active segment keeps its indexes
    preallocated (10 MiB of zero entries past the real ones), so the zero tail is found by a
    binary search of single-entry reads and only the entries before it are read (real entries
    are never all-zero: the first batch of a segment is never indexed, Kafka's
    ``bytesSinceLastIndexEntry > indexIntervalBytes`` rule). A file trimmed or deleted while
    it is read gives the entries read; a missing or unreadable index reads as empty. Entries
    are hints: every position taken from one is checked with :func:`_plausible_batch`.
    """

    _OFFSET = np.dtype([("a", ">i4"), ("b", ">i4")])  # relative offset, position
    _TIME = np.dtype([("a", ">i8"), ("b", ">i4")])  # timestamp, relative offset

    def __init__(self, path: str | os.PathLike, base_offset: int, *, time: bool) -> None:
        dtype = self._TIME if time else self._OFFSET
        width = dtype.itemsize
        raw = b""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                n = os.fstat(fd).st_size // width
                zero = bytes(width)

                def is_zero(i: int) -> bool:
                    return os.pread(fd, width, i * width) in (zero, b"")

                if n and is_zero(n - 1):
                    lo, hi = 0, n - 1
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if is_zero(mid):
                            hi = mid
                        else:
                            lo = mid + 1
                    n = lo
                raw = os.pread(fd, n * width, 0) if n else b""
            except OSError:
                raw = b""
            finally:
                os.close(fd)
        entries = np.frombuffer(raw, dtype=dtype, count=len(raw) // width)
        a, b = entries["a"].astype(np.int64), entries["b"].astype(np.int64)
        if time:
            self.keys, self.values = a, b + base_offset
        else:
            self.keys, self.values = a + base_offset, b
        self.n = len(entries)

    def entry(self, i: int) -> tuple[int, int]:
        return int(self.keys[i]), int(self.values[i])

    def floor(self, target: int) -> int:
        """Index of the last entry whose key is <= ``target``, or -1."""
        return int(np.searchsorted(self.keys, target, side="right")) - 1


@dataclass
class _Segment:
    base: int
    path: str
    size: int
    _offsets: _LiveIndex | None = None
    _times: _LiveIndex | None = None
    directory: str = ""

    @property
    def offsets(self) -> _LiveIndex:
        if self._offsets is None:
            self._offsets = _LiveIndex(offset_index_file(self.directory, self.base), self.base, time=False)
        return self._offsets

    @property
    def times(self) -> _LiveIndex:
        if self._times is None:
            self._times = _LiveIndex(time_index_file(self.directory, self.base), self.base, time=True)
        return self._times


def _plausible_batch(records: FileRecords, position: int, at_least_offset: int) -> bool:
    """Whether a batch frames at ``position`` (a check of an index entry before trusting it)."""
    head = records.read(position, 17)
    try:
        framed = frame_entry(head, 0, records.size_in_bytes - position, file=records.path, position=position)
    except CorruptRecordError:
        return False
    if framed is None or framed[1] not in (0, 1, 2):
        return False
    return int.from_bytes(head[:8], "big", signed=True) >= at_least_offset


class _PartitionLog:
    """One partition directory as the driver plans it: segments, bounds, indexes (read-only)."""

    def __init__(self, pdir: _PartitionDir, options: _ReadOptions) -> None:
        self.dir = pdir
        self.options = options
        self.segments: list[_Segment] = []
        for base in _segment_bases(pdir.path):
            path = _log_path(pdir.path, base)
            try:
                size = os.path.getsize(path)
            except FileNotFoundError:
                continue  # deleted by retention meanwhile
            self.segments.append(_Segment(base, path, size, directory=pdir.path))
        self._end: tuple[int, int] | None = None
        self._log_start: int | None = None

    def _headers(self, i: int, records: FileRecords, position: int) -> Iterator[RecordBatch]:
        """Batch headers of segment ``i`` from ``position`` (to the planned end for the last
        one); a batch that cannot be framed raises, or (``failOnCorruption=false``) ends the
        scan with a warning."""
        limit = self.end_position if i == len(self.segments) - 1 else records.size_in_bytes
        try:
            yield from records.slice(position, max(0, limit - position)).batches()
        except _READ_ERRORS as e:
            if self.options.fail_on_corruption:
                raise
            _log.warning("kafkalog: planning stops reading %s at a bad batch: %s", records.path, e)

    @property
    def tp(self) -> str:
        return f"{self.dir.topic}-{self.dir.partition}"

    # -- bounds -----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """The first segment's base offset, raised to ``log-start-offset-checkpoint``'s entry
        (records below it were deleted by DeleteRecords and are not served by a broker)."""
        if self._log_start is None:
            first = self.segments[0].base if self.segments else 0
            checkpoint = os.path.join(os.path.dirname(os.path.abspath(self.dir.path)), LOG_START_OFFSET_CHECKPOINT)
            try:
                recorded = OffsetCheckpointFile(checkpoint).read().get((self.dir.topic, self.dir.partition))
            except (CorruptCheckpointError, OSError):
                recorded = None
            self._log_start = recorded if recorded is not None and first < recorded <= self.end_offset else first
        return self._log_start

    @property
    def end_offset(self) -> int:
        return self._end_facts()[0]

    @property
    def end_position(self) -> int:
        """Byte position after the last whole batch of the last segment (as planned)."""
        return self._end_facts()[1]

    def _end_facts(self) -> tuple[int, int]:
        """(log end offset, end of the last whole batch of the last segment): the last segment's
        last offset-index entry, then a scan of batch headers to the end."""
        if self._end is not None:
            return self._end
        if not self.segments:
            self._end = (0, 0)
            return self._end
        last = self.segments[-1]
        offsets = last.offsets
        position = 0
        with FileRecords.open(last.path) as records:
            if offsets.n:
                candidate = offsets.entry(offsets.n - 1)[1]
                if 0 < candidate < records.size_in_bytes and _plausible_batch(records, candidate, last.base):
                    position = candidate
            next_offset, end = last.base, position
            try:
                for batch in records.slice(position).batches():
                    next_offset, end = batch.next_offset, batch.position + batch.size_in_bytes  # type: ignore[operator]
            except _READ_ERRORS as e:
                if records.read(end, 12) == bytes(12):
                    pass  # a zero header: the preallocated tail of an active segment (preallocate=true)
                elif self.options.fail_on_corruption:
                    raise
                else:  # the tail cannot be framed: read to the end of the file, no offset bound
                    _log.warning("kafkalog: %s; reading %s to its end", e, last.path)
                    next_offset, end = 2**63 - 1, records.size_in_bytes
        self._end = (max(next_offset, last.base), end)
        return self._end

    def last_stable_offset(self) -> int:
        """The first offset of the earliest transaction with no marker yet, else the log end:
        ongoing transactions from the newest producer snapshot at or below the log end, then
        the batch headers after it (Kafka rebuilds producer state the same way)."""
        end = self.end_offset
        ongoing: dict[int, int] = {}
        scan_from = self.segments[0].base if self.segments else 0
        snapshots = []
        for name in os.listdir(self.dir.path):
            if name.endswith(SNAPSHOT_SUFFIX) and name[:20].isdigit() and len(name) == 20 + len(SNAPSHOT_SUFFIX):
                snapshots.append(int(name[:20]))
        for offset in sorted((s for s in snapshots if s <= end), reverse=True):
            try:
                entries = ProducerStateManager.read_snapshot(os.path.join(self.dir.path, f"{offset:020d}{SNAPSHOT_SUFFIX}"))
            except (CorruptCheckpointError, OSError):
                continue
            ongoing = {e.producer_id: e.current_txn_first_offset for e in entries if e.current_txn_first_offset is not None}
            scan_from = offset
            break
        for batch in self._batches_from(scan_from):
            if batch.magic < 2 or not batch.is_transactional or batch.last_offset < scan_from:
                continue
            if batch.is_control:
                ongoing.pop(batch.producer_id, None)
            else:
                ongoing.setdefault(batch.producer_id, batch.base_offset)
        return min([end, *ongoing.values()])

    def _batches_from(self, offset: int) -> Iterator[RecordBatch]:
        """Batch headers from the batch holding ``offset`` to the end (shallow)."""
        for i, segment in enumerate(self.segments):
            nxt = self.segments[i + 1].base if i + 1 < len(self.segments) else None
            if nxt is not None and nxt <= offset:
                continue
            with FileRecords.open(segment.path) as records:
                position = self.seek(segment, offset, records) if offset > segment.base else 0
                yield from self._headers(i, records, position)

    def seek(self, segment: _Segment, offset: int, records: FileRecords) -> int:
        """The position of the offset-index floor entry of ``offset`` (checked), else 0."""
        index = segment.offsets
        i = index.floor(offset)
        if i < 0:
            return 0
        position = index.entry(i)[1]
        if 0 < position < records.size_in_bytes and _plausible_batch(records, position, segment.base):
            return position
        return 0

    def aborted_txns(self, from_offset: int) -> list[AbortedTxn]:
        """Aborted transactions (``.txnindex``) of the segments that may hold markers for
        offsets >= ``from_offset``."""
        out: list[AbortedTxn] = []
        for i, segment in enumerate(self.segments):
            nxt = self.segments[i + 1].base if i + 1 < len(self.segments) else None
            if nxt is not None and nxt <= from_offset:
                continue
            path = txn_index_file(self.dir.path, segment.base)
            if path.exists():
                index = TransactionIndex(path, segment.base, writable=False)
                try:
                    out.extend(t for t in index.all_aborted_txns() if t.last_offset >= from_offset)
                finally:
                    index.close()
        return out

    # -- time -------------------------------------------------------------------------------

    def max_timestamp(self, i: int) -> int:
        """The largest timestamp in segment ``i``: its time index's last entry (a rolled segment
        ends with one), plus a scan of the batch headers after it for the last segment or when
        the time index is missing."""
        segment = self.segments[i]
        times = segment.times
        best = -1
        position = 0
        if times.n:
            best, offset = times.entry(times.n - 1)
            if i + 1 < len(self.segments):
                return best
            with FileRecords.open(segment.path) as records:
                position = self.seek(segment, offset, records)
        with FileRecords.open(segment.path) as records:
            for batch in self._headers(i, records, position):
                best = max(best, batch.max_timestamp)
        return best

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The offset of the first record at or after ``timestamp`` (from the log start), or None
        (Kafka's ListOffsets, without the mtime fallback for segments without timestamps)."""
        start = self.log_start_offset
        for i, segment in enumerate(self.segments):
            nxt = self.segments[i + 1].base if i + 1 < len(self.segments) else None
            if nxt is not None and nxt <= start:
                continue
            if self.max_timestamp(i) < timestamp:
                continue
            times = segment.times
            j = times.floor(timestamp)
            floor_offset = times.entry(j)[1] if j >= 0 else segment.base
            with FileRecords.open(segment.path) as records:
                position = self.seek(segment, max(floor_offset, start), records)
                for batch in self._headers(i, records, position):
                    if batch.max_timestamp >= timestamp and batch.last_offset >= start:
                        for record in batch.records():
                            if record.timestamp >= timestamp and record.offset >= start:
                                return record.offset
        return None


# ----------------------------------------------------------------------------------------------
# Planning input partitions (driver)


@dataclass(frozen=True)
class _Bounds:
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
    for plog in plogs:
        b = bounds.get(plog.dir.path)
        if b is None or b.start >= b.end:
            continue
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
                j = times.floor(time_floor - 1)
                if j >= 0:  # every record up to that entry's offset is older than the floor
                    start_offset = max(start_offset, times.entry(j)[1] + 1)
            with FileRecords.open(segment.path) as records:
                natural_end = min(plog.end_position if last else segment.size, records.size_in_bytes)
                end_position = natural_end
                start_position = plog.seek(segment, start_offset, records) if start_offset > segment.base else 0
                index = segment.offsets
                if b.end < (nxt if nxt is not None else plog.end_offset) and index.n:
                    # The batch at the entry after the first entry at or past the end starts
                    # past the end, and so does everything after it.
                    k = int(np.searchsorted(index.keys, b.end, side="left"))
                    if k + 1 < index.n:
                        position = index.entry(k + 1)[1]
                        if start_position < position < end_position and _plausible_batch(records, position, segment.base):
                            end_position = position
                splits = _split_points(segment, records, start_position, end_position, options.max_bytes_per_partition)
            edges = [start_position, *splits, end_position]
            for k in range(len(edges) - 1):
                strict = k + 1 < len(edges) - 1 or end_position < natural_end  # ends at an index boundary
                out.append(_Slice(
                    plog.dir.topic, plog.dir.partition, segment.path, segment.base, edges[k], edges[k + 1],
                    start_offset, b.end, strict, aborted,
                ))
    return out


def _split_points(segment: _Segment, records: FileRecords, start: int, end: int, max_bytes: int) -> list[int]:
    """Batch boundaries from the offset index, about ``max_bytes`` apart, inside (start, end)."""
    if end - start <= max_bytes:
        return []
    index = segment.offsets
    if not index.n:
        return []
    points: list[int] = []
    target = start + max_bytes
    previous = start
    while target < end:
        k = int(np.searchsorted(index.values, target, side="right")) - 1
        if k < 0:
            break
        position = index.entry(k)[1]
        if previous < position < end and _plausible_batch(records, position, segment.base):
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
        top = plog.last_stable_offset() if options.read_committed else plog.end_offset
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
            value = _EARLIEST if starting else _LATEST
    else:
        value = _EARLIEST if spec == "earliest" else _LATEST
    if value == _EARLIEST:
        return log_start
    if value == _LATEST:
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


# ----------------------------------------------------------------------------------------------
# Reading a slice (executor)


class _Stats:
    """What one task read: for ``statsPath`` (tests assert pruning with it) and the log."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.segments: list[str] = []
        self.bytes_read = 0
        self.records = 0
        self.skipped_batches = 0
        self.skipped_bytes = 0

    def skipped(self, path: str, start: int, end: int, error: Exception) -> None:
        self.skipped_batches += 1
        self.skipped_bytes += end - start
        _log.warning("kafkalog: skipped %d corrupt bytes of %s at position %d (failOnCorruption=false): %s",
                     end - start, path, start, error)

    def write(self) -> None:
        if not self.path:
            return
        os.makedirs(self.path, exist_ok=True)
        data = json.dumps({
            "segments": self.segments, "bytes_read": self.bytes_read, "records": self.records,
            "skipped_batches": self.skipped_batches, "skipped_bytes": self.skipped_bytes,
        })
        target = os.path.join(self.path, f"{uuid.uuid4().hex}.json")
        with open(target + ".tmp", "w") as f:
            f.write(data)
        os.replace(target + ".tmp", target)


def scan_stats(stats_path: str | os.PathLike) -> dict[str, Any]:
    """Totals of what the tasks of reads with ``statsPath`` set read: ``segments`` (sorted
    distinct paths), ``segment_opens``, ``bytes_read``, ``records``, ``skipped_batches``,
    ``skipped_bytes``. A diagnostic (and the tests' view of pruning); needs a directory the
    executors and the caller share."""
    totals: dict[str, Any] = {"segments": set(), "segment_opens": 0, "bytes_read": 0, "records": 0,
                              "skipped_batches": 0, "skipped_bytes": 0}
    root = Path(stats_path)
    for file in sorted(root.glob("*.json")) if root.is_dir() else []:
        data = json.loads(file.read_text())
        totals["segments"].update(data["segments"])
        totals["segment_opens"] += len(data["segments"])
        for key in ("bytes_read", "records", "skipped_batches", "skipped_bytes"):
            totals[key] += data[key]
    totals["segments"] = sorted(totals["segments"])
    return totals


class _Aborted:
    """Kafka's read_committed filter (``CompletedFetch``): aborted transactions in order of first
    offset; a producer enters the aborted set when a batch reaches the first offset of one of
    its aborted transactions, and leaves it at its ABORT marker; its transactional data
    batches in between are dropped."""

    def __init__(self, txns: Iterable[tuple[int, int, int]]) -> None:
        self.queue = sorted(txns, key=lambda t: t[1])
        self.next = 0
        self.producers: set[int] = set()

    def drops(self, batch: RecordBatch) -> bool:
        pid = batch.producer_id
        if pid < 0:
            return False
        last = batch.last_offset
        while self.next < len(self.queue) and self.queue[self.next][1] <= last:
            self.producers.add(self.queue[self.next][0])
            self.next += 1
        if batch.is_control:
            records = batch.records()
            if records and records[0].control_type is ControlRecordType.ABORT:
                self.producers.discard(pid)
            return False
        return batch.is_transactional and pid in self.producers


def _batches(records: FileRecords, s: _Slice, options: _ReadOptions, stats: _Stats, *,
             shallow: bool = False) -> Iterator[RecordBatch]:
    """The batches of the slice's window, checked (``shallow``: framed only, their bodies left
    to :func:`_emit`); corrupt ones raise or are skipped."""
    pos, end = s.start_position, min(s.end_position, records.size_in_bytes)
    while pos < end:
        window = records.slice(pos, end - pos)
        try:
            for batch in window.batches(validate=options.check_crcs and not shallow, strict=s.strict_end):
                if not options.check_crcs and not shallow:
                    batch.entry()  # load the body here, where a short read is reported
                size = batch.size_in_bytes
                stats.bytes_read += size
                yield batch
                pos = batch.position + size  # type: ignore[operator]
            return
        except _READ_ERRORS as e:
            if options.fail_on_corruption:
                raise
            nxt = _resync(records, s, pos, end)
            stats.skipped(records.path, pos, nxt, e)
            pos = nxt


def _resync(records: FileRecords, s: _Slice, bad: int, end: int) -> int:
    """Where to carry on after a corrupt batch at ``bad``: past it when its size field leads to
    another batch (or the window's end), else the next offset-index entry, else the end."""
    head = records.read(bad, 12)
    if len(head) == 12:
        size = int.from_bytes(head[8:12], "big", signed=True)
        after = bad + 12 + size
        if size >= 14 and (after == end or (bad < after < end and _plausible_batch(records, after, s.base))):
            return after
    index = _LiveIndex(offset_index_file(os.path.dirname(s.path), s.base), s.base, time=False)
    for k in range(int(np.searchsorted(index.values, bad, side="right")), index.n):
        position = index.entry(k)[1]
        if bad < position < end and _plausible_batch(records, position, s.base):
            return position
    return end


def _read_slice(s: _Slice, options: _ReadOptions) -> Iterator[RecordColumns]:
    """The slice's records in [start, end) offsets, as columns of at most
    ``maxRecordsPerBatch`` records (control records left out)."""
    stats = _Stats(options.stats_path)
    try:
        records = FileRecords.open(s.path)
    except FileNotFoundError:
        if options.fail_on_data_loss:
            raise InvalidOffsetError(
                "the segment was deleted (retention?) before it was read; set failOnDataLoss=false to skip it",
                file=s.path,
            ) from None
        _log.warning("kafkalog: %s was deleted before it was read; skipped (failOnDataLoss=false)", s.path)
        return
    stats.segments.append(s.path)
    aborted = _Aborted(s.aborted) if s.aborted is not None else None
    # Without read_committed nothing needs a batch's body before decoding: the walk only frames
    # the batches, and each chunk of them is read with one pread and decoded (and checked) as
    # one buffer; read_committed reads control records while walking, so it walks checked.
    shallow = aborted is None
    chunk: list[RecordBatch] = []
    count = size = 0
    limit = options.max_records_per_batch
    try:
        for batch in _batches(records, s, options, stats, shallow=shallow):
            last = batch.last_offset
            if last < s.start_offset:
                if aborted is not None:
                    aborted.drops(batch)
                continue
            if aborted is not None and aborted.drops(batch):
                if last >= s.end_offset - 1:
                    break
                continue
            n = batch.count if batch.magic >= 2 else 1
            if chunk and (count + n > limit or size >= _CHUNK_BYTES):
                yield from _emit(chunk, s, options, stats, records if shallow else None)
                chunk, count, size = [], 0, 0
            chunk.append(batch)
            count += n
            size += batch.size_in_bytes
            if last >= s.end_offset - 1:
                break
        if chunk:
            yield from _emit(chunk, s, options, stats, records if shallow else None)
    finally:
        records.close()
        stats.write()


def _decode_in_one(chunk: list[RecordBatch], records: FileRecords, options: _ReadOptions) -> RecordColumns | None:
    """A chunk of consecutive v2 batches read with one pread and decoded (CRCs checked when
    asked) as one ``MemoryRecords``: the columnar decoder's fastest path. None when the chunk
    is not that, or anything is wrong -- the caller then goes batch by batch, so an error names
    the file and position, and the file cannot have changed under the decode unnoticed (the
    record count must be the one the framed headers promise)."""
    first, last = chunk[0], chunk[-1]
    start = first.position
    end = last.position + last.size_in_bytes  # type: ignore[operator]
    expected = 0
    at = start
    for batch in chunk:
        if batch.magic != 2 or batch.position != at:
            return None
        at += batch.size_in_bytes
        if not batch.is_control:
            expected += batch.count
    data = records.read(start, end - start)
    if len(data) != end - start:
        return None
    try:
        columns = decode_columns(MemoryRecords(data, max_batch_size=max(end - start, 1)),
                                 validate=options.check_crcs, include_headers=options.include_headers)
    except KafkalogError:
        return None
    return columns if len(columns) == expected else None


def _emit(chunk: list[RecordBatch], s: _Slice, options: _ReadOptions, stats: _Stats,
          shallow_from: FileRecords | None = None) -> Iterator[RecordColumns]:
    """Decode a chunk; ``shallow_from``: its batches were only framed, not checked, and are
    read from that file."""
    columns = _decode_in_one(chunk, shallow_from, options) if shallow_from is not None else None
    check = shallow_from is not None and options.check_crcs
    if columns is None:
        try:
            columns = decode_columns(chunk, validate=check, include_headers=options.include_headers)
        except _READ_ERRORS:
            if options.fail_on_corruption:
                raise
            parts = []
            for batch in chunk:  # find and skip the bad batches one by one
                try:
                    parts.append(decode_columns([batch], validate=check, include_headers=options.include_headers))
                except _READ_ERRORS as e:
                    stats.skipped(s.path, batch.position, batch.position + batch.size_in_bytes, e)  # type: ignore[operator]
            columns = RecordColumns.concat(parts) if parts else RecordColumns.empty(include_headers=options.include_headers)
    n = len(columns)
    if n == 0:
        return
    offsets = columns.offset
    if offsets[0] < s.start_offset or offsets[n - 1] >= s.end_offset:
        # Offsets ascend within a partition: the wanted ones are one contiguous run.
        columns = columns.slice(int(offsets.searchsorted(s.start_offset)), int(offsets.searchsorted(s.end_offset)))
        n = len(columns)
        if n == 0:
            return
    step = options.max_records_per_batch
    for lo in range(0, n, step):
        part = columns if n <= step else columns.slice(lo, lo + step)
        stats.records += len(part)
        yield part
