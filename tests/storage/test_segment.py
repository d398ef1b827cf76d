"""LogSegment against a model of Kafka's ``LogSegment``: appends, reads, searches, truncation,
rolling, recovery, crashes, corruption and zero-copy transfer.

The stateful test drives one segment through random appends (v2 mostly, some v1 and compressed
batches, timestamps that go backwards, offset gaps), reads, lookups, truncations, flushes,
close/reopen, recoveries and roll checks, and after every step compares the files and every
answer with a model that applies Kafka 3.8's rules (``LogSegment.append``/``recover``/
``truncateTo``/``shouldRoll``/``onBecomeInactiveSegment``/``close``). It runs under both index
search paths (the native cache and ``KAFKALOG_INDEX_SEARCH=plain``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, assume, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import kafkalog.sendfile
from kafkalog import (
    Compression,
    ControlRecordType,
    CorruptIndexError,
    FileRecords,
    InvalidConfigError,
    InvalidOffsetError,
    LogConfig,
    LogSegment,
    MemoryRecords,
    OffsetIndex,
    OffsetPosition,
    RecordBatchBuilder,
    TimeIndex,
    TimestampOffset,
    TruncatedRecordError,
)
from kafkalog.filenames import (
    log_file,
    offset_index_file,
    time_index_file,
    txn_index_file,
)

SEARCH_ENV = "KAFKALOG_INDEX_SEARCH"
SEARCH_MODES = ["default", "plain"]
INT32_MAX = 2**31 - 1
BASE_TS = 1_700_000_000_000
HUGE_MS = 10**12


@contextlib.contextmanager
def search_mode(mode: str):
    """Force the plain (Kafka's warm-first binary search) or the default index search path."""
    saved = os.environ.get(SEARCH_ENV)
    if mode == "plain":
        os.environ[SEARCH_ENV] = "plain"
    else:
        os.environ.pop(SEARCH_ENV, None)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(SEARCH_ENV, None)
        else:
            os.environ[SEARCH_ENV] = saved


@contextlib.contextmanager
def scratch_dir():
    """A temporary partition directory (hypothesis tests cannot use the tmp_path fixture)."""
    d = Path(tempfile.mkdtemp(prefix="kafkalog-segment-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def read_or_none(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def segment_files(directory: Path, base: int, suffix: str = "") -> list[Path]:
    return [
        log_file(directory, base, suffix),
        offset_index_file(directory, base, suffix),
        time_index_file(directory, base, suffix),
        txn_index_file(directory, base, suffix),
    ]


def files_of(directory: Path, base: int) -> dict[str, bytes | None]:
    return {p.name: read_or_none(p) for p in segment_files(directory, base)}


# ------------------------------------------------------------------------------------------------
# Building batches, and what the model knows about each top-level entry


@dataclasses.dataclass(frozen=True)
class Entry:
    """One top-level entry of the log (a v2 batch, a v1 message or v1 compressed wrapper)."""

    data: bytes
    magic: int
    last_offset: int
    max_timestamp: int
    records: tuple[tuple[int, int], ...]  # (offset, timestamp) in file order
    leader_epoch: int | None
    position: int = -1

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def end(self) -> int:
        return self.position + len(self.data)

    def at(self, position: int) -> Entry:
        return dataclasses.replace(self, position=position)


def value_for(offset: int, n: int) -> bytes:
    return bytes((offset * 31 + i * 7) & 0xFF for i in range(n))


def split_entries(buf: bytes, records: list[tuple[int, int]], epoch: int) -> list[Entry]:
    """Cut a built buffer into its top-level entries, reading the header fields with struct."""
    out = []
    pos = 0
    rest = list(records)
    while pos < len(buf):
        size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
        magic = buf[pos + 16]
        if magic == 2:
            base, delta = struct.unpack_from(">q", buf, pos)[0], struct.unpack_from(">i", buf, pos + 23)[0]
            last = base + delta
            max_ts = struct.unpack_from(">q", buf, pos + 35)[0]
        else:
            last = struct.unpack_from(">q", buf, pos)[0]
            max_ts = struct.unpack_from(">q", buf, pos + 18)[0]
        mine = [r for r in rest if r[0] <= last]
        rest = rest[len(mine):]
        assert mine and max_ts == max(ts for _, ts in mine), "builder wrote an unexpected max timestamp"
        leader_epoch = epoch if magic == 2 and epoch >= 0 else None
        out.append(Entry(bytes(buf[pos : pos + size]), magic, last, max_ts, tuple(mine), leader_epoch))
        pos += size
    assert not rest
    return out


def build(
    magic: int,
    codec: Compression,
    records: list[tuple[int, int, bytes | None, bytes | None]],
    *,
    epoch: int = -1,
    producer_id: int = -1,
    transactional: bool = False,
) -> list[Entry]:
    """Entries for ``records`` = [(offset, timestamp, key, value)] (one v2 batch, one v1
    wrapper, or one v1 message per record)."""
    builder = RecordBatchBuilder(
        magic=magic,
        compression=codec,
        base_offset=records[0][0],
        partition_leader_epoch=epoch if magic == 2 else -1,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
    )
    for offset, ts, key, value in records:
        builder.append(key, value, timestamp=ts, offset=offset)
    return split_entries(builder.build().buffer, [(o, t) for o, t, _, _ in records], epoch)


def abort_marker(offset: int, producer_id: int, ts: int) -> list[Entry]:
    buf = RecordBatchBuilder.end_transaction_marker(
        ControlRecordType.ABORT,
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=3,
        timestamp=ts,
        base_offset=offset,
    ).buffer
    return split_entries(buf, [(offset, ts)], -1)


def place(entries: list[Entry], start: int = 0) -> list[Entry]:
    out, pos = [], start
    for e in entries:
        out.append(e.at(pos))
        pos += e.size
    return out


def encode_offset_index(base: int, entries) -> bytes:
    return b"".join(struct.pack(">ii", o - base, p) for o, p in entries)


def encode_time_index(base: int, entries) -> bytes:
    return b"".join(struct.pack(">qi", t, o - base) for t, o in entries)


def recovery_indexes(entries: list[Entry], base: int, interval: int, max_index_bytes: int):
    """Kafka's ``LogSegment.recover`` index rule over intact ``entries``: (offset entries, time
    entries, max timestamp and offset), or None when an index would overflow (Kafka throws)."""
    oidx: list[tuple[int, int]] = []
    tidx: list[tuple[int, int]] = []
    valid = last = 0
    best = (-1, base)
    ocap, tcap = max_index_bytes // 8, max_index_bytes // 12
    for e in entries:
        if e.max_timestamp > best[0]:
            best = (e.max_timestamp, e.last_offset)
        if valid - last > interval:
            if len(oidx) >= ocap or len(tidx) >= tcap - 1:
                return None
            oidx.append((e.last_offset, valid))
            if best[0] > (tidx[-1][0] if tidx else -1):
                tidx.append(best)
            last = valid
        valid += e.size
    if best[0] > (tidx[-1][0] if tidx else -1):
        if len(tidx) >= tcap:
            return None
        tidx.append(best)
    return oidx, tidx, best


# ------------------------------------------------------------------------------------------------
# The model of one segment (Kafka 3.8 LogSegment semantics)


#: Kafka's ``LogSegment.recover`` does not touch ``bytesSinceLastIndexEntry`` (0 in a freshly
#: loaded segment), so the first append after recovery is indexed only once that many bytes have
#: been appended again. (See test_append_after_recover_indexes_as_kafka.)
KAFKA_RECOVER_KEEPS_COUNTER = True


class ModelError(AssertionError):
    pass


class Model:
    def __init__(self, base: int, cfg: LogConfig, now: int, jitter: int) -> None:
        self.base = base
        self.interval = cfg.index_interval_bytes
        self.max_index = cfg.segment_index_bytes
        self.segment_bytes = cfg.segment_bytes
        self.segment_ms = cfg.segment_ms
        self.jitter = jitter
        self.entries: list[Entry] = []
        self.log = bytearray()
        self.oidx: list[tuple[int, int]] = []
        self.tidx: list[tuple[int, int]] = []
        self.ocap = self.max_index // 8
        self.tcap = self.max_index // 12
        self.counter = 0  # bytesSinceLastIndexEntry
        self.max_ts = (-1, base)
        self.rolling: int | None = None
        self.created = now
        self.log_len = cfg.segment_bytes if cfg.preallocate else 0  # the .log file's length

    # facts
    @property
    def size(self) -> int:
        return len(self.log)

    @property
    def next_offset(self) -> int:
        return self.entries[-1].last_offset + 1 if self.entries else self.base

    def offsets(self) -> list[int]:
        return [o for e in self.entries for o, _ in e.records]

    def index_full(self) -> bool:
        return len(self.oidx) >= self.ocap or len(self.tidx) >= self.tcap - 1

    def _time_append(self, entry: tuple[int, int], check_full: bool) -> None:
        if check_full and len(self.tidx) >= self.tcap - 1:
            raise ModelError("time index full")
        if entry[0] > (self.tidx[-1][0] if self.tidx else -1):
            if len(self.tidx) >= self.tcap:
                raise ModelError("time index has no slot left")
            self.tidx.append(entry)

    # mutations
    def append(self, group: list[Entry]) -> list[Entry]:
        """One ``append`` call holding ``group``."""
        position = self.size
        largest_offset = group[-1].last_offset
        largest_ts = max(e.max_timestamp for e in group)
        offset_of_max = next(e.last_offset for e in group if e.max_timestamp == largest_ts)
        if position == 0:
            self.rolling = largest_ts
        if largest_ts > self.max_ts[0]:
            self.max_ts = (largest_ts, offset_of_max)
        if self.counter > self.interval:
            if len(self.oidx) >= self.ocap:
                raise ModelError("offset index full")
            self.oidx.append((largest_offset, position))
            self._time_append(self.max_ts, check_full=True)
            self.counter = 0
        placed = place(group, position)
        for e in placed:
            self.entries.append(e)
            self.log += e.data
        self.counter += sum(e.size for e in group)
        self.log_len = max(self.log_len, self.size)
        return placed

    def recovery(self):
        return recovery_indexes(self.entries, self.base, self.interval, self.max_index)

    def recover(self) -> None:
        found = self.recovery()
        if found is None:
            raise ModelError("recovery would overflow an index")
        self.oidx, self.tidx, self.max_ts = [list(found[0]), list(found[1]), found[2]]
        self.ocap, self.tcap = len(self.oidx), len(self.tidx)
        # Kafka's recover leaves bytesSinceLastIndexEntry as it was.
        if not KAFKA_RECOVER_KEEPS_COUNTER:
            self.counter = self.size - (self.oidx[-1][1] if self.oidx else 0)

    def truncate(self, offset: int, now: int) -> int:
        idx = next((i for i, e in enumerate(self.entries) if e.last_offset >= offset), None)
        self.oidx = [e for e in self.oidx if e[0] < offset]
        self.tidx = [e for e in self.tidx if e[1] < offset]
        self.ocap = max(self.max_index // 8, len(self.oidx))
        self.tcap = max(self.max_index // 12, len(self.tidx))
        removed = 0
        if idx is not None:
            cut = self.entries[idx].position
            removed = self.size - cut
            del self.entries[idx:]
            del self.log[cut:]
            self.log_len = cut
        if self.size == 0:
            self.created = now
            self.rolling = None
        self.counter = 0
        if self.max_ts[0] >= 0:
            self.max_ts = self._read_largest_timestamp()
        return removed

    def _read_largest_timestamp(self) -> tuple[int, int]:
        last = self.tidx[-1] if self.tidx else (-1, self.base)
        position = self.offset_floor(last[1])[1]
        best = (-1, -1)
        for e in self.entries:
            if e.position >= position and e.max_timestamp > best[0]:
                best = (e.max_timestamp, e.last_offset)
        return best if best[0] > last[0] else last

    def close(self) -> None:
        self._time_append(self.max_ts, check_full=False)
        self.ocap, self.tcap = len(self.oidx), len(self.tidx)
        self.log_len = self.size

    on_become_inactive = close

    def reopen(self, now: int) -> None:
        """A fresh LogSegment over the closed files."""
        expected = self.tidx[-1] if self.tidx else (-1, self.base)
        if expected != self.max_ts:
            raise ModelError(f"closed time index ends with {expected}, not the max {self.max_ts}")
        self.counter = 0
        self.created = now
        self.rolling = None

    def resize(self, n: int) -> None:
        self.ocap = max(n // 8, len(self.oidx))
        self.tcap = max(n // 12, len(self.tidx))

    # answers
    def offset_floor(self, offset: int) -> tuple[int, int]:
        best = (self.base, 0)
        for e in self.oidx:
            if e[0] <= offset:
                best = e
        return best

    def time_floor(self, ts: int) -> tuple[int, int]:
        best = (-1, self.base)
        for e in self.tidx:
            if e[0] <= ts:
                best = e
        return best

    def translate(self, offset: int) -> Entry | None:
        return next((e for e in self.entries if e.last_offset >= offset), None)

    def read(self, start: int, max_size: int, max_position: int | None, min_one: bool):
        found = self.translate(start)
        if found is None:
            return None
        if max_position is None:
            max_position = self.size
        adjusted = max(max_size, found.size) if min_one else max_size
        if adjusted == 0:
            return found.position, 0
        return found.position, max(0, min(max_position - found.position, adjusted))

    def find_ts(self, target: int, starting: int | None):
        starting = self.base if starting is None else starting
        for e in self.entries:
            for offset, ts in e.records:
                if ts >= target and offset >= starting:
                    return ts, offset, e.leader_epoch
        return None

    def rolling_ts(self) -> int | None:
        if self.rolling is None and self.entries:
            self.rolling = self.entries[0].max_timestamp
        return self.rolling

    def should_roll(self, messages_size, max_ts_in_messages, max_offset, now, max_bytes=None, max_ms=None) -> bool:
        max_bytes = self.segment_bytes if max_bytes is None else max_bytes
        max_ms = self.segment_ms if max_ms is None else max_ms
        rolling = self.rolling_ts()
        waited = max_ts_in_messages - rolling if rolling is not None and rolling >= 0 else now - self.created
        return (
            self.size > max_bytes - messages_size
            or (self.size > 0 and waited > max_ms - self.jitter)
            or self.index_full()
            or not 0 <= max_offset - self.base <= INT32_MAX
        )


# ------------------------------------------------------------------------------------------------
# The stateful test

KINDS = st.sampled_from(
    [(2, Compression.NONE)] * 6
    + [(2, Compression.GZIP), (2, Compression.LZ4), (2, Compression.SNAPPY), (2, Compression.ZSTD)]
    + [(1, Compression.NONE), (1, Compression.GZIP)]
)


class SegmentMachine(RuleBasedStateMachine):
    """One segment against the model; ``SEARCH`` picks the index search path."""

    SEARCH = "default"

    def __init__(self) -> None:
        super().__init__()
        self._env = search_mode(self.SEARCH)
        self._env.__enter__()
        self.dir = Path(tempfile.mkdtemp(prefix="kafkalog-segment-sm-"))
        self.seg: LogSegment | None = None
        self.model: Model | None = None
        self.now = 5_000_000
        self.ts = BASE_TS

    def teardown(self) -> None:
        try:
            if self.seg is not None:
                self.seg.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            self._env.__exit__(None, None, None)

    def _open(self) -> LogSegment:
        return LogSegment.open(self.dir, self.base, self.cfg, roll_jitter_ms=self.jitter, clock=lambda: self.now)

    @initialize(
        base=st.sampled_from([0, 1, 4_000, 2**40]),
        interval=st.sampled_from([64, 128, 256, 512]),
        index_bytes=st.sampled_from([64, 100, 200, 400, 1024]),
        preallocate=st.booleans(),
        jitter=st.sampled_from([0, 7]),
    )
    def setup(self, base, interval, index_bytes, preallocate, jitter):
        self.base, self.jitter = base, jitter
        self.cfg = LogConfig(
            segment_bytes=1 << 20,
            segment_ms=HUGE_MS,
            segment_index_bytes=index_bytes,
            index_interval_bytes=interval,
            preallocate=preallocate,
        )
        self.seg = self._open()
        self.model = Model(base, self.cfg, self.now, jitter)

    # -- helpers -------------------------------------------------------------------------------

    def draw_offset(self, data, *, at_least_base: bool = False) -> int:
        m = self.model
        low = m.base if at_least_base else m.base - 2
        choices = m.offsets() + [e.last_offset for e in m.entries] + [m.base, m.next_offset]
        return data.draw(st.one_of(st.sampled_from(choices), st.integers(low, m.next_offset + 3)))

    def draw_group(self, data) -> list[Entry]:
        entries: list[Entry] = []
        offset = self.model.next_offset
        for _ in range(data.draw(st.integers(1, 3))):
            offset += data.draw(st.sampled_from([0, 0, 0, 1, 3]))  # gaps, as after compaction
            magic, codec = data.draw(KINDS)
            records = []
            for i in range(data.draw(st.integers(1, 4))):
                self.ts = max(0, self.ts + data.draw(st.integers(-400, 400)))
                key = data.draw(st.sampled_from([None, b"", b"k", b"a-longer-key"]))
                records.append((offset + i, self.ts, key, value_for(offset + i, data.draw(st.integers(0, 120)))))
            epoch = data.draw(st.sampled_from([-1, 0, 5]))
            entries.extend(build(magic, codec, records, epoch=epoch))
            offset = records[-1][0] + 1
        return entries

    def roll_check(self, group: list[Entry]) -> bool:
        """Whether Kafka would roll before appending ``group`` (asserting the segment agrees)."""
        size = sum(e.size for e in group)
        max_ts = max(e.max_timestamp for e in group)
        last = group[-1].last_offset
        expected = self.model.should_roll(size, max_ts, last, self.now)
        got = self.seg.should_roll(
            messages_size=size, max_timestamp_in_messages=max_ts, max_offset_in_messages=last, now_ms=self.now
        )
        assert got == expected
        return expected

    def check_files_closed(self) -> None:
        m = self.model
        log, idx, tidx, _ = segment_files(self.dir, self.base)
        assert log.read_bytes() == bytes(m.log)  # trimmed: no preallocated tail
        assert idx.read_bytes() == encode_offset_index(m.base, m.oidx)
        assert tidx.read_bytes() == encode_time_index(m.base, m.tidx)

    def check_index_files(self) -> None:
        m = self.model
        _, idx, tidx, _ = segment_files(self.dir, self.base)
        raw = idx.read_bytes()
        assert len(raw) == m.ocap * 8
        assert raw[: len(m.oidx) * 8] == encode_offset_index(m.base, m.oidx)
        raw = tidx.read_bytes()
        assert len(raw) == m.tcap * 12
        assert raw[: len(m.tidx) * 12] == encode_time_index(m.base, m.tidx)

    # -- rules -----------------------------------------------------------------------------------

    @rule(data=st.data(), mode=st.sampled_from(["each", "each", "whole", "set"]))
    def append(self, data, mode):
        """Append 1-3 batches: one ``append_batches`` call per batch, one for all of them, or
        a single ``append`` of the whole set (one index entry for the set, as Kafka)."""
        self._append(data, mode)

    # Appends are what fills a segment: give them more weight than the other rules.
    @rule(data=st.data(), mode=st.sampled_from(["each", "whole"]))
    def append_more(self, data, mode):
        self._append(data, mode)

    @rule(data=st.data())
    def append_again(self, data):
        self._append(data, "each")

    def _append(self, data, mode):
        group = self.draw_group(data)
        if mode == "set":
            if self.roll_check(group):
                event("append: an index is full (Kafka would roll)")
                return
            largest = max(e.max_timestamp for e in group)
            self.seg.append(
                MemoryRecords(b"".join(e.data for e in group)),
                largest_offset=group[-1].last_offset,
                largest_timestamp=largest,
                offset_of_max_timestamp=next(e.last_offset for e in group if e.max_timestamp == largest),
            )
            self.model.append(group)
            return
        if mode == "whole":
            trial = copy.deepcopy(self.model)
            fits = True
            for e in group:
                if trial.index_full():
                    fits = False
                    break
                trial.append([e])
            if fits:
                self.seg.append_batches(MemoryRecords(b"".join(e.data for e in group)))
                for e in group:
                    self.model.append([e])
                return
        for e in group:
            if self.roll_check([e]):
                event("append: an index is full (Kafka would roll)")
                return
            self.seg.append_batches(MemoryRecords(e.data))
            self.model.append([e])

    @rule(data=st.data())
    def read(self, data):
        m = self.model
        start = self.draw_offset(data)
        max_size = data.draw(st.integers(0, m.size + 64))
        bounds = [e.position for e in m.entries] + [e.end for e in m.entries]
        max_position = data.draw(st.one_of(st.none(), st.integers(0, m.size), st.sampled_from(bounds or [0])))
        min_one = data.draw(st.booleans())
        got = self.seg.read(start, max_size, max_position=max_position, min_one_message=min_one)
        expected = m.read(start, max_size, max_position, min_one)
        if expected is None:
            assert got is None
            return
        position, size = expected
        assert (got.start, got.size_in_bytes) == (position, size)
        assert got.read(0, size + 10) == bytes(m.log[position : position + size])
        whole = [e.position for e in m.entries if e.position >= position and e.end <= position + size]
        assert [b.position for b in got.batches()] == whole

    @rule(data=st.data())
    def translate(self, data):
        m = self.model
        offset = self.draw_offset(data)
        expected = m.translate(offset)
        starts = [e.position for e in m.entries if expected is not None and e.position <= expected.position]
        starting = data.draw(st.sampled_from([0] + starts))
        got = self.seg.translate_offset(offset, starting)
        if expected is None:
            assert got is None
        else:
            assert tuple(got) == (expected.last_offset, expected.position, expected.size)

    @rule(data=st.data())
    def find_by_timestamp(self, data):
        m = self.model
        stamps = [ts for e in m.entries for _, ts in e.records]
        target = data.draw(
            st.one_of(
                st.sampled_from(stamps or [BASE_TS]).flatmap(lambda t: st.sampled_from([t - 1, t, t + 1])),
                st.sampled_from([0, BASE_TS - 10_000, max(stamps or [BASE_TS]) + 1]),
            )
        )
        starting = self.draw_offset(data, at_least_base=True) if data.draw(st.booleans()) else None
        got = self.seg.find_offset_by_timestamp(target, starting)
        expected = m.find_ts(target, starting)
        assert (None if got is None else tuple(got)) == expected

    @rule(data=st.data())
    def truncate(self, data):
        offset = self.draw_offset(data, at_least_base=True)
        removed = self.seg.truncate_to(offset)
        assert removed == self.model.truncate(offset, self.now)

    @rule()
    def flush(self):
        self.seg.flush()
        self.check_index_files()

    @rule(ms=st.integers(0, 5_000))
    def tick(self, ms):
        self.now += ms

    @rule(data=st.data())
    def should_roll(self, data):
        m = self.model
        args = dict(
            messages_size=data.draw(st.integers(0, 3_000)),
            max_timestamp_in_messages=self.ts + data.draw(st.integers(-1_000, 3_000)),
            max_offset_in_messages=data.draw(
                st.sampled_from(
                    [m.next_offset, m.next_offset + 5, m.base - 1, m.base + INT32_MAX, m.base + INT32_MAX + 1]
                )
            ),
            now_ms=self.now + data.draw(st.integers(0, 3_000)),
            max_segment_bytes=data.draw(st.integers(m.size // 2, m.size + 3_000)),
            max_segment_ms=data.draw(st.integers(1, 3_000)),
        )
        expected = m.should_roll(
            args["messages_size"],
            args["max_timestamp_in_messages"],
            args["max_offset_in_messages"],
            args["now_ms"],
            args["max_segment_bytes"],
            args["max_segment_ms"],
        )
        assert self.seg.should_roll(**args) == expected

    @rule(resize=st.booleans())
    def close_and_reopen(self, resize):
        """A clean close trims everything; the reopened segment opens its indexes lazily and,
        as the active segment, gets its indexes grown back (Kafka's loader: resizeIndexes)."""
        self.seg.close()
        self.model.close()
        self.check_files_closed()
        self.seg = self._open()
        assert "not opened" in repr(self.seg.offset_index)
        assert "not opened" in repr(self.seg.time_index)
        self.model.reopen(self.now)
        if resize:
            self.seg.resize_indexes(self.cfg.segment_index_bytes)
            self.model.resize(self.cfg.segment_index_bytes)

    @rule(resize=st.booleans())
    def close_reopen_recover(self, resize):
        """Recovery of a cleanly closed segment truncates nothing and rebuilds the indexes by
        the append rule: the same bytes as close wrote, whenever the appends indexed per batch."""
        m = self.model
        found = m.recovery()
        if found is None:
            return
        self.seg.close()
        m.close()
        self.check_files_closed()
        _, idx, tidx, _ = segment_files(self.dir, self.base)
        closed = (idx.read_bytes(), tidx.read_bytes())
        same = (m.oidx, m.tidx) == (found[0], found[1])
        self.seg = self._open()
        m.reopen(self.now)
        self.seg.sanity_check()
        assert self.seg.recover() == 0
        m.recover()
        self.check_files_closed()
        if same:
            assert (idx.read_bytes(), tidx.read_bytes()) == closed
        if resize:
            self.seg.resize_indexes(self.cfg.segment_index_bytes)
            m.resize(self.cfg.segment_index_bytes)

    @rule(resize=st.booleans())
    def recover_live(self, resize):
        if self.model.recovery() is None:
            return
        assert self.seg.recover() == 0
        self.model.recover()
        if resize:
            self.seg.resize_indexes(self.cfg.segment_index_bytes)
            self.model.resize(self.cfg.segment_index_bytes)

    @rule(resize=st.booleans())
    def become_inactive(self, resize):
        """Final time entry, indexes and log trimmed (then, as if it became active again, grown)."""
        self.seg.on_become_inactive()
        self.model.on_become_inactive()
        self.check_index_files()
        assert os.path.getsize(self.seg.log.path) == self.model.size
        if resize:
            self.seg.resize_indexes(self.cfg.segment_index_bytes)
            self.model.resize(self.cfg.segment_index_bytes)

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def matches_model(self):
        if self.seg is None:
            return
        seg, m = self.seg, self.model
        event(f"offset index entries: {'0' if not m.oidx else '1-4' if len(m.oidx) < 5 else '5+'}")
        seg.sanity_check()
        assert seg.size == m.size
        assert os.path.getsize(seg.log.path) == m.log_len
        assert seg.log.read(0, m.size + 1) == bytes(m.log)
        assert seg.next_offset == m.next_offset
        assert (seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far) == m.max_ts
        if m.max_ts[0] >= 0:
            assert seg.largest_timestamp == m.max_ts[0]
        else:
            assert seg.largest_timestamp == os.stat(seg.log.path).st_mtime_ns // 1_000_000

        oi, ti = seg.offset_index, seg.time_index
        assert [tuple(oi.entry(i)) for i in range(oi.entries)] == m.oidx
        assert [tuple(ti.entry(i)) for i in range(ti.entries)] == m.tidx
        assert (oi.max_entries, ti.max_entries) == (m.ocap, m.tcap)
        assert oi.is_full == (len(m.oidx) >= m.ocap) and ti.is_full == (len(m.tidx) >= m.tcap - 1)
        self.check_index_files()

        # Structure, independent of when entries were added: an offset entry points at the
        # start of a batch and names the last offset of the run appended with it; time entries
        # strictly increase and each is the running max where it was first reached.
        by_pos = {e.position: i for i, e in enumerate(m.entries)}
        for o, p in m.oidx:
            i = by_pos[p]
            assert any(e.last_offset == o for e in m.entries[i:])
        running, firsts = -1, set()
        for e in m.entries:
            if e.max_timestamp > running:
                running = e.max_timestamp
                firsts.add((running, e.last_offset))
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(m.tidx, m.tidx[1:]))
        assert set(m.tidx) <= firsts

        # Lookups, one at a time and vectorised.
        probes = sorted(
            {m.base - 1, m.base, m.next_offset, *(e.last_offset for e in m.entries), *(o for o, _ in m.oidx)}
        )
        for o in probes:
            assert tuple(oi.lookup(o)) == m.offset_floor(o)
        offsets, positions = oi.lookup_many(np.array(probes, dtype=np.int64))
        assert list(zip(offsets.tolist(), positions.tolist())) == [m.offset_floor(o) for o in probes]
        for t in sorted({BASE_TS - 1, *(x for ts, _ in m.tidx for x in (ts - 1, ts, ts + 1))}):
            assert tuple(ti.lookup(t)) == m.time_floor(t)


class PlainSearchSegmentMachine(SegmentMachine):
    SEARCH = "plain"


# One bug at a time, and no explain phase (it traces every line of a 40-step run), keep a
# failure's shrinking well inside conftest's 20 s guard.
MACHINE_SETTINGS = settings(
    settings.default,
    stateful_step_count=40,
    report_multiple_bugs=False,
    phases=[p for p in settings.default.phases if p is not Phase.explain],
)
TestSegmentDefaultSearch = SegmentMachine.TestCase
TestSegmentDefaultSearch.settings = MACHINE_SETTINGS
TestSegmentPlainSearch = PlainSearchSegmentMachine.TestCase
TestSegmentPlainSearch.settings = MACHINE_SETTINGS


# ------------------------------------------------------------------------------------------------
# Fixed logs for the corruption, crash and transfer tests

BASE = 50
FIXED_CFG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=100, segment_index_bytes=1024)


def _seed(kinds: list[tuple[int, Compression, int]], *, txn: bool = False) -> list[Entry]:
    """Entries from (magic, codec, record count) specs, offsets from BASE, timestamps that
    wander back and forth; with ``txn`` some batches are transactional and one is aborted."""
    entries: list[Entry] = []
    offset, ts = BASE, BASE_TS
    for n, (magic, codec, count) in enumerate(kinds):
        records = []
        for i in range(count):
            ts += (37 * (n + i)) % 500 - 180
            key = b"key-%d" % (offset + i) if i % 2 else None
            records.append((offset + i, ts, key, value_for(offset + i, 20 + 13 * ((n + i) % 5))))
        producer = 7 if txn and n % 3 == 1 else -1
        entries.extend(build(magic, codec, records, epoch=n % 4 - 1, producer_id=producer, transactional=producer >= 0))
        offset = records[-1][0] + 1
        if txn and n % 3 == 2:
            entries.extend(abort_marker(offset, 7, ts))
            offset += 1
    return place(entries)


_CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.SNAPPY, Compression.ZSTD]
_V2 = [(2, c, k) for c, k in zip(_CODECS * 3, [3, 1, 4, 2, 5, 1, 2, 3, 1, 4, 2, 2, 1, 3, 2])]
_MIXED = [
    (2, Compression.NONE, 3),
    (1, Compression.NONE, 2),
    (2, Compression.GZIP, 4),
    (1, Compression.GZIP, 3),
    (1, Compression.SNAPPY, 2),
] * 3
SEEDS = {
    "v2": _seed(_V2),
    "mixed": _seed(_MIXED),
    "txn": _seed([(2, Compression.NONE, 2), (2, Compression.LZ4, 3)] * 6, txn=True),
}


def log_bytes(entries: list[Entry]) -> bytes:
    return b"".join(e.data for e in entries)


def _covered(magic: int, rel: int) -> bool:
    """Whether damage at byte ``rel`` of an entry is detectable: the length field, and for v2
    everything from the magic on (CRC-32C covers attributes onward), for v1 from the CRC on.
    The offset field (and v2's partition leader epoch) are outside every checksum, in Kafka too."""
    if magic == 2:
        return 8 <= rel < 12 or rel >= 16
    return rel >= 8


def write_segment(directory: Path, entries: list[Entry], cfg: LogConfig = FIXED_CFG, base: int = BASE) -> LogSegment:
    directory.mkdir(parents=True, exist_ok=True)
    seg = LogSegment.open(directory, base, cfg)
    seg.append_batches(MemoryRecords(log_bytes(entries)))
    return seg


def test_seed_logs_are_indexed_densely() -> None:
    """The fixed logs give the recovery tests several index entries and an aborted transaction."""
    for name, entries in SEEDS.items():
        oidx, tidx, _ = recovery_indexes(entries, BASE, FIXED_CFG.index_interval_bytes, FIXED_CFG.segment_index_bytes)
        assert len(oidx) >= 5 and len(tidx) >= 3, name
    assert any(e.magic == 1 for e in SEEDS["mixed"])


# ------------------------------------------------------------------------------------------------
# Recovery: the append counter, garbage in the log, corrupt and missing indexes, crashes


def _single(offset: int, ts: int, size: int = 200) -> MemoryRecords:
    b = RecordBatchBuilder(base_offset=offset)
    b.append(None, b"x" * size, timestamp=ts)
    return b.build()


def test_append_after_recover_indexes_as_kafka(tmp_path) -> None:
    """Kafka's ``recover`` leaves ``bytesSinceLastIndexEntry`` alone (0 in a freshly loaded
    segment): after recovery the next batch is not indexed; the one after it is."""
    cfg = LogConfig(index_interval_bytes=100)
    seg = LogSegment.open(tmp_path, 0, cfg)
    seg.append_batches(_single(0, BASE_TS))
    seg.close()
    seg = LogSegment.open(tmp_path, 0, cfg)
    assert seg.recover() == 0
    seg.resize_indexes(cfg.segment_index_bytes)  # the loader's step for the active segment
    seg.append_batches(_single(1, BASE_TS + 1))
    first = seg.size
    seg.append_batches(_single(2, BASE_TS + 2))
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == [OffsetPosition(2, first)]
    seg.close()


@pytest.mark.parametrize("mode", SEARCH_MODES)
@given(data=st.data())
def test_garbage_in_log_truncates_at_damaged_batch(mode, data) -> None:
    """Garbage at a random position: recover() keeps exactly the batches before the first
    damaged one, reports the bytes removed, and rebuilds the same indexes (and transaction index)
    as a fresh recovery of the kept prefix, equal to Kafka's rule."""
    name = data.draw(st.sampled_from(sorted(SEEDS)), label="seed")
    entries = SEEDS[name]
    log = log_bytes(entries)
    k = data.draw(st.integers(0, len(entries) - 1), label="batch")
    target = entries[k]
    covered = [r for r in range(target.size) if _covered(target.magic, r)]
    pos = target.position + covered[data.draw(st.integers(0, len(covered) - 1), label="byte")]
    garbage = data.draw(st.binary(min_size=1, max_size=24), label="garbage")
    damaged = bytearray(log)
    damaged[pos : pos + len(garbage)] = garbage
    changed = [i for i in range(pos, pos + len(garbage)) if i >= len(log) or log[i] != damaged[i]]
    if not changed or changed[0] >= len(log):
        expected = len(log)  # nothing changed, or only bytes past the old end (a torn tail)
        event("garbage: log intact" if not changed else "garbage: only a tail past the end")
    else:
        hit = next(e for e in entries if e.position <= changed[0] < e.end)
        assume(any(_covered(hit.magic, c - hit.position) for c in changed if c < hit.end))
        expected = hit.position
        event(f"garbage: truncated at a v{hit.magic} batch")
    kept = [e for e in entries if e.end <= expected]
    with search_mode(mode), scratch_dir() as d, scratch_dir() as fresh:
        log_file(d, BASE).write_bytes(bytes(damaged))
        seg = LogSegment.open(d, BASE, FIXED_CFG)
        try:
            assert seg.recover() == len(damaged) - expected
            assert seg.size == expected
            assert seg.next_offset == (kept[-1].last_offset + 1 if kept else BASE)
            seg.sanity_check()
        finally:
            seg.close()
        assert log_file(d, BASE).read_bytes() == log[:expected]
        oidx, tidx, _ = recovery_indexes(kept, BASE, FIXED_CFG.index_interval_bytes, FIXED_CFG.segment_index_bytes)
        assert offset_index_file(d, BASE).read_bytes() == encode_offset_index(BASE, oidx)
        assert time_index_file(d, BASE).read_bytes() == encode_time_index(BASE, tidx)
        log_file(fresh, BASE).write_bytes(log[:expected])
        ref = LogSegment.open(fresh, BASE, FIXED_CFG)
        assert ref.recover() == 0
        ref.close()
        assert files_of(d, BASE) == files_of(fresh, BASE)


def _reference_dir(tmp_path: Path) -> Path:
    """A cleanly closed segment of the "txn" log whose indexes (with a .txnindex) came from
    recovery, checked equal to what append + close wrote."""
    ref = tmp_path / "ref"
    seg = write_segment(ref, SEEDS["txn"])
    seg.close()
    appended = files_of(ref, BASE)
    seg = LogSegment.open(ref, BASE, FIXED_CFG)
    assert seg.recover() == 0
    seg.close()
    recovered = files_of(ref, BASE)
    assert recovered[txn_index_file(ref, BASE).name]  # the aborted transactions
    assert {k: v for k, v in recovered.items() if not k.endswith(".txnindex")} == {
        k: v for k, v in appended.items() if not k.endswith(".txnindex")
    }
    return ref


def _patch(path: Path, at: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[at : at + len(data)] = data
    path.write_bytes(bytes(raw))


def _last(path: Path, size: int) -> int:
    return path.stat().st_size - size


CORRUPTIONS = {
    "index-length": (offset_index_file, lambda p: p.write_bytes(p.read_bytes() + b"\0\0\0")),
    "index-last-offset-below-base": (offset_index_file, lambda p: _patch(p, _last(p, 8), struct.pack(">i", -1))),
    "index-missing": (offset_index_file, lambda p: p.unlink()),
    "timeindex-length": (time_index_file, lambda p: p.write_bytes(p.read_bytes() + b"\1" * 5)),
    "timeindex-backwards": (
        time_index_file,
        lambda p: _patch(p, _last(p, 12), struct.pack(">q", struct.unpack_from(">q", p.read_bytes())[0] - 1)),
    ),
    "timeindex-last-offset-below-base": (time_index_file, lambda p: _patch(p, _last(p, 12) + 8, struct.pack(">i", -3))),
    "timeindex-missing": (time_index_file, lambda p: p.unlink()),
    "txnindex-length": (txn_index_file, lambda p: p.write_bytes(p.read_bytes() + b"\0")),
    "txnindex-version": (txn_index_file, lambda p: _patch(p, 0, struct.pack(">h", 1))),
    # Kafka's TransactionIndex.sanityCheck: no aborted transaction may end before the segment.
    "txnindex-last-offset-below-start": (txn_index_file, lambda p: _patch(p, 18, struct.pack(">q", BASE - 1))),
}


@pytest.mark.parametrize("mode", SEARCH_MODES)
@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupt_or_missing_index_is_reported_and_rebuilt(tmp_path, mode, corruption) -> None:
    """sanity_check raises CorruptIndexError naming the damaged (or missing) file; recover()
    truncates nothing and rebuilds all three indexes byte for byte."""
    ref = _reference_dir(tmp_path)
    work = tmp_path / "work"
    shutil.copytree(ref, work)
    file_of, damage = CORRUPTIONS[corruption]
    path = file_of(work, BASE)
    damage(path)
    with search_mode(mode):
        seg = LogSegment.open(work, BASE, FIXED_CFG)
        with pytest.raises(CorruptIndexError) as err:
            seg.sanity_check()
        assert err.value.file == str(path)
        assert str(path) in str(err.value)
        assert seg.recover() == 0
        seg.sanity_check()
        seg.close()
    assert files_of(work, BASE) == files_of(ref, BASE)


@pytest.mark.parametrize("mode", SEARCH_MODES)
@pytest.mark.parametrize("preallocate", [False, True], ids=["plain-log", "preallocated-log"])
def test_crash_leaves_untrimmed_files_and_recovery_restores_clean_close(tmp_path, mode, preallocate) -> None:
    """A copy taken while the segment is open is what a crash leaves: indexes at
    segment.index.bytes (and a preallocated log at segment.bytes). Reopened, an index counts its
    entries from its length, zeros included (Kafka's AbstractIndex); recover() removes the zero
    tail of the log, keeps every batch and writes exactly the files a clean close writes."""
    cfg = FIXED_CFG.replace(preallocate=preallocate)
    entries = SEEDS["mixed"]
    log = log_bytes(entries)
    live, crashed = tmp_path / "live", tmp_path / "crashed"
    seg = write_segment(live, entries, cfg)
    seg.flush()
    shutil.copytree(live, crashed)
    seg.close()
    clean = files_of(live, BASE)
    assert len(clean[log_file(live, BASE).name]) == len(log)

    assert offset_index_file(crashed, BASE).stat().st_size == 1024
    assert time_index_file(crashed, BASE).stat().st_size == 1020
    assert log_file(crashed, BASE).stat().st_size == (cfg.segment_bytes if preallocate else len(log))
    with search_mode(mode):
        seg = LogSegment.open(crashed, BASE, cfg)
        assert seg.offset_index.entries == 128 and seg.offset_index.entry(127) == OffsetPosition(BASE, 0)
        assert seg.time_index.entries == 85 and seg.time_index.entry(84) == TimestampOffset(0, BASE)
        before = seg.size
        assert before == os.path.getsize(seg.log.path)  # an existing file is taken at its length
        with contextlib.suppress(CorruptIndexError):  # Kafka 3.8 skips these checks and recovers anyway
            seg.sanity_check()
        assert seg.recover() == before - len(log)
        assert seg.size == len(log) and seg.next_offset == entries[-1].last_offset + 1
        seg.close()
    assert files_of(crashed, BASE) == clean


_CRASH_SCRIPT = """
import json, os, sys
from kafkalog import LogConfig, LogSegment, MemoryRecords
directory, base, cfg, data = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
seg = LogSegment.open(directory, base, LogConfig(**cfg))
with open(data, "rb") as f:
    seg.append_batches(MemoryRecords(f.read()))
os._exit(0)  # die without close or flush
"""


@pytest.mark.parametrize("mode", SEARCH_MODES)
def test_process_killed_without_close_recovers_to_clean_close(tmp_path, mode) -> None:
    """A process that appends to a preallocated segment and exits without closing leaves the
    log at segment.bytes and the indexes preallocated; recover() truncates exactly the zero tail
    and produces the clean-close files."""
    cfg = FIXED_CFG.replace(preallocate=True)
    entries = SEEDS["v2"]
    log = log_bytes(entries)
    data = tmp_path / "batches.bin"
    data.write_bytes(log)
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    subprocess.run(
        [sys.executable, "-c", _CRASH_SCRIPT, str(crashed), str(BASE), json.dumps(dataclasses.asdict(cfg)), str(data)],
        check=True,
        timeout=15,
    )
    seg = write_segment(tmp_path / "clean", entries, cfg)
    seg.close()
    clean = files_of(tmp_path / "clean", BASE)
    assert log_file(crashed, BASE).stat().st_size == cfg.segment_bytes
    with search_mode(mode):
        seg = LogSegment.open(crashed, BASE, cfg)
        assert seg.size == cfg.segment_bytes
        assert seg.offset_index.entries == cfg.segment_index_bytes // 8
        assert seg.recover() == cfg.segment_bytes - len(log)
        assert seg.next_offset == entries[-1].last_offset + 1
        seg.close()
    assert files_of(crashed, BASE) == clean


# ------------------------------------------------------------------------------------------------
# Zero-copy reads over a real loopback TCP connection


def serve(send) -> tuple[bytes, BaseException | None]:
    """Run ``send(conn)`` on the server end of a loopback TCP connection; return everything the
    client received until the server closed, and the exception ``send`` raised (or None)."""
    received = bytearray()
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(10)
        port = server.getsockname()[1]

        def client() -> None:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
                while chunk := c.recv(65536):
                    received.extend(chunk)

        thread = threading.Thread(target=client, daemon=True)
        thread.start()
        conn, _ = server.accept()
        error = None
        with conn:
            conn.setblocking(True)
            try:
                send(conn)
            except Exception as e:  # handed back to the test
                error = e
        thread.join(10)
        assert not thread.is_alive()
    return bytes(received), error


def send_all(records: FileRecords, conn: socket.socket) -> None:
    total, sent = records.size_in_bytes, 0
    while sent < total:
        n = records.transfer_to(conn, sent, total - sent)
        assert n > 0
        sent += n


@pytest.fixture
def sendfile_calls(monkeypatch) -> list[tuple[int, int, int]]:
    """Count the os.sendfile calls kafkalog.sendfile makes: (offset, count, sent)."""
    calls: list[tuple[int, int, int]] = []
    real = os.sendfile

    def counting(out_fd, in_fd, offset, count):
        n = real(out_fd, in_fd, offset, count)
        calls.append((offset, count, n))
        return n

    monkeypatch.setattr(kafkalog.sendfile.os, "sendfile", counting)
    return calls


def _big_seed() -> list[Entry]:
    entries, offset = [], BASE
    for n in range(40):
        records = [(offset + i, BASE_TS + n, None, value_for(offset + i, 300 + 40 * (n % 7))) for i in range(3)]
        entries.extend(build(2, Compression.NONE if n % 3 else Compression.GZIP, records))
        offset += 3
    return place(entries)


@pytest.mark.parametrize("mode", SEARCH_MODES)
def test_read_slices_go_out_zero_copy_byte_identical(tmp_path, mode, sendfile_calls) -> None:
    """Slices from read() sent with transfer_to over TCP arrive byte for byte as the file range
    holds them: the whole segment, a slice ending mid-file (and mid-batch), a read bounded by
    max_position, one batch by min_one_message, and a partial range of a slice; each by
    os.sendfile."""
    entries = _big_seed()
    with search_mode(mode):  # indexes pick their search path when they open
        seg = write_segment(tmp_path, entries)
    raw = log_file(tmp_path, BASE).read_bytes()
    mid = entries[len(entries) // 2]
    cases = [
        (BASE, 10**7, None, True, (0, len(raw))),
        (mid.last_offset - 1, 5_000, None, False, (mid.position, 5_000)),
        (mid.last_offset, 10**7, entries[-5].end, True, (mid.position, entries[-5].end - mid.position)),
        (entries[3].last_offset, 1, None, True, (entries[3].position, entries[3].size)),
    ]
    with search_mode(mode):
        for start, max_size, max_position, min_one, (position, size) in cases:
            sl = seg.read(start, max_size, max_position=max_position, min_one_message=min_one)
            assert (sl.start, sl.size_in_bytes) == (position, size)
            before = len(sendfile_calls)
            received, error = serve(lambda conn: send_all(sl, conn))
            assert error is None
            assert received == raw[position : position + size]
            assert sum(n for _, _, n in sendfile_calls[before:]) == size
        assert entries[len(entries) // 2].position + 5_000 < len(raw)  # that slice ended mid-file
        sl = seg.read(mid.last_offset, 10**7)
        received, error = serve(lambda conn: sl.transfer_to(conn, 100, 1_000))
        assert error is None and received == raw[mid.position + 100 : mid.position + 1_100]
    seg.close()


def test_transfer_after_truncation_underneath_raises(tmp_path, sendfile_calls) -> None:
    """A log truncated on disk between read() and transfer_to into the slice: TruncatedRecordError
    naming the file, and not a byte is sent. A truncation past the slice's end is harmless."""
    entries = _big_seed()
    seg = write_segment(tmp_path, entries)
    path = log_file(tmp_path, BASE)
    raw = path.read_bytes()
    early = seg.read(entries[2].last_offset, 10**7, max_position=entries[10].end)
    late = seg.read(entries[20].last_offset, 10**7)
    os.truncate(path, entries[15].position + 7)
    received, error = serve(lambda conn: early.transfer_to(conn, 0, early.size_in_bytes))
    assert error is None and received == raw[entries[2].position : entries[10].end]
    calls = len(sendfile_calls)
    received, error = serve(lambda conn: late.transfer_to(conn, 0, late.size_in_bytes))
    assert isinstance(error, TruncatedRecordError)
    assert error.file == str(path) and str(path) in str(error)
    assert received == b""
    assert len(sendfile_calls) == calls
    seg.close()


# ------------------------------------------------------------------------------------------------
# Rolling, becoming inactive, preallocation


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _roll(
    seg: LogSegment, *, size: int = 0, ts: int = BASE_TS, offset: int | None = None, now: int | None = None, **kw
) -> bool:
    return seg.should_roll(
        messages_size=size,
        max_timestamp_in_messages=ts,
        max_offset_in_messages=seg.base_offset if offset is None else offset,
        now_ms=now,
        **kw,
    )


def test_should_roll_on_size(tmp_path) -> None:
    """Roll when size > segment.bytes - messages_size (strictly), also for an empty segment
    offered more than segment.bytes."""
    seg = LogSegment.open(tmp_path, 0, LogConfig(segment_bytes=1_000))
    assert not _roll(seg, size=1_000)
    assert _roll(seg, size=1_001)
    seg.append_batches(_single(0, BASE_TS))
    assert not _roll(seg, size=1_000 - seg.size)
    assert _roll(seg, size=1_000 - seg.size + 1)
    assert not _roll(seg, size=10, max_segment_bytes=seg.size + 10)
    assert _roll(seg, size=11, max_segment_bytes=seg.size + 10)
    seg.close()


@pytest.mark.parametrize("jitter", [0, 25])
def test_should_roll_on_time(tmp_path, jitter) -> None:
    """Time rolling: never for an empty segment; by the first batch's timestamp when it has one
    (after a reopen too, loaded from the file), else by the injected clock since creation or
    since a truncation emptied the segment; segment.ms minus the jitter, strictly exceeded."""
    clock = Clock(10_000)
    cfg = LogConfig(segment_ms=1_000)
    limit = 1_000 - jitter
    seg = LogSegment.open(tmp_path, 0, cfg, roll_jitter_ms=jitter, clock=clock)
    clock.now += 10**9
    assert not _roll(seg, ts=BASE_TS + 10**9)
    assert not _roll(seg)
    seg.append_batches(_single(0, BASE_TS))
    seg.append_batches(_single(1, BASE_TS + 5_000))
    assert not _roll(seg, ts=BASE_TS + limit)  # the clock is far on: only timestamps count
    assert _roll(seg, ts=BASE_TS + limit + 1)
    seg.close()
    seg = LogSegment.open(tmp_path, 0, cfg, roll_jitter_ms=jitter, clock=clock)
    seg.resize_indexes(cfg.segment_index_bytes)  # trimmed indexes would force a roll
    assert not _roll(seg, ts=BASE_TS + limit)
    assert _roll(seg, ts=BASE_TS + limit + 1)
    # Truncated to empty: the creation time restarts from the clock.
    clock.now += 12_345
    assert seg.truncate_to(0) > 0
    seg.append_batches(_single(0, -1))  # no timestamp: the clock decides
    start = clock.now
    assert not _roll(seg, ts=BASE_TS + 10**9, now=start + limit)
    assert _roll(seg, ts=0, now=start + limit + 1)
    clock.now = start + limit + 1
    assert _roll(seg)  # now_ms defaults to the injected clock
    assert not _roll(seg, max_segment_ms=limit + jitter + 1)
    seg.close()


def test_should_roll_when_offset_index_full(tmp_path) -> None:
    """36 bytes of index: 4 offset entries, 3 time slots. With one timestamp the time index holds
    one entry; the fourth offset entry fills the offset index and the segment must roll."""
    seg = LogSegment.open(tmp_path, 0, LogConfig(segment_index_bytes=36, index_interval_bytes=0))
    for offset in range(5):
        assert not _roll(seg, offset=offset)
        seg.append_batches(_single(offset, BASE_TS, 20))
    assert seg.offset_index.entries == 4 and seg.offset_index.is_full
    assert seg.time_index.entries == 1 and not seg.time_index.is_full
    assert _roll(seg, offset=5)
    seg.close()


def test_should_roll_when_time_index_full_keeping_one_slot(tmp_path) -> None:
    """The time index counts as full one entry early, so the segment rolls while the offset
    index still has room; the last slot is kept for the entry added on roll."""
    seg = LogSegment.open(tmp_path, 0, LogConfig(segment_index_bytes=36, index_interval_bytes=0))
    for offset in range(3):
        assert not _roll(seg, offset=offset)
        seg.append_batches(_single(offset, BASE_TS + offset, 20))
    ti = seg.time_index
    assert (ti.entries, ti.max_entries, ti.is_full) == (2, 3, True)
    assert not seg.offset_index.is_full
    assert _roll(seg, offset=3)
    seg.on_become_inactive()
    seg.close()
    assert time_index_file(tmp_path, 0).stat().st_size == 2 * 12


def test_time_index_last_slot_only_with_skip_full_check(tmp_path) -> None:
    """TimeIndex.maybe_append refuses the last slot unless skip_full_check (the roll entry), and
    nothing fits beyond it."""
    ti = TimeIndex(tmp_path / "t.timeindex", 0, 36)
    assert ti.maybe_append(10, 1) and ti.maybe_append(20, 2)
    assert ti.is_full
    with pytest.raises(InvalidOffsetError):
        ti.maybe_append(30, 3)
    assert not ti.maybe_append(20, 3, skip_full_check=True)  # not a larger timestamp: nothing to add
    assert ti.maybe_append(30, 3, skip_full_check=True)
    with pytest.raises(InvalidOffsetError):
        ti.maybe_append(40, 4, skip_full_check=True)
    assert [ti.entry(i) for i in range(ti.entries)] == [(10, 1), (20, 2), (30, 3)]
    ti.close()


def test_should_roll_on_relative_offset_overflow(tmp_path) -> None:
    """Offsets must fit base + [0, 2**31-1]; appending beyond raises before writing anything."""
    base = 1_000
    seg = LogSegment.open(tmp_path, base, LogConfig())
    assert not _roll(seg, offset=base + INT32_MAX)
    assert _roll(seg, offset=base + INT32_MAX + 1)
    assert _roll(seg, offset=base - 1)
    batch = _single(base + INT32_MAX + 1, BASE_TS)
    with pytest.raises(InvalidOffsetError):
        seg.append(
            batch,
            largest_offset=base + INT32_MAX + 1,
            largest_timestamp=BASE_TS,
            offset_of_max_timestamp=base + INT32_MAX + 1,
        )
    assert seg.size == 0
    seg.close()


def test_on_become_inactive_adds_final_time_entry_and_trims(tmp_path) -> None:
    """on_become_inactive: a time entry for a max timestamp reached after the last index entry,
    then both indexes trimmed to their entries."""
    seg = LogSegment.open(tmp_path, 0, LogConfig(index_interval_bytes=300))
    for offset in range(3):
        seg.append_batches(_single(offset, BASE_TS + offset))  # 270 bytes each: only 2 is indexed
    seg.append(_single(3, BASE_TS + 100), largest_offset=3, largest_timestamp=BASE_TS + 100, offset_of_max_timestamp=3)
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == [(2, 540)]
    before = [seg.time_index.entry(i) for i in range(seg.time_index.entries)]
    assert before[-1] != TimestampOffset(BASE_TS + 100, 3)
    seg.on_become_inactive()
    after = [seg.time_index.entry(i) for i in range(seg.time_index.entries)]
    assert after == before + [TimestampOffset(BASE_TS + 100, 3)]
    assert offset_index_file(tmp_path, 0).stat().st_size == 1 * 8
    assert time_index_file(tmp_path, 0).stat().st_size == (len(before) + 1) * 12
    assert _roll(seg, offset=4)  # trimmed indexes are full
    seg.close()
    assert time_index_file(tmp_path, 0).stat().st_size == (len(before) + 1) * 12


def test_preallocated_log(tmp_path) -> None:
    """preallocate=True: a new .log is created at segment.bytes with size 0; reads see only the
    records; on_become_inactive and close() both trim it (Kafka's FileRecords.trim/close);
    reopening an existing file does not preallocate again."""
    cfg = LogConfig(segment_bytes=16 * 1024, preallocate=True, index_interval_bytes=100)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for directory, finish in ((a, "inactive"), (b, "close")):
        seg = LogSegment.open(directory, 0, cfg)
        path = log_file(directory, 0)
        assert path.stat().st_size == cfg.segment_bytes and seg.size == 0
        assert seg.read(0, 100) is None and seg.next_offset == 0
        for offset in range(4):
            seg.append_batches(_single(offset, BASE_TS + offset))
        assert seg.size == 4 * 270 and path.stat().st_size == cfg.segment_bytes
        assert [b.position for b in seg.read(0, 10**6).batches()] == [0, 270, 540, 810]
        assert seg.next_offset == 4
        if finish == "inactive":
            seg.on_become_inactive()
            assert path.stat().st_size == seg.size
        seg.close()
        assert path.stat().st_size == 4 * 270
        seg = LogSegment.open(directory, 0, cfg)
        assert seg.size == 4 * 270 == path.stat().st_size
        seg.close()


def test_reopened_segment_opens_its_indexes_lazily(tmp_path) -> None:
    """Opening an existing segment touches no index file until one is used."""
    seg = write_segment(tmp_path, SEEDS["v2"])
    seg.close()
    stats = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in segment_files(tmp_path, BASE)[:3]}
    seg = LogSegment.open(tmp_path, BASE, FIXED_CFG)
    assert "not opened" in repr(seg.offset_index) and "not opened" in repr(seg.time_index)
    assert seg.size == len(log_bytes(SEEDS["v2"]))
    assert {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in stats} == stats
    assert seg.translate_offset(BASE).position == 0
    assert "not opened" not in repr(seg.offset_index)
    seg.close()
    assert {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in stats} == stats


@pytest.mark.parametrize("mode", SEARCH_MODES)
def test_index_lookups_agree_beyond_the_warm_section(tmp_path, mode) -> None:
    """Indexes larger than Kafka's 8 KiB warm section: every lookup (scalar and vectorised)
    equals a brute-force floor search, on both search paths."""
    n = 3_000
    with search_mode(mode):  # indexes pick their search path when they open
        oi = OffsetIndex(tmp_path / "a.index", 100, n * 8)
        ti = TimeIndex(tmp_path / "a.timeindex", 100, (n + 1) * 12)
        for i in range(n):
            oi.append(100 + 3 * i + 1, 50 * i)
            ti.maybe_append(BASE_TS + 5 * i, 100 + 3 * i + 1)
    offsets = [100 + 3 * i + 1 for i in range(n)]
    with search_mode(mode):
        targets = list(range(90, 100 + 3 * n + 5, 7)) + [100 + 3 * (n - 1) + 1, 101, 102]
        for t in targets:
            k = sum(1 for o in offsets if o <= t) - 1
            assert oi.lookup(t) == (OffsetPosition(100, 0) if k < 0 else OffsetPosition(offsets[k], 50 * k))
        got_o, got_p = oi.lookup_many(np.array(targets))
        assert list(zip(got_o.tolist(), got_p.tolist())) == [tuple(oi.lookup(t)) for t in targets]
        for t in range(BASE_TS - 10, BASE_TS + 5 * n + 10, 11):
            k = min(n - 1, (t - BASE_TS) // 5) if t >= BASE_TS else -1
            assert ti.lookup(t) == (TimestampOffset(-1, 100) if k < 0 else TimestampOffset(BASE_TS + 5 * k, offsets[k]))
    oi.close()
    ti.close()


# ------------------------------------------------------------------------------------------------
# File suffixes and deletion


def test_change_file_suffixes_and_back_keeps_the_segment_usable(tmp_path) -> None:
    """Renaming every file to ``.deleted`` and back keeps the segment's content and indexes: the
    active segment's preallocated indexes keep their entries across the rename, as Kafka's
    renameTo keeps the memory map; appends and close still work."""
    seg = write_segment(tmp_path, SEEDS["txn"])
    seg.update_txn_index(7, BASE, BASE + 3, BASE + 4)
    entries = SEEDS["txn"]
    offsets = [o for e in entries for o, _ in e.records]

    def state():
        oi, ti = seg.offset_index, seg.time_index
        return (
            [oi.entry(i) for i in range(oi.entries)],
            [ti.entry(i) for i in range(ti.entries)],
            [seg.translate_offset(o) for o in offsets],
            seg.next_offset,
            seg.txn_index.all_aborted_txns(),
        )

    before = state()
    counts = (seg.offset_index.entries, seg.time_index.entries)
    for old, new in (("", ".deleted"), (".deleted", "")):
        seg.change_file_suffixes(old, new)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in segment_files(tmp_path, BASE, new))
        assert (seg.offset_index.entries, seg.time_index.entries) == counts
        assert state() == before
    with pytest.raises(ValueError):
        seg.change_file_suffixes(".cleaned", ".swap")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in segment_files(tmp_path, BASE))
    seg.append_batches(_single(entries[-1].last_offset + 1, BASE_TS))
    seg.close()
    seg = LogSegment.open(tmp_path, BASE, FIXED_CFG)
    seg.sanity_check()
    assert seg.next_offset == entries[-1].last_offset + 2
    seg.delete_if_exists()
    assert list(tmp_path.iterdir()) == []
    seg.delete_if_exists()  # idempotent


def test_change_file_suffixes_of_a_closed_segment(tmp_path) -> None:
    """A trimmed (inactive) segment renamed to ``.deleted`` reopens under the new names."""
    seg = write_segment(tmp_path, SEEDS["v2"])
    seg.close()
    seg = LogSegment.open(tmp_path, BASE, FIXED_CFG)
    seg.change_file_suffixes("", ".deleted")
    assert seg.read(BASE, 10**6).size_in_bytes == len(log_bytes(SEEDS["v2"]))
    seg.close()
    reopened = LogSegment.open(tmp_path, BASE, FIXED_CFG, suffix=".deleted")
    reopened.sanity_check()
    assert reopened.recover() == 0
    assert reopened.next_offset == SEEDS["v2"][-1].last_offset + 1
    reopened.delete_if_exists()
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------------
# LogConfig


def test_log_config_defaults_are_kafkas() -> None:
    """Defaults are Kafka 3.8's topic defaults."""
    cfg = LogConfig()
    assert (
        cfg.segment_bytes,
        cfg.segment_ms,
        cfg.segment_jitter_ms,
        cfg.segment_index_bytes,
        cfg.index_interval_bytes,
        cfg.preallocate,
        cfg.max_message_bytes,
    ) == (1073741824, 604800000, 0, 10485760, 4096, False, 1048588)
    assert LogConfig.from_properties({}) == cfg


def test_log_config_from_properties() -> None:
    """Kafka's dotted names, string values (whitespace, any-case booleans), unknown keys ignored,
    keyword overrides last."""
    cfg = LogConfig.from_properties(
        {
            "segment.bytes": " 1048576 ",
            "segment.ms": "3600000",
            "segment.jitter.ms": 5,
            "segment.index.bytes": "4",
            "index.interval.bytes": "0",
            "preallocate": "TRUE",
            "max.message.bytes": "0",
            "cleanup.policy": "compact",
        },
        segment_ms=1,
    )
    assert cfg == LogConfig(
        segment_bytes=1048576,
        segment_ms=1,
        segment_jitter_ms=5,
        segment_index_bytes=4,
        index_interval_bytes=0,
        preallocate=True,
        max_message_bytes=0,
        cleanup_policy=("compact",),
    )
    assert LogConfig.from_properties({"no.such.key": "x"}) == LogConfig()  # unknown keys are ignored
    assert LogConfig.from_properties({"preallocate": "false", "segment.bytes": "14"}).segment_bytes == 14
    assert LogConfig.from_properties({"segment.bytes": str(INT32_MAX)}).segment_bytes == INT32_MAX


@pytest.mark.parametrize(
    ("key", "value", "range_text"),
    [
        ("segment.bytes", "13", "[14, 2147483647]"),
        ("segment.bytes", str(2**31), "[14, 2147483647]"),
        ("segment.bytes", "1.5", "[14, 2147483647]"),
        ("segment.bytes", "abc", "[14, 2147483647]"),
        ("segment.ms", "0", "[1, 9223372036854775807]"),
        ("segment.jitter.ms", "-1", "[0, 9223372036854775807]"),
        ("segment.index.bytes", "3", "[4, 2147483647]"),
        ("index.interval.bytes", "-1", "[0, 2147483647]"),
        ("max.message.bytes", "-1", "[0, 2147483647]"),
        ("preallocate", "yes", "true or false"),
    ],
)
def test_log_config_rejects_bad_values(key, value, range_text) -> None:
    """A bad value is an InvalidConfigError naming the key, the value and the allowed range."""
    with pytest.raises(InvalidConfigError) as err:
        LogConfig.from_properties({key: value})
    assert key in str(err.value) and range_text in str(err.value) and value in str(err.value)


def test_log_config_constructor_validates() -> None:
    """The constructor (and replace) validate too, naming the field; bools are not integers."""
    for bad in (
        dict(segment_bytes=13),
        dict(segment_bytes=True),
        dict(segment_bytes="1024"),
        dict(segment_ms=0),
        dict(segment_index_bytes=2**31),
        dict(preallocate=1),
    ):
        with pytest.raises(InvalidConfigError) as err:
            LogConfig(**bad)
        (field,) = bad
        assert field in str(err.value)
    with pytest.raises(InvalidConfigError):
        LogConfig().replace(index_interval_bytes=-1)


def test_index_smaller_than_an_entry_cannot_be_created(tmp_path) -> None:
    """segment.index.bytes = 4 is a valid setting, but a new index needs room for one entry
    (Kafka's AbstractIndex: "Invalid max index size")."""
    with pytest.raises(InvalidOffsetError):
        LogSegment.open(tmp_path, 0, LogConfig(segment_index_bytes=4))


def test_plain_search_env_selects_kafkas_search(tmp_path, monkeypatch) -> None:
    """KAFKALOG_INDEX_SEARCH=plain makes lookups use Kafka's warm-first binary search (the other
    tests rely on it to cover both paths)."""
    import kafkalog.index as index_module

    calls = []
    real = index_module._Index._plain_search

    def counting(self, *args):
        calls.append(args)
        return real(self, *args)

    monkeypatch.setattr(index_module._Index, "_plain_search", counting)
    for mode, used in (("default", False), ("plain", True)):
        with search_mode(mode):
            seg = write_segment(tmp_path / mode, SEEDS["v2"])
            calls.clear()
            assert seg.translate_offset(SEEDS["v2"][-1].last_offset).position == SEEDS["v2"][-1].position
            assert seg.find_offset_by_timestamp(BASE_TS) is not None
            assert bool(calls) == used
            seg.close()


# ------------------------------------------------------------------------------------------------
# Smaller contracts


def test_recover_rebuilds_aborted_transactions(tmp_path) -> None:
    """Recovery indexes each aborted transaction as Kafka's producer state does: (producer, first
    offset of the transaction, marker offset, last stable offset = marker + 1 when no other
    transaction is open); collect_aborted_txns returns those overlapping the fetch range."""
    entries = SEEDS["txn"]
    expected, first = [], None
    for e in entries:
        attributes = struct.unpack_from(">h", e.data, 21)[0]
        if attributes & 0x20:  # an ABORT marker of producer 7
            expected.append((7, first, e.last_offset, e.last_offset + 1))
            first = None
        elif attributes & 0x10 and first is None:
            first = e.records[0][0]
    assert len(expected) >= 3
    log_file(tmp_path, BASE).write_bytes(log_bytes(entries))
    seg = LogSegment.open(tmp_path, BASE, FIXED_CFG)
    assert seg.recover() == 0
    assert [tuple(t) for t in seg.txn_index.all_aborted_txns()] == expected
    found, complete = seg.collect_aborted_txns(BASE, seg.next_offset)
    assert [tuple(t) for t in found] == expected and complete
    second = expected[1]
    found, _ = seg.collect_aborted_txns(second[1], second[2])
    assert [tuple(t) for t in found] == [expected[0], second][expected[0][2] < second[1] :]
    seg.close()
    seg.close()  # closing twice is harmless


def test_recover_with_max_message_size_truncates_at_first_oversized_batch(tmp_path) -> None:
    """recover(max_message_size): a batch whose size field exceeds the limit counts as corrupt,
    so the log is truncated at the first such batch."""
    entries = SEEDS["v2"]
    limit = entries[0].size - 12  # the first batch just fits
    cut = next(e.position for e in entries if e.size - 12 > limit)
    assert 0 < cut < len(log_bytes(entries))
    log_file(tmp_path, BASE).write_bytes(log_bytes(entries))
    seg = LogSegment.open(tmp_path, BASE, FIXED_CFG)
    assert seg.recover(max_message_size=limit) == len(log_bytes(entries)) - cut
    assert seg.size == cut
    seg.close()


def test_read_only_segment_reads_and_writes_nothing(tmp_path) -> None:
    """A read-only segment answers reads and lookups and leaves every file as it was, even an
    untrimmed active segment's (no trim, no final time entry on close)."""
    entries = SEEDS["mixed"]
    seg = write_segment(tmp_path, entries)
    seg.flush()
    before = files_of(tmp_path, BASE)
    ro = LogSegment.open(tmp_path, BASE, FIXED_CFG, read_only=True)
    assert "base_offset=50" in repr(ro)
    assert ro.next_offset == entries[-1].last_offset + 1
    assert ro.read(entries[4].last_offset, 1).start == entries[4].position
    assert tuple(ro.find_offset_by_timestamp(BASE_TS - 10**6)) == (entries[0].records[0][1], BASE, None)
    ro.close()
    assert files_of(tmp_path, BASE) == before
    seg.close()


def test_read_argument_checks_and_empty_append(tmp_path) -> None:
    """read() rejects a negative max_size (Kafka's IllegalArgumentException) and answers None
    past the end; appending no bytes changes nothing."""
    seg = write_segment(tmp_path, SEEDS["v2"])
    size = seg.size
    with pytest.raises(ValueError):
        seg.read(BASE, -1)
    assert seg.read(SEEDS["v2"][-1].last_offset + 1, 100) is None
    assert seg.read(BASE, 0, min_one_message=False).size_in_bytes == 0
    seg.append(MemoryRecords(b""), largest_offset=BASE, largest_timestamp=BASE_TS, offset_of_max_timestamp=BASE)
    assert seg.size == size
    seg.close()


@pytest.mark.parametrize("fail", ["log", "offset_index", "time_index"])
def test_append_batches_of_many_batches_leaves_nothing_when_a_write_fails(tmp_path, monkeypatch, fail) -> None:
    """append_batches writes many batches at once: a write failing (ENOSPC) in the log or either
    index leaves the segment as it was, and the same append then succeeds with the same files as
    one append per batch."""
    import errno

    cfg = LogConfig(index_interval_bytes=100)
    many = MemoryRecords(b"".join(bytes(_single(i, BASE_TS + i).buffer) for i in range(1, 6)))

    def files(directory: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}

    want_dir, got_dir = tmp_path / "want", tmp_path / "got"
    want_dir.mkdir()
    got_dir.mkdir()
    want = LogSegment.open(want_dir, 0, cfg)
    want.append_batches(_single(0, BASE_TS))
    for i in range(1, 6):
        want.append_batches(_single(i, BASE_TS + i))
    want.close()
    seg = LogSegment.open(got_dir, 0, cfg)
    seg.append_batches(_single(0, BASE_TS))
    size = seg.size
    entries = (seg.offset_index.entries, seg.time_index.entries)
    target = {"log": seg.log, "offset_index": seg.offset_index, "time_index": seg.time_index}[fail]
    name = "append" if fail == "log" else ("append" if fail == "offset_index" else "maybe_append")
    real = getattr(target, name)
    calls = []

    def failing(*args, **kw):
        calls.append(args)
        if fail == "log" or len(calls) == 2:  # the index's second entry of this append
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kw)

    monkeypatch.setattr(target, name, failing)
    with pytest.raises(OSError):
        seg.append_batches(many)
    assert calls
    monkeypatch.undo()
    assert seg.size == size and (seg.offset_index.entries, seg.time_index.entries) == entries
    seg.append_batches(many)
    seg.close()
    assert files(got_dir) == files(want_dir)


@given(
    batches=st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(1, 5), st.integers(-1, 2**40)), min_size=0, max_size=8),
    cut=st.integers(0, 80),
    flip=st.none() | st.tuples(st.integers(0, 200), st.integers(1, 255)),
)
def test_batch_extents_agree_with_the_batch_iterator(batches, cut, flip):
    """append_batches' header read without batch objects gives what batches() gives, and at
    bytes that do not frame defers to it (same error)."""
    from kafkalog import MemoryRecords, RecordBatchBuilder
    from kafkalog.errors import KafkalogError
    from kafkalog.segment import _batch_extents

    data, base = bytearray(), 0
    for magic, count, ts in batches:
        b = RecordBatchBuilder(magic=magic, base_offset=base)
        for i in range(count):
            b.append(b"k", b"v" * i, timestamp=max(ts, 0) + i)
        data += b.build().buffer
        base += count
    if cut and cut < len(data):
        data = data[: len(data) - cut]
    if flip is not None and data:
        data[flip[0] % len(data)] ^= flip[1]
    records = MemoryRecords(bytes(data))

    def outcome(fn):
        try:
            return fn()
        except KafkalogError as e:
            return type(e), str(e)

    assert outcome(lambda: _batch_extents(records)) == outcome(
        lambda: [(b.last_offset, b.max_timestamp, b.size_in_bytes) for b in records.batches()])
