"""Finding the partition directories and segment files a read covers (on the driver).

The read's path is a log directory, a partition directory or a glob of either, on any
filesystem :class:`kafkalog.remote.Storage` opens (local, ``file://``, ``s3://``, ``gs://``, ...); it
was made absolute and normalised when the options were parsed, so executors find the same
files. Kafka's name rules (``<topic>-<partition>`` directories, ``<20 digits>.log`` segments,
the system topics a reader skips unless asked) come from :mod:`kafkalog.filenames` through the
public API. A segment is listed by its ``.log`` file: writers to object stores upload it last
(docs/spark.md), so a listed segment has its indexes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..filenames import PARTITION_DIR, SEGMENT_FILE, SYSTEM_TOPICS
from ..partition_view import segment_file, segment_files
from ..remote import Storage
from ..errors import InvalidConfigError
from ._options import _ReadOptions

#: Topics skipped unless subscribed by name or ``includeInternalTopics=true``
#: (``kafkalog.spark.INTERNAL_TOPICS``, kept under its first name).
INTERNAL_TOPICS = SYSTEM_TOPICS


@dataclass(frozen=True)
class _PartitionDir:
    """One ``<topic>-<partition>`` directory to read."""

    topic: str
    partition: int
    path: str


def _discover(options: _ReadOptions) -> list[_PartitionDir]:
    """Partition directories under ``options.path`` (a log directory, a partition directory or a
    glob of either), filtered by subscription (``subscribe``, ``subscribePattern`` or
    ``assign``); sorted by topic and partition.

    Raises:
        InvalidConfigError: the path does not exist, is not a directory, or holds no partition
            directory (whatever ``failOnDataLoss`` says: that option is about offsets).
    """
    storage = options.storage
    path = options.path
    magic = Storage.has_magic(path)
    matches = storage.glob(path) if magic else [path]
    if not matches:
        raise InvalidConfigError("no directory matches this path", file=path)
    pattern = _compile(options.subscribe_pattern) if options.subscribe_pattern else None
    found: dict[str, _PartitionDir] = {}
    any_partition = False
    for match in matches:
        try:
            subdirs = storage.list_dirs(match)
            files = storage.list_files(match)
        except (FileNotFoundError, NotADirectoryError):
            if magic:
                continue
            raise InvalidConfigError("no such directory" if not storage.exists(match) else "not a directory",
                                     file=match) from None
        if _is_partition_dir(match, subdirs, files):
            candidates = [match]
        else:
            # -delete, -future and -stray directories are not read (a -future one is a copy)
            candidates = [Storage.join(match, d) for d in subdirs if PARTITION_DIR.match(d)]
        for directory in candidates:
            parsed = PARTITION_DIR.match(Storage.basename(directory))
            if parsed is None:
                continue
            any_partition = True
            topic, partition = parsed["topic"], int(parsed["partition"])
            if options.assign is not None:
                if not options.assigned(topic, partition):  # Spark's assign: only those partitions
                    continue
            elif options.subscribe is not None:
                if topic not in options.subscribe:
                    continue
            elif pattern is not None:
                if not pattern.fullmatch(topic) or (topic in SYSTEM_TOPICS and not options.include_internal):
                    continue
            elif topic in SYSTEM_TOPICS and not options.include_internal:
                continue
            key = os.path.realpath(directory) if storage.is_local else directory
            found.setdefault(key, _PartitionDir(topic, partition, directory))
    if not any_partition:
        raise InvalidConfigError("no partition directory (<topic>-<partition>) here", file=path)
    return sorted(found.values(), key=lambda d: (d.topic, d.partition, d.path))


def _compile(pattern: str):
    import re

    try:
        return re.compile(pattern)
    except re.error as e:
        raise InvalidConfigError(f"subscribePattern {pattern!r} is not a regular expression: {e}") from None


def _is_partition_dir(path: str, subdirs: list[str], files: dict[str, int]) -> bool:
    """A directory named ``<topic>-<n>`` that holds segments (or is otherwise not a log dir)."""
    if PARTITION_DIR.match(Storage.basename(path)) is None:
        return False
    if any(_is_segment_log(n) for n in files):
        return True
    return not any(PARTITION_DIR.match(n) for n in subdirs)


def _is_segment_log(name: str) -> bool:
    m = SEGMENT_FILE.match(name)
    return m is not None and m.group(2) == "log"


def _segment_bases(storage: Storage, directory: str) -> list[int]:
    """Base offsets of the segments of ``directory``, sorted."""
    return [base for base, _, _ in segment_files(storage, directory)]


def _log_path(directory: str, base: int) -> str:
    """The segment file of ``base`` in ``directory``."""
    return segment_file(directory, base, ".log")


def _missing_assigned(options: _ReadOptions, dirs: list[_PartitionDir]) -> list[str]:
    """The ``assign``ed topic-partitions no directory holds (``topic-partition`` names)."""
    if options.assign is None:
        return []
    present = {(d.topic, d.partition) for d in dirs}
    return [f"{t}-{p}" for t, parts in options.assign for p in parts if (t, p) not in present]
