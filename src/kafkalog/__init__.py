"""kafkalog: Apache Kafka's on-disk log layer, byte for byte.

The public API (see docs/ and DESIGN): records of every magic over memory or files, the
builder and the enums; columnar decoding; indexes, log segments, the partition log and its
configuration; the log cleaner; the errors. This module holds no logic; it re-exports.
"""

from __future__ import annotations

from .builder import RecordBatchBuilder
from .cleaner import CleanerProgress, CleanerStats, LogCleaner, OffsetMap
from .columnar import RecordColumns, decode_columns
from .compression import Compression
from .config import LogConfig
from .errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    DuplicateSequenceError,
    InvalidConfigError,
    InvalidOffsetError,
    LogCleaningAbortedError,
    ConversionError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkalogError,
    LogClosedError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnexpectedAppendOffsetError,
    UnsupportedCodecError,
)
from .file_records import FileRecords
from .index import AbortedTxn, OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset, TransactionIndex
from .legacy import LegacyRecordBatch
from .log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
    LogAppendInfo,
    LogOffsetMetadata,
)
from .record import ControlRecord, ControlRecordType, Header, Record, RecordBatch, TimestampType
from .recordbatch import DefaultRecordBatch
from .records import BatchRetention, FilterResult, MemoryRecords, RecordFilter, Records, filter_to
from .retention import Deletion, RetentionPlan
from .segment import LogOffsetPosition, LogSegment, TimestampAndOffset

__version__ = "0.1.0"

__all__ = [
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
]
