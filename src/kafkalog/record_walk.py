"""Walking the records of a v2 batch's payload: decoding them, or only checking them.

A record (varints ZigZag-encoded): ``length:varint, attributes:int8, timestampDelta:varlong,
offsetDelta:varint, keyLength:varint (-1 null), key, valueLength:varint (-1 null), value,
headerCount:varint``, then per header ``keyLength:varint, key (UTF-8), valueLength:varint
(-1 null), value``. The bytes a record consumes must equal its declared length (Kafka's
``DefaultRecord.readFrom``).

:func:`decode_records` builds the records (deep iteration); :func:`walk_records` makes the same
checks without building them (what a broker needs of an append). Both raise
:class:`RecordWalkError`, which :class:`~kafkalog.recordbatch.DefaultRecordBatch` turns into a
positioned :class:`~kafkalog.errors.InvalidRecordError`.
"""

from __future__ import annotations

from . import native
from .errors import InvalidRecordError
from .record import ControlRecord, Header, Record
from .varint import ZIGZAG_TABLE, decode_varint, decode_varlong

#: Smallest encodable record body: attributes + five one-byte varints.
MIN_RECORD_BODY = 6


class RecordWalkError(Exception):
    """A malformed record: the reason, the record's index and the byte position in the payload."""

    def __init__(self, reason: str, index: int, pos: int) -> None:
        self.reason, self.index, self.pos = reason, index, pos


def _varint_slow(data: bytes, pos: int, limit: int) -> tuple[int, int]:
    """Multi-byte varint at ``pos`` (the one- and two-byte cases are inlined by callers)."""
    try:
        return (decode_varint if limit == 5 else decode_varlong)(data, pos)
    except InvalidRecordError as e:
        raise RecordWalkError(e.reason, -1, pos) from None


def _decode_headers(data: bytes, pos: int, rend: int, index: int) -> tuple[tuple[Header, ...], int]:
    n, pos = _varint_slow(data, pos, 5)
    if n < 0:
        raise RecordWalkError(f"invalid number of record headers {n}", index, pos)
    if n * 2 > rend - pos:  # every header needs at least two bytes: a cheap bound before looping
        raise RecordWalkError(f"{n} headers cannot fit in the {rend - pos} bytes left of the record", index, pos)
    headers = []
    for _ in range(n):
        klen, pos = _varint_slow(data, pos, 5)
        if klen < 0 or klen > rend - pos:
            raise RecordWalkError(f"invalid header key size {klen}", index, pos)
        key = data[pos : pos + klen].decode("utf-8", "replace")
        pos += klen
        vlen, pos = _varint_slow(data, pos, 5)
        if vlen == -1:
            value = None
        elif 0 <= vlen <= rend - pos:
            value = data[pos : pos + vlen]
            pos += vlen
        else:
            raise RecordWalkError(f"invalid header value size {vlen}", index, pos)
        headers.append(Header(key, value))
    return tuple(headers), pos


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    append_ts: int | None,
    base_seq: int,
    control: bool,
) -> list[Record]:
    """Decode ``count`` records from ``data[pos:end]``: the hot loop of deep iteration.

    One- and two-byte varints (nearly all of them) are decoded inline through ``ZIGZAG_TABLE``;
    longer ones go through :func:`_varint_slow`. Reading past ``end`` surfaces as IndexError
    and becomes an error; reading past a record's own end is caught by the length check at its
    end, and key/value lengths are checked against the record's end before slicing.
    """
    records: list[Record] = []
    append = records.append
    new = ControlRecord if control else Record
    slow = _varint_slow
    zz = ZIGZAG_TABLE
    empty = ()
    min_body = MIN_RECORD_BODY
    no_seq = base_seq < 0
    i = 0
    try:
        if count > (end - pos) // (min_body + 1):
            raise RecordWalkError(f"record count {count} cannot fit in {end - pos} bytes", 0, pos)
        for i in range(count):
            rstart = pos
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    length = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    length, pos = slow(data, pos, 5)
            rend = pos + length
            if length < min_body or rend > end:
                raise RecordWalkError(f"invalid record size {length} ({end - pos} bytes left)", i, rstart)
            # pos is at the attributes byte (unused in v2); the timestamp delta follows it.
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 2
            else:
                b2 = data[pos + 2]
                if b2 < 0x80:
                    ts_delta = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 3
                else:
                    ts_delta, pos = slow(data, pos + 1, 10)
            b = data[pos]
            if b < 0x80:
                offset_delta = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    offset_delta = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    offset_delta, pos = slow(data, pos, 5)
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    n = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    n, pos = slow(data, pos, 5)
            if n >= 0:
                if n > rend - pos:
                    raise RecordWalkError(f"key size {n} runs past the record", i, pos)
                key = data[pos : pos + n]
                pos += n
            elif n == -1:
                key = None
            else:
                raise RecordWalkError(f"invalid key size {n}", i, pos)
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    n = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    n, pos = slow(data, pos, 5)
            if n >= 0:
                if n > rend - pos:
                    raise RecordWalkError(f"value size {n} runs past the record", i, pos)
                value = data[pos : pos + n]
                pos += n
            elif n == -1:
                value = None
            else:
                raise RecordWalkError(f"invalid value size {n}", i, pos)
            if data[pos] == 0:
                headers = empty
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos, rend, i)
            if pos != rend:
                raise RecordWalkError(
                    f"expected to read {length} bytes in record payload, but instead read {pos - rend + length}",
                    i,
                    rstart,
                )
            if no_seq:
                seq = -1
            else:
                seq = base_seq + offset_delta
                if seq > 0x7FFFFFFF:  # wraps to 0 past 2**31-1 (incrementSequence)
                    seq -= 0x80000000
            append(
                new(
                    base_offset + offset_delta,
                    base_ts + ts_delta if append_ts is None else append_ts,
                    key,
                    value,
                    headers,
                    seq,
                    rend - rstart,
                )
            )
    except IndexError:
        raise RecordWalkError(f"premature end of the batch after {i} of {count} records", i, end) from None
    except RecordWalkError as e:
        if e.index < 0:
            e.index = i
        raise
    except InvalidRecordError as e:  # a malformed control record
        raise RecordWalkError(e.reason, i, pos) from None
    if pos != end:
        raise RecordWalkError(f"{end - pos} bytes remain after the declared {count} records", count, pos)
    return records


def walk_records(data: bytes, pos: int, end: int, count: int) -> tuple[int, int, bool, bool]:
    """:func:`decode_records` without the records: the same checks, returning the smallest
    and largest timestamp delta, whether a key is null and whether the offset deltas are
    0, 1, 2, ... (the compiled walk when it is in use; this code words its errors)."""
    ext = native.ext
    if ext is not None:
        try:
            return ext.walk_v2(data, pos, end, count)
        except native.Invalid:
            pass  # malformed: the pure walk below raises the positioned error
    return _walk_records(data, pos, end, count)


def _walk_records(data: bytes, pos: int, end: int, count: int) -> tuple[int, int, bool, bool]:
    slow = _varint_slow
    zz = ZIGZAG_TABLE
    min_body = MIN_RECORD_BODY
    lo, hi = 2**63, -(2**63)
    null_key = False
    sequential = True
    i = 0
    try:
        if count > (end - pos) // (min_body + 1):
            raise RecordWalkError(f"record count {count} cannot fit in {end - pos} bytes", 0, pos)
        for i in range(count):
            rstart = pos
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    length = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    length, pos = slow(data, pos, 5)
            rend = pos + length
            if length < min_body or rend > end:
                raise RecordWalkError(f"invalid record size {length} ({end - pos} bytes left)", i, rstart)
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 2
            else:
                b2 = data[pos + 2]
                if b2 < 0x80:
                    ts_delta = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 3
                else:
                    ts_delta, pos = slow(data, pos + 1, 10)
            if ts_delta < lo:
                lo = ts_delta
            if ts_delta > hi:
                hi = ts_delta
            b = data[pos]  # the offset delta
            if b < 0x80:
                delta = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    delta = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    delta, pos = slow(data, pos, 5)
            if delta != i:
                sequential = False
            for what in ("key", "value"):
                b = data[pos]
                if b < 0x80:
                    n = zz[b]
                    pos += 1
                else:
                    b2 = data[pos + 1]
                    if b2 < 0x80:
                        n = zz[(b & 0x7F) | (b2 << 7)]
                        pos += 2
                    else:
                        n, pos = slow(data, pos, 5)
                if n >= 0:
                    if n > rend - pos:
                        raise RecordWalkError(f"{what} size {n} runs past the record", i, pos)
                    pos += n
                elif n == -1:
                    if what == "key":
                        null_key = True
                else:
                    raise RecordWalkError(f"invalid {what} size {n}", i, pos)
            if data[pos] == 0:
                pos += 1
            else:
                _, pos = _decode_headers(data, pos, rend, i)
            if pos != rend:
                raise RecordWalkError(
                    f"expected to read {length} bytes in record payload, but instead read {pos - rend + length}",
                    i,
                    rstart,
                )
    except IndexError:
        raise RecordWalkError(f"premature end of the batch after {i} of {count} records", i, end) from None
    except RecordWalkError as e:
        if e.index < 0:
            e.index = i
        raise
    if pos != end:
        raise RecordWalkError(f"{end - pos} bytes remain after the declared {count} records", count, pos)
    return lo, hi, null_key, sequential
