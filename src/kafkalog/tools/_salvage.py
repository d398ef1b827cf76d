"""Copying every valid batch out of a damaged segment.

Kafka's recovery truncates a segment at its first bad byte: everything after a corrupt region
is lost, even the batches that are intact. :func:`salvage_segment` reads the source instead
batch by batch, and after a corrupt region *resynchronises* on the next plausible batch (its
offset, size and magic agree, then its CRC and header check out: see
:func:`kafkalog.verify.next_valid_batch`), so that only the damaged bytes are lost. It writes
the valid batches, unchanged, to a new segment (with indexes rebuilt by Kafka's rule when the
output is named like a segment) and reports what it skipped: each region's position, length
and the reason.

Offsets in the output increase: a valid batch whose offsets go backwards (a stale copy, or bytes
that only look like a batch) is skipped and reported like a corrupt region; so is one whose
offsets fall outside the 32-bit range of the segment's base offset (the file name).

The source is only read; the output is written under a ``.tmp`` suffix and renamed into place.
Cost is bounded per byte of the source: batches are read in 1 MiB chunks, and a resync scans
with one regular expression, computing a CRC only for candidates that pass the cheap checks and
never reading beyond the file for a candidate's declared size.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .. import (
    DEFAULT_MAX_RESYNC_BATCH,
    LOG_SUFFIX,
    MAGIC_V2,
    TMP_SUFFIX,
    FileRecords,
    all_zero,
    fsync_dir,
    next_valid_batch,
)
from ..errors import KafkalogError, TruncatedRecordError
from ._jvm import _INT32_MAX
from ._rebuild import RebuildReport, ensure_not_in_use, rebuild_indexes
from ._verify_report import Progress, ProgressTicker


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


class _Backwards(Exception):
    def __init__(self, batch, reason: str) -> None:
        self.batch, self.reason = batch, reason


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
    with FileRecords.open(src) as fr:
        size = fr.size_in_bytes
        report = SalvageReport(str(src), str(out), size)
        sink = FileRecords.open(tmp, create=True)
        try:
            _copy(fr, sink, size, base, report, ticker, max_batch_size)
            sink.flush()
        except BaseException:
            sink.close()
            tmp.unlink(missing_ok=True)
            raise
        finally:
            ticker.flush()
        sink.close()
    os.replace(tmp, out)
    fsync_dir(out.parent)
    if write_indexes and _segment_base(out) is not None and out.name.endswith(LOG_SUFFIX):
        report.indexes = rebuild_indexes(out, index_interval_bytes=index_interval_bytes)
    return report


def _copy(
    fr: FileRecords,
    sink: FileRecords,
    size: int,
    base: int | None,
    report: SalvageReport,
    ticker: ProgressTicker,
    max_batch_size: int,
) -> None:
    pos = 0
    previous: int | None = None  # last offset copied
    while pos < size:
        try:
            for batch in fr.slice(pos).batches(validate=True, strict=True):
                last = batch.last_offset
                first = batch.base_offset if batch.magic == MAGIC_V2 else last
                if previous is not None and first <= previous:
                    raise _Backwards(batch, f"offsets {first}..{last} do not follow offset {previous}")
                if base is not None and first < base:
                    raise _Backwards(batch, f"offset {first} is below the segment's base offset {base}")
                if base is not None and last - base > _INT32_MAX:
                    raise _Backwards(batch, f"offset {last} is beyond the 32-bit range of the base offset {base}")
                sink.append(batch.entry())
                n = batch.size_in_bytes
                report.kept_batches += 1
                report.kept_bytes += n
                if report.first_offset is None:
                    report.first_offset = first
                report.last_offset = previous = last
                pos = batch.position + n  # type: ignore[operator]
                ticker.add(n)
            return
        except _Backwards as e:
            n = e.batch.size_in_bytes
            report.skipped.append(_skip(pos, n, e.reason))
            pos += n
            ticker.add(n)
        except KafkalogError as e:
            if isinstance(e, TruncatedRecordError):
                reason = f"a partial batch: {e.reason}"
            else:
                reason = e.reason if e.position in (None, pos) else f"{e.reason} (byte {e.position})"
            if all_zero(fr, pos, size):
                report.skipped.append(_skip(pos, size - pos, f"{size - pos} zero bytes (preallocated space or a torn write)"))
                ticker.add(size - pos)
                return
            resume = next_valid_batch(
                fr,
                pos + 1,
                size,
                min_offset=(previous + 1) if previous is not None else base,
                max_offset=None if base is None else base + _INT32_MAX,
                max_batch_size=max_batch_size,
            )
            nxt = size if resume is None else resume.position
            report.skipped.append(_skip(pos, nxt - pos, reason))  # type: ignore[operator]
            ticker.add(nxt - pos)  # type: ignore[operator]
            pos = nxt  # type: ignore[assignment]


def _skip(position: int, length: int, reason: str) -> SkippedRegion:
    return SkippedRegion(position, length, reason)
