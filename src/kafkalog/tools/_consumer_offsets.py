"""Committed offsets read back from ``__consumer_offsets``, offline and read-only.

The group coordinator's own loading rule (Kafka's ``GroupMetadataManager.loadGroupsAndOffsets``,
3.x), applied to every ``__consumer_offsets-<n>`` partition of the log directories given, in
offset order:

- an OffsetCommit record (key types 0 and 1) sets the group's offset of a topic-partition; a
  tombstone (null value) removes it;
- inside a transactional batch the commit is pending for its producer until that producer's
  COMMIT marker, when it replaces the loaded offset unless that one was appended later; an
  ABORT marker drops the producer's pending commits;
- a GroupMetadata record (key type 2) sets the group's members and assignment; its tombstone
  removes the group's metadata. It does not remove the group's offsets: Kafka deletes a group
  by writing a tombstone for each of its offsets beside the group's (``cleanupGroupMetadata``),
  and on loading, offsets of a group without metadata are kept as a group that only commits
  (``emptyGroupOffsets``);
- other record types (the KIP-848 consumer group records, types 3-8, and unknown ones) are
  skipped, as Kafka 3.x skips unknown keys.

Files are only read: segments through :class:`kafkalog.FileRecords` (never ``Log.open``, which
takes a lock and rewrites checkpoints), offset indexes with ``OffsetIndex.read_live`` (copied,
never mapped). A batch that fails its checks in the last segment of a partition ends that
partition with a warning (a torn tail: Kafka's recovery would truncate there); anywhere else it
is an error naming the file and the byte position.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import (
    PARTITION_DIR,
    ControlRecordType,
    FileRecords,
    OffsetIndex,
    RecordBatch,
    find_partition_dirs,
    offset_from_file,
    offset_index_file,
    segment_logs,
)
from ..errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkalogError,
    RecordTooLargeError,
    TruncatedRecordError,
    UnsupportedCodecError,
)
from ..protocol import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    MessageReader,
    ProtocolError,
    coordinator_record_schemas,
    read_message,
)

#: The topic the group coordinator keeps committed offsets and group metadata in.
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
_OFFSET_COMMIT_TYPES = (0, 1)
_GROUP_METADATA_TYPE = 2
#: A message's version (and a coordinator key's record type): an int16 before it.
_VERSION = struct.Struct(">h")
#: What reading a batch raises when its bytes are bad.
_BATCH_ERRORS = (CorruptRecordError, InvalidRecordError, TruncatedRecordError, UnsupportedCodecError, RecordTooLargeError)


@dataclass(frozen=True)
class CommittedOffset:
    """One group's committed offset of one topic-partition (``OffsetCommitValue``).

    ``leader_epoch`` and ``expire_timestamp`` are None where the record has none (-1, or a
    version without the field). ``record_partition`` and ``record_offset`` say which
    ``__consumer_offsets`` partition and offset the commit was read from.
    """

    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int | None
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None
    record_partition: int
    record_offset: int


@dataclass(frozen=True)
class GroupMember:
    """A classic group member as its group's last ``GroupMetadataValue`` records it; for a
    ``consumer`` group, ``assignment`` holds the (topic, partition) pairs it was assigned."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class GroupMetadata:
    """A classic group's last ``GroupMetadataValue``: protocol, generation, members."""

    group: str
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int | None
    members: tuple[GroupMember, ...]


@dataclass
class ConsumerOffsets:
    """What the ``__consumer_offsets`` partitions hold, loaded as the coordinator loads them.

    ``offsets`` by (group, topic, partition); ``groups`` the metadata of groups that have it;
    ``deleted_groups`` the groups whose metadata's last record is a tombstone; ``warnings``
    the torn tails left unread and the records skipped; ``partitions`` the
    ``__consumer_offsets`` directories read.
    """

    offsets: dict[tuple[str, str, int], CommittedOffset] = field(default_factory=dict)
    groups: dict[str, GroupMetadata] = field(default_factory=dict)
    deleted_groups: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)


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
            except _BATCH_ERRORS as e:
                if i + 1 < len(logs):
                    raise
                warnings.append(f"{e} (the rest of the segment is not read: Kafka's recovery would truncate it here)")


def _version(data: bytes, what: str) -> tuple[MessageReader, int]:
    reader = MessageReader(data)
    if reader.remaining < _VERSION.size:
        raise ProtocolError(f"Could not read version from {what}'s buffer.")
    return reader, reader.fixed(_VERSION, "version")


def _decode(message: Any, data: bytes, what: str) -> dict[str, Any]:
    reader, version = _version(data, what)
    return read_message(message, reader, version)


def _group_metadata(group: str, value: dict[str, Any]) -> GroupMetadata:
    members = []
    consumer = value["protocolType"] == "consumer"
    for m in value["members"] or ():
        assignment: tuple[tuple[str, int], ...] = ()
        if consumer and m["assignment"]:
            try:
                decoded = _decode(CONSUMER_PROTOCOL_ASSIGNMENT, bytes(m["assignment"]), "assignment")
                assignment = tuple(
                    (tp["topic"], p) for tp in decoded["assignedPartitions"] or () for p in tp["partitions"] or ()
                )
            except ProtocolError:
                assignment = ()  # Kafka's tool shows such a member without partitions too
        members.append(GroupMember(m["memberId"], m.get("groupInstanceId"), m["clientId"], m["clientHost"], assignment))
    ts = value.get("currentStateTimestamp")
    return GroupMetadata(
        group, value["protocolType"], value["generation"], value["protocol"], value["leader"],
        None if ts is None or ts < 0 else ts, tuple(members),
    )


class _Loader:
    """The coordinator's load of one ``__consumer_offsets`` partition into a ConsumerOffsets."""

    def __init__(self, result: ConsumerOffsets, partition: int) -> None:
        self.result = result
        self.partition = partition
        # producer id -> pending transactional commits (Kafka's pendingOffsets)
        self.pending: dict[int, dict[tuple[str, str, int], CommittedOffset | None]] = {}
        self.unknown = 0

    def batch(self, batch: RecordBatch) -> None:
        if batch.is_control:
            records = batch.records()
            if records:
                pending = self.pending.pop(batch.producer_id, {})
                if records[0].control_type is ControlRecordType.COMMIT:
                    for key, commit in pending.items():
                        self._commit_pending(key, commit)
            return
        txn = batch.is_transactional
        for record in batch.records():
            try:
                self.record(record.key, record.value, batch, txn, record.offset)
            except ProtocolError as e:
                raise InvalidRecordError(
                    f"record at offset {record.offset} of {CONSUMER_OFFSETS_TOPIC}-{self.partition} does not "
                    f"decode as a group coordinator record: {e}",
                    file=batch.file, position=batch.position,
                ) from None

    def _commit_pending(self, key: tuple[str, str, int], commit: CommittedOffset | None) -> None:
        offsets = self.result.offsets
        if commit is None:  # a transactional tombstone removed the pending commit
            return
        loaded = offsets.get(key)
        # Kafka: the pending commit wins unless the loaded one was appended after it.
        if loaded is None or loaded.record_partition != self.partition or loaded.record_offset < commit.record_offset:
            offsets[key] = commit

    def record(self, key: bytes | None, value: bytes | None, batch: RecordBatch, txn: bool, offset: int) -> None:
        if key is None:
            raise ProtocolError("the record has no key (a group coordinator record always has one)")
        reader, record_type = _version(key, "key")
        schemas = coordinator_record_schemas(record_type)
        if record_type in _OFFSET_COMMIT_TYPES and schemas is not None:
            k = read_message(schemas[0], reader, record_type)
            gtp = (k["group"], k["topic"], k["partition"])
            if value is None:
                if txn:
                    self.pending.setdefault(batch.producer_id, {}).pop(gtp, None)
                else:
                    self.result.offsets.pop(gtp, None)
                return
            value_reader, version = _version(value, "value")
            v = read_message(schemas[1], value_reader, version)
            # OffsetCommitValue: leaderEpoch from version 3, expireTimestamp in version 1 only
            # (absent fields read as defaults, which are not Kafka's -1).
            epoch = v["leaderEpoch"] if version >= 3 else None
            expire = v["expireTimestamp"] if version == 1 else None
            commit = CommittedOffset(
                gtp[0], gtp[1], gtp[2], v["offset"],
                None if epoch is None or epoch < 0 else epoch, v["metadata"] or "", v["commitTimestamp"],
                None if expire is None or expire < 0 else expire, self.partition, offset,
            )
            if txn:
                self.pending.setdefault(batch.producer_id, {})[gtp] = commit
            else:
                self.result.offsets[gtp] = commit
        elif record_type == _GROUP_METADATA_TYPE and schemas is not None:
            group = read_message(schemas[0], reader, record_type)["group"]
            if value is None:
                self.result.groups.pop(group, None)
                self.result.deleted_groups.add(group)
            else:
                self.result.groups[group] = _group_metadata(group, _decode(schemas[1], value, "value"))
                self.result.deleted_groups.discard(group)
        else:
            self.unknown += 1


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
        loader = _Loader(result, partition)
        for batch in _batches(directory, result.warnings):
            loader.batch(batch)
        if loader.unknown:
            result.warnings.append(
                f"{directory}: {loader.unknown} records of other types (KIP-848 consumer groups, or unknown) skipped"
            )
    return result


def committed_offsets(*log_dirs: str | os.PathLike, group: str | None = None) -> dict[tuple[str, str, int], CommittedOffset]:
    """The committed offsets in the log directories' ``__consumer_offsets``, by (group, topic,
    partition); only ``group``'s when given. Read-only; raises as :func:`read_consumer_offsets`."""
    offsets = read_consumer_offsets(*log_dirs).offsets
    return {k: v for k, v in sorted(offsets.items()) if group is None or k[0] == group}


def log_end_offset(partition_dir: str | os.PathLike) -> int:
    """The log end offset of a partition directory: after the last whole, valid batch of its
    last segment (its base offset when it holds none), read without writing anything.

    The scan starts at the last segment's last offset-index entry when that entry frames a
    batch, and stops at the first batch that fails its checks (where Kafka's recovery would
    truncate). A directory without segments has end offset 0.
    """
    logs = segment_logs(partition_dir)
    if not logs:
        return 0
    last = logs[-1]
    base = offset_from_file(last)
    end = base
    index = OffsetIndex.read_live(offset_index_file(partition_dir, base), base)
    with FileRecords.open(last) as records:
        start = 0
        if index.entries:
            position = index.entry(index.entries - 1).position
            if 0 < position < records.size_in_bytes and _frames_at(records, position, base):
                start = position
        try:
            for batch in records.slice(start).batches(validate=True):
                end = max(end, batch.next_offset)
        except _BATCH_ERRORS:
            pass  # a torn or corrupt tail: the end is after the last valid batch
    return end


def _frames_at(records: FileRecords, position: int, base: int) -> bool:
    """Whether a batch with offsets at or after ``base`` frames at ``position`` (an index entry
    is a hint until checked)."""
    try:
        batch = next(records.slice(position).batches(), None)
    except _BATCH_ERRORS:
        return False
    return batch is not None and batch.last_offset >= base


def log_end_offsets(*log_dirs: str | os.PathLike) -> dict[tuple[str, int], int]:
    """The log end offset of every partition of the log directories, by (topic, partition)
    (the largest where a partition is in several). Read-only."""
    out: dict[tuple[str, int], int] = {}
    for directory, topic, partition in _partition_dirs(log_dirs):
        end = log_end_offset(directory)
        out[(topic, partition)] = max(end, out.get((topic, partition), end))
    return out
