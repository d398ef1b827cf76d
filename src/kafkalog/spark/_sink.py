"""``writeStream.format("kafkalog")``: a streaming sink with exactly-once output across restarts,
on a local path or any filesystem fsspec knows (``s3://``, ``gs://``, ...).

Each micro-batch is written as :mod:`._write` writes a batch job (task attempts stage their
batches privately; the driver's commit appends the committed attempts: through
:class:`kafkalog.Log` locally, as new segment objects on a store), and the sink records the
micro-batch id with the data in a state file of the log directory,
``.kafkalog-sink-<sinkId>.json``: replaced with :func:`kafkalog.durable.write_atomically` locally
(temporary file, fsync, rename, directory fsync), written whole with one PUT on an object store
(a PUT is atomic: a reader gets the old object or the new one). A file, not a directory, so
that a broker loading the log directory does not take it for a partition.

The commit of micro-batch ``N`` is a write-ahead protocol over that file:

1. ``N`` is the last batch the file marks done: a replay (Spark re-runs the last batch when
   the query stopped between the sink's commit and its own commit log) -- nothing is written.
2. A pending batch in the file (a commit that stopped midway): every partition it touched is
   rolled back to the log end offset recorded before it appended, so nothing it appended
   survives -- locally by truncating the log; on a store by deleting every segment whose base
   offset is at or after that end (a store's commit only adds segments that start there), each
   segment's ``.log`` object first so that readers stop listing it, then its other files.
3. The file is written as *pending N* with the log end offset of every partition ``N``
   touches, before anything is appended.
4. The staged batches are appended and flushed (fsync), or published as new segments.
5. The file is written as *done N*.

A crash before 3 leaves nothing of ``N``; between 3 and 5, step 2 of the replay removes what
was appended; after 5 the replay is skipped. So each micro-batch's records are in the log
exactly once, whatever stops when.

Staging: the tasks of micro-batch ``N`` stage under ``<staging root>/sink-<sinkId>/batch-<N>``
(``N`` from the local property Spark's micro-batch execution sets on its jobs), so that the
files of different micro-batches never mix in one prefix; the commit or abort of ``N`` deletes
its prefix, and a commit deletes the prefixes of earlier micro-batches left by a stopped query.
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

from .. import Log, LogConfig
from ..durable import write_atomically
from ..filenames import SEGMENT_FILE
from ..partition_view import PartitionView
from ..remote import Storage
from ..errors import InvalidConfigError, KafkalogError
from ._compat import DataSourceStreamArrowWriter, pa
from ._write import _WriteCommit, _WriteOptions, _Writer

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"

_STATE_PREFIX = ".kafkalog-sink-"
_SINK_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")
_STATE_VERSION = 1
#: The local property Spark's MicroBatchExecution sets to the micro-batch id on the jobs it runs
#: (``MicroBatchExecution.BATCH_ID_KEY``); tasks read it from their TaskContext.
_BATCH_ID_KEY = "streaming.sql.batchId"
#: A micro-batch's staging directory (prefix) in the sink's.
_BATCH_DIR = re.compile(r"batch-(\d{1,19})")


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
    def load(cls, path: str, storage: Storage | None = None) -> _SinkState:
        """The state in ``path`` on ``storage`` (the path's own filesystem by default; an empty
        state when there is no file).

        Raises:
            KafkalogError: the file is not a state this sink wrote.
        """
        storage = storage if storage is not None else Storage.for_path(path)
        try:
            raw = storage.read_bytes(path)
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
    commit exactly once (see the module docstring). Picklable (its options and paths only)."""

    def __init__(self, options: _WriteOptions, sink_id: str) -> None:
        # pyspark makes the writer more than once per query (the tasks' and the commit's may be
        # different instances): the staging is one per sink, not the writer's random one, with a
        # directory (prefix) per micro-batch made by its tasks when they write (see write), so
        # that a stopped query leaves none behind. _write_options made the random one locally.
        root = Storage.dirname(options.staging)
        if not options.remote:
            for directory in (options.staging, root):
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
        self.options = dataclasses.replace(options, staging=Storage.join(root, f"sink-{sink_id}"))
        self.state_path = Storage.join(options.path, f"{_STATE_PREFIX}{sink_id}.json")

    def batch_writer(self, batch_id: int) -> _Writer:
        """The batch writer of micro-batch ``batch_id``: staging under ``<sink staging>/batch-<id>``."""
        return _Writer(dataclasses.replace(self.options, staging=Storage.join(self.options.staging, f"batch-{batch_id}")))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _WriteCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        raw = context.getLocalProperty(_BATCH_ID_KEY) if context is not None else None
        if raw is None or not raw.isdigit():
            raise KafkalogError(f"the task does not say which micro-batch it writes (Spark's local property "
                                f"{_BATCH_ID_KEY} is {raw!r}): the kafkalog sink runs in micro-batch queries only",
                                file=self.options.path)
        writer = self.batch_writer(int(raw))
        if not self.options.remote:
            # The batch writer deletes its staging directory when a job commits; each
            # micro-batch's is made by its first task (a store's prefix needs no making).
            os.makedirs(writer.options.staging, exist_ok=True)
        return writer.write(iterator)

    def commit(self, messages: list[_WriteCommit | None], batchId: int) -> None:
        """Append micro-batch ``batchId`` unless the state file says it is done; roll back a
        commit that stopped midway first.

        Raises:
            KafkalogError: the state file says a later batch is done (another query wrote this
                sink: give this one its own ``sinkId``), or the append failed.
        """
        state = _SinkState.load(self.state_path, self.options.storage)
        if state.done is not None and batchId <= state.done:
            if batchId == state.done:
                _log.info("kafkalog sink: micro-batch %d is already in %s; not written again", batchId, self.options.path)
                self.abort(messages, batchId)  # only deletes the staged files
                return
            raise KafkalogError(
                f"micro-batch {batchId} comes after micro-batch {state.done} was written: this sink was written "
                "by another query (a new checkpoint starts again at 0); give each query its own sinkId option",
                file=self.state_path,
            )
        if state.pending is not None:
            self._roll_back(state)
        staged = {(item.topic, item.partition) for m in messages if m is not None for item in m.staged}
        ends = tuple((topic, partition, self._log_end(topic, partition)) for topic, partition in sorted(staged))
        self._write_state(_SinkState(state.done, batchId, ends))
        try:
            self.batch_writer(batchId).commit(messages)  # appends, flushes; undoes its own appends if one fails
        finally:
            self._drop_staging(batchId)
        self._write_state(_SinkState(batchId))

    def abort(self, messages: list[_WriteCommit | None], batchId: int) -> None:
        """Drop the micro-batch's staged batches (nothing was appended)."""
        self.batch_writer(batchId).abort(messages)
        self._drop_staging(batchId, earlier=False)

    # -- the steps ---------------------------------------------------------------------------------

    def _partition_dir(self, topic: str, partition: int) -> str:
        return Storage.join(self.options.path, f"{topic}-{partition}")

    def _log_end(self, topic: str, partition: int) -> int:
        """The log end offset of a partition (0 for one not written yet)."""
        directory = self._partition_dir(topic, partition)
        if self.options.remote:
            return PartitionView(directory, storage=self.options.storage).log_end_offset
        with Log.open(directory, LogConfig.from_properties(self.options.config)) as log:
            return log.log_end_offset

    def _write_state(self, state: _SinkState) -> None:
        if self.options.remote:
            self.options.storage.put_bytes(self.state_path, state.to_bytes())
        else:
            write_atomically(self.state_path, state.to_bytes())

    def _roll_back(self, state: _SinkState) -> None:
        """Take the partitions of an unfinished commit back to where they ended before it."""
        for topic, partition, end in state.ends:
            if self.options.remote:
                self._remove_segments_from(topic, partition, end, state.pending)
                continue
            directory = self._partition_dir(topic, partition)
            if not os.path.isdir(directory):
                continue
            with Log.open(directory, LogConfig.from_properties(self.options.config)) as log:
                if log.log_end_offset > end:
                    _log.warning("kafkalog sink: micro-batch %s stopped midway; %s-%d truncated from %d back to %d",
                                 state.pending, topic, partition, log.log_end_offset, end)
                    log.truncate_to(end)
                    log.flush()
        self._write_state(_SinkState(state.done))

    def _remove_segments_from(self, topic: str, partition: int, end: int, pending: int | None) -> None:
        """Delete the segments of a partition on a store whose base offset is ``end`` or above
        (what a commit that recorded ``end`` published: it only adds segments starting there)."""
        storage = self.options.storage
        directory = self._partition_dir(topic, partition)
        try:
            names = storage.list_files(directory)
        except (FileNotFoundError, NotADirectoryError):
            return
        doomed = []
        for name in names:
            m = SEGMENT_FILE.match(name)
            if m is not None and int(m.group(1)) >= end:
                doomed.append((m.group(2) != "log", name))  # each .log first: readers list segments by it
        if not doomed:
            return
        logs = sorted(name for is_other, name in doomed if not is_other)
        _log.warning("kafkalog sink: micro-batch %s stopped midway; %s-%d rolled back to offset %d (deleted %s)",
                     pending, topic, partition, end, ", ".join(logs) or "files of unpublished segments")
        for _, name in sorted(doomed):
            storage.remove(Storage.join(directory, name))

    def _drop_staging(self, batch_id: int, *, earlier: bool = True) -> None:
        """Delete micro-batch ``batch_id``'s staging and, with ``earlier``, that of every earlier
        micro-batch (left by a query stopped before its commit); then the empty directories."""
        storage, root = self.options.storage, self.options.staging
        storage.remove(Storage.join(root, f"batch-{batch_id}"), recursive=True)
        if earlier:
            try:
                names = storage.list_dirs(root)
            except (FileNotFoundError, NotADirectoryError):
                names = []
            for name in names:
                m = _BATCH_DIR.fullmatch(name)
                if m is not None and int(m.group(1)) < batch_id:
                    storage.remove(Storage.join(root, name), recursive=True)
        if not self.options.remote:  # a store's prefix is gone with its last object
            for directory in (root, Storage.dirname(root)):
                with contextlib.suppress(OSError):
                    os.rmdir(directory)


def _sink_id(options: Any) -> str:
    """The ``sinkId`` option (``default``): names the state file, one per query writing here."""
    raw = str(options.get("sinkId") or "default")
    if not _SINK_ID.fullmatch(raw):
        raise InvalidConfigError(f"option sinkId must be 1-100 letters, digits, '.', '_' or '-', not {raw!r}")
    return raw
