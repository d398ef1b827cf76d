"""A partition's leader epoch history, kept in ``leader-epoch-checkpoint`` as Kafka's
``LeaderEpochFileCache`` keeps it.

Each entry says "leader epoch E wrote its first record at offset O". Entries are ordered and
*strictly increasing in both* epoch and start offset; every operation keeps that invariant:

* ``assign(E, O)`` does nothing when E is the latest epoch and O is not earlier than its start
  (the common case: every batch of the current epoch). Otherwise it removes, from the newest
  entry backwards, every entry with epoch >= E *or* start offset >= O, and appends (E, O).
  So assigning an older epoch, or an earlier offset, truncates the history to the point of
  conflict rather than failing (Kafka's ``maybeTruncateNonMonotonicEntries``).
* ``truncate_from_end(O)`` (the log was truncated to end at O) removes entries starting at or
  after O; a negative O does nothing.
* ``truncate_from_start(O)`` (the log now starts at O) removes entries starting at or before
  O and re-adds the last of them as starting at O, so the epoch that held offset O is kept.

``end_offset_for`` answers OffsetsForLeaderEpoch: the largest epoch <= the requested one and the
offset where it ended (the start of the next epoch, or the log end offset for the latest epoch),
or ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``.

Every change is written to the checkpoint (atomically) before it becomes visible. Kafka writes
truncations asynchronously; kafkalog writes them at once, so the file never lags the cache.
Loading replays the file's entries through the ``assign`` rule without writing the file back,
as Kafka does, so a non-monotonic file loads as its monotonic repair.

Thread-safe, with Kafka's one-writer, many-readers discipline: changes are serialised by a lock
(Kafka's write lock) that is held while the checkpoint is written; readers take an immutable
snapshot of the entries and never wait (Kafka takes its read lock).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import NamedTuple

from .checkpoint import EpochEntry, LeaderEpochCheckpointFile
from .errors import InvalidOffsetError
from .varint import INT32_MAX
from .varint import INT64_MAX as _INT64_MAX

#: Kafka's ``RecordBatch.NO_PARTITION_LEADER_EPOCH`` / ``UNDEFINED_EPOCH``: no epoch known.
UNDEFINED_EPOCH = -1
#: Kafka's ``UNDEFINED_EPOCH_OFFSET``: no end offset known.
UNDEFINED_EPOCH_OFFSET = -1


_Entries = tuple[EpochEntry, ...]


class OffsetAndEpoch(NamedTuple):
    """An end offset and the leader epoch it ends (Kafka's ``OffsetAndEpoch``: the answer to
    OffsetsForLeaderEpoch, and a fetch's diverging epoch)."""

    offset: int
    leader_epoch: int


# -- the rules, as pure functions over an entry tuple ------------------------------------------


def _update_needed(entries: _Entries, entry: EpochEntry) -> bool:
    """Kafka's ``isUpdateNeeded``: anything but the latest epoch again at a later offset."""
    if not entries:
        return True
    latest = entries[-1]
    return entry.epoch != latest.epoch or entry.start_offset < latest.start_offset


def _assigned(entries: _Entries, entry: EpochEntry) -> _Entries | None:
    """``entries`` with ``entry`` assigned, or None when nothing changes."""
    if not _update_needed(entries, entry):
        return None
    # maybeTruncateNonMonotonicEntries: drop conflicting entries from the newest backwards.
    keep = len(entries)
    while keep and (entries[keep - 1].epoch >= entry.epoch or entries[keep - 1].start_offset >= entry.start_offset):
        keep -= 1
    return entries[:keep] + (entry,)


def _truncated_from_end(entries: _Entries, end_offset: int) -> _Entries | None:
    """``entries`` without those starting at or after ``end_offset``, or None if none do."""
    if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
        return None
    keep = len(entries)
    while keep and entries[keep - 1].start_offset >= end_offset:
        keep -= 1
    return entries[:keep]


def _truncated_from_start(entries: _Entries, start_offset: int) -> _Entries | None:
    """``entries`` without those starting at or before ``start_offset``, the last of them
    re-added as starting at ``start_offset``; None if no entry starts that early."""
    drop = 0
    while drop < len(entries) and entries[drop].start_offset <= start_offset:
        drop += 1
    if not drop:
        return None
    return (EpochEntry(entries[drop - 1].epoch, start_offset),) + entries[drop:]


def _or_same(changed: _Entries | None, entries: _Entries) -> _Entries:
    """``changed`` unless a rule left ``entries`` as they were (None); an empty tuple counts."""
    return entries if changed is None else changed


class LeaderEpochFileCache:
    """The leader epoch history of one partition, backed by its ``leader-epoch-checkpoint``.

    The on-disk layout is :class:`~kafkalog.checkpoint.LeaderEpochCheckpointFile`'s (``0``, the
    count, then ``epoch startOffset`` per line). Invariant: entries strictly increase in epoch
    and in start offset. Thread-safe (one writer at a time, readers never block).

    Args:
        checkpoint: the file to load from and persist to; a missing or empty file is an empty
            history.

    Raises:
        CorruptCheckpointError: the file is malformed.
    """

    def __init__(self, checkpoint: LeaderEpochCheckpointFile) -> None:
        self._checkpoint = checkpoint
        self._write_lock = threading.Lock()
        entries: _Entries = ()
        for entry in checkpoint.read():
            # Kafka's constructor: checkpoint.read().forEach(this::assign), without a flush.
            entries = _or_same(_assigned(entries, entry), entries)
        self._entries = entries

    @classmethod
    def _with_entries(cls, checkpoint: LeaderEpochCheckpointFile, entries: _Entries) -> LeaderEpochFileCache:
        cache = cls.__new__(cls)
        cache._checkpoint = checkpoint
        cache._write_lock = threading.Lock()
        cache._entries = entries
        return cache

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({str(self._checkpoint.path)!r}, {list(self._entries)})"

    # -- reading ------------------------------------------------------------------------------

    @property
    def checkpoint(self) -> LeaderEpochCheckpointFile:
        return self._checkpoint

    @property
    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, oldest first (Kafka's ``epochEntries``)."""
        return list(self._entries)

    @property
    def non_empty(self) -> bool:
        """Whether any epoch is recorded."""
        return bool(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        """The newest entry, or None when the history is empty."""
        entries = self._entries
        return entries[-1] if entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The current leader epoch (the newest one recorded), or None when empty."""
        entries = self._entries
        return entries[-1].epoch if entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        """The oldest entry, or None when the history is empty."""
        entries = self._entries
        return entries[0] if entries else None

    @property
    def previous_epoch(self) -> int | None:
        """The epoch before the latest one, or None when there are fewer than two."""
        entries = self._entries
        return entries[-2].epoch if len(entries) >= 2 else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        """The entry of ``epoch``, or None if that epoch is not recorded."""
        for entry in self._entries:
            if entry.epoch == epoch:
                return entry
        return None

    def previous_entry(self, epoch: int) -> EpochEntry | None:
        """The entry of the largest epoch strictly below ``epoch``, or None."""
        found = None
        for entry in self._entries:
            if entry.epoch >= epoch:
                break
            found = entry
        return found

    def next_epoch(self, epoch: int) -> int | None:
        """The smallest recorded epoch strictly above ``epoch``, or None."""
        for entry in self._entries:
            if entry.epoch > epoch:
                return entry.epoch
        return None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset``: the one with the greatest start offset <= ``offset``.

        Returns:
            The epoch, or None when ``offset`` is before the earliest entry (or there is none).
        """
        epoch = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            epoch = entry.epoch
        return epoch

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: the largest epoch <= ``requested_epoch`` and its end offset.

        The end offset is the start of the next recorded epoch; for the latest epoch it is
        ``log_end_offset``. If ``requested_epoch`` is below every recorded epoch the answer is
        ``(requested_epoch, start of the earliest epoch)``: that data is gone from this log and
        a follower should truncate to where the log now begins.

        Args:
            requested_epoch: the epoch asked about (``UNDEFINED_EPOCH`` is allowed).
            log_end_offset: the log's end offset, the answer for the latest epoch.

        Returns:
            ``(epoch, end_offset)``, or ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`` when
            ``requested_epoch`` is ``UNDEFINED_EPOCH``, when the history is empty, or when
            ``requested_epoch`` is above the latest epoch.
        """
        entries = self._entries  # one snapshot for the whole answer
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if requested_epoch == UNDEFINED_EPOCH:
            # A bootstrapping follower, or one on a message format without leader epochs.
            return undefined
        if entries and entries[-1].epoch == requested_epoch:
            # The leader's current epoch is still being written: it ends at the log end.
            return requested_epoch, log_end_offset
        floor = None
        for entry in entries:
            if entry.epoch > requested_epoch:
                # The first higher epoch starts where the requested one (or its floor) ended.
                if floor is None:
                    return requested_epoch, entry.start_offset
                return floor.epoch, entry.start_offset
            floor = entry
        # No higher epoch: the requested epoch is newer than any known (Kafka: "should never
        # be hit"), or the history is empty.
        return undefined

    def epoch_entries_in_range(self, start_offset: int, end_offset: int) -> list[EpochEntry]:
        """The entries covering offsets ``[start_offset, end_offset)``, as Kafka's
        ``epochEntriesInRange``: the history truncated from the start at ``start_offset`` (when
        it is not negative) and from the end at ``end_offset``. The cache is not changed."""
        entries = self._entries
        if start_offset >= 0:
            entries = _or_same(_truncated_from_start(entries, start_offset), entries)
        return list(_or_same(_truncated_from_end(entries, end_offset), entries))

    # -- changing -----------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` started at ``start_offset`` and persist the change.

        Ignored when ``epoch`` is the latest epoch and ``start_offset`` is not earlier than its
        start. Otherwise every entry with an epoch >= ``epoch`` or a start offset >=
        ``start_offset`` is removed first (newest backwards), so the history stays monotonic.

        Returns:
            Whether the history changed.

        Raises:
            InvalidOffsetError: a negative epoch or start offset, or one outside its 32/64 bits
                (Kafka: "Received invalid partition leader epoch entry").
            OSError: the checkpoint could not be written; the cache is unchanged.
        """
        entry = self._checked(epoch, start_offset)
        # Kafka checks before taking the write lock, so readers are not held up by the common
        # case (another batch of the current epoch), and again under it.
        if not _update_needed(self._entries, entry):
            return False
        with self._write_lock:
            updated = _assigned(self._entries, entry)
            if updated is None:
                return False
            self._commit(updated)
            return True

    def assign_all(self, entries: Iterable[EpochEntry | tuple[int, int]]) -> None:
        """Assign each of ``entries`` in turn and persist once (Kafka's ``assign(List)``).

        Raises:
            InvalidOffsetError: an entry is invalid; nothing is assigned.
            OSError: the checkpoint could not be written; the cache is unchanged.
        """
        checked = [self._checked(epoch, start_offset) for epoch, start_offset in entries]
        if not checked:
            return
        with self._write_lock:
            updated = self._entries
            for entry in checked:
                updated = _or_same(_assigned(updated, entry), updated)
            # Kafka writes the file whenever the list is non-empty, changed or not.
            self._commit(updated)

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove every entry starting at or after ``end_offset`` (the log now ends there) and
        persist. A negative ``end_offset`` (``UNDEFINED_EPOCH_OFFSET``) does nothing.

        Raises:
            OSError: the checkpoint could not be written; the cache is unchanged.
        """
        with self._write_lock:
            updated = _truncated_from_end(self._entries, end_offset)
            if updated is not None:
                self._commit(updated)

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs before ``start_offset`` (the log now starts there) and persist.

        Entries starting at or before ``start_offset`` are removed and the last of them is
        re-added as starting at ``start_offset``: the epoch that wrote ``start_offset`` stays.
        An entry starting exactly at ``start_offset`` is therefore kept as it is. Nothing happens
        when every entry starts after ``start_offset``.

        Raises:
            OSError: the checkpoint could not be written; the cache is unchanged.
        """
        with self._write_lock:
            updated = _truncated_from_start(self._entries, start_offset)
            if updated is not None:
                self._commit(updated)

    def clear_and_flush(self) -> None:
        """Remove every entry and persist the empty history.

        Raises:
            OSError: the checkpoint could not be written; the cache is unchanged.
        """
        with self._write_lock:
            self._commit(())

    def flush(self) -> None:
        """Write the current entries to the checkpoint (for instance after loading a file whose
        entries were repaired into monotonic order).

        Raises:
            OSError: the checkpoint could not be written.
        """
        with self._write_lock:
            self._checkpoint.write(self._entries)

    def with_checkpoint(self, checkpoint: LeaderEpochCheckpointFile) -> LeaderEpochFileCache:
        """A new cache with these entries over another checkpoint file, without reading or
        writing it (Kafka's ``withCheckpoint``, used when a partition moves directory)."""
        return self._with_entries(checkpoint, self._entries)

    # -- internals ----------------------------------------------------------------------------

    def _checked(self, epoch: int, start_offset: int) -> EpochEntry:
        for value in (epoch, start_offset):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"leader epoch entries hold ints, not {type(value).__name__}")
        if not 0 <= epoch <= INT32_MAX or not 0 <= start_offset <= _INT64_MAX:
            raise InvalidOffsetError(
                f"invalid partition leader epoch entry ({epoch}, {start_offset}): the epoch must be in "
                f"[0, {INT32_MAX}] and the start offset in [0, {_INT64_MAX}]",
                file=str(self._checkpoint.path),
            )
        return EpochEntry(epoch, start_offset)

    def _commit(self, entries: _Entries) -> None:
        """Persist ``entries``, then publish them (the caller holds the write lock). Writing
        first keeps memory and file equal: a failed write leaves both as they were."""
        self._checkpoint.write(entries)
        self._entries = entries
