"""The read-only commands (dump, verify, stat) on S3 paths (moto's server on 127.0.0.1): the
same findings as on local disk, reports naming the remote files, nothing written to the store."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto")

sys.path.insert(0, str(Path(__file__).parent.parent / "spark"))
from moto_s3 import s3, s3_server  # noqa: E402,F401
from test_spark import build_log  # noqa: E402

from kafkalog.tools import main  # noqa: E402

URL = "s3://clitools/logs"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def store(s3, tmp_path, monkeypatch) -> Path:
    for name in ("FSSPEC_S3_ENDPOINT_URL", "FSSPEC_S3_KEY", "FSSPEC_S3_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)  # how the CLI finds the server (boto's own variable)
    local = tmp_path / "logs"
    build_log(local / "orders-0", batches=40)
    build_log(local / "orders-1", batches=5)
    if s3.fs.exists(URL[len("s3://"):]):
        s3.fs.rm(URL[len("s3://"):], recursive=True)
    s3.put_dir(local, URL)
    s3.clear()
    return local


def _no_writes(s3) -> None:
    assert [r for r in s3.log if r.method in ("PUT", "POST", "DELETE")] == []


def test_verify_and_stat_on_s3_match_local(s3, store):
    status, out, _ = run("verify", "--json", URL)
    assert status == 0
    remote = json.loads(out)
    status, out, _ = run("verify", "--json", str(store))
    local = json.loads(out)
    assert remote["ok"] and local["ok"]
    assert remote["path"] == URL
    assert [s["path"] for s in remote["segments"]] == [s["path"].replace(str(store), URL) for s in local["segments"]]
    assert [s["records"] for s in remote["segments"]] == [s["records"] for s in local["segments"]]
    status, out, _ = run("stat", URL + "/orders-0")
    assert status == 0 and "total" in out and "/tmp/" not in out
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


def test_verify_finds_corruption_on_s3(s3, store, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(store / "orders-1", bad / "orders-1")
    log = sorted((bad / "orders-1").glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    data[80] ^= 0xFF  # inside the first batch: its CRC no longer matches
    log.write_bytes(bytes(data))
    s3.put_dir(bad, "s3://clitools/bad")
    status, out, _ = run("verify", "--json", "s3://clitools/bad/orders-1")
    assert status == 1
    report = json.loads(out)
    assert not report["ok"]
    problems = [p for s in report["segments"] for p in s.get("problems", [])] + report.get("other", [])
    paths = {p["path"] for p in problems if "path" in p} | {s["path"] for s in report["segments"]}
    assert all(p.startswith("s3://clitools/bad/orders-1/") for p in paths), paths


def test_missing_remote_paths_fail_with_their_name(s3, store):
    status, _, err = run("verify", "s3://clitools/nothing")
    assert status == 1 and "s3://clitools/nothing" in err
    status, _, err = run("dump", "--files", "s3://clitools/nothing/00000000000000000000.log")
    assert status == 1 and "nothing" in err
