"""Kafka's parsing of INT/LONG and BOOLEAN setting values (``ConfigDef.parseType``), the one
parser behind ``LogConfig``, the broker's and the group coordinator's settings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import LogConfig
from kafkalog.log_config import parse_config_bool, parse_config_int
from kafkalog.errors import InvalidConfigError

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


@given(value=st.integers(*INT64), sign=st.sampled_from(["", "+"]), pad=st.sampled_from(["", " ", "\t", " \n"]))
def test_every_long_reads_back(value, sign, pad) -> None:
    """Java's ``Long.parseLong`` of the trimmed text: an optional sign, then digits."""
    text = f"{pad}{sign if value >= 0 else ''}{value}{pad}"
    assert parse_config_int("k", text, *INT64) == value
    assert parse_config_int("k", value, *INT64) == value  # an int passes as it is


@pytest.mark.parametrize("text", [
    "", " ", "1_000", "1.0", "1e3", "0x10", "١٢", "1 2", "--1", "+-1", "one", "2147483648",
])
def test_what_java_does_not_parse_as_an_int_is_refused(text) -> None:
    """Python's ``int`` takes ``1_000`` and non-ASCII digits; Kafka's parser does not (and an
    INT setting stops at 2**31-1). The error names the key, the value and the range."""
    with pytest.raises(InvalidConfigError) as err:
        parse_config_int("segment.bytes", text, *INT32)
    assert "segment.bytes" in str(err.value) and repr(text) in str(err.value)
    assert f"[{INT32[0]}, {INT32[1]}]" in str(err.value)


@given(value=st.integers(-(2**70), 2**70), low=st.integers(-5, 5), span=st.integers(0, 10))
def test_the_range_is_inclusive(value, low, span) -> None:
    high = low + span
    if low <= value <= high:
        assert parse_config_int("k", str(value), low, high) == value
    else:
        with pytest.raises(InvalidConfigError, match=r"k = .*: expected an integer in"):
            parse_config_int("k", str(value), low, high)


def test_a_bool_is_not_an_int_and_an_int_is_not_a_bool() -> None:
    with pytest.raises(InvalidConfigError):
        parse_config_int("k", True, *INT64)
    for raw in (1, 0, "1", "yes", "", "truth"):
        with pytest.raises(InvalidConfigError, match="expected true or false"):
            parse_config_bool("k", raw)


@pytest.mark.parametrize(("raw", "expected"), [
    ("true", True), ("FALSE", False), (" True ", True), ("\tfalse\n", False), (True, True), (False, False),
])
def test_booleans_in_any_case(raw, expected) -> None:
    assert parse_config_bool("k", raw) is expected


def test_log_config_reads_its_integers_with_it() -> None:
    """``LogConfig.from_properties`` refuses what Kafka refuses (it took ``1_048_576`` once)."""
    assert LogConfig.from_properties({"segment.bytes": " +1048576 "}).segment_bytes == 1048576
    for bad in ("1_048_576", "1048576.0", str(2**31)):
        with pytest.raises(InvalidConfigError, match="segment.bytes"):
            LogConfig.from_properties({"segment.bytes": bad})
    assert LogConfig.from_properties({"preallocate": "TRUE"}).preallocate is True
