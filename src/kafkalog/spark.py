"""PySpark data source ``kafkalog``: Kafka segment directories as DataFrames, batch and streaming,
and DataFrames written back as partition logs -- no broker involved.

::

    import kafkalog.spark
    kafkalog.spark.register(spark)
    df = spark.read.format("kafkalog").load("/data/kafka-logs")          # a log directory,
    df = spark.read.format("kafkalog").load("/backups/*/orders-*")       # partition dirs, a glob
    df.write.format("kafkalog").mode("append").option("topic", "copy").save("/data/out")

Rows are exactly what Spark's own Kafka source gives: ``key binary, value binary, topic string,
partition int, offset long, timestamp timestamp, timestampType int`` and, with
``includeHeaders=true``, ``headers array<struct<key:string,value:binary>>`` (null when a record
has none). Topic and partition come from the directory names (``orders-12``); internal topics
are skipped unless subscribed by name or ``includeInternalTopics=true``. Control records never
appear.

Reading. The driver lists the segments (file names give base offsets), resolves the offset and
time bounds per partition through the offset and time indexes, and plans one input partition
per segment, splitting segments larger than ``maxBytesPerPartition`` at batch boundaries taken
from the offset index; segments outside the bounds are never opened. Each executor task opens
its segment window, validates CRCs (``checkCrcs``), drops aborted transactional batches
(``isolationLevel=read_committed``, Kafka's consumer algorithm over the ``.txnindex`` entries)
and decodes runs of batches with :func:`kafkalog.columnar.decode_columns` into Arrow record
batches of at most ``maxRecordsPerBatch`` records, without a Python object per record.

Options (Spark's Kafka source names where one exists; see docs/spark.md for the full table):
``subscribe``, ``subscribePattern``, ``includeInternalTopics``, ``startingOffsets``,
``endingOffsets``, ``startingTimestamp``, ``endingTimestamp``, ``startingOffsetsByTimestamp``,
``endingOffsetsByTimestamp``, ``startingOffsetsByTimestampStrategy``, ``isolationLevel`` (or
``kafka.isolation.level``), ``includeHeaders``, ``failOnCorruption``, ``failOnDataLoss``,
``checkCrcs``, ``maxBytesPerPartition``, ``maxRecordsPerBatch``, ``pushFilters``,
``maxOffsetsPerTrigger``, ``statsPath``; for writing ``topic``, ``partition``,
``numPartitions``, ``compression``, ``maxBatchBytes``, ``stagingDir`` and Kafka's topic
settings by their names (``segment.bytes``, ``message.timestamp.type``, ...).

Corruption: ``failOnCorruption=true`` (default) fails the task with the file and byte position;
``false`` skips the bad batch -- to the end of its declared size when the next entry frames
there, else to the next offset-index entry, else to the end of the window -- logs a warning and
counts it (in ``statsPath`` when set).

Writing is append-only and safe under task retries and speculative execution: each task attempt
stages v2 batches in its own directory under ``<path>/.kafkalog-staging/<job>/``; the driver's
``commit`` appends the staged batches of the committed attempts -- one per Spark partition,
in partition order -- through :class:`kafkalog.log.Log` (offsets assigned, indexes kept, as a
broker appends), rolls every touched partition back to its previous end if any append fails,
and deletes the staging directory. Nothing is visible before the job commits and nothing is
appended twice; a driver killed in the middle of ``commit`` leaves the batches appended so far.

Filter pushdown (``pushFilters=true`` and ``spark.sql.python.filterPushdown.enabled``, pyspark
>= 4.1): filters on ``offset``, ``timestamp`` (lower bounds), ``topic`` and ``partition`` prune
partitions and segments and seek inside them; Spark still evaluates every filter on the rows.
pyspark 4.1-4.3 store the reader planned for a pushed filter on the DataFrame's data source
object and reuse it for later queries of that DataFrame that push no filter, so such a query
would see the earlier filter's pruning: with pushdown on, run each query on a DataFrame of its
own (``spark.read...load()`` again) -- queries on fresh DataFrames never see another's filters.

The only module importing pyspark; pyarrow is imported here and in ``columnar``.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as _dt
import glob as _glob
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import pyarrow as pa
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
        WriterCommitMessage,
    )
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(
        f'kafkalog.spark needs pyspark >= 4.0 and pyarrow ({_e}): pip install "kafkalog[spark]"'
    ) from None

try:  # pyspark >= 4.1: filter pushdown
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual
except ImportError:  # pragma: no cover
    EqualTo = GreaterThan = GreaterThanOrEqual = In = LessThan = LessThanOrEqual = None  # type: ignore[assignment,misc]

try:  # pyspark >= 4.2: admission control (maxOffsetsPerTrigger) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in on pyspark versions without Trigger.AvailableNow for Python sources."""


from .builder import RecordBatchBuilder
from .checkpoint import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile
from .columnar import RecordColumns, decode_columns
from .compression import Compression
from .config import LogConfig
from .errors import (
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
from .file_records import FileRecords
from .filenames import SNAPSHOT_SUFFIX, offset_index_file, time_index_file, txn_index_file
from .index import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex
from .log import Log
from .producer_state import ProducerStateManager
from .record import ControlRecordType, RecordBatch
from .records import MemoryRecords, frame_entry

__all__ = ["KafkalogDataSource", "register", "verify", "scan_stats", "murmur2", "SCHEMA_DDL", "INTERNAL_TOPICS"]

_log = logging.getLogger(__name__)

#: Spark's Kafka source schema (``KafkaRecordToRowConverter``), headers appended when asked for.
SCHEMA_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
_HEADERS_DDL = "headers array<struct<key:string,value:binary>>"
#: Topics skipped unless subscribed by name or ``includeInternalTopics=true``.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata", "__share_group_state"})

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_SEGMENT_NAME = re.compile(r"^\d{20}\.log$")
_EARLIEST, _LATEST = -2, -1  # Spark's JSON codes
_STAGING = ".kafkalog-staging"
_READ_ERRORS = (CorruptRecordError, InvalidRecordError, TruncatedRecordError, UnsupportedCodecError, RecordTooLargeError)
_MiB = 1 << 20
# Batch bytes decoded together into one Arrow batch at most (with maxRecordsPerBatch records):
# large enough that Spark's per-batch costs vanish, small enough to stay in memory already
# mapped (fresh pages are slow to fault in on some VMs).
_CHUNK_BYTES = 16 * _MiB
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

_HEADER_STRUCT = pa.struct([("key", pa.string()), ("value", pa.binary())])
_HEADERS_TYPE = pa.list_(pa.field("element", _HEADER_STRUCT))
_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
#: The Arrow schemas Spark expects for the rows (without and with headers).
ARROW_SCHEMA = pa.schema(_BASE_FIELDS)
ARROW_SCHEMA_WITH_HEADERS = pa.schema(_BASE_FIELDS + [pa.field("headers", _HEADERS_TYPE)])


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


def _schema_ddl(include_headers: bool) -> str:
    return f"{SCHEMA_DDL}, {_HEADERS_DDL}" if include_headers else SCHEMA_DDL


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
            parsed = _PARTITION_DIR.match(os.path.basename(directory))
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
    if _PARTITION_DIR.match(os.path.basename(os.path.normpath(path))) is None:
        return False
    try:
        names = os.listdir(path)
    except OSError:
        return False
    if any(_SEGMENT_NAME.match(n) for n in names):
        return True
    return not any(_PARTITION_DIR.match(n) and os.path.isdir(os.path.join(path, n)) for n in names)


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
    """An offset or time index opened read-only and cut to its live entries.

    A live broker's active segment keeps its indexes preallocated (10 MiB of zero entries past
    the real ones); an index opened from disk counts those too, so the zero tail is cut off by
    a binary search here (real entries are never all-zero: the first batch of a segment is
    never indexed). A missing or unreadable index reads as empty.
    """

    def __init__(self, cls: type, path: Path, base_offset: int) -> None:
        self.index = None
        self.n = 0
        try:
            if path.exists() and path.stat().st_size > 0:
                index = cls(path, base_offset, writable=False)
                n = index.entries
                zero = (base_offset, 0) if cls is OffsetIndex else (0, base_offset)
                if n and index.entry(n - 1) == zero:
                    lo, hi = 0, n - 1
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if index.entry(mid) == zero:
                            hi = mid
                        else:
                            lo = mid + 1
                    n = lo
                self.index, self.n = index, n
        except (KafkalogError, OSError, ValueError):
            self.index, self.n = None, 0

    def entry(self, i: int) -> tuple[int, int]:
        return self.index.entry(i)  # type: ignore[union-attr]

    def floor(self, target: int, field_index: int) -> int:
        """Index of the last entry whose field ``field_index`` is <= ``target``, or -1."""
        return bisect.bisect_right(_Column(self, field_index), target) - 1

    def close(self) -> None:
        if self.index is not None:
            self.index.close()


class _Column(Sequence):
    """One field of a live index as a sequence, for ``bisect``."""

    def __init__(self, index: _LiveIndex, field_index: int) -> None:
        self._index, self._field = index, field_index

    def __len__(self) -> int:
        return self._index.n

    def __getitem__(self, i):  # type: ignore[override]
        return self._index.entry(i)[self._field]


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
            self._offsets = _LiveIndex(OffsetIndex, offset_index_file(self.directory, self.base), self.base)
        return self._offsets

    @property
    def times(self) -> _LiveIndex:
        if self._times is None:
            self._times = _LiveIndex(TimeIndex, time_index_file(self.directory, self.base), self.base)
        return self._times

    def close(self) -> None:
        for index in (self._offsets, self._times):
            if index is not None:
                index.close()


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

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

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
        i = index.floor(offset, 0)
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
            j = times.floor(timestamp, 0)
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


class _Slice(InputPartition):
    """One input partition: a window of one segment file and the offsets wanted from it."""

    def __init__(
        self,
        topic: str,
        partition: int,
        path: str,
        base: int,
        start_position: int,
        end_position: int,
        start_offset: int,
        end_offset: int,
        strict_end: bool,
        aborted: tuple[tuple[int, int, int], ...] | None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.path = path
        self.base = base
        self.start_position = start_position
        self.end_position = end_position
        self.start_offset = start_offset
        self.end_offset = end_offset
        self.strict_end = strict_end  # the window ends at a batch boundary taken from the index
        self.aborted = aborted  # read_committed: (producer id, first offset, marker offset)


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
                j = times.floor(time_floor - 1, 0)
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
                    k = bisect.bisect_left(_Column(index, 0), b.end)
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
    positions = _Column(index, 1)
    while target < end:
        k = bisect.bisect_right(positions, target) - 1
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


def _batches(records: FileRecords, s: _Slice, options: _ReadOptions, stats: _Stats) -> Iterator[RecordBatch]:
    """The batches of the slice's window, checked; corrupt ones raise or are skipped."""
    pos, end = s.start_position, min(s.end_position, records.size_in_bytes)
    while pos < end:
        window = records.slice(pos, end - pos)
        try:
            for batch in window.batches(validate=options.check_crcs, strict=s.strict_end):
                if not options.check_crcs:
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
    index = _LiveIndex(OffsetIndex, offset_index_file(os.path.dirname(s.path), s.base), s.base)
    try:
        k = bisect.bisect_right(_Column(index, 1), bad)
        while k < index.n:
            position = index.entry(k)[1]
            if bad < position < end and _plausible_batch(records, position, s.base):
                return position
            k += 1
    finally:
        index.close()
    return end


def _read_slice(s: _Slice, options: _ReadOptions) -> Iterator[pa.RecordBatch]:
    """Arrow record batches (Spark's schema) of the slice's records in [start, end) offsets."""
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
    chunk: list[RecordBatch] = []
    count = size = 0
    limit = options.max_records_per_batch
    try:
        for batch in _batches(records, s, options, stats):
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
                yield from _emit(chunk, s, options, stats)
                chunk, count, size = [], 0, 0
            chunk.append(batch)
            count += n
            size += batch.size_in_bytes
            if last >= s.end_offset - 1:
                break
        if chunk:
            yield from _emit(chunk, s, options, stats)
    finally:
        records.close()
        stats.write()


def _emit(chunk: list[RecordBatch], s: _Slice, options: _ReadOptions, stats: _Stats) -> Iterator[pa.RecordBatch]:
    try:
        columns = decode_columns(chunk, validate=False, include_headers=options.include_headers)
    except _READ_ERRORS:
        if options.fail_on_corruption:
            raise
        parts = []
        for batch in chunk:  # find and skip the bad batches one by one
            try:
                parts.append(decode_columns([batch], validate=False, include_headers=options.include_headers))
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
        try:
            yield _arrow_batch(part, s.topic, s.partition, options.include_headers)
        except OverflowError as e:  # a timestamp beyond Spark's microseconds (Spark's own source fails too)
            raise InvalidRecordError(str(e), file=s.path) from None


def _arrow_batch(columns: RecordColumns, topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
    n = len(columns)
    arrays = [
        columns.arrow_array("key"),
        columns.arrow_array("value"),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        columns.arrow_array("offset"),
        columns.arrow_array("timestamp"),
        columns.arrow_array("timestamp_type"),
    ]
    if include_headers:
        arrays.append(columns.arrow_array("headers").view(_HEADERS_TYPE))
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA_WITH_HEADERS)
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


# ----------------------------------------------------------------------------------------------
# Batch reader


class _BatchReader(DataSourceReader):
    """Plans slices on the driver; reads them on the executors."""

    def __init__(self, options: _ReadOptions) -> None:
        self.options = options
        self.pushed: dict[str, Any] = {}

    def partitions(self) -> list[InputPartition]:
        options = self.options
        dirs = _discover(options)
        topics, partitions = self.pushed.get("topics"), self.pushed.get("partitions")
        dirs = [d for d in dirs if (topics is None or d.topic in topics) and (partitions is None or d.partition in partitions)]
        plogs = [_PartitionLog(d, options) for d in dirs]
        try:
            bounds = _resolve_bounds(plogs, options)
            lo, hi = self.pushed.get("offset_lo"), self.pushed.get("offset_hi")
            if lo is not None or hi is not None:
                bounds = {
                    tp: _Bounds(max(b.start, lo if lo is not None else b.start), min(b.end, hi if hi is not None else b.end))
                    for tp, b in bounds.items()
                }
            slices: list[InputPartition] = list(_plan(plogs, bounds, options, self.pushed.get("time_floor")))
        finally:
            for plog in plogs:
                plog.close()
        return slices

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, _Slice):
            return iter(())
        return _read_slice(partition, self.options)


class _PushdownReader(_BatchReader):
    """A batch reader that takes Spark's pushed filters to prune (only built with
    ``pushFilters=true``: pyspark refuses readers with ``pushFilters`` unless its conf is on)."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        """Record what prunes partitions, segments and leading index ranges; return every filter,
        so Spark still evaluates all of them on the rows."""
        self.pushed = {}
        for f in filters:
            self._take(f)
            yield f

    def _take(self, f: Any) -> None:
        column = f.attribute[0] if len(getattr(f, "attribute", ())) == 1 else None
        value = getattr(f, "value", None)
        if column == "offset":
            if not all(isinstance(v, int) for v in (value if isinstance(f, In) else (value,))):
                return  # only whole offsets prune
            lo = hi = None
            if isinstance(f, EqualTo):
                lo, hi = value, value + 1
            elif isinstance(f, GreaterThan):
                lo = value + 1
            elif isinstance(f, GreaterThanOrEqual):
                lo = value
            elif isinstance(f, LessThan):
                hi = value
            elif isinstance(f, LessThanOrEqual):
                hi = value + 1
            elif isinstance(f, In) and value:
                lo, hi = min(value), max(value) + 1
            if lo is not None:
                self.pushed["offset_lo"] = max(lo, self.pushed.get("offset_lo", lo))
            if hi is not None:
                self.pushed["offset_hi"] = min(hi, self.pushed.get("offset_hi", hi))
        elif column == "timestamp" and isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual)):
            ms = _epoch_ms(value)
            if ms is not None:
                floor = ms + 1 if isinstance(f, GreaterThan) else ms
                self.pushed["time_floor"] = max(floor, self.pushed.get("time_floor", floor))
        elif column in ("topic", "partition") and isinstance(f, (EqualTo, In)):
            values = set(value) if isinstance(f, In) else {value}
            key = "topics" if column == "topic" else "partitions"
            previous = self.pushed.get(key)
            self.pushed[key] = values if previous is None else previous & values


def _epoch_ms(value: Any) -> int | None:
    """Milliseconds since the epoch of a pushed timestamp (floor), or None."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:  # pyspark hands TIMESTAMP values aware; a naive one is taken as UTC
            value = value.replace(tzinfo=_dt.timezone.utc)
        delta = value - _EPOCH
        return (delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds) // 1000
    return None


# ----------------------------------------------------------------------------------------------
# Streaming


def _offsets_json(offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def _from_json(offsets: dict) -> dict[tuple[str, int], int]:
    return {(topic, int(p)): int(v) for topic, parts in (offsets or {}).items() for p, v in parts.items()}


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Tails partition directories: offsets are Spark's Kafka JSON ``{"topic": {"0": next}}``."""

    def __init__(self, options: _ReadOptions) -> None:
        self.options = options
        self._target: dict[tuple[str, int], int] | None = None  # Trigger.AvailableNow's cap

    def _logs(self) -> list[_PartitionLog]:
        dirs = _discover(self.options)
        seen: dict[tuple[str, int], str] = {}
        for d in dirs:
            other = seen.setdefault((d.topic, d.partition), d.path)
            if other != d.path:
                raise InvalidConfigError(
                    f"{d.topic}-{d.partition} is in two directories ({other}, {d.path}): a stream's offsets "
                    "name each partition once", file=self.options.path,
                )
        return [_PartitionLog(d, self.options) for d in dirs]

    def _available(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start, end) per partition now: the last stable offset under read_committed."""
        out = {}
        plogs = self._logs()
        try:
            for plog in plogs:
                if plog.segments:
                    end = plog.last_stable_offset() if self.options.read_committed else plog.end_offset
                    out[(plog.dir.topic, plog.dir.partition)] = (plog.log_start_offset, end)
        finally:
            for plog in plogs:
                plog.close()
        return out

    def initialOffset(self) -> dict:
        plogs = self._logs()
        try:
            bounds = _resolve_bounds(plogs, self.options, streaming_start=True)
        finally:
            for plog in plogs:
                plog.close()
        return _offsets_json({(p.dir.topic, p.dir.partition): bounds[p.dir.path].start for p in plogs if p.dir.path in bounds})

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        available = self._available()
        begin = _from_json(start) if start else {}
        latest = {tp: end for tp, (_, end) in available.items()}
        if self._target is not None:
            latest = {tp: min(end, self._target[tp]) for tp, end in latest.items() if tp in self._target}
            for tp, offset in begin.items():
                latest.setdefault(tp, offset)
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            latest = _rate_limit(begin, latest, available, limit.max_rows)
        for tp, offset in begin.items():
            if tp not in latest:
                latest[tp] = offset  # a partition that went away keeps its offset (data loss is checked in partitions)
        return _offsets_json(latest)

    def getDefaultReadLimit(self) -> Any:
        if ReadMaxRows is not None and self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: end for tp, (_, end) in self._available().items()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, finish = _from_json(start), _from_json(end)
        plogs = {(p.dir.topic, p.dir.partition): p for p in self._logs()}
        try:
            bounds: dict[str, _Bounds] = {}
            for tp, stop in finish.items():
                plog = plogs.get(tp)
                name = f"{tp[0]}-{tp[1]}"
                first = begin.get(tp)
                if plog is None or not plog.segments:
                    if first is not None and first < stop:
                        self._data_loss(f"partition {name} is gone: offsets [{first}, {stop}) can no longer be read")
                    continue
                log_start = plog.log_start_offset
                if first is None:
                    first = log_start  # a partition that appeared: from its start, as Spark's Kafka source
                if first < log_start:
                    self._data_loss(
                        f"offsets [{first}, {log_start}) of {name} were deleted (retention?) before the stream read them"
                    )
                    first = log_start
                if stop < first:
                    self._data_loss(f"{name} went back from offset {first} to {stop} (truncated?)")
                    continue
                bounds[plog.dir.path] = _Bounds(first, stop)
            return list(_plan(list(plogs.values()), bounds, self.options))
        finally:
            for plog in plogs.values():
                plog.close()

    def _data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise InvalidOffsetError(f"{message}. Set failOnDataLoss=false to go on", file=self.options.path)
        _log.warning("kafkalog: %s (failOnDataLoss=false)", message)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_slice(partition, self.options)  # type: ignore[arg-type]

    def commit(self, end: dict) -> None:
        """Nothing to release: every micro-batch opens and closes its own files."""


def _rate_limit(begin: dict[tuple[str, int], int], latest: dict[tuple[str, int], int],
                available: dict[tuple[str, int], tuple[int, int]], limit: int) -> dict[tuple[str, int], int]:
    """Spark's Kafka ``maxOffsetsPerTrigger``: share ``limit`` offsets among partitions in
    proportion to their lag (at least one offset for a lagging partition)."""
    starts = {tp: begin.get(tp, available.get(tp, (end, end))[0]) for tp, end in latest.items()}
    lags = {tp: max(0, latest[tp] - starts[tp]) for tp in latest}
    total = sum(lags.values())
    if total <= limit:
        return latest
    out = {}
    for tp, end in latest.items():
        share = limit * lags[tp] / total
        step = int(share) if share >= 1 else (1 if lags[tp] else 0)
        out[tp] = min(end, starts[tp] + step)
    return out


# ----------------------------------------------------------------------------------------------
# Writing


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (the default partitioner's hash), as a signed 32-bit int."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


@dataclass
class _Staged:
    topic: str
    partition: int
    file: str
    records: int
    batches: int


@dataclass
class _WriteCommit(WriterCommitMessage):
    """What one task attempt staged (picklable; Spark hands the committed ones to ``commit``)."""

    spark_partition: int
    attempt_dir: str
    staged: list[_Staged] = field(default_factory=list)


@dataclass(frozen=True)
class _WriteOptions:
    path: str
    staging: str
    topic: str | None
    partition: int | None
    num_partitions: dict[str, int]
    default_partitions: int | None
    compression: Compression
    max_batch_bytes: int
    config: dict[str, str]


class _Writer(DataSourceArrowWriter):
    """Stages each task attempt's batches privately; the driver's commit appends them in order."""

    def __init__(self, options: _WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _WriteCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:  # pragma: no cover - Spark always sets it in a task
            return self.stage(iterator, 0, uuid.uuid4().hex)
        return self.stage(iterator, context.partitionId(), f"{context.taskAttemptId()}-{context.attemptNumber()}")

    def stage(self, batches: Iterable[pa.RecordBatch], spark_partition: int, attempt: str) -> _WriteCommit:
        """Write one attempt's records as v2 batches under its own directory; return the message.

        Raises:
            KafkalogError: the job's staging directory is gone (the job already ended), a record
                has no topic or partition, or a record is larger than ``max.message.bytes``.
        """
        o = self.options
        attempt_dir = os.path.join(o.staging, f"part-{spark_partition:05d}-{attempt}-{uuid.uuid4().hex[:8]}")
        try:
            os.mkdir(attempt_dir)  # not makedirs: a zombie attempt after the job ended must not write
        except FileNotFoundError:
            raise KafkalogError("the write job's staging directory is gone: the job has ended", file=o.staging) from None
        now = int(time.time() * 1000)
        max_message = int(o.config.get("max.message.bytes", LogConfig().max_message_bytes))
        target = min(o.max_batch_bytes, max_message - 1024)
        builders: dict[tuple[str, int], RecordBatchBuilder] = {}
        staged: dict[tuple[str, int], _Staged] = {}

        def flush(tp: tuple[str, int]) -> None:
            # Opened per batch, so a task writing to thousands of partitions holds no descriptors.
            # Not fsynced: the driver reads the files after the task ends, and a crash before
            # the job commits fails the job.
            builder = builders.pop(tp)
            item = staged.get(tp)
            if item is None:
                item = staged[tp] = _Staged(tp[0], tp[1], f"{tp[0]}-{tp[1]}.batches", 0, 0)
            with open(os.path.join(attempt_dir, item.file), "ab") as f:
                f.write(builder.build().buffer)
            item.records += builder.count
            item.batches += 1

        for batch in batches:
            for key, value, headers, ts, tp in _rows(batch, o, spark_partition, now):
                size = len(key or b"") + len(value or b"") + sum(len(k) + len(v or b"") for k, v in headers) + 64
                if size > max_message - 128:
                    raise RecordTooLargeError(
                        f"a record of about {size} bytes for {tp[0]}-{tp[1]} exceeds max.message.bytes ({max_message})",
                        file=o.path,
                    )
                builder = builders.get(tp)
                if builder is not None and builder.estimated_size_in_bytes + size > target:
                    flush(tp)
                    builder = None
                if builder is None:
                    builder = builders[tp] = RecordBatchBuilder(compression=o.compression)
                builder.append(key, value, timestamp=ts, headers=headers)
        for tp in list(builders):
            flush(tp)
        return _WriteCommit(spark_partition, attempt_dir, sorted(staged.values(), key=lambda s: (s.topic, s.partition)))

    def commit(self, messages: list[_WriteCommit | None]) -> None:
        """Append the committed attempts' batches (Spark partition order) through ``Log``; on any
        failure roll every touched partition back to its previous end. Deletes the staging."""
        o = self.options
        config = LogConfig.from_properties(o.config)
        logs: dict[tuple[str, int], Log] = {}
        ends: dict[tuple[str, int], int] = {}
        done = False
        try:
            for message in sorted((m for m in messages if m is not None), key=lambda m: m.spark_partition):
                for item in message.staged:
                    tp = (item.topic, item.partition)
                    log = logs.get(tp)
                    if log is None:
                        log = logs[tp] = Log.open(os.path.join(o.path, f"{item.topic}-{item.partition}"), config)
                        ends[tp] = log.log_end_offset
                    epoch = log.latest_epoch if log.latest_epoch is not None else 0
                    with FileRecords.open(os.path.join(message.attempt_dir, item.file)) as staged:
                        for batch in staged.batches(validate=True, strict=True):
                            log.append(MemoryRecords(bytes(batch.entry())), leader_epoch=epoch)
            for log in logs.values():
                log.flush()
            done = True
        finally:
            for tp, log in logs.items():
                if not done:
                    with contextlib.suppress(Exception):
                        log.truncate_to(ends[tp])
                with contextlib.suppress(Exception):
                    log.close()
            shutil.rmtree(o.staging, ignore_errors=True)
            _remove_if_empty(os.path.dirname(o.staging))

    def abort(self, messages: list[_WriteCommit | None]) -> None:
        """Drop every attempt's staged batches."""
        shutil.rmtree(self.options.staging, ignore_errors=True)
        _remove_if_empty(os.path.dirname(self.options.staging))


def _remove_if_empty(path: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _rows(batch: pa.RecordBatch, o: _WriteOptions, spark_partition: int, now: int
          ) -> Iterator[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int, tuple[str, int]]]:
    """(key, value, headers, timestamp ms, (topic, partition)) of each row."""
    n = batch.num_rows
    names = batch.schema.names

    def column(name: str) -> list[Any]:
        return batch.column(names.index(name)).to_pylist() if name in names else [None] * n

    def as_bytes(v: Any) -> bytes | None:
        return v.encode("utf-8") if isinstance(v, str) else v

    keys, values, headers = column("key"), column("value"), column("headers")
    timestamps, topics, partitions = column("timestamp"), column("topic"), column("partition")
    legal: set[str] = set()
    for i in range(n):
        topic = topics[i] if topics[i] is not None else o.topic
        if topic not in legal:
            _check_topic(topic, o.path)
            legal.add(topic)
        key = as_bytes(keys[i])
        partition = partitions[i] if partitions[i] is not None else o.partition
        if partition is None:
            count = o.num_partitions.get(topic, o.default_partitions or 1)
            # Kafka's default partitioner: murmur2 of the key; keyless records stick to one
            # partition per task (Kafka's sticky partitioner picks one per batch).
            partition = (murmur2(key) & 0x7FFFFFFF) % count if key is not None else spark_partition % count
        if partition < 0:
            raise InvalidConfigError(f"partition {partition} of topic {topic} is negative", file=o.path)
        ts = timestamps[i]
        if ts is None:
            ms = now
        else:
            if ts.tzinfo is None:
                ts = ts.replace(tzinfo=_dt.timezone.utc)
            ms = (ts - _EPOCH) // _dt.timedelta(milliseconds=1)
        hs = [(h["key"], as_bytes(h["value"])) for h in headers[i]] if headers[i] else []
        yield key, as_bytes(values[i]), hs, ms, (topic, int(partition))


def _check_topic(topic: str | None, path: str) -> None:
    """Kafka's topic name rule (``Topic.validate``), which also keeps writes inside ``path``."""
    if topic is None:
        raise InvalidConfigError("a row has no topic: give a topic column or the topic option", file=path)
    if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
        raise InvalidConfigError(
            f"illegal topic name {topic!r}: Kafka allows 1 to 249 of [a-zA-Z0-9._-], not . or ..", file=path
        )


def _write_options(options: Any, schema: Any, overwrite: bool) -> _WriteOptions:
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, StringType, StructType, TimestampType

    if overwrite:
        raise InvalidConfigError('kafkalog appends to partition logs: use mode("append"), not overwrite')
    path = options.get("path")
    if not path:
        raise InvalidConfigError('kafkalog needs a path: df.write.format("kafkalog").mode("append").save("/data/kafka-logs")')
    fields = {f.name: f.dataType for f in schema.fields}
    allowed = {
        "key": (BinaryType, StringType), "value": (BinaryType, StringType), "topic": (StringType,),
        "partition": (IntegerType, LongType), "timestamp": (TimestampType,), "headers": (ArrayType,),
    }
    if "value" not in fields:
        raise InvalidConfigError("the DataFrame needs a value column (binary or string)")
    for name, types in allowed.items():
        if name in fields and not isinstance(fields[name], types):
            raise InvalidConfigError(f"column {name} must be {' or '.join(t.typeName() for t in types)}, not {fields[name].simpleString()}")
    if "headers" in fields:
        element = fields["headers"].elementType
        if not (isinstance(element, StructType) and [f.name for f in element.fields] == ["key", "value"]
                and isinstance(element.fields[0].dataType, StringType) and isinstance(element.fields[1].dataType, BinaryType)):
            raise InvalidConfigError("column headers must be array<struct<key:string,value:binary>>")
    topic = options.get("topic")
    if "topic" not in fields and not topic:
        raise InvalidConfigError("give a topic column or the topic option")
    if topic is not None:
        _check_topic(topic, str(path))
    codec_name = str(options.get("compression") or "none").lower()
    try:
        codec = Compression[codec_name.upper()]
    except KeyError:
        raise InvalidConfigError(f"compression must be none, gzip, snappy, lz4 or zstd, not {codec_name!r}") from None
    config = {k: str(v) for k, v in options.items() if "." in k and k != "kafka.isolation.level"}
    LogConfig.from_properties(config)  # refuse bad values before any task runs
    os.makedirs(path, exist_ok=True)
    counts: dict[str, int] = {}
    for name in os.listdir(path):
        parsed = _PARTITION_DIR.match(name)
        if parsed and os.path.isdir(os.path.join(path, name)):
            counts[parsed["topic"]] = max(counts.get(parsed["topic"], 0), int(parsed["partition"]) + 1)
    staging_root = options.get("stagingDir") or os.path.join(path, _STAGING)
    staging = os.path.join(staging_root, uuid.uuid4().hex)
    os.makedirs(staging)
    partition = _int(options, "partition", None, minimum=0)
    return _WriteOptions(
        path=str(path),
        staging=staging,
        topic=topic,
        partition=partition,
        num_partitions=counts,
        default_partitions=_int(options, "numPartitions", None),
        compression=codec,
        max_batch_bytes=_int(options, "maxBatchBytes", 512 * 1024),  # type: ignore[arg-type]
        config=config,
    )


# ----------------------------------------------------------------------------------------------
# The data source


class KafkalogDataSource(DataSource):
    """``spark.read.format("kafkalog")``, ``readStream`` and ``write``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> str:
        return _schema_ddl(_bool(self.options, "includeHeaders", False))

    def reader(self, schema: Any) -> DataSourceReader:
        options = _ReadOptions.parse(self.options)
        _check_schema(schema, options.include_headers)
        if options.push_filters:
            if EqualTo is None:
                raise InvalidConfigError("pushFilters=true needs pyspark >= 4.1")
            return _PushdownReader(options)
        return _BatchReader(options)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        options = _ReadOptions.parse(self.options, streaming=True)
        _check_schema(schema, options.include_headers)
        if options.max_offsets_per_trigger is not None and ReadMaxRows is None:
            raise InvalidConfigError("maxOffsetsPerTrigger needs pyspark >= 4.2")
        return _StreamReader(options)

    def writer(self, schema: Any, overwrite: bool) -> _Writer:
        return _Writer(_write_options(self.options, schema, overwrite))


def _check_schema(schema: Any, include_headers: bool) -> None:
    names = [f.name for f in getattr(schema, "fields", [])]
    expected = [f.name for f in (ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA)]
    if names and names != expected:
        raise InvalidConfigError(f"kafkalog rows have the columns {expected}, not {names} (drop the .schema(...) call)")


def register(spark: Any) -> None:
    """Register the ``kafkalog`` format with a SparkSession."""
    spark.dataSource.register(KafkalogDataSource)


# ----------------------------------------------------------------------------------------------
# Distributed verification


def verify(spark: Any, path: str, *, deep: bool = False, check_indexes: bool = True, include_internal: bool = True) -> Any:
    """Check every segment under ``path`` (a log directory, partition directory or glob) on the
    executors, as ``kafkalog verify`` does on one machine; a DataFrame with one row per segment.

    Columns: ``topic, partition, path, base_offset, size, valid_bytes, batches, records,
    first_offset, last_offset, min_timestamp, max_timestamp, magics, codecs, ok`` and
    ``problems`` (``array<struct<path, position, kind, message, severity>>``).
    """
    from .verify import verify_segment  # layer 6, read on the executors

    options = _ReadOptions(path=path, include_internal=include_internal)
    jobs = [(d.topic, d.partition, _log_path(d.path, base)) for d in _discover(options) for base in _segment_bases(d.path)]
    schema = (
        "topic string, partition int, path string, base_offset long, size long, valid_bytes long, batches long, "
        "records long, first_offset long, last_offset long, min_timestamp long, max_timestamp long, "
        "magics array<int>, codecs array<string>, ok boolean, "
        "problems array<struct<path:string,position:long,kind:string,message:string,severity:string>>"
    )

    def check(job: tuple[str, int, str]) -> tuple:
        topic, partition, segment = job
        try:
            report = verify_segment(segment, deep=deep, check_indexes=check_indexes).to_dict()
        except (OSError, KafkalogError) as e:  # deleted or unreadable since it was listed
            return (topic, partition, segment, None, None, None, None, None, None, None, None, None, [], [], False,
                    [(segment, None, "unreadable", str(e), "error")])
        problems = [
            (str(p.get("path")), p.get("position"), str(p.get("kind")), str(p.get("message")), str(p.get("severity")))
            for p in report.get("problems", [])
        ]
        return (
            topic, partition, segment, report.get("base_offset"), report.get("size"), report.get("valid_bytes"),
            report.get("batches"), report.get("records"), report.get("first_offset"), report.get("last_offset"),
            report.get("min_timestamp"), report.get("max_timestamp"), [int(m) for m in report.get("magics", [])],
            [str(c) for c in report.get("codecs", [])], bool(report.get("ok")), problems,
        )

    context = spark.sparkContext
    slices = max(1, min(len(jobs), context.defaultParallelism * 4))
    return spark.createDataFrame(context.parallelize(jobs, slices).map(check), schema)
