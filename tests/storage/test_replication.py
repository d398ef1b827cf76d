"""The log's half of replication: the high watermark, the last stable offset, leader epochs
(``end_offset_for_epoch``, KIP-320's diverging epoch), fetch isolation, the follower append, and
the follower's truncation decisions (KIP-101, KIP-279), against Kafka's rules and the cases of
Kafka's own tests (``UnifiedLogTest``, ``LeaderEpochFileCacheTest``, ``AbstractFetcherThreadTest``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog import ControlRecordType, LogConfig, RecordBatchBuilder
from kafkalog.checkpoint import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile
from kafkalog.errors import OffsetOutOfRangeError, UnexpectedAppendOffsetError
from kafkalog.follower import (
    Truncation,
    append_fetched,
    apply_leader_offsets,
    fetch_offset_after_out_of_range,
    truncate,
    truncation_for,
)
from kafkalog.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, OffsetAndEpoch
from kafkalog.local_log import FetchIsolation
from kafkalog.log import Log
from kafkalog.producer_state.manager import AppendOrigin

T0 = 1_700_000_000_000


def records(values: list[bytes], *, pid: int = -1, seq: int = -1, txn: bool = False) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                           is_transactional=txn)
    for v in values:
        b.append(b"k", v, timestamp=T0)
    return bytes(b.build().buffer)


def marker(kind: ControlRecordType, pid: int) -> bytes:
    return bytes(RecordBatchBuilder.end_transaction_marker(
        kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=T0).buffer)


@pytest.fixture
def replica(tmp_path):
    opened: list[Log] = []

    def open_replica(name: str = "t-0", broker: str = "b0", **kw) -> Log:
        log = Log.open(tmp_path / broker / name, kw.pop("config", LogConfig()), replicated=True,
                       clock=lambda: T0, **kw)
        opened.append(log)
        return log

    yield open_replica
    for log in opened:
        log.close()


def fetch_all(leader: Log, follower: Log) -> None:
    """One follower fetch of everything the leader has past the follower's end."""
    data = leader.read(follower.log_end_offset, 1 << 30)
    if data.size_in_bytes:
        append_fetched(follower, data.read(0, data.size_in_bytes))
    apply_leader_offsets(follower, high_watermark=leader.high_watermark, log_start_offset=leader.log_start_offset)


def values(log: Log, start: int = 0, end: int | None = None) -> list[tuple[int, bytes | None]]:
    end = log.log_end_offset if end is None else end
    out = []
    offset = max(start, log.log_start_offset)
    while offset < end:
        batches = list(log.read(offset, 1 << 30, max_offset=end).batches())
        if not batches:
            break
        out += [(r.offset, r.value) for b in batches for r in b if r.offset < end]
        offset = batches[-1].last_offset + 1
    return out


# -- the high watermark ----------------------------------------------------------------------


def test_an_unreplicated_log_commits_every_append(tmp_path):
    log = Log.open(tmp_path / "t-0")
    assert not log.replicated
    log.append(records([b"a", b"b"]))
    assert log.high_watermark == log.log_end_offset == 2
    assert log.last_stable_offset == 2
    log.close()
    # An unreplicated log writes no replication-offset-checkpoint (no broker replicates it).
    assert not (tmp_path / REPLICATION_OFFSET_CHECKPOINT).exists()


def test_a_replica_starts_at_the_log_start_and_restores_the_checkpoint(tmp_path, replica):
    log = replica()
    log.append(records([b"a", b"b", b"c"]), leader_epoch=0)
    # Kafka: a replica's high watermark starts at the log start offset, not the log end.
    assert log.high_watermark == 0
    assert log.maybe_increment_high_watermark(2) == 0
    assert log.high_watermark == 2
    log.close()
    checkpoint = tmp_path / "b0" / REPLICATION_OFFSET_CHECKPOINT
    assert OffsetCheckpointFile(checkpoint).read() == {("t", 0): 2}
    log = replica()
    assert (log.high_watermark, log.log_end_offset) == (2, 3)
    log.close()
    # The caller's value wins over the checkpoint, clamped to the log.
    log = replica(high_watermark=99)
    assert log.high_watermark == 3


def test_high_watermark_updates_follow_kafkas_rules(replica):
    log = replica()
    log.append(records([b"a", b"b", b"c", b"d"]), leader_epoch=0)
    # A leader's increment never moves it back, and never past the log end.
    assert log.maybe_increment_high_watermark(3) == 0
    assert log.maybe_increment_high_watermark(2) is None
    assert log.high_watermark == 3
    with pytest.raises(ValueError, match="exceeds the log end offset"):
        log.maybe_increment_high_watermark(5)
    # A follower's update is clamped to [log start, log end] and may move back.
    assert log.update_high_watermark(100) == 4
    assert log.update_high_watermark(1) == 1
    assert log.maybe_update_high_watermark(1) is None
    assert log.maybe_update_high_watermark(2) == 2
    # Truncation below it brings it down (UnifiedLog.truncateTo).
    log.update_high_watermark(4)
    log.truncate_to(2)
    assert log.high_watermark == 2
    # A checkpoint on request, with the other partitions' lines kept.
    log.checkpoint_high_watermark()


def test_delete_records_and_the_log_start_stay_below_the_high_watermark(replica):
    log = replica()
    log.append(records([b"a", b"b", b"c", b"d"]), leader_epoch=0)
    with pytest.raises(OffsetOutOfRangeError, match="high watermark 0"):
        log.delete_records(2)  # nothing is committed yet
    log.maybe_increment_high_watermark(3)
    assert log.delete_records(2) == 2
    # A follower learning the leader's log start offset (maybeIncrementLogStartOffset).
    assert log.maybe_increment_log_start_offset(3, "leader offset incremented")
    assert not log.maybe_increment_log_start_offset(1, "leader offset incremented")
    assert log.log_start_offset == 3


# -- the last stable offset -----------------------------------------------------------------


def test_last_stable_offset_waits_for_the_marker_to_be_committed(replica):
    """UnifiedLogTest.testLastStableOffsetWithUnreplicatedTransaction: a completed transaction
    holds the LSO back until the high watermark passes its marker."""
    log = replica()
    log.append(records([b"a", b"b"], pid=1, seq=0, txn=True), leader_epoch=0)  # 0-1
    assert log.last_stable_offset == 0
    log.append(marker(ControlRecordType.COMMIT, 1), leader_epoch=0, origin=AppendOrigin.COORDINATOR)  # 2
    assert log.producer_state.first_undecided_offset is None
    log.maybe_increment_high_watermark(2)  # the marker is not committed yet
    assert log.last_stable_offset == 0
    log.maybe_increment_high_watermark(3)
    assert log.last_stable_offset == 3
    # read_committed reads stop at the LSO, read_uncommitted at the high watermark.
    log.append(records([b"c"]), leader_epoch=0)  # 3
    assert [o for o, _ in values(log)] == [0, 1, 2, 3]
    hw_read = list(log.read(0, 1 << 20, isolation=FetchIsolation.HIGH_WATERMARK).batches())
    assert hw_read[-1].last_offset == 2


def test_txn_committed_reads_stop_at_an_open_transaction(replica):
    log = replica()
    log.append(records([b"a"]), leader_epoch=0)  # 0
    log.append(records([b"b"], pid=7, seq=0, txn=True), leader_epoch=0)  # 1
    log.append(records([b"c"]), leader_epoch=0)  # 2
    log.maybe_increment_high_watermark(3)
    assert log.last_stable_offset == 1
    got = [b.last_offset for b in log.read(0, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED).batches()]
    assert got == [0]
    got = [b.last_offset for b in log.read(0, 1 << 20, isolation=FetchIsolation.HIGH_WATERMARK).batches()]
    assert got == [0, 1, 2]


# -- leader epochs ---------------------------------------------------------------------------


def test_end_offset_for_epoch(replica):
    """LeaderEpochFileCacheTest's cases, through UnifiedLog.endOffsetForEpoch."""
    log = replica()
    assert log.end_offset_for_epoch(0) is None  # no history
    log.append(records([b"a", b"b"]), leader_epoch=2)  # 0-1
    log.append(records([b"c"]), leader_epoch=4)  # 2
    log.maybe_assign_epoch_start_offset(6, 3)
    log.append(records([b"d", b"e"]), leader_epoch=6)  # 3-4
    assert log.end_offset_for_epoch(6) == OffsetAndEpoch(5, 6)  # the latest: the log end
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(3, 4)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(3, 4)  # unknown: the floor epoch's end
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(0, 1)  # below all: the first start
    assert log.end_offset_for_epoch(7) is None  # above all
    assert log.end_offset_for_epoch(UNDEFINED_EPOCH) is None


def test_diverging_epoch_of_a_follower_fetch(replica):
    """KIP-320 (Partition.readRecords): a fetch whose last fetched epoch ends before the fetch
    offset, or is unknown, diverges."""
    leader = replica()
    leader.append(records([b"a", b"b"]), leader_epoch=1)  # 0-1
    leader.append(records([b"c", b"d"]), leader_epoch=3)  # 2-3
    assert leader.diverging_epoch(2, 1) is None  # epoch 1 ends at 2: in step
    assert leader.diverging_epoch(4, 3) is None
    assert leader.diverging_epoch(3, 1) == OffsetAndEpoch(2, 1)  # the follower has more of epoch 1
    assert leader.diverging_epoch(3, 2) == OffsetAndEpoch(2, 1)  # an epoch the leader never had
    leader.maybe_increment_high_watermark(4)
    leader.delete_records(3)
    with pytest.raises(OffsetOutOfRangeError):
        leader.diverging_epoch(2, 3)  # below the log start


# -- the follower append ---------------------------------------------------------------------


def test_follower_append_keeps_offsets_and_epochs(replica):
    leader, follower = replica(broker="b0"), replica(broker="b1")
    leader.append(records([b"a", b"b"]), leader_epoch=3)
    leader.append(records([b"c"]), leader_epoch=5)
    leader.maybe_increment_high_watermark(2)
    fetch_all(leader, follower)
    assert values(follower) == values(leader)
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    assert follower.high_watermark == 2


def test_unexpected_append_offset_carries_the_offsets_and_the_follower_recovers(replica):
    """Partition.appendRecordsToFollowerOrFutureReplica: when the leader's log start falls inside
    the first fetched batch (after DeleteRecords), an empty follower starts at that batch."""
    leader, follower = replica(broker="b0"), replica(broker="b1")
    leader.append(records([b"a", b"b", b"c", b"d"]), leader_epoch=0)  # one batch 0-3
    leader.maybe_increment_high_watermark(4)
    leader.delete_records(2)
    follower.truncate_fully_and_start_at(2)  # it learnt the leader's start offset
    data = leader.read(2, 1 << 20)
    raw = data.read(0, data.size_in_bytes)
    with pytest.raises(UnexpectedAppendOffsetError) as e:
        follower.append_as_follower(raw)
    assert (e.value.first_offset, e.value.last_offset) == (0, 3)
    append_fetched(follower, raw)
    assert (follower.log_start_offset, follower.log_end_offset) == (0, 4)
    apply_leader_offsets(follower, high_watermark=4, log_start_offset=2)
    assert follower.log_start_offset == 2


def test_out_of_range_fetch_offsets(replica):
    leader, follower = replica(broker="b0"), replica(broker="b1")
    follower.append(records([b"x"] * 5), leader_epoch=0)
    # Behind an uncleanly elected leader: follow its end.
    assert fetch_offset_after_out_of_range(follower, leader_log_start_offset=0, leader_log_end_offset=3) == 3
    assert follower.log_end_offset == 3
    # Behind the leader's log start: start again there.
    assert fetch_offset_after_out_of_range(follower, leader_log_start_offset=10, leader_log_end_offset=12) == 10
    assert (follower.log_start_offset, follower.log_end_offset) == (10, 10)


# -- the follower's truncation: KIP-101 and KIP-279 ------------------------------------------------


def _hw_truncation(log: Log) -> Truncation:
    """Before KIP-101: a follower truncated to its high watermark."""
    return Truncation(log.high_watermark, True)


@pytest.mark.parametrize("by_epoch", [True, False])
def test_kip101_scenario_1_high_watermark_truncation_then_election(replica, by_epoch):
    """KIP-101 scenario 1: B has m2 but its high watermark is still 1 when it restarts; A (whose
    high watermark is 2: m2 was committed) dies before B fetches again; B becomes leader. By
    high watermark B loses the committed m2; by leader epoch it keeps it."""
    a, b = replica(broker="A"), replica(broker="B")
    a.append(records([b"m1"]), leader_epoch=0)
    fetch_all(a, b)
    a.maybe_increment_high_watermark(1)
    a.append(records([b"m2"]), leader_epoch=0)
    fetch_all(a, b)  # B has m2; its high watermark is 1
    a.maybe_increment_high_watermark(2)  # both have m2: committed
    assert (b.log_end_offset, b.high_watermark, a.high_watermark) == (2, 1, 2)
    # B restarts and truncates before fetching.
    b.close()
    b = replica(broker="B")
    if by_epoch:
        t = truncation_for(b, a.end_offset_for_epoch(b.latest_epoch), fetch_offset=b.high_watermark)
    else:
        t = _hw_truncation(b)
    truncate(b, t)
    # A dies; B is elected.
    b.maybe_assign_epoch_start_offset(1, b.log_end_offset)
    kept = [v for _, v in values(b)]
    assert kept == ([b"m1", b"m2"] if by_epoch else [b"m1"])


@pytest.mark.parametrize("by_epoch", [True, False])
def test_kip101_scenario_2_divergence_after_both_fail(replica, by_epoch):
    """KIP-101 scenario 2: A (leader, epoch 0) has m1 and m2, B only m1 (both high watermarks at
    1: m2 is not committed); both fail; B comes back first, is elected (epoch 1) and takes m3 at
    offset 1; A comes back as a follower. By high watermark A keeps m2 at offset 1 while B has
    m3 there (the replicas diverge); by epoch A truncates m2 away and fetches m3."""
    a, b = replica(broker="A"), replica(broker="B")
    a.append(records([b"m1"]), leader_epoch=0)
    fetch_all(a, b)
    a.maybe_increment_high_watermark(1)
    apply_leader_offsets(b, high_watermark=1, log_start_offset=0)
    a.append(records([b"m2"]), leader_epoch=0)  # not on B
    a.close()
    b.close()
    b = replica(broker="B")
    b.maybe_assign_epoch_start_offset(1, b.log_end_offset)
    b.append(records([b"m3"]), leader_epoch=1)
    a = replica(broker="A")
    if by_epoch:
        t = truncation_for(a, b.end_offset_for_epoch(a.latest_epoch), fetch_offset=a.high_watermark)
    else:
        t = _hw_truncation(a)
        t = Truncation(max(t.offset, a.log_end_offset), True)  # A's HW recovered to its log end
    truncate(a, t)
    if a.log_end_offset <= b.log_end_offset:
        fetch_all(b, a)
    diverged = values(a, 0, 2) != values(b, 0, 2)
    assert diverged is (not by_epoch)


def test_kip279_two_rounds_of_truncation(replica):
    """KIP-279: the leader answers with an epoch the follower does not know; the follower cuts to
    the end of its largest epoch below it and asks again."""
    leader, follower = replica(broker="L"), replica(broker="F")
    # Leader: epoch 0 at 0, epoch 1 at 5, epoch 3 at 10 (log end 12).
    leader.append(records([b"x"] * 5), leader_epoch=0)
    leader.append(records([b"y"] * 5), leader_epoch=1)
    leader.append(records([b"z"] * 2), leader_epoch=3)
    # Follower: epoch 0 at 0 (7 records), epoch 2 at 7 (log end 12).
    follower.append(records([b"x"] * 5), leader_epoch=0)
    follower.append(records([b"w"] * 2), leader_epoch=0)
    follower.append(records([b"v"] * 5), leader_epoch=2)
    # Round 1: the follower asks for its latest epoch, 2; the leader answers epoch 1 ending at 10.
    answer = leader.end_offset_for_epoch(follower.latest_epoch)
    assert answer == OffsetAndEpoch(10, 1)
    first = truncation_for(follower, answer, fetch_offset=follower.high_watermark)
    assert first == Truncation(7, False)  # the end of epoch 0 here; ask again
    truncate(follower, first)
    # Round 2: the follower's latest epoch is now 0; the leader's epoch 0 ends at 5.
    answer = leader.end_offset_for_epoch(follower.latest_epoch)
    assert answer == OffsetAndEpoch(5, 0)
    second = truncation_for(follower, answer, fetch_offset=follower.high_watermark)
    assert second == Truncation(5, True)
    truncate(follower, second)
    fetch_all(leader, follower)
    assert values(follower) == values(leader)


def test_truncation_fallbacks():
    """AbstractFetcherThread.getOffsetTruncationState's fallbacks, on a stub log."""

    class Stub:
        log_end_offset = 10

        def end_offset_for_epoch(self, epoch):
            return None if epoch == 9 else OffsetAndEpoch(8, epoch)

    log = Stub()
    # An undefined end offset: the initial fetch offset.
    assert truncation_for(log, OffsetAndEpoch(UNDEFINED_EPOCH_OFFSET, 3), fetch_offset=4) == Truncation(4, True)
    assert truncation_for(log, None, fetch_offset=4) == Truncation(4, True)
    # An answer without an epoch (old protocol): the leader's offset.
    assert truncation_for(log, OffsetAndEpoch(6, UNDEFINED_EPOCH), fetch_offset=4) == Truncation(6, True)
    # An epoch the follower did not track: the leader's offset.
    assert truncation_for(log, OffsetAndEpoch(12, 9), fetch_offset=4) == Truncation(10, True)
    # The same epoch: the smaller end.
    assert truncation_for(log, OffsetAndEpoch(7, 2), fetch_offset=4) == Truncation(7, True)
