"""Finding the partition directories and segment files a read covers (on the driver).

The read's path is a log directory, a partition directory or a glob of either; Kafka's name
rules (``<topic>-<partition>`` directories, ``<20 digits>.log`` segments, the system topics a
reader skips unless asked) come from :mod:`kafkalog.filenames` through the public API.
"""

from __future__ import annotations

import glob as _glob
import os
import re
from dataclasses import dataclass

from .. import (
    PARTITION_DIR,
    SEGMENT_FILE,
    SYSTEM_TOPICS,
    find_partition_dirs,
    log_file,
    offset_from_file,
    segment_logs,
)
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
    ``assign``); sorted by topic and partition."""
    matches = sorted(_glob.glob(options.path)) if _glob.has_magic(options.path) else [options.path]
    if not matches:
        raise InvalidConfigError(f"no directory matches {options.path!r}")
    pattern = re.compile(options.subscribe_pattern) if options.subscribe_pattern else None
    found: dict[str, _PartitionDir] = {}
    for match in matches:
        if not os.path.isdir(match):
            if not _glob.has_magic(options.path):
                raise InvalidConfigError("no such directory" if not os.path.exists(match) else "not a directory", file=match)
            continue
        candidates = [match] if _is_partition_dir(match) else [
            # -delete, -future and -stray directories are not read (a -future one is a copy)
            os.path.join(match, d.name) for d in find_partition_dirs(match) if PARTITION_DIR.match(d.name)
        ]
        for directory in candidates:
            parsed = PARTITION_DIR.match(os.path.basename(directory))
            if parsed is None or not os.path.isdir(directory):
                continue
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
            real = os.path.realpath(directory)
            found.setdefault(real, _PartitionDir(topic, partition, directory))
    return sorted(found.values(), key=lambda d: (d.topic, d.partition, d.path))


def _is_partition_dir(path: str) -> bool:
    """A directory named ``<topic>-<n>`` that holds segments (or is otherwise not a log dir)."""
    if PARTITION_DIR.match(os.path.basename(os.path.normpath(path))) is None:
        return False
    try:
        names = os.listdir(path)
    except OSError:
        return False
    if any(_is_segment_log(n) for n in names):
        return True
    return not any(PARTITION_DIR.match(n) and os.path.isdir(os.path.join(path, n)) for n in names)


def _is_segment_log(name: str) -> bool:
    m = SEGMENT_FILE.match(name)
    return m is not None and m.group(2) == "log"


def _segment_bases(directory: str) -> list[int]:
    """Base offsets of the segments (``<20 digits>.log``; transient suffixes excluded), sorted;
    none for a directory deleted meanwhile."""
    try:
        logs = segment_logs(directory)
    except FileNotFoundError:
        return []
    return [offset_from_file(p) for p in logs]


def _log_path(directory: str, base: int) -> str:
    """The segment file of ``base`` in ``directory`` (the directory spelled as given)."""
    return os.path.join(directory, log_file(directory, base).name)


def _missing_assigned(options: _ReadOptions, dirs: list[_PartitionDir]) -> list[str]:
    """The ``assign``ed topic-partitions no directory holds (``topic-partition`` names)."""
    if options.assign is None:
        return []
    present = {(d.topic, d.partition) for d in dirs}
    return [f"{t}-{p}" for t, parts in options.assign for p in parts if (t, p) not in present]
