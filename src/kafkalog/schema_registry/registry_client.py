"""The schema store of a running Schema Registry, over its REST API (standard library only).

Requests (Schema Registry's ``SchemaRegistryResource``/``SubjectVersionsResource``):

| what | request | answer |
|---|---|---|
| a schema by id | ``GET /schemas/ids/{id}`` | ``{"schema", "schemaType"?, "references"?}`` |
| a subject's version | ``GET /subjects/{subject}/versions/{version or latest}`` | ``{"subject", "version", "id", "schema", "schemaType"?, "references"?}`` |
| subjects | ``GET /subjects`` | ``["name", ...]`` |
| versions | ``GET /subjects/{subject}/versions`` | ``[1, 2, ...]`` |

Errors are JSON ``{"error_code", "message"}``: 40403 schema not found, 40401 subject not found,
40402 version not found. Answers are cached for the store's life (a registered schema never
changes under its id; ``latest`` is read once per store). Every request is bounded by
``timeout``; a registry that cannot be reached or answers garbage gives a
:class:`~kafkalog.errors.SchemaError` naming the URL.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..errors import SchemaError, UnknownSchemaError
from .schema import AVRO, Schema, SchemaReference
from .store import SchemaStore

#: Schema Registry's content type (``Versions.SCHEMA_REGISTRY_V1_JSON_WEIGHTED`` accepts JSON too).
ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
#: Largest answer read (a schema is at most a few MB; the registry's default is 1 MB records).
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
#: Schema Registry's "not found" error codes.
NOT_FOUND_CODES = {40401, 40402, 40403, 40404}


def _schema(obj: dict[str, Any], schema_id: int | None, subject: str | None, version: int | None) -> Schema:
    refs = tuple(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                 for r in obj.get("references") or ())
    return Schema(id=int(obj.get("id", schema_id if schema_id is not None else -1)), schema=str(obj["schema"]),
                  schema_type=obj.get("schemaType") or AVRO, references=refs,
                  subject=obj.get("subject", subject), version=obj.get("version", version))


class RegistrySchemaStore(SchemaStore):
    """A Schema Registry at ``url``, asked over HTTP and cached (thread-safe).

    Args:
        url: the registry's base URL (``http://host:8081``, with a path prefix if it has one).
        timeout: seconds for each request (connect and read).
    """

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.location = self.url = url.rstrip("/")
        self.timeout = timeout
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:  # shipped to Spark executors: the cache goes along
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _get(self, path: str, *, schema_id: int | None = None, subject: str | None = None) -> Any:
        """The JSON answer to ``GET path`` (cached); 404 → UnknownSchemaError."""
        with self._lock:
            if path in self._cache:
                return self._cache[path]
        url = self.url + path
        request = urllib.request.Request(url, headers={"Accept": ACCEPT})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as e:
            detail = self._error_detail(e)
            if e.code == 404:
                raise UnknownSchemaError(f"not found at {url}: {detail}", schema_id=schema_id,
                                         subject=subject) from None
            raise SchemaError(f"the registry answered HTTP {e.code} to GET {url}: {detail}",
                              schema_id=schema_id, subject=subject) from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            raise SchemaError(f"cannot reach the schema registry at {url}: {reason}",
                              schema_id=schema_id, subject=subject) from None
        if len(body) > MAX_RESPONSE_BYTES:
            raise SchemaError(f"the answer to GET {url} is larger than {MAX_RESPONSE_BYTES} bytes",
                              schema_id=schema_id, subject=subject)
        try:
            answer = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise SchemaError(f"the answer to GET {url} is not JSON: {e}", schema_id=schema_id,
                              subject=subject) from None
        with self._lock:
            self._cache[path] = answer
        return answer

    @staticmethod
    def _error_detail(e: urllib.error.HTTPError) -> str:
        try:
            body = json.loads(e.read(65536).decode("utf-8"))
            return f"{body.get('message', '')} (error code {body.get('error_code', e.code)})"
        except (ValueError, UnicodeDecodeError, AttributeError, OSError):
            return str(e.reason)

    def _answer(self, answer: Any, url_path: str, schema_id: int | None, subject: str | None,
                version: int | None) -> Schema:
        try:
            return _schema(answer, schema_id, subject, version)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise SchemaError(f"the answer to GET {self.url}{url_path} is not a schema: {e!r}",
                              schema_id=schema_id, subject=subject) from None

    def schema(self, schema_id: int) -> Schema:
        path = f"/schemas/ids/{int(schema_id)}"
        return self._answer(self._get(path, schema_id=schema_id), path, schema_id, None, None)

    def subject_version(self, subject: str, version: int | None = None) -> Schema:
        which = "latest" if version is None else str(int(version))
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{which}"
        return self._answer(self._get(path, subject=subject), path, None, subject, version)

    def subjects(self) -> list[str]:
        answer = self._get("/subjects")
        if not isinstance(answer, list):
            raise SchemaError(f"the answer to GET {self.url}/subjects is not a list")
        return sorted(str(s) for s in answer)

    def versions(self, subject: str) -> list[int]:
        try:
            answer = self._get(f"/subjects/{urllib.parse.quote(subject, safe='')}/versions", subject=subject)
        except UnknownSchemaError:
            return []
        if not isinstance(answer, list):
            raise SchemaError(f"the registry's versions of {subject!r} are not a list", subject=subject)
        return sorted(int(v) for v in answer)
