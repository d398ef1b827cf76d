"""Records as columns: :class:`RecordColumns`, and building them from Record objects.

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

:func:`from_records` builds the columns of one batch from its Record objects: the plain twin
of the numpy fast path (:mod:`kafkalog.columnar.fast`), which every batch can take.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .arrow import (
    DEFAULT_ARROW_COLUMNS,
    arrow_schema,
    column_array,
    import_pyarrow,
)
from ..record import Record, RecordBatch

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: The empty data buffer every column without bytes shares.
EMPTY_U8 = np.empty(0, np.uint8)


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

    # The columns' types, for type checkers (``__slots__`` alone declares no type).
    offset: npt.NDArray[np.int64]
    timestamp: npt.NDArray[np.int64]
    timestamp_type: npt.NDArray[np.int8]
    key_offsets: npt.NDArray[np.int64]
    key_data: npt.NDArray[np.uint8]
    key_valid: npt.NDArray[np.bool_]
    value_offsets: npt.NDArray[np.int64]
    value_data: npt.NDArray[np.uint8]
    value_valid: npt.NDArray[np.bool_]
    #: The header columns are None when decoded with ``include_headers=False``.
    header_offsets: npt.NDArray[np.int64] | None
    headers_valid: npt.NDArray[np.bool_] | None
    header_key_offsets: npt.NDArray[np.int64] | None
    header_key_data: npt.NDArray[np.uint8] | None
    header_value_offsets: npt.NDArray[np.int64] | None
    header_value_data: npt.NDArray[np.uint8] | None
    header_value_valid: npt.NDArray[np.bool_] | None
    is_control: npt.NDArray[np.bool_]
    producer_id: npt.NDArray[np.int64]
    partition_leader_epoch: npt.NDArray[np.int32]
    batch_index: npt.NDArray[np.int64]

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
        return from_records([], 0, 0, -1, -1, False, include_headers)

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

    # -- Arrow ---------------------------------------------------------------------------------

    def arrow_array(self, column: str, *, large: bool = False) -> pa.Array:
        """One column as a pyarrow array over these buffers (see
        :func:`kafkalog.columnar.arrow.column_array`, which raises ImportError without
        pyarrow, OverflowError and ValueError)."""
        return column_array(self, column, large=large)

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
        pa = import_pyarrow()
        if columns is None:
            columns = tuple(c for c in DEFAULT_ARROW_COLUMNS if c != "headers" or self.has_headers)
        arrays = [self.arrow_array(c, large=large) for c in columns]
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(columns, names=names, large=large))



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



# -- the plain path: columns from Record objects -----------------------------------------------


def from_batch_records(records: list[Record], batch: RecordBatch, index: int, include_headers: bool) -> RecordColumns:
    return from_records(
        records,
        index,
        int(batch.timestamp_type),
        batch.producer_id,
        batch.partition_leader_epoch,
        batch.is_control,
        include_headers,
    )


def from_records(
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
    key_offsets, key_data, key_valid = binary_from_list([r.key for r in records])
    value_offsets, value_data, value_valid = binary_from_list([r.value for r in records])
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
        columns["header_offsets"] = offsets_from_lengths(counts)
        columns["headers_valid"] = counts > 0
        columns["header_key_offsets"], columns["header_key_data"], _ = binary_from_list(
            [h.key.encode("utf-8") for h in flat]
        )
        (
            columns["header_value_offsets"],
            columns["header_value_data"],
            columns["header_value_valid"],
        ) = binary_from_list([h.value for h in flat])
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


def offsets_from_lengths(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def binary_from_list(items: list[bytes | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(items)
    valid = np.fromiter((x is not None for x in items), bool, n)
    lengths = np.fromiter((0 if x is None else len(x) for x in items), np.int64, n)
    data = b"".join(x for x in items if x)
    return offsets_from_lengths(lengths), np.frombuffer(data, np.uint8) if data else EMPTY_U8, valid

