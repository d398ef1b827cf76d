"""The requests a broker answers differently in a cluster (``zookeeper.connect`` set):
Metadata, CreateTopics, DeleteTopics and CreatePartitions go through ZooKeeper (any broker
writes the request's znodes, the controller acts, the broker answers once its metadata cache
shows the result or ``timeout_ms`` passed), and ElectLeaders (key 43), which a single node
answers ELECTION_NOT_NEEDED. Kafka's ``ZkAdminManager`` and ``KafkaApis`` rules and messages.

Also the broker's side of joining: :meth:`_ClusterHandlers._start_cluster` and the stops.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections import Counter
from typing import Any

from ..checkpoint import new_topic_id
from ..errors import InvalidConfigError, KafkalogError
from ..filenames import INTERNAL_TOPICS, validate_topic_name
from ..log_config import parse_config_bool
from ..protocol import CONSUMER_OFFSETS_TOPIC, ErrorCode, Request, partition_for
from ._admin import _CLUSTER_OPERATIONS, _OPERATIONS_NOT_REQUESTED, _TOPIC_OPERATIONS, _partition_metadata
from ._cluster import ClusterMember, MetadataCache, PartitionListener
from ._offsets_topic import offsets_topic_overrides
from ._replica_assignment import assign_replicas, start_index_for_added
from ._state import MAX_PARTITIONS_PER_TOPIC, _BrokerState
from ._zk import NO_LEADER, PREFERRED_ELECTION_PATH, UNCLEAN_ELECTION_PATH, ZK_ERRORS, TopicAssignment

_log = logging.getLogger(__package__)

_DEFAULT = -1
_PREFERRED = 0
_UNCLEAN = 1
#: How long to keep retrying a preferred election while another one is in progress, in seconds.
_ELECTION_BUSY_S = 0.1
#: FindCoordinator: the group key type, the first batched version, "no node".
_GROUP_KEY_TYPE = 0
_BATCHED_FIND_COORDINATOR = 4
_NO_NODE = -1
#: The controller's message for a partition it does not have (``processReplicaLeaderElection``).
_NO_PARTITION = "The partition does not exist."
#: ``Errors.ELECTION_NOT_NEEDED``'s message (``new ApiError(Errors.ELECTION_NOT_NEEDED)``).
_NOT_NEEDED = "Leader election not needed for topic partition."



class _ClusterHandlers(_BrokerState):
    """Cluster mode's handlers; ``self._cluster`` is None on a single node."""

    _cluster: ClusterMember | None = None
    _replicas: PartitionListener | None = None

    # -- joining and leaving ------------------------------------------------------------------------

    def _cluster_member(self) -> ClusterMember | None:
        """This broker's :class:`ClusterMember` when ``zookeeper.connect`` is set (made once; it
        does not connect yet), whose ``live_brokers`` and ``alter_isr`` the replica manager is
        built with."""
        if self._cluster is None and self.config.cluster.enabled:
            self._cluster = ClusterMember(self.config.node_id, self.config.cluster, self._topic_unclean)
        return self._cluster

    async def _start_cluster(self) -> None:
        """Join the cluster when ``zookeeper.connect`` is set (after the listeners are bound
        and the replica manager started).

        Raises:
            KafkalogError: ZooKeeper unreachable, the broker id taken, or kazoo missing.
        """
        member = self._cluster_member()
        if member is None:
            return
        self._replicas = self._partition_listener()
        await member.start(self.advertised_host, self.port, self._cluster_id, self._replicas)
        self._cluster_id = member.cluster_id
        self._producer_id_block_end = self._next_producer_id  # the first InitProducerId claims a block in ZooKeeper

    def _coordination(self) -> tuple[Any, Any]:
        """ZooKeeper's ``brokers``/``alter_isr`` for the replica manager when
        ``zookeeper.connect`` is set (the member is made here; it connects at start)."""
        member = self._cluster_member()
        if member is None:
            return None, None
        return member.live_brokers, member.alter_isr

    async def _live_brokers(self) -> list[int]:
        """The live broker ids as ZooKeeper has them now (``/brokers/ids``)."""
        assert self._cluster is not None
        try:
            return list(await self._in_executor(self._cluster.zk.brokers))
        except ZK_ERRORS as e:
            _log.warning("reading the live brokers failed (%s); using the cached list", e)
            return list(self._cluster.cache.brokers)

    async def _assigned_topic(self, topic: str) -> tuple[dict[str, str], str | None]:
        """A topic the controller assigned here: its overrides (``/config/topics/<t>``) and its
        id (``/brokers/topics/<t>``), so the local logs carry the cluster's config and id."""
        if self._cluster is None:
            return {}, None
        overrides = await self._in_executor(self._cluster.zk.topic_config, topic)
        assignment = self._cluster.cache.assignments.get(topic)
        return overrides, assignment.topic_id if assignment is not None else None

    def _partition_listener(self) -> PartitionListener:
        """The broker's replica manager, which the member tells every partition state."""
        manager = self.replica_manager
        if not manager.replicated:
            raise KafkalogError("the replica manager was built without the cluster's brokers/alter_isr "
                                "callables (Broker(..., brokers=..., alter_isr=...) given only one)")
        return manager

    def _topic_unclean(self, topic: str) -> bool | None:
        """A topic's ``unclean.leader.election.enable`` (its ``/config/topics`` override, else the
        broker's topic default), for the controller's thread."""
        assert self._cluster is not None
        value = self._cluster.zk.topic_config(topic).get("unclean.leader.election.enable")
        if value is None:
            value = dict(self.config.topic_defaults).get("unclean.leader.election.enable")
        try:
            return None if value is None else parse_config_bool("unclean.leader.election.enable", value)
        except InvalidConfigError:
            return None

    def _absent_partition_error(self, topic: str, index: int) -> ErrorCode:
        """Kafka's ``ReplicaManager.getPartitionOrError``: a partition the cluster has but this
        broker holds no replica of is NOT_LEADER_OR_FOLLOWER (the client refreshes its
        metadata), one the cluster does not have UNKNOWN_TOPIC_OR_PARTITION."""
        if self._cluster is not None:
            assignment = self._cluster.cache.assignments.get(topic)
            if assignment is not None and index in assignment.partitions:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    async def _leave_cluster_leadership(self) -> None:
        """Controlled shutdown (before the broker stops serving)."""
        if self._cluster is not None:
            try:
                await self._cluster.controlled_shutdown()
            except ZK_ERRORS as e:
                _log.warning("controlled shutdown failed: %s", e)

    async def _stop_cluster(self) -> None:
        if self._cluster is not None:
            await self._cluster.stop()

    # -- Metadata -----------------------------------------------------------------------------------

    async def _cluster_metadata(self, request: Request) -> dict[str, Any]:
        assert self._cluster is not None
        body = request.body or {}
        version = request.api_version
        cache = self._cluster.cache
        requested = body["topics"]
        all_topics = requested is None or (version < 1 and not requested)
        names = sorted(cache.assignments) if all_topics else list(dict.fromkeys(t["name"] for t in requested))
        may_create = (self.config.auto_create_topics and not all_topics
                      and (version < 4 or body["allow_auto_topic_creation"]))
        topics = []
        for name in names:
            error = ErrorCode.NONE
            if name not in cache.assignments:
                if validate_topic_name(name) is not None:
                    error = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif not may_create:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code, _ = await self._cluster_create(name, self.config.num_partitions, _DEFAULT, None, {}, 0)
                    # Kafka answers LEADER_NOT_AVAILABLE while an auto-created topic gets its leaders
                    error = ErrorCode.LEADER_NOT_AVAILABLE if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS) \
                        else ErrorCode(code)
            partitions = []
            assignment = cache.assignments.get(name)
            if assignment is not None and error is ErrorCode.NONE:
                partitions = [self._zk_partition_metadata(cache, name, p, r, version)
                              for p, r in sorted(assignment.partitions.items())]
            topics.append({
                "error_code": error, "name": name, "is_internal": name in INTERNAL_TOPICS, "partitions": partitions,
                "topic_authorized_operations": _TOPIC_OPERATIONS if body["include_topic_authorized_operations"]
                else _OPERATIONS_NOT_REQUESTED,
            })
        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": b, "host": h, "port": p, "rack": None} for b, (h, p) in sorted(cache.brokers.items())],
            "cluster_id": self._cluster_id,
            "controller_id": cache.controller_id,
            "topics": topics,
            "cluster_authorized_operations": _CLUSTER_OPERATIONS if body["include_cluster_authorized_operations"]
            else _OPERATIONS_NOT_REQUESTED,
        }

    @staticmethod
    def _zk_partition_metadata(cache: MetadataCache, topic: str, partition: int, replicas: tuple[int, ...],
                               version: int) -> dict:
        state = cache.partition_state(topic, partition)
        if state is None:  # assigned, its leader not elected yet
            return _partition_metadata(partition, NO_LEADER, -1, replicas, (), cache.brokers, version)
        return _partition_metadata(partition, state.leader, state.leader_epoch, replicas, state.isr, cache.brokers,
                                   version)

    # -- CreateTopics -----------------------------------------------------------------------------

    async def _cluster_create_topics(self, request: Request) -> dict[str, Any]:
        body = request.body or {}
        counts = Counter(t["name"] for t in body["topics"])
        results = []
        for t in body["topics"]:
            if counts[t["name"]] > 1:
                code, message = ErrorCode.INVALID_REQUEST, (
                    f"Create topics request contains multiple entries for the topic {t['name']}")
            else:
                assignments = {a["partition_index"]: list(a["broker_ids"]) for a in t["assignments"]} or None
                if assignments and (t["num_partitions"] != _DEFAULT or t["replication_factor"] != _DEFAULT):
                    code, message = ErrorCode.INVALID_REQUEST, (
                        "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be "
                        "used at the same time.")
                else:
                    code, message = await self._cluster_create(
                        t["name"], t["num_partitions"], t["replication_factor"], assignments,
                        {c["name"]: c["value"] for c in t["configs"]}, body["timeout_ms"],
                        validate_only=body["validate_only"])
            results.append({"name": t["name"], "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "topics": results}

    async def _cluster_create(self, name: str, partitions: int, replication: int,
                              assignments: dict[int, list[int]] | None, overrides: dict[str, str],
                              timeout_ms: int, *, validate_only: bool = False) -> tuple[int, str | None]:
        """Kafka's ``ZkAdminManager.createTopics``: validate, assign, write the config and the
        assignment znodes, then wait (up to ``timeout_ms``) for every partition's leader."""
        assert self._cluster is not None
        cache = self._cluster.cache
        reason = validate_topic_name(name)
        if reason is not None:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, reason
        if name in cache.assignments:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        # the live brokers read now (the cache's watch may lag a broker that just registered)
        brokers = sorted(await self._live_brokers())
        try:
            self.config.topic_config(overrides)
        except InvalidConfigError as e:
            return ErrorCode.INVALID_CONFIG, str(e)
        if assignments:
            if sorted(assignments) != list(range(len(assignments))):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence"
            for p, replicas in assignments.items():
                if len(set(replicas)) != len(replicas) or not replicas:
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers not allowed in replica assignment: {replicas} for partition id {p}."
                unknown = [b for b in replicas if b not in brokers]
                if unknown:
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) in replica assignment: {unknown}."
            plan = assignments
        else:
            if partitions == _DEFAULT:
                partitions = self.config.num_partitions
            if replication == _DEFAULT:
                replication = self.config.default_replication_factor
            if partitions > MAX_PARTITIONS_PER_TOPIC:
                return ErrorCode.INVALID_PARTITIONS, (
                    f"Number of partitions {partitions} is above this broker's limit of {MAX_PARTITIONS_PER_TOPIC}")
            try:
                plan = assign_replicas(partitions, replication, brokers, rng=random.Random())
            except InvalidConfigError as e:
                code = ErrorCode.INVALID_PARTITIONS if "partitions" in str(e) else ErrorCode.INVALID_REPLICATION_FACTOR
                return code, str(e)
        if validate_only:
            return ErrorCode.NONE, None
        topic = TopicAssignment(new_topic_id(), {p: tuple(r) for p, r in plan.items()})
        try:
            created = await self._in_executor(self._cluster.zk.create_topic, name, topic, overrides)
        except ZK_ERRORS as e:
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"writing the topic to ZooKeeper failed: {e}"
        if not created:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        _log.info("created topic %s with assignment %s", name, plan)
        if timeout_ms > 0 and not await self._cluster.wait_for(
                lambda c: all(c.partition_state(name, p) is not None for p in plan), timeout_ms / 1000):
            return ErrorCode.REQUEST_TIMED_OUT, f"Topic {name} was created but its leaders were not elected within {timeout_ms} ms."
        return ErrorCode.NONE, None

    # -- DeleteTopics and CreatePartitions ---------------------------------------------------------

    async def _cluster_delete_topics(self, request: Request) -> dict[str, Any]:
        assert self._cluster is not None
        body = request.body or {}
        names = body["topic_names"]
        counts = Counter(names)
        cache = self._cluster.cache
        results = []
        for name in names:
            code, message = ErrorCode.NONE, None
            if not self.config.delete_topic_enable:
                code, message = (ErrorCode.TOPIC_DELETION_DISABLED if request.api_version >= 3
                                 else ErrorCode.INVALID_REQUEST), "Topic deletion is disabled."
            elif counts[name] > 1:
                code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
            elif name in INTERNAL_TOPICS:
                code, message = ErrorCode.INVALID_TOPIC_EXCEPTION, (
                    f"Topic {name} is a kafka internal topic and is not allowed to be marked for deletion.")
            elif name not in cache.assignments:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            else:
                await self._in_executor(self._cluster.zk.mark_for_deletion, name)
                if not await self._cluster.wait_for(lambda c, name=name: name not in c.assignments,
                                                    body["timeout_ms"] / 1000):
                    code, message = ErrorCode.REQUEST_TIMED_OUT, f"Topic {name} is marked for deletion; not gone yet."
            results.append({"name": name, "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "responses": results}

    async def _cluster_create_partitions(self, request: Request) -> dict[str, Any]:
        assert self._cluster is not None
        body = request.body or {}
        counts = Counter(t["name"] for t in body["topics"])
        results = []
        for t in body["topics"]:
            code, message = await self._cluster_add_partitions(t, counts[t["name"]] > 1, body)
            results.append({"name": t["name"], "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "results": results}

    async def _cluster_add_partitions(self, t: dict[str, Any], duplicate: bool, body: dict[str, Any]
                                      ) -> tuple[int, str | None]:
        """``AdminZkClient.createPartitions``: the new partitions continue the existing
        placement (the start index is partition 0's first replica)."""
        assert self._cluster is not None
        cache = self._cluster.cache
        name, count = t["name"], t["count"]
        if duplicate:
            return ErrorCode.INVALID_REQUEST, "Duplicate topic name."
        current = cache.assignments.get(name)
        if current is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        existing = len(current.partitions)
        if count <= existing:
            return ErrorCode.INVALID_PARTITIONS, (
                f"Topic currently has {existing} partitions, {count} would not be an increase.")
        added = count - existing
        brokers = sorted(await self._live_brokers())
        if t["assignments"] is not None:
            if len(t["assignments"]) != added:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"Increasing the number of partitions by {added} but {len(t['assignments'])} assignments provided.")
            new = {existing + i: list(a["broker_ids"]) for i, a in enumerate(t["assignments"])}
            unknown = sorted({b for r in new.values() for b in r} - set(brokers))
            if unknown:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) in replica assignment: {unknown}."
        else:
            first = current.partitions.get(0, (brokers[0],))
            try:
                new = assign_replicas(added, len(first), brokers, fixed_start_index=start_index_for_added(brokers, first[0]),
                                      start_partition=existing)
            except InvalidConfigError as e:
                return ErrorCode.INVALID_REPLICATION_FACTOR, str(e)
        if body["validate_only"]:
            return ErrorCode.NONE, None
        updated = TopicAssignment(current.topic_id, {**current.partitions, **{p: tuple(r) for p, r in new.items()}},
                                  current.zk_version)
        if not await self._in_executor(self._cluster.zk.set_assignment, name, updated):
            return ErrorCode.INVALID_PARTITIONS, f"Topic {name} changed meanwhile; try again."
        if not await self._cluster.wait_for(lambda c: all(c.partition_state(name, p) is not None for p in new),
                                            body["timeout_ms"] / 1000):
            return ErrorCode.REQUEST_TIMED_OUT, f"The new partitions of {name} have no leader yet."
        return ErrorCode.NONE, None

    # -- FindCoordinator ------------------------------------------------------------------------

    async def _cluster_find_coordinator(self, request: Request) -> dict[str, Any]:
        """The coordinator of a group is the leader of its ``__consumer_offsets`` partition
        (``GroupCoordinator.partitionFor``). The topic is created on the first request with
        ``offsets.topic.replication.factor``; as in Kafka, that fails (COORDINATOR_NOT_AVAILABLE,
        retried by clients) while fewer brokers are alive than the factor asks."""
        assert self._cluster is not None
        body = request.body or {}
        version = request.api_version
        keys = body["coordinator_keys"] if version >= _BATCHED_FIND_COORDINATOR else [body["key"]]
        cache = self._cluster.cache
        answers = []
        for key in keys:
            node, code, message = _NO_NODE, ErrorCode.NONE, None
            if body["key_type"] != _GROUP_KEY_TYPE:
                code, message = ErrorCode.INVALID_REQUEST, (
                    f"key type {body['key_type']}: kafkalog's broker has no transaction coordinator")
            elif CONSUMER_OFFSETS_TOPIC not in cache.assignments:
                code, message = await self._create_offsets_topic()
                if code is ErrorCode.NONE:
                    code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is loading"
            else:
                partitions = len(cache.assignments[CONSUMER_OFFSETS_TOPIC].partitions)
                leader = cache.leader_of(CONSUMER_OFFSETS_TOPIC, partition_for(key, partitions))
                if leader not in cache.brokers:
                    code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
                else:
                    node = leader
            host, port = cache.brokers.get(node, ("", _NO_NODE))
            answers.append({"key": key, "error_code": code, "error_message": message, "node_id": node,
                            "host": host, "port": port})
        if version >= _BATCHED_FIND_COORDINATOR:
            return {"throttle_time_ms": 0, "coordinators": answers}
        return {"throttle_time_ms": 0, **answers[0]}

    async def _create_offsets_topic(self) -> tuple[ErrorCode, str | None]:
        assert self._cluster is not None
        factor = self.config.offsets_topic_replication_factor
        alive = len(self._cluster.cache.brokers)
        if alive < factor:
            # Kafka's message (ZkAdminManager/AutoTopicCreationManager), answered as
            # COORDINATOR_NOT_AVAILABLE
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, (
                f"Number of alive brokers '{alive}' does not meet the required replication factor '{factor}' for "
                f"the offsets topic (configured via 'offsets.topic.replication.factor'). This error can be ignored "
                f"if the cluster is starting up and not all brokers are up yet.")
        code, message = await self._cluster_create(
            CONSUMER_OFFSETS_TOPIC, self.config.groups.offsets_partitions, factor, None,
            offsets_topic_overrides(self.config.groups), 0)
        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            return ErrorCode.NONE, None
        return ErrorCode(code), message

    # -- ElectLeaders -------------------------------------------------------------------------------

    async def _elect_leaders(self, request: Request) -> dict[str, Any]:
        """ElectLeaders (``KafkaController.processReplicaLeaderElection``). PREFERRED: a
        partition led by its first replica answers ELECTION_NOT_NEEDED, one whose first replica
        could not be elected (dead or out of the ISR) PREFERRED_LEADER_NOT_AVAILABLE. UNCLEAN
        (Kafka 2.4+): a partition with a live leader answers ELECTION_NOT_NEEDED; one without is
        elected as ``OfflinePartitionLeaderElectionStrategy(allowUnclean = true)`` does (an ISR
        member if one is live, else any live replica, whatever the topic's
        ``unclean.leader.election.enable``), or answers ELIGIBLE_LEADERS_NOT_AVAILABLE. On a
        single node the leader is always the preferred replica: ELECTION_NOT_NEEDED."""
        body = request.body or {}
        unclean = body["election_type"] == _UNCLEAN
        if body["topic_partitions"] is None:
            wanted = ([(t, p) for t, a in sorted(self._cluster.cache.assignments.items()) for p in sorted(a.partitions)]
                      if self._cluster is not None else
                      [(t.name, p.index) for t in self._topics.values() for p in t.partitions])
        else:
            wanted = [(t["topic"], p) for t in body["topic_partitions"] for p in t["partitions"]]
        results: dict[tuple[str, int], tuple[int, str | None]] = {}
        todo = []
        for topic, partition in wanted:
            if self._cluster is None:
                known = self._partition(topic, partition) is not None
                results[(topic, partition)] = ((ErrorCode.ELECTION_NOT_NEEDED, _NOT_NEEDED)
                                               if known else (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _NO_PARTITION))
                continue
            cache = self._cluster.cache
            assignment = cache.assignments.get(topic)
            replicas = assignment.partitions.get(partition) if assignment is not None else None
            state = cache.partition_state(topic, partition)
            if not replicas or state is None:
                results[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _NO_PARTITION
            elif (state.leader in cache.brokers) if unclean else (state.leader == replicas[0]):
                results[(topic, partition)] = ErrorCode.ELECTION_NOT_NEEDED, _NOT_NEEDED
            else:
                todo.append((topic, partition))
        if todo:
            assert self._cluster is not None
            await self._request_election(todo, unclean, body["timeout_ms"] / 1000)
            cache = self._cluster.cache
            for t, p in todo:
                a = cache.assignments.get(t)
                leader = cache.leader_of(t, p)
                elected = a is not None and (leader in cache.brokers if unclean else leader == a.partitions[p][0])
                if elected:
                    results[(t, p)] = ErrorCode.NONE, None
                else:
                    # Kafka's StateChangeFailedException message, by election type
                    strategy = ("OfflinePartitionLeaderElectionStrategy(true)" if unclean
                                else "PreferredReplicaPartitionLeaderElectionStrategy")
                    results[(t, p)] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE if unclean
                                       else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE), (
                        f"Failed to elect leader for partition {t}-{p} under strategy {strategy}")
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), (code, message) in results.items():
            by_topic.setdefault(t, []).append({"partition_id": p, "error_code": code, "error_message": message})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE,
                "replica_election_results": [{"topic": t, "partition_result": r} for t, r in by_topic.items()]}

    async def _request_election(self, partitions: list[tuple[str, int]], unclean: bool, timeout_s: float) -> None:
        """Ask the controller for an election (its request znode) and wait, bounded by
        ``timeout_s``, until the controller has written the outcome and deleted the request
        (Kafka's controller answers ElectLeaders once its election is done)."""
        assert self._cluster is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not await self._in_executor(functools.partial(self._cluster.zk.request_election, partitions,
                                                            unclean=unclean)):
            if loop.time() > deadline:  # bounded by timeout_ms
                return
            await asyncio.sleep(_ELECTION_BUSY_S)  # another election is in progress (a znode, no event)
        await self._in_executor(self._cluster.zk.wait_absent, UNCLEAN_ELECTION_PATH if unclean else PREFERRED_ELECTION_PATH,
                                max(0.0, deadline - loop.time()))
