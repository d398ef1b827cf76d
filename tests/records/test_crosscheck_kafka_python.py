"""Cross-checks of kafkalog's records layer against kafka-python, an independent implementation.

Both directions for every (magic, codec) pair both libraries support:

* kafka-python's ``MemoryRecordsBuilder`` writes, kafkalog's ``MemoryRecords`` reads: the data must
  validate deeply, the records must be the ones appended, and every batch field must equal
  kafka-python's own view of the same bytes;
* kafkalog's ``RecordBatchBuilder`` writes, kafka-python reads: same equalities, and kafka-python's
  ``validate_crc()`` must accept every batch (and every v0/v1 message).

Then byte level: uncompressed v2 batches and v0/v1 messages built from the same inputs must be
identical (up to the one producer-side field where kafka-python departs from Kafka's Java
``MemoryRecordsBuilder``), and compressed batches must carry identical record bytes once
decompressed, each library decompressing the other's payload.

kafka-python facts these tests rely on (kafka-python 3.0.12, ``kafka/record``):

* its v2 builder writes base offset 0 and partition leader epoch 0 (Java writes -1,
  ``RecordBatch.NO_PARTITION_LEADER_EPOCH``); its ``offset=`` is the first offset *delta*;
* it sends a v2 batch uncompressed when compression does not shrink it (so compressed cases
  append a compressible "ballast" record);
* its v0/v1 compressed wrapper has offset 0 and timestamp 0 (Java: the last offset and the max
  timestamp), and its inner offsets are the offsets appended;
* it cannot build LogAppendTime or control batches; it reports the batch max timestamp for
  LogAppendTime v2 records and the wrapper's timestamp for LogAppendTime v1 inner messages;
* LZ4 with magic 0 needs the ``xxhash`` module (``lz4_encode_old_kafka``/``lz4_decode_old_kafka``).
"""

from __future__ import annotations

import contextlib
import struct
import types
from dataclasses import dataclass, field
from unittest import mock

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

pytest.importorskip("kafka", reason="kafka-python is not installed")

import kafka.codec as kp_codec  # noqa: E402
from kafka.record import MemoryRecords as KPMemoryRecords  # noqa: E402
from kafka.record import MemoryRecordsBuilder as KPBuilder  # noqa: E402
from kafka.record.default_records import ControlRecord as KPControlRecord  # noqa: E402

from kafkalog import (  # noqa: E402
    Compression,
    ControlRecordType,
    InvalidRecordError,
    MemoryRecords,
    RecordBatchBuilder,
    TimestampType,
)
from kafkalog.compression import compress, decompress, xxhash32  # noqa: E402

# ----------------------------------------------------------------------------------------------
# The matrix, and what kafka-python can do of it

_KP_HAS = {
    Compression.NONE: lambda: True,
    Compression.GZIP: kp_codec.has_gzip,
    Compression.SNAPPY: kp_codec.has_snappy,
    Compression.LZ4: kp_codec.has_lz4,
    Compression.ZSTD: kp_codec.has_zstd,
}


def _kp_cannot(magic: int, codec: Compression) -> str | None:
    """Why kafka-python cannot write/read this pair here, or None if it can."""
    if not _KP_HAS[codec]():
        return f"kafka-python has no library for {codec.kafka_name} here"
    if magic == 0 and codec is Compression.LZ4 and kp_codec.xxhash is None:
        return (
            "kafka-python needs the xxhash module for magic-0 LZ4 (lz4_encode_old_kafka / "
            "lz4_decode_old_kafka); covered by the *_with_xxhash_shim tests instead"
        )
    return None


#: Every (magic, codec) pair Kafka allows (as conftest's MATRIX), skipped where kafka-python cannot.
PAIRS = [
    pytest.param(
        magic,
        codec,
        id=f"v{magic}-{codec.kafka_name}",
        marks=[pytest.mark.skip(reason=_kp_cannot(magic, codec))] if _kp_cannot(magic, codec) else [],
    )
    for magic in (0, 1, 2)
    for codec in Compression
    if not (codec is Compression.ZSTD and magic < 2)
]
COMPRESSED_PAIRS = [p for p in PAIRS if p.values[1] is not Compression.NONE]

_KP_DECODE = {
    Compression.GZIP: kp_codec.gzip_decode,
    Compression.SNAPPY: kp_codec.snappy_decode,
    Compression.LZ4: kp_codec.lz4_decode,
    Compression.ZSTD: kp_codec.zstd_decode,
}

# ----------------------------------------------------------------------------------------------
# Inputs

_INT32_MAX = 2**31 - 1

_bytes_or_none = st.one_of(
    st.none(),
    st.binary(max_size=24),  # includes b""
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=3), st.integers(0, 40)),
)
_timestamps = st.one_of(st.just(-1), st.integers(0, 2**41), st.just(1_700_000_000_000))
_header_keys = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)  # UTF-8 encodable
_headers = st.lists(st.tuples(_header_keys, st.one_of(st.none(), st.binary(max_size=8))), max_size=3).map(tuple)
_gaps = st.one_of(st.just(0), st.just(0), st.integers(1, 50))
_producers = st.one_of(
    st.none(),
    st.tuples(
        st.integers(0, 2**63 - 1),  # producer id
        st.integers(0, 2**15 - 1),  # producer epoch
        st.one_of(st.integers(0, _INT32_MAX), st.integers(_INT32_MAX - 4, _INT32_MAX)),  # base sequence (wraps)
        st.booleans(),  # transactional
    ),
)

#: Appended last to compressed batches so that kafka-python really compresses a v2 batch.
BALLAST_VALUE = b"kafkalog cross-check ballast " * 24


@dataclass
class Spec:
    """One batch's inputs: ``records`` are ``(offset, timestamp, key, value, headers)``."""

    records: list[tuple[int, int, bytes | None, bytes | None, tuple]]
    base_offset: int = 0
    producer: tuple[int, int, int, bool] | None = None
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    log_append_time: int | None = None
    leader_epoch: int = -1
    extra: dict = field(default_factory=dict)


@st.composite
def specs(
    draw,
    magic: int,
    *,
    min_size: int = 1,
    max_size: int = 5,
    base_offsets=st.integers(0, 1000),
    first_gap: bool = False,
    log_append_time: bool = False,
    leader_epoch: bool = False,
    producer: bool = True,
) -> Spec:
    """Records for one batch with increasing offsets (gaps allowed) and, for v2, headers and
    optional producer state; for kafkalog builds optionally LogAppendTime and a leader epoch."""
    base = draw(base_offsets)
    n = draw(st.integers(min_size, max_size))
    offset = base + (draw(_gaps) if first_gap else 0)
    records = []
    for i in range(n):
        if i:
            offset += 1 + draw(_gaps)
        headers = draw(_headers) if magic == 2 else ()
        records.append((offset, draw(_timestamps), draw(_bytes_or_none), draw(_bytes_or_none), headers))
    spec = Spec(records, base_offset=base)
    if magic == 2 and producer:
        spec.producer = draw(_producers)
    if magic >= 1 and log_append_time and draw(st.booleans()):
        spec.timestamp_type = TimestampType.LOG_APPEND_TIME
        spec.log_append_time = draw(st.integers(0, 2**41))
    if magic == 2 and leader_epoch:
        spec.leader_epoch = draw(st.integers(-1, _INT32_MAX))
    return spec


def _with_ballast(spec: Spec, magic: int) -> Spec:
    last = spec.records[-1][0]
    ballast = (last + 1, spec.records[-1][1], None, BALLAST_VALUE, (("ballast", None),) if magic == 2 else ())
    return Spec(
        spec.records + [ballast],
        spec.base_offset,
        spec.producer,
        spec.timestamp_type,
        spec.log_append_time,
        spec.leader_epoch,
    )


# ----------------------------------------------------------------------------------------------
# Building with either library


def kp_build(magic: int, codec: Compression, spec: Spec) -> bytes:
    """kafka-python builds ``spec`` (its offset= is the first offset; skip() makes the gaps)."""
    pid, epoch, seq, txn = spec.producer or (-1, -1, -1, False)
    builder = KPBuilder(
        magic,
        int(codec),
        batch_size=1 << 30,
        offset=spec.records[0][0] if spec.records else spec.base_offset,
        transactional=txn,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    for offset, ts, key, value, headers in spec.records:
        builder.skip(offset - builder.next_offset())
        assert builder.append(ts, key, value, [tuple(h) for h in headers]) is not None
    builder.close()
    return bytes(builder.buffer())


def kl_build(magic: int, codec: Compression, spec: Spec, *, leader_epoch: int | None = None) -> bytes:
    """kafkalog builds ``spec`` with explicit offsets."""
    pid, epoch, seq, txn = spec.producer or (-1, -1, -1, False)
    builder = RecordBatchBuilder(
        magic=magic,
        compression=codec,
        timestamp_type=spec.timestamp_type,
        base_offset=spec.base_offset,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
        partition_leader_epoch=spec.leader_epoch if leader_epoch is None else leader_epoch,
        log_append_time=spec.log_append_time,
    )
    for offset, ts, key, value, headers in spec.records:
        assert builder.append(key, value, timestamp=ts, headers=headers, offset=offset) == offset
    return bytes(builder.build().buffer)


def expected_records(magic: int, spec: Spec) -> list[tuple]:
    """What any reader must report: timestamps are -1 for v0 and the append time under
    LogAppendTime; headers exist only in v2."""
    out = []
    for offset, ts, key, value, headers in spec.records:
        if magic == 0:
            ts = -1
        elif spec.timestamp_type == TimestampType.LOG_APPEND_TIME:
            ts = spec.log_append_time
        out.append((offset, ts, key, value, tuple(tuple(h) for h in headers) if magic == 2 else ()))
    return out


# ----------------------------------------------------------------------------------------------
# Reading with either library


def kl_view(raw: bytes) -> list[tuple]:
    """kafkalog's view: validates deeply, then ``(batch, [record tuples])`` per batch."""
    mr = MemoryRecords(raw)
    n = mr.validate(deep=True)
    batches = list(mr.batches())
    assert len(batches) == n
    assert mr.valid_bytes == len(raw)
    out = []
    for batch in batches:
        assert batch.is_valid()
        recs = [(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in batch.records()]
        out.append((batch, recs, batch.records()))
    return out


def kp_view(raw: bytes) -> list[tuple]:
    """kafka-python's view: every batch passes ``validate_crc()`` (checked before iterating, as
    it requires), then ``(batch, [record tuples], [records])`` per batch."""
    out = []
    kmr = KPMemoryRecords(raw)
    while kmr.has_next():
        batch = kmr.next_batch()
        assert batch.validate_crc(), f"kafka-python rejects the CRC of {batch}"
        records = list(batch)
        recs = [
            (
                r.offset,
                -1 if r.timestamp is None else r.timestamp,  # kafka-python: None for magic 0
                r.key,
                r.value,
                tuple(tuple(h) for h in r.headers),
            )
            for r in records
        ]
        out.append((batch, recs, records))
    assert kmr.valid_bytes() == len(raw)
    return out


def assert_same_batches(raw: bytes, magic: int) -> tuple[list, list]:
    """Both libraries frame ``raw`` into the same batches, with the same fields and records."""
    kl = kl_view(raw)
    kp = kp_view(raw)
    assert len(kl) == len(kp)
    for (lb, lrecs, lrecords), (kb, krecs, krecords) in zip(kl, kp):
        assert lrecs == krecs
        assert lb.magic == kb.magic == magic
        assert lb.size_in_bytes == kb.size_in_bytes
        assert int(lb.compression) == kb.compression_type
        if magic == 2:
            assert (
                lb.base_offset,
                lb.last_offset,
                lb.count,
                lb.crc,
                int(lb.timestamp_type),
                lb.base_timestamp,
                lb.max_timestamp,
                lb.producer_id,
                lb.producer_epoch,
                lb.base_sequence,
                lb.last_sequence,
                lb.is_transactional,
                lb.is_control,
                lb.partition_leader_epoch,
            ) == (
                kb.base_offset,
                kb.last_offset,
                kb.records_count,
                kb.crc,
                kb.timestamp_type,
                kb.first_timestamp,
                kb.max_timestamp,
                kb.producer_id,
                kb.producer_epoch,
                kb.base_sequence,
                kb.last_sequence,
                kb.is_transactional,
                kb.is_control_batch,
                kb.leader_epoch,
            )
            # Java's DefaultRecord.sequence(): baseSequence + offsetDelta (wrapping), or -1.
            for r in lrecords:
                if lb.base_sequence == -1:
                    assert r.sequence == -1
                else:
                    expected = lb.base_sequence + (r.offset - lb.base_offset)
                    assert r.sequence == (expected if expected <= _INT32_MAX else expected - _INT32_MAX - 1)
        else:
            # kafka-python's LegacyRecordBatch.base_offset is the top-level message's own offset,
            # which for a compressed wrapper is what Kafka calls the batch's last offset.
            assert lb.last_offset == kb.base_offset
            assert int(lb.timestamp_type) == (-1 if kb.timestamp_type is None else kb.timestamp_type)
            assert lb.count is None
            assert lb.producer_id == -1 and lb.base_sequence == -1 and not lb.is_transactional
            for lr, kr in zip(lrecords, krecords):
                assert kr.validate_crc()
                assert lr.crc == kr.checksum
            if lb.compression is Compression.NONE:
                assert lb.crc == krecords[0].checksum
    return kl, kp


# ----------------------------------------------------------------------------------------------
# 1. kafka-python builds, kafkalog decodes


@pytest.mark.parametrize(("magic", "codec"), PAIRS)
@given(data=st.data())
def test_kafka_python_built_batches_decode_identically(magic: int, codec: Compression, data) -> None:
    """A kafka-python-built batch (any records, gaps, producer state) validates deeply in kafkalog
    and yields the appended records and kafka-python's own batch fields."""
    spec = data.draw(specs(magic))
    if codec is not Compression.NONE:
        spec = _with_ballast(spec, magic)
    raw = kp_build(magic, codec, spec)
    kl, kp = assert_same_batches(raw, magic)
    records = [rec for _, recs, _ in kl for rec in recs]
    assert records == expected_records(magic, spec)
    if magic == 2 or codec is not Compression.NONE:
        assert len(kl) == 1
        assert kl[0][0].compression is codec  # the ballast made kafka-python really compress
    else:
        assert len(kl) == len(spec.records)
    if magic == 2:
        batch = kl[0][0]
        pid, epoch, seq, txn = spec.producer or (-1, -1, -1, False)
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (
            pid,
            epoch,
            seq,
            txn,
        )
        assert batch.count == len(spec.records)
        assert batch.base_offset == 0  # kafka-python's offset= is a delta from base offset 0
        assert batch.last_offset == spec.records[-1][0]


def test_kafka_python_empty_v2_batch_is_a_valid_empty_batch() -> None:
    """kafka-python closes an empty v2 builder into a bare 61-byte header (Java's builder writes
    nothing); kafkalog reads it as one valid batch with count 0 and no records."""
    raw = kp_build(2, Compression.NONE, Spec([]))
    assert len(raw) == 61
    kl, kp = assert_same_batches(raw, 2)
    assert kl[0][0].count == 0 and kl[0][1] == []
    # kafkalog's builder follows Java (MemoryRecordsBuilder.close: numRecords == 0 -> EMPTY).
    assert kl_build(2, Compression.NONE, Spec([])) == b""


@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_empty_compressed_wrapper_is_rejected_deeply(magic: int) -> None:
    """kafka-python compresses an empty v0/v1 message set into a wrapper with no inner messages;
    kafkalog passes it shallowly (CRC fine) and rejects it deeply, as Java's DeepRecordsIterator
    ("Found invalid compressed record set with no inner records"). (kafka-python's own v1 reader
    dies on it with an IndexError.)"""
    builder = KPBuilder(magic, int(Compression.GZIP), batch_size=1 << 20)
    builder.close()
    mr = MemoryRecords(bytes(builder.buffer()))
    assert mr.validate() == 1
    with pytest.raises(InvalidRecordError, match="no inner records"):
        mr.validate(deep=True)


# ----------------------------------------------------------------------------------------------
# 2. kafkalog builds, kafka-python decodes


@pytest.mark.parametrize(("magic", "codec"), PAIRS)
@given(data=st.data())
def test_kafkalog_built_batches_decode_identically_in_kafka_python(magic: int, codec: Compression, data) -> None:
    """Runs of kafkalog-built batches (gaps, producer state, LogAppendTime, leader epochs, any base
    offset) pass kafka-python's CRC checks and read back the same records and fields."""
    n_batches = data.draw(st.integers(1, 2))
    next_base = data.draw(st.integers(0, 2**40))
    raw = b""
    expected = []
    for _ in range(n_batches):
        spec = data.draw(
            specs(
                magic,
                base_offsets=st.just(next_base),
                first_gap=True,
                log_append_time=True,
                leader_epoch=True,
            )
        )
        note(f"spec={spec}")
        raw += kl_build(magic, codec, spec)
        expected += expected_records(magic, spec)
        next_base = spec.records[-1][0] + 1 + data.draw(_gaps)
    kl, kp = assert_same_batches(raw, magic)
    assert [rec for _, recs, _ in kp for rec in recs] == expected
    for kb, _, krecords in kp:
        if magic == 2 and kb.timestamp_type == 1:
            # kafka-python reports the batch's max timestamp (the append time) for every record.
            assert all(r.timestamp == kb.max_timestamp for r in krecords)


@given(spec=specs(2, min_size=0, base_offsets=st.integers(0, 2**40), first_gap=True))
def test_kafkalog_empty_builder_gives_kafka_python_nothing(spec: Spec) -> None:
    """kafkalog builds nothing for no records (as Java), and kafka-python sees no batch; any
    non-empty build is one batch for it."""
    raw = kl_build(2, Compression.NONE, spec)
    assert len(kp_view(raw)) == (1 if spec.records else 0)


@given(
    control_type=st.sampled_from([ControlRecordType.ABORT, ControlRecordType.COMMIT]),
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(0, 2**15 - 1),
    coordinator_epoch=st.integers(-(2**31), _INT32_MAX),
    timestamp=st.integers(0, 2**41),
    base_offset=st.integers(0, 2**40),
    leader_epoch=st.integers(-1, _INT32_MAX),
)
def test_end_transaction_markers_are_control_batches_for_kafka_python(
    control_type, producer_id, producer_epoch, coordinator_epoch, timestamp, base_offset, leader_epoch
) -> None:
    """kafkalog's end-transaction marker is, for kafka-python, one transactional control batch
    holding one ControlRecord whose type/version/abort/commit and raw key/value match."""
    raw = bytes(
        RecordBatchBuilder.end_transaction_marker(
            control_type,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp=timestamp,
            base_offset=base_offset,
            partition_leader_epoch=leader_epoch,
        ).buffer
    )
    kl, kp = assert_same_batches(raw, 2)
    (kb, _, krecords), (lb, _, lrecords) = kp[0], kl[0]
    assert len(kp) == 1
    assert kb.is_control_batch and kb.is_transactional
    assert (kb.producer_id, kb.producer_epoch, kb.base_sequence, kb.records_count) == (
        producer_id,
        producer_epoch,
        -1,
        1,
    )
    assert (kb.base_offset, kb.last_offset, kb.leader_epoch) == (base_offset, base_offset, leader_epoch)
    assert (kb.first_timestamp, kb.max_timestamp, kb.timestamp_type) == (timestamp, timestamp, 0)
    [kr], [lr] = krecords, lrecords
    assert isinstance(kr, KPControlRecord)
    assert (kr.version, kr.type) == (0, int(control_type))
    assert kr.commit == (control_type is ControlRecordType.COMMIT)
    assert kr.abort == (control_type is ControlRecordType.ABORT)
    assert kr.key == struct.pack(">hh", 0, int(control_type))
    # kafka-python leaves the marker value raw: version:int16, coordinatorEpoch:int32.
    assert struct.unpack(">hi", kr.value) == (0, coordinator_epoch)
    assert lr.is_control and lr.control_type is control_type and lr.coordinator_epoch == coordinator_epoch
    assert (kr.offset, kr.timestamp, kr.headers) == (lr.offset, lr.timestamp, [])


# ----------------------------------------------------------------------------------------------
# 3. Byte level


@given(spec=specs(2))
def test_uncompressed_v2_batches_are_byte_identical(spec: Spec) -> None:
    """From the same inputs (base offset 0, same first timestamp, same producer state, gaps),
    kafkalog's v2 batch equals kafka-python's byte for byte once the leader epoch is kafka-python's
    0; with kafkalog's default -1 (Java's RecordBatch.NO_PARTITION_LEADER_EPOCH, which Java's
    MemoryRecordsBuilder writes) only bytes 12-15 differ, outside the CRC."""
    kp_raw = kp_build(2, Compression.NONE, spec)
    kl_spec = Spec(spec.records, base_offset=0, producer=spec.producer)
    assert kl_build(2, Compression.NONE, kl_spec, leader_epoch=0) == kp_raw
    java_like = kl_build(2, Compression.NONE, kl_spec)
    assert java_like[12:16] == b"\xff\xff\xff\xff" and kp_raw[12:16] == b"\x00\x00\x00\x00"
    assert java_like[:12] + java_like[16:] == kp_raw[:12] + kp_raw[16:]


@pytest.mark.parametrize("magic", [0, 1])
@given(data=st.data())
def test_uncompressed_legacy_messages_are_byte_identical(magic: int, data) -> None:
    """v0/v1 uncompressed messages (offsets with gaps, timestamps incl. -1, null/empty keys and
    values) are byte-identical between kafkalog and kafka-python."""
    spec = data.draw(specs(magic, base_offsets=st.integers(0, 2**40)))
    assert kl_build(magic, Compression.NONE, spec) == kp_build(magic, Compression.NONE, spec)


def _legacy_value(raw: bytes, magic: int) -> bytes:
    """The value (compressed payload) of the single top-level v0/v1 message in ``raw``."""
    pos = 18 if magic == 0 else 26
    (key_len,) = struct.unpack_from(">i", raw, pos)
    pos += 4 + max(key_len, 0)
    (value_len,) = struct.unpack_from(">i", raw, pos)
    assert pos + 4 + value_len == len(raw)
    return raw[pos + 4 :]


def _kp_decompress(codec: Compression, magic: int, payload: bytes) -> bytes:
    if codec is Compression.LZ4 and magic == 0:
        return kp_codec.lz4_decode_old_kafka(payload)
    return _KP_DECODE[codec](payload)


@pytest.mark.parametrize(("magic", "codec"), COMPRESSED_PAIRS)
@given(data=st.data())
def test_compressed_batches_hold_identical_records(magic: int, codec: Compression, data) -> None:
    """Compressed output differs (codec settings), but each library decompresses the other's
    payload to the same record bytes. v2: header fields equal except length and CRC. v0/v1: the
    inner message sets are identical; the wrappers differ only where kafka-python writes offset 0
    and timestamp 0 and kafkalog, like Java's writeLegacyCompressedWrapperHeader, writes the last
    offset and the max timestamp."""
    spec = _with_ballast(data.draw(specs(magic, base_offsets=st.just(0))), magic)
    kp_raw = kp_build(magic, codec, spec)
    kl_spec = Spec(spec.records, base_offset=0, producer=spec.producer)
    kl_raw = kl_build(magic, codec, kl_spec, leader_epoch=0)
    plain = kl_build(magic, Compression.NONE, kl_spec, leader_epoch=0)
    if magic == 2:
        assert kp_raw[16] == kl_raw[16] == 2
        assert kp_raw[:8] + kp_raw[12:17] + kp_raw[21:61] == kl_raw[:8] + kl_raw[12:17] + kl_raw[21:61]
        kp_payload, kl_payload, records = kp_raw[61:], kl_raw[61:], plain[61:]
    else:
        kp_payload, kl_payload, records = _legacy_value(kp_raw, magic), _legacy_value(kl_raw, magic), plain
        # v1 inner offsets are relative to the base offset (0 here), so both sets are the plain run.
        kp_wrapper = struct.unpack_from(">qiIbb", kp_raw)
        kl_wrapper = struct.unpack_from(">qiIbb", kl_raw)
        assert (kp_wrapper[0], kl_wrapper[0]) == (0, spec.records[-1][0])
        assert kp_wrapper[3:] == kl_wrapper[3:] == (magic, int(codec))
        if magic == 1:
            (kp_ts,) = struct.unpack_from(">q", kp_raw, 18)
            (kl_ts,) = struct.unpack_from(">q", kl_raw, 18)
            assert (kp_ts, kl_ts) == (0, max(r[1] for r in spec.records))
    assert decompress(codec, kp_payload, magic=magic) == records
    assert _kp_decompress(codec, magic, kl_payload) == records


# ----------------------------------------------------------------------------------------------
# Magic-0 LZ4 (Kafka's broken frame header checksum), through an xxhash shim when needed


def test_kafkalog_xxhash32_is_a_trustworthy_shim() -> None:
    """kafkalog's xxhash32 matches published xxHash32 vectors and the header checksum the lz4
    library itself writes, so it can stand in for the xxhash module kafka-python wants."""
    assert xxhash32(b"") == 0x02CC5D05
    assert xxhash32(b"abc") == 0x32D153FF
    import lz4.frame

    for kwargs in ({}, {"store_size": False}, {"content_checksum": True}, {"block_size": lz4.frame.BLOCKSIZE_MAX4MB}):
        frame = lz4.frame.compress(b"payload" * 10, **kwargs)
        hc_pos = 6 + (8 if frame[4] & 0x08 else 0)
        assert frame[hc_pos] == (xxhash32(frame[4:hc_pos]) >> 8) & 0xFF


@contextlib.contextmanager
def kp_xxhash():
    """kafka-python's xxhash: the real module if installed, else (for the duration) a shim over
    kafkalog's xxhash32. A context manager, not a fixture, so it wraps each hypothesis example."""
    if kp_codec.xxhash is not None:
        yield kp_codec.xxhash
        return
    shim = types.SimpleNamespace(
        xxh32=lambda data: types.SimpleNamespace(digest=lambda: struct.pack(">I", xxhash32(bytes(data))))
    )
    with mock.patch.object(kp_codec, "xxhash", shim):
        yield shim


@given(payload=st.binary(max_size=300))
def test_v0_lz4_frames_match_kafka_python_old_kafka_framing_with_xxhash_shim(payload: bytes) -> None:
    """For magic 0, kafkalog's LZ4 frame is byte-identical to kafka-python's lz4_encode_old_kafka:
    no content size, FLG 0x60, BD 0x40 and the header checksum computed over the frame magic too
    (Kafka's bug); each library decodes the other's frame. For magic 1/2 the checksum is correct."""
    with kp_xxhash():
        old = kp_codec.lz4_encode_old_kafka(payload)
        ours = compress(Compression.LZ4, payload, magic=0)
        assert ours == old
        assert ours[4:6] == b"\x60\x40"
        assert ours[6] == (xxhash32(ours[:6]) >> 8) & 0xFF != (xxhash32(ours[4:6]) >> 8) & 0xFF
        assert decompress(Compression.LZ4, old, magic=0) == payload
        assert kp_codec.lz4_decode_old_kafka(ours) == payload
        v1 = compress(Compression.LZ4, payload, magic=1)
        assert v1[6] == (xxhash32(v1[4:6]) >> 8) & 0xFF
        assert kp_codec.lz4_decode(v1) == payload


@given(data=st.data())
def test_v0_lz4_both_directions_with_xxhash_shim(data) -> None:
    """The v0-lz4 pair the matrix may skip: kafka-python-built wrappers decode in kafkalog and
    kafkalog-built ones in kafka-python, with the same records and fields."""
    with kp_xxhash():
        spec = _with_ballast(data.draw(specs(0)), 0)
        raw = kp_build(0, Compression.LZ4, spec)
        kl, _ = assert_same_batches(raw, 0)
        assert [rec for _, recs, _ in kl for rec in recs] == expected_records(0, spec)
        spec2 = data.draw(specs(0, base_offsets=st.integers(0, 2**40), first_gap=True))
        raw2 = kl_build(0, Compression.LZ4, spec2)
        _, kp = assert_same_batches(raw2, 0)
        assert [rec for _, recs, _ in kp for rec in recs] == expected_records(0, spec2)


# ----------------------------------------------------------------------------------------------
# Java parity found while cross-checking (kafka-python cannot tell: it reads both layouts alike)


def test_v1_compressed_inner_offsets_are_relative_to_the_builder_base_offset() -> None:
    """Java's MemoryRecordsBuilder.toInnerOffset writes v1 inner offsets as offset - baseOffset
    (the builder's base offset, e.g. the original batch's after compaction), not relative to the
    first appended record; the absolute offsets read back are the same either way."""
    builder = RecordBatchBuilder(magic=1, compression=Compression.GZIP, base_offset=10)
    builder.append(b"k", b"a", timestamp=5, offset=12)
    builder.append(b"k", b"b", timestamp=6, offset=13)
    raw = bytes(builder.build().buffer)
    inner = decompress(Compression.GZIP, _legacy_value(raw, 1), magic=1)
    first_size = struct.unpack_from(">i", inner, 8)[0]
    inner_offsets = (struct.unpack_from(">q", inner, 0)[0], struct.unpack_from(">q", inner, 12 + first_size)[0])
    assert [r.offset for r in kp_view(raw)[0][2]] == [12, 13]
    assert struct.unpack_from(">q", raw, 0)[0] == 13  # wrapper: the last offset
    assert inner_offsets == (2, 3)
