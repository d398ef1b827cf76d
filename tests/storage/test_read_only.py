"""``Log.open(directory, read_only=True)`` (issue 19, item 3): a read-only open decides what a
writable open would -- recovery, swaps, stray files, producer state -- in memory, changes no byte,
name, size or mtime in the log directory, takes no lock file, lists the changes a writable open
would make, and refuses every mutator."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from pathlib import Path

import pytest
from conftest import DATA, SHARED_CORPUS

from kafkalog import ReadOnlyLogError, RecordBatchBuilder
from kafkalog.log_config import LogConfig
from kafkalog.errors import KafkalogError, LogClosedError
from kafkalog.log import CLEAN_SHUTDOWN_FILE, Log

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=100)


def listing(root: Path) -> dict[str, tuple]:
    """Every entry below ``root`` (directories too): kind, size, mtime and content hash."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
            out[str(path.relative_to(root))] = (path.is_dir(), st.st_size, st.st_mtime_ns, digest)
    return out


def partition_dirs(root: Path) -> list[Path]:
    return sorted({p.parent for p in root.rglob("*.log")}) if root.is_dir() else []


CORPUS = partition_dirs(DATA) + partition_dirs(SHARED_CORPUS)


def copy_partition(src: Path, logdir: Path) -> Path:
    """``src`` copied into ``logdir`` under a ``<topic>-<partition>`` name, writable."""
    name = src.name if src.name.rsplit("-", 1)[-1].isdigit() else f"{src.name}-0"
    dst = logdir / name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.jsonl", "*.json"))
    for dirpath, _, filenames in os.walk(logdir):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)
    return dst


def write_log(directory: Path) -> Path:
    """A cleanly closed partition: idempotent and transactional producers, two leader epochs,
    several segments (the last one active and non-empty)."""
    with Log.open(directory, CONFIG, clock=lambda: T0) as log:
        for i in range(24):
            b = RecordBatchBuilder(2, producer_id=7, producer_epoch=0, base_sequence=i * 2)
            for j in range(2):
                b.append(b"k%d" % (i % 5), b"v" * 30 + b"%d" % i, timestamp=T0 + i * 10 + j)
            log.append(b.build(), leader_epoch=0 if i < 12 else 3)
        t = RecordBatchBuilder(2, producer_id=9, producer_epoch=1, base_sequence=0, is_transactional=True)
        t.append(b"t", b"open transaction", timestamp=T0 + 500)
        log.append(t.build(), leader_epoch=3)
    return directory


def records(log: Log) -> list[bytes]:
    """Every batch from the log start to its end, as bytes (reading through ``Log.read``)."""
    out, offset = [], log.log_start_offset
    for _ in range(100_000):
        if offset >= log.log_end_offset:
            break
        batches = list(log.read(offset, 1 << 20).batches())
        if not batches:
            break
        out.extend(bytes(b.entry()) for b in batches)
        offset = batches[-1].next_offset
    return out


def facts(log: Log) -> dict:
    return {
        "records": records(log),
        "log_start_offset": log.log_start_offset,
        "log_end_offset": log.log_end_offset,
        "producers": dict(log.producer_state.active_producers),
        "first_unstable": log.producer_state.first_unstable_offset,
        "epochs": log.leader_epoch_cache.entries,
        "segments": [s.base_offset for s in log.segments],
        "aborted": log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset),
        "by_time": log.offset_for_timestamp(T0 + 100),
    }


def unclean(directory: Path) -> Path:
    """No clean-shutdown marker and stale checkpoints: the next open recovers every segment."""
    (directory.parent / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    (directory.parent / "recovery-point-offset-checkpoint").write_text(f"0\n1\n{directory.name[:-2]} 0 0\n")
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    return directory


def last_log(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


def _clean(d: Path) -> None:
    pass


def _unclean(d: Path) -> None:
    unclean(d)


def _torn(d: Path) -> None:
    unclean(d)
    path = last_log(d)
    os.truncate(path, path.stat().st_size - 7)


def _bit_flip(d: Path) -> None:
    unclean(d)
    path = sorted(d.glob("*.log"))[1]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _garbage_tail(d: Path) -> None:
    unclean(d)
    with open(last_log(d), "ab") as f:
        f.write(os.urandom(300))


def _missing_indexes(d: Path) -> None:
    first = sorted(d.glob("*.log"))[0]
    first.with_suffix(".index").unlink()
    first.with_suffix(".timeindex").unlink()


def _swap_and_cleaned_leftovers(d: Path) -> None:
    """A cleaner killed mid-swap (a ``.swap`` of segment 0) and mid-clean (``.cleaned`` files)."""
    logs = sorted(d.glob("*.log"))
    for suffix in (".log", ".index", ".timeindex"):
        src = logs[0].with_suffix(suffix)
        shutil.copyfile(src, src.with_name(src.name + ".swap"))
        src2 = logs[2].with_suffix(suffix)
        shutil.copyfile(src2, src2.with_name(src2.name + ".cleaned"))


def _stray_files(d: Path) -> None:
    """``.deleted`` files, an orphan index, temporary checkpoint and snapshot files, a corrupt
    leader-epoch checkpoint."""
    (d / "00000000000000099999.log.deleted").write_bytes(b"x" * 10)
    (d / "00000000000000088888.index").write_bytes(bytes(8))
    (d / "00000000000000000001.snapshot.tmp").write_bytes(b"partial")
    (d / "leader-epoch-checkpoint.tmp").write_text("0\n")
    (d.parent / "log-start-offset-checkpoint.tmp").write_text("0\n")
    (d / "leader-epoch-checkpoint").write_text("0\n2\nnot an entry\n")


def _empty_partition(d: Path) -> None:
    for path in list(d.iterdir()):
        path.unlink()


def _log_start_past_end(d: Path) -> None:
    (d.parent / "log-start-offset-checkpoint").write_text(f"0\n1\n{d.name[:-2]} 0 100000\n")


SYNTHETIC = {
    "clean": _clean,
    "unclean": _unclean,
    "torn": _torn,
    "bit-flip": _bit_flip,
    "garbage-tail": _garbage_tail,
    "missing-indexes": _missing_indexes,
    "swap-cleaned-leftovers": _swap_and_cleaned_leftovers,
    "stray-files": _stray_files,
    "empty": _empty_partition,
    "log-start-past-end": _log_start_past_end,
}


def make_synthetic(tmp_path: Path, kind: str) -> Path:
    directory = write_log(tmp_path / "logdir" / "orders-0")
    SYNTHETIC[kind](directory)
    return directory


def check_read_only_open_matches_a_writable_one(directory: Path, tmp_path: Path) -> None:
    twin = copy_partition(directory, tmp_path / "twin")
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", CLEAN_SHUTDOWN_FILE):
        if (directory.parent / name).exists():
            shutil.copyfile(directory.parent / name, twin.parent / name)
    logdir = directory.parent
    before = listing(logdir)
    with Log.open(directory, read_only=True, clock=lambda: T0) as log:
        assert log.read_only
        read_only = facts(log)
        pending = log.pending_changes
    assert listing(logdir) == before  # no .lock created where there was none, nothing rewritten
    with Log.open(twin, clock=lambda: T0) as log:
        writable = facts(log)
        assert log.pending_changes == []
    assert read_only == writable
    if listing(twin.parent) != before:  # the writable open changed something: it was said
        assert pending


@pytest.mark.parametrize("kind", list(SYNTHETIC))
def test_a_read_only_open_changes_nothing_and_sees_what_a_writable_open_does(tmp_path, kind) -> None:
    directory = make_synthetic(tmp_path, kind)
    check_read_only_open_matches_a_writable_one(directory, tmp_path)


@pytest.mark.timeout_guard(120)
@pytest.mark.skipif(not CORPUS, reason="no corpus")
def test_every_corpus_partition_opens_read_only_without_a_change(tmp_path) -> None:
    for i, src in enumerate(CORPUS):
        directory = copy_partition(src, tmp_path / f"c{i}" / "logdir")
        check_read_only_open_matches_a_writable_one(directory, tmp_path / f"c{i}")


def test_pending_changes_name_what_recovery_would_do(tmp_path) -> None:
    directory = make_synthetic(tmp_path, "torn")
    torn = last_log(directory)
    with Log.open(directory, read_only=True) as log:
        pending = log.pending_changes
        assert log.load_stats.truncated_bytes > 0
    assert any(line.startswith(f"would truncate {log.load_stats.truncated_bytes} bytes of {torn}") for line in pending)
    assert any(line.startswith("would rebuild the indexes of") for line in pending)
    assert any(line.startswith("would write producer snapshot") for line in pending)
    assert any("leader-epoch-checkpoint" in line for line in pending)


def test_leftovers_are_listed_as_deleted_or_renamed(tmp_path) -> None:
    directory = make_synthetic(tmp_path, "swap-cleaned-leftovers")
    with Log.open(directory, read_only=True) as log:
        pending = log.pending_changes
    assert any(line.startswith("would rename") and line.endswith(".log") for line in pending), pending
    assert any(line.startswith("would delete") and ".cleaned" in line for line in pending), pending


def test_a_clean_directory_needs_no_change_but_the_marker(tmp_path) -> None:
    directory = make_synthetic(tmp_path, "clean")
    with Log.open(directory, read_only=True) as log:
        pending = log.pending_changes
    assert not any("truncate" in line or "rebuild" in line for line in pending), pending
    assert any("clean-shutdown marker" in line for line in pending)


def test_mutators_refuse(tmp_path) -> None:
    directory = make_synthetic(tmp_path, "unclean")
    before = listing(directory.parent)
    batch = RecordBatchBuilder(2)
    batch.append(b"k", b"v", timestamp=T0)
    with Log.open(directory, read_only=True, config=LogConfig(retention_ms=1)) as log:
        segment = log.segments[0]
        attempts = {
            "append": lambda: log.append(batch.build()),
            "append_as_follower": lambda: log.append_as_follower(batch.build()),
            "roll": log.roll,
            "flush": log.flush,
            "truncate_to": lambda: log.truncate_to(1),
            "truncate_fully_and_start_at": lambda: log.truncate_fully_and_start_at(5),
            "delete_records": lambda: log.delete_records(1),
            "delete_old_segments": lambda: log.delete_old_segments(now_ms=T0 + 10**9),
            "checkpoint_cleaner_offset": lambda: log.checkpoint_cleaner_offset(3),
            "create_cleaned_segment": lambda: log.create_cleaned_segment(0),
            "replace_segments": lambda: log.replace_segments(segment, [segment], truncations=log.truncations),
            "delete": log.delete,
        }
        for name, attempt in attempts.items():
            with pytest.raises(ReadOnlyLogError, match="opened read-only"):
                attempt()
        assert log.delete_old_segments(now_ms=T0 + 10**9, dry_run=True).deletions  # a plan is fine
        assert records(log)
    assert listing(directory.parent) == before
    assert issubclass(ReadOnlyLogError, LogClosedError)


def test_a_missing_directory_is_refused_not_created(tmp_path) -> None:
    with pytest.raises(ReadOnlyLogError, match="no such partition directory"):
        Log.open(tmp_path / "nothing-0", read_only=True)
    assert not (tmp_path / "nothing-0").exists()


def test_a_writer_holding_the_lock_fails_a_read_only_open_clearly(tmp_path) -> None:
    directory = make_synthetic(tmp_path, "clean")
    lock = directory.parent / ".lock"
    lock.touch()
    fd = os.open(lock, os.O_RDWR)  # another open file description: conflicts as another process's would
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(KafkalogError, match="in use by another process"):
            Log.open(directory, read_only=True)
    finally:
        os.close(fd)
    before = listing(directory.parent)
    with Log.open(directory, read_only=True):  # a shared lock while open: a writer cannot start
        fd = os.open(lock, os.O_RDWR)
        try:
            with pytest.raises(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert listing(directory.parent) == before


def test_two_read_only_opens_and_a_writer_in_this_process(tmp_path) -> None:
    directory = make_synthetic(tmp_path, "clean")
    with Log.open(directory, read_only=True) as a, Log.open(directory, read_only=True) as b:
        assert records(a) == records(b)
    with Log.open(directory) as writer:
        expected = records(writer)
        with Log.open(directory, read_only=True) as reader:
            assert records(reader) == expected
