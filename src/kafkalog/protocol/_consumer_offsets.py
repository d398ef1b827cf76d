"""What ``__consumer_offsets`` holds and how the group coordinator reads and writes it: the
committed offsets and classic group metadata as values, the coordinator's loading rule, the
records it appends, and the partition a group lives in.

The byte layouts are the messages of ``_records.py`` (declared once); a record's key and value
each start with their version as an int16 (``CoordinatorRecordSerde``), and the key's version
is the record type (0 and 1 offset commits, 2 group metadata).

**The loading rule** (Kafka's ``GroupMetadataManager.loadGroupsAndOffsets``), record by record
in offset order: an OffsetCommit record sets the group's offset of a topic-partition, its
tombstone removes it; inside a transactional batch the commit is pending for its producer
until that producer's COMMIT marker (then it replaces the loaded offset unless that one was
appended later) or ABORT marker (then it is dropped); a GroupMetadata record sets the group's
members and assignment, its tombstone removes the group's metadata (not its offsets: Kafka
writes a tombstone for each of those beside it); the records of consumer (KIP-848) and share
(KIP-932) groups, types 3-16, are replayed by :class:`ModernGroupsLoader` (``_modern_groups.py``)
as Kafka 4.0's coordinator replays them; other record types are skipped.

**What the coordinator writes** (Kafka 3.x with a current ``inter.broker.protocol.version``):
keys at version 1 (offsets) and 2 (group metadata); OffsetCommitValue version 3, or version 1
when the commit carried a retention time (an expire timestamp); GroupMetadataValue version 3.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidRecordError
from ._codec import MessageReader, read_message, write_message
from ._modern_groups import CONSUMER_GROUP_TYPES, SHARE_GROUP_TYPES, ModernGroup, ModernGroupsLoader
from ._records import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    coordinator_record_schemas,
)
from ._types import Message, ProtocolError

#: The topic the group coordinator keeps committed offsets and group metadata in.
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
_OFFSET_COMMIT_TYPES = (0, 1)
_GROUP_METADATA_TYPE = 2
#: A transaction marker's type that commits (Kafka's ``ControlRecordType.COMMIT``; ABORT is 0).
_COMMIT_MARKER = 1
#: The versions the coordinator writes (see the module docstring).
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_EXPIRING_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3
#: OffsetCommitValue gained leaderEpoch in version 3; only version 1 has expireTimestamp.
_LEADER_EPOCH_VERSION = 3
_EXPIRE_VERSION = 1
#: A message's version (and a coordinator key's record type): an int16 before it.
_VERSION = struct.Struct(">h")
#: Java's ``int`` arithmetic, for ``String.hashCode``.
_INT32_MASK = 0xFFFFFFFF
_INT32_SIGN = 0x80000000
_INT32_MIN = -(2**31)
_HASH_MULTIPLIER = 31
_UTF16_UNIT = 2


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
    ``consumer`` group, ``assignment`` holds the (topic, partition) pairs it was assigned.
    The timeouts and the raw subscription and assignment bytes are what a coordinator
    restores the member from."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]
    rebalance_timeout: int = -1
    session_timeout: int = -1
    subscription_bytes: bytes = b""
    assignment_bytes: bytes = b""


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

    ``offsets`` by (group, topic, partition); ``groups`` the metadata of classic groups that
    have it; ``modern_groups`` the consumer (KIP-848) and share (KIP-932) groups;
    ``deleted_groups`` the groups whose metadata's last record is a tombstone; ``warnings``
    the torn tails left unread and the records skipped; ``partitions`` the
    ``__consumer_offsets`` directories read.
    """

    offsets: dict[tuple[str, str, int], CommittedOffset] = field(default_factory=dict)
    groups: dict[str, GroupMetadata] = field(default_factory=dict)
    modern_groups: dict[str, ModernGroup] = field(default_factory=dict)
    deleted_groups: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``h = 31 * h + unit`` over the UTF-16 code units, in signed
    32-bit arithmetic. :func:`partition_for` hashes group ids with it; Scala's hash maps order
    string keys by it (what ``kafkalog dump`` reproduces of Kafka's output)."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), _UTF16_UNIT):
        h = (h * _HASH_MULTIPLIER + int.from_bytes(data[i:i + _UTF16_UNIT], "big")) & _INT32_MASK
    return h - (1 << 32) if h & _INT32_SIGN else h


def partition_for(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group``: Kafka's
    ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`` (``Utils.abs`` maps
    ``Integer.MIN_VALUE`` to 0)."""
    h = java_string_hash(group)
    return (0 if h == _INT32_MIN else abs(h)) % partitions


def _versioned(message: Message, values: dict[str, Any], version: int) -> bytes:
    return _VERSION.pack(version) + write_message(message, values, version)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """The key of a group's offset of a topic-partition (record type 1)."""
    return _versioned(OFFSET_COMMIT_KEY, {"group": group, "topic": topic, "partition": partition},
                      OFFSET_COMMIT_KEY_VERSION)


def offset_commit_value(offset: int, leader_epoch: int | None, metadata: str, commit_timestamp: int,
                        expire_timestamp: int | None = None) -> bytes:
    """An ``OffsetCommitValue``: version 3, or version 1 when it expires at a set time."""
    version = OFFSET_COMMIT_VALUE_VERSION if expire_timestamp is None else OFFSET_COMMIT_VALUE_EXPIRING_VERSION
    return _versioned(OFFSET_COMMIT_VALUE, {
        "offset": offset,
        "leaderEpoch": -1 if leader_epoch is None else leader_epoch,
        "metadata": metadata,
        "commitTimestamp": commit_timestamp,
        "expireTimestamp": -1 if expire_timestamp is None else expire_timestamp,
    }, version)


def group_metadata_key(group: str) -> bytes:
    """The key of a group's metadata (record type 2)."""
    return _versioned(GROUP_METADATA_KEY, {"group": group}, GROUP_METADATA_KEY_VERSION)


def group_metadata_value(
    protocol_type: str, generation: int, protocol: str | None, leader: str | None, current_state_timestamp: int,
    members: list[dict[str, Any]],
) -> bytes:
    """A ``GroupMetadataValue`` (version 3); ``members`` in its schema's field names."""
    return _versioned(GROUP_METADATA_VALUE, {
        "protocolType": protocol_type,
        "generation": generation,
        "protocol": protocol,
        "leader": leader,
        "currentStateTimestamp": current_state_timestamp,
        "members": members,
    }, GROUP_METADATA_VALUE_VERSION)


def _version(data: bytes, what: str) -> tuple[MessageReader, int]:
    reader = MessageReader(data)
    if reader.remaining < _VERSION.size:
        raise ProtocolError(f"Could not read version from {what}'s buffer.")
    return reader, reader.fixed(_VERSION, "version")


def _decode(message: Message, data: bytes, what: str) -> dict[str, Any]:
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
        members.append(GroupMember(
            m["memberId"], m.get("groupInstanceId"), m["clientId"], m["clientHost"], assignment,
            m.get("rebalanceTimeout", -1), m["sessionTimeout"], bytes(m["subscription"] or b""),
            bytes(m["assignment"] or b""),
        ))
    ts = value.get("currentStateTimestamp")
    return GroupMetadata(
        group, value["protocolType"], value["generation"], value["protocol"], value["leader"],
        None if ts is None or ts < 0 else ts, tuple(members),
    )


class OffsetsLoader:
    """The coordinator's load of one ``__consumer_offsets`` partition into a
    :class:`ConsumerOffsets`: feed it every batch in offset order (:meth:`load_batch`), or
    every record (:meth:`record`) and transaction marker (:meth:`marker`)."""

    def __init__(self, result: ConsumerOffsets, partition: int) -> None:
        self.result = result
        self.partition = partition
        # producer id -> pending transactional commits (Kafka's pendingOffsets)
        self.pending: dict[int, dict[tuple[str, str, int], CommittedOffset | None]] = {}
        self.modern = ModernGroupsLoader(result.modern_groups, result.deleted_groups, result.warnings)
        #: Records of types this loader does not know, skipped.
        self.unknown = 0

    def load_batch(self, batch: Any, *, log_start_offset: int = 0) -> None:
        """One batch of the partition, read in offset order: a transaction marker, or its
        records from ``log_start_offset`` on (Kafka loads from the log start offset; earlier
        records of the batch are deleted).

        ``batch`` is a :class:`kafkalog.RecordBatch` (this layer does not import the records
        layer): its ``is_control``, ``is_transactional``, ``producer_id``, ``file``,
        ``position`` and ``records()`` are read, and of each record ``offset``, ``key``,
        ``value`` and, in a control batch, ``control_type``.

        Raises:
            InvalidRecordError: a record does not decode (the batch's file and position named).
            KafkalogError: the batch's records do not decompress or frame.
        """
        records = batch.records()
        if batch.is_control:
            if records:
                self.marker(batch.producer_id, records[0].control_type == _COMMIT_MARKER)
            return
        for record in records:
            if record.offset >= log_start_offset:
                self.record(record.key, record.value, record.offset, producer_id=batch.producer_id,
                            transactional=batch.is_transactional, file=batch.file, position=batch.position)

    def marker(self, producer_id: int, commit: bool) -> None:
        """A COMMIT (``commit``) or ABORT marker of ``producer_id``'s transaction."""
        pending = self.pending.pop(producer_id, {})
        if commit:
            for key, offset in pending.items():
                self._commit_pending(key, offset)

    def _commit_pending(self, key: tuple[str, str, int], commit: CommittedOffset | None) -> None:
        offsets = self.result.offsets
        if commit is None:  # a transactional tombstone removed the pending commit
            return
        loaded = offsets.get(key)
        # Kafka: the pending commit wins unless the loaded one was appended after it.
        if loaded is None or loaded.record_partition != self.partition or loaded.record_offset < commit.record_offset:
            offsets[key] = commit

    def record(self, key: bytes | None, value: bytes | None, offset: int, *, producer_id: int = -1,
               transactional: bool = False, file: str | None = None, position: int | None = None) -> None:
        """One data record at ``offset``.

        Raises:
            InvalidRecordError: the record does not decode as a coordinator record (``file``
                and ``position`` name the batch holding it).
        """
        try:
            self._record(key, value, offset, producer_id, transactional)
        except ProtocolError as e:
            raise InvalidRecordError(
                f"record at offset {offset} of {CONSUMER_OFFSETS_TOPIC}-{self.partition} does not "
                f"decode as a group coordinator record: {e}",
                file=file, position=position,
            ) from None

    def _record(self, key: bytes | None, value: bytes | None, offset: int, producer_id: int, txn: bool) -> None:
        if key is None:
            raise ProtocolError("the record has no key (a group coordinator record always has one)")
        reader, record_type = _version(key, "key")
        schemas = coordinator_record_schemas(record_type)
        if record_type in _OFFSET_COMMIT_TYPES and schemas is not None:
            k = read_message(schemas[0], reader, record_type)
            gtp = (k["group"], k["topic"], k["partition"])
            if value is None:
                if txn:
                    self.pending.setdefault(producer_id, {}).pop(gtp, None)
                else:
                    self.result.offsets.pop(gtp, None)
                return
            value_reader, version = _version(value, "value")
            v = read_message(schemas[1], value_reader, version)
            # Absent fields read as defaults, which are not Kafka's -1.
            epoch = v["leaderEpoch"] if version >= _LEADER_EPOCH_VERSION else None
            expire = v["expireTimestamp"] if version == _EXPIRE_VERSION else None
            commit = CommittedOffset(
                gtp[0], gtp[1], gtp[2], v["offset"],
                None if epoch is None or epoch < 0 else epoch, v["metadata"] or "", v["commitTimestamp"],
                None if expire is None or expire < 0 else expire, self.partition, offset,
            )
            if txn:
                self.pending.setdefault(producer_id, {})[gtp] = commit
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
        elif (record_type in CONSUMER_GROUP_TYPES or record_type in SHARE_GROUP_TYPES) and schemas is not None:
            k = read_message(schemas[0], reader, record_type)
            self.modern.replay(record_type, k, None if value is None else _decode(schemas[1], value, "value"))
        else:
            self.unknown += 1
