"""Protobuf-style variable-length integers with ZigZag encoding, as Kafka's v2 records use.

A varint holds a signed 32-bit value in at most 5 bytes, a varlong a signed 64-bit value in at
most 10: 7 bits per byte, least significant group first, the high bit set on every byte but the
last. Signed values are ZigZag-mapped first (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...) so small
negative numbers stay short. Decoding is strict: a varint longer than its limit, or one that
runs off the end of the buffer, raises :class:`~kafkalog.errors.InvalidRecordError` (Kafka's
``ByteUtils.readVarint`` rejects the same inputs) rather than returning a wrong number.
"""

from __future__ import annotations

from .errors import InvalidRecordError

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10
#: Java's ``Integer.MIN_VALUE``/``MAX_VALUE``: the bounds of Kafka's int32 fields (sizes, counts,
#: sequences, epochs) and the reach of a segment's 32-bit relative offsets. Declared once, here.
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
#: Java's ``Long.MIN_VALUE`` and ``Long.MAX_VALUE``.
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def zigzag_encode(value: int) -> int:
    """Map a signed value to an unsigned one (ZigZag), for any width."""
    return (value << 1) ^ -1 if value < 0 else value << 1


def zigzag_decode(value: int) -> int:
    """Map a ZigZag-encoded unsigned value back to its signed value."""
    return (value >> 1) ^ -(value & 1)


#: ZigZag decoding of every one- and two-byte varint, indexed by its 7-bit groups
#: (``b0 & 0x7f | b1 << 7``): the record walkers decode nearly every varint with one tuple
#: lookup instead of four integer operations, which is most of the cost of decoding a record
#: in CPython.
ZIGZAG_TABLE = tuple(zigzag_decode(z) for z in range(1 << 14))


def _encode_unsigned(z: int) -> bytes:
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# Single-byte encodings are by far the most common (offset deltas, lengths < 64): precompute.
_SMALL = {v: bytes((zigzag_encode(v),)) for v in range(-64, 64)}


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit value as a ZigZag varint.

    Raises:
        ValueError: the value does not fit in 32 bits.
    """
    small = _SMALL.get(value)
    if small is not None:
        return small
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} does not fit in a signed 32-bit integer")
    return _encode_unsigned(zigzag_encode(value))


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit value as a ZigZag varlong.

    Raises:
        ValueError: the value does not fit in 64 bits.
    """
    small = _SMALL.get(value)
    if small is not None:
        return small
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong value {value} does not fit in a signed 64-bit integer")
    return _encode_unsigned(zigzag_encode(value))


def size_of_varint(value: int) -> int:
    """Number of bytes :func:`encode_varint` produces for ``value``."""
    z = zigzag_encode(value) & 0xFFFFFFFF
    return 1 if z < 0x80 else (z.bit_length() + 6) // 7


def size_of_varlong(value: int) -> int:
    """Number of bytes :func:`encode_varlong` produces for ``value``."""
    z = zigzag_encode(value) & 0xFFFFFFFFFFFFFFFF
    return 1 if z < 0x80 else (z.bit_length() + 6) // 7


def _decode(buf, pos: int, limit: int, kind: str) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    end = len(buf)
    while True:
        if pos >= end:
            raise InvalidRecordError(f"{kind} runs off the end of the buffer", position=start)
        if pos - start >= limit:
            raise InvalidRecordError(f"{kind} is longer than {limit} bytes", position=start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    if kind == "varint":
        # Kafka reads into a Java int: bits beyond 32 in the fifth byte are lost. Reject such
        # input instead, since no writer produces it.
        if result > 0xFFFFFFFF:
            raise InvalidRecordError("varint overflows 32 bits", position=start)
    elif result > 0xFFFFFFFFFFFFFFFF:
        raise InvalidRecordError("varlong overflows 64 bits", position=start)
    return (result >> 1) ^ -(result & 1), pos


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a ZigZag varint at ``pos``; return ``(value, position after it)``.

    Raises:
        InvalidRecordError: the varint is longer than 5 bytes, overflows 32 bits or runs off
            the end of ``buf`` (the error's position is where the varint starts).
    """
    try:
        b = buf[pos]
    except IndexError:
        raise InvalidRecordError("varint runs off the end of the buffer", position=pos) from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return _decode(buf, pos, MAX_VARINT_BYTES, "varint")


def decode_varlong(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a ZigZag varlong at ``pos``; return ``(value, position after it)``.

    Raises:
        InvalidRecordError: the varlong is longer than 10 bytes, overflows 64 bits or runs off
            the end of ``buf``.
    """
    try:
        b = buf[pos]
    except IndexError:
        raise InvalidRecordError("varlong runs off the end of the buffer", position=pos) from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return _decode(buf, pos, MAX_VARLONG_BYTES, "varlong")
