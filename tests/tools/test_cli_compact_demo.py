"""``kafkalog compact`` and ``kafkalog demo`` (and ``python -m kafkalog`` with no arguments, which
is the demo). Exit statuses and error lines on bad input through real subprocesses run side by
side; behaviour in-process through ``cli.main``, checked against a model of Kafka's keep rule."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import DATA, examples
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import RecordBatchBuilder
from kafkalog import tools as cli
from kafkalog.log_config import LogConfig
from kafkalog.filenames import segment_logs
from kafkalog.log import Log
from kafkalog import verify_path

T0 = 1_700_000_000_000
KAFKA38 = DATA / "kafka-3.8"
REAL_OFFSETS = DATA / "real" / "NikhilDighe9975__kafka_setup" / "__consumer_offsets-12"  # written by a broker


def run(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main([str(a) for a in args], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def spawn_all(jobs: dict[str, list[str]], cwd: Path) -> dict[str, subprocess.CompletedProcess]:
    """Run ``python -m kafkalog ARGS`` for every job at once; wait for all."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "kafkalog", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        for name, args in jobs.items()
    }
    done = {}
    for name, p in procs.items():
        out, err = p.communicate(timeout=120)
        done[name] = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    return done


def build(directory: Path, batches: list[list[tuple[bytes | None, bytes | None]]], *, segment_bytes: int = 600) -> Path:
    """A cleanly closed partition of these batches (v2), its active segment rolled empty so every
    record is cleanable. Written under cleanup.policy=delete (a compacted topic refuses records
    without a key; a topic whose policy changed holds them) -- compact implies compact."""
    config = LogConfig(segment_bytes=segment_bytes)
    with Log.open(directory, config, clock=lambda: T0) as log:
        for i, rows in enumerate(batches):
            b = RecordBatchBuilder(2)
            for j, (key, value) in enumerate(rows):
                b.append(key, value, timestamp=T0 + i * 10 + j)
            log.append(b.build())
        log.roll()
    return directory


def records_by_segment(directory: Path) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    """``base offset -> [(offset, key, value)]`` of every non-empty segment, read from the files."""
    from kafkalog.file_records import FileRecords

    out = {}
    for path in segment_logs(directory):
        with FileRecords.open(path) as fr:
            rows = [(r.offset, r.key, r.value) for b in fr.batches() for r in b]
        if rows:
            out[int(path.name[:20])] = rows
    return out


def model(segments: dict[int, list[tuple[int, bytes | None, bytes | None]]]):
    """Kafka's keep rule for one pass over everything (no tombstone is past a horizon yet):
    per segment ``{reason: count}`` and the records removed per key."""
    latest = {key: offset for rows in segments.values() for offset, key, _ in rows if key is not None}
    per_segment, by_key = {}, Counter()
    for base, rows in segments.items():
        removed = Counter()
        for offset, key, _ in rows:
            if key is None:
                removed["keyless"] += 1
            elif offset < latest[key]:
                removed["superseded"] += 1
                by_key[key] += 1
        per_segment[base] = dict(removed)
    return per_segment, by_key


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()
    }


def mtimes(root: Path, suffix: str) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob(f"*{suffix}")}


KEYED = [[(b"k%d" % ((i * 3 + j) % 7), b"v%d" % (i * 3 + j)) for j in range(3)] for i in range(30)] + [
    [(None, b"no key"), (b"k1", None)]
]


# -- bad input: exit statuses and messages -----------------------------------------------------------


@pytest.fixture
def bad_inputs(tmp_path) -> Path:
    """A directory without segments, a truncated and a garbage segment (in partition
    directories, so that a load is what meets them), a plain file, and a good partition."""
    (tmp_path / "empty-dir").mkdir()
    src = KAFKA38 / "v2-none-random" / "00000000000000000000.log"
    data = src.read_bytes()
    for name in ("truncated-0", "truncated-1"):
        (tmp_path / name).mkdir()
        (tmp_path / name / src.name).write_bytes(data[: len(data) - 1000])
    (tmp_path / "garbage-0").mkdir()
    (tmp_path / "garbage-0" / src.name).write_bytes(os.urandom(20_000))
    build(tmp_path / "logs" / "good-0", KEYED)
    return tmp_path


def test_exit_statuses_and_messages_on_bad_input(bad_inputs) -> None:
    jobs = {
        "missing": ["compact", "no-such-dir", "--dry-run"],
        "empty": ["compact", "empty-dir"],
        "file": ["compact", "truncated-0/00000000000000000000.log"],
        "truncated-dry": ["compact", "truncated-0", "--dry-run"],
        "garbage-dry": ["compact", "garbage-0", "--dry-run"],
        "truncated": ["compact", "truncated-1"],  # recovered as a broker's load would, then compacted
        "policy": ["compact", "logs", "--config", "cleanup.policy=delete"],
        "roll-dry": ["compact", "logs", "--roll", "--dry-run"],
        "config-value": ["compact", "logs", "--config", "delete.retention.ms=-1"],
        "dedupe": ["compact", "logs", "--dedupe-buffer-size", "24"],
        "demo-file": ["demo", "truncated-0/00000000000000000000.log"],
    }
    # The one job that opens a log for writing runs after the others: it holds the log
    # directory's .lock, which a read-only dry run in the same directory refuses to run beside.
    writer = {"truncated": jobs.pop("truncated")}
    r = spawn_all(jobs, bad_inputs)
    r.update(spawn_all(writer, bad_inputs))
    jobs.update(writer)
    for name, p in r.items():
        assert "Traceback" not in p.stderr, (name, p.stderr)
    expected_1 = {
        "missing": "kafkalog compact: no-such-dir: No such file or directory",
        "empty": "kafkalog compact: empty-dir: no log segments here and no partition directories below",
        "file": "compact takes a partition directory or a log directory, not a file",
        "demo-file": "kafkalog demo: truncated-0/00000000000000000000.log: Not a directory",
    }
    for name, message in expected_1.items():
        p = r[name]
        lines = p.stderr.splitlines()
        assert p.returncode == 1 and len(lines) == 1 and message in lines[0], (name, p.returncode, p.stderr)
        assert lines[0].startswith(f"kafkalog {jobs[name][0]}: ")
    for name, message in {
        "policy": "--config cleanup.policy=delete does not include compact",
        "roll-dry": "--roll changes the log",
        "config-value": "delete.retention.ms",
        "dedupe": "too small",
    }.items():
        p = r[name]
        assert p.returncode == 2 and "usage: kafkalog compact" in p.stderr and message in p.stderr, (name, p.stderr)
    # A dry run opens the log read-only: it recovers the damage in memory, reports what a
    # broker's load would change, and leaves the damaged files as they were (issue 19).
    for name, truncated in (("truncated-dry", 2400), ("garbage-dry", 20000)):
        p = r[name]
        assert p.returncode == 0, (name, p.stderr)
        assert "opening would recover the log as a broker's load does (recovered in memory, nothing changed on disk): " \
            f"{truncated} bytes truncated" in p.stdout, (name, p.stdout)
    assert (bad_inputs / "truncated-0" / "00000000000000000000.log").stat().st_size == 401892
    assert (bad_inputs / "garbage-0" / "00000000000000000000.log").stat().st_size == 20000
    assert sorted(p.name for p in (bad_inputs / "garbage-0").iterdir()) == ["00000000000000000000.log"]
    assert not (bad_inputs / "empty-dir" / "00000000000000000000.log").exists()
    # Without --dry-run the load recovers the torn tail first, as a broker's would.
    p = r["truncated"]
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    assert "opening recovered the log as a broker's load would" in p.stdout and "2400 bytes truncated" in p.stdout
    assert "warning: segment truncated-1/00000000000000000000.log needs its indexes rebuilt" in p.stdout
    assert "nothing to clean; --roll makes the active segment cleanable" in p.stdout
    assert (bad_inputs / "truncated-1" / "00000000000000000000.log").stat().st_size == 401892 - 2400


def test_a_demo_directory_holding_a_sample_is_refused(tmp_path) -> None:
    assert run("demo", tmp_path)[0] == 0
    before = tree_hashes(tmp_path)
    rc, out, err = run("demo", tmp_path)
    assert rc == 1 and err.startswith(f"kafkalog demo: {tmp_path / 'sample-0'}: already holds files")
    assert tree_hashes(tmp_path) == before


# -- compact: behaviour --------------------------------------------------------------------------------


def test_compact_reports_per_segment_and_per_key_and_does_it(tmp_path) -> None:
    directory = build(tmp_path / "orders-0", KEYED)
    segments = records_by_segment(directory)
    assert len(segments) >= 3
    per_segment, by_key = model(segments)
    rc, out, err = run("compact", directory, "--dry-run", "--keys", "3", "--now-ms", T0, "--json")
    assert (rc, err) == (0, "")
    report = json.loads(out)
    assert report["dryRun"] and report["complete"] and report["cleanerCheckpoint"] is None
    assert (report["firstDirtyOffset"], report["firstUncleanableOffset"]) == (0, 92)
    stats = report["stats"]
    assert {s["baseOffset"]: s["removed"] for s in stats["segments"]} == per_segment
    assert [s["recordsRead"] for s in stats["segments"]] == [len(rows) for rows in segments.values()]
    assert stats["removed"] == dict(sum((Counter(r) for r in per_segment.values()), Counter()))
    top = sorted(by_key.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert report["topKeys"] == [{"keyHex": k.hex(), "key": k.decode(), "removed": n} for k, n in top]

    rc, text, err = run("compact", directory, "--dry-run", "--keys", "3", "--now-ms", T0)
    lines = text.splitlines()
    assert rc == 0 and lines[0].startswith(f"{directory}: log [0, 92), ")
    assert "cleanup.policy=compact" in lines[0] and "now=1700000000000 (2023-11-14T22:13:20.000Z)" in lines[0]
    header = lines[2].split()
    assert header == ["segment", "records", "kept", "superseded", "tombstone", "keyless", "aborted", "marker", "bytes", "kept", "bytes"]
    for line, (base, removed) in zip(lines[3:], per_segment.items()):
        cells = line.split()
        assert cells[0] == f"{base:020d}.log"
        assert [int(c) for c in cells[3:8]] == [removed.get(r, 0) for r in ("superseded", "tombstone", "keyless", "aborted", "marker")]
    total = sum(sum(r.values()) for r in per_segment.values())
    assert f"  would remove {total} of 92 records ({stats['removed']['superseded']} superseded, 1 keyless); " in text
    assert f"records removed per key (top 3 of {len(by_key)} keys):" in text
    assert re.search(rf"^ +{top[0][1]}  {top[0][0].decode()}$", text, re.M)

    # For real: the figures are the dry run's, and the log holds the latest record of each key.
    rc, text, err = run("compact", directory, "--keys", "3", "--now-ms", T0)
    assert (rc, err) == (0, "") and f"  removed {total} of 92 records" in text and "cleaner-offset-checkpoint: 92" in text
    after = [row for rows in records_by_segment(directory).values() for row in rows]
    latest = {key: (offset, value) for rows in segments.values() for offset, key, value in rows if key is not None}
    assert sorted(after) == sorted((o, k, v) for k, (o, v) in latest.items())
    assert verify_path(tmp_path).ok
    # Nothing is left to do at that clock: the tombstone (k1) waits for its horizon.
    rc, text, _ = run("compact", directory, "--now-ms", T0)
    assert rc == 0 and "nothing to clean" in text


def test_tombstones_go_after_delete_retention_ms(tmp_path) -> None:
    directory = build(tmp_path / "t-0", KEYED)
    config = ["--config", "delete.retention.ms=5000"]
    assert run("compact", directory, "--now-ms", T0, *config)[0] == 0
    rc, out, _ = run("compact", directory, "--now-ms", T0 + 4999, "--dry-run", *config)
    assert rc == 0 and "nothing to clean" in out
    rc, out, _ = run("compact", directory, "--now-ms", T0 + 5000, "--json", *config, "--keys", "5")
    report = json.loads(out)
    assert report["stats"]["removed"] == {"tombstone": 1}
    assert report["topKeys"] == [{"keyHex": b"k1".hex(), "key": "k1", "removed": 1}]
    assert all(key != b"k1" for rows in records_by_segment(directory).values() for _, key, _ in rows)


def test_a_clean_dry_run_changes_no_byte(tmp_path) -> None:
    """Over a directory a Log closed cleanly, a dry run leaves every file's bytes as they were
    -- the load's files too: ``.lock`` (empty), ``.kafka_cleanshutdown`` (removed on open, the
    same bytes written back on close), ``recovery-point-offset-checkpoint`` and
    ``log-start-offset-checkpoint`` (rewritten with the same offsets), the producer snapshot at
    the log end -- and no ``cleaner-offset-checkpoint`` appears."""
    build(tmp_path / "orders-0", KEYED)
    build(tmp_path / "users-0", KEYED[::-1])
    before, log_times = tree_hashes(tmp_path), mtimes(tmp_path, ".log")
    rc, out, err = run("compact", tmp_path, "--dry-run", "--keys", "2")  # a log directory: both partitions
    assert (rc, err) == (0, "") and out.count("would remove") == 2
    assert tree_hashes(tmp_path) == before and mtimes(tmp_path, ".log") == log_times
    assert not (tmp_path / "cleaner-offset-checkpoint").exists()


def test_an_unclean_dry_run_changes_only_what_a_load_writes(tmp_path) -> None:
    """A broker-written partition without indexes or a clean-shutdown marker: the dry run loads
    it read-only, recovering in memory what a broker's load would rebuild, and writes nothing --
    no index, checkpoint, snapshot or lock (issue 19)."""
    directory = tmp_path / REAL_OFFSETS.name
    shutil.copytree(REAL_OFFSETS, directory)
    before, log_times = tree_hashes(tmp_path), mtimes(tmp_path, ".log")
    rc, out, err = run("compact", directory, "--dry-run", "--now-ms", T0)
    assert (rc, err) == (0, "") and "opening would recover the log as a broker's load does" in out
    assert "would remove 855 of 862 records (855 superseded)" in out
    assert tree_hashes(tmp_path) == before and mtimes(tmp_path, ".log") == log_times


def test_a_small_offset_map_takes_several_passes(tmp_path) -> None:
    directory = build(tmp_path / "big-0", [[(b"k%d" % ((i * 3 + j) % 25), b"v" * 20) for j in range(3)] for i in range(40)])
    rc, out, _ = run("compact", directory, "--dry-run", "--dedupe-buffer-size", "480", "--now-ms", T0)
    assert rc == 0 and "the offset map (480 bytes) filled at offset 18: a real run goes on in more passes up to 120" in out
    rc, out, _ = run("compact", directory, "--dedupe-buffer-size", "480", "--now-ms", T0, "--json")
    report = json.loads(out)
    assert report["complete"] and report["stats"]["rounds"] > 1
    rc, text, _ = run("compact", tmp_path / "big-0", "--now-ms", T0, "--dry-run")
    assert "nothing to clean" in text
    keys = [key for rows in records_by_segment(directory).values() for _, key, _ in rows]
    assert sorted(keys) == sorted({b"k%d" % i for i in range(25)})


def test_policy_is_implied_and_compact_delete_accepted(tmp_path) -> None:
    directory = build(tmp_path / "p-0", KEYED)
    rc, out, _ = run("compact", directory, "--dry-run", "--config", "cleanup.policy=compact,delete", "--now-ms", T0)
    assert rc == 0 and "cleanup.policy=compact,delete" in out
    rc, out, _ = run("compact", directory, "--dry-run", "--config", "delete.retention.ms=5", "--now-ms", T0)
    assert rc == 0 and "cleanup.policy=compact delete.retention.ms=5 " in out


def test_roll_makes_the_active_segment_cleanable(tmp_path) -> None:
    directory = tmp_path / "r-0"
    with Log.open(directory, LogConfig(cleanup_policy="compact")) as log:  # one big active segment
        b = RecordBatchBuilder(2)
        for i in range(10):
            b.append(b"same", b"%d" % i, timestamp=T0 + i)
        log.append(b.build())
    rc, out, _ = run("compact", directory, "--now-ms", T0)
    assert rc == 0 and "nothing to clean; --roll makes the active segment cleanable" in out
    rc, out, _ = run("compact", directory, "--now-ms", T0, "--roll", "--keys", "1")
    assert rc == 0 and "removed 9 of 10 records (9 superseded)" in out and re.search(r"^ +9  same$", out, re.M)
    assert [r[2] for rows in records_by_segment(directory).values() for r in rows] == [b"9"]


@examples(15)
@given(
    rows=st.lists(
        st.lists(
            st.tuples(st.sampled_from([None, b"a", b"b", b"c", b"\x00\xff"]), st.none() | st.binary(max_size=3)),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=12,
    )
)
def test_dry_run_counts_match_the_model(tmp_path_factory, rows) -> None:
    """Per segment and per key, what the dry run says goes is what Kafka's rule removes (the
    real run's figures equal the dry run's: test_compact_reports_per_segment_and_per_key_and_does_it)."""
    root = tmp_path_factory.mktemp("prop")
    directory = build(root / "p-0", rows, segment_bytes=200)
    per_segment, by_key = model(records_by_segment(directory))
    rc, out, _ = run("compact", directory, "--dry-run", "--json", "--keys", "9", "--now-ms", T0)
    dry = json.loads(out)
    assert rc == 0
    got = {s["baseOffset"]: s["removed"] for s in dry["stats"]["segments"]} if dry["stats"] else {}
    assert {b: r for b, r in got.items() if r} == {b: r for b, r in per_segment.items() if r}
    assert {bytes.fromhex(k["keyHex"]): k["removed"] for k in dry["topKeys"] or []} == dict(by_key)


def test_progress_bar_only_on_a_terminal(tmp_path) -> None:
    directory = build(tmp_path / "bar-0", KEYED)
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkalog", "compact", str(directory), "--dry-run"], stdout=subprocess.PIPE, stderr=slave, env=env
    )
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=60)
    os.close(master)
    assert proc.returncode == 0 and b"would remove" in out
    for label in (b"compact bar-0 map [", b"compact bar-0 clean ["):
        assert label in seen, seen
    assert seen.endswith(b"\r")
    # Not a terminal: nothing.
    assert run("compact", directory, "--dry-run")[2] == ""


# -- demo ----------------------------------------------------------------------------------------------------


def test_demo_and_the_no_argument_run(tmp_path) -> None:
    r = spawn_all({"demo": ["demo"], "bare": [], "kept": ["demo", "kept"]}, tmp_path)
    for name, p in r.items():
        assert (p.returncode, p.stderr) == (0, ""), (name, p.stderr)
    out = r["demo"].stdout
    lines = out.splitlines()
    assert len(lines) < 60
    tmp = re.match(r"kafkalog demo in (\S+) \(a temporary directory", lines[0])[1]
    assert not Path(tmp).exists()  # removed at the end
    # The summary, the compaction figures, the verify verdict, a dump slice.
    assert f"{tmp}/sample-0: offsets [0, 69), 4 segments" in out
    assert "formats: v0 none,gzip,snappy,lz4  v1 none,gzip,snappy,lz4  v2 none,gzip,snappy,lz4,zstd" in out
    assert "  removed 26 of 69 records (26 superseded)" in out and re.search(r"^ +12  user-0$", out, re.M)
    assert "removed 1 tombstone" in out
    assert f"{tmp}/sample-0: OK: " in out and ", 0 errors, 0 warnings" in out
    assert "Dumping " in out and "magic: 0 compresscodec: none" in out and "magic: 1 compresscodec: none" in out
    assert "baseOffset: 40 " in out and "| offset: 67 " in out and "endTxnMarker: COMMIT coordinatorEpoch: 7" in out
    # `python -m kafkalog` is the demo.
    bare = r["bare"].stdout
    tmp2 = re.match(r"kafkalog demo in (\S+) ", bare)[1]
    assert bare.replace(tmp2, tmp) == out
    # DIR is kept, and is a log directory Kafka could load.
    kept = tmp_path / "kept"
    assert r["kept"].stdout.startswith("kafkalog demo in kept (kept)")
    assert (kept / ".kafka_cleanshutdown").exists() and verify_path(kept).ok
    assert "Next: kafkalog stat kept/sample-0; " in r["kept"].stdout
