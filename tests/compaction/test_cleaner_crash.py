"""Crash injection into compaction's swap protocol.

A child process cleans a copy of a log and is killed (``os._exit``, no cleanup) between two
steps of ``Log.replace_segments`` -- after the ``.cleaned`` segment is flushed, after its
rename to ``.swap``, after each old segment's rename to ``.deleted``, after the last one, after
the ``.swap`` rename into place -- or at a random instant (SIGKILL). The parent reopens the log
through the loader and checks that each group of segments reads either as before cleaning or
as after, never a mixture, and that no live record is lost.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import scaled

from kafkalog import Compression, ControlRecordType, Log, LogConfig, native
from kafkalog.cleaner import LogCleaner
from kafkalog.producer_state.manager import AppendOrigin

from .test_cleaner import committed_view, kv, latest_per_key, marker

T0 = 1_700_000_000_000
SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, {src!r})
    import kafkalog.local_log as local_log
    import kafkalog.log as logmod
    from kafkalog import Log, LogConfig
    from kafkalog.cleaner import LogCleaner

    step, nth = sys.argv[2], int(sys.argv[3])
    seen = [0]

    def hit(name):
        if name == step:
            seen[0] += 1
            if seen[0] == nth:
                os._exit(9)

    local_log._after_swap_step = hit
    if step == "cleaned":
        replace = logmod.Log.replace_segments

        def replace_segments(self, *a, **kw):
            hit("cleaned")
            return replace(self, *a, **kw)

        logmod.Log.replace_segments = replace_segments
    config = LogConfig(cleanup_policy="compact", segment_bytes=int(sys.argv[4]), file_delete_delay_ms=60000,
                       delete_retention_ms=1000)
    log = Log.open(sys.argv[1], config, clock=lambda: {now})
    print("ready", flush=True)
    LogCleaner(dedupe_buffer_size=1 << 20, clock=lambda: {now}, io_buffer_size=4096).clean(log)
    log.close()
    """
)


def _config(segment_bytes: int) -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=segment_bytes, file_delete_delay_ms=60_000, delete_retention_ms=1000)


def _build(directory: Path, segment_bytes: int, rounds: int = 60) -> None:
    log = Log.open(directory, _config(segment_bytes), clock=lambda: T0)
    rnd = random.Random(7)
    seq = 0
    try:
        for i in range(rounds):
            pairs = [(b"k%d" % rnd.randrange(15), None if rnd.random() < 0.1 else b"v%d-%d" % (i, j)) for j in range(3)]
            log.append(kv(pairs, codec=(Compression.NONE, Compression.GZIP, Compression.ZSTD)[i % 3]))
            if i % 17 == 5:
                log.append(kv([(b"t%d" % i, b"x")], pid=1, epoch=0, seq=seq, txn=True))
                seq += 1
                log.append(marker(ControlRecordType.ABORT if i % 2 else ControlRecordType.COMMIT, 1), origin=AppendOrigin.COORDINATOR)
        log.roll()
        log.append(kv([(b"tail", b"1")]))
    finally:
        log.close()


def _view(directory: Path, segment_bytes: int) -> tuple[list, list[int]]:
    log = Log.open(directory, _config(segment_bytes), clock=lambda: T0)
    try:
        return committed_view(log), [s.base_offset for s in log.segments]
    finally:
        log.close()


def _clean(directory: Path, segment_bytes: int) -> None:
    log = Log.open(directory, _config(segment_bytes), clock=lambda: T0)
    try:
        LogCleaner(dedupe_buffer_size=1 << 20, clock=lambda: T0, io_buffer_size=4096).clean(log)
    finally:
        log.close()


@pytest.fixture(scope="module", params=[100_000, 700], ids=["one-group", "many-groups"])
def prepared(request, tmp_path_factory):
    """(segment_bytes, pristine log dir, view before, view after a full clean, group bounds)."""
    segment_bytes = request.param
    root = tmp_path_factory.mktemp(f"crash-{segment_bytes}")
    base = root / "base" / "t-0"
    _build(base, 700)  # many small segments; the clean's segment.bytes decides the groups
    before, _ = _view(base, segment_bytes)
    ref = root / "ref" / "t-0"
    shutil.copytree(base.parent, ref.parent)
    _clean(ref, segment_bytes)
    after, bounds = _view(ref, segment_bytes)
    return segment_bytes, base, before, after, bounds


def _core_env() -> dict[str, str]:
    """The environment of a child process: on the core this test runs on."""
    env = dict(os.environ)
    env.pop(native.FORCE_PURE_ENV, None)
    if native.ext is None:
        env[native.FORCE_PURE_ENV] = "1"
    return env


def _run_child(directory: Path, step: str, nth: int, segment_bytes: int) -> int:
    code = CHILD.format(src=str(SRC), now=T0)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(directory), step, str(nth), str(segment_bytes)],
        capture_output=True, text=True, timeout=scaled(60), env=_core_env(),
    )  # fmt: skip
    assert proc.returncode in (0, 9), proc.stderr
    return proc.returncode


def _check(directory: Path, segment_bytes: int, before: list, after: list, bounds: list[int]) -> list:
    view, _ = _view(directory, segment_bytes)
    assert latest_per_key(view) == latest_per_key(before), "a live record was lost"
    assert set(view) <= set(before)
    # Group by group (the cleaned segments' bounds): all old or all new.
    edges = bounds + [10**18]
    for lo, hi in zip(edges, edges[1:]):
        part = [r for r in view if lo <= r[0] < hi]
        old = [r for r in before if lo <= r[0] < hi]
        new = [r for r in after if lo <= r[0] < hi]
        assert part in (old, new), f"offsets [{lo}, {hi}) read as a mixture of old and new"
    leftovers = [p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert not leftovers
    return view


STEPS = [("cleaned", 1), ("swap", 1), ("deleted", 1), ("deleted", 2), ("all-deleted", 1), ("done", 1), ("swap", 2), ("done", 2)]


@pytest.mark.timeout_guard(120)
@pytest.mark.parametrize("step,nth", STEPS, ids=[f"{s}-{n}" for s, n in STEPS])
def test_a_kill_between_swap_steps_recovers_old_or_new(prepared, tmp_path, step, nth) -> None:
    segment_bytes, base, before, after, bounds = prepared
    case = tmp_path / "case" / "t-0"
    shutil.copytree(base.parent, case.parent)
    code = _run_child(case, step, nth, segment_bytes)
    view = _check(case, segment_bytes, before, after, bounds)
    one_group = segment_bytes > 10_000
    if one_group and nth == 2 and step in ("swap", "done"):
        assert code == 0 and view == after  # one group: one swap, and the clean finished
    else:
        assert code == 9, "the child was not killed at the step"
    # A later clean completes the job.
    _clean(case, segment_bytes)
    final, _ = _view(case, segment_bytes)
    assert latest_per_key(final) == latest_per_key(after)


@pytest.mark.timeout_guard(120)
def test_sigkill_at_random_instants(prepared, tmp_path) -> None:
    segment_bytes, base, before, after, bounds = prepared
    rnd = random.Random(11)
    for i in range(6):
        case = tmp_path / f"kill-{i}" / "t-0"
        shutil.copytree(base.parent, case.parent)
        code = CHILD.format(src=str(SRC), now=T0)
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(case), "never", "1", str(segment_bytes)],
            stdout=subprocess.PIPE, text=True, env=_core_env(),
        )  # fmt: skip
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rnd.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(scaled(30))
        proc.stdout.close()
        _check(case, segment_bytes, before, after, bounds)
