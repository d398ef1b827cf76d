"""Runs of batches: framing, the shared ``Records`` interface, and :class:`MemoryRecords`.

Every top-level entry starts ``offset:int64, size:int32`` and has its magic at byte 16, so
iteration reads those 17 bytes, rejects impossible sizes at once, and then hands over to the v2
(:mod:`kafkalog.recordbatch`) or the v0/v1 (:mod:`kafkalog.legacy_record`) decoder — Kafka's
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

import enum
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from . import native
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from .errors import CorruptRecordError, TruncatedRecordError
from .legacy_record import RECORD_OVERHEAD_V0, LegacyRecordBatch, encode_message_set
from .record import (
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    SIZE_OFFSET,
    Record,
    RecordBatch,
    TimestampType,
)
from .recordbatch import (
    RECORD_BATCH_OVERHEAD,
    RECORDS_OFFSET,
    DefaultRecordBatch,
    encode_batch,
    encode_record,
)

_SIZE = struct.Struct(">i")
#: Smallest legal value of the size field (14): a v0 message with null key and value.
MIN_ENTRY_SIZE_FIELD = RECORD_OVERHEAD_V0
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
    (size,) = _SIZE.unpack_from(buf, at + SIZE_OFFSET)
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
    magic = buf[at + MAGIC_OFFSET]
    if magic > MAGIC_V2:  # a signed byte: 128..255 are negative
        raise CorruptRecordError(
            f"invalid magic found in record: {magic if magic < 128 else magic - 256}",
            file=file,
            position=position + MAGIC_OFFSET,
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

    @property
    def max_batch_size(self) -> int:
        """The largest batch framing accepts (a larger size field is corrupt)."""
        return self._max_batch_size

    @property
    def max_decompressed_size(self) -> int:
        """The cap on one batch's decompressed payload."""
        return self._max_decompressed

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


# ----------------------------------------------------------------------------------------------
# Filtering: the log cleaner's rewrite (Kafka's MemoryRecords.filterTo)


class BatchRetention(enum.Enum):
    """What to do with a batch before its records are looked at (Kafka's ``BatchRetention``)."""

    DELETE = "delete"  #: drop the whole batch without reading its records
    RETAIN_EMPTY = "retain-empty"  #: keep the batch even if no record survives (v2: a header-only batch)
    DELETE_EMPTY = "delete-empty"  #: drop the batch if no record survives


class RecordFilter(ABC):
    """Decides what :func:`filter_to` keeps (Kafka's ``MemoryRecords.RecordFilter``).

    Attributes:
        current_time: epoch ms of this cleaning pass; a v2 batch keeping a tombstone (or a
            marker of an empty transaction) gets ``current_time + delete_retention_ms`` as its
            delete horizon the first time it is rewritten.
        delete_retention_ms: the topic's ``delete.retention.ms``.
    """

    def __init__(self, current_time: int, delete_retention_ms: int) -> None:
        self.current_time = current_time
        self.delete_retention_ms = delete_retention_ms

    @abstractmethod
    def check_batch_retention(self, batch: RecordBatch) -> tuple[BatchRetention, bool]:
        """``(retention, contains_marker_for_empty_txn)`` for ``batch``; the flag asks for a
        delete horizon on a control batch whose transaction has no data left."""

    @abstractmethod
    def retain(self, batch: RecordBatch, records: Sequence[Record]) -> Sequence[bool]:
        """One flag per record of ``batch`` (in order): keep it or not. Called only for batches
        not dropped by :meth:`check_batch_retention`."""

    def retain_payload(self, batch: RecordBatch, data: bytes | memoryview, start: int, end: int) -> PayloadVerdict | None:
        """:meth:`retain` for a non-empty v2 batch from its (decompressed) payload
        ``data[start:end]``, without decoding records, or None to be asked :meth:`retain`
        instead (the default). Only called on the compiled core."""
        return None


class PayloadVerdict(NamedTuple):
    """What :meth:`RecordFilter.retain_payload` keeps: one flag byte per record (1: keep), how
    many are kept, and whether a kept one is a tombstone (a null value)."""

    flags: bytes
    kept: int
    kept_tombstone: bool


class RetainedBatch(NamedTuple):
    """One batch :func:`filter_to` wrote: where in the output, and what indexing it needs."""

    position: int
    size: int
    max_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int


@dataclass
class FilterResult:
    """What one :func:`filter_to` call read and kept (Kafka's ``FilterResult``).

    ``max_offset`` is the highest kept offset (-1 when nothing was kept), ``max_timestamp`` the
    highest kept batch timestamp and ``shallow_offset_of_max_timestamp`` the last offset of the
    batch holding it: what a segment needs to index the output. ``retained`` has the same for
    each batch written, in order.
    """

    records_read: int = 0
    bytes_read: int = 0
    records_retained: int = 0
    bytes_retained: int = 0
    batches_read: int = 0
    batches_retained: int = 0
    batches_rewritten: int = 0
    empty_batches: int = 0
    horizons_set: int = 0
    max_offset: int = -1
    max_timestamp: int = -1
    shallow_offset_of_max_timestamp: int = -1
    retained: list[RetainedBatch] = field(default_factory=list)

    def _kept(self, position: int, size: int, max_offset: int, max_timestamp: int, shallow_offset: int, records: int) -> None:
        self.retained.append(RetainedBatch(position, size, max_offset, max_timestamp, shallow_offset))
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.shallow_offset_of_max_timestamp = shallow_offset
        if max_offset > self.max_offset:
            self.max_offset = max_offset
        self.records_retained += records
        self.bytes_retained += size
        self.batches_retained += 1


def filter_to(
    batches: Iterable[RecordBatch], record_filter: RecordFilter, out: bytearray, *, compression_level: int | None = None
) -> FilterResult:
    """Append to ``out`` what ``record_filter`` keeps of ``batches``; return what happened.

    A batch whose records all survive is copied byte for byte, unless it is a v2 batch that
    keeps a tombstone (or is a marker of an empty transaction) and has no delete horizon yet:
    that one is rewritten with the horizon set. A batch that loses records is rewritten with the
    same codec and the same batch metadata -- v2: base offset, last offset delta, producer id,
    epoch, base sequence, partition leader epoch, timestamp type, transactional and control
    flags; v0/v1: a wrapper at the last kept offset, as Kafka's builder writes it. A v2 batch
    kept with no records (``RETAIN_EMPTY``) becomes a 61-byte header that still carries its
    producer's sequence range.

    On the compiled core a v2 batch the filter can judge from its payload
    (:meth:`RecordFilter.retain_payload`) is filtered and re-encoded without a ``Record`` per
    record; the bytes written are the same.
    """
    result = FilterResult()
    for batch in batches:
        retention, marker_for_empty_txn = record_filter.check_batch_retention(batch)
        result.bytes_read += batch.size_in_bytes
        result.batches_read += 1
        if retention is BatchRetention.DELETE:
            continue
        v2 = batch.magic >= MAGIC_V2
        kept: _Kept | None = None
        if v2 and native.ext is not None and batch.count:
            kept = _kept_from_payload(batch, record_filter)
        if kept is None:
            kept = _kept_from_records(batch, record_filter)
        result.records_read += kept.read
        if kept.count:
            needs_horizon = (
                v2 and (kept.tombstone or marker_for_empty_txn) and batch.delete_horizon_ms is None
            )
            position = len(out)
            if kept.count == kept.read and not needs_horizon:
                raw = batch.entry()
                out += raw
                result._kept(position, len(raw), batch.last_offset, batch.max_timestamp, batch.last_offset, kept.count)
            else:
                if needs_horizon:
                    horizon: int | None = record_filter.current_time + record_filter.delete_retention_ms
                    result.horizons_set += 1
                else:
                    horizon = batch.delete_horizon_ms
                raw, max_ts, last, max_offset = kept.rebuild(horizon, compression_level)
                out += raw
                result.batches_rewritten += 1
                result._kept(position, len(raw), max_offset, max_ts, last, kept.count)
        elif retention is BatchRetention.RETAIN_EMPTY and v2:
            # Kafka throws for an empty legacy batch here ("Empty batches are only supported
            # for magic v2"), which marks the whole log uncleanable; a legacy message set has no
            # producer state to keep, so dropping it is the corrected behaviour.
            position = len(out)
            raw = _empty_batch(batch)
            out += raw
            result.empty_batches += 1
            result._kept(position, len(raw), batch.last_offset, batch.max_timestamp, batch.last_offset, 0)
    return result


class _Kept:
    """What a filter keeps of one batch: ``read`` records, ``count`` kept, whether a kept one
    is a tombstone, and how to re-encode the kept ones (``rebuild(horizon, level)`` ->
    ``(entry, max timestamp, shallow last offset, last kept offset)``)."""

    __slots__ = ("count", "read", "rebuild", "tombstone")

    def __init__(self, read: int, count: int, tombstone: bool, rebuild) -> None:
        self.read, self.count, self.tombstone, self.rebuild = read, count, tombstone, rebuild


def _kept_from_records(batch: RecordBatch, record_filter: RecordFilter) -> _Kept:
    """The reference path: decode every record and ask :meth:`RecordFilter.retain`."""
    records = batch.records()
    flags = record_filter.retain(batch, records)
    if len(flags) != len(records):
        raise ValueError(f"the filter returned {len(flags)} flags for {len(records)} records")
    kept = [r for r, keep in zip(records, flags) if keep]
    return _Kept(
        len(records), len(kept), any(r.value is None for r in kept),
        lambda horizon, level: _rebuild(batch, kept, horizon, level),
    )  # fmt: skip


def records_span(batch: RecordBatch) -> tuple[bytes | memoryview, int, int]:
    """A v2 batch's records as ``(buffer, start, end)`` for the compiled loops: the entry itself
    when it is uncompressed (no copy: the walk stays within ``[start, end)``), else
    :meth:`~kafkalog.recordbatch.DefaultRecordBatch.payload` (decompressed)."""
    if batch.attributes & COMPRESSION_CODEC_MASK == 0:
        entry = batch.entry()
        return entry, RECORDS_OFFSET, len(entry)
    return batch.payload()


def _kept_from_payload(batch: RecordBatch, record_filter: RecordFilter) -> _Kept | None:
    """The compiled path for a v2 batch, or None when the filter wants the records."""
    data, start, end = records_span(batch)
    verdict = record_filter.retain_payload(batch, data, start, end)
    if verdict is None:
        return None

    def rebuild(horizon: int | None, level: int | None) -> tuple[bytes, int, int, int]:
        ext = native.ext
        log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        try:
            payload, count, base_ts, max_ts, last_kept = ext.rebuild_v2(
                data, start, end, batch.count, verdict.flags, batch.base_offset, batch.base_timestamp,
                batch.max_timestamp if log_append else None, horizon,
            )  # fmt: skip
        except native.Invalid:  # e.g. a header key that is not ASCII: the pure encoder decides
            kept = [r for r, keep in zip(batch.records(), verdict.flags) if keep]
            return _rebuild(batch, kept, horizon, level)
        entry = _encode_like(batch, payload, count, base_ts, max_ts, horizon, level)
        return entry, max_ts, batch.last_offset, last_kept

    return _Kept(batch.count, verdict.kept, verdict.kept_tombstone, rebuild)


def _rebuild(
    batch: RecordBatch, kept: list[Record], horizon: int | None, level: int | None
) -> tuple[bytes, int, int, int]:
    """Re-encode ``kept`` in a batch like ``batch`` (Kafka's ``buildRetainedRecordsInto``):
    ``(entry bytes, max timestamp, shallow last offset, last kept offset)``."""
    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    if batch.magic < MAGIC_V2:
        entry = encode_message_set(
            ((r.offset, r.timestamp, r.key, r.value) for r in kept),
            magic=batch.magic,
            compression=batch.compression,
            timestamp_type=batch.timestamp_type,
            log_append_time=batch.max_timestamp if log_append else None,
            compression_level=level,
        )
        max_ts = batch.max_timestamp if log_append else max(r.timestamp for r in kept)
        return entry, max_ts, kept[-1].offset, kept[-1].offset
    base = batch.base_offset
    # MemoryRecordsBuilder: the base timestamp is the delete horizon when there is one, else
    # the first record's; under LogAppendTime every record reads as the batch's append time.
    base_ts = horizon if horizon is not None else kept[0].timestamp
    max_ts = batch.max_timestamp if log_append else max(r.timestamp for r in kept)
    payload = b"".join(encode_record(r.offset - base, r.timestamp - base_ts, r.key, r.value, r.headers) for r in kept)
    entry = _encode_like(batch, payload, len(kept), base_ts, max_ts, horizon, level)
    return entry, max_ts, batch.last_offset, kept[-1].offset


def _encode_like(
    batch: RecordBatch, payload: bytes, count: int, base_ts: int, max_ts: int, horizon: int | None, level: int | None
) -> bytes:
    """A v2 batch of ``count`` encoded records with ``batch``'s metadata."""
    return encode_batch(
        payload,
        count=count,
        base_offset=batch.base_offset,
        # The original last offset stays, so the producer's last sequence survives compaction.
        last_offset_delta=batch.last_offset - batch.base_offset,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        compression=batch.compression,
        timestamp_type=batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        delete_horizon_ms=horizon,
        partition_leader_epoch=batch.partition_leader_epoch,
        compression_level=level,
    )


def _empty_batch(batch: RecordBatch) -> bytes:
    """A header-only v2 batch standing for ``batch`` (Kafka's ``writeEmptyHeader``): no
    records, no codec, base timestamp -1, max timestamp and producer fields kept."""
    return encode_batch(
        b"",
        count=0,
        base_offset=batch.base_offset,
        last_offset_delta=batch.last_offset - batch.base_offset,
        base_timestamp=-1,
        max_timestamp=batch.max_timestamp,
        timestamp_type=batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch,
    )
