"""The data source's writer on S3 (moto's server on 127.0.0.1) without a Spark session: task
attempts driven through ``_Writer.stage`` as Spark's tasks call it, the commit as the driver
calls it. Proven on the server's request log: the executors upload the segments, and the
driver's commit only copies objects inside the store -- unless claims leave a hole, when that
partition is appended by the driver, exactly once and with contiguous offsets either way."""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("fsspec")
pytest.importorskip("s3fs")
pytest.importorskip("moto")
pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from moto_s3 import s3, s3_server  # noqa: E402,F401
from pyspark.sql.types import BinaryType, StructField, StructType  # noqa: E402

from kafkalog import FileRecords, Log, LogConfig, RecordBatchBuilder
from kafkalog.checkpoint import LEADER_EPOCH_CHECKPOINT
from kafkalog.remote import Storage
from kafkalog.spark import read_records  # noqa: E402
from kafkalog.spark._write import _write_options, _Writer  # noqa: E402

SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])


def writer(server, url: str, **extra: str) -> _Writer:
    """The writer a job on ``url`` gets (``server``: a storage fixture with ``options``)."""
    options = {"path": url, "topic": "t", "numPartitions": "2", "segment.bytes": "4000",
               "maxBatchBytes": "1000", "storageOptions": json.dumps(server.options), **extra}
    return _Writer(_write_options(options, SCHEMA, False))


def rows(attempt: int, n: int) -> list[pa.RecordBatch]:
    keys = [f"key-{i % 7}".encode() for i in range(n)]
    values = [f"a{attempt}-{i}".encode() for i in range(n)]
    return [pa.RecordBatch.from_pydict({"key": keys, "value": values},
                                       schema=pa.schema([("key", pa.binary()), ("value", pa.binary())]))]


def read_back(server, url: str) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = {}
    for r in read_records(url, storage_options=server.options):
        out.setdefault(r.partition, []).append((r.offset, r.value.decode()))
    return out


def check_exactly_once(got: dict[int, list[tuple[int, str]]], attempts: dict[int, int]) -> None:
    """Every committed attempt's records once, offsets 0.. without a gap, and each attempt's
    records of a partition together and in their order."""
    values = []
    for records in got.values():
        assert [o for o, _ in records] == list(range(len(records)))
        values += [v for _, v in records]
        for a in attempts:
            mine = [i for i, (_, v) in enumerate(records) if v.startswith(f"a{a}-")]
            assert mine == list(range(mine[0], mine[0] + len(mine))) if mine else True
            seq = [int(v.split("-")[1]) for _, v in records if v.startswith(f"a{a}-")]
            assert seq == sorted(seq)
    assert sorted(values) == sorted(f"a{a}-{i}" for a, n in attempts.items() for i in range(n))


def partition_puts(s3, prefix: str):
    return [r for r in s3.log if r.method == "PUT" and r.path.startswith(prefix) and ".kafkalog-staging" not in r.path]


def test_executors_upload_and_the_commit_only_copies(s3):
    s3.make_bucket("writes")
    url = "s3://writes/one"
    w = writer(s3, url)
    messages = [w.stage(rows(a, 900), a, f"attempt{a}") for a in range(3)]
    # the tasks uploaded their segments under the staging prefix, nothing in partition directories
    assert not partition_puts(s3, "/writes/one/t-")
    s3.clear()
    w.commit(messages)
    puts = partition_puts(s3, "/writes/one/t-")
    assert puts and all(r.copy_source and r.sent == 0 for r in puts), puts  # server-side copies only
    assert s3.bytes_got(".log") == 0  # the commit read no record (new partitions: no log end to find)
    for log in [r.path for r in puts if r.path.endswith(".log")]:  # indexes land before their .log
        paths = [r.path for r in puts]
        assert paths.index(log[:-4] + ".index") < paths.index(log)
    got = read_back(s3, url)
    assert set(got) == {0, 1}
    check_exactly_once(got, {0: 900, 1: 900, 2: 900})
    assert not [k for k in s3.fs.find("writes/one") if ".kafkalog-staging" in k]
    assert len([k for k in s3.fs.find("writes/one") if k.endswith(".log")]) > 6  # several segments per claim


def test_a_second_job_continues_the_offsets_and_still_only_copies(s3):
    s3.make_bucket("writes")
    url = "s3://writes/two"
    first = writer(s3, url)
    first.commit([first.stage(rows(0, 200), 0, "x")])
    second = writer(s3, url)
    messages = [second.stage(rows(a, 150), a - 1, f"y{a}") for a in (1, 2)]
    s3.clear()
    second.commit(messages)
    assert all(r.copy_source for r in partition_puts(s3, "/writes/two/t-"))
    # finding each partition's log end reads headers near the end of its last segment only
    assert s3.bytes_got(".log") < 2 * 4000
    check_exactly_once(read_back(s3, url), {0: 200, 1: 150, 2: 150})


def race(w: _Writer, attempts: int, n: int) -> list:
    """``attempts`` task attempts staging ``n`` records each, started together on threads:
    their commit messages (a failed attempt's error is raised here)."""
    messages: list = [None] * attempts
    errors: list = []
    start = threading.Barrier(attempts)

    def task(a: int) -> None:
        start.wait(timeout=60)
        try:
            messages[a] = w.stage(rows(a, n), a, f"r{a}")
        except Exception as e:  # reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=task, args=(a,)) for a in range(attempts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and all(m is not None for m in messages), errors
    return messages


@pytest.mark.parametrize("exclusive", [True, False])
def test_attempts_racing_for_claims_get_contiguous_offsets(s3, monkeypatch, exclusive):
    if not exclusive:  # optimistic claims: write, list again, step back on a collision
        monkeypatch.setattr(Storage, "exclusive_create", property(lambda self: False))
    s3.make_bucket("writes")
    url = f"s3://writes/race-{exclusive}"
    w = writer(s3, url, partition="0", preserveOrder="false")  # the order attempts claim in
    messages = race(w, 6, 100)
    claims = sorted(m.staged[0].claim.k for m in messages if m.staged[0].claim is not None)
    if exclusive:
        assert claims == list(range(6))
    else:  # no two attempts keep one number (an attempt that gave up stages for the driver)
        assert len(set(claims)) == len(claims)
    s3.clear()
    w.commit(messages)
    if claims == list(range(6)):
        assert all(r.copy_source for r in partition_puts(s3, f"/writes/race-{exclusive}/t-"))
    check_exactly_once(read_back(s3, url), dict.fromkeys(range(6), 100))


def attempt_order(got: dict[int, list[tuple[int, str]]]) -> dict[int, list[int]]:
    """Per partition, the attempts in the order their records come (each attempt once)."""
    out: dict[int, list[int]] = {}
    for p, records in got.items():
        seen: list[int] = []
        for _, v in records:
            a = int(v.split("-")[0][1:])
            if not seen or seen[-1] != a:
                seen.append(a)
        out[p] = seen
    return out


@pytest.mark.parametrize("preserve", [True, False])
def test_attempts_claiming_out_of_spark_partition_order(s3, caplog, preserve):
    s3.make_bucket("writes")
    url = f"s3://writes/order-{preserve}"
    w = writer(s3, url, preserveOrder=str(preserve).lower())
    messages = {p: w.stage(rows(p, 200), p, f"o{p}") for p in (2, 1, 0)}  # the last partition finishes first
    s3.clear()
    with caplog.at_level("INFO", logger="kafkalog.spark"):
        w.commit([messages[p] for p in (0, 1, 2)])
    got = read_back(s3, url)
    check_exactly_once(got, {0: 200, 1: 200, 2: 200})
    copies_only = all(r.copy_source for r in partition_puts(s3, f"/writes/order-{preserve}/t-"))
    if preserve:  # Spark-partition order, as on a local path: the driver re-appends
        assert attempt_order(got) == {0: [0, 1, 2], 1: [0, 1, 2]}
        assert "appended by the driver" in caplog.text and not copies_only
    else:  # the claim order, each attempt's records together: copied in place
        assert attempt_order(got) == {0: [2, 1, 0], 1: [2, 1, 0]}
        assert copies_only and "appended by the driver" not in caplog.text


def test_a_failed_attempts_claim_leaves_a_hole_the_driver_appends_over(s3, caplog):
    s3.make_bucket("writes")
    url = "s3://writes/hole"
    w = writer(s3, url)
    messages = [w.stage(rows(a, 120), a, f"h{a}") for a in range(3)]
    del messages[1]  # attempt 1 claimed offsets, then failed: Spark commits only 0 and 2
    s3.clear()
    with caplog.at_level("INFO", logger="kafkalog.spark"):
        w.commit(messages)
    assert "appended by the driver" in caplog.text
    assert any(r.sent > 0 for r in partition_puts(s3, "/writes/hole/t-"))  # uploaded by the driver
    check_exactly_once(read_back(s3, url), {0: 120, 2: 120})


def test_a_store_without_exclusive_create_claims_optimistically(s3, monkeypatch):
    """GCS, Azure, HDFS, ...: claims are written under the attempt's own name and listed again;
    the executors still publish the segments and the commit only copies."""
    monkeypatch.setattr(Storage, "exclusive_create", property(lambda self: False))
    s3.make_bucket("writes")
    url = "s3://writes/plain"
    w = writer(s3, url)
    messages = [w.stage(rows(a, 100), a, f"p{a}") for a in range(2)]
    # each attempt claimed both partitions, one after the other: claims 0 then 1
    assert [(item.partition, item.claim.k) for m in messages for item in m.staged] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    s3.clear()
    w.commit(messages)
    puts = partition_puts(s3, "/writes/plain/t-")
    assert puts and all(r.copy_source and r.sent == 0 for r in puts)
    check_exactly_once(read_back(s3, url), {0: 100, 1: 100})


def test_claims_that_keep_colliding_fall_back_to_the_driver(s3, monkeypatch, caplog):
    """An attempt whose optimistic claim collides every time gives up after a bounded number of
    tries and stages its batch file; the commit appends it through the driver."""
    import kafkalog.spark._write_remote as wr

    monkeypatch.setattr(Storage, "exclusive_create", property(lambda self: False))
    monkeypatch.setattr(wr, "_MAX_COLLISIONS", 2)
    monkeypatch.setattr(wr, "_BACKOFF_S", 0.001)
    real = wr._claims_by_number

    def crowded(storage, prefix):  # a phantom attempt always holds the number just written
        claims = real(storage, prefix)
        for names in claims.values():
            names.append("0000000000.phantom")
        return claims

    s3.make_bucket("writes")
    url = "s3://writes/crowded"
    w = writer(s3, url)
    monkeypatch.setattr(wr, "_claims_by_number", crowded)
    with caplog.at_level("INFO", logger="kafkalog.spark"):
        messages = [w.stage(rows(a, 80), a, f"c{a}") for a in range(2)]
    monkeypatch.setattr(wr, "_claims_by_number", real)
    assert all(item.claim is None for m in messages for item in m.staged)
    assert "kept colliding" in caplog.text
    with caplog.at_level("INFO", logger="kafkalog.spark"):
        w.commit(messages)
    assert "appended by the driver" in caplog.text
    check_exactly_once(read_back(s3, url), {0: 80, 1: 80})


def test_a_failed_commit_removes_what_it_published(s3, monkeypatch):
    s3.make_bucket("writes")
    url = "s3://writes/fail"
    first = writer(s3, url)
    first.commit([first.stage(rows(0, 100), 0, "f0")])
    before = sorted(s3.fs.find("writes/fail"))
    w = writer(s3, url)
    messages = [w.stage(rows(a, 200), a, f"g{a}") for a in (1, 2)]
    copies = []
    real = Storage.copy

    def failing(self, src, dst):
        if len(copies) == 4:  # the second claim's segment is half copied
            raise OSError("the store went away")
        copies.append(dst)
        real(self, src, dst)

    monkeypatch.setattr(Storage, "copy", failing)
    with pytest.raises(OSError, match="went away"):
        w.commit(messages)
    s3.fs.invalidate_cache()
    assert sorted(k for k in s3.fs.find("writes/fail") if ".kafkalog-staging" not in k) == before
    check_exactly_once(read_back(s3, url), {0: 100})


def test_abort_deletes_the_staged_segments(s3):
    s3.make_bucket("writes")
    url = "s3://writes/abort"
    w = writer(s3, url)
    messages = [w.stage(rows(0, 50), 0, "z")]
    assert [k for k in s3.fs.find("writes/abort") if ".kafkalog-staging" in k]
    w.abort(messages)
    s3.fs.invalidate_cache()
    assert s3.fs.find("writes/abort") == []


def _epochs(s3, url: str) -> list[tuple[int, int]]:
    """(base offset, partition leader epoch) of every batch of partition ``t-0`` at ``url``."""
    storage = Storage.for_path(url, s3.options)
    out = []
    for name in sorted(storage.list_files(f"{url}/t-0")):
        if name.endswith(".log"):
            with FileRecords.open(f"{url}/t-0/{name}", storage=storage) as records:
                out += [(b.base_offset, b.partition_leader_epoch) for b in records.batches()]
    return out


@pytest.mark.parametrize("how", ["claims", "driver", "no-checkpoint"])
def test_appends_continue_the_partitions_leader_epoch(s3, tmp_path, monkeypatch, how):
    """A partition a broker wrote in leader epoch 7 is continued in epoch 7 (found from the
    leader-epoch-checkpoint or the last batch), by the executors' claims and by the driver:
    an epoch below one already in the log would make Kafka's epoch cache drop its entries."""
    for p in range(2):
        with Log.open(tmp_path / f"t-{p}", LogConfig()) as log:
            builder = RecordBatchBuilder()
            builder.append(b"k", b"v", timestamp=1_700_000_000_000)
            log.append(builder.build(), leader_epoch=7)
    if how == "no-checkpoint":
        for p in range(2):
            (tmp_path / f"t-{p}" / LEADER_EPOCH_CHECKPOINT).unlink()
    if how == "driver":
        monkeypatch.setattr(Storage, "exclusive_create", property(lambda self: False))
    s3.make_bucket("writes")
    url = f"s3://writes/epoch-{how}"
    s3.put_dir(tmp_path, url)
    w = writer(s3, url)
    w.commit([w.stage(rows(a, 200), a, f"e{a}") for a in range(2)])
    epochs = _epochs(s3, url)
    assert epochs[0] == (0, 7) and len(epochs) > 2
    assert {e for _, e in epochs} == {7}
    assert [o for o, _ in read_back(s3, url)[0]][:3] == [0, 1, 2]
