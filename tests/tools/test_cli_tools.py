"""The operator commands: ``kafkalog verify``, ``salvage``, ``rebuild-index``, ``retention``,
``convert`` and ``stat``. Exit statuses and error lines on bad input are checked through real
subprocesses (``python -m kafkalog ...``, run side by side); behaviour in-process through
``cli.main``."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA
from test_verify import T0, Clock, build_partition

from kafkalog import RecordBatchBuilder
from kafkalog import tools as cli
from kafkalog.log_config import LogConfig
from kafkalog.filenames import segment_logs
from kafkalog.log import Log
from kafkalog import verify_path

KAFKA38 = DATA / "kafka-3.8"
COMMANDS = ("verify", "salvage", "rebuild-index", "retention", "convert", "stat")


def run(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main([str(a) for a in args], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def spawn_all(jobs: dict[str, list[str]], cwd: Path) -> dict[str, subprocess.CompletedProcess]:
    """Run ``python -m kafkalog ARGS`` for every job at once; wait for all."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "kafkalog", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        for name, args in jobs.items()
    }
    done = {}
    for name, p in procs.items():
        out, err = p.communicate(timeout=60)
        done[name] = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    return done


@pytest.fixture
def bad_inputs(tmp_path) -> Path:
    """A missing path, a directory without segments, a truncated segment, a garbage segment."""
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "truncated").mkdir()
    src = KAFKA38 / "v2-none-random" / "00000000000000000000.log"
    data = src.read_bytes()
    (tmp_path / "truncated" / src.name).write_bytes(data[: len(data) - 1000])
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / src.name).write_bytes(os.urandom(20_000))
    return tmp_path


BAD = {
    "missing": "no-such-file.log",
    "empty": "empty-dir",
    "truncated": "truncated/00000000000000000000.log",
    "garbage": "garbage/00000000000000000000.log",
}


def command_line(command: str, target: str, tag: str) -> list[str]:
    if command in ("salvage", "convert"):
        return [command, target, f"out-{command}-{tag}/"]
    if command == "retention":
        return [command, target if target in ("no-such-file.log", "empty-dir") else str(Path(target).parent), "--dry-run",
                "--now", str(T0)]
    return [command, target]


# What each command does with each bad input: (exit status, text on stderr, text on stdout).
EXPECTED = {
    ("verify", "missing"): (1, "No such file or directory", None),
    ("verify", "empty"): (1, "no log segments", None),
    ("verify", "truncated"): (1, "", "truncated"),  # findings go to stdout
    ("verify", "garbage"): (1, "", "PROBLEMS FOUND"),
    ("stat", "missing"): (1, "No such file or directory", None),
    ("stat", "empty"): (1, "no log segments", None),
    ("stat", "truncated"): (1, "problems found", "total"),  # the figures of the valid part, and a note
    ("stat", "garbage"): (1, "problems found", None),
    ("salvage", "missing"): (1, "No such file or directory", None),
    ("salvage", "empty"): (1, "Is a directory", None),
    ("salvage", "truncated"): (0, None, "skipped 1 regions"),  # works around the damage
    ("salvage", "garbage"): (0, None, "copied 0 batches"),
    ("rebuild-index", "missing"): (1, "No such file or directory", None),
    ("rebuild-index", "empty"): (1, "no log segments", None),
    ("rebuild-index", "truncated"): (0, None, "warning: the indexes cover the first"),
    ("rebuild-index", "garbage"): (0, None, "0 batches"),
    ("retention", "missing"): (1, "No such file or directory", None),
    ("retention", "empty"): (1, "no log segments", None),
    ("retention", "truncated"): (0, None, "00000000000000000000.log"),  # plans on what is readable
    ("retention", "garbage"): (1, "not Kafka log data", None),  # not "empty" (issue 27)
    ("convert", "missing"): (1, "No such file or directory", None),
    ("convert", "empty"): (1, "no log segments", None),
    ("convert", "truncated"): (1, "partial batch", None),  # refuses damaged input
    ("convert", "garbage"): (1, None, None),  # whatever the noise breaks first
}


@pytest.mark.parametrize("command", COMMANDS)
def test_exit_statuses_and_messages_on_bad_input(bad_inputs, command: str) -> None:
    results = spawn_all({tag: command_line(command, target, tag) for tag, target in BAD.items()}, bad_inputs)
    for tag, r in results.items():
        status, err, out = EXPECTED[(command, tag)]
        assert r.returncode == status, (tag, r.returncode, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr, (tag, r.stderr)
        if status == 0 or err == "":
            assert r.stderr == "", (tag, r.stderr)
        else:
            lines = r.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"kafkalog {command}: "), (tag, r.stderr)
            assert err is None or err in lines[0], (tag, r.stderr)
        if out is not None:
            assert out in r.stdout, (tag, r.stdout)


def test_usage_errors(tmp_path) -> None:
    jobs = {
        "verify-no-path": ["verify"],
        "salvage-one-arg": ["salvage", "x.log"],
        "convert-bad-magic": ["convert", "a.log", "b", "--magic", "5"],
        "convert-bad-codec": ["convert", "a.log", "b", "--compression", "brotli"],
        "retention-config-form": ["retention", str(KAFKA38 / "v2-none-random"), "--config", "retention.ms"],
        "retention-config-key": ["retention", str(KAFKA38 / "v2-none-random"), "--config", "retention.msx=5"],
        "retention-config-value": ["retention", str(KAFKA38 / "v2-none-random"), "--config", "retention.ms=-7"],
        "rebuild-interval": ["rebuild-index", "x", "--index-interval-bytes", "-1"],
    }
    results = spawn_all(jobs, tmp_path)
    for name, r in results.items():
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        assert "usage:" in r.stderr and "Traceback" not in r.stderr, name
    assert "KEY=VALUE" in results["retention-config-form"].stderr
    assert "retention.msx" in results["retention-config-key"].stderr
    assert "retention.ms" in results["retention-config-value"].stderr


def test_clean_runs_are_quiet_on_stderr(tmp_path) -> None:
    shutil.copytree(KAFKA38 / "v2-txn-random", tmp_path / "t-0")
    jobs = {
        "verify": ["verify", "t-0"],
        "stat": ["stat", "t-0"],
        "rebuild": ["rebuild-index", "t-0", "--dry-run"],
        "retention": ["retention", "t-0", "--dry-run", "--now", str(T0)],
        "convert": ["convert", "t-0", "c-0", "--compression", "zstd"],
        "salvage": ["salvage", "t-0/00000000000000000000.log", "s-0/"],
        "help": ["verify", "--help"],
    }
    results = spawn_all(jobs, tmp_path)
    for name, r in results.items():
        assert (r.returncode, r.stderr) == (0, ""), (name, r.stdout, r.stderr)
    assert "OK: 1 segments" in results["verify"].stdout
    assert "unchanged" in results["rebuild"].stdout


# -- behaviour ------------------------------------------------------------------------------------------


def test_verify_text_and_json(tmp_path) -> None:
    directory = build_partition(tmp_path)
    rc, out, err = run("verify", tmp_path)
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["segment", "batches", "records", "offsets", "bytes", "valid", "status"]
    assert lines[1].startswith("topic-0/00000000000000000000.log") and lines[1].endswith("ok")
    assert lines[-1].startswith(f"{tmp_path}: OK: {len(segment_logs(directory))} segments, 1 partitions, 0 errors")
    log = segment_logs(directory)[0]
    data = bytearray(log.read_bytes())
    data[200] ^= 4
    log.write_bytes(data)
    (directory / "00000000000000000000.log.deleted").write_bytes(b"")
    rc, out, _ = run("verify", tmp_path)
    assert rc == 1 and "  crc  " in out and "leftover-file" not in out and "warnings (--warnings lists them)" in out
    rc, out, _ = run("verify", "--warnings", tmp_path)
    assert "leftover-file" in out
    rc, out, _ = run("verify", "--json", tmp_path, directory)
    first, second = (json.loads(line) for line in out.splitlines())
    assert rc == 1 and first["ok"] is False and first["errors"] == second["errors"] >= 1
    assert {p["kind"] for s in first["segments"] for p in s["problems"]} >= {"crc"}


def test_verify_strict_fails_on_warnings(tmp_path) -> None:
    directory = build_partition(tmp_path)
    (directory / "00000000000000000000.log.swap").write_bytes(b"")
    assert run("verify", directory)[0] == 0
    rc, out, _ = run("verify", "--strict", directory)
    assert rc == 1 and "leftover-file" in out


def test_verify_continues_after_a_missing_path(tmp_path) -> None:
    directory = build_partition(tmp_path)
    rc, out, err = run("verify", tmp_path / "nope", directory)
    assert rc == 1 and err.startswith("kafkalog verify: ") and "OK:" in out


def test_stat(tmp_path) -> None:
    directory = build_partition(tmp_path, tombstones=True)
    rc, out, err = run("stat", directory)
    assert (rc, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split()[:4] == ["segment", "offsets", "records", "tombstones"]
    total = next(r for r in rows if r.startswith("total"))
    report = verify_path(directory, deep=True)
    assert str(sum(s.records for s in report.segments)) in total.split()
    assert rows[-1].startswith("partition topic-0:")
    rc, out, _ = run("stat", "--json", directory)
    data = json.loads(out)
    assert data["totals"]["tombstones"] == sum(s.tombstones for s in report.segments) > 0
    assert data["totals"]["producers"] == 3 and data["totals"]["codecs"] == ["none"]
    rc, out, _ = run("stat", "--shallow", "--json", directory)
    assert json.loads(out)["totals"]["tombstones"] is None


def test_rebuild_index(tmp_path) -> None:
    directory = build_partition(tmp_path, index_interval_bytes=4096)
    log = segment_logs(directory)[0]
    original = log.with_suffix(".timeindex").read_bytes()
    log.with_suffix(".timeindex").unlink()
    rc, out, _ = run("rebuild-index", "--dry-run", log)
    assert rc == 0 and "would rewrite 00000000000000000000.timeindex" in out
    assert not log.with_suffix(".timeindex").exists()
    rc, out, _ = run("rebuild-index", directory)
    assert rc == 0 and out.count("\n") == len(segment_logs(directory))
    assert log.with_suffix(".timeindex").read_bytes() == original
    rc, out, _ = run("rebuild-index", "--json", log)
    assert json.loads(out)["changed"] == []


def test_salvage(tmp_path) -> None:
    src = tmp_path / "00000000000000000000.log"
    data = bytearray((KAFKA38 / "v2-none-random" / src.name).read_bytes())
    data[5000:5100] = bytes(100)
    src.write_bytes(data)
    out_dir = f"{tmp_path}/out/"  # a trailing separator: a directory, created
    rc, out, _ = run("salvage", src, out_dir)
    assert rc == 0 and "skipped 1 regions" in out and "indexes written" in out
    assert (tmp_path / "out" / src.name).exists()
    rc, _, err = run("salvage", src, out_dir)
    assert rc == 1 and "exists" in err
    rc, out, _ = run("salvage", "--force", "--json", src, out_dir)
    report = json.loads(out)
    assert rc == 0 and report["skippedBytes"] > 0 and report["skipped"][0]["position"] <= 5000
    assert verify_path(tmp_path / "out").ok


def test_convert(tmp_path) -> None:
    rc, out, _ = run("convert", KAFKA38 / "v1-gzip-random", tmp_path / "out", "--magic", "2", "--compression", "zstd")
    assert rc == 0 and "to magic 2 zstd" in out
    assert verify_path(tmp_path / "out").problems == []
    rc, _, err = run("convert", KAFKA38 / "v2-txn-random", tmp_path / "v1", "--magic", "1")
    assert rc == 1 and "transactional batches have no form in magic 1" in err
    rc, _, err = run("convert", KAFKA38 / "v2-none-random", tmp_path / "v1", "--magic", "1", "--compression", "zstd")
    assert rc == 1 and "zstd" in err
    rc, out, _ = run("convert", "--json", KAFKA38 / "v1-none-random", tmp_path / "v0", "--magic", "0", "--drop-timestamps")
    assert rc == 0 and json.loads(out)["dropped"] == {"timestamps": 98}


def _retention_dir(root: Path) -> Path:
    config = LogConfig(segment_bytes=2000)
    clock = Clock()
    directory = root / "events-3"
    with Log.open(directory, config, clock=clock) as log:
        for i in range(40):
            b = RecordBatchBuilder(2)
            b.append(b"k", b"v" * 100, timestamp=T0 + i * 60_000)
            log.append(b.build())
    return directory


def test_retention_dry_run_matches_log(tmp_path) -> None:
    directory = _retention_dir(tmp_path)
    now = T0 + 40 * 60_000
    config = ["--config", "retention.ms=600000", "--config", "retention.bytes=4000"]
    before = {p.name for p in directory.iterdir()}
    rc, out, _ = run("retention", directory, "--dry-run", "--now", now, "--json", *config)
    assert rc == 0 and {p.name for p in directory.iterdir()} == before
    planned = json.loads(out)
    doomed = [(s["baseOffset"], s["reason"]) for s in planned["segments"] if s["delete"]]
    assert {r for _, r in doomed} == {"retention.bytes", "retention.ms"}
    with Log.open(directory, LogConfig(retention_ms=600_000, retention_bytes=4000)) as log:
        plan = log.plan_retention(now)
    assert doomed == [(d.base_offset, d.reason) for d in plan.deletions]
    assert planned["newLogStartOffset"] == plan.new_log_start_offset
    rc, out, _ = run("retention", directory, "--dry-run", "--now", now, *config)
    assert "would delete" in out and f"new log start offset: {plan.new_log_start_offset}" in out
    # And for real.
    rc, out, _ = run("retention", directory, "--now", now, *config)
    assert rc == 0 and "deleted" in out
    remaining = segment_logs(directory)
    assert [int(p.name[:20]) for p in remaining][0] == plan.new_log_start_offset
    report = verify_path(tmp_path)
    assert report.ok and report.partitions[0].log_start_offset == plan.new_log_start_offset


def test_retention_keeps_everything_by_default(tmp_path) -> None:
    directory = _retention_dir(tmp_path)
    rc, out, _ = run("retention", tmp_path, "--now", T0 + 41 * 60_000)  # a log directory
    assert rc == 0 and "nothing to delete" in out and "retention.ms=604800000" in out
    assert len(segment_logs(directory)) > 3


def test_progress_bar_only_on_a_terminal(tmp_path) -> None:
    b = RecordBatchBuilder(2)
    for i in range(16):
        b.append(b"k", os.urandom(4000), timestamp=T0 + i)
    proto = bytearray(b.build().buffer)
    log = tmp_path / "00000000000000000000.log"
    with open(log, "wb") as f:
        for n in range(60):  # about 4 MB
            struct.pack_into(">q", proto, 0, n * 16)
            f.write(proto)
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "kafkalog", "verify", str(log)], stdout=subprocess.PIPE,
                            stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=30)
    os.close(master)
    assert proc.returncode == 0 and b"OK" in out
    assert b"verify [" in seen and b"%" in seen and seen.endswith(b"\r")
    # Not a terminal: nothing.
    err = io.StringIO()
    assert cli.main(["verify", str(log)], stdout=io.StringIO(), stderr=err) == 0 and err.getvalue() == ""


def _snake_keys(obj: object, where: str = "") -> list[str]:
    """Every dict key with an underscore in ``obj``, but those under ``settings`` (topic property
    names: data, written as they are)."""
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if "_" in k:
                found.append(f"{where}.{k}")
            if k != "settings":
                found += _snake_keys(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for v in obj:
            found += _snake_keys(v, f"{where}[]")
    return found


def test_every_command_writes_camel_case_json(tmp_path) -> None:
    """One convention, Kafka's, for every command's --json (docs/cli.md); the topic property
    names under ``settings`` stay dotted."""
    part = build_partition(tmp_path, tombstones=True)
    first = segment_logs(part)[0]
    runs = {
        "verify": ["verify", "--json", part],
        "stat": ["stat", "--json", part],
        "rebuild-index": ["rebuild-index", "--dry-run", "--json", part],
        "retention": ["retention", "--dry-run", "--json", "--config", "retention.bytes=1", part],
        "convert": ["convert", "--json", "--magic", "2", "--compression", "lz4", part, tmp_path / "conv-0"],
        "salvage": ["salvage", "--json", first, f"{tmp_path}/salvaged/"],
        "compact": ["compact", "--dry-run", "--json", "--keys", "2", "--config", "cleanup.policy=compact", part],
    }
    for name, args in runs.items():
        rc, out, err = run(*args)
        assert rc == 0, (name, err)
        for line in out.splitlines():
            doc = json.loads(line)
            assert _snake_keys(doc) == [], name
    compact = json.loads(run(*runs["compact"])[1])
    assert compact["dryRun"] is True and "cleanup.policy" in compact["settings"]
    assert compact["settings"]["cleanup.policy"]["value"] == "compact"


def test_camel_keys_converts_names_and_keeps_data_keys() -> None:
    from kafkalog.tools._tool import camel_keys

    report = {"log_start_offset": 0, "segments": [{"base_offset": 5, "aborted_txns": None}],
              "settings": {"retention.ms": {"value": "1", "source": "--config"}}, "top_keys": ({"key_hex": "6b"},)}
    assert camel_keys(report) == {
        "logStartOffset": 0, "segments": [{"baseOffset": 5, "abortedTxns": None}],
        "settings": {"retention.ms": {"value": "1", "source": "--config"}}, "topKeys": [{"keyHex": "6b"}],
    }
