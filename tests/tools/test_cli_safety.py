"""The command line as an operator meets it (issue 19): ``--version``, the usage, unknown
commands, Ctrl-C and broken pipes (through real subprocesses), the progress line, ``verify``'s
counts and refusals, and segments under names Kafka does not give them (``salvage`` output)."""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA
from test_verify import T0

import kafkalog
from kafkalog import RecordBatchBuilder
from kafkalog import tools as cli
from kafkalog import verify_path
from kafkalog.verify import MAX_PROBLEMS_PER_KIND
from kafkalog.tools._progress import _ProgressBar

KAFKA38 = DATA / "kafka-3.8"
SEGMENT = KAFKA38 / "v2-none-random" / "00000000000000000000.log"
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

# A `kafkalog` process whose first progress report sends it SIGINT: a Ctrl-C at a point where
# the command is mid-way through its work, the same on every run.
INTERRUPTING = """
import os, signal, sys
from kafkalog.tools import _progress
_sent = []
def _interrupt(self, n):
    if not _sent:  # one Ctrl-C
        _sent.append(n)
        os.kill(os.getpid(), signal.SIGINT)
_progress._ProgressBar.__call__ = _interrupt
from kafkalog.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def run(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main([str(a) for a in args], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def kafkalog_process(*args: object, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkalog", *map(str, args)], cwd=cwd, env=ENV, capture_output=True, text=True,
        timeout=120, **kw,
    )


def big_segment(directory: Path, megabytes: int = 4) -> Path:
    """A valid v2 segment of about ``megabytes`` MB (the progress callbacks fire every MiB)."""
    directory.mkdir(parents=True, exist_ok=True)
    b = RecordBatchBuilder(2)
    for i in range(16):
        b.append(b"k%d" % i, os.urandom(4000), timestamp=T0 + i)
    proto = bytearray(b.build().buffer)
    log = directory / "00000000000000000000.log"
    with open(log, "wb") as f:
        for n in range(megabytes * 16):
            struct.pack_into(">q", proto, 0, n * 16)  # the base offset is outside the CRC
            f.write(proto)
    return log


# -- the command line ----------------------------------------------------------------------------


def test_version_prints_the_package_version() -> None:
    done = kafkalog_process("--version")
    expected = f"kafkalog {kafkalog.__version__}\nrecord core: {kafkalog.core_name()}\n"
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")


def test_usage_lists_every_command() -> None:
    done = kafkalog_process("--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: kafkalog [-h] [--version] COMMAND ...\n")
    for command in (*cli.SUBCOMMANDS, "broker"):
        assert f"\n    {command} " in done.stdout or f"\n    {command}\n" in done.stdout, command


def test_a_mistyped_command_is_an_error_with_a_suggestion(tmp_path) -> None:
    shutil.copytree(KAFKA38 / "v2-none-random", tmp_path / "t-0")
    done = kafkalog_process("verfy", tmp_path / "t-0")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == "kafkalog: unknown command 'verfy' (did you mean 'verify'?)"
    rc, out, err = run("frobnicate")
    assert rc == 2 and "unknown command 'frobnicate' (commands: dump, verify," in err


def test_summary_mode_needs_every_argument_to_be_an_existing_file(tmp_path) -> None:
    done = kafkalog_process(SEGMENT)
    assert done.returncode == 0 and "all CRCs valid" in done.stdout
    done = kafkalog_process(SEGMENT, tmp_path / "no-such.log")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"kafkalog: {tmp_path / 'no-such.log'}: not an existing file (kafkalog FILE.log ... summarises segment files)\n"
    done = kafkalog_process(tmp_path)  # a directory: no summary
    assert done.returncode == 1 and "not an existing file" in done.stderr


# -- Ctrl-C and broken pipes ---------------------------------------------------------------------


@pytest.mark.parametrize("command", ["salvage", "convert", "rebuild-index", "verify", "stat"])
def test_ctrl_c_ends_with_one_line_130_and_no_partial_file(tmp_path, command) -> None:
    log = big_segment(tmp_path / "src-0")
    before = {p.name for p in log.parent.iterdir()}
    args = {
        "salvage": [log, tmp_path / "out" / "00000000000000000000.log"],
        "convert": [log, tmp_path / "out" / "00000000000000000000.log", "--compression", "gzip"],
        "rebuild-index": [log.parent],
        "verify": [log.parent],
        "stat": [log.parent],
    }[command]
    (tmp_path / "out").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTING, command, *map(str, args)], env=ENV, capture_output=True, text=True,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (130, f"kafkalog {command}: interrupted\n")
    assert list((tmp_path / "out").iterdir()) == []
    leftovers = {p.name for p in log.parent.iterdir()} - before
    assert not {n for n in leftovers if n.endswith(".tmp")}, leftovers


@pytest.mark.parametrize(
    "args",
    [
        ["dump", "--files", str(SEGMENT), "--deep-iteration"],
        ["dump", "--json", "--files", str(SEGMENT)],
        ["demo"],
        ["verify", str(KAFKA38 / "v2-none-random")],
        ["stat", str(KAFKA38 / "v2-none-random")],
        [str(SEGMENT)],  # the summary
    ],
    ids=["dump", "dump-json", "demo", "verify", "stat", "summary"],
)
def test_a_closed_stdout_ends_quietly_with_141(args) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line: every write meets EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kafkalog", *args], env=ENV, stdout=write_end, stderr=subprocess.PIPE,
            text=True, timeout=120,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")


def test_dump_stops_quietly_when_the_reader_leaves_after_one_line() -> None:
    """``kafkalog dump ... | head -1``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkalog", "dump", "--files", str(SEGMENT), "--print-data-log"],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert first.startswith(b"Dumping ") and err == b""


# -- the progress line ---------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True

    def screen(self) -> str:
        """What a terminal shows: each ``\\r`` goes back to the start of the line, characters overwrite."""
        line: list[str] = []
        col = 0
        for ch in self.getvalue():
            if ch == "\r":
                col = 0
                continue
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
        return "".join(line)


def test_a_shorter_progress_line_leaves_no_stray_characters() -> None:
    term = _Terminal()
    clock = iter(range(1, 100)).__next__  # a redraw each call, a second apart
    bar = _ProgressBar(term, 3_200_000_000, "verify", clock=clock)
    bar(999_900_000)  # "999.9 MB/3.2 GB  999.9 MB/s  ETA 0:03"
    bar(2_100_000)  # "1.0 GB/3.2 GB  700.6 MB/s  ETA 0:04": shorter
    assert term.screen().rstrip() == bar.line()  # nothing of the longer line left over
    bar.close()
    assert term.screen().strip() == ""


# -- verify: true counts, and nothing checked is not OK ------------------------------------------


def test_verify_counts_every_problem_when_the_listing_is_capped(tmp_path) -> None:
    directory = tmp_path / "t-0"
    shutil.copytree(KAFKA38 / "v2-none-random", directory)
    index = directory / "00000000000000000000.index"
    n = index.stat().st_size // 8
    bad = MAX_PROBLEMS_PER_KIND + n + 10
    index.write_bytes(struct.pack(">ii", 1, 1) * bad)  # every entry after the first goes backwards or repeats
    report = verify_path(directory)
    listed = [p for p in report.problems if p.kind == "index-not-monotonic"]
    assert len(listed) == MAX_PROBLEMS_PER_KIND + 1  # the cap and the line counting the rest
    errors = report.errors
    assert errors >= bad - 1 > len([p for p in report.problems if p.severity == "error"])
    assert report.capped and report.to_dict()["errors"] == errors
    rc, out, _ = run("verify", "--quiet", directory)
    assert rc == 1
    assert out.splitlines()[-1].endswith(f"{errors} errors, 0 warnings (first {MAX_PROBLEMS_PER_KIND} of each kind listed)")


def test_verify_on_a_parent_of_log_directories_is_an_error(tmp_path) -> None:
    """``kafka-logs-1`` parses as topic ``kafka-logs``, partition 1; it is a log directory."""
    for n in (1, 2):
        shutil.copytree(KAFKA38 / "v2-none-random", tmp_path / f"kafka-logs-{n}" / "t-0")
    rc, out, err = run("verify", tmp_path)
    assert (rc, out) == (1, "")
    assert err.startswith(f"kafkalog verify: {tmp_path}: no log segments here")
    assert "look like log directories: verify them (kafka-logs-1, kafka-logs-2)" in err
    rc, out, err = run("verify", tmp_path / "kafka-logs-1")  # the log directory itself is fine
    assert rc == 0 and "OK: 1 segments, 1 partitions, 0 errors" in out


def test_verify_on_a_directory_of_empty_partition_like_directories_is_an_error(tmp_path) -> None:
    (tmp_path / "notes-1").mkdir()
    rc, out, err = run("verify", tmp_path)
    assert rc == 1 and out == "" and "not a Kafka partition or log directory" in err


# -- salvage output under a name Kafka does not give ---------------------------------------------


def test_salvage_output_under_another_name_can_be_verified_and_dumped(tmp_path) -> None:
    src = tmp_path / "00000000000000000000.log"
    data = bytearray(SEGMENT.read_bytes())
    data[100] ^= 0xFF  # a corrupt first batch: the salvaged copy starts at a later base offset
    src.write_bytes(bytes(data))
    rc, _, err = run("salvage", src, tmp_path / "rescued.log")
    assert rc == 0, err
    rescued = tmp_path / "rescued.log"
    first = struct.unpack(">q", rescued.read_bytes()[:8])[0]
    assert first > 0
    rc, out, err = run("verify", rescued)
    assert rc == 0, err
    assert f"base offset {first} taken from the first batch" in run("verify", "--warnings", rescued)[1]
    rc, out, err = run("dump", "--files", rescued)
    assert rc == 0, err
    assert out.startswith(f"Dumping {rescued}\nLog starting offset: {first}\nbaseOffset: {first} ")
    assert "its base offset" in err and "first batch" in err
    rc, out, _ = run("dump", "--json", "--files", rescued)
    head = json.loads(out.splitlines()[0])
    assert head["baseOffset"] == first and head["baseOffsetFrom"] == "firstBatch"
    other = tmp_path / "rescued.bin"
    shutil.copyfile(rescued, other)
    assert run("verify", other)[0] == 0


def test_a_non_kafka_name_without_a_valid_first_batch_is_still_refused(tmp_path) -> None:
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"\x00" * 100)
    rc, _, err = run("verify", junk)
    assert rc == 1 and "this name is not" in err
    rc, _, err = run("dump", "--files", junk)
    assert rc == 1 and "not a Kafka file name" in err
