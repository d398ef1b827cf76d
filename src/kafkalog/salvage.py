"""Copying every valid batch out of a damaged segment.

Kafka's recovery truncates a segment at its first bad byte: everything after a corrupt region
is lost, even the batches that are intact. :func:`salvage_segment` reads the source instead
batch by batch, and after a corrupt region *resynchronises* on the next plausible batch (its
offset, size and magic agree, then its CRC and header check out: see
:func:`kafkalog.resync.next_valid_batch`), so that only the damaged bytes are lost. It writes
the valid batches, unchanged, to a new segment (with indexes rebuilt by Kafka's rule when the
output is named like a segment) and reports what it skipped: each region's position, length
and the reason.

Offsets in the output increase. A batch's offset field lies outside its CRC, so a batch can pass
its CRC with damaged offsets: which batches to keep is decided from the surrounding ones (the
longest run whose offsets increase, looking up to 16 batches ahead), not from the first that
passes its CRC. A batch outside that run (a damaged offset, a stale copy, bytes that only look
like a batch) is skipped and reported like a corrupt region, as is one whose offsets fall outside
the 32-bit range of the segment's base offset (the file name); a v2 batch (or uncompressed v0/v1
message) that exactly fills the offset gap its neighbours leave is instead written with the
offset they imply, and reported as repaired.

The source is only read; the output is written under a ``.tmp`` suffix and renamed into place.
Cost is bounded per byte of the source: batches are read in 1 MiB chunks, and a resync scans
with one regular expression, computing a CRC only for candidates that pass the cheap checks and
never reading beyond the file for a candidate's declared size.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .compression import Compression
from .durable import TMP_SUFFIX, fsync_dir
from .errors import KafkalogError, TruncatedRecordError
from .file_records import FileRecords
from .filenames import LOG_SUFFIX
from .index_rebuild import RebuildReport, ensure_not_in_use, rebuild_indexes
from .progress import Progress, ProgressTicker
from .record import MAGIC_V2, RecordBatch
from .resync import DEFAULT_MAX_RESYNC_BATCH, all_zero, next_valid_batch
from .segment_recovery import MAX_RELATIVE_OFFSET


class RepairedBatch(NamedTuple):
    """A v2 batch written with the base offset its neighbours imply instead of the stored one
    (the base offset is outside the CRC: a damaged one passes it)."""

    position: int
    stored_offset: int
    offset: int


class SkippedRegion(NamedTuple):
    """Bytes of the source not copied: where, how many, and why."""

    position: int
    length: int
    reason: str


@dataclass
class SalvageReport:
    """What :func:`salvage_segment` did.

    Attributes:
        source, destination: the files read and written.
        source_size: bytes in the source.
        kept_batches, kept_bytes: batches (and their bytes) copied to the output.
        first_offset, last_offset: the offsets the output spans (None when empty).
        skipped: the regions not copied, in file order.
        repaired: the batches copied with a corrected base offset, in file order.
        indexes: the index rebuild of the output (None when the output is not named like a
            segment, or indexes were not asked for).
    """

    source: str
    destination: str
    source_size: int
    kept_batches: int = 0
    kept_bytes: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    skipped: list[SkippedRegion] = field(default_factory=list)
    repaired: list[RepairedBatch] = field(default_factory=list)
    indexes: RebuildReport | None = None

    @property
    def skipped_bytes(self) -> int:
        return sum(region.length for region in self.skipped)

    @property
    def complete(self) -> bool:
        """Every byte of the source was copied."""
        return not self.skipped

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["skipped"] = [r._asdict() for r in self.skipped]
        out["repaired"] = [r._asdict() for r in self.repaired]
        out["skipped_bytes"] = self.skipped_bytes
        out["indexes"] = None if self.indexes is None else self.indexes.to_dict()
        return out


def _segment_base(path: Path) -> int | None:
    prefix = path.name.split(".", 1)[0]
    return int(prefix) if prefix.isdigit() and len(prefix) == 20 else None


def _destination(src: Path, dst: str) -> Path:
    """``dst``, or the source's name in it when it is a directory (or ends with a separator,
    and is then created)."""
    path = Path(dst)
    if path.is_dir() or dst.endswith(("/", os.sep)):
        path.mkdir(parents=True, exist_ok=True)
        name = src.name
        i = name.find(LOG_SUFFIX)
        return path / (name[: i + len(LOG_SUFFIX)] if i >= 0 else name)
    return path


def salvage_segment(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    progress: Progress | None = None,
    max_batch_size: int = DEFAULT_MAX_RESYNC_BATCH,
    write_indexes: bool = True,
    index_interval_bytes: int = 4096,
    overwrite: bool = False,
) -> SalvageReport:
    """Copy every valid batch of ``src`` to ``dst``, skipping (and reporting) damaged regions.

    Args:
        src: the damaged ``.log`` (any name; when it is named after a base offset, offsets
            below it or beyond its 32-bit range are refused).
        dst: the output file, or a directory (an existing one, or a path ending with a
            separator, created) to write it into under the source's name (without a
            ``.swap``/``.cleaned``/``.deleted`` suffix).
        progress: told how many more bytes of the source were processed.
        max_batch_size: the largest batch a resync accepts.
        write_indexes: when the output is named ``<20 digits>.log``, rebuild its ``.index``,
            ``.timeindex`` and ``.txnindex`` (Kafka's rule, ``index_interval_bytes``).
        overwrite: replace an existing output.

    Returns:
        The report.

    Raises:
        KafkalogError: the output exists (without ``overwrite``) or is the source, or its log
            directory is in use.
        OSError: a file cannot be read or written.
    """
    src = Path(src)
    if not src.is_file():
        raise FileNotFoundError(2, "No such file", str(src)) if not src.exists() else IsADirectoryError(
            21, "Is a directory (salvage takes one .log file)", str(src)
        )
    out = _destination(src, os.fspath(dst))
    if not out.parent.is_dir():
        # Name the directory the user gave, not the temporary file written in it.
        why = "is not a directory" if out.parent.exists() else "does not exist"
        raise FileNotFoundError(
            2, f"the output's directory {out.parent} {why} (a DST ending with / is created)", os.fspath(dst)
        )
    if out.exists():
        if os.path.samefile(src, out):
            raise KafkalogError("the output is the source itself; salvage into another file", file=str(out))
        if not overwrite:
            raise KafkalogError("the output exists (pass overwrite / --force to replace it)", file=str(out))
    ensure_not_in_use(out.parent)
    base = _segment_base(src)
    tmp = out.with_name(out.name + TMP_SUFFIX)
    tmp.unlink(missing_ok=True)
    ticker = ProgressTicker(progress)
    try:
        with FileRecords.open(src) as fr:
            size = fr.size_in_bytes
            report = SalvageReport(str(src), str(out), size)
            with FileRecords.open(tmp, create=True) as sink:
                _copy(fr, sink, size, base, report, ticker, max_batch_size)
                ticker.flush()
                sink.flush()
        os.replace(tmp, out)
    except BaseException:  # Ctrl-C included, at any point: no half-written output is left
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(out.parent)
    if write_indexes and _segment_base(out) is not None and out.name.endswith(LOG_SUFFIX):
        report.indexes = rebuild_indexes(out, index_interval_bytes=index_interval_bytes)
    return report


# Batches held back before a decision: a damaged base offset shows only against the batches
# after it, so each batch is judged with up to this many of its successors in view.
_LOOKAHEAD = 16


class _Candidate(NamedTuple):
    batch: RecordBatch
    first: int
    last: int
    refused: str | None  # outside the segment's offset range: never kept as stored


class _Window:
    """The valid batches read but not yet written or skipped, in file order.

    A v2 batch's base offset (and a v0/v1 message's offset) lies outside its CRC, so a batch
    can pass its CRC with offsets that are wrong. Which batches to keep is therefore decided
    from the surrounding ones: the longest run (in file order) of batches whose offsets increase
    from the last one written, ties going to the run that starts nearest after it (Kafka assigns
    offsets consecutively; only compaction leaves gaps). A batch outside that run is skipped,
    unless it is v2 or an uncompressed v0/v1 message that exactly fills the gap between the
    batch written before it and the next one: then it is written with the offset its neighbours
    imply (the field is outside the CRC, so the rewritten batch still passes it), when that keeps
    a longer run than keeping it as it is.
    """

    def __init__(self, sink: FileRecords, base: int | None, report: SalvageReport) -> None:
        self.sink, self.base, self.report = sink, base, report
        self.items: list[_Candidate] = []
        self.previous: int | None = None  # last offset written
        self.breaks = 0  # adjacent pairs in items that do not increase, plus refused items

    def add(self, batch: RecordBatch) -> None:
        last = batch.last_offset
        first = batch.base_offset if batch.magic == MAGIC_V2 else last
        refused = None
        if self.base is not None and first < self.base:
            refused = f"offset {first} is below the segment's base offset {self.base}"
        elif self.base is not None and last - self.base > MAX_RELATIVE_OFFSET:
            refused = f"offset {last} is beyond the 32-bit range of the base offset {self.base}"
        item = _Candidate(batch, first, last, refused)
        if refused is not None or (self.items and first <= self.items[-1].last):
            self.breaks += 1
        self.items.append(item)
        if len(self.items) > _LOOKAHEAD:
            self._decide()

    def finish(self) -> None:
        while self.items:
            self._decide()

    def _floor(self) -> int | None:
        """The offset every kept batch must exceed."""
        if self.previous is not None:
            return self.previous
        return None if self.base is None else self.base - 1

    def _decide(self) -> None:
        """Write or skip the first held batch."""
        head = self.items[0]
        floor = self._floor()
        repair = None
        if head.refused is None and self.breaks == 0 and (floor is None or head.first > floor):
            keep = True  # the common case: everything in view increases
        else:
            # Keep it as it is, write it back where its neighbours leave exactly room for it, or
            # skip it: whichever keeps the better run (ties: the batch as it is, then repaired).
            scores = self._scores(floor)
            rest = max((s for s in scores[1:] if s is not None), default=None)
            if rest is not None and scores[1] == rest and self._fits(head, floor, self.items[1]):
                repair = (rest[0] + 1, 0)  # then the run starts right after the floor
            keep = scores[0] is not None and all(x is None or scores[0] >= x for x in (rest, repair))
            if keep:
                repair = None
        self._pop()
        if keep:
            self._write(head.batch, head.batch.entry(), head.first, head.last)
            return
        if repair is not None:
            fit = floor + 1  # type: ignore[operator]
            entry = bytearray(head.batch.entry())
            struct.pack_into(">q", entry, 0, fit)  # the offset: the first field, outside the CRC
            self.report.repaired.append(RepairedBatch(head.batch.position, head.first, fit))  # type: ignore[arg-type]
            self._write(head.batch, entry, fit, fit + head.last - head.first)
            return
        if head.refused is not None:
            reason = head.refused
        elif self.previous is not None and head.first <= self.previous:
            reason = f"offsets {head.first}..{head.last} do not follow offset {self.previous}"
        else:
            after = f"; the batches after it continue from offset {self.previous}" if self.previous is not None else ""
            reason = f"offsets {head.first}..{head.last} do not fit between the batches around it{after}"
        self.report.skipped.append(_skip(head.batch.position, head.batch.size_in_bytes, reason))  # type: ignore[arg-type]

    def _pop(self) -> None:
        head = self.items.pop(0)
        if head.refused is not None:
            self.breaks -= 1
        if self.items and self.items[0].first <= head.last:
            self.breaks -= 1

    def _scores(self, floor: int | None) -> list[tuple[int, int] | None]:
        """For each held batch, how good a run starting there is: (batches in the longest run
        of increasing offsets from it, -(offsets left out between ``floor`` and it)); None for a
        batch that cannot be kept."""
        items = self.items
        counts: list[int | None] = [None] * len(items)
        for i in range(len(items) - 1, -1, -1):
            a = items[i]
            if a.refused is not None or (floor is not None and a.first <= floor):
                continue
            counts[i] = 1 + max(
                (c for j, c in enumerate(counts[i + 1 :], i + 1) if c is not None and items[j].first > a.last),
                default=0,
            )
        lowest = (floor + 1) if floor is not None else min((x.first for x in items), default=0)
        return [None if c is None else (c, lowest - items[i].first) for i, c in enumerate(counts)]

    @staticmethod
    def _fits(head: _Candidate, floor: int | None, nxt: _Candidate) -> bool:
        """Whether ``head`` (v2, or an uncompressed v0/v1 message: one offset field for the
        whole entry) would fill exactly the offsets between ``floor`` and ``nxt``, but does not
        as it is stored."""
        if floor is None or head.first == floor + 1:
            return False
        if head.batch.magic != MAGIC_V2 and head.batch.compression != Compression.NONE:
            return False  # a wrapper's inner offsets (absolute in v0) would not follow its own
        return nxt.refused is None and nxt.first - floor - 1 == head.last - head.first + 1

    def _write(self, batch: RecordBatch, entry, first: int, last: int) -> None:
        self.sink.append(entry)
        report = self.report
        report.kept_batches += 1
        report.kept_bytes += batch.size_in_bytes
        if report.first_offset is None:
            report.first_offset = first
        report.last_offset = self.previous = last


def _copy(
    fr: FileRecords,
    sink: FileRecords,
    size: int,
    base: int | None,
    report: SalvageReport,
    ticker: ProgressTicker,
    max_batch_size: int,
) -> None:
    window = _Window(sink, base, report)
    pos = 0
    while pos < size:
        try:
            for batch in fr.slice(pos).batches(validate=True, strict=True):
                window.add(batch)
                n = batch.size_in_bytes
                pos = batch.position + n  # type: ignore[operator]
                ticker.add(n)
            break
        except KafkalogError as e:
            if isinstance(e, TruncatedRecordError):
                reason = f"a partial batch: {e.reason}"
            else:
                reason = e.reason if e.position in (None, pos) else f"{e.reason} (byte {e.position})"
            if all_zero(fr, pos, size):
                report.skipped.append(_skip(pos, size - pos, f"{size - pos} zero bytes (preallocated space or a torn write)"))
                ticker.add(size - pos)
                break
            floor = window._floor()
            resume = next_valid_batch(
                fr,
                pos + 1,
                size,
                min_offset=None if floor is None else floor + 1,
                max_offset=None if base is None else base + MAX_RELATIVE_OFFSET,
                max_batch_size=max_batch_size,
            )
            nxt = size if resume is None else resume.position
            report.skipped.append(_skip(pos, nxt - pos, reason))  # type: ignore[operator]
            ticker.add(nxt - pos)  # type: ignore[operator]
            pos = nxt  # type: ignore[assignment]
    window.finish()
    report.skipped.sort(key=lambda r: r.position)


def _skip(position: int, length: int, reason: str) -> SkippedRegion:
    return SkippedRegion(position, length, reason)
