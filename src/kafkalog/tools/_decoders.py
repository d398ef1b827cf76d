"""Key and value parsers for ``kafkalog dump`` (DumpLogSegments' MessageParser implementations)."""

from __future__ import annotations

import base64
import json
import math
import struct
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
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
    Message,
    MessageReader,
    ProtocolError,
    coordinator_record_schemas,
    read_message,
    to_json,
)
from ..errors import SchemaError
from ..remote import Storage
from ..schema_registry import SchemaStore, make_decoder, open_schema_store, to_json as schema_to_json
from ..schema_registry.store import SCHEMAS_TOPIC
from ..schema_registry.wire import is_framed, unframe
from ._jvm import _jackson, _scala_topic_partition_set

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
            key_reader = MessageReader(record.key)
            if key_reader.remaining < _VERSION.size:
                raise _ReadError("Could not read version from key's buffer.")
            record_type = key_reader.fixed(_VERSION, "record type")
            messages = coordinator_record_schemas(record_type)
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
            r = MessageReader(record.key)
            version = r.fixed(_VERSION, "version")
            if not TRANSACTION_LOG_KEY.has_version(version):
                text = f"unknown::version={version}"
                return _Parsed(_Datum(text, {"unknownKeyVersion": version}), None)
            txn_id = read_message(TRANSACTION_LOG_KEY, r, version)["transactionalId"]
            key = _Datum(f"transaction_metadata::transactionalId={txn_id}", {"transactionalId": txn_id})
            if record.value is None:
                return _Parsed(key, _Datum("<DELETE>", None))
            return _Parsed(key, self._value(record.value))
        except _ReadError as e:
            return _failure(record, str(e), kafka_fails=True)

    @staticmethod
    def _value(data: bytes) -> _Datum:
        r = MessageReader(data)
        version = r.fixed(_VERSION, "version")
        if not TRANSACTION_LOG_VALUE.has_version(version):
            raise _ReadError(f"Unknown version {version} from the transaction log message value")
        v = read_message(TRANSACTION_LOG_VALUE, r, version)
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


# -- KRaft metadata records -----------------------------------------------------------------------

#: ``AbstractApiMessageSerde.unsignedIntToShort``: frame version, type and version are unsigned
#: varints that must fit a Java short.
_SHORT_MAX = 2**15 - 1
_DOUBLE = struct.Struct(">d")
_INT64 = struct.Struct(">q")


class _ClusterMetadataParser:
    """``ClusterMetadataLogMessageParser``: a ``__cluster_metadata`` record's value (framed by
    ``MetadataRecordSerde``) as ``{"type":..,"version":..,"data":..}``; metadata records have no key."""

    def parse(self, record: Record) -> _Parsed:
        if record.value is None:
            return self._error(record, "the record has no value", "")
        try:
            r = MessageReader(record.value)
            frame = self._short(r, "frame version")
            if frame == 0:
                return self._error(
                    record,
                    "Could not deserialize metadata record with frame version 0. Note that upgrades from the "
                    "preview release of KRaft in 2.8 to newer versions are not supported.",
                    "",
                )
            if frame != METADATA_FRAME_VERSION:
                return self._error(
                    record,
                    f"Could not deserialize metadata record due to unknown frame version {frame}"
                    f"(only frame version {METADATA_FRAME_VERSION} is supported)",
                    "",
                )
            api_key = self._short(r, "type")
            version = self._short(r, "version")
        except _ReadError as e:
            return self._error(record, str(e), "")
        if api_key not in METADATA_RECORDS:
            return self._error(
                record, f"org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {api_key}", ""
            )
        type_name, message = METADATA_RECORDS[api_key]
        try:
            values = read_message(message, r, version)
        except _ReadError as e:
            return self._error(record, f"Failed to deserialize record with type {api_key}", str(e))
        if r.remaining > 0:
            return self._error(record, f"Found {r.remaining} byte(s) of garbage after {api_key}", "")
        data = to_json(message, values, version)
        value = {"type": type_name, "version": version, "data": data}
        return _Parsed(None, _Datum(_java_json(value), _json_safe(value)))

    @staticmethod
    def _short(r: MessageReader, entity: str) -> int:
        try:
            value = r.uvarint(entity)
        except _ReadError:
            raise _ReadError(f"Error while reading {entity}") from None
        if value > _SHORT_MAX:
            raise _ReadError(f"Value for {entity} was too large.")
        return value

    @staticmethod
    def _error(record: Record, message: str, detail: str) -> _Parsed:
        """Kafka prints the error in place of the payload and goes on; ``--json`` adds the detail."""
        text = f"Error at {record.offset}, skipping. {message}"
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
