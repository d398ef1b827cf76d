"""The group coordinator's APIs (the classic group protocol), written by hand from Kafka's
message specs (``clients/src/main/resources/common/message/*.json``), as data for the one
interpreter: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, OffsetDelete, ListGroups, DescribeGroups and DeleteGroups.

=====================  ========  ==========  ===========================================
API (key)              served    flexible    notes
=====================  ========  ==========  ===========================================
OffsetCommit (8)       0-8       8+          v0 has no generation; v1 a commit timestamp
OffsetFetch (9)        1-8       6+          v8 batches several groups
FindCoordinator (10)   0-4       3+          v4 batches several keys
JoinGroup (11)         0-9       6+          v4+: MEMBER_ID_REQUIRED on a first join
Heartbeat (12)         0-4       4+
LeaveGroup (13)        0-5       4+          v3+ leaves several members
SyncGroup (14)         0-5       4+
DescribeGroups (15)    0-5       5+
ListGroups (16)        0-5       3+          v4 filters states, v5 types
DeleteGroups (42)      0-2       2+
OffsetDelete (47)      0         none
=====================  ========  ==========  ===========================================

OffsetCommit v9+ and OffsetFetch v9+ belong to the KIP-848 consumer protocol (member epochs,
topic ids), which this coordinator does not speak; no client listed in docs/broker.md needs them.
"""

from __future__ import annotations

from ._types import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT32_MIN,
    INT64,
    STRING,
    Array,
    _f,
    _struct,
)

FIND_COORDINATOR_REQUEST = _struct(
    _f("key", STRING, "0-3"),
    _f("key_type", INT8, "1+"),
    _f("coordinator_keys", Array(STRING), "4+"),
)
FIND_COORDINATOR_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "1+"),
    _f("error_code", INT16, "0-3"),
    _f("error_message", STRING, "1-3", nullable="1-3", default=None),
    _f("node_id", INT32, "0-3"),
    _f("host", STRING, "0-3"),
    _f("port", INT32, "0-3"),
    _f("coordinators", [
        _f("key", STRING, "4+"),
        _f("node_id", INT32, "4+"),
        _f("host", STRING, "4+"),
        _f("port", INT32, "4+"),
        _f("error_code", INT16, "4+"),
        _f("error_message", STRING, "4+", nullable="4+", default=None),
    ], "4+"),
)

JOIN_GROUP_REQUEST = _struct(
    _f("group_id", STRING),
    _f("session_timeout_ms", INT32),
    _f("rebalance_timeout_ms", INT32, "1+", default=-1),
    _f("member_id", STRING),
    _f("group_instance_id", STRING, "5+", nullable="5+", default=None),
    _f("protocol_type", STRING),
    _f("protocols", [_f("name", STRING), _f("metadata", BYTES)]),
    _f("reason", STRING, "8+", nullable="8+", default=None),
)
JOIN_GROUP_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "2+"),
    _f("error_code", INT16),
    _f("generation_id", INT32, default=-1),
    _f("protocol_type", STRING, "7+", nullable="7+", default=None),
    _f("protocol_name", STRING, nullable="7+"),
    _f("leader", STRING),
    _f("skip_assignment", BOOL, "9+", default=False),
    _f("member_id", STRING),
    _f("members", [
        _f("member_id", STRING),
        _f("group_instance_id", STRING, "5+", nullable="5+", default=None),
        _f("metadata", BYTES),
    ]),
)

SYNC_GROUP_REQUEST = _struct(
    _f("group_id", STRING),
    _f("generation_id", INT32),
    _f("member_id", STRING),
    _f("group_instance_id", STRING, "3+", nullable="3+", default=None),
    _f("protocol_type", STRING, "5+", nullable="5+", default=None),
    _f("protocol_name", STRING, "5+", nullable="5+", default=None),
    _f("assignments", [_f("member_id", STRING), _f("assignment", BYTES)]),
)
SYNC_GROUP_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "1+"),
    _f("error_code", INT16),
    _f("protocol_type", STRING, "5+", nullable="5+", default=None),
    _f("protocol_name", STRING, "5+", nullable="5+", default=None),
    _f("assignment", BYTES),
)

HEARTBEAT_REQUEST = _struct(
    _f("group_id", STRING),
    _f("generation_id", INT32),
    _f("member_id", STRING),
    _f("group_instance_id", STRING, "3+", nullable="3+", default=None),
)
HEARTBEAT_RESPONSE = _struct(_f("throttle_time_ms", INT32, "1+"), _f("error_code", INT16))

LEAVE_GROUP_REQUEST = _struct(
    _f("group_id", STRING),
    _f("member_id", STRING, "0-2"),
    _f("members", [
        _f("member_id", STRING, "3+"),
        _f("group_instance_id", STRING, "3+", nullable="3+", default=None),
        _f("reason", STRING, "5+", nullable="5+", default=None),
    ], "3+"),
)
LEAVE_GROUP_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "1+"),
    _f("error_code", INT16),
    _f("members", [
        _f("member_id", STRING, "3+"),
        _f("group_instance_id", STRING, "3+", nullable="3+", default=None),
        _f("error_code", INT16, "3+"),
    ], "3+"),
)

OFFSET_COMMIT_REQUEST = _struct(
    _f("group_id", STRING),
    _f("generation_id_or_member_epoch", INT32, "1+", default=-1),
    _f("member_id", STRING, "1+"),
    _f("group_instance_id", STRING, "7+", nullable="7+", default=None),
    _f("retention_time_ms", INT64, "2-4", default=-1),
    _f("topics", [
        _f("name", STRING),
        _f("partitions", [
            _f("partition_index", INT32),
            _f("committed_offset", INT64),
            _f("committed_leader_epoch", INT32, "6+", default=-1),
            _f("commit_timestamp", INT64, "1", default=-1),
            _f("committed_metadata", STRING, nullable="0+", default=None),
        ]),
    ]),
)
OFFSET_COMMIT_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "3+"),
    _f("topics", [
        _f("name", STRING),
        _f("partitions", [_f("partition_index", INT32), _f("error_code", INT16)]),
    ]),
)

_FETCH_PARTITION = [
    _f("partition_index", INT32),
    _f("committed_offset", INT64),
    _f("committed_leader_epoch", INT32, "5+", default=-1),
    _f("metadata", STRING, nullable="0+"),
    _f("error_code", INT16),
]
OFFSET_FETCH_REQUEST = _struct(
    _f("group_id", STRING, "0-7"),
    _f("topics", [_f("name", STRING), _f("partition_indexes", Array(INT32))], "0-7", nullable="2-7", default=None),
    _f("groups", [
        _f("group_id", STRING, "8+"),
        _f("topics", [_f("name", STRING, "8+"), _f("partition_indexes", Array(INT32), "8+")], "8+",
           nullable="8+", default=None),
    ], "8+"),
    _f("require_stable", BOOL, "7+"),
)
OFFSET_FETCH_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "3+"),
    _f("topics", [_f("name", STRING), _f("partitions", _FETCH_PARTITION)], "0-7"),
    _f("error_code", INT16, "2-7"),
    _f("groups", [
        _f("group_id", STRING, "8+"),
        _f("topics", [_f("name", STRING, "8+"), _f("partitions", _FETCH_PARTITION, "8+")], "8+"),
        _f("error_code", INT16, "8+"),
    ], "8+"),
)

OFFSET_DELETE_REQUEST = _struct(
    _f("group_id", STRING),
    _f("topics", [_f("name", STRING), _f("partitions", [_f("partition_index", INT32)])]),
)
OFFSET_DELETE_RESPONSE = _struct(
    _f("error_code", INT16),
    _f("throttle_time_ms", INT32),
    _f("topics", [
        _f("name", STRING),
        _f("partitions", [_f("partition_index", INT32), _f("error_code", INT16)]),
    ]),
)

LIST_GROUPS_REQUEST = _struct(
    _f("states_filter", Array(STRING), "4+"),
    _f("types_filter", Array(STRING), "5+"),
)
LIST_GROUPS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "1+"),
    _f("error_code", INT16),
    _f("groups", [
        _f("group_id", STRING),
        _f("protocol_type", STRING),
        _f("group_state", STRING, "4+"),
        _f("group_type", STRING, "5+"),
    ]),
)

DESCRIBE_GROUPS_REQUEST = _struct(
    _f("groups", Array(STRING)),
    _f("include_authorized_operations", BOOL, "3+"),
)
DESCRIBE_GROUPS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "1+"),
    _f("groups", [
        _f("error_code", INT16),
        _f("group_id", STRING),
        _f("group_state", STRING),
        _f("protocol_type", STRING),
        _f("protocol_data", STRING),
        _f("members", [
            _f("member_id", STRING),
            _f("group_instance_id", STRING, "4+", nullable="4+", default=None),
            _f("client_id", STRING),
            _f("client_host", STRING),
            _f("member_metadata", BYTES),
            _f("member_assignment", BYTES),
        ]),
        _f("authorized_operations", INT32, "3+", default=INT32_MIN),
    ]),
)

DELETE_GROUPS_REQUEST = _struct(_f("groups_names", Array(STRING)))
DELETE_GROUPS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32),
    _f("results", [_f("group_id", STRING), _f("error_code", INT16)]),
)
