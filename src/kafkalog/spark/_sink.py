"""``writeStream.format("kafkalog")``: a streaming sink with exactly-once output across restarts.

Each micro-batch is written as :mod:`._write` writes a batch job (task attempts stage their
batches privately; the driver's commit appends the committed attempts through
:class:`kafkalog.Log`), and the sink records the micro-batch id with the data in a state file
of the log directory, ``.kafkalog-sink-<sinkId>.json``, written atomically
(:func:`kafkalog.write_atomically`: temporary file, fsync, rename, directory fsync). A file,
not a directory, so that a broker loading the log directory does not take it for a partition.

The commit of micro-batch ``N`` is a write-ahead protocol over that file:

1. ``N`` is the last batch the file marks done: a replay (Spark re-runs the last batch when
   the query stopped between the sink's commit and its own commit log) -- nothing is written.
2. A pending batch in the file (a commit that stopped midway): every partition it touched is
   truncated back to the log end offset recorded before it appended, so nothing it appended
   survives.
3. The file is written as *pending N* with the log end offset of every partition ``N``
   touches, before anything is appended.
4. The staged batches are appended and flushed (fsync).
5. The file is written as *done N*.

A crash before 3 leaves nothing of ``N``; between 3 and 5, step 2 of the replay removes what
was appended; after 5 the replay is skipped. So each micro-batch's records are in the log
exactly once, whatever stops when.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .. import Log, LogConfig, write_atomically
from ..errors import InvalidConfigError, KafkalogError
from ._compat import DataSourceStreamArrowWriter, pa
from ._write import _WriteCommit, _WriteOptions, _Writer

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"

_STATE_PREFIX = ".kafkalog-sink-"
_SINK_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")
_STATE_VERSION = 1


@dataclass(frozen=True)
class _SinkState:
    """What the state file says: the last micro-batch done, and a commit under way."""

    done: int | None = None
    pending: int | None = None
    ends: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, log end before the pending append)

    def to_bytes(self) -> bytes:
        return json.dumps({
            "version": _STATE_VERSION,
            "done": self.done,
            "pending": self.pending,
            "ends": [{"topic": t, "partition": p, "end": e} for t, p, e in self.ends],
        }, sort_keys=True).encode()

    @classmethod
    def load(cls, path: str) -> _SinkState:
        """The state in ``path`` (an empty state when there is no file).

        Raises:
            KafkalogError: the file is not a state this sink wrote.
        """
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return cls()
        try:
            doc = json.loads(raw)
            if doc.get("version") != _STATE_VERSION:
                raise ValueError(f"version {doc.get('version')!r}")
            done, pending = doc["done"], doc["pending"]
            for v in (done, pending):
                if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                    raise ValueError(f"batch id {v!r}")
            ends = []
            for e in doc["ends"]:
                topic, partition, end = e["topic"], e["partition"], e["end"]
                if not (isinstance(topic, str) and isinstance(partition, int) and isinstance(end, int)
                        and partition >= 0 and end >= 0):
                    raise ValueError(f"end {e!r}")
                ends.append((topic, partition, end))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise KafkalogError(f"not a kafkalog sink state file ({e}); move it away to start over", file=path) from None
        return cls(done, pending, tuple(ends))


class _StreamWriter(DataSourceStreamArrowWriter or object):  # type: ignore[misc]
    """The streaming sink: each micro-batch staged by the tasks and appended by the driver's
    commit exactly once (see the module docstring)."""

    def __init__(self, options: _WriteOptions, sink_id: str) -> None:
        # pyspark makes the writer more than once per query (the tasks' and the commit's may be
        # different instances): the staging directory is one per sink, not the writer's random
        # one, and is made by each micro-batch's tasks when they write (see write), so that a
        # stopped query leaves none behind.
        for directory in (options.staging, os.path.dirname(options.staging)):
            with contextlib.suppress(OSError):
                os.rmdir(directory)
        options = dataclasses.replace(options, staging=os.path.join(os.path.dirname(options.staging), f"sink-{sink_id}"))
        self.options = options
        self.writer = _Writer(options)
        self.state_path = os.path.join(options.path, f"{_STATE_PREFIX}{sink_id}.json")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _WriteCommit:
        # The batch writer deletes its staging directory when a job commits; a stream's
        # micro-batches share one, made again by each micro-batch's first task.
        os.makedirs(self.options.staging, exist_ok=True)
        return self.writer.write(iterator)

    def commit(self, messages: list[_WriteCommit | None], batchId: int) -> None:
        """Append micro-batch ``batchId`` unless the state file says it is done; roll back a
        commit that stopped midway first.

        Raises:
            KafkalogError: the state file says a later batch is done (another query wrote this
                sink: give this one its own ``sinkId``), or the append failed.
        """
        state = _SinkState.load(self.state_path)
        if state.done is not None and batchId <= state.done:
            if batchId == state.done:
                _log.info("kafkalog sink: micro-batch %d is already in %s; not written again", batchId, self.options.path)
                self.writer.abort(messages)  # only deletes the staged files
                return
            raise KafkalogError(
                f"micro-batch {batchId} comes after micro-batch {state.done} was written: this sink was written "
                "by another query (a new checkpoint starts again at 0); give each query its own sinkId option",
                file=self.state_path,
            )
        if state.pending is not None:
            self._roll_back(state)
        staged = {(item.topic, item.partition) for m in messages if m is not None for item in m.staged}
        config = LogConfig.from_properties(self.options.config)
        ends = []
        for topic, partition in sorted(staged):
            directory = os.path.join(self.options.path, f"{topic}-{partition}")
            with Log.open(directory, config) as log:
                ends.append((topic, partition, log.log_end_offset))
        write_atomically(self.state_path, _SinkState(state.done, batchId, tuple(ends)).to_bytes())
        self.writer.commit(messages)  # appends, flushes; truncates back itself if an append fails
        write_atomically(self.state_path, _SinkState(batchId).to_bytes())

    def _roll_back(self, state: _SinkState) -> None:
        """Truncate the partitions of an unfinished commit to where they ended before it."""
        config = LogConfig.from_properties(self.options.config)
        for topic, partition, end in state.ends:
            directory = os.path.join(self.options.path, f"{topic}-{partition}")
            if not os.path.isdir(directory):
                continue
            with Log.open(directory, config) as log:
                if log.log_end_offset > end:
                    _log.warning("kafkalog sink: micro-batch %s stopped midway; %s-%d truncated from %d back to %d",
                                 state.pending, topic, partition, log.log_end_offset, end)
                    log.truncate_to(end)
                    log.flush()
        write_atomically(self.state_path, _SinkState(state.done).to_bytes())

    def abort(self, messages: list[_WriteCommit | None], batchId: int) -> None:
        """Drop the micro-batch's staged batches (nothing was appended)."""
        self.writer.abort(messages)


def _sink_id(options: Any) -> str:
    """The ``sinkId`` option (``default``): names the state file, one per query writing here."""
    raw = str(options.get("sinkId") or "default")
    if not _SINK_ID.fullmatch(raw):
        raise InvalidConfigError(f"option sinkId must be 1-100 letters, digits, '.', '_' or '-', not {raw!r}")
    return raw
