"""Whole-batch decode into columns: numpy arrays, and Arrow arrays built from their buffers.

What Spark and bulk tools read: every record of a run of batches as columns, without a Python
object per record. :func:`decode_columns` returns a :class:`RecordColumns`; its
:meth:`~RecordColumns.to_arrow` hands the same buffers to pyarrow (``Array.from_buffers``).

Columns (``n`` records, ``h`` headers in all; binary columns in Arrow's layout: ``n + 1``
offsets into one data buffer, plus a validity mask):

| column | dtype | meaning |
|---|---|---|
| offset | int64 | absolute offset |
| timestamp | int64 | ms as Kafka reports it (LogAppendTime: the append time; magic 0: -1) |
| timestamp_type | int8 | 0 CreateTime, 1 LogAppendTime, -1 none (magic 0) |
| key_offsets, key_data, key_valid | int64[n+1], uint8, bool[n] | keys (null: invalid, empty) |
| value_offsets, value_data, value_valid | int64[n+1], uint8, bool[n] | values (tombstone: null) |
| header_offsets, headers_valid | int64[n+1], bool[n] | run in the header table; none: null (Spark's way) |
| header_key_offsets, header_key_data | int64[h+1], uint8 | UTF-8 keys, bad bytes as U+FFFD (as the iterator) |
| header_value_offsets, header_value_data, header_value_valid | int64[h+1], uint8, bool[h] | header values |
| is_control | bool | record of a control batch (only with ``include_control``) |
| producer_id | int64 | the batch's producer id (-1 before magic 2) |
| partition_leader_epoch | int32 | the batch's leader epoch (-1 before magic 2) |
| batch_index | int64 | index of the record's batch in the input (every batch counted) |

How v2 batches are decoded (the fast path): from a ``MemoryRecords``, entries are framed in a
tight loop and the headers of up to 2 MiB of entries parsed and checked (counts, codec, control
flag; the CRC one call per batch) with numpy at once, without a batch object; uncompressed
payloads are then read in place in the buffer, not copied. Otherwise (and for compressed
payloads) the payloads of consecutive v2 batches (decompressed where needed) are joined into one
buffer; a tight Python loop walks only the record-length
varints (one ``append`` per record); everything else is decoded with numpy over all records at
once, field by field (attributes, timestamp delta, offset delta, key, value, header count, then
headers level by level), and keys and values are gathered into their data buffers by
pyarrow's ``take`` over the buffer (when pyarrow is installed; else with numpy: one byte mask over
the buffer for short values, one C-level copy per value for long ones). Every check
of the Record iterator (``DefaultRecordBatch.records``) is made too; when one fails, the whole
run is decoded again batch by batch through the Record iterator, which raises its exact error
(file, position, reason) -- or, should the fast path have been too strict, gives the records.
Control batches and v0/v1 messages always take that plain path, and ``KAFKALOG_COLUMNAR=plain``
in the environment forces it for everything.

Thread-safety: each call works on its own state; the batches must not be mutated meanwhile.

Nothing is preallocated from a count field alone: a batch whose record count exceeds what its
payload could hold goes to the plain path (which rejects it), headers are parsed only after
``2 * count`` is checked against the bytes left in the record, and every array grows with
records actually read.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from . import crc as _crc
from .compression import Compression, decompressor
from .errors import InvalidRecordError, KafkalogError
from .legacy import LegacyRecordBatch
from .record import LOG_OVERHEAD, MAGIC_V2, Record, RecordBatch
from .recordbatch import (
    _MIN_RECORD_BODY,
    _ZIGZAG,
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    HEADER,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    DefaultRecordBatch,
)
from .records import MemoryRecords, Records, frame_entry
from .varint import decode_varint

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: Every column :meth:`RecordColumns.arrow_array` can build.
COLUMNS = (
    "key",
    "value",
    "offset",
    "timestamp",
    "timestamp_type",
    "headers",
    "is_control",
    "producer_id",
    "partition_leader_epoch",
    "batch_index",
)
#: What :meth:`RecordColumns.to_arrow` builds unless told otherwise (Spark's Kafka columns
#: without topic and partition, which the caller knows).
DEFAULT_ARROW_COLUMNS = ("key", "value", "offset", "timestamp", "timestamp_type", "headers")

# Set KAFKALOG_COLUMNAR=plain to decode every batch through Record objects (the plain twin).
_PLAIN = os.environ.get("KAFKALOG_COLUMNAR", "").strip().lower() == "plain"
# Payload bytes joined into one buffer before the vectorised decode runs over it (measured:
# 1-2 MiB keeps the temporaries in cache; 4 MiB was up to a quarter slower on 100-byte records,
# and only a few per cent faster on 1 KiB ones).
_CHUNK_BYTES = 2 << 20
# The same for uncompressed payloads read in place from a MemoryRecords buffer: nothing is
# joined, and each run costs a fixed ~0.1 ms of numpy calls plus, past the first, a copy of its
# columns into the result, so larger runs win (measured: 2 MiB 27 us per 16 KiB batch of
# 100-byte records, 8 MiB 16 us).
_IN_PLACE_CHUNK_BYTES = 8 << 20
# Headers are parsed with numpy level by level while at least this many records still have
# headers left; the last few records (say, one record with thousands of headers) in Python.
_HEADER_VECTOR_MIN = 32
# The record-length walk runs vectorised across batches (one numpy step per record index) when a
# run has at least this many batches and this many times more records than its longest batch
# (the counts are bounded by the bytes before a batch is queued): measured ~10 us per step
# against ~0.4 us per record in the Python walk, so it wins from about 25 records per step.
_WALK_VECTOR_MIN_BATCHES = 24
# Slices at least this long on average are copied one by one (see _gather; measured crossover
# between 300 B and 1 KiB).
_LONG_SLICES = 512
# Zeros after the joined payloads. A record that fails its checks can have the fields after
# its null key and value read up to ~35 bytes past its declared end before the check at the
# end of the step rejects it; those reads must stay inside the buffer.
_PAD = bytes(64)
_INT32_MAX = 0x7FFFFFFF
_MIN_RECORD_SIZE = _MIN_RECORD_BODY + 1  # a record's body plus its one-byte length

_U64 = np.uint64
_EMPTY_U8 = np.empty(0, np.uint8)
# Keys, values and headers are gathered by pyarrow's take when pyarrow is installed (see
# _gather); False forces the numpy formulation (the tests run both).
_ARROW_GATHER = True
_TAKE: Any = None  # pyarrow.compute.take, False without pyarrow; set on first use


class _Bad(Exception):
    """The fast path met something the Record iterator may reject: decode through it instead."""


# ----------------------------------------------------------------------------------------------
# The columns


class RecordColumns:
    """Records as columns (see the module docstring for the layout).

    Invariants: every offsets array starts at 0 and ends at the length of its data buffer; a
    null entry spans zero bytes; ``header_offsets`` indexes the header table. When decoded
    with ``include_headers=False`` the six header attributes are None. The arrays may be
    read-only and are shared with the Arrow arrays built from them: treat them as immutable.
    Safe to share between threads.
    """

    __slots__ = (
        "offset",
        "timestamp",
        "timestamp_type",
        "key_offsets",
        "key_data",
        "key_valid",
        "value_offsets",
        "value_data",
        "value_valid",
        "header_offsets",
        "headers_valid",
        "header_key_offsets",
        "header_key_data",
        "header_value_offsets",
        "header_value_data",
        "header_value_valid",
        "is_control",
        "producer_id",
        "partition_leader_epoch",
        "batch_index",
    )

    def __init__(self, **columns: np.ndarray | None) -> None:
        missing = set(self.__slots__) - set(columns)
        unknown = set(columns) - set(self.__slots__)
        if missing or unknown:
            raise TypeError(f"RecordColumns: missing {sorted(missing)}, unknown {sorted(unknown)}")
        for name, value in columns.items():
            setattr(self, name, value)

    @classmethod
    def empty(cls, *, include_headers: bool = True) -> RecordColumns:
        """Columns of zero records."""
        return _from_records([], 0, 0, -1, -1, False, include_headers)

    @classmethod
    def concat(cls, parts: Sequence[RecordColumns]) -> RecordColumns:
        """The records of ``parts`` one after the other (all decoded with or without headers)."""
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        with_headers = {p.header_offsets is not None for p in parts}
        if len(with_headers) != 1:
            raise ValueError("cannot concatenate columns decoded with and without headers")
        out: dict[str, np.ndarray | None] = {}
        for name in cls.__slots__:
            if with_headers == {False} and name.startswith("header"):
                out[name] = None
            elif name.endswith("_offsets"):
                out[name] = _concat_offsets([getattr(p, name) for p in parts])
            else:
                out[name] = np.concatenate([getattr(p, name) for p in parts])
        return cls(**out)

    def __len__(self) -> int:
        return len(self.offset)

    def __repr__(self) -> str:
        headers = "" if self.header_offsets is None else f", headers={len(self.header_key_offsets) - 1}"
        return (
            f"RecordColumns(records={len(self)}, key_bytes={len(self.key_data)}, "
            f"value_bytes={len(self.value_data)}{headers})"
        )

    @property
    def has_headers(self) -> bool:
        """True when headers were decoded (``include_headers=True``)."""
        return self.header_offsets is not None

    def slice(self, start: int, stop: int | None = None) -> RecordColumns:
        """Records ``start`` to ``stop`` (exclusive) as columns of their own, sharing the data."""
        start, stop, _ = slice(start, stop).indices(len(self))
        stop = max(start, stop)
        out: dict[str, np.ndarray | None] = {}
        for name in ("offset", "timestamp", "timestamp_type", "is_control", "producer_id",
                     "partition_leader_epoch", "batch_index", "key_valid", "value_valid", "headers_valid"):
            column = getattr(self, name)
            out[name] = None if column is None else column[start:stop]
        for prefix in ("key", "value"):
            out[f"{prefix}_offsets"], out[f"{prefix}_data"] = _slice_binary(
                getattr(self, f"{prefix}_offsets"), getattr(self, f"{prefix}_data"), start, stop
            )
        if self.header_offsets is None:
            for name in ("header_offsets", "header_key_offsets", "header_key_data", "header_value_offsets",
                         "header_value_data", "header_value_valid"):
                out[name] = None
        else:
            hs, he = int(self.header_offsets[start]), int(self.header_offsets[stop])
            out["header_offsets"] = self.header_offsets[start : stop + 1] - hs
            out["header_key_offsets"], out["header_key_data"] = _slice_binary(
                self.header_key_offsets, self.header_key_data, hs, he
            )
            out["header_value_offsets"], out["header_value_data"] = _slice_binary(
                self.header_value_offsets, self.header_value_data, hs, he
            )
            out["header_value_valid"] = self.header_value_valid[hs:he]
        return RecordColumns(**out)

    # -- Arrow ---------------------------------------------------------------------------------

    def arrow_array(self, column: str, *, large: bool = False) -> pa.Array:
        """One column as a pyarrow array over these buffers (no Python object per record).

        Args:
            column: one of :data:`COLUMNS`.
            large: 64-bit Arrow offsets (``large_binary``, ``large_string``, ``large_list``)
                instead of 32-bit ones.

        Raises:
            ImportError: pyarrow is not installed.
            OverflowError: more than 2 GiB of data in a 32-bit-offset column, or a timestamp
                whose microseconds do not fit in 64 bits.
            ValueError: an unknown column, or headers that were not decoded.
        """
        pa = _pyarrow()
        typ = arrow_type(column, large=large)
        n = len(self)
        if column in ("key", "value"):
            return _binary_array(
                pa, typ, getattr(self, f"{column}_offsets"), getattr(self, f"{column}_data"),
                getattr(self, f"{column}_valid"), large, column,
            )
        if column == "timestamp":
            ts = self.timestamp
            limit = np.iinfo(np.int64).max // 1000
            out_of_range = (ts > limit) | (ts < -limit)
            if out_of_range.any():
                i = int(np.argmax(out_of_range))
                raise OverflowError(
                    f"timestamp {int(ts[i])} ms of the record at offset {int(self.offset[i])} does not fit "
                    "in 64-bit microseconds"
                )
            return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(ts * 1000)], null_count=0)
        if column == "timestamp_type":
            return _primitive(pa, typ, self.timestamp_type.astype(np.int32))
        if column == "is_control":
            return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(np.packbits(self.is_control, bitorder="little"))])
        if column in ("offset", "producer_id", "partition_leader_epoch", "batch_index"):
            return _primitive(pa, typ, getattr(self, column))
        if self.header_offsets is None:
            raise ValueError("headers were not decoded (include_headers=False)")
        h = len(self.header_key_offsets) - 1
        struct_type = typ.value_type
        keys = _binary_array(
            pa, struct_type.field(0).type, self.header_key_offsets, self.header_key_data, None, large, "header key"
        )
        values = _binary_array(
            pa, struct_type.field(1).type, self.header_value_offsets, self.header_value_data,
            self.header_value_valid, large, "header value",
        )
        entries = pa.Array.from_buffers(struct_type, h, [None], null_count=0, children=[keys, values])
        validity, nulls = _bitmap(pa, self.headers_valid)
        offsets = _arrow_offsets(self.header_offsets, large, "headers")
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(offsets)], null_count=nulls, children=[entries])

    def to_arrow(
        self,
        columns: Sequence[str] | None = None,
        *,
        names: Mapping[str, str] | None = None,
        large: bool = False,
    ) -> pa.RecordBatch:
        """The columns as a ``pyarrow.RecordBatch`` built from these buffers.

        Types: key/value ``binary``, offset ``int64``, timestamp ``timestamp[us, UTC]``,
        timestamp_type ``int32``, headers ``list<struct<key: string, value: binary>>``,
        is_control ``bool``, producer_id ``int64``, partition_leader_epoch ``int32``,
        batch_index ``int64``.

        Args:
            columns: which columns, in order (default :data:`DEFAULT_ARROW_COLUMNS`, without
                headers when they were not decoded).
            names: output names by column, e.g. ``{"timestamp_type": "timestampType"}``.
            large: 64-bit Arrow offsets (see :meth:`arrow_array`).
        """
        pa = _pyarrow()
        if columns is None:
            columns = tuple(c for c in DEFAULT_ARROW_COLUMNS if c != "headers" or self.has_headers)
        arrays = [self.arrow_array(c, large=large) for c in columns]
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(columns, names=names, large=large))


def arrow_type(column: str, *, large: bool = False) -> pa.DataType:
    """The Arrow type :meth:`RecordColumns.arrow_array` gives ``column``."""
    pa = _pyarrow()
    binary = pa.large_binary() if large else pa.binary()
    types = {
        "key": binary,
        "value": binary,
        "offset": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_type": pa.int32(),
        "is_control": pa.bool_(),
        "producer_id": pa.int64(),
        "partition_leader_epoch": pa.int32(),
        "batch_index": pa.int64(),
    }
    if column == "headers":
        entry = pa.struct([("key", pa.large_string() if large else pa.string()), ("value", binary)])
        return pa.large_list(entry) if large else pa.list_(entry)
    try:
        return types[column]
    except KeyError:
        raise ValueError(f"unknown column {column!r}; expected one of {COLUMNS}") from None


def arrow_schema(
    columns: Sequence[str] = DEFAULT_ARROW_COLUMNS, *, names: Mapping[str, str] | None = None, large: bool = False
) -> pa.Schema:
    """The schema :meth:`RecordColumns.to_arrow` gives (for declaring it before any data)."""
    pa = _pyarrow()
    names = names or {}
    return pa.schema([pa.field(names.get(c, c), arrow_type(c, large=large)) for c in columns])


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise ImportError(
            'Arrow output needs pyarrow: pip install pyarrow (or pip install "kafkalog[spark]")'
        ) from None
    return pyarrow


def _bitmap(pa: Any, valid: np.ndarray) -> tuple[Any, int]:
    nulls = len(valid) - int(np.count_nonzero(valid))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def _arrow_offsets(offsets: np.ndarray, large: bool, what: str) -> np.ndarray:
    if large:
        return np.ascontiguousarray(offsets, dtype=np.int64)
    if offsets[-1] > _INT32_MAX:
        raise OverflowError(
            f"{int(offsets[-1])} bytes of {what} data exceed 32-bit Arrow offsets: pass large=True, or "
            "convert smaller slices (RecordColumns.slice)"
        )
    return offsets.astype(np.int32)


def _binary_array(pa: Any, typ: Any, offsets, data, valid, large: bool, what: str) -> Any:
    n = len(offsets) - 1
    validity, nulls = (None, 0) if valid is None else _bitmap(pa, valid)
    buffers = [validity, pa.py_buffer(_arrow_offsets(offsets, large, what)), pa.py_buffer(np.ascontiguousarray(data))]
    return pa.Array.from_buffers(typ, n, buffers, null_count=nulls)


def _primitive(pa: Any, typ: Any, values: np.ndarray) -> Any:
    values = np.ascontiguousarray(values, dtype=typ.to_pandas_dtype())
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)], null_count=0)


def _concat_offsets(parts: list[np.ndarray]) -> np.ndarray:
    out = [parts[0]]
    base = parts[0][-1]
    for p in parts[1:]:
        out.append(p[1:] + base)
        base = base + p[-1]
    return np.concatenate(out)


def _slice_binary(offsets: np.ndarray, data: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = int(offsets[start]), int(offsets[stop])
    return offsets[start : stop + 1] - lo, data[lo:hi]


# ----------------------------------------------------------------------------------------------
# Decoding


def decode_columns(
    records_or_batches: Records | Iterable[RecordBatch],
    *,
    validate: bool = True,
    include_control: bool = False,
    include_headers: bool = True,
    max_records: int | None = None,
) -> RecordColumns:
    """Decode every record of a run of batches (any magic, any codec) into columns.

    The result agrees record for record with iterating the batches (``batch.records()``); a
    partial batch at the end of a ``Records`` ends the run, as in shallow iteration.

    Args:
        records_or_batches: a ``MemoryRecords``/``FileRecords``, or batches in order.
        validate: check each batch first (size, CRC -- CRC-32C in hardware where the CPU has
            it -- codec and counts), as ``batches(validate=True)`` does.
        include_control: keep the records of control batches (transaction markers); they are
            decoded, and so checked, either way.
        include_headers: decode the headers into the header table (they are checked either way).
        max_records: stop once this many records are decoded (the batches after the one that
            reaches it are not read).

    Raises:
        CorruptRecordError, InvalidRecordError, TruncatedRecordError, UnsupportedCodecError,
        RecordTooLargeError: the first bad batch, with its file and position, exactly as the
            Record iterator raises it.
    """
    if max_records is not None and max_records < 0:
        raise ValueError(f"max_records must be >= 0, not {max_records}")
    if isinstance(records_or_batches, Records):
        batches: Iterator[RecordBatch] = records_or_batches.batches(validate=validate)
        check = False
    else:
        batches = iter(records_or_batches)
        check = validate
    if max_records == 0:
        return RecordColumns.empty(include_headers=include_headers)
    decoder = _Decoder(include_control, include_headers)
    if isinstance(records_or_batches, MemoryRecords) and not _PLAIN:
        return decoder.run_memory(records_or_batches, validate, max_records)
    return decoder.run(batches, check, max_records)


class _Decoder:
    """One decode: runs of consecutive v2 batches go to the fast path, the rest to the plain.

    The run queued for the fast path: per batch its object (or, for a ``MemoryRecords``, its
    position, the object being made only if the run must be decoded again plainly), its index,
    its count, its header fields, and its payload -- decompressed bytes, or None when the
    payload is read in place from the ``MemoryRecords`` buffer (``run_spans``).
    """

    def __init__(self, include_control: bool, include_headers: bool) -> None:
        self.include_control = include_control
        self.include_headers = include_headers
        self.pieces: list[RecordColumns] = []
        self.buf: Any = None  # the MemoryRecords buffer, its uint8 view and decompression cap
        self.u = _EMPTY_U8
        self.max_decompressed = 0
        self._new_run()

    def _new_run(self) -> None:
        self.run_batches: list[RecordBatch | int] = []
        self.run_fields: list[tuple[int, ...]] = []  # _RUN_FIELDS per batch
        self.run_payloads: list[Any] = []
        self.run_spans: list[tuple[int, int]] = []
        self.run_bytes = 0
        self.run_in_place = True

    def run(self, batches: Iterator[RecordBatch], check: bool, max_records: int | None) -> RecordColumns:
        total = 0
        error: KafkalogError | None = None
        index = 0
        while max_records is None or total < max_records:
            try:
                batch = next(batches, None)
                if batch is None:
                    break
                if check:
                    batch.ensure_valid()
                total += self.add(batch, index)
            except KafkalogError as e:
                # Batches before this one may hold an earlier error: decode them first.
                error = e
                break
            index += 1
        return self.finish(error, max_records)

    def finish(self, error: KafkalogError | None, max_records: int | None) -> RecordColumns:
        self.flush()
        if error is not None:
            raise error
        out = RecordColumns.concat(self.pieces) if self.pieces else RecordColumns.empty(
            include_headers=self.include_headers
        )
        if max_records is not None and len(out) > max_records:
            out = out.slice(0, max_records)
        return out

    def add(self, batch: RecordBatch, index: int) -> int:
        """Queue or decode one batch; return how many records it adds."""
        if _PLAIN or batch.magic != MAGIC_V2 or batch.is_control:
            return self.plain(batch, index)
        count = batch.count
        if count <= 0:
            # An empty batch (kept by the cleaner for its producer state) has nothing to read.
            return 0 if count == 0 else self.plain(batch, index)
        if batch.attributes & COMPRESSION_CODEC_MASK == 0:
            payload = batch.entry()[RECORDS_OFFSET:]
        else:
            payload = batch._payload()[0]  # checks the codec, relocates decompression errors
        if count > len(payload) // _MIN_RECORD_SIZE:
            return self.plain(batch, index)
        b = batch
        self.queue(batch, (b.base_offset, b.base_timestamp, b.max_timestamp, b.attributes, b.producer_id,
                           b.partition_leader_epoch, count, index), payload)
        return count

    def queue(self, batch: RecordBatch | int, fields: tuple[int, ...], payload: Any, span: tuple[int, int] | None = None) -> None:
        """Queue one batch for the fast path (``payload`` None: in place at ``span``)."""
        self.run_batches.append(batch)
        self.run_fields.append(fields)
        self.run_payloads.append(payload)
        if payload is None:
            self.run_spans.append(span)  # type: ignore[arg-type]
            self.run_bytes += span[1] - span[0]  # type: ignore[index]
        else:
            self.run_in_place = False
            self.run_bytes += len(payload)
        if self.run_bytes >= (_IN_PLACE_CHUNK_BYTES if self.run_in_place else _CHUNK_BYTES):
            self.flush()

    def plain(self, batch: RecordBatch, index: int) -> int:
        """Decode one batch through the Record iterator (after the queued run, to keep order)."""
        self.flush()
        records = batch.records()
        if batch.is_control and not self.include_control:
            return 0
        self.pieces.append(_from_batch_records(records, batch, index, self.include_headers))
        return len(records)

    def batch_at(self, position: int) -> DefaultRecordBatch:
        return DefaultRecordBatch(self.buf, position, max_decompressed_size=self.max_decompressed)

    def flush(self) -> None:
        """Decode the queued run of v2 batches."""
        if not self.run_batches:
            return
        batches, fields, payloads, spans, in_place = (
            self.run_batches, self.run_fields, self.run_payloads, self.run_spans, self.run_in_place
        )
        self._new_run()
        counts = [f[6] for f in fields]
        if in_place:
            # Every payload is an uncompressed one in the MemoryRecords buffer: read it there.
            data, u = self.buf, self.u
            starts, ends = (list(c) for c in zip(*spans))
        else:
            if spans:
                view = memoryview(self.buf)
                spans_left = iter(spans)
                payloads = [view[slice(*next(spans_left))] if p is None else p for p in payloads]
            data = b"".join(payloads + [_PAD])
            u = np.frombuffer(data, np.uint8)
            starts, ends = [], []
            pos = 0
            for payload in payloads:
                starts.append(pos)
                pos += len(payload)
                ends.append(pos)
        try:
            piece = _decode_v2_run(data, u, starts, ends, counts, fields, self.include_headers)
        except (_Bad, IndexError):
            # Decode again through the Record iterator: it raises the first error exactly.
            # (IndexError: bytes so damaged that a position left the buffer; none is expected.)
            objects = [self.batch_at(b) if isinstance(b, int) else b for b in batches]
            piece = RecordColumns.concat(
                [_from_batch_records(b.records(), b, f[7], self.include_headers) for b, f in zip(objects, fields)]
            )
        self.pieces.append(piece)

    # -- MemoryRecords: batches framed and checked here, their headers parsed with numpy -------

    def run_memory(self, records: MemoryRecords, validate: bool, max_records: int | None) -> RecordColumns:
        """:meth:`run` over ``records.batches(validate=validate)``, without a batch object or a
        Python header parse per batch: entries are framed in a tight loop, the headers of a
        chunk of entries parsed and checked at once with numpy. Entries that are not v2 batches
        fit for the fast path (other magics, bad framing, control batches, a failed check) go
        through the same steps as :meth:`MemoryRecords.batches` and :meth:`add`, one by one,
        so every error is the one the Record iterator raises, in batch order.
        """
        buf = records.buffer
        view = memoryview(buf)
        if view.ndim != 1 or view.format != "B":
            buf = view = view.cast("B")
        self.buf = buf
        self.u = np.frombuffer(view, np.uint8)
        self.max_decompressed = records.max_decompressed_size
        max_batch = records.max_batch_size
        end = len(view)
        pos = index = total = 0
        error: KafkalogError | None = None
        try:
            while pos < end and (max_records is None or total < max_records):
                positions, stop = _frame_v2(buf, pos, end, max_batch)
                if positions:
                    pos, index, total = self.add_chunk(positions, stop, validate, index, total, max_records)
                    continue
                # An entry the fast framing does not take: exactly as MemoryRecords.batches.
                framed = frame_entry(buf, pos, end - pos, file=None, position=pos, max_batch_size=max_batch)
                if framed is None:
                    break  # a partial tail
                size, magic = framed
                if magic == MAGIC_V2:
                    batch: RecordBatch = self.batch_at(pos)
                else:
                    batch = LegacyRecordBatch(buf, pos, max_decompressed_size=self.max_decompressed)
                if validate:
                    batch.ensure_valid()
                total += self.add(batch, index)
                index += 1
                pos += size
        except KafkalogError as e:
            error = e
        return self.finish(error, max_records)

    def add_chunk(
        self, positions: list[int], stop: int, validate: bool, index: int, total: int, max_records: int | None
    ) -> tuple[int, int, int]:
        """Check and queue the framed v2 batches at ``positions`` (the last ends at ``stop``);
        return (position, index, total) after the last one handled."""
        at = np.array(positions, np.int64)
        h = self.u[at[:, None] + _HEADER_BYTES].view(_HEADER_DTYPE)[:, 0]
        length = h["length"].astype(np.int64)
        attrs = h["attributes"].astype(np.int64)
        count = h["count"].astype(np.int64)
        codec = attrs & COMPRESSION_CODEC_MASK
        # What ensure_valid checks (but the CRC), and what add needs to queue without the plain
        # path: a known codec, no control batch, a count the payload can hold.
        fast = (
            (codec <= _MAX_CODEC_ID)
            & (attrs & CONTROL_FLAG_MASK == 0)
            & (count >= 0)
            & ((count == 0) | (h["last_offset_delta"].astype(np.int64) >= count - 1))
            & ((codec != 0) | (count * _MIN_RECORD_SIZE <= length + LOG_OVERHEAD - RECORDS_OFFSET))
        )
        ends = (at + length + LOG_OVERHEAD).tolist()
        if validate:
            view = memoryview(self.buf)
            crc32c = _crc.crc32c
            crcs = [crc32c(view[p + ATTRIBUTES_OFFSET : e]) for p, e in zip(positions, ends)]
            fast &= np.array(crcs, np.uint32) == h["crc"]
        rows = zip(
            positions, ends, fast.tolist(), codec.tolist(), count.tolist(), h["base_offset"].tolist(),
            h["base_timestamp"].tolist(), h["max_timestamp"].tolist(), attrs.tolist(), h["producer_id"].tolist(),
            h["partition_leader_epoch"].tolist(),
        )
        view = memoryview(self.buf)
        max_decompressed = self.max_decompressed
        for p, e, ok, c, n, base_offset, base_ts, max_ts, a, producer_id, epoch in rows:
            if max_records is not None and total >= max_records:
                return p, index, total
            if ok and n:
                fields = (base_offset, base_ts, max_ts, a, producer_id, epoch, n, index)
                if c == 0:
                    self.queue(p, fields, None, (p + RECORDS_OFFSET, e))
                    total += n
                    index += 1
                    continue
                try:
                    payload = _decompressors[c](view[p + RECORDS_OFFSET : e], max_decompressed)
                except KafkalogError:
                    payload = None  # the batch object raises it, relocated
                if payload is not None and n <= len(payload) // _MIN_RECORD_SIZE:
                    self.queue(p, fields, payload)
                    total += n
                    index += 1
                    continue
            elif ok:  # an empty batch: nothing to read
                index += 1
                continue
            # Anything else: the batch object, as run() would have it.
            batch = self.batch_at(p)
            if validate:
                batch.ensure_valid()
            total += self.add(batch, index)
            index += 1
        return stop, index, total


# Entries framed (and their headers parsed) at a time by the fast framing of a MemoryRecords.
_FRAME_CHUNK_BYTES = 2 << 20
_MAX_CODEC_ID = max(Compression)
_HEADER_DTYPE = np.dtype(
    {
        "names": ["base_offset", "length", "partition_leader_epoch", "magic", "crc", "attributes",
                  "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                  "base_sequence", "count"],
        "formats": [">i8", ">i4", ">i4", "i1", ">u4", ">i2", ">i4", ">i8", ">i8", ">i8", ">i2", ">i4", ">i4"],
        "offsets": [BASE_OFFSET_OFFSET, LENGTH_OFFSET, PARTITION_LEADER_EPOCH_OFFSET, MAGIC_OFFSET, CRC_OFFSET,
                    ATTRIBUTES_OFFSET, LAST_OFFSET_DELTA_OFFSET, BASE_TIMESTAMP_OFFSET, MAX_TIMESTAMP_OFFSET,
                    PRODUCER_ID_OFFSET, PRODUCER_ID_OFFSET + 8, PRODUCER_ID_OFFSET + 10, RECORDS_COUNT_OFFSET],
        "itemsize": RECORD_BATCH_OVERHEAD,
    }
)
assert _HEADER_DTYPE.itemsize == HEADER.size == 61
_HEADER_BYTES = np.arange(RECORD_BATCH_OVERHEAD, dtype=np.int64)
_SIZE_FIELD = struct.Struct(">i")
# Smallest size field of a v2 batch (the 61-byte header, less the 12-byte offset and size).
_MIN_V2_SIZE_FIELD = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
_decompressors = {int(c): decompressor(c, MAGIC_V2) for c in Compression if c is not Compression.NONE}


def _frame_v2(buf: Any, pos: int, end: int, max_batch: int) -> tuple[list[int], int]:
    """Frame whole v2 entries from ``pos``, up to about :data:`_FRAME_CHUNK_BYTES`: their
    positions, and where framing stopped (the end of the last, or the first entry that is not
    plainly a whole v2 batch: that one is framed by ``frame_entry``, which raises or stops)."""
    positions: list[int] = []
    append = positions.append
    unpack = _SIZE_FIELD.unpack_from
    limit = pos + _FRAME_CHUNK_BYTES
    while pos < end and pos < limit:
        if end - pos < RECORD_BATCH_OVERHEAD:
            break
        (size,) = unpack(buf, pos + LENGTH_OFFSET)
        if size < _MIN_V2_SIZE_FIELD or size > max_batch or buf[pos + MAGIC_OFFSET] != MAGIC_V2 or size > end - pos - LOG_OVERHEAD:
            break
        append(pos)
        pos += size + LOG_OVERHEAD
    return positions, pos


# -- the plain path ----------------------------------------------------------------------------


def _from_batch_records(records: list[Record], batch: RecordBatch, index: int, include_headers: bool) -> RecordColumns:
    return _from_records(
        records,
        index,
        int(batch.timestamp_type),
        batch.producer_id,
        batch.partition_leader_epoch,
        batch.is_control,
        include_headers,
    )


def _from_records(
    records: list[Record],
    index: int,
    timestamp_type: int,
    producer_id: int,
    leader_epoch: int,
    is_control: bool,
    include_headers: bool,
) -> RecordColumns:
    """Columns from Record objects (one batch's)."""
    n = len(records)
    key_offsets, key_data, key_valid = _binary_from_list([r.key for r in records])
    value_offsets, value_data, value_valid = _binary_from_list([r.value for r in records])
    columns: dict[str, np.ndarray | None] = dict(
        offset=_int64([r.offset for r in records]),
        timestamp=_int64([r.timestamp for r in records]),
        timestamp_type=np.full(n, timestamp_type, np.int8),
        key_offsets=key_offsets,
        key_data=key_data,
        key_valid=key_valid,
        value_offsets=value_offsets,
        value_data=value_data,
        value_valid=value_valid,
        is_control=np.full(n, is_control, bool),
        producer_id=np.full(n, producer_id, np.int64),
        partition_leader_epoch=np.full(n, leader_epoch, np.int32),
        batch_index=np.full(n, index, np.int64),
    )
    if include_headers:
        counts = np.fromiter((len(r.headers) for r in records), np.int64, n)
        flat = [h for r in records for h in r.headers]
        columns["header_offsets"] = _offsets(counts)
        columns["headers_valid"] = counts > 0
        columns["header_key_offsets"], columns["header_key_data"], _ = _binary_from_list(
            [h.key.encode("utf-8") for h in flat]
        )
        (
            columns["header_value_offsets"],
            columns["header_value_data"],
            columns["header_value_valid"],
        ) = _binary_from_list([h.value for h in flat])
    else:
        for name in ("header_offsets", "headers_valid", "header_key_offsets", "header_key_data",
                     "header_value_offsets", "header_value_data", "header_value_valid"):
            columns[name] = None
    return RecordColumns(**columns)


def _int64(values: list[int]) -> np.ndarray:
    """As int64, wrapping what overflows as Java's long arithmetic does (base + delta)."""
    try:
        return np.array(values, dtype=np.int64).reshape(len(values))
    except OverflowError:
        return np.array([(v + (1 << 63)) % (1 << 64) - (1 << 63) for v in values], dtype=np.int64)


def _offsets(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _binary_from_list(items: list[bytes | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(items)
    valid = np.fromiter((x is not None for x in items), bool, n)
    lengths = np.fromiter((0 if x is None else len(x) for x in items), np.int64, n)
    data = b"".join(x for x in items if x)
    return _offsets(lengths), np.frombuffer(data, np.uint8) if data else _EMPTY_U8, valid


# -- the fast path -----------------------------------------------------------------------------


def _decode_v2_run(
    data: Any,
    u: np.ndarray,
    starts: list[int],
    ends: list[int],
    counts: list[int],
    fields: list[tuple[int, ...]],
    include_headers: bool,
) -> RecordColumns:
    """Decode consecutive non-control v2 batches (count >= 1) whose payloads are
    ``data[starts[i]:ends[i]]`` (``u``: ``data`` as uint8; ``fields``: per batch the base offset,
    base and max timestamps, attributes, producer id, leader epoch, count and batch index).

    Raises:
        _Bad: any check of ``recordbatch._decode_records`` fails somewhere in the run.
        IndexError: a position left the buffer (damage; treated as _Bad by the caller).
    """
    if len(counts) >= _WALK_VECTOR_MIN_BATCHES and max(counts) * _WALK_VECTOR_MIN_BATCHES <= sum(counts):
        rend = _record_ends_vector(u, starts, ends, counts)
    else:
        rend = np.array(_record_ends(data, starts, ends, counts), dtype=np.int64)
    n = len(rend)
    count_arr = np.array(counts, np.int64)
    rstart = np.empty(n, np.int64)
    rstart[1:] = rend[:-1]
    rstart[np.cumsum(count_arr) - count_arr] = starts

    length, size = _varints(u, rstart, 5)
    if (length < _MIN_RECORD_BODY).any() or (rstart + size + length != rend).any():
        raise _Bad
    p = rstart + size + 1  # past the length and the attributes byte (unused in v2)
    ts_delta, size = _varints(u, p, 10)
    p += size
    offset_delta, size = _varints(u, p, 5)
    p += size
    key_len, key_start, p = _sized(u, p, rend)
    value_len, value_start, p = _sized(u, p, rend)
    header_count, size = _varints(u, p, 5)
    p += size
    if (header_count < 0).any() or (header_count * 2 > rend - p).any():
        raise _Bad
    with_headers = np.flatnonzero(header_count)
    if len(with_headers) == 0:
        if (p != rend).any():
            raise _Bad
        table = None
    else:
        without = header_count == 0
        if (p[without] != rend[without]).any():
            raise _Bad
        table = _headers(u, data, with_headers, p[with_headers], header_count[with_headers], rend[with_headers])

    base_offset, base_ts, max_ts, attrs, producer_id, leader_epoch, _, index = (
        np.repeat(np.array(column, dtype=np.int64), count_arr) for column in zip(*fields)
    )
    log_append = (attrs & TIMESTAMP_TYPE_MASK) != 0
    timestamp = base_ts + ts_delta
    if log_append.any():
        # Under LogAppendTime every record reports the batch's max timestamp (the append time).
        timestamp = np.where(log_append, max_ts, timestamp)
    key_offsets, key_data = _gather(u, data, key_start, key_len)
    value_offsets, value_data = _gather(u, data, value_start, value_len)
    columns: dict[str, np.ndarray | None] = dict(
        offset=base_offset + offset_delta,
        timestamp=timestamp,
        timestamp_type=log_append.astype(np.int8),  # v2: 0 CreateTime, 1 LogAppendTime
        key_offsets=key_offsets,
        key_data=key_data,
        key_valid=key_len >= 0,
        value_offsets=value_offsets,
        value_data=value_data,
        value_valid=value_len >= 0,
        is_control=np.zeros(n, bool),
        producer_id=producer_id,
        partition_leader_epoch=leader_epoch.astype(np.int32),
        batch_index=index,
    )
    if not include_headers:
        for name in ("header_offsets", "headers_valid", "header_key_offsets", "header_key_data",
                     "header_value_offsets", "header_value_data", "header_value_valid"):
            columns[name] = None
        return RecordColumns(**columns)
    columns["header_offsets"] = _offsets(header_count)
    columns["headers_valid"] = header_count > 0
    if table is None:
        columns["header_key_offsets"] = columns["header_value_offsets"] = np.zeros(1, np.int64)
        columns["header_key_data"] = columns["header_value_data"] = _EMPTY_U8
        columns["header_value_valid"] = np.zeros(0, bool)
    else:
        hk_start, hk_len, hv_start, hv_len = table
        columns["header_key_offsets"], columns["header_key_data"] = _utf8_keys(*_gather(u, data, hk_start, hk_len))
        columns["header_value_offsets"], columns["header_value_data"] = _gather(u, data, hv_start, hv_len)
        columns["header_value_valid"] = hv_len >= 0
    return RecordColumns(**columns)


def _record_ends(data: bytes, starts: list[int], ends: list[int], counts: list[int]) -> list[int]:
    """Walk the record-length varints of each batch; return where every record ends.

    The one sequential part of the decode. Lengths are checked afterwards, vectorised (a
    negative one only moves ``pos`` back, the walk being bounded by the count); the walk must
    land exactly on each batch's end.
    """
    zz = _ZIGZAG
    out: list[int] = []
    append = out.append
    try:
        for pos, end, count in zip(starts, ends, counts):
            for _ in repeat(None, count):
                b = data[pos]
                if b < 0x80:
                    pos += 1 + zz[b]
                else:
                    b2 = data[pos + 1]
                    if b2 < 0x80:
                        pos += 2 + zz[(b & 0x7F) | (b2 << 7)]
                    else:
                        length, pos = decode_varint(data, pos)
                        pos += length
                append(pos)
            if pos != end:
                raise _Bad
    except (IndexError, InvalidRecordError):
        raise _Bad from None
    return out


def _step_table() -> np.ndarray:
    """For every two bytes ``b0 | b1 << 8`` at a record's start: how far the record reaches
    (its length varint's size plus the ZigZag-decoded length) when the varint is one or two
    bytes long, else :data:`_LONGER` (three or more bytes: decoded the general way)."""
    w = np.arange(1 << 16, dtype=np.int64)
    b0, b1 = w & 0xFF, w >> 8
    one = (b0 >> 1) ^ -(b0 & 1)
    z2 = (b0 & 0x7F) | (b1 << 7)
    two = (z2 >> 1) ^ -(z2 & 1)
    return np.where(b0 < 0x80, 1 + one, np.where(b1 < 0x80, 2 + two, _LONGER))


_LONGER = -(1 << 40)
_STEP = _step_table()


def _record_ends_vector(u: np.ndarray, starts: list[int], ends: list[int], counts: list[int]) -> np.ndarray:
    """:func:`_record_ends` for many batches at once: step ``k`` reads the length of record ``k``
    of every batch that has one, with numpy. Batches are independent, so a run of many small
    batches walks in ``max(counts)`` vectorised steps instead of one Python step per record.
    Same checks: each walk must land on its batch's end, lengths are checked by the caller.
    """
    raw = np.array(counts, np.int64)
    order = np.argsort(-raw, kind="stable")  # longest first: the batches still walking are a prefix
    count = raw[order]
    pos = np.array(starts, np.int64)[order]
    first = (np.cumsum(raw) - raw)[order]  # where each batch's record ends go in the output
    out = np.empty(int(raw.sum()), np.int64)
    # The two bytes at every position, little-endian (unaligned reads): one gather per step.
    pairs = np.ndarray((len(u) - 1,), dtype="<u2", buffer=u, strides=(1,))
    active = len(count)
    # No bounds check per step: a length that leaves the buffer raises IndexError (the caller
    # falls back to the Record iterator), and every record's bounds are checked afterwards.
    for k in range(int(count[0])):
        while count[active - 1] <= k:
            active -= 1
        p = pos[:active]
        step = _STEP[pairs[p]]
        if (step == _LONGER).any():  # a length of three bytes or more somewhere
            length, size = _varints(u, p, 5)
            step = length + size
        p += step  # a view: updates pos
        out[first[:active] + k] = p
    if (pos != np.array(ends, np.int64)[order]).any():
        raise _Bad
    return out


def _varints(u: np.ndarray, pos: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray | int]:
    """The ZigZag varints (``limit`` 5) or varlongs (10) at ``pos``: (values, sizes).

    Strict as ``kafkalog.varint``: longer than ``limit`` bytes, or more than 32 (64) bits, is
    refused. ``sizes`` is the int 1 when every one is a single byte (the common case).
    """
    b = u[pos]
    more = b >= 0x80
    if not more.any():
        z = b.astype(np.int64)
        return (z >> 1) ^ -(z & 1), 1
    z = (b & 0x7F).astype(_U64)
    size = np.ones(len(pos), np.int64)
    active = np.flatnonzero(more)
    at = pos[active]
    # The last byte may add only the bits that fit: 4 of a varint's 32, 1 of a varlong's 64.
    last_max = 0x0F if limit == 5 else 0x01
    for k in range(1, limit):
        bk = u[at + k]
        z[active] |= (bk & 0x7F).astype(_U64) << _U64(7 * k)
        size[active] += 1
        cont = bk >= 0x80
        if k == limit - 1:
            if cont.any() or (bk > last_max).any():
                raise _Bad
            break
        if not cont.all():
            active, at = active[cont], at[cont]
            if not len(active):
                break
    return (z >> _U64(1)).astype(np.int64) ^ -(z & _U64(1)).astype(np.int64), size


def _sized(u: np.ndarray, p: np.ndarray, rend: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A length-prefixed field (-1 null) at ``p``: (lengths, data starts, positions after)."""
    length, size = _varints(u, p, 5)
    start = p + size
    if ((length < -1) | (length > rend - start)).any():
        raise _Bad
    return length, start, start + np.maximum(length, 0)


def _headers(
    u: np.ndarray, data: bytes, rec: np.ndarray, pos: np.ndarray, left: np.ndarray, rend: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parse the headers of records ``rec`` (header count ``left`` >= 1, first header at ``pos``).

    Returns the header table ordered by record, then header: (key starts, key lengths, value
    starts, value lengths with -1 for null).
    """
    parts: list[tuple[np.ndarray, ...]] = []
    while len(rec) >= _HEADER_VECTOR_MIN:
        key_len, size = _varints(u, pos, 5)
        key_start = pos + size
        if ((key_len < 0) | (key_len > rend - key_start)).any():
            raise _Bad
        value_len, value_start, pos = _sized(u, key_start + key_len, rend)
        parts.append((rec, key_start, key_len, value_start, value_len))
        left = left - 1
        done = left == 0
        if done.any():
            if (pos[done] != rend[done]).any():
                raise _Bad
            keep = ~done
            rec, pos, left, rend = rec[keep], pos[keep], left[keep], rend[keep]
    if len(rec):
        parts.append(_headers_tail(data, rec, pos, left, rend))
    rec_all, key_start, key_len, value_start, value_len = (np.concatenate(c) for c in zip(*parts))
    if len(parts) > 1:
        order = np.argsort(rec_all, kind="stable")
        return key_start[order], key_len[order], value_start[order], value_len[order]
    return key_start, key_len, value_start, value_len


def _headers_tail(
    data: bytes, rec: np.ndarray, pos: np.ndarray, left: np.ndarray, rend: np.ndarray
) -> tuple[np.ndarray, ...]:
    """The headers still to parse of a few records, in Python."""
    recs, key_starts, key_lens, value_starts, value_lens = [], [], [], [], []
    try:
        for r, p, n, end in zip(rec.tolist(), pos.tolist(), left.tolist(), rend.tolist()):
            for _ in repeat(None, n):
                key_len, p = decode_varint(data, p)
                if key_len < 0 or key_len > end - p:
                    raise _Bad
                key_start = p
                p += key_len
                value_len, p = decode_varint(data, p)
                value_start = p
                if value_len >= 0:
                    if value_len > end - p:
                        raise _Bad
                    p += value_len
                elif value_len != -1:
                    raise _Bad
                recs.append(r)
                key_starts.append(key_start)
                key_lens.append(key_len)
                value_starts.append(value_start)
                value_lens.append(value_len)
            if p != end:
                raise _Bad
    except InvalidRecordError:
        raise _Bad from None
    return tuple(np.array(c, dtype=np.int64) for c in (recs, key_starts, key_lens, value_starts, value_lens))


def _arrow_take() -> Any:
    """``pyarrow.compute.take`` when pyarrow is installed (imported on first use), else None."""
    global _TAKE
    if _TAKE is None:
        try:
            import pyarrow.compute

            _TAKE = pyarrow.compute.take
        except ImportError:
            _TAKE = False
    return _TAKE


def _gather(u: np.ndarray, data: bytes, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate the slices ``data[s : s + l]`` (``u`` is ``data`` as uint8; slices in
    increasing, disjoint order; ``l`` -1 is null and empty) into one buffer: (offsets, data)."""
    lengths = np.maximum(lengths, 0)
    offsets = _offsets(lengths)
    total = int(offsets[-1])
    if total == 0:
        return offsets, _EMPTY_U8
    take = _arrow_take() if _ARROW_GATHER else False
    if take:
        # The slices and the gaps between them, alternately, are the entries of one Arrow
        # binary array over the buffer (no copy); taking the even entries is one memcpy per
        # slice in C++ -- measured 6-9x faster than any numpy formulation below, for 10-byte
        # keys and 1 KiB values alike.
        pa = _pyarrow()
        n = len(starts)
        bounds = np.empty(2 * n, np.int64)
        bounds[0::2] = starts
        bounds[1::2] = starts + lengths
        pairs = pa.Array.from_buffers(pa.large_binary(), 2 * n - 1, [None, pa.py_buffer(bounds), pa.py_buffer(u)])
        even = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(np.arange(0, 2 * n, 2, dtype=np.int64))])
        taken = take(pairs, even)
        return offsets, np.frombuffer(taken.buffers()[2], np.uint8, count=total)
    # Only the window the slices span (the buffer may be a whole MemoryRecords).
    lo, hi = int(starts[0]), int(starts[-1] + lengths[-1])
    u = u[lo:hi]
    starts = starts - lo
    data = memoryview(data)[lo:hi]
    keep = lengths > 0
    pieces = int(np.count_nonzero(keep))
    if total >= _LONG_SLICES * pieces:
        # Long values: one memcpy per slice (slice objects made and joined in C) beats a byte
        # mask over the whole buffer, which runs at a fixed cost per byte.
        s = starts[keep]
        bounds = map(slice, s.tolist(), (s + lengths[keep]).tolist())
        view = memoryview(data)
        joined = b"".join(itemgetter(*bounds)(view)) if pieces > 1 else bytes(view[next(bounds)])
        return offsets, np.frombuffer(joined, np.uint8)
    if total * 16 < len(u):
        # Sparse (keys, headers): an index per output byte (measured cheaper than a pass over
        # the whole buffer below about one byte in sixteen).
        itype = np.int32 if len(u) <= _INT32_MAX else np.int64
        index = np.repeat((starts - offsets[:-1]).astype(itype), lengths)
        index += np.arange(total, dtype=itype)
        return offsets, u[index]
    # Dense (values): a mask over the buffer, built from alternating skip/keep run lengths.
    s, n = starts[keep], lengths[keep]
    runs = np.empty(2 * len(s) + 1, np.int64)
    runs[0] = s[0]
    runs[1::2] = n
    runs[2:-1:2] = s[1:] - (s[:-1] + n[:-1])
    runs[-1] = len(u) - (s[-1] + n[-1])
    pattern = np.zeros(len(runs), bool)
    pattern[1::2] = True
    return offsets, u[np.repeat(pattern, runs)]


def _utf8_keys(offsets: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Header keys as the Record iterator has them: invalid UTF-8 replaced by U+FFFD."""
    if not (data >= 0x80).any():
        return offsets, data
    raw = data.tobytes()
    try:
        raw.decode("utf-8")
        starts = offsets[:-1][np.diff(offsets) > 0]
        # The whole buffer is valid and no key starts inside a character: so is every key.
        if not ((data[starts] & 0xC0) == 0x80).any():
            return offsets, data
    except UnicodeDecodeError:
        pass
    bounds = offsets.tolist()
    keys = [raw[a:b].decode("utf-8", "replace").encode("utf-8") for a, b in zip(bounds, bounds[1:])]
    fixed_offsets, fixed_data, _ = _binary_from_list(keys)
    return fixed_offsets, fixed_data
