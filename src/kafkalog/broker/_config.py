"""The broker's settings under Kafka's names (:class:`BrokerConfig`), the checks CreateTopics
and the AlterConfigs APIs apply to a topic's settings (:func:`check_topic_configs`), and the
entries DescribeConfigs answers with, each with its source, type and synonyms as Kafka's
``ConfigHelper`` describes them (:func:`topic_config_entries`, :func:`broker_config_entries`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import LogConfig
from ..log_config import parse_config_bool, parse_config_int
from ..errors import InvalidConfigError
from ._cluster_config import CLUSTER_KEYS, ClusterConfig
from ._group_config import GROUP_KEYS, GroupConfig
from ..varint import INT32_MAX, INT32_MIN
from ..varint import INT64_MAX as _INT64_MAX

_log = logging.getLogger(__package__)

#: Scales of the broker synonyms of topic settings (``log.roll.hours`` -> ``segment.ms``):
#: a number in the same unit, or a value copied as it is (not a number).
_VERBATIM = 0
_SAME = 1
_MINUTE_MS = 60_000
_HOUR_MS = 3_600_000
#: The least ``fetch.max.bytes`` Kafka accepts.
_FETCH_MAX_BYTES_MIN = 1024

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


def _from_synonyms(synonyms: Mapping[str, str]) -> dict[str, str]:
    """The topic defaults the broker synonyms given set. Where several name one topic setting
    the finest unit wins whatever the order given (KafkaConfig: ``log.retention.ms``, then
    ``.minutes``, then ``.hours``; ``log.roll.ms`` over ``log.roll.hours``), and any negative
    retention time means unlimited, -1 (``KafkaConfig.logRetentionTimeMillis``)."""
    topic: dict[str, str] = {}
    # coarsest first, so that a finer unit given overwrites it
    for key in sorted(synonyms, key=lambda k: -_BROKER_SYNONYMS[k][1]):
        name, scale = _BROKER_SYNONYMS[key]
        value = synonyms[key]
        if scale > _SAME:  # log.roll.hours, log.retention.minutes, ...: Kafka INTs
            value = str(parse_config_int(key, value, INT32_MIN, INT32_MAX) * scale)
        if name == "retention.ms" and scale != _VERBATIM:
            value = str(max(parse_config_int(key, value, -(2**63), _INT64_MAX), -1))
        topic[name] = value
    return topic
# Kafka topic settings accepted and stored but without effect on a single node that never
# recompresses or tiers (compression.type must say "producer": batches are stored as sent).
_ACCEPTED_TOPIC_KEYS = frozenset({
    "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "min.insync.replicas", "unclean.leader.election.enable", "message.downconversion.enable",
    "message.format.version", "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "local.retention.ms", "local.retention.bytes", "remote.storage.enable", "remote.log.copy.disable",
    "remote.log.delete.on.disable",
})


# DescribeConfigs' ConfigSource ids (Kafka's ``DescribeConfigsResponse.ConfigSource``): a topic
# override, a broker setting from the start-up configuration, Kafka's default.
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
# DescribeConfigs' ConfigType ids (``DescribeConfigsResponse.ConfigType``).
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 1, 2, 3, 5, 6, 7

#: Every topic setting this broker takes, with Kafka's type (``LogConfig``'s ConfigDef).
TOPIC_CONFIG_TYPES: dict[str, int] = {
    "segment.bytes": _INT, "segment.ms": _LONG, "segment.jitter.ms": _LONG, "segment.index.bytes": _INT,
    "index.interval.bytes": _INT, "retention.ms": _LONG, "retention.bytes": _LONG, "cleanup.policy": _LIST,
    "delete.retention.ms": _LONG, "min.compaction.lag.ms": _LONG, "max.compaction.lag.ms": _LONG,
    "min.cleanable.dirty.ratio": _DOUBLE, "file.delete.delay.ms": _LONG, "flush.messages": _LONG,
    "flush.ms": _LONG, "max.message.bytes": _INT, "message.timestamp.type": _STRING,
    "message.timestamp.difference.max.ms": _LONG, "message.timestamp.before.max.ms": _LONG,
    "message.timestamp.after.max.ms": _LONG, "preallocate": _BOOLEAN, "compression.type": _STRING,
    "compression.gzip.level": _INT, "compression.lz4.level": _INT, "compression.zstd.level": _INT,
    "min.insync.replicas": _INT, "unclean.leader.election.enable": _BOOLEAN,
    "message.downconversion.enable": _BOOLEAN, "message.format.version": _STRING,
    "leader.replication.throttled.replicas": _LIST, "follower.replication.throttled.replicas": _LIST,
    "local.retention.ms": _LONG, "local.retention.bytes": _LONG, "remote.storage.enable": _BOOLEAN,
    "remote.log.copy.disable": _BOOLEAN, "remote.log.delete.on.disable": _BOOLEAN,
}
#: The settings IncrementalAlterConfigs may APPEND to and SUBTRACT from (Kafka: LIST types).
LIST_TOPIC_KEYS = frozenset(k for k, t in TOPIC_CONFIG_TYPES.items() if t == _LIST)
#: Kafka 3.8's defaults of the settings accepted without effect (``LogConfig`` has the others).
_ACCEPTED_DEFAULTS = {
    "compression.type": "producer", "compression.gzip.level": "-1", "compression.lz4.level": "9",
    "compression.zstd.level": "3", "min.insync.replicas": "1", "unclean.leader.election.enable": "false",
    "message.downconversion.enable": "true", "message.format.version": "3.0-IV1",
    "leader.replication.throttled.replicas": "", "follower.replication.throttled.replicas": "",
    "local.retention.ms": "-2", "local.retention.bytes": "-2", "remote.storage.enable": "false",
    "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
}
_DEFAULTS = {**LogConfig().to_properties(), **_ACCEPTED_DEFAULTS}
#: The broker name Kafka shows for a topic setting's broker-level value (the first synonym).
_BROKER_NAME: dict[str, str] = {}
for _broker_name, (_topic_name, _scale) in _BROKER_SYNONYMS.items():
    _BROKER_NAME.setdefault(_topic_name, _broker_name)


def topic_config_entries(broker: BrokerConfig, overrides: Mapping[str, str], keys: list[str] | None,
                         synonyms: bool) -> list[dict[str, Any]]:
    """DescribeConfigs' entries of a topic: every setting (or those of ``keys`` that exist) with
    its value in effect and where it comes from: the topic's override, the broker's start-up
    configuration (under its broker name, e.g. ``log.segment.bytes``) or Kafka's default. With
    ``synonyms``, each lists those sources from the most specific, as Kafka does."""
    static = dict(broker.topic_defaults)
    entries = []
    for key in TOPIC_CONFIG_TYPES if keys is None else [k for k in keys if k in TOPIC_CONFIG_TYPES]:
        layers = []
        if key in overrides:
            layers.append((key, overrides[key], SOURCE_TOPIC))
        broker_name = _BROKER_NAME.get(key, key)
        if key in static:
            layers.append((broker_name, static[key], SOURCE_STATIC_BROKER))
        layers.append((broker_name, _DEFAULTS[key], SOURCE_DEFAULT))
        entries.append(_entry(key, layers[0][1], layers[0][2], False, TOPIC_CONFIG_TYPES[key], layers, synonyms))
    return entries


def topic_defaults(broker: BrokerConfig) -> dict[str, str]:
    """Every topic setting's value for a topic without overrides: the broker's, else Kafka's."""
    return {**_DEFAULTS, **dict(broker.topic_defaults)}


def broker_config_entries(broker: BrokerConfig, keys: list[str] | None, synonyms: bool) -> list[dict[str, Any]]:
    """DescribeConfigs' entries of the broker: the settings given at start (read-only: this
    broker changes none while running), and the broker-level names of the topic defaults."""
    given = dict(broker.static)
    values = {**{k: str(v) for k, v in _BROKER_DEFAULTS.items()}, **given}
    topic = dict(broker.topic_defaults)
    for topic_key, broker_name in _BROKER_NAME.items():
        values.setdefault(broker_name, topic.get(topic_key, _DEFAULTS[topic_key]))
    entries = []
    for name in sorted(values) if keys is None else [k for k in keys if k in values]:
        source = SOURCE_STATIC_BROKER if name in given or any(
            _BROKER_NAME.get(t) == name for t in topic) else SOURCE_DEFAULT
        entries.append(_entry(name, values[name], source, True, _STRING, [(name, values[name], source)], synonyms))
    return entries


def _entry(name: str, value: str | None, source: int, read_only: bool, type_: int,
           layers: Sequence[tuple[str, str | None, int]], synonyms: bool) -> dict[str, Any]:
    return {
        "name": name, "value": value, "read_only": read_only, "is_default": source == SOURCE_DEFAULT,
        "config_source": source, "is_sensitive": False, "config_type": type_, "documentation": None,
        "synonyms": [{"name": n, "value": v, "source": src} for n, v, src in layers] if synonyms else [],
    }


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
    ``num.partitions`` (1), ``default.replication.factor`` (1; CreateTopics refuses a factor
    above the live brokers), ``socket.request.max.bytes`` (100 MiB), ``fetch.max.bytes`` (55 MiB),
    ``num.io.threads`` (8, the thread pool for appends), ``log.retention.check.interval.ms``
    (5 minutes), ``producer.id.expiration.ms`` (1 day), ``advertised.host.name`` (the listen
    address), ``cluster.id`` (generated once and kept). Every topic setting (``flush.messages``,
    ``segment.bytes``, ...) and its broker synonym (``log.flush.interval.messages``,
    ``log.segment.bytes``, ...) sets the default for every topic.

    ``max.broker.partitions`` (KIP-578's name; unlimited by default) caps the partitions the
    broker hosts; independently, partitions are refused while the process's open descriptors
    would come within a reserve of ``RLIMIT_NOFILE`` (see ``_limits.py``).

    Replication (Kafka's names and defaults; see ``_replica_manager.py``):
    ``replica.lag.time.max.ms`` (30 s), ``replica.fetch.backoff.ms`` (1 s),
    ``replica.fetch.max.bytes`` (1 MiB), ``replica.fetch.response.max.bytes`` (10 MiB),
    ``replica.fetch.wait.max.ms`` (500), ``replica.fetch.min.bytes`` (1),
    ``replica.high.watermark.checkpoint.interval.ms`` (5 s), ``offsets.topic.replication.factor``
    (3); the topic settings ``min.insync.replicas`` (1) and ``unclean.leader.election.enable`` (false) take
    broker-wide defaults under the same names.

    The group coordinator's settings (``offsets.topic.num.partitions``, ``group.*``, ...) are
    in :attr:`groups` (:class:`GroupConfig`); the cluster's (``zookeeper.*``,
    ``controlled.shutdown.*``, ``auto.leader.rebalance.enable``, ``leader.imbalance.*``, ...) in
    :attr:`cluster` (:class:`ClusterConfig`), each parsed there only.
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
    #: The cluster settings (``zookeeper.connect``, ...): :class:`ClusterConfig`.
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    topic_defaults: tuple[tuple[str, str], ...] = ()
    #: ``delete.topic.enable``: whether DeleteTopics may delete.
    delete_topic_enable: bool = True
    default_replication_factor: int = 1
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_backoff_ms: int = 1_000
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    #: Carried for the coordination layer (the controller creates ``__consumer_offsets``).
    offsets_topic_replication_factor: int = 3
    #: The broker settings given (known names, as given), for DescribeConfigs.
    static: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_properties(cls, properties: Mapping[str, str] | None) -> BrokerConfig:
        """Parse ``--config`` pairs; unknown names are logged and ignored, as Kafka does.

        Raises:
            InvalidConfigError: a value that does not parse or is out of range.
        """
        fields: dict[str, Any] = {}
        topic: dict[str, str] = {}
        synonyms: dict[str, str] = {}
        for key, raw in (properties or {}).items():
            value = str(raw).strip()
            if key in _BROKER_INTS:
                name, low, high = _BROKER_INTS[key]
                fields[name] = parse_config_int(key, value, low, high)
            elif key == "auto.create.topics.enable":
                fields["auto_create_topics"] = parse_config_bool(key, value)
            elif key == "delete.topic.enable":
                fields["delete_topic_enable"] = parse_config_bool(key, value)
            elif key in CLUSTER_KEYS and key != "unclean.leader.election.enable":
                pass  # ClusterConfig's (zookeeper.*, controlled.shutdown.*, auto.leader.rebalance.enable, ...)
            elif key == "advertised.host.name":
                fields["advertised_host"] = value
            elif key == "cluster.id":
                fields["cluster_id"] = value
            elif key in GROUP_KEYS:
                pass  # GroupConfig's
            elif key in _TOPIC_KEYS or key in _ACCEPTED_TOPIC_KEYS:
                topic[key] = value
            elif key in _BROKER_SYNONYMS:
                synonyms[key] = value
            else:
                _log.warning("the configuration '%s' was supplied but isn't a known config", key)
        topic.update(_from_synonyms(synonyms))
        check_topic_configs(topic)
        static = tuple(sorted((k, str(v).strip()) for k, v in (properties or {}).items() if k in _BROKER_DEFAULTS))
        groups = GroupConfig.from_properties(properties or {})
        cluster = ClusterConfig.from_properties(properties or {})
        return cls(**fields, groups=groups, cluster=cluster, topic_defaults=tuple(sorted(topic.items())), static=static)

    def topic_config(self, overrides: Mapping[str, str] | None = None) -> LogConfig:
        """The :class:`LogConfig` of a topic: the broker's defaults, then the topic's overrides."""
        return check_topic_configs({**dict(self.topic_defaults), **(overrides or {})})


#: The broker's integer settings: Kafka's name -> (field, least value, greatest value: the
#: reach of Kafka's type, INT or LONG, as ``KafkaConfig`` defines them).
_BROKER_INTS: dict[str, tuple[str, int, int]] = {
    "node.id": ("node_id", 0, INT32_MAX),
    "broker.id": ("node_id", 0, INT32_MAX),
    "num.partitions": ("num_partitions", 1, INT32_MAX),
    "socket.request.max.bytes": ("socket_request_max_bytes", 1, INT32_MAX),
    "fetch.max.bytes": ("fetch_max_bytes", _FETCH_MAX_BYTES_MIN, INT32_MAX),
    "num.io.threads": ("num_io_threads", 1, INT32_MAX),
    "log.retention.check.interval.ms": ("retention_check_interval_ms", 1, _INT64_MAX),
    "producer.id.expiration.ms": ("producer_id_expiration_ms", 1, INT32_MAX),
    "max.broker.partitions": ("max_broker_partitions", 1, INT32_MAX),
    "default.replication.factor": ("default_replication_factor", 1, INT32_MAX),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", 1, _INT64_MAX),
    "replica.fetch.backoff.ms": ("replica_fetch_backoff_ms", 0, INT32_MAX),
    "replica.fetch.max.bytes": ("replica_fetch_max_bytes", 0, INT32_MAX),
    "replica.fetch.response.max.bytes": ("replica_fetch_response_max_bytes", 0, INT32_MAX),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", 0, INT32_MAX),
    "replica.fetch.min.bytes": ("replica_fetch_min_bytes", 1, INT32_MAX),
    "replica.high.watermark.checkpoint.interval.ms": ("replica_high_watermark_checkpoint_interval_ms", 1, _INT64_MAX),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", 1, 32767),
}
#: The broker's own settings with their defaults (DescribeConfigs of the broker resource).
_BROKER_DEFAULTS: dict[str, object] = {
    "node.id": 0, "broker.id": 0, "auto.create.topics.enable": "true", "delete.topic.enable": "true",
    "num.partitions": 1, "default.replication.factor": 1, "socket.request.max.bytes": 104_857_600,
    "fetch.max.bytes": 57_671_680, "num.io.threads": 8, "log.retention.check.interval.ms": 300_000,
    "producer.id.expiration.ms": 86_400_000, "advertised.host.name": None, "cluster.id": None,
    "max.broker.partitions": INT32_MAX, "replica.lag.time.max.ms": 30_000, "replica.fetch.backoff.ms": 1_000,
    "replica.fetch.max.bytes": 1_048_576, "replica.fetch.response.max.bytes": 10_485_760,
    "replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
    "replica.high.watermark.checkpoint.interval.ms": 5_000, "offsets.topic.replication.factor": 3,
    "controlled.shutdown.enable": "true", "auto.leader.rebalance.enable": "true",
}
