"""Reading one slice on an executor: the batches of a segment window as record columns.

CRCs are checked (``checkCrcs``), aborted transactional data is dropped for read_committed
(Kafka's consumer algorithm over the ``.txnindex`` entries), control records are left out and
corrupt batches raise or are skipped (``failOnCorruption``) to the next batch boundary the
writer recorded (:func:`kafkalog.resync.next_batch_boundary`): the end of the bad batch's
declared size when the next entry frames there, else the next offset-index entry that frames,
else the end of the window. Runs of batches are decoded together with
:func:`kafkalog.decode_columns` into :class:`kafkalog.RecordColumns` of bounded size.

On the compiled core, without read_committed or ``includeMetadata``, the window is read in
chunks of ``_READ_BYTES`` (one ``pread`` each, into a reused buffer) and every run of whole uncompressed non-control
v2 batches in a chunk is framed, checked and decoded by the compiled scan and fill
(:func:`kafkalog.columnar.fast.decode_v2_in_place`), straight into the arrays handed to Arrow:
no batch object and no Python per batch. Any other entry (compressed, control, legacy, corrupt,
cut by the chunk's end) goes to the per-batch path below, which frames batches one by one until
the next plain v2 batch.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator
from typing import Any, NamedTuple

import numpy as np

from .. import (
    Compression,
    FileRecords,
    KafkalogError,
    MemoryRecords,
    OffsetIndex,
    RecordBatch,
    RecordColumns,
    decode_columns,
)
from .. import native
from ..columnar.fast import decode_v2_in_place
from ..partition_view import segment_file
from ..record import MAGIC_V2
from ..remote import DEFAULT_BLOCK_SIZE, Storage
from ..resync import BAD_BATCH_ERRORS, next_batch_boundary
from ..transaction_tracker import AbortedFilter
from ..errors import InvalidOffsetError
from ._options import _ReadOptions
from ._plan import _Slice
from ._stats import _Stats

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"

_MiB = 1 << 20
# Batch bytes decoded together into one Arrow batch at most (with maxRecordsPerBatch records):
# large enough that Spark's per-batch costs vanish, small enough to stay in memory already
# mapped (fresh pages are slow to fault in on some VMs).
_CHUNK_BYTES = 16 * _MiB
# Runs of plain v2 batches go to the compiled scan and fill when the compiled core is in use;
# False forces the per-batch path (the tests compare the two).
_COMPILED_RUNS = True
# The compiled runs read the window this many bytes at a time, into a buffer kept for the
# process's next slice (a Python worker reads one at a time; two cover a reader on another
# thread). 8 MiB keeps each run's arrays well below glibc's largest mmap threshold (32 MiB), so
# once warm they mostly come back from the heap already touched (fresh pages are slow to fault
# in on some VMs); runs still reach maxRecordsPerBatch for records of ~120 bytes.
_READ_BYTES = 8 * _MiB
_BUFFERS: list[bytearray] = []


def _span(batch: RecordBatch) -> tuple[int, int]:
    """The file positions [start, end) of a batch read from a file (its position is set)."""
    assert batch.position is not None
    return batch.position, batch.position + batch.size_in_bytes


def _batches(records: FileRecords, s: _Slice, options: _ReadOptions, stats: _Stats, *,
             shallow: bool = False, start: int | None = None) -> Iterator[RecordBatch]:
    """The batches of the slice's window from ``start`` (default: the window's start), checked
    (``shallow``: framed only, their bodies left to :func:`_emit`); corrupt ones raise or are
    skipped. The caller counts the bytes of the batches it takes."""
    pos = s.start_position if start is None else start
    end = min(s.end_position, records.size_in_bytes)
    while pos < end:
        window = records.slice(pos, end - pos)
        try:
            for batch in window.batches(validate=options.check_crcs and not shallow, strict=s.strict_end):
                if not options.check_crcs and not shallow:
                    batch.entry()  # load the body here, where a short read is reported
                yield batch
                pos = _span(batch)[1]
            return
        except BAD_BATCH_ERRORS as e:
            if options.fail_on_corruption:
                raise
            nxt = next_batch_boundary(records, pos, end, s.base, lambda: OffsetIndex.read_live(
                segment_file(Storage.dirname(s.path), s.base, ".index"), s.base, storage=options.storage))
            stats.skipped(records.path, pos, nxt, e)
            pos = nxt


def _read_slice(s: _Slice, options: _ReadOptions) -> Iterator[RecordColumns]:
    """The slice's records in [start, end) offsets, as columns of at most
    ``maxRecordsPerBatch`` records (control records left out)."""
    for columns, _ in _read_slice_batches(s, options):
        yield columns


class _BatchHeaders(NamedTuple):
    """The header fields of the batches some record columns came from, in offset order (one
    element per batch): what ``includeMetadata`` adds to each row from its batch."""

    last_offset: np.ndarray  # int64: a row belongs to the first batch whose last offset reaches it
    producer_id: np.ndarray  # int64
    producer_epoch: np.ndarray  # int16
    base_sequence: np.ndarray  # int32
    partition_leader_epoch: np.ndarray  # int32
    is_transactional: np.ndarray  # bool

    @classmethod
    def of(cls, batches: list[RecordBatch]) -> _BatchHeaders:
        return cls(
            np.fromiter((b.last_offset for b in batches), np.int64, len(batches)),
            np.fromiter((b.producer_id for b in batches), np.int64, len(batches)),
            np.fromiter((b.producer_epoch for b in batches), np.int16, len(batches)),
            np.fromiter((b.base_sequence for b in batches), np.int32, len(batches)),
            np.fromiter((b.partition_leader_epoch for b in batches), np.int32, len(batches)),
            np.fromiter((b.is_transactional for b in batches), np.bool_, len(batches)),
        )

    def rows(self, offsets: np.ndarray) -> np.ndarray:
        """For each row offset, the index of its batch."""
        return np.searchsorted(self.last_offset, offsets, side="left")


def _read_slice_batches(s: _Slice, options: _ReadOptions) -> Iterator[tuple[RecordColumns, _BatchHeaders | None]]:
    """:func:`_read_slice`, each part with the headers of the batches it came from when
    ``includeMetadata`` asks for them (else None). A segment deleted before or while it is read
    (retention) fails the read or, with ``failOnDataLoss=false``, ends it with a warning."""
    try:
        yield from _read_window(s, options)
    except FileNotFoundError:
        if options.fail_on_data_loss:
            raise InvalidOffsetError(
                "the segment was deleted (retention?) before it was read; set failOnDataLoss=false to skip it",
                file=s.path,
            ) from None
        _log.warning("kafkalog: %s was deleted before it was read; skipped (failOnDataLoss=false)", s.path)


def _read_window(s: _Slice, options: _ReadOptions) -> Iterator[tuple[RecordColumns, _BatchHeaders | None]]:
    """The body of :func:`_read_slice_batches` (FileNotFoundError passes through)."""
    stats = _Stats(options.stats_path)
    # Remote: one ranged request per read-ahead block, never past the slice's end (the window's
    # last batch is whole inside it: the planner ends slices at batch boundaries). The window's
    # end stands for the file's size, which saves a HEAD: nothing past it is read, and a file
    # deleted since planning fails its first GET instead.
    records = FileRecords.open(s.path, storage=options.storage, block_size=DEFAULT_BLOCK_SIZE,
                               end=s.end_position, size=s.end_position)
    stats.segments.append(s.path)
    aborted = AbortedFilter(s.aborted) if s.aborted is not None else None
    # The compiled runs need no batch object; read_committed reads control records while
    # walking and includeMetadata wants every batch's header, so those walk batch by batch.
    ext = native.ext if _COMPILED_RUNS and aborted is None and not options.include_metadata else None
    pos, end = s.start_position, min(s.end_position, records.size_in_bytes)
    try:
        while pos < end:
            if ext is not None:
                pos, done = yield from _compiled_runs(ext, records, s, options, stats, pos, end)
                if done or pos >= end:
                    break
            pos, done = yield from _batch_by_batch(records, s, options, stats, aborted, pos, until_plain=ext is not None)
            if done:
                break
    finally:
        stats.bytes_fetched += records.bytes_fetched
        records.close()
        stats.write()


def _compiled_runs(ext: Any, records: FileRecords, s: _Slice, options: _ReadOptions, stats: _Stats, pos: int,
                   end: int) -> Generator[tuple[RecordColumns, None], None, tuple[int, bool]]:
    """Decode the runs of plain v2 batches from ``pos``, chunk by chunk, each run framed,
    checked (CRC-32C with ``checkCrcs``) and decoded by the compiled core into at most
    ``maxRecordsPerBatch`` records. Returns where it stopped (an entry for the per-batch path,
    or ``end``) and whether the slice's last offset was reached."""
    # One read buffer, refilled chunk by chunk (the columns are copied out of it, never views
    # of it): a fresh buffer per chunk measured ~2x slower, in page faults (first touch).
    buf = _BUFFERS.pop() if _BUFFERS else bytearray(_READ_BYTES)
    if len(buf) != _READ_BYTES:
        buf = bytearray(_READ_BYTES)
    try:
        return (yield from _runs_in(ext, records, s, options, stats, pos, end, buf))
    finally:
        if len(_BUFFERS) < 2:
            _BUFFERS.append(buf)


def _runs_in(ext: Any, records: FileRecords, s: _Slice, options: _ReadOptions, stats: _Stats, pos: int, end: int,
             buf: bytearray) -> Generator[tuple[RecordColumns, None], None, tuple[int, bool]]:
    """:func:`_compiled_runs` with its read buffer."""
    at, filled = pos, 0  # the file position of buf[0], and the bytes it holds
    max_batch = records.max_batch_size
    while pos < end:
        if filled and at + filled < end and filled - (pos - at) < len(buf) // 2:
            filled = 0  # less than half a buffer left before more of the window: read on from pos,
            # so that a run is not cut short into a small Arrow batch by the buffer's end
        if filled == 0:
            want = min(len(buf), end - pos)
            filled, at = records.read_into(pos, memoryview(buf)[:want]), pos
            if filled != want:
                return pos, False  # the file shrank: the per-batch path reports what is there
        run = decode_v2_in_place(ext, buf, pos - at, filled, max_batch, options.check_crcs, 0,
                                 options.max_records_per_batch, options.include_headers, within=True)
        if run is None:
            if pos > at and at + filled < end:
                filled = 0  # the entry may only be cut by the chunk's end: read on from it
                continue
            return pos, False
        columns, stop, _ = run
        stats.bytes_read += at + stop - pos
        pos = at + stop
        n = len(columns)
        yield from ((part, None) for part in _parts(columns, s, options, stats))
        if n and columns.offset[n - 1] >= s.end_offset - 1:
            return pos, True
    return pos, False


def _is_plain(batch: RecordBatch) -> bool:
    """Whether the compiled runs take this batch (when its checks pass)."""
    return batch.magic == MAGIC_V2 and batch.compression == Compression.NONE and not batch.is_control


def _batch_by_batch(records: FileRecords, s: _Slice, options: _ReadOptions, stats: _Stats,
                    aborted: AbortedFilter | None, pos: int, *, until_plain: bool = False,
                    ) -> Generator[tuple[RecordColumns, _BatchHeaders | None], None, tuple[int, bool]]:
    """Frame the window's batches from ``pos`` one by one and decode them in chunks; with
    ``until_plain``, stop before the first plain v2 batch after the first batch taken (the
    compiled runs take it from there). Returns where it stopped and whether the slice's last
    offset was reached."""
    want = options.include_metadata
    # Without read_committed nothing needs a batch's body before decoding: the walk only frames
    # the batches, and each chunk of them is read with one pread and decoded (and checked) as
    # one buffer; read_committed reads control records while walking, so it walks checked.
    shallow = aborted is None
    chunk: list[RecordBatch] = []
    count = size = 0
    limit = options.max_records_per_batch
    done = False
    taken = 0
    stop = min(s.end_position, records.size_in_bytes)
    for batch in _batches(records, s, options, stats, shallow=shallow, start=pos):
        if until_plain and taken and _is_plain(batch):
            stop = _span(batch)[0]
            break
        taken += 1
        stats.bytes_read += batch.size_in_bytes
        stop = _span(batch)[1]
        last = batch.last_offset
        if last < s.start_offset:
            if aborted is not None:
                aborted.drops(batch)
            continue
        if aborted is not None and aborted.drops(batch):
            if last >= s.end_offset - 1:
                done = True
                break
            continue
        n = batch.count if batch.magic >= MAGIC_V2 else 1  # v0/v1 have no count: an entry counts as one
        if chunk and (count + n > limit or size >= _CHUNK_BYTES):
            headers = _BatchHeaders.of(chunk) if want else None
            for part in _emit(chunk, s, options, stats, records if shallow else None):
                yield part, headers
            chunk, count, size = [], 0, 0
        chunk.append(batch)
        count += n
        size += batch.size_in_bytes
        if last >= s.end_offset - 1:
            done = True
            break
    else:
        done = True  # the window's end (or a torn tail the walk ended at)
    if chunk:
        headers = _BatchHeaders.of(chunk) if want else None
        for part in _emit(chunk, s, options, stats, records if shallow else None):
            yield part, headers
    return stop, done


def _decode_in_one(chunk: list[RecordBatch], records: FileRecords, options: _ReadOptions) -> RecordColumns | None:
    """A chunk of consecutive v2 batches read with one pread and decoded (CRCs checked when
    asked) as one ``MemoryRecords``: the columnar decoder's fastest path. None when the chunk
    is not that, or anything is wrong -- the caller then goes batch by batch, so an error names
    the file and position, and the file cannot have changed under the decode unnoticed (the
    record count must be the one the framed headers promise)."""
    first, last = chunk[0], chunk[-1]
    start, end = _span(first)[0], _span(last)[1]
    expected = 0
    at = start
    for batch in chunk:
        if batch.magic != MAGIC_V2 or batch.position != at:
            return None
        at += batch.size_in_bytes
        if not batch.is_control:
            expected += batch.count
    data = records.read(start, end - start)
    if len(data) != end - start:
        return None
    try:
        columns = decode_columns(MemoryRecords(data, max_batch_size=max(end - start, 1)),
                                 validate=options.check_crcs, include_headers=options.include_headers)
    except KafkalogError:
        return None
    return columns if len(columns) == expected else None


def _emit(chunk: list[RecordBatch], s: _Slice, options: _ReadOptions, stats: _Stats,
          shallow_from: FileRecords | None = None) -> Iterator[RecordColumns]:
    """Decode a chunk; ``shallow_from``: its batches were only framed, not checked, and are
    read from that file."""
    columns = _decode_in_one(chunk, shallow_from, options) if shallow_from is not None else None
    check = shallow_from is not None and options.check_crcs
    if columns is None:
        try:
            columns = decode_columns(chunk, validate=check, include_headers=options.include_headers)
        except BAD_BATCH_ERRORS:
            if options.fail_on_corruption:
                raise
            parts = []
            for batch in chunk:  # find and skip the bad batches one by one
                try:
                    parts.append(decode_columns([batch], validate=check, include_headers=options.include_headers))
                except BAD_BATCH_ERRORS as e:
                    stats.skipped(s.path, *_span(batch), e)
            columns = RecordColumns.concat(parts) if parts else RecordColumns.empty(include_headers=options.include_headers)
    yield from _parts(columns, s, options, stats)


def _parts(columns: RecordColumns, s: _Slice, options: _ReadOptions, stats: _Stats) -> Iterator[RecordColumns]:
    """The records of ``columns`` inside the slice's offsets, in parts of at most
    ``maxRecordsPerBatch``."""
    n = len(columns)
    if n == 0:
        return
    offsets = columns.offset
    if offsets[0] < s.start_offset or offsets[n - 1] >= s.end_offset:
        # Offsets ascend within a partition: the wanted ones are one contiguous run.
        columns = columns.slice(int(offsets.searchsorted(s.start_offset)), int(offsets.searchsorted(s.end_offset)))
        n = len(columns)
        if n == 0:
            return
    step = options.max_records_per_batch
    for lo in range(0, n, step):
        part = columns if n <= step else columns.slice(lo, lo + step)
        stats.records += len(part)
        yield part
