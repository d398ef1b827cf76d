"""Kafka's wire protocol for the APIs kafkalog's broker serves, written by hand from Kafka's
message specs (``clients/src/main/resources/common/message/*.json``).

Every message is a schema declared once, as data, in the tables below: fields in Kafka's order
with the versions they exist in, the versions they may be null in and their defaults, under
Kafka's names in snake case (``TopicData`` -> ``topic_data``). One small interpreter decodes
and encodes every schema. Messages are plain dicts (nested lists of dicts for arrays of
structs); decoding fills fields a version lacks with their defaults, encoding takes a missing
field as its default and ignores fields the version lacks.

=================  =======  ============================================================
API (key)          versions notes
=================  =======  ============================================================
Produce (0)        3-8      records stay a memoryview of the request (no copy)
Fetch (1)          4-11     records may be file slices, sent with sendfile after the headers
ListOffsets (2)    1-5
Metadata (3)       0-8
FindCoordinator    0-2
(10)
ApiVersions (18)   0-3      v3 is flexible (compact strings/arrays, tagged fields); a request
                            above v3 is answered in the v0 layout (Kafka's KIP-511 rule)
CreateTopics (19)  0-4
InitProducerId     0-1
(22)
=================  =======  ============================================================

**Framing.** A request is ``size:int32`` then the header then the body. Request header v1:
``api_key:int16, api_version:int16, correlation_id:int32, client_id:nullable string
(int16 length)``; header v2 (flexible request versions) adds tagged fields after it — the
client id keeps its int16 length. A response is ``size:int32``, ``correlation_id:int32``
(response header v0; v1 adds tagged fields for flexible versions, but an ApiVersions response
always uses v0 so that any client can read it), then the body.

**Primitive types** (big-endian): int8/16/32/64, bool (one byte, non-zero is true), string
(int16 length, -1 = null), bytes/records (int32 length, -1 = null), array (int32 count, -1 =
null). Flexible versions use compact forms: unsigned varint length + 1 (0 = null), and every
struct ends with tagged fields (unsigned varint count, then per field: tag, size, bytes).

**Hostile input.** Decoding is bounds-checked: every length and count is compared with the
bytes present before anything is read or allocated (an array count against the smallest size
its elements could have), and every failure is a :class:`ProtocolError` with the byte position
in the frame — never an ``IndexError`` or ``struct.error``. Strings that are not UTF-8 decode
with replacement characters, as Java's ``new String(bytes, UTF_8)`` does.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

from ..errors import KafkalogError


class ProtocolError(KafkalogError, ValueError):
    """Bytes that are not a well-formed Kafka request or response (Kafka's
    ``InvalidRequestException``); ``position`` is the byte position in the frame."""


class UnsupportedApiError(ProtocolError):
    """A request for an API key or version this module does not implement. Kafka closes the
    connection on these (except ApiVersions, answered in the v0 layout)."""

    def __init__(self, reason: str, *, api_key: int = -1, api_version: int = -1, correlation_id: int | None = None,
                 file: str | None = None, position: int | None = 0) -> None:
        super().__init__(reason, file=file, position=position)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id

    def __reduce__(self):
        return (type(self), (self.reason,), dict(self.__dict__))


class ApiKey(IntEnum):
    """Kafka's API keys (``ApiKeys.java``) for the APIs implemented here."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    INIT_PRODUCER_ID = 22


class ErrorCode(IntEnum):
    """The error codes kafkalog's broker answers with (Kafka's ``Errors.java``)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    COORDINATOR_NOT_AVAILABLE = 15
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    INVALID_REQUIRED_ACKS = 21
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    KAFKA_STORAGE_ERROR = 56
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    INVALID_RECORD = 87


# -- primitive types ------------------------------------------------------------------------------

_INT32_MAX = 2**31 - 1
_INT32_MIN = -(2**31)
_UVARINT_MAX = 2**32 - 1
_STRING_MAX = 0x7FFF  # Kafka: a string field holds at most Short.MAX_VALUE bytes


class _Prim:
    """A fixed-size or length-prefixed primitive type."""

    __slots__ = ("name", "fmt", "min_size", "compact_min_size", "zero")

    def __init__(self, name: str, fmt: struct.Struct | None, min_size: int, compact_min_size: int, zero: Any) -> None:
        self.name = name
        self.fmt = fmt
        self.min_size = min_size
        self.compact_min_size = compact_min_size
        self.zero = zero

    def __repr__(self) -> str:
        return self.name.upper()


INT8 = _Prim("int8", struct.Struct(">b"), 1, 1, 0)
INT16 = _Prim("int16", struct.Struct(">h"), 2, 2, 0)
INT32 = _Prim("int32", struct.Struct(">i"), 4, 4, 0)
INT64 = _Prim("int64", struct.Struct(">q"), 8, 8, 0)
BOOL = _Prim("bool", None, 1, 1, False)
STRING = _Prim("string", None, 2, 1, "")
BYTES = _Prim("bytes", None, 4, 1, b"")
#: A Kafka ``records`` field: bytes on the wire; decoded as a memoryview of the frame, encoded
#: from bytes, a file slice (anything with ``size_in_bytes``, sent separately) or a list of them.
RECORDS = _Prim("records", None, 4, 1, b"")

_I16 = INT16.fmt
_I32 = INT32.fmt
_INTS = (INT8, INT16, INT32, INT64)


def _versions(spec: str) -> tuple[int, int]:
    """Kafka's version range notation: ``"3+"``, ``"8-10"``, ``"0"``, ``"none"``."""
    if spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), 2**15)
    if "-" in spec:
        low, high = spec.split("-")
        return (int(low), int(high))
    return (int(spec), int(spec))


@dataclass(frozen=True, eq=False)
class Field:
    """One field of a schema: its name, type, the versions it exists in, the versions it may be
    null in, and its default (used when a version lacks it or an encoder is not given it)."""

    name: str
    type: Any  # a primitive, an Array or a Struct
    versions: tuple[int, int] = (0, 2**15)
    nullable: tuple[int, int] = (1, 0)
    default: Any = None

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable_in(self, version: int) -> bool:
        return self.nullable[0] <= version <= self.nullable[1]

    def default_value(self) -> Any:
        if isinstance(self.default, list):
            return list(self.default)
        return self.default


@dataclass(frozen=True, eq=False)
class Array:
    """An array of a primitive type or of a :class:`Struct`."""

    element: Any


@dataclass(frozen=True, eq=False)
class Struct:
    """A sequence of fields (a message body or an array element)."""

    fields: tuple[Field, ...]

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


_NO_DEFAULT = object()


def _f(name: str, type_: Any, versions: str = "0+", *, nullable: str = "none", default: Any = _NO_DEFAULT) -> Field:
    if isinstance(type_, list):  # an array of structs, written inline
        type_ = Array(Struct(tuple(type_)))
    if default is _NO_DEFAULT:
        if isinstance(type_, Array):
            default = []
        elif isinstance(type_, _Prim):
            default = type_.zero
        else:
            default = None
    return Field(name, type_, _versions(versions), _versions(nullable), default)


def _struct(*fields: Field) -> Struct:
    return Struct(tuple(fields))


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
        _f("topic_authorized_operations", INT32, "8+", default=_INT32_MIN),
    ]),
    _f("cluster_authorized_operations", INT32, "8-10", default=_INT32_MIN),
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

FIND_COORDINATOR_REQUEST = _struct(
    _f("key", STRING, "0-3"),
    _f("key_type", INT8, "1+"),
)
FIND_COORDINATOR_RESPONSE = _struct(
    _f("throttle_time_ms", INT32, "1+"),
    _f("error_code", INT16, "0-3"),
    _f("error_message", STRING, "1-3", nullable="1-3", default=None),
    _f("node_id", INT32, "0-3"),
    _f("host", STRING, "0-3"),
    _f("port", INT32, "0-3"),
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

FETCH_REQUEST = _struct(
    _f("replica_id", INT32, "0-14", default=-1),
    _f("max_wait_ms", INT32),
    _f("min_bytes", INT32),
    _f("max_bytes", INT32, "3+", default=_INT32_MAX),
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
            _f("preferred_read_replica", INT32, "11+", default=-1),
            _f("records", RECORDS, nullable="0+"),
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
    _plans: dict = field(default_factory=dict, compare=False, repr=False)

    def flexible(self, version: int) -> bool:
        return version >= self.first_flexible


#: The APIs and versions implemented (and advertised by the broker), with Kafka's first
#: flexible version of each (which decides the header versions).
APIS: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in (
        ApiSpec(ApiKey.PRODUCE, 3, 8, 9, PRODUCE_REQUEST, PRODUCE_RESPONSE),
        ApiSpec(ApiKey.FETCH, 4, 11, 12, FETCH_REQUEST, FETCH_RESPONSE),
        ApiSpec(ApiKey.LIST_OFFSETS, 1, 5, 6, LIST_OFFSETS_REQUEST, LIST_OFFSETS_RESPONSE),
        ApiSpec(ApiKey.METADATA, 0, 8, 9, METADATA_REQUEST, METADATA_RESPONSE),
        ApiSpec(ApiKey.FIND_COORDINATOR, 0, 2, 3, FIND_COORDINATOR_REQUEST, FIND_COORDINATOR_RESPONSE),
        ApiSpec(ApiKey.API_VERSIONS, 0, 3, 3, API_VERSIONS_REQUEST, API_VERSIONS_RESPONSE),
        ApiSpec(ApiKey.CREATE_TOPICS, 0, 4, 5, CREATE_TOPICS_REQUEST, CREATE_TOPICS_RESPONSE),
        ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 1, 2, INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE),
    )
}


def supported_api_versions() -> list[dict[str, int]]:
    """The ``api_keys`` of an ApiVersions response: every API with its version range."""
    return [{"api_key": int(s.key), "min_version": s.min_version, "max_version": s.max_version} for s in APIS.values()]


def request_header_version(api_key: int, api_version: int) -> int:
    """Kafka's ``ApiKeys.requestHeaderVersion``: 2 for flexible versions, else 1. For
    ApiVersions this holds for any version, supported or not (a client always sends its newest)."""
    spec = APIS.get(api_key)
    if spec is None:
        raise KeyError(api_key)
    return 2 if spec.flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Kafka's ``ApiKeys.responseHeaderVersion``: 1 for flexible versions, else 0, and always 0
    for ApiVersions (a client must read it before it knows which versions the broker has)."""
    spec = APIS[api_key]
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if spec.flexible(api_version) else 0


# -- decoding -------------------------------------------------------------------------------------


class _Reader:
    """A bounds-checked cursor over a frame."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: memoryview, pos: int, end: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end

    def error(self, reason: str, position: int | None = None) -> ProtocolError:
        return ProtocolError(reason, position=self.pos if position is None else position)

    def need(self, n: int, what: str) -> None:
        if self.end - self.pos < n:
            raise self.error(f"{what}: {n} bytes needed, {self.end - self.pos} left in the frame")

    def fixed(self, fmt: struct.Struct, what: str) -> int:
        self.need(fmt.size, what)
        (value,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return value

    def uvarint(self, what: str) -> int:
        value = shift = 0
        start = self.pos
        for _ in range(5):
            self.need(1, what)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                if value > _UVARINT_MAX:
                    raise self.error(f"{what}: unsigned varint {value} does not fit 32 bits", start)
                return value
            shift += 7
        raise self.error(f"{what}: unsigned varint longer than 5 bytes", start)

    def take(self, n: int, what: str) -> memoryview:
        self.need(n, what)
        view = self.buf[self.pos:self.pos + n]
        self.pos += n
        return view

    def string(self, nullable: bool, compact: bool, what: str) -> str | None:
        start = self.pos
        if compact:
            n = self.uvarint(what) - 1
            if n > _STRING_MAX:
                raise self.error(f"{what}: string length {n} above {_STRING_MAX}", start)
        else:
            n = self.fixed(_I16, what)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.error(f"{what}: invalid string length {n}" + (" (null in a non-nullable field)" if n == -1 else ""),
                             start)
        return str(self.take(n, what), "utf-8", "replace")

    def bytes_(self, nullable: bool, compact: bool, what: str) -> memoryview | None:
        start = self.pos
        n = self.uvarint(what) - 1 if compact else self.fixed(_I32, what)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.error(f"{what}: invalid length {n}", start)
        return self.take(n, what)

    def count(self, nullable: bool, compact: bool, min_size: int, what: str) -> int | None:
        start = self.pos
        n = self.uvarint(what) - 1 if compact else self.fixed(_I32, what)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.error(f"{what}: invalid array length {n}", start)
        # Never trust a count beyond what the remaining bytes could hold.
        if n * min_size > self.end - self.pos:
            raise self.error(
                f"{what}: array of {n} elements (at least {min_size} bytes each) but {self.end - self.pos} "
                "bytes left in the frame", start
            )
        return n

    def tagged_fields(self, what: str) -> dict[int, bytes]:
        n = self.uvarint(f"{what} tagged field count")
        tags: dict[int, bytes] = {}
        previous = -1
        for _ in range(n):
            start = self.pos
            tag = self.uvarint(f"{what} tag")
            if tag <= previous:
                raise self.error(f"{what}: tag {tag} out of order (after {previous})", start)
            previous = tag
            size = self.uvarint(f"{what} tag {tag} size")
            tags[tag] = bytes(self.take(size, f"{what} tag {tag}"))
        return tags


def _min_size(type_: Any, version: int, compact: bool) -> int:
    if isinstance(type_, _Prim):
        return type_.compact_min_size if compact else type_.min_size
    if isinstance(type_, Array):
        return 1 if compact else 4
    size = sum(_min_size(f.type, version, compact) for f in type_.fields if f.present(version))
    return size + (1 if compact else 0)


def _decode_value(r: _Reader, type_: Any, nullable: bool, version: int, compact: bool, what: str) -> Any:
    if type_ in _INTS:
        return r.fixed(type_.fmt, what)
    if type_ is BOOL:
        r.need(1, what)
        value = r.buf[r.pos] != 0
        r.pos += 1
        return value
    if type_ is STRING:
        return r.string(nullable, compact, what)
    if type_ is BYTES:
        view = r.bytes_(nullable, compact, what)
        return None if view is None else bytes(view)
    if type_ is RECORDS:
        return r.bytes_(nullable, compact, what)
    if isinstance(type_, Array):
        element = type_.element
        n = r.count(nullable, compact, _min_size(element, version, compact), what)
        if n is None:
            return None
        return [_decode_value(r, element, False, version, compact, f"{what}[{i}]") for i in range(n)]
    return _decode_struct(r, type_, version, compact, what)


def _decode_struct(r: _Reader, struct_: Struct, version: int, compact: bool, what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in struct_.fields:
        if f.present(version):
            out[f.name] = _decode_value(r, f.type, f.nullable_in(version), version, compact, f"{what}.{f.name}")
        else:
            out[f.name] = f.default_value()
    if compact:
        tags = r.tagged_fields(what)
        if tags:
            out["_tagged_fields"] = tags
    return out


def _spec(api_key: int, version: int, *, correlation_id: int | None = None) -> ApiSpec:
    spec = APIS.get(api_key)
    if spec is None:
        raise UnsupportedApiError(f"unknown API key {api_key}", api_key=api_key, api_version=version,
                                  correlation_id=correlation_id)
    if not spec.min_version <= version <= spec.max_version:
        raise UnsupportedApiError(
            f"{spec.key.name} version {version} is not supported (versions {spec.min_version}-{spec.max_version})",
            api_key=api_key, api_version=version, correlation_id=correlation_id,
        )
    return spec


def decode_body(api_key: int, version: int, data: bytes | bytearray | memoryview, *, response: bool = False,
                offset: int = 0) -> dict[str, Any]:
    """Decode a request (or with ``response`` a response) body of ``api_key`` at ``version``
    from ``data[offset:]``; bytes after the body are ignored, as Kafka ignores them.

    Raises:
        UnsupportedApiError: an API or version not implemented here.
        ProtocolError: the bytes do not hold a well-formed body.
    """
    spec = _spec(api_key, version)
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" else data
    r = _Reader(view, offset, len(view))
    schema = spec.response if response else spec.request
    return _decode_struct(r, schema, version, spec.flexible(version), spec.key.name)


class Request(NamedTuple):
    """A decoded request frame.

    Attributes:
        api_key, api_version, correlation_id, client_id: the header (a null client id reads as
            "", as Kafka reads it).
        body: the decoded body, or None for an ApiVersions request of a version above the
            newest served (Kafka answers those in the v0 layout without reading the body).
        header_size: bytes of the header.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: dict[str, Any] | None
    header_size: int

    @property
    def unsupported_api_versions(self) -> bool:
        """An ApiVersions request above the newest version served (KIP-511)."""
        return self.body is None


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode a request frame (without its 4-byte size prefix): header, then body.

    Raises:
        UnsupportedApiError: an unknown API key, or a version not served (except ApiVersions,
            whose unsupported versions decode with ``body=None``).
        ProtocolError: a malformed header or body.
    """
    view = memoryview(frame).cast("B") if not isinstance(frame, memoryview) or frame.format != "B" else frame
    r = _Reader(view, 0, len(view))
    api_key = r.fixed(_I16, "request header api_key")
    api_version = r.fixed(_I16, "request header api_version")
    correlation_id = r.fixed(_I32, "request header correlation_id")
    spec = APIS.get(api_key)
    if spec is None:
        raise UnsupportedApiError(f"unknown API key {api_key}", api_key=api_key, api_version=api_version,
                                  correlation_id=correlation_id)
    # The client id keeps its int16 length even in header v2 (older brokers must read it).
    client_id = r.string(True, False, "request header client_id")
    if spec.flexible(api_version):
        r.tagged_fields("request header")
    header_size = r.pos
    if api_key == ApiKey.API_VERSIONS and not spec.min_version <= api_version <= spec.max_version:
        return Request(api_key, api_version, correlation_id, client_id or "", None, header_size)
    _spec(api_key, api_version, correlation_id=correlation_id)
    body = _decode_struct(r, spec.request, api_version, spec.flexible(api_version), spec.key.name)
    return Request(api_key, api_version, correlation_id, client_id or "", body, header_size)


def decode_response(api_key: int, version: int, frame: bytes | bytearray | memoryview) -> tuple[int, dict[str, Any]]:
    """Decode a response frame (without its size prefix): ``(correlation_id, body)``.

    Raises:
        UnsupportedApiError, ProtocolError: as :func:`decode_body`.
    """
    spec = _spec(api_key, version)
    view = memoryview(frame).cast("B") if not isinstance(frame, memoryview) or frame.format != "B" else frame
    r = _Reader(view, 0, len(view))
    correlation_id = r.fixed(_I32, "response header correlation_id")
    if response_header_version(api_key, version) >= 1:
        r.tagged_fields("response header")
    return correlation_id, _decode_struct(r, spec.response, version, spec.flexible(version), spec.key.name)


# -- encoding -------------------------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _Writer:
    """Builds a frame as byte chunks and out-of-line record parts (file slices)."""

    __slots__ = ("buf", "parts", "size")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[Any] = []
        self.size = 0  # bytes in the finished parts

    def external(self, part: Any, size: int) -> None:
        if self.buf:
            self.size += len(self.buf)
            self.parts.append(bytes(self.buf))
            self.buf = bytearray()
        self.parts.append(part)
        self.size += size

    def finish(self) -> tuple[list[Any], int]:
        if self.buf:
            self.size += len(self.buf)
            self.parts.append(bytes(self.buf))
            self.buf = bytearray()
        return self.parts, self.size


def _is_bytes_like(value: Any) -> bool:
    return isinstance(value, (bytes, bytearray, memoryview))


def _records_size(value: Any) -> int:
    if _is_bytes_like(value):
        return memoryview(value).nbytes
    if isinstance(value, (list, tuple)):
        return sum(_records_size(v) for v in value)
    return int(value.size_in_bytes)


def _write_records(w: _Writer, value: Any) -> None:
    if _is_bytes_like(value):
        w.buf += value
    elif isinstance(value, (list, tuple)):
        for part in value:
            _write_records(w, part)
    else:
        size = int(value.size_in_bytes)
        if size:
            w.external(value, size)


def _encode_length(w: _Writer, n: int, compact: bool, int16: bool = False) -> None:
    if compact:
        w.buf += _uvarint(n + 1)
    elif int16:
        w.buf += _I16.pack(n)
    else:
        w.buf += _I32.pack(n)


def _encode_value(w: _Writer, type_: Any, value: Any, nullable: bool, version: int, compact: bool, what: str) -> None:
    if type_ in _INTS:
        try:
            w.buf += type_.fmt.pack(value)
        except struct.error as e:
            raise ProtocolError(f"{what}: {value!r} is not a valid {type_.name} ({e})") from None
        return
    if type_ is BOOL:
        w.buf.append(1 if value else 0)
        return
    if value is None:
        if not nullable:
            raise ProtocolError(f"{what}: null in a non-nullable field (version {version})")
        _encode_length(w, -1, compact, int16=type_ is STRING)
        return
    if type_ is STRING:
        data = value.encode("utf-8")
        if len(data) > _STRING_MAX:
            raise ProtocolError(f"{what}: string of {len(data)} bytes above {_STRING_MAX}")
        _encode_length(w, len(data), compact, int16=True)
        w.buf += data
    elif type_ is BYTES:
        _encode_length(w, len(value), compact)
        w.buf += value
    elif type_ is RECORDS:
        _encode_length(w, _records_size(value), compact)
        _write_records(w, value)
    elif isinstance(type_, Array):
        _encode_length(w, len(value), compact)
        for i, element in enumerate(value):
            _encode_value(w, type_.element, element, False, version, compact, f"{what}[{i}]")
    else:
        _encode_struct(w, type_, value, version, compact, what)


def _encode_struct(w: _Writer, struct_: Struct, value: dict[str, Any], version: int, compact: bool, what: str) -> None:
    for f in struct_.fields:
        if f.present(version):
            v = value.get(f.name, f.default) if isinstance(value, dict) else getattr(value, f.name)
            _encode_value(w, f.type, v, f.nullable_in(version), version, compact, f"{what}.{f.name}")
    if compact:
        tags = value.get("_tagged_fields") or {}
        w.buf += _uvarint(len(tags))
        for tag in sorted(tags):
            data = tags[tag]
            w.buf += _uvarint(tag) + _uvarint(len(data))
            w.buf += data


def encode_body(api_key: int, version: int, body: dict[str, Any], *, response: bool = False) -> bytes:
    """Encode a request (or response) body; file-slice records are read into the result.

    Raises:
        UnsupportedApiError: an API or version not implemented here.
        ProtocolError: a value that does not fit its field.
    """
    spec = _spec(api_key, version)
    w = _Writer()
    _encode_struct(w, spec.response if response else spec.request, body, version, spec.flexible(version),
                   spec.key.name)
    return _join(*w.finish())


def encode_request(api_key: int, version: int, correlation_id: int, body: dict[str, Any], *,
                   client_id: str | None = "kafkalog") -> bytes:
    """A whole request frame, size prefix included (for clients, tests and benchmarks)."""
    spec = _spec(api_key, version)
    w = _Writer()
    w.buf += b"\0\0\0\0"
    w.buf += struct.pack(">hhi", api_key, version, correlation_id)
    _encode_value(w, STRING, client_id, True, 1, False, "request header client_id")
    if request_header_version(api_key, version) >= 2:
        w.buf.append(0)  # no tagged fields
    _encode_struct(w, spec.request, body, version, spec.flexible(version), spec.key.name)
    frame = bytearray(_join(*w.finish()))
    _I32.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)


def _join(parts: list[Any], size: int) -> bytes:
    out = bytearray()
    for part in parts:
        out += part if _is_bytes_like(part) else _read_part(part)
    return bytes(out)


def _read_part(part: Any) -> bytes:
    fd, start, size = part.fileno(), part.start, part.size_in_bytes
    chunks = []
    got = 0
    while got < size:
        data = os.pread(fd, size - got, start + got)
        if not data:
            raise ProtocolError(f"file slice {part!r} ended after {got} of {size} bytes")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


@dataclass
class ResponseFrame:
    """An encoded response: ``parts`` are byte chunks and file slices (objects with ``fileno()``,
    ``start`` and ``size_in_bytes``) to send in order; ``size`` counts every byte including the
    4-byte size prefix at the start of the first chunk."""

    parts: list[Any]
    size: int

    @property
    def file_bytes(self) -> int:
        """Bytes carried by file slices (sent with sendfile)."""
        return sum(p.size_in_bytes for p in self.parts if not _is_bytes_like(p))

    def to_bytes(self) -> bytes:
        """The whole frame in memory (file slices read with ``pread``)."""
        return _join(self.parts, self.size)


def encode_response(api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> ResponseFrame:
    """A response frame, size prefix included; ``records`` fields given as file slices stay
    out of line in :attr:`ResponseFrame.parts` so they can be sent with sendfile.

    Raises:
        UnsupportedApiError: an API or version not implemented here.
        ProtocolError: a value that does not fit its field.
    """
    spec = _spec(api_key, version)
    w = _Writer()
    w.buf += b"\0\0\0\0"
    w.buf += _I32.pack(correlation_id)
    if response_header_version(api_key, version) >= 1:
        w.buf.append(0)
    _encode_struct(w, spec.response, body, version, spec.flexible(version), spec.key.name)
    parts, size = w.finish()
    first = bytearray(parts[0])
    _I32.pack_into(first, 0, size - 4)
    parts[0] = bytes(first)
    return ResponseFrame(parts, size)


def iter_fields(struct_: Struct, version: int) -> Iterable[Field]:
    """The fields of ``struct_`` present at ``version`` (for tests and tools)."""
    return [f for f in struct_.fields if f.present(version)]
