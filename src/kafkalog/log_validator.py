"""Validation and offset assignment of a leader's append, as Kafka's ``LogValidator`` does it.

The log hands over the batches of one append (already framed, CRC-checked and size-checked) and
the next offset; this module checks what Kafka checks of a producer's records and gives every
batch its offsets:

* **v2**: the base offset (and partition leader epoch) are rewritten in place — both lie outside
  the CRC — and the max timestamp is set to the largest record timestamp, or to the append time
  under ``LogAppendTime`` (that one is inside the CRC, so the CRC is refreshed). A compressed batch
  whose records' offset deltas are not ``0, 1, 2, ...`` is rebuilt, as Kafka rebuilds it.
* **v0/v1 uncompressed**: each message's offset is rewritten in place (outside its CRC); under
  ``LogAppendTime`` a v1 message gets the append time and its timestamp-type bit, and a new CRC-32.
* **v0/v1 compressed**: a v1 wrapper whose inner offsets are ``0..n-1`` keeps its compressed bytes
  and only gets the offset of its last record (and the append time or the max inner timestamp);
  a v0 wrapper (absolute inner offsets) or a v1 wrapper with other inner offsets is recompressed
  with its own codec.

Messages keep their magic (Kafka with a matching ``message.format.version``); kafkalog never
converts between formats.

Checks (Kafka's ``validateBatch`` / ``validateRecord``), for appends from a client: the batch's
offset range agrees with its count and the count is positive (v2), no control batches, a
producer id comes with a sequence; for every append: one magic per append, at most one batch
when it is compressed, inner v0/v1 messages valid and uncompressed, a key on every record of a
compacted topic, CreateTime timestamps within ``message.timestamp.before.max.ms`` /
``message.timestamp.after.max.ms`` of now, and no ``LogAppendTime`` batches from producers.
Every record is decoded, as Kafka iterates every record, so malformed records are refused.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

from .memory_records_builder import RecordBatchBuilder
from .compression import Compression, decompress
from .log_config import LogConfig
from .errors import (
    InvalidRecordError,
    InvalidTimestampError,
    KafkalogError,
    RecordTooLargeError,
)
from .legacy_record import (
    CRC_OFFSET,
    HEADER_V0,
    HEADER_V1,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    LegacyRecordBatch,
)
from .record import (
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    NO_TIMESTAMP,
    Record,
    RecordBatch,
    TimestampType,
)
from .recordbatch import (
    LENGTH_OFFSET,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
#: The offset and size every entry starts with (Kafka's ``LOG_OVERHEAD``).
_ENTRY_PREFIX = struct.Struct(">qi")
assert _ENTRY_PREFIX.size == LOG_OVERHEAD
# The v0/v1 message fields the validator rewrites, from legacy.py's layout: attributes follow
# the magic byte, and v1's timestamp follows them (where v0's key length starts).
_LEGACY_ATTRIBUTES = MAGIC_OFFSET + 1
_LEGACY_TIMESTAMP = _LEGACY_ATTRIBUTES + 1
assert _LEGACY_TIMESTAMP == HEADER_V0.size and _LEGACY_TIMESTAMP + _INT64.size == HEADER_V1.size


class ValidationResult(NamedTuple):
    """The append after validation.

    Attributes:
        records: the batches with their offsets (the same bytes, rewritten, unless rebuilt).
        next_offset: the offset after the last record.
        max_timestamp: the largest timestamp (the append time under LogAppendTime), -1 if none.
        offset_of_max_timestamp: the last offset of the batch holding it (-1 if none).
        log_append_time: the append time stamped, or -1 under CreateTime.
        rebuilt: whether any batch was re-encoded (its size may have changed).
    """

    records: bytes | bytearray
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    rebuilt: bool


def _record_error(batch: RecordBatch, reason: str, cls: type[KafkalogError] = InvalidRecordError) -> KafkalogError:
    return cls(reason, file=batch.file, position=batch.position)


def _check_client_batch(batch: RecordBatch) -> None:
    """Kafka's ``validateBatch`` for appends from a producer."""
    if batch.magic >= MAGIC_V2:
        count = batch.count
        from_offsets = batch.last_offset - batch.base_offset + 1
        if from_offsets <= 0:
            raise _record_error(batch, f"batch has an invalid offset range: [{batch.base_offset}, {batch.last_offset}]")
        if count <= 0:
            raise _record_error(batch, f"invalid reported count for record batch: {count}")
        if from_offsets != count:
            raise _record_error(
                batch,
                f"inconsistent batch offset range [{batch.base_offset}, {batch.last_offset}] and count of records {count}",
            )
    if batch.is_control:
        raise _record_error(batch, "clients are not allowed to write control records")
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        raise _record_error(
            batch, f"invalid sequence number {batch.base_sequence} in record batch with producerId {batch.producer_id}"
        )


def _check_records(
    batch: RecordBatch, records: Sequence[Record], config: LogConfig, now_ms: int, check_keys: bool
) -> int:
    """Kafka's ``validateRecord`` over a batch's records; return the largest record timestamp."""
    create_time = not config.log_append_time
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    bounded = create_time and (before < now_ms or after < 2**63 - 1 - now_ms)
    batch_log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    max_ts = NO_TIMESTAMP
    for record in records:
        if check_keys and record.key is None:
            raise _record_error(batch, f"compacted topic cannot accept message without key (offset {record.offset})")
        ts = record.timestamp
        if create_time and ts != NO_TIMESTAMP:
            if bounded and (now_ms - ts > before or ts - now_ms > after):
                raise _record_error(
                    batch,
                    f"timestamp {ts} of message with offset {record.offset} is out of range. The timestamp should be "
                    f"within [{now_ms - before}, {now_ms + after}]",
                    InvalidTimestampError,
                )
        elif batch_log_append:
            # Kafka's else-branch: only reached under a LogAppendTime topic or a -1 timestamp.
            raise _record_error(
                batch,
                f"invalid timestamp type in message with offset {record.offset}: producer should not set "
                "timestamp type to LogAppendTime",
                InvalidTimestampError,
            )
        if ts > max_ts:
            max_ts = ts
    return max_ts


def validate_and_assign_offsets(
    buf: bytearray,
    batches: Sequence[RecordBatch],
    *,
    first_offset: int,
    config: LogConfig,
    now_ms: int,
    leader_epoch: int | None = None,
    from_client: bool = True,
) -> ValidationResult:
    """Validate the batches of one append held in ``buf`` and assign offsets from ``first_offset``.

    Args:
        buf: the append's bytes; rewritten in place.
        batches: the batches framed over ``buf`` (positions relative to it), CRCs checked.
        first_offset: the log end offset, the offset of the first record.
        config: the topic's settings (timestamp type and bounds, compaction).
        now_ms: the time to check timestamps against and stamp under LogAppendTime.
        leader_epoch: stamped into every v2 batch when given.
        from_client: apply the checks Kafka makes of producer requests (else a coordinator's).

    Raises:
        InvalidRecordError: a rule above is broken (InvalidTimestampError for timestamps).
        CorruptRecordError, UnsupportedCodecError, RecordTooLargeError: from decoding.
    """
    if not batches:
        return ValidationResult(
            records=buf,
            next_offset=first_offset,
            max_timestamp=NO_TIMESTAMP,
            offset_of_max_timestamp=-1,
            log_append_time=-1,
            rebuilt=False,
        )
    first = batches[0]
    compressed = False
    for batch in batches:
        if batch.magic != first.magic:
            raise _record_error(
                batch, f"batch magic {batch.magic} is not the same as the first batch's magic {first.magic}"
            )
        if from_client:
            _check_client_batch(batch)
        if batch.compression is not Compression.NONE:
            compressed = True
    if compressed and len(batches) > 1:
        raise _record_error(batches[1], "compressed outer record has more than one batch")
    if first.magic == MAGIC_V2:
        return _assign_v2(buf, batches, first_offset, config, now_ms, leader_epoch)
    if compressed:
        return _assign_legacy_compressed(buf, first, first_offset, config, now_ms)
    return _assign_legacy(buf, batches, first_offset, config, now_ms)


def _assign_v2(
    buf: bytearray,
    batches: Sequence[RecordBatch],
    offset: int,
    config: LogConfig,
    now_ms: int,
    leader_epoch: int | None,
) -> ValidationResult:
    log_append = config.log_append_time
    check_keys = config.compact
    max_ts, max_ts_offset = NO_TIMESTAMP, -1
    create_time = not log_append
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    for batch in batches:
        # The framing walk checks every record as decoding would, without building them; the
        # records are decoded only when a rule needs a closer look (to name the record) or the
        # batch must be rebuilt.
        scan = batch.scan()  # type: ignore[attr-defined]
        clean = not (check_keys and scan.null_key) and batch.timestamp_type != TimestampType.LOG_APPEND_TIME
        if clean and create_time:
            clean = now_ms - scan.min_timestamp <= before and scan.max_timestamp - now_ms <= after
        records: Sequence[Record] | None = None
        if clean:
            batch_max = scan.max_timestamp
        else:
            records = batch.records()
            batch_max = _check_records(batch, records, config, now_ms, check_keys)
        count = batch.count
        if batch.compression is not Compression.NONE and not scan.sequential:
            # Kafka rebuilds a compressed batch whose offset deltas are not 0, 1, 2, ... (the one
            # batch of the append, so it is returned alone).
            return _rebuild_v2(batch, records or batch.records(), offset, config, now_ms, leader_epoch, batch_max)
        pos = batch.position
        last = offset + count - 1
        set_base_offset(buf, pos, last - batch.last_offset_delta)
        if leader_epoch is not None:
            set_partition_leader_epoch(buf, pos, leader_epoch)
        if log_append:
            if batch.timestamp_type != TimestampType.LOG_APPEND_TIME or batch.max_timestamp != now_ms:
                set_max_timestamp(buf, pos, TimestampType.LOG_APPEND_TIME, now_ms)
        elif batch.timestamp_type != TimestampType.CREATE_TIME or batch.max_timestamp != batch_max:
            set_max_timestamp(buf, pos, TimestampType.CREATE_TIME, batch_max)
        if batch_max > max_ts:
            max_ts, max_ts_offset = batch_max, last
        offset = last + 1
    return ValidationResult(
        records=buf,
        next_offset=offset,
        max_timestamp=now_ms if log_append else max_ts,
        offset_of_max_timestamp=offset - 1 if log_append else max_ts_offset,
        log_append_time=now_ms if log_append else -1,
        rebuilt=False,
    )


def _rebuild_v2(
    batch: RecordBatch,
    records: Sequence[Record],
    offset: int,
    config: LogConfig,
    now_ms: int,
    leader_epoch: int | None,
    batch_max: int,
) -> ValidationResult:
    log_append = config.log_append_time
    builder = RecordBatchBuilder(
        MAGIC_V2,
        batch.compression,
        TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        base_offset=offset,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        partition_leader_epoch=batch.partition_leader_epoch if leader_epoch is None else leader_epoch,
        log_append_time=now_ms if log_append else None,
    )
    for record in records:
        builder.append(record.key, record.value, timestamp=record.timestamp, headers=record.headers)
    out = bytes(builder.build().buffer)
    _check_size(out, batch, config)
    last = offset + len(records) - 1
    return ValidationResult(
        records=out,
        next_offset=last + 1,
        max_timestamp=now_ms if log_append else batch_max,
        offset_of_max_timestamp=last,
        log_append_time=now_ms if log_append else -1,
        rebuilt=True,
    )


def _check_size(out: bytes, batch: RecordBatch, config: LogConfig) -> None:
    # Kafka re-checks the size when a batch was re-encoded (messageSizeMaybeChanged).
    if len(out) > config.max_message_bytes:
        raise RecordTooLargeError(
            f"the rebuilt record batch is {len(out)} bytes, which exceeds max.message.bytes = {config.max_message_bytes}",
            file=batch.file,
            position=batch.position,
        )


def _set_legacy_timestamp(buf: bytearray, pos: int, log_append: bool, timestamp: int) -> None:
    """Set a v1 message's timestamp and timestamp type and recompute its CRC-32 (Kafka's
    ``LegacyRecordBatch.setMaxTimestamp``)."""
    attributes = buf[pos + _LEGACY_ATTRIBUTES]
    attributes = attributes | TIMESTAMP_TYPE_MASK if log_append else attributes & ~TIMESTAMP_TYPE_MASK
    current = _INT64.unpack_from(buf, pos + _LEGACY_TIMESTAMP)[0]
    if attributes == buf[pos + _LEGACY_ATTRIBUTES] and current == timestamp:
        return
    buf[pos + _LEGACY_ATTRIBUTES] = attributes
    _INT64.pack_into(buf, pos + _LEGACY_TIMESTAMP, timestamp)
    (size,) = _INT32.unpack_from(buf, pos + LENGTH_OFFSET)
    _UINT32.pack_into(
        buf, pos + CRC_OFFSET, zlib.crc32(memoryview(buf)[pos + MAGIC_OFFSET : pos + LOG_OVERHEAD + size])
    )


def _assign_legacy(
    buf: bytearray, batches: Sequence[RecordBatch], offset: int, config: LogConfig, now_ms: int
) -> ValidationResult:
    log_append = config.log_append_time
    first_offset = offset
    max_ts, max_ts_offset = NO_TIMESTAMP, -1
    for batch in batches:
        records = batch.records()
        record_max = _check_records(batch, records, config, now_ms, config.compact)
        pos = batch.position
        _INT64.pack_into(buf, pos, offset)
        if batch.magic == MAGIC_V1:
            # Kafka's setMaxTimestamp: the append time, or the message's own timestamp under
            # CreateTime (which clears a LogAppendTime bit a producer set).
            _set_legacy_timestamp(buf, pos, log_append, now_ms if log_append else record_max)
            if record_max > max_ts:
                max_ts, max_ts_offset = record_max, offset
        offset += 1
    if log_append and batches[0].magic == MAGIC_V1:
        # Kafka: under LogAppendTime the offset of the max timestamp is the first offset for
        # magic < 2.
        return ValidationResult(
            records=buf,
            next_offset=offset,
            max_timestamp=now_ms,
            offset_of_max_timestamp=first_offset,
            log_append_time=now_ms,
            rebuilt=False,
        )
    return ValidationResult(
        records=buf,
        next_offset=offset,
        max_timestamp=max_ts,
        offset_of_max_timestamp=max_ts_offset,
        log_append_time=-1,
        rebuilt=False,
    )


def _raw_inner_offsets(batch: LegacyRecordBatch) -> list[int]:
    """The inner offsets as stored in a wrapper (relative for v1, absolute for v0)."""
    entry = batch.entry()
    key_at = (HEADER_V1 if batch.magic == MAGIC_V1 else HEADER_V0).size
    (key_len,) = _INT32.unpack_from(entry, key_at)
    value_at = key_at + _INT32.size + max(key_len, 0) + _INT32.size
    data = decompress(batch.compression, entry[value_at:], magic=batch.magic)
    offsets, pos = [], 0
    while pos + LOG_OVERHEAD <= len(data):
        off, size = _ENTRY_PREFIX.unpack_from(data, pos)
        offsets.append(off)
        pos += LOG_OVERHEAD + size
    return offsets


def _assign_legacy_compressed(
    buf: bytearray, batch: RecordBatch, offset: int, config: LogConfig, now_ms: int
) -> ValidationResult:
    assert isinstance(batch, LegacyRecordBatch)
    log_append = config.log_append_time
    records = batch.records()  # checks inner CRCs, magic, and that none is itself compressed
    max_ts = _check_records(batch, records, config, now_ms, config.compact)
    count = len(records)
    last = offset + count - 1
    # Kafka: v0 inner offsets are absolute, so a v0 wrapper is always rebuilt; v1 is kept when
    # its inner offsets are 0..n-1 (some old clients got them wrong).
    in_place = batch.magic == MAGIC_V1 and _raw_inner_offsets(batch) == list(range(count))
    if in_place:
        pos = batch.position
        _INT64.pack_into(buf, pos, last)
        _set_legacy_timestamp(buf, pos, log_append, now_ms if log_append else max_ts)
        return ValidationResult(
            records=buf,
            next_offset=last + 1,
            max_timestamp=now_ms if log_append else max_ts,
            offset_of_max_timestamp=last,
            log_append_time=now_ms if log_append else -1,
            rebuilt=False,
        )
    timestamp_type = TimestampType.CREATE_TIME
    if batch.magic == MAGIC_V0:
        timestamp_type = TimestampType.NO_TIMESTAMP_TYPE
    elif log_append:
        timestamp_type = TimestampType.LOG_APPEND_TIME
    builder = RecordBatchBuilder(
        batch.magic,
        batch.compression,
        timestamp_type,
        base_offset=offset,
        log_append_time=now_ms if timestamp_type == TimestampType.LOG_APPEND_TIME else None,
    )
    for record in records:
        builder.append(
            record.key, record.value, timestamp=record.timestamp if batch.magic == MAGIC_V1 else NO_TIMESTAMP
        )
    out = bytes(builder.build().buffer)
    _check_size(out, batch, config)
    if batch.magic == MAGIC_V0:
        return ValidationResult(
            records=out,
            next_offset=last + 1,
            max_timestamp=NO_TIMESTAMP,
            offset_of_max_timestamp=-1,
            log_append_time=-1,
            rebuilt=True,
        )
    return ValidationResult(
        records=out,
        next_offset=last + 1,
        max_timestamp=now_ms if log_append else max_ts,
        offset_of_max_timestamp=last,
        log_append_time=now_ms if log_append else -1,
        rebuilt=True,
    )
