"""The plumbing every operator tool shares: one run's streams, error lines and exit status, and
the text rendering of its reports (tables, timestamps, paths, problems).

The tools are thin adapters: parse the arguments, call the library, render text or JSON, and
turn a KafkalogError or OSError into one line on stderr and exit status 1. Long operations draw
a progress line on stderr when it is a terminal.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import posixpath
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from ..filenames import find_partition_dirs, segment_logs
from ..remote import is_remote
from ..errors import KafkalogError
from ..verify import Problem
from ._progress import _ProgressBar


def _ts(ms: int | None) -> str:
    """An epoch-millisecond timestamp in ISO 8601 UTC (or ``-``)."""
    if ms is None:
        return "-"
    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    """Rows as aligned text columns (``right``: the columns aligned right)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        out.append("  ".join(cells).rstrip())
    return out


def _display(path: str, root: str, root_is_dir: bool | None = None) -> str:
    """``path`` relative to what the user named (a directory, or a file's directory);
    ``root_is_dir`` says which for a URL (a local root is looked at)."""
    if is_remote(root):
        base = root if root_is_dir else posixpath.dirname(root)
        return path[len(base) + 1:] if path.startswith(base + "/") else path
    base = root if os.path.isdir(root) else os.path.dirname(root) or "."
    try:
        rel = os.path.relpath(path, base)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _os_message(e: OSError) -> str:
    if e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    return str(e)


class _Tool:
    """The shared plumbing of one tool run: streams, error lines, the exit status."""

    def __init__(self, name: str, args: argparse.Namespace, out: IO[str], err: IO[str]) -> None:
        self.name = name
        self.args = args
        self.out = out
        self.err = err
        self.status = 0

    def print(self, line: str = "") -> None:
        self.out.write(line + "\n")

    def json(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def fail(self, message: str) -> None:
        self.err.write(f"kafkalog {self.name}: {message}\n")
        self.err.flush()
        self.status = 1

    def guarded(self, action: Callable[[], None]) -> None:
        """Run ``action``; a library or OS error becomes one line on stderr and status 1 (a
        broken pipe is not an error of the command: it ends the run, see :func:`main`)."""
        try:
            action()
        except BrokenPipeError:
            raise
        except KafkalogError as e:
            self.fail(str(e))
        except OSError as e:
            self.fail(_os_message(e))

    def progress(self, total: int, label: str) -> _ProgressBar:
        return _ProgressBar(self.err, total, label)


def _problem_lines(problems: Sequence[Problem], root: str, root_is_dir: bool | None = None) -> list[str]:
    return [
        f"{p.severity:<7}  {_display(p.path, root, root_is_dir)}"
        + ("" if p.position is None else f" @{p.position}")
        + f"  {p.kind}  {p.message}"
        for p in problems
    ]


def _now_ms(now: int | None) -> int:
    """``--now`` if given, else the clock, in epoch milliseconds."""
    return now if now is not None else time.time_ns() // 1_000_000


def _partitions_at(arg: str, *, not_a_dir: str | None = None) -> list[Path]:
    """The partition directories a PATH argument names: itself when it holds segments, else
    those below it (a log directory).

    Raises:
        FileNotFoundError: nothing is there.
        KafkalogError: it is a file and ``not_a_dir`` says why that is refused, or no partition is there.
    """
    path = Path(arg)
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", arg)
    if not_a_dir is not None and not path.is_dir():
        raise KafkalogError(not_a_dir, file=arg)
    partitions = [path] if segment_logs(path) else find_partition_dirs(path)
    if not partitions:
        raise KafkalogError("no log segments here and no partition directories below", file=arg)
    return partitions
