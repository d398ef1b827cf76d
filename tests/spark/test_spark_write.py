"""Writing DataFrames with the ``kafkalog`` format: byte-identical records read back, v2
segments of the chosen codec through ``Log``, Kafka's partitioner, and the commit protocol --
staged per task attempt, appended once at job commit, rolled back when the commit fails, safe
under task retries and speculative attempts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import pyarrow as pa  # noqa: E402
from spark_fixtures import rows, spark  # noqa: E402,F401
from test_spark import build_log  # noqa: E402

import kafkalog.spark._write as ks  # noqa: E402
from kafkalog import Compression, FileRecords, KafkalogError, Log, LogConfig  # noqa: E402

pytestmark = pytest.mark.spark


def write(df, path: Path, **options) -> None:
    writer = df.write.format("kafkalog").mode("append")
    for k, v in options.items():
        writer = writer.option(k, str(v))
    writer.save(str(path))


def read(spark, path: Path, **options):
    reader = spark.read.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load(str(path))


def records(rows_: list[tuple]) -> list[tuple]:
    """Rows without their offsets, in offset order per partition."""
    return [r[:2] + r[3:] for r in rows_]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("src")
    build_log(root / "a-0", batches=25)
    build_log(root / "a-1", batches=7, codec=Compression.GZIP)
    build_log(root / "b-0", batches=3)
    return root


def test_write_then_read_back_byte_identical(spark, source, tmp_path):
    df = read(spark, source, includeHeaders="true")
    out = tmp_path / "out"
    # coalesce keeps each partition's records in order (it concatenates the segments' slices).
    write(df.select("key", "value", "headers", "timestamp", "topic", "partition").coalesce(2), out, compression="zstd",
          maxBatchBytes=400,
          **{"segment.bytes": "3000"})
    want, got = rows(df), rows(read(spark, out, includeHeaders="true"))
    assert records(got) == records(want)  # keys, values (null too), headers, timestamps, order
    assert [r[2] for r in got if r[:2] == ("a", 0)] == list(range(125))
    # v2 batches, zstd, through Log: several segments with their indexes; a Log opens them.
    segments = sorted((out / "a-0").glob("*.log"))
    assert len(segments) > 1 and all(s.with_suffix(".index").exists() for s in segments)
    for segment in segments:
        with FileRecords.open(segment) as f:
            assert {(b.magic, b.compression) for b in f.batches(validate=True)} == {(2, Compression.ZSTD)}
    with Log.open(out / "a-0", LogConfig(segment_bytes=3000)) as log:
        assert log.log_end_offset == 125
    assert not (out / ".kafkalog-staging").exists()
    # Appending again continues the offsets.
    write(df.filter("topic = 'b'").select("value"), out, topic="b", partition="0")
    again = [r for r in rows(read(spark, out)) if r[0] == "b"]
    assert [r[2] for r in again] == list(range(30))
    assert [r[4] for r in again[15:]] == [r[4] for r in again[:15]]


def test_topic_partition_options_and_kafkas_partitioner(spark, tmp_path):
    out = tmp_path / "out"
    (out / "keyed-0").mkdir(parents=True)
    (out / "keyed-2").mkdir()  # the topic has 3 partitions already: the partitioner uses 3
    df = spark.createDataFrame([(f"key-{i}", f"value-{i}") for i in range(60)], "key string, value string")
    write(df, out, topic="keyed")
    got = rows(read(spark, out, subscribe="keyed"))
    assert len(got) == 60
    for topic, partition, _, key, value, _, _ in got:
        assert partition == (ks.murmur2(key) & 0x7FFFFFFF) % 3
        assert value == key.replace(b"key", b"value")
    write(spark.createDataFrame([(None, "v")], "key string, value string"), out, topic="fresh", numPartitions="4")
    assert {r[1] for r in rows(read(spark, out, subscribe="fresh"))} <= {0, 1, 2, 3}
    write(spark.createDataFrame([("v",)], "value string"), out, topic="timed", **{"message.timestamp.type": "LogAppendTime"})
    [row] = rows(read(spark, out, subscribe="timed"))
    assert row[6] == 1  # LogAppendTime, stamped by the log


def test_task_retry_writes_every_record_once(spark, source, tmp_path):
    from pyspark import TaskContext

    def fail_first_attempt(batches):
        context = TaskContext.get()
        for i, batch in enumerate(batches):
            yield batch
            if context.attemptNumber() == 0 and context.partitionId() == 0 and i == 0:
                raise RuntimeError("injected failure after the first batch")

    df = read(spark, source).select("key", "value", "timestamp", "topic", "partition").repartition(2, "topic")
    df = df.mapInArrow(fail_first_attempt, df.schema).coalesce(2)
    out = tmp_path / "out"
    write(df, out)
    assert records(rows(read(spark, out))) == records(rows(read(spark, source)))
    assert not (out / ".kafkalog-staging").exists()


def _writer(tmp_path: Path, **extra) -> ks._Writer:
    options = {"path": str(tmp_path / "out"), "topic": "t", "partition": "0", **extra}
    from pyspark.sql.types import BinaryType, StructField, StructType

    schema = StructType([StructField("value", BinaryType())])
    return ks._Writer(ks._write_options(options, schema, overwrite=False))


def _batch(values: list[bytes]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], names=["value"])


def test_speculative_attempts_and_abort(tmp_path):
    writer = _writer(tmp_path)
    first = writer.stage([_batch([b"a", b"b"])], 0, "7-0")
    speculative = writer.stage([_batch([b"a", b"b"])], 0, "9-1")  # a second attempt of the same task
    other = writer.stage([_batch([b"c"])], 1, "8-0")
    assert first.attempt_dir != speculative.attempt_dir
    assert not list((tmp_path / "out").glob("t-*"))  # nothing visible before the commit
    writer.commit([first, other])  # Spark commits one attempt per partition
    with FileRecords.open(tmp_path / "out" / "t-0" / "00000000000000000000.log") as f:
        assert [r.value for r in f.records()] == [b"a", b"b", b"c"]
    assert not (tmp_path / "out" / ".kafkalog-staging").exists()
    with pytest.raises(KafkalogError, match="staging directory is gone"):
        writer.stage([_batch([b"late"])], 0, "10-2")  # a zombie attempt after the job ended
    aborted = _writer(tmp_path)
    aborted.stage([_batch([b"x"])], 0, "1-0")
    aborted.abort([None])
    assert not (tmp_path / "out" / ".kafkalog-staging").exists()
    with FileRecords.open(tmp_path / "out" / "t-0" / "00000000000000000000.log") as f:
        assert len(list(f.records())) == 3


def test_failed_commit_rolls_every_partition_back(tmp_path):
    out = tmp_path / "out"
    writer = _writer(tmp_path)
    good = writer.stage([_batch([b"kept"])], 0, "1-0")
    writer.commit([good])
    writer = _writer(tmp_path)
    first = writer.stage([_batch([b"x"] * 5)], 0, "2-0")
    second = writer.stage([_batch([b"y"] * 5)], 1, "3-0")
    staged = Path(second.attempt_dir) / second.staged[0].file
    data = bytearray(staged.read_bytes())
    data[-1] ^= 0xFF  # the second task's staged batch is damaged: the commit fails on it
    staged.write_bytes(bytes(data))
    with pytest.raises(KafkalogError, match="stored crc"):
        writer.commit([first, second])
    with Log.open(out / "t-0", LogConfig()) as log:
        assert log.log_end_offset == 1  # the first task's five records were rolled back
    assert not (out / ".kafkalog-staging").exists()


def test_bad_writes_are_refused(spark, tmp_path):
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="use mode"):
        df.write.format("kafkalog").mode("overwrite").option("topic", "t").save(str(tmp_path))
    with pytest.raises(Exception, match="needs a value column"):
        write(spark.createDataFrame([("v",)], "other string"), tmp_path, topic="t")
    with pytest.raises(Exception, match="give a topic column or the topic option"):
        write(df, tmp_path)
    with pytest.raises(Exception, match="compression must be"):
        write(df, tmp_path, topic="t", compression="brotli")
    for topic in ("../escape", "a/b", ".."):  # Kafka's topic rule also keeps writes inside the path
        with pytest.raises(Exception, match="illegal topic name"):
            write(spark.createDataFrame([(topic, "v")], "topic string, value string"), tmp_path)
    with pytest.raises(Exception, match="exceeds max.message.bytes"):
        write(spark.createDataFrame([("v" * 5000,)], "value string"), tmp_path, topic="t",
              **{"max.message.bytes": "2048"})
    assert not [p for p in os.listdir(tmp_path) if p.startswith("t-") and os.listdir(tmp_path / p)]
