"""Produce v0-2 carry message sets of magic 0 or 1; the broker stores them as one v2 batch.

Kafka 3.x brokers do the same: ``message.format.version`` is ignored from inter-broker
protocol 3.0, so ``LogValidator`` converts every v0/v1 message set to the v2 format
(``convertAndAssignOffsetsNonCompressed`` and, for compressed wrappers,
``validateMessagesAndAssignOffsetsCompressed`` rebuilding the records). The rules kept here:

- all the messages of the request's set, unwrapped from their compressed wrappers, become the
  records of one v2 batch, in order;
- the batch is compressed with the producer's codec (the topic's ``compression.type`` is always
  ``producer`` on this broker; Kafka's "source codec" is the last compressed wrapper's);
- v1 messages keep their CreateTime timestamps; v0 messages have none (-1 in the v2 record),
  as in Kafka's conversion;
- no producer id, epoch or sequence (magic 0/1 have none), no headers.

Offsets are assigned by :meth:`kafkalog.Log.append`, which validates the converted batch like
any other (sizes, timestamps against ``message.timestamp.*``). A set that mixes in a v2 batch
is appended as it came, which :meth:`~kafkalog.Log.append` refuses (one magic per append).
"""

from __future__ import annotations

from .. import Compression, MemoryRecords, RecordBatchBuilder, TimestampType
from ..record import MAGIC_V2
from ..errors import InvalidTimestampError

#: v0 messages carry no timestamp (Kafka's ``RecordBatch.NO_TIMESTAMP``).
_NO_TIMESTAMP = -1
_MAGIC_V0 = 0


def to_v2(records: memoryview | bytes) -> MemoryRecords:
    """The v0/v1 message set ``records`` as one v2 batch (or ``records`` unchanged when it is
    already v2, or empty).

    Raises:
        KafkalogError: a corrupt or malformed message (a bad CRC, a truncated or bomb-sized
            compressed payload...), as the storage layer names it.
    """
    source = MemoryRecords(records)
    batches = list(source.batches(validate=True, strict=True))
    if not batches or any(b.magic == MAGIC_V2 for b in batches):
        return source
    codec = Compression.NONE
    for batch in batches:
        if batch.compression is not Compression.NONE:
            codec = batch.compression
    builder = RecordBatchBuilder(MAGIC_V2, codec, TimestampType.CREATE_TIME)
    for batch in batches:
        legacy_time = batch.magic > _MAGIC_V0 and batch.timestamp_type == TimestampType.CREATE_TIME
        for record in batch.records():
            timestamp = record.timestamp if legacy_time else _NO_TIMESTAMP
            if timestamp < 0 and timestamp != _NO_TIMESTAMP:
                raise InvalidTimestampError(
                    f"message at offset {record.offset} of the message set has the invalid timestamp {timestamp}",
                    position=batch.position,
                )
            builder.append(record.key, record.value, timestamp=timestamp)
    return builder.build()
