"""The data source's writer and reader on Azure Blob Storage (Azurite on 127.0.0.1, adlfs): a
store without a conditional create, so task attempts claim offsets optimistically -- and the
executors still build and publish the segments, the commit copying them inside the store.
Attempts are driven through ``_Writer.stage`` as Spark's tasks call it (tests/spark/
test_write_remote.py has the same on S3)."""

from __future__ import annotations

import pytest

pytest.importorskip("fsspec")
pytest.importorskip("adlfs")
pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from azurite import azure  # noqa: E402,F401

# the S3 tests' helpers: they take any server fixture with storage ``options``
from test_write_remote import check_exactly_once, race, read_back, rows, writer  # noqa: E402

from kafkalog.filenames import SEGMENT_FILE
from kafkalog.remote import Storage  # noqa: E402


def test_azure_is_a_store_with_optimistic_claims(azure):
    assert Storage.for_path("abfs://box/x", azure.options).exclusive_create is False


def test_two_jobs_publish_from_the_executors_and_continue_the_offsets(azure):
    azure.make_container("writes")
    url = "abfs://writes/jobs"
    first = writer(azure, url)
    messages = [first.stage(rows(a, 300), a, f"j{a}") for a in range(3)]
    assert all(item.claim is not None for m in messages for item in m.staged)  # executors built segments
    first.commit(messages)
    second = writer(azure, url)
    messages = [second.stage(rows(a, 200), a - 3, f"k{a}") for a in (3, 4)]
    assert all(item.claim is not None for m in messages for item in m.staged)
    second.commit(messages)
    check_exactly_once(read_back(azure, url), {0: 300, 1: 300, 2: 300, 3: 200, 4: 200})
    # every published segment came with its indexes, and the staging prefix is gone
    storage = Storage.for_path(url, azure.options)
    assert ".kafkalog-staging" not in storage.list_dirs(url)
    for p in (0, 1):
        names = storage.list_files(f"{url}/t-{p}")
        logs = [n for n in names if n.endswith(".log")]
        assert len(logs) > 2 and all(SEGMENT_FILE.match(n) for n in names)
        assert all(n[:-4] + ".index" in names and n[:-4] + ".timeindex" in names for n in logs)


def test_attempts_racing_for_claims_on_azure(azure):
    azure.make_container("writes")
    url = "abfs://writes/race"
    w = writer(azure, url, partition="0", preserveOrder="false")
    messages = race(w, 4, 100)
    claims = [m.staged[0].claim.k for m in messages if m.staged[0].claim is not None]
    assert len(set(claims)) == len(claims)  # no two attempts kept one number
    w.commit(messages)
    check_exactly_once(read_back(azure, url), dict.fromkeys(range(4), 100))


def test_cli_reads_abfs_in_place_and_writes_nothing(azure, tmp_path, monkeypatch):
    """``kafkalog verify`` and ``stat`` on an abfs:// URL (credentials from adlfs's own
    AZURE_STORAGE_CONNECTION_STRING) print what they print for the local copy, and leave every
    blob as it was."""
    import io

    from test_spark import build_log

    from kafkalog.tools import main

    local = tmp_path / "logs"
    build_log(local / "orders-0", batches=40)
    build_log(local / "orders-1", batches=5)
    azure.make_container("cli")
    fs = azure.fs
    for file in sorted(p for p in local.rglob("*") if p.is_file()):
        fs.put_file(str(file), "cli/logs/" + file.relative_to(local).as_posix())
    url = "abfs://cli/logs"
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azure.options["connection_string"])

    def blobs() -> dict[str, str]:
        fs.invalidate_cache()
        return {info["name"]: info["etag"] for info in fs.find("cli", detail=True).values()}

    def run(*argv: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        return main(list(argv), stdout=out, stderr=err), out.getvalue()

    before = blobs()
    for argv in (["verify", "--json"], ["stat"], ["verify"]):
        status, remote = run(*argv, url)
        local_status, text = run(*argv, str(local))
        assert (status, remote) == (local_status, text.replace(str(local), url)), argv
    assert run("verify", url)[0] == 0
    assert blobs() == before
