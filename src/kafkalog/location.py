"""Where the read-only operations (``verify``, the CLI's ``dump`` and ``stat``) read: a local
path, or a URL of any filesystem fsspec knows (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``,
...; credentials and endpoint from fsspec's usual configuration), read in place through one
:class:`kafkalog.remote.Storage`.

A :class:`Location` is one file or directory with the few pathlib operations the readers use.
On the local filesystem each is pathlib's own, so they behave on disk exactly as with a path.
On a remote one:

- a directory is listed once per run (one request on an object store: names, sizes, and the
  common prefixes that are its directories) and the listing answers every later question
  about its entries (exists, is a file, size), so checking a segment's siblings costs nothing;
- small files (indexes, snapshots, checkpoints) are fetched whole, one request each;
- ``.log`` files are read by position (:meth:`Location.open_records`): ranged requests through
  a :class:`kafkalog.remote.RangeReader` with a bounded read-ahead, so a walk over a segment fetches
  its bytes about once and a lookup only the blocks it touches.

Nothing is written, no temporary file is made, and every path a report or an error names is
the remote URL itself (normalised: ``s3a://`` read as ``s3://``, no trailing or doubled
slashes).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import KafkalogError
from .file_records import FileRecords
from .filenames import partition_dir_names, segment_log_names
from .remote import DEFAULT_BLOCK_SIZE, Storage, is_remote, normalize_path

#: What a directory holds: files (name -> size) and directory names; None: no such directory.
_Listing = tuple[dict[str, int], list[str]]


class _Remote:
    """One remote filesystem and the listings taken of it in this run (the readers do not
    change the store; a listing is taken once)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._listings: dict[str, _Listing | None] = {}

    def listing(self, url: str) -> _Listing | None:
        if url not in self._listings:
            try:
                self._listings[url] = self.storage.listing(url)
            except (FileNotFoundError, NotADirectoryError):
                self._listings[url] = None
            except OSError as e:
                raise KafkalogError(f"listing the directory failed: {e.strerror or e}", file=url) from e
        return self._listings[url]

    def known_directory(self, url: str) -> bool | None:
        """Whether ``url`` was listed as a directory (None: not listed yet)."""
        if url not in self._listings:
            return None
        return self._listings[url] is not None


class Location:
    """A file or directory on the local filesystem or a remote one (see the module docstring).

    ``str()`` is the path as reports name it: a local path as it was given (callers pass
    pathlib's spelling), a remote one as a normalised URL. Locations made from one another
    (``/``, ``parent``, ``with_name``) share the remote filesystem and its listings.
    """

    __slots__ = ("_remote", "_text")

    def __init__(self, text: str, remote: _Remote | None = None) -> None:
        self._text = text
        self._remote = remote

    @classmethod
    def of(cls, path: str | os.PathLike | Location, storage_options: Mapping[str, Any] | None = None) -> Location:
        """The location of ``path``: a URL is normalised and opened with ``storage_options``
        (fsspec's options); a local path is taken as pathlib spells it.

        Raises:
            InvalidConfigError: a malformed URL, or a filesystem fsspec cannot open.
        """
        if isinstance(path, Location):
            return path
        if is_remote(path):
            url = normalize_path(path)
            return cls(url, _Remote(Storage.for_path(url, storage_options)))
        if os.fspath(path).startswith("file://"):
            return cls(normalize_path(path))  # a local path spelled as a URL: named as a path
        return cls(str(Path(path)))

    def _near(self, text: str) -> Location:
        return Location(text, self._remote)

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Location({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    @property
    def is_remote(self) -> bool:
        return self._remote is not None

    @property
    def storage(self) -> Storage:
        """The filesystem (the local one for a local path)."""
        return self._remote.storage if self._remote is not None else Storage()

    # -- names -------------------------------------------------------------------------------------

    def _is_root(self) -> bool:
        """``scheme://bucket``: the top of a remote filesystem."""
        return "/" not in self._text.split("://", 1)[1]

    @property
    def name(self) -> str:
        if self._remote is None:
            return Path(self._text).name
        return "" if self._is_root() else posixpath.basename(self._text)

    @property
    def parent(self) -> Location:
        if self._remote is None:
            return self._near(str(Path(self._text).parent))
        return self if self._is_root() else self._near(posixpath.dirname(self._text))

    def __truediv__(self, name: str) -> Location:
        if self._remote is None:
            return self._near(str(Path(self._text) / name))
        return self._near(f"{self._text}/{name}")

    def with_name(self, name: str) -> Location:
        if self._remote is None:
            return self._near(str(Path(self._text).with_name(name)))
        return self.parent / name

    # -- what is there -----------------------------------------------------------------------------

    def listing(self) -> _Listing:
        """The files (name -> size) and directory names in this directory.

        Raises:
            FileNotFoundError: no such directory (or a file).
        """
        if self._remote is None:
            return self.storage.listing(self._text)
        found = self._remote.listing(self._text)
        if found is None:
            raise FileNotFoundError(2, "No such file or directory", self._text)
        return found

    def _entry(self) -> tuple[bool, int | None]:
        """Remote: (is a directory, size if a file) from the listings."""
        assert self._remote is not None
        if self._is_root() or self._remote.known_directory(self._text):
            return self._remote.listing(self._text) is not None, None
        parent = self._remote.listing(self.parent._text)
        if parent is None:
            return False, None
        files, dirs = parent
        if self.name in files:
            return False, files[self.name]
        return self.name in dirs, None

    def exists(self) -> bool:
        if self._remote is None:
            return os.path.exists(self._text)
        is_dir, size = self._entry()
        return is_dir or size is not None

    def is_file(self) -> bool:
        if self._remote is None:
            return os.path.isfile(self._text)
        return self._entry()[1] is not None

    def is_dir(self) -> bool:
        if self._remote is None:
            return os.path.isdir(self._text)
        return self._entry()[0]

    def size(self) -> int:
        """The file's length.

        Raises:
            FileNotFoundError: no such file.
        """
        if self._remote is None:
            return os.stat(self._text).st_size
        size = self._entry()[1]
        if size is None:
            raise FileNotFoundError(2, "No such file or directory", self._text)
        return size

    def files(self) -> dict[str, int]:
        """The files in this directory, name -> size."""
        return self.listing()[0]

    def segment_logs(self) -> list[Location]:
        """The ``<20 digits>.log`` files of this partition directory, by base offset."""
        return [self / name for name in segment_log_names(self.files())]

    def partition_dirs(self) -> list[Location]:
        """The partition directories of this log directory (``-future`` ones too), by name."""
        return [self / name for name in partition_dir_names(self.listing()[1])]

    # -- reading -----------------------------------------------------------------------------------

    def read_bytes(self) -> bytes:
        """The whole file (one request when remote).

        Raises:
            OSError: missing or unreadable (naming this path).
        """
        if self._remote is None:
            return Path(self._text).read_bytes()
        try:
            return self._remote.storage.read_bytes(self._text)
        except FileNotFoundError:
            raise FileNotFoundError(2, "No such file or directory", self._text) from None
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), self._text) from e

    def open_records(self, *, block_size: int = DEFAULT_BLOCK_SIZE, end: int | None = None) -> FileRecords:
        """The ``.log`` file as records, read-only: a local file by ``pread``; a remote one by
        ranged requests of ``block_size`` bytes (two blocks kept), never read ahead past ``end``.

        Raises:
            OSError: missing or unreadable.
        """
        if self._remote is None:
            return FileRecords.open(self._text)
        try:
            return FileRecords.open(self._text, storage=self._remote.storage, block_size=block_size, end=end,
                                    size=self.size())  # the listing's: no HEAD
        except FileNotFoundError:
            raise FileNotFoundError(2, "No such file or directory", self._text) from None
        except OSError as e:
            if isinstance(e, KafkalogError):
                raise
            raise OSError(e.errno, e.strerror or str(e), self._text) from e

