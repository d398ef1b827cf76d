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

Planning and reading (pyspark-free) live in :mod:`kafkalog.spark._scan`; this is the only module importing
pyspark, and it turns the scan's record columns into Arrow batches of Spark's schema.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
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


from ..builder import RecordBatchBuilder
from ..columnar import RecordColumns
from ..compression import Compression
from ..config import LogConfig
from ..errors import InvalidConfigError, InvalidOffsetError, InvalidRecordError, KafkalogError, RecordTooLargeError
from ..file_records import FileRecords
from ..filenames import validate_topic_name
from ..log import Log
from ..records import MemoryRecords
from ._scan import (
    PARTITION_DIR,
    _Bounds,
    _bool,
    _discover,
    _int,
    _log_path,
    _PartitionLog,
    _plan,
    _read_slice,
    _ReadOptions,
    _resolve_bounds,
    _segment_bases,
    _Slice,
)

_log = logging.getLogger(__name__)

#: Spark's Kafka source schema (``KafkaRecordToRowConverter``), headers appended when asked for.
SCHEMA_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
_HEADERS_DDL = "headers array<struct<key:string,value:binary>>"
_STAGING = ".kafkalog-staging"
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


def _schema_ddl(include_headers: bool) -> str:
    return f"{SCHEMA_DDL}, {_HEADERS_DDL}" if include_headers else SCHEMA_DDL


def _arrow_batches(s: _Slice | None, options: _ReadOptions) -> Iterator[pa.RecordBatch]:
    """Arrow record batches in Spark's schema of one slice (read in the executor; pyspark
    calls ``read`` once with an empty partition when there are none)."""
    if s is None:
        return
    for columns in _read_slice(s, options):
        try:
            yield _arrow_batch(columns, s.topic, s.partition, options.include_headers)
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
        bounds = _resolve_bounds(plogs, options)
        lo, hi = self.pushed.get("offset_lo"), self.pushed.get("offset_hi")
        if lo is not None or hi is not None:
            bounds = {
                tp: _Bounds(max(b.start, lo if lo is not None else b.start), min(b.end, hi if hi is not None else b.end))
                for tp, b in bounds.items()
            }
        return [InputPartition(s) for s in _plan(plogs, bounds, options, self.pushed.get("time_floor"))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _arrow_batches(partition.value, self.options)


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
        for plog in self._logs():
            if plog.segments:
                end = plog.last_stable_offset() if self.options.read_committed else plog.end_offset
                out[(plog.dir.topic, plog.dir.partition)] = (plog.log_start_offset, end)
        return out

    def initialOffset(self) -> dict:
        plogs = self._logs()
        bounds = _resolve_bounds(plogs, self.options, streaming_start=True)
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
        return [InputPartition(s) for s in _plan(list(plogs.values()), bounds, self.options)]

    def _data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise InvalidOffsetError(f"{message}. Set failOnDataLoss=false to go on", file=self.options.path)
        _log.warning("kafkalog: %s (failOnDataLoss=false)", message)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _arrow_batches(partition.value, self.options)

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
    why = validate_topic_name(topic)
    if why is not None:
        raise InvalidConfigError(f"illegal topic name {topic!r}: {why}", file=path)


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
        parsed = PARTITION_DIR.match(name)
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
    from ..tools import verify_segment  # layer 6, read on the executors

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
