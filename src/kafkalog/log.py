"""The partition log: Kafka's ``UnifiedLog`` (local part) over a ``<topic>-<partition>`` directory.

A :class:`Log` owns the segments of one partition, its leader-epoch cache and its producer
state, and keeps the log directory's checkpoint files up to date. A directory it writes is one a
Kafka broker can load, and it opens directories Kafka brokers wrote.

The log directory's shared files (checkpoints, clean-shutdown marker, ``.lock``) are
:mod:`kafkalog.log_directory`'s; background work runs on a :mod:`kafkalog.scheduler`.

**Durability.** :meth:`Log.flush` fsyncs the segments up to the given offset, the producer
snapshots and the directory, then moves the recovery point. Whatever a flush covered survives a
kill at any instant: reopening validates everything after the recovery point and truncates only
bytes that fail validation. Rolling flushes the finished segment in the background (as Kafka
does), so the recovery point follows the rolls even when the flush policy never flushes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .log_config import LogConfig
from .durable import fsync_dir
from .errors import (
    DuplicateSequenceError,
    LogCleaningAbortedError,
    LogClosedError,
    OffsetOutOfRangeError,
    ReadOnlyLogError,
)
from .file_records import FileRecords
from .filenames import delete_dir_name, parse_partition_dir
from .log_loader import open_partition, rebuild_producer_state
from .local_log import (  # noqa: F401 (the special timestamps: kafkalog.log exports them)
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchIsolation,
    LocalLog,
    LogOffsetMetadata,
    roll_jitter,
)
from .high_watermark import HighWatermark
from .leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, OffsetAndEpoch
from .append_request import (
    FAILED,
    ROLL,
    STAGE_LOG,
    WRITTEN,
    append_request,
    batches_of,
    producer_batches,
    write_prepared,
)
from .compression import Compression
from .log_append import (
    LogAppendInfo,
    PreparedAppend,
    assign_epochs,
    frame_before_lock,
)
from .log_retention import LogRetention
from .offline_retention import RetentionPlan
from .log_directory import CLEAN_SHUTDOWN_FILE, LogDir, remove_stray_tmp  # noqa: F401 (re-exported)
from .producer_state.snapshot import sync_snapshot
from .producer_state.manager import AppendOrigin, LastRecord
from .record import MAGIC_V2, RecordBatch
from .memory_records import MemoryRecords
from .scheduler import Scheduler
from .segment import LogSegment, TimestampAndOffset
from .transaction_index import AbortedTxn
from .varint import INT32_MAX

_new_tuple = tuple.__new__

#: Compression by codec id (the one-call append reports the id).
_CODECS = tuple(sorted(Compression, key=lambda c: c.value))

_log = logging.getLogger(__name__)



def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- the log -------------------------------------------------------------------------------------


class Log:
    """One partition's log.

    Use :meth:`open`. Thread safety: one writer and many readers. Every method that changes the
    log (``append``, ``roll``, ``flush``, ``truncate_to``, ``truncate_fully_and_start_at``,
    ``delete_records``, ``delete_old_segments``, ``close``, ``delete``) takes the log's lock, so
    writers from several threads are serialised. Readers (``read``, ``offset_for_timestamp``
    and the offset properties) take no lock and may run beside a writer: they work on a snapshot
    of the segment list and read only up to the published log end, so they never see a
    partially written batch. A read racing with truncation or retention may raise
    :class:`~kafkalog.errors.KafkalogError` (the data it asked for is going away); the files of
    deleted segments stay open for ``file.delete.delay.ms`` so slices already returned remain
    readable meanwhile.

    Attributes:
        directory: the partition directory.
        topic, partition: parsed from its name.
        config: the topic's settings.
        producer_state: the :class:`~kafkalog.producer_state.manager.ProducerStateManager`.
        leader_epoch_cache: the :class:`~kafkalog.leader_epoch_cache.LeaderEpochFileCache`.
        load_stats: what opening found (:class:`~kafkalog.log_loader.LoadedLog` without segments).
    """

    def __init__(self) -> None:  # use Log.open
        raise TypeError("use Log.open(directory, config)")

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike,
        config: LogConfig | None = None,
        *,
        clock: Callable[[], int] | None = None,
        topic_id: str | None = None,
        producer_id_expiration_ms: int | None = None,
        read_only: bool = False,
        replicated: bool = False,
        high_watermark: int | None = None,
    ) -> Log:
        """Open (creating if absent) the partition log in ``directory``.

        Args:
            directory: a ``<topic>-<partition>`` directory; its parent is the log directory.
            config: the topic's settings (Kafka's defaults when None).
            clock: epoch milliseconds (tests inject one); the wall clock by default.
            topic_id: write ``partition.metadata`` with this topic id if it has none.
            producer_id_expiration_ms: Kafka's ``producer.id.expiration.ms`` (one day).
            read_only: load and recover in memory exactly as a writable open would decide, but
                create, lock, delete, rename and write nothing (the log must exist); what a
                writable open would have changed is listed in :attr:`pending_changes`, and every
                mutating method raises :class:`~kafkalog.errors.ReadOnlyLogError`. No ``.lock``
                is created; an existing one is share-locked (see ``docs/storage.md``).
            replicated: whether this is one replica of a replicated partition. False (the
                default): the log is its partition's only replica (replication factor 1, as a
                single-node broker's or a tool's): every append is committed at once, and the
                high watermark follows the log end (Kafka's leader with an in-sync replica set
                of one). True: the high watermark is Kafka's replica's: it starts at
                ``high_watermark``, else at the log directory's ``replication-offset-checkpoint``
                entry, else at the log start offset, and moves only by
                :meth:`maybe_increment_high_watermark` (a leader) and
                :meth:`update_high_watermark` (a follower); the checkpoint is written at
                :meth:`close` and by :meth:`checkpoint_high_watermark` (docs/replication.md).
            high_watermark: with ``replicated``, the high watermark to start with (clamped to
                the log).

        Raises:
            InvalidConfigError: the directory name is not ``<topic>-<partition>``.
            KafkalogError: the log directory is locked by another process, the partition is
                already open in this one, or its segments cannot be loaded.
            OSError: the files could not be read or written.
        """
        self = object.__new__(cls)
        config = config or LogConfig()
        directory = Path(directory)
        topic, partition = parse_partition_dir(directory)
        if read_only and not directory.is_dir():
            raise ReadOnlyLogError("no such partition directory (a read-only open creates none)", file=str(directory))
        if not read_only:
            directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.topic, self.partition = topic, partition
        # The names errors carry, made once (an append passes them on every call).
        self._file, self._partition_name = str(directory), f"{topic}-{partition}"
        self.config = config
        self._clock = clock or _now_ms
        self._lock = threading.RLock()
        self._closed = False
        self._tp = (topic, partition)
        self._read_only = read_only
        self._logdir = LogDir.open_read_only(directory.parent) if read_only else LogDir.acquire(directory.parent, self._tp)
        try:
            self._load(topic_id, producer_id_expiration_ms, replicated, high_watermark)
        except BaseException:
            self._logdir.release(self._tp, directory.name, clean=False)
            raise
        return self

    def _load(
        self, topic_id: str | None, producer_id_expiration_ms: int | None, replicated: bool, high_watermark: int | None
    ) -> None:
        directory = self.directory
        loaded, self.leader_epoch_cache, self.producer_state = open_partition(
            directory, self.config, self._logdir, self._tp, read_only=self._read_only, topic_id=topic_id,
            producer_id_expiration_ms=producer_id_expiration_ms, clock=self._clock,
            jitter=lambda: roll_jitter(self.config),
        )
        self._segments = loaded.segments
        self._scheduler = Scheduler(f"kafkalog-{directory.name}")
        self._local = LocalLog(directory, self.config, loaded.segments, clock=self._clock, scheduler=self._scheduler)
        self._retention = LogRetention(
            directory=directory, tp=self._tp, segments=self._segments, local=self._local, logdir=self._logdir,
            leader_epoch_cache=self.leader_epoch_cache, producer_state=self.producer_state,
        )
        self._log_start_offset = loaded.log_start_offset
        self._recovery_point = loaded.recovery_point
        self.load_stats = loaded._replace(segments=None)
        active = self._segments.last
        self._end = LogOffsetMetadata(
            offset=loaded.log_end_offset, segment_base_offset=active.base_offset, position=active.size
        )
        self._hw = HighWatermark(
            replicated=replicated, producer_state=self.producer_state, logdir=self._logdir, tp=self._tp
        )
        self._hw.load(high_watermark, log_start_offset=self._log_start_offset, log_end_offset=self._end.offset)
        self._last_flush_ms = self._clock()
        self._checkpointed_recovery_segment = -1
        self._truncations = 0  # bumped by every truncation; a flush racing one does not count
        # Persist what loading decided, so a crash now does not recover the same bytes again.
        self._checkpoint_offsets()

    # -- facts -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """The first offset a reader may ask for."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next record gets."""
        return self._end.offset

    @property
    def recovery_point(self) -> int:
        """Offsets below it are flushed to disk."""
        return self._recovery_point

    # -- replication: the high watermark, the last stable offset, leader epochs ---------------

    @property
    def replicated(self) -> bool:
        """Whether the log is one replica of a replicated partition (see :meth:`open`)."""
        return self._hw.replicated

    @property
    def high_watermark(self) -> int:
        """The offset below which records are committed (on every in-sync replica): what
        read_uncommitted consumers may read (:mod:`kafkalog.high_watermark`). An unreplicated
        log's is its log end offset; a leader moves a replica's with
        :meth:`maybe_increment_high_watermark`, a follower with :meth:`update_high_watermark`."""
        return self._hw.offset

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark to ``offset`` clamped to ``[log_start_offset,
        log_end_offset]`` and return it (Kafka's ``updateHighWatermark``: a follower takes the
        leader's, a new leader initialises its own)."""
        with self._lock:
            return self._hw.set_within(offset, self._log_start_offset, self._end.offset)

    def maybe_update_high_watermark(self, offset: int) -> int | None:
        """:meth:`update_high_watermark`, returning the new value only when it changed (Kafka's
        ``maybeUpdateHighWatermark``, a follower's call after each fetch)."""
        with self._lock:
            old = self._hw.offset
            new = self.update_high_watermark(offset)
            return None if new == old else new

    def maybe_increment_high_watermark(self, new: LogOffsetMetadata | int) -> int | None:
        """Move the high watermark up to ``new`` if that is higher (Kafka's
        ``maybeIncrementHighWatermark``: the leader, once every in-sync replica has reached
        ``new``); it never moves back. Returns the old value when it moved, else None.

        Raises:
            ValueError: ``new`` is above the log end offset.
        """
        offset = new.offset if isinstance(new, LogOffsetMetadata) else new
        with self._lock:
            if offset > self._end.offset:
                raise ValueError(
                    f"high watermark {offset} of {self.topic}-{self.partition} exceeds the log end offset "
                    f"{self._end.offset}"
                )
            old = self._hw.offset
            if offset <= old:
                return None
            self._hw.set(offset)
            return old

    def checkpoint_high_watermark(self) -> None:
        """Write a replica's high watermark to the log directory's
        ``replication-offset-checkpoint``, as Kafka's ReplicaManager does every
        ``replica.high.watermark.checkpoint.interval.ms``; :meth:`close` does it too."""
        self._check_writable()
        with self._lock:
            self._check_open()
            self._hw.checkpoint()

    @property
    def last_stable_offset(self) -> int:
        """The first offset not yet decided and committed: the first offset of the earliest
        transaction that is open or whose marker is not yet below the high watermark, or the
        high watermark (Kafka's ``lastStableOffset``). read_committed consumers read below it."""
        return self._hw.last_stable_offset(self._log_start_offset)

    def end_offset_for_epoch(self, leader_epoch: int) -> OffsetAndEpoch | None:
        """The end offset of ``leader_epoch`` in this log: the start of the next epoch, or the
        log end for the latest; for an epoch this log does not know, the largest epoch below it
        and its end (Kafka's ``endOffsetForEpoch``, OffsetsForLeaderEpoch's answer). None when
        the answer is undefined (an undefined epoch, or no epoch history)."""
        epoch, offset = self.leader_epoch_cache.end_offset_for(leader_epoch, self._end.offset)
        if offset == UNDEFINED_EPOCH_OFFSET:
            return None
        return OffsetAndEpoch(offset, epoch)

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> OffsetAndEpoch | None:
        """The leader's check of a follower's fetch (KIP-320): given the fetch offset and the
        epoch of the last batch the follower has, the epoch and end offset where the follower's
        log diverges from this one, or None when it does not (Kafka's ``Partition.readRecords``).

        Raises:
            OffsetOutOfRangeError: the end of ``last_fetched_epoch`` cannot be determined, or
                ``fetch_offset`` is below the log start offset.
        """
        answer = self.end_offset_for_epoch(last_fetched_epoch)
        if answer is None or answer.leader_epoch == UNDEFINED_EPOCH:
            raise OffsetOutOfRangeError(
                f"could not determine the end offset of the last fetched epoch {last_fetched_epoch} of "
                f"{self.topic}-{self.partition}",
                file=str(self.directory),
            )
        if fetch_offset < self._log_start_offset:
            raise self._out_of_range(fetch_offset)
        if answer.leader_epoch < last_fetched_epoch or answer.offset < fetch_offset:
            return answer
        return None

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that ``leader_epoch`` starts at ``start_offset`` (Kafka's
        ``maybeAssignEpochStartOffset``: a new leader, at its log end offset)."""
        self._check_writable()
        with self._lock:
            self._check_open()
            self.leader_epoch_cache.assign(leader_epoch, start_offset)

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (a snapshot)."""
        return self._segments.values()

    def log_segments(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """The segment holding ``from_offset`` and those after it that start before
        ``to_offset`` (Kafka's ``logSegments(from, to)``; a snapshot)."""
        return self._segments.values(from_offset, to_offset)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.last  # type: ignore[return-value]

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        return self._segments.size_in_bytes

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def read_only(self) -> bool:
        """Opened with ``read_only=True``: nothing on disk changes through this log."""
        return self._read_only

    @property
    def pending_changes(self) -> list[str]:
        """What a writable open of the directory would have changed on disk, one line each
        ("would truncate ...", "would rebuild the indexes of ...", "would write producer
        snapshot ...", "would rewrite ..."); empty for a writable log (it made them)."""
        return list(self._logdir.changes) if self._read_only else []

    def _check_writable(self) -> None:
        if self._read_only:
            raise ReadOnlyLogError("the log was opened read-only", file=str(self.directory))

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def __repr__(self) -> str:
        return (
            f"Log({str(self.directory)!r}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self._end.offset}, segments={len(self._segments)})"
        )

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError("the log is closed", file=str(self.directory))

    # -- appending ---------------------------------------------------------------------------

    def append(
        self,
        records: MemoryRecords | bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
        origin: AppendOrigin | None = None,
    ) -> LogAppendInfo:
        """Validate and append ``records``; see the class docstring for the rules.

        Args:
            records: one or more batches of any magic (one magic per append).
            assign_offsets: give the batches offsets from the log end (a leader's append). With
                False the batches keep theirs and must continue the log (a follower's or a copy
                tool's append); a partial batch at the end is ignored, as in a fetch response.
            leader_epoch: stamped into every v2 batch (leader appends) and recorded in the
                leader-epoch cache.
            origin: whose append this is for the producer-state checks: ``CLIENT`` by
                default for leader appends, ``REPLICATION`` for the others; ``COORDINATOR``
                writes transaction markers.

        Returns:
            The :class:`LogAppendInfo`.

        Raises:
            CorruptRecordError: a CRC or size mismatch.
            InvalidRecordError: a broken Kafka rule (offsets, counts, keys, magic, control
                batches from a client, ...); :class:`~kafkalog.log_validator.InvalidTimestampError`
                for timestamps outside the configured bounds.
            RecordTooLargeError: a batch above ``max.message.bytes``, or an append above
                ``segment.bytes``.
            TruncatedRecordError: a leader append ending inside a batch.
            UnexpectedAppendOffsetError, InvalidOffsetError: already-offset batches that do not
                continue the log or whose offsets do not increase.
            InvalidProducerEpochError, OutOfOrderSequenceError, InvalidTxnStateError: producer
                state rules (Kafka's broker errors).
            LogClosedError: the log is closed.
            OSError: a write failed; the log stays consistent (the bytes of the failed append
                are cut off again) and usable.
        """
        if origin is None:
            origin = AppendOrigin.CLIENT if assign_offsets else AppendOrigin.REPLICATION
        kind = type(records)
        buf = records if kind is bytes or kind is bytearray else (
            records.buffer if isinstance(records, MemoryRecords) else records
        )
        view = memoryview(buf).cast("B")
        batches, valid = frame_before_lock(
            view, max_message_bytes=self.config.max_message_bytes, assign_offsets=assign_offsets, file=self._file
        )
        if batches is not None and not batches:
            return LogAppendInfo.nothing(self._log_start_offset)
        with self._lock:
            if self._closed or self._read_only:
                self._check_open()
                self._check_writable()
            return self._append_locked(view, batches, valid, assign_offsets, leader_epoch, origin)

    def append_as_follower(self, records: MemoryRecords | bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append what a fetch from the leader returned: the leader's offsets and partition
        leader epochs are kept and the epoch cache is assigned from the batches (Kafka's
        ``appendAsFollower``; ``append(records, assign_offsets=False)``).

        Raises:
            UnexpectedAppendOffsetError: the first batch starts below the log end offset; the
                error carries the append's first and last offsets
                (:func:`kafkalog.follower.append_fetched` recovers from it as Kafka's fetcher
                does when the leader's log start offset falls inside that batch).
            InvalidOffsetError: offsets that do not increase.
        """
        return self.append(records, assign_offsets=False)

    def _append_locked(
        self,
        view: memoryview,
        batches: list[RecordBatch] | None,
        valid: int,
        assign_offsets: bool,
        leader_epoch: int | None,
        origin: AppendOrigin,
    ) -> LogAppendInfo:
        now = self._clock()
        config = self.config
        segment = self._segments.last
        assert segment is not None
        # One call checks the request and, when nothing is left to decide here (no producer id,
        # no roll), writes it with its index entries (kafkalog.append_request).
        job = segment.append_job(max_segment_bytes=config.segment_bytes, segment_ms=config.segment_ms, now_ms=now)
        result = append_request(
            view[:valid] if batches is not None else view, leader=assign_offsets, log_end_offset=self._end.offset,
            log_start_offset=self._log_start_offset, config=config, now_ms=now, leader_epoch=leader_epoch,
            from_client=origin is AppendOrigin.CLIENT, segment=job, partition=self._partition_name,
            file=self._file, batches=batches,
        )
        if result is None:
            return LogAppendInfo.nothing(self._log_start_offset)
        status = result[0]
        if status == FAILED:
            self._undo_request(segment, job, result)
        _, first_offset, last_offset, max_ts, max_ts_offset, size, count, codec, epochs, indexed, data, _, producers = (
            result
        )
        log_append_time = now if assign_offsets and config.log_append_time else -1
        source = _CODECS[codec]
        analysis = None
        if status != WRITTEN:
            if producers is None:  # a v0/v1 batch: the pure write path (its epochs clear the cache)
                prepared = PreparedAppend(
                    data=view[:size] if data is None else data, batches=batches_of(result, view, self._file),
                    first_offset=first_offset, last_offset=last_offset, max_timestamp=max_ts,
                    offset_of_max_timestamp=max_ts_offset, log_append_time=log_append_time, source_compression=source,
                )
                return self._append_prepared(prepared, count, assign_offsets, origin, now)
            if producers:
                # Producer state first, from the batches' header facts: a refused batch must
                # leave nothing behind (Kafka's analyzeAndValidateProducerState before the write).
                try:
                    analysis = self.producer_state.analyze_batches(
                        producer_batches(result, view, self._file), origin=origin
                    )
                except DuplicateSequenceError as e:
                    # An idempotent producer's retry: Kafka answers with the original's offsets.
                    return LogAppendInfo.of_duplicate(e, log_start_offset=self._log_start_offset, source_compression=source)
            segment, job, indexed = self._write_checked(
                view[:size] if data is None else data, segment, job, status, size, first_offset, last_offset, max_ts,
                max_ts_offset, now,
            )
        if job is not None:
            position = job[1] + size
            segment.note_request(job[1], size, last_offset, max_ts, max_ts_offset, indexed)
        else:  # LogSegment.append counted its own write
            position = segment.size
        cache = self.leader_epoch_cache
        for epoch, base_offset in epochs:  # assign_epochs' rule, over the batches where the epoch changes
            latest = cache.latest_entry
            if latest is None or epoch != latest.epoch or base_offset < latest.start_offset:
                cache.assign(epoch, base_offset)
        end = last_offset + 1
        state = self.producer_state
        if analysis is not None:
            self._apply_producer_state(analysis, segment)
        state.update_map_end_offset(end)
        # Publish the new end last: readers read up to it.
        self._end = LogOffsetMetadata(end, segment.base_offset, position)
        self._hw.on_append(end)
        self._maybe_flush(now)
        # LogAppendInfo's fields in order, without the NamedTuple's Python-level __new__ (per append)
        return _new_tuple(LogAppendInfo, (
            first_offset, last_offset, max_ts, max_ts_offset, log_append_time, self._log_start_offset, size, count,
            source, False,
        ))

    def _write_checked(
        self, data, segment: LogSegment, job: tuple | None, status: int, size: int, first_offset: int,
        last_offset: int, max_ts: int, max_ts_offset: int, now: int,
    ) -> tuple[LogSegment, tuple | None, int]:
        """Write a checked v2 request the one call left to Python (a producer id, a roll, no
        segment job): compiled into the active segment, or, when it cannot take the request as it
        is, into a new segment once rolled (Kafka rolls only between appends, so the request
        goes whole into it); what neither takes goes through :meth:`LogSegment.append`, which
        words an index rule's error. Returns the segment written, its job (None after
        ``LogSegment.append``, which counts its own write) and the index entries written."""
        written = (ROLL,) if job is None or status == ROLL else write_prepared(data, job, last_offset, max_ts, max_ts_offset)
        if written[0] == ROLL:
            rolled = self._maybe_roll(size, max_ts, last_offset, first_offset, now)
            if rolled is not segment:
                segment = rolled
                config = self.config
                job = segment.append_job(max_segment_bytes=config.segment_bytes, segment_ms=config.segment_ms, now_ms=now)
                if job is not None:
                    written = write_prepared(data, job, last_offset, max_ts, max_ts_offset)
        if written[0] == FAILED:
            self._undo_request(segment, job, written)
        if written[0] == WRITTEN:
            return segment, job, written[1]
        position = segment.size
        try:
            segment.append(
                MemoryRecords(data), largest_offset=last_offset, largest_timestamp=max_ts,
                offset_of_max_timestamp=max_ts_offset,
            )
        except OSError:
            self._local.undo_append(segment, position, self._end.offset)
            raise
        return segment, None, 0

    def _apply_producer_state(self, analysis, segment: LogSegment) -> None:
        """Install an append's checked producer state once its bytes are written: the producers'
        entries, and each transaction a marker completed (its ``.txnindex`` entry when aborted)."""
        state = self.producer_state
        for info in analysis.append_infos:
            state.update(info)
        for completed in analysis.completed_txns:
            lso = state.last_stable_offset(completed)
            if completed.is_aborted:
                segment.update_txn_index(completed.producer_id, completed.first_offset, completed.last_offset, lso)
            state.complete_txn(completed)

    def _undo_request(self, segment: LogSegment, job: tuple | None, result: tuple) -> None:
        """A compiled append's write failed: cut back what landed, as for any failed append
        (:meth:`kafkalog.local_log.LocalLog.undo_append`), and raise its ``OSError``."""
        _, stage, error, written = result
        assert job is not None
        position = job[1]
        if stage == STAGE_LOG:
            segment.log.undo_write(position, written)  # as FileRecords.append undoes its own
        else:  # the log write landed whole; an index entry failed and counts nothing
            segment.log.note_appended(position, written)
        self._local.undo_append(segment, position, self._end.offset)
        raise OSError(error, os.strerror(error))

    def _append_prepared(
        self, prepared: PreparedAppend, count: int, assign_offsets: bool, origin: AppendOrigin, now: int
    ) -> LogAppendInfo:
        """The rest of an append of v0/v1 batches, checked but not written by
        :func:`append_request`: producer state (none for these magics), the roll (Kafka rolls
        only between appends, so the request goes whole into the new segment), the epochs (a
        v0/v1 batch clears the cache), the write through :meth:`LogSegment.append`."""
        source = prepared.source_compression
        data, batches = prepared.data, prepared.batches
        first_offset, last_offset = prepared.first_offset, prepared.last_offset
        max_ts, max_ts_offset = prepared.max_timestamp, prepared.offset_of_max_timestamp
        size = len(data)
        # Producer state first: a refused batch must leave nothing behind.
        try:
            analysis = self.producer_state.analyze_batches(batches, origin=origin)
        except DuplicateSequenceError as e:
            # An idempotent producer's retry: Kafka answers with the original's offsets.
            return LogAppendInfo.of_duplicate(e, log_start_offset=self._log_start_offset, source_compression=source)
        segment = self._maybe_roll(
            size, max_ts, last_offset, first_offset if assign_offsets or batches[0].magic >= MAGIC_V2 else -1, now
        )
        assign_epochs(self.leader_epoch_cache, batches)
        position = segment.size
        try:
            segment.append(
                MemoryRecords(data),
                largest_offset=last_offset,
                largest_timestamp=max_ts,
                offset_of_max_timestamp=max_ts_offset,
            )
        except OSError:
            self._local.undo_append(segment, position, self._end.offset)
            raise
        self._apply_producer_state(analysis, segment)
        self.producer_state.update_map_end_offset(last_offset + 1)
        # Publish the new end last: readers read up to it.
        self._end = LogOffsetMetadata(
            offset=last_offset + 1, segment_base_offset=segment.base_offset, position=segment.size
        )
        self._hw.on_append(last_offset + 1)
        self._maybe_flush(now)
        return prepared.append_info(log_start_offset=self._log_start_offset, record_count=count)

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, first_offset: int, now: int) -> LogSegment:
        """Kafka's ``maybeRoll``."""
        segment = self._segments.last
        assert segment is not None
        if segment.should_roll(  # the log's settings now (Kafka's RollParams), not the segment's at its creation
            messages_size=size, max_timestamp_in_messages=max_ts, max_offset_in_messages=last_offset, now_ms=now,
            max_segment_bytes=self.config.segment_bytes, max_segment_ms=self.config.segment_ms,
        ):
            # Kafka: with no first offset (legacy follower appends), last - int32 max is a safe
            # lower bound of the first offset.
            roll_offset = first_offset if first_offset >= 0 else last_offset - INT32_MAX
            return self._roll(roll_offset)
        return segment

    def _maybe_flush(self, now: int) -> None:
        """The flush policy: ``flush.messages`` unflushed records or ``flush.ms`` since the last flush."""
        config = self.config
        if (
            self._end.offset - self._recovery_point >= config.flush_messages
            or now - self._last_flush_ms >= config.flush_ms
        ):
            self.flush()

    # -- rolling -----------------------------------------------------------------------------

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset and return it."""
        with self._lock:
            self._check_open()
            self._check_writable()
            return self._roll(None)

    def _roll(self, expected_next_offset: int | None) -> LogSegment:
        """Kafka's ``UnifiedLog.roll``: a new active segment, then a producer snapshot at its base
        offset (so recovery can start there) and, in the background, a flush up to it."""
        end = self._end.offset
        new_segment = self._local.roll(max(expected_next_offset or 0, end))
        self._end = LogOffsetMetadata(
            offset=end, segment_base_offset=new_segment.base_offset, position=new_segment.size
        )
        self.producer_state.update_map_end_offset(new_segment.base_offset)
        snapshot = self.producer_state.take_snapshot(sync=False)
        if snapshot is not None:
            self._local.add_unsynced_file(snapshot)
        base = new_segment.base_offset
        self._scheduler.schedule(0, lambda: self._flush_after_roll(snapshot, base))
        return new_segment

    def _flush_after_roll(self, snapshot: Path | None, base_offset: int) -> None:
        if self._closed:
            return
        if snapshot is not None:
            sync_snapshot(snapshot)
        self.flush(base_offset)

    # -- flushing ----------------------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below ``up_to`` (default: the log end offset) and the directory, and
        move the recovery point there. The fsyncs run outside the log's lock (as Kafka's), so
        appends go on meanwhile.

        Raises:
            OSError: an fsync failed; the recovery point does not move.
        """
        self._check_writable()
        with self._lock:
            if self._closed:
                return
            offset = self._end.offset if up_to is None else min(up_to, self._end.offset)
            generation = self._truncations
            if offset > self._recovery_point:
                segments = self._segments.values(self._recovery_point, offset)
            elif self._local.has_unsynced:
                # Nothing new below ``offset``, but a roll trimmed a segment after its last
                # fsync (a flush just before the roll): its final bytes must reach the disk.
                segments = []
            else:
                return
        self._local.flush(segments)
        with self._lock:
            if self._closed or generation != self._truncations or offset <= self._recovery_point:
                return
            self._recovery_point = offset
            self._last_flush_ms = self._clock()
            # Checkpoint the recovery point once it reaches a new segment: that bounds recovery
            # after a crash to the segments since, at the cost of one small write per segment.
            floor = self._segments.floor(offset)
            if floor is not None and floor.base_offset != self._checkpointed_recovery_segment:
                self._checkpointed_recovery_segment = floor.base_offset
                self._logdir.write_offset(self._logdir.recovery_points, self._tp, self._recovery_point)

    def _checkpoint_offsets(self) -> None:
        self._logdir.write_offset(self._logdir.recovery_points, self._tp, self._recovery_point)
        self._logdir.write_offset(self._logdir.log_starts, self._tp, self._log_start_offset)
        self._hw.checkpoint()

    # -- reading -----------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        isolation: FetchIsolation = FetchIsolation.LOG_END,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FileRecords:
        """Up to ``max_bytes`` of whole batches from the batch holding ``offset`` (Kafka's
        ``LocalLog.read``): a zero-copy :class:`~kafkalog.file_records.FileRecords` slice, empty
        at the end of the log.

        Args:
            offset: the first offset wanted.
            max_bytes: the size limit (``min_one_message`` lets the first batch exceed it).
            isolation: how far the read may go (Kafka's fetch isolation): the log end (a
                follower), the high watermark (a read_uncommitted consumer) or the last stable
                offset (read_committed).
            max_offset: read nothing at or after this offset either.
            min_one_message: return the first batch whole even when it is above ``max_bytes``.

        Raises:
            OffsetOutOfRangeError: ``offset`` is below the log start or above the log end.
        """
        self._check_open()
        end = self._end
        if offset < self._log_start_offset or offset > end.offset:
            raise self._out_of_range(offset)
        if isolation is FetchIsolation.HIGH_WATERMARK:
            bound = self._hw.offset
        elif isolation is FetchIsolation.TXN_COMMITTED:
            bound = self.last_stable_offset
        else:
            bound = None
        if bound is not None:
            max_offset = bound if max_offset is None else min(max_offset, bound)
        return self._local.read(offset, max_bytes, end=end, max_offset=max_offset, min_one_message=min_one_message)

    def _out_of_range(self, offset: int) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
            f"received request for offset {offset} of {self.topic}-{self.partition}, but the log holds "
            f"[{self._log_start_offset}, {self._end.offset})",
            file=str(self.directory),
        )

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ListOffsets answer for ``timestamp``: the first record at or after it, or one
        of the special values :data:`EARLIEST_TIMESTAMP`, :data:`LATEST_TIMESTAMP`,
        :data:`MAX_TIMESTAMP`, :data:`EARLIEST_LOCAL_TIMESTAMP`, :data:`LATEST_TIERED_TIMESTAMP`.
        None when no record qualifies.

        Raises:
            ValueError: a negative timestamp that is none of the special values.
        """
        self._check_open()
        return self._local.fetch_offset_by_timestamp(
            timestamp,
            log_start_offset=self._log_start_offset,
            log_end_offset=self._end.offset,
            cache=self.leader_epoch_cache,
        )

    # -- truncation --------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or after ``offset`` (a follower's truncation): segments,
        indexes, leader epochs and producer state. Return whether anything was removed.

        As in Kafka, the batch holding ``offset`` goes whole and the log end offset becomes
        ``offset`` (followers truncate at batch boundaries, where the two agree).

        Raises:
            ValueError: a negative offset.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate partition {self.topic}-{self.partition} to a negative offset ({offset})")
        with self._lock:
            self._check_open()
            self._check_writable()
            if offset >= self._end.offset:
                # Kafka: the epoch cache may hold an entry past the end all the same.
                self.leader_epoch_cache.truncate_from_end(self._end.offset)
                return False
            if self._segments.first.base_offset > offset:  # type: ignore[union-attr]
                self._truncate_fully(offset, offset)
                return True
            self._truncations += 1
            self._retention.delete_producer_snapshots(self._local.truncate_to(offset))
            self._set_end(offset)
            self.leader_epoch_cache.truncate_from_end(offset)
            self._log_start_offset = min(offset, self._log_start_offset)
            self.producer_state.truncate_and_reload(self._log_start_offset, offset, self._clock())
            rebuild_producer_state(self.producer_state, self._segments, self._log_start_offset, offset, self._clock())
            self._hw.keep_within(self._log_start_offset, offset)
            self._checkpoint_offsets()
            self._truncate_cleaner_checkpoint(offset)
            return True

    def _truncate_cleaner_checkpoint(self, offset: int) -> None:
        """Kafka's ``maybeTruncateCheckpoint``: a first dirty offset past the new end comes down."""
        checkpointed = self.cleaner_checkpoint
        if checkpointed is not None and checkpointed > offset:
            self.checkpoint_cleaner_offset(offset)

    def _set_end(self, offset: int) -> None:
        active = self._segments.last
        assert active is not None
        self._end = LogOffsetMetadata(offset=offset, segment_base_offset=active.base_offset, position=active.size)
        if self._recovery_point > offset:
            self._recovery_point = offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (the new log start offset)."""
        if offset < 0:
            raise ValueError(f"cannot start partition {self.topic}-{self.partition} at a negative offset ({offset})")
        with self._lock:
            self._check_open()
            self._check_writable()
            self._truncate_fully(offset, offset)

    def _truncate_fully(self, offset: int, log_start: int) -> None:
        self._truncations += 1
        self._local.truncate_fully_and_start_at(offset)
        self._end = LogOffsetMetadata(offset=offset, segment_base_offset=offset, position=0)
        self._recovery_point = offset
        self.leader_epoch_cache.clear_and_flush()
        self.producer_state.truncate_fully_and_start_at(offset)
        self._log_start_offset = log_start
        rebuild_producer_state(self.producer_state, self._segments, log_start, offset, self._clock())
        self._hw.keep_within(log_start, offset)
        self._checkpoint_offsets()
        self._truncate_cleaner_checkpoint(offset)

    # -- the log start offset and retention (the files' side: log_retention.LogRetention) -------

    def delete_records(self, before_offset: int) -> int:
        """Advance the log start offset to ``before_offset`` (Kafka's DeleteRecords); the
        segments below it go at the next :meth:`delete_old_segments`. Returns the new start.

        Raises:
            OffsetOutOfRangeError: ``before_offset`` is above the high watermark.
        """
        self.maybe_increment_log_start_offset(before_offset, "client delete records request")
        return self._log_start_offset

    def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str) -> bool:
        """Advance the log start offset to ``new_log_start_offset`` if that is higher (Kafka's
        ``maybeIncrementLogStartOffset``): DeleteRecords on a leader, or a follower learning the
        leader's log start offset from a fetch. Returns whether it moved.

        Raises:
            OffsetOutOfRangeError: ``new_log_start_offset`` is above the high watermark.
        """
        with self._lock:
            self._check_open()
            self._check_writable()
            self._retention.check_delete_records(new_log_start_offset, self.high_watermark)
            if new_log_start_offset <= self._log_start_offset:
                return False
            _log.info(
                "incrementing the log start offset of %s-%s to %d: %s",
                self.topic, self.partition, new_log_start_offset, reason,
            )
            self._increment_log_start_offset(new_log_start_offset)
            return True

    def _increment_log_start_offset(self, offset: int) -> None:
        """The recovery point and the high watermark follow the start up; the retention
        collaborator persists it and trims below it (epochs, producer state)."""
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        if self._recovery_point < offset:
            self._recovery_point = offset
        self._hw.keep_within(offset, self._end.offset)
        self._retention.log_start_offset_moved(offset)

    def plan_retention(self, now_ms: int | None = None) -> RetentionPlan:
        """What :meth:`delete_old_segments` would delete now, and why (a dry run)."""
        return self._retention.plan(
            self.config, self._clock() if now_ms is None else now_ms, log_start_offset=self._log_start_offset,
            log_end_offset=self._end.offset, high_watermark=self.high_watermark,
        )

    def delete_old_segments(self, *, now_ms: int | None = None, dry_run: bool = False) -> RetentionPlan:
        """Apply retention (Kafka's ``deleteOldSegments``): segments below the log start offset,
        then beyond ``retention.bytes``, then older than ``retention.ms``. The log start offset
        advances to the first remaining segment before the files go (renamed ``.deleted``,
        removed after ``file.delete.delay.ms``). Returns the plan applied (or, with
        ``dry_run``, the plan that would be)."""
        with self._lock:
            self._check_open()
            plan = self.plan_retention(now_ms)
            if not dry_run and plan.deletions:
                self._check_writable()
                self._increment_log_start_offset(self._retention.delete_segments(plan, roll=lambda: self._roll(None)))
            return plan

    # -- compaction: what the log cleaner needs ------------------------------------------------

    @property
    def truncations(self) -> int:
        """A counter bumped by every truncation: a cleaning pass that saw another value at its
        start must not swap in what it wrote."""
        return self._truncations

    @property
    def cleaner_checkpoint(self) -> int | None:
        """The first dirty offset checkpointed in the log directory's
        ``cleaner-offset-checkpoint`` (None when absent or unreadable)."""
        return self._logdir.read_offset(self._logdir.cleaner_offsets, self._tp)

    def checkpoint_cleaner_offset(self, offset: int | None) -> None:
        """Record the first dirty offset in ``cleaner-offset-checkpoint`` (None removes it)."""
        self._check_writable()
        self._logdir.write_offset(self._logdir.cleaner_offsets, self._tp, offset)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from the
        segments' transaction indexes (Kafka's ``collectAbortedTransactions``)."""
        return self._local.collect_aborted_transactions(start_offset, upper_bound_offset)

    def last_records_of_active_producers(self) -> dict[int, LastRecord]:
        """Per active producer, its last data offset and epoch: batches the cleaner must keep
        (at least as empty headers) so producer state survives compaction."""
        with self._lock:
            return self.producer_state.last_records()

    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A new, empty segment whose files end in ``.cleaned`` (Kafka's
        ``createNewCleanedSegment``); stale ``.cleaned`` files of that offset go first."""
        self._check_open()
        self._check_writable()
        return self._local.create_cleaned_segment(base_offset)

    def replace_segments(self, new_segment: LogSegment, old_segments: list[LogSegment], *, truncations: int) -> None:
        """Swap a flushed ``.cleaned`` segment in for ``old_segments``, crash-safely (Kafka's
        ``replaceSegments``; the steps are :meth:`kafkalog.local_log.LocalLog.replace_segments`'s).

        Raises:
            LogCleaningAbortedError: the log was truncated since ``truncations`` was read, or
                an old segment is no longer in the log (retention, closing); nothing changed.
        """
        self._check_writable()
        with self._lock:
            if self._closed:
                raise LogCleaningAbortedError("the log was closed during cleaning", file=str(self.directory))
            if truncations != self._truncations or any(
                self._segments.get(s.base_offset) is not s for s in old_segments
            ):
                raise LogCleaningAbortedError(
                    "the log was truncated or lost segments during cleaning", file=str(self.directory)
                )
            if self._segments.last in old_segments:
                raise ValueError("the active segment cannot be replaced")
            self._retention.delete_producer_snapshots(self._local.replace_segments(new_segment, old_segments))

    def update_config(self, config: LogConfig) -> None:
        """Apply new settings to the open log (Kafka's ``updateConfig``, after an AlterConfigs):
        the next append, roll, flush and retention pass read them. Existing segments keep the
        index interval they were created with, as in Kafka."""
        with self._lock:
            self._check_open()
            self.config = config
            self._local.config = config

    # -- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Flush, write a producer snapshot and the checkpoints, trim and close every file, and
        (when every log of the directory is closed) write the clean-shutdown marker."""
        with self._lock:
            if self._closed:
                return
        # Pending background work (the flush after a roll takes the log's lock) runs first,
        # outside the lock; anything scheduled from now on runs at once.
        self._scheduler.shutdown()
        if self._read_only:
            self._close_read_only()
            return
        with self._lock:
            if self._closed:
                return
            clean = False
            try:
                self.flush()
                self.producer_state.update_map_end_offset(self._end.offset)
                self.producer_state.take_snapshot()
                self._checkpoint_offsets()
                clean = True
            finally:
                self._closed = True
                active = self._segments.last
                if active is not None and not active.log.closed:
                    with contextlib.suppress(OSError):
                        active.on_become_inactive()
                self._segments.close()
                self._local.close()
                self._logdir.release(self._tp, self.directory.name, clean)

    def _close_read_only(self) -> None:
        """Close every file, writing nothing (no flush, snapshot, checkpoint or marker)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._segments.close()
            finally:
                self._logdir.release(self._tp, self.directory.name, clean=False)

    def delete(self) -> None:
        """Close the log and delete its directory and checkpoint entries."""
        self._close_and_forget()
        shutil.rmtree(self.directory, ignore_errors=True)
        fsync_dir(self.directory.parent)

    def rename_for_delete(self) -> Path:
        """Close the log, drop its checkpoint entries and rename its directory
        ``<topic>-<partition>.<uuid>-delete`` (Kafka's ``LogManager.asyncDelete``), durably; the
        files are removed later by whoever deletes that directory, and a ``-delete`` directory
        found at start is never loaded as a partition. Returns the new path.

        Raises:
            ReadOnlyLogError: a read-only open.
            OSError: the rename failed (the log is closed and forgotten all the same).
        """
        self._close_and_forget()
        target = self.directory.parent / delete_dir_name(self.topic, self.partition)
        os.rename(self.directory, target)
        fsync_dir(self.directory.parent)
        return target

    def _close_and_forget(self) -> None:
        """Close every file without the clean-shutdown work and remove the partition from the
        log directory's checkpoints (the first step of deleting the log)."""
        self._check_writable()
        # Pending background work (the flush after a roll) takes the lock: it runs first.
        self._scheduler.shutdown()
        with self._lock:
            if not self._closed:
                self._closed = True
                self._segments.close()
                self._local.close()
                self._logdir.release(self._tp, self.directory.name, clean=False)
            self._logdir.forget(self._tp)
