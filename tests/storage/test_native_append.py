"""The compiled append pipeline and recovery scan against the pure reference.

Differential properties: random and mutated produce requests prepared by both cores give
byte-identical batches and the same append facts, or errors of the same type (the one-call
append's checks; tests/storage/test_append_request.py compares its writes); random and
damaged segment files recovered by both cores give the same valid size, indexes and max
timestamp. And CRC-32C in C (both implementations) against the ``crc32c`` package.
"""

from __future__ import annotations

import os
import shutil
import struct

import crc32c as crc32c_package
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kafkalog import Compression, Log, LogConfig, native
from kafkalog.memory_records_builder import RecordBatchBuilder
from kafkalog.errors import KafkalogError
from kafkalog.append_request import PREPARED, append_request
from kafkalog.log_directory import CLEAN_SHUTDOWN_FILE
from kafkalog.record import MAGIC_V2, NO_TIMESTAMP, TimestampType
from kafkalog.recordbatch import ATTRIBUTES_OFFSET, CRC_OFFSET
from conftest import examples

pytestmark = pytest.mark.skipif(not native.available(), reason="kafkalog._native is not built")

NOW = 1_700_000_000_000


#: These tests compare the cores themselves (tests/conftest.py does not run them once per core).
SWITCHES_CORES = True


# -- CRC-32C -----------------------------------------------------------------------------------


@given(st.binary(max_size=40_000), st.integers(0, 2**32 - 1))
@examples(150)
def test_crc32c_matches_the_package_on_both_implementations(data, seed):
    ext = native._compiled
    assert ext.crc32c(data) == crc32c_package.crc32c(data)
    assert ext.crc32c(data, 0, True) == crc32c_package.crc32c(data)
    # continuing a CRC, from an unaligned start
    cut = seed % (len(data) + 1)
    assert ext.crc32c(memoryview(data)[cut:], ext.crc32c(data[:cut])) == crc32c_package.crc32c(data)


@pytest.mark.parametrize("size", [0, 1, 7, 255, 768, 769, 3 * 4096 - 1, 3 * 4096, 3 * 4096 + 9, 1 << 20])
def test_crc32c_stream_boundaries(size):
    data = os.urandom(size)
    assert native._compiled.crc32c(data) == native._compiled.crc32c(data, 0, True) == crc32c_package.crc32c(data)


# -- produce requests --------------------------------------------------------------------------

_records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=200)),
        st.one_of(st.just(NO_TIMESTAMP), st.integers(NOW - 10_000, NOW + 10_000), st.integers(0, 2**40)),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))), max_size=2),
    ),
    min_size=1,
    max_size=12,
)


@st.composite
def requests(draw) -> bytes:
    """One produce request: 1-4 v2 batches (rarely compressed, rarely with a producer id)."""
    out = b""
    n = draw(st.integers(1, 4))
    compression = draw(st.sampled_from([Compression.NONE] * 6 + [Compression.GZIP, Compression.LZ4]))
    for _ in range(1 if compression is not Compression.NONE else n):
        idempotent = draw(st.booleans()) and draw(st.booleans())
        timestamp_type = draw(st.sampled_from([TimestampType.CREATE_TIME] * 5 + [TimestampType.LOG_APPEND_TIME]))
        builder = RecordBatchBuilder(
            MAGIC_V2,
            compression,
            timestamp_type,
            base_offset=draw(st.sampled_from([0, 0, 5, 2**40])),
            producer_id=draw(st.integers(0, 5)) if idempotent else -1,
            producer_epoch=0 if idempotent else -1,
            base_sequence=draw(st.integers(0, 100)) if idempotent else -1,
            partition_leader_epoch=draw(st.sampled_from([-1, 0, 7])),
            log_append_time=NOW - 5 if timestamp_type == TimestampType.LOG_APPEND_TIME else None,
        )
        for key, value, ts, headers in draw(_records):
            builder.append(key, value, timestamp=ts, headers=headers)
        out += bytes(builder.build().buffer)
    return out


@st.composite
def configs(draw) -> LogConfig:
    return LogConfig(
        cleanup_policy=draw(st.sampled_from([("delete",), ("compact",)])),
        message_timestamp_type=draw(st.sampled_from(["CreateTime", "LogAppendTime"])),
        message_timestamp_before_max_ms=draw(st.sampled_from([2**63 - 1, 5_000, 0])),
        message_timestamp_after_max_ms=draw(st.sampled_from([2**63 - 1, 5_000])),
        max_message_bytes=draw(st.sampled_from([1024 * 1024 + 12, 300])),
    )


def _fix_crc(buf: bytearray, pos: int = 0) -> None:
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    end = min(len(buf), pos + 12 + max(length, 0))
    if end > pos + ATTRIBUTES_OFFSET:
        struct.pack_into(">I", buf, pos + CRC_OFFSET, crc32c_package.crc32c(bytes(buf[pos + ATTRIBUTES_OFFSET : end])))


def _prepare(data: bytes, config: LogConfig, *, pure: bool, first_offset: int, leader_epoch, from_client: bool):
    """What a leader's append_request (checking only: no segment) makes of ``data`` on one core:
    its result, or the error type."""
    view = memoryview(data)
    with native.use(pure=pure):
        try:
            r = append_request(
                view, leader=True, log_end_offset=first_offset, log_start_offset=0, config=config, now_ms=NOW,
                leader_epoch=leader_epoch, from_client=from_client, segment=None, partition="t-0", file="t-0",
            )
        except (KafkalogError, ValueError, struct.error) as e:
            return type(e)
    if r is None:
        return None
    assert r[0] == PREPARED
    return tuple(r[:10]) + (bytes(r[10]), tuple(r[11]))


def _same(data: bytes, config: LogConfig, first_offset: int = 100, leader_epoch=None, from_client=True):
    native_result = _prepare(data, config, pure=False, first_offset=first_offset, leader_epoch=leader_epoch,
                             from_client=from_client)
    pure_result = _prepare(data, config, pure=True, first_offset=first_offset, leader_epoch=leader_epoch,
                           from_client=from_client)
    assert native_result == pure_result
    return native_result


@given(requests(), configs(), st.sampled_from([0, 100, 2**62]), st.sampled_from([None, 3]), st.booleans())
@examples(200)
def test_random_requests_prepare_the_same_on_both_cores(data, config, first_offset, leader_epoch, from_client):
    _same(data, config, first_offset, leader_epoch, from_client)


@given(requests(), st.data())
@examples(300)
def test_mutated_requests_prepare_the_same_on_both_cores(data, draw):
    buf = bytearray(data)
    kind = draw.draw(st.sampled_from(["flip", "flip-fixed", "truncate", "field", "append-garbage"]))
    if kind in ("flip", "flip-fixed"):
        for _ in range(draw.draw(st.integers(1, 3))):
            i = draw.draw(st.integers(0, len(buf) - 1))
            buf[i] ^= 1 << draw.draw(st.integers(0, 7))
        if kind == "flip-fixed":
            _fix_crc(buf)  # the damage reaches the record walk and the rules
    elif kind == "truncate":
        buf = buf[: draw.draw(st.integers(0, len(buf) - 1))]
    elif kind == "field":
        at, fmt = draw.draw(st.sampled_from([(0, ">q"), (8, ">i"), (16, ">b"), (21, ">h"), (23, ">i"), (27, ">q"),
                                             (35, ">q"), (43, ">q"), (53, ">i"), (57, ">i")]))
        bits = struct.calcsize(fmt) * 8
        value = draw.draw(st.sampled_from([0, 1, -1, 2, 7, 61, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1]))
        struct.pack_into(fmt, buf, at, value)
        _fix_crc(buf)
    else:
        buf += draw.draw(st.binary(min_size=1, max_size=80))
    _same(bytes(buf), LogConfig(), first_offset=7)


def test_extreme_offsets_and_timestamps_fall_back_to_the_pure_rules():
    builder = RecordBatchBuilder(MAGIC_V2, Compression.NONE, TimestampType.CREATE_TIME)
    builder.append(b"k", b"v", timestamp=NOW)
    data = bytes(builder.build().buffer)
    for first in (2**63 - 1, 2**63 - 2, 2**64):
        _same(data, LogConfig(), first_offset=first)
    _same(data, LogConfig(), leader_epoch=2**31)
    # a record timestamp whose delta overflows int64 from the base timestamp
    buf = bytearray(data)
    struct.pack_into(">q", buf, 27, 2**63 - 1)
    _fix_crc(buf)
    _same(bytes(buf), LogConfig())


def test_native_path_takes_plain_batches():
    """The compiled call takes plain producer batches (not silently always the pure twin)."""
    builder = RecordBatchBuilder(MAGIC_V2, Compression.NONE, TimestampType.CREATE_TIME)
    for i in range(50):
        builder.append(b"k%d" % i, b"v" * 100, timestamp=NOW)
    data = bytes(builder.build().buffer)
    ext = native._compiled
    rules = (1 << 20, False, 2**63 - 1, 2**63 - 1, False)
    out = ext.append_request(data, True, 10, NOW, *rules, True, True, 4, None)
    assert out is not None
    status, first, last, max_ts, max_ts_offset, valid, count, _, epochs, _, prepared, positions, producers = out
    assert (status, first, last, max_ts, max_ts_offset, valid, count) == (PREPARED, 10, 59, NOW, 59, len(data), 50)
    assert positions == (0,) and epochs == [(4, 10)] and producers == ()
    assert _same(data, LogConfig(), first_offset=10, leader_epoch=4)[10] == bytes(prepared)
    with pytest.raises(native.Invalid):
        ext.append_request(data[:-1], True, 10, NOW, *rules, True, True, 4, None)


@pytest.mark.timeout_guard(300)
@given(st.lists(requests(), min_size=1, max_size=4), configs())
@examples(40)
def test_logs_appended_by_both_cores_are_identical(tmp_path_factory, appends, config):
    results = []
    for pure in (False, True):
        directory = tmp_path_factory.mktemp("logs") / "t-0"
        infos = []
        with native.use(pure=pure), Log.open(directory, config, clock=lambda: NOW) as log:
            for data in appends:
                try:
                    infos.append(log.append(data, leader_epoch=2))
                except KafkalogError as e:
                    infos.append(type(e))
        files = {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix in (".log", ".index", ".timeindex")}
        results.append((infos, files))
    assert results[0] == results[1]


# -- recovery ----------------------------------------------------------------------------------


def _segment_log(tmp_path, appends: int, value_size: int) -> Log:
    directory = tmp_path / "t-0"
    sequence = 0
    with native.use(pure=True), Log.open(directory, LogConfig(index_interval_bytes=1024), clock=lambda: NOW) as log:
        for i in range(appends):
            idempotent = i % 7 == 0  # some batches of an idempotent producer among plain ones
            builder = RecordBatchBuilder(MAGIC_V2, Compression.NONE, TimestampType.CREATE_TIME,
                                         producer_id=3 if idempotent else -1, producer_epoch=0 if idempotent else -1,
                                         base_sequence=sequence if idempotent else -1, partition_leader_epoch=i // 10)
            sequence += (1 + i % 5) if idempotent else 0
            for j in range(1 + i % 5):
                builder.append(b"k%d" % j, bytes(value_size), timestamp=NOW - 1000 + (i * 37) % 500)
            log.append(builder.build(), leader_epoch=i // 10)
    return directory


def _recovered(directory, damage, *, pure: bool):
    """Open the log as after a crash (no clean-shutdown marker, no recovery point): the loader
    recovers its segment, producer state and leader epochs from scratch."""
    scratch = directory.parent / ("pure" if pure else "native")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(directory.parent, scratch, ignore=shutil.ignore_patterns("pure", "native"))
    for name in (CLEAN_SHUTDOWN_FILE, "recovery-point-offset-checkpoint"):
        (scratch / name).unlink(missing_ok=True)
    copy = scratch / directory.name
    segment_file = next(copy.glob("*.log"))
    segment_file.write_bytes(damage(segment_file.read_bytes()))
    try:
        with native.use(pure=pure), Log.open(copy, LogConfig(index_interval_bytes=1024), clock=lambda: NOW) as log:
            segment = log.segments[0]
            return (
                log.log_end_offset,
                segment.size,
                [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)],
                [segment.time_index.entry(i) for i in range(segment.time_index.entries)],
                segment.max_timestamp_so_far,
                segment.offset_of_max_timestamp_so_far,
                [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries],
                {pid: (e.last_seq, e.last_data_offset) for pid, e in log.producer_state.active_producers.items()},
            )
    except KafkalogError as e:
        return type(e)


@pytest.mark.timeout_guard(300)
@given(st.data())
@examples(60)
def test_recovery_is_the_same_on_both_cores(tmp_path_factory, draw):
    directory = _segment_log(tmp_path_factory.mktemp("rec"), draw.draw(st.integers(1, 40)), draw.draw(st.sampled_from([10, 300])))
    kind = draw.draw(st.sampled_from(["none", "flip", "truncate", "garbage", "offset", "length"]))
    where = draw.draw(st.floats(0, 1))
    length = draw.draw(st.sampled_from([2**31 - 1, 2**31 - 12, -1, 0, 13, 14, 48, 49, 1 << 20]))

    def damage(data: bytes) -> bytes:
        buf = bytearray(data)
        i = min(len(buf) - 1, int(where * len(buf)))
        if kind == "flip":
            buf[i] ^= 0x10
        elif kind == "truncate":
            del buf[i:]
        elif kind == "garbage":
            buf[i:] = os.urandom(min(100, len(buf) - i))
        elif kind == "offset":
            struct.pack_into(">q", buf, 0, 2**62)  # the first batch's base offset (outside the CRC)
        elif kind == "length":  # an extreme size field in the first batch (outside the CRC)
            struct.pack_into(">i", buf, 8, length)
        return bytes(buf)

    assert _recovered(directory, damage, pure=False) == _recovered(directory, damage, pure=True)


def test_recovery_of_batches_larger_than_the_scan_chunk(tmp_path, monkeypatch):
    from kafkalog import segment_recovery

    monkeypatch.setattr(segment_recovery, "CHUNK", 4096)
    directory = _segment_log(tmp_path, 30, 2000)
    same = _recovered(directory, lambda d: d, pure=False)
    assert same == _recovered(directory, lambda d: d, pure=True)
    assert same[1] > 30 * 2000 and len(same[2]) > 5
