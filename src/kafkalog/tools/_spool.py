"""Reports that can grow with the file, spooled to disk."""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterator
from typing import IO

# ------------------------------------------------------------------------------------------------
# Reports that can grow with the file (one entry per non-consecutive offset, per mismatch)


_PAIR = struct.Struct(">qq")


class _PairSpool:
    """A list of int64 pairs that moves to a temporary file past ``limit`` entries."""

    def __init__(self, limit: int = 1 << 16) -> None:
        self._memory: list[tuple[int, int]] = []
        self._file: IO[bytes] | None = None
        self._spilled = 0
        self._limit = limit

    def append(self, a: int, b: int) -> None:
        self._memory.append((a, b))
        if len(self._memory) >= self._limit:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="kafkalog-dump-")
            self._file.seek(0, os.SEEK_END)
            self._file.write(b"".join(_PAIR.pack(*p) for p in self._memory))
            self._spilled += len(self._memory)
            self._memory.clear()

    def __len__(self) -> int:
        return self._spilled + len(self._memory)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        if self._file is not None:
            self._file.seek(0)
            for _ in range(0, self._spilled, self._limit):
                yield from _PAIR.iter_unpack(self._file.read(self._limit * _PAIR.size))
        yield from self._memory

    def reversed(self) -> Iterator[tuple[int, int]]:
        yield from reversed(self._memory)
        if self._file is not None:
            end = self._spilled
            while end > 0:
                start = max(0, end - self._limit)
                self._file.seek(start * _PAIR.size)
                block = list(_PAIR.iter_unpack(self._file.read((end - start) * _PAIR.size)))
                yield from reversed(block)
                end = start

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
