"""The read-only commands change nothing (issue 19, item 3): ``dump``, ``verify``, ``stat``,
``retention --dry-run``, ``compact --dry-run`` and ``consume``, run as processes over copies of the corpora
and over unclean, torn, bit-flipped and leftover-laden partitions, leave every name, size, mtime
and byte of the log directories as they were (directories included: not even a file created and
removed again), and never crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA

sys.path.insert(0, str(Path(__file__).parents[1] / "storage"))
from test_read_only import SYNTHETIC, copy_partition, listing, make_synthetic, partition_dirs  # noqa: E402

#: Damaged and unclean shapes (each in its own log directory: their checkpoints differ).
KINDS = ["unclean", "torn", "bit-flip", "garbage-tail", "missing-indexes", "swap-cleaned-leftovers", "stray-files"]
assert set(KINDS) <= set(SYNTHETIC)


def corpus_logdir(root: Path) -> Path:
    """Every partition of tests/data in one log directory, renamed apart (``c<i>.<topic>-<n>``)."""
    logdir = root / "corpus"
    logdir.mkdir(parents=True)
    for i, src in enumerate(partition_dirs(DATA)):
        copy = copy_partition(src, root / "staging" / str(i))
        topic, _, partition = copy.name.rpartition("-")
        copy.rename(logdir / f"c{i}.{topic.strip('_') or 't'}-{partition}")
    return logdir


def spawn(args: list[str], cwd: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.Popen(
        [sys.executable, "-m", "kafkalog", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, encoding="utf-8", errors="replace",  # consume prints records' bytes as they are
    )  # fmt: skip


@pytest.mark.timeout_guard(600)
def test_read_only_commands_change_nothing(tmp_path) -> None:
    logdirs = [make_synthetic(tmp_path / kind, kind).parent for kind in KINDS]
    if partition_dirs(DATA):
        logdirs.append(corpus_logdir(tmp_path / "c"))
    logs = sorted(str(p) for d in logdirs for p in d.rglob("*.log"))
    before = listing(tmp_path)
    jobs: dict[str, list[str]] = {
        "verify": ["verify", *map(str, logdirs)],
        "verify-deep": ["verify", "--deep", "--json", *map(str, logdirs)],
        "stat": ["stat", *map(str, logdirs)],
        "dump": ["dump", "--files", ",".join(logs)],
    }
    for i, logdir in enumerate(logdirs):
        jobs[f"retention-{i}"] = ["retention", str(logdir), "--dry-run", "--now", "1800000000000"]
        jobs[f"compact-{i}"] = ["compact", str(logdir), "--dry-run", "--keys", "3", "--json"]
        jobs[f"consume-{i}"] = ["consume", str(logdir), "-t", "*", "-J", "-Z"]
        jobs[f"consume-committed-{i}"] = ["consume", str(logdir), "-t", "*", "-f", "%t %p %o %T %k %s %h\\n",
                                          "--isolation", "read_committed", "--show-control", "-o", "s@0"]
    procs = {name: spawn(args, tmp_path) for name, args in jobs.items()}
    outputs = {name: p.communicate(timeout=500) for name, p in procs.items()}  # drains the pipes
    results = {name: (procs[name].returncode, *outputs[name]) for name in procs}
    for name, (rc, out, err) in results.items():
        assert "Traceback" not in err, (name, err)
        assert rc in (0, 1, 3), (name, rc, err)
    for i, logdir in enumerate(logdirs):  # the dry runs load every partition (none is refused)
        assert results[f"compact-{i}"][0] == 0, (logdir, results[f"compact-{i}"][2])
    after = listing(tmp_path)
    assert after == before, {k for k in set(before) | set(after) if before.get(k) != after.get(k)}


def test_a_dry_run_over_a_torn_log_reports_the_recovery_it_would_do(tmp_path) -> None:
    """``compact --dry-run`` over a torn, unclean partition recovers it in memory and says so
    (it was refused before, and a dry run of an unclean log rewrote its load files)."""
    import json

    directory = make_synthetic(tmp_path, "torn")
    before = listing(tmp_path)
    p = spawn(["compact", str(directory), "--dry-run", "--json"], tmp_path)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    report = json.loads(out)
    assert report["dryRun"] and report["recovery"]["truncatedBytes"] > 0
    assert any(line.startswith("would truncate") for line in report["pendingChanges"])
    assert listing(tmp_path) == before
