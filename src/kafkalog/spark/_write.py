"""Writing DataFrames as partition logs: append-only, safe under task retries and speculative
execution.

Each task attempt stages v2 batches in its own directory under
``<path>/.kafkalog-staging/<job>/``; the driver's ``commit`` appends the staged batches of the
committed attempts -- one per Spark partition, in partition order -- through
:class:`kafkalog.Log` (offsets assigned, indexes kept, as a broker appends), rolls every touched
partition back to its previous end if any append fails, and deletes the staging directory.
On a remote filesystem the executors build and upload new segments themselves under offset
ranges they claim, and the driver's commit copies them into place inside the store
(``_write_remote``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import Compression, FileRecords, Log, LogConfig, MemoryRecords, RecordBatchBuilder
from ..filenames import PARTITION_DIR, validate_topic_name
from ..remote import Storage, normalize_path
from ..errors import InvalidConfigError, KafkalogError, RecordTooLargeError
from ._arrow import _epoch_ms
from ._compat import DataSourceArrowWriter, WriterCommitMessage, pa
from ._options import _bool, _int, _storage_options
from ._write_remote import _Claimed, _commit_remote, _Item, _stage_remote

_STAGING = ".kafkalog-staging"
#: Default of ``maxBatchBytes``: the size a staged batch is closed at.
DEFAULT_MAX_BATCH_BYTES = 512 * 1024
# Sizes are estimated before a record is encoded: a record's framing (length, attributes,
# deltas, key/value/header lengths as varints) is taken as at most _RECORD_OVERHEAD bytes; a
# staged batch stays _BATCH_HEADROOM under max.message.bytes (room for the batch header), and a
# record alone must fit _RECORD_HEADROOM under it.
_RECORD_OVERHEAD = 64
_BATCH_HEADROOM = 1024
_RECORD_HEADROOM = 128


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
    prefix: str = ""  # remote: where the attempt's output for this partition is on the store
    claim: _Claimed | None = None  # remote, on a store with claims: its offsets and segments


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
    storage_options: dict[str, Any] | None = None
    remote: bool = False  # path on a remote filesystem (``_write_remote``)
    # Spark-partition order of a partition's records across task attempts (``preserveOrder``);
    # without it a remote write may keep the order attempts claimed their offsets in.
    preserve_order: bool = True

    @property
    def storage(self) -> Storage:
        return Storage.for_path(self.path, self.storage_options)


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
        attempt_name = f"part-{spark_partition:05d}-{attempt}-{uuid.uuid4().hex[:8]}"
        if o.remote:  # built locally, uploaded whole at the end of the attempt
            attempt_dir = tempfile.mkdtemp(prefix="kafkalog-stage-")
        else:
            attempt_dir = os.path.join(o.staging, attempt_name)
            try:
                os.mkdir(attempt_dir)  # not makedirs: a zombie attempt after the job ended must not write
            except FileNotFoundError:
                raise KafkalogError("the write job's staging directory is gone: the job has ended", file=o.staging) from None
        now = int(time.time() * 1000)
        max_message = int(o.config.get("max.message.bytes", LogConfig().max_message_bytes))
        target = min(o.max_batch_bytes, max_message - _BATCH_HEADROOM)
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
                size = len(key or b"") + len(value or b"") + sum(len(k) + len(v or b"") for k, v in headers) + _RECORD_OVERHEAD
                if size > max_message - _RECORD_HEADROOM:
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
        items = sorted(staged.values(), key=lambda s: (s.topic, s.partition))
        if o.remote:
            storage, config = o.storage, LogConfig.from_properties(o.config)
            try:
                for item in items:
                    item.prefix, item.claim = _stage_remote(
                        storage, o.path, o.staging, attempt_name, config, attempt_dir,
                        item.topic, item.partition, os.path.join(attempt_dir, item.file), item.records)
            finally:
                shutil.rmtree(attempt_dir, ignore_errors=True)
            attempt_dir = Storage.join(o.staging, attempt_name)
        return _WriteCommit(spark_partition, attempt_dir, items)

    def commit(self, messages: list[_WriteCommit | None]) -> None:
        """Append the committed attempts' batches (Spark partition order) through ``Log``; on any
        failure roll every touched partition back to its previous end. Deletes the staging."""
        o = self.options
        config = LogConfig.from_properties(o.config)
        if o.remote:
            ordered = sorted((m for m in messages if m is not None), key=lambda m: m.spark_partition)
            try:
                _commit_remote(o.path, o.storage_options, config, [
                    _Item(item.topic, item.partition, item.prefix, item.file, item.claim) for m in ordered for item in m.staged
                ], preserve_order=o.preserve_order)
            finally:
                o.storage.remove(o.staging, recursive=True)
            return
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
        if self.options.remote:
            self.options.storage.remove(self.options.staging, recursive=True)
            return
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
        # Spark's Kafka sink: the topic option, when set, overrides the topic column.
        topic = o.topic if o.topic is not None else topics[i]
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
            ms = _epoch_ms(ts)
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
    path = normalize_path(str(path))  # absolute here on the driver: executors work elsewhere
    storage_options = _storage_options(options)
    storage = Storage.for_path(path, storage_options)
    if storage.is_local:
        os.makedirs(path, exist_ok=True)
    try:
        names = storage.list_dirs(path)
    except FileNotFoundError:
        names = []  # an object store's "directory" exists once it holds a key
    counts: dict[str, int] = {}
    for name in names:
        parsed = PARTITION_DIR.match(name)
        if parsed:
            counts[parsed["topic"]] = max(counts.get(parsed["topic"], 0), int(parsed["partition"]) + 1)
    staging_root = normalize_path(options.get("stagingDir")) if options.get("stagingDir") else Storage.join(path, _STAGING)
    if Storage.for_path(staging_root).protocol != storage.protocol:
        raise InvalidConfigError("stagingDir must be on the filesystem of the path written", file=staging_root)
    staging = Storage.join(staging_root, uuid.uuid4().hex)
    if storage.is_local:
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
        max_batch_bytes=_int(options, "maxBatchBytes", DEFAULT_MAX_BATCH_BYTES),
        config=config,
        storage_options=storage_options,
        remote=not storage.is_local,
        preserve_order=_bool(options, "preserveOrder", True),
    )
