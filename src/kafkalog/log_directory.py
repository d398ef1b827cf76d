"""The log directory: Kafka's ``LogManager`` files shared by every partition in one directory.

Files of the *log directory* (the partition directories' parent), as a broker keeps them:
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint`` (the high watermarks) and ``cleaner-offset-checkpoint``
(one line per partition), the clean-shutdown marker
``.kafka_cleanshutdown`` and the ``.lock`` file a process holds while it has logs open there
(so two processes never write one log directory).

**The clean-shutdown marker.** It means "every log of this directory was closed cleanly", so
recovery can be skipped. The first log opened in a directory removes it (durably) before
anything is written; the last log closed writes it back only if the directory was clean when
the process started or every partition in it was opened (and so recovered) by this process.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from .checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from .durable import LOCK_FILE, TMP_SUFFIX, fsync_dir, lock_directory, share_lock
from .errors import CorruptCheckpointError, KafkalogError
from .filenames import PARTITION_DIR

_log = logging.getLogger(__name__)

#: The log directory's clean-shutdown marker (Kafka's ``CleanShutdownFileHandler``).
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: What the marker holds (Kafka 3.7+ writes the broker epoch; -1: none).
CLEAN_SHUTDOWN_CONTENT = b'{"version":0,"brokerEpoch":-1}'


def remove_stray_tmp(path: Path) -> None:
    """Delete ``<checkpoint>.tmp`` left by a kill during an atomic write (never read; Kafka
    overwrites it at its next write, kafkalog removes it at once)."""
    path.with_name(path.name + TMP_SUFFIX).unlink(missing_ok=True)


class LogDir:
    """Process-wide state of one log directory, shared by the logs open in it."""

    _registry: dict[str, LogDir] = {}
    _registry_lock = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.recovery_points = OffsetCheckpointFile(path / RECOVERY_POINT_OFFSET_CHECKPOINT)
        self.log_starts = OffsetCheckpointFile(path / LOG_START_OFFSET_CHECKPOINT)
        self.cleaner_offsets = OffsetCheckpointFile(path / CLEANER_OFFSET_CHECKPOINT)
        # The high watermarks (Kafka's ReplicaManager writes it for every partition of the
        # directory in one file; here each log writes its own line, keeping the others).
        self.high_watermarks = OffsetCheckpointFile(path / REPLICATION_OFFSET_CHECKPOINT)
        self.open_logs: set[tuple[str, int]] = set()
        self.recovered: set[str] = set()  # partition directory names opened by this process
        self._lock_fd: int | None = None
        self.read_only = False  # see open_read_only
        self.changes: list[str] = []  # what a writable open would have changed (read-only)
        self.unclean = False
        marker = path / CLEAN_SHUTDOWN_FILE
        self.clean_at_start = marker.exists()

    @classmethod
    def acquire(cls, path: Path, tp: tuple[str, int]) -> LogDir:
        """The state of log directory ``path`` with partition ``tp`` registered open; the first
        acquirer takes the ``.lock`` file and removes stray checkpoint ``.tmp`` files.

        Raises:
            KafkalogError: another process holds the directory, or ``tp`` is already open.
        """
        key = os.path.realpath(path)
        with cls._registry_lock:
            state = cls._registry.get(key)
            if state is None:
                state = cls(Path(key))
                state._take_lock_file()
                for file in state.checkpoints:
                    remove_stray_tmp(file.path)  # a kill inside write_atomically
                cls._registry[key] = state
            if tp in state.open_logs:
                raise KafkalogError(f"partition {tp[0]}-{tp[1]} is already open in this process", file=key)
            state.open_logs.add(tp)
            return state

    @classmethod
    def open_read_only(cls, path: Path) -> LogDir:
        """The state of log directory ``path`` for one read-only open: not shared, creating,
        deleting and writing nothing. If ``.lock`` exists it is opened read-only and share-locked
        (``flock(LOCK_SH)``), so the open fails while a kafkalog writer in another process holds
        the directory and a writer cannot start meanwhile; a writer in this process is not
        waited for (its logs read as a second process's would). No ``.lock``: no lock.

        Raises:
            KafkalogError: another process holds the directory for writing.
        """
        key = os.path.realpath(path)
        state = cls(Path(key))
        state.read_only = True
        lock = state.path / LOCK_FILE
        with cls._registry_lock:
            in_process = key in cls._registry
        if not in_process and lock.exists():
            state._lock_fd = share_lock(
                state.path, "the log directory is in use by another process (its .lock file is held for writing)"
            )
        for file in state.checkpoints:
            tmp = file.path.with_name(file.path.name + TMP_SUFFIX)
            if tmp.exists():
                state.changes.append(f"would delete {tmp}")
        return state

    @property
    def checkpoints(self) -> tuple[OffsetCheckpointFile, ...]:
        """The directory's per-partition checkpoint files."""
        return (self.recovery_points, self.log_starts, self.cleaner_offsets, self.high_watermarks)

    def _take_lock_file(self) -> None:
        self._lock_fd = lock_directory(
            self.path, "the log directory is in use by another process (its .lock file is held)"
        )

    def consume_clean_marker(self) -> bool:
        """Whether this directory was shut down cleanly; the marker goes (durably) the first
        time, so that a crash from now on is never mistaken for a clean shutdown."""
        marker = self.path / CLEAN_SHUTDOWN_FILE
        if self.read_only:
            if marker.exists():
                self.changes.append(f"would delete the clean-shutdown marker {marker}")
            return self.clean_at_start
        with self.lock:
            if marker.exists():
                marker.unlink()
                fsync_dir(self.path)
        return self.clean_at_start

    def read_offsets(self, tp: tuple[str, int]) -> tuple[int | None, int | None]:
        """(recovery point, log start offset) checkpointed for ``tp``; a corrupt file reads as
        empty (Kafka resets to 0 and recovers)."""
        return self.read_offset(self.recovery_points, tp), self.read_offset(self.log_starts, tp)

    def read_offset(self, file: OffsetCheckpointFile, tp: tuple[str, int]) -> int | None:
        """``tp``'s entry in ``file`` (None when absent, or when the file is corrupt)."""
        try:
            return file.read().get(tp)
        except CorruptCheckpointError as e:
            _log.warning("ignoring corrupt checkpoint %s: %s", file.path, e)
            return None

    def forget(self, tp: tuple[str, int]) -> None:
        """Remove ``tp`` from every checkpoint (its log was deleted)."""
        for file in self.checkpoints:
            self.write_offset(file, tp, None)

    def write_offset(self, file: OffsetCheckpointFile, tp: tuple[str, int], offset: int | None) -> None:
        """Set (or with None remove) one partition's entry, keeping the others."""
        with self.lock:
            try:
                entries = file.read()
            except CorruptCheckpointError as e:
                _log.warning("rewriting corrupt checkpoint %s: %s", file.path, e)
                entries = {}
            if offset is None:
                if tp not in entries:
                    return
                entries.pop(tp)
            elif entries.get(tp) == offset:
                return
            else:
                entries[tp] = offset
            if self.read_only:
                self.changes.append(f"would rewrite {file.path}: {tp[0]}-{tp[1]} {'removed' if offset is None else offset}")
                return
            file.write(entries)

    def release(self, tp: tuple[str, int], directory_name: str, clean: bool) -> None:
        """``tp`` (in partition directory ``directory_name``) is closed, ``clean``ly or not; the
        last release writes the clean-shutdown marker when it may and frees the ``.lock``."""
        if self.read_only:
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # releases the shared flock
                self._lock_fd = None
            return
        with self._registry_lock:
            self.open_logs.discard(tp)
            if clean:
                self.recovered.add(directory_name)
            else:
                self.recovered.discard(directory_name)
                self.unclean = True  # a log that failed to close: no marker for the directory
            if self.open_logs:
                return
            key = str(self.path)
            if self._registry.get(key) is self:
                del self._registry[key]
            try:
                if clean and not self.unclean and self._all_partitions_clean():
                    marker = self.path / CLEAN_SHUTDOWN_FILE
                    # Kafka's CleanShutdownFileHandler writes in place and fsyncs (no rename):
                    # only its existence counts, and it is written after everything else.
                    with open(marker, "wb") as f:
                        f.write(CLEAN_SHUTDOWN_CONTENT)
                        f.flush()
                        os.fsync(f.fileno())
                    fsync_dir(self.path)
            finally:
                if self._lock_fd is not None:
                    os.close(self._lock_fd)  # releases the flock
                    self._lock_fd = None

    def _all_partitions_clean(self) -> bool:
        if self.clean_at_start:
            return True
        for entry in os.scandir(self.path):
            if entry.is_dir() and PARTITION_DIR.match(entry.name) and entry.name not in self.recovered:
                return False
        return True
