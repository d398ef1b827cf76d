"""Records: the enums, constants and value types shared by every message format.

A :class:`Record` is what deep iteration yields for every magic: offset, timestamp, key,
value, headers and sequence. Records of a control batch are :class:`ControlRecord` and also
expose the control type and, for transaction markers, the coordinator epoch. The classes are
plain immutable-by-convention values, safe to share between threads.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import IntEnum
from typing import NamedTuple

from .errors import InvalidRecordError, KafkalogError, TruncatedRecordError

MAGIC_V0, MAGIC_V1, MAGIC_V2 = 0, 1, 2
CURRENT_MAGIC = MAGIC_V2
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# The framing common to every magic (Kafka's ``Records``): each top-level entry starts with
# offset:int64 and size:int32 (the size of what follows), and its magic byte sits at byte 16.
OFFSET_OFFSET = 0
OFFSET_LENGTH = 8
SIZE_OFFSET = OFFSET_OFFSET + OFFSET_LENGTH
SIZE_LENGTH = 4
#: The offset and size prefix of every entry (12 bytes), not counted by the size field.
LOG_OVERHEAD = SIZE_OFFSET + SIZE_LENGTH
MAGIC_OFFSET = 16
MAGIC_LENGTH = 1
#: Reading this many bytes (17) frames any entry: its size and its magic.
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + MAGIC_LENGTH
# Attribute bits every magic shares: the codec in bits 0-2, the timestamp type in bit 3 (v1, v2).
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08


class TimestampType(IntEnum):
    """How a batch's timestamps were set (bit 3 of the attributes; none for magic 0)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def kafka_name(self) -> str:
        """Kafka's display name: ``NoTimestampType``, ``CreateTime`` or ``LogAppendTime``."""
        return _TIMESTAMP_NAMES[self]


_TIMESTAMP_NAMES = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


class ControlRecordType(IntEnum):
    """The type in a control record's key. ABORT and COMMIT are transaction markers; the
    others are written by KRaft (Kafka 3.x ``ControlRecordType``)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    @classmethod
    def parse(cls, type_id: int) -> ControlRecordType:
        """The type for a key's type field; an unknown id gives ``UNKNOWN`` (as Kafka does)."""
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN


class Header(NamedTuple):
    """One record header: a UTF-8 key (never null) and a value (bytes or None)."""

    key: str
    value: bytes | None


class Record:
    """One record of any magic.

    Attributes:
        offset: absolute offset.
        timestamp: as Kafka reports it (the batch's append time under LogAppendTime; -1 for
            magic 0).
        key, value: bytes or None.
        headers: a tuple of :class:`Header` (always empty before magic 2).
        sequence: the producer sequence number, or -1.
        size_in_bytes: the record's encoded size (v2: length varint included; v0/v1: the whole
            message with its 12-byte offset and size prefix).
        crc: the stored CRC-32 of a v0/v1 message; None for v2 records (the batch has the CRC).
    """

    __slots__ = ("offset", "timestamp", "key", "value", "headers", "sequence", "size_in_bytes", "crc")

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Header, ...] = (),
        sequence: int = NO_SEQUENCE,
        size_in_bytes: int = 0,
        crc: int | None = None,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.sequence = sequence
        self.size_in_bytes = size_in_bytes
        self.crc = crc

    @property
    def is_control(self) -> bool:
        """True for the records of a control batch."""
        return False

    @property
    def control_type(self) -> ControlRecordType | None:
        """The control type of a control record (:class:`ControlRecord`); None here."""
        return None

    @property
    def coordinator_epoch(self) -> int | None:
        """A transaction marker's coordinator epoch (:class:`ControlRecord`); None here."""
        return None

    def _fields(self) -> tuple:
        return (self.offset, self.timestamp, self.key, self.value, self.headers, self.sequence)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == other._fields() and self.is_control == other.is_control

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        extra = f", control_type={self.control_type.name}" if self.control_type is not None else ""
        return (
            f"{type(self).__name__}(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={_short(self.value)}, headers={self.headers!r}, sequence={self.sequence}{extra})"
        )


def _short(value: bytes | None) -> str:
    if value is None or len(value) <= 32:
        return repr(value)
    return f"{value[:32]!r}...({len(value)} bytes)"


_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


class ControlRecord(Record):
    """A record of a control batch: its key holds ``version:int16, type:int16``; a transaction
    marker's value holds ``version:int16, coordinatorEpoch:int32``.

    Raises (on construction):
        InvalidRecordError: the key is shorter than 4 bytes, or a marker's value shorter than 6.
    """

    __slots__ = ("_control_type", "_coordinator_epoch")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        key, value = self.key, self.value
        if key is None or len(key) < _CONTROL_KEY.size:
            raise InvalidRecordError(f"control record at offset {self.offset} has a key shorter than 4 bytes")
        # Kafka reads the type whatever the key version says (it only logs newer versions).
        _, type_id = _CONTROL_KEY.unpack_from(key)
        self._control_type = ControlRecordType.parse(type_id)
        self._coordinator_epoch = None
        if self._control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            if value is None or len(value) < _END_TXN_VALUE.size:
                raise InvalidRecordError(
                    f"end-transaction marker at offset {self.offset} has a value shorter than 6 bytes"
                )
            _, self._coordinator_epoch = _END_TXN_VALUE.unpack_from(value)

    @property
    def control_type(self) -> ControlRecordType:
        """The control type read from the key."""
        return self._control_type

    @property
    def coordinator_epoch(self) -> int | None:
        """The transaction coordinator's epoch for ABORT/COMMIT markers, else None."""
        return self._coordinator_epoch

    @property
    def is_control(self) -> bool:
        return True


def control_key(control_type: ControlRecordType, version: int = 0) -> bytes:
    """The key of a control record of ``control_type``."""
    return _CONTROL_KEY.pack(version, int(control_type))


def end_txn_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    """The value of an ABORT/COMMIT marker record."""
    return _END_TXN_VALUE.pack(version, coordinator_epoch)


class RecordBatch(ABC):
    """One batch of any magic: a v2 RecordBatch, or a v0/v1 top-level message (plain or a
    compressed wrapper) presented through the same interface.

    Header questions (offsets, timestamps, codec, producer fields, size, validity) never decode
    the records; iterating the batch (or :meth:`records`) decompresses and decodes them.
    Subclasses: :class:`kafkalog.recordbatch.DefaultRecordBatch` (v2) and
    :class:`kafkalog.legacy_record.LegacyRecordBatch` (v0/v1). Not thread-safe while lazily loading.
    """

    __slots__ = ()

    base_offset: int
    last_offset: int
    size_in_bytes: int
    # Subclasses define these slots: the buffer holding (at least the header of) the entry, the
    # entry's start in it, its position in its file (None in memory), the file's name, and a
    # callable returning the whole entry when only the header was read.
    _buf: bytes | bytearray | memoryview
    _off: int
    _position: int | None
    _file: str | None
    _loader: Callable[[], bytes] | None

    @property
    @abstractmethod
    def magic(self) -> int:
        """The format version: 2 for a v2 batch, 0 or 1 for a legacy message."""

    @property
    def position(self) -> int | None:
        """Byte position of the batch in its file, or None for in-memory data."""
        return self._position

    @property
    def file(self) -> str | None:
        """The file the batch was read from, or None."""
        return self._file

    @abstractmethod
    def _label(self) -> str:
        """How errors name this batch (its kind and offset)."""

    def _err(self, cls: type[KafkalogError], reason: str, shift: int = 0) -> KafkalogError:
        """An error of type ``cls`` located ``shift`` bytes into this batch."""
        # In memory there is no file position: report the position in the buffer.
        where = (self._off if self._position is None else self._position) + shift
        return cls(f"{self._label()}: {reason}", file=self._file, position=where)

    def entry(self) -> memoryview:
        """The whole entry's bytes (loading them from the file on first use)."""
        size = self.size_in_bytes
        if len(self._buf) - self._off < size:
            if self._loader is None:
                raise self._err(TruncatedRecordError, f"only {len(self._buf) - self._off} of {size} bytes present")
            data = self._loader()
            if len(data) < size:
                raise self._err(TruncatedRecordError, f"only {len(data)} of {size} bytes could be read")
            self._buf, self._off, self._loader = data, 0, None
        return memoryview(self._buf)[self._off : self._off + size]

    @property
    def next_offset(self) -> int:
        """The offset after this batch's last offset."""
        return self.last_offset + 1

    @property
    @abstractmethod
    def attributes(self) -> int:
        """The stored attributes: an int16 for v2, the int8 of the message for v0/v1 (codec in
        bits 0-2, timestamp type in bit 3, and for v2 the transactional, control and
        delete-horizon bits)."""

    @abstractmethod
    def compute_crc(self) -> int:
        """The checksum of the bytes the stored CRC covers (CRC-32C from the attributes to the
        end for v2, CRC-32 from the magic to the end for v0/v1): equal to :attr:`crc` when the
        batch is intact."""

    @abstractmethod
    def ensure_valid(self, *, deep: bool = False) -> None:
        """Check the batch; with ``deep``, decode every record too. Raises a kafkalog error."""

    @abstractmethod
    def records(self) -> list[Record]:
        """Decompress and decode every record of the batch."""

    def is_valid(self) -> bool:
        """True if :meth:`ensure_valid` passes (CRC, sizes, codec and counts); never raises."""
        try:
            self.ensure_valid()
        except KafkalogError:
            return False
        return True

    def __iter__(self):
        return iter(self.records())
