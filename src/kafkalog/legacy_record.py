"""Magic v0 and v1 messages (Kafka's MessageSet), presented as record batches.

Layout (big-endian), one top-level entry per message:

| field | type | v0 byte | v1 byte |
|---|---|---|---|
| offset | int64 | 0 | 0 |
| size (bytes after this field) | int32 | 8 | 8 |
| crc (CRC-32 of magic..end) | uint32 | 12 | 12 |
| magic | int8 | 16 | 16 |
| attributes | int8 | 17 | 17 |
| timestamp | int64 | - | 18 |
| keyLength (-1 null) | int32 | 18 | 26 |
| key, valueLength (-1 null), value | | | |

Attributes: bits 0-2 codec (none, gzip, snappy, lz4; zstd is not allowed), bit 3 timestamp
type (v1). A compressed message is a *wrapper*: its value is a compressed message set of inner
messages. Kafka's rules (``AbstractLegacyRecordBatch``): the wrapper offset is the absolute offset
of the **last** inner message; inner offsets are absolute in v0 and relative in v1
(``absolute = wrapper_offset - last_relative + relative``, except that a wrapper offset of 0
means the relative offsets are taken as they are); under v1 LogAppendTime the wrapper's
timestamp is reported for every inner message.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable

from . import native
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
    MAGIC_V0,
    MAGIC_V1,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    OFFSET_OFFSET,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_MASK,
    Record,
    RecordBatch,
    TimestampType,
)

# Kafka's ``LegacyRecord`` layout, as positions in the whole entry: after the 12-byte offset and
# size come the crc and the magic, where every magic has it (kafkalog.record).
CRC_OFFSET = LOG_OVERHEAD
CRC_LENGTH = 4
assert CRC_OFFSET + CRC_LENGTH == MAGIC_OFFSET
ATTRIBUTES_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH
ATTRIBUTES_LENGTH = 1
TIMESTAMP_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH  # v1 only
TIMESTAMP_LENGTH = 8
KEY_SIZE_OFFSET_V0 = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH
KEY_SIZE_OFFSET_V1 = TIMESTAMP_OFFSET + TIMESTAMP_LENGTH
KEY_SIZE_LENGTH = 4
VALUE_SIZE_LENGTH = 4
#: Minimum value of the size field: crc, magic, attributes, (timestamp,) key and value lengths.
RECORD_OVERHEAD_V0 = KEY_SIZE_OFFSET_V0 - LOG_OVERHEAD + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH
RECORD_OVERHEAD_V1 = KEY_SIZE_OFFSET_V1 - LOG_OVERHEAD + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH
assert (RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1) == (14, 22)

#: The fixed header, field by field: (name, struct code, byte offset); v0 has all but the
#: timestamp. The structs and the positions in their unpacked tuples come from this table.
HEADER_V1_FIELDS = (
    ("offset", "q", OFFSET_OFFSET),
    ("size", "i", SIZE_OFFSET),
    ("crc", "I", CRC_OFFSET),
    ("magic", "b", MAGIC_OFFSET),
    ("attributes", "b", ATTRIBUTES_OFFSET),
    ("timestamp", "q", TIMESTAMP_OFFSET),
)
HEADER_V0 = struct.Struct(">" + "".join(code for _, code, _ in HEADER_V1_FIELDS[:-1]))
HEADER_V1 = struct.Struct(">" + "".join(code for _, code, _ in HEADER_V1_FIELDS))
assert HEADER_V0.size == KEY_SIZE_OFFSET_V0 == 18 and HEADER_V1.size == KEY_SIZE_OFFSET_V1 == 26
# Positions in the unpacked header tuple (a v0 tuple gets NO_TIMESTAMP appended).
_OFFSET, _SIZE, _CRC, _MAGIC, _ATTRIBUTES, _TIMESTAMP = range(len(HEADER_V1_FIELDS))
_OFFSET_AND_SIZE = struct.Struct(">qi")
assert _OFFSET_AND_SIZE.size == LOG_OVERHEAD
_INT32 = struct.Struct(">i")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_UINT32 = struct.Struct(">I")


def _overhead(magic: int) -> int:
    return RECORD_OVERHEAD_V0 if magic == MAGIC_V0 else RECORD_OVERHEAD_V1


def _header(magic: int) -> struct.Struct:
    return HEADER_V0 if magic == MAGIC_V0 else HEADER_V1


def _key_value(data, pos: int, end: int) -> tuple[bytes | None, bytes | None]:
    """Read ``keyLength, key, valueLength, value`` filling exactly ``data[pos:end]``."""
    parts = []
    for name in ("key", "value"):
        if pos + _INT32.size > end:
            raise InvalidRecordError(f"message {name} length runs past the message", position=pos)
        (n,) = _INT32.unpack_from(data, pos)
        pos += _INT32.size
        if n == -1:
            parts.append(None)
        elif 0 <= n <= end - pos:
            parts.append(bytes(data[pos : pos + n]))
            pos += n
        else:
            raise InvalidRecordError(f"invalid message {name} length {n} ({end - pos} bytes left)", position=pos - _INT32.size)
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes follow the message value", position=pos)
    return parts[0], parts[1]


class LegacyRecordBatch(RecordBatch):
    """A top-level v0/v1 message: a plain message (one record) or a compressed wrapper.

    For a wrapper, ``base_offset`` is the first inner offset, which needs decompression (as in
    Kafka); ``last_offset`` is the wrapper's own offset. ``count`` is None, producer fields are
    -1, and ``base_timestamp`` equals the message's timestamp.
    """

    __slots__ = ("_buf", "_off", "_fields", "_position", "_file", "_loader", "_max_decompressed", "_records")

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
        magic = buf[offset + MAGIC_OFFSET]
        header = _header(magic)
        if len(buf) - offset < header.size:
            raise CorruptRecordError(
                f"v{magic} message header needs {header.size} bytes, {len(buf) - offset} available",
                file=file,
                position=position,
            )
        fields = header.unpack_from(buf, offset)
        self._fields = fields if magic == MAGIC_V1 else fields + (NO_TIMESTAMP,)
        self._buf = buf
        self._off = offset
        self._position = position
        self._file = file
        self._loader = loader
        self._max_decompressed = max_decompressed_size
        self._records: list[Record] | None = None

    # -- header fields -------------------------------------------------------------------------

    @property
    def magic(self) -> int:
        return self._fields[_MAGIC]

    @property
    def offset(self) -> int:
        """The message's own offset (the last inner offset for a wrapper)."""
        return self._fields[_OFFSET]

    @property
    def last_offset(self) -> int:
        return self._fields[_OFFSET]

    @property
    def base_offset(self) -> int:
        if self._fields[_ATTRIBUTES] & COMPRESSION_CODEC_MASK == 0:
            return self._fields[_OFFSET]
        return self.records()[0].offset

    @property
    def size_in_bytes(self) -> int:
        return self._fields[_SIZE] + LOG_OVERHEAD

    @property
    def crc(self) -> int:
        return self._fields[_CRC]

    @property
    def attributes(self) -> int:
        return self._fields[_ATTRIBUTES]

    @property
    def compression(self) -> Compression:
        """The codec; UnsupportedCodecError (positioned at the attributes) for zstd or ids 5-7."""
        try:
            return codec_for_id(self._fields[_ATTRIBUTES] & COMPRESSION_CODEC_MASK, self._fields[_MAGIC])
        except KafkalogError as e:
            raise self._err(type(e), e.reason, ATTRIBUTES_OFFSET) from None

    @property
    def timestamp_type(self) -> TimestampType:
        if self._fields[_MAGIC] == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self._fields[_ATTRIBUTES] & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        return self._fields[_TIMESTAMP]

    @property
    def base_timestamp(self) -> int:
        return self._fields[_TIMESTAMP]

    count = None
    producer_id = -1
    producer_epoch = -1
    base_sequence = NO_SEQUENCE
    last_sequence = NO_SEQUENCE
    is_transactional = False
    is_control = False
    partition_leader_epoch = -1
    delete_horizon_ms = None

    def __repr__(self) -> str:
        return (
            f"LegacyRecordBatch(magic={self.magic}, offset={self.offset}, size_in_bytes={self.size_in_bytes}, "
            f"compression={self._fields[_ATTRIBUTES] & COMPRESSION_CODEC_MASK}, position={self._position})"
        )

    # -- body ----------------------------------------------------------------------------------

    def _label(self) -> str:
        return f"v{self.magic} message at offset {self.offset}"

    def compute_crc(self) -> int:
        """CRC-32 of the bytes the stored CRC covers (magic to the end)."""
        return zlib.crc32(self.entry()[MAGIC_OFFSET:])

    def ensure_valid(self, *, deep: bool = False) -> None:
        """Check size, CRC-32, codec and key/value lengths; with ``deep``, decode the inner
        messages of a wrapper too (checking each one's CRC).

        Raises:
            CorruptRecordError: the size is below the overhead or the CRC does not match.
            InvalidRecordError: key/value lengths that do not fill the message exactly.
            UnsupportedCodecError: an unknown codec id or zstd.
        """
        overhead = _overhead(self.magic)
        if self._fields[_SIZE] < overhead:
            raise self._err(
                CorruptRecordError,
                f"record is corrupt (crc could not be retrieved as the record is too small, size = {self._fields[_SIZE]})",
            )
        computed = self.compute_crc()
        if computed != self._fields[_CRC]:
            raise self._err(CorruptRecordError, f"stored crc = {self._fields[_CRC]}, computed crc = {computed}")
        self.compression
        self._key_value()
        if deep:
            self.records()

    def _key_value(self) -> tuple[bytes | None, bytes | None]:
        entry = self.entry()
        try:
            return _key_value(entry, _header(self.magic).size, len(entry))
        except InvalidRecordError as e:
            raise self._err(InvalidRecordError, e.reason, e.position or 0) from None

    def records(self) -> list[Record]:
        """The message itself, or a wrapper's inner messages with absolute offsets.

        Raises:
            InvalidRecordError: malformed inner messages, a null wrapper value, an empty inner
                set, nested compression, mismatched inner magic or a bad v1 wrapper offset.
            CorruptRecordError: an inner message's CRC does not match, or a corrupt payload.
        """
        if self._records is not None:
            return self._records
        if self._fields[_SIZE] < _overhead(self.magic):
            raise self._err(CorruptRecordError, f"message size {self._fields[_SIZE]} is below the minimum")
        codec = self.compression
        key, value = self._key_value()
        if codec is Compression.NONE:
            self._records = [
                Record(self.offset, self._fields[_TIMESTAMP], key, value, (), NO_SEQUENCE, self.size_in_bytes, self.crc)
            ]
            return self._records
        if value is None:
            raise self._err(InvalidRecordError, f"compressed message set with null value (magic = {self.magic})")
        try:
            data = decompress(codec, value, magic=self.magic, max_size=self._max_decompressed)
        except KafkalogError as e:
            raise self._err(type(e), e.reason, self.size_in_bytes - len(value)) from None
        try:
            self._records = self._inner_records(data)
        except KafkalogError as e:
            pos = "" if e.position is None else f" (byte {e.position} of the decompressed message set)"
            raise self._err(type(e), f"{e.reason}{pos}") from None
        return self._records

    def _inner_records(self, data: bytes) -> list[Record]:
        """The inner messages of a wrapper: the compiled walk when it is in use, else (and
        to word its errors when it rejects them) the pure walk below."""
        ext = native.ext
        if ext is not None:
            append_time = None
            if self.magic == MAGIC_V1 and self._fields[_ATTRIBUTES] & TIMESTAMP_TYPE_MASK:
                append_time = self._fields[_TIMESTAMP]
            try:
                return ext.legacy_inner(data, self.magic, self.offset, append_time, Record)
            except native.Invalid:
                pass
        return self._walk_inner(data)

    def _walk_inner(self, data: bytes) -> list[Record]:
        wrapper_magic = self.magic
        inner: list[tuple[int, int, int, bytes | None, bytes | None, int, int]] = []
        pos, end = 0, len(data)
        while pos < end:
            if end - pos < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
                raise InvalidRecordError(f"inner message set ends with {end - pos} stray bytes", position=pos)
            offset, size = _OFFSET_AND_SIZE.unpack_from(data, pos)
            magic = data[pos + MAGIC_OFFSET]
            if magic != wrapper_magic:
                raise InvalidRecordError(
                    f"compressed message magic {magic} does not match wrapper magic {wrapper_magic}", position=pos
                )
            if size < _overhead(magic) or pos + LOG_OVERHEAD + size > end:
                raise InvalidRecordError(f"invalid inner message size {size}", position=pos + SIZE_OFFSET)
            header = _header(magic)
            fields = header.unpack_from(data, pos)
            msg_end = pos + LOG_OVERHEAD + size
            computed = zlib.crc32(memoryview(data)[pos + MAGIC_OFFSET : msg_end])
            if computed != fields[_CRC]:
                raise CorruptRecordError(
                    f"inner message at offset {offset}: stored crc = {fields[_CRC]}, computed crc = {computed}",
                    position=pos,
                )
            if fields[_ATTRIBUTES] & COMPRESSION_CODEC_MASK:
                raise InvalidRecordError("inner message is itself compressed", position=pos + ATTRIBUTES_OFFSET)
            key, value = _key_value(data, pos + header.size, msg_end)
            timestamp = fields[_TIMESTAMP] if magic == MAGIC_V1 else NO_TIMESTAMP
            inner.append((offset, timestamp, fields[_CRC], key, value, size + LOG_OVERHEAD, pos))
            pos = msg_end
        if not inner:
            raise InvalidRecordError("compressed message set with no inner records")
        if wrapper_magic == MAGIC_V1:
            wrapper_offset = self.offset
            last_inner = inner[-1][0]
            if wrapper_offset == 0:
                base = 0
            elif wrapper_offset < last_inner:
                raise InvalidRecordError(
                    f"wrapper offset {wrapper_offset} is less than the last inner message offset "
                    f"{last_inner} and it is not zero"
                )
            else:
                base = wrapper_offset - last_inner
            append_time = self._fields[_TIMESTAMP] if self._fields[_ATTRIBUTES] & TIMESTAMP_TYPE_MASK else None
        else:
            base = 0
            append_time = None
        # Offsets are int64 (Java would wrap what leaves the range; kafkalog refuses it).
        offsets = [m[0] for m in inner]
        if base > _INT64_MAX or base + min(offsets) < _INT64_MIN or base + max(offsets) > _INT64_MAX:
            raise InvalidRecordError(
                f"wrapper offset {self.offset} puts inner offsets {min(offsets)}..{max(offsets)} outside int64"
            )
        return [
            Record(base + off, ts if append_time is None else append_time, key, value, (), NO_SEQUENCE, size, crc)
            for off, ts, crc, key, value, size, _ in inner
        ]


# ----------------------------------------------------------------------------------------------
# Encoding


def encode_message(
    offset: int,
    magic: int,
    key: bytes | None,
    value: bytes | None,
    *,
    timestamp: int = NO_TIMESTAMP,
    attributes: int = 0,
) -> bytes:
    """Encode one v0/v1 message with its offset and size prefix."""
    header = _header(magic)
    key_part = b"\xff\xff\xff\xff" if key is None else _INT32.pack(len(key)) + key
    value_part = b"\xff\xff\xff\xff" if value is None else _INT32.pack(len(value)) + value
    size = header.size - LOG_OVERHEAD + len(key_part) + len(value_part)
    buf = bytearray(LOG_OVERHEAD + size)
    if magic == MAGIC_V0:
        header.pack_into(buf, 0, offset, size, 0, magic, attributes)
    else:
        header.pack_into(buf, 0, offset, size, 0, magic, attributes, timestamp)
    buf[header.size :] = key_part + value_part
    _UINT32.pack_into(buf, CRC_OFFSET, zlib.crc32(memoryview(buf)[MAGIC_OFFSET:]))
    return bytes(buf)


def encode_message_set(
    records: Iterable[tuple[int, int, bytes | None, bytes | None]],
    *,
    magic: int,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    compression_level: int | None = None,
    base_offset: int | None = None,
) -> bytes:
    """Encode ``(offset, timestamp, key, value)`` records as v0/v1 messages.

    Uncompressed: one message per record. Compressed: one wrapper whose offset is the last
    record's and whose inner offsets are absolute (v0) or, for v1, relative to ``base_offset``
    (the builder's base offset; the first record's offset when not given) — Kafka's
    ``MemoryRecordsBuilder.toInnerOffset``, so a rebuilt batch whose first records were
    compacted away keeps inner offsets that do not start at 0.
    """
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"legacy message sets have magic 0 or 1, not {magic}")
    codec = codec_for_id(int(compression), magic)
    records = list(records)
    ts_bit = TIMESTAMP_TYPE_MASK if magic == MAGIC_V1 and timestamp_type == TimestampType.LOG_APPEND_TIME else 0

    def stamp(ts: int) -> int:
        if magic == MAGIC_V0:
            return NO_TIMESTAMP
        return log_append_time if ts_bit and log_append_time is not None else ts

    if codec is Compression.NONE:
        return b"".join(
            encode_message(off, magic, key, value, timestamp=stamp(ts), attributes=ts_bit)
            for off, ts, key, value in records
        )
    if not records:
        return b""
    first = records[0][0] if base_offset is None else base_offset
    if first > records[0][0]:
        raise ValueError(f"base offset {first} is above the first record's offset {records[0][0]}")
    inner = b"".join(
        encode_message(off if magic == MAGIC_V0 else off - first, magic, key, value, timestamp=stamp(ts), attributes=ts_bit)
        for off, ts, key, value in records
    )
    wrapper_ts = NO_TIMESTAMP
    if magic == MAGIC_V1:
        wrapper_ts = log_append_time if ts_bit and log_append_time is not None else max(stamp(r[1]) for r in records)
    payload = compress(codec, inner, magic=magic, level=compression_level)
    return encode_message(records[-1][0], magic, None, payload, timestamp=wrapper_ts, attributes=int(codec) | ts_bit)
