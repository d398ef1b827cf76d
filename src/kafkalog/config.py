"""Topic-level log settings with Kafka's names, defaults and validation.

``LogConfig`` carries Kafka's topic settings as snake_case fields; ``from_properties`` takes
Kafka's own dotted names. So far it holds what segments need (size and time rolling, index
sizing and spacing, preallocation, the largest batch); the partition log extends it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from .errors import InvalidConfigError

__all__ = ["LogConfig"]

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
# Kafka's minimum record batch overhead (LegacyRecord.RECORD_OVERHEAD_V0 + LOG_OVERHEAD).
_MIN_SEGMENT_BYTES = 14
# An index must hold at least one entry of the largest kind (a 12-byte time index entry).
_MIN_INDEX_BYTES = 4


@dataclasses.dataclass(frozen=True)
class LogConfig:
    """Kafka's topic settings (defaults as Kafka 3.8's ``TopicConfig``/``LogConfig``).

    Attributes:
        segment_bytes: roll after this many bytes (``segment.bytes``, 1 GiB).
        segment_ms: roll a non-empty segment after this long (``segment.ms``, 7 days).
        segment_jitter_ms: random jitter subtracted from ``segment_ms`` (``segment.jitter.ms``).
        segment_index_bytes: offset and time index preallocation (``segment.index.bytes``, 10 MiB).
        index_interval_bytes: bytes between index entries (``index.interval.bytes``, 4096).
        preallocate: preallocate new segment files (``preallocate``).
        max_message_bytes: largest batch accepted (``max.message.bytes``, 1048588).
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    preallocate: bool = False
    max_message_bytes: int = 1024 * 1024 + 12

    # Kafka name -> (field, parser, minimum, maximum)
    _KEYS = {
        "segment.bytes": ("segment_bytes", int, _MIN_SEGMENT_BYTES, _INT32_MAX),
        "segment.ms": ("segment_ms", int, 1, _INT64_MAX),
        "segment.jitter.ms": ("segment_jitter_ms", int, 0, _INT64_MAX),
        "segment.index.bytes": ("segment_index_bytes", int, _MIN_INDEX_BYTES, _INT32_MAX),
        "index.interval.bytes": ("index_interval_bytes", int, 0, _INT32_MAX),
        "preallocate": ("preallocate", "bool", None, None),
        "max.message.bytes": ("max_message_bytes", int, 0, _INT32_MAX),
    }

    def __post_init__(self) -> None:
        for key, (name, kind, low, high) in self._KEYS.items():
            value = getattr(self, name)
            if kind == "bool":
                if not isinstance(value, bool):
                    raise InvalidConfigError(f"{key} ({name}) = {value!r}: expected true or false")
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidConfigError(f"{key} ({name}) = {value!r}: expected an integer in [{low}, {high}]")

    @classmethod
    def from_properties(cls, properties: Mapping[str, object], **overrides: object) -> LogConfig:
        """A config from Kafka's dotted names (``{"segment.bytes": "1048576"}``); values may be
        strings as in a properties file. Unknown keys are ignored, as Kafka ignores them.

        Raises:
            InvalidConfigError: a value that does not parse or is out of range.
        """
        fields: dict[str, object] = {}
        for key, raw in properties.items():
            spec = cls._KEYS.get(key)
            if spec is None:
                continue
            name, kind, low, high = spec
            fields[name] = _parse(key, raw, kind, low, high)
        fields.update(overrides)
        return cls(**fields)  # type: ignore[arg-type]

    def replace(self, **changes: object) -> LogConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _parse(key: str, raw: object, kind: object, low: int | None, high: int | None) -> object:
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise InvalidConfigError(f"{key} = {raw!r}: expected true or false")
        return text == "true"
    try:
        value = int(str(raw).strip()) if not isinstance(raw, int) or isinstance(raw, bool) else raw
    except ValueError:
        raise InvalidConfigError(f"{key} = {raw!r}: expected an integer in [{low}, {high}]") from None
    if not low <= value <= high:  # type: ignore[operator]
        raise InvalidConfigError(f"{key} = {raw!r}: expected an integer in [{low}, {high}]")
    return value
