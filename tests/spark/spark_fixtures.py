"""The one local SparkSession the Spark tests share, and helpers to read rows back.

Import after ``pytest.importorskip("pyspark")``. The session is made once per test process
(``getOrCreate``; the fixture may be imported by several test modules) and stopped at exit:
``local[2,2]`` (two threads, a failed task tried twice, so task retries can be tested), UI and
progress bars off, two shuffle partitions, UTC session time zone, and Python filter pushdown
enabled (the ``kafkalog`` reader only takes pushed filters with ``pushFilters=true``).

On a busy machine (a loaded CI runner) the JVM is slow, not broken: network and heartbeat
timeouts are generous, and a session start that fails by timing out (connecting to the py4j
gateway) is tried again, at most twice; any other failure is raised at once.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
from typing import Any

import pytest
from conftest import AFTER_HANG_GUARD

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
        import kafkalog.spark

        session = _start_session()
        session.sparkContext.setLogLevel("ERROR")
        kafkalog.spark.register(session)
        atexit.register(_stop_quietly, session)
        AFTER_HANG_GUARD.append(lambda: _reset_py4j_connection(session))
        _SESSION = session
    return _SESSION


_log = logging.getLogger(__name__)

#: Session start attempts when starting times out (the JVM or its gateway too slow to answer).
_START_ATTEMPTS = 3


def _start_timed_out(error: BaseException) -> bool:
    """Whether a session start failed by timing out rather than by being wrong (no Java, bad
    configuration): a socket timeout or a refused or reset connection to the py4j gateway."""
    from py4j.protocol import Py4JNetworkError

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, (TimeoutError, ConnectionRefusedError, ConnectionResetError, Py4JNetworkError)):
            return True
        error = error.__cause__ or error.__context__
    return False


def _discard_failed_start() -> None:
    """Forget a half-started SparkContext and its gateway, so the next start launches afresh."""
    from pyspark import SparkContext

    with SparkContext._lock:
        context = SparkContext._active_spark_context
        SparkContext._active_spark_context = None
        gateway = SparkContext._gateway
        SparkContext._gateway = None
        SparkContext._jvm = None
    if context is not None:
        try:
            context.stop()
        except Exception:  # already broken: what matters is the next start
            _log.debug("stopping a half-started SparkContext failed", exc_info=True)
    if gateway is not None:
        try:
            gateway.shutdown()
        except Exception:
            _log.debug("shutting down a half-started py4j gateway failed", exc_info=True)
        proc = getattr(gateway, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def _reset_py4j_connection(session) -> None:
    """Close this thread's py4j connection after the hang guard interrupted a call on it: the
    JVM's answer to that call is still unread there, and the next call would take it for its
    own ("... does not exist in the JVM"). The next call opens a fresh connection."""
    gateway = session.sparkContext._gateway
    client = getattr(gateway, "_gateway_client", None)
    get_connection = getattr(client, "get_thread_connection", None)
    connection = get_connection() if get_connection is not None else None
    if connection is not None:
        connection.close(reset=True)


def _stop_quietly(session) -> None:
    """Stop the session at exit; a session whose JVM is already gone needs no stopping."""
    from py4j.protocol import Py4JError

    try:
        session.stop()
    except (Py4JError, OSError) as e:
        _log.debug("stopping the Spark session at exit: %s", e)


def _start_session():
    from pyspark.sql import SparkSession

    for attempt in range(1, _START_ATTEMPTS + 1):
        try:
            return (
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
                # A loaded machine: slow answers are not lost executors (Spark's defaults are
                # 120 s and 10 s; the heartbeat must stay well below the network timeout).
                .config("spark.network.timeout", "600s")
                .config("spark.executor.heartbeatInterval", "60s")
                .getOrCreate()
            )
        except Exception as e:
            if attempt == _START_ATTEMPTS or not _start_timed_out(e):
                raise
            _log.warning("Spark session start timed out (attempt %d of %d): %s", attempt, _START_ATTEMPTS, e)
            _discard_failed_start()
    raise AssertionError("unreachable")


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
