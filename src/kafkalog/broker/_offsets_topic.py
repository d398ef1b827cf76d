"""The ``__consumer_offsets`` topic as the group coordinator's storage: created on first use
(as Kafka creates it on the first FindCoordinator for a group) with ``offsets.topic.num.partitions``
partitions, ``cleanup.policy=compact`` and ``offsets.topic.segment.bytes``; appended to through
:class:`~kafkalog.Log` (one v2 batch of uncompressed records per write, as Kafka's coordinator
writes them; flushed as every topic is, under ``flush.messages``/``flush.ms``); compacted by a :class:`~kafkalog.LogCleaner`
thread; read back on start with the loading rule shared with ``kafkalog groups``
(:class:`kafkalog.protocol.OffsetsLoader`).

Writes to one partition are serialised with an asyncio lock held across the append on the
thread pool, so records land in the order the event loop decided them and the coordinator's
cache is updated in that order too.

In a cluster only the partitions this broker leads are loaded (:meth:`OffsetsTopic.load_partition`
when it becomes their leader, :meth:`OffsetsTopic.unload_partition` when it stops), the group →
partition mapping uses the topic's real partition count, and each write goes through a
:class:`Leadership` (Kafka's coordinator appends with ``acks=-1``): refused unless this broker
leads the partition, answered once the high watermark passes it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from .. import Log, LogCleaner, RecordBatchBuilder
from ..errors import KafkalogError
from ..protocol import (
    CONSUMER_OFFSETS_TOPIC,
    ConsumerOffsets,
    ErrorCode,
    OffsetsLoader,
    partition_for,
)
from ._group_config import GroupConfig

_log = logging.getLogger(__package__)

#: The settings Kafka gives ``__consumer_offsets`` (``GroupMetadataManager``): compacted,
#: batches kept as the coordinator wrote them.
_COMPACT = "compact"
_PRODUCER = "producer"
#: Bytes read at a time while loading a partition.
_LOAD_CHUNK = 1 << 20
_MS = 1000

#: A record to write: (key, value); a None value is a tombstone.
Record = tuple[bytes, "bytes | None"]


class StoreError(KafkalogError):
    """A write to ``__consumer_offsets`` was refused or not replicated: ``code`` is the append's
    status in Kafka's terms (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...),
    which the coordinator maps to its own answer as Kafka's ``GroupMetadataManager`` does."""

    def __init__(self, partition: int, code: ErrorCode) -> None:
        super().__init__(f"{CONSUMER_OFFSETS_TOPIC}-{partition}: append failed with {code.name}")
        self.partition = partition
        self.code = code


def commit_error(code: ErrorCode) -> ErrorCode:
    """An offset commit's answer for its append's status (Kafka's
    ``GroupMetadataManager.maybeConvertOffsetCommitError``)."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return code  # REQUEST_TIMED_OUT among them: Kafka passes it through


def store_group_error(code: ErrorCode) -> ErrorCode:
    """A SyncGroup's answer when storing the group's metadata failed (Kafka's ``storeGroup``
    callback)."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.UNKNOWN_SERVER_ERROR


class Leadership(Protocol):
    """How a replicated broker appends to ``__consumer_offsets`` as its leader."""

    def append(self, partition: int, log: Log, batch: Any) -> tuple[int, int]:
        """Append ``batch`` as the partition's leader (blocking, under the role lock): the
        offset after it and the leader epoch of the append.

        Raises:
            StoreError: not the leader, or the ISR is below ``min.insync.replicas``."""

    def replicated(self, partition: int, next_offset: int, epoch: int) -> Awaitable[ErrorCode]:
        """Wait until the high watermark passes ``next_offset`` (Kafka's acks=-1): NONE, or the
        append's error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT)."""


def offsets_topic_overrides(config: GroupConfig) -> dict[str, str]:
    """The topic settings ``__consumer_offsets`` is created with."""
    return {
        "cleanup.policy": _COMPACT,
        "compression.type": _PRODUCER,
        "segment.bytes": str(config.offsets_segment_bytes),
    }


def _now_ms() -> int:
    return int(time.time() * _MS)


class OffsetsTopic:
    """The open partitions of ``__consumer_offsets`` (the broker owns the logs), their write
    locks, and the cleaner compacting them."""

    def __init__(self, config: GroupConfig, leadership: Leadership | None = None) -> None:
        self.config = config
        #: The loaded partitions (all of them on a single node; the led ones in a cluster).
        self.logs: dict[int, Log] = {}
        #: The topic's partition count (``offsets.topic.num.partitions`` when it was created).
        self.partitions = 0
        self.leadership = leadership
        self._locks: dict[int, asyncio.Lock] = {}
        self._cleaned: set[int] = set()
        self.cleaner: LogCleaner | None = None

    @property
    def ready(self) -> bool:
        return self.partitions > 0

    def partition_of(self, group: str) -> int:
        """The partition holding ``group``'s records (Kafka's
        ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``)."""
        return partition_for(group, self.partitions)

    def attach(self, logs: Mapping[int, Log], partitions: int) -> None:
        """Take the topic's partition count and the logs to load (opened by the broker), and
        start compacting them."""
        self.partitions = partitions
        for index, log in logs.items():
            self.add_partition(index, log)

    def add_partition(self, index: int, log: Log) -> None:
        """Serve ``index`` from ``log`` (compacted from now on)."""
        self.logs[index] = log
        self._locks.setdefault(index, asyncio.Lock())
        if self.config.cleaner_enable and index not in self._cleaned:
            if self.cleaner is None:
                self.cleaner = LogCleaner(dedupe_buffer_size=self.config.cleaner_dedupe_buffer_size,
                                          backoff_ms=self.config.cleaner_backoff_ms)
                self.cleaner.start()
            # Kafka's cleaner compacts every replica of a compacted topic, led or followed.
            self.cleaner.add_log(log)
            self._cleaned.add(index)

    def unload_partition(self, index: int) -> None:
        """Stop serving ``index`` (no longer its leader): its writes fail with NOT_LEADER_OR_FOLLOWER."""
        self.logs.pop(index, None)

    def stop(self) -> None:
        """Stop the cleaner (a pass in progress is aborted, the log untouched); blocking."""
        if self.cleaner is not None:
            self.cleaner.stop()
            self.cleaner = None

    # -- loading --------------------------------------------------------------------------------

    def load(self) -> ConsumerOffsets:
        """Every partition's committed offsets and group metadata (blocking: run it on the pool).

        A partition that does not decode is logged and skipped: its groups start empty rather
        than the broker refusing to start (Kafka marks such a partition as failed to load).
        """
        result = ConsumerOffsets()
        for index, log in sorted(self.logs.items()):
            self._load_into(result, index, log)
        return result

    @staticmethod
    def load_partition(index: int, log: Log) -> ConsumerOffsets:
        """One partition's committed offsets and group metadata, read up to its log end (blocking)."""
        result = ConsumerOffsets()
        OffsetsTopic._load_into(result, index, log)
        return result

    @staticmethod
    def _load_into(result: ConsumerOffsets, index: int, log: Log) -> None:
        loader = OffsetsLoader(result, index)
        try:
            _load_partition(log, loader)
        except (KafkalogError, OSError) as e:
            _log.error("loading %s-%d stopped: %s", CONSUMER_OFFSETS_TOPIC, index, e)
            result.warnings.append(str(e))
        result.partitions.append(str(log.directory))

    # -- writing --------------------------------------------------------------------------------

    async def write(self, partition: int, records: Sequence[Record], run: Callable[..., Any],
                    then: Callable[[], None] | None = None) -> None:
        """Append ``records`` to ``partition`` as one batch and flush it; ``then`` runs on the
        event loop after the append, before the next write to the partition may start.

        Args:
            run: runs a blocking call on the thread pool (``broker._in_executor``).

        In a cluster the lock is held until the high watermark passes the records, so the cache
        is updated only with what is replicated, in log order.

        Raises:
            StoreError: this broker does not lead the partition, or the records were not
                replicated (Kafka's append status in ``code``).
            KafkalogError, OSError: the append failed (nothing of it is visible).
        """
        lock = self._locks.get(partition)
        if lock is None or partition not in self.logs:
            raise StoreError(partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        async with lock:
            log = self.logs.get(partition)
            if log is None:  # unloaded while waiting for the lock
                raise StoreError(partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            appended = await run(self._append, partition, log, list(records))
            if self.leadership is not None:
                code = await self.leadership.replicated(partition, *appended)
                if code is not ErrorCode.NONE:
                    raise StoreError(partition, code)
            if then is not None:
                then()

    def _append(self, partition: int, log: Log, records: list[Record]) -> tuple[int, int]:
        builder = RecordBatchBuilder()
        now = _now_ms()
        for key, value in records:
            builder.append(key, value, timestamp=now)
        if self.leadership is not None:
            return self.leadership.append(partition, log, builder.build())
        epoch = log.latest_epoch
        epoch = epoch if epoch is not None and epoch > 0 else 0
        # flushed under the topic's flush.messages/flush.ms, as every append of this broker
        info = log.append(builder.build(), leader_epoch=epoch)
        return info.last_offset + 1, epoch


def _load_partition(log: Log, loader: OffsetsLoader) -> None:
    """Feed every batch of ``log`` to ``loader`` in offset order."""
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        records = log.read(offset, _LOAD_CHUNK)
        progressed = False
        for batch in records.batches():
            if batch.last_offset < offset:
                continue
            progressed = True
            offset = batch.next_offset
            loader.load_batch(batch, log_start_offset=log.log_start_offset)
        if not progressed:
            break
