"""kafkalog: Apache Kafka's on-disk log layer, byte for byte.

The public API (see docs/ and DESIGN): records of every magic over memory or files, the
builder and the enums; columnar decoding; indexes, log segments, the partition log and its
configuration; the log cleaner; the errors. This module holds no logic; it re-exports.
"""

from __future__ import annotations

from .builder import RecordBatchBuilder

# Names the surfaces (tools, broker, spark) build on: file and directory names, checkpoint
# files, durable writes, framing constants, resync, offline retention.
from .checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    new_topic_id,
)
from .cleaner import DEFAULT_DEDUPE_BUFFER_SIZE, LogCleaner
from .cleaner_manager import LogToClean, cleanable_offsets
from .cleaner_stats import REASONS, CleanerProgress, CleanerStats
from .columnar import RecordColumns, decode_columns
from .compression import Compression, codec_for_id
from .config import LogConfig

# Names the operator tools (kafkalog.tools) frame, check and rewrite bytes with.
from .crc import crc32c
from .durable import (
    LOCK_FILE,
    TMP_SUFFIX,
    ensure_not_locked,
    fsync_dir,
    lock_directory,
    write_atomically,
)
from .errors import (
    ConversionError,
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    DuplicateSequenceError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkalogError,
    LogCleaningAbortedError,
    LogClosedError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnexpectedAppendOffsetError,
    UnsupportedCodecError,
)
from .file_records import FileRecords
from .filenames import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    INTERNAL_TOPICS,
    LOG_SUFFIX,
    PARTITION_DIR,
    SEGMENT_FILE,
    SNAPSHOT_SUFFIX,
    SPECIAL_DIR,
    SWAP_SUFFIX,
    SYSTEM_TOPICS,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    find_partition_dirs,
    log_file,
    offset_from_file,
    offset_index_file,
    parse_partition_dir,
    partition_of,
    segment_base_offset,
    segment_logs,
    snapshot_file,
    time_index_file,
    txn_index_file,
    validate_topic_name,
)
from .index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from .legacy import LegacyRecordBatch, encode_message_set
from .local_log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    LogOffsetMetadata,
)
from .log import EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP, Log
from .log_append import LogAppendInfo
from .offset_map import OffsetMap
from .producer_entry import ProducerStateEntry
from .producer_snapshot import SNAPSHOT_ENTRY, SNAPSHOT_HEADER, decode_snapshot
from .producer_state import (
    SNAPSHOT_VERSION,
    AppendOrigin,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
)
from .record import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    MAGIC_V2,
    NO_TIMESTAMP,
    ControlRecord,
    ControlRecordType,
    Header,
    Record,
    RecordBatch,
    TimestampType,
)
from .recordbatch import (
    COMPRESSION_CODEC_MASK,
    RECORD_BATCH_OVERHEAD,
    DefaultRecordBatch,
    encode_batch,
    encode_record,
)
from .records import (
    MIN_ENTRY_SIZE_FIELD,
    BatchRetention,
    FilterResult,
    MemoryRecords,
    RecordFilter,
    Records,
    filter_to,
    frame_entry,
)
from .resync import DEFAULT_MAX_RESYNC_BATCH, all_zero, next_valid_batch
from .retention import (
    Deletion,
    OfflineRetention,
    RetentionPlan,
    RetentionSegment,
    plan_partition_retention,
    plan_retention,
)
from .segment import LogOffsetPosition, LogSegment, TimestampAndOffset
from .txn_index import TXN_INDEX_ENTRY, TXN_INDEX_VERSION, AbortedTxn, TransactionIndex
from .errors import ReadOnlyLogError
from .native import core_name

__version__ = "0.1.0"

__all__ = [
    "core_name",
    "MemoryRecords",
    "FileRecords",
    "Records",
    "RecordBatch",
    "DefaultRecordBatch",
    "LegacyRecordBatch",
    "Record",
    "ControlRecord",
    "Header",
    "RecordBatchBuilder",
    "Compression",
    "TimestampType",
    "ControlRecordType",
    "OffsetIndex",
    "TimeIndex",
    "TransactionIndex",
    "OffsetPosition",
    "TimestampOffset",
    "AbortedTxn",
    "LogSegment",
    "LogOffsetPosition",
    "TimestampAndOffset",
    "LogConfig",
    "Log",
    "LogCleaner",
    "CleanerStats",
    "CleanerProgress",
    "OffsetMap",
    "RecordFilter",
    "BatchRetention",
    "FilterResult",
    "filter_to",
    "LogCleaningAbortedError",
    "ConversionError",
    "LogAppendInfo",
    "LogOffsetMetadata",
    "RetentionPlan",
    "Deletion",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "RecordColumns",
    "decode_columns",
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
    "UnexpectedAppendOffsetError",
    "InvalidTimestampError",
    "InvalidProducerEpochError",
    "OutOfOrderSequenceError",
    "DuplicateSequenceError",
    "InvalidTxnStateError",
    "CLEANER_OFFSET_CHECKPOINT",
    "EpochEntry",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "LeaderEpochCheckpointFile",
    "OffsetCheckpointFile",
    "PARTITION_METADATA",
    "PartitionMetadataFile",
    "RECOVERY_POINT_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "new_topic_id",
    "fsync_dir",
    "write_atomically",
    "lock_directory",
    "ensure_not_locked",
    "LOCK_FILE",
    "DEFAULT_DEDUPE_BUFFER_SIZE",
    "LogToClean",
    "REASONS",
    "cleanable_offsets",
    "codec_for_id",
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "PARTITION_DIR",
    "SEGMENT_FILE",
    "SNAPSHOT_SUFFIX",
    "SPECIAL_DIR",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "find_partition_dirs",
    "offset_from_file",
    "offset_index_file",
    "parse_partition_dir",
    "partition_of",
    "segment_base_offset",
    "segment_logs",
    "time_index_file",
    "txn_index_file",
    "validate_topic_name",
    "log_file",
    "snapshot_file",
    "encode_message_set",
    "AppendOrigin",
    "ProducerStateEntry",
    "ProducerStateManager",
    "TransactionCoordinatorFencedError",
    "decode_snapshot",
    "MAGIC_V0",
    "MAGIC_V1",
    "MAGIC_V2",
    "NO_TIMESTAMP",
    "LOG_OVERHEAD",
    "HEADER_SIZE_UP_TO_MAGIC",
    "encode_batch",
    "encode_record",
    "RECORD_BATCH_OVERHEAD",
    "frame_entry",
    "DEFAULT_MAX_RESYNC_BATCH",
    "all_zero",
    "next_valid_batch",
    "plan_partition_retention",
    "OfflineRetention",
    "RetentionSegment",
    "plan_retention",
    "INTERNAL_TOPICS",
    "SYSTEM_TOPICS",
    "TXN_INDEX_ENTRY",
    "SNAPSHOT_HEADER",
    "SNAPSHOT_ENTRY",
    "EARLIEST_LOCAL_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "crc32c",
    "COMPRESSION_CODEC_MASK",
    "MIN_ENTRY_SIZE_FIELD",
    "SNAPSHOT_VERSION",
    "TMP_SUFFIX",
    "TXN_INDEX_VERSION",
    "ReadOnlyLogError",
]
