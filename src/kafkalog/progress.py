"""Progress reported to a caller: the operator capabilities (verify, salvage, index rebuilding,
conversion) take a ``progress`` callback told how many more bytes were processed; drawing it
(a bar on a terminal) is the caller's business."""

from __future__ import annotations

from collections.abc import Callable

#: How many bytes a progress callback is told about at a time (at most; less at the end).
PROGRESS_STEP = 1 << 20

#: A callable told how many more bytes were processed (for progress bars).
Progress = Callable[[int], None]


class ProgressTicker:
    """Hands byte counts to a progress callback in steps of :data:`PROGRESS_STEP` (call
    :meth:`flush` at the end for the rest)."""

    __slots__ = ("_cb", "_pending")

    def __init__(self, cb: Progress | None) -> None:
        self._cb = cb
        self._pending = 0

    def add(self, n: int) -> None:
        if self._cb is not None:
            self._pending += n
            if self._pending >= PROGRESS_STEP:
                self._cb(self._pending)
                self._pending = 0

    def flush(self) -> None:
        if self._cb is not None and self._pending:
            self._cb(self._pending)
            self._pending = 0
