"""Magic v2 record batches (Kafka 0.11+): reading, validating, decoding and encoding.

Header layout (61 bytes, big-endian; Kafka's ``DefaultRecordBatch``):

| field | type | byte |
|---|---|---|
| baseOffset | int64 | 0 |
| batchLength (size - 12) | int32 | 8 |
| partitionLeaderEpoch | int32 | 12 |
| magic (2) | int8 | 16 |
| crc (CRC-32C of byte 21 to the end) | uint32 | 17 |
| attributes | int16 | 21 |
| lastOffsetDelta | int32 | 23 |
| baseTimestamp | int64 | 27 |
| maxTimestamp | int64 | 35 |
| producerId | int64 | 43 |
| producerEpoch | int16 | 51 |
| baseSequence | int32 | 53 |
| recordCount | int32 | 57 |
| records | | 61 |

Attributes: bits 0-2 codec, bit 3 timestamp type, bit 4 transactional, bit 5 control, bit 6
has-delete-horizon (then baseTimestamp *is* the delete horizon). The CRC does not cover the base
offset, length, leader epoch or magic, so a broker rewrites those without recomputing it.

A record (varints ZigZag-encoded): ``length:varint, attributes:int8, timestampDelta:varlong,
offsetDelta:varint, keyLength:varint (-1 null), key, valueLength:varint (-1 null), value,
headerCount:varint``, then per header ``keyLength:varint, key (UTF-8), valueLength:varint
(-1 null), value``. The bytes a record consumes must equal its declared length; the walk over a
payload's records lives in :mod:`kafkalog.record_walk`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from . import crc as _crc
from .compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    codec_for_id,
    compress,
    decompress,
)
from .errors import CorruptRecordError, InvalidRecordError, KafkalogError
from .record import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_LENGTH,
    MAGIC_OFFSET,
    MAGIC_V2,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    OFFSET_LENGTH,
    OFFSET_OFFSET,
    SIZE_LENGTH,
    TIMESTAMP_TYPE_MASK,
    Header,
    Record,
    RecordBatch,
    TimestampType,
)
from .record_walk import MIN_RECORD_BODY, RecordWalkError, decode_records, walk_records
from .varint import encode_varint, encode_varlong
from .varint import INT32_MAX

# Kafka's ``DefaultRecordBatch`` offsets chain: each field starts where the one before it ends.
# The first fields and the magic are the framing every magic shares (kafkalog.record).
BASE_OFFSET_OFFSET = OFFSET_OFFSET
BASE_OFFSET_LENGTH = OFFSET_LENGTH
LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH
LENGTH_LENGTH = SIZE_LENGTH
PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + LENGTH_LENGTH
PARTITION_LEADER_EPOCH_LENGTH = 4
assert PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH == MAGIC_OFFSET
CRC_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH
CRC_LENGTH = 4
ATTRIBUTES_OFFSET = CRC_OFFSET + CRC_LENGTH
ATTRIBUTE_LENGTH = 2
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTE_LENGTH
LAST_OFFSET_DELTA_LENGTH = 4
BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH
BASE_TIMESTAMP_LENGTH = 8
MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH
MAX_TIMESTAMP_LENGTH = 8
PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH
PRODUCER_ID_LENGTH = 8
PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH
PRODUCER_EPOCH_LENGTH = 2
BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH
BASE_SEQUENCE_LENGTH = 4
RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH
RECORDS_COUNT_LENGTH = 4
RECORDS_OFFSET = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH
#: The v2 header (61 bytes): the smallest batch there is, one with no records.
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET

#: The header field by field, in order: (name, struct code, byte offset). :data:`HEADER`, the
#: positions in its unpacked tuple and the columnar decoder's numpy dtype all come from here.
HEADER_FIELDS = (
    ("base_offset", "q", BASE_OFFSET_OFFSET),
    ("length", "i", LENGTH_OFFSET),
    ("partition_leader_epoch", "i", PARTITION_LEADER_EPOCH_OFFSET),
    ("magic", "b", MAGIC_OFFSET),
    ("crc", "I", CRC_OFFSET),
    ("attributes", "h", ATTRIBUTES_OFFSET),
    ("last_offset_delta", "i", LAST_OFFSET_DELTA_OFFSET),
    ("base_timestamp", "q", BASE_TIMESTAMP_OFFSET),
    ("max_timestamp", "q", MAX_TIMESTAMP_OFFSET),
    ("producer_id", "q", PRODUCER_ID_OFFSET),
    ("producer_epoch", "h", PRODUCER_EPOCH_OFFSET),
    ("base_sequence", "i", BASE_SEQUENCE_OFFSET),
    ("count", "i", RECORDS_COUNT_OFFSET),
)
HEADER = struct.Struct(">" + "".join(code for _, code, _ in HEADER_FIELDS))
assert HEADER.size == RECORD_BATCH_OVERHEAD == 61
assert all(
    struct.calcsize(">" + "".join(code for _, code, _ in HEADER_FIELDS[:i])) == offset
    for i, (_, _, offset) in enumerate(HEADER_FIELDS)
), "HEADER_FIELDS disagrees with the offsets chain"
# Positions of the fields in HEADER's unpacked tuple (plain ints: read on every header question).
(
    _BASE_OFFSET,
    _LENGTH,
    _PARTITION_LEADER_EPOCH,
    _MAGIC,
    _CRC,
    _ATTRIBUTES,
    _LAST_OFFSET_DELTA,
    _BASE_TIMESTAMP,
    _MAX_TIMESTAMP,
    _PRODUCER_ID,
    _PRODUCER_EPOCH,
    _BASE_SEQUENCE,
    _RECORDS_COUNT,
) = range(len(HEADER_FIELDS))

# Attributes (int16): the codec and timestamp type bits every magic shares, then v2's own.
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past 2**31-1 to 0 (Kafka's ``incrementSequence``)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class DefaultRecordBatch(RecordBatch):
    """A v2 record batch over a buffer (or, for files, a header now and the body on demand).

    The header is parsed at construction; the body is touched only by :meth:`ensure_valid` and
    record decoding. ``loader``, when given, returns the whole entry's bytes (used by
    ``FileRecords`` so that shallow iteration reads only headers).
    """

    __slots__ = ("_buf", "_off", "_fields", "_position", "_file", "_loader", "_max_decompressed")

    magic = MAGIC_V2

    def __init__(
        self,
        buf,
        offset: int = 0,
        *,
        position: int | None = None,
        file: str | None = None,
        loader: Callable[[], bytes] | None = None,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        if len(buf) - offset < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"v2 batch header needs {RECORD_BATCH_OVERHEAD} bytes, {len(buf) - offset} available",
                file=file,
                position=position,
            )
        self._buf = buf
        self._off = offset
        self._fields = HEADER.unpack_from(buf, offset)
        self._position = position
        self._file = file
        self._loader = loader
        self._max_decompressed = max_decompressed_size

    # -- header fields -------------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return self._fields[_BASE_OFFSET]

    @property
    def size_in_bytes(self) -> int:
        """The whole entry, including the 12-byte offset and length prefix."""
        return self._fields[_LENGTH] + LOG_OVERHEAD

    @property
    def partition_leader_epoch(self) -> int:
        return self._fields[_PARTITION_LEADER_EPOCH]

    @property
    def crc(self) -> int:
        """The stored CRC-32C (unsigned)."""
        return self._fields[_CRC]

    @property
    def attributes(self) -> int:
        return self._fields[_ATTRIBUTES]

    @property
    def last_offset_delta(self) -> int:
        return self._fields[_LAST_OFFSET_DELTA]

    @property
    def last_offset(self) -> int:
        return self._fields[_BASE_OFFSET] + self._fields[_LAST_OFFSET_DELTA]

    @property
    def base_timestamp(self) -> int:
        """The stored base timestamp (the delete horizon when :attr:`delete_horizon_ms` is set)."""
        return self._fields[_BASE_TIMESTAMP]

    @property
    def max_timestamp(self) -> int:
        """The stored max timestamp (the append time under LogAppendTime)."""
        return self._fields[_MAX_TIMESTAMP]

    @property
    def producer_id(self) -> int:
        return self._fields[_PRODUCER_ID]

    @property
    def producer_epoch(self) -> int:
        return self._fields[_PRODUCER_EPOCH]

    @property
    def base_sequence(self) -> int:
        return self._fields[_BASE_SEQUENCE]

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping past 2**31-1; -1 without a sequence."""
        base = self._fields[_BASE_SEQUENCE]
        return NO_SEQUENCE if base == NO_SEQUENCE else increment_sequence(base, self._fields[_LAST_OFFSET_DELTA])

    @property
    def count(self) -> int:
        """The declared record count (may be 0 after compaction)."""
        return self._fields[_RECORDS_COUNT]

    @property
    def compression(self) -> Compression:
        """The codec; UnsupportedCodecError (positioned at the attributes) for ids 5-7."""
        try:
            return codec_for_id(self._fields[_ATTRIBUTES] & COMPRESSION_CODEC_MASK, MAGIC_V2)
        except KafkalogError as e:
            raise self._err(type(e), e.reason, ATTRIBUTES_OFFSET) from None

    @property
    def timestamp_type(self) -> TimestampType:
        if self._fields[_ATTRIBUTES] & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self._fields[_ATTRIBUTES] & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self._fields[_ATTRIBUTES] & CONTROL_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon the cleaner stamped (the base timestamp), or None."""
        return self._fields[_BASE_TIMESTAMP] if self._fields[_ATTRIBUTES] & DELETE_HORIZON_FLAG_MASK else None

    def __repr__(self) -> str:
        return (
            f"DefaultRecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.count}, size_in_bytes={self.size_in_bytes}, "
            f"compression={self._fields[_ATTRIBUTES] & COMPRESSION_CODEC_MASK}, position={self._position})"
        )

    # -- body ----------------------------------------------------------------------------------

    def _label(self) -> str:
        return f"v2 batch at offset {self.base_offset}"

    def compute_crc(self) -> int:
        """CRC-32C of the bytes the stored CRC covers (attributes to the end)."""
        off, end = self._off, self._off + self._fields[_LENGTH] + LOG_OVERHEAD
        if len(self._buf) < end:
            self.entry()
            off, end = 0, end - off
        return _crc.crc32c(memoryview(self._buf)[off + ATTRIBUTES_OFFSET : end])

    def ensure_valid(self, *, deep: bool = False) -> None:
        """Check the size, the CRC-32C and the record count; with ``deep``, decode every record.

        Raises:
            CorruptRecordError: size below the 61-byte overhead or CRC mismatch.
            InvalidRecordError: negative count, a count the payload cannot hold, a
                lastOffsetDelta below count-1, or (deep) any malformed record.
            TruncatedRecordError: the buffer holds less than the declared size.
            UnsupportedCodecError: a codec id Kafka does not define.
        """
        size = self.size_in_bytes
        if size < RECORD_BATCH_OVERHEAD:
            raise self._err(
                CorruptRecordError,
                f"size {size} is smaller than the minimum allowed overhead {RECORD_BATCH_OVERHEAD}",
            )
        computed = self.compute_crc()
        if computed != self._fields[_CRC]:
            raise self._err(CorruptRecordError, f"stored crc = {self._fields[_CRC]}, computed crc = {computed}")
        self.compression
        self._check_counts()
        if deep:
            self.records()

    def _check_counts(self) -> None:
        f = self._fields
        count, delta, attrs = f[_RECORDS_COUNT], f[_LAST_OFFSET_DELTA], f[_ATTRIBUTES]
        if count < 0:
            raise self._err(InvalidRecordError, f"invalid record count {count}", RECORDS_COUNT_OFFSET)
        if count and delta < count - 1:
            raise self._err(
                InvalidRecordError,
                f"lastOffsetDelta {delta} is smaller than the record count {count} minus one",
                LAST_OFFSET_DELTA_OFFSET,
            )
        if attrs & COMPRESSION_CODEC_MASK == 0:
            payload = self.size_in_bytes - RECORDS_OFFSET
            if count * (MIN_RECORD_BODY + 1) > payload:
                raise self._err(
                    InvalidRecordError,
                    f"record count {count} cannot fit in a {payload}-byte uncompressed payload",
                    RECORDS_COUNT_OFFSET,
                )

    def payload(self) -> tuple[bytes, int, int]:
        """The records' bytes, decompressed, as ``(data, start, end)``.

        Raises:
            CorruptRecordError, RecordTooLargeError, UnsupportedCodecError: from decompression,
                positioned at the start of the records.
        """
        codec = self.compression
        if codec is Compression.NONE:
            # A copy of exactly this batch's records (a memcpy, cheap next to decoding them):
            # a malformed record then runs into the end of its own batch, never the next one.
            data = bytes(self.entry()[RECORDS_OFFSET:])
            return data, 0, len(data)
        try:
            data = decompress(codec, self.entry()[RECORDS_OFFSET:], max_size=self._max_decompressed)
        except KafkalogError as e:
            raise self._err(type(e), f"{e.reason}", RECORDS_OFFSET) from None
        return data, 0, len(data)

    def records(self) -> list[Record]:
        """Decompress and decode every record.

        Raises:
            InvalidRecordError: a malformed record, or a count that disagrees with the payload.
            CorruptRecordError, RecordTooLargeError, UnsupportedCodecError: from decompression.
        """
        f = self._fields
        count = f[_RECORDS_COUNT]
        if count < 0:
            raise self._err(InvalidRecordError, f"invalid record count {count}", RECORDS_COUNT_OFFSET)
        if count == 0:
            # Kafka's iterator returns nothing for an empty batch (kept by the cleaner for its
            # producer state) without reading its payload.
            return []
        data, start, end, shift = self._records_span()
        attrs = f[_ATTRIBUTES]
        append_time = f[_MAX_TIMESTAMP] if attrs & TIMESTAMP_TYPE_MASK else None
        try:
            return decode_records(
                data,
                start,
                end,
                count,
                f[_BASE_OFFSET],
                f[_BASE_TIMESTAMP],
                append_time,
                f[_BASE_SEQUENCE],
                bool(attrs & CONTROL_FLAG_MASK),
            )
        except RecordWalkError as e:
            raise self._walk_error(e, shift) from None

    def _records_span(self) -> tuple[Any, int, int, int]:
        """Where the records lie: ``(data, start, end, shift)``, ``shift`` being what to add to a
        position in ``data`` to make it a position in the entry (None: the records were
        decompressed, positions are theirs). Uncompressed records are walked in the entry
        itself, a view ending at the batch's end, so a malformed record runs into the end of its
        own batch, never into the next one."""
        if self._fields[_ATTRIBUTES] & COMPRESSION_CODEC_MASK == 0:
            entry = self.entry()
            return entry, RECORDS_OFFSET, len(entry), 0
        data, start, end = self.payload()
        return data, start, end, None

    def _walk_error(self, e: RecordWalkError, shift: int | None) -> KafkalogError:
        if shift is not None:
            return self._err(InvalidRecordError, f"record {e.index}: {e.reason}", e.pos + shift)
        return self._err(
            InvalidRecordError,
            f"record {e.index}: {e.reason} (byte {e.pos} of the decompressed records)",
            RECORDS_OFFSET,
        )

    def scan(self) -> RecordScan:
        """Check every record's framing exactly as :meth:`records` does, without building
        records: the validation a broker needs of an append, at a fraction of the cost.

        Raises:
            The errors of :meth:`records`.
        """
        f = self._fields
        count = f[_RECORDS_COUNT]
        if count < 0:
            raise self._err(InvalidRecordError, f"invalid record count {count}", RECORDS_COUNT_OFFSET)
        if count == 0:
            return RecordScan(NO_TIMESTAMP, NO_TIMESTAMP, False, True)
        data, start, end, shift = self._records_span()
        try:
            lo, hi, null_key, sequential = walk_records(data, start, end, count)
        except RecordWalkError as e:
            raise self._walk_error(e, shift) from None
        if f[_ATTRIBUTES] & TIMESTAMP_TYPE_MASK:  # LogAppendTime: every record reports the batch's time
            return RecordScan(f[_MAX_TIMESTAMP], f[_MAX_TIMESTAMP], null_key, sequential)
        return RecordScan(f[_BASE_TIMESTAMP] + lo, f[_BASE_TIMESTAMP] + hi, null_key, sequential)


class RecordScan(NamedTuple):
    """What :meth:`DefaultRecordBatch.scan` found: the records' smallest and largest timestamps
    (as the records report them), whether any record has a null key, and whether the offset
    deltas are 0, 1, 2, ... (as a producer writes them)."""

    min_timestamp: int
    max_timestamp: int
    null_key: bool
    sequential: bool


# ----------------------------------------------------------------------------------------------
# Encoding


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[Header | tuple[str, bytes | None]] = (),
) -> bytes:
    """Encode one v2 record (with its length prefix)."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    if key is None:
        parts.append(b"\x01")  # varint(-1)
    else:
        parts.append(encode_varint(len(key)))
        parts.append(key)
    if value is None:
        parts.append(b"\x01")
    else:
        parts.append(encode_varint(len(value)))
        parts.append(value)
    headers = tuple(headers)
    parts.append(encode_varint(len(headers)))
    for hkey, hvalue in headers:
        if hkey is None:
            raise ValueError("a record header key cannot be None")
        raw = hkey.encode("utf-8")
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        if hvalue is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(hvalue)))
            parts.append(hvalue)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def encode_batch(
    records_payload: bytes,
    *,
    count: int,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    partition_leader_epoch: int = -1,
    compression_level: int | None = None,
) -> bytes:
    """Encode a whole v2 batch around already-encoded records (compressing them as asked).

    With ``delete_horizon_ms`` the has-delete-horizon bit is set and the base timestamp field
    holds the horizon (the caller encodes record timestamp deltas relative to it).
    """
    codec = Compression(compression)
    attributes = int(codec)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
        base_timestamp = delete_horizon_ms
    payload = compress(codec, records_payload, magic=MAGIC_V2, level=compression_level)
    size = RECORDS_OFFSET + len(payload)
    if size - LOG_OVERHEAD > INT32_MAX:
        raise ValueError(f"batch of {size} bytes does not fit the int32 length field")
    buf = bytearray(size)
    HEADER.pack_into(
        buf,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    buf[RECORDS_OFFSET:] = payload
    _UINT32.pack_into(buf, CRC_OFFSET, _crc.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


# ----------------------------------------------------------------------------------------------
# In-place rewrites a broker makes (Kafka's setLastOffset / setPartitionLeaderEpoch /
# setMaxTimestamp): offsets and the leader epoch are outside the CRC; the max timestamp is not.


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite the base offset of the v2 batch at ``pos`` (the CRC stays valid)."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite the partition leader epoch of the v2 batch at ``pos`` (the CRC stays valid)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(buf: bytearray | memoryview, pos: int, timestamp_type: TimestampType, max_timestamp: int) -> None:
    """Set the timestamp type and max timestamp of the v2 batch at ``pos`` and refresh its CRC
    (how a broker stamps LogAppendTime)."""
    view = memoryview(buf)
    (attrs,) = _INT16.unpack_from(view, pos + ATTRIBUTES_OFFSET)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    else:
        attrs &= ~TIMESTAMP_TYPE_MASK
    _INT16.pack_into(view, pos + ATTRIBUTES_OFFSET, attrs)
    _INT64.pack_into(view, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    (length,) = _INT32.unpack_from(view, pos + LENGTH_OFFSET)
    end = pos + LOG_OVERHEAD + length
    _UINT32.pack_into(view, pos + CRC_OFFSET, _crc.crc32c(view[pos + ATTRIBUTES_OFFSET : end]))
