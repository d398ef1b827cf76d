"""Kafka's recovery of a log segment: the rule applied to each batch, and the scan that applies it
to a segment's log with the compiled core.

:class:`RecoveryStep` is the one per-batch rule of Kafka's ``LogSegment.recover``, used by
:meth:`kafkalog.segment.LogSegment.recover`, by index rebuilding (:mod:`kafkalog.index_rebuild`)
and by ``verify`` (:mod:`kafkalog.verify`), so the three agree byte for byte:

- the offsets of a batch must increase (its last offset above the previous batch's, the first
  batch's above the base offset minus one) and stay within the 32-bit range of the segment's
  base offset; otherwise the valid part of the segment ends before the batch (the base offset is
  outside the CRC, so a flipped bit there shows only this way);
- the segment's max timestamp is the largest batch max timestamp, with the last offset of its
  batch;
- before a batch is counted, if more than ``index.interval.bytes`` were counted since the last
  offset index entry, add the offset entry (batch last offset, batch position) and the time entry
  (max timestamp so far, its offset; only if the timestamp grew); the first batch is never
  indexed; at the end one time entry for the largest timestamp (:meth:`RecoveryStep.finish`).

:class:`SegmentRecovery` is one segment's whole recovery: the step over its indexes, plus what the
partition learns from each v2 batch (leader epochs, the producer state or the transactions that
abort, which go to the ``.txnindex``). Its :meth:`~SegmentRecovery.run` feeds every batch to
:meth:`~SegmentRecovery.on_batch` (the pure reference), or - with the compiled core - hands the
log to ``_native.recover_scan`` a chunk at a time: it takes every plain valid v2 batch (writing
the index entries in bulk) and stops at the first one it does not take whole, which
:meth:`~SegmentRecovery.on_batch` then handles before the scan resumes after it. The two cores
give the same indexes, max timestamp and valid size.
"""

from __future__ import annotations

import enum
import os
from array import array

from . import native
from .errors import CorruptRecordError, InvalidRecordError, TruncatedRecordError
from .file_records import FileRecords
from .index import OffsetIndex, TimeIndex
from .leader_epoch_cache import LeaderEpochFileCache
from .producer_state.manager import ProducerStateManager
from .record import MAGIC_V2, RecordBatch
from .recordbatch import RECORD_BATCH_OVERHEAD
from .transaction_index import AbortedTxn, TransactionIndex
from .transaction_tracker import TransactionTracker
from .varint import INT32_MAX
from .varint import INT64_MAX as _INT64_MAX

#: The largest offset relative to a segment's base offset (its indexes store 32-bit relative offsets).
MAX_RELATIVE_OFFSET = INT32_MAX
#: Bytes read per compiled scan call (a batch larger than this is read and handled on its own).
CHUNK = 4 << 20
#: What ends the valid part of a segment during recovery (everything after it is truncated).
RECOVERY_STOPS = (CorruptRecordError, InvalidRecordError, TruncatedRecordError)


class Refusal(enum.Enum):
    """Why a valid batch's offsets end the valid part of a segment."""

    #: its last offset is not above the previous batch's (or falls below the base offset)
    BACKWARDS = "backwards"
    #: its last offset is beyond the 32-bit range of the base offset
    OVERFLOW = "overflow"


class RecoveryStep:
    """Kafka's recovery rule for one batch at a time (module docstring), and where a segment's
    scan is: the last valid offset, the bytes counted, the position of the last offset index
    entry, the max timestamp and its offset.

    Without indexes it only checks offsets and follows the max timestamp (``verify``). Not
    thread-safe.
    """

    def __init__(
        self,
        base_offset: int,
        index_interval_bytes: int = 0,
        *,
        offset_index: OffsetIndex | None = None,
        time_index: TimeIndex | None = None,
        max_timestamp: tuple[int, int] = (-1, -1),
    ) -> None:
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.offset_index = offset_index
        self.time_index = time_index
        self.previous = base_offset - 1
        self.valid_bytes = 0
        self.last_index_entry = 0
        self.max_timestamp, self.offset_of_max_timestamp = max_timestamp

    def refusal(self, batch: RecordBatch) -> Refusal | None:
        """Why the valid part of the segment ends before ``batch`` (a valid batch), or None.
        Kafka drops the whole segment then, or splits it for data of brokers before 0.11."""
        last_offset = batch.last_offset
        if last_offset <= self.previous:
            return Refusal.BACKWARDS
        if last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            return Refusal.OVERFLOW
        return None

    def take(self, batch: RecordBatch) -> None:
        """Count ``batch`` (one :meth:`refusal` let through): the max timestamp, the index
        entries due before it, the bytes."""
        last_offset = batch.last_offset
        self.previous = last_offset
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = batch.max_timestamp, last_offset
        if self.offset_index is not None and self.valid_bytes - self.last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, self.valid_bytes)
            if self.time_index is not None:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.last_index_entry = self.valid_bytes
        self.valid_bytes += batch.size_in_bytes

    def __call__(self, batch: RecordBatch) -> bool:
        """:meth:`take` ``batch`` unless :meth:`refusal` refuses it; False: the valid part ends."""
        if self.refusal(batch) is not None:
            return False
        self.take(batch)
        return True

    def finish(self) -> None:
        """The last time entry, for the largest timestamp: a normally closed segment always ends
        with one."""
        if self.time_index is not None:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)


class _Slot(enum.IntEnum):
    """The slots of ``_native.recover_scan``'s int64 state array (``src/native/recover.c``,
    ``recover_scan``: read into its ``scan_job``); the last five are written back."""

    BASE_OFFSET = 0
    POSITION = 1  # of the chunk's first byte, relative to the segment's start
    INDEX_INTERVAL = 2
    MAX_BATCH_SIZE = 3
    LATEST_EPOCH = 4  # -1: none known; INT64_MAX: no leader-epoch cache to feed
    PRODUCER_STATE = 5  # 1: every batch with a producer id goes to the pure step
    OFFSET_ROOM = 6  # offset index entries that still fit
    TIME_ROOM = 7
    PREVIOUS = 8
    LAST_INDEX_ENTRY = 9
    MAX_TIMESTAMP = 10
    OFFSET_OF_MAX_TIMESTAMP = 11
    LAST_TIME_ENTRY = 12  # the time index's last timestamp


class SegmentRecovery:
    """One segment's recovery scan (module docstring): ``step`` over its offset and time
    indexes, the ``.txnindex`` rebuilt from the markers, and the partition's producer state
    (Kafka's ``LogSegment.updateProducerState``) or, without one, ``tracker``'s transactions,
    and its leader-epoch cache fed with each newer epoch.
    """

    def __init__(
        self,
        step: RecoveryStep,
        txn_index: TransactionIndex,
        *,
        tracker: TransactionTracker | None = None,
        producer_state: ProducerStateManager | None = None,
        leader_epoch_cache: LeaderEpochFileCache | None = None,
    ) -> None:
        self.step = step
        self.txn_index = txn_index
        self.tracker = TransactionTracker() if tracker is None and producer_state is None else tracker
        self.producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache

    def on_batch(self, batch: RecordBatch) -> bool:
        """Kafka's recovery of one valid batch; False: the valid part of the log ends before it."""
        if not self.step(batch):
            return False
        if batch.magic >= MAGIC_V2:
            cache = self.leader_epoch_cache
            if cache is not None:
                epoch, latest = batch.partition_leader_epoch, cache.latest_epoch
                if epoch >= 0 and (latest is None or epoch > latest):
                    cache.assign(epoch, batch.base_offset)
            if self.producer_state is not None:
                self._update_producer_state(batch, self.producer_state)
            else:
                txn = self.tracker.aborted_txn(batch)  # type: ignore[union-attr]
                if txn is not None:
                    self.txn_index.append(txn)
        return True

    def _update_producer_state(self, batch: RecordBatch, producer_state: ProducerStateManager) -> None:
        """Kafka's ``LogSegment.updateProducerState``."""
        if batch.producer_id >= 0:
            completed = producer_state.append_batch(batch, from_client=False)
            if completed is not None:
                if completed.is_aborted:
                    lso = producer_state.last_stable_offset(completed)
                    self.txn_index.append(
                        AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)
                    )
                producer_state.complete_txn(completed)
        producer_state.update_map_end_offset(batch.last_offset + 1)

    def run(self, log: FileRecords) -> None:
        """Scan ``log`` from its start; recovery's errors end the valid part like a refused
        batch (everything from ``step.valid_bytes`` on is the caller's to truncate)."""
        try:
            if native.ext is None:
                for batch in log.batches(validate=True):
                    if not self.on_batch(batch):
                        return
                return
            self._run_native(native.ext, log)
        except RECOVERY_STOPS:
            pass

    def _state(self, log: FileRecords, position: int) -> array:
        """The compiled scan's state (:class:`_Slot`) for a chunk at ``position``."""
        step, cache = self.step, self.leader_epoch_cache
        offset_index, time_index = step.offset_index, step.time_index
        assert offset_index is not None and time_index is not None
        epoch = _INT64_MAX if cache is None else cache.latest_epoch
        state = array("q", bytes(8 * len(_Slot)))
        state[_Slot.BASE_OFFSET] = step.base_offset
        state[_Slot.POSITION] = position
        state[_Slot.INDEX_INTERVAL] = step.index_interval_bytes
        state[_Slot.MAX_BATCH_SIZE] = log.max_batch_size
        state[_Slot.LATEST_EPOCH] = -1 if epoch is None else epoch
        state[_Slot.PRODUCER_STATE] = self.producer_state is not None
        state[_Slot.OFFSET_ROOM] = offset_index.max_entries - offset_index.entries
        state[_Slot.TIME_ROOM] = time_index.max_entries - 1 - time_index.entries
        state[_Slot.PREVIOUS] = step.previous
        state[_Slot.LAST_INDEX_ENTRY] = step.last_index_entry
        state[_Slot.MAX_TIMESTAMP] = step.max_timestamp
        state[_Slot.OFFSET_OF_MAX_TIMESTAMP] = step.offset_of_max_timestamp
        state[_Slot.LAST_TIME_ENTRY] = time_index.last_entry.timestamp
        return state

    def _run_native(self, ext, log: FileRecords) -> None:
        step = self.step
        offset_index, time_index = step.offset_index, step.time_index
        assert offset_index is not None and time_index is not None
        end = log.size_in_bytes
        fd, start = log.fileno(), log.start
        chunk = bytearray(min(CHUNK, end))
        cap = len(chunk) // RECORD_BATCH_OVERHEAD + 1  # the most entries one chunk can produce
        entries = array("q", bytes(8 * 4 * cap))
        found = memoryview(entries)
        view = memoryview(chunk)
        while step.valid_bytes < end:
            pos = step.valid_bytes
            length = os.preadv(fd, [view[: min(len(chunk), end - pos)]], start + pos)
            if length == 0:
                return  # the file shrank under us: the rest is gone
            state = self._state(log, pos)
            status, consumed, n_offset, n_time, last_offset = ext.recover_scan(chunk, length, state, entries)
            if n_offset:
                offset_index.append_many(found[:n_offset], found[cap : cap + n_offset])
            if n_time:
                time_index.append_many(found[2 * cap : 2 * cap + n_time], found[3 * cap : 3 * cap + n_time])
            if last_offset >= 0:
                step.max_timestamp = state[_Slot.MAX_TIMESTAMP]
                step.offset_of_max_timestamp = state[_Slot.OFFSET_OF_MAX_TIMESTAMP]
                step.previous, step.last_index_entry = state[_Slot.PREVIOUS], state[_Slot.LAST_INDEX_ENTRY]
                step.valid_bytes = pos + consumed
                if self.producer_state is not None:
                    self.producer_state.update_map_end_offset(last_offset + 1)
            if status == 1:  # the batch at valid_bytes is the pure step's
                batch = next(log.slice(step.valid_bytes).batches(validate=True), None)
                if batch is None or not self.on_batch(batch):
                    return  # a partial batch at the end, or the valid part ends here

