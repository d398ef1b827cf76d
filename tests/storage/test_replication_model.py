"""A replicated-log model: three replicas of one partition, each a real ``Log(replicated=True)``
in its own log directory, driven through the library's follower calls by seeded random
schedules (replayable from the printed seed).

The model plays the broker's half (kept minimal, in the test): a controller that elects leaders
with increasing epochs (clean from the ISR; unclean when allowed), the leader's ISR and
high-watermark rule (the minimum log end offset of the in-sync replicas), produce with
``acks=all`` and ``min.insync.replicas=2`` (refused below it), an idempotent producer that
retries unacknowledged batches, a transactional producer, follower fetches (OffsetsForLeaderEpoch
truncation, KIP-320 diverging epochs, high watermark and log start propagation), ISR shrink and
expand, ``delete_records``, clean restarts, kills (files as they are) and power cuts (only what
was fsynced, torn ``.log`` tails: the power-cut harness of ``test_power_cut.py``).

After every step:

- every record that was below a leader's high watermark is, on every later leader elected
  cleanly, at the same offset with the same bytes (unless below that leader's log start);
- the in-sync replicas hold the same batches, byte for byte, below the leader's high watermark;
- each replica's leader-epoch cache agrees with the epochs its batches carry;
- a follower that finished truncating holds a prefix of the leader's log;
- reads with ``HIGH_WATERMARK`` isolation return only committed records, and reads with
  ``TXN_COMMITTED`` none of a transaction that is open or whose marker is not committed;
- a replica reopened after a clean close has the same log end offset, high watermark and epochs.

With the follower truncating to its high watermark instead of by leader epoch (before KIP-101)
the same schedules lose committed records: :func:`test_truncating_to_the_high_watermark_loses_data`
shows that the invariants have teeth.

``KAFKALOG_REPLICATION_SCHEDULES=<n>`` runs ``n`` schedules per core and test (default 50).
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from test_power_cut import FsyncJournal, _base_dir

from kafkalog import ControlRecordType, LogConfig, RecordBatchBuilder
from kafkalog.checkpoint import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from kafkalog.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
)
from kafkalog.follower import (
    Truncation,
    append_fetched,
    apply_leader_offsets,
    fetch_offset_after_out_of_range,
    truncate,
    truncation_for,
)
from kafkalog.local_log import FetchIsolation
from kafkalog.log import Log
from kafkalog.producer_state.manager import AppendOrigin

SCHEDULES = int(os.environ.get("KAFKALOG_REPLICATION_SCHEDULES", "50"))
STEPS = 160
MIN_ISR = 2
TP = "t-0"


#: How often each step is taken.
WEIGHTS = {
    "produce": 25, "transaction": 7, "fetch": 37, "flush": 5, "shrink": 3, "delete_records": 3,
    "stop": 7, "start": 6, "bounce": 4, "elect": 3, "fetch_lost": 2,
}
#: Quick follower restarts and leader kills: what pre-KIP-101 truncation loses data under.
FAULTY = {
    "produce": 20, "fetch": 35, "crash_after_fetch": 10, "stop_leader": 6, "start": 10, "bounce": 6, "shrink": 2,
    "elect": 2,
}


class InvariantBroken(AssertionError):
    pass


def batches_of(log: Log, start: int, end: int, isolation: FetchIsolation = FetchIsolation.LOG_END):
    """The batches holding offsets [start, end), across segments."""
    offset = max(start, log.log_start_offset)
    while offset < min(end, log.log_end_offset):
        data = log.read(offset, 1 << 30, max_offset=end, isolation=isolation)
        last = None
        for batch in data.batches():
            last = batch.last_offset
            yield batch
        if last is None:
            return
        offset = last + 1


def records_of(log: Log, start: int, end: int) -> dict[int, tuple[bytes | None, bytes | None, int]]:
    """offset -> (key, value, partition leader epoch) of the records in [start, end)."""
    out = {}
    for batch in batches_of(log, start, end):
        for r in batch:
            if start <= r.offset < end:
                out[r.offset] = (r.key, r.value, batch.partition_leader_epoch)
    return out


def make_durable(directory: Path) -> None:
    """fsync every file and directory below ``directory`` (the power-cut journal records them)."""
    for path in sorted(directory.rglob("*")) + [directory]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Replica:
    def __init__(self, rid: int, base: Path, config: LogConfig) -> None:
        self.rid = rid
        self.log_dir = base / f"broker{rid}"
        self.log_dir.mkdir()
        self.config = config
        self.log: Log | None = None
        self.truncating = True  # a follower truncates before it fetches
        self.open()

    def open(self) -> None:
        self.log = Log.open(self.log_dir / TP, self.config, replicated=True, clock=lambda: 1_700_000_000_000)
        # Kafka's producer snapshots hold no completed transactions: a transaction completed
        # before a (re)open counts as decided after it, whether its marker is committed or not
        # (ProducerStateManager's unreplicated transactions live in memory only).
        self.opened_end = self.log.log_end_offset

    @property
    def alive(self) -> bool:
        return self.log is not None


class Model:
    """One seeded schedule."""

    def __init__(self, seed: int, base: Path, journal: FsyncJournal, *, by_epoch: bool = True,
                 unclean: bool = False, weights: dict[str, float] | None = None) -> None:
        self.rng = random.Random(seed)
        self.weights = weights or WEIGHTS
        self.seed = seed
        self.base = base
        self.journal = journal
        self.by_epoch = by_epoch
        self.unclean = unclean
        config = LogConfig(segment_bytes=self.rng.choice([1024, 4096]), index_interval_bytes=256,
                           file_delete_delay_ms=0)
        self.replicas = [Replica(i, base, config) for i in range(3)]
        self.leader: int | None = None
        self.epoch = -1
        self.isr: set[int] = {0, 1, 2}  # a new partition: every replica in sync
        self.follower_leo: dict[int, int] = {}
        self.committed: dict[int, tuple] = {}  # offset -> record, once below a leader's HW
        self.clean_since_commit = True  # every election since the records were committed clean
        # A power cut of the last in-sync replica loses what it had not fsynced: that is the
        # loss of every in-sync replica, which Kafka's guarantee does not cover.
        self.all_isr_lost = False
        self.counter = 0
        self.pid, self.producer_epoch, self.seq = 1, 0, 0
        self.pending: bytes | None = None  # the unacknowledged idempotent batch, retried until acked
        self.pending_last = -1
        self.txn_pid, self.txn_open = 2, False
        self.txn_seq = 0
        self.trace: list[str] = []
        self.elect(clean=True)

    # -- the controller ------------------------------------------------------------------------

    def elect(self, *, clean: bool) -> bool:
        alive = [r.rid for r in self.replicas if r.alive]
        candidates = [i for i in alive if i in self.isr]
        if not candidates:
            if clean or not alive:
                return False  # offline until an in-sync replica returns
            candidates = alive
            self.clean_since_commit = False  # an unclean election may lose committed records
        self.leader = self.rng.choice(candidates)
        self.epoch += 1
        leader = self.replicas[self.leader]
        if self.all_isr_lost:
            # Keep the committed records this leader still has, up to the first one it lost.
            have = records_of(leader.log, 0, leader.log.log_end_offset)
            kept = {}
            for offset in sorted(self.committed):
                if offset >= leader.log.log_start_offset and have.get(offset) != self.committed[offset]:
                    break
                kept[offset] = self.committed[offset]
            self.committed, self.all_isr_lost = kept, False
        leader.log.maybe_assign_epoch_start_offset(self.epoch, leader.log.log_end_offset)
        leader.truncating = False
        self.isr = {i for i in self.isr if self.replicas[i].alive} | {self.leader}
        self.follower_leo = {}
        for r in self.replicas:
            if r.rid != self.leader:
                r.truncating = True
        self.trace.append(f"elect {self.leader} epoch {self.epoch} isr {sorted(self.isr)}")
        return True

    # -- the leader ------------------------------------------------------------------------------

    def leader_log(self) -> Log | None:
        if self.leader is None or not self.replicas[self.leader].alive:
            return None
        return self.replicas[self.leader].log

    def advance_hw(self) -> None:
        log = self.leader_log()
        if log is None:
            return
        ends = [log.log_end_offset] + [self.follower_leo.get(i, -1) for i in self.isr if i != self.leader]
        hw = min(ends)
        if hw > log.high_watermark:
            log.maybe_increment_high_watermark(hw)
        self.note_committed(log)
        if self.pending is not None and log.high_watermark > self.pending_last >= 0:
            self.pending = None  # acks=all: acknowledged once the high watermark passes it

    def note_committed(self, log: Log) -> None:
        hw = log.high_watermark
        start = max(log.log_start_offset, max(self.committed, default=-1) + 1)
        for offset, record in records_of(log, start, hw).items():
            self.committed.setdefault(offset, record)

    def produce(self) -> None:
        log = self.leader_log()
        if log is None:
            return
        if len(self.isr) < MIN_ISR:
            self.trace.append("produce refused: NOT_ENOUGH_REPLICAS")
            return
        if self.pending is None:
            b = RecordBatchBuilder(producer_id=self.pid, producer_epoch=self.producer_epoch, base_sequence=self.seq)
            for _ in range(self.rng.randint(1, 4)):
                self.counter += 1
                b.append(b"k%d" % (self.counter % 5), b"v%d" % self.counter, timestamp=1_700_000_000_000)
            self.seq += b.count
            self.pending = bytes(b.build().buffer)
        try:
            info = log.append(self.pending, leader_epoch=self.epoch)
        except (OutOfOrderSequenceError, InvalidProducerEpochError):
            # The leader lost this producer's earlier batches (an unclean election): a real
            # producer bumps its epoch and starts its sequences again.
            self.producer_epoch += 1
            self.seq, self.pending = 0, None
            self.trace.append("produce: producer reset")
            return
        self.pending_last = info.last_offset
        self.trace.append(f"produce {info.first_offset}..{info.last_offset}{' (duplicate)' if info.duplicate else ''}")
        self.advance_hw()

    def transaction_step(self) -> None:
        log = self.leader_log()
        if log is None or len(self.isr) < MIN_ISR:
            return
        if not self.txn_open or self.rng.random() < 0.5:
            b = RecordBatchBuilder(producer_id=self.txn_pid, producer_epoch=0, base_sequence=self.txn_seq,
                                   is_transactional=True)
            self.counter += 1
            b.append(b"t", b"t%d" % self.counter, timestamp=1_700_000_000_000)
            try:
                log.append(b.build(), leader_epoch=self.epoch)
            except (OutOfOrderSequenceError, InvalidProducerEpochError, InvalidTxnStateError):
                self.txn_pid += 10  # a lost transaction: the producer starts over as another one
                self.txn_seq, self.txn_open = 0, False
                return
            self.txn_seq += 1
            self.txn_open = True
        else:
            kind = self.rng.choice([ControlRecordType.COMMIT, ControlRecordType.ABORT])
            marker = RecordBatchBuilder.end_transaction_marker(
                kind, producer_id=self.txn_pid, producer_epoch=0, coordinator_epoch=0, timestamp=1_700_000_000_000
            )
            log.append(marker, leader_epoch=self.epoch, origin=AppendOrigin.COORDINATOR)
            self.txn_open = False
        self.advance_hw()

    # -- followers -------------------------------------------------------------------------------

    def fetch(self, rid: int, *, response_lost: bool = False) -> None:
        leader = self.leader_log()
        follower = self.replicas[rid]
        if leader is None or rid == self.leader or not follower.alive:
            return
        log = follower.log
        if follower.truncating:
            self.truncate_follower(follower, leader)
            return
        # KIP-320: the leader checks the follower's last fetched epoch first.
        if log.latest_epoch is not None:
            try:
                diverging = leader.diverging_epoch(log.log_end_offset, log.latest_epoch)
            except OffsetOutOfRangeError:
                offset = fetch_offset_after_out_of_range(
                    log, leader_log_start_offset=leader.log_start_offset, leader_log_end_offset=leader.log_end_offset
                )
                self.trace.append(f"fetch {rid}: out of range, from {offset}")
                return
            if diverging is not None:
                t = truncation_for(log, diverging, fetch_offset=log.high_watermark)
                truncate(log, t)
                follower.truncating = not t.completed
                self.trace.append(f"fetch {rid}: diverging {diverging} -> truncate {t}")
                return
        offset = log.log_end_offset
        if offset < leader.log_start_offset or offset > leader.log_end_offset:
            fetch_offset_after_out_of_range(
                log, leader_log_start_offset=leader.log_start_offset, leader_log_end_offset=leader.log_end_offset
            )
            return
        self.follower_leo[rid] = offset
        if rid not in self.isr and offset >= leader.high_watermark and offset == leader.log_end_offset:
            self.isr.add(rid)  # caught up: ISR expand
            self.trace.append(f"isr expand {rid}")
        self.advance_hw()
        if response_lost:
            # The leader counted the fetch; the follower died or the network lost the answer.
            self.trace.append(f"fetch {rid}: {offset}, response lost")
            return
        data = leader.read(offset, self.rng.choice([200, 1000, 1 << 20]), isolation=FetchIsolation.LOG_END)
        if data.size_in_bytes:
            append_fetched(log, data.read(0, data.size_in_bytes))
        apply_leader_offsets(log, high_watermark=leader.high_watermark, log_start_offset=leader.log_start_offset)
        self.trace.append(f"fetch {rid}: {offset} -> {log.log_end_offset} hw {log.high_watermark}")

    def truncate_follower(self, follower: Replica, leader: Log) -> None:
        log = follower.log
        if not self.by_epoch:
            # Before KIP-101: truncate to the high watermark.
            t = Truncation(log.high_watermark, True)
        else:
            epoch = log.latest_epoch
            answer = None if epoch is None else leader.end_offset_for_epoch(epoch)
            t = truncation_for(log, answer, fetch_offset=log.high_watermark)
        truncate(log, t)
        follower.truncating = not t.completed
        if t.completed:
            # A follower done truncating holds a prefix of the leader's log.
            mine = records_of(log, log.log_start_offset, log.log_end_offset)
            theirs = records_of(leader, max(log.log_start_offset, leader.log_start_offset), log.log_end_offset)
            for offset, record in theirs.items():
                if self.by_epoch and mine.get(offset) != record:
                    raise InvariantBroken(f"follower {follower.rid} is no prefix of the leader at {offset}")
        self.trace.append(f"truncate {follower.rid} to {t}")

    # -- faults ----------------------------------------------------------------------------------

    def shrink(self) -> None:
        leader = self.leader_log()
        lagging = [i for i in self.isr if i != self.leader and self.follower_leo.get(i, -1) < (leader.log_end_offset if leader else 0)]
        if lagging:
            rid = self.rng.choice(lagging)
            self.isr.discard(rid)
            self.trace.append(f"isr shrink {rid}")
            self.advance_hw()

    def stop(self, rid: int, how: str) -> None:
        r = self.replicas[rid]
        if not r.alive:
            return
        log = r.log
        r.log = None
        if how == "clean":
            log.close()
        else:
            # What the disk holds after a kill (the files as they are) or a power cut (only what
            # was fsynced, torn .log tails); the process's own close then writes to a copy that
            # is thrown away.
            image = self.base / f"image-{rid}-{self.rng.randrange(1 << 30)}"
            if how == "kill":
                shutil.copytree(r.log_dir, image)
            else:
                self.journal.log_dir = r.log_dir
                self.journal.cut(image, TP)
                if self.isr == {rid}:
                    self.all_isr_lost = True
            log.close()
            shutil.rmtree(r.log_dir)
            image.rename(r.log_dir)
            for key in [k for k in self.journal.dirs if k.startswith(str(r.log_dir))]:
                del self.journal.dirs[key]
            make_durable(r.log_dir)
        if len(self.isr) > 1:
            self.isr.discard(rid)  # the controller keeps the last in-sync replica in the ISR
        self.trace.append(f"stop {rid} ({how})")
        if rid == self.leader:
            self.leader = None
            self.elect(clean=True) or (self.unclean and self.elect(clean=False))

    def bounce(self, rid: int) -> None:
        """A quick restart of a follower (a clean close and reopen) that keeps its place in the
        ISR, as a broker restarted within its session timeout does: it truncates on its way back."""
        r = self.replicas[rid]
        if not r.alive or rid == self.leader:
            return
        r.log.close()
        r.open()
        r.truncating = True
        self.trace.append(f"bounce {rid}")

    def start(self, rid: int) -> None:
        r = self.replicas[rid]
        if r.alive:
            return
        r.open()
        r.truncating = True
        self.trace.append(f"start {rid}")
        if self.leader is None:
            self.elect(clean=True) or (self.unclean and self.elect(clean=False))

    def delete_records(self) -> None:
        log = self.leader_log()
        if log is not None and log.high_watermark > log.log_start_offset:
            target = self.rng.randint(log.log_start_offset, log.high_watermark)
            log.delete_records(target)
            self.trace.append(f"delete_records {target}")

    def flush(self, rid: int) -> None:
        r = self.replicas[rid]
        if r.alive:
            r.log.flush()

    # -- one step and the checks -----------------------------------------------------------------

    def step(self) -> None:
        rng = self.rng
        rid = rng.randrange(3)
        op = rng.choices(list(self.weights), weights=list(self.weights.values()))[0]
        if op == "produce":
            self.produce()
        elif op == "transaction":
            self.transaction_step()
        elif op == "fetch":
            self.fetch(rid)
        elif op == "fetch_lost":
            self.fetch(rid, response_lost=True)
        elif op == "crash_after_fetch":
            # KIP-101 scenario 1: a follower restarts right after its fetch moved the leader's
            # high watermark, before it learnt the new value.
            self.fetch(rid, response_lost=True)
            self.bounce(rid)
        elif op == "flush":
            self.flush(rid)
        elif op == "shrink":
            self.shrink()
        elif op == "delete_records":
            self.delete_records()
        elif op == "stop":
            self.stop(rid, rng.choice(["clean", "kill", "power"]))
        elif op == "stop_leader" and self.leader is not None:
            self.stop(self.leader, "kill")
        elif op == "start":
            self.start(rid)
        elif op == "bounce":
            self.bounce(rid)
        elif op == "elect" and self.leader is not None:
            self.elect(clean=True)  # a preferred or controlled leader change
        self.check()

    def check(self) -> None:
        leader = self.leader_log()
        if leader is None:
            return
        hw = leader.high_watermark
        # Committed records stay on every later clean-elected leader.
        if self.clean_since_commit:
            mine = records_of(leader, leader.log_start_offset, leader.log_end_offset)
            for offset, record in self.committed.items():
                if offset >= leader.log_start_offset and mine.get(offset) != record:
                    raise InvariantBroken(f"committed record at {offset} lost or changed on leader {self.leader}")
        # In-sync replicas agree below the high watermark.
        for rid in self.isr:
            r = self.replicas[rid]
            if rid == self.leader or not r.alive or r.truncating:
                continue
            start = max(leader.log_start_offset, r.log.log_start_offset)
            top = min(hw, r.log.log_end_offset)
            if records_of(r.log, start, top) != records_of(leader, start, top):
                raise InvariantBroken(f"in-sync replica {rid} differs from the leader below {top}")
        # Epoch caches agree with their checkpoint file and with the batches.
        for r in self.replicas:
            if r.alive:
                on_disk = LeaderEpochCheckpointFile(r.log.directory / LEADER_EPOCH_CHECKPOINT).read()
                if list(on_disk) != list(r.log.leader_epoch_cache.entries):
                    raise InvariantBroken(f"replica {r.rid}: leader-epoch-checkpoint {on_disk} differs from its cache")
                for batch in batches_of(r.log, r.log.log_start_offset, r.log.log_end_offset):
                    # (a batch straddling the log start: the cache starts at the log start)
                    got = r.log.leader_epoch_cache.epoch_for_offset(max(batch.base_offset, r.log.log_start_offset))
                    if got != batch.partition_leader_epoch:
                        raise InvariantBroken(
                            f"replica {r.rid}: batch {batch.base_offset} has epoch {batch.partition_leader_epoch}, "
                            f"the cache says {got}"
                        )
        # Isolation: HIGH_WATERMARK reads stop at the HW; TXN_COMMITTED at the LSO.
        if leader.log_end_offset > leader.log_start_offset:
            for batch in batches_of(leader, leader.log_start_offset, leader.log_end_offset, FetchIsolation.HIGH_WATERMARK):
                if batch.last_offset >= hw:
                    raise InvariantBroken(f"a HIGH_WATERMARK read returned {batch.last_offset} >= hw {hw}")
            lso = leader.last_stable_offset
            if lso > hw:
                raise InvariantBroken(f"last stable offset {lso} above the high watermark {hw}")
            if self.txn_open and lso > self.first_open_txn_offset(leader):
                raise InvariantBroken(f"last stable offset {lso} passes an open transaction")
            opened_end = self.replicas[self.leader].opened_end
            for first, marker in self.transactions(leader):
                if marker >= max(hw, opened_end) and lso > max(first, leader.log_start_offset):
                    raise InvariantBroken(
                        f"last stable offset {lso} passes the transaction at {first} whose marker {marker} is not "
                        f"committed (hw {hw})"
                    )

    def transactions(self, log: Log) -> list[tuple[int, int]]:
        """(first offset, marker offset) of the completed transactions in ``log``."""
        out, first = [], {}
        for batch in batches_of(log, log.log_start_offset, log.log_end_offset):
            if not batch.is_transactional:
                continue
            if batch.is_control:
                if batch.producer_id in first:
                    out.append((first.pop(batch.producer_id), batch.base_offset))
            else:
                first.setdefault(batch.producer_id, batch.base_offset)
        return out

    def first_open_txn_offset(self, log: Log) -> int:
        first = log.producer_state.ongoing_txns.get(self.txn_pid)
        # (Kafka's LSO never goes below the log start offset: DeleteRecords may pass a txn start)
        return log.log_end_offset if first is None else max(first, log.log_start_offset)

    def reopen_check(self) -> None:
        """Close every live replica cleanly and reopen it: the same LEO, HW and epochs."""
        def facts(log: Log) -> tuple:
            # An epoch that starts at the log end holds no batch yet: loading drops it (Kafka's
            # LogLoader truncates the cache from the end at the log end offset).
            epochs = [e for e in log.leader_epoch_cache.entries if e.start_offset < log.log_end_offset]
            return log.log_end_offset, log.high_watermark, epochs

        for r in self.replicas:
            if r.alive:
                before = facts(r.log)
                r.log.close()
                r.open()
                after = facts(r.log)
                if after != before:
                    raise InvariantBroken(f"replica {r.rid} reopened as {after}, closed as {before}")

    def close(self) -> None:
        for r in self.replicas:
            if r.alive:
                r.log.close()
                r.log = None


def run_schedule(seed: int, base: Path, journal: FsyncJournal, **kw) -> Model:
    sub = base / f"s{seed}"
    sub.mkdir()
    model = Model(seed, sub, journal, **kw)
    try:
        for _ in range(STEPS):
            model.step()
        model.reopen_check()
    except InvariantBroken as e:
        raise InvariantBroken(f"seed {seed}: {e}\n  last steps: {model.trace[-12:]}") from None
    except Exception:
        print(f"seed {seed} failed; last steps: {model.trace[-12:]}")
        raise
    finally:
        model.close()
        # Each schedule's files and fsync journal go with it: long campaigns stay small.
        shutil.rmtree(sub, ignore_errors=True)
        journal.files.clear()
        journal.dirs.clear()
    return model


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    base = _base_dir(tmp_path)
    journal = FsyncJournal(base, random.Random(0))
    monkeypatch.setattr(os, "fsync", journal.fsync)
    yield base, journal
    if base != tmp_path:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.timeout_guard(600)
def test_replicated_log_keeps_committed_records(workspace):
    base, journal = workspace
    steps = 0
    for seed in range(SCHEDULES):
        weights = FAULTY if seed % 3 == 2 else WEIGHTS
        model = run_schedule(seed, base, journal, by_epoch=True, unclean=seed % 4 == 3, weights=weights)
        steps += STEPS
        assert model.epoch >= 0
    print(f"{SCHEDULES} schedules, {steps} steps: every invariant held")


@pytest.mark.timeout_guard(600)
def test_truncating_to_the_high_watermark_loses_data(workspace):
    """Before KIP-101 a follower truncated to its high watermark: some schedules must break an
    invariant (the model can tell a broken rule from a kept one)."""
    base, journal = workspace
    broken = 0
    for seed in range(SCHEDULES):
        try:
            run_schedule(10_000 + seed, base, journal, by_epoch=False, weights=FAULTY)
        except InvariantBroken:
            broken += 1
    print(f"truncation to the high watermark broke an invariant in {broken} of {SCHEDULES} schedules")
    assert broken > 0, f"truncation to the high watermark broke no invariant in {SCHEDULES} schedules"
