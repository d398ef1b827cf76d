"""The plumbing every operator tool shares: one run's streams, error lines and exit status, and
the text rendering of its reports (tables, timestamps, paths, problems).

The tools are thin adapters: parse the arguments, call the library, render text or JSON, and
turn a KafkalogError or OSError into one line on stderr and exit status 1. Long operations draw
a progress line on stderr when it is a terminal. Every JSON document a command writes has
camelCase keys, as Kafka's own JSON output does (:func:`camel_keys`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import posixpath
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from ..filenames import (
    cluster_metadata_dir_of,
    cluster_metadata_marker,
    find_partition_dirs,
    partition_of,
    segment_logs,
)
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


#: Report keys whose value is a dict keyed by data rather than by field names: ``settings`` maps
#: Kafka topic property names (``cleanup.policy``) to their values. Those keys are written as
#: they are; the values below them are converted as usual.
_DATA_KEYED = frozenset({"settings"})


def _camel(name: str) -> str:
    """A snake_case report key in camelCase (``log_start_offset`` -> ``logStartOffset``)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_keys(obj: object, *, keep: bool = False) -> object:
    """``obj`` with the keys of every dict in it in camelCase, recursively (``keep``: this dict's
    own keys are data and stay as they are; see :data:`_DATA_KEYED`).

    The library's reports (``to_dict()``) keep Python's snake_case; the CLI's JSON follows Kafka's
    convention (``kafka-dump-log.sh``, ``kafka-log-dirs.sh``: ``baseOffset``, ``logStartOffset``),
    applied here once for every command. ``dump`` writes its JSON Lines itself
    (``_dump_output._JsonOutput``): its names are Kafka's already, and its records' keys and
    values are data, never to be converted.
    """
    if isinstance(obj, dict):
        return {
            (k if keep or not isinstance(k, str) else _camel(k)): camel_keys(v, keep=not keep and k in _DATA_KEYED)
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [camel_keys(v) for v in obj]
    return obj


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
        """Write one JSON document (one line), its keys in camelCase (:func:`camel_keys`)."""
        self.out.write(json.dumps(camel_keys(obj), separators=(",", ":")) + "\n")

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

    def refuse_left_alone(self, path: str | os.PathLike, topic_rules: Mapping[str, str] | None = None) -> None:
        """Refuse to write to ``path`` (a partition, a log directory, a file or an output) when
        it is or lies in a directory this command leaves alone (:func:`_left_alone`).

        Raises:
            KafkalogError: naming ``path`` and why.
        """
        reason = _left_alone(Path(path), topic_rules or {})
        if reason is not None:
            raise KafkalogError(f"{reason}; kafkalog {self.name} leaves it alone", file=os.fspath(path))

    def skip_left_alone(
        self, directories: Iterable[Path], topic_rules: Mapping[str, str] | None = None
    ) -> Iterator[Path]:
        """The partition directories of a log directory this command may write to; each one it
        leaves alone (:func:`_left_alone`) is skipped with a line saying why (with ``--json`` a
        record ``{"partition", "skipped": true, "reason"}``), and the run goes on."""
        for directory in directories:
            # PATH, and so every directory above these, was refused or passed already.
            reason = _left_alone(directory, topic_rules or {}, ancestors=False)
            if reason is None:
                yield directory
            elif getattr(self.args, "json", False):
                self.json({"partition": str(directory), "skipped": True, "reason": reason})
            else:
                self.print(f"{directory}: skipped: {reason}")

    def writable_partitions(self, arg: str, *, topic_rules: Mapping[str, str] | None = None) -> Iterator[Path]:
        """The partition directories a writing command's PATH names (:func:`_partitions_at`):
        PATH itself refused when the command leaves it alone, a log directory's partitions less
        those it leaves alone (skipped, and said so); a file is refused. Every writing command
        gets its partitions here or through the two steps it is made of.

        Raises:
            The errors of :func:`_partitions_at`; KafkalogError for a PATH left alone.
        """
        self.refuse_left_alone(arg, topic_rules)
        not_a_dir = f"{self.name} takes a partition directory or a log directory, not a file"
        yield from self.skip_left_alone(_partitions_at(arg, not_a_dir=not_a_dir), topic_rules)


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
        raise KafkalogError(_no_partitions(path), file=arg)
    return partitions


def _no_partitions(directory: Path) -> str:
    """Why a directory has no partition to work on, naming what it holds instead (the first ten
    names) so that a directory of other files is not taken for an empty one."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        names = []
    if not names:
        return "no log segments here and no partition directories below"
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return (
        "no Kafka log files here (<20-digit offset>.log segments) and no partition directories "
        f"(<topic>-<partition>) below, only: {shown}"
    )


def _left_alone(path: Path, topic_rules: Mapping[str, str], *, ancestors: bool = True) -> str | None:
    """Why a writing command must not write to ``path``, or None. Never to a KRaft metadata log
    (or anything in one: Kafka trims that log only behind its own snapshots, never by a topic's
    retention or compaction, and a producer snapshot or index written there is no Kafka's);
    never to a partition of a topic in ``topic_rules`` (topic -> why, a command's own rule).
    ``ancestors=False``: the directories above ``path`` are known not to be one (one listing,
    not one per ancestor, for each partition of a log directory)."""
    if ancestors:
        found = cluster_metadata_dir_of(path)
    else:
        marker = cluster_metadata_marker(path)
        found = None if marker is None else (Path(os.path.abspath(path)), marker)
    if found is not None:
        kraft, marker = found
        inside = "" if kraft == Path(os.path.abspath(path)) else f"lies in {kraft}: "
        return (
            f"{inside}a KRaft cluster metadata log ({marker}), not a topic partition: Kafka trims it only "
            "behind its KRaft snapshots, never by retention or compaction"
        )
    topic = partition_of(path)
    if topic is not None and topic[0] in topic_rules:
        return f"topic {topic[0]}: {topic_rules[topic[0]]}"
    return None
