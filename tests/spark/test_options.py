"""Spark's Kafka source options, parsed on the driver (no Spark needed here): one subscription
strategy, ``assign``, where bounds may be given in batch and stream queries, ``-1``/``-2`` where
Spark rejects them, ``minPartitions`` (Spark's KafkaOffsetRangeCalculator),
``minOffsetsPerTrigger`` with ``maxTriggerDelay``, ``includeMetadata``."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import Log, LogConfig, RecordBatchBuilder
from kafkalog.errors import InvalidConfigError
from kafkalog.spark._discovery import _discover, _missing_assigned
from kafkalog.spark._options import DEFAULT_MAX_TRIGGER_DELAY_MS, _ReadOptions
from kafkalog.spark._partition import _PartitionLog
from kafkalog.spark._plan import _Bounds, _offset_ranges, _plan, _resolve_bounds

pytestmark = pytest.mark.spark


def parse(streaming: bool = False, **options):
    return _ReadOptions.parse({"path": "/data", **options}, streaming=streaming)


def build(directory: Path, batches: int, per_batch: int = 5) -> None:
    with Log.open(directory, LogConfig(segment_bytes=2048, index_interval_bytes=256)) as log:
        for i in range(batches):
            b = RecordBatchBuilder()
            for j in range(per_batch):
                b.append(f"k{j}".encode(), f"v{i}-{j}".encode() * 5, timestamp=1_700_000_000_000 + i)
            log.append(b.build())


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("opts")
    build(root / "orders-0", 80)
    build(root / "orders-1", 8)
    build(root / "orders-2", 2)
    build(root / "audit-0", 4)
    return root


# ----------------------------------------------------------------------------------------------
# Subscription strategies


@pytest.mark.parametrize("given_", [
    {"subscribe": "a", "subscribePattern": "a.*"},
    {"subscribe": "a", "assign": '{"a": [0]}'},
    {"subscribePattern": "a", "assign": '{"a": [0]}'},
    {"subscribe": "a", "subscribePattern": "a", "assign": '{"a": [0]}'},
])
def test_only_one_subscription_strategy(given_):
    with pytest.raises(InvalidConfigError, match="only one of subscribe, subscribePattern, assign"):
        parse(**given_)
    with pytest.raises(InvalidConfigError, match="only one of"):
        parse(streaming=True, **given_)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("subscribe", " , ", "no topics to subscribe to"),
    ("subscribePattern", "  ", "pattern to subscribe is empty"),
    ("subscribePattern", "(", "not a regular expression"),
    ("assign", "orders", "no topic-partitions to assign"),
    ("assign", "{}", "no topic-partitions to assign"),
    ("assign", '{"orders": 0}', "JSON like"),
    ("assign", '{"orders": ["0"]}', "JSON like"),
    ("assign", '{"orders": [0', "JSON like"),
    ("assign", '{"orders": [-1]}', "negative"),
])
def test_bad_strategy_values(name, value, message):
    with pytest.raises(InvalidConfigError, match=message):
        parse(**{name: value})


def test_assign_reads_only_the_listed_partitions(logs):
    options = _ReadOptions.parse({"path": str(logs), "assign": '{"orders": [1, 2], "audit": []}'})
    assert options.assign == (("audit", ()), ("orders", (1, 2)))
    dirs = _discover(options)
    assert [(d.topic, d.partition) for d in dirs] == [("orders", 1), ("orders", 2)]
    assert _missing_assigned(options, dirs) == []
    options = _ReadOptions.parse({"path": str(logs), "assign": '{"orders": [0, 7], "nope": [0]}'})
    dirs = _discover(options)
    assert [(d.topic, d.partition) for d in dirs] == [("orders", 0)]
    assert _missing_assigned(options, dirs) == ["nope-0", "orders-7"]


# ----------------------------------------------------------------------------------------------
# Bounds: where they may be given, -1 and -2


@pytest.mark.parametrize("name", ["endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"])
def test_ending_bounds_are_an_error_on_a_stream(name):
    value = {"endingOffsets": "latest", "endingOffsetsByTimestamp": '{"a": {"0": 5}}', "endingTimestamp": "5"}[name]
    with pytest.raises(InvalidConfigError, match=f"option {name} is not valid in streaming queries"):
        parse(streaming=True, **{name: value})
    parse(**{name: value})  # fine in a batch query


@pytest.mark.parametrize(("options", "message"), [
    ({"startingOffsets": "latest"}, "startingOffsets can't be latest"),
    ({"startingOffsets": '{"orders": {"0": 3, "1": -1}}'}, "startingOffsets for orders-1 can't be latest"),
    ({"endingOffsets": "earliest"}, "endingOffsets can't be earliest"),
    ({"endingOffsets": '{"orders": {"0": -2}}'}, "endingOffsets for orders-0 can't be earliest"),
    ({"startingOffsets": '{"orders": {"0": 9}}', "endingOffsets": '{"orders": {"0": 4}}'}, "greater than"),
    ({"startingOffsets": '{"orders": {"0": -3}}'}, "below -2"),
])
def test_batch_bound_errors(options, message):
    with pytest.raises(InvalidConfigError, match=message):
        parse(**options)


def test_batch_bounds_spark_accepts():
    parse(startingOffsets='{"orders": {"0": -2, "1": 4}}', endingOffsets='{"orders": {"0": -1, "1": 4}}')
    # A timestamp takes precedence over the offsets option (Spark's order), so latest is not looked at.
    parse(startingTimestamp="5", startingOffsets="latest")
    parse(endingTimestamp="5", endingOffsets="earliest")
    # On a stream -1 and -2 both make sense as a start.
    assert parse(streaming=True, startingOffsets='{"orders": {"0": -1, "1": -2}}').starting == {"orders": {0: -1, 1: -2}}
    assert parse(streaming=True).starting == "latest"


def test_stream_only_options_are_ignored_with_a_warning_in_batch(caplog):
    with caplog.at_level(logging.WARNING, logger="kafkalog.spark"):
        parse(maxOffsetsPerTrigger="5", minOffsetsPerTrigger="2", maxTriggerDelay="1m")
    assert sum("ignored in batch queries" in r.getMessage() for r in caplog.records) == 3


# ----------------------------------------------------------------------------------------------
# minOffsetsPerTrigger, maxTriggerDelay, minPartitions, includeMetadata


@pytest.mark.parametrize(("text", "ms"), [
    ("500", 500), ("250ms", 250), ("30s", 30_000), ("15m", 900_000), ("2min", 120_000), ("1h", 3_600_000),
    ("1d", 86_400_000), (" 10S ", 10_000),
])
def test_max_trigger_delay_durations(text, ms):
    assert parse(streaming=True, maxTriggerDelay=text).max_trigger_delay_ms == ms
    assert parse(streaming=True).max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS == 900_000


@pytest.mark.parametrize("text", ["soon", "5 minutes", "1w", "-5s", "1.5s", ""])
def test_bad_max_trigger_delay(text):
    with pytest.raises(InvalidConfigError, match="maxTriggerDelay"):
        parse(streaming=True, maxTriggerDelay=text)


def test_min_and_max_offsets_per_trigger():
    o = parse(streaming=True, minOffsetsPerTrigger="10", maxOffsetsPerTrigger="10")
    assert (o.min_offsets_per_trigger, o.max_offsets_per_trigger) == (10, 10)
    with pytest.raises(InvalidConfigError, match=r"minOffsetsPerTrigger \(11\) is higher than maxOffsetsPerTrigger \(10\)"):
        parse(streaming=True, minOffsetsPerTrigger="11", maxOffsetsPerTrigger="10")
    for bad in ("0", "-1", "x"):
        with pytest.raises(InvalidConfigError, match="minOffsetsPerTrigger"):
            parse(streaming=True, minOffsetsPerTrigger=bad)


@pytest.mark.parametrize("bad", ["0", "-3", "two"])
def test_min_partitions_must_be_positive(bad):
    with pytest.raises(InvalidConfigError, match="minPartitions"):
        parse(minPartitions=bad)


def test_include_metadata_flag():
    assert parse().include_metadata is False
    assert parse(includeMetadata="TRUE").include_metadata is True
    with pytest.raises(InvalidConfigError, match="option includeMetadata = .*: expected true or false"):
        parse(includeMetadata="yes")


def test_offset_ranges_follow_sparks_calculator():
    b = _Bounds
    # Enough ranges already: unchanged (empty ones dropped).
    assert _offset_ranges([("a", b(0, 10)), ("b", b(5, 5))], 1) == {"a": [b(0, 10)]}
    # Spark's test: sizes 1 and 10, minPartitions 3 -> 1 and 2 parts ("evenly split" the big one).
    got = _offset_ranges([("a", b(0, 1)), ("b", b(0, 10))], 3)
    assert got == {"a": [b(0, 1)], "b": [b(0, 5), b(5, 10)]}
    # One range, 4 parts of equal offsets, the last taking the rest.
    assert _offset_ranges([("a", b(1, 12))], 4) == {"a": [b(1, 3), b(3, 6), b(6, 9), b(9, 12)]}
    # More parts than offsets: no empty part.
    assert _offset_ranges([("a", b(0, 2))], 5) == {"a": [b(0, 1), b(1, 2)]}


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3_000)), min_size=1, max_size=8),
       st.integers(1, 40))
def test_offset_ranges_cover_each_range_exactly(ranges, min_partitions):
    bounds = [(str(i), _Bounds(start, start + size)) for i, (start, size) in enumerate(ranges)]
    got = _offset_ranges(bounds, min_partitions)
    nonempty = [(k, v) for k, v in bounds if v.end > v.start]
    assert set(got) == {k for k, _ in nonempty}
    for key, whole in nonempty:
        parts = got[key]
        assert parts[0].start == whole.start and parts[-1].end == whole.end
        assert all(p.start < p.end for p in parts)
        assert all(x.end == y.start for x, y in itertools.pairwise(parts))
    total = sum(len(p) for p in got.values())
    if len(nonempty) < min_partitions:
        # Spark: "approximately" minPartitions, never fewer than the ranges.
        assert total >= len(nonempty)


def test_min_partitions_splits_offset_ranges_into_input_partitions(logs):
    def slices(**extra):
        options = _ReadOptions.parse({"path": str(logs), "subscribe": "orders", "maxBytesPerPartition": str(1 << 30), **extra})
        plogs = [_PartitionLog(d, options) for d in _discover(options)]
        return plogs, _plan(plogs, _resolve_bounds(plogs, options), options)

    plogs, plain = slices()
    _, split = slices(minPartitions="40")
    assert len(split) > len(plain)
    # Every offset planned exactly once: the ranges of each partition tile its bounds.
    for plog in plogs:
        mine = [s for s in split if (s.topic, s.partition) == (plog.dir.topic, plog.dir.partition)]
        ranges = sorted({(s.start_offset, s.end_offset) for s in mine})
        for (a, b), (c, d) in itertools.pairwise(ranges):
            assert b >= c
    # orders-0 holds 400 of the 450 offsets: Spark's rule gives it most of the 40 parts.
    zero = {(s.start_offset, s.end_offset) for s in split if s.partition == 0}
    assert len({e for _, e in zero}) >= 30
