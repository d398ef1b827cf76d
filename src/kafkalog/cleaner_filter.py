"""What a cleaning pass keeps: Kafka's ``logCleanerFilter`` (the record filter handed to
:func:`kafkalog.memory_records.filter_to` for each source segment) and its
``CleanedTransactionMetadata`` (which transactions are open as the pass walks the log).

The rules are listed in :mod:`kafkalog.cleaner`'s docstring; the filter applies them batch by
batch (markers, aborted data, producers' last batches) and record by record (superseded keys,
expired tombstones, keyless records), counting what goes by reason.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from . import native
from .cleaner_offset_map import OffsetMap
from .producer_state.manager import LastRecord
from .record import MAGIC_V2, ControlRecordType, Record, RecordBatch
from .memory_records import BatchRetention, PayloadVerdict, RecordFilter
from .segment import LogSegment
from .transaction_index import AbortedTxn


class _AbortedTxnState:
    __slots__ = ("last_observed_batch_offset", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
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

    def passed(self, offset: int) -> None:
        """Batches outside any transaction went by, up to ``offset`` (what :meth:`on_batch`
        records for each of them)."""
        self._consume_up_to(offset)

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


class RunResult(NamedTuple):
    """What :meth:`CleanerFilter.filter_run` did with a run of plain data batches (the counts
    ``filter_to``'s :class:`~kafkalog.memory_records.FilterResult` has for them)."""

    stop: int
    output: bytes
    batches: int
    records_read: int
    records_retained: int
    bytes_retained: int
    batches_rewritten: int
    empty_batches: int
    horizons_set: int


class CleanerFilter(RecordFilter):
    """Kafka's ``logCleanerFilter`` for one source segment."""

    def __init__(
        self,
        now_ms: int,
        delete_retention_ms: int,
        offset_map: OffsetMap,
        retain_legacy_deletes: bool,
        txns: CleanedTransactionMetadata,
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
        self._producers: Any = None  # OffsetMap.producer_rows of last_records, made on first use

    def filter_run(self, data: bytes | memoryview, start: int, end: int, max_batch: int) -> RunResult | None:
        """``filter_to`` with this filter over the run of plain data batches from
        ``data[start:end]`` (whole, CRC-checked, uncompressed, non-control, non-transactional v2
        batches; the run ends before any other entry, which the caller gives ``filter_to``),
        on the compiled core: the same bytes and counts. None on the pure core, or when counting
        by key."""
        if native.ext is None or self.by_key is not None:
            return None
        if self._producers is None:
            # The producers whose last data batch must stay (check_batch_retention), by id.
            self._producers = OffsetMap.producer_rows(
                (pid, last.last_data_offset) for pid, last in self.last_records.items()
                if last.last_data_offset is not None
            )  # fmt: skip
        stop, output, totals = self.map.filter_run(
            data, start, end, max_batch, self.current_time, self.delete_retention_ms, self.upper_bound_offset,
            self._producers,
        )
        (batches, records_read, records_retained, bytes_retained, _, rewritten, empty, horizons, keyless, superseded,
         tombstones, max_last, _, _) = totals  # fmt: skip
        if batches:
            self.txns.passed(max_last)  # what on_batch records for data outside transactions
            self.discard_records = False
        removed = self.removed
        for reason, n in (("keyless", keyless), ("superseded", superseded), ("tombstone", tombstones)):
            if n:
                removed[reason] += n
        return RunResult(stop, output, batches, records_read, records_retained, bytes_retained, rewritten, empty,
                         horizons)

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

    def retain_payload(self, batch: RecordBatch, data: bytes | memoryview, start: int, end: int) -> PayloadVerdict | None:
        """:meth:`retain` for a v2 data batch on the compiled core, from its payload; None (take
        the pure path) on the pure core, for the batches :meth:`retain` treats apart (markers,
        aborted data), when counting by key, and for a payload the compiled walk rejects (the
        pure path then raises the typed error)."""
        if (
            native.ext is None or batch.magic < MAGIC_V2 or batch.is_control or self.discard_records
            or self.by_key is not None
        ):  # fmt: skip
            return None
        horizon = batch.delete_horizon_ms
        retain_deletes = horizon is None or self.current_time < horizon
        try:
            flags, kept, kept_tombstone, keyless, superseded, tombstones = self.map.filter_batch(
                data, start, end, batch.count, batch.base_offset, retain_deletes
            )
        except native.Invalid:
            return None
        removed = self.removed
        if keyless:
            removed["keyless"] += keyless
        if superseded:
            removed["superseded"] += superseded
        if tombstones:
            removed["tombstone"] += tombstones
        return PayloadVerdict(flags, kept, kept_tombstone)

    def retain(self, batch: RecordBatch, records: Sequence[Record]) -> list[bool]:
        if self.discard_records:
            self.removed["marker" if batch.is_control else "aborted"] += len(records)
            return [False] * len(records)
        if batch.is_control:
            return [True] * len(records)
        latest = self.map.latest_offset
        get = self.map.get
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
            if offset < get(key):
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
