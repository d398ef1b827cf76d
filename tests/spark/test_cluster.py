"""A real Spark standalone cluster: a master and a worker started on 127.0.0.1 with pyspark's
own ``sbin/spark-daemon.sh``, a driver process in one working directory and the executors in
the worker's: batch read, a relative path, write, ``verify``, and a streaming query into the
kafkalog sink stopped and restarted with data appended in between (no loss, no duplicate).

Everything started is stopped (driver, worker, master) and their directories deleted, even
when the test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from conftest import scaled, wait_until
from test_spark import build_log, direct_rows

import kafkalog

pytestmark = pytest.mark.spark

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _daemon(env: dict, *args: str) -> None:
    script = Path(pyspark.__file__).parent / "sbin" / "spark-daemon.sh"
    subprocess.run(["bash", str(script), *args], env=env, check=True, timeout=scaled(60),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _log_text(logs: Path, cls: str) -> str:
    return "".join(p.read_text(errors="replace") for p in logs.glob(f"*{cls}*.out"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(master url, base directory); stopped and deleted afterwards whatever happened."""
    base = tmp_path_factory.mktemp("cluster")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("the cluster test needs Java 17")
    home = Path(pyspark.__file__).parent
    src = str(Path(kafkalog.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOG_DIR": str(base / "logs"),
        "SPARK_PID_DIR": str(base / "pids"),
        "SPARK_IDENT_STRING": f"kafkalog-test-{os.getpid()}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(base / "worker"),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p),
    }
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    started = []
    try:
        _daemon(env, "start", MASTER, "1", "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port()))
        started.append(MASTER)
        wait_until(lambda: "I have been elected leader" in _log_text(base / "logs", "Master"), 60, "the master's start")
        _daemon(env, "start", WORKER, "1", "--host", "127.0.0.1", "--webui-port", str(free_port()),
                "--cores", "2", "--memory", "1g", "--work-dir", str(base / "worker"), url)
        started.append(WORKER)
        wait_until(lambda: "Successfully registered with master" in _log_text(base / "logs", "Worker"), 60,
                   "the worker's registration")
        yield url, base, env
    finally:
        for cls in reversed(started):
            try:
                _daemon(env, "stop", cls, "1")
            except (subprocess.SubprocessError, OSError):
                pass
        for pid_file in (base / "pids").glob("*.pid"):  # stop what the scripts did not
            try:
                os.kill(int(pid_file.read_text().strip()), 9)
            except (ValueError, OSError):
                pass
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def results(cluster):
    """Run the driver program once on the cluster; its JSON results and the data it read."""
    url, base, env = cluster
    driver = base / "driver"
    logs = driver / "cl" / "logs"
    build_log(logs / "orders-0", batches=40)
    build_log(logs / "orders-1", batches=7)
    expected = sorted(
        [t, p, o, None if v is None else v.hex()] for t, p, o, _, v, *_ in direct_rows([logs / "orders-0", logs / "orders-1"])
    )
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "cluster_driver.py"), url, env["PYTHONPATH"].split(os.pathsep)[0],
         "cl/logs"],
        cwd=driver, env=env, capture_output=True, text=True, timeout=scaled(240), check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, f"driver failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    out = json.loads(lines[-1])
    assert "error" not in out, out["error"]
    return out, expected, logs


@pytest.mark.timeout_guard(180)
def test_batch_read_write_and_verify_on_a_cluster(results):
    out, expected, logs = results
    assert out["executor_cwd"] != out["driver_cwd"]  # the executors run elsewhere
    assert out["batch"] == expected
    assert out["copy"] == expected  # written back by the cluster, read back equal
    segments = sorted(str(p) for p in logs.rglob("*.log"))
    assert sorted(p for p, _ in out["verify"]) == segments and all(ok for _, ok in out["verify"])


@pytest.mark.timeout_guard(180)
def test_stream_restart_on_a_cluster_loses_and_duplicates_nothing(results):
    out, _, _ = results
    assert out["stream"] == [f"first-{i}" for i in range(60)] + [f"second-{i}" for i in range(40)]


# Relative paths are made absolute when the options are parsed on the driver: the executors run
# in the worker's directory and would otherwise find nothing.
@pytest.mark.timeout_guard(180)
def test_relative_path_on_a_cluster(results):
    out, expected, _ = results
    assert out.get("relative") == expected, out.get("relative_error")
