"""The batch scan of :meth:`kafkalog.segment.LogSegment.recover`, with the compiled core.

Recovery checks every batch of a segment's log (framing, CRC, counts, increasing offsets within
the segment's int32 range), tracks the segment's max timestamp and rebuilds the offset and time
indexes by Kafka's rule (an entry once more than ``index.interval.bytes`` were scanned since
the last). :class:`RecoveryScan` holds that state; its :meth:`~RecoveryScan.run` feeds each
batch to the segment's per-batch step (the pure reference), or - with the compiled core - hands
the log to ``_native.recover_scan`` a chunk at a time: it takes every plain valid v2 batch
(writing the index entries in bulk) and stops at the first one it does not take whole, which the
per-batch step then handles before the scan resumes after it. The two cores give the same
indexes, max timestamp and valid size.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable

from . import native
from .errors import CorruptRecordError, InvalidRecordError, TruncatedRecordError
from .file_records import FileRecords
from .index import OffsetIndex, TimeIndex
from .record import RecordBatch

#: Bytes read per compiled scan call (a batch larger than this is read and handled on its own).
CHUNK = 4 << 20
_RECORD_BATCH_OVERHEAD = 61  # the smallest v2 batch: bounds the entries one chunk can produce
_INT64_MAX = 2**63 - 1
#: What ends the valid part of a segment during recovery (everything after it is truncated).
RECOVERY_STOPS = (CorruptRecordError, InvalidRecordError, TruncatedRecordError)


class RecoveryScan:
    """Where one segment's recovery scan is: the last valid offset, the bytes validated, and
    the position of the last offset index entry."""

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.previous = base_offset - 1
        self.valid_bytes = 0
        self.last_index_entry = 0

    def run(
        self,
        log: FileRecords,
        step: Callable[[RecordBatch], bool],
        *,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        index_interval: int,
        max_timestamp: Callable[[], tuple[int, int]],
        set_max_timestamp: Callable[[int, int], None],
        producer_state: bool,
        latest_epoch: Callable[[], int | None] | None,
        batch_done: Callable[[int], None] | None = None,
    ) -> None:
        """Scan ``log`` from its start; ``step(batch)`` applies the pure rules to one batch
        (False: the valid part ends before it). Recovery's errors end the scan the same way.

        The other arguments serve the compiled scan: the indexes to write, the segment's max
        timestamp and its offset (get and set), whether batches with a producer id must go
        through ``step`` (a producer state to update), the leader-epoch cache's latest epoch
        (None: no cache), and ``batch_done(last_offset)`` for the last batch of each run the
        compiled scan took (the producer state's map end offset).
        """
        try:
            if native.ext is None:
                for batch in log.batches(validate=True):
                    if not step(batch):
                        return
                return
            self._run_native(
                native.ext, log, step, offset_index, time_index, index_interval, max_timestamp, set_max_timestamp,
                producer_state, latest_epoch, batch_done,
            )
        except RECOVERY_STOPS:
            pass  # everything from valid_bytes on is truncated by the caller

    def _run_native(self, ext, log, step, offset_index, time_index, index_interval, max_timestamp,
                    set_max_timestamp, producer_state, latest_epoch, batch_done) -> None:
        end = log.size_in_bytes
        fd, start = log.fileno(), log.start
        chunk = bytearray(min(CHUNK, end))
        cap = len(chunk) // _RECORD_BATCH_OVERHEAD + 1
        entries = array("q", bytes(8 * 4 * cap))
        found = memoryview(entries)
        state = array("q", bytes(8 * 13))
        view = memoryview(chunk)
        while self.valid_bytes < end:
            pos = self.valid_bytes
            length = os.preadv(fd, [view[: min(len(chunk), end - pos)]], start + pos)
            if length == 0:
                return  # the file shrank under us: the rest is gone
            max_ts, max_ts_offset = max_timestamp()
            epoch = _INT64_MAX if latest_epoch is None else latest_epoch()
            state[:] = array("q", (
                self.base_offset, pos, index_interval, log.max_batch_size, -1 if epoch is None else epoch,
                producer_state, offset_index.max_entries - offset_index.entries,
                time_index.max_entries - 1 - time_index.entries, self.previous, self.last_index_entry,
                max_ts, max_ts_offset, time_index.last_entry.timestamp,
            ))
            status, consumed, n_offset, n_time, last_offset = ext.recover_scan(chunk, length, state, entries)
            if n_offset:
                offset_index.append_many(found[:n_offset], found[cap : cap + n_offset])
            if n_time:
                time_index.append_many(found[2 * cap : 2 * cap + n_time], found[3 * cap : 3 * cap + n_time])
            if last_offset >= 0:
                set_max_timestamp(state[10], state[11])
                self.previous, self.last_index_entry = state[8], state[9]
                self.valid_bytes = pos + consumed
                if batch_done is not None:
                    batch_done(last_offset)
            if status == 1:  # the batch at valid_bytes is the pure step's
                batch = next(log.slice(self.valid_bytes).batches(validate=True), None)
                if batch is None or not step(batch):
                    return  # a partial batch at the end, or the valid part ends here
