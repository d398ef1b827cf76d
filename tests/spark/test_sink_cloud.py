"""``writeStream.format("kafkalog")`` into S3 (moto's server on 127.0.0.1): the state file on
the store, micro-batches published exactly once across restarts and replays, a commit stopped
midway rolled back (segments deleted, each ``.log`` first) and re-done once, and a staging
prefix per micro-batch that a commit leaves empty."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

import pyarrow as pa  # noqa: E402
from moto_s3 import S3Server, s3, s3_server  # noqa: E402,F401
from spark_fixtures import spark  # noqa: E402,F401
from test_sink import CRASHES, Crash, batches_st, crashing, drive, run  # noqa: E402
from test_spark_stream import append  # noqa: E402

from kafkalog.remote import Storage  # noqa: E402
from kafkalog.errors import KafkalogError  # noqa: E402
from kafkalog.spark import _sink, read_records  # noqa: E402
from kafkalog.spark._sink import _SinkState, _StreamWriter  # noqa: E402
from kafkalog.spark._write import _write_options  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.timeout_guard(300)]

STATE = ".kafkalog-sink-default.json"


def writer(s3: S3Server, url: str, **options) -> _StreamWriter:
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    schema = StructType([StructField("value", BinaryType()), StructField("topic", StringType())])
    o = {"path": url, "partition": "0", "storageOptions": json.dumps(s3.options), **options}
    return _StreamWriter(_write_options(o, schema, False), _sink._sink_id(o))


def stage(w: _StreamWriter, values: list[bytes], batch_id: int, task: int = 0):
    # What write() does in a task of micro-batch ``batch_id`` (it needs a TaskContext).
    batch = pa.RecordBatch.from_pydict({"value": values, "topic": ["t"] * len(values)})
    return w.batch_writer(batch_id).stage([batch], task, f"attempt-{task}")


def values(s3: S3Server, url: str, topic: str = "t") -> list[bytes]:
    if not keys(s3, f"{url[len('s3://'):]}/{topic}-0"):
        return []  # nothing written yet
    return [r.value for r in read_records(url, topics=[topic], storage_options=s3.options)]


def keys(s3: S3Server, prefix: str) -> list[str]:
    fs = s3.fs
    fs.invalidate_cache()
    return sorted(fs.find(prefix))


def state(s3: S3Server, url: str) -> _SinkState:
    return _SinkState.load(Storage.join(url, STATE), Storage.for_path(url, s3.options))


def staged_keys(s3: S3Server, bucket_prefix: str) -> list[str]:
    return [k for k in keys(s3, bucket_prefix) if "/.kafkalog-staging/" in k]


def puts(s3: S3Server, part: str = "") -> list[str]:
    return [r.path for r in s3.log if r.method == "PUT" and part in r.path]


# ----------------------------------------------------------------------------------------------
# The commit protocol on a store, driven directly (the driver side of the sink, no query)


def test_micro_batches_on_s3_exactly_once_state_on_the_store_nothing_local(s3, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a URL taken for a local path would make files here
    s3.make_bucket("sink")
    url = "s3://sink/once"
    w = writer(s3, url)
    w.commit([stage(w, [b"a0", b"a1"], 0)], 0)
    w.commit([stage(w, [b"b0"], 1, task=0), stage(w, [b"b1"], 1, task=1)], 1)
    assert values(s3, url) == [b"a0", b"a1", b"b0", b"b1"]
    raw = s3.fs.cat_file(f"sink/once/{STATE}")
    assert json.loads(raw) == {"version": 1, "done": 1, "pending": None, "ends": []}
    assert staged_keys(s3, "sink/once") == []
    # A replay of the last micro-batch (Spark re-runs it when its commit log misses it) writes
    # nothing: no object is put into the partition, and its staging is deleted.
    s3.clear()
    w.commit([stage(w, [b"b0"], 1), stage(w, [b"b1"], 1, task=1)], 1)
    assert puts(s3, "/once/t-0/") == []
    assert values(s3, url) == [b"a0", b"a1", b"b0", b"b1"]
    assert staged_keys(s3, "sink/once") == []
    # An older batch id: another query wrote this sink.
    with pytest.raises(KafkalogError, match="written by another query"):
        w.commit([], 0)
    # Empty micro-batches still move the state on; the state is written whole, one PUT each
    # time (pending, then done).
    s3.clear()
    w.commit([None], 2)
    assert [r.method for r in s3.log if r.path.endswith(STATE) and r.method != "GET"] == ["PUT", "PUT"]
    w.commit([], 3)
    assert state(s3, url) == _SinkState(3)
    assert values(s3, url) == [b"a0", b"a1", b"b0", b"b1"]
    assert list(tmp_path.iterdir()) == []


def test_a_commit_stopped_midway_on_s3_is_rolled_back_and_redone_once(s3, monkeypatch, caplog):
    s3.make_bucket("sink")
    url = "s3://sink/midway"
    w = writer(s3, url, **{"segment.bytes": "300", "maxBatchBytes": "100"})  # several segments a commit
    w.commit([stage(w, [b"x0", b"x1"], 0)], 0)
    ys = [b"y%02d" % i + b"." * 60 for i in range(12)]
    # Micro-batch 1 stops after publishing its segments, before the state says done.
    real = _StreamWriter._write_state

    def stop_before_done(self, new):
        if new.done == 1:
            raise KeyboardInterrupt("killed")
        real(self, new)

    monkeypatch.setattr(_StreamWriter, "_write_state", stop_before_done)
    with pytest.raises(KeyboardInterrupt):
        w.commit([stage(w, ys, 1)], 1)
    monkeypatch.undo()
    assert values(s3, url) == [b"x0", b"x1", *ys]  # published, not marked done
    assert state(s3, url) == _SinkState(0, 1, (("t", 0, 2),))
    published = [k.rsplit("/", 1)[1] for k in keys(s3, "sink/midway/t-0") if k.endswith(".log")]
    assert len(published) >= 3 and published[0] == f"{0:020d}.log" and published[1] == f"{2:020d}.log"
    # A segment the stopped commit had begun to publish: its index is there, its .log is not.
    s3.fs.pipe_file(f"sink/midway/t-0/{900:020d}.index", b"")
    # The restarted query replays micro-batch 1: the segments from offset 2 are deleted first
    # (each .log before its other files), then the micro-batch is published again.
    s3.clear()
    w2 = writer(s3, url, **{"segment.bytes": "300", "maxBatchBytes": "100"})
    with caplog.at_level(logging.WARNING, logger="kafkalog.spark"):
        w2.commit([stage(w2, ys, 1)], 1)
    assert values(s3, url) == [b"x0", b"x1", *ys]
    assert state(s3, url) == _SinkState(1)
    assert "micro-batch 1 stopped midway; t-0 rolled back to offset 2" in caplog.text
    deleted = [r.path.rsplit("/", 1)[1] for r in s3.log if r.method == "DELETE" and "/midway/t-0/" in r.path]
    assert set(published[1:]) <= set(deleted) and f"{0:020d}.log" not in deleted
    assert f"{900:020d}.index" in deleted
    for log in published[1:]:
        assert deleted.index(log) < deleted.index(log[:-4] + ".index")
        assert deleted.index(log) < deleted.index(log[:-4] + ".timeindex")
    assert not any(k.endswith(f"{900:020d}.index") for k in keys(s3, "sink/midway/t-0"))
    assert staged_keys(s3, "sink/midway") == []
    # Later micro-batches append after the re-done one.
    w2.commit([stage(w2, [b"z"], 2)], 2)
    assert values(s3, url) == [b"x0", b"x1", *ys, b"z"]


def test_a_crash_on_s3_before_anything_was_published_loses_nothing(s3, monkeypatch):
    s3.make_bucket("sink")
    url = "s3://sink/early"
    w = writer(s3, url)
    w.commit([stage(w, [b"a"], 0)], 0)
    monkeypatch.setattr(_sink._Writer, "commit", lambda self, messages: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        w.commit([stage(w, [b"b"], 1)], 1)  # pending written, nothing published
    monkeypatch.undo()
    assert state(s3, url) == _SinkState(0, 1, (("t", 0, 1),))
    assert staged_keys(s3, "sink/early") == []  # the commit's finally deleted its staging
    w2 = writer(s3, url)
    w2.commit([stage(w2, [b"b"], 1)], 1)
    assert values(s3, url) == [b"a", b"b"]


def test_staging_on_s3_is_one_prefix_per_micro_batch(s3):
    s3.make_bucket("sink")
    url = "s3://sink/staging"
    w = writer(s3, url)
    lost = stage(w, [b"lost"], 3)  # staged by a micro-batch whose query stopped before its commit
    kept = stage(w, [b"a"], 4)
    prefixes = {k.split("/.kafkalog-staging/sink-default/")[1].split("/")[0] for k in staged_keys(s3, "sink/staging")}
    assert prefixes == {"batch-3", "batch-4"}
    assert lost.attempt_dir != kept.attempt_dir
    w.commit([kept], 4)
    assert values(s3, url) == [b"a"]  # micro-batch 3's files were not taken in
    assert staged_keys(s3, "sink/staging") == []  # its own and the earlier micro-batch's deleted
    aborted = stage(w, [b"b"], 5)
    assert staged_keys(s3, "sink/staging")
    w.abort([aborted], 5)
    assert staged_keys(s3, "sink/staging") == []
    assert values(s3, url) == [b"a"]


def test_a_bad_state_object_on_s3_is_refused(s3):
    s3.make_bucket("sink")
    url = "s3://sink/bad"
    w = writer(s3, url)
    s3.fs.pipe_file(f"sink/bad/{STATE}", b"\x00garbage")
    with pytest.raises(KafkalogError, match=r"s3://sink/bad/\.kafkalog-sink-default\.json"):
        w.commit([], 0)


@contextlib.contextmanager
def crashing_on_s3(kind: str, batch_id: int) -> Iterator[None]:
    """``crashing``, and ``mid_publish:<k>``: the driver killed after ``k`` objects of the commit
    were put or copied into place (a segment's indexes without its ``.log``, some segments but
    not all), before any clean-up (nothing is deleted after the kill)."""
    if not kind.startswith("mid_publish:"):
        with crashing(kind, batch_id):
            yield
        return
    budget = [int(kind.split(":")[1])]
    real_put = Storage.put_file

    def put_file(self, local, path):
        if budget[0] == 0:
            raise Crash(kind)
        budget[0] -= 1
        real_put(self, local, path)

    real_copy = Storage.copy

    def copy(self, src, dst):  # the commit publishes executor-built segments by copies on S3
        if budget[0] == 0:
            raise Crash(kind)
        budget[0] -= 1
        real_copy(self, src, dst)

    def remove(self, path, *, recursive=False):
        raise Crash(kind)

    with mock.patch.object(Storage, "put_file", put_file), mock.patch.object(Storage, "copy", copy), \
            mock.patch.object(Storage, "remove", remove):
        yield


@pytest.mark.timeout_guard(600)
@settings(max_examples=max(1, settings.default.max_examples // 6))
@given(batches=batches_st,
       plan=st.lists(st.one_of(st.sampled_from(CRASHES), st.integers(0, 8).map(lambda k: f"mid_publish:{k}")),
                     max_size=6))
def test_model_on_s3_every_micro_batch_once_whatever_stops_when(s3_server, batches, plan):
    s3 = s3_server
    s3.make_bucket("sinkmodel")
    url = f"s3://sinkmodel/{uuid.uuid4().hex}"
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(tempfile, "tempdir", tmp):
        drive(lambda: writer(s3, url, **{"segment.bytes": "300", "maxBatchBytes": "100"}), batches, plan, stage,
              crashing_on_s3)
    assert values(s3, url) == [v for b in batches for v in b]
    assert state(s3, url) == _SinkState(len(batches) - 1)
    bucket_prefix = url[len("s3://"):]
    assert staged_keys(s3, bucket_prefix) == []
    files = [k.rsplit("/", 1)[1] for k in keys(s3, bucket_prefix + "/t-0")]
    logs = {f[:20] for f in files if f.endswith(".log")}
    assert {f[:20] for f in files if f[:20].isdigit()} <= logs  # no file of a half-published segment left


# ----------------------------------------------------------------------------------------------
# Real streaming queries


def sink_query(spark, s3: S3Server, src: Path, url: str, checkpoint: Path, **options):
    reader = spark.readStream.format("kafkalog").option("startingOffsets", "earliest")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return (
        reader.load(str(src))
        .selectExpr("key", "value", "'copy' AS topic", "partition", "timestamp")
        .writeStream.format("kafkalog")
        .option("checkpointLocation", str(checkpoint))
        .option("storageOptions", json.dumps(s3.options))
        .trigger(availableNow=True)
        .start(url)
    )


def copied(s3: S3Server, url: str) -> dict[int, list[bytes]]:
    """Values per partition of topic ``copy``, in offset order."""
    got: dict[int, list[bytes]] = {}
    for r in read_records(url, topics=["copy"], storage_options=s3.options):
        got.setdefault(r.partition, []).append(r.value)
    return got


def unlink_last_commit(checkpoint: Path) -> int:
    """Delete the last entry of Spark's commit log (so Spark replays that micro-batch); its id."""
    last = max((p for p in (checkpoint / "commits").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum beside it
    return int(last.name)


@pytest.mark.timeout_guard(600)
def test_a_stream_into_s3_exactly_once_across_restarts_replays_and_a_commit_stopped_midway(spark, s3, tmp_path):
    src, checkpoint = tmp_path / "src", tmp_path / "checkpoint"
    s3.make_bucket("sinkstream")
    url = "s3://sinkstream/out"
    a = [f"a{i}".encode() for i in range(30)]
    b = [f"b{i}".encode() for i in range(12)]
    append(src / "s-0", a)
    append(src / "s-1", b)
    run(sink_query(spark, s3, src, url, checkpoint, maxOffsetsPerTrigger=10))
    assert copied(s3, url) == {0: a, 1: b}
    first = state(s3, url)
    assert first.pending is None and first.done >= 4  # several micro-batches, recorded on the store
    assert staged_keys(s3, "sinkstream/out") == []
    # the tasks staged under one prefix per micro-batch (Spark's streaming.sql.batchId)
    staging_puts = puts(s3, "/.kafkalog-staging/")
    assert all("/.kafkalog-staging/sink-default/batch-" in p for p in staging_puts), staging_puts
    assert len({p.split("/batch-")[1].split("/")[0] for p in staging_puts}) >= 4
    assert not os.path.exists(src / ".kafkalog-staging")
    # New data while stopped; the restarted query appends only that.
    c = [f"c{i}".encode() for i in range(7)]
    append(src / "s-0", c)
    run(sink_query(spark, s3, src, url, checkpoint, maxOffsetsPerTrigger=10))
    assert copied(s3, url) == {0: a + c, 1: b}
    last = state(s3, url).done
    assert last > first.done
    # The commit of the last micro-batch (c0..c6, offsets 30-36 of copy-0) stopped midway: its
    # segments published, the state pending, Spark's commit log without it. The restarted query
    # replays it: the sink deletes what it published and publishes it again, once.
    bases = [int(k.rsplit("/", 1)[1][:20]) for k in keys(s3, "sinkstream/out/copy-0") if k.endswith(".log")]
    assert 30 in bases
    s3.fs.pipe_file(f"sinkstream/out/{STATE}", _SinkState(last - 1, last, (("copy", 0, 30),)).to_bytes())
    assert unlink_last_commit(checkpoint) == last
    s3.clear()
    run(sink_query(spark, s3, src, url, checkpoint, maxOffsetsPerTrigger=10))
    assert copied(s3, url) == {0: a + c, 1: b}
    assert state(s3, url) == _SinkState(last)
    deleted = [r.path for r in s3.log if r.method == "DELETE" and "/out/copy-0/" in r.path]
    assert any(p.endswith(f"{30:020d}.log") for p in deleted)
    assert any(p.endswith(f"{30:020d}.log") for p in puts(s3, "/out/copy-0/"))  # published again
    # A plain replay (the query stopped after the sink's commit, before Spark's) writes nothing.
    assert unlink_last_commit(checkpoint) == last
    s3.clear()
    run(sink_query(spark, s3, src, url, checkpoint, maxOffsetsPerTrigger=10))
    assert puts(s3, "/out/copy-") == []
    assert copied(s3, url) == {0: a + c, 1: b}
    assert staged_keys(s3, "sinkstream/out") == []
