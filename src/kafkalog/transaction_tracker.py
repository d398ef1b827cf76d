"""Transactions followed through batches in offset order: which are open, and the
``.txnindex`` entry each ABORT marker gives (Kafka's producer state while it appends or
recovers), and the aborted data a read_committed consumer drops (:class:`AbortedFilter`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from .record import MAGIC_V2, ControlRecordType, RecordBatch
from .transaction_index import AbortedTxn


class TxnEnd(NamedTuple):
    """A transaction marker met by :class:`TransactionTracker`.

    Attributes:
        producer_id, control_type, marker_offset: the marker.
        first_offset: the first offset of the transaction it ends, or None when no batch of
            that transaction was seen (it began before the scan, or it was empty, or the
            cleaner removed its batches).
        last_stable_offset: for a known ABORT, the last stable offset when it completed: the
            first offset of the earliest other open transaction, else the marker's offset + 1.
    """

    producer_id: int
    control_type: ControlRecordType
    marker_offset: int
    first_offset: int | None
    last_stable_offset: int | None

    @property
    def aborted_txn(self) -> AbortedTxn | None:
        """The ``.txnindex`` entry Kafka writes for this marker, or None."""
        if self.control_type is not ControlRecordType.ABORT or self.first_offset is None:
            return None
        return AbortedTxn(self.producer_id, self.first_offset, self.marker_offset, self.last_stable_offset)  # type: ignore[arg-type]


class TransactionTracker:
    """Follows transactions through batches in offset order, as the producer state a broker
    keeps while it appends or recovers, to say which ``.txnindex`` entries Kafka writes
    (``LogSegment.updateProducerState``): an ABORT marker of a transaction whose first batch
    was seen gives ``(producer id, first offset, marker offset, last stable offset)``.

    Carry one tracker across the segments of a partition; a transaction that began before the
    first batch given is unknown (its marker gives a :class:`TxnEnd` without a first offset),
    unless ``ongoing`` names it: producer id -> first offset of the transactions already open
    (a producer snapshot's). Not thread-safe.
    """

    def __init__(self, ongoing: dict[int, int] | None = None) -> None:
        """Args:
            ongoing: producer id -> first offset of the transactions open before the first batch
                given (e.g. the producer state's ``ongoing_txns`` at a segment's start); the
                tracker keeps this dict and updates it in place as transactions begin and end.
        """
        self._ongoing: dict[int, int] = {} if ongoing is None else ongoing

    @property
    def ongoing(self) -> dict[int, int]:
        """Producer id -> first offset of the transactions open now."""
        return dict(self._ongoing)

    def on_batch(self, batch: RecordBatch) -> TxnEnd | None:
        """Account for one batch; return the marker it holds, if any.

        Raises:
            KafkalogError: a control batch whose records do not decode.
        """
        pid = batch.producer_id
        if batch.magic < MAGIC_V2 or pid < 0 or not batch.is_transactional:
            return None
        if not batch.is_control:
            self._ongoing.setdefault(pid, batch.base_offset)
            return None
        records = batch.records()
        if not records:
            return None
        marker = records[0]
        kind = marker.control_type
        if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        first = self._ongoing.pop(pid, None)
        lso = None
        if first is not None and kind is ControlRecordType.ABORT:
            others = self._ongoing.values()
            lso = min(others) if others else marker.offset + 1
        return TxnEnd(pid, kind, marker.offset, first, lso)

    def aborted_txn(self, batch: RecordBatch) -> AbortedTxn | None:
        """:meth:`on_batch`, returning the ``.txnindex`` entry Kafka writes for the batch: an
        ABORT marker of a transaction whose first batch was seen, or None (an empty transaction
        completes nothing, Kafka since KAFKA-10702; one that began before the first batch given
        is unknown here).

        Raises:
            KafkalogError: a control batch whose records do not decode.
        """
        end = self.on_batch(batch)
        return None if end is None else end.aborted_txn


class AbortedFilter:
    """Kafka's read_committed filter, as a consumer applies it (``CompletedFetch``): the aborted
    transactions of a fetch in order of first offset; a producer enters the aborted set when a
    batch reaches the first offset of one of its aborted transactions, and leaves it at its
    ABORT marker; its transactional data batches in between are dropped. Feed it every batch
    in offset order (the ones before the wanted range too), as the consumer sees them.

    Args:
        txns: (producer id, first offset, marker offset) of each aborted transaction, e.g.
            :class:`~kafkalog.transaction_index.AbortedTxn` entries of the ``.txnindex`` files.
    """

    def __init__(self, txns: Iterable[tuple[int, int, int] | AbortedTxn]) -> None:
        self.queue = sorted(((t[0], t[1], t[2]) for t in txns), key=lambda txn: txn[1])  # by first offset
        self.next = 0
        self.producers: set[int] = set()

    def drops(self, batch: RecordBatch) -> bool:
        """Whether ``batch`` is aborted data (markers are never dropped: their records are
        control records, which a consumer does not return)."""
        pid = batch.producer_id
        if pid < 0:
            return False
        last = batch.last_offset
        while self.next < len(self.queue):
            producer, first, _ = self.queue[self.next]
            if first > last:
                break
            self.producers.add(producer)
            self.next += 1
        if batch.is_control:
            records = batch.records()
            if records and records[0].control_type is ControlRecordType.ABORT:
                self.producers.discard(pid)  # Kafka: the ABORT marker ends the aborted run
            return False
        return batch.is_transactional and pid in self.producers
