"""The schemas of the admin APIs the broker serves besides CreateTopics and InitProducerId:
DeleteTopics, DeleteRecords, DescribeConfigs, AlterConfigs, CreatePartitions and
IncrementalAlterConfigs, written by hand from Kafka's message specs
(``clients/src/main/resources/common/message/*.json``) under Kafka's names in snake case,
restricted to the versions served (see ``_apis.py``'s table)."""

from __future__ import annotations

from ._types import BOOL, INT8, INT16, INT32, INT64, STRING, Array, _f, _struct

# DeleteTopics (20): v0-5 name topics (v6 switches to topic ids, which this broker's served
# Metadata versions never hand out). ErrorMessage from v5.
DELETE_TOPICS_REQUEST = _struct(
    _f("topic_names", Array(STRING)),
    _f("timeout_ms", INT32),
)
DELETE_TOPICS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "1+"),
    _f("responses", [
        _f("name", STRING),
        _f("error_code", INT16),
        _f("error_message", STRING, "5+", nullable="5+", default=None),
    ]),
)

# DeleteRecords (21).
DELETE_RECORDS_REQUEST = _struct(
    _f("topics", [
        _f("name", STRING),
        _f("partitions", [_f("partition_index", INT32), _f("offset", INT64)]),
    ]),
    _f("timeout_ms", INT32),
)
DELETE_RECORDS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32),
    _f("topics", [
        _f("name", STRING),
        _f("partitions", [_f("partition_index", INT32), _f("low_watermark", INT64), _f("error_code", INT16)]),
    ]),
)

# DescribeConfigs (32): v1 adds synonyms and the source (replacing IsDefault), v3 the type and
# documentation.
DESCRIBE_CONFIGS_REQUEST = _struct(
    _f("resources", [
        _f("resource_type", INT8),
        _f("resource_name", STRING),
        _f("configuration_keys", Array(STRING), nullable="0+", default=None),
    ]),
    _f("include_synonyms", BOOL, "1+", default=False),
    _f("include_documentation", BOOL, "3+", default=False),
)
DESCRIBE_CONFIGS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32),
    _f("results", [
        _f("error_code", INT16),
        _f("error_message", STRING, nullable="0+", default=None),
        _f("resource_type", INT8),
        _f("resource_name", STRING),
        _f("configs", [
            _f("name", STRING),
            _f("value", STRING, nullable="0+", default=None),
            _f("read_only", BOOL),
            _f("is_default", BOOL, "0"),
            _f("config_source", INT8, "1+", default=-1),
            _f("is_sensitive", BOOL),
            _f("synonyms", [
                _f("name", STRING, "1+"),
                _f("value", STRING, "1+", nullable="0+", default=None),
                _f("source", INT8, "1+"),
            ], "1+"),
            _f("config_type", INT8, "3+", default=0),
            _f("documentation", STRING, "3+", nullable="0+", default=None),
        ]),
    ]),
)

# AlterConfigs (33) replaces a resource's whole set of overrides; IncrementalAlterConfigs (44)
# changes named keys (SET, DELETE, APPEND, SUBTRACT). Both answer one result per resource.
ALTER_CONFIGS_REQUEST = _struct(
    _f("resources", [
        _f("resource_type", INT8),
        _f("resource_name", STRING),
        _f("configs", [_f("name", STRING), _f("value", STRING, nullable="0+", default=None)]),
    ]),
    _f("validate_only", BOOL),
)
INCREMENTAL_ALTER_CONFIGS_REQUEST = _struct(
    _f("resources", [
        _f("resource_type", INT8),
        _f("resource_name", STRING),
        _f("configs", [
            _f("name", STRING),
            _f("config_operation", INT8),
            _f("value", STRING, nullable="0+", default=None),
        ]),
    ]),
    _f("validate_only", BOOL),
)
ALTER_CONFIGS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32),
    _f("responses", [
        _f("error_code", INT16),
        _f("error_message", STRING, nullable="0+", default=None),
        _f("resource_type", INT8),
        _f("resource_name", STRING),
    ]),
)

# CreatePartitions (37): a null assignment list lets the broker place the new partitions.
CREATE_PARTITIONS_REQUEST = _struct(
    _f("topics", [
        _f("name", STRING),
        _f("count", INT32),
        _f("assignments", [_f("broker_ids", Array(INT32))], nullable="0+", default=None),
    ]),
    _f("timeout_ms", INT32),
    _f("validate_only", BOOL),
)
CREATE_PARTITIONS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32),
    _f("results", [
        _f("name", STRING),
        _f("error_code", INT16),
        _f("error_message", STRING, nullable="0+", default=None),
    ]),
)

# ElectLeaders (43): v1 adds the election type (0 preferred, 1 unclean) and a top-level error
# code; a null topic list means every partition; v2 is flexible.
ELECT_LEADERS_REQUEST = _struct(
    _f("election_type", INT8, "1+", default=0),
    _f("topic_partitions", [_f("topic", STRING), _f("partitions", Array(INT32))], nullable="0+", default=None),
    _f("timeout_ms", INT32, default=60000),
)
ELECT_LEADERS_RESPONSE = _struct(
    _f("throttle_time_ms", INT32),
    _f("error_code", INT16, "1+", default=0),
    _f("replica_election_results", [
        _f("topic", STRING),
        _f("partition_result", [
            _f("partition_id", INT32),
            _f("error_code", INT16),
            _f("error_message", STRING, nullable="0+", default=None),
        ]),
    ]),
)
