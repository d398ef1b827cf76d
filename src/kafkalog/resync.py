"""Where a reader carries on after a bad batch: the two skip rules, and the check of a hint.

- :func:`next_valid_batch`, the *smallest* skip: after a corrupt or truncated entry, a reader
  that wants to go on (``verify``, ``salvage``, the dump) looks for the next byte position where
  a whole, CRC-valid batch starts. Candidates are found with one regular expression over a
  chunk (the plausible 17-byte prefix of a v0/v1/v2 entry), and each is then framed and
  validated through :class:`~kafkalog.file_records.FileRecords`.
- :func:`next_batch_boundary`, the skip to a *recorded* boundary (Spark's
  ``failOnCorruption=false``): past the bad batch by its size field when another batch frames
  there, else the next offset-index entry that frames a batch, else the end of the window.
- :func:`batch_at` is the lighter check of one given position (an index entry's), before a
  reader starts there.
"""

from __future__ import annotations

import bisect
import re
import struct
from collections.abc import Callable

from .errors import (
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkalogError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnsupportedCodecError,
)
from .file_records import FileRecords
from .index import OffsetIndex
from .record import LOG_OVERHEAD, MAGIC_V2, RecordBatch
from .recordbatch import RECORD_BATCH_OVERHEAD
from .memory_records import MIN_ENTRY_SIZE_FIELD

#: Largest batch a resync after corruption accepts as a candidate.
DEFAULT_MAX_RESYNC_BATCH = 64 << 20
_CHUNK = 1 << 20

# A plausible entry start: a non-negative offset, a size field that is non-negative and not
# below 14 (the smallest v0 message), and either magic 2 with the high byte of the attributes 0
# and a non-negative lastOffsetDelta, or magic 0/1 with only attribute bits 0-3 set.
_CANDIDATE = re.compile(
    rb"(?=[\x00-\x7f].{7}(?!\x00\x00\x00[\x00-\x0d])[\x00-\x7f].{7}(?:\x02.{4}\x00.[\x00-\x7f]|[\x00\x01][\x00-\x0f]))",
    re.DOTALL,
)
#: Bytes a candidate's pattern looks at (up to the high byte of a v2 lastOffsetDelta); every
#: real entry is longer (26 bytes at least).
_CANDIDATE_SPAN = 24
# A run of one repeated byte. A candidate inside it would have an offset like 0x0101010101010101
# (no log gets there) or, for zeros, a size of 0: candidates starting in a run are skipped, and
# inside a run of zeros every candidate whose size field lies in it.
_RUN = re.compile(rb"(.)\1{63,}", re.DOTALL)
#: What reading a batch raises when its bytes are bad.
BAD_BATCH_ERRORS = (CorruptRecordError, InvalidRecordError, TruncatedRecordError, UnsupportedCodecError,
                    RecordTooLargeError)
#: What framing an entry raises when the bytes at a position are not a batch.
_NOT_A_BATCH = (*BAD_BATCH_ERRORS, InvalidOffsetError)
_OFFSET_SIZE = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
# partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp,
# producerId, producerEpoch, baseSequence, recordCount: bytes 12..60 of a v2 batch.
_V2_HEADER = struct.Struct(">ibIhiqqqhii")
assert _V2_HEADER.size == 49
_V2_OVERHEAD = RECORD_BATCH_OVERHEAD


def _plausible_batch(
    fr: FileRecords, pos: int, head: bytes, end: int, min_offset: int | None, max_offset: int | None, max_size: int
) -> RecordBatch | None:
    """The valid batch starting at ``pos`` (whose first bytes are ``head``), or None.

    Header fields are checked before the CRC, so that bytes which only look like a batch at
    the framing level rarely cost a CRC over their declared size."""
    if len(head) < _V2_OVERHEAD:
        head = fr.read(pos - fr.start, _V2_OVERHEAD)
        if len(head) < MIN_ENTRY_SIZE_FIELD + LOG_OVERHEAD:
            return None
    offset, size = _OFFSET_SIZE.unpack_from(head, 0)
    magic = head[16]
    total = size + LOG_OVERHEAD
    if size < MIN_ENTRY_SIZE_FIELD or total > max_size or pos + total > end:
        return None
    if magic == MAGIC_V2:
        if total < _V2_OVERHEAD or len(head) < _V2_OVERHEAD:
            return None
        (epoch, _, _, attributes, delta, _, max_ts, pid, producer_epoch, sequence, count) = _V2_HEADER.unpack_from(head, 12)
        if (
            attributes & ~0x7F
            or attributes & 0x07 > 4
            or min(epoch, max_ts, pid, producer_epoch, sequence) < -1
            or delta < 0
            or count < 0
            or (count and delta < count - 1)
            or (attributes & 0x07 == 0 and count * 7 > size - 49)
        ):
            return None
        first, last = offset, offset + delta
    else:
        # The key and value lengths must fill the message exactly.
        at = 18 if magic == 0 else 26
        if head[17] & 0x07 > 3 or total < at + 8:
            return None
        (key_len,) = _INT32.unpack_from(fr.read(pos + at - fr.start, 4), 0)
        if key_len < -1 or at + 4 + max(key_len, 0) + 4 > total:
            return None
        value_at = at + 4 + max(key_len, 0)
        (value_len,) = _INT32.unpack_from(fr.read(pos + value_at - fr.start, 4), 0)
        if value_at + 4 + max(value_len, 0) != total or value_len < -1:
            return None
        first = last = offset  # a v0/v1 entry's offset is its (last) offset
    if (min_offset is not None and first < min_offset) or (max_offset is not None and last > max_offset):
        return None
    try:
        batch = next(fr.slice(pos, total).batches(), None)
        if batch is None:
            return None
        batch.ensure_valid()
    except KafkalogError:
        return None
    return batch


def next_valid_batch(
    fr: FileRecords,
    start: int,
    end: int | None = None,
    *,
    min_offset: int | None = None,
    max_offset: int | None = None,
    max_batch_size: int = DEFAULT_MAX_RESYNC_BATCH,
) -> RecordBatch | None:
    """The first whole, valid batch starting at or after byte ``start`` of ``fr``: the next
    plausible entry start (offset, size and magic agree, found by one regular-expression scan
    of the bytes), then its size against the file, its offsets against the bounds, and last
    its CRC and header (``ensure_valid``).

    The cost per byte is bounded: runs of one repeated byte (zeros of a preallocated tail)
    are skipped whole, a candidate must pass the cheap checks before its CRC is computed, and
    nothing is read beyond the file (a candidate's size is checked against what is left before
    anything is allocated).

    Args:
        fr: the file (positions are file positions).
        start, end: the byte range to search (``end`` defaults to the end of ``fr``).
        min_offset, max_offset: the batch's first offset (v2; a v0/v1 message's own offset)
            must be >= ``min_offset`` and its last offset <= ``max_offset``.
        max_batch_size: larger candidates are not considered.

    Returns:
        The batch (``batch.position`` is where it starts), or None.
    """
    end = fr.end if end is None else min(end, fr.end)
    pos = max(start, fr.start)
    while pos <= end - _CANDIDATE_SPAN:
        chunk = fr.read(pos - fr.start, min(_CHUNK, end - pos))
        usable = len(chunk) - _CANDIDATE_SPAN + 1  # the pattern sees a candidate's first 24 bytes
        if usable <= 0:
            break
        spans: list[tuple[int, int]] = []
        lo = 0
        for run in _RUN.finditer(chunk):
            if run.group(1) == b"\x00":
                skip_from, skip_to = run.start() - 8, run.end() - 11
            else:
                skip_from, skip_to = run.start(), run.end() - _CANDIDATE_SPAN + 1
            if skip_to > skip_from:
                spans.append((lo, max(lo, skip_from)))
                lo = max(lo, skip_to)
        spans.append((lo, usable))
        for lo, hi in spans:
            at = lo
            while at < hi:
                m = _CANDIDATE.search(chunk, at, min(len(chunk), hi + _CANDIDATE_SPAN - 1))
                if m is None or m.start() >= hi:
                    break
                cand = m.start()
                batch = _plausible_batch(
                    fr, pos + cand, chunk[cand : cand + _V2_OVERHEAD], end, min_offset, max_offset, max_batch_size
                )
                if batch is not None:
                    return batch
                at = cand + 1
        pos += usable
    return None


def batch_at(records: FileRecords, position: int, min_offset: int) -> RecordBatch | None:
    """The batch framed at ``position`` of ``records`` (size and magic possible, the whole
    entry in the file; its CRC is not checked) when its offset field is not below
    ``min_offset`` (the segment's base offset), else None.

    How a position taken from an index entry is checked before it is trusted: an index read
    while a writer changes it, or a damaged one, may point anywhere.
    """
    try:
        batch = next(records.slice(position).batches(), None)
    except _NOT_A_BATCH:
        return None
    if batch is None:
        return None
    # The offset field: a v2 batch's base offset, a v0/v1 entry's own (its last) offset.
    first = batch.base_offset if batch.magic == MAGIC_V2 else batch.last_offset
    return batch if first >= min_offset else None


def first_entry_after(index: OffsetIndex, position: int) -> int:
    """The slot of the first offset-index entry whose position is above ``position`` (the
    entries' positions ascend), or ``index.entries``."""
    return bisect.bisect_right(range(index.entries), position, key=lambda i: index.entry(i).position)


def next_batch_boundary(records: FileRecords, bad: int, end: int, base_offset: int,
                        offset_index: Callable[[], OffsetIndex]) -> int:
    """Where to carry on after a bad batch at ``bad`` inside the window ``[.., end)`` of a
    segment: past it when its size field leads to another batch that frames (or exactly to
    ``end``), else the first offset-index entry after ``bad`` that frames a batch, else ``end``.

    This skips at most to batch boundaries the writer recorded (its own framing, its index),
    never into bytes that only look like a batch; :func:`next_valid_batch` would resume at the
    first valid batch found anywhere after ``bad``, a smaller skip.

    Args:
        records: the segment from its start (positions are file positions).
        bad, end: the bad batch's position and the end of the window read.
        base_offset: the segment's base offset (a batch found must not start below it).
        offset_index: gives the segment's offset index; called only when the size field does
            not lead to a batch (on an object store, reading the index is a request).
    """
    head = records.read(bad, LOG_OVERHEAD)
    if len(head) == LOG_OVERHEAD:
        _, size = _OFFSET_SIZE.unpack_from(head, 0)
        after = bad + LOG_OVERHEAD + size
        if size >= MIN_ENTRY_SIZE_FIELD and (after == end or (bad < after < end and batch_at(records, after, base_offset))):
            return after
    index = offset_index()
    for k in range(first_entry_after(index, bad), index.entries):
        position = index.entry(k).position
        if bad < position < end and batch_at(records, position, base_offset):
            return position
    return end


def all_zero(fr: FileRecords, start: int, end: int) -> bool:
    """Whether bytes ``[start, end)`` of the file are all zero (read in 1 MiB chunks)."""
    pos = start
    while pos < end:
        chunk = fr.read(pos - fr.start, min(_CHUNK, end - pos))
        if not chunk:
            return True
        if chunk.count(0) != len(chunk):
            return False
        pos += len(chunk)
    return True
