"""A read-only fsck of Kafka log files, partition directories and log directories.

:func:`verify_segment` checks one ``.log`` and its ``.index``, ``.timeindex`` and ``.txnindex``;
:func:`verify_path` checks a file, a partition directory (its segments in order, producer
snapshots, ``leader-epoch-checkpoint``, ``partition.metadata``, leftover files) or a log
directory (every partition directory in it and its offset checkpoint files). Nothing is ever
created, modified or truncated, and no lock is taken: a broker may be running.

What is checked, and the problem ``kind`` reported (docs/cli.md lists them all):

| what | kind |
|---|---|
| every batch's CRC | ``crc`` |
| framing and header (size, magic, counts, codec) | ``corrupt-batch`` |
| a partial batch at the end (a torn write) | ``truncated`` |
| zero bytes after the last batch (preallocated space) | ``zero-tail`` (warning) |
| offsets increase, from the segment's base offset on, within 32 bits of it | ``offsets-not-monotonic``, ``offset-below-base``, ``offset-overflow`` |
| records decode (``deep``; always for v0/v1 compressed wrappers, whose count needs it) | ``invalid-record`` |
| each offset index entry names a batch start and the last offset of the append there | ``index-mismatch``, ``index-not-monotonic``, ``index-corrupt``, ``index-missing`` (warning), ``index-preallocated`` (warning) |
| time index entries increase and equal the largest timestamp so far | ``timeindex-mismatch``, ``timeindex-not-monotonic``, ``timeindex-corrupt``, ``timeindex-missing`` (warning), ``timeindex-preallocated`` (warning) |
| ``.txnindex`` against the ABORT markers | ``txnindex-mismatch``, ``txnindex-corrupt`` |
| segments do not overlap | ``segment-overlap`` |
| producer snapshots | ``snapshot-crc``, ``snapshot-corrupt``, ``snapshot-beyond-log-end`` (warning) |
| checkpoint and metadata files parse, and agree with the log | ``checkpoint-parse``, ``checkpoint-inconsistent``, ``leader-epoch-mismatch`` (warning) |
| ``.cleaned``/``.swap``/``.deleted``/``.tmp`` files, ``-delete`` directories | ``leftover-file`` (warning) |
| index files without a ``.log`` | ``orphan-index`` (warning) |
| a file that cannot be read | ``unreadable`` |

The index rules are Kafka's (``LogSegment.append``): an offset index entry ``(O, P)`` is written
at the start ``P`` of an append with the append's last offset ``O``, so ``P`` must start a batch
and ``O`` must be the last offset of a batch from ``P`` up to the next entry (one batch per
append on a leader, several on a follower or in a cleaned segment). A time index entry
``(T, O)`` holds the largest batch max timestamp so far, ``T``, and the last offset of the
(first) batch that carried it. The spacing (``index.interval.bytes``) is a topic setting the
files do not record, so a sparse index is never reported as incomplete.

Memory stays flat: batches are read in 1 MiB chunks, index entries through their memory maps,
and at most :data:`MAX_PROBLEMS_PER_KIND` problems of one kind are kept per file (then one
line counts the rest). Thread-safety: each call works on its own state.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
)
from .compression import Compression
from .config import LogConfig
from .errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    KafkalogError,
    TruncatedRecordError,
)
from .file_records import FileRecords
from .filenames import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
)
from .index import AbortedTxn, OffsetIndex, TimeIndex
from .producer_state import decode_snapshot
from .record import LOG_OVERHEAD, MAGIC_V2, ControlRecordType, RecordBatch, TimestampType
from .recordbatch import RECORD_BATCH_OVERHEAD
from .records import MIN_ENTRY_SIZE_FIELD
from .retention import RetentionPlan, plan_retention

__all__ = [
    "Problem",
    "SegmentReport",
    "PartitionReport",
    "VerifyReport",
    "verify_segment",
    "verify_path",
    "TransactionTracker",
    "TxnEnd",
    "next_valid_batch",
    "segment_logs",
    "find_partition_dirs",
    "Progress",
    "MAX_PROBLEMS_PER_KIND",
    "total_log_bytes",
    "ProgressTicker",
    "RetentionSegment",
    "OfflineRetention",
    "plan_partition_retention",
    "all_zero",
]

#: Problems of one kind kept per file; the rest are counted in one last problem of that kind.
MAX_PROBLEMS_PER_KIND = 20
#: How many bytes a progress callback is told about at a time (at most; less at the end).
PROGRESS_STEP = 1 << 20
#: Largest batch a resync after corruption accepts as a candidate.
DEFAULT_MAX_RESYNC_BATCH = 64 << 20

#: A callable told how many more bytes were processed (for progress bars).
Progress = Callable[[int], None]

_INT32_MAX = 2**31 - 1
_CHUNK = 1 << 20
_OFFSET_CHECKPOINTS = (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)
_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)$")
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
# Kafka renames a partition directory <topic>-<partition>.<uuid>-delete|-future|-stray.
_SPECIAL_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)\.[0-9a-f]{32}-(?P<kind>delete|future|stray)$")


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

    @property
    def ok(self) -> bool:
        """No error-severity problem (warnings allowed)."""
        return not any(p.severity == "error" for p in self.problems)

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
        return sum(1 for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for p in self.problems if p.severity == "warning")

    def to_dict(self) -> dict:
        """A JSON-safe dict: ``path, ok, errors, warnings, segments, partitions, other``."""
        return {
            "path": self.path,
            "ok": self.ok,
            "errors": self.errors,
            "warnings": self.warnings,
            "segments": [s.to_dict() for s in self.segments],
            "partitions": [p.to_dict() for p in self.partitions],
            "other": [p.to_dict() for p in self.other],
        }


class _Problems:
    """Problems of one file, at most :data:`MAX_PROBLEMS_PER_KIND` per kind."""

    def __init__(self, sink: list[Problem]) -> None:
        self._sink = sink
        self._counts: dict[tuple[str, str], int] = {}

    def add(self, path: str, position: int | None, kind: str, message: str, severity: str = "error") -> None:
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
                self._sink.append(Problem(path, None, kind, f"{extra} more problems of this kind not listed", severity))
        self._counts.clear()


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


# ------------------------------------------------------------------------------------------------
# Resynchronising after corruption


# A plausible entry start: a non-negative offset, a size field that is non-negative and not
# below 14 (the smallest v0 message), and either magic 2 with the high byte of the attributes 0
# and a non-negative lastOffsetDelta, or magic 0/1 with only attribute bits 0-3 set.
_CANDIDATE = re.compile(
    rb"(?=[\x00-\x7f].{7}(?!\x00\x00\x00[\x00-\x0d])[\x00-\x7f].{7}(?:\x02.{4}\x00.[\x00-\x7f]|[\x00\x01][\x00-\x0f]))",
    re.DOTALL,
)
#: Bytes a candidate's pattern looks at (up to the high byte of a v2 lastOffsetDelta); every
#: real entry is longer (26 bytes at least).
_CANDIDATE_SPAN = 24
# A run of one repeated byte. A candidate inside it would have an offset like 0x0101010101010101
# (no log gets there) or, for zeros, a size of 0: candidates starting in a run are skipped, and
# inside a run of zeros every candidate whose size field lies in it.
_RUN = re.compile(rb"(.)\1{63,}", re.DOTALL)
_OFFSET_SIZE = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
# partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp,
# producerId, producerEpoch, baseSequence, recordCount: bytes 12..60 of a v2 batch.
_V2_HEADER = struct.Struct(">ibIhiqqqhii")
assert _V2_HEADER.size == 49
_V2_OVERHEAD = RECORD_BATCH_OVERHEAD


def _plausible_batch(
    fr: FileRecords, pos: int, head: bytes, end: int, min_offset: int | None, max_offset: int | None, max_size: int
) -> RecordBatch | None:
    """The valid batch starting at ``pos`` (whose first bytes are ``head``), or None.

    Header fields are checked before the CRC, so that bytes which only look like a batch at
    the framing level rarely cost a CRC over their declared size."""
    if len(head) < _V2_OVERHEAD:
        head = fr.read(pos - fr.start, _V2_OVERHEAD)
        if len(head) < MIN_ENTRY_SIZE_FIELD + LOG_OVERHEAD:
            return None
    offset, size = _OFFSET_SIZE.unpack_from(head, 0)
    magic = head[16]
    total = size + LOG_OVERHEAD
    if size < MIN_ENTRY_SIZE_FIELD or total > max_size or pos + total > end:
        return None
    if magic == MAGIC_V2:
        if total < _V2_OVERHEAD or len(head) < _V2_OVERHEAD:
            return None
        (epoch, _, _, attributes, delta, _, max_ts, pid, producer_epoch, sequence, count) = _V2_HEADER.unpack_from(head, 12)
        if (
            attributes & ~0x7F
            or attributes & 0x07 > 4
            or min(epoch, max_ts, pid, producer_epoch, sequence) < -1
            or delta < 0
            or count < 0
            or (count and delta < count - 1)
            or (attributes & 0x07 == 0 and count * 7 > size - 49)
        ):
            return None
        first, last = offset, offset + delta
    else:
        # The key and value lengths must fill the message exactly.
        at = 18 if magic == 0 else 26
        if head[17] & 0x07 > 3 or total < at + 8:
            return None
        (key_len,) = _INT32.unpack_from(fr.read(pos + at - fr.start, 4), 0)
        if key_len < -1 or at + 4 + max(key_len, 0) + 4 > total:
            return None
        value_at = at + 4 + max(key_len, 0)
        (value_len,) = _INT32.unpack_from(fr.read(pos + value_at - fr.start, 4), 0)
        if value_at + 4 + max(value_len, 0) != total or value_len < -1:
            return None
        first = last = offset  # a v0/v1 entry's offset is its (last) offset
    if (min_offset is not None and first < min_offset) or (max_offset is not None and last > max_offset):
        return None
    try:
        batch = next(fr.slice(pos, total).batches(), None)
        if batch is None:
            return None
        batch.ensure_valid()
    except KafkalogError:
        return None
    return batch


def next_valid_batch(
    fr: FileRecords,
    start: int,
    end: int | None = None,
    *,
    min_offset: int | None = None,
    max_offset: int | None = None,
    max_batch_size: int = DEFAULT_MAX_RESYNC_BATCH,
) -> RecordBatch | None:
    """The first whole, valid batch starting at or after byte ``start`` of ``fr``: the next
    plausible entry start (offset, size and magic agree, found by one regular-expression scan
    of the bytes), then its size against the file, its offsets against the bounds, and last
    its CRC and header (``ensure_valid``).

    The cost per byte is bounded: runs of one repeated byte (zeros of a preallocated tail)
    are skipped whole, a candidate must pass the cheap checks before its CRC is computed, and
    nothing is read beyond the file (a candidate's size is checked against what is left before
    anything is allocated).

    Args:
        fr: the file (positions are file positions).
        start, end: the byte range to search (``end`` defaults to the end of ``fr``).
        min_offset, max_offset: the batch's first offset (v2; a v0/v1 message's own offset)
            must be >= ``min_offset`` and its last offset <= ``max_offset``.
        max_batch_size: larger candidates are not considered.

    Returns:
        The batch (``batch.position`` is where it starts), or None.
    """
    end = fr.end if end is None else min(end, fr.end)
    pos = max(start, fr.start)
    while pos <= end - _CANDIDATE_SPAN:
        chunk = fr.read(pos - fr.start, min(_CHUNK, end - pos))
        usable = len(chunk) - _CANDIDATE_SPAN + 1  # the pattern sees a candidate's first 24 bytes
        if usable <= 0:
            break
        spans: list[tuple[int, int]] = []
        lo = 0
        for run in _RUN.finditer(chunk):
            if run.group(1) == b"\x00":
                skip_from, skip_to = run.start() - 8, run.end() - 11
            else:
                skip_from, skip_to = run.start(), run.end() - _CANDIDATE_SPAN + 1
            if skip_to > skip_from:
                spans.append((lo, max(lo, skip_from)))
                lo = max(lo, skip_to)
        spans.append((lo, usable))
        for lo, hi in spans:
            at = lo
            while at < hi:
                m = _CANDIDATE.search(chunk, at, min(len(chunk), hi + _CANDIDATE_SPAN - 1))
                if m is None or m.start() >= hi:
                    break
                cand = m.start()
                batch = _plausible_batch(
                    fr, pos + cand, chunk[cand : cand + _V2_OVERHEAD], end, min_offset, max_offset, max_batch_size
                )
                if batch is not None:
                    return batch
                at = cand + 1
        pos += usable
    return None


def all_zero(fr: FileRecords, start: int, end: int) -> bool:
    """Whether bytes ``[start, end)`` of the file are all zero (read in 1 MiB chunks)."""
    pos = start
    while pos < end:
        chunk = fr.read(pos - fr.start, min(_CHUNK, end - pos))
        if not chunk:
            return True
        if chunk.count(0) != len(chunk):
            return False
        pos += len(chunk)
    return True


# ------------------------------------------------------------------------------------------------
# Transactions


class TxnEnd(NamedTuple):
    """A transaction marker met by :class:`TransactionTracker`.

    Attributes:
        producer_id, control_type, marker_offset: the marker.
        first_offset: the first offset of the transaction it ends, or None when no batch of
            that transaction was seen (it began before the scan, or it was empty, or the
            cleaner removed its batches).
        last_stable_offset: for a known ABORT, the last stable offset when it completed: the
            first offset of the earliest other open transaction, else the marker's offset + 1.
    """

    producer_id: int
    control_type: ControlRecordType
    marker_offset: int
    first_offset: int | None
    last_stable_offset: int | None

    @property
    def aborted_txn(self) -> AbortedTxn | None:
        """The ``.txnindex`` entry Kafka writes for this marker, or None."""
        if self.control_type is not ControlRecordType.ABORT or self.first_offset is None:
            return None
        return AbortedTxn(self.producer_id, self.first_offset, self.marker_offset, self.last_stable_offset)  # type: ignore[arg-type]


class TransactionTracker:
    """Follows transactions through batches in offset order, as the producer state a broker
    keeps while it appends or recovers, to say which ``.txnindex`` entries Kafka writes
    (``LogSegment.updateProducerState``): an ABORT marker of a transaction whose first batch
    was seen gives ``(producer id, first offset, marker offset, last stable offset)``.

    Carry one tracker across the segments of a partition; a transaction that began before the
    first batch given is unknown (its marker gives a :class:`TxnEnd` without a first offset).
    Not thread-safe.
    """

    def __init__(self) -> None:
        self._ongoing: dict[int, int] = {}

    @property
    def ongoing(self) -> dict[int, int]:
        """Producer id -> first offset of the transactions open now."""
        return dict(self._ongoing)

    def on_batch(self, batch: RecordBatch) -> TxnEnd | None:
        """Account for one batch; return the marker it holds, if any.

        Raises:
            KafkalogError: a control batch whose records do not decode.
        """
        pid = batch.producer_id
        if batch.magic < MAGIC_V2 or pid < 0 or not batch.is_transactional:
            return None
        if not batch.is_control:
            self._ongoing.setdefault(pid, batch.base_offset)
            return None
        records = batch.records()
        if not records:
            return None
        marker = records[0]
        kind = marker.control_type
        if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        first = self._ongoing.pop(pid, None)
        lso = None
        if first is not None and kind is ControlRecordType.ABORT:
            others = self._ongoing.values()
            lso = min(others) if others else marker.offset + 1
        return TxnEnd(pid, kind, marker.offset, first, lso)


# ------------------------------------------------------------------------------------------------
# Index checks (streamed beside the batches)


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _used_entries(path: Path, entry_size: int, length: int) -> int:
    """Entries before the trailing run of all-zero entries (a preallocated, untrimmed index)."""
    whole = length - length % entry_size
    end = whole
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        while end > 0:
            start = max(0, end - (64 << 10))
            chunk = os.pread(fd, end - start, start)
            stripped = chunk.rstrip(b"\x00")
            if stripped:
                last_byte = start + len(stripped)  # one past the last non-zero byte
                return -(-last_byte // entry_size)
            end = start
    finally:
        os.close(fd)
    return 0


class _OffsetIndexCheck:
    """Kafka's offset index rule checked entry by entry as the batches stream past."""

    def __init__(self, index: OffsetIndex, used: int, path: str, problems: _Problems) -> None:
        self._index = index
        self._n = used
        self._i = 0
        self._path = path
        self._p = problems
        self._prev: tuple[int, int] | None = None
        self._pending: tuple[int, int, int] | None = None  # (entry, offset, position)
        self._next = self._pull()

    def _add(self, entry: int, kind: str, message: str) -> None:
        self._p.add(self._path, entry, kind, f"entry {entry}: {message}")

    def _pull(self) -> tuple[int, int, int] | None:
        base = self._index.base_offset
        while self._i < self._n:
            i = self._i
            self._i += 1
            offset, position = self._index.entry(i)
            prev = self._prev
            if prev is not None and (offset <= prev[0] or position <= prev[1]):
                self._add(
                    i,
                    "index-not-monotonic",
                    f"(offset {offset}, position {position}) does not follow (offset {prev[0]}, position {prev[1]})",
                )
                continue
            if offset < base or position < 0:
                self._add(i, "index-mismatch", f"(offset {offset}, position {position}) is outside the segment")
                continue
            self._prev = (offset, position)
            return i, offset, position
        return None

    def _unmatched(self, pending: tuple[int, int, int], until: str) -> None:
        i, offset, position = pending
        self._add(i, "index-mismatch", f"(offset {offset}, position {position}): no batch from position {position} {until} ends at offset {offset}")

    def on_batch(self, position: int, last_offset: int) -> None:
        entry = self._next
        while entry is not None and entry[2] <= position:
            if self._pending is not None:
                self._unmatched(self._pending, f"to {entry[2]}")
                self._pending = None
            i, offset, at = entry
            if at < position:
                self._add(i, "index-mismatch", f"(offset {offset}, position {at}): position {at} is inside a batch, not the start of one")
            elif last_offset > offset:
                self._add(i, "index-mismatch", f"(offset {offset}, position {at}): the batch at position {at} ends at offset {last_offset}")
            elif last_offset < offset:
                self._pending = entry  # an append of several batches: a later one must end at offset
            entry = self._pull()
        self._next = entry
        pending = self._pending
        if pending is not None and pending[2] < position:
            if last_offset == pending[1]:
                self._pending = None
            elif last_offset > pending[1]:
                self._unmatched(pending, f"to {position}")
                self._pending = None

    def finish(self, valid_bytes: int, size: int) -> None:
        # Entries into bytes after damage are a consequence of it, reported once: recovery
        # truncates those bytes and rebuilds the index.
        beyond: list[int] = []
        if self._pending is not None:
            if valid_bytes < size:
                beyond.append(self._pending[0])
            else:
                self._unmatched(self._pending, "to the end of the log")
        entry = self._next
        while entry is not None:
            i, offset, position = entry
            if position >= size:
                self._add(i, "index-mismatch", f"(offset {offset}, position {position}) points past the end of the file")
            else:
                beyond.append(i)
            entry = self._pull()
        if beyond:
            self._p.add(
                self._path, beyond[0], "index-mismatch",
                f"{_entries(len(beyond))} from entry {beyond[0]} on point past the valid data (which ends at byte "
                f"{valid_bytes}); Kafka's recovery rebuilds the index",
                "warning",
            )


class _TimeIndexCheck:
    """Kafka's time index rule checked entry by entry as the batches stream past."""

    def __init__(self, index: TimeIndex, used: int, path: str, problems: _Problems) -> None:
        self._index = index
        self._n = used
        self._i = 0
        self._path = path
        self._p = problems
        self._prev: tuple[int, int] | None = None
        self._max = (-1, -1)  # (largest batch max timestamp so far, last offset of its batch)
        self._next = self._pull()

    def _add(self, entry: int, kind: str, message: str) -> None:
        self._p.add(self._path, entry, kind, f"entry {entry}: {message}")

    def _pull(self) -> tuple[int, int, int] | None:
        while self._i < self._n:
            i = self._i
            self._i += 1
            timestamp, offset = self._index.entry(i)
            prev = self._prev
            if prev is not None and (timestamp <= prev[0] or offset < prev[1]):
                self._add(
                    i,
                    "timeindex-not-monotonic",
                    f"(timestamp {timestamp}, offset {offset}) does not follow (timestamp {prev[0]}, offset {prev[1]})",
                )
                continue
            if offset < self._index.base_offset:
                self._add(i, "timeindex-mismatch", f"(timestamp {timestamp}, offset {offset}) is below the base offset")
                continue
            self._prev = (timestamp, offset)
            return i, timestamp, offset
        return None

    def on_batch(self, first_offset: int, last_offset: int, max_timestamp: int) -> None:
        if max_timestamp > self._max[0]:
            self._max = (max_timestamp, last_offset)
        entry = self._next
        while entry is not None and entry[2] <= last_offset:
            i, timestamp, offset = entry
            if offset < first_offset:
                self._add(i, "timeindex-mismatch", f"(timestamp {timestamp}, offset {offset}): no batch holds offset {offset}")
            elif (timestamp, last_offset) != self._max:
                largest, at = self._max
                self._add(
                    i,
                    "timeindex-mismatch",
                    f"(timestamp {timestamp}, offset {offset}): the largest timestamp up to offset {last_offset} is "
                    f"{largest} (in the batch ending at offset {at})",
                )
            entry = self._pull()
        self._next = entry

    def finish(self, last_offset: int | None, damaged: bool) -> None:
        beyond: list[int] = []
        entry = self._next
        while entry is not None:
            i, timestamp, offset = entry
            if damaged:
                beyond.append(i)
            else:
                self._add(
                    i,
                    "timeindex-mismatch",
                    f"(timestamp {timestamp}, offset {offset}) points past the last batch"
                    + ("" if last_offset is None else f" (offset {last_offset})"),
                )
            entry = self._pull()
        if beyond:
            self._p.add(
                self._path, beyond[0], "timeindex-mismatch",
                f"{_entries(len(beyond))} from entry {beyond[0]} on point past the last valid batch"
                + ("" if last_offset is None else f" (offset {last_offset})")
                + "; Kafka's recovery rebuilds the index",
                "warning",
            )


_TXN_ENTRY = struct.Struct(">hqqqq")


def _read_txn_index(path: Path, problems: _Problems, base_offset: int) -> list[tuple[int, AbortedTxn]]:
    """The entries of a ``.txnindex`` as (entry number, txn); malformed ones are reported."""
    data = path.read_bytes()
    name = str(path)
    if len(data) % _TXN_ENTRY.size:
        problems.add(
            name, None, "txnindex-corrupt", f"{len(data)} bytes is not a whole number of {_TXN_ENTRY.size}-byte entries"
        )
    out = []
    last = None
    for i, pos in enumerate(range(0, len(data) - _TXN_ENTRY.size + 1, _TXN_ENTRY.size)):
        version, pid, first, last_offset, lso = _TXN_ENTRY.unpack_from(data, pos)
        if version != 0:
            problems.add(name, i, "txnindex-corrupt", f"entry {i}: unknown version {version} (Kafka writes 0)")
            continue
        if last_offset < base_offset:
            problems.add(name, i, "txnindex-corrupt", f"entry {i}: last offset {last_offset} is below the base offset {base_offset}")
            continue
        if last is not None and last_offset <= last:
            problems.add(name, i, "txnindex-corrupt", f"entry {i}: last offset {last_offset} does not follow {last}")
            continue
        if lso > last_offset + 1 or first > last_offset:
            problems.add(
                name, i, "txnindex-corrupt",
                f"entry {i}: first offset {first}, last offset {last_offset} and last stable offset {lso} are out of order",
            )
            continue
        last = last_offset
        out.append((i, AbortedTxn(pid, first, last_offset, lso)))
    return out


# ------------------------------------------------------------------------------------------------
# One segment


def _sibling(log_path: Path, suffix: str) -> Path:
    """``00..42.log[.swap]`` -> ``00..42<suffix>[.swap]``."""
    name = log_path.name
    i = name.find(LOG_SUFFIX)
    if i < 0:
        return log_path.with_name(name + suffix)
    return log_path.with_name(name[:i] + suffix + name[i + len(LOG_SUFFIX) :])


def _base_offset_of(path: Path) -> int:
    prefix = path.name.split(".", 1)[0]
    if not prefix.isdigit():
        raise KafkalogError(
            "a segment file is named after its base offset (<20 digits>.log); this name is not", file=str(path)
        )
    return int(prefix)


class _Context:
    """What the checks of one segment need from its partition."""

    def __init__(self) -> None:
        self.tracker = TransactionTracker()
        self.start: int | None = None  # the first offset the scan covers (transactions before it are unknown)
        self.txn_exact = False  # the scan began at offset 0: last stable offsets are comparable
        self.epochs: list[EpochEntry] | None = None
        self.epoch_starts: list[int] = []
        self.epoch_from = 0  # batches below the log start offset are not compared
        self.epoch_mismatches = 0
        self.epoch_first: str | None = None
        self.legacy_seen = False


class _SegmentScan:
    """The pass over one ``.log``: batches, offsets, stats, and the index checks beside them."""

    def __init__(
        self,
        log_path: Path,
        *,
        deep: bool,
        check_indexes: bool,
        progress: Progress | None,
        context: _Context | None,
    ) -> None:
        self.path = log_path
        self.name = str(log_path)
        self.base = _base_offset_of(log_path)
        self.deep = deep
        self.check_indexes = check_indexes
        self.ticker = ProgressTicker(progress)
        self.ctx = context or _Context()
        self.sink: list[Problem] = []
        self.problems = _Problems(self.sink)
        self.batches = self.records = self.control = self.transactional = 0
        self.tombstones = 0
        self.first: int | None = None
        self.last: int | None = None
        self.min_ts: int | None = None
        self.max_ts: int | None = None
        self.magics: set[int] = set()
        self.codecs: set[str] = set()
        self.producers: set[int] = set()
        self.txn_ends: list[TxnEnd] = []
        self.offset_check: _OffsetIndexCheck | None = None
        self.time_check: _TimeIndexCheck | None = None
        self.index_entries: int | None = None
        self.time_entries: int | None = None
        self.aborted: int | None = None
        self.open_indexes: list = []

    def add(self, position: int | None, kind: str, message: str, severity: str = "error") -> None:
        self.problems.add(self.name, position, kind, message, severity)

    # -- indexes -------------------------------------------------------------------------------

    def _open_index(self, cls, suffix: str, label: str, entry_size: int):
        path = _sibling(self.path, suffix)
        prefix = "index" if cls is OffsetIndex else "timeindex"
        if not path.exists():
            consequence = (
                "Kafka rebuilds it from the log when it loads the segment"
                if cls is OffsetIndex
                else "Kafka creates an empty one when it loads the segment"
            )
            self.add(None, f"{prefix}-missing", f"no {label} ({path.name}); {consequence}", "warning")
            return None, 0, path
        length = path.stat().st_size
        name = str(path)
        if length % entry_size:
            self.problems.add(
                name, None, f"{prefix}-corrupt",
                f"{length} bytes is not a whole number of {entry_size}-byte entries (Kafka rebuilds such an index)",
            )
        used = _used_entries(path, entry_size, length)
        unused = length // entry_size - used
        if unused:
            self.problems.add(
                name, used, f"{prefix}-preallocated",
                f"{unused} unused preallocated entries after entry {used - 1 if used else 0}: the index was not trimmed "
                f"(an active segment, or one a broker did not close cleanly)",
                "warning",
            )
        index = cls(path, self.base, writable=False)
        self.open_indexes.append(index)
        return index, used, path

    def open_indexes_for_check(self) -> None:
        index, used, path = self._open_index(OffsetIndex, INDEX_SUFFIX, "offset index", 8)
        if index is not None:
            self.index_entries = used
            self.offset_check = _OffsetIndexCheck(index, used, str(path), self.problems)
        tindex, tused, tpath = self._open_index(TimeIndex, TIME_INDEX_SUFFIX, "time index", 12)
        if tindex is not None:
            self.time_entries = tused
            self.time_check = _TimeIndexCheck(tindex, tused, str(tpath), self.problems)

    def close(self) -> None:
        for index in self.open_indexes:
            index.close()

    # -- batches -------------------------------------------------------------------------------

    def run(self) -> SegmentReport:
        if self.check_indexes:
            self.open_indexes_for_check()
        fr = FileRecords.open(self.path)
        try:
            size = fr.size_in_bytes
            valid = self._scan(fr, size)
        finally:
            fr.close()
            self.ticker.flush()
        if self.offset_check is not None:
            self.offset_check.finish(valid, size)
        if self.time_check is not None:
            self.time_check.finish(self.last, valid < size)
        if self.check_indexes:
            self._check_txn_index(valid < size)
        self.close()
        self.problems.close()
        return SegmentReport(
            path=self.name,
            base_offset=self.base,
            size=size,
            valid_bytes=valid,
            batches=self.batches,
            records=self.records,
            first_offset=self.first,
            last_offset=self.last,
            min_timestamp=self.min_ts,
            max_timestamp=self.max_ts,
            magics=tuple(sorted(self.magics)),
            codecs=tuple(c.kafka_name for c in sorted(Compression) if c.kafka_name in self.codecs),
            problems=self.sink,
            deep=self.deep,
            tombstones=self.tombstones if self.deep else None,
            control_batches=self.control,
            transactional_batches=self.transactional,
            producer_ids=tuple(sorted(self.producers)),
            index_entries=self.index_entries,
            time_index_entries=self.time_entries,
            aborted_txns=self.aborted,
        )

    def _scan(self, fr: FileRecords, size: int) -> int:
        """Walk the batches; return the valid bytes (where recovery would truncate)."""
        pos = 0
        try:
            for batch in fr.batches(validate=True, strict=True):
                if not self._batch(batch):
                    self.ticker.add(size - pos)
                    return pos
                pos = batch.position + batch.size_in_bytes  # type: ignore[operator]
                self.ticker.add(batch.size_in_bytes)
        except TruncatedRecordError as e:
            self._stopped(fr, pos, size, e, truncated=True)
        except KafkalogError as e:
            self._stopped(fr, pos, size, e, truncated=False)
        return pos

    def _stopped(self, fr: FileRecords, pos: int, size: int, error: KafkalogError, *, truncated: bool) -> None:
        """Report why the valid data ends at ``pos`` (before ``size``)."""
        rest = size - pos
        self.ticker.add(rest)
        if all_zero(fr, pos, size):
            self.add(
                pos, "zero-tail",
                f"the last {rest} bytes are zeros: space preallocated for an active segment (preallocate=true) or a torn "
                f"write; Kafka's recovery truncates them",
                "warning",
            )
            return
        resume = next_valid_batch(
            fr, pos + 1, size, min_offset=(self.last + 1 if self.last is not None else self.base),
            max_offset=self.base + _INT32_MAX,
        )
        after = (
            f"; valid batches resume at position {resume.position} (kafkalog salvage recovers them)"
            if resume is not None
            else ""
        )
        if truncated and resume is None:
            self.add(
                pos, "truncated",
                f"the last {rest} bytes do not hold a whole batch (a torn write); Kafka's recovery truncates them",
            )
            return
        kind = "corrupt-batch"
        if isinstance(error, CorruptRecordError):
            try:
                batch = next(fr.slice(pos).batches(), None)
                if batch is not None and batch.compute_crc() != batch.crc:  # type: ignore[attr-defined]
                    kind = "crc"
            except KafkalogError:
                pass
        reason = error.reason if error.position is None or error.position == pos else f"{error.reason} (byte {error.position})"
        self.add(pos, kind, f"{reason}; Kafka's recovery truncates the {rest} bytes from here{after}")

    def _batch(self, batch: RecordBatch) -> bool:
        """Account for one valid batch; False when the offsets end the valid data here."""
        position = batch.position
        magic = batch.magic
        last = batch.last_offset
        codec = batch.compression
        records = None
        if magic == MAGIC_V2:
            first = batch.base_offset
            count = batch.count
        elif codec is Compression.NONE:
            first, count = last, 1
        else:
            first, count = last, 0
            try:  # a wrapper's first offset and count are inside its compressed value
                records = batch.records()
                first, count = records[0].offset, len(records)
            except KafkalogError as e:
                self.add(position, "invalid-record", f"v{magic} message at offset {last}: {e.reason}")
        previous = self.last
        if last < (self.base if previous is None else previous + 1):
            if previous is None:
                self.add(
                    position, "offset-below-base",
                    f"batch ending at offset {last} lies below the segment's base offset {self.base}; "
                    f"Kafka's recovery truncates from here",
                )
            else:
                self.add(
                    position, "offsets-not-monotonic",
                    f"batch ending at offset {last} follows offset {previous}; Kafka's recovery truncates from here",
                )
            return False
        if last - self.base > _INT32_MAX:
            self.add(
                position, "offset-overflow",
                f"offset {last} is beyond the 32-bit range of the base offset {self.base} (a segment of a broker before "
                f"0.11: Kafka splits it when it loads it; kafkalog's recovery truncates here)",
            )
            return False
        if previous is not None and first <= previous:
            self.add(position, "offsets-not-monotonic", f"batch starting at offset {first} overlaps offset {previous}")
        elif previous is None and first < self.base:
            self.add(position, "offset-below-base", f"batch starting at offset {first} begins below the base offset {self.base}")
        self.batches += 1
        self.records += count or 0
        if self.first is None:
            self.first = first
        self.last = last
        self.magics.add(magic)
        self.codecs.add(codec.kafka_name)
        max_ts = batch.max_timestamp
        if max_ts >= 0 and (self.max_ts is None or max_ts > self.max_ts):
            self.max_ts = max_ts
        if magic == MAGIC_V2:
            pid = batch.producer_id
            if pid >= 0:
                self.producers.add(pid)
            if batch.is_control:
                self.control += 1
            if batch.is_transactional:
                self.transactional += 1
            ts = max_ts if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else (None if batch.delete_horizon_ms is not None else batch.base_timestamp)
        else:
            self.ctx.legacy_seen = True
            ts = batch.base_timestamp if magic == 1 else None
        if self.deep:
            try:
                if records is None:
                    records = batch.records()
                for r in records:
                    if r.value is None and not r.is_control:
                        self.tombstones += 1
                    if r.timestamp >= 0 and (self.min_ts is None or r.timestamp < self.min_ts):
                        self.min_ts = r.timestamp
            except KafkalogError as e:
                self.add(position, "invalid-record", e.reason)
        elif ts is not None and ts >= 0 and (self.min_ts is None or ts < self.min_ts):
            self.min_ts = ts
        if self.offset_check is not None:
            self.offset_check.on_batch(position, last)  # type: ignore[arg-type]
        if self.time_check is not None:
            self.time_check.on_batch(first, last, max_ts)
        if magic == MAGIC_V2:
            self._transactions(batch)
            self._epoch(batch)
        return True

    def _transactions(self, batch: RecordBatch) -> None:
        try:
            end = self.ctx.tracker.on_batch(batch)
        except KafkalogError as e:
            self.add(batch.position, "invalid-record", f"control batch at offset {batch.base_offset}: {e.reason}")
            return
        if end is not None:
            self.txn_ends.append(end)

    def _epoch(self, batch: RecordBatch) -> None:
        ctx = self.ctx
        if not ctx.epochs or ctx.legacy_seen:
            return
        epoch = batch.partition_leader_epoch
        base = batch.base_offset
        if epoch < 0 or base < ctx.epoch_from:
            return
        i = bisect.bisect_right(ctx.epoch_starts, base) - 1
        expected = ctx.epochs[i].epoch if i >= 0 else None
        if expected != epoch:
            ctx.epoch_mismatches += 1
            if ctx.epoch_first is None:
                ctx.epoch_first = (
                    f"the batch at offset {base} ({self.path.name}, position {batch.position}) has leader epoch {epoch}, "
                    f"the checkpoint says {expected}"
                )

    def _check_txn_index(self, damaged: bool) -> None:
        path = _sibling(self.path, TXN_INDEX_SUFFIX)
        name = str(path)
        try:
            entries = _read_txn_index(path, self.problems, self.base) if path.exists() else []
        except OSError as e:
            self.problems.add(name, None, "unreadable", f"cannot read the transaction index: {e.strerror or e}")
            return
        self.aborted = len(entries) if path.exists() else None
        by_last = {txn.last_offset: (i, txn) for i, txn in entries}
        for end in self.txn_ends:
            found = by_last.pop(end.marker_offset, None)
            if end.control_type is ControlRecordType.COMMIT:
                if found is not None:
                    i, txn = found
                    self.problems.add(
                        name, i, "txnindex-mismatch",
                        f"entry {i} (producer {txn.producer_id}, offsets {txn.first_offset}..{txn.last_offset}) names a "
                        f"COMMIT marker as an aborted transaction",
                    )
                continue
            if found is None:
                # Without a batch of the transaction seen, Kafka writes no entry either (an empty
                # transaction, or one whose batches the cleaner removed); with one, it does.
                if end.first_offset is not None:
                    missing = "" if self.aborted is not None else f"there is no {path.name}: "
                    self.problems.add(
                        name, None, "txnindex-mismatch",
                        f"{missing}no entry for the transaction of producer {end.producer_id} aborted at offset "
                        f"{end.marker_offset} (its data starts at offset {end.first_offset}): read_committed "
                        f"consumers would see its records",
                    )
                continue
            i, txn = found
            if txn.producer_id != end.producer_id:
                self.problems.add(
                    name, i, "txnindex-mismatch",
                    f"entry {i} names producer {txn.producer_id} for the ABORT marker of producer {end.producer_id} at "
                    f"offset {end.marker_offset}",
                )
                continue
            if end.first_offset is None:
                continue
            if end.first_offset < txn.first_offset:
                self.problems.add(
                    name, i, "txnindex-mismatch",
                    f"entry {i} says the transaction of producer {txn.producer_id} aborted at offset {txn.last_offset} "
                    f"began at offset {txn.first_offset}, but it has a batch at offset {end.first_offset}",
                )
            elif end.first_offset > txn.first_offset and txn.first_offset >= (self.ctx.start or 0):
                self.problems.add(
                    name, i, "txnindex-mismatch",
                    f"entry {i} says the transaction of producer {txn.producer_id} aborted at offset {txn.last_offset} "
                    f"began at offset {txn.first_offset}; its first batch here is at offset {end.first_offset} (the "
                    f"cleaner may have removed the others)",
                    "warning",
                )
            elif self.ctx.txn_exact and end.last_stable_offset != txn.last_stable_offset:
                self.problems.add(
                    name, i, "txnindex-mismatch",
                    f"entry {i} has last stable offset {txn.last_stable_offset}; the transactions open when it aborted "
                    f"give {end.last_stable_offset}",
                    "warning",
                )
        beyond = []
        last_valid = -1 if self.last is None else self.last
        for i, txn in sorted(by_last.values()):
            if damaged and txn.last_offset > last_valid:
                beyond.append(i)  # its marker may be in the damaged bytes
                continue
            self.problems.add(
                name, i, "txnindex-mismatch",
                f"entry {i} (producer {txn.producer_id}, offsets {txn.first_offset}..{txn.last_offset}): no ABORT marker "
                f"of that producer at offset {txn.last_offset}",
            )
        if beyond:
            self.problems.add(
                name, beyond[0], "txnindex-mismatch",
                f"{_entries(len(beyond))} from entry {beyond[0]} on name offsets past the last valid batch; Kafka's "
                f"recovery rebuilds the index",
                "warning",
            )


def _run_scan(log_path: Path, deep: bool, check_indexes: bool, progress: Progress | None, ctx: _Context | None) -> SegmentReport:
    scan = _SegmentScan(log_path, deep=deep, check_indexes=check_indexes, progress=progress, context=ctx)
    if scan.ctx.start is None:
        scan.ctx.start = scan.base
        scan.ctx.txn_exact = scan.base == 0
    try:
        return scan.run()
    finally:
        scan.close()


def verify_segment(
    log_path: str | os.PathLike,
    *,
    deep: bool = False,
    check_indexes: bool = True,
    progress: Progress | None = None,
) -> SegmentReport:
    """Check one ``.log`` file and (with ``check_indexes``) its ``.index``, ``.timeindex`` and
    ``.txnindex`` siblings, read-only.

    Every batch's framing, CRC and header are checked; offsets must increase from the base
    offset (the file name); each index entry is checked against the batches (module
    docstring). With ``deep`` every record is decoded too (and tombstones counted). A
    transaction that began before this segment is unknown here; :func:`verify_path` on the
    partition directory follows transactions across segments.

    Args:
        log_path: the ``.log`` (also ``.log.swap`` and the like: the siblings carry the suffix).
        deep: decode every record.
        check_indexes: check the index files too.
        progress: told how many more bytes were read, about every MiB.

    Returns:
        The report; problems are in it, not raised.

    Raises:
        KafkalogError: the file is not named after an offset.
        OSError: the ``.log`` cannot be opened (missing, unreadable).
    """
    return _run_scan(Path(log_path), deep, check_indexes, progress, None)


# ------------------------------------------------------------------------------------------------
# Directories


def segment_logs(directory: str | os.PathLike) -> list[Path]:
    """The ``<20 digits>.log`` files of a partition directory, by base offset."""
    directory = Path(directory)
    logs = []
    with os.scandir(directory) as entries:
        for e in entries:
            m = _SEGMENT_NAME.match(e.name)
            if m and m.group(2) == "log" and e.is_file():
                logs.append((int(m.group(1)), directory / e.name))
    return [p for _, p in sorted(logs)]


def find_partition_dirs(log_dir: str | os.PathLike) -> list[Path]:
    """The partition directories (``<topic>-<partition>``, and ``-future`` ones being moved)
    of a log directory, by name."""
    log_dir = Path(log_dir)
    found = []
    with os.scandir(log_dir) as entries:
        for e in entries:
            if not e.is_dir():
                continue
            special = _SPECIAL_DIR.match(e.name)
            if (special and special["kind"] == "future") or (not special and _PARTITION_DIR.match(e.name)):
                found.append(log_dir / e.name)
    return sorted(found)


def _partition_of(directory: Path) -> tuple[str, int] | None:
    special = _SPECIAL_DIR.match(directory.name)
    m = special or _PARTITION_DIR.match(directory.name)
    return (m["topic"], int(m["partition"])) if m else None


class _LogDirOffsets:
    """The log directory's offset checkpoints, parsed once (problems reported once)."""

    def __init__(self, log_dir: Path, problems: _Problems) -> None:
        self.files: dict[str, dict[tuple[str, int], int]] = {}
        for name in _OFFSET_CHECKPOINTS:
            path = log_dir / name
            if not path.exists():
                continue
            try:
                self.files[name] = OffsetCheckpointFile(path).read()
            except CorruptCheckpointError as e:
                problems.add(str(path), e.position, "checkpoint-parse", e.reason)
            except OSError as e:
                problems.add(str(path), None, "unreadable", str(e.strerror or e))

    def get(self, name: str, tp: tuple[str, int] | None) -> int | None:
        if tp is None:
            return None
        return self.files.get(name, {}).get(tp)


def _leftovers(directory: Path, problems: _Problems) -> None:
    with os.scandir(directory) as entries:
        names = sorted(e.name for e in entries if e.is_file())
    logs = {n for n in names if n.endswith(LOG_SUFFIX)}
    for name in names:
        path = str(directory / name)
        if name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)):
            what = {
                CLEANED_SUFFIX: "the log cleaner's output from an interrupted run; Kafka deletes it when it loads the log",
                SWAP_SUFFIX: "a cleaned segment waiting to replace the old ones; Kafka completes the swap when it loads the log",
                DELETED_SUFFIX: "a segment file scheduled for deletion; Kafka deletes it when it loads the log",
            }[next(s for s in (CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX) if name.endswith(s))]
            problems.add(path, None, "leftover-file", what, "warning")
        elif name.endswith(".tmp"):
            problems.add(path, None, "leftover-file", "a temporary file of an interrupted atomic write", "warning")
        else:
            m = _SEGMENT_NAME.match(name)
            if m and m.group(2) in ("index", "timeindex", "txnindex") and f"{m.group(1)}{LOG_SUFFIX}" not in logs:
                problems.add(path, None, "orphan-index", "an index file without its .log; Kafka deletes it", "warning")


def _snapshots(directory: Path, problems: _Problems, log_end: int | None) -> None:
    with os.scandir(directory) as entries:
        names = sorted(e.name for e in entries if e.is_file() and e.name.endswith(SNAPSHOT_SUFFIX))
    for name in names:
        path = directory / name
        m = _SEGMENT_NAME.match(name)
        if not m:
            continue
        try:
            decode_snapshot(path.read_bytes(), file=str(path))
        except CorruptCheckpointError as e:
            kind = "snapshot-crc" if "CRC" in e.reason else "snapshot-corrupt"
            problems.add(str(path), e.position, kind, e.reason + "; Kafka deletes it and rebuilds producer state")
            continue
        except OSError as e:
            problems.add(str(path), None, "unreadable", str(e.strerror or e))
            continue
        offset = int(m.group(1))
        if log_end is not None and offset > log_end:
            problems.add(
                str(path), None, "snapshot-beyond-log-end",
                f"snapshot at offset {offset} lies beyond the log end offset {log_end}; Kafka deletes it", "warning",
            )


def _epoch_context(directory: Path, problems: _Problems, ctx: _Context, log_start: int) -> None:
    path = directory / LEADER_EPOCH_CHECKPOINT
    if not path.exists():
        return
    try:
        entries = LeaderEpochCheckpointFile(path).read()
    except CorruptCheckpointError as e:
        problems.add(str(path), e.position, "checkpoint-parse", e.reason)
        return
    except OSError as e:
        problems.add(str(path), None, "unreadable", str(e.strerror or e))
        return
    for a, b in zip(entries, entries[1:]):
        if b.epoch <= a.epoch or b.start_offset <= a.start_offset:
            problems.add(
                str(path), None, "checkpoint-inconsistent",
                f"entry (epoch {b.epoch}, start offset {b.start_offset}) does not follow (epoch {a.epoch}, start offset "
                f"{a.start_offset}): epochs and start offsets must increase",
            )
            return
    ctx.epochs = entries
    ctx.epoch_starts = [e.start_offset for e in entries]
    ctx.epoch_from = log_start


def _verify_partition(
    directory: Path,
    report: VerifyReport,
    problems: _Problems,
    offsets: _LogDirOffsets | None,
    deep: bool,
    progress: Progress | None,
) -> None:
    tp = _partition_of(directory)
    logs = segment_logs(directory)
    ctx = _Context()
    checkpointed_start = offsets.get(LOG_START_OFFSET_CHECKPOINT, tp) if offsets else None
    first_base = _base_offset_of(logs[0]) if logs else (checkpointed_start or 0)
    log_start = max(first_base, checkpointed_start or 0)
    _epoch_context(directory, problems, ctx, log_start)
    metadata = directory / PARTITION_METADATA
    if metadata.exists():
        try:
            PartitionMetadataFile(metadata).read()
        except CorruptCheckpointError as e:
            problems.add(str(metadata), e.position, "checkpoint-parse", e.reason)
        except OSError as e:
            problems.add(str(metadata), None, "unreadable", str(e.strerror or e))
    previous: SegmentReport | None = None
    segments: list[SegmentReport] = []
    size = 0
    for log_path in logs:
        try:
            seg = _run_scan(log_path, deep, True, progress, ctx)
        except OSError as e:
            problems.add(str(log_path), None, "unreadable", str(e.strerror or e))
            continue
        segments.append(seg)
        report.segments.append(seg)
        size += seg.size
        if previous is not None and previous.last_offset is not None and seg.base_offset <= previous.last_offset:
            problems.add(
                seg.path, None, "segment-overlap",
                f"the segment starts at offset {seg.base_offset} but the previous one ({Path(previous.path).name}) ends "
                f"at offset {previous.last_offset}",
            )
        if seg.last_offset is not None or previous is None:
            previous = seg
    # The log end offset: after the last batch, or the base offset of an empty active segment.
    log_end = previous.next_offset if previous is not None else log_start
    if segments and segments[-1].last_offset is None:
        log_end = max(log_end, segments[-1].base_offset)
    if ctx.epoch_mismatches:
        problems.add(
            str(directory / LEADER_EPOCH_CHECKPOINT), None, "leader-epoch-mismatch",
            f"{ctx.epoch_mismatches} batches disagree with the leader epoch checkpoint; the first: {ctx.epoch_first}",
            "warning",
        )
    if ctx.epochs and ctx.epochs[-1].start_offset > log_end:
        problems.add(
            str(directory / LEADER_EPOCH_CHECKPOINT), None, "checkpoint-inconsistent",
            f"the last epoch starts at offset {ctx.epochs[-1].start_offset}, beyond the log end offset {log_end}; Kafka "
            f"truncates the checkpoint when it loads the log",
            "warning",
        )
    _snapshots(directory, problems, log_end)
    _leftovers(directory, problems)
    if offsets is not None and tp is not None:
        _check_offsets(directory, offsets, tp, log_start, log_end, problems)
    if tp is not None:
        report.partitions.append(
            PartitionReport(str(directory), tp[0], tp[1], len(logs), log_start, log_end, size)
        )


def _check_offsets(
    directory: Path, offsets: _LogDirOffsets, tp: tuple[str, int], log_start: int, log_end: int, problems: _Problems
) -> None:
    log_dir = directory.parent
    name = f"{tp[0]}-{tp[1]}"
    recovery = offsets.get(RECOVERY_POINT_OFFSET_CHECKPOINT, tp)
    if recovery is not None and recovery > log_end:
        problems.add(
            str(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT), None, "checkpoint-inconsistent",
            f"{name}: recovery point {recovery} is beyond the log end offset {log_end}", "warning",
        )
    start = offsets.get(LOG_START_OFFSET_CHECKPOINT, tp)
    if start is not None and start > log_end:
        problems.add(
            str(log_dir / LOG_START_OFFSET_CHECKPOINT), None, "checkpoint-inconsistent",
            f"{name}: log start offset {start} is beyond the log end offset {log_end}: Kafka deletes every segment of "
            f"the partition when it loads it",
        )
    hw = offsets.get(REPLICATION_OFFSET_CHECKPOINT, tp)
    if hw is not None and hw > log_end:
        problems.add(
            str(log_dir / REPLICATION_OFFSET_CHECKPOINT), None, "checkpoint-inconsistent",
            f"{name}: high watermark {hw} is beyond the log end offset {log_end}", "warning",
        )
    cleaner = offsets.get(CLEANER_OFFSET_CHECKPOINT, tp)
    if cleaner is not None and not log_start <= cleaner <= log_end:
        problems.add(
            str(log_dir / CLEANER_OFFSET_CHECKPOINT), None, "checkpoint-inconsistent",
            f"{name}: cleaner offset {cleaner} is outside the log [{log_start}, {log_end}]; Kafka's cleaner resets it",
            "warning",
        )


def _has_kafka_files(directory: Path) -> bool:
    with os.scandir(directory) as entries:
        for e in entries:
            if not e.is_file():
                continue
            name = e.name
            stem = name.split(".", 1)[0]
            if stem.isdigit() and len(stem) == 20:
                return True
            if name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA):
                return True
    return False


def _leftover_dirs(log_dir: Path, problems: _Problems) -> None:
    with os.scandir(log_dir) as entries:
        for e in sorted(entries, key=lambda e: e.name):
            m = _SPECIAL_DIR.match(e.name)
            if e.is_dir() and m and m["kind"] in ("delete", "stray"):
                what = "a deleted partition waiting for removal" if m["kind"] == "delete" else "a stray partition the broker no longer hosts"
                problems.add(str(log_dir / e.name), None, "leftover-file", what, "warning")


def _verify_file(path: Path, report: VerifyReport, problems: _Problems, deep: bool, progress: Progress | None) -> None:
    name = path.name
    if name in _OFFSET_CHECKPOINTS:
        try:
            OffsetCheckpointFile(path).read()
        except CorruptCheckpointError as e:
            problems.add(str(path), e.position, "checkpoint-parse", e.reason)
        return
    if name == LEADER_EPOCH_CHECKPOINT:
        try:
            LeaderEpochCheckpointFile(path).read()
        except CorruptCheckpointError as e:
            problems.add(str(path), e.position, "checkpoint-parse", e.reason)
        return
    if name == PARTITION_METADATA:
        try:
            PartitionMetadataFile(path).read()
        except CorruptCheckpointError as e:
            problems.add(str(path), e.position, "checkpoint-parse", e.reason)
        return
    if name.endswith(SNAPSHOT_SUFFIX):
        try:
            decode_snapshot(path.read_bytes(), file=str(path))
        except CorruptCheckpointError as e:
            kind = "snapshot-crc" if "CRC" in e.reason else "snapshot-corrupt"
            problems.add(str(path), e.position, kind, e.reason)
        return
    stem = name.split(".", 1)[0]
    rest = name[len(stem) :]
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX):
        if rest == suffix or rest.startswith(suffix + "."):
            log_path = path.with_name(stem + LOG_SUFFIX + rest[len(suffix) :])
            if not log_path.exists():
                raise KafkalogError(f"no {log_path.name} beside this index to check it against", file=str(path))
            report.segments.append(_run_scan(log_path, deep, True, progress, None))
            return
    raise KafkalogError(
        "not a Kafka log file (expected <offset>.log|.index|.timeindex|.txnindex|.snapshot, a checkpoint, "
        "partition.metadata, a partition directory or a log directory)",
        file=str(path),
    )


def verify_path(path: str | os.PathLike, *, deep: bool = False, progress: Progress | None = None) -> VerifyReport:
    """Check a file, a partition directory or a log directory, read-only.

    - a ``.log`` (or one of its index files): :func:`verify_segment`;
    - a snapshot, checkpoint or ``partition.metadata`` file: parsed;
    - a partition directory: every segment in offset order (transactions followed across
      them), segment overlap, producer snapshots, ``leader-epoch-checkpoint`` (parsed, and
      compared with the batches' leader epochs), ``partition.metadata``, leftover files;
    - a log directory: every partition directory in it, its offset checkpoints (parsed, and
      compared with each partition's offsets), leftover ``-delete`` directories.

    Args:
        path: what to check.
        deep: decode every record.
        progress: told how many more bytes of ``.log`` data were read, about every MiB.

    Returns:
        The report.

    Raises:
        KafkalogError: a directory with no segments or partition directories, or a file of no
            known kind.
        OSError: ``path`` does not exist or cannot be read.
    """
    path = Path(path)
    report = VerifyReport(str(path))
    problems = _Problems(report.other)
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    if path.is_file():
        _verify_file(path, report, problems, deep, progress)
    elif _has_kafka_files(path):
        parent_offsets = None
        if _partition_of(path) is not None and any((path.parent / n).exists() for n in _OFFSET_CHECKPOINTS):
            parent_offsets = _LogDirOffsets(path.parent, _Problems([]))  # the log dir's files: not reported here
        _verify_partition(path, report, problems, parent_offsets, deep, progress)
    else:
        partitions = find_partition_dirs(path)
        checkpoints = [n for n in _OFFSET_CHECKPOINTS if (path / n).exists()]
        if not partitions and not checkpoints:
            raise KafkalogError(
                "no log segments here, and no partition directories (<topic>-<partition>) or checkpoint files: not a "
                "Kafka partition or log directory",
                file=str(path),
            )
        offsets = _LogDirOffsets(path, problems)
        for directory in partitions:
            _verify_partition(directory, report, problems, offsets, deep, progress)
        _leftover_dirs(path, problems)
    problems.close()
    return report


def total_log_bytes(path: str | os.PathLike) -> int:
    """The bytes of ``.log`` data :func:`verify_path` would read (for a progress bar's total)."""
    path = Path(path)
    if path.is_file():
        stem = path.name.split(".", 1)[0]
        log = path.with_name(stem + LOG_SUFFIX)
        try:
            return log.stat().st_size if log.exists() else path.stat().st_size
        except OSError:
            return 0
    dirs = [path] if _has_kafka_files(path) else find_partition_dirs(path)
    total = 0
    for d in dirs:
        for log in segment_logs(d):
            try:
                total += log.stat().st_size
            except OSError:
                pass
    return total



# ------------------------------------------------------------------------------------------------
# Retention, read-only


class RetentionSegment(NamedTuple):
    """What retention asks of a segment (:class:`kafkalog.retention.SegmentInfo`), read from
    the files: base offset, size, largest timestamp (the file's mtime when it has none, as in
    Kafka), and the offsets it holds."""

    base_offset: int
    size: int
    largest_timestamp: int
    path: str
    last_offset: int | None


class OfflineRetention(NamedTuple):
    """:func:`plan_partition_retention`'s answer: the plan and what it was computed from."""

    plan: RetentionPlan
    segments: list[RetentionSegment]
    log_start_offset: int
    log_end_offset: int


def _segment_facts(log_path: Path) -> RetentionSegment:
    """Size, largest batch max timestamp and last offset of a segment (a header scan)."""
    largest = -1
    last = None
    with FileRecords.open(log_path) as fr:
        size = fr.size_in_bytes
        try:
            for batch in fr.batches():
                if batch.max_timestamp > largest:
                    largest = batch.max_timestamp
                last = batch.last_offset
        except KafkalogError:
            pass  # a damaged tail: retention looks at what is readable, as Kafka's index does
    if largest < 0:
        largest = log_path.stat().st_mtime_ns // 1_000_000
    return RetentionSegment(_base_offset_of(log_path), size, largest, str(log_path), last)


def plan_partition_retention(directory: str | os.PathLike, config: LogConfig, now_ms: int) -> OfflineRetention:
    """What :meth:`kafkalog.log.Log.delete_old_segments` would delete in a partition directory
    now, computed without opening the log: nothing is written, no lock is taken, no recovery
    runs.

    The inputs are those :class:`~kafkalog.log.Log` uses: each segment's size and largest
    timestamp (the largest batch max timestamp, read from the batch headers, which is what the
    time index's last entry holds on a cleanly closed segment), the log start offset (the
    larger of the first segment's base offset and the log directory's
    ``log-start-offset-checkpoint``), and the log end offset as the high watermark.

    Raises:
        KafkalogError: no segments in ``directory``; a corrupt ``log-start-offset-checkpoint``.
        OSError: the files cannot be read.
    """
    directory = Path(directory)
    logs = segment_logs(directory)
    if not logs:
        raise KafkalogError("no log segments in this directory", file=str(directory))
    segments = [_segment_facts(p) for p in logs]
    log_start = segments[0].base_offset
    tp = _partition_of(directory)
    checkpoint = directory.parent / LOG_START_OFFSET_CHECKPOINT
    if tp is not None and checkpoint.exists():
        log_start = max(log_start, OffsetCheckpointFile(checkpoint).read().get(tp, 0))
    last = segments[-1]
    log_end = last.base_offset if last.last_offset is None else last.last_offset + 1
    plan = plan_retention(segments, config, now_ms, log_start_offset=log_start, log_end_offset=log_end)
    return OfflineRetention(plan, segments, log_start, log_end)
