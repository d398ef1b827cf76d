"""The Spark slice reader's compiled runs (whole plain v2 batches framed, checked and decoded by
the compiled core, chunk by chunk) against its per-batch path (its plain twin): same rows, same
bounds, same corruption handling, on logs mixing plain, compressed, control and corrupt batches
and chunk sizes that cut batches."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog import Compression, ControlRecordType, FileRecords, Log, LogConfig, RecordBatchBuilder, native
from kafkalog.errors import KafkalogError
from kafkalog.spark import _slice_read
from kafkalog.spark._discovery import _discover
from kafkalog.spark._options import _ReadOptions
from kafkalog.spark._partition import _PartitionLog
from kafkalog.spark._plan import _plan, _resolve_bounds

pytestmark = pytest.mark.skipif(native.ext is None, reason="the compiled runs need the compiled core")

KINDS = ("plain", "plain", "plain", "lz4", "gzip", "control")


def _batch(kind: str, base: int, count: int, size: int) -> bytes:
    if kind == "control":
        return bytes(RecordBatchBuilder.end_transaction_marker(
            ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=1,
            timestamp=1_700_000_000_000 + base, base_offset=base).buffer)
    codec = {"plain": Compression.NONE, "lz4": Compression.LZ4, "gzip": Compression.GZIP}[kind]
    b = RecordBatchBuilder(compression=codec, base_offset=base)
    for i in range(count):
        headers = [("h", b"%d" % i)] if i % 3 == 0 else []
        value = None if i % 7 == 6 else (b"v%d-" % (base + i)) * size
        b.append(b"k%d" % i if i % 5 else None, value, timestamp=1_700_000_000_000 + base + i, headers=headers)
    return bytes(b.build().buffer)


def _write_log(directory: Path, kinds: list[tuple[str, int, int]]) -> list[int]:
    """A one-segment log of those batches (follower appends); the positions of its batches."""
    with Log.open(directory, LogConfig(segment_bytes=1 << 24, index_interval_bytes=256, retention_ms=-1)) as log:
        base = 0
        for kind, count, size in kinds:
            data = _batch(kind, base, count, size)
            log.append(data, assign_offsets=False)
            base += 1 if kind == "control" else count
    with FileRecords.open(next(directory.glob("*.log"))) as f:
        return [b.position for b in f.batches()]


def _read(root: Path, compiled: bool, chunk: int, **options) -> tuple[list, list[int]] | str:
    """Every row (offset, timestamp, key, value, headers) the slices give, and the size of each
    part; or the error's text."""
    opts = _ReadOptions(path=str(root), **options)
    saved = _slice_read._COMPILED_RUNS, _slice_read._READ_BYTES
    _slice_read._COMPILED_RUNS, _slice_read._READ_BYTES = compiled, chunk
    rows, parts = [], []
    try:
        plogs = [_PartitionLog(d, opts) for d in _discover(opts)]
        for s in _plan(plogs, _resolve_bounds(plogs, opts), opts):
            for c in _slice_read._read_slice(s, opts):
                parts.append(len(c))
                t = c.to_arrow()
                rows.extend(zip(c.offset.tolist(), c.timestamp.tolist(), t.column("key").to_pylist(),
                                t.column("value").to_pylist(), t.column("headers").to_pylist()))
    except KafkalogError as e:
        return f"{type(e).__name__}: {e}"
    finally:
        _slice_read._COMPILED_RUNS, _slice_read._READ_BYTES = saved
    return rows, parts


batch_kinds = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(1, 12), st.integers(1, 40)), min_size=1, max_size=14)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=batch_kinds, data=st.data())
def test_compiled_runs_read_what_the_per_batch_path_reads(tmp_path_factory, kinds, data):
    root = tmp_path_factory.mktemp("logs")
    directory = root / "t-0"
    positions = _write_log(directory, kinds)
    segment = next(directory.glob("*.log"))
    if data.draw(st.booleans(), label="corrupt"):
        raw = bytearray(segment.read_bytes())
        k = data.draw(st.integers(0, len(positions) - 1), label="batch")
        end = positions[k + 1] if k + 1 < len(positions) else len(raw)
        raw[data.draw(st.integers(positions[k] + 17, end - 1), label="byte")] ^= 0x5A
        segment.write_bytes(bytes(raw))
    last = sum(1 if k == "control" else n for k, n, _ in kinds)
    options = dict(
        include_headers=True,
        check_crcs=data.draw(st.booleans(), label="check_crcs"),
        fail_on_corruption=data.draw(st.booleans(), label="fail_on_corruption"),
        max_records_per_batch=data.draw(st.integers(1, 40), label="max_records_per_batch"),
    )
    lo = data.draw(st.integers(0, last), label="start")
    if data.draw(st.booleans(), label="bounded"):
        options["starting"] = {"t": {0: lo}}
        options["ending"] = {"t": {0: data.draw(st.integers(lo, last), label="end")}}
    chunk = data.draw(st.sampled_from([64, 300, 1000, 4096, 1 << 24]), label="chunk")
    compiled = _read(root, True, chunk, **options)
    plain = _read(root, False, 1 << 24, **options)
    if isinstance(plain, str):
        assert compiled == plain
        return
    assert not isinstance(compiled, str), compiled
    assert compiled[0] == plain[0]
    assert all(0 < n <= options["max_records_per_batch"] for n in compiled[1])


def test_compiled_runs_keep_maxrecordsperbatch_whole(tmp_path):
    """A run stops before the batch that would pass maxRecordsPerBatch: no tail of a few rows."""
    directory = tmp_path / "logs" / "t-0"
    _write_log(directory, [("plain", 10, 5)] * 9)
    rows, parts = _read(tmp_path / "logs", True, 1 << 24, max_records_per_batch=25, include_headers=True)
    assert len(rows) == 90 and parts == [20] * 4 + [10]
