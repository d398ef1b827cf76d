"""The Spark writer's ``topic`` option against a ``topic`` column (issue 19): as in Spark's
Kafka sink, the option, when set, overrides the column. The rows are taken apart as a write
task does, from an Arrow batch (no SparkSession needed)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from kafkalog import Compression  # noqa: E402
from kafkalog.spark import _write  # noqa: E402


def options(tmp_path, topic: str | None) -> _write._WriteOptions:
    return _write._WriteOptions(
        path=str(tmp_path), staging=str(tmp_path / "staging"), topic=topic, partition=0, num_partitions={},
        default_partitions=None, compression=Compression.NONE, max_batch_bytes=1 << 19, config={},
    )


def topics_written(tmp_path, topic_option: str | None) -> list[str]:
    batch = pa.RecordBatch.from_pydict({"value": [b"a", b"b"], "topic": ["from-column", None]})
    return [tp[0] for *_, tp in _write._rows(batch, options(tmp_path, topic_option), 0, 0)]


def test_the_topic_option_overrides_the_topic_column(tmp_path) -> None:
    assert topics_written(tmp_path, "from-option") == ["from-option", "from-option"]


def test_without_the_option_the_column_names_the_topic(tmp_path) -> None:
    with pytest.raises(Exception, match="a row has no topic"):
        topics_written(tmp_path, None)  # the second row has none
    batch = pa.RecordBatch.from_pydict({"value": [b"a"], "topic": ["from-column"]})
    assert [tp[0] for *_, tp in _write._rows(batch, options(tmp_path, None), 0, 0)] == ["from-column"]
