"""The APIs kafkalog's broker serves, written by hand from Kafka's message specs
(``clients/src/main/resources/common/message/*.json``): API keys, error codes, and each
request and response schema declared once, as data, under Kafka's names in snake case
(``TopicData`` -> ``topic_data``), with the versions served and the header versions.

=================  =======  ============================================================
API (key)          versions notes
=================  =======  ============================================================
Produce (0)        0-8      records stay a memoryview of the request (no copy); v0-2 carry
                            message sets v0/v1, which the broker converts to a v2 batch
Fetch (1)          4-12     records may be file slices, sent with sendfile after the headers;
                            v12 is flexible and adds last_fetched_epoch and the diverging
                            epoch (KIP-320); v13+ name topics by id, which the served
                            Metadata versions never hand out
ListOffsets (2)    1-5
Metadata (3)       0-8
FindCoordinator    0-4      and the other group coordinator APIs: see ``_group_apis.py``
(10)
ApiVersions (18)   0-3      v3 is flexible (compact strings/arrays, tagged fields); a request
                            above v3 is answered in the v0 layout (Kafka's KIP-511 rule)
CreateTopics (19)  0-4
InitProducerId     0-1
(22)
OffsetForLeader-   0-4      v4 is flexible (pairs with Fetch v12); v2 adds
Epoch (23)                  current_leader_epoch, v3 replica_id
DeleteTopics (20)  0-5      v6 names topics by id, which the served Metadata versions lack
DeleteRecords      0-2      v2 is flexible
(21)
DescribeConfigs    0-4      v4 is flexible
(32)
AlterConfigs (33)  0-2      v2 is flexible
CreatePartitions   0-3      v2+ are flexible
(37)
IncrementalAlter-  0-1      v1 is flexible
Configs (44)
ElectLeaders (43)  0-2      v2 is flexible; preferred elections in a cluster (``kafkalog[cluster]``)
=================  =======  ============================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ._admin_apis import (
    ALTER_CONFIGS_REQUEST,
    ALTER_CONFIGS_RESPONSE,
    CREATE_PARTITIONS_REQUEST,
    CREATE_PARTITIONS_RESPONSE,
    DELETE_RECORDS_REQUEST,
    DELETE_RECORDS_RESPONSE,
    DELETE_TOPICS_REQUEST,
    DELETE_TOPICS_RESPONSE,
    DESCRIBE_CONFIGS_REQUEST,
    DESCRIBE_CONFIGS_RESPONSE,
    ELECT_LEADERS_REQUEST,
    ELECT_LEADERS_RESPONSE,
    INCREMENTAL_ALTER_CONFIGS_REQUEST,
)
from ._group_apis import (
    DELETE_GROUPS_REQUEST,
    DELETE_GROUPS_RESPONSE,
    DESCRIBE_GROUPS_REQUEST,
    DESCRIBE_GROUPS_RESPONSE,
    FIND_COORDINATOR_REQUEST,
    FIND_COORDINATOR_RESPONSE,
    HEARTBEAT_REQUEST,
    HEARTBEAT_RESPONSE,
    JOIN_GROUP_REQUEST,
    JOIN_GROUP_RESPONSE,
    LEAVE_GROUP_REQUEST,
    LEAVE_GROUP_RESPONSE,
    LIST_GROUPS_REQUEST,
    LIST_GROUPS_RESPONSE,
    OFFSET_COMMIT_REQUEST,
    OFFSET_COMMIT_RESPONSE,
    OFFSET_DELETE_REQUEST,
    OFFSET_DELETE_RESPONSE,
    OFFSET_FETCH_REQUEST,
    OFFSET_FETCH_RESPONSE,
    SYNC_GROUP_REQUEST,
    SYNC_GROUP_RESPONSE,
)
from ._types import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT32_MAX,
    INT32_MIN,
    INT64,
    RECORDS,
    STRING,
    VERSION_MAX,
    Array,
    Struct,
    _f,
    _struct,
)


class ApiKey(IntEnum):
    """Kafka's API keys (``ApiKeys.java``) for the APIs implemented here."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47


class ErrorCode(IntEnum):
    """The error codes kafkalog's broker answers with (Kafka's ``Errors.java``)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    KAFKA_STORAGE_ERROR = 56
    TOPIC_DELETION_DISABLED = 73
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87


# -- the schemas (Kafka's JSON specs, restricted to what the served versions use) ------------------

REQUEST_HEADER = _struct(
    _f("request_api_key", INT16),
    _f("request_api_version", INT16),
    _f("correlation_id", INT32),
    _f("client_id", STRING, "1+", nullable="1+", default=""),
)

API_VERSIONS_REQUEST = _struct(
    _f("client_software_name", STRING, "3+"),
    _f("client_software_version", STRING, "3+"),
)
API_VERSIONS_RESPONSE = _struct(
    _f("error_code", INT16),
    _f("api_keys", [_f("api_key", INT16), _f("min_version", INT16), _f("max_version", INT16)]),
    _f("throttle_time_ms", INT32, "1+"),
    # v3+ tagged fields (SupportedFeatures, FinalizedFeatures*, ZkMigrationReady) are not sent;
    # received ones are kept raw under "_tagged_fields".
)

METADATA_REQUEST = _struct(
    # v0: an empty array means all topics; v1+: null means all topics, empty means none.
    _f("topics", [_f("name", STRING)], nullable="1+"),
    _f("allow_auto_topic_creation", BOOL, "4+", default=True),
    _f("include_cluster_authorized_operations", BOOL, "8-10"),
    _f("include_topic_authorized_operations", BOOL, "8+"),
)
METADATA_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "3+"),
    _f("brokers", [
        _f("node_id", INT32),
        _f("host", STRING),
        _f("port", INT32),
        _f("rack", STRING, "1+", nullable="1+", default=None),
    ]),
    _f("cluster_id", STRING, "2+", nullable="2+", default=None),
    _f("controller_id", INT32, "1+", default=-1),
    _f("topics", [
        _f("error_code", INT16),
        _f("name", STRING),
        _f("is_internal", BOOL, "1+", default=False),
        _f("partitions", [
            _f("error_code", INT16),
            _f("partition_index", INT32),
            _f("leader_id", INT32),
            _f("leader_epoch", INT32, "7+", default=-1),
            _f("replica_nodes", Array(INT32)),
            _f("isr_nodes", Array(INT32)),
            _f("offline_replicas", Array(INT32), "5+"),
        ]),
        _f("topic_authorized_operations", INT32, "8+", default=INT32_MIN),
    ]),
    _f("cluster_authorized_operations", INT32, "8-10", default=INT32_MIN),
)

CREATE_TOPICS_REQUEST = _struct(
    _f("topics", [
        _f("name", STRING),
        _f("num_partitions", INT32),
        _f("replication_factor", INT16),
        _f("assignments", [_f("partition_index", INT32), _f("broker_ids", Array(INT32))]),
        _f("configs", [_f("name", STRING), _f("value", STRING, nullable="0+")]),
    ]),
    _f("timeout_ms", INT32, default=60000),
    _f("validate_only", BOOL, "1+", default=False),
)
CREATE_TOPICS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "2+"),
    _f("topics", [
        _f("name", STRING),
        _f("error_code", INT16),
        _f("error_message", STRING, "1+", nullable="0+", default=None),
    ]),
)

INIT_PRODUCER_ID_REQUEST = _struct(
    _f("transactional_id", STRING, nullable="0+", default=None),
    _f("transaction_timeout_ms", INT32),
)
INIT_PRODUCER_ID_RESPONSE = _struct(
    _f("throttle_time_ms", INT32),
    _f("error_code", INT16),
    _f("producer_id", INT64, default=-1),
    _f("producer_epoch", INT16),
)

PRODUCE_REQUEST = _struct(
    _f("transactional_id", STRING, "3+", nullable="3+", default=None),
    _f("acks", INT16),
    _f("timeout_ms", INT32),
    _f("topic_data", [
        _f("name", STRING),
        _f("partition_data", [_f("index", INT32), _f("records", RECORDS, nullable="0+")]),
    ]),
)
PRODUCE_RESPONSE = _struct(
    _f("responses", [
        _f("name", STRING),
        _f("partition_responses", [
            _f("index", INT32),
            _f("error_code", INT16),
            _f("base_offset", INT64),
            _f("log_append_time_ms", INT64, "2+", default=-1),
            _f("log_start_offset", INT64, "5+", default=-1),
            _f("record_errors", [
                _f("batch_index", INT32, "8+"),
                _f("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
            ], "8+"),
            _f("error_message", STRING, "8+", nullable="8+", default=None),
        ]),
    ]),
    _f("throttle_time_ms", INT32, "1+"),
)

LIST_OFFSETS_REQUEST = _struct(
    _f("replica_id", INT32),
    _f("isolation_level", INT8, "2+"),
    _f("topics", [
        _f("name", STRING),
        _f("partitions", [
            _f("partition_index", INT32),
            _f("current_leader_epoch", INT32, "4+", default=-1),
            _f("timestamp", INT64),
            _f("max_num_offsets", INT32, "0", default=1),
        ]),
    ]),
)
LIST_OFFSETS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "2+"),
    _f("topics", [
        _f("name", STRING),
        _f("partitions", [
            _f("partition_index", INT32),
            _f("error_code", INT16),
            _f("old_style_offsets", Array(INT64), "0"),
            _f("timestamp", INT64, "1+", default=-1),
            _f("offset", INT64, "1+", default=-1),
            _f("leader_epoch", INT32, "4+", default=-1),
        ]),
    ]),
)

#: FetchResponse's tagged ``DivergingEpoch`` and ``CurrentLeader`` (v12+), and their values
#: meaning "none" (a tagged field at its default is not written).
_EPOCH_END_OFFSET = _struct(_f("epoch", INT32, default=-1), _f("end_offset", INT64, default=-1))
_NO_DIVERGENCE = {"epoch": -1, "end_offset": -1}
_LEADER_ID_AND_EPOCH = _struct(_f("leader_id", INT32, default=-1), _f("leader_epoch", INT32, default=-1))
_NO_LEADER = {"leader_id": -1, "leader_epoch": -1}

FETCH_REQUEST = _struct(
    _f("replica_id", INT32, "0-14", default=-1),
    _f("max_wait_ms", INT32),
    _f("min_bytes", INT32),
    _f("max_bytes", INT32, "3+", default=INT32_MAX),
    _f("isolation_level", INT8, "4+"),
    _f("session_id", INT32, "7+"),
    _f("session_epoch", INT32, "7+", default=-1),
    _f("topics", [
        _f("topic", STRING, "0-12"),
        _f("partitions", [
            _f("partition", INT32),
            _f("current_leader_epoch", INT32, "9+", default=-1),
            _f("fetch_offset", INT64),
            _f("last_fetched_epoch", INT32, "12+", default=-1),
            _f("log_start_offset", INT64, "5+", default=-1),
            _f("partition_max_bytes", INT32),
        ]),
    ]),
    _f("forgotten_topics_data", [_f("topic", STRING, "7-12"), _f("partitions", Array(INT32))], "7+"),
    _f("rack_id", STRING, "11+"),
)
FETCH_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "1+"),
    _f("error_code", INT16, "7+"),
    _f("session_id", INT32, "7+"),
    _f("responses", [
        _f("topic", STRING, "0-12"),
        _f("partitions", [
            _f("partition_index", INT32),
            _f("error_code", INT16),
            _f("high_watermark", INT64),
            _f("last_stable_offset", INT64, "4+", default=-1),
            _f("log_start_offset", INT64, "5+", default=-1),
            _f("aborted_transactions", [_f("producer_id", INT64), _f("first_offset", INT64)], "4+",
               nullable="4+", default=None),
            # KIP-320: where a follower's log diverges from the leader's (tagged: absent means none)
            _f("diverging_epoch", _EPOCH_END_OFFSET, "12+", default=_NO_DIVERGENCE, tag=0),
            _f("current_leader", _LEADER_ID_AND_EPOCH, "12+", default=_NO_LEADER, tag=1),
            _f("preferred_read_replica", INT32, "11+", default=-1),
            _f("records", RECORDS, nullable="0+"),
        ]),
    ]),
)

OFFSET_FOR_LEADER_EPOCH_REQUEST = _struct(
    _f("replica_id", INT32, "3+", default=-2),
    _f("topics", [
        _f("topic", STRING),
        _f("partitions", [
            _f("partition", INT32),
            _f("current_leader_epoch", INT32, "2+", default=-1),
            _f("leader_epoch", INT32),
        ]),
    ]),
)
OFFSET_FOR_LEADER_EPOCH_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "2+"),
    _f("topics", [
        _f("topic", STRING),
        _f("partitions", [
            _f("error_code", INT16),
            _f("partition", INT32),
            _f("leader_epoch", INT32, "1+", default=-1),
            _f("end_offset", INT64, default=-1),
        ]),
    ]),
)


@dataclass(frozen=True)
class ApiSpec:
    """One API: its key, the versions served, Kafka's first flexible version, and its schemas."""

    key: ApiKey
    min_version: int
    max_version: int
    first_flexible: int
    request: Struct
    response: Struct

    def flexible(self, version: int) -> bool:
        return version >= self.first_flexible


#: The APIs and versions implemented (and advertised by the broker), with Kafka's first
#: flexible version of each (which decides the header versions).
APIS: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in (
        ApiSpec(ApiKey.PRODUCE, 0, 8, 9, PRODUCE_REQUEST, PRODUCE_RESPONSE),
        ApiSpec(ApiKey.FETCH, 4, 12, 12, FETCH_REQUEST, FETCH_RESPONSE),
        ApiSpec(ApiKey.LIST_OFFSETS, 1, 5, 6, LIST_OFFSETS_REQUEST, LIST_OFFSETS_RESPONSE),
        ApiSpec(ApiKey.METADATA, 0, 8, 9, METADATA_REQUEST, METADATA_RESPONSE),
        ApiSpec(ApiKey.FIND_COORDINATOR, 0, 4, 3, FIND_COORDINATOR_REQUEST, FIND_COORDINATOR_RESPONSE),
        ApiSpec(ApiKey.API_VERSIONS, 0, 3, 3, API_VERSIONS_REQUEST, API_VERSIONS_RESPONSE),
        ApiSpec(ApiKey.CREATE_TOPICS, 0, 4, 5, CREATE_TOPICS_REQUEST, CREATE_TOPICS_RESPONSE),
        ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 1, 2, INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE),
        ApiSpec(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4, 4, OFFSET_FOR_LEADER_EPOCH_REQUEST,
                OFFSET_FOR_LEADER_EPOCH_RESPONSE),
        # the admin APIs (``_admin_apis.py``)
        ApiSpec(ApiKey.DELETE_TOPICS, 0, 5, 4, DELETE_TOPICS_REQUEST, DELETE_TOPICS_RESPONSE),
        ApiSpec(ApiKey.DELETE_RECORDS, 0, 2, 2, DELETE_RECORDS_REQUEST, DELETE_RECORDS_RESPONSE),
        ApiSpec(ApiKey.DESCRIBE_CONFIGS, 0, 4, 4, DESCRIBE_CONFIGS_REQUEST, DESCRIBE_CONFIGS_RESPONSE),
        ApiSpec(ApiKey.ALTER_CONFIGS, 0, 2, 2, ALTER_CONFIGS_REQUEST, ALTER_CONFIGS_RESPONSE),
        ApiSpec(ApiKey.CREATE_PARTITIONS, 0, 3, 2, CREATE_PARTITIONS_REQUEST, CREATE_PARTITIONS_RESPONSE),
        ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, 1, INCREMENTAL_ALTER_CONFIGS_REQUEST, ALTER_CONFIGS_RESPONSE),
        ApiSpec(ApiKey.ELECT_LEADERS, 0, 2, 2, ELECT_LEADERS_REQUEST, ELECT_LEADERS_RESPONSE),
        # the group coordinator (_group_apis.py)
        ApiSpec(ApiKey.OFFSET_COMMIT, 0, 8, 8, OFFSET_COMMIT_REQUEST, OFFSET_COMMIT_RESPONSE),
        ApiSpec(ApiKey.OFFSET_FETCH, 1, 8, 6, OFFSET_FETCH_REQUEST, OFFSET_FETCH_RESPONSE),
        ApiSpec(ApiKey.JOIN_GROUP, 0, 9, 6, JOIN_GROUP_REQUEST, JOIN_GROUP_RESPONSE),
        ApiSpec(ApiKey.HEARTBEAT, 0, 4, 4, HEARTBEAT_REQUEST, HEARTBEAT_RESPONSE),
        ApiSpec(ApiKey.LEAVE_GROUP, 0, 5, 4, LEAVE_GROUP_REQUEST, LEAVE_GROUP_RESPONSE),
        ApiSpec(ApiKey.SYNC_GROUP, 0, 5, 4, SYNC_GROUP_REQUEST, SYNC_GROUP_RESPONSE),
        ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, 5, DESCRIBE_GROUPS_REQUEST, DESCRIBE_GROUPS_RESPONSE),
        ApiSpec(ApiKey.LIST_GROUPS, 0, 5, 3, LIST_GROUPS_REQUEST, LIST_GROUPS_RESPONSE),
        ApiSpec(ApiKey.DELETE_GROUPS, 0, 2, 2, DELETE_GROUPS_REQUEST, DELETE_GROUPS_RESPONSE),
        ApiSpec(ApiKey.OFFSET_DELETE, 0, 0, VERSION_MAX,  # never flexible
                OFFSET_DELETE_REQUEST, OFFSET_DELETE_RESPONSE),
    )
}


def supported_api_versions() -> list[dict[str, int]]:
    """The ``api_keys`` of an ApiVersions response: every API with its version range."""
    return [{"api_key": int(s.key), "min_version": s.min_version, "max_version": s.max_version} for s in APIS.values()]


#: Request header v1 (a client id) and v2 (then tagged fields), response header v0 (the
#: correlation id) and v1 (then tagged fields): the second of each for flexible versions.
REQUEST_HEADER_V1 = 1
REQUEST_HEADER_V2 = 2
RESPONSE_HEADER_V0 = 0
RESPONSE_HEADER_V1 = 1


def request_header_version(api_key: int, api_version: int) -> int:
    """Kafka's ``ApiKeys.requestHeaderVersion``: 2 for flexible versions, else 1. For
    ApiVersions this holds for any version, supported or not (a client always sends its newest)."""
    spec = APIS.get(api_key)
    if spec is None:
        raise KeyError(api_key)
    return REQUEST_HEADER_V2 if spec.flexible(api_version) else REQUEST_HEADER_V1


def response_header_version(api_key: int, api_version: int) -> int:
    """Kafka's ``ApiKeys.responseHeaderVersion``: 1 for flexible versions, else 0, and always 0
    for ApiVersions (a client must read it before it knows which versions the broker has)."""
    spec = APIS[api_key]
    if api_key == ApiKey.API_VERSIONS:
        return RESPONSE_HEADER_V0
    return RESPONSE_HEADER_V1 if spec.flexible(api_version) else RESPONSE_HEADER_V0
