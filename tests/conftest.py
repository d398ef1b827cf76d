"""Shared fixtures: hypothesis profiles, the magic x codec matrix, and test-data paths.

Hypothesis runs a quick, derandomized (seeded) profile by default so CI is repeatable; set
``KAFKALOG_HYPOTHESIS_PROFILE=long`` for a longer search (more examples, random seeds).

Every test runs under a hang guard (20 s, or its ``timeout_guard`` mark) multiplied by
``KAFKALOG_TEST_TIMEOUT_SCALE`` (default 1, or 5 when ``CI`` is set; ``.ci/run`` sets 10): a busy
machine makes healthy tests slow, not hung. Tests that wait for another thread or process use
:func:`scaled` or :func:`wait_until`, so their deadlines grow with it.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from kafkalog import Compression

settings.register_profile(
    "quick",
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("KAFKALOG_HYPOTHESIS_PROFILE", "quick"))

DATA = Path(__file__).parent / "data"
#: The shared corpora beside the repository, when present (CI has them; tests/data has copies).
SHARED_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"

#: Every (magic, codec) pair Kafka allows.
MATRIX = [
    (magic, codec)
    for magic in (0, 1, 2)
    for codec in Compression
    if not (codec is Compression.ZSTD and magic < 2)
]


@pytest.fixture(params=MATRIX, ids=[f"v{m}-{c.kafka_name}" for m, c in MATRIX])
def magic_codec(request) -> tuple[int, Compression]:
    """Each allowed (magic, codec) pair in turn."""
    return request.param


@pytest.fixture
def data_dir() -> Path:
    return DATA


#: Test directories whose every test runs once per record core (the compiled ``kafkalog._native``
#: and the pure-Python reference, switched with ``native.use``), so each hostile-input and
#: hypothesis test meets both. Only the pure core runs when the extension is not built or
#: ``KAFKALOG_PUREPYTHON=1`` forces it; ``KAFKALOG_TEST_CORES=native`` (or ``pure``) picks one.
#: A module that compares the cores itself (differential tests) sets ``SWITCHES_CORES = True``.
BOTH_CORES_DIRS = {"records", "storage", "compaction"}


def _record_cores() -> list[str]:
    from kafkalog import native

    if native.ext is None:
        return ["pure"]
    wanted = os.environ.get("KAFKALOG_TEST_CORES", "native,pure").split(",")
    cores = [c for c in ("native", "pure") if c in wanted]
    if not cores:
        raise pytest.UsageError(f"KAFKALOG_TEST_CORES={wanted!r}: expected native, pure or both")
    return cores


def pytest_generate_tests(metafunc) -> None:
    here = Path(metafunc.definition.path).relative_to(Path(__file__).parent).parts
    switches_itself = getattr(metafunc.module, "SWITCHES_CORES", False)
    if here and here[0] in BOTH_CORES_DIRS and not switches_itself and "record_core" in metafunc.fixturenames:
        metafunc.parametrize("record_core", _record_cores(), indirect=True)


@pytest.fixture(autouse=True)
def record_core(request):
    """The record core the test runs on ("native" or "pure"; None outside BOTH_CORES_DIRS)."""
    core = getattr(request, "param", None)
    if core is None:
        yield None
        return
    from kafkalog import native

    with native.use(pure=core == "pure"):
        yield core


def examples(n: int) -> settings:
    """``n`` examples under the quick profile; never fewer than the loaded profile asks for."""
    return settings(max_examples=max(n, settings.default.max_examples))


def _timeout_scale() -> float:
    raw = os.environ.get("KAFKALOG_TEST_TIMEOUT_SCALE")
    if raw is None:
        return 5.0 if os.environ.get("CI") else 1.0
    try:
        scale = float(raw)
    except ValueError:
        raise pytest.UsageError(f"KAFKALOG_TEST_TIMEOUT_SCALE must be a number, not {raw!r}") from None
    if not 0 < scale < math.inf:
        raise pytest.UsageError(f"KAFKALOG_TEST_TIMEOUT_SCALE must be positive and finite, not {raw!r}")
    return scale


#: How much longer than on an idle machine the hang guard and waits allow.
TIMEOUT_SCALE = _timeout_scale()


def npm_modules(package: str, version: str) -> Path | None:
    """The ``node_modules`` directory of the test's node cache with ``package@version``
    installed by npm (once; ``KAFKALOG_NODE_CACHE``, default ~/.cache/kafkalog-node), or None
    without node/npm or when the install fails -- the tests that need it then skip."""
    import shutil
    import subprocess

    if not (shutil.which("node") and shutil.which("npm")):
        return None
    cache = Path(os.environ.get("KAFKALOG_NODE_CACHE", Path.home() / ".cache" / "kafkalog-node"))
    modules = cache / "node_modules"
    if not (modules / package / "package.json").is_file():
        cache.mkdir(parents=True, exist_ok=True)
        try:
            subprocess.run(["npm", "install", "--prefix", str(cache), "--no-audit", "--no-fund", "--silent",
                            f"{package}@{version}"], check=True, timeout=300, capture_output=True)
        except (subprocess.SubprocessError, OSError):
            return None
    return modules if (modules / package / "package.json").is_file() else None


def scaled(seconds: float) -> float:
    """``seconds`` (what an idle machine needs, with a margin) times ``TIMEOUT_SCALE``."""
    return seconds * TIMEOUT_SCALE


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail after ``scaled(seconds)`` (a bounded wait for
    an event another thread or process makes happen, instead of a fixed sleep)."""
    deadline = time.monotonic() + scaled(seconds)
    while not condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} did not happen within {scaled(seconds):.0f} s")
        time.sleep(0.01)


#: Called (in order) after a test the hang guard interrupted: a fixture whose client the
#: interruption may have left mid-conversation (py4j's, for Spark) registers a reset here.
AFTER_HANG_GUARD: list[Callable[[], None]] = []


class HangGuardTimeout(BaseException):
    """A test outran its hang guard. A BaseException, so hypothesis does not take it for a
    failure of the example it interrupted and replay it (the replay would not be interrupted
    at the same point and hypothesis would report ``FlakyStrategyDefinition``)."""


@pytest.fixture(autouse=True)
def _timeout_guard(request):
    """Fail a test that runs longer than 20 s (a hang) instead of stalling CI; the limit grows
    with the hypothesis profile's example count (the long profile runs ~33x more examples) and
    with ``KAFKALOG_TEST_TIMEOUT_SCALE``."""
    base = 20
    marker = request.node.get_closest_marker("timeout_guard")
    if marker is not None:  # a test that does more per example says how long it may take
        base = marker.args[0]
    profile = max(1, settings.default.max_examples // 60)
    limit = base * profile * TIMEOUT_SCALE
    message = (
        f"test exceeded the {limit:.3g} s guard ({base} s x KAFKALOG_TEST_TIMEOUT_SCALE={TIMEOUT_SCALE:g}"
        + (f" x {profile} for the hypothesis profile" if profile > 1 else "")
        + "): a hang?"
    )

    fired = []

    def on_alarm(signum, frame):
        fired.append(True)
        # Armed again: the signal can land where Python swallows exceptions (a gc callback, such
        # as hypothesis's), and a swallowed timeout must not let the test run on unguarded.
        signal.setitimer(signal.ITIMER_REAL, limit)
        raise HangGuardTimeout(message)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if fired:
            for reset in AFTER_HANG_GUARD:
                reset()
