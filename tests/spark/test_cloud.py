"""Partition directories on S3 (moto's server on 127.0.0.1) and ``file://`` URLs through the
reading engine without Spark: the same records as from local disk, offset and time bounds that
fetch only the index files and the byte ranges they select (asserted on the server's request
log), and path errors that name the path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("fsspec")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

from moto_s3 import s3, s3_server  # noqa: E402,F401
from test_spark import build_log  # noqa: E402

from kafkalog import Compression, ControlRecordType, FileRecords, Log, LogConfig, RecordBatchBuilder
from kafkalog.producer_state.manager import AppendOrigin
from kafkalog.remote import SMALL_BLOCK_SIZE, Storage, normalize_path  # noqa: E402
from kafkalog.errors import CorruptRecordError, InvalidConfigError, InvalidOffsetError  # noqa: E402
from kafkalog.spark import read_records  # noqa: E402

URL = "s3://cloud/logs"


def rows(path, **kwargs) -> list[tuple]:
    return [(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, r.headers)
            for r in read_records(path, **kwargs)]


@pytest.fixture(scope="module")
def local_logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cloud")
    build_log(root / "orders-0", batches=120)
    build_log(root / "orders-1", batches=4)
    build_log(root / "audit-0", batches=30, codec=Compression.ZSTD)
    build_log(root / "__consumer_offsets-0", batches=2)
    return root


@pytest.fixture
def uploaded(s3, local_logs) -> Path:
    if not s3.fs.exists(URL[len("s3://"):] + "/orders-0"):
        s3.put_dir(local_logs, URL)
    s3.clear()
    return local_logs


def test_normalize_path():
    assert normalize_path("s3a://bkt//a/./b/../c/") == "s3://bkt/a/c"
    assert normalize_path("S3://bkt") == "s3://bkt"
    assert normalize_path("gs://b/x/*/orders-*") == "gs://b/x/*/orders-*"
    assert normalize_path("file:///tmp/x/../y") == "/tmp/y"
    assert normalize_path("file://localhost/tmp/y") == "/tmp/y"
    assert normalize_path("rel/dir") == os.path.join(os.getcwd(), "rel/dir")
    with pytest.raises(InvalidConfigError, match="not on 'otherhost'"):
        normalize_path("file://otherhost/tmp")
    with pytest.raises(InvalidConfigError, match="bucket"):
        normalize_path("s3:///key")


def test_s3_reads_what_local_disk_reads(s3, uploaded):
    for kwargs in ({}, {"topics": ["orders", "__consumer_offsets"]}, {"include_headers": False},
                   {"isolation_level": "read_committed"}):
        assert rows(URL, storage_options=s3.options, **kwargs) == rows(uploaded, **kwargs)
    assert rows(URL + "/orders-0", storage_options=s3.options) == rows(uploaded / "orders-0")
    assert rows("s3a://cloud/logs/*-1", storage_options=s3.options) == rows(uploaded / "orders-1")


def test_a_full_read_fetches_each_segment_once(s3, uploaded):
    n = len(rows(URL + "/orders-0", storage_options=s3.options))
    assert n == 600
    logs = sorted((uploaded / "orders-0").glob("*.log"))
    for log in logs:
        gets = s3.gets(f"orders-0/{log.name}")
        # one ranged request reads the whole (small) segment; planning reads the last one's
        # tail headers once more
        assert sum(r.bytes for r in gets if r.bytes > 61) <= 2 * log.stat().st_size, log.name
    fetched = s3.bytes_got(".log")
    assert fetched <= 1.2 * sum(p.stat().st_size for p in logs)


def _big_log(directory: Path) -> None:
    """~3 MiB in 256 KiB segments, an index entry every 4 KiB (Kafka's default interval)."""
    config = LogConfig(segment_bytes=256 << 10, index_interval_bytes=4096)
    with Log.open(directory, config) as log:
        for i in range(1500):
            b = RecordBatchBuilder()
            for j in range(5):
                b.append(b"k%d" % (i % 7), os.urandom(64) * 6, timestamp=1_000_000 + i * 10 + j)
            log.append(b.build())


def _selected_bytes(logs: list[Path], start: int, end: int) -> tuple[int, set[str]]:
    """Bytes of the batches holding offsets [start, end), and the segments holding them."""
    total, names = 0, set()
    for log in logs:
        with FileRecords.open(log) as records:
            for b in records.batches():
                if b.last_offset >= start and b.base_offset < end:
                    total += b.size_in_bytes
                    names.add(log.name)
    return total, names


def test_offset_bounds_fetch_only_the_selected_ranges(s3, tmp_path):
    local = tmp_path / "up"
    _big_log(local / "big-0")
    s3.put_dir(local, "s3://cloud/big")
    logs = sorted((local / "big-0").glob("*.log"))
    assert len(logs) >= 10
    n = 7500
    for start in (0, n // 2, n - 375):  # 5% of the offsets: at the start, the middle, the end
        end = start + n // 20
        want = [r for r in rows(local) if start <= r[2] < end]
        s3.clear()
        assert rows("s3://cloud/big", storage_options=s3.options, start_offsets=start, end_offsets=end) == want
        selected, holding = _selected_bytes(logs, start, end)
        touched = {r.path.rsplit("/", 1)[-1] for r in s3.gets(".log")}
        # never a segment the bounds exclude (but the last one: planning finds the log end there)
        assert touched - holding <= {logs[-1].name}, sorted(touched - holding)
        log_bytes = s3.bytes_got(".log")
        index_bytes = s3.bytes_got(".index") + s3.bytes_got(".timeindex")
        # fetched vs selected: 1.2x, plus the batch headers planning checks (a 16 KiB
        # read-ahead at the start's index entry, the end's and the log end)
        assert log_bytes <= 1.2 * selected + 4 * SMALL_BLOCK_SIZE, (log_bytes, selected, index_bytes)
        # only the indexes of the segments in the bounds (and the last) were fetched
        assert {r.path.rsplit("/", 1)[-1].split(".")[0] for r in s3.gets(".index")} <= \
            {name.split(".")[0] for name in holding | {logs[-1].name}}


def test_time_bounds_prune_on_s3(s3, uploaded):
    local = uploaded / "orders-0"
    everything = rows(local)
    ts = everything[450][3]
    want = rows(local, start_timestamp=ts)
    s3.clear()
    assert rows(URL + "/orders-0", storage_options=s3.options, start_timestamp=ts) == want
    first_logs = sorted(local.glob("*.log"))[:3]
    touched = {r.path.rsplit("/", 1)[-1] for r in s3.gets(".log")}
    assert not touched & {p.name for p in first_logs}


def test_file_urls_read_local_directories(uploaded):
    assert rows(f"file://{uploaded}") == rows(uploaded)
    log = sorted((uploaded / "orders-1").glob("*.log"))[0]
    with FileRecords.open(f"file://{log}") as by_url, FileRecords.open(log) as by_path:
        assert not by_url.is_remote and by_url.read(0, 1000) == by_path.read(0, 1000)
    assert rows(f"file://{uploaded}/orders-*") == rows(uploaded, topics=["orders"])


def test_relative_paths_are_made_absolute(uploaded, monkeypatch):
    monkeypatch.chdir(uploaded.parent)
    assert rows(uploaded.name) == rows(uploaded)


def test_path_errors_name_the_path(s3, uploaded, tmp_path):
    for path, message in (
        ("s3://cloud/nothing-here", "no such directory"),
        ("s3://cloud/logs/zzz-*", "no directory matches"),
        (str(tmp_path / "missing"), "no such directory"),
    ):
        for fail in (True, False):
            with pytest.raises(InvalidConfigError, match=message) as info:
                rows(path, storage_options=s3.options, fail_on_data_loss=fail)
            assert info.value.file and path.split("*")[0].rstrip("-z") in info.value.file
    (tmp_path / "empty").mkdir()
    s3.fs.put_file(str(uploaded / "orders-1" / "00000000000000000000.index"), "cloud/stray/readme.txt")
    for path in (str(tmp_path / "empty"), "s3://cloud/stray"):
        with pytest.raises(InvalidConfigError, match="no partition directory") as info:
            rows(path, storage_options=s3.options, fail_on_data_loss=False)
        assert info.value.file == path


def test_remote_files_are_read_only(s3, uploaded):
    url = URL + "/orders-1/00000000000000000000.log"
    with pytest.raises(InvalidConfigError, match="read-only"):
        FileRecords.open(url, mutable=True, storage=Storage.for_path(url, s3.options))
    with FileRecords.open(url, storage=Storage.for_path(url, s3.options)) as remote, \
            FileRecords.open(uploaded / "orders-1" / "00000000000000000000.log") as local:
        assert [b.base_offset for b in remote.batches(validate=True)] == [b.base_offset for b in local.batches()]
        assert remote.read(5, 100) == local.read(5, 100)
        a, b = bytearray(100), bytearray(100)
        assert remote.read_into(5, a) == local.read_into(5, b) == 100 and a == b
        assert remote.is_remote and not local.is_remote


def test_a_read_committed_log_on_s3(s3, tmp_path):
    directory = tmp_path / "tx-0"
    with Log.open(directory, LogConfig()) as log:
        for i, abort in enumerate((False, True, False)):
            b = RecordBatchBuilder(producer_id=7, producer_epoch=0, base_sequence=i * 2, is_transactional=True)
            b.append(b"k", f"v{i}".encode(), timestamp=1000 + i)
            b.append(b"k", f"w{i}".encode(), timestamp=1000 + i)
            log.append(b.build())
            kind = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
            log.append(RecordBatchBuilder.end_transaction_marker(kind, producer_id=7, producer_epoch=0,
                                                                 coordinator_epoch=0, timestamp=1000 + i),
                       origin=AppendOrigin.COORDINATOR)
    shutil.copytree(directory, tmp_path / "up" / "tx-0")
    s3.put_dir(tmp_path / "up", "s3://cloud/tx")
    kwargs = {"isolation_level": "read_committed"}
    assert rows("s3://cloud/tx", storage_options=s3.options, **kwargs) == rows(tmp_path / "up", **kwargs)
    assert [r[5] for r in rows("s3://cloud/tx", storage_options=s3.options, **kwargs)] == [b"v0", b"w0", b"v2", b"w2"]


def test_corrupt_batches_on_s3_are_named_or_skipped(s3, uploaded, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(uploaded / "orders-0", bad / "orders-0")
    log = sorted((bad / "orders-0").glob("*.log"))[2]
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    log.write_bytes(bytes(data))
    s3.put_dir(bad, "s3://cloud/bad")
    with pytest.raises(CorruptRecordError) as info:
        rows("s3://cloud/bad", storage_options=s3.options)
    assert info.value.file == f"s3://cloud/bad/orders-0/{log.name}" and info.value.position == 0
    assert rows("s3://cloud/bad", storage_options=s3.options, fail_on_corruption=False) == \
        rows(bad, fail_on_corruption=False)


@pytest.mark.parametrize("fail", [True, False])
def test_a_segment_deleted_after_planning(s3, tmp_path, fail):
    """A segment deleted between planning and reading (retention) is reported as data loss, or
    skipped with failOnDataLoss=false: its GET fails (the reader asks no HEAD first)."""
    build_log(tmp_path / "orders-0", batches=120)
    url = f"s3://cloud/deleted-{fail}"
    s3.put_dir(tmp_path, url)
    logs = sorted(p.name for p in (tmp_path / "orders-0").glob("*.log"))
    assert len(logs) > 2
    from kafkalog.spark import read_columns

    parts = read_columns(url, storage_options=s3.options, fail_on_data_loss=fail, max_records_per_batch=1)
    first = next(parts)  # planned, and the first segment is being read
    assert first.columns.offset[0] == 0
    s3.fs.rm(f"{url[len('s3://'):]}/orders-0/{logs[1]}")
    s3.clear()
    if fail:
        with pytest.raises(InvalidOffsetError, match="deleted .* before it was read") as err:
            list(parts)
        assert logs[1] in str(err.value)
    else:
        offsets = [int(o) for part in parts for o in part.columns.offset]
        base1, base2 = int(logs[1][:-4]), int(logs[2][:-4])
        assert offsets and not [o for o in offsets if base1 <= o < base2]
        assert offsets[-1] == 599
    assert not [r for r in s3.log if r.method == "HEAD" and r.path.endswith(".log")]
