"""The transaction index (``.txnindex``): one entry per aborted transaction of a segment, as
Kafka's ``TransactionIndex`` lays it out.

| field | type |
|---|---|
| version | int16 (0) |
| producerId | int64 |
| firstOffset | int64 |
| lastOffset | int64 |
| lastStableOffset | int64 |

34 bytes an entry, big-endian, appended in order of last offset. Unlike the offset and time
indexes the file is created on the first append and never preallocated. This module knows
nothing of records.

A failed append (a full disk: ``OSError(ENOSPC)``) is cut back off, so the file never ends in
part of an entry. An index opened ``in_memory`` (what a read-only open of a log recovers into)
keeps its entries in a ``bytearray`` and never creates, writes or truncates its file. A transaction index dropped without :meth:`~TransactionIndex.close` releases
its descriptor when it is collected.
"""

from __future__ import annotations

import errno
import os
import struct
import weakref
from pathlib import Path
from typing import NamedTuple

from .durable import rename_if_exists, unlink_if_exists
from .errors import CorruptIndexError, InvalidOffsetError, LogClosedError
from .remote import Storage, is_remote


class AbortedTxn(NamedTuple):
    """An aborted transaction: its producer, first and last (marker) offsets, and the last
    stable offset when it completed."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


#: A transaction-index entry: version, producerId, firstOffset, lastOffset, lastStableOffset.
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")
assert TXN_INDEX_ENTRY.size == 34
#: The only version of a transaction-index entry (an entry of a higher version is rejected).
TXN_INDEX_VERSION = 0
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _close_quietly(fd: int) -> None:
    """Close ``fd`` (the finalizer of an index dropped without close())."""
    try:
        os.close(fd)
    except OSError:
        pass


class TransactionIndex:
    """The aborted transactions of a segment (``.txnindex``): append-only 34-byte entries,
    never preallocated; the file is created on the first append.

    Not thread-safe; its segment serialises access.
    """

    ENTRY_SIZE = TXN_INDEX_ENTRY.size

    def __init__(self, path: str | os.PathLike, start_offset: int, *, writable: bool = True,
                 storage: Storage | None = None, in_memory: bool = False) -> None:
        """``storage`` (or a URL ``path``): a file on a remote filesystem, read-only, read whole.
        ``in_memory``: an empty index built in memory (``writable`` and ``storage`` ignored)."""
        self._memory: bytearray | None = bytearray() if in_memory else None
        if in_memory:
            writable, storage = False, None
        self._remote: tuple[Storage, str] | None = None
        if (storage is not None and not storage.is_local) or is_remote(path):
            if writable:
                raise LogClosedError("a transaction index on a remote filesystem is read-only", file=os.fspath(path))
            self._remote = (storage or Storage.for_path(path), os.fspath(path))
        self._path = Path(path)
        self.start_offset = start_offset
        self._writable = writable
        self._fd: int | None = None
        self._last_offset: int | None = None
        self._fd_finalizer: weakref.finalize | None = None  # closes _fd if the index is dropped

    @property
    def path(self) -> Path:
        return self._path

    def _channel(self, create: bool) -> int | None:
        if self._fd is None and (create or self._path.exists()):
            if create and not self._writable:
                raise LogClosedError("transaction index opened read-only", file=str(self._path))
            flags = (os.O_RDWR | os.O_CREAT) if self._writable else os.O_RDONLY
            self._fd = os.open(self._path, flags | _O_CLOEXEC, 0o644)
            self._fd_finalizer = weakref.finalize(self, _close_quietly, self._fd)
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        """Append an aborted transaction; last offsets must increase.

        Raises:
            InvalidOffsetError: a last offset not above the previous entry's.
        """
        if self._last_offset is None:
            entries = self.all_aborted_txns()
            self._last_offset = entries[-1].last_offset if entries else -1
        if self._last_offset >= 0 and txn.last_offset <= self._last_offset:
            raise InvalidOffsetError(
                f"the last offset of appended transactions must increase sequentially, but {txn.last_offset} "
                f"is not greater than current last offset {self._last_offset} of index",
                file=str(self._path),
            )
        entry = TXN_INDEX_ENTRY.pack(TXN_INDEX_VERSION, *txn)
        if self._memory is not None:
            self._memory += entry
            self._last_offset = txn.last_offset
            return
        fd = self._channel(create=True)
        assert fd is not None  # created
        end = os.fstat(fd).st_size
        try:
            written = os.pwrite(fd, entry, end)
            if written < len(entry):  # a short write: the rest fails with the reason, or lands
                written += os.pwrite(fd, entry[written:], end + written)
                if written < len(entry):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self._path))
        except OSError:
            os.ftruncate(fd, end)  # no part of an entry stays behind
            raise
        self._last_offset = txn.last_offset

    def _read_all(self) -> bytes:
        if self._memory is not None:
            return bytes(self._memory)
        if self._remote is not None:
            storage, url = self._remote
            try:
                return storage.read_bytes(url)
            except FileNotFoundError:
                return b""  # never created: no aborted transaction
        fd = self._channel(create=False)
        if fd is None:
            return b""
        size = os.fstat(fd).st_size
        return os.pread(fd, size, 0)

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry, in order.

        Raises:
            CorruptIndexError: a length that is not whole entries, or an unknown version.
        """
        data = self._read_all()
        whole = len(data) - len(data) % self.ENTRY_SIZE
        out = []
        for pos in range(0, whole, self.ENTRY_SIZE):
            version, *fields = TXN_INDEX_ENTRY.unpack_from(data, pos)
            if version > TXN_INDEX_VERSION:  # Kafka rejects only versions it does not know yet
                raise CorruptIndexError(
                    f"unexpected aborted transaction version {version} (expected {TXN_INDEX_VERSION})",
                    file=str(self._path),
                    position=pos,
                )
            out.append(AbortedTxn(*fields))
        return out

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``, and whether the
        search is complete (an entry with last stable offset >= the bound was seen), as
        Kafka's ``collectAbortedTxns``."""
        found = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose last offset is >= ``offset``."""
        entries = self.all_aborted_txns()
        keep = 0
        while keep < len(entries) and entries[keep].last_offset < offset:
            keep += 1
        if self._memory is not None:
            del self._memory[keep * self.ENTRY_SIZE :]
        elif (fd := self._channel(create=False)) is not None:
            os.ftruncate(fd, keep * self.ENTRY_SIZE)
        self._last_offset = entries[keep - 1].last_offset if keep else -1

    def reset(self) -> None:
        """Drop every entry (before recovery)."""
        if self._memory is not None:
            self._memory.clear()
        elif (fd := self._channel(create=False)) is not None:
            os.ftruncate(fd, 0)
        self._last_offset = -1

    def sanity_check(self) -> None:
        """Raise CorruptIndexError for a length that is not whole entries, a bad version, or an
        entry whose last offset is below the segment's start offset (Kafka's check)."""
        if self._memory is not None:
            size = len(self._memory)
        else:
            size = self._path.stat().st_size if self._path.exists() else 0
        if size % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"transaction index file has size {size} which is not a multiple of {self.ENTRY_SIZE}",
                file=str(self._path),
            )
        for i, txn in enumerate(self.all_aborted_txns()):
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"last offset of aborted transaction {txn} is less than start offset {self.start_offset}",
                    file=str(self._path),
                    position=i * self.ENTRY_SIZE,
                )

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            self._fd = None
            finalizer, self._fd_finalizer = self._fd_finalizer, None
            if finalizer is not None:
                finalizer()  # closes the descriptor, once

    def rename_to(self, path: str | os.PathLike) -> None:
        """Atomically rename the file (an open descriptor stays valid)."""
        self._path = rename_if_exists(self._path, path)

    def delete_if_exists(self) -> bool:
        """Close and delete the file; return whether it existed."""
        self.close()
        return unlink_if_exists(self._path)

    def __repr__(self) -> str:
        return f"TransactionIndex({str(self._path)!r}, start_offset={self.start_offset})"
