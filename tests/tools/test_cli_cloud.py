"""The read-only commands (dump, verify, stat) on S3 paths (moto's server on 127.0.0.1), read in
place: the same findings and the same output as on local disk, reports and errors naming the
remote files, only GET/HEAD requests (listings are GETs), the bytes fetched bounded by the
files' sizes (taken from the server's request log), and no temporary file."""

from __future__ import annotations

import io
import json
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto")

sys.path.insert(0, str(Path(__file__).parent.parent / "spark"))
from moto_s3 import s3, s3_server  # noqa: E402,F401
from test_cloud import _big_log  # noqa: E402
from test_spark import build_log  # noqa: E402
from test_verify import build_partition, middle_batch, segment_with_aborts  # noqa: E402

from kafkalog.filenames import segment_logs  # noqa: E402
from kafkalog.errors import KafkalogError  # noqa: E402
from kafkalog import verify_path, verify_segment  # noqa: E402
from kafkalog.tools import main  # noqa: E402

URL = "s3://clitools/logs"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def endpoint(s3, monkeypatch):
    for name in ("FSSPEC_S3_ENDPOINT_URL", "FSSPEC_S3_KEY", "FSSPEC_S3_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)  # how the CLI finds the server (boto's own variable)
    return s3


def upload(s3, local: Path, url: str) -> None:
    if s3.fs.exists(url[len("s3://"):]):
        s3.fs.rm(url[len("s3://"):], recursive=True)
    s3.put_dir(local, url)
    s3.clear()


@pytest.fixture
def store(endpoint, tmp_path) -> Path:
    local = tmp_path / "logs"
    build_log(local / "orders-0", batches=40)
    build_log(local / "orders-1", batches=5)
    upload(endpoint, local, URL)
    return local


def _no_writes(s3) -> None:
    assert {r.method for r in s3.log} <= {"GET", "HEAD"}, {(r.method, r.path) for r in s3.log}


def same(local_text: str, local_root: Path, url: str) -> str:
    """The local output as the remote run should print it: the local root named by the URL."""
    return local_text.replace(str(local_root), url)


def test_verify_and_stat_on_s3_match_local(s3, store):
    status, out, _ = run("verify", "--json", URL)
    assert status == 0
    remote = json.loads(out)
    status, out, _ = run("verify", "--json", str(store))
    assert remote == json.loads(same(out, store, URL))
    assert remote["ok"] and remote["path"] == URL
    assert remote["segments"][0]["path"].startswith(URL + "/orders-0/")
    for argv in (["stat"], ["stat", "--shallow"], ["stat", "--json"], ["verify"], ["verify", "--warnings"]):
        for sub in ("", "/orders-0", "/orders-0/00000000000000000000.log"):
            status, remote_text, remote_err = run(*argv, URL + sub)
            local_status, local_text, local_err = run(*argv, str(store) + sub)
            assert (status, remote_text, remote_err) == (local_status, same(local_text, store, URL), same(local_err, store, URL))
    status, text, _ = run("verify", URL)
    assert status == 0 and f"{URL}: OK" in text
    _no_writes(s3)


def test_dump_on_s3_matches_local(s3, store):
    log = sorted((store / "orders-0").glob("*.log"))[1]
    url = f"{URL}/orders-0/{log.name}"
    status, remote, _ = run("dump", "--deep-iteration", "--files", url)
    assert status == 0
    status, local, _ = run("dump", "--deep-iteration", "--files", str(log))
    assert remote == local.replace(str(log), url)
    assert f"Dumping {url}" in remote
    index = url[:-4] + ".index"
    status, remote_index, _ = run("dump", "--files", index)
    assert status == 0 and "offset:" in remote_index and "/tmp/" not in remote_index
    _no_writes(s3)


# -- the same findings as locally, on every kind of file ----------------------------------------------


def _flip_crc(p: Path) -> None:
    log = segment_logs(p)[1]
    batch, _ = middle_batch(log)
    data = bytearray(log.read_bytes())
    data[batch.position + 30] ^= 0x01
    log.write_bytes(bytes(data))


def _torn_tail(p: Path) -> None:
    log = segment_logs(p)[-1]
    _, batches = middle_batch(log)
    with open(log, "r+b") as f:
        f.truncate(batches[-1].position + 20)


def _rewrite(path: Path, entry: int, fmt: str, values) -> None:
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, entry * struct.calcsize(fmt), *values)
    path.write_bytes(bytes(data))


def _index_backwards(p: Path) -> None:
    index = segment_logs(p)[0].with_suffix(".index")
    _rewrite(index, 1, ">ii", struct.unpack_from(">ii", index.read_bytes(), 0))


def _index_past_the_log(p: Path) -> None:
    log = segment_logs(p)[0]
    index = log.with_suffix(".index")
    n = index.stat().st_size // 8
    rel, _ = struct.unpack_from(">ii", index.read_bytes(), (n - 1) * 8)
    _rewrite(index, n - 1, ">ii", (rel, log.stat().st_size + 100))


def _time_index_wrong(p: Path) -> None:
    tindex = segment_logs(p)[0].with_suffix(".timeindex")
    n = tindex.stat().st_size // 12
    ts, rel = struct.unpack_from(">qi", tindex.read_bytes(), (n - 1) * 12)
    _rewrite(tindex, n - 1, ">qi", (ts + 1, rel))


def _preallocated_indexes(p: Path) -> None:
    for suffix in (".index", ".timeindex"):
        path = segment_logs(p)[0].with_suffix(suffix)
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size + 4800)


def _txnindex_short(p: Path) -> None:
    txn_index = segment_with_aborts(p).with_suffix(".txnindex")
    txn_index.write_bytes(txn_index.read_bytes()[:-34])


def _snapshot_crc(p: Path) -> None:
    snapshot = sorted(p.glob("*.snapshot"))[-1]
    data = bytearray(snapshot.read_bytes())
    data[12] ^= 0x40
    snapshot.write_bytes(bytes(data))


def _bad_checkpoints(p: Path) -> None:
    (p / "leader-epoch-checkpoint").write_bytes(b"0\n2\n0 0\n")
    (p / "partition.metadata").write_bytes(b"version: 0\ntopic_id: nope")
    (p.parent / "recovery-point-offset-checkpoint").write_bytes(b"0\n1\ntopic 0 not-a-number\n")


def _leftovers(p: Path) -> None:
    log = segment_logs(p)[0]
    shutil.copy(log, log.with_name(log.name + ".deleted"))
    (p / "00000000000000099999.index").write_bytes(b"")
    shutil.copytree(p, p.parent / "topic-1.0a1b2c3d4e5f60718293a4b5c6d7e8f9-delete")


DAMAGE = {
    "clean": lambda p: None,
    "crc": _flip_crc,
    "torn-tail": _torn_tail,
    "index-backwards": _index_backwards,
    "index-past-the-log": _index_past_the_log,
    "timeindex": _time_index_wrong,
    "preallocated": _preallocated_indexes,
    "txnindex": _txnindex_short,
    "snapshot": _snapshot_crc,
    "checkpoints": _bad_checkpoints,
    "leftovers": _leftovers,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damage_is_reported_as_locally_naming_the_url(endpoint, tmp_path, damage):
    s3 = endpoint
    root = tmp_path / "logs"
    partition = build_partition(root)
    DAMAGE[damage](partition)
    url = f"s3://clitools/damage-{damage}"
    upload(s3, root, url)
    for target in ("", "/topic-0", "/topic-0/00000000000000000000.log"):
        for argv in (["verify", "--json", "--deep"], ["verify", "--warnings"], ["stat"]):
            remote = run(*argv, url + target)
            local = run(*argv, str(root) + target)
            assert remote == tuple(same(x, root, url) if isinstance(x, str) else x for x in local), (argv, target)
    status, out, _ = run("verify", "--json", url)
    report = json.loads(out)
    problems = [p for s in report["segments"] for p in s.get("problems", [])] + report.get("other", [])
    assert (damage == "clean") == (problems == [])
    assert all(p["path"].startswith(url + "/") for p in problems)
    if damage in ("crc", "torn-tail"):
        assert not report["ok"] and any(p["position"] is not None for p in problems)
    api = verify_path(url + "/topic-0", deep=True, storage_options=s3.options)
    assert api.to_dict() == json.loads(same(json.dumps(verify_path(partition, deep=True).to_dict()), root, url))
    _no_writes(s3)


def test_dump_of_every_file_kind_matches_local(endpoint, tmp_path):
    s3 = endpoint
    root = tmp_path / "logs"
    partition = build_partition(root)
    _index_backwards(partition)  # mismatches to report too
    _time_index_wrong(partition)
    (root / "recovery-point-offset-checkpoint").write_bytes(b"0\n1\ntopic 0 42\n")
    url = "s3://clitools/dump"
    upload(s3, root, url)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    kinds = {p.suffix or p.name for p in files}
    assert {".log", ".index", ".timeindex", ".txnindex", ".snapshot", "leader-epoch-checkpoint",
            "recovery-point-offset-checkpoint"} <= kinds
    for options in ([], ["--deep-iteration", "--print-data-log"], ["--index-sanity-check"], ["--verify-index-only"],
                    ["--json", "--deep-iteration"], ["--max-bytes", "700"]):
        for f in files:
            remote = run("dump", *options, "--files", same(str(f), root, url))
            local = run("dump", *options, "--files", str(f))
            assert remote == tuple(same(x, root, url) if isinstance(x, str) else x for x in local), (options, f)
    # several files in one run, as Kafka's tool takes them
    names = ",".join(same(str(f), root, url) for f in files[:6])
    local_names = ",".join(str(f) for f in files[:6])
    remote, local = run("dump", "--files", names), run("dump", "--files", local_names)
    assert remote == tuple(same(x, root, url) if isinstance(x, str) else x for x in local)
    _no_writes(s3)


# -- what is fetched --------------------------------------------------------------------------------


@pytest.fixture
def big(endpoint, tmp_path) -> Path:
    local = tmp_path / "big"
    _big_log(local / "big-0")  # ~3 MiB of incompressible records in 256 KiB segments
    upload(endpoint, local, "s3://clitools/big")
    return local / "big-0"


def _size(paths) -> int:
    return sum(p.stat().st_size for p in paths)


def test_dump_fetches_a_segment_about_once(endpoint, big):
    s3 = endpoint
    logs = segment_logs(big)
    assert len(logs) >= 10
    log = logs[3]
    url = f"s3://clitools/big/big-0/{log.name}"
    status, out, _ = run("dump", "--deep-iteration", "--files", url)
    assert status == 0 and out.count("baseOffset:") > 100
    size = log.stat().st_size
    assert s3.bytes_got(log.name) <= 1.1 * size
    assert {r.path.rsplit("/", 1)[-1] for r in s3.gets()} == {log.name}  # no other file's bytes
    _no_writes(s3)
    # --max-bytes: nothing fetched past it
    s3.clear()
    status, out, _ = run("dump", "--max-bytes", "20000", "--files", url)
    assert status == 0 and s3.bytes_got(log.name) <= 20000
    # an index dump reads the index once and the log only where the entries point, about once
    s3.clear()
    index = log.with_suffix(".index")
    status, out, _ = run("dump", "--files", url[:-4] + ".index")
    assert status == 0 and out.count("offset:") == index.stat().st_size // 8
    assert s3.bytes_got(index.name) == index.stat().st_size and len(s3.gets(index.name)) == 1
    assert s3.bytes_got(log.name) <= 1.1 * size + (1 << 20)
    _no_writes(s3)


@pytest.mark.parametrize("command", [["verify"], ["verify", "--deep"], ["stat"], ["stat", "--shallow"]])
def test_verify_and_stat_read_every_file_once(endpoint, big, command):
    s3 = endpoint
    status, out, err = run(*command, "s3://clitools/big/big-0")
    assert status == 0, err
    logs = segment_logs(big)
    assert s3.bytes_got(".log") <= 1.1 * _size(logs)
    for suffix in (".index", ".timeindex"):
        indexes = [log.with_suffix(suffix) for log in logs]
        assert s3.bytes_got(suffix) == _size(indexes)  # each fetched whole, once
        assert len(s3.gets(suffix)) == len(indexes)
    assert s3.bytes_got(".snapshot") == _size(big.glob("*.snapshot"))
    # one listing of the partition directory (and of its parent, for the log directory's checkpoints)
    listings = [r for r in s3.log if r.method == "GET" and r.path.rstrip("/") == "/clitools"]
    assert 1 <= len(listings) <= 3
    assert not [r for r in s3.log if r.method == "HEAD" and r.path.endswith(".log")]  # sizes from the listing
    _no_writes(s3)


def test_no_temporary_files(endpoint, store, tmp_path, monkeypatch):
    empty = tmp_path / "tmp"
    empty.mkdir()
    monkeypatch.setenv("TMPDIR", str(empty))
    monkeypatch.setattr(tempfile, "tempdir", str(empty))
    log = sorted((store / "orders-0").glob("*.log"))[0]
    for argv in (["verify", "--deep", URL], ["stat", URL + "/orders-0"],
                 ["dump", "--deep-iteration", "--files", f"{URL}/orders-0/{log.name}"],
                 ["dump", "--files", f"{URL}/orders-0/{log.stem}.timeindex"]):
        status, _, err = run(*argv)
        assert status == 0, err
    assert list(empty.iterdir()) == []
    _no_writes(endpoint)


# -- what is missing ----------------------------------------------------------------------------------


def test_missing_remote_paths_fail_with_their_name(s3, store):
    for argv in (["verify", "s3://clitools/nothing"], ["stat", "s3://clitools/nothing"],
                 ["verify", "s3://clitools/nothing/00000000000000000000.log"]):
        status, _, err = run(*argv)
        assert status == 1 and f"{argv[-1]}: No such file or directory" in err, err
    status, _, err = run("dump", "--files", "s3://clitools/nothing/00000000000000000000.log")
    assert status == 1 and "s3://clitools/nothing/00000000000000000000.log: No such file or directory" in err
    status, _, err = run("dump", "--files", URL + "/orders-0/00000000000000000000.log.d/00000000000000000000.log")
    assert status == 1 and "No such file or directory" in err
    # a directory named like a segment: as locally
    (store / "orders-0" / "00000000000000000099.log").mkdir()
    (store / "orders-0" / "00000000000000000099.log" / "x").write_bytes(b"x")
    s3.fs.put_file(str(store / "orders-0" / "00000000000000000099.log" / "x"), "clitools/logs/orders-0/00000000000000000099.log/x")
    s3.clear()
    remote = run("dump", "--files", URL + "/orders-0/00000000000000000099.log")
    local = run("dump", "--files", str(store / "orders-0" / "00000000000000000099.log"))
    assert remote == tuple(same(x, store, URL) if isinstance(x, str) else x for x in local) and remote[0] == 1
    with pytest.raises(KafkalogError, match="s3://clitools/nothing"):
        verify_path("s3://clitools/nothing", storage_options=s3.options)
    with pytest.raises(KafkalogError, match="s3://clitools/nothing/00000000000000000000.log"):
        verify_segment("s3://clitools/nothing/00000000000000000000.log", storage_options=s3.options)
    # s3a:// is Hadoop's name for the same store
    assert verify_path("s3a://clitools/logs/orders-1", storage_options=s3.options).ok
    _no_writes(s3)


def test_verify_segment_on_s3_names_the_url(s3, store):
    log = sorted((store / "orders-0").glob("*.log"))[2]
    url = f"{URL}/orders-0/{log.name}"
    remote = verify_segment(url, deep=True, storage_options=s3.options)
    local = verify_segment(log, deep=True)
    assert remote.to_dict() == json.loads(same(json.dumps(local.to_dict()), store, URL))
    assert remote.path == url and remote.ok


def test_file_urls_are_local_paths(store):
    log = sorted((store / "orders-0").glob("*.log"))[0]
    for argv in (["verify", "--json"], ["stat"]):
        assert run(*argv, f"file://{store}") == run(*argv, str(store))
    assert run("dump", "--files", f"file://{log}") == run("dump", "--files", str(log))


def test_a_failed_request_is_not_reported_as_corruption(s3, store, monkeypatch):
    """A ranged GET that fails midway (the network, throttling) ends the check of that file with
    an error naming the URL and the position, never with a made-up corruption finding."""
    from kafkalog.remote import Storage

    real = Storage.read_range

    def failing(self, path, start, end):
        if path.endswith("00000000000000000035.log"):
            raise ConnectionError("connection reset by peer")
        return real(self, path, start, end)

    monkeypatch.setattr(Storage, "read_range", failing)
    url = f"{URL}/orders-0/00000000000000000035.log"
    for argv in (["dump", "--files", url], ["verify", "--json", URL + "/orders-0"], ["verify", url]):
        status, out, err = run(*argv)
        assert status == 1, argv
        assert "crc" not in out and "corrupt" not in out and "truncated" not in out, out
    status, out, _ = run("verify", "--json", URL + "/orders-0")
    problems = [p for s in json.loads(out)["segments"] for p in s.get("problems", [])] + json.loads(out)["other"]
    assert [(p["kind"], p["path"]) for p in problems] == [("unreadable", url)]
    assert "connection reset" in problems[0]["message"] and "position" in problems[0]["message"]
    status, _, err = run("dump", "--files", url)
    assert status == 1 and f"kafkalog dump: {url}: position" in err and "connection reset" in err


def test_any_fsspec_filesystem(tmp_path):
    """Not only S3: fsspec's in-memory filesystem (``memory://``) read through the same path."""
    import fsspec

    local = tmp_path / "logs"
    build_log(local / "orders-0", batches=12)
    fs = fsspec.filesystem("memory")
    url = "memory://clitools-mem/logs"
    if fs.exists(url):
        fs.rm(url, recursive=True)
    for f in sorted(p for p in local.rglob("*") if p.is_file()):
        fs.pipe_file(f"{url}/{f.relative_to(local).as_posix()}", f.read_bytes())
    try:
        for argv in (["verify", "--json", "--deep"], ["stat"], ["verify", "--warnings"]):
            remote, here = run(*argv, url), run(*argv, str(local))
            assert remote == tuple(same(x, local, url) if isinstance(x, str) else x for x in here), argv
        log = sorted((local / "orders-0").glob("*.log"))[1]
        remote = run("dump", "--deep-iteration", "--files", f"{url}/orders-0/{log.name}")
        here = run("dump", "--deep-iteration", "--files", str(log))
        assert remote == tuple(same(x, local, url) if isinstance(x, str) else x for x in here)
    finally:
        fs.rm(url, recursive=True)
