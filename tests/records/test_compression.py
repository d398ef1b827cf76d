"""Codecs with Kafka's exact framing: snappy's xerial stream, lz4's magic-0 quirk, zstd v2-only,
and the decompression cap."""

from __future__ import annotations

import contextlib
import gzip
import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import compression
from kafkalog.compression import Compression, compress, decompress, xxhash32
from kafkalog.errors import (
    CorruptRecordError,
    KafkalogError,
    RecordTooLargeError,
    UnsupportedCodecError,
)

CODECS = [c for c in Compression if c is not Compression.NONE]


def _allowed(codec: Compression, magic: int) -> bool:
    return not (codec is Compression.ZSTD and magic < 2)


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("codec", list(Compression))
@given(data=st.binary(max_size=200_000))
def test_round_trip(codec, magic, data):
    """Every codec round-trips under every magic it is allowed with."""
    if not _allowed(codec, magic):
        return
    assert decompress(codec, compress(codec, data, magic=magic), magic=magic) == data


def test_xxhash32_vectors():
    """Reference xxHash32 values (seed 0)."""
    assert xxhash32(b"") == 0x02CC5D05
    assert xxhash32(b"a") == 0x550D7456
    assert xxhash32(b"abc") == 0x32D153FF
    assert xxhash32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_frame_header_bytes_per_magic():
    """Kafka's frame: FLG 0x60, BD 0x40; HC is 0x82 (correct) for magic 1/2 and 0x1a for magic 0
    (xxh32 over the magic number too, the byte Kafka 3.8 wrote in the corpus)."""
    for magic, hc in ((0, 0x1A), (1, 0x82), (2, 0x82)):
        frame = compress(Compression.LZ4, b"kafka" * 100, magic=magic)
        assert frame[:7] == bytes.fromhex("04224d186040") + bytes([hc])
        assert frame.endswith(b"\x00\x00\x00\x00")


def test_lz4_magic0_reads_both_checksums_and_others_only_the_correct_one():
    """Magic 0 accepts Kafka's wrong HC and the correct one; magic 1/2 refuse the wrong one."""
    data = b"0123456789" * 1000
    wrong = compress(Compression.LZ4, data, magic=0)
    right = compress(Compression.LZ4, data, magic=1)
    assert decompress(Compression.LZ4, wrong, magic=0) == data
    assert decompress(Compression.LZ4, right, magic=0) == data
    for magic in (1, 2):
        with pytest.raises(CorruptRecordError, match="header checksum"):
            decompress(Compression.LZ4, wrong, magic=magic)
    neither = bytearray(right)
    neither[6] ^= 0x55
    with pytest.raises(CorruptRecordError):
        decompress(Compression.LZ4, bytes(neither), magic=0)


def test_snappy_xerial_framing():
    """Writes xerial's header (magic, version 1, compatible 1) and 32 KiB blocks."""
    data = bytes(range(256)) * 300  # 76,800 bytes: three blocks
    framed = compress(Compression.SNAPPY, data)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    n_blocks = 0
    pos = 16
    while pos < len(framed):
        (n,) = struct.unpack_from(">i", framed, pos)
        pos += 4 + n
        n_blocks += 1
    assert pos == len(framed) and n_blocks == 3


def test_snappy_reads_a_bare_block():
    """A raw snappy block without xerial framing is read too."""
    import snappy

    data = b"bare snappy " * 100
    assert decompress(Compression.SNAPPY, snappy.compress(data)) == data


def test_snappy_declared_length_is_checked_before_decompressing():
    """A block declaring 2 GiB is refused up front (no allocation of the declared size)."""
    block = b"\x80\x80\x80\x80\x08" + b"\x00" * 8  # varint 2**31
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    with pytest.raises(RecordTooLargeError, match="declares"):
        decompress(Compression.SNAPPY, framed)


def test_gzip_writes_java_header_and_reads_concatenated_members():
    """Kafka's gzip is Java's GZIPOutputStream: mtime 0, OS 0; members may be concatenated."""
    data = b"payload " * 100
    out = compress(Compression.GZIP, data)
    assert out[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"
    assert gzip.decompress(out) == data
    assert decompress(Compression.GZIP, out + gzip.compress(b"more")) == data + b"more"


def test_zstd_is_v2_only():
    for magic in (0, 1):
        with pytest.raises(UnsupportedCodecError, match="zstd"):
            compress(Compression.ZSTD, b"x", magic=magic)
        with pytest.raises(UnsupportedCodecError, match="zstd"):
            decompress(Compression.ZSTD, b"x", magic=magic)


def test_unknown_codec_id():
    with pytest.raises(UnsupportedCodecError, match="unknown"):
        decompress(5, b"x")


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_cap(codec):
    """10 MB of zeros under a 1 MiB cap raises RecordTooLargeError."""
    bomb = compress(codec, bytes(10_000_000))
    with pytest.raises(RecordTooLargeError):
        decompress(codec, bomb, max_size=1 << 20)
    assert len(decompress(codec, bomb, max_size=10_000_000)) == 10_000_000


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_payload_is_corrupt(codec):
    """A compressed payload cut anywhere is an error, never silently short output."""
    data = bytes(range(256)) * 400
    full = compress(codec, data)
    for cut in sorted({1, 7, len(full) // 3, len(full) // 2, len(full) - 5, len(full) - 1}):
        try:
            out = decompress(codec, full[:cut])
        except (CorruptRecordError, RecordTooLargeError):
            continue
        pytest.fail(f"{codec.name} cut at {cut}/{len(full)} decoded to {len(out)} bytes")


@pytest.mark.parametrize("codec", CODECS)
@given(garbage=st.binary(min_size=1, max_size=300))
def test_garbage_payload_is_an_error(codec, garbage):
    """Garbage either happens to be a valid stream or raises a kafkalog error."""
    try:
        decompress(codec, garbage, max_size=1 << 20)
    except (CorruptRecordError, RecordTooLargeError):
        pass


# ------------------------------------------------------------------------------------------------
# The fast paths (lz4 unframed here, zstd in one call) against the streaming decoders


@contextlib.contextmanager
def streaming_only():
    """What KAFKALOG_COMPRESSION=plain does: lz4 and zstd through the streaming decoders."""
    saved = compression._PLAIN
    compression._PLAIN = True
    try:
        yield
    finally:
        compression._PLAIN = saved


def _outcome(codec, data, magic, max_size):
    try:
        return ("ok", decompress(codec, data, magic=magic, max_size=max_size))
    except KafkalogError as e:
        return (type(e), str(e))


def _lz4_frames(data: bytes, draw) -> bytes:
    import lz4.frame

    return lz4.frame.compress(
        data,
        block_size=draw(st.sampled_from([lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB,
                                         lz4.frame.BLOCKSIZE_MAX1MB])),
        block_linked=draw(st.booleans()),
        content_checksum=draw(st.booleans()),
        block_checksum=draw(st.booleans()),
        store_size=draw(st.booleans()),
    )


def _zstd_frames(data: bytes, draw) -> tuple[bytes, bytes]:
    """(zstd frames, what they decompress to)."""
    import zstandard

    cctx = zstandard.ZstdCompressor(level=1, write_content_size=draw(st.booleans()),
                                    write_checksum=draw(st.booleans()))
    if draw(st.booleans()):
        return cctx.compress(data), data
    out = io.BytesIO()
    with cctx.stream_writer(out, closefd=False) as w:  # no content size: what zstd-jni writes
        w.write(data)
    frames, expected = out.getvalue(), data
    if draw(st.booleans()):  # a second frame, or a skippable one
        if draw(st.booleans()):
            frames += cctx.compress(data[:100])
            expected += data[:100]
        else:
            frames += b"\x50\x2a\x4d\x18\x02\x00\x00\x00zz"
    return frames, expected


_blob = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda n, k: (b"kafka log segment %d " % k) * n, st.integers(0, 20_000), st.integers(0, 9)),
)


@pytest.mark.parametrize("codec", [Compression.LZ4, Compression.ZSTD])
@given(data=st.data())
def test_fast_paths_agree_with_the_streaming_decoders(codec, data):
    """Every frame shape (Kafka's and others: linked blocks, checksums, sizes, several frames)
    and every damage (a changed byte, a cut) gives the same bytes or the same error either way,
    under caps below, at and above the output size."""
    raw = data.draw(_blob)
    magic = data.draw(st.sampled_from([0, 1, 2])) if codec is Compression.LZ4 else 2
    if codec is Compression.LZ4 and data.draw(st.booleans()):
        frame = bytearray(compress(codec, raw, magic=magic))  # Kafka's frame, for this magic
    else:
        if codec is Compression.LZ4:
            frame = bytearray(_lz4_frames(raw, data.draw))
        else:
            zstd_frames, raw = _zstd_frames(raw, data.draw)  # raw: what the frames decompress to
            frame = bytearray(zstd_frames)
    damage = data.draw(st.sampled_from(["none", "none", "byte", "cut", "tail"]))
    if damage == "byte" and frame:
        at = data.draw(st.integers(0, len(frame) - 1))
        frame[at] = data.draw(st.integers(0, 255))
    elif damage == "cut":
        del frame[data.draw(st.integers(0, len(frame))) :]
    elif damage == "tail":
        frame += data.draw(st.binary(min_size=1, max_size=8))
    max_size = data.draw(st.sampled_from([len(raw), len(raw) + 1, max(0, len(raw) - 1), 1 << 20]))
    fast = _outcome(codec, bytes(frame), magic, max_size)
    with streaming_only():
        assert fast == _outcome(codec, bytes(frame), magic, max_size)
    if damage == "none" and max_size >= len(raw) and fast[0] == "ok":
        assert fast[1] == raw


def test_kafka_frames_take_the_fast_paths(monkeypatch):
    """Kafka's lz4 frame (every magic) and a one-frame zstd payload never reach the streaming
    decoders; a zstd frame declaring more than its blocks can hold is not trusted."""
    data = b"0123456789abcdef" * 5000

    def refuse(*args):
        raise AssertionError("streaming decoder used")

    monkeypatch.setattr(compression, "_lz4_decompress_stream", refuse)
    monkeypatch.setattr(compression, "_zstd_decompress_stream", refuse)
    for magic in (0, 1, 2):
        assert decompress(Compression.LZ4, compress(Compression.LZ4, data, magic=magic), magic=magic) == data
    assert decompress(Compression.ZSTD, compress(Compression.ZSTD, data)) == data
    monkeypatch.undo()
    # One raw block of 3 bytes, declaring 2**40 bytes of content.
    lying = struct.pack("<IB", 0xFD2FB528, 0xC0) + struct.pack("<Q", 1 << 40) + bytes([0x19, 0, 0]) + b"abc"
    with pytest.raises(KafkalogError):
        decompress(Compression.ZSTD, lying)
