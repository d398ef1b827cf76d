"""Every ```python block of README.md and docs/*.md runs (issue 19: the examples did not).

The blocks of one file run in order in one namespace, in an empty temporary directory, as a
reader would paste them. The paths the docs use for a reader's data (``/data/kafka``,
``/data/kafka-logs``, ``/tmp/kl``) are redirected into that directory, where a small log
directory written through ``Log`` stands in for the reader's; blocks that talk to a broker
(``127.0.0.1:9092``) get a kafkalog broker on a free loopback port. Blocks that use Spark run
only when pyspark is installed (marked ``spark``); blocks with a Kafka client library only when
it is installed (marked ``slow``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
T0 = 1_732_000_000_000


def blocks(path: Path) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block."""
    text = path.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def kind(code: str, path: Path) -> str:
    if path.name == "spark.md" or re.search(r"\bspark\b", code):
        return "spark"
    if re.search(r"^from (kafka|confluent_kafka)\b", code, re.M):
        return "client"
    return "plain"


def groups() -> list:
    params = []
    for path in FILES:
        found = blocks(path)
        for k in ("plain", "client", "spark"):
            if not any(kind(code, path) == k for _, code in found):
                continue
            marks = {"spark": [pytest.mark.spark, pytest.mark.timeout_guard(600)],
                     "client": [pytest.mark.slow, pytest.mark.timeout_guard(120)]}.get(k, [])
            params.append(pytest.param(path, k, marks=marks, id=f"{path.relative_to(ROOT)}-{k}"))
    return params


def sample_log_dirs(root: Path) -> None:
    """``data/kafka`` and ``data/kafka-logs``: the topics the docs name (orders with two
    partitions, payments with a committed and an aborted transaction, users keyed for
    compaction), written through Log."""
    from kafkalog import ControlRecordType, Log, LogConfig, RecordBatchBuilder
    from kafkalog.producer_state.manager import AppendOrigin

    for log_dir in (root / "data" / "kafka", root / "data" / "kafka-logs"):
        for name in ("orders-0", "orders-1", "users-0"):
            with Log.open(log_dir / name, LogConfig(segment_bytes=4096)) as log:
                for i in range(200):
                    b = RecordBatchBuilder(magic=2)
                    b.append(b"key-%d" % (i % 20), b"order %d" % i, timestamp=T0 + i * 1000,
                             headers=[("source", b"doc")])
                    log.append(b.build(), leader_epoch=0)
        with Log.open(log_dir / "payments-0", LogConfig()) as log:
            for pid, end in ((7, ControlRecordType.COMMIT), (8, ControlRecordType.ABORT)):
                b = RecordBatchBuilder(magic=2, producer_id=pid, producer_epoch=0, base_sequence=0,
                                       is_transactional=True)
                b.append(b"card", b"payment of producer %d" % pid, timestamp=T0)
                log.append(b.build(), leader_epoch=0)
                log.append(RecordBatchBuilder.end_transaction_marker(
                    end, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=T0),
                    leader_epoch=0, origin=AppendOrigin.COORDINATOR)


def redirect(code: str, root: Path, bootstrap: str | None) -> str:
    code = code.replace('"/data/', f'"{root}/data/').replace('"/tmp/kl"', f'"{root}/kl"')
    if bootstrap is not None:
        code = code.replace("127.0.0.1:9092", bootstrap)
    return code


@pytest.mark.parametrize(("path", "group"), groups())
def test_examples_run(path: Path, group: str, tmp_path, monkeypatch) -> None:
    if group == "spark":
        pytest.importorskip("pyspark")
        pytest.importorskip("pyarrow")
        if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
            pytest.skip("Spark needs Java")
        monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    code_blocks = [(line, code) for line, code in blocks(path) if kind(code, path) in ("plain", group)]
    if group == "client":
        for library in ("kafka", "confluent_kafka"):
            if any(f"from {library} " in code for _, code in code_blocks) and not importlib.util.find_spec(library):
                pytest.skip(f"{library} is not installed")
    monkeypatch.chdir(tmp_path)
    sample_log_dirs(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    with contextlib.ExitStack() as stack:
        broker = None
        if group == "client":
            from kafkalog.broker import Broker

            broker = stack.enter_context(Broker(str(tmp_path / "broker"), port=0, config={"num.partitions": "3"}))
        if group == "spark" and path.name != "README.md":
            exec(compile(
                "from pyspark.sql import SparkSession\nimport kafkalog.spark\n"
                "spark = SparkSession.builder.master('local[2]').config('spark.ui.enabled', 'false')"
                ".getOrCreate()\nkafkalog.spark.register(spark)\n", "<session>", "exec"), namespace)
        for line, code in code_blocks:
            source = redirect(code, tmp_path, broker.bootstrap if broker is not None else None)
            try:
                exec(compile(source, f"{path.relative_to(ROOT)}:{line}", "exec"), namespace)
            except Exception as e:
                raise AssertionError(f"the example at {path.relative_to(ROOT)} line {line} fails: {e!r}") from e
