"""The partition log: Kafka's append validation and offset assignment, reads, ListOffsets,
rolling, flushing, truncation, log start offset, retention, checkpoints and reopening; a stateful
model of the whole log; directories real brokers and Kafka 3.8 wrote."""

from __future__ import annotations

import shutil
import struct
import threading
from pathlib import Path

import pytest
from conftest import DATA, MATRIX, examples, scaled, wait_until
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkalog import (
    Compression,
    ControlRecordType,
    CorruptRecordError,
    FileRecords,
    InvalidRecordError,
    MemoryRecords,
    RecordBatchBuilder,
    RecordTooLargeError,
    TimestampType,
    TruncatedRecordError,
)
from kafkalog.checkpoint import LeaderEpochCheckpointFile, OffsetCheckpointFile
from kafkalog.log_config import LogConfig
from kafkalog.errors import (
    InvalidOffsetError,
    InvalidProducerEpochError,
    KafkalogError,
    LogClosedError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    UnexpectedAppendOffsetError,
)
from kafkalog.legacy_record import encode_message_set
from kafkalog.log import (
    CLEAN_SHUTDOWN_FILE,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
)
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog.transaction_index import AbortedTxn
from kafkalog.log_validator import InvalidTimestampError

T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(
    n: int = 3,
    *,
    magic: int = 2,
    codec: Compression = Compression.NONE,
    ts: int = T0,
    key: bytes | None = b"k",
    value_size: int = 10,
    base_offset: int = 0,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    txn: bool = False,
    ts_step: int = 1,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytes:
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
    for i in range(n):
        b.append(key, bytes([i % 256]) * value_size, timestamp=ts + i * ts_step if magic > 0 else -1)
    return bytes(b.build().buffer)


def marker(kind: ControlRecordType, pid: int, epoch: int = 0, ts: int = T0) -> bytes:
    return bytes(
        RecordBatchBuilder.end_transaction_marker(
            kind, producer_id=pid, producer_epoch=epoch, coordinator_epoch=1, timestamp=ts
        ).buffer
    )


def records_of(log: Log, start: int | None = None) -> list:
    out = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20)
        batches = list(chunk.batches())
        if not batches:
            break
        for b in batches:
            out.extend(r for r in b.records() if r.offset >= offset)
        offset = batches[-1].next_offset
    return out


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_log(tmp_path, clock):
    opened = []

    def opener(config: LogConfig | None = None, name: str = "topic-0", **kw) -> Log:
        log = Log.open(tmp_path / name, config or LogConfig(), clock=kw.pop("clock", clock), **kw)
        opened.append(log)
        return log

    yield opener
    for log in opened:
        log.close()


# -- opening -----------------------------------------------------------------------------------


def test_open_creates_a_kafka_shaped_directory(tmp_path, open_log) -> None:
    log = open_log(topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    assert (log.topic, log.partition) == ("topic", 0)
    assert log.log_start_offset == log.log_end_offset == log.recovery_point == 0
    names = sorted(p.name for p in (tmp_path / "topic-0").iterdir())
    assert names == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "partition.metadata",
    ]
    log.close()
    top = sorted(p.name for p in tmp_path.iterdir())
    assert top == [".kafka_cleanshutdown", ".lock", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint", "topic-0"]
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read() == {("topic", 0): 0}


def test_bad_directory_name_and_double_open(tmp_path, open_log) -> None:
    with pytest.raises(KafkalogError, match="<topic>-<partition>"):
        Log.open(tmp_path / "nopartition")
    open_log()
    with pytest.raises(KafkalogError, match="already open"):
        Log.open(tmp_path / "topic-0")


def test_lock_file_keeps_other_processes_out(tmp_path, open_log) -> None:
    import subprocess
    import sys

    open_log()
    code = (
        "import sys; from kafkalog.log import Log\n"
        "try:\n    Log.open(sys.argv[1])\nexcept Exception as e:\n    print(type(e).__name__, e); sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "topic-1")], capture_output=True, text=True)
    assert done.returncode == 3 and "another process" in done.stdout


# -- appending: offsets, timestamps, epochs ---------------------------------------------------


def test_v2_offsets_are_assigned_in_place(open_log) -> None:
    log = open_log()
    raw = batch(3, base_offset=0)
    info = log.append(raw)
    assert (info.first_offset, info.last_offset, info.record_count, info.valid_bytes) == (0, 2, 3, len(raw))
    info = log.append(MemoryRecords(batch(4)), leader_epoch=7)
    assert (info.first_offset, info.last_offset) == (3, 6)
    assert info.max_timestamp == T0 + 3 and info.offset_of_max_timestamp == 6
    stored = list(log.read(3, 1000).batches())
    assert len(stored) == 1 and stored[0].base_offset == 3 and stored[0].partition_leader_epoch == 7
    stored[0].ensure_valid(deep=True)
    # Only the offset and epoch changed: the CRC-covered bytes are the producer's.
    assert bytes(stored[0].entry()[21:]) == batch(4)[21:]
    assert [r.offset for r in records_of(log)] == list(range(7))
    assert log.leader_epoch_cache.entries == [(7, 3)]


def test_append_of_many_batches_and_the_source_codec(open_log) -> None:
    log = open_log()
    info = log.append(batch(2) + batch(3) + batch(1))
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 5, 6)
    assert [b.base_offset for b in log.read(0, 10_000).batches()] == [0, 2, 5]
    info = log.append(batch(2, codec=Compression.LZ4))
    assert info.source_compression is Compression.LZ4


def test_max_timestamp_is_recomputed_from_records(open_log) -> None:
    log = open_log()
    raw = bytearray(batch(3, ts=T0))
    struct.pack_into(">q", raw, 35, T0 - 100)  # a producer that lies about its max timestamp
    struct.pack_into(">I", raw, 17, _crc32c(raw[21:]))
    info = log.append(bytes(raw))
    (stored,) = log.read(0, 1000).batches()
    assert stored.max_timestamp == T0 + 2 == info.max_timestamp
    stored.ensure_valid()


def _crc32c(data: bytes) -> int:
    from kafkalog.crc import crc32c

    return crc32c(data)


@pytest.mark.parametrize("magic,codec", MATRIX, ids=[f"v{m}-{c.kafka_name}" for m, c in MATRIX])
def test_log_append_time_is_stamped(open_log, clock, magic, codec) -> None:
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    log.append(batch(1))
    clock.now = T0 + 5000
    info = log.append(batch(3, magic=magic, codec=codec, ts=T0 - 10))
    stored = list(log.read(1, 100_000).batches())
    for b in stored:
        b.ensure_valid(deep=True)
    recs = [r for b in stored for r in b.records()]
    assert [r.offset for r in recs] == [1, 2, 3]
    if magic == 0:
        assert info.log_append_time == T0 + 5000 and all(r.timestamp == -1 for r in recs)
    else:
        assert info.log_append_time == info.max_timestamp == T0 + 5000
        assert all(r.timestamp == T0 + 5000 for r in recs)
        assert all(b.timestamp_type == TimestampType.LOG_APPEND_TIME for b in stored)


@pytest.mark.parametrize("magic,codec", [(m, c) for m, c in MATRIX if m < 2], ids=lambda x: str(x))
def test_legacy_offsets_are_rewritten(open_log, magic, codec) -> None:
    log = open_log()
    log.append(batch(2))
    info = log.append(batch(3, magic=magic, codec=codec))
    assert (info.first_offset, info.last_offset) == (2, 4)
    stored = list(log.read(2, 100_000).batches())
    for b in stored:
        b.ensure_valid(deep=True)
        assert b.magic == magic
    assert [r.offset for b in stored for r in b.records()] == [2, 3, 4]
    if codec is not Compression.NONE:
        assert len(stored) == 1 and stored[0].last_offset == 4 and stored[0].compression is codec


def test_v1_wrapper_with_good_inner_offsets_keeps_its_compressed_bytes(open_log) -> None:
    log = open_log()
    log.append(batch(5))
    raw = encode_message_set([(i, T0 + i, b"k", b"v%d" % i) for i in range(3)], magic=1, compression=Compression.GZIP)
    info = log.append(raw)
    (stored,) = log.read(5, 10_000).batches()
    assert info.first_offset == 5 and stored.last_offset == 7
    assert bytes(stored.entry()[26:]) == raw[26:]  # the compressed value is untouched


def test_v1_wrapper_with_bad_inner_offsets_is_recompressed(open_log) -> None:
    log = open_log()
    raw = encode_message_set(
        [(i * 2 + 10, T0, b"k", b"v%d" % i) for i in range(3)], magic=1, compression=Compression.GZIP, base_offset=0
    )
    info = log.append(raw)
    (stored,) = log.read(0, 10_000).batches()
    stored.ensure_valid(deep=True)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert [r.offset for r in stored.records()] == [0, 1, 2]


def test_v2_compressed_with_gaps_is_rebuilt_keeping_producer_fields(open_log) -> None:
    log = open_log()
    b = RecordBatchBuilder(2, Compression.ZSTD, producer_id=9, producer_epoch=1, base_sequence=0)
    b.append(b"a", b"1", timestamp=T0, offset=0)
    b.append(b"b", b"2", timestamp=T0, offset=1)
    b.append(b"c", b"3", timestamp=T0 + 9, offset=5)  # gap: count 3, lastOffsetDelta 5
    raw = bytes(b.build().buffer)
    info = log.append(raw, origin=AppendOrigin.COORDINATOR)
    (stored,) = log.read(0, 10_000).batches()
    stored.ensure_valid(deep=True)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert [r.offset for r in stored.records()] == [0, 1, 2]
    assert (stored.producer_id, stored.producer_epoch, stored.base_sequence, stored.compression) == (9, 1, 0, Compression.ZSTD)


def test_leader_epochs_follow_appends(open_log) -> None:
    log = open_log()
    log.append(batch(2), leader_epoch=0)
    log.append(batch(2), leader_epoch=0)
    log.append(batch(2), leader_epoch=3)
    assert log.leader_epoch_cache.entries == [(0, 0), (3, 4)]
    assert log.leader_epoch_cache.end_offset_for(0, log.log_end_offset) == (0, 4)
    assert LeaderEpochCheckpointFile(log.directory / "leader-epoch-checkpoint").read() == [(0, 0), (3, 4)]
    log.append(batch(1, magic=1))  # a legacy message clears the history (Kafka)
    assert log.leader_epoch_cache.entries == []


# -- appending: refusals ------------------------------------------------------------------------


def test_refused_appends_leave_the_log_untouched(open_log) -> None:
    log = open_log(LogConfig(max_message_bytes=500))
    log.append(batch(2))
    good = batch(2)
    cases = {
        "crc": (bytes(bytearray(good[:-1]) + bytes([good[-1] ^ 1])), CorruptRecordError),
        "too large": (batch(2, value_size=600), RecordTooLargeError),
        "partial": (good[:-3], TruncatedRecordError),
        "control": (marker(ControlRecordType.COMMIT, 5), InvalidRecordError),
        "no sequence": (batch(2, pid=4, epoch=0, seq=-1), InvalidRecordError),
        "mixed magic": (batch(1) + batch(1, magic=1), InvalidRecordError),
        "two compressed": (batch(1, codec=Compression.GZIP) + batch(1, codec=Compression.GZIP), InvalidRecordError),
        "producer LogAppendTime": (batch(1, timestamp_type=TimestampType.LOG_APPEND_TIME), None),
    }
    for name, (raw, error) in cases.items():
        end, size = log.log_end_offset, log.size
        if error is None:
            log.append(raw)  # a CreateTime topic takes it (Kafka's else-if), as CreateTime
            assert list(log.read(end, 1000).batches())[0].timestamp_type == TimestampType.CREATE_TIME
            continue
        with pytest.raises(error) as caught:
            log.append(raw)
        assert (log.log_end_offset, log.size) == (end, size), name
        assert caught.value.file == str(log.directory)


def test_count_and_offset_range_must_agree(open_log) -> None:
    log = open_log()
    b = RecordBatchBuilder(2)
    b.append(b"a", b"1", timestamp=T0, offset=0)
    b.append(b"b", b"2", timestamp=T0, offset=3)
    with pytest.raises(InvalidRecordError, match="inconsistent batch offset range"):
        log.append(b.build())
    # An empty batch (count 0), as the cleaner leaves for producer state, is no client batch.
    empty = bytearray(batch(1))
    struct.pack_into(">i", empty, 57, 0)
    struct.pack_into(">i", empty, 23, 0)
    struct.pack_into(">I", empty, 17, _crc32c(empty[21:]))
    with pytest.raises((InvalidRecordError, CorruptRecordError)):
        log.append(bytes(empty))


def test_timestamp_bounds(open_log, clock) -> None:
    log = open_log(LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=100))
    log.append(batch(1, ts=T0 - 1000))
    log.append(batch(1, ts=T0 + 100))
    with pytest.raises(InvalidTimestampError, match="out of range"):
        log.append(batch(1, ts=T0 - 1001))
    with pytest.raises(InvalidTimestampError):
        log.append(batch(3, ts=T0 + 99, ts_step=1))  # the second record is too far ahead
    log.append(batch(1, magic=0))  # no timestamps, nothing to check
    lat = open_log(LogConfig(message_timestamp_type="LogAppendTime"), name="lat-0")
    with pytest.raises(InvalidTimestampError, match="LogAppendTime"):
        lat.append(batch(1, timestamp_type=TimestampType.LOG_APPEND_TIME))


def test_compacted_topics_need_keys(open_log) -> None:
    log = open_log(LogConfig(cleanup_policy="compact"))
    log.append(batch(2))
    for magic, codec in [(2, Compression.NONE), (2, Compression.LZ4), (1, Compression.NONE), (0, Compression.GZIP)]:
        with pytest.raises(InvalidRecordError, match="without key"):
            log.append(batch(2, key=None, magic=magic, codec=codec))
    assert log.log_end_offset == 2


def test_malformed_records_are_refused(open_log) -> None:
    log = open_log()
    raw = bytearray(batch(2))
    raw[61] = 0x7F  # first record's length varint now runs past the batch
    struct.pack_into(">I", raw, 17, _crc32c(raw[21:]))
    with pytest.raises(InvalidRecordError):
        log.append(bytes(raw))
    assert log.log_end_offset == 0


def test_segment_bytes_bounds_one_append(open_log) -> None:
    log = open_log(LogConfig(segment_bytes=300, max_message_bytes=10_000))
    with pytest.raises(RecordTooLargeError, match="segment size"):
        log.append(batch(1, value_size=400))


# -- follower appends ---------------------------------------------------------------------------


def test_follower_append_keeps_offsets_and_checks_continuity(open_log) -> None:
    log = open_log()
    info = log.append(batch(3, base_offset=0) + batch(2, base_offset=3), assign_offsets=False)
    assert (info.first_offset, info.last_offset) == (0, 4)
    info = log.append_as_follower(batch(2, base_offset=10) + batch(2, base_offset=20)[:30])  # partial tail ignored
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (10, 11, 12)
    with pytest.raises(UnexpectedAppendOffsetError, match="less than the next offset 12"):
        log.append_as_follower(batch(2, base_offset=11))
    with pytest.raises(InvalidOffsetError, match="out of order"):
        log.append_as_follower(batch(2, base_offset=30) + batch(2, base_offset=20))
    # Epochs come from the batches.
    b = RecordBatchBuilder(2, base_offset=12, partition_leader_epoch=4)
    b.append(b"k", b"v", timestamp=T0)
    log.append_as_follower(b.build())
    assert log.leader_epoch_cache.entries[-1] == (4, 12)


def test_follower_append_far_ahead_rolls_to_fit_the_relative_range(open_log) -> None:
    log = open_log()
    log.append_as_follower(batch(1, base_offset=0))
    log.append_as_follower(batch(1, base_offset=2**31 + 5))
    assert [s.base_offset for s in log.segments] == [0, 2**31 + 5]


# -- producer state -----------------------------------------------------------------------------


def test_idempotent_producer_duplicates_and_gaps(open_log) -> None:
    log = open_log()
    first = log.append(batch(3, pid=1, epoch=0, seq=0))
    log.append(batch(2, pid=1, epoch=0, seq=3))
    again = log.append(batch(3, pid=1, epoch=0, seq=0))
    assert again.duplicate and (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 5
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, pid=1, epoch=0, seq=9))
    log.append(batch(1, pid=1, epoch=1, seq=0))  # a new epoch restarts the sequence
    with pytest.raises(InvalidProducerEpochError):
        log.append(batch(1, pid=1, epoch=0, seq=5))
    assert log.log_end_offset == 6


def test_transactions_abort_index_and_last_stable_offset(open_log) -> None:
    log = open_log()
    log.append(batch(2, pid=1, epoch=0, seq=0, txn=True))  # 0-1
    log.append(batch(2, pid=2, epoch=0, seq=0, txn=True))  # 2-3
    assert log.last_stable_offset == 0
    log.append(marker(ControlRecordType.ABORT, 1), origin=AppendOrigin.COORDINATOR)  # 4
    assert log.last_stable_offset == 2
    log.append(marker(ControlRecordType.COMMIT, 2), origin=AppendOrigin.COORDINATOR)  # 5
    assert log.last_stable_offset == log.log_end_offset == 6
    assert log.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 4, 2)]
    with pytest.raises(InvalidRecordError, match="control"):
        log.append(marker(ControlRecordType.COMMIT, 2))  # clients may not write markers


def test_producer_state_survives_reopen(tmp_path, clock) -> None:
    log = Log.open(tmp_path / "p-0", clock=clock)
    log.append(batch(3, pid=1, epoch=0, seq=0))
    log.append(batch(2, pid=2, epoch=0, seq=0, txn=True))
    log.close()
    assert (tmp_path / "p-0" / "00000000000000000005.snapshot").exists()
    log = Log.open(tmp_path / "p-0", clock=clock)
    assert log.append(batch(3, pid=1, epoch=0, seq=0)).duplicate
    assert log.last_stable_offset == 3
    log.close()
    # The same after a crash (no clean marker, no final snapshot): rebuilt from the log.
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    for snap in (tmp_path / "p-0").glob("*.snapshot"):
        snap.unlink()
    log = Log.open(tmp_path / "p-0", clock=clock)
    assert log.load_stats.recovered_segments == 1
    assert log.append(batch(3, pid=1, epoch=0, seq=0)).duplicate
    assert log.last_stable_offset == 3
    log.close()


# -- reading ------------------------------------------------------------------------------------


def test_read_bounds_and_slices(open_log) -> None:
    log = open_log(LogConfig(segment_bytes=400))
    for i in range(10):
        log.append(batch(3, value_size=30))
    assert len(log.segments) > 2
    for offset in range(30):
        first = next(iter(log.read(offset, 1).batches()))  # min_one_message: one whole batch
        assert first.base_offset <= offset <= first.last_offset
    assert log.read(30, 100).size_in_bytes == 0
    # Without min_one_message the slice may end inside a batch, as Kafka's does.
    assert log.read(0, 1, min_one_message=False).size_in_bytes == 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(31, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    upto = list(log.read(0, 1 << 20, max_offset=7).batches())
    assert upto and upto[-1].last_offset < 7
    assert log.read(7, 1000, max_offset=7).size_in_bytes == 0


def test_read_crosses_empty_tails_to_the_next_segment(open_log) -> None:
    log = open_log()
    log.append(batch(3))
    log.roll()
    log.append(batch(3))
    assert next(iter(log.read(3, 100).batches())).base_offset == 3


def test_readers_never_see_partial_batches(open_log) -> None:
    log = open_log(LogConfig(segment_bytes=64 * 1024))
    stop = threading.Event()
    errors = []

    def reader():
        while not stop.is_set():
            end = log.log_end_offset
            try:
                if end:
                    for b in log.read(max(0, end - 50), 1 << 20).batches(validate=True):
                        assert b.last_offset < end or b.last_offset < log.log_end_offset
            except OffsetOutOfRangeError:
                pass
            except Exception as e:  # pragma: no cover - the failure is reported below
                errors.append(e)
                return

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(300):
        log.append(batch(5, value_size=200))
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert [r.offset for r in records_of(log)] == list(range(1500))


# -- ListOffsets --------------------------------------------------------------------------------


def test_offset_for_timestamp(open_log) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    log.append(batch(3, ts=T0), leader_epoch=1)  # 0-2: T0..T0+2
    log.append(batch(3, ts=T0 + 100), leader_epoch=2)  # 3-5
    log.append(batch(3, ts=T0 + 50), leader_epoch=2)  # 6-8: older timestamps later
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (-1, 0, 1)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (-1, 9, 2)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (T0 + 102, 5, 2)
    assert log.offset_for_timestamp(T0 + 1) == (T0 + 1, 1, 1)
    assert log.offset_for_timestamp(T0 + 51) == (T0 + 100, 3, 2)
    assert log.offset_for_timestamp(T0 + 101) == (T0 + 101, 4, 2)
    assert log.offset_for_timestamp(T0 + 103) is None
    with pytest.raises(ValueError):
        log.offset_for_timestamp(-9)
    log.delete_records(4)
    assert log.offset_for_timestamp(T0) == (T0 + 101, 4, 2)
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 4


def test_max_timestamp_with_log_append_time(open_log, clock) -> None:
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    log.append(batch(3))
    clock.now += 10
    log.append(batch(3))
    assert log.offset_for_timestamp(MAX_TIMESTAMP)[:2] == (T0 + 10, 3)


# -- rolling and flushing -----------------------------------------------------------------------


def test_rolls_on_size_time_and_index_space(open_log, clock) -> None:
    log = open_log(LogConfig(segment_bytes=1000, segment_ms=60_000))
    for _ in range(10):
        log.append(batch(3, value_size=50))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2 and all(s.size <= 1000 for s in log.segments)
    clock.now += 60_001
    log.append(batch(1, ts=clock.now))
    log.append(batch(1, ts=clock.now + 60_001))
    assert log.segments[-1].base_offset == log.log_end_offset - 1
    small = open_log(LogConfig(segment_index_bytes=16, index_interval_bytes=0), name="small-0")
    for _ in range(6):
        small.append(batch(1))
    assert len(small.segments) >= 3  # a two-entry offset index fills quickly


def test_roll_snapshots_producer_state_and_flushes_in_the_background(open_log) -> None:
    log = open_log()
    log.append(batch(2, pid=3, epoch=0, seq=0))
    log.roll()
    assert (log.directory / "00000000000000000002.snapshot").exists()
    log.append(batch(2))
    checkpoint = OffsetCheckpointFile(log.directory.parent / "recovery-point-offset-checkpoint")
    # The flush is an fsync on a background thread, which moves the recovery point and then
    # writes the checkpoint: wait for the checkpoint, the last of the two.
    wait_until(lambda: checkpoint.read().get(("topic", 0)) == 2, 15, "the checkpoint of the flush after the roll")
    assert log.recovery_point == 2
    assert checkpoint.read()[("topic", 0)] == 2


def test_flush_policy_and_explicit_flush(open_log, clock) -> None:
    log = open_log(LogConfig(flush_messages=5))
    log.append(batch(3))
    assert log.recovery_point == 0
    log.append(batch(3))
    assert log.recovery_point == 6
    log.append(batch(1))
    log.flush(up_to=7)
    assert log.recovery_point == 7
    timed = open_log(LogConfig(flush_ms=1000), name="timed-0")
    timed.append(batch(1))
    clock.now += 1000
    timed.append(batch(1))
    assert timed.recovery_point == 2


# -- truncation ---------------------------------------------------------------------------------


def test_truncate_to(open_log) -> None:
    log = open_log(LogConfig(segment_bytes=400))
    for epoch in range(6):
        log.append(batch(3, value_size=40, pid=1, epoch=0, seq=epoch * 3), leader_epoch=epoch)
    assert len(log.segments) >= 3
    assert log.truncate_to(6)
    assert log.log_end_offset == 6
    assert [r.offset for r in records_of(log)] == list(range(6))
    assert [e.epoch for e in log.leader_epoch_cache.entries] == [0, 1]
    assert all(s.base_offset <= 6 for s in log.segments)
    # Producer state went back too: sequence 6 is next again.
    assert log.append(batch(3, pid=1, epoch=0, seq=6)).first_offset == 6
    assert not log.truncate_to(100)
    # Kafka's rule: the batch holding the target goes whole, and the end becomes the target.
    assert log.truncate_to(7)
    assert log.log_end_offset == 7 and [r.offset for r in records_of(log)] == list(range(6))


def test_truncate_below_first_segment_and_fully(open_log) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    for _ in range(4):
        log.append(batch(3, value_size=40))
    log.delete_records(6)
    log.delete_old_segments()
    first = log.segments[0].base_offset
    assert first > 0
    assert log.truncate_to(first - 1)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (first - 1, first - 1, 1)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert log.append(batch(2)).first_offset == 1000
    assert [s.base_offset for s in log.segments] == [1000]


# -- log start offset and retention ------------------------------------------------------------


def test_delete_records_then_retention(open_log) -> None:
    log = open_log(LogConfig(segment_bytes=300, file_delete_delay_ms=0))
    for _ in range(6):
        log.append(batch(3, value_size=40))
    bases = [s.base_offset for s in log.segments]
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(log.log_end_offset + 1)
    assert log.delete_records(bases[2] + 1) == bases[2] + 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(bases[2], 100)
    plan = log.delete_old_segments(dry_run=True)
    assert [d.base_offset for d in plan.deletions] == bases[:2] and all(d.reason == "log-start-offset" for d in plan.deletions)
    assert [s.base_offset for s in log.segments] == bases
    log.delete_old_segments()
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert log.log_start_offset == bases[2] + 1
    assert not any(p.name.startswith(f"{bases[0]:020d}") for p in log.directory.iterdir())
    assert OffsetCheckpointFile(log.directory.parent / "log-start-offset-checkpoint").read()[("topic", 0)] == bases[2] + 1


def test_time_and_size_retention_with_delayed_deletes(open_log, clock) -> None:
    log = open_log(LogConfig(segment_bytes=300, retention_ms=1000, file_delete_delay_ms=60_000))
    for i in range(6):
        log.append(batch(3, value_size=40, ts=clock.now + i * 100))
    n = len(log.segments)
    clock.now += 1000 + 250  # the first three batches' segments expired
    plan = log.delete_old_segments()
    assert plan.deletions and all(d.reason == "retention.ms" for d in plan.deletions)
    assert len(log.segments) == n - len(plan.deletions)
    deleted = sorted(p.name for p in log.directory.glob("*.deleted"))
    assert deleted and all(".log.deleted" in n or ".index.deleted" in n or ".timeindex.deleted" in n or ".snapshot.deleted" in n for n in deleted)
    assert log.log_start_offset == log.segments[0].base_offset
    # Everything expired: the log rolls so one (empty) segment remains.
    clock.now += 10_000
    plan = log.delete_old_segments()
    assert plan.needs_roll and len(log.segments) == 1 and log.segments[0].size == 0
    assert log.log_start_offset == log.log_end_offset == 18
    assert log.append(batch(1)).first_offset == 18
    # Closing runs the pending deletes.
    log.close()
    assert not list(log.directory.glob("*.deleted"))
    sized = open_log(LogConfig(segment_bytes=300, retention_bytes=600), name="sized-0")
    for _ in range(8):
        sized.append(batch(3, value_size=40))
    sized.delete_old_segments()
    assert sum(s.size for s in sized.segments) >= 600 - 300
    assert all(d.reason == "retention.bytes" for d in sized.plan_retention().deletions) or not sized.plan_retention().deletions


def test_compact_only_topics_keep_time_expired_segments(open_log, clock) -> None:
    log = open_log(LogConfig(segment_bytes=300, retention_ms=10, cleanup_policy="compact"))
    for _ in range(4):
        log.append(batch(3, value_size=40))
    clock.now += 1_000_000
    assert not log.delete_old_segments().deletions


# -- closing and reopening ---------------------------------------------------------------------


def test_clean_reopen_skips_recovery_and_reads_the_same(tmp_path, clock) -> None:
    config = LogConfig(segment_bytes=500)
    log = Log.open(tmp_path / "t-3", config, clock=clock)
    for i in range(12):
        log.append(batch(3, value_size=40, ts=T0 + i))
    before = [(r.offset, r.key, r.value, r.timestamp) for r in records_of(log)]
    segments = len(log.segments)
    log.close()
    with pytest.raises(LogClosedError):
        log.read(0, 10)
    log = Log.open(tmp_path / "t-3", config, clock=clock)
    assert log.load_stats.recovered_segments == 0 and not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records_of(log)] == before
    assert len(log.segments) == segments and log.recovery_point == log.log_end_offset == 36
    assert log.append(batch(1)).first_offset == 36
    log.close()


def test_unclean_reopen_recovers_from_the_recovery_point(tmp_path, clock) -> None:
    config = LogConfig(segment_bytes=500)
    log = Log.open(tmp_path / "t-0", config, clock=clock)
    for i in range(12):
        log.append(batch(3, value_size=40))
    log.flush()
    log.append(batch(3, value_size=40))
    end = log.log_end_offset
    log.close()
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()  # as if the process had died
    OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").write({("t", 0): 36})
    log = Log.open(tmp_path / "t-0", config, clock=clock)
    assert log.load_stats.recovered_segments == len([s for s in log.segments if s.next_offset > 36 or s.base_offset >= 36]) >= 1
    assert log.load_stats.recovered_segments < len(log.segments)
    assert log.log_end_offset == end and log.recovery_point == 36
    log.close()


def test_marker_written_only_when_every_partition_is_known_clean(tmp_path, clock) -> None:
    a = Log.open(tmp_path / "a-0", clock=clock)
    b = Log.open(tmp_path / "b-0", clock=clock)
    a.close()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    b.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()  # a crash
    a = Log.open(tmp_path / "a-0", clock=clock)
    a.close()  # b-0 was not opened (nor recovered) since the crash
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_delete_removes_directory_and_checkpoint_entries(tmp_path, clock) -> None:
    keep = Log.open(tmp_path / "keep-0", clock=clock)
    log = Log.open(tmp_path / "gone-0", clock=clock)
    log.append(batch(2))
    log.flush()
    log.delete()
    keep.close()
    assert not (tmp_path / "gone-0").exists()
    assert ("gone", 0) not in OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read()
    assert ("keep", 0) in OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read()


# -- directories written by Kafka --------------------------------------------------------------


def _real_partitions() -> list[Path]:
    return sorted(p for p in (DATA / "real").glob("*/*") if p.is_dir())


@pytest.mark.parametrize("source", _real_partitions(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_broker_directories_open_recover_and_read(tmp_path, source) -> None:
    target = tmp_path / "logs" / source.name
    shutil.copytree(source, target)
    logs = sorted(source.glob("*.log"))
    swaps = sorted(source.glob("*.log.swap"))
    if swaps:
        # No .cleaned file is left beside it, so the swap is complete: Kafka's loader deletes
        # the segments it replaces and renames it into place.
        with FileRecords.open(swaps[0]) as swap:
            swap_end = [b.next_offset for b in swap.batches()][-1]
        logs = swaps + [p for p in logs if int(p.name.split(".")[0]) >= swap_end]
    expected = []
    for path in logs:
        with FileRecords.open(path) as records:
            expected.extend((r.offset, r.key, r.value) for b in records.batches() for r in b.records())
    log = Log.open(target)
    try:
        got = [(r.offset, r.key, r.value) for r in records_of(log)]
        assert not list(target.glob("*.swap")) and not list(target.glob("*.cleaned"))
        assert got == expected
        for segment in log.segments:
            for i in range(segment.offset_index.entries):
                entry = segment.offset_index.entry(i)
                (b,) = list(segment.log.slice(entry.position).batches())[:1]
                assert b.last_offset == entry.offset
        info = log.append(batch(2))
        assert info.first_offset == (expected[-1][0] + 1 if expected else 0)
    finally:
        log.close()


@pytest.mark.parametrize("name", sorted(p.name for p in (DATA / "kafka-3.8").iterdir() if p.is_dir()))
def test_kafka38_segments_recover_to_kafkas_own_indexes(tmp_path, name) -> None:
    source = DATA / "kafka-3.8" / name
    target = tmp_path / "logs" / "corpus-0"
    target.mkdir(parents=True)
    for path in source.iterdir():
        if path.suffix in (".log", ".index", ".timeindex", ".txnindex"):
            shutil.copy(path, target / path.name)
    log = Log.open(target)  # no clean-shutdown marker: every segment is recovered
    try:
        assert log.load_stats.recovered_segments == len(list(source.glob("*.log")))
        for segment in log.segments[:-1]:
            for suffix in (".index", ".timeindex"):
                original = source / (Path(segment.log.path).stem + suffix)
                if original.exists():
                    ours = Path(segment.log.path).with_suffix(suffix).read_bytes()
                    theirs = original.read_bytes()
                    assert ours.rstrip(b"\0") == theirs.rstrip(b"\0")[: len(ours.rstrip(b"\0"))] or ours == theirs
        with FileRecords.open(source / next(iter(sorted(p.name for p in source.glob("*.log"))))) as raw:
            expected = [r.offset for b in raw.batches() for r in b.records()]
        assert [r.offset for r in records_of(log)][: len(expected)] == expected
    finally:
        log.close()


# -- a stateful model of the log ---------------------------------------------------------------


class LogModel(RuleBasedStateMachine):
    """Random appends, rolls, flushes, truncations, delete_records, retention and reopenings,
    checked against a list of (offset, key, value) after every step."""

    @initialize(segment_bytes=st.sampled_from([400, 1000, 5000]), interval=st.sampled_from([0, 100, 4096]))
    def setup(self, segment_bytes, interval) -> None:
        import tempfile

        self.root = Path(tempfile.mkdtemp())
        self.clock = Clock()
        self.config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval, file_delete_delay_ms=0)
        self.log = Log.open(self.root / "m-0", self.config, clock=self.clock)
        self.model: list[tuple[int, bytes, bytes]] = []
        self.start = 0
        self.next = 0
        self.counter = 0

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
            shutil.rmtree(self.root, ignore_errors=True)

    @rule(n=st.integers(1, 4), magic=st.sampled_from([2, 2, 2, 1, 0]), codec=st.sampled_from(list(Compression)))
    def append(self, n, magic, codec) -> None:
        if codec is Compression.ZSTD and magic < 2:
            codec = Compression.GZIP
        b = RecordBatchBuilder(magic, codec, TimestampType.CREATE_TIME if magic else TimestampType.NO_TIMESTAMP_TYPE)
        values = []
        for _ in range(n):
            self.counter += 1
            value = b"v%d" % self.counter
            b.append(b"k", value, timestamp=self.clock.now if magic else -1)
            values.append(value)
        info = self.log.append(b.build())
        assert info.first_offset == self.next
        # v0/v1 uncompressed messages are one-record batches; the rest is one batch.
        last = info.last_offset
        for v in values:
            self.model.append((self.next, b"k", v, last if magic == 2 or codec is not Compression.NONE else self.next))
            self.next += 1

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.next

    @rule(back=st.integers(0, 5))
    def truncate(self, back) -> None:
        # Followers truncate at batch boundaries (epoch end offsets); mid-batch targets have
        # Kafka's own quirk (the end becomes the target, then the data end after a reopen).
        bounds = sorted({m[3] + 1 for m in self.model if m[3] + 1 >= self.start} | {self.next})
        target = bounds[max(0, len(bounds) - 1 - back)]
        self.log.truncate_to(target)
        if target < self.next:
            # Kafka's rule: the batch holding the target goes whole; the end becomes the target.
            self.model = [m for m in self.model if m[3] < target]
            self.next = target

    @rule(ahead=st.integers(0, 8))
    def delete_records(self, ahead) -> None:
        target = min(self.next, self.start + ahead)
        self.log.delete_records(target)
        self.start = max(self.start, target)

    @rule()
    def retention(self) -> None:
        self.log.delete_old_segments()
        self.start = self.log.log_start_offset

    @rule(crash=st.booleans())
    def reopen(self, crash) -> None:
        if crash:
            self.log.flush()
        self.log.close()
        if crash:
            (self.root / CLEAN_SHUTDOWN_FILE).unlink()
        self.log = Log.open(self.root / "m-0", self.config, clock=self.clock)

    @invariant()
    def matches_model(self) -> None:
        log = self.log
        assert log.log_end_offset == self.next
        assert log.log_start_offset == self.start
        got = [(r.offset, r.key, r.value) for r in records_of(log)]
        assert got == [m[:3] for m in self.model if m[0] >= self.start]


# Up to 20 x 50 steps with fsyncs (rolls, flushes, reopenings): more than the default guard on
# a busy disk; the guard still scales with KAFKALOG_TEST_TIMEOUT_SCALE.
TestLogModel = pytest.mark.timeout_guard(90)(LogModel.TestCase)
TestLogModel.settings = examples(20)


def test_main_job_builds_and_summarises_a_sample_partition(tmp_path, capsys) -> None:
    from kafkalog.__main__ import main

    assert main(["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "sample-0: offsets [0, 69)" in out and "all CRCs NOT valid" not in out
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_a_roll_flush_racing_a_deletion_meets_no_closed_descriptor(open_log, monkeypatch) -> None:
    """The flush after a roll runs on the log's background thread; with file.delete.delay.ms=0
    retention deletes (closes) the rolled segment on the caller's thread. The two must not
    interleave: the fsync met a closed descriptor (EBADF) on the background thread."""
    import os

    from kafkalog import segment as segment_module

    log = open_log(LogConfig(segment_bytes=1024, file_delete_delay_ms=0, retention_bytes=1))
    tasks: list = []
    log._scheduler.schedule = lambda delay, task: tasks.append(task)  # run by the test
    while not tasks:
        log.append(batch(3, value_size=100))
    entered, go = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        segment_log = os.readlink(f"/proc/self/fd/{fd}").endswith(".log")
        if threading.current_thread().name == "roll-flush" and segment_log and not entered.is_set():
            entered.set()
            go.wait(scaled(10))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    errors: list[BaseException] = []

    def run_flush() -> None:
        try:
            tasks.pop(0)()
        except BaseException as e:  # noqa: BLE001 - what the scheduler thread would log
            errors.append(e)

    flusher = threading.Thread(target=run_flush, name="roll-flush")
    flusher.start()
    assert entered.wait(scaled(10))
    closing = threading.Event()
    real_close = segment_module.LogSegment.delete_if_exists

    def observed_delete(self) -> None:
        closing.set()
        real_close(self)

    monkeypatch.setattr(segment_module.LogSegment, "delete_if_exists", observed_delete)
    deleter = threading.Thread(target=log.delete_old_segments)
    deleter.start()
    assert closing.wait(scaled(10))
    deleter.join(0.2)  # without the segment's lock it closes the files now, mid-fsync
    go.set()
    flusher.join(scaled(10))
    deleter.join(scaled(10))
    assert not flusher.is_alive() and not deleter.is_alive()
    assert not errors, errors
