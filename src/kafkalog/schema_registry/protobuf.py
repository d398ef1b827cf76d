"""Protobuf payloads: the registry's schema compiled at run time, the message indexes honoured.

Schema Registry keeps a Protobuf schema as ``.proto`` source (its canonical form; also what
``_schemas`` holds), and some clients register or fetch it as a base64-encoded
``FileDescriptorProto`` (``?format=serialized``; confluent-kafka-python's serializer). Both are
read. The protobuf package has no ``.proto`` compiler of its own, so source goes through
Google's ``protoc``, as shipped in the ``grpcio-tools`` wheel (run in a child process, bounded by
a timeout, its messages kept for the error): it writes a ``FileDescriptorSet`` with every import,
which a fresh ``DescriptorPool`` per schema id loads (two versions of one message never meet in
one pool). References are the imported files (each reference's ``name`` is the import path);
Google's well-known types come with protoc.

The wire format's message indexes pick the message: the first index is a top-level message of
the file, each next one a message nested in the previous (``[0]``: the first message). The
payload must parse completely and leave no unknown fields (the writer schema is exact, so
unknown fields mean the bytes are not that message). Messages become dicts keyed by the
``.proto`` field names (as Kafka Connect's Protobuf converter names them): scalars with their
defaults, 64-bit integers as ints, bytes as bytes, enums by name, unset message fields and
unset fields with presence (``optional``, oneof members) as None, maps as dicts.
"""

from __future__ import annotations

import base64
import binascii
import os
import subprocess
import sys
import tempfile
import threading
from typing import Any

from ..errors import SchemaDecodeError, SchemaError
from .extras import require
from .schema import PROTOBUF, Schema
from .store import SchemaStore
from .wire import unframe_protobuf

#: Seconds protoc may take to compile one schema.
PROTOC_TIMEOUT = 60.0
#: Google's well-known types: in protoc's include path and in the protobuf package.
_WELL_KNOWN = "google/protobuf/"


def _serialized(text: str) -> bytes | None:
    """The bytes of a base64 ``FileDescriptorProto`` schema, or None for ``.proto`` source."""
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or ";" in stripped:
        return None
    try:
        return base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None


def _compile(sources: dict[str, str], main: str, descriptor_set_in: bytes | None, schema: Schema) -> bytes:
    """``protoc`` over ``sources`` (import path -> text): the ``FileDescriptorSet`` of ``main``
    with its imports."""
    grpc_tools = require("grpc_tools")
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="kafkalog-proto-") as tmp:
        src = os.path.join(tmp, "src")
        for name, text in sources.items():
            path = os.path.normpath(os.path.join(src, name))
            if not path.startswith(src + os.sep):
                raise SchemaError(f"import path {name!r} leaves the source tree", schema_id=schema.id,
                                  subject=schema.subject)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        out = os.path.join(tmp, "set.pb")
        args = [sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={src}", f"--proto_path={include}",
                f"--descriptor_set_out={out}", "--include_imports"]
        if descriptor_set_in is not None:
            given = os.path.join(tmp, "given.pb")
            with open(given, "wb") as f:
                f.write(descriptor_set_in)
            args.append(f"--descriptor_set_in={given}")
        try:
            done = subprocess.run(args + [main], capture_output=True, timeout=PROTOC_TIMEOUT, cwd=tmp,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SchemaError(f"protoc did not compile the schema within {PROTOC_TIMEOUT:g} s",
                              schema_id=schema.id, subject=schema.subject) from None
        if done.returncode != 0 or not os.path.exists(out):
            message = done.stderr.decode("utf-8", "replace").strip().replace(src + os.sep, "")
            raise SchemaError(f"the .proto schema does not compile: {message or 'protoc failed'}",
                              schema_id=schema.id, subject=schema.subject)
        with open(out, "rb") as f:
            return f.read()


def _file_protos(store: SchemaStore, schema: Schema) -> tuple[list[Any], str]:
    """The ``FileDescriptorProto``s of ``schema`` and its imports (imports first), and the
    main file's name."""
    descriptor_pb2 = require("google.protobuf.descriptor_pb2")
    refs = store.references(schema)
    files = [(ref.name, target) for ref, target in refs] + [(None, schema)]
    given, sources = [], {}
    main = f"kafkalog_schema_{schema.id}.proto"
    for name, s in files:
        if s.schema_type != PROTOBUF:
            raise SchemaError(f"references a {s.schema_type} schema ({name!r}) from a Protobuf schema",
                              schema_id=schema.id, subject=schema.subject)
        raw = _serialized(s.schema)
        if raw is None:
            sources[name or main] = s.schema
            continue
        fdp = descriptor_pb2.FileDescriptorProto()
        try:
            fdp.ParseFromString(raw)
        except Exception as e:
            raise SchemaError(f"the serialized Protobuf schema ({name or 'the schema'}) does not parse: {e}",
                              schema_id=s.id, subject=s.subject) from None
        if name is not None:
            fdp.name = name  # imported by this path
        elif not fdp.name:
            fdp.name = main
        main = fdp.name if name is None else main
        given.append(fdp)
    if main not in sources:  # the schema itself is serialized: imports must be too
        if sources:
            raise SchemaError("a serialized Protobuf schema imports .proto source; give both in one form",
                              schema_id=schema.id, subject=schema.subject)
        return given, main
    given_set = None
    if given:
        fds = descriptor_pb2.FileDescriptorSet()
        fds.file.extend(given)
        given_set = fds.SerializeToString()
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(_compile(sources, main, given_set, schema))
    return list(fds.file), main


def _well_known(name: str) -> Any:
    """A well-known type's ``FileDescriptorProto`` (``google/protobuf/timestamp.proto``), from
    the protobuf package."""
    descriptor_pb2 = require("google.protobuf.descriptor_pb2")
    pool = require("google.protobuf.descriptor_pool").Default()
    module = name[len(_WELL_KNOWN):-len(".proto")]
    try:
        require(f"google.protobuf.{module}_pb2")
        fd = pool.FindFileByName(name)
    except (SchemaError, KeyError):
        return None
    fdp = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(fdp)
    return fdp


class _Compiled:
    """One schema id's descriptor pool and its main file."""

    def __init__(self, store: SchemaStore, schema: Schema) -> None:
        descriptor_pool = require("google.protobuf.descriptor_pool")
        self.schema = schema
        files, main = _file_protos(store, schema)
        by_name = {f.name: f for f in files}
        self.pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()

        def add(name: str, depth: int = 0) -> None:
            if name in added or depth > 64:
                return
            fdp = by_name.get(name)
            if fdp is None and name.startswith(_WELL_KNOWN):
                fdp = _well_known(name)
            if fdp is None:
                raise SchemaError(f"the Protobuf schema imports {name!r}, which no reference provides",
                                  schema_id=schema.id, subject=schema.subject)
            for dep in fdp.dependency:
                add(dep, depth + 1)
            try:
                self.pool.Add(fdp)
            except Exception as e:
                raise SchemaError(f"the Protobuf file {name!r} does not load: {e}", schema_id=schema.id,
                                  subject=schema.subject) from None
            added.add(name)

        add(main)
        self.main = by_name.get(main) or _well_known(main)
        self._classes: dict[tuple[int, ...], Any] = {}
        self._lock = threading.Lock()

    def message_class(self, indexes: list[int]) -> Any:
        key = tuple(indexes)
        cls = self._classes.get(key)
        if cls is not None:
            return cls
        names = []
        types = self.main.message_type
        for depth, i in enumerate(indexes):
            if i >= len(types):
                raise SchemaDecodeError(f"message index {i} at depth {depth} of {list(indexes)}: the schema has "
                                        f"{len(types)} message(s) there", schema_id=self.schema.id,
                                        subject=self.schema.subject)
            names.append(types[i].name)
            types = types[i].nested_type
        full = ".".join(([self.main.package] if self.main.package else []) + names)
        message_factory = require("google.protobuf.message_factory")
        cls = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full))
        with self._lock:
            self._classes[key] = cls
        return cls


def _has_unknown(msg: Any) -> bool:
    unknown_fields = require("google.protobuf.unknown_fields")
    return len(unknown_fields.UnknownFieldSet(msg)) > 0


def message_to_dict(msg: Any) -> dict[str, Any]:
    """A parsed message as a dict (the module docstring's mapping); raises ValueError on
    unknown fields anywhere in it."""
    if _has_unknown(msg):
        raise ValueError(f"unknown fields in {msg.DESCRIPTOR.full_name}")
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        if field.is_repeated:
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                value_field = field.message_type.fields_by_name["value"]
                out[field.name] = {k: _scalar(value_field, v) for k, v in value.items()}
            else:
                out[field.name] = [_scalar(field, v) for v in value]
        elif field.has_presence and not msg.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _scalar(field, value)
    return out


def _scalar(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return message_to_dict(value)
    if field.enum_type is not None:
        number = field.enum_type.values_by_number.get(value)
        return number.name if number is not None else value
    return value


class ProtobufPayloadDecoder:
    """Protobuf messages of any writer id (one compiled pool per id, kept)."""

    def __init__(self, store: SchemaStore) -> None:
        self.store = store
        self._compiled: dict[int, _Compiled] = {}
        self._lock = threading.Lock()

    def compiled(self, schema: Schema) -> _Compiled:
        found = self._compiled.get(schema.id)
        if found is None:
            found = _Compiled(self.store, schema)
            with self._lock:
                self._compiled[schema.id] = found
        return found

    def message_name(self, data: bytes | memoryview, schema: Schema | None = None) -> str:
        """The full name of the message in ``data`` (its id's schema and message indexes)."""
        framed = unframe_protobuf(data)
        if schema is None:
            schema = self.store.schema(framed.schema_id)
        return self.compiled(schema).message_class(framed.message_indexes or [0]).DESCRIPTOR.full_name

    def decode_framed(self, data: bytes | memoryview, schema: Schema | None = None) -> Any:
        """The message in ``data`` (wire format) as a dict."""
        framed = unframe_protobuf(data)
        if schema is None:
            schema = self.store.schema(framed.schema_id)
        cls = self.compiled(schema).message_class(framed.message_indexes or [0])
        msg = cls()
        try:
            msg.ParseFromString(bytes(framed.payload))
            return message_to_dict(msg)
        except Exception as e:  # DecodeError, ValueError (unknown fields)
            raise SchemaDecodeError(f"the Protobuf payload ({len(framed.payload)} bytes) is not a "
                                    f"{cls.DESCRIPTOR.full_name}: {e}", schema_id=schema.id,
                                    subject=schema.subject) from None
