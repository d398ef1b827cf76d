"""How the JVM spells things: Java hashes, Scala map order, Jackson JSON (for Kafka's exact output)."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable

from ..protocol import java_string_hash
from ..varint import INT64_MAX as _INT64_MAX, INT64_MIN as _INT64_MIN

_DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # DumpLogSegments' --max-message-size default
_CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")  # CompressionType.name by id
_BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"  # BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME


# ------------------------------------------------------------------------------------------------
# How the JVM spells things


def _jbool(value: bool) -> str:
    return "true" if value else "false"


def _optional_long(value: int | None) -> str:
    """``java.util.OptionalLong.toString``."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _java_path(arg: str) -> str:
    """``new File(arg).toString()`` on Unix: repeated slashes collapsed, a trailing one dropped."""
    path = re.sub("/+", "/", arg)
    return path[:-1] if len(path) > 1 and path.endswith("/") else path


def _absolute(path: str) -> str:
    """``File.getAbsolutePath``: resolved against the working directory, not normalised."""
    if path.startswith("/"):
        return path
    cwd = os.getcwd()
    return cwd if not path else f"{cwd.rstrip('/')}/{path}"


def _parse_long(text: str) -> int | None:
    """``Long.parseLong`` of ``text``, or None where Java throws NumberFormatException."""
    if not re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _improve_hash(h: int) -> int:
    """Scala 2.13's ``improveHash``: the high 16 bits folded into the low ones."""
    return _int32(h ^ ((h & 0xFFFFFFFF) >> 16))


def _table_size_for(capacity: int) -> int:
    """Scala 2.13 ``mutable.HashMap``/``HashSet.tableSizeFor``."""
    return min((1 << (max(capacity - 1, 4).bit_length() - 1)) * 2, 1 << 30)


def _scala_order(keys: dict[object, int], table_length: int, hashes: Callable[[object], int]) -> list:
    """Iteration order of a Scala 2.13 mutable hash map/set: by bucket, and within a bucket by
    ascending (improved, signed) hash; ``keys`` maps each key to its insertion number."""
    mask = table_length - 1

    def rank(key: object) -> tuple[int, int, int]:
        h = _improve_hash(hashes(key))
        return h & mask, h, keys[key]

    return sorted(keys, key=rank)


class _ScalaHashMap:
    """The keys of a Scala 2.13 ``mutable.HashMap[String, _]`` (DumpLogSegments keeps its reports
    in such maps, so their order on stderr is the hash order of the file paths)."""

    def __init__(self) -> None:
        self._length = 16  # defaultInitialCapacity
        self._keys: dict[object, int] = {}

    def put(self, key: str) -> None:
        # put0 grows the table before looking for the key, so every put counts.
        if len(self._keys) + 1 >= int(self._length * 0.75):
            self._length *= 2
        self._keys.setdefault(key, len(self._keys))

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self) -> list:
        return _scala_order(self._keys, self._length, java_string_hash)  # type: ignore[arg-type]


_JACKSON_ESCAPES = {i: f"\\u{i:04X}" for i in range(32)}
_JACKSON_ESCAPES.update({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"})


def _jackson(value: object) -> str:
    """``JsonNode.toString()``: compact JSON with Jackson's escapes (uppercase ``\\u00XX``)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.translate(_JACKSON_ESCAPES) + '"'
    if isinstance(value, (bytes, bytearray)):
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    if isinstance(value, dict):
        return "{" + ",".join(f"{_jackson(k)}:{_jackson(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_jackson(v) for v in value) + "]"
    return json.dumps(value)  # a float from a --key/value-decoder json value
