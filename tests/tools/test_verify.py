"""``kafkalog.verify``: the read-only fsck. Clean on everything Kafka and ``Log`` wrote; finds
each kind of damage injected into a partition ``Log`` wrote (flipped CRC byte, torn tail, index
entries pointing past the log or at a wrong offset, out-of-order time index, a missing aborted
transaction, a corrupt snapshot, unparseable checkpoints, leftover files); never writes."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tracemalloc
from pathlib import Path

import pytest
from conftest import DATA, MATRIX, SHARED_CORPUS, examples
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import (
    Compression,
    ControlRecordType,
    FileRecords,
    RecordBatchBuilder,
    TimestampType,
)
from kafkalog import crc as kcrc
from kafkalog.log_config import LogConfig
from kafkalog.errors import KafkalogError
from kafkalog.filenames import segment_logs
from kafkalog.log import Log
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog.resync import next_valid_batch
from kafkalog.transaction_tracker import TransactionTracker
from kafkalog.verify import (
    MAX_PROBLEMS_PER_KIND,
    Problem,
    verify_path,
    verify_segment,
)

T0 = 1_700_000_000_000
KAFKA38 = DATA / "kafka-3.8"
REAL = DATA / "real"


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


# -- building partitions through Log ---------------------------------------------------------------


def plain(n: int, ts: int, *, magic: int = 2, codec: Compression = Compression.NONE, tombstones: bool = False,
          headers: bool = False, size: int = 40) -> bytes:
    b = RecordBatchBuilder(magic, codec, TimestampType.CREATE_TIME if magic else TimestampType.NO_TIMESTAMP_TYPE)
    for i in range(n):
        value = None if tombstones and i % 3 == 0 else bytes([65 + i % 26]) * size
        hdrs = [("h", b"x")] if headers and magic == 2 else []
        b.append(f"key-{i % 7}".encode(), value, timestamp=ts + i if magic else -1, headers=hdrs)
    return bytes(b.build().buffer)


def txn(pid: int, seq: int, n: int, ts: int) -> bytes:
    b = RecordBatchBuilder(2, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
    for i in range(n):
        b.append(b"tk", b"transactional value %d" % i, timestamp=ts + i)
    return bytes(b.build().buffer)


def idempotent(pid: int, seq: int, n: int, ts: int) -> bytes:
    b = RecordBatchBuilder(2, producer_id=pid, producer_epoch=0, base_sequence=seq)
    for i in range(n):
        b.append(b"ik", b"idempotent %d" % i, timestamp=ts + i)
    return bytes(b.build().buffer)


def marker(kind: ControlRecordType, pid: int, ts: int) -> bytes:
    return bytes(
        RecordBatchBuilder.end_transaction_marker(
            kind, producer_id=pid, producer_epoch=0, coordinator_epoch=3, timestamp=ts
        ).buffer
    )


def build_partition(
    root: Path,
    name: str = "topic-0",
    *,
    magic: int = 2,
    codec: Compression = Compression.NONE,
    rounds: int = 12,
    segment_bytes: int = 3000,
    index_interval_bytes: int = 300,
    transactions: bool = True,
    tombstones: bool = False,
) -> Path:
    """A partition written through ``Log``: several segments, sparse indexes, and (v2)
    interleaved transactions (some aborted, one spanning segments), an idempotent producer,
    leader epochs and producer snapshots; timestamps that sometimes go backwards."""
    directory = root / name
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes)
    clock = Clock()
    log = Log.open(directory, config, clock=clock)
    seqs = {501: 0, 502: 0, 600: 0}
    try:
        ts = T0
        for r in range(rounds):
            epoch = r // 4 if magic == 2 else None
            log.append(plain(3 + r % 4, ts, magic=magic, codec=codec, tombstones=tombstones), leader_epoch=epoch)
            ts += 10 if r % 5 else -7  # now and then an older timestamp
            if magic == 2 and transactions:
                pid = 501 + r % 2
                log.append(txn(pid, seqs[pid], 2, ts), leader_epoch=epoch)
                seqs[pid] += 2
                if r % 3 == 2:
                    other = 502 if pid == 501 else 501  # the other transactional producer
                    kind = ControlRecordType.ABORT if r % 2 else ControlRecordType.COMMIT
                    log.append(marker(kind, pid, ts + 1), leader_epoch=epoch, origin=AppendOrigin.COORDINATOR)
                    if seqs[other]:
                        log.append(marker(ControlRecordType.ABORT, other, ts + 2), leader_epoch=epoch,
                                   origin=AppendOrigin.COORDINATOR)
                log.append(idempotent(600, seqs[600], 2, ts), leader_epoch=epoch)
                seqs[600] += 2
            ts += 13
    finally:
        log.close()
    return directory


def files_state(root: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def kinds(report) -> list[str]:
    return sorted({p.kind for p in report.problems})


def errors(report) -> list[Problem]:
    return [p for p in report.problems if p.severity == "error"]


@pytest.fixture
def partition(tmp_path) -> Path:
    return build_partition(tmp_path)


def segment_with_aborts(directory: Path) -> Path:
    """The first segment whose .txnindex has entries."""
    for log in segment_logs(directory):
        txn_index = log.with_suffix(".txnindex")
        if txn_index.exists() and txn_index.stat().st_size:
            return log
    raise AssertionError("no aborted transaction was indexed")


def middle_batch(log_path: Path):
    with FileRecords.open(log_path) as fr:
        batches = list(fr.batches())
    return batches[len(batches) // 2], batches


# -- clean inputs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in KAFKA38.iterdir() if p.is_dir()))
def test_clean_on_kafka_38_segments(name: str) -> None:
    report = verify_path(KAFKA38 / name, deep=True)
    assert report.ok and report.problems == []
    (segment,) = report.segments
    assert segment.valid_bytes == segment.size and segment.index_entries > 0


def test_kafka_38_figures_match_the_manifest() -> None:
    seg = verify_path(KAFKA38 / "v2-txn-random").segments[0]
    assert (seg.batches, seg.records, seg.aborted_txns) == (62, 178, 7)
    seg = verify_segment(KAFKA38 / "v0-gzip-random" / "00000000000000015000.log")
    assert (seg.batches, seg.records, seg.first_offset, seg.magics, seg.codecs) == (101, 1418, 15000, (0,), ("gzip",))


@pytest.mark.parametrize("name", sorted(p.name for p in REAL.iterdir() if p.is_dir()))
def test_clean_on_real_broker_directories(name: str) -> None:
    report = verify_path(REAL / name, deep=True)
    assert report.ok, [str(p) for p in errors(report)]
    # Only what copying part of a broker's directory leaves: absent indexes, a cleaner's swap file.
    assert set(kinds(report)) <= {"index-missing", "timeindex-missing", "leftover-file"}


@pytest.mark.skipif(not (SHARED_CORPUS / "real").exists(), reason="the shared corpus is not here")
def test_clean_on_the_shared_corpus() -> None:
    for directory in sorted(p for p in (SHARED_CORPUS / "real").iterdir() if p.is_dir()):
        report = verify_path(directory)
        assert report.ok, (directory, [str(p) for p in errors(report)])
    for directory in sorted(p for p in (SHARED_CORPUS / "kafka-3.8").iterdir() if p.is_dir()):
        assert verify_path(directory).problems == []


@pytest.mark.parametrize("magic,codec", MATRIX, ids=[f"v{m}-{c.kafka_name}" for m, c in MATRIX])
def test_clean_on_directories_log_wrote(tmp_path, magic: int, codec: Compression) -> None:
    directory = build_partition(tmp_path, magic=magic, codec=codec, tombstones=True, segment_bytes=1000, rounds=16)
    report = verify_path(tmp_path, deep=True)
    assert report.problems == [], [str(p) for p in report.problems]
    assert len(report.segments) > 2 and all(s.index_entries for s in report.segments[:-1])
    # The figures agree with reading the records.
    records = [r for log in segment_logs(directory) for r in FileRecords.open(log).records()]
    data = [r for r in records if not r.is_control]
    assert sum(s.records for s in report.segments) == len(records)
    assert sum(s.tombstones for s in report.segments) == sum(1 for r in data if r.value is None)
    (partition,) = report.partitions
    assert (partition.topic, partition.partition, partition.log_start_offset) == ("topic", 0, 0)
    assert partition.log_end_offset == records[-1].offset + 1
    if magic == 2:
        assert any(s.aborted_txns for s in report.segments)
        assert {600, 501, 502} <= {p for s in report.segments for p in s.producer_ids}


def test_verify_never_writes(tmp_path) -> None:
    directory = build_partition(tmp_path)
    log = segment_logs(directory)[1]
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(data)
    (directory / "00000000000000000000.log.swap").write_bytes(b"junk")
    before = files_state(tmp_path)
    verify_path(tmp_path, deep=True)
    verify_path(directory)
    for log in segment_logs(directory):
        verify_segment(log)
    assert files_state(tmp_path) == before


def test_reports_are_json_safe(partition) -> None:
    report = verify_path(partition.parent)
    text = json.dumps(report.to_dict())
    back = json.loads(text)
    assert back["ok"] is True and len(back["segments"]) == len(report.segments)
    assert set(back["segments"][0]) >= {
        "path", "base_offset", "size", "valid_bytes", "batches", "records", "first_offset", "last_offset",
        "min_timestamp", "max_timestamp", "magics", "codecs", "problems", "ok",
    }


def test_progress_counts_every_byte(partition) -> None:
    seen = []
    log = segment_logs(partition)[0]
    verify_segment(log, progress=seen.append)
    assert sum(seen) == log.stat().st_size
    seen.clear()
    verify_path(partition, progress=seen.append)
    assert sum(seen) == sum(p.stat().st_size for p in segment_logs(partition))


# -- damage -------------------------------------------------------------------------------------------


def test_flipped_crc_byte(partition) -> None:
    log = segment_logs(partition)[1]
    batch, _ = middle_batch(log)
    data = bytearray(log.read_bytes())
    data[batch.position + 30] ^= 0x01
    log.write_bytes(data)
    report = verify_path(partition)
    assert not report.ok
    seg = report.segments[1]
    (problem,) = [p for p in seg.problems if p.kind == "crc"]
    assert problem.position == batch.position and problem.path == str(log)
    assert "computed crc" in problem.message and "resume at position" in problem.message
    assert seg.valid_bytes == batch.position and seg.last_offset < batch.base_offset


def test_torn_tail(partition) -> None:
    log = segment_logs(partition)[-1]
    _, batches = middle_batch(log)
    last = batches[-1]
    with open(log, "r+b") as f:
        f.truncate(last.position + 20)
    seg = verify_segment(log)
    (problem,) = [p for p in seg.problems if p.severity == "error"]
    assert (problem.kind, problem.position) == ("truncated", last.position)
    assert seg.valid_bytes == last.position


def test_zero_tail_is_a_warning(partition) -> None:
    log = segment_logs(partition)[0]
    size = log.stat().st_size
    with open(log, "r+b") as f:
        f.truncate(size + 5000)  # what preallocate=true leaves after a crash
    seg = verify_segment(log)
    assert seg.ok and [(p.kind, p.position, p.severity) for p in seg.problems] == [("zero-tail", size, "warning")]


def _rewrite_entry(path: Path, entry: int, fmt: str, values) -> None:
    size = struct.calcsize(fmt)
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, entry * size, *values)
    path.write_bytes(data)


def _entries(path: Path, fmt: str) -> list[tuple]:
    return list(struct.iter_unpack(fmt, path.read_bytes()))


def test_index_entry_past_the_log(partition) -> None:
    log = segment_logs(partition)[0]
    index = log.with_suffix(".index")
    entries = _entries(index, ">ii")
    _rewrite_entry(index, len(entries) - 1, ">ii", (entries[-1][0], log.stat().st_size + 100))
    seg = verify_segment(log)
    (problem,) = seg.problems
    assert (problem.kind, problem.path, problem.position) == ("index-mismatch", str(index), len(entries) - 1)
    assert "past the end of the file" in problem.message


def test_index_entry_at_a_wrong_offset(partition) -> None:
    log = segment_logs(partition)[0]
    index = log.with_suffix(".index")
    entries = _entries(index, ">ii")
    rel, position = entries[0]
    _rewrite_entry(index, 0, ">ii", (rel - 1, position))
    seg = verify_segment(log)
    assert [(p.kind, p.position) for p in seg.problems] == [("index-mismatch", 0)]
    assert "ends at offset" in seg.problems[0].message


def test_index_entry_inside_a_batch(partition) -> None:
    log = segment_logs(partition)[0]
    index = log.with_suffix(".index")
    rel, position = _entries(index, ">ii")[0]
    _rewrite_entry(index, 0, ">ii", (rel, position + 3))
    seg = verify_segment(log)
    assert [(p.kind, p.position) for p in seg.problems] == [("index-mismatch", 0)]
    assert "inside a batch" in seg.problems[0].message


def test_index_not_monotonic(partition) -> None:
    log = segment_logs(partition)[0]
    index = log.with_suffix(".index")
    entries = _entries(index, ">ii")
    assert len(entries) >= 2
    _rewrite_entry(index, 1, ">ii", entries[0])
    seg = verify_segment(log)
    assert [(p.kind, p.position) for p in seg.problems] == [("index-not-monotonic", 1)]


def test_time_index_not_monotonic(partition) -> None:
    log = segment_logs(partition)[0]
    tindex = log.with_suffix(".timeindex")
    entries = _entries(tindex, ">qi")
    assert len(entries) >= 2
    _rewrite_entry(tindex, 1, ">qi", (entries[0][0] - 1, entries[1][1]))
    seg = verify_segment(log)
    assert ("timeindex-not-monotonic", 1) in [(p.kind, p.position) for p in seg.problems]
    assert not seg.ok


def test_time_index_wrong_timestamp(partition) -> None:
    log = segment_logs(partition)[0]
    tindex = log.with_suffix(".timeindex")
    entries = _entries(tindex, ">qi")
    last = len(entries) - 1
    _rewrite_entry(tindex, last, ">qi", (entries[-1][0] + 1, entries[-1][1]))
    seg = verify_segment(log)
    assert [(p.kind, p.position) for p in seg.problems] == [("timeindex-mismatch", last)]


def test_preallocated_index_is_a_warning(partition) -> None:
    log = segment_logs(partition)[0]
    for suffix in (".index", ".timeindex"):
        path = log.with_suffix(suffix)
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size + 4800)  # an untrimmed index of an unclean shutdown
    seg = verify_segment(log)
    assert seg.ok and kinds(seg) == ["index-preallocated", "timeindex-preallocated"]


def test_txnindex_missing_an_aborted_transaction(partition) -> None:
    log = segment_with_aborts(partition)
    txn_index = log.with_suffix(".txnindex")
    data = txn_index.read_bytes()
    txn_index.write_bytes(data[:-34])
    report = verify_path(partition)
    problems = [p for p in report.problems if p.kind == "txnindex-mismatch"]
    assert len(problems) == 1 and problems[0].severity == "error" and problems[0].path == str(txn_index)
    assert "no entry for the transaction" in problems[0].message


def test_txnindex_entry_without_a_marker(partition) -> None:
    log = segment_with_aborts(partition)
    txn_index = log.with_suffix(".txnindex")
    version, pid, first, last, lso = struct.unpack_from(">hqqqq", txn_index.read_bytes(), 0)
    _rewrite_entry(txn_index, 0, ">hqqqq", (version, pid + 1, first, last, lso))
    report = verify_path(partition)
    assert [p.kind for p in errors(report)] == ["txnindex-mismatch"]
    assert "names producer" in errors(report)[0].message


def test_missing_txnindex(partition) -> None:
    log = segment_with_aborts(partition)
    log.with_suffix(".txnindex").unlink()
    report = verify_path(partition)
    assert errors(report) and {p.kind for p in errors(report)} == {"txnindex-mismatch"}
    assert "there is no" in errors(report)[0].message


def test_corrupt_snapshot_crc(partition) -> None:
    snapshots = sorted(partition.glob("*.snapshot"))
    data = bytearray(snapshots[-1].read_bytes())
    assert len(data) > 10
    data[12] ^= 0x40
    snapshots[-1].write_bytes(data)
    report = verify_path(partition)
    (problem,) = errors(report)
    assert (problem.kind, problem.path) == ("snapshot-crc", str(snapshots[-1]))


def test_truncated_snapshot(partition) -> None:
    snapshot = sorted(partition.glob("*.snapshot"))[-1]
    snapshot.write_bytes(snapshot.read_bytes()[:-5])
    assert [p.kind for p in errors(verify_path(partition))] == ["snapshot-corrupt"]


@pytest.mark.parametrize(
    "name,content",
    [
        ("leader-epoch-checkpoint", b"0\n2\n0 0\n"),
        ("leader-epoch-checkpoint", b"garbage\n"),
        ("partition.metadata", b"version: 0\ntopic_id: nope"),
    ],
)
def test_unparseable_partition_checkpoint(partition, name: str, content: bytes) -> None:
    (partition / name).write_bytes(content)
    report = verify_path(partition)
    (problem,) = errors(report)
    assert (problem.kind, problem.path) == ("checkpoint-parse", str(partition / name))


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "cleaner-offset-checkpoint"])
def test_unparseable_log_dir_checkpoint(partition, name: str) -> None:
    path = partition.parent / name
    path.write_bytes(b"0\n1\ntopic 0 not-a-number\n")
    report = verify_path(partition.parent)
    (problem,) = errors(report)
    assert (problem.kind, problem.path, problem.position) == ("checkpoint-parse", str(path), 4)
    assert verify_path(path).other[0].kind == "checkpoint-parse"


def test_checkpoints_inconsistent_with_the_log(partition) -> None:
    from kafkalog.checkpoint import OffsetCheckpointFile

    end = verify_path(partition).partitions[0].log_end_offset
    OffsetCheckpointFile(partition.parent / "log-start-offset-checkpoint").write({("topic", 0): end + 5})
    OffsetCheckpointFile(partition.parent / "recovery-point-offset-checkpoint").write({("topic", 0): end + 9})
    report = verify_path(partition.parent)
    found = {(p.kind, p.severity, Path(p.path).name) for p in report.problems}
    assert found == {
        ("checkpoint-inconsistent", "error", "log-start-offset-checkpoint"),
        ("checkpoint-inconsistent", "warning", "recovery-point-offset-checkpoint"),
    }


def test_leader_epochs_against_batches(partition) -> None:
    assert verify_path(partition).problems == []
    (partition / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n7 5\n")
    report = verify_path(partition)
    assert report.ok and kinds(report) == ["leader-epoch-mismatch"]


@pytest.mark.parametrize("suffix", [".swap", ".cleaned", ".deleted"])
def test_leftover_files(partition, suffix: str) -> None:
    leftover = partition / f"00000000000000000000.log{suffix}"
    leftover.write_bytes(segment_logs(partition)[0].read_bytes())
    report = verify_path(partition)
    assert report.ok
    (problem,) = report.problems
    assert (problem.kind, problem.severity, problem.path) == ("leftover-file", "warning", str(leftover))


def test_leftover_delete_directory_and_orphan_index(partition) -> None:
    (partition.parent / "topic-1.0123456789abcdef0123456789abcdef-delete").mkdir()
    (partition / "00000000000000099999.index").write_bytes(b"")
    report = verify_path(partition.parent)
    assert report.ok and kinds(report) == ["leftover-file", "orphan-index"]


def test_offsets_going_backwards_end_the_valid_data(partition) -> None:
    logs = segment_logs(partition)
    log = logs[1]
    first = logs[0].read_bytes()
    with FileRecords.open(logs[0]) as fr:
        batch = next(fr.batches())
    size = log.stat().st_size
    with open(log, "ab") as f:
        f.write(first[: batch.size_in_bytes])  # a batch from the previous segment
    seg = verify_segment(log, check_indexes=False)
    (problem,) = seg.problems
    assert (problem.kind, problem.position) == ("offsets-not-monotonic", size)
    assert seg.valid_bytes == size
    # The same batch alone in a segment named after a later offset lies below its base offset.
    alone = partition / f"{batch.last_offset + 1:020d}.log"
    alone.write_bytes(first[: batch.size_in_bytes])
    (problem,) = verify_segment(alone, check_indexes=False).problems
    assert (problem.kind, problem.position) == ("offset-below-base", 0)


def test_segments_overlapping(partition) -> None:
    logs = segment_logs(partition)
    with FileRecords.open(logs[0]) as fr:
        last = list(fr.batches())[-1].last_offset
    # The second segment claims to start inside the first.
    target = partition / f"{last:020d}.log"
    os.rename(logs[1], target)
    for suffix in (".index", ".timeindex", ".txnindex"):
        if logs[1].with_suffix(suffix).exists():
            os.rename(logs[1].with_suffix(suffix), target.with_suffix(suffix))
    report = verify_path(partition)
    assert "segment-overlap" in [p.kind for p in errors(report)]


def _break_a_record(log: Path) -> int:
    """Make the first batch's first record's key length wrong and fix the CRC: only a deep
    decode notices."""
    data = bytearray(log.read_bytes())
    # record: length varint, attributes, timestamp delta, offset delta, key length varint
    at = 61 + 1 + 1 + 1 + 1
    data[at] = (data[at] + 2) & 0x7F
    struct.pack_into(">I", data, 17, kcrc.crc32c(bytes(data[21 : 12 + struct.unpack_from(">i", data, 8)[0]])))
    log.write_bytes(data)
    return 0


def test_deep_decodes_every_record(partition) -> None:
    log = segment_logs(partition)[0]
    position = _break_a_record(log)
    assert verify_segment(log).ok
    seg = verify_segment(log, deep=True)
    (problem,) = seg.problems
    assert (problem.kind, problem.position) == ("invalid-record", position)


def test_garbage_and_misnamed_inputs(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        verify_path(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(KafkalogError, match="no log segments"):
        verify_path(tmp_path / "empty")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(KafkalogError, match="not a Kafka log file"):
        verify_path(tmp_path / "notes.txt")
    garbage = tmp_path / "00000000000000000000.log"
    garbage.write_bytes(os.urandom(5000))
    seg = verify_segment(garbage, check_indexes=False)
    assert not seg.ok and seg.valid_bytes == 0 and seg.problems[0].position == 0


def test_problems_are_capped_per_kind(partition) -> None:
    log = segment_logs(partition)[0]
    index = log.with_suffix(".index")
    n = len(_entries(index, ">ii"))
    index.write_bytes(struct.pack(">ii", 1, 1) * (MAX_PROBLEMS_PER_KIND + n + 10))
    seg = verify_segment(log)
    shown = [p for p in seg.problems if p.kind == "index-not-monotonic"]
    assert len(shown) == MAX_PROBLEMS_PER_KIND + 1 and "more problems of this kind" in shown[-1].message


def test_memory_stays_flat_on_a_large_segment(tmp_path) -> None:
    """A 24 MB segment of 1,536 batches is verified with well under 1 MB of it in memory at once
    beyond the 1 MiB read chunk."""
    b = RecordBatchBuilder(2)
    for i in range(16):
        b.append(b"k", os.urandom(1000), timestamp=T0 + i)
    proto = bytearray(b.build().buffer)
    log = tmp_path / "00000000000000000000.log"
    with open(log, "wb") as f:
        for n in range(1536):
            struct.pack_into(">q", proto, 0, n * 16)  # the base offset is outside the CRC
            f.write(proto)
    tracemalloc.start()
    try:
        seg = verify_segment(log, check_indexes=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seg.ok and seg.batches == 1536 and seg.records == 1536 * 16
    assert peak < 3 << 20


# -- properties ----------------------------------------------------------------------------------------


@given(st.data())
@examples(40)
def test_any_flipped_byte_under_the_crc_is_found(tmp_path_factory, data) -> None:
    root = tmp_path_factory.mktemp("flip")
    directory = build_partition(root, rounds=4, segment_bytes=100_000)
    log = segment_logs(directory)[0]
    with FileRecords.open(log) as fr:
        batches = list(fr.batches())
    batch = data.draw(st.sampled_from(batches))
    offset = data.draw(st.integers(17, batch.size_in_bytes - 1))  # the CRC and what it covers
    bit = data.draw(st.integers(0, 7))
    raw = bytearray(log.read_bytes())
    raw[batch.position + offset] ^= 1 << bit
    log.write_bytes(raw)
    seg = verify_segment(log)
    assert not seg.ok
    assert any(p.kind == "crc" and p.position == batch.position for p in seg.problems)


@given(st.data())
@examples(40)
def test_never_raises_on_damage(tmp_path_factory, data) -> None:
    root = tmp_path_factory.mktemp("damage")
    directory = build_partition(root, rounds=4, segment_bytes=100_000)
    log = segment_logs(directory)[0]
    raw = bytearray(log.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    log.write_bytes(bytes(raw[:cut]))
    for target in (log, directory):
        report = verify_path(target, deep=True)
        json.dumps(report.to_dict())


# -- the pieces -----------------------------------------------------------------------------------------


def test_next_valid_batch_resynchronises(tmp_path) -> None:
    batches = [plain(3, T0 + i) for i in range(3)]
    for i, raw in enumerate(batches):
        batches[i] = struct.pack(">q", i * 3) + raw[8:]
    path = tmp_path / "x.log"
    garbage = os.urandom(777)
    path.write_bytes(batches[0] + garbage + bytes(3000) + batches[1] + batches[2])
    with FileRecords.open(path) as fr:
        found = next_valid_batch(fr, 1)
        assert found.position == len(batches[0]) + 777 + 3000 and found.base_offset == 3
        assert next_valid_batch(fr, 1, min_offset=4).base_offset == 6
        assert next_valid_batch(fr, 1, max_offset=2) is None
        assert next_valid_batch(fr, found.position + 1).base_offset == 6


def test_transaction_tracker() -> None:
    tracker = TransactionTracker()
    from kafkalog import MemoryRecords

    def feed(raw: bytes, offset: int):
        buf = bytearray(raw)
        struct.pack_into(">q", buf, 0, offset)
        return tracker.on_batch(next(MemoryRecords(bytes(buf)).batches()))

    assert feed(txn(1, 0, 2, T0), 0) is None
    assert feed(txn(2, 0, 2, T0), 2) is None
    end = feed(marker(ControlRecordType.ABORT, 1, T0), 4)
    assert end.aborted_txn == (1, 0, 4, 2)  # the other open transaction starts at 2
    end = feed(marker(ControlRecordType.ABORT, 2, T0), 5)
    assert end.aborted_txn == (2, 2, 5, 6)
    end = feed(marker(ControlRecordType.COMMIT, 3, T0), 6)
    assert end.first_offset is None and end.aborted_txn is None


def test_reports_pickle(partition) -> None:
    """The Spark job ships reports from executors."""
    import pickle

    log = segment_logs(partition)[0]
    data = bytearray(log.read_bytes())
    data[100] ^= 1
    log.write_bytes(data)
    report = verify_path(partition)
    back = pickle.loads(pickle.dumps(report))
    assert back == report and not back.ok and back.segments[0].problems[0].kind == "crc"
