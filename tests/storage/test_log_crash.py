"""Crash safety of the partition log: whatever ``flush()`` returned for survives a SIGKILL at any
instant, and reopening always succeeds.

* **Kill loop.** ``crash_writer.py`` appends (idempotent and plain batches, every codec, a new
  leader epoch per run), flushes, rolls and applies retention in a subprocess that is
  SIGKILLed at a random moment (while it writes, or while ``Log.open`` recovers the previous
  crash), over and over on the same directory. After each kill a copy of the directory is
  opened and checked by :func:`check_log` (every flushed offset present, the log a run of
  exactly the records the writer appended, indexes agreeing with the log, leader epochs and
  producer state agreeing with the batches, no temporary files), then appended to, closed and
  reopened cleanly. The original is left as the kill left it, so the next writer recovers it.
* **Torn tails and flipped bits** in the last segment: recovery truncates exactly at the first
  damaged batch and rebuilds the indexes; with the clean-shutdown marker present it trusts the
  files, as Kafka does.
* **The cleaner's swap**, interrupted between each of its renames: the log holds either the old
  records or the cleaned ones, never a mixture.
* **Disk full**: a write failing with ENOSPC leaves the log as it was and usable.
* **Checkpoints** that are truncated or garbage: reopening succeeds with the right content.

Iteration counts follow the hypothesis profile (``KAFKALOG_HYPOTHESIS_PROFILE``): 30 kills by
default, about 200 under ``long`` (where conftest's hang guard grows to 660 s per test).

The tests at the end of the file reproduce, deterministically (a simulated crash at the exact
point), bugs these tests found and that are now fixed.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import examples
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kafkalog import FileRecords, LogConfig, LogSegment, RecordBatchBuilder
from kafkalog.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkalog.filenames import DELETED_SUFFIX, log_file, offset_from_file
from kafkalog.log import CLEAN_SHUTDOWN_FILE, Log, OffsetOutOfRangeError

WRITER = Path(__file__).with_name("crash_writer.py")
_spec = importlib.util.spec_from_file_location("crash_writer", WRITER)
cw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cw)  # type: ignore[union-attr]

TP = "crash-0"
PID = cw.PRODUCER_ID
LONG = settings.default.max_examples > 60
#: Kills per writer variant: 3 variants x 10 = 30 by default, 3 x 67 = 201 under the long profile.
KILLS_PER_VARIANT = 67 if LONG else 10
TEMP_SUFFIXES = (".tmp", ".cleaned", ".swap", DELETED_SUFFIX)
#: Checkpoint files' temporaries a kill inside ``write_atomically`` leaves behind; nothing removes
#: them when the log is opened (see test_stray_checkpoint_tmp_files_are_removed_on_open), so
#: the kill loop tolerates them.
CHECKPOINT_TMP = {
    RECOVERY_POINT_OFFSET_CHECKPOINT + ".tmp",
    LOG_START_OFFSET_CHECKPOINT + ".tmp",
    LEADER_EPOCH_CHECKPOINT + ".tmp",
}
#: What the kill loop tolerates: nothing now (before the fixes, 20 of 180 kills left a checkpoint
#: .tmp and 8 an inconsistent epoch history; the tests at the end of the file pin them).
KNOWN_BUGS = dict(tolerate_checkpoint_tmp=False, lenient_epochs=False)


def _base_timestamp() -> int:
    """Record timestamps start here: near now, so no producer ever expires during a test."""
    return time.time_ns() // 1_000_000


# -- the checker -----------------------------------------------------------------------------------


def expected_record(offset: int, base_ts: int) -> tuple[bytes, bytes, int]:
    return cw.record_key(offset), cw.record_value(offset), cw.record_timestamp(offset, base_ts)


def stray_files(directory: Path, *, ignore: set[str] = frozenset()) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(TEMP_SUFFIXES) and p.name not in ignore)


def check_segment(segment: LogSegment, base_ts: int, *, last_time_entry: bool = True) -> list:
    """Check one segment's batches (valid, whole, expected content) and its indexes against
    them; return the batches."""
    batches = list(segment.log.batches(validate=True, strict=True))
    position = 0
    last_offset_at: dict[int, int] = {}  # batch position -> last offset
    new_max_at: dict[int, int] = {}  # last offset of a batch raising the max -> that max
    running_max, max_offset = -1, -1
    previous = segment.base_offset - 1
    for batch in batches:
        assert batch.position == position
        assert batch.magic == 2
        assert batch.base_offset > previous, f"offsets go backwards in {segment.log.path} at {position}"
        records = batch.records()
        assert records and records[0].offset >= batch.base_offset and records[-1].offset == batch.last_offset
        for record in records:
            key, value, ts = expected_record(record.offset, base_ts)
            assert (record.key, record.value, record.timestamp) == (key, value, ts), f"record {record.offset}"
        assert batch.max_timestamp == max(r.timestamp for r in records)
        last_offset_at[position] = batch.last_offset
        if batch.max_timestamp > running_max:
            running_max, max_offset = batch.max_timestamp, batch.last_offset
            new_max_at[batch.last_offset] = running_max
        previous = batch.last_offset
        position += batch.size_in_bytes
    assert position == segment.size, f"{segment.log.path}: {segment.size - position} bytes after the last batch"

    # Offset index: (last offset of a batch, position of that batch), both increasing.
    index = segment.offset_index
    prev = None
    for n in range(index.entries):
        entry = index.entry(n)
        assert last_offset_at.get(entry.position) == entry.offset, f"{index.path} entry {n} = {entry}"
        if prev is not None:
            assert entry.offset > prev.offset and entry.position > prev.position
        prev = entry
    # Time index: (max timestamp so far, last offset of the batch that reached it), increasing.
    tindex = segment.time_index
    prev = None
    for n in range(tindex.entries):
        entry = tindex.entry(n)
        assert new_max_at.get(entry.offset) == entry.timestamp, f"{tindex.path} entry {n} = {entry}"
        if prev is not None:
            assert entry.timestamp > prev.timestamp and entry.offset > prev.offset
        prev = entry
    if batches:
        if last_time_entry:
            assert tindex.entries and tuple(tindex.entry(tindex.entries - 1)) == (running_max, max_offset)
        assert (segment.max_timestamp_so_far, segment.offset_of_max_timestamp_so_far) == (running_max, max_offset)
        for batch in batches:
            found = segment.translate_offset(batch.base_offset)
            assert found is not None and found.position == batch.position
    assert segment.next_offset == (batches[-1].next_offset if batches else segment.base_offset)
    return batches


def check_log(
    log: Log,
    base_ts: int,
    *,
    flushed: int = 0,
    attempted: int | None = None,
    offsets: list[int] | None = None,
    just_opened: bool = True,
    tolerate_checkpoint_tmp: bool = False,
    lenient_epochs: bool = False,
) -> list[int]:
    """Check a log from top to bottom; return the offsets it holds.

    Args:
        flushed: every offset below it must be present (or below the log start offset).
        attempted: the log end offset may not exceed it.
        offsets: the exact offsets expected (a compacted log); by default a consecutive run from
            the first segment's base offset to the log end offset.
        just_opened: the log was just opened (every segment has its final time index entry, no
            file waits for deletion).
        tolerate_checkpoint_tmp: accept the checkpoints' ``.tmp`` files a kill leaves (a known bug).
        lenient_epochs: accept a leader epoch history that starts after the log start offset
            or has entries below it. A lost log start checkpoint leaves the first (the log
            starts earlier again, the history cannot); a kill while the log start offset moves
            leaves either (known bugs: see test_epoch_history_survives_a_kill_before_the_log_
            start_checkpoint and test_loader_truncates_epochs_at_the_log_start_it_computes).
    """
    segments = log.segments
    assert segments
    end, start = log.log_end_offset, log.log_start_offset
    held: list[int] = []
    all_batches = []
    for i, segment in enumerate(segments):
        active = i == len(segments) - 1
        if i:
            assert segment.base_offset > segments[i - 1].base_offset
            if offsets is None:
                assert segment.base_offset == segments[i - 1].next_offset, "segments do not follow each other"
        batches = check_segment(segment, base_ts, last_time_entry=just_opened or not active)
        if offsets is None and batches:
            assert batches[0].base_offset == segment.base_offset, f"{segment.log.path} starts elsewhere"
        if not active:
            assert batches, f"an empty segment {segment.log.path} before the active one"
            assert segment.offset_index.length == 8 * segment.offset_index.entries, "untrimmed offset index"
            assert segment.time_index.length == 12 * segment.time_index.entries, "untrimmed time index"
        for batch in batches:
            held.extend(r.offset for r in batch.records())
        all_batches.extend(batches)
    if offsets is None:
        first = segments[0].base_offset
        assert held == list(range(first, first + len(held))), "the offsets are not a consecutive run"
        assert end == first + len(held)
    else:
        assert held == list(offsets)
        assert end == segments[-1].next_offset
    assert segments[0].base_offset <= start <= end
    assert end >= flushed, f"flushed offsets lost: the log ends at {end}, {flushed} was flushed"
    if attempted is not None:
        assert end <= attempted, f"the log ends at {end} but the writer never appended beyond {attempted}"
    assert log.recovery_point <= end

    # Reads: the whole log from the start offset, in small pieces.
    rng = random.Random(end)
    offset, read = start, []
    while offset < end:
        slice_ = log.read(offset, rng.randint(1, 6000))
        batches = list(slice_.batches())
        assert batches, f"empty read at {offset} < {end}"
        assert batches[0].last_offset >= offset and (offsets is not None or batches[0].base_offset <= offset)
        for batch in batches:
            read.extend(r.offset for r in batch.records() if r.offset >= offset)
        offset = batches[-1].last_offset + 1
    assert read == [o for o in held if o >= start]
    assert log.read(end, 1000).size_in_bytes == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(end + 1, 1000)

    # Leader epochs: monotonic, within the log, and the epoch of every batch that carries one.
    entries = log.leader_epoch_cache.entries
    for a, b in zip(entries, entries[1:]):
        assert a.epoch < b.epoch and a.start_offset < b.start_offset
    for entry in entries:
        assert entry.start_offset < end, f"epoch entry {entry} at or after the log end {end}"
        if not lenient_epochs:
            assert entry.start_offset >= start, f"epoch entry {entry} below the log start {start}"
    lag_until = max(start, entries[0].start_offset if entries else end) if lenient_epochs else start
    for batch in all_batches:
        if batch.partition_leader_epoch >= 0 and batch.last_offset >= lag_until:
            at = max(batch.base_offset, lag_until)
            assert log.leader_epoch_cache.epoch_for_offset(at) == batch.partition_leader_epoch, (
                f"batch at {batch.base_offset} has epoch {batch.partition_leader_epoch}, the cache says "
                f"{log.leader_epoch_cache.epoch_for_offset(at)} ({entries})"
            )

    # Producer state: the last idempotent batch still in the log is what the state remembers.
    mine = [b for b in all_batches if b.producer_id == PID and b.last_offset >= start]
    if mine:
        last = mine[-1]
        entry = log.producer_state.last_entry(PID)
        assert entry is not None, f"producer {PID} forgotten (last batch at {last.base_offset})"
        assert (entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (
            last.producer_epoch,
            last.last_sequence,
            last.last_offset,
        )

    # Files: no temporary file left, every file belongs to a segment (or is a snapshot of one).
    directory = log.directory
    if just_opened:
        ignore = CHECKPOINT_TMP if tolerate_checkpoint_tmp else set()
        assert stray_files(directory, ignore=ignore) == []
        assert [p.name for p in directory.parent.iterdir() if p.name.endswith(".tmp") and p.name not in ignore] == []
    bases = {s.base_offset for s in segments}
    for path in directory.iterdir() if just_opened else ():
        name = path.name
        if name.endswith((".log", ".index", ".timeindex", ".txnindex")):
            assert offset_from_file(path) in bases, f"{name} belongs to no segment"
        elif name.endswith(".snapshot"):
            assert offset_from_file(path) in bases | {end}, f"stray snapshot {name}"
    for segment in segments:
        assert Path(segment.log.path) == log_file(directory, segment.base_offset)
    if just_opened:
        tp = (log.topic, log.partition)
        starts = OffsetCheckpointFile(directory.parent / LOG_START_OFFSET_CHECKPOINT).read()
        points = OffsetCheckpointFile(directory.parent / RECOVERY_POINT_OFFSET_CHECKPOINT).read()
        assert starts.get(tp) == start
        assert points.get(tp, 0) <= end
    return held


def append_batches(log: Log, rng: random.Random, n: int, base_ts: int, *, epoch: int | None = None) -> None:
    """Append ``n`` writer-style batches (content a function of the offset)."""
    for _ in range(n):
        end = log.log_end_offset
        count = rng.randint(1, 12)
        info = log.append(cw.build_batch(end, count, rng.choice(cw.CODECS), base_ts), leader_epoch=epoch)
        assert (info.first_offset, info.last_offset) == (end, end + count - 1)


def reopen_cycle(directory: Path, config: LogConfig, base_ts: int, **check) -> None:
    """Open (recovering), check, append, close, reopen cleanly (no recovery), check, close."""
    with Log.open(directory, config) as log:
        check_log(log, base_ts, **check)
        before = log.log_end_offset
        append_batches(log, random.Random(7), 3, base_ts, epoch=10_000)
        end = log.log_end_offset
    assert (directory.parent / CLEAN_SHUTDOWN_FILE).exists()
    assert stray_files(directory, ignore=CHECKPOINT_TMP) == [], "closing left files behind"
    check.pop("attempted", None)
    if check.get("offsets") is not None:
        check["offsets"] = list(check["offsets"]) + list(range(before, end))
    with Log.open(directory, config) as log:
        assert log.load_stats.recovered_segments == 0
        assert log.log_end_offset == end
        check_log(log, base_ts, **check)


def crash_copy(directory: Path, dest_root: Path) -> Path:
    """A copy of the log directory of ``directory``: taken while the log is open, it is the
    directory a crash would leave (without the clean-shutdown marker, which opening removed).

    The log's background thread may delete or rename files meanwhile (a flush after a roll
    replaces a checkpoint, a deleted segment's files go): a copy that saw a file vanish is
    taken again, and after a few tries the vanished files are left out, as a crash just after
    they went would leave them (``shutil.copytree`` instead fails on the first one)."""
    dest = dest_root / directory.parent.name
    for attempt in range(5):
        vanished: list[str] = []

        def copy(src: str, dst: str) -> None:
            try:
                shutil.copy2(src, dst)
            except FileNotFoundError:
                vanished.append(src)

        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(directory.parent, dest, copy_function=copy)
        if not vanished:
            break
    return dest / directory.name


# -- the kill loop ---------------------------------------------------------------------------------

VARIANTS = {
    # Small segments, dense indexes, immediate deletion.
    "small-segments": dict(segment_bytes=16 * 1024, index_interval_bytes=256, retention_bytes=64 * 1024),
    # Preallocated files, tiny index files (rolls on a full index), deletion in the background.
    "preallocate": dict(
        segment_bytes=64 * 1024,
        segment_index_bytes=1024,
        index_interval_bytes=400,
        retention_bytes=192 * 1024,
        preallocate=True,
        file_delete_delay_ms=20,
    ),
    # The flush policy flushes by itself; every batch after the first is indexed.
    "flush-policy": dict(
        segment_bytes=32 * 1024,
        index_interval_bytes=0,
        retention_bytes=96 * 1024,
        flush_messages=40,
        file_delete_delay_ms=3,
    ),
}


def _side_file_bounds(side: Path) -> tuple[int, int | None]:
    flushed, attempted = 0, None
    if side.exists():
        for line in side.read_text().splitlines():
            kind, _, value = line.partition(" ")
            if kind == "F":
                flushed = max(flushed, int(value))
            elif kind in ("A", "O"):
                attempted = max(attempted or 0, int(value))
    return flushed, attempted


def _run_writer_and_kill(directory: Path, side: Path, seed: int, run: int, options: dict, rng: random.Random) -> str:
    """Start the writer, SIGKILL it at a random moment; return how it ended."""
    during_open = rng.random() < 0.2
    finish = rng.random() < 0.08  # now and then the writer finishes and closes cleanly
    options = dict(options, _max_ops=rng.randint(5, 60) if finish else 10**7)
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(directory), str(side), str(seed), str(run), json.dumps(options)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wanted = "opening" if during_open else "ready"
        while True:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            if line.strip() == wanted:
                break
        if not finish:
            time.sleep(rng.uniform(0, 0.04) if during_open else rng.uniform(0, 0.3))
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode == -signal.SIGKILL:
        return "killed-opening" if during_open else "killed"
    assert proc.returncode == 0, f"the writer failed (run {run}, seed {seed}):\n{err}"
    return "finished"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_sigkill_at_random_moments(variant, tmp_path):
    seed = random.randrange(2**32) if LONG else sorted(VARIANTS).index(variant)
    rng = random.Random(seed)
    base_ts = _base_timestamp()
    options = dict(VARIANTS[variant], retention_ms=-1, _base_timestamp=base_ts)
    config = LogConfig(**{k: v for k, v in options.items() if not k.startswith("_")})
    logdir = tmp_path / "logdir"
    directory = logdir / TP
    side = tmp_path / "side"
    outcomes = []
    for run in range(1, KILLS_PER_VARIANT + 1):
        outcomes.append(_run_writer_and_kill(directory, side, seed, run, options, rng))
        if not directory.exists():
            continue  # killed before the directory was created
        flushed, attempted = _side_file_bounds(side)
        scratch = tmp_path / f"check-{run}"
        copy = crash_copy(directory, scratch)
        try:
            reopen_cycle(copy, config, base_ts, flushed=flushed, attempted=attempted, **KNOWN_BUGS)
        except Exception as e:
            where = f"variant {variant}, seed {seed}, run {run}, outcomes {outcomes}; the crashed copy is {scratch}"
            raise AssertionError(f"{where}: {type(e).__name__}: {e}") from e
        shutil.rmtree(scratch)
    # The original, as the last kill left it, recovers too.
    flushed, attempted = _side_file_bounds(side)
    reopen_cycle(directory, config, base_ts, flushed=flushed, attempted=attempted, **KNOWN_BUGS)
    assert outcomes.count("killed") + outcomes.count("killed-opening") >= len(outcomes) // 2


# -- torn tails and flipped bits -------------------------------------------------------------------

TAIL_CONFIG = LogConfig(segment_bytes=6 * 1024, index_interval_bytes=300, file_delete_delay_ms=0, retention_ms=-1)


class SimulatedCrash(BaseException):
    """Raised from inside the log to stop it at a chosen point, as a kill would."""


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A cleanly closed log of several segments, and facts about the batches of its last one."""
    root = tmp_path_factory.mktemp("pristine")
    directory = root / "logdir" / TP
    base_ts = _base_timestamp()
    with Log.open(directory, TAIL_CONFIG) as log:
        append_batches(log, random.Random(3), 50, base_ts, epoch=3)
        last = log.active_segment
        batches = [(b.position, b.size_in_bytes, b.base_offset, b.next_offset) for b in last.log.batches()]
        facts = dict(path=Path(last.log.path).name, base=last.base_offset, batches=batches, size=last.size)
    assert len(batches) >= 4 and len(list(directory.glob("*.log"))) >= 3
    return directory, base_ts, facts


def _damaged_copy(pristine, root: Path, *, marker: bool = False) -> tuple[Path, Path]:
    directory, _, facts = pristine
    dest = root / "logdir"
    shutil.copytree(directory.parent, dest)
    if not marker:
        (dest / CLEAN_SHUTDOWN_FILE).unlink()  # a crash never leaves it
    return dest / TP, dest / TP / facts["path"]


def _protected(offset_in_batch: int) -> bool:
    """Bytes of a v2 batch whose change recovery must notice: the length, the magic, the CRC and
    everything it covers. Not the base offset (bytes 0-7) nor the partition leader epoch (12-15),
    which the CRC leaves out, in Kafka as here."""
    return 8 <= offset_in_batch < 12 or offset_in_batch >= 16


def _expect_truncation_at(facts: dict, damaged_position: int) -> tuple[int, int]:
    """(bytes kept, log end offset) when the first damaged byte is at ``damaged_position``."""
    kept, end = 0, facts["base"]
    for position, size, _, next_offset in facts["batches"]:
        if position + size > damaged_position:
            break
        kept, end = position + size, next_offset
    return kept, end


def _assert_recovered_to(directory: Path, base_ts: int, facts: dict, kept: int, end: int, file_size: int) -> None:
    with Log.open(directory, TAIL_CONFIG) as log:
        assert log.log_end_offset == end
        assert log.active_segment.base_offset == facts["base"]
        assert log.active_segment.size == kept
        assert log.load_stats.truncated_bytes == file_size - kept
        assert log.load_stats.deleted_segments == 0
        check_log(log, base_ts)
    reopen_cycle(directory, TAIL_CONFIG, base_ts)


@examples(60)
@given(st.data())
def test_torn_tail_is_cut_at_the_first_incomplete_batch(pristine, data):
    _, base_ts, facts = pristine
    cut = data.draw(st.integers(0, facts["size"] - 1), label="cut")
    with tempfile.TemporaryDirectory() as tmp:
        directory, path = _damaged_copy(pristine, Path(tmp))
        os.truncate(path, cut)
        kept, end = _expect_truncation_at(facts, cut)
        _assert_recovered_to(directory, base_ts, facts, kept, end, cut)


@examples(60)
@given(garbage=st.one_of(st.binary(min_size=1, max_size=300), st.integers(1, 5000).map(bytes)))
def test_garbage_after_the_last_batch_is_cut(pristine, garbage):
    _, base_ts, facts = pristine
    with tempfile.TemporaryDirectory() as tmp:
        directory, path = _damaged_copy(pristine, Path(tmp))
        with open(path, "ab") as f:
            f.write(garbage)
        end = facts["batches"][-1][3]
        _assert_recovered_to(directory, base_ts, facts, facts["size"], end, facts["size"] + len(garbage))


@examples(60)
@given(st.data())
def test_damaged_bytes_in_the_last_batches_cut_the_log_there(pristine, data):
    """Flipped bits or a run of overwritten bytes (a torn page) in one of the last batches."""
    _, base_ts, facts = pristine
    batches = facts["batches"]
    position, size, _, _ = data.draw(st.sampled_from(batches[-4:]), label="batch")
    at = data.draw(st.integers(0, size - 1).filter(_protected), label="offset in batch")
    with tempfile.TemporaryDirectory() as tmp:
        directory, path = _damaged_copy(pristine, Path(tmp))
        original = path.read_bytes()
        content = bytearray(original)
        if data.draw(st.booleans(), label="flip"):
            for bit in data.draw(st.sets(st.integers(0, 7), min_size=1), label="bits"):
                content[position + at] ^= 1 << bit
        else:
            patches = st.one_of(st.binary(min_size=1, max_size=600), st.integers(1, 600).map(bytes))
            patch = data.draw(patches, label="patch")
            patch = patch[: len(content) - position - at]
            content[position + at : position + at + len(patch)] = patch
        # Only the first changed byte matters; it must be one recovery can notice.
        first = next((i for i in range(position + at, len(content)) if content[i] != original[i]), None)
        assume(first is not None)
        damaged = max(p for p, *_ in batches if p <= first)
        assume(_protected(first - damaged))
        path.write_bytes(bytes(content))
        kept, end = _expect_truncation_at(facts, damaged)
        _assert_recovered_to(directory, base_ts, facts, kept, end, len(content))


def test_damage_in_an_earlier_unflushed_segment_drops_the_segments_after_it(pristine, tmp_path):
    """Recovery from offset 0 (no recovery point checkpoint): a damaged batch in a middle
    segment ends the log there, and the segments after it go (they follow bytes that were
    never durable)."""
    _, base_ts, _ = pristine
    directory, _ = _damaged_copy(pristine, tmp_path)
    (directory.parent / RECOVERY_POINT_OFFSET_CHECKPOINT).unlink()
    logs = sorted(directory.glob("*.log"))
    victim = logs[len(logs) // 2]
    with FileRecords.open(victim) as records:
        batches = list(records.batches())
    target = batches[len(batches) // 2]
    content = bytearray(victim.read_bytes())
    content[target.position + target.size_in_bytes - 1] ^= 0x10  # the last byte of a record
    victim.write_bytes(bytes(content))
    with Log.open(directory, TAIL_CONFIG) as log:
        assert log.log_end_offset == target.base_offset
        assert log.active_segment.log.path == str(victim)
        assert log.load_stats.deleted_segments == len(logs) - len(logs) // 2 - 1
        assert log.load_stats.truncated_bytes == len(content) - target.position
        check_log(log, base_ts)
    assert sorted(directory.glob("*.log")) == logs[: len(logs) // 2 + 1]
    reopen_cycle(directory, TAIL_CONFIG, base_ts)


@pytest.mark.parametrize(
    "new_base, outcome",
    [
        pytest.param("backwards", "cut", id="backwards"),
        pytest.param("forwards", "kept", id="forwards-in-range"),
        pytest.param("overflow", "cut", id="beyond-the-segment-range"),
    ],
)
def test_flipped_base_offset_of_the_last_batch(pristine, tmp_path, new_base, outcome):
    """The base offset is outside the CRC (in Kafka too), so a flipped bit there is only caught
    when the offsets stop making sense: going backwards ends the valid data (kafkalog; Kafka
    drops the segment), a jump forwards within the segment's range reads as a compaction gap,
    and a jump beyond the segment's 32-bit range must end the valid data too."""
    _, base_ts, facts = pristine
    directory, path = _damaged_copy(pristine, tmp_path)
    position, size, base_offset, next_offset = facts["batches"][-1]
    value = {"backwards": facts["base"], "forwards": base_offset + 1000, "overflow": base_offset ^ (1 << 40)}[new_base]
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(struct.pack(">q", value))
    if outcome == "cut":
        kept, end = _expect_truncation_at(facts, position)
        with Log.open(directory, TAIL_CONFIG) as log:
            assert (log.log_end_offset, log.active_segment.size) == (end, kept)
            check_log(log, base_ts)
    else:
        with Log.open(directory, TAIL_CONFIG) as log:
            assert log.log_end_offset == next_offset + 1000
            assert log.active_segment.size == facts["size"]


def test_marker_present_means_no_recovery(pristine, tmp_path):
    """Kafka trusts the clean-shutdown marker and so does kafkalog: with it present nothing is
    validated. A torn tail behind a marker (something no crash leaves: the marker is written
    after everything was flushed) stays in the file, and the log end offset comes from a scan
    of batch headers from the last offset index entry, as Kafka's ``readNextOffset`` does: when
    the batch at that entry is the torn one, the log end falls back to the segment's base
    offset (Kafka's answer too). Without the marker the same files recover properly."""
    _, base_ts, facts = pristine
    directory, path = _damaged_copy(pristine, tmp_path, marker=True)
    with Log.open(directory, TAIL_CONFIG) as log:
        indexed_position = log.active_segment.offset_index.lookup(2**62).position
    assert indexed_position > 0
    os.truncate(path, indexed_position + 1)  # tear the batch the last index entry points at
    with Log.open(directory, TAIL_CONFIG) as log:
        assert log.load_stats.recovered_segments == 0 and log.load_stats.truncated_bytes == 0
        assert log.active_segment.size == indexed_position + 1  # the torn byte is still there
        assert log.log_end_offset == facts["base"]
    # The marker goes when a log opens, so a crash now would recover; simulate it.
    (directory.parent / CLEAN_SHUTDOWN_FILE).unlink()
    os.truncate(path, indexed_position + 1)
    kept, end = _expect_truncation_at(facts, indexed_position)
    _assert_recovered_to(directory, base_ts, facts, kept, end, indexed_position + 1)


# -- the cleaner's swap, interrupted -----------------------------------------------------------------

SWAP_CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=200, file_delete_delay_ms=0, retention_ms=-1)
SWAP_EPOCH = 4
INDEX_SUFFIXES = (".log", ".index", ".timeindex")


def _kept_by_cleaner(offset: int) -> bool:
    return offset % 3 != 1


@pytest.fixture(scope="module")
def swap_setup(tmp_path_factory):
    """Three segments [0, a), [a, b), [b, end), closed cleanly, and the cleaner's output for the
    first two: one segment at 0 holding every offset the cleaner keeps (gaps inside its
    batches, as compaction leaves them), written as ``.cleaned`` files with their indexes.

    Returns the directory, the base timestamp, the 20 file operations of Kafka's
    ``replaceSegments`` in order (``(name, new name)``, or ``(name, None)`` for a deletion),
    and the offsets the log holds before and after the swap."""
    root = tmp_path_factory.mktemp("swap")
    directory = root / "logdir" / TP
    base_ts = _base_timestamp()
    rng = random.Random(5)
    with Log.open(directory, SWAP_CONFIG) as log:
        for _ in range(2):
            append_batches(log, rng, 12, base_ts, epoch=SWAP_EPOCH)
            log.roll()
        append_batches(log, rng, 6, base_ts, epoch=SWAP_EPOCH)
        bases = [s.base_offset for s in log.segments]
        end = log.log_end_offset
    a, b = bases[1], bases[2]
    kept = [o for o in range(0, b) if _kept_by_cleaner(o)]
    cleaned = LogSegment.open(directory, 0, SWAP_CONFIG, suffix=".cleaned")
    for first in range(0, len(kept), 7):  # batches of up to 7 kept records, gaps inside
        group = kept[first : first + 7]
        builder = RecordBatchBuilder(magic=2, base_offset=group[0], partition_leader_epoch=SWAP_EPOCH)
        for o in group:
            key, value, ts = expected_record(o, base_ts)
            builder.append(key, value, timestamp=ts, offset=o)
        cleaned.append_batches(builder.build())
    cleaned.flush()
    cleaned.close()
    cleaned_files = sorted(p.name for p in directory.glob("*.cleaned"))
    assert cleaned_files == [f"{0:020d}{s}.cleaned" for s in (".index", ".log", ".timeindex")]

    def name(base: int, suffix: str) -> str:
        return f"{base:020d}{suffix}"

    steps: list[tuple[str, str | None]] = []
    # 1. the cleaned files become swap files (the log first, then its indexes)
    steps += [(name(0, s) + ".cleaned", name(0, s) + ".swap") for s in INDEX_SUFFIXES]
    # 2. the old segments' files are renamed .deleted, one segment after the other, and the
    #    producer snapshot of the one not replaced by a new segment of the same base
    for base in (0, a):
        steps += [(name(base, s), name(base, s) + DELETED_SUFFIX) for s in INDEX_SUFFIXES]
    steps.append((name(a, ".snapshot"), name(a, ".snapshot") + DELETED_SUFFIX))
    # 3. the swap files take their final names
    steps += [(name(0, s) + ".swap", name(0, s)) for s in INDEX_SUFFIXES]
    # 4. the .deleted files are deleted, later
    steps += [(old, None) for _, old in steps[3 : 3 + 7]]
    old_offsets = list(range(end))
    new_offsets = kept + list(range(b, end))
    return directory, base_ts, steps, old_offsets, new_offsets


def _swap_cases():
    """A crash after each prefix of the 20 steps (and before the first), with recovery from the
    checkpointed recovery point and from offset 0."""
    phases = (
        ["cleaned"]
        + ["cleaned-to-swap"] * 2
        + ["all-swap"]
        + ["old-to-deleted"] * 6
        + ["old-deleted"]
        + ["swap-to-final"] * 2
        + ["swapped"]
        + ["unlinking-deleted"] * 6
        + ["done"]
    )
    for k, phase in enumerate(phases):
        for recovery in ("checkpointed", "from-zero"):
            yield pytest.param(k, recovery, id=f"{k}-{phase}-{recovery}")


@pytest.mark.parametrize("k, recovery", list(_swap_cases()))
def test_crash_during_the_cleaners_swap(swap_setup, tmp_path, k, recovery):
    source, base_ts, steps, old_offsets, new_offsets = swap_setup
    assert len(steps) == 20
    dest = tmp_path / "logdir"
    shutil.copytree(source.parent, dest)
    directory = dest / TP
    (dest / CLEAN_SHUTDOWN_FILE).unlink()
    if recovery == "from-zero":
        (dest / RECOVERY_POINT_OFFSET_CHECKPOINT).unlink()
    for old, new in steps[:k]:
        if new is None:
            (directory / old).unlink()
        else:
            os.replace(directory / old, directory / new)
    # Until every cleaned file is a swap file the swap has not begun: the old segments stay.
    expected = old_offsets if k < 3 else new_offsets
    with Log.open(directory, SWAP_CONFIG) as log:
        held = check_log(log, base_ts, offsets=expected)
        assert held == expected
        assert [s.base_offset for s in log.segments][0] == 0
    reopen_cycle(directory, SWAP_CONFIG, base_ts, offsets=expected)


# -- disk full -------------------------------------------------------------------------------------

FULL_CONFIG = LogConfig(segment_bytes=12 * 1024, index_interval_bytes=200, file_delete_delay_ms=0, retention_ms=-1)


def _enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("failure", ["nothing-written", "short-write", "on-roll", "roll-preallocation"])
def test_disk_full_leaves_the_log_consistent_and_usable(failure, tmp_path, monkeypatch):
    """An OSError from a write (ENOSPC): the append raises, the log is as it was (offsets,
    reads, indexes, and the files a crash right now would leave), and once space is back the
    same batch appends at the same offset.

    ``nothing-written``: the write fails outright; ``short-write``: half the batch lands, then
    the write fails; ``on-roll``: the append rolls a new segment, then its write fails;
    ``roll-preallocation``: with ``preallocate``, reserving the new segment's file fails."""
    base_ts = _base_timestamp()
    directory = tmp_path / "logdir" / TP
    config = FULL_CONFIG.replace(preallocate=True) if failure == "roll-preallocation" else FULL_CONFIG
    log = Log.open(directory, config)
    rng = random.Random(11)
    append_batches(log, rng, 12, base_ts, epoch=1)
    log.flush()
    active = log.active_segment
    end = log.log_end_offset
    count = 3
    if failure in ("on-roll", "roll-preallocation"):
        # A batch that cannot fit the active segment: the append rolls first.
        while log.active_segment.size < config.segment_bytes // 2:
            append_batches(log, rng, 1, base_ts, epoch=1)
        end = log.log_end_offset
        count = 40
        active = log.active_segment
    batch = cw.build_batch(end, count, "NONE", base_ts)
    rolls = active.size + batch.size_in_bytes > config.segment_bytes
    assert rolls == (failure in ("on-roll", "roll-preallocation"))
    segments_before = [s.base_offset for s in log.segments]
    size_before = active.size

    real_pwrite, real_ftruncate = os.pwrite, os.ftruncate
    calls = {"n": 0}

    def pwrite(fd, data, position):
        calls["n"] += 1
        if failure == "short-write" and calls["n"] == 1:
            half = memoryview(data).cast("B")[: len(memoryview(data).cast("B")) // 2]
            return real_pwrite(fd, half, position)
        raise _enospc()

    def ftruncate(fd, length):
        # Reserving the new segment's space fails: only the preallocation grows a file there.
        if length == config.segment_bytes:
            raise _enospc()
        return real_ftruncate(fd, length)

    if failure == "roll-preallocation":
        monkeypatch.setattr(os, "ftruncate", ftruncate)
    else:
        monkeypatch.setattr(os, "pwrite", pwrite)
    with pytest.raises(OSError) as raised:
        log.append(batch, leader_epoch=1)
    assert raised.value.errno == errno.ENOSPC
    assert log.log_end_offset == end
    if not rolls:
        assert [s.base_offset for s in log.segments] == segments_before and active.size == size_before
    check_log(log, base_ts, just_opened=False)
    # A crash now leaves a directory that recovers to exactly this log.
    copy = crash_copy(directory, tmp_path / "crashed")
    monkeypatch.undo()
    reopen_cycle(copy, config, base_ts, flushed=end, attempted=end)

    info = log.append(batch, leader_epoch=1)
    assert (info.first_offset, info.last_offset) == (end, end + count - 1)
    check_log(log, base_ts, just_opened=False)
    append_batches(log, rng, 3, base_ts, epoch=1)
    final = log.log_end_offset
    log.close()
    reopen_cycle(directory, config, base_ts, flushed=final, attempted=final)


# -- damaged checkpoints ---------------------------------------------------------------------------

CKPT_CONFIG = LogConfig(segment_bytes=6 * 1024, index_interval_bytes=300, file_delete_delay_ms=0, retention_ms=-1)


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory):
    """A log with two leader epochs, an idempotent producer, a log start offset inside a
    segment after retention; as a clean shutdown leaves it and as a crash does (a copy taken
    while it is open, after a flush). Returns both log directories and the facts to expect."""
    root = tmp_path_factory.mktemp("checkpoints")
    directory = root / "clean" / TP
    base_ts = _base_timestamp()
    rng = random.Random(13)
    log = Log.open(directory, CKPT_CONFIG)
    append_batches(log, rng, 40, base_ts, epoch=1)
    sequence = 0
    for epoch in (1, 2):
        for _ in range(12):
            end = log.log_end_offset
            n = rng.randint(1, 10)
            batch = cw.build_batch(end, n, "LZ4", base_ts, producer_id=PID, producer_epoch=0, base_sequence=sequence)
            log.append(batch, leader_epoch=epoch)
            sequence += n
        append_batches(log, rng, 6, base_ts, epoch=epoch)
    segments = log.segments
    assert len(segments) >= 5
    log.delete_records(segments[2].base_offset + 3)
    log.delete_old_segments()
    assert log.segments[0].base_offset < log.log_start_offset
    log.flush()
    facts = dict(
        start=log.log_start_offset,
        end=log.log_end_offset,
        first_base=log.segments[0].base_offset,
        segments=len(log.segments),
        epochs=log.leader_epoch_cache.entries,
        producer=(log.producer_state.last_entry(PID).last_seq, log.producer_state.last_entry(PID).last_data_offset),
    )
    assert len(facts["epochs"]) == 2
    crashed = crash_copy(directory, root / "crash")
    log.close()
    return {"clean": directory, "crash": crashed}, base_ts, facts


def _cut_last_line(data: bytes) -> bytes:
    """A text file without its last line (the count line no longer matches); a binary one
    without its last bytes."""
    if data.endswith(b"\n") and b"\n" in data[:-1]:
        return data[: data.rindex(b"\n", 0, len(data) - 1) + 1]
    return data[:-7]


DAMAGES = {
    "empty": lambda data: b"",
    "cut": _cut_last_line,
    "half": lambda data: data[: len(data) // 2],
    "garbage": lambda data: b"\x00\xffnot a checkpoint\n\x07" * 3,
    "zeros": lambda data: bytes(len(data)),
}


def _damage(path: Path, how: str) -> None:
    path.write_bytes(DAMAGES[how](path.read_bytes()))


@pytest.mark.parametrize("shutdown", ["clean", "crash"])
@pytest.mark.parametrize("how", sorted(DAMAGES))
@pytest.mark.parametrize("which", ["recovery-point", "log-start", "leader-epoch", "snapshots", "all"])
def test_damaged_checkpoints_do_not_stop_reopening(checkpointed, tmp_path, which, how, shutdown):
    from kafkalog.producer_state.snapshot import read_snapshot

    dirs, base_ts, facts = checkpointed
    dest = tmp_path / "logdir"
    shutil.copytree(dirs[shutdown].parent, dest)
    directory = dest / TP
    targets = {
        "recovery-point": [dest / RECOVERY_POINT_OFFSET_CHECKPOINT],
        "log-start": [dest / LOG_START_OFFSET_CHECKPOINT],
        "leader-epoch": [directory / LEADER_EPOCH_CHECKPOINT],
        "snapshots": sorted(directory.glob("*.snapshot")),
    }
    targets["all"] = [p for paths in targets.values() for p in paths]
    assert targets[which]
    for path in targets[which]:
        _damage(path, how)
    start_lost = which in ("log-start", "all")
    # An empty leader-epoch-checkpoint is a valid empty history (Kafka creates the file empty):
    # it is taken as it is, and only the segments recovered put epochs back.
    history_lost = which in ("leader-epoch", "all") and how == "empty"
    with Log.open(directory, CKPT_CONFIG) as log:
        check_log(log, base_ts, flushed=facts["end"], attempted=facts["end"], lenient_epochs=start_lost or history_lost)
        assert log.log_end_offset == facts["end"]
        assert len(log.segments) == facts["segments"]
        # Without the log start checkpoint the log starts at its first segment (Kafka too).
        assert log.log_start_offset == (facts["first_base"] if start_lost else facts["start"])
        if shutdown == "crash" and which in ("recovery-point", "all"):
            # An unreadable recovery point checkpoint means recovery from offset 0: every segment.
            assert log.load_stats.recovered_segments == len(log.segments)
        if history_lost:
            pass
        elif not start_lost:
            assert log.leader_epoch_cache.entries == facts["epochs"]
        else:
            assert [e.epoch for e in log.leader_epoch_cache.entries] == [e.epoch for e in facts["epochs"]]
        entry = log.producer_state.last_entry(PID)
        assert entry is not None and (entry.last_seq, entry.last_data_offset) == facts["producer"]
        for snapshot in directory.glob("*.snapshot"):
            read_snapshot(snapshot)  # no damaged snapshot is left behind
    reopen_cycle(directory, CKPT_CONFIG, base_ts, flushed=facts["end"], lenient_epochs=start_lost or history_lost)


# -- known bugs, reproduced deterministically --------------------------------------------------------


def _stray_tmp_files(logdir: Path) -> list[str]:
    return sorted(str(p.relative_to(logdir)) for p in logdir.rglob("*.tmp"))


def _plant_tmp_files(directory: Path) -> None:
    """The temporaries a kill inside ``write_atomically`` (checkpoints) or ``write_snapshot``
    leaves, each with content that must never be read."""
    garbage = b"0\n1\ncrash 0 999999\n"
    (directory.parent / (RECOVERY_POINT_OFFSET_CHECKPOINT + ".tmp")).write_bytes(garbage)
    (directory.parent / (LOG_START_OFFSET_CHECKPOINT + ".tmp")).write_bytes(garbage)
    (directory / (LEADER_EPOCH_CHECKPOINT + ".tmp")).write_bytes(b"0\n1\n77 5\n")
    (directory / f"{10**6:020d}.snapshot.tmp").write_bytes(b"\x00\x01garbage")


def _closed_log(directory: Path, base_ts: int) -> None:
    with Log.open(directory, CKPT_CONFIG) as log:
        append_batches(log, random.Random(17), 20, base_ts, epoch=1)


def test_stray_tmp_files_are_never_read(tmp_path):
    base_ts = _base_timestamp()
    directory = tmp_path / "logdir" / TP
    _closed_log(directory, base_ts)
    with Log.open(directory, CKPT_CONFIG) as log:
        end, epochs = log.log_end_offset, log.leader_epoch_cache.entries
    _plant_tmp_files(directory)
    (directory.parent / CLEAN_SHUTDOWN_FILE).unlink()
    with Log.open(directory, CKPT_CONFIG) as log:
        assert (log.log_start_offset, log.log_end_offset) == (0, end)
        assert log.leader_epoch_cache.entries == epochs
        check_log(log, base_ts, tolerate_checkpoint_tmp=True)
        assert not list(directory.glob("*.snapshot.tmp"))  # the producer state cleans its own


def test_stray_checkpoint_tmp_files_are_removed_on_open(tmp_path):
    base_ts = _base_timestamp()
    directory = tmp_path / "logdir" / TP
    _closed_log(directory, base_ts)
    _plant_tmp_files(directory)
    (directory.parent / CLEAN_SHUTDOWN_FILE).unlink()
    with Log.open(directory, CKPT_CONFIG):
        left = _stray_tmp_files(directory.parent)
        assert left == [], f"left behind: {left}"


def test_epoch_history_survives_a_kill_before_the_log_start_checkpoint(tmp_path, monkeypatch):
    from kafkalog.log_directory import LogDir

    base_ts = _base_timestamp()
    directory = tmp_path / "logdir" / TP
    log = Log.open(directory, CKPT_CONFIG)
    append_batches(log, random.Random(19), 30, base_ts, epoch=1)
    log.flush()
    new_start = log.segments[1].base_offset + 2
    real = LogDir.write_offset

    def write_offset(self, file, tp, offset):
        if file is self.log_starts:
            raise SimulatedCrash  # killed before the new log start offset is on disk
        return real(self, file, tp, offset)

    monkeypatch.setattr(LogDir, "write_offset", write_offset)
    with pytest.raises(SimulatedCrash):
        log.delete_records(new_start)
    copy = crash_copy(directory, tmp_path / "crashed")
    monkeypatch.undo()
    log.close()
    with Log.open(copy, CKPT_CONFIG) as reopened:
        assert reopened.log_start_offset == 0  # the move was lost with the kill: fine
        # ... but the batches from 0 on were written in epoch 1, and the history must say so.
        check_log(reopened, base_ts)


def test_loader_truncates_epochs_at_the_log_start_it_computes(tmp_path, monkeypatch):
    from kafkalog.leader_epoch_cache import LeaderEpochFileCache

    base_ts = _base_timestamp()
    directory = tmp_path / "logdir" / TP
    config = CKPT_CONFIG.replace(retention_bytes=3 * CKPT_CONFIG.segment_bytes)
    log = Log.open(directory, config)
    rng = random.Random(23)
    append_batches(log, rng, 25, base_ts, epoch=1)
    append_batches(log, rng, 25, base_ts, epoch=2)
    log.flush()
    assert log.plan_retention().deletions

    def truncate_from_start(self, offset):
        raise SimulatedCrash  # killed after the segments went, before the epochs and checkpoint

    monkeypatch.setattr(LeaderEpochFileCache, "truncate_from_start", truncate_from_start)
    with pytest.raises(SimulatedCrash):
        log.delete_old_segments()
    copy = crash_copy(directory, tmp_path / "crashed")
    monkeypatch.undo()
    log.close()
    with Log.open(copy, config) as reopened:
        assert reopened.log_start_offset == reopened.segments[0].base_offset > 0
        check_log(reopened, base_ts)  # an epoch entry starts below the log start offset


def test_recovery_keeps_the_producers_the_configured_expiration_keeps(tmp_path):
    day = 24 * 60 * 60 * 1000
    base_ts = _base_timestamp() - 2 * day  # the producer's last write: two days ago
    expiration = {"producer_id_expiration_ms": 10 * day}
    directory = tmp_path / "logdir" / TP
    batch = cw.build_batch(0, 5, "NONE", base_ts, producer_id=PID, producer_epoch=0, base_sequence=0)
    log = Log.open(directory, CKPT_CONFIG, **expiration)
    log.append(batch)
    log.roll()
    append_batches(log, random.Random(29), 3, base_ts)
    log.flush()
    copy = crash_copy(directory, tmp_path / "crashed")
    log.close()
    # After a clean shutdown the producer is remembered, and its retry is known as a duplicate.
    with Log.open(directory, CKPT_CONFIG, **expiration) as reopened:
        assert reopened.producer_state.last_entry(PID) is not None
        assert reopened.append(batch).duplicate
    # After a crash too.
    with Log.open(copy, CKPT_CONFIG, **expiration) as reopened:
        assert reopened.load_stats.recovered_segments >= 1
        assert reopened.producer_state.last_entry(PID) is not None
        assert reopened.append(batch).duplicate


def test_a_failed_close_keeps_the_clean_shutdown_marker_away(tmp_path):
    base_ts = _base_timestamp()
    logdir = tmp_path / "logdir"
    for name in ("a-0", "b-0"):
        with Log.open(logdir / name, CKPT_CONFIG) as log:
            append_batches(log, random.Random(31), 2, base_ts)
    assert (logdir / CLEAN_SHUTDOWN_FILE).exists()
    a = Log.open(logdir / "a-0", CKPT_CONFIG)
    b = Log.open(logdir / "b-0", CKPT_CONFIG)
    append_batches(a, random.Random(37), 2, base_ts)

    def failing_flush(*args, **kwargs):
        raise OSError(errno.EIO, "fsync failed: the appended bytes may not be on disk")

    a.flush = failing_flush
    with pytest.raises(OSError):
        a.close()
    b.close()
    assert not (logdir / CLEAN_SHUTDOWN_FILE).exists(), "a-0 was not closed cleanly, yet it will not be recovered"
