"""``kafkalog consume`` over a log directory on S3 (moto): read in place, with GET and HEAD
requests only, printing what the local copy prints."""

from __future__ import annotations

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto")

from moto_s3 import s3, s3_server  # noqa: F401
from test_consume import T0, build_logdir, consume


def test_reads_a_log_directory_on_s3_in_place(s3, tmp_path, monkeypatch) -> None:
    for name in ("FSSPEC_S3_ENDPOINT_URL", "FSSPEC_S3_KEY", "FSSPEC_S3_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    logdir = build_logdir(tmp_path)
    url = "s3://consume/logs"
    s3.put_dir(logdir, url)
    s3.clear()
    for args in (["-t", "*", "-J"], ["-t", "mix", "-p", "1", "-o", "-5", "-f", "%o %T %k %s %h\\n"],
                 ["-t", "other", "-o", f"s@{T0 + 100}", "-o", f"e@{T0 + 300}"]):
        status, remote, err = consume(url, *args)
        assert status == 0, err
        assert remote == consume(str(logdir), *args)[1] and remote
    status, remote, err = consume(url + "/mix-0", "-c", "3", "-f", "%o\\n")
    assert (status, remote) == (0, b"0\n1\n2\n"), err
    assert {r.method for r in s3.log} <= {"GET", "HEAD"}
