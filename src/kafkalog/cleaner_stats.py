"""What the cleaner reports and how it paces itself: Kafka's ``CleanerStats`` (with the
per-reason and per-segment counts it logs), the progress callback's argument, and the I/O
``Throttler``."""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from .errors import InvalidConfigError


class Throttler:
    """Keeps the cleaner's I/O under ``bytes_per_second`` (Kafka's ``Throttler``: measure over
    ``check_interval_ms`` windows, sleep off any excess)."""

    def __init__(
        self,
        bytes_per_second: float = math.inf,
        *,
        check_interval_ms: int = 300,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not bytes_per_second > 0:
            raise InvalidConfigError(f"an I/O budget must be positive, not {bytes_per_second} bytes/s")
        self.bytes_per_second = bytes_per_second
        self._interval = check_interval_ms / 1000.0
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = monotonic()
        self._observed = 0
        self.slept_s = 0.0

    def maybe_throttle(self, observed: int) -> float:
        """Count ``observed`` bytes; sleep if the window's rate is over budget. Returns the
        seconds slept."""
        if math.isinf(self.bytes_per_second):
            return 0.0
        with self._lock:
            self._observed += observed
            now = self._monotonic()
            elapsed = now - self._period_start
            if elapsed <= self._interval or self._observed <= 0:
                return 0.0
            slept = 0.0
            if self._observed / elapsed > self.bytes_per_second:
                slept = self._observed / self.bytes_per_second - elapsed
                if slept > 0:
                    self._sleep(slept)
                    self.slept_s += slept
                else:
                    slept = 0.0
            self._period_start = self._monotonic()
            self._observed = 0
            return slept


#: Why records go: an older record of a key mapped later; a tombstone past its horizon (or, for
#: v0/v1, past the segment-time rule); a record without a key; data of an aborted transaction;
#: a transaction marker whose transaction has no data left and whose horizon has passed.
REASONS = ("superseded", "tombstone", "keyless", "aborted", "marker")


@dataclass
class SegmentCleanStats:
    """What a pass did to one source segment."""

    base_offset: int
    size: int
    records_read: int = 0
    records_kept: int = 0
    bytes_kept: int = 0
    removed: dict[str, int] = field(default_factory=dict)


@dataclass
class CleanerStats:
    """What one cleaning of one log did (Kafka's ``CleanerStats``, plus counts it logs).

    ``removed`` counts records removed by reason (:data:`REASONS`), ``segments`` has the same per
    source segment, and ``removed_by_key`` (only when asked for: it grows with the keys) the
    superseded and expired records per key. With ``dry_run`` nothing was written.
    """

    log: str = ""
    dry_run: bool = False
    first_dirty_offset: int = -1
    end_offset: int = -1
    rounds: int = 0
    map_bytes_read: int = 0
    map_records_read: int = 0
    map_entries: int = 0
    map_slots: int = 0
    buffer_utilization: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    keyless_records: int = 0
    tombstones_removed: int = 0
    batches_rewritten: int = 0
    empty_batches: int = 0
    horizons_set: int = 0
    segments_cleaned: int = 0
    groups: int = 0
    throttled_s: float = 0.0
    map_s: float = 0.0
    elapsed_s: float = 0.0
    removed: dict[str, int] = field(default_factory=dict)
    segments: list[SegmentCleanStats] = field(default_factory=list)
    removed_by_key: dict[bytes, int] | None = None

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_written

    def add(self, other: CleanerStats) -> None:
        """Fold another round's figures into these."""
        for name in (
            "map_bytes_read", "map_records_read", "bytes_read", "bytes_written", "records_read", "records_written",
            "keyless_records", "tombstones_removed", "batches_rewritten", "empty_batches", "horizons_set",
            "segments_cleaned", "groups", "rounds", "throttled_s", "map_s", "elapsed_s",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for reason, n in other.removed.items():
            self.removed[reason] = self.removed.get(reason, 0) + n
        self.segments.extend(other.segments)
        if other.removed_by_key is not None:
            merged = Counter(self.removed_by_key or {})
            merged.update(other.removed_by_key)
            self.removed_by_key = dict(merged)
        self.end_offset = other.end_offset
        self.map_entries = max(self.map_entries, other.map_entries)
        self.map_slots = other.map_slots
        self.buffer_utilization = max(self.buffer_utilization, other.buffer_utilization)

    def to_dict(self) -> dict:
        """JSON-safe (keys of ``removed_by_key`` as hex)."""
        by_key = self.removed_by_key
        self.removed_by_key = None
        try:
            d = asdict(self)
        finally:
            self.removed_by_key = by_key
        d["records_removed"] = self.records_removed
        d["removed_by_key"] = None if by_key is None else {k.hex(): n for k, n in by_key.items()}
        return d

    def summary(self) -> str:
        """Kafka's cleaner log lines, in short."""
        mb = 1024 * 1024
        el = max(self.elapsed_s, 1e-9)
        mapping = max(self.map_s, 1e-9)
        cleaning = max(self.elapsed_s - self.map_s, 1e-9)
        return (
            f"Log cleaner: cleaned log {self.log} (dirty section = [{self.first_dirty_offset}, {self.end_offset}))\n"
            f"\t{self.bytes_read / mb:,.1f} MB of log processed in {el:,.1f} seconds ({self.bytes_read / mb / el:,.1f} MB/sec).\n"
            f"\tIndexed {self.map_bytes_read / mb:,.1f} MB in {mapping:.1f} seconds ({self.map_bytes_read / mb / mapping:,.1f} MB/sec, "
            f"{100 * self.map_s / el:.1f}% of total time)\n"
            f"\tBuffer utilization: {100 * self.buffer_utilization:.1f}%\n"
            f"\tCleaned {self.bytes_read / mb:,.1f} MB in {cleaning:.1f} seconds ({self.bytes_read / mb / cleaning:,.1f} MB/sec)\n"
            f"\tStart size: {self.bytes_read / mb:,.1f} MB ({self.records_read:,d} messages)\n"
            f"\tEnd size: {self.bytes_written / mb:,.1f} MB ({self.records_written:,d} messages)\n"
            f"\t{100 * (1 - self.bytes_written / max(self.bytes_read, 1)):.1f}% size reduction "
            f"({100 * (1 - self.records_written / max(self.records_read, 1)):.1f}% fewer messages)"
        )


@dataclass(frozen=True)
class CleanerProgress:
    """Where a cleaning stands: ``phase`` is ``"map"`` (building the offset map) or ``"clean"``
    (rewriting); ``done`` of ``total`` bytes of that phase."""

    log: str
    phase: str
    done: int
    total: int
