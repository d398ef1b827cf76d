"""The progress line the long-running tools draw on stderr while they work, as ``pv`` and
tqdm users know it: ``verify [#######.......]  25.0%  1.0 GB/4.0 GB  52.3 MB/s  ETA 0:57``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import IO

from ..progress import RateMeter

#: The least time between two redraws (seconds): a terminal redraw costs more than a batch.
_REDRAW_EVERY = 0.1


class _ProgressBar:
    """A callable taking byte counts (the library's ``progress`` callbacks) that redraws one
    line on ``stream`` -- the bar, the percentage, the bytes done of the total, the rate and
    the time left -- at most ten times a second, only when ``stream`` is a terminal (in scripts
    stderr stays quiet). A ``total`` of None (not known) shows the bytes and the rate only.
    Cleared by :meth:`close`. Time comes from ``clock`` (default ``time.monotonic``)."""

    _WIDTH = 30

    def __init__(
        self, stream: IO[str], total: int | None, label: str, *, clock: Callable[[], float] | None = None
    ) -> None:
        isatty = getattr(stream, "isatty", None)
        self._on = (total is None or total > 0) and callable(isatty) and bool(isatty())
        self._stream = stream
        self._label = label
        self._clock = clock or time.monotonic
        self._meter = RateMeter(total, clock=self._clock)
        self._last_draw = float("-inf")  # the first call draws at once: something shows
        self._drawn = False
        self._shown = 0  # the length of the line on the terminal now

    def __call__(self, n: int) -> None:
        if not self._on:
            return
        self._meter.add(n)
        now = self._clock()
        if now - self._last_draw >= _REDRAW_EVERY:
            self._last_draw = now
            self._draw()

    def line(self) -> str:
        """The progress line as it is drawn now."""
        m = self._meter
        rate = "--" if m.rate is None else f"{_human(m.rate)}/s"
        if m.total is None:
            return f"{self._label}  {_human(m.done)}  {rate}"
        frac = min(1.0, m.done / m.total)
        filled = int(frac * self._WIDTH)
        bar = "#" * filled + "." * (self._WIDTH - filled)
        left = m.seconds_left
        eta = "--:--" if left is None else _duration(left)
        return f"{self._label} [{bar}] {frac * 100:5.1f}%  {_human(m.done)}/{_human(m.total)}  {rate}  ETA {eta}"

    def _draw(self) -> None:
        line = self.line()
        # A shorter line than the last (3.2 GB -> 999.9 MB) is padded over its tail, which would stay.
        self._stream.write("\r" + line + " " * (self._shown - len(line)))
        self._stream.flush()
        self._shown = len(line)
        self._drawn = True

    def close(self) -> None:
        """Blank the line and put the cursor back at its start."""
        if self._drawn:
            self._stream.write("\r" + " " * self._shown + "\r")
            self._stream.flush()
            self._drawn = False
            self._shown = 0


def _human(n: float) -> str:
    """A byte count (or rate) in B, KB, MB or GB (decimal units, as ``pv`` and tqdm show them)."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{round(n)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{round(n)} B"  # pragma: no cover


def _duration(seconds: float) -> str:
    """A time left as ``M:SS``, or ``H:MM:SS`` from an hour on (rounded up to whole seconds)."""
    s = int(-(-seconds // 1))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
