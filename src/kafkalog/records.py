"""Runs of batches: framing, the shared ``Records`` interface, and :class:`MemoryRecords`.

Every top-level entry starts ``offset:int64, size:int32`` and has its magic at byte 16, so
iteration reads those 17 bytes, rejects impossible sizes at once, and then hands over to the v2
(:mod:`kafkalog.recordbatch`) or the v0/v1 (:mod:`kafkalog.legacy`) decoder — Kafka's
``ByteBufferLogInputStream``/``FileLogInputStream`` in the same order:

1. fewer than 12 bytes left: a partial tail;
2. size below 14 (the smallest v0 message): corrupt; size above the reader's maximum: corrupt;
3. fewer than 17 bytes left: a partial tail; magic outside 0..2: corrupt;
4. the entry runs past the data: a partial tail;
5. a v2 entry smaller than its 61-byte header: corrupt.

A partial tail ends shallow iteration cleanly (as Kafka's readers do; the bytes may be a write
in progress) unless ``strict=True``, when it raises :class:`~kafkalog.errors.TruncatedRecordError`;
``validate()`` is strict.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from collections.abc import Iterator

from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from .errors import CorruptRecordError, TruncatedRecordError
from .legacy import LegacyRecordBatch
from .record import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_V2, Record, RecordBatch
from .recordbatch import RECORD_BATCH_OVERHEAD, DefaultRecordBatch

__all__ = ["Records", "MemoryRecords", "frame_entry"]

_SIZE = struct.Struct(">i")
#: Smallest legal value of the size field: a v0 message with null key and value.
MIN_ENTRY_SIZE_FIELD = 14
#: Largest entry a reader accepts unless told otherwise (the int32 size field's limit).
DEFAULT_MAX_BATCH_SIZE = 0x7FFFFFFF


def frame_entry(
    buf, at: int, remaining: int, *, file: str | None, position: int, max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
) -> tuple[int, int] | None:
    """Frame the entry starting at ``buf[at]`` (``buf`` holds at least ``min(17, remaining)``
    bytes from there).

    Args:
        buf, at: the buffer and the entry's start in it.
        remaining: how many bytes the data holds from the entry's start to its end.
        file, position: where the entry is, for error messages.
        max_batch_size: the largest size field accepted.

    Returns:
        ``(entry_size, magic)``, or None when the data ends inside the entry (a partial tail).

    Raises:
        CorruptRecordError: an impossible size or magic.
    """
    if remaining < LOG_OVERHEAD:
        return None
    (size,) = _SIZE.unpack_from(buf, at + 8)
    if size < MIN_ENTRY_SIZE_FIELD:
        raise CorruptRecordError(
            f"record size {size} is less than the minimum record overhead ({MIN_ENTRY_SIZE_FIELD})",
            file=file,
            position=position,
        )
    if size > max_batch_size:
        raise CorruptRecordError(
            f"record size {size} exceeds the largest allowable message size ({max_batch_size})",
            file=file,
            position=position,
        )
    if remaining < HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = buf[at + 16]
    if magic > MAGIC_V2:  # a signed byte: 128..255 are negative
        raise CorruptRecordError(
            f"invalid magic found in record: {magic if magic < 128 else magic - 256}", file=file, position=position + 16
        )
    if remaining < size + LOG_OVERHEAD:
        return None
    if magic == MAGIC_V2 and size + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"record batch size {size + LOG_OVERHEAD} is smaller than the minimum allowed overhead "
            f"{RECORD_BATCH_OVERHEAD}",
            file=file,
            position=position,
        )
    return size + LOG_OVERHEAD, magic


def batch_class(magic: int) -> type[DefaultRecordBatch] | type[LegacyRecordBatch]:
    """The batch class for a (framed) magic value."""
    return DefaultRecordBatch if magic == MAGIC_V2 else LegacyRecordBatch


class Records(ABC):
    """A run of batches, over memory or a file; the interface both backings share."""

    @property
    @abstractmethod
    def size_in_bytes(self) -> int:
        """Bytes in this run (including any partial tail)."""

    @abstractmethod
    def batches(self, *, validate: bool = False, strict: bool = False) -> Iterator[RecordBatch]:
        """Shallow iteration: one :class:`RecordBatch` per entry, reading only headers.

        Args:
            validate: check each batch (:meth:`RecordBatch.ensure_valid`) before yielding it.
            strict: raise :class:`TruncatedRecordError` at a partial tail instead of stopping.
        """

    def records(self) -> Iterator[Record]:
        """Deep iteration: every record of every batch, decompressing as needed."""
        for batch in self.batches():
            yield from batch.records()

    def validate(self, *, deep: bool = False) -> int:
        """Check every batch (and with ``deep`` every record); return the number of batches.

        Raises:
            TruncatedRecordError: the data ends inside a batch.
            CorruptRecordError, InvalidRecordError: the first bad batch.
        """
        n = 0
        for batch in self.batches(validate=True, strict=True):
            if deep:
                batch.records()
            n += 1
        return n

    @property
    def valid_bytes(self) -> int:
        """Bytes up to the end of the last complete entry (where a partial tail starts)."""
        return sum(batch.size_in_bytes for batch in self.batches())


class MemoryRecords(Records):
    """Batches in a buffer (bytes, bytearray or memoryview), as Kafka's ``MemoryRecords``.

    Batches read from it reference the buffer without copying; for the fastest record decoding
    pass ``bytes``. Safe to share between threads for reading.
    """

    def __init__(
        self,
        buffer=b"",
        *,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        self._buf = buffer
        self._max_batch_size = max_batch_size
        self._max_decompressed = max_decompressed_size

    @property
    def buffer(self):
        """The underlying buffer."""
        return self._buf

    @property
    def size_in_bytes(self) -> int:
        return len(self._buf)

    def __bytes__(self) -> bytes:
        return bytes(self._buf)

    def __len__(self) -> int:
        return len(self._buf)

    def __repr__(self) -> str:
        return f"MemoryRecords(size_in_bytes={len(self._buf)})"

    def batches(self, *, validate: bool = False, strict: bool = False) -> Iterator[RecordBatch]:
        buf = self._buf
        end = len(buf)
        pos = 0
        max_size = self._max_batch_size
        max_decompressed = self._max_decompressed
        while pos < end:
            framed = frame_entry(buf, pos, end - pos, file=None, position=pos, max_batch_size=max_size)
            if framed is None:
                if strict:
                    raise TruncatedRecordError(
                        f"partial batch at the end: {end - pos} bytes do not hold a whole entry", position=pos
                    )
                return
            size, magic = framed
            if magic == MAGIC_V2:
                batch = DefaultRecordBatch(buf, pos, max_decompressed_size=max_decompressed)
            else:
                batch = LegacyRecordBatch(buf, pos, max_decompressed_size=max_decompressed)
            if validate:
                batch.ensure_valid()
            yield batch
            pos += size
