"""The broker's settings under Kafka's names (:class:`BrokerConfig`) and the checks CreateTopics
applies to a topic's settings (:func:`check_topic_configs`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import LogConfig
from ..errors import InvalidConfigError
from ._group_config import GROUP_KEYS, GroupConfig

_log = logging.getLogger(__package__)

#: Scales of the broker synonyms of topic settings (``log.roll.hours`` -> ``segment.ms``):
#: a number in the same unit, or a value copied as it is (not a number).
_VERBATIM = 0
_SAME = 1
_MINUTE_MS = 60_000
_HOUR_MS = 3_600_000
_INT64_MIN = -(2**63)
#: The least ``fetch.max.bytes`` Kafka accepts.
_FETCH_MAX_BYTES_MIN = 1024
#: A single node can keep one replica of a partition only.
_REPLICATION_FACTOR = 1

# Broker-level names of topic settings (Kafka's ServerTopicConfigSynonyms) -> (topic name, scale).
_BROKER_SYNONYMS: dict[str, tuple[str, int]] = {
    "log.segment.bytes": ("segment.bytes", _SAME),
    "log.roll.ms": ("segment.ms", _SAME),
    "log.roll.hours": ("segment.ms", _HOUR_MS),
    "log.roll.jitter.ms": ("segment.jitter.ms", _SAME),
    "log.roll.jitter.hours": ("segment.jitter.ms", _HOUR_MS),
    "log.index.size.max.bytes": ("segment.index.bytes", _SAME),
    "log.index.interval.bytes": ("index.interval.bytes", _SAME),
    "log.flush.interval.messages": ("flush.messages", _SAME),
    "log.flush.interval.ms": ("flush.ms", _SAME),
    "log.retention.bytes": ("retention.bytes", _SAME),
    "log.retention.ms": ("retention.ms", _SAME),
    "log.retention.minutes": ("retention.ms", _MINUTE_MS),
    "log.retention.hours": ("retention.ms", _HOUR_MS),
    "message.max.bytes": ("max.message.bytes", _SAME),
    "log.cleanup.policy": ("cleanup.policy", _VERBATIM),
    "log.cleaner.delete.retention.ms": ("delete.retention.ms", _SAME),
    "log.cleaner.min.compaction.lag.ms": ("min.compaction.lag.ms", _SAME),
    "log.cleaner.max.compaction.lag.ms": ("max.compaction.lag.ms", _SAME),
    "log.cleaner.min.cleanable.ratio": ("min.cleanable.dirty.ratio", _VERBATIM),
    "log.segment.delete.delay.ms": ("file.delete.delay.ms", _SAME),
    "log.message.timestamp.type": ("message.timestamp.type", _VERBATIM),
    "log.message.timestamp.difference.max.ms": ("message.timestamp.difference.max.ms", _SAME),
    "log.message.timestamp.before.max.ms": ("message.timestamp.before.max.ms", _SAME),
    "log.message.timestamp.after.max.ms": ("message.timestamp.after.max.ms", _SAME),
    "log.preallocate": ("preallocate", _VERBATIM),
}
_TOPIC_KEYS = frozenset(LogConfig().to_properties())
# Kafka topic settings accepted and stored but without effect on a single node that never
# recompresses or tiers (compression.type must say "producer": batches are stored as sent).
_ACCEPTED_TOPIC_KEYS = frozenset({
    "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "min.insync.replicas", "unclean.leader.election.enable", "message.downconversion.enable",
    "message.format.version", "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "local.retention.ms", "local.retention.bytes", "remote.storage.enable", "remote.log.copy.disable",
    "remote.log.delete.on.disable",
})


def check_topic_configs(configs: Mapping[str, str | None]) -> LogConfig:
    """Validate topic settings as CreateTopics does and build their :class:`LogConfig`.

    Raises:
        InvalidConfigError: an unknown name, a null or out-of-range value, or a compression.type
            other than ``producer``.
    """
    for key, value in configs.items():
        if key not in _TOPIC_KEYS and key not in _ACCEPTED_TOPIC_KEYS:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
        if value is None:
            raise InvalidConfigError(f"Null value not supported for topic configs: {key}")
    codec = configs.get("compression.type", "producer")
    if codec != "producer":
        raise InvalidConfigError(
            f"compression.type = {codec}: kafkalog's broker stores batches as the producer compressed them; "
            "only 'producer' is supported"
        )
    return LogConfig.from_properties({k: v for k, v in configs.items() if k in _TOPIC_KEYS})


@dataclass(frozen=True)
class BrokerConfig:
    """The broker's settings, under Kafka's names.

    Broker settings: ``node.id``/``broker.id`` (0), ``auto.create.topics.enable`` (true),
    ``num.partitions`` (1), ``default.replication.factor`` (1, the only value a single node
    allows), ``socket.request.max.bytes`` (100 MiB), ``fetch.max.bytes`` (55 MiB),
    ``num.io.threads`` (8, the thread pool for appends), ``log.retention.check.interval.ms``
    (5 minutes), ``producer.id.expiration.ms`` (1 day), ``advertised.host.name`` (the listen
    address), ``cluster.id`` (generated once and kept). Every topic setting (``flush.messages``,
    ``segment.bytes``, ...) and its broker synonym (``log.flush.interval.messages``,
    ``log.segment.bytes``, ...) sets the default for every topic.

    ``max.broker.partitions`` (KIP-578's name; unlimited by default) caps the partitions the
    broker hosts; independently, partitions are refused while the process's open descriptors
    would come within a reserve of ``RLIMIT_NOFILE`` (see ``_limits.py``).

    The group coordinator's settings (``offsets.topic.num.partitions``, ``group.*``, ...) are
    in :attr:`groups` (:class:`GroupConfig`).
    """

    node_id: int = 0
    auto_create_topics: bool = True
    num_partitions: int = 1
    socket_request_max_bytes: int = 104_857_600
    fetch_max_bytes: int = 57_671_680
    num_io_threads: int = 8
    retention_check_interval_ms: int = 300_000
    producer_id_expiration_ms: int = 86_400_000
    advertised_host: str | None = None
    cluster_id: str | None = None
    max_broker_partitions: int | None = None
    groups: GroupConfig = field(default_factory=GroupConfig)
    topic_defaults: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_properties(cls, properties: Mapping[str, str] | None) -> BrokerConfig:
        """Parse ``--config`` pairs; unknown names are logged and ignored, as Kafka does.

        Raises:
            InvalidConfigError: a value that does not parse or is out of range.
        """
        fields: dict[str, Any] = {}
        topic: dict[str, str] = {}
        ints = {
            "node.id": ("node_id", 0), "broker.id": ("node_id", 0), "num.partitions": ("num_partitions", 1),
            "socket.request.max.bytes": ("socket_request_max_bytes", 1),
            "fetch.max.bytes": ("fetch_max_bytes", _FETCH_MAX_BYTES_MIN),
            "num.io.threads": ("num_io_threads", 1),
            "log.retention.check.interval.ms": ("retention_check_interval_ms", 1),
            "producer.id.expiration.ms": ("producer_id_expiration_ms", 1),
            "max.broker.partitions": ("max_broker_partitions", 1),
        }
        for key, raw in (properties or {}).items():
            value = str(raw).strip()
            if key in ints:
                name, low = ints[key]
                fields[name] = _parse_int(key, value, low)
            elif key == "auto.create.topics.enable":
                fields["auto_create_topics"] = _parse_bool(key, value)
            elif key == "default.replication.factor":
                if _parse_int(key, value, 1) != _REPLICATION_FACTOR:
                    raise InvalidConfigError(f"{key} = {value}: a single-node broker only has replication factor 1")
            elif key == "advertised.host.name":
                fields["advertised_host"] = value
            elif key == "cluster.id":
                fields["cluster_id"] = value
            elif key in GROUP_KEYS:
                pass  # GroupConfig's
            elif key in _TOPIC_KEYS or key in _ACCEPTED_TOPIC_KEYS:
                topic[key] = value
            elif key in _BROKER_SYNONYMS:
                name, scale = _BROKER_SYNONYMS[key]
                topic[name] = str(_parse_int(key, value, _INT64_MIN) * scale) if scale > _SAME else value
            else:
                _log.warning("the configuration '%s' was supplied but isn't a known config", key)
        check_topic_configs(topic)
        groups = GroupConfig.from_properties(properties or {})
        return cls(**fields, groups=groups, topic_defaults=tuple(sorted(topic.items())))

    def topic_config(self, overrides: Mapping[str, str] | None = None) -> LogConfig:
        """The :class:`LogConfig` of a topic: the broker's defaults, then the topic's overrides."""
        return check_topic_configs({**dict(self.topic_defaults), **(overrides or {})})


def _parse_int(key: str, value: str, low: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidConfigError(f"{key} = {value!r}: expected an integer") from None
    if number < low:
        raise InvalidConfigError(f"{key} = {number}: must be at least {low}")
    return number


def _parse_bool(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise InvalidConfigError(f"{key} = {value!r}: expected true or false")
    return value.lower() == "true"
