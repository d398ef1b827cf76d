"""The read options of the ``kafkalog`` data source: parsed and checked once, on the driver.

Spark's Kafka source names where one exists (``subscribe``, ``assign``, ``startingOffsets``,
``isolationLevel``, ``minPartitions``, ...; docs/spark.md has the table), with the checks of
Spark's ``KafkaSourceProvider`` (``validateGeneralOptions``, ``validateBatchOptions``,
``validateStreamOptions``): at most one of subscribe / subscribePattern / assign, no ending
bounds on a stream, no ``latest`` start or ``earliest`` end in a batch query. Offsets come as
``earliest``, ``latest`` or Spark's JSON ``{"topic": {"0": offset}}`` with -2 for earliest and
-1 for latest; timestamps as one value for every partition or the same JSON shape.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from dataclasses import dataclass
from typing import Any, overload

from ..log_config import parse_config_bool, parse_config_int
from ..remote import Storage, normalize_path
from ..errors import InvalidConfigError
from ..varint import INT64_MAX as _LONG_MAX

#: Spark's JSON codes for the earliest and the latest offset of a partition.
EARLIEST, LATEST = -2, -1
_MiB = 1 << 20
#: Defaults of ``maxBytesPerPartition`` and ``maxRecordsPerBatch``.
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * _MiB
DEFAULT_MAX_RECORDS_PER_BATCH = 65536
#: Spark's default ``maxTriggerDelay`` (``KafkaSourceProvider.DEFAULT_MAX_TRIGGER_DELAY``, 15m).
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
#: The subscription options, of which Spark's Kafka source takes exactly one (kafkalog: at most one).
_STRATEGIES = ("subscribe", "subscribePattern", "assign")
#: Stream-only options, which Spark ignores with a warning in a batch query.
_STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"


def _bool(options: Any, name: str, default: bool) -> bool:
    """Option ``name`` as ``true`` or ``false`` (any case), or ``default`` when absent."""
    raw = options.get(name)
    return default if raw is None else parse_config_bool(f"option {name}", raw)


@overload
def _int(options: Any, name: str, default: int, minimum: int = 1) -> int: ...


@overload
def _int(options: Any, name: str, default: None, minimum: int = 1) -> int | None: ...


def _int(options: Any, name: str, default: int | None, minimum: int = 1) -> int | None:
    """Option ``name`` as an integer of at least ``minimum`` (Spark reads its Kafka options with
    Java's ``parseLong``, as ``parse_config_int`` does), or ``default`` when absent."""
    raw = options.get(name)
    return default if raw is None else parse_config_int(f"option {name}", raw, minimum, _LONG_MAX)


def _offsets_spec(options: Any, name: str, default: str) -> str | dict[str, dict[int, int]]:
    """``earliest``, ``latest`` or Spark's JSON ``{"topic": {"0": offset}}`` (-2 earliest, -1 latest)."""
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    return _per_partition_json(name, text, minimum=EARLIEST)


def _per_partition_json(name: str, text: str, *, minimum: int) -> dict[str, dict[int, int]]:
    """Spark's per-partition JSON ``{"topic": {"0": value}}``, every value at least ``minimum``."""
    try:
        parsed = json.loads(text)
        out = {}
        for topic, partitions in parsed.items():
            out[str(topic)] = {int(p): int(v) for p, v in partitions.items()}
    except (ValueError, TypeError, AttributeError):
        raise InvalidConfigError(f'option {name} must be earliest, latest or JSON like {{"topic": {{"0": 42}}}}, not {text!r}') from None
    for topic, partitions in out.items():
        for p, v in partitions.items():
            if v < minimum:
                raise InvalidConfigError(f"option {name}: {v} for {topic}-{p} is below {minimum}")
    return out


@dataclass(frozen=True)
class _ReadOptions:
    """Reading options, parsed and checked once on the driver (picklable)."""

    path: str
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    include_internal: bool = False
    starting: Any = "earliest"
    ending: Any = "latest"
    starting_ts: Any = None  # int ms for every partition, or {topic: {partition: ms}}
    ending_ts: Any = None
    start_ts_strategy: str = "error"
    read_committed: bool = False
    include_headers: bool = False
    fail_on_corruption: bool = True
    fail_on_data_loss: bool = True
    check_crcs: bool = True
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH
    push_filters: bool = False
    max_offsets_per_trigger: int | None = None
    stats_path: str | None = None
    assign: tuple[tuple[str, tuple[int, ...]], ...] | None = None  # ((topic, partitions), ...)
    min_partitions: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    include_metadata: bool = False
    storage_options: Any = None  # fsspec options of a remote path (credentials, endpoint, ...)
    formats: Any = None  # _formats.FormatOptions: keyFormat, valueFormat, ... (None: binary)

    def assigned(self, topic: str, partition: int) -> bool:
        """Whether ``assign`` (when given) lists this topic-partition."""
        if self.assign is None:
            return True
        return any(t == topic and partition in parts for t, parts in self.assign)

    @functools.cached_property
    def storage(self) -> Storage:
        """The filesystem of ``path`` (local, or fsspec's for a URL, with ``storageOptions``)."""
        return Storage.for_path(self.path, self.storage_options)

    @classmethod
    def parse(cls, options: Any, *, streaming: bool = False) -> _ReadOptions:
        """The options Spark hands the data source (``streaming``: a stream starts at latest).

        Raises:
            InvalidConfigError: no path, or an option with a value it cannot take.
        """
        path = options.get("path")
        if not path:
            raise InvalidConfigError('kafkalog needs a path: spark.read.format("kafkalog").load("/data/kafka-logs")')
        given = [name for name in _STRATEGIES if options.get(name) is not None]
        if len(given) > 1:
            # Spark: "Only one of the following options can be specified for Kafka source"
            raise InvalidConfigError(
                f"only one of subscribe, subscribePattern, assign can be given, not {' and '.join(given)}"
            )
        subscribe = options.get("subscribe")
        if subscribe is not None and not [t for t in str(subscribe).split(",") if t.strip()]:
            raise InvalidConfigError(f"no topics to subscribe to: option subscribe is {subscribe!r}")
        pattern = options.get("subscribePattern")
        if pattern is not None:
            pattern = str(pattern).strip()
            if not pattern:
                raise InvalidConfigError("the pattern to subscribe is empty: option subscribePattern is ''")
            try:
                re.compile(pattern)
            except re.error as e:
                raise InvalidConfigError(f"option subscribePattern {pattern!r} is not a regular expression: {e}") from None
        _check_placement(options, streaming)
        isolation = options.get("isolationLevel") or options.get("kafka.isolation.level") or "read_uncommitted"
        if isolation not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError(f"isolationLevel must be read_uncommitted or read_committed, not {isolation!r}")
        strategy = str(options.get("startingOffsetsByTimestampStrategy") or "error").lower()
        if strategy not in ("error", "latest"):
            raise InvalidConfigError(f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
        max_offsets = _int(options, "maxOffsetsPerTrigger", None)
        min_offsets = _int(options, "minOffsetsPerTrigger", None)
        if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
            raise InvalidConfigError(
                f"minOffsetsPerTrigger ({min_offsets}) is higher than maxOffsetsPerTrigger ({max_offsets})"
            )
        return cls(
            path=_path(path),
            storage_options=_storage_options(options),
            subscribe=tuple(t.strip() for t in subscribe.split(",") if t.strip()) if subscribe else None,
            subscribe_pattern=pattern,
            include_internal=_bool(options, "includeInternalTopics", False),
            starting=_offsets_spec(options, "startingOffsets", "latest" if streaming else "earliest"),
            ending=_offsets_spec(options, "endingOffsets", "latest"),
            starting_ts=_timestamp_spec(options, "startingTimestamp", "startingOffsetsByTimestamp"),
            ending_ts=None if streaming else _timestamp_spec(options, "endingTimestamp", "endingOffsetsByTimestamp"),
            start_ts_strategy=strategy,
            read_committed=isolation == "read_committed",
            include_headers=_bool(options, "includeHeaders", False),
            fail_on_corruption=_bool(options, "failOnCorruption", True),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            check_crcs=_bool(options, "checkCrcs", True),
            max_bytes_per_partition=_int(options, "maxBytesPerPartition", DEFAULT_MAX_BYTES_PER_PARTITION),
            max_records_per_batch=_int(options, "maxRecordsPerBatch", DEFAULT_MAX_RECORDS_PER_BATCH),
            push_filters=_bool(options, "pushFilters", False),
            max_offsets_per_trigger=max_offsets,
            stats_path=options.get("statsPath"),
            assign=_assign(options.get("assign")),
            min_partitions=_int(options, "minPartitions", None),
            min_offsets_per_trigger=min_offsets,
            max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
            include_metadata=_bool(options, "includeMetadata", False),
            formats=_formats(options),
        )


def _formats(options: Any) -> Any:
    """``keyFormat``, ``valueFormat`` and the schema options (None when both are binary)."""
    from ._formats import spark_format_options

    formats = spark_format_options(options, _storage_options(options))
    return formats if formats.active else None


def _path(path: Any) -> str:
    """The read's path, absolute and URL-normalised here on the driver, so that executors
    running elsewhere (another working directory, another machine) read the same files."""
    return normalize_path(str(path))


def _storage_options(options: Any) -> dict[str, Any] | None:
    """``storageOptions``: a JSON object of fsspec storage options (``{"key": ..., "secret": ...,
    "endpoint_url": ...}``), handed to the filesystem of a remote path on the driver and the
    executors."""
    raw = options.get("storageOptions")
    if raw is None:
        return None
    try:
        parsed = json.loads(str(raw))
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise InvalidConfigError(f'option storageOptions must be a JSON object like {{"anon": true}}, not {raw!r}')
    return parsed


def _timestamp_spec(options: Any, single: str, per_partition: str) -> Any:
    """Spark's precedence: ``startingTimestamp`` over ``startingOffsetsByTimestamp``."""
    raw = options.get(single)
    if raw is not None:
        return _int(options, single, None, minimum=0)
    raw = options.get(per_partition)
    if raw is not None:
        return _per_partition_json(per_partition, str(raw), minimum=0)


def _assign(raw: Any) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    """Spark's ``assign``: JSON ``{"topic": [0, 1], ...}`` (``JsonUtils.partitions``)."""
    if raw is None:
        return None
    text = str(raw).strip()
    if not text.startswith("{"):
        raise InvalidConfigError(f"no topic-partitions to assign: option assign is {raw!r}")
    example = '{"topicA": [0, 1], "topicB": [0, 1]}'
    try:
        parsed = json.loads(text)
    except ValueError:
        raise InvalidConfigError(f"option assign must be JSON like {example}, not {text!r}") from None
    out = []
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in partitions):
            raise InvalidConfigError(f"option assign must be JSON like {example}, not {text!r}")
        if any(p < 0 for p in partitions):
            raise InvalidConfigError(f"option assign: a partition of topic {topic} is negative")
        out.append((str(topic), tuple(sorted(set(partitions)))))
    if not any(parts for _, parts in out):
        raise InvalidConfigError(f"no topic-partitions to assign: option assign is {raw!r}")
    return tuple(sorted(out))


def _check_placement(options: Any, streaming: bool) -> None:
    """Spark's batch and stream rules for where bounds may be given (``validateStreamOptions``,
    ``validateBatchOptions``); stream-only options in a batch query are ignored with a warning."""
    if streaming:
        for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if options.get(name) is not None:
                raise InvalidConfigError(f"option {name} is not valid in streaming queries (a stream has no end)")
        return
    for name in _STREAM_ONLY:
        if options.get(name) is not None:
            _log.warning("kafkalog: option %s ignored in batch queries", name)
    if options.get("startingTimestamp") is None and options.get("startingOffsetsByTimestamp") is None:
        starting = options.get("startingOffsets")
        if starting is not None:
            spec = _offsets_spec(options, "startingOffsets", "earliest")
            if spec == "latest":
                raise InvalidConfigError("startingOffsets can't be latest for batch queries (it would read nothing)")
            if isinstance(spec, dict):
                for topic, partitions in spec.items():
                    for p, v in partitions.items():
                        if v == LATEST:
                            raise InvalidConfigError(f"startingOffsets for {topic}-{p} can't be latest (-1) for batch queries")
    if options.get("endingTimestamp") is None and options.get("endingOffsetsByTimestamp") is None:
        ending = options.get("endingOffsets")
        if ending is not None:
            spec = _offsets_spec(options, "endingOffsets", "latest")
            if spec == "earliest":
                raise InvalidConfigError("endingOffsets can't be earliest for batch queries (it would read nothing)")
            if isinstance(spec, dict):
                for topic, partitions in spec.items():
                    for p, v in partitions.items():
                        if v == EARLIEST:
                            raise InvalidConfigError(f"endingOffsets for {topic}-{p} can't be earliest (-2) for batch queries")
                start = _offsets_spec(options, "startingOffsets", "earliest")
                if isinstance(start, dict):
                    # Spark's checkOffsetLimitValidity: a start past its end is an error (not an empty read)
                    for topic, partitions in start.items():
                        for p, v in partitions.items():
                            e = spec.get(topic, {}).get(p)
                            if e is not None and v >= 0 and e >= 0 and v > e:
                                raise InvalidConfigError(
                                    f"startingOffsets {v} for {topic}-{p} is greater than its endingOffsets {e}"
                                )


#: Spark's time units (``JavaUtils.timeStringAsMs``); a number without a unit is milliseconds.
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(-?[0-9]+)([a-z]+)?")


def _duration_ms(options: Any, name: str, default: int) -> int:
    """A duration option such as ``15m``, ``30s`` or ``500`` (ms), as Spark reads them."""
    raw = options.get(name)
    if raw is None:
        return default
    m = _DURATION.fullmatch(str(raw).strip().lower())
    if m is None or (m.group(2) is not None and m.group(2) not in _TIME_UNITS_MS):
        raise InvalidConfigError(f"option {name} must be a duration like 15m, 30s or 500ms, not {raw!r}")
    value = int(m.group(1)) * _TIME_UNITS_MS[m.group(2) or "ms"]
    if value < 0:
        raise InvalidConfigError(f"option {name} must not be negative, not {raw!r}")
    return int(value)
