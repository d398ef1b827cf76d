"""The record schemas Kafka writes into its own logs, as data for the one interpreter: the
coordinator records of ``__consumer_offsets`` and ``__transaction_state``, the consumer
protocol's subscription and assignment, and the KRaft control records.

Field names are Kafka's JSON names (camelCase), since these messages are shown as Kafka's
``JsonConverter`` writes them. Each is read with :class:`MessageReader` after its version,
which the caller reads first (an int16), as Kafka's serdes do.

``__consumer_offsets`` (Kafka 4.0's ``group-coordinator/src/main/resources/common/message``):

================================  ======================================================
key version (record type)         key / value messages (``CoordinatorRecordSerde``)
================================  ======================================================
0, 1                              OffsetCommitKey / OffsetCommitValue
2                                 GroupMetadataKey / GroupMetadataValue
3 - 8                             ConsumerGroup*Key / ConsumerGroup*Value (KIP-848)
9 - 14                            ShareGroup*Key / ShareGroup*Value (KIP-932)
15                                ShareGroupStatePartitionMetadataKey / ...Value
16                                ConsumerGroupRegularExpressionKey / ...Value (KAFKA-18234)
================================  ======================================================

``__share_group_state`` (Kafka 4.0's ``share-coordinator``): 0 ShareSnapshotKey / Value, 1
ShareUpdateKey / Value. ``__remote_log_metadata`` (KIP-405, ``storage/src/main/resources/message``):
values framed as KRaft metadata records are (frame version 1, api key, version, message) with
api keys 0 RemoteLogSegmentMetadataRecord, 1 RemoteLogSegmentMetadataUpdateRecord, 2
RemotePartitionDeleteMetadataRecord, 3 RemoteLogSegmentMetadataSnapshotRecord.
"""

from __future__ import annotations

from ._types import (
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    Array,
    Field,
    Message,
    _f,
    _message,
    _struct,
)

#: ``"nullableVersions": "0+"``.
_ALWAYS = "0+"

_TOPIC_PARTITIONS = _struct(_f("topic", STRING), _f("partitions", Array(INT32)))
_TOPIC_ID_PARTITIONS = _struct(_f("topicId", UUID), _f("partitions", Array(INT32)))

# -- __consumer_offsets ----------------------------------------------------------------------------

OFFSET_COMMIT_KEY = _message(
    "OffsetCommitKey", "0-1", "none",
    _f("group", STRING, "0-1"), _f("topic", STRING, "0-1"), _f("partition", INT32, "0-1"),
)
OFFSET_COMMIT_VALUE = _message(
    "OffsetCommitValue", "0-4", "4+",
    _f("offset", INT64),
    _f("leaderEpoch", INT32, "3+"),
    _f("metadata", STRING),
    _f("commitTimestamp", INT64),
    _f("expireTimestamp", INT64, "1"),
)
GROUP_METADATA_KEY = _message("GroupMetadataKey", "2", "none", _f("group", STRING, "2"))
GROUP_METADATA_VALUE = _message(
    "GroupMetadataValue", "0-4", "4+",
    _f("protocolType", STRING),
    _f("generation", INT32),
    _f("protocol", STRING, nullable=_ALWAYS),
    _f("leader", STRING, nullable=_ALWAYS),
    _f("currentStateTimestamp", INT64, "2+"),
    _f("members", [
        _f("memberId", STRING),
        _f("groupInstanceId", STRING, "3+", nullable="3+"),
        _f("clientId", STRING),
        _f("clientHost", STRING),
        _f("rebalanceTimeout", INT32, "1+"),
        _f("sessionTimeout", INT32),
        _f("subscription", BYTES),
        _f("assignment", BYTES),
    ]),
)

_GROUP_ID = _f("groupId", STRING)
_MEMBER_ID = _f("memberId", STRING)


def _key(name: str, record_type: int, *fields: Field) -> Message:
    """A coordinator key: its only version is its record type (``"validVersions": "<type>"``)."""
    return _message(name, str(record_type), "none", *fields)


def _value(name: str, *fields: Field) -> Message:
    """A coordinator value of Kafka 4.0: version 0, flexible."""
    return _message(name, "0", "0+", *fields)


_PARTITION_RACKS = [_f("partition", INT32), _f("racks", Array(STRING))]
_TOPIC_METADATA = [
    _f("topicId", UUID),
    _f("topicName", STRING),
    _f("numPartitions", INT32),
    _f("partitionMetadata", _PARTITION_RACKS),
]
#: The group coordinator's records after the classic ones, by record type (the key's version):
#: the KIP-848 consumer groups (3-8, 16) and the KIP-932 share groups (9-15).
_COORDINATOR_RECORDS: dict[int, tuple[Message, Message]] = {
    3: (_key("ConsumerGroupMetadataKey", 3, _GROUP_ID), _value("ConsumerGroupMetadataValue", _f("epoch", INT32))),
    4: (_key("ConsumerGroupPartitionMetadataKey", 4, _GROUP_ID),
        _value("ConsumerGroupPartitionMetadataValue", _f("topics", _TOPIC_METADATA))),
    5: (_key("ConsumerGroupMemberMetadataKey", 5, _GROUP_ID, _MEMBER_ID), _value(
        "ConsumerGroupMemberMetadataValue",
        _f("instanceId", STRING, nullable=_ALWAYS),
        _f("rackId", STRING, nullable=_ALWAYS),
        _f("clientId", STRING),
        _f("clientHost", STRING),
        _f("subscribedTopicNames", Array(STRING)),
        _f("subscribedTopicRegex", STRING, nullable=_ALWAYS),
        _f("rebalanceTimeoutMs", INT32, default=-1),
        _f("serverAssignor", STRING, nullable=_ALWAYS),
        _f("classicMemberMetadata", _struct(
            _f("sessionTimeoutMs", INT32),
            _f("supportedProtocols", [_f("name", STRING), _f("metadata", BYTES)]),
        ), nullable=_ALWAYS, tag=0),
    )),
    6: (_key("ConsumerGroupTargetAssignmentMetadataKey", 6, _GROUP_ID),
        _value("ConsumerGroupTargetAssignmentMetadataValue", _f("assignmentEpoch", INT32))),
    7: (_key("ConsumerGroupTargetAssignmentMemberKey", 7, _GROUP_ID, _MEMBER_ID),
        _value("ConsumerGroupTargetAssignmentMemberValue", _f("topicPartitions", Array(_TOPIC_ID_PARTITIONS)))),
    8: (_key("ConsumerGroupCurrentMemberAssignmentKey", 8, _GROUP_ID, _MEMBER_ID), _value(
        "ConsumerGroupCurrentMemberAssignmentValue",
        _f("memberEpoch", INT32),
        _f("previousMemberEpoch", INT32),
        _f("state", INT8),
        _f("assignedPartitions", Array(_TOPIC_ID_PARTITIONS)),
        _f("partitionsPendingRevocation", Array(_TOPIC_ID_PARTITIONS)),
    )),
    9: (_key("ShareGroupPartitionMetadataKey", 9, _GROUP_ID),
        _value("ShareGroupPartitionMetadataValue", _f("topics", _TOPIC_METADATA))),
    10: (_key("ShareGroupMemberMetadataKey", 10, _GROUP_ID, _MEMBER_ID), _value(
        "ShareGroupMemberMetadataValue",
        _f("rackId", STRING, nullable=_ALWAYS),
        _f("clientId", STRING),
        _f("clientHost", STRING),
        _f("subscribedTopicNames", Array(STRING)),
    )),
    11: (_key("ShareGroupMetadataKey", 11, _GROUP_ID), _value("ShareGroupMetadataValue", _f("epoch", INT32))),
    12: (_key("ShareGroupTargetAssignmentMetadataKey", 12, _GROUP_ID),
         _value("ShareGroupTargetAssignmentMetadataValue", _f("assignmentEpoch", INT32))),
    13: (_key("ShareGroupTargetAssignmentMemberKey", 13, _GROUP_ID, _MEMBER_ID),
         _value("ShareGroupTargetAssignmentMemberValue", _f("topicPartitions", Array(_TOPIC_ID_PARTITIONS)))),
    14: (_key("ShareGroupCurrentMemberAssignmentKey", 14, _GROUP_ID, _MEMBER_ID), _value(
        "ShareGroupCurrentMemberAssignmentValue",
        _f("memberEpoch", INT32),
        _f("previousMemberEpoch", INT32),
        _f("state", INT8),
        _f("assignedPartitions", Array(_TOPIC_ID_PARTITIONS)),
    )),
    15: (_key("ShareGroupStatePartitionMetadataKey", 15, _GROUP_ID), _value(
        "ShareGroupStatePartitionMetadataValue",
        _f("initializedTopics", [_f("topicId", UUID), _f("topicName", STRING), _f("partitions", Array(INT32))]),
        _f("deletingTopics", [_f("topicId", UUID), _f("topicName", STRING)]),
    )),
    16: (_key("ConsumerGroupRegularExpressionKey", 16, _GROUP_ID, _f("regularExpression", STRING)), _value(
        "ConsumerGroupRegularExpressionValue",
        _f("topics", Array(STRING)),
        _f("version", INT64),
        _f("timestamp", INT64),
    )),
}
#: Record types 0 and 1 are both offset commits (1 is the current one, 0 the legacy).
_OFFSET_COMMIT_TYPES = (0, 1)
_GROUP_METADATA_TYPE = 2


def coordinator_record_schemas(record_type: int) -> tuple[Message, Message] | None:
    """The (key, value) messages of a ``__consumer_offsets`` record whose key starts with
    ``record_type`` (``CoordinatorRecordSerde``: the key's version is the record type), or None
    for a type this module does not know."""
    if record_type in _OFFSET_COMMIT_TYPES:
        return OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE
    if record_type == _GROUP_METADATA_TYPE:
        return GROUP_METADATA_KEY, GROUP_METADATA_VALUE
    return _COORDINATOR_RECORDS.get(record_type)


# -- the consumer protocol (a classic group member's subscription and assignment bytes) ----------

CONSUMER_PROTOCOL_SUBSCRIPTION = _message(
    "ConsumerProtocolSubscription", "0-3", "none",
    _f("topics", Array(STRING)),
    _f("userData", BYTES, nullable=_ALWAYS),
    _f("ownedPartitions", Array(_TOPIC_PARTITIONS), "1+"),
    _f("generationId", INT32, "2+"),
    _f("rackId", STRING, "3+", nullable="3+"),
)
CONSUMER_PROTOCOL_ASSIGNMENT = _message(
    "ConsumerProtocolAssignment", "0-3", "none",
    _f("assignedPartitions", Array(_TOPIC_PARTITIONS)),
    _f("userData", BYTES, nullable=_ALWAYS),
)

# -- __transaction_state ---------------------------------------------------------------------------

TRANSACTION_LOG_KEY = _message("TransactionLogKey", "0", "none", _f("transactionalId", STRING, "0"))
TRANSACTION_LOG_VALUE = _message(
    "TransactionLogValue", "0-1", "1+",
    _f("producerId", INT64),
    # KIP-890 (transactions v2, Kafka 4.0): tagged fields of version 1, -1 when unset.
    _f("previousProducerId", INT64, "1+", default=-1, tag=0),
    _f("nextProducerId", INT64, "1+", default=-1, tag=1),
    _f("producerEpoch", INT16),
    _f("transactionTimeoutMs", INT32),
    _f("transactionStatus", INT8),
    _f("transactionPartitions", [_f("topic", STRING), _f("partitionIds", Array(INT32))], nullable=_ALWAYS),
    _f("transactionLastUpdateTimestampMs", INT64),
    _f("transactionStartTimestampMs", INT64),
    _f("clientTransactionVersion", INT16, "1+", default=0, tag=2),
)

# -- __share_group_state (KIP-932) -------------------------------------------------------------------

_SHARE_PARTITION_KEY = (_GROUP_ID, _f("topicId", UUID), _f("partition", INT32))
_STATE_BATCHES = [
    _f("firstOffset", INT64, "0"),
    _f("lastOffset", INT64, "0"),
    _f("deliveryState", INT8, "0"),  # 0 Available, 2 Acked, 4 Archived
    _f("deliveryCount", INT16, "0"),
]
#: The share coordinator's records by record type (the key's version): a share-partition's
#: snapshot (0) and the updates since it (1).
_SHARE_COORDINATOR_RECORDS: dict[int, tuple[Message, Message]] = {
    0: (_key("ShareSnapshotKey", 0, *_SHARE_PARTITION_KEY), _value(
        "ShareSnapshotValue",
        _f("snapshotEpoch", UINT16, "0"),
        _f("stateEpoch", INT32),
        _f("leaderEpoch", INT32),
        _f("startOffset", INT64, "0"),
        _f("stateBatches", _STATE_BATCHES, "0"),
    )),
    1: (_key("ShareUpdateKey", 1, *_SHARE_PARTITION_KEY), _value(
        "ShareUpdateValue",
        _f("snapshotEpoch", UINT16, "0"),
        _f("leaderEpoch", INT32),
        _f("startOffset", INT64, "0"),  # -1: the start offset is not updated
        _f("stateBatches", _STATE_BATCHES, "0"),
    )),
}


def share_coordinator_record_schemas(record_type: int) -> tuple[Message, Message] | None:
    """The (key, value) messages of a ``__share_group_state`` record whose key starts with
    ``record_type``, or None for a type Kafka 4.0 does not declare."""
    return _SHARE_COORDINATOR_RECORDS.get(record_type)


# -- __remote_log_metadata (KIP-405) -------------------------------------------------------------------

_TOPIC_ID_PARTITION = [_f("name", STRING), _f("id", UUID), _f("partition", INT32)]
_SEGMENT_ID = [_f("topicIdPartition", _struct(*_TOPIC_ID_PARTITION)), _f("id", UUID)]
_SEGMENT_LEADER_EPOCHS = [_f("leaderEpoch", INT32), _f("offset", INT64)]
#: ``TopicBasedRemoteLogMetadataManager``'s records by api key, each with the name of the Java
#: class ``RemoteLogMetadataSerde`` turns it into. Every one is flexible from version 0.
REMOTE_LOG_METADATA_RECORDS: dict[int, tuple[str, Message]] = {
    0: ("RemoteLogSegmentMetadata", _value(
        "RemoteLogSegmentMetadataRecord",
        _f("remoteLogSegmentId", _struct(*_SEGMENT_ID)),
        _f("startOffset", INT64),
        _f("endOffset", INT64),
        _f("brokerId", INT32),
        _f("maxTimestampMs", INT64),
        _f("eventTimestampMs", INT64),
        _f("segmentLeaderEpochs", _SEGMENT_LEADER_EPOCHS),
        _f("segmentSizeInBytes", INT32),
        _f("customMetadata", BYTES, nullable=_ALWAYS, default=None),
        _f("remoteLogSegmentState", INT8),
    )),
    1: ("RemoteLogSegmentMetadataUpdate", _value(
        "RemoteLogSegmentMetadataUpdateRecord",
        _f("remoteLogSegmentId", _struct(*_SEGMENT_ID)),
        _f("brokerId", INT32),
        _f("eventTimestampMs", INT64),
        _f("customMetadata", BYTES, nullable=_ALWAYS, default=None),
        _f("remoteLogSegmentState", INT8),
    )),
    2: ("RemotePartitionDeleteMetadata", _value(
        "RemotePartitionDeleteMetadataRecord",
        _f("topicIdPartition", _struct(*_TOPIC_ID_PARTITION)),
        _f("brokerId", INT32),
        _f("eventTimestampMs", INT64),
        _f("remotePartitionDeleteState", INT8),
    )),
    3: ("RemoteLogSegmentMetadataSnapshot", _value(
        "RemoteLogSegmentMetadataSnapshotRecord",
        _f("segmentId", UUID),
        _f("startOffset", INT64),
        _f("endOffset", INT64),
        _f("brokerId", INT32),
        _f("maxTimestampMs", INT64),
        _f("eventTimestampMs", INT64),
        _f("segmentLeaderEpochs", _SEGMENT_LEADER_EPOCHS),
        _f("segmentSizeInBytes", INT32),
        _f("customMetadata", BYTES, nullable=_ALWAYS, default=None),
        _f("remoteLogSegmentState", INT8),
    )),
}

# -- KRaft control records -------------------------------------------------------------------------

#: The KRaft control records by control type (Kafka's ``ControlRecordType`` ids:
#: SNAPSHOT_HEADER 3, SNAPSHOT_FOOTER 4, KRAFT_VERSION 5, KRAFT_VOTERS 6), each with the label
#: DumpLogSegments prints before it.
KRAFT_CONTROL_RECORDS: dict[int, tuple[str, Message]] = {
    3: ("SnapshotHeader", _message(
        "SnapshotHeaderRecord", "0", "0+", _f("version", INT16), _f("lastContainedLogTimestamp", INT64))),
    4: ("SnapshotFooter", _message("SnapshotFooterRecord", "0", "0+", _f("version", INT16))),
    5: ("KRaftVersion", _message(
        "KRaftVersionRecord", "0", "0+", _f("version", INT16), _f("kRaftVersion", INT16))),
    6: ("KRaftVoters", _message(
        "VotersRecord", "0", "0+",
        _f("version", INT16),
        _f("voters", [
            _f("voterId", INT32),
            _f("voterDirectoryId", UUID),
            _f("endpoints", [_f("name", STRING), _f("host", STRING), _f("port", UINT16)]),
            _f("kRaftVersionFeature", _struct(_f("minSupportedVersion", INT16), _f("maxSupportedVersion", INT16))),
        ]),
    )),
}
