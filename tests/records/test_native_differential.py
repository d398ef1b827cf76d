"""Differential tests of the two record cores: the compiled walk (``kafkalog._native``) against
the pure-Python reference (``kafkalog.record_walk.walk``), called directly, not through the
dispatching entry points (those fall back to the pure code and would hide a disagreement).

Random and mutated payloads (bit flips, truncations, inserted bytes, extreme lengths and
varints, ZigZag extremes, counts off by one, and the v2 batches of the corpora in tests/data)
must give identical results on both cores -- the same summary, the same Record objects, the
same columns -- or be rejected by both (``_native.Invalid`` and ``RecordWalkError``). Run under
scripts/sanitize.sh (ASan + UBSan) these are also the fuzzing of the C code.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, examples
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import MemoryRecords, native
from kafkalog.columnar import fast as columnar_fast
from kafkalog.errors import KafkalogError
from kafkalog.legacy_record import LegacyRecordBatch, encode_message
from kafkalog.record import Header, Record
from kafkalog.record_walk import RECORDS, BatchBase, RecordWalkError, walk
from kafkalog.recordbatch import DefaultRecordBatch, encode_record
from kafkalog.varint import encode_varint, encode_varlong

pytestmark = pytest.mark.skipif(not native.available(), reason="kafkalog._native is not built")
#: The tests here call both cores themselves: conftest's hook does not parametrize them.
SWITCHES_CORES = True

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
EXT = native._compiled


# ------------------------------------------------------------------------------------------------
# Running both cores


def _outcome(fn, invalid):
    try:
        return ("ok", fn())
    except invalid:
        return ("rejected",)


def _rows(records):
    return [(type(r), r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence, r.size_in_bytes, r.crc)
            for r in records]


def check_walk(data, pos, end, count) -> None:
    """walk_v2 (validate) against walk(VALIDATE)."""
    got = _outcome(lambda: tuple(EXT.walk_v2(data, pos, end, count)), EXT.Invalid)
    want = _outcome(lambda: tuple(walk(data, pos, end, count)), RecordWalkError)
    assert got == want


def check_records(data, pos, end, count, base: BatchBase) -> None:
    """decode_v2 against walk(RECORDS) (non-control batches: control records are pure only)."""
    got = _outcome(
        lambda: _rows(EXT.decode_v2(data, pos, end, count, base.base_offset, base.base_timestamp,
                                    base.append_time, base.base_sequence, Record, Header)),
        EXT.Invalid,
    )
    want = _outcome(lambda: _rows(walk(data, pos, end, count, RECORDS, base)), RecordWalkError)
    assert got == want


def _pure_columns(data, starts, ends, fields, include_headers):
    return columnar_fast._walked(data, np.frombuffer(data, np.uint8), starts, ends, fields, include_headers)


def check_columns(data, starts, ends, fields) -> None:
    """columns_v2_size/fill against walk(COLUMNS), both the arrays handed to RecordColumns."""
    for include_headers in (True, False):
        got = _outcome(lambda h=include_headers: columnar_fast._compiled(EXT, data, starts, ends, fields, h), EXT.Invalid)
        want = _outcome(lambda h=include_headers: _pure_columns(data, starts, ends, fields, h), columnar_fast.UsePlainPath)
        assert got[0] == want[0]
        if got[0] == "ok":
            assert sorted(got[1]) == sorted(want[1])
            for name, array in want[1].items():
                assert np.array_equal(got[1][name], array), name


def check_all(data: bytes, count: int, base: BatchBase, attributes: int = 0) -> None:
    """Every walk of ``data`` as one batch's whole payload, and inside a larger buffer."""
    end = len(data)
    check_walk(data, 0, end, count)
    check_records(data, 0, end, count, base)
    fields = [(base.base_offset, base.base_timestamp, base.append_time or 0,
               attributes | (0x08 if base.append_time is not None else 0), 7, 3, count, 0)]
    if count >= 1:
        check_columns(data, [0], [end], fields)
    # The same payload between other bytes: nothing may be read outside [pos, end).
    padded = b"\x81" * 9 + data + b"\xff" * 9
    check_walk(padded, 9, 9 + end, count)
    check_records(padded, 9, 9 + end, count, base)
    if count >= 1:
        check_columns(padded, [9], [9 + end], fields)


# ------------------------------------------------------------------------------------------------
# Strategies

_bytes = st.one_of(st.none(), st.binary(max_size=40))
_header = st.tuples(st.text(max_size=6), _bytes)
_delta64 = st.one_of(st.integers(-5, 5), st.sampled_from([INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1,
                                                          2**31, -(2**31)]), st.integers(INT64_MIN, INT64_MAX))
_delta32 = st.one_of(st.integers(0, 5), st.sampled_from([INT32_MIN, INT32_MAX, -1, 2**30]),
                     st.integers(INT32_MIN, INT32_MAX))
_bases = st.builds(
    BatchBase,
    st.one_of(st.integers(0, 1000), st.sampled_from([INT64_MAX, INT64_MAX - 3, INT64_MIN, INT64_MIN + 3])),
    st.one_of(st.integers(0, 2**41), st.sampled_from([INT64_MAX, INT64_MIN, -1, INT64_MAX - 10])),
    st.one_of(st.none(), st.integers(INT64_MIN, INT64_MAX)),
    st.sampled_from([-1, 0, 5, INT32_MAX - 1, INT32_MAX, INT32_MIN]),
    st.just(False),
)


@st.composite
def payloads(draw):
    """A v2 payload of valid records with any deltas, keys, values and headers: (bytes, count)."""
    records = draw(st.lists(st.tuples(_delta32, _delta64, _bytes, _bytes, st.lists(_header, max_size=3)),
                            max_size=12))
    sequential = draw(st.booleans())
    data = b"".join(
        encode_record(i if sequential else od, td, k, v, h) for i, (od, td, k, v, h) in enumerate(records)
    )
    return data, len(records)


def _extreme_varints():
    values = [0, 1, -1, -2, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]
    out = [encode_varlong(v) for v in values] + [encode_varint(v) for v in values[:6]]
    out += [b"\x80" * k + b"\x00" for k in range(1, 11)]  # non-minimal zeros, up to 11 bytes
    out += [b"\xff" * k + b"\x01" for k in range(3, 11)]  # long runs ending in a 1
    out += [b"\xff" * 10, b"\x80" * 12, b"\xfe\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x1f"]
    return out


EXTREME_VARINTS = _extreme_varints()


@st.composite
def mutated(draw):
    """A valid payload after a few hostile edits, with its count maybe off."""
    data, count = draw(payloads())
    data = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "varint", "byte"]))
        at = draw(st.integers(0, len(data))) if data else 0
        if kind == "flip" and data:
            at = min(at, len(data) - 1)
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=6))
        elif kind == "varint":
            width = draw(st.integers(0, 5))
            data[at : at + width] = draw(st.sampled_from(EXTREME_VARINTS))
        elif data:
            at = min(at, len(data) - 1)
            data[at] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE]))
    count += draw(st.sampled_from([0, 0, 0, 1, -1, 2**31 - 1 - count]))
    return bytes(data), max(count, 0)


# ------------------------------------------------------------------------------------------------
# The tests


@given(p=payloads(), base=_bases)
@pytest.mark.timeout_guard(300)
@examples(200)
def test_valid_payloads_agree(p, base):
    data, count = p
    check_all(data, count, base)


@given(m=mutated(), base=_bases)
@pytest.mark.timeout_guard(300)
@examples(400)
def test_mutated_payloads_agree(m, base):
    data, count = m
    check_all(data, count, base)


@given(data=st.binary(max_size=64), count=st.integers(0, 12), base=_bases)
@pytest.mark.timeout_guard(300)
@examples(200)
def test_random_bytes_agree(data, count, base):
    check_all(data, count, base)


@pytest.mark.timeout_guard(300)
def test_extreme_lengths_and_varints_in_every_field():
    """Each field of a record replaced by every extreme varint."""
    base = BatchBase(0, 0, None, -1, False)
    fields = [b"\x00", encode_varlong(1), encode_varint(0), encode_varint(1), b"k", encode_varint(1), b"v",
              encode_varint(1), encode_varint(1), b"h", encode_varint(-1)]
    for k in range(len(fields)):
        for v in EXTREME_VARINTS + [encode_varint(INT32_MAX), encode_varint(-2)]:
            body = b"".join(fields[:k] + [v] + fields[k + 1 :])
            for length in (len(body), len(body) - 1, len(body) + 1, INT32_MAX, -1):
                check_all(encode_varint(length) + body, 1, base)
                check_all(encode_varint(length) + body + encode_record(1, 0, None, b"x"), 2, base)


def _corpus_batches(limit: int = 60):
    """(payload, count, batch fields) of v2 non-control batches from the corpora in tests/data."""
    out = []
    for path in sorted(DATA.glob("**/*.log")):
        try:
            for batch in MemoryRecords(Path(path).read_bytes()).batches():
                if isinstance(batch, DefaultRecordBatch) and not batch.is_control and batch.count:
                    data, start, end = batch.payload()
                    out.append((bytes(data[start:end]), batch.count, batch))
                    if len(out) >= limit:
                        return out
        except KafkalogError:
            continue
    return out


@pytest.mark.timeout_guard(300)
def test_corpus_batches_agree_and_survive_mutation():
    """The real batches of tests/data, intact and then mutated (seeded: repeatable)."""
    batches = _corpus_batches()
    assert batches
    rng = random.Random(15)
    for payload, count, batch in batches:
        base = BatchBase(batch.base_offset, batch.base_timestamp, None, batch.base_sequence, False)
        check_all(payload, count, base)
        for _ in range(25):
            data = bytearray(payload)
            kind = rng.randrange(4)
            at = rng.randrange(len(data))
            if kind == 0:
                data[at] ^= 1 << rng.randrange(8)
            elif kind == 1:
                del data[at:]
            elif kind == 2:
                data[at : at + rng.randrange(6)] = rng.choice(EXTREME_VARINTS)
            else:
                data[at] = rng.choice([0x00, 0x7F, 0x80, 0xFF])
            check_all(bytes(data), count + rng.choice([0, 0, 1, -1]), base)


def test_a_run_of_batches_agrees():
    """Several corpus payloads walked as one columnar run (in place in one buffer)."""
    batches = _corpus_batches(20)
    starts, ends, fields, parts, pos = [], [], [], [], 0
    for i, (payload, count, batch) in enumerate(batches):
        parts.append(payload)
        starts.append(pos)
        pos += len(payload)
        ends.append(pos)
        fields.append((batch.base_offset, batch.base_timestamp, batch.max_timestamp, batch.attributes,
                       batch.producer_id, batch.partition_leader_epoch, count, i))
    data = b"".join(parts)
    check_columns(data, starts, ends, fields)
    broken = bytearray(data)
    broken[len(broken) // 2] ^= 0x40
    check_columns(bytes(broken), starts, ends, fields)


# ------------------------------------------------------------------------------------------------
# The v0/v1 inner-message walk


def _wrapper(magic: int, wrapper_offset: int, append: bool) -> LegacyRecordBatch:
    """A compressed wrapper header to hang decompressed inner sets on (its value is not read)."""
    attributes = 1 | (0x08 if append and magic == 1 else 0)  # gzip
    raw = encode_message(wrapper_offset, magic, None, b"x", timestamp=777 if magic else -1, attributes=attributes)
    return LegacyRecordBatch(raw)


def check_legacy(data: bytes, magic: int, wrapper_offset: int, append: bool) -> None:
    """legacy_inner against LegacyRecordBatch._walk_inner on the same decompressed inner set."""
    batch = _wrapper(magic, wrapper_offset, append)
    append_ts = 777 if append and magic == 1 else None
    got = _outcome(lambda: _rows(EXT.legacy_inner(data, magic, wrapper_offset, append_ts, Record)), EXT.Invalid)
    want = _outcome(lambda: _rows(batch._walk_inner(data)), KafkalogError)
    assert got == want


@st.composite
def inner_sets(draw):
    magic = draw(st.sampled_from([0, 1]))
    messages = draw(st.lists(st.tuples(st.integers(-3, 2**40), st.integers(-1, 2**41), _bytes, _bytes), max_size=8))
    data = b"".join(encode_message(off, magic, k, v, timestamp=ts if magic else -1) for off, ts, k, v in messages)
    data = bytearray(data)
    for _ in range(draw(st.integers(0, 3))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["flip", "truncate", "byte", "size"]))
        if kind == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[at:]
        elif kind == "byte":
            data[at] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        else:
            data[at : at + 4] = draw(st.sampled_from([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00"]))
    wrapper_offset = draw(st.one_of(st.just(0), st.integers(0, 2**41), st.sampled_from([INT64_MAX, INT64_MIN])))
    return bytes(data), magic, wrapper_offset, draw(st.booleans())


@given(s=inner_sets())
@pytest.mark.timeout_guard(300)
@examples(400)
def test_legacy_inner_sets_agree(s):
    check_legacy(*s)


def test_legacy_offsets_near_the_int64_limits():
    for magic in (0, 1):
        for offsets, wrapper in [([INT64_MAX], INT64_MAX), ([-5], INT64_MAX), ([0, 1], INT64_MAX),
                                 ([INT64_MIN, 0], 0), ([3, 1], 5), ([5], 3)]:
            data = b"".join(encode_message(off, magic, None, b"v", timestamp=1 if magic else -1) for off in offsets)
            for append in (False, True):
                check_legacy(data, magic, wrapper, append)


# ------------------------------------------------------------------------------------------------
# A run of whole batches in one buffer: columns_v2_scan + columns_v2_run_fill against the pure
# per-batch driver (decode_columns on the pure core), errors included


def _run_rows(cols) -> dict:
    """Every array of ``cols`` as a list (None for the header columns when not decoded)."""
    return {name: None if getattr(cols, name) is None else getattr(cols, name).tolist()
            for name in cols.__slots__}


def _decode_outcome(buf: bytes, *, pure: bool, **kw):
    from kafkalog.columnar.decode import decode_columns

    with native.use(pure=pure):
        try:
            return ("ok", _run_rows(decode_columns(MemoryRecords(buf), include_control=True, **kw)))
        except KafkalogError as e:
            return (type(e), e.file, e.position, str(e))


def _batch(draw, base_offset: int) -> bytes:
    from kafkalog import Compression, RecordBatchBuilder
    from kafkalog.recordbatch import encode_batch

    kind = draw(st.sampled_from(["plain"] * 6 + ["lz4", "control", "empty", "append-time"]))
    if kind == "empty":  # what the cleaner keeps for a producer's state
        return bytes(encode_batch(b"", count=0, base_offset=base_offset, last_offset_delta=3, base_timestamp=5,
                                  max_timestamp=5, producer_id=9, producer_epoch=1))
    if kind == "control":
        from kafkalog import ControlRecordType

        return bytes(RecordBatchBuilder.end_transaction_marker(
            ControlRecordType.COMMIT, producer_id=4, producer_epoch=0, coordinator_epoch=1, timestamp=7,
            base_offset=base_offset).buffer)
    codec = Compression.LZ4 if kind == "lz4" else Compression.NONE
    b = RecordBatchBuilder(2, base_offset=base_offset, compression=codec,
                           log_append_time=1234 if kind == "append-time" else None,
                           producer_id=draw(st.sampled_from([-1, 3])), partition_leader_epoch=draw(st.integers(-1, 9)))
    for k, v, h in draw(st.lists(st.tuples(_bytes, _bytes, st.lists(_header, max_size=2)), min_size=1, max_size=6)):
        b.append(k, v, timestamp=draw(st.integers(0, 2**40)), headers=h)
    return bytes(b.build().buffer)


@st.composite
def batch_runs(draw):
    """A run of v2 batches (mostly uncompressed, some compressed, control, empty) after a few
    hostile edits: flipped bytes (CRC mismatches), lying size/count/lastOffsetDelta fields with
    the CRC made good again, huge counts, torn tails."""
    import struct

    from kafkalog.crc import crc32c

    parts, offset = [], 0
    for _ in range(draw(st.integers(1, 6))):
        part = _batch(draw, offset)
        parts.append(part)
        offset += 10
    starts = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    data = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.sampled_from(starts))
        kind = draw(st.sampled_from(["flip", "count", "size", "delta", "record", "tail"]))
        if kind == "flip" and data:
            data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
            continue
        if kind == "tail":
            del data[draw(st.integers(0, len(data))):]
            continue
        if kind == "flip" or at + 61 > len(data):
            continue
        if kind == "count":
            struct.pack_into(">i", data, at + 57, draw(st.sampled_from([INT32_MAX, -1, 0, 1, 2**20, 3])))
        elif kind == "size":
            (size,) = struct.unpack_from(">i", data, at + 8)
            struct.pack_into(">i", data, at + 8, max(0, size + draw(st.sampled_from([-1, 1, -7, 100, 2**30]))))
        elif kind == "delta":
            struct.pack_into(">i", data, at + 23, draw(st.sampled_from([-1, 0, INT32_MAX])))
        else:
            end = min(len(data), at + 61 + draw(st.integers(0, 40)))
            if end > at + 61:
                data[draw(st.integers(at + 61, end - 1))] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x01]))
        (size,) = struct.unpack_from(">i", data, at + 8)
        if 49 <= size and at + 12 + size <= len(data):  # the edit keeps a good CRC: a lying field
            struct.pack_into(">I", data, at + 17, crc32c(bytes(data[at + 21 : at + 12 + size])))
    return bytes(data)


@given(buf=batch_runs(), validate=st.booleans(), headers=st.booleans(),
       max_records=st.one_of(st.none(), st.integers(0, 20)))
@pytest.mark.timeout_guard(300)
@examples(300)
def test_a_run_of_whole_batches_decodes_as_the_pure_driver_does(buf, validate, headers, max_records):
    """decode_columns of a MemoryRecords: the compiled run (scan + fill) and the pure per-batch
    driver give the same columns, or the same error (type, file, position, message)."""
    kw = dict(validate=validate, include_headers=headers, max_records=max_records)
    assert _decode_outcome(buf, pure=False, **kw) == _decode_outcome(buf, pure=True, **kw)


@given(buf=batch_runs(), validate=st.booleans(), at=st.integers(0, 200))
@examples(200)
def test_the_scan_takes_only_what_the_fill_and_the_pure_driver_agree_on(buf, validate, at):
    """columns_v2_scan's run, from any position: the fill writes exactly the sizes it summed,
    the columns equal the pure driver's over the same bytes, and it never reads past ``end``."""
    from kafkalog.columnar.decode import decode_columns

    pos = min(at, len(buf))
    stop, batches, n, key_bytes, value_bytes, h, hkey_bytes, hvalue_bytes = EXT.columns_v2_scan(
        buf, pos, len(buf), 1 << 30, validate, -1
    )
    assert pos <= stop <= len(buf) and (batches == 0) == (stop == pos)
    assert n * 7 <= stop - pos and key_bytes + value_bytes + hkey_bytes + hvalue_bytes <= stop - pos
    got = columnar_fast.decode_v2_in_place(EXT, buf, pos, len(buf), 1 << 30, validate, 0, None, True)
    if batches == 0:
        assert got is None
        return
    cols, got_stop, got_batches = got
    assert (got_stop, got_batches, len(cols), len(cols.key_data), len(cols.value_data)) == (
        stop, batches, n, key_bytes, value_bytes)
    with native.use(pure=True):
        want = decode_columns(MemoryRecords(buf[pos:stop]), validate=validate)
    assert _run_rows(cols) == _run_rows(want)
    # The same run inside a window that ends at ``stop``: nothing past it was needed.
    assert EXT.columns_v2_scan(buf, pos, stop, 1 << 30, validate, -1)[:2] == (stop, batches)


def test_a_huge_declared_count_is_not_taken_nor_allocated():
    """A batch declaring 2**31-1 records (CRC good) ends the run before it; the outputs are sized
    by the records actually walked."""
    import struct

    from kafkalog import RecordBatchBuilder
    from kafkalog.crc import crc32c

    b = RecordBatchBuilder(2, base_offset=0)
    b.append(b"k", b"v", timestamp=1)
    good = bytes(b.build().buffer)
    bad = bytearray(good)
    struct.pack_into(">i", bad, 57, INT32_MAX)
    struct.pack_into(">i", bad, 23, INT32_MAX)
    struct.pack_into(">I", bad, 17, crc32c(bytes(bad[21:])))
    buf = good + bytes(bad)
    assert EXT.columns_v2_scan(buf, 0, len(buf), 1 << 30, True, -1) == (len(good), 1, 1, 1, 1, 0, 0, 0)
    assert EXT.columns_v2_scan(buf, len(good), len(buf), 1 << 30, True, -1)[:3] == (len(good), 0, 0)
