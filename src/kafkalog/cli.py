"""``kafkalog dump``: Kafka's ``kafka-dump-log.sh`` (``kafka.tools.DumpLogSegments``), over the
public API.

    kafkalog dump --files 00000000000000000000.log --deep-iteration --print-data-log
    kafkalog dump --files 00000000000000000000.index,00000000000000000000.timeindex --verify-index-only
    python -m kafkalog dump --files 00000000000000000000.log --offsets-decoder --json

The text output is Kafka 3.8's, line for line and quirks included (docs/cli.md lists the few
places where it cannot be, and the lines kafkalog adds where Kafka's tool would have stopped
with a stack trace); ``--json`` writes JSON Lines with documented field names instead. Files are
streamed: shallow iteration reads batch headers, deep iteration decodes one batch at a time, and
long reports go to a temporary file, so memory does not grow with the file.

Exit status: 0 when every file was dumped, 1 when one could not be dumped completely (missing,
unreadable, foreign, or corrupt where Kafka's tool stops), 2 for a usage error.

The operator tools live here too, as thin adapters over the library (docs/cli.md):

    kafkalog verify PATH...            # kafkalog.verify: read-only fsck, exit 1 on errors
    kafkalog salvage SRC DST           # kafkalog.salvage: copy out every valid batch
    kafkalog rebuild-index PATH...     # kafkalog.convert.rebuild_path
    kafkalog retention PATH --dry-run --config retention.ms=...   # Log.delete_old_segments
    kafkalog convert SRC DST --magic 2 --compression zstd         # kafkalog.convert
    kafkalog stat PATH...              # the verify pass, as a table
    kafkalog compact PATH --dry-run --keys 10                     # LogCleaner.clean
    kafkalog demo [DIR]                # a sample partition: written, compacted, verified, dumped

Each maps a KafkalogError or OSError to one line on stderr and exit status 1 (2 for usage).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import io
import json
import logging
import os
import re
import stat
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, NamedTuple

from . import crc as _crc
from .builder import RecordBatchBuilder
from .checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from .cleaner import DEFAULT_DEDUPE_BUFFER_SIZE, REASONS, CleanerProgress, CleanerStats, LogCleaner, LogToClean, cleanable_offsets
from .compression import Compression
from .config import LogConfig
from .convert import RebuildReport, convert_path, rebuild_path
from .errors import KafkalogError
from .file_records import FileRecords
from .index import OffsetIndex, TimeIndex
from .log import Log
from .producer_state import AppendOrigin, ProducerStateEntry, decode_snapshot
from .record import ControlRecordType, Record, RecordBatch, TimestampType
from .salvage import salvage_segment
from .verify import Problem as VerifyProblem
from .verify import SegmentReport as VerifySegmentReport
from .verify import find_partition_dirs, plan_partition_retention, segment_logs, total_log_bytes, verify_path

__all__ = ["main", "SUBCOMMANDS", "build_sample", "SAMPLE_PARTITION"]

#: The subcommands ``python -m kafkalog`` hands over to this module.
SUBCOMMANDS = ("dump", "verify", "salvage", "rebuild-index", "retention", "convert", "stat", "compact", "demo")

_INT32_MAX = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # DumpLogSegments' --max-message-size default
_CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")  # CompressionType.name by id
_OFFSET_CHECKPOINTS = frozenset(
    {
        RECOVERY_POINT_OFFSET_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
        CLEANER_OFFSET_CHECKPOINT,
    }
)
_BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"  # BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME
_LOG_OVERHEAD = 12
_HEADER_UP_TO_MAGIC = 17
_MIN_ENTRY_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0
_V2_OVERHEAD = 61
_CHUNK = 1 << 20


# ------------------------------------------------------------------------------------------------
# How the JVM spells things


def _jbool(value: bool) -> str:
    return "true" if value else "false"


def _optional_long(value: int | None) -> str:
    """``java.util.OptionalLong.toString``."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _java_path(arg: str) -> str:
    """``new File(arg).toString()`` on Unix: repeated slashes collapsed, a trailing one dropped."""
    path = re.sub("/+", "/", arg)
    return path[:-1] if len(path) > 1 and path.endswith("/") else path


def _absolute(path: str) -> str:
    """``File.getAbsolutePath``: resolved against the working directory, not normalised."""
    if path.startswith("/"):
        return path
    cwd = os.getcwd()
    return cwd if not path else f"{cwd.rstrip('/')}/{path}"


def _parse_long(text: str) -> int | None:
    """``Long.parseLong`` of ``text``, or None where Java throws NumberFormatException."""
    if not re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _java_hash(text: str) -> int:
    """``String.hashCode`` (over UTF-16 code units)."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return _int32(h)


def _improve_hash(h: int) -> int:
    """Scala 2.13's ``improveHash``: the high 16 bits folded into the low ones."""
    return _int32(h ^ ((h & 0xFFFFFFFF) >> 16))


def _table_size_for(capacity: int) -> int:
    """Scala 2.13 ``mutable.HashMap``/``HashSet.tableSizeFor``."""
    return min((1 << (max(capacity - 1, 4).bit_length() - 1)) * 2, 1 << 30)


def _scala_order(keys: dict[object, int], table_length: int, hashes: Callable[[object], int]) -> list:
    """Iteration order of a Scala 2.13 mutable hash map/set: by bucket, and within a bucket by
    ascending (improved, signed) hash; ``keys`` maps each key to its insertion number."""
    mask = table_length - 1

    def rank(key: object) -> tuple[int, int, int]:
        h = _improve_hash(hashes(key))
        return h & mask, h, keys[key]

    return sorted(keys, key=rank)


class _ScalaHashMap:
    """The keys of a Scala 2.13 ``mutable.HashMap[String, _]`` (DumpLogSegments keeps its reports
    in such maps, so their order on stderr is the hash order of the file paths)."""

    def __init__(self) -> None:
        self._length = 16  # defaultInitialCapacity
        self._keys: dict[object, int] = {}

    def put(self, key: str) -> None:
        # put0 grows the table before looking for the key, so every put counts.
        if len(self._keys) + 1 >= int(self._length * 0.75):
            self._length *= 2
        self._keys.setdefault(key, len(self._keys))

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self) -> list:
        return _scala_order(self._keys, self._length, _java_hash)  # type: ignore[arg-type]


def _topic_partition_hash(tp: object) -> int:
    topic, partition = tp  # type: ignore[misc]
    return _int32(31 * _int32(31 + partition) + _java_hash(topic))


def _scala_topic_partition_set(groups: list[list[tuple[str, int]]]) -> list[tuple[str, int]]:
    """The order ``mutable.Set[TopicPartition] ++= group.toSet`` (once per group) iterates in
    (``TransactionMetadata.addPartitions`` as the transaction-log formatter uses it)."""
    length, keys = 16, {}
    for group in groups:
        distinct = list(dict.fromkeys(group))
        # addAll: sizeHint(knownSize), then one add per element for Set1..Set4 (with the growth
        # check) or addElem per element, without it, for an immutable.HashSet.
        length = max(length, _table_size_for(int((len(distinct) + 1) / 0.75)))
        for tp in distinct:
            if len(distinct) <= 4 and len(keys) + 1 >= int(length * 0.75):
                length *= 2
            keys.setdefault(tp, len(keys))
    return _scala_order(keys, length, _topic_partition_hash)


_JACKSON_ESCAPES = {i: f"\\u{i:04X}" for i in range(32)}
_JACKSON_ESCAPES.update({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"})


def _jackson(value: object) -> str:
    """``JsonNode.toString()``: compact JSON with Jackson's escapes (uppercase ``\\u00XX``)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.translate(_JACKSON_ESCAPES) + '"'
    if isinstance(value, (bytes, bytearray)):
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    if isinstance(value, dict):
        return "{" + ",".join(f"{_jackson(k)}:{_jackson(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_jackson(v) for v in value) + "]"
    return json.dumps(value)  # a float from a --key/value-decoder json value


# ------------------------------------------------------------------------------------------------
# Kafka's generated message classes, as data: the coordinator records of __consumer_offsets and
# __transaction_state, the consumer protocol and the KRaft control records. Read as Kafka's
# generated ``read(Readable, version)`` does, written as its ``JsonConverter.write`` does.

_ALL = (0, 32767)


class _F(NamedTuple):
    """A message field: JSON (camelCase) name, type, versions present, nullable versions, and
    for tagged fields the tag and the default (a tagged field is written only when it differs)."""

    name: str
    type: object  # "int8" ... "uuid", or a _Array / _Struct
    versions: tuple[int, int] = _ALL
    nullable: tuple[int, int] | None = None
    tag: int | None = None
    default: object = None


class _Array(NamedTuple):
    element: object


class _Struct(NamedTuple):
    fields: tuple[_F, ...]


class _Message(NamedTuple):
    name: str
    versions: tuple[int, int]
    flexible_from: int | None  # first flexible version, None for "none"
    fields: tuple[_F, ...]


def _v(spec: str) -> tuple[int, int]:
    """A Kafka version range: "3", "0-4" or "2+"."""
    if spec.endswith("+"):
        return int(spec[:-1]), 32767
    lo, _, hi = spec.partition("-")
    return int(lo), int(hi or lo)


_TOPIC_PARTITIONS = _Struct((_F("topic", "string"), _F("partitions", _Array("int32"))))
_TOPIC_ID_PARTITIONS = _Struct((_F("topicId", "uuid"), _F("partitions", _Array("int32"))))

_OFFSET_COMMIT_KEY = _Message(
    "OffsetCommitKey",
    _v("0-1"),
    None,
    (_F("group", "string", _v("0-1")), _F("topic", "string", _v("0-1")), _F("partition", "int32", _v("0-1"))),
)
_OFFSET_COMMIT_VALUE = _Message(
    "OffsetCommitValue",
    _v("0-4"),
    4,
    (
        _F("offset", "int64"),
        _F("leaderEpoch", "int32", _v("3+")),
        _F("metadata", "string"),
        _F("commitTimestamp", "int64"),
        _F("expireTimestamp", "int64", _v("1")),
    ),
)
_GROUP_METADATA_KEY = _Message("GroupMetadataKey", _v("2"), None, (_F("group", "string", _v("2")),))
_MEMBER_METADATA = _Struct(
    (
        _F("memberId", "string"),
        _F("groupInstanceId", "string", _v("3+"), _v("3+")),
        _F("clientId", "string"),
        _F("clientHost", "string"),
        _F("rebalanceTimeout", "int32", _v("1+")),
        _F("sessionTimeout", "int32"),
        _F("subscription", "bytes"),
        _F("assignment", "bytes"),
    )
)
_GROUP_METADATA_VALUE = _Message(
    "GroupMetadataValue",
    _v("0-4"),
    4,
    (
        _F("protocolType", "string"),
        _F("generation", "int32"),
        _F("protocol", "string", _ALL, _ALL),
        _F("leader", "string", _ALL, _ALL),
        _F("currentStateTimestamp", "int64", _v("2+")),
        _F("members", _Array(_MEMBER_METADATA)),
    ),
)
_GROUP_ID = _F("groupId", "string")
_MEMBER_ID = _F("memberId", "string")
_CONSUMER_GROUP_KEYS = {
    3: _Message("ConsumerGroupMetadataKey", _v("3"), None, (_GROUP_ID,)),
    4: _Message("ConsumerGroupPartitionMetadataKey", _v("4"), None, (_GROUP_ID,)),
    5: _Message("ConsumerGroupMemberMetadataKey", _v("5"), None, (_GROUP_ID, _MEMBER_ID)),
    6: _Message("ConsumerGroupTargetAssignmentMetadataKey", _v("6"), None, (_GROUP_ID,)),
    7: _Message("ConsumerGroupTargetAssignmentMemberKey", _v("7"), None, (_GROUP_ID, _MEMBER_ID)),
    8: _Message("ConsumerGroupCurrentMemberAssignmentKey", _v("8"), None, (_GROUP_ID, _MEMBER_ID)),
}
_CONSUMER_GROUP_VALUES = {
    3: _Message("ConsumerGroupMetadataValue", _v("0"), 0, (_F("epoch", "int32"),)),
    4: _Message(
        "ConsumerGroupPartitionMetadataValue",
        _v("0"),
        0,
        (
            _F(
                "topics",
                _Array(
                    _Struct(
                        (
                            _F("topicId", "uuid"),
                            _F("topicName", "string"),
                            _F("numPartitions", "int32"),
                            _F(
                                "partitionMetadata",
                                _Array(_Struct((_F("partition", "int32"), _F("racks", _Array("string"))))),
                            ),
                        )
                    )
                ),
            ),
        ),
    ),
    5: _Message(
        "ConsumerGroupMemberMetadataValue",
        _v("0"),
        0,
        (
            _F("instanceId", "string", _ALL, _ALL),
            _F("rackId", "string", _ALL, _ALL),
            _F("clientId", "string"),
            _F("clientHost", "string"),
            _F("subscribedTopicNames", _Array("string")),
            _F("subscribedTopicRegex", "string", _ALL, _ALL),
            _F("rebalanceTimeoutMs", "int32"),
            _F("serverAssignor", "string", _ALL, _ALL),
            _F(
                "classicMemberMetadata",
                _Struct(
                    (
                        _F("sessionTimeoutMs", "int32"),
                        _F("supportedProtocols", _Array(_Struct((_F("name", "string"), _F("metadata", "bytes"))))),
                    )
                ),
                _ALL,
                _ALL,
                tag=0,
            ),
        ),
    ),
    6: _Message("ConsumerGroupTargetAssignmentMetadataValue", _v("0"), 0, (_F("assignmentEpoch", "int32"),)),
    7: _Message(
        "ConsumerGroupTargetAssignmentMemberValue", _v("0"), 0, (_F("topicPartitions", _Array(_TOPIC_ID_PARTITIONS)),)
    ),
    8: _Message(
        "ConsumerGroupCurrentMemberAssignmentValue",
        _v("0"),
        0,
        (
            _F("memberEpoch", "int32"),
            _F("previousMemberEpoch", "int32"),
            _F("state", "int8"),
            _F("assignedPartitions", _Array(_TOPIC_ID_PARTITIONS)),
            _F("partitionsPendingRevocation", _Array(_TOPIC_ID_PARTITIONS)),
        ),
    ),
}
_CONSUMER_SUBSCRIPTION = _Message(
    "ConsumerProtocolSubscription",
    _v("0-3"),
    None,
    (
        _F("topics", _Array("string")),
        _F("userData", "bytes", _ALL, _ALL),
        _F("ownedPartitions", _Array(_TOPIC_PARTITIONS), _v("1+")),
        _F("generationId", "int32", _v("2+")),
        _F("rackId", "string", _v("3+"), _v("3+")),
    ),
)
_CONSUMER_ASSIGNMENT = _Message(
    "ConsumerProtocolAssignment",
    _v("0-3"),
    None,
    (_F("assignedPartitions", _Array(_TOPIC_PARTITIONS)), _F("userData", "bytes", _ALL, _ALL)),
)
_TXN_LOG_KEY = _Message("TransactionLogKey", _v("0"), None, (_F("transactionalId", "string", _v("0")),))
_TXN_LOG_VALUE = _Message(
    "TransactionLogValue",
    _v("0-1"),
    1,
    (
        _F("producerId", "int64"),
        _F("producerEpoch", "int16"),
        _F("transactionTimeoutMs", "int32"),
        _F("transactionStatus", "int8"),
        _F(
            "transactionPartitions",
            _Array(_Struct((_F("topic", "string"), _F("partitionIds", _Array("int32"))))),
            _ALL,
            _ALL,
        ),
        _F("transactionLastUpdateTimestampMs", "int64"),
        _F("transactionStartTimestampMs", "int64"),
    ),
)
# KRaft control records: (label DumpLogSegments prints, message).
_KRAFT_CONTROL = {
    ControlRecordType.SNAPSHOT_HEADER: (
        "SnapshotHeader",
        _Message(
            "SnapshotHeaderRecord", _v("0"), 0, (_F("version", "int16"), _F("lastContainedLogTimestamp", "int64"))
        ),
    ),
    ControlRecordType.SNAPSHOT_FOOTER: (
        "SnapshotFooter",
        _Message("SnapshotFooterRecord", _v("0"), 0, (_F("version", "int16"),)),
    ),
    ControlRecordType.KRAFT_VERSION: (
        "KRaftVersion",
        _Message("KRaftVersionRecord", _v("0"), 0, (_F("version", "int16"), _F("kRaftVersion", "int16"))),
    ),
    ControlRecordType.KRAFT_VOTERS: (
        "KRaftVoters",
        _Message(
            "VotersRecord",
            _v("0"),
            0,
            (
                _F("version", "int16"),
                _F(
                    "voters",
                    _Array(
                        _Struct(
                            (
                                _F("voterId", "int32"),
                                _F("voterDirectoryId", "uuid"),
                                _F(
                                    "endpoints",
                                    _Array(_Struct((_F("name", "string"), _F("host", "string"), _F("port", "uint16")))),
                                ),
                                _F(
                                    "kRaftVersionFeature",
                                    _Struct((_F("minSupportedVersion", "int16"), _F("maxSupportedVersion", "int16"))),
                                ),
                            )
                        )
                    ),
                ),
            ),
        ),
    ),
}


class _ReadError(Exception):
    """A message could not be read; the text is what Kafka's exception message would be."""


_PRIMITIVES = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i")}
_PRIMITIVES.update({"int64": struct.Struct(">q"), "uint16": struct.Struct(">H"), "bool": struct.Struct(">?")})


class _Reader:
    """``ByteBufferAccessor`` over bytes; running out of bytes is a BufferUnderflowException,
    whose message is null."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def fixed(self, kind: str) -> object:
        s = _PRIMITIVES[kind]
        if self.remaining < s.size:
            raise _ReadError("null")
        (value,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return value

    def uvarint(self) -> int:
        value = shift = 0
        for i in range(5):
            if self.pos >= len(self.data):
                raise _ReadError("null")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return _int32(value)
            shift += 7
        raise _ReadError("Varint is too long, the most significant bit in the 5th byte is set")

    def array(self, size: int) -> bytes:
        if size > self.remaining:
            raise _ReadError(f"Error reading byte array of {size} byte(s): only {self.remaining} byte(s) available")
        out = self.data[self.pos : self.pos + size]
        self.pos += size
        return out

    def uuid(self) -> str:
        if self.remaining < 16:  # two readLong calls
            raise _ReadError("null")
        return base64.urlsafe_b64encode(self.array(16)).decode("ascii").rstrip("=")  # Uuid.toString


def _in(version: int, versions: tuple[int, int] | None) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


def _read_message(message: _Message, r: _Reader, version: int) -> dict:
    if not message.versions[0] <= version <= message.versions[1]:
        raise _ReadError(f"Can't read version {version} of {message.name}")
    flexible = message.flexible_from is not None and version >= message.flexible_from
    return _read_struct(message.fields, r, version, flexible)


def _read_struct(fields: tuple[_F, ...], r: _Reader, version: int, flexible: bool) -> dict:
    out: dict = {}
    for f in fields:
        if _in(version, f.versions) and f.tag is None:
            out[f.name] = _read_value(f, f.type, r, version, flexible, tagged=False)
        else:
            out[f.name] = f.default
    if flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            known = next((f for f in fields if f.tag == tag and _in(version, f.versions)), None)
            if known is None:
                r.array(size)  # an unknown tagged field is kept aside, never printed
            else:
                out[known.name] = _read_value(known, known.type, r, version, True, tagged=True)
    return out


def _read_value(
    f: _F, kind: object, r: _Reader, version: int, flexible: bool, *, tagged: bool, name: str = ""
) -> object:
    """One field's value, as the generated reader reads it (``name`` is how errors call it)."""
    name = name or f.name
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return r.fixed(kind)
    if kind == "uuid":
        return r.uuid()
    if isinstance(kind, _Struct):
        if _in(version, f.nullable):
            # A nullable struct has a presence marker: a varint in a tagged field, else a byte.
            absent = r.uvarint() <= 0 if tagged else r.fixed("int8") < 0  # type: ignore[operator]
            if absent:
                return None
        return _read_struct(kind.fields, r, version, flexible)
    if flexible:
        length = r.uvarint() - 1
    else:
        length = r.fixed("int16") if kind == "string" else r.fixed("int32")
    if length < 0:  # type: ignore[operator]
        if _in(version, f.nullable):
            return None
        raise _ReadError(f"non-nullable field {name} was serialized as null")
    if kind == "string":
        if length > 0x7FFF:  # type: ignore[operator]
            raise _ReadError(f"string field {name} had invalid length {length}")
        return r.array(length).decode("utf-8", "replace")  # type: ignore[arg-type]
    if kind == "bytes":
        return r.array(length)  # type: ignore[arg-type]
    assert isinstance(kind, _Array)
    if length > r.remaining:  # type: ignore[operator]
        raise _ReadError(
            f"Tried to allocate a collection of size {length}, but there are only {r.remaining} bytes remaining."
        )
    element = kind.element
    sub = _F(f"{name} element", element)
    return [
        _read_value(sub, element, r, version, flexible, tagged=False, name=f"{name} element")
        for _ in range(length)  # type: ignore[arg-type]
    ]


def _to_json(fields: tuple[_F, ...], values: dict, version: int) -> dict:
    """``<Message>JsonConverter.write(message, version)``, as a dict in Kafka's field order."""
    out: dict = {}
    for f in fields:
        if not _in(version, f.versions):
            continue
        value = values.get(f.name)
        if f.tag is not None and value == f.default:
            continue  # tagged fields are written only when not at their default
        out[f.name] = _json_value(f.type, value, version)
    return out


def _json_value(kind: object, value: object, version: int) -> object:
    if value is None:
        return None
    if isinstance(kind, _Struct):
        return _to_json(kind.fields, value, version)  # type: ignore[arg-type]
    if isinstance(kind, _Array):
        return [_json_value(kind.element, v, version) for v in value]  # type: ignore[attr-defined]
    if kind == "bytes":
        return base64.b64encode(value).decode("ascii")  # type: ignore[arg-type]  # BinaryNode
    return value


# ------------------------------------------------------------------------------------------------
# Key and value parsers (DumpLogSegments' MessageParser implementations)


class _Datum(NamedTuple):
    """A decoded key or value: how Kafka's text output prints it, and its --json value."""

    text: str
    json: object


class _Parsed(NamedTuple):
    key: _Datum | None
    value: _Datum | None
    error: str | None = None  # a --json "decodeError"; the text shows it in place of the key
    kafka_fails: bool = False  # Kafka's tool stops with an exception here


def _failure(record: Record, message: str, *, kafka_fails: bool) -> _Parsed:
    text = f"Error at offset {record.offset}, skipping. {message}"
    return _Parsed(_Datum(text, None), None, text, kafka_fails)


def _decode_string(data: bytes) -> _Datum:
    text = data.decode("utf-8", "replace")  # new String(bytes, UTF_8)
    return _Datum(text, text)


def _decode_hex(data: bytes) -> _Datum:
    text = data.hex()
    return _Datum(text, text)


def _decode_base64(data: bytes) -> _Datum:
    text = base64.b64encode(data).decode("ascii")
    return _Datum(text, text)


def _decode_json(data: bytes) -> _Datum:
    text = data.decode("utf-8", "replace")
    try:
        value = json.loads(text)
    except ValueError:
        return _Datum(text, text)  # not JSON: shown as the string decoder would
    return _Datum(_jackson(value), value)


def _fixed_decoder(fmt: str, label: str) -> Callable[[bytes], _Datum]:
    s = struct.Struct(fmt)

    def decode(data: bytes) -> _Datum:
        if len(data) < s.size:  # ByteBuffer.getInt/getLong: BufferUnderflowException
            raise _ReadError(f"{label} needs {s.size} bytes, the data has {len(data)}")
        (value,) = s.unpack_from(data)
        return _Datum(str(value), value)

    return decode


_SHORTHAND_DECODERS = {
    "string": _decode_string,
    "hex": _decode_hex,
    "base64": _decode_base64,
    "json": _decode_json,
    "none": None,
}
# Kafka's built-in decoder classes; DefaultDecoder hands Kafka a byte[] that it prints as a JVM
# object id ("[B@6d06d69c"), so kafkalog shows its bytes as hex instead.
_DECODER_CLASSES = {
    "StringDecoder": _decode_string,
    "IntegerDecoder": _fixed_decoder(">i", "IntegerDecoder"),
    "LongDecoder": _fixed_decoder(">q", "LongDecoder"),
    "DefaultDecoder": _decode_hex,
}
_NEW_DECODER_PACKAGE = "org.apache.kafka.tools.api."
_OLD_DECODER_PACKAGE = "kafka.serializer."


def _decoder_for_class(name: str) -> Callable[[bytes], _Datum] | None:
    for package in (_NEW_DECODER_PACKAGE, _OLD_DECODER_PACKAGE):
        if name.startswith(package) and name[len(package) :] in _DECODER_CLASSES:
            return _DECODER_CLASSES[name[len(package) :]]
    raise ValueError(name)


class _DecoderParser:
    """``DecoderMessageParser``: each of key and value through its decoder when present."""

    def __init__(self, key: Callable[[bytes], _Datum] | None, value: Callable[[bytes], _Datum] | None) -> None:
        self._key, self._value = key, value

    def parse(self, record: Record) -> _Parsed:
        try:
            key = None if record.key is None or self._key is None else self._key(record.key)
            value = None if record.value is None or self._value is None else self._value(record.value)
        except _ReadError as e:
            return _failure(record, str(e), kafka_fails=True)
        return _Parsed(key, value)


class _OffsetsParser:
    """``OffsetsMessageParser``: __consumer_offsets records as Kafka's JSON (``{"type":..,"data":..}``
    keys, ``{"version":..,"data":..}`` values, ``<DELETE>`` for tombstones)."""

    def parse(self, record: Record) -> _Parsed:
        if record.key is None:
            return _failure(
                record,
                f"Failed to decode message at offset {record.offset} using offset topic decoder "
                "(message had a missing key)",
                kafka_fails=True,
            )
        try:
            key_reader = _Reader(record.key)
            if key_reader.remaining < 2:
                raise _ReadError("Could not read version from key's buffer.")
            record_type = key_reader.fixed("int16")
            key_message, value_message = self._messages(record_type)  # type: ignore[arg-type]
            if key_message is None:
                text = f"Unknown record type {record_type} at offset {record.offset}, skipping."
                return _Parsed(_Datum(text, None), None, text)
            key_fields = self._read(key_message, key_reader, record_type, "key")  # type: ignore[arg-type]
            key_json = {"type": str(record_type), "data": _to_json(key_message.fields, key_fields, record_type)}
            if record.value is None:
                return _Parsed(_Datum(_jackson(key_json), key_json), _Datum("<DELETE>", None))
            value_reader = _Reader(record.value)
            if value_reader.remaining < 2:
                raise _ReadError("Could not read version from value's buffer.")
            version = value_reader.fixed("int16")
            values = self._read(value_message, value_reader, version, "value")  # type: ignore[arg-type]
            data = _to_json(value_message.fields, values, version)  # type: ignore[union-attr,arg-type]
            if value_message is _GROUP_METADATA_VALUE:
                _expand_consumer_protocol(data)
            value_json = {"version": str(version), "data": data}
        except _ReadError as e:
            return _failure(record, str(e), kafka_fails=False)
        return _Parsed(_Datum(_jackson(key_json), key_json), _Datum(_jackson(value_json), value_json))

    @staticmethod
    def _messages(record_type: int) -> tuple[_Message | None, _Message | None]:
        # CoordinatorRecordSerde: the key's version is the record type.
        if record_type in (0, 1):
            return _OFFSET_COMMIT_KEY, _OFFSET_COMMIT_VALUE
        if record_type == 2:
            return _GROUP_METADATA_KEY, _GROUP_METADATA_VALUE
        return _CONSUMER_GROUP_KEYS.get(record_type), _CONSUMER_GROUP_VALUES.get(record_type)

    @staticmethod
    def _read(message: _Message, reader: _Reader, version: int, what: str) -> dict:
        try:
            return _read_message(message, reader, version)
        except _ReadError as e:
            raise _ReadError(
                f"Could not read record with version {version} from {what}'s buffer due to: {e}."
            ) from None


def _expand_consumer_protocol(data: dict) -> None:
    """For a "consumer" group, replace each member's subscription and assignment bytes by their
    decoded form, keeping the bytes when they do not decode (as Kafka does)."""
    if data.get("protocolType") != "consumer":
        return
    for member in data.get("members") or ():
        for field, message in (("subscription", _CONSUMER_SUBSCRIPTION), ("assignment", _CONSUMER_ASSIGNMENT)):
            encoded = member.get(field)
            if encoded is None:
                continue
            try:
                r = _Reader(base64.b64decode(encoded))
                version = r.fixed("int16")
                values = _read_message(message, r, version)  # type: ignore[arg-type]
                member[field] = _to_json(message.fields, values, version)  # type: ignore[arg-type]
            except _ReadError:
                pass


_TXN_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


class _TransactionLogParser:
    """``TransactionLog.formatRecordKeyAndValue``: __transaction_state records."""

    def parse(self, record: Record) -> _Parsed:
        try:
            if record.key is None:
                raise _ReadError("the record has no key")
            r = _Reader(record.key)
            version = r.fixed("int16")
            if not _TXN_LOG_KEY.versions[0] <= version <= _TXN_LOG_KEY.versions[1]:  # type: ignore[operator]
                text = f"unknown::version={version}"
                return _Parsed(_Datum(text, {"unknownKeyVersion": version}), None)
            txn_id = _read_message(_TXN_LOG_KEY, r, version)["transactionalId"]  # type: ignore[arg-type]
            key = _Datum(f"transaction_metadata::transactionalId={txn_id}", {"transactionalId": txn_id})
            if record.value is None:
                return _Parsed(key, _Datum("<DELETE>", None))
            return _Parsed(key, self._value(record.value))
        except _ReadError as e:
            return _failure(record, str(e), kafka_fails=True)

    @staticmethod
    def _value(data: bytes) -> _Datum:
        r = _Reader(data)
        version = r.fixed("int16")
        if not _TXN_LOG_VALUE.versions[0] <= version <= _TXN_LOG_VALUE.versions[1]:  # type: ignore[operator]
            raise _ReadError(f"Unknown version {version} from the transaction log message value")
        v = _read_message(_TXN_LOG_VALUE, r, version)  # type: ignore[arg-type]
        status = v["transactionStatus"]
        if not 0 <= status < len(_TXN_STATES):
            raise _ReadError(f"Unknown transaction state id {status} from the transaction status message")
        state = _TXN_STATES[status]
        partitions: list[tuple[str, int]] = []
        if state != "Empty":  # an Empty transaction's partitions are not read back
            if v["transactionPartitions"] is None:
                raise _ReadError("null transaction partitions")
            partitions = _scala_topic_partition_set(
                [[(p["topic"], pid) for pid in p["partitionIds"]] for p in v["transactionPartitions"]]
            )
        names = [f"{topic}-{partition}" for topic, partition in partitions]
        text = (
            f"producerId:{v['producerId']},producerEpoch:{v['producerEpoch']},state={state},"
            f"partitions=[{','.join(names)}],txnLastUpdateTimestamp={v['transactionLastUpdateTimestampMs']},"
            f"txnTimeoutMs={v['transactionTimeoutMs']}"
        )
        value = {
            "producerId": v["producerId"],
            "producerEpoch": v["producerEpoch"],
            "state": state,
            "partitions": names,
            "txnLastUpdateTimestamp": v["transactionLastUpdateTimestampMs"],
            "txnTimeoutMs": v["transactionTimeoutMs"],
        }
        return _Datum(text, value)


# ------------------------------------------------------------------------------------------------
# Reports that can grow with the file (one entry per non-consecutive offset, per mismatch)


_PAIR = struct.Struct(">qq")


class _PairSpool:
    """A list of int64 pairs that moves to a temporary file past ``limit`` entries."""

    def __init__(self, limit: int = 1 << 16) -> None:
        self._memory: list[tuple[int, int]] = []
        self._file: IO[bytes] | None = None
        self._spilled = 0
        self._limit = limit

    def append(self, a: int, b: int) -> None:
        self._memory.append((a, b))
        if len(self._memory) >= self._limit:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="kafkalog-dump-")
            self._file.seek(0, os.SEEK_END)
            self._file.write(b"".join(_PAIR.pack(*p) for p in self._memory))
            self._spilled += len(self._memory)
            self._memory.clear()

    def __len__(self) -> int:
        return self._spilled + len(self._memory)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        if self._file is not None:
            self._file.seek(0)
            for _ in range(0, self._spilled, self._limit):
                yield from _PAIR.iter_unpack(self._file.read(self._limit * _PAIR.size))
        yield from self._memory

    def reversed(self) -> Iterator[tuple[int, int]]:
        yield from reversed(self._memory)
        if self._file is not None:
            end = self._spilled
            while end > 0:
                start = max(0, end - self._limit)
                self._file.seek(start * _PAIR.size)
                block = list(_PAIR.iter_unpack(self._file.read((end - start) * _PAIR.size)))
                yield from reversed(block)
                end = start

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


# ------------------------------------------------------------------------------------------------
# Output: Kafka's text, or JSON Lines


class _BatchInfo(NamedTuple):
    batch: RecordBatch
    position: int
    codec: str
    valid: bool
    base_offset: int | None  # None for a v0/v1 wrapper whose records were not decoded


class _RecordInfo(NamedTuple):
    offset: int
    timestamp: int
    key_size: int
    value_size: int
    sequence: int | None  # v2 only
    header_keys: tuple[str, ...] | None  # v2 only
    legacy: tuple[bool, int] | None  # (isValid, crc) for v0/v1
    control_text: str  # the control-record tail of the text line
    control: dict  # the same for --json
    parsed: _Parsed | None  # key and value when printing data


class _Output:
    """Receives what the dump finds. Subclasses render Kafka's text or JSON Lines."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        self.out, self.err = out, err

    def stderr(self, line: str) -> None:
        self.out.flush()
        self.err.write(line + "\n")
        self.err.flush()

    def fatal(self, display: str, message: str) -> None:
        """A file that cannot be dumped: one line on stderr."""
        self.stderr(f"kafkalog dump: {display}: {message}")

    def finish(self) -> None:
        self.out.flush()


class _TextOutput(_Output):
    """DumpLogSegments' lines; its end-of-run reports go to stderr when the run ends."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        super().__init__(out, err)
        self._index_mismatches = _Reports()
        self._time_mismatches = _Reports()
        self._out_of_order = _Reports()
        self._not_found = _Reports()
        self._non_consecutive = _Reports()

    def dumping(self, display: str, kind: str, **info: object) -> None:
        self.out.write(f"Dumping {display}\n")

    def line(self, text: str) -> None:
        self.out.write(text + "\n")

    def log_header(self, info: dict) -> None:
        if "baseOffset" in info:
            self.line(f"Log starting offset: {info['baseOffset']}")
        elif info.get("bootstrap"):
            self.line("KRaft bootstrap snapshot")
        else:
            self.line(f"Snapshot end offset: {info['snapshotEndOffset']}, epoch: {info['snapshotEpoch']}")

    def deprecated_decoder(self, old: str, new: str) -> None:
        self.line(f"{old} is deprecated. Please use {new} instead")

    def batch(self, display: str, b: _BatchInfo) -> None:
        batch = b.batch
        if batch.magic >= 2:
            head = (
                f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.count} "
                f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} isTransactional: "
                f"{_jbool(batch.is_transactional)} isControl: {_jbool(batch.is_control)} "
                f"deleteHorizonMs: {_optional_long(batch.delete_horizon_ms)}"
            )
        else:
            head = f"offset: {batch.last_offset}"
        self.out.write(
            f"{head} position: {b.position} {batch.timestamp_type.kafka_name}: {batch.max_timestamp} "
            f"size: {batch.size_in_bytes} magic: {batch.magic} compresscodec: {b.codec} crc: {batch.crc} "
            f"isvalid: {_jbool(b.valid)}\n"
        )

    def record(self, display: str, b: _BatchInfo, r: _RecordInfo, skip_metadata: bool) -> None:
        prefix = "| "
        parts = []
        if not skip_metadata:
            parts.append(
                f"{prefix}offset: {r.offset} {b.batch.timestamp_type.kafka_name}: {r.timestamp} "
                f"keySize: {r.key_size} valueSize: {r.value_size}"
            )
            prefix = " "
            if r.header_keys is not None:
                parts.append(f" sequence: {r.sequence} headerKeys: [{','.join(r.header_keys)}]")
            if r.legacy is not None:
                # Kafka's format string has a stray closing brace here.
                parts.append(f" isValid: {_jbool(r.legacy[0])} crc: {r.legacy[1]}}}")
            parts.append(r.control_text)
        if r.parsed is not None:
            if r.parsed.key is not None:
                parts.append(f"{prefix}key: {r.parsed.key.text}")
            if r.parsed.value is not None:
                parts.append(f" payload: {r.parsed.value.text}")  # always one space, even first
        parts.append("\n")
        self.out.write("".join(parts))

    def trailing(self, display: str, name: str, position: int, size: int) -> None:
        self.line(f"Found {size} invalid bytes at the end of {name}")

    def error(self, display: str, name: str, position: int | None, message: str) -> None:
        where = f"at position {position} of {name}" if position is not None else f"in {name}"
        self.line(f"Error {where}: {message}")

    def skipped(self, display: str) -> None:
        self.dumping(display, "unknown")
        self.stderr(f"Ignoring unknown file {display}")

    def index_empty(self, display: str) -> None:
        self.line(f"{display} is empty.")

    def sanity(self, display: str, message: str | None) -> None:
        if message is None:
            self.line(f"{display} passed sanity check.")
        else:
            self.line(f"{display} failed sanity check: {message}")

    def offset_index_entry(self, display: str, i: int, offset: int, position: int) -> None:
        self.out.write(f"offset: {offset} position: {position}\n")

    def time_index_entry(self, display: str, i: int, timestamp: int, offset: int) -> None:
        self.out.write(f"timestamp: {timestamp} offset: {offset}\n")

    def aborted_txn(self, display: str, fields: tuple[int, int, int, int, int]) -> None:
        version, pid, first, last, lso = fields
        self.line(
            f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} lastStableOffset: {lso}"
        )

    def producer_entry(self, display: str, e: ProducerStateEntry) -> None:
        text = (
            f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {_optional_long(e.current_txn_first_offset)} lastTimestamp: {e.last_timestamp} "
        )
        if e.batch_metadata:
            m = e.batch_metadata[0]
            text += (
                f"firstSequence: {m.first_seq} lastSequence: {m.last_seq} lastOffset: {m.last_offset} "
                f"offsetDelta: {m.offset_delta} timestamp: {m.timestamp}"
            )
        self.line(text)

    def snapshot_corrupt(self, display: str, message: str) -> None:
        self.stderr(message)

    def offset_checkpoint_entry(self, display: str, topic: str, partition: int, offset: int) -> None:
        self.line(f"topic: {topic} partition: {partition} offset: {offset}")

    def leader_epoch_entry(self, display: str, epoch: int, start_offset: int) -> None:
        self.line(f"epoch: {epoch} startOffset: {start_offset}")

    # End-of-run reports, keyed by absolute path as Kafka keys them.

    def index_mismatch(self, abs_path: str, index_offset: int, log_offset: int) -> None:
        self._index_mismatches.add(abs_path, index_offset, log_offset, put_every_time=True)

    def time_mismatch(self, abs_path: str, index_ts: int, log_ts: int) -> None:
        self._time_mismatches.add(abs_path, index_ts, log_ts)

    def time_out_of_order(self, abs_path: str, index_ts: int, previous_ts: int) -> None:
        self._out_of_order.add(abs_path, index_ts, previous_ts)

    def offset_not_found(self, abs_path: str, index_offset: int, log_offset: int) -> None:
        self._not_found.add(abs_path, index_offset, log_offset)

    def non_consecutive(self, abs_path: str, offset: int, next_offset: int) -> None:
        self._non_consecutive.add(abs_path, offset, next_offset, put_every_time=True)

    def finish(self) -> None:
        self.out.flush()
        err = self.err
        # Offset-index mismatches and non-consecutive offsets are Scala Lists built by prepending:
        # they print newest first. The time-index reports are ArrayBuffers: oldest first.
        for path, pairs in self._index_mismatches.items():
            err.write(f"Mismatches in :{path}\n")
            for a, b in pairs.reversed():
                err.write(f"  Index offset: {a}, log offset: {b}\n")
        for path, pairs in self._time_mismatches.items():
            err.write(f"Found timestamp mismatch in :{path}\n")
            for a, b in pairs:
                err.write(f"  Index timestamp: {a}, log timestamp: {b}\n")
        for path, pairs in self._out_of_order.items():
            err.write(f"Found out of order timestamp in :{path}\n")
            for a, b in pairs:
                err.write(f"  Index timestamp: {a}, Previously indexed timestamp: {b}\n")
        for path, pairs in self._not_found.items():
            err.write("The following indexed offsets are not found in the log.\n")
            for a, b in pairs:
                err.write(f"Indexed offset: {a}, found log offset: {b}\n")
        for path, pairs in self._non_consecutive.items():
            err.write(f"Non-consecutive offsets in {path}\n")
            for a, b in pairs.reversed():
                err.write(f"  {a} is followed by {b}\n")
        for reports in (
            self._index_mismatches,
            self._time_mismatches,
            self._out_of_order,
            self._not_found,
            self._non_consecutive,
        ):
            reports.close()
        super().finish()


class _Reports:
    """One of DumpLogSegments' report maps: path -> pairs, iterated in the Scala map's order."""

    def __init__(self) -> None:
        self._map = _ScalaHashMap()
        self._pairs: dict[str, _PairSpool] = {}

    def add(self, path: str, a: int, b: int, *, put_every_time: bool = False) -> None:
        # The offset-index and non-consecutive maps are updated with put() on every entry; the
        # time-index ones only when the file's first entry arrives.
        if put_every_time or path not in self._map:
            self._map.put(path)
        self._pairs.setdefault(path, _PairSpool()).append(a, b)

    def items(self) -> Iterator[tuple[str, _PairSpool]]:
        for path in self._map.keys():
            yield path, self._pairs[path]

    def close(self) -> None:
        for spool in self._pairs.values():
            spool.close()


class _JsonOutput(_Output):
    """One JSON object per line; reports are written where they are found."""

    def _emit(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")

    def fatal(self, display: str, message: str) -> None:
        self._emit({"type": "error", "file": display, "position": None, "message": message})
        super().fatal(display, message)

    def dumping(self, display: str, kind: str, **info: object) -> None:
        self._emit({"type": "file", "file": display, "kind": kind, **info})

    def log_header(self, info: dict) -> None:
        pass  # part of the "file" object

    def deprecated_decoder(self, old: str, new: str) -> None:
        pass

    def batch(self, display: str, b: _BatchInfo) -> None:
        batch = b.batch
        self._emit(
            {
                "type": "batch",
                "file": display,
                "position": b.position,
                "baseOffset": b.base_offset,
                "lastOffset": batch.last_offset,
                "count": batch.count,
                "magic": batch.magic,
                "compression": b.codec,
                "crc": batch.crc,
                "isValid": b.valid,
                "sizeInBytes": batch.size_in_bytes,
                "timestampType": batch.timestamp_type.kafka_name,
                "maxTimestamp": batch.max_timestamp,
                "producerId": batch.producer_id,
                "producerEpoch": batch.producer_epoch,
                "baseSequence": batch.base_sequence,
                "lastSequence": batch.last_sequence,
                "isTransactional": batch.is_transactional,
                "isControl": batch.is_control,
                "partitionLeaderEpoch": batch.partition_leader_epoch,
                "deleteHorizonMs": batch.delete_horizon_ms,
            }
        )

    def record(self, display: str, b: _BatchInfo, r: _RecordInfo, skip_metadata: bool) -> None:
        obj: dict = {"type": "record", "file": display, "batchPosition": b.position, "offset": r.offset}
        if not skip_metadata:
            obj["timestamp"] = r.timestamp
            obj["timestampType"] = b.batch.timestamp_type.kafka_name
            obj["keySize"] = r.key_size
            obj["valueSize"] = r.value_size
            if r.header_keys is not None:
                obj["sequence"] = r.sequence
                obj["headerKeys"] = list(r.header_keys)
            if r.legacy is not None:
                obj["isValid"], obj["crc"] = r.legacy
            obj.update(r.control)
        if r.parsed is not None:
            if r.parsed.error is not None:
                obj["decodeError"] = r.parsed.error
            else:
                if r.parsed.key is not None or r.key_size < 0:
                    obj["key"] = None if r.parsed.key is None else r.parsed.key.json
                if r.parsed.value is not None or r.value_size < 0:
                    obj["value"] = None if r.parsed.value is None else r.parsed.value.json
        self._emit(obj)

    def trailing(self, display: str, name: str, position: int, size: int) -> None:
        self._emit({"type": "trailingBytes", "file": display, "position": position, "size": size})

    def error(self, display: str, name: str, position: int | None, message: str) -> None:
        self._emit({"type": "error", "file": display, "position": position, "message": message})

    def skipped(self, display: str) -> None:
        self._emit({"type": "skipped", "file": display, "reason": "unknown file type"})

    def index_empty(self, display: str) -> None:
        self._emit({"type": "indexEmpty", "file": display})

    def sanity(self, display: str, message: str | None) -> None:
        self._emit({"type": "sanityCheck", "file": display, "passed": message is None, "message": message})

    def offset_index_entry(self, display: str, i: int, offset: int, position: int) -> None:
        self._emit({"type": "offsetIndexEntry", "file": display, "i": i, "offset": offset, "position": position})

    def time_index_entry(self, display: str, i: int, timestamp: int, offset: int) -> None:
        self._emit({"type": "timeIndexEntry", "file": display, "i": i, "timestamp": timestamp, "offset": offset})

    def aborted_txn(self, display: str, fields: tuple[int, int, int, int, int]) -> None:
        version, pid, first, last, lso = fields
        self._emit(
            {
                "type": "abortedTxn",
                "file": display,
                "version": version,
                "producerId": pid,
                "firstOffset": first,
                "lastOffset": last,
                "lastStableOffset": lso,
            }
        )

    def producer_entry(self, display: str, e: ProducerStateEntry) -> None:
        m = e.batch_metadata[0] if e.batch_metadata else None
        self._emit(
            {
                "type": "producerSnapshotEntry",
                "file": display,
                "producerId": e.producer_id,
                "producerEpoch": e.producer_epoch,
                "coordinatorEpoch": e.coordinator_epoch,
                "currentTxnFirstOffset": e.current_txn_first_offset,
                "lastTimestamp": e.last_timestamp,
                "firstSequence": None if m is None else m.first_seq,
                "lastSequence": None if m is None else m.last_seq,
                "lastOffset": None if m is None else m.last_offset,
                "offsetDelta": None if m is None else m.offset_delta,
                "timestamp": None if m is None else m.timestamp,
            }
        )

    def snapshot_corrupt(self, display: str, message: str) -> None:
        self.error(display, display, None, message)

    def offset_checkpoint_entry(self, display: str, topic: str, partition: int, offset: int) -> None:
        self._emit(
            {"type": "offsetCheckpointEntry", "file": display, "topic": topic, "partition": partition, "offset": offset}
        )

    def leader_epoch_entry(self, display: str, epoch: int, start_offset: int) -> None:
        self._emit({"type": "leaderEpochEntry", "file": display, "epoch": epoch, "startOffset": start_offset})

    def index_mismatch(self, abs_path: str, index_offset: int, log_offset: int) -> None:
        self._emit(
            {"type": "offsetIndexMismatch", "file": abs_path, "indexOffset": index_offset, "logOffset": log_offset}
        )

    def time_mismatch(self, abs_path: str, index_ts: int, log_ts: int) -> None:
        self._emit({"type": "timeIndexMismatch", "file": abs_path, "indexTimestamp": index_ts, "logTimestamp": log_ts})

    def time_out_of_order(self, abs_path: str, index_ts: int, previous_ts: int) -> None:
        self._emit(
            {
                "type": "timeIndexOutOfOrder",
                "file": abs_path,
                "indexTimestamp": index_ts,
                "previousIndexTimestamp": previous_ts,
            }
        )

    def offset_not_found(self, abs_path: str, index_offset: int, log_offset: int) -> None:
        self._emit(
            {"type": "indexedOffsetNotFound", "file": abs_path, "indexOffset": index_offset, "logOffset": log_offset}
        )

    def non_consecutive(self, abs_path: str, offset: int, next_offset: int) -> None:
        self._emit({"type": "nonConsecutiveOffsets", "file": abs_path, "offset": offset, "nextOffset": next_offset})


# ------------------------------------------------------------------------------------------------
# Framing as Kafka's FileLogInputStream sees it, and finding the next batch after corruption

_SIZE_MAGIC = struct.Struct(">8xi4xb")  # size at byte 8, magic at byte 16
assert _SIZE_MAGIC.size == _HEADER_UP_TO_MAGIC
# A place where an entry could start: a size field that is >= 14 and not negative, and a magic
# byte of 0, 1 or 2 (checked again, with the CRC, before it is believed).
_CANDIDATE = re.compile(rb"(?=.{8}(?!\x00\x00\x00[\x00-\x0d])[\x00-\x7f].{7}[\x00-\x02])", re.DOTALL)
_ZERO_RUN = re.compile(rb"\x00{64,}")


class _Stop(NamedTuple):
    """Why iteration stopped before the end: a partial entry (``tail``) or corrupt framing."""

    tail: bool
    reason: str


def _classify(fr: FileRecords, pos: int, end: int, fallback: str | None) -> _Stop:
    """Kafka's ``FileLogInputStream.nextBatch`` reading of the bytes at ``pos``."""
    remaining = end - pos
    if remaining <= _HEADER_UP_TO_MAGIC:  # position >= end - HEADER_SIZE_UP_TO_MAGIC
        return _Stop(True, f"{remaining} bytes are too few for an entry")
    size, magic = _SIZE_MAGIC.unpack(fr.read(pos, _HEADER_UP_TO_MAGIC))
    if size < _MIN_ENTRY_SIZE:
        return _Stop(False, f"record size {size} is smaller than the minimum record overhead ({_MIN_ENTRY_SIZE})")
    if size > remaining - _LOG_OVERHEAD:
        return _Stop(True, f"an entry of {size + _LOG_OVERHEAD} bytes runs past the end ({remaining} bytes left)")
    if not 0 <= magic <= 2:
        return _Stop(False, f"invalid magic {magic}")
    return _Stop(False, fallback or f"record batch size {size + _LOG_OVERHEAD} is smaller than the v2 overhead")


def _entry_is_valid(fr: FileRecords, pos: int, end: int, max_size: int) -> bool:
    """True if a whole entry of at most ``max_size`` bytes with a matching CRC starts at ``pos``."""
    head = fr.read(pos, _HEADER_UP_TO_MAGIC)
    if len(head) < _HEADER_UP_TO_MAGIC:
        return False
    size, magic = _SIZE_MAGIC.unpack(head)
    total = size + _LOG_OVERHEAD
    if size < _MIN_ENTRY_SIZE or pos + total > end or total > max_size or not 0 <= magic <= 2:
        return False
    try:
        batch = next(fr.slice(pos, total).batches(), None)
        return batch is not None and batch.compute_crc() == batch.crc  # type: ignore[attr-defined]
    except KafkalogError:
        return False


def _resync(fr: FileRecords, start: int, end: int, max_size: int) -> int | None:
    """The position of the next whole, CRC-valid entry at or after ``start``, or None."""
    pos = start
    while pos < end - _HEADER_UP_TO_MAGIC:
        chunk = fr.read(pos, min(_CHUNK, end - pos))
        usable = len(chunk) - _HEADER_UP_TO_MAGIC + 1  # candidates need 17 bytes in the chunk
        if usable <= 0:
            break
        # Long runs of zeros (a preallocated or zero-filled tail) cannot hold a size field.
        spans, lo = [], 0
        for run in _ZERO_RUN.finditer(chunk):
            spans.append((lo, run.start() - 8))
            lo = max(lo, run.end() - 11)
        spans.append((lo, usable))
        for lo, hi in spans:
            at = lo
            while at < hi:
                m = _CANDIDATE.search(chunk, at, hi + _HEADER_UP_TO_MAGIC - 1)
                if m is None or m.start() >= hi:
                    break
                if _entry_is_valid(fr, pos + m.start(), end, max_size):
                    return pos + m.start()
                at = m.start() + 1
        pos += usable
    return None


# ------------------------------------------------------------------------------------------------
# The dump


class _Options(NamedTuple):
    files: list[str]
    deep: bool
    print_data: bool
    verify_only: bool
    sanity_only: bool
    skip_metadata: bool
    max_message_size: int
    max_bytes: int | None  # None: the whole file (and "invalid bytes at the end" is reported)
    parser: object  # a parser with parse(record) -> _Parsed
    deprecations: list[tuple[str, str]]


_EXPECTED_NAMES = {
    "log": "<offset>.log",
    "kraftSnapshot": "<20-digit end offset>-<10-digit epoch>.checkpoint or bootstrap.checkpoint",
    "offsetIndex": "<offset>.index",
    "timeIndex": "<offset>.timeindex",
    "transactionIndex": "<offset>.txnindex",
}


class _Dump:
    """Dumps each file in turn (``DumpLogSegments.main``)."""

    def __init__(self, options: _Options, out: _TextOutput | _JsonOutput) -> None:
        self.o = options
        self.out = out
        self.failed = False

    def run(self) -> int:
        try:
            for arg in self.o.files:
                self._file(arg)
        finally:
            self.out.finish()
        return 1 if self.failed else 0

    # -- dispatch ----------------------------------------------------------------------------------

    def _file(self, arg: str) -> None:
        display = _java_path(arg)
        name = display.rsplit("/", 1)[-1]
        dot = name.rfind(".")
        suffix = name[dot:] if dot >= 0 else None
        handlers = {
            ".log": (self._log, "log"),
            ".checkpoint": (self._log, "kraftSnapshot"),
            ".index": (self._offset_index, "offsetIndex"),
            ".timeindex": (self._time_index, "timeIndex"),
            ".snapshot": (self._producer_snapshot, "producerSnapshot"),
            ".txnindex": (self._txn_index, "transactionIndex"),
        }
        if suffix in handlers:
            handler, kind = handlers[suffix]
        elif suffix is None and name in _OFFSET_CHECKPOINTS:  # kafkalog extension
            handler, kind = self._offset_checkpoint, "offsetCheckpoint"
        elif suffix is None and name == LEADER_EPOCH_CHECKPOINT:  # kafkalog extension
            handler, kind = self._leader_epoch_checkpoint, "leaderEpochCheckpoint"
        else:
            self.out.skipped(display)
            return
        info = self._header_info(kind, name)
        if info is None:
            self.out.dumping(display, kind)
            self._fail(display, f"not a Kafka file name: expected {_EXPECTED_NAMES[kind]}")
            return
        self.out.dumping(display, kind, **info)
        problem = _unreadable(display)
        if problem is not None:
            self._fail(display, problem)
            return
        try:
            handler(display, name, info)
        except BrokenPipeError:
            raise
        except OSError as e:
            self._fail(display, e.strerror or str(e))
        except KafkalogError as e:
            self._fail(display, e.reason)

    @staticmethod
    def _header_info(kind: str, name: str) -> dict | None:
        """What the file name says (Kafka parses it, and fails on a name it cannot parse)."""
        prefix = name.split(".")[0]
        if kind == "kraftSnapshot":
            if name == _BOOTSTRAP_SNAPSHOT:
                return {"bootstrap": True}
            # Snapshots.parse: a 20-digit end offset, '-', a 10-digit epoch.
            if len(name) < 31:
                return None
            offset, epoch = _parse_long(name[:20]), _parse_long(name[21:31])
            if offset is None or epoch is None or not -(2**31) <= epoch < 2**31:
                return None
            return {"snapshotEndOffset": offset, "snapshotEpoch": epoch}
        if kind in ("log", "offsetIndex", "timeIndex", "transactionIndex"):
            base = _parse_long(prefix)
            return None if base is None else {"baseOffset": base}
        return {}

    def _fail(self, display: str, message: str) -> None:
        self.failed = True
        self.out.fatal(display, message)

    def _error(self, display: str, name: str, position: int | None, message: str) -> None:
        """Corruption Kafka's tool would stop on: reported where it is; the dump goes on."""
        self.failed = True
        self.out.error(display, name, position, message)

    # -- .log and KRaft .checkpoint ----------------------------------------------------------------

    def _log(self, display: str, name: str, info: dict) -> None:
        # Kafka builds its decoders (printing any deprecation note) before dumpLog prints its header.
        for old, new in self.o.deprecations:
            self.out.deprecated_decoder(old, new)
        self.out.log_header(info)
        abs_path = _absolute(display)
        limited = self.o.max_bytes is not None
        with FileRecords.open(display) as fr:
            end = fr.size_in_bytes if not limited else min(fr.size_in_bytes, self.o.max_bytes)  # type: ignore[type-var]
            state = _LogState(abs_path)
            pos = 0
            batches = 0
            while pos < end:
                failure: str | None = None
                it = fr.slice(pos, end - pos).batches()
                while True:
                    try:
                        batch = next(it)
                    except StopIteration:
                        break
                    except KafkalogError as e:
                        failure = e.reason
                        break
                    self._batch(display, name, batch, state)
                    batches += 1
                    pos = batch.position + batch.size_in_bytes  # type: ignore[operator]
                if pos >= end:
                    break
                stop = _classify(fr, pos, end, failure)
                if limited and stop.tail:
                    break  # a batch cut by --max-bytes
                found = _resync(fr, pos + 1, end, self.o.max_message_size)
                if found is None:
                    if batches == 0 and pos == 0 and _looks_foreign(fr, end):
                        self._fail(display, f"not a Kafka log: no valid batch in its {end} bytes")
                        return
                    if not stop.tail:
                        self._error(display, name, pos, stop.reason)
                    if not limited:
                        self.out.trailing(display, name, pos, end - pos)
                    return
                skipped = f"skipped {found - pos} bytes to the next valid batch at position {found}"
                self._error(display, name, pos, f"{stop.reason}; {skipped}")
                pos = found

    def _batch(self, display: str, name: str, batch: RecordBatch, state: _LogState) -> None:
        position: int = batch.position  # type: ignore[assignment]
        codec_id = batch.attributes & 7  # type: ignore[attr-defined]
        if codec_id >= len(_CODEC_NAMES):  # CompressionType.forId throws
            self._error(display, name, position, f"unknown compression codec id {codec_id} in the batch attributes")
            return
        try:
            valid = batch.compute_crc() == batch.crc  # type: ignore[attr-defined]
        except KafkalogError as e:
            self._error(display, name, position, e.reason)
            return
        records: list[Record] | None = None
        failure: KafkalogError | None = None
        if self.o.deep:
            try:
                records = batch.records()
            except KafkalogError as e:
                failure = e
        # A v0/v1 wrapper's base offset is its first inner offset: known once it is decoded.
        base_offset = batch.base_offset if batch.magic >= 2 or codec_id == 0 or records else None
        info = _BatchInfo(batch, position, _CODEC_NAMES[codec_id], valid, base_offset)
        self.out.batch(display, info)
        if failure is not None:
            self._error(display, name, failure.position if failure.position is not None else position, failure.reason)
        if not records:
            return
        v2 = batch.magic >= 2
        control = batch.is_control
        legacy_valid = valid if _CODEC_NAMES[codec_id] == "none" else True
        for record in records:
            state.next_offset(record.offset, self.out)
            control_text, control_json, control_error = ("", {}, None)
            if control and not self.o.skip_metadata:
                control_text, control_json, control_error = _control_tail(record)
            parsed = None
            if self.o.print_data and not control:
                parsed = self.o.parser.parse(record)  # type: ignore[attr-defined]
            self.out.record(
                display,
                info,
                _RecordInfo(
                    record.offset,
                    record.timestamp,
                    -1 if record.key is None else len(record.key),
                    -1 if record.value is None else len(record.value),
                    record.sequence if v2 else None,
                    tuple(h.key for h in record.headers) if v2 else None,
                    None if v2 else (legacy_valid, record.crc),  # type: ignore[arg-type]
                    control_text,
                    control_json,
                    parsed,
                ),
                self.o.skip_metadata,
            )
            if control_error is not None:
                self._error(display, name, position, f"control record at offset {record.offset}: {control_error}")
            if parsed is not None and parsed.kafka_fails:
                self.failed = True

    # -- .index --------------------------------------------------------------------------------------

    def _offset_index(self, display: str, name: str, info: dict) -> None:
        base = info["baseOffset"]
        length = os.stat(display).st_size
        entries = length // 8
        if entries == 0:
            self.out.index_empty(display)
            return
        index = OffsetIndex(display, base, writable=False)
        try:
            if self.o.sanity_only:
                self._sanity(display, _offset_index_problem(index, _absolute(display), length))
                return
            log_display = _sibling(display, name, ".log")
            problem = _unreadable(log_display)
            if problem is not None:
                self._fail(display, f"cannot verify against {log_display}: {problem}")
                return
            abs_path = _absolute(display)
            with FileRecords.open(log_display) as fr:
                log_name = log_display.rsplit("/", 1)[-1]
                for i in range(entries):
                    entry = index.entry(i)
                    # A crash can leave zero entries in the sparse file: stop at the first one.
                    if entry.offset == base and i > 0:
                        break
                    last = self._first_batch_last_offset(display, log_name, fr, entry.position, i)
                    if last is not None and last != entry.offset:
                        self.out.index_mismatch(abs_path, entry.offset, last)
                    if not self.o.verify_only:
                        self.out.offset_index_entry(display, i, entry.offset, entry.position)
        finally:
            index.close()

    def _first_batch_last_offset(
        self, display: str, log_name: str, fr: FileRecords, position: int, i: int
    ) -> int | None:
        """The last offset of the batch at ``position`` read within --max-message-size bytes."""
        if position < 0 or position >= fr.size_in_bytes:
            beyond = f"index entry {i} points beyond the end of the log ({fr.size_in_bytes} bytes)"
            self._error(display, log_name, position, beyond)
            return None
        try:
            batch = next(fr.slice(position, self.o.max_message_size).batches(), None)
        except KafkalogError as e:
            self._error(display, log_name, position, f"index entry {i}: {e.reason}")
            return None
        if batch is None:
            too_big = f"no whole batch within --max-message-size ({self.o.max_message_size}) bytes"
            self._error(display, log_name, position, f"index entry {i}: {too_big}")
            return None
        return batch.last_offset

    def _sanity(self, display: str, problem: str | None) -> None:
        if problem is not None:
            self.failed = True
        self.out.sanity(display, problem)

    # -- .timeindex ----------------------------------------------------------------------------------

    def _time_index(self, display: str, name: str, info: dict) -> None:
        base = info["baseOffset"]
        length = os.stat(display).st_size
        entries = length // 12
        tindex = TimeIndex(display, base, writable=False)
        try:
            if self.o.sanity_only:
                self._sanity(display, _time_index_problem(tindex, _absolute(display), length))
                return
            if entries == 0:
                return
            log_display = _sibling(display, name, ".log")
            index_display = _sibling(display, name, ".index")
            for needed in (log_display, index_display):
                problem = _unreadable(needed)
                if problem is not None:
                    self._fail(display, f"cannot verify against {needed}: {problem}")
                    return
            oindex = OffsetIndex(index_display, base, writable=False)
            try:
                with FileRecords.open(log_display) as fr:
                    self._time_entries(display, log_display.rsplit("/", 1)[-1], tindex, oindex, fr, entries)
            finally:
                oindex.close()
        finally:
            tindex.close()

    def _time_entries(
        self, display: str, log_name: str, tindex: TimeIndex, oindex: OffsetIndex, fr: FileRecords, entries: int
    ) -> None:
        abs_path = _absolute(display)
        previous = -1  # RecordBatch.NO_TIMESTAMP
        for i in range(entries):
            timestamp, offset = tindex.entry(i)
            if offset == tindex.base_offset and i > 0:
                break
            position = oindex.lookup(offset).position
            found = self._batch_holding(display, log_name, fr, position, offset)
            if found is not False:
                if found is None:
                    self.out.offset_not_found(abs_path, offset, -1)
                elif found.last_offset != offset:
                    self.out.offset_not_found(abs_path, offset, found.last_offset)
                else:
                    try:
                        max_ts = max((r.timestamp for r in found.records()), default=-1)
                        max_ts = max(max_ts, -1)
                    except KafkalogError as e:
                        self._error(display, log_name, found.position, e.reason)
                    else:
                        if max_ts != timestamp:
                            self.out.time_mismatch(abs_path, timestamp, max_ts)
                        if previous >= timestamp:
                            self.out.time_out_of_order(abs_path, timestamp, previous)
            if not self.o.verify_only:
                self.out.time_index_entry(display, i, timestamp, offset)
            previous = timestamp

    def _batch_holding(self, display: str, log_name: str, fr: FileRecords, position: int, offset: int):
        """The first batch from ``position`` whose last offset is >= ``offset``; None if there
        is none, False if the log could not be read there (reported)."""
        if position < 0 or position > fr.size_in_bytes:
            beyond = f"time index lookup of offset {offset} points beyond the end of the log"
            self._error(display, log_name, position, beyond)
            return False
        try:
            for batch in fr.slice(position).batches():
                if batch.last_offset >= offset:
                    return batch
        except KafkalogError as e:
            self._error(display, log_name, e.position, f"looking for offset {offset}: {e.reason}")
            return False
        return None

    # -- .txnindex -----------------------------------------------------------------------------------

    def _txn_index(self, display: str, name: str, info: dict) -> None:
        entry = _ABORTED_TXN
        position = 0
        with open(display, "rb") as f:
            while True:
                block = f.read(entry.size * 4096)
                whole = len(block) - len(block) % entry.size
                for fields in entry.iter_unpack(block[:whole]):
                    if fields[0] > 0:  # AbortedTxn.CURRENT_VERSION
                        self._error(
                            display,
                            name,
                            position,
                            f"Unexpected aborted transaction version {fields[0]} in transaction index "
                            f"{_absolute(display)}, current version is 0",
                        )
                        return
                    self.out.aborted_txn(display, fields)
                    position += entry.size
                if len(block) < entry.size * 4096:
                    return  # a partial last entry is ignored, as Kafka's iterator does

    # -- producer .snapshot --------------------------------------------------------------------------

    def _producer_snapshot(self, display: str, name: str, info: dict) -> None:
        with open(display, "rb") as f:
            data = f.read()
        problem = _kafka_snapshot_problem(data)
        if problem is None:
            try:
                entries = decode_snapshot(data, file=display)
            except KafkalogError as e:
                problem = e.reason
        if problem is not None:
            self.failed = True
            self.out.snapshot_corrupt(display, problem)
            return
        for entry in entries:
            self.out.producer_entry(display, entry)

    # -- text checkpoints (kafkalog extension) -------------------------------------------------------

    def _offset_checkpoint(self, display: str, name: str, info: dict) -> None:
        try:
            offsets = OffsetCheckpointFile(display).read()
        except KafkalogError as e:
            self._error(display, name, e.position, e.reason)
            return
        for (topic, partition), offset in offsets.items():
            self.out.offset_checkpoint_entry(display, topic, partition, offset)

    def _leader_epoch_checkpoint(self, display: str, name: str, info: dict) -> None:
        try:
            entries = LeaderEpochCheckpointFile(display).read()
        except KafkalogError as e:
            self._error(display, name, e.position, e.reason)
            return
        for epoch, start_offset in entries:
            self.out.leader_epoch_entry(display, epoch, start_offset)


class _LogState:
    """Per-log state of deep iteration: the last offset seen, for the non-consecutive report."""

    __slots__ = ("abs_path", "last")

    def __init__(self, abs_path: str) -> None:
        self.abs_path = abs_path
        self.last = -1

    def next_offset(self, offset: int, out: _TextOutput | _JsonOutput) -> None:
        # As Kafka: -1 means "none yet", so the first offset is never compared.
        if self.last != -1 and offset != self.last + 1:
            out.non_consecutive(self.abs_path, self.last, offset)
        self.last = offset


def _control_tail(record: Record) -> tuple[str, dict, str | None]:
    """The control-record part of a record line: text, --json fields, and an error if the
    record does not decode (Kafka's tool would stop there)."""
    key = record.key or b""
    type_id = struct.unpack_from(">h", key, 2)[0] if len(key) >= 4 else -1
    ctype = ControlRecordType.parse(type_id)
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        epoch = record.coordinator_epoch
        return (
            f" endTxnMarker: {ctype.name} coordinatorEpoch: {epoch}",
            {"controlType": ctype.name, "coordinatorEpoch": epoch},
            None,
        )
    if ctype in _KRAFT_CONTROL:
        label, message = _KRAFT_CONTROL[ctype]
        try:
            if record.value is None:
                raise _ReadError("the record has no value")
            # ControlRecordUtils reads version 0; the JSON is written at the record's own
            # "version" field, which must therefore be 0 too.
            values = _read_message(message, _Reader(record.value), 0)
            if values["version"] != 0:
                raise _ReadError(f"Can't write version {values['version']} of {message.name}")
        except _ReadError as e:
            return "", {"controlType": ctype.name}, str(e)
        data = _to_json(message.fields, values, 0)
        return f" {label} {_jackson(data)}", {"controlType": ctype.name, "control": data}, None
    return f" controlType: {ctype.name}({type_id})", {"controlType": ctype.name, "controlTypeId": type_id}, None


def _looks_foreign(fr: FileRecords, end: int) -> bool:
    """True when the first bytes are not the start of any entry Kafka could have written (and
    are not the zeros of a preallocated or zero-filled file)."""
    head = fr.read(0, _HEADER_UP_TO_MAGIC)
    if end < _HEADER_UP_TO_MAGIC or len(head) < _HEADER_UP_TO_MAGIC or not any(head):
        return False
    size, magic = _SIZE_MAGIC.unpack(head)
    return size < _MIN_ENTRY_SIZE or not 0 <= magic <= 2


def _sibling(display: str, name: str, suffix: str) -> str:
    """The file of the same segment with another suffix (Kafka: ``name.split("\\\\.")(0) + suffix``
    in the absolute parent directory)."""
    parent = display.rsplit("/", 1)[0] if "/" in display else ""
    stem = name.split(".")[0] + suffix
    return f"{parent}/{stem}" if parent or display.startswith("/") else stem


def _unreadable(path: str) -> str | None:
    """Why ``path`` cannot be dumped (missing, a directory, not readable), or None."""
    try:
        st = os.stat(path)
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISDIR(st.st_mode):
        return "Is a directory"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not os.access(path, os.R_OK):
        return "Permission denied"
    return None


def _offset_index_problem(index: OffsetIndex, abs_path: str, length: int) -> str | None:
    """``OffsetIndex.sanityCheck``'s exception message, or None when it passes."""
    entries = length // 8
    last = index.entry(entries - 1).offset if entries else index.base_offset
    if entries and last < index.base_offset:
        return (
            f"Corrupt index found, index file {abs_path} has non-zero size but the last offset is {last} "
            f"which is less than the base offset {index.base_offset}"
        )
    if length % 8:
        return f"Index file {abs_path} is corrupt, found {length} bytes which is neither positive nor a multiple of 8"
    return None


def _time_index_problem(index: TimeIndex, abs_path: str, length: int) -> str | None:
    """``TimeIndex.sanityCheck``'s exception message, or None when it passes."""
    entries = length // 12
    if entries:
        first_ts = index.entry(0).timestamp
        last_ts, last_offset = index.entry(entries - 1)
        if last_ts < first_ts:
            return (
                f"Corrupt time index found, time index file ({abs_path}) has non-zero size but the last timestamp "
                f"is {last_ts} which is less than the first timestamp {first_ts}"
            )
        if last_offset < index.base_offset:
            return (
                f"Corrupt time index found, time index file ({abs_path}) has non-zero size but the last offset "
                f"is {last_offset} which is less than the first offset {index.base_offset}"
            )
    if length % 12:
        return (
            f"Time index file {abs_path} is corrupt, found {length} bytes which is neither positive nor a "
            "multiple of 12"
        )
    return None


# version:int16, producerId, firstOffset, lastOffset, lastStableOffset: int64 (34 bytes).
_ABORTED_TXN = struct.Struct(">hqqqq")
assert _ABORTED_TXN.size == 34

_SNAPSHOT_FIELDS = (
    ("producer_id", 8),
    ("epoch", 2),
    ("last_sequence", 4),
    ("last_offset", 8),
    ("offset_delta", 4),
    ("timestamp", 8),
    ("coordinator_epoch", 4),
    ("current_txn_first_offset", 8),
)
_SNAPSHOT_ENTRY_SIZE = sum(size for _, size in _SNAPSHOT_FIELDS)


def _kafka_snapshot_problem(data: bytes) -> str | None:
    """The CorruptSnapshotException message ``ProducerStateManager.readSnapshot`` would raise
    for ``data`` (schema read, then version, then CRC), or None."""
    underflow = "java.nio.BufferUnderflowException"

    def schema(field: str, why: str) -> str:
        return f"Snapshot failed schema validation: Error reading field '{field}': {why}"

    if len(data) < 2:
        return schema("version", underflow)
    if len(data) < 6:
        return schema("crc", underflow)
    if len(data) < 10:
        return schema("producer_entries", underflow)
    version, stored_crc, count = struct.unpack_from(">hIi", data)
    remaining = len(data) - 10
    if count < 0:
        return schema("producer_entries", f"Array size {count} cannot be negative")
    if count > remaining:
        return schema("producer_entries", f"Error reading array of size {count}, only {remaining} bytes available")
    if count * _SNAPSHOT_ENTRY_SIZE > remaining:
        left = remaining % _SNAPSHOT_ENTRY_SIZE if remaining < count * _SNAPSHOT_ENTRY_SIZE else 0
        for field, size in _SNAPSHOT_FIELDS:
            if left < size:
                return schema("producer_entries", f"Error reading field '{field}': {underflow}")
            left -= size
    if version != 1:
        return f"Snapshot contained an unknown file version {version}"
    computed = _crc.crc32c(memoryview(data)[6:])
    if computed != stored_crc:
        return f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. Computed crc: {computed}"
    return None


# ------------------------------------------------------------------------------------------------
# Command line


def _size(text: str) -> int:
    value = int(text)
    if not 0 <= value <= _INT32_MAX:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and {_INT32_MAX}")
    return value


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkalog", description="Kafka's log tools, in Python.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    dump = sub.add_parser(
        "dump",
        help="dump log segments, indexes and snapshots as Kafka's kafka-dump-log.sh does",
        description=(
            "This tool helps to parse a log file and dump its contents to the console, useful for "
            "debugging a seemingly corrupt log segment. Output is Kafka's DumpLogSegments' (3.8)."
        ),
    )
    dump.add_argument(
        "--files",
        action="append",
        required=True,
        metavar="FILE1,FILE2,...",
        help="REQUIRED: the comma separated list of data and index log files to be dumped (repeatable)",
    )
    dump.add_argument("--deep-iteration", action="store_true", help="decode every record, not only batch headers")
    dump.add_argument(
        "--print-data-log",
        action="store_true",
        help="print the records' keys and values (implies --deep-iteration; set by any decoder option)",
    )
    dump.add_argument("--verify-index-only", action="store_true", help="verify indexes without printing their entries")
    dump.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="only run the sanity check a broker runs at startup to decide whether to rebuild an index",
    )
    dump.add_argument("--skip-record-metadata", action="store_true", help="do not print each record's metadata")
    dump.add_argument(
        "--max-message-size",
        type=_size,
        default=_DEFAULT_MAX_MESSAGE_SIZE,
        metavar="SIZE",
        help="size of the largest batch (default 5242880); also the largest batch a resync after corruption accepts",
    )
    dump.add_argument(
        "--max-bytes",
        type=_size,
        default=None,
        metavar="SIZE",
        help="read at most this many bytes of each .log file (default: all of it)",
    )
    default_class = _NEW_DECODER_PACKAGE + "StringDecoder"
    for side in ("key", "value"):
        dump.add_argument(
            f"--{side}-decoder-class",
            nargs="?",
            const=default_class,
            metavar="CLASS",
            help=f"Kafka's decoder class for {side}s: (org.apache.kafka.tools.api. or kafka.serializer.)"
            "StringDecoder, IntegerDecoder, LongDecoder or DefaultDecoder (shown as hex)",
        )
        dump.add_argument(
            f"--{side}-decoder",
            choices=sorted(_SHORTHAND_DECODERS),
            help=f"kafkalog's shorthand for the {side} decoder (implies --print-data-log)",
        )
    dump.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="parse records as __consumer_offsets offset commits and group metadata",
    )
    dump.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="parse records as __transaction_state transaction metadata",
    )
    dump.add_argument("--cluster-metadata-decoder", action="store_true", help=argparse.SUPPRESS)
    dump.add_argument(
        "--json", action="store_true", help="write JSON Lines (documented in docs/cli.md) instead of Kafka's text"
    )
    _add_tool_commands(sub)
    return parser


def _options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> _Options:
    if args.cluster_metadata_decoder:
        parser.error("--cluster-metadata-decoder (KRaft metadata records) is not supported by kafkalog")
    deprecations: list[tuple[str, str]] = []
    decoders: dict[str, Callable[[bytes], _Datum] | None] = {}
    # Kafka builds the value decoder first, then the key decoder (deprecation notes follow suit).
    for side in ("value", "key"):
        class_name = getattr(args, f"{side}_decoder_class")
        shorthand = getattr(args, f"{side}_decoder")
        if class_name is not None and shorthand is not None:
            parser.error(f"--{side}-decoder-class and --{side}-decoder cannot be used together")
        if shorthand is not None:
            decoders[side] = _SHORTHAND_DECODERS[shorthand]
            continue
        class_name = class_name or _NEW_DECODER_PACKAGE + "StringDecoder"
        try:
            decoders[side] = _decoder_for_class(class_name)
        except ValueError:
            parser.error(
                f"unknown decoder class {class_name}: kafkalog knows StringDecoder, IntegerDecoder, LongDecoder and "
                f"DefaultDecoder of {_NEW_DECODER_PACKAGE.rstrip('.')} (or the deprecated kafka.serializer)"
            )
        if class_name.startswith(_OLD_DECODER_PACKAGE):
            deprecations.append((class_name, _NEW_DECODER_PACKAGE + class_name[len(_OLD_DECODER_PACKAGE) :]))
    parser_obj: object
    if args.offsets_decoder:
        parser_obj, deprecations = _OffsetsParser(), []
    elif args.transaction_log_decoder:
        parser_obj, deprecations = _TransactionLogParser(), []
    else:
        parser_obj = _DecoderParser(decoders["key"], decoders["value"])
    # Kafka: any decoder option implies --print-data-log, which implies --deep-iteration.
    decoder_options = [f"{side}_decoder{kind}" for side in ("key", "value") for kind in ("", "_class")]
    print_data = (
        args.print_data_log
        or args.offsets_decoder
        or args.transaction_log_decoder
        or any(getattr(args, name) is not None for name in decoder_options)
    )
    files = [f for group in args.files for f in group.split(",") if f]
    if not files:
        parser.error("--files names no file")
    return _Options(
        files=files,
        deep=args.deep_iteration or print_data,
        print_data=print_data,
        verify_only=args.verify_index_only,
        sanity_only=args.index_sanity_check,
        skip_metadata=args.skip_record_metadata,
        max_message_size=args.max_message_size,
        # Kafka reports trailing bytes only when --max-bytes is left at Integer.MAX_VALUE.
        max_bytes=None if args.max_bytes == _INT32_MAX else args.max_bytes,
        parser=parser_obj,
        deprecations=deprecations,
    )


def _utf8(stream: IO[str]) -> tuple[IO[str], bool]:
    """``stream``, or a UTF-8 writer over its buffer when its encoding is another (Kafka writes
    UTF-8 on any sane JVM); and whether it was wrapped (and must be detached after use)."""
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    buffer = getattr(stream, "buffer", None)
    if encoding == "utf8" or buffer is None:
        return stream, False
    stream.flush()
    return io.TextIOWrapper(buffer, encoding="utf-8", errors="replace", newline="\n", write_through=True), True


# ------------------------------------------------------------------------------------------------
# The operator tools: verify, salvage, rebuild-index, retention, convert, stat
#
# Thin adapters: parse the arguments, call the library (kafkalog.verify, .salvage, .convert,
# .log), render text or JSON, and turn a KafkalogError or OSError into one line on stderr and
# exit status 1. Long operations draw a progress line on stderr when it is a terminal.


class _ProgressBar:
    """``label [#####.....]  45%  120.0/270.0 MB`` redrawn on stderr at most ten times a
    second, only when stderr is a terminal; a callable taking byte counts (the library's
    ``progress`` callbacks). Cleared by :meth:`close`."""

    _WIDTH = 30

    def __init__(self, stream: IO[str], total: int, label: str) -> None:
        isatty = getattr(stream, "isatty", None)
        self._on = total > 0 and callable(isatty) and bool(isatty())
        self._stream = stream
        self._total = total
        self._label = label
        self._done = 0
        self._last = 0.0
        self._drawn = False

    def __call__(self, n: int) -> None:
        self._done += n
        if not self._on:
            return
        now = time.monotonic()
        if now - self._last >= 0.1:
            self._last = now
            self._draw()

    def _draw(self) -> None:
        frac = min(1.0, self._done / self._total)
        filled = int(frac * self._WIDTH)
        bar = "#" * filled + "." * (self._WIDTH - filled)
        line = f"\r{self._label} [{bar}] {frac * 100:5.1f}%  {_human(self._done)}/{_human(self._total)}"
        self._stream.write(line)
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self._stream.write("\r" + " " * (len(self._label) + self._WIDTH + 40) + "\r")
            self._stream.flush()
            self._drawn = False


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


def _ts(ms: int | None) -> str:
    """An epoch-millisecond timestamp in ISO 8601 UTC (or ``-``)."""
    if ms is None:
        return "-"
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    """Rows as aligned text columns (``right``: the columns aligned right)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        out.append("  ".join(cells).rstrip())
    return out


def _display(path: str, root: str) -> str:
    """``path`` relative to what the user named (a directory, or a file's directory)."""
    base = root if os.path.isdir(root) else os.path.dirname(root) or "."
    try:
        rel = os.path.relpath(path, base)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _os_message(e: OSError) -> str:
    if e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    return str(e)


class _Tool:
    """The shared plumbing of one tool run: streams, error lines, the exit status."""

    def __init__(self, name: str, args: argparse.Namespace, out: IO[str], err: IO[str]) -> None:
        self.name = name
        self.args = args
        self.out = out
        self.err = err
        self.status = 0

    def print(self, line: str = "") -> None:
        self.out.write(line + "\n")

    def json(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def fail(self, message: str) -> None:
        self.err.write(f"kafkalog {self.name}: {message}\n")
        self.err.flush()
        self.status = 1

    def guarded(self, action: Callable[[], None]) -> None:
        """Run ``action``; a library or OS error becomes one line on stderr and status 1."""
        try:
            action()
        except KafkalogError as e:
            self.fail(str(e))
        except OSError as e:
            self.fail(_os_message(e))

    def progress(self, total: int, label: str) -> _ProgressBar:
        return _ProgressBar(self.err, total, label)


def _problem_lines(problems: Sequence[VerifyProblem], root: str) -> list[str]:
    return [
        f"{p.severity:<7}  {_display(p.path, root)}"
        + ("" if p.position is None else f" @{p.position}")
        + f"  {p.kind}  {p.message}"
        for p in problems
    ]


def _run_verify(tool: _Tool) -> None:
    a = tool.args
    for path in a.paths:

        def one(path: str = path) -> None:
            bar = tool.progress(total_log_bytes(path), "verify")
            try:
                report = verify_path(path, deep=a.deep, progress=bar)
            finally:
                bar.close()
            bad = not report.ok or (a.strict and report.warnings > 0)
            if bad:
                tool.status = 1
            if a.json:
                tool.json(report.to_dict())
                return
            if report.segments and not a.quiet:
                rows = [["segment", "batches", "records", "offsets", "bytes", "valid", "status"]]
                for s in report.segments:
                    errors = sum(1 for p in s.problems if p.severity == "error")
                    warnings = len(s.problems) - errors
                    status = "ok" if not s.problems else ", ".join(
                        part for part in (
                            f"{errors} error{'s' * (errors != 1)}" if errors else "",
                            f"{warnings} warning{'s' * (warnings != 1)}" if warnings else "",
                        ) if part
                    )
                    offsets = "-" if s.first_offset is None else f"{s.first_offset}..{s.last_offset}"
                    rows.append([
                        _display(s.path, path), str(s.batches), str(s.records), offsets, str(s.size),
                        str(s.valid_bytes), status,
                    ])
                for line in _table(rows, {1, 2, 4, 5}):
                    tool.print(line)
            problems = [p for p in report.problems if a.warnings or p.severity == "error" or a.strict]
            if problems:
                if report.segments and not a.quiet:
                    tool.print()
                for line in _problem_lines(problems, path):
                    tool.print(line)
            hidden = "" if a.warnings or a.strict or not report.warnings else " (--warnings lists them)"
            tool.print(
                f"{path}: {'OK' if not bad else 'PROBLEMS FOUND'}: {len(report.segments)} segments, "
                f"{len(report.partitions)} partitions, {report.errors} errors, {report.warnings} warnings{hidden}"
            )

        tool.guarded(one)


def _run_stat(tool: _Tool) -> None:
    a = tool.args
    for path in a.paths:

        def one(path: str = path) -> None:
            bar = tool.progress(total_log_bytes(path), "stat")
            try:
                report = verify_path(path, deep=not a.shallow, progress=bar)
            finally:
                bar.close()
            if not report.segments:
                raise KafkalogError("no log segments to describe", file=path)
            if not report.ok:
                tool.fail(
                    f"{path}: {report.errors} problems found; the figures cover the valid data only "
                    f"(kafkalog verify {path} lists them)"
                )
            if a.json:
                out = report.to_dict()
                out["totals"] = _stat_totals(report.segments, not a.shallow)
                tool.json(out)
                return
            rows = [[
                "segment", "offsets", "records", "tombstones", "batches", "bytes", "first timestamp",
                "last timestamp", "magic", "codecs", "producers",
            ]]
            for s in report.segments:
                rows.append(_stat_row(_display(s.path, path), s.first_offset, s.last_offset, s.records, s.tombstones,
                                      s.batches, s.size, s.min_timestamp, s.max_timestamp, s.magics, s.codecs,
                                      len(s.producer_ids)))
            totals = _stat_totals(report.segments, not a.shallow)
            rows.append(_stat_row(
                "total", totals["first_offset"], totals["last_offset"], totals["records"], totals["tombstones"],
                totals["batches"], totals["bytes"], totals["min_timestamp"], totals["max_timestamp"],
                tuple(totals["magics"]), tuple(totals["codecs"]), totals["producers"],
            ))
            for line in _table(rows, {2, 3, 4, 5, 10}):
                tool.print(line)
            for p in report.partitions:
                tool.print(
                    f"partition {p.topic}-{p.partition}: {p.segments} segments, log start offset {p.log_start_offset}, "
                    f"log end offset {p.log_end_offset}, {p.size} bytes"
                )

        tool.guarded(one)


def _stat_row(name, first, last, records, tombstones, batches, size, lo, hi, magics, codecs, producers) -> list[str]:
    return [
        name,
        "-" if first is None else f"{first}..{last}",
        str(records),
        "-" if tombstones is None else str(tombstones),
        str(batches),
        str(size),
        _ts(lo),
        _ts(hi),
        ",".join(map(str, magics)) or "-",
        ",".join(codecs) or "-",
        str(producers),
    ]


def _stat_totals(segments: Sequence[VerifySegmentReport], deep: bool) -> dict:
    firsts = [s.first_offset for s in segments if s.first_offset is not None]
    lasts = [s.last_offset for s in segments if s.last_offset is not None]
    los = [s.min_timestamp for s in segments if s.min_timestamp is not None]
    his = [s.max_timestamp for s in segments if s.max_timestamp is not None]
    codecs = {c for s in segments for c in s.codecs}
    return {
        "segments": len(segments),
        "first_offset": min(firsts) if firsts else None,
        "last_offset": max(lasts) if lasts else None,
        "records": sum(s.records for s in segments),
        "tombstones": sum(s.tombstones or 0 for s in segments) if deep else None,
        "batches": sum(s.batches for s in segments),
        "bytes": sum(s.size for s in segments),
        "min_timestamp": min(los) if los else None,
        "max_timestamp": max(his) if his else None,
        "magics": sorted({m for s in segments for m in s.magics}),
        "codecs": [c for c in _CODEC_NAMES if c in codecs],
        "producers": len({p for s in segments for p in s.producer_ids}),
        "control_batches": sum(s.control_batches for s in segments),
        "transactional_batches": sum(s.transactional_batches for s in segments),
    }


def _run_salvage(tool: _Tool) -> None:
    a = tool.args

    def run() -> None:
        size = os.path.getsize(a.src)
        bar = tool.progress(size, "salvage")
        try:
            report = salvage_segment(
                a.src, a.dst, progress=bar, write_indexes=not a.no_indexes,
                index_interval_bytes=a.index_interval_bytes, overwrite=a.force,
            )
        finally:
            bar.close()
        if a.json:
            tool.json(report.to_dict())
            return
        span = "" if report.first_offset is None else f", offsets {report.first_offset}..{report.last_offset}"
        tool.print(
            f"copied {report.kept_batches} batches ({report.kept_bytes} of {report.source_size} bytes{span}) "
            f"from {report.source} to {report.destination}"
        )
        if report.skipped:
            tool.print(f"skipped {len(report.skipped)} regions, {report.skipped_bytes} bytes:")
            for r in report.skipped:
                tool.print(f"  position {r.position}, {r.length} bytes: {r.reason}")
        else:
            tool.print("nothing skipped: every byte of the source is a valid batch")
        if report.indexes is not None:
            i = report.indexes
            tool.print(
                f"indexes written: {i.offset_entries} offset entries, {i.time_entries} time entries, "
                f"{i.aborted_txns} aborted transactions"
            )

    tool.guarded(run)


def _rebuild_line(r: RebuildReport, root: str) -> str:
    changed = (
        ("would rewrite " if r.dry_run else "rewrote ") + ", ".join(r.changed) if r.changed else "unchanged"
    )
    line = (
        f"{_display(r.path, root)}: {r.batches} batches, {r.offset_entries} offset entries, {r.time_entries} time "
        f"entries, {r.aborted_txns} aborted transactions; {changed}"
    )
    if r.stopped:
        line += (
            f"\n  warning: the indexes cover the first {r.valid_bytes} of {r.size} bytes: {r.stopped} "
            f"(Kafka's recovery would truncate the rest; kafkalog salvage copies out what is valid)"
        )
    return line


def _run_rebuild(tool: _Tool) -> None:
    a = tool.args
    for path in a.paths:

        def one(path: str = path) -> None:
            bar = tool.progress(total_log_bytes(path), "rebuild-index")
            try:
                reports = rebuild_path(path, index_interval_bytes=a.index_interval_bytes, dry_run=a.dry_run, progress=bar)
            finally:
                bar.close()
            for r in reports:
                if a.json:
                    tool.json(r.to_dict())
                else:
                    tool.print(_rebuild_line(r, path))

        tool.guarded(one)


def _config_from(tool: _Tool, parser: argparse.ArgumentParser) -> LogConfig:
    known = LogConfig().to_properties()
    props: dict[str, str] = {}
    for item in tool.args.config or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            parser.error(f"--config takes KEY=VALUE (a Kafka topic property), not {item!r}")
        if key not in known:
            parser.error(f"--config {key}: not a topic property kafkalog knows ({', '.join(sorted(known))})")
        props[key] = value.strip()
    try:
        return LogConfig.from_properties(props)
    except KafkalogError as e:
        parser.error(f"--config: {e}")
    raise AssertionError  # pragma: no cover


def _run_retention(tool: _Tool, parser: argparse.ArgumentParser) -> None:
    a = tool.args
    config = _config_from(tool, parser)
    now = a.now if a.now is not None else time.time_ns() // 1_000_000

    def run() -> None:
        path = Path(a.path)
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", a.path)
        partitions = [path] if segment_logs(path) else find_partition_dirs(path)
        if not partitions:
            raise KafkalogError("no log segments here and no partition directories below", file=a.path)
        for directory in partitions:
            tool.guarded(lambda directory=directory: _retention_one(tool, directory, config, now))

    tool.guarded(run)


def _retention_one(tool: _Tool, directory: Path, config: LogConfig, now: int) -> None:
    a = tool.args
    offline = plan_partition_retention(directory, config, now)  # what the files say, read-only
    plan = offline.plan
    if not a.dry_run and plan.deletions:
        log = Log.open(directory, config)
        try:
            plan = log.delete_old_segments(now_ms=now)
        finally:
            log.close()  # runs the delayed file deletions now
    doomed = {d.base_offset: d for d in plan.deletions}
    if a.json:
        tool.json({
            "partition": str(directory),
            "dryRun": a.dry_run,
            "now": now,
            "logStartOffset": offline.log_start_offset,
            "logEndOffset": offline.log_end_offset,
            "newLogStartOffset": plan.new_log_start_offset,
            "needsRoll": plan.needs_roll,
            "segments": [
                {
                    "file": s.path,
                    "baseOffset": s.base_offset,
                    "lastOffset": s.last_offset,
                    "size": s.size,
                    "largestTimestamp": s.largest_timestamp,
                    "delete": s.base_offset in doomed,
                    "reason": doomed[s.base_offset].reason if s.base_offset in doomed else None,
                    "detail": doomed[s.base_offset].detail if s.base_offset in doomed else None,
                }
                for s in offline.segments
            ],
        })
        return
    tool.print(
        f"{directory}: log start offset {offline.log_start_offset}, log end offset {offline.log_end_offset}, "
        f"{len(offline.segments)} segments; retention.ms={config.retention_ms} retention.bytes={config.retention_bytes} "
        f"cleanup.policy={','.join(config.cleanup_policy)}; now={now} ({_ts(now)})"
    )
    verb = "would delete" if a.dry_run else "deleted"
    for s in offline.segments:
        offsets = "empty" if s.last_offset is None else f"offsets {s.base_offset}..{s.last_offset}"
        d = doomed.get(s.base_offset)
        what = f"{verb:<12}" if d else f"{'keep':<12}"
        why = f": {d.reason}: {d.detail}" if d else ""
        tool.print(f"  {what} {Path(s.path).name} ({offsets}, {s.size} bytes, largest timestamp {_ts(s.largest_timestamp)}){why}")
    if plan.deletions:
        roll = "; the log rolls a new empty segment first (every segment goes)" if plan.needs_roll else ""
        tool.print(f"  new log start offset: {plan.new_log_start_offset}{roll}")
    else:
        tool.print("  nothing to delete")


def _run_convert(tool: _Tool) -> None:
    a = tool.args

    def run() -> None:
        bar = tool.progress(total_log_bytes(a.src), "convert")
        try:
            report = convert_path(
                a.src, a.dst, magic=a.magic, compression=a.compression, compression_level=a.compression_level,
                drop_timestamps=a.drop_timestamps, drop_producer_state=a.drop_producer_state,
                index_interval_bytes=a.index_interval_bytes, overwrite=a.force, progress=bar,
            )
        finally:
            bar.close()
        if a.json:
            tool.json(report.to_dict())
            return
        segments = f" in {len(report.segments)} segments" if report.segments else ""
        tool.print(
            f"converted {report.batches_in} batches, {report.records} records{segments} ({report.bytes_in} bytes) "
            f"to magic {report.magic} {report.compression}: {report.batches_out} batches, {report.bytes_out} bytes "
            f"in {report.destination}"
        )
        for kind, n in sorted(report.dropped.items()):
            tool.print(f"  dropped the {kind.replace('_', ' ')} of {n} batches")

    tool.guarded(run)


# ------------------------------------------------------------------------------------------------
# compact: LogCleaner.clean over a partition directory (or each of a log directory)


class _CleanerBars:
    """Progress bars for a cleaning: one per phase of each pass (``compact map``, then
    ``compact clean``), fed the cleaner's :class:`CleanerProgress` (cumulative byte counts)."""

    def __init__(self, tool: _Tool) -> None:
        self._tool = tool
        self._bar: _ProgressBar | None = None
        self._phase: tuple[str, int] | None = None
        self._done = 0

    def __call__(self, p: CleanerProgress) -> None:
        if (p.phase, p.total) != self._phase or p.done < self._done:  # a new phase or pass
            self.close()
            self._bar = self._tool.progress(p.total, f"compact {p.log} {p.phase}")
            self._phase, self._done = (p.phase, p.total), 0
        assert self._bar is not None
        self._bar(p.done - self._done)
        self._done = p.done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._phase, self._done = None, 0


class _LibraryWarnings(logging.Handler):
    """Collects the library's warnings (``kafkalog.*`` loggers: a rebuilt index, a corrupt
    checkpoint ignored) while it is entered, so a command reports them in its output instead of
    Python's last-resort handler printing them on stderr."""

    def __init__(self, sink: list[str] | None = None) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = [] if sink is None else sink
        self._logger = logging.getLogger("kafkalog")

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> list[str]:
        self._logger.addHandler(self)
        return self.messages

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)


def _compact_config(tool: _Tool, parser: argparse.ArgumentParser) -> LogConfig:
    """The topic settings from ``--config``, with ``cleanup.policy=compact`` implied: compacting
    is what was asked. A policy given without compact contradicts the command (a usage error)."""
    config = _config_from(tool, parser)
    given = any(item.partition("=")[0].strip() == "cleanup.policy" for item in tool.args.config or [])
    if not given:
        return config.replace(cleanup_policy=("compact",))
    if not config.compact:
        parser.error(
            f"--config cleanup.policy={','.join(config.cleanup_policy)} does not include compact: Kafka compacts only "
            "topics whose cleanup.policy is compact (or compact,delete); leave it out (compact is implied) or add compact"
        )
    return config


def _key_text(key: bytes) -> str | None:
    """A key as text when it is printable UTF-8, else None."""
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


def _key_label(key: bytes, width: int = 80) -> str:
    """A key for a text line: itself when printable UTF-8, else escaped as a bytes literal's
    body (``\\x00\\x01my-group...``); a long one keeps its start and its end."""
    if not key:
        return "(the empty key)"
    text = _key_text(key)
    if text is None:
        text = repr(key)[2:-1]
    if len(text) > width:
        head = (width - 3) * 2 // 3
        text = text[:head] + "..." + text[len(text) - (width - 3 - head) :]
    return text


def _top_keys(stats: CleanerStats, n: int) -> list[tuple[bytes, int]]:
    """The ``n`` keys with the most records removed (ties by key bytes), from ``removed_by_key``."""
    by_key = stats.removed_by_key or {}
    return sorted(by_key.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def _segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def _passes(stats: CleanerStats) -> list[int]:
    """The pass each of ``stats.segments`` belongs to (each pass rewrites from the log start, so
    a base offset that does not increase starts the next one)."""
    passes, n, previous = [], 1, None
    for s in stats.segments:
        if previous is not None and s.base_offset <= previous:
            n += 1
        passes.append(n)
        previous = s.base_offset
    return passes


def _compact_lines(stats: CleanerStats, keys: int) -> list[str]:
    """The per-segment table, the totals and the top keys of one cleaning (text output)."""
    multi = stats.rounds > 1
    head = (["pass"] if multi else []) + ["segment", "records", "kept", *REASONS, "bytes", "kept bytes"]
    rows = [head]
    for n, s in zip(_passes(stats), stats.segments):
        rows.append(
            ([str(n)] if multi else [])
            + [_segment_name(s.base_offset), str(s.records_read), str(s.records_kept)]
            + [str(s.removed.get(r, 0)) for r in REASONS]
            + [str(s.size), str(s.bytes_kept)]
        )
    rows.append(
        ([""] if multi else [])
        + ["total", str(sum(s.records_read for s in stats.segments)), str(sum(s.records_kept for s in stats.segments))]
        + [str(stats.removed.get(r, 0)) for r in REASONS]
        + [str(sum(s.size for s in stats.segments)), str(sum(s.bytes_kept for s in stats.segments))]
    )
    first_number = 2 if multi else 1
    lines = ["  " + line for line in _table(rows, set(range(first_number, len(head))))]
    removed = sum(stats.removed.values())
    verb = "would remove" if stats.dry_run else "removed"
    reasons = ", ".join(f"{stats.removed[r]} {r}" for r in REASONS if stats.removed.get(r))
    if multi:
        lines.append(
            f"  {verb} {removed} records ({reasons or 'none'}) in {stats.rounds} passes; each pass rereads the log from "
            f"its start: {stats.records_read} records ({stats.bytes_read} bytes) read, {stats.records_written} records "
            f"({stats.bytes_written} bytes) written"
        )
    else:
        lines.append(
            f"  {verb} {removed} of {stats.records_read} records ({reasons or 'none'}); "
            f"{stats.bytes_read - stats.bytes_written} of {stats.bytes_read} bytes"
        )
    if keys and stats.removed_by_key is not None:
        top = _top_keys(stats, keys)
        total = len(stats.removed_by_key)
        if not top:
            lines.append("  records removed per key: none")
        else:
            lines.append(f"  records removed per key (top {len(top)} of {total} key{'s' * (total != 1)}):")
            width = max(len(str(c)) for _, c in top)
            lines.extend(f"    {c:>{width}}  {_key_label(k)}" for k, c in top)
    return lines


def _run_compact(tool: _Tool, parser: argparse.ArgumentParser) -> None:
    a = tool.args
    if a.roll and a.dry_run:
        parser.error("--roll changes the log (it starts a new active segment); it cannot be used with --dry-run")
    config = _compact_config(tool, parser)
    now = a.now if a.now is not None else time.time_ns() // 1_000_000

    def run() -> None:
        path = Path(a.path)
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", a.path)
        if not path.is_dir():
            raise KafkalogError("compact takes a partition directory or a log directory, not a file", file=a.path)
        partitions = [path] if segment_logs(path) else find_partition_dirs(path)
        if not partitions:
            raise KafkalogError("no log segments here and no partition directories below", file=a.path)
        for directory in partitions:
            tool.guarded(lambda directory=directory: _compact_one(tool, directory, config, now))

    tool.guarded(run)


def _refuse_changing_load(tool: _Tool, directory: Path) -> None:
    """For a dry run: fail when opening the log would change its segments -- recovery truncating
    damaged or torn data, or the load finishing (or discarding) an interrupted cleaner swap. The
    check is read-only (:func:`verify_path`)."""
    bar = tool.progress(total_log_bytes(directory), "compact check")
    try:
        report = verify_path(directory, progress=bar)
    finally:
        bar.close()
    damaged = [s for s in report.segments if s.valid_bytes < s.size]
    leftovers = [p for p in report.problems if p.kind == "leftover-file"]
    if not damaged and not leftovers:
        return
    what = [f"truncate {s.size - s.valid_bytes} of the {s.size} bytes of {Path(s.path).name}" for s in damaged]
    what += [f"finish or discard {Path(p.path).name}" for p in leftovers]
    hint = "; kafkalog verify says what is damaged, kafkalog salvage copies out the valid batches" if damaged else ""
    raise KafkalogError(
        f"a dry run changes no segment, but opening this log would, as a broker's load does: {', '.join(what)}"
        f"{hint}; compact without --dry-run recovers the log first",
        file=str(directory),
    )


def _compact_one(tool: _Tool, directory: Path, config: LogConfig, now: int) -> None:
    a = tool.args
    if a.dry_run:
        _refuse_changing_load(tool, directory)
    bars = _CleanerBars(tool)
    cleaner = LogCleaner(dedupe_buffer_size=a.dedupe_buffer_size, clock=lambda: now, progress=bars)
    with _LibraryWarnings() as warnings:
        log = Log.open(directory, config)  # the lock, and recovery if unclean, as a broker's load
    try:
        loaded = log.load_stats
        if a.roll and log.active_segment.size > 0:
            log.roll()
        first_dirty, uncleanable, _ = cleanable_offsets(log, log.cleaner_checkpoint, now)
        ltc = LogToClean.of(log, first_dirty, uncleanable)
        start, end, segments = log.log_start_offset, log.log_end_offset, len(log.segments)
        active, lso = log.active_segment.base_offset, log.last_stable_offset
        try:
            with _LibraryWarnings(warnings):
                stats = cleaner.clean(log, now_ms=now, dry_run=a.dry_run, count_keys=a.keys > 0)
        finally:
            bars.close()
        checkpoint = log.cleaner_checkpoint
    finally:
        with _LibraryWarnings(warnings):
            log.close()  # runs the delayed deletions of replaced segments now
    complete = stats is None or stats.end_offset >= ltc.first_uncleanable_offset
    recovery = {
        "recovered_segments": loaded.recovered_segments,
        "truncated_bytes": loaded.truncated_bytes,
        "deleted_segments": loaded.deleted_segments,
    }
    if a.json:
        out = {
            "partition": str(directory),
            "dry_run": a.dry_run,
            "now": now,
            "log_start_offset": start,
            "log_end_offset": end,
            "first_dirty_offset": ltc.first_dirty_offset,
            "first_uncleanable_offset": ltc.first_uncleanable_offset,
            "recovery": recovery,
            "warnings": warnings,
            "cleaned": stats is not None,
            "complete": complete,
            "cleaner_checkpoint": checkpoint,
            "stats": None,
            "top_keys": None,
        }
        if stats is not None:
            d = stats.to_dict()
            d.pop("removed_by_key", None)
            out["stats"] = d
            if a.keys:
                out["top_keys"] = [
                    {"key_hex": k.hex(), "key": _key_text(k), "removed": n} for k, n in _top_keys(stats, a.keys)
                ]
        tool.json(out)
        return
    tool.print(
        f"{directory}: log [{start}, {end}), {segments} segments; cleanup.policy={','.join(config.cleanup_policy)} "
        f"delete.retention.ms={config.delete_retention_ms} min.compaction.lag.ms={config.min_compaction_lag_ms}; "
        f"now={now} ({_ts(now)})"
    )
    if loaded.recovered_segments or loaded.truncated_bytes or loaded.deleted_segments:
        tool.print(
            f"  opening recovered the log as a broker's load would (indexes rebuilt from the log): "
            f"{loaded.truncated_bytes} bytes truncated, {loaded.deleted_segments} segments deleted"
        )
    for message in warnings:
        tool.print(f"  warning: {message}")
    lag = " or the first segment within min.compaction.lag.ms" if config.min_compaction_lag_ms > 0 else ""
    tool.print(
        f"  dirty section [{ltc.first_dirty_offset}, {ltc.first_uncleanable_offset}), {ltc.cleanable_bytes} bytes "
        f"(cleaning stops at the active segment, base offset {active}, or the last stable offset, {lso}{lag})"
    )
    if stats is None:
        hint = "; --roll makes the active segment cleanable" if ltc.first_uncleanable_offset == active and active < end else ""
        tool.print(f"  nothing to clean{hint}")
        return
    for line in _compact_lines(stats, a.keys):
        tool.print(line)
    if a.dry_run and not complete:
        tool.print(
            f"  the offset map ({a.dedupe_buffer_size} bytes) filled at offset {stats.end_offset}: a real run goes on in "
            f"more passes up to {ltc.first_uncleanable_offset} (a larger --dedupe-buffer-size shows them in one)"
        )
    elif not a.dry_run:
        tool.print(f"  cleaner-offset-checkpoint: {checkpoint}")


# ------------------------------------------------------------------------------------------------
# demo: the whole library in one run

#: The partition the demo (and ``python -m kafkalog``) writes in its log directory.
SAMPLE_PARTITION = "sample-0"
_SAMPLE_TS = 1_700_000_000_000
_SAMPLE_NOW = _SAMPLE_TS + 3_600_000  # the demo's clock: an hour after its records
_SHARED_KEYS = (b"user-0", b"user-1")
_SAMPLE_SEGMENT_BYTES = 1200  # small, so the sample has several segments


def _sample_config() -> LogConfig:
    return LogConfig(segment_bytes=_SAMPLE_SEGMENT_BYTES, cleanup_policy=("compact",))


def _sample_codecs() -> list[tuple[int, Compression]]:
    return [(m, c) for m in (0, 1, 2) for c in Compression if not (c is Compression.ZSTD and m < 2)]


def build_sample(directory: str | os.PathLike, *, clock: Callable[[], int] | None = None) -> int:
    """Write the sample partition ``directory/sample-0`` through :class:`~kafkalog.log.Log`
    (offsets assigned, every batch validated, 1200-byte segments, ``cleanup.policy=compact``): a
    batch of five records for every (magic, codec) pair Kafka allows, then a transactional
    batch and its COMMIT marker -- 69 offsets. Two keys recur in every batch and the last
    batch deletes one of them with a tombstone, so compaction has work; the other keys are
    unique, so every format survives it. Return the batches appended.

    Raises:
        KafkalogError: ``directory/sample-0`` already holds files.
    """
    partition = Path(directory) / SAMPLE_PARTITION
    if partition.exists() and any(partition.iterdir()):
        raise KafkalogError("already holds files; the sample is written to a new partition directory", file=str(partition))
    config = _sample_config()
    batches = 0
    pairs = _sample_codecs()
    log = Log.open(partition, config, clock=clock or (lambda: _SAMPLE_NOW))
    try:
        for n, (magic, codec) in enumerate(pairs):
            builder = RecordBatchBuilder(magic, codec)
            offset = log.log_end_offset
            for i in range(5):
                key = _SHARED_KEYS[i] if i < 2 else f"v{magic}-{codec.kafka_name}-{i}".encode()
                value: bytes | None = f"value {i} of a v{magic} {codec.kafka_name} batch".encode()
                if n == len(pairs) - 1 and key == _SHARED_KEYS[1]:
                    value = None  # a tombstone: user-1 is deleted
                headers = [("source", b"kafkalog-sample")] if magic == 2 else []
                builder.append(key, value, timestamp=_SAMPLE_TS + offset + i, headers=headers)
            log.append(builder.build())
            batches += 1
        txn = RecordBatchBuilder(
            2, Compression.LZ4, producer_id=4242, producer_epoch=0, base_sequence=0,
            is_transactional=True, timestamp_type=TimestampType.CREATE_TIME,
        )  # fmt: skip
        for i in range(3):
            txn.append(b"txn-key", f"transactional {i}".encode(), timestamp=_SAMPLE_TS + log.log_end_offset + i)
        log.append(txn.build())
        marker = RecordBatchBuilder.end_transaction_marker(
            ControlRecordType.COMMIT, producer_id=4242, producer_epoch=0, coordinator_epoch=7,
            timestamp=_SAMPLE_TS + log.log_end_offset,
        )  # fmt: skip
        log.append(marker, origin=AppendOrigin.COORDINATOR)
    finally:
        log.close()
    return batches + 2


class _DumpBlock(NamedTuple):
    file: str
    magic: int
    lines: list[str]  # the batch line, then its record lines


def _dump_blocks(paths: Sequence[Path]) -> tuple[dict[str, list[str]], list[_DumpBlock]]:
    """``kafkalog dump --deep-iteration --print-data-log`` of each segment, split into each
    file's header lines and one block per batch."""
    headers: dict[str, list[str]] = {}
    blocks: list[_DumpBlock] = []
    for path in paths:
        out, err = io.StringIO(), io.StringIO()
        if main(["dump", "--files", str(path), "--deep-iteration", "--print-data-log"], stdout=out, stderr=err) != 0:
            raise KafkalogError(f"kafkalog dump failed: {err.getvalue().strip()}", file=str(path))
        head: list[str] = []
        for line in out.getvalue().splitlines():
            if line.startswith("| ") and blocks and blocks[-1].file == str(path):
                blocks[-1].lines.append(line)
            elif line.startswith(("baseOffset:", "offset:")):
                magic = int(re.search(r" magic: (\d+) ", line)[1])  # type: ignore[index]
                blocks.append(_DumpBlock(str(path), magic, [line]))
            else:
                head.append(line)
        headers[str(path)] = head
    return headers, blocks


def _dump_slice(paths: Sequence[Path], last: int) -> list[str]:
    """The first batch of each magic and the last ``last`` batches of the segments at
    ``paths``, as ``kafkalog dump --deep-iteration --print-data-log`` prints them (``...`` where
    batches are left out)."""
    headers, blocks = _dump_blocks(paths)
    chosen = {len(blocks) - i - 1 for i in range(min(last, len(blocks)))}
    for magic in sorted({b.magic for b in blocks}):
        chosen.add(next(i for i, b in enumerate(blocks) if b.magic == magic))
    lines: list[str] = []
    shown_file, previous = None, -1
    for i in sorted(chosen):
        block = blocks[i]
        if block.file != shown_file:
            lines.extend(headers[block.file])
            shown_file = block.file
        elif i != previous + 1:
            lines.append("...")
        lines.extend(block.lines)
        previous = i
    return lines


def _run_demo(tool: _Tool) -> None:
    a = tool.args

    def run() -> None:
        if a.dir is None:
            with tempfile.TemporaryDirectory(prefix="kafkalog-demo-") as tmp:
                tool.print(f"kafkalog demo in {tmp} (a temporary directory, removed at the end; kafkalog demo DIR keeps it)")
                _demo(tool, Path(tmp))
        else:
            log_dir = Path(a.dir)
            if log_dir.exists() and not log_dir.is_dir():
                raise NotADirectoryError(20, "Not a directory", a.dir)
            log_dir.mkdir(parents=True, exist_ok=True)
            tool.print(f"kafkalog demo in {log_dir} (kept)")
            _demo(tool, log_dir)

    tool.guarded(run)


def _demo(tool: _Tool, log_dir: Path) -> None:
    """Build, summarise, compact, verify and dump the sample partition in ``log_dir``."""
    partition = log_dir / SAMPLE_PARTITION
    now = _SAMPLE_NOW
    build_sample(log_dir, clock=lambda: now)

    tool.print()
    tool.print("1. Write: every magic x codec, keyed records, a tombstone and a transaction, through Log.append")
    before = verify_path(partition, deep=True)
    p = before.partitions[0]
    tool.print(
        f"{partition}: offsets [{p.log_start_offset}, {p.log_end_offset}), {p.segments} segments, {p.size} bytes"
    )
    rows = [["segment", "offsets", "batches", "records", "tombstones", "bytes", "magics", "codecs"]]
    for s in before.segments:
        offsets = "-" if s.first_offset is None else f"{s.first_offset}..{s.last_offset}"
        rows.append([
            Path(s.path).name, offsets, str(s.batches), str(s.records), str(s.tombstones or 0), str(s.size),
            ",".join(map(str, s.magics)), ",".join(s.codecs),
        ])  # fmt: skip
    for line in _table(rows, {2, 3, 4, 5}):
        tool.print("  " + line)
    formats = "  ".join(
        f"v{m} " + ",".join(c.kafka_name for mm, c in _sample_codecs() if mm == m) for m in (0, 1, 2)
    )
    tool.print(f"  formats: {formats}; keys {', '.join(k.decode() for k in _SHARED_KEYS)} in every batch")

    tool.print()
    tool.print("2. Compact: roll the active segment, then LogCleaner.clean (as kafkalog compact --roll --keys 3)")
    config = _sample_config()
    cleaner = LogCleaner(dedupe_buffer_size=1 << 20, clock=lambda: now)
    log = Log.open(partition, config, clock=lambda: now)
    try:
        log.roll()  # Kafka never cleans the active segment
        stats = cleaner.clean(log, now_ms=now, count_keys=True)
        if stats is None:
            raise KafkalogError("the cleaner found nothing to clean in the sample", file=str(partition))
        for line in _compact_lines(stats, 3):
            tool.print(line)
        # The pass stamped the tombstone's batch with a delete horizon: now + delete.retention.ms.
        later = now + config.delete_retention_ms
        again = cleaner.clean(log, now_ms=later)
        gone = 0 if again is None else again.removed.get("tombstone", 0)
        tool.print(
            f"  {_SHARED_KEYS[1].decode()}'s tombstone stays until its delete horizon, now + delete.retention.ms "
            f"({config.delete_retention_ms} ms); a pass then (--now-ms {later}) removed {gone} tombstone{'s' * (gone != 1)}"
        )
    finally:
        log.close()

    tool.print()
    tool.print("3. Verify: kafkalog.verify.verify_path (CRCs, offsets, indexes, snapshots, checkpoints)")
    report = verify_path(partition)
    if not report.ok:
        tool.status = 1
        for line in _problem_lines([q for q in report.problems if q.severity == "error"], str(partition)):
            tool.print("  " + line)
    tool.print(
        f"{partition}: {'OK' if report.ok else 'PROBLEMS FOUND'}: {len(report.segments)} segments, "
        f"{report.errors} errors, {report.warnings} warnings"
    )

    tool.print()
    tool.print(
        "4. Dump: kafkalog dump --files SEGMENT --deep-iteration --print-data-log (Kafka's kafka-dump-log.sh "
        "output): the first batch of each magic and the last three batches"
    )
    for line in _dump_slice([Path(s.path) for s in report.segments if s.records], 3):
        tool.print(line)
    tool.print()
    where = str(partition) if tool.args.dir else "PARTITION_DIR"
    tool.print(
        f"Next: kafkalog stat {where}; kafkalog verify {where}; kafkalog compact {where} --dry-run --keys 10; "
        "kafkalog dump --files SEGMENT.log (docs/cli.md)"
    )


def _interval(text: str) -> int:
    return _size(text)


def _dedupe_size(text: str) -> int:
    value = _size(text)
    if value < 2 * 24:
        raise argparse.ArgumentTypeError(f"{text} is too small: the offset map needs room for two 24-byte slots")
    return value


def _add_tool_commands(sub) -> None:
    """The operator tools' subcommands (beside ``dump``)."""
    verify = sub.add_parser(
        "verify",
        help="check log files, partition or log directories (read-only fsck)",
        description=(
            "Check every batch (CRC, framing, offsets), every index entry against the log, the time and "
            "transaction indexes, producer snapshots, checkpoint files and leftover files; read-only. Exit "
            "status 1 when an error is found."
        ),
    )
    verify.add_argument("paths", nargs="+", metavar="PATH", help="a .log (or index) file, a partition directory or a log directory")
    verify.add_argument("--deep", action="store_true", help="also decode every record")
    verify.add_argument("--warnings", action="store_true", help="list warnings too (they are counted either way)")
    verify.add_argument("--strict", action="store_true", help="treat warnings as errors (listed, exit status 1)")
    verify.add_argument("--quiet", action="store_true", help="no segment table, only problems and the summary")
    verify.add_argument("--json", action="store_true", help="one JSON report per PATH (documented in docs/cli.md)")

    salvage = sub.add_parser(
        "salvage",
        help="copy every valid batch out of a damaged segment",
        description=(
            "Copy the valid batches of SRC to DST, resynchronising after each corrupt region on the next batch "
            "whose offsets, size, magic and CRC agree; report the regions skipped. SRC is only read."
        ),
    )
    salvage.add_argument("src", metavar="SRC", help="the damaged .log")
    salvage.add_argument("dst", metavar="DST", help="the output .log, or a directory to write it into")
    salvage.add_argument("--force", action="store_true", help="replace DST if it exists")
    salvage.add_argument("--no-indexes", action="store_true", help="do not write .index/.timeindex/.txnindex beside DST")
    salvage.add_argument("--index-interval-bytes", type=_interval, default=4096, metavar="N", help="index.interval.bytes of the indexes written (4096)")
    salvage.add_argument("--json", action="store_true", help="a JSON report")

    rebuild = sub.add_parser(
        "rebuild-index",
        help="regenerate .index/.timeindex/.txnindex from the log",
        description="Rebuild the indexes of segments from their logs by Kafka's rule; the .log files are not touched.",
    )
    rebuild.add_argument("paths", nargs="+", metavar="PATH", help="a segment file, a partition directory or a log directory")
    rebuild.add_argument("--index-interval-bytes", type=_interval, default=4096, metavar="N", help="the topic's index.interval.bytes (4096)")
    rebuild.add_argument("--dry-run", action="store_true", help="only say which index files would change")
    rebuild.add_argument("--json", action="store_true", help="one JSON object per segment")

    retention = sub.add_parser(
        "retention",
        help="show (or apply) what retention deletes, and why",
        description=(
            "Apply Kafka's retention (log start offset, retention.bytes, retention.ms) to a partition directory "
            "(or every partition of a log directory). The topic's settings come only from --config."
        ),
    )
    retention.add_argument("path", metavar="PATH", help="a partition directory or a log directory")
    retention.add_argument("--dry-run", action="store_true", help="only report (read-only: nothing is opened for writing)")
    retention.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic property, e.g. retention.ms=86400000 (repeatable)")
    retention.add_argument("--now", type=int, default=None, metavar="MS", help="the current time in epoch milliseconds (default: the clock)")
    retention.add_argument("--json", action="store_true", help="one JSON object per partition")

    convert = sub.add_parser(
        "convert",
        help="rewrite a segment or partition directory in another message format or codec",
        description=(
            "Rewrite SRC (a .log or a partition directory) into DST with the given magic and codec, keeping every "
            "record's offset, timestamp, key, value and headers; refuses what the target cannot hold."
        ),
    )
    convert.add_argument("src", metavar="SRC", help="a .log or a partition directory")
    convert.add_argument("dst", metavar="DST", help="the output .log or directory")
    convert.add_argument("--magic", type=int, choices=(0, 1, 2), default=2, help="the target message format (2)")
    convert.add_argument("--compression", choices=_CODEC_NAMES, default="none", help="the target codec (none)")
    convert.add_argument("--compression-level", type=int, default=None, metavar="N", help="the codec's level (its default)")
    convert.add_argument("--drop-timestamps", action="store_true", help="allow magic 0 output of records with timestamps")
    convert.add_argument("--drop-producer-state", action="store_true", help="allow v0/v1 output of idempotent producers' batches")
    convert.add_argument("--index-interval-bytes", type=_interval, default=4096, metavar="N", help="index.interval.bytes of the output (4096)")
    convert.add_argument("--force", action="store_true", help="replace existing output segments")
    convert.add_argument("--json", action="store_true", help="a JSON report")

    stat_cmd = sub.add_parser(
        "stat",
        help="summarise segments: offsets, times, sizes, codecs, records, tombstones, producers",
        description="Describe the segments of a file, partition directory or log directory (read-only).",
    )
    stat_cmd.add_argument("paths", nargs="+", metavar="PATH", help="a .log file, a partition directory or a log directory")
    stat_cmd.add_argument("--shallow", action="store_true", help="read batch headers only (no tombstone count)")
    stat_cmd.add_argument("--json", action="store_true", help="one JSON object per PATH")
    compact = sub.add_parser(
        "compact",
        help="show (or do) what compaction removes, per segment, reason and key",
        description=(
            "Compact a partition directory (or every partition of a log directory) with Kafka's log cleaner: keep the "
            "latest record of each key, drop records without a key, aborted transactions' data, and tombstones and "
            "markers past their delete horizon. cleanup.policy=compact is implied; the other topic settings come only "
            "from --config. Kafka never cleans the active segment (--roll closes it first)."
        ),
    )
    compact.add_argument("path", metavar="PATH", help="a partition directory or a log directory")
    compact.add_argument(
        "--dry-run", action="store_true",
        help="decide and count everything in one pass; write no segment and no cleaner checkpoint (a log whose "
        "opening would change a segment, by recovery or an interrupted swap, is refused)",
    )  # fmt: skip
    compact.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic property, e.g. delete.retention.ms=0 (repeatable)")
    compact.add_argument(
        "--now-ms", "--now", dest="now", type=int, default=None, metavar="MS",
        help="the cleaner's clock in epoch milliseconds, for delete horizons and compaction lags (default: the clock)",
    )  # fmt: skip
    compact.add_argument("--keys", type=_interval, default=0, metavar="N", help="count removals per key and list the N keys with the most")
    compact.add_argument("--roll", action="store_true", help="roll the active segment first, so all of the log is cleanable")
    compact.add_argument(
        "--dedupe-buffer-size", type=_dedupe_size, default=DEFAULT_DEDUPE_BUFFER_SIZE, metavar="BYTES",
        help="the offset map's memory, 24 bytes a key (Kafka's log.cleaner.dedupe.buffer.size, 134217728)",
    )  # fmt: skip
    compact.add_argument("--json", action="store_true", help="one JSON object per partition")

    demo = sub.add_parser(
        "demo",
        help="build a sample partition with every format and codec, compact, verify and dump it",
        description=(
            "Write a sample partition (every magic x codec, keyed records with repeats, a tombstone, a transaction) "
            "through Log, summarise it, compact it with LogCleaner, verify it and dump a slice of it."
        ),
    )
    demo.add_argument("dir", nargs="?", metavar="DIR", help="the log directory to write DIR/sample-0 in, kept (default: a temporary one, removed)")
    for p in (verify, salvage, rebuild, retention, convert, stat_cmd, compact, demo):
        p.set_defaults(_parser=p)


def _run_tool(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    tool = _Tool(args.command, args, out, err)
    try:
        if args.command == "verify":
            _run_verify(tool)
        elif args.command == "stat":
            _run_stat(tool)
        elif args.command == "salvage":
            _run_salvage(tool)
        elif args.command == "rebuild-index":
            _run_rebuild(tool)
        elif args.command == "retention":
            _run_retention(tool, args._parser)
        elif args.command == "convert":
            _run_convert(tool)
        elif args.command == "compact":
            _run_compact(tool, args._parser)
        elif args.command == "demo":
            _run_demo(tool)
    except SystemExit as e:  # a usage error found after parsing (--config)
        return e.code if isinstance(e.code, int) else 2
    return tool.status


def main(argv: Sequence[str] | None = None, *, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Run a subcommand (``dump``, ``verify``, ``salvage``, ``rebuild-index``, ``retention``,
    ``convert``, ``stat``, ``compact``, ``demo``); return the exit status.

    Args:
        argv: the arguments after the program name, starting with the subcommand.
        stdout, stderr: where to write (default: the process's streams).
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        options = _options(parser, args) if args.command == "dump" else None
    except SystemExit as e:  # usage errors (2) and --help (0)
        return e.code if isinstance(e.code, int) else 2
    out_stream, out_wrapped = _utf8(stdout or sys.stdout)
    err_stream, err_wrapped = _utf8(stderr or sys.stderr)
    try:
        if options is None:
            return _run_tool(args, out_stream, err_stream)
        output = (_JsonOutput if args.json else _TextOutput)(out_stream, err_stream)
        return _Dump(options, output).run()  # type: ignore[arg-type]
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
        finally:
            os.close(devnull)
        return 1
    finally:
        for stream, wrapped in ((out_stream, out_wrapped), (err_stream, err_wrapped)):
            if wrapped:
                try:
                    stream.flush()
                except OSError:
                    pass
                stream.detach()  # type: ignore[attr-defined]  # leave the process's stream open
