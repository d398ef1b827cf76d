"""Progress reported to a caller: the operator capabilities (verify, salvage, index rebuilding,
conversion) take a ``progress`` callback told how many more bytes were processed; drawing it
(a bar on a terminal) is the caller's business, and :class:`RateMeter` gives it the rate and the
time left."""

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


class RateMeter:
    """How fast work goes and when it ends, as ``pv`` and tqdm show it: the rate (units per
    second, an exponential moving average of the rate between updates, so a slow start or a
    burst fades) and the time left at that rate when the total is known.

    Time comes from ``clock`` (seconds, monotonic; injected so tests need no wall clock). Not
    thread-safe: one caller updates it.
    """

    __slots__ = ("_clock", "_smoothing", "_last_time", "_last_done", "done", "total", "rate")

    def __init__(self, total: int | None, *, clock: Callable[[], float], smoothing: float = 0.3) -> None:
        """Args:
            total: the units the work has, or None when not known (no time left then).
            clock: the current time in seconds (``time.monotonic``).
            smoothing: the weight of the newest rate in the average (tqdm's default, 0.3);
                1 shows only the newest, values near 0 the average since the start.
        """
        self._clock = clock
        self._smoothing = smoothing
        self._last_time = clock()
        self._last_done = 0
        self.done = 0
        self.total = total
        #: Units per second, or None before time has passed.
        self.rate: float | None = None

    def add(self, n: int) -> None:
        """Count ``n`` more units done; the rate moves when time has passed since the last move."""
        self.done += n
        now = self._clock()
        elapsed = now - self._last_time
        if elapsed <= 0:
            return
        recent = (self.done - self._last_done) / elapsed
        self.rate = recent if self.rate is None else self._smoothing * recent + (1 - self._smoothing) * self.rate
        self._last_time, self._last_done = now, self.done

    @property
    def seconds_left(self) -> float | None:
        """The time left at the current rate, or None when the total or the rate is not known
        (or the rate is zero)."""
        if self.total is None or not self.rate:
            return None
        return max(0, self.total - self.done) / self.rate
