"""The writer's file output on a remote filesystem (``s3://``, ``gs://``, ``abfs://``, ...).

Objects cannot be appended to or renamed, so a write job adds new segments to each partition it
touches, and the executors build and upload those segments themselves: the driver's commit only
checks offsets and copies objects inside the store (S3's server-side CopyObject), so no record
passes through the driver.

1. A task attempt builds its batches for each partition in a local temporary file (``_write``).
2. It *claims* the partition's next offsets: it creates, exclusively (S3's conditional PUT,
   ``If-None-Match: *``), the claim object ``<staging>/claims/<topic>-<partition>/<k>`` naming
   itself, its range ``[base, end)`` and the leader epoch its batches carry -- ``base`` and the
   epoch are claim ``k - 1``'s end and epoch, or for claim 0 the partition's log end offset and
   latest epoch -- and re-lists and takes the next ``k`` when another attempt won that number.
   Claims are taken in the order attempts finish. A store without a conditional create gets
   *optimistic* claims: the attempt writes ``<k>.<attempt>``, lists again and, when another
   attempt wrote number ``k`` too, deletes its own and retries after a random wait (after
   ``_MAX_COLLISIONS`` it stages its batch file for the driver instead, step 5).
3. It appends its batches through :class:`kafkalog.Log` into a local directory started at
   ``base`` (offsets assigned, segments rolled by ``segment.bytes``, indexes kept, as a broker
   appends) and uploads the segments under ``<staging>/segments/<topic>-<partition>/<k>/``,
   where readers do not look (they list partition directories only).
4. The driver's commit checks, per partition, that the committed attempts' claims follow one
   another from the partition's log end offset as it is now -- and, since a partition's records
   keep Spark-partition order (``preserveOrder``, the default, as on a local path), that they
   were claimed in that order -- and copies their segments into the partition directory by base
   offset, each segment's indexes (and producer snapshot) first and its ``.log`` last. Readers
   list segments by their ``.log`` objects, so they never see a segment whose files are not all
   there, and new segments appear in offset order.
5. Otherwise that partition is appended by the driver: it downloads the staged batches of the
   committed attempts and re-appends them, in Spark-partition order, from the log end offset
   (the only case in which records pass through the driver). That is when an attempt claimed
   and then failed or lost to a speculative twin (a hole), another writer appended meanwhile,
   attempts claimed out of Spark-partition order (with ``preserveOrder``; ``preserveOrder=false``
   keeps the claim order instead -- each attempt's records together and in their order, what
   Spark's Kafka sink gives), or an attempt's optimistic claims kept colliding.

A failed commit deletes every object it put into partition directories, newest first; the
staging prefix is deleted at the end of the job either way.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .. import FileRecords, Log, LogConfig, MemoryRecords
from ..filenames import SEGMENT_FILE
from ..partition_view import PartitionView
from ..remote import Storage
from ..errors import KafkalogError

_log = logging.getLogger(__package__)  # one logger for the data source: "kafkalog.spark"

#: Upload order of a segment's files: the ``.log`` last (the file readers list segments by).
_UPLOAD_ORDER = {"index": 0, "timeindex": 0, "txnindex": 0, "snapshot": 0, "log": 1}
#: Claim numbers are zero-padded so that a listing sorts them.
_CLAIM_DIGITS = 10
#: Attempts at a claim before giving up: each lost race means another attempt claimed, so this
#: bounds the loop far above the attempts one job runs against one partition.
_MAX_CLAIM_TRIES = 100_000
#: Optimistic claims (stores without a conditional create): collisions an attempt backs off
#: from (a random wait up to _BACKOFF_S times the collisions so far, at most 10 of them) before
#: it gives up claiming and stages its batch file for the driver.
_MAX_COLLISIONS = 30
_BACKOFF_S = 0.05


@dataclass(frozen=True)
class _Claimed:
    """What one attempt staged for one partition on a store with claims: claim number ``k``,
    its offsets ``[base, end)``, and its segments' files under ``prefix`` in upload order."""

    k: int
    base: int
    end: int
    prefix: str
    files: tuple[str, ...]


def _partition_url(path: str, topic: str, partition: int) -> str:
    return Storage.join(path, f"{topic}-{partition}")


def _claims_by_number(storage: Storage, prefix: str) -> dict[int, list[str]]:
    """The claim objects under ``prefix`` by claim number (``<k>``, or ``<k>.<attempt>`` where
    claims are optimistic)."""
    try:
        names = storage.list_files(prefix)
    except FileNotFoundError:
        return {}
    out: dict[int, list[str]] = {}
    for name in sorted(names):
        number = name.split(".", 1)[0]
        if number.isdigit():
            out.setdefault(int(number), []).append(name)
    return out


def _claim(storage: Storage, path: str, staging: str, topic: str, partition: int, attempt: str,
           count: int) -> tuple[int, int, int] | None:
    """Claim the next ``count`` offsets of ``topic-partition`` for ``attempt`` (module
    docstring, step 2): ``(k, base, epoch)``, ``epoch`` being the leader epoch the batches are
    appended with -- the partition's latest, found by claim 0 and handed on by each claim.
    None when optimistic claims kept colliding (the attempt then stages its batch file).

    Raises:
        KafkalogError: a claim object is not one this writer made, or no claim could be taken.
    """
    prefix = Storage.join(staging, "claims", f"{topic}-{partition}")
    exclusive = storage.exclusive_create
    jitter = random.Random()  # two colliding attempts must not retry in step
    collisions = 0

    def back_off() -> bool:
        """Count a collision and wait a random while; False once there were too many."""
        nonlocal collisions
        collisions += 1
        if collisions > _MAX_COLLISIONS:
            return False
        time.sleep(jitter.uniform(0, _BACKOFF_S * min(collisions, 10)))
        return True

    for _ in range(_MAX_CLAIM_TRIES):
        claims = _claims_by_number(storage, prefix)
        k = max(claims) + 1 if claims else 0
        holders: list[str] | None = None  # the claim(s) of number k - 1
        if k:
            holders = claims[k - 1]
            if len(holders) > 1:  # optimistic claims still colliding on k - 1: one steps back soon
                if not back_off():
                    return None
                continue
            url = Storage.join(prefix, holders[0])
            try:
                previous = json.loads(storage.read_bytes(url))
                base, epoch = int(previous["end"]), int(previous["epoch"])
            except FileNotFoundError:  # an optimistic claim that stepped back since the listing
                if not back_off():
                    return None
                continue
            except (ValueError, KeyError, TypeError) as e:
                raise KafkalogError(f"not a kafkalog offset claim ({e})", file=url) from None
        else:
            view = PartitionView(_partition_url(path, topic, partition), storage=storage)
            base, epoch = view.log_end_offset, view.latest_epoch()
        body = json.dumps({"attempt": attempt, "base": base, "end": base + count, "epoch": epoch},
                          sort_keys=True).encode()
        if exclusive:
            try:
                storage.create_exclusive(Storage.join(prefix, f"{k:0{_CLAIM_DIGITS}d}"), body)
            except FileExistsError:
                continue  # another attempt took number k first: its end is the next base
            return k, base, epoch
        # Optimistic (no conditional create): write a claim of its own name, then list again.
        # With a store whose listings show every write that completed before them, of two
        # attempts writing number k at least one sees the other and steps back, so at most one
        # keeps k. The claim built on (k - 1) must still be there alone: one that was stepping
        # back when it was read leaves a hole. The commit's chain check catches what is left.
        mine = f"{k:0{_CLAIM_DIGITS}d}.{attempt}"
        storage.put_bytes(Storage.join(prefix, mine), body)
        now = _claims_by_number(storage, prefix)
        if now.get(k) == [mine] and (holders is None or now.get(k - 1) == holders):
            return k, base, epoch
        storage.remove(Storage.join(prefix, mine))
        if not back_off():
            return None
    raise KafkalogError(f"no offsets of {topic}-{partition} could be claimed in {_MAX_CLAIM_TRIES} tries", file=prefix)


def _stage_remote(storage: Storage, path: str, staging: str, attempt: str, config: LogConfig,
                  local_dir: str, topic: str, partition: int, batches_file: str, count: int
                  ) -> tuple[str, _Claimed | None]:
    """Put one attempt's batches for one partition on the store (module docstring, steps 2-3):
    as segments under a claim, or as the batch file itself when optimistic claims kept
    colliding. Returns the staged prefix and the claim (None without one)."""
    claimed = _claim(storage, path, staging, topic, partition, attempt, count)
    if claimed is None:
        _log.info("kafkalog write: %s-%d: offset claims kept colliding; %s stages its batches for the "
                  "driver", topic, partition, attempt)
        prefix = Storage.join(staging, attempt)
        storage.put_file(batches_file, Storage.join(prefix, os.path.basename(batches_file)))
        return prefix, None
    k, base, epoch = claimed
    work = os.path.join(local_dir, f"{topic}-{partition}")
    with Log.open(work, config) as log:
        if base:
            log.truncate_fully_and_start_at(base)
        _append_file(log, batches_file, epoch)
        if log.log_end_offset != base + count:  # the count claimed is the count appended
            raise KafkalogError(f"claimed {count} offsets of {topic}-{partition} but appended "
                                f"{log.log_end_offset - base}", file=batches_file)
        log.flush()
    # closed: the active segment's indexes are trimmed to their entries
    os.unlink(batches_file)  # built into the segments: the task's disk holds one copy
    prefix = Storage.join(staging, "segments", f"{topic}-{partition}", f"{k:0{_CLAIM_DIGITS}d}")
    files = _upload_segments(storage, work, prefix)
    shutil.rmtree(work, ignore_errors=True)
    return prefix, _Claimed(k, base, base + count, prefix, tuple(files))


def _append_file(log: Log, batches_file: str, epoch: int, storage: Storage | None = None) -> None:
    """Append every batch of a staged batch file (or a staged segment; local, or read in place
    on ``storage``) as the leader in ``epoch`` would."""
    with FileRecords.open(batches_file, storage=storage) as records:
        for batch in records.batches(validate=True, strict=True):
            log.append(MemoryRecords(bytes(batch.entry())), leader_epoch=epoch)


def _segment_files(local_dir: str) -> list[str]:
    """The files of the non-empty segments of ``local_dir`` in upload order: by base offset,
    each segment's other files first and its ``.log`` last."""
    segments: dict[int, list[str]] = {}
    for name in os.listdir(local_dir):
        m = SEGMENT_FILE.match(name)
        if m is not None:
            segments.setdefault(int(m.group(1)), []).append(name)
    out: list[str] = []
    for base in sorted(segments):
        names = segments[base]
        log_name = next((n for n in names if n.endswith(".log")), None)
        if log_name is None or os.path.getsize(os.path.join(local_dir, log_name)) == 0:
            continue  # the empty active segment a roll leaves, or a snapshot of no segment
        out.extend(sorted(names, key=lambda n: (_UPLOAD_ORDER[n.rsplit(".", 1)[1]], n)))
    return out


def _upload_segments(storage: Storage, local_dir: str, remote_dir: str, uploaded: list[str] | None = None) -> list[str]:
    """Upload the non-empty segments of ``local_dir`` in :func:`_segment_files` order; the
    names uploaded (and, into ``uploaded``, their URLs as each one lands)."""
    names = _segment_files(local_dir)
    for name in names:
        url = Storage.join(remote_dir, name)
        storage.put_file(os.path.join(local_dir, name), url)
        if uploaded is not None:
            uploaded.append(url)
    return names


@dataclass(frozen=True)
class _Item:
    """One attempt's staged output for one partition, as the commit sees it."""

    topic: str
    partition: int
    prefix: str
    file: str  # the batch file's name (without a claim)
    claim: _Claimed | None


def _commit_remote(path: str, storage_options: dict | None, config: LogConfig, items: Sequence[_Item], *,
                   preserve_order: bool = True) -> None:
    """Publish the committed attempts' output (``items`` in Spark partition order) into the
    partitions under ``path`` (module docstring, steps 4-5). On failure every object put into a
    partition directory is deleted, newest first, and the error raised."""
    storage = Storage.for_path(path, storage_options)
    by_tp: dict[tuple[str, int], list[_Item]] = {}
    for item in items:
        by_tp.setdefault((item.topic, item.partition), []).append(item)
    uploaded: list[str] = []
    try:
        for (topic, partition), group in sorted(by_tp.items()):
            target = _partition_url(path, topic, partition)
            view = PartitionView(target, storage=storage)
            end = view.log_end_offset
            claims = _chain(group, end, preserve_order)
            if claims is not None:
                for claim in claims:
                    for name in claim.files:
                        url = Storage.join(target, name)
                        storage.copy(Storage.join(claim.prefix, name), url)
                        uploaded.append(url)
                continue
            _log.info("kafkalog write: %s-%d is appended by the driver (its attempts' offset claims do not "
                      "follow one another from the log end%s)", topic, partition,
                      " in Spark-partition order" if preserve_order else "")
            staged = []
            for item in group:
                if item.claim is None:
                    staged.append(Storage.join(item.prefix, item.file))
                else:
                    staged.extend(Storage.join(item.prefix, n) for n in item.claim.files if n.endswith(".log"))
            _append_through_driver(storage, config, target, topic, partition, end, view.latest_epoch(), staged,
                                   uploaded)
    except BaseException:
        for url in reversed(uploaded):
            storage.remove(url)
        raise


def _chain(group: Sequence[_Item], end: int, preserve_order: bool) -> list[_Claimed] | None:
    """The claims of ``group`` (in Spark partition order) in claim order when they follow one
    another from the partition's log end offset ``end`` -- and, with ``preserve_order``, were
    claimed in Spark partition order -- so their segments can be copied as they are; else None."""
    claims = [item.claim for item in group]
    if any(c is None for c in claims):
        return None
    ordered = sorted(claims, key=lambda c: c.k)  # type: ignore[union-attr]
    if preserve_order and ordered != claims:  # claimed out of Spark partition order
        return None
    for claim in ordered:
        if claim.base != end:  # type: ignore[union-attr]
            return None
        end = claim.end  # type: ignore[union-attr]
    return ordered  # type: ignore[return-value]


def _append_through_driver(storage: Storage, config: LogConfig, target: str, topic: str, partition: int,
                           end: int, epoch: int, staged: Iterable[str], uploaded: list[str]) -> None:
    """Append the staged batch files (URLs, in order, read in place) to the partition at
    ``target`` as new segments from its log end offset ``end`` in leader epoch ``epoch``,
    uploaded by the driver (module docstring, step 5)."""
    work = tempfile.mkdtemp(prefix="kafkalog-commit-")
    try:
        local_dir = os.path.join(work, f"{topic}-{partition}")
        with Log.open(local_dir, config) as log:
            if end:
                log.truncate_fully_and_start_at(end)
            for url in staged:
                _append_file(log, url, epoch, storage)
            log.flush()
        _upload_segments(storage, local_dir, target, uploaded)
    finally:
        shutil.rmtree(work, ignore_errors=True)
