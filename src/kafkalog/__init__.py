"""kafkalog: Apache Kafka's on-disk log layer, byte for byte.

The public API (see docs/ and DESIGN): records of every magic over memory or files, the
builder and the enums; indexes, log segments and their configuration. This module holds no logic; it re-exports.
"""

from __future__ import annotations

from .builder import RecordBatchBuilder
from .compression import Compression
from .config import LogConfig
from .errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidConfigError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkalogError,
    LogClosedError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnsupportedCodecError,
)
from .file_records import FileRecords
from .index import AbortedTxn, OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset, TransactionIndex
from .legacy import LegacyRecordBatch
from .record import ControlRecord, ControlRecordType, Header, Record, RecordBatch, TimestampType
from .recordbatch import DefaultRecordBatch
from .records import MemoryRecords, Records
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
]
