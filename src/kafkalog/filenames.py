"""Kafka's file and directory names, and finding them on disk.

Segment files are ``<20-digit base offset>.log|.index|.timeindex|.txnindex``, producer
snapshots ``<offset>.snapshot``, with the transient suffixes ``.cleaned``, ``.swap`` and
``.deleted`` appended to a full name. Partition directories are ``<topic>-<partition>``
(Kafka's ``parseTopicPartitionName``), and a directory being deleted, moved or left stray is
``<topic>-<partition>.<uuid>-delete|-future|-stray``. The KRaft metadata log (``__cluster_metadata-0``,
with ``quorum-state`` and snapshots ``<20-digit offset>-<10-digit epoch>.checkpoint``) is found
here too: it sits among the partitions but is no topic's. Every name rule lives here.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable
from pathlib import Path

from .errors import InvalidConfigError, KafkalogError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded decimal offset Kafka names files with."""
    if offset < 0:
        raise ValueError(f"file names carry non-negative offsets, not {offset}")
    return f"{offset:020d}"


def _file(directory: str | os.PathLike, offset: int, suffix: str, extra: str) -> Path:
    return Path(directory) / f"{filename_prefix(offset)}{suffix}{extra}"


def log_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    return _file(directory, offset, LOG_SUFFIX, suffix)


def offset_index_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    return _file(directory, offset, INDEX_SUFFIX, suffix)


def time_index_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    return _file(directory, offset, TIME_INDEX_SUFFIX, suffix)


def txn_index_file(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    return _file(directory, offset, TXN_INDEX_SUFFIX, suffix)


def snapshot_file(directory: str | os.PathLike, offset: int) -> Path:
    return _file(directory, offset, SNAPSHOT_SUFFIX, "")


#: Kafka's ``Topic.INTERNAL_TOPICS``: the topics Metadata reports as internal.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: Topics Kafka itself keeps that a reader skips unless asked for by name: the internal topics,
#: the KRaft metadata log and the share-group state (Kafka 4.0).
SYSTEM_TOPICS = INTERNAL_TOPICS | {"__cluster_metadata", "__share_group_state"}

#: KRaft's metadata log (``Topic.CLUSTER_METADATA_TOPIC_NAME``), written by the Raft layer only.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
#: The Raft quorum's state, kept in the metadata log's directory (``QuorumStateStore``).
QUORUM_STATE_FILE = "quorum-state"
#: A KRaft snapshot: ``<20-digit end offset>-<10-digit epoch>.checkpoint`` (``Snapshots.filenameFromSnapshotId``).
KRAFT_SNAPSHOT_FILE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")

#: ``<topic>-<partition>`` (Kafka's ``parseTopicPartitionName``).
PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
#: Kafka renames a partition directory ``<topic>-<partition>.<uuid>-delete|-future|-stray``.
SPECIAL_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)\.[0-9a-f]{32}-(?P<kind>delete|future|stray)$")
#: A segment's own files (no transient suffix): ``<20 digits>.<kind>``.
SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)$")


def offset_from_file(path: str | os.PathLike) -> int:
    """The offset a Kafka file name starts with (``00000000000000000042.log.swap`` -> 42).

    Raises:
        ValueError: the name does not start with an offset.
    """
    name = Path(path).name
    prefix = name.split(".", 1)[0]
    if not prefix.isdigit():
        raise ValueError(f"{name!r} is not named after an offset")
    return int(prefix)


#: Topic.MAX_NAME_LENGTH: 249, so that "-<partition>" still fits a 255-byte file name.
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+", re.ASCII)  # Kafka's Topic.LEGAL_CHARS


def validate_topic_name(name: str | None) -> str | None:
    """Kafka's ``Topic.validate``: None when ``name`` is a legal topic name, else why not (in
    Kafka's words).

    Legal names are 1 to 249 characters of ``[a-zA-Z0-9._-]`` other than ``.`` and ``..``, so
    no topic name can leave the log directory.
    """
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}"
    if not _LEGAL_TOPIC.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'"
        )
    return None


def parse_partition_dir(directory: str | os.PathLike) -> tuple[str, int]:
    """``orders-12`` -> ``("orders", 12)`` (Kafka's ``parseTopicPartitionName``).

    Raises:
        InvalidConfigError: the name is not ``<topic>-<partition>``.
    """
    name = Path(directory).name
    match = PARTITION_DIR.match(name)
    if match is None:
        raise InvalidConfigError(
            f"a partition directory is named <topic>-<partition>, not {name!r}", file=str(directory)
        )
    return match["topic"], int(match["partition"])


#: The longest file name Kafka lets a ``-delete``/``-future`` directory name take.
_MAX_DIR_NAME = 255
DELETE_DIR_SUFFIX = "-delete"


def delete_dir_name(topic: str, partition: int) -> str:
    """The name a partition directory is renamed to when its log is deleted (Kafka's
    ``UnifiedLog.logDeleteDirName``): ``<topic>-<partition>.<uuid hex>-delete``, the topic cut
    so that the whole name stays within 255 characters."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: _MAX_DIR_NAME - len(suffix)] + suffix


def partition_of(directory: str | os.PathLike) -> tuple[str, int] | None:
    """The (topic, partition) a partition directory holds, also for ``-delete``/``-future``/
    ``-stray`` directories; None for any other name."""
    name = Path(directory).name
    m = SPECIAL_DIR.match(name) or PARTITION_DIR.match(name)
    return (m["topic"], int(m["partition"])) if m else None


def segment_base_offset(path: str | os.PathLike) -> int:
    """The base offset a segment file is named after.

    Raises:
        KafkalogError: the name does not start with an offset.
    """
    try:
        return offset_from_file(path)
    except ValueError:
        raise KafkalogError(
            "a segment file is named after its base offset (<20 digits>.log); this name is not", file=str(path)
        ) from None


def segment_log_names(names: Iterable[str]) -> list[str]:
    """The ``<20 digits>.log`` names among ``names`` (a directory's files), by base offset."""
    logs = []
    for name in names:
        m = SEGMENT_FILE.match(name)
        if m and m.group(2) == "log":
            logs.append((int(m.group(1)), name))
    return [name for _, name in sorted(logs)]


def segment_logs(directory: str | os.PathLike) -> list[Path]:
    """The ``<20 digits>.log`` files of a partition directory, by base offset."""
    directory = Path(directory)
    with os.scandir(directory) as entries:
        names = [e.name for e in entries if SEGMENT_FILE.match(e.name) and e.is_file()]
    return [directory / name for name in segment_log_names(names)]


def partition_dir_names(names: Iterable[str]) -> list[str]:
    """The names of partition directories (``<topic>-<partition>``, and ``-future`` ones being
    moved) among ``names`` (a log directory's directories), sorted."""
    found = []
    for name in names:
        special = SPECIAL_DIR.match(name)
        if (special and special["kind"] == "future") or (not special and PARTITION_DIR.match(name)):
            found.append(name)
    return sorted(found)


def find_partition_dirs(log_dir: str | os.PathLike) -> list[Path]:
    """The partition directories (``<topic>-<partition>``, and ``-future`` ones being moved)
    of a log directory, by name."""
    log_dir = Path(log_dir)
    with os.scandir(log_dir) as entries:
        names = [e.name for e in entries if e.is_dir()]
    return [log_dir / name for name in partition_dir_names(names)]



def cluster_metadata_marker(directory: str | os.PathLike) -> str | None:
    """What shows ``directory`` to be a KRaft metadata log directory, or None when nothing does:
    its name (``__cluster_metadata-<n>``, also renamed ``-delete``/``-future``), a
    ``quorum-state`` file, or a KRaft snapshot (``<offset>-<epoch>.checkpoint``) in it.

    Kafka trims this log only behind its own snapshots (``KafkaRaftClient``), never by a topic's
    retention or compaction, and its records have no key: a tool that treats it as a topic
    partition loses the cluster's metadata. A directory that cannot be listed shows nothing.
    """
    found = partition_of(directory)
    if found is not None and found[0] == CLUSTER_METADATA_TOPIC:
        return f"named {Path(directory).name}"
    try:
        with os.scandir(directory) as entries:
            names = sorted(e.name for e in entries if e.is_file())
    except OSError:
        return None
    if QUORUM_STATE_FILE in names:
        return f"holds {QUORUM_STATE_FILE}"
    snapshot = next((name for name in names if KRAFT_SNAPSHOT_FILE.match(name)), None)
    return None if snapshot is None else f"holds the KRaft snapshot {snapshot}"


def cluster_metadata_dir_of(path: str | os.PathLike) -> tuple[Path, str] | None:
    """The KRaft metadata log directory ``path`` is or lies in, with what marks it
    (:func:`cluster_metadata_marker`); None when it is in none. ``path`` need not exist yet."""
    path = Path(os.path.abspath(path))
    for candidate in (path, *path.parents):
        marker = cluster_metadata_marker(candidate)
        if marker is not None:
            return candidate, marker
    return None
