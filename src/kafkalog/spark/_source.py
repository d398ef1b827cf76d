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
and decodes runs of batches with :func:`kafkalog.columnar.decode.decode_columns` into Arrow record
batches of at most ``maxRecordsPerBatch`` records, without a Python object per record.

Options (Spark's Kafka source names where one exists; see docs/spark.md for the full table):
``subscribe``, ``subscribePattern``, ``assign``, ``includeInternalTopics``, ``startingOffsets``,
``endingOffsets``, ``startingTimestamp``, ``endingTimestamp``, ``startingOffsetsByTimestamp``,
``endingOffsetsByTimestamp``, ``startingOffsetsByTimestampStrategy``, ``isolationLevel`` (or
``kafka.isolation.level``), ``includeHeaders``, ``includeMetadata``, ``failOnCorruption``,
``failOnDataLoss``, ``checkCrcs``, ``maxBytesPerPartition``, ``maxRecordsPerBatch``,
``minPartitions``, ``pushFilters``, ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``,
``maxTriggerDelay``, ``statsPath``; for writing ``topic``, ``partition``, ``numPartitions``,
``compression``, ``maxBatchBytes``, ``stagingDir`` and Kafka's topic settings by their names
(``segment.bytes``, ``message.timestamp.type``, ...), and ``sinkId`` for the streaming sink
(``_sink``: each micro-batch appended exactly once across restarts).

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

Planning and reading (pyspark-free) live in ``_options``, ``_discovery``, ``_partition``,
``_plan`` and ``_slice_read``; pyspark is imported in ``_compat`` only, and this module, ``_arrow``
(Spark's schema), ``_stream`` (the stream reader) and ``_write`` (the writer) build on it.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Iterator
from typing import Any

from .. import KafkalogError, verify_segment
from ..remote import normalize_path
from ..errors import InvalidConfigError
from ..schema_registry.store import SCHEMAS_TOPIC
from ._arrow import (
    _arrow_batches,
    _arrow_schema,
    _epoch_ms,
    _schema_ddl,
)
from ._compat import (
    DataSource,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
    ReadMaxRows,
    pa,
)
from ._discovery import _discover, _log_path, _missing_assigned, _segment_bases
from ._options import _bool, _ReadOptions
from ._partition import _PartitionLog
from ._plan import _Bounds, _plan, _resolve_bounds
from ._stream import _StreamReader
from ._write import _write_options, _Writer

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"
#: Tasks per core for ``verify``: small tasks, so a few large segments do not hold up the job.
_VERIFY_TASKS_PER_CORE = 4


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
        missing = _missing_assigned(options, dirs)
        if missing:
            raise InvalidConfigError(f"assign names partitions with no directory: {', '.join(missing)}", file=options.path)
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
            if isinstance(value, _dt.datetime):
                ms = _epoch_ms(value)
                floor = ms + 1 if isinstance(f, GreaterThan) else ms
                self.pushed["time_floor"] = max(floor, self.pushed.get("time_floor", floor))
        elif column in ("topic", "partition") and isinstance(f, (EqualTo, In)):
            values = set(value) if isinstance(f, In) else {value}
            key = "topics" if column == "topic" else "partitions"
            previous = self.pushed.get(key)
            self.pushed[key] = values if previous is None else previous & values



# ----------------------------------------------------------------------------------------------
# The data source


class KafkalogDataSource(DataSource):
    """``spark.read.format("kafkalog")``, ``readStream`` and ``write``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> str:
        ddl = _schema_ddl(_bool(self.options, "includeHeaders", False), _bool(self.options, "includeMetadata", False))
        if not any(self.options.get(name) not in (None, "binary") for name in ("keyFormat", "valueFormat")):
            return ddl
        return _decoded_ddl(ddl, _ReadOptions.parse(self.options))

    def reader(self, schema: Any) -> DataSourceReader:
        options = _ReadOptions.parse(self.options)
        _check_schema(schema, options)
        if options.push_filters:
            if EqualTo is None:
                raise InvalidConfigError("pushFilters=true needs pyspark >= 4.1")
            return _PushdownReader(options)
        return _BatchReader(options)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        options = _ReadOptions.parse(self.options, streaming=True)
        _check_schema(schema, options)
        if (options.max_offsets_per_trigger is not None or options.min_offsets_per_trigger is not None) and ReadMaxRows is None:
            raise InvalidConfigError("maxOffsetsPerTrigger and minOffsetsPerTrigger need pyspark >= 4.2")
        return _StreamReader(options)

    def writer(self, schema: Any, overwrite: bool) -> _Writer:
        return _Writer(_write_options(self.options, schema, overwrite))

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        """``writeStream.format("kafkalog")``: each micro-batch appended exactly once (_sink)."""
        from ._sink import _sink_id, _StreamWriter

        if DataSourceStreamArrowWriter is None:
            raise InvalidConfigError("writeStream.format(\"kafkalog\") needs pyspark >= 4.1")
        sink_id = _sink_id(self.options)
        return _StreamWriter(_write_options(self.options, schema, overwrite), sink_id)


def _types_topic(options: _ReadOptions) -> str | None:
    """The one topic a read covers (its subjects type decoded columns), or None; the schema
    registry's own ``_schemas`` topic, when read along, does not count."""
    if options.subscribe is not None and len(options.subscribe) == 1:
        return options.subscribe[0]
    topics = {d.topic for d in _discover(options)} - {SCHEMAS_TOPIC}
    return topics.pop() if len(topics) == 1 else None


def _decoded_ddl(ddl: str, options: _ReadOptions) -> str:
    """``ddl`` with ``key``/``value`` typed by their formats and the error columns appended."""
    from ._schema_arrow import Decoding, spark_ddl

    fields = Decoding(options.formats, options.path, _types_topic(options)).fields()
    for side in ("key", "value"):
        ddl = ddl.replace(f"{side} binary", f"{side} {spark_ddl(fields.pop(side))}", 1)
    return ", ".join([ddl, *(f"{name} {spark_ddl(t)}" for name, t in fields.items())])


def _check_schema(schema: Any, options: _ReadOptions) -> None:
    names = [f.name for f in getattr(schema, "fields", [])]
    expected = _arrow_schema(options.include_headers, options.include_metadata).names
    if options.formats is not None:
        expected = expected + options.formats.error_columns
    if names and names != expected:
        raise InvalidConfigError(f"kafkalog rows have the columns {expected}, not {names} (drop the .schema(...) call)")


def register(spark: Any) -> None:
    """Register the ``kafkalog`` format with a SparkSession."""
    spark.dataSource.register(KafkalogDataSource)


# ----------------------------------------------------------------------------------------------
# Distributed verification


def verify(spark: Any, path: str, *, deep: bool = False, check_indexes: bool = True, include_internal: bool = True,
           storage_options: dict[str, Any] | None = None) -> Any:
    """Check every segment under ``path`` (a log directory, partition directory or glob; local
    or a URL, see docs/spark.md) on the executors, as ``kafkalog verify`` does on one machine;
    a DataFrame with one row per segment. ``storage_options``: fsspec's options for a URL.

    Columns: ``topic, partition, path, base_offset, size, valid_bytes, batches, records,
    first_offset, last_offset, min_timestamp, max_timestamp, magics, codecs, ok`` and
    ``problems`` (``array<struct<path, position, kind, message, severity>>``).
    """
    options = _ReadOptions(path=normalize_path(path), include_internal=include_internal,
                           storage_options=storage_options)
    jobs = [(d.topic, d.partition, _log_path(d.path, base)) for d in _discover(options) for base in _segment_bases(options.storage, d.path)]
    schema = (
        "topic string, partition int, path string, base_offset long, size long, valid_bytes long, batches long, "
        "records long, first_offset long, last_offset long, min_timestamp long, max_timestamp long, "
        "magics array<int>, codecs array<string>, ok boolean, "
        "problems array<struct<path:string,position:long,kind:string,message:string,severity:string>>"
    )

    def check(job: tuple[str, int, str]) -> tuple:
        topic, partition, segment = job
        try:
            remote = {"storage_options": storage_options} if storage_options else {}
            report = verify_segment(segment, deep=deep, check_indexes=check_indexes, **remote).to_dict()
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
    slices = max(1, min(len(jobs), context.defaultParallelism * _VERIFY_TASKS_PER_CORE))
    return spark.createDataFrame(context.parallelize(jobs, slices).map(check), schema)
