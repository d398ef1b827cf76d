"""``writeStream.format("kafkalog")``: micro-batches appended exactly once across restarts,
replays (Spark re-running the last batch) and commits stopped midway."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import pyarrow as pa
from spark_fixtures import spark  # noqa: F401
from test_spark_stream import append

from kafkalog import Log
from kafkalog.errors import InvalidConfigError, KafkalogError
from kafkalog.spark import _sink
from kafkalog.spark._sink import _SinkState, _StreamWriter
from kafkalog.spark._write import _write_options

pytestmark = [pytest.mark.spark, pytest.mark.timeout_guard(120)]  # Spark jobs: slow on a busy machine


def sink_query(spark, src: Path, out: Path, checkpoint: Path, sink_id: str | None = None, **options):
    reader = spark.readStream.format("kafkalog").option("startingOffsets", "earliest")
    for k, v in options.items():
        reader = reader.option(k, str(v))
    writer = (
        reader.load(str(src))
        .selectExpr("key", "value", "'copy' AS topic", "partition", "timestamp")
        .writeStream.format("kafkalog")
        .option("checkpointLocation", str(checkpoint))
    )
    if sink_id is not None:
        writer = writer.option("sinkId", sink_id)
    return writer.trigger(availableNow=True).start(str(out))


def run(query) -> None:
    try:
        query.awaitTermination(120)
        if query.exception() is not None:
            raise query.exception()
    finally:
        query.stop()


def copied(out: Path) -> dict[int, list[bytes]]:
    """Values per partition of topic ``copy``, in offset order, read with kafkalog's own reader."""
    from kafkalog.spark import read_records

    got: dict[int, list[bytes]] = {}
    for r in read_records(out, topics=["copy"]):
        got.setdefault(r.partition, []).append(r.value)
    return got


@pytest.mark.timeout_guard(400)
def test_stream_sink_exactly_once_across_restarts_and_replays(spark, tmp_path):
    src, out, checkpoint = tmp_path / "src", tmp_path / "out", tmp_path / "checkpoint"
    append(src / "s-0", [f"a{i}".encode() for i in range(30)])
    append(src / "s-1", [f"b{i}".encode() for i in range(12)])
    run(sink_query(spark, src, out, checkpoint, maxOffsetsPerTrigger=10))
    assert copied(out) == {0: [f"a{i}".encode() for i in range(30)], 1: [f"b{i}".encode() for i in range(12)]}
    state = json.loads((out / ".kafkalog-sink-default.json").read_text())
    assert state["pending"] is None and state["done"] >= 4  # several micro-batches
    assert not (out / ".kafkalog-staging").exists()
    # New data while stopped; the restarted query appends only that.
    append(src / "s-0", [f"c{i}".encode() for i in range(7)])
    run(sink_query(spark, src, out, checkpoint, maxOffsetsPerTrigger=10))
    assert copied(out)[0] == [f"a{i}".encode() for i in range(30)] + [f"c{i}".encode() for i in range(7)]
    # Spark replays the last micro-batch when its commit log misses it (the query stopped after
    # the sink's commit): the sink recognises the batch id and writes nothing twice.
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum beside it
    run(sink_query(spark, src, out, checkpoint, maxOffsetsPerTrigger=10))
    assert copied(out)[0] == [f"a{i}".encode() for i in range(30)] + [f"c{i}".encode() for i in range(7)]
    assert copied(out)[1] == [f"b{i}".encode() for i in range(12)]
    # A second query with a fresh checkpoint (batch ids from 0 again) is refused, not skipped.
    with pytest.raises(Exception, match="written by another query"):
        run(sink_query(spark, src, out, tmp_path / "checkpoint2"))
    run(sink_query(spark, src, out, tmp_path / "checkpoint3", sink_id="second"))
    assert len(copied(out)[0]) == 2 * 37


# ----------------------------------------------------------------------------------------------
# The commit protocol, driven directly (the driver side of the sink, no query)


def writer(spark, out: Path, **options) -> _StreamWriter:
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    schema = StructType([StructField("value", BinaryType()), StructField("topic", StringType())])
    o = {"path": str(out), "partition": "0", **options}
    return _StreamWriter(_write_options(o, schema, False), _sink._sink_id(o))


def stage(w: _StreamWriter, values: list[bytes], batch_id: int, task: int = 0):
    # write() needs a TaskContext (and its micro-batch id); it makes the micro-batch's staging
    # directory and runs stage().
    writer = w.batch_writer(batch_id)
    if not w.options.remote:
        os.makedirs(writer.options.staging, exist_ok=True)
    batch = pa.RecordBatch.from_pydict({"value": values, "topic": ["t"] * len(values)})
    return writer.stage([batch], task, f"attempt-{task}")


def values(out: Path) -> list[bytes]:
    with Log.open(out / "t-0") as log:
        return [r.value for batch in log.read(0, 1 << 30).batches() for r in batch]


def test_a_commit_stopped_midway_is_rolled_back_by_the_replay(spark, tmp_path, monkeypatch):
    out = tmp_path / "out"
    w = writer(spark, out)
    w.commit([stage(w, [b"x0", b"x1"], 0)], 0)
    assert values(out) == [b"x0", b"x1"]
    # Micro-batch 1 stops after appending, before the state says done.
    real = _sink.write_atomically
    calls = []

    def stop_before_done(path, data, **kw):
        calls.append(json.loads(data))
        if calls[-1]["done"] == 1:  # the write that would mark micro-batch 1 done
            raise KeyboardInterrupt("killed")
        real(path, data, **kw)

    monkeypatch.setattr(_sink, "write_atomically", stop_before_done)
    with pytest.raises(KeyboardInterrupt):
        w.commit([stage(w, [b"y0", b"y1", b"y2"], 1)], 1)
    monkeypatch.setattr(_sink, "write_atomically", real)
    assert values(out) == [b"x0", b"x1", b"y0", b"y1", b"y2"]  # appended, not marked done
    state = _SinkState.load(str(out / ".kafkalog-sink-default.json"))
    assert (state.done, state.pending, state.ends) == (0, 1, (("t", 0, 2),))
    # The restarted query replays micro-batch 1: the partial append is removed first.
    w2 = writer(spark, out)
    w2.commit([stage(w2, [b"y0", b"y1", b"y2"], 1)], 1)
    assert values(out) == [b"x0", b"x1", b"y0", b"y1", b"y2"]
    assert _SinkState.load(str(out / ".kafkalog-sink-default.json")) == _SinkState(1)
    # A replay of the last batch writes nothing; a batch after it is appended.
    w2.commit([stage(w2, [b"y0", b"y1", b"y2"], 1)], 1)
    w2.commit([stage(w2, [b"z"], 2)], 2)
    assert values(out) == [b"x0", b"x1", b"y0", b"y1", b"y2", b"z"]


def test_a_crash_before_anything_was_appended_loses_nothing(spark, tmp_path, monkeypatch):
    out = tmp_path / "out"
    w = writer(spark, out)
    w.commit([stage(w, [b"a"], 0)], 0)
    monkeypatch.setattr(_sink._Writer, "commit", lambda self, messages: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        w.commit([stage(w, [b"b"], 1)], 1)  # pending written, nothing appended
    monkeypatch.undo()
    w2 = writer(spark, out)
    w2.commit([stage(w2, [b"b"], 1)], 1)
    assert values(out) == [b"a", b"b"]


def test_empty_micro_batches_and_bad_state(spark, tmp_path):
    out = tmp_path / "out"
    w = writer(spark, out)
    w.commit([None], 0)
    w.commit([], 1)
    assert _SinkState.load(str(out / ".kafkalog-sink-default.json")) == _SinkState(1)
    with pytest.raises(KafkalogError, match="another query"):
        w.commit([], 0)
    (out / ".kafkalog-sink-default.json").write_text('{"version": 1, "done": "x", "pending": null, "ends": []}')
    with pytest.raises(KafkalogError, match="not a kafkalog sink state file"):
        w.commit([], 2)
    (out / ".kafkalog-sink-default.json").write_bytes(b"\x00garbage")
    with pytest.raises(KafkalogError, match=r"\.kafkalog-sink-default\.json"):
        w.commit([], 2)
    for bad in ("", "a/b", "..x" * 40, "x y"):
        with pytest.raises(InvalidConfigError, match="sinkId"):
            _sink._sink_id({"sinkId": bad} if bad else {"sinkId": " "})


def test_staging_is_one_directory_per_micro_batch(spark, tmp_path):
    out = tmp_path / "out"
    w = writer(spark, out)
    lost = stage(w, [b"lost"], 3)  # staged by a micro-batch whose query stopped before its commit
    kept = stage(w, [b"a"], 4)
    sink_dir = out / ".kafkalog-staging" / "sink-default"
    assert sorted(p.name for p in sink_dir.iterdir()) == ["batch-3", "batch-4"]
    assert Path(lost.attempt_dir).parent.name == "batch-3" and Path(kept.attempt_dir).parent.name == "batch-4"
    w.commit([kept], 4)
    assert values(out) == [b"a"]  # micro-batch 3's files were not taken in
    assert not (out / ".kafkalog-staging").exists()  # its own and the earlier one's deleted
    aborted = stage(w, [b"b"], 5)
    assert Path(aborted.attempt_dir).is_dir()
    w.abort([aborted], 5)
    assert not (out / ".kafkalog-staging").exists()
    assert values(out) == [b"a"]


# ----------------------------------------------------------------------------------------------
# A model: micro-batches committed by a driver killed at any step, restarted, and replayed


class Crash(BaseException):
    """The driver killed (nothing catches it, as nothing catches a SIGKILL)."""


#: Where a commit is stopped: not at all; before anything is appended; after the append,
#: before the state says done; while a roll back clears the pending state; after the commit,
#: with Spark's commit log missing it (the batch is replayed).
CRASHES = ("none", "before_append", "before_done", "in_roll_back", "replay")


@contextlib.contextmanager
def crashing(kind: str, batch_id: int) -> Iterator[None]:
    """Patch the sink so that its commit of ``batch_id`` is killed where ``kind`` says."""
    real = _StreamWriter._write_state

    def write_state(self, new):
        if kind == "before_done" and new.pending is None and new.done == batch_id:
            raise Crash(kind)
        if kind == "in_roll_back" and new.pending is None and new.done != batch_id:
            raise Crash(kind)
        real(self, new)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(_StreamWriter, "_write_state", write_state))
        if kind == "before_append":
            stack.enter_context(mock.patch.object(_sink._Writer, "commit", side_effect=Crash(kind)))
        yield


def drive(make_writer: Callable[[], _StreamWriter], batches: list[list[bytes]], plan: list[str],
          stage_batch: Callable[[_StreamWriter, list[bytes], int], object],
          crash: Callable[[str, int], contextlib.AbstractContextManager] = crashing) -> None:
    """Commit ``batches`` as micro-batches 0, 1, ... as a query would whose driver is killed as
    ``plan`` says (one entry per commit attempt; ``none`` once it runs out), restarted after each
    kill (a new writer) and made to replay (Spark re-runs a batch its commit log misses)."""
    w = make_writer()
    attempts = iter(plan)
    for batch_id, vals in enumerate(batches):
        while True:
            kind = next(attempts, "none")
            messages = [stage_batch(w, vals, batch_id)]
            try:
                with crash(kind, batch_id):
                    w.commit(messages, batch_id)
            except Crash:
                w = make_writer()  # the restarted query
                continue
            if kind == "replay":
                w = make_writer()
                w.commit([stage_batch(w, vals, batch_id)], batch_id)
            break


batches_st = st.lists(st.lists(st.binary(min_size=0, max_size=40), min_size=0, max_size=4), min_size=1, max_size=4)


@settings(max_examples=max(1, settings.default.max_examples // 2))
@given(batches=batches_st, plan=st.lists(st.sampled_from(CRASHES), max_size=6))
def test_model_every_micro_batch_once_whatever_stops_when(batches, plan):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        drive(lambda: writer(None, out), batches, plan, stage)
        assert (values(out) if (out / "t-0").exists() else []) == [v for b in batches for v in b]
        assert _SinkState.load(str(out / ".kafkalog-sink-default.json")) == _SinkState(len(batches) - 1)
        assert not (out / ".kafkalog-staging").exists()
