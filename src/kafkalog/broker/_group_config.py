"""The group coordinator's settings, under Kafka's broker names and with Kafka's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..log_config import parse_config_bool, parse_config_int
from ..errors import InvalidConfigError
from ..varint import INT32_MAX
from ..varint import INT64_MAX as _INT64_MAX

_MINUTE_MS = 60_000


@dataclass(frozen=True)
class GroupConfig:
    """``offsets.topic.num.partitions`` (50), ``offsets.topic.segment.bytes`` (100 MiB),
    ``offsets.retention.minutes`` (7 days), ``offsets.retention.check.interval.ms`` (10 min),
    ``offsets.commit.timeout.ms`` (5 s),
    ``offset.metadata.max.bytes`` (4096), ``group.min.session.timeout.ms`` (6 s),
    ``group.max.session.timeout.ms`` (30 min), ``group.initial.rebalance.delay.ms`` (3 s),
    ``group.max.size`` (unbounded), ``log.cleaner.enable`` (true), ``log.cleaner.backoff.ms``
    (15 s), ``log.cleaner.dedupe.buffer.size`` (16 MiB: Kafka's 128 MiB serves many cleaner
    threads over many partitions; one thread compacts the offsets topic here)."""

    offsets_partitions: int = 50
    offsets_segment_bytes: int = 104_857_600
    offsets_retention_ms: int = 7 * 24 * 60 * _MINUTE_MS
    offsets_retention_check_ms: int = 600_000
    #: ``offsets.commit.timeout.ms``: how long a coordinator's append waits for the ISR (acks=-1).
    offsets_commit_timeout_ms: int = 5000
    offset_metadata_max_bytes: int = 4096
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = INT32_MAX
    cleaner_enable: bool = True
    cleaner_backoff_ms: int = 15_000
    cleaner_dedupe_buffer_size: int = 16 << 20

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> GroupConfig:
        """The group settings among ``properties`` (the others are ignored).

        Raises:
            InvalidConfigError: a value that does not parse or is out of range.
        """
        fields: dict[str, object] = {}
        for key, raw in properties.items():
            if key not in GROUP_KEYS:
                continue
            name, low, high = GROUP_KEYS[key]
            if low is None or high is None:
                fields[name] = parse_config_bool(key, raw)
                continue
            number = parse_config_int(key, raw, low, high)
            fields[name] = number * _MINUTE_MS if key == "offsets.retention.minutes" else number
        config = cls(**fields)  # type: ignore[arg-type]
        if config.min_session_timeout_ms > config.max_session_timeout_ms:
            raise InvalidConfigError(
                f"group.min.session.timeout.ms = {config.min_session_timeout_ms} is above "
                f"group.max.session.timeout.ms = {config.max_session_timeout_ms}"
            )
        return config


#: Kafka's name -> (field, least value, greatest value: the reach of Kafka's type, INT or LONG;
#: both None for a BOOLEAN), as ``GroupCoordinatorConfig`` and ``CleanerConfig`` define them.
GROUP_KEYS: dict[str, tuple[str, int | None, int | None]] = {
    "offsets.topic.num.partitions": ("offsets_partitions", 1, INT32_MAX),
    "offsets.topic.segment.bytes": ("offsets_segment_bytes", 1, INT32_MAX),
    "offsets.retention.minutes": ("offsets_retention_ms", 1, INT32_MAX),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_ms", 1, _INT64_MAX),
    "offsets.commit.timeout.ms": ("offsets_commit_timeout_ms", 1, INT32_MAX),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 0, INT32_MAX),
    "group.min.session.timeout.ms": ("min_session_timeout_ms", 0, INT32_MAX),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", 0, INT32_MAX),
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", 0, INT32_MAX),
    "group.max.size": ("max_size", 1, INT32_MAX),
    "log.cleaner.enable": ("cleaner_enable", None, None),
    "log.cleaner.backoff.ms": ("cleaner_backoff_ms", 1, _INT64_MAX),
    "log.cleaner.dedupe.buffer.size": ("cleaner_dedupe_buffer_size", 1 << 20, _INT64_MAX),
}
