"""Framing as Kafka's ``FileLogInputStream`` sees it, for the dump: why iteration stopped.

The dump reports a stop in Kafka's words (a partial entry at the end, or corrupt framing);
finding the next valid batch after it is :func:`kafkalog.resync.next_valid_batch`, the one resync
scanner every reader uses.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .. import FileRecords
from ..memory_records import MIN_ENTRY_SIZE_FIELD
from ..record import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_V0, MAGIC_V2

# The size field (at byte 8) and the magic byte (at byte 16) of any entry, v0 to v2.
_SIZE_MAGIC = struct.Struct(">8xi4xb")
assert _SIZE_MAGIC.size == HEADER_SIZE_UP_TO_MAGIC


class _Stop(NamedTuple):
    """Why iteration stopped before the end: a partial entry (``tail``) or corrupt framing."""

    tail: bool
    reason: str


def _classify(fr: FileRecords, pos: int, end: int, fallback: str | None) -> _Stop:
    """Kafka's ``FileLogInputStream.nextBatch`` reading of the bytes at ``pos``."""
    remaining = end - pos
    if remaining <= HEADER_SIZE_UP_TO_MAGIC:  # position >= end - HEADER_SIZE_UP_TO_MAGIC
        return _Stop(True, f"{remaining} bytes are too few for an entry")
    size, magic = _SIZE_MAGIC.unpack(fr.read(pos, HEADER_SIZE_UP_TO_MAGIC))
    if size < MIN_ENTRY_SIZE_FIELD:
        return _Stop(
            False, f"record size {size} is smaller than the minimum record overhead ({MIN_ENTRY_SIZE_FIELD})"
        )
    if size > remaining - LOG_OVERHEAD:
        return _Stop(True, f"an entry of {size + LOG_OVERHEAD} bytes runs past the end ({remaining} bytes left)")
    if not MAGIC_V0 <= magic <= MAGIC_V2:
        return _Stop(False, f"invalid magic {magic}")
    return _Stop(False, fallback or f"record batch size {size + LOG_OVERHEAD} is smaller than the v2 overhead")


def _looks_foreign(fr: FileRecords, end: int) -> bool:
    """True when the first bytes are not the start of any entry Kafka could have written (and
    are not the zeros of a preallocated or zero-filled file)."""
    head = fr.read(0, HEADER_SIZE_UP_TO_MAGIC)
    if end < HEADER_SIZE_UP_TO_MAGIC or len(head) < HEADER_SIZE_UP_TO_MAGIC or not any(head):
        return False
    size, magic = _SIZE_MAGIC.unpack(head)
    return size < MIN_ENTRY_SIZE_FIELD or not MAGIC_V0 <= magic <= MAGIC_V2
