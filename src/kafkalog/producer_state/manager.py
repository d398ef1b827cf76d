"""Producer state: idempotence, transactions and their snapshots, as Kafka's
``ProducerStateManager`` keeps them for one partition.

For every producer id seen in the log the manager keeps a :class:`ProducerStateEntry`: the
producer epoch, the metadata of its last five batches (for duplicate detection), the epoch of
the transaction coordinator that wrote its last marker, its last timestamp, and the first offset
of its open transaction. It also tracks the open transactions of the partition, which give the
first unstable offset and the last stable offset written to the transaction index.

Applying a batch is split in two, as in Kafka: :meth:`ProducerStateManager.prepare_update`
returns a :class:`ProducerAppendInfo` that validates and accumulates on a *copy* of the
producer's entry, and :meth:`ProducerStateManager.update` installs it. A batch that fails
validation therefore leaves the manager untouched. :meth:`ProducerStateManager.append_batch`
does both for one batch; :meth:`ProducerStateManager.analyze_batches` is Kafka's
``analyzeAndValidateProducerState`` for a whole append.

Validation depends on where the batch comes from (:class:`AppendOrigin`, Kafka's rules):

| check | CLIENT | COORDINATOR | REPLICATION |
|---|---|---|---|
| duplicate of one of the producer's last 5 batches | yes | no | no |
| producer epoch not older than the known one | raise | raise | log a warning, apply |
| sequence follows the last one | yes | no | no |
| coordinator epoch of a marker not older | raise | raise | log, apply |
| no non-transactional data while a transaction is open | raise | raise | raise |

The entries are :mod:`kafkalog.producer_state.entry`'s; the snapshot file format is
:mod:`kafkalog.producer_state.snapshot`'s.

Not thread-safe: the partition log serialises every call.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterable, Mapping
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from ..durable import TMP_SUFFIX
from ..errors import (
    CorruptCheckpointError,
    DuplicateSequenceError,
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from ..filenames import DELETED_SUFFIX, SNAPSHOT_SUFFIX, snapshot_file
from .entry import (  # noqa: F401 (NUM_BATCHES_TO_RETAIN: importable here too)
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
    in_sequence,
    next_sequence,
)
from .snapshot import (  # noqa: F401 (the layout and codec: importable here too)
    SNAPSHOT_ENTRY,
    SNAPSHOT_HEADER,
    SNAPSHOT_VERSION,
    HashMapShape,
    decode_snapshot,
    encode_snapshot,
    read_snapshot,
    snapshot_order,
    write_snapshot,
)
from ..record import (
    MAGIC_V2,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    ControlRecordType,
    RecordBatch,
)

_log = logging.getLogger(__name__)

#: ``producer.id.expiration.ms`` default: one day.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000

class TransactionCoordinatorFencedError(InvalidTxnStateError):
    """An end-transaction marker from a coordinator epoch older than the last one seen for the
    producer (Kafka's ``TransactionCoordinatorFencedException``)."""


class AppendOrigin(Enum):
    """Where an append comes from, which decides how much is validated (Kafka's ``AppendOrigin``)."""

    #: A producer's request: full validation, duplicates detected.
    CLIENT = "client"
    #: The group or transaction coordinator (offset commits, markers): epochs only.
    COORDINATOR = "coordinator"
    #: A follower copying the leader, or the log loading itself: nothing but transaction state.
    REPLICATION = "replication"


class CompletedTxn(NamedTuple):
    """A transaction an end marker closed: first offset (inclusive) and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class TxnMetadata(NamedTuple):
    """A transaction the manager tracks: its producer and first offset (Kafka's ``TxnMetadata``;
    ``last_offset`` is None while it is open)."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


class LastRecord(NamedTuple):
    """What the log cleaner keeps per active producer: the offset of its last data batch (None
    when it has none) and its epoch (Kafka's ``LastRecord``)."""

    last_data_offset: int | None
    producer_epoch: int


class ProducerAppendInfo:
    """Validates and accumulates one producer's batches of one append on a copy of its entry
    (Kafka's ``ProducerAppendInfo``); :meth:`ProducerStateManager.update` installs the result.

    Raises (from the append methods): :class:`InvalidProducerEpochError`,
    :class:`OutOfOrderSequenceError`, :class:`InvalidTxnStateError` (or its subclass
    :class:`TransactionCoordinatorFencedError`); after an error the append info must be dropped.
    """

    __slots__ = ("_current", "_transactions", "_updated", "origin", "producer_id")

    def __init__(self, producer_id: int, current_entry: ProducerStateEntry, origin: AppendOrigin) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self._current = current_entry
        # Validation runs against the copy: the first batch is checked against the current entry's
        # last sequence, later ones against this append's own batches.
        self._updated = current_entry._copy_without_batches(producer_id)
        self._transactions: list[TxnMetadata] = []

    @property
    def started_transactions(self) -> tuple[TxnMetadata, ...]:
        """Transactions begun by this append's data batches."""
        return tuple(self._transactions)

    def to_entry(self) -> ProducerStateEntry:
        """The updated entry (its batches are only the ones of this append)."""
        return self._updated

    # -- checks --------------------------------------------------------------------------------

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        known = self._updated._producer_epoch
        if producer_epoch < known:
            message = (
                f"epoch of producer {self.producer_id} at offset {offset} is {producer_epoch}, "
                f"which is smaller than the last seen epoch {known}"
            )
            if self.origin is AppendOrigin.REPLICATION:
                _log.warning("%s", message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self._updated, self._current
        updated_epoch = updated._producer_epoch
        if producer_epoch != updated_epoch:
            # A new epoch starts its sequences at 0, unless the producer is new to this log.
            if first_seq != 0 and updated_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch of producer {self.producer_id} at offset {offset}: "
                    f"{producer_epoch} (request epoch), {first_seq} (seq. number), "
                    f"{updated.producer_epoch} (current producer epoch); a new epoch must start at sequence 0"
                )
            return
        if updated._batches:
            last_seq = updated._batches[-1].last_seq
        elif producer_epoch == current._producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # With no known epoch (all the producer's records were removed by retention or
        # DeleteRecords) any sequence is accepted.
        if current._producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {self.producer_id} at offset {offset}: "
                f"{first_seq} (incoming seq. number), {last_seq} (current end sequence number); "
                f"expected {next_sequence(last_seq)}"
            )

    def _check_coordinator_epoch(self, coordinator_epoch: int, offset: int) -> None:
        known = self._updated.coordinator_epoch
        if known > coordinator_epoch:
            message = (
                f"invalid coordinator epoch for producer {self.producer_id} at offset {offset}: "
                f"{coordinator_epoch} (zombie), {known} (current)"
            )
            if self.origin is AppendOrigin.REPLICATION:
                _log.info("%s", message)
            else:
                raise TransactionCoordinatorFencedError(message)

    # -- appends -------------------------------------------------------------------------------

    def append(self, batch: RecordBatch) -> CompletedTxn | None:
        """Apply one v2 batch of this producer; return the transaction an end marker completed.

        A control batch's first record must be an ABORT or COMMIT marker; an empty control batch
        (its transaction compacted away) changes nothing but still creates the entry.

        Raises:
            InvalidRecordError: a control batch whose first record is no transaction marker.
        """
        if batch.is_control:
            records = batch.records()
            if not records:
                return None
            marker = records[0]
            if marker.control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                raise InvalidRecordError(
                    f"control batch of producer {self.producer_id} at offset {batch.base_offset} holds a "
                    f"{marker.control_type!r} record, not an end-transaction marker"
                )
            return self.append_end_txn_marker(
                marker.control_type, marker.coordinator_epoch, batch.producer_epoch, batch.base_offset, marker.timestamp
            )
        self.append_data_batch(
            batch.producer_epoch,
            batch.base_sequence,
            batch.last_sequence,
            batch.max_timestamp,
            batch.base_offset,
            batch.last_offset,
            batch.is_transactional,
        )
        return None

    def append_data_batch(
        self,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        """Apply a data batch given by its header fields (Kafka's ``appendDataBatch``)."""
        self._check_producer_epoch(producer_epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(producer_epoch, first_seq, first_offset)
        updated = self._updated
        updated._add_batch(producer_epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        open_txn = updated._txn_first
        if open_txn is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"expected a transactional write from producer {self.producer_id} at offset {first_offset}: "
                f"its transaction from offset {open_txn} is still open"
            )
        if open_txn is None and is_transactional:
            updated._txn_first = first_offset
            self._transactions.append(TxnMetadata(producer_id=self.producer_id, first_offset=first_offset))

    def append_end_txn_marker(
        self,
        control_type: ControlRecordType,
        coordinator_epoch: int,
        producer_epoch: int,
        offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:
        """Apply an ABORT or COMMIT marker (Kafka's ``appendEndTxnMarker``).

        Returns:
            The completed transaction, or None when the producer had none open: since Kafka 2.8
            (KAFKA-10702) a marker of an empty transaction is not bookkept, so it neither moves
            the last stable offset nor gets a transaction index entry.
        """
        self._check_producer_epoch(producer_epoch, offset)
        self._check_coordinator_epoch(coordinator_epoch, offset)
        updated = self._updated
        open_txn = updated.current_txn_first_offset
        completed = None
        if open_txn is not None:
            completed = CompletedTxn(
                producer_id=self.producer_id,
                first_offset=open_txn,
                last_offset=offset,
                is_aborted=control_type == ControlRecordType.ABORT,
            )
        updated._update(producer_epoch, coordinator_epoch, timestamp)
        return completed

    def __repr__(self) -> str:
        u = self._updated
        return (
            f"ProducerAppendInfo(producer_id={self.producer_id}, origin={self.origin.name}, "
            f"producer_epoch={u.producer_epoch}, first_sequence={u.first_seq}, last_sequence={u.last_seq}, "
            f"current_txn_first_offset={u.current_txn_first_offset}, coordinator_epoch={u.coordinator_epoch}, "
            f"last_timestamp={u.last_timestamp}, started_transactions={self._transactions})"
        )


class ProducerStateUpdate(NamedTuple):
    """What :meth:`ProducerStateManager.analyze_batches` found: one append info per producer (to
    pass to :meth:`ProducerStateManager.update`) and the transactions the markers completed."""

    append_infos: tuple[ProducerAppendInfo, ...]
    completed_txns: tuple[CompletedTxn, ...]


# -- the manager ----------------------------------------------------------------------------------


class SnapshotOverlay:
    """The snapshot files as a read-only open sees them: snapshots it would write are kept in
    memory (encoded, so they reload exactly as the file would), those it would delete are
    hidden, and each such change is described in ``changes``. Shared by the managers of one
    open (the loader's recovery manager writes snapshots the partition's manager then lists)."""

    def __init__(self, changes: list[str]) -> None:
        self.written: dict[int, bytes] = {}
        self.deleted: set[int] = set()
        self.changes = changes


class ProducerStateManager:
    """The producer state of one partition and its snapshot files (Kafka's ``ProducerStateManager``).

    On construction it lists the ``*.snapshot`` files of ``directory`` (and removes
    ``*.snapshot.tmp`` leftovers of an interrupted write) but loads none: call
    :meth:`truncate_and_reload` for that, as Kafka's log loader does. ``map_end_offset`` (the
    offset up to which the state reflects the log) is advanced by the caller with
    :meth:`update_map_end_offset` after each append, as Kafka's log does.

    Not thread-safe: the partition log serialises every call.

    Args:
        directory: the partition directory holding the snapshots.
        producer_id_expiration_ms: ``producer.id.expiration.ms``; an idle producer with no open
            transaction is forgotten after this long.

    Raises:
        InvalidConfigError: a non-positive expiration.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        overlay: SnapshotOverlay | None = None,
    ) -> None:
        if producer_id_expiration_ms < 1:
            raise InvalidConfigError(f"producer.id.expiration.ms must be at least 1, not {producer_id_expiration_ms}")
        self._dir = Path(directory)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._shape = HashMapShape()
        # Open transactions by first offset; _ongoing_offsets keeps those offsets sorted.
        self._ongoing: dict[int, TxnMetadata] = {}
        self._ongoing_offsets: list[int] = []
        # Completed transactions whose marker is not yet below the high watermark, by first
        # offset (Kafka's ``unreplicatedTxns``): they hold the last stable offset back, since a
        # new leader may not have their marker.
        self._unreplicated: dict[int, TxnMetadata] = {}
        self._last_map_offset = 0
        self._last_snap_offset = 0
        self._overlay = overlay  # read-only: no snapshot file is written or deleted
        self._snapshots: dict[int, Path] = self._list_snapshots()

    @property
    def overlay(self) -> SnapshotOverlay | None:
        """The in-memory snapshot files of a read-only open (None: the real files)."""
        return self._overlay

    @property
    def directory(self) -> Path:
        return self._dir

    def update_parent_dir(self, directory: str | os.PathLike) -> None:
        """Follow a rename of the partition directory (Kafka's ``updateParentDir``)."""
        self._dir = Path(directory)
        self._snapshots = {offset: self._dir / path.name for offset, path in self._snapshots.items()}

    # -- state ---------------------------------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        """The offset (exclusive) up to which the state reflects the log."""
        return self._last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        self._last_map_offset = offset

    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """Producer id -> entry, a read-only live view (do not change the entries)."""
        return MappingProxyType(self._producers)

    @property
    def producer_id_count(self) -> int:
        return len(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def last_records(self) -> dict[int, LastRecord]:
        """Per active producer, its last data offset and epoch (Kafka's
        ``lastRecordsOfActiveProducers``, which the log cleaner keeps)."""
        return {
            pid: LastRecord(
                last_data_offset=e.last_data_offset if e.last_data_offset >= 0 else None,
                producer_epoch=e.producer_epoch,
            )
            for pid, e in self._producers.items()
        }

    @property
    def is_empty(self) -> bool:
        """True when no producer and no transaction is tracked."""
        return not self._producers and not self._ongoing and not self._unreplicated

    @property
    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest open transaction, or None (Kafka's
        ``firstUndecidedOffset``)."""
        return self._ongoing_offsets[0] if self._ongoing_offsets else None

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction that is open, or complete with its
        marker not yet below the high watermark; None when there is none (Kafka's
        ``firstUnstableOffset``: the last stable offset never passes it)."""
        undecided = self.first_undecided_offset
        unreplicated = min(self._unreplicated) if self._unreplicated else None
        if unreplicated is None:
            return undecided
        return unreplicated if undecided is None else min(undecided, unreplicated)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget the completed transactions whose marker is below ``high_watermark`` (Kafka's
        ``onHighWatermarkUpdated``): they are replicated, so they no longer hold the LSO back."""
        self._remove_unreplicated(high_watermark)

    def _remove_unreplicated(self, offset: int) -> None:
        if not self._unreplicated:  # the common case, on every append of an unreplicated log
            return
        for first in [f for f, txn in self._unreplicated.items() if txn.last_offset < offset]:  # type: ignore[operator]
            del self._unreplicated[first]

    @property
    def ongoing_txns(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction, earliest first (a copy)."""
        result: dict[int, int] = {}
        for offset in self._ongoing_offsets:
            result.setdefault(self._ongoing[offset].producer_id, offset)
        return result

    # -- applying batches ----------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        """An append info for ``producer_id`` over a copy of its entry (Kafka's ``prepareUpdate``)."""
        current = self._producers.get(producer_id) or ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(producer_id, current, origin)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Install what ``append_info`` accumulated and track the transactions it began.

        Raises:
            ValueError: the append info has no producer id.
        """
        pid = append_info.producer_id
        if pid == NO_PRODUCER_ID:
            raise ValueError(f"invalid producer id {pid} passed to update")
        updated = append_info.to_entry()
        current = self._producers.get(pid)
        if current is not None:
            current._update_from(updated)
        else:
            self._add_producer(pid, updated)
        for txn in append_info.started_transactions:
            self._add_ongoing(txn)

    def analyze_batches(self, batches: Iterable[RecordBatch], *, origin: AppendOrigin) -> ProducerStateUpdate:
        """Validate the batches of one append without changing the state (Kafka's
        ``analyzeAndValidateProducerState``): batches without a producer id (and all v0/v1
        batches) are skipped; the batches of one producer share one append info.

        Raises:
            DuplicateSequenceError: (CLIENT) a data batch equal in epoch and sequence range to
                one of its producer's last 5; ``first_offset``, ``last_offset`` and
                ``timestamp`` tell where it was appended. Checked before anything else of the
                batch, against the state before this append.
            InvalidProducerEpochError, OutOfOrderSequenceError, InvalidTxnStateError,
            InvalidRecordError: see :class:`ProducerAppendInfo`.
        """
        infos: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in batches:
            pid = batch.producer_id
            if batch.magic < MAGIC_V2 or pid <= NO_PRODUCER_ID:
                continue
            if origin is AppendOrigin.CLIENT and not batch.is_control:
                entry = self._producers.get(pid)
                duplicate = None if entry is None else entry.find_duplicate_batch(batch)
                if duplicate is not None:
                    raise _duplicate_error(batch, duplicate)
            info = infos.get(pid)
            if info is None:
                info = infos[pid] = self.prepare_update(pid, origin)
            txn = info.append(batch)
            if txn is not None:
                completed.append(txn)
        return ProducerStateUpdate(tuple(infos.values()), tuple(completed))

    def append_batch(self, batch: RecordBatch, *, from_client: bool) -> CompletedTxn | None:
        """Validate and apply one batch; return the transaction its end marker completed.

        ``from_client=True`` validates as Kafka does a producer's request (origin CLIENT;
        markers get the coordinator's epoch checks); ``False`` applies it as replication and log
        loading do. A batch that fails leaves the state untouched. A completed transaction stays
        tracked until :meth:`complete_txn` (after :meth:`last_stable_offset` has been used for
        the transaction index), and ``map_end_offset`` is the caller's to advance.

        Raises:
            See :meth:`analyze_batches`.
        """
        origin = AppendOrigin.CLIENT if from_client else AppendOrigin.REPLICATION
        analysis = self.analyze_batches((batch,), origin=origin)
        for info in analysis.append_infos:
            self.update(info)
        return analysis.completed_txns[0] if analysis.completed_txns else None

    # -- transactions --------------------------------------------------------------------------

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The last stable offset once ``completed`` is complete: the first offset of the
        earliest open transaction of *another* producer, else just past its marker."""
        for offset in self._ongoing_offsets:
            if self._ongoing[offset].producer_id != completed.producer_id:
                return offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Move a transaction its marker completed from the open ones to the unreplicated ones
        (Kafka's ``completeTxn``): it holds the last stable offset back until the high
        watermark passes its marker (:meth:`on_high_watermark_updated`).

        Raises:
            ValueError: no transaction was started at ``completed.first_offset``.
        """
        txn = self._ongoing.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"attempted to complete transaction {completed} which was not started")
        i = bisect.bisect_left(self._ongoing_offsets, completed.first_offset)
        del self._ongoing_offsets[i]
        self._unreplicated[completed.first_offset] = txn._replace(last_offset=completed.last_offset)

    def _add_ongoing(self, txn: TxnMetadata) -> None:
        if txn.first_offset not in self._ongoing:
            bisect.insort(self._ongoing_offsets, txn.first_offset)
        self._ongoing[txn.first_offset] = txn

    def _clear_ongoing(self) -> None:
        # Callers truncate to at most the high watermark: the unreplicated ones go too (Kafka).
        self._ongoing.clear()
        self._ongoing_offsets.clear()
        self._unreplicated.clear()

    # -- producers -----------------------------------------------------------------------------

    def _add_producer(self, producer_id: int, entry: ProducerStateEntry) -> None:
        new = producer_id not in self._producers
        self._producers[producer_id] = entry
        if new:
            self._shape.added(producer_id, self._producers, len(self._producers))

    def _clear_producers(self) -> None:
        self._producers.clear()
        self._shape.cleared()

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        """Add an entry read from a snapshot, with its open transaction (Kafka's ``loadProducerEntry``)."""
        self._add_producer(entry.producer_id, entry)
        if entry.current_txn_first_offset is not None:
            self._add_ongoing(TxnMetadata(producer_id=entry.producer_id, first_offset=entry.current_txn_first_offset))

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        idle = now_ms - entry.last_timestamp
        return entry.current_txn_first_offset is None and idle >= self.producer_id_expiration_ms

    def remove_expired_producers(self, now_ms: int) -> None:
        """Forget producers with no open transaction whose last timestamp is at least
        ``producer_id_expiration_ms`` old."""
        for pid in [pid for pid, e in self._producers.items() if self._is_expired(now_ms, e)]:
            del self._producers[pid]
            self._shape.removed(pid)

    # -- snapshots -----------------------------------------------------------------------------

    def _list_snapshots(self) -> dict[int, Path]:
        found: dict[int, Path] = {}
        if not self._dir.is_dir():
            return found
        for path in self._dir.iterdir():
            name = path.name
            if name.endswith(SNAPSHOT_SUFFIX + TMP_SUFFIX) and path.is_file():
                if self._overlay is None:
                    path.unlink(missing_ok=True)  # an interrupted write_snapshot
                elif f"would delete {path}" not in self._overlay.changes:
                    self._overlay.changes.append(f"would delete {path}")
                continue
            if not name.endswith(SNAPSHOT_SUFFIX) or not path.is_file():
                continue
            prefix = name.split(".", 1)[0]
            if not prefix.isdigit():
                _log.warning("ignoring %s: a snapshot file is named after its offset", path)
                continue
            found[int(prefix)] = path
        if self._overlay is not None:
            for offset in self._overlay.deleted:
                found.pop(offset, None)
            for offset in self._overlay.written:
                found[offset] = snapshot_file(self._dir, offset)
        return dict(sorted(found.items()))

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files known, ascending."""
        return sorted(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    @property
    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots) if self._snapshots else None

    def fetch_snapshot(self, offset: int) -> Path | None:
        """The snapshot file at ``offset``, if known."""
        return self._snapshots.get(offset)

    def snapshot_entries(self) -> list[ProducerStateEntry]:
        """The entries a snapshot taken now would hold, in the order it writes them."""
        order = snapshot_order(list(self._producers), self._shape.capacity)
        return [self._producers[pid] for pid in order]

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write ``<map_end_offset>.snapshot`` unless the state has not moved since the last
        snapshot (Kafka's rule: only when ``map_end_offset`` passed the last snapshot's offset).

        Returns:
            The file written, or None.
        """
        offset = self._last_map_offset
        if offset <= self._last_snap_offset:
            return None
        path = snapshot_file(self._dir, offset)
        if self._overlay is not None:
            self._overlay.written[offset] = encode_snapshot(self.snapshot_entries())
            self._overlay.deleted.discard(offset)
            if f"would write producer snapshot {path}" not in self._overlay.changes:
                self._overlay.changes.append(f"would write producer snapshot {path}")
        else:
            write_snapshot(path, self.snapshot_entries(), sync=sync)
        self._snapshots[offset] = path
        self._last_snap_offset = offset
        return path

    @staticmethod
    def read_snapshot(path: str | os.PathLike) -> list[ProducerStateEntry]:
        """See :func:`read_snapshot`."""
        return read_snapshot(path)

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None and self._overlay is not None:
            if self._overlay.written.pop(offset, None) is None:
                self._overlay.changes.append(f"would delete producer snapshot {path}")
            self._overlay.deleted.add(offset)
        elif path is not None:
            path.unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete the snapshots at offsets below ``offset``."""
        for off in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(off)

    def delete_snapshots_after(self, offset: int) -> None:
        """Delete the snapshots at offsets above ``offset``."""
        for off in [o for o in self._snapshots if o > offset]:
            self._remove_and_delete_snapshot(off)

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Forget the snapshot at ``offset`` and rename it ``<name>.deleted`` for a later delete;
        return the new path (None when there was none, or it was already gone)."""
        path = self._snapshots.pop(offset, None)
        if path is None:
            return None
        renamed = path.with_name(path.name + DELETED_SUFFIX)
        try:
            os.replace(path, renamed)
        except FileNotFoundError:
            return None
        return renamed

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete the snapshots at no segment's base offset, except the newest of them when it
        lies above every segment (the one a clean shutdown writes) (Kafka's
        ``removeStraySnapshots``)."""
        bases = set(segment_base_offsets)
        self._snapshots = self._list_snapshots()
        stray = [offset for offset in self._snapshots if offset not in bases]
        for offset in stray[:-1]:
            self._remove_and_delete_snapshot(offset)
        if stray and bases and stray[-1] < max(bases):
            self._remove_and_delete_snapshot(stray[-1])

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        """Load the latest readable snapshot; a corrupt one is deleted and the next older tried."""
        while self._snapshots:
            offset = max(self._snapshots)
            path = self._snapshots[offset]
            try:
                written = None if self._overlay is None else self._overlay.written.get(offset)
                entries = read_snapshot(path) if written is None else decode_snapshot(written, file=str(path))
            except CorruptCheckpointError as e:
                _log.warning("failed to load producer snapshot from %s: %s", path, e)
                self._remove_and_delete_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self.load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = offset
            return
        self._last_snap_offset = self._last_map_offset = log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Drop the snapshots outside ``(log_start_offset, log_end_offset]`` and, unless the
        state already ends at ``log_end_offset``, reload it from the latest remaining snapshot
        (skipping expired producers) or start empty at ``log_start_offset``; the caller then
        replays the log from ``map_end_offset`` (Kafka's ``truncateAndReload``).

        As in Kafka, a snapshot *at* the log start offset is dropped too.
        """
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_and_delete_snapshot(offset)
        if log_end_offset != self._last_map_offset:
            self._clear_producers()
            self._clear_ongoing()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Bring ``map_end_offset`` up to a new log start offset (Kafka's ``onLogStartOffsetIncremented``)."""
        self._remove_unreplicated(log_start_offset)
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset
        self._last_snap_offset = log_start_offset if latest is None else latest

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer, transaction and snapshot; the state now ends at ``offset``."""
        self._clear_producers()
        self._clear_ongoing()
        for off in list(self._snapshots):
            self._remove_and_delete_snapshot(off)
        self._last_snap_offset = 0
        self._last_map_offset = offset

    def truncate_fully_and_reload_snapshots(self) -> None:
        """Start over at 0 and list the snapshot files again (Kafka's ``truncateFullyAndReloadSnapshots``)."""
        self.truncate_fully_and_start_at(0)
        self._snapshots = self._list_snapshots()

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager({str(self._dir)!r}, producers={len(self._producers)}, "
            f"ongoing_txns={len(self._ongoing)}, map_end_offset={self._last_map_offset}, "
            f"snapshots={self.snapshot_offsets()})"
        )


def _duplicate_error(batch: RecordBatch, duplicate: BatchMetadata) -> DuplicateSequenceError:
    err = DuplicateSequenceError(
        f"batch of producer {batch.producer_id} (epoch {batch.producer_epoch}, sequences "
        f"{batch.base_sequence}..{batch.last_sequence}) at offset {batch.base_offset} duplicates the one "
        f"appended at offsets {duplicate.first_offset}..{duplicate.last_offset}"
    )
    err.first_offset = duplicate.first_offset
    err.last_offset = duplicate.last_offset
    err.timestamp = duplicate.timestamp  # type: ignore[attr-defined]  # Kafka answers it as the append time
    return err
