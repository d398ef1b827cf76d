"""A partition log's high watermark and last stable offset, as Kafka's ``UnifiedLog`` keeps
them (``highWatermarkMetadata``, ``updateHighWatermark``, ``maybeIncrementHighWatermark``,
``lastStableOffset``) and ``ReplicaManager`` checkpoints them.

The high watermark is the offset below which every in-sync replica has the records: what is
committed, what read_uncommitted consumers see. A log with no other replica commits what it
appends (its high watermark is its log end). A replica's starts at the log start offset, or at
the log directory's ``replication-offset-checkpoint`` entry, and moves only by the leader's
increments and the follower's updates (``docs/replication.md``).

The last stable offset is the first offset not yet decided and committed: the earliest
transaction that is open, or complete with its marker not yet below the high watermark (the
producer state's unreplicated transactions, released as the high watermark passes their
markers), else the high watermark.
"""

from __future__ import annotations

from .log_directory import LogDir
from .producer_state.manager import ProducerStateManager


class HighWatermark:
    """One log's high watermark. Not thread-safe: the log changes it under its lock; readers
    read :attr:`offset` (one attribute) without it.

    Args:
        replicated: whether the log is one replica of a replicated partition.
        producer_state: told of every move (its completed transactions wait for it).
        logdir, tp: where the checkpoint line of a replica goes.
    """

    def __init__(self, *, replicated: bool, producer_state: ProducerStateManager, logdir: LogDir,
                 tp: tuple[str, int]) -> None:
        self.replicated = replicated
        self._producer_state = producer_state
        self._logdir = logdir
        self._tp = tp
        self.offset = 0

    def load(self, given: int | None, *, log_start_offset: int, log_end_offset: int) -> None:
        """The value at open: the log end for an unreplicated log; for a replica ``given``,
        else its checkpoint entry, else the log start offset (Kafka), clamped to the log."""
        if not self.replicated:
            given = log_end_offset
        elif given is None:
            given = self._logdir.read_offset(self._logdir.high_watermarks, self._tp)
        self.set_within(log_start_offset if given is None else given, log_start_offset, log_end_offset)

    def set_within(self, offset: int, log_start_offset: int, log_end_offset: int) -> int:
        """Move to ``offset`` clamped to ``[log_start_offset, log_end_offset]`` (Kafka's
        ``updateHighWatermark``)."""
        return self.set(min(max(offset, log_start_offset), log_end_offset))

    def set(self, offset: int) -> int:
        """Move to ``offset`` (the callers apply Kafka's bounds); completed transactions whose
        marker is now committed stop holding the last stable offset back."""
        if offset < 0:
            raise ValueError(f"a high watermark cannot be negative ({offset})")
        self.offset = offset
        self._producer_state.on_high_watermark_updated(offset)
        return offset

    def on_append(self, log_end_offset: int) -> None:
        """An unreplicated log's only replica has what it appended: committed at once."""
        if not self.replicated:
            self.set(log_end_offset)

    def keep_within(self, log_start_offset: int, log_end_offset: int) -> None:
        """Follow the log end down (a truncation) and the log start up, never leaving them
        (``UnifiedLog.truncateTo``, ``truncateFullyAndStartAt``, ``updateLogStartOffset``)."""
        if self.offset > log_end_offset or self.offset < log_start_offset:
            self.set_within(self.offset, log_start_offset, log_end_offset)

    def checkpoint(self) -> None:
        """Write a replica's line of ``replication-offset-checkpoint`` (atomically, keeping the
        other partitions'); an unreplicated log writes none."""
        if self.replicated:
            self._logdir.write_offset(self._logdir.high_watermarks, self._tp, self.offset)

    def last_stable_offset(self, log_start_offset: int) -> int:
        """Kafka's ``lastStableOffset``: the first unstable offset (never below the log start)
        when it is below the high watermark, else the high watermark."""
        unstable = self._producer_state.first_unstable_offset
        if unstable is None:
            return self.offset
        return min(max(unstable, log_start_offset), self.offset)
