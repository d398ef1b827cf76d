"""The cluster settings of a broker, under Kafka's names and with Kafka's defaults (ZooKeeper
mode, ``KafkaConfig``). Without ``zookeeper.connect`` the broker is a single node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..log_config import parse_config_bool, parse_config_int
from ..varint import INT32_MAX


@dataclass(frozen=True)
class ClusterConfig:
    """``zookeeper.connect`` (none: single node), ``zookeeper.session.timeout.ms`` (18000),
    ``zookeeper.connection.timeout.ms`` (the session timeout), ``unclean.leader.election.enable``
    (false; the replication factors are :class:`BrokerConfig`'s),
    ``controlled.shutdown.enable`` (true), ``controlled.shutdown.max.retries`` (3),
    ``controlled.shutdown.retry.backoff.ms`` (5000), ``auto.leader.rebalance.enable`` (true),
    ``leader.imbalance.check.interval.seconds`` (300), ``leader.imbalance.per.broker.percentage``
    (10), ``request.timeout.ms`` (30000: how long a controlled shutdown waits for each answer)."""

    zookeeper_connect: str | None = None
    session_timeout_ms: int = 18_000
    connection_timeout_ms: int | None = None
    unclean_leader_election: bool = False
    controlled_shutdown: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_backoff_ms: int = 5000
    auto_leader_rebalance: bool = True
    imbalance_check_interval_s: int = 300
    imbalance_percentage: int = 10
    request_timeout_ms: int = 30_000

    @property
    def enabled(self) -> bool:
        """Whether the broker joins a cluster."""
        return self.zookeeper_connect is not None

    @property
    def connect_timeout_ms(self) -> int:
        return self.connection_timeout_ms if self.connection_timeout_ms is not None else self.session_timeout_ms

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ClusterConfig:
        """The cluster settings among ``properties`` (the others are ignored).

        Raises:
            InvalidConfigError: a value that does not parse or is out of range.
        """
        fields: dict[str, object] = {}
        for key, raw in properties.items():
            if key not in CLUSTER_KEYS:
                continue
            name, kind = CLUSTER_KEYS[key]
            value = str(raw).strip()
            if kind == "str":
                fields[name] = value or None
            elif kind == "bool":
                fields[name] = parse_config_bool(key, value)
            else:
                fields[name] = parse_config_int(key, value, 1, INT32_MAX)
        return cls(**fields)  # type: ignore[arg-type]


#: Kafka's name -> (field, kind).
CLUSTER_KEYS: dict[str, tuple[str, str]] = {
    "zookeeper.connect": ("zookeeper_connect", "str"),
    "zookeeper.session.timeout.ms": ("session_timeout_ms", "int"),
    "zookeeper.connection.timeout.ms": ("connection_timeout_ms", "int"),
    "unclean.leader.election.enable": ("unclean_leader_election", "bool"),
    "controlled.shutdown.enable": ("controlled_shutdown", "bool"),
    "controlled.shutdown.max.retries": ("controlled_shutdown_max_retries", "int"),
    "controlled.shutdown.retry.backoff.ms": ("controlled_shutdown_backoff_ms", "int"),
    "auto.leader.rebalance.enable": ("auto_leader_rebalance", "bool"),
    "leader.imbalance.check.interval.seconds": ("imbalance_check_interval_s", "int"),
    "leader.imbalance.per.broker.percentage": ("imbalance_percentage", "int"),
    "request.timeout.ms": ("request_timeout_ms", "int"),
}
