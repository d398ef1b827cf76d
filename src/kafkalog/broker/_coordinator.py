"""A single-node group coordinator for the classic group protocol (Kafka's ``GroupCoordinator``
and ``GroupMetadata`` before KIP-848): members join, the coordinator picks the protocol all of
them support and hands the leader the member list, the leader's assignment is handed out on
SyncGroup, and heartbeats keep members in. Everything here runs on the broker's event loop;
timers are ``loop.call_later`` handles, so no thread touches a group.

States (Kafka's names): ``Empty`` (no members; offsets only), ``PreparingRebalance`` (waiting
for members to rejoin, up to the largest rebalance timeout), ``CompletingRebalance`` (joined;
waiting for the leader's assignment), ``Stable``, ``Dead`` (deleted or expired).

Rebalances start when a member joins or changes its protocols, when the leader rejoins, when a
member leaves or misses its session timeout; a member that does not rejoin within the
rebalance timeout is removed. An ``Empty`` group's rebalance waits
``group.initial.rebalance.delay.ms`` (Kafka's ``InitialDelayedJoin``), extended by the same
delay while new members keep arriving at a group that never had a generation, so consumers
started together land in one generation.

Static members (``group.instance.id``) keep their place across restarts: a known instance
rejoining with a new member id replaces its old id (fencing it with FENCED_INSTANCE_ID) and, in
a Stable group with unchanged protocols, gets the current generation back without a rebalance.

Offsets and group metadata are written to ``__consumer_offsets`` (``_offsets_topic.py``) before
a commit or a SyncGroup is answered; the cache here is updated once the append succeeded.

In a cluster the broker loads the groups of a ``__consumer_offsets`` partition when it becomes
its leader (:meth:`GroupCoordinator.load`) and drops them when it stops being one
(:meth:`GroupCoordinator.unload`, Kafka's ``onElection``/``onResignation``); an append that
fails is answered with Kafka's mapping of the append status (``_offsets_topic.commit_error``,
``store_group_error``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..errors import KafkalogError, RecordTooLargeError
from ..protocol import (
    CommittedOffset,
    ConsumerOffsets,
    ErrorCode,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from ._group_metadata import (
    COMPLETING_REBALANCE,
    CONSUMER_PROTOCOL_TYPE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    _Group,
    _Member,
)
from ._group_config import GroupConfig
from ._offsets_topic import OffsetsTopic, Record, StoreError, commit_error, store_group_error

_log = logging.getLogger(__package__)

#: An offset the group has not committed (OffsetFetch's answer), Kafka's INVALID_OFFSET.
INVALID_OFFSET = -1
_MS = 1000


def _now_ms() -> int:
    return int(time.time() * _MS)


def _error(code: ErrorCode, **extra: Any) -> dict[str, Any]:
    return {"error_code": code, **extra}


class GroupCoordinator:
    """The groups of one broker and the rules of the classic group protocol.

    Args:
        config: the ``group.*``/``offsets.*`` settings.
        store: ``__consumer_offsets`` (must be attached before any write).
        run: runs a blocking call on the broker's thread pool.
        partition_exists: whether the broker hosts a topic-partition (commits to others fail).
    """

    def __init__(self, config: GroupConfig, store: OffsetsTopic, run: Callable[..., Any],
                 partition_exists: Callable[[str, int], bool], clock: Callable[[], int] = _now_ms) -> None:
        self.config = config
        self.store = store
        self._run = run
        self._partition_exists = partition_exists
        self._clock = clock
        self.groups: dict[str, _Group] = {}
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    # -- loading and shutdown -----------------------------------------------------------------

    def load(self, loaded: ConsumerOffsets) -> None:
        """Rebuild the groups from what ``__consumer_offsets`` holds: offsets, and members as
        their group's last metadata record lists them (Stable; each must heartbeat within its
        session timeout, or it is removed and the group rebalances)."""
        now = self._clock()
        for (group_id, topic, partition), offset in loaded.offsets.items():
            self._group(group_id, now).offsets[(topic, partition)] = offset
        for group_id, meta in loaded.groups.items():
            group = self._group(group_id, now)
            group.protocol_type = meta.protocol_type or None
            group.generation = meta.generation
            group.protocol = meta.protocol
            group.leader = meta.leader
            if meta.current_state_timestamp is not None:
                group.state_timestamp = meta.current_state_timestamp
            for m in meta.members:
                member = _Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout,
                                 m.session_timeout, meta.protocol_type, [(meta.protocol or "", m.subscription_bytes)])
                member.assignment = m.assignment_bytes
                group.members[m.member_id] = member
                if m.group_instance_id is not None:
                    group.static[m.group_instance_id] = m.member_id
                self._schedule_heartbeat(group, member)
            if group.members:
                group.state = STABLE
                if group.leader not in group.members:
                    group.leader = next(iter(group.members))
        if self.groups:
            _log.info("loaded %d groups and %d committed offsets from __consumer_offsets",
                      len(self.groups), len(loaded.offsets))

    def close(self) -> None:
        """Cancel every timer and answer every waiting JoinGroup/SyncGroup with
        COORDINATOR_NOT_AVAILABLE (the broker is stopping)."""
        self._closed = True
        for group in self.groups.values():
            self._release(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        for task in self._tasks:
            task.cancel()

    def unload(self, partition: int) -> int:
        """Drop the groups stored in ``partition`` (Kafka's ``onResignation``: this broker no
        longer leads it); their waiting JoinGroup/SyncGroup requests get NOT_COORDINATOR.
        Returns the groups dropped."""
        gone = [g for g in self.groups.values() if self.store.partition_of(g.group_id) == partition]
        for group in gone:
            self._release(group, ErrorCode.NOT_COORDINATOR)
            del self.groups[group.group_id]
        if gone:
            _log.info("unloaded %d groups of __consumer_offsets-%d", len(gone), partition)
        return len(gone)

    @staticmethod
    def _release(group: _Group, code: ErrorCode) -> None:
        """Cancel the group's timers and answer its waiting requests with ``code``."""
        if group.join_timer is not None:
            group.join_timer.cancel()
        for handle in group.pending.values():
            handle.cancel()
        for m in group.members.values():
            if m.heartbeat is not None:
                m.heartbeat.cancel()
            for waiter in (m.join_waiter, m.sync_waiter):
                if waiter is not None and not waiter.done():
                    waiter.set_result(_error(code))

    def _group(self, group_id: str, now: int) -> _Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = _Group(group_id, now)
        return group

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- JoinGroup -------------------------------------------------------------------------------

    async def join(self, group_id: str, member_id: str, instance_id: str | None, client_id: str, client_host: str,
                   session_timeout: int, rebalance_timeout: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> dict[str, Any]:
        """JoinGroup: the response fields (``error_code``, ``generation_id``, ``protocol_name``,
        ``leader``, ``member_id``, ``members``), once the rebalance completes."""
        if not group_id:
            return _error(ErrorCode.INVALID_GROUP_ID, member_id=member_id)
        if not self.config.min_session_timeout_ms <= session_timeout <= self.config.max_session_timeout_ms:
            return _error(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        now = self._clock()
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return _error(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self._group(group_id, now)
        if group.state == DEAD:
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports(protocol_type, protocols):
            return _error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        args = (client_id, client_host, rebalance_timeout, session_timeout, protocol_type, protocols)
        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if instance_id is not None:
                old = group.static.get(instance_id)
                if old is not None and old in group.members:
                    return await self._replace_static(group, old, new_id, instance_id, *args)
            elif require_known_member_id:
                # KIP-394: hand out the id first; the member joins with it (or the id expires).
                group.pending[new_id] = self._loop.call_later(
                    session_timeout / _MS, self._expire_pending, group, new_id)
                return _error(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
            if len(group.members) >= self.config.max_size:
                return _error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=new_id)
            return await self._add_and_join(group, new_id, instance_id, *args)
        if instance_id is not None and group.static.get(instance_id, member_id) != member_id:
            return _error(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
        if member_id in group.pending:
            group.pending.pop(member_id).cancel()
            if len(group.members) >= self.config.max_size:
                return _error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=member_id)
            return await self._add_and_join(group, member_id, instance_id, *args)
        member = group.members.get(member_id)
        if member is None:
            return _error(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        self._schedule_heartbeat(group, member)
        if group.state == PREPARING_REBALANCE:
            self._update_member(member, *args)
            return await self._await_join(group, member)
        if group.state == COMPLETING_REBALANCE:
            if protocols == member.protocols:
                return self._join_response(group, member, with_members=member_id == group.leader)
            self._update_member(member, *args)
            self._prepare_rebalance(group, f"member {member_id} changed its protocols")
            return await self._await_join(group, member)
        if group.state == STABLE:
            if member_id == group.leader or protocols != member.protocols:
                self._update_member(member, *args)
                self._prepare_rebalance(group, f"leader {member_id} rejoined" if member_id == group.leader
                                        else f"member {member_id} changed its protocols")
                return await self._await_join(group, member)
            return self._join_response(group, member, with_members=False)
        return _error(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)

    @staticmethod
    def _update_member(member: _Member, client_id: str, client_host: str, rebalance_timeout: int,
                       session_timeout: int, protocol_type: str, protocols: list[tuple[str, bytes]]) -> None:
        member.rebalance_timeout = rebalance_timeout
        member.session_timeout = session_timeout
        member.protocol_type = protocol_type
        member.protocols = protocols

    async def _await_join(self, group: _Group, member: _Member) -> dict[str, Any]:
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(_error(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        waiter = member.join_waiter = self._loop.create_future()
        self._check_join(group)
        return await waiter

    async def _add_and_join(self, group: _Group, member_id: str, instance_id: str | None, client_id: str,
                            client_host: str, rebalance_timeout: int, session_timeout: int, protocol_type: str,
                            protocols: list[tuple[str, bytes]]) -> dict[str, Any]:
        member = _Member(member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                         protocol_type, protocols)
        member.is_new = True
        if not group.members:
            group.protocol_type = protocol_type
        group.members[member_id] = member
        if instance_id is not None:
            group.static[instance_id] = member_id
        if group.leader is None:
            group.leader = member_id
        if group.state == PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True  # Kafka extends only a new group's first delay
        self._schedule_heartbeat(group, member)
        if group.state != PREPARING_REBALANCE:
            self._prepare_rebalance(group, f"member {member_id} joined")
        return await self._await_join(group, member)

    async def _replace_static(self, group: _Group, old_id: str, new_id: str, instance_id: str, client_id: str,
                              client_host: str, rebalance_timeout: int, session_timeout: int, protocol_type: str,
                              protocols: list[tuple[str, bytes]]) -> dict[str, Any]:
        """A known static member rejoining with a new member id: the old id is fenced."""
        old = group.members.pop(old_id)
        self._end_member(old, ErrorCode.FENCED_INSTANCE_ID)
        member = _Member(new_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                         protocol_type, protocols)
        member.assignment = old.assignment
        group.members[new_id] = member
        group.static[instance_id] = new_id
        if group.leader == old_id:
            group.leader = new_id
        self._schedule_heartbeat(group, member)
        _log.info("static member %s of group %s rejoined as %s", instance_id, group.group_id, new_id)
        if group.state == STABLE and old.metadata(group.protocol) == member.metadata(group.protocol) \
                and group.protocol in {n for n, _ in protocols}:
            await self._store_group(group)  # the new member id, as Kafka persists it
            return self._join_response(group, member, with_members=False)
        if group.state != PREPARING_REBALANCE:
            self._prepare_rebalance(group, f"static member {instance_id} rejoined with other protocols")
        return await self._await_join(group, member)

    def _join_response(self, group: _Group, member: _Member, *, with_members: bool) -> dict[str, Any]:
        members = []
        if with_members:
            members = [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                        "metadata": m.metadata(group.protocol)} for m in group.members.values()]
        return {"error_code": ErrorCode.NONE, "generation_id": group.generation, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol, "leader": group.leader or "", "member_id": member.member_id,
                "members": members, "skip_assignment": False}

    # -- rebalancing ---------------------------------------------------------------------------

    def _prepare_rebalance(self, group: _Group, reason: str) -> None:
        if group.state == COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                if m.sync_waiter is not None and not m.sync_waiter.done():
                    m.sync_waiter.set_result(_error(ErrorCode.REBALANCE_IN_PROGRESS))
                m.sync_waiter = None
        if group.join_timer is not None:
            group.join_timer.cancel()
        timeout = group.rebalance_timeout_ms()
        if group.state == EMPTY and self.config.initial_rebalance_delay_ms > 0:
            delay = min(self.config.initial_rebalance_delay_ms, timeout)
            group.initial_delay = True
            group.new_member_added = False
            group.join_timer = self._loop.call_later(delay / _MS, self._initial_delay_over, group, timeout - delay)
        else:
            group.join_timer = self._loop.call_later(timeout / _MS, self._join_timeout, group)
        _log.info("preparing to rebalance group %s in state %s with old generation %d (%s)",
                  group.group_id, group.state, group.generation, reason)
        group.transition(PREPARING_REBALANCE, self._clock())
        self._check_join(group)

    def _initial_delay_over(self, group: _Group, remaining: int) -> None:
        if group.state != PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining > 0:
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.new_member_added = False
            group.join_timer = self._loop.call_later(delay / _MS, self._initial_delay_over, group, remaining - delay)
            return
        group.initial_delay = False
        self._complete_join(group)

    def _join_timeout(self, group: _Group) -> None:
        if group.state == PREPARING_REBALANCE:
            self._complete_join(group)

    def _check_join(self, group: _Group) -> None:
        if (group.state == PREPARING_REBALANCE and not group.initial_delay and not group.pending
                and all(m.join_waiter is not None for m in group.members.values())):
            self._complete_join(group)

    def _complete_join(self, group: _Group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay = False
        for member in [m for m in group.members.values() if m.join_waiter is None]:
            _log.info("member %s of group %s did not rejoin within the rebalance timeout; removing it",
                      member.member_id, group.group_id)
            self._drop(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        now = self._clock()
        group.generation += 1
        if not group.members:
            group.protocol = None
            group.leader = None
            group.transition(EMPTY, now)
            _log.info("group %s with generation %d is now empty", group.group_id, group.generation)
            self._spawn(self._store_group(group))
            return
        group.protocol = group.select_protocol()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.transition(COMPLETING_REBALANCE, now)
        _log.info("stabilized group %s generation %d (protocol %s) with %d members", group.group_id,
                  group.generation, group.protocol, len(group.members))
        for m in group.members.values():
            waiter, m.join_waiter = m.join_waiter, None
            m.is_new = False
            if waiter is not None and not waiter.done():
                waiter.set_result(self._join_response(group, m, with_members=m.member_id == group.leader))
            self._schedule_heartbeat(group, m)

    # -- heartbeats and members leaving ----------------------------------------------------------

    def _schedule_heartbeat(self, group: _Group, member: _Member) -> None:
        if member.heartbeat is not None:
            member.heartbeat.cancel()
        if self._closed:
            return
        member.heartbeat = self._loop.call_later(member.session_timeout / _MS, self._heartbeat_expired,
                                                 group, member.member_id)

    def _heartbeat_expired(self, group: _Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if member.join_waiter is not None or member.sync_waiter is not None:
            self._schedule_heartbeat(group, member)  # Kafka keeps members with a request in flight
            return
        _log.info("member %s in group %s has failed (no heartbeat within %d ms); removing it from the group",
                  member_id, group.group_id, member.session_timeout)
        self._remove(group, member, ErrorCode.UNKNOWN_MEMBER_ID)

    def _expire_pending(self, group: _Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is not None:
            self._check_join(group)

    def _end_member(self, member: _Member, code: ErrorCode) -> None:
        if member.heartbeat is not None:
            member.heartbeat.cancel()
            member.heartbeat = None
        for waiter in (member.join_waiter, member.sync_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_result(_error(code, member_id=member.member_id))
        member.join_waiter = member.sync_waiter = None

    def _drop(self, group: _Group, member: _Member, code: ErrorCode) -> None:
        group.members.pop(member.member_id, None)
        if member.instance_id is not None and group.static.get(member.instance_id) == member.member_id:
            del group.static[member.instance_id]
        self._end_member(member, code)
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)

    def _remove(self, group: _Group, member: _Member, code: ErrorCode) -> None:
        """Kafka's ``removeMemberAndUpdateGroup``."""
        self._drop(group, member, code)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member.member_id}")
        elif group.state == PREPARING_REBALANCE:
            self._check_join(group)

    def _check_member(self, group: _Group | None, member_id: str, instance_id: str | None,
                      generation: int) -> tuple[ErrorCode, _Member | None]:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if group.state == DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if instance_id is not None and group.static.get(instance_id, member_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID, None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION, member
        return ErrorCode.NONE, member

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        """Heartbeat: NONE, or why the member must rejoin (REBALANCE_IN_PROGRESS and the like)."""
        group = self.groups.get(group_id)
        code, member = self._check_member(group, member_id, instance_id, generation)
        if code is not ErrorCode.NONE:
            return code
        assert group is not None and member is not None
        self._schedule_heartbeat(group, member)
        if group.state == PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup: the group's error and each (member id, instance id)'s."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.state == DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        codes = []
        for member_id, instance_id in members:
            if instance_id is not None:
                known = group.static.get(instance_id)
                if known is None:
                    codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    codes.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            if member_id in group.pending:
                group.pending.pop(member_id).cancel()
                self._check_join(group)
                codes.append(ErrorCode.NONE)
            elif member_id in group.members:
                _log.info("member %s is leaving group %s", member_id, group.group_id)
                self._remove(group, group.members[member_id], ErrorCode.UNKNOWN_MEMBER_ID)
                codes.append(ErrorCode.NONE)
            else:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
        return ErrorCode.NONE, codes

    # -- SyncGroup -------------------------------------------------------------------------------

    async def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: list[tuple[str, bytes]]) -> dict[str, Any]:
        """SyncGroup: the member's assignment once the leader's has arrived and is stored."""
        group = self.groups.get(group_id)
        code, member = self._check_member(group, member_id, instance_id, generation)
        if code is not ErrorCode.NONE:
            return _error(code)
        assert group is not None and member is not None
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol):
            return _error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state == PREPARING_REBALANCE:
            return _error(ErrorCode.REBALANCE_IN_PROGRESS)
        self._schedule_heartbeat(group, member)
        if group.state == STABLE:
            return self._sync_response(group, member)
        if group.state != COMPLETING_REBALANCE:
            return _error(ErrorCode.UNKNOWN_MEMBER_ID)
        waiter = member.sync_waiter = self._loop.create_future()
        if member_id == group.leader:
            table = dict(assignments)
            for m in group.members.values():
                m.assignment = bytes(table.get(m.member_id, b""))
            self._spawn(self._finish_sync(group, group.generation))
        return await waiter

    def _sync_response(self, group: _Group, member: _Member) -> dict[str, Any]:
        return {"error_code": ErrorCode.NONE, "protocol_type": group.protocol_type, "protocol_name": group.protocol,
                "assignment": member.assignment}

    async def _finish_sync(self, group: _Group, generation: int) -> None:
        """Store the group's metadata with the leader's assignment, then hand it out (Stable)."""
        try:
            await self._store_group(group, raise_errors=True)
            failed = None
        except (KafkalogError, OSError) as e:
            failed = e
        if group.state != COMPLETING_REBALANCE or group.generation != generation \
                or self.groups.get(group.group_id) is not group:
            return  # a rebalance started meanwhile, or the group was unloaded; its members were answered
        if failed is not None:
            _log.error("storing the assignment of group %s failed: %s; the group rebalances", group.group_id, failed)
            # Kafka's resetAndPropagateAssignmentError, then maybePrepareRebalance
            code = store_group_error(failed.code) if isinstance(failed, StoreError) else ErrorCode.UNKNOWN_SERVER_ERROR
            for m in group.members.values():
                m.assignment = b""
                waiter, m.sync_waiter = m.sync_waiter, None
                if waiter is not None and not waiter.done():
                    waiter.set_result(_error(code))
            self._prepare_rebalance(group, "storing its assignment failed")
            return
        group.transition(STABLE, self._clock())
        for m in group.members.values():
            waiter, m.sync_waiter = m.sync_waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(self._sync_response(group, m))

    async def _store_group(self, group: _Group, raise_errors: bool = False) -> None:
        """Write the group's metadata record (Kafka's ``storeGroup``)."""
        if not self.store.ready:
            return
        members = [{
            "memberId": m.member_id, "groupInstanceId": m.instance_id, "clientId": m.client_id,
            "clientHost": m.client_host, "rebalanceTimeout": m.rebalance_timeout, "sessionTimeout": m.session_timeout,
            "subscription": m.metadata(group.protocol), "assignment": m.assignment,
        } for m in group.members.values()]
        value = group_metadata_value(group.protocol_type or "", group.generation, group.protocol, group.leader,
                                     group.state_timestamp, members)
        try:
            await self.store.write(self.store.partition_of(group.group_id),
                                   [(group_metadata_key(group.group_id), value)], self._run)
        except (KafkalogError, OSError) as e:
            if raise_errors:
                raise
            _log.error("storing the metadata of group %s failed: %s", group.group_id, e)

    # -- offsets ---------------------------------------------------------------------------------

    def _commit_check(self, group: _Group, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's ``doCommitOffsets`` checks: a commit without generation needs an Empty group;
        otherwise the member and generation must be current (not during CompletingRebalance)."""
        if group.state == DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if instance_id is not None and group.static.get(instance_id, member_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        if generation < 0 and group.state == EMPTY:
            return ErrorCode.NONE
        if group.state == COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_heartbeat(group, member)
        return ErrorCode.NONE

    async def commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                     offsets: list[tuple[str, int, int, int, str | None, int]], retention_ms: int
                     ) -> list[ErrorCode]:
        """OffsetCommit of (topic, partition, offset, leader epoch, metadata, commit timestamp)
        entries: each one's error code, once the records are appended."""
        if not group_id:
            return [ErrorCode.INVALID_GROUP_ID] * len(offsets)
        now = self._clock()
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return [ErrorCode.ILLEGAL_GENERATION] * len(offsets)
            group = self._group(group_id, now)
        code = self._commit_check(group, generation, member_id, instance_id)
        if code is not ErrorCode.NONE:
            return [code] * len(offsets)
        codes: list[ErrorCode] = []
        records: list[Record] = []
        commits: list[CommittedOffset] = []
        for topic, partition, offset, epoch, metadata, timestamp in offsets:
            metadata = metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                codes.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
            elif not self._partition_exists(topic, partition):
                codes.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                codes.append(ErrorCode.NONE)
                ts = now if timestamp < 0 else timestamp
                expire = ts + retention_ms if retention_ms >= 0 else None
                commit = CommittedOffset(group_id, topic, partition, offset, None if epoch < 0 else epoch,
                                         metadata, ts, expire, self.store.partition_of(group_id), -1)
                commits.append(commit)
                records.append((offset_commit_key(group_id, topic, partition),
                                offset_commit_value(offset, commit.leader_epoch, metadata, ts, expire)))
        if not records:
            return codes

        def apply() -> None:
            for c in commits:
                group.offsets[(c.topic, c.partition)] = c

        try:
            await self.store.write(self.store.partition_of(group_id), records, self._run, apply)
        except RecordTooLargeError as e:
            _log.warning("offset commit of group %s refused: %s", group_id, e)
            return [ErrorCode.INVALID_COMMIT_OFFSET_SIZE if c is ErrorCode.NONE else c for c in codes]
        except StoreError as e:
            _log.warning("offset commit of group %s not stored: %s", group_id, e)
            failed = commit_error(e.code)
            return [failed if c is ErrorCode.NONE else c for c in codes]
        except (KafkalogError, OSError) as e:
            _log.error("offset commit of group %s failed: %s", group_id, e)
            return [ErrorCode.COORDINATOR_NOT_AVAILABLE if c is ErrorCode.NONE else c for c in codes]
        return codes

    def fetch(self, group_id: str, wanted: list[tuple[str, list[int]]] | None
              ) -> list[tuple[str, list[tuple[int, CommittedOffset | None]]]]:
        """OffsetFetch: each topic's partitions with their committed offset (None: none);
        ``wanted`` None means every partition the group has an offset for."""
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and group.state != DEAD else {}
        if wanted is None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(offsets):
                by_topic.setdefault(topic, []).append(partition)
            wanted = list(by_topic.items())
        return [(topic, [(p, offsets.get((topic, p))) for p in partitions]) for topic, partitions in wanted]

    async def delete_offsets(self, group_id: str, wanted: list[tuple[str, list[int]]]
                             ) -> tuple[ErrorCode, list[list[ErrorCode]]]:
        """OffsetDelete: partitions of topics the group's consumers subscribe to are refused
        (GROUP_SUBSCRIBED_TO_TOPIC); the others' offsets get tombstones."""
        group = self.groups.get(group_id)
        if group is None or group.state == DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        if group.state != EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return ErrorCode.NON_EMPTY_GROUP, []
        subscribed = group.subscribed_topics() if group.state != EMPTY else set()
        codes: list[list[ErrorCode]] = []
        gone: list[tuple[str, int]] = []
        for topic, partitions in wanted:
            row = []
            for p in partitions:
                if subscribed is None or topic in subscribed:
                    row.append(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
                else:
                    row.append(ErrorCode.NONE)
                    if (topic, p) in group.offsets:
                        gone.append((topic, p))
            codes.append(row)
        if gone:
            try:
                await self._tombstone_offsets(group, gone)
            except (KafkalogError, OSError) as e:
                _log.error("deleting offsets of group %s failed: %s", group_id, e)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        return ErrorCode.NONE, codes

    async def _tombstone_offsets(self, group: _Group, keys: list[tuple[str, int]],
                                 extra: list[Record] = ()) -> None:
        records: list[Record] = [(offset_commit_key(group.group_id, t, p), None) for t, p in keys]

        def apply() -> None:
            for key in keys:
                group.offsets.pop(key, None)

        await self.store.write(self.store.partition_of(group.group_id), records + list(extra), self._run, apply)

    # -- listing, describing, deleting -------------------------------------------------------------

    def list_groups(self, states: set[str] | None) -> list[dict[str, Any]]:
        """ListGroups: every live group (filtered by state, compared case-insensitively)."""
        out = []
        for group in self.groups.values():
            if group.state == DEAD:
                continue
            if states and group.state.lower() not in states:
                continue
            out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                        "group_state": group.state, "group_type": "classic"})
        return out

    def describe(self, group_id: str) -> dict[str, Any]:
        """DescribeGroups of one group; an unknown one is described as Dead (Kafka's answer)."""
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": ErrorCode.NONE, "group_id": group_id, "group_state": DEAD, "protocol_type": "",
                    "protocol_data": "", "members": []}
        stable = group.state == STABLE
        members = [{
            "member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "member_metadata": m.metadata(group.protocol) if stable else b"",
            "member_assignment": m.assignment if stable else b"",
        } for m in group.members.values()]
        return {"error_code": ErrorCode.NONE, "group_id": group_id, "group_state": group.state,
                "protocol_type": group.protocol_type or "", "protocol_data": (group.protocol or "") if stable else "",
                "members": members}

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of one group: only an Empty group goes (tombstones for its offsets and
        its metadata, then it is Dead)."""
        group = self.groups.get(group_id)
        if group is None or group.state == DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state != EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        try:
            await self._retire(group)
        except (KafkalogError, OSError) as e:
            _log.error("deleting group %s failed: %s", group_id, e)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        _log.info("group %s deleted", group_id)
        return ErrorCode.NONE

    async def _retire(self, group: _Group) -> None:
        group.transition(DEAD, self._clock())
        await self._tombstone_offsets(group, list(group.offsets), [(group_metadata_key(group.group_id), None)])
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    async def expire_offsets(self) -> int:
        """Kafka's ``cleanupGroupMetadata``: offsets of Empty groups older than
        ``offsets.retention.minutes`` (counted from when the group became Empty, or from the
        commit), and offsets past their explicit expire timestamp, get tombstones; a group
        left Empty without offsets is deleted. Returns the offsets expired."""
        now = self._clock()
        retention = self.config.offsets_retention_ms
        expired = 0
        for group in list(self.groups.values()):
            if group.state == DEAD:
                continue
            keys = []
            for key, c in group.offsets.items():
                if c.expire_timestamp is not None:
                    due = c.expire_timestamp <= now
                else:
                    base = group.state_timestamp if group.state == EMPTY and group.protocol_type else c.commit_timestamp
                    due = group.state == EMPTY and base + retention <= now
                if due:
                    keys.append(key)
            try:
                if keys:
                    await self._tombstone_offsets(group, keys)
                    expired += len(keys)
                if group.state == EMPTY and not group.offsets and not group.members:
                    await self._retire(group)
            except (KafkalogError, OSError) as e:
                _log.error("expiring offsets of group %s failed: %s", group.group_id, e)
        if expired:
            _log.info("removed %d expired offsets", expired)
        return expired
