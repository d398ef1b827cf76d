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
    when the record has none or ``include_headers=False``; ``key`` and ``value`` are bytes, or
    decoded objects with ``key_format``/``value_format`` (None, with the reason in
    ``key_error``/``value_error``, when they do not decode)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[Header, ...] = ()
    #: Why the key or value did not decode (``key_format``/``value_format``), else None.
    key_error: str | None = None
    value_error: str | None = None


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
    has the same keyword parameters (a test keeps them so; ``read_records`` and ``read_arrow``
    add the decoding ones, :data:`FORMAT_PARAMETERS`), forwarded whole to :func:`_columns`,
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


#: The decoding parameters of :func:`read_records` and :func:`read_arrow` (after
#: :func:`read_columns`' own, whose numpy columns stay binary).
FORMAT_PARAMETERS = ("key_format", "value_format", "schema_registry", "key_subject", "value_subject",
                     "key_schema_version", "value_schema_version")
_FORMAT_ARGS = """
    Decoding (docs/reader.md): ``key_format``/``value_format`` (``binary``, ``string``,
    ``json``, ``avro``, ``protobuf``, ``registry``) decode keys and values with
    :mod:`kafkalog.schema_registry`; ``schema_registry`` is where the schemas are (a ``_schemas``
    directory, a log directory holding ``_schemas-0``, or a registry URL; default: the
    ``_schemas-0`` of the log directory read); ``key_subject``/``value_subject`` and
    ``key_schema_version``/``value_schema_version`` choose the reader schema (default: the latest
    version of ``<topic>-key``/``<topic>-value`` when that subject exists)."""


def _format_options(args: dict[str, Any]) -> Any:
    """The decoding arguments taken out of ``args`` (a reader's keywords), checked; None when
    keys and values stay binary."""
    from ._formats import format_options

    given = {name: args.pop(name) for name in FORMAT_PARAMETERS}
    if given["schema_registry"] is not None:
        given["schema_registry"] = os.fspath(given["schema_registry"])
    storage_options = args["storage_options"]
    formats = format_options(**given, storage_options=dict(storage_options) if storage_options else None)
    return formats if formats.active else None


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
    key_format: str = "binary",
    value_format: str = "binary",
    schema_registry: str | os.PathLike | None = None,
    key_subject: str | None = None,
    value_subject: str | None = None,
    key_schema_version: int | str | None = None,
    value_schema_version: int | str | None = None,
) -> Iterator[TopicRecord]:
    """The records under ``path``, one :class:`TopicRecord` each; the arguments and errors are
    :func:`read_columns`'s (``max_records_per_batch`` bounds how many are decoded at a time).
    """
    args = _keywords(locals())  # first: the parameters only
    formats = _format_options(args)
    if formats is None:
        for part in _columns(path, args):
            yield from _records_of(part)
        return
    from ._formats import decode_value, decoder

    where = normalize_path(path)
    for part in _columns(path, args):
        decoders = [decoder(formats, side, part.topic, where) for side in ("key", "value")]
        for r in _records_of(part):
            key, key_error = (r.key, None) if decoders[0] is None else decode_value(decoders[0], r.key)
            value, value_error = (r.value, None) if decoders[1] is None else decode_value(decoders[1], r.value)
            yield dataclasses.replace(r, key=key, value=value, key_error=key_error, value_error=value_error)


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
    key_format: str = "binary",
    value_format: str = "binary",
    schema_registry: str | os.PathLike | None = None,
    key_subject: str | None = None,
    value_subject: str | None = None,
    key_schema_version: int | str | None = None,
    value_schema_version: int | str | None = None,
) -> Iterator[pa.RecordBatch]:
    """The records under ``path`` as ``pyarrow.RecordBatch`` es in Spark's Kafka schema
    (``key, value, topic, partition, offset, timestamp, timestampType`` and, with
    ``include_headers``, ``headers``); the arguments are :func:`read_columns`'s, but
    ``include_headers`` is False unless asked, as in Spark's Kafka source. With
    ``key_format``/``value_format``, ``key``/``value`` are decoded columns (structs for Avro,
    Protobuf and JSON Schema) and ``keyError``/``valueError`` are appended.

    Raises:
        ImportError: pyarrow is not installed.
        The errors of :func:`read_columns`.
    """
    args = _keywords(locals())  # first: the parameters only
    import pyarrow as pa

    formats = _format_options(args)
    decodings: dict[str, Any] = {}
    names = {"timestamp_type": "timestampType"}
    for part in _columns(path, args):
        c = part.columns
        batch = c.to_arrow(names=names)
        n = len(c)
        batch = batch.add_column(2, "topic", pa.repeat(pa.scalar(part.topic, pa.string()), n))
        batch = batch.add_column(3, "partition", pa.repeat(pa.scalar(part.partition, pa.int32()), n))
        if formats is not None:
            decoding = decodings.get(part.topic)
            if decoding is None:
                from ._schema_arrow import Decoding

                decoding = decodings[part.topic] = Decoding(formats, normalize_path(path), part.topic)
            batch = decoding.apply(batch, part.topic)
        yield batch


read_records.__doc__ = (read_records.__doc__ or "") + _FORMAT_ARGS
read_arrow.__doc__ = (read_arrow.__doc__ or "") + _FORMAT_ARGS
