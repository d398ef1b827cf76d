"""Columnar decode (``kafkalog.columnar.decode``) against the Record iterator, Kafka's files and hostile bytes.

The Record iterator (``batch.records()``) is the reference: for every magic x codec, hypothesis
builds runs of batches -- null keys, tombstones, headers (and empty header lists), LogAppendTime,
transactional batches, transaction markers, compacted batches with offset gaps and a delete
horizon, empty batches -- and the columns must hold exactly its records, read through
``MemoryRecords``, ``FileRecords`` and plain batch lists, on the fast path and on its plain twin
(``KAFKALOG_COLUMNAR=plain``). Damaged bytes must raise the very error the iterator raises
(type, file, position, message). The segments Kafka 3.8 wrote and the real broker files are
decoded too, and the Arrow output is checked for exact types and buffers shared with numpy.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, MATRIX, examples
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.columnar import fast as columnar_fast
from kafkalog import (
    Compression,
    ControlRecordType,
    CorruptRecordError,
    FileRecords,
    Header,
    InvalidRecordError,
    KafkalogError,
    MemoryRecords,
    RecordBatchBuilder,
    TimestampType,
    TruncatedRecordError,
    native,
)
from kafkalog.columnar import decode as columnar
from kafkalog.columnar.decode import RecordColumns, arrow_schema, arrow_type, decode_columns
from kafkalog.crc import crc32c
from kafkalog.recordbatch import DefaultRecordBatch, encode_batch, encode_record
from kafkalog.varint import encode_varint, encode_varlong

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
CORPUS = DATA / "kafka-3.8"
REAL = DATA / "real"


# ------------------------------------------------------------------------------------------------
# Reading both ways


def wrap64(value: int) -> int:
    """``value`` as Java's long arithmetic leaves it (what the int64 columns hold)."""
    return (value + 2**63) % 2**64 - 2**63


def _cell(offsets: np.ndarray, data: np.ndarray, valid: np.ndarray | None, i: int) -> bytes | None:
    if valid is not None and not valid[i]:
        assert offsets[i] == offsets[i + 1], "a null entry spans bytes"
        return None
    return bytes(data[offsets[i] : offsets[i + 1]])


def column_rows(cols: RecordColumns) -> list[tuple]:
    """The records in ``cols`` as tuples, checking the layout invariants on the way."""
    n = len(cols)
    for name in ("timestamp", "timestamp_type", "key_valid", "value_valid", "is_control", "producer_id",
                 "partition_leader_epoch", "batch_index"):
        assert len(getattr(cols, name)) == n, name
    for prefix in ("key", "value"):
        offsets, data = getattr(cols, f"{prefix}_offsets"), getattr(cols, f"{prefix}_data")
        assert len(offsets) == n + 1 and offsets[0] == 0 and offsets[-1] == len(data)
        assert (np.diff(offsets) >= 0).all()
    if cols.has_headers:
        h = len(cols.header_key_offsets) - 1
        assert len(cols.header_offsets) == n + 1 and cols.header_offsets[0] == 0 and cols.header_offsets[-1] == h
        assert len(cols.header_value_offsets) == h + 1 and len(cols.header_value_valid) == h
    rows = []
    for i in range(n):
        headers = None
        if cols.has_headers:
            headers = tuple(
                Header(
                    _cell(cols.header_key_offsets, cols.header_key_data, None, j).decode("utf-8"),
                    _cell(cols.header_value_offsets, cols.header_value_data, cols.header_value_valid, j),
                )
                for j in range(cols.header_offsets[i], cols.header_offsets[i + 1])
            )
            assert bool(cols.headers_valid[i]) == bool(headers), "a record with no headers is null"
        rows.append(
            (
                int(cols.offset[i]),
                int(cols.timestamp[i]),
                int(cols.timestamp_type[i]),
                _cell(cols.key_offsets, cols.key_data, cols.key_valid, i),
                _cell(cols.value_offsets, cols.value_data, cols.value_valid, i),
                headers,
                bool(cols.is_control[i]),
                int(cols.producer_id[i]),
                int(cols.partition_leader_epoch[i]),
                int(cols.batch_index[i]),
            )
        )
    return rows


def iterator_rows(batches, *, validate=False, include_control=False, include_headers=True, max_records=None):
    """What the Record iterator gives, as :func:`column_rows` tuples."""
    rows: list[tuple] = []
    for index, batch in enumerate(batches):
        if max_records is not None and len(rows) >= max_records:
            break
        if validate:
            batch.ensure_valid()
        for r in batch.records():
            if r.is_control and not include_control:
                continue
            rows.append(
                (
                    r.offset,
                    wrap64(r.timestamp),
                    int(batch.timestamp_type),
                    r.key,
                    r.value,
                    r.headers if include_headers else None,
                    r.is_control,
                    batch.producer_id,
                    batch.partition_leader_epoch,
                    index,
                )
            )
    return rows if max_records is None else rows[:max_records]


def outcome(fn):
    """``("ok", result)`` or the error as (type, file, position, message)."""
    try:
        return ("ok", fn())
    except KafkalogError as e:
        return (type(e), e.file, e.position, str(e))


@contextlib.contextmanager
def plain(on: bool = True):
    """Force the plain twin (what KAFKALOG_COLUMNAR=plain does) inside the block."""
    saved = columnar._PLAIN
    columnar._PLAIN = on
    try:
        yield
    finally:
        columnar._PLAIN = saved


@contextlib.contextmanager
def walk(compiled: bool):
    """Run the block on the compiled record core (when it is built) or on the pure walk."""
    if compiled and not native.available():
        yield
        return
    with native.use(pure=not compiled):
        yield


@contextlib.contextmanager
def numpy_gather():
    """Gather keys, values and headers with numpy instead of pyarrow's take."""
    saved = columnar_fast._ARROW_GATHER
    columnar_fast._ARROW_GATHER = False
    try:
        yield
    finally:
        columnar_fast._ARROW_GATHER = saved


@contextlib.contextmanager
def tiny_chunks():
    """Frame one MemoryRecords entry at a time and flush the run after every batch."""
    saved = columnar._FRAME_CHUNK_BYTES, columnar._IN_PLACE_CHUNK_BYTES, columnar._CHUNK_BYTES
    columnar._FRAME_CHUNK_BYTES = columnar._IN_PLACE_CHUNK_BYTES = columnar._CHUNK_BYTES = 1
    try:
        yield
    finally:
        columnar._FRAME_CHUNK_BYTES, columnar._IN_PLACE_CHUNK_BYTES, columnar._CHUNK_BYTES = saved


# ------------------------------------------------------------------------------------------------
# Strategies

BIG = b"columnar " * 400  # ~3.6 KB, several per run sometimes
blobs = st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=40), st.just(BIG))
header_lists = st.lists(
    st.tuples(st.text(max_size=6), st.one_of(st.none(), st.just(b""), st.binary(max_size=8))), max_size=3
)
timestamps = st.one_of(st.integers(0, 5000), st.integers(0, 2**41), st.just(-1))
record_counts = st.one_of(st.integers(1, 4), st.integers(30, 45))


@st.composite
def v2_batch(draw, codec: Compression, base: int) -> tuple[bytes, int]:
    """One v2 batch starting at offset ``base`` and the next free offset."""
    kind = draw(st.sampled_from(["records", "records", "records", "marker", "compacted", "empty"]))
    epoch = draw(st.sampled_from([-1, 0, 5, INT32_MAX]))
    if kind == "marker":
        buf = RecordBatchBuilder.end_transaction_marker(
            draw(st.sampled_from([ControlRecordType.ABORT, ControlRecordType.COMMIT])),
            producer_id=draw(st.integers(0, 2**40)),
            producer_epoch=draw(st.integers(0, 100)),
            coordinator_epoch=draw(st.integers(-(2**31), INT32_MAX)),
            timestamp=draw(timestamps),
            base_offset=base,
            partition_leader_epoch=epoch,
        ).buffer
        return bytes(buf), base + 1
    if kind == "empty":
        # All records removed by the cleaner; the batch stays for its producer state.
        delta = draw(st.integers(0, 10))
        buf = encode_batch(b"", count=0, base_offset=base, last_offset_delta=delta, base_timestamp=0,
                           max_timestamp=0, compression=codec, producer_id=7, producer_epoch=1,
                           base_sequence=0, partition_leader_epoch=epoch)
        return buf, base + delta + 1
    n = draw(record_counts)
    gaps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    offsets, cur = [], base
    for gap in gaps:
        cur += gap
        offsets.append(cur)
        cur += 1
    keys = draw(st.lists(blobs, min_size=n, max_size=n))
    values = draw(st.lists(blobs, min_size=n, max_size=n))
    headers = draw(st.lists(header_lists, min_size=n, max_size=n))
    if kind == "compacted":
        # A cleaner's output: offset gaps, a lastOffsetDelta past the last kept record, and a
        # delete horizon as base timestamp, so the timestamp deltas are negative.
        horizon = draw(st.integers(10**12, 2 * 10**12))
        ts = draw(st.lists(st.integers(0, 10**12), min_size=n, max_size=n))
        payload = b"".join(
            encode_record(o - base, t - horizon, k, v, h) for o, t, k, v, h in zip(offsets, ts, keys, values, headers)
        )
        buf = encode_batch(payload, count=n, base_offset=base, last_offset_delta=cur - base + 2,
                           base_timestamp=0, max_timestamp=max(ts), compression=codec, producer_id=3,
                           producer_epoch=0, base_sequence=0, delete_horizon_ms=horizon,
                           partition_leader_epoch=epoch)
        return buf, cur + 3
    lat = draw(st.booleans())
    txn = draw(st.booleans())
    b = RecordBatchBuilder(
        2,
        codec,
        TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
        base_offset=base,
        producer_id=draw(st.integers(0, 2**62)) if txn else -1,
        producer_epoch=1 if txn else -1,
        base_sequence=draw(st.integers(0, INT32_MAX)) if txn else -1,
        is_transactional=txn,
        partition_leader_epoch=epoch,
        log_append_time=draw(st.integers(0, 2**41)) if lat else None,
    )
    ts = draw(st.lists(timestamps, min_size=n, max_size=n))
    for o, t, k, v, h in zip(offsets, ts, keys, values, headers):
        b.append(k, v, timestamp=t, headers=h, offset=o)
    return bytes(b.build().buffer), cur


@st.composite
def legacy_batch(draw, magic: int, codec: Compression, base: int) -> tuple[bytes, int]:
    n = draw(st.integers(1, 6))
    lat = magic == 1 and draw(st.booleans())
    b = RecordBatchBuilder(
        magic,
        codec,
        TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
        base_offset=base,
        log_append_time=draw(st.integers(0, 2**41)) if lat else None,
    )
    cur = base
    for _ in range(n):
        cur += draw(st.integers(0, 2))
        b.append(draw(blobs), draw(blobs), timestamp=draw(timestamps), offset=cur)
        cur += 1
    return bytes(b.build().buffer), cur


@st.composite
def runs(draw, magic: int, codec: Compression) -> bytes:
    base = draw(st.integers(0, 2**40))
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        part, base = draw(v2_batch(codec, base) if magic == 2 else legacy_batch(magic, codec, base))
        parts.append(part)
        base += draw(st.integers(0, 2))
    return b"".join(parts)


# ------------------------------------------------------------------------------------------------
# Agreement with the Record iterator


@pytest.mark.parametrize("magic,codec", MATRIX, ids=[f"v{m}-{c.kafka_name}" for m, c in MATRIX])
@given(data=st.data())
@examples(60)
def test_columns_equal_the_record_iterator(tmp_path_factory, magic, codec, data):
    buf = data.draw(runs(magic, codec))
    include_control = data.draw(st.booleans())
    include_headers = data.draw(st.booleans())
    max_records = data.draw(st.one_of(st.none(), st.integers(0, 50)))
    mr = MemoryRecords(buf)
    flags = dict(include_control=include_control, include_headers=include_headers)
    want = iterator_rows(mr.batches(), **flags)
    assert column_rows(decode_columns(mr, **flags)) == want
    with plain():
        assert column_rows(decode_columns(mr, **flags)) == want
    for compiled in (True, False):
        with walk(compiled):
            assert column_rows(decode_columns(mr, **flags)) == want
    with numpy_gather():
        assert column_rows(decode_columns(mr, **flags)) == want
        assert column_rows(decode_columns(list(mr.batches()), **flags)) == want
    with tiny_chunks():
        assert column_rows(decode_columns(mr, **flags)) == want
        assert column_rows(decode_columns(MemoryRecords(bytearray(buf)), **flags)) == want
    assert column_rows(decode_columns(MemoryRecords(memoryview(buf)), **flags)) == want
    assert column_rows(decode_columns(list(mr.batches()), validate=False, **flags)) == want
    assert column_rows(decode_columns(mr, max_records=max_records, **flags)) == iterator_rows(
        mr.batches(), max_records=max_records, **flags
    )
    path = tmp_path_factory.getbasetemp() / f"columnar-v{magic}-{codec.kafka_name}.log"
    path.write_bytes(buf)
    with FileRecords.open(path) as fr:
        assert column_rows(decode_columns(fr, **flags)) == want
        assert column_rows(decode_columns(fr, validate=False, **flags)) == want


@pytest.mark.parametrize("codec", list(Compression))
def test_many_records_with_headers(codec):
    """Enough records with headers for the level-by-level vectorised header parse, one record
    with hundreds of headers for the Python tail, and header-less records in between."""
    b = RecordBatchBuilder(2, codec, base_offset=10)
    for i in range(300):
        n = 600 if i == 77 else (i * 7) % 5
        headers = [(f"k{i}-{j}-\u00e9", None if (i + j) % 4 == 0 else bytes([j % 256]) * (j % 3)) for j in range(n)]
        b.append(b"key%d" % i if i % 3 else None, b"v" * (i % 50) if i % 11 else None, timestamp=1000 + i,
                 headers=headers)
    mr = b.build()
    for on in (False, True):
        with plain(on):
            assert column_rows(decode_columns(mr)) == iterator_rows(mr.batches())


def test_many_small_batches_decode_the_same_on_both_cores():
    """A run of many batches (what producers write) with one-, two- and three-byte record
    lengths and batches of different counts: the columns equal the iterator's on both cores."""
    parts, base = [], 0
    for i in range(90):
        b = RecordBatchBuilder(2, Compression.LZ4 if i % 5 == 0 else Compression.NONE, base_offset=base)
        for j in range((i * 13) % 40 + 1):
            size = 9000 if (i + j) % 23 == 0 else (5, 100, 300)[(i + j) % 3] if j % 7 else 0
            b.append(None if j % 3 == 0 else b"k%d" % j, bytes([j % 251]) * size, timestamp=base + j,
                     headers=[("h", b"x")] if (i + j) % 6 == 0 else [])
        parts.append(bytes(b.build().buffer))
        base += (i * 13) % 40 + 1
    mr = MemoryRecords(b"".join(parts))
    want = iterator_rows(mr.batches())
    for compiled in (True, False):
        with walk(compiled):
            assert column_rows(decode_columns(mr)) == want


def test_control_records_included_and_excluded():
    data = RecordBatchBuilder(2, base_offset=0, producer_id=9, producer_epoch=0, base_sequence=0,
                              is_transactional=True)
    data.append(b"k", b"v", timestamp=5)
    marker = RecordBatchBuilder.end_transaction_marker(
        ControlRecordType.COMMIT, producer_id=9, producer_epoch=0, coordinator_epoch=3, timestamp=6, base_offset=1
    )
    mr = MemoryRecords(data.build().buffer + marker.buffer)
    without = decode_columns(mr)
    assert column_rows(without) == iterator_rows(mr.batches())
    assert list(without.offset) == [0] and not without.is_control.any()
    with_control = decode_columns(mr, include_control=True)
    assert list(with_control.offset) == [0, 1]
    assert list(with_control.is_control) == [False, True]
    assert list(with_control.batch_index) == [0, 1]
    assert list(with_control.producer_id) == [9, 9]


def test_magic0_has_no_timestamp_type():
    b = RecordBatchBuilder(0, Compression.GZIP, base_offset=3)
    b.append(None, b"a", timestamp=-1)
    b.append(b"k", None, timestamp=-1)
    cols = decode_columns(b.build())
    assert list(cols.timestamp_type) == [-1, -1] and list(cols.timestamp) == [-1, -1]
    assert list(cols.offset) == [3, 4] and list(cols.producer_id) == [-1, -1]
    assert list(cols.partition_leader_epoch) == [-1, -1]


def test_log_append_time_reports_the_append_time():
    b = RecordBatchBuilder(2, Compression.LZ4, TimestampType.LOG_APPEND_TIME, log_append_time=99_000)
    for t in (1, 2, 3):
        b.append(None, b"x", timestamp=t)
    cols = decode_columns(b.build())
    assert list(cols.timestamp) == [99_000] * 3 and list(cols.timestamp_type) == [1] * 3


@pytest.mark.parametrize("base_offset,base_ts,ts_delta,offset_delta", [
    (0, INT64_MAX - 3, 10, 0),  # timestamp past int64
    (0, -INT64_MAX, -10, 0),  # timestamp below int64
    (INT64_MAX - 1, 0, 0, 5),  # offset past int64
])
def test_offset_and_timestamp_overflow_is_an_error(base_offset, base_ts, ts_delta, offset_delta):
    """A base near the int64 limit plus a delta that leaves the range: Java's long arithmetic
    would wrap; kafkalog refuses the record (the iterator and the columns alike, both cores)."""
    payload = encode_record(offset_delta, ts_delta, None, b"v")
    buf = encode_batch(payload, count=1, base_offset=base_offset, last_offset_delta=offset_delta,
                       base_timestamp=base_ts, max_timestamp=0)
    for compiled in (True, False):
        with walk(compiled):
            with pytest.raises(InvalidRecordError, match="overflows int64"):
                list(MemoryRecords(buf).records())
            for on in (False, True):
                with plain(on):
                    with pytest.raises(InvalidRecordError, match="overflows int64"):
                        decode_columns(MemoryRecords(buf))


def test_non_minimal_varints_decode_the_same():
    """Varints padded with continuation bytes (legal, never written) on every field."""
    body = (
        b"\x00"  # attributes
        + b"\x84\x80\x00"  # timestamp delta 2, three bytes
        + b"\x82\x00"  # offset delta 1, two bytes
        + b"\x86\x80\x80\x00" + b"abc"  # key length 3, four bytes
        + b"\x81\x80\x80\x80\x00"  # null value, five bytes
        + b"\x82\x00"  # one header, two bytes
        + b"\x82\x80\x00" + b"h" + b"\x84\x00" + b"vv"
    )
    assert len(body) < 64
    padded_length = bytes([(len(body) * 2) | 0x80, 0x00])  # the record length in two bytes
    payload = encode_varint(len(body)) + body + padded_length + body
    buf = encode_batch(payload, count=2, base_offset=0, last_offset_delta=1, base_timestamp=100, max_timestamp=0)
    mr = MemoryRecords(buf)
    want = iterator_rows(mr.batches())
    assert want[0][3] == b"abc" and want[0][5] == (Header("h", b"vv"),)
    assert column_rows(decode_columns(mr)) == want


def test_invalid_utf8_header_keys_are_replaced_as_the_iterator_does():
    # The second and third keys split one valid two-byte character between them.
    keys = [b"ok", b"a\xc3", b"\xa9b", b"\xff\xfe", b"\xed\xa0\x80", "\u00e9t\u00e9".encode()]
    headers = b"".join(encode_varint(len(k)) + k + encode_varint(-1) for k in keys)
    body = b"\x00\x00\x00" + encode_varint(-1) + encode_varint(-1) + encode_varint(len(keys)) + headers
    payload = encode_varint(len(body)) + body
    buf = encode_batch(payload, count=1, base_offset=0, last_offset_delta=0, base_timestamp=0, max_timestamp=0)
    mr = MemoryRecords(buf)
    want = iterator_rows(mr.batches())
    assert [h.key for h in want[0][5]][1:3] == ["a\ufffd", "\ufffdb"]
    assert column_rows(decode_columns(mr)) == want
    # The same keys on 40 records: the vectorised header levels take them.
    mr40 = MemoryRecords(
        encode_batch(payload * 40, count=40, base_offset=0, last_offset_delta=39, base_timestamp=0, max_timestamp=0)
    )
    cols = decode_columns(mr40)
    assert [r[5] for r in column_rows(cols)] == [r[5] for r in iterator_rows(mr40.batches())]
    # A key that splits a character across a record boundary (valid buffer, invalid keys).
    split = [b"x\xe2\x82", b"\xacy"]
    heads = [encode_varint(1) + encode_varint(len(k)) + k + encode_varint(-1) for k in split]
    bodies = [b"\x00\x00" + encode_varint(i) + encode_varint(-1) + encode_varint(-1) + h for i, h in enumerate(heads)]
    payload = b"".join(encode_varint(len(b)) + b for b in bodies)
    mr2 = MemoryRecords(encode_batch(payload, count=2, base_offset=0, last_offset_delta=1, base_timestamp=0,
                                     max_timestamp=0))
    assert column_rows(decode_columns(mr2)) == iterator_rows(mr2.batches())


def test_empty_inputs():
    assert len(decode_columns(MemoryRecords(b""))) == 0
    assert len(decode_columns([])) == 0
    empty = encode_batch(b"", count=0, base_offset=5, last_offset_delta=3, base_timestamp=0, max_timestamp=0)
    cols = decode_columns(MemoryRecords(empty))
    assert len(cols) == 0 and list(cols.key_offsets) == [0] and list(cols.header_offsets) == [0]
    marker = RecordBatchBuilder.end_transaction_marker(
        ControlRecordType.ABORT, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=0
    )
    assert len(decode_columns(marker)) == 0
    assert len(decode_columns(marker, include_control=True)) == 1


def test_max_records_stops_reading():
    """Batches after the one that reaches max_records are not read: a corrupt one is not seen."""
    good = RecordBatchBuilder(2, base_offset=0)
    for i in range(3):
        good.append(None, b"%d" % i, timestamp=i)
    bad = bytearray(good.build().buffer)
    bad[-1] ^= 0xFF
    buf = bytes(good.build().buffer) + bytes(bad)
    assert list(decode_columns(MemoryRecords(buf), max_records=2).offset) == [0, 1]
    assert list(decode_columns(MemoryRecords(buf), max_records=3).offset) == [0, 1, 2]
    assert len(decode_columns(MemoryRecords(buf), max_records=0)) == 0
    with pytest.raises(CorruptRecordError):
        decode_columns(MemoryRecords(buf), max_records=4)
    with pytest.raises(ValueError):
        decode_columns(MemoryRecords(buf), max_records=-1)


def test_slice_and_concat_round_trip():
    b = RecordBatchBuilder(2, Compression.ZSTD)
    for i in range(20):
        b.append(b"k" * (i % 4) if i % 5 else None, b"v" * i if i % 3 else None, timestamp=i,
                 headers=[("h", b"%d" % j) for j in range(i % 3)])
    cols = decode_columns(b.build())
    rows = column_rows(cols)
    parts = [cols.slice(0, 7), cols.slice(7, 7), cols.slice(7, 13), cols.slice(13)]
    assert [column_rows(p) for p in parts] == [rows[:7], [], rows[7:13], rows[13:]]
    assert column_rows(RecordColumns.concat(parts)) == rows
    without = decode_columns(b.build(), include_headers=False)
    assert not without.has_headers and without.header_offsets is None
    assert column_rows(RecordColumns.concat([without.slice(0, 5), without.slice(5)])) == column_rows(without)
    with pytest.raises(ValueError):
        RecordColumns.concat([cols, without])


# ------------------------------------------------------------------------------------------------
# Kafka's own files


def _corpus_segments() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.is_dir()) if CORPUS.is_dir() else []


def _kafka_records(log: Path) -> list[dict]:
    """Kafka's reading of ``log``: its ``record`` lines (see the corpus MANIFEST)."""
    expected = log.with_name(f"{log.stem}.expected.jsonl")
    if not expected.exists():
        expected = log.with_name(f"{log.stem}.expected.jsonl.gz")
    opener = gzip.open if expected.suffix == ".gz" else open
    with opener(expected, "rt", encoding="utf-8") as fh:
        return [obj for obj in map(json.loads, fh) if obj.get("type") == "record"]


@pytest.mark.parametrize("segment", _corpus_segments(), ids=lambda p: p.name)
def test_kafka_38_segments(segment):
    """Every segment Kafka 3.8 wrote: the columns equal the Record iterator and Kafka's reading."""
    (log,) = segment.glob("*.log")
    with FileRecords.open(log) as fr:
        cols = decode_columns(fr, include_control=True)
        rows = column_rows(cols)
        assert rows == iterator_rows(fr.batches(), include_control=True)
        assert column_rows(decode_columns(fr, include_control=True, validate=False)) == rows
    mr = MemoryRecords(log.read_bytes())
    with plain():
        assert column_rows(decode_columns(mr, include_control=True)) == rows
    kafka = _kafka_records(log)
    assert len(kafka) == len(rows)

    def hex_or_none(b):
        return None if b is None else b.hex()

    for row, k in zip(rows, kafka):
        assert (row[0], row[1], hex_or_none(row[3]), hex_or_none(row[4])) == (
            k["offset"], k["timestamp"], k["key"], k["value"]
        )
        assert [[h.key, hex_or_none(h.value)] for h in row[5]] == k["headers"]
        assert row[6] == ("controlType" in k and k["controlType"] is not None)


def _real_files() -> list[Path]:
    if not REAL.is_dir():
        return []
    return sorted(p for p in REAL.rglob("*") if p.name.endswith((".log", ".log.swap")))


@pytest.mark.parametrize("path", _real_files(), ids=lambda p: str(p.relative_to(REAL)))
def test_real_broker_files(path):
    with FileRecords.open(path) as fr:
        for include_control in (False, True):
            want = iterator_rows(fr.batches(), include_control=include_control)
            assert column_rows(decode_columns(fr, include_control=include_control)) == want


# ------------------------------------------------------------------------------------------------
# Damaged and hostile bytes


def _mixed_run() -> bytes:
    """A small run of every kind: v2 plain and lz4 with headers, a marker, a v1 gzip wrapper, v0."""
    parts = []
    for codec, base in ((Compression.NONE, 0), (Compression.LZ4, 3)):
        b = RecordBatchBuilder(2, codec, base_offset=base, producer_id=4, producer_epoch=0, base_sequence=base,
                               is_transactional=True)
        for i in range(3):
            b.append(b"k%d" % i, b"value-%d" % i if i != 1 else None, timestamp=100 + i, headers=[("h", b"x")] * i)
        parts.append(b.build().buffer)
    parts.append(RecordBatchBuilder.end_transaction_marker(
        ControlRecordType.COMMIT, producer_id=4, producer_epoch=0, coordinator_epoch=1, timestamp=200, base_offset=6
    ).buffer)
    v1 = RecordBatchBuilder(1, Compression.GZIP, base_offset=7)
    v1.append(None, b"legacy", timestamp=300)
    v1.append(b"k", b"legacy2", timestamp=301)
    parts.append(v1.build().buffer)
    v0 = RecordBatchBuilder(0, base_offset=9)
    v0.append(b"k0", b"v0", timestamp=-1)
    parts.append(v0.build().buffer)
    return b"".join(bytes(p) for p in parts)


def _validated_iterator(records):
    return lambda: iterator_rows(records.batches(validate=True), include_control=True)


def _columns(records, **kw):
    return lambda: column_rows(decode_columns(records, include_control=True, **kw))


def test_bit_flips_raise_what_the_iterator_raises(tmp_path):
    """A flipped bit anywhere: with validate=True the outcome (rows, or error type, file,
    position and message) is the validated iterator's -- mostly a CorruptRecordError."""
    buf = _mixed_run()
    path = tmp_path / "flipped.log"
    corrupt = 0
    for byte in range(len(buf)):
        flipped = bytearray(buf)
        flipped[byte] ^= 1 << (byte % 8)
        mr = MemoryRecords(bytes(flipped))
        want = outcome(_validated_iterator(mr))
        assert outcome(_columns(mr)) == want, byte
        if byte % 3 == 0:
            with tiny_chunks():
                assert outcome(_columns(mr)) == want, byte
            assert outcome(_columns(mr.batches())) == want, byte
        corrupt += want[0] is CorruptRecordError
        if byte % 7 == 0:
            path.write_bytes(flipped)
            with FileRecords.open(path) as fr:
                assert outcome(_columns(fr)) == outcome(_validated_iterator(fr)), byte
    assert corrupt > len(buf) // 2


def _recrc(buf: bytearray, start: int) -> None:
    (length,) = struct.unpack_from(">i", buf, start + 8)
    struct.pack_into(">I", buf, start + 17, crc32c(bytes(buf[start + 21 : start + 12 + length])))


def _v2_run(counts=(5, 48, 5)) -> tuple[bytes, list[tuple[int, int]]]:
    """Uncompressed v2 batches (the middle one with enough header records for the vectorised
    header levels) and their (start, end)."""
    parts, bounds, pos = [], [], 0
    for j, count in enumerate(counts):
        b = RecordBatchBuilder(2, base_offset=100 * j)
        for i in range(count):
            b.append(b"key" if i % 2 else None, b"v" * (i % 7 * 3) if i != 2 else None, timestamp=1000 * i,
                     headers=[("hk", b"hv"), ("n", None)][: 1 + i % 2] if i % 4 else [])
        part = bytes(b.build().buffer)
        parts.append(part)
        bounds.append((pos, pos + len(part)))
        pos += len(part)
    return b"".join(parts), bounds


@given(data=st.data())
@examples(300)
def test_damaged_records_with_a_good_crc(data):
    """Bytes inside the records changed, removed or added and the CRC recomputed (and the
    length fixed): only the record decoder can object, and the columns must fail (or not)
    exactly as the iterator does -- with or without validation, fast path or plain."""
    buf, bounds = _v2_run()
    which = data.draw(st.integers(0, len(bounds) - 1))
    start, end = bounds[which]
    damaged = bytearray(buf)
    at = data.draw(st.integers(start + 61, end - 1))
    action = data.draw(st.sampled_from(["set", "set", "insert", "delete", "count"]))
    if action == "set":
        damaged[at] = data.draw(st.integers(0, 255))
    elif action == "insert":
        damaged[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    elif action == "delete":
        del damaged[at : at + data.draw(st.integers(1, 3))]
    else:
        struct.pack_into(">i", damaged, start + 57, data.draw(st.integers(-3, 12)))
    size = end - start + len(damaged) - len(buf)
    struct.pack_into(">i", damaged, start + 8, size - 12)
    _recrc(damaged, start)
    mr = MemoryRecords(bytes(damaged))
    want = outcome(_validated_iterator(mr))
    assert outcome(_columns(mr)) == want
    assert outcome(_columns(mr, validate=False)) == outcome(lambda: iterator_rows(mr.batches(), include_control=True))
    with plain():
        assert outcome(_columns(mr)) == want
    for compiled in (True, False):
        with walk(compiled):
            assert outcome(_columns(mr)) == want
    with tiny_chunks(), numpy_gather():
        assert outcome(_columns(mr)) == want


def _record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


_PREFIX = b"\x00" + encode_varlong(0) + encode_varint(0)
_NULL = encode_varint(-1)
_NO_KV = _PREFIX + _NULL + _NULL
BAD_RECORDS = {
    "length-negative": encode_varint(-1) + b"\x00" * 6,
    "length-past-batch": encode_varint(50) + _NO_KV + b"\x00",
    "length-6-byte-varint": b"\x86\x80\x80\x80\x80\x00" + _NO_KV + b"\x00",
    "length-overflows-32-bits": b"\x8c\x80\x80\x80\x7f" + _NO_KV + b"\x00",
    "timestamp-11-byte-varlong": _record(b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00" + _NULL + _NULL + b"\x00"),
    "timestamp-overflows-64-bits": _record(b"\x00" + b"\xff" * 9 + b"\x02" + b"\x00" + _NULL + _NULL + b"\x00"),
    "offset-delta-overflows-32-bits": _record(b"\x00\x00" + b"\xff" * 4 + b"\x10" + _NULL + _NULL + b"\x00"),
    "key-length-minus-2": _record(_PREFIX + encode_varint(-2) + _NULL + b"\x00"),
    "key-length-past-record": _record(_PREFIX + encode_varint(100) + b"abc" + _NULL + b"\x00"),
    "value-length-past-record": _record(_PREFIX + _NULL + encode_varint(40) + b"abc" + b"\x00"),
    "header-count-int32-max": _record(_NO_KV + encode_varint(INT32_MAX) + b"\x00" * 8),
    "header-count-negative": _record(_NO_KV + encode_varint(-5)),
    "header-count-more-than-present": _record(_NO_KV + encode_varint(3) + encode_varint(1) + b"h" + _NULL),
    "header-key-null": _record(_NO_KV + encode_varint(1) + _NULL + _NULL),
    "header-value-minus-2": _record(_NO_KV + encode_varint(1) + encode_varint(1) + b"h" + encode_varint(-2)),
    "bytes-after-header": _record(_NO_KV + encode_varint(1) + encode_varint(1) + b"h" + _NULL + b"zz"),
    "field-runs-past-batch-end": _record(b"\x00" + b"\x80" * 5),
}


@pytest.mark.parametrize("name", sorted(BAD_RECORDS))
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
@pytest.mark.parametrize("position", ["alone", "among-good-records"])
def test_bad_records_raise_the_iterator_error(name, codec, position, tmp_path):
    good = encode_record(0, 0, b"k", b"v", [("h", b"x")])
    bad = BAD_RECORDS[name]
    payload = bad if position == "alone" else good * 40 + bad
    count = 1 if position == "alone" else 41
    buf = encode_batch(good * 3, count=3, base_offset=0, last_offset_delta=2, base_timestamp=0, max_timestamp=0)
    buf += encode_batch(payload, count=count, base_offset=3, last_offset_delta=count - 1, base_timestamp=0,
                        max_timestamp=0, compression=codec)
    path = tmp_path / "bad.log"
    path.write_bytes(buf)
    with FileRecords.open(path) as fr:
        for records in (MemoryRecords(buf), fr):
            want = outcome(_validated_iterator(records))
            assert want[0] is InvalidRecordError, want
            assert outcome(_columns(records)) == want
            for compiled in (True, False):
                with walk(compiled):
                    assert outcome(_columns(records)) == want


def test_hostile_counts_allocate_nothing_large():
    """A record count of 2**31-1 (plain and compressed) and a header count of 2**30 are
    refused with the iterator's error before anything in proportion to them is allocated."""
    record = encode_record(0, 0, None, b"v")
    cases = [
        encode_batch(record, count=INT32_MAX, base_offset=0, last_offset_delta=INT32_MAX, base_timestamp=0,
                     max_timestamp=0),
        encode_batch(record * 100, count=INT32_MAX, base_offset=0, last_offset_delta=INT32_MAX, base_timestamp=0,
                     max_timestamp=0, compression=Compression.GZIP),
        encode_batch(_record(_NO_KV + encode_varint(2**30) + b"\x02h\x01" * 3), count=1, base_offset=0,
                     last_offset_delta=0, base_timestamp=0, max_timestamp=0),
    ]
    for buf in cases:
        mr = MemoryRecords(buf)
        for validate in (True, False):
            iterate = _validated_iterator(mr) if validate else (lambda: iterator_rows(mr.batches()))
            want = outcome(iterate)
            assert want[0] is InvalidRecordError, want
            tracemalloc.start()
            try:
                got = outcome(_columns(mr, validate=validate))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert got == want
            assert peak < 1 << 20, peak


def test_truncated_batches_raise_truncated_errors(tmp_path):
    buf, bounds = _v2_run()
    # A partial batch at the end of the data ends the run, as shallow iteration does.
    cut = MemoryRecords(buf[: bounds[1][1] + 30])
    assert column_rows(decode_columns(cut)) == iterator_rows(cut.batches())
    # A batch whose bytes are not all there.
    short = DefaultRecordBatch(buf[:100])
    want = outcome(lambda: short.records())
    assert want[0] is TruncatedRecordError
    assert outcome(lambda: decode_columns([short], validate=False)) == want
    # A file that shrinks under batches read shallowly (their bodies are read on demand).
    path = tmp_path / "shrinking.log"
    path.write_bytes(buf)
    with FileRecords.open(path) as fr:
        batches = list(fr.batches())
        os.truncate(path, bounds[1][0] + 70)
        want = outcome(lambda: iterator_rows(batches))
        assert want[0] is TruncatedRecordError and want[1] == str(path)
        assert outcome(lambda: column_rows(decode_columns(batches, validate=False))) == want


def test_errors_come_in_batch_order():
    """A bad record in batch 0 (good CRC) is reported before a CRC error in batch 2."""
    buf, bounds = _v2_run()
    damaged = bytearray(buf)
    damaged[bounds[0][0] + 61] = 0x7F  # first record's length: negative
    _recrc(damaged, bounds[0][0])
    damaged[bounds[2][1] - 1] ^= 0xFF  # batch 2's CRC no longer matches
    mr = MemoryRecords(bytes(damaged))
    want = outcome(_validated_iterator(mr))
    assert want[0] is InvalidRecordError
    assert outcome(_columns(mr)) == want


# ------------------------------------------------------------------------------------------------
# Arrow


def _arrow_rows(batch, pa) -> list[tuple]:
    """(offset, timestamp in us, timestamp type, key, value, headers) from an Arrow batch."""
    columns = [
        batch.column("offset").to_pylist(),
        batch.column("timestamp").cast(pa.int64()).to_pylist(),
        batch.column("timestamp_type").to_pylist(),
        batch.column("key").to_pylist(),
        batch.column("value").to_pylist(),
        [None if hs is None else tuple(Header(h["key"], h["value"]) for h in hs)
         for hs in batch.column("headers").to_pylist()],
    ]
    return list(zip(*columns))


ARROW_CASES = [(0, Compression.NONE), (1, Compression.SNAPPY), (2, Compression.NONE), (2, Compression.ZSTD)]


@pytest.mark.parametrize("magic,codec", ARROW_CASES, ids=[f"v{m}-{c.kafka_name}" for m, c in ARROW_CASES])
@given(data=st.data())
@examples(20)
def test_arrow_matches_the_columns(magic, codec, data):
    pa = pytest.importorskip("pyarrow")
    buf = data.draw(runs(magic, codec))
    cols = decode_columns(MemoryRecords(buf), include_control=True)
    rb = cols.to_arrow()
    assert rb.schema == arrow_schema()
    rows = column_rows(cols)
    assert _arrow_rows(rb, pa) == [(o, ts * 1000, tt, k, v, hs or None) for o, ts, tt, k, v, hs, *_ in rows]
    rb.validate(full=True)
    extra = cols.to_arrow(["is_control", "producer_id", "partition_leader_epoch", "batch_index"])
    assert extra.to_pylist() == [
        dict(is_control=r[6], producer_id=r[7], partition_leader_epoch=r[8], batch_index=r[9]) for r in rows
    ]


def test_arrow_types_and_names_are_exact():
    pa = pytest.importorskip("pyarrow")
    b = RecordBatchBuilder(2)
    b.append(b"k", b"v", timestamp=1_700_000_000_123, headers=[("a", b"1"), ("b", None)])
    b.append(None, None, timestamp=5)
    b.append(b"", b"", timestamp=6, headers=[])
    cols = decode_columns(b.build())
    rb = cols.to_arrow(names={"timestamp_type": "timestampType"})
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    assert rb.schema == pa.schema([
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", header_type),
    ])
    assert rb.column("headers").to_pylist() == [[{"key": "a", "value": b"1"}, {"key": "b", "value": None}], None, None]
    assert rb.column("key").to_pylist() == [b"k", None, b""]
    assert rb.column("value").null_count == 1
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [1_700_000_000_123_000, 5000, 6000]
    large = cols.to_arrow(large=True)
    assert large.schema.field("key").type == pa.large_binary()
    assert large.schema.field("headers").type == pa.large_list(
        pa.struct([("key", pa.large_string()), ("value", pa.large_binary())])
    )
    assert large.to_pylist() == cols.to_arrow().to_pylist()
    assert arrow_type("batch_index") == pa.int64() and arrow_type("is_control") == pa.bool_()
    with pytest.raises(ValueError):
        arrow_type("topic")
    no_headers = decode_columns(b.build(), include_headers=False)
    assert "headers" not in no_headers.to_arrow().schema.names
    with pytest.raises(ValueError):
        no_headers.arrow_array("headers")


def test_arrow_shares_the_numpy_buffers():
    """Arrow arrays are built from the column buffers: no copy of the data, no Python objects."""
    pytest.importorskip("pyarrow")
    b = RecordBatchBuilder(2, Compression.LZ4)
    for i in range(100):
        b.append(b"key-%d" % i, b"value" * i if i % 9 else None, timestamp=i, headers=[("h", b"%d" % i)])
    cols = decode_columns(b.build())
    value = cols.arrow_array("value")
    assert value.buffers()[2].address == cols.value_data.ctypes.data
    assert cols.arrow_array("offset").buffers()[1].address == cols.offset.ctypes.data
    headers = cols.arrow_array("headers")
    assert headers.values.field(1).buffers()[2].address == cols.header_value_data.ctypes.data


def test_arrow_refuses_what_it_cannot_hold():
    pytest.importorskip("pyarrow")
    buf = encode_batch(encode_record(0, 0, None, b"v"), count=1, base_offset=0, last_offset_delta=0,
                       base_timestamp=INT64_MAX // 100, max_timestamp=0)
    cols = decode_columns(MemoryRecords(buf))
    with pytest.raises(OverflowError, match="microseconds"):
        cols.to_arrow()
    assert cols.to_arrow(["offset", "value"]).num_rows == 1


def test_module_imports_without_pyarrow():
    """Decoding needs numpy only; asking for Arrow without pyarrow says how to get it."""
    code = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "from kafkalog import RecordBatchBuilder\n"
        "from kafkalog.columnar.decode import decode_columns\n"
        "b = RecordBatchBuilder(); b.append(b'k', b'v', timestamp=1)\n"
        "cols = decode_columns(b.build()); assert len(cols) == 1\n"
        "try:\n    cols.to_arrow()\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install" in out.stdout
