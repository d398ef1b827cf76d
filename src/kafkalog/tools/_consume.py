"""``kafkalog consume``: read records from a log directory the way kcat reads a topic.

PATH is a log directory, a partition directory, or a URL of either (read in place, as ``dump``
and ``verify`` read, through :class:`kafkalog.location.Location`). Each partition is read with a
:class:`kafkalog.partition_view.PartitionView` (never written, locked or mapped: a broker may be
writing it) from the offset ``-o`` names to its end: the log end offset, or the last stable
offset under ``--isolation read_committed``, which also drops aborted transactions as Kafka's
consumer does (:class:`kafkalog.transaction_tracker.AbortedFilter` over the ``.txnindex``
entries). Runs of batches are read with one read each and decoded into columns
(:func:`kafkalog.decode_columns`), and kcat's output is rendered from the columns
(:mod:`._kcat_format`).

Partitions come one after another, by topic then partition, each in offset order (kcat prints
partitions interleaved as the broker answers; offline there is no arrival order). ``-c`` counts
records over all partitions, as kcat does. Without ``--follow`` the run ends at the end of the
last partition (kcat's ``-e``, which is accepted); with it, the partitions are polled every
``--poll-interval`` ms for new batches, new segments, new partitions and retention, until Ctrl-C
(exit status 0) or, with ``e@``, until every partition reached the stop time.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import heapq
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from .. import FileRecords, KafkalogError, MemoryRecords, RecordColumns, decode_columns
from ..errors import SchemaError
from ..filenames import INTERNAL_TOPICS, PARTITION_DIR
from ..location import Location
from ..partition_view import PartitionView
from ..record import MAGIC_V2, RecordBatch
from ..remote import DEFAULT_BLOCK_SIZE
from ..resync import BAD_BATCH_ERRORS
from ..schema_registry import FORMATS, make_decoder, open_schema_store
from ..transaction_tracker import AbortedFilter
from ._kcat_format import (
    Decode,
    KcatFormatError,
    KcatOutput,
    check_pack,
    default_format,
    parse_delim,
    parse_format,
    unpack,
)
from ._tool import _Tool

#: Bytes of consecutive batches read with one read and decoded together.
_CHUNK_BYTES = 8 << 20
#: ``--poll-interval``'s default, in ms: how often ``--follow`` looks for new data.
DEFAULT_POLL_MS = 500
#: kcat's ``-o`` words.
_BEGINNING, _END, _STORED = "beginning", "end", "stored"


@dataclass
class StartSpec:
    """Where ``-o`` starts: ``kind`` is beginning, end, stored, offset, tail or timestamp."""

    kind: str = _BEGINNING
    value: int = 0


def parse_offset_args(values: list[str] | None) -> tuple[StartSpec, int | None]:
    """kcat's ``-o`` (repeatable: ``-o s@A -o e@B``): the start, and the stop timestamp (``e@``).
    An offset is read as C's ``strtoll`` reads it (``-o abc`` is offset 0, as in kcat)."""
    start, stop = StartSpec(), None
    for text in values or []:
        if text == "end":
            start = StartSpec(_END)
        elif text == "beginning":
            start = StartSpec(_BEGINNING)
        elif text == "stored":
            start = StartSpec(_STORED)
        elif text.startswith("s@"):
            # kcat tests the timestamps for non-zero: s@0 is no start time (the default start),
            # e@0 no stop time
            ts = _strtoll(text[2:])
            if ts:
                start = StartSpec("timestamp", ts)
        elif text.startswith("e@"):
            stop = _strtoll(text[2:]) or None
        else:
            value = _strtoll(text)
            start = StartSpec("tail", -value) if value < 0 else StartSpec("offset", value)
    return start, stop


#: The options whose value getopt takes from the next argument whatever it looks like
#: (``-D --``, ``-o -3``); argparse would read a leading dash as an option.
_VALUED = frozenset({"-t", "-p", "-o", "-c", "-f", "-D", "-K", "-s", "-r", "-G"})


def getopt_values(argv: list[str]) -> list[str]:
    """``argv`` with each short option's value that starts with a dash attached (``-D --`` as
    ``-D--``), so argparse reads it as getopt does: as the value."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in _VALUED and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(argv[i] + argv[i + 1])
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def _strtoll(text: str) -> int:
    """C's ``strtoll(text, NULL, 10)``: leading digits after white space and a sign, else 0."""
    s = text.lstrip(" \t\n\v\f\r")
    sign = -1 if s.startswith("-") else 1
    s = s[1:] if s[:1] in "+-" else s
    digits = len(s) - len(s.lstrip("0123456789"))
    value = sign * int(s[:digits]) if digits else 0
    return max(-(1 << 63), min((1 << 63) - 1, value))


@dataclass
class _Partition:
    """One partition being read: where its directory is and the next offset to print."""

    topic: str
    partition: int
    directory: Location
    next_offset: int | None = None  # None: not resolved yet
    done: bool = False  # reached e@'s stop time


class _Stop(Exception):
    """``-c``'s count is reached."""


def add_consume_parser(sub: Any) -> argparse.ArgumentParser:
    """``kafkalog consume``'s parser (kcat's consumer options, and kafkalog's)."""
    parser = sub.add_parser(
        "consume",
        help="print records from a log or partition directory as kcat does (read-only)",
        description=(
            "Read records from PATH (a log directory, a partition directory, or a URL of either) and print them "
            "with kcat's -f format tokens or -J JSON envelopes. Read-only: nothing is written, locked or created, "
            "so a directory a broker is writing can be read (and followed with --follow)."
        ),
    )
    parser.add_argument("path", metavar="PATH", help="a log directory, a partition directory, or a URL of either")
    parser.add_argument("-t", "--topic", action="append", metavar="GLOB",
                        help="only topics matching this glob (repeatable; default every topic but the internal ones)")
    parser.add_argument("-p", "--partition", action="append", type=int, metavar="N", help="only this partition (repeatable)")
    parser.add_argument("-o", "--offset", action="append", metavar="OFFSET",
                        help="beginning (default) | end | stored (needs -G) | <offset> | -<n> (n from the end) | "
                        "s@<ms> (first record at or after) | e@<ms> (stop before the first record at or after; "
                        "repeatable with s@)")
    parser.add_argument("-c", "--count", type=int, default=0, metavar="N", help="exit after N records in all (kcat's -c)")
    parser.add_argument("-e", "--exit", action="store_true", help="exit at the end (the default offline; kcat's -e)")
    parser.add_argument("--follow", action="store_true",
                        help="wait for more records when the end is reached, as kcat without -e does (Ctrl-C stops)")
    parser.add_argument("--poll-interval", type=int, default=DEFAULT_POLL_MS, metavar="MS",
                        help=f"how often --follow looks for new records ({DEFAULT_POLL_MS} ms)")
    parser.add_argument("-f", "--format", metavar="FMT", help="kcat's output format (%%s %%S %%R %%k %%K %%t %%p %%o %%T %%h %%%%, \\n \\t \\xHH)")
    parser.add_argument("-J", "--json", action="store_true", help="kcat's JSON envelope, one object per record")
    parser.add_argument("-D", "--delimiter", default="\\n", metavar="DELIM", help="record delimiter without -f (\\n)")
    parser.add_argument("-K", "--key-delimiter", metavar="DELIM", help="print keys before values, separated by DELIM (without -f)")
    parser.add_argument("-Z", "--null", action="store_true", help='print null (and empty) keys and values as "NULL"')
    parser.add_argument("-s", "--schema", action="append", metavar="[key=|value=]FORMAT",
                        help="decode keys and/or values: avro, protobuf, json, string, bytes, registry, or one of kcat's "
                        "pack formats (<>bBhHiIqQcs$, e.g. key=q) (repeatable)")
    parser.add_argument("-r", "--schemas", metavar="DIR|URL",
                        help="the schemas: a _schemas partition directory, a log directory holding _schemas-0, or a "
                        "Schema Registry URL (default: _schemas-0 of the log directory read)")
    parser.add_argument("-G", "--group", metavar="GROUP", help="the consumer group whose committed offsets -o stored starts at")
    parser.add_argument("--isolation", choices=("read_uncommitted", "read_committed"), default="read_uncommitted",
                        help="read_committed: stop at the last stable offset and skip aborted transactions")
    parser.add_argument("--show-control", action="store_true", help="also print control records (transaction markers)")
    parser.add_argument("--order", choices=("partition", "timestamp"), default="partition",
                        help="partition: each partition in turn, in offset order (default); timestamp: the partitions "
                        "merged by record timestamp")
    return parser


# -- what to read ----------------------------------------------------------------------------------


def _is_partition_dir(where: Location) -> bool:
    """A ``<topic>-<partition>`` directory holding segments (or nothing), not a log directory."""
    if PARTITION_DIR.match(where.name) is None:
        return False
    _, dirs = where.listing()
    return bool(where.segment_logs()) or not any(PARTITION_DIR.match(d) for d in dirs)


def _wanted(topic: str, partition: int, globs: list[str] | None, partitions: list[int] | None) -> bool:
    if partitions and partition not in partitions:
        return False
    if not globs:
        return topic not in INTERNAL_TOPICS and not topic.startswith("__")
    return any(fnmatch.fnmatchcase(topic, g) for g in globs)


def discover(path: str, globs: list[str] | None, partitions: list[int] | None) -> tuple[Location, list[_Partition]]:
    """The log directory (or the partition directory itself) and the partitions to read, by
    topic and partition; listed anew on each call (``--follow`` finds new partitions).

    Raises:
        KafkalogError: PATH is not a directory.
    """
    where = Location.of(path)
    if not where.is_dir():
        raise KafkalogError("not a log directory or a partition directory", file=str(where))
    if _is_partition_dir(where):
        m = PARTITION_DIR.match(where.name)
        assert m is not None
        dirs = [where]
        root = where.parent
    else:
        dirs = where.partition_dirs()
        root = where
    out = []
    for d in dirs:
        m = PARTITION_DIR.match(d.name)
        if m is None:  # a -future directory: the same partition, being moved
            continue
        topic, partition = m["topic"], int(m["partition"])
        if len(dirs) == 1 and dirs[0] is where or _wanted(topic, partition, globs, partitions):
            out.append(_Partition(topic, partition, d))
    out.sort(key=lambda p: (p.topic, p.partition))
    return root, out


# -- reading a partition ---------------------------------------------------------------------------


class _Reader:
    """Reads partitions: their bounds, where ``-o`` starts, their records as columns."""

    def __init__(self, *, committed: bool, show_control: bool, progress: Callable[[int], None] | None) -> None:
        self.committed = committed
        self.show_control = show_control
        self.progress = progress

    def view(self, p: _Partition) -> PartitionView:
        return PartitionView(str(p.directory), storage=p.directory.storage, topic_partition=(p.topic, p.partition))

    def end_offset(self, view: PartitionView) -> int:
        """Where a consumer's fetches end: the log end, or the last stable offset (read_committed)."""
        return view.last_stable_offset() if self.committed else view.log_end_offset

    def resolve(self, p: _Partition, view: PartitionView, start: StartSpec, stored: dict[tuple[str, int], int],
                warn: Callable[[str], None]) -> int:
        """The first offset to read, as kcat (librdkafka) finds it for ``-o``; an offset outside
        the log resets to the end (librdkafka's ``auto.offset.reset=largest``), with a warning."""
        begin, end = view.log_start_offset, self.end_offset(view)
        if start.kind == _BEGINNING:
            return begin
        if start.kind == _END:
            return end
        if start.kind == "tail":  # RD_KAFKA_OFFSET_TAIL(n): n before the end, not before the start
            return max(begin, end - start.value)
        if start.kind == "timestamp":  # ListOffsets: the first record at or after; none: the end
            found = view.offset_for_timestamp(start.value)
            return end if found is None else max(found, begin)
        offset = start.value if start.kind == "offset" else stored.get((p.topic, p.partition))
        if offset is None:
            warn(f"{p.topic} [{p.partition}]: no committed offset for the group; starting at the end "
                 f"(auto.offset.reset=largest)")
            return end
        if not begin <= offset <= end:
            warn(f"{p.topic} [{p.partition}]: offset {offset} is out of range [{begin}, {end}]; starting at the end "
                 f"(auto.offset.reset=largest)")
            return end
        return offset

    def read(self, p: _Partition, view: PartitionView, end: int) -> Iterator[RecordColumns]:
        """The records of ``p`` from its next offset to ``end``, as columns (control records
        only with ``--show-control``; aborted data dropped under read_committed); ``p.done``
        set when a record reaches the stop time (it and the rest are not returned)."""
        start = p.next_offset
        assert start is not None
        if start >= end:
            return
        aborted = AbortedFilter(view.aborted_txns(start)) if self.committed else None
        segments = view.segments
        for i, segment in enumerate(segments):
            nxt = segments[i + 1].base if i + 1 < len(segments) else None
            if nxt is not None and nxt <= start:
                continue
            if segment.base >= end:
                break
            try:
                records = FileRecords.open(segment.path, storage=view.storage, block_size=DEFAULT_BLOCK_SIZE)
            except FileNotFoundError:
                continue  # deleted by retention since the listing: the next segment goes on
            with records:
                position = view.seek(segment, start, records) if start > segment.base else 0
                limit = view.end_position if nxt is None else records.size_in_bytes
                for columns in self._segment(records, position, limit, start, end, aborted):
                    yield columns
                    if p.done:
                        return

    def _segment(self, records: FileRecords, position: int, limit: int, start: int, end: int,
                 aborted: AbortedFilter | None) -> Iterator[RecordColumns]:
        chunk: list[RecordBatch] = []
        size = 0
        window = records.slice(position, max(0, limit - position))
        for batch in window.batches(validate=aborted is not None):  # read_committed reads markers
            if batch.last_offset < start:
                if aborted is not None:
                    aborted.drops(batch)
                continue
            if batch.base_offset >= end:
                break
            contiguous = not chunk or chunk[-1].position + chunk[-1].size_in_bytes == batch.position
            if aborted is not None and aborted.drops(batch):
                contiguous = False
                keep = False
            else:
                keep = True
            if chunk and (not contiguous or size >= _CHUNK_BYTES):
                yield from self._decode(records, chunk, start, end)
                chunk, size = [], 0
            if keep:
                chunk.append(batch)
                size += batch.size_in_bytes
            if batch.last_offset >= end - 1:
                break
        if chunk:
            yield from self._decode(records, chunk, start, end)

    def _decode(self, records: FileRecords, chunk: list[RecordBatch], start: int, end: int) -> Iterator[RecordColumns]:
        """A run of consecutive batches read with one read and decoded as one buffer (CRCs
        checked); on any error decoded batch by batch, which raises the exact error (file,
        position)."""
        first, last = chunk[0], chunk[-1]
        assert first.position is not None and last.position is not None
        at, stop = first.position, last.position + last.size_in_bytes
        columns = None
        data = records.read(at, stop - at)
        if self.progress is not None:
            self.progress(stop - at)
        if len(data) == stop - at:
            try:
                columns = decode_columns(MemoryRecords(data, max_batch_size=max(stop - at, 1)),
                                         include_control=self.show_control)
            except KafkalogError:
                columns = None
            expected = sum(b.count for b in chunk if b.magic >= MAGIC_V2 and (self.show_control or not b.is_control))
            if columns is not None and all(b.magic >= MAGIC_V2 for b in chunk) and len(columns) != expected:
                columns = None  # the file changed under the read: go batch by batch
        if columns is None:
            columns = decode_columns(chunk, include_control=self.show_control)
        offsets = columns.offset
        n = len(columns)
        if n and (offsets[0] < start or offsets[n - 1] >= end):
            columns = columns.slice(int(offsets.searchsorted(start)), int(offsets.searchsorted(end)))
        yield columns


# -- the command -----------------------------------------------------------------------------------


def _decoders(a: argparse.Namespace, root: Location) -> tuple[Decode, Decode, bool, bool]:
    """The ``-s`` decoders of keys and values (None: bytes as they are), and for each whether
    it is one of kcat's pack formats (``-s key=i``), which kcat leaves out of ``-J``. Formats
    are :mod:`kafkalog.schema_registry`'s, with the schemas from ``-r``, else the ``_schemas-0``
    partition of the log directory read (needed by avro, protobuf and registry; json uses it
    when there).

    Raises:
        KcatFormatError: a pack format kcat refuses.
        SchemaError: the schemas cannot be read.
    """
    wanted: dict[str, str] = {}
    for spec in a.schema or ():
        side, _, fmt = spec.partition("=") if spec.startswith(("key=", "value=")) else ("", "", spec)
        for s in ((side,) if side else ("key", "value")):
            wanted[s] = fmt
    packs = {side: fmt for side, fmt in wanted.items() if fmt.lower() not in FORMATS}
    for side, fmt in packs.items():
        check_pack(side, fmt)
    store = None
    needs = {f.lower() for side, f in wanted.items() if side not in packs and f.lower() not in ("string", "bytes")}
    if needs:
        try:
            store = open_schema_store(a.schemas if a.schemas is not None else str(root))
        except SchemaError:
            if a.schemas is not None or needs - {"json"}:
                raise  # plain JSON needs no schemas; the others do
    out: dict[str, Decode] = {}
    for side, fmt in wanted.items():
        if side in packs:
            out[side] = functools.partial(unpack, fmt, what=side)
        else:
            out[side] = make_decoder(fmt.lower(), store).decode
    return out.get("key"), out.get("value"), "key" in packs, "value" in packs


def _write_bytes(out: IO[str]) -> Callable[[bytes], None]:
    """A function writing bytes to the command's stdout (its buffer; a text-only stream gets
    them decoded with surrogate escapes)."""
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        out.flush()
        return buffer.write
    return lambda data: out.write(data.decode("utf-8", "surrogateescape"))


def run_consume(tool: _Tool, parser: argparse.ArgumentParser) -> None:
    """``kafkalog consume``: parse kcat's options, read, print (see the module docstring)."""
    a = tool.args
    try:
        delim = parse_delim(os.fsencode(a.delimiter))
        key_delim = parse_delim(os.fsencode(a.key_delimiter)) if a.key_delimiter is not None else None
        fmt_text = os.fsencode(a.format) if a.format is not None else (delim if a.json else default_format(delim, key_delim))
        fmt = parse_format(fmt_text)
    except KcatFormatError as e:
        parser.error(str(e))
    if a.poll_interval < 1:
        parser.error("--poll-interval must be at least 1 ms")
    start, stop_ms = parse_offset_args(a.offset)
    if start.kind == _STORED and a.group is None:
        parser.error("-o stored needs -G GROUP: the group whose committed offsets to start at")
    root, parts = discover(a.path, a.topic, a.partition)
    if not parts and not a.follow:  # (--follow waits for them to be created)
        wanted = f" matching {', '.join(a.topic)}" if a.topic else ""
        raise KafkalogError(f"no partition{wanted}{' ' + str(a.partition) if a.partition else ''} to read",
                            file=str(root))
    try:
        key_decoder, value_decoder, key_packed, value_packed = _decoders(a, root)
    except KcatFormatError as e:
        parser.error(str(e))
    if a.json:  # kcat's -J prints pack-formatted keys and values as their bytes
        key_decoder = None if key_packed else key_decoder
        value_decoder = None if value_packed else value_decoder
    output = KcatOutput(fmt, json_envelope=a.json, null_str=b"NULL" if a.null else None,
                        key_decoder=key_decoder, value_decoder=value_decoder)
    stored: dict[tuple[str, int], int] = {}
    if start.kind == _STORED:
        if root.is_remote:
            parser.error("-o stored reads __consumer_offsets from a local log directory")
        from ._consumer_offsets import committed_offsets

        stored = {(t, p): c.offset for (g, t, p), c in committed_offsets(str(root), group=a.group).items()}
    write = _write_bytes(tool.out)
    errors = [0]

    def warn(message: str) -> None:
        tool.err.write(f"kafkalog consume: {message}\n")
        tool.err.flush()

    bar = None
    if not a.follow and _stdout_is_not_tty(tool.out):
        total = sum(size for p in parts for name, size in p.directory.files().items() if name.endswith(".log"))
        bar = tool.progress(total, "consume")
    reader = _Reader(committed=a.isolation == "read_committed", show_control=a.show_control, progress=bar)
    count = [0]

    def until_stop(p: _Partition, columns: RecordColumns) -> RecordColumns:
        """kcat's e@: the partition stops at its first record at or after the stop time."""
        if stop_ms is not None and len(columns):
            reached = (columns.timestamp >= stop_ms).nonzero()[0]
            if len(reached):
                p.done = True
                return columns.slice(0, int(reached[0]))
        return columns

    def emit(p: _Partition, columns: RecordColumns) -> None:
        last = a.count > 0 and count[0] + len(columns) >= a.count  # kcat's -c: records over all partitions
        if last:
            columns = columns.slice(0, a.count - count[0])
        data, failures = output.render_columns(p.topic, p.partition, columns)
        write(data)
        report(failures)
        count[0] += len(columns)
        if last:
            raise _Stop

    def report(failures: list[tuple[int, str]]) -> None:
        for _, message in failures:
            errors[0] += 1
            tool.err.write(f"% ERROR: {message}\n")

    def flush_out() -> None:
        flush = getattr(getattr(tool.out, "buffer", tool.out), "flush", None)
        if flush is not None:
            flush()

    def chunks(p: _Partition) -> Iterator[RecordColumns]:
        """The partition's records from its next offset to its end, as columns (e@ applied);
        its next offset follows what is yielded."""
        view = reader.view(p)
        if p.next_offset is None:
            p.next_offset = reader.resolve(p, view, start, stored, warn)
        elif p.next_offset < view.log_start_offset:
            warn(f"{p.topic} [{p.partition}]: offsets {p.next_offset}..{view.log_start_offset - 1} were deleted "
                 f"(retention) before they were read; going on at {view.log_start_offset}")
            p.next_offset = view.log_start_offset
        end = reader.end_offset(view)
        try:
            for columns in reader.read(p, view, end):
                columns = until_stop(p, columns)
                if len(columns):
                    yield columns
                if p.done:
                    return
        except FileNotFoundError:
            if not a.follow:
                raise
            return  # retention deleted a segment while it was read: the next poll goes on
        p.next_offset = max(p.next_offset, end)

    def one_pass(parts: list[_Partition]) -> None:
        """Every partition once, one after another (or merged by timestamp)."""
        live = [p for p in parts if not p.done]
        if a.order == "timestamp":
            merge(live)
        else:
            for p in live:
                for columns in chunks(p):
                    emit(p, columns)
                    p.next_offset = int(columns.offset[-1]) + 1
        flush_out()

    def merge(live: list[_Partition]) -> None:
        """``--order timestamp``: at each step the partitions' next record with the smallest
        timestamp (the first partition on a tie); each partition keeps its offset order."""
        heap: list[tuple[int, int, int]] = []
        state: dict[int, list] = {}

        def load(i: int, it: Iterator[RecordColumns]) -> None:
            for columns in it:
                data, bounds, failures = output.render_records(live[i].topic, live[i].partition, columns)
                report(failures)
                state[i] = [it, memoryview(data), list(bounds), columns.timestamp.tolist(), columns.offset.tolist(), 0]
                heapq.heappush(heap, (state[i][3][0], i, 0))
                return
            state.pop(i, None)

        for i, p in enumerate(live):
            load(i, chunks(p))
        pending: list[Any] = []
        while heap:
            _, i, k = heapq.heappop(heap)
            it, data, bounds, stamps, offsets, _ = state[i]
            pending.append(data[bounds[k]:bounds[k + 1]])
            live[i].next_offset = offsets[k] + 1
            count[0] += 1
            if len(pending) >= 4096:
                write(b"".join(pending))
                pending.clear()
            if a.count > 0 and count[0] >= a.count:
                write(b"".join(pending))
                raise _Stop
            if k + 1 < len(stamps):
                heapq.heappush(heap, (stamps[k + 1], i, k + 1))
            else:
                load(i, it)
        write(b"".join(pending))

    try:
        one_pass(parts)
        if a.follow:
            _follow(a, parts, one_pass, stop_ms)
    except _Stop:
        pass
    except BAD_BATCH_ERRORS as e:
        tool.fail(str(e))
    except KeyboardInterrupt:
        if not a.follow:
            raise
    finally:
        if bar is not None:
            bar.close()
    if errors[0]:
        tool.status = 1  # some records did not decode (each reported); the others were printed


def _stdout_is_not_tty(out: IO[str]) -> bool:
    isatty = getattr(out, "isatty", None)
    return not (callable(isatty) and isatty())


#: Set by tests to end ``--follow`` (as Ctrl-C does from a terminal).
FOLLOW_STOP = threading.Event()


def _follow(a: argparse.Namespace, parts: list[_Partition], one_pass: Callable[[list[_Partition]], None],
            stop_ms: int | None) -> None:
    """``--follow``: poll every ``--poll-interval`` ms -- new batches, segments and partitions,
    retention -- until Ctrl-C, or until every partition reached e@'s stop time."""
    known = {(p.topic, p.partition): p for p in parts}
    interval = a.poll_interval / 1000
    while not FOLLOW_STOP.wait(interval):
        if stop_ms is not None and known and all(p.done for p in known.values()):
            return
        _, found = discover(a.path, a.topic, a.partition)
        for p in found:
            if (p.topic, p.partition) not in known:
                p.next_offset = None  # a new partition: -o resolves for it too
                known[(p.topic, p.partition)] = p
            else:
                known[(p.topic, p.partition)].directory = p.directory  # a fresh listing
        one_pass(sorted(known.values(), key=lambda p: (p.topic, p.partition)))
