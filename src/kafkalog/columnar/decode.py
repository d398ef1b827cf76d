"""Whole-batch decode into columns: numpy arrays, and Arrow arrays built from their buffers.

What Spark and bulk tools read: every record of a run of batches as columns, without a Python
object per record. :func:`decode_columns` returns a :class:`RecordColumns` (the column layout:
:mod:`kafkalog.columnar.columns`); its :meth:`~RecordColumns.to_arrow` hands the same buffers to
pyarrow (:mod:`kafkalog.columnar.arrow`).

This module is the driver. From a ``MemoryRecords`` on the compiled core, each run of whole
uncompressed non-control v2 batches is decoded by two compiled calls
(:func:`kafkalog.columnar.fast.decode_v2_in_place`: framed, CRC-checked and walked in C, every
column written once into its final array; no per-batch Python, no concatenation). Other entries
(and every entry on the pure core) are framed in a tight loop and the headers of up to 2 MiB of
entries parsed and checked (counts, codec, control flag; the CRC one call per batch) with numpy
at once, without a batch object; uncompressed payloads are then read in place in the buffer,
not copied. Otherwise (and for compressed payloads) the payloads of
consecutive v2 batches (decompressed where needed) are joined into one buffer. Each run goes to
:mod:`kafkalog.columnar.fast` (the record walk keeping columns: compiled, or pure Python); when
a record fails a check, the whole run is decoded again batch by batch through the Record
iterator, which raises its exact error (file, position, reason). Control batches and v0/v1
messages always take that plain path, and ``KAFKALOG_COLUMNAR=plain`` in the environment forces
it for everything.

Thread-safety: each call works on its own state; the batches must not be mutated meanwhile.

Nothing is preallocated from a count field alone: a batch whose record count exceeds what its
payload could hold goes to the plain path (which rejects it).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .. import crc as _crc
from .. import native

# RecordColumns and the Arrow names, importable here too (the package facade exports them).
from .arrow import COLUMNS, DEFAULT_ARROW_COLUMNS, arrow_schema, arrow_type  # noqa: F401
from .columns import EMPTY_U8, RecordColumns, from_batch_records
from .fast import UsePlainPath, decode_v2_in_place, decode_v2_run
from ..compression import Compression, decompressor
from ..errors import KafkalogError
from ..legacy_record import LegacyRecordBatch
from ..record import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    RecordBatch,
)
from ..record_walk import MIN_RECORD_BODY
from ..recordbatch import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    HEADER,
    HEADER_FIELDS,
    LENGTH_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_OFFSET,
    DefaultRecordBatch,
)
from ..memory_records import MemoryRecords, Records, frame_entry

# Set KAFKALOG_COLUMNAR=plain to decode every batch through Record objects (the plain twin).
_PLAIN = os.environ.get("KAFKALOG_COLUMNAR", "").strip().lower() == "plain"
# Payload bytes joined into one buffer before the vectorised decode runs over it (measured:
# 1-2 MiB keeps the temporaries in cache; 4 MiB was up to a quarter slower on 100-byte records,
# and only a few per cent faster on 1 KiB ones).
_CHUNK_BYTES = 2 << 20
# The same for uncompressed payloads read in place from a MemoryRecords buffer: nothing is
# joined, and each run costs a fixed ~0.1 ms of numpy calls plus, past the first, a copy of its
# columns into the result, so larger runs win (measured: 2 MiB 27 us per 16 KiB batch of
# 100-byte records, 8 MiB 16 us).
_IN_PLACE_CHUNK_BYTES = 8 << 20
# Zeros after the joined payloads: the pure walk reads a malformed record's fields up to its
# declared end before rejecting it; the pad keeps such reads inside the buffer.
_PAD = bytes(64)
_MIN_RECORD_SIZE = MIN_RECORD_BODY + 1  # a record's body plus its one-byte length


def decode_columns(
    records_or_batches: Records | Iterable[RecordBatch],
    *,
    validate: bool = True,
    include_control: bool = False,
    include_headers: bool = True,
    max_records: int | None = None,
) -> RecordColumns:
    """Decode every record of a run of batches (any magic, any codec) into columns.

    The result agrees record for record with iterating the batches (``batch.records()``); a
    partial batch at the end of a ``Records`` ends the run, as in shallow iteration.

    Args:
        records_or_batches: a ``MemoryRecords``/``FileRecords``, or batches in order.
        validate: check each batch first (size, CRC -- CRC-32C in hardware where the CPU has
            it -- codec and counts), as ``batches(validate=True)`` does.
        include_control: keep the records of control batches (transaction markers); they are
            decoded, and so checked, either way.
        include_headers: decode the headers into the header table (they are checked either way).
        max_records: stop once this many records are decoded (the batches after the one that
            reaches it are not read).

    Raises:
        CorruptRecordError, InvalidRecordError, TruncatedRecordError, UnsupportedCodecError,
        RecordTooLargeError: the first bad batch, with its file and position, exactly as the
            Record iterator raises it.
    """
    if max_records is not None and max_records < 0:
        raise ValueError(f"max_records must be >= 0, not {max_records}")
    if isinstance(records_or_batches, Records):
        batches: Iterator[RecordBatch] = records_or_batches.batches(validate=validate)
        check = False
    else:
        batches = iter(records_or_batches)
        check = validate
    if max_records == 0:
        return RecordColumns.empty(include_headers=include_headers)
    decoder = _Decoder(include_control, include_headers)
    if isinstance(records_or_batches, MemoryRecords) and not _PLAIN:
        return decoder.run_memory(records_or_batches, validate, max_records)
    return decoder.run(batches, check, max_records)


class _Decoder:
    """One decode: runs of consecutive v2 batches go to the fast path, the rest to the plain.

    The run queued for the fast path: per batch its object (or, for a ``MemoryRecords``, its
    position, the object being made only if the run must be decoded again plainly), its index,
    its count, its header fields, and its payload -- decompressed bytes, or None when the
    payload is read in place from the ``MemoryRecords`` buffer (``run_spans``).
    """

    def __init__(self, include_control: bool, include_headers: bool) -> None:
        self.include_control = include_control
        self.include_headers = include_headers
        self.pieces: list[RecordColumns] = []
        self.buf: Any = None  # the MemoryRecords buffer, its uint8 view and decompression cap
        self.u = EMPTY_U8
        self.max_decompressed = 0
        self._new_run()

    def _new_run(self) -> None:
        self.run_batches: list[RecordBatch | int] = []
        self.run_fields: list[tuple[int, ...]] = []  # decode_v2_run's fields, per batch
        self.run_payloads: list[Any] = []
        self.run_spans: list[tuple[int, int]] = []
        self.run_bytes = 0
        self.run_in_place = True

    def run(self, batches: Iterator[RecordBatch], check: bool, max_records: int | None) -> RecordColumns:
        total = 0
        error: KafkalogError | None = None
        index = 0
        while max_records is None or total < max_records:
            try:
                batch = next(batches, None)
                if batch is None:
                    break
                if check:
                    batch.ensure_valid()
                total += self.add(batch, index)
            except KafkalogError as e:
                # Batches before this one may hold an earlier error: decode them first.
                error = e
                break
            index += 1
        return self.finish(error, max_records)

    def finish(self, error: KafkalogError | None, max_records: int | None) -> RecordColumns:
        self.flush()
        if error is not None:
            raise error
        out = RecordColumns.concat(self.pieces) if self.pieces else RecordColumns.empty(
            include_headers=self.include_headers
        )
        if max_records is not None and len(out) > max_records:
            out = out.slice(0, max_records)
        return out

    def add(self, batch: RecordBatch, index: int) -> int:
        """Queue or decode one batch; return how many records it adds."""
        if _PLAIN or batch.magic != MAGIC_V2 or batch.is_control:
            return self.plain(batch, index)
        count = batch.count
        if count <= 0:
            # An empty batch (kept by the cleaner for its producer state) has nothing to read.
            return 0 if count == 0 else self.plain(batch, index)
        if batch.attributes & COMPRESSION_CODEC_MASK == 0:
            payload = batch.entry()[RECORDS_OFFSET:]
        else:
            assert isinstance(batch, DefaultRecordBatch)  # magic 2
            payload = batch.payload()[0]  # checks the codec, relocates decompression errors
        if count > len(payload) // _MIN_RECORD_SIZE:
            return self.plain(batch, index)
        b = batch
        self.queue(batch, (b.base_offset, b.base_timestamp, b.max_timestamp, b.attributes, b.producer_id,
                           b.partition_leader_epoch, count, index), payload)
        return count

    def queue(self, batch: RecordBatch | int, fields: tuple[int, ...], payload: Any, span: tuple[int, int] | None = None) -> None:
        """Queue one batch for the fast path: its ``payload``, or (``payload`` None) the ``span``
        of the buffer where it lies in place."""
        self.run_batches.append(batch)
        self.run_fields.append(fields)
        self.run_payloads.append(payload)
        if span is not None:
            self.run_spans.append(span)
            self.run_bytes += span[1] - span[0]
        else:
            self.run_in_place = False
            self.run_bytes += len(payload)
        if self.run_bytes >= (_IN_PLACE_CHUNK_BYTES if self.run_in_place else _CHUNK_BYTES):
            self.flush()

    def plain(self, batch: RecordBatch, index: int) -> int:
        """Decode one batch through the Record iterator (after the queued run, to keep order)."""
        self.flush()
        records = batch.records()
        if batch.is_control and not self.include_control:
            return 0
        self.pieces.append(from_batch_records(records, batch, index, self.include_headers))
        return len(records)

    def batch_at(self, position: int) -> DefaultRecordBatch:
        return DefaultRecordBatch(self.buf, position, max_decompressed_size=self.max_decompressed)

    def flush(self) -> None:
        """Decode the queued run of v2 batches."""
        if not self.run_batches:
            return
        batches, fields, payloads, spans, in_place = (
            self.run_batches, self.run_fields, self.run_payloads, self.run_spans, self.run_in_place
        )
        self._new_run()
        counts = [f[6] for f in fields]
        if in_place:
            # Every payload is an uncompressed one in the MemoryRecords buffer: read it there.
            data, u = self.buf, self.u
            starts, ends = (list(c) for c in zip(*spans))
        else:
            if spans:
                view = memoryview(self.buf)
                spans_left = iter(spans)
                payloads = [view[slice(*next(spans_left))] if p is None else p for p in payloads]
            data = b"".join(payloads + [_PAD])
            u = np.frombuffer(data, np.uint8)
            starts, ends = [], []
            pos = 0
            for payload in payloads:
                starts.append(pos)
                pos += len(payload)
                ends.append(pos)
        try:
            piece = decode_v2_run(data, u, starts, ends, counts, fields, self.include_headers)
        except (UsePlainPath, IndexError):
            # Decode again through the Record iterator: it raises the first error exactly.
            # (IndexError: bytes so damaged that a position left the buffer; none is expected.)
            objects = [self.batch_at(b) if isinstance(b, int) else b for b in batches]
            piece = RecordColumns.concat(
                [from_batch_records(b.records(), b, f[7], self.include_headers) for b, f in zip(objects, fields)]
            )
        self.pieces.append(piece)

    # -- MemoryRecords: batches framed and checked here, their headers parsed with numpy -------

    def run_memory(self, records: MemoryRecords, validate: bool, max_records: int | None) -> RecordColumns:
        """:meth:`run` over ``records.batches(validate=validate)``, without a batch object or a
        Python header parse per batch: entries are framed in a tight loop, the headers of a
        chunk of entries parsed and checked at once with numpy. Entries that are not v2 batches
        fit for the fast path (other magics, bad framing, control batches, a failed check) go
        through the same steps as :meth:`MemoryRecords.batches` and :meth:`add`, one by one,
        so every error is the one the Record iterator raises, in batch order.
        """
        buf = records.buffer
        view = memoryview(buf)
        if view.ndim != 1 or view.format != "B":
            buf = view = view.cast("B")
        self.buf = buf
        self.u = np.frombuffer(view, np.uint8)
        self.max_decompressed = records.max_decompressed_size
        max_batch = records.max_batch_size
        end = len(view)
        pos = index = total = 0
        error: KafkalogError | None = None
        ext = native.ext
        try:
            while pos < end and (max_records is None or total < max_records):
                if ext is not None:
                    # Whole uncompressed v2 batches: one compiled scan and fill for the run.
                    run = decode_v2_in_place(ext, buf, pos, end, max_batch, validate, index,
                                             None if max_records is None else max_records - total,
                                             self.include_headers)
                    if run is not None:
                        piece, pos, batches = run
                        self.flush()  # what was queued before it comes first
                        self.pieces.append(piece)
                        index += batches
                        total += len(piece)
                        continue
                positions, stop = _frame_v2(buf, pos, end, max_batch, ext is not None)
                if positions:
                    pos, index, total = self.add_chunk(positions, stop, validate, index, total, max_records)
                    continue
                # An entry the fast framing does not take: exactly as MemoryRecords.batches.
                framed = frame_entry(buf, pos, end - pos, file=None, position=pos, max_batch_size=max_batch)
                if framed is None:
                    break  # a partial tail
                size, magic = framed
                if magic == MAGIC_V2:
                    batch: RecordBatch = self.batch_at(pos)
                else:
                    batch = LegacyRecordBatch(buf, pos, max_decompressed_size=self.max_decompressed)
                if validate:
                    batch.ensure_valid()
                total += self.add(batch, index)
                index += 1
                pos += size
        except KafkalogError as e:
            error = e
        return self.finish(error, max_records)

    def add_chunk(
        self, positions: list[int], stop: int, validate: bool, index: int, total: int, max_records: int | None
    ) -> tuple[int, int, int]:
        """Check and queue the framed v2 batches at ``positions`` (the last ends at ``stop``);
        return (position, index, total) after the last one handled."""
        at = np.array(positions, np.int64)
        h = self.u[at[:, None] + _HEADER_BYTES].view(_HEADER_DTYPE)[:, 0]
        length = h["length"].astype(np.int64)
        attrs = h["attributes"].astype(np.int64)
        count = h["count"].astype(np.int64)
        codec = attrs & COMPRESSION_CODEC_MASK
        # What ensure_valid checks (but the CRC), and what add needs to queue without the plain
        # path: a known codec, no control batch, a count the payload can hold.
        fast = (
            (codec <= _MAX_CODEC_ID)
            & (attrs & CONTROL_FLAG_MASK == 0)
            & (count >= 0)
            & ((count == 0) | (h["last_offset_delta"].astype(np.int64) >= count - 1))
            & ((codec != 0) | (count * _MIN_RECORD_SIZE <= length + LOG_OVERHEAD - RECORDS_OFFSET))
        )
        ends = (at + length + LOG_OVERHEAD).tolist()
        if validate:
            view = memoryview(self.buf)
            crc32c = _crc.crc32c
            crcs = [crc32c(view[p + ATTRIBUTES_OFFSET : e]) for p, e in zip(positions, ends)]
            fast &= np.array(crcs, np.uint32) == h["crc"]
        rows = zip(
            positions, ends, fast.tolist(), codec.tolist(), count.tolist(), h["base_offset"].tolist(),
            h["base_timestamp"].tolist(), h["max_timestamp"].tolist(), attrs.tolist(), h["producer_id"].tolist(),
            h["partition_leader_epoch"].tolist(),
        )
        view = memoryview(self.buf)
        max_decompressed = self.max_decompressed
        for p, e, ok, c, n, base_offset, base_ts, max_ts, a, producer_id, epoch in rows:
            if max_records is not None and total >= max_records:
                return p, index, total
            if ok and n:
                fields = (base_offset, base_ts, max_ts, a, producer_id, epoch, n, index)
                if c == 0:
                    self.queue(p, fields, None, (p + RECORDS_OFFSET, e))
                    total += n
                    index += 1
                    continue
                try:
                    payload = _decompressors[c](view[p + RECORDS_OFFSET : e], max_decompressed)
                except KafkalogError:
                    payload = None  # the batch object raises it, relocated
                if payload is not None and n <= len(payload) // _MIN_RECORD_SIZE:
                    self.queue(p, fields, payload)
                    total += n
                    index += 1
                    continue
            elif ok:  # an empty batch: nothing to read
                index += 1
                continue
            # Anything else: the batch object, as run() would have it.
            batch = self.batch_at(p)
            if validate:
                batch.ensure_valid()
            total += self.add(batch, index)
            index += 1
        return stop, index, total


# Entries framed (and their headers parsed) at a time by the fast framing of a MemoryRecords.
_FRAME_CHUNK_BYTES = 2 << 20
_MAX_CODEC_ID = max(Compression)
# The v2 header as a numpy record (big-endian, unaligned), read from recordbatch's one table.
_HEADER_DTYPE = np.dtype(
    {
        "names": [name for name, _, _ in HEADER_FIELDS],
        "formats": [">" + code for _, code, _ in HEADER_FIELDS],
        "offsets": [offset for _, _, offset in HEADER_FIELDS],
        "itemsize": RECORD_BATCH_OVERHEAD,
    }
)
assert _HEADER_DTYPE.itemsize == HEADER.size == RECORD_BATCH_OVERHEAD
_HEADER_BYTES = np.arange(RECORD_BATCH_OVERHEAD, dtype=np.int64)
_SIZE_FIELD = struct.Struct(">i")
# Smallest size field of a v2 batch (the 61-byte header, less the 12-byte offset and size).
_MIN_V2_SIZE_FIELD = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
_decompressors = {int(c): decompressor(c, MAGIC_V2) for c in Compression if c is not Compression.NONE}


def _frame_v2(buf: Any, pos: int, end: int, max_batch: int, compiled: bool) -> tuple[list[int], int]:
    """Frame whole v2 entries from ``pos``, up to about :data:`_FRAME_CHUNK_BYTES`: their
    positions, and where framing stopped (the end of the last, or the first entry that is not
    plainly a whole v2 batch: that one is framed by ``frame_entry``, which raises or stops).
    ``compiled``: also stop at an uncompressed batch after the first (the compiled run takes it).
    """
    positions: list[int] = []
    append = positions.append
    unpack = _SIZE_FIELD.unpack_from
    limit = pos + _FRAME_CHUNK_BYTES
    while pos < end and pos < limit:
        if end - pos < RECORD_BATCH_OVERHEAD:
            break
        (size,) = unpack(buf, pos + LENGTH_OFFSET)
        if size < _MIN_V2_SIZE_FIELD or size > max_batch or buf[pos + MAGIC_OFFSET] != MAGIC_V2 or size > end - pos - LOG_OVERHEAD:
            break
        if compiled and positions and buf[pos + ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK == 0:
            break
        append(pos)
        pos += size + LOG_OVERHEAD
    return positions, pos

