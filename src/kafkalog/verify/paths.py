"""``verify`` of a path: a read-only fsck of a log file, a partition directory or a log directory,
local or remote."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
)
from ..filenames import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_FILE,
    SNAPSHOT_SUFFIX,
    SPECIAL_DIR,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    partition_of,
    segment_base_offset,
)
from ..producer_state.snapshot import decode_snapshot
from ..errors import CorruptCheckpointError, KafkalogError
from ..location import Location
from ..progress import Progress
from .report import OFFSET_CHECKPOINTS, PartitionReport, ProblemList, SegmentReport, VerifyReport
from .segment_check import PartitionContext, check_segment, first_batch_base


class _LogDirOffsets:
    """The log directory's offset checkpoints, parsed once (problems reported once)."""

    def __init__(self, log_dir: Location, problems: ProblemList) -> None:
        self.files: dict[str, dict[tuple[str, int], int]] = {}
        for name in OFFSET_CHECKPOINTS:
            path = log_dir / name
            if not path.exists():
                continue
            try:
                self.files[name] = OffsetCheckpointFile(str(path)).parse(path.read_bytes())
            except CorruptCheckpointError as e:
                problems.add(str(path), e.position, "checkpoint-parse", e.reason)
            except OSError as e:
                problems.add(str(path), None, "unreadable", str(e.strerror or e))

    def get(self, name: str, tp: tuple[str, int] | None) -> int | None:
        if tp is None:
            return None
        return self.files.get(name, {}).get(tp)


def _leftovers(directory: Location, problems: ProblemList) -> None:
    names = sorted(directory.files())
    logs = {n for n in names if n.endswith(LOG_SUFFIX)}
    for name in names:
        path = str(directory / name)
        if name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)):
            what = {
                CLEANED_SUFFIX: "the log cleaner's output from an interrupted run; Kafka deletes it when it loads the log",
                SWAP_SUFFIX: "a cleaned segment waiting to replace the old ones; Kafka completes the swap when it loads the log",
                DELETED_SUFFIX: "a segment file scheduled for deletion; Kafka deletes it when it loads the log",
            }[next(s for s in (CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX) if name.endswith(s))]
            problems.add(path, None, "leftover-file", what, "warning")
        elif name.endswith(".tmp"):
            problems.add(path, None, "leftover-file", "a temporary file of an interrupted atomic write", "warning")
        else:
            m = SEGMENT_FILE.match(name)
            if m and m.group(2) in ("index", "timeindex", "txnindex") and f"{m.group(1)}{LOG_SUFFIX}" not in logs:
                problems.add(path, None, "orphan-index", "an index file without its .log; Kafka deletes it", "warning")


def _snapshots(directory: Location, problems: ProblemList, log_end: int | None) -> None:
    names = sorted(name for name in directory.files() if name.endswith(SNAPSHOT_SUFFIX))
    for name in names:
        path = directory / name
        m = SEGMENT_FILE.match(name)
        if not m:
            continue
        try:
            decode_snapshot(path.read_bytes(), file=str(path))
        except CorruptCheckpointError as e:
            kind = "snapshot-crc" if "CRC" in e.reason else "snapshot-corrupt"
            problems.add(str(path), e.position, kind, e.reason + "; Kafka deletes it and rebuilds producer state")
            continue
        except OSError as e:
            problems.add(str(path), None, "unreadable", str(e.strerror or e))
            continue
        offset = int(m.group(1))
        if log_end is not None and offset > log_end:
            problems.add(
                str(path), None, "snapshot-beyond-log-end",
                f"snapshot at offset {offset} lies beyond the log end offset {log_end}; Kafka deletes it", "warning",
            )


def _epoch_context(directory: Location, problems: ProblemList, ctx: PartitionContext, log_start: int) -> None:
    path = directory / LEADER_EPOCH_CHECKPOINT
    if not path.exists():
        return
    try:
        entries = LeaderEpochCheckpointFile(str(path)).parse(path.read_bytes())
    except CorruptCheckpointError as e:
        problems.add(str(path), e.position, "checkpoint-parse", e.reason)
        return
    except OSError as e:
        problems.add(str(path), None, "unreadable", str(e.strerror or e))
        return
    for a, b in zip(entries, entries[1:]):
        if b.epoch <= a.epoch or b.start_offset <= a.start_offset:
            problems.add(
                str(path), None, "checkpoint-inconsistent",
                f"entry (epoch {b.epoch}, start offset {b.start_offset}) does not follow (epoch {a.epoch}, start offset "
                f"{a.start_offset}): epochs and start offsets must increase",
            )
            return
    ctx.epochs = entries
    ctx.epoch_starts = [e.start_offset for e in entries]
    ctx.epoch_from = log_start


def _verify_partition(
    directory: Location,
    report: VerifyReport,
    problems: ProblemList,
    offsets: _LogDirOffsets | None,
    deep: bool,
    progress: Progress | None,
) -> None:
    tp = partition_of(str(directory))
    logs = directory.segment_logs()
    ctx = PartitionContext()
    checkpointed_start = offsets.get(LOG_START_OFFSET_CHECKPOINT, tp) if offsets else None
    first_base = segment_base_offset(str(logs[0])) if logs else (checkpointed_start or 0)
    log_start = max(first_base, checkpointed_start or 0)
    ctx.log_start = log_start
    _epoch_context(directory, problems, ctx, log_start)
    metadata = directory / PARTITION_METADATA
    if metadata.exists():
        try:
            PartitionMetadataFile(str(metadata)).parse(metadata.read_bytes())
        except CorruptCheckpointError as e:
            problems.add(str(metadata), e.position, "checkpoint-parse", e.reason)
        except OSError as e:
            problems.add(str(metadata), None, "unreadable", str(e.strerror or e))
    previous: SegmentReport | None = None
    segments: list[SegmentReport] = []
    size = 0
    for log_path in logs:
        try:
            seg = check_segment(log_path, deep, True, progress, ctx)
        except OSError as e:
            problems.add(str(log_path), None, "unreadable", str(e.strerror or e))
            continue
        segments.append(seg)
        report.segments.append(seg)
        size += seg.size
        if previous is not None and previous.last_offset is not None and seg.base_offset <= previous.last_offset:
            problems.add(
                seg.path, None, "segment-overlap",
                f"the segment starts at offset {seg.base_offset} but the previous one ({Path(previous.path).name}) ends "
                f"at offset {previous.last_offset}",
            )
        if seg.last_offset is not None or previous is None:
            previous = seg
    # The log end offset: after the last batch, or the base offset of an empty active segment.
    log_end = previous.next_offset if previous is not None else log_start
    if segments and segments[-1].last_offset is None:
        log_end = max(log_end, segments[-1].base_offset)
    if ctx.epoch_mismatches:
        problems.add(
            str(directory / LEADER_EPOCH_CHECKPOINT), None, "leader-epoch-mismatch",
            f"{ctx.epoch_mismatches} batches disagree with the leader epoch checkpoint; the first: {ctx.epoch_first}",
            "warning",
        )
    if ctx.epochs and ctx.epochs[-1].start_offset > log_end:
        problems.add(
            str(directory / LEADER_EPOCH_CHECKPOINT), None, "checkpoint-inconsistent",
            f"the last epoch starts at offset {ctx.epochs[-1].start_offset}, beyond the log end offset {log_end}; Kafka "
            f"truncates the checkpoint when it loads the log",
            "warning",
        )
    _snapshots(directory, problems, log_end)
    _leftovers(directory, problems)
    if offsets is not None and tp is not None:
        _check_offsets(directory, offsets, tp, log_start, log_end, problems)
    if tp is not None:
        report.partitions.append(
            PartitionReport(str(directory), tp[0], tp[1], len(logs), log_start, log_end, size)
        )


def _check_offsets(
    directory: Location, offsets: _LogDirOffsets, tp: tuple[str, int], log_start: int, log_end: int, problems: ProblemList
) -> None:
    log_dir = directory.parent
    name = f"{tp[0]}-{tp[1]}"
    recovery = offsets.get(RECOVERY_POINT_OFFSET_CHECKPOINT, tp)
    if recovery is not None and recovery > log_end:
        problems.add(
            str(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT), None, "checkpoint-inconsistent",
            f"{name}: recovery point {recovery} is beyond the log end offset {log_end}", "warning",
        )
    start = offsets.get(LOG_START_OFFSET_CHECKPOINT, tp)
    if start is not None and start > log_end:
        problems.add(
            str(log_dir / LOG_START_OFFSET_CHECKPOINT), None, "checkpoint-inconsistent",
            f"{name}: log start offset {start} is beyond the log end offset {log_end}: Kafka deletes every segment of "
            f"the partition when it loads it",
        )
    hw = offsets.get(REPLICATION_OFFSET_CHECKPOINT, tp)
    if hw is not None and hw > log_end:
        problems.add(
            str(log_dir / REPLICATION_OFFSET_CHECKPOINT), None, "checkpoint-inconsistent",
            f"{name}: high watermark {hw} is beyond the log end offset {log_end}", "warning",
        )
    cleaner = offsets.get(CLEANER_OFFSET_CHECKPOINT, tp)
    if cleaner is not None and not log_start <= cleaner <= log_end:
        problems.add(
            str(log_dir / CLEANER_OFFSET_CHECKPOINT), None, "checkpoint-inconsistent",
            f"{name}: cleaner offset {cleaner} is outside the log [{log_start}, {log_end}]; Kafka's cleaner resets it",
            "warning",
        )


def _has_kafka_files(directory: Location) -> bool:
    for name in directory.files():
        stem = name.split(".", 1)[0]
        if stem.isdigit() and len(stem) == 20:
            return True
        if name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA):
            return True
    return False


def _leftover_dirs(log_dir: Location, problems: ProblemList) -> None:
    for name in log_dir.listing()[1]:
        m = SPECIAL_DIR.match(name)
        if m and m["kind"] in ("delete", "stray"):
            what = "a deleted partition waiting for removal" if m["kind"] == "delete" else "a stray partition the broker no longer hosts"
            problems.add(str(log_dir / name), None, "leftover-file", what, "warning")


def _checkpoint_reader(name: str):
    """The class that reads the text checkpoint file ``name``, or None for another file."""
    if name in OFFSET_CHECKPOINTS:
        return OffsetCheckpointFile
    return {LEADER_EPOCH_CHECKPOINT: LeaderEpochCheckpointFile, PARTITION_METADATA: PartitionMetadataFile}.get(name)


def _verify_file(path: Location, report: VerifyReport, problems: ProblemList, deep: bool, progress: Progress | None) -> None:
    name = path.name
    reader = _checkpoint_reader(name)
    if reader is not None:
        try:
            reader(str(path)).parse(path.read_bytes())
        except CorruptCheckpointError as e:
            problems.add(str(path), e.position, "checkpoint-parse", e.reason)
        return
    if name.endswith(SNAPSHOT_SUFFIX):
        try:
            decode_snapshot(path.read_bytes(), file=str(path))
        except CorruptCheckpointError as e:
            kind = "snapshot-crc" if "CRC" in e.reason else "snapshot-corrupt"
            problems.add(str(path), e.position, kind, e.reason)
        return
    stem = name.split(".", 1)[0]
    rest = name[len(stem) :]
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX):
        if rest == suffix or rest.startswith(suffix + "."):
            log_path = path.with_name(stem + LOG_SUFFIX + rest[len(suffix) :])
            if not log_path.exists():
                raise KafkalogError(f"no {log_path.name} beside this index to check it against", file=str(path))
            report.segments.append(check_segment(log_path, deep, True, progress, None))
            return
    if first_batch_base(path) is not None:  # e.g. salvage output under another name
        report.segments.append(check_segment(path, deep, True, progress, None))
        return
    raise KafkalogError(
        "not a Kafka log file (expected <offset>.log|.index|.timeindex|.txnindex|.snapshot, a checkpoint, "
        "partition.metadata, a partition directory or a log directory)",
        file=str(path),
    )


def verify_path(
    path: str | os.PathLike | Location,
    *,
    deep: bool = False,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> VerifyReport:
    """Check a file, a partition directory or a log directory, read-only, where it is: on the
    local disk or on any filesystem fsspec knows (a URL: ``s3://...``, ``gs://...``), read in
    place (listings, small files whole, ``.log`` files by ranged requests; nothing written).

    - a ``.log`` (or one of its index files): :func:`verify_segment`;
    - a snapshot, checkpoint or ``partition.metadata`` file: parsed;
    - a partition directory: every segment in offset order (transactions followed across
      them), segment overlap, producer snapshots, ``leader-epoch-checkpoint`` (parsed, and
      compared with the batches' leader epochs), ``partition.metadata``, leftover files;
    - a log directory: every partition directory in it, its offset checkpoints (parsed, and
      compared with each partition's offsets), leftover ``-delete`` directories.

    Args:
        path: what to check.
        deep: decode every record.
        progress: told how many more bytes of ``.log`` data were read, about every MiB.
        storage_options: fsspec's options (credentials, ``endpoint_url``, ...) for a URL.

    Returns:
        The report; it names remote files by their URLs.

    Raises:
        KafkalogError: a directory with no segments or partition directories, a file of no
            known kind, or nothing at a URL.
        OSError: a local ``path`` does not exist or cannot be read.
    """
    path = Location.of(path, storage_options)
    report = VerifyReport(str(path))
    problems = ProblemList(report.other)
    if not path.exists():
        if path.is_remote:
            raise KafkalogError("No such file or directory", file=str(path))
        raise FileNotFoundError(2, "No such file or directory", str(path))
    if path.is_file():
        _verify_file(path, report, problems, deep, progress)
    elif _has_kafka_files(path):
        parent_offsets = None
        if partition_of(str(path)) is not None and any((path.parent / n).exists() for n in OFFSET_CHECKPOINTS):
            parent_offsets = _LogDirOffsets(path.parent, ProblemList([]))  # the log dir's files: not reported here
        _verify_partition(path, report, problems, parent_offsets, deep, progress)
    else:
        partitions, _ = _partition_dirs(path)
        checkpoints = [n for n in OFFSET_CHECKPOINTS if (path / n).exists()]
        if not checkpoints and not any(_has_kafka_files(d) for d in partitions):
            log_dirs = _log_dirs_below(path)
            hint = (
                f"; the directories below look like log directories: verify them ({', '.join(d.name for d in log_dirs)})"
                if log_dirs
                else ""
            )
            raise KafkalogError(
                "no log segments here, and no partition directories (<topic>-<partition>) or checkpoint files: not a "
                f"Kafka partition or log directory{hint}",
                file=str(path),
            )
        offsets = _LogDirOffsets(path, problems)
        for directory in partitions:
            _verify_partition(directory, report, problems, offsets, deep, progress)
        _leftover_dirs(path, problems)
    problems.close()
    report.other_error_count = problems.errors
    report.other_warning_count = problems.warnings
    return report


def _partition_dirs(log_dir: Location) -> tuple[list[Location], list[Location]]:
    """The partition directories of a log directory, and the directories named like one that
    are log directories themselves (no Kafka file, partition directories inside: a parent of
    log directories was named, and ``kafka-logs-1`` only looks like topic ``kafka-logs``)."""
    partitions, log_dirs = [], []
    for d in log_dir.partition_dirs():
        if not _has_kafka_files(d) and d.partition_dirs():
            log_dirs.append(d)
        else:
            partitions.append(d)
    return partitions, log_dirs


def _log_dirs_below(parent: Location) -> list[Location]:
    """The directories in ``parent`` that look like log directories, whatever their names: each
    holds ``meta.properties`` (a broker's mark on its log directories) or partition directories
    (a parent of log directories was named: a JBOD mount, a backup of several brokers)."""
    found = []
    for name in sorted(parent.listing()[1]):
        child = parent / name
        try:
            files, _ = child.listing()
            if META_PROPERTIES in files or child.partition_dirs():
                found.append(child)
        except OSError:
            continue  # unreadable: not named in a hint
    return found


def total_log_bytes(path: str | os.PathLike | Location) -> int:
    """The bytes of ``.log`` data :func:`verify_path` would read (for a progress bar's total;
    from the listings when remote)."""
    path = Location.of(path)
    if path.is_file():
        stem = path.name.split(".", 1)[0]
        log = path.with_name(stem + LOG_SUFFIX)
        try:
            return log.size() if log.exists() else path.size()
        except OSError:
            return 0
    if path.is_remote and not path.exists():
        return 0  # verify_path says what is missing
    dirs = [path] if _has_kafka_files(path) else _partition_dirs(path)[0]
    total = 0
    for d in dirs:
        for log in d.segment_logs():
            try:
                total += log.size()
            except OSError:
                pass
    return total
