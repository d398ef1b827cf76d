"""Durable file-system steps, written once: atomic replacement, directory fsync, and the log
directory's ``.lock``.

Kafka's rules (``Utils.atomicMoveWithFallback``, ``Utils.flushDir``, ``FileLock``): a file that
must never be seen half-written is written to ``<name>.tmp`` in the same directory, fsynced,
renamed over the target, and the directory is fsynced so that the rename itself survives a
power cut. Directories cannot be opened for fsync on Windows; Kafka skips it there, and so do we.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path

from .errors import KafkalogError

#: The suffix of the temporary file an atomic write renames into place.
TMP_SUFFIX = ".tmp"
#: The log directory's lock file (Kafka's ``LogManager.LockFileName``).
LOCK_FILE = ".lock"


#: directory (absolute) -> what fsyncs it for its owner (see :func:`register_dir_syncer`).
_dir_syncers: dict[str, Callable[[], None]] = {}


def register_dir_syncer(directory: str | os.PathLike, syncer: Callable[[], None] | None) -> None:
    """Route every :func:`fsync_dir` of ``directory`` through ``syncer`` (None: stop).

    A partition log registers one that first fsyncs the data of its rolled segments and then the
    directory, under the lock its rolls take: whoever fsyncs the directory (a checkpoint or a
    producer snapshot written atomically, a deletion), a newer segment's name never becomes
    durable before the data below it.
    """
    key = os.path.abspath(directory)
    if syncer is None:
        _dir_syncers.pop(key, None)
    else:
        _dir_syncers[key] = syncer


def fsync_dir(directory: str | os.PathLike) -> None:
    """Make the entries of ``directory`` (creations, renames, deletions) durable
    (Kafka's ``Utils.flushDir``), through its registered syncer if it has one."""
    syncer = _dir_syncers.get(os.path.abspath(directory))
    if syncer is not None:
        syncer()
    else:
        fsync_dir_now(directory)


def fsync_dir_now(directory: str | os.PathLike) -> None:
    """fsync ``directory`` itself (what a registered syncer calls)."""
    if os.name == "nt":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rename_if_exists(path: Path, target: str | os.PathLike) -> Path:
    """Atomically rename ``path`` to ``target`` if it exists (an index file may not yet); return
    the new path."""
    if path.exists():
        os.replace(path, target)
    return Path(target)


def unlink_if_exists(path: str | os.PathLike) -> bool:
    """Delete ``path``; whether it existed."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def write_atomically(path: str | os.PathLike, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old file or the new one.

    Kafka's ``CheckpointFile.write``: write ``<path>.tmp`` in the same directory, flush and fsync
    it, rename it over ``path`` (``Utils.atomicMoveWithFallback``; ``os.replace`` is atomic on
    POSIX, so there is no fallback) and fsync the directory so that the rename itself is
    durable (``Utils.flushDir``, skipped on Windows as Kafka skips it). If anything fails before
    the rename, the temporary file is removed and ``path`` is untouched.

    With ``sync=False`` the same protocol runs without its fsyncs: a reader never sees a torn
    file, but the new content is durable only once :func:`fsync_file` and :func:`fsync_dir` run
    (the log's flush after a roll does both for the producer snapshot it wrote so).

    Args:
        path: the file to replace (it need not exist).
        data: the complete new content.
        sync: fsync the file and the directory.

    Raises:
        OSError: the write, fsync, rename or directory fsync failed.
    """
    target = Path(path)
    tmp = target.with_name(target.name + TMP_SUFFIX)
    try:
        # "wb" truncates a stale .tmp left by an earlier crash, as Kafka's FileOutputStream does.
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if sync:
        fsync_dir(target.parent)


def fsync_file(path: str | os.PathLike) -> None:
    """fsync the file at ``path``; one that is gone meanwhile has nothing left to make durable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def lock_directory(directory: str | os.PathLike, in_use: str, *, name: str = LOCK_FILE) -> int:
    """Take the exclusive lock on ``directory/<name>`` (``.lock`` by default; created if missing)
    and return its descriptor; closing the descriptor releases the lock.

    The lock is an ``flock``, held per open file description: a second lock of the same file
    from the same process conflicts, so a second owner in one process locks another name.

    Raises:
        KafkalogError: another process holds the lock (``in_use`` says what it is).
    """
    return _flock(Path(directory) / name, os.O_RDWR | os.O_CREAT, shared=False, in_use=in_use)


def share_lock(directory: str | os.PathLike, in_use: str, *, name: str = LOCK_FILE) -> int:
    """Take a shared lock on the existing ``directory/<name>``, opened read-only (nothing is
    created), and return its descriptor: readers share it, an exclusive holder
    (:func:`lock_directory`) excludes them. Closing the descriptor releases it.

    Raises:
        FileNotFoundError: there is no such lock file.
        KafkalogError: another process holds the lock exclusively (``in_use`` says what it is).
    """
    return _flock(Path(directory) / name, os.O_RDONLY, shared=True, in_use=in_use)


def _flock(path: Path, flags: int, *, shared: bool, in_use: str) -> int:
    """Open ``path`` with ``flags`` and take a non-blocking ``flock`` on it (shared or exclusive)."""
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        import fcntl

        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except ImportError:  # not POSIX: no cross-process protection
        pass
    except OSError:
        os.close(fd)
        raise KafkalogError(in_use, file=str(path.parent)) from None
    return fd


def ensure_not_locked(directory: str | os.PathLike) -> None:
    """Raise if a kafkalog process (an ``flock`` on ``.lock``) or a Kafka broker (a POSIX
    record lock on the same file) holds the log directory ``directory``; a directory without
    a ``.lock`` is not in use. Nothing is created.

    Raises:
        KafkalogError: the lock is held.
    """
    lock = Path(directory) / LOCK_FILE
    if not lock.exists():
        return
    try:
        import fcntl
    except ImportError:  # not POSIX: nothing to test
        return
    fd = os.open(lock, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    try:
        for take, release in (
            (lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB), lambda: fcntl.flock(fd, fcntl.LOCK_UN)),
            (lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB), lambda: fcntl.lockf(fd, fcntl.LOCK_UN)),
        ):
            try:
                take()
            except OSError:
                raise KafkalogError(
                    "the log directory is in use (its .lock is held by a broker or a kafkalog process); stop it first",
                    file=str(lock.parent),
                ) from None
            release()
    finally:
        os.close(fd)


def pwrite_all(fd: int, data: bytes, position: int) -> None:
    """Write all of ``data`` at ``position``; a full disk raises ``OSError(ENOSPC)`` (a short
    write is retried for the rest, which then fails with the reason)."""
    written = os.pwrite(fd, data, position)
    while written < len(data):
        more = os.pwrite(fd, data[written:], position + written)
        if more <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written += more


def allocate_blocks(fd: int, end: int, path: Path) -> None:
    """Make sure bytes ``[0, end)`` of the file have blocks, so reading them through a map
    cannot fault (tmpfs allocates a page on a read fault of a hole, and a full one sends
    SIGBUS). Only a file with a hole below ``end`` is touched (for the indexes: a preallocated
    index left by a crash, whose length counts as entries, Kafka's rule).

    Raises:
        OSError: ENOSPC when the disk is full (the index cannot be opened for writing then).
    """
    try:
        first_hole = os.lseek(fd, 0, os.SEEK_HOLE)
    except (OSError, AttributeError):
        first_hole = end  # no hole reporting: the file system has no holes to fault on
    if first_hole < end:
        try:
            os.posix_fallocate(fd, first_hole, end - first_hole)
        except OSError as e:
            raise OSError(e.errno, f"cannot allocate the blocks of {path}: {e.strerror}", str(path)) from None
