"""The broker's topic admin requests: DeleteTopics, CreatePartitions and DeleteRecords, one
handler method each (Kafka's ``KafkaApis``/``ControllerApis`` ``handle*Request``).

**DeleteTopics** deletes Kafka's way (``LogManager.asyncDelete``): the topic leaves the metadata
file (with its name in a ``deleting`` list), every partition's log is closed, dropped from the
checkpoints and its directory renamed ``<topic>-<partition>.<uuid>-delete`` (durably), the
``deleting`` entry is dropped, and the renamed directories are removed in the background. A
crash in between is finished by the next start (``_state.py``: directories of a ``deleting``
topic are renamed, ``-delete`` directories removed), so a deleted topic never comes back.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from ..filenames import INTERNAL_TOPICS
from ..errors import KafkalogError, LogClosedError, OffsetOutOfRangeError
from ..protocol import ErrorCode, Request
from ._deletion import remove_deleted
from ._state import MAX_PARTITIONS_PER_TOPIC, _BrokerState, _Partition

_log = logging.getLogger(__package__)

#: DeleteTopics answers TOPIC_DELETION_DISABLED from this version (INVALID_REQUEST before).
_DELETION_DISABLED_VERSION = 3
#: DeleteRecords: offset -1 means "up to the high watermark" (``DeleteRecordsRequest.HIGH_WATERMARK``).
_HIGH_WATERMARK = -1
_UNKNOWN = -1
_UNKNOWN_TOPIC = "This server does not host this topic-partition."


class _TopicAdminHandlers(_BrokerState):
    """DeleteTopics, CreatePartitions and DeleteRecords."""

    # -- DeleteTopics ---------------------------------------------------------------------------

    async def _delete_topics(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        names = body["topic_names"]
        counts = Counter(names)
        results = []
        assert self._admin_lock is not None
        async with self._admin_lock:
            for name in names:
                code, message = await self._delete_one(name, counts[name] > 1, request)
                results.append({"name": name, "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "responses": results}

    async def _delete_one(self, name: str, duplicate: bool, request: Request) -> tuple[ErrorCode, str | None]:
        if not self.config.delete_topic_enable:
            code = (ErrorCode.TOPIC_DELETION_DISABLED if request.api_version >= _DELETION_DISABLED_VERSION
                    else ErrorCode.INVALID_REQUEST)
            return code, "Topic deletion is disabled."
        if duplicate:
            return ErrorCode.INVALID_REQUEST, "Duplicate topic name."
        if name in INTERNAL_TOPICS:
            self._unsupported(request.client_id, f"deleting the internal topic {name}")
            return ErrorCode.INVALID_TOPIC_EXCEPTION, (
                f"Topic {name} is a kafka internal topic and is not allowed to be marked for deletion."
            )
        if name not in self._topics:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC
        return await self._delete_topic_here(name)

    async def _delete_topic_here(self, name: str) -> tuple[ErrorCode, str | None]:
        """Delete a topic's logs on this broker (DeleteTopics, or StopReplica with delete for
        its last hosted partition); the steps are the module docstring's."""
        topic = self._topics[name]
        # 1. The topic leaves the metadata, its name kept as "deleting" until the renames are done.
        self._deleting.add(name)
        remaining = {n: t for n, t in self._topics.items() if n != name}
        try:
            await self._in_executor(self._write_metadata, remaining, self._producer_id_block_end)
        except OSError as e:
            self._deleting.discard(name)
            _log.error("deleting topic %s failed: %s", name, e)
            return ErrorCode.KAFKA_STORAGE_ERROR, str(e)
        del self._topics[name]
        # Fetchers stop writing to the logs before they close.
        self.replica_manager.stop_fetching([(name, partition.index) for partition in topic.partitions])
        for partition in topic.partitions:
            partition.notify()  # long polls answer now (the partition is gone)
        # 2. Each log closed and its directory renamed "-delete" (durable).
        try:
            doomed = await self._in_executor(_rename_all, topic.partitions)
        except (KafkalogError, OSError) as e:
            # The name stays "deleting" in the metadata: the next start finishes the renames.
            _log.error("deleting topic %s failed (the next start finishes it): %s", name, e)
            return ErrorCode.KAFKA_STORAGE_ERROR, str(e)
        # 3. Done: the metadata forgets the name, the files go in the background.
        self._deleting.discard(name)
        try:
            await self._in_executor(self._write_metadata, dict(self._topics), self._producer_id_block_end)
        except OSError as e:
            _log.error("writing the metadata after deleting %s failed (the next start retries): %s", name, e)
        self._remove_in_background(doomed)
        _log.info("deleted topic %s (%d partitions)", name, len(topic.partitions))
        return ErrorCode.NONE, None

    async def _delete_partition(self, topic: str, index: int) -> None:
        """StopReplica with delete: the partition stops here; once no partition of the topic is
        a replica here any more, the topic's logs are deleted (a topic's partitions are one
        dense list on a broker, so single partitions are not deleted on their own)."""
        t = self._topics.get(topic)
        if t is None:
            return
        me = self.config.node_id
        if all(p.state.leader != me and me not in p.state.replicas for p in t.partitions):
            assert self._admin_lock is not None
            async with self._admin_lock:
                if topic in self._topics:
                    await self._delete_topic_here(topic)

    def _remove_in_background(self, directories: list[Path]) -> None:
        """Remove ``-delete`` directories on the thread pool (``Broker.stop`` waits for it)."""
        if directories:
            assert self._loop is not None
            self._loop.run_in_executor(self._executor, remove_deleted, list(directories))

    # -- CreatePartitions -----------------------------------------------------------------------

    async def _create_partitions(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        counts = Counter(t["name"] for t in body["topics"])
        results = []
        assert self._admin_lock is not None
        async with self._admin_lock:
            for t in body["topics"]:
                code, message = await self._create_partitions_one(t, counts[t["name"]] > 1, body["validate_only"])
                results.append({"name": t["name"], "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "results": results}

    async def _create_partitions_one(self, t: dict[str, Any], duplicate: bool, validate_only: bool
                                     ) -> tuple[ErrorCode, str | None]:
        name, count, assignments = t["name"], t["count"], t["assignments"]
        if duplicate:
            return ErrorCode.INVALID_REQUEST, "Duplicate topic name."
        topic = self._topics.get(name)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC
        current = len(topic.partitions)
        # Kafka's ReplicationControlManager.createPartitions messages.
        if count < current:
            return ErrorCode.INVALID_PARTITIONS, (
                f"The topic {name} currently has {current} partition(s); {count} would not be an increase.")
        if count == current:
            return ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."
        if count > MAX_PARTITIONS_PER_TOPIC:
            return ErrorCode.INVALID_PARTITIONS, (
                f"Number of partitions {count} is above this broker's limit of {MAX_PARTITIONS_PER_TOPIC}")
        added = count - current
        if assignments is not None:
            if len(assignments) != added:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"Attempted to add {added} additional partition(s), but only {len(assignments)} assignment(s) "
                    "were specified.")
            for a in assignments:
                if a["broker_ids"] != [self.config.node_id]:
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                        f"Replica assignment {a['broker_ids']} names brokers other than this single node "
                        f"({self.config.node_id})")
        refusal = self._partition_refusal(added)
        if refusal is not None:
            return ErrorCode.POLICY_VIOLATION, refusal
        if validate_only:
            return ErrorCode.NONE, None
        try:
            # A snapshot of the topics: the thread pool never iterates the loop's own dict.
            await self._in_executor(self._add_partitions_blocking, topic, count, dict(self._topics))
        except (KafkalogError, OSError) as e:
            _log.error("adding partitions to %s failed: %s", name, e)
            return ErrorCode.KAFKA_STORAGE_ERROR, str(e)
        _log.info("topic %s now has %d partitions", name, count)
        return ErrorCode.NONE, None

    def _add_partitions_blocking(self, topic: Any, count: int, topics: dict[str, Any]) -> None:
        """Declare the new count first (a crash then leaves partitions the next start creates,
        never directories the metadata does not know), then open the new logs."""
        config = self.config.topic_config(topic.overrides)
        topic.planned = count
        opened: list[_Partition] = []
        try:
            self._write_metadata(topics, self._producer_id_block_end)
            for index in range(len(topic.partitions), count):
                opened.append(self._new_partition(topic.name, index, self._open_log(topic.name, index, config,
                                                                                   topic.topic_id)))
        except BaseException:
            for partition in opened:
                try:
                    partition.log.close()
                except (KafkalogError, OSError):
                    _log.exception("closing %s-%d failed", topic.name, partition.index)
            topic.planned = 0
            try:
                self._write_metadata(topics, self._producer_id_block_end)
            except OSError:
                _log.exception("restoring the metadata of %s failed", topic.name)
            raise
        topic.partitions.extend(opened)
        topic.planned = 0

    # -- DeleteRecords --------------------------------------------------------------------------

    async def _delete_records(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        topics = []
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                out = {"partition_index": p["partition_index"], "low_watermark": _UNKNOWN, "error_code": ErrorCode.NONE}
                partitions.append(out)
                partition = self._partition(t["name"], p["partition_index"])
                if partition is None:
                    out["error_code"] = self._absent_partition_error(t["name"], p["partition_index"])
                    continue
                if not partition.state.is_leader:
                    # Kafka's ReplicaManager.deleteRecordsOnLocalLog: only the leader deletes;
                    # followers learn the new log start from its fetch answers.
                    out["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    continue
                try:
                    out["low_watermark"] = await self._in_executor(_delete_records, partition, p["offset"])
                except (KafkalogError, OSError) as e:
                    out["error_code"] = _delete_records_error(e)
            topics.append({"name": t["name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}


def _rename_all(partitions: list[_Partition]) -> list[Path]:
    """Rename every partition's directory for deletion (blocking); the renamed paths."""
    return [partition.log.rename_for_delete() for partition in partitions]


class _OffsetOutOfRange(KafkalogError):
    """A DeleteRecords offset that is neither -1 nor within the log."""


def _delete_records(partition: _Partition, offset: int) -> int:
    """Kafka's ``UnifiedLog.deleteRecords``: -1 means the high watermark; other negative
    offsets are out of range. Returns the low watermark (the log start offset)."""
    log = partition.log
    if offset == _HIGH_WATERMARK:
        offset = log.high_watermark
    if offset < 0:
        raise _OffsetOutOfRange(f"the offset {offset} to delete records before is negative",
                                file=str(log.directory))
    return log.delete_records(offset)


def _delete_records_error(e: BaseException) -> ErrorCode:
    if isinstance(e, (OffsetOutOfRangeError, _OffsetOutOfRange)):
        return ErrorCode.OFFSET_OUT_OF_RANGE
    if isinstance(e, LogClosedError):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # deleted meanwhile
    _log.error("DeleteRecords failed: %s", e)
    return ErrorCode.KAFKA_STORAGE_ERROR
