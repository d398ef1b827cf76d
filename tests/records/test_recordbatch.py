"""v2 batch details: empty batches, delete horizons, control types, in-place broker rewrites."""

from __future__ import annotations

import pytest

from kafkalog import (
    Compression,
    ControlRecordType,
    MemoryRecords,
    RecordBatchBuilder,
    TimestampType,
)
from kafkalog.record import control_key
from kafkalog.recordbatch import (
    encode_batch,
    encode_record,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_empty_batch_kept_for_producer_state(codec):
    """A zero-record batch (what the cleaner keeps for producer state) is valid, yields nothing,
    and keeps its offsets and producer fields; Kafka does not read its payload."""
    raw = encode_batch(
        b"", count=0, base_offset=100, last_offset_delta=4, base_timestamp=5, max_timestamp=5,
        compression=codec, producer_id=7, producer_epoch=1, base_sequence=10, is_transactional=True,
    )
    batch = next(MemoryRecords(raw).batches())
    batch.ensure_valid(deep=True)
    assert (batch.count, batch.base_offset, batch.last_offset, batch.last_sequence) == (0, 100, 104, 14)
    assert batch.records() == []


def test_delete_horizon_makes_base_timestamp_the_horizon():
    """With the delete-horizon bit, baseTimestamp is the horizon and deltas may be negative."""
    horizon = 2_000_000
    payload = encode_record(0, 1_000 - horizon, b"k", None) + encode_record(1, 1_500 - horizon, b"k2", b"v")
    raw = encode_batch(payload, count=2, base_offset=0, last_offset_delta=1, base_timestamp=0,
                       max_timestamp=1_500, delete_horizon_ms=horizon)
    batch = next(MemoryRecords(raw).batches())
    assert batch.delete_horizon_ms == horizon == batch.base_timestamp
    assert [(r.timestamp, r.value) for r in batch] == [(1_000, None), (1_500, b"v")]


@pytest.mark.parametrize("ctype", [2, 3, 4, 5, 6, 99])
def test_other_control_types_are_reported_by_type(ctype):
    """KRaft control records (and unknown types) are reported by type without a marker value."""
    b = RecordBatchBuilder(is_control=True)
    b.append(control_key(ControlRecordType.parse(ctype)) if ctype != 99 else b"\x00\x00\x00\x63", b"\x00" * 3, timestamp=1)
    (rec,) = b.build().records()
    expected = ControlRecordType.parse(ctype)
    assert rec.is_control and rec.control_type is expected and rec.coordinator_epoch is None
    if ctype == 99:
        assert expected is ControlRecordType.UNKNOWN


def test_end_transaction_marker_layout():
    """Kafka's marker batch: attributes 0x30, baseSequence -1, one ABORT/COMMIT record."""
    mr = RecordBatchBuilder.end_transaction_marker(
        ControlRecordType.ABORT, producer_id=9, producer_epoch=2, coordinator_epoch=41, timestamp=77, base_offset=5
    )
    batch = next(mr.batches())
    assert batch.attributes == 0x30 and batch.base_sequence == -1 and batch.count == 1
    (rec,) = batch.records()
    assert (rec.offset, rec.control_type, rec.coordinator_epoch) == (5, ControlRecordType.ABORT, 41)
    assert rec.key == b"\x00\x00\x00\x00" and rec.value == b"\x00\x00\x00\x00\x00\x29"


def test_broker_rewrites_in_place():
    """Base offset and leader epoch sit outside the CRC; stamping LogAppendTime refreshes it."""
    b = RecordBatchBuilder()
    for i in range(3):
        b.append(b"k", b"v%d" % i, timestamp=1_000 + i)
    buf = bytearray(b.build().buffer)
    set_base_offset(buf, 0, 500)
    set_partition_leader_epoch(buf, 0, 3)
    batch = next(MemoryRecords(bytes(buf)).batches())
    assert batch.is_valid() and (batch.base_offset, batch.partition_leader_epoch) == (500, 3)
    set_max_timestamp(buf, 0, TimestampType.LOG_APPEND_TIME, 9_999)
    batch = next(MemoryRecords(bytes(buf)).batches())
    assert batch.is_valid() and batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch] == [9_999] * 3 and batch.base_timestamp == 1_000
