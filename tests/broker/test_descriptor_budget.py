"""The broker's descriptor budget (issue 16, item 7): under a small ``RLIMIT_NOFILE`` topic
creation is refused with Kafka's POLICY_VIOLATION and a message before descriptors run out,
existing partitions keep being served, an accept loop out of descriptors backs off with one
warning instead of a traceback per attempt and serves again once descriptors free up, and
``max.broker.partitions`` caps the partitions hosted."""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_broker import RawClient, create, fetch_body, raw_produce

from kafkalog import protocol as p
from kafkalog.broker import Broker

POLICY_VIOLATION = 44
#: The broker's descriptor limit in the subprocess tests.
NOFILE = 160
#: Bounds of the loops below (each ends far sooner).
MAX_TOPICS = 60
MAX_CONNECTIONS = 600
#: stderr may hold a few warnings, never a flood.
STDERR_BOUND = 4096

try:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import PolicyViolationError
except ImportError:
    KafkaAdminClient = None


#: ``python -c`` this, then the broker's arguments: ``kafkalog broker`` under a descriptor limit
#: of :data:`NOFILE` (set in the child itself: no preexec_fn in a threaded test process).
LIMITED_BROKER = (
    "import resource, runpy, sys; "
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({NOFILE}, {NOFILE})); "
    "sys.argv[0] = 'kafkalog broker'; "
    "runpy.run_module('kafkalog.broker', run_name='__main__', alter_sys=True)"
)


def start_limited(log_dir: Path, stderr_path: Path, *config: str, soft: int = NOFILE) -> tuple[subprocess.Popen, str]:
    """``kafkalog broker`` in a subprocess whose descriptor limit is :data:`NOFILE` (the soft
    one ``soft``)."""
    command = LIMITED_BROKER.replace(f"({NOFILE}, {NOFILE})", f"({soft}, {NOFILE})")
    args = [sys.executable, "-c", command, "--log-dir", str(log_dir), "--listen", "127.0.0.1:0"]
    for item in config:
        args += ["--config", item]
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("listening on "):
        proc.kill()
        proc.wait()
        raise AssertionError(f"broker did not start: {line!r} {stderr_path.read_text()}")
    return proc, line.split()[-1]


def wait_for_line(path: Path, needle: str, proc: subprocess.Popen) -> None:
    """Block until the broker's stderr holds ``needle`` (the broker writes it on the event we
    wait for; the poll interval only bounds how often the file is read)."""
    for _ in range(3000):  # a hang guard: at most a minute
        if needle in path.read_text():
            return
        assert proc.poll() is None, path.read_text()
        select.select([], [], [], 0.02)
    raise AssertionError(f"{needle!r} never appeared in stderr: {path.read_text()[:2000]}")


def fetch_values(raw: RawClient, topic: str) -> list[bytes]:
    _, body = raw.call(p.ApiKey.FETCH, 11, fetch_body([(topic, 0, 0)]))
    part = body["responses"][0]["partitions"][0]
    assert part["error_code"] == 0
    from kafkalog.memory_records import MemoryRecords

    return [r.value for b in MemoryRecords(part["records"]).batches() for r in b]


@pytest.mark.skipif(KafkaAdminClient is None, reason="needs kafka-python")
def test_past_the_descriptor_budget_creation_is_refused_and_the_broker_keeps_serving(tmp_path) -> None:
    err = tmp_path / "stderr.txt"
    proc, address = start_limited(tmp_path / "logs", err)
    conns: list[socket.socket] = []
    try:
        # Topics one by one until the budget refuses one: a clean POLICY_VIOLATION with a
        # message, never "Too many open files".
        admin = KafkaAdminClient(bootstrap_servers=address, request_timeout_ms=10000)
        try:
            created = 0
            for i in range(MAX_TOPICS):
                try:
                    admin.create_topics([KNewTopic(f"t{i}", 1, 1)])
                except PolicyViolationError as e:
                    refusal = str(e)
                    break
                created += 1
            else:
                raise AssertionError(f"{MAX_TOPICS} topics created under a limit of {NOFILE} descriptors")
        finally:
            admin.close()
        assert 5 <= created < MAX_TOPICS
        assert "descriptor budget" in refusal and "RLIMIT_NOFILE" in refusal
        with RawClient(address) as raw:
            assert create(raw, "one-more") == POLICY_VIOLATION
            _, body = raw.call(p.ApiKey.METADATA, 4, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True})
            assert body["topics"][0]["error_code"] == POLICY_VIOLATION
            # Existing partitions are still served.
            assert raw_produce(raw, "t0", [b"before"])["error_code"] == 0
            assert fetch_values(raw, "t0") == [b"before"]

            # Now take every descriptor the broker has left with idle connections: its accept()
            # fails with EMFILE. It warns once and backs off; it does not spin.
            port = int(address.rsplit(":", 1)[1])
            for _ in range(MAX_CONNECTIONS):
                if "cannot accept connections" in err.read_text():
                    break
                try:
                    conns.append(socket.create_connection(("127.0.0.1", port), timeout=10))
                except OSError:
                    break  # the listen backlog is full too
            wait_for_line(err, "cannot accept connections", proc)
            # The connection open before the exhaustion still works.
            assert raw_produce(raw, "t0", [b"during"])["error_code"] == 0
            for c in conns:
                c.close()
            conns.clear()
        # Descriptors free up: new connections are served again.
        for _ in range(100):  # connections refused or dropped while the backlog drains
            try:
                with RawClient(address) as raw:
                    assert fetch_values(raw, "t0") == [b"before", b"during"]
                    break
            except (ConnectionError, TimeoutError):
                select.select([], [], [], 0.05)
        else:
            raise AssertionError("the broker did not serve again after descriptors freed up")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        for c in conns:
            c.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.read_text()
    assert len(text.encode()) < STDERR_BOUND, text[:STDERR_BOUND]
    assert "Traceback" not in text and "Too many open files" in text
    assert text.count("cannot accept connections") == 1
    assert text.count("refusing a topic") == 1  # the other refusals within the minute at debug level


def test_a_directory_beyond_the_budget_is_refused_at_start(tmp_path) -> None:
    logs = tmp_path / "logs"
    for i in range(NOFILE // 5):
        (logs / f"many-{i}").mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, "-c", LIMITED_BROKER, "--log-dir", str(logs), "--listen", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 1
    assert "32 partitions need about" in proc.stderr and "RLIMIT_NOFILE is 160" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr) < STDERR_BOUND


def test_max_broker_partitions(tmp_path) -> None:
    with Broker(tmp_path, config={"max.broker.partitions": "4", "num.partitions": "2"}) as broker, \
            RawClient(broker) as raw:
        assert create(raw, "a", 2) == 0
        _, body = raw.call(p.ApiKey.CREATE_TOPICS, 4, {"topics": [{
            "name": "b", "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 5000, "validate_only": True})
        refused = body["topics"][0]
        assert refused["error_code"] == POLICY_VIOLATION
        assert refused["error_message"] == "Creating 3 partition(s) would exceed max.broker.partitions = 4 (2 hosted)"
        _, body = raw.call(p.ApiKey.METADATA, 4, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True})
        assert body["topics"][0]["error_code"] == 0  # 2 + 2
        _, body = raw.call(p.ApiKey.METADATA, 4, {"topics": [{"name": "auto2"}], "allow_auto_topic_creation": True})
        assert body["topics"][0]["error_code"] == POLICY_VIOLATION
        assert broker.topics == {"a": 2, "auto": 2}
        assert raw_produce(raw, "a", [b"x"])["error_code"] == 0


def test_a_repeated_condition_is_logged_once_a_minute(monkeypatch, caplog) -> None:
    from kafkalog.broker import _limits

    now = [1000.0]
    monkeypatch.setattr(_limits.time, "monotonic", lambda: now[0])
    log = _limits.RateLimitedLog(logging.getLogger("kafkalog.broker"), logging.ERROR)
    caplog.set_level(logging.DEBUG, logger="kafkalog.broker")
    for i in range(100):
        log("append to t-%d failed: %s", 0, "[Errno 24] Too many open files")
    now[0] += _limits.WARNING_INTERVAL_S
    log("append to t-%d failed: %s", 0, "again")
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["append to t-0 failed: [Errno 24] Too many open files",
                      "append to t-0 failed: again (99 similar messages suppressed)"]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 99


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads /proc/PID/limits")
def test_the_command_raises_the_soft_limit_to_the_hard_one(tmp_path) -> None:
    """As the JVM does for a Kafka broker (MaxFDLimit): the budget is then the hard limit's."""
    proc, _ = start_limited(tmp_path / "logs", tmp_path / "stderr.txt", soft=64)
    try:
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        line = next(x for x in limits.splitlines() if x.startswith("Max open files"))
        assert line.split()[3:5] == [str(NOFILE), str(NOFILE)]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert f"raised the open-file limit (RLIMIT_NOFILE) from 64 to {NOFILE}" in (tmp_path / "stderr.txt").read_text()
