"""One producer's state as the log knows it: Kafka's ``ProducerStateEntry`` and
``BatchMetadata``, and the sequence arithmetic they share (sequences are int32 and wrap from
2**31-1 to 0)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from ..record import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, RecordBatch
from ..varint import INT32_MAX

#: Batches kept per producer for duplicate detection (Kafka's ``NUM_BATCHES_TO_RETAIN``).
NUM_BATCHES_TO_RETAIN = 5
_new_entry = object.__new__
_new_tuple = tuple.__new__


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement``, wrapping below 0 to 2**31-1 (Kafka's ``decrementSequence``)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether ``next_seq`` follows ``last_seq`` (2**31-1 wraps to 0; Kafka's ``inSequence``)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def next_sequence(last_seq: int) -> int:
    """The sequence after ``last_seq``, wrapping at 2**31-1."""
    return 0 if last_seq == INT32_MAX else last_seq + 1


class BatchMetadata(NamedTuple):
    """One appended batch as a producer entry remembers it (Kafka's ``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        """The batch's base sequence (wrapping as sequences do)."""
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """What the log knows of one producer id (Kafka's ``ProducerStateEntry``).

    Read through its properties; only the manager and :class:`ProducerAppendInfo` change an
    entry. ``current_txn_first_offset`` is None when no transaction is open (written as -1).
    """

    __slots__ = ("_producer_id", "_producer_epoch", "_coordinator_epoch", "_last_timestamp", "_txn_first", "_batches")

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = -1,
        last_timestamp: int = NO_TIMESTAMP,
        current_txn_first_offset: int | None = None,
        batch_metadata: Iterable[BatchMetadata] = (),
    ) -> None:
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._coordinator_epoch = coordinator_epoch
        self._last_timestamp = last_timestamp
        self._txn_first = current_txn_first_offset
        self._batches: deque[BatchMetadata] = deque(batch_metadata, maxlen=NUM_BATCHES_TO_RETAIN)

    @classmethod
    def empty(cls, producer_id: int) -> ProducerStateEntry:
        """An entry with no epoch, no batches and no transaction."""
        return cls(producer_id)

    # -- read-only view ------------------------------------------------------------------------

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def coordinator_epoch(self) -> int:
        """Epoch of the coordinator that wrote the producer's last marker (-1: none yet)."""
        return self._coordinator_epoch

    @property
    def last_timestamp(self) -> int:
        """Max timestamp of the last data batch, or the timestamp of the last marker."""
        return self._last_timestamp

    @property
    def current_txn_first_offset(self) -> int | None:
        """First offset of the producer's open transaction, or None."""
        return self._txn_first

    @property
    def batch_metadata(self) -> tuple[BatchMetadata, ...]:
        """The last (at most 5) batches, oldest first."""
        return tuple(self._batches)

    @property
    def is_empty(self) -> bool:
        """True when no batch is remembered."""
        return not self._batches

    @property
    def first_seq(self) -> int:
        return self._batches[0].first_seq if self._batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self._batches[-1].last_seq if self._batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self._batches[0].first_offset if self._batches else -1

    @property
    def last_data_offset(self) -> int:
        return self._batches[-1].last_offset if self._batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self._batches[-1].offset_delta if self._batches else 0

    def find_duplicate_batch(self, batch: RecordBatch) -> BatchMetadata | None:
        """The remembered batch ``batch`` duplicates (same epoch, same sequence range), if any."""
        if batch.producer_epoch != self._producer_epoch:
            return None
        return self.batch_with_sequence_range(batch.base_sequence, batch.last_sequence)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch with exactly this sequence range, if any."""
        for meta in self._batches:
            if meta.last_seq == last_seq and meta.first_seq == first_seq:
                return meta
        return None

    # -- mutation (manager and append info only) -----------------------------------------------

    def _copy_without_batches(self, producer_id: int) -> ProducerStateEntry:
        """Kafka's ``withProducerIdAndBatchMetadata(producerId, empty)`` (made once per producer
        and append: the slots are set directly rather than through ``__init__``)."""
        copy = _new_entry(ProducerStateEntry)
        copy._producer_id = producer_id
        copy._producer_epoch = self._producer_epoch
        copy._coordinator_epoch = self._coordinator_epoch
        copy._last_timestamp = self._last_timestamp
        copy._txn_first = self._txn_first
        copy._batches = deque((), NUM_BATCHES_TO_RETAIN)
        return copy

    def _maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the remembered batches (their sequences belong to the old one)."""
        if self._producer_epoch != producer_epoch:
            self._batches.clear()
            self._producer_epoch = producer_epoch
            return True
        return False

    def _add_batch(
        self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        if self._producer_epoch != producer_epoch:  # _maybe_update_producer_epoch, inline: once per batch
            self._batches.clear()
            self._producer_epoch = producer_epoch
        # BatchMetadata's fields in order (without the NamedTuple's Python-level __new__); maxlen
        # drops the oldest
        self._batches.append(_new_tuple(BatchMetadata, (last_seq, last_offset, offset_delta, timestamp)))
        self._last_timestamp = timestamp

    def _update(
        self,
        producer_epoch: int,
        coordinator_epoch: int,
        last_timestamp: int,
        batches: Iterable[BatchMetadata] = (),
        current_txn_first_offset: int | None = None,
    ) -> None:
        self._maybe_update_producer_epoch(producer_epoch)
        self._batches.extend(batches)
        self._coordinator_epoch = coordinator_epoch
        self._txn_first = current_txn_first_offset
        self._last_timestamp = last_timestamp

    def _update_from(self, other: ProducerStateEntry) -> None:
        """Take ``other``'s state, appending its batches to ours (Kafka's ``update(nextEntry)``)."""
        self._update(
            other._producer_epoch, other._coordinator_epoch, other._last_timestamp, other._batches, other._txn_first
        )

    # -- values --------------------------------------------------------------------------------

    def _key(self) -> tuple:
        return (
            self._producer_id,
            self._producer_epoch,
            self._coordinator_epoch,
            self._last_timestamp,
            self._txn_first,
            tuple(self._batches),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self._producer_id}, producer_epoch={self._producer_epoch}, "
            f"current_txn_first_offset={self._txn_first}, coordinator_epoch={self._coordinator_epoch}, "
            f"last_timestamp={self._last_timestamp}, batch_metadata={list(self._batches)})"
        )
