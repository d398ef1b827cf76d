"""Typed errors for everything kafkalog reads or writes.

One base class, :class:`KafkalogError`, and subclasses that let a caller tell a torn tail
(:class:`TruncatedRecordError`: the bytes end inside a batch, more could arrive) from
corruption (:class:`CorruptRecordError`: CRC or size mismatch) from structurally impossible
content (:class:`InvalidRecordError`) from misuse. Every error carries the file (when there is
one) and the byte position, and its message names both together with the rule that was broken.
"""

from __future__ import annotations

__all__ = [
    "KafkalogError",
    "TruncatedRecordError",
    "CorruptRecordError",
    "InvalidRecordError",
    "CorruptIndexError",
    "InvalidOffsetError",
    "RecordTooLargeError",
    "UnsupportedCodecError",
    "InvalidConfigError",
    "LogClosedError",
    "CorruptCheckpointError",
    "InvalidProducerEpochError",
    "OutOfOrderSequenceError",
    "DuplicateSequenceError",
    "InvalidTxnStateError",
    "LogCleaningAbortedError",
    "ConversionError",
    "ReadOnlyLogError",
    "RemoteReadError",
    "SchemaError",
    "UnknownSchemaError",
    "SchemaDecodeError",
]


class KafkalogError(Exception):
    """Base of every kafkalog error.

    Attributes:
        reason: what was wrong, without the location.
        file: the file the bytes came from, or None for in-memory data.
        position: the byte position of the problem (in the file when there is one), or None.
    """

    def __init__(self, reason: str, *, file: str | None = None, position: int | None = None) -> None:
        self.reason = reason
        self.file = None if file is None else str(file)
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.file is not None:
            where.append(self.file)
        if self.position is not None:
            where.append(f"position {self.position}")
        return ": ".join(where + [self.reason]) if where else self.reason

    def relocated(self, *, file: str | None = None, shift: int = 0) -> KafkalogError:
        """A copy of this error with its position moved by ``shift`` and ``file`` filled in.

        Lower layers report positions relative to the buffer they were given; the layer that
        knows where that buffer sits in a file calls this to report the absolute position.
        """
        position = None if self.position is None else self.position + shift
        err = type(self)(self.reason, file=self.file if file is None else file, position=position)
        err.__cause__ = self.__cause__
        return err

    def __reduce__(self):  # keep the keyword arguments across pickling (Spark ships errors)
        return (_rebuild, (type(self), self.reason, self.file, self.position))


def _rebuild(cls: type[KafkalogError], reason: str, file: str | None, position: int | None) -> KafkalogError:
    return cls(reason, file=file, position=position)


class TruncatedRecordError(KafkalogError):
    """The data ends inside a batch or record: a partial tail, not corruption (more may arrive)."""


class CorruptRecordError(KafkalogError, ValueError):
    """A checksum or size does not match: the bytes were damaged."""


class InvalidRecordError(KafkalogError, ValueError):
    """Content that no writer could have produced (bad magic, impossible lengths, bad varint)."""


class CorruptIndexError(KafkalogError):
    """An index file fails its sanity check."""


class InvalidOffsetError(KafkalogError, ValueError):
    """An offset that goes backwards, overflows, or lies outside what is asked of."""


class OffsetOutOfRangeError(InvalidOffsetError):
    """A read, truncation or log start offset outside the log (Kafka's ``OffsetOutOfRangeException``)."""


class UnexpectedAppendOffsetError(InvalidOffsetError):
    """Already-offset batches that do not continue the log (Kafka's
    ``UnexpectedAppendOffsetException``).

    Attributes:
        first_offset, last_offset: the offsets of the append's first batch (its first offset,
            and its last), so that a follower can recover as Kafka's fetcher does: when the
            leader's log start offset falls inside that batch, truncate fully and start at
            ``first_offset``. None when the error was raised without them.
    """

    def __init__(
        self,
        reason: str,
        *,
        file: str | None = None,
        position: int | None = None,
        first_offset: int | None = None,
        last_offset: int | None = None,
    ) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        super().__init__(reason, file=file, position=position)


class InvalidTimestampError(InvalidRecordError):
    """A record timestamp outside the configured bounds, or LogAppendTime set by a producer
    (Kafka's ``InvalidTimestampException``)."""


class RecordTooLargeError(KafkalogError):
    """A batch, or its decompressed content, is larger than the configured limit."""


class UnsupportedCodecError(KafkalogError):
    """A compression codec that is unknown or not allowed with this magic (zstd with v0/v1)."""


class InvalidConfigError(KafkalogError, ValueError):
    """A configuration value outside its allowed range."""


class LogClosedError(KafkalogError):
    """An operation on a log, segment or file that has been closed."""


class CorruptCheckpointError(KafkalogError):
    """A checkpoint or metadata file (offsets, leader epochs, producer snapshot) is malformed."""


class InvalidProducerEpochError(KafkalogError):
    """A producer epoch older than the one the log knows for that producer id (fenced)."""


class OutOfOrderSequenceError(KafkalogError):
    """A producer sequence number that does not follow the last one the log has."""


class DuplicateSequenceError(KafkalogError):
    """A batch the log already holds (same producer, epoch and sequence range); ``first_offset``
    and ``last_offset`` give where it was appended, as Kafka's broker answers duplicates."""

    first_offset: int | None = None
    last_offset: int | None = None


class InvalidTxnStateError(KafkalogError):
    """A transactional batch or marker that does not fit the producer's transaction state."""


class LogCleaningAbortedError(KafkalogError):
    """A cleaning pass stopped before its swap: the log changed underneath it (truncation,
    retention, close) or the cleaner was asked to stop. Nothing was replaced; a later pass
    starts again (Kafka's ``LogCleaningAbortedException``)."""


class ConversionError(KafkalogError, ValueError):
    """A batch the target format cannot represent (headers or producer state to v0/v1, zstd
    below v2), or a conversion whose output would overwrite data."""


class ReadOnlyLogError(LogClosedError):
    """A change asked of a log opened read-only (``Log.open(..., read_only=True)``): appends,
    rolls, flushes, truncation, retention deletes, cleaning and checkpoint writes are refused."""


class RemoteReadError(KafkalogError, OSError):
    """Reading a file on a remote filesystem failed (network, permissions, throttling): the
    request, not the bytes, is at fault. Also an ``OSError``, as a failed local read is, so
    that checkers report it as an unreadable file rather than as corruption at that position."""


class SchemaError(KafkalogError, ValueError):
    """A key or value could not be decoded with its schema (Schema Registry's wire format,
    Avro, Protobuf, JSON Schema), or a schema could not be found or read. The message names
    the schema id and the subject when they are known, and what was wrong; the reader that
    met the record adds where it was (``file``, ``offset``).

    Attributes:
        schema_id: the registry's id of the schema involved, or None.
        subject: the subject involved, or None.
        offset: the offset of the record being decoded, or None.
    """

    def __init__(self, reason: str, *, file: str | None = None, position: int | None = None,
                 schema_id: int | None = None, subject: str | None = None, offset: int | None = None) -> None:
        self.schema_id = schema_id
        self.subject = subject
        self.offset = offset
        super().__init__(reason, file=file, position=position)

    def _render(self) -> str:
        where = [] if self.file is None else [self.file]
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        if self.position is not None:
            where.append(f"position {self.position}")
        what = []
        if self.schema_id is not None:
            what.append(f"schema id {self.schema_id}")
        if self.subject is not None:
            what.append(f"subject {self.subject!r}")
        return ": ".join(where + ([", ".join(what)] if what else []) + [self.reason])

    def at(self, *, file: str | None = None, offset: int | None = None) -> SchemaError:
        """A copy of this error located at a record: ``file`` (or partition) and ``offset``."""
        err = type(self)(self.reason, file=self.file if file is None else file, position=self.position,
                         schema_id=self.schema_id, subject=self.subject,
                         offset=self.offset if offset is None else offset)
        err.__cause__ = self.__cause__
        return err

    def relocated(self, *, file: str | None = None, shift: int = 0) -> SchemaError:
        err = self.at(file=file)
        if err.position is not None:
            err.position += shift
            err.args = (err._render(),)
        return err

    def __reduce__(self):  # keep the schema id, subject and offset across pickling (Spark)
        return (_rebuild_schema_error, (type(self), self.reason, self.file, self.position,
                                        self.schema_id, self.subject, self.offset))


def _rebuild_schema_error(cls: type[SchemaError], reason: str, file: str | None, position: int | None,
                          schema_id: int | None, subject: str | None, offset: int | None) -> SchemaError:
    return cls(reason, file=file, position=position, schema_id=schema_id, subject=subject, offset=offset)


class UnknownSchemaError(SchemaError):
    """The schema id (or subject and version) is not in the schema store: never registered,
    hard-deleted, or the store is another registry's."""


class SchemaDecodeError(SchemaError):
    """The bytes do not decode: no magic byte where Schema Registry's wire format has one, a
    payload its writer schema does not read (truncated, corrupt, another format), or a value
    its JSON Schema rejects."""
