"""Where schemas come from: the :class:`SchemaStore` interface and :func:`open_schema_store`.

A store answers the three questions a decoder asks: the schema of an id (the wire format's),
a subject's version (``latest`` by default: a reader schema), and the schemas a schema
references, resolved through their subjects. Two stores implement it: the ``_schemas`` topic
read offline (:mod:`.topic_store`) and a registry's REST API (:mod:`.registry_client`).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator

from ..errors import SchemaError, UnknownSchemaError
from .schema import Schema, SchemaReference

#: Schema Registry's ``kafkastore.topic`` default.
SCHEMAS_TOPIC = "_schemas"
#: References nested deeper than this are a cycle or not a real schema.
MAX_REFERENCE_DEPTH = 64


class SchemaStore(ABC):
    """The schemas a decoder reads with (abstract: :meth:`schema`, :meth:`subject_version`,
    :meth:`subjects`, :meth:`versions`)."""

    #: Where the schemas come from (a directory or a URL), for messages.
    location: str = ""

    @abstractmethod
    def schema(self, schema_id: int) -> Schema:
        """The schema registered under ``schema_id`` (also a soft-deleted one, as the registry
        serves ids); raises :class:`~kafkalog.errors.UnknownSchemaError`."""

    @abstractmethod
    def subject_version(self, subject: str, version: int | None = None) -> Schema:
        """``subject``'s schema at ``version`` (None: the latest version not deleted);
        raises :class:`~kafkalog.errors.UnknownSchemaError`."""

    @abstractmethod
    def subjects(self) -> list[str]:
        """The subjects with at least one version not deleted, sorted."""

    @abstractmethod
    def versions(self, subject: str) -> list[int]:
        """``subject``'s versions not deleted, ascending (empty when there are none)."""

    def references(self, schema: Schema) -> list[tuple[SchemaReference, Schema]]:
        """Every schema ``schema`` references, directly or not, each once, those referenced
        first (the order a parser must see named types and imports in)."""
        out: list[tuple[SchemaReference, Schema]] = []
        seen: set[tuple[str, int]] = set()

        def visit(s: Schema, depth: int) -> None:
            if depth > MAX_REFERENCE_DEPTH:
                raise SchemaError(f"schema references nest deeper than {MAX_REFERENCE_DEPTH} (a cycle?)",
                                  schema_id=schema.id, subject=schema.subject)
            for ref in s.references:
                if (ref.subject, ref.version) in seen:
                    continue
                seen.add((ref.subject, ref.version))
                try:
                    target = self.subject_version(ref.subject, ref.version)
                except UnknownSchemaError as e:
                    raise UnknownSchemaError(
                        f"reference {ref.name!r} to subject {ref.subject!r} version {ref.version} "
                        f"is not in {self.location or 'the store'} ({e.reason})",
                        schema_id=s.id, subject=s.subject) from e
                visit(target, depth + 1)
                out.append((ref, target))

        visit(schema, 0)
        return out


def _is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def _partition_candidates(location: str) -> Iterator[str]:
    """The ``_schemas`` partition directory ``location`` names: itself, or its
    ``_schemas-0`` child (a log directory)."""
    from ..filenames import PARTITION_DIR
    from ..remote import Storage

    name = Storage.basename(location.rstrip("/"))
    if PARTITION_DIR.match(name):
        yield location
    yield Storage.join(location, f"{SCHEMAS_TOPIC}-0")


def open_schema_store(location: str | os.PathLike, *, timeout: float = 10.0,
                      storage_options: dict | None = None) -> SchemaStore:
    """A schema store at ``location``.

    Args:
        location: a ``_schemas`` partition directory (``.../_schemas-0``), a log directory
            holding one, local or remote (``s3://...``: read through fsspec), or a Schema
            Registry URL (``http(s)://host:port``, optionally with a path prefix).
        timeout: seconds each request to a registry may take (connect and read).
        storage_options: fsspec options for a remote directory.

    Raises:
        SchemaError: ``location`` holds no ``_schemas`` partition.
    """
    from .registry_client import RegistrySchemaStore
    from .topic_store import TopicSchemaStore

    location = os.fspath(location)
    if _is_url(location):
        return RegistrySchemaStore(location, timeout=timeout)
    from ..remote import Storage
    storage = Storage.for_path(location, storage_options)
    for candidate in _partition_candidates(location):
        if storage.isdir(candidate) and any(n.endswith(".log") for n in storage.list_files(candidate)):
            return TopicSchemaStore.read(candidate, storage=storage)
    if not storage.exists(location):
        raise SchemaError(f"no such directory: {location}")
    raise SchemaError(f"{location} is neither a {SCHEMAS_TOPIC} partition directory nor a log directory "
                      f"holding {SCHEMAS_TOPIC}-0 (give a _schemas directory, a log directory holding it, or a registry URL)")
