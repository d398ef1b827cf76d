"""Topic-level log settings with Kafka's names, defaults and validation.

``LogConfig`` carries Kafka's topic settings as snake_case fields (Kafka 3.8 defaults, Kafka's
validators); ``LogConfig.from_properties`` takes Kafka's own dotted names, with values as they
appear in a properties file. A bad value raises :class:`~kafkalog.errors.InvalidConfigError`
naming the key, the value and the allowed range.

| Kafka name | field | default | allowed |
|---|---|---|---|
| segment.bytes | segment_bytes | 1 GiB | >= 14 |
| segment.ms | segment_ms | 7 days | >= 1 |
| segment.jitter.ms | segment_jitter_ms | 0 | >= 0 |
| segment.index.bytes | segment_index_bytes | 10 MiB | >= 4 |
| index.interval.bytes | index_interval_bytes | 4096 | >= 0 |
| retention.ms | retention_ms | 7 days | >= -1 (-1: no limit) |
| retention.bytes | retention_bytes | -1 | any (negative: no limit) |
| cleanup.policy | cleanup_policy | ("delete",) | list of delete, compact |
| delete.retention.ms | delete_retention_ms | 1 day | >= 0 |
| min.compaction.lag.ms | min_compaction_lag_ms | 0 | >= 0, <= max.compaction.lag.ms |
| max.compaction.lag.ms | max_compaction_lag_ms | 2**63-1 | >= 1 |
| min.cleanable.dirty.ratio | min_cleanable_dirty_ratio | 0.5 | [0, 1] |
| file.delete.delay.ms | file_delete_delay_ms | 60000 | >= 0 |
| flush.messages | flush_messages | 2**63-1 | >= 1 |
| flush.ms | flush_ms | 2**63-1 | >= 0 |
| max.message.bytes | max_message_bytes | 1048588 | >= 0 |
| message.timestamp.type | message_timestamp_type | CreateTime | CreateTime, LogAppendTime |
| message.timestamp.difference.max.ms | message_timestamp_difference_max_ms | 2**63-1 | >= 0 |
| message.timestamp.before.max.ms | message_timestamp_before_max_ms | 2**63-1 | >= 0 |
| message.timestamp.after.max.ms | message_timestamp_after_max_ms | 2**63-1 | >= 0 |
| preallocate | preallocate | false | true, false |

This layer imports nothing of the records layer, so the timestamp type is Kafka's name.

The value parsers (:func:`parse_config_int`, :func:`parse_config_bool`) are Kafka's
``ConfigDef.parseType`` for INT/LONG and BOOLEAN settings; the broker's and the group
coordinator's settings are parsed with them too.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from .errors import InvalidConfigError
from .varint import INT32_MAX
from .varint import INT64_MAX as _INT64_MAX, INT64_MIN as _INT64_MIN

_DAY_MS = 24 * 60 * 60 * 1000
#: Java's ``Integer.parseInt``/``Long.parseLong`` syntax: a sign, then decimal digits (ASCII
#: here: no blanks, no ``_`` separators, which Python's ``int`` would take).
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_TRUE, _FALSE = "true", "false"

# Kafka name -> (field, kind, minimum, maximum); kind: "int", "float", "bool", or a tuple of the
# allowed words ("list:" prefix for comma-separated lists).
_KEYS: dict[str, tuple[str, object, object, object]] = {
    "segment.bytes": ("segment_bytes", "int", 14, INT32_MAX),  # LegacyRecord.RECORD_OVERHEAD_V0
    "segment.ms": ("segment_ms", "int", 1, _INT64_MAX),
    "segment.jitter.ms": ("segment_jitter_ms", "int", 0, _INT64_MAX),
    "segment.index.bytes": ("segment_index_bytes", "int", 4, INT32_MAX),
    "index.interval.bytes": ("index_interval_bytes", "int", 0, INT32_MAX),
    "retention.ms": ("retention_ms", "int", -1, _INT64_MAX),
    "retention.bytes": ("retention_bytes", "int", _INT64_MIN, _INT64_MAX),
    "cleanup.policy": ("cleanup_policy", ("list:", "compact", "delete"), None, None),
    "delete.retention.ms": ("delete_retention_ms", "int", 0, _INT64_MAX),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", "int", 0, _INT64_MAX),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", "int", 1, _INT64_MAX),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", "float", 0.0, 1.0),
    "file.delete.delay.ms": ("file_delete_delay_ms", "int", 0, _INT64_MAX),
    "flush.messages": ("flush_messages", "int", 1, _INT64_MAX),
    "flush.ms": ("flush_ms", "int", 0, _INT64_MAX),
    "max.message.bytes": ("max_message_bytes", "int", 0, INT32_MAX),
    "message.timestamp.type": ("message_timestamp_type", ("CreateTime", "LogAppendTime"), None, None),
    "message.timestamp.difference.max.ms": ("message_timestamp_difference_max_ms", "int", 0, _INT64_MAX),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", "int", 0, _INT64_MAX),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", "int", 0, _INT64_MAX),
    "preallocate": ("preallocate", "bool", None, None),
}


@dataclasses.dataclass(frozen=True)
class LogConfig:
    """Kafka's topic settings (see the module table for names, defaults and ranges).

    Immutable; ``replace(...)`` returns a validated copy.
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * _DAY_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = _DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _INT64_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60_000
    flush_messages: int = _INT64_MAX
    flush_ms: int = _INT64_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = _INT64_MAX
    message_timestamp_before_max_ms: int = _INT64_MAX
    message_timestamp_after_max_ms: int = _INT64_MAX
    preallocate: bool = False

    def __post_init__(self) -> None:
        policy = self.cleanup_policy
        if isinstance(policy, str):
            object.__setattr__(self, "cleanup_policy", _parse_list("cleanup.policy", policy))
        elif isinstance(policy, (list, set, frozenset)):  # any collection of words
            object.__setattr__(self, "cleanup_policy", tuple(sorted(set(policy))))
        for key, (name, kind, low, high) in _KEYS.items():
            _check(key, name, getattr(self, name), kind, low, high)
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                f"min.compaction.lag.ms = {self.min_compaction_lag_ms}: conflicts with max.compaction.lag.ms = "
                f"{self.max_compaction_lag_ms} (it must not be greater)"
            )

    # -- derived -----------------------------------------------------------------------------------

    @property
    def compact(self) -> bool:
        """``cleanup.policy`` includes compact."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """``cleanup.policy`` includes delete (time and size retention apply)."""
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """``message.timestamp.type`` is LogAppendTime."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def timestamp_before_max_ms(self) -> int:
        """How far in the past a CreateTime may be: Kafka 3.6+ uses the smaller of the
        deprecated difference bound and the before bound."""
        return min(self.message_timestamp_difference_max_ms, self.message_timestamp_before_max_ms)

    @property
    def timestamp_after_max_ms(self) -> int:
        """How far in the future a CreateTime may be (the smaller of the two bounds)."""
        return min(self.message_timestamp_difference_max_ms, self.message_timestamp_after_max_ms)

    # -- building ----------------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, properties: Mapping[str, object], **overrides: object) -> LogConfig:
        """A config from Kafka's dotted names (``{"segment.bytes": "1048576"}``); values may be
        strings as in a properties file. Unknown keys are ignored, as Kafka ignores them.

        Raises:
            InvalidConfigError: a value that does not parse or is out of range.
        """
        fields: dict[str, object] = {}
        for key, raw in properties.items():
            spec = _KEYS.get(key)
            if spec is None:
                continue
            name, kind, low, high = spec
            fields[name] = _parse(key, raw, kind, low, high)
        fields.update(overrides)
        return cls(**fields)  # type: ignore[arg-type]

    def to_properties(self) -> dict[str, str]:
        """Kafka's dotted names with string values, as a properties file would hold them."""
        out = {}
        for key, (name, kind, _, _) in _KEYS.items():
            value = getattr(self, name)
            if kind == "bool":
                out[key] = _TRUE if value else _FALSE
            elif isinstance(value, tuple):
                out[key] = ",".join(value)
            else:
                out[key] = str(value)
        return out

    def replace(self, **changes: object) -> LogConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _allowed(kind: object, low: object, high: object) -> str:
    if kind == "bool":
        return "true or false"
    if isinstance(kind, tuple):
        words = [w for w in kind if w != "list:"]
        return ("a comma-separated list of " if kind[0] == "list:" else "one of ") + ", ".join(words)
    return f"{'a number' if kind == 'float' else 'an integer'} in [{low}, {high}]"


def _check(key: str, name: str, value: object, kind: object, low: object, high: object) -> None:
    bad = False
    if kind == "bool":
        bad = not isinstance(value, bool)
    elif kind == "int":
        bad = isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high  # type: ignore[operator]
    elif kind == "float":
        bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high  # type: ignore[operator]
    elif isinstance(kind, tuple) and kind[0] == "list:":
        bad = not isinstance(value, tuple) or not value or any(v not in kind[1:] for v in value)
    elif isinstance(kind, tuple):
        bad = value not in kind
    if bad:
        raise InvalidConfigError(f"{key} ({name}) = {value!r}: expected {_allowed(kind, low, high)}")


def _parse_list(key: str, raw: str) -> tuple[str, ...]:
    items = tuple(sorted({part.strip() for part in raw.split(",") if part.strip()}))
    return items


def _parse(key: str, raw: object, kind: object, low: object, high: object) -> object:
    text = str(raw).strip()
    if kind == "bool":
        return parse_config_bool(key, raw)
    if isinstance(kind, tuple) and kind[0] == "list:":
        return raw if isinstance(raw, tuple) else _parse_list(key, text)
    if isinstance(kind, tuple):
        return text
    if kind == "int":
        return parse_config_int(key, raw, low, high)  # type: ignore[arg-type]
    try:
        return float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else float(text)
    except ValueError:
        raise InvalidConfigError(f"{key} = {raw!r}: expected {_allowed(kind, low, high)}") from None


def java_integer(text: str) -> int | None:
    """Java's ``Integer.parseInt``/``Long.parseLong`` of ``text`` without the range check (the
    caller's: 32 or 64 bits, or a setting's bounds); None where Java throws
    NumberFormatException."""
    return int(text) if _JAVA_INTEGER.fullmatch(text) else None


def parse_config_int(key: str, raw: object, low: int, high: int) -> int:
    """A setting of Kafka's INT or LONG type within ``[low, high]`` (pass the type's range
    where the setting has no tighter one): an int as it is, text as Kafka's
    ``ConfigDef.parseType`` reads it (trimmed, then ``Integer.parseInt``/``Long.parseLong``).

    Raises:
        InvalidConfigError: not an integer, or out of range (naming the key, the value and the
            range).
    """
    if isinstance(raw, int) and not isinstance(raw, bool):
        value: int | None = raw
    else:
        value = java_integer(str(raw).strip())
    if value is None or not low <= value <= high:
        raise InvalidConfigError(f"{key} = {raw!r}: expected an integer in [{low}, {high}]")
    return value


def parse_config_bool(key: str, raw: object) -> bool:
    """A setting of Kafka's BOOLEAN type: a bool as it is, text ``true`` or ``false`` in any case
    (trimmed, as ``ConfigDef.parseType`` reads it).

    Raises:
        InvalidConfigError: anything else (naming the key and the value).
    """
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text not in (_TRUE, _FALSE):
        raise InvalidConfigError(f"{key} = {raw!r}: expected {_allowed('bool', None, None)}")
    return text == _TRUE
