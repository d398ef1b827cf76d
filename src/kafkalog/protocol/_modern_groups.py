"""The groups of the new group coordinator as ``__consumer_offsets`` records them: consumer
groups of the KIP-848 protocol (record types 3-8 and 16) and share groups of KIP-932 (9-15),
replayed as Kafka 4.0's ``GroupMetadataManager.replay`` replays them.

Each record sets one part of a group, and its tombstone clears it:

=====================================  ===================================================
record (type)                          what it sets
=====================================  ===================================================
ConsumerGroupMetadata (3), Share (11)  the group and its epoch; a tombstone deletes the group
ConsumerGroupPartitionMetadata (4),    the subscribed topics' ids, names and partition counts
ShareGroupPartitionMetadata (9)
ConsumerGroupMemberMetadata (5),       a member (client id and host, instance id, rack,
ShareGroupMemberMetadata (10)          subscription); a tombstone removes the member
ConsumerGroupTargetAssignment-         the target assignment's epoch (6, 12) and each member's
Metadata/Member (6, 7), Share (12, 13) target partitions (7, 13)
ConsumerGroupCurrentMemberAssignment   a member's epoch, state and assigned partitions; a
(8), Share (14)                        tombstone leaves the member with epoch -1 and nothing
ShareGroupStatePartitionMetadata (15)  the topic-partitions whose share state is initialised
ConsumerGroupRegularExpression (16)    the topics a subscribed regular expression resolved to
=====================================  ===================================================

**The group state** (``ConsumerGroup.maybeUpdateGroupState``): EMPTY without members;
ASSIGNING while the group epoch is above the target assignment epoch; RECONCILING while a
member is not reconciled (member state not STABLE, or its epoch not the assignment epoch);
otherwise STABLE. A share group (``ShareGroup.maybeUpdateGroupState``) is EMPTY without members,
else STABLE. A deleted group is no longer loaded (Kafka's tools describe it as DEAD: it does
not exist); the loader names it in ``deleted``.

Assignments name topics by id; :meth:`ModernGroup.topic_name` resolves an id through the
group's partition metadata, the share state metadata, or the names given by the caller (a log
directory's ``partition.metadata`` files).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Record types of the KIP-848 consumer groups and of the KIP-932 share groups.
CONSUMER_GROUP_TYPES = (3, 4, 5, 6, 7, 8, 16)
SHARE_GROUP_TYPES = (9, 10, 11, 12, 13, 14, 15)
#: ``LEAVE_GROUP_MEMBER_EPOCH``: a member whose current assignment was deleted.
LEAVE_GROUP_MEMBER_EPOCH = -1
#: ``MemberState`` ids (``modern/MemberState.java``).
MEMBER_STATES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 127: "UNKNOWN"}
_MEMBER_STABLE = 0
#: The group kinds, as ``kafka-groups.sh`` names them.
CONSUMER = "consumer"
SHARE = "share"


@dataclass
class ModernMember:
    """A member of a consumer or share group: what its member metadata record says (client id,
    host, instance id, rack, subscription) and its current assignment record (epochs, state,
    partitions by topic id). Defaults are ``ConsumerGroupMember.Builder``'s."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    #: The member joined through the classic protocol (a classic consumer in a consumer group).
    classic: bool = False
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = _MEMBER_STABLE
    assigned: dict[str, tuple[int, ...]] = field(default_factory=dict)
    pending_revocation: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def state_name(self) -> str:
        return MEMBER_STATES.get(self.state, "UNKNOWN")

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        """``ModernGroupMember.isReconciledTo``."""
        return self.state == _MEMBER_STABLE and self.member_epoch == assignment_epoch


@dataclass
class ModernGroup:
    """A consumer (KIP-848) or share (KIP-932) group as its records leave it."""

    group_id: str
    kind: str
    epoch: int = 0
    assignment_epoch: int = -1
    members: dict[str, ModernMember] = field(default_factory=dict)
    target_assignment: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    #: topic id -> (name, partition count), from the partition metadata record.
    topics: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: regular expression -> the topics it resolved to (consumer groups).
    regexes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: topic id -> (name, partitions) whose share-group state is initialised (share groups).
    initialized_topics: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """The group state, by the coordinator's rule (see the module docstring)."""
        if not self.members:
            return "Empty"
        if self.kind == SHARE:
            return "Stable"
        if self.epoch > self.assignment_epoch:
            return "Assigning"
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def topic_name(self, topic_id: str, names: dict[str, str] | None = None) -> str | None:
        """The name of a topic id: from this group's records, else from ``names``."""
        if topic_id in self.topics:
            return self.topics[topic_id][0]
        if topic_id in self.initialized_topics:
            return self.initialized_topics[topic_id][0]
        return (names or {}).get(topic_id)


def _partitions(entries: list[dict[str, Any]] | None) -> dict[str, tuple[int, ...]]:
    return {e["topicId"]: tuple(e["partitions"] or ()) for e in entries or ()}


class ModernGroupsLoader:
    """Replays records of types 3-16 into ``groups`` (by group id), as the coordinator's
    ``GroupMetadataManager.replay`` does; ``deleted`` gets the groups a tombstone deleted,
    ``warnings`` the tombstones Kafka's replay would refuse (it fails the load; an offline
    reader says so and goes on)."""

    def __init__(self, groups: dict[str, ModernGroup], deleted: set[str], warnings: list[str]) -> None:
        self.groups = groups
        self.deleted = deleted
        self.warnings = warnings

    def _group(self, group_id: str, kind: str, create: bool) -> ModernGroup | None:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return None  # Kafka: a tombstone for an unknown group is ignored
            group = self.groups[group_id] = ModernGroup(group_id, kind)
            self.deleted.discard(group_id)
        return group

    def replay(self, record_type: int, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        """One record: ``key`` and ``value`` decoded (``value`` None for a tombstone)."""
        kind = SHARE if record_type in SHARE_GROUP_TYPES else CONSUMER
        group = self._group(key["groupId"], kind, value is not None)
        if group is None:
            return
        member_id = key.get("memberId")
        if record_type in (3, 11):  # group metadata
            if value is not None:
                group.epoch = value["epoch"]
            else:
                if group.members or group.target_assignment:
                    self.warnings.append(
                        f"a tombstone deletes {kind} group {group.group_id} but the group still has "
                        f"{len(group.members)} members and {len(group.target_assignment)} target assignments"
                    )
                del self.groups[group.group_id]
                self.deleted.add(group.group_id)
        elif record_type in (4, 9):  # subscription (partition) metadata
            group.topics = {} if value is None else {
                t["topicId"]: (t["topicName"], t["numPartitions"]) for t in value["topics"] or ()
            }
        elif record_type in (5, 10):  # member metadata
            self._member_metadata(group, member_id, value)
        elif record_type in (6, 12):  # target assignment epoch
            group.assignment_epoch = -1 if value is None else value["assignmentEpoch"]
        elif record_type in (7, 13):  # a member's target assignment
            if value is None:
                group.target_assignment.pop(member_id, None)
            else:
                group.target_assignment[member_id] = _partitions(value["topicPartitions"])
        elif record_type in (8, 14):  # a member's current assignment
            self._current_assignment(group, member_id, value)
        elif record_type == 15:
            group.initialized_topics = {} if value is None else {
                t["topicId"]: (t["topicName"], tuple(t["partitions"] or ())) for t in value["initializedTopics"] or ()
            }
        elif record_type == 16:
            if value is None:
                group.regexes.pop(key["regularExpression"], None)
            else:
                group.regexes[key["regularExpression"]] = tuple(value["topics"] or ())

    def _member_metadata(self, group: ModernGroup, member_id: str, value: dict[str, Any] | None) -> None:
        if value is None:
            member = group.members.get(member_id)
            if member is None:
                return
            if member.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
                self.warnings.append(
                    f"a tombstone deletes member {member_id} of {group.kind} group {group.group_id} before the "
                    f"tombstone of its current assignment"
                )
            del group.members[member_id]
            return
        member = group.members.setdefault(member_id, ModernMember(member_id))
        member.instance_id = value.get("instanceId")
        member.rack_id = value.get("rackId")
        member.client_id = value["clientId"]
        member.client_host = value["clientHost"]
        member.subscribed_topic_names = tuple(value["subscribedTopicNames"] or ())
        member.subscribed_topic_regex = value.get("subscribedTopicRegex")
        member.server_assignor = value.get("serverAssignor")
        member.classic = value.get("classicMemberMetadata") is not None

    @staticmethod
    def _current_assignment(group: ModernGroup, member_id: str, value: dict[str, Any] | None) -> None:
        member = group.members.get(member_id)
        if value is None:
            if member is not None:  # Kafka: the member leaves (epoch -1, nothing assigned)
                member.member_epoch = member.previous_member_epoch = LEAVE_GROUP_MEMBER_EPOCH
                member.assigned, member.pending_revocation = {}, {}
            return
        if member is None:
            member = group.members[member_id] = ModernMember(member_id)
        member.member_epoch = value["memberEpoch"]
        member.previous_member_epoch = value["previousMemberEpoch"]
        member.state = value["state"]
        member.assigned = _partitions(value["assignedPartitions"])
        member.pending_revocation = _partitions(value.get("partitionsPendingRevocation"))


#: ``__share_group_state``'s record types (``ShareCoordinator``): a share-partition's snapshot
#: and an update since it.
SHARE_SNAPSHOT_TYPE = 0
SHARE_UPDATE_TYPE = 1
#: A ShareUpdate's start offset when it does not move it.
_START_OFFSET_UNCHANGED = -1


class ShareStateLoader:
    """The share coordinator's replay of ``__share_group_state`` (``ShareCoordinatorShard``),
    keeping what ``kafka-share-groups.sh --describe`` shows: each share-partition's start offset
    by (group, topic id, partition). A snapshot sets it; an update moves it unless its start
    offset is -1 (``merge``); a tombstone deletes the share-partition's state."""

    def __init__(self, start_offsets: dict[tuple[str, str, int], int]) -> None:
        self.start_offsets = start_offsets

    def replay(self, record_type: int, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        """One record: ``key`` and ``value`` decoded (``value`` None for a tombstone)."""
        share_partition = (key["groupId"], key["topicId"], key["partition"])
        if value is None:
            self.start_offsets.pop(share_partition, None)
        elif record_type == SHARE_SNAPSHOT_TYPE or share_partition not in self.start_offsets:
            self.start_offsets[share_partition] = value["startOffset"]
        elif record_type == SHARE_UPDATE_TYPE and value["startOffset"] != _START_OFFSET_UNCHANGED:
            self.start_offsets[share_partition] = value["startOffset"]
