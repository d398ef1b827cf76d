"""Varints and varlongs: known encodings, strict bounds, and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import InvalidRecordError
from kafkalog.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

# (value, encoding) pairs as Kafka's ByteUtils.writeVarint produces them.
VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-64, "7f"),
    (63, "7e"),
    (64, "8001"),
    (300, "d804"),
    (-300, "d704"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]


@pytest.mark.parametrize("value,hexed", VARINT_VECTORS)
def test_known_varint_encodings(value, hexed):
    """Encodings match the protobuf/Kafka ZigZag vectors, and decode back."""
    assert encode_varint(value).hex() == hexed
    assert decode_varint(bytes.fromhex(hexed)) == (value, len(hexed) // 2)
    assert size_of_varint(value) == len(hexed) // 2


def test_known_varlong_encodings():
    """The extremes of a varlong take ten bytes."""
    assert encode_varlong(2**63 - 1).hex() == "feffffffffffffffff01"
    assert encode_varlong(-(2**63)).hex() == "ffffffffffffffffff01"
    assert decode_varlong(bytes.fromhex("ffffffffffffffffff01")) == (-(2**63), 10)


@given(INT32, st.binary(max_size=4), st.binary(max_size=4))
def test_varint_round_trip_at_position(value, before, after):
    """Decoding at a position returns the value and the position after it."""
    buf = before + encode_varint(value) + after
    assert decode_varint(buf, len(before)) == (value, len(buf) - len(after))
    assert size_of_varint(value) == len(encode_varint(value))


@given(INT64)
def test_varlong_round_trip(value):
    enc = encode_varlong(value)
    assert decode_varlong(enc) == (value, len(enc))
    assert size_of_varlong(value) == len(enc)


def test_varint_too_long_is_an_error():
    """A sixth byte is an error (Kafka: 'Varint is too long'), not a wrong number."""
    with pytest.raises(InvalidRecordError, match="longer than 5"):
        decode_varint(bytes.fromhex("808080808001"))
    with pytest.raises(InvalidRecordError, match="longer than 10"):
        decode_varlong(bytes.fromhex("8080808080808080808001"))


def test_varint_overflow_is_an_error():
    """Five bytes whose value does not fit 32 bits are rejected."""
    with pytest.raises(InvalidRecordError, match="overflows"):
        decode_varint(bytes.fromhex("ffffffff7f"))


@pytest.mark.parametrize("hexed", ["", "80", "ff", "8080", "ffffffff"])
def test_varint_running_off_the_buffer(hexed):
    """A varint cut short raises with the position where it starts."""
    with pytest.raises(InvalidRecordError, match="runs off") as info:
        decode_varint(bytes.fromhex(hexed))
    assert info.value.position == 0


def test_encode_out_of_range():
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(2**63)
