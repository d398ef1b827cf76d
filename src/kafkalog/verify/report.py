"""What ``verify`` reports: problems, segment, partition and whole-run reports."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)

#: Problems of one kind kept per file; the rest are counted in one last problem of that kind.
MAX_PROBLEMS_PER_KIND = 20
#: The log directory's offset checkpoint files (``verify`` compares them with each partition).
OFFSET_CHECKPOINTS = (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)


# ------------------------------------------------------------------------------------------------
# Reports


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or worth a warning) in one file.

    Attributes:
        path: the file the problem is in.
        position: a byte position in that file; for index files the entry number (the message
            says "entry N"); None when the problem has no position.
        kind: a short stable slug (see the module docstring and docs/cli.md).
        message: one human line.
        severity: "error" or "warning".
    """

    path: str
    position: int | None
    kind: str
    message: str
    severity: str = "error"
    #: True for the line that counts the problems of its kind left out of the listing.
    summary: bool = False

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        where = self.path if self.position is None else f"{self.path}@{self.position}"
        return f"{self.severity}: {where}: {self.kind}: {self.message}"


@dataclass
class SegmentReport:
    """What :func:`verify_segment` found in one ``.log`` and its indexes.

    ``records`` is counted from batch headers (the v2 count; one per plain v0/v1 message; the
    inner messages of a v0/v1 compressed wrapper, which must be decompressed to count them),
    ``tombstones`` only with ``deep``. ``valid_bytes`` is where Kafka's recovery would truncate
    (the end of the last batch before the first corrupt, partial or backwards one); the counts
    and ranges cover those batches. ``min_timestamp`` is the smallest first-record timestamp of
    the batch headers (exact over every record with ``deep``); ``max_timestamp`` the largest
    batch max timestamp; both ignore -1 (no timestamp).
    """

    path: str
    base_offset: int
    size: int
    valid_bytes: int
    batches: int
    records: int
    first_offset: int | None
    last_offset: int | None
    min_timestamp: int | None
    max_timestamp: int | None
    magics: tuple[int, ...]
    codecs: tuple[str, ...]
    problems: list[Problem]
    deep: bool = False
    tombstones: int | None = None
    control_batches: int = 0
    transactional_batches: int = 0
    producer_ids: tuple[int, ...] = ()
    index_entries: int | None = None
    time_index_entries: int | None = None
    aborted_txns: int | None = None
    #: How many errors and warnings were found: ``problems`` lists at most
    #: :data:`MAX_PROBLEMS_PER_KIND` of each kind per file. None: count ``problems``.
    error_count: int | None = None
    warning_count: int | None = None

    @property
    def ok(self) -> bool:
        """No error-severity problem (warnings allowed)."""
        return not any(p.severity == "error" for p in self.problems)

    @property
    def errors(self) -> int:
        """The errors found (all of them, listed or not)."""
        return _count(self.error_count, self.problems, "error")

    @property
    def warnings(self) -> int:
        """The warnings found (all of them, listed or not)."""
        return _count(self.warning_count, self.problems, "warning")

    @property
    def next_offset(self) -> int:
        """The offset after the last valid batch (the base offset when there is none)."""
        return self.base_offset if self.last_offset is None else self.last_offset + 1

    def to_dict(self) -> dict:
        """A JSON-safe dict of every field, ``ok`` included."""
        out = dataclasses.asdict(self)
        out["magics"] = list(self.magics)
        out["codecs"] = list(self.codecs)
        out["producer_ids"] = list(self.producer_ids)
        out["ok"] = self.ok
        out["errors"] = self.errors
        out["warnings"] = self.warnings
        return out


@dataclass
class PartitionReport:
    """A partition directory's offsets as the verification found them.

    ``log_start_offset`` is the larger of the first segment's base offset and the checkpointed
    log start offset (when the log directory's checkpoint names the partition);
    ``log_end_offset`` is the offset after the last valid batch.
    """

    path: str
    topic: str
    partition: int
    segments: int
    log_start_offset: int
    log_end_offset: int
    size: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class VerifyReport:
    """What :func:`verify_path` found.

    Attributes:
        path: what was verified.
        segments: one report per ``.log`` verified, partition by partition, oldest first.
        other: problems outside segments (checkpoints, snapshots, leftovers, segment overlap).
        partitions: the partition directories verified.
    """

    path: str = ""
    segments: list[SegmentReport] = field(default_factory=list)
    other: list[Problem] = field(default_factory=list)
    partitions: list[PartitionReport] = field(default_factory=list)
    #: How many errors and warnings ``other`` stands for (None: count it).
    other_error_count: int | None = None
    other_warning_count: int | None = None

    @property
    def problems(self) -> list[Problem]:
        """Every problem, segments' first."""
        return [p for s in self.segments for p in s.problems] + list(self.other)

    @property
    def ok(self) -> bool:
        """No error-severity problem anywhere."""
        return all(s.ok for s in self.segments) and not any(p.severity == "error" for p in self.other)

    @property
    def errors(self) -> int:
        """The errors found: true counts, not the length of the capped listing."""
        return sum(s.errors for s in self.segments) + _count(self.other_error_count, self.other, "error")

    @property
    def warnings(self) -> int:
        """The warnings found: true counts, not the length of the capped listing."""
        return sum(s.warnings for s in self.segments) + _count(self.other_warning_count, self.other, "warning")

    @property
    def capped(self) -> bool:
        """Whether the listing leaves problems out (more than :data:`MAX_PROBLEMS_PER_KIND` of a kind in a file)."""
        listed = sum(1 for p in self.problems if p.severity in ("error", "warning") and not p.summary)
        return listed < self.errors + self.warnings

    def to_dict(self) -> dict:
        """A JSON-safe dict: ``path, ok, errors, warnings, segments, partitions, other``."""
        return {
            "path": self.path,
            "ok": self.ok,
            "errors": self.errors,
            "warnings": self.warnings,
            "capped": self.capped,
            "segments": [s.to_dict() for s in self.segments],
            "partitions": [p.to_dict() for p in self.partitions],
            "other": [p.to_dict() for p in self.other],
        }


def _count(counted: int | None, problems: list[Problem], severity: str) -> int:
    if counted is not None:
        return counted
    return sum(1 for p in problems if p.severity == severity and not p.summary)


class ProblemList:
    """Problems of one file, at most :data:`MAX_PROBLEMS_PER_KIND` per kind listed; ``errors``
    and ``warnings`` count them all."""

    def __init__(self, sink: list[Problem]) -> None:
        self._sink = sink
        self._counts: dict[tuple[str, str], int] = {}
        self.errors = 0
        self.warnings = 0

    def add(self, path: str, position: int | None, kind: str, message: str, severity: str = "error") -> None:
        if severity == "error":
            self.errors += 1
        elif severity == "warning":
            self.warnings += 1
        key = (path, kind)
        n = self._counts.get(key, 0) + 1
        self._counts[key] = n
        if n <= MAX_PROBLEMS_PER_KIND:
            self._sink.append(Problem(path, position, kind, message, severity))

    def close(self) -> None:
        """Add one problem per (file, kind) counting those not kept."""
        for (path, kind), n in self._counts.items():
            extra = n - MAX_PROBLEMS_PER_KIND
            if extra > 0:
                severity = next(p.severity for p in self._sink if p.path == path and p.kind == kind)
                self._sink.append(
                    Problem(path, None, kind, f"{extra} more problems of this kind not listed", severity, summary=True)
                )
        self._counts.clear()
