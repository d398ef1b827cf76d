"""The ``kafkalog`` data source on S3 (moto's server on 127.0.0.1): batch reads with bounds
that fetch only what they select (the server's request log), writes that publish whole segments
(indexes before the ``.log``), ``verify``, and path errors."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

from moto_s3 import s3, s3_server  # noqa: E402,F401
from spark_fixtures import rows, spark  # noqa: E402,F401
from test_cloud import _big_log, _selected_bytes  # noqa: E402
from test_spark import build_log  # noqa: E402

from kafkalog import Log, LogConfig, RecordBatchBuilder
from kafkalog.remote import SMALL_BLOCK_SIZE  # noqa: E402
from kafkalog.errors import InvalidConfigError  # noqa: E402
from kafkalog.spark import read_records  # noqa: E402
from kafkalog.spark._options import _ReadOptions  # noqa: E402

pytestmark = [pytest.mark.spark]


def reader(spark, s3, **options):
    r = spark.read.format("kafkalog").option("storageOptions", json.dumps(s3.options))
    for k, v in options.items():
        r = r.option(k, str(v))
    return r


def key(row) -> tuple:
    return (row.topic, row.partition, row.offset, bytes(row.value) if row.value is not None else None)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    local = tmp_path_factory.mktemp("bigcloud")
    _big_log(local / "big-0")
    _big_log(local / "big-1")
    return local


@pytest.mark.timeout_guard(600)
def test_spark_reads_s3_with_bounds_fetching_only_the_selected_bytes(spark, s3, big):
    s3.put_dir(big, "s3://sparkcloud/logs")
    s3.clear()
    everything = reader(spark, s3).load("s3a://sparkcloud/logs").collect()
    assert sorted(key(r) for r in everything) == sorted(
        (r.topic, r.partition, r.offset, r.value) for r in read_records(big))
    start, end = 3000, 3375  # 5% of each partition's 7500 offsets
    s3.clear()
    bounded = reader(spark, s3, startingOffsets=json.dumps({"big": {"0": start, "1": start}}),
                     endingOffsets=json.dumps({"big": {"0": end, "1": end}})).load("s3://sparkcloud/logs").collect()
    assert sorted(key(r) for r in bounded) == sorted(
        (r.topic, r.partition, r.offset, r.value) for r in read_records(big, start_offsets=start, end_offsets=end))
    selected = 0
    for part in ("big-0", "big-1"):
        logs = sorted((big / part).glob("*.log"))
        n, holding = _selected_bytes(logs, start, end)
        selected += n
        touched = {r.path.rsplit("/", 1)[-1] for r in s3.gets(f"{part}/" + "0" * 5)}
        assert {t for t in touched if t.endswith(".log")} - holding <= {logs[-1].name}
    fetched = s3.bytes_got(".log")
    assert fetched <= 1.2 * selected + 2 * 4 * SMALL_BLOCK_SIZE, (fetched, selected)


@pytest.mark.timeout_guard(600)
def test_spark_writes_to_s3_and_reads_back(spark, s3, tmp_path):
    s3.make_bucket("sparkout")
    df = spark.createDataFrame([(f"k{i % 5}".encode(), f"value-{i}".encode()) for i in range(2000)], "key binary, value binary")
    url = "s3://sparkout/out"
    writer = (df.repartition(3).write.format("kafkalog").mode("append").option("topic", "copy")
              .option("numPartitions", "2").option("segment.bytes", "20000")
              .option("storageOptions", json.dumps(s3.options)))
    writer.save(url)
    writer.save(url)  # a second job appends after the first
    got = reader(spark, s3).load(url).collect()
    assert len(got) == 4000
    values = sorted(bytes(r.value) for r in got)
    assert values == sorted([f"value-{i}".encode() for i in range(2000)] * 2)
    for p in (0, 1):
        offsets = sorted(r.offset for r in got if r.partition == p)
        assert offsets == list(range(len(offsets)))  # offsets continue across the two jobs
    keys = s3.fs.find("sparkout/out")
    assert not [k for k in keys if ".kafkalog-staging" in k]
    logs = [k for k in keys if k.endswith(".log")]
    assert len(logs) > 4
    for log in logs:  # every published segment came with its indexes
        assert log[:-4] + ".index" in keys and log[:-4] + ".timeindex" in keys
    # indexes were uploaded before their .log (the rule readers rely on)
    puts = [r.path for r in s3.log if r.method == "PUT" and "/out/copy-" in r.path]
    for log in [p for p in puts if p.endswith(".log")]:
        assert puts.index(log[:-4] + ".index") < puts.index(log)
    # the files read back byte for byte through the pyspark-free reader too
    assert len(list(read_records(url, storage_options=s3.options))) == 4000


def test_spark_verify_on_s3(spark, s3, big):
    import kafkalog.spark

    s3.put_dir(big, "s3://sparkcloud/verify")
    s3.clear()
    df = kafkalog.spark.verify(spark, "s3://sparkcloud/verify", storage_options=s3.options)
    result = df.collect()
    assert result and all(r.ok for r in result), [r.problems for r in result if not r.ok]
    assert sum(r.records for r in result) == 15000
    # the executors read each segment in place, once: nothing downloaded, nothing written
    assert s3.bytes_got(".log") <= 1.1 * sum(p.stat().st_size for p in big.rglob("*.log"))
    assert {r.method for r in s3.log} <= {"GET", "HEAD"}


def test_spark_path_errors(spark, s3, tmp_path):
    s3.make_bucket("sparkcloud")
    for fail in ("true", "false"):
        with pytest.raises(Exception, match="no such directory.*|.*nothing-here.*"):
            reader(spark, s3, failOnDataLoss=fail).load("s3://sparkcloud/nothing-here").collect()
    with pytest.raises(InvalidConfigError, match="no partition directory"):
        list(read_records(tmp_path))


def test_paths_are_absolute_when_parsed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _ReadOptions.parse({"path": "cl/logs"}).path == str(tmp_path / "cl" / "logs")
    assert _ReadOptions.parse({"path": "file://" + str(tmp_path) + "/x/"}).path == str(tmp_path / "x")
    assert _ReadOptions.parse({"path": "s3a://b//k/"}).path == "s3://b/k"
    with pytest.raises(InvalidConfigError, match="storageOptions"):
        _ReadOptions.parse({"path": "s3://b/k", "storageOptions": "[1]"})


@pytest.mark.timeout_guard(600)
def test_a_stream_from_s3_reads_new_segments_once(spark, s3, tmp_path):
    from test_spark_stream import available_now, output

    local = tmp_path / "src"
    build_log(local / "st-0", batches=20)  # 100 records, several segments
    s3.put_dir(local, "s3://sparkcloud/stream")
    work = tmp_path / "work"
    opts = {"storageOptions": json.dumps(s3.options), "startingOffsets": "earliest"}
    assert sum(p["numInputRows"] for p in available_now(spark, "s3://sparkcloud/stream", work, **opts)) == 100
    # new segments published to the store (as the writer publishes them), then a restart
    with Log.open(local / "st-0", LogConfig(segment_bytes=2048, index_interval_bytes=256)) as log:
        log.roll()
        for i in range(10):
            b = RecordBatchBuilder()
            for j in range(5):
                b.append(None, b"more-%d" % (i * 5 + j), timestamp=1_700_000_000_000 + i)
            log.append(b.build())
    new = sorted(p for p in (local / "st-0").iterdir() if p.name[:20].isdigit() and int(p.name[:20]) >= 100)
    for f in sorted(new, key=lambda p: p.suffix == ".log"):  # indexes first, the .log last
        s3.fs.put_file(str(f), f"sparkcloud/stream/st-0/{f.name}")
    assert sum(p["numInputRows"] for p in available_now(spark, "s3://sparkcloud/stream", work, **opts)) == 50
    assert sorted(r[2] for r in output(spark, work)) == list(range(150))
