"""Hostile input: whatever the bytes, reading ends in a ``KafkalogError`` that names a position.

Never IndexError, struct.error, zlib.error, a codec library's own error, MemoryError, or a
hang (every test runs under a 20 s alarm). Starting from valid seed files for every magic x
codec, the tests truncate at every byte, flip bits, write garbage, plant absurd sizes, counts
and record-level lengths (with a recomputed CRC so the record decoder is reached), feed each
codec garbage, truncated payloads and decompression bombs, and check Kafka's magic-0 LZ4 header
checksum quirk.
"""

from __future__ import annotations

import functools
import struct
import tracemalloc
import zlib
from pathlib import Path

import pytest
from conftest import DATA, MATRIX, SHARED_CORPUS, examples
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import (
    Compression,
    ControlRecordType,
    CorruptRecordError,
    FileRecords,
    InvalidRecordError,
    KafkalogError,
    MemoryRecords,
    RecordBatchBuilder,
    RecordTooLargeError,
    TimestampType,
    TruncatedRecordError,
    UnsupportedCodecError,
)
from kafkalog import compression as compression_module
from kafkalog.compression import compress, xxhash32
from kafkalog.crc import crc32c
from kafkalog.legacy_record import encode_message
from kafkalog.recordbatch import encode_batch, encode_record
from kafkalog.varint import encode_varint, encode_varlong

INT32_MAX = 2**31 - 1
LZ4_MAGIC = bytes.fromhex("04224d18")


# ------------------------------------------------------------------------------------------------
# Seeds and helpers


def _builder(magic: int, codec: Compression, **kw) -> RecordBatchBuilder:
    return RecordBatchBuilder(magic=magic, compression=codec, **kw)


def make_seed(magic: int, codec: Compression, value_size: int = 40) -> bytes:
    """Two builders' worth of valid batches (five plain messages for uncompressed v0/v1)."""
    v2 = magic == 2
    first = _builder(
        magic,
        codec,
        base_offset=0,
        **(dict(producer_id=7, producer_epoch=1, base_sequence=0, partition_leader_epoch=3) if v2 else {}),
    )
    first.append(None, b"v0", timestamp=1_000)
    first.append(b"k1", b"", timestamp=1_001, headers=[("h\u00e9", b"x"), ("n", None)] if v2 else ())
    first.append(b"k2", b"x" * value_size, timestamp=999)
    second = _builder(
        magic,
        codec,
        base_offset=10,
        **(dict(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=5_000) if magic else {}),
    )
    second.append(b"a", None, timestamp=2_000)
    second.append(b"b", b"yy", timestamp=2_001)
    return bytes(first.build().buffer) + bytes(second.build().buffer)


def make_txn_seed() -> bytes:
    """A transactional v2 batch followed by its COMMIT marker."""
    b = RecordBatchBuilder(producer_id=99, producer_epoch=2, base_sequence=5, is_transactional=True)
    b.append(b"t", b"1", timestamp=10)
    b.append(b"t", b"2", timestamp=11)
    marker = RecordBatchBuilder.end_transaction_marker(
        ControlRecordType.COMMIT, producer_id=99, producer_epoch=2, coordinator_epoch=4, timestamp=12, base_offset=2
    )
    return bytes(b.build().buffer) + bytes(marker.buffer)


SEEDS: dict[str, bytes] = {f"v{m}-{c.kafka_name}": make_seed(m, c) for m, c in MATRIX}
SEEDS["v2-txn"] = make_txn_seed()
SEED_IDS = sorted(SEEDS)


@functools.lru_cache(maxsize=None)
def big_seed(magic: int, codec: Compression) -> bytes:
    """A larger seed (a ~60 KB compressible value: several snappy/lz4 blocks)."""
    return make_seed(magic, codec, value_size=60_000)


def entry_bounds(buf: bytes) -> list[tuple[int, int]]:
    """(start, end) of each top-level entry of valid data, read from the size fields."""
    out, pos = [], 0
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        out.append((pos, pos + 12 + size))
        pos += 12 + size
    return out


def magic_of(buf: bytes, start: int) -> int:
    return buf[start + 16]


def recrc_v2(batch: bytearray | bytes, start: int = 0) -> bytes:
    """Recompute the CRC-32C of the v2 batch at ``start`` (bytes 21 to the end)."""
    batch = bytearray(batch)
    (length,) = struct.unpack_from(">i", batch, start + 8)
    end = start + 12 + length
    struct.pack_into(">I", batch, start + 17, crc32c(bytes(batch[start + 21 : end])))
    return bytes(batch)


def recrc_legacy(message: bytearray | bytes, start: int = 0) -> bytes:
    """Recompute the CRC-32 of the v0/v1 message at ``start`` (magic to the end)."""
    message = bytearray(message)
    (size,) = struct.unpack_from(">i", message, start + 8)
    struct.pack_into(">I", message, start + 12, zlib.crc32(bytes(message[start + 16 : start + 12 + size])))
    return bytes(message)


def v2_batch(payload: bytes, *, count: int, codec_id: int = 0, last_offset_delta: int | None = None) -> bytes:
    """A v2 batch around ``payload`` taken as is (not compressed), with attributes carrying
    ``codec_id`` and a correct CRC."""
    raw = bytearray(
        encode_batch(
            payload,
            count=count,
            base_offset=0,
            last_offset_delta=max(count - 1, 0) if last_offset_delta is None else last_offset_delta,
            base_timestamp=0,
            max_timestamp=0,
        )
    )
    struct.pack_into(">h", raw, 21, codec_id)
    return recrc_v2(raw)


def legacy_wrapper(magic: int, codec_id: int, value: bytes | None, offset: int = 0) -> bytes:
    """A v0/v1 message with ``codec_id`` in its attributes and ``value`` taken as is."""
    return encode_message(offset, magic, None, value, timestamp=0, attributes=codec_id)


def wrap(magic: int, codec_id: int, payload: bytes) -> bytes:
    """A batch of ``magic`` whose (compressed) payload is exactly ``payload``, CRC correct."""
    if magic == 2:
        return v2_batch(payload, count=1, codec_id=codec_id)
    return legacy_wrapper(magic, codec_id, payload)


def outcome(fn, buf_len: int, file: Path | None = None):
    """Run ``fn``; return ``("ok", result)`` or ``(error type, position)``. Anything but a
    KafkalogError propagates and fails the test; a KafkalogError must carry a position inside
    the data (and, read from a file, the file's name)."""
    try:
        return ("ok", fn())
    except KafkalogError as e:
        assert e.position is not None, f"{type(e).__name__} without a position: {e}"
        assert 0 <= e.position <= buf_len, f"position {e.position} outside the {buf_len}-byte data: {e}"
        assert str(e.position) in str(e)
        if file is not None:
            assert e.file == str(file) and str(file) in str(e), e
        return (type(e), e.position)


def deep_read(records) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in records.records()]


def read_everything(buf: bytes, path: Path) -> dict[str, tuple]:
    """Every read path over ``buf`` in memory and from a file; each must end cleanly or in a
    positioned KafkalogError. Returns the outcomes by path."""
    n = len(buf)
    path.write_bytes(buf)
    out = {}
    for name, view in (("bytes", buf), ("bytearray", bytearray(buf)), ("memoryview", memoryview(buf))):
        mr = MemoryRecords(view)
        out[f"{name}.validate"] = outcome(lambda: mr.validate(deep=True), n)
        out[f"{name}.records"] = outcome(lambda: deep_read(mr), n)
        out[f"{name}.shallow"] = outcome(
            lambda: [(b.base_offset, b.last_offset, b.size_in_bytes) for b in mr.batches()], n
        )
        out[f"{name}.valid_bytes"] = outcome(lambda: mr.valid_bytes, n)
        out[f"{name}.is_valid"] = outcome(lambda: [b.is_valid() for b in mr.batches()], n)
    with FileRecords.open(path) as fr:
        out["file.validate"] = outcome(lambda: fr.validate(deep=True), n, path)
        out["file.records"] = outcome(lambda: deep_read(fr), n, path)
        out["file.shallow"] = outcome(
            lambda: [(b.base_offset, b.last_offset, b.size_in_bytes) for b in fr.batches()], n, path
        )
        out["file.valid_bytes"] = outcome(lambda: fr.valid_bytes, n, path)
    # The same bytes give the same verdict however they are held.
    for name in ("bytearray", "memoryview", "file"):
        assert out[f"{name}.validate"] == out["bytes.validate"], name
        assert out[f"{name}.shallow"] == out["bytes.shallow"], name
        assert out[f"{name}.valid_bytes"] == out["bytes.valid_bytes"], name
        assert out[f"{name}.records"][0] == out["bytes.records"][0], name
    return out


# ------------------------------------------------------------------------------------------------
# (1) Truncation at every byte


def _check_cut(records_obj, bounds: list[tuple[int, int]], cut: int) -> None:
    whole = [(s, e) for s, e in bounds if e <= cut]
    end_of_whole = whole[-1][1] if whole else 0
    got = list(records_obj.batches())
    assert [b.size_in_bytes for b in got] == [e - s for s, e in whole]
    assert records_obj.valid_bytes == end_of_whole
    if cut == end_of_whole:
        assert records_obj.validate(deep=True) == len(whole)
    else:
        with pytest.raises(TruncatedRecordError) as info:
            records_obj.validate(deep=True)
        assert info.value.position == end_of_whole
        with pytest.raises(TruncatedRecordError) as info:
            list(records_obj.batches(strict=True))
        assert info.value.position == end_of_whole
        assert len(list(records_obj.records())) >= len(whole)  # whole batches still decode


@pytest.mark.parametrize("seed", SEED_IDS)
def test_truncation_at_every_byte(seed, tmp_path):
    """For every cut point of a small seed (memory, a real truncated file and a file slice):
    shallow iteration yields exactly the whole batches and stops, strict iteration and
    validate() raise TruncatedRecordError at the start of the partial batch."""
    buf = SEEDS[seed]
    bounds = entry_bounds(buf)
    full = tmp_path / "full.log"
    full.write_bytes(buf)
    cut_file = tmp_path / "cut.log"
    with FileRecords.open(full) as fr:
        for cut in range(len(buf) + 1):
            _check_cut(MemoryRecords(buf[:cut]), bounds, cut)
            _check_cut(MemoryRecords(memoryview(buf)[:cut]), bounds, cut)
            _check_cut(fr.slice(0, cut), bounds, cut)
            cut_file.write_bytes(buf[:cut])
            with FileRecords.open(cut_file) as cf:
                _check_cut(cf, bounds, cut)


@examples(30)
@given(data=st.data(), magic_codec=st.sampled_from(MATRIX))
def test_truncation_of_large_batches(data, magic_codec):
    """The same for seeds holding a ~60 KB value, at a sampled cut point."""
    buf = big_seed(*magic_codec)
    cut = data.draw(st.integers(0, len(buf)))
    _check_cut(MemoryRecords(buf[:cut]), entry_bounds(buf), cut)


# ------------------------------------------------------------------------------------------------
# (2) Bit flips


def _crc_start(buf: bytes, start: int) -> int:
    """First byte (relative to the entry) protected by the CRC or being the CRC itself."""
    return 17 if magic_of(buf, start) == 2 else 12


def _check_flip(buf: bytes, flipped: bytes, byte: int, tmp_path: Path) -> None:
    bounds = entry_bounds(buf)
    start, end = next((s, e) for s, e in bounds if s <= byte < e)
    rel = byte - start
    out = read_everything(flipped, tmp_path / "flip.log")
    verdict = out["bytes.validate"]
    if verdict[0] != "ok":
        # Nothing before the damaged entry is blamed, and the entries before it still validate.
        assert verdict[1] >= start
        good = [b.size_in_bytes for b in _validated_prefix(flipped)]
        assert good[: bounds.index((start, end))] == [e - s for s, e in bounds[: bounds.index((start, end))]]
    if rel >= _crc_start(buf, start):
        assert verdict[0] is CorruptRecordError, f"flip at {byte} (entry byte {rel}) gave {verdict}"
    elif magic_of(buf, start) < 2 and rel < 8 and not (magic_of(buf, start) == 1 and buf[start + 17] & 0x07):
        # A v0/v1 message's own offset, or a v0 wrapper's (inner offsets are absolute): harmless.
        assert verdict == ("ok", len(bounds))
    elif magic_of(buf, start) == 2 and (rel < 8 or 12 <= rel < 16):
        # Base offset and partition leader epoch: outside the CRC and harmless.
        assert verdict == ("ok", len(bounds))
        before, after = deep_read(MemoryRecords(buf)), deep_read(MemoryRecords(flipped))
        assert [r[1:] for r in before] == [r[1:] for r in after]
    # Elsewhere outside the CRC (the size fields, the v2 magic, a v1 wrapper's offset),
    # read_everything already checked: a clean pass or a positioned KafkalogError.


def _validated_prefix(buf: bytes):
    out = []
    try:
        for b in MemoryRecords(buf).batches(validate=True, strict=True):
            out.append(b)
    except KafkalogError:
        pass
    return out


def _flip(buf: bytes, bit: int) -> bytes:
    out = bytearray(buf)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


@examples(200)
@given(data=st.data(), seed=st.sampled_from(SEED_IDS))
def test_random_bit_flip(tmp_path_factory, data, seed):
    """A flipped bit anywhere: inside the CRC-covered range it is a CorruptRecordError; the v2
    base offset and leader epoch are harmless; elsewhere a pass or a positioned error."""
    buf = SEEDS[seed]
    bit = data.draw(st.integers(0, len(buf) * 8 - 1), label="bit")
    _check_flip(buf, _flip(buf, bit), bit // 8, tmp_path_factory.mktemp("flip"))


@pytest.mark.parametrize("seed", SEED_IDS)
def test_bit_flip_in_every_byte(seed):
    """Every byte of a small seed, one bit each (cycling through the eight): the CRC-covered
    ones must all be caught as CorruptRecordError."""
    buf = SEEDS[seed]
    bounds = entry_bounds(buf)
    for byte in range(len(buf)):
        flipped = _flip(buf, byte * 8 + byte % 8)
        start = next(s for s, e in bounds if s <= byte < e)
        verdict = outcome(lambda: MemoryRecords(flipped).validate(deep=True), len(buf))
        outcome(lambda: deep_read(MemoryRecords(flipped)), len(buf))
        if byte - start >= _crc_start(buf, start):
            assert verdict[0] is CorruptRecordError, (byte, verdict)
        elif verdict[0] != "ok":
            assert verdict[1] >= start


# ------------------------------------------------------------------------------------------------
# (3) Garbage at a random position


@examples(150)
@given(
    data=st.data(),
    seed=st.sampled_from(SEED_IDS),
    garbage=st.binary(min_size=1, max_size=24),
    insert=st.booleans(),
)
def test_garbage_at_random_position(tmp_path_factory, data, seed, garbage, insert):
    """Garbage written over (or into) the data at any position: every read path ends cleanly or
    in a positioned KafkalogError, never blaming bytes before the damaged entry, and the entries
    before it still validate."""
    buf = SEEDS[seed]
    pos = data.draw(st.integers(0, len(buf)), label="pos")
    damaged = buf[:pos] + garbage + buf[pos + (0 if insert else len(garbage)) :]
    bounds = entry_bounds(buf)
    intact = [(s, e) for s, e in bounds if e <= pos]
    out = read_everything(damaged, tmp_path_factory.mktemp("garbage") / "g.log")
    verdict = out["bytes.validate"]
    if verdict[0] != "ok":
        assert verdict[1] >= (intact[-1][1] if intact else 0)
    assert [b.size_in_bytes for b in _validated_prefix(damaged)][: len(intact)] == [e - s for s, e in intact]


@examples(100)
@given(blob=st.binary(max_size=300))
def test_pure_garbage(tmp_path_factory, blob):
    """Arbitrary bytes are never more than a positioned KafkalogError."""
    read_everything(blob, tmp_path_factory.mktemp("blob") / "b.log")


@examples(100)
@given(
    magic=st.sampled_from([0, 1, 2]),
    body=st.binary(min_size=0, max_size=200),
    size_delta=st.integers(-3, 3),
)
def test_garbage_behind_a_plausible_header(tmp_path_factory, magic, body, size_delta):
    """Garbage after a header with a plausible size and magic (so framing accepts it and the
    decoders see the garbage)."""
    size = max(len(body) + 5 + size_delta, 0)
    buf = struct.pack(">qi", 0, size) + b"\x00\x00\x00\x00" + bytes([magic]) + body
    read_everything(buf, tmp_path_factory.mktemp("plausible") / "p.log")


# ------------------------------------------------------------------------------------------------
# (4) Absurd sizes, counts and record lengths


@pytest.mark.parametrize("seed", SEED_IDS)
@pytest.mark.parametrize("size", [-1, -(2**31), 0, 1, 13])
def test_size_below_minimum_is_corrupt(seed, size):
    """A size field below 14 (the smallest v0 message) is corruption, found by framing."""
    buf = bytearray(SEEDS[seed])
    struct.pack_into(">i", buf, 8, size)
    for call in (lambda: list(MemoryRecords(bytes(buf)).batches()), lambda: MemoryRecords(bytes(buf)).validate()):
        with pytest.raises(CorruptRecordError) as info:
            call()
        assert info.value.position == 0


@pytest.mark.parametrize("seed", [s for s in SEED_IDS if s.startswith("v2")])
@pytest.mark.parametrize("size", [14, 20, 48])
def test_v2_size_below_batch_overhead_is_corrupt(seed, size):
    """A v2 entry smaller than its 61-byte header is corrupt (when the data holds that much)."""
    buf = bytearray(SEEDS[seed])
    struct.pack_into(">i", buf, 8, size)
    with pytest.raises(CorruptRecordError) as info:
        list(MemoryRecords(bytes(buf)).batches())
    assert info.value.position == 0


@pytest.mark.parametrize("seed", SEED_IDS)
def test_huge_size_is_a_partial_tail(seed, tmp_path):
    """A size of 2**31-1 runs past the data: a partial tail (more could arrive), not a crash or
    an allocation of 2 GB."""
    buf = bytearray(SEEDS[seed])
    struct.pack_into(">i", buf, 8, INT32_MAX)
    for records_obj in (MemoryRecords(bytes(buf)), FileRecords.open(tmp_path.joinpath("h.log"), create=True)):
        if isinstance(records_obj, FileRecords):
            records_obj.append(bytes(buf))
        assert list(records_obj.batches()) == []
        assert records_obj.valid_bytes == 0
        with pytest.raises(TruncatedRecordError) as info:
            records_obj.validate()
        assert info.value.position == 0


@pytest.mark.parametrize("seed", SEED_IDS)
def test_size_above_max_batch_size_is_corrupt(seed):
    """A size above the reader's max_batch_size is corrupt, even if the data holds it."""
    buf = SEEDS[seed]
    limit = entry_bounds(buf)[0][1] - 13
    with pytest.raises(CorruptRecordError) as info:
        list(MemoryRecords(buf, max_batch_size=limit).batches())
    assert info.value.position == 0


@pytest.mark.parametrize("seed", SEED_IDS)
def test_size_pointing_into_the_next_entry_is_corrupt(seed):
    """A size a few bytes too large (still within the data) changes what the CRC covers."""
    buf = SEEDS[seed]
    bounds = entry_bounds(buf)
    if len(bounds) < 2:
        pytest.skip("needs two entries")
    for delta in (-5, -1, 1, 5):
        damaged = bytearray(buf)
        struct.pack_into(">i", damaged, 8, bounds[0][1] - 12 + delta)
        verdict = outcome(lambda: MemoryRecords(bytes(damaged)).validate(deep=True), len(buf))
        assert verdict[0] in (CorruptRecordError, TruncatedRecordError) and verdict[1] >= 0, (delta, verdict)
        assert outcome(lambda: MemoryRecords(bytes(damaged)).validate(), len(buf))[0] != "ok"


def _one_record() -> bytes:
    return encode_record(0, 0, b"k", b"v")


@pytest.mark.parametrize("count", [-1, -(2**31)])
def test_negative_record_count(count):
    """A negative v2 record count (CRC recomputed) is an InvalidRecordError at the count field."""
    raw = bytearray(v2_batch(_one_record(), count=1))
    struct.pack_into(">i", raw, 57, count)
    buf = recrc_v2(raw)
    for call in (
        lambda: MemoryRecords(buf).validate(),
        lambda: MemoryRecords(buf).validate(deep=True),
        lambda: list(MemoryRecords(buf).records()),
    ):
        with pytest.raises(InvalidRecordError) as info:
            call()
        assert info.value.position == 57


@pytest.mark.parametrize("count", [2, 3, 1000, INT32_MAX])
@pytest.mark.parametrize("codec", list(Compression))
def test_record_count_larger_than_payload(count, codec):
    """A count the payload cannot hold is an InvalidRecordError inside the batch (v2, any
    codec, lastOffsetDelta consistent with the count so only the payload disagrees)."""
    buf = recrc_v2(
        bytearray(
            encode_batch(
                _one_record(),
                count=count,
                base_offset=0,
                last_offset_delta=count - 1,
                base_timestamp=0,
                max_timestamp=0,
                compression=codec,
            )
        )
    )
    with pytest.raises(InvalidRecordError) as info:
        MemoryRecords(buf).validate(deep=True)
    assert 0 <= info.value.position <= len(buf)


@pytest.mark.parametrize("codec", list(Compression))
def test_record_count_smaller_than_payload(codec):
    """Bytes left after the declared records are an InvalidRecordError."""
    payload = _one_record() + _one_record()
    buf = encode_batch(
        payload, count=1, base_offset=0, last_offset_delta=1, base_timestamp=0, max_timestamp=0, compression=codec
    )
    with pytest.raises(InvalidRecordError):
        MemoryRecords(buf).validate(deep=True)


def _rec(body: bytes) -> bytes:
    """A record whose length prefix matches ``body``."""
    return encode_varint(len(body)) + body


#: attributes, timestampDelta, offsetDelta
_PREFIX = b"\x00" + encode_varlong(0) + encode_varint(0)
_NULL = encode_varint(-1)
#: everything before the header count of a record with null key and value
_NO_KV = _PREFIX + _NULL + _NULL

BAD_RECORDS = {
    "length-0": encode_varint(0) + b"\x00" * 6,
    "length-negative": encode_varint(-1) + b"\x00" * 6,
    "length-minus-2**31": encode_varint(-(2**31)) + b"\x00" * 6,
    "length-past-batch": encode_varint(50) + _NO_KV + b"\x00",
    "length-huge": encode_varint(INT32_MAX) + _NO_KV + b"\x00",
    "length-too-short": encode_varint(3) + _NO_KV + b"\x00",
    "length-too-long": encode_varint(8) + _NO_KV + b"\x00" + b"\x00\x00",
    "length-6-byte-varint": b"\x86\x80\x80\x80\x80\x00" + _NO_KV + b"\x00",
    "length-varint-overflows-32-bits": b"\x8c\x80\x80\x80\x7f" + _NO_KV + b"\x00",
    "length-runs-off-the-end": b"\x80\x80\x80",
    "timestamp-11-byte-varlong": _rec(b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00" + _NULL + _NULL + b"\x00"),
    "offset-delta-6-byte-varint": _rec(b"\x00\x00" + b"\x80" * 5 + b"\x00" + _NULL + _NULL + b"\x00"),
    "key-length-minus-2": _rec(_PREFIX + encode_varint(-2) + _NULL + b"\x00"),
    "key-length-minus-2**31": _rec(_PREFIX + encode_varint(-(2**31)) + _NULL + b"\x00"),
    "key-length-past-record": _rec(_PREFIX + encode_varint(100) + b"abc" + _NULL + b"\x00"),
    "key-length-int32-max": _rec(_PREFIX + encode_varint(INT32_MAX) + _NULL + b"\x00"),
    "value-length-minus-3": _rec(_PREFIX + _NULL + encode_varint(-3) + b"\x00"),
    "value-length-past-record": _rec(_PREFIX + _NULL + encode_varint(40) + b"abc" + b"\x00"),
    "header-count-huge": _rec(_NO_KV + encode_varint(2**30)),
    "header-count-int32-max": _rec(_NO_KV + encode_varint(INT32_MAX) + b"\x00" * 8),
    "header-count-negative": _rec(_NO_KV + encode_varint(-5)),
    "header-count-more-than-present": _rec(_NO_KV + encode_varint(3) + encode_varint(1) + b"h" + _NULL),
    "header-key-length-negative": _rec(_NO_KV + encode_varint(1) + encode_varint(-3) + _NULL),
    "header-key-length-null": _rec(_NO_KV + encode_varint(1) + _NULL + _NULL),
    "header-key-length-past-record": _rec(_NO_KV + encode_varint(1) + encode_varint(90) + b"h"),
    "header-value-length-minus-2": _rec(_NO_KV + encode_varint(1) + encode_varint(1) + b"h" + encode_varint(-2)),
    "header-value-length-past-record": _rec(
        _NO_KV + encode_varint(1) + encode_varint(1) + b"h" + encode_varint(70) + b"v"
    ),
    "header-key-6-byte-varint": _rec(_NO_KV + encode_varint(1) + b"\x82\x80\x80\x80\x80\x00" + b"h" + _NULL),
    "truncated-after-attributes": _rec(b"\x00"),
}


@pytest.mark.parametrize("name", sorted(BAD_RECORDS))
@pytest.mark.parametrize("codec", list(Compression))
def test_bad_record_lengths_are_invalid(name, codec, tmp_path):
    """Crafted record-level damage inside a batch whose CRC is correct (recomputed over bytes
    21..end) reaches the record decoder, which must raise InvalidRecordError positioned inside
    the batch — for uncompressed and compressed batches, in memory and from a file."""
    payload = BAD_RECORDS[name]
    if codec is Compression.NONE:
        raw = bytearray(v2_batch(b"", count=0))
        raw += payload
        struct.pack_into(">i", raw, 8, len(raw) - 12)
        struct.pack_into(">i", raw, 57, 1)
        buf = recrc_v2(raw)
    else:
        buf = encode_batch(
            payload, count=1, base_offset=0, last_offset_delta=0, base_timestamp=0, max_timestamp=0, compression=codec
        )
    (batch,) = MemoryRecords(buf).batches()
    assert batch.crc == crc32c(buf[21:])  # the CRC is right: only the record decoder can object
    path = tmp_path / "bad.log"
    path.write_bytes(buf)
    with FileRecords.open(path) as fr:
        calls = [
            lambda: MemoryRecords(buf).validate(deep=True),
            lambda: list(MemoryRecords(buf).records()),
            lambda: fr.validate(deep=True),
            lambda: list(fr.records()),
        ]
        for call in calls:
            with pytest.raises(InvalidRecordError) as info:
                call()
            assert 0 <= info.value.position <= len(buf), info.value


def test_record_errors_stay_inside_their_batch(tmp_path):
    """A record whose fields overrun its batch (CRC correct) must be reported inside that batch,
    the same way whether the next batch follows in memory or not: the decoder must not read
    the next batch's bytes."""
    # Record length 6 = rest of the batch, but the timestamp varlong keeps going past the end.
    body = b"\x00" + b"\x80" * 5
    raw = bytearray(v2_batch(b"", count=0)) + encode_varint(len(body)) + body
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">i", raw, 57, 1)
    bad = recrc_v2(raw)
    follower = v2_batch(_one_record(), count=1)
    for buf in (bad, bad + follower):
        path = tmp_path / "b.log"
        path.write_bytes(buf)
        with FileRecords.open(path) as fr:
            calls = {
                "memory": lambda: MemoryRecords(buf).validate(deep=True),
                "memory-records": lambda: list(MemoryRecords(buf).records()),
                "file": lambda: fr.validate(deep=True),
                "file-records": lambda: list(fr.records()),
            }
            for label, call in calls.items():
                with pytest.raises(InvalidRecordError) as info:
                    call()
                assert 61 <= info.value.position <= len(bad), (label, len(buf), info.value)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(
    "where, value",
    [("key", -2), ("key", -(2**31)), ("key", INT32_MAX), ("key", 100), ("value", -2), ("value", 50), ("value", 0)],
)
def test_legacy_bad_key_value_lengths(magic, where, value):
    """v0/v1 key/value lengths that do not fill the message exactly (CRC recomputed) are an
    InvalidRecordError positioned inside the message."""
    msg = bytearray(encode_message(0, magic, b"key", b"value", timestamp=0))
    key_at = 18 if magic == 0 else 26
    struct.pack_into(">i", msg, key_at if where == "key" else key_at + 4 + 3, value)
    buf = recrc_legacy(msg)
    for call in (lambda: MemoryRecords(buf).validate(), lambda: list(MemoryRecords(buf).records())):
        with pytest.raises(InvalidRecordError) as info:
            call()
        assert 0 <= info.value.position <= len(buf)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
@pytest.mark.parametrize(
    "damage", ["inner-size-negative", "inner-size-huge", "inner-stray-bytes", "inner-bad-crc", "inner-nested", "empty"]
)
def test_legacy_bad_inner_messages(magic, codec, damage):
    """Damaged inner message sets of v0/v1 wrappers end in a positioned KafkalogError."""
    inner = bytearray(
        encode_message(0, magic, b"k", b"v", timestamp=1) + encode_message(1, magic, None, b"w", timestamp=2)
    )
    if damage == "inner-size-negative":
        struct.pack_into(">i", inner, 8, -7)
    elif damage == "inner-size-huge":
        struct.pack_into(">i", inner, 8, INT32_MAX)
    elif damage == "inner-stray-bytes":
        inner += b"\x00\x01\x02"
    elif damage == "inner-bad-crc":
        inner[-1] ^= 0xFF
    elif damage == "inner-nested":
        inner = bytearray(encode_message(0, magic, None, bytes(inner), timestamp=0, attributes=int(codec)))
    else:
        inner = bytearray()
    buf = legacy_wrapper(magic, int(codec), compress(codec, bytes(inner), magic=magic), offset=1)
    with pytest.raises((InvalidRecordError, CorruptRecordError)) as info:
        MemoryRecords(buf).validate(deep=True)
    assert info.value.position is not None


# ------------------------------------------------------------------------------------------------
# (5) Codecs: garbage, truncated payloads, bombs, unsupported ids

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


def _codec_magics(codec: Compression) -> list[int]:
    return [2] if codec is Compression.ZSTD else [0, 1, 2]


CODEC_MAGIC = [(c, m) for c in CODECS for m in _codec_magics(c)]
CODEC_MAGIC_IDS = [f"{c.kafka_name}-v{m}" for c, m in CODEC_MAGIC]


@pytest.mark.parametrize("codec, magic", CODEC_MAGIC, ids=CODEC_MAGIC_IDS)
def test_garbage_payload_is_corrupt(codec, magic):
    """A payload that is not the codec's format (CRC correct, so decompression is reached) is a
    CorruptRecordError positioned in the batch."""
    buf = wrap(magic, int(codec), b"this is not a compressed payload, honestly" * 3)
    with pytest.raises(CorruptRecordError) as info:
        MemoryRecords(buf).validate(deep=True)
    assert 0 <= info.value.position <= len(buf)


@examples(150)
@given(codec_magic=st.sampled_from(CODEC_MAGIC), payload=st.binary(max_size=64), prefix=st.booleans())
def test_random_payload_for_each_codec(codec_magic, payload, prefix):
    """Random payloads — optionally behind the codec's own magic bytes, so the library parses
    further — end cleanly or in a positioned KafkalogError."""
    codec, magic = codec_magic
    if prefix:
        payload = {
            Compression.GZIP: b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00",
            Compression.SNAPPY: b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01",
            Compression.LZ4: LZ4_MAGIC + b"\x60\x40\x82",
            Compression.ZSTD: b"\x28\xb5\x2f\xfd",
        }[codec] + payload
    buf = wrap(magic, int(codec), payload)
    verdict = outcome(lambda: MemoryRecords(buf).validate(deep=True), len(buf))
    assert verdict[0] in ("ok", CorruptRecordError, InvalidRecordError, RecordTooLargeError)


@pytest.mark.parametrize("codec, magic", CODEC_MAGIC, ids=CODEC_MAGIC_IDS)
def test_truncated_compressed_payload(codec, magic):
    """A valid compressed payload cut at every byte (CRC recomputed around the cut payload) is
    a positioned CorruptRecordError — or, where the codec has no end marker (xerial snappy cut
    between blocks), an InvalidRecordError because the records no longer add up."""
    seed = make_seed(magic, codec)
    entry = seed[: entry_bounds(seed)[0][1]]
    # v2: the payload follows the 61-byte header; v0/v1 wrapper: header, null key, value length.
    at = 61 if magic == 2 else (18 if magic == 0 else 26) + 8
    payload = entry[at:]

    def with_payload(cut_payload: bytes) -> bytes:
        out = bytearray(entry[:at] + cut_payload)
        struct.pack_into(">i", out, 8, len(out) - 12)
        if magic == 2:
            return recrc_v2(out)
        struct.pack_into(">i", out, at - 4, len(cut_payload))
        return recrc_legacy(out)

    assert with_payload(payload) == entry
    expected = (CorruptRecordError, InvalidRecordError) if codec is Compression.SNAPPY else CorruptRecordError
    for cut in range(len(payload)):
        buf = with_payload(payload[:cut])
        with pytest.raises(expected) as info:
            MemoryRecords(buf).validate(deep=True)
        assert 0 <= info.value.position <= len(buf), (cut, info.value)


@functools.lru_cache(maxsize=None)
def _bomb(codec: Compression, magic: int) -> bytes:
    """~10 MB of zeros compressed with ``codec``, framed as a batch of ``magic``."""
    return wrap(magic, int(codec), compress(codec, bytes(10 << 20), magic=magic))


@pytest.mark.parametrize("codec, magic", CODEC_MAGIC, ids=CODEC_MAGIC_IDS)
def test_decompression_bomb_is_refused_under_the_cap(codec, magic):
    """A payload inflating to 10 MB under a 1 MiB cap raises RecordTooLargeError without
    allocating anything near the full output."""
    buf = _bomb(codec, magic)
    mr = MemoryRecords(buf, max_decompressed_size=1 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError) as info:
            mr.validate(deep=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 <= info.value.position <= len(buf)
    assert peak < 5 << 20, f"{peak} bytes allocated to refuse a 10 MB bomb under a 1 MiB cap"


@pytest.mark.parametrize("codec, magic", CODEC_MAGIC, ids=CODEC_MAGIC_IDS)
def test_small_payload_costs_its_size_not_the_cap(codec, magic):
    """Decompressing a few hundred bytes under the default 64 MiB cap allocates in proportion
    to the output, not the cap (the cap bounds a bomb; it is not a buffer size)."""
    seed = make_seed(magic, codec)
    mr = MemoryRecords(seed)
    tracemalloc.start()
    try:
        assert mr.validate(deep=True) >= 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak} bytes allocated to decompress a {len(seed)}-byte seed"


@pytest.mark.parametrize("codec, magic", CODEC_MAGIC, ids=CODEC_MAGIC_IDS)
def test_generous_cap_is_not_a_memory_error(codec, magic):
    """A reader configured with a huge cap (1 TiB, 2**62) still decodes small batches: no
    MemoryError from sizing a buffer by the cap."""
    seed = make_seed(magic, codec)
    for cap in (1 << 40, 1 << 62):
        assert MemoryRecords(seed, max_decompressed_size=cap).validate(deep=True) >= 1


def test_many_gzip_members_cost_linear_work(monkeypatch):
    """Concatenated gzip members (Java's GZIPInputStream reads them all) are decompressed with
    work proportional to the payload: the input handed to zlib must not be the whole remaining
    payload again for every member (quadratic: a few MB of tiny members would take minutes)."""
    inner = b"".join(encode_message(i, 0, b"k", b"v%d" % i) for i in range(800))
    payload = b"".join(compress(Compression.GZIP, inner[i : i + 1]) for i in range(len(inner)))
    assert len(payload) > 20 * len(inner)
    fed = 0
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args, **kwargs):
            self._d = real(*args, **kwargs)

        def decompress(self, data, max_length=0):
            nonlocal fed
            fed += len(data)
            return self._d.decompress(data, max_length)

        def __getattr__(self, name):
            return getattr(self._d, name)

    monkeypatch.setattr(compression_module.zlib, "decompressobj", Counting)
    buf = legacy_wrapper(0, int(Compression.GZIP), payload)
    assert [r.offset for r in MemoryRecords(buf).records()] == list(range(800))
    assert fed <= 4 * len(payload), f"zlib was fed {fed} bytes for a {len(payload)}-byte payload"


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@pytest.mark.parametrize("framing", ["bare", "xerial"])
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_snappy_block_declaring_2gb_is_refused_before_decompressing(framing, magic, monkeypatch):
    """A snappy block whose preamble declares 2 GB is refused from the preamble alone
    (RecordTooLargeError), with the default cap too: the library's decompressor is never called."""
    block = _uvarint(2**31) + b"\x00" * 16
    xerial = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(block)) + block
    payload = block if framing == "bare" else xerial

    class NoDecompress:
        def decompress(self, data):
            raise AssertionError("snappy.decompress called on a block declaring 2 GB")

    monkeypatch.setattr(compression_module, "_snappy_module", lambda: NoDecompress())
    buf = wrap(magic, int(Compression.SNAPPY), payload)
    for mr in (MemoryRecords(buf), MemoryRecords(buf, max_decompressed_size=1 << 20)):
        with pytest.raises(RecordTooLargeError) as info:
            mr.validate(deep=True)
        assert info.value.position is not None


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_with_legacy_magic_is_unsupported(magic):
    """A v0/v1 message claiming zstd (codec id 4) is an UnsupportedCodecError, whether the value
    is a real zstd frame or not."""
    inner = encode_message(0, magic, b"k", b"v", timestamp=1)
    for value in (compress(Compression.ZSTD, inner), b"junk"):
        buf = legacy_wrapper(magic, 4, value)
        for call in (lambda: MemoryRecords(buf).validate(), lambda: list(MemoryRecords(buf).records())):
            with pytest.raises(UnsupportedCodecError) as info:
                call()
            assert info.value.position is not None


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_ids_are_unsupported(magic, codec_id):
    """Codec ids 5..7 are an UnsupportedCodecError with a position, on deep validation and deep
    iteration, for every magic."""
    if magic == 2:
        buf = v2_batch(_one_record(), count=1, codec_id=codec_id)
    else:
        buf = legacy_wrapper(magic, codec_id, b"whatever")
    for call in (lambda: MemoryRecords(buf).validate(deep=True), lambda: list(MemoryRecords(buf).records())):
        with pytest.raises(UnsupportedCodecError) as info:
            call()
        assert info.value.position is not None


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec_id", [4, 5, 6, 7])
def test_is_valid_is_a_predicate_for_unsupported_codecs(magic, codec_id):
    """is_valid() answers True or False, never raises: a v0/v1 message with codec id 4..7
    (CRC correct) is simply not valid."""
    (batch,) = MemoryRecords(legacy_wrapper(magic, codec_id, b"whatever")).batches()
    assert batch.is_valid() is False


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_unknown_codec_on_the_compression_property_has_a_position(magic):
    """Asking a batch with codec id 5 for its compression raises UnsupportedCodecError that,
    like every other error, names where the batch is."""
    buf = v2_batch(_one_record(), count=1, codec_id=5) if magic == 2 else legacy_wrapper(magic, 5, b"whatever")
    (batch,) = MemoryRecords(buf).batches()
    with pytest.raises(UnsupportedCodecError) as info:
        batch.compression
    assert info.value.position is not None


# ------------------------------------------------------------------------------------------------
# (6) LZ4 and magic 0: Kafka's wrong frame-header checksum


def _xxh32_reference(data: bytes, seed: int = 0) -> int:
    """xxHash32 written out from the specification (for inputs under 16 bytes), independent of
    the library's implementation."""
    p1, p2, p3, p4, p5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
    m = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & m

    assert len(data) < 16
    h = (seed + p5 + len(data)) & m
    i = 0
    while i + 4 <= len(data):
        h = (rotl((h + int.from_bytes(data[i : i + 4], "little") * p3) & m, 17) * p4) & m
        i += 4
    for byte in data[i:]:
        h = (rotl((h + byte * p5) & m, 11) * p1) & m
    h ^= h >> 15
    h = (h * p2) & m
    h ^= h >> 13
    h = (h * p3) & m
    h ^= h >> 16
    return h


def test_xxhash32_known_vectors():
    """The xxHash32 used for the LZ4 header checksum matches published vectors."""
    for data, value in ((b"", 0x02CC5D05), (b"a", 0x550D7456), (b"abc", 0x32D153FF)):
        assert _xxh32_reference(data) == value
        assert xxhash32(data) == value


def test_magic0_lz4_header_checksum_vector():
    """For FLG 0x60, BD 0x40 the correct HC byte is 0x82 (xxh32 of 60 40) and Kafka's magic-0
    byte is 0x1A (xxh32 of 04 22 4D 18 60 40, >> 8 & 0xFF); the library writes each for its
    magic."""
    broken = (_xxh32_reference(bytes.fromhex("04224d186040")) >> 8) & 0xFF
    correct = (_xxh32_reference(bytes.fromhex("6040")) >> 8) & 0xFF
    assert (broken, correct) == (0x1A, 0x82)
    assert compress(Compression.LZ4, b"x" * 100, magic=0)[:7] == LZ4_MAGIC + bytes([0x60, 0x40, broken])
    for magic in (1, 2):
        assert compress(Compression.LZ4, b"x" * 100, magic=magic)[:7] == LZ4_MAGIC + bytes([0x60, 0x40, correct])


def _first_lz4_wrapper_value(log: Path) -> bytes:
    data = log.read_bytes()
    pos = 0
    while pos + 26 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        if data[pos + 16] == 0 and data[pos + 17] & 0x07 == 3:
            (key_len,) = struct.unpack_from(">i", data, pos + 18)
            at = pos + 22 + max(key_len, 0)
            (value_len,) = struct.unpack_from(">i", data, at)
            return data[at + 4 : at + 4 + value_len]
        pos += 12 + size
    raise AssertionError(f"no v0 lz4 wrapper in {log}")


def test_magic0_lz4_vector_matches_kafka_written_file():
    """The first v0 lz4 wrapper Kafka 3.8 wrote carries frame header 04 22 4D 18 60 40 1A."""
    name = Path("kafka-3.8") / "v0-lz4-random" / "00000000000000000000.log"
    logs = [p for p in (DATA / name, SHARED_CORPUS / name) if p.exists()]
    if not logs:
        pytest.skip("no Kafka-written v0 lz4 segment available")
    for log in logs:
        value = _first_lz4_wrapper_value(log)
        assert value[:7] == bytes.fromhex("04224d1860401a")
        assert (xxhash32(value[:6]) >> 8) & 0xFF == value[6]


def _lz4_frames() -> tuple[bytes, bytes, bytes]:
    """The same inner message set as an LZ4 frame with Kafka's magic-0 HC, with the correct HC,
    and with a byte that is neither."""
    import lz4.frame

    inner = b"".join(encode_message(i, 0, b"k%d" % i, b"v" * (i * 7), timestamp=-1) for i in range(4))
    frame = lz4.frame.compress(
        inner,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )
    assert frame[4:7] == bytes([0x60, 0x40, 0x82])
    with_kafka_hc = frame[:6] + bytes([0x1A]) + frame[7:]
    other = frame[:6] + bytes([0x55]) + frame[7:]
    return with_kafka_hc, frame, other


def test_magic0_lz4_accepts_kafkas_and_the_correct_checksum():
    """Under magic 0 both the frame with Kafka's wrong HC byte and the correct one decode, to
    the same records."""
    with_kafka_hc, correct, _ = _lz4_frames()
    results = []
    for frame in (with_kafka_hc, correct):
        buf = legacy_wrapper(0, int(Compression.LZ4), frame, offset=3)
        mr = MemoryRecords(buf)
        assert mr.validate(deep=True) == 1
        results.append([(r.offset, r.key, r.value) for r in mr.records()])
    assert results[0] == results[1] == [(i, b"k%d" % i, b"v" * (i * 7)) for i in range(4)]


@pytest.mark.parametrize("magic", [1, 2])
def test_lz4_wrong_checksum_is_corrupt_after_magic0(magic):
    """Under magic 1 and 2 only the correct HC is accepted: Kafka's magic-0 byte (or any
    other) is a CorruptRecordError."""
    with_kafka_hc, correct, other = _lz4_frames()
    if magic == 1:
        inner = b"".join(encode_message(i, 1, b"k", b"v", timestamp=5) for i in range(4))
        import lz4.frame

        correct = lz4.frame.compress(
            inner, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, store_size=False
        )
        with_kafka_hc = correct[:6] + bytes([0x1A]) + correct[7:]
        other = correct[:6] + bytes([0x55]) + correct[7:]
        good = legacy_wrapper(1, 3, correct, offset=3)
        bads = [legacy_wrapper(1, 3, f, offset=3) for f in (with_kafka_hc, other)]
    else:
        b = RecordBatchBuilder(compression=Compression.LZ4)
        b.append(b"k", b"v", timestamp=1)
        good = bytes(b.build().buffer)
        assert good[61:68] == LZ4_MAGIC + bytes([0x60, 0x40, 0x82])
        bads = [recrc_v2(good[:67] + bytes([hc]) + good[68:]) for hc in (0x1A, 0x55)]
    assert MemoryRecords(good).validate(deep=True) == 1
    for bad in bads:
        assert MemoryRecords(bad).validate() == 1  # the CRC is fine: the codec must notice
        with pytest.raises(CorruptRecordError) as info:
            MemoryRecords(bad).validate(deep=True)
        assert info.value.position is not None
