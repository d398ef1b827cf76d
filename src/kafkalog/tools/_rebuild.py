"""Rebuilding a segment's indexes from its log (``kafkalog rebuild-index``).

A segment's ``.index``, ``.timeindex`` and ``.txnindex`` are regenerated from its ``.log`` by
the rule Kafka's ``LogSegment.recover`` applies (see :mod:`kafkalog.segment`): before a batch is
counted, if more than ``index.interval.bytes`` were read since the last entry, add the offset
entry (batch last offset, batch position) and the time entry (largest timestamp so far, last
offset of its batch); at the end one time entry for the largest timestamp; the ``.txnindex``
from the ABORT markers (:class:`~kafkalog.tools.TransactionTracker`). That is byte for byte what
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

from .. import FileRecords, OffsetIndex, TimeIndex, TransactionIndex
from ..durable import TMP_SUFFIX, ensure_not_locked, fsync_dir
from ..filenames import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    find_partition_dirs,
    segment_base_offset,
    segment_logs,
)
from ..memory_records import MIN_ENTRY_SIZE_FIELD
from ..record import LOG_OVERHEAD, MAGIC_V2
from ..errors import KafkalogError
from ..varint import INT32_MAX as _INT32_MAX
from ..transaction_tracker import TransactionTracker
from ._verify_report import Progress, ProgressTicker

#: The smallest whole entry: a v0 message with a null key and value.
_MIN_ENTRY = LOG_OVERHEAD + MIN_ENTRY_SIZE_FIELD


def ensure_not_in_use(partition_dir: str | os.PathLike) -> None:
    """Refuse to touch a partition whose log directory is locked by a running kafkalog ``Log``
    or a Kafka broker (:func:`kafkalog.durable.ensure_not_locked` on the partition's parent).

    Raises:
        KafkalogError: the log directory is in use.
    """
    ensure_not_locked(Path(partition_dir).resolve().parent)


def _index_path(log_path: Path, suffix: str) -> Path:
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
    tracker = tracker or TransactionTracker()
    ticker = ProgressTicker(progress)
    targets = {s: _index_path(log_path, s) for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)}
    tmps = {s: p.with_name(p.name + TMP_SUFFIX) for s, p in targets.items()}
    for tmp in tmps.values():
        tmp.unlink(missing_ok=True)  # a stale one would be opened and counted from its length
    size = log_path.stat().st_size
    capacity = size // max(index_interval_bytes + 1, _MIN_ENTRY) + 2
    offset_index = OffsetIndex(tmps[INDEX_SUFFIX], base, capacity * OffsetIndex.DTYPE.itemsize)
    time_index = TimeIndex(tmps[TIME_INDEX_SUFFIX], base, (capacity + 1) * TimeIndex.DTYPE.itemsize)
    txn_index = TransactionIndex(tmps[TXN_INDEX_SUFFIX], base)
    batches = valid = since_entry = aborted = 0
    previous = base - 1
    max_ts, max_ts_offset = -1, -1
    stopped: str | None = None
    try:
        with FileRecords.open(log_path) as fr:
            try:
                for batch in fr.batches(validate=True, strict=True):
                    last = batch.last_offset
                    if last <= previous:
                        stopped = f"offsets go backwards at position {valid} (offset {last} after {previous})"
                        break
                    if last - base > _INT32_MAX:
                        stopped = f"offset {last} at position {valid} overflows the 32-bit range of the base offset"
                        break
                    previous = last
                    if batch.max_timestamp > max_ts:
                        max_ts, max_ts_offset = batch.max_timestamp, last
                    if since_entry > index_interval_bytes:
                        offset_index.append(last, valid)
                        time_index.maybe_append(max_ts, max_ts_offset)
                        since_entry = 0
                    size_in_bytes = batch.size_in_bytes
                    valid += size_in_bytes
                    since_entry += size_in_bytes
                    batches += 1
                    ticker.add(size_in_bytes)
                    if batch.magic == MAGIC_V2:
                        end = tracker.on_batch(batch)
                        txn = end.aborted_txn if end is not None else None
                        if txn is not None:
                            txn_index.append(txn)
                            aborted += 1
            except KafkalogError as e:
                stopped = e.reason if e.position is None else f"at position {e.position}: {e.reason}"
        time_index.maybe_append(max_ts, max_ts_offset, skip_full_check=True)
        offset_entries, time_entries = offset_index.entries, time_index.entries
        offset_index.close()  # trims to the entries
        time_index.close()
        txn_index.close()
        if aborted == 0 and not targets[TXN_INDEX_SUFFIX].exists():
            tmps[TXN_INDEX_SUFFIX].unlink(missing_ok=True)  # Kafka creates it on the first entry
        elif not tmps[TXN_INDEX_SUFFIX].exists():
            tmps[TXN_INDEX_SUFFIX].touch()  # an existing one is emptied, as recovery empties it
        changed = tuple(
            targets[s].name for s in targets if tmps[s].exists() and not _same_bytes(tmps[s], targets[s])
        )
        if not dry_run:
            for s in targets:
                if tmps[s].exists():
                    os.replace(tmps[s], targets[s])
            fsync_dir(log_path.parent)
    finally:
        ticker.flush()
        for index in (offset_index, time_index):
            index.close()
        txn_index.close()
        for tmp in tmps.values():
            tmp.unlink(missing_ok=True)
    if stopped is None and valid < size:
        stopped = f"{size - valid} bytes after position {valid} do not hold a whole batch"
    return RebuildReport(
        str(log_path), batches, valid, size, offset_entries, time_entries, aborted, changed, stopped, dry_run
    )


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
            raise KafkalogError(f"no segment {log.name} here", file=str(path))
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
