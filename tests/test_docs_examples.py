"""Every ```python block of README.md and docs/*.md runs (issue 19: the examples did not), and
every ```console block's commands run with their output compared (issue 27: the shell examples
had gone stale).

The blocks of one file run in order in one namespace, in an empty temporary directory, as a
reader would paste them. The paths the docs use for a reader's data (``/data/kafka``,
``/data/kafka-logs``, ``/tmp/kl``) are redirected into that directory, where a small log
directory written through ``Log`` stands in for the reader's; blocks that talk to a broker
(``127.0.0.1:9092``) get a kafkalog broker on a free loopback port. Blocks that use Spark run
only when pyspark is installed (marked ``spark``); blocks with a Kafka client library only when
it is installed (marked ``slow``).

**Console blocks.** A ```console block holds ``$ COMMAND`` lines, each followed by the output it
prints (stdout and stderr as a terminal shows them, interleaved); ``$ echo $?`` prints the last
exit status. The blocks of one file run in order, through ``bash`` with ``kafkalog`` on the
``PATH``, in one temporary directory holding the sample data of :func:`console_sample` (what the
docs call ``orders-0``, ``kafka-logs``, ...), so a block may build on the files an earlier one
made. Output is compared line by line after normalising what legitimately varies (trailing
blanks; the random name of ``kafkalog demo``'s temporary directory); in the expected output a
line ``...`` stands for any number of lines and ``...`` inside a line for any text. A shell
example that cannot run here (a live broker, a cloud store, ``pip install``, a synopsis with
placeholders) is a plain ``` block preceded by ``<!-- not run: REASON -->``; the test counts
those, and fails on a shell example that is neither run nor marked.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import os
import re
import shutil
import subprocess
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


# -- console blocks ---------------------------------------------------------------------------------

CONSOLE = re.compile(r"^```console\n(.*?)^```", re.M | re.S)
#: A fenced block that is not Python: a shell example unless it is run or marked.
FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
NOT_RUN = re.compile(r"<!-- not run: ([^>]+?) -->\s*\n```\w*\n$")
#: A line of a fenced block that is a command for a shell.
SHELL_LINE = re.compile(r"^(\$ |kafkalog\b|python -m kafkalog\b|pip install\b|spark-submit\b)")
#: kafkalog demo's temporary directory, named at random.
DEMO_DIR = re.compile(r"/tmp/kafkalog-demo-[A-Za-z0-9_]+")
#: How many shell examples are marked not run, by file: a change here is a decision, not an accident.
NOT_RUN_COUNTS = {"README.md": 1, "docs/broker.md": 5, "docs/cli.md": 5, "docs/spark.md": 1}


def console_blocks(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in CONSOLE.finditer(text)]


def shell_examples(path: Path) -> tuple[int, list[tuple[int, str]], list[int]]:
    """(console blocks, [(line, reason)] of the blocks marked not run, [lines] of shell examples
    neither run nor marked) of a file."""
    text = path.read_text()
    run, marked, unmarked = 0, [], []
    for m in FENCED.finditer(text):
        lang, body = m.group(1), m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        if lang == "console":
            run += 1
            continue
        if lang in ("python", "py") or not any(SHELL_LINE.match(x) for x in body.splitlines()):
            continue
        reason = NOT_RUN.search(text[max(0, m.start() - 300) : m.end() - len(m.group(0)) + len(lang) + 4])
        if reason:
            marked.append((line, reason.group(1)))
        else:
            unmarked.append(line)
    return run, marked, unmarked


def test_every_shell_example_runs_or_says_why() -> None:
    counts = {}
    for path in FILES:
        _, marked, unmarked = shell_examples(path)
        name = str(path.relative_to(ROOT))
        assert not unmarked, f"{name}: shell examples at lines {unmarked} are neither ```console blocks nor marked <!-- not run: REASON -->"
        if marked:
            counts[name] = len(marked)
    assert counts == NOT_RUN_COUNTS
    assert sum(len(console_blocks(p)) for p in FILES) >= 15


def console_sample(root: Path) -> None:
    """The files the console examples work on, in ``root`` (their working directory):

    - ``orders-0``: 109 records, batches of 4 with keys ``order-0``..``order-31``, written
      through ``Log`` in 1,500-byte segments 1 ms apart from 2023-11-14T22:13:20Z: two
      transactional producers (one commit, one abort), a record without a key, and a tombstone
      for ``order-5`` at the end, in a log directory shut down cleanly (the working directory);
    - ``kafka-logs``: a log directory holding the same ``orders-0``, a real broker's
      ``__consumer_offsets-16`` (tests/data/consumer_offsets) and the ``quorum-state`` of a KRaft
      metadata log ``__cluster_metadata-0``;
    - ``empty-dir``: an empty directory.
    """
    from kafkalog import ControlRecordType, Log, LogConfig, RecordBatchBuilder
    from kafkalog.producer_state.manager import AppendOrigin

    config = LogConfig(segment_bytes=1500, index_interval_bytes=300)
    logs = root / "kafka-logs"
    with Log.open(logs / "orders-0", config) as log:
        ts = 1_700_000_000_000
        seq = {7001: 0, 7002: 0}
        for i in range(96):
            if i % 4 == 0:
                b = RecordBatchBuilder(magic=2)
            key = None if i == 50 else b"order-%d" % (i * 7 % 32)
            b.append(key, b'{"order": %d, "amount": %d}' % (i, i * 13 % 97), timestamp=ts + i)
            if i % 4 == 3:
                log.append(b.build(), leader_epoch=0)
            if i in (31, 71):
                pid = 7001 if i == 31 else 7002
                t = RecordBatchBuilder(magic=2, producer_id=pid, producer_epoch=0, base_sequence=seq[pid],
                                       is_transactional=True)
                for j in range(5):
                    t.append(b"order-%d" % (j + 1), b'{"txn": %d}' % j, timestamp=ts + i)
                seq[pid] += 5
                log.append(t.build(), leader_epoch=0)
                end = ControlRecordType.COMMIT if pid == 7001 else ControlRecordType.ABORT
                log.append(RecordBatchBuilder.end_transaction_marker(
                    end, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=ts + i),
                    leader_epoch=0, origin=AppendOrigin.COORDINATOR)
        b = RecordBatchBuilder(magic=2)
        b.append(b"order-5", None, timestamp=ts + 96)
        log.append(b.build(), leader_epoch=0)
    shutil.copytree(ROOT / "tests" / "data" / "consumer_offsets" / "seanorth__kafka-server" / "__consumer_offsets-16",
                    logs / "__consumer_offsets-16")
    metadata = logs / "__cluster_metadata-0"
    metadata.mkdir()
    (metadata / "quorum-state").write_text('{"leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,'
                                           '"currentVoters":[{"voterId":1}],"data_version":0}\n')
    shutil.copytree(logs / "orders-0", root / "orders-0")
    for name in (".kafka_cleanshutdown", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        shutil.copyfile(logs / name, root / name)  # orders-0's log directory, shut down cleanly
    (root / "empty-dir").mkdir()


def _matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` lines match ``expected`` (``...`` lines and ``...`` in a line as wildcards)."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head == "...":
        return any(_matches(rest, actual[i:]) for i in range(len(actual) + 1))
    if not actual:
        return False
    pattern = ".*".join(re.escape(part) for part in head.split("..."))
    return re.fullmatch(pattern, actual[0]) is not None and _matches(rest, actual[1:])


def _normalise(text: str) -> list[str]:
    return [DEMO_DIR.sub("/tmp/kafkalog-demo-XXXXXXXX", line).rstrip() for line in text.splitlines()]


def _steps(block: str) -> list[tuple[str, list[str]]]:
    """The ``(command, expected output lines)`` of a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        else:
            raise AssertionError(f"a console block starts with output, not a $ command: {line!r}")
    return steps


def _shell(tmp_path: Path) -> dict[str, str]:
    """The environment the commands run in: ``kafkalog`` on the PATH (this checkout's), unbuffered
    output so that stdout and stderr interleave as on a terminal, UTC, a fixed terminal width."""
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "kafkalog"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kafkalog "$@"\n')
    shim.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1", TZ="UTC", COLUMNS="80")


@pytest.mark.parametrize("path", [p for p in FILES if console_blocks(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_console_examples_run(path: Path, tmp_path) -> None:
    from conftest import scaled

    work = tmp_path / "work"
    work.mkdir()
    console_sample(work)
    env = _shell(tmp_path)
    status = 0
    for line, block in console_blocks(path):
        for command, expected in _steps(block):
            where = f"{path.relative_to(ROOT)} line {line}: $ {command}"
            if command == "echo $?":
                actual = [str(status)]
            else:
                proc = subprocess.run(["bash", "-c", command], check=False, cwd=work, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, timeout=scaled(120))
                status, actual = proc.returncode, _normalise(proc.stdout)
            want = _normalise("\n".join(expected))
            if not _matches(want, actual):
                diff = "\n".join(difflib.unified_diff(want, actual, "docs", "actual", lineterm=""))
                raise AssertionError(f"the example at {where} is stale:\n{diff}")
