"""One partition directory as the driver plans it: its segments, its bounds, its indexes.

The directory may be live (a broker or a ``Log`` appending, rolling, deleting): the offset and
time indexes are read with :meth:`kafkalog.OffsetIndex.read_live` (copied, never mapped, cut
to their live entries), and every position taken from an index entry is checked to frame a
batch before it is trusted (:func:`kafkalog.resync.batch_at`). A segment deleted meanwhile is left out.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from .. import AbortedTxn, FileRecords, OffsetIndex, RecordBatch, TimeIndex, TransactionIndex
from ..checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from ..filenames import SEGMENT_FILE
from ..producer_state.snapshot import decode_snapshot
from ..record import LOG_OVERHEAD, MAGIC_V2
from ..remote import SMALL_BLOCK_SIZE, Storage
from ..resync import batch_at
from ..errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnsupportedCodecError,
)
from ._discovery import _PartitionDir, _segment_file, _segments
from ._options import _ReadOptions

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"

#: What reading a batch raises when its bytes are bad (skipped with ``failOnCorruption=false``).
_READ_ERRORS = (CorruptRecordError, InvalidRecordError, TruncatedRecordError, UnsupportedCodecError, RecordTooLargeError)
#: An offset above every real one: the end of a log whose tail cannot be framed.
_NO_END = 2**63 - 1


@dataclass
class _Segment:
    """A segment file and its offset and time indexes, read live on first use."""

    base: int
    path: str
    size: int
    _offsets: OffsetIndex | None = None
    _times: TimeIndex | None = None
    directory: str = ""
    storage: Storage | None = None

    @property
    def offsets(self) -> OffsetIndex:
        if self._offsets is None:
            self._offsets = OffsetIndex.read_live(_segment_file(self.directory, self.base, ".index"), self.base,
                                                  storage=self.storage)
        return self._offsets

    @property
    def times(self) -> TimeIndex:
        if self._times is None:
            self._times = TimeIndex.read_live(_segment_file(self.directory, self.base, ".timeindex"), self.base,
                                              storage=self.storage)
        return self._times

    def open(self) -> FileRecords:
        """The segment for planning's scattered header reads (a small read-ahead when remote)."""
        return FileRecords.open(self.path, storage=self.storage, block_size=SMALL_BLOCK_SIZE)


def _span(batch: RecordBatch) -> tuple[int, int]:
    """The file positions [start, end) of a batch read from a file (its position is set)."""
    assert batch.position is not None
    return batch.position, batch.position + batch.size_in_bytes


def _first_entry_after(index: OffsetIndex, position: int) -> int:
    """The slot of the first offset-index entry whose position is above ``position`` (the
    entries' positions ascend), or ``index.entries``."""
    return bisect.bisect_right(range(index.entries), position, key=lambda i: index.entry(i).position)


class _PartitionLog:
    """One partition directory as the driver plans it: segments, bounds, indexes (read-only)."""

    def __init__(self, pdir: _PartitionDir, options: _ReadOptions) -> None:
        self.dir = pdir
        self.options = options
        self.storage = storage = options.storage
        # one listing gives names and sizes (a segment deleted by retention meanwhile is not listed)
        self.segments: list[_Segment] = [
            _Segment(base, path, size, directory=pdir.path, storage=storage)
            for base, path, size in _segments(storage, pdir.path)
        ]
        self._end: tuple[int, int, int] | None = None
        self._log_start: int | None = None

    def _headers(self, i: int, records: FileRecords, position: int) -> Iterator[RecordBatch]:
        """Batch headers of segment ``i`` from ``position`` (to the planned end for the last
        one); a batch that cannot be framed raises, or (``failOnCorruption=false``) ends the
        scan with a warning."""
        limit = self.end_position if i == len(self.segments) - 1 else records.size_in_bytes
        try:
            yield from records.slice(position, max(0, limit - position)).batches()
        except _READ_ERRORS as e:
            if self.options.fail_on_corruption:
                raise
            _log.warning("kafkalog: planning stops reading %s at a bad batch: %s", records.path, e)

    @property
    def tp(self) -> str:
        return f"{self.dir.topic}-{self.dir.partition}"

    # -- bounds -----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """The first segment's base offset, raised to ``log-start-offset-checkpoint``'s entry
        (records below it were deleted by DeleteRecords and are not served by a broker)."""
        if self._log_start is None:
            first = self.segments[0].base if self.segments else 0
            checkpoint = Storage.join(Storage.dirname(self.dir.path), LOG_START_OFFSET_CHECKPOINT)
            try:
                data = self.storage.read_bytes(checkpoint)
                recorded = OffsetCheckpointFile(checkpoint).parse(data).get((self.dir.topic, self.dir.partition))
            except (CorruptCheckpointError, OSError):
                recorded = None
            self._log_start = recorded if recorded is not None and first < recorded <= self.end_offset else first
        return self._log_start

    @property
    def end_offset(self) -> int:
        return self._end_facts()[0]

    @property
    def end_position(self) -> int:
        """Byte position after the last whole batch of the last segment (as planned)."""
        return self._end_facts()[1]

    def _end_facts(self) -> tuple[int, int, int]:
        """(log end offset, end of the last whole batch of the last segment, that batch's
        partition leader epoch or -1): the last segment's last offset-index entry, then a scan
        of batch headers to the end."""
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
                for batch in records.slice(position).batches():
                    next_offset, end, final = batch.next_offset, _span(batch)[1], batch
            except _READ_ERRORS as e:
                if records.read(end, LOG_OVERHEAD) == bytes(LOG_OVERHEAD):
                    pass  # a zero header: the preallocated tail of an active segment (preallocate=true)
                elif self.options.fail_on_corruption:
                    raise
                else:  # the tail cannot be framed: read to the end of the file, no offset bound
                    _log.warning("kafkalog: %s; reading %s to its end", e, last.path)
                    next_offset, end = _NO_END, records.size_in_bytes
        epoch = final.partition_leader_epoch if final is not None and final.magic >= MAGIC_V2 else -1
        self._end = (max(next_offset, last.base), end, epoch)
        return self._end

    def latest_epoch(self) -> int:
        """The leader epoch a writer continuing this partition appends with: the greater of the
        last batch's and ``leader-epoch-checkpoint``'s latest, else 0. (A broker's leader never
        appends below an epoch already in the log; Kafka's epoch cache would drop every entry
        at or above a lower epoch appended after them.)"""
        epoch = self._end_facts()[2]
        checkpoint = Storage.join(self.dir.path, LEADER_EPOCH_CHECKPOINT)
        try:
            entries = LeaderEpochCheckpointFile(checkpoint).parse(self.storage.read_bytes(checkpoint))
        except (CorruptCheckpointError, OSError):
            entries = []
        if entries:
            epoch = max(epoch, entries[-1].epoch)
        return max(epoch, 0)

    def last_stable_offset(self) -> int:
        """The first offset of the earliest transaction with no marker yet, else the log end:
        ongoing transactions from the newest producer snapshot at or below the log end, then
        the batch headers after it (Kafka rebuilds producer state the same way)."""
        end = self.end_offset
        ongoing: dict[int, int] = {}
        scan_from = self.segments[0].base if self.segments else 0
        snapshots = []
        for name in self.storage.list_files(self.dir.path):
            m = SEGMENT_FILE.match(name)
            if m and m.group(2) == "snapshot":
                snapshots.append(int(m.group(1)))
        for offset in sorted((s for s in snapshots if s <= end), reverse=True):
            try:
                path = _segment_file(self.dir.path, offset, ".snapshot")
                entries = decode_snapshot(self.storage.read_bytes(path), file=path)
            except (CorruptCheckpointError, OSError):
                continue
            ongoing = {e.producer_id: e.current_txn_first_offset for e in entries if e.current_txn_first_offset is not None}
            scan_from = offset
            break
        for batch in self._batches_from(scan_from):
            if batch.magic < MAGIC_V2 or not batch.is_transactional or batch.last_offset < scan_from:
                continue
            if batch.is_control:
                ongoing.pop(batch.producer_id, None)
            else:
                ongoing.setdefault(batch.producer_id, batch.base_offset)
        return min([end, *ongoing.values()])

    def _batches_from(self, offset: int) -> Iterator[RecordBatch]:
        """Batch headers from the batch holding ``offset`` to the end (shallow)."""
        for i, segment in enumerate(self.segments):
            nxt = self.segments[i + 1].base if i + 1 < len(self.segments) else None
            if nxt is not None and nxt <= offset:
                continue
            with segment.open() as records:
                position = self.seek(segment, offset, records) if offset > segment.base else 0
                yield from self._headers(i, records, position)

    def seek(self, segment: _Segment, offset: int, records: FileRecords) -> int:
        """The position of the offset-index floor entry of ``offset`` (checked), else 0."""
        position = segment.offsets.lookup(offset).position  # 0 when no entry is at or below it
        if 0 < position < records.size_in_bytes and batch_at(records, position, segment.base):
            return position
        return 0

    def aborted_txns(self, from_offset: int) -> list[AbortedTxn]:
        """Aborted transactions (``.txnindex``) of the segments that may hold markers for
        offsets >= ``from_offset``."""
        out: list[AbortedTxn] = []
        for i, segment in enumerate(self.segments):
            nxt = self.segments[i + 1].base if i + 1 < len(self.segments) else None
            if nxt is not None and nxt <= from_offset:
                continue
            path = _segment_file(self.dir.path, segment.base, ".txnindex")
            if self.storage.exists(path):
                index = TransactionIndex(path, segment.base, writable=False, storage=self.storage)
                try:
                    out.extend(t for t in index.all_aborted_txns() if t.last_offset >= from_offset)
                finally:
                    index.close()
        return out

    # -- time -------------------------------------------------------------------------------

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
