"""The segments of a partition log, sorted by base offset (Kafka's ``LogSegments``).

Lookups bisect a sorted list of base offsets. Mutations replace the list and the map rather
than editing them in place, so a reader that took a snapshot (``values()``, ``floor``) keeps a
consistent view while the single writer adds or removes segments: one writer, many readers.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from .segment import LogSegment


class LogSegments:
    """Segments keyed by base offset, oldest first."""

    def __init__(self) -> None:
        self._offsets: list[int] = []
        self._by_offset: dict[int, LogSegment] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.values())

    def __contains__(self, base_offset: int) -> bool:
        return base_offset in self._by_offset

    @property
    def is_empty(self) -> bool:
        return not self._offsets

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Add (or replace) the segment for its base offset; return the one it replaced."""
        by_offset = dict(self._by_offset)
        previous = by_offset.get(segment.base_offset)
        by_offset[segment.base_offset] = segment
        offsets = self._offsets if previous is not None else sorted(self._offsets + [segment.base_offset])
        self._offsets, self._by_offset = offsets, by_offset
        return previous

    def remove(self, base_offset: int) -> LogSegment | None:
        by_offset = dict(self._by_offset)
        removed = by_offset.pop(base_offset, None)
        if removed is not None:
            self._offsets = [o for o in self._offsets if o != base_offset]
            self._by_offset = by_offset
        return removed

    def clear(self) -> None:
        self._offsets, self._by_offset = [], {}

    def get(self, base_offset: int) -> LogSegment | None:
        return self._by_offset.get(base_offset)

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """Segments oldest first; with bounds, those whose base offset is in
        ``[floor(from_offset), to_offset)`` (Kafka's ``values(from, to)``)."""
        offsets, by_offset = self._offsets, self._by_offset
        lo = 0
        if from_offset is not None:
            lo = max(0, bisect.bisect_right(offsets, from_offset) - 1)
        hi = len(offsets) if to_offset is None else bisect.bisect_left(offsets, to_offset)
        return [by_offset[o] for o in offsets[lo:hi]]

    def base_offsets(self) -> list[int]:
        return list(self._offsets)

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the greatest base offset <= ``offset``."""
        offsets = self._offsets
        i = bisect.bisect_right(offsets, offset)
        return self._by_offset[offsets[i - 1]] if i else None

    def higher(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        offsets = self._offsets
        i = bisect.bisect_right(offsets, offset)
        return self._by_offset[offsets[i]] if i < len(offsets) else None

    def lower(self, offset: int) -> LogSegment | None:
        """The segment with the greatest base offset < ``offset``."""
        offsets = self._offsets
        i = bisect.bisect_left(offsets, offset)
        return self._by_offset[offsets[i - 1]] if i else None

    @property
    def first(self) -> LogSegment | None:
        return self._by_offset[self._offsets[0]] if self._offsets else None

    @property
    def last(self) -> LogSegment | None:
        """The active segment."""
        return self._by_offset[self._offsets[-1]] if self._offsets else None

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.values())

    def close(self) -> None:
        for segment in self.values():
            segment.close()
