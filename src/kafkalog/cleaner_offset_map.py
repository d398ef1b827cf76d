"""The cleaner's offset map: Kafka's ``SkimpyOffsetMap``, the latest offset of every key of the
dirty section in fixed memory.

One slot is a 16-byte MD5 digest of the key and an 8-byte offset (:attr:`OffsetMap.BYTES_PER_ENTRY`),
all slots in one numpy array of unsigned 64-bit cells: (digest low half, digest high half,
offset). A slot is found by Kafka's probe sequence: the successive 4-byte windows of the digest,
then linear probing from the last window.

The per-record loops -- digest and put every key of a batch, and look every key of a batch up
for the keep/drop pass -- also exist compiled (``kafkalog._native``: ``put_v2``, ``filter_v2``),
working on the same array; :meth:`OffsetMap.put_batch` and :meth:`OffsetMap.filter_batch` call
them and keep the map's counters as the pure loops would.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

import numpy as np

from . import native
from .errors import InvalidConfigError

#: The digest as the two little-endian 64-bit cells it is stored in (MD5: 16 bytes).
_DIGEST = struct.Struct("<QQ")
#: The offset beside it: one more 64-bit cell.
_OFFSET = struct.Struct("<Q")
#: 64-bit cells per slot: digest low, digest high, offset.
_CELLS_PER_SLOT = (_DIGEST.size + _OFFSET.size) // _OFFSET.size
_OFFSET_CELL = _CELLS_PER_SLOT - 1
#: A probe: one big-endian 4-byte window of the digest (Kafka's ``Utils.readInt(hash, attempt)``).
_WINDOW = struct.Struct(">I")
#: Keys are hashed with MD5, as Kafka's ``SkimpyOffsetMap`` does by default.
_md5 = hashlib.md5
#: The last window's start (Kafka's ``hashSize - 4``): later attempts probe linearly from it.
_LAST_WINDOW = _DIGEST.size - _WINDOW.size
assert _CELLS_PER_SLOT == 3 and _LAST_WINDOW == 12


class OffsetMap:
    """Key digest -> offset in fixed memory (Kafka's ``SkimpyOffsetMap``).

    ``memory // 24`` slots of a 16-byte MD5 digest and an 8-byte offset in one numpy array;
    open addressing with Kafka's probe sequence (successive 4-byte windows of the digest, then
    linear). Keys are never stored, only digests, so two keys with one digest share a slot
    (MD5's 128 bits make that a practical impossibility, as Kafka relies on too).

    Not thread-safe: one cleaner owns it.
    """

    #: Kafka's ``bytesPerEntry``: the digest and the offset.
    BYTES_PER_ENTRY = _DIGEST.size + _OFFSET.size

    def __init__(self, memory: int) -> None:
        slots = memory // self.BYTES_PER_ENTRY
        if slots < 1:
            raise InvalidConfigError(f"an offset map of {memory} bytes holds no {self.BYTES_PER_ENTRY}-byte slot")
        self._slots = slots
        self._table = np.zeros(slots * _CELLS_PER_SLOT, dtype=np.uint64)  # (digest lo, digest hi, offset) per slot
        self._cells = memoryview(self._table)  # Python-int access, no numpy scalar per probe
        self._entries = 0
        self._lookups = 0
        self._probes = 0
        self._latest = -1
        self._dirty = False

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def memory(self) -> int:
        """Bytes the slots take (``slots * BYTES_PER_ENTRY``)."""
        return self._table.nbytes

    @property
    def size(self) -> int:
        """Keys in the map."""
        return self._entries

    @property
    def latest_offset(self) -> int:
        """The last offset put (or set by :meth:`update_latest_offset`); -1 when cleared."""
        return self._latest

    @property
    def utilization(self) -> float:
        return self._entries / self._slots

    @staticmethod
    def digest(key: bytes | bytearray | memoryview) -> bytes:
        """The key's slot digest (Kafka hashes keys with MD5)."""
        return _md5(key).digest()

    def _find(self, digest: bytes) -> tuple[int, bool]:
        """(cell index of the slot, whether it holds ``digest``); the slot is empty if not."""
        lo, hi = _DIGEST.unpack(digest)
        if lo == 0 and hi == 0:  # the empty marker: nudge the one digest that collides with it
            lo = 1
        cells, slots = self._cells, self._slots
        self._lookups += 1
        attempt = 0
        while True:
            # Kafka's positionOf: the 4-byte window at min(attempt, hashSize - 4), plus the attempts past it.
            if attempt <= _LAST_WINDOW:
                probe = _WINDOW.unpack_from(digest, attempt)[0]
            else:
                probe = _WINDOW.unpack_from(digest, _LAST_WINDOW)[0] + attempt - _LAST_WINDOW
            cell = (probe % slots) * _CELLS_PER_SLOT
            self._probes += 1
            a, b = cells[cell], cells[cell + 1]
            if a == lo and b == hi:
                return cell, True
            if a == 0 and b == 0:
                return cell, False
            attempt += 1
            if attempt > slots + _LAST_WINDOW:  # only a full map gets here (put refuses to fill it)
                return -1, False

    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        """Map ``key`` to ``offset`` (a later put for the key overwrites)."""
        self.put_digest(_md5(key).digest(), offset)

    def put_digest(self, digest: bytes, offset: int) -> None:
        cell, found = self._find(digest)
        if not found:
            if self._entries >= self._slots or cell < 0:
                raise OverflowError(f"the offset map is full ({self._entries} of {self._slots} slots)")
            lo, hi = _DIGEST.unpack(digest)
            self._cells[cell] = lo or (1 if hi == 0 else 0)
            self._cells[cell + 1] = hi
            self._entries += 1
        self._cells[cell + _OFFSET_CELL] = offset
        self._latest = offset
        self._dirty = True

    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The offset mapped for ``key``, or -1."""
        return self.get_digest(_md5(key).digest())

    def get_digest(self, digest: bytes) -> int:
        cell, found = self._find(digest)
        return self._cells[cell + _OFFSET_CELL] if found else -1

    # -- whole batches at once (the compiled core) ------------------------------------------

    def put_batch(
        self, data: bytes | memoryview, start: int, end: int, count: int, base_offset: int, min_offset: int, max_entries: int
    ) -> bool:
        """Put every keyed record of a v2 batch payload ``data[start:end]`` (``count`` records)
        at or past ``min_offset``, in order, stopping before a key once the map holds
        ``max_entries`` (Kafka's load factor). Returns whether it stopped there.

        Compiled only: callers check ``native.ext`` first. A malformed payload raises
        ``native.Invalid`` before the map changes (re-run the batch on the pure path).

        Raises:
            OverflowError: the map has no free slot (as :meth:`put`).
        """
        ext = native.ext
        if ext is None:
            raise RuntimeError("the compiled core is not in use (check native.ext first)")
        entries, puts, last, lookups, probes, status = ext.put_v2(
            self._table, data, start, end, count, base_offset, min_offset, self._entries, max_entries
        )
        self._entries = entries
        self._lookups += lookups
        self._probes += probes
        if puts:
            self._latest = last
            self._dirty = True
        if status == 2:
            raise OverflowError(f"the offset map is full ({self._entries} of {self._slots} slots)")
        return status == 1

    def put_run(
        self, data: bytes | memoryview, start: int, end: int, max_batch: int, min_offset: int, max_entries: int
    ) -> tuple[int, int, int, int, bool]:
        """The map pass over the run of batches from ``data[start:end]`` that need nothing but
        their keys (whole, CRC-checked, uncompressed, non-control, non-transactional v2 batches;
        the run ends before any other entry): every key at or past ``min_offset`` put as
        :meth:`put_batch` puts it, and the latest offset left as ``Cleaner._map_segment`` leaves
        it (each batch's last offset once at or past ``min_offset``). Returns ``(stop, batches,
        records, max_last_offset, full)``: where the run ended, the batches and records taken,
        their highest last offset (-1 when none), and whether the map reached ``max_entries`` in
        the last batch taken (whose last offset then does not become the latest).

        Compiled only, like :meth:`put_batch`.

        Raises:
            OverflowError: the map has no free slot (as :meth:`put`).
        """
        ext = native.ext
        if ext is None:
            raise RuntimeError("the compiled core is not in use (check native.ext first)")
        stop, batches, records, max_last, entries, puts, latest, lookups, probes, status = ext.map_run(
            self._table, data, start, end, max_batch, min_offset, self._entries, max_entries
        )
        self._entries = entries
        self._lookups += lookups
        self._probes += probes
        if puts:
            self._dirty = True
        if latest is not None:
            self._latest = latest
        if status == 2:
            raise OverflowError(f"the offset map is full ({self._entries} of {self._slots} slots)")
        return stop, batches, records, max_last, status == 1

    def filter_batch(
        self, data: bytes | memoryview, start: int, end: int, count: int, base_offset: int, retain_deletes: bool
    ) -> tuple[bytes, int, bool, int, int, int]:
        """The keep/drop pass over a v2 data batch payload: ``(flags, kept, kept_tombstone,
        keyless, superseded, tombstones)``, one flag byte per record (1: keep). A record is kept
        when it lies past :attr:`latest_offset`, or has a key, is not older than the key's mapped
        offset and is not a tombstone that ``retain_deletes`` lets go (``CleanerFilter.retain``).

        Compiled only, like :meth:`put_batch`; raises ``native.Invalid`` for a malformed payload.
        """
        ext = native.ext
        if ext is None:
            raise RuntimeError("the compiled core is not in use (check native.ext first)")
        flags, kept, kept_tombstone, keyless, superseded, tombstones, lookups, probes = ext.filter_v2(
            self._table, data, start, end, count, base_offset, self._latest, retain_deletes
        )
        self._lookups += lookups
        self._probes += probes
        return flags, kept, kept_tombstone, keyless, superseded, tombstones

    @staticmethod
    def producer_rows(pairs: Iterable[tuple[int, int]]) -> np.ndarray:
        """(producer id, last data offset) pairs as :meth:`filter_run` takes them: int64 rows
        sorted by producer id."""
        rows = sorted(pairs)
        return np.array(rows, np.int64).reshape(len(rows), 2)

    def filter_run(
        self, data: bytes | memoryview, start: int, end: int, max_batch: int, now: int, delete_retention_ms: int,
        upper_bound: int, producers: np.ndarray,
    ) -> tuple[int, bytes, tuple[int, ...]]:
        """The keep/drop pass and rewrite over the run of plain data batches from
        ``data[start:end]`` (those :meth:`put_run` takes): ``(stop, output, totals)`` -- where
        the run ended, the bytes ``filter_to`` writes for it, and its totals (batches,
        records_read, records_retained, bytes_retained, batches_retained, batches_rewritten,
        empty_batches, horizons_set, keyless, superseded, tombstones, max_last_offset,
        max_offset, max_timestamp). ``producers``: int64 rows of (producer id, last data offset)
        sorted by id, the batches that stay even when empty.

        Compiled only, like :meth:`filter_batch`; the map is only read.
        """
        ext = native.ext
        if ext is None:
            raise RuntimeError("the compiled core is not in use (check native.ext first)")
        stop, output, totals, lookups, probes = ext.filter_run(
            self._table, data, start, end, max_batch, self._latest, now, delete_retention_ms, upper_bound, producers
        )
        self._lookups += lookups
        self._probes += probes
        return stop, output, totals

    def update_latest_offset(self, offset: int) -> None:
        self._latest = offset

    def clear(self) -> None:
        if self._dirty:
            self._table.fill(0)
            self._dirty = False
        self._entries = self._lookups = self._probes = 0
        self._latest = -1
