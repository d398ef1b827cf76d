"""Framing as Kafka's FileLogInputStream sees it, for the dump."""

from __future__ import annotations

import re
import struct
from typing import NamedTuple
from ..errors import KafkalogError
from ..file_records import FileRecords
from ._jvm import _CHUNK, _HEADER_UP_TO_MAGIC, _LOG_OVERHEAD, _MIN_ENTRY_SIZE

# ------------------------------------------------------------------------------------------------
# Framing as Kafka's FileLogInputStream sees it, and finding the next batch after corruption

_SIZE_MAGIC = struct.Struct(">8xi4xb")  # size at byte 8, magic at byte 16
assert _SIZE_MAGIC.size == _HEADER_UP_TO_MAGIC
# A place where an entry could start: a size field that is >= 14 and not negative, and a magic
# byte of 0, 1 or 2 (checked again, with the CRC, before it is believed).
_CANDIDATE = re.compile(rb"(?=.{8}(?!\x00\x00\x00[\x00-\x0d])[\x00-\x7f].{7}[\x00-\x02])", re.DOTALL)
_ZERO_RUN = re.compile(rb"\x00{64,}")


class _Stop(NamedTuple):
    """Why iteration stopped before the end: a partial entry (``tail``) or corrupt framing."""

    tail: bool
    reason: str


def _classify(fr: FileRecords, pos: int, end: int, fallback: str | None) -> _Stop:
    """Kafka's ``FileLogInputStream.nextBatch`` reading of the bytes at ``pos``."""
    remaining = end - pos
    if remaining <= _HEADER_UP_TO_MAGIC:  # position >= end - HEADER_SIZE_UP_TO_MAGIC
        return _Stop(True, f"{remaining} bytes are too few for an entry")
    size, magic = _SIZE_MAGIC.unpack(fr.read(pos, _HEADER_UP_TO_MAGIC))
    if size < _MIN_ENTRY_SIZE:
        return _Stop(False, f"record size {size} is smaller than the minimum record overhead ({_MIN_ENTRY_SIZE})")
    if size > remaining - _LOG_OVERHEAD:
        return _Stop(True, f"an entry of {size + _LOG_OVERHEAD} bytes runs past the end ({remaining} bytes left)")
    if not 0 <= magic <= 2:
        return _Stop(False, f"invalid magic {magic}")
    return _Stop(False, fallback or f"record batch size {size + _LOG_OVERHEAD} is smaller than the v2 overhead")


def _entry_is_valid(fr: FileRecords, pos: int, end: int, max_size: int) -> bool:
    """True if a whole entry of at most ``max_size`` bytes with a matching CRC starts at ``pos``."""
    head = fr.read(pos, _HEADER_UP_TO_MAGIC)
    if len(head) < _HEADER_UP_TO_MAGIC:
        return False
    size, magic = _SIZE_MAGIC.unpack(head)
    total = size + _LOG_OVERHEAD
    if size < _MIN_ENTRY_SIZE or pos + total > end or total > max_size or not 0 <= magic <= 2:
        return False
    try:
        batch = next(fr.slice(pos, total).batches(), None)
        return batch is not None and batch.compute_crc() == batch.crc  # type: ignore[attr-defined]
    except KafkalogError:
        return False


def _resync(fr: FileRecords, start: int, end: int, max_size: int) -> int | None:
    """The position of the next whole, CRC-valid entry at or after ``start``, or None."""
    pos = start
    while pos < end - _HEADER_UP_TO_MAGIC:
        chunk = fr.read(pos, min(_CHUNK, end - pos))
        usable = len(chunk) - _HEADER_UP_TO_MAGIC + 1  # candidates need 17 bytes in the chunk
        if usable <= 0:
            break
        # Long runs of zeros (a preallocated or zero-filled tail) cannot hold a size field.
        spans, lo = [], 0
        for run in _ZERO_RUN.finditer(chunk):
            spans.append((lo, run.start() - 8))
            lo = max(lo, run.end() - 11)
        spans.append((lo, usable))
        for lo, hi in spans:
            at = lo
            while at < hi:
                m = _CANDIDATE.search(chunk, at, hi + _HEADER_UP_TO_MAGIC - 1)
                if m is None or m.start() >= hi:
                    break
                if _entry_is_valid(fr, pos + m.start(), end, max_size):
                    return pos + m.start()
                at = m.start() + 1
        pos += usable
    return None
