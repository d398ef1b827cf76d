"""LogSegment against segments written by Kafka: the Kafka 3.8 corpus and real brokers' files.

Kafka 3.8 corpus (tests/data/kafka-3.8, written by Kafka's own ``LogSegment`` one batch per
append with index.interval.bytes=4096 and segment.index.bytes=10 MiB):

* appending its batches one at a time and closing reproduces ``.log``, ``.index`` and
  ``.timeindex`` byte for byte;
* ``recover()`` of the ``.log`` alone rebuilds ``.index``, ``.timeindex`` and ``.txnindex`` byte
  for byte and truncates nothing, under both index search paths;
* Kafka's own reading of the index files (``*.index.expected.jsonl``, ``*.timeindex.expected.jsonl``)
  equals what OffsetIndex and TimeIndex read.

Real brokers' segments (every segment under SHARED_CORPUS/real, skipped when absent, and the
Apache-2.0 copies in tests/data/real):

* each segment opens read-only and passes ``sanity_check``; a missing index is accepted only
  where the shared MANIFEST says the file is ABSENT (or, for the copies, where only the ``.log``
  was copied), and then a copy is recovered and tested instead;
* ``translate_offset``, ``read`` and ``find_offset_by_timestamp`` agree with linear scans of the
  batches and records (on the broker's own indexes when present), on both index search paths
  (the plain one on a sample of targets); the Kafka 3.8 segments are checked the same way;
* the broker's indexes hold the invariants lookups rely on;
* the broker's ``.index``/``.timeindex`` equal what ``recover()`` rebuilds, or — for the segments
  listed in ``BROKER_HISTORY`` — what replaying the broker's history (restarts, a follower
  truncation) through LogSegment produces, byte for byte.

Oracles are written as plain scans; where a scan over every target would be quadratic they use
an equivalent bisect (asserted monotonic first) and are spot-checked against the literal scan.
Large segments are sampled for the costlier checks unless KAFKALOG_HYPOTHESIS_PROFILE=long.
"""

from __future__ import annotations

import bisect
import json
import os
import random
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, SHARED_CORPUS

from kafkalog import (
    CorruptIndexError,
    FileRecords,
    LogConfig,
    LogSegment,
    MemoryRecords,
    OffsetIndex,
    TimeIndex,
)
from kafkalog.segment import TimestampAndOffset
from kafkalog.filenames import offset_from_file

MIB = 1024 * 1024
CONFIG = LogConfig(index_interval_bytes=4096, segment_index_bytes=10 * MIB)
EXHAUSTIVE = os.environ.get("KAFKALOG_HYPOTHESIS_PROFILE", "quick") == "long"
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")

CORPUS38 = DATA / "kafka-3.8"
SEGMENTS38 = sorted(p.name for p in CORPUS38.iterdir() if p.is_dir()) if CORPUS38.is_dir() else []
REAL_SHARED = SHARED_CORPUS / "real"
REAL_COPIES = DATA / "real"


@pytest.fixture(params=["fast", "plain"])
def search_path(request, monkeypatch) -> str:
    """Both index search paths: the default one and Kafka's plain search."""
    if request.param == "plain":
        monkeypatch.setenv("KAFKALOG_INDEX_SEARCH", "plain")
    else:
        monkeypatch.delenv("KAFKALOG_INDEX_SEARCH", raising=False)
    return request.param


def _log38(name: str) -> Path:
    (log,) = (CORPUS38 / name).glob("*.log")
    return log


def _sibling(log: Path, ext: str, suffix: str = "") -> Path:
    """The file of the same segment with extension ``ext`` (``log`` may carry ``suffix``)."""
    stem = log.name[: -len(".log" + suffix)]
    return log.parent / f"{stem}{ext}{suffix}"


def _batch_bytes(log: Path):
    """Each batch of a log file as its own MemoryRecords, with its header."""
    with FileRecords.open(log) as fr:
        for batch in fr.batches():
            yield batch, MemoryRecords(fr.read(batch.position, batch.size_in_bytes))


# -- Kafka 3.8: appending and recovering reproduce Kafka's files ------------------------------------


@pytest.mark.parametrize("method", ["append_batches", "append"])
@pytest.mark.parametrize("name", SEGMENTS38)
def test_kafka38_appending_batches_reproduces_the_files(tmp_path, name, method) -> None:
    """Appending the corpus batches one at a time (as Kafka's LogSegment was driven) and closing
    gives Kafka's .log, .index and .timeindex byte for byte."""
    log = _log38(name)
    base = offset_from_file(log)
    seg = LogSegment.open(tmp_path, base, CONFIG)
    for batch, records in _batch_bytes(log):
        if method == "append_batches":
            seg.append_batches(records)
        else:
            seg.append(
                records,
                largest_offset=batch.last_offset,
                largest_timestamp=batch.max_timestamp,
                offset_of_max_timestamp=batch.last_offset,
            )
    seg.close()
    for ext in (".log", ".index", ".timeindex"):
        mine, kafkas = tmp_path / _sibling(log, ext).name, _sibling(log, ext)
        assert mine.read_bytes() == kafkas.read_bytes(), f"{name}: {ext} differs"
    txn = tmp_path / _sibling(log, ".txnindex").name
    assert not txn.exists() or txn.stat().st_size == 0  # appends alone index no transaction


@pytest.mark.parametrize("name", SEGMENTS38)
def test_kafka38_recover_rebuilds_every_index(tmp_path, name, search_path) -> None:
    """recover() of a copy of the .log alone truncates nothing and rebuilds .index, .timeindex
    and .txnindex byte for byte (the txnindex is absent or empty when Kafka wrote none); the
    recovered segment then translates every index entry's offset as a header scan does."""
    log = _log38(name)
    base = offset_from_file(log)
    shutil.copyfile(log, tmp_path / log.name)
    seg = LogSegment.open(tmp_path, base, CONFIG)
    assert seg.recover() == 0
    seg.close()
    for ext in (".log", ".index", ".timeindex"):
        assert (tmp_path / _sibling(log, ext).name).read_bytes() == _sibling(log, ext).read_bytes(), ext
    kafka_txn, my_txn = _sibling(log, ".txnindex"), tmp_path / _sibling(log, ".txnindex").name
    if kafka_txn.exists():
        assert my_txn.read_bytes() == kafka_txn.read_bytes()
    else:
        assert not my_txn.exists() or my_txn.stat().st_size == 0

    ro = LogSegment.open(tmp_path, base, CONFIG, read_only=True)
    ro.sanity_check()
    facts = _facts(tmp_path / log.name)
    for i in range(ro.offset_index.entries):
        entry = ro.offset_index.entry(i)
        for target in (entry.offset - 1, entry.offset, entry.offset + 1):
            assert ro.translate_offset(target) == facts.translate(target), (i, target)
    ro.close()


def _read_expected(path: Path) -> tuple[list[dict], dict]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    entries = [x for x in lines if x["type"] != "summary"]
    (summary,) = [x for x in lines if x["type"] == "summary"]
    return entries, summary


@pytest.mark.parametrize("name", SEGMENTS38)
def test_kafka38_index_entries_match_kafkas_reading(name, search_path) -> None:
    """OffsetIndex and TimeIndex read from the corpus files give Kafka's own entries."""
    log = _log38(name)
    base = offset_from_file(log)

    path = _sibling(log, ".index")
    expected, summary = _read_expected(path.with_name(path.name + ".expected.jsonl"))
    idx = OffsetIndex(path, base, 10 * MIB, writable=False)
    got = [
        {"type": "offsetIndexEntry", "i": i, "offset": e.offset, "position": e.position}
        for i, e in enumerate(idx.entry(k) for k in range(idx.entries))
    ]
    assert got == expected
    assert (idx.entries, idx.length) == (summary["entries"], summary["fileSize"])
    idx.sanity_check()
    idx.close()

    path = _sibling(log, ".timeindex")
    expected, summary = _read_expected(path.with_name(path.name + ".expected.jsonl"))
    tidx = TimeIndex(path, base, 10 * MIB, writable=False)
    got = [
        {"type": "timeIndexEntry", "i": i, "timestamp": e.timestamp, "offset": e.offset}
        for i, e in enumerate(tidx.entry(k) for k in range(tidx.entries))
    ]
    assert got == expected
    assert (tidx.entries, tidx.length) == (summary["entries"], summary["fileSize"])
    tidx.sanity_check()
    tidx.close()


def _replay(log: Path, base: int, directory: Path, events: list[tuple[int, str]] = ()) -> Path:
    """Append ``log``'s batches one at a time into ``directory`` as a broker does, applying
    ``events`` before the batch at each offset: ``"restart"`` (clean shutdown: close, which adds
    the final time entry, then reopen with a fresh byte counter and indexes resized back to
    segment.index.bytes, as Kafka's loader does for the active segment) or ``"truncate"``
    (LogSegment.truncate_to at that offset: the byte counter restarts, no time entry)."""
    pending = sorted(events)
    seg = LogSegment.open(directory, base, CONFIG)
    for batch, records in _batch_bytes(log):
        while pending and batch.base_offset >= pending[0][0]:
            offset, kind = pending.pop(0)
            if kind == "restart":
                seg.close()
                seg = LogSegment.open(directory, base, CONFIG)
                seg.resize_indexes(CONFIG.segment_index_bytes)
            elif kind == "truncate":
                assert seg.truncate_to(offset) == 0
            else:
                raise AssertionError(kind)
        seg.append_batches(records)
    seg.close()
    return directory


def test_kafka38_append_after_recover_counts_bytes_from_zero(tmp_path) -> None:
    """After a crash Kafka's loader opens a fresh LogSegment and recover()s it; recover() never
    touches bytesSinceLastIndexEntry, so appends after it count index.interval.bytes from 0,
    exactly as after a clean restart. (v1-none-random, crash after 30 batches.)"""
    log = _log38("v1-none-random")
    base = offset_from_file(log)
    pairs = list(_batch_bytes(log))
    k = 30

    crashed = tmp_path / "crashed"
    crashed.mkdir()
    with open(crashed / log.name, "wb") as fh:
        for _, records in pairs[:k]:
            fh.write(records.buffer)
    seg = LogSegment.open(crashed, base, CONFIG)
    assert seg.recover() == 0
    seg.resize_indexes(CONFIG.segment_index_bytes)
    for _, records in pairs[k:]:
        seg.append_batches(records)
    seg.close()

    restarted = tmp_path / "restarted"
    restarted.mkdir()
    _replay(log, base, restarted, [(pairs[k][0].base_offset, "restart")])

    assert (crashed / log.name).read_bytes() == log.read_bytes()
    for ext, fmt in ((".index", ">ii"), (".timeindex", ">qi")):
        name = _sibling(log, ext).name
        assert _entries(crashed / name, fmt) == _entries(restarted / name, fmt), ext
    # The restart does change the index: the check above is not vacuous.
    assert (restarted / _sibling(log, ".index").name).read_bytes() != _sibling(log, ".index").read_bytes()


# -- oracles -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What linear scans of a log file know: its batches (base, last, position, size, max
    timestamp) and its records (offset, timestamp, leader epoch) in file order."""

    bases: list[int]
    lasts: list[int]
    positions: list[int]
    sizes: list[int]
    max_timestamps: list[int]
    offsets: np.ndarray
    timestamps: np.ndarray
    epochs: list[int | None]
    size: int

    def scan_translate(self, target: int):
        """Literal scan: the first batch whose last offset is >= target."""
        for i, last in enumerate(self.lasts):
            if last >= target:
                return (last, self.positions[i], self.sizes[i])
        return None

    def translate(self, target: int):
        """The same as scan_translate, by bisect (last offsets strictly increase)."""
        i = bisect.bisect_left(self.lasts, target)
        return None if i == len(self.lasts) else (self.lasts[i], self.positions[i], self.sizes[i])

    def scan_timestamp(self, target: int, start: int):
        """Literal scan: the first record with timestamp >= target and offset >= start."""
        for i in range(len(self.offsets)):
            if self.timestamps[i] >= target and self.offsets[i] >= start:
                return TimestampAndOffset(int(self.timestamps[i]), int(self.offsets[i]), self.epochs[i])
        return None

    def timestamp_searcher(self, start: int):
        """scan_timestamp for a fixed start, by a running maximum (the first record reaching
        target is where the running maximum first reaches it)."""
        k0 = int(np.searchsorted(self.offsets, start, side="left"))
        running = np.maximum.accumulate(self.timestamps[k0:]) if k0 < len(self.offsets) else np.empty(0, np.int64)

        def find(target: int):
            j = int(np.searchsorted(running, target, side="left"))
            if j == len(running):
                return None
            i = k0 + j
            return TimestampAndOffset(int(self.timestamps[i]), int(self.offsets[i]), self.epochs[i])

        return find


_FACTS: dict[Path, Facts] = {}


def _facts(log: Path) -> Facts:
    log = log.resolve()
    if log not in _FACTS:
        bases, lasts, positions, sizes, maxts, offsets, timestamps, epochs = [], [], [], [], [], [], [], []
        with FileRecords.open(log) as fr:
            size = fr.size_in_bytes
            for batch in fr.batches(validate=True, strict=True):
                bases.append(batch.base_offset)
                lasts.append(batch.last_offset)
                positions.append(batch.position)
                sizes.append(batch.size_in_bytes)
                maxts.append(batch.max_timestamp)
                epoch = batch.partition_leader_epoch
                for record in batch.records():
                    offsets.append(record.offset)
                    timestamps.append(record.timestamp)
                    epochs.append(epoch if epoch is not None and epoch >= 0 else None)
        assert all(a < b for a, b in zip(lasts, lasts[1:])), "batch last offsets must increase"
        assert all(a < b for a, b in zip(offsets, offsets[1:])), "record offsets must increase"
        assert sum(sizes) == size, "the file must be whole batches"
        _FACTS[log] = Facts(
            bases,
            lasts,
            positions,
            sizes,
            maxts,
            np.array(offsets, dtype=np.int64),
            np.array(timestamps, dtype=np.int64),
            epochs,
            size,
        )
    return _FACTS[log]


def _sample(values: list[int], limit: int, rng: random.Random, keep: set[int] = frozenset()) -> list[int]:
    """All values when few (or in the long profile), else an even spread plus random ones plus ``keep``."""
    if EXHAUSTIVE or len(values) <= limit:
        return values
    step = max(1, len(values) // (limit // 2))
    chosen = set(values[::step]) | set(rng.sample(values, limit // 2)) | (set(values) & set(keep))
    return sorted(chosen)


# -- real brokers' segments -------------------------------------------------------------------------


def _absent_per_manifest() -> set[tuple[str, str, str]]:
    """(repository dir, partition dir, file name) of every file the shared MANIFEST marks ABSENT."""
    manifest = REAL_SHARED / "MANIFEST.md"
    absent: set[tuple[str, str, str]] = set()
    if not manifest.exists():
        return absent
    repo = partition = None
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"^## (\S+)\s*$", line):
            repo, partition = m.group(1), None
        elif m := re.match(r"^- `([^`]+)/` \(from ", line):
            partition = m.group(1)
        elif (m := re.match(r"^  - (\S+): ABSENT", line)) and repo and partition:
            absent.add((repo, partition, m.group(1)))
    return absent


ABSENT = _absent_per_manifest()


@dataclass(frozen=True)
class Source:
    """A segment to test: which corpus, its log file and its suffix ("" or ".swap")."""

    corpus: str  # "kafka-3.8", "shared" or "copy"
    log: Path
    suffix: str = ""

    @property
    def base(self) -> int:
        return offset_from_file(self.log)

    @property
    def key(self) -> str:
        """``<repo>/<partition>/<file>`` for the real corpora, the directory name for Kafka 3.8."""
        if self.corpus == "kafka-3.8":
            return self.log.parent.name
        return "/".join(self.log.parts[-3:])

    def index_paths(self) -> list[Path]:
        return [_sibling(self.log, ext, self.suffix) for ext in (".index", ".timeindex")]


def _real_sources() -> list:
    params = []
    for corpus, root in (("shared", REAL_SHARED), ("copy", REAL_COPIES)):
        if not root.is_dir():
            params.append(pytest.param(None, id=f"{corpus}-absent", marks=pytest.mark.skip(reason=f"{root} is absent")))
            continue
        logs = [(p, "") for p in root.rglob("*.log")] + [(p, ".swap") for p in root.rglob("*.log.swap")]
        for log, suffix in sorted(logs):
            source = Source(corpus, log, suffix)
            params.append(pytest.param(source, id=f"{corpus}:{source.key}"))
    return params


REAL = _real_sources()
# Sources with the broker's own index files (the others have nothing to compare).
REAL_WITH_INDEXES = [p for p in REAL if p.values[0] is None or all(x.exists() for x in p.values[0].index_paths())]
KAFKA38 = [pytest.param(Source("kafka-3.8", _log38(n)), id=f"kafka-3.8:{n}") for n in SEGMENTS38]


@dataclass(frozen=True)
class Prepared:
    """Where a source's segment files are tested: the original directory when its indexes are
    there and sane, else a recovered copy."""

    directory: Path
    recovered: bool
    missing: tuple[str, ...]


_PREPARED: dict[Source, Prepared] = {}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("segments")


def _prepare(source: Source, workspace: Path) -> Prepared:
    if source in _PREPARED:
        return _PREPARED[source]
    missing = tuple(p.name for p in source.index_paths() if not p.exists())
    if source.suffix and missing:
        pytest.skip(f"{source.key}: .swap segments are tested only with their indexes; missing {missing}")
    seg = LogSegment.open(source.log.parent, source.base, CONFIG, suffix=source.suffix, read_only=True)
    try:
        seg.sanity_check()
    except CorruptIndexError as err:
        assert missing, f"{source.key}: the broker's indexes exist but fail the sanity check: {err}"
        if source.corpus == "shared":
            repo, partition = source.log.parts[-3], source.log.parts[-2]
            unexplained = [name for name in missing if (repo, partition, name) not in ABSENT]
            assert not unexplained, f"{source.key}: {unexplained} missing but not ABSENT in the MANIFEST"
        else:
            # tests/data/real holds only the .log files (see its README).
            assert source.corpus == "copy" and not list(source.log.parent.glob("*index*"))
        copy = workspace / f"{len(_PREPARED)}-{source.log.parent.name}"
        copy.mkdir()
        shutil.copyfile(source.log, copy / source.log.name)
        rec = LogSegment.open(copy, source.base, CONFIG, suffix=source.suffix)
        assert rec.recover() == 0, "the MANIFEST found no trailing or truncated bytes"
        rec.close()
        assert (copy / source.log.name).read_bytes() == source.log.read_bytes()
        prepared = Prepared(copy, True, missing)
    else:
        assert not missing
        prepared = Prepared(source.log.parent, False, ())
    finally:
        seg.close()
    _PREPARED[source] = prepared
    return prepared


def _open(source: Source, prepared: Prepared) -> LogSegment:
    return LogSegment.open(prepared.directory, source.base, CONFIG, suffix=source.suffix, read_only=True)


@pytest.mark.parametrize("source", REAL)
def test_real_segment_opens_and_is_sane(source: Source, workspace) -> None:
    """Each real segment opens read-only and passes sanity_check (or, with an index ABSENT per
    the MANIFEST, its recovered copy does); next_offset is the end of its last batch."""
    prepared = _prepare(source, workspace)
    seg = _open(source, prepared)
    seg.sanity_check()
    facts = _facts(source.log)
    assert seg.size == facts.size
    assert seg.next_offset == (facts.lasts[-1] + 1 if facts.lasts else source.base)
    assert seg.offset_index.entries * 8 == seg.offset_index.length
    seg.close()


@pytest.mark.parametrize("source", KAFKA38 + REAL)
def test_translate_offset_and_read_agree_with_a_header_scan(source: Source, workspace, search_path) -> None:
    """For every offset from base-1 to next_offset and some beyond, translate_offset gives the
    first batch whose last offset is >= the target (as a scan of batch headers finds it), and
    read() starts its slice at that batch: one whole batch with min_one_message, the rest of
    the segment with a large max_size, nothing past max_position, None past the end."""
    prepared = _prepare(source, workspace)
    facts = _facts(source.log)
    seg = _open(source, prepared)
    base = source.base
    end = facts.lasts[-1] + 1 if facts.lasts else base
    assert seg.next_offset == end
    beyond = [end + 1, end + 2, end + 1000, base + 2**31 - 1, base + 2**31, base + 2**40]
    targets = list(range(base - 1, end + 1)) + beyond
    rng = random.Random(source.key)

    for t in rng.sample(targets, min(60, len(targets))):  # the bisect oracle is the scan
        assert facts.translate(t) == facts.scan_translate(t), t

    keep = {seg.offset_index.entry(i).offset + d for i in range(seg.offset_index.entries) for d in (-1, 0, 1)}
    keep |= set(beyond) | {base - 1, base, end}
    # Every target on the default path; a sample (always with the index entries) on the plain one.
    for t in targets if search_path == "fast" else _sample(targets, 1000, rng, keep):
        got = seg.translate_offset(t)
        want = facts.translate(t)
        assert (None if got is None else tuple(got)) == want, f"translate_offset({t})"

    for t in _sample(targets, 2000 if search_path == "fast" else 500, rng, keep):
        want = facts.translate(t)
        one = seg.read(t, 1)
        if want is None:
            assert one is None, t
            assert seg.read(t, 10**9) is None, t
            continue
        last, position, size = want
        first = next(iter(one.batches()))
        assert (first.position, first.last_offset, one.size_in_bytes) == (position, last, size), t
        rest = seg.read(t, 10**9)
        assert (next(iter(rest.batches())).position, rest.size_in_bytes) == (position, facts.size - position), t
        capped = seg.read(t, 10**9, max_position=position + size)
        assert capped.size_in_bytes == size, t
        assert seg.read(t, 0, min_one_message=False).size_in_bytes == 0, t
    seg.close()


@pytest.mark.parametrize("source", KAFKA38 + REAL)
def test_find_offset_by_timestamp_agrees_with_a_record_scan(source: Source, workspace, search_path) -> None:
    """For every distinct record timestamp ts (and ts-1, ts+1, min-1, max+1),
    find_offset_by_timestamp gives the first record, in log order, with timestamp >= target and
    offset >= starting_offset (the segment's base, and a middle offset), with its batch's leader
    epoch — what a scan of all records finds."""
    prepared = _prepare(source, workspace)
    facts = _facts(source.log)
    seg = _open(source, prepared)
    rng = random.Random(source.key)
    if len(facts.offsets) == 0:
        assert seg.find_offset_by_timestamp(0) is None
        assert seg.find_offset_by_timestamp(-1) is None
        seg.close()
        return

    distinct = sorted(set(facts.timestamps.tolist()))
    index_ts = {seg.time_index.entry(i).timestamp for i in range(seg.time_index.entries)}
    chosen = _sample(distinct, 1000 if search_path == "fast" else 300, rng, keep=index_ts | {distinct[0], distinct[-1]})
    targets = sorted({t + d for t in chosen for d in (-1, 0, 1)} | {distinct[0] - 1, distinct[-1] + 1})
    middle = int(facts.offsets[len(facts.offsets) // 2])

    for start in (None, middle):
        find = facts.timestamp_searcher(source.base if start is None else start)
        for t in rng.sample(targets, min(25, len(targets))):  # the running-max oracle is the scan
            assert find(t) == facts.scan_timestamp(t, source.base if start is None else start), t
        for t in targets:
            got = seg.find_offset_by_timestamp(t) if start is None else seg.find_offset_by_timestamp(t, starting_offset=start)
            assert got == find(t), f"find_offset_by_timestamp({t}, starting_offset={start})"
    seg.close()


# -- broker indexes against the rebuild ------------------------------------------------------------

# Segments whose broker-written indexes differ from a rebuild, with the broker history that
# reproduces them byte for byte. Kafka writes index entries as it appends; a *new* LogSegment
# object (after a restart) starts counting index.interval.bytes from 0, and its close() (clean
# shutdown) adds a final time-index entry for the largest timestamp so far; LogSegment.truncateTo
# (a follower truncating) also restarts the count. recover() rebuilds from the whole file as if
# appended in one go, so after such events the two legitimately differ. Producer-state snapshots
# (<offset>.snapshot, written at shutdown) mark most of these restarts.
BROKER_HISTORY: dict[str, tuple[list[tuple[int, str]], str]] = {
    "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/docker-connect-configs-0/00000000000000000000.log": (
        [(8, "restart")],
        "clean restart at log end 8 (snapshot 8): extra time entry (1728587409866, 7) from close()",
    ),
    "William0423__kafka/debug_topic-0/00000000000000000000.log": (
        [(30, "restart")],
        "clean restart at log end 30 (snapshot 30): extra time entry (1534299423772, 29) from close()",
    ),
    "William0423__kafka/__consumer_offsets-28/00000000000000000000.log": (
        [(142, "restart"), (1693, "restart"), (1715, "restart")],
        "clean restarts at 142, 1693, 1715 (snapshots 142, 1693, 1715): counter reset + close() time entries",
    ),
    "Kothapallyvinaykumargoud__Stock_market-batch-and-real-time/__consumer_offsets-20/00000000000000009368.log": (
        [(9447, "restart")],
        "clean restart at 9447 (snapshot 9447): counter reset + close() time entry (.., 9446)",
    ),
    "Kothapallyvinaykumargoud__Stock_market-batch-and-real-time/stock-market-batch1-0/00000000000000000000.log": (
        [(60, "restart"), (70, "restart")],
        "clean restarts at 60 (snapshot since deleted) and 70 (snapshot 70): counter resets + close() time entries",
    ),
    "greenlemonT__kafka-temp/__cluster_metadata-0/00000000000000000000.log": (
        [(21488, "truncate")],
        "KRaft node (3-node quorum, leader epoch 186 from 21482, snapshot 21482): the byte counter "
        "restarted at 21488 with no time entry, as LogSegment.truncateTo does for a follower",
    ),
}


def _entries(path: Path, fmt: str) -> list[tuple]:
    raw = path.read_bytes() if path.exists() else b""
    size = struct.calcsize(fmt)
    return [struct.unpack_from(fmt, raw, i) for i in range(0, len(raw), size)]


def _first_difference(a: list, b: list) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"{len(a)} vs {len(b)} entries, first difference at entry {i}: {a[i:i + 2]} vs {b[i:i + 2]}"


@pytest.mark.parametrize("source", REAL_WITH_INDEXES)
def test_broker_indexes_equal_the_rebuild_or_the_replayed_history(source: Source, workspace, tmp_path) -> None:
    """The broker's .index/.timeindex equal what recover() rebuilds on a copy of the .log; where
    they do not (BROKER_HISTORY), replaying the broker's restarts/truncation through LogSegment
    reproduces them byte for byte, so the difference is the broker's history, not a misreading."""
    prepared = _prepare(source, workspace)
    assert not prepared.recovered
    rebuilt = tmp_path / "rebuilt"
    rebuilt.mkdir()
    shutil.copyfile(source.log, rebuilt / source.log.name)
    seg = LogSegment.open(rebuilt, source.base, CONFIG, suffix=source.suffix)
    assert seg.recover() == 0
    seg.close()

    txn_broker = _sibling(source.log, ".txnindex", source.suffix)
    txn_mine = rebuilt / txn_broker.name
    assert (txn_mine.read_bytes() if txn_mine.exists() else b"") == (txn_broker.read_bytes() if txn_broker.exists() else b"")

    pairs = [(p, rebuilt / p.name) for p in source.index_paths()]
    same = all(broker.read_bytes() == mine.read_bytes() for broker, mine in pairs)
    if same:
        assert source.key not in BROKER_HISTORY, "the rebuild now matches: drop the BROKER_HISTORY entry"
        return
    differences = "; ".join(
        f"{broker.name}: {_first_difference(_entries(broker, fmt), _entries(mine, fmt))}"
        for (broker, mine), fmt in zip(pairs, (">ii", ">qi"))
        if broker.read_bytes() != mine.read_bytes()
    )
    assert source.key in BROKER_HISTORY, f"unexplained difference from the rebuild: {differences}"
    events, why = BROKER_HISTORY[source.key]
    replayed = tmp_path / "replayed"
    replayed.mkdir()
    _replay(source.log, source.base, replayed, events)
    for broker, _ in pairs:
        assert (replayed / broker.name).read_bytes() == broker.read_bytes(), f"{why}: replay does not reproduce {broker.name}"


@pytest.mark.parametrize("source", KAFKA38 + REAL_WITH_INDEXES)
def test_broker_indexes_hold_kafkas_invariants(source: Source, workspace) -> None:
    """What makes an index correct for lookups, checked on the broker's own files: offset entries
    point at batch starts with strictly increasing offsets and positions, each offset above every
    offset of the batches before its position; time entries have strictly increasing timestamps
    and non-decreasing offsets, each timestamp first reached (as a running maximum of batch max
    timestamps) in the batch holding its offset; a closed segment's time index ends with its
    largest timestamp."""
    prepared = _prepare(source, workspace)
    assert not prepared.recovered
    facts = _facts(source.log)
    seg = _open(source, prepared)
    at = {p: i for i, p in enumerate(facts.positions)}
    last_offset = facts.lasts[-1] if facts.lasts else source.base

    entries = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    for prev, cur in zip(entries, entries[1:]):
        assert cur.offset > prev.offset and cur.position > prev.position, (prev, cur)
    for e in entries:
        assert e.position in at, f"{e} does not point at a batch"
        i = at[e.position]
        assert i == 0 or facts.lasts[i - 1] < e.offset, e
        assert facts.lasts[i] <= e.offset <= last_offset, e

    running = np.maximum.accumulate(np.array(facts.max_timestamps, dtype=np.int64)) if facts.lasts else np.empty(0)
    times = [seg.time_index.entry(i) for i in range(seg.time_index.entries)]
    for prev, cur in zip(times, times[1:]):
        assert cur.timestamp > prev.timestamp and cur.offset >= prev.offset, (prev, cur)
    for e in times:
        k = bisect.bisect_left(facts.lasts, e.offset)
        assert k < len(facts.lasts) and facts.bases[k] <= e.offset, f"{e}: no batch holds this offset"
        assert running[k] == e.timestamp, f"{e}: the largest timestamp up to its batch is {running[k]}"
        assert k == 0 or running[k - 1] < e.timestamp, f"{e}: the timestamp was reached before its batch"
    if len(running) and running[-1] >= 0:
        assert times and times[-1].timestamp == running[-1], "a closed segment's last time entry is its max timestamp"
    seg.close()
