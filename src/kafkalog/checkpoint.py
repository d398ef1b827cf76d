"""Kafka's plain-text checkpoint files, read and written as a broker does.

| file | where | line 1 | line 2 | each further line |
|---|---|---|---|---|
| offset checkpoints (below) | log directory | ``0`` (version) | entry count | ``topic partition offset`` |
| ``leader-epoch-checkpoint`` | partition directory | ``0`` (version) | entry count | ``epoch startOffset`` |
| ``partition.metadata`` | partition directory | ``version: 0`` | ``topic_id: <UUID>`` | none |

The offset checkpoints are ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint`` and ``cleaner-offset-checkpoint``: one offset per partition.

UTF-8 text (in practice ASCII), numbers in decimal. Kafka ends every line of a checkpoint with
``BufferedWriter.newLine()`` (``\\n`` on the platforms brokers run on) but ends
``partition.metadata`` with no newline at all (``PartitionMetadata.encode``); both are
reproduced byte for byte. A topic id is Kafka's ``Uuid.toString()``: the 16 bytes in url-safe
base64 without padding, 22 characters.

Reading follows Kafka's ``CheckpointFile.CheckpointReadBuffer`` rule for rule:

* lines end at ``\\n``, ``\\r`` or ``\\r\\n`` (``BufferedReader.readLine``);
* an empty file, or one holding only the version line, reads as no entries. Brokers create a
  checkpoint file when they open it (``CheckpointFile``'s constructor) and may never write it:
  the 0-byte ``cleaner-offset-checkpoint`` files real brokers leave behind are such files;
* any version but 0 is refused; the count must equal the number of entry lines that follow;
* an entry line is split on runs of Java whitespace (``\\s+``) and must give exactly the
  expected number of fields; trailing whitespace is ignored, leading whitespace makes an empty
  first field; numbers are Java ``Integer.parseInt`` / ``Long.parseLong`` (an optional sign,
  ASCII digits, 32- or 64-bit range).

Beyond Kafka, kafkalog refuses what no broker could have written: a topic name outside Kafka's
legal characters ``[a-zA-Z0-9._-]``, a negative partition, a negative count, and (because
``LeaderEpochFileCache`` refuses them when it loads the file) a negative leader epoch or start
offset. Kafka's offset checkpoint reader takes negative *offsets*, and so does this one: the
code that uses them (cleaner, log loading) clamps them. A repeated (topic, partition) keeps its
last offset, as Kafka's ``HashMap`` does. Every refusal is a
:class:`~kafkalog.errors.CorruptCheckpointError` naming the file, the line and its byte position.

Writing replaces the file atomically (:func:`write_atomically`, Kafka's ``CheckpointFile.write``
with ``Utils.atomicMoveWithFallback``): a crash leaves the old file or the new one, never a
mixture; a stray ``<name>.tmp`` left by a crash is never read. Unlike Kafka, opening a checkpoint
object does not create its file; a missing checkpoint reads as empty.

Each checkpoint object serialises its own reads and writes with a lock (Kafka's ``CheckpointFile``
does the same), so one object may be shared between threads.
"""

from __future__ import annotations

import base64
import os
import re
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

from .log_config import java_integer
from .durable import write_atomically
from .errors import CorruptCheckpointError
from .filenames import validate_topic_name
from .remote import is_remote
from .varint import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

_INT64 = (INT64_MIN, INT64_MAX)

# File names (Kafka's LogManager, LogCleanerManager, ReplicaManager, LeaderEpochCheckpointFile,
# PartitionMetadataFile).
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
#: The file a broker writes in each of its log directories (cluster id, node id: Kafka's
#: ``MetaProperties``); kafkalog only looks for it, to recognise a log directory.
META_PROPERTIES = "meta.properties"

_VERSION = 0  # the only version of every checkpoint format and of partition.metadata

_INT32 = (INT32_MIN, INT32_MAX)

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")  # BufferedReader.readLine
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")  # java.util.regex \s
_METADATA_SEPARATOR = re.compile(r":[ \t\n\x0b\f\r]+")  # PartitionMetadataReadBuffer ":\s+"
_BASE64_UUID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?", re.ASCII)  # 16 bytes, url-safe alphabet

_UUID_BYTES = 16
_ZERO_UUID = bytes(_UUID_BYTES)
_ONE_UUID = bytes(_UUID_BYTES - 1) + b"\x01"


def _encode_uuid(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: url-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


#: Kafka's ``Uuid.ZERO_UUID``: "no topic id"; never valid in partition.metadata.
ZERO_TOPIC_ID = _encode_uuid(_ZERO_UUID)
#: Kafka's ``Uuid.METADATA_TOPIC_ID`` (``ONE_UUID``), the id of KRaft's ``__cluster_metadata``.
METADATA_TOPIC_ID = _encode_uuid(_ONE_UUID)


# -- atomic replacement --------------------------------------------------------------------------


# -- reading helpers ---------------------------------------------------------------------------


class _Line(NamedTuple):
    number: int  # 1-based
    position: int  # byte position of the line's first byte
    text: str


def _split_lines(data: bytes, path: str) -> list[_Line]:
    """The lines of ``data`` as ``BufferedReader.readLine`` returns them, decoded as UTF-8."""
    # (end of the line's text, start of the next line) for each line.
    spans = [(m.start(), m.end()) for m in _LINE_BREAK.finditer(data)]
    if data and (not spans or spans[-1][1] < len(data)):
        spans.append((len(data), len(data)))  # a last line without a terminator
    lines = []
    start = 0
    for number, (end, after) in enumerate(spans, 1):
        try:
            text = data[start:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _corrupt(path, number, start + exc.start, "not UTF-8 text") from exc
        lines.append(_Line(number, start, text))
        start = after
    return lines


def _corrupt(path: str, number: int, position: int, reason: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(f"line {number}: {reason}", file=str(path), position=position)


def _java_split(text: str, pattern: re.Pattern[str]) -> list[str]:
    """``Pattern.split(text)``: like ``re.split`` but with trailing empty strings removed."""
    if not text:
        return [""]
    fields = pattern.split(text)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def _parse_int(path: str, line: _Line, text: str, bounds: tuple[int, int], what: str) -> int:
    """Java's ``Integer.parseInt`` / ``Long.parseLong`` of ``text`` (a field of ``line``)."""
    value = java_integer(text)
    if value is None:
        raise _corrupt(path, line.number, line.position, f"{what} {text!r} is not a decimal integer")
    low, high = bounds
    if not low <= value <= high:
        bits = 32 if bounds == _INT32 else 64
        raise _corrupt(path, line.number, line.position, f"{what} {value} does not fit in {bits} bits")
    return value


def _check_topic(topic: str) -> None:
    """Refuse a topic name Kafka could not have created (``Topic.validate``)."""
    reason = validate_topic_name(topic) if isinstance(topic, str) else "not a string"
    if reason is not None:
        raise ValueError(f"illegal topic name {topic!r}: {reason}")


def _check_int(value: int, bounds: tuple[int, int], what: str, *, minimum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    low, high = bounds
    if minimum is not None:
        low = max(low, minimum)
    if not low <= value <= high:
        raise ValueError(f"{what} {value} is outside [{low}, {high}]")


# -- the versioned list format -------------------------------------------------------------------

_T = TypeVar("_T")


class _TextFile:
    """A small text file in a partition or log directory: its path and a lock that
    serialises this object's reads and writes."""

    def __init__(self, path: str | os.PathLike) -> None:
        self._path = Path(path)
        # How errors name the file: a URL as given (pathlib would fold its "//"), a local path
        # as pathlib prints it.
        self._name = os.fspath(path) if is_remote(path) else str(self._path)
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._path

    def exists(self) -> bool:
        """Whether the file exists."""
        return self._path.exists()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self._path)!r})"


class _CheckpointFile(_TextFile, ABC, Generic[_T]):
    """Kafka's ``CheckpointFile<T>``: a version line, a count line, then one entry per line.

    Subclasses say how an entry is parsed from its whitespace-separated fields and how it is
    written. Thread-safe: reads and writes of one object are serialised.
    """

    _FIELDS: int
    _ENTRY_FORMAT: str  # for messages, e.g. "topic partition offset"

    @abstractmethod
    def _parse(self, line: _Line, fields: list[str]) -> _T:
        """One entry from the whitespace-separated fields of ``line``."""

    @abstractmethod
    def _format(self, entry: _T) -> str:
        """The line (without its newline) that writes ``entry``."""

    def _read_entries(self) -> list[_T]:
        with self._lock:
            try:
                data = self._path.read_bytes()
            except FileNotFoundError:
                return []
        return self._parse_bytes(data)

    def _parse_bytes(self, data: bytes) -> list[_T]:
        path = self._name
        lines = _split_lines(data, path)
        if not lines:  # CheckpointReadBuffer: no version line -> no entries (a 0-byte file)
            return []
        version_line = lines[0]
        version = _parse_int(path, version_line, version_line.text, _INT32, "version")
        if version != _VERSION:
            raise _corrupt(path, 1, 0, f"unrecognised version {version}, expected {_VERSION}")
        if len(lines) == 1:  # CheckpointReadBuffer: no count line -> no entries
            return []
        count_line = lines[1]
        count = _parse_int(path, count_line, count_line.text, _INT32, "entry count")
        if count < 0:
            raise _corrupt(path, 2, count_line.position, f"negative entry count {count}")
        entries = []
        for line in lines[2:]:
            fields = _java_split(line.text, _JAVA_WHITESPACE)
            if len(fields) != self._FIELDS:
                raise _corrupt(
                    path,
                    line.number,
                    line.position,
                    f"expected {self._FIELDS} fields ({self._ENTRY_FORMAT}), found {len(fields)} in {line.text!r}",
                )
            entries.append(self._parse(line, fields))
        # Kafka checks the count only after parsing every entry line, so a malformed line is
        # reported before a count mismatch.
        if len(entries) != count:
            raise _corrupt(
                path,
                2,
                count_line.position,
                f"the count line says {count} entries but {len(entries)} follow",
            )
        return entries

    def _write_entries(self, entries: Iterable[_T]) -> None:
        body = [self._format(entry) for entry in entries]
        text = f"{_VERSION}\n{len(body)}\n" + "".join(line + "\n" for line in body)
        with self._lock:
            write_atomically(self._path, text.encode("utf-8"))


class OffsetCheckpointFile(_CheckpointFile[tuple[tuple[str, int], int]]):
    """An offset per partition: ``recovery-point-offset-checkpoint``,
    ``log-start-offset-checkpoint``, ``replication-offset-checkpoint`` or
    ``cleaner-offset-checkpoint`` in a log directory (Kafka's ``OffsetCheckpointFile``).

    Layout: ``0``, the entry count, then ``topic partition offset`` per line, each line ending in
    ``\\n``. Entries keep the order of the file (and of the mapping written). Thread-safe.
    """

    _FIELDS = 3
    _ENTRY_FORMAT = "topic partition offset"

    def read(self) -> dict[tuple[str, int], int]:
        """The offsets in the file; empty if it is missing, empty, or holds only a version line.

        Returns:
            ``(topic, partition) -> offset`` in file order; a repeated partition keeps the last.

        Raises:
            CorruptCheckpointError: the content is malformed (the message names file and line).
        """
        return dict(self._read_entries())

    def parse(self, data: bytes) -> dict[tuple[str, int], int]:
        """The offsets in ``data``, this file's content read by other means (a copy on a remote
        filesystem); raises as :meth:`read` does, naming this file."""
        return dict(self._parse_bytes(data))

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Replace the file atomically with ``offsets``, in the mapping's order.

        Args:
            offsets: ``(topic, partition) -> offset``.

        Raises:
            ValueError: an illegal topic name, a partition outside ``[0, 2**31)`` or an offset
                outside 64 bits.
            OSError: writing failed; the old file is intact.
        """
        items = list(offsets.items())
        for (topic, partition), offset in items:
            _check_topic(topic)
            _check_int(partition, _INT32, "partition", minimum=0)
            _check_int(offset, _INT64, "offset")
        self._write_entries(items)

    def _parse(self, line: _Line, fields: list[str]) -> tuple[tuple[str, int], int]:
        topic, partition_text, offset_text = fields
        reason = validate_topic_name(topic)
        if reason is not None:
            raise _corrupt(self._name, line.number, line.position, f"illegal topic name {topic!r}: {reason}")
        partition = _parse_int(self._name, line, partition_text, _INT32, "partition")
        if partition < 0:
            raise _corrupt(self._name, line.number, line.position, f"negative partition {partition}")
        offset = _parse_int(self._name, line, offset_text, _INT64, "offset")
        return (topic, partition), offset

    def _format(self, entry: tuple[tuple[str, int], int]) -> str:
        (topic, partition), offset = entry
        return f"{topic} {partition} {offset}"


class EpochEntry(NamedTuple):
    """A leader epoch and the offset of the first record written in it (Kafka's ``EpochEntry``)."""

    epoch: int
    start_offset: int


class LeaderEpochCheckpointFile(_CheckpointFile[EpochEntry]):
    """A partition's ``leader-epoch-checkpoint`` (Kafka's ``LeaderEpochCheckpointFile``).

    Layout: ``0``, the entry count, then ``epoch startOffset`` per line (an int32 and an int64),
    each line ending in ``\\n``. Epochs and start offsets are never negative (Kafka's
    ``LeaderEpochFileCache`` refuses such an entry when it loads the file). The file is read and
    written as it stands; keeping the entries monotonic is the cache's job. Thread-safe.
    """

    _FIELDS = 2
    _ENTRY_FORMAT = "epoch startOffset"

    def read(self) -> list[EpochEntry]:
        """The entries in file order; empty if the file is missing, empty, or has only a version.

        Raises:
            CorruptCheckpointError: the content is malformed (the message names file and line).
        """
        return self._read_entries()

    def parse(self, data: bytes) -> list[EpochEntry]:
        """The entries in ``data``, this file's content read by other means (a copy on a remote
        filesystem); raises as :meth:`read` does, naming this file."""
        return self._parse_bytes(data)

    def write(self, entries: Iterable[EpochEntry]) -> None:
        """Replace the file atomically with ``entries``, in order.

        Raises:
            ValueError: a negative epoch or start offset, or one outside its 32/64 bits.
            OSError: writing failed; the old file is intact.
        """
        checked = []
        for epoch, start_offset in entries:
            _check_int(epoch, _INT32, "leader epoch", minimum=0)
            _check_int(start_offset, _INT64, "start offset", minimum=0)
            checked.append(EpochEntry(epoch, start_offset))
        self._write_entries(checked)

    def _parse(self, line: _Line, fields: list[str]) -> EpochEntry:
        epoch = _parse_int(self._name, line, fields[0], _INT32, "leader epoch")
        start_offset = _parse_int(self._name, line, fields[1], _INT64, "start offset")
        # LeaderEpochFileCache.assign: "Received invalid partition leader epoch entry".
        if epoch < 0 or start_offset < 0:
            raise _corrupt(
                self._name, line.number, line.position, f"negative leader epoch entry ({epoch}, {start_offset})"
            )
        return EpochEntry(epoch, start_offset)

    def _format(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"


# -- partition.metadata ----------------------------------------------------------------------------


def new_topic_id() -> str:
    """A fresh random topic id, as Kafka's ``Uuid.randomUuid().toString()``.

    A version-4 UUID as 22 url-safe base64 characters without padding; like Kafka, never the
    reserved zero or one UUID and never a string starting with ``-`` (which would read as a
    command-line option).
    """
    while True:
        raw = uuid.uuid4().bytes
        text = _encode_uuid(raw)
        if raw not in (_ZERO_UUID, _ONE_UUID) and not text.startswith("-"):
            return text


def _decode_topic_id(text: str) -> bytes | None:
    """The 16 bytes of a base64 topic id as Kafka's ``Uuid.fromString`` accepts it, or None.

    Kafka takes at most 24 characters of url-safe base64 (padding optional) decoding to exactly
    16 bytes.
    """
    if not _BASE64_UUID.fullmatch(text):
        return None
    return base64.urlsafe_b64decode(text[:22] + "==")


class PartitionMetadataFile(_TextFile):
    """A partition's ``partition.metadata``: the id of its topic (Kafka's ``PartitionMetadataFile``).

    Layout, exactly as Kafka's ``PartitionMetadata.encode`` writes it, with no final newline::

        version: 0
        topic_id: <22-character url-safe base64 UUID>

    Reading follows ``PartitionMetadataReadBuffer``: each line splits at ``:`` followed by
    whitespace into two parts; a version of 0 or more is accepted (Kafka reads newer versions
    for downgrade compatibility, ignoring what follows the topic id); the topic id must decode to
    16 bytes and not be the zero UUID. kafkalog also checks the keys (``version``,
    ``topic_id``), which Kafka does not, and refuses content after the topic id in a version 0
    file. Thread-safe.
    """

    def read(self) -> str:
        """The topic id, in Kafka's canonical form (22 characters, no padding).

        Raises:
            FileNotFoundError: there is no file (Kafka fails too; check :meth:`exists`).
            CorruptCheckpointError: the content is malformed (the message names file and line).
        """
        with self._lock:
            data = self._path.read_bytes()
        return self._parse(data)

    def parse(self, data: bytes) -> str:
        """The topic id in ``data``, this file's content read by other means (a copy on a remote
        filesystem); raises as :meth:`read` does, naming this file."""
        return self._parse(data)

    def _parse(self, data: bytes) -> str:
        path = self._name
        lines = _split_lines(data, path)
        if not lines:
            raise _corrupt(path, 1, 0, "empty file: expected 'version: 0'")
        version_text = self._value(lines[0], "version")
        version = _parse_int(path, lines[0], version_text, _INT32, "version")
        if version < _VERSION:  # Kafka: "Unrecognized version of partition metadata file"
            raise _corrupt(path, 1, 0, f"unrecognised version {version}, expected {_VERSION} or later")
        if len(lines) < 2:
            raise _corrupt(path, 2, len(data), "missing the 'topic_id: <uuid>' line")
        topic_line = lines[1]
        id_text = self._value(topic_line, "topic_id")
        raw = _decode_topic_id(id_text)
        if raw is None:
            raise _corrupt(
                path,
                2,
                topic_line.position,
                f"topic id {id_text!r} is not a 16-byte url-safe base64 UUID",
            )
        if raw == _ZERO_UUID:
            raise _corrupt(path, 2, topic_line.position, "the zero UUID is not a valid topic id")
        if version == _VERSION and len(lines) > 2:
            extra = lines[2]
            raise _corrupt(path, extra.number, extra.position, f"unexpected content after the topic id: {extra.text!r}")
        return _encode_uuid(raw)

    def _value(self, line: _Line, key: str) -> str:
        parts = _java_split(line.text, _METADATA_SEPARATOR)
        if len(parts) != 2 or parts[0] != key:
            raise _corrupt(self._name, line.number, line.position, f"expected '{key}: <value>', found {line.text!r}")
        return parts[1]

    def write(self, topic_id: str) -> None:
        """Replace the file atomically with ``topic_id`` (written in canonical form).

        Args:
            topic_id: a base64 UUID as :func:`new_topic_id` or Kafka's ``Uuid.toString`` gives.

        Raises:
            ValueError: ``topic_id`` is not a base64 UUID, or is the zero UUID.
            OSError: writing failed; the old file is intact.
        """
        raw = _decode_topic_id(topic_id) if isinstance(topic_id, str) else None
        if raw is None:
            raise ValueError(f"topic id {topic_id!r} is not a 16-byte url-safe base64 UUID")
        if raw == _ZERO_UUID:
            raise ValueError("the zero UUID is not a valid topic id")
        text = f"version: {_VERSION}\ntopic_id: {_encode_uuid(raw)}"  # no final newline, as Kafka
        with self._lock:
            write_atomically(self._path, text.encode("ascii"))
