"""``RecordBatch.attributes`` and ``RecordBatch.compute_crc()`` for every magic.

``compute_crc()`` is the checksum of the bytes the stored CRC covers: CRC-32C from the
attributes to the end for v2 (Kafka's ``DefaultRecordBatch.computeChecksum``), CRC-32 from the
magic to the end for v0/v1 (``LegacyRecord.computeChecksum``). So it equals ``crc`` on an intact
batch, differs once a covered byte changes, and (v2) ignores the fields a broker rewrites in
place. ``attributes`` is the stored attributes field: codec in bits 0-2, timestamp type in bit 3,
and for v2 the transactional (4), control (5) and delete-horizon (6) bits.
"""

from __future__ import annotations

import pytest

from kafkalog import Compression, CorruptRecordError, MemoryRecords, RecordBatchBuilder, TimestampType
from kafkalog.record import LOG_OVERHEAD, MAGIC_V0, MAGIC_V1, MAGIC_V2
from kafkalog.recordbatch import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    encode_batch,
    encode_record,
)

MAGICS = [MAGIC_V0, MAGIC_V1, MAGIC_V2]
CODECS = [Compression.NONE, Compression.GZIP]


def build(magic: int, codec: Compression, timestamp_type: TimestampType = TimestampType.CREATE_TIME) -> bytes:
    append_time = 1_700_000_000_999 if timestamp_type == TimestampType.LOG_APPEND_TIME else None
    builder = RecordBatchBuilder(
        magic=magic, compression=codec, timestamp_type=timestamp_type, base_offset=5, log_append_time=append_time
    )
    for i in range(3):
        builder.append(b"key-%d" % i, b"value-%d" % i, timestamp=1_700_000_000_000 + i)
    return bytes(builder.build().buffer)


def first_batch(raw: bytes | bytearray):
    return next(MemoryRecords(raw).batches())


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("magic", MAGICS, ids=lambda m: f"v{m}")
def test_intact_batch_computes_its_stored_crc(magic, codec):
    batch = first_batch(build(magic, codec))
    assert batch.magic == magic
    assert batch.compute_crc() == batch.crc
    assert batch.is_valid()


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("magic", MAGICS, ids=lambda m: f"v{m}")
def test_flipped_covered_byte_changes_the_computed_crc(magic, codec):
    raw = build(magic, codec)
    size = first_batch(raw).size_in_bytes
    # The attributes byte (v2: its low byte) and the last byte of the entry are covered for
    # every magic: v2 covers byte 21 to the end, v0/v1 byte 16 (the magic) to the end.
    attributes_low = ATTRIBUTES_OFFSET + 1 if magic == MAGIC_V2 else LOG_OVERHEAD + 5
    for position in (attributes_low, size - 1):
        damaged = bytearray(raw)
        damaged[position] ^= 0x40
        batch = first_batch(damaged)
        assert batch.crc == first_batch(raw).crc  # the stored value is untouched
        assert batch.compute_crc() != batch.crc, position
        with pytest.raises(CorruptRecordError, match="crc"):
            batch.ensure_valid()


def test_v2_crc_leaves_out_what_a_broker_rewrites():
    """The base offset and the partition leader epoch lie before the attributes: outside the CRC."""
    raw = bytearray(build(MAGIC_V2, Compression.NONE))
    crc = first_batch(raw).crc
    raw[BASE_OFFSET_OFFSET + 7] ^= 0xFF
    raw[PARTITION_LEADER_EPOCH_OFFSET + 3] ^= 0xFF
    batch = first_batch(raw)
    assert batch.compute_crc() == crc == batch.crc


@pytest.mark.parametrize("magic", MAGICS, ids=lambda m: f"v{m}")
def test_attributes_hold_codec_and_timestamp_type(magic):
    batch = first_batch(build(magic, Compression.GZIP, TimestampType.LOG_APPEND_TIME))
    timestamp_bit = 0x08 if magic >= MAGIC_V1 else 0
    assert batch.attributes == int(Compression.GZIP) | timestamp_bit
    assert batch.attributes & 0x07 == int(batch.compression)
    plain = first_batch(build(magic, Compression.NONE))
    assert plain.attributes == 0


def test_v2_attributes_hold_the_flag_bits():
    raw = encode_batch(
        encode_record(0, 0, None, b"v"),
        count=1,
        base_offset=0,
        last_offset_delta=0,
        base_timestamp=10,
        max_timestamp=10,
        compression=Compression.SNAPPY,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        producer_id=3,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
        delete_horizon_ms=99,
    )
    batch = first_batch(raw)
    assert batch.attributes == int(Compression.SNAPPY) | 0x08 | 0x10 | 0x40
    assert (batch.is_transactional, batch.is_control, batch.delete_horizon_ms) == (True, False, 99)
    assert batch.compute_crc() == batch.crc
