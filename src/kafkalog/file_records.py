"""Batches in a file, or in a window ``[start, end)`` of one: Kafka's ``FileRecords``.

Shallow iteration reads only what framing and the header need (one ``pread`` of at most 61
bytes per batch), never the whole file; a batch's body is read when it is validated or its
records are decoded. Validated iteration (``batches(validate=True)``, ``validate()``) streams
the file in 1 MiB chunks instead, since it has to read every byte for the CRC anyway. Slices
are views sharing the file descriptor; :meth:`FileRecords.transfer_to` sends bytes to a socket
with ``os.sendfile`` after checking the file did not shrink underneath.

A file on a remote filesystem (a URL, or a :class:`kafkalog.remote.Storage` given) is opened
read-only through a :class:`kafkalog.remote.RangeReader`: the same reads, as ranged requests
through its bounded block cache; local files keep the descriptor and ``pread``.

Thread-safety: reads use ``pread`` and are safe from several threads; appends, truncation and
close must be serialised by the caller (a segment's lock).
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterator
from functools import partial

from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from .errors import InvalidConfigError, InvalidOffsetError, LogClosedError, TruncatedRecordError
from .legacy_record import LegacyRecordBatch
from .record import MAGIC_V2, RecordBatch
from .recordbatch import RECORD_BATCH_OVERHEAD, DefaultRecordBatch
from .memory_records import DEFAULT_MAX_BATCH_SIZE, MemoryRecords, Records, frame_entry
from .remote import DEFAULT_BLOCK_SIZE, RangeReader, Storage, is_remote, normalize_path
from .sendfile import transfer

_CHUNK = 1 << 20


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


class _Handle:
    """A file descriptor (or a remote file's reader) shared by a FileRecords and its slices;
    closed once, by its owner, or when the last of them is dropped without ``close()`` (a
    finalizer, so no descriptor leaks). ``pread(size, position)`` reads it either way."""

    __slots__ = ("fd", "path", "size", "closed", "finalizer", "pread", "remote", "__weakref__")

    def __init__(self, fd: int, path: str, remote: RangeReader | None = None) -> None:
        self.fd = fd
        self.path = path
        self.remote = remote
        self.closed = False
        if remote is None:
            self.size = os.fstat(fd).st_size
            self.pread = partial(os.pread, fd)  # a C callable: no Python frame on the local path
            self.finalizer = weakref.finalize(self, _close_quietly, fd)
        else:
            self.size = remote.size
            self.pread = remote.pread
            self.finalizer = weakref.finalize(self, remote.close)

    def close(self) -> None:
        self.closed = True
        self.finalizer()  # closes the descriptor, once


class FileRecords(Records):
    """A log file (or a window of it) read as batches.

    Use :meth:`open`; a whole-file ``FileRecords`` follows the file's size as it appends or
    truncates, a slice has a fixed end.
    """

    def __init__(
        self,
        handle: _Handle,
        start: int,
        end: int | None,
        *,
        owner: bool,
        writable: bool = False,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        self._h = handle
        self._start = start
        self._end = end  # None: up to the file's (tracked) size
        self._owner = owner
        self._writable = writable
        self._max_batch_size = max_batch_size
        self._max_decompressed = max_decompressed_size

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        mutable: bool = False,
        create: bool = False,
        start: int = 0,
        end: int | None = None,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        preallocate: int = 0,
        storage: Storage | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        size: int | None = None,
    ) -> FileRecords:
        """Open ``path`` for reading (and appending with ``mutable``).

        Args:
            path: the ``.log`` file.
            mutable: open read-write so :meth:`append` and :meth:`truncate_to` work.
            create: create the file if it does not exist (implies ``mutable``).
            preallocate: when the file is created here, reserve this many bytes (Kafka's
                ``preallocate``); the records end stays at 0 and :meth:`trim` gives the space
                back. An existing file is taken at its full length, as Kafka does.
            start, end: a window of the file; ``end=None`` follows the file's size.
            max_batch_size: largest entry size accepted while reading.
            max_decompressed_size: cap on a batch's decompressed payload.
            storage: the filesystem of ``path`` (default: from its URL; a plain path is local).
            block_size: a remote file's read-ahead; its reads stop at ``end`` when one is given.
            size: a remote file's length when the caller knows it (from a listing): saves the
                request that would ask for it.

        Raises:
            FileNotFoundError: no such file.
            InvalidConfigError: ``mutable`` or ``create`` for a remote file (they are read-only).
        """
        path = os.fspath(path)
        if path.startswith("file://"):
            path = normalize_path(path)
        if storage is None and is_remote(path):
            storage = Storage.for_path(path)
        if storage is not None and not storage.is_local:
            if mutable or create:
                raise InvalidConfigError("files on a remote filesystem are opened read-only", file=path)
            reader = storage.open(path, block_size=block_size, window_end=end, size=size)
            if start < 0 or (end is not None and end < start):
                reader.close()
                raise InvalidOffsetError(f"invalid window [{start}, {end}) of {path}")
            return cls(_Handle(-1, path, reader), start, end, owner=True,
                       max_batch_size=max_batch_size, max_decompressed_size=max_decompressed_size)
        flags = os.O_RDWR if (mutable or create) else os.O_RDONLY
        if create:
            flags |= os.O_CREAT
        existed = os.path.exists(path)
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            handle = _Handle(fd, path)
        except BaseException:
            os.close(fd)
            raise
        try:
            if create and preallocate > 0 and not existed:
                os.ftruncate(fd, preallocate)
                handle.size = 0
        except BaseException:
            handle.close()
            raise
        if start < 0 or (end is not None and end < start):
            handle.close()
            raise InvalidOffsetError(f"invalid window [{start}, {end}) of {path}")
        return cls(
            handle,
            start,
            end,
            owner=True,
            writable=mutable or create,
            max_batch_size=max_batch_size,
            max_decompressed_size=max_decompressed_size,
        )

    # -- basics ----------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._h.path

    @property
    def start(self) -> int:
        """Position of this window's first byte in the file."""
        return self._start

    @property
    def end(self) -> int:
        """Position after this window's last byte in the file."""
        size = max(self._h.size, self._start)  # a window past the end of the file is empty
        return size if self._end is None else min(self._end, size)

    @property
    def size_in_bytes(self) -> int:
        return self.end - self._start

    @property
    def max_batch_size(self) -> int:
        """The largest entry size this reader accepts."""
        return self._max_batch_size

    @property
    def closed(self) -> bool:
        return self._h.closed

    def fileno(self) -> int:
        return self._fd()

    @property
    def is_remote(self) -> bool:
        """Whether the file is read from a remote filesystem (read-only, no descriptor)."""
        return self._h.remote is not None

    @property
    def bytes_fetched(self) -> int:
        """Bytes fetched from a remote filesystem so far (0 for a local file)."""
        return self._h.remote.bytes_fetched if self._h.remote is not None else 0

    def _fd(self) -> int:
        if self._h.closed:
            raise LogClosedError("file is closed", file=self._h.path)
        if self._h.remote is not None:
            raise InvalidConfigError("a file on a remote filesystem has no descriptor", file=self._h.path)
        return self._h.fd

    def _pread(self):
        if self._h.closed:
            raise LogClosedError("file is closed", file=self._h.path)
        return self._h.pread

    def __enter__(self) -> FileRecords:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRecords({self._h.path!r}, start={self._start}, end={self.end})"

    def close(self) -> None:
        """Close the file (a slice leaves its parent's descriptor open). A writable file is
        first fsynced and trimmed of preallocated space, as Kafka's ``FileRecords.close``."""
        if self._owner and not self._h.closed:
            try:
                if self._writable:
                    self.flush()
                    self.trim()
            finally:
                self._h.close()

    # -- reading ---------------------------------------------------------------------------------

    def _read_exact(self, position: int, size: int) -> bytes:
        """``size`` bytes at absolute ``position`` (fewer only if the file ends first)."""
        pread = self._pread()
        data = pread(size, position)
        if len(data) == size or not data:
            return data
        parts = [data]
        got = len(data)
        while got < size:
            more = pread(size - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (relative to this window)."""
        if position < 0 or size < 0:
            raise InvalidOffsetError(f"invalid read of {size} bytes at {position}", file=self._h.path)
        start = self._start + position
        return self._read_exact(start, max(0, min(size, self.end - start)))

    def read_into(self, position: int, buffer: bytearray | memoryview) -> int:
        """Read up to ``len(buffer)`` bytes from ``position`` (relative to this window) into
        ``buffer``; returns how many (fewer only where the window or the file ends). A reader
        going through a file chunk by chunk reuses one buffer instead of a fresh allocation
        per chunk, whose first touch costs a page fault per 4 KiB on some machines."""
        if position < 0:
            raise InvalidOffsetError(f"invalid read at {position}", file=self._h.path)
        start = self._start + position
        view = memoryview(buffer).cast("B")
        size = max(0, min(len(view), self.end - start))
        if self._h.remote is not None:
            data = self._read_exact(start, size)
            view[: len(data)] = data
            return len(data)
        fd, got = self._fd(), 0
        while got < size:
            n = os.preadv(fd, [view[got:size]], start + got)
            if n <= 0:
                break  # the file shrank since the window was made
            got += n
        return got

    def _truncated(self, pos: int, end: int) -> TruncatedRecordError:
        return TruncatedRecordError(
            f"partial batch at the end: {end - pos} bytes do not hold a whole entry", file=self._h.path, position=pos
        )

    def batches(self, *, validate: bool = False, strict: bool = False) -> Iterator[RecordBatch]:
        if validate:
            return self._validated_batches(strict)
        return self._shallow_batches(strict)

    def _shallow_batches(self, strict: bool) -> Iterator[RecordBatch]:
        path = self._h.path
        pos = self._start
        end = self.end
        max_size = self._max_batch_size
        max_decompressed = self._max_decompressed
        while pos < end:
            want = min(RECORD_BATCH_OVERHEAD, end - pos)
            head = self._pread()(want, pos)
            remaining = end - pos if len(head) == want else len(head)  # the file shrank: a tail
            framed = frame_entry(head, 0, remaining, file=path, position=pos, max_batch_size=max_size)
            if framed is None:
                if strict:
                    raise self._truncated(pos, pos + remaining)
                return
            size, magic = framed
            cls = DefaultRecordBatch if magic == MAGIC_V2 else LegacyRecordBatch
            loader = None if size <= len(head) else partial(self._read_exact, pos, size)
            yield cls(head, 0, position=pos, file=path, loader=loader, max_decompressed_size=max_decompressed)
            pos += size

    def _validated_batches(self, strict: bool) -> Iterator[RecordBatch]:
        path = self._h.path
        pos = self._start
        end = self.end
        max_size = self._max_batch_size
        max_decompressed = self._max_decompressed
        buf = b""
        buf_pos = pos  # file position of buf[0]
        while pos < end:
            off = pos - buf_pos
            if len(buf) - off < min(RECORD_BATCH_OVERHEAD, end - pos):
                buf = self._read_exact(pos, min(_CHUNK, end - pos))
                buf_pos, off = pos, 0
                if len(buf) < min(RECORD_BATCH_OVERHEAD, end - pos):
                    end = pos + len(buf)  # the file shrank while we read it
            framed = frame_entry(buf, off, end - pos, file=path, position=pos, max_batch_size=max_size)
            if framed is None:
                if strict:
                    raise self._truncated(pos, end)
                return
            size, magic = framed
            if len(buf) - off < size:
                # Bounded by the bytes the file holds (checked by framing), not by the size field.
                buf = self._read_exact(pos, max(min(_CHUNK, end - pos), size))
                buf_pos, off = pos, 0
                if len(buf) < size:  # the file shrank while we read it
                    if strict:
                        raise self._truncated(pos, pos + len(buf))
                    return
            cls = DefaultRecordBatch if magic == MAGIC_V2 else LegacyRecordBatch
            batch = cls(buf, off, position=pos, file=path, max_decompressed_size=max_decompressed)
            batch.ensure_valid()
            yield batch
            pos += size

    def slice(self, position: int, size: int | None = None) -> FileRecords:
        """A view of ``size`` bytes from ``position`` (relative to this window), sharing the file.

        Raises:
            InvalidOffsetError: a negative position or size, or a position beyond the end.
        """
        current = self.size_in_bytes
        if position < 0 or position > current:
            raise InvalidOffsetError(f"slice position {position} outside [0, {current}]", file=self._h.path)
        if size is not None and size < 0:
            raise InvalidOffsetError(f"invalid slice size {size}", file=self._h.path)
        start = self._start + position
        end = self.end if size is None else min(start + size, self.end)
        return FileRecords(
            self._h,
            start,
            end,
            owner=False,
            max_batch_size=self._max_batch_size,
            max_decompressed_size=self._max_decompressed,
        )

    def transfer_to(self, dest, position: int, count: int) -> int:
        """Send ``count`` bytes from ``position`` (relative to this window) to ``dest`` with
        ``os.sendfile`` (read+send where it cannot be used); return the bytes sent.

        Raises:
            TruncatedRecordError: the file shrank below this window's end.
            InvalidOffsetError: a position outside the window.
        """
        if self._h.remote is not None:
            return self._send_remote(dest, position, count)
        fd = self._fd()
        old_size = self.size_in_bytes
        actual = os.fstat(fd).st_size
        new_size = min(actual, self.end) - self._start
        if new_size < old_size:
            raise TruncatedRecordError(
                f"size of file records has been truncated during write: old size {old_size}, new size {new_size}",
                file=self._h.path,
            )
        if position < 0 or position > old_size:
            raise InvalidOffsetError(f"transfer position {position} outside [0, {old_size}]", file=self._h.path)
        count = max(0, min(count, old_size - position))
        return transfer(dest, fd, self._start + position, count)

    def _send_remote(self, dest, position: int, count: int) -> int:
        """transfer_to for a remote file: read and send (its size was fixed when opened)."""
        size = self.size_in_bytes
        if position < 0 or position > size:
            raise InvalidOffsetError(f"transfer position {position} outside [0, {size}]", file=self._h.path)
        data = self.read(position, max(0, min(count, size - position)))
        (getattr(dest, "sendall", None) or dest.write)(data)
        return len(data)

    # -- writing ---------------------------------------------------------------------------------

    def _check_writable(self) -> int:
        fd = self._fd()
        if not self._writable:
            raise LogClosedError("file records opened read-only (or a slice)", file=self._h.path)
        return fd

    def append(self, records: MemoryRecords | bytes | bytearray | memoryview) -> int:
        """Append the bytes of ``records`` at the end of the file; return how many were written.

        Raises:
            OSError: the write failed (``ENOSPC``: the disk is full). The file is left as it
                was: the part of a short write that landed is cut off again (or zeroed, in a
                preallocated file), so no partial batch follows the records.
        """
        fd = self._check_writable()
        data = records.buffer if isinstance(records, MemoryRecords) else records
        pos = self._h.size
        total = len(data) if not isinstance(data, memoryview) else data.nbytes
        written = 0
        try:
            written = os.pwrite(fd, data, pos)
            if written < total:  # a short write: carry on from where it stopped
                view = memoryview(data).cast("B")
                while written < total:
                    written += os.pwrite(fd, view[written:], pos + written)
        except OSError:
            self._undo_partial_write(fd, pos, written)
            raise
        self._h.size = pos + written
        return written

    def append_target(self) -> tuple[int, int] | None:
        """``(descriptor, size)`` where a compiled append writes this file's next records
        (:mod:`kafkalog.append_request`), or None when it cannot (remote, closed, read-only)."""
        h = self._h
        if h.closed or h.remote is not None or not self._writable:
            return None
        return h.fd, h.size

    def note_appended(self, position: int, written: int) -> None:
        """Count ``written`` bytes a compiled append wrote at ``position`` (the file's size)."""
        self._h.size = position + written

    def undo_write(self, position: int, written: int) -> None:
        """Take back the bytes of a failed compiled append, as :meth:`append` does its own."""
        self._undo_partial_write(self._h.fd, position, written)

    def _undo_partial_write(self, fd: int, pos: int, written: int) -> None:
        """Take back the ``written`` bytes a failed append left at ``pos``: cut the file there,
        or zero them where the file extends past them (preallocation, whose blocks they
        already hold, so zeroing needs no space)."""
        if not written:
            return
        try:
            if os.fstat(fd).st_size > pos + written:
                os.pwrite(fd, bytes(written), pos)
            else:
                os.ftruncate(fd, pos)
        except OSError:
            pass  # the bytes lie past the records' end; recovery would cut them (invalid batch)

    def rename_to(self, path: str | os.PathLike) -> None:
        """Atomically rename the file; the open descriptor (and any slice) stays valid."""
        path = os.fspath(path)
        os.replace(self._h.path, path)
        self._h.path = path

    def trim(self) -> None:
        """Give back preallocated space: truncate the file to the end of its records."""
        fd = self._check_writable()
        if os.fstat(fd).st_size > self._h.size:
            os.ftruncate(fd, self._h.size)

    def flush(self) -> None:
        """fsync the file (Kafka's ``channel.force(true)``)."""
        os.fsync(self._check_writable())

    def truncate_to(self, size: int) -> int:
        """Truncate the file to ``size`` bytes; return how many were removed.

        Raises:
            InvalidOffsetError: ``size`` is negative or beyond the current size.
        """
        fd = self._check_writable()
        current = self._h.size
        if size < 0 or size > current:
            raise InvalidOffsetError(
                f"attempt to truncate log segment to {size} bytes failed: size of this log segment is {current} bytes",
                file=self._h.path,
            )
        if size < current:
            os.ftruncate(fd, size)
            self._h.size = size
        return current - size
