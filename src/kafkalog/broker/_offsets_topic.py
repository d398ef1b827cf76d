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
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import Log, LogCleaner, RecordBatchBuilder
from ..errors import KafkalogError
from ..protocol import (
    CONSUMER_OFFSETS_TOPIC,
    ConsumerOffsets,
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

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.logs: list[Log] = []
        self._locks: list[asyncio.Lock] = []
        self.cleaner: LogCleaner | None = None

    @property
    def ready(self) -> bool:
        return bool(self.logs)

    @property
    def partitions(self) -> int:
        return len(self.logs)

    def partition_of(self, group: str) -> int:
        """The partition holding ``group``'s records (Java's ``String.hashCode``)."""
        return partition_for(group, len(self.logs))

    def attach(self, logs: Sequence[Log]) -> None:
        """Take the topic's logs (opened by the broker) and start compacting them."""
        self.logs = list(logs)
        self._locks = [asyncio.Lock() for _ in self.logs]
        if self.config.cleaner_enable:
            self.cleaner = LogCleaner(
                dedupe_buffer_size=self.config.cleaner_dedupe_buffer_size, backoff_ms=self.config.cleaner_backoff_ms,
            )
            for log in self.logs:
                self.cleaner.add_log(log)
            self.cleaner.start()

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
        for index, log in enumerate(self.logs):
            loader = OffsetsLoader(result, index)
            try:
                _load_partition(log, loader)
            except (KafkalogError, OSError) as e:
                _log.error("loading %s-%d stopped: %s", CONSUMER_OFFSETS_TOPIC, index, e)
                result.warnings.append(str(e))
            result.partitions.append(str(log.directory))
        return result

    # -- writing --------------------------------------------------------------------------------

    async def write(self, partition: int, records: Sequence[Record], run: Callable[..., Any],
                    then: Callable[[], None] | None = None) -> None:
        """Append ``records`` to ``partition`` as one batch and flush it; ``then`` runs on the
        event loop after the append, before the next write to the partition may start.

        Args:
            run: runs a blocking call on the thread pool (``broker._in_executor``).

        Raises:
            KafkalogError, OSError: the append failed (nothing of it is visible).
        """
        async with self._locks[partition]:
            await run(self._append, partition, list(records))
            if then is not None:
                then()

    def _append(self, partition: int, records: list[Record]) -> None:
        log = self.logs[partition]
        builder = RecordBatchBuilder()
        now = _now_ms()
        for key, value in records:
            builder.append(key, value, timestamp=now)
        epoch = log.latest_epoch
        # flushed under the topic's flush.messages/flush.ms, as every append of this broker
        log.append(builder.build(), leader_epoch=epoch if epoch is not None and epoch > 0 else 0)


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
