"""The hang guard of ``conftest.py``: it scales with ``KAFKALOG_TEST_TIMEOUT_SCALE`` and, when it
fires inside a hypothesis test, reports the timeout rather than a flaky strategy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import conftest

INNER = '''
import time

from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(st.integers(0, 10**9))  # never exhausted: every example runs
def test_slow_examples(n):
    time.sleep(0.02)


class Slow(RuleBasedStateMachine):
    @rule(n=st.integers(0, 3))
    def step(self, n):
        time.sleep(0.01)


TestSlowMachine = Slow.TestCase
TestSlowMachine.settings = settings(max_examples=200, derandomize=True, database=None, deadline=None)


def test_quick():
    pass
'''


def _run_inner(tmp_path: Path, scale: str) -> subprocess.CompletedProcess:
    """pytest over ``INNER`` beside a copy of the real conftest, with the given scale."""
    shutil.copyfile(Path(conftest.__file__), tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(INNER)
    env = dict(os.environ, KAFKALOG_TEST_TIMEOUT_SCALE=scale)
    env.pop("KAFKALOG_HYPOTHESIS_PROFILE", None)
    env.pop("CI", None)  # hypothesis reads CI (its "ci" profile); the inner run is the same everywhere
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", str(tmp_path), "--rootdir", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=conftest.scaled(120),
    )  # fmt: skip


def test_the_guard_scales_and_reports_a_timeout_not_a_flaky_strategy(tmp_path) -> None:
    # 20 s x 0.02 = a 0.4 s guard; each hypothesis test needs about 4 s, so it fires mid-run.
    done = _run_inner(tmp_path, "0.02")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "2 failed, 1 passed" in out, out
    assert out.count("HangGuardTimeout: test exceeded the 0.4 s guard (20 s x KAFKALOG_TEST_TIMEOUT_SCALE=0.02): a hang?") == 2, out
    assert "Flaky" not in out and "Inconsistent" not in out, out


def test_a_bad_scale_is_a_usage_error(tmp_path) -> None:
    done = _run_inner(tmp_path, "fast")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "KAFKALOG_TEST_TIMEOUT_SCALE must be a number, not 'fast'" in done.stderr
