"""One append to the partition log, before it is written: Kafka's ``analyzeAndValidateRecords``
(framing, CRC and size checks), the follower's offset checks, the epochs the batches carry into
the leader-epoch cache, and what the append reports (:class:`LogAppendInfo`).

Offset assignment and the producer's record rules are :mod:`kafkalog.log_validator`'s; the one
call that checks and writes a request is :mod:`kafkalog.append_request`'s (whose pure twin runs
the functions here); the rest of writing is :meth:`kafkalog.log.Log.append`'s.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from . import native
from .compression import Compression
from .log_config import LogConfig
from .errors import (
    DuplicateSequenceError,
    InvalidOffsetError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnexpectedAppendOffsetError,
)
from .leader_epoch_cache import LeaderEpochFileCache
from .record import MAGIC_V2, NO_TIMESTAMP, RecordBatch
from .memory_records import MemoryRecords, batch_class, frame_entry
from .log_validator import validate_and_assign_offsets

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

    @classmethod
    def nothing(cls, log_start_offset: int) -> LogAppendInfo:
        """An append of no batch (Kafka's ``UNKNOWN_LOG_APPEND_INFO`` with the log start)."""
        return cls(
            first_offset=-1,
            last_offset=-1,
            max_timestamp=NO_TIMESTAMP,
            offset_of_max_timestamp=-1,
            log_append_time=-1,
            log_start_offset=log_start_offset,
            valid_bytes=0,
            record_count=0,
            source_compression=Compression.NONE,
        )

    @classmethod
    def of_duplicate(
        cls, error: DuplicateSequenceError, *, log_start_offset: int, source_compression: Compression
    ) -> LogAppendInfo:
        """An idempotent producer's retry: nothing written, the original's offsets (Kafka)."""
        return cls(
            first_offset=error.first_offset,
            last_offset=error.last_offset,
            max_timestamp=NO_TIMESTAMP,
            offset_of_max_timestamp=-1,
            log_append_time=getattr(error, "timestamp", -1),
            log_start_offset=log_start_offset,
            valid_bytes=0,
            record_count=0,
            source_compression=source_compression,
            duplicate=True,
        )


class PreparedAppend(NamedTuple):
    """One append as it will be written: its bytes (offsets assigned), its batches framed over
    them, and what they hold."""

    data: bytes | bytearray | memoryview
    batches: list[RecordBatch]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    source_compression: Compression = Compression.NONE

    def append_info(self, *, log_start_offset: int, record_count: int) -> LogAppendInfo:
        """What the append reports once written."""
        return LogAppendInfo(
            first_offset=self.first_offset,
            last_offset=self.last_offset,
            max_timestamp=self.max_timestamp,
            offset_of_max_timestamp=self.offset_of_max_timestamp,
            log_append_time=self.log_append_time,
            log_start_offset=log_start_offset,
            valid_bytes=len(self.data),
            record_count=record_count,
            source_compression=self.source_compression,
        )


def source_compression(batches: list[RecordBatch]) -> Compression:
    """The codec the producer used (the last compressed batch's; NONE when none is)."""
    source = Compression.NONE
    for batch in batches:
        if batch.compression is not Compression.NONE:
            source = batch.compression
    return source


def frame_before_lock(
    view: memoryview, *, max_message_bytes: int, assign_offsets: bool, file: str
) -> tuple[list[RecordBatch] | None, int]:
    """Frame an append before the log's lock is taken (:func:`analyze_records`), unless the
    compiled pipeline will frame it under the lock as part of its one call
    (:func:`kafkalog.append_request.append_request`): then ``(None, len(view))``. Here the record core is chosen, so
    the log never asks which one runs. An empty list of batches: nothing to append."""
    if native.ext is not None and len(view):
        return None, len(view)
    return analyze_records(view, max_message_bytes=max_message_bytes, assign_offsets=assign_offsets, file=file)


_rules_cache: tuple[LogConfig | None, tuple] = (None, ())


def rules_of(config: LogConfig) -> tuple:
    """The topic settings the compiled pipeline checks, in its argument order (configs are
    frozen: the last one's are kept, as most appends of a process go to logs sharing one)."""
    global _rules_cache
    cached_config, rules = _rules_cache
    if cached_config is not config:
        rules = (
            config.max_message_bytes, config.log_append_time, config.timestamp_before_max_ms,
            config.timestamp_after_max_ms, config.compact,
        )
        _rules_cache = (config, rules)
    return rules


def prepare_leader_append(
    data: memoryview,
    batches: list[RecordBatch],
    *,
    first_offset: int,
    config: LogConfig,
    now_ms: int,
    leader_epoch: int | None,
    from_client: bool,
) -> PreparedAppend:
    """A leader's append: offsets from ``first_offset`` assigned (and the producer's rules
    checked) by :func:`kafkalog.log_validator.validate_and_assign_offsets` on a private copy."""
    buf = bytearray(data)
    # Re-frame over the private copy: offsets are rewritten in place there.
    batches = [batch_class(b.magic)(buf, b.position, position=b.position, file=b.file) for b in batches]
    result = validate_and_assign_offsets(
        buf,
        batches,
        first_offset=first_offset,
        config=config,
        now_ms=now_ms,
        leader_epoch=leader_epoch,
        from_client=from_client,
    )
    return PreparedAppend(
        data=result.records,
        # Frame again: headers were rewritten (or the batch rebuilt) after the first framing.
        batches=list(MemoryRecords(result.records).batches()),
        first_offset=first_offset,
        last_offset=result.next_offset - 1,
        max_timestamp=result.max_timestamp,
        offset_of_max_timestamp=result.offset_of_max_timestamp,
        # Kafka reports the append time under LogAppendTime whatever the magic (v0 stores none).
        log_append_time=now_ms if config.log_append_time else -1,
    )


def prepare_follower_append(
    data: memoryview,
    batches: list[RecordBatch],
    *,
    log_end_offset: int,
    log_start_offset: int,
    partition: str,
    file: str,
) -> PreparedAppend:
    """A follower's (or a copy's) append: the batches keep their offsets, which must continue
    the log (:func:`check_follower_offsets`)."""
    first_offset, last_offset = check_follower_offsets(
        batches, log_end_offset=log_end_offset, log_start_offset=log_start_offset, partition=partition, file=file
    )
    max_ts, max_ts_offset = NO_TIMESTAMP, -1
    for batch in batches:
        if batch.max_timestamp > max_ts:
            max_ts, max_ts_offset = batch.max_timestamp, batch.last_offset
    return PreparedAppend(
        data=data,
        batches=batches,
        first_offset=first_offset,
        last_offset=last_offset,
        max_timestamp=max_ts,
        offset_of_max_timestamp=max_ts_offset,
        log_append_time=-1,
    )


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
                raise TruncatedRecordError(
                    f"the append ends inside a batch ({end - pos} bytes)", file=path, position=pos
                )
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
                f"out of order offsets found in append to {partition}: {[b.last_offset for b in batches[:10]]}",
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
            first_offset=first.base_offset,
            last_offset=previous,
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
