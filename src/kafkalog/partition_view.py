"""One partition directory seen read-only: its segments, its bounds, its transactions, its times.

A :class:`PartitionView` answers what a reader plans with -- log start and end offsets, the
latest leader epoch, the last stable offset and the aborted transactions, the offset of a
timestamp -- from the files of a ``<topic>-<partition>`` directory on a local path or on any
filesystem :class:`~kafkalog.remote.Storage` opens. It never writes, locks or creates anything
(``Log.open`` would take the ``.lock`` and rewrite checkpoints), and the directory may be live: a
broker or a ``Log`` appending, rolling, deleting. So the offset and time indexes are read with
``read_live`` (copied, never mapped, cut to their live entries), every position an index entry
gives is checked to frame a batch before it is trusted (:func:`kafkalog.resync.batch_at`), and
a segment deleted meanwhile is left out. Users: the Spark source's planning and its remote
writer, and ``kafkalog groups`` (log end offsets).

What bad bytes do is the caller's choice (:class:`OnCorruption`). On an object store every
answer costs requests: one listing for the segments, the indexes fetched whole, a few batch
headers read with a small read-ahead, never a segment's body.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

from .checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from .errors import CorruptCheckpointError, KafkalogError
from .file_records import FileRecords
from .filenames import PARTITION_DIR, SEGMENT_FILE, filename_prefix
from .index import OffsetIndex, TimeIndex
from .producer_state.snapshot import decode_snapshot
from .record import LOG_OVERHEAD, MAGIC_V2, RecordBatch
from .remote import SMALL_BLOCK_SIZE, Storage
from .resync import BAD_BATCH_ERRORS, batch_at
from .transaction_index import AbortedTxn, TransactionIndex
from .transaction_tracker import TransactionTracker
from .varint import INT64_MAX

#: An offset above every real one: the end of a log whose tail cannot be framed (``SKIP``).
NO_END = INT64_MAX


class OnCorruption(enum.Enum):
    """What a :class:`PartitionView` does with bytes that do not frame a valid batch.

    Everywhere, a zeroed batch header at the end of the last segment is the end of the log (the
    preallocated tail of an active segment, ``preallocate=true``), and a partial batch at the
    end is a write in progress: the log ends before it.
    """

    #: Raise the reading error (file and position named). Batches are framed, CRCs not checked.
    RAISE = "raise"
    #: Stop the scan there with a warning; the log end is then unknown (:data:`NO_END`): a
    #: reader skips the bad bytes itself. Batches are framed, CRCs not checked.
    SKIP = "skip"
    #: Check every batch's CRC, and end the log before the first bad one, silently: where
    #: Kafka's recovery would truncate.
    TRUNCATE = "truncate"


def segment_files(storage: Storage, directory: str) -> list[tuple[int, str, int]]:
    """(base offset, path, size) of the segments of ``directory`` (``<20 digits>.log``;
    transient suffixes excluded), by base offset; none for a directory deleted meanwhile. One
    listing, so an object store answers with one request however many segments there are."""
    try:
        files = storage.list_files(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for name, size in files.items():
        m = SEGMENT_FILE.match(name)
        if m is not None and m.group(2) == "log":
            out.append((int(m.group(1)), Storage.join(directory, name), size))
    return sorted(out)


def segment_file(directory: str, base: int, suffix: str) -> str:
    """The file of segment ``base`` with ``suffix`` (``.log``, ``.index``, ...) in ``directory``
    (the directory spelled as given)."""
    return Storage.join(directory, filename_prefix(base) + suffix)


@dataclass
class SegmentView:
    """A segment file as listed (``size`` is the listing's) and its offset and time indexes,
    read live on first use."""

    base: int
    path: str
    size: int
    directory: str
    storage: Storage
    _offsets: OffsetIndex | None = None
    _times: TimeIndex | None = None

    @property
    def offsets(self) -> OffsetIndex:
        if self._offsets is None:
            self._offsets = OffsetIndex.read_live(segment_file(self.directory, self.base, ".index"), self.base,
                                                  storage=self.storage)
        return self._offsets

    @property
    def times(self) -> TimeIndex:
        if self._times is None:
            self._times = TimeIndex.read_live(segment_file(self.directory, self.base, ".timeindex"), self.base,
                                              storage=self.storage)
        return self._times

    def open(self) -> FileRecords:
        """The segment for scattered header reads (a small read-ahead when remote)."""
        return FileRecords.open(self.path, storage=self.storage, block_size=SMALL_BLOCK_SIZE)


class PartitionView:
    """One partition directory, read-only: segments, bounds, transactions, times.

    The segments are listed once, when the view is made; each answer is read when first asked
    (the end facts are then kept; the leader-epoch checkpoint and the producer snapshots are
    read on every call). Not thread-safe.

    Args:
        directory: the ``<topic>-<partition>`` directory (a path or a URL).
        storage: its filesystem (default: from ``directory``).
        topic_partition: the partition's name in the log directory's checkpoints (default:
            parsed from the directory's name).
        on_corruption: what bad bytes do (:class:`OnCorruption`).
        logger: where ``SKIP`` warns (default: this module's logger).
    """

    def __init__(self, directory: str | os.PathLike, *, storage: Storage | None = None,
                 topic_partition: tuple[str, int] | None = None, on_corruption: OnCorruption = OnCorruption.RAISE,
                 logger: logging.Logger | None = None) -> None:
        self.directory = directory = os.fspath(directory)
        self.storage = storage = storage if storage is not None else Storage.for_path(directory)
        if topic_partition is None:
            m = PARTITION_DIR.match(Storage.basename(directory))
            topic_partition = (m["topic"], int(m["partition"])) if m is not None else None
        self.topic_partition = topic_partition
        self.on_corruption = on_corruption
        self._logger = logger if logger is not None else logging.getLogger(__name__)
        # one listing gives names and sizes (a segment deleted by retention meanwhile is not listed)
        self.segments: list[SegmentView] = [
            SegmentView(base, path, size, directory, storage) for base, path, size in segment_files(storage, directory)
        ]
        self._end: tuple[int, int, int] | None = None
        self._log_start: int | None = None

    # -- reading batch headers ----------------------------------------------------------------

    def _bad_batch(self, path: str, error: KafkalogError) -> None:
        """A scan met bad bytes: raise, or (``SKIP``, ``TRUNCATE``) let it stop there."""
        if self.on_corruption is OnCorruption.RAISE:
            raise error
        if self.on_corruption is OnCorruption.SKIP:
            self._logger.warning("kafkalog: planning stops reading %s at a bad batch: %s", path, error)

    def _headers(self, i: int, records: FileRecords, position: int) -> Iterator[RecordBatch]:
        """Batch headers of segment ``i`` from ``position`` (to the log end for the last one);
        a batch that cannot be read ends the scan as :class:`OnCorruption` says."""
        limit = self.end_position if i == len(self.segments) - 1 else records.size_in_bytes
        try:
            yield from records.slice(position, max(0, limit - position)).batches(
                validate=self.on_corruption is OnCorruption.TRUNCATE)
        except BAD_BATCH_ERRORS as e:
            self._bad_batch(records.path, e)

    def _batches_from(self, offset: int) -> Iterator[RecordBatch]:
        """Batch headers from the batch holding ``offset`` to the log end (shallow)."""
        for i, segment in enumerate(self.segments):
            nxt = self.segments[i + 1].base if i + 1 < len(self.segments) else None
            if nxt is not None and nxt <= offset:
                continue
            with segment.open() as records:
                position = self.seek(segment, offset, records) if offset > segment.base else 0
                yield from self._headers(i, records, position)

    def batches(self, offset: int | None = None) -> Iterator[RecordBatch]:
        """Batch headers from the batch holding ``offset`` (default: the log start) to the log
        end; records come from each batch's ``records()``. Bad bytes end the scan as
        :class:`OnCorruption` says. Users: the offline schema store (``_schemas``)."""
        return self._batches_from(self.log_start_offset if offset is None else offset)

    def seek(self, segment: SegmentView, offset: int, records: FileRecords) -> int:
        """The position in ``segment`` (open as ``records``) of the offset-index floor entry
        of ``offset``, checked to frame a batch; else 0."""
        position = segment.offsets.lookup(offset).position  # 0 when no entry is at or below it
        if 0 < position < records.size_in_bytes and batch_at(records, position, segment.base):
            return position
        return 0

    # -- bounds -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """The first segment's base offset, raised to ``log-start-offset-checkpoint``'s entry
        (records below it were deleted by DeleteRecords and are not served by a broker)."""
        if self._log_start is None:
            first = self.segments[0].base if self.segments else 0
            checkpoint = Storage.join(Storage.dirname(self.directory), LOG_START_OFFSET_CHECKPOINT)
            try:
                data = self.storage.read_bytes(checkpoint)
                recorded = OffsetCheckpointFile(checkpoint).parse(data).get(self.topic_partition)
            except (CorruptCheckpointError, OSError):
                recorded = None
            self._log_start = recorded if recorded is not None and first < recorded <= self.log_end_offset else first
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The offset after the last batch of the last segment (its base offset when it holds
        none; 0 without segments; :data:`NO_END` when ``SKIP`` met a tail that cannot be framed)."""
        return self._end_facts()[0]

    @property
    def end_position(self) -> int:
        """Byte position after the last whole batch of the last segment (its size when ``SKIP``
        met a tail that cannot be framed)."""
        return self._end_facts()[1]

    def _end_facts(self) -> tuple[int, int, int]:
        """(log end offset, end position, the last batch's partition leader epoch or -1): the
        last segment's last offset-index entry, checked, then a scan of batch headers to the end
        (Kafka's ``LogSegment.readNextOffset``: the last batch's next offset)."""
        if self._end is not None:
            return self._end
        if not self.segments:
            self._end = (0, 0, -1)
            return self._end
        last = self.segments[-1]
        offsets = last.offsets
        position = 0
        with last.open() as records:
            if offsets.entries:
                candidate = offsets.entry(offsets.entries - 1).position
                if 0 < candidate < records.size_in_bytes and batch_at(records, candidate, last.base):
                    position = candidate
            next_offset, end, final = last.base, position, None
            try:
                for batch in records.slice(position).batches(validate=self.on_corruption is OnCorruption.TRUNCATE):
                    next_offset, end, final = batch.next_offset, batch.position + batch.size_in_bytes, batch
            except BAD_BATCH_ERRORS as e:
                if self.on_corruption is OnCorruption.TRUNCATE or records.read(end, LOG_OVERHEAD) == bytes(LOG_OVERHEAD):
                    pass  # where recovery truncates; or a zero header: the preallocated tail of an active segment
                elif self.on_corruption is OnCorruption.RAISE:
                    raise
                else:  # the tail cannot be framed: read to the end of the file, no offset bound
                    self._logger.warning("kafkalog: %s; reading %s to its end", e, last.path)
                    next_offset, end = NO_END, records.size_in_bytes
        epoch = final.partition_leader_epoch if final is not None and final.magic >= MAGIC_V2 else -1
        self._end = (max(next_offset, last.base), end, epoch)
        return self._end

    def latest_epoch(self) -> int:
        """The leader epoch a writer continuing this partition appends with: the greater of the
        last batch's and ``leader-epoch-checkpoint``'s latest, else 0. (A broker's leader never
        appends below an epoch already in the log; Kafka's epoch cache would drop every entry
        at or above a lower epoch appended after them.)"""
        epoch = self._end_facts()[2]
        checkpoint = Storage.join(self.directory, LEADER_EPOCH_CHECKPOINT)
        try:
            entries = LeaderEpochCheckpointFile(checkpoint).parse(self.storage.read_bytes(checkpoint))
        except (CorruptCheckpointError, OSError):
            entries = []
        if entries:
            epoch = max(epoch, entries[-1].epoch)
        return max(epoch, 0)

    # -- transactions -------------------------------------------------------------------------

    def last_stable_offset(self) -> int:
        """The first offset of the earliest transaction with no marker yet, else the log end:
        the ongoing transactions of the newest producer snapshot at or below the log end, then
        the batches after it through a :class:`TransactionTracker` (Kafka rebuilds producer
        state the same way)."""
        end = self.log_end_offset
        scan_from = self.segments[0].base if self.segments else 0
        ongoing: dict[int, int] = {}
        snapshots = []
        for name in self.storage.list_files(self.directory):
            m = SEGMENT_FILE.match(name)
            if m and m.group(2) == "snapshot":
                snapshots.append(int(m.group(1)))
        for offset in sorted((s for s in snapshots if s <= end), reverse=True):
            try:
                path = segment_file(self.directory, offset, ".snapshot")
                entries = decode_snapshot(self.storage.read_bytes(path), file=path)
            except (CorruptCheckpointError, OSError):
                continue
            ongoing = {e.producer_id: e.current_txn_first_offset for e in entries
                       if e.current_txn_first_offset is not None}
            scan_from = offset
            break
        tracker = TransactionTracker(ongoing)
        for batch in self._batches_from(scan_from):
            if batch.last_offset < scan_from:
                continue  # before the snapshot: already in it
            try:
                tracker.on_batch(batch)  # reads a marker's control record
            except BAD_BATCH_ERRORS as e:
                self._bad_batch(self.directory, e)
                break
        return min([end, *tracker.ongoing.values()])

    def aborted_txns(self, from_offset: int) -> list[AbortedTxn]:
        """Aborted transactions (``.txnindex``) of the segments that may hold markers for
        offsets >= ``from_offset``."""
        out: list[AbortedTxn] = []
        for i, segment in enumerate(self.segments):
            nxt = self.segments[i + 1].base if i + 1 < len(self.segments) else None
            if nxt is not None and nxt <= from_offset:
                continue
            path = segment_file(self.directory, segment.base, ".txnindex")
            if self.storage.exists(path):
                index = TransactionIndex(path, segment.base, writable=False, storage=self.storage)
                try:
                    out.extend(t for t in index.all_aborted_txns() if t.last_offset >= from_offset)
                finally:
                    index.close()
        return out

    # -- time ---------------------------------------------------------------------------------

    def max_timestamp(self, i: int) -> int:
        """The largest timestamp in segment ``i``: its time index's last entry (a rolled segment
        ends with one), plus a scan of the batch headers after it for the last segment or when
        the time index is missing."""
        segment = self.segments[i]
        times = segment.times
        best = -1
        position = 0
        if times.entries:
            best, offset = times.entry(times.entries - 1)
            if i + 1 < len(self.segments):
                return best
            with segment.open() as records:
                position = self.seek(segment, offset, records)
        with segment.open() as records:
            for batch in self._headers(i, records, position):
                best = max(best, batch.max_timestamp)
        return best

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The offset of the first record at or after ``timestamp`` (from the log start), or None
        (Kafka's ListOffsets, without the mtime fallback for segments without timestamps)."""
        start = self.log_start_offset
        for i, segment in enumerate(self.segments):
            nxt = self.segments[i + 1].base if i + 1 < len(self.segments) else None
            if nxt is not None and nxt <= start:
                continue
            if self.max_timestamp(i) < timestamp:
                continue
            floor_offset = segment.times.lookup(timestamp).offset  # the base when no entry is at or below it
            with segment.open() as records:
                position = self.seek(segment, max(floor_offset, start), records)
                for batch in self._headers(i, records, position):
                    if batch.max_timestamp >= timestamp and batch.last_offset >= start:
                        for record in batch.records():
                            if record.timestamp >= timestamp and record.offset >= start:
                                return record.offset
        return None
