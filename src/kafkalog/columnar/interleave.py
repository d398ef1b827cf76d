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

from collections.abc import Callable, Sequence
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
class Choice:
    """Entry ``i`` of ``first``, or, where ``pick_second[i]``, the next entry of ``second``
    (which holds one entry for each True, in order)."""

    first: Slices
    second: Slices
    pick_second: np.ndarray


@dataclass(frozen=True)
class Packed:
    """Numbers as a piece, each as its bytes in the array's own type (``>i4``: 4 bytes big-endian)."""

    values: np.ndarray


#: One piece of every record: a constant, a binary column, a list of bytes, int64 numbers
#: written in decimal, or numbers as their bytes.
Piece = bytes | Slices | Choice | list | np.ndarray | Packed


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
    return interleave_records(n, pieces)[0]


def interleave_records(n: int, pieces: Sequence[Piece]) -> tuple[bytes | memoryview, np.ndarray]:
    """:func:`interleave`, and where each record's text starts and ends (``n + 1`` offsets)."""
    if n == 0 or not pieces:
        return b"", np.zeros(n + 1, np.int64)
    pieces = [_as_slices(p) if isinstance(p, (list, Packed)) else p for p in pieces]
    for p in pieces:
        size = (len(p.offsets) - 1 if isinstance(p, Slices) else len(p.pick_second) if isinstance(p, Choice)
                else None if isinstance(p, bytes) else len(p))
        if size is not None and size != n:
            raise ValueError(f"a piece has {size} entries, not {n}")
    take = _arrow_take()
    data, offsets = _by_arrow(n, pieces, take) if take else _by_numpy(n, pieces)
    return data, offsets[::len(pieces)] - offsets[0]


def _by_arrow(n: int, pieces: Sequence[Piece], take: Any) -> tuple[memoryview, np.ndarray]:
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
        if isinstance(p, Choice):
            arrays.append(_arrow_binary(pa, p.first))
            arrays.append(_arrow_binary(pa, p.second))
            second = len(p.second.offsets) - 1
            rank = np.cumsum(p.pick_second) - 1
            index[:, j] = np.where(p.pick_second, base + n + rank, rows + base)
            base += n + second
            continue
        if isinstance(p, Slices):
            offsets = np.ascontiguousarray(p.offsets, np.int64)
            arrays.append(_arrow_binary(pa, p))
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
    return memoryview(taken.buffers()[2])[int(offsets[0]):int(offsets[-1])], offsets


def _arrow_binary(pa: Any, p: Slices) -> Any:
    offsets = np.ascontiguousarray(p.offsets, np.int64)
    return pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(p.data))])


def _by_numpy(n: int, pieces: Sequence[Piece]) -> tuple[bytes, np.ndarray]:
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
        if isinstance(p, Choice):
            first, second = np.asarray(p.first.offsets, np.int64), np.asarray(p.second.offsets, np.int64)
            buffers += [np.asarray(p.first.data, np.uint8), np.asarray(p.second.data, np.uint8)]
            rank = np.cumsum(p.pick_second) - 1
            at = np.clip(rank, 0, None)
            other = base + len(p.first.data)
            start = np.where(p.pick_second, other + second[:-1][at] if len(second) > 1 else other, first[:-1] + base)
            length = np.where(p.pick_second, (second[1:] - second[:-1])[at] if len(second) > 1 else 0,
                              first[1:] - first[:-1])
            base = other + len(p.second.data)
            starts.append(start)
            lengths.append(length)
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
        return b"", out
    index = np.repeat(start - out[:-1], length) + np.arange(total, dtype=np.int64)
    return source[index].tobytes(), out


def json_strings(offsets: np.ndarray, data: np.ndarray, valid: np.ndarray,
                 escape: Callable[[bytes], bytes]) -> list[Piece]:
    """A binary column as JSON values, as pieces for :func:`interleave`: ``"<bytes>"``, or
    ``null`` for a null entry. Only the entries holding a byte JSON must escape (``"``, ``\\``,
    below 0x20) go through ``escape`` (bytes -> the quoted JSON string), one call each; the
    others are copied as they are between two quotes."""
    data = np.asarray(data, np.uint8)
    special = np.zeros(len(data) + 1, np.int64)
    np.cumsum((data < 0x20) | (data == 0x22) | (data == 0x5C), out=special[1:])
    plain = valid & (special[offsets[1:]] == special[offsets[:-1]])
    if plain.all():
        return [b'"', Slices(offsets, data), b'"']
    quotes = plain.astype(np.int64)
    quote = Slices(offsets_from_lengths(quotes), np.frombuffer(b'"' * int(quotes.sum()), np.uint8))
    raw = data.tobytes()
    bounds = offsets.tolist()
    others = [escape(raw[bounds[i]:bounds[i + 1]]) if ok else b"null"
              for i, ok in zip(np.flatnonzero(~plain).tolist(), valid[~plain].tolist())]
    replaced = binary_from_list(others)
    return [quote, Choice(Slices(offsets, data), Slices(replaced[0], replaced[1]), ~plain), quote]
