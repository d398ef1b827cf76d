"""Columnar decoding of a run of v2 batches: the record walk's columns, gathered with numpy.

:func:`decode_v2_in_place` takes whole uncompressed v2 batches straight from a ``MemoryRecords``
buffer on the compiled core: ``_native.columns_v2_scan`` frames them, checks each as
``ensure_valid`` does (CRC-32C included) and walks every record, summing the sizes of the
columns; ``columns_v2_run_fill`` walks them again writing every column -- batch-level ones
(timestamp type, producer id, leader epoch, batch index) included -- once into arrays allocated
here. The per-batch driver (:mod:`kafkalog.columnar.decode`) is its plain twin.

The payloads of consecutive non-control v2 batches lie in one buffer (joined, or in place in a
``MemoryRecords``). The records are walked once, by the compiled core when it is in use
(``_native.columns_v2_size`` then ``columns_v2_fill``: every record checked, offsets,
timestamps, keys, values and headers written into arrays allocated here), else by the pure
walk (:func:`kafkalog.record_walk.walk` keeping ``COLUMNS``: positions and lengths, whose bytes
are then gathered with pyarrow's ``take`` over the buffer when pyarrow is installed, else with
numpy). The per-batch columns (producer id, leader epoch, timestamp type, batch index) are
repeated with numpy.

When a record fails a check (the compiled core raises ``Invalid``, the pure walk
``RecordWalkError``), :class:`UsePlainPath` is raised and the caller decodes the run again
through the Record iterator, which raises the exact error. Nothing is preallocated from a count
field alone: the arrays are sized by a first pass that walked and checked every record.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import numpy as np

from .. import native
from .arrow import import_pyarrow
from .columns import (
    EMPTY_U8,
    RecordColumns,
    binary_from_list,
    offsets_from_lengths,
)
from ..record import TIMESTAMP_TYPE_MASK
from ..record_walk import COLUMNS, BatchBase, RecordWalkError, SpanColumns, walk
from ..varint import INT32_MAX

# Slices at least this long on average are copied one by one (see _gather; measured crossover
# between 300 B and 1 KiB).
_LONG_SLICES = 512
# Keys, values and headers are gathered by pyarrow's take when pyarrow is installed (see
# _gather); False forces the numpy formulation (the tests run both).
_ARROW_GATHER = True
_TAKE: Any = None  # pyarrow.compute.take, False without pyarrow; set on first use
_HEADER_COLUMNS = ("header_offsets", "headers_valid", "header_key_offsets", "header_key_data",
                   "header_value_offsets", "header_value_data", "header_value_valid")


class UsePlainPath(Exception):
    """A record failed a check: decode the run through the Record iterator, which words it."""


def decode_v2_run(
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
        UsePlainPath: a record of the run fails a check of the record walk.
    """
    ext = native.ext
    if ext is not None:
        try:
            columns = _compiled(ext, data, starts, ends, fields, include_headers)
        except native.Invalid:
            raise UsePlainPath from None
    else:
        columns = _walked(data, u, starts, ends, fields, include_headers)
    count_arr = np.array(counts, np.int64)
    _, _, _, attrs, producer_id, leader_epoch, _, index = (
        np.repeat(np.array(column, dtype=np.int64), count_arr) for column in zip(*fields)
    )
    n = len(attrs)
    columns.update(
        timestamp_type=((attrs & TIMESTAMP_TYPE_MASK) != 0).astype(np.int8),  # v2: 0 CreateTime, 1 LogAppendTime
        is_control=np.zeros(n, bool),
        producer_id=producer_id,
        partition_leader_epoch=leader_epoch.astype(np.int32),
        batch_index=index,
    )
    if include_headers:
        columns["header_key_offsets"], columns["header_key_data"] = _utf8_keys(
            columns["header_key_offsets"], columns["header_key_data"]
        )
    else:
        for name in _HEADER_COLUMNS:
            columns[name] = None
    return RecordColumns(**columns)


# The outputs of _native.columns_v2_run_fill, in its order: (name, dtype, length), the length
# counted in records (n), headers (h), or a data buffer's bytes.
_RUN_OUTPUTS = (
    ("offset", np.int64, "n"), ("timestamp", np.int64, "n"), ("timestamp_type", np.int8, "n"),
    ("key_offsets", np.int64, "n+1"), ("key_data", np.uint8, "key_bytes"), ("key_valid", bool, "n"),
    ("value_offsets", np.int64, "n+1"), ("value_data", np.uint8, "value_bytes"), ("value_valid", bool, "n"),
    ("producer_id", np.int64, "n"), ("partition_leader_epoch", np.int32, "n"), ("batch_index", np.int64, "n"),
)
_RUN_HEADER_OUTPUTS = (
    ("header_offsets", np.int64, "n+1"), ("headers_valid", bool, "n"), ("header_key_offsets", np.int64, "h+1"),
    ("header_key_data", np.uint8, "hkey_bytes"), ("header_value_offsets", np.int64, "h+1"),
    ("header_value_data", np.uint8, "hvalue_bytes"), ("header_value_valid", bool, "h"),
)


def decode_v2_in_place(
    ext: Any, buf: Any, pos: int, end: int, max_batch: int, validate: bool, first_index: int,
    max_records: int | None, include_headers: bool, *, within: bool = False,
) -> tuple[RecordColumns, int, int] | None:
    """The longest run of whole, uncompressed, non-control v2 batches of ``buf[pos:end]`` that
    pass every check (CRC-32C too when ``validate``), decoded by the compiled core in two calls:
    a scan that frames, checks and walks them, summing the sizes of the columns, then a fill that
    writes every column once into arrays allocated here from those sums (no per-batch Python, no
    concatenation). Returns (columns, where the run stopped, batches taken), or None when the
    entry at ``pos`` is not such a batch (the caller's per-batch path then takes it, and raises
    what is wrong with it). The arrays are sized by what the scan walked, never by a count field.
    ``max_records`` ends the run at the batch that reaches it, or with ``within`` before a batch
    that would pass it (unless that batch is the run's first).
    """
    limit = -1 if max_records is None else max_records
    stop, batches, n, key_bytes, value_bytes, h, hkey_bytes, hvalue_bytes = ext.columns_v2_scan(
        buf, pos, end, max_batch, validate, limit, within
    )
    if batches == 0:
        return None
    sizes = {"n": n, "n+1": n + 1, "h": h, "h+1": h + 1, "key_bytes": key_bytes, "value_bytes": value_bytes,
             "hkey_bytes": hkey_bytes, "hvalue_bytes": hvalue_bytes}
    wanted = _RUN_OUTPUTS + _RUN_HEADER_OUTPUTS if include_headers else _RUN_OUTPUTS
    c: dict[str, Any] = {name: np.empty(sizes[size], dtype) for name, dtype, size in wanted}
    try:
        ext.columns_v2_run_fill(buf, pos, batches, first_index, tuple(c[name] for name, _, _ in wanted))
    except native.Invalid:
        return None  # the buffer changed under the two passes: the per-batch path decides
    c["is_control"] = np.zeros(n, bool)
    if include_headers:
        c["header_key_offsets"], c["header_key_data"] = _utf8_keys(c["header_key_offsets"], c["header_key_data"])
    else:
        for name in _HEADER_COLUMNS:
            c[name] = None
    return RecordColumns(**c), stop, batches


def _compiled(ext: Any, data: Any, starts: list[int], ends: list[int], fields: list[tuple[int, ...]],
              include_headers: bool) -> dict[str, Any]:
    """The run through the compiled core: a checking pass for the sizes, then one filling the
    arrays allocated here."""
    batches = np.empty((len(starts), 7), np.int64)
    batches[:, 0] = starts
    batches[:, 1] = ends
    batches[:, 2:7] = np.array([(f[6], f[0], f[1], f[2], f[3]) for f in fields], np.int64)
    n, key_bytes, value_bytes, h, hkey_bytes, hvalue_bytes = ext.columns_v2_size(data, batches)
    c: dict[str, Any] = dict(
        offset=np.empty(n, np.int64),
        timestamp=np.empty(n, np.int64),
        key_offsets=np.empty(n + 1, np.int64),
        key_data=np.empty(key_bytes, np.uint8),
        key_valid=np.empty(n, bool),
        value_offsets=np.empty(n + 1, np.int64),
        value_data=np.empty(value_bytes, np.uint8),
        value_valid=np.empty(n, bool),
    )
    if include_headers:
        c.update(
            header_offsets=np.empty(n + 1, np.int64),
            header_key_offsets=np.empty(h + 1, np.int64),
            header_key_data=np.empty(hkey_bytes, np.uint8),
            header_value_offsets=np.empty(h + 1, np.int64),
            header_value_data=np.empty(hvalue_bytes, np.uint8),
            header_value_valid=np.empty(h, bool),
        )
        headers = [c[name] for name in ("header_offsets", "header_key_offsets", "header_key_data",
                                        "header_value_offsets", "header_value_data", "header_value_valid")]
    else:
        headers = [None] * 6
    ext.columns_v2_fill(data, batches, *(c[name] for name in (
        "offset", "timestamp", "key_offsets", "key_data", "key_valid", "value_offsets", "value_data",
        "value_valid")), *headers)
    if include_headers:
        c["headers_valid"] = np.diff(c["header_offsets"]) > 0
    return c


def _walked(data: Any, u: np.ndarray, starts: list[int], ends: list[int], fields: list[tuple[int, ...]],
            include_headers: bool) -> dict[str, Any]:
    """The run through the pure walk: spans per record, their bytes gathered with numpy/pyarrow."""
    out = SpanColumns()
    try:
        for start, end, f in zip(starts, ends, fields):
            base_offset, base_ts, max_ts, attrs, _, _, count, _ = f
            append_ts = max_ts if attrs & TIMESTAMP_TYPE_MASK else None
            walk(data, start, end, count, COLUMNS, BatchBase(base_offset, base_ts, append_ts, -1, False), out)
    except RecordWalkError:
        raise UsePlainPath from None
    key_len = np.array(out.key_len, np.int64)
    value_len = np.array(out.value_len, np.int64)
    c: dict[str, Any] = dict(offset=np.array(out.offset, np.int64), timestamp=np.array(out.timestamp, np.int64))
    c["key_offsets"], c["key_data"] = _gather(u, data, np.array(out.key_pos, np.int64), key_len)
    c["key_valid"] = key_len >= 0
    c["value_offsets"], c["value_data"] = _gather(u, data, np.array(out.value_pos, np.int64), value_len)
    c["value_valid"] = value_len >= 0
    if include_headers:
        header_count = np.array(out.header_count, np.int64)
        c["header_offsets"] = offsets_from_lengths(header_count)
        c["headers_valid"] = header_count > 0
        hv_len = np.array(out.hvalue_len, np.int64)
        c["header_key_offsets"], c["header_key_data"] = _gather(
            u, data, np.array(out.hkey_pos, np.int64), np.array(out.hkey_len, np.int64)
        )
        c["header_value_offsets"], c["header_value_data"] = _gather(u, data, np.array(out.hvalue_pos, np.int64), hv_len)
        c["header_value_valid"] = hv_len >= 0
    return c


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
    offsets = offsets_from_lengths(lengths)
    total = int(offsets[-1])
    if total == 0:
        return offsets, EMPTY_U8
    take = _arrow_take() if _ARROW_GATHER else False
    if take:
        # The slices and the gaps between them, alternately, are the entries of one Arrow
        # binary array over the buffer (no copy); taking the even entries is one memcpy per
        # slice in C++ -- measured 6-9x faster than any numpy formulation below, for 10-byte
        # keys and 1 KiB values alike.
        pa = import_pyarrow()
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
        itype = np.int32 if len(u) <= INT32_MAX else np.int64
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
    fixed_offsets, fixed_data, _ = binary_from_list(keys)
    return fixed_offsets, fixed_data

