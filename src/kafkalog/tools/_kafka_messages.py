"""What Kafka's own checks say, word for word, for the dump: the index sanity checks a broker runs
at startup (``OffsetIndex``/``TimeIndex.sanityCheck``) and the producer-snapshot read
(``ProducerStateManager.readSnapshot``).

The library's checks (``sanity_check``, :func:`kafkalog.producer_state.snapshot.decode_snapshot`) decide the same
questions with kafkalog's messages; ``kafka-dump-log.sh`` prints Kafka's exception text, so the
dump reproduces it here.
"""

from __future__ import annotations

import struct

from .. import OffsetIndex, TimeIndex
from ..crc import crc32c
from ..producer_state.manager import SNAPSHOT_VERSION
from ..producer_state.snapshot import SNAPSHOT_ENTRY, SNAPSHOT_HEADER


def _offset_index_problem(index: OffsetIndex, abs_path: str, length: int) -> str | None:
    """``OffsetIndex.sanityCheck``'s exception message, or None when it passes."""
    size = OffsetIndex.DTYPE.itemsize
    entries = length // size
    last = index.entry(entries - 1).offset if entries else index.base_offset
    if entries and last < index.base_offset:
        return (
            f"Corrupt index found, index file {abs_path} has non-zero size but the last offset is {last} "
            f"which is less than the base offset {index.base_offset}"
        )
    if length % size:
        return (
            f"Index file {abs_path} is corrupt, found {length} bytes which is neither positive nor a multiple of {size}"
        )
    return None


def _time_index_problem(index: TimeIndex, abs_path: str, length: int) -> str | None:
    """``TimeIndex.sanityCheck``'s exception message, or None when it passes."""
    size = TimeIndex.DTYPE.itemsize
    entries = length // size
    if entries:
        first_ts = index.entry(0).timestamp
        last_ts, last_offset = index.entry(entries - 1)
        if last_ts < first_ts:
            return (
                f"Corrupt time index found, time index file ({abs_path}) has non-zero size but the last timestamp "
                f"is {last_ts} which is less than the first timestamp {first_ts}"
            )
        if last_offset < index.base_offset:
            return (
                f"Corrupt time index found, time index file ({abs_path}) has non-zero size but the last offset "
                f"is {last_offset} which is less than the first offset {index.base_offset}"
            )
    if length % size:
        return (
            f"Time index file {abs_path} is corrupt, found {length} bytes which is neither positive nor a "
            f"multiple of {size}"
        )
    return None


# Kafka's names for the fields of the producer-snapshot header and entries (the schema
# ProducerStateManager reads them with), in the order of kafkalog's SNAPSHOT_HEADER/SNAPSHOT_ENTRY.
_SNAPSHOT_HEADER_FIELDS = ("version", "crc", "producer_entries")
_SNAPSHOT_ENTRY_FIELDS = (
    "producer_id",
    "epoch",
    "last_sequence",
    "last_offset",
    "offset_delta",
    "timestamp",
    "coordinator_epoch",
    "current_txn_first_offset",
)


def _field_ends(layout: struct.Struct, names: tuple[str, ...]) -> list[tuple[str, int]]:
    """Each field of a big-endian ``layout`` with the byte offset where it ends."""
    ends, at = [], 0
    for name, code in zip(names, layout.format.lstrip("><!=@"), strict=True):
        at += struct.calcsize(">" + code)
        ends.append((name, at))
    assert at == layout.size
    return ends


_SNAPSHOT_HEADER_ENDS = _field_ends(SNAPSHOT_HEADER, _SNAPSHOT_HEADER_FIELDS)
_SNAPSHOT_ENTRY_ENDS = _field_ends(SNAPSHOT_ENTRY, _SNAPSHOT_ENTRY_FIELDS)
#: The snapshot's CRC covers everything after the version and the CRC itself.
_SNAPSHOT_CRC_FROM = _SNAPSHOT_HEADER_ENDS[1][1]


def _kafka_snapshot_problem(data: bytes) -> str | None:
    """The CorruptSnapshotException message ``ProducerStateManager.readSnapshot`` would raise
    for ``data`` (schema read, then version, then CRC), or None."""
    underflow = "java.nio.BufferUnderflowException"

    def schema(field: str, why: str) -> str:
        return f"Snapshot failed schema validation: Error reading field '{field}': {why}"

    for field, field_end in _SNAPSHOT_HEADER_ENDS:
        if len(data) < field_end:
            return schema(field, underflow)
    version, stored_crc, count = SNAPSHOT_HEADER.unpack_from(data)
    remaining = len(data) - SNAPSHOT_HEADER.size
    if count < 0:
        return schema("producer_entries", f"Array size {count} cannot be negative")
    if count > remaining:
        return schema("producer_entries", f"Error reading array of size {count}, only {remaining} bytes available")
    if count * SNAPSHOT_ENTRY.size > remaining:
        left = remaining % SNAPSHOT_ENTRY.size if remaining < count * SNAPSHOT_ENTRY.size else 0
        for field, field_end in _SNAPSHOT_ENTRY_ENDS:
            if left < field_end:
                return schema("producer_entries", f"Error reading field '{field}': {underflow}")
    if version != SNAPSHOT_VERSION:
        return f"Snapshot contained an unknown file version {version}"
    computed = crc32c(memoryview(data)[_SNAPSHOT_CRC_FROM:])
    if computed != stored_crc:
        return f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. Computed crc: {computed}"
    return None
