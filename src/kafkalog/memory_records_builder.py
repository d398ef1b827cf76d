"""Building batches of magic 0, 1 or 2, as Kafka's ``MemoryRecordsBuilder`` lays them out."""

from __future__ import annotations

from collections.abc import Iterable

from .compression import Compression, codec_for_id
from .legacy_record import RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, encode_message_set
from .record import (
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V2,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    ControlRecordType,
    Header,
    TimestampType,
    control_key,
    end_txn_marker_value,
)
from .recordbatch import RECORD_BATCH_OVERHEAD, encode_batch, encode_record
from .memory_records import MemoryRecords
from .varint import INT32_MAX


class RecordBatchBuilder:
    """Accumulates records and builds one batch (v2), one compressed wrapper (v0/v1 with a
    codec) or a run of plain messages (v0/v1 without one).

    Kafka's rules: offsets increase (``base_offset`` and up, or given explicitly, gaps allowed
    as after compaction); the v2 base timestamp is the first record's; the max timestamp (the
    append time under LogAppendTime) is kept in the header. Not thread-safe.

    Args:
        magic: 0, 1 or 2.
        compression: the codec (zstd needs magic 2).
        timestamp_type: CreateTime or LogAppendTime (magic 1 and 2).
        base_offset: offset of the first record.
        producer_id, producer_epoch, base_sequence, is_transactional: v2 producer state.
        partition_leader_epoch: v2 leader epoch stamped in the header.
        is_control: build a control batch (see :meth:`end_transaction_marker`).
        log_append_time: the append time to stamp under LogAppendTime.
        compression_level: codec level (Kafka 3.8's ``compression.*.level``), or the default.
    """

    def __init__(
        self,
        magic: int = MAGIC_V2,
        compression: Compression = Compression.NONE,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        partition_leader_epoch: int = -1,
        *,
        is_control: bool = False,
        log_append_time: int | None = None,
        compression_level: int | None = None,
    ) -> None:
        if magic not in (0, 1, 2):
            raise ValueError(f"unsupported magic {magic}")
        self.magic = magic
        self.compression = codec_for_id(int(compression), magic)
        if magic == MAGIC_V0:
            timestamp_type = TimestampType.NO_TIMESTAMP_TYPE
        elif timestamp_type == TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError(f"magic {magic} needs a timestamp type")
        if timestamp_type == TimestampType.LOG_APPEND_TIME and log_append_time is None:
            raise ValueError("LogAppendTime needs log_append_time")
        if magic < MAGIC_V2 and (is_transactional or is_control or producer_id != -1):
            raise ValueError(f"magic {magic} has no producer state, transactions or control records")
        self.timestamp_type = TimestampType(timestamp_type)
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.log_append_time = log_append_time
        self.compression_level = compression_level
        self._encoded: list[bytes] = []  # v2: encoded records
        self._legacy: list[tuple[int, int, bytes | None, bytes | None]] = []
        self._size = 0
        self._last_offset: int | None = None
        self._base_timestamp: int | None = None
        self._max_timestamp = NO_TIMESTAMP

    @property
    def count(self) -> int:
        """Records appended so far."""
        return len(self._encoded) if self.magic == MAGIC_V2 else len(self._legacy)

    @property
    def estimated_size_in_bytes(self) -> int:
        """The uncompressed size the batch would have now (to fill batches up to a target)."""
        if self.magic == MAGIC_V2:
            return RECORD_BATCH_OVERHEAD + self._size
        return self._size

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        timestamp: int,
        headers: Iterable[Header | tuple[str, bytes | None]] = (),
        offset: int | None = None,
    ) -> int:
        """Append one record; return its offset.

        Raises:
            ValueError: an offset that does not increase, a negative timestamp other than -1,
                headers before magic 2, or a record the batch cannot take.
        """
        if offset is None:
            offset = self.base_offset if self._last_offset is None else self._last_offset + 1
        elif offset < self.base_offset or (self._last_offset is not None and offset <= self._last_offset):
            raise ValueError(f"illegal offset {offset} following {self._last_offset} (base {self.base_offset})")
        if timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise ValueError(f"invalid negative timestamp {timestamp}")
        if self.magic == MAGIC_V2:
            if self._base_timestamp is None:
                self._base_timestamp = timestamp
            delta = offset - self.base_offset
            if delta > INT32_MAX:
                raise ValueError(f"offset {offset} is beyond the int32 range of base offset {self.base_offset}")
            encoded = encode_record(delta, timestamp - self._base_timestamp, key, value, headers)
            self._encoded.append(encoded)
            self._size += len(encoded)
        else:
            if tuple(headers):
                raise ValueError(f"magic v{self.magic} does not support record headers")
            self._legacy.append((offset, timestamp, key, value))
            overhead = RECORD_OVERHEAD_V0 if self.magic == MAGIC_V0 else RECORD_OVERHEAD_V1
            self._size += LOG_OVERHEAD + overhead + len(key or b"") + len(value or b"")
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._last_offset = offset
        return offset

    def build(self) -> MemoryRecords:
        """The built batch (an empty ``MemoryRecords`` when nothing was appended, as Kafka)."""
        if self.count == 0:
            return MemoryRecords(b"")
        if self.magic < MAGIC_V2:
            return MemoryRecords(
                encode_message_set(
                    self._legacy,
                    magic=self.magic,
                    compression=self.compression,
                    timestamp_type=self.timestamp_type,
                    log_append_time=self.log_append_time,
                    compression_level=self.compression_level,
                    base_offset=self.base_offset,
                )
            )
        log_append = self.timestamp_type == TimestampType.LOG_APPEND_TIME
        return MemoryRecords(
            encode_batch(
                b"".join(self._encoded),
                count=len(self._encoded),
                base_offset=self.base_offset,
                last_offset_delta=self._last_offset - self.base_offset,
                base_timestamp=self._base_timestamp,
                max_timestamp=self.log_append_time if log_append else self._max_timestamp,
                compression=self.compression,
                timestamp_type=self.timestamp_type,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
                is_transactional=self.is_transactional,
                is_control=self.is_control,
                partition_leader_epoch=self.partition_leader_epoch,
                compression_level=self.compression_level,
            )
        )

    @classmethod
    def end_transaction_marker(
        cls,
        control_type: ControlRecordType,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        timestamp: int,
        base_offset: int = 0,
        partition_leader_epoch: int = -1,
    ) -> MemoryRecords:
        """A transactional control batch holding one ABORT or COMMIT marker
        (Kafka's ``MemoryRecords.withEndTransactionMarker``: attributes 0x30, sequence -1)."""
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise ValueError(f"an end-transaction marker is ABORT or COMMIT, not {control_type!r}")
        builder = cls(
            MAGIC_V2,
            base_offset=base_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            is_transactional=True,
            is_control=True,
            partition_leader_epoch=partition_leader_epoch,
        )
        builder.append(control_key(control_type), end_txn_marker_value(coordinator_epoch), timestamp=timestamp)
        return builder.build()
