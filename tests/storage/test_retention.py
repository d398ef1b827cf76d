"""Retention as pure functions, against Kafka's deleteOldSegments passes, and the segment map."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from kafkalog import LogConfig
from kafkalog.offline_retention import plan_retention
from kafkalog.log_segments import LogSegments


def seg(base, size, ts):
    return SimpleNamespace(base_offset=base, size=size, largest_timestamp=ts)


SEGS = [seg(0, 100, 1000), seg(10, 100, 2000), seg(20, 100, 3000), seg(30, 50, 9000)]


def bases(plan):
    return [d.base_offset for d in plan.deletions]


def test_time_retention_deletes_the_expired_prefix():
    plan = plan_retention(SEGS, LogConfig(retention_ms=5000), 8000, log_start_offset=0, log_end_offset=35)
    assert bases(plan) == [0, 10] and plan.new_log_start_offset == 20 and not plan.needs_roll
    assert all(d.reason == "retention.ms" for d in plan.deletions)


def test_time_retention_stops_at_the_first_kept_segment():
    """A segment with a future (or recent) timestamp pins every later one, as in Kafka."""
    segs = [seg(0, 100, 1000), seg(10, 100, 10**15), seg(20, 100, 1000), seg(30, 10, 1000)]
    plan = plan_retention(segs, LogConfig(retention_ms=10), 5000, log_start_offset=0, log_end_offset=35)
    assert bases(plan) == [0]


def test_size_retention_keeps_the_log_at_or_above_the_limit():
    plan = plan_retention(SEGS, LogConfig(retention_bytes=200, retention_ms=-1), 0, log_start_offset=0, log_end_offset=35)
    assert bases(plan) == [0]  # 350 -> 250; removing the next (100) would leave 150 < 200
    assert plan_retention(SEGS, LogConfig(retention_bytes=400, retention_ms=-1), 0, log_start_offset=0, log_end_offset=35).deletions == []


def test_everything_expired_needs_a_roll():
    plan = plan_retention(SEGS, LogConfig(retention_ms=1), 10**6, log_start_offset=0, log_end_offset=35)
    assert bases(plan) == [0, 10, 20, 30] and plan.needs_roll and plan.new_log_start_offset == 35


def test_empty_active_segment_is_never_deleted():
    segs = SEGS[:3] + [seg(30, 0, -1)]
    plan = plan_retention(segs, LogConfig(retention_ms=1), 10**6, log_start_offset=0, log_end_offset=30)
    assert bases(plan) == [0, 10, 20] and not plan.needs_roll


def test_high_watermark_guard():
    plan = plan_retention(SEGS, LogConfig(retention_ms=1), 10**6, log_start_offset=0, log_end_offset=35, high_watermark=15)
    assert bases(plan) == [0]


def test_log_start_offset_pass_runs_for_compacted_topics_only_that_pass():
    config = LogConfig(cleanup_policy=("compact",), retention_ms=1, retention_bytes=1)
    plan = plan_retention(SEGS, config, 10**6, log_start_offset=25, log_end_offset=35)
    assert bases(plan) == [0, 10] and {d.reason for d in plan.deletions} == {"log-start-offset"}


def test_passes_run_in_kafka_order():
    """Start offset first, then size, then time, each over what the previous left."""
    config = LogConfig(retention_bytes=150, retention_ms=4500)
    plan = plan_retention(SEGS, config, 8000, log_start_offset=12, log_end_offset=35)
    assert [(d.base_offset, d.reason) for d in plan.deletions] == [
        (0, "log-start-offset"),
        (10, "retention.bytes"),
        (20, "retention.ms"),
    ]


@given(
    st.lists(st.tuples(st.integers(1, 1000), st.integers(0, 10_000)), min_size=1, max_size=12),
    st.integers(-1, 5000),
    st.integers(-1, 20_000),
    st.integers(0, 20_000),
)
def test_plan_is_a_prefix_and_keeps_a_segment(shape, retention_bytes, retention_ms, now):
    """Deletions are always the oldest segments in order, and never leave the log without a
    segment unless a roll is requested."""
    segs = []
    base = 0
    for size, ts in shape:
        segs.append(seg(base, size, ts))
        base += 10
    config = LogConfig(retention_bytes=retention_bytes, retention_ms=retention_ms)
    plan = plan_retention(segs, config, now, log_start_offset=0, log_end_offset=base)
    assert bases(plan) == [s.base_offset for s in segs[: len(plan.deletions)]]
    assert plan.needs_roll == (len(plan.deletions) == len(segs))


def test_log_segments_map():
    m = LogSegments()
    for b in (20, 0, 10):
        m.add(SimpleNamespace(base_offset=b, size=1))
    assert m.base_offsets() == [0, 10, 20] and len(m) == 3
    assert m.floor(15).base_offset == 10 and m.floor(-1) is None
    assert m.higher(10).base_offset == 20 and m.higher(20) is None
    assert m.lower(10).base_offset == 0 and m.lower(0) is None
    assert [s.base_offset for s in m.values(12, 20)] == [10]
    assert m.first.base_offset == 0 and m.last.base_offset == 20 and m.size_in_bytes == 3
    snapshot = m.values()
    m.remove(10)
    assert [s.base_offset for s in snapshot] == [0, 10, 20]  # readers keep their view
    assert m.base_offsets() == [0, 20]
