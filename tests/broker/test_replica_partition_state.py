"""The leader's replication rules as pure functions over a PartitionState (Kafka's
``Replica.updateFetchState``, ``Partition.maybeIncrementLeaderHW``, ``isFollowerInSync`` and
``getOutOfSyncReplicas``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkalog.broker._partition_state import FollowerState, PartitionState


def leader_state(isr: list[int], replicas: list[int] = [0, 1, 2], now: int = 1_000) -> PartitionState:  # noqa: B006
    state = PartitionState(0, leader=0, leader_epoch=3, partition_epoch=5, replicas=list(replicas), isr=list(isr))
    state.become_leader(log_end_offset=10, now_ms=now)
    return state


def test_a_fetch_at_the_log_end_catches_up_now_and_one_at_the_previous_end_as_of_then() -> None:
    f = FollowerState()
    f.update(5, 10, now_ms=100)  # behind
    assert f.last_caught_up_ms == 0 and f.log_end_offset == 5
    f.update(10, 12, now_ms=200)  # reached the end the leader had at the previous fetch (10)
    assert f.last_caught_up_ms == 100
    f.update(12, 12, now_ms=300)  # at the log end
    assert f.last_caught_up_ms == 300


def test_the_high_watermark_is_the_least_log_end_of_the_isr() -> None:
    state = leader_state([0, 1, 2])
    assert state.high_watermark_candidate(10) == -1  # no follower heard from yet
    state.followers[1].update(7, 10, 1_001)
    state.followers[2].update(9, 10, 1_001)
    assert state.high_watermark_candidate(10) == 7
    state.isr = [0, 2]  # replica 1 left the ISR: it no longer holds the high watermark back
    assert state.high_watermark_candidate(10) == 9
    state.pending_isr = [0, 1, 2]  # being added back: counted at once (Kafka's maximal ISR)
    assert state.high_watermark_candidate(10) == 7


def test_a_follower_joins_once_at_the_high_watermark_and_the_epoch_start() -> None:
    state = leader_state([0, 1])
    state.followers[2].update(9, 10, 1_001)
    assert state.isr_to_expand(2, high_watermark=9) is None  # below the leader's epoch start (10)
    state.followers[2].update(10, 10, 1_002)
    assert state.isr_to_expand(2, high_watermark=10) == [0, 1, 2]
    assert state.isr_to_expand(1, high_watermark=10) is None  # already in
    state.pending_isr = [0, 1, 2]
    assert state.isr_to_expand(2, high_watermark=10) is None  # one change in flight at a time


@given(lag=st.integers(1, 10_000), elapsed=st.integers(0, 20_000))
def test_followers_fall_out_of_the_isr_after_the_lag(lag: int, elapsed: int) -> None:
    state = leader_state([0, 1, 2], now=1_000)
    state.followers[2].update(10, 10, 1_000)  # caught up at 1000; replica 1 too (become_leader)
    shrunk = state.isr_to_shrink(1_000 + elapsed, lag)
    assert shrunk == (None if elapsed <= lag else [0])
    assert state.isr_to_shrink(1_000 + elapsed, lag) == shrunk  # a pure question: nothing changed


def test_a_follower_has_no_leader_side_state() -> None:
    state = leader_state([0, 1, 2])
    state.leader = 1
    state.become_follower()
    assert state.is_follower and not state.is_leader and state.followers == {} and state.pending_isr is None
