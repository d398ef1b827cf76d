"""The framing walk the log's validation uses agrees with decoding on every batch, valid or
damaged: same verdict, same error, same timestamps and null keys."""

from __future__ import annotations

import struct

from conftest import examples
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import Compression, KafkalogError, MemoryRecords, RecordBatchBuilder
from kafkalog.crc import crc32c

T0 = 1_700_000_000_000

records_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=300)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(-5000, 5000),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=10))), max_size=2),
    ),
    min_size=1,
    max_size=8,
)


def build(records, codec) -> bytearray:
    b = RecordBatchBuilder(2, codec)
    for key, value, dt, headers in records:
        b.append(key, value, timestamp=T0 + dt, headers=headers)
    return bytearray(b.build().buffer)


def outcome(raw: bytes, action):
    (batch,) = list(MemoryRecords(bytes(raw)).batches())
    try:
        return ("ok", action(batch))
    except KafkalogError as e:
        return (type(e).__name__, str(e))


def decoded(batch):
    records = batch.records()
    return (min(r.timestamp for r in records), max(r.timestamp for r in records), any(r.key is None for r in records))


@examples(300)
@given(records_st, st.sampled_from([Compression.NONE, Compression.NONE, Compression.LZ4]), st.data())
def test_scan_agrees_with_decoding(records, codec, data) -> None:
    raw = build(records, codec)
    if data.draw(st.booleans()):
        # Damage the records and re-seal the CRC: only the record framing can catch it.
        at = data.draw(st.integers(61, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
        struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    scanned = outcome(raw, lambda b: tuple(b.scan())[:3])
    expected = outcome(raw, decoded)
    assert scanned == expected


def test_scan_reports_offset_delta_order() -> None:
    b = RecordBatchBuilder(2)
    b.append(b"a", b"1", timestamp=T0, offset=0)
    b.append(b"b", b"2", timestamp=T0, offset=4)
    (batch,) = list(b.build().batches())
    assert not batch.scan().sequential
    (batch,) = list(MemoryRecords(bytes(build([(b"k", b"v", 0, [])] * 3, Compression.NONE))).batches())
    assert batch.scan().sequential
