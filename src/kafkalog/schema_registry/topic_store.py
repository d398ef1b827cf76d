"""The schema store read offline from Schema Registry's ``_schemas`` topic.

Schema Registry keeps its state in one compacted partition (``kafkastore.topic``, default
``_schemas``) and rebuilds it at start by reading that partition from the beginning
(``KafkaStoreReaderThread``). We replay it the same way, read-only (the library's
:class:`~kafkalog.partition_view.PartitionView`: no lock, nothing written). Keys and values are
JSON (``SchemaRegistryKey`` / ``SchemaRegistryValue`` subclasses):

| ``keytype`` | key fields | value | effect (``KafkaStoreMessageHandler``, ``InMemoryCache``) |
|---|---|---|---|
| ``SCHEMA`` | ``subject``, ``version``, ``magic: 1`` | ``{subject, version, id, schema, schemaType, references, deleted}`` | registers the version; ``deleted: true`` soft-deletes it (still readable by id); a null value (tombstone) hard-deletes it |
| ``DELETE_SUBJECT`` | ``subject`` | ``{subject, version}`` | soft-deletes versions 1 to ``version`` |
| ``CLEAR_SUBJECT`` | ``subject`` | ``{subject}`` | forgets the subject's soft-deleted versions (a permanent delete) |
| ``CONFIG`` | ``subject`` (null: global) | ``{compatibilityLevel, ...}`` | compatibility; kept, not needed to decode |
| ``MODE`` | ``subject`` | ``{mode}`` | READWRITE/READONLY/IMPORT; kept |
| ``NOOP`` | | | a marker the registry writes to find the end of the log |

``schemaType`` absent means ``AVRO``. A record the registry could not deserialize (not JSON, an
unknown key type of a newer registry) is skipped, as ``KafkaStoreReaderThread`` skips it; the
count is kept in :attr:`TopicSchemaStore.skipped`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from ..errors import KafkalogError, SchemaError, UnknownSchemaError
from ..partition_view import OnCorruption, PartitionView
from ..remote import Storage
from .schema import AVRO, Schema, SchemaReference
from .store import SchemaStore

#: ``SchemaRegistryKeyType``.
SCHEMA, CONFIG, MODE, NOOP, DELETE_SUBJECT, CLEAR_SUBJECT = (
    "SCHEMA", "CONFIG", "MODE", "NOOP", "DELETE_SUBJECT", "CLEAR_SUBJECT")


def _json_object(data: bytes | None) -> dict[str, Any] | None:
    """``data`` parsed as a JSON object, or None (absent, not JSON, not an object)."""
    if data is None:
        return None
    try:
        obj = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def _schema_value(value: dict[str, Any], subject: str, version: int) -> Schema:
    """A ``SchemaValue`` JSON object as a :class:`Schema` (raises KeyError/TypeError/ValueError)."""
    refs = tuple(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                 for r in value.get("references") or ())
    return Schema(id=int(value["id"]), schema=str(value["schema"]),
                  schema_type=value.get("schemaType") or AVRO, references=refs,
                  subject=subject, version=version, deleted=bool(value.get("deleted", False)))


class TopicSchemaStore(SchemaStore):
    """The registry's state replayed from ``_schemas`` records (see the module's table).

    Attributes:
        location: the partition directory read (or ``"<records>"``).
        skipped: records skipped because the registry could not have read them.
        applied: records applied.
        configs: ``CONFIG`` values by subject (None: the global one).
        modes: ``MODE`` values by subject.
    """

    def __init__(self, location: str = "<records>") -> None:
        self.location = location
        self.skipped = 0
        self.applied = 0
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, dict[str, Any]] = {}
        self._versions: dict[tuple[str, int], Schema] = {}

    @classmethod
    def read(cls, directory: str | os.PathLike, *, storage: Storage | None = None) -> TopicSchemaStore:
        """Replay the ``_schemas`` partition in ``directory`` (read-only; a torn tail ends it,
        where the registry's broker would have truncated)."""
        directory = os.fspath(directory)
        store = cls(directory)
        try:
            view = PartitionView(directory, storage=storage, on_corruption=OnCorruption.TRUNCATE)
            start = view.log_start_offset
            for batch in view.batches(start):
                if batch.is_control:
                    continue
                for record in batch.records():
                    if record.offset >= start:
                        store.apply(record.key, record.value)
        except (KafkalogError, OSError) as e:
            raise SchemaError(f"cannot read the schemas in {directory}: {e}") from e
        if store.skipped and not store.applied:
            raise SchemaError(f"{directory} is not a Schema Registry topic: none of its {store.skipped} records "
                              "has the registry's key format")
        return store

    @classmethod
    def from_records(cls, records: Iterable[tuple[bytes | None, bytes | None]]) -> TopicSchemaStore:
        """Replay ``(key, value)`` pairs in ``_schemas``' format (tests, other transports)."""
        store = cls()
        for key, value in records:
            store.apply(key, value)
        return store

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one ``_schemas`` record, as the registry's reader thread does."""
        k = _json_object(key)
        if k is None or not isinstance(k.get("keytype"), str):
            self.skipped += 1
            return
        keytype = k["keytype"]
        v = _json_object(value)
        if value is not None and v is None:
            self.skipped += 1  # a value the registry's serializer rejects
            return
        self.applied += 1
        try:
            if keytype == SCHEMA:
                self._apply_schema(str(k["subject"]), int(k["version"]), v)
            elif keytype == DELETE_SUBJECT:
                if v is not None:
                    self._delete_subject(str(v.get("subject", k.get("subject"))), int(v["version"]))
            elif keytype == CLEAR_SUBJECT:
                if v is not None:
                    self._clear_subject(str(v.get("subject", k.get("subject"))))
            elif keytype == CONFIG:
                self._keep(self.configs, k.get("subject"), v)
            elif keytype == MODE:
                self._keep(self.modes, k.get("subject"), v)
            elif keytype != NOOP:
                self.skipped += 1  # a key type of a newer registry (CONTEXT, ...)
                self.applied -= 1
        except (KeyError, TypeError, ValueError):
            self.skipped += 1
            self.applied -= 1

    @staticmethod
    def _keep(table: dict[str | None, dict[str, Any]], subject: Any, value: dict[str, Any] | None) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    def _apply_schema(self, subject: str, version: int, value: dict[str, Any] | None) -> None:
        if value is None:  # a tombstone: the version is hard-deleted
            self._versions.pop((subject, version), None)
            return
        self._versions[(subject, version)] = _schema_value(value, subject, version)

    def _delete_subject(self, subject: str, up_to: int) -> None:
        # KafkaStoreMessageHandler.handleDeleteSubject: versions 1..version are marked deleted
        for (s, version), schema in list(self._versions.items()):
            if s == subject and version <= up_to and not schema.deleted:
                self._versions[(s, version)] = Schema(schema.id, schema.schema, schema.schema_type,
                                                      schema.references, s, version, True)

    def _clear_subject(self, subject: str) -> None:
        # InMemoryCache.clearSubjects: the subject's soft-deleted versions are forgotten
        for key, schema in list(self._versions.items()):
            if key[0] == subject and schema.deleted:
                del self._versions[key]

    # -- SchemaStore ---------------------------------------------------------------------------

    def schema(self, schema_id: int) -> Schema:
        found = None
        for schema in self._versions.values():
            if schema.id == schema_id and (found is None or (found.deleted and not schema.deleted)):
                found = schema
        if found is None:
            raise UnknownSchemaError(f"not in {self.location} (never registered, or hard-deleted)",
                                     schema_id=schema_id)
        return found

    def subject_version(self, subject: str, version: int | None = None) -> Schema:
        if version is None:
            live = self.versions(subject)
            if not live:
                gone = any(s == subject for s, _ in self._versions)
                raise UnknownSchemaError(
                    f"no version in {self.location}" + (" (every version is deleted)" if gone else ""),
                    subject=subject)
            version = live[-1]
        schema = self._versions.get((subject, int(version)))
        if schema is None:
            raise UnknownSchemaError(f"no version {version} in {self.location}", subject=subject)
        return schema

    def subjects(self) -> list[str]:
        return sorted({s for (s, _), schema in self._versions.items() if not schema.deleted})

    def versions(self, subject: str) -> list[int]:
        return sorted(v for (s, v), schema in self._versions.items() if s == subject and not schema.deleted)

    def all_schemas(self) -> list[Schema]:
        """Every version kept (soft-deleted ones too), by subject and version."""
        return [self._versions[k] for k in sorted(self._versions)]
