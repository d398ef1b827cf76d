"""A test-only encoder of Kafka's message JSON schemas, independent of ``kafkalog.protocol``.

It reads a schema file as Kafka's generator does (``//`` comments, ``validVersions``,
``flexibleVersions``, ``nullableVersions``, ``taggedVersions``/``tag``, ``commonStructs``,
``default``) and writes a message the way Kafka's generated ``write`` methods do: big-endian
fixed-size fields, int16-length strings / int32-length bytes and arrays in non-flexible
versions, compact (unsigned varint length + 1) forms and a tagged-field section ending every
struct in flexible versions, tagged fields written only when they differ from their default.

Values are given by Kafka's JSON names (the schema name with a lower-case first letter, as its
``JsonConverter`` writes them); a missing field takes the schema's default.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parent / "data" / "kafka-4.0-schemas"
_FIXED = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H", "float64": ">d"}


def load(name: str) -> dict:
    """The schema ``name`` (``ShareSnapshotValue``) from ``tests/data/kafka-4.0-schemas``."""
    text = (SCHEMAS / f"{name}.json").read_text()
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    text = re.sub(r",(\s*[}\]])", r"\1", text)  # Kafka's files allow trailing commas
    return json.loads(text)


def _range(spec: str | None) -> tuple[int, int]:
    if spec is None or spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), 1 << 15)
    low, _, high = spec.partition("-")
    return (int(low), int(high or low))


def _in(spec: str | None, version: int) -> bool:
    low, high = _range(spec)
    return low <= version <= high


def json_name(name: str) -> str:
    return name[0].lower() + name[1:]


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def uuid_bytes(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: url-safe base64 of 16 bytes, no padding."""
    return base64.urlsafe_b64decode(text + "==")


class _Writer:
    def __init__(self, schema: dict) -> None:
        self.common = {s["name"]: s for s in schema.get("commonStructs", [])}
        self.flexible = schema.get("flexibleVersions", "none")

    def _struct_fields(self, field: dict) -> list[dict]:
        if "fields" in field:
            return field["fields"]
        type_name = field["type"].removeprefix("[]")
        return self.common[type_name]["fields"]

    def _default(self, field: dict) -> Any:
        t = field["type"]
        d = field.get("default")
        if t.startswith("[]"):
            return []
        if d == "null" or (d is None and "default" in field):
            return None
        if t in _FIXED:
            number = float if t == "float64" else int
            return number(d) if d is not None else number(0)
        if t == "bool":
            return d in (True, "true")
        if t == "string":
            return d if d is not None else ""
        if t == "bytes":
            return b""
        if t == "uuid":
            return "AAAAAAAAAAAAAAAAAAAAAA"
        return None  # a struct

    def value(self, field: dict, value: Any, version: int, flexible: bool) -> bytes:
        t = field["type"]
        nullable = _in(field.get("nullableVersions"), version)
        if value is None and not nullable and t not in _FIXED and t not in ("bool", "uuid"):
            raise ValueError(f"{field['name']} is not nullable in version {version}")
        if t.startswith("[]"):
            if value is None:
                return uvarint(0) if flexible else struct.pack(">i", -1)
            head = uvarint(len(value) + 1) if flexible else struct.pack(">i", len(value))
            element = t[2:]
            body = b""
            for item in value:
                if element in _FIXED or element in ("string", "bytes", "uuid", "bool"):
                    body += self.value({"name": field["name"], "type": element}, item, version, flexible)
                else:
                    body += self.struct(self._struct_fields(field), item, version, flexible)
            return head + body
        if t in _FIXED:
            return struct.pack(_FIXED[t], value)
        if t == "bool":
            return b"\x01" if value else b"\x00"
        if t == "uuid":
            return uuid_bytes(value)
        if t == "string":
            if value is None:
                return uvarint(0) if flexible else struct.pack(">h", -1)
            data = value.encode()
            return (uvarint(len(data) + 1) if flexible else struct.pack(">h", len(data))) + data
        if t == "bytes":
            if value is None:
                return uvarint(0) if flexible else struct.pack(">i", -1)
            return (uvarint(len(value) + 1) if flexible else struct.pack(">i", len(value))) + bytes(value)
        # a struct field
        if value is None:
            return b"\xff" if not flexible else uvarint(0)
        prefix = b"\x01" if nullable and not flexible else b""
        return prefix + self.struct(self._struct_fields(field), value, version, flexible)

    def struct(self, fields: list[dict], values: dict, version: int, flexible: bool) -> bytes:
        out = b""
        tagged = []
        for f in fields:
            name = json_name(f["name"])
            if "tag" in f:
                if flexible and _in(f.get("taggedVersions"), version):
                    v = values.get(name, self._default(f))
                    if v != self._default(f):
                        tagged.append((f["tag"], f, v))
                continue
            if not _in(f["versions"], version):
                continue
            out += self.value(f, values.get(name, self._default(f)), version, flexible)
        if flexible:
            out += uvarint(len(tagged))
            for tag, f, v in sorted(tagged, key=lambda x: x[0]):
                if f["type"] in _FIXED or f["type"] in ("string", "bytes", "uuid", "bool") or f["type"].startswith("[]"):
                    data = self.value(f, v, version, True)
                else:  # a tagged nullable struct: a presence varint then the struct
                    data = uvarint(1) + self.struct(self._struct_fields(f), v, version, True)
                out += uvarint(tag) + uvarint(len(data)) + data
        return out


def write(name: str, values: dict, version: int) -> bytes:
    """The message ``name`` at ``version``, as Kafka's generated ``write`` lays it out."""
    schema = load(name)
    if not _in(schema["validVersions"], version):
        raise ValueError(f"{name} has no version {version}")
    w = _Writer(schema)
    return w.struct(schema["fields"], values, version, _in(schema.get("flexibleVersions"), version))


def coordinator_record(key_name: str, key: dict, value_name: str | None, value: dict | None,
                       value_version: int = 0) -> tuple[bytes, bytes | None]:
    """A coordinator record (``CoordinatorRecordSerde``): the key's version (its record type,
    the only ``validVersions`` of a key schema) and the key, the value's version and the value
    (None: a tombstone)."""
    record_type = _range(load(key_name)["validVersions"])[0]
    k = struct.pack(">h", record_type) + write(key_name, key, record_type)
    if value_name is None or value is None:
        return k, None
    return k, struct.pack(">h", value_version) + write(value_name, value, value_version)


def framed_record(name: str, values: dict, version: int = 0) -> bytes:
    """A record framed by ``AbstractApiMessageSerde`` (KRaft metadata, remote log metadata):
    frame version 1, the schema's api key and the version as unsigned varints, then the message."""
    api_key = load(name)["apiKey"]
    return uvarint(1) + uvarint(api_key) + uvarint(version) + write(name, values, version)
