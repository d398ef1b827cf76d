"""Kafka's message schemas and the one interpreter that reads and writes them: the requests and
responses of the APIs the broker serves (headers, versions, tagged fields), and the records Kafka
writes into its own logs (``__consumer_offsets``, ``__transaction_state``, the consumer
protocol, KRaft control and metadata records) that ``kafkalog dump`` decodes.

The public API of this package is what it exports here; its modules are private.
"""

from __future__ import annotations

from ._apis import (
    APIS,
    ApiKey,
    ApiSpec,
    ErrorCode,
    request_header_version,
    response_header_version,
    supported_api_versions,
)
from ._codec import MessageReader, Reader, read_message, to_json, write_message
from ._consumer_offsets import (
    CONSUMER_OFFSETS_TOPIC,
    CommittedOffset,
    ConsumerOffsets,
    GroupMember,
    GroupMetadata,
    OffsetsLoader,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
)
from ._frames import (
    Request,
    ResponseFrame,
    decode_body,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
    iter_fields,
)
from ._modern_groups import ModernGroup, ModernMember, ShareStateLoader
from ._metadata import (
    CONFIG_RESOURCE_TOPIC,
    METADATA_FRAME_VERSION,
    METADATA_RECORDS,
)
from ._records import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    GROUP_METADATA_VALUE,
    KRAFT_CONTROL_RECORDS,
    REMOTE_LOG_METADATA_RECORDS,
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
    coordinator_record_schemas,
    share_coordinator_record_schemas,
)
from ._types import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UUID,
    Array,
    Field,
    Message,
    ProtocolError,
    Struct,
    UnsupportedApiError,
)

__all__ = [
    "ApiKey",
    "ErrorCode",
    "ProtocolError",
    "UnsupportedApiError",
    "Field",
    "Array",
    "Struct",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "BOOL",
    "STRING",
    "BYTES",
    "RECORDS",
    "ApiSpec",
    "APIS",
    "Request",
    "ResponseFrame",
    "supported_api_versions",
    "request_header_version",
    "response_header_version",
    "decode_request",
    "encode_request",
    "decode_response",
    "encode_response",
    "decode_body",
    "encode_body",
    "iter_fields",
    # the record schemas and the reader the dump decodes them with
    "UINT16",
    "FLOAT64",
    "UUID",
    "Message",
    "Reader",
    "MessageReader",
    "read_message",
    "write_message",
    "to_json",
    "coordinator_record_schemas",
    "share_coordinator_record_schemas",
    "REMOTE_LOG_METADATA_RECORDS",
    "GROUP_METADATA_VALUE",
    "CONSUMER_PROTOCOL_SUBSCRIPTION",
    "CONSUMER_PROTOCOL_ASSIGNMENT",
    "TRANSACTION_LOG_KEY",
    "TRANSACTION_LOG_VALUE",
    "KRAFT_CONTROL_RECORDS",
    # __consumer_offsets: what it holds, the loading rule, the records the coordinator writes
    "CONSUMER_OFFSETS_TOPIC",
    "CommittedOffset",
    "ConsumerOffsets",
    "GroupMember",
    "GroupMetadata",
    "OffsetsLoader",
    "partition_for",
    "java_string_hash",
    "offset_commit_key",
    "offset_commit_value",
    "group_metadata_key",
    "group_metadata_value",
    # Kafka 4's consumer (KIP-848) and share (KIP-932) groups, and the share-partitions' state
    "ModernGroup",
    "ModernMember",
    "ShareStateLoader",
    # the KRaft metadata records (``__cluster_metadata``)
    "METADATA_RECORDS",
    "METADATA_FRAME_VERSION",
    "CONFIG_RESOURCE_TOPIC",
]
