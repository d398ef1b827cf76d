"""The progress line the long-running tools draw on stderr while they read."""

from __future__ import annotations

import time
from typing import IO


class _ProgressBar:
    """``label [#####.....]  45%  120.0/270.0 MB`` redrawn on stderr at most ten times a
    second, only when stderr is a terminal; a callable taking byte counts (the library's
    ``progress`` callbacks). Cleared by :meth:`close`."""

    _WIDTH = 30

    def __init__(self, stream: IO[str], total: int, label: str) -> None:
        isatty = getattr(stream, "isatty", None)
        self._on = total > 0 and callable(isatty) and bool(isatty())
        self._stream = stream
        self._total = total
        self._label = label
        self._done = 0
        self._last = 0.0
        self._drawn = False
        self._shown = 0  # the length of the line on the terminal now

    def __call__(self, n: int) -> None:
        self._done += n
        if not self._on:
            return
        now = time.monotonic()
        if now - self._last >= 0.1:
            self._last = now
            self._draw()

    def _draw(self) -> None:
        frac = min(1.0, self._done / self._total)
        filled = int(frac * self._WIDTH)
        bar = "#" * filled + "." * (self._WIDTH - filled)
        line = f"{self._label} [{bar}] {frac * 100:5.1f}%  {_human(self._done)}/{_human(self._total)}"
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


def _human(n: int) -> str:
    """A byte count in B, KB, MB or GB (decimal units)."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"  # pragma: no cover
