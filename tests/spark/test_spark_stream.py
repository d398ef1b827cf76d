"""The ``kafkalog`` source streaming: offsets per topic-partition, maxOffsetsPerTrigger,
Trigger.AvailableNow, tailing directories as they grow (new segments, new partitions),
restarts from a checkpoint without loss or duplication, failOnDataLoss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_fixtures import rows, spark  # noqa: E402,F401
from test_spark import build_log, direct_rows  # noqa: E402

from kafkalog import Log, LogConfig, RecordBatchBuilder  # noqa: E402
from kafkalog.spark._stream import _rate_limit  # noqa: E402

pytestmark = pytest.mark.spark

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=256, retention_ms=-1)


def stream(spark, src: Path, **options):
    reader = spark.readStream.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, str(v).lower() if isinstance(v, bool) else str(v))
    return reader.load(str(src))


def available_now(spark, src: Path, work: Path, **options) -> list[dict]:
    """Run the stream to what is there now (parquet sink, exactly once); the progress reports."""
    query = (
        stream(spark, src, **options)
        .writeStream.format("parquet")
        .option("path", str(work / "out"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(60)
        if query.exception() is not None:
            raise query.exception()
        return [p for p in query.recentProgress if p["numInputRows"] or p["sources"][0]["endOffset"]]
    finally:
        query.stop()


def output(spark, work: Path) -> list[tuple]:
    return rows(spark.read.parquet(str(work / "out")))


def append(directory: Path, values: list[bytes]) -> None:
    with Log.open(directory, CONFIG) as log:
        for v in values:
            b = RecordBatchBuilder()
            b.append(None, v, timestamp=1_700_000_000_000)
            log.append(b.build())


def test_stream_across_new_segments_and_partitions_with_restarts(spark, tmp_path):
    src, work = tmp_path / "logs", tmp_path / "work"
    build_log(src / "s-0", batches=30)  # 150 records, many segments
    build_log(src / "s-1", batches=6)   # 30 records
    progress = available_now(spark, src, work, startingOffsets="earliest", maxOffsetsPerTrigger=50)
    sizes = [p["numInputRows"] for p in progress]
    assert len(sizes) >= 4 and max(sizes) <= 50 and sum(sizes) == 180
    assert json.loads(progress[-1]["sources"][0]["endOffset"]) == {"s": {"0": 150, "1": 30}}
    assert output(spark, work) == direct_rows([src / "s-0", src / "s-1"], headers=False)
    # The directories grow: new segments, and a partition that did not exist.
    append(src / "s-0", [f"more-{i}".encode() * 40 for i in range(20)])
    build_log(src / "s-2", batches=2)
    progress = available_now(spark, src, work, startingOffsets="earliest", maxOffsetsPerTrigger=1000)
    assert sum(p["numInputRows"] for p in progress) == 20 + 10
    assert output(spark, work) == direct_rows([src / "s-0", src / "s-1", src / "s-2"], headers=False)
    # Nothing new: a restart reads nothing and duplicates nothing.
    assert sum(p["numInputRows"] for p in available_now(spark, src, work)) == 0
    assert len(output(spark, work)) == 150 + 30 + 20 + 10


def test_stream_tails_a_growing_directory(spark, tmp_path):
    src = tmp_path / "logs"
    append(src / "tail-0", [b"first"])
    query = (
        stream(spark, src, startingOffsets="latest")
        .writeStream.format("memory").queryName("kafkalog_tail").trigger(processingTime="100 milliseconds").start()
    )
    try:
        query.processAllAvailable()
        append(src / "tail-0", [f"v{i}".encode() * 100 for i in range(40)])  # rolls segments
        query.processAllAvailable()
        got = [bytes(r.value) for r in spark.sql("SELECT value FROM kafkalog_tail ORDER BY offset").collect()]
        assert got == [f"v{i}".encode() * 100 for i in range(40)]  # "latest": not the first record
    finally:
        query.stop()


def test_fail_on_data_loss(spark, tmp_path):
    src, work = tmp_path / "logs", tmp_path / "work"
    build_log(src / "d-0", batches=10)
    assert sum(p["numInputRows"] for p in available_now(spark, src, work, startingOffsets="earliest")) == 50
    append(src / "d-0", [f"x{i}".encode() * 60 for i in range(30)])  # offsets 50..79
    with Log.open(src / "d-0", CONFIG) as log:  # retention deletes data the stream never read
        log.delete_records(65)
        log.delete_old_segments()
        start = log.log_start_offset
    assert start > 50
    with pytest.raises(Exception, match=r"offsets \[50, \d+\) of d-0 were deleted"):
        available_now(spark, src, work)
    available_now(spark, src, work, failOnDataLoss=False)
    got = [r[2] for r in output(spark, work)]
    assert got == list(range(50)) + list(range(start, 80))


def test_rate_limit_shares_offsets_by_lag():
    begin = {("t", 0): 0, ("t", 1): 90}
    latest = {("t", 0): 100, ("t", 1): 100, ("t", 2): 3}
    available = {("t", 0): (0, 100), ("t", 1): (0, 100), ("t", 2): (0, 3)}
    # lags 100, 10, 3 (a new partition from its start): 20 offsets shared in proportion,
    # but at least one for a small lagging partition.
    assert _rate_limit(begin, latest, available, 20) == {("t", 0): 17, ("t", 1): 91, ("t", 2): 1}
    assert _rate_limit(begin, latest, available, 1000) == latest
