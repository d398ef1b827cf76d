"""Round trips through the records layer for every magic x codec.

Hypothesis builds runs of batches (keys and values None, empty, small or ~100 KB compressible;
CreateTime and LogAppendTime; v2 headers, producer state with sequence wrap-around,
transactions, control markers, offset gaps), encodes them with ``RecordBatchBuilder`` and reads
them back through ``MemoryRecords`` and ``FileRecords``, field by field. ``st.data()`` cuts the
bytes at an arbitrary point to check how a partial tail is handled. Further tests cover the v0/v1
compressed-wrapper offset rules and the ``FileRecords`` views: ``slice``, ``read`` and
``transfer_to`` (``os.sendfile`` and the plain fallback).
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from conftest import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafkalog import (
    Compression,
    ControlRecordType,
    FileRecords,
    Header,
    InvalidOffsetError,
    MemoryRecords,
    RecordBatchBuilder,
    TimestampType,
    TruncatedRecordError,
)
from kafkalog.compression import compress
from kafkalog.legacy_record import encode_message

INT32_MAX = 2**31 - 1
#: ~100 KB that every codec shrinks a lot (several xerial-snappy blocks and lz4 blocks).
BIG = b"kafkalog round trip " * 5000

# magic_codec is a plain (magic, codec) tuple and tmp_path is only overwritten, never relied on
# to be fresh, so sharing them across hypothesis examples is safe.
_FIXTURE_OK = settings(
    suppress_health_check=list(settings.default.suppress_health_check) + [HealthCheck.function_scoped_fixture]
)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``, written out independently."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


# ------------------------------------------------------------------------------------------------
# Strategies and the expected reading of what was built


@dataclass
class BatchSpec:
    """One builder's worth of records and the batch-level settings."""

    base_offset: int
    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[tuple[str, bytes | None]]]
    log_append_time: int | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False
    partition_leader_epoch: int = -1
    marker: ControlRecordType | None = None  # an end-transaction marker instead of records
    coordinator_epoch: int = 0

    @property
    def last_offset(self) -> int:
        return self.offsets[-1]


blobs = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(min_size=1, max_size=24),
    st.just(BIG),
)
timestamps = st.one_of(st.just(-1), st.integers(0, 2**41), st.integers(0, 5000))
header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))),
    max_size=4,
) | st.builds(
    lambda n: [(f"h{i}-\u00fc\u4e2d", None if i % 3 == 0 else bytes([i % 256])) for i in range(n)],
    st.integers(60, 300),
)
sequences = st.one_of(
    st.just(-1),
    st.integers(0, 1000),
    st.integers(INT32_MAX - 8, INT32_MAX),
    st.integers(0, INT32_MAX),
)


@st.composite
def batch_specs(draw, magic: int, start_offset: int) -> BatchSpec:
    n = draw(st.integers(1, 5))
    base = start_offset + draw(st.integers(0, 3))
    gaps = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    offsets = []
    cur = base + gaps[0] if magic == 2 else base  # v2: the first record may sit above base_offset
    for i in range(n):
        if i:
            cur += 1 + gaps[i]
        offsets.append(cur)
    keys = draw(st.lists(blobs, min_size=n, max_size=n))
    values = draw(st.lists(blobs, min_size=n, max_size=n))
    # Keep one example below a few hundred KB: at most two big blobs per batch.
    bigs = itertools.count()
    keys = [b"big-key" if b is BIG and next(bigs) >= 1 else b for b in keys]
    values = [b"big-value" if b is BIG and next(bigs) >= 2 else b for b in values]
    ts = draw(st.lists(timestamps, min_size=n, max_size=n))
    headers = [draw(header_lists) if magic == 2 else [] for _ in range(n)]
    spec = BatchSpec(base, offsets, ts, keys, values, headers)
    if magic > 0 and draw(st.booleans()):
        spec.log_append_time = draw(st.integers(0, 2**41))
    if magic == 2:
        spec.partition_leader_epoch = draw(st.sampled_from([-1, 0, 7, INT32_MAX]))
        if draw(st.booleans()):
            spec.producer_id = draw(st.integers(0, 2**63 - 1))
            spec.producer_epoch = draw(st.integers(0, 2**15 - 1))
            spec.base_sequence = draw(sequences)
            spec.is_transactional = draw(st.booleans())
    return spec


@st.composite
def runs(draw, magic: int):
    """Several batch specs with increasing offsets, sometimes ending in a transaction marker."""
    specs = []
    start = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(1, 3))):
        spec = draw(batch_specs(magic, start))
        specs.append(spec)
        start = spec.last_offset + 1
    if magic == 2 and draw(st.booleans()):
        marker = BatchSpec(
            base_offset=start,
            offsets=[start],
            timestamps=[draw(st.integers(0, 2**41))],
            keys=[None],
            values=[None],
            headers=[[]],
            producer_id=draw(st.integers(0, 2**40)),
            producer_epoch=draw(st.integers(0, 100)),
            is_transactional=True,
            partition_leader_epoch=draw(st.sampled_from([-1, 3])),
            marker=draw(st.sampled_from([ControlRecordType.ABORT, ControlRecordType.COMMIT])),
            coordinator_epoch=draw(st.integers(-(2**31), INT32_MAX)),
        )
        specs.append(marker)
    return specs


def build(spec: BatchSpec, magic: int, codec: Compression) -> bytes:
    if spec.marker is not None:
        return RecordBatchBuilder.end_transaction_marker(
            spec.marker,
            producer_id=spec.producer_id,
            producer_epoch=spec.producer_epoch,
            coordinator_epoch=spec.coordinator_epoch,
            timestamp=spec.timestamps[0],
            base_offset=spec.base_offset,
            partition_leader_epoch=spec.partition_leader_epoch,
        ).buffer
    lat = spec.log_append_time is not None
    b = RecordBatchBuilder(
        magic=magic,
        compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
        base_offset=spec.base_offset,
        producer_id=spec.producer_id,
        producer_epoch=spec.producer_epoch,
        base_sequence=spec.base_sequence,
        is_transactional=spec.is_transactional,
        partition_leader_epoch=spec.partition_leader_epoch,
        log_append_time=spec.log_append_time,
    )
    for off, ts, k, v, h in zip(spec.offsets, spec.timestamps, spec.keys, spec.values, spec.headers):
        assert b.append(k, v, timestamp=ts, headers=h, offset=off) == off
    return bytes(b.build().buffer)


@dataclass
class Expected:
    """What one top-level entry must read back as."""

    start: int
    size: int
    fields: dict
    records: list[tuple]
    marker: tuple | None = None  # (control type, coordinator epoch) of a transaction marker


def expected_entries(spec: BatchSpec, magic: int, codec: Compression, encoded: bytes, start: int) -> list[Expected]:
    """The entries ``encoded`` must hold: one v2 batch, one v0/v1 wrapper, or (v0/v1 without a
    codec) one plain message per record. Sizes are read from the size fields only."""
    lat = spec.log_append_time is not None

    def reported_ts(ts: int) -> int:
        if magic == 0:
            return -1
        return spec.log_append_time if lat else ts

    def seq(off: int) -> int:
        if magic < 2 or spec.base_sequence < 0:
            return -1
        return increment_sequence(spec.base_sequence, off - spec.base_offset)

    recs = [
        (off, reported_ts(ts), k, v, tuple(Header(hk, hv) for hk, hv in h), seq(off))
        for off, ts, k, v, h in zip(spec.offsets, spec.timestamps, spec.keys, spec.values, spec.headers)
    ]
    if spec.marker is not None:
        recs = [(spec.offsets[0], spec.timestamps[0], None, None, (), -1)]  # key/value checked apart
    ts_type = (
        TimestampType.NO_TIMESTAMP_TYPE
        if magic == 0
        else TimestampType.LOG_APPEND_TIME
        if lat
        else TimestampType.CREATE_TIME
    )
    max_ts = -1 if magic == 0 else spec.log_append_time if lat else max(spec.timestamps)
    common = dict(magic=magic, timestamp_type=ts_type)
    if magic == 2:
        delta = spec.last_offset - spec.base_offset
        fields = dict(
            common,
            base_offset=spec.base_offset,
            last_offset=spec.last_offset,
            count=len(recs),
            compression=Compression.NONE if spec.marker is not None else codec,
            base_timestamp=spec.timestamps[0],
            max_timestamp=spec.timestamps[0] if spec.marker is not None else max_ts,
            producer_id=spec.producer_id,
            producer_epoch=spec.producer_epoch,
            base_sequence=spec.base_sequence,
            last_sequence=-1 if spec.base_sequence < 0 else increment_sequence(spec.base_sequence, delta),
            is_transactional=spec.is_transactional,
            is_control=spec.marker is not None,
            partition_leader_epoch=spec.partition_leader_epoch,
            delete_horizon_ms=None,
        )
        marker = None if spec.marker is None else (spec.marker, spec.coordinator_epoch)
        return [Expected(start, len(encoded), fields, recs, marker)]
    legacy = dict(
        common,
        count=None,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        last_sequence=-1,
        is_transactional=False,
        is_control=False,
        partition_leader_epoch=-1,
        delete_horizon_ms=None,
        compression=codec,
    )
    if codec is not Compression.NONE:
        fields = dict(legacy, base_offset=spec.offsets[0], last_offset=spec.last_offset, max_timestamp=max_ts)
        return [Expected(start, len(encoded), fields, recs)]
    out = []
    pos = start
    for rec in recs:
        size = int.from_bytes(encoded[pos - start + 8 : pos - start + 12], "big", signed=True) + 12
        fields = dict(legacy, base_offset=rec[0], last_offset=rec[0], max_timestamp=rec[1], base_timestamp=rec[1])
        out.append(Expected(pos, size, fields, [rec]))
        pos += size
    assert pos - start == len(encoded)
    return out


def check_batches(batches, expected: list[Expected], *, in_file: bool, shift: int = 0) -> None:
    """Compare shallow batches (and their records) with the expected entries."""
    assert len(batches) == len(expected)
    for batch, exp in zip(batches, expected):
        assert batch.size_in_bytes == exp.size
        assert batch.position == ((exp.start + shift) if in_file else None)
        for name, value in exp.fields.items():
            assert getattr(batch, name) == value, name
        assert batch.is_valid()
        batch.ensure_valid(deep=True)
        got = batch.records()
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in got if not r.is_control] == [
            r for r in exp.records if not batch.is_control
        ]
        if exp.marker is not None:
            (marker,) = got
            assert marker.is_control
            assert (marker.offset, marker.timestamp, marker.sequence) == exp.records[0][:2] + (-1,)
            assert (marker.control_type, marker.coordinator_epoch) == exp.marker
        else:
            assert all(not r.is_control and r.control_type is None and r.coordinator_epoch is None for r in got)
        if batch.magic < 2:
            assert all(r.crc is not None and r.headers == () for r in got)
            if batch.compression is Compression.NONE:
                (only,) = got
                assert (only.crc, only.size_in_bytes) == (batch.crc, batch.size_in_bytes)
        else:
            assert all(r.crc is None for r in got)
            if batch.compression is Compression.NONE:
                assert sum(r.size_in_bytes for r in got) == batch.size_in_bytes - 61


def encode_run(specs: list[BatchSpec], magic: int, codec: Compression) -> tuple[bytes, list[Expected]]:
    parts, expected, pos = [], [], 0
    for spec in specs:
        encoded = build(spec, magic, codec)
        expected += expected_entries(spec, magic, codec, encoded, pos)
        parts.append(encoded)
        pos += len(encoded)
    return b"".join(parts), expected


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def check_cut(records_obj, expected: list[Expected], cut: int, *, in_file: bool) -> None:
    """The shared checks for data cut after ``cut`` bytes."""
    whole = [e for e in expected if e.start + e.size <= cut]
    end_of_whole = whole[-1].start + whole[-1].size if whole else 0
    batches = list(records_obj.batches())
    assert [(b.size_in_bytes, b.base_offset) for b in batches] == [(e.size, e.fields["base_offset"]) for e in whole]
    if in_file:
        assert [b.position for b in batches] == [e.start for e in whole]
    assert records_obj.valid_bytes == end_of_whole
    assert records_obj.size_in_bytes == cut
    if cut == end_of_whole:
        assert records_obj.validate(deep=True) == len(whole)
        assert len(list(records_obj.batches(strict=True))) == len(whole)
    else:
        with pytest.raises(TruncatedRecordError) as info:
            records_obj.validate()
        assert info.value.position == end_of_whole
        with pytest.raises(TruncatedRecordError) as info:
            list(records_obj.batches(strict=True))
        assert info.value.position == end_of_whole
        with pytest.raises(TruncatedRecordError):
            list(records_obj.batches(validate=True, strict=True))
        # Non-strict iteration, validated or not, still stops cleanly at the tail.
        assert len(list(records_obj.batches(validate=True))) == len(whole)
        assert len(list(records_obj.records())) == sum(len(e.records) for e in whole)


# ------------------------------------------------------------------------------------------------
# Round trips


@_FIXTURE_OK
@given(data=st.data())
def test_round_trip_memory_and_file(magic_codec, tmp_path, data):
    """Every field written by the builder reads back the same from memory and from a file,
    batch positions match the file, and a cut at any byte leaves exactly the whole batches."""
    magic, codec = magic_codec
    specs = data.draw(runs(magic), label="specs")
    buf, expected = encode_run(specs, magic, codec)

    for buffer in (buf, bytearray(buf), memoryview(buf)):
        mr = MemoryRecords(buffer)
        assert mr.size_in_bytes == len(buf)
        assert mr.valid_bytes == len(buf)
        assert mr.validate(deep=True) == len(expected)
        check_batches(list(mr.batches()), expected, in_file=False)
        check_batches(list(mr.batches(validate=True, strict=True)), expected, in_file=False)
        assert [r.offset for r in mr.records()] == [r[0] for e in expected for r in e.records]

    path = write(tmp_path / "00000000000000000000.log", buf)
    with FileRecords.open(path) as fr:
        assert fr.size_in_bytes == len(buf)
        assert fr.validate(deep=True) == len(expected)
        assert fr.valid_bytes == len(buf)
        check_batches(list(fr.batches()), expected, in_file=True)
        check_batches(list(fr.batches(validate=True, strict=True)), expected, in_file=True)
        assert fr.read(0, len(buf) + 10) == buf

    cut = data.draw(st.integers(0, len(buf)), label="cut")
    check_cut(MemoryRecords(buf[:cut]), expected, cut, in_file=False)
    with FileRecords.open(write(tmp_path / "cut.log", buf[:cut])) as fr:
        check_cut(fr, expected, cut, in_file=True)


@given(
    data=st.data(),
    codec=st.sampled_from(list(Compression)),
    base_sequence=st.integers(INT32_MAX - 6, INT32_MAX),
    n=st.integers(1, 6),
)
def test_sequence_wraps_past_int32_max(data, codec, base_sequence, n):
    """lastSequence and record sequences wrap past 2**31-1 to 0 (Kafka's incrementSequence)."""
    gaps = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    b = RecordBatchBuilder(magic=2, compression=codec, producer_id=42, producer_epoch=1, base_sequence=base_sequence)
    off = 0
    offsets = []
    for g in gaps:
        off += g if offsets else 0
        offsets.append(b.append(b"k", b"v", timestamp=1, offset=off))
        off += 1
    (batch,) = MemoryRecords(b.build().buffer).batches()
    last_delta = offsets[-1]
    assert batch.last_sequence == increment_sequence(base_sequence, last_delta)
    if base_sequence + last_delta > INT32_MAX:
        assert batch.last_sequence == base_sequence + last_delta - 2**31
    seqs = [r.sequence for r in batch]
    assert seqs == [increment_sequence(base_sequence, o) for o in offsets]
    assert all(0 <= s <= INT32_MAX for s in seqs)


def test_sequence_wrap_example():
    """The worked example: base 2**31-2 with five records gives 2**31-2, 2**31-1, 0, 1, 2."""
    b = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=INT32_MAX - 1)
    for i in range(5):
        b.append(None, b"%d" % i, timestamp=i)
    (batch,) = MemoryRecords(b.build().buffer).batches()
    assert [r.sequence for r in batch] == [INT32_MAX - 1, INT32_MAX, 0, 1, 2]
    assert batch.base_sequence == INT32_MAX - 1
    assert batch.last_sequence == 2


def test_log_append_time_v2_reports_append_time_for_every_record():
    """Under LogAppendTime the base timestamp keeps the first create time, the max timestamp
    holds the append time, and every record reports the append time."""
    b = RecordBatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=5_000)
    b.append(b"a", b"1", timestamp=10)
    b.append(b"b", b"2", timestamp=7_000)
    (batch,) = MemoryRecords(b.build().buffer).batches()
    assert (batch.base_timestamp, batch.max_timestamp) == (10, 5_000)
    assert [r.timestamp for r in batch] == [5_000, 5_000]


def test_v0_has_no_timestamps():
    """Magic 0 ignores timestamps: -1 on the batch and on every record, NoTimestampType."""
    for codec in (Compression.NONE, Compression.GZIP):
        b = RecordBatchBuilder(magic=0, compression=codec)
        b.append(b"a", b"1", timestamp=123)
        b.append(b"b", b"2", timestamp=456)
        mr = MemoryRecords(b.build().buffer)
        assert {bt.timestamp_type for bt in mr.batches()} == {TimestampType.NO_TIMESTAMP_TYPE}
        assert {bt.max_timestamp for bt in mr.batches()} == {-1}
        assert [r.timestamp for r in mr.records()] == [-1, -1]


def test_empty_builder_builds_nothing():
    """A builder with no records builds an empty MemoryRecords (as Kafka)."""
    mr = RecordBatchBuilder().build()
    assert mr.size_in_bytes == 0 and list(mr.batches()) == [] and mr.validate() == 0


# ------------------------------------------------------------------------------------------------
# Compressed v0/v1 wrappers: the offsets of inner messages


@st.composite
def relative_offsets(draw):
    n = draw(st.integers(1, 6))
    offs, cur = [], draw(st.integers(0, 2))
    for _ in range(n):
        offs.append(cur)
        cur += 1 + draw(st.integers(0, 3))
    return offs


LEGACY_CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4]


@given(
    codec=st.sampled_from(LEGACY_CODECS),
    inner=relative_offsets(),
    wrapper_offset=st.integers(0, 2**62),
    log_append=st.booleans(),
)
def test_v1_wrapper_offsets_are_relative(codec, inner, wrapper_offset, log_append):
    """A v1 wrapper whose offset a broker rewrote: inner i is at wrapper - last_relative +
    relative_i; a wrapper offset of 0 keeps the relative offsets; LogAppendTime reports the
    wrapper's timestamp for every inner message."""
    assume(wrapper_offset == 0 or wrapper_offset >= inner[-1])
    attrs = int(codec) | (0x08 if log_append else 0)
    inner_ts = [100 + i for i in range(len(inner))]
    message_set = b"".join(
        encode_message(rel, 1, b"k%d" % rel, b"v" * rel, timestamp=ts, attributes=attrs & 0x08)
        for rel, ts in zip(inner, inner_ts)
    )
    wrapper = encode_message(0, 1, None, compress(codec, message_set, magic=1), timestamp=999, attributes=attrs)
    rewritten = wrapper_offset.to_bytes(8, "big") + wrapper[8:]  # the offset is outside the CRC
    mr = MemoryRecords(rewritten)
    assert mr.validate(deep=True) == 1
    (batch,) = mr.batches()
    base = 0 if wrapper_offset == 0 else wrapper_offset - inner[-1]
    assert [r.offset for r in batch] == [base + rel for rel in inner]
    assert [r.key for r in batch] == [b"k%d" % rel for rel in inner]
    assert [r.timestamp for r in batch] == ([999] * len(inner) if log_append else inner_ts)
    assert batch.last_offset == wrapper_offset
    assert batch.base_offset == base + inner[0]


@given(codec=st.sampled_from(LEGACY_CODECS), inner=relative_offsets(), wrapper_offset=st.integers(0, 2**62))
def test_v0_wrapper_offsets_are_absolute(codec, inner, wrapper_offset):
    """v0 inner offsets are absolute: whatever the wrapper offset, they read back unchanged."""
    absolute = [1000 + o for o in inner]
    message_set = b"".join(encode_message(o, 0, None, b"x%d" % o) for o in absolute)
    wrapper = encode_message(wrapper_offset, 0, None, compress(codec, message_set, magic=0), attributes=int(codec))
    (batch,) = MemoryRecords(wrapper).batches()
    batch.ensure_valid(deep=True)
    assert [r.offset for r in batch] == absolute
    assert [r.timestamp for r in batch] == [-1] * len(inner)
    assert batch.base_offset == absolute[0] and batch.last_offset == wrapper_offset


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_builder_v1_wrapper_offsets_with_gaps(codec):
    """The builder writes relative inner offsets for v1 and absolute ones for v0; both read
    back as the absolute offsets appended, gaps included."""
    for magic in (0, 1):
        b = RecordBatchBuilder(magic=magic, compression=codec, base_offset=500)
        for off in (500, 503, 504, 510):
            b.append(b"k", b"v%d" % off, timestamp=off, offset=off)
        buf = b.build().buffer
        (batch,) = MemoryRecords(buf).batches()
        assert [r.offset for r in batch] == [500, 503, 504, 510]
        assert (batch.base_offset, batch.last_offset) == (500, 510)


# ------------------------------------------------------------------------------------------------
# FileRecords views: slice, read, transfer_to


def _sample_log(codec: Compression = Compression.GZIP) -> tuple[bytes, list[int]]:
    """Five v2 batches (one with a ~100 KB value) and their start positions."""
    parts, starts, pos, off = [], [], 0, 0
    for i in range(5):
        b = RecordBatchBuilder(compression=codec if i % 2 else Compression.NONE, base_offset=off)
        for j in range(3):
            b.append(b"k%d" % j, BIG if (i, j) == (2, 1) else b"value-%d-%d" % (i, j), timestamp=1000 + i)
        data = bytes(b.build().buffer)
        parts.append(data)
        starts.append(pos)
        pos += len(data)
        off += 3
    return b"".join(parts), starts


class _Sink:
    """Only ``write``: forces the read+write fallback of transfer_to."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data) -> int:
        self.chunks.append(bytes(data))
        return len(data)


def _via_socket(fr: FileRecords, position: int, count: int) -> tuple[int, bytes]:
    """transfer_to a socketpair end (so through os.sendfile), draining the other end."""
    a, b = socket.socketpair()
    received = bytearray()

    def drain() -> None:
        while True:
            chunk = b.recv(1 << 16)
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        with mock.patch.object(os, "sendfile", wraps=os.sendfile) as spy:
            sent = fr.transfer_to(a, position, count)
        assert spy.called or sent == 0, "a socket destination must go through os.sendfile"
    finally:
        a.shutdown(socket.SHUT_WR)
        reader.join(10)
        a.close()
        b.close()
    return sent, bytes(received)


@given(data=st.data())
@examples(25)
def test_slices_read_and_transfer_agree(tmp_path_factory, data):
    """A slice on batch boundaries iterates the same batches (with file positions), and
    read(), transfer_to over a socket (sendfile) and over a write-only object (fallback) all
    produce the slice's bytes."""
    buf, starts = _sample_log()
    path = tmp_path_factory.mktemp("slices") / "00000000000000000000.log"
    path.write_bytes(buf)
    bounds = starts + [len(buf)]
    i = data.draw(st.integers(0, len(starts)))
    j = data.draw(st.integers(i, len(starts)))
    lo, hi = bounds[i], bounds[j]
    with FileRecords.open(path) as fr:
        view = fr.slice(lo, hi - lo)
        assert (view.start, view.end, view.size_in_bytes) == (lo, hi, hi - lo)
        assert [b.position for b in view.batches()] == starts[i:j]
        assert [b.position for b in view.batches(validate=True)] == starts[i:j]
        assert view.validate(deep=True) == j - i
        assert view.valid_bytes == hi - lo
        expected = buf[lo:hi]
        assert view.read(0, hi - lo) == expected
        # Any byte range of the slice, three ways.
        p = data.draw(st.integers(0, hi - lo))
        n = data.draw(st.integers(0, hi - lo - p + 5))
        want = expected[p : p + n]
        assert view.read(p, n) == want
        into = bytearray(b"\xee" * (n + 3))  # read_into fills a prefix and leaves the rest
        assert view.read_into(p, memoryview(into)[:n]) == len(want)
        assert into[: len(want)] == want and into[len(want):] == b"\xee" * (n + 3 - len(want))
        sent, got = _via_socket(view, p, n)
        assert (sent, got) == (len(want), want)
        sink = _Sink()
        with mock.patch.object(os, "sendfile", wraps=os.sendfile) as spy:
            assert view.transfer_to(sink, p, n) == len(want)
        assert not spy.called
        assert b"".join(sink.chunks) == want
        # A slice of a slice is still positioned in the file.
        k = data.draw(st.integers(i, j))
        inner = view.slice(bounds[k] - lo)
        assert (inner.start, inner.end) == (bounds[k], hi)
        assert [b.position for b in inner.batches()] == starts[k:j]


def test_slice_not_on_a_boundary_stops_at_the_partial_batch(tmp_path):
    """A slice ending inside a batch yields the whole batches before it; strict iteration and
    validate() raise TruncatedRecordError at the partial one's file position."""
    buf, starts = _sample_log()
    path = write(tmp_path / "x.log", buf)
    with FileRecords.open(path) as fr:
        view = fr.slice(starts[1], starts[3] - starts[1] + 20)
        assert [b.position for b in view.batches()] == starts[1:3]
        assert view.valid_bytes == starts[3] - starts[1]
        with pytest.raises(TruncatedRecordError) as info:
            view.validate()
        assert info.value.position == starts[3]
        assert info.value.file == str(path)


def test_transfer_to_raises_when_file_truncated_underneath(tmp_path):
    """transfer_to checks the file did not shrink below the window: a truncation by someone
    else raises TruncatedRecordError, for the whole file and for a slice."""
    buf, starts = _sample_log()
    path = write(tmp_path / "x.log", buf)
    with FileRecords.open(path) as fr:
        view = fr.slice(starts[1], starts[3] - starts[1])
        os.truncate(path, starts[2])
        with pytest.raises(TruncatedRecordError):
            fr.transfer_to(_Sink(), 0, len(buf))
        with pytest.raises(TruncatedRecordError):
            view.transfer_to(_Sink(), 0, 10)
        a, b = socket.socketpair()
        with a, b, pytest.raises(TruncatedRecordError):
            view.transfer_to(a, 0, 10)


def test_transfer_to_whole_file_over_socket_with_sendfile(tmp_path):
    """The whole ~100 KB+ file goes through os.sendfile intact (larger than a socket buffer)."""
    buf, _ = _sample_log(Compression.NONE)
    path = write(tmp_path / "x.log", buf)
    with FileRecords.open(path) as fr:
        sent, got = _via_socket(fr, 0, len(buf))
    assert sent == len(buf) and got == buf


def test_file_records_follow_appends(tmp_path):
    """A mutable FileRecords sees its own appends; batch positions are file positions."""
    buf, starts = _sample_log()
    path = tmp_path / "a.log"
    with FileRecords.open(path, create=True) as fr:
        pos = 0
        for lo, hi in itertools.pairwise(starts + [len(buf)]):
            assert fr.append(MemoryRecords(buf[lo:hi])) == hi - lo
            pos += hi - lo
            assert fr.size_in_bytes == pos
        assert [b.position for b in fr.batches()] == starts
        assert fr.read(0, len(buf)) == buf
        assert fr.truncate_to(starts[2]) == len(buf) - starts[2]
        assert [b.position for b in fr.batches()] == starts[:2]


def test_window_opened_on_part_of_a_file(tmp_path):
    """FileRecords.open(start=, end=) is a window with file positions; a window starting past
    the end of the file is empty (or refused), never of negative size."""
    buf, starts = _sample_log()
    path = write(tmp_path / "w.log", buf)
    with FileRecords.open(path, start=starts[1], end=starts[3]) as fr:
        assert fr.size_in_bytes == starts[3] - starts[1]
        assert [b.position for b in fr.batches()] == starts[1:3]
        assert [b.position for b in fr.batches(validate=True)] == starts[1:3]
        assert fr.read(0, 10) == buf[starts[1] : starts[1] + 10]
    with FileRecords.open(path, start=starts[2], end=len(buf) + 1000) as fr:
        assert fr.size_in_bytes == len(buf) - starts[2]
        assert [b.position for b in fr.batches()] == starts[2:]
    try:
        fr = FileRecords.open(path, start=len(buf) + 100)
    except InvalidOffsetError:
        return
    with fr:
        assert fr.size_in_bytes == 0
        assert list(fr.batches()) == [] and fr.valid_bytes == 0


def test_validated_iteration_across_read_chunks(tmp_path):
    """A file of several MB, with batches far larger than and straddling FileRecords' 1 MiB
    read chunks: validated and shallow iteration agree with memory, at whole length and cut
    inside a batch."""
    rng = random.Random(7)
    parts = []
    for i in range(10):
        magic = (0, 1, 2)[i % 3]
        b = RecordBatchBuilder(magic=magic, base_offset=i * 10, compression=Compression.NONE)
        for _ in range(1 + i % 3):
            b.append(b"k", rng.randbytes(rng.randrange(1, 400_000)), timestamp=5)
        parts.append(bytes(b.build().buffer))
    buf = b"".join(parts)
    assert len(buf) > 3 << 20
    expected = [(b.size_in_bytes, b.last_offset) for b in MemoryRecords(buf).batches()]
    positions = list(itertools.accumulate([0] + [size for size, _ in expected]))[:-1]
    for cut in (len(buf), (1 << 20) + 17, (2 << 20) - 1, len(buf) - 1):
        path = write(tmp_path / "big.log", buf[:cut])
        whole = [i for i, p in enumerate(positions) if p + expected[i][0] <= cut]
        with FileRecords.open(path) as fr:
            for batches in (list(fr.batches()), list(fr.batches(validate=True))):
                assert [(b.size_in_bytes, b.last_offset) for b in batches] == [expected[i] for i in whole]
                assert [b.position for b in batches] == [positions[i] for i in whole]
            if cut == len(buf):
                assert fr.validate(deep=True) == len(expected)
            else:
                with pytest.raises(TruncatedRecordError):
                    fr.validate()
