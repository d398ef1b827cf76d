"""Arrow types and arrays for decoded record columns (:mod:`kafkalog.columnar.columns`).

The numpy buffers of a :class:`~kafkalog.columnar.columns.RecordColumns` are handed to pyarrow
as they are (``Array.from_buffers``): no copy of the data and no Python object per record.
pyarrow is optional: it is imported on first use, and a missing one says how to install it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from ..varint import INT32_MAX

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from .columns import RecordColumns

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
# Arrow's binary, string and list types have 32-bit offsets (the large_* types 64-bit ones).


def column_array(columns: RecordColumns, column: str, *, large: bool = False) -> pa.Array:
    """One column of ``columns`` as a pyarrow array over these buffers (no Python object per record).

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
    pa = import_pyarrow()
    typ = arrow_type(column, large=large)
    n = len(columns)
    if column in ("key", "value"):
        return _binary_array(
            pa, typ, getattr(columns, f"{column}_offsets"), getattr(columns, f"{column}_data"),
            getattr(columns, f"{column}_valid"), large, column,
        )
    if column == "timestamp":
        ts = columns.timestamp
        limit = np.iinfo(np.int64).max // 1000
        out_of_range = (ts > limit) | (ts < -limit)
        if out_of_range.any():
            i = int(np.argmax(out_of_range))
            raise OverflowError(
                f"timestamp {int(ts[i])} ms of the record at offset {int(columns.offset[i])} does not fit "
                "in 64-bit microseconds"
            )
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(ts * 1000)], null_count=0)
    if column == "timestamp_type":
        return _primitive(pa, typ, columns.timestamp_type.astype(np.int32))
    if column == "is_control":
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(np.packbits(columns.is_control, bitorder="little"))])
    if column in ("offset", "producer_id", "partition_leader_epoch", "batch_index"):
        return _primitive(pa, typ, getattr(columns, column))
    if columns.header_offsets is None:
        raise ValueError("headers were not decoded (include_headers=False)")
    h = len(columns.header_key_offsets) - 1
    struct_type = typ.value_type
    keys = _binary_array(
        pa, struct_type.field(0).type, columns.header_key_offsets, columns.header_key_data, None, large, "header key"
    )
    values = _binary_array(
        pa, struct_type.field(1).type, columns.header_value_offsets, columns.header_value_data,
        columns.header_value_valid, large, "header value",
    )
    entries = pa.Array.from_buffers(struct_type, h, [None], null_count=0, children=[keys, values])
    validity, nulls = _bitmap(pa, columns.headers_valid)
    offsets = _arrow_offsets(columns.header_offsets, large, "headers")
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(offsets)], null_count=nulls, children=[entries])


def arrow_type(column: str, *, large: bool = False) -> pa.DataType:
    """The Arrow type :meth:`RecordColumns.arrow_array` gives ``column``."""
    pa = import_pyarrow()
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
    pa = import_pyarrow()
    names = names or {}
    return pa.schema([pa.field(names.get(c, c), arrow_type(c, large=large)) for c in columns])


def import_pyarrow() -> Any:
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
    if offsets[-1] > INT32_MAX:
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

