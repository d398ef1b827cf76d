"""The public reader: the records of partition directories or whole log directories, in Python,
without Spark -- the same engine the data source plans and reads with.

:func:`read_records` yields one :class:`TopicRecord` per record; :func:`read_columns` yields
:class:`PartitionColumns` (numpy columns of up to ``max_records_per_batch`` records, no Python
object per record); :func:`read_arrow` yields ``pyarrow.RecordBatch`` es in Spark's Kafka schema
(needs pyarrow). All take the bounds of Spark's Kafka source (offsets [start, end), or the
offsets of timestamps), ``isolation_level`` (read_committed drops aborted transactions and stops
at the last stable offset) and the corruption handling of docs/spark.md. Control records never
appear. Nothing is written and nothing is locked: segments and indexes are only read (the
indexes copied, never mapped), so a directory a broker is writing can be read.

Partitions come one after another, by topic and partition; within one, records ascend by offset.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import Header, RecordColumns
from ..remote import normalize_path
from ..errors import InvalidConfigError
from ._discovery import _discover
from ._options import DEFAULT_MAX_RECORDS_PER_BATCH, _ReadOptions
from ._partition import _PartitionLog
from ._plan import _plan, _resolve_bounds
from ._slice_read import _read_slice

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: An offset bound: ``"earliest"``, ``"latest"``, one offset for every partition, or
#: ``{topic: {partition: offset}}`` (partitions left out take earliest, or latest for an end).
Offsets = str | int | Mapping[str, Mapping[int, int]]
#: A timestamp bound (epoch ms): one for every partition, or ``{topic: {partition: ms}}``.
Timestamps = int | Mapping[str, Mapping[int, int]]


@dataclass(frozen=True)
class TopicRecord:
    """One record with the partition it was read from (Spark's Kafka row, in Python):
    ``timestamp_type`` 0 CreateTime, 1 LogAppendTime, -1 none (magic 0); ``headers`` empty
    when the record has none or ``include_headers=False``."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True)
class PartitionColumns:
    """Up to ``max_records_per_batch`` consecutive records of one partition as columns."""

    topic: str
    partition: int
    columns: RecordColumns


def _expand(spec: Any, dirs: list[Any], name: str) -> Any:
    """An offsets bound in the engine's form: a single offset becomes one per partition."""
    if spec is None:
        return None
    if isinstance(spec, bool):
        raise InvalidConfigError(f"{name} must be earliest, latest, an offset or {{topic: {{partition: offset}}}}")
    if isinstance(spec, int):
        if spec < 0:
            raise InvalidConfigError(f"{name} must not be negative, not {spec}")
        out: dict[str, dict[int, int]] = {}
        for d in dirs:
            out.setdefault(d.topic, {})[d.partition] = spec
        return out
    if isinstance(spec, str):
        if spec not in ("earliest", "latest"):
            raise InvalidConfigError(f"{name} must be earliest, latest, an offset or {{topic: {{partition: offset}}}}, not {spec!r}")
        return spec
    try:
        return {str(t): {int(p): int(v) for p, v in parts.items()} for t, parts in spec.items()}
    except (AttributeError, TypeError, ValueError):
        raise InvalidConfigError(f"{name} must be earliest, latest, an offset or {{topic: {{partition: offset}}}}") from None


def _timestamps(spec: Any, name: str) -> Any:
    if spec is None or (isinstance(spec, int) and not isinstance(spec, bool)):
        if spec is not None and spec < 0:
            raise InvalidConfigError(f"{name} must not be negative, not {spec}")
        return spec
    try:
        return {str(t): {int(p): int(v) for p, v in parts.items()} for t, parts in spec.items()}
    except (AttributeError, TypeError, ValueError):
        raise InvalidConfigError(f"{name} must be epoch milliseconds or {{topic: {{partition: ms}}}}") from None


def read_columns(
    path: str | os.PathLike,
    *,
    topics: list[str] | tuple[str, ...] | None = None,
    include_internal: bool = False,
    start_offsets: Offsets = "earliest",
    end_offsets: Offsets = "latest",
    start_timestamp: Timestamps | None = None,
    end_timestamp: Timestamps | None = None,
    isolation_level: str = "read_uncommitted",
    include_headers: bool = True,
    fail_on_corruption: bool = True,
    fail_on_data_loss: bool = True,
    check_crcs: bool = True,
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH,
    storage_options: Mapping[str, Any] | None = None,
) -> Iterator[PartitionColumns]:
    """The records under ``path`` as columns, partition by partition.

    Args:
        path: a log directory, a partition directory (``orders-0``) or a glob of either, local
            or on any filesystem fsspec knows (``s3://bucket/logs``, ``file:///data``, ...).
        topics: only these topics (internal ones included when named); default every topic
            but the internal ones (``__consumer_offsets``, ...) unless ``include_internal``.
        start_offsets, end_offsets: the offsets [start, end) to read; ``"earliest"`` is the
            log start offset, ``"latest"`` the log end (the last stable offset under
            read_committed).
        start_timestamp, end_timestamp: instead of the offsets, the offset of the first
            record at or after the timestamp (a partition without one reads nothing), as
            Kafka's ListOffsets finds it; they take precedence over the offsets.
        isolation_level: ``"read_uncommitted"`` or ``"read_committed"`` (aborted
            transactions dropped, as Kafka's consumer drops them).
        include_headers: decode record headers.
        fail_on_corruption: raise on a corrupt batch (file and position named); False skips
            it with a logged warning (docs/spark.md says how far).
        fail_on_data_loss: raise when a start offset is below the log start offset; False
            starts at the log start.
        check_crcs: check each batch's CRC.
        max_records_per_batch: the most records in one yielded item.
        storage_options: fsspec's options for a remote ``path`` (credentials, endpoint, ...).

    Raises:
        InvalidConfigError: a bad argument, or no directory (or no partition directory) at ``path``.
        InvalidOffsetError: see ``fail_on_data_loss``.
        KafkalogError: a corrupt batch (see ``fail_on_corruption``).
    """
    return _columns(path, _keywords(locals()))


def _keywords(given: dict[str, Any]) -> dict[str, Any]:
    """A reader function's keyword arguments, from its ``locals()`` as its first statement: every public reader
    has the same keyword parameters (a test keeps them so), forwarded whole to :func:`_columns`,
    so that a new parameter is added to the signatures and read in one place."""
    return {k: v for k, v in given.items() if k != "path"}


def _columns(path: str | os.PathLike, a: dict[str, Any]) -> Iterator[PartitionColumns]:
    """:func:`read_columns` over its keyword arguments ``a`` (checked as it iterates)."""
    isolation_level, max_records_per_batch = a["isolation_level"], a["max_records_per_batch"]
    if isolation_level not in ("read_uncommitted", "read_committed"):
        raise InvalidConfigError(f"isolation_level must be read_uncommitted or read_committed, not {isolation_level!r}")
    if max_records_per_batch < 1:
        raise InvalidConfigError(f"max_records_per_batch must be >= 1, not {max_records_per_batch}")
    options = _ReadOptions(
        path=normalize_path(path),
        storage_options=dict(a["storage_options"]) if a["storage_options"] else None,
        subscribe=tuple(a["topics"]) if a["topics"] is not None else None,
        include_internal=a["include_internal"],
        starting_ts=_timestamps(a["start_timestamp"], "start_timestamp"),
        ending_ts=_timestamps(a["end_timestamp"], "end_timestamp"),
        start_ts_strategy="latest",  # no record at or after the start time: read nothing there
        read_committed=isolation_level == "read_committed",
        include_headers=a["include_headers"],
        fail_on_corruption=a["fail_on_corruption"],
        fail_on_data_loss=a["fail_on_data_loss"],
        check_crcs=a["check_crcs"],
        max_records_per_batch=max_records_per_batch,
    )
    dirs = _discover(options)
    options = dataclasses.replace(
        options,
        starting=_expand(a["start_offsets"], dirs, "start_offsets"),
        ending=_expand(a["end_offsets"], dirs, "end_offsets"),
    )
    plogs = [_PartitionLog(d, options) for d in dirs]
    for s in _plan(plogs, _resolve_bounds(plogs, options), options):
        for columns in _read_slice(s, options):
            yield PartitionColumns(s.topic, s.partition, columns)


class _Binary:
    """A binary column (Arrow layout) as Python lists and one bytes object, for per-record
    access without numpy indexing."""

    def __init__(self, offsets: Any, data: Any, valid: Any = None) -> None:
        self.offsets = offsets.tolist()
        self.data = data.tobytes()
        self.valid = None if valid is None else valid.tolist()  # None: never null

    def __getitem__(self, i: int) -> bytes | None:
        if self.valid is not None and not self.valid[i]:
            return None
        return self.data[self.offsets[i]:self.offsets[i + 1]]


def _records_of(part: PartitionColumns) -> Iterator[TopicRecord]:
    c = part.columns
    offsets, timestamps, types = c.offset.tolist(), c.timestamp.tolist(), c.timestamp_type.tolist()
    keys = _Binary(c.key_offsets, c.key_data, c.key_valid)
    values = _Binary(c.value_offsets, c.value_data, c.value_valid)
    runs = valid_runs = None
    if c.header_offsets is not None:
        runs, valid_runs = c.header_offsets.tolist(), c.headers_valid.tolist()
        names = _Binary(c.header_key_offsets, c.header_key_data)
        header_values = _Binary(c.header_value_offsets, c.header_value_data, c.header_value_valid)
    topic, partition = part.topic, part.partition
    for i in range(len(offsets)):
        hs: tuple[Header, ...] = ()
        if runs is not None and valid_runs is not None and valid_runs[i]:
            hs = tuple(
                Header((names[h] or b"").decode("utf-8"), header_values[h]) for h in range(runs[i], runs[i + 1])
            )
        yield TopicRecord(topic, partition, offsets[i], timestamps[i], types[i], keys[i], values[i], hs)


def read_records(
    path: str | os.PathLike,
    *,
    topics: list[str] | tuple[str, ...] | None = None,
    include_internal: bool = False,
    start_offsets: Offsets = "earliest",
    end_offsets: Offsets = "latest",
    start_timestamp: Timestamps | None = None,
    end_timestamp: Timestamps | None = None,
    isolation_level: str = "read_uncommitted",
    include_headers: bool = True,
    fail_on_corruption: bool = True,
    fail_on_data_loss: bool = True,
    check_crcs: bool = True,
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH,
    storage_options: Mapping[str, Any] | None = None,
) -> Iterator[TopicRecord]:
    """The records under ``path``, one :class:`TopicRecord` each; the arguments and errors are
    :func:`read_columns`'s (``max_records_per_batch`` bounds how many are decoded at a time)."""
    for part in _columns(path, _keywords(locals())):
        yield from _records_of(part)


def read_arrow(
    path: str | os.PathLike,
    *,
    topics: list[str] | tuple[str, ...] | None = None,
    include_internal: bool = False,
    start_offsets: Offsets = "earliest",
    end_offsets: Offsets = "latest",
    start_timestamp: Timestamps | None = None,
    end_timestamp: Timestamps | None = None,
    isolation_level: str = "read_uncommitted",
    include_headers: bool = False,
    fail_on_corruption: bool = True,
    fail_on_data_loss: bool = True,
    check_crcs: bool = True,
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH,
    storage_options: Mapping[str, Any] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The records under ``path`` as ``pyarrow.RecordBatch`` es in Spark's Kafka schema
    (``key, value, topic, partition, offset, timestamp, timestampType`` and, with
    ``include_headers``, ``headers``); the arguments are :func:`read_columns`'s, but
    ``include_headers`` is False unless asked, as in Spark's Kafka source.

    Raises:
        ImportError: pyarrow is not installed.
        The errors of :func:`read_columns`.
    """
    args = _keywords(locals())  # first: the parameters only
    import pyarrow as pa

    names = {"timestamp_type": "timestampType"}
    for part in _columns(path, args):
        c = part.columns
        batch = c.to_arrow(names=names)
        n = len(c)
        batch = batch.add_column(2, "topic", pa.repeat(pa.scalar(part.topic, pa.string()), n))
        batch = batch.add_column(3, "partition", pa.repeat(pa.scalar(part.partition, pa.int32()), n))
        yield batch
