"""Key and value formats of a read: ``binary`` (Spark's Kafka source), or decoded with
:mod:`kafkalog.schema_registry` (``string``, ``json``, ``avro``, ``protobuf``, ``registry``).

Options (Spark) and keyword arguments (the Python reader):

| option | keyword | meaning |
|---|---|---|
| ``keyFormat`` / ``valueFormat`` | ``key_format`` / ``value_format`` | ``binary`` (default), ``string``, ``json``, ``avro``, ``protobuf``, ``registry`` |
| ``schemaRegistry`` | ``schema_registry`` | a ``_schemas`` directory, a log directory holding ``_schemas-0``, or a registry URL (default: the ``_schemas-0`` partition of the log directory read) |
| ``keySubject`` / ``valueSubject`` | ``key_subject`` / ``value_subject`` | the subject whose schema types the column (default: ``<topic>-key`` / ``<topic>-value``, Schema Registry's TopicNameStrategy, when one topic is read) |
| ``keySchemaVersion`` / ``valueSchemaVersion`` | ``key_schema_version`` / ``value_schema_version`` | that subject's version (default: the latest) |

This module holds no pyarrow (the Python reader's ``read_records`` runs without it): the
options, the schema store and the decoders, kept once per process (Spark's Python workers
decode many batches with one store).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidConfigError, SchemaError
from ..filenames import PARTITION_DIR
from ..remote import Storage
from ..schema_registry import Decoder, SchemaStore, make_decoder, open_schema_store
from ..schema_registry.store import SCHEMAS_TOPIC

#: The formats a key or a value can be read in.
FORMATS = ("binary", "string", "json", "avro", "protobuf", "registry")
#: The formats whose column type comes from a schema.
SCHEMA_FORMATS = ("avro", "protobuf", "registry")
SIDES = ("key", "value")


@dataclass(frozen=True)
class FormatOptions:
    """How keys and values are decoded (picklable; parsed on the driver)."""

    key_format: str = "binary"
    value_format: str = "binary"
    registry: str | None = None
    key_subject: str | None = None
    value_subject: str | None = None
    key_version: int | None = None
    value_version: int | None = None
    storage_options: Any = None

    @property
    def active(self) -> bool:
        """Whether anything is decoded (else the rows are Spark's Kafka rows)."""
        return self.key_format != "binary" or self.value_format != "binary"

    def format(self, side: str) -> str:
        return self.key_format if side == "key" else self.value_format

    def subject(self, side: str, topic: str | None) -> str | None:
        """The subject typing ``side``: the one given, else TopicNameStrategy's for ``topic``."""
        given = self.key_subject if side == "key" else self.value_subject
        if given is not None:
            return given
        return None if topic is None else f"{topic}-{side}"

    def version(self, side: str) -> int | None:
        return self.key_version if side == "key" else self.value_version

    def needs_subject(self, side: str) -> bool:
        """Whether the column of ``side`` is typed by a subject's schema."""
        fmt = self.format(side)
        given = self.key_subject if side == "key" else self.value_subject
        return fmt in SCHEMA_FORMATS or (fmt == "json" and given is not None)

    @property
    def error_columns(self) -> list[str]:
        """The error columns appended to the rows: ``keyError``, ``valueError``."""
        return [f"{side}Error" for side in SIDES if self.format(side) != "binary"]


def _format(raw: Any, name: str) -> str:
    fmt = "binary" if raw is None else str(raw).strip().lower()
    if fmt not in FORMATS:
        raise InvalidConfigError(f"{name} must be one of {', '.join(FORMATS)}, not {raw!r}")
    return fmt


def _version(raw: Any, name: str) -> int | None:
    if raw is None or str(raw).strip().lower() == "latest":
        return None
    try:
        version = int(str(raw).strip())
    except ValueError:
        version = 0
    if version < 1:
        raise InvalidConfigError(f"{name} must be a version number (1, 2, ...) or latest, not {raw!r}")
    return version


def format_options(*, key_format: Any = None, value_format: Any = None, schema_registry: Any = None,
                   key_subject: Any = None, value_subject: Any = None, key_schema_version: Any = None,
                   value_schema_version: Any = None, storage_options: Any = None,
                   names: dict[str, str] | None = None) -> FormatOptions:
    """The checked options (``names``: how the caller spells each, for messages)."""
    n = names or {}
    return FormatOptions(
        key_format=_format(key_format, n.get("key_format", "key_format")),
        value_format=_format(value_format, n.get("value_format", "value_format")),
        registry=None if schema_registry is None else str(schema_registry),
        key_subject=None if key_subject is None else str(key_subject),
        value_subject=None if value_subject is None else str(value_subject),
        key_version=_version(key_schema_version, n.get("key_schema_version", "key_schema_version")),
        value_version=_version(value_schema_version, n.get("value_schema_version", "value_schema_version")),
        storage_options=storage_options,
    )


#: Spark's option names for :func:`format_options`' keywords.
SPARK_OPTIONS = {
    "key_format": "keyFormat",
    "value_format": "valueFormat",
    "schema_registry": "schemaRegistry",
    "key_subject": "keySubject",
    "value_subject": "valueSubject",
    "key_schema_version": "keySchemaVersion",
    "value_schema_version": "valueSchemaVersion",
}


def spark_format_options(options: Any, storage_options: Any = None) -> FormatOptions:
    """:class:`FormatOptions` from Spark's options (``valueFormat``, ...)."""
    return format_options(**{k: options.get(v) for k, v in SPARK_OPTIONS.items()},
                          storage_options=storage_options, names=SPARK_OPTIONS)


# -- the store and the decoders, once per process ---------------------------------------------------

_lock = threading.Lock()
_stores: dict[tuple[str, str], SchemaStore] = {}
_decoders: dict[tuple[Any, ...], Decoder] = {}


def _default_location(path: str) -> str:
    """The ``_schemas-0`` of the log directory ``path`` is (or, for a partition directory,
    is in)."""
    path = path.rstrip("/") or path
    if PARTITION_DIR.match(Storage.basename(path)) and not Storage.basename(path).startswith(SCHEMAS_TOPIC + "-"):
        return Storage.join(Storage.dirname(path), f"{SCHEMAS_TOPIC}-0")
    return path


def schema_store(options: FormatOptions, path: str) -> SchemaStore:
    """The store of ``options`` (``schemaRegistry``, else beside ``path``), opened once per
    process and location."""
    location = options.registry or _default_location(path)
    key = (location, json.dumps(options.storage_options, sort_keys=True, default=str))
    with _lock:
        store = _stores.get(key)
    if store is None:
        store = open_schema_store(location, storage_options=options.storage_options)
        with _lock:
            store = _stores.setdefault(key, store)
    return store


def decoder(options: FormatOptions, side: str, topic: str | None, path: str) -> Decoder | None:
    """The decoder of ``side`` for records of ``topic`` (None for ``binary``)."""
    fmt = options.format(side)
    if fmt == "binary":
        return None
    subject = options.subject(side, topic) if options.needs_subject(side) else None
    given = options.key_subject if side == "key" else options.value_subject
    if subject is not None and given is None and not schema_store(options, path).versions(subject):
        subject = None  # no <topic>-<side> subject (another naming strategy): each writer's schema
    where = options.registry or _default_location(path) if fmt in SCHEMA_FORMATS or subject else None
    key = (fmt, subject, options.version(side), where, json.dumps(options.storage_options, sort_keys=True, default=str))
    with _lock:
        found = _decoders.get(key)
    if found is not None:
        return found
    store = schema_store(options, path) if fmt in SCHEMA_FORMATS or subject is not None else None
    made = make_decoder(fmt, store, subject=subject, version=options.version(side))
    with _lock:
        return _decoders.setdefault(key, made)


def decode_value(dec: Decoder, data: bytes | None) -> tuple[Any, str | None]:
    """(the decoded object, None) or (None, the error's message)."""
    try:
        return dec.decode(data), None
    except SchemaError as e:
        return None, str(e)
