"""The broker's and the group coordinator's settings are read with the one config value parser
(``kafkalog.log_config.parse_config_int``/``parse_config_bool``): Kafka's syntax, and each setting's
range up to the reach of its Kafka type (INT or LONG)."""

from __future__ import annotations

import pytest

from kafkalog.broker import BrokerConfig
from kafkalog.errors import InvalidConfigError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(("key", "value", "field"), [
    ("node.id", INT32_MAX, "node_id"),
    ("num.partitions", 1, "num_partitions"),
    ("fetch.max.bytes", 1024, "fetch_max_bytes"),
    ("log.retention.check.interval.ms", INT64_MAX, "retention_check_interval_ms"),
    ("default.replication.factor", 3, "default_replication_factor"),
    ("replica.lag.time.max.ms", INT64_MAX, "replica_lag_time_max_ms"),
    ("replica.fetch.max.bytes", 0, "replica_fetch_max_bytes"),
    ("replica.fetch.wait.max.ms", INT32_MAX, "replica_fetch_wait_max_ms"),
    ("replica.fetch.min.bytes", 1, "replica_fetch_min_bytes"),
    ("replica.fetch.backoff.ms", 0, "replica_fetch_backoff_ms"),
    ("offsets.topic.replication.factor", 32767, "offsets_topic_replication_factor"),
])
def test_broker_ints_at_their_bounds(key, value, field) -> None:
    assert getattr(BrokerConfig.from_properties({key: f" {value} "}), field) == value


@pytest.mark.parametrize(("key", "value"), [
    ("node.id", str(INT32_MAX + 1)),  # an INT: Kafka's parser refuses it (the wire has 32 bits)
    ("num.partitions", "0"),
    ("num.partitions", "1_0"),
    ("fetch.max.bytes", "1023"),
    ("log.retention.check.interval.ms", str(INT64_MAX + 1)),
    ("default.replication.factor", "x"),
    ("default.replication.factor", "0"),
    ("replica.lag.time.max.ms", "0"),
    ("offsets.topic.replication.factor", "32768"),
    ("controlled.shutdown.enable", "yes"),
    ("log.retention.hours", str(INT32_MAX + 1)),
    ("auto.create.topics.enable", "yes"),
    ("offsets.topic.num.partitions", str(INT32_MAX + 1)),
    ("offsets.retention.check.interval.ms", "0"),
    ("group.max.size", "1e3"),
    ("log.cleaner.dedupe.buffer.size", str(2**20 - 1)),
    ("log.cleaner.enable", "1"),
])
def test_bad_values_name_the_key(key, value) -> None:
    with pytest.raises(InvalidConfigError) as err:
        BrokerConfig.from_properties({key: value})
    assert key in str(err.value) and value in str(err.value)


def test_group_settings_parse_as_kafka_does() -> None:
    config = BrokerConfig.from_properties({
        "offsets.topic.num.partitions": "+3", "offsets.retention.minutes": "2", "log.cleaner.enable": " FALSE ",
        "offsets.retention.check.interval.ms": str(INT64_MAX), "delete.topic.enable": "False",
        "log.roll.hours": "2",
    }).groups
    assert (config.offsets_partitions, config.offsets_retention_ms, config.cleaner_enable) == (3, 120_000, False)
    assert config.offsets_retention_check_ms == INT64_MAX
    broker = BrokerConfig.from_properties({"delete.topic.enable": "False", "log.roll.hours": "2"})
    assert broker.delete_topic_enable is False and broker.topic_config().segment_ms == 7_200_000


@pytest.mark.parametrize(("props", "retention_ms", "segment_ms"), [
    ({"log.retention.hours": "-1"}, -1, None),  # any negative retention time is unlimited
    ({"log.retention.minutes": "-5"}, -1, None),
    ({"log.retention.ms": "-7"}, -1, None),
    ({"log.retention.hours": "2", "log.retention.minutes": "3"}, 180_000, None),
    ({"log.retention.ms": "1000", "log.retention.hours": "2"}, 1000, None),  # the finest unit wins,
    ({"log.retention.hours": "2", "log.retention.ms": "1000"}, 1000, None),  # in any order given
    ({"log.retention.hours": "-1", "log.retention.ms": "60000"}, 60_000, None),
    ({"log.roll.ms": "500", "log.roll.hours": "1"}, None, 500),
    ({"log.roll.hours": "3"}, None, 10_800_000),
])
def test_time_synonyms_follow_kafka_config(props, retention_ms, segment_ms) -> None:
    config = BrokerConfig.from_properties(props).topic_config()
    if retention_ms is not None:
        assert config.retention_ms == retention_ms
    if segment_ms is not None:
        assert config.segment_ms == segment_ms


def test_replication_settings_have_kafkas_defaults() -> None:
    config = BrokerConfig.from_properties({})
    assert (config.default_replication_factor, config.replica_lag_time_max_ms, config.replica_fetch_max_bytes,
            config.replica_fetch_response_max_bytes, config.replica_fetch_wait_max_ms, config.replica_fetch_min_bytes,
            config.replica_fetch_backoff_ms, config.replica_high_watermark_checkpoint_interval_ms,
            config.offsets_topic_replication_factor, config.cluster.controlled_shutdown,
            config.cluster.auto_leader_rebalance) == (1, 30_000, 1_048_576, 10_485_760, 500, 1, 1_000, 5_000, 3, True, True)
    # the cluster's settings are parsed once, into BrokerConfig.cluster (ClusterConfig)
    assert not BrokerConfig.from_properties({"auto.leader.rebalance.enable": "FALSE"}).cluster.auto_leader_rebalance
    assert not BrokerConfig.from_properties({"controlled.shutdown.enable": "false"}).cluster.controlled_shutdown
    # Topic settings with a broker-wide default under the same name.
    assert dict(BrokerConfig.from_properties({"min.insync.replicas": "2"}).topic_defaults)["min.insync.replicas"] == "2"
