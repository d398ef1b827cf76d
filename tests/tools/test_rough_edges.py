"""The rough edges a new user hits (issue 27): each test here failed before its fix, but the
guards said to be one (what the fix must keep).

Every bad input gets one line naming what the user gave and the documented exit status
(docs/cli.md: 1 for a path the command cannot work on, 2 for a usage error), with a hint where
the mistake is a common one.
"""

from __future__ import annotations

import argparse
import inspect
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_verify import build_partition

from kafkalog import tools as cli
from kafkalog.log import Log
from kafkalog.log_config import LogConfig
from kafkalog.tools._cli import _SIZE_UNITS, _size
from kafkalog.varint import INT32_MAX


def run(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main([str(a) for a in args], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """A log directory with two partitions of different offset ranges."""
    root = tmp_path_factory.mktemp("logs") / "kafka-logs"
    build_partition(root, "orders-0", rounds=6)
    build_partition(root, "users-3", rounds=12)
    return root


def copy_of(sample: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "kafka-logs"
    shutil.copytree(sample, dst)
    return dst


# -- 2. compact --help tells where its settings come from ----------------------------------------


def test_compact_help_names_every_settings_source() -> None:
    rc, out, _ = run("compact", "--help")
    assert rc == 0
    text = " ".join(out.split())
    assert "come only from --config" not in text
    assert "--metadata-log" in text and "KRaft metadata log" in text and "internal topic" in text


# -- 4. convert cleans up the directories it created when it fails ------------------------------


def test_convert_failure_removes_the_directories_it_created(sample, tmp_path) -> None:
    src = sample / "orders-0"  # transactional batches: no form in magic 1
    dst = tmp_path / "out" / "deeper" / "orders-v1-0"
    rc, out, err = run("convert", src, dst, "--magic", "1")
    assert rc == 1 and "transactional" in err
    assert not (tmp_path / "out").exists()
    # A directory that was there before stays, even empty.
    (tmp_path / "kept").mkdir()
    rc, _, _ = run("convert", src, tmp_path / "kept", "--magic", "1")
    assert rc == 1 and (tmp_path / "kept").is_dir() and not list((tmp_path / "kept").iterdir())
    segment = next(src.glob("*.log"))
    rc, _, _ = run("convert", segment, tmp_path / "seg-out" / "x", "--magic", "1")
    assert rc == 1 and not (tmp_path / "seg-out").exists()


# -- 5. salvage names the path the user gave, and why it fails ----------------------------------


def test_salvage_into_a_missing_directory_names_it(sample, tmp_path) -> None:
    segment = next((sample / "orders-0").glob("*.log"))
    rc, out, err = run("salvage", segment, tmp_path / "newdir" / "x.log")
    assert rc == 1
    assert ".tmp" not in err
    assert str(tmp_path / "newdir") in err and "does not exist" in err
    assert err.count("\n") == 1
    assert not (tmp_path / "newdir").exists()


# -- 6. sizes take units; argparse errors name no internals -------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("4096", 4096), ("1k", 1024), ("1K", 1024), ("1KiB", 1024), ("2kB", 2000), ("3m", 3 << 20),
     ("3MiB", 3 << 20), ("1MB", 1_000_000), ("1g", 1 << 30), ("1GB", 10**9), ("512b", 512), ("1 MiB", 1 << 20)],
)
def test_sizes_take_units(text, value) -> None:
    assert _size(text) == value


def test_size_options_accept_units_and_name_no_internals(sample) -> None:
    segment = next((sample / "orders-0").glob("*.log"))
    rc, out, err = run("dump", "--files", segment, "--max-bytes", "1k")
    assert rc == 0, err
    for option in ("--max-bytes", "--max-message-size"):
        rc, _, err = run("dump", "--files", segment, option, "1q")
        assert rc == 2
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"kafkalog dump: error: argument {option}: not a size: '1q'"), last
        assert "_size" not in err
    rc, _, err = run("dump", "--files", segment, "--max-bytes", "3g")
    assert rc == 2 and "more than the largest size, 2147483647" in err
    rc, _, err = run("compact", sample / "orders-0", "--dry-run", "--dedupe-buffer-size", "10")
    assert rc == 2 and "_dedupe" not in err
    rc, _, err = run("rebuild-index", sample, "--dry-run", "--index-interval-bytes", "x")
    assert rc == 2 and "_interval" not in err and "_size" not in err
    rc, _, _ = run("rebuild-index", sample, "--dry-run", "--index-interval-bytes", "4k")
    assert rc == 0
    rc, _, err = run("compact", sample / "orders-0", "--dry-run", "--keys", "1k")
    assert rc == 2 and err.splitlines()[-1].endswith("argument --keys: not a whole number: '1k'")
    rc, _, err = run("retention", sample, "--dry-run", "--now", "yesterday")
    assert rc == 2 and err.splitlines()[-1].endswith("argument --now: not a whole number: 'yesterday'")


# -- 7. an option typo gets a suggestion and the command's usage ---------------------------------


def test_option_typo_suggests_the_closest_option(sample) -> None:
    segment = next((sample / "orders-0").glob("*.log"))
    rc, out, err = run("dump", "--files", segment, "--deep-iteraton")
    assert rc == 2 and out == ""
    assert err.startswith("usage: kafkalog dump ")
    assert "did you mean --deep-iteration?" in err.splitlines()[-1]
    assert err.splitlines()[-1].startswith("kafkalog dump: error: unrecognized arguments: --deep-iteraton")
    rc, _, err = run("verify", sample, "--strcit")
    assert rc == 2 and err.startswith("usage: kafkalog verify") and "--strict" in err.splitlines()[-1]
    rc, _, err = run("stat", sample, "--jsno")
    assert rc == 2 and "did you mean --json?" in err
    rc, _, err = run("stat", sample, "--zzzzzzzz")
    assert rc == 2 and err.startswith("usage: kafkalog stat") and "did you mean" not in err


# -- 8. the Python reader has real keyword parameters --------------------------------------------


def test_reader_functions_have_keyword_parameters() -> None:
    from kafkalog.spark import read_arrow, read_columns, read_records
    from kafkalog.spark._python_reader import FORMAT_PARAMETERS

    reference = inspect.signature(read_columns).parameters
    for f in (read_records, read_arrow):
        params = inspect.signature(f).parameters
        assert not any(p.kind is p.VAR_KEYWORD for p in params.values()), f.__name__
        # read_columns' own, then the decoding ones (its numpy columns stay binary)
        assert list(params) == list(reference) + list(FORMAT_PARAMETERS), f.__name__
        for name, p in params.items():
            if name != "path":
                assert p.kind is p.KEYWORD_ONLY
                if name in reference and not (f is read_arrow and name == "include_headers"):
                    assert p.default == reference[name].default, (f.__name__, name)
    assert inspect.signature(read_arrow).parameters["include_headers"].default is False


def test_reader_errors_name_the_function_called(sample) -> None:
    from kafkalog.spark import read_records

    with pytest.raises(TypeError) as e:
        list(read_records(sample, start_offset=3))
    message = str(e.value)
    assert "read_records()" in message and "read_columns" not in message
    records = list(read_records(sample, start_offsets=3, topics=["orders"]))
    assert records and records[0].offset == 3


# -- 9. retention on something that is not a Kafka log -------------------------------------------


def test_retention_on_random_bytes_says_what_they_are(tmp_path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(os.urandom(5000))
    for args in ((d,), (d, "--dry-run"), (tmp_path,), (tmp_path, "--dry-run")):
        rc, out, err = run("retention", *args, "--now", 1_700_000_000_000)
        assert rc == 1, (args, out)
        assert "empty" not in out + err
        assert "00000000000000000000.log" in err and "position 0" in err and "not Kafka log data" in err
    assert sorted(p.name for p in d.iterdir()) == ["00000000000000000000.log"]
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "a.bin").write_bytes(os.urandom(100))
    (junk / "b.log").write_bytes(os.urandom(100))
    rc, out, err = run("retention", junk)
    assert rc == 1 and "no Kafka log files" in err and "a.bin" in err and "b.log" in err


def test_retention_keeps_a_preallocated_empty_segment(tmp_path) -> None:
    """A guard: zeros from position 0 are an empty preallocated segment (preallocate=true), not
    garbage."""
    d = tmp_path / "t-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(bytes(4096))
    rc, out, err = run("retention", d, "--dry-run", "--now", 1_700_000_000_000)
    assert rc == 0, err
    assert "nothing to delete" in out


# -- 10. verify on a parent of log directories hints at every log directory below ----------------


def test_verify_parent_of_log_dirs_names_all_of_them(sample, tmp_path) -> None:
    parent = tmp_path / "disks"
    for name in ("kafka-logs-1", "data", "broker-b"):
        shutil.copytree(sample, parent / name)
    (parent / "broker-b" / "meta.properties").write_text("version=1\n")
    (parent / "empty").mkdir()
    (parent / "meta-only").mkdir()
    (parent / "meta-only" / "meta.properties").write_text("version=1\n")
    rc, out, err = run("verify", parent)
    assert rc == 1 and err.count("\n") == 1
    for name in ("kafka-logs-1", "data", "broker-b", "meta-only"):
        assert name in err
    assert "empty" not in err.replace("empty)", "")


# -- 11. stat over a log directory: offsets per partition ----------------------------------------


def test_stat_log_dir_gives_offset_ranges_per_partition(sample) -> None:
    rc, out, err = run("stat", sample)
    assert rc == 0, err
    lines = out.splitlines()
    total = next(line for line in lines if line.startswith("total "))
    assert total.split()[1] == "-"  # no one offset range across unrelated partitions
    with Log.open(sample / "orders-0", LogConfig(), read_only=True) as log:
        orders_end = log.log_end_offset
    with Log.open(sample / "users-3", LogConfig(), read_only=True) as log:
        users_end = log.log_end_offset
    assert any(line.startswith("orders-0 total") and f"..{orders_end - 1}" in line for line in lines), out
    assert any(line.startswith("users-3 total") and f"..{users_end - 1}" in line for line in lines), out
    rc, out, _ = run("stat", sample, "--json")
    doc = json.loads(out)
    assert doc["totals"]["firstOffset"] is None and doc["totals"]["lastOffset"] is None
    parts = {p["partition"]: p for p in doc["partitionTotals"]}
    assert parts["orders-0"]["lastOffset"] == orders_end - 1 and parts["users-3"]["lastOffset"] == users_end - 1
    assert doc["totals"]["records"] == sum(p["records"] for p in parts.values())
    # One partition: its own range, as before.
    rc, out, _ = run("stat", sample / "orders-0")
    total = next(line for line in out.splitlines() if line.startswith("total "))
    assert total.split()[1].endswith(f"..{orders_end - 1}")


# -- 12. compact --dry-run counts each recovered segment once -----------------------------------


def test_compact_dry_run_counts_recovered_segments_once(sample, tmp_path) -> None:
    logs = copy_of(sample, tmp_path)
    part = logs / "orders-0"
    n = len(list(part.glob("*.log")))
    for index in part.glob("*.index"):
        index.unlink()
    (logs / ".kafka_cleanshutdown").unlink(missing_ok=True)
    (logs / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    rc, out, err = run("compact", part, "--dry-run", "--json", "--now", 1_700_003_600_000)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["recovery"]["recoveredSegments"] == n
    rebuilds = [c for c in doc["pendingChanges"] if c.startswith("would rebuild the indexes of")]
    assert len(rebuilds) == len(set(rebuilds)) == n


# -- 13. --files with spaces (a shell glob) ------------------------------------------------------


def test_dump_files_accepts_a_shell_glob(sample) -> None:
    a, b = sorted((sample / "orders-0").glob("*.log"))[:2]
    rc, out, err = run("dump", "--files", a, b)
    assert rc == 0, err
    assert f"Dumping {a}" in out and f"Dumping {b}" in out
    rc, out2, _ = run("dump", "--files", f"{a},{b}")
    assert out2 == out


def test_convert_failure_midway_removes_the_segments_it_wrote(tmp_path) -> None:
    """The first segments convert, a later one is refused: the output directory goes, whole."""
    from kafkalog import RecordBatchBuilder

    part = tmp_path / "mixed-0"
    with Log.open(part, LogConfig(segment_bytes=300)) as log:
        for i in range(6):
            b = RecordBatchBuilder(magic=2)
            b.append(b"k%d" % i, b"v" * 100, timestamp=1_700_000_000_000 + i)
            log.append(b.build(), leader_epoch=0)
        b = RecordBatchBuilder(magic=2)
        b.append(b"k", b"v", timestamp=1_700_000_000_100, headers=[("h", b"x")])  # no form in magic 1
        log.append(b.build(), leader_epoch=0)
    assert len(list(part.glob("*.log"))) > 2
    rc, out, err = run("convert", part, tmp_path / "out-0", "--magic", "1")
    assert rc == 1 and "header" in err, err
    assert not (tmp_path / "out-0").exists()
    (tmp_path / "there-0").mkdir()
    (tmp_path / "there-0" / "notes.txt").write_text("mine")
    rc, _, _ = run("convert", part, tmp_path / "there-0", "--magic", "1")
    assert rc == 1 and [p.name for p in (tmp_path / "there-0").iterdir()] == ["notes.txt"]


def test_compact_summary_counts_the_records_of_its_table(tmp_path) -> None:
    """An aborted transaction's batch is dropped whole: the summary's "of N records" is still
    the table's total (it said 72 of 101 under a table of 106)."""
    from kafkalog import ControlRecordType, RecordBatchBuilder
    from kafkalog.producer_state.manager import AppendOrigin

    part = tmp_path / "t-0"
    with Log.open(part, LogConfig(segment_bytes=400)) as log:
        for i in range(12):
            b = RecordBatchBuilder(magic=2)
            b.append(b"k%d" % (i % 3), b"v%d" % i, timestamp=1_700_000_000_000 + i)
            log.append(b.build(), leader_epoch=0)
            if i == 4:
                t = RecordBatchBuilder(magic=2, producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
                for j in range(4):
                    t.append(b"t%d" % j, b"x", timestamp=1_700_000_000_000 + i)
                log.append(t.build(), leader_epoch=0)
                log.append(RecordBatchBuilder.end_transaction_marker(
                    ControlRecordType.ABORT, producer_id=9, producer_epoch=0, coordinator_epoch=0,
                    timestamp=1_700_000_000_000 + i), leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    rc, out, err = run("compact", part, "--dry-run", "--now", 1_700_003_600_000)
    assert rc == 0, err
    total = next(line for line in out.splitlines() if line.split()[:1] == ["total"])
    summary = next(line for line in out.splitlines() if "would remove" in line)
    assert "aborted" in summary
    assert f" of {total.split()[1]} records" in summary, (total, summary)


def test_dump_of_a_directory_says_what_to_give(sample) -> None:
    """`dump --files DIR` said "Ignoring unknown file DIR" and exit 0 (docs/cli.md: a directory
    is a file that cannot be dumped, exit status 1)."""
    part = sample / "orders-0"
    rc, out, err = run("dump", "--files", part)
    assert rc == 1
    assert out == f"Dumping {part}\n"
    assert err == (f"kafkalog dump: {part}: Is a directory: dump takes files (--files {part}/*.log dumps its "
                   f"segments; kafkalog stat {part} describes them)\n")


def test_retention_on_a_file_says_what_it_takes(sample) -> None:
    """It said "Not a directory"; compact named what it takes."""
    segment = next((sample / "orders-0").glob("*.log"))
    for command in ("retention", "compact"):
        rc, out, err = run(command, segment, "--dry-run")
        assert rc == 1 and out == ""
        assert err == f"kafkalog {command}: {segment}: {command} takes a partition directory or a log directory, not a file\n"


def test_unknown_top_level_option(sample) -> None:
    """`kafkalog --verison` said "the following arguments are required: COMMAND"."""
    rc, out, err = run("--verison")
    assert rc == 2 and err.splitlines()[-1] == "kafkalog: unknown option '--verison' (did you mean '--version'?)"
    rc, out, err = run("--json", "verify", sample)
    assert rc == 2 and err.splitlines()[-1].endswith("(options go after the command: kafkalog COMMAND --help)")
    rc, out, _ = run("--vers")  # argparse's abbreviation still works
    assert rc == 0 and out.startswith("kafkalog ")


@given(st.integers(0, 3_000_000_000), st.sampled_from(sorted(_SIZE_UNITS)), st.booleans())
def test_size_parser_round_trip(n, unit, upper) -> None:
    text = f"{n}{unit.upper() if upper else unit}"
    if n * _SIZE_UNITS[unit] > INT32_MAX:
        with pytest.raises(argparse.ArgumentTypeError, match="more than the largest size"):
            _size(text)
    else:
        assert _size(text) == n * _SIZE_UNITS[unit]


@pytest.mark.parametrize("text", ["", "k", "1.5m", "-1", "1 2", "1kk", "1TB", "0x10"])
def test_what_is_no_size(text) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="not a size"):
        _size(text)
