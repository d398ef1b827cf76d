"""Rebuilding a segment's indexes from its log (``kafkalog rebuild-index``).

A segment's ``.index``, ``.timeindex`` and ``.txnindex`` are regenerated from its ``.log`` by
the rule Kafka's ``LogSegment.recover`` applies, the recovery step of
:class:`kafkalog.segment_recovery.RecoveryStep` (offsets increasing within the 32-bit range of the
base offset; before a batch is counted, if more than ``index.interval.bytes`` were read since the
last entry, the offset entry and the time entry; at the end one time entry for the largest
timestamp), and the ``.txnindex`` from the ABORT markers
(:class:`~kafkalog.transaction_tracker.TransactionTracker`). That is byte for byte what
Kafka's recovery writes, and what an append of one batch at a time writes. The ``.log`` is never
modified: the indexes cover its valid part and the report says where and why it ends. The new
files are written under a ``.tmp`` suffix and renamed over the old ones.

Like convert and salvage, it does not take the log directory's lock: it refuses to run while a
kafkalog process holds it, and must not be run on a partition a broker has open.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from .durable import TMP_SUFFIX, ensure_not_locked, fsync_dir
from .errors import KafkalogError
from .file_records import FileRecords
from .filenames import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    find_partition_dirs,
    segment_base_offset,
    segment_logs,
)
from .index import OffsetIndex, TimeIndex
from .memory_records import MIN_ENTRY_SIZE_FIELD
from .progress import Progress, ProgressTicker
from .record import LOG_OVERHEAD, RecordBatch
from .segment_recovery import Refusal, RecoveryStep
from .transaction_index import TransactionIndex
from .transaction_tracker import TransactionTracker

#: The smallest whole entry: a v0 message with a null key and value.
MIN_ENTRY = LOG_OVERHEAD + MIN_ENTRY_SIZE_FIELD


def ensure_not_in_use(partition_dir: str | os.PathLike) -> None:
    """Refuse to touch a partition whose log directory is locked by a running kafkalog ``Log``
    or a Kafka broker (:func:`kafkalog.durable.ensure_not_locked` on the partition's parent).

    Raises:
        KafkalogError: the log directory is in use.
    """
    ensure_not_locked(Path(partition_dir).resolve().parent)


def index_path(log_path: Path, suffix: str) -> Path:
    """The file of ``log_path``'s segment with ``suffix`` in place of ``.log`` (a transient suffix
    after it kept: ``00..42.log.swap`` -> ``00..42.index.swap``)."""
    name = log_path.name
    return log_path.with_name(name[: name.index(LOG_SUFFIX)] + suffix + name[name.index(LOG_SUFFIX) + len(LOG_SUFFIX) :])


def _same_bytes(a: Path, b: Path) -> bool:
    """Whether two files hold the same bytes (a missing file equals an empty one)."""
    sa = a.stat().st_size if a.exists() else 0
    sb = b.stat().st_size if b.exists() else 0
    if sa != sb:
        return False
    if sa == 0:
        return True
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


# ------------------------------------------------------------------------------------------------
# rebuild-index


@dataclass
class RebuildReport:
    """What :func:`rebuild_indexes` did for one segment.

    Attributes:
        path: the ``.log``.
        batches, valid_bytes, size: batches indexed, the bytes they span, the file's size.
        offset_entries, time_entries, aborted_txns: entries written.
        changed: the index files whose content changed (or, in a dry run, would change).
        stopped: why the valid data ends before the end of the file, or None.
    """

    path: str
    batches: int
    valid_bytes: int
    size: int
    offset_entries: int
    time_entries: int
    aborted_txns: int
    changed: tuple[str, ...]
    stopped: str | None = None
    dry_run: bool = False

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["changed"] = list(self.changed)
        return out


def rebuild_indexes(
    log_path: str | os.PathLike,
    *,
    index_interval_bytes: int = 4096,
    tracker: TransactionTracker | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> RebuildReport:
    """Regenerate the ``.index``, ``.timeindex`` and ``.txnindex`` of one segment from its log.

    Args:
        log_path: the ``.log``.
        index_interval_bytes: the topic's ``index.interval.bytes`` (Kafka's default 4096).
        tracker: the transactions open before this segment (carry one across a partition's
            segments, oldest first); a fresh one when None.
        dry_run: build the indexes, compare them with the files, change nothing.
        progress: told how many more bytes were read.

    Returns:
        The report.

    Raises:
        KafkalogError: the file is not named after an offset, or its log directory is in use.
        OSError: a file cannot be read or written.
    """
    log_path = Path(log_path)
    base = segment_base_offset(log_path)
    if index_interval_bytes < 0:
        raise KafkalogError(f"index.interval.bytes must be >= 0, not {index_interval_bytes}")
    ensure_not_in_use(log_path.parent)
    ticker = ProgressTicker(progress)
    targets = {s: index_path(log_path, s) for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)}
    tmps = {s: p.with_name(p.name + TMP_SUFFIX) for s, p in targets.items()}
    for tmp in tmps.values():
        tmp.unlink(missing_ok=True)  # a stale one would be opened and counted from its length
    size = log_path.stat().st_size
    capacity = size // max(index_interval_bytes + 1, MIN_ENTRY) + 2
    step = RecoveryStep(
        base, index_interval_bytes,
        offset_index=OffsetIndex(tmps[INDEX_SUFFIX], base, capacity * OffsetIndex.DTYPE.itemsize),
        time_index=TimeIndex(tmps[TIME_INDEX_SUFFIX], base, (capacity + 1) * TimeIndex.DTYPE.itemsize),
    )
    txn_index = TransactionIndex(tmps[TXN_INDEX_SUFFIX], base)
    try:
        batches, aborted, stopped = _scan(log_path, step, tracker or TransactionTracker(), txn_index, ticker)
        step.finish()
        offset_entries, time_entries = step.offset_index.entries, step.time_index.entries  # type: ignore[union-attr]
        changed = _install(log_path, targets, tmps, (step.offset_index, step.time_index, txn_index), aborted, dry_run)
    finally:
        ticker.flush()
        for index in (step.offset_index, step.time_index, txn_index):
            index.close()  # type: ignore[union-attr]
        for tmp in tmps.values():
            tmp.unlink(missing_ok=True)
    valid = step.valid_bytes
    if stopped is None and valid < size:
        stopped = f"{size - valid} bytes after position {valid} do not hold a whole batch"
    return RebuildReport(
        str(log_path), batches, valid, size, offset_entries, time_entries, aborted, changed, stopped, dry_run
    )


def _scan(
    log_path: Path, step: RecoveryStep, tracker: TransactionTracker, txn_index: TransactionIndex, ticker: ProgressTicker
) -> tuple[int, int, str | None]:
    """Feed every batch of the log to ``step`` and the ABORT markers' entries to ``txn_index``
    until the valid part ends; return (batches indexed, aborted transactions, why it ended)."""
    batches = aborted = 0
    with FileRecords.open(log_path) as fr:
        try:
            for batch in fr.batches(validate=True, strict=True):
                refusal = step.refusal(batch)
                if refusal is not None:
                    return batches, aborted, _refused(refusal, batch, step)
                step.take(batch)
                batches += 1
                ticker.add(batch.size_in_bytes)
                txn = tracker.aborted_txn(batch)
                if txn is not None:
                    txn_index.append(txn)
                    aborted += 1
        except KafkalogError as e:
            return batches, aborted, e.reason if e.position is None else f"at position {e.position}: {e.reason}"
    return batches, aborted, None


def _refused(refusal: Refusal, batch: RecordBatch, step: RecoveryStep) -> str:
    """Why the valid part ends before ``batch``, in words."""
    last, valid = batch.last_offset, step.valid_bytes
    if refusal is Refusal.BACKWARDS:
        return f"offsets go backwards at position {valid} (offset {last} after {step.previous})"
    return f"offset {last} at position {valid} overflows the 32-bit range of the base offset"


def _install(
    log_path: Path,
    targets: dict[str, Path],
    tmps: dict[str, Path],
    indexes: tuple[OffsetIndex | None, TimeIndex | None, TransactionIndex],
    aborted: int,
    dry_run: bool,
) -> tuple[str, ...]:
    """Close the new indexes (trimming them), compare them with the files they replace and,
    unless ``dry_run``, rename them over those; return the names of the files that change."""
    for index in indexes:
        index.close()  # type: ignore[union-attr]  # the offset and time indexes trim to their entries
    if aborted == 0 and not targets[TXN_INDEX_SUFFIX].exists():
        tmps[TXN_INDEX_SUFFIX].unlink(missing_ok=True)  # Kafka creates it on the first entry
    elif not tmps[TXN_INDEX_SUFFIX].exists():
        tmps[TXN_INDEX_SUFFIX].touch()  # an existing one is emptied, as recovery empties it
    changed = tuple(targets[s].name for s in targets if tmps[s].exists() and not _same_bytes(tmps[s], targets[s]))
    if not dry_run:
        for s in targets:
            if tmps[s].exists():
                os.replace(tmps[s], targets[s])
        fsync_dir(log_path.parent)
    return changed


def rebuild_path(
    path: str | os.PathLike,
    *,
    index_interval_bytes: int = 4096,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> list[RebuildReport]:
    """:func:`rebuild_indexes` for a segment (any of its files), every segment of a partition
    directory (oldest first, following transactions across them), or every partition of a log
    directory.

    Raises:
        KafkalogError: no segment to rebuild, or a directory in use.
        OSError: ``path`` does not exist or cannot be read or written.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    if path.is_file():
        stem = path.name.split(".", 1)[0]
        log = path.with_name(stem + LOG_SUFFIX)
        if not log.exists():
            raise KafkalogError(
                f"not a file of a segment: no {log.name} beside it (give a <offset>.log or one of its index files, "
                "a partition directory or a log directory)",
                file=str(path),
            )
        return [rebuild_indexes(log, index_interval_bytes=index_interval_bytes, dry_run=dry_run, progress=progress)]
    partitions = [path] if segment_logs(path) else find_partition_dirs(path)
    reports = []
    for directory in partitions:
        tracker = TransactionTracker()
        for log in segment_logs(directory):
            reports.append(
                rebuild_indexes(
                    log, index_interval_bytes=index_interval_bytes, tracker=tracker, dry_run=dry_run, progress=progress
                )
            )
    if not reports:
        raise KafkalogError("no log segments here or in partition directories below", file=str(path))
    return reports
