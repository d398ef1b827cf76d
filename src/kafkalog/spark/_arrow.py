"""Spark's rows as Arrow: the schema of Spark's Kafka source and the conversion of a slice's
record columns into Arrow record batches of that schema (on the executor)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator

from .. import RecordColumns
from ..errors import InvalidRecordError
from ._compat import pa
from ._options import _ReadOptions
from ._plan import _Slice
from ._read import _read_slice

#: Spark's Kafka source schema (``KafkaRecordToRowConverter``), headers appended when asked for.
SCHEMA_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
_HEADERS_DDL = "headers array<struct<key:string,value:binary>>"
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
