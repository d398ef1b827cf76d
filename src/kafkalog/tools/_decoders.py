"""Key and value parsers for ``kafkalog dump`` (DumpLogSegments' MessageParser implementations)."""

from __future__ import annotations

import base64
import json
import math
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable
from decimal import Decimal
from typing import Any, NamedTuple

from .. import Record
from ..protocol import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    GROUP_METADATA_VALUE,
    INT16,
    METADATA_FRAME_VERSION,
    METADATA_RECORDS,
    REMOTE_LOG_METADATA_RECORDS,
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
    Message,
    MessageReader,
    ProtocolError,
    coordinator_record_schemas,
    read_message,
    share_coordinator_record_schemas,
    to_json,
)
from ..errors import SchemaError
from ..remote import Storage
from ..schema_registry import SchemaStore, make_decoder, open_schema_store, to_json as schema_to_json
from ..schema_registry.store import SCHEMAS_TOPIC
from ..schema_registry.wire import is_framed, unframe
from ._jvm import _jackson

#: A message's version, read before it (an int16, as Kafka's serdes read it).
_VERSION = INT16.fmt
#: Raised where Kafka's tool would throw; its message is what the dump shows.
_ReadError = ProtocolError

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
    if is_framed(data):  # Schema Registry's JSON Schema serializer: cut the magic byte and id
        data = bytes(unframe(data).payload)
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
#: The shorthands that decode with Schema Registry's schemas (``--schema-registry``).
_SCHEMA_DECODERS = ("avro", "protobuf", "registry")


class _SchemaDecoder:
    """A key or value decoded with its schema (:mod:`kafkalog.schema_registry`): the text is its
    compact JSON, the ``--json`` value the JSON object."""

    def __init__(self, fmt: str, store: SchemaStore) -> None:
        self._decoder = make_decoder(fmt, store)

    def __call__(self, data: bytes) -> _Datum:
        try:
            text = schema_to_json(self._decoder.decode(data))
        except SchemaError as e:
            raise _SchemaFailure(str(e)) from None
        return _Datum(text, json.loads(text))


class _SchemaFailure(Exception):
    """A record whose key or value does not decode with its schema (reported, the dump goes on)."""


def _schema_store(location: str | None, files: list[str]) -> SchemaStore:
    """The store ``--schema-registry`` names, else the ``_schemas-0`` partition of the first
    file's log directory."""
    if location is None:
        first = files[0]
        location = Storage.join(Storage.dirname(Storage.dirname(first)), f"{SCHEMAS_TOPIC}-0")
    return open_schema_store(location)


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
        except _SchemaFailure as e:  # the dump goes on; the exit status says a record failed
            return _failure(record, str(e), kafka_fails=True)
        return _Parsed(key, value)


class _CoordinatorParser(ABC):
    """``CoordinatorRecordMessageParser``: a coordinator's records as Kafka's JSON
    (``{"type":..,"data":..}`` keys, ``{"version":..,"data":..}`` values, ``<DELETE>`` for
    tombstones), the schemas found by record type (the key's version)."""

    #: The decoder named when a record has no key (Kafka's tool then stops).
    decoder = ""

    @staticmethod
    @abstractmethod
    def schemas(record_type: int) -> tuple[Message, Message] | None:
        """The (key, value) schemas of ``record_type``; None for a type the topic does not know."""

    def parse(self, record: Record) -> _Parsed:
        if record.key is None:
            return _failure(
                record,
                f"Failed to decode message at offset {record.offset} using {self.decoder} "
                "(message had a missing key)",
                kafka_fails=True,
            )
        try:
            key_reader = MessageReader(record.key)
            if key_reader.remaining < _VERSION.size:
                raise _ReadError("Could not read version from key's buffer.")
            record_type = key_reader.fixed(_VERSION, "record type")
            messages = self.schemas(record_type)
            if messages is None:
                text = f"Unknown record type {record_type} at offset {record.offset}, skipping."
                return _Parsed(_Datum(text, None), None, text)
            key_message, value_message = messages
            key_fields = self._read(key_message, key_reader, record_type, "key")
            key_json = {"type": str(record_type), "data": to_json(key_message, key_fields, record_type)}
            if record.value is None:
                return _Parsed(_Datum(_jackson(key_json), key_json), _Datum("<DELETE>", None))
            value_reader = MessageReader(record.value)
            if value_reader.remaining < _VERSION.size:
                raise _ReadError("Could not read version from value's buffer.")
            version = value_reader.fixed(_VERSION, "version")
            values = self._read(value_message, value_reader, version, "value")
            data = to_json(value_message, values, version)
            if value_message is GROUP_METADATA_VALUE:
                _expand_consumer_protocol(data)
            value_json = {"version": str(version), "data": data}
        except _ReadError as e:
            return _failure(record, str(e), kafka_fails=False)
        return _Parsed(_Datum(_jackson(key_json), key_json), _Datum(_jackson(value_json), value_json))

    @staticmethod
    def _read(message: Message, reader: MessageReader, version: int, what: str) -> dict[str, Any]:
        try:
            return read_message(message, reader, version)
        except _ReadError as e:
            raise _ReadError(
                f"Could not read record with version {version} from {what}'s buffer due to: {e}."
            ) from None


class _OffsetsParser(_CoordinatorParser):
    """``OffsetsMessageParser``: ``__consumer_offsets`` (the group coordinator's records, Kafka
    4.0's classic, consumer and share group records), a classic consumer group's members'
    subscription and assignment bytes decoded."""

    decoder = "offset topic decoder"
    schemas = staticmethod(coordinator_record_schemas)


class _ShareGroupStateParser(_CoordinatorParser):
    """``ShareGroupStateMessageParser``: ``__share_group_state`` (KIP-932, the share
    coordinator's snapshot and update records)."""

    decoder = "share group state topic decoder"
    schemas = staticmethod(share_coordinator_record_schemas)


def _expand_consumer_protocol(data: dict[str, Any]) -> None:
    """For a "consumer" group, replace each member's subscription and assignment bytes by their
    decoded form, keeping the bytes when they do not decode (as Kafka does)."""
    if data.get("protocolType") != "consumer":
        return
    for member in data.get("members") or ():
        for field, message in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION),
                               ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
            encoded = member.get(field)
            if encoded is None:
                continue
            try:
                r = MessageReader(base64.b64decode(encoded))
                version = r.fixed(_VERSION, "version")
                values = read_message(message, r, version)
                member[field] = to_json(message, values, version)
            except _ReadError:
                pass


#: ``__transaction_state``'s only record type (``TransactionCoordinatorRecordSerde``): the key's
#: version 0, a TransactionLogKey.
_TRANSACTION_LOG_TYPE = 0


def _transaction_log_schemas(record_type: int) -> tuple[Message, Message] | None:
    return (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE) if record_type == _TRANSACTION_LOG_TYPE else None


class _TransactionLogParser(_CoordinatorParser):
    """``TransactionLogMessageParser`` of Kafka 4 (``TransactionCoordinatorRecordSerde``, KAFKA-18207):
    ``__transaction_state`` records as Kafka's JSON like the other coordinators' (a
    ``TransactionLogValue`` of version 1 with KIP-890's tagged fields when they are set). The
    missing-key message is the one Kafka 4's Java tool words for every coordinator decoder."""

    decoder = "the specified decoder"
    schemas = staticmethod(_transaction_log_schemas)


# -- KRaft metadata records -----------------------------------------------------------------------

#: ``AbstractApiMessageSerde.unsignedIntToShort``: frame version, type and version are unsigned
#: varints that must fit a Java short.
_SHORT_MAX = 2**15 - 1
_DOUBLE = struct.Struct(">d")
_INT64 = struct.Struct(">q")


class _FrameError(Exception):
    """A framed record that ``AbstractApiMessageSerde.read`` rejects: its message, and the
    cause's message (``--json`` shows it)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message, self.detail = message, detail


def _short(r: MessageReader, entity: str) -> int:
    """``AbstractApiMessageSerde.unsignedIntToShort``."""
    try:
        value = r.uvarint(entity)
    except _ReadError:
        raise _FrameError(f"Error while reading {entity}") from None
    if value > _SHORT_MAX:
        raise _FrameError(f"Value for {entity} was too large.")
    return value


def _read_framed(data: bytes, records: dict[int, tuple[str, Message]]) -> tuple[int, str, int, Message, dict]:
    """``AbstractApiMessageSerde.read``: frame version 1, api key, version (unsigned varints),
    then the message of that api key in ``records``, with no byte left over.

    Returns:
        (api key, the record's name in ``records``, version, message, fields).

    Raises:
        _FrameError: with Kafka's ``MetadataParseException`` message.
    """
    r = MessageReader(data)
    frame = _short(r, "frame version")
    if frame == 0:
        raise _FrameError(
            "Could not deserialize metadata record with frame version 0. Note that upgrades from the "
            "preview release of KRaft in 2.8 to newer versions are not supported."
        )
    if frame != METADATA_FRAME_VERSION:
        raise _FrameError(
            f"Could not deserialize metadata record due to unknown frame version {frame}"
            f"(only frame version {METADATA_FRAME_VERSION} is supported)"
        )
    api_key = _short(r, "type")
    version = _short(r, "version")
    if api_key not in records:
        raise _FrameError(f"org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {api_key}")
    name, message = records[api_key]
    try:
        values = read_message(message, r, version)
    except _ReadError as e:
        raise _FrameError(f"Failed to deserialize record with type {api_key}", str(e)) from None
    if r.remaining > 0:
        raise _FrameError(f"Found {r.remaining} byte(s) of garbage after {api_key}")
    return api_key, name, version, message, values


class _ClusterMetadataParser:
    """``ClusterMetadataLogMessageParser``: a ``__cluster_metadata`` record's value (framed by
    ``MetadataRecordSerde``) as ``{"type":..,"version":..,"data":..}``; metadata records have no key."""

    def parse(self, record: Record) -> _Parsed:
        if record.value is None:
            return self._error(record, "the record has no value", "")
        try:
            _, type_name, version, message, values = _read_framed(record.value, METADATA_RECORDS)
        except _FrameError as e:
            return self._error(record, e.message, e.detail)
        data = to_json(message, values, version)
        value = {"type": type_name, "version": version, "data": data}
        return _Parsed(None, _Datum(_java_json(value), _json_safe(value)))

    @staticmethod
    def _error(record: Record, message: str, detail: str) -> _Parsed:
        """Kafka prints the error in place of the payload and goes on; ``--json`` adds the detail."""
        text = f"Error at {record.offset}, skipping. {message}"
        return _Parsed(None, _Datum(text, None), f"{text} ({detail})" if detail else text)


# -- __remote_log_metadata ------------------------------------------------------------------------

#: ``RemoteLogSegmentState`` and ``RemotePartitionDeleteState`` by id (``forId``; an unknown id
#: is null, which the Java constructors reject).
_SEGMENT_STATES = {0: "COPY_SEGMENT_STARTED", 1: "COPY_SEGMENT_FINISHED", 2: "DELETE_SEGMENT_STARTED",
                   3: "DELETE_SEGMENT_FINISHED"}
_PARTITION_DELETE_STATES = {0: "DELETE_PARTITION_MARKED", 1: "DELETE_PARTITION_STARTED",
                            2: "DELETE_PARTITION_FINISHED"}
#: What ``Objects.requireNonNull(state)`` throws has no message: Java prints "null".
_JAVA_NULL = "null"


def _topic_id_partition(tp: dict[str, Any]) -> str:
    """``TopicIdPartition.toString``: ``topicId:topic-partition``."""
    return f"{tp['id']}:{tp['name']}-{tp['partition']}"


def _segment_id(entry: dict[str, Any]) -> str:
    """``RemoteLogSegmentId.toString``."""
    return f"RemoteLogSegmentId{{topicIdPartition={_topic_id_partition(entry['topicIdPartition'])}, id={entry['id']}}}"


def _custom_metadata(data: bytes | memoryview | None) -> str:
    """``Optional<CustomMetadata>.toString``."""
    return "Optional.empty" if data is None else f"Optional[CustomMetadata{{{len(data)} bytes}}]"


def _leader_epochs(entries: list[dict[str, Any]]) -> str:
    """The segment's leader epochs as a Java ``TreeMap`` prints them (a later entry of the same
    epoch replaces an earlier one, as ``HashMap.put`` does)."""
    epochs = {e["leaderEpoch"]: e["offset"] for e in entries}
    if not epochs:
        raise _FrameError("segmentLeaderEpochs can not be null or empty")
    return "{" + ", ".join(f"{k}={epochs[k]}" for k in sorted(epochs)) + "}"


def _segment_state(value: int) -> str:
    if value not in _SEGMENT_STATES:
        raise _FrameError("state can not be null")
    return _SEGMENT_STATES[value]


def _remote_log_metadata_text(api_key: int, v: dict[str, Any]) -> str:
    """What ``RemoteLogMetadataSerde.deserialize(data).toString()`` prints, with the checks the
    Java constructors make, in their order.

    Raises:
        _FrameError: a constructor's exception message.
    """
    if api_key == 0:  # RemoteLogSegmentMetadataTransform: the metadata, then the update's state
        start, end = v["startOffset"], v["endOffset"]
        if start < 0:
            raise _FrameError(f"Unexpected start offset = {start}. StartOffset for a remote segment cannot be negative")
        if end < start:
            raise _FrameError(
                f"Unexpected end offset = {end}. EndOffset for a remote segment cannot be less than startOffset = {start}"
            )
        epochs = _leader_epochs(v["segmentLeaderEpochs"] or [])
        state = _segment_state(v["remoteLogSegmentState"])
        return (
            f"RemoteLogSegmentMetadata{{remoteLogSegmentId={_segment_id(v['remoteLogSegmentId'])}, "
            f"startOffset={start}, endOffset={end}, brokerId={v['brokerId']}, maxTimestampMs={v['maxTimestampMs']}, "
            f"eventTimestampMs={v['eventTimestampMs']}, segmentLeaderEpochs={epochs}, "
            f"segmentSizeInBytes={v['segmentSizeInBytes']}, customMetadata={_custom_metadata(v['customMetadata'])}, "
            f"state={state}}}"
        )
    if api_key == 1:
        state = _segment_state(v["remoteLogSegmentState"])
        return (
            f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={_segment_id(v['remoteLogSegmentId'])}, "
            f"customMetadata={_custom_metadata(v['customMetadata'])}, state={state}, "
            f"eventTimestampMs={v['eventTimestampMs']}, brokerId={v['brokerId']}}}"
        )
    if api_key == 2:
        state_id = v["remotePartitionDeleteState"]
        if state_id not in _PARTITION_DELETE_STATES:
            raise _FrameError(_JAVA_NULL)
        return (
            f"RemotePartitionDeleteMetadata{{topicPartition={_topic_id_partition(v['topicIdPartition'])}, "
            f"state={_PARTITION_DELETE_STATES[state_id]}, eventTimestampMs={v['eventTimestampMs']}, "
            f"brokerId={v['brokerId']}}}"
        )
    # 3: RemoteLogSegmentMetadataSnapshot (its constructor checks the state, then the epochs)
    state = _segment_state(v["remoteLogSegmentState"])
    epochs = _leader_epochs(v["segmentLeaderEpochs"] or [])
    return (
        f"RemoteLogSegmentMetadataSnapshot{{segmentId={v['segmentId']}, startOffset={v['startOffset']}, "
        f"endOffset={v['endOffset']}, maxTimestampMs={v['maxTimestampMs']}, segmentLeaderEpochs={epochs}, "
        f"segmentSizeInBytes={v['segmentSizeInBytes']}, customMetadata={_custom_metadata(v['customMetadata'])}, "
        f"state={state}}}"
    )


class _RemoteLogMetadataParser:
    """``RemoteMetadataLogMessageParser``: a ``__remote_log_metadata`` record's value (KIP-405,
    framed by ``RemoteLogMetadataSerde`` as KRaft records are) printed as the Java object's
    ``toString``; ``--json`` gives its class, version and fields. These records have no key."""

    def parse(self, record: Record) -> _Parsed:
        if record.value is None:  # record.value.remaining: a NullPointerException without message
            return self._error(record, _JAVA_NULL, "the record has no value")
        try:
            api_key, name, version, message, values = _read_framed(record.value, REMOTE_LOG_METADATA_RECORDS)
            text = _remote_log_metadata_text(api_key, values)
        except _FrameError as e:
            return self._error(record, e.message, e.detail)
        value = {"type": name, "version": version, "data": to_json(message, values, version)}
        return _Parsed(None, _Datum(text, value))

    @staticmethod
    def _error(record: Record, message: str, detail: str) -> _Parsed:
        text = f"Error at offset {record.offset}, skipping. {message}"
        return _Parsed(None, _Datum(text, None), f"{text} ({detail})" if detail else text)


def _java_double(value: float) -> str:
    """Java's ``Double.toString`` (what Jackson writes for a double): shortest digits, plain
    between 10^-3 and 10^7, else ``d.dddE±n``."""
    if math.isnan(value):
        return '"NaN"'  # Jackson quotes non-numeric numbers by default
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)  # the shortest digits that read back as the value, as Java's
        return text if "." in text else text + ".0"
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    power = len(digit_tuple) + int(exponent) - 1
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{power}"


def _java_json(value: object) -> str:
    """``JsonNode.toString()`` of a decoded metadata record: Jackson's text, with doubles as
    Java prints them."""
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_jackson(k)}:{_java_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_java_json(v) for v in value) + "]"
    return _jackson(value)


def _json_safe(value: object) -> object:
    """The record for ``--json``: non-finite doubles as the strings Jackson writes for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value
