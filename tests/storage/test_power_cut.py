"""Crash consistency at a power cut: what ``flush()`` acknowledged survives, and recovery leaves a
log without holes that ``verify`` finds clean.

The harness wraps ``os.fsync`` and journals, at each fsync, a file's content (by inode) or a
directory's listing (name -> inode). "What a power cut leaves" at a given fsync is rebuilt from
the journal in a fresh directory: only the names whose directory entry was fsynced, each file
with its last fsynced content, or for a ``.log`` file a page-wise (4 KiB) mix of that and its
current content (the kernel may have written back any page, and either size). The rebuilt
directory is opened with ``Log.open`` and checked:

* every batch appended before a completed ``flush()`` is there, byte for byte (unless below
  the log start offset);
* the offsets run without a gap from the first batch to the log end offset;
* ``verify_path`` finds nothing wrong;
* producer state (last records of the producers, the first unstable offset) equals a full
  replay of the log from its start.

The workload is seeded and random: appends of every codec, idempotent and transactional
batches (committed and aborted), rolls, flushes, truncations, ``delete_records``, retention,
and the log's background tasks run late and out of order. A few hundred cuts run by default;
``KAFKALOG_POWER_CUTS=<n>`` runs a campaign of about ``n``.

Fixed by what these tests found first (issue 16): the trim of a segment rolled right after a
flush never reached the disk (:func:`test_roll_after_flush_makes_the_trim_durable`); a late
flush made a newer segment's name durable before the data below it
(:func:`test_a_late_roll_flush_does_not_publish_a_newer_segment_first`).
"""

from __future__ import annotations

import os
import random
import shutil
import stat
from pathlib import Path

import pytest

from kafkalog import Compression, ControlRecordType, LogConfig, RecordBatchBuilder
from kafkalog.checkpoint import RECOVERY_POINT_OFFSET_CHECKPOINT, OffsetCheckpointFile
from kafkalog.log import Log
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog import verify_path

PAGE = 4096


def _codecs() -> list[Compression]:
    found = []
    for codec in Compression:
        try:
            b = RecordBatchBuilder(compression=codec)
            b.append(b"k", b"v", timestamp=1)
            b.build()
        except Exception:  # codec library not installed
            continue
        found.append(codec)
    return found


CODECS = _codecs()


def _base_dir(tmp_path: Path) -> Path:
    """A tmpfs directory when there is one: tmpfs never reuses an inode number soon, which the
    journal (keyed by inode) relies on."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        import tempfile

        return Path(tempfile.mkdtemp(dir=shm, prefix="kafkalog-power-cut-"))
    return tmp_path


class FsyncJournal:
    """Records what each fsync made durable; :meth:`cut` rebuilds what a power cut leaves."""

    def __init__(self, log_dir: Path, rng: random.Random) -> None:
        self.log_dir = log_dir
        self.rng = rng
        self.files: dict[int, bytes] = {}  # inode -> content at its last fsync
        self.dirs: dict[str, dict[str, int]] = {}  # directory -> listing at its last fsync
        self.count = 0
        self.mix_logs = True  # False: every file exactly as last fsynced (the harshest cut)
        self.on_fsync = None  # called before each fsync takes effect (a cut point)

    def fsync(self, fd: int) -> None:
        self.count += 1
        if self.on_fsync is not None:
            self.on_fsync(self.count)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            path = os.readlink(f"/proc/self/fd/{fd}")
            with os.scandir(path) as entries:
                self.dirs[path] = {e.name: e.inode() for e in entries if e.is_file(follow_symlinks=False)}
        else:
            with open(f"/proc/self/fd/{fd}", "rb") as f:
                self.files[st.st_ino] = f.read()

    def cut(self, target: Path, partition: str) -> None:
        """Write what a power cut now leaves of the log directory into ``target``."""
        target.mkdir()
        for sub in ("", partition):
            source = self.log_dir / sub if sub else self.log_dir
            (target / sub).mkdir(exist_ok=True)
            listing = self.dirs.get(str(source), {})
            current = {}
            if source.is_dir():
                with os.scandir(source) as entries:
                    current = {e.inode(): e.path for e in entries if e.is_file(follow_symlinks=False)}
            for name, ino in listing.items():
                durable = self.files.get(ino, b"")
                if self.mix_logs and name.endswith(".log") and ino in current:
                    durable = self._mix(durable, Path(current[ino]).read_bytes())
                (target / sub / name).write_bytes(durable)

    def _mix(self, durable: bytes, now: bytes) -> bytes:
        """A page-wise mix of the durable and the current content, at either size."""
        if durable == now or self.rng.random() < 0.3:
            return durable if self.rng.random() < 0.5 else now
        size = self.rng.choice([len(durable), len(now)])
        out = bytearray(size)
        for page in range(0, size, PAGE):
            src = durable if self.rng.random() < 0.5 else now
            chunk = src[page : page + PAGE]
            out[page : page + len(chunk)] = chunk
        return bytes(out)


@pytest.fixture
def journal(tmp_path, monkeypatch):
    base = _base_dir(tmp_path)
    log_dir = base / "logs"
    log_dir.mkdir()
    j = FsyncJournal(log_dir, random.Random(0))
    monkeypatch.setattr(os, "fsync", j.fsync)
    yield j
    if base != tmp_path:
        shutil.rmtree(base, ignore_errors=True)


class Workload:
    """A seeded random workload on one log, remembering what each completed flush acknowledged."""

    def __init__(self, journal: FsyncJournal, seed: int) -> None:
        self.rng = rng = random.Random(seed)
        self.journal = journal
        self.partition = "t-0"
        self.config = LogConfig(
            segment_bytes=rng.choice([2048, 4096, 8192]),
            index_interval_bytes=rng.choice([64, 512, 4096]),
            segment_index_bytes=rng.choice([4096, 10 * 1024 * 1024]),
            preallocate=rng.random() < 0.4,
            file_delete_delay_ms=rng.choice([0, 60_000]),
            retention_bytes=rng.choice([-1, 6000]),
        )
        self.now = 1_700_000_000_000
        self.log = self._open()
        self.batches: dict[int, bytes] = {}  # base offset -> bytes as appended (in the log now)
        self.acked: dict[int, bytes] = {}  # what the last completed flush() covered
        self.tasks: list = []
        self.producers: dict[int, list[int]] = {}  # pid -> [epoch, next sequence]
        self.open_txns: set[int] = set()
        self.pid_base = 1000

    def _open(self) -> Log:
        log = Log.open(self.journal.log_dir / self.partition, self.config, clock=lambda: self.now)
        log._scheduler.schedule = lambda delay, task: self.tasks.append(task)  # run late, by the workload
        return log

    def _append(self, records, **kw) -> None:
        log = self.log
        first = log.append(records, **kw).first_offset
        if first < 0:
            return
        segment = log.active_segment
        found = segment.translate_offset(first)
        assert found is not None
        for batch in segment.log.slice(found.position).batches():
            self.batches[batch.base_offset] = segment.log.read(batch.position, batch.size_in_bytes)

    def step(self) -> None:
        rng, log = self.rng, self.log
        self.now += rng.randrange(0, 50)
        op = rng.random()
        if op < 0.45:
            self._append_batch()
        elif op < 0.55:
            self._end_txn()
        elif op < 0.62:
            log.roll()
        elif op < 0.75:
            log.flush()
            self.acked = dict(self.batches)
        elif op < 0.85 and self.tasks:
            # the background flushes and deletions, late and in any order
            i = rng.randrange(len(self.tasks))
            self.tasks.pop(i)()
        elif op < 0.89:
            self._truncate()
        elif op < 0.93:
            bases = [b for b in self.batches if b >= log.log_start_offset]
            if bases:
                target = rng.choice(bases) + rng.randrange(0, 2)
                log.delete_records(min(target, log.log_end_offset))
        elif op < 0.97:
            log.delete_old_segments()
        else:
            self._append_batch()

    def _truncate(self) -> None:
        log = self.log
        bases = sorted(b for b in self.batches if b > log.log_start_offset)
        if not bases:
            return
        to = self.rng.choice(bases[-5:])
        # Truncated records are no longer owed, from the call on (a cut may come inside it).
        for b in [b for b in self.batches if b >= to]:
            del self.batches[b]
            self.acked.pop(b, None)
        log.truncate_to(to)
        # simplest producer bookkeeping: new producer ids from here on
        self.producers.clear()
        self.open_txns.clear()
        self.pid_base += 10

    def _append_batch(self) -> None:
        rng = self.rng
        kind = rng.random()
        codec = rng.choice(CODECS)
        n = rng.randrange(1, 6)
        if kind < 0.4:
            builder = RecordBatchBuilder(compression=codec)
        else:
            transactional = kind > 0.7
            pid = self.pid_base + rng.randrange(4) + (5 if transactional else 0)
            epoch, seq = self.producers.setdefault(pid, [0, 0])
            builder = RecordBatchBuilder(
                compression=codec,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                is_transactional=transactional,
            )
            self.producers[pid][1] = seq + n
            if transactional:
                self.open_txns.add(pid)
        for i in range(n):
            value = rng.randbytes(rng.choice([3, 40, 300]))
            builder.append(f"k{rng.randrange(20)}".encode(), value, timestamp=self.now + i)
        self._append(builder.build())

    def _end_txn(self) -> None:
        if not self.open_txns:
            return
        pid = self.rng.choice(sorted(self.open_txns))
        self.open_txns.discard(pid)
        control = self.rng.choice([ControlRecordType.COMMIT, ControlRecordType.ABORT])
        marker = RecordBatchBuilder.end_transaction_marker(
            control, producer_id=pid, producer_epoch=self.producers[pid][0], coordinator_epoch=0, timestamp=self.now
        )
        self._append(marker, origin=AppendOrigin.COORDINATOR)


def check_cut(directory: Path, partition: str, config: LogConfig, acked: dict[int, bytes]) -> None:
    """Open a power cut's leftovers and check the invariants (see the module docstring)."""
    part = directory / partition
    log = Log.open(part, config, clock=lambda: 1_700_000_100_000)
    try:
        start, end = log.log_start_offset, log.log_end_offset
        previous = None
        held: dict[int, bytes] = {}
        for segment in log.segments:
            for batch in segment.log.batches():
                if previous is not None:
                    assert batch.base_offset == previous, f"a hole in the offsets: {previous}..{batch.base_offset}"
                previous = batch.last_offset + 1
                held[batch.base_offset] = segment.log.read(batch.position, batch.size_in_bytes)
        assert end == (previous if previous is not None else log.segments[-1].base_offset), (end, previous)
        for base, data in sorted(acked.items()):
            if base >= start:
                assert base in held, f"flushed batch at {base} lost (log [{start}, {end}))"
                assert held[base] == data, f"flushed batch at {base} changed"
        state = _producer_state(log)
    finally:
        log.close()
    report = verify_path(directory)
    assert report.ok, [str(p) for p in report.problems]
    # A full replay from the log start agrees with the state recovery built from snapshots.
    replay = directory.with_name(directory.name + "-replay")
    shutil.copytree(directory, replay)
    for snapshot in (replay / partition).glob("*.snapshot"):
        snapshot.unlink()
    (replay / ".kafka_cleanshutdown").unlink(missing_ok=True)
    OffsetCheckpointFile(replay / RECOVERY_POINT_OFFSET_CHECKPOINT).write({})
    log = Log.open(replay / partition, config, clock=lambda: 1_700_000_100_000)
    try:
        replayed = _producer_state(log)
        assert _same_state(replayed, state), f"producer state {state} differs from a full replay {replayed}"
    finally:
        log.close()
        shutil.rmtree(replay)


def _producer_state(log: Log) -> tuple:
    start = log.log_start_offset
    last = {
        pid: (r.last_data_offset, r.producer_epoch)
        for pid, r in log.last_records_of_active_producers().items()
        # Producers with no data at or after the log start may or may not be known (a state
        # rebuilt from the log start does not see them; one from older snapshots does).
        if r.last_data_offset is not None and r.last_data_offset >= start
    }
    # Open transactions with data at or after the log start. One begun below the log start is
    # known from its first batch after it to a state rebuilt from the log start (Kafka's
    # truncateAndReload drops the snapshots at or below it), and from its true start to a
    # state loaded from an older snapshot: both stand as None here.
    ongoing = {}
    for pid, first in log.producer_state.ongoing_txns.items():
        if first >= start:
            ongoing[pid] = first
        elif pid in last:
            ongoing[pid] = None
    return last, ongoing


def _same_state(a: tuple, b: tuple) -> bool:
    (last_a, open_a), (last_b, open_b) = a, b
    if last_a != last_b or open_a.keys() != open_b.keys():
        return False
    return all(x == y or x is None or y is None for x, y in ((open_a[p], open_b[p]) for p in open_a))


def run_campaign(journal: FsyncJournal, seed: int, steps: int, cuts_wanted: int, tmp: Path) -> int:
    """One seeded workload with ``cuts_wanted`` power cuts at random fsyncs; returns the cuts checked."""
    journal.count = 0
    work = Workload(journal, seed)
    rng = random.Random(seed ^ 0x5EED)
    journal.rng = random.Random(seed)
    pending: list[tuple[Path, dict[int, bytes]]] = []
    probability = cuts_wanted / max(1, steps * 2)

    def maybe_cut(count: int) -> None:
        if len(pending) < cuts_wanted and rng.random() < probability:
            target = tmp / f"cut-{seed}-{count}"
            journal.cut(target, work.partition)
            pending.append((target, dict(work.acked)))

    journal.on_fsync = maybe_cut
    try:
        for _ in range(steps):
            work.step()
        journal.on_fsync = None
        target = tmp / f"cut-{seed}-end"
        journal.cut(target, work.partition)
        pending.append((target, dict(work.acked)))
    finally:
        journal.on_fsync = None
        while work.tasks:  # what the log's scheduler runs at close
            work.tasks.pop(0)()
        work.log.close()
    for target, acked in pending:
        try:
            check_cut(target, work.partition, work.config, acked)
        except AssertionError as e:
            raise AssertionError(f"seed {seed}, cut {target.name}: {e}") from e
        shutil.rmtree(target)
    return len(pending)


# -- the bugs it found, deterministically --------------------------------------------------------


def _plain(n: int, ts: int = 1_700_000_000_000) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(n):
        builder.append(b"k%d" % i, b"v" * 20, timestamp=ts + i)
    return builder.build()


def _open_capturing(path: Path, config: LogConfig) -> tuple[Log, list]:
    """A log whose background tasks wait in a list, to be run when (and if) the test says."""
    log = Log.open(path, config, clock=lambda: 1_700_000_000_000)
    tasks: list = []
    log._scheduler.schedule = lambda delay, task: tasks.append(task)
    return log, tasks


def _acked(log: Log) -> dict[int, bytes]:
    return {
        b.base_offset: s.log.read(b.position, b.size_in_bytes) for s in log.segments for b in s.log.batches()
    }


def test_roll_after_flush_makes_the_trim_durable(journal):
    """Issue 16 item 2: flush() then roll(): the background flush found the recovery point at
    the new base already and returned, so the trim of the rolled segment (and its last time
    index entry) never reached the disk; after a power cut its preallocated zeros were trusted."""
    journal.mix_logs = False
    log, tasks = _open_capturing(journal.log_dir / "t-0", LogConfig(preallocate=True, segment_bytes=64 * 1024))
    for _ in range(3):
        log.append(_plain(4))
    log.flush()
    log.roll()
    while tasks:
        tasks.pop(0)()
    log.append(_plain(2))
    log.flush()
    acked = _acked(log)
    journal.cut(journal.log_dir.parent / "cut", "t-0")
    log.close()
    check_cut(journal.log_dir.parent / "cut", "t-0", log.config, acked)


def test_a_late_roll_flush_does_not_publish_a_newer_segment_first(journal):
    """Issue 16 item 3: the flush of the first roll ran after the second roll and fsynced the
    directory, making the newest segment's name durable while the data of the one between
    never was: offsets 10..19 missing, log end 20."""
    journal.mix_logs = False
    log, tasks = _open_capturing(journal.log_dir / "t-0", LogConfig())
    log.append(_plain(10))
    log.roll()
    log.append(_plain(10))
    log.roll()
    log.append(_plain(10))
    tasks.pop(0)()  # the first roll's flush, late
    journal.cut(journal.log_dir.parent / "cut", "t-0")
    log.close()
    check_cut(journal.log_dir.parent / "cut", "t-0", log.config, {})


def test_recovery_drops_the_segments_after_a_hole(tmp_path, caplog):
    """Issue 16 item 3: recovery does not trust a segment sequence whose offsets do not continue."""
    part = tmp_path / "t-0"
    log = Log.open(part, LogConfig())
    for _ in range(3):
        log.append(_plain(10))
        log.roll()
    log.close()
    # What a power cut leaves when the name of segment 20 reached the disk but not the data of 10.
    (part / "00000000000000000010.log").write_bytes(b"")
    (tmp_path / ".kafka_cleanshutdown").unlink()
    OffsetCheckpointFile(tmp_path / RECOVERY_POINT_OFFSET_CHECKPOINT).write({("t", 0): 10})
    with Log.open(part, LogConfig()) as log:
        assert log.log_end_offset == 10
        assert [s.base_offset for s in log.segments] == [0, 10]
        assert log.load_stats.deleted_segments == 2
    assert "00000000000000000010.log ends at offset 10" in caplog.text
    assert "00000000000000000020.log, begins at 20" in caplog.text
    assert verify_path(tmp_path).ok


def test_verify_agrees_with_recovery_on_a_transaction_begun_below_the_log_start(tmp_path):
    """Issue 16 item 4: the log start offset (after delete_records) lies inside a segment that
    recovery replays, and a transaction began in the segment before it. Recovery reloads
    producer state from the log start (Kafka's truncateAndReload drops the snapshots at or
    below it), so the transaction's ABORT indexes nothing; verify called that an error."""
    part = tmp_path / "logs" / "t-0"
    log, tasks = _open_capturing(part, LogConfig())
    log.append(_plain(5))
    txn = RecordBatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    for i in range(3):
        txn.append(b"t", b"x", timestamp=1_700_000_000_000 + i)
    log.append(txn.build())  # offsets 5..7
    log.roll()
    while tasks:
        tasks.pop(0)()  # the recovery point reaches 8, and its checkpoint
    log.append(_plain(4))  # 8..11
    marker = RecordBatchBuilder.end_transaction_marker(
        ControlRecordType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=1_700_000_000_100
    )
    log.append(marker, origin=AppendOrigin.COORDINATOR)  # 12
    assert log.delete_records(10) == 10
    # A SIGKILL now: the files as they are, no clean-shutdown marker.
    copy = tmp_path / "killed"
    shutil.copytree(tmp_path / "logs", copy, ignore=shutil.ignore_patterns(".lock"))
    log.close()
    with Log.open(copy / "t-0", LogConfig()) as recovered:
        assert recovered.load_stats.recovered_segments >= 1
        assert recovered.log_start_offset == 10
    report = verify_path(copy)
    assert report.ok, [str(p) for p in report.problems]


# -- the campaign ----------------------------------------------------------------------------


_PER_WORKLOAD = 10  # random cuts per workload, plus one at its end
_GROUPS = 10  # the campaign is split into this many tests (each within the hang guard)


def _workloads_per_group() -> int:
    """About 300 cuts by default; ``KAFKALOG_POWER_CUTS`` asks for more."""
    wanted = int(os.environ.get("KAFKALOG_POWER_CUTS", "300"))
    return max(1, -(-wanted // ((_PER_WORKLOAD + 1) * _GROUPS)))


_WORKLOADS = _workloads_per_group()


@pytest.mark.timeout_guard(20 + 8 * _WORKLOADS)
@pytest.mark.parametrize("group", range(_GROUPS))
def test_power_cut_campaign(journal, group):
    seed0 = int(os.environ.get("KAFKALOG_POWER_CUT_SEED", "0")) + group * _WORKLOADS
    checked = 0
    descriptors = len(os.listdir("/proc/self/fd"))
    for seed in range(seed0, seed0 + _WORKLOADS):
        shutil.rmtree(journal.log_dir)
        journal.log_dir.mkdir()
        journal.files.clear()
        journal.dirs.clear()
        checked += run_campaign(journal, seed, steps=120, cuts_wanted=_PER_WORKLOAD, tmp=journal.log_dir.parent)
    print(f"power cuts checked: {checked} in {_WORKLOADS} workloads from seed {seed0}")
    assert checked >= _WORKLOADS
    # Every log opened (the workload's, each cut's, each replay's) was closed with all its files.
    assert len(os.listdir("/proc/self/fd")) == descriptors
