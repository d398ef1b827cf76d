"""The record schemas Kafka writes into its own logs, as data for the one interpreter: the
coordinator records of ``__consumer_offsets`` and ``__transaction_state``, the consumer
protocol's subscription and assignment, and the KRaft control records.

Field names are Kafka's JSON names (camelCase), since these messages are shown as Kafka's
``JsonConverter`` writes them. Each is read with :class:`MessageReader` after its version,
which the caller reads first (an int16), as Kafka's serdes do.

================================  ======================================================
key version (record type)         key / value messages (``CoordinatorRecordSerde``)
================================  ======================================================
0, 1                              OffsetCommitKey / OffsetCommitValue
2                                 GroupMetadataKey / GroupMetadataValue
3 - 8                             ConsumerGroup*Key / ConsumerGroup*Value (KIP-848)
================================  ======================================================
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
#: The KIP-848 consumer group records, by record type (the key's version).
_CONSUMER_GROUP_KEYS = {
    3: _message("ConsumerGroupMetadataKey", "3", "none", _GROUP_ID),
    4: _message("ConsumerGroupPartitionMetadataKey", "4", "none", _GROUP_ID),
    5: _message("ConsumerGroupMemberMetadataKey", "5", "none", _GROUP_ID, _MEMBER_ID),
    6: _message("ConsumerGroupTargetAssignmentMetadataKey", "6", "none", _GROUP_ID),
    7: _message("ConsumerGroupTargetAssignmentMemberKey", "7", "none", _GROUP_ID, _MEMBER_ID),
    8: _message("ConsumerGroupCurrentMemberAssignmentKey", "8", "none", _GROUP_ID, _MEMBER_ID),
}
_CONSUMER_GROUP_VALUES = {
    3: _message("ConsumerGroupMetadataValue", "0", "0+", _f("epoch", INT32)),
    4: _message(
        "ConsumerGroupPartitionMetadataValue", "0", "0+",
        _f("topics", [
            _f("topicId", UUID),
            _f("topicName", STRING),
            _f("numPartitions", INT32),
            _f("partitionMetadata", [_f("partition", INT32), _f("racks", Array(STRING))]),
        ]),
    ),
    5: _message(
        "ConsumerGroupMemberMetadataValue", "0", "0+",
        _f("instanceId", STRING, nullable=_ALWAYS),
        _f("rackId", STRING, nullable=_ALWAYS),
        _f("clientId", STRING),
        _f("clientHost", STRING),
        _f("subscribedTopicNames", Array(STRING)),
        _f("subscribedTopicRegex", STRING, nullable=_ALWAYS),
        _f("rebalanceTimeoutMs", INT32),
        _f("serverAssignor", STRING, nullable=_ALWAYS),
        _f("classicMemberMetadata", _struct(
            _f("sessionTimeoutMs", INT32),
            _f("supportedProtocols", [_f("name", STRING), _f("metadata", BYTES)]),
        ), nullable=_ALWAYS, tag=0),
    ),
    6: _message("ConsumerGroupTargetAssignmentMetadataValue", "0", "0+", _f("assignmentEpoch", INT32)),
    7: _message("ConsumerGroupTargetAssignmentMemberValue", "0", "0+",
                _f("topicPartitions", Array(_TOPIC_ID_PARTITIONS))),
    8: _message(
        "ConsumerGroupCurrentMemberAssignmentValue", "0", "0+",
        _f("memberEpoch", INT32),
        _f("previousMemberEpoch", INT32),
        _f("state", INT8),
        _f("assignedPartitions", Array(_TOPIC_ID_PARTITIONS)),
        _f("partitionsPendingRevocation", Array(_TOPIC_ID_PARTITIONS)),
    ),
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
    if record_type in _CONSUMER_GROUP_KEYS:
        return _CONSUMER_GROUP_KEYS[record_type], _CONSUMER_GROUP_VALUES[record_type]
    return None


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
    _f("producerEpoch", INT16),
    _f("transactionTimeoutMs", INT32),
    _f("transactionStatus", INT8),
    _f("transactionPartitions", [_f("topic", STRING), _f("partitionIds", Array(INT32))], nullable=_ALWAYS),
    _f("transactionLastUpdateTimestampMs", INT64),
    _f("transactionStartTimestampMs", INT64),
)

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
