"""The writer's file output on a remote filesystem (``s3://``, ``gs://``, ``abfs://``, ...).

Objects cannot be appended to, so a commit never changes an object a reader may be reading:

- each task attempt builds its batches in a local temporary file and uploads it whole under
  ``<path>/.kafkalog-staging/<job>/<attempt>/`` (the executors talk to the store themselves);
- the driver's commit finds each touched partition's log end offset (the reader's planning: the
  last segment's index and the batch headers after its last entry), appends the staged batches
  of the committed attempts through :class:`kafkalog.Log` into a local directory started at that
  offset -- new segments, offsets assigned and indexes kept as a broker appends -- and uploads
  each new segment's indexes (``.index``, ``.timeindex``, ``.txnindex``) and producer snapshot
  first and its ``.log`` last;
- readers list segments by their ``.log`` objects, so they never see a segment whose indexes are
  missing; a failed commit deletes what it uploaded, and the staging prefix is deleted at the end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable

from .. import (
    SEGMENT_FILE,
    FileRecords,
    Log,
    LogConfig,
    MemoryRecords,
    Storage,
)
from ._discovery import _PartitionDir
from ._options import _ReadOptions
from ._partition import _PartitionLog

#: Upload order of a segment's files: the ``.log`` last (the file readers list segments by).
_UPLOAD_ORDER = {"index": 0, "timeindex": 0, "txnindex": 0, "snapshot": 0, "log": 1}


def _upload_staged(storage: Storage, local_file: str, remote_dir: str) -> str:
    """Upload one attempt's staged batches (a local file) into its staging prefix."""
    url = Storage.join(remote_dir, os.path.basename(local_file))
    storage.put_file(local_file, url)
    return url


def _remote_end(storage: Storage, storage_options: dict | None, directory: str, topic: str, partition: int) -> int:
    """The log end offset of a partition directory on the store (0 when it has no segment)."""
    plog = _PartitionLog(_PartitionDir(topic, partition, directory),
                         _ReadOptions(path=directory, storage_options=storage_options))
    return plog.end_offset if plog.segments else 0


def _commit_remote(path: str, storage_options: dict | None, config: LogConfig,
                   staged: Iterable[tuple[str, int, str]]) -> None:
    """Append the staged batch files (``(topic, partition, url)``, in commit order) to the
    partitions under ``path`` as new segments (module docstring). On failure, every object
    uploaded so far is deleted and the error raised."""
    storage = Storage.for_path(path, storage_options)
    work = tempfile.mkdtemp(prefix="kafkalog-commit-")
    logs: dict[tuple[str, int], Log] = {}
    uploaded: list[str] = []
    done = False
    try:
        for topic, partition, url in staged:
            tp = (topic, partition)
            log = logs.get(tp)
            if log is None:
                remote_dir = Storage.join(path, f"{topic}-{partition}")
                log = logs[tp] = Log.open(os.path.join(work, f"{topic}-{partition}"), config)
                end = _remote_end(storage, storage_options, remote_dir, topic, partition)
                if end:
                    log.truncate_fully_and_start_at(end)
            local = os.path.join(work, f"staged-{uuid.uuid4().hex}")
            with open(local, "wb") as f:
                f.write(storage.read_bytes(url))
            epoch = log.latest_epoch if log.latest_epoch is not None else 0
            with FileRecords.open(local) as records:
                for batch in records.batches(validate=True, strict=True):
                    log.append(MemoryRecords(bytes(batch.entry())), leader_epoch=epoch)
            os.unlink(local)
        for log in logs.values():
            log.flush()
            log.close()  # trims the active segment's indexes to their entries
        for (topic, partition) in logs:
            _publish(storage, os.path.join(work, f"{topic}-{partition}"), Storage.join(path, f"{topic}-{partition}"),
                     uploaded)
        done = True
    finally:
        for log in logs.values():
            if not log.closed:
                log.close()
        if not done:
            for url in reversed(uploaded):
                storage.remove(url)
        shutil.rmtree(work, ignore_errors=True)


def _publish(storage: Storage, local_dir: str, remote_dir: str, uploaded: list[str]) -> None:
    """Upload the non-empty segments of ``local_dir``: per segment, by base offset, its other
    files first and its ``.log`` last."""
    segments: dict[int, list[str]] = {}
    for name in os.listdir(local_dir):
        m = SEGMENT_FILE.match(name)
        if m is not None:
            segments.setdefault(int(m.group(1)), []).append(name)
    for base in sorted(segments):
        names = segments[base]
        log_name = next((n for n in names if n.endswith(".log")), None)
        if log_name is None or os.path.getsize(os.path.join(local_dir, log_name)) == 0:
            continue  # the empty active segment a roll leaves, or a snapshot of no segment
        for name in sorted(names, key=lambda n: (_UPLOAD_ORDER[n.rsplit(".", 1)[1]], n)):
            url = Storage.join(remote_dir, name)
            storage.put_file(os.path.join(local_dir, name), url)
            uploaded.append(url)
