"""``verify`` of one segment: every batch of its ``.log`` checked as Kafka's recovery checks it,
its indexes checked beside the batches."""

from __future__ import annotations

import bisect
import os
from collections.abc import Mapping
from typing import Any

from ..compression import Compression
from ..file_records import FileRecords
from ..index import OffsetIndex, TimeIndex
from ..checkpoint import EpochEntry
from ..filenames import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, segment_base_offset
from ..location import Location
from ..progress import Progress, ProgressTicker
from ..record import MAGIC_V2, ControlRecordType, RecordBatch, TimestampType
from ..remote import SMALL_BLOCK_SIZE
from ..resync import all_zero, next_valid_batch
from ..errors import CorruptRecordError, KafkalogError, RemoteReadError, TruncatedRecordError
from ..segment_recovery import MAX_RELATIVE_OFFSET, Refusal, RecoveryStep
from ..transaction_index import AbortedTxn
from ..transaction_tracker import TransactionTracker, TxnEnd
from .index_check import OffsetIndexCheck, TimeIndexCheck, entries_text, read_txn_index, used_entries
from .report import Problem, ProblemList, SegmentReport

# ------------------------------------------------------------------------------------------------
# One segment


def _sibling(log_path: Location, suffix: str) -> Location:
    """``00..42.log[.swap]`` -> ``00..42<suffix>[.swap]``."""
    name = log_path.name
    i = name.find(LOG_SUFFIX)
    if i < 0:
        return log_path.with_name(name + suffix)
    return log_path.with_name(name[:i] + suffix + name[i + len(LOG_SUFFIX) :])


def first_batch_base(path: str | os.PathLike | Location) -> int | None:
    """The base offset of the first batch of a file, when its first batch is valid (None:
    empty, unreadable, or not a batch): the base offset of a segment not named after it, such
    as ``salvage`` output written under another name. Only that batch is read."""
    try:
        with Location.of(path).open_records(block_size=SMALL_BLOCK_SIZE) as fr:
            batch = next(fr.batches(strict=True), None)
            if batch is None:
                return None
            batch.ensure_valid()
            return batch.base_offset
    except (KafkalogError, OSError):
        return None


def segment_base(log_path: Location) -> tuple[int, bool]:
    """The base offset of a segment and whether its name gave it: ``<20 digits>.log`` names it,
    anything else takes the first batch's.

    Raises:
        KafkalogError: the name gives no offset and the file starts with no valid batch.
    """
    try:
        return segment_base_offset(str(log_path)), True
    except KafkalogError:
        base = first_batch_base(log_path)
        if base is None:
            raise
        return base, False


class PartitionContext:
    """What the checks of one segment need from its partition."""

    def __init__(self) -> None:
        self.tracker = TransactionTracker()
        self.start: int | None = None  # the first offset the scan covers (transactions before it are unknown)
        self.txn_exact = False  # the scan began at offset 0: last stable offsets are comparable
        self.epochs: list[EpochEntry] | None = None
        self.epoch_starts: list[int] = []
        self.epoch_from = 0  # batches below the log start offset are not compared
        self.log_start = 0  # the partition's log start offset
        self.txn_live: dict[int, int] = {}  # producer id -> first batch of its open transaction at/after log_start
        self.epoch_mismatches = 0
        self.epoch_first: str | None = None
        self.legacy_seen = False


class _SegmentScan:
    """The pass over one ``.log``: batches, offsets, stats, and the index checks beside them."""

    def __init__(
        self,
        log_path: Location,
        *,
        deep: bool,
        check_indexes: bool,
        progress: Progress | None,
        context: PartitionContext | None,
    ) -> None:
        self.path = log_path
        self.name = str(log_path)
        self.base, self.named = segment_base(log_path)
        self.deep = deep
        self.step = RecoveryStep(self.base)  # Kafka's recovery rule: offsets, the max timestamp
        self.check_indexes = check_indexes
        self.ticker = ProgressTicker(progress)
        self.ctx = context or PartitionContext()
        self.sink: list[Problem] = []
        self.problems = ProblemList(self.sink)
        self.batches = self.records = self.control = self.transactional = 0
        self.tombstones = 0
        self.first: int | None = None
        self.last: int | None = None
        self.min_ts: int | None = None
        self.max_ts: int | None = None
        self.magics: set[int] = set()
        self.codecs: set[str] = set()
        self.producers: set[int] = set()
        self.txn_ends: list[TxnEnd] = []
        self.txn_live_first: dict[int, int | None] = {}  # marker offset -> its txn's first batch at/after the log start
        self.offset_check: OffsetIndexCheck | None = None
        self.time_check: TimeIndexCheck | None = None
        self.index_entries: int | None = None
        self.time_entries: int | None = None
        self.aborted: int | None = None
        self.open_indexes: list = []

    def add(self, position: int | None, kind: str, message: str, severity: str = "error") -> None:
        self.problems.add(self.name, position, kind, message, severity)

    # -- indexes -------------------------------------------------------------------------------

    def _open_index(self, cls, suffix: str, label: str, entry_size: int):
        path = _sibling(self.path, suffix)
        prefix = "index" if cls is OffsetIndex else "timeindex"
        if not path.exists():
            consequence = (
                "Kafka rebuilds it from the log when it loads the segment"
                if cls is OffsetIndex
                else "Kafka creates an empty one when it loads the segment"
            )
            self.add(None, f"{prefix}-missing", f"no {label} ({path.name}); {consequence}", "warning")
            return None, 0, path
        data = path.read_bytes()  # one request when remote; an index is small
        length = len(data)
        name = str(path)
        if length % entry_size:
            self.problems.add(
                name, None, f"{prefix}-corrupt",
                f"{length} bytes is not a whole number of {entry_size}-byte entries (Kafka rebuilds such an index)",
            )
        used = used_entries(data, entry_size)
        unused = length // entry_size - used
        if unused:
            self.problems.add(
                name, used, f"{prefix}-preallocated",
                f"{unused} unused preallocated entries after entry {used - 1 if used else 0}: the index was not trimmed "
                f"(an active segment, or one a broker did not close cleanly)",
                "warning",
            )
        index = cls.from_bytes(data, self.base, path=name)
        self.open_indexes.append(index)
        return index, used, path

    def open_indexes_for_check(self) -> None:
        index, used, path = self._open_index(OffsetIndex, INDEX_SUFFIX, "offset index", 8)
        if index is not None:
            self.index_entries = used
            self.offset_check = OffsetIndexCheck(index, used, str(path), self.problems)
        tindex, tused, tpath = self._open_index(TimeIndex, TIME_INDEX_SUFFIX, "time index", 12)
        if tindex is not None:
            self.time_entries = tused
            self.time_check = TimeIndexCheck(tindex, tused, str(tpath), self.problems)

    def close(self) -> None:
        for index in self.open_indexes:
            index.close()

    # -- batches -------------------------------------------------------------------------------

    def run(self) -> SegmentReport:
        if not self.named:
            self.add(
                None, "segment-name",
                f"not named <20 digits>.log, so Kafka would not load it: base offset {self.base} taken from the first "
                f"batch",
                "warning",
            )
        if self.check_indexes:
            self.open_indexes_for_check()
        # Remote: ranged requests of bounded blocks up to the listed size, the next one
        # fetched while this one is checked; every byte is fetched once.
        fr = self.path.open_records(end=self.path.size() if self.path.is_remote else None)
        try:
            size = fr.size_in_bytes
            valid = self._scan(fr, size)
        finally:
            fr.close()
            self.ticker.flush()
        if self.offset_check is not None:
            self.offset_check.finish(valid, size)
        if self.time_check is not None:
            self.time_check.finish(self.last, valid < size)
        if self.check_indexes:
            self._check_txn_index(valid < size)
        self.close()
        self.problems.close()
        return SegmentReport(
            path=self.name,
            base_offset=self.base,
            size=size,
            valid_bytes=valid,
            batches=self.batches,
            records=self.records,
            first_offset=self.first,
            last_offset=self.last,
            min_timestamp=self.min_ts,
            max_timestamp=self.max_ts,
            magics=tuple(sorted(self.magics)),
            codecs=tuple(c.kafka_name for c in sorted(Compression) if c.kafka_name in self.codecs),
            problems=self.sink,
            deep=self.deep,
            tombstones=self.tombstones if self.deep else None,
            control_batches=self.control,
            transactional_batches=self.transactional,
            producer_ids=tuple(sorted(self.producers)),
            index_entries=self.index_entries,
            time_index_entries=self.time_entries,
            aborted_txns=self.aborted,
            error_count=self.problems.errors,
            warning_count=self.problems.warnings,
        )

    def _scan(self, fr: FileRecords, size: int) -> int:
        """Walk the batches; return the valid bytes (where recovery would truncate)."""
        pos = 0
        try:
            for batch in fr.batches(validate=True, strict=True):
                if not self._batch(batch):
                    self.ticker.add(size - pos)
                    return pos
                pos = batch.position + batch.size_in_bytes  # type: ignore[operator]
                self.ticker.add(batch.size_in_bytes)
        except TruncatedRecordError as e:
            self._stopped(fr, pos, size, e, truncated=True)
        except RemoteReadError:
            raise  # the read failed, not the bytes: not a finding about them
        except KafkalogError as e:
            self._stopped(fr, pos, size, e, truncated=False)
        return pos

    def _stopped(self, fr: FileRecords, pos: int, size: int, error: KafkalogError, *, truncated: bool) -> None:
        """Report why the valid data ends at ``pos`` (before ``size``)."""
        rest = size - pos
        self.ticker.add(rest)
        if all_zero(fr, pos, size):
            self.add(
                pos, "zero-tail",
                f"the last {rest} bytes are zeros: space preallocated for an active segment (preallocate=true) or a torn "
                f"write; Kafka's recovery truncates them",
                "warning",
            )
            return
        resume = next_valid_batch(
            fr, pos + 1, size, min_offset=(self.last + 1 if self.last is not None else self.base),
            max_offset=self.base + MAX_RELATIVE_OFFSET,
        )
        after = (
            f"; valid batches resume at position {resume.position} (kafkalog salvage recovers them)"
            if resume is not None
            else ""
        )
        if truncated and resume is None:
            self.add(
                pos, "truncated",
                f"the last {rest} bytes do not hold a whole batch (a torn write); Kafka's recovery truncates them",
            )
            return
        kind = "corrupt-batch"
        if isinstance(error, CorruptRecordError):
            try:
                batch = next(fr.slice(pos).batches(), None)
                if batch is not None and batch.compute_crc() != batch.crc:
                    kind = "crc"
            except RemoteReadError:
                raise  # the read failed, not the bytes: not a finding about them
            except KafkalogError:
                pass
        reason = error.reason if error.position is None or error.position == pos else f"{error.reason} (byte {error.position})"
        self.add(pos, kind, f"{reason}; Kafka's recovery truncates the {rest} bytes from here{after}")

    def _batch(self, batch: RecordBatch) -> bool:
        """Account for one valid batch; False when the offsets end the valid data here."""
        position = batch.position
        magic = batch.magic
        last = batch.last_offset
        codec = batch.compression
        records = None
        if magic == MAGIC_V2:
            first = batch.base_offset
            count = batch.count
        elif codec is Compression.NONE:
            first, count = last, 1
        else:
            first, count = last, 0
            try:  # a wrapper's first offset and count are inside its compressed value
                records = batch.records()
                first, count = records[0].offset, len(records)
            except RemoteReadError:
                raise  # the read failed, not the bytes: not a finding about them
            except KafkalogError as e:
                self.add(position, "invalid-record", f"v{magic} message at offset {last}: {e.reason}")
        previous = self.last
        refusal = self.step.refusal(batch)
        if refusal is not None:
            self._refused(refusal, position, last, previous)
            return False
        self.step.take(batch)
        if previous is not None and first <= previous:
            self.add(position, "offsets-not-monotonic", f"batch starting at offset {first} overlaps offset {previous}")
        elif previous is None and first < self.base:
            self.add(position, "offset-below-base", f"batch starting at offset {first} begins below the base offset {self.base}")
        self.batches += 1
        self.records += count or 0
        if self.first is None:
            self.first = first
        self.last = last
        self.magics.add(magic)
        self.codecs.add(codec.kafka_name)
        max_ts = batch.max_timestamp
        if max_ts >= 0 and (self.max_ts is None or max_ts > self.max_ts):
            self.max_ts = max_ts
        if magic == MAGIC_V2:
            pid = batch.producer_id
            if pid >= 0:
                self.producers.add(pid)
            if batch.is_control:
                self.control += 1
            if batch.is_transactional:
                self.transactional += 1
            ts = max_ts if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else (None if batch.delete_horizon_ms is not None else batch.base_timestamp)
        else:
            self.ctx.legacy_seen = True
            ts = batch.base_timestamp if magic == 1 else None
        if self.deep:
            try:
                if records is None:
                    records = batch.records()
                for r in records:
                    if r.value is None and not r.is_control:
                        self.tombstones += 1
                    if r.timestamp >= 0 and (self.min_ts is None or r.timestamp < self.min_ts):
                        self.min_ts = r.timestamp
            except KafkalogError as e:
                self.add(position, "invalid-record", e.reason)
        elif ts is not None and ts >= 0 and (self.min_ts is None or ts < self.min_ts):
            self.min_ts = ts
        if self.offset_check is not None:
            self.offset_check.on_batch(position, last)  # type: ignore[arg-type]
        if self.time_check is not None:
            self.time_check.on_batch(first, last, (self.step.max_timestamp, self.step.offset_of_max_timestamp))
        if magic == MAGIC_V2:
            self._transactions(batch)
            self._epoch(batch)
        return True

    def _refused(self, refusal: Refusal, position: int | None, last: int, previous: int | None) -> None:
        """Report the batch at ``position`` whose offsets end the valid data (Kafka's recovery rule)."""
        if refusal is Refusal.OVERFLOW:
            self.add(
                position, "offset-overflow",
                f"offset {last} is beyond the 32-bit range of the base offset {self.base} (a segment of a broker before "
                f"0.11: Kafka splits it when it loads it; kafkalog's recovery truncates here)",
            )
        elif previous is None:
            self.add(
                position, "offset-below-base",
                f"batch ending at offset {last} lies below the segment's base offset {self.base}; "
                f"Kafka's recovery truncates from here",
            )
        else:
            self.add(
                position, "offsets-not-monotonic",
                f"batch ending at offset {last} follows offset {previous}; Kafka's recovery truncates from here",
            )

    def _transactions(self, batch: RecordBatch) -> None:
        ctx = self.ctx
        pid = batch.producer_id
        if batch.is_transactional and not batch.is_control and pid >= 0 and batch.base_offset >= ctx.log_start:
            ctx.txn_live.setdefault(pid, batch.base_offset)
        try:
            end = ctx.tracker.on_batch(batch)
        except KafkalogError as e:
            self.add(batch.position, "invalid-record", f"control batch at offset {batch.base_offset}: {e.reason}")
            return
        if end is not None:
            self.txn_ends.append(end)
            self.txn_live_first[end.marker_offset] = ctx.txn_live.pop(end.producer_id, None)

    def _epoch(self, batch: RecordBatch) -> None:
        ctx = self.ctx
        if not ctx.epochs or ctx.legacy_seen:
            return
        epoch = batch.partition_leader_epoch
        base = batch.base_offset
        if epoch < 0 or base < ctx.epoch_from:
            return
        i = bisect.bisect_right(ctx.epoch_starts, base) - 1
        expected = ctx.epochs[i].epoch if i >= 0 else None
        if expected != epoch:
            ctx.epoch_mismatches += 1
            if ctx.epoch_first is None:
                ctx.epoch_first = (
                    f"the batch at offset {base} ({self.path.name}, position {batch.position}) has leader epoch {epoch}, "
                    f"the checkpoint says {expected}"
                )

    def _check_txn_index(self, damaged: bool) -> None:
        path = _sibling(self.path, TXN_INDEX_SUFFIX)
        name = str(path)
        try:
            entries = read_txn_index(path, self.problems, self.base) if path.exists() else []
        except OSError as e:
            self.problems.add(name, None, "unreadable", f"cannot read the transaction index: {e.strerror or e}")
            return
        self.aborted = len(entries) if path.exists() else None
        by_last = {txn.last_offset: (i, txn) for i, txn in entries}
        for end in self.txn_ends:
            self._check_marker(end, by_last.pop(end.marker_offset, None), path)
        self._check_unclaimed(by_last, damaged, name)

    def _check_marker(self, end: TxnEnd, found: tuple[int, AbortedTxn] | None, path: Location) -> None:
        """Check the ``.txnindex`` entry (``found``, or None) naming the marker ``end``'s offset."""
        name = str(path)
        if end.control_type is ControlRecordType.COMMIT:
            if found is not None:
                i, txn = found
                self.problems.add(
                    name, i, "txnindex-mismatch",
                    f"entry {i} (producer {txn.producer_id}, offsets {txn.first_offset}..{txn.last_offset}) names a "
                    f"COMMIT marker as an aborted transaction",
                )
            return
        # A transaction that began below the log start offset: recovery rebuilds producer
        # state from the log start (Kafka's truncateAndReload drops the snapshots at or below
        # it), so it indexes the transaction from its first batch in the replayed segments,
        # or not at all when none is at or after the log start (no consumer can read those).
        live = self.txn_live_first.get(end.marker_offset)
        began_below_start = end.first_offset is not None and end.first_offset < self.ctx.log_start
        if found is None:
            # Without a batch of the transaction seen, Kafka writes no entry either (an empty
            # transaction, or one whose batches the cleaner removed); with one, it does.
            if end.first_offset is not None and not (began_below_start and live is None):
                missing = "" if self.aborted is not None else f"there is no {path.name}: "
                self.problems.add(
                    name, None, "txnindex-mismatch",
                    f"{missing}no entry for the transaction of producer {end.producer_id} aborted at offset "
                    f"{end.marker_offset} (its data starts at offset {end.first_offset}): read_committed "
                    f"consumers would see its records",
                )
            return
        i, txn = found
        if txn.producer_id != end.producer_id:
            self.problems.add(
                name, i, "txnindex-mismatch",
                f"entry {i} names producer {txn.producer_id} for the ABORT marker of producer {end.producer_id} at "
                f"offset {end.marker_offset}",
            )
            return
        if end.first_offset is None:
            return
        if began_below_start and end.first_offset <= txn.first_offset <= (end.marker_offset if live is None else live):
            return
        if end.first_offset < txn.first_offset:
            self.problems.add(
                name, i, "txnindex-mismatch",
                f"entry {i} says the transaction of producer {txn.producer_id} aborted at offset {txn.last_offset} "
                f"began at offset {txn.first_offset}, but it has a batch at offset {end.first_offset}",
            )
        elif end.first_offset > txn.first_offset and txn.first_offset >= (self.ctx.start or 0):
            self.problems.add(
                name, i, "txnindex-mismatch",
                f"entry {i} says the transaction of producer {txn.producer_id} aborted at offset {txn.last_offset} "
                f"began at offset {txn.first_offset}; its first batch here is at offset {end.first_offset} (the "
                f"cleaner may have removed the others)",
                "warning",
            )
        elif self.ctx.txn_exact and end.last_stable_offset != txn.last_stable_offset:
            self.problems.add(
                name, i, "txnindex-mismatch",
                f"entry {i} has last stable offset {txn.last_stable_offset}; the transactions open when it aborted "
                f"give {end.last_stable_offset}",
                "warning",
            )

    def _check_unclaimed(self, by_last: dict[int, tuple[int, AbortedTxn]], damaged: bool, name: str) -> None:
        """Report the ``.txnindex`` entries no ABORT marker claimed."""
        beyond = []
        last_valid = -1 if self.last is None else self.last
        for i, txn in sorted(by_last.values()):
            if damaged and txn.last_offset > last_valid:
                beyond.append(i)  # its marker may be in the damaged bytes
                continue
            self.problems.add(
                name, i, "txnindex-mismatch",
                f"entry {i} (producer {txn.producer_id}, offsets {txn.first_offset}..{txn.last_offset}): no ABORT marker "
                f"of that producer at offset {txn.last_offset}",
            )
        if beyond:
            self.problems.add(
                name, beyond[0], "txnindex-mismatch",
                f"{entries_text(len(beyond))} from entry {beyond[0]} on name offsets past the last valid batch; Kafka's "
                f"recovery rebuilds the index",
                "warning",
            )


def check_segment(log_path: Location, deep: bool, check_indexes: bool, progress: Progress | None, ctx: PartitionContext | None) -> SegmentReport:
    scan = _SegmentScan(log_path, deep=deep, check_indexes=check_indexes, progress=progress, context=ctx)
    if scan.ctx.start is None:
        scan.ctx.start = scan.base
        scan.ctx.txn_exact = scan.base == 0
    try:
        return scan.run()
    finally:
        scan.close()


def verify_segment(
    log_path: str | os.PathLike,
    *,
    deep: bool = False,
    check_indexes: bool = True,
    progress: Progress | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> SegmentReport:
    """Check one ``.log`` file and (with ``check_indexes``) its ``.index``, ``.timeindex`` and
    ``.txnindex`` siblings, read-only. A remote ``log_path`` (``s3://...``) is read in place:
    the indexes whole, the ``.log`` by ranged requests (each byte once); its report names the
    remote files.

    Every batch's framing, CRC and header are checked; offsets must increase from the base
    offset (the file name); each index entry is checked against the batches (module
    docstring). With ``deep`` every record is decoded too (and tombstones counted). A
    transaction that began before this segment is unknown here; :func:`verify_path` on the
    partition directory follows transactions across segments.

    Args:
        log_path: the ``.log`` (also ``.log.swap`` and the like: the siblings carry the suffix).
        deep: decode every record.
        check_indexes: check the index files too.
        progress: told how many more bytes were read, about every MiB.
        storage_options: fsspec's options for a remote ``log_path``.

    Returns:
        The report; problems are in it, not raised.

    Raises:
        KafkalogError: the file is not named after an offset, or nothing is at a URL.
        OSError: the ``.log`` cannot be opened (missing, unreadable).
    """
    path = Location.of(log_path, storage_options)
    if path.is_remote and not path.is_file():
        raise KafkalogError("No such file", file=str(path))
    return check_segment(path, deep, check_indexes, progress, None)
