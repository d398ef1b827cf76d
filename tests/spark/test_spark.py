"""The ``kafkalog`` PySpark data source, reading: rows equal to the direct reader on real broker
files and on Kafka 3.8's segments of every magic and codec, every read option, pruning (asserted
on the segments the tasks opened), read_committed, corrupt data both ways, live directories,
filter pushdown. Runs a real local SparkSession (``tests/spark_fixtures.py``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import pyarrow as pa  # noqa: E402
from conftest import DATA, SHARED_CORPUS  # noqa: E402
from spark_fixtures import rows, spark  # noqa: E402,F401

import kafkalog.spark._source as ks  # noqa: E402
from kafkalog.spark._arrow import ARROW_SCHEMA_WITH_HEADERS  # noqa: E402
from kafkalog import (  # noqa: E402
    Compression,
    ControlRecordType,
    FileRecords,
    Log,
    LogConfig,
    RecordBatchBuilder,
)
from kafkalog.checkpoint import OffsetCheckpointFile  # noqa: E402
from kafkalog.producer_state.manager import AppendOrigin  # noqa: E402
from kafkalog.spark import scan_stats  # noqa: E402
from kafkalog.spark._arrow import _arrow_batches  # noqa: E402
from kafkalog.spark._discovery import _PartitionDir  # noqa: E402
from kafkalog.spark._options import _ReadOptions  # noqa: E402
from kafkalog.spark._partition import _PartitionLog  # noqa: E402
from kafkalog.spark._plan import _plan, _resolve_bounds  # noqa: E402

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


# ------------------------------------------------------------------------------------------------
# Data and the direct reader


def direct_rows(partition_dirs: list[Path], *, headers: bool = True, committed: bool = False) -> list[tuple]:
    """What the rows must be, read with ``FileRecords`` batch by batch: control records left out,
    records below the log-start-offset checkpoint left out; with ``committed``, transactions
    whose next marker is ABORT (or with no marker yet: the rest of the log after the first such
    transaction) left out -- decided from the markers, not the ``.txnindex``."""
    out = []
    for d in partition_dirs:
        topic, _, part = d.name.rpartition("-")
        partition = int(part)
        checkpoint = OffsetCheckpointFile(d.parent / "log-start-offset-checkpoint")
        log_start = checkpoint.read().get((topic, partition), 0) if checkpoint.path.exists() else 0
        batches = []
        for seg in sorted(d.glob("*.log")):
            with FileRecords.open(seg) as f:
                for batch in f.batches(validate=True):
                    batches.append((batch, batch.records()))
        aborted: set[int] = set()  # indexes of batches to drop
        lso = None
        if committed:
            open_txn: dict[int, list[int]] = {}
            for i, (batch, records) in enumerate(batches):
                if batch.magic < 2 or not batch.is_transactional:
                    continue
                pid = batch.producer_id
                if batch.is_control:
                    members = open_txn.pop(pid, [])
                    if records and records[0].control_type is ControlRecordType.ABORT:
                        aborted.update(members)
                else:
                    open_txn.setdefault(pid, []).append(i)
            if open_txn:
                lso = min(batches[min(v)][0].base_offset for v in open_txn.values())
        for i, (batch, records) in enumerate(batches):
            if batch.is_control or i in aborted:
                continue
            for r in records:
                if r.offset < log_start or (lso is not None and r.offset >= lso):
                    continue
                row = (topic, partition, r.offset, r.key, r.value, r.timestamp * 1000, int(batch.timestamp_type))
                if headers:
                    row += (tuple((h.key, h.value) for h in r.headers) or None,)
                out.append(row)
    return sorted(out, key=lambda t: (t[0], t[1], t[2], repr(t[3:])))


def partition_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_dir() and any(p.glob("*.log")))


def value(n: int) -> bytes:
    return f"value-{n:05d}-".encode() * (1 + n % 4)


def ts_of(n: int) -> int:
    """Timestamps that mostly grow but sometimes go back (as producers' clocks do)."""
    return T0 + n * 10 - (n % 7) * 25


def build_log(directory: Path, *, batches: int = 60, per_batch: int = 5, segment_bytes: int = 2048,
              codec: Compression = Compression.NONE, first: int = 0) -> list[Path]:
    """A partition log of ``batches`` batches of ``per_batch`` records with small segments and an
    index entry every 256 bytes; returns its segment files."""
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=256)
    with Log.open(directory, config) as log:
        for i in range(batches):
            b = RecordBatchBuilder(compression=codec)
            for j in range(per_batch):
                n = first + i * per_batch + j
                key = None if n % 11 == 0 else f"k{n % 13}".encode()
                headers = [("n", str(n).encode()), ("null", None)] if n % 3 == 0 else []
                b.append(key, None if n % 17 == 5 else value(n), timestamp=ts_of(n), headers=headers)
            log.append(b.build())
    return sorted(directory.glob("*.log"))


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """A log directory: ``orders-0`` (many segments), ``orders-1`` (one), ``audit-0`` (zstd),
    internal topics, and directories a reader must ignore."""
    root = tmp_path_factory.mktemp("logs")
    build_log(root / "orders-0")
    build_log(root / "orders-1", batches=4)
    build_log(root / "audit-0", batches=6, codec=Compression.ZSTD)
    build_log(root / "__consumer_offsets-3", batches=2)
    build_log(root / "__transaction_state-0", batches=1)
    shutil.copytree(root / "orders-1", root / "orders-2.0a1b2c3d-delete")
    (root / ".kafkalog-staging").mkdir()
    return root


def read(spark, path, **options):
    reader = spark.read.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, str(v).lower() if isinstance(v, bool) else str(v))
    return reader.load(str(path))


def stats_of(tmp_path: Path, name: str) -> tuple[str, dict]:
    path = tmp_path / f"stats-{name}"
    return str(path), path


# ------------------------------------------------------------------------------------------------
# Schema


def test_schema_is_sparks_kafka_schema(spark, logs):
    from pyspark.sql.pandas.types import to_arrow_schema

    df = read(spark, logs, includeHeaders=True)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int"), ("headers", "array<struct<key:string,value:binary>>"),
    ]
    assert read(spark, logs).columns == df.columns[:-1]
    # The Arrow batches the executors yield have exactly the types Spark expects.
    assert to_arrow_schema(df.schema, timezone="UTC").equals(ARROW_SCHEMA_WITH_HEADERS, check_metadata=True)
    assert str(ARROW_SCHEMA_WITH_HEADERS.field("headers").type) == "list<element: struct<key: string, value: binary>>"
    options = _ReadOptions(path=str(logs), include_headers=True)
    plog = _PartitionLog(_PartitionDir("orders", 0, str(logs / "orders-0")), options)
    slices = _plan([plog], _resolve_bounds([plog], options), options)
    batch = next(_arrow_batches(slices[0], options))
    assert batch.schema.equals(ARROW_SCHEMA_WITH_HEADERS)
    assert batch.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert [batch.schema.field(n).type for n in ("key", "value", "topic")] == [pa.binary(), pa.binary(), pa.string()]


# ------------------------------------------------------------------------------------------------
# Contents equal to the direct reader


def _real_roots() -> list[Path]:
    roots = [DATA / "real"]
    shared = SHARED_CORPUS / "real"
    if shared.is_dir():
        roots.append(shared)
    return roots


@pytest.mark.parametrize("root", _real_roots(), ids=lambda p: p.parent.name + "/" + p.name)
def test_real_broker_files_equal_the_direct_reader(spark, root):
    got = rows(read(spark, f"{root}/*", includeHeaders=True, includeInternalTopics=True))
    want = direct_rows(partition_dirs(root))
    assert len(got) == len(want) > 500
    assert got == want


def test_kafka38_segments_of_every_magic_and_codec(spark, tmp_path):
    for case in sorted((DATA / "kafka-3.8").iterdir()):
        if case.is_dir():
            target = tmp_path / f"{case.name}-0"
            target.mkdir()
            for f in case.iterdir():
                if not f.name.endswith(".jsonl") and not f.name.endswith(".gz"):
                    shutil.copy(f, target / f.name)
    got = rows(read(spark, tmp_path, includeHeaders=True))
    want = direct_rows(partition_dirs(tmp_path))
    assert {r[0] for r in got} == {f"{c}" for c in (d.name[:-2] for d in tmp_path.iterdir())}
    assert got == want
    assert {r[6] for r in got} == {-1, 0}  # magic 0 has no timestamp type


# ------------------------------------------------------------------------------------------------
# Discovery


def test_directories_topics_and_internal_topics(spark, logs):
    everything = rows(read(spark, logs))
    assert {(r[0], r[1]) for r in everything} == {("orders", 0), ("orders", 1), ("audit", 0)}
    internal = {(r[0], r[1]) for r in rows(read(spark, logs, includeInternalTopics=True))}
    assert {("__consumer_offsets", 3), ("__transaction_state", 0)} <= internal
    assert {r[0] for r in rows(read(spark, logs, subscribe="audit,__consumer_offsets"))} == {"audit", "__consumer_offsets"}
    assert {r[0] for r in rows(read(spark, logs, subscribePattern="ord.*"))} == {"orders"}
    assert rows(read(spark, logs / "orders-1")) == [r for r in everything if r[:2] == ("orders", 1)]
    assert {r[1] for r in rows(read(spark, f"{logs}/orders-*"))} == {0, 1}
    assert everything == direct_rows([logs / "orders-0", logs / "orders-1", logs / "audit-0"], headers=False)


def test_missing_path_and_bad_options_are_clear(spark, logs, tmp_path):
    cases = [
        ({}, tmp_path / "absent", "no such directory"),
        ({"startingOffsets": "soon"}, logs, "startingOffsets must be earliest, latest or JSON"),
        ({"isolationLevel": "serializable"}, logs, "isolationLevel must be"),
        ({"failOnCorruption": "maybe"}, logs, "option failOnCorruption = 'maybe': expected true or false"),
        ({"maxBytesPerPartition": "0"}, logs, "option maxBytesPerPartition = '0': expected an integer in \\[1, "),
    ]
    for options, path, message in cases:
        with pytest.raises(Exception, match=message):
            read(spark, path, **options).count()


# ------------------------------------------------------------------------------------------------
# Offsets, timestamps and pruning


def test_offset_bounds_prune_segments_and_seek(spark, logs, tmp_path):
    segments = sorted((logs / "orders-0").glob("*.log"))
    bases = [int(s.name[:20]) for s in segments]
    assert len(bases) >= 8
    everything = rows(read(spark, logs / "orders-0"))
    start, end = bases[3] + 7, bases[5] + 3
    stats = tmp_path / "stats"
    got = rows(read(spark, logs, startingOffsets=f'{{"orders": {{"0": {start}}}}}',
                    endingOffsets=f'{{"orders": {{"0": {end}, "1": -1}}, "audit": {{"0": 0}}}}', statsPath=stats))
    orders0 = [r for r in got if r[:2] == ("orders", 0)]
    assert [r[2] for r in orders0] == list(range(start, end))
    assert orders0 == [r for r in everything if start <= r[2] < end]
    assert {r[0] for r in got} == {"orders"}  # audit ends at its start: nothing
    opened = scan_stats(stats)
    wanted = {str(segments[i]) for i in (3, 4, 5)} | {str(p) for p in (logs / "orders-1").glob("*.log")}
    assert set(opened["segments"]) == wanted
    # Seeking: the first segment is read from an index entry, not from its start.
    size_3_to_5 = sum(segments[i].stat().st_size for i in (3, 4, 5))
    assert opened["bytes_read"] < size_3_to_5 + sum(p.stat().st_size for p in (logs / "orders-1").glob("*.log"))
    # earliest / latest, and -2 / -1 in JSON (a latest start is an error in batch: test_options).
    assert rows(read(spark, logs / "orders-0", startingOffsets='{"orders": {"0": -2}}',
                     endingOffsets='{"orders": {"0": -1}}')) == everything


def test_timestamp_bounds(spark, logs, tmp_path):
    everything = rows(read(spark, logs / "orders-0"))
    n = len(everything)
    target = ts_of(n // 2)
    first = min(r[2] for r in everything if r[5] >= target * 1000)
    stop = min(r[2] for r in everything if r[5] >= (target + 400) * 1000)
    stats = tmp_path / "stats"
    got = rows(read(spark, logs / "orders-0", startingTimestamp=target, endingTimestamp=target + 400, statsPath=stats))
    assert [r[2] for r in got] == list(range(first, stop))
    segments = sorted((logs / "orders-0").glob("*.log"))
    assert len(scan_stats(stats)["segments"]) < len(segments) // 2
    by_partition = rows(read(spark, logs, subscribe="orders",
                             startingOffsetsByTimestamp=f'{{"orders": {{"0": {target}}}}}'))
    assert min(r[2] for r in by_partition if r[1] == 0) == first
    assert {r[1] for r in by_partition} == {0, 1}  # orders-1 has no JSON entry: from earliest
    with pytest.raises(Exception, match="no record at or after timestamp"):
        read(spark, logs / "orders-0", startingTimestamp=T0 * 2).count()
    assert read(spark, logs / "orders-0", startingTimestamp=T0 * 2, startingOffsetsByTimestampStrategy="latest").count() == 0
    assert rows(read(spark, logs / "orders-0", endingTimestamp=T0 * 2)) == everything  # none matches: to the end


def test_large_segments_split_at_batch_boundaries(spark, tmp_path):
    directory = tmp_path / "big-0"
    build_log(directory, batches=80, per_batch=20, segment_bytes=1 << 20, codec=Compression.LZ4)
    whole = read(spark, directory, includeHeaders=True)
    split = read(spark, directory, includeHeaders=True, maxBytesPerPartition=4096, maxRecordsPerBatch=7)
    assert whole.rdd.getNumPartitions() == 1
    assert split.rdd.getNumPartitions() > 5
    assert rows(split) == rows(whole) == direct_rows([directory])


def test_data_deleted_below_the_log_start(spark, tmp_path):
    root = tmp_path / "logs"
    build_log(root / "gone-0", batches=30)
    with Log.open(root / "gone-0", LogConfig(segment_bytes=2048, index_interval_bytes=256, retention_ms=-1)) as log:
        log.delete_records(40)
        log.delete_old_segments()
    got = rows(read(spark, root))
    assert got[0][2] == 40  # the log-start-offset checkpoint hides what DeleteRecords removed
    with pytest.raises(Exception, match="below the log start offset 40"):
        read(spark, root, startingOffsets='{"gone": {"0": 3}}').count()
    assert rows(read(spark, root, startingOffsets='{"gone": {"0": 3}}', failOnDataLoss=False)) == got


# ------------------------------------------------------------------------------------------------
# Transactions


def test_read_committed_on_kafka38_transactions(spark, tmp_path):
    target = tmp_path / "txn-0"
    shutil.copytree(DATA / "kafka-3.8" / "v2-txn-random", target, ignore=shutil.ignore_patterns("*.jsonl"))
    committed = rows(read(spark, tmp_path, isolationLevel="read_committed", includeHeaders=True))
    uncommitted = rows(read(spark, tmp_path, includeHeaders=True))
    assert committed == direct_rows([target], committed=True)
    assert uncommitted == direct_rows([target])
    assert len(committed) < len(uncommitted)


def _txn_batch(pid: int, seq: int, n: int, start: int) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
    for j in range(n):
        b.append(None, f"p{pid}-{start + j}".encode(), timestamp=T0 + start + j)
    return b.build()


def test_read_committed_drops_aborted_and_stops_at_open_transactions(spark, tmp_path):
    root = tmp_path / "logs"
    config = LogConfig(segment_bytes=700, index_interval_bytes=64)
    marker = RecordBatchBuilder.end_transaction_marker
    with Log.open(root / "tx-0", config) as log:
        seqs = {1: 0, 2: 0, 3: 0}

        def data(pid, n=4):
            log.append(_txn_batch(pid, seqs[pid], n, log.log_end_offset))
            seqs[pid] += n

        def end(pid, kind):
            log.append(marker(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=1, timestamp=T0),
                       origin=AppendOrigin.COORDINATOR)

        for _ in range(3):
            data(1), data(2), data(1), data(2)
            end(1, ControlRecordType.ABORT)   # aborted across segments: the .txnindex entry is
            end(2, ControlRecordType.COMMIT)  # in a later segment than the data
        plain = RecordBatchBuilder()
        plain.append(b"k", b"plain", timestamp=T0)
        log.append(plain.build())
        data(3)  # open: no marker yet
        data(1)
        end(1, ControlRecordType.COMMIT)
    assert len(list((root / "tx-0").glob("*.log"))) > 3
    assert any(p.stat().st_size for p in (root / "tx-0").glob("*.txnindex"))
    committed = rows(read(spark, root, isolationLevel="read_committed"))
    assert committed == direct_rows([root / "tx-0"], headers=False, committed=True)
    values = [r[4] for r in committed]
    assert b"plain" in values and any(v.startswith(b"p2-") for v in values)
    assert not any(v.startswith((b"p1-", b"p3-")) for v in values)  # aborted; beyond the last stable offset
    assert rows(read(spark, root, **{"kafka.isolation.level": "read_committed"})) == committed
    uncommitted = [r[4] for r in rows(read(spark, root))]
    assert sum(v.startswith(b"p1-") for v in uncommitted) == 28 and sum(v.startswith(b"p3-") for v in uncommitted) == 4


# ------------------------------------------------------------------------------------------------
# Corruption


def _corrupt_dir(tmp_path: Path) -> tuple[Path, Path, list]:
    directory = tmp_path / "logs" / "bad-0"
    [segment] = build_log(directory, batches=12, segment_bytes=1 << 20)
    with FileRecords.open(segment) as f:
        batches = [(b.position, b.size_in_bytes, b.base_offset, b.last_offset) for b in f.batches()]
    return directory, segment, batches


def test_corrupt_batch_fails_or_is_skipped(spark, tmp_path):
    directory, segment, batches = _corrupt_dir(tmp_path)
    good = rows(read(spark, directory))
    position, size, first, last = batches[5]
    with open(segment, "r+b") as f:  # flip a byte inside the records: the CRC no longer matches
        f.seek(position + size - 3)
        byte = f.read(1)
        f.seek(position + size - 3)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(Exception) as failure:
        read(spark, directory).count()
    text = str(failure.value)
    assert "CorruptRecordError" in text and str(segment) in text and f"position {position}" in text
    stats = tmp_path / "stats"
    skipped = rows(read(spark, directory, failOnCorruption=False, statsPath=stats))
    assert skipped == [r for r in good if not first <= r[2] <= last]
    totals = scan_stats(stats)
    assert (totals["skipped_batches"], totals["skipped_bytes"]) == (1, size)


def test_corrupt_size_field_resynchronises_at_the_next_index_entry(spark, tmp_path):
    directory, segment, batches = _corrupt_dir(tmp_path)
    good = rows(read(spark, directory))
    position = batches[4][0]
    with open(segment, "r+b") as f:  # an impossible size: the batch cannot even be framed
        f.seek(position + 8)
        f.write((3).to_bytes(4, "big"))
    stats = tmp_path / "stats"
    got = rows(read(spark, directory, failOnCorruption=False, statsPath=stats))
    index_positions = []
    with open(directory / segment.name.replace(".log", ".index"), "rb") as f:
        data = f.read()
    for i in range(0, len(data), 8):
        index_positions.append(int.from_bytes(data[i + 4 : i + 8], "big"))
    resume = min(p for p in index_positions if p > position)
    resumed_at = next(b[2] for b in batches if b[0] == resume)
    assert got == [r for r in good if r[2] < batches[4][2] or r[2] >= resumed_at]
    assert scan_stats(stats)["skipped_bytes"] == resume - position
    with pytest.raises(Exception, match="record size 3 is less than the minimum"):
        read(spark, directory).count()


# ------------------------------------------------------------------------------------------------
# A live directory


def test_live_directory_with_preallocated_files(spark, tmp_path):
    """A running broker's active segment: indexes preallocated (10 MiB of zero entries after the
    real ones) and, with preallocate=true, a .log of zeros after the data."""
    root = tmp_path / "logs"
    config = LogConfig(segment_bytes=4096, index_interval_bytes=128, preallocate=True)
    log = Log.open(root / "live-0", config)
    try:
        for i in range(30):
            b = RecordBatchBuilder()
            for j in range(4):
                b.append(None, value(i * 4 + j), timestamp=ts_of(i * 4 + j))
            log.append(b.build())
        active = log.active_segment
        index = Path(active.offset_index.path)
        assert index.stat().st_size == 10 * 1024 * 1024  # preallocated, as a running broker's
        assert Path(active.log.path).stat().st_size == 4096 > active.size
        first = rows(read(spark, root))
        assert [r[2] for r in first] == list(range(120))
        mid = active.base_offset + 2
        assert [r[2] for r in rows(read(spark, root, startingOffsets=f'{{"live": {{"0": {mid}}}}}'))] == list(range(mid, 120))
        first_at = next(n for n in range(120) if ts_of(n) >= ts_of(118))  # then every later offset
        assert [r[2] for r in rows(read(spark, root, startingTimestamp=ts_of(118)))] == list(range(first_at, 120))
        b = RecordBatchBuilder()
        b.append(None, b"later", timestamp=T0)
        log.append(b.build())
        assert read(spark, root).count() == 121  # a new DataFrame sees the growth
    finally:
        log.close()


# ------------------------------------------------------------------------------------------------
# Filter pushdown


def test_pushed_filters_prune_and_never_leak_into_other_queries(spark, logs, tmp_path):
    segments = sorted((logs / "orders-0").glob("*.log"))
    bases = [int(s.name[:20]) for s in segments]
    everything = rows(read(spark, logs))
    lo = bases[6] + 1
    stats = tmp_path / "pushed"
    pushed = read(spark, logs, pushFilters=True, statsPath=stats)
    got = rows(pushed.filter(f"topic = 'orders' AND partition = 0 AND offset >= {lo} AND offset < {lo + 9}"))
    assert [r[2] for r in got] == list(range(lo, lo + 9))
    assert set(scan_stats(stats)["segments"]) <= {str(s) for s in segments[6:8]}
    # Timestamps: a lower bound prunes; the rows are exactly Spark's own filtering.
    t = ts_of(200)
    stats2 = tmp_path / "pushed-ts"
    by_time = rows(read(spark, logs, pushFilters=True, statsPath=stats2).filter(f"timestamp >= timestamp_millis({t})"))
    assert by_time == [r for r in everything if r[5] >= t * 1000]
    assert len(scan_stats(stats2)["segments"]) < len(segments)
    # A later query on a fresh DataFrame of the same path and options sees everything.
    assert rows(read(spark, logs, pushFilters=True)) == everything
    # The same DataFrame with another filter is planned again with that filter.
    assert rows(pushed.filter("partition = 1")) == [r for r in everything if r[:2] == ("orders", 1)]
    assert rows(pushed.filter("offset < 3")) == [r for r in everything if r[2] < 3]


@pytest.mark.xfail(reason="pyspark 4.1-4.3 reuse the reader planned for a pushed filter for a later query of the "
                          "same DataFrame that pushes none (docs/spark.md, 'Filter pushdown')", strict=False)
def test_same_dataframe_without_filter_after_a_pushed_filter(spark, logs):
    df = read(spark, logs, pushFilters=True)
    assert df.filter("offset < 3").count() < df.count()


# ------------------------------------------------------------------------------------------------
# Distributed verification


def test_verify_runs_per_segment_on_the_executors(spark, logs, tmp_path):
    from kafkalog import verify_segment

    report = ks.verify(spark, str(logs))
    got = {r.path: r for r in report.collect()}
    segments = sorted(str(p) for p in logs.glob("*-[0-9]/*.log"))
    assert sorted(got) == segments  # internal topics too; not the -delete directory
    assert all(r.ok and not r.problems for r in got.values())
    one = verify_segment(segments[0]).to_dict()
    row = got[segments[0]]
    assert (row.base_offset, row.size, row.batches, row.records, row.first_offset, row.last_offset) == (
        one["base_offset"], one["size"], one["batches"], one["records"], one["first_offset"], one["last_offset"])
    directory, segment, batches = _corrupt_dir(tmp_path)
    with open(segment, "r+b") as f:
        f.seek(batches[2][0] + batches[2][1] - 1)
        byte = f.read(1)[0]
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte ^ 0xFF]))
    [bad] = ks.verify(spark, str(directory)).collect()
    assert not bad.ok and bad.topic == "bad" and bad.partition == 0
    assert [(p.kind, p.position) for p in bad.problems][0] == ("crc", batches[2][0])
