"""Spark's rows as Arrow: the schema of Spark's Kafka source and the conversion of a slice's
record columns into Arrow record batches of that schema (on the executor).

``includeMetadata=true`` appends kafkalog's own columns, taken from each row's batch header:
``producerId``, ``producerEpoch``, ``baseSequence``, ``partitionLeaderEpoch``,
``isTransactional`` (-1 / false for v0/v1 messages, which have none) and ``segment``, the
segment file the row was read from."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator

from .. import RecordColumns
from ..errors import InvalidRecordError
from ._compat import pa
from ._options import _ReadOptions
from ._plan import _Slice
from ._slice_read import _BatchHeaders, _read_slice_batches

#: Spark's Kafka source schema (``KafkaRecordToRowConverter``), headers appended when asked for.
SCHEMA_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
_HEADERS_DDL = "headers array<struct<key:string,value:binary>>"
_METADATA_DDL = (
    "producerId long, producerEpoch smallint, baseSequence int, partitionLeaderEpoch int, "
    "isTransactional boolean, segment string"
)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MILLISECOND = _dt.timedelta(milliseconds=1)


def _epoch_ms(value: _dt.datetime) -> int:
    """Kafka's timestamp of a Spark TIMESTAMP value: milliseconds since the epoch, floored (a
    naive value is taken as UTC; pyspark hands them aware)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.timezone.utc)
    return (value - _EPOCH) // _MILLISECOND

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
_METADATA_FIELDS = [
    pa.field("producerId", pa.int64()),
    pa.field("producerEpoch", pa.int16()),
    pa.field("baseSequence", pa.int32()),
    pa.field("partitionLeaderEpoch", pa.int32()),
    pa.field("isTransactional", pa.bool_()),
    pa.field("segment", pa.string()),
]
#: The Arrow schemas Spark expects for the rows (without and with headers).
ARROW_SCHEMA = pa.schema(_BASE_FIELDS)
ARROW_SCHEMA_WITH_HEADERS = pa.schema(_BASE_FIELDS + [pa.field("headers", _HEADERS_TYPE)])


def _arrow_schema(include_headers: bool, include_metadata: bool = False) -> pa.Schema:
    """The rows' Arrow schema: Spark's Kafka columns, then headers, then kafkalog's metadata."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(pa.field("headers", _HEADERS_TYPE))
    if include_metadata:
        fields.extend(_METADATA_FIELDS)
    return pa.schema(fields)


def _schema_ddl(include_headers: bool, include_metadata: bool = False) -> str:
    ddl = f"{SCHEMA_DDL}, {_HEADERS_DDL}" if include_headers else SCHEMA_DDL
    return f"{ddl}, {_METADATA_DDL}" if include_metadata else ddl


def _arrow_batches(s: _Slice | None, options: _ReadOptions) -> Iterator[pa.RecordBatch]:
    """Arrow record batches in Spark's schema of one slice (read in the executor; pyspark
    calls ``read`` once with an empty partition when there are none)."""
    if s is None:
        return
    decoding = None
    if options.formats is not None:  # keyFormat/valueFormat: key and value decoded (_schema_arrow)
        from ._schema_arrow import Decoding

        decoding = Decoding(options.formats, options.path, s.topic)
    for columns, headers in _read_slice_batches(s, options):
        try:
            batch = _arrow_batch(columns, s.topic, s.partition, options.include_headers)
            batch = batch if headers is None else _with_metadata(batch, columns, headers, s.path)
        except OverflowError as e:  # a timestamp beyond Spark's microseconds (Spark's own source fails too)
            raise InvalidRecordError(str(e), file=s.path) from None
        yield batch if decoding is None else decoding.apply(batch, s.topic)


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



def _with_metadata(batch: pa.RecordBatch, columns: RecordColumns, headers: _BatchHeaders, segment: str) -> pa.RecordBatch:
    """``batch`` with the metadata columns of each row's batch header appended."""
    which = headers.rows(columns.offset)
    n = batch.num_rows
    arrays = [
        *batch.columns,
        pa.array(headers.producer_id[which], pa.int64()),
        pa.array(headers.producer_epoch[which], pa.int16()),
        pa.array(headers.base_sequence[which], pa.int32()),
        pa.array(headers.partition_leader_epoch[which], pa.int32()),
        pa.array(headers.is_transactional[which], pa.bool_()),
        pa.repeat(pa.scalar(segment, pa.string()), n),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(list(batch.schema) + _METADATA_FIELDS))
