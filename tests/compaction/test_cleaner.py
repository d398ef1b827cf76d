"""The log cleaner: the offset map, ``filter_to``, Kafka's keep/drop rules, choosing work,
checkpoints, uncleanable logs, the background thread, and Kafka-written compacted topics.

The model-based property test and the swap-protocol crash tests are in
``test_cleaner_model.py`` and ``test_cleaner_crash.py``.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from conftest import DATA, examples, scaled, wait_until
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import (
    Compression,
    ControlRecordType,
    CorruptRecordError,
    InvalidConfigError,
    Log,
    LogConfig,
    MemoryRecords,
    RecordBatchBuilder,
    TimestampType,
)
from kafkalog.cleaner import LogCleaner, group_segments_by_size
from kafkalog.cleaner_manager import cleanable_offsets
from kafkalog.cleaner_stats import CleanerProgress, Throttler
from kafkalog.errors import LogCleaningAbortedError
from kafkalog.cleaner_offset_map import OffsetMap
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog.memory_records import BatchRetention, RecordFilter, filter_to
from kafkalog.transaction_index import AbortedTxn

T0 = 1_700_000_000_000
DAY = 86_400_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def kv(
    pairs,
    *,
    magic: int = 2,
    codec: Compression = Compression.NONE,
    ts: int = T0,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    txn: bool = False,
    base_offset: int = 0,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> MemoryRecords:
    """One batch of ``(key, value)`` pairs (str or bytes or None)."""
    b = RecordBatchBuilder(
        magic,
        codec,
        timestamp_type if magic > 0 else TimestampType.NO_TIMESTAMP_TYPE,
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
        log_append_time=ts if timestamp_type == TimestampType.LOG_APPEND_TIME else None,
    )
    for i, (k, v) in enumerate(pairs):
        k = k.encode() if isinstance(k, str) else k
        v = v.encode() if isinstance(v, str) else v
        headers = [("h", b"%d" % i)] if magic == 2 and i % 2 else []
        b.append(k, v, timestamp=ts + i if magic > 0 else -1, headers=headers)
    return b.build()


def marker(kind: ControlRecordType, pid: int, epoch: int = 0, ts: int = T0) -> MemoryRecords:
    return RecordBatchBuilder.end_transaction_marker(kind, producer_id=pid, producer_epoch=epoch, coordinator_epoch=1, timestamp=ts)


def compact(**kw) -> LogConfig:
    kw.setdefault("segment_bytes", 1024)
    kw.setdefault("file_delete_delay_ms", 0)
    return LogConfig(cleanup_policy="compact", **kw)


def all_records(log: Log) -> list:
    return [r for seg in log.segments for r in seg.log.records()]


def committed_view(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a read_committed consumer reads (Kafka's consumer algorithm: aborted transactions
    from the fetch response, skipped per producer until their ABORT marker; no control records)."""
    aborted = sorted(log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset), key=lambda t: t.first_offset)
    aborting: set[int] = set()
    out = []
    i = 0
    for segment in log.segments:
        for batch in segment.log.batches():
            while i < len(aborted) and aborted[i].first_offset <= batch.last_offset:
                aborting.add(aborted[i].producer_id)
                i += 1
            if batch.is_control:
                recs = batch.records()
                if recs and recs[0].control_type is ControlRecordType.ABORT:
                    aborting.discard(batch.producer_id)
                continue
            if batch.is_transactional and batch.producer_id in aborting:
                continue
            out.extend((r.offset, r.key, r.value) for r in batch.records())
    return out


def latest_per_key(view) -> dict:
    latest = {}
    for offset, key, value in view:
        latest[key] = (offset, value)
    return latest


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_log(tmp_path, clock):
    opened = []

    def opener(config: LogConfig | None = None, name: str = "topic-0") -> Log:
        log = Log.open(tmp_path / name, config or compact(), clock=clock)
        opened.append(log)
        return log

    yield opener
    for log in opened:
        log.close()


@pytest.fixture
def cleaner(clock) -> LogCleaner:
    c = LogCleaner(dedupe_buffer_size=1 << 20, clock=clock, backoff_ms=20)
    yield c
    c.stop()


# -- the offset map -------------------------------------------------------------------------------


def test_offset_map_is_24_bytes_a_slot() -> None:
    m = OffsetMap(24 * 1000 + 7)
    assert m.slots == 1000 and m.memory == 24_000
    assert m.get(b"a") == -1 and m.latest_offset == -1
    m.put(b"a", 5)
    m.put(b"b", 7)
    m.put(b"a", 9)
    assert (m.get(b"a"), m.get(b"b"), m.size, m.latest_offset) == (9, 7, 2, 9)
    assert m.utilization == pytest.approx(0.002)
    m.update_latest_offset(20)
    assert m.latest_offset == 20
    m.clear()
    assert (m.get(b"a"), m.size, m.latest_offset) == (-1, 0, -1)
    with pytest.raises(InvalidConfigError):
        OffsetMap(23)


def test_offset_map_refuses_to_overfill() -> None:
    m = OffsetMap(24 * 4)
    for i in range(4):
        m.put(b"%d" % i, i)
    assert [m.get(b"%d" % i) for i in range(4)] == [0, 1, 2, 3]
    m.put(b"2", 40)  # an existing key still updates
    assert m.get(b"2") == 40
    with pytest.raises(OverflowError):
        m.put(b"new", 5)
    assert m.get(b"absent") == -1  # a lookup in a full map ends


@examples(60)
@given(st.lists(st.tuples(st.binary(max_size=12), st.integers(0, 2**62)), max_size=200), st.integers(220, 400))
def test_offset_map_agrees_with_a_dict(puts, slots) -> None:
    m = OffsetMap(24 * slots)
    model = {}
    for key, offset in puts:
        m.put(key, offset)
        model[key] = offset
    assert m.size == len(model)
    for key, offset in model.items():
        assert m.get(key) == offset
    assert m.get(b"\xff" * 13) == -1


# -- filter_to ------------------------------------------------------------------------------------


class MaskFilter(RecordFilter):
    def __init__(self, masks, retention=BatchRetention.DELETE_EMPTY, now=T0, delete_retention_ms=DAY, marker=False):
        super().__init__(now, delete_retention_ms)
        self.masks = list(masks)
        self.retention = retention
        self.marker = marker

    def check_batch_retention(self, batch):
        return self.retention, self.marker

    def retain(self, batch, records):
        return self.masks.pop(0)


def _only_batch(buf) -> object:
    batches = list(MemoryRecords(bytes(buf)).batches(validate=True))
    assert len(batches) == 1
    return batches[0]


def test_filter_to_copies_whole_batches_byte_for_byte(magic_codec) -> None:
    magic, codec = magic_codec
    src = kv([("a", "1"), ("b", "2"), ("c", "3")], magic=magic, codec=codec, base_offset=10)
    batches = list(src.batches())
    out = bytearray()
    result = filter_to(batches, MaskFilter([[True] * len(b.records()) for b in batches]), out)
    assert bytes(out) == bytes(src.buffer)
    assert (result.records_read, result.records_retained, result.batches_rewritten) == (3, 3, 0)
    assert result.max_offset == 12
    assert [r.size for r in result.retained] == [b.size_in_bytes for b in batches]


def test_filter_to_rewrites_with_the_same_codec_and_metadata(magic_codec) -> None:
    magic, codec = magic_codec
    pairs = [("a", "1"), ("b", None), ("c", "3"), ("d", "4")]
    src = kv(pairs, magic=magic, codec=codec, base_offset=100)
    batches = list(src.batches())
    if len(batches) > 1:  # uncompressed v0/v1: one message per batch
        masks = [[i in (0, 2)] for i in range(4)]
    else:
        masks = [[True, False, True, False]]
    out = bytearray()
    result = filter_to(batches, MaskFilter(masks), out)
    kept = [(r.offset, r.key, r.value, r.timestamp) for r in MemoryRecords(bytes(out)).records()]
    original = [(r.offset, r.key, r.value, r.timestamp) for r in src.records()]
    assert kept == [original[0], original[2]]
    assert result.records_retained == 2 and result.max_offset == 102
    for batch in MemoryRecords(bytes(out)).batches(validate=True):
        assert batch.compression == codec
        assert batch.magic == magic


def test_filter_to_keeps_v2_producer_metadata_and_last_offset() -> None:
    src = kv([("a", "1"), ("b", "2"), ("c", "3")], codec=Compression.LZ4, pid=7, epoch=3, seq=40, txn=True, base_offset=50)
    original = next(src.batches())
    out = bytearray()
    filter_to([original], MaskFilter([[False, True, False]]), out)
    b = _only_batch(out)
    assert (b.base_offset, b.last_offset, b.count) == (50, 52, 1)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == (7, 3, 40, 42)
    assert b.is_transactional and not b.is_control and b.compression is Compression.LZ4
    assert b.partition_leader_epoch == original.partition_leader_epoch
    (r,) = b.records()
    assert (r.offset, r.key, r.value, r.timestamp, r.headers) == (51, b"b", b"2", T0 + 1, original.records()[1].headers)
    assert b.delete_horizon_ms is None


def test_filter_to_stamps_the_delete_horizon_once() -> None:
    src = kv([("a", "1"), ("b", None)], ts=T0)
    out = bytearray()
    result = filter_to(list(src.batches()), MaskFilter([[True, True]], now=T0 + 5000), out)
    b = _only_batch(out)
    assert result.horizons_set == 1 and b.delete_horizon_ms == T0 + 5000 + DAY
    assert b.base_timestamp == T0 + 5000 + DAY  # the base timestamp field holds the horizon
    assert [(r.key, r.value, r.timestamp) for r in b.records()] == [(b"a", b"1", T0), (b"b", None, T0 + 1)]
    assert b.max_timestamp == T0 + 1
    # A later pass keeps the horizon as it is (a whole batch is copied).
    out2 = bytearray()
    filter_to([b], MaskFilter([[True, True]], now=T0 + 10_000), out2)
    assert bytes(out2) == bytes(out)


def test_filter_to_keeps_an_empty_header_for_producer_state() -> None:
    src = kv([("a", "1"), ("b", "2")], pid=9, epoch=1, seq=5, base_offset=30)
    out = bytearray()
    result = filter_to(list(src.batches()), MaskFilter([[False, False]], retention=BatchRetention.RETAIN_EMPTY), out)
    b = _only_batch(out)
    assert len(out) == 61 and result.empty_batches == 1 and result.records_retained == 0
    assert (b.base_offset, b.last_offset, b.count, b.producer_id, b.base_sequence, b.last_sequence) == (30, 31, 0, 9, 5, 6)
    assert b.records() == [] and b.max_timestamp == T0 + 1 and b.compression is Compression.NONE
    # DELETE drops it without reading; DELETE_EMPTY drops it once empty; legacy is never kept empty.
    for retention in (BatchRetention.DELETE, BatchRetention.DELETE_EMPTY):
        out = bytearray()
        filter_to(list(src.batches()), MaskFilter([[False, False]], retention=retention), out)
        assert out == b""
    legacy = kv([("a", "1")], magic=1, codec=Compression.GZIP)
    out = bytearray()
    filter_to(list(legacy.batches()), MaskFilter([[False]], retention=BatchRetention.RETAIN_EMPTY), out)
    assert out == b""


def test_filter_to_legacy_wrapper_sits_at_the_last_kept_offset() -> None:
    src = kv([("a", "1"), ("b", "2"), ("c", "3")], magic=1, codec=Compression.SNAPPY, base_offset=20,
             timestamp_type=TimestampType.LOG_APPEND_TIME, ts=T0 + 99)  # fmt: skip
    out = bytearray()
    filter_to(list(src.batches()), MaskFilter([[True, True, False]]), out)
    b = _only_batch(out)
    assert (b.base_offset, b.last_offset, b.timestamp_type, b.max_timestamp) == (20, 21, TimestampType.LOG_APPEND_TIME, T0 + 99)
    assert [(r.offset, r.key, r.timestamp) for r in b.records()] == [(20, b"a", T0 + 99), (21, b"b", T0 + 99)]


@examples(80)
@given(
    st.sampled_from([(m, c) for m in (0, 1, 2) for c in Compression if not (c is Compression.ZSTD and m < 2)]),
    st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.one_of(st.none(), st.binary(max_size=30)), st.booleans()),
             min_size=1, max_size=12),
)  # fmt: skip
def test_filter_to_keeps_exactly_what_the_filter_says(magic_codec, rows) -> None:
    magic, codec = magic_codec
    src = kv([(k, v) for k, v, _ in rows], magic=magic, codec=codec, base_offset=1000)
    batches = list(src.batches())
    flags = [keep for _, _, keep in rows]
    masks, i = [], 0
    for b in batches:
        n = len(b.records())
        masks.append(flags[i : i + n])
        i += n
    out = bytearray()
    filter_to(batches, MaskFilter(masks), out)
    got = [(r.offset, r.key, r.value, r.headers) for r in MemoryRecords(bytes(out)).records()]
    want = [(r.offset, r.key, r.value, r.headers) for r, keep in zip(src.records(), flags) if keep]
    assert got == want
    assert sum(1 for _ in MemoryRecords(bytes(out)).batches(validate=True)) <= len(batches)


# -- the cleaner on a log -------------------------------------------------------------------------


def fill(log: Log, rounds: int, keys: int, *, codec=Compression.NONE, per_batch: int = 4, value=b"v") -> None:
    n = 0
    for _ in range(rounds):
        pairs = []
        for _ in range(per_batch):
            pairs.append((b"k%d" % (n % keys), value + b"%d" % n))
            n += 1
        log.append(kv(pairs, codec=codec))


def test_clean_keeps_the_latest_value_of_every_key(open_log, cleaner, magic_codec) -> None:
    magic, codec = magic_codec
    log = open_log(compact(segment_bytes=2048))
    for i in range(60):
        log.append(kv([(b"k%d" % ((i * 3 + j) % 7), b"v%d" % (i * 3 + j)) for j in range(3)], magic=magic, codec=codec))
    log.roll()
    before = committed_view(log)
    stats = cleaner.clean(log)
    after = committed_view(log)
    assert latest_per_key(after) == latest_per_key(before)
    assert len(after) == 7
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)
    assert set(after) <= set(before)
    assert stats.records_read == 180 and stats.records_written == 7 and stats.end_offset == 180
    assert log.cleaner_checkpoint == 180
    checkpoint = (log.directory.parent / "cleaner-offset-checkpoint").read_text()
    assert checkpoint == "0\n1\ntopic 0 180\n"
    assert cleaner.clean(log) is None  # nothing dirty left


def test_records_without_keys_go(open_log, cleaner) -> None:
    log = open_log()
    log.append(kv([("a", "1")]))
    # A compacted topic refuses keyless appends, so write them as a follower would.
    log.append_as_follower(kv([(None, "x"), ("b", "2")], base_offset=1))
    log.roll()
    stats = cleaner.clean(log)
    assert [(r.key, r.value) for r in all_records(log)] == [(b"a", b"1"), (b"b", b"2")]
    assert stats.keyless_records == 1


def test_tombstones_live_until_their_horizon(open_log, cleaner, clock) -> None:
    log = open_log(compact(delete_retention_ms=1000))
    log.append(kv([("a", "1"), ("b", "1")]))
    log.append(kv([("a", None)]))
    log.roll()
    cleaner.clean(log)  # first pass: the tombstone stays and its batch gets a horizon
    batches = [b for s in log.segments for b in s.log.batches()]
    assert [(r.key, r.value) for r in all_records(log)] == [(b"b", b"1"), (b"a", None)]
    assert batches[-1].delete_horizon_ms == T0 + 1000
    clock.now = T0 + 999
    cleaner.clean(log)
    assert (b"a", None) in [(r.key, r.value) for r in all_records(log)]
    clock.now = T0 + 1000  # nothing dirty, but the horizon has passed: a run-once clean acts on it
    stats = cleaner.clean(log)
    assert stats is not None and stats.tombstones_removed == 1
    assert [(r.key, r.value) for r in all_records(log)] == [(b"b", b"1")]
    assert cleaner.clean(log) is None


def test_legacy_tombstones_follow_segment_times(open_log, cleaner, clock) -> None:
    import os

    # Kafka's v0/v1 rule: a tombstone may go once its segment is delete.retention.ms older than
    # the last segment of the clean section.
    log = open_log(compact(delete_retention_ms=1000, segment_bytes=1000))
    log.append(kv([("a", "x" * 500)], magic=1))
    log.append(kv([("a", None)], magic=1))
    log.roll()
    log.append(kv([("b", "y" * 500)], magic=1))
    log.roll()
    cleaner.clean(log)  # no clean section yet: every tombstone stays
    assert [(r.key, r.value) for r in all_records(log)] == [(b"a", None), (b"b", b"y" * 500)]
    seg0, seg1 = log.segments[0], log.segments[1]
    t = os.stat(seg0.log.path).st_mtime_ns
    os.utime(seg1.log.path, ns=(t + 2_000_000_000, t + 2_000_000_000))
    log.append(kv([("c", "1")], magic=1))
    log.roll()
    cleaner.clean(log)
    assert [(r.key, r.value) for r in all_records(log)] == [(b"b", b"y" * 500), (b"c", b"1")]


def test_compaction_lag_bounds_and_dirty_ratio(open_log, clock) -> None:
    log = open_log(compact(min_compaction_lag_ms=10_000, segment_bytes=300))
    for i in range(12):
        log.append(kv([("a", "%d" % i)], ts=T0 + i * 1000))
    first_dirty, uncleanable, reset = cleanable_offsets(log, None, T0 + 15_000)
    assert (first_dirty, reset) == (0, False)
    # Segments whose largest timestamp is within 10 s of now are not cleanable.
    for seg in log.segments:
        if seg.base_offset >= uncleanable:
            break
        assert seg.largest_timestamp <= T0 + 5_000
    assert cleanable_offsets(log, 10**9, T0)[2] is True  # past the end: reset
    lagging = LogCleaner(dedupe_buffer_size=1 << 16, clock=clock)
    lagging.add_log(log)
    clock.now = T0 + 3_000  # everything within the lag: nothing to clean
    assert lagging.clean_filthiest() is None
    clock.now = T0 + 100_000
    assert lagging.clean_filthiest() is not None


def test_max_compaction_lag_forces_a_clean_below_the_ratio(open_log, clock) -> None:
    log = open_log(compact(segment_bytes=300, max_compaction_lag_ms=60_000, min_cleanable_dirty_ratio=0.5))
    for i in range(30):
        log.append(kv([("k%d" % i, "v")]))
    log.roll()
    c = LogCleaner(dedupe_buffer_size=1 << 16, clock=clock)
    c.clean(log)  # all keys distinct: the clean section is the whole log
    log.append(kv([("k0", "w")]))
    log.roll()
    c.add_log(log)
    assert c.clean_filthiest() is None  # below the ratio and within the lag
    clock.now = T0 + 61_000
    assert c.clean_filthiest() is not None
    assert log.cleaner_checkpoint == log.active_segment.base_offset


def test_filthiest_log_first_and_policy(open_log, clock) -> None:
    a = open_log(compact(), name="a-0")
    b = open_log(compact(), name="b-0")
    d = open_log(LogConfig(segment_bytes=1024), name="d-0")  # delete policy: never cleaned
    fill(a, 40, 30)
    fill(b, 40, 3)
    fill(d, 40, 3)
    for log in (a, b, d):
        log.roll()
    c = LogCleaner(dedupe_buffer_size=1 << 16, clock=clock)
    for log in (a, b, d):
        c.add_log(log)
    first = c.clean_filthiest()
    assert first.log == "a-0" or first.log == "b-0"
    second = c.clean_filthiest()
    assert {first.log, second.log} == {"a-0", "b-0"}
    assert c.clean_filthiest() is None
    with pytest.raises(InvalidConfigError, match="compact"):
        c.clean(d)


def test_checkpoint_below_the_log_start_resets(open_log, cleaner) -> None:
    log = open_log(compact(segment_bytes=300))
    fill(log, 20, 4)
    log.roll()
    log.checkpoint_cleaner_offset(0)
    log.delete_records(30)
    log.delete_old_segments()
    assert log.log_start_offset > 0
    first_dirty, _, reset = cleanable_offsets(log, log.cleaner_checkpoint, T0)
    assert reset and first_dirty == log.log_start_offset
    cleaner.clean(log)
    assert log.cleaner_checkpoint == log.active_segment.base_offset


def test_truncation_lowers_the_checkpoint(open_log, cleaner) -> None:
    log = open_log(compact(segment_bytes=300))
    fill(log, 20, 4)
    log.roll()
    cleaner.clean(log)
    assert log.cleaner_checkpoint == 80
    log.truncate_to(50)
    assert log.cleaner_checkpoint == 50


def test_open_transactions_stop_cleaning(open_log, cleaner) -> None:
    log = open_log(compact(segment_bytes=200))
    log.append(kv([("a", "1")]))
    log.append(kv([("t", "1")], pid=5, epoch=0, seq=0, txn=True))  # offset 1, open
    for i in range(10):
        log.append(kv([("a", "%d" % (i + 2))]))
    log.roll()
    assert log.last_stable_offset == 1
    cleaner.clean(log)
    assert log.cleaner_checkpoint is None or log.cleaner_checkpoint <= 1
    offsets = [r.offset for r in all_records(log)]
    assert 0 in offsets and 1 in offsets  # nothing at or past the last stable offset changed


def test_aborted_data_goes_and_markers_follow_their_data(open_log, cleaner, clock) -> None:
    log = open_log(compact(segment_bytes=250, delete_retention_ms=1000))
    log.append(kv([("x", "1")], pid=1, epoch=0, seq=0, txn=True))  # 0: aborted
    log.append(kv([("y", "1")], pid=2, epoch=0, seq=0, txn=True))  # 1: committed
    log.append(marker(ControlRecordType.ABORT, 1), origin=AppendOrigin.COORDINATOR)  # 2
    log.append(marker(ControlRecordType.COMMIT, 2), origin=AppendOrigin.COORDINATOR)  # 3
    log.append(kv([("y", "2")]))  # 4: supersedes the committed data
    # Later transactions, so that the batches above are not their producers' last.
    log.append(kv([("p", "1")], pid=1, epoch=0, seq=1, txn=True))  # 5
    log.append(marker(ControlRecordType.COMMIT, 1), origin=AppendOrigin.COORDINATOR)  # 6
    log.append(kv([("q", "1")], pid=2, epoch=0, seq=1, txn=True))  # 7
    log.append(marker(ControlRecordType.COMMIT, 2), origin=AppendOrigin.COORDINATOR)  # 8
    log.roll()
    abort_entry = AbortedTxn(1, 0, 2, 1)
    assert [t for s in log.segments for t in s.txn_index.all_aborted_txns()] == [abort_entry]
    view = latest_per_key(committed_view(log))

    def batches():
        return {b.base_offset: b for s in log.segments for b in s.log.batches()}

    def next_pass(now: int) -> None:
        clock.now = now
        log.append(kv([("z", "%d" % now)]))
        log.roll()
        cleaner.clean(log)
        expected = dict(view)
        expected[b"z"] = latest_per_key(committed_view(log))[b"z"]
        assert latest_per_key(committed_view(log)) == expected

    cleaner.clean(log)
    # Pass 1 removes the aborted and the superseded data; it saw the transactions' data, so
    # both markers stay, and the abort keeps its index entry for this pass.
    got = batches()
    assert 0 not in got and 1 not in got and got[2].is_control and got[3].is_control
    assert got[2].delete_horizon_ms is None and got[3].delete_horizon_ms is None
    assert [t for s in log.segments for t in s.txn_index.all_aborted_txns()] == [abort_entry]
    # Pass 2: the transactions have no data left; the markers get a horizon, the entry goes.
    next_pass(T0 + 10)
    got = batches()
    assert got[2].delete_horizon_ms == got[3].delete_horizon_ms == T0 + 10 + 1000
    assert [t for s in log.segments for t in s.txn_index.all_aborted_txns()] == []
    next_pass(T0 + 500)  # before the horizon: the markers stay
    assert 2 in batches() and 3 in batches()
    next_pass(T0 + 1010)  # at the horizon: they go
    assert 2 not in batches() and 3 not in batches()


def test_aborted_transactions_with_data_keep_their_index_entry(open_log, cleaner) -> None:
    # Kafka's aborted data is removed, but while any remains (a later pass of a partial map,
    # or data past the map's end), read_committed readers need the index entry.
    log = open_log(compact(segment_bytes=10_000))
    log.append(kv([("x", "1")], pid=1, epoch=0, seq=0, txn=True))  # 0
    log.append(marker(ControlRecordType.ABORT, 1), origin=AppendOrigin.COORDINATOR)  # 1
    log.append(kv([("x", "2")]))  # 2
    log.roll()
    view = committed_view(log)
    entries = [t for s in log.segments for t in s.txn_index.all_aborted_txns()]
    c = LogCleaner(dedupe_buffer_size=24 * 2, load_factor=0.9, clock=Clock())  # one key per pass
    c.clean(log)
    after = committed_view(log)
    assert latest_per_key(after) == latest_per_key(view) and all(o != 0 for o, _, _ in after)
    # The aborted batch is the producer's last data: kept as an empty header, so its index
    # entry and its marker stay with it.
    data_left = [b for s in log.segments for b in s.log.batches() if b.base_offset == 0]
    assert len(data_left) == 1 and data_left[0].count == 0
    assert [t for s in log.segments for t in s.txn_index.all_aborted_txns()] == entries


def test_the_last_batch_of_an_active_producer_survives_as_a_header(open_log, cleaner, tmp_path, clock) -> None:
    log = open_log(compact(segment_bytes=200))
    log.append(kv([("a", "1"), ("b", "1")], pid=3, epoch=0, seq=0))  # 0-1
    log.append(kv([("a", "2"), ("b", "2")]))  # 2-3, supersedes both
    log.roll()
    cleaner.clean(log)
    batches = [b for s in log.segments for b in s.log.batches()]
    first = batches[0]
    assert (first.base_offset, first.last_offset, first.count, first.producer_id, first.last_sequence) == (0, 1, 0, 3, 1)
    log.close()
    log = Log.open(tmp_path / "topic-0", compact(segment_bytes=200), clock=clock)
    try:
        info = log.append(kv([("c", "1")], pid=3, epoch=0, seq=2))  # the next sequence is accepted
        assert not info.duplicate and info.first_offset == 4
    finally:
        log.close()


def test_a_small_map_cleans_in_several_passes(tmp_path, clock) -> None:
    big = Log.open(tmp_path / "big-0", compact(segment_bytes=600), clock=clock)
    small = Log.open(tmp_path / "small-0", compact(segment_bytes=600), clock=clock)
    try:
        for log in (big, small):
            fill(log, 50, 25, per_batch=3)
            log.roll()
        LogCleaner(dedupe_buffer_size=1 << 20, clock=clock).clean(big)
        stats = LogCleaner(dedupe_buffer_size=24 * 12, clock=clock).clean(small)
        assert stats.rounds > 1
        assert latest_per_key(committed_view(small)) == latest_per_key(committed_view(big))
        assert committed_view(small) == committed_view(big)
    finally:
        big.close()
        small.close()


def test_groups_respect_segment_and_index_limits(open_log) -> None:
    log = open_log(compact(segment_bytes=300))
    fill(log, 30, 100)
    log.roll()
    segs = log.segments[:-1]
    groups = group_segments_by_size(segs, 10_000, 10_000, log.active_segment.base_offset)
    assert [s for g in groups for s in g] == segs and len(groups) == 1
    groups = group_segments_by_size(segs, 2 * segs[0].size, 10_000, log.active_segment.base_offset)
    assert all(sum(s.size for s in g) <= 2 * segs[0].size or len(g) == 1 for g in groups) and len(groups) > 1
    groups = group_segments_by_size(segs, 10_000, 0, log.active_segment.base_offset)
    assert all(len(g) == 1 for g in groups)


def test_a_corrupt_segment_marks_the_log_uncleanable_and_a_retry_works(open_log, clock) -> None:
    bad = open_log(compact(segment_bytes=300), name="bad-0")
    good = open_log(compact(segment_bytes=300), name="good-0")
    for log in (bad, good):
        fill(log, 20, 3)
        log.roll()
    path = Path(bad.segments[1].log.path)
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF  # inside the first record of the first batch: CRC mismatch
    path.write_bytes(bytes(data))
    c = LogCleaner(dedupe_buffer_size=1 << 16, clock=clock)
    c.add_log(bad)
    c.add_log(good)
    cleaned = [c.clean_filthiest(), c.clean_filthiest(), c.clean_filthiest()]
    assert [s.log for s in cleaned if s] == ["good-0"]
    assert str(bad.directory) in c.uncleanable and "CorruptRecordError" in c.uncleanable[str(bad.directory)]
    assert str(path) in c.uncleanable[str(bad.directory)]
    assert not list(bad.directory.glob("*.cleaned"))
    with pytest.raises(CorruptRecordError, match=path.name):
        c.clean(bad)
    data[70] ^= 0xFF
    path.write_bytes(bytes(data))
    assert c.clean(bad) is not None  # a later run retries; no restart needed
    assert c.uncleanable == {}


def test_the_background_thread_cleans_and_stops(open_log, clock) -> None:
    logs = [open_log(compact(segment_bytes=300), name=f"t-{i}") for i in range(3)]
    for log in logs:
        fill(log, 20, 2)
        log.roll()
    seen = []
    c = LogCleaner(dedupe_buffer_size=1 << 16, clock=clock, backoff_ms=10, on_stats=seen.append)
    for log in logs:
        c.add_log(log)
    c.start()
    wait_until(lambda: len(seen) >= 3, 10, "three cleanings by the background thread")
    c.stop(timeout=scaled(5))
    assert sorted(s.log for s in seen) == ["t-0", "t-1", "t-2"]
    for log in logs:
        assert log.cleaner_checkpoint == log.active_segment.base_offset


def test_stop_aborts_a_pass_and_leaves_the_log_whole(open_log, clock) -> None:
    log = open_log(compact(segment_bytes=300))
    fill(log, 40, 3)
    log.roll()
    before = committed_view(log)
    started = threading.Event()

    def progress(p: CleanerProgress) -> None:
        started.set()
        time.sleep(0.05)

    c = LogCleaner(dedupe_buffer_size=1 << 16, clock=clock, backoff_ms=10, progress=progress, io_buffer_size=2048)
    c.add_log(log)
    c.start()
    assert started.wait(scaled(5))
    c.stop(timeout=scaled(10))
    assert not list(log.directory.glob("*.cleaned")) and not list(log.directory.glob("*.swap"))
    assert latest_per_key(committed_view(log)) == latest_per_key(before)


def test_truncation_during_a_pass_aborts_it(open_log, clock) -> None:
    log = open_log(compact(segment_bytes=300))
    fill(log, 30, 3)
    log.roll()
    fill(log, 2, 3)
    truncated = []

    def progress(p: CleanerProgress) -> None:
        if p.phase == "clean" and not truncated:
            log.truncate_to(log.log_end_offset - 2)
            truncated.append(True)

    c = LogCleaner(dedupe_buffer_size=1 << 16, clock=clock, progress=progress, io_buffer_size=2048)
    with pytest.raises(LogCleaningAbortedError):
        c.clean(log)
    assert not list(log.directory.glob("*.cleaned"))
    assert c.clean(log) is not None  # the next pass goes through


@pytest.mark.timeout_guard(120)  # ~500 tiny segments rolled and cleaned: slow, not hung, on a busy machine
def test_appends_during_cleaning_are_not_lost(open_log, clock) -> None:
    log = open_log(compact(segment_bytes=400))
    fill(log, 40, 5)
    log.roll()
    stop = threading.Event()
    appended = []

    def writer() -> None:
        i = 0
        while not stop.is_set() and i < 2000:
            log.append(kv([(b"w%d" % i, b"x")]))
            appended.append(i)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    c = LogCleaner(dedupe_buffer_size=1 << 16, clock=clock)
    for _ in range(3):
        c.clean(log)
    stop.set()
    t.join()
    keys = {r.key for r in all_records(log)}
    assert {b"w%d" % i for i in appended} <= keys


def test_throttler_sleeps_off_the_excess() -> None:
    now = [0.0]
    slept = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    t = Throttler(1000.0, check_interval_ms=100, monotonic=lambda: now[0], sleep=sleep)
    assert t.maybe_throttle(500) == 0.0  # inside the first window
    now[0] += 0.2
    assert t.maybe_throttle(500) == pytest.approx(0.8)  # 1000 bytes in 0.2 s at 1000 B/s
    assert slept == [pytest.approx(0.8)]
    now[0] += 2.0
    assert t.maybe_throttle(100) == 0.0  # under budget
    assert Throttler().maybe_throttle(10**12) == 0.0
    with pytest.raises(InvalidConfigError):
        Throttler(0)


def test_progress_and_stats(open_log, clock) -> None:
    log = open_log(compact(segment_bytes=600))
    fill(log, 60, 6, codec=Compression.GZIP)
    log.roll()
    seen = []
    c = LogCleaner(dedupe_buffer_size=1 << 16, clock=clock, progress=seen.append, io_buffer_size=2048)
    stats = c.clean(log)
    phases = [p.phase for p in seen]
    assert "map" in phases and "clean" in phases and phases.index("map") < phases.index("clean")
    for phase in ("map", "clean"):
        done = [p.done for p in seen if p.phase == phase]
        assert done == sorted(done) and done[-1] <= seen[-1].total
    d = stats.to_dict()
    assert d["records_read"] == 240 and d["records_written"] == 6 and d["records_removed"] == 234
    assert 0 < d["buffer_utilization"] <= 1 and d["map_slots"] == (1 << 16) // 24
    assert "size reduction" in stats.summary()


# -- Kafka-written compacted topics -------------------------------------------------------------------


def _kafka_compacted_dirs() -> list[Path]:
    return sorted(
        p for p in (DATA / "real").glob("*/__consumer_offsets-*") if any(f.stat().st_size for f in p.glob("*.log"))
    )


@pytest.mark.parametrize("source", _kafka_compacted_dirs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_kafka_written_consumer_offsets_compact_without_losing_a_key(source, tmp_path) -> None:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    config = compact(segment_bytes=100 * 1024 * 1024)
    log = Log.open(target, config)
    try:
        log.roll()  # make the whole log cleanable
        before = committed_view(log)
        assert before, "the corpus partition holds records"
        stats = LogCleaner(dedupe_buffer_size=1 << 20).clean(log)
        after = committed_view(log)
        assert latest_per_key(after) == latest_per_key(before)
        assert stats.records_written <= stats.records_read
    finally:
        log.close()
    reopened = Log.open(target, config)
    try:
        assert latest_per_key(committed_view(reopened)) == latest_per_key(before)
    finally:
        reopened.close()


# -- dry runs and breakdowns ----------------------------------------------------------------------


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_a_dry_run_counts_everything_and_writes_nothing(open_log, clock) -> None:
    log = open_log(compact(segment_bytes=400, delete_retention_ms=1000))
    log.append(kv([("a", "1"), ("b", "1"), ("a", "2")]))
    log.append(kv([("x", "1")], pid=1, epoch=0, seq=0, txn=True))
    log.append(marker(ControlRecordType.ABORT, 1), origin=AppendOrigin.COORDINATOR)
    log.append(kv([("b", None), ("c", "1")]))
    log.append(kv([("p", "1")], pid=1, epoch=0, seq=1))  # so the aborted batch is not pid 1's last
    log.roll()
    before = _files(log.directory)
    checkpoint = log.directory.parent / "cleaner-offset-checkpoint"
    c = LogCleaner(dedupe_buffer_size=1 << 16, clock=clock)
    dry = c.clean(log, dry_run=True, count_keys=True)
    assert _files(log.directory) == before and not checkpoint.exists()
    assert dry.dry_run and dry.removed == {"superseded": 2, "aborted": 1}
    assert dry.removed_by_key == {b"a": 1, b"b": 1}
    assert sum(s.records_read for s in dry.segments) == 8 and sum(s.records_kept for s in dry.segments) == 5
    assert dry.to_dict()["removed_by_key"] == {b"a".hex(): 1, b"b".hex(): 1}
    real = c.clean(log)
    assert not real.dry_run and real.removed == dry.removed and real.records_written == dry.records_written
    assert real.removed_by_key is None
    assert [(s.base_offset, s.records_kept, s.removed) for s in real.segments] == [
        (s.base_offset, s.records_kept, s.removed) for s in dry.segments
    ]
    clock.now = T0 + 5000
    dry = c.clean(log, dry_run=True)
    assert dry.removed == {"tombstone": 1}
