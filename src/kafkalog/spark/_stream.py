"""The streaming reader: partition directories tailed, with Spark's Kafka offsets JSON
``{"topic": {"0": next}}`` as the stream's offsets; ``maxOffsetsPerTrigger`` shared among
partitions by lag, ``minOffsetsPerTrigger`` with ``maxTriggerDelay`` (a trigger with fewer new
offsets is skipped until the delay has passed), and Trigger.AvailableNow (pyspark >= 4.2)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from ..errors import InvalidConfigError, InvalidOffsetError
from ._arrow import _arrow_batches
from ._compat import (
    DataSourceStreamReader,
    InputPartition,
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
    pa,
)
from ._discovery import _discover
from ._options import _ReadOptions
from ._partition import _PartitionLog
from ._plan import _Bounds, _plan, _resolve_bounds

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"


def _offsets_json(offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def _from_json(offsets: dict) -> dict[tuple[str, int], int]:
    return {(topic, int(p)): int(v) for topic, parts in (offsets or {}).items() for p, v in parts.items()}


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Tails partition directories: offsets are Spark's Kafka JSON ``{"topic": {"0": next}}``."""

    def __init__(self, options: _ReadOptions) -> None:
        self.options = options
        self._target: dict[tuple[str, int], int] | None = None  # Trigger.AvailableNow's cap
        # When the last micro-batch was let through (minOffsetsPerTrigger); 0 as in Spark's
        # KafkaMicroBatchStream, so the first trigger of a run is never held back.
        self._last_trigger_ms = 0

    def _logs(self) -> list[_PartitionLog]:
        dirs = _discover(self.options)
        seen: dict[tuple[str, int], str] = {}
        for d in dirs:
            other = seen.setdefault((d.topic, d.partition), d.path)
            if other != d.path:
                raise InvalidConfigError(
                    f"{d.topic}-{d.partition} is in two directories ({other}, {d.path}): a stream's offsets "
                    "name each partition once", file=self.options.path,
                )
        return [_PartitionLog(d, self.options) for d in dirs]

    def _available(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start, end) per partition now: the last stable offset under read_committed."""
        out = {}
        for plog in self._logs():
            if plog.segments:
                end = plog.last_stable_offset() if self.options.read_committed else plog.log_end_offset
                out[(plog.dir.topic, plog.dir.partition)] = (plog.log_start_offset, end)
        return out

    def initialOffset(self) -> dict:
        plogs = self._logs()
        bounds = _resolve_bounds(plogs, self.options, streaming_start=True)
        return _offsets_json({(p.dir.topic, p.dir.partition): bounds[p.dir.path].start for p in plogs if p.dir.path in bounds})

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        available = self._available()
        begin = _from_json(start) if start else {}
        latest = {tp: end for tp, (_, end) in available.items()}
        if self._target is not None:
            latest = {tp: min(end, self._target[tp]) for tp, end in latest.items() if tp in self._target}
            for tp, offset in begin.items():
                latest.setdefault(tp, offset)
        limited = limit is not None and not (ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable))
        if limited and self._target is None and self._delay(begin, latest, available):
            return _offsets_json(begin)  # fewer than minOffsetsPerTrigger new offsets: no batch yet
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            latest = _rate_limit(begin, latest, available, limit.max_rows)
        for tp, offset in begin.items():
            if tp not in latest:
                latest[tp] = offset  # a partition that went away keeps its offset (data loss is checked in partitions)
        return _offsets_json(latest)

    def _delay(self, begin: dict[tuple[str, int], int], latest: dict[tuple[str, int], int],
               available: dict[tuple[str, int], tuple[int, int]]) -> bool:
        """Spark's ``delayBatch``: hold the trigger back while fewer than
        ``minOffsetsPerTrigger`` new offsets are there and ``maxTriggerDelay`` has not passed
        since the last micro-batch (not under Trigger.AvailableNow, which would wait forever)."""
        wanted = self.options.min_offsets_per_trigger
        if wanted is None:
            return False
        new = sum(max(0, end - begin.get(tp, available.get(tp, (end, end))[0])) for tp, end in latest.items())
        now = int(time.time() * 1000)
        if new >= wanted or now - self._last_trigger_ms >= self.options.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        return True

    def getDefaultReadLimit(self) -> Any:
        """Spark's read limits from the options: at most ``maxOffsetsPerTrigger`` offsets; with
        only ``minOffsetsPerTrigger``, a minimum (pyspark has no composite limit: the minimum
        is then checked by this reader from its options under either limit)."""
        if ReadMaxRows is not None and self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if ReadMinRows is not None and self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: end for tp, (_, end) in self._available().items()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, finish = _from_json(start), _from_json(end)
        plogs = {(p.dir.topic, p.dir.partition): p for p in self._logs()}
        bounds: dict[str, _Bounds] = {}
        for tp, stop in finish.items():
            plog = plogs.get(tp)
            name = f"{tp[0]}-{tp[1]}"
            first = begin.get(tp)
            if plog is None or not plog.segments:
                if first is not None and first < stop:
                    self._data_loss(f"partition {name} is gone: offsets [{first}, {stop}) can no longer be read")
                continue
            log_start = plog.log_start_offset
            if first is None:
                first = log_start  # a partition that appeared: from its start, as Spark's Kafka source
            if first < log_start:
                self._data_loss(
                    f"offsets [{first}, {log_start}) of {name} were deleted (retention?) before the stream read them"
                )
                first = log_start
            if stop < first:
                self._data_loss(f"{name} went back from offset {first} to {stop} (truncated?)")
                continue
            bounds[plog.dir.path] = _Bounds(first, stop)
        return [InputPartition(s) for s in _plan(list(plogs.values()), bounds, self.options)]

    def _data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise InvalidOffsetError(f"{message}. Set failOnDataLoss=false to go on", file=self.options.path)
        _log.warning("kafkalog: %s (failOnDataLoss=false)", message)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _arrow_batches(partition.value, self.options)

    def commit(self, end: dict) -> None:
        """Nothing to release: every micro-batch opens and closes its own files."""


def _rate_limit(begin: dict[tuple[str, int], int], latest: dict[tuple[str, int], int],
                available: dict[tuple[str, int], tuple[int, int]], limit: int) -> dict[tuple[str, int], int]:
    """Spark's Kafka ``maxOffsetsPerTrigger``: share ``limit`` offsets among partitions in
    proportion to their lag (at least one offset for a lagging partition)."""
    starts = {tp: begin.get(tp, available.get(tp, (end, end))[0]) for tp, end in latest.items()}
    lags = {tp: max(0, latest[tp] - starts[tp]) for tp in latest}
    total = sum(lags.values())
    if total <= limit:
        return latest
    out = {}
    for tp, end in latest.items():
        share = limit * lags[tp] / total
        step = int(share) if share >= 1 else (1 if lags[tp] else 0)
        out[tp] = min(end, starts[tp] + step)
    return out
