"""Walking the records of a v2 batch's payload: the one record walk, in pure Python.

A record (varints ZigZag-encoded): ``length:varint, attributes:int8, timestampDelta:varlong,
offsetDelta:varint, keyLength:varint (-1 null), key, valueLength:varint (-1 null), value,
headerCount:varint``, then per header ``keyLength:varint, key (UTF-8), valueLength:varint
(-1 null), value``. The bytes a record consumes must equal its declared length (Kafka's
``DefaultRecord.readFrom``).

:func:`walk` is the walk; what it keeps is the caller's choice: nothing but a :class:`WalkSummary`
(``VALIDATE``: what a broker needs of an append), :class:`~kafkalog.record.Record` objects
(``RECORDS``: deep iteration), or the records' fields and byte spans appended to a
:class:`SpanColumns` (``COLUMNS``: columnar decoding). The checks are the same in every mode.
It is the reference of the compiled walk in ``src/native/walk.c``: the entry points
:func:`walk_records` and :func:`decode_records` (and ``columnar_fast`` for columns) run the
compiled core when it is in use and fall back here when it rejects the input, so every error is
worded here. Errors are :class:`RecordWalkError`, which
:class:`~kafkalog.recordbatch.DefaultRecordBatch` turns into a positioned
:class:`~kafkalog.errors.InvalidRecordError`.

Offsets and timestamps are int64 in Kafka: a base plus a delta beyond that range is an error
here (Java would wrap it silently; kafkalog never wraps).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple

from . import native
from .errors import InvalidRecordError
from .record import ControlRecord, Header, Record
from .varint import ZIGZAG_TABLE, decode_varint, decode_varlong
from .varint import INT32_MAX

#: Smallest encodable record body: attributes + five one-byte varints.
MIN_RECORD_BODY = 6
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class Keep(Enum):
    """What :func:`walk` keeps of the records it checks."""

    VALIDATE = "validate"
    RECORDS = "records"
    COLUMNS = "columns"


VALIDATE, RECORDS, COLUMNS = Keep.VALIDATE, Keep.RECORDS, Keep.COLUMNS


class RecordWalkError(Exception):
    """A malformed record: the reason, the record's index and the byte position in the payload."""

    def __init__(self, reason: str, index: int, pos: int) -> None:
        self.reason, self.index, self.pos = reason, index, pos


class WalkSummary(NamedTuple):
    """What every walk gathers: the smallest and largest timestamp delta (``2**63`` and
    ``-2**63`` when there are no records), whether a key is null and whether the offset deltas
    are 0, 1, 2, ... (as a producer writes them)."""

    ts_delta_min: int
    ts_delta_max: int
    null_key: bool
    sequential: bool


class BatchBase(NamedTuple):
    """The batch fields a decoding walk adds to each record's deltas."""

    base_offset: int
    base_timestamp: int
    append_time: int | None  # LogAppendTime: every record reports the batch's max timestamp
    base_sequence: int
    control: bool


class SpanColumns:
    """The ``COLUMNS`` walk's output, appended batch after batch: per record its absolute offset
    and timestamp, its key and value spans (position, length; -1 null) in the walked buffer and
    its header count; per header its key and value spans."""

    __slots__ = ("offset", "timestamp", "key_pos", "key_len", "value_pos", "value_len", "header_count",
                 "hkey_pos", "hkey_len", "hvalue_pos", "hvalue_len")

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, [])


def _varint_slow(data: Any, pos: int, limit: int) -> tuple[int, int]:
    """Multi-byte varint (``limit`` 5) or varlong (10) at ``pos``; the one- and two-byte cases
    are inlined by the walk through ``ZIGZAG_TABLE``."""
    try:
        return (decode_varint if limit == 5 else decode_varlong)(data, pos)
    except InvalidRecordError as e:
        raise RecordWalkError(e.reason, -1, pos) from None


def _walk_headers(data: Any, pos: int, rend: int, index: int, keep: Keep, out: Any) -> tuple[Any, int]:
    """The headers of record ``index`` at ``pos`` (the count first): checked, and kept as
    ``keep`` says (RECORDS: returns a tuple of Header; COLUMNS: spans appended to ``out``)."""
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
        kpos = pos
        pos += klen
        vlen, pos = _varint_slow(data, pos, 5)
        vpos = pos
        if 0 <= vlen <= rend - pos:
            pos += vlen
        elif vlen != -1:
            raise RecordWalkError(f"invalid header value size {vlen}", index, pos)
        if keep is RECORDS:
            value = None if vlen < 0 else data[vpos : vpos + vlen]
            headers.append(Header(data[kpos : kpos + klen].decode("utf-8", "replace"), value))
        elif keep is COLUMNS:
            out.hkey_pos.append(kpos)
            out.hkey_len.append(klen)
            out.hvalue_pos.append(vpos)
            out.hvalue_len.append(vlen)
    return tuple(headers), pos


def _add64(base: int, delta: int, what: str, index: int, pos: int) -> int:
    """``base + delta`` as Kafka's int64, refused when it leaves the range (Java would wrap)."""
    total = base + delta
    if total < INT64_MIN or total > INT64_MAX:
        raise RecordWalkError(f"{what} {base} + delta {delta} overflows int64", index, pos)
    return total


def walk(
    data: Any,
    pos: int,
    end: int,
    count: int,
    keep: Keep = VALIDATE,
    base: BatchBase | None = None,
    out: SpanColumns | None = None,
) -> Any:
    """Walk ``count`` records of ``data[pos:end]`` (bytes, or a buffer of uint8), checking each.

    ``keep`` VALIDATE returns a :class:`WalkSummary`; RECORDS returns the list of Record (or
    ControlRecord) objects; COLUMNS appends to ``out`` and returns the summary. RECORDS and
    COLUMNS need ``base``. One- and two-byte varints (nearly all of them) are decoded inline
    through ``ZIGZAG_TABLE``. Reading past the buffer surfaces as IndexError and becomes an
    error; reading past a record's own end is caught by the size check at its end, and key and
    value sizes are checked against the record's end before anything is sliced.

    Raises:
        RecordWalkError: the first malformed record (its index and byte position).
    """
    records: list[Record] = []
    decoding = keep is not VALIDATE
    if keep is not COLUMNS and not isinstance(data, bytes):
        # One batch's bytes (a view of its entry): as bytes, indexing is faster and keys and
        # values are sliced out as bytes. (COLUMNS walks runs in place in a whole buffer.)
        data = bytes(data)
    if decoding:
        assert base is not None and (keep is RECORDS or out is not None)
        base_offset, base_ts, append_ts, base_seq, control = base
        new = ControlRecord if control else Record
        # Offset deltas are int32: a base offset away from the int64 limits cannot overflow.
        check_offset = base_offset + INT32_MAX > INT64_MAX or base_offset - INT32_MAX - 1 < INT64_MIN
    slow = _varint_slow
    zz = ZIGZAG_TABLE
    lo, hi = 1 << 63, -(1 << 63)
    null_key = False
    sequential = True
    i = 0
    try:
        if count > (end - pos) // (MIN_RECORD_BODY + 1):
            raise RecordWalkError(f"record count {count} cannot fit in {end - pos} bytes", 0, pos)
        for i in range(count):
            rstart = pos
            b = data[pos]  # the record's length
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
            if length < MIN_RECORD_BODY or rend > end:
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
            if ts_delta < lo:
                lo = ts_delta
            if ts_delta > hi:
                hi = ts_delta
            b = data[pos]  # the offset delta
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
            if offset_delta != i:
                sequential = False
            b = data[pos]  # the key's size
            if b < 0x80:
                key_len = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    key_len = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    key_len, pos = slow(data, pos, 5)
            key_pos = pos
            if key_len >= 0:
                if key_len > rend - pos:
                    raise RecordWalkError(f"key size {key_len} runs past the record", i, pos)
                pos += key_len
            elif key_len == -1:
                null_key = True
            else:
                raise RecordWalkError(f"invalid key size {key_len}", i, pos)
            b = data[pos]  # the value's size
            if b < 0x80:
                value_len = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    value_len = zz[(b & 0x7F) | (b2 << 7)]
                    pos += 2
                else:
                    value_len, pos = slow(data, pos, 5)
            value_pos = pos
            if value_len >= 0:
                if value_len > rend - pos:
                    raise RecordWalkError(f"value size {value_len} runs past the record", i, pos)
                pos += value_len
            elif value_len != -1:
                raise RecordWalkError(f"invalid value size {value_len}", i, pos)
            if data[pos] == 0:
                headers: tuple[Header, ...] = ()
                header_count = 0
                pos += 1
            else:
                if keep is COLUMNS:
                    before = len(out.hkey_pos)  # type: ignore[union-attr]
                headers, pos = _walk_headers(data, pos, rend, i, keep, out)
                if keep is COLUMNS:
                    header_count = len(out.hkey_pos) - before  # type: ignore[union-attr]
            if pos != rend:
                raise RecordWalkError(
                    f"expected to read {length} bytes in record payload, but instead read {pos - rend + length}",
                    i,
                    rstart,
                )
            if not decoding:
                continue
            offset = base_offset + offset_delta
            if check_offset:
                offset = _add64(base_offset, offset_delta, "offset", i, rstart)
            if append_ts is not None:
                timestamp = append_ts
            else:
                timestamp = base_ts + ts_delta
                if timestamp > INT64_MAX or timestamp < INT64_MIN:
                    _add64(base_ts, ts_delta, "timestamp", i, rstart)  # raises
            if keep is COLUMNS:
                out.offset.append(offset)  # type: ignore[union-attr]
                out.timestamp.append(timestamp)  # type: ignore[union-attr]
                out.key_pos.append(key_pos)  # type: ignore[union-attr]
                out.key_len.append(key_len)  # type: ignore[union-attr]
                out.value_pos.append(value_pos)  # type: ignore[union-attr]
                out.value_len.append(value_len)  # type: ignore[union-attr]
                out.header_count.append(header_count)  # type: ignore[union-attr]
                continue
            if base_seq < 0:
                seq = -1
            else:
                seq = base_seq + offset_delta
                if seq > INT32_MAX:  # wraps to 0 past 2**31-1 (Kafka's incrementSequence)
                    seq -= 0x80000000
            records.append(
                new(
                    offset,
                    timestamp,
                    None if key_len < 0 else data[key_pos : key_pos + key_len],
                    None if value_len < 0 else data[value_pos : value_pos + value_len],
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
    if keep is RECORDS:
        return records
    return WalkSummary(lo, hi, null_key, sequential)


def decode_records(
    data: Any,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    append_ts: int | None,
    base_seq: int,
    control: bool,
) -> list[Record]:
    """Decode ``count`` records from ``data[pos:end]`` (deep iteration): the compiled core
    when it is in use (not for control records, whose keys Python parses), else :func:`walk`."""
    ext = native.ext
    if ext is not None and not control:
        try:
            return ext.decode_v2(data, pos, end, count, base_offset, base_ts, append_ts, base_seq, Record, Header)
        except native.Invalid:
            pass  # malformed: the pure walk below raises the positioned error
    return walk(data, pos, end, count, RECORDS, BatchBase(base_offset, base_ts, append_ts, base_seq, control))


def walk_records(data: Any, pos: int, end: int, count: int) -> WalkSummary:
    """Check ``count`` records of ``data[pos:end]`` without building them: the compiled walk
    when it is in use, else :func:`walk` (which words the errors)."""
    ext = native.ext
    if ext is not None:
        try:
            return WalkSummary(*ext.walk_v2(data, pos, end, count))
        except native.Invalid:
            pass  # malformed: the pure walk below raises the positioned error
    return walk(data, pos, end, count)
