"""Decoded keys and values as Arrow columns: Avro, Protobuf and JSON Schema types mapped to
Arrow (and so to Spark), and record batches whose ``key``/``value`` are decoded.

| schema | Arrow (Spark) |
|---|---|
| Avro ``record`` / Protobuf message / JSON Schema ``object`` with ``properties`` | struct, fields in declaration order |
| Avro ``int``; Protobuf ``int32``, ``sint32``, ``sfixed32`` | int32 (int) |
| Avro ``long``; Protobuf 64-bit and unsigned 32-bit integers; JSON ``integer`` | int64 (bigint); like Spark's ``from_protobuf``, ``uint64`` too |
| ``float`` / ``double``; JSON ``number`` | float32 / float64 |
| ``boolean``/``bool`` | bool |
| ``string``, Avro ``enum``, Protobuf ``enum`` (by name), Avro ``uuid`` | string |
| ``bytes``, Avro ``fixed`` | binary |
| Avro ``decimal`` | decimal128(precision, scale) |
| Avro ``date``, ``timestamp-*`` | date32 (date), timestamp (UTC; ``local-timestamp-*`` without a zone: timestamp_ntz) |
| Avro ``time-millis``/``-micros`` | string (ISO 8601 time of day) |
| Avro ``array``, Protobuf ``repeated``, JSON ``array`` | list |
| Avro ``map``, Protobuf ``map<K, V>`` | map |
| Avro ``["null", T]``, Protobuf ``optional``/message fields | T, nullable |
| anything else (an Avro union of several types, JSON without a type) | string holding the value's JSON |

The column's type is the subject's schema (its latest version, or the one asked for): Avro
writer versions are resolved to it (Avro's schema resolution, in the decoder), Protobuf and JSON
records are matched to it by field name (a field the type lacks is dropped, one the record lacks
is null). A record whose bytes do not decode, or whose value does not fit the type, is a null
``key``/``value`` with the error's message in ``keyError``/``valueError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..errors import SchemaError
from ..schema_registry import Decoder, Schema, SchemaStore, to_json
from ._compat import pa
from ._formats import SIDES, FormatOptions, decode_value, decoder, schema_store

Converter = Callable[[Any], Any] | None
#: Nesting deeper than this is a recursive type, which Arrow cannot hold.
MAX_DEPTH = 64


def _json_text(value: Any) -> Any:
    return None if value is None else to_json(value)


def _list_of(conv: Converter) -> Converter:
    if conv is None:
        return None
    return lambda v: None if v is None else [conv(x) for x in v]


def _map_of(conv: Converter) -> Converter:
    if conv is None:
        return None
    return lambda v: None if v is None else {k: conv(x) for k, x in v.items()}


def _struct_of(convs: dict[str, Converter]) -> Converter:
    active = {k: c for k, c in convs.items() if c is not None}
    if not active:
        return None

    def convert(v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        out = dict(v)
        for k, c in active.items():
            if k in out:
                out[k] = c(out[k])
        return out

    return convert


# -- Avro --------------------------------------------------------------------------------------------

_AVRO_PRIMITIVES = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
    "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
}


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _Avro:
    def __init__(self) -> None:
        self.named: dict[str, Any] = {}  # full name -> (type, converter), or None while being built

    def type(self, node: Any, namespace: str | None, depth: int = 0) -> tuple[pa.DataType, Converter]:
        if depth > MAX_DEPTH:
            raise SchemaError("the Avro schema nests too deep for an Arrow type")
        if isinstance(node, str):
            if node in _AVRO_PRIMITIVES:
                return _AVRO_PRIMITIVES[node], None
            name = _full_name(node, namespace)
            found = self.named.get(name, self.named.get(node, False))
            if found is None:
                raise SchemaError(f"the Avro type {name} is recursive: Arrow has no recursive types")
            if found is False:
                raise SchemaError(f"the Avro schema names an unknown type {node!r}")
            return found
        if isinstance(node, list):
            branches = [b for b in node if b != "null"]
            if len(branches) == 1:
                return self.type(branches[0], namespace, depth + 1)
            if not branches:
                return pa.null(), None
            for b in branches:  # register named types of the branches
                self.type(b, namespace, depth + 1)
            return pa.string(), _json_text
        if not isinstance(node, dict):
            raise SchemaError(f"not an Avro schema: {node!r}")
        kind, logical = node.get("type"), node.get("logicalType")
        if kind in ("record", "error"):
            name = _full_name(node["name"], node.get("namespace", namespace))
            ns = name.rpartition(".")[0] or None
            self.named[name] = None
            fields, convs = [], {}
            for f in node["fields"]:
                t, c = self.type(f["type"], ns, depth + 1)
                fields.append(pa.field(f["name"], t))
                convs[f["name"]] = c
            result = (pa.struct(fields), _struct_of(convs))
            self.named[name] = result
            return result
        if kind == "enum":
            result = (pa.string(), None)
            self.named[_full_name(node["name"], node.get("namespace", namespace))] = result
            return result
        if kind == "fixed":
            result = self._logical(node, logical) or (pa.binary(), None)
            self.named[_full_name(node["name"], node.get("namespace", namespace))] = result
            return result
        if kind == "array":
            t, c = self.type(node["items"], namespace, depth + 1)
            return pa.list_(t), _list_of(c)
        if kind == "map":
            t, c = self.type(node["values"], namespace, depth + 1)
            return pa.map_(pa.string(), t), _map_of(c)
        return self._logical(node, logical) or self.type(kind, namespace, depth + 1)

    @staticmethod
    def _logical(node: dict[str, Any], logical: str | None) -> tuple[pa.DataType, Converter] | None:
        # fastavro applies these logical types when it reads (an invalid one falls back to the base type)
        kind = node.get("type")
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = int(node.get("precision", 0)), int(node.get("scale", 0))
            if 0 < precision <= 38 and 0 <= scale <= precision:
                return pa.decimal128(precision, scale), None
            if 0 < precision <= 76 and 0 <= scale <= precision:
                return pa.decimal256(precision, scale), None
        if logical == "uuid" and kind == "string":
            return pa.string(), lambda v: None if v is None else str(v)
        if logical == "date" and kind == "int":
            return pa.date32(), None
        if (logical, kind) in (("time-millis", "int"), ("time-micros", "long")):
            return pa.string(), lambda v: None if v is None else v.isoformat()  # Spark has no time of day
        if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
            return pa.timestamp("us", tz="UTC"), None
        if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
            return pa.timestamp("us"), None
        return None


def avro_arrow_type(store: SchemaStore, schema: Schema) -> tuple[pa.DataType, Converter]:
    """The Arrow type of an Avro schema (its references' named types known)."""
    mapper = _Avro()
    try:
        for _ref, target in store.references(schema):
            mapper.type(json.loads(target.schema), None)
        return mapper.type(json.loads(schema.schema), None)
    except (KeyError, TypeError, ValueError) as e:
        raise SchemaError(f"the Avro schema has no Arrow type: {e!r}", schema_id=schema.id,
                          subject=schema.subject) from None


# -- Protobuf -----------------------------------------------------------------------------------------

#: ``FieldDescriptor.TYPE_*`` -> Arrow.
_PROTO_SCALARS = {
    1: pa.float64(), 2: pa.float32(), 3: pa.int64(), 4: pa.int64(), 5: pa.int32(), 6: pa.int64(),
    7: pa.int64(), 8: pa.bool_(), 9: pa.string(), 12: pa.binary(), 13: pa.int64(), 14: pa.string(),
    15: pa.int32(), 16: pa.int64(), 17: pa.int32(), 18: pa.int64(),
}
_TYPE_GROUP, _TYPE_MESSAGE = 10, 11


def _proto_message(descriptor: Any, stack: tuple[str, ...] = ()) -> pa.DataType:
    if descriptor.full_name in stack or len(stack) > MAX_DEPTH:
        raise SchemaError(f"the Protobuf message {descriptor.full_name} is recursive: Arrow has no recursive types")
    fields = []
    for field in descriptor.fields:
        fields.append(pa.field(field.name, _proto_field(field, stack + (descriptor.full_name,))))
    return pa.struct(fields)


def _proto_field(field: Any, stack: tuple[str, ...]) -> pa.DataType:
    if field.type in (_TYPE_GROUP, _TYPE_MESSAGE):
        if field.is_repeated and field.message_type.GetOptions().map_entry:
            key = field.message_type.fields_by_name["key"]
            value = field.message_type.fields_by_name["value"]
            return pa.map_(_proto_field(key, stack), _proto_field(value, stack))
        inner = _proto_message(field.message_type, stack)
    else:
        inner = _PROTO_SCALARS[field.type]
    return pa.list_(inner) if field.is_repeated else inner


def protobuf_message(store: SchemaStore, schema: Schema) -> Any:
    """The descriptor of the schema's first message (message index ``[0]``): a column's type."""
    from ..schema_registry.protobuf import ProtobufPayloadDecoder

    return ProtobufPayloadDecoder(store).compiled(schema).message_class([0]).DESCRIPTOR


def protobuf_arrow_type(store: SchemaStore, schema: Schema) -> tuple[pa.DataType, Converter]:
    """The Arrow type of the schema's first message."""
    return _proto_message(protobuf_message(store, schema)), None


# -- JSON Schema --------------------------------------------------------------------------------------

_JSON_SCALARS = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_(),
                 "null": pa.null()}


def _json_type(node: Any, root: Any, depth: int = 0) -> tuple[pa.DataType, Converter]:
    if depth > MAX_DEPTH or not isinstance(node, dict):
        return pa.string(), _json_text
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        return _json_type(target, root, depth + 1)
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind == "object" and isinstance(node.get("properties"), dict) and node["properties"]:
        fields, convs = [], {}
        for name, sub in node["properties"].items():
            t, c = _json_type(sub, root, depth + 1)
            fields.append(pa.field(name, t))
            convs[name] = c
        return pa.struct(fields), _struct_of(convs)
    if kind == "array" and isinstance(node.get("items"), dict):
        t, c = _json_type(node["items"], root, depth + 1)
        return pa.list_(t), _list_of(c)
    if kind in _JSON_SCALARS and kind != "null":
        return _JSON_SCALARS[kind], None
    return pa.string(), _json_text


def json_arrow_type(schema: Schema) -> tuple[pa.DataType, Converter]:
    """The Arrow type of a JSON Schema (``object`` with ``properties`` -> struct)."""
    try:
        root = json.loads(schema.schema)
    except ValueError as e:
        raise SchemaError(f"the JSON Schema is not JSON: {e}", schema_id=schema.id, subject=schema.subject) from None
    return _json_type(root, root)


# -- columns ------------------------------------------------------------------------------------------


def side_type(options: FormatOptions, side: str, topic: str | None, path: str) -> tuple[pa.DataType, Converter, str | None]:
    """The Arrow type of the ``key`` or ``value`` column, the converter its decoded objects
    need (None when none), and for Protobuf the message it holds."""
    fmt = options.format(side)
    if fmt == "binary":
        return pa.binary(), None, None
    if not options.needs_subject(side):  # string, or json without a schema: text
        return pa.string(), (None if fmt == "string" else _json_text), None
    subject = options.subject(side, topic)
    if subject is None:
        raise SchemaError(f"{side}s in format {fmt} need a subject for their column type when several topics "
                          f"are read (give {side}Subject / {side}_subject)")
    store = schema_store(options, path)
    schema = store.subject_version(subject, options.version(side))
    if fmt == "avro" or (fmt == "registry" and schema.schema_type == "AVRO"):
        if schema.schema_type != "AVRO":
            raise SchemaError(f"is a {schema.schema_type} schema, not AVRO", schema_id=schema.id, subject=subject)
        return (*avro_arrow_type(store, schema), None)
    if fmt == "protobuf" or (fmt == "registry" and schema.schema_type == "PROTOBUF"):
        if schema.schema_type != "PROTOBUF":
            raise SchemaError(f"is a {schema.schema_type} schema, not PROTOBUF", schema_id=schema.id, subject=subject)
        descriptor = protobuf_message(store, schema)
        return _proto_message(descriptor), None, descriptor.full_name
    if schema.schema_type != "JSON":
        raise SchemaError(f"is a {schema.schema_type} schema, not JSON", schema_id=schema.id, subject=subject)
    return (*json_arrow_type(schema), None)


def decode_column(raw: pa.Array, dec: Decoder, typ: pa.DataType, convert: Converter,
                  message: str | None = None) -> tuple[pa.Array, pa.Array]:
    """A binary column decoded into ``typ``, and its error column (null where it decoded).
    ``message``: the Protobuf message the column holds (a record of another message is an error,
    not a struct of nulls)."""
    objs: list[Any] = []
    errors: list[str | None] = []
    for data in raw.to_pylist():
        obj, error = decode_value(dec, data)
        if error is None and message is not None and data is not None:
            held = dec.message_name(data)  # type: ignore[attr-defined]
            if held is not None and held != message:
                obj, error = None, f"the record holds a {held}, not the column's {message}"
        if error is None and convert is not None:
            obj = convert(obj)
        objs.append(obj)
        errors.append(error)
    try:
        column = pa.array(objs, type=typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        column = _fitting(objs, errors, typ)
    return column, pa.array(errors, type=pa.string())


def _fitting(objs: list[Any], errors: list[str | None], typ: pa.DataType) -> pa.Array:
    """Row by row: a value that does not fit ``typ`` becomes null, with the error said."""
    out = []
    for i, obj in enumerate(objs):
        try:
            out.append(pa.array([obj], type=typ))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as e:
            errors[i] = f"the decoded value does not fit the column type {typ}: {e}"
            out.append(pa.nulls(1, typ))
    return pa.concat_arrays(out) if out else pa.array([], type=typ)


class Decoding:
    """Turns record batches with binary ``key``/``value`` into decoded ones (built on the driver,
    applied on the executors; picklable)."""

    def __init__(self, options: FormatOptions, path: str, topic: str | None) -> None:
        self.options = options
        self.path = path
        self.topic = topic  # the topic whose subjects type the columns (None: subjects given)
        self._types: dict[str, tuple[pa.DataType, Converter, str | None]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_types": None}  # converters are closures: made again where used

    def types(self) -> dict[str, tuple[pa.DataType, Converter, str | None]]:
        """Each side's Arrow type and converter (worked out once)."""
        if self._types is None:
            self._types = {side: side_type(self.options, side, self.topic, self.path) for side in SIDES}
        return self._types

    def fields(self) -> dict[str, pa.DataType]:
        """The decoded columns' types (``key``, ``value``) and the error columns'."""
        types = self.types()
        out = {side: types[side][0] for side in SIDES}
        for name in self.options.error_columns:
            out[name] = pa.string()
        return out

    def apply(self, batch: pa.RecordBatch, topic: str) -> pa.RecordBatch:
        """``batch`` (binary key and value) with its key and value decoded and the error
        columns appended."""
        types = self.types()
        arrays, names = list(batch.columns), list(batch.schema.names)
        errors = []
        for side in SIDES:
            dec = decoder(self.options, side, self.topic or topic, self.path)
            if dec is None:
                continue
            i = names.index(side)
            typ, convert, message = types[side]
            arrays[i], error = decode_column(batch.column(i), dec, typ, convert, message)
            errors.append((f"{side}Error", error))
        fields = [pa.field(n, a.type) for n, a in zip(names, arrays, strict=True)]
        for name, error in errors:
            arrays.append(error)
            fields.append(pa.field(name, pa.string()))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def spark_ddl(typ: pa.DataType) -> str:
    """Spark's DDL for an Arrow type (field names quoted)."""
    if pa.types.is_struct(typ):
        inner = ", ".join(f"`{f.name.replace('`', '``')}`: {spark_ddl(f.type)}" for f in typ)
        return f"struct<{inner}>"
    if pa.types.is_map(typ):
        return f"map<{spark_ddl(typ.key_type)}, {spark_ddl(typ.item_type)}>"
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return f"array<{spark_ddl(typ.value_type)}>"
    if pa.types.is_decimal(typ):
        return f"decimal({typ.precision}, {typ.scale})"
    if pa.types.is_timestamp(typ):
        return "timestamp" if typ.tz else "timestamp_ntz"
    simple = {
        pa.null(): "void", pa.bool_(): "boolean", pa.int32(): "int", pa.int64(): "bigint", pa.float32(): "float",
        pa.float64(): "double", pa.string(): "string", pa.binary(): "binary", pa.date32(): "date",
    }
    if typ in simple:
        return simple[typ]
    raise SchemaError(f"Arrow type {typ} has no Spark type")
