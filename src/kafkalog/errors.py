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
