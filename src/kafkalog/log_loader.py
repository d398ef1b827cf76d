"""Opening a partition directory after a clean shutdown or a crash, as Kafka's ``LogLoader`` does.

:func:`load_log`, in Kafka's order:

1. **Temporary files**: delete ``*.deleted``; delete every ``*.cleaned`` file and every ``*.swap``
   file at or above the lowest ``.cleaned`` offset (the cleaner crashed before its swap began).
2. **Interrupted swaps**: the remaining ``.swap`` segments are complete (the cleaner renames
   ``.cleaned`` to ``.swap`` only after flushing), so the files of the old segments in their
   offset range are deleted and every ``.swap`` file is renamed into place.
3. **Segments**: orphan index files (no ``.log``) are deleted; every ``.log`` is opened (its
   indexes lazily), a missing time index is created empty, and a missing offset index or a
   transaction index that fails its sanity check has its segment recovered (indexes rebuilt from
   the log). As in Kafka 3.x the offset and time indexes are not checked here: those after the
   recovery point are rebuilt anyway, and the others are trusted until used.
4. **Recovery** (unless the clean-shutdown marker was present): every segment from the one
   holding the recovery point on is recovered — batches validated, indexes rebuilt, producer
   state and leader epochs replayed, the invalid tail truncated. After a truncation, or a hole
   (a recovered segment ending before the next one begins), the later segments are deleted, as
   they follow bytes that never were durable.
5. **Offsets**: segments entirely below a checkpointed log start offset that lies past the end
   are dropped; an empty log gets a segment at the log start offset; the recovery point is the
   log end offset after a clean shutdown, else the smaller of the checkpoint and the end.
6. **Leader epochs** are truncated to the log's offset range and **producer state** is rebuilt
   from the newest usable snapshot plus the batches after it.

Where kafkalog differs from Kafka: a batch whose offsets go backwards, fall below the segment's
base offset or overflow its 32-bit range ends the valid part of a segment during recovery (Kafka
drops the whole segment, or splits one written by brokers before 0.11).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from .checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    LeaderEpochCheckpointFile,
    PartitionMetadataFile,
)
from .log_config import LogConfig
from .durable import TMP_SUFFIX
from .errors import CorruptCheckpointError, InvalidConfigError, KafkalogError
from .file_records import FileRecords
from .filenames import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    log_file,
    offset_from_file,
)
from .leader_epoch_cache import LeaderEpochFileCache
from .log_directory import LogDir, remove_stray_tmp
from .producer_state.manager import ProducerStateManager, SnapshotOverlay
from .record import MAGIC_V2
from .segment import LogSegment
from .log_segments import LogSegments
from .varint import INT32_MAX

_log = logging.getLogger(__name__)


class LoadedLog(NamedTuple):
    """What :func:`load_log` found.

    Attributes:
        segments: the segments, oldest first (never empty).
        log_start_offset: the first offset readers may ask for.
        recovery_point: offsets below it are known to be flushed.
        log_end_offset: the offset the next append gets.
        recovered_segments: how many segments were recovered.
        truncated_bytes: bytes cut from invalid tails.
        deleted_segments: segments dropped after a truncated one.
    """

    segments: LogSegments
    log_start_offset: int
    recovery_point: int
    log_end_offset: int
    recovered_segments: int
    truncated_bytes: int
    deleted_segments: int


def _offset_or_none(path: Path) -> int | None:
    try:
        return offset_from_file(path)
    except ValueError:
        return None


class _ReadOnlyView:
    """A read-only load's picture of the directory: the files a writable load would delete
    (``gone``) or rename (``renamed``: new name -> actual name), and ``changes`` describing them."""

    def __init__(self, changes: list[str]) -> None:
        self.changes = changes
        self.gone: set[str] = set()
        self.renamed: dict[str, str] = {}


def _files(directory: Path, view: _ReadOnlyView | None = None) -> list[Path]:
    """The regular files of ``directory``, sorted by name (one listing), as ``view`` sees them."""
    with os.scandir(directory) as entries:
        names = {e.name for e in entries if e.is_file()}
    if view is not None:
        names = (names - view.gone) | set(view.renamed)
    return [directory / name for name in sorted(names)]


def _unlink(path: Path, view: _ReadOnlyView | None) -> None:
    if view is None:
        path.unlink(missing_ok=True)
    else:
        view.gone.add(path.name)
        view.renamed.pop(path.name, None)
        view.changes.append(f"would delete {path}")


def _rename(path: Path, target: Path, view: _ReadOnlyView | None) -> None:
    if view is None:
        os.replace(path, target)
    else:
        view.gone.add(path.name)
        view.renamed[target.name] = view.renamed.pop(path.name, path.name)
        view.changes.append(f"would rename {path} to {target.name}")


def _strip(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if name.endswith(suffix) else name


def _remove_temp_files_and_collect_swap_files(directory: Path, view: _ReadOnlyView | None = None) -> list[Path]:
    """Step 1 (Kafka's ``removeTempFilesAndCollectSwapFiles``)."""
    swap: list[Path] = []
    cleaned: list[Path] = []
    min_cleaned: int | None = None
    for path in _files(directory, view):
        name = path.name
        if name.endswith(DELETED_SUFFIX):
            _log.info("deleting stray temporary file %s", path)
            _unlink(path, view)
        elif name.endswith(CLEANED_SUFFIX):
            offset = _offset_or_none(path)
            if offset is not None:
                min_cleaned = offset if min_cleaned is None else min(min_cleaned, offset)
            cleaned.append(path)
        elif name.endswith(SWAP_SUFFIX):
            swap.append(path)
    valid = []
    for path in swap:
        offset = _offset_or_none(path)
        if offset is None or (min_cleaned is not None and offset >= min_cleaned):
            _log.info("deleting invalid swap file %s (min cleaned offset %s)", path, min_cleaned)
            _unlink(path, view)
        else:
            valid.append(path)
    for path in cleaned:
        _log.info("deleting stray cleaned file %s", path)
        _unlink(path, view)
    return valid


def _next_offset_of(path: Path) -> int:
    """The offset after the last batch of a log file (a shallow scan of batch headers)."""
    next_offset = None
    with FileRecords.open(path) as records:
        try:
            for batch in records.batches():
                next_offset = batch.next_offset
        except KafkalogError:
            pass  # a swap file is flushed before it is renamed; be lenient with a damaged tail
    return offset_from_file(path) if next_offset is None else next_offset


def _complete_swaps(directory: Path, swap_files: list[Path], view: _ReadOnlyView | None = None) -> None:
    """Step 2 (Kafka's swap handling in ``LogLoader.load``)."""
    logs = [p for p in swap_files if _strip(p.name, SWAP_SUFFIX).endswith(LOG_SUFFIX)]
    if not logs:
        for path in swap_files:
            _log.info("renaming orphan swap file %s", path)
            _rename(path, path.with_name(_strip(path.name, SWAP_SUFFIX)), view)
        return
    lo = min(offset_from_file(p) for p in logs)
    hi = max(_next_offset_of(p) for p in logs)
    for path in logs:
        _log.info("found log file %s from an interrupted swap; recovering it by renaming", path)
    for path in _files(directory, view):
        if path.name.endswith(SWAP_SUFFIX):
            continue
        offset = _offset_or_none(path)
        if offset is not None and lo <= offset < hi:
            _log.info("deleting segment file %s, compacted but not yet deleted", path)
            _unlink(path, view)
    for path in _files(directory, view):
        if path.name.endswith(SWAP_SUFFIX):
            _rename(path, path.with_name(_strip(path.name, SWAP_SUFFIX)), view)


def _open_segments(
    directory: Path,
    config: LogConfig,
    clock: Callable[[], int],
    jitter: Callable[[], int],
    view: _ReadOnlyView | None = None,
) -> tuple[LogSegments, list[LogSegment]]:
    """Step 3 (Kafka's ``loadSegmentFiles``): the segments, and those whose indexes need rebuilding."""
    segments = LogSegments()
    broken: list[LogSegment] = []
    files = _files(directory, view)
    names = {path.name for path in files}
    for path in files:
        name = path.name
        if name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
            offset = _offset_or_none(path)
            if offset is not None and log_file(directory, offset).name not in names:
                _log.warning("found an orphaned index file %s with no log file; deleting it", path)
                _unlink(path, view)
            continue
        if not name.endswith(LOG_SUFFIX):
            continue
        base = _offset_or_none(path)
        if base is None:
            continue
        stem = name[: -len(LOG_SUFFIX)]
        time_index_created = stem + TIME_INDEX_SUFFIX not in names
        offset_index_missing = stem + INDEX_SUFFIX not in names
        if view is None:
            segment = LogSegment.open(directory, base, config, roll_jitter_ms=jitter(), clock=clock)
        else:  # a renamed .swap segment is read under its actual name
            suffix = SWAP_SUFFIX if view.renamed.get(name, name) != name else ""
            segment = LogSegment.open(
                directory, base, config, suffix=suffix, roll_jitter_ms=jitter(), clock=clock, read_only=True
            )
        try:
            if offset_index_missing:
                raise KafkalogError("offset index file does not exist", file=str(segment.offset_index.path))
            if time_index_created:
                # Kafka: a segment from before time indexes gets an empty one.
                if view is not None:
                    segment.indexes_in_memory(time_index_only=True)
                    view.changes.append(f"would create the empty time index {segment.time_index.path}")
                segment.time_index.resize(0)
            # Kafka 3.x checks only the transaction index here: the segments after the recovery
            # point are recovered anyway, and the others' indexes open lazily on first use
            # (which is what makes opening a log of thousands of segments fast).
            segment.txn_index.sanity_check()
        except KafkalogError as e:
            _log.warning("segment %s needs its indexes rebuilt: %s", path, e)
            broken.append(segment)
        segments.add(segment)
    return segments, broken


def rebuild_producer_state(
    producer_state: ProducerStateManager,
    segments: LogSegments,
    log_start_offset: int,
    last_offset: int,
    now_ms: int,
    *,
    reload_from_clean_shutdown: bool = False,
) -> None:
    """Bring ``producer_state`` to ``last_offset``: reload the newest snapshot at or below it and
    replay the batches after it (Kafka's ``UnifiedLog.rebuildProducerState``)."""
    offsets_to_snapshot: list[int] = []
    if not segments.is_empty:
        last_base = segments.last.base_offset  # type: ignore[union-attr]
        lower = segments.lower(last_base)
        if lower is not None:
            offsets_to_snapshot.append(lower.base_offset)
        offsets_to_snapshot.append(last_base)
    offsets_to_snapshot.append(last_offset)
    if producer_state.latest_snapshot_offset is None and reload_from_clean_shutdown:
        # A clean shutdown without snapshots (an old broker): no producer needs rebuilding, and
        # empty snapshots at the last two segments and the end spare a full scan later.
        for offset in offsets_to_snapshot:
            producer_state.update_map_end_offset(offset)
            producer_state.take_snapshot()
        return
    producer_state.truncate_and_reload(log_start_offset, last_offset, now_ms)
    if last_offset > producer_state.map_end_offset:
        last_segment = segments.floor(last_offset)
        for segment in segments.values(producer_state.map_end_offset, last_offset):
            start = max(producer_state.map_end_offset, segment.base_offset, log_start_offset)
            producer_state.update_map_end_offset(start)
            if segment.base_offset in offsets_to_snapshot:
                producer_state.take_snapshot()
            max_position = segment.size
            if segment is last_segment:
                found = segment.translate_offset(last_offset)
                if found is not None:
                    max_position = found.position
            records = segment.read(start, INT32_MAX, max_position=max_position)
            if records is None:
                continue
            for batch in records.batches():
                if batch.magic >= 2 and batch.producer_id >= 0:
                    completed = producer_state.append_batch(batch, from_client=False)
                    if completed is not None:
                        producer_state.complete_txn(completed)
    producer_state.update_map_end_offset(last_offset)
    producer_state.take_snapshot()


def _recover_segment(
    segment: LogSegment,
    segments: LogSegments,
    log_start_offset: int,
    state: ProducerStateManager,
    leader_epoch_cache: LeaderEpochFileCache | None,
    now_ms: int,
) -> int:
    """Kafka's ``LogLoader.recoverSegment``: producer state as of the segment's start (from the
    snapshots), then the segment's recovery, then a snapshot so the next one starts from here.
    ``state`` is a manager for recovery only (Kafka makes a fresh one per segment; one carried
    from segment to segment reaches the same state without listing the snapshots again)."""
    rebuild_producer_state(state, segments, log_start_offset, segment.base_offset, now_ms)
    truncated = segment.recover(producer_state=state, leader_epoch_cache=leader_epoch_cache)
    state.take_snapshot()
    return truncated


def load_log(
    directory: str | os.PathLike,
    config: LogConfig,
    *,
    log_start_offset_checkpoint: int,
    recovery_point_checkpoint: int,
    had_clean_shutdown: bool,
    producer_state: ProducerStateManager,
    leader_epoch_cache: LeaderEpochFileCache | None,
    clock: Callable[[], int],
    jitter: Callable[[], int] = lambda: 0,
    read_only: bool = False,
    changes: list[str] | None = None,
) -> LoadedLog:
    """Load (and if needed recover) the partition in ``directory``; see the module docstring.

    Args:
        directory: the partition directory (it must exist).
        config: the topic's settings.
        log_start_offset_checkpoint: from ``log-start-offset-checkpoint`` (0 when absent).
        recovery_point_checkpoint: from ``recovery-point-offset-checkpoint`` (0 when absent).
        had_clean_shutdown: the clean-shutdown marker was present: skip step 4.
        producer_state: an empty manager over ``directory``; rebuilt here.
        leader_epoch_cache: the partition's epoch cache; truncated to the log here.
        clock: epoch milliseconds.
        jitter: each segment's roll jitter.
        read_only: create, delete, rename and write nothing, but decide as a writable load
            would (recovered indexes and producer snapshots are kept in memory;
            ``producer_state`` must have a :class:`~kafkalog.producer_state.manager.SnapshotOverlay`).
        changes: with ``read_only``, where a line is appended per change a writable load would
            have made (pass the list the other read-only steps note theirs in, so the lines keep
            the order they arose in); a list of its own when None. Unused by a writable load.

    Raises:
        OSError: the directory could not be read or written.
    """
    directory = Path(directory)
    now_ms = clock()
    view = _ReadOnlyView([] if changes is None else changes) if read_only else None
    swap_files = _remove_temp_files_and_collect_swap_files(directory, view)
    _complete_swaps(directory, swap_files, view)
    segments, broken = _open_segments(directory, config, clock, jitter, view)
    recovery = _Recovery(directory, segments, log_start_offset_checkpoint, producer_state, leader_epoch_cache, now_ms, view)
    for segment in broken:
        recovery.recover(segment)
    if not had_clean_shutdown:
        recovery.recover_unflushed(segments.values(recovery_point_checkpoint))
    deleted = recovery.deleted + _delete_segments_below_log_start(segments, log_start_offset_checkpoint, view)
    if segments.is_empty:
        segments.add(_empty_segment(directory, log_start_offset_checkpoint, config, clock, jitter, view))
        log_end = log_start_offset_checkpoint
    else:
        log_end = segments.last.next_offset  # type: ignore[union-attr]
    if had_clean_shutdown and recovery.recovered == 0:
        recovery_point = log_end
    else:
        recovery_point = min(recovery_point_checkpoint, log_end)
    if view is None:  # (read-only: the active segment's indexes keep their length)
        segments.last.resize_indexes(config.segment_index_bytes)  # type: ignore[union-attr]

    log_start = max(log_start_offset_checkpoint, segments.first.base_offset)  # type: ignore[union-attr]
    if leader_epoch_cache is not None:
        leader_epoch_cache.truncate_from_end(log_end)
        leader_epoch_cache.truncate_from_start(log_start)

    producer_state.remove_stray_snapshots(segments.base_offsets())
    rebuild_producer_state(
        producer_state, segments, log_start, log_end, now_ms, reload_from_clean_shutdown=had_clean_shutdown
    )
    return LoadedLog(
        segments=segments,
        log_start_offset=log_start,
        recovery_point=recovery_point,
        log_end_offset=log_end,
        recovered_segments=recovery.recovered,
        truncated_bytes=recovery.truncated,
        deleted_segments=deleted,
    )


class _Recovery:
    """Step 4 and the recovery of segments with broken indexes: one segment at a time with one
    recovery-only producer-state manager (made on first use), counting what it did."""

    def __init__(
        self,
        directory: Path,
        segments: LogSegments,
        log_start_offset: int,
        producer_state: ProducerStateManager,
        leader_epoch_cache: LeaderEpochFileCache | None,
        now_ms: int,
        view: _ReadOnlyView | None,
    ) -> None:
        self._directory = directory
        self._segments = segments
        self._log_start_offset = log_start_offset
        self._producer_state = producer_state
        self._leader_epoch_cache = leader_epoch_cache
        self._now_ms = now_ms
        self._view = view
        self._state: ProducerStateManager | None = None
        self._recovered: set[int] = set()  # base offsets of the segments recovered
        self.truncated = 0  # bytes cut from invalid tails
        self.deleted = 0  # segments dropped after a truncated one or a hole

    @property
    def recovered(self) -> int:
        """How many segments were recovered (each once, however often)."""
        return len(self._recovered)

    def recover(self, segment: LogSegment) -> int:
        """Recover ``segment``; return the bytes truncated."""
        if self._state is None:
            self._state = ProducerStateManager(
                self._directory,
                producer_id_expiration_ms=self._producer_state.producer_id_expiration_ms,
                overlay=self._producer_state.overlay,
            )
        size = segment.size
        truncated = _recover_segment(
            segment, self._segments, self._log_start_offset, self._state, self._leader_epoch_cache, self._now_ms
        )
        # Kafka recovers a segment with broken indexes at once and again when it lies past the
        # recovery point (LogLoader.loadSegmentFiles, then recoverLog): counted, and noted, once.
        first_time = segment.base_offset not in self._recovered
        self._recovered.add(segment.base_offset)
        if self._view is not None:
            if first_time:
                self._view.changes.append(f"would rebuild the indexes of {segment.log.path}")
            if truncated:
                self._view.changes.append(
                    f"would truncate {truncated} bytes of {segment.log.path} at position {size - truncated}"
                )
        self.truncated += truncated
        return truncated

    def recover_unflushed(self, unflushed: list[LogSegment]) -> None:
        """Recover the segments from the one holding the recovery point on; after a truncation
        or a hole, delete the segments that follow."""
        for i, segment in enumerate(unflushed):
            _log.info("recovering unflushed segment %s (%d/%d)", segment.log.path, i, len(unflushed))
            truncated = self.recover(segment)
            later = unflushed[i + 1 :]
            if truncated > 0:
                _log.warning(
                    "corruption found in segment %s: truncated %d bytes; deleting the %d segments after it",
                    segment.log.path,
                    truncated,
                    len(later),
                )
            elif later and segment.next_offset < later[0].base_offset:
                # A hole: the segment ends before the next one begins. Unflushed segments do not
                # skip offsets unless a power cut lost the data of the one before the gap (its
                # name reached the disk before its bytes); what follows never continued the log.
                _log.warning(
                    "segment %s ends at offset %d but the next, %s, begins at %d: the data between never "
                    "reached the disk; deleting the %d segments from %s on",
                    segment.log.path,
                    segment.next_offset,
                    later[0].log.path,
                    later[0].base_offset,
                    len(later),
                    later[0].log.path,
                )
            else:
                continue
            for doomed in later:
                self._segments.remove(doomed.base_offset)
                _delete_segment(doomed, self._view)
            self.deleted += len(later)
            return


def _delete_segments_below_log_start(segments: LogSegments, log_start_offset: int, view: _ReadOnlyView | None) -> int:
    """Kafka's ``deleteSegmentsIfLogStartGreaterThanLogEnd``: the files below a checkpointed
    start offset that is past their end were deleted outside the log. Returns how many went."""
    if segments.is_empty:
        return 0
    log_end = segments.last.next_offset  # type: ignore[union-attr]
    if log_start_offset <= log_end:
        return 0
    _log.warning("deleting all segments: log end offset %d is below log start offset %d", log_end, log_start_offset)
    doomed = segments.values()
    for segment in doomed:
        segments.remove(segment.base_offset)
        _delete_segment(segment, view)
    return len(doomed)


def _empty_segment(
    directory: Path,
    base_offset: int,
    config: LogConfig,
    clock: Callable[[], int],
    jitter: Callable[[], int],
    view: _ReadOnlyView | None,
) -> LogSegment:
    """The segment an empty log gets at the log start offset (read-only: in memory, noted)."""
    if view is None:
        return LogSegment.open(directory, base_offset, config, roll_jitter_ms=jitter(), clock=clock)
    segment = LogSegment.empty_in_memory(directory, base_offset, config, clock=clock)
    view.changes.append(f"would create the empty segment {log_file(directory, base_offset)}")
    return segment


def _delete_segment(segment: LogSegment, view: _ReadOnlyView | None) -> None:
    if view is None:
        segment.delete_if_exists()
    else:
        view.changes.append(f"would delete segment {segment.log.path} and its indexes")
        segment.close()


class OpenedPartition(NamedTuple):
    """What :func:`open_partition` read: the loaded log and the partition's epoch cache and
    producer state."""

    loaded: LoadedLog
    leader_epoch_cache: LeaderEpochFileCache
    producer_state: ProducerStateManager


def open_partition(
    directory: Path,
    config: LogConfig,
    logdir: LogDir,
    tp: tuple[str, int],
    *,
    read_only: bool,
    topic_id: str | None,
    producer_id_expiration_ms: int | None,
    clock: Callable[[], int],
    jitter: Callable[[], int],
) -> OpenedPartition:
    """Everything opening a partition log reads from disk, in Kafka's order: the log directory's
    clean-shutdown marker and checkpoints, ``partition.metadata`` (written with ``topic_id`` if
    it has none), the ``leader-epoch-checkpoint`` (rebuilt from the batches when corrupt), the
    producer state and :func:`load_log`. A ``read_only`` open notes in ``logdir.changes`` what a
    writable one would change, in the order the steps decide it."""
    clean = logdir.consume_clean_marker()
    recovery_point, log_start = logdir.read_offsets(tp)
    if topic_id is not None:
        check_partition_metadata(directory, topic_id, read_only=read_only, changes=logdir.changes)
    leader_epoch_cache, rebuild_epochs = open_leader_epoch_cache(directory, read_only=read_only, changes=logdir.changes)
    kwargs: dict = {} if producer_id_expiration_ms is None else {"producer_id_expiration_ms": producer_id_expiration_ms}
    if read_only:
        kwargs["overlay"] = SnapshotOverlay(logdir.changes)
    producer_state = ProducerStateManager(directory, **kwargs)
    loaded = load_log(
        directory,
        config,
        log_start_offset_checkpoint=max(0, log_start or 0),
        recovery_point_checkpoint=max(0, recovery_point or 0),
        had_clean_shutdown=clean,
        producer_state=producer_state,
        leader_epoch_cache=leader_epoch_cache,
        clock=clock,
        jitter=jitter,
        read_only=read_only,
        changes=logdir.changes if read_only else None,
    )
    if rebuild_epochs:
        rebuild_leader_epochs(leader_epoch_cache, loaded.segments.values(), loaded.log_start_offset)
    return OpenedPartition(loaded, leader_epoch_cache, producer_state)


def rebuild_leader_epochs(cache: LeaderEpochFileCache, segments: list[LogSegment], log_start_offset: int) -> None:
    """Recreate the epoch history from batch headers (after a corrupt checkpoint)."""
    entries = []
    latest = -1
    for segment in segments:
        for batch in segment.log.batches():
            epoch = batch.partition_leader_epoch
            if batch.magic >= MAGIC_V2 and epoch > latest:
                entries.append((epoch, batch.base_offset))
                latest = epoch
    cache.assign_all(entries)
    cache.truncate_from_start(log_start_offset)


class _PendingEpochCheckpoint(LeaderEpochCheckpointFile):
    """A read-only open's ``leader-epoch-checkpoint``: writes are kept in memory and noted."""

    def __init__(self, path: Path, changes: list[str]) -> None:
        super().__init__(path)
        self._changes = changes
        self._written: list | None = None

    def read(self) -> list:
        return super().read() if self._written is None else list(self._written)

    def write(self, entries) -> None:  # type: ignore[override]
        self._written = list(entries)
        note = f"would rewrite {self.path}"
        if note not in self._changes:
            self._changes.append(note)


def open_leader_epoch_cache(
    directory: Path, *, read_only: bool, changes: list[str]
) -> tuple[LeaderEpochFileCache, bool]:
    """The partition's leader-epoch cache from its ``leader-epoch-checkpoint``, and whether it
    must be rebuilt from the batches (:func:`rebuild_leader_epochs`): a corrupt checkpoint is
    dropped rather than failing the load, as Kafka recreates it. ``read_only``: nothing is
    written or deleted; what would be is noted in ``changes``."""
    path = directory / LEADER_EPOCH_CHECKPOINT
    if read_only:
        epoch_file: LeaderEpochCheckpointFile = _PendingEpochCheckpoint(path, changes)
        if path.with_name(path.name + TMP_SUFFIX).exists():
            changes.append(f"would delete {path}{TMP_SUFFIX}")
    else:
        epoch_file = LeaderEpochCheckpointFile(path)
        remove_stray_tmp(epoch_file.path)
    try:
        return LeaderEpochFileCache(epoch_file), False
    except CorruptCheckpointError as e:
        _log.warning("rebuilding corrupt leader epoch checkpoint %s: %s", epoch_file.path, e)
        if not read_only:
            epoch_file.path.unlink(missing_ok=True)
        else:
            changes.append(f"would delete the corrupt {path}")
            epoch_file.write([])
        return LeaderEpochFileCache(epoch_file), True


def check_partition_metadata(directory: Path, topic_id: str, *, read_only: bool, changes: list[str]) -> None:
    """Write ``partition.metadata`` with ``topic_id`` if it has none (``read_only``: note in
    ``changes`` that it would be written).

    Raises:
        InvalidConfigError: it holds another topic id.
    """
    metadata = PartitionMetadataFile(directory / PARTITION_METADATA)
    if not metadata.exists():
        if not read_only:
            metadata.write(topic_id)
        else:
            changes.append(f"would write {metadata.path} (topic id {topic_id})")
    elif metadata.read() != topic_id:
        raise InvalidConfigError(
            f"partition.metadata holds topic id {metadata.read()}, not {topic_id}", file=str(metadata.path)
        )
