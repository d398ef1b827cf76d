"""A leader's compressed append through the one-call compiled path (issue 29) against the pure
twin: Python decompresses the batch's records (``append_request.compressed_records``) and the
compiled ``_native.append_request`` validates them and assigns offsets in the header in place,
as Kafka's ``validateMessagesAndAssignOffsetsCompressed`` does when the codec stays.

Differential properties, with hypothesis: compressed requests of every codec (CreateTime and
LogAppendTime, timestamps out of bounds, null keys on compacted topics, offset deltas out of
sequence, wrong record counts, corrupt compressed bodies and malformed records inside valid ones,
producer ids, several batches mixing codecs) give the same result and byte-identical segment and
index files on both cores, or the compiled call declines (the twin takes it) or refuses (the twin
raises a typed error); an injected full disk fails the same; whole logs are identical.
"""

from __future__ import annotations

import errno
import os
import struct

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from kafkalog import Compression, Log, LogConfig, native
from kafkalog.append_request import FAILED, PREPARED, WRITTEN, compressed_records
from kafkalog.errors import KafkalogError
from kafkalog.memory_records_builder import RecordBatchBuilder
from kafkalog.record import MAGIC_V2, TimestampType
from kafkalog.recordbatch import RECORDS_OFFSET, encode_batch, encode_record
from conftest import examples
from test_append_request import _compare, _files, _log_state, _run, segment_states
from test_native_append import NOW, _fix_crc

pytestmark = pytest.mark.skipif(not native.available(), reason="kafkalog._native is not built")

#: These tests compare the cores themselves.
SWITCHES_CORES = True

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
FITS = dict(size=0, base_offset=0, max_segment_bytes=1 << 30, roll_ts=-1, roll_ms=2**62, index_interval=100,
            bytes_since=5000, oi_entries=0, oi_capacity=10, oi_last_offset=0, ti_entries=0, ti_capacity=10,
            ti_last=(-1, 0), seg_max=(-1, -1))

_key = st.binary(min_size=1, max_size=6)
_records = st.lists(
    st.tuples(
        st.one_of(_key, _key, _key, st.none()),  # mostly keyed
        st.one_of(st.none(), st.binary(max_size=40), st.just(bytes(300))),
        st.sampled_from([NOW] * 4 + [NOW - 1, NOW - 3_000, NOW + 2_000, NOW - 10**7, NOW + 10**7, -1]),
        st.lists(st.tuples(st.sampled_from(["h", "trace"]), st.one_of(st.none(), st.binary(max_size=5))), max_size=2),
    ),
    min_size=1,
    max_size=12,
)


@st.composite
def compressed_batches(draw, codec: Compression | None = None) -> bytes:
    """One compressed v2 batch as a producer writes it, sometimes with offset gaps (deltas out
    of sequence), a producer id, LogAppendTime or a leader epoch already set."""
    codec = codec if codec is not None else draw(st.sampled_from(CODECS))
    idempotent = draw(st.booleans())
    timestamp_type = draw(st.sampled_from([TimestampType.CREATE_TIME] * 4 + [TimestampType.LOG_APPEND_TIME]))
    builder = RecordBatchBuilder(
        MAGIC_V2,
        codec,
        timestamp_type,
        base_offset=draw(st.sampled_from([0, 0, 7])),
        producer_id=draw(st.integers(0, 3)) if idempotent else -1,
        producer_epoch=0 if idempotent else -1,
        base_sequence=draw(st.integers(0, 50)) if idempotent else -1,
        is_transactional=idempotent and draw(st.booleans()),
        partition_leader_epoch=draw(st.sampled_from([-1, 0, 4])),
        log_append_time=NOW - 5 if timestamp_type == TimestampType.LOG_APPEND_TIME else None,
    )
    gaps = draw(st.sampled_from([False] * 7 + [True]))
    offset = builder.base_offset
    for key, value, ts, headers in draw(_records):
        builder.append(key, value, timestamp=ts, headers=headers, offset=offset)
        offset += 1 + (draw(st.integers(0, 2)) if gaps else 0)
    return bytes(builder.build().buffer)


@st.composite
def hand_made_batches(draw) -> bytes:
    """A compressed batch built around records the builder would not write: a record count that
    disagrees with the records, malformed record bytes, deltas out of order (valid compression,
    bad contents)."""
    codec = draw(st.sampled_from(CODECS))
    n = draw(st.integers(1, 6))
    deltas = draw(st.sampled_from(["sequential", "shuffled", "repeated"]))
    offsets = list(range(n))
    if deltas == "shuffled":
        offsets = draw(st.permutations(offsets))
    elif deltas == "repeated":
        offsets = [0] * n
    payload = b"".join(encode_record(o, draw(st.sampled_from([0, 5, -5])), b"k%d" % o, b"v" * o) for o in offsets)
    damage = draw(st.sampled_from(["none", "none", "cut", "garbage", "grow"]))
    if damage == "cut":
        payload = payload[: draw(st.integers(0, max(0, len(payload) - 1)))]
    elif damage == "garbage":
        payload += draw(st.binary(min_size=1, max_size=8))
    elif damage == "grow":
        i = draw(st.integers(0, len(payload) - 1))
        payload = payload[:i] + bytes([payload[i] ^ 0x02]) + payload[i + 1 :]
    count = n + draw(st.sampled_from([0, 0, 0, 1, -1]))
    delta = draw(st.sampled_from([max(count - 1, 0), max(count - 1, 0), n - 1, n + 3]))
    return encode_batch(payload, count=count, base_offset=0, last_offset_delta=delta, base_timestamp=NOW,
                        max_timestamp=NOW, compression=codec)


@st.composite
def compressed_requests(draw) -> bytes:
    """A leader's request: mostly one compressed batch, sometimes hand-made contents, a corrupt
    compressed body (CRC fixed, so the codec meets it), several batches mixing codecs, or a
    field of the header changed."""
    kind = draw(st.sampled_from(["one"] * 8 + ["hand-made", "hand-made", "corrupt-body", "mixed", "field"]))
    if kind == "hand-made":
        return draw(hand_made_batches())
    data = draw(compressed_batches())
    if kind == "corrupt-body":
        buf = bytearray(data)
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(RECORDS_OFFSET, len(buf) - 1))
            buf[i] ^= 1 << draw(st.integers(0, 7))
        _fix_crc(buf)
        return bytes(buf)
    if kind == "mixed":
        other = draw(st.one_of(compressed_batches(), st.builds(_plain, st.integers(1, 3))))
        return data + other if draw(st.booleans()) else other + data
    if kind == "field":
        buf = bytearray(data)
        at, fmt = draw(st.sampled_from([(23, ">i"), (57, ">i"), (21, ">h"), (43, ">q"), (35, ">q")]))
        bits = struct.calcsize(fmt) * 8
        value = draw(st.sampled_from([0, 1, -1, 2, 12, 3, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1]))
        if at == 21:  # the attributes: keep a codec, change the timestamp type or the flags
            value = (value & ~0x07) | (buf[22] & 0x07)
        struct.pack_into(fmt, buf, at, value)
        _fix_crc(buf)
        return bytes(buf)
    return data


def _plain(records: int) -> bytes:
    builder = RecordBatchBuilder(MAGIC_V2, Compression.NONE, TimestampType.CREATE_TIME)
    for j in range(records):
        builder.append(b"k%d" % j, b"x" * 10, timestamp=NOW - j)
    return bytes(builder.build().buffer)


@st.composite
def configs(draw) -> LogConfig:
    return LogConfig(
        cleanup_policy=draw(st.sampled_from([("delete",), ("compact",)])),
        message_timestamp_type=draw(st.sampled_from(["CreateTime", "LogAppendTime"])),
        message_timestamp_before_max_ms=draw(st.sampled_from([2**63 - 1, 2**63 - 1, 5_000, 0])),
        message_timestamp_after_max_ms=draw(st.sampled_from([2**63 - 1, 5_000])),
        max_message_bytes=draw(st.sampled_from([1024 * 1024 + 12, 1024 * 1024 + 12, 300])),
    )


@pytest.mark.timeout_guard(300)
@given(compressed_requests(), configs(), segment_states(), st.sampled_from([0, 100, 2**40]),
       st.sampled_from([None, 3]), st.booleans())
@examples(800)
def test_compressed_requests_come_to_the_same_on_both_cores(tmp_path_factory, data, config, state, log_end,
                                                            leader_epoch, from_client):
    out = _compare(data, config, state, tmp_path_factory.mktemp("zreq"), leader=True, log_end=log_end,
                   leader_epoch=leader_epoch, from_client=from_client)
    event("outcome: " + (out[0].__name__ if isinstance(out[0], type) else str(out[0][0])))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
@pytest.mark.parametrize("producer", [False, True])
def test_the_compiled_call_takes_in_place_compressed_requests(tmp_path, codec, timestamp_type, producer):
    """A producer's compressed batch whose offset deltas are 0, 1, 2, ... is checked and written
    (or, with a producer id, prepared) by the compiled call itself, with the compressed bytes
    kept and only the header rewritten: the same bytes as the twin's."""
    builder = RecordBatchBuilder(MAGIC_V2, codec, TimestampType.CREATE_TIME, producer_id=5 if producer else -1,
                                 producer_epoch=0 if producer else -1, base_sequence=0 if producer else -1)
    for j in range(50):
        builder.append(b"k%d" % j, b"value %d" % j * 10, timestamp=NOW - 50 + j)
    data = bytes(builder.build().buffer)
    config = LogConfig(message_timestamp_type=timestamp_type)
    compiled = _run(data, config, FITS, pure=False, root=tmp_path, leader=True, log_end=1000, leader_epoch=2,
                    from_client=True)
    pure = _run(data, config, FITS, pure=True, root=tmp_path, leader=True, log_end=1000, leader_epoch=2,
                from_client=True)
    assert compiled == pure
    result, files = compiled
    assert result[0] == (PREPARED if producer else WRITTEN)
    assert result[1:3] == (1000, 1049) and result[7] == int(codec) and result[8] == [(2, 1000)]
    written = result[10] if producer else files[0]
    assert len(written) == len(data)
    assert written[RECORDS_OFFSET:] == data[RECORDS_OFFSET:]  # the compressed records as they came


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_log_append_of_a_producer_batch_never_runs_the_twin(tmp_path, monkeypatch, codec):
    """``Log.append`` of a real producer's compressed batch (with and without a producer id)
    goes through the compiled call end to end: the pure twin is not called."""
    import kafkalog.append_request as module

    def twin(*args, **kwargs):
        raise AssertionError("the pure twin ran")

    monkeypatch.setattr(module, "append_request_py", twin)
    with native.use(pure=False), Log.open(tmp_path / "t-0", LogConfig(), clock=lambda: NOW) as log:
        for n, producer in enumerate((False, True, True)):
            builder = RecordBatchBuilder(MAGIC_V2, codec, TimestampType.CREATE_TIME,
                                         producer_id=9 if producer else -1, producer_epoch=0 if producer else -1,
                                         base_sequence=(n - 1) * 20 if producer else -1)
            for j in range(20):
                builder.append(b"k%d" % j, b"v" * 50, timestamp=NOW - j)
            info = log.append(bytes(builder.build().buffer), leader_epoch=1)
            assert (info.first_offset, info.record_count, info.source_compression) == (n * 20, 20, codec)
        assert log.log_end_offset == 60
        assert [r.offset for r in log.read(0, 1 << 20).records()] == list(range(60))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_the_compiled_call_declines_what_kafka_recompresses_or_refuses(codec):
    """Offset deltas out of sequence (Kafka recompresses), a null key on a compacted topic and a
    timestamp out of bounds (the twin names the record) are left to the twin."""
    view_of = memoryview

    def call(data: bytes, config: LogConfig, from_client: bool = True):
        return native._compiled.append_request(
            data, True, 0, NOW, *_rules(config), from_client, False, -1, None, None,
            compressed_records(view_of(data), config, "t-0"),
        )

    gaps = RecordBatchBuilder(MAGIC_V2, codec, TimestampType.CREATE_TIME)
    gaps.append(b"a", b"1", timestamp=NOW, offset=0)
    gaps.append(b"b", b"2", timestamp=NOW, offset=2)
    assert call(bytes(gaps.build().buffer), LogConfig(), from_client=False) is None
    null_key = RecordBatchBuilder(MAGIC_V2, codec, TimestampType.CREATE_TIME)
    null_key.append(None, b"1", timestamp=NOW)
    assert call(bytes(null_key.build().buffer), LogConfig(cleanup_policy=("compact",))) is None
    late = RecordBatchBuilder(MAGIC_V2, codec, TimestampType.CREATE_TIME)
    late.append(b"a", b"1", timestamp=NOW - 10**6)
    assert call(bytes(late.build().buffer), LogConfig(message_timestamp_before_max_ms=1000)) is None


def _rules(config: LogConfig) -> tuple:
    from kafkalog.log_append import rules_of

    return rules_of(config)


def test_compressed_records_refuses_what_the_twin_checks_first():
    """The decompression for the compiled call happens only after the checks the twin makes
    before decompressing: a bad CRC, a batch over max.message.bytes, a request of more than
    one batch, a payload the codec rejects or one that inflates beyond the cap get None."""
    builder = RecordBatchBuilder(MAGIC_V2, Compression.ZSTD, TimestampType.CREATE_TIME)
    builder.append(b"k", bytes(1000), timestamp=NOW)
    data = bytes(builder.build().buffer)
    assert compressed_records(memoryview(data), LogConfig(), "t") == encode_record(0, 0, b"k", bytes(1000))
    bad_crc = bytearray(data)
    bad_crc[-1] ^= 1
    assert compressed_records(memoryview(bytes(bad_crc)), LogConfig(), "t") is None
    assert compressed_records(memoryview(data), LogConfig(max_message_bytes=len(data) - 1), "t") is None
    assert compressed_records(memoryview(data + data), LogConfig(), "t") is None
    corrupt = bytearray(data)
    corrupt[RECORDS_OFFSET + 2] ^= 0xFF
    _fix_crc(corrupt)
    assert compressed_records(memoryview(bytes(corrupt)), LogConfig(), "t") is None
    # a bomb: 80 MiB of zeros inflated from a few KiB, beyond the 64 MiB cap every decoder keeps
    bomb = encode_batch(bytes(80 << 20), count=1, base_offset=0, last_offset_delta=0, base_timestamp=NOW,
                        max_timestamp=NOW, compression=Compression.ZSTD)
    assert len(bomb) < 1 << 20
    assert compressed_records(memoryview(bomb), LogConfig(), "t") is None


@pytest.mark.timeout_guard(300)
@given(st.data(), st.sampled_from(["enospc", "short", "zero"]), st.integers(1, 4))
@examples(60)
def test_an_injected_full_disk_fails_the_same_with_compressed_batches(tmp_path_factory, draw, how, fail_at):
    """ENOSPC, a short write then ENOSPC, or a write that takes nothing, at the log write or an
    index entry of a compressed request: the same FAILED result and files on both cores."""
    state = dict(FITS, size=100, index_interval=10, bytes_since=50, oi_entries=1, ti_entries=1,
                 ti_last=(NOW - 10**6, 0), seg_max=(NOW - 10**6, 0))
    builder = RecordBatchBuilder(MAGIC_V2, draw.draw(st.sampled_from(CODECS)), TimestampType.CREATE_TIME)
    for j in range(draw.draw(st.integers(1, 40))):
        builder.append(b"k%d" % j, b"v" * 30, timestamp=NOW - j)
    data = bytes(builder.build().buffer)
    real = os.pwrite
    calls = {"n": 0}

    def write(fd, buf, position):
        calls["n"] += 1
        if calls["n"] < fail_at:
            return real(fd, buf, position)
        if how == "short" and calls["n"] == fail_at:
            view = memoryview(buf).cast("B")
            return real(fd, view[: max(1, len(view) // 2)], position)
        if how == "zero":
            return 0
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    root = tmp_path_factory.mktemp("zfull")
    compiled = _run(data, LogConfig(), state, pure=False, root=root, leader=True, log_end=5, leader_epoch=None,
                    from_client=True, write=write)
    calls["n"] = 0
    pure = _run(data, LogConfig(), state, pure=True, root=root, leader=True, log_end=5, leader_epoch=None,
                from_client=True, write=write)
    assert compiled == pure
    assert compiled[0][0] in (FAILED, WRITTEN)
    if compiled[0][0] == FAILED:
        assert compiled[0][2] == errno.ENOSPC


def test_a_full_disk_cuts_a_compressed_append_back(tmp_path, monkeypatch):
    """A log whose compressed append hits ENOSPC halfway is cut back to where it was, on the
    compiled path, and the next append goes where the failed one would have."""
    builder = RecordBatchBuilder(MAGIC_V2, Compression.LZ4, TimestampType.CREATE_TIME)
    for j in range(200):
        builder.append(b"k%d" % j, os.urandom(50), timestamp=NOW)
    data = bytes(builder.build().buffer)
    with native.use(pure=False), Log.open(tmp_path / "t-0", LogConfig(), clock=lambda: NOW) as log:
        log.append(data)
        before = _files(tmp_path / "t-0")
        real = os.pwrite

        def half(fd, buf, position):
            view = memoryview(buf).cast("B")
            if len(view) > 100:
                real(fd, view[: len(view) // 2], position)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, buf, position)

        monkeypatch.setattr(os, "pwrite", half)
        with pytest.raises(OSError):
            log.append(data)
        monkeypatch.setattr(os, "pwrite", real)
        assert log.log_end_offset == 200
        assert _files(tmp_path / "t-0")[f"{0:020d}.log"] == before[f"{0:020d}.log"]
        assert log.append(data).first_offset == 200


@pytest.mark.timeout_guard(300)
@given(st.lists(st.tuples(compressed_requests(), st.sampled_from([None, 1, 2])), min_size=1, max_size=5), configs(),
       st.sampled_from([1 << 30, 2000]), st.sampled_from([4096, 0, 300]))
@examples(40)
def test_logs_of_compressed_appends_are_identical_on_both_cores(tmp_path_factory, appends, config, segment_bytes,
                                                                interval):
    """The same compressed requests appended to a log on each core: identical files, append
    infos (or errors), producer state and leader epochs."""
    config = config.replace(segment_bytes=segment_bytes, index_interval_bytes=interval)
    results = []
    for pure in (False, True):
        directory = tmp_path_factory.mktemp("zlog") / "t-0"
        infos = []
        with native.use(pure=pure), Log.open(directory, config, clock=lambda: NOW) as log:
            for data, epoch in appends:
                try:
                    infos.append(log.append(data, leader_epoch=epoch))
                except KafkalogError as e:
                    infos.append(type(e))
            state = _log_state(log)
        results.append((infos, state, _files(directory)))
    assert results[0] == results[1]
