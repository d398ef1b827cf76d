"""Kafka's coordinator record schemas for the dump's decoders."""

from __future__ import annotations

import base64
import struct
from typing import NamedTuple
from ..record import ControlRecordType
from ._jvm import _int32

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
