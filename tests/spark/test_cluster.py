"""A real Spark standalone cluster: a master and a worker started on 127.0.0.1 with pyspark's
own ``sbin/spark-daemon.sh``, a driver process in one working directory and the executors in
the worker's: batch read, a relative path, write, ``verify``, and a streaming query into the
kafkalog sink stopped and restarted with data appended in between (no loss, no duplicate).

Kept short (issue 17: under two minutes) by doing things side by side rather than checking
less: the worker and the driver start together once the master is up (a worker or an
application that finds no master tries again only 5 to 20 s later), readiness is read from
the master's JSON status page, one driver process runs every phase (its reads beside its
stream, see cluster_driver.py), and every JVM runs with start-up flags (``JVM_FLAGS``). The
phase timings are printed (``pytest -s``).

Everything started is stopped (driver, worker, master) and waited for, and their directories
deleted, even when the test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from conftest import scaled
from test_spark import build_log, direct_rows

import kafkalog

pytestmark = pytest.mark.spark

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"

#: For every JVM of the test (the launcher ``spark-class`` runs first, master, worker, driver,
#: executor): each lives about a minute, mostly starting up, on a machine that may be busy. The
#: client compiler only (no C2 compiler threads) and the serial collector (no parallel GC
#: threads) take ~40% less CPU to start a SparkContext and run a first job (measured on Java 17,
#: two cores); the heaps are small anyway.
JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: How often the bounded waits look again (the master's status page, the driver process).
POLL = 0.1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _poll(condition: Callable[[], bool], seconds: float, what: str, why: Callable[[], str] = str) -> None:
    """Wait for ``condition`` at most ``scaled(seconds)``, looking every ``POLL`` s; fail
    naming ``what`` (and ``why()``: the logs that explain it)."""
    deadline = time.monotonic() + scaled(seconds)
    while not condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} did not happen within {scaled(seconds):.0f} s\n{why()}")
        time.sleep(POLL)


def _daemon(env: dict, *args: str) -> subprocess.Popen:
    """``spark-daemon.sh`` with ``args``, not waited for: starting, it launches the JVM in the
    background and then sleeps 2 s to see that it lives, time the test spends on other things."""
    script = Path(pyspark.__file__).parent / "sbin" / "spark-daemon.sh"
    return subprocess.Popen(["bash", str(script), *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _log_tail(logs: Path, cls: str = "") -> str:
    return "".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:] for p in sorted(logs.glob(f"*{cls}*.out")))


#: Straight to 127.0.0.1, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _master_status(ui_port: int) -> dict:
    """The master's JSON status page (``status``, ``aliveworkers``, ``activeapps``...); {}
    while it is not serving it yet."""
    try:
        with _DIRECT.open(f"http://127.0.0.1:{ui_port}/json/", timeout=scaled(5)) as r:
            return json.loads(r.read())
    except (OSError, urllib.error.URLError, ValueError):
        return {}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited (whoever adopted the daemon has not reaped it yet)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Phases:
    """Seconds since the fixture began at each step, printed at the end (``pytest -s``)."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.marks: list[tuple[str, float]] = []

    def __call__(self, name: str) -> None:
        self.marks.append((name, round(time.monotonic() - self.began, 1)))

    def __str__(self) -> str:
        return ", ".join(f"{name} {t}" for name, t in self.marks)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The master started and alive, the worker starting: (master url, base directory, env,
    master UI port, phases). Stopped, waited for and deleted afterwards whatever happened."""
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
        "SPARK_LAUNCHER_OPTS": JVM_FLAGS,
        "SPARK_DAEMON_JAVA_OPTS": JVM_FLAGS,
        # No REST submission server: nothing here uses it, and it would bind a fixed port (6066).
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p),
    }
    logs = base / "logs"
    port, ui_port = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    phases = Phases()
    scripts: list[subprocess.Popen] = []
    try:
        scripts.append(_daemon(env, "start", MASTER, "1", "--host", "127.0.0.1", "--port", str(port),
                               "--webui-port", str(ui_port)))
        # ALIVE, not just listening: a master still in STANDBY turns registrations away and the
        # worker would try again only 5 to 15 s later.
        _poll(lambda: _master_status(ui_port).get("status") == "ALIVE", 60, "the master's start",
              lambda: _log_tail(logs, "Master"))
        phases("master alive")
        scripts.append(_daemon(env, "start", WORKER, "1", "--host", "127.0.0.1", "--webui-port", str(free_port()),
                               "--cores", "2", "--memory", "1g", "--work-dir", str(base / "worker"), url))
        yield url, base, env, ui_port, phases
    finally:
        _stop_cluster(env, base, scripts)
        print(f"\ncluster test phases (s): {phases}")
        shutil.rmtree(base, ignore_errors=True)


def _stop_cluster(env: dict, base: Path, scripts: list[subprocess.Popen]) -> None:
    """Stop the worker and the master with ``spark-daemon.sh stop`` and wait until their JVMs
    are gone (the worker kills its executors first); SIGKILL what outlives the bound."""
    for script in scripts:  # a start script still in its 2 s check would race the stop
        try:
            script.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            script.kill()
            script.wait()
    pids = []
    for pid_file in (base / "pids").glob("*.pid"):
        try:
            pids.append(int(pid_file.read_text().strip()))
        except (ValueError, OSError):
            pass
    stops = [_daemon(env, "stop", cls, "1") for cls in (WORKER, MASTER)]
    for stop in stops:
        try:
            stop.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            stop.kill()
            stop.wait()
    deadline = time.monotonic() + scaled(30)
    while any(_pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(POLL)
    for pid in pids:
        if _pid_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture(scope="module")
def results(cluster):
    """Run the driver program once on the cluster; its JSON results and the data it read."""
    url, base, env, ui_port, phases = cluster
    driver = base / "driver"
    logs = driver / "cl" / "logs"
    build_log(logs / "orders-0", batches=40)
    build_log(logs / "orders-1", batches=7)
    expected = sorted(
        [t, p, o, None if v is None else v.hex()] for t, p, o, _, v, *_ in direct_rows([logs / "orders-0", logs / "orders-1"])
    )
    out_path, err_path = base / "driver.out", base / "driver.err"
    with open(out_path, "wb") as stdout, open(err_path, "wb") as stderr:
        # Started while the worker is still starting: the master hands the application its
        # executor as soon as the worker registers.
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).parent / "cluster_driver.py"), url,
             env["PYTHONPATH"].split(os.pathsep)[0], "cl/logs", JVM_FLAGS],
            cwd=driver, env=env, stdout=stdout, stderr=stderr,
        )
    phases("driver started")

    def driver_output() -> str:
        return (f"driver stdout:\n{out_path.read_text(errors='replace')[-3000:]}\n"
                f"driver stderr:\n{err_path.read_text(errors='replace')[-3000:]}")

    try:
        _poll(lambda: _master_status(ui_port).get("aliveworkers", 0) >= 1 or proc.poll() is not None, 60,
              "the worker's registration", lambda: _log_tail(base / "logs", "Worker"))
        phases("worker registered")
        _poll(lambda: proc.poll() is not None, 150, "the driver's end", driver_output)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    lines = [line for line in out_path.read_text().splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, f"driver failed:\n{driver_output()}"
    out = json.loads(lines[-1])
    began = dict(phases.marks)["driver started"]
    phases.marks += [(f"driver {name}", round(began + t, 1)) for name, t in out["seconds"].items()]
    phases("driver done")
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
