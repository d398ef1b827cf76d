"""One append request checked and written in one call (issue 29): a leader's or a follower's
batches framed, validated, offset (a leader's) or checked for increasing offsets (a follower's),
then written to the active segment with the offset and time index entries Kafka's
``LogSegment.append`` adds every ``index.interval.bytes``.

:func:`append_request` runs the compiled ``_native.append_request`` (the GIL released from the
copy to the last index write) and falls back to the pure twin :func:`append_request_py` for
what the compiled code does not take (v0/v1, a leader's compressed batch that Kafka recompresses,
a record rule to examine record by record) or refuses (the twin then raises the typed,
positioned error). Both return the same :data:`Result`.

A leader's compressed request (one v2 batch: Kafka refuses a compressed append of more) goes
through the compiled call too, as Kafka's ``validateMessagesAndAssignOffsetsCompressed`` assigns
in place when the codec stays (kafkalog keeps the producer's codec, Kafka's
``compression.type=producer``): :func:`compressed_records` checks the batch as the twin does
before it decompresses (size, CRC-32C, codec, counts), decompresses its records with the codec
package (one bounded call, :meth:`~kafkalog.recordbatch.DefaultRecordBatch.payload`: the C core
links no codec) and hands them over; the compiled call walks and checks them (offset deltas in
sequence, timestamps, keys of a compacted topic, the count), rewrites only the batch header
(base offset, epoch, max timestamp; the CRC when a covered field changed) and writes the
compressed bytes as they came. Offset deltas out of sequence make Kafka recompress: that, and a
request that cannot be decompressed, is the twin's. v0/v1 stay with the twin (their messages
carry each its own offset and CRC-32, a v0 wrapper is always recompressed, and the epoch cache
is cleared per request: Python's decisions anyway).

The results:

* ``WRITTEN``: the request is in the segment file and its index entries are written; the caller
  updates the segment's counters (:meth:`kafkalog.segment.LogSegment.note_request`), the
  leader-epoch cache (from ``epochs``), the producer state's map end and the log end.
* ``PREPARED``: checked, not written, because a decision per request is Python's: a batch
  carries a producer id (sequence and epoch checks), a batch is v0/v1 (the epoch cache is
  cleared), or no segment was given. ``data`` holds a leader's rewritten bytes (None for a
  follower: the caller's own bytes), ``positions`` its batches and ``producers`` the header facts
  of the batches with a producer id (:class:`ProducerBatch`; None when a batch is v0/v1). Once
  the producer state has been checked from those facts, :func:`write_prepared` writes the same
  bytes (the compiled ``_native.append_write``, or its twin :func:`write_prepared_py`).
* ``ROLL``: the same, because the request does not go into the active segment as it is (Kafka's
  ``shouldRoll``: size, age, full index, relative offset range) or an index rule would refuse
  the entry; Kafka rolls only between appends, so the caller rolls and writes it whole.
* ``FAILED``: a write failed (``(FAILED, stage, errno, written)``): the caller cuts the log
  back (:meth:`kafkalog.log.Log` does it as for any failed append) and raises ``OSError``.

``segment`` is the tuple :meth:`~kafkalog.segment.LogSegment.append_job` gives (the active
segment's descriptors, size, counters and the roll settings), or None to check only.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from . import native
from .errors import KafkalogError, RecordTooLargeError
from .index import OffsetIndex, TimeIndex
from .log_append import (
    analyze_records,
    prepare_follower_append,
    rules_of,
    prepare_leader_append,
    source_compression,
)
from .log_config import LogConfig
from .record import COMPRESSION_CODEC_MASK, LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V2, RecordBatch
from .recordbatch import ATTRIBUTES_OFFSET, LENGTH_OFFSET, RECORD_BATCH_OVERHEAD, DefaultRecordBatch
from .memory_records import batch_class

WRITTEN, PREPARED, ROLL, FAILED = 0, 1, 2, 3
#: Which write failed (a FAILED result's ``stage``).
STAGE_LOG, STAGE_OFFSET_INDEX, STAGE_TIME_INDEX = 1, 2, 3

_INT32_MAX = 2**31 - 1
#: os.pwrite as imported: a replacement installed later (a test's injected short write or
#: ENOSPC) is handed to the compiled call, which then writes through it.
_PWRITE = os.pwrite
_OFFSET_ENTRY = OffsetIndex._ENTRY_STRUCT
_TIME_ENTRY = TimeIndex._ENTRY_STRUCT
#: The low byte of the v2 attributes, which holds the codec bits.
_CODEC_BYTE = ATTRIBUTES_OFFSET + 1


class SegmentJob(NamedTuple):
    """The active segment as one request's write needs it (``LogSegment.append_job``)."""

    fd: int
    position: int
    base_offset: int
    max_segment_bytes: int
    roll_ts: int  # the rolling-based timestamp, -1 when none
    roll_ms: int  # segment.ms minus the jitter
    index_interval: int
    bytes_since_index: int
    oi_fd: int
    oi_entries: int
    oi_capacity: int
    oi_last_offset: int
    ti_fd: int
    ti_entries: int
    ti_capacity: int
    ti_last_ts: int
    ti_last_offset: int
    seg_max_ts: int
    seg_max_ts_offset: int


class Result(NamedTuple):
    """What a request came to (the compiled call returns the same fields as a plain tuple)."""

    status: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    valid_bytes: int
    record_count: int
    codec: int  # the last compressed batch's codec id, 0 when none (source_compression)
    epochs: list[tuple[int, int]]  # (epoch, base offset) where the batches' epoch changes
    indexed: int  # WRITTEN: 0, 1 (an offset entry) or 2 (offset and time entries)
    data: bytes | bytearray | None  # PREPARED/ROLL: a leader's rewritten bytes
    positions: tuple[int, ...] | None  # PREPARED/ROLL: where the batches start in them
    #: PREPARED/ROLL: the fields of ProducerBatch of each batch with a producer id, () when none
    #: has one, None when a batch is v0/v1 (Python writes those); WRITTEN: ().
    producers: tuple[tuple, ...] | None


class ProducerBatch(NamedTuple):
    """The header facts of one v2 batch with a producer id, as the producer-state checks read
    them (:meth:`kafkalog.producer_state.manager.ProducerStateManager.analyze_batches`: Kafka's
    ``analyzeAndValidateProducerState`` reads only the batch header of a data batch)."""

    position: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    max_timestamp: int
    base_offset: int
    last_offset: int
    is_transactional: bool
    is_control: bool

    magic = MAGIC_V2  # only v2 batches have producer state


def append_request(
    view: memoryview,
    *,
    leader: bool,
    log_end_offset: int,
    log_start_offset: int,
    config: LogConfig,
    now_ms: int,
    leader_epoch: int | None,
    from_client: bool,
    segment: tuple | None,
    partition: str,
    file: str,
    batches: list[RecordBatch] | None = None,
) -> tuple | None:
    """Check one request and, when nothing is left to decide in Python, write it (see the
    module docstring); None when it holds no batch. ``batches`` were framed already (by the pure
    core, before the log's lock): the pure twin goes on from them.

    Raises:
        The errors of :meth:`kafkalog.log.Log.append` for bad batches (from the pure twin).
    """
    ext = native.ext
    if ext is not None and batches is None and len(view) and len(view) <= config.segment_bytes:
        body = None
        if leader and len(view) >= RECORD_BATCH_OVERHEAD and view[_CODEC_BYTE] & COMPRESSION_CODEC_MASK:
            body = compressed_records(view, config, file)  # None: the compiled call declines it
        try:
            result = ext.append_request(
                view, leader, log_end_offset, now_ms, *rules_of(config), from_client, leader_epoch is not None,
                -1 if leader_epoch is None else leader_epoch, segment, None if os.pwrite is _PWRITE else os.pwrite,
                body,
            )
        except (native.Invalid, OverflowError):
            result = None  # refused or out of range: the twin words the error, or takes it
        if result is not None:
            return result
    return append_request_py(
        view, leader=leader, log_end_offset=log_end_offset, log_start_offset=log_start_offset, config=config,
        now_ms=now_ms, leader_epoch=leader_epoch, from_client=from_client, segment=segment, partition=partition,
        file=file, batches=batches,
    )


def compressed_records(view: memoryview, config: LogConfig, file: str) -> bytes | None:
    """The records of a leader's request that is one compressed v2 batch, decompressed by the
    codec package for the compiled call (its framing checked first: size within
    ``max.message.bytes``, codec, counts; the output capped as every decompression is); None when
    the request is anything else or a check or the decompression fails (the twin then raises the
    positioned error). The CRC-32C is the compiled call's to check, once: a corrupt batch costs
    at most a capped decompression before the call refuses it and the twin, which checks the CRC
    before decompressing as Kafka's ``analyzeAndValidateRecords`` does, words the error."""
    size = len(view)
    if (
        size < RECORD_BATCH_OVERHEAD
        or view[MAGIC_OFFSET] != MAGIC_V2
        or not view[_CODEC_BYTE] & COMPRESSION_CODEC_MASK
        or size > config.max_message_bytes
        or int.from_bytes(view[LENGTH_OFFSET : LENGTH_OFFSET + 4], "big", signed=True) + LOG_OVERHEAD != size
    ):
        return None  # not one compressed v2 batch: the compiled call declines it, or refuses it
    batch = DefaultRecordBatch(view, 0, position=0, file=file)
    try:
        if batch.count <= 0:
            return None
        return batch.payload()[0]
    except KafkalogError:
        return None


def append_request_py(
    view: memoryview,
    *,
    leader: bool,
    log_end_offset: int,
    log_start_offset: int,
    config: LogConfig,
    now_ms: int,
    leader_epoch: int | None,
    from_client: bool,
    segment: tuple | None,
    partition: str,
    file: str,
    batches: list[RecordBatch] | None = None,
) -> Result | tuple | None:
    """The pure twin of ``_native.append_request`` (the reference): the same contract for every
    magic and codec, errors worded."""
    valid = len(view)
    if batches is None:
        batches, valid = analyze_records(
            view, max_message_bytes=config.max_message_bytes, assign_offsets=leader, file=file
        )
    if not batches:
        return None
    codec = source_compression(batches).value
    if leader:
        prepared = prepare_leader_append(
            view[:valid], batches, first_offset=log_end_offset, config=config, now_ms=now_ms,
            leader_epoch=leader_epoch, from_client=from_client,
        )
        count = prepared.last_offset + 1 - prepared.first_offset
    else:
        prepared = prepare_follower_append(
            view[:valid], batches, log_end_offset=log_end_offset, log_start_offset=log_start_offset,
            partition=partition, file=file,
        )
        count = sum(b.count if b.count is not None else len(b.records()) for b in batches)
    size = len(prepared.data)
    if size > config.segment_bytes:
        # Kafka's check in UnifiedLog.append: an append above segment.bytes fits no segment.
        raise RecordTooLargeError(
            f"message batch size is {size} bytes in append to partition {partition}, which "
            f"exceeds the maximum configured segment size of {config.segment_bytes}",
            file=file,
        )
    framed = prepared.batches
    epochs, previous = [], -1
    legacy = False
    positions, producers, at = [], [], 0
    for batch in framed:
        position = at
        positions.append(at)  # the batches lie end to end from the start of the data
        at += batch.size_in_bytes
        if batch.magic < MAGIC_V2:
            legacy = True
            continue
        if batch.producer_id >= 0:
            producers.append((
                position, batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence,
                batch.max_timestamp, batch.base_offset, batch.last_offset, batch.is_transactional, batch.is_control,
            ))
        epoch = batch.partition_leader_epoch
        if epoch >= 0 and epoch != previous:
            previous = epoch
            epochs.append((epoch, batch.base_offset))
    result = Result(
        PREPARED, prepared.first_offset, prepared.last_offset, prepared.max_timestamp,
        prepared.offset_of_max_timestamp, size, count, codec, epochs, 0,
        prepared.data if leader else None, tuple(positions), None if legacy else tuple(producers),
    )
    if producers or legacy or segment is None:
        return result
    written = write_prepared_py(prepared.data, segment, result.last_offset, result.max_timestamp,
                                result.offset_of_max_timestamp)
    if written[0] == WRITTEN:
        return result._replace(status=WRITTEN, indexed=written[1], data=None, positions=None)
    if written[0] == ROLL:
        return result._replace(status=ROLL)
    return written


def write_prepared(data, segment: tuple, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int) -> tuple:
    """Write a request :func:`append_request` checked but left to Python (``data``: a leader's
    rewritten bytes or a follower's own) into the segment ``segment`` describes, with its index
    entries: ``(WRITTEN, indexed)``, ``(ROLL,)`` when the segment cannot take it as it is (the
    caller rolls, or writes through :meth:`kafkalog.segment.LogSegment.append`, which words an
    index rule's error), or ``(FAILED, stage, errno, written)``."""
    ext = native.ext
    if ext is not None:
        return ext.append_write(data, segment, last_offset, max_timestamp, offset_of_max_timestamp,
                                None if os.pwrite is _PWRITE else os.pwrite)
    return write_prepared_py(data, segment, last_offset, max_timestamp, offset_of_max_timestamp)


def write_prepared_py(data, segment: tuple, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int) -> tuple:
    """The pure twin of ``_native.append_write`` (see :func:`write_prepared`)."""
    job = SegmentJob(*segment)
    size = memoryview(data).nbytes
    placed = _placement(job, size, last_offset, max_timestamp, offset_of_max_timestamp)
    if placed is None:
        return (ROLL,)
    return _write(job, data, size, last_offset, *placed)


def _placement(
    job: SegmentJob, size: int, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int
) -> tuple[int, int] | None:
    """Kafka's ``shouldRoll`` for this request and the index rules that would refuse its
    entries: None when the request must go the pure way, else the segment's max timestamp and
    its offset after it."""
    position = job.position
    if position > job.max_segment_bytes - size:
        return None
    if position > 0 and job.roll_ts >= 0 and max_timestamp - job.roll_ts > job.roll_ms:
        return None
    if job.oi_entries >= job.oi_capacity or job.ti_entries >= job.ti_capacity - 1:
        return None
    if not 0 <= last_offset - job.base_offset <= _INT32_MAX or position > _INT32_MAX:
        return None
    max_ts, max_ts_offset = job.seg_max_ts, job.seg_max_ts_offset
    if max_timestamp > max_ts:
        max_ts, max_ts_offset = max_timestamp, offset_of_max_timestamp
    if job.bytes_since_index > job.index_interval:
        if job.oi_entries and last_offset <= job.oi_last_offset:
            return None
        if job.ti_entries and (max_ts_offset < job.ti_last_offset or max_ts < job.ti_last_ts):
            return None
        if max_ts > job.ti_last_ts and not 0 <= max_ts_offset - job.base_offset <= _INT32_MAX:
            return None
    return max_ts, max_ts_offset


def _pwrite_all(fd: int, data, position: int) -> int:
    """Write all of ``data`` at ``position``; a write that takes nothing is ENOSPC. Raises
    OSError with ``written`` (the bytes that landed) set on it."""
    view = memoryview(data).cast("B")
    written = 0
    try:
        while written < len(view):
            n = os.pwrite(fd, view[written:], position + written)
            if n <= 0:
                raise OSError(28, os.strerror(28))  # ENOSPC
            written += n
    except OSError as e:
        e.written = written  # type: ignore[attr-defined]
        raise
    return written


def _write(job: SegmentJob, data, size: int, last_offset: int, max_ts: int, max_ts_offset: int) -> tuple:
    """``LogSegment._append_at`` on descriptors: the log write, then every
    ``index.interval.bytes`` an offset entry and, when the max timestamp grew, a time entry:
    ``(WRITTEN, indexed)`` or ``(FAILED, stage, errno, written)``."""
    try:
        _pwrite_all(job.fd, data, job.position)
    except OSError as e:
        return (FAILED, STAGE_LOG, e.errno, e.written)  # type: ignore[attr-defined]
    indexed = 0
    if job.bytes_since_index > job.index_interval:
        entry = _OFFSET_ENTRY.pack(last_offset - job.base_offset, job.position)
        try:
            _pwrite_all(job.oi_fd, entry, job.oi_entries * len(entry))
        except OSError as e:
            return (FAILED, STAGE_OFFSET_INDEX, e.errno, size)
        indexed = 1
        if max_ts > job.ti_last_ts:
            entry = _TIME_ENTRY.pack(max_ts, max_ts_offset - job.base_offset)
            try:
                _pwrite_all(job.ti_fd, entry, job.ti_entries * len(entry))
            except OSError as e:
                return (FAILED, STAGE_TIME_INDEX, e.errno, size)
            indexed = 2
    return (WRITTEN, indexed)


def batches_of(result: tuple, view: memoryview, file: str) -> list[RecordBatch]:
    """The batches of a PREPARED or ROLL result, framed over its bytes (a leader's rewritten
    copy, else the caller's ``view``), as the pure path frames them."""
    data, positions = result[10], result[11]
    if data is not None:
        return [batch_class(data[p + 16])(data, p) for p in positions]
    return [_batch_at(view, p, file) for p in positions]


def producer_batches(result: tuple, view: memoryview, file: str) -> list:
    """What the producer-state checks read of a PREPARED or ROLL result's batches with a
    producer id: their header facts (:class:`ProducerBatch`), and for a control batch (whose
    marker record is read) the batch itself, framed over its bytes."""
    data = result[10]
    out: list = []
    for facts in result[12]:
        if facts[9]:  # a control batch: the transaction marker is in its record
            position = facts[0]
            out.append(batch_class(data[position + 16])(data, position) if data is not None
                       else _batch_at(view, position, file))
        else:
            out.append(ProducerBatch._make(facts))
    return out


def _batch_at(view: memoryview, p: int, file: str) -> RecordBatch:
    """The batch at ``p`` of a follower's bytes, framed as the pure path frames it."""
    if view[p + 16] >= MAGIC_V2:
        return DefaultRecordBatch(view, p, position=p, file=file)
    return batch_class(view[p + 16])(view, p, position=p, file=file)

