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
from kafkalog.tools import MAX_PROBLEMS_PER_KIND, verify_path
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
    assert (done.returncode, done.stdout, done.stderr) == (0, f"kafkalog {kafkalog.__version__}\n", "")


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
    assert done.returncode == 2 and "unknown command" in done.stderr and done.stdout == ""


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


def test_a_shorter_progress_line_leaves_no_stray_characters(monkeypatch) -> None:
    term = _Terminal()
    clock = iter(range(1, 100)).__next__  # a redraw each call
    monkeypatch.setattr("kafkalog.tools._progress.time.monotonic", clock)
    bar = _ProgressBar(term, 3_200_000_000, "verify")
    bar(999_900_000)  # "999.9 MB/3.2 GB"
    bar(2_100_000)  # "1.0 GB/3.2 GB": two characters shorter
    assert term.screen().rstrip().endswith("1.0 GB/3.2 GB")  # not "1.0 GB/3.2 GBGB"
    bar.close()
    assert term.screen().strip() == ""
