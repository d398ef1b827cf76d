"""Log compaction: Kafka's log cleaner, with its rules, its swap protocol and its 24-byte slots.

Three parts, as in Kafka:

- :class:`OffsetMap` (Kafka's ``SkimpyOffsetMap``): fixed memory, open addressing, a 16-byte
  MD5 digest of the key and an 8-byte offset per slot, in one numpy array.
- :class:`Cleaner` (Kafka's ``Cleaner``): pure; everything it needs -- the map, an I/O
  :class:`Throttler`, a clock, an abort check -- is passed in. One pass maps the dirty range
  (latest offset per key; aborted transactions and control batches skipped), then rewrites the
  log from its start to the end of what was mapped, group by group, through
  :func:`kafkalog.records.filter_to`, and swaps each group's ``.cleaned`` segment in with
  :meth:`kafkalog.log.Log.replace_segments`.
- :class:`LogCleaner` (Kafka's ``LogCleaner`` + ``LogCleanerManager``): chooses the work
  (dirty ratio, compaction lags, first uncleanable offset, filthiest log first, the
  ``cleaner-offset-checkpoint``), runs once (:meth:`LogCleaner.clean`) or as a background thread
  over many logs, and sets aside a log whose cleaning failed (uncleanable, with the reason)
  while it carries on with the others.

The rules, each from Kafka's cleaner (comments name them where the code applies them):

- A keyed record stays if its offset is at least the map's offset for its key; records past the
  mapped range stay; records without a key go.
- Tombstones (null values): a v2 batch gets a delete horizon (now + ``delete.retention.ms``) the
  first time a pass keeps a tombstone in it; a later pass after the horizon removes them.
  v0/v1 tombstones stay while their segment's mtime is within ``delete.retention.ms`` of the
  last cleaned segment's mtime (Kafka's legacy rule).
- Transactions: nothing at or past the last stable offset is cleaned; aborted data goes; a
  marker goes once its transaction has no data left and its own horizon has passed; aborted
  transactions that still have data are written to the new ``.txnindex``.
- Producer state: the batch holding an active producer's last data offset (or, with no data,
  its last marker) is kept, as an empty header if need be, and so is the last batch of a pass.

Where Kafka has had bugs, the behaviour here is Kafka's corrected one: tombstones get their
horizon from the pass that first keeps them (KIP-534), markers are never keyed into the map,
aborted transactions are collected over whole segments so a partial pass keeps their index
entries, and an emptied v0/v1 batch is dropped rather than failing the log.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import logging
import math
import os
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

from .errors import InvalidConfigError, KafkalogError, LogCleaningAbortedError
from .index import AbortedTxn
from .log import Log
from .producer_state import LastRecord
from .record import MAGIC_V2, ControlRecordType, Record, RecordBatch
from .records import BatchRetention, MemoryRecords, RecordFilter, filter_to
from .segment import LogSegment

_log = logging.getLogger("kafkalog.cleaner")

# Kafka's broker defaults (log.cleaner.*).
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_IO_BUFFER_SIZE = 512 * 1024
DEFAULT_LOAD_FACTOR = 0.9
DEFAULT_BACKOFF_MS = 15_000

_DIGEST = struct.Struct("<QQ")
_WINDOW = struct.Struct(">I")
_INT32_MAX = 2**31 - 1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ----------------------------------------------------------------------------------------------
# The offset map


class OffsetMap:
    """Key digest -> offset in fixed memory (Kafka's ``SkimpyOffsetMap``).

    ``memory // 24`` slots of a 16-byte MD5 digest and an 8-byte offset in one numpy array;
    open addressing with Kafka's probe sequence (successive 4-byte windows of the digest, then
    linear). Keys are never stored, only digests, so two keys with one digest share a slot
    (MD5's 128 bits make that a practical impossibility, as Kafka relies on too).

    Not thread-safe: one cleaner owns it.
    """

    BYTES_PER_ENTRY = 24

    def __init__(self, memory: int) -> None:
        slots = memory // self.BYTES_PER_ENTRY
        if slots < 1:
            raise InvalidConfigError(f"an offset map of {memory} bytes holds no {self.BYTES_PER_ENTRY}-byte slot")
        self._slots = slots
        self._table = np.zeros(slots * 3, dtype=np.uint64)  # (digest lo, digest hi, offset) per slot
        self._cells = memoryview(self._table)  # Python-int access, no numpy scalar per probe
        self._entries = 0
        self._lookups = 0
        self._probes = 0
        self._latest = -1
        self._dirty = False

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def memory(self) -> int:
        """Bytes the slots take (``slots * 24``)."""
        return self._table.nbytes

    @property
    def size(self) -> int:
        """Keys in the map."""
        return self._entries

    @property
    def latest_offset(self) -> int:
        """The last offset put (or set by :meth:`update_latest_offset`); -1 when cleared."""
        return self._latest

    @property
    def utilization(self) -> float:
        return self._entries / self._slots

    @property
    def collision_rate(self) -> float:
        """Extra probes per lookup."""
        return (self._probes - self._lookups) / self._lookups if self._lookups else 0.0

    @staticmethod
    def digest(key: bytes | bytearray | memoryview) -> bytes:
        return hashlib.md5(key).digest()

    def _find(self, digest: bytes) -> tuple[int, bool]:
        """(cell index of the slot, whether it holds ``digest``); the slot is empty if not."""
        lo, hi = _DIGEST.unpack(digest)
        if lo == 0 and hi == 0:  # the empty marker: nudge the one digest that collides with it
            lo = 1
        cells, slots = self._cells, self._slots
        self._lookups += 1
        attempt = 0
        while True:
            # Kafka's positionOf: the 4-byte window at min(attempt, 12), plus the attempts past 12.
            if attempt <= 12:
                probe = _WINDOW.unpack_from(digest, attempt)[0]
            else:
                probe = _WINDOW.unpack_from(digest, 12)[0] + attempt - 12
            cell = (probe % slots) * 3
            self._probes += 1
            a, b = cells[cell], cells[cell + 1]
            if a == lo and b == hi:
                return cell, True
            if a == 0 and b == 0:
                return cell, False
            attempt += 1
            if attempt > slots + 12:  # only a full map gets here (put refuses to fill it)
                return -1, False

    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        """Map ``key`` to ``offset`` (a later put for the key overwrites)."""
        self.put_digest(hashlib.md5(key).digest(), offset)

    def put_digest(self, digest: bytes, offset: int) -> None:
        cell, found = self._find(digest)
        if not found:
            if self._entries >= self._slots or cell < 0:
                raise OverflowError(f"the offset map is full ({self._entries} of {self._slots} slots)")
            lo, hi = _DIGEST.unpack(digest)
            self._cells[cell] = lo or (1 if hi == 0 else 0)
            self._cells[cell + 1] = hi
            self._entries += 1
        self._cells[cell + 2] = offset
        self._latest = offset
        self._dirty = True

    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The offset mapped for ``key``, or -1."""
        return self.get_digest(hashlib.md5(key).digest())

    def get_digest(self, digest: bytes) -> int:
        cell, found = self._find(digest)
        return self._cells[cell + 2] if found else -1

    def update_latest_offset(self, offset: int) -> None:
        self._latest = offset

    def clear(self) -> None:
        if self._dirty:
            self._table.fill(0)
            self._dirty = False
        self._entries = self._lookups = self._probes = 0
        self._latest = -1


# ----------------------------------------------------------------------------------------------
# Throttling, statistics, progress


class Throttler:
    """Keeps the cleaner's I/O under ``bytes_per_second`` (Kafka's ``Throttler``: measure over
    ``check_interval_ms`` windows, sleep off any excess)."""

    def __init__(
        self,
        bytes_per_second: float = math.inf,
        *,
        check_interval_ms: int = 300,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not bytes_per_second > 0:
            raise InvalidConfigError(f"an I/O budget must be positive, not {bytes_per_second} bytes/s")
        self.bytes_per_second = bytes_per_second
        self._interval = check_interval_ms / 1000.0
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = monotonic()
        self._observed = 0
        self.slept_s = 0.0

    def maybe_throttle(self, observed: int) -> float:
        """Count ``observed`` bytes; sleep if the window's rate is over budget. Returns the
        seconds slept."""
        if math.isinf(self.bytes_per_second):
            return 0.0
        with self._lock:
            self._observed += observed
            now = self._monotonic()
            elapsed = now - self._period_start
            if elapsed <= self._interval or self._observed <= 0:
                return 0.0
            slept = 0.0
            if self._observed / elapsed > self.bytes_per_second:
                slept = self._observed / self.bytes_per_second - elapsed
                if slept > 0:
                    self._sleep(slept)
                    self.slept_s += slept
                else:
                    slept = 0.0
            self._period_start = self._monotonic()
            self._observed = 0
            return slept


#: Why records go: an older record of a key mapped later; a tombstone past its horizon (or, for
#: v0/v1, past the segment-time rule); a record without a key; data of an aborted transaction;
#: a transaction marker whose transaction has no data left and whose horizon has passed.
REASONS = ("superseded", "tombstone", "keyless", "aborted", "marker")


@dataclass
class SegmentCleanStats:
    """What a pass did to one source segment."""

    base_offset: int
    size: int
    records_read: int = 0
    records_kept: int = 0
    bytes_kept: int = 0
    removed: dict[str, int] = field(default_factory=dict)


@dataclass
class CleanerStats:
    """What one cleaning of one log did (Kafka's ``CleanerStats``, plus counts it logs).

    ``removed`` counts records removed by reason (:data:`REASONS`), ``segments`` has the same per
    source segment, and ``removed_by_key`` (only when asked for: it grows with the keys) the
    superseded and expired records per key. With ``dry_run`` nothing was written.
    """

    log: str = ""
    dry_run: bool = False
    first_dirty_offset: int = -1
    end_offset: int = -1
    rounds: int = 0
    map_bytes_read: int = 0
    map_records_read: int = 0
    map_entries: int = 0
    map_slots: int = 0
    buffer_utilization: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    keyless_records: int = 0
    tombstones_removed: int = 0
    batches_rewritten: int = 0
    empty_batches: int = 0
    horizons_set: int = 0
    segments_cleaned: int = 0
    groups: int = 0
    throttled_s: float = 0.0
    map_s: float = 0.0
    elapsed_s: float = 0.0
    removed: dict[str, int] = field(default_factory=dict)
    segments: list[SegmentCleanStats] = field(default_factory=list)
    removed_by_key: dict[bytes, int] | None = None

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_written

    def add(self, other: CleanerStats) -> None:
        """Fold another round's figures into these."""
        for name in (
            "map_bytes_read", "map_records_read", "bytes_read", "bytes_written", "records_read", "records_written",
            "keyless_records", "tombstones_removed", "batches_rewritten", "empty_batches", "horizons_set",
            "segments_cleaned", "groups", "rounds", "throttled_s", "map_s", "elapsed_s",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for reason, n in other.removed.items():
            self.removed[reason] = self.removed.get(reason, 0) + n
        self.segments.extend(other.segments)
        if other.removed_by_key is not None:
            merged = Counter(self.removed_by_key or {})
            merged.update(other.removed_by_key)
            self.removed_by_key = dict(merged)
        self.end_offset = other.end_offset
        self.map_entries = max(self.map_entries, other.map_entries)
        self.map_slots = other.map_slots
        self.buffer_utilization = max(self.buffer_utilization, other.buffer_utilization)

    def to_dict(self) -> dict:
        """JSON-safe (keys of ``removed_by_key`` as hex)."""
        by_key = self.removed_by_key
        self.removed_by_key = None
        try:
            d = asdict(self)
        finally:
            self.removed_by_key = by_key
        d["records_removed"] = self.records_removed
        d["removed_by_key"] = None if by_key is None else {k.hex(): n for k, n in by_key.items()}
        return d

    def summary(self) -> str:
        """Kafka's cleaner log lines, in short."""
        mb = 1024 * 1024
        el = max(self.elapsed_s, 1e-9)
        mapping = max(self.map_s, 1e-9)
        cleaning = max(self.elapsed_s - self.map_s, 1e-9)
        return (
            f"Log cleaner: cleaned log {self.log} (dirty section = [{self.first_dirty_offset}, {self.end_offset}))\n"
            f"\t{self.bytes_read / mb:,.1f} MB of log processed in {el:,.1f} seconds ({self.bytes_read / mb / el:,.1f} MB/sec).\n"
            f"\tIndexed {self.map_bytes_read / mb:,.1f} MB in {mapping:.1f} seconds ({self.map_bytes_read / mb / mapping:,.1f} MB/sec, "
            f"{100 * self.map_s / el:.1f}% of total time)\n"
            f"\tBuffer utilization: {100 * self.buffer_utilization:.1f}%\n"
            f"\tCleaned {self.bytes_read / mb:,.1f} MB in {cleaning:.1f} seconds ({self.bytes_read / mb / cleaning:,.1f} MB/sec)\n"
            f"\tStart size: {self.bytes_read / mb:,.1f} MB ({self.records_read:,d} messages)\n"
            f"\tEnd size: {self.bytes_written / mb:,.1f} MB ({self.records_written:,d} messages)\n"
            f"\t{100 * (1 - self.bytes_written / max(self.bytes_read, 1)):.1f}% size reduction "
            f"({100 * (1 - self.records_written / max(self.records_read, 1)):.1f}% fewer messages)"
        )


@dataclass(frozen=True)
class CleanerProgress:
    """Where a cleaning stands: ``phase`` is ``"map"`` (building the offset map) or ``"clean"``
    (rewriting); ``done`` of ``total`` bytes of that phase."""

    log: str
    phase: str
    done: int
    total: int


# ----------------------------------------------------------------------------------------------
# Choosing work (Kafka's LogCleanerManager)


def _segments_in(log: Log, from_offset: int, to_offset: int) -> list[LogSegment]:
    """Kafka's ``logSegments(from, to)``: the segment holding ``from_offset`` and those after
    it that start before ``to_offset``."""
    segments = log.segments
    bases = [s.base_offset for s in segments]
    lo = max(0, bisect.bisect_right(bases, from_offset) - 1)
    hi = bisect.bisect_left(bases, to_offset)
    return segments[lo:hi]


def _non_active_segments_from(log: Log, offset: int) -> list[LogSegment]:
    active = log.active_segment
    if offset > active.base_offset:
        return []
    return _segments_in(log, offset, active.base_offset)


def _first_batch_timestamp(segment: LogSegment) -> int:
    """The first batch's max timestamp (Kafka's ``getFirstBatchTimestamp``); max int64 when empty."""
    for batch in segment.log.batches():
        return batch.max_timestamp
    return 2**63 - 1


def cleanable_offsets(log: Log, last_clean_offset: int | None, now_ms: int) -> tuple[int, int, bool]:
    """``(first dirty offset, first uncleanable offset, checkpoint needs resetting)`` (Kafka's
    ``cleanableOffsets``). A checkpoint below the log start or past the log end resets to the
    log start. Cleaning stops at the earliest of the last stable offset, the active segment and
    the first segment within ``min.compaction.lag.ms`` of now."""
    log_start = log.log_start_offset
    checkpointed = log_start if last_clean_offset is None else last_clean_offset
    if checkpointed < log_start:
        first_dirty, reset = log_start, True
    elif checkpointed > log.log_end_offset:
        _log.warning(
            "the checkpointed dirty offset %d of %s is past its log end %d; resetting to the log start %d",
            checkpointed, log.directory.name, log.log_end_offset, log_start,
        )  # fmt: skip
        first_dirty, reset = log_start, True
    else:
        first_dirty, reset = checkpointed, False
    candidates = [log.last_stable_offset, log.active_segment.base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in _non_active_segments_from(log, first_dirty):
            if segment.largest_timestamp > now_ms - lag:
                candidates.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates)), reset


def max_compaction_delay(log: Log, first_dirty_offset: int, now_ms: int) -> int:
    """How far past ``max.compaction.lag.ms`` the oldest dirty segment is (0 when not):
    positive means the log must be cleaned now, whatever its dirty ratio."""
    stamps = [t for t in (_first_batch_timestamp(s) for s in _non_active_segments_from(log, first_dirty_offset)) if t > 0]
    earliest = min(stamps, default=2**63 - 1)
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


@dataclass
class LogToClean:
    """A log and the part of it a pass may clean (Kafka's ``LogToClean``)."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False
    horizon_due: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @classmethod
    def of(cls, log: Log, first_dirty: int, uncleanable: int, need_compaction_now: bool = False) -> LogToClean:
        # Kafka's calculateCleanableBytes: cleaning stops at a segment boundary.
        non_active = _non_active_segments_from(log, uncleanable)
        first_uncleanable = (non_active[0] if non_active else log.active_segment).base_offset
        cleanable = sum(s.size for s in _segments_in(log, min(first_dirty, first_uncleanable), first_uncleanable))
        clean = sum(s.size for s in _segments_in(log, -1, first_dirty))
        return cls(log, first_dirty, first_uncleanable, clean, cleanable, need_compaction_now)


def group_segments_by_size(
    segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[LogSegment]]:
    """Consecutive segments grouped so each group's log, offset index and time index sizes stay
    within the limits and its offsets within one segment's int32 range (Kafka's
    ``groupSegmentsBySize``); each group is rewritten into one segment."""
    groups: list[list[LogSegment]] = []
    i, n = 0, len(segments)
    while i < n:
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.size_in_bytes
        time_size = segments[i].time_index.size_in_bytes
        i += 1
        while i < n:
            seg = segments[i]
            # The last offset of seg, bounded by the next segment's base (or the uncleanable offset).
            last = segments[i + 1].base_offset - 1 if i + 1 < n else first_uncleanable_offset - 1
            if not (
                log_size + seg.size <= max_size
                and index_size + seg.offset_index.size_in_bytes <= max_index_size
                and time_size + seg.time_index.size_in_bytes <= max_index_size
                and (seg.size == 0 or last - group[-1].base_offset <= _INT32_MAX)
            ):
                break
            group.append(seg)
            log_size += seg.size
            index_size += seg.offset_index.size_in_bytes
            time_size += seg.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


# ----------------------------------------------------------------------------------------------
# Transactions while cleaning (Kafka's CleanedTransactionMetadata)


class _AbortedTxnState:
    __slots__ = ("txn", "last_observed_batch_offset")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset: int | None = None


class _TransactionMetadata:
    """Which transactions are open as a pass walks the log, to drop aborted data and to know
    when a marker may go; writes the aborted transactions that keep data to ``cleaned_index``."""

    def __init__(self) -> None:
        self._committed: set[int] = set()
        self._aborted: dict[int, _AbortedTxnState] = {}
        self._pending: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._seq = 0
        self.cleaned_segment: LogSegment | None = None

    def add_aborted(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self._pending, (txn.first_offset, self._seq, txn))
            self._seq += 1

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            txn = heapq.heappop(pending)[2]
            self._aborted.setdefault(txn.producer_id, _AbortedTxnState(txn))

    def on_control_batch(self, batch: RecordBatch, records: Sequence[Record]) -> bool:
        """Whether the marker may be discarded (its transaction has no data left)."""
        self._consume_up_to(batch.last_offset)
        if not records:
            return True  # an empty control batch was already cleaned
        pid = batch.producer_id
        control = records[0].control_type
        if control is ControlRecordType.ABORT:
            state = self._aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset is not None:
                # The transaction still has data here: keep its marker and its index entry.
                if self.cleaned_segment is not None:
                    self.cleaned_segment.txn_index.append(state.txn)
                return False
            return True
        if control is ControlRecordType.COMMIT:
            # Discardable if no batch of the transaction was seen (its data is gone).
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False

    def on_batch(self, batch: RecordBatch) -> bool:
        """Whether the data batch belongs to an aborted transaction."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        state = self._aborted.get(batch.producer_id)
        if state is not None:
            state.last_observed_batch_offset = batch.last_offset
            return True
        self._committed.add(batch.producer_id)
        return False


# ----------------------------------------------------------------------------------------------
# The cleaner


class _Filter(RecordFilter):
    """Kafka's ``logCleanerFilter`` for one source segment."""

    def __init__(
        self,
        now_ms: int,
        delete_retention_ms: int,
        offset_map: OffsetMap,
        retain_legacy_deletes: bool,
        txns: _TransactionMetadata,
        last_records: dict[int, LastRecord],
        upper_bound_offset: int,
    ) -> None:
        super().__init__(now_ms, delete_retention_ms)
        self.map = offset_map
        self.retain_legacy_deletes = retain_legacy_deletes
        self.txns = txns
        self.last_records = last_records
        self.upper_bound_offset = upper_bound_offset
        self.discard_records = False
        self.removed: Counter[str] = Counter()
        self.by_key: Counter[bytes] | None = None

    def check_batch_retention(self, batch: RecordBatch) -> tuple[BatchRetention, bool]:
        # Markers piggy-back on the tombstone horizon: never removed before their transaction's
        # data is gone, then only once their own horizon has passed.
        if batch.is_control:
            can_discard = self.txns.on_control_batch(batch, batch.records())
            horizon = batch.delete_horizon_ms
            self.discard_records = can_discard and horizon is not None and horizon <= self.current_time
        else:
            can_discard = self.txns.on_batch(batch)
            self.discard_records = can_discard
        if batch.producer_id >= 0 and self._is_last_batch_of_producer(batch):
            retention = BatchRetention.RETAIN_EMPTY  # keeps the producer's sequence / epoch state
        elif batch.next_offset == self.upper_bound_offset:
            retention = BatchRetention.RETAIN_EMPTY  # the pass's last offset must stay in the log
        elif self.discard_records:
            retention = BatchRetention.DELETE
            # Not decoded: a v2 batch (the only kind with transactions) knows its count.
            self.removed["marker" if batch.is_control else "aborted"] += batch.count or 0
        else:
            retention = BatchRetention.DELETE_EMPTY
        return retention, can_discard and batch.is_control

    def _is_last_batch_of_producer(self, batch: RecordBatch) -> bool:
        last = self.last_records.get(batch.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return batch.last_offset == last.last_data_offset
        return batch.is_control and batch.producer_epoch == last.producer_epoch

    def retain(self, batch: RecordBatch, records: Sequence[Record]) -> list[bool]:
        if self.discard_records:
            self.removed["marker" if batch.is_control else "aborted"] += len(records)
            return [False] * len(records)
        if batch.is_control:
            return [True] * len(records)
        latest = self.map.latest_offset
        get = self.map.get_digest
        md5 = hashlib.md5
        now = self.current_time
        if batch.magic >= MAGIC_V2:
            horizon = batch.delete_horizon_ms
            retain_deletes = horizon is None or now < horizon
        else:
            retain_deletes = self.retain_legacy_deletes
        flags = []
        removed = self.removed
        by_key = self.by_key
        for record in records:
            offset = record.offset
            if offset > latest:  # past what this pass mapped
                flags.append(True)
                continue
            key = record.key
            if key is None:
                removed["keyless"] += 1
                flags.append(False)
                continue
            if offset < get(md5(key).digest()):
                removed["superseded"] += 1
            elif record.value is None and not retain_deletes:
                removed["tombstone"] += 1
            else:
                flags.append(True)
                continue
            flags.append(False)
            if by_key is not None:
                by_key[key] += 1
        return flags


class Cleaner:
    """One cleaner (Kafka's ``Cleaner``): maps the dirty range of a log and rewrites the log up
    to the end of what it mapped. Pure: the offset map, throttler, clock and abort check are
    given; it keeps no state between passes.

    Args:
        offset_map: the map (cleared at the start of each pass).
        io_buffer_size: about how many bytes are read, filtered and written at a time.
        load_factor: how full the map may get (Kafka's ``log.cleaner.io.buffer.load.factor``).
        throttler: the I/O budget shared by reads and writes.
        clock: epoch ms, for delete horizons and segment times.
        check_done: called often with the log; raise
            :class:`~kafkalog.errors.LogCleaningAbortedError` in it to stop the pass.
        progress: called with a :class:`CleanerProgress` after each chunk.
    """

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE // 2,
        load_factor: float = DEFAULT_LOAD_FACTOR,
        throttler: Throttler | None = None,
        clock: Callable[[], int] | None = None,
        check_done: Callable[[Log], None] | None = None,
        progress: Callable[[CleanerProgress], None] | None = None,
    ) -> None:
        if not 0 < load_factor <= 1:
            raise InvalidConfigError(f"the offset map load factor must be in (0, 1], not {load_factor}")
        if offset_map.slots * load_factor <= 1:
            raise InvalidConfigError(
                "the offset map is too small to hold even one key, so cleaning would never progress; "
                "raise the dedupe buffer size"
            )
        self.offset_map = offset_map
        self.io_buffer_size = max(io_buffer_size, 1024)
        self.load_factor = load_factor
        self.throttler = throttler or Throttler()
        self.clock = clock or _now_ms
        self.check_done = check_done or (lambda log: None)
        self.progress = progress

    # -- one pass ---------------------------------------------------------------------------

    def clean(
        self, cleanable: LogToClean, now_ms: int | None = None, *, dry_run: bool = False, count_keys: bool = False
    ) -> tuple[int, CleanerStats]:
        """Clean ``cleanable.log`` once; return the first offset not cleaned and the figures.
        With ``dry_run`` everything is decided and counted but nothing is written; with
        ``count_keys`` removals are also counted per key."""
        now = self.clock() if now_ms is None else now_ms
        log = cleanable.log
        stats = CleanerStats(
            log=log.directory.name, first_dirty_offset=cleanable.first_dirty_offset, rounds=1, dry_run=dry_run,
            removed_by_key={} if count_keys else None,
        )  # fmt: skip
        started = time.monotonic()
        throttled_before = self.throttler.slept_s
        truncations = log.truncations
        # Kafka: v0/v1 tombstones may go when their segment is older than the last clean
        # segment's mtime minus delete.retention.ms.
        clean_section = _segments_in(log, 0, cleanable.first_dirty_offset)
        legacy_horizon = clean_section[-1].last_modified_ms - log.config.delete_retention_ms if clean_section else 0

        upper = cleanable.first_uncleanable_offset
        self.build_offset_map(log, cleanable.first_dirty_offset, upper, stats)
        if self.offset_map.latest_offset < cleanable.first_dirty_offset - 1:
            # Nothing dirty (a pass for tombstone horizons only): the clean section is still
            # rewritten, its keys each appear once there, so an empty map keeps them all.
            self.offset_map.update_latest_offset(cleanable.first_dirty_offset - 1)
        end_offset = self.offset_map.latest_offset + 1
        stats.map_s = time.monotonic() - started
        stats.map_entries = self.offset_map.size
        stats.map_slots = self.offset_map.slots

        txns = _TransactionMetadata()
        segments = _segments_in(log, 0, end_offset)
        groups = group_segments_by_size(segments, log.config.segment_bytes, log.config.segment_index_bytes, upper)
        total = sum(s.size for s in segments)
        done = 0
        for group in groups:
            done = self.clean_segments(log, group, now, stats, txns, legacy_horizon, upper, truncations, done, total)
        stats.groups = len(groups)
        stats.keyless_records = stats.removed.get("keyless", 0)
        stats.tombstones_removed = stats.removed.get("tombstone", 0)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end_offset = end_offset
        stats.throttled_s = self.throttler.slept_s - throttled_before
        stats.elapsed_s = time.monotonic() - started
        return end_offset, stats

    def clean_segments(
        self,
        log: Log,
        segments: list[LogSegment],
        now_ms: int,
        stats: CleanerStats,
        txns: _TransactionMetadata,
        legacy_horizon_ms: int,
        upper_bound_offset: int,
        truncations: int,
        done: int = 0,
        total: int = 0,
    ) -> int:
        """Rewrite one group of segments into a ``.cleaned`` segment and swap it in (in a dry
        run, only count)."""
        cleaned = None if stats.dry_run else log.create_cleaned_segment(segments[0].base_offset)
        txns.cleaned_segment = cleaned
        try:
            last_records = log.last_records_of_active_producers()
            for i, segment in enumerate(segments):
                # Aborted transactions over the whole segment, so the new index is complete.
                upper = segments[i + 1].base_offset if i + 1 < len(segments) else segment.next_offset
                txns.add_aborted(log.collect_aborted_transactions(segment.base_offset, upper))
                retain_legacy = segment.last_modified_ms > legacy_horizon_ms
                self.clean_into(
                    log, segment, cleaned, now_ms, retain_legacy, txns, last_records, upper_bound_offset, stats,
                    done, total,
                )  # fmt: skip
                done += segment.size
            if cleaned is not None:
                cleaned.on_become_inactive()
                cleaned.flush()
                # The new segment keeps the mtime of the last one it replaces (retention and the
                # legacy tombstone rule read it).
                mtime_ns = os.stat(segments[-1].log.path).st_mtime_ns
                os.utime(cleaned.log.path, ns=(mtime_ns, mtime_ns))
                self.check_done(log)
                log.replace_segments(cleaned, segments, truncations=truncations)
        except BaseException:
            if cleaned is not None:
                try:
                    cleaned.delete_if_exists()
                except OSError:
                    _log.exception("could not delete the cleaned segment %s", cleaned.log.path)
            raise
        stats.segments_cleaned += len(segments)
        return done

    def clean_into(
        self,
        log: Log,
        source: LogSegment,
        dest: LogSegment | None,
        now_ms: int,
        retain_legacy_deletes: bool,
        txns: _TransactionMetadata,
        last_records: dict[int, LastRecord],
        upper_bound_offset: int,
        stats: CleanerStats,
        done: int = 0,
        total: int = 0,
    ) -> None:
        """Copy what the map keeps of ``source`` into ``dest`` (Kafka's ``cleanInto``); with no
        ``dest`` (a dry run) only count."""
        record_filter = _Filter(
            now_ms, log.config.delete_retention_ms, self.offset_map, retain_legacy_deletes, txns, last_records,
            upper_bound_offset,
        )  # fmt: skip
        if stats.removed_by_key is not None:
            record_filter.by_key = Counter()
        seg = SegmentCleanStats(source.base_offset, source.size)
        out = bytearray()
        for chunk in self._chunks(log, source, 0):
            self.check_done(log)
            out.clear()
            result = filter_to(chunk, record_filter, out)
            self.throttler.maybe_throttle(result.bytes_read)
            stats.bytes_read += result.bytes_read
            stats.records_read += result.records_read
            stats.records_written += result.records_retained
            stats.bytes_written += result.bytes_retained
            stats.batches_rewritten += result.batches_rewritten
            stats.empty_batches += result.empty_batches
            stats.horizons_set += result.horizons_set
            seg.records_kept += result.records_retained
            seg.bytes_kept += result.bytes_retained
            if out and dest is not None:
                view = memoryview(out)
                for kept in result.retained:
                    dest.append(
                        MemoryRecords(view[kept.position : kept.position + kept.size]),
                        largest_offset=kept.max_offset,
                        largest_timestamp=kept.max_timestamp,
                        offset_of_max_timestamp=kept.shallow_offset_of_max_timestamp,
                    )
                view.release()
                self.throttler.maybe_throttle(len(out))
            done += result.bytes_read
            if self.progress is not None:
                self.progress(CleanerProgress(log.directory.name, "clean", done, total))
        seg.removed = dict(record_filter.removed)
        seg.records_read = seg.records_kept + sum(seg.removed.values())
        stats.segments.append(seg)
        for reason, n in seg.removed.items():
            stats.removed[reason] = stats.removed.get(reason, 0) + n
        if record_filter.by_key:
            merged = Counter(stats.removed_by_key)
            merged.update(record_filter.by_key)
            stats.removed_by_key = dict(merged)

    # -- the offset map ---------------------------------------------------------------------

    def build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        """Map the latest offset of every key in ``[start, end)`` until the map reaches its load
        factor (Kafka's ``buildOffsetMap``); the map's latest offset says where that was."""
        offset_map = self.offset_map
        offset_map.clear()
        dirty = _segments_in(log, start, end)
        txns = _TransactionMetadata()
        txns.add_aborted(log.collect_aborted_transactions(start, end))
        total = sum(s.size for s in dirty)
        done = 0
        for i, segment in enumerate(dirty):
            self.check_done(log)
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            full, read = self._map_segment(log, segment, start, next_start, txns, stats, done, total)
            done += read
            if full:
                _log.debug("offset map of %s full in segment %d", log.directory.name, segment.base_offset)
                return

    def _map_segment(
        self,
        log: Log,
        segment: LogSegment,
        start: int,
        next_segment_start: int,
        txns: _TransactionMetadata,
        stats: CleanerStats,
        done: int,
        total: int,
    ) -> tuple[bool, int]:
        offset_map = self.offset_map
        max_entries = int(offset_map.slots * self.load_factor)
        put = offset_map.put_digest
        md5 = hashlib.md5
        position = segment.offset_index.lookup(start).position
        read = 0
        for chunk in self._chunks(log, segment, position):
            self.check_done(log)
            chunk_bytes = 0
            for batch in chunk:
                chunk_bytes += batch.size_in_bytes
                if batch.is_control:
                    txns.on_control_batch(batch, batch.records())
                    stats.map_records_read += 1
                elif txns.on_batch(batch):
                    stats.map_records_read += batch.count or 0  # aborted: not mapped
                else:
                    records = batch.records()
                    for record in records:
                        key = record.key
                        if key is not None and record.offset >= start:
                            if offset_map.size >= max_entries:
                                stats.map_bytes_read += chunk_bytes
                                return True, read + chunk_bytes
                            put(md5(key).digest(), record.offset)
                    stats.map_records_read += len(records)
                if batch.last_offset >= start:
                    offset_map.update_latest_offset(batch.last_offset)
            self.throttler.maybe_throttle(chunk_bytes)
            stats.map_bytes_read += chunk_bytes
            read += chunk_bytes
            if self.progress is not None:
                self.progress(CleanerProgress(log.directory.name, "map", done + read, total))
        # An offset gap at the segment's end: what was mapped reaches the next segment.
        offset_map.update_latest_offset(next_segment_start - 1)
        return False, read

    def _chunks(self, log: Log, segment: LogSegment, position: int) -> Iterable[list[RecordBatch]]:
        """The segment's batches from ``position``, checked (CRC and structure), in runs of
        about ``io_buffer_size`` bytes. A damaged batch raises with its file and position; the
        log is then set aside as uncleanable rather than rewritten around the damage."""
        chunk: list[RecordBatch] = []
        size = 0
        source = segment.log.slice(position) if position else segment.log
        # Unlike Kafka's fixed buffers (grown up to max.message.bytes, failing the log beyond),
        # a batch of any size the file holds is read whole: a compacted topic may hold batches
        # written before its limit was lowered.
        for batch in source.batches(validate=True, strict=True):
            chunk.append(batch)
            size += batch.size_in_bytes
            if size >= self.io_buffer_size:
                yield chunk
                chunk, size = [], 0
        if chunk:
            yield chunk


# ----------------------------------------------------------------------------------------------
# The shell: run once, or in the background over many logs


class LogCleaner:
    """Compacts logs whose ``cleanup.policy`` includes ``compact`` (Kafka's ``LogCleaner``).

    Run once with :meth:`clean` (this log, now), or add logs and :meth:`start` a background
    thread that cleans the filthiest log whose dirty ratio is over ``min.cleanable.dirty.ratio``
    (or whose ``max.compaction.lag.ms`` has passed, or whose tombstone horizons have) every
    ``backoff_ms`` until :meth:`stop`.

    Args:
        dedupe_buffer_size: bytes for the offset map (Kafka's ``log.cleaner.dedupe.buffer.size``).
        io_buffer_size: bytes of I/O buffers (Kafka's ``log.cleaner.io.buffer.size``; half for
            reading).
        load_factor: how full the offset map may get.
        io_max_bytes_per_second: the I/O budget (Kafka's ``log.cleaner.io.max.bytes.per.second``).
        backoff_ms: the background thread's sleep when nothing is cleanable.
        uncleanable_retry_ms: how long a log whose cleaning failed is left alone before the
            background thread tries it again (:meth:`clean` always tries).
        clock: epoch ms.
        progress: called with a :class:`CleanerProgress` as cleaning goes.
        on_stats: called with the :class:`CleanerStats` of every finished cleaning.
    """

    def __init__(
        self,
        *,
        dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
        load_factor: float = DEFAULT_LOAD_FACTOR,
        io_max_bytes_per_second: float = math.inf,
        backoff_ms: int = DEFAULT_BACKOFF_MS,
        uncleanable_retry_ms: int = 3_600_000,
        clock: Callable[[], int] | None = None,
        progress: Callable[[CleanerProgress], None] | None = None,
        on_stats: Callable[[CleanerStats], None] | None = None,
    ) -> None:
        self.clock = clock or _now_ms
        self.throttler = Throttler(io_max_bytes_per_second)
        self.offset_map = OffsetMap(dedupe_buffer_size)
        self.cleaner = Cleaner(
            self.offset_map,
            io_buffer_size=io_buffer_size // 2,
            load_factor=load_factor,
            throttler=self.throttler,
            clock=self.clock,
            check_done=self._check_done,
            progress=progress,
        )
        self.backoff_ms = backoff_ms
        self.uncleanable_retry_ms = uncleanable_retry_ms
        self.on_stats = on_stats
        self._logs: dict[str, Log] = {}
        self._uncleanable: dict[str, tuple[str, int]] = {}  # directory -> (reason, when)
        self._horizons: dict[str, int | None] = {}  # directory -> earliest horizon not yet acted on
        self._last_pass: dict[str, int] = {}  # directory -> "now" of its last pass
        self._lock = threading.Condition()
        self._in_progress: str | None = None
        self._run_lock = threading.Lock()  # one pass at a time: the map is shared
        self._aborting: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_stats: CleanerStats | None = None

    # -- run once ---------------------------------------------------------------------------

    def clean(
        self, log: Log, now_ms: int | None = None, *, dry_run: bool = False, count_keys: bool = False
    ) -> CleanerStats | None:
        """Compact ``log`` now if anything in it is cleanable: dirty records below its first
        uncleanable offset (whatever the dirty ratio), or batches whose tombstone or marker
        delete horizon has passed. Passes repeat until the dirty range is done (a full offset
        map ends a pass early). Returns the figures, or None when there was nothing to do.

        With ``dry_run`` one pass decides and counts everything (by reason, per segment, and
        with ``count_keys`` per key) but writes nothing: no segment, no checkpoint. Its
        ``end_offset`` below the first uncleanable offset means more passes would follow.

        Raises:
            InvalidConfigError: the log's ``cleanup.policy`` does not include ``compact``.
            LogCleaningAbortedError: the log changed underneath (truncation, retention, close)
                or :meth:`stop` was called; nothing half-done is left.
            KafkalogError, OSError: the log could not be read or written (it is also marked
                uncleanable, with the reason).
        """
        if not log.config.compact:
            raise InvalidConfigError(
                f"cleanup.policy of {log.directory.name} is {','.join(log.config.cleanup_policy)}; it does not include compact",
                file=str(log.directory),
            )
        total: CleanerStats | None = None
        while True:
            now = self.clock() if now_ms is None else now_ms
            ltc = self._to_clean(log, now, write=not dry_run)
            if ltc.cleanable_bytes == 0 and not self._horizon_due(log, ltc, now):
                break
            if total is not None and ltc.first_dirty_offset >= ltc.first_uncleanable_offset:
                break  # a horizon-only pass already ran
            if dry_run:
                with self._run_lock:
                    return self.cleaner.clean(ltc, now, dry_run=True, count_keys=count_keys)[1]
            stats = self._clean_log(ltc, now, count_keys)
            if total is None:
                total = stats
            else:
                total.add(stats)
            if stats.end_offset >= ltc.first_uncleanable_offset or stats.end_offset <= ltc.first_dirty_offset:
                break
        if total is not None:
            self.last_stats = total
        return total

    def _to_clean(self, log: Log, now: int, write: bool = True) -> LogToClean:
        first_dirty, uncleanable, reset = cleanable_offsets(log, log.cleaner_checkpoint, now)
        if reset and write:
            log.checkpoint_cleaner_offset(first_dirty)
        delay = max_compaction_delay(log, first_dirty, now)
        return LogToClean.of(log, first_dirty, uncleanable, delay > 0)

    def _horizon_due(self, log: Log, ltc: LogToClean, now: int) -> bool:
        """Whether a batch in the clean section has a delete horizon that has passed since the
        log's last pass here (one that passed before it was already acted on: the batch is a
        marker whose transaction still has data, and waits for the data to go)."""
        key = str(log.directory)
        last_pass = self._last_pass.get(key, -1)
        if key not in self._horizons:
            earliest = None
            for segment in _segments_in(log, 0, ltc.first_dirty_offset):
                for batch in segment.log.batches():
                    horizon = batch.delete_horizon_ms
                    if horizon is not None and horizon > last_pass and (earliest is None or horizon < earliest):
                        earliest = horizon
            self._horizons[key] = earliest
        earliest = self._horizons[key]
        return earliest is not None and earliest <= now

    def _clean_log(self, ltc: LogToClean, now: int, count_keys: bool = False) -> CleanerStats:
        log = ltc.log
        key = str(log.directory)
        with self._lock:
            while self._in_progress == key:
                self._lock.wait()
            self._in_progress = key
        try:
            with self._run_lock:
                try:
                    end, stats = self.cleaner.clean(ltc, now, count_keys=count_keys)
                except LogCleaningAbortedError:
                    raise
                except (KafkalogError, OSError, ValueError, OverflowError) as e:
                    reason = f"{type(e).__name__}: {e}"
                    _log.warning("marking %s uncleanable: %s", log.directory, reason)
                    with self._lock:
                        self._uncleanable[key] = (reason, self.clock())
                    raise
            log.checkpoint_cleaner_offset(end)
            self._horizons.pop(key, None)  # horizons changed: rescan when next asked
            self._last_pass[key] = now
            with self._lock:
                self._uncleanable.pop(key, None)
            _log.info("%s", stats.summary())
            if self.on_stats is not None:
                self.on_stats(stats)
            return stats
        finally:
            with self._lock:
                self._in_progress = None
                self._aborting.discard(key)
                self._lock.notify_all()

    def _check_done(self, log: Log) -> None:
        if self._stop.is_set() and self._thread is not None:
            raise LogCleaningAbortedError("the cleaner is stopping", file=str(log.directory))
        if str(log.directory) in self._aborting:
            raise LogCleaningAbortedError("cleaning was aborted", file=str(log.directory))
        if log.closed:
            raise LogCleaningAbortedError("the log was closed during cleaning", file=str(log.directory))

    # -- many logs --------------------------------------------------------------------------

    @property
    def uncleanable(self) -> dict[str, str]:
        """Partition directory -> why its last cleaning failed."""
        with self._lock:
            return {k: reason for k, (reason, _) in self._uncleanable.items()}

    def add_log(self, log: Log) -> None:
        """Let the background thread clean ``log`` (when its policy includes compact)."""
        with self._lock:
            self._logs[str(log.directory)] = log

    def remove_log(self, log: Log) -> None:
        """Stop cleaning ``log``: abort a pass in progress on it and wait for it to end."""
        key = str(log.directory)
        with self._lock:
            self._logs.pop(key, None)
            self._uncleanable.pop(key, None)
            self._horizons.pop(key, None)
            self._last_pass.pop(key, None)
            if self._in_progress == key:
                self._aborting.add(key)
                while self._in_progress == key:
                    self._lock.wait()

    def clean_filthiest(self, now_ms: int | None = None) -> CleanerStats | None:
        """One round of the background loop: clean the filthiest cleanable log, if any (Kafka's
        ``grabFilthiestCompactedLog`` + ``cleanLog``)."""
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            logs = [log for key, log in self._logs.items() if not self._is_set_aside(key, now)]
        candidates = []
        for log in logs:
            if log.closed or not log.config.compact:
                continue
            try:
                ltc = self._to_clean(log, now)
                if ltc.total_bytes == 0:
                    continue
                if (
                    (ltc.need_compaction_now and ltc.cleanable_bytes > 0)
                    or ltc.cleanable_ratio > log.config.min_cleanable_dirty_ratio
                    or self._horizon_due(log, ltc, now)
                ):
                    candidates.append(ltc)
            except (KafkalogError, OSError) as e:
                with self._lock:
                    self._uncleanable[str(log.directory)] = (f"{type(e).__name__}: {e}", now)
                _log.warning("marking %s uncleanable: %s", log.directory, e)
        if not candidates:
            return None
        filthiest = max(candidates, key=lambda c: c.cleanable_ratio)
        try:
            return self._clean_log(filthiest, now)
        except LogCleaningAbortedError:
            return None
        except (KafkalogError, OSError, ValueError, OverflowError):
            return None  # recorded as uncleanable; the others carry on

    def _is_set_aside(self, key: str, now: int) -> bool:
        entry = self._uncleanable.get(key)
        if entry is None:
            return False
        if now - entry[1] >= self.uncleanable_retry_ms:
            return False  # time to try again
        return True

    def start(self) -> None:
        """Start the background thread."""
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="kafkalog-cleaner", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the background thread: a pass in progress is aborted (its ``.cleaned`` files
        deleted, the log untouched) and the thread joined."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.clean_filthiest()
            except Exception:  # the thread must survive anything one log throws
                _log.exception("log cleaner round failed")
                cleaned = None
            if cleaned is None:
                self._stop.wait(self.backoff_ms / 1000.0)

    def __enter__(self) -> LogCleaner:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
