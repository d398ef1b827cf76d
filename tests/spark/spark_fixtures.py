"""The one local SparkSession the Spark tests share, and helpers to read rows back.

Import after ``pytest.importorskip("pyspark")``. The session is made once per test process
(``getOrCreate``; the fixture may be imported by several test modules) and stopped at exit:
``local[2,2]`` (two threads, a failed task tried twice, so task retries can be tested), UI and
progress bars off, two shuffle partitions, UTC session time zone, and Python filter pushdown
enabled (the ``kafkalog`` reader only takes pushed filters with ``pushFilters=true``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
from typing import Any

import pytest

_SESSION: Any = None


def _java_available() -> bool:
    return bool(os.environ.get("JAVA_HOME")) or shutil.which("java") is not None


@pytest.fixture(scope="session")
def spark():
    """A SparkSession with the kafkalog format registered."""
    global _SESSION
    if not _java_available():
        pytest.skip("Spark tests need Java (JAVA_HOME or java on PATH)")
    if _SESSION is None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        import kafkalog.spark

        session = (
            SparkSession.builder.master("local[2,2]")
            .appName("kafkalog-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.python.filterPushdown.enabled", "true")
            .config("spark.driver.memory", "1g")
            .config("spark.sql.streaming.minBatchesToRetain", "2")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        kafkalog.spark.register(session)
        atexit.register(session.stop)
        _SESSION = session
    return _SESSION


def rows(df) -> list[tuple]:
    """The rows as plain tuples ``(topic, partition, offset, key, value, timestamp_us,
    timestampType[, headers])``, sorted; headers as tuples of (key, value) or None."""
    has_headers = "headers" in df.columns
    cols = "topic, partition, offset, key, value, unix_micros(timestamp) AS ts, timestampType"
    out = []
    for r in df.selectExpr(*[c.strip() for c in cols.split(",")], *(["headers"] if has_headers else [])).collect():
        row = (r[0], r[1], r[2], None if r[3] is None else bytes(r[3]), None if r[4] is None else bytes(r[4]), r[5], r[6])
        if has_headers:
            h = r[7]
            row += (None if h is None else tuple((x["key"], None if x["value"] is None else bytes(x["value"])) for x in h),)
        out.append(row)
    return sorted(out, key=lambda t: (t[0], t[1], t[2], repr(t[3:])))
