"""What the tasks of a read read: per task, for ``statsPath`` (the tests assert pruning with
it) and the log; :func:`scan_stats` adds them up."""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

from ..durable import write_atomically

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"


class _Stats:
    """What one task read: for ``statsPath`` (tests assert pruning with it) and the log."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.segments: list[str] = []
        self.bytes_read = 0
        self.bytes_fetched = 0  # from a remote filesystem (ranged requests)
        self.records = 0
        self.skipped_batches = 0
        self.skipped_bytes = 0

    def skipped(self, path: str, start: int, end: int, error: Exception) -> None:
        self.skipped_batches += 1
        self.skipped_bytes += end - start
        _log.warning("kafkalog: skipped %d corrupt bytes of %s at position %d (failOnCorruption=false): %s",
                     end - start, path, start, error)

    def write(self) -> None:
        """Write this task's totals as one JSON file under ``statsPath`` (when set)."""
        if not self.path:
            return
        os.makedirs(self.path, exist_ok=True)
        data = json.dumps({
            "segments": self.segments, "bytes_read": self.bytes_read, "bytes_fetched": self.bytes_fetched, "records": self.records,
            "skipped_batches": self.skipped_batches, "skipped_bytes": self.skipped_bytes,
        })
        # Whole or absent: scan_stats may read the directory while other tasks still write.
        write_atomically(os.path.join(self.path, f"{uuid.uuid4().hex}.json"), data.encode())


def scan_stats(stats_path: str | os.PathLike) -> dict[str, Any]:
    """Totals of what the tasks of reads with ``statsPath`` set read: ``segments`` (sorted
    distinct paths), ``segment_opens``, ``bytes_read``, ``bytes_fetched`` (from a remote
    filesystem), ``records``, ``skipped_batches``,
    ``skipped_bytes``. A diagnostic (and the tests' view of pruning); needs a directory the
    executors and the caller share."""
    totals: dict[str, Any] = {"segments": set(), "segment_opens": 0, "bytes_read": 0, "bytes_fetched": 0, "records": 0,
                              "skipped_batches": 0, "skipped_bytes": 0}
    root = Path(stats_path)
    for file in sorted(root.glob("*.json")) if root.is_dir() else []:
        data = json.loads(file.read_text())
        totals["segments"].update(data["segments"])
        totals["segment_opens"] += len(data["segments"])
        for key in ("bytes_read", "bytes_fetched", "records", "skipped_batches", "skipped_bytes"):
            totals[key] += data.get(key, 0)
    totals["segments"] = sorted(totals["segments"])
    return totals
