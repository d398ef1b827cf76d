"""Cluster metadata is not a topic (issue 27): no writing command changes a KRaft metadata log.

``retention``, ``compact``, ``rebuild-index`` and ``convert`` refuse a KRaft metadata directory
(``__cluster_metadata-*``, or one holding ``quorum-state`` or a KRaft snapshot) with one error
line and exit status 1, and over a whole log directory skip it and say so; ``convert``,
``salvage`` and ``demo`` write nothing into one. Every file of the KRaft directory is checksummed
around every run. The other internal topics each follow their own rule (docs/cli.md "Internal
topics"): compacted ones keep their records under retention, ``__share_group_state`` and
``__remote_log_metadata`` are never compacted and have no time limit.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import SHARED_CORPUS

from kafkalog import FileRecords, RecordBatchBuilder
from kafkalog import tools as cli
from kafkalog.filenames import cluster_metadata_dir_of, cluster_metadata_marker, segment_logs

T_OLD = 1_600_000_000_000  # every record: years before NOW, beyond any default retention
NOW = 1_900_000_000_000
REAL = SHARED_CORPUS / "real"
#: The KRaft metadata directories of the shared corpus (Danielowo2000's is the issue's).
REAL_KRAFT = sorted(REAL.glob("*/__cluster_metadata-0")) if REAL.is_dir() else []
NO_SHARED = "shared corpus ../shared/corpus/real is absent"
KRAFT_ERROR = "a KRaft cluster metadata log ("
KRAFT = "__cluster_metadata-0"
SNAPSHOT = "00000000000000000003-0000000001.checkpoint"


def run(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main([str(a) for a in args], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def tree(directory: Path) -> dict[str, str]:
    """Every entry below ``directory``: files by sha256, directories as ``dir`` (the listing)."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(directory.rglob("*"))
    }


def writable(directory: Path) -> Path:
    """``directory`` (a copy of the read-only corpus) and everything in it made writable."""
    for p in (directory, *directory.rglob("*")):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return directory


def write_batch(path: Path, base: int, records: list[tuple[bytes | None, bytes | None]]) -> None:
    b = RecordBatchBuilder(2, base_offset=base)
    for i, (key, value) in enumerate(records):
        b.append(key, value, timestamp=T_OLD + base + i)
    with FileRecords.open(path, create=True) as fr:
        fr.append(b.build())


def partition(log_dir: Path, name: str, batches: list[list[tuple[bytes | None, bytes | None]]]) -> Path:
    """A partition directory of one segment per batch (so that all but the last are cleanable)."""
    directory = log_dir / name
    directory.mkdir(parents=True)
    base = 0
    for records in batches:
        write_batch(directory / f"{base:020d}.log", base, records)
        base += len(records)
    return directory


def kraft(log_dir: Path, name: str = KRAFT, *, quorum: bool = True, snapshot: bool = True) -> Path:
    """A KRaft metadata directory as a controller leaves it: keyless metadata records, a KRaft
    snapshot, ``quorum-state``."""
    directory = partition(log_dir, name, [[(None, b"\x01\x02\x00metadata-%d" % i) for i in range(3)]] * 2)
    if snapshot:
        shutil.copyfile(directory / "00000000000000000000.log", directory / SNAPSHOT)
    if quorum:
        (directory / "quorum-state").write_text('{"leaderId":1,"leaderEpoch":1,"votedId":-1,"data_version":0}')
    return directory


def keyed(n: int = 3) -> list[list[tuple[bytes | None, bytes | None]]]:
    """Batches overwriting the same keys: compaction removes all but the last of each."""
    return [[(b"k%d" % i, b"v%d-%d" % (i, round_)) for i in range(n)] for round_ in range(3)]


#: Each internal topic's partition (a user topic's too), as each writes it.
INTERNAL_KINDS: dict[str, Callable[[], list[list[tuple[bytes | None, bytes | None]]]]] = {
    "__consumer_offsets-0": keyed,
    "__transaction_state-0": keyed,
    "_schemas-0": keyed,
    "__share_group_state-0": keyed,  # ShareSnapshot/ShareUpdate keys: (group, topic id, partition)
    "__remote_log_metadata-0": lambda: [[(None, b"remote-segment-%d" % i) for i in range(3)]] * 3,  # no key
}


def log_dir(tmp_path: Path) -> Path:
    """A log directory with a KRaft metadata log, every internal topic and an old user topic."""
    logs = tmp_path / "logs"
    kraft(logs)
    for name, batches in INTERNAL_KINDS.items():
        partition(logs, name, batches())
    partition(logs, "orders-0", keyed())
    return logs


def writing_commands(k: Path, other: Path, outside: Path) -> list[list[object]]:
    """Every writing command run on the KRaft directory ``k`` (as PATH, SRC or DST; ``other``
    is another partition's segment, ``outside`` a path elsewhere): each must refuse."""
    log = segment_logs(k)[0]
    return [
        ["retention", k, "--now", NOW],
        ["retention", k, "--config", "retention.ms=1", "--allow-compacted", "--now", NOW],
        ["retention", k, "--dry-run", "--now", NOW],
        ["compact", k, "--roll", "--now-ms", NOW],
        ["compact", k, "--dry-run"],
        ["rebuild-index", k],
        ["rebuild-index", log],
        ["rebuild-index", k / "00000000000000000000.index"],
        ["convert", k, outside / "converted-0"],
        ["convert", log, outside / "converted-0"],
        ["convert", other, k / "00000000000000999999.log"],
        ["convert", other.parent, k],
        ["salvage", other, k],
        ["salvage", other, str(k) + "/"],
        ["salvage", other, k / "00000000000000999999.log", "--force"],
        ["salvage", other, k / "sub" / "x.log"],
        ["demo", k],
    ]


def assert_refused(args: list[object], k: Path, before: dict[str, str]) -> None:
    rc, out, err = run(*args)
    assert (rc, out) == (1, ""), args
    assert err.count("\n") == 1 and err.startswith(f"kafkalog {args[0]}: ") and KRAFT_ERROR in err, err
    assert "leaves it alone" in err
    assert tree(k) == before, args


# ------------------------------------------------------------------------------------------------
# The rule, in the core


def test_what_marks_a_kraft_directory(tmp_path: Path) -> None:
    named = kraft(tmp_path, quorum=False, snapshot=False)
    by_quorum = kraft(tmp_path, "metadata-copy-0", snapshot=False)
    by_snapshot = kraft(tmp_path, "restored-0", quorum=False)
    plain = partition(tmp_path, "orders-0", keyed())
    assert cluster_metadata_marker(named) == "named __cluster_metadata-0"
    assert cluster_metadata_marker(by_quorum) == "holds quorum-state"
    assert cluster_metadata_marker(by_snapshot) == f"holds the KRaft snapshot {SNAPSHOT}"
    assert cluster_metadata_marker(plain) is None
    assert cluster_metadata_marker(tmp_path / "__cluster_metadata-0.0123456789abcdef0123456789abcdef-future")
    assert cluster_metadata_marker(tmp_path / "missing-0") is None
    assert cluster_metadata_dir_of(by_quorum / "00000000000000000000.log") == (by_quorum, "holds quorum-state")
    assert cluster_metadata_dir_of(named / "new" / "x.log") == (named, "named __cluster_metadata-0")
    assert cluster_metadata_dir_of(plain / "00000000000000000000.log") is None


# ------------------------------------------------------------------------------------------------
# The KRaft directory itself: every writing command refuses it, and nothing in it changes


@pytest.mark.parametrize("name", ["__cluster_metadata-0", "metadata-copy-0"])
def test_every_writing_command_refuses_a_kraft_directory(tmp_path: Path, name: str) -> None:
    """By name, and (a renamed copy) by its ``quorum-state`` and snapshot."""
    logs = tmp_path / "logs"
    k = kraft(logs, name)
    other = partition(logs, "orders-0", keyed()) / "00000000000000000000.log"
    outside = tmp_path / "out"
    before = tree(k)
    for args in writing_commands(k, other, outside):
        assert_refused(args, k, before)
    assert not outside.exists()
    # Reading it stays possible: salvage copies its valid batches out to another place.
    rc, out, err = run("salvage", segment_logs(k)[0], f"{outside}/", "--no-indexes")
    assert (rc, err) == (0, "") and out.startswith("copied 1 batches (121 of 121 bytes, offsets 0..2)")
    assert tree(k) == before


@pytest.mark.skipif(not REAL_KRAFT, reason=NO_SHARED)
@pytest.mark.parametrize("real", REAL_KRAFT, ids=lambda p: p.parent.name)
def test_real_kraft_directories_are_refused(tmp_path: Path, real: Path) -> None:
    """The issue's case: ``retention`` deleted Danielowo2000's metadata log (offsets 14708..16593
    are in no snapshot) and wrote a producer snapshot into it; ``compact --roll`` removed 16,593
    of its 16,594 records as keyless."""
    logs = tmp_path / real.parent.name
    k = logs / real.name
    shutil.copytree(real, k)
    writable(k)
    other = partition(logs, "orders-0", keyed()) / "00000000000000000000.log"
    before = tree(k)
    for args in writing_commands(k, other, tmp_path / "out"):
        assert_refused(args, k, before)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------
# A whole log directory: the KRaft directory is skipped and said so; the others as before


def skip_line(k: Path) -> str:
    return (
        f"{k}: skipped: a KRaft cluster metadata log (named {k.name}), not a topic partition: Kafka trims it "
        "only behind its KRaft snapshots, never by retention or compaction\n"
    )


LOG_DIR_RUNS = {
    "retention": ["retention", "--now", NOW],
    "retention-config": ["retention", "--config", "retention.ms=1000", "--allow-compacted", "--now", NOW],
    "compact": ["compact", "--roll", "--now-ms", NOW],
    "rebuild-index": ["rebuild-index", "--index-interval-bytes", "1"],
}


def per_partition(args: list[object], logs: Path, names: list[str]) -> str:
    """The output of ``args`` run on each partition directory in turn."""
    out = []
    for name in names:
        rc, text, err = run(args[0], logs / name, *args[1:])
        assert (rc, err) == (0, ""), (name, err)
        out.append(text)
    return "".join(out)


def other_partitions(logs: Path, command: str) -> list[str]:
    never = {"__share_group_state-0", "__remote_log_metadata-0"} if command == "compact" else set()
    return sorted(p.name for p in logs.iterdir() if p.is_dir() and p.name != KRAFT and p.name not in never)


def check_log_dir_run(tmp_path: Path, make: Callable[[Path], Path], run_name: str) -> None:
    args = LOG_DIR_RUNS[run_name]
    logs = make(tmp_path / "a")
    k = logs / "__cluster_metadata-0"
    before = tree(k)
    rc, out, err = run(args[0], logs, *args[1:])
    assert (rc, err) == (0, "")
    assert tree(k) == before
    # The same command on each other partition of an identical copy: the same output and files.
    twin = make(tmp_path / "b")
    names = other_partitions(twin, args[0])
    outputs = {name: per_partition(args, twin, [name]) for name in names}
    if args[0] == "rebuild-index":  # it names segments relative to the PATH given
        expected = "".join(f"{name}/{line}\n" for name in names for line in outputs[name].splitlines())
    else:
        expected = "".join(outputs.values()).replace(str(twin), str(logs))
    skipped = [line for line in out.splitlines(keepends=True) if ": skipped: " in line]
    assert skipped[0] == skip_line(k)
    assert "".join(line for line in out.splitlines(keepends=True) if line not in skipped) == expected
    for name in names:
        assert tree(logs / name) == tree(twin / name), name


@pytest.mark.parametrize("run_name", sorted(LOG_DIR_RUNS))
def test_a_log_directory_skips_its_kraft_directory(tmp_path: Path, run_name: str) -> None:
    check_log_dir_run(tmp_path, log_dir, run_name)


@pytest.mark.skipif(not REAL_KRAFT, reason=NO_SHARED)
@pytest.mark.parametrize("run_name", sorted(LOG_DIR_RUNS))
def test_the_issue_log_directory_skips_its_kraft_directory(tmp_path: Path, run_name: str) -> None:
    """Danielowo2000's KRaft log directory (partitions with settings in its metadata log)."""
    source = REAL / "Danielowo2000__BigDataTechnologies-Version-2"
    if not source.is_dir():
        pytest.skip(NO_SHARED)

    def make(where: Path) -> Path:
        logs = where / "logs"
        shutil.copytree(source, logs)
        return writable(logs)

    check_log_dir_run(tmp_path, make, run_name)


def test_skips_are_records_in_json(tmp_path: Path) -> None:
    logs = log_dir(tmp_path)
    k = logs / "__cluster_metadata-0"
    before = tree(k)
    for args in (
        ["retention", logs, "--json", "--now", NOW],
        ["compact", logs, "--json", "--dry-run", "--now-ms", NOW],
        ["rebuild-index", logs, "--json", "--dry-run"],
    ):
        rc, out, err = run(*args)
        assert (rc, err) == (0, ""), args
        records = [json.loads(line) for line in out.splitlines()]
        skipped = {Path(r["partition"]).name: r for r in records if r.get("skipped")}
        expected = {"__cluster_metadata-0"}
        if args[0] == "compact":
            expected |= {"__share_group_state-0", "__remote_log_metadata-0"}
        assert set(skipped) == expected, args
        assert skipped["__cluster_metadata-0"] == {
            "partition": str(k), "skipped": True, "reason": skip_line(k).split(": skipped: ", 1)[1].rstrip("\n"),
        }
        assert len(records) > len(skipped)  # the others were processed
    assert tree(k) == before


# ------------------------------------------------------------------------------------------------
# The other internal topics: each by its rule


def test_retention_keeps_every_internal_topic_by_default(tmp_path: Path) -> None:
    """Compacted topics (``__consumer_offsets``, ``__transaction_state``, ``_schemas``) are not
    deleted by age; ``__share_group_state`` and ``__remote_log_metadata`` are created with
    ``retention.ms=-1``. A user topic with Kafka's defaults loses its old segments."""
    logs = log_dir(tmp_path)
    rc, out, err = run("retention", logs, "--json", "--now", NOW)
    assert (rc, err) == (0, "")
    reports = {Path(r["partition"]).name: r for r in map(json.loads, out.splitlines()) if not r.get("skipped")}
    for name in INTERNAL_KINDS:
        report = reports[name]
        assert not any(s["delete"] for s in report["segments"]), name
        policy = report["settings"]["cleanup.policy"]
        assert policy["source"] == "internal topic default", name
        if name.startswith(("__share_group_state", "__remote_log_metadata")):
            assert policy["value"] == "delete"
            assert report["settings"]["retention.ms"] == {"value": "-1", "source": "internal topic default"}
        else:
            assert policy["value"] == "compact"
        assert len(segment_logs(logs / name)) == 3
    assert [s["delete"] for s in reports["orders-0"]["segments"]] == [True, True, True]


def test_retention_by_age_is_refused_on_compacted_internal_topics(tmp_path: Path) -> None:
    logs = log_dir(tmp_path)
    rc, out, _ = run("retention", logs, "--json", "--config", "retention.ms=1000", "--now", NOW)
    assert rc == 0
    reports = {Path(r["partition"]).name: r for r in map(json.loads, out.splitlines()) if not r.get("skipped")}
    for name in ("__consumer_offsets-0", "__transaction_state-0", "_schemas-0"):
        assert reports[name]["refused"].startswith(f"topic {name[:-2]} is compacted"), name
        assert len(segment_logs(logs / name)) == 3
    for name in ("__share_group_state-0", "__remote_log_metadata-0"):  # delete policy: --config stands
        assert reports[name]["refused"] is None
        assert reports[name]["settings"]["retention.ms"] == {"value": "1000", "source": "--config"}


def test_compact_follows_each_internal_topic_rule(tmp_path: Path) -> None:
    """``compact`` cleans the compacted internal topics (and a user topic: compaction is what was
    asked), refuses ``__share_group_state`` and ``__remote_log_metadata`` (Kafka never compacts
    them; the latter's records have no key, so every one would go) and the metadata log."""
    logs = log_dir(tmp_path)
    for name in ("__consumer_offsets-0", "__transaction_state-0", "_schemas-0", "orders-0"):
        rc, out, err = run("compact", logs / name, "--roll", "--now-ms", NOW, "--json")
        assert (rc, err) == (0, ""), name
        assert json.loads(out)["stats"]["removed"] == {"superseded": 6}, name
    for name in ("__share_group_state-0", "__remote_log_metadata-0", "__cluster_metadata-0"):
        before = tree(logs / name)
        for args in (["compact", logs / name, "--roll", "--now-ms", NOW], ["compact", logs / name, "--dry-run"]):
            rc, out, err = run(*args)
            assert (rc, out) == (1, ""), name
            assert err.count("\n") == 1 and err.endswith("; kafkalog compact leaves it alone\n"), err
            if name != "__cluster_metadata-0":
                kip = "932" if "share" in name else "405"
                assert err.startswith(
                    f"kafkalog compact: {logs / name}: topic {name[:-2]}: Kafka never compacts it "
                    f"(cleanup.policy=delete, KIP-{kip})"
                ), err
        assert tree(logs / name) == before, name


def test_rebuild_and_convert_take_every_topic_but_the_metadata_log(tmp_path: Path) -> None:
    """Indexes and format are derived from the log: every internal topic takes them; the
    metadata log is refused."""
    logs = log_dir(tmp_path)
    for name in sorted(INTERNAL_KINDS):
        rc, out, err = run("rebuild-index", logs / name, "--json")
        assert (rc, err) == (0, "") and len(out.splitlines()) == 3, name
        target = tmp_path / "converted" / name
        rc, out, err = run("convert", logs / name, target, "--compression", "gzip", "--json")
        assert (rc, err) == (0, "") and json.loads(out)["records"] == 9, name
    k = logs / "__cluster_metadata-0"
    before = tree(k)
    assert_refused(["rebuild-index", k, "--json"], k, before)
    assert_refused(["convert", k, tmp_path / "converted" / k.name, "--compression", "gzip", "--json"], k, before)
    assert not (tmp_path / "converted" / k.name).exists()


REAL_INTERNAL = [
    "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/__transaction_state-44",
    "Danielowo2000__BigDataTechnologies-Version-2/_schemas-0",
    "NikhilDighe9975__kafka_setup/__consumer_offsets-12",
]


@pytest.mark.skipif(not REAL.is_dir(), reason=NO_SHARED)
def test_real_internal_topics_keep_their_records_under_retention(tmp_path: Path) -> None:
    """The corpus's compacted internal topics, each alone (no metadata log beside it, so the
    internal topic's own rule applies): retention keeps every record; compaction applies."""
    for rel in REAL_INTERNAL:
        source = REAL / rel
        part = tmp_path / rel.split("/")[0] / source.name
        shutil.copytree(source, part)
        writable(part)
        logs_before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in segment_logs(part)}
        rc, out, err = run("retention", part, "--now", NOW)
        assert (rc, err) == (0, ""), rel
        assert "cleanup.policy=compact (internal topic default)" in out and "nothing to delete" in out, rel
        assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in segment_logs(part)} == logs_before
        rc, out, err = run("compact", part, "--dry-run", "--json")
        assert (rc, err) == (0, ""), rel
