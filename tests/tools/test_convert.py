"""``kafkalog.convert``: rebuild-index reproduces the indexes Kafka 3.8 and ``Log`` wrote byte
for byte; convert rewrites segments and partition directories in every magic and codec Kafka
allows, keeping every record as the Record iterator reads it, and refuses what a format cannot
hold."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import DATA, MATRIX, examples
from hypothesis import given
from hypothesis import strategies as st
from test_verify import T0, build_partition

from kafkalog import Compression, FileRecords, RecordBatchBuilder, TimestampType
from kafkalog.errors import ConversionError
from kafkalog.errors import KafkalogError, UnsupportedCodecError
from kafkalog.filenames import segment_logs
from kafkalog.log import Log
from kafkalog import rebuild_indexes, rebuild_path, verify_path, verify_segment
from kafkalog.tools import (
    convert_path,
    convert_segment,
)

KAFKA38 = DATA / "kafka-3.8"
INDEXES = (".index", ".timeindex", ".txnindex")
IDS = [f"v{m}-{c.kafka_name}" for m, c in MATRIX]


def index_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix in INDEXES}


def records(path: Path) -> list[tuple]:
    with FileRecords.open(path) as fr:
        return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in fr.records()]


# -- rebuild-index ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in KAFKA38.iterdir() if p.is_dir()))
def test_rebuild_reproduces_kafka_38_indexes(tmp_path, name: str) -> None:
    work = tmp_path / name
    shutil.copytree(KAFKA38 / name, work)
    expected = index_bytes(work)
    for p in work.iterdir():
        if p.suffix in INDEXES:
            p.unlink()
    (report,) = rebuild_path(work)
    assert index_bytes(work) == expected
    assert report.stopped is None and report.valid_bytes == report.size
    assert rebuild_path(work)[0].changed == ()  # idempotent


@pytest.mark.parametrize("interval", [0, 100, 4096])
def test_rebuild_reproduces_what_log_wrote(tmp_path, interval: int) -> None:
    directory = build_partition(tmp_path, index_interval_bytes=interval, segment_bytes=2500, rounds=14)
    expected = index_bytes(directory)
    assert any(name.endswith(".txnindex") for name in expected)
    for p in directory.iterdir():
        if p.suffix in INDEXES:
            p.write_bytes(b"\x00" * 24)  # damaged indexes
    reports = rebuild_path(directory, index_interval_bytes=interval)
    assert index_bytes(directory) == expected
    assert all(r.changed for r in reports)
    assert verify_path(directory).problems == []


def test_rebuild_dry_run_changes_nothing(tmp_path) -> None:
    directory = build_partition(tmp_path)
    log = segment_logs(directory)[0]
    index = log.with_suffix(".index")
    index.write_bytes(index.read_bytes()[:-8])
    before = index_bytes(directory)
    (report,) = [r for r in rebuild_path(directory, index_interval_bytes=300, dry_run=True) if r.path == str(log)]
    assert report.changed == (index.name,) and report.dry_run
    assert index_bytes(directory) == before
    assert not any(p.name.endswith(".tmp") for p in directory.iterdir())


def test_rebuild_never_touches_the_log(tmp_path) -> None:
    work = tmp_path / "p"
    shutil.copytree(KAFKA38 / "v2-none-random", work)
    log = work / "00000000000000000000.log"
    with FileRecords.open(log) as fr:
        last = list(fr.batches())[-1]
    data = log.read_bytes()[: last.position + 30]
    log.write_bytes(data)
    report = rebuild_indexes(log)
    assert log.read_bytes() == data
    assert report.valid_bytes == last.position and "partial batch" in report.stopped
    # The indexes are those of the valid part, as Kafka's recovery would leave them.
    seg = verify_segment(log)
    assert {p.kind for p in seg.problems} == {"truncated"}


def test_rebuild_refuses_a_directory_in_use(tmp_path) -> None:
    directory = build_partition(tmp_path)
    log = Log.open(directory)
    try:
        with pytest.raises(KafkalogError, match="in use"):
            rebuild_path(directory)
    finally:
        log.close()
    rebuild_path(directory, index_interval_bytes=300)


def test_rebuild_inputs(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        rebuild_path(tmp_path / "missing")
    with pytest.raises(KafkalogError, match="no log segments"):
        rebuild_path(tmp_path)
    (tmp_path / "x.log").write_bytes(b"")
    with pytest.raises(KafkalogError, match="named after its base offset"):
        rebuild_indexes(tmp_path / "x.log")


# -- convert -------------------------------------------------------------------------------------------


def source_segment(directory: Path, magic: int, codec: Compression, *, append_time: bool = False,
                   headers: bool = False, nulls: bool = True) -> Path:
    """A segment of eight batches (each of the given magic and codec) with gaps between them,
    null keys and values, timestamps that go back and forth."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "00000000000000000100.log"
    offset = 100
    with open(path, "wb") as f:
        for i in range(8):
            ts_type = (
                TimestampType.NO_TIMESTAMP_TYPE if magic == 0
                else TimestampType.LOG_APPEND_TIME if append_time else TimestampType.CREATE_TIME
            )
            b = RecordBatchBuilder(magic, codec, ts_type, base_offset=offset,
                                   log_append_time=T0 + 999 if append_time else None)
            for j in range(1 + i % 3):
                key = None if nulls and (i + j) % 4 == 0 else b"key-%d-%d" % (i, j)
                value = None if nulls and (i + j) % 5 == 1 else bytes([i, j]) * (3 + 40 * j)
                hdrs = [("h%d" % j, b"v"), ("n", None)] if headers else []
                b.append(key, value, timestamp=-1 if magic == 0 else T0 + (i * 7) % 5 * 100 + j, headers=hdrs,
                         offset=offset + 2 * j)
            raw = b.build()
            f.write(raw.buffer)
            offset = list(raw.batches())[-1].last_offset + 3
    return path


def expected_records(src: Path, target_magic: int) -> list[tuple]:
    out = records(src)
    if target_magic == 0:
        return [(o, -1, k, v, h) for o, _, k, v, h in out]
    return out


@pytest.mark.parametrize("source", MATRIX, ids=IDS)
@pytest.mark.parametrize("target", MATRIX, ids=IDS)
def test_round_trip_every_magic_and_codec(tmp_path, source, target) -> None:
    src = source_segment(tmp_path / "src", *source)
    magic, codec = target
    report = convert_segment(src, tmp_path / "dst", magic=magic, compression=codec, drop_timestamps=True)
    out = tmp_path / "dst" / src.name
    assert records(out) == expected_records(src, magic)
    with FileRecords.open(out) as fr:
        batches = list(fr.batches(validate=True, strict=True))
    assert {b.magic for b in batches} == {magic}
    assert {b.compression for b in batches} == {codec}
    with FileRecords.open(src) as fr:
        assert report.records == len(records(src)) and report.batches_in == len(list(fr.batches()))
    assert verify_segment(out).problems == []
    # The indexes written are those Kafka's recovery would build for the output.
    expected = index_bytes(out.parent)
    rebuild_indexes(out)
    assert index_bytes(out.parent) == expected


@pytest.mark.parametrize("magic", [1, 2])
def test_log_append_time_is_kept(tmp_path, magic: int) -> None:
    src = source_segment(tmp_path / "src", magic, Compression.GZIP, append_time=True)
    for target in (1, 2):
        convert_segment(src, tmp_path / f"to{target}", magic=target, compression="lz4")
        out = tmp_path / f"to{target}" / src.name
        assert records(out) == records(src)
        with FileRecords.open(out) as fr:
            assert {b.timestamp_type for b in fr.batches()} == {TimestampType.LOG_APPEND_TIME}


def test_v2_fields_survive_a_codec_change(tmp_path) -> None:
    directory = build_partition(tmp_path / "a")
    src = segment_logs(directory)[1]
    convert_segment(src, tmp_path / "b", compression="zstd", compression_level=3)
    out = tmp_path / "b" / src.name
    fields = ("base_offset", "last_offset", "count", "base_timestamp", "max_timestamp", "producer_id",
              "producer_epoch", "base_sequence", "is_transactional", "is_control", "partition_leader_epoch",
              "delete_horizon_ms", "timestamp_type")
    with FileRecords.open(src) as a, FileRecords.open(out) as b:
        before = [tuple(getattr(x, f) for f in fields) for x in a.batches()]
        after = [tuple(getattr(x, f) for f in fields) for x in b.batches()]
        assert {x.compression for x in b.batches() if x.count} == {Compression.ZSTD}
    assert before == after
    assert records(out) == records(src)
    assert out.with_suffix(".txnindex").read_bytes() == src.with_suffix(".txnindex").read_bytes()


def test_empty_and_delete_horizon_batches(tmp_path) -> None:
    from kafkalog.recordbatch import encode_batch, encode_record

    empty = encode_batch(b"", count=0, base_offset=0, last_offset_delta=4, base_timestamp=T0, max_timestamp=T0,
                         producer_id=9, producer_epoch=1, base_sequence=0)
    horizon = encode_batch(encode_record(0, -5, b"k", None) + encode_record(1, 3, b"k2", b"v"), count=2,
                           base_offset=5, last_offset_delta=1, base_timestamp=T0, max_timestamp=T0 + 3,
                           delete_horizon_ms=T0 + 50)
    src = tmp_path / "00000000000000000000.log"
    src.write_bytes(empty + horizon)
    convert_segment(src, tmp_path / "out", compression="gzip")
    out = tmp_path / "out" / src.name
    with FileRecords.open(out) as fr:
        a, b = list(fr.batches())
    assert (a.count, a.last_offset, a.producer_id, a.compression) == (0, 4, 9, Compression.NONE)
    assert (b.delete_horizon_ms, b.compression) == (T0 + 50, Compression.GZIP)
    assert records(out) == records(src)
    with pytest.raises(ConversionError, match="producer id 9"):
        convert_segment(src, tmp_path / "v1", magic=1)
    report = convert_segment(src, tmp_path / "v1", magic=1, drop_producer_state=True)
    assert report.dropped == {"producer_state": 1, "empty_batches": 1}
    assert records(tmp_path / "v1" / src.name) == records(src)


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=30)),
            st.one_of(st.none(), st.binary(max_size=200)),
            st.integers(0, 2**40),
            st.integers(1, 3),
        ),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(MATRIX),
    st.sampled_from(MATRIX),
)
@examples(40)
def test_round_trip_random_records(tmp_path_factory, rows, source, target) -> None:
    root = tmp_path_factory.mktemp("rt")
    src = root / "00000000000000000000.log"
    offset = 0
    with open(src, "wb") as f:
        for key, value, ts, gap in rows:
            b = RecordBatchBuilder(source[0], source[1], base_offset=offset,
                                   timestamp_type=TimestampType.NO_TIMESTAMP_TYPE if source[0] == 0 else TimestampType.CREATE_TIME)
            b.append(key, value, timestamp=-1 if source[0] == 0 else ts)
            f.write(b.build().buffer)
            offset += gap
    convert_segment(src, root / "out", magic=target[0], compression=target[1], drop_timestamps=True)
    assert records(root / "out" / src.name) == expected_records(src, target[0])


def test_headers_need_magic_2(tmp_path) -> None:
    src = source_segment(tmp_path / "src", 2, Compression.SNAPPY, headers=True)
    convert_segment(src, tmp_path / "v2", compression="none")
    assert records(tmp_path / "v2" / src.name) == records(src)
    for magic in (0, 1):
        with pytest.raises(ConversionError, match="has headers"):
            convert_segment(src, tmp_path / f"v{magic}", magic=magic, drop_timestamps=True)
        assert not (tmp_path / f"v{magic}" / src.name).exists()
        assert not (tmp_path / f"v{magic}").exists()  # nor the directory it created (issue 27)


def test_what_old_formats_cannot_hold(tmp_path) -> None:
    src = KAFKA38 / "v2-txn-random" / "00000000000000000000.log"
    with pytest.raises(ConversionError, match="transactional batches"):
        convert_segment(src, tmp_path / "a", magic=1)
    with pytest.raises(UnsupportedCodecError, match="zstd"):
        convert_segment(src, tmp_path / "b", magic=1, compression="zstd")
    with pytest.raises(UnsupportedCodecError, match="unknown codec"):
        convert_segment(src, tmp_path / "b", compression="brotli")
    v1 = source_segment(tmp_path / "v1src", 1, Compression.NONE)
    with pytest.raises(ConversionError, match="magic 0 has no timestamps"):
        convert_segment(v1, tmp_path / "c", magic=0)
    log = tmp_path / "p" / "00000000000000000000.log"
    log.parent.mkdir()
    b = RecordBatchBuilder(2, producer_id=5, producer_epoch=0, base_sequence=0)
    b.append(b"k", b"v", timestamp=T0)
    log.write_bytes(b.build().buffer)
    with pytest.raises(ConversionError, match="drop_producer_state"):
        convert_segment(log, tmp_path / "d", magic=1)


def test_refuses_to_overwrite(tmp_path) -> None:
    src = source_segment(tmp_path / "src", 2, Compression.NONE)
    with pytest.raises(ConversionError, match="source itself"):
        convert_segment(src, src)
    convert_segment(src, tmp_path / "out")
    with pytest.raises(ConversionError, match="exists"):
        convert_segment(src, tmp_path / "out", compression="gzip")
    convert_segment(src, tmp_path / "out", compression="gzip", overwrite=True)
    with FileRecords.open(tmp_path / "out" / src.name) as fr:
        assert {b.compression for b in fr.batches()} == {Compression.GZIP}


def test_refuses_damaged_input(tmp_path) -> None:
    src = source_segment(tmp_path / "src", 2, Compression.NONE)
    data = bytearray(src.read_bytes())
    data[100] ^= 1
    src.write_bytes(data)
    with pytest.raises(KafkalogError, match="crc"):
        convert_segment(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing left, not even the directory it created


def test_convert_a_partition_directory(tmp_path) -> None:
    directory = build_partition(tmp_path / "a")
    out = tmp_path / "b" / directory.name
    report = convert_path(directory, out, compression="lz4")
    assert len(report.segments) == len(segment_logs(directory))
    names = sorted(p.name for p in out.iterdir())
    assert "leader-epoch-checkpoint" in names and any(n.endswith(".snapshot") for n in names)
    assert verify_path(out).problems == []
    assert [records(p) for p in segment_logs(out)] == [records(p) for p in segment_logs(directory)]
    with Log.open(out) as log:
        assert log.log_end_offset == verify_path(directory).partitions[0].log_end_offset
        assert log.load_stats.truncated_bytes == 0 and log.last_stable_offset == log.log_end_offset


def test_convert_a_plain_partition_to_magic_1(tmp_path) -> None:
    directory = build_partition(tmp_path / "a", transactions=False)
    out = tmp_path / "b" / directory.name
    report = convert_path(directory, out, magic=1, compression="snappy")
    assert report.dropped == {"leader_epochs": report.batches_in}
    assert not (out / "leader-epoch-checkpoint").exists()
    assert verify_path(out).problems == []
    with Log.open(out) as log:
        assert log.log_end_offset == verify_path(directory).partitions[0].log_end_offset


def test_convert_inputs(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        convert_path(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(KafkalogError, match="no log segments"):
        convert_path(tmp_path / "empty", tmp_path / "out")
    with pytest.raises(ConversionError, match="magic must be"):
        convert_path(KAFKA38 / "v2-none-random", tmp_path / "out", magic=3)
