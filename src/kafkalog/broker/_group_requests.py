"""The broker's group coordinator requests, one handler method each (Kafka's
``KafkaApis.handle*Request``): FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups and DeleteGroups. They
translate between the wire bodies (``kafkalog.protocol``) and the coordinator's rules
(``_coordinator.py``); ``__consumer_offsets`` is created on the first request that needs it,
as Kafka creates it on the first FindCoordinator for a group.

FindCoordinator for a transactional id is answered at once with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53): it is the error kafka-python, librdkafka, aiokafka
and kafkajs all treat as fatal for a transactional producer (COORDINATOR_NOT_AVAILABLE, which
this broker answered before, is retriable: clients retried until their timeout).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ..errors import KafkalogError
from ..protocol import CONSUMER_OFFSETS_TOPIC, ErrorCode, Request
from ._coordinator import INVALID_OFFSET, GroupCoordinator
from ._limits import RateLimitedLog
from ._offsets_topic import OffsetsTopic, StoreError, offsets_topic_overrides
from ._state import _BrokerState, _Topic
from ._unsupported import PEER

_log = logging.getLogger(__package__)

#: FindCoordinator's key types (``CoordinatorType``): a group, a transactional id.
_GROUP_KEY_TYPE = 0
_TRANSACTION_KEY_TYPE = 1
#: FindCoordinator batches keys from v4; JoinGroup requires a known member id from v4 (KIP-394).
_BATCHED_FIND_COORDINATOR = 4
_REQUIRE_MEMBER_ID_VERSION = 4
#: JoinGroup v0 has no rebalance timeout: the session timeout is used.
_REBALANCE_TIMEOUT_VERSION = 1
#: JoinGroup's protocol name is nullable from v7 (before, "no protocol" is an empty string).
_NULLABLE_PROTOCOL_NAME = 7
#: LeaveGroup leaves several members from v3; OffsetFetch fetches several groups from v8.
_BATCHED_LEAVE = 3
_BATCHED_OFFSET_FETCH = 8
#: OffsetFetch v0-1 could not ask for "all topics"; from v2 a null list means all.
_NO_NODE = -1
#: Kafka's "authorized operations not requested".
_OPERATIONS_NOT_REQUESTED = -(2**31)
#: AclOperation codes a group supports (READ, DESCRIBE, DELETE), all allowed (no authorizer).
_GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8))
_warn_transactions = RateLimitedLog(_log)


class _OffsetsLeadership:
    """A cluster broker's appends to ``__consumer_offsets`` (Kafka's coordinator appends with
    ``acks=-1`` through ``ReplicaManager.appendRecords``): as the partition's leader, refused
    below ``min.insync.replicas``, answered once the high watermark passes them or
    ``offsets.commit.timeout.ms`` is over."""

    def __init__(self, broker: _GroupHandlers) -> None:
        self._broker = broker

    def _leader_partition(self, index: int) -> Any:
        partition = self._broker._partition(CONSUMER_OFFSETS_TOPIC, index)
        if partition is None:
            raise StoreError(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    def append(self, index: int, log: Any, batch: Any) -> tuple[int, int]:
        partition = self._leader_partition(index)
        manager = self._broker.replica_manager
        # Kafka appends under the partition's leaderIsrUpdateLock: a role change waits.
        with partition.role_lock:
            state = partition.state
            if partition.log is not log or not state.is_leader:
                raise StoreError(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            # Partition.appendRecordsToLeader: acks=-1 below min.insync.replicas is refused before the append.
            if len(state.isr) < manager.min_insync_replicas(CONSUMER_OFFSETS_TOPIC):
                raise StoreError(index, ErrorCode.NOT_ENOUGH_REPLICAS)
            info = log.append(batch, leader_epoch=state.leader_epoch)
            return info.last_offset + 1, state.leader_epoch

    async def replicated(self, index: int, next_offset: int, epoch: int) -> ErrorCode:
        partition = self._leader_partition(index)
        manager = self._broker.replica_manager
        manager.after_append(partition)
        partition.notify()  # followers' long polls
        codes = await manager.await_replication([(partition, next_offset, epoch)],
                                                self._broker.config.groups.offsets_commit_timeout_ms)
        return codes[0]


class _GroupHandlers(_BrokerState):
    """The group coordinator's request handlers and its lifecycle in the broker."""

    _coordinator: GroupCoordinator | None = None
    _offsets_topic: OffsetsTopic | None = None
    _expiry_task: asyncio.Task | None = None
    #: In a cluster: the ``__consumer_offsets`` partitions being loaded, with the leader epoch
    #: that started the load (Kafka's ``loadingPartitions``).
    _offsets_loading: dict[int, int]
    _offsets_loads: set[asyncio.Task]

    # -- lifecycle --------------------------------------------------------------------------------

    async def _start_groups(self) -> None:
        """Create the coordinator; on a single node load ``__consumer_offsets`` if the
        directory has it; in a cluster follow the leadership of its partitions."""
        replicated = self.replica_manager.replicated
        self._offsets_topic = OffsetsTopic(self.config.groups, _OffsetsLeadership(self) if replicated else None)
        self._coordinator = GroupCoordinator(self.config.groups, self._offsets_topic, self._in_executor,
                                             self._partition_exists)
        self._offsets_loading = {}
        self._offsets_loads = set()
        if replicated:
            # Kafka's GroupCoordinator.onElection/onResignation, driven by LeaderAndIsr.
            self.replica_manager.add_role_listener(self._offsets_role_changed)
        else:
            topic = self._topics.get(CONSUMER_OFFSETS_TOPIC)
            if topic is not None:
                await self._attach_offsets_topic(topic)
        self._expiry_task = asyncio.create_task(self._expiry_loop())

    def _offsets_role_changed(self, topic: str, index: int, is_leader: bool, leader_epoch: int) -> None:
        """A role change of a hosted partition: load the groups of a ``__consumer_offsets``
        partition this broker now leads, unload those of one it no longer leads."""
        if topic != CONSUMER_OFFSETS_TOPIC or self._offsets_topic is None or self._coordinator is None:
            return
        if is_leader:
            if index in self._offsets_topic.logs or self._offsets_loading.get(index) == leader_epoch:
                return  # still the leader (a new ISR or epoch): the loaded state is current
            self._offsets_loading[index] = leader_epoch
            task = asyncio.ensure_future(self._load_offsets_partition(index, leader_epoch))
            self._offsets_loads.add(task)
            task.add_done_callback(self._offsets_loads.discard)
            return
        self._offsets_loading.pop(index, None)
        self._offsets_topic.unload_partition(index)
        self._coordinator.unload(index)

    async def _load_offsets_partition(self, index: int, epoch: int) -> None:
        """Kafka's ``loadGroupsAndOffsets``: read the partition to its log end, then answer
        for its groups (COORDINATOR_LOAD_IN_PROGRESS until then)."""
        assert self._offsets_topic is not None and self._coordinator is not None
        partition = self._partition(CONSUMER_OFFSETS_TOPIC, index)
        if partition is None:
            self._offsets_loading.pop(index, None)
            return
        # The group -> partition mapping uses the topic's real partition count, whichever
        # partitions are hosted here.
        cluster = getattr(self, "_cluster", None)
        assignment = cluster.cache.assignments.get(CONSUMER_OFFSETS_TOPIC) if cluster is not None else None
        if assignment is not None:
            self._offsets_topic.partitions = len(assignment.partitions)
        elif not self._offsets_topic.ready:
            topic = self._topics.get(CONSUMER_OFFSETS_TOPIC)
            self._offsets_topic.partitions = max(self.config.groups.offsets_partitions,
                                                 topic.partition_count if topic is not None else 0)
        started = time.monotonic()
        loaded = await self._in_executor(OffsetsTopic.load_partition, index, partition.log)
        if self._offsets_loading.get(index) != epoch or not partition.state.is_leader:
            return  # resigned (or re-elected) meanwhile: that change decides
        del self._offsets_loading[index]
        self._offsets_topic.add_partition(index, partition.log)
        self._coordinator.load(loaded)
        _log.info("loaded %s-%d in epoch %d (%d committed offsets) in %.0f ms", CONSUMER_OFFSETS_TOPIC, index, epoch,
                  len(loaded.offsets), (time.monotonic() - started) * 1000)

    def _release_groups(self) -> None:
        """Answer the JoinGroup/SyncGroup requests waiting for a rebalance and stop the timers
        (the broker is stopping: those requests must not hold their connections)."""
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        if self._coordinator is not None:
            self._coordinator.close()

    async def _stop_groups(self) -> None:
        """Release the group requests, then stop the cleaner (before the logs close)."""
        self._release_groups()
        if self._offsets_topic is not None:
            await self._in_executor(self._offsets_topic.stop)

    async def _attach_offsets_topic(self, topic: _Topic) -> None:
        assert self._offsets_topic is not None and self._coordinator is not None
        overrides = offsets_topic_overrides(self.config.groups)
        if topic.overrides.get("cleanup.policy") != overrides["cleanup.policy"]:
            # A directory copied from another broker, found without this broker's metadata:
            # Kafka's __consumer_offsets is compacted whatever the broker defaults say.
            topic.overrides = {**topic.overrides, "cleanup.policy": overrides["cleanup.policy"]}
            config = self.config.topic_config(topic.overrides)
            for partition in topic.partitions:
                partition.log.config = config
            await self._in_executor(self._write_metadata, dict(self._topics), self._producer_id_block_end)
        self._offsets_topic.attach({p.index: p.log for p in topic.partitions}, topic.partition_count)
        loaded = await self._in_executor(self._offsets_topic.load)
        self._coordinator.load(loaded)

    async def _ensure_offsets_topic(self) -> bool:
        """Create ``__consumer_offsets`` if it does not exist yet; False if it cannot be."""
        if self._offsets_topic is None:
            return False
        if self._offsets_topic.ready or self.replica_manager.replicated:
            return True  # in a cluster the controller creates it (FindCoordinator); loads follow leadership
        assert self._admin_lock is not None
        async with self._admin_lock:
            if self._offsets_topic.ready:
                return True
            existing = self._topics.get(CONSUMER_OFFSETS_TOPIC)
            if existing is not None:  # created meanwhile by other means (a Metadata auto-creation)
                await self._attach_offsets_topic(existing)
                return True
            count = self.config.groups.offsets_partitions
            if self._partition_refusal(count) is not None:
                return False
            overrides = offsets_topic_overrides(self.config.groups)
            try:
                await self._create_topic(CONSUMER_OFFSETS_TOPIC, count, overrides, self.config.topic_config(overrides))
                await self._attach_offsets_topic(self._topics[CONSUMER_OFFSETS_TOPIC])
            except (KafkalogError, OSError) as e:
                _log.error("creating %s failed: %s", CONSUMER_OFFSETS_TOPIC, e)
                return False
        return True

    def _partition_exists(self, topic: str, partition: int) -> bool:
        cluster = getattr(self, "_cluster", None)
        if cluster is not None:  # Kafka checks its metadata cache, not the partitions hosted here
            assignment = cluster.cache.assignments.get(topic)
            return assignment is not None and partition in assignment.partitions
        return self._partition(topic, partition) is not None

    async def _expiry_loop(self) -> None:
        interval = self.config.groups.offsets_retention_check_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if self._coordinator is not None and self._offsets_topic is not None and self._offsets_topic.ready:
                await self._coordinator.expire_offsets()

    async def _coordinator_ready(self) -> GroupCoordinator | None:
        if self._stopping or not await self._ensure_offsets_topic():
            return None
        return self._coordinator

    def _not_served(self, group_id: str) -> ErrorCode | None:
        """In a cluster, why this broker does not answer for ``group_id`` (Kafka's
        ``isCoordinatorForGroup``/``isGroupLoading``): NOT_COORDINATOR unless it leads the
        group's ``__consumer_offsets`` partition, COORDINATOR_LOAD_IN_PROGRESS while that
        partition loads; None when it answers (always, on a single node)."""
        store = self._offsets_topic
        if not self.replica_manager.replicated or store is None:
            return None
        if not store.ready:
            return ErrorCode.NOT_COORDINATOR
        index = store.partition_of(group_id)
        if index in self._offsets_loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if index not in store.logs:
            return ErrorCode.NOT_COORDINATOR
        return None

    async def _coordinator_of(self, group_id: str) -> tuple[GroupCoordinator | None, ErrorCode]:
        """The coordinator for ``group_id``, or None and the error to answer (NOT_COORDINATOR
        or COORDINATOR_LOAD_IN_PROGRESS in a cluster, else COORDINATOR_NOT_AVAILABLE)."""
        code = self._not_served(group_id)
        if code is not None:
            return None, code
        return await self._coordinator_ready(), ErrorCode.COORDINATOR_NOT_AVAILABLE

    # -- FindCoordinator --------------------------------------------------------------------------

    async def _find_coordinator(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        version = request.api_version
        keys = body["coordinator_keys"] if version >= _BATCHED_FIND_COORDINATOR else [body["key"]]
        answers = []
        for key in keys:
            if body["key_type"] == _TRANSACTION_KEY_TYPE:
                _warn_transactions("refusing FindCoordinator for transactional id %r from client %r: kafkalog's "
                                   "broker has no transaction coordinator (answered TRANSACTIONAL_ID_AUTHORIZATION_"
                                   "FAILED, which clients treat as fatal)", key, request.client_id)
                code, message = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, (
                    "kafkalog's broker has no transaction coordinator")
            elif body["key_type"] != _GROUP_KEY_TYPE:
                code, message = ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {body['key_type']}"
            elif not await self._ensure_offsets_topic():
                code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{CONSUMER_OFFSETS_TOPIC} cannot be created"
            else:
                code, message = ErrorCode.NONE, None
            ok = code is ErrorCode.NONE
            answers.append({
                "key": key, "error_code": code, "error_message": message,
                "node_id": self.config.node_id if ok else _NO_NODE, "host": self.advertised_host if ok else "",
                "port": self.port if ok else _NO_NODE,
            })
        if version >= _BATCHED_FIND_COORDINATOR:
            return {"throttle_time_ms": 0, "coordinators": answers}
        return {"throttle_time_ms": 0, **answers[0]}

    # -- membership -------------------------------------------------------------------------------

    async def _join_group(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        version = request.api_version
        rebalance = body["rebalance_timeout_ms"] if version >= _REBALANCE_TIMEOUT_VERSION else body["session_timeout_ms"]
        coordinator, unavailable = await self._coordinator_of(body["group_id"])
        if coordinator is None:
            result: dict[str, Any] = {"error_code": unavailable}
        else:
            result = await coordinator.join(
                body["group_id"], body["member_id"], body["group_instance_id"], request.client_id, client_host(PEER.get()),
                body["session_timeout_ms"], rebalance, body["protocol_type"],
                [(p["name"], bytes(p["metadata"])) for p in body["protocols"]],
                require_known_member_id=version >= _REQUIRE_MEMBER_ID_VERSION,
            )
        response = {"throttle_time_ms": 0, "generation_id": -1, "protocol_type": None, "protocol_name": None,
                    "leader": "", "skip_assignment": False, "member_id": body["member_id"], "members": [], **result}
        if version < _NULLABLE_PROTOCOL_NAME and response["protocol_name"] is None:
            response["protocol_name"] = ""  # Kafka's GroupCoordinator.NoProtocol
        return response

    async def _sync_group(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        coordinator, unavailable = await self._coordinator_of(body["group_id"])
        if coordinator is None:
            result: dict[str, Any] = {"error_code": unavailable}
        else:
            result = await coordinator.sync(
                body["group_id"], body["generation_id"], body["member_id"], body["group_instance_id"],
                body["protocol_type"], body["protocol_name"],
                [(a["member_id"], bytes(a["assignment"])) for a in body["assignments"]],
            )
        result.pop("member_id", None)
        return {"throttle_time_ms": 0, "protocol_type": None, "protocol_name": None, "assignment": b"", **result}

    async def _heartbeat(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        coordinator, unavailable = await self._coordinator_of(body["group_id"])
        code = unavailable if coordinator is None else coordinator.heartbeat(
            body["group_id"], body["member_id"], body["group_instance_id"], body["generation_id"])
        return {"throttle_time_ms": 0, "error_code": code}

    async def _leave_group(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        batched = request.api_version >= _BATCHED_LEAVE
        leaving = ([(m["member_id"], m["group_instance_id"]) for m in body["members"]] if batched
                   else [(body["member_id"], None)])
        coordinator, unavailable = await self._coordinator_of(body["group_id"])
        if coordinator is None:
            return {"throttle_time_ms": 0, "error_code": unavailable, "members": []}
        code, codes = coordinator.leave(body["group_id"], leaving)
        if not batched:
            return {"throttle_time_ms": 0, "error_code": codes[0] if codes else code, "members": []}
        return {"throttle_time_ms": 0, "error_code": code, "members": [
            {"member_id": m, "group_instance_id": i, "error_code": c} for (m, i), c in zip(leaving, codes)
        ]}

    # -- offsets ----------------------------------------------------------------------------------

    async def _offset_commit(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        entries = [
            (t["name"], p["partition_index"], p["committed_offset"], p["committed_leader_epoch"],
             p["committed_metadata"], p["commit_timestamp"])
            for t in body["topics"] for p in t["partitions"]
        ]
        coordinator, unavailable = await self._coordinator_of(body["group_id"])
        if coordinator is None:
            codes = [unavailable] * len(entries)
        else:
            codes = await coordinator.commit(
                body["group_id"], body["generation_id_or_member_epoch"], body["member_id"], body["group_instance_id"],
                entries, body["retention_time_ms"],
            )
        it = iter(codes)
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": next(it)} for p in t["partitions"]
            ]} for t in body["topics"]
        ]}

    async def _offset_fetch(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        batched = request.api_version >= _BATCHED_OFFSET_FETCH
        asked = body["groups"] if batched else [{"group_id": body["group_id"], "topics": body["topics"]}]
        coordinator = await self._coordinator_ready()
        groups = []
        for g in asked:
            wanted = None if g["topics"] is None else [(t["name"], t["partition_indexes"]) for t in g["topics"]]
            code = self._not_served(g["group_id"])
            if coordinator is None or code is not None:
                code = code or ErrorCode.COORDINATOR_NOT_AVAILABLE
                groups.append({"group_id": g["group_id"], "topics": [], "error_code": code})
                continue
            topics = []
            for topic, partitions in coordinator.fetch(g["group_id"], wanted):
                topics.append({"name": topic, "partitions": [{
                    "partition_index": p,
                    "committed_offset": INVALID_OFFSET if c is None else c.offset,
                    "committed_leader_epoch": -1 if c is None or c.leader_epoch is None else c.leader_epoch,
                    "metadata": "" if c is None else c.metadata,
                    "error_code": ErrorCode.NONE,
                } for p, c in partitions]})
            groups.append({"group_id": g["group_id"], "topics": topics, "error_code": ErrorCode.NONE})
        if batched:
            return {"throttle_time_ms": 0, "groups": groups}
        return {"throttle_time_ms": 0, "topics": groups[0]["topics"], "error_code": groups[0]["error_code"]}

    async def _offset_delete(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        wanted = [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in body["topics"]]
        coordinator, unavailable = await self._coordinator_of(body["group_id"])
        if coordinator is None:
            code, codes = unavailable, []
        else:
            code, codes = await coordinator.delete_offsets(body["group_id"], wanted)
        topics = [] if code is not ErrorCode.NONE else [
            {"name": t, "partitions": [{"partition_index": p, "error_code": c} for p, c in zip(ps, row)]}
            for (t, ps), row in zip(wanted, codes)
        ]
        return {"error_code": code, "throttle_time_ms": 0, "topics": topics}

    # -- listing, describing, deleting --------------------------------------------------------------

    async def _list_groups(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        coordinator = await self._coordinator_ready()
        if coordinator is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "groups": []}
        states = {s.lower() for s in body["states_filter"]}
        types = {t.lower() for t in body["types_filter"]}
        groups = coordinator.list_groups(states or None)
        if types:
            groups = [g for g in groups if g["group_type"] in types]
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": groups}

    async def _describe_groups(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        coordinator = await self._coordinator_ready()
        groups = []
        for group_id in body["groups"]:
            code = self._not_served(group_id)
            if coordinator is None or code is not None:
                code = code or ErrorCode.COORDINATOR_NOT_AVAILABLE
                groups.append({"error_code": code, "group_id": group_id,
                               "group_state": "", "protocol_type": "", "protocol_data": "", "members": []})
                continue
            described = coordinator.describe(group_id)
            described["authorized_operations"] = (
                _GROUP_OPERATIONS if body["include_authorized_operations"] else _OPERATIONS_NOT_REQUESTED)
            groups.append(described)
        return {"throttle_time_ms": 0, "groups": groups}

    async def _delete_groups(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        coordinator = await self._coordinator_ready()
        results = []
        for group_id in body["groups_names"]:
            code = self._not_served(group_id)
            if code is None:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE if coordinator is None else await coordinator.delete_group(group_id)
            results.append({"group_id": group_id, "error_code": code})
        return {"throttle_time_ms": 0, "results": results}


def client_host(peer: str) -> str:
    """Kafka's form of a client's address in group metadata ("/127.0.0.1") from the
    connection's ``host:port`` (:data:`PEER`)."""
    return "/" + peer.rsplit(":", 1)[0]
