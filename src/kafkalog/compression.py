"""Kafka's compression codecs, with the exact framing Kafka writes and reads.

| codec | id | framing |
|---|---|---|
| gzip | 1 | an ordinary gzip stream (Java's header: no name, mtime 0, OS 0) |
| snappy | 2 | xerial stream: ``82 'SNAPPY' 00``, int32 version 1, int32 compatible 1, then blocks of ``[int32 length][raw snappy block]``; a bare snappy block is also read |
| lz4 | 3 | an LZ4 frame, 64 KiB independent blocks, FLG 0x60, BD 0x40, no checksums; **magic 0 uses a wrong header checksum** (see below) |
| zstd | 4 | a standard zstd frame; v2 only |

The codec takes the magic because of one quirk: Kafka's first LZ4 writer computed the frame
header checksum (the HC byte) over the 4-byte frame magic number as well as the descriptor.
Kafka still writes that wrong byte for magic 0 messages, and expects it there, while magic 1 and
2 use the correct checksum. Standard LZ4 libraries reject the magic-0 form, so reading patches
the byte before handing the frame to the library.

Decompression is always capped: output beyond ``max_size`` bytes raises
:class:`~kafkalog.errors.RecordTooLargeError` before it is produced, so a decompression bomb
costs at most the cap. Truncated or garbage payloads raise
:class:`~kafkalog.errors.CorruptRecordError`. Positions in errors raised here are relative to
the compressed payload; callers relocate them.

The codec libraries (zstandard, python-snappy, lz4) are imported on first use only.

Fast paths (a plain twin behind each): an LZ4 frame as Kafka writes it (independent blocks, no
checksums, no content size) is unframed here and each block handed to ``lz4.block`` in one C
call, and a zstd payload holding one frame is decompressed in one call by a per-thread
``ZstdDecompressor``, into a buffer bounded by what the frame's blocks could hold. Anything else
-- other frame flags, damage, output near the cap -- goes to the streaming decoders below, which
alone decide every error. ``KAFKALOG_COMPRESSION=plain`` in the environment forces them always.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Callable
from enum import IntEnum
from typing import Any

from .errors import CorruptRecordError, RecordTooLargeError, UnsupportedCodecError

#: Default cap on the decompressed size of one batch's payload (64 MiB).
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024
# Output is produced in pieces of at most _OUTPUT_PIECE; gzip input is fed from _GZIP_FIRST_PIECE up.
_OUTPUT_PIECE = 1 << 20
_GZIP_FIRST_PIECE = 64
# Set KAFKALOG_COMPRESSION=plain to decode lz4 and zstd through the streaming decoders only.
_PLAIN = os.environ.get("KAFKALOG_COMPRESSION", "").strip().lower() == "plain"


class Compression(IntEnum):
    """Codec ids as stored in the low three bits of the attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        """The name Kafka uses (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``)."""
        return self.name.lower()


def codec_for_id(codec_id: int, magic: int) -> Compression:
    """The :class:`Compression` for an attribute codec id, checked against the magic.

    Raises:
        UnsupportedCodecError: an unknown id, or zstd with magic 0 or 1.
    """
    try:
        codec = Compression(codec_id)
    except ValueError:
        raise UnsupportedCodecError(f"unknown compression codec id {codec_id}") from None
    if codec is Compression.ZSTD and magic < 2:
        raise UnsupportedCodecError(f"zstd compression is not allowed with magic {magic}")
    return codec


# --------------------------------------------------------------------------------------------
# xxHash32, for the LZ4 frame header checksum (inputs of at most 19 bytes, so plain Python).

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxhash32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (the reference algorithm; used only on tiny frame headers)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                (w,) = struct.unpack_from("<I", data, pos)
                v[i] = (_rotl((v[i] + w * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (w,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + w * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# --------------------------------------------------------------------------------------------
# gzip

# Java's GZIPOutputStream header: magic, CM=deflate, FLG=0, MTIME=0, XFL=0, OS=0.
_JAVA_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"


def _gzip_compress(data: bytes, level: int | None) -> bytes:
    co = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = co.compress(data) + co.flush()
    return _JAVA_GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & _M32)


def _gzip_decompress(data, max_size: int) -> bytes:
    view = memoryview(data).cast("B")
    n = len(view)
    pos = 0
    out = []
    total = 0
    try:
        while True:  # one gzip member per round
            d = zlib.decompressobj(zlib.MAX_WBITS | 16)
            # Feed input in pieces that start small and double: zlib copies whatever follows a
            # member's end into unused_data, so handing it the whole rest for each of many small
            # members would be quadratic. Each member costs at most ~3x its own size.
            piece_size = _GZIP_FIRST_PIECE
            while not d.eof:
                if pos >= n:
                    raise CorruptRecordError("gzip payload is truncated (no end of stream)", position=n)
                piece = view[pos : pos + piece_size]
                piece_size = min(piece_size * 2, _OUTPUT_PIECE)
                pending = piece
                while True:
                    chunk = d.decompress(pending, max_size - total + 1)
                    total += len(chunk)
                    if total > max_size:
                        raise RecordTooLargeError(f"gzip payload inflates beyond the {max_size}-byte cap")
                    out.append(chunk)
                    pending = d.unconsumed_tail
                    if d.eof or not pending:
                        break
                pos += len(piece) - len(pending) - len(d.unused_data)
            # Java's GZIPInputStream reads concatenated members and ignores trailing bytes that
            # do not start another member; do the same.
            if view[pos : pos + 2] != b"\x1f\x8b":
                return b"".join(out)
    except zlib.error as e:
        raise CorruptRecordError(f"gzip payload is corrupt: {e}", position=pos) from None


# --------------------------------------------------------------------------------------------
# snappy (xerial framing)

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # xerial SnappyOutputStream's default block size, which Kafka uses
# Every xerial block is [compressed length:int32][raw snappy block].
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
_snappy = None


def _snappy_module():
    global _snappy
    if _snappy is None:
        import snappy

        _snappy = snappy
    return _snappy


def _snappy_compress(data: bytes) -> bytes:
    snappy = _snappy_module()
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = snappy.compress(bytes(view[start : start + _XERIAL_BLOCK]))
        parts.append(_XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_length(block, pos: int) -> int:
    """The uncompressed length a raw snappy block declares (its leading unsigned varint)."""
    result = shift = 0
    for i in range(5):
        if pos + i >= len(block):
            break
        b = block[pos + i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result
        shift += 7
    raise CorruptRecordError("snappy block has a bad uncompressed-length preamble", position=pos)


def _snappy_block(block: bytes, budget: int, position: int) -> bytes:
    declared = _snappy_raw_length(block, 0)
    if declared > budget:
        raise RecordTooLargeError(
            f"snappy block declares {declared} bytes, beyond what is left of the cap ({budget})",
            position=position,
        )
    try:
        out = _snappy_module().decompress(block)
    except Exception as e:  # the library raises its own error types (and cramjam's)
        raise CorruptRecordError(f"snappy block is corrupt: {e}", position=position) from None
    return bytes(out)


def _snappy_decompress(data, max_size: int) -> bytes:
    data = bytes(data)
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(data, max_size, 0)  # a bare snappy block
    if len(data) < len(_XERIAL_HEADER):
        raise CorruptRecordError("xerial snappy header is truncated")
    out = []
    total = 0
    pos = len(_XERIAL_HEADER)
    end = len(data)
    while pos < end:
        start = pos + _XERIAL_BLOCK_LENGTH.size
        if start > end:
            raise CorruptRecordError("xerial snappy block length is truncated", position=pos)
        (n,) = _XERIAL_BLOCK_LENGTH.unpack_from(data, pos)
        if n < 0 or start + n > end:
            raise CorruptRecordError(
                f"xerial snappy block of {n} bytes runs past the payload ({end - start} left)", position=pos
            )
        chunk = _snappy_block(data[start : start + n], max_size - total, start)
        total += len(chunk)
        out.append(chunk)
        pos = start + n
    return b"".join(out)


# --------------------------------------------------------------------------------------------
# lz4 (Kafka's frame)

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_lz4frame = None


def _lz4_module():
    global _lz4frame
    if _lz4frame is None:
        import lz4.frame

        _lz4frame = lz4.frame
    return _lz4frame


def _lz4_header_checksum(frame: bytes, hc_pos: int, broken: bool) -> int:
    # Correct: xxh32 over the frame descriptor (FLG..last descriptor byte). Kafka's magic-0
    # writer hashed from the start of the frame, magic number included.
    start = 0 if broken else 4
    return (xxhash32(frame[start:hc_pos]) >> 8) & 0xFF


def _lz4_compress(data: bytes, magic: int) -> bytes:
    lz4frame = _lz4_module()
    frame = bytearray(
        lz4frame.compress(
            data,
            block_size=lz4frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    )
    if magic == 0:
        frame[6] = _lz4_header_checksum(bytes(frame[:6]), 6, broken=True)
    return bytes(frame)


# LZ4 frame descriptor (FLG, BD) bits; see the LZ4 frame format specification.
_LZ4_FLG_VERSION_MASK = 0xC0
_LZ4_FLG_VERSION_01 = 0x40
_LZ4_FLG_BLOCK_INDEPENDENT = 0x20
_LZ4_FLG_BLOCK_CHECKSUM = 0x10
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_CONTENT_CHECKSUM = 0x04
_LZ4_FLG_RESERVED = 0x02
_LZ4_FLG_DICT_ID = 0x01
# The frames the fast path reads: version 01, independent blocks, nothing optional (Kafka's).
_LZ4_FAST_FLG = _LZ4_FLG_VERSION_01 | _LZ4_FLG_BLOCK_INDEPENDENT
_LZ4_BD_BLOCK_MAX = {0x40: 64 << 10, 0x50: 256 << 10, 0x60: 1 << 20, 0x70: 4 << 20}
_LZ4_UNCOMPRESSED_BLOCK = 0x80000000
_LZ4_BLOCK_SIZE_MASK = 0x7FFFFFFF
_LE32 = struct.Struct("<I")
_lz4block = None
# (FLG, BD) -> (correct HC, Kafka's magic-0 HC): a frame header costs a dict lookup, not an
# xxHash32 in Python. At most 4 BD values reach it (see _LZ4_BD_BLOCK_MAX), so it stays tiny.
_lz4_hc_cache: dict[tuple[int, int], tuple[int, int]] = {}


def _lz4_block_module():
    global _lz4block
    if _lz4block is None:
        import lz4.block

        _lz4block = lz4.block
    return _lz4block


def _lz4_decompress_fast(data, max_size: int, magic: int) -> bytes | None:
    """Kafka's LZ4 frame unframed in Python, each block decompressed by ``lz4.block``; None when
    the frame is anything else or anything is wrong (the streaming decoder then decides).

    Same checks as the frame decoder: the header checksum (for magic 0 also Kafka's wrong one),
    blocks no larger than the declared block maximum, the end mark; bytes after the end mark
    are ignored as it ignores them. Each block is decompressed into at most the block maximum
    (or what is left of ``max_size``, if less): no allocation follows a length read from data.
    """
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    n = len(view)
    if n < 11 or view[:4] != _LZ4_MAGIC:
        return None
    flg, bd = view[4], view[5]
    block_max = _LZ4_BD_BLOCK_MAX.get(bd)
    if flg != _LZ4_FAST_FLG or block_max is None:
        return None
    hcs = _lz4_hc_cache.get((flg, bd))
    if hcs is None:
        header = bytes(view[:6])
        hcs = _lz4_hc_cache[(flg, bd)] = (
            _lz4_header_checksum(header, 6, broken=False),
            _lz4_header_checksum(header, 6, broken=True),
        )
    hc = view[6]
    if hc != hcs[0] and (magic != 0 or hc != hcs[1]):
        return None
    decompress_block = _lz4_block_module().decompress
    out = []
    total = 0
    pos = 7
    try:
        while True:
            if pos + 4 > n:
                return None
            (word,) = _LE32.unpack_from(view, pos)
            pos += 4
            if word == 0:  # the end mark
                break
            size = word & _LZ4_BLOCK_SIZE_MASK
            if size > block_max or pos + size > n:
                return None
            if word & _LZ4_UNCOMPRESSED_BLOCK:
                chunk = bytes(view[pos : pos + size])
            else:
                room = min(block_max, max_size - total)
                if room <= 0:
                    return None
                chunk = decompress_block(view[pos : pos + size], uncompressed_size=room)
            pos += size
            total += len(chunk)
            if total > max_size:
                return None
            out.append(chunk)
    except Exception:  # lz4.block.LZ4BlockError: damage, or a block larger than the room
        return None
    if len(out) == 1:
        return out[0]
    return b"".join(out)


def _lz4_decompress(data, max_size: int, magic: int) -> bytes:
    if not _PLAIN:
        out = _lz4_decompress_fast(data, max_size, magic)
        if out is not None:
            return out
    return _lz4_decompress_stream(data, max_size, magic)


def _lz4_decompress_stream(data, max_size: int, magic: int) -> bytes:
    lz4frame = _lz4_module()
    frame = bytearray(data)
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("lz4 payload does not start with an LZ4 frame header")
    flg = frame[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(frame) <= hc_pos:
        raise CorruptRecordError("lz4 frame header is truncated")
    correct = _lz4_header_checksum(bytes(frame), hc_pos, broken=False)
    if frame[hc_pos] != correct:
        # Magic 0: Kafka writes (and its reader skips) the checksum computed with the frame
        # magic included; accept it, and the correct one. Any other byte is corruption.
        if magic != 0 or frame[hc_pos] != _lz4_header_checksum(bytes(frame), hc_pos, broken=True):
            raise CorruptRecordError(
                f"lz4 frame header checksum is 0x{frame[hc_pos]:02x}, expected 0x{correct:02x}", position=hc_pos
            )
        frame[hc_pos] = correct
    d = lz4frame.LZ4FrameDecompressor()
    out = []
    total = 0
    pending = bytes(frame)
    try:
        while not d.eof:
            # The library allocates max_length up front: ask for bounded pieces, so the cap
            # limits a bomb without being the size of every buffer.
            chunk = d.decompress(pending, max_length=min(max_size - total + 1, _OUTPUT_PIECE))
            pending = b""
            total += len(chunk)
            if total > max_size:
                raise RecordTooLargeError(f"lz4 payload inflates beyond the {max_size}-byte cap")
            out.append(chunk)
            if d.needs_input and not d.eof:
                raise CorruptRecordError("lz4 frame is truncated (no end mark)")
    except RuntimeError as e:
        raise CorruptRecordError(f"lz4 payload is corrupt: {e}") from None
    return b"".join(out)


# --------------------------------------------------------------------------------------------
# zstd

_zstd = None


def _zstd_module():
    global _zstd
    if _zstd is None:
        import zstandard

        _zstd = zstandard
    return _zstd


def _zstd_compress(data: bytes, level: int | None) -> bytes:
    return _zstd_module().ZstdCompressor(level=3 if level is None else level).compress(data)


def _zstd_check_frames(data) -> tuple[int, int]:
    """Walk the frame and block headers so a truncated payload is an error, not empty output.

    (The streaming reader treats a cut-off frame as a clean end of input.)

    Returns:
        ``(frames, bound)``: the number of frames (skippable ones included), and the most
        bytes the blocks could decompress to -- raw and RLE blocks their size, a compressed
        block zstd's maximum of 128 KiB -- computed from the bytes present, never from a
        declared size.
    """
    frames = bound = 0
    pos, end = 0, len(data)
    if end == 0:
        raise CorruptRecordError("zstd payload is empty")
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("zstd frame magic is truncated", position=pos)
        (magic,) = struct.unpack_from("<I", data, pos)
        frames += 1
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if pos + 8 > end:
                raise CorruptRecordError("zstd skippable frame is truncated", position=pos)
            (n,) = struct.unpack_from("<I", data, pos + 4)
            pos += 8 + n
            if pos > end:
                raise CorruptRecordError("zstd skippable frame is truncated", position=end)
            continue
        if magic != 0xFD2FB528:
            raise CorruptRecordError(f"zstd frame magic 0x{magic:08x} is not 0xfd2fb528", position=pos)
        if pos + 5 > end:
            raise CorruptRecordError("zstd frame header is truncated", position=pos)
        fhd = data[pos + 4]
        single_segment = fhd & 0x20
        fcs_size = (0 if not single_segment else 1, 2, 4, 8)[fhd >> 6]
        header = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 0x03] + fcs_size
        pos += header
        while True:
            if pos + 3 > end:
                raise CorruptRecordError("zstd frame is truncated (block header missing)", position=min(pos, end))
            bh = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
            last, btype, bsize = bh & 1, (bh >> 1) & 3, bh >> 3
            if btype == 3:
                raise CorruptRecordError("zstd block has the reserved block type", position=pos)
            pos += 3 + (1 if btype == 1 else bsize)
            bound += _ZSTD_BLOCK_MAX if btype == 2 else bsize
            if pos > end:
                raise CorruptRecordError("zstd frame is truncated (block runs past the payload)", position=end)
            if last:
                break
        if fhd & 0x04:
            pos += 4  # content checksum
            if pos > end:
                raise CorruptRecordError("zstd frame checksum is truncated", position=end)
    return frames, bound


# The most a compressed zstd block decompresses to (ZSTD_BLOCKSIZE_MAX).
_ZSTD_BLOCK_MAX = 128 << 10
_zstd_local = threading.local()


def _zstd_decompressor():
    """This thread's ZstdDecompressor (one is not safe to share between threads; creating one
    per payload costs more than decompressing 16 KiB)."""
    try:
        return _zstd_local.decompressor
    except AttributeError:
        d = _zstd_local.decompressor = _zstd_module().ZstdDecompressor()
        return d


def _zstd_decompress(data, max_size: int) -> bytes:
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    frames, bound = _zstd_check_frames(view)
    if frames == 1 and 0 < bound <= max_size and not _PLAIN:
        # One frame whose blocks cannot exceed the cap: decompress it in one call, into at
        # most ``bound`` bytes -- or the size the frame declares, which zstd checks against
        # what it produces; a declared size above ``bound`` cannot be right, so it is never
        # allocated. Any failure, and every other payload, goes the streaming way, which
        # decides the error.
        try:
            declared = _zstd_module().frame_content_size(view)  # -1: not declared
            if 0 < declared <= bound or declared == -1:
                return _zstd_decompressor().decompress(view, max_output_size=bound)
        except Exception:  # zstandard.ZstdError
            pass
    return _zstd_decompress_stream(bytes(view), max_size)


def _zstd_decompress_stream(data: bytes, max_size: int) -> bytes:
    zstd = _zstd_module()
    out = []
    total = 0
    try:
        reader = zstd.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        while True:
            chunk = reader.read(min(max_size - total + 1, _OUTPUT_PIECE))
            if not chunk:
                break
            total += len(chunk)
            if total > max_size:
                raise RecordTooLargeError(f"zstd payload inflates beyond the {max_size}-byte cap")
            out.append(chunk)
    except zstd.ZstdError as e:
        raise CorruptRecordError(f"zstd payload is corrupt: {e}") from None
    return b"".join(out)


# --------------------------------------------------------------------------------------------


def compress(codec: Compression, data: bytes, *, magic: int = 2, level: int | None = None) -> bytes:
    """Compress ``data`` as Kafka frames it for ``codec`` and ``magic``.

    Raises:
        UnsupportedCodecError: zstd with magic 0 or 1, or an unknown codec.
    """
    codec = codec_for_id(int(codec), magic)
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        return _gzip_compress(data, level)
    if codec is Compression.SNAPPY:
        return _snappy_compress(bytes(data))
    if codec is Compression.LZ4:
        return _lz4_compress(bytes(data), magic)
    return _zstd_compress(bytes(data), level)


def decompress(codec: Compression, data, *, magic: int = 2, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress one batch payload, refusing to produce more than ``max_size`` bytes.

    Raises:
        CorruptRecordError: the payload is truncated or not valid for the codec.
        RecordTooLargeError: the output would exceed ``max_size``.
        UnsupportedCodecError: zstd with magic 0 or 1, or an unknown codec.
    """
    codec = codec_for_id(int(codec), magic)
    if codec is Compression.NONE:
        if len(data) > max_size:
            raise RecordTooLargeError(f"payload of {len(data)} bytes exceeds the {max_size}-byte cap")
        return bytes(data)
    if codec is Compression.GZIP:
        return _gzip_decompress(data, max_size)
    if codec is Compression.SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec is Compression.LZ4:
        return _lz4_decompress(data, max_size, magic)
    return _zstd_decompress(data, max_size)


def decompressor(codec: Compression, magic: int = 2) -> Callable[[Any, int], bytes]:
    """``decompress`` for one codec and magic, as a function ``(data, max_size) -> bytes``:
    for callers that decompress many payloads and can skip the per-call dispatch.

    Raises:
        UnsupportedCodecError: as :func:`decompress`.
    """
    codec = codec_for_id(int(codec), magic)
    if codec is Compression.NONE:
        return lambda data, max_size: decompress(codec, data, magic=magic, max_size=max_size)
    if codec is Compression.GZIP:
        return _gzip_decompress
    if codec is Compression.SNAPPY:
        return _snappy_decompress
    if codec is Compression.LZ4:
        return lambda data, max_size: _lz4_decompress(data, max_size, magic)
    return _zstd_decompress
