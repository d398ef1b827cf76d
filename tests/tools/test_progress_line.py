"""The progress line: rate and time left as pv/tqdm show them, on a terminal only, throttled,
cleared at the end (a fake terminal and an injected clock: no wall clock involved)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.progress import RateMeter
from kafkalog.tools._progress import _duration, _ProgressBar


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_and_time_left() -> None:
    clock = FakeClock()
    term = FakeTerminal()
    bar = _ProgressBar(term, 4_000_000_000, "verify", clock=clock)
    clock.now += 1
    bar(1_000_000_000)
    assert term.getvalue().startswith("\rverify [#######")  # the first call draws
    assert bar.line().endswith("25.0%  1.0 GB/4.0 GB  1.0 GB/s  ETA 0:03")
    clock.now += 4  # slower: 250 MB/s now, averaged with the 1 GB/s before
    bar(1_000_000_000)
    rate = 0.3 * 250e6 + 0.7 * 1e9
    assert f"{rate / 1e6:.1f} MB/s" in bar.line()
    assert bar.line().endswith(f"ETA {_duration(2e9 / rate)}")
    bar.close()
    assert term.getvalue().endswith("\r" + " " * len(bar.line()) + "\r")


def test_redraws_are_throttled_to_ten_a_second() -> None:
    clock = FakeClock()
    term = FakeTerminal()
    bar = _ProgressBar(term, 1000, "stat", clock=clock)
    for _ in range(64):
        clock.now += 1 / 64  # exact in binary: no rounding in the sums
        bar(10)
    # The first call draws, then a redraw once 0.1 s have passed since the last: every 7th call
    # (7/64 s), so calls 1, 8, ..., 64.
    assert term.getvalue().count("\r") == 10
    bar.close()


def test_nothing_on_a_pipe_or_without_work() -> None:
    clock = FakeClock()
    pipe = io.StringIO()
    bar = _ProgressBar(pipe, 1000, "verify", clock=clock)
    clock.now += 1
    bar(500)
    bar.close()
    assert pipe.getvalue() == ""
    term = FakeTerminal()
    bar = _ProgressBar(term, 0, "verify", clock=clock)
    clock.now += 1
    bar(0)
    bar.close()
    assert term.getvalue() == ""


def test_unknown_total_shows_bytes_and_rate() -> None:
    clock = FakeClock()
    term = FakeTerminal()
    bar = _ProgressBar(term, None, "salvage", clock=clock)
    assert bar.line() == "salvage  0 B  --"
    clock.now += 2
    bar(3_000_000)
    assert bar.line() == "salvage  3.0 MB  1.5 MB/s"
    assert "ETA" not in term.getvalue()


def test_no_rate_before_time_passes() -> None:
    clock = FakeClock()
    bar = _ProgressBar(FakeTerminal(), 100, "convert", clock=clock)
    bar(10)
    assert bar.line().endswith("10 B/100 B  --  ETA --:--")


@pytest.mark.parametrize(("seconds", "text"), [(0, "0:00"), (0.2, "0:01"), (59, "0:59"), (61, "1:01"),
                                                (3599.5, "1:00:00"), (3723, "1:02:03"), (90000, "25:00:00")])
def test_durations(seconds, text) -> None:
    assert _duration(seconds) == text


@given(st.lists(st.tuples(st.integers(0, 10**9), st.floats(0.001, 100)), min_size=1, max_size=30),
       st.integers(1, 10**10))
def test_rate_meter_stays_within_the_rates_seen(steps, total) -> None:
    clock = FakeClock()
    meter = RateMeter(total, clock=clock)
    rates = []
    for n, dt in steps:
        clock.now += dt
        meter.add(n)
        rates.append(n / dt)
    assert meter.rate is not None
    assert min(rates) * (1 - 1e-9) <= meter.rate <= max(rates) * (1 + 1e-9)
    assert meter.done == sum(n for n, _ in steps)
    left = meter.seconds_left
    assert left is None if meter.rate == 0 else left == pytest.approx(max(0, total - meter.done) / meter.rate)
