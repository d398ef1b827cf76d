"""A full disk (issue 16, item 1): appends fail with ``OSError(ENOSPC)`` instead of killing the
process with SIGBUS, the log stays consistent and readable, and appending works again once
space is freed; on a small tmpfs and a small ext4 file system.

Each scenario runs in a forked child, so a SIGBUS (the bug) fails the test instead of killing
the test run. The file systems need root (``mount``); the tests skip without it.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import signal
import subprocess
import traceback
from pathlib import Path

import pytest

from kafkalog import Compression, FileRecords, RecordBatchBuilder, TimestampType
from kafkalog.log_config import LogConfig
from kafkalog.index import OffsetIndex, TimeIndex
from kafkalog.log import Log
from kafkalog import verify_path

T0 = 1_700_000_000_000
MiB = 1 << 20


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.fixture(params=["tmpfs", "ext4"])
def small_fs(request, tmp_path) -> Path:
    """An 8 MiB tmpfs or a 16 MiB ext4 (on a loop device) mounted for the test, unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    mount_point = tmp_path / "fs"
    mount_point.mkdir()
    if request.param == "tmpfs":
        done = _run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount_point)])
    else:
        image = tmp_path / "ext4.img"
        with open(image, "wb") as f:
            f.truncate(16 * MiB)
        made = _run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)])
        if made.returncode:
            pytest.skip(f"mkfs.ext4 failed: {made.stderr.strip()}")
        done = _run(["mount", "-o", "loop", str(image), str(mount_point)])
    if done.returncode:
        pytest.skip(f"mount refused: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        _run(["umount", "-l", str(mount_point)])


def _isolated(fn, *args) -> None:
    """Run ``fn(*args)`` in a forked child; fail on its exception or its death by a signal."""
    ctx = multiprocessing.get_context("fork")

    def child() -> None:
        try:
            fn(*args)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)

    process = ctx.Process(target=child)
    process.start()
    process.join(120)
    if process.exitcode is None:
        process.kill()
        process.join()
        pytest.fail("the scenario did not finish in 120 s")
    if process.exitcode == -signal.SIGBUS:
        pytest.fail("the process was killed by SIGBUS")
    assert process.exitcode == 0, f"the scenario failed (exit code {process.exitcode}); see its traceback above"


def fill(fs: Path) -> Path:
    """Fill ``fs`` with a file (or add to it) until writes fail with ENOSPC; return the file."""
    path = fs / "filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for chunk, bound in ((MiB, 64), (4096, 8192), (512, 64)):
            data = bytes(chunk)
            for _ in range(bound):
                try:
                    if os.write(fd, data) < chunk:
                        break
                except OSError as e:
                    assert e.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return path


def _enospc(excinfo: pytest.ExceptionInfo) -> None:
    error = excinfo.value
    while error is not None and not (isinstance(error, OSError) and error.errno == errno.ENOSPC):
        error = error.__cause__
    assert error is not None, f"not ENOSPC: {excinfo.value!r}"


def _batch(offset: int, ts: int, n: int = 2) -> bytes:
    b = RecordBatchBuilder(2, Compression.NONE, TimestampType.CREATE_TIME, base_offset=offset)
    for i in range(n):
        b.append(b"k", b"v%d" % i, timestamp=ts)
    return bytes(b.build().buffer)


def _values(log: Log) -> list[tuple[int, int]]:
    out = []
    offset = log.log_start_offset
    for _ in range(100_000):
        if offset >= log.log_end_offset:
            break
        batches = list(log.read(offset, MiB).batches())
        assert batches, f"nothing read at {offset}"
        out.extend((r.offset, r.timestamp) for b in batches for r in b.records())
        offset = batches[-1].next_offset
    return out


# -- indexes -------------------------------------------------------------------------------------


def _index_fills_up(fs: Path, kind: str) -> None:
    index = (OffsetIndex if kind == "offset" else TimeIndex)(fs / "0.index", 0, MiB)
    add = (lambda n: index.append(n, n * 10)) if kind == "offset" else (lambda n: index.maybe_append(T0 + n, n))
    key = (lambda n: n) if kind == "offset" else (lambda n: T0 + n)
    add(1)  # the first page is allocated
    filler = fill(fs)
    n = 1
    with pytest.raises(OSError) as excinfo:
        for n in range(2, 4 * 4096):  # an entry on the second page needs a block
            add(n)
    _enospc(excinfo)
    held = index.entries
    assert held == n - 1 and held * index.entry_size <= 4096 + index.entry_size
    assert index.lookup(key(n - 1)) == ((n - 1, (n - 1) * 10) if kind == "offset" else (T0 + n - 1, n - 1))
    with pytest.raises(OSError):  # still full: still an error, still nothing counted
        add(n)
    assert index.entries == held
    filler.unlink()
    add(n)
    add(n + 1)
    assert index.entries == held + 2
    index.close()
    reopened = (OffsetIndex if kind == "offset" else TimeIndex)(fs / "0.index", 0, MiB)
    assert reopened.entries == held + 2  # trimmed to its entries on close
    assert reopened.lookup(key(n + 1)) == ((n + 1, (n + 1) * 10) if kind == "offset" else (T0 + n + 1, n + 1))
    reopened.close()


@pytest.mark.parametrize("kind", ["offset", "time"])
def test_index_entry_on_an_unallocated_page_is_enospc(small_fs, kind):
    """An entry that needs a new block of the sparse index file: ENOSPC, not SIGBUS; the entry
    is not counted and the index takes it once space is freed."""
    _isolated(_index_fills_up, small_fs, kind)


def _crash_left_index_reopened(fs: Path) -> None:
    index = OffsetIndex(fs / "0.index", 0, MiB)
    index.append(1, 10)
    index.close_handler()  # a crash: the file keeps its preallocated, unallocated length
    filler = fill(fs)
    with pytest.raises(OSError) as excinfo:
        OffsetIndex(fs / "0.index", 0, MiB).entries
    _enospc(excinfo)
    live = OffsetIndex.read_live(fs / "0.index", 0)  # reading never maps or allocates
    assert live.entries == 1 and live.entry(0) == (1, 10)
    filler.unlink()
    reopened = OffsetIndex(fs / "0.index", 0, MiB)
    assert reopened.entries == MiB // 8  # Kafka's rule: the length counts, until recovery resets it
    assert reopened.entry(0) == (1, 10) and reopened.entry(reopened.entries - 1) == (0, 0)
    reopened.close()


def test_crash_left_index_opened_on_a_full_disk_is_enospc(small_fs):
    """A preallocated index left by a crash, opened for writing on a full disk: reading its
    unallocated tail through the map would fault (tmpfs allocates on a read fault), so the
    open allocates it first and fails with ENOSPC."""
    _isolated(_crash_left_index_reopened, small_fs)


# -- the log file ----------------------------------------------------------------------------------


def _short_write_is_cut_off(fs: Path) -> None:
    records = FileRecords.open(fs / "0.log", create=True)
    first = _batch(0, T0)
    records.append(first)
    filler = fill(fs)
    os.truncate(filler, os.path.getsize(filler) - 3 * 4096)  # room for part of the next batch
    builder = RecordBatchBuilder(2, Compression.NONE, TimestampType.CREATE_TIME, base_offset=3)
    builder.append(b"k", os.urandom(64 * 1024), timestamp=T0)
    with pytest.raises(OSError) as excinfo:
        records.append(bytes(builder.build().buffer))
    _enospc(excinfo)
    assert records.size_in_bytes == len(first)
    assert os.path.getsize(fs / "0.log") == len(first)  # the part that landed is cut off again
    records.append(_batch(2, T0))
    assert [b.base_offset for b in records.batches(validate=True, strict=True)] == [0, 2]
    records.close()


def test_short_log_write_is_cut_off(small_fs):
    """A batch of which only part fits: ENOSPC, and the part written does not stay in the file."""
    _isolated(_short_write_is_cut_off, small_fs)


# -- the partition log ---------------------------------------------------------------------------------


def _log_disk_full(fs: Path, timestamps: str) -> None:
    directory = fs / "topic-0"
    # Every batch after the first gets an index entry; the log file's blocks are allocated up
    # front, so the first write to fail is an index entry on a new page.
    config = LogConfig(index_interval_bytes=0, segment_bytes=512 * 1024, preallocate=True)
    log = Log.open(directory, config, clock=lambda: T0)
    step = 1 if timestamps == "rising" else 0
    n = 0
    for n in range(20):  # the first index pages are allocated
        log.append(_batch(0, T0 + n * step))
    fd = os.open(directory / "00000000000000000000.log", os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, 512 * 1024)
    finally:
        os.close(fd)
    filler = fill(fs)
    acknowledged = log.log_end_offset
    with pytest.raises(OSError) as excinfo:
        for n in range(20, 4096):
            log.append(_batch(0, T0 + n * step))
            acknowledged = log.log_end_offset
    _enospc(excinfo)
    assert log.log_end_offset == acknowledged
    expected = _values(log)
    assert [o for o, _ in expected] == list(range(acknowledged))
    fill(fs)  # cutting the failed batch off the log gave its preallocated blocks back
    with pytest.raises(OSError):
        log.append(_batch(0, T0 + (n + 1) * step))
    assert _values(log) == expected
    filler.unlink()
    for i in range(3):
        log.append(_batch(0, T0 + (n + 2 + i) * step))
    after = _values(log)
    assert after[: len(expected)] == expected and len(after) == len(expected) + 6
    log.close()
    report = verify_path(directory, deep=True)
    assert report.ok, report.problems
    reopened = Log.open(directory, config, clock=lambda: T0)
    assert _values(reopened) == after
    reopened.close()


@pytest.mark.parametrize("timestamps", ["rising", "constant"])
def test_log_append_on_a_full_disk(small_fs, timestamps):
    """Log.append on a full disk: ENOSPC (with rising timestamps the time index fails after the
    offset index took the entry, which is removed again), every acknowledged record reads,
    appends work once space is freed, and the closed log verifies clean and reopens."""
    _isolated(_log_disk_full, small_fs, timestamps)


def _log_fills_up(fs: Path) -> None:
    directory = fs / "topic-0"
    config = LogConfig(index_interval_bytes=256, segment_bytes=256 * 1024)
    log = Log.open(directory, config, clock=lambda: T0)
    filler = fill(fs)
    os.truncate(filler, os.path.getsize(filler) - 64 * 1024)
    acknowledged = 0
    with pytest.raises(OSError) as excinfo:
        for n in range(100_000):
            log.append(_batch(0, T0 + n, n=8))
            acknowledged = log.log_end_offset
    _enospc(excinfo)
    assert log.log_end_offset == acknowledged
    assert [o for o, _ in _values(log)] == list(range(acknowledged))
    filler.unlink()
    log.append(_batch(0, T0 + 10**6, n=8))
    assert [o for o, _ in _values(log)] == list(range(acknowledged + 8))
    log.close()
    report = verify_path(directory, deep=True)
    assert report.ok, report.problems


def test_log_fills_the_disk(small_fs):
    """Appending until whatever fails first (log, index, a roll): ENOSPC and a consistent log."""
    _isolated(_log_fills_up, small_fs)
