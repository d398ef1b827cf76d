"""The options of Spark's Kafka source through Spark: assign, the errors at option parsing,
minPartitions, minOffsetsPerTrigger with maxTriggerDelay, includeMetadata."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_fixtures import rows, spark  # noqa: F401
from test_spark import T0, _txn_batch, build_log, direct_rows, read
from test_spark_stream import append, stream

from kafkalog import ControlRecordType, Log, LogConfig, RecordBatchBuilder
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog.spark import _stream
from kafkalog.spark._arrow import _arrow_schema
from kafkalog.spark._options import _ReadOptions
from kafkalog.spark._stream import _StreamReader

pytestmark = [pytest.mark.spark, pytest.mark.timeout_guard(120)]  # Spark jobs: slow on a busy machine


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("optlogs")
    build_log(root / "orders-0", batches=40)
    build_log(root / "orders-1", batches=4)
    build_log(root / "orders-2", batches=3)
    build_log(root / "audit-0", batches=2)
    build_log(root / "__consumer_offsets-0", batches=1)
    return root


def test_assign_reads_only_the_listed_partitions(spark, logs):
    got = rows(read(spark, logs, assign='{"orders": [0, 2], "__consumer_offsets": [0]}'))
    assert {(r[0], r[1]) for r in got} == {("orders", 0), ("orders", 2), ("__consumer_offsets", 0)}
    assert got == direct_rows([logs / "orders-0", logs / "orders-2", logs / "__consumer_offsets-0"], headers=False)
    with pytest.raises(Exception, match="assign names partitions with no directory: orders-9"):
        read(spark, logs, assign='{"orders": [0, 9]}').count()
    # With offsets: only the assigned partitions' JSON entries matter.
    got = rows(read(spark, logs, assign='{"orders": [1]}', startingOffsets='{"orders": {"1": 5}}'))
    assert [r[2] for r in got] == list(range(5, 20))


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "orders", "subscribePattern": "o.*"}, "only one of subscribe, subscribePattern, assign"),
    ({"subscribe": "orders", "assign": '{"orders": [0]}'}, "only one of"),
    ({"startingOffsets": "latest"}, "startingOffsets can't be latest for batch queries"),
    ({"startingOffsets": '{"orders": {"0": -1}}'}, "startingOffsets for orders-0 can't be latest"),
    ({"endingOffsets": '{"orders": {"0": -2}}'}, "endingOffsets for orders-0 can't be earliest"),
    ({"endingOffsets": "earliest"}, "endingOffsets can't be earliest"),
    ({"minPartitions": "0"}, "option minPartitions = '0': expected an integer in \\[1, "),
    ({"assign": "orders-0"}, "no topic-partitions to assign"),
    ({"includeMetadata": "1"}, "option includeMetadata = '1': expected true or false"),
])
def test_batch_option_errors_through_spark(spark, logs, options, message):
    with pytest.raises(Exception, match=message):
        read(spark, logs, **options).count()


@pytest.mark.parametrize(("options", "message"), [
    ({"endingOffsets": "latest"}, "option endingOffsets is not valid in streaming queries"),
    ({"endingOffsetsByTimestamp": '{"orders": {"0": 1}}'}, "endingOffsetsByTimestamp is not valid in streaming"),
    ({"subscribe": "orders", "subscribePattern": "o.*"}, "only one of"),
    ({"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"}, "higher than maxOffsetsPerTrigger"),
    ({"maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration"),
])
def test_stream_option_errors_through_spark(spark, logs, tmp_path, options, message):
    with pytest.raises(Exception, match=message):
        query = stream(spark, logs, **options).writeStream.format("memory").queryName("bad_opts").start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()


def test_min_partitions_gives_at_least_that_many_input_partitions(spark, logs):
    big = str(1 << 30)  # one input partition per segment only
    plain = read(spark, logs, subscribe="orders", maxBytesPerPartition=big)
    split = read(spark, logs, subscribe="orders", maxBytesPerPartition=big, minPartitions=64)
    assert split.rdd.getNumPartitions() >= 64 > plain.rdd.getNumPartitions()
    assert rows(split) == rows(plain)


def test_include_metadata_columns(spark, tmp_path):
    root = tmp_path / "logs"
    with Log.open(root / "tx-0", LogConfig(segment_bytes=400)) as log:
        plain = RecordBatchBuilder()
        plain.append(b"k", b"plain", timestamp=T0)
        log.append(plain.build(), leader_epoch=3)
        log.roll()  # the rows come from two segment files
        log.append(_txn_batch(7, 0, 3, 1), leader_epoch=4)
        log.append(RecordBatchBuilder.end_transaction_marker(
            ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=1, timestamp=T0,
        ), origin=AppendOrigin.COORDINATOR, leader_epoch=4)
        log.append(_txn_batch(7, 3, 2, 5), leader_epoch=5)
    segments = {s.name for s in (root / "tx-0").glob("*.log")}
    df = read(spark, root, includeMetadata=True, includeHeaders=True)
    assert df.columns[-7:] == ["headers", "producerId", "producerEpoch", "baseSequence", "partitionLeaderEpoch",
                               "isTransactional", "segment"]
    assert [f.dataType.simpleString() for f in df.schema.fields[-6:]] == ["bigint", "smallint", "int", "int", "boolean", "string"]
    # The Arrow batches the executors yield have exactly the types Spark expects.
    from pyspark.sql.pandas.types import to_arrow_schema

    assert to_arrow_schema(df.schema, timezone="UTC").equals(_arrow_schema(True, True))
    got = [tuple(r) for r in df.selectExpr("offset", "producerId", "producerEpoch", "baseSequence",
                                           "partitionLeaderEpoch", "isTransactional", "segment").orderBy("offset").collect()]
    assert [r[:6] for r in got] == [
        (0, -1, -1, -1, 3, False),
        (1, 7, 0, 0, 4, True), (2, 7, 0, 0, 4, True), (3, 7, 0, 0, 4, True),
        (5, 7, 0, 3, 5, True), (6, 7, 0, 3, 5, True),
    ]
    assert len(segments) > 1
    for offset, *_, segment in got:
        assert Path(segment).parent == root / "tx-0" and Path(segment).name in segments
        base = int(Path(segment).name[:20])
        assert base <= offset
    assert [r[-1] for r in got] == sorted(r[-1] for r in got) and len({r[-1] for r in got}) > 1
    # Without the option the schema is Spark's.
    assert "producerId" not in read(spark, root).columns


def test_min_offsets_per_trigger_waits_up_to_max_trigger_delay(tmp_path, monkeypatch):
    src = tmp_path / "logs"
    append(src / "m-0", [b"x"] * 5)
    now = [1_000_000.0]
    monkeypatch.setattr(_stream.time, "time", lambda: now[0])
    options = _ReadOptions.parse({"path": str(src), "minOffsetsPerTrigger": "10", "maxTriggerDelay": "30s"}, streaming=True)
    reader = _StreamReader(options)
    limit = reader.getDefaultReadLimit()
    assert type(limit).__name__ == "ReadMinRows" and limit.min_rows == 10
    start = {"m": {"0": 0}}
    # Spark's first trigger of a run is never held back.
    assert reader.latestOffset(start, limit) == {"m": {"0": 5}}
    start = {"m": {"0": 5}}
    append(src / "m-0", [b"y"] * 3)  # 3 new offsets < 10: held back
    assert reader.latestOffset(start, limit) == start
    now[0] += 29
    assert reader.latestOffset(start, limit) == start
    now[0] += 1  # maxTriggerDelay has passed since the last micro-batch
    assert reader.latestOffset(start, limit) == {"m": {"0": 8}}
    start = {"m": {"0": 8}}
    append(src / "m-0", [b"z"] * 12)  # enough at once
    assert reader.latestOffset(start, limit) == {"m": {"0": 20}}
    # The engine's ReadAllAvailable (Trigger.Once) and Trigger.AvailableNow do not wait.
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    append(src / "m-0", [b"w"])
    assert reader.latestOffset({"m": {"0": 20}}, ReadAllAvailable()) == {"m": {"0": 21}}
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset({"m": {"0": 20}}, limit) == {"m": {"0": 21}}
    # With maxOffsetsPerTrigger the limit is the maximum, and the minimum still holds.
    both = _StreamReader(_ReadOptions.parse(
        {"path": str(src), "minOffsetsPerTrigger": "4", "maxOffsetsPerTrigger": "6"}, streaming=True))
    assert both.getDefaultReadLimit() == ReadMaxRows(6)
    assert both.latestOffset({"m": {"0": 0}}, ReadMaxRows(6)) == {"m": {"0": 6}}
    assert both.latestOffset({"m": {"0": 19}}, ReadMaxRows(6)) == {"m": {"0": 19}}  # 2 < 4: held back


def test_min_offsets_per_trigger_in_a_running_query(spark, tmp_path):
    src = tmp_path / "logs"
    append(src / "q-0", [b"a"] * 3)
    query = (
        stream(spark, src, startingOffsets="earliest", minOffsetsPerTrigger=5, maxTriggerDelay="1h")
        .writeStream.format("memory").queryName("kafkalog_min_offsets").trigger(processingTime="50 milliseconds").start()
    )
    try:
        query.processAllAvailable()  # the first trigger runs: 3 records
        assert spark.sql("SELECT count(*) FROM kafkalog_min_offsets").first()[0] == 3
        append(src / "q-0", [b"b"] * 2)  # 2 < 5: held back (the delay is an hour)
        query.processAllAvailable()
        assert spark.sql("SELECT count(*) FROM kafkalog_min_offsets").first()[0] == 3
        append(src / "q-0", [b"c"] * 3)  # 5 now
        query.processAllAvailable()
        assert spark.sql("SELECT count(*) FROM kafkalog_min_offsets").first()[0] == 8
    finally:
        query.stop()
