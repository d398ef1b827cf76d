"""The Spark data source's planning and reading without Spark: indexes of live directories read
(never mapped), plans and slices read while a writer rolls and trims the files under them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog import (
    FileRecords,
    Log,
    LogConfig,
    OffsetIndex,
    RecordBatchBuilder,
    TimeIndex,
)
from kafkalog.errors import CorruptRecordError
from kafkalog.filenames import offset_index_file, time_index_file
from kafkalog.spark._discovery import _discover
from kafkalog.spark._options import _ReadOptions
from kafkalog.spark._partition import _PartitionLog
from kafkalog.spark._plan import _plan, _resolve_bounds
from kafkalog.spark._slice_read import _read_slice

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=128, retention_ms=-1)


def append(log: Log, first: int, count: int) -> None:
    for n in range(first, first + count):
        b = RecordBatchBuilder()
        b.append(f"k{n}".encode(), f"value-{n}".encode() * 8, timestamp=1_700_000_000_000 + n)
        log.append(b.build())


def scan_all(root: Path, **options) -> list[tuple[int, bytes]]:
    """(offset, value) of every record the scan reads under ``root``."""
    opts = _ReadOptions(path=str(root), **options)
    plogs = [_PartitionLog(d, opts) for d in _discover(opts)]
    out = []
    for s in _plan(plogs, _resolve_bounds(plogs, opts), opts):
        for columns in _read_slice(s, opts):
            values = columns.arrow_array("value").to_pylist()
            out.extend(zip(columns.offset.tolist(), values))
    return out


def log_records(directory: Path) -> list[tuple[int, bytes]]:
    out = []
    for seg in sorted(directory.glob("*.log")):
        with FileRecords.open(seg) as f:
            out.extend((r.offset, r.value) for r in f.records())
    return out


def test_live_index_cuts_the_preallocated_tail_of_an_active_segment(tmp_path):
    d = tmp_path / "live-0"
    with Log.open(d, LogConfig(segment_bytes=1 << 20, index_interval_bytes=128)) as log:
        append(log, 0, 200)
        offsets_path, times_path = offset_index_file(d, 0), time_index_file(d, 0)
        assert offsets_path.stat().st_size > 1 << 20  # preallocated while active
        live_offsets = OffsetIndex.read_live(offsets_path, 0)
        live_times = TimeIndex.read_live(times_path, 0)
    index, times = OffsetIndex(offsets_path, 0, writable=False), TimeIndex(times_path, 0, writable=False)
    try:
        assert live_offsets.entries == index.entries > 10
        assert [live_offsets.entry(i) for i in range(live_offsets.entries)] == [tuple(index.entry(i)) for i in range(index.entries)]
        # the close appended the final time entry after the live read took its copy
        assert [live_times.entry(i) for i in range(live_times.entries)] == [tuple(times.entry(i)) for i in range(live_times.entries)]
    finally:
        index.close()
        times.close()
    entries = [live_offsets.entry(i) for i in range(live_offsets.entries)]
    k = entries.index(live_offsets.lookup(100))  # the floor entry of offset 100
    assert live_offsets.entry(k)[0] <= 100 < (live_offsets.entry(k + 1)[0] if k + 1 < live_offsets.entries else 2**63)
    assert live_offsets.lookup(0) == (0, 0) and entries[0].offset > 0  # no entry at or below 0


@pytest.mark.parametrize("state", ["missing", "empty", "odd-sized"])
def test_live_index_of_a_missing_or_broken_file_is_empty_or_whole_entries(tmp_path, state):
    path = tmp_path / "00000000000000000000.index"
    if state == "empty":
        path.write_bytes(b"")
    elif state == "odd-sized":
        path.write_bytes((5).to_bytes(4, "big") + (77).to_bytes(4, "big") + b"\x01\x02\x03")
    live = OffsetIndex.read_live(path, 1000)
    floor = live.lookup(10**9)  # the floor entry, or (base offset, 0) when there is none
    assert (live.entries, floor) == ((1, (1005, 77)) if state == "odd-sized" else (0, (1000, 0)))
    if state == "odd-sized":
        assert live.entry(0) == (1005, 77)


def test_plan_then_read_while_the_writer_rolls_and_trims_its_indexes(tmp_path):
    """Kafka trims the indexes of a segment it rolls (and on close): a reader that had the index
    mapped would die of SIGBUS touching a page past the new end. Plans made with the active
    segment's preallocated indexes stay readable after the writer rolled and closed."""
    root = tmp_path / "logs"
    d = root / "grow-0"
    with Log.open(d, CONFIG) as log:
        append(log, 0, 40)
        opts = _ReadOptions(path=str(root))
        plogs = [_PartitionLog(p, opts) for p in _discover(opts)]
        bounds = _resolve_bounds(plogs, opts)
        for plog in plogs:  # indexes taken while the active ones are preallocated
            for seg in plog.segments:
                assert seg.offsets.entries >= 0 and seg.times.entries >= 0
        append(log, 40, 120)  # rolls: the active segment's indexes are trimmed
        slices = _plan(plogs, bounds, opts)  # uses the index entries taken before the trim
    got = [(int(o), v) for s in slices for c in _read_slice(s, opts)
           for o, v in zip(c.offset.tolist(), c.arrow_array("value").to_pylist())]
    assert got == log_records(d)[:40]  # what was there when planned, no more
    assert scan_all(root) == log_records(d)
    assert len(list(d.glob("*.log"))) > 3


def _flip_in_batch(segment: Path, k: int) -> tuple[int, set[int]]:
    """Flip a byte inside the records of batch ``k``; its position and offsets."""
    with FileRecords.open(segment) as f:
        batch = list(f.batches())[k]
        position, offsets = batch.position, set(range(batch.base_offset, batch.last_offset + 1))
    data = bytearray(segment.read_bytes())
    data[position + batch.size_in_bytes - 3] ^= 0xFF
    segment.write_bytes(bytes(data))
    return position, offsets


@pytest.mark.parametrize("check_crcs", [True, False])
def test_a_corrupt_batch_in_a_chunk_names_its_file_and_position_or_is_skipped(tmp_path, check_crcs):
    """Chunks are decoded as one buffer; a bad batch in one is found again batch by batch."""
    root = tmp_path / "logs"
    d = root / "bad-0"
    with Log.open(d, LogConfig(segment_bytes=1 << 20, retention_ms=-1)) as log:
        append(log, 0, 50)
    segment = next(d.glob("*.log"))
    before = log_records(d)
    position, lost = _flip_in_batch(segment, 20)
    if check_crcs:
        with pytest.raises(CorruptRecordError) as info:
            scan_all(root)
        assert (info.value.file, info.value.position) == (str(segment), position)
    got = scan_all(root, fail_on_corruption=False, check_crcs=check_crcs)
    if check_crcs:
        assert got == [r for r in before if r[0] not in lost]
    else:  # the flipped byte is in a value: read as it is, as Kafka's check.crcs=false does
        assert [o for o, _ in got] == [o for o, _ in before]


def test_read_only_indexes_survive_a_writer_trimming_them(tmp_path):
    """A tool's read-only OffsetIndex/TimeIndex on a live segment: the writer rolls and trims
    the files; reading every entry afterwards must not die of SIGBUS (it did when mapped)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(f"""
        from pathlib import Path
        from kafkalog import Log, LogConfig, OffsetIndex, RecordBatchBuilder, TimeIndex
        from kafkalog.filenames import offset_index_file, time_index_file
        d = Path({str(tmp_path / "trim-0")!r})
        def add(log, n):
            for i in range(n):
                b = RecordBatchBuilder(); b.append(None, b"x" * 100, timestamp=1_700_000_000_000 + i); log.append(b.build())
        log = Log.open(d, LogConfig(segment_bytes=4096, index_interval_bytes=128))
        add(log, 20)
        indexes = [OffsetIndex(offset_index_file(d, 0), 0, writable=False), TimeIndex(time_index_file(d, 0), 0, writable=False)]
        sizes = [index.entries for index in indexes]
        add(log, 200)  # rolls: the first segment's indexes are trimmed
        log.close()
        for index, n in zip(indexes, sizes):
            assert n > 1000  # the preallocated length, read before the trim
            [index.entry(i) for i in range(n)]
            index.lookup(10**6) if hasattr(index, "lookup") else None
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (result.returncode, result.stderr[-2000:])
