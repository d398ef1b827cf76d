"""The public reader (``kafkalog.spark.read_records`` / ``read_columns`` / ``read_arrow``): the
data source's engine without Spark -- bounds, read_committed, corruption, and nothing written."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog import ControlRecordType, FileRecords, Header, Log, LogConfig, RecordBatchBuilder
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog.errors import CorruptRecordError, InvalidConfigError, InvalidOffsetError
from kafkalog.spark import read_arrow, read_columns, read_records

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
TS = 1_700_000_000_000


def tree_digest(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = "dir"
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


def plain(records) -> list[tuple]:
    return [(r.topic, r.partition, r.offset, r.key, r.value) for r in records]


def append(log: Log, n: int, *, headers=(), producer_id: int = -1, transactional: bool = False, seq: int = -1) -> None:
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                           base_sequence=seq, is_transactional=transactional)
    b.append(b"k%d" % n, b"v%d" % n, timestamp=TS + n, headers=headers)
    log.append(b.build())


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """``orders-0`` (offsets 0..19, timestamps TS+n, small segments), ``orders-1`` (0..4, a
    header each, then an aborted transaction and a committed one), ``__consumer_offsets-0``."""
    root = tmp_path / "kafka-logs"
    with Log.open(root / "orders-0", LogConfig(segment_bytes=400, index_interval_bytes=64, retention_ms=-1)) as log:
        for n in range(20):
            append(log, n)
    with Log.open(root / "orders-1", LogConfig(retention_ms=-1)) as log:
        for n in range(5):
            append(log, n, headers=(Header("h", b"x%d" % n),))
        append(log, 5, producer_id=7, transactional=True, seq=0)  # aborted below
        append(log, 6, producer_id=8, transactional=True, seq=0)  # committed below
        for pid, kind in ((7, ControlRecordType.ABORT), (8, ControlRecordType.COMMIT)):
            log.append(RecordBatchBuilder.end_transaction_marker(kind, producer_id=pid, producer_epoch=0,
                                                                 coordinator_epoch=0, timestamp=TS),
                       origin=AppendOrigin.COORDINATOR)
        append(log, 9)
    with Log.open(root / "__consumer_offsets-0", LogConfig(retention_ms=-1)) as log:
        append(log, 0)
    return root


def file_records(directory: Path) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every data record of a partition, read with FileRecords."""
    out = []
    for seg in sorted(directory.glob("*.log")):
        with FileRecords.open(seg) as f:
            out.extend((r.offset, r.value) for b in f.batches() if not b.is_control for r in b)
    return out


def test_every_record_of_a_log_directory(logs):
    got = list(read_records(logs))
    assert [(r.offset, r.value) for r in got if r.partition == 0] == file_records(logs / "orders-0")
    assert [(r.offset, r.value) for r in got if r.partition == 1] == file_records(logs / "orders-1")
    assert {r.topic for r in got} == {"orders"}  # internal topics only when asked
    first = next(r for r in got if r.partition == 1)
    assert first.headers == (Header("h", b"x0"),) and first.timestamp == TS and first.timestamp_type == 0
    internal = list(read_records(logs, topics=["__consumer_offsets"]))
    assert [(r.topic, r.offset) for r in internal] == [("__consumer_offsets", 0)]
    assert len(list(read_records(logs, include_internal=True))) == len(got) + 1


def test_offset_and_time_bounds(logs):
    part0 = logs / "orders-0"
    assert [r.offset for r in read_records(part0, start_offsets=5, end_offsets=12)] == list(range(5, 12))
    by_partition = list(read_records(logs, start_offsets={"orders": {0: 18}}, end_offsets={"orders": {1: 2}}))
    assert [(r.partition, r.offset) for r in by_partition] == [(0, 18), (0, 19), (1, 0), (1, 1)]
    assert [r.offset for r in read_records(part0, start_timestamp=TS + 15)] == [15, 16, 17, 18, 19]
    assert [r.offset for r in read_records(part0, start_timestamp=TS + 3, end_timestamp=TS + 6)] == [3, 4, 5]
    assert list(read_records(part0, start_timestamp=TS + 1000)) == []  # nothing that late
    assert [r.offset for r in read_records(part0, start_offsets="latest")] == []
    with pytest.raises(InvalidConfigError):
        list(read_records(part0, start_offsets="first"))
    with pytest.raises(InvalidConfigError):
        list(read_records(part0, isolation_level="serializable"))


def test_read_committed_drops_the_aborted_transaction(logs):
    uncommitted = [r.offset for r in read_records(logs / "orders-1")]
    committed = [r.offset for r in read_records(logs / "orders-1", isolation_level="read_committed")]
    assert uncommitted == [0, 1, 2, 3, 4, 5, 6, 9]
    assert committed == [0, 1, 2, 3, 4, 6, 9]


def test_columns_come_in_bounded_runs(logs):
    parts = list(read_columns(logs / "orders-0", max_records_per_batch=3))
    assert all(len(p.columns) <= 3 for p in parts)
    assert [o for p in parts for o in p.columns.offset.tolist()] == list(range(20))
    assert {(p.topic, p.partition) for p in parts} == {("orders", 0)}


def test_corruption_raises_or_is_skipped(logs):
    seg = min((logs / "orders-0").glob("*.log"))
    data = bytearray(seg.read_bytes())
    data[30] ^= 0xFF  # inside the first batch's header: its CRC fails
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError) as info:
        list(read_records(logs / "orders-0"))
    assert str(seg) in str(info.value)
    skipped = [r.offset for r in read_records(logs / "orders-0", fail_on_corruption=False)]
    assert skipped == list(range(1, 20))


def test_a_start_below_the_log_start_is_data_loss(logs):
    with Log.open(logs / "orders-0", LogConfig(segment_bytes=400, index_interval_bytes=64, retention_ms=-1)) as log:
        log.delete_records(4)
        log.delete_old_segments()
    with pytest.raises(InvalidOffsetError):
        list(read_records(logs / "orders-0", start_offsets={"orders": {0: 0}}))
    first = next(read_records(logs / "orders-0", start_offsets={"orders": {0: 0}}, fail_on_data_loss=False))
    assert first.offset == 4


def test_reading_writes_nothing(logs, tmp_path):
    real = tmp_path / "real"
    shutil.copytree(REAL, real)
    for root in (logs, real):
        before = tree_digest(root)
        for kwargs in ({}, {"include_internal": True, "isolation_level": "read_committed"},
                       {"start_timestamp": TS + 2}, {"fail_on_corruption": False}):
            for log_dir in [root, *sorted(p for p in root.iterdir() if p.is_dir())]:
                if log_dir == real:  # log directories, no partition directory: an error
                    with pytest.raises(InvalidConfigError, match="no partition directory"):
                        list(read_records(log_dir, **kwargs))
                    continue
                list(read_records(log_dir, **kwargs))
        assert tree_digest(root) == before


def test_real_segments_read_as_the_file_reader_reads_them():
    for log_dir in sorted(p for p in REAL.iterdir() if p.is_dir()):
        for partition in sorted(p for p in log_dir.iterdir() if p.is_dir()):
            got = [(r.offset, r.value) for r in read_records(partition, include_internal=True)]
            assert got == file_records(partition), partition


def test_arrow_batches_in_sparks_schema(logs):
    pa = pytest.importorskip("pyarrow")
    batches = list(read_arrow(logs, include_headers=True))
    assert batches[0].schema.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                                       "headers"]
    table = pa.Table.from_batches(batches)
    assert table.num_rows == len(list(read_records(logs)))
    assert set(table.column("topic").to_pylist()) == {"orders"}


def test_the_reader_needs_no_pyspark(logs):
    """``import kafkalog.spark`` and the reader work where pyspark cannot be imported; the data
    source itself then says how to install it."""
    code = (
        "import sys\n"
        "sys.modules['pyspark'] = None\n"
        "import kafkalog.spark as ks\n"
        f"print(len(list(ks.read_records({str(logs)!r}))))\n"
        "try:\n"
        "    ks.register\n"
        "except ImportError as e:\n"
        "    print('ImportError', e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    count, message = done.stdout.splitlines()
    assert count == str(len(list(read_records(logs))))
    assert message.startswith("ImportError") and "kafkalog[spark]" in message


def test_the_documented_example_runs_and_prints_what_the_page_says(capsys):
    """docs/reader.md: each ``python`` block runs as written, and prints the block after it."""
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "reader.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", page, re.DOTALL)
    assert blocks
    for code, expected in blocks:
        exec(compile(code, "docs/reader.md", "exec"), {})  # noqa: S102  (the page's own example)
        assert capsys.readouterr().out == expected
