"""Codecs with Kafka's exact framing: snappy's xerial stream, lz4's magic-0 quirk, zstd v2-only,
and the decompression cap."""

from __future__ import annotations

import gzip
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.compression import Compression, compress, decompress, xxhash32
from kafkalog.errors import CorruptRecordError, RecordTooLargeError, UnsupportedCodecError

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
