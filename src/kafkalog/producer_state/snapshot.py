"""The producer snapshot file ``<20-digit offset>.snapshot``: its one layout, its encoding and
decoding, and the order Kafka writes its entries in.

Kafka's ``ProducerSnapshot`` message, version 1;
big-endian):

| field | type | byte |
|---|---|---|
| version (1) | int16 | 0 |
| crc (CRC-32C of byte 6 to the end) | uint32 | 2 |
| entry count | int32 | 6 |
| entries | 46 bytes each | 10 |

Each entry: ``ProducerId int64, Epoch int16, LastSequence int32, LastOffset int64,
OffsetDelta int32, Timestamp int64, CoordinatorEpoch int32, CurrentTxnFirstOffset int64``. An
entry holds only the producer's *last* batch (LastOffset -1, LastSequence -1, OffsetDelta 0 when
it has none) and CurrentTxnFirstOffset -1 when no transaction is open. An empty snapshot is 10
bytes. Entries are written in the order Kafka 3.5+'s ``java.util.HashMap`` iterates them (see
:func:`snapshot_order`), so a snapshot of the same history is byte-identical to a broker's.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..crc import crc32c
from ..durable import fsync_file, write_atomically
from ..errors import CorruptCheckpointError
from .entry import BatchMetadata, ProducerStateEntry

SNAPSHOT_VERSION = 1
# The header, field by field (Kafka's ``*_OFFSET`` chain in ``ProducerStateManager``).
_VERSION = struct.Struct(">h")
_CRC = struct.Struct(">I")
_COUNT = struct.Struct(">i")
_CRC_OFFSET = _VERSION.size
_COUNT_OFFSET = _CRC_OFFSET + _CRC.size
#: The CRC covers everything from the entry count on (Kafka's ``PRODUCER_ENTRIES_OFFSET``).
_ENTRIES_OFFSET = _COUNT_OFFSET
#: version, crc, entry count.
SNAPSHOT_HEADER = struct.Struct(">hIi")
assert SNAPSHOT_HEADER.size == _COUNT_OFFSET + _COUNT.size == 10
#: ProducerId, Epoch, LastSequence, LastOffset, OffsetDelta, Timestamp, CoordinatorEpoch,
#: CurrentTxnFirstOffset.
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
assert SNAPSHOT_ENTRY.size == 46
#: What a snapshot entry writes for "no open transaction".
_NO_TXN = -1


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """A snapshot file's bytes holding ``entries`` in the given order (Kafka's ``writeSnapshot``)."""
    body = bytearray(SNAPSHOT_HEADER.size)
    count = 0
    for e in entries:
        txn = e.current_txn_first_offset
        body += SNAPSHOT_ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            _NO_TXN if txn is None else txn,
        )
        count += 1
    _COUNT.pack_into(body, _COUNT_OFFSET, count)
    crc = crc32c(memoryview(body)[_ENTRIES_OFFSET:])
    _VERSION.pack_into(body, 0, SNAPSHOT_VERSION)
    _CRC.pack_into(body, _CRC_OFFSET, crc)
    return bytes(body)


def decode_snapshot(data: bytes | bytearray | memoryview, *, file: str | None = None) -> list[ProducerStateEntry]:
    """The entries of a snapshot file's bytes (Kafka's ``readSnapshot``), in file order.

    An entry with LastOffset >= 0 remembers one batch; CurrentTxnFirstOffset >= 0 is an open
    transaction.

    Raises:
        CorruptCheckpointError: an unknown version, a file shorter than its header or than its
            entry count needs, a negative count, bytes after the last entry, or a CRC mismatch;
            the error names the file and the byte position.
    """
    size = len(data)

    def corrupt(reason: str, position: int) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"producer snapshot: {reason}", file=file, position=position)

    if size < _VERSION.size:
        raise corrupt(f"truncated: {size} bytes, the {_VERSION.size}-byte version is incomplete", size)
    (version,) = _VERSION.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise corrupt(f"unknown snapshot version {version} (expected {SNAPSHOT_VERSION})", 0)
    if size < SNAPSHOT_HEADER.size:
        raise corrupt(f"truncated: {size} bytes, the header needs {SNAPSHOT_HEADER.size}", size)
    _, stored_crc, count = SNAPSHOT_HEADER.unpack_from(data, 0)
    if count < 0:
        raise corrupt(f"negative entry count {count}", _COUNT_OFFSET)
    expected = SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size
    if size < expected:
        whole = (size - SNAPSHOT_HEADER.size) // SNAPSHOT_ENTRY.size
        raise corrupt(
            f"truncated: {count} entries need {expected} bytes, the file has {size} (entry {whole} is incomplete)",
            SNAPSHOT_HEADER.size + whole * SNAPSHOT_ENTRY.size,
        )
    if size > expected:
        raise corrupt(
            f"{size - expected} bytes after the {count} entries the count declares ({expected} bytes)", expected
        )
    computed = crc32c(memoryview(data)[_ENTRIES_OFFSET:])
    if computed != stored_crc:
        raise corrupt(f"CRC is no longer valid: stored crc {stored_crc}, computed crc {computed}", _CRC_OFFSET)
    entries = []
    for pos in range(SNAPSHOT_HEADER.size, expected, SNAPSHOT_ENTRY.size):
        pid, epoch, last_seq, last_offset, delta, ts, coord, txn = SNAPSHOT_ENTRY.unpack_from(data, pos)
        batches = (BatchMetadata(last_seq, last_offset, delta, ts),) if last_offset >= 0 else ()
        entries.append(ProducerStateEntry(pid, epoch, coord, ts, txn if txn >= 0 else None, batches))
    return entries


def read_snapshot(path: str | os.PathLike) -> list[ProducerStateEntry]:
    """Read a snapshot file (see :func:`decode_snapshot`).

    Raises:
        CorruptCheckpointError: the file is malformed (the message names it and the position).
        OSError: it cannot be read.
    """
    return decode_snapshot(Path(path).read_bytes(), file=str(path))


def write_snapshot(path: str | os.PathLike, entries: Iterable[ProducerStateEntry], *, sync: bool = True) -> None:
    """Write ``entries`` as a snapshot file, atomically: ``<path>.tmp`` is written (and with
    ``sync`` fsynced), renamed over ``path`` and the directory fsynced, so a crash leaves either
    no file or a whole one. (Kafka writes the file in place; a torn one is caught by its CRC.)"""
    write_atomically(path, encode_snapshot(entries), sync=sync)


def sync_snapshot(path: str | os.PathLike) -> None:
    """fsync a snapshot :func:`write_snapshot` wrote unsynced (gone meanwhile: nothing to do)."""
    fsync_file(path)


# -- java.util.HashMap's iteration order ----------------------------------------------------------

_HASHMAP_INITIAL_CAPACITY = 16
_HASHMAP_TREEIFY_THRESHOLD = 8
_HASHMAP_MIN_TREEIFY_CAPACITY = 64


def _hashmap_bucket(producer_id: int, capacity: int) -> int:
    """The bucket of a ``Long`` key: ``Long.hashCode`` spread by ``h ^ (h >>> 16)``."""
    v = producer_id & 0xFFFF_FFFF_FFFF_FFFF
    h = (v ^ (v >> 32)) & 0xFFFF_FFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def snapshot_order(producer_ids: Sequence[int], capacity: int) -> list[int]:
    """``producer_ids`` (in insertion order) in the order a ``java.util.HashMap`` of that
    ``capacity`` iterates them: by bucket, then by insertion within a bucket (a resize splits
    each chain keeping its order; removal unlinks without reordering).

    Kafka 3.5+ writes snapshot entries in this order. (A bucket holding more than 8 ids in a
    table of 64 or more becomes a red-black tree whose order is not modelled; Kafka's producer
    ids, allocated in consecutive blocks, do not collide so.)
    """
    if capacity <= 0:
        return list(producer_ids)
    ranked = sorted(range(len(producer_ids)), key=lambda i: (_hashmap_bucket(producer_ids[i], capacity), i))
    return [producer_ids[i] for i in ranked]


class HashMapShape:
    """The capacity a ``java.util.HashMap<Long, ...>`` would have after the same puts, removals
    and clears: it is created at 16 on the first put, doubles when the size passes 3/4 of it or
    when a chain reaches 9 nodes in a table under 64, and never shrinks (``clear`` keeps it)."""

    __slots__ = ("capacity", "_bins")

    def __init__(self) -> None:
        self.capacity = 0
        self._bins: dict[int, int] = {}

    def added(self, key: int, keys: Iterable[int], size: int) -> None:
        """``key`` was put as a new mapping; ``keys`` are all keys now, ``size`` their number."""
        if self.capacity == 0:
            self.capacity = _HASHMAP_INITIAL_CAPACITY
        b = _hashmap_bucket(key, self.capacity)
        chain = self._bins.get(b, 0) + 1
        self._bins[b] = chain
        if chain > _HASHMAP_TREEIFY_THRESHOLD and self.capacity < _HASHMAP_MIN_TREEIFY_CAPACITY:
            self._resize(keys)  # treeifyBin resizes a small table instead
        if size > self.capacity * 3 // 4:
            self._resize(keys)

    def removed(self, key: int) -> None:
        b = _hashmap_bucket(key, self.capacity)
        self._bins[b] -= 1

    def cleared(self) -> None:
        self._bins.clear()

    def _resize(self, keys: Iterable[int]) -> None:
        self.capacity *= 2
        self._bins = {}
        for k in keys:
            b = _hashmap_bucket(k, self.capacity)
            self._bins[b] = self._bins.get(b, 0) + 1
