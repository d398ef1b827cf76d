"""The one-call append (``_native.append_request``) against its pure twin
(``kafkalog.append_request.append_request_py``), and logs appended through it on both cores.

Differential properties, with hypothesis: a leader's or a follower's request, random or damaged,
against random segment states (size, index counters, the segment's max timestamp, the roll
settings) gives the same result tuple and byte-identical log and index files on both, or the
compiled call declines (None) or refuses (Invalid, and the twin raises a typed error); an
injected ENOSPC or short write at any write gives the same failure and the same bytes; and
whole logs appended by both cores (leaders and followers, idempotent producers, rolls, full
disks) have identical files, append infos, producer state and leader epochs.
"""

from __future__ import annotations

import errno
import os
import struct

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from kafkalog import Compression, Log, LogConfig, native
from kafkalog.append_request import FAILED, PREPARED, ROLL, WRITTEN, append_request_py, compressed_records
from kafkalog.errors import KafkalogError
from kafkalog.memory_records import MemoryRecords
from kafkalog.memory_records_builder import RecordBatchBuilder
from kafkalog.record import MAGIC_V2, TimestampType
from kafkalog.recordbatch import set_base_offset
from conftest import examples
from test_native_append import NOW, _fix_crc, configs, requests

pytestmark = pytest.mark.skipif(not native.available(), reason="kafkalog._native is not built")

#: These tests compare the cores themselves.
SWITCHES_CORES = True

OFFSET_ENTRY, TIME_ENTRY = 8, 12


def _renumber(data: bytes, start: int, gaps: list[int]) -> bytes:
    """The batches of ``data`` with base offsets continuing from ``start`` (a follower's fetch:
    offsets set by the leader; the base offset lies outside the CRC)."""
    buf = bytearray(data)
    offset, k, at = start, 0, 0
    for batch in MemoryRecords(bytes(buf)).batches():
        set_base_offset(buf, at, offset)
        offset += batch.last_offset_delta + 1 + gaps[k % len(gaps)]
        k += 1
        at += batch.size_in_bytes
    return bytes(buf)


@st.composite
def segment_states(draw) -> dict:
    """A random active segment: bytes already in it, index entries, counters, roll settings."""
    size = draw(st.sampled_from([0, 0, 61, 5000]))
    oi_entries = draw(st.integers(0, 3))
    if draw(st.booleans()):  # a segment the request fits (the common case: the compiled write)
        return dict(
            size=size, base_offset=0, max_segment_bytes=1 << 30, roll_ts=draw(st.sampled_from([-1, NOW - 10])),
            roll_ms=2**62, index_interval=draw(st.sampled_from([4096, 0, 100])),
            bytes_since=draw(st.sampled_from([0, 50, 5000])), oi_entries=oi_entries, oi_capacity=10, oi_last_offset=0,
            ti_entries=oi_entries, ti_capacity=10, ti_last=(NOW - 10**6, 0) if oi_entries else (-1, 0),
            seg_max=draw(st.sampled_from([(-1, -1), (NOW - 10**6, 0)])),
        )
    return dict(
        size=size,
        base_offset=draw(st.sampled_from([0, 50])),
        max_segment_bytes=draw(st.sampled_from([1 << 30, 6000, 200])),
        roll_ts=draw(st.sampled_from([-1, NOW - 10_000, 0])),
        roll_ms=draw(st.sampled_from([2**62, 5_000])),
        index_interval=draw(st.sampled_from([4096, 0, 100])),
        bytes_since=draw(st.sampled_from([0, 50, 5000])),
        oi_entries=oi_entries,
        oi_capacity=draw(st.sampled_from([10, oi_entries + 1, oi_entries])),
        oi_last_offset=draw(st.sampled_from([0, 99, 10**6])),
        ti_entries=draw(st.integers(0, 3)),
        ti_capacity=draw(st.sampled_from([10, 2])),
        ti_last=draw(st.sampled_from([(-1, 0), (NOW - 20_000, 60), (NOW + 10**6, 100), (NOW, 10**6)])),
        seg_max=draw(st.sampled_from([(-1, -1), (NOW - 30_000, 55), (NOW + 10**7, 120)])),
    )


class _Files:
    """A segment's three files on disk, opened, as a segment job describes them."""

    def __init__(self, root, state: dict) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.paths = [root / "s.log", root / "s.index", root / "s.timeindex"]
        self.paths[0].write_bytes(b"\x5a" * state["size"])
        self.paths[1].write_bytes(b"\x11" * (OFFSET_ENTRY * state["oi_entries"]) + bytes(OFFSET_ENTRY * 12))
        self.paths[2].write_bytes(b"\x22" * (TIME_ENTRY * state["ti_entries"]) + bytes(TIME_ENTRY * 12))
        self.fds = [os.open(p, os.O_RDWR) for p in self.paths]
        s = state
        self.job = (
            self.fds[0], s["size"], s["base_offset"], s["max_segment_bytes"], s["roll_ts"], s["roll_ms"],
            s["index_interval"], s["bytes_since"], self.fds[1], s["oi_entries"], s["oi_capacity"], s["oi_last_offset"],
            self.fds[2], s["ti_entries"], s["ti_capacity"], *s["ti_last"], *s["seg_max"],
        )

    def contents(self) -> list[bytes]:
        for fd in self.fds:
            os.close(fd)
        return [p.read_bytes() for p in self.paths]


def _run(data: bytes, config: LogConfig, state: dict, *, pure: bool, root, leader: bool, log_end: int,
         leader_epoch, from_client: bool, write=None):
    """One core's outcome: ``(result or error type, files)``; the compiled core's None (it
    declines) and Invalid (it refuses) are returned as such. A leader's compressed request
    reaches the compiled call with its records decompressed, as ``append_request`` hands them."""
    files = _Files(root / ("pure" if pure else "native"), state)
    try:
        if pure:
            with pytest.MonkeyPatch.context() as patch:
                if write is not None:
                    patch.setattr(os, "pwrite", write)
                try:
                    out = append_request_py(
                        memoryview(data), leader=leader, log_end_offset=log_end, log_start_offset=0, config=config,
                        now_ms=NOW, leader_epoch=leader_epoch, from_client=from_client, segment=files.job,
                        partition="t-0", file="t-0",
                    )
                except KafkalogError as e:
                    out = type(e)
        else:
            try:
                out = native._compiled.append_request(
                    data, leader, log_end, NOW, config.max_message_bytes, config.log_append_time,
                    config.timestamp_before_max_ms, config.timestamp_after_max_ms, config.compact, from_client,
                    leader_epoch is not None, -1 if leader_epoch is None else leader_epoch, files.job, write,
                    compressed_records(memoryview(data), config, "t-0") if leader else None,
                )
            except native.Invalid:
                out = native.Invalid
            except OverflowError:
                out = None
    finally:
        contents = files.contents()
    if isinstance(out, tuple) and out[0] in (PREPARED, ROLL) and out[10] is not None:
        out = out[:10] + (bytes(out[10]),) + out[11:]
    return (tuple(out) if isinstance(out, tuple) else out), contents


def _compare(data, config, state, root, *, leader, log_end, leader_epoch=None, from_client=True, write=None):
    compiled = _run(data, config, state, pure=False, root=root, leader=leader, log_end=log_end,
                    leader_epoch=leader_epoch, from_client=from_client, write=write)
    pure = _run(data, config, state, pure=True, root=root, leader=leader, log_end=log_end,
                leader_epoch=leader_epoch, from_client=from_client, write=write)
    event("compiled: " + ("declined" if compiled[0] is None else "refused" if compiled[0] is native.Invalid
                          else ("written", "prepared", "roll", "failed")[compiled[0][0]]))
    if compiled[0] is None:
        return pure  # the compiled call declined: the twin takes it (checked by the log tests)
    if compiled[0] is native.Invalid:
        assert isinstance(pure[0], type) and issubclass(pure[0], KafkalogError), pure[0]
        assert compiled[1] == pure[1]  # nothing written by either
        return pure
    assert compiled == pure
    return compiled


def _request(draw, leader: bool) -> tuple[bytes, int]:
    data = draw.draw(requests())
    log_end = draw.draw(st.sampled_from([0, 100, 2**40]))
    if not leader:
        data = _renumber(data, log_end + draw.draw(st.sampled_from([0, 0, 3, -1])),
                         draw.draw(st.lists(st.sampled_from([0, 0, 2, -5]), min_size=1, max_size=3)))
    return data, log_end


@pytest.mark.timeout_guard(300)
@given(st.data(), configs(), segment_states(), st.booleans())
@examples(300)
def test_requests_come_to_the_same_on_both_cores(tmp_path_factory, draw, config, state, leader):
    data, log_end = _request(draw, leader)
    leader_epoch = draw.draw(st.sampled_from([None, 3]))
    from_client = draw.draw(st.booleans())
    _compare(data, config, state, tmp_path_factory.mktemp("req"), leader=leader, log_end=log_end,
             leader_epoch=leader_epoch, from_client=from_client)


@pytest.mark.timeout_guard(300)
@given(st.data(), segment_states(), st.booleans())
@examples(300)
def test_damaged_requests_come_to_the_same_on_both_cores(tmp_path_factory, draw, state, leader):
    data, log_end = _request(draw, leader)
    buf = bytearray(data)
    kind = draw.draw(st.sampled_from(["flip", "flip-fixed", "truncate", "field", "append-garbage"]))
    if kind in ("flip", "flip-fixed"):
        for _ in range(draw.draw(st.integers(1, 3))):
            i = draw.draw(st.integers(0, len(buf) - 1))
            buf[i] ^= 1 << draw.draw(st.integers(0, 7))
        if kind == "flip-fixed":
            _fix_crc(buf)
    elif kind == "truncate":
        buf = buf[: draw.draw(st.integers(0, len(buf) - 1))]
    elif kind == "field":
        at, fmt = draw.draw(st.sampled_from([(0, ">q"), (8, ">i"), (12, ">i"), (16, ">b"), (21, ">h"), (23, ">i"),
                                             (35, ">q"), (43, ">q"), (57, ">i")]))
        bits = struct.calcsize(fmt) * 8
        struct.pack_into(fmt, buf, at, draw.draw(st.sampled_from([0, 1, -1, 2, 61, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1])))
        _fix_crc(buf)
    else:
        buf += draw.draw(st.binary(min_size=1, max_size=80))
    _compare(bytes(buf), LogConfig(), state, tmp_path_factory.mktemp("dmg"), leader=leader, log_end=log_end)


def _plain_batches(n: int, records: int = 20, value: int = 100) -> bytes:
    out = b""
    for i in range(n):
        builder = RecordBatchBuilder(MAGIC_V2, Compression.NONE, TimestampType.CREATE_TIME, partition_leader_epoch=i // 2)
        for j in range(records):
            builder.append(b"k%d" % j, bytes(value), timestamp=NOW - 100 + i)
        out += bytes(builder.build().buffer)
    return out


@pytest.mark.timeout_guard(300)
@given(st.data(), st.booleans(), st.sampled_from(["enospc", "short", "zero"]), st.integers(1, 4))
@examples(100)
def test_an_injected_full_disk_fails_the_same_on_both_cores(tmp_path_factory, draw, leader, how, fail_at):
    """ENOSPC, a short write then ENOSPC, or a write that takes nothing, at the log write or
    either index entry: the same FAILED result (stage, errno, bytes landed) and files."""
    state = dict(size=100, base_offset=0, max_segment_bytes=1 << 30, roll_ts=-1, roll_ms=2**62, index_interval=10,
                 bytes_since=50, oi_entries=1, oi_capacity=10, oi_last_offset=0, ti_entries=1, ti_capacity=10,
                 ti_last=(NOW - 10**6, 0), seg_max=(NOW - 10**6, 0))
    data = _plain_batches(draw.draw(st.integers(1, 3)))
    log_end = 5
    if not leader:
        data = _renumber(data, log_end, [0])
    real = os.pwrite
    calls = {"n": 0}

    def write(fd, buf, position):
        calls["n"] += 1
        if calls["n"] < fail_at:
            return real(fd, buf, position)
        if how == "short" and calls["n"] == fail_at:
            return real(fd, memoryview(buf).cast("B")[: max(1, len(memoryview(buf).cast("B")) // 2)], position)
        if how == "zero":
            return 0
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    root = tmp_path_factory.mktemp("full")
    compiled = _run(data, LogConfig(), state, pure=False, root=root, leader=leader, log_end=log_end,
                    leader_epoch=None, from_client=True, write=write)
    calls["n"] = 0
    pure = _run(data, LogConfig(), state, pure=True, root=root, leader=leader, log_end=log_end,
                leader_epoch=None, from_client=True, write=write)
    assert compiled == pure
    assert compiled[0][0] in (FAILED, WRITTEN)
    if compiled[0][0] == FAILED:
        assert compiled[0][2] == errno.ENOSPC


def test_the_compiled_call_writes_plain_requests():
    """Plain batches are written by the compiled call (not silently always by the twin), and a
    producer id or a roll leaves the write to Python."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        from pathlib import Path

        state = dict(size=0, base_offset=0, max_segment_bytes=1 << 30, roll_ts=-1, roll_ms=2**62, index_interval=4096,
                     bytes_since=0, oi_entries=0, oi_capacity=10, oi_last_offset=0, ti_entries=0, ti_capacity=10,
                     ti_last=(-1, 0), seg_max=(-1, -1))
        data = _plain_batches(2)
        out, files = _run(data, LogConfig(), state, pure=False, root=Path(d), leader=True, log_end=0, leader_epoch=7,
                          from_client=True)
        assert out[0] == WRITTEN and out[1:3] == (0, 39) and out[8] == [(7, 0)] and out[9] == 0
        assert len(files[0]) == len(data)
        out, _ = _run(data, LogConfig(), dict(state, max_segment_bytes=100), pure=False, root=Path(d) / "r",
                      leader=True, log_end=0, leader_epoch=7, from_client=True)
        assert out[0] == ROLL


# -- whole logs ---------------------------------------------------------------------------------


def _log_state(log: Log) -> tuple:
    return (
        log.log_end_offset,
        [(s.base_offset, s.size) for s in log.segments],
        [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries],
        {pid: (e.last_seq, e.last_data_offset, e.producer_epoch) for pid, e in log.producer_state.active_producers.items()},
    )


def _files(directory) -> dict:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix in (".log", ".index", ".timeindex")}


@pytest.mark.timeout_guard(300)
@given(st.lists(st.tuples(requests(), st.sampled_from([None, 1, 2])), min_size=1, max_size=6), configs(),
       st.sampled_from([1 << 30, 700, 2000]), st.sampled_from([4096, 0, 300]))
@examples(60)
def test_leader_and_follower_logs_are_identical_on_both_cores(tmp_path_factory, appends, config, segment_bytes, interval):
    """The same requests appended by a leader on each core, then what it wrote appended by a
    follower on each core: identical files, infos, producer state and epochs throughout."""
    config = config.replace(segment_bytes=segment_bytes, index_interval_bytes=interval)
    results = []
    for pure in (False, True):
        leader_dir = tmp_path_factory.mktemp("leader") / "t-0"
        follower_dir = tmp_path_factory.mktemp("follower") / "t-0"
        infos = []
        with native.use(pure=pure):
            with Log.open(leader_dir, config, clock=lambda: NOW) as leader:
                for data, epoch in appends:
                    try:
                        infos.append(leader.append(data, leader_epoch=epoch))
                    except KafkalogError as e:
                        infos.append(type(e))
                leader_state = _log_state(leader)
                fetched = []
                for segment in leader.segments:
                    if segment.size:
                        piece = leader.read(segment.base_offset, 1 << 30)
                        fetched.append(piece.read(0, piece.size_in_bytes))
            with Log.open(follower_dir, config, clock=lambda: NOW) as follower:
                for chunk in fetched:
                    infos.append(follower.append_as_follower(chunk))
                follower_state = _log_state(follower)
        results.append((infos, leader_state, follower_state, _files(leader_dir), _files(follower_dir)))
    assert results[0] == results[1]
    assert results[0][1][0] == results[0][2][0]  # the follower caught up
