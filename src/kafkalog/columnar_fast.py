"""The numpy fast path of columnar decoding: a run of v2 batches decoded field by field.

The payloads of consecutive non-control v2 batches lie in one buffer (joined, or in place in a
``MemoryRecords``). A tight Python loop walks only the record-length varints (one ``append``
per record; across many small batches, one numpy step per record index instead); everything
else is decoded with numpy over all records at once, field by field (attributes, timestamp
delta, offset delta, key, value, header count, then headers level by level), and keys and
values are gathered into their data buffers by pyarrow's ``take`` over the buffer (when
pyarrow is installed; else with numpy: one byte mask over the buffer for short values, one
C-level copy per value for long ones).

Every check of the Record iterator (``DefaultRecordBatch.records``) is made too; when one
fails, :class:`UsePlainPath` is raised and the caller decodes the run again through the Record
iterator, which raises its exact error. Nothing is preallocated from a count field alone:
headers are parsed only after ``2 * count`` is checked against the bytes left in the record,
and every array grows with records actually read.
"""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from .columnar_arrow import import_pyarrow
from .columnar_columns import (
    EMPTY_U8,
    RecordColumns,
    binary_from_list,
    offsets_from_lengths,
)
from .errors import InvalidRecordError
from .record import TIMESTAMP_TYPE_MASK
from .record_walk import MIN_RECORD_BODY
from .varint import ZIGZAG_TABLE, decode_varint

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
_INT32_MAX = 0x7FFFFFFF
_U64 = np.uint64
# Keys, values and headers are gathered by pyarrow's take when pyarrow is installed (see
# _gather); False forces the numpy formulation (the tests run both).
_ARROW_GATHER = True
_TAKE: Any = None  # pyarrow.compute.take, False without pyarrow; set on first use


class UsePlainPath(Exception):
    """The fast path met something the Record iterator may reject: decode through it instead."""


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
        UsePlainPath: any check of ``record_walk.decode_records`` fails somewhere in the run.
        IndexError: a position left the buffer (damage; treated as UsePlainPath by the caller).
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
    if (length < MIN_RECORD_BODY).any() or (rstart + size + length != rend).any():
        raise UsePlainPath
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
        raise UsePlainPath
    with_headers = np.flatnonzero(header_count)
    if len(with_headers) == 0:
        if (p != rend).any():
            raise UsePlainPath
        table = None
    else:
        without = header_count == 0
        if (p[without] != rend[without]).any():
            raise UsePlainPath
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
    columns["header_offsets"] = offsets_from_lengths(header_count)
    columns["headers_valid"] = header_count > 0
    if table is None:
        columns["header_key_offsets"] = columns["header_value_offsets"] = np.zeros(1, np.int64)
        columns["header_key_data"] = columns["header_value_data"] = EMPTY_U8
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
    zz = ZIGZAG_TABLE
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
                raise UsePlainPath
    except (IndexError, InvalidRecordError):
        raise UsePlainPath from None
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
        raise UsePlainPath
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
                raise UsePlainPath
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
        raise UsePlainPath
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
            raise UsePlainPath
        value_len, value_start, pos = _sized(u, key_start + key_len, rend)
        parts.append((rec, key_start, key_len, value_start, value_len))
        left = left - 1
        done = left == 0
        if done.any():
            if (pos[done] != rend[done]).any():
                raise UsePlainPath
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
                    raise UsePlainPath
                key_start = p
                p += key_len
                value_len, p = decode_varint(data, p)
                value_start = p
                if value_len >= 0:
                    if value_len > end - p:
                        raise UsePlainPath
                    p += value_len
                elif value_len != -1:
                    raise UsePlainPath
                recs.append(r)
                key_starts.append(key_start)
                key_lens.append(key_len)
                value_starts.append(value_start)
                value_lens.append(value_len)
            if p != end:
                raise UsePlainPath
    except InvalidRecordError:
        raise UsePlainPath from None
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
    fixed_offsets, fixed_data, _ = binary_from_list(keys)
    return fixed_offsets, fixed_data

