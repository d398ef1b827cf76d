"""One append to the partition log, before it is written: Kafka's ``analyzeAndValidateRecords``
(framing, CRC and size checks), the follower's offset checks, the epochs the batches carry into
the leader-epoch cache, and what the append reports (:class:`LogAppendInfo`).

Offset assignment and the producer's record rules are :mod:`kafkalog.validator`'s; writing is
:meth:`kafkalog.log.Log.append`'s.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from .compression import Compression
from .errors import (
    InvalidOffsetError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnexpectedAppendOffsetError,
)
from .leader_epoch import LeaderEpochFileCache
from .record import MAGIC_V2, RecordBatch
from .records import batch_class, frame_entry
from .segment import LogSegment

_log = logging.getLogger("kafkalog.log")


class LogAppendInfo(NamedTuple):
    """What one append wrote (Kafka's ``LogAppendInfo``).

    Attributes:
        first_offset: offset of the first record (-1 when nothing was appended).
        last_offset: offset of the last record.
        max_timestamp: largest timestamp appended (the append time under LogAppendTime).
        offset_of_max_timestamp: last offset of the batch holding it (-1 without timestamps).
        log_append_time: the append time stamped, or -1 under CreateTime.
        log_start_offset: the log start offset after the append.
        valid_bytes: bytes written.
        record_count: records written.
        source_compression: the codec the producer used.
        duplicate: the batch repeats one already in the log (an idempotent producer's retry):
            nothing was written and the offsets are those of the original, as Kafka answers.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    valid_bytes: int
    record_count: int
    source_compression: Compression
    duplicate: bool = False


def analyze_records(
    view: memoryview, *, max_message_bytes: int, assign_offsets: bool, file: str
) -> tuple[list[RecordBatch], int]:
    """Frame and CRC-check every batch, sizes against ``max.message.bytes`` (Kafka's
    ``analyzeAndValidateRecords``); return the batches and the bytes they cover. A leader's
    append (``assign_offsets``) must end on a batch boundary."""
    max_size, path = max_message_bytes, file
    batches: list[RecordBatch] = []
    pos, end = 0, len(view)
    while pos < end:
        framed = frame_entry(view, pos, end - pos, file=path, position=pos)
        if framed is None:
            if assign_offsets:
                raise TruncatedRecordError(f"the append ends inside a batch ({end - pos} bytes)", file=path, position=pos)
            break  # a follower's fetch response may end inside a batch
        size, magic = framed
        if size > max_size:
            raise RecordTooLargeError(
                f"the record batch size in the append is {size} bytes which exceeds the maximum configured "
                f"value of {max_size} (max.message.bytes)",
                file=path,
                position=pos,
            )
        batch = batch_class(magic)(view, pos, position=pos, file=path)
        batch.ensure_valid()
        batches.append(batch)
        pos += size
    return batches, pos


def check_follower_offsets(
    batches: list[RecordBatch], *, log_end_offset: int, log_start_offset: int, partition: str, file: str
) -> tuple[int, int]:
    """Kafka's follower checks: increasing offsets that start at or after the log end. Returns the
    first and the last offset of the append (for v0/v1 the first batch's last offset)."""
    end = log_end_offset
    first = batches[0]
    first_or_last = first.base_offset if first.magic >= MAGIC_V2 else first.last_offset
    previous = -1
    for batch in batches:
        if batch.last_offset <= previous:
            raise InvalidOffsetError(
                f"out of order offsets found in append to {partition}: "
                f"{[b.last_offset for b in batches[:10]]}",
                file=batch.file,
                position=batch.position,
            )
        previous = batch.last_offset
    if first_or_last < end:
        raise UnexpectedAppendOffsetError(
            f"unexpected offset in append to {partition}: first offset or last offset of the "
            f"first batch {first_or_last} is less than the next offset {end}; last offset in append "
            f"{previous}; log start offset {log_start_offset}",
            file=file,
        )
    return (first.base_offset if first.magic >= MAGIC_V2 else first_or_last), previous


def assign_epochs(cache: LeaderEpochFileCache, batches: list[RecordBatch]) -> None:
    """Record the epochs stamped on v2 batches; legacy batches clear the history (Kafka)."""
    for batch in batches:
        if batch.magic >= MAGIC_V2:
            epoch = batch.partition_leader_epoch
            if epoch >= 0:
                latest = cache.latest_entry
                if latest is None or epoch != latest.epoch or batch.base_offset < latest.start_offset:
                    cache.assign(epoch, batch.base_offset)
        elif cache.non_empty:
            _log.warning("clearing the leader epoch cache: appending a v%d message", batch.magic)
            cache.clear_and_flush()


def rebuild_leader_epochs(cache: LeaderEpochFileCache, segments: list[LogSegment], log_start_offset: int) -> None:
    """Recreate the epoch history from batch headers (after a corrupt checkpoint)."""
    entries = []
    latest = -1
    for segment in segments:
        for batch in segment.log.batches():
            epoch = batch.partition_leader_epoch
            if batch.magic >= MAGIC_V2 and epoch > latest:
                entries.append((epoch, batch.base_offset))
                latest = epoch
    cache.assign_all(entries)
    cache.truncate_from_start(log_start_offset)
