"""Shared fixtures: hypothesis profiles, the magic x codec matrix, and test-data paths.

Hypothesis runs a quick, derandomized (seeded) profile by default so CI is repeatable; set
``KAFKALOG_HYPOTHESIS_PROFILE=long`` for a longer search (more examples, random seeds).
"""

from __future__ import annotations

import os
import signal
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


def examples(n: int) -> settings:
    """``n`` examples under the quick profile; never fewer than the loaded profile asks for."""
    return settings(max_examples=max(n, settings.default.max_examples))


@pytest.fixture(autouse=True)
def _timeout_guard(request):
    """Fail a test that runs longer than 20 s (a hang) instead of stalling CI; the limit grows
    with the hypothesis profile's example count (the long profile runs ~33x more examples)."""
    limit = 20 * max(1, settings.default.max_examples // 60)
    marker = request.node.get_closest_marker("timeout_guard")
    if marker is not None:  # a test that does more per example says how long it may take
        limit = marker.args[0] * max(1, settings.default.max_examples // 60)

    def on_alarm(signum, frame):
        raise TimeoutError(f"test exceeded the {limit} s guard: a hang?")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
