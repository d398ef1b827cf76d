"""Files of partition directories on a local or remote filesystem: paths, listings, and a
read-only positioned-read source with a bounded read-ahead.

A path is either local (``/data/kafka-logs``, ``cl/logs``, ``file:///data/kafka-logs``) or a URL
of any filesystem fsspec knows (``s3://bucket/prefix``, ``gs://``, ``abfs://``, ``hdfs://``, ...;
``s3a://`` and ``s3n://`` are Hadoop's names for ``s3://``). :func:`normalize_path` turns either
into the one spelling every other step uses: an absolute local path, or ``scheme://bucket/key``
without ``.``, ``..``, doubled or trailing slashes. fsspec (``pip install "kafkalog[cloud]"``)
is imported here only, and only when a URL is opened.

:class:`Storage` is one filesystem (the local one, or an fsspec filesystem with its storage
options: credentials, endpoint, ...); it is picklable, so the driver hands it to the executors,
which open the files themselves. :class:`RangeReader` reads one file by position: a local file
with ``pread`` (the path ``FileRecords`` always had), a remote one with ranged requests through
a block cache of fixed size -- each miss fetches ``block_size`` bytes from the position asked
(never past ``window_end``, the end of what the caller will read), and at most
``_CACHE_BLOCKS`` blocks are kept. Reading a window of up to ``block_size`` bytes from its start
to its end is one request.

Writers on object stores (docs/spark.md, "Cloud paths") upload a segment's indexes first and its
``.log`` last, each object whole: a reader lists segments by their ``.log`` objects, so it never
sees a segment whose files are not all there.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

from .errors import InvalidConfigError, LogClosedError, RemoteReadError

#: ``scheme://`` at the start of a URL.
_URL = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*)://")
#: Hadoop's names for S3 that fsspec knows as ``s3``.
_ALIASES = {"s3a": "s3", "s3n": "s3"}
#: Default read-ahead of a remote read: also the largest batch run the reader decodes at once.
DEFAULT_BLOCK_SIZE = 16 << 20
#: Read-ahead for scattered header reads (planning on the driver, the CLI's look at a first batch).
SMALL_BLOCK_SIZE = 16 << 10
#: Blocks a RangeReader keeps: the one being read and the one before (a batch across the edge).
_CACHE_BLOCKS = 2


def is_remote(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a URL of a filesystem other than the local one."""
    m = _URL.match(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else None
    return m is not None and m["scheme"].lower() != "file"


def normalize_path(path: str | os.PathLike) -> str:
    """The one spelling of ``path``: absolute when local (``file://`` URLs included, resolved
    against this process's working directory), ``scheme://bucket/key`` normalised when remote.

    Raises:
        InvalidConfigError: a ``file://`` URL naming another host, or a URL without a bucket.
    """
    text = os.fspath(path)
    m = _URL.match(text)
    if m is None:
        return os.path.abspath(text)
    scheme = m["scheme"].lower()
    if scheme == "file":
        parts = urllib.parse.urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise InvalidConfigError(f"a file:// URL names a path on this machine, not on {parts.netloc!r}", file=text)
        return os.path.abspath(urllib.parse.unquote(parts.path) or "/")
    scheme = _ALIASES.get(scheme, scheme)
    bucket, _, key = text[m.end():].partition("/")
    if not bucket:
        raise InvalidConfigError("a URL needs a bucket or host after scheme://", file=text)
    key = posixpath.normpath("/" + key.lstrip("/")) if key else "/"
    return f"{scheme}://{bucket}{'' if key == '/' else key}"


def join(path: str, *names: str) -> str:
    """``path`` with ``names`` appended (``/`` for URLs, the OS separator for local paths)."""
    return posixpath.join(path, *names) if is_remote(path) else os.path.join(path, *names)


def basename(path: str) -> str:
    """The last name in ``path``."""
    return posixpath.basename(path.rstrip("/")) if is_remote(path) else os.path.basename(os.path.normpath(path))


def dirname(path: str) -> str:
    """``path`` without its last name."""
    return posixpath.dirname(path.rstrip("/")) if is_remote(path) else os.path.dirname(os.path.abspath(path))


def has_magic(path: str) -> bool:
    """Whether ``path`` is a glob pattern."""
    return re.search(r"[*?[]", path) is not None


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError('remote paths need fsspec: pip install "kafkalog[cloud]"') from None
    return fsspec


class Storage:
    """One filesystem: the local one, or an fsspec filesystem built from a URL's scheme and
    ``storage_options`` (fsspec's own configuration -- environment, ``FSSPEC_S3_*`` -- applies
    as well). Picklable; its methods are safe from several threads.

    Missing files raise ``FileNotFoundError`` as ``os`` does, on every filesystem.
    """

    def __init__(self, protocol: str = "file", storage_options: Mapping[str, Any] | None = None) -> None:
        self.protocol = protocol
        self.storage_options = dict(storage_options or {})
        self._fs: Any = None
        self._lock = threading.Lock()

    @classmethod
    def for_path(cls, path: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> Storage:
        """The filesystem of ``path`` (local for a plain path or a ``file://`` URL)."""
        m = _URL.match(os.fspath(path))
        if m is None or m["scheme"].lower() == "file":
            return cls()
        scheme = m["scheme"].lower()
        return cls(_ALIASES.get(scheme, scheme), storage_options)

    def __getstate__(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["protocol"], state["storage_options"])  # type: ignore[misc]

    @property
    def is_local(self) -> bool:
        return self.protocol == "file"

    join = staticmethod(join)
    basename = staticmethod(basename)
    dirname = staticmethod(dirname)
    has_magic = staticmethod(has_magic)

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (built on first use; fsspec caches instances)."""
        if self._fs is None:
            with self._lock:
                if self._fs is None:
                    try:
                        self._fs = _fsspec().filesystem(self.protocol, **self.storage_options)
                    except (ImportError, ValueError) as e:
                        raise InvalidConfigError(f"cannot open the {self.protocol}:// filesystem: {e}") from e
        return self._fs

    def _key(self, path: str) -> str:
        return self.fs._strip_protocol(path)

    def _url(self, key: str) -> str:
        return f"{self.protocol}://{key.lstrip('/')}"

    # -- listing -------------------------------------------------------------------------------

    def listing(self, path: str) -> tuple[dict[str, int], list[str]]:
        """What directory ``path`` holds: its files (name -> size) and the names of its
        directories (an object store's common prefixes), sorted; one request on an object store.

        Raises:
            FileNotFoundError: no such directory.
            NotADirectoryError: ``path`` is a file.
        """
        files: dict[str, int] = {}
        dirs: list[str] = []
        if self.is_local:
            with os.scandir(path) as entries:
                for entry in entries:
                    try:
                        if entry.is_file():
                            files[entry.name] = entry.stat().st_size
                        elif entry.is_dir():
                            dirs.append(entry.name)
                    except FileNotFoundError:
                        continue  # deleted while listed
            return files, sorted(dirs)
        for e in self._ls(path):
            name = posixpath.basename(e["name"].rstrip("/"))
            if e.get("type") == "directory":
                dirs.append(name)
            else:
                files[name] = int(e.get("size") or 0)
        return files, sorted(dirs)

    def list_files(self, path: str) -> dict[str, int]:
        """The files directly in directory ``path``: name -> size (directories left out).

        Raises:
            FileNotFoundError: no such directory.
        """
        return self.listing(path)[0]

    def list_dirs(self, path: str) -> list[str]:
        """The names of the directories directly in ``path`` (an object store's common prefixes).

        Raises:
            FileNotFoundError: no such directory.
        """
        return self.listing(path)[1]

    def _ls(self, path: str) -> list[dict[str, Any]]:
        key = self._key(path)
        # Never from fsspec's listing cache: a listing must show every write that completed
        # before it (offset claims, segments published since, a stream's new segments).
        self.fs.invalidate_cache(key)
        entries = self.fs.ls(key, detail=True)
        if len(entries) == 1 and entries[0].get("type") == "file" and entries[0]["name"].rstrip("/") == key.rstrip("/"):
            raise NotADirectoryError(path)
        return entries

    def isdir(self, path: str) -> bool:
        if self.is_local:
            return os.path.isdir(path)
        try:
            return bool(self._ls(path))  # an object store has a "directory" while it holds keys
        except (FileNotFoundError, NotADirectoryError):
            return False

    def exists(self, path: str) -> bool:
        if self.is_local:
            return os.path.exists(path)
        key = self._key(path)
        self.fs.invalidate_cache(key)  # not a cached listing's answer (see _ls)
        return bool(self.fs.exists(key))

    def size(self, path: str) -> int:
        """The length of file ``path``. Raises FileNotFoundError."""
        if self.is_local:
            return os.path.getsize(path)
        self.fs.invalidate_cache(self._key(path))
        info = self.fs.info(self._key(path))
        if info.get("type") == "directory":
            raise IsADirectoryError(path)
        return int(info["size"])

    def glob(self, pattern: str) -> list[str]:
        """The paths matching ``pattern``, sorted, in this filesystem's spelling."""
        if self.is_local:
            import glob as _glob

            return sorted(_glob.glob(pattern))
        return sorted(self._url(k) for k in self.fs.glob(self._key(pattern)))

    # -- reading -------------------------------------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        """The whole of a small file (an index, a checkpoint, a snapshot). Raises FileNotFoundError."""
        if self.is_local:
            with open(path, "rb") as f:
                return f.read()
        return bytes(self.fs.cat_file(self._key(path)))

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of ``path``, one ranged request (fewer when the file is shorter)."""
        if end <= start:
            return b""
        if self.is_local:
            with open(path, "rb") as f:
                return os.pread(f.fileno(), end - start, start)
        return bytes(self.fs.cat_file(self._key(path), start=start, end=end))

    def open(self, path: str, *, block_size: int = DEFAULT_BLOCK_SIZE, window_end: int | None = None,
             size: int | None = None) -> RangeReader:
        """A positioned-read source over ``path`` (see :class:`RangeReader`). Raises FileNotFoundError."""
        return RangeReader(self, path, block_size=block_size, window_end=window_end, size=size)

    # -- writing (put_*: object stores; remove: any filesystem) ------------------------------------

    def put_file(self, local: str, path: str) -> None:
        """Upload local file ``local`` as ``path``, whole (an object store's PUT is atomic)."""
        self.fs.put_file(local, self._key(path))

    @property
    def exclusive_create(self) -> bool:
        """Whether :meth:`create_exclusive` is offered: on S3 (a conditional PUT,
        ``If-None-Match: *``); other stores are not trusted with it here."""
        return self.protocol == "s3"

    def create_exclusive(self, path: str, data: bytes) -> None:
        """Create object ``path`` holding ``data``, whole, unless it exists: one writer wins a race.

        Raises:
            FileExistsError: ``path`` exists (another writer created it first).
            InvalidConfigError: this filesystem cannot create exclusively (:attr:`exclusive_create`).
        """
        if not self.exclusive_create:
            raise InvalidConfigError(f"the {self.protocol}:// filesystem has no exclusive create", file=path)
        self.fs.pipe_file(self._key(path), data, mode="create")

    def copy(self, src: str, dst: str) -> None:
        """Copy file ``src`` to ``dst`` inside the filesystem, whole (on S3 a server-side
        CopyObject: the bytes do not pass through this process)."""
        if self.is_local:
            shutil.copyfile(src, dst)
            return
        self.fs.copy(self._key(src), self._key(dst))

    def put_bytes(self, path: str, data: bytes) -> None:
        """Store ``data`` as object ``path``, whole, with one PUT (atomic on an object store: a
        reader gets the old object or the new one). Remote filesystems only: callers replace a
        local file with ``kafkalog.durable.write_atomically`` (temporary file, fsync, rename), which this
        layer sits below."""
        if self.is_local:
            raise InvalidConfigError("put_bytes writes objects on a remote filesystem; use write_atomically "
                                     "for a local file", file=path)
        self.fs.pipe_file(self._key(path), data)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Delete ``path`` (a directory's whole tree with ``recursive``); a missing one is fine."""
        if self.is_local:
            try:
                if recursive and os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except FileNotFoundError:
                pass
            return
        try:
            if recursive:
                self.fs.rm(self._key(path), recursive=True)
            else:
                self.fs.rm_file(self._key(path))  # one DELETE of that object, no listing
        except FileNotFoundError:
            pass


class RangeReader:
    """A read-only positioned-read source for one file on a local or remote filesystem.

    Local files are read with ``os.pread`` on a descriptor held open (no cache: the page cache
    is one). Remote files are read with ranged requests through at most ``_CACHE_BLOCKS``
    blocks: a read that misses fetches from its position up to ``block_size`` bytes (or the
    read's own length, when larger), stopping at ``window_end`` or the end of the file; a miss
    shortly after the newest block is fetched from that block's end (a header walk skips batch
    bodies that are read next). With a ``window_end`` the next block of the window is fetched in
    the background while the current one is used: one request in flight, never past the window,
    so at most three blocks are held. The
    size is the file's when opened (files of a finished segment do not change), or the one the
    caller gives (from a listing it took). ``requests``
    and ``bytes_fetched`` count what went over the network. Thread-safe.
    """

    def __init__(self, storage: Storage, path: str, *, block_size: int = DEFAULT_BLOCK_SIZE,
                 window_end: int | None = None, size: int | None = None) -> None:
        self.storage = storage
        self.path = path
        self.block_size = max(1, block_size)
        self.requests = 0
        self.bytes_fetched = 0
        self._blocks: list[tuple[int, bytes]] = []  # (file position, bytes), most recent last
        self._lock = threading.Lock()
        self._closed = False
        self._fd: int | None = None
        if storage.is_local:
            self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            self.size = os.fstat(self._fd).st_size
        else:
            # A size the caller already has (a listing's) saves a request; else one HEAD.
            self.size = storage.size(path) if size is None else size
        self.window_end = self.size if window_end is None else max(0, min(window_end, self.size))
        # A reader of a window reads it to its end: the next block is fetched while the current
        # one is decoded (one request in flight at most, never past the window).
        self._prefetch = window_end is not None and not storage.is_local
        self._pending: tuple[int, int, threading.Thread, list[Any]] | None = None

    def fileno(self) -> int | None:
        """The local descriptor, or None for a remote file."""
        return self._fd

    def close(self) -> None:
        self._closed = True
        self._blocks = []
        self._pending = None  # a fetch in flight ends on its own (a daemon thread)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def pread(self, size: int, position: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (fewer at the end of the file), as ``os.pread``."""
        if self._closed:
            raise LogClosedError("file is closed", file=self.path)
        if self._fd is not None:
            return os.pread(self._fd, size, position)
        end = min(position + size, self.size)
        if end <= position:
            return b""
        parts = []
        at = position
        with self._lock:
            while at < end:
                hit = self._cached(at)
                if hit is not None:
                    start, data = hit
                    piece = data[at - start:end - start]
                else:
                    # A reader walking batch headers skips their bodies: a miss a little past the
                    # newest block is fetched from that block's end, so the skipped bytes (which
                    # a decode reads next) come with it instead of costing a request of their own.
                    start = at
                    if self._blocks:
                        newest_end = self._blocks[-1][0] + len(self._blocks[-1][1])
                        if newest_end < at < newest_end + self.block_size // 2:
                            start = newest_end
                    limit = self.window_end if start < self.window_end else self.size
                    fetch_end = min(max(end, start + self.block_size), max(limit, end))
                    data = self._block(start, fetch_end)
                    if len(data) <= at - start:
                        break  # the file shrank since it was opened: a short read, as pread gives
                    self._blocks.append((start, data))
                    del self._blocks[:-_CACHE_BLOCKS]
                    piece = data[at - start:end - start]
                parts.append(piece)
                at += len(piece)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _cached(self, at: int) -> tuple[int, bytes] | None:
        for start, data in reversed(self._blocks):
            if start <= at < start + len(data):
                return start, data
        return None

    def _block(self, start: int, end: int) -> bytes:
        """Bytes [start, end): from the prefetch in flight when it starts there, else fetched;
        then the next block of the window is prefetched."""
        data = None
        pending, self._pending = self._pending, None
        if pending is not None:
            p_start, p_end, thread, box = pending
            thread.join()
            if p_start == start and box and not isinstance(box[0], BaseException):
                data = box[0]
                if end > p_end and len(data) == p_end - p_start:
                    data += self._fetch(p_end, end)
                data = data[:end - start]
        if data is None:
            data = self._fetch(start, end)
        after = start + len(data)
        if self._prefetch and len(data) == end - start and after < self.window_end:
            nxt = min(after + self.block_size, self.window_end)
            box: list[Any] = []

            def fetch() -> None:
                try:
                    box.append(self._fetch(after, nxt))
                except BaseException as e:  # re-fetched (and raised) by the reader when needed
                    box.append(e)

            thread = threading.Thread(target=fetch, name="kafkalog-prefetch", daemon=True)
            self._pending = (after, nxt, thread, box)
            thread.start()
        return data

    def _fetch(self, start: int, end: int) -> bytes:
        try:
            data = self.storage.read_range(self.path, start, end)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise RemoteReadError(f"reading bytes [{start}, {end}) failed: {e}", file=self.path, position=start) from e
        self.requests += 1
        self.bytes_fetched += len(data)
        return data
