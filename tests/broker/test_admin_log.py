"""The storage steps under the broker's admin APIs: ``Log.rename_for_delete`` (Kafka's
``-delete`` directory name, the checkpoints forgetting the partition), ``delete_dir_name``'s
length cap, ``Log.update_config`` taking effect on the next roll, and the Produce v0-2
conversion refusing what Kafka refuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import LogConfig
from kafkalog.filenames import SPECIAL_DIR, delete_dir_name, partition_of
from kafkalog.broker._upconvert import to_v2
from kafkalog.memory_records_builder import RecordBatchBuilder
from kafkalog.compression import Compression
from kafkalog.errors import CorruptRecordError, KafkalogError
from kafkalog.log import Log

T0 = 1_700_000_000_000


def _batch(value: bytes = b"v" * 100, n: int = 1):
    builder = RecordBatchBuilder(2)
    for i in range(n):
        builder.append(b"k", value, timestamp=T0 + i)
    return builder.build()


def test_rename_for_delete(tmp_path) -> None:
    log = Log.open(tmp_path / "orders-3", LogConfig())
    log.append(_batch())
    other = Log.open(tmp_path / "orders-4", LogConfig())
    target = log.rename_for_delete()
    assert not (tmp_path / "orders-3").exists() and target.is_dir()
    match = SPECIAL_DIR.match(target.name)
    assert match and (match["topic"], match["partition"], match["kind"]) == ("orders", "3", "delete")
    assert partition_of(target) == ("orders", 3)
    for checkpoint in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        path = tmp_path / checkpoint
        assert "orders 3" not in (path.read_text() if path.exists() else "")
    assert log.closed
    other.close()


@given(topic=st.text("abc._-", min_size=1, max_size=249), partition=st.integers(0, 2**31 - 1))
def test_delete_dir_names_fit_255_characters(topic, partition) -> None:
    name = delete_dir_name(topic, partition)
    assert len(name) <= 255
    match = SPECIAL_DIR.match(name)
    assert match and match["kind"] == "delete" and int(match["partition"]) == partition
    assert topic.startswith(match["topic"])


def test_update_config_applies_to_the_next_roll(tmp_path) -> None:
    with Log.open(tmp_path / "t-0", LogConfig()) as log:
        for _ in range(3):
            log.append(_batch())
        assert len(log.segments) == 1
        log.update_config(LogConfig(segment_bytes=300))
        for _ in range(3):
            log.append(_batch())
        assert len(log.segments) > 1 and log.config.segment_bytes == 300


@pytest.mark.parametrize("magic", [0, 1])
def test_upconversion_keeps_records_and_codec(magic) -> None:
    builder = RecordBatchBuilder(magic, Compression.GZIP)
    for i in range(5):
        builder.append(b"k%d" % i, None if i == 2 else b"v%d" % i, timestamp=T0 + i)
    (batch,) = list(to_v2(builder.build().buffer).batches())
    assert (batch.magic, batch.compression) == (2, Compression.GZIP)
    assert [(r.key, r.value) for r in batch.records()] == [(b"k%d" % i, None if i == 2 else b"v%d" % i)
                                                           for i in range(5)]


@given(data=st.binary(max_size=200))
def test_upconversion_of_garbage_raises_typed_errors(data) -> None:
    try:
        to_v2(data)
    except KafkalogError:
        pass


def test_upconversion_refuses_a_bad_crc() -> None:
    builder = RecordBatchBuilder(1)
    builder.append(b"k", b"v", timestamp=T0)
    data = bytearray(builder.build().buffer)
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        to_v2(bytes(data))


_OPS = st.lists(st.tuples(
    st.sampled_from(["cleanup.policy", "retention.ms", "follower.replication.throttled.replicas"]),
    st.integers(0, 3),
    st.sampled_from(["compact", "delete", "1000", "0:1,0:2", "0:2"])), max_size=8)


@given(ops=_OPS)
def test_incremental_alter_configs_against_a_model(ops) -> None:
    """IncrementalAlterConfigs, one op at a time, against a dict model: SET and DELETE replace
    and drop, APPEND and SUBTRACT act on list settings from the value in effect and are refused
    on other settings."""
    from kafkalog.broker._admin_configs import _incremental
    from kafkalog.broker._config import LIST_TOPIC_KEYS, BrokerConfig, topic_defaults
    from kafkalog.errors import InvalidConfigError

    defaults = topic_defaults(BrokerConfig())
    current: dict[str, str] = {}
    for key, op, value in ops:
        model = dict(current)
        if op == 0:
            model[key] = value
        elif op == 1:
            model.pop(key, None)
        elif key in LIST_TOPIC_KEYS:
            items = [v for v in model.get(key, defaults[key]).split(",") if v]
            given = [v for v in value.split(",") if v]
            items = items + [v for v in given if v not in items] if op == 2 else [v for v in items if v not in given]
            model[key] = ",".join(items)
        else:
            with pytest.raises(InvalidConfigError):
                _incremental(current, [{"name": key, "config_operation": op, "value": value}], defaults)
            continue
        current = _incremental(current, [{"name": key, "config_operation": op, "value": value}], defaults)
        assert current == model
