"""Sparse indexes of a segment, memory-mapped with numpy, as Kafka lays them out.

| index | entry | size |
|---|---|---|
| offset (``.index``) | ``relativeOffset:int32, position:int32`` | 8 |
| time (``.timeindex``) | ``timestamp:int64, relativeOffset:int32`` | 12 |

All big-endian. Offsets are relative to the segment's base offset. The offset and time indexes
are preallocated to ``segment.index.bytes`` (rounded down to the entry size) while their segment
is active and trimmed to their entries when it is rolled or closed; an index opened from disk
counts its entries from its length (Kafka's ``AbstractIndex``). The transaction index lives in
:mod:`kafkalog.transaction_index`.

Writing. Entries are written with ``pwrite``, never stored through the map: the file is
preallocated sparse, and on a full disk a store to a page the file system has not yet allocated
kills the process with SIGBUS, where ``pwrite`` fails with ``OSError(ENOSPC)`` and leaves the
entry uncounted. The map is ``MAP_SHARED``, so it sees the written bytes at once. For the same
reason a writable index whose entries include unallocated blocks (a preallocated index left by
a crash: its length counts as entries) has those blocks allocated when it is mapped, since on
tmpfs even a read of a hole through a map allocates; on a full disk that open fails with
``ENOSPC`` instead of faulting later. An index dropped without :meth:`close` releases its
descriptor when it is collected (a ``weakref.finalize``).

Reading without writing. An index opened read-only (``writable=False``) is copied into memory
with ``pread``, never mapped: a writer trims the index of a segment it rolls, and a mapped page
past the new end would kill the reader with SIGBUS. :meth:`OffsetIndex.read_live` and
:meth:`TimeIndex.read_live` take the same copy of an index a writer may still be appending to
(a live broker's active segment), cut to its live entries: the preallocated zero tail is left
out, and a missing or unreadable file reads as empty.

Building in memory. An index opened with ``in_memory=True`` (what a read-only open of a log
recovers into) is the same index over a ``bytearray`` instead of a file: preallocated like a new
file, written, resized, trimmed and truncated in memory; no file is created, written or mapped.

Searching. Kafka binary-searches the memory map, starting with the last 8 KiB of entries (the
*warm* section, where nearly all lookups from consumers at the head of the log land) so that a
lookup does not page in the cold part of a large index. That search is kept here as the plain
path. The default path keeps a native-endian copy of the search column, built on the first
lookup and kept up to date by appends and truncations, and runs ``bisect`` on it in C (or
``numpy.searchsorted`` for many targets at once): a lookup then costs well under a microsecond
instead of ~20 reads through the map. Set ``KAFKALOG_INDEX_SEARCH=plain`` (read when an index
opens) to use the plain path only; the tests run both.

This module knows nothing of records. Indexes are not thread-safe; their segment serialises
access.
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
import weakref
from abc import ABC, abstractmethod
from array import array
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

import numpy as np

from .durable import allocate_blocks, pwrite_all, rename_if_exists, unlink_if_exists
from .errors import CorruptIndexError, InvalidOffsetError, LogClosedError
from .remote import Storage, is_remote
from .varint import INT32_MAX

# Kafka's AbstractIndex: the warm section is the last 8 KiB of entries.
_WARM_BYTES = 8192
NO_TIMESTAMP = -1


def _live_entries(fd: int, n: int, size: int) -> int:
    """How many of the ``n`` entries of ``size`` bytes in file ``fd`` come before its zero
    tail: a binary search of single-entry reads (an entry the file no longer holds is zero)."""
    zero = bytes(size)

    def is_zero(slot: int) -> bool:
        return os.pread(fd, size, slot * size) in (zero, b"")

    if not n or not is_zero(n - 1):
        return n
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if is_zero(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _close_quietly(fd: int) -> None:
    """Close ``fd`` (an index's finalizer: the index was dropped without close())."""
    try:
        os.close(fd)
    except OSError:
        pass


def _plain_search_forced() -> bool:
    return os.environ.get("KAFKALOG_INDEX_SEARCH", "").strip().lower() == "plain"


_OPEN_LOCK = threading.RLock()
# struct (and array) codes of the signed big-endian integers index entries are made of.
_INT_CODES = {4: "i", 8: "q"}
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


_IndexT = TypeVar("_IndexT", bound="_Index")
_Entry = TypeVar("_Entry", bound=tuple)  # an entry with its offset absolute


class OffsetPosition(NamedTuple):
    """An offset index entry: an absolute offset and the byte position of its batch."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time index entry: a timestamp and the absolute offset it was reached at."""

    timestamp: int
    offset: int


class _Index(ABC, Generic[_Entry]):
    """An index file of fixed-size big-endian entries over a ``numpy.memmap``.

    Owns the map's lifecycle: preallocation of a new file, opening (lazily, on first use, so a
    log with thousands of segments opens fast), resize, trim, truncation, reset, flush, rename
    (keeping the map) and delete (closing it first). Subclasses define the entry layout: the dtype, the
    search column and which column holds the relative offset. An index opened read-only
    (``writable=False``, or :meth:`read_live`) is a copy of the file, never mapped; one built
    ``in_memory`` writes a ``bytearray`` it owns. ``_raw`` and ``_mm`` read the three backings
    alike; only :meth:`_store` and :meth:`resize` tell them apart.
    """

    DTYPE: np.dtype  # the entry layout, declared once; the struct views below derive from it
    KEY: str  # the column lookups search
    OFFSET: str  # the column holding the relative offset
    _ENTRY_STRUCT: struct.Struct  # a whole entry
    _ENTRY_SIZE: int
    _KEY_STRUCT: struct.Struct
    _KEY_AT: int  # byte of the key within an entry
    _OFFSET_STRUCT = struct.Struct(">i")
    _OFFSET_AT: int
    _CACHE_TYPECODE: str  # array typecode of the native key copy

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        fields = cls.DTYPE.fields
        assert fields is not None and all(fields[name][0].byteorder == ">" for name in cls.DTYPE.names)
        code = {name: _INT_CODES[fields[name][0].itemsize] for name in cls.DTYPE.names}
        cls._ENTRY_STRUCT = struct.Struct(">" + "".join(code[name] for name in cls.DTYPE.names))
        cls._ENTRY_SIZE = cls._ENTRY_STRUCT.size
        cls._KEY_STRUCT = struct.Struct(">" + code[cls.KEY])
        cls._KEY_AT = fields[cls.KEY][1]
        cls._OFFSET_AT = fields[cls.OFFSET][1]
        cls._CACHE_TYPECODE = code[cls.KEY]
        assert cls._ENTRY_SIZE == cls.DTYPE.itemsize and cls._OFFSET_STRUCT.format == ">" + code[cls.OFFSET]

    def __init__(
        self, path: str | os.PathLike, base_offset: int, max_index_size: int = 10 * 1024 * 1024, *,
        writable: bool = True, in_memory: bool = False,
    ) -> None:
        """``in_memory``: build the index in memory (see the module docstring); ``writable`` is
        then ignored, as no file is opened."""
        self._path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._in_memory = in_memory
        self._writable = writable and not in_memory  # a file open for writing (mapped)
        self._live = False  # read-only, cut to the live entries (see read_live)
        self._remote: tuple[Storage, str] | None = None  # read_live of a remote file: (storage, URL)
        self._given: bytes | None = None  # from_bytes: the file's content, read by the caller
        self._opened = False
        self._closed = False
        self._fd: int | None = None
        self._mm: np.memmap | None = None
        self._length = 0
        self._entries = 0
        self._capacity = 0  # entries the file has room for (length // entry size)
        self._plain = False  # search with Kafka's plain binary search only
        self._keys: array | None = None  # native copy of the key column (fast search)
        self._copy = bytearray()  # a read-only or in-memory index's bytes (never mapped; see _map)
        self._fd_finalizer: weakref.finalize | None = None  # closes _fd if the index is dropped

    @classmethod
    def read_live(cls: type[_IndexT], path: str | os.PathLike, base_offset: int, *,
                  storage: Storage | None = None) -> _IndexT:
        """The entries of an index a writer may be changing, read now (copied, never mapped).

        The preallocated zero tail of an active segment's index is left out: real entries are
        never all zero, as a segment's first batch is never indexed (Kafka's
        ``bytesSinceLastIndexEntry > indexIntervalBytes``). A file trimmed or deleted while it
        is read gives the entries read; a missing or unreadable one reads as empty. Entries are
        hints: check a position taken from one before trusting it. A remote index (a URL, or
        ``storage`` given) is fetched whole, in one request.
        """
        remote = storage is not None and not storage.is_local or is_remote(path)
        index = cls(path if not remote else "/", base_offset, writable=False)
        if remote:
            index._remote = (storage or Storage.for_path(path), os.fspath(path))
        index._live = True
        index._ensure()
        return index

    @classmethod
    def from_bytes(cls: type[_IndexT], data: bytes, base_offset: int, *, path: str | os.PathLike) -> _IndexT:
        """A read-only index holding the whole entries of ``data``: an index file's content
        read by other means (a remote file fetched in one request), as ``writable=False`` would
        read ``path`` (its zero tail kept: Kafka counts entries from the length)."""
        index = cls(path, base_offset, writable=False)
        index._given = bytes(data)
        index._ensure()
        return index

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def entry_size(self) -> int:
        return self.DTYPE.itemsize

    @property
    def path(self) -> Path:
        return self._path

    def _open(self) -> None:
        with _OPEN_LOCK:  # two readers may be first to touch a lazily opened index
            self._open_locked()

    def _open_locked(self) -> None:
        if self._closed:
            raise LogClosedError("index is closed", file=str(self._path))
        if self._opened:
            return
        size = self.entry_size
        newly_created = self._in_memory or (self._writable and not self._path.exists())
        self._plain = _plain_search_forced()
        if self._in_memory:
            self._hold(bytearray(self.max_index_size // size * size))
        elif self._writable:
            if newly_created and self.max_index_size < size:
                raise InvalidOffsetError(f"invalid max index size {self.max_index_size}", file=str(self._path))
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o644)
            try:
                if newly_created:
                    os.ftruncate(fd, self.max_index_size // size * size)
                self._length = os.fstat(fd).st_size
                if not newly_created:
                    allocate_blocks(fd, self._length // size * size, self._path)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            self._fd_finalizer = weakref.finalize(self, _close_quietly, fd)
            self._map()
        else:
            self._read_copy()
        # Kafka counts an existing index's entries from its length: a file left preallocated by
        # a crash reads as full of zero entries until recovery resets it.
        self._truncate_to_entries(0 if newly_created else self._length // size)
        self._opened = True  # last: readers that see it opened find it complete

    def _map(self) -> None:
        # The new map replaces the old one in a single assignment, so a concurrent reader sees
        # one or the other, never None (readers stay below the entry count, which a resize never
        # cuts, so the old map's pages they touch remain inside the file).
        n = self._length // self.entry_size
        self._mm = np.memmap(self._path, dtype=self.DTYPE, mode="r+", shape=(n,)) if n else None
        self._keys = None
        self._capacity = n

    def _read_copy(self) -> None:
        """A read-only open: copy the file's whole entries (a live index's up to its zero tail)
        with pread and close it at once; never map it (module docstring: SIGBUS)."""
        size = self.entry_size
        data = b""
        if self._given is not None:
            data, self._given = self._given, None
        elif self._remote is not None:
            storage, url = self._remote
            try:
                data = storage.read_bytes(url)
            except OSError:
                data = b""  # a live index that is missing reads as empty (read_live)
            n = min(len(data) // size, -(-len(data.rstrip(b"\0")) // size))  # cut the zero tail (read_live)
            data = data[:n * size]
        else:
            data = self._read_local(size)
        self._hold(bytearray(data[: len(data) // size * size]))

    def _hold(self, data: bytearray) -> None:
        """Hold the whole entries ``data`` (a read-only copy, or an in-memory index's store) as
        the index's bytes; it is never resized in place (a numpy view exports its buffer)."""
        n = len(data) // self.entry_size
        self._copy = data
        self._length = n * self.entry_size
        self._mm = np.frombuffer(data, dtype=self.DTYPE, count=n) if n else None
        self._keys = None
        self._capacity = n

    def _read_local(self, size: int) -> bytes:
        data = b""
        try:
            fd = os.open(self._path, os.O_RDONLY | _O_CLOEXEC)
            try:
                n = os.fstat(fd).st_size // size
                if self._live:
                    n = _live_entries(fd, n, size)
                data = os.pread(fd, n * size, 0) if n else b""
            finally:
                os.close(fd)
        except OSError:
            if not self._live:
                raise
        return data

    def _unmap(self) -> None:
        # Nothing is stored through the map (entries are written with pwrite): no msync needed.
        # Dropping the only reference unmaps it; views are never handed out, so none remain.
        self._mm = None
        self._copy = bytearray()

    @property
    def _raw(self):
        """The map's bytes, for scalar reads (struct.unpack_from on the mmap object is ~25x
        cheaper than a buffer request on the structured array)."""
        return self._mm._mmap if self._writable else self._copy  # type: ignore[union-attr]

    def _writable_fd(self) -> int:
        """The descriptor of an index opened for writing (a read-only index holds none)."""
        if self._fd is None:
            raise LogClosedError("index is not open for writing", file=str(self._path))
        return self._fd

    def _ensure(self) -> None:
        if not self._opened:
            self._open()

    @property
    def entries(self) -> int:
        """Entries in the index."""
        self._ensure()
        return self._entries

    @property
    def max_entries(self) -> int:
        """Entries the file has room for at its current length."""
        self._ensure()
        return self._capacity

    @property
    def length(self) -> int:
        """The file's current length in bytes."""
        self._ensure()
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes used by the entries."""
        return self.entries * self.entry_size

    @property
    def is_full(self) -> bool:
        self._ensure()
        return self._entries >= self._capacity

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries (never below the
        entries held); return whether it changed."""
        self._ensure()
        rounded = max(new_size // self.entry_size, self._entries) * self.entry_size
        if rounded == self._length:
            return False
        if self._in_memory:
            data = bytearray(rounded)
            keep = min(rounded, self._length)
            data[:keep] = self._copy[:keep]
            self._hold(data)
            return True
        os.ftruncate(self._writable_fd(), rounded)
        self._length = rounded
        self._map()
        return True

    def trim_to_valid_size(self) -> bool:
        """Shrink the file to exactly its entries (on roll and close)."""
        return self.resize(self.entries * self.entry_size)

    def reset(self) -> None:
        """Drop every entry and grow back to the preallocated size (before recovery)."""
        self._ensure()
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def _truncate_to_entries(self, n: int) -> None:
        self._entries = n
        if self._keys is not None:
            del self._keys[n:]
        self._load_last()

    def _load_last(self) -> None:
        """Refresh the cached last entry from the map after the entry count changed
        (subclasses keep it as plain attributes so appends need no read-back)."""

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for an offset >= ``offset`` (Kafka's ``truncateTo``)."""
        self._ensure()
        target = offset - self.base_offset
        slot = self._plain_search(target, self._OFFSET_STRUCT, self._OFFSET_AT)
        if slot == -1:
            keep = 0
        elif self._relative_offset(slot) == target:
            keep = slot
        else:
            keep = slot + 1
        self._truncate_to_entries(keep)

    def flush(self) -> None:
        """fsync the entries (written with pwrite, so the map holds no dirty pages)."""
        if self._opened and not self._closed and self._writable:
            os.fsync(self._writable_fd())

    def close(self) -> None:
        """Trim to the entries and close the file."""
        if self._closed:
            return
        if self._opened:
            if self._writable:
                self.trim_to_valid_size()
            self._close_handle()
        self._closed = True

    def _close_handle(self) -> None:
        self._unmap()
        if self._fd is not None:
            fd, self._fd = self._fd, None
            finalizer, self._fd_finalizer = self._fd_finalizer, None
            if finalizer is not None:
                finalizer()  # closes fd, once
            else:
                os.close(fd)
        self._opened = False
        self._keys = None

    def close_handler(self) -> None:
        """Close the map and file without trimming (before a rename or delete); the index
        reopens lazily on next use."""
        if self._opened:
            self._close_handle()

    def rename_to(self, path: str | os.PathLike) -> None:
        """Atomically rename the file. An open map and descriptor stay valid across a rename on
        POSIX, so the entries held (also those of an untrimmed active index) are kept."""
        self._path = rename_if_exists(self._path, path)

    def delete_if_exists(self) -> bool:
        """Close and delete the file; return whether it existed."""
        self.close_handler()
        self._closed = True
        return unlink_if_exists(self._path)

    def __repr__(self) -> str:
        state = f"entries={self._entries}" if self._opened else "not opened"
        return f"{type(self).__name__}({str(self._path)!r}, base_offset={self.base_offset}, {state})"

    # -- entries and search ------------------------------------------------------------------------

    def entry(self, n: int) -> _Entry:
        """The ``n``-th entry, its offset absolute."""
        if not 0 <= n < self.entries:
            raise IndexError(f"entry {n} out of range [0, {self._entries})")
        return self._entry_at(n)

    @abstractmethod
    def _entry_at(self, slot: int) -> _Entry:
        """The entry in ``slot`` (below the entry count), its offset absolute (each entry
        layout decodes its own)."""

    def _relative_offset(self, slot: int) -> int:
        return self._OFFSET_STRUCT.unpack_from(self._raw, slot * self.entry_size + self._OFFSET_AT)[0]

    def _key(self, slot: int) -> int:
        return self._KEY_STRUCT.unpack_from(self._raw, slot * self.entry_size + self._KEY_AT)[0]

    def _write(self, row: tuple) -> None:
        if self._entries >= self._capacity:
            raise InvalidOffsetError(
                f"attempt to append to a full index (size = {self._entries})", file=str(self._path)
            )
        self._store(self._ENTRY_STRUCT.pack(*row), self._entries * self.entry_size)
        self._count(row[0])

    def _count(self, key: int) -> None:
        """Count the entry just stored in the next slot (its key first, in both layouts)."""
        self._entries += 1
        if self._keys is not None:
            self._keys.append(key)

    def append_target(self) -> tuple[int, ...] | None:
        """``(descriptor, entries, capacity, *last entry)`` where a compiled append writes the
        next entry with pwrite (:mod:`kafkalog.append_request`; the last entry as
        :meth:`_last_fields` gives it), or None for an index it cannot write (in memory,
        read-only, closed)."""
        if self._closed or self._in_memory or not self._writable:
            return None
        if not self._opened:
            self._open()
        if self._fd is None:
            return None
        return (self._fd, self._entries, self._capacity, *self._last_fields())

    @abstractmethod
    def _last_fields(self) -> tuple[int, ...]:
        """What an append checks the next entry against (the last offset; the last timestamp
        and offset)."""

    def _write_many(self, columns: dict[str, np.ndarray], n: int) -> None:
        """Write ``n`` entries given column by column with one write (recovery rebuilding an
        index from a compiled scan); the caller has checked their order."""
        if self._entries + n > self._capacity:
            raise InvalidOffsetError(
                f"attempt to append {n} entries to an index of {self._entries} entries that holds "
                f"{self._capacity}",
                file=str(self._path),
            )
        rows = np.empty(n, dtype=self.DTYPE)
        for name, column in columns.items():
            rows[name] = column
        self._store(rows.tobytes(), self._entries * self.entry_size)
        self._entries += n
        if self._keys is not None:
            self._keys.extend(int(k) for k in rows[self.KEY])

    def _store(self, entry: bytes, position: int) -> None:
        """Write entries at byte ``position`` of the index: into the bytearray of an in-memory
        index, else into the file with pwrite, not a store through the map (see the module
        docstring: full disk -> SIGBUS)."""
        if self._in_memory:
            self._copy[position : position + len(entry)] = entry
        else:
            pwrite_all(self._writable_fd(), entry, position)

    def _plain_search(self, target: int, st: struct.Struct, at: int) -> int:
        """Largest slot whose column value is <= target, or -1: Kafka's search, warm tail first."""
        n = self._entries
        if n == 0:
            return -1
        raw = self._raw
        size = self.entry_size

        def value(slot: int) -> int:
            return st.unpack_from(raw, slot * size + at)[0]

        first_hot = max(0, n - 1 - _WARM_BYTES // size)
        if value(first_hot) < target:
            lo, hi = first_hot, n - 1
        else:
            if value(0) > target:
                return -1
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if value(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _key_cache(self) -> array:
        if self._keys is None:
            column = self._mm[self.KEY][: self._entries] if self._mm is not None else np.empty(0)
            native = np.ascontiguousarray(column, dtype=np.dtype(self._CACHE_TYPECODE))
            self._keys = array(self._CACHE_TYPECODE, native.tobytes())
        return self._keys

    def _search(self, target: int) -> int:
        """Largest slot whose key is <= target, or -1."""
        self._ensure()
        if self._entries == 0:
            return -1
        if self._plain:
            return self._plain_search(target, self._KEY_STRUCT, self._KEY_AT)
        return bisect.bisect_right(self._key_cache(), target) - 1

    def _search_many(self, targets) -> np.ndarray:
        """Vectorised :meth:`_search` over an array of targets."""
        self._ensure()
        targets = np.asarray(targets)
        if self._entries == 0:
            return np.full(targets.shape, -1, dtype=np.int64)
        if self._plain:
            return np.array([self._search(int(t)) for t in targets.ravel()], dtype=np.int64).reshape(targets.shape)
        info = np.iinfo(np.dtype(self._CACHE_TYPECODE))
        keys = np.frombuffer(self._key_cache(), dtype=np.dtype(self._CACHE_TYPECODE))
        clipped = np.clip(targets, info.min, info.max).astype(keys.dtype)
        return np.searchsorted(keys, clipped, side="right").astype(np.int64) - 1

    def _check_length(self) -> None:
        if self._length % self.entry_size:
            raise CorruptIndexError(
                f"index file is corrupt, found {self._length} bytes which is neither positive nor a "
                f"multiple of {self.entry_size}",
                file=str(self._path),
            )

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if relative < 0 or relative > INT32_MAX:
            raise InvalidOffsetError(
                f"offset {offset} is not within the int32 range of base offset {self.base_offset}",
                file=str(self._path),
            )
        return relative


class OffsetIndex(_Index[OffsetPosition]):
    """Maps offsets to byte positions in the segment's log: ``[relativeOffset, position]``."""

    DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
    KEY = "relative_offset"
    OFFSET = "relative_offset"

    _last_offset = 0

    def _load_last(self) -> None:
        n = self._entries
        self._last_offset = self.base_offset if n == 0 else self.base_offset + self._relative_offset(n - 1)

    @property
    def last_offset(self) -> int:
        """The offset of the last entry (the base offset when empty)."""
        self._ensure()
        return self._last_offset

    def _entry_at(self, slot: int) -> OffsetPosition:
        rel, pos = self._ENTRY_STRUCT.unpack_from(self._raw, slot * self._ENTRY_SIZE)
        return OffsetPosition(self.base_offset + rel, pos)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must increase.

        Raises:
            InvalidOffsetError: an offset not above the last one, outside the relative range,
                or a full index.
        """
        if not self._opened:
            self._open()
        if self._entries and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"attempt to append an offset ({offset}) to position {self._entries} no larger than the "
                f"last offset appended ({self._last_offset})",
                file=str(self._path),
            )
        self._write((self._relative(offset), position))
        self._last_offset = offset

    def _last_fields(self) -> tuple[int, ...]:
        return (self._last_offset,)

    def note_appended(self, offset: int, position: int) -> None:
        """Count the entry a compiled append wrote in the next slot (having checked what
        :meth:`append` checks)."""
        self._count(offset - self.base_offset)
        self._last_offset = offset

    def append_many(self, offsets, positions) -> None:
        """Add entries in one write: what :meth:`append` does for each, for offsets that
        increase and lie within the relative range (a compiled recovery scan's entries; any
        int64 sequences or buffers).

        Raises:
            InvalidOffsetError: the entries break those rules or do not fit.
        """
        offsets, positions = np.asarray(offsets, dtype=np.int64), np.asarray(positions, dtype=np.int64)
        n = len(offsets)
        if n == 0:
            return
        if not self._opened:
            self._open()
        first, last = int(offsets[0]), int(offsets[-1])
        if (self._entries and first <= self._last_offset) or (n > 1 and not (np.diff(offsets) > 0).all()):
            raise InvalidOffsetError(f"offsets to append do not increase past {self._last_offset}", file=str(self._path))
        self._relative(first), self._relative(last)  # both ends within range: all are
        self._write_many({"relative_offset": offsets - self.base_offset, "position": positions}, n)
        self._last_offset = last

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``, or ``(base_offset, 0)``."""
        slot = self._search(target_offset - self.base_offset)
        return self._entry_at(slot) if slot >= 0 else OffsetPosition(self.base_offset, 0)

    def lookup_many(self, target_offsets) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised :meth:`lookup`: arrays of (offsets, positions) for many targets."""
        targets = np.asarray(target_offsets, dtype=np.int64) - self.base_offset
        slots = self._search_many(targets)
        offsets = np.full(slots.shape, self.base_offset, dtype=np.int64)
        positions = np.zeros(slots.shape, dtype=np.int64)
        hit = slots >= 0
        if hit.any():
            assert self._mm is not None  # there are entries
            rows = self._mm[slots[hit]]
            offsets[hit] += rows["relative_offset"].astype(np.int64)
            positions[hit] = rows["position"]
        return offsets, positions

    def sanity_check(self) -> None:
        """Raise CorruptIndexError for a length that is not whole entries or a last offset
        below the base offset."""
        self._ensure()
        if self._entries and self.last_offset < self.base_offset:
            raise CorruptIndexError(
                f"corrupt index found, index file has non-zero size but the last offset is {self.last_offset} "
                f"which is less than the base offset {self.base_offset}",
                file=str(self._path),
            )
        self._check_length()


class TimeIndex(_Index[TimestampOffset]):
    """Maps timestamps to offsets: ``[timestamp, relativeOffset]``; timestamps strictly
    increase. One slot is kept free for the entry written when the segment is rolled."""

    DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
    KEY = "timestamp"
    OFFSET = "relative_offset"

    _last_entry = TimestampOffset(NO_TIMESTAMP, 0)

    def _load_last(self) -> None:
        n = self._entries
        self._last_entry = self._entry_at(n - 1) if n else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    @property
    def is_full(self) -> bool:
        # Kafka keeps the last slot for the final entry appended on roll (skip_full_check).
        self._ensure()
        return self._entries >= self._capacity - 1

    def _entry_at(self, slot: int) -> TimestampOffset:
        ts, rel = self._ENTRY_STRUCT.unpack_from(self._raw, slot * self._ENTRY_SIZE)
        return TimestampOffset(ts, self.base_offset + rel)

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty."""
        self._ensure()
        return self._last_entry

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Append ``(timestamp, offset)`` if the timestamp is larger than the last one's
        (Kafka's ``maybeAppend``); return whether an entry was written.

        Raises:
            InvalidOffsetError: a full index (unless ``skip_full_check``), an offset below the
                last entry's, or a timestamp below it.
        """
        if not self._opened:
            self._open()
        if not skip_full_check and self._entries >= self._capacity - 1:
            raise InvalidOffsetError(
                f"attempt to append to a full time index (size = {self._entries})", file=str(self._path)
            )
        last = self._last_entry
        if self._entries and offset < last.offset:
            raise InvalidOffsetError(
                f"attempt to append an offset ({offset}) to slot {self._entries} no larger than the last "
                f"offset appended ({last.offset})",
                file=str(self._path),
            )
        if self._entries and timestamp < last.timestamp:
            raise InvalidOffsetError(
                f"attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger than the last "
                f"timestamp appended ({last.timestamp})",
                file=str(self._path),
            )
        if timestamp > last.timestamp:
            self._write((timestamp, self._relative(offset)))
            self._last_entry = TimestampOffset(timestamp, offset)
            return True
        return False

    def _last_fields(self) -> tuple[int, ...]:
        return self._last_entry

    def note_appended(self, timestamp: int, offset: int) -> None:
        """Count the entry a compiled append wrote in the next slot (having checked what
        :meth:`maybe_append` checks)."""
        self._count(timestamp)
        self._last_entry = TimestampOffset(timestamp, offset)

    def append_many(self, timestamps, offsets) -> None:
        """Add entries in one write: what :meth:`maybe_append` writes for each, for timestamps
        that strictly increase past the last entry's and offsets that do not decrease (a
        compiled recovery scan's entries; any int64 sequences or buffers).

        Raises:
            InvalidOffsetError: the entries break those rules or do not fit (the last slot
                stays free, as :meth:`maybe_append` keeps it).
        """
        timestamps, offsets = np.asarray(timestamps, dtype=np.int64), np.asarray(offsets, dtype=np.int64)
        n = len(timestamps)
        if n == 0:
            return
        if not self._opened:
            self._open()
        last = self._last_entry
        if self._entries + n > self._capacity - 1:
            raise InvalidOffsetError(f"attempt to append to a full time index (size = {self._entries})", file=str(self._path))
        if int(timestamps[0]) <= last.timestamp or (self._entries and int(offsets[0]) < last.offset) or (
            n > 1 and not ((np.diff(timestamps) > 0).all() and (np.diff(offsets) >= 0).all())
        ):
            raise InvalidOffsetError(f"time index entries to append are out of order after {last}", file=str(self._path))
        self._relative(int(offsets[0])), self._relative(int(offsets[-1]))
        self._write_many({"timestamp": timestamps, "relative_offset": offsets - self.base_offset}, n)
        self._last_entry = TimestampOffset(int(timestamps[-1]), int(offsets[-1]))

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or ``(-1, base_offset)``."""
        slot = self._search(target_timestamp)
        return self._entry_at(slot) if slot >= 0 else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError for a length that is not whole entries, a last timestamp
        below the first, or a last offset below the base."""
        self._ensure()
        if self._entries:
            last = self.entry(self._entries - 1)
            first = self.entry(0)
            if last.timestamp < first.timestamp:
                raise CorruptIndexError(
                    f"corrupt time index found, time index file has non-zero size but the last timestamp is "
                    f"{last.timestamp} which is less than the first timestamp {first.timestamp}",
                    file=str(self._path),
                )
            if last.offset < self.base_offset:
                raise CorruptIndexError(
                    f"corrupt time index found, time index file has non-zero size but the last offset is "
                    f"{last.offset} which is less than the base offset {self.base_offset}",
                    file=str(self._path),
                )
        self._check_length()


# One layout, two views: the struct the scalar reads use and the dtype of the column reads.
assert OffsetIndex.DTYPE.itemsize == OffsetIndex._ENTRY_SIZE == 8
assert TimeIndex.DTYPE.itemsize == TimeIndex._ENTRY_SIZE == 12

