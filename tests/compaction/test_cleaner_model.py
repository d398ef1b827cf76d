"""A model-based property test of compaction: any sequence of keyed appends, tombstones,
transactional commits and aborts, rolls, clock moves, reopens and cleanings at arbitrary times,
checked against a model of what was written.

After every step a read_committed reader (below the last stable offset) must see:

- only records that were written, at their offsets, in offset order, none of them aborted;
- the latest record of every key, unless it is a tombstone that a pass removed after its
  delete horizon, which is at least ``delete.retention.ms`` after a pass that kept it;
- everything at or past the first dirty offset exactly as written (not yet cleanable);
- after a pass: no older record of a key below the pass's end, and no tombstone there whose
  horizon has passed (tombstones neither live forever nor die early).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkalog import (
    Compression,
    ControlRecordType,
    Log,
    LogConfig,
    RecordBatchBuilder,
    TimestampType,
    native,
)
from kafkalog.cleaner import LogCleaner
from kafkalog.producer_state.manager import AppendOrigin

from .test_cleaner import committed_view

T0 = 1_700_000_000_000
RETENTION = 100  # delete.retention.ms
KEYS = [b"k%d" % i for i in range(6)]
PIDS = (1, 2)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class CompactionModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kafkalog-model-"))
        self.clock = Clock()
        self.config = LogConfig(
            cleanup_policy="compact", segment_bytes=400, delete_retention_ms=RETENTION, file_delete_delay_ms=0
        )
        self.log = Log.open(self.tmp / "m-0", self.config, clock=self.clock)
        self.cleaner: LogCleaner | None = None
        self.written: dict[int, tuple[bytes, bytes | None, int | None]] = {}  # offset -> key, value, txn id
        self.txn_state: dict[int, str] = {}  # txn id -> open | committed | aborted
        self.open_txn: dict[int, int] = {}  # pid -> its open txn id
        self.seq = {pid: 0 for pid in PIDS}
        self.next_txn = 0
        self.passes: list[tuple[int, int]] = []  # (time, end offset) of every pass

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- steps ---------------------------------------------------------------------------------

    @rule(
        rows=st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=20))), min_size=1, max_size=4),
        codec=st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD]),
    )  # fmt: skip
    def append(self, rows, codec) -> None:
        self._append(rows, codec, pid=-1)

    @rule(
        pid=st.sampled_from(PIDS),
        rows=st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=20))), min_size=1, max_size=3),
        codec=st.sampled_from([Compression.NONE, Compression.SNAPPY]),
    )  # fmt: skip
    def append_in_transaction(self, pid, rows, codec) -> None:
        if pid not in self.open_txn:
            self.open_txn[pid] = self.next_txn
            self.txn_state[self.next_txn] = "open"
            self.next_txn += 1
        self._append(rows, codec, pid=pid)

    def _append(self, rows, codec, pid: int) -> None:
        txn = pid >= 0
        b = RecordBatchBuilder(
            2, codec, TimestampType.CREATE_TIME, producer_id=pid, producer_epoch=0 if txn else -1,
            base_sequence=self.seq[pid] if txn else -1, is_transactional=txn,
        )  # fmt: skip
        for key, value in rows:
            b.append(key, value, timestamp=self.clock.now)
        info = self.log.append(b.build())
        if txn:
            self.seq[pid] += len(rows)
        for i, (key, value) in enumerate(rows):
            self.written[info.first_offset + i] = (key, value, self.open_txn.get(pid) if txn else None)

    @precondition(lambda self: self.open_txn)
    @rule(data=st.data(), commit=st.booleans())
    def end_transaction(self, data, commit) -> None:
        pid = data.draw(st.sampled_from(sorted(self.open_txn)))
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        marker = RecordBatchBuilder.end_transaction_marker(
            kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=self.clock.now
        )
        self.log.append(marker, origin=AppendOrigin.COORDINATOR)
        self.txn_state[self.open_txn.pop(pid)] = "committed" if commit else "aborted"

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(ms=st.integers(0, 3 * RETENTION))
    def advance_clock(self, ms) -> None:
        self.clock.now += ms

    @rule(map_slots=st.sampled_from([2, 3, 5, 1000]))
    def clean(self, map_slots) -> None:
        before = self._visible()
        cleaner = LogCleaner(dedupe_buffer_size=24 * map_slots, clock=self.clock)
        stats = cleaner.clean(self.log)
        if stats is None:
            assert self._visible() == before
            return
        now = self.clock.now
        end = stats.end_offset
        self.passes.append((now, end))
        after = self._visible()
        removed = {o for o in before} - {o for o in after}
        # Tombstone safety: one removed as the latest of its key had a pass keep it at least
        # delete.retention.ms earlier.
        latest = self._latest_expected()
        for offset in removed:
            key, value, _ = self.written[offset]
            if value is None and latest.get(key) == offset:
                assert any(t + RETENTION <= now and e > offset for t, e in self.passes[:-1]), (offset, self.passes)
        # Below the pass's end: one record per key at most, no tombstone past its horizon.
        seen = set()
        for segment in self.log.segments:
            for batch in segment.log.batches():
                for record in batch.records():
                    if record.offset >= end or batch.is_control:
                        continue
                    if record.value is None:
                        assert batch.delete_horizon_ms is not None and batch.delete_horizon_ms > now, (record.offset, batch)
        for offset in sorted(after, reverse=True):
            if offset < end:
                key = after[offset][0]
                assert key not in seen, f"key {key!r} appears twice below the pass end {end}"
                seen.add(key)

    @rule()
    def reopen(self) -> None:
        before = self._visible()
        self.log.close()
        self.log = Log.open(self.tmp / "m-0", self.config, clock=self.clock)
        assert self._visible() == before

    # -- the model ------------------------------------------------------------------------------

    def _visible(self) -> dict[int, tuple[bytes, bytes | None]]:
        lso = self.log.last_stable_offset
        return {o: (k, v) for o, k, v in committed_view(self.log) if o < lso}

    def _expected(self) -> dict[int, tuple[bytes, bytes | None]]:
        lso = self.log.last_stable_offset
        return {
            o: (k, v)
            for o, (k, v, txn) in self.written.items()
            if o < lso and (txn is None or self.txn_state[txn] != "aborted")
        }

    def _latest_expected(self) -> dict[bytes, int]:
        latest = {}
        for offset, (key, _) in sorted(self._expected().items()):
            latest[key] = offset
        return latest

    @invariant()
    def reader_sees_the_model(self) -> None:
        visible = self._visible()
        expected = self._expected()
        offsets = list(visible)
        assert offsets == sorted(offsets)
        for offset, kv in visible.items():
            assert expected.get(offset) == kv, f"offset {offset}: read {kv}, wrote {expected.get(offset)}"
        for key, offset in self._latest_expected().items():
            if expected[offset][1] is not None:
                assert offset in visible, f"the latest value of {key!r} (offset {offset}) is gone"
            elif offset not in visible:
                assert not any(k == key for k, _ in visible.values()), f"{key!r} came back after its tombstone went"
        first_dirty = self.log.cleaner_checkpoint or 0
        for offset, kv in expected.items():
            if offset >= first_dirty:
                assert visible.get(offset) == kv, f"offset {offset} at/after the first dirty offset {first_dirty} changed"


CompactionModel.TestCase.settings = settings(
    max_examples=settings.default.max_examples // 2, stateful_step_count=30, deadline=None
)


#: These tests pick the core themselves (tests/conftest.py does not parametrize them).
SWITCHES_CORES = True


class _OnCore(CompactionModel.TestCase):
    __test__ = False  # only its two subclasses run
    pure = False

    def runTest(self) -> None:
        with native.use(pure=self.pure):
            super().runTest()


@pytest.mark.skipif(native.ext is None, reason="the compiled core is not built or KAFKALOG_PUREPYTHON=1")
@pytest.mark.timeout_guard(180)
class TestCompactionNative(_OnCore):
    __test__ = True
    pure = False


@pytest.mark.timeout_guard(180)
class TestCompactionPure(_OnCore):
    __test__ = True
    pure = True
