"""Records rendered as text without a Python object per record: :func:`interleave` writes, for
each record in turn, a sequence of pieces -- constants, the record's entry of a binary column
(a key, a value), a number in decimal or as its bytes -- into one buffer. What a format string such as kcat's
``%o %k %s\\n`` becomes over record columns (``kafkalog consume``).

With pyarrow (imported on first use) each piece becomes one Arrow binary array (a constant:
one entry; numbers cast to text in C), the arrays are joined and one ``take`` with the indices
of the pieces, record by record, copies every entry in order: one memcpy per piece in C++.
Without pyarrow, numpy gathers the bytes through an index per output byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .columns import binary_from_list, offsets_from_lengths
from .fast import _arrow_take


@dataclass(frozen=True)
class Slices:
    """A binary column as a piece: entry ``i`` is ``data[offsets[i]:offsets[i + 1]]`` (Arrow's
    layout, offsets from 0); ``empty``, when given, stands for every zero-length entry."""

    offsets: np.ndarray
    data: np.ndarray
    empty: bytes | None = None


@dataclass(frozen=True)
class Packed:
    """Numbers as a piece, each as its bytes in the array's own type (``>i4``: 4 bytes big-endian)."""

    values: np.ndarray


#: One piece of every record: a constant, a binary column, a list of bytes, int64 numbers
#: written in decimal, or numbers as their bytes.
Piece = bytes | Slices | list | np.ndarray | Packed


def _as_slices(p: list | Packed) -> Slices:
    if isinstance(p, Packed):
        data = np.ascontiguousarray(p.values).view(np.uint8)
        width = p.values.dtype.itemsize
        return Slices(np.arange(len(p.values) + 1, dtype=np.int64) * width, data)
    offsets, data, _ = binary_from_list(p)
    return Slices(offsets, data)


def interleave(n: int, pieces: Sequence[Piece]) -> bytes | memoryview:
    """For each of ``n`` records in turn, its entry of every piece, concatenated.

    Raises:
        ValueError: a column piece without ``n`` entries.
    """
    if n == 0 or not pieces:
        return b""
    pieces = [_as_slices(p) if isinstance(p, (list, Packed)) else p for p in pieces]
    for p in pieces:
        size = len(p.offsets) - 1 if isinstance(p, Slices) else None if isinstance(p, bytes) else len(p)
        if size is not None and size != n:
            raise ValueError(f"a piece has {size} entries, not {n}")
    take = _arrow_take()
    if take:
        return _by_arrow(n, pieces, take)
    return _by_numpy(n, pieces)


def _by_arrow(n: int, pieces: Sequence[Piece], take: Any) -> memoryview:
    import pyarrow as pa

    arrays, index = [], np.empty((n, len(pieces)), np.int64)
    base = 0
    rows = np.arange(n, dtype=np.int64)
    for j, p in enumerate(pieces):
        if isinstance(p, bytes):
            arrays.append(pa.array([p], pa.large_binary()))
            index[:, j] = base
            base += 1
            continue
        if isinstance(p, Slices):
            offsets = np.ascontiguousarray(p.offsets, np.int64)
            arrays.append(pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets),
                                                                       pa.py_buffer(np.ascontiguousarray(p.data))]))
            column = rows + base
            base += n
            if p.empty is not None:
                arrays.append(pa.array([p.empty], pa.large_binary()))
                column = np.where(offsets[1:] == offsets[:-1], base, column)
                base += 1
            index[:, j] = column
            continue
        text = pa.array(np.ascontiguousarray(p, np.int64)).cast(pa.large_string()).view(pa.large_binary())
        arrays.append(text)
        index[:, j] = rows + base
        base += n
    taken = take(pa.concat_arrays(arrays), pa.array(index.reshape(-1)))
    offsets = np.frombuffer(taken.buffers()[1], np.int64, count=len(taken) + 1, offset=taken.offset * 8)
    return memoryview(taken.buffers()[2])[int(offsets[0]):int(offsets[-1])]


def _by_numpy(n: int, pieces: Sequence[Piece]) -> bytes:
    buffers, starts, lengths = [], [], []
    base = 0
    for p in pieces:
        if isinstance(p, np.ndarray):
            offsets, data, _ = binary_from_list(list(map(b"%d".__mod__, p.tolist())))
            p = Slices(offsets, data)
        if isinstance(p, bytes):
            buffers.append(np.frombuffer(p, np.uint8))
            starts.append(np.full(n, base, np.int64))
            lengths.append(np.full(n, len(p), np.int64))
            base += len(p)
            continue
        offsets = np.asarray(p.offsets, np.int64)
        buffers.append(np.asarray(p.data, np.uint8))
        start, length = offsets[:-1] + base, offsets[1:] - offsets[:-1]
        base += len(p.data)
        if p.empty is not None:
            buffers.append(np.frombuffer(p.empty, np.uint8))
            start, length = np.where(length == 0, base, start), np.where(length == 0, len(p.empty), length)
            base += len(p.empty)
        starts.append(start)
        lengths.append(length)
    source = np.concatenate(buffers)
    start = np.stack(starts, axis=1).reshape(-1)
    length = np.stack(lengths, axis=1).reshape(-1)
    out = offsets_from_lengths(length)
    total = int(out[-1])
    if total == 0:
        return b""
    index = np.repeat(start - out[:-1], length) + np.arange(total, dtype=np.int64)
    return source[index].tobytes()
