"""Converting segments to another message format or codec (``kafkalog convert``).

Every batch is decoded and written again with the target magic and codec, one output batch per
input batch (plain v0/v1 output: one message per record), keeping each record's offset,
timestamp, key, value and headers as the Record iterator reports them, and for v2 output the
producer fields, the transaction and control flags, the leader epoch, the base timestamp and the
delete horizon (an empty v2 batch, kept by the cleaner for its producer state, stays an empty
header as Kafka writes it). The output is written through :class:`~kafkalog.LogSegment`, so
its indexes follow Kafka's rule, under a ``.tmp`` suffix renamed into place at the end. What the
target cannot hold is refused with a :class:`ConversionError` naming the batch: headers,
transactional or control batches and zstd before magic 2; producer ids and sequences before
magic 2 unless ``drop_producer_state``; timestamps in magic 0 unless ``drop_timestamps``. Leader
epochs do not exist before magic 2: they are dropped, and counted.

It does not take the log directory's lock: it refuses to run while a kafkalog process holds it,
and must not be run on a partition a broker has open.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .. import (
    Compression,
    FileRecords,
    LogConfig,
    LogSegment,
    MemoryRecords,
    Record,
    RecordBatch,
    TimeIndex,
    TimestampType,
)
from ..checkpoint import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA
from ..compression import codec_for_id
from ..durable import TMP_SUFFIX, fsync_dir
from ..filenames import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_FILE,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_base_offset,
    segment_logs,
)
from ..legacy_record import encode_message_set
from ..record import MAGIC_V0, MAGIC_V2, NO_TIMESTAMP
from ..recordbatch import encode_batch, encode_record
from ..errors import ConversionError, KafkalogError, UnsupportedCodecError
from ..index_rebuild import MIN_ENTRY, ensure_not_in_use, index_path
from ..progress import Progress, ProgressTicker
from ..varint import INT32_MAX


def _is_segment_log(name: str) -> bool:
    """Whether ``name`` is a segment's ``<20 digits>.log``."""
    m = SEGMENT_FILE.match(name)
    return m is not None and "." + m.group(2) == LOG_SUFFIX


@dataclass
class ConvertReport:
    """What :func:`convert_segment` or :func:`convert_path` wrote.

    Attributes:
        source, destination: the ``.log`` files (or directories).
        batches_in, batches_out, records: counts.
        bytes_in, bytes_out: sizes of the logs read and written.
        dropped: what was dropped, by kind (``leader_epochs``, ``producer_state``,
            ``timestamps``, ``empty_batches``), counted in batches.
        segments: for a directory, one report per segment.
    """

    source: str
    destination: str
    magic: int
    compression: str
    batches_in: int = 0
    batches_out: int = 0
    records: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    segments: list[ConvertReport] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def _add(self, other: ConvertReport) -> None:
        self.segments.append(other)
        for name in ("batches_in", "batches_out", "records", "bytes_in", "bytes_out"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for kind, n in other.dropped.items():
            self.dropped[kind] = self.dropped.get(kind, 0) + n


def _refuse(batch: RecordBatch, reason: str, hint: str = "") -> ConversionError:
    where = f"v{batch.magic} batch ending at offset {batch.last_offset}"
    return ConversionError(f"{where}: {reason}{hint}", file=batch.file, position=batch.position)


def _to_v2(batch: RecordBatch, records: list[Record], codec: Compression, level: int | None) -> bytes:
    """One v2 batch holding ``records`` as ``batch`` holds them."""
    if batch.magic == MAGIC_V2:
        base = batch.base_offset
        if not records:
            # Kafka's writeEmptyHeader: no payload, no codec (a cleaned batch kept for its
            # producer state).
            codec = Compression.NONE
        base_ts = batch.base_timestamp
        extra = dict(
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            is_transactional=batch.is_transactional,
            is_control=batch.is_control,
            delete_horizon_ms=batch.delete_horizon_ms,
            partition_leader_epoch=batch.partition_leader_epoch,
        )
    else:
        base = records[0].offset
        base_ts = records[0].timestamp
        extra = {}
    timestamp_type = batch.timestamp_type
    if timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
        timestamp_type = TimestampType.CREATE_TIME  # magic 0: every timestamp stays -1
    payload = b"".join(encode_record(r.offset - base, r.timestamp - base_ts, r.key, r.value, r.headers) for r in records)
    return encode_batch(
        payload,
        count=len(records),
        base_offset=base,
        last_offset_delta=batch.last_offset - base,
        base_timestamp=base_ts,
        max_timestamp=batch.max_timestamp,
        compression=codec,
        timestamp_type=timestamp_type,
        compression_level=level,
        **extra,
    )


def _to_legacy(
    batch: RecordBatch,
    records: list[Record],
    magic: int,
    codec: Compression,
    level: int | None,
    drop_timestamps: bool,
    drop_producer_state: bool,
    dropped: dict[str, int],
) -> bytes:
    """The v0/v1 message(s) holding ``records``; refuses what v0/v1 cannot hold."""
    if batch.magic == MAGIC_V2:
        if batch.is_control:
            raise _refuse(batch, f"a control batch (transaction marker) has no form in magic {magic}")
        if batch.is_transactional:
            raise _refuse(batch, f"transactional batches have no form in magic {magic}")
        if batch.producer_id >= 0:
            if not drop_producer_state:
                raise _refuse(
                    batch,
                    f"producer id {batch.producer_id}, epoch and sequence have no form in magic {magic}",
                    " (drop_producer_state / --drop-producer-state drops them)",
                )
            dropped["producer_state"] = dropped.get("producer_state", 0) + 1
        if batch.partition_leader_epoch >= 0:
            dropped["leader_epochs"] = dropped.get("leader_epochs", 0) + 1
        for r in records:
            if r.headers:
                raise _refuse(batch, f"record at offset {r.offset} has headers, which magic {magic} cannot hold")
    if not records:
        dropped["empty_batches"] = dropped.get("empty_batches", 0) + 1
        return b""
    if magic == MAGIC_V0 and any(r.timestamp != NO_TIMESTAMP for r in records):
        if not drop_timestamps:
            raise _refuse(
                batch,
                "magic 0 has no timestamps, and these records have some",
                " (drop_timestamps / --drop-timestamps drops them)",
            )
        dropped["timestamps"] = dropped.get("timestamps", 0) + 1
    timestamp_type = batch.timestamp_type
    append_time = None
    if magic == MAGIC_V0:
        timestamp_type = TimestampType.NO_TIMESTAMP_TYPE
    elif timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
        timestamp_type = TimestampType.CREATE_TIME  # from magic 0: timestamps stay -1
    elif timestamp_type is TimestampType.LOG_APPEND_TIME:
        append_time = batch.max_timestamp
    return encode_message_set(
        [(r.offset, r.timestamp, r.key, r.value) for r in records],
        magic=magic,
        compression=codec,
        timestamp_type=timestamp_type,
        log_append_time=append_time,
        compression_level=level,
        base_offset=records[0].offset,
    )


def _check_target(magic: int, compression: Compression | str | int) -> Compression:
    if magic not in (0, 1, 2):
        raise ConversionError(f"magic must be 0, 1 or 2, not {magic}")
    if isinstance(compression, str):
        try:
            compression = Compression[compression.upper()]
        except KeyError:
            raise UnsupportedCodecError(
                f"unknown codec {compression!r}: none, gzip, snappy, lz4 or zstd"
            ) from None
    return codec_for_id(int(compression), magic)


def _output_log(src: Path, dst: Path) -> Path:
    """The output ``.log`` for ``src``: ``dst`` itself when it is named like a segment, else a
    file in the directory ``dst`` (created if needed) named after the source's base offset."""
    if _is_segment_log(dst.name) and not dst.is_dir():
        return dst
    dst.mkdir(parents=True, exist_ok=True)
    return dst / f"{segment_base_offset(src):020d}{LOG_SUFFIX}"  # a .swap/.cleaned/.deleted source is written as .log


@contextlib.contextmanager
def _dirs_removed_on_failure(dst: Path) -> Iterator[None]:
    """Remove again, when the block fails, the directories on the way to ``dst`` that do not
    exist yet (a conversion creates them): a refused or failed conversion leaves nothing behind,
    and never removes a directory that was there before or that holds anything."""
    missing = []
    path = Path(os.path.abspath(dst))
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    try:
        yield
    except BaseException:
        for directory in missing:  # the deepest first
            with contextlib.suppress(OSError):
                directory.rmdir()  # only when empty
        raise


def _existing_outputs(out_log: Path) -> list[Path]:
    return [p for p in (out_log, *(index_path(out_log, s) for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))) if p.exists()]


def convert_segment(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    magic: int = MAGIC_V2,
    compression: Compression | str | int = Compression.NONE,
    compression_level: int | None = None,
    drop_timestamps: bool = False,
    drop_producer_state: bool = False,
    index_interval_bytes: int = 4096,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> ConvertReport:
    """Rewrite one segment in another format or codec, keeping offsets and timestamps.

    Args:
        src: the ``.log`` to read (never modified), named after its base offset.
        dst: the ``.log`` to write (``<20 digits>.log``, a base offset at or below the first
            offset), or else a directory (created if needed) to write it into under the
            source's base offset.
        magic, compression, compression_level: the target.
        drop_timestamps: allow magic 0 output of records that have timestamps.
        drop_producer_state: allow v0/v1 output of batches written by idempotent producers.
        index_interval_bytes: the output's ``index.interval.bytes``.
        overwrite: replace an existing output segment.
        progress: told how many more bytes of the source were read.

    Returns:
        The report.

    Raises:
        ConversionError: a batch the target cannot represent, or an output that exists.
        UnsupportedCodecError: zstd before magic 2, or an unknown codec.
        KafkalogError: the source is corrupt (convert refuses damaged input: salvage it first).
        OSError: a file cannot be read or written.
    """
    src, dst = Path(src), Path(dst)
    codec = _check_target(magic, compression)
    with _dirs_removed_on_failure(dst):
        return _convert_segment(
            src, dst, codec, magic, compression_level, drop_timestamps, drop_producer_state, index_interval_bytes,
            overwrite, progress,
        )


def _convert_segment(
    src: Path, dst: Path, codec: Compression, magic: int, compression_level: int | None, drop_timestamps: bool,
    drop_producer_state: bool, index_interval_bytes: int, overwrite: bool, progress: Progress | None,
) -> ConvertReport:
    """:func:`convert_segment` once its target is checked."""
    out_log = _output_log(src, dst)
    _check_output(src, out_log, overwrite)
    ensure_not_in_use(out_log.parent)
    base = segment_base_offset(out_log)
    report = ConvertReport(str(src), str(out_log), magic, codec.kafka_name)
    ticker = ProgressTicker(progress)
    for suffix in _SEGMENT_SUFFIXES:
        _tmp_path(out_log, suffix).unlink(missing_ok=True)
    segment = LogSegment.open(out_log.parent, base, _output_config(src, index_interval_bytes), suffix=TMP_SUFFIX)
    target = _Target(magic, codec, compression_level, drop_timestamps, drop_producer_state)
    done = False
    try:
        _convert_batches(src, segment, out_log, target, report, ticker)
        segment.close()
        _install_outputs(src, out_log, magic)
        done = True
    finally:
        if not done:  # the temporaries go first: a second Ctrl-C in the flush below leaves none
            with contextlib.suppress(Exception):
                segment.close()
            for suffix in _SEGMENT_SUFFIXES:
                _tmp_path(out_log, suffix).unlink(missing_ok=True)
        ticker.flush()
    return report


#: The files of an output segment, the log first.
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


class _Target(NamedTuple):
    """What a conversion writes: the format, the codec, and what it may drop to get there."""

    magic: int
    codec: Compression
    compression_level: int | None
    drop_timestamps: bool
    drop_producer_state: bool


def _tmp_path(out_log: Path, suffix: str) -> Path:
    """The temporary a file of the output segment is written as before it is renamed."""
    return Path(str(index_path(out_log, suffix)) + TMP_SUFFIX)


def _check_output(src: Path, out_log: Path, overwrite: bool) -> None:
    """Refuse to write over the source, or over an existing output unless ``overwrite``."""
    if out_log.exists() and src.exists() and os.path.samefile(src, out_log):
        raise ConversionError("the output is the source itself; write it elsewhere", file=str(out_log))
    existing = _existing_outputs(out_log)
    if existing and not overwrite:
        raise ConversionError(f"{existing[0].name} exists (pass overwrite / --force to replace it)", file=str(existing[0]))


def _output_config(src: Path, index_interval_bytes: int) -> LogConfig:
    """The output segment's settings: its index interval, and indexes large enough for an entry
    every ``index_interval_bytes`` of a source of that size."""
    config = LogConfig(index_interval_bytes=index_interval_bytes)
    capacity = max(1 << 10, src.stat().st_size // max(index_interval_bytes + 1, MIN_ENTRY) + 2)
    return config.replace(segment_index_bytes=min(INT32_MAX, max(config.segment_index_bytes, capacity * TimeIndex.DTYPE.itemsize)))


def _convert_batches(
    src: Path, segment: LogSegment, out_log: Path, target: _Target, report: ConvertReport, ticker: ProgressTicker
) -> None:
    """Rewrite every batch of ``src`` into ``segment`` (strictly validated: convert refuses
    damaged input), counting in ``report``."""
    base = segment.base_offset
    with FileRecords.open(src) as fr:
        for batch in fr.batches(validate=True, strict=True):
            records = batch.records()
            if target.magic == MAGIC_V2:
                data = _to_v2(batch, records, target.codec, target.compression_level)
            else:
                data = _to_legacy(
                    batch, records, target.magic, target.codec, target.compression_level, target.drop_timestamps,
                    target.drop_producer_state, report.dropped,
                )
            report.batches_in += 1
            report.records += len(records)
            report.bytes_in += batch.size_in_bytes
            ticker.add(batch.size_in_bytes)
            if data:
                out = MemoryRecords(data)
                for piece in out.batches():
                    report.batches_out += 1
                    if not segment.can_convert_to_relative_offset(piece.last_offset) or (
                        piece.magic == MAGIC_V2 and piece.base_offset < base
                    ):
                        raise ConversionError(
                            f"offset {piece.last_offset} does not fit a segment with base offset {base}",
                            file=str(out_log),
                        )
                segment.append_batches(out)
                report.bytes_out += len(data)


def _install_outputs(src: Path, out_log: Path, magic: int) -> None:
    """Rename the written temporaries into place, durably."""
    # The transaction index depends only on offsets and markers, which a v2 output keeps:
    # the source's entries stay right (v0/v1 output has no transactions).
    src_txn = index_path(src, TXN_INDEX_SUFFIX)
    if magic == MAGIC_V2 and src_txn.exists():
        shutil.copyfile(src_txn, _tmp_path(out_log, TXN_INDEX_SUFFIX))
    for suffix in _SEGMENT_SUFFIXES:
        tmp = _tmp_path(out_log, suffix)
        final = index_path(out_log, suffix)
        if tmp.exists():
            os.replace(tmp, final)
        elif suffix == TXN_INDEX_SUFFIX:
            final.unlink(missing_ok=True)  # an overwritten segment's old one
    fsync_dir(out_log.parent)


def convert_path(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    magic: int = MAGIC_V2,
    compression: Compression | str | int = Compression.NONE,
    compression_level: int | None = None,
    drop_timestamps: bool = False,
    drop_producer_state: bool = False,
    index_interval_bytes: int = 4096,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> ConvertReport:
    """:func:`convert_segment` for a segment file, or for every segment of a partition
    directory into ``dst`` (created if absent; it must not hold segments already unless
    ``overwrite``). For a partition directory, ``partition.metadata`` is copied, and with a v2
    target ``leader-epoch-checkpoint`` and the producer snapshots too (offsets do not change, so
    they stay right; v0/v1 data has neither).

    Raises:
        The errors of :func:`convert_segment`; KafkalogError for a directory without segments.
    """
    src, dst = Path(src), Path(dst)
    if not src.exists():
        raise FileNotFoundError(2, "No such file or directory", str(src))
    options = dict(
        magic=magic,
        compression=compression,
        compression_level=compression_level,
        drop_timestamps=drop_timestamps,
        drop_producer_state=drop_producer_state,
        index_interval_bytes=index_interval_bytes,
        overwrite=overwrite,
        progress=progress,
    )
    if src.is_file():
        return convert_segment(src, dst, **options)  # type: ignore[arg-type]
    logs = segment_logs(src)
    if not logs:
        raise KafkalogError("no log segments here: convert takes a segment or a partition directory", file=str(src))
    if dst.exists() and not dst.is_dir():
        raise ConversionError("the output for a partition directory must be a directory", file=str(dst))
    if dst.exists() and os.path.samefile(src, dst):
        raise ConversionError("the output is the source directory itself; write it elsewhere", file=str(dst))
    codec = _check_target(magic, compression)
    with _dirs_removed_on_failure(dst):
        before = set(os.listdir(dst)) if dst.is_dir() else set()
        dst.mkdir(parents=True, exist_ok=True)
        report = ConvertReport(str(src), str(dst), magic, codec.kafka_name)
        try:
            for log in logs:
                report._add(convert_segment(log, dst, **options))  # type: ignore[arg-type]
        except BaseException:
            # The segments converted before the failure go too: the run leaves nothing of its own.
            for name in set(os.listdir(dst)) - before:
                with contextlib.suppress(OSError):
                    (dst / name).unlink()
            raise
    copies = [PARTITION_METADATA]
    if magic == MAGIC_V2:
        copies.append(LEADER_EPOCH_CHECKPOINT)
        copies += sorted(p.name for p in src.iterdir() if p.name.endswith(SNAPSHOT_SUFFIX) and p.is_file())
    for name in copies:
        if (src / name).exists():
            shutil.copyfile(src / name, dst / name)
    fsync_dir(dst)
    return report
