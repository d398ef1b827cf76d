"""Committed offsets read back from ``__consumer_offsets``, offline and read-only.

The group coordinator's own loading rule (Kafka's ``GroupMetadataManager.loadGroupsAndOffsets``,
:class:`kafkalog.protocol.OffsetsLoader`, which the broker's coordinator loads with too) is
applied to every ``__consumer_offsets-<n>`` partition of the log directories given, in offset
order. Offsets of a group whose metadata was deleted are kept as a group that only commits
(Kafka's ``emptyGroupOffsets``); the consumer (KIP-848) and share (KIP-932) groups' records
(types 3-16) are replayed as Kafka 4.0's coordinator replays them; record types Kafka 4.0 does
not declare are skipped, as Kafka skips unknown keys.

Files are only read: segments through :class:`kafkalog.FileRecords` (never ``Log.open``, which
takes a lock and rewrites checkpoints), log end offsets through the core's read-only
:class:`~kafkalog.partition_view.PartitionView`. A batch that fails its checks in the last segment of a partition ends that
partition with a warning (a torn tail: Kafka's recovery would truncate there); anywhere else it
is an error naming the file and the byte position.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

from .. import FileRecords, RecordBatch
from ..checkpoint import PARTITION_METADATA, PartitionMetadataFile
from ..filenames import PARTITION_DIR, find_partition_dirs, segment_logs
from ..partition_view import OnCorruption, PartitionView
from ..resync import BAD_BATCH_ERRORS
from ..errors import InvalidRecordError, KafkalogError
from ..protocol import (
    CONSUMER_OFFSETS_TOPIC,
    CommittedOffset,
    ConsumerOffsets,
    MessageReader,
    OffsetsLoader,
    ProtocolError,
    ShareStateLoader,
    read_message,
    share_coordinator_record_schemas,
)

#: The share coordinator's topic (KIP-932).
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
#: A coordinator record's key and value start with their version (an int16).
_VERSION = struct.Struct(">h")


def _partition_dirs(log_dirs: tuple[str | os.PathLike, ...]) -> list[tuple[Path, str, int]]:
    """(directory, topic, partition) of each partition the log directories hold (a partition
    directory given itself stands for itself); ``-delete``, ``-future`` and ``-stray`` copies
    are not read."""
    out = []
    for log_dir in log_dirs:
        path = Path(log_dir)
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", os.fspath(log_dir))
        if not path.is_dir():
            raise KafkalogError("not a directory: give a log directory", file=os.fspath(log_dir))
        own = PARTITION_DIR.match(path.name)
        candidates = [path] if own and segment_logs(path) else find_partition_dirs(path)
        for directory in candidates:
            m = PARTITION_DIR.match(directory.name)
            if m is not None and directory.is_dir():
                out.append((directory, m["topic"], int(m["partition"])))
    return out


def _batches(directory: Path, warnings: list[str]) -> Iterator[RecordBatch]:
    """Every batch of a partition directory, checked (CRC, framing), in offset order; a bad
    batch in the last segment ends the read with a warning, elsewhere it raises."""
    logs = segment_logs(directory)
    for i, log in enumerate(logs):
        with FileRecords.open(log) as records:
            try:
                yield from records.batches(validate=True, strict=True)
            except BAD_BATCH_ERRORS as e:
                if i + 1 < len(logs):
                    raise
                warnings.append(f"{e} (the rest of the segment is not read: Kafka's recovery would truncate it here)")


def read_consumer_offsets(*log_dirs: str | os.PathLike) -> ConsumerOffsets:
    """Load the ``__consumer_offsets`` partitions of the log directories (read-only).

    Args:
        log_dirs: log directories (a ``__consumer_offsets-<n>`` directory reads only itself).

    Returns:
        The committed offsets and classic group metadata, as the coordinator would load them.

    Raises:
        KafkalogError: no ``__consumer_offsets`` partition is there, a batch before the last
            segment is corrupt, or a record does not decode (file and position named).
        OSError: a directory cannot be read.
    """
    result = ConsumerOffsets()
    dirs = [(d, p) for d, topic, p in _partition_dirs(log_dirs) if topic == CONSUMER_OFFSETS_TOPIC]
    if not dirs:
        where = ", ".join(os.fspath(d) for d in log_dirs)
        raise KafkalogError(f"no {CONSUMER_OFFSETS_TOPIC}-<n> partition directory here", file=where)
    for directory, partition in sorted(dirs, key=lambda d: d[1]):
        result.partitions.append(os.fspath(directory))
        loader = OffsetsLoader(result, partition)
        for batch in _batches(directory, result.warnings):
            loader.load_batch(batch)
        if loader.unknown:
            result.warnings.append(
                f"{directory}: {loader.unknown} records of unknown types skipped"
            )
    return result


def committed_offsets(*log_dirs: str | os.PathLike, group: str | None = None) -> dict[tuple[str, str, int], CommittedOffset]:
    """The committed offsets in the log directories' ``__consumer_offsets``, by (group, topic,
    partition); only ``group``'s when given. Read-only; raises as :func:`read_consumer_offsets`."""
    offsets = read_consumer_offsets(*log_dirs).offsets
    return {k: v for k, v in sorted(offsets.items()) if group is None or k[0] == group}


def log_end_offset(partition_dir: str | os.PathLike) -> int:
    """The log end offset of a partition directory: after the last whole, valid batch of its
    last segment (its base offset when it holds none), read without writing anything
    (:class:`kafkalog.partition_view.PartitionView`, where Kafka's recovery would truncate).
    A directory without segments has end offset 0.

    Raises:
        OSError: no such directory (``FileNotFoundError``), or not a directory.
    """
    if not os.path.isdir(partition_dir):
        missing = not os.path.exists(partition_dir)
        raise (FileNotFoundError if missing else NotADirectoryError)(
            2 if missing else 20, "No such file or directory" if missing else "Not a directory", os.fspath(partition_dir))
    return PartitionView(partition_dir, on_corruption=OnCorruption.TRUNCATE).log_end_offset


def log_end_offsets(*log_dirs: str | os.PathLike) -> dict[tuple[str, int], int]:
    """The log end offset of every partition of the log directories, by (topic, partition)
    (the largest where a partition is in several). Read-only."""
    out: dict[tuple[str, int], int] = {}
    for directory, topic, partition in _partition_dirs(log_dirs):
        end = log_end_offset(directory)
        out[(topic, partition)] = max(end, out.get((topic, partition), end))
    return out


def topic_names(*log_dirs: str | os.PathLike) -> dict[str, str]:
    """The name of each topic id the log directories know, from their partitions'
    ``partition.metadata`` (the consumer and share groups' records name topics by id).
    Read-only; a missing or malformed ``partition.metadata`` names nothing."""
    out: dict[str, str] = {}
    for directory, topic, _ in _partition_dirs(log_dirs):
        path = directory / PARTITION_METADATA
        if not path.is_file():
            continue
        try:
            out[PartitionMetadataFile(path).read()] = topic
        except (KafkalogError, OSError):
            continue  # a topic kafkalog cannot name by this file is shown by its id
    return out


def _share_state_record(loader: ShareStateLoader, key: bytes | None, value: bytes | None) -> None:
    """One ``__share_group_state`` record into ``loader``; record types Kafka 4.0 does not
    declare are skipped, as its coordinator skips them."""
    if key is None or len(key) < _VERSION.size:
        raise ProtocolError("the record has no key or version (a share coordinator record always has one)")
    (record_type,) = _VERSION.unpack_from(key)
    schemas = share_coordinator_record_schemas(record_type)
    if schemas is None:
        return
    k = read_message(schemas[0], MessageReader(key, _VERSION.size), record_type)
    v = None
    if value is not None:
        if len(value) < _VERSION.size:
            raise ProtocolError("Could not read version from value's buffer.")
        (version,) = _VERSION.unpack_from(value)
        v = read_message(schemas[1], MessageReader(value, _VERSION.size), version)
    loader.replay(record_type, k, v)


def read_share_group_state(*log_dirs: str | os.PathLike, warnings: list[str] | None = None) -> dict[tuple[str, str, int], int]:
    """The start offset of every share-partition in the log directories' ``__share_group_state``
    partitions, by (group, topic id, partition), as the share coordinator loads them (empty when
    there are none). Read-only.

    Raises:
        KafkalogError: a batch before the last segment is corrupt, or a record does not decode
            (file and position named).
    """
    start_offsets: dict[tuple[str, str, int], int] = {}
    loader = ShareStateLoader(start_offsets)
    warnings = [] if warnings is None else warnings
    dirs = sorted((p, d) for d, topic, p in _partition_dirs(log_dirs) if topic == SHARE_GROUP_STATE_TOPIC)
    for _, directory in dirs:
        for batch in _batches(directory, warnings):
            if batch.is_control:
                continue
            for record in batch.records():
                try:
                    _share_state_record(loader, record.key, record.value)
                except ProtocolError as e:
                    raise InvalidRecordError(
                        f"record at offset {record.offset} of {directory.name} does not decode as a share "
                        f"coordinator record: {e}", file=batch.file, position=batch.position,
                    ) from None
    return start_offsets
