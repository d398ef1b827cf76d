"""The broker's cluster and admin requests: ApiVersions, InitProducerId,
Metadata and CreateTopics, one handler method each (Kafka's ``KafkaApis.handle*Request``)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..filenames import INTERNAL_TOPICS, validate_topic_name
from ..errors import InvalidConfigError, KafkalogError
from ..protocol import ApiKey, ErrorCode, Request, supported_api_versions
from ._state import MAX_PARTITIONS_PER_TOPIC, PRODUCER_ID_BLOCK_SIZE, _BrokerState

_log = logging.getLogger(__package__)

# KIP-511: ApiVersions v3 names the client; Kafka answers INVALID_REQUEST to other names.
_SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?", re.ASCII)
_CLIENT_SOFTWARE_VERSION = 3
#: Metadata: from v1 a null topic list means all topics (in v0 an empty one does); from v4 the
#: request says whether topics may be created.
_NULL_MEANS_ALL_VERSION = 1
_AUTO_CREATE_FLAG_VERSION = 4
#: Kafka's "authorized operations not requested" (``Integer.MIN_VALUE``).
_OPERATIONS_NOT_REQUESTED = -(2**31)
#: CreateTopics: -1 partitions or replication factor means the broker's default.
_DEFAULT = -1
#: The producer id and epoch of an InitProducerId refusal.
_NO_PRODUCER_ID = -1
_NO_PRODUCER_EPOCH = -1
_FIRST_EPOCH = 0

# AclOperation codes for the authorized-operations bitfields of Metadata v8 (no authorizer:
# everything a topic or the cluster supports is allowed).
_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # READ..ALTER_CONFIGS
_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # CREATE..IDEMPOTENT_WRITE


class _AdminHandlers(_BrokerState):
    """The handlers of the requests that do not touch records."""


    async def _api_versions(self, request: Request) -> dict[str, Any]:
        if request.unsupported_api_versions:
            # KIP-511: the v0 layout with only ApiVersions' own range, so the client retries.
            spec = [v for v in supported_api_versions() if v["api_key"] == ApiKey.API_VERSIONS]
            return {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": spec}
        body = request.body or {}
        if request.api_version >= _CLIENT_SOFTWARE_VERSION and not (
            _SOFTWARE_NAME.fullmatch(body["client_software_name"] or "")
            and _SOFTWARE_NAME.fullmatch(body["client_software_version"] or "")
        ):
            return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
        return {"error_code": ErrorCode.NONE, "api_keys": supported_api_versions(), "throttle_time_ms": 0}

    async def _init_producer_id(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        if body["transactional_id"] is not None:
            self._unsupported(request.client_id, "transactions (InitProducerId with a transactional id)",
                              "answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
            return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "producer_id": _NO_PRODUCER_ID, "producer_epoch": _NO_PRODUCER_EPOCH}
        assert self._admin_lock is not None
        async with self._admin_lock:
            cluster = getattr(self, "_cluster", None)
            if self._next_producer_id >= self._producer_id_block_end and cluster is not None:
                # a cluster shares one id space: blocks are claimed in ZooKeeper (Kafka's
                # /latest_producer_id_block, a versioned write)
                start, last = await self._in_executor(cluster.zk.allocate_producer_ids, self.config.node_id,
                                                      PRODUCER_ID_BLOCK_SIZE)
                self._next_producer_id, self._producer_id_block_end = start, last + 1
            elif self._next_producer_id >= self._producer_id_block_end:
                end = self._producer_id_block_end + PRODUCER_ID_BLOCK_SIZE
                # The block end is durable before any id of the block is handed out.
                await self._in_executor(self._write_metadata, dict(self._topics), end)
                self._producer_id_block_end = end
            producer_id = self._next_producer_id
            self._next_producer_id += 1
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id,
                "producer_epoch": _FIRST_EPOCH}

    # -- Metadata and CreateTopics ----------------------------------------------------------------

    async def _metadata(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        version = request.api_version
        requested = body["topics"]
        all_topics = requested is None or (version < _NULL_MEANS_ALL_VERSION and not requested)
        if all_topics:
            names = sorted(self._topics)
        else:
            names = list(dict.fromkeys(t["name"] for t in requested))
        may_create = (
            self.config.auto_create_topics and (version < _AUTO_CREATE_FLAG_VERSION or body["allow_auto_topic_creation"]) and not all_topics
        )
        live = self.replica_manager.brokers()
        topics = []
        for name in names:
            error = ErrorCode.NONE
            if name not in self._topics:
                problem = self._topic_error(name) if may_create else None
                if validate_topic_name(name) is not None:
                    error = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif not may_create:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif problem is not None:
                    error = problem[0]  # a name colliding with an existing topic
                elif self._partition_refusal(self.config.num_partitions) is not None:
                    error = ErrorCode.POLICY_VIOLATION
                else:
                    assert self._admin_lock is not None
                    async with self._admin_lock:
                        if name not in self._topics:
                            try:
                                await self._create_topic(name, self.config.num_partitions, {}, self.config.topic_config())
                            except (KafkalogError, OSError) as e:
                                _log.error("auto-creating topic %s failed: %s", name, e)
                                error = ErrorCode.KAFKA_STORAGE_ERROR
            topic = self._topics.get(name)
            partitions = []
            if topic is not None and error is ErrorCode.NONE:
                for p in topic.partitions:
                    partitions.append(_partition_metadata(p.index, p.state.leader, p.state.leader_epoch, p.state.replicas,
                                                          p.state.isr, live, version))
            topics.append({
                "error_code": error,
                "name": name,
                "is_internal": name in INTERNAL_TOPICS,
                "partitions": partitions,
                "topic_authorized_operations": _TOPIC_OPERATIONS if body["include_topic_authorized_operations"]
                else _OPERATIONS_NOT_REQUESTED,
            })
        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": node, "host": host, "port": port, "rack": None}
                        for node, (host, port) in sorted(live.items())],
            "cluster_id": self._cluster_id,
            "controller_id": self.replica_manager.controller_id,
            "topics": topics,
            "cluster_authorized_operations": _CLUSTER_OPERATIONS if body["include_cluster_authorized_operations"]
            else _OPERATIONS_NOT_REQUESTED,
        }

    async def _create_topics(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        counts: dict[str, int] = {}
        for t in body["topics"]:
            counts[t["name"]] = counts.get(t["name"], 0) + 1
        results = []
        assert self._admin_lock is not None
        async with self._admin_lock:
            for t in body["topics"]:
                code, message = await self._create_one(t, counts, body["validate_only"])
                results.append({"name": t["name"], "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "topics": results}

    async def _create_one(self, t: dict[str, Any], counts: dict[str, int], validate_only: bool
                          ) -> tuple[int, str | None]:
        name = t["name"]
        if counts[name] > 1:
            return ErrorCode.INVALID_REQUEST, f"Create topics request contains multiple entries for the topic {name}"
        problem = self._topic_error(name)
        if problem is not None:
            return problem
        partitions, replication, assignments = t["num_partitions"], t["replication_factor"], t["assignments"]
        if assignments:
            if partitions != _DEFAULT or replication != _DEFAULT:
                return ErrorCode.INVALID_REQUEST, (
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at "
                    "the same time."
                )
            indexes = sorted(a["partition_index"] for a in assignments)
            if indexes != list(range(len(indexes))):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence"
            for a in assignments:
                if a["broker_ids"] != [self.config.node_id]:
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                        f"Replica assignment {a['broker_ids']} of partition {a['partition_index']} names brokers "
                        f"other than this single node ({self.config.node_id})"
                    )
            partitions = len(assignments)
        else:
            if partitions == _DEFAULT:
                partitions = self.config.num_partitions
            if partitions <= 0:
                return ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            if partitions > MAX_PARTITIONS_PER_TOPIC:
                return ErrorCode.INVALID_PARTITIONS, (
                    f"Number of partitions {partitions} is above this broker's limit of {MAX_PARTITIONS_PER_TOPIC}"
                )
            if replication == _DEFAULT:
                replication = self.config.default_replication_factor
            if replication <= 0:
                return ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            available = len(self.replica_manager.brokers())
            if replication > available:
                return ErrorCode.INVALID_REPLICATION_FACTOR, (
                    f"Replication factor: {replication} larger than available brokers: {available}."
                )
        overrides = {c["name"]: c["value"] for c in t["configs"]}
        try:
            config = self.config.topic_config(overrides)
        except InvalidConfigError as e:
            return ErrorCode.INVALID_CONFIG, str(e)
        refusal = self._partition_refusal(partitions)
        if refusal is not None:
            return ErrorCode.POLICY_VIOLATION, refusal
        if validate_only:
            return ErrorCode.NONE, None
        try:
            await self._create_topic(name, partitions, overrides, config)
        except (KafkalogError, OSError) as e:
            _log.error("creating topic %s failed: %s", name, e)
            return ErrorCode.KAFKA_STORAGE_ERROR, str(e)
        return ErrorCode.NONE, None


def _partition_metadata(index: int, leader: int, leader_epoch: int, replicas: Sequence[int], isr: Sequence[int],
                        live: Mapping[int, Any], version: int) -> dict[str, Any]:
    """A partition's Metadata entry as ``ZkMetadataCache.getPartitionMetadata`` gives it: a
    leader that is not live (or none) is LEADER_NOT_AVAILABLE with leader -1; the replicas and
    ISR are as recorded, except that v0 (``errorUnavailableEndpoints``) drops the dead ones and
    then answers REPLICA_NOT_AVAILABLE for a partition whose leader is alive."""
    leader = leader if leader in live else -1
    shown_replicas, shown_isr = list(replicas), list(isr)
    if version == 0:
        shown_replicas = [r for r in replicas if r in live]
        shown_isr = [r for r in isr if r in live]
    if leader < 0:
        error = ErrorCode.LEADER_NOT_AVAILABLE
    elif len(shown_replicas) < len(replicas) or len(shown_isr) < len(isr):
        error = ErrorCode.REPLICA_NOT_AVAILABLE
    else:
        error = ErrorCode.NONE
    return {
        "error_code": error, "partition_index": index, "leader_id": leader, "leader_epoch": leader_epoch,
        "replica_nodes": shown_replicas, "isr_nodes": shown_isr,
        "offline_replicas": [r for r in replicas if r not in live],
    }
