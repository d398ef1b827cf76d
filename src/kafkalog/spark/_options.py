"""The read options of the ``kafkalog`` data source: parsed and checked once, on the driver.

Spark's Kafka source names where one exists (``subscribe``, ``startingOffsets``,
``isolationLevel``, ...; docs/spark.md has the table). Offsets come as ``earliest``, ``latest``
or Spark's JSON ``{"topic": {"0": offset}}`` with -2 for earliest and -1 for latest;
timestamps as one value for every partition or the same JSON shape.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, overload

from .. import Storage, normalize_path
from ..errors import InvalidConfigError

#: Spark's JSON codes for the earliest and the latest offset of a partition.
EARLIEST, LATEST = -2, -1
_MiB = 1 << 20
#: Defaults of ``maxBytesPerPartition`` and ``maxRecordsPerBatch``.
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * _MiB
DEFAULT_MAX_RECORDS_PER_BATCH = 65536


def _bool(options: Any, name: str, default: bool) -> bool:
    """Option ``name`` as ``true`` or ``false`` (any case), or ``default`` when absent."""
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(f"option {name} must be true or false, not {raw!r}")
    return text == "true"


@overload
def _int(options: Any, name: str, default: int, minimum: int = 1) -> int: ...


@overload
def _int(options: Any, name: str, default: None, minimum: int = 1) -> int | None: ...


def _int(options: Any, name: str, default: int | None, minimum: int = 1) -> int | None:
    """Option ``name`` as an integer of at least ``minimum``, or ``default`` when absent."""
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(f"option {name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise InvalidConfigError(f"option {name} must be >= {minimum}, not {value}")
    return value


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
    storage_options: Any = None  # fsspec options of a remote path (credentials, endpoint, ...)

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
        subscribe = options.get("subscribe")
        isolation = options.get("isolationLevel") or options.get("kafka.isolation.level") or "read_uncommitted"
        if isolation not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError(f"isolationLevel must be read_uncommitted or read_committed, not {isolation!r}")
        strategy = str(options.get("startingOffsetsByTimestampStrategy") or "error").lower()
        if strategy not in ("error", "latest"):
            raise InvalidConfigError(f"startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
        return cls(
            path=_path(path),
            storage_options=_storage_options(options),
            subscribe=tuple(t.strip() for t in subscribe.split(",") if t.strip()) if subscribe else None,
            subscribe_pattern=options.get("subscribePattern"),
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
            max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", None),
            stats_path=options.get("statsPath"),
        )


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
