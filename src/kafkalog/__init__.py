"""kafkalog: Apache Kafka's on-disk log layer, byte for byte.

The public API: records of every magic over memory or files, the builder and the enums;
columnar decoding; the indexes, the log segment, the partition log and its configuration; the
log cleaner; the operator capabilities (verify, salvage, index rebuilding); schema-aware decoding; the errors. Everything else is internal (``docs/architecture.md`` says where it
lives and what the surfaces share); this module holds no logic, it re-exports.
"""


from .cleaner import LogCleaner
from .cleaner_stats import CleanerStats
from .columnar import RecordColumns, decode_columns
from .compression import Compression
from .errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkalogError,
    LogClosedError,
    OffsetOutOfRangeError,
    ReadOnlyLogError,
    RecordTooLargeError,
    SchemaError,
    TruncatedRecordError,
    UnsupportedCodecError,
)
from .file_records import FileRecords
from .index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from .index_rebuild import rebuild_indexes, rebuild_path
from .leader_epoch_cache import OffsetAndEpoch
from .local_log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, FetchIsolation, LogOffsetMetadata
from .log import Log
from .log_append import LogAppendInfo
from .log_config import LogConfig
from .memory_records import MemoryRecords
from .memory_records_builder import RecordBatchBuilder
from .native import core_name
from .record import ControlRecord, ControlRecordType, Header, Record, RecordBatch, TimestampType
from .salvage import salvage_segment
from .schema_registry import make_decoder, open_schema_store
from .segment import LogSegment
from .transaction_index import AbortedTxn, TransactionIndex
from .verify import VerifyReport, verify_path, verify_segment

__version__ = "0.1.0"

__all__ = [
    # records
    "MemoryRecords",
    "FileRecords",
    "RecordBatch",
    "Record",
    "ControlRecord",
    "Header",
    "RecordBatchBuilder",
    "Compression",
    "TimestampType",
    "ControlRecordType",
    "RecordColumns",
    "decode_columns",
    # indexes and segments
    "OffsetIndex",
    "TimeIndex",
    "TransactionIndex",
    "OffsetPosition",
    "TimestampOffset",
    "AbortedTxn",
    "LogSegment",
    # the partition log
    "Log",
    "LogConfig",
    "LogAppendInfo",
    "LogOffsetMetadata",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    # replication: the log's half (docs/replication.md; the follower's decisions: kafkalog.follower)
    "FetchIsolation",
    "OffsetAndEpoch",
    # compaction
    "LogCleaner",
    "CleanerStats",
    # operator capabilities
    "verify_path",
    "verify_segment",
    "VerifyReport",
    "salvage_segment",
    "rebuild_indexes",
    "rebuild_path",
    # errors (every other one is in kafkalog.errors)
    "KafkalogError",
    "TruncatedRecordError",
    "CorruptRecordError",
    "InvalidRecordError",
    "CorruptIndexError",
    "InvalidOffsetError",
    "RecordTooLargeError",
    "UnsupportedCodecError",
    "InvalidConfigError",
    "LogClosedError",
    "CorruptCheckpointError",
    "OffsetOutOfRangeError",
    "ReadOnlyLogError",
    "SchemaError",
    # schema-aware decoding (kafkalog.schema_registry has the rest)
    "open_schema_store",
    "make_decoder",
    # which record core runs
    "core_name",
]
