"""The KRaft metadata record schemas (Kafka 4.0's ``metadata/src/main/resources/common/metadata``: 3.8's and ClearElrRecord),
as data for the one interpreter: what ``__cluster_metadata`` log segments and KRaft snapshots
(``*.checkpoint``) hold in their data records.

A metadata record's value is framed by ``MetadataRecordSerde`` as three unsigned varints (frame
version 1, the record's api key, its version) followed by the message; the key is empty. Field
names are Kafka's JSON names (camelCase), as its generated ``JsonConverter``s write them.
"""

from __future__ import annotations

from ._types import (
    BOOL,
    BYTES,
    FLOAT64,
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
)

#: ``"nullableVersions": "0+"`` and ``"taggedVersions": "0+"``.
_ALWAYS = "0+"

_ENDPOINT = [_f("name", STRING), _f("host", STRING), _f("port", UINT16), _f("securityProtocol", INT16)]
_FEATURE = [_f("name", STRING), _f("minSupportedVersion", INT16), _f("maxSupportedVersion", INT16)]


def _record(name: str, versions: str, *fields: Field) -> Message:
    """Every metadata record is flexible from version 0."""
    return _message(name, versions, "0+", *fields)


_REGISTER_BROKER = _record(
    "RegisterBrokerRecord", "0-3",
    _f("brokerId", INT32),
    _f("isMigratingZkBroker", BOOL, "2+"),
    _f("incarnationId", UUID),
    _f("brokerEpoch", INT64),
    _f("endPoints", _ENDPOINT),
    _f("features", _FEATURE),
    _f("rack", STRING, nullable=_ALWAYS),
    _f("fenced", BOOL, default=True),
    _f("inControlledShutdown", BOOL, "1+"),
    _f("logDirs", Array(UUID), "3+", tag=0),
)
_PARTITION = _record(
    "PartitionRecord", "0-2",
    _f("partitionId", INT32, default=-1),
    _f("topicId", UUID),
    _f("replicas", Array(INT32)),
    _f("isr", Array(INT32)),
    _f("removingReplicas", Array(INT32)),
    _f("addingReplicas", Array(INT32)),
    _f("leader", INT32, default=-1),
    _f("leaderRecoveryState", INT8, tag=0),
    _f("leaderEpoch", INT32, default=-1),
    _f("partitionEpoch", INT32, default=-1),
    _f("directories", Array(UUID), "1+"),
    _f("eligibleLeaderReplicas", Array(INT32), "2+", nullable="2+", default=None, tag=1),
    _f("lastKnownElr", Array(INT32), "2+", nullable="2+", default=None, tag=2),
)
_PARTITION_CHANGE = _record(
    "PartitionChangeRecord", "0-2",
    _f("partitionId", INT32, default=-1),
    _f("topicId", UUID),
    _f("isr", Array(INT32), nullable=_ALWAYS, default=None, tag=0),
    _f("leader", INT32, default=-2, tag=1),  # -2: no change (-1 would be "no leader")
    _f("replicas", Array(INT32), nullable=_ALWAYS, default=None, tag=2),
    _f("removingReplicas", Array(INT32), nullable=_ALWAYS, default=None, tag=3),
    _f("addingReplicas", Array(INT32), nullable=_ALWAYS, default=None, tag=4),
    _f("leaderRecoveryState", INT8, default=-1, tag=5),
    _f("directories", Array(UUID), "1+", nullable="1+", default=None, tag=8),
    _f("eligibleLeaderReplicas", Array(INT32), "2+", nullable="2+", default=None, tag=6),
    _f("lastKnownElr", Array(INT32), "2+", nullable="2+", default=None, tag=7),
)

#: The metadata records by api key (``MetadataRecordType`` ids), each with the name Kafka's
#: ``MetadataRecordType`` enum prints for it (its snake-cased upper-case name).
METADATA_RECORDS: dict[int, tuple[str, Message]] = {
    0: ("REGISTER_BROKER_RECORD", _REGISTER_BROKER),
    1: ("UNREGISTER_BROKER_RECORD", _record(
        "UnregisterBrokerRecord", "0", _f("brokerId", INT32), _f("brokerEpoch", INT64))),
    2: ("TOPIC_RECORD", _record("TopicRecord", "0", _f("name", STRING), _f("topicId", UUID))),
    3: ("PARTITION_RECORD", _PARTITION),
    4: ("CONFIG_RECORD", _record(
        "ConfigRecord", "0",
        _f("resourceType", INT8),  # ConfigResource.Type: 2 TOPIC, 4 BROKER, 8 BROKER_LOGGER
        _f("resourceName", STRING),
        _f("name", STRING),
        _f("value", STRING, nullable=_ALWAYS),  # null: the setting is removed
    )),
    5: ("PARTITION_CHANGE_RECORD", _PARTITION_CHANGE),
    7: ("FENCE_BROKER_RECORD", _record("FenceBrokerRecord", "0", _f("id", INT32), _f("epoch", INT64))),
    8: ("UNFENCE_BROKER_RECORD", _record("UnfenceBrokerRecord", "0", _f("id", INT32), _f("epoch", INT64))),
    9: ("REMOVE_TOPIC_RECORD", _record("RemoveTopicRecord", "0", _f("topicId", UUID))),
    10: ("DELEGATION_TOKEN_RECORD", _record(
        "DelegationTokenRecord", "0",
        _f("owner", STRING),
        _f("requester", STRING),
        _f("renewers", Array(STRING)),
        _f("issueTimestamp", INT64),
        _f("maxTimestamp", INT64),
        _f("expirationTimestamp", INT64),
        _f("tokenId", STRING),
    )),
    11: ("USER_SCRAM_CREDENTIAL_RECORD", _record(
        "UserScramCredentialRecord", "0",
        _f("name", STRING),
        _f("mechanism", INT8),
        _f("salt", BYTES),
        _f("storedKey", BYTES),
        _f("serverKey", BYTES),
        _f("iterations", INT32),
    )),
    12: ("FEATURE_LEVEL_RECORD", _record(
        "FeatureLevelRecord", "0", _f("name", STRING), _f("featureLevel", INT16))),
    14: ("CLIENT_QUOTA_RECORD", _record(
        "ClientQuotaRecord", "0",
        _f("entity", [_f("entityType", STRING), _f("entityName", STRING, nullable=_ALWAYS)]),
        _f("key", STRING),
        _f("value", FLOAT64),
        _f("remove", BOOL),
    )),
    15: ("PRODUCER_IDS_RECORD", _record(
        "ProducerIdsRecord", "0",
        _f("brokerId", INT32), _f("brokerEpoch", INT64, default=-1), _f("nextProducerId", INT64))),
    17: ("BROKER_REGISTRATION_CHANGE_RECORD", _record(
        "BrokerRegistrationChangeRecord", "0-2",
        _f("brokerId", INT32),
        _f("brokerEpoch", INT64),
        _f("fenced", INT8, tag=0),
        _f("inControlledShutdown", INT8, "1+", tag=1),
        _f("logDirs", Array(UUID), "2+", tag=2),
    )),
    18: ("ACCESS_CONTROL_ENTRY_RECORD", _record(
        "AccessControlEntryRecord", "0",
        _f("id", UUID),
        _f("resourceType", INT8),
        _f("resourceName", STRING),
        _f("patternType", INT8),
        _f("principal", STRING),
        _f("host", STRING),
        _f("operation", INT8),
        _f("permissionType", INT8),
    )),
    19: ("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", _record(
        "RemoveAccessControlEntryRecord", "0", _f("id", UUID))),
    20: ("NO_OP_RECORD", _record("NoOpRecord", "0")),
    21: ("ZK_MIGRATION_STATE_RECORD", _record(
        "ZkMigrationStateRecord", "0", _f("zkMigrationState", INT8))),
    22: ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", _record(
        "RemoveUserScramCredentialRecord", "0", _f("name", STRING), _f("mechanism", INT8))),
    23: ("BEGIN_TRANSACTION_RECORD", _record(
        "BeginTransactionRecord", "0", _f("name", STRING, nullable=_ALWAYS, default=None, tag=0))),
    24: ("END_TRANSACTION_RECORD", _record("EndTransactionRecord", "0")),
    25: ("ABORT_TRANSACTION_RECORD", _record(
        "AbortTransactionRecord", "0", _f("reason", STRING, nullable=_ALWAYS, default=None, tag=0))),
    26: ("REMOVE_DELEGATION_TOKEN_RECORD", _record(
        "RemoveDelegationTokenRecord", "0", _f("tokenId", STRING))),
    27: ("REGISTER_CONTROLLER_RECORD", _record(
        "RegisterControllerRecord", "0",
        _f("controllerId", INT32),
        _f("incarnationId", UUID),
        _f("zkMigrationReady", BOOL),
        _f("endPoints", _ENDPOINT),
        _f("features", _FEATURE),
    )),
    # Kafka 4.0 (KIP-966): clear the eligible leader replicas of a topic, or of all when empty.
    28: ("CLEAR_ELR_RECORD", _record("ClearElrRecord", "0", _f("topicName", STRING))),
}

#: ``MetadataRecordSerde``'s frame version (0 was KRaft's 2.8 preview, which later Kafka refuses).
METADATA_FRAME_VERSION = 1
#: ``ConfigResource.Type.TOPIC``'s id, the ``resourceType`` of a topic's ConfigRecord.
CONFIG_RESOURCE_TOPIC = 2
