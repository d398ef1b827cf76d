"""The ``kafkalog`` command line: argument parsing and dispatch."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import IO

from .. import KafkalogError, __version__, core_name
from ..cleaner import DEFAULT_DEDUPE_BUFFER_SIZE
from ..cleaner_offset_map import OffsetMap
from ..varint import INT32_MAX
from ._commands import (
    _run_convert,
    _run_rebuild,
    _run_retention,
    _run_salvage,
    _run_stat,
    _run_verify,
)
from ._compact import _run_compact
from ._consume import add_consume_parser, getopt_values, run_consume
from ._decoders import (
    _NEW_DECODER_PACKAGE,
    _OLD_DECODER_PACKAGE,
    _SCHEMA_DECODERS,
    _SHORTHAND_DECODERS,
    _ClusterMetadataParser,
    _Datum,
    _decoder_for_class,
    _DecoderParser,
    _schema_store,
    _SchemaDecoder,
    _OffsetsParser,
    _RemoteLogMetadataParser,
    _ShareGroupStateParser,
    _TransactionLogParser,
)
from ._demo import _run_demo
from ._dump import _Dump, _Options
from ._dump_output import _JsonOutput, _TextOutput
from ._describe_groups import _run_groups
from ._jvm import _CODEC_NAMES, _DEFAULT_MAX_MESSAGE_SIZE
from ._summary import summarise
from ._tool import _Tool

#: The subcommands ``python -m kafkalog`` hands over to this package.
SUBCOMMANDS = ("dump", "verify", "salvage", "rebuild-index", "retention", "convert", "stat", "compact", "demo", "groups", "consume")
#: Every command the ``kafkalog`` program takes (``broker`` is :mod:`kafkalog.broker`'s).
_COMMANDS = (*SUBCOMMANDS, "broker", "cluster")
#: Exit statuses of the Unix convention: 128 + the signal's number.
EXIT_INTERRUPTED = 130  # SIGINT
EXIT_BROKEN_PIPE = 141  # SIGPIPE

# ------------------------------------------------------------------------------------------------
# Command line


#: The units a size option takes (case-insensitive): dd's and pv's convention, a bare letter
#: or ``KiB`` for powers of 1024, ``kB``/``MB``/``GB`` for powers of 1000.
_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kib": 1 << 10, "kb": 10**3,
    "m": 1 << 20, "mib": 1 << 20, "mb": 10**6,
    "g": 1 << 30, "gib": 1 << 30, "gb": 10**9,
}
_SIZE = re.compile(r"\s*(\d+)\s*([a-z]*)\s*", re.I)


def _size(text: str) -> int:
    """A size option's value: a whole number of bytes with an optional unit (``4096``, ``1k``,
    ``64MiB``, ``1GB``; see :data:`_SIZE_UNITS`), between 0 and Integer.MAX_VALUE (Kafka's
    sizes are Java ints). The one parser of every size option; its errors name only the value,
    as argparse shows them after the option's name."""
    m = _SIZE.fullmatch(text)
    unit = m and _SIZE_UNITS.get(m[2].lower())
    if not m or unit is None:
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r} (a whole number of bytes, optionally with a unit: k, m, g or KiB, MiB, GiB "
            "for 1024-based units; kB, MB, GB for 1000-based)"
        )
    value = int(m[1]) * unit
    if value > INT32_MAX:
        raise argparse.ArgumentTypeError(f"{text} is {value} bytes, more than the largest size, {INT32_MAX}")
    return value


def _integer(text: str) -> int:
    """A whole-number option's value (a time in epoch milliseconds, a level)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _count(text: str) -> int:
    """A count option's value: a whole number from 0 to Integer.MAX_VALUE."""
    value = _integer(text)
    if not 0 <= value <= INT32_MAX:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and {INT32_MAX}")
    return value


class _Version(argparse.Action):
    """``--version``: the package version, then which record core runs (unwrapped, unlike
    argparse's own version action, so scripts can read it line by line)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)  # type: ignore[arg-type]

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(f"kafkalog {__version__}\nrecord core: {core_name()}")
        parser.exit()


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkalog",
        description="Kafka's log tools, in Python.",
        epilog=(
            "kafkalog FILE.log ... (every argument an existing file) summarises segments batch by batch; "
            "kafkalog alone runs kafkalog demo. kafkalog COMMAND --help describes a command."
        ),
    )
    parser.add_argument("--version", action=_Version, help="show the version and the active record core, then exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    _add_dump(sub)
    _add_tool_commands(sub)
    return parser


def _add_dump(sub) -> None:
    """``kafkalog dump``'s parser: Kafka's ``kafka-dump-log.sh`` options, and kafkalog's."""
    parser = sub.add_parser(
        "dump",
        help="dump log segments, indexes and snapshots as Kafka's kafka-dump-log.sh does",
        description=(
            "This tool helps to parse a log file and dump its contents to the console, useful for "
            "debugging a seemingly corrupt log segment. Output is Kafka's DumpLogSegments' (3.8)."
        ),
    )
    parser.add_argument(
        "--files",
        action="extend",
        nargs="+",
        required=True,
        metavar="FILE1,FILE2,...",
        help="REQUIRED: the comma separated list of data and index log files to be dumped (Kafka's form; "
        "space-separated names, as a shell glob gives them, and repeating the option work too)",
    )
    parser.add_argument("--deep-iteration", action="store_true", help="decode every record, not only batch headers")
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="print the records' keys and values (implies --deep-iteration; set by any decoder option)",
    )
    parser.add_argument("--verify-index-only", action="store_true", help="verify indexes without printing their entries")
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="only run the sanity check a broker runs at startup to decide whether to rebuild an index",
    )
    parser.add_argument("--skip-record-metadata", action="store_true", help="do not print each record's metadata")
    parser.add_argument(
        "--max-message-size",
        type=_size,
        default=_DEFAULT_MAX_MESSAGE_SIZE,
        metavar="SIZE",
        help="size of the largest batch (default 5242880); also the largest batch a resync after corruption accepts",
    )
    parser.add_argument(
        "--max-bytes",
        type=_size,
        default=None,
        metavar="SIZE",
        help="read at most this many bytes of each .log file (default: all of it)",
    )
    default_class = _NEW_DECODER_PACKAGE + "StringDecoder"
    for side in ("key", "value"):
        parser.add_argument(
            f"--{side}-decoder-class",
            nargs="?",
            const=default_class,
            metavar="CLASS",
            help=f"Kafka's decoder class for {side}s: (org.apache.kafka.tools.api. or kafka.serializer.)"
            "StringDecoder, IntegerDecoder, LongDecoder or DefaultDecoder (shown as hex)",
        )
        parser.add_argument(
            f"--{side}-decoder",
            choices=sorted([*_SHORTHAND_DECODERS, *_SCHEMA_DECODERS]),
            help=f"kafkalog's shorthand for the {side} decoder (implies --print-data-log); avro, protobuf and "
            "registry (by the registry's schema type) decode Schema Registry's wire format with the schemas "
            "of --schema-registry, printed as JSON",
        )
    parser.add_argument(
        "--schema-registry",
        metavar="DIR|URL",
        help="the schemas for --key-decoder/--value-decoder avro|protobuf|registry: a _schemas partition "
        "directory, a log directory holding _schemas-0, or a Schema Registry URL (default: the _schemas-0 "
        "partition beside the first file's partition)",
    )
    parser.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="parse records as __consumer_offsets offset commits and group metadata",
    )
    parser.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="parse records as __transaction_state transaction metadata",
    )
    parser.add_argument(
        "--cluster-metadata-decoder",
        action="store_true",
        help="parse records as KRaft metadata records (__cluster_metadata logs and KRaft snapshots)",
    )
    parser.add_argument(
        "--remote-log-metadata-decoder",
        action="store_true",
        help="parse records as __remote_log_metadata records of tiered storage's topic-based metadata manager",
    )
    parser.add_argument(
        "--share-group-state-decoder",
        action="store_true",
        help="parse records as __share_group_state share group state records",
    )
    parser.add_argument(
        "--json", action="store_true", help="write JSON Lines (documented in docs/cli.md) instead of Kafka's text"
    )
    parser.set_defaults(_parser=parser)


def _options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> _Options:
    deprecations: list[tuple[str, str]] = []
    decoders: dict[str, Callable[[bytes], _Datum] | None] = {}
    files = [f for group in args.files for f in group.split(",") if f]
    if not files:
        parser.error("--files names no file")
    store = None
    # Kafka builds the value decoder first, then the key decoder (deprecation notes follow suit).
    for side in ("value", "key"):
        class_name = getattr(args, f"{side}_decoder_class")
        shorthand = getattr(args, f"{side}_decoder")
        if class_name is not None and shorthand is not None:
            parser.error(f"--{side}-decoder-class and --{side}-decoder cannot be used together")
        if shorthand in _SCHEMA_DECODERS:
            try:
                store = store or _schema_store(args.schema_registry, files)
            except KafkalogError as e:
                parser.error(f"--{side}-decoder {shorthand}: {e}")
            decoders[side] = _SchemaDecoder(shorthand, store)
            continue
        if shorthand is not None:
            decoders[side] = _SHORTHAND_DECODERS[shorthand]
            continue
        class_name = class_name or _NEW_DECODER_PACKAGE + "StringDecoder"
        try:
            decoders[side] = _decoder_for_class(class_name)
        except ValueError:
            parser.error(
                f"unknown decoder class {class_name}: kafkalog knows StringDecoder, IntegerDecoder, LongDecoder and "
                f"DefaultDecoder of {_NEW_DECODER_PACKAGE.rstrip('.')} (or the deprecated kafka.serializer)"
            )
        if class_name.startswith(_OLD_DECODER_PACKAGE):
            deprecations.append((class_name, _NEW_DECODER_PACKAGE + class_name[len(_OLD_DECODER_PACKAGE) :]))
    parser_obj: object
    if args.offsets_decoder:
        parser_obj, deprecations = _OffsetsParser(), []
    elif args.transaction_log_decoder:
        parser_obj, deprecations = _TransactionLogParser(), []
    elif args.cluster_metadata_decoder:
        parser_obj, deprecations = _ClusterMetadataParser(), []
    elif args.remote_log_metadata_decoder:
        parser_obj, deprecations = _RemoteLogMetadataParser(), []
    elif args.share_group_state_decoder:
        parser_obj, deprecations = _ShareGroupStateParser(), []
    else:
        parser_obj = _DecoderParser(decoders["key"], decoders["value"])
    # Kafka: any decoder option implies --print-data-log, which implies --deep-iteration.
    decoder_options = [f"{side}_decoder{kind}" for side in ("key", "value") for kind in ("", "_class")]
    print_data = (
        args.print_data_log
        or args.offsets_decoder
        or args.transaction_log_decoder
        or args.cluster_metadata_decoder
        or args.remote_log_metadata_decoder
        or args.share_group_state_decoder
        or any(getattr(args, name) is not None for name in decoder_options)
    )
    return _Options(
        files=files,
        deep=args.deep_iteration or print_data,
        print_data=print_data,
        verify_only=args.verify_index_only,
        sanity_only=args.index_sanity_check,
        skip_metadata=args.skip_record_metadata,
        max_message_size=args.max_message_size,
        # Kafka reports trailing bytes only when --max-bytes is left at Integer.MAX_VALUE.
        max_bytes=None if args.max_bytes == INT32_MAX else args.max_bytes,
        parser=parser_obj,
        deprecations=deprecations,
    )


def _utf8(stream: IO[str]) -> tuple[IO[str], bool]:
    """``stream``, or a UTF-8 writer over its buffer when its encoding is another (Kafka writes
    UTF-8 on any sane JVM); and whether it was wrapped (and must be detached after use)."""
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    buffer = getattr(stream, "buffer", None)
    if encoding == "utf8" or buffer is None:
        return stream, False
    stream.flush()
    return io.TextIOWrapper(buffer, encoding="utf-8", errors="replace", newline="\n", write_through=True), True


def _dedupe_size(text: str) -> int:
    value = _size(text)
    slot = OffsetMap.BYTES_PER_ENTRY
    if value < 2 * slot:
        raise argparse.ArgumentTypeError(f"{text} is too small: the offset map needs room for two {slot}-byte slots")
    return value


def _add_tool_commands(sub) -> None:
    """The operator tools' subcommands (beside ``dump``), in the order ``--help`` lists them."""
    for add in (
        add_consume_parser, _add_verify, _add_salvage, _add_rebuild_index, _add_retention, _add_convert, _add_stat, _add_compact,
        _add_demo, _add_groups,
    ):
        parser = add(sub)
        parser.set_defaults(_parser=parser)
    sub.add_parser(
        "broker",
        help="serve a log directory to Kafka clients over the Kafka protocol (kafkalog broker --help)",
        add_help=False,
    )
    sub.add_parser(
        "cluster",
        help="start a local cluster: ZooKeeper and N brokers (kafkalog cluster up DIR --brokers 3)",
        add_help=False,
    )


def _add_verify(sub) -> argparse.ArgumentParser:
    """``kafkalog verify``'s parser."""
    parser = sub.add_parser(
        "verify",
        help="check log files, partition or log directories (read-only fsck)",
        description=(
            "Check every batch (CRC, framing, offsets), every index entry against the log, the time and "
            "transaction indexes, producer snapshots, checkpoint files and leftover files; read-only. Exit "
            "status 1 when an error is found."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a .log (or index) file, a partition directory or a log directory")
    parser.add_argument("--deep", action="store_true", help="also decode every record")
    parser.add_argument("--warnings", action="store_true", help="list warnings too (they are counted either way)")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors (listed, exit status 1)")
    parser.add_argument("--quiet", action="store_true", help="no segment table, only problems and the summary")
    parser.add_argument("--json", action="store_true", help="one JSON report per PATH (documented in docs/cli.md)")
    return parser


def _add_salvage(sub) -> argparse.ArgumentParser:
    """``kafkalog salvage``'s parser."""
    parser = sub.add_parser(
        "salvage",
        help="copy every valid batch out of a damaged segment",
        description=(
            "Copy the valid batches of SRC to DST, resynchronising after each corrupt region on the next batch "
            "whose offsets, size, magic and CRC agree; report the regions skipped. SRC is only read."
        ),
    )
    parser.add_argument("src", metavar="SRC", help="the damaged .log")
    parser.add_argument("dst", metavar="DST", help="the output .log, or a directory to write it into")
    parser.add_argument("--force", action="store_true", help="replace DST if it exists")
    parser.add_argument("--no-indexes", action="store_true", help="do not write .index/.timeindex/.txnindex beside DST")
    parser.add_argument("--index-interval-bytes", type=_size, default=4096, metavar="SIZE", help="index.interval.bytes of the indexes written (4096)")
    parser.add_argument("--json", action="store_true", help="a JSON report")
    return parser


def _add_rebuild_index(sub) -> argparse.ArgumentParser:
    """``kafkalog rebuild-index``'s parser."""
    parser = sub.add_parser(
        "rebuild-index",
        help="regenerate .index/.timeindex/.txnindex from the log",
        description="Rebuild the indexes of segments from their logs by Kafka's rule; the .log files are not touched.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a segment file, a partition directory or a log directory")
    parser.add_argument("--index-interval-bytes", type=_size, default=4096, metavar="SIZE", help="the topic's index.interval.bytes (4096)")
    parser.add_argument("--dry-run", action="store_true", help="only say which index files would change")
    parser.add_argument("--json", action="store_true", help="one JSON object per segment")
    return parser


def _add_retention(sub) -> argparse.ArgumentParser:
    """``kafkalog retention``'s parser."""
    parser = sub.add_parser(
        "retention",
        help="show (or apply) what retention deletes, and why",
        description=(
            "Apply Kafka's retention (log start offset, retention.bytes, retention.ms) to a partition directory "
            "(or every partition of a log directory). The topic's settings come from --config, else from the "
            "cluster's KRaft metadata log (__cluster_metadata-0 beside the partitions, or --metadata-log), else "
            "Kafka's defaults (the internal topics compacted, as Kafka creates them); the report says which."
        ),
    )
    parser.add_argument("path", metavar="PATH", help="a partition directory or a log directory")
    parser.add_argument("--dry-run", action="store_true", help="only report (read-only: nothing is opened for writing)")
    parser.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic property, e.g. retention.ms=86400000 (repeatable)")
    parser.add_argument(
        "--metadata-log", metavar="PATH",
        help="the KRaft metadata log (__cluster_metadata-0 directory) to read topic configs from",
    )
    parser.add_argument(
        "--allow-compacted", action="store_true",
        help="apply retention.ms/retention.bytes even to a topic whose cleanup.policy is compact",
    )
    parser.add_argument("--now", type=_integer, default=None, metavar="MS", help="the current time in epoch milliseconds (default: the clock)")
    parser.add_argument("--json", action="store_true", help="one JSON object per partition")
    return parser


def _add_convert(sub) -> argparse.ArgumentParser:
    """``kafkalog convert``'s parser."""
    parser = sub.add_parser(
        "convert",
        help="rewrite a segment or partition directory in another message format or codec",
        description=(
            "Rewrite SRC (a .log or a partition directory) into DST with the given magic and codec, keeping every "
            "record's offset, timestamp, key, value and headers; refuses what the target cannot hold."
        ),
    )
    parser.add_argument("src", metavar="SRC", help="a .log or a partition directory")
    parser.add_argument("dst", metavar="DST", help="the output .log or directory")
    parser.add_argument("--magic", type=_integer, choices=(0, 1, 2), default=2, help="the target message format (2)")
    parser.add_argument("--compression", choices=_CODEC_NAMES, default="none", help="the target codec (none)")
    parser.add_argument("--compression-level", type=_integer, default=None, metavar="N", help="the codec's level (its default)")
    parser.add_argument("--drop-timestamps", action="store_true", help="allow magic 0 output of records with timestamps")
    parser.add_argument("--drop-producer-state", action="store_true", help="allow v0/v1 output of idempotent producers' batches")
    parser.add_argument("--index-interval-bytes", type=_size, default=4096, metavar="SIZE", help="index.interval.bytes of the output (4096)")
    parser.add_argument("--force", action="store_true", help="replace existing output segments")
    parser.add_argument("--json", action="store_true", help="a JSON report")
    return parser


def _add_stat(sub) -> argparse.ArgumentParser:
    """``kafkalog stat``'s parser."""
    parser = sub.add_parser(
        "stat",
        help="summarise segments: offsets, times, sizes, codecs, records, tombstones, producers",
        description="Describe the segments of a file, partition directory or log directory (read-only).",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a .log file, a partition directory or a log directory")
    parser.add_argument("--shallow", action="store_true", help="read batch headers only (no tombstone count)")
    parser.add_argument("--json", action="store_true", help="one JSON object per PATH")
    return parser


def _add_compact(sub) -> argparse.ArgumentParser:
    """``kafkalog compact``'s parser."""
    parser = sub.add_parser(
        "compact",
        help="show (or do) what compaction removes, per segment, reason and key",
        description=(
            "Compact a partition directory (or every partition of a log directory) with Kafka's log cleaner: keep the "
            "latest record of each key, drop records without a key, aborted transactions' data, and tombstones and "
            "markers past their delete horizon. cleanup.policy=compact is implied; the other topic settings come from "
            "--config, else from the cluster's KRaft metadata log (__cluster_metadata-0 beside the partitions, or "
            "--metadata-log), else the internal topic defaults or Kafka's defaults; the report says which (--json). "
            "Kafka never cleans the active segment (--roll closes it first)."
        ),
    )
    parser.add_argument("path", metavar="PATH", help="a partition directory or a log directory")
    parser.add_argument(
        "--dry-run", action="store_true",
        help="decide and count everything in one pass; change nothing on disk (the log is opened read-only and "
        "recovered in memory if needed; --json lists what a real run's load would change)",
    )  # fmt: skip
    parser.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic property, e.g. delete.retention.ms=0 (repeatable)")
    parser.add_argument(
        "--now-ms", "--now", dest="now", type=_integer, default=None, metavar="MS",
        help="the cleaner's clock in epoch milliseconds, for delete horizons and compaction lags (default: the clock)",
    )  # fmt: skip
    parser.add_argument(
        "--metadata-log", metavar="PATH",
        help="the KRaft metadata log (__cluster_metadata-0 directory) to read topic configs from "
        "(default: the one beside the partitions, if any)",
    )
    parser.add_argument("--keys", type=_count, default=0, metavar="N", help="count removals per key and list the N keys with the most")
    parser.add_argument("--roll", action="store_true", help="roll the active segment first, so all of the log is cleanable")
    parser.add_argument(
        "--dedupe-buffer-size", type=_dedupe_size, default=DEFAULT_DEDUPE_BUFFER_SIZE, metavar="BYTES",
        help="the offset map's memory, 24 bytes a key (Kafka's log.cleaner.dedupe.buffer.size, 134217728)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="one JSON object per partition")
    return parser


def _add_demo(sub) -> argparse.ArgumentParser:
    """``kafkalog demo``'s parser."""
    parser = sub.add_parser(
        "demo",
        help="build a sample partition with every format and codec, compact, verify and dump it",
        description=(
            "Write a sample partition (every magic x codec, keyed records with repeats, a tombstone, a transaction) "
            "through Log, summarise it, compact it with LogCleaner, verify it and dump a slice of it."
        ),
    )
    parser.add_argument("dir", nargs="?", metavar="DIR", help="the log directory to write DIR/sample-0 in, kept (default: a temporary one, removed)")
    return parser


def _add_groups(sub) -> argparse.ArgumentParser:
    """``kafkalog groups``'s parser."""
    parser = sub.add_parser(
        "groups",
        help="committed offsets and lag per group (classic, consumer and share), read from __consumer_offsets "
             "(read-only)",
        description=(
            "Describe groups as kafka-consumer-groups.sh and kafka-share-groups.sh --describe do, offline: classic, "
            "consumer (KIP-848) and share (KIP-932) groups, the offsets committed in the __consumer_offsets "
            "partitions of DIR, the log end offsets of the partitions beside them, and the lag. Nothing is written."
        ),
    )
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="a log directory (several for a broker's JBOD directories)")
    parser.add_argument("--group", metavar="GROUP", help="only this group")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true",
                      help="each group's members (kafka-consumer-groups.sh --describe --members); --verbose adds "
                           "their assignments")
    view.add_argument("--state", action="store_true",
                      help="each group's type (classic, consumer, share), assignment strategy, state and member count")
    parser.add_argument("--verbose", action="store_true",
                        help="also the commit's leader epoch, time and metadata (with --members: the assignment)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per group and partition, or per group with --members/--state "
                             "(documented in docs/cli.md)")
    return parser


def _dispatch(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    tool = _Tool(args.command, args, out, err)
    try:
        if args.command == "verify":
            _run_verify(tool)
        elif args.command == "stat":
            _run_stat(tool)
        elif args.command == "salvage":
            _run_salvage(tool)
        elif args.command == "rebuild-index":
            _run_rebuild(tool)
        elif args.command == "retention":
            _run_retention(tool, args._parser)
        elif args.command == "convert":
            _run_convert(tool)
        elif args.command == "compact":
            _run_compact(tool, args._parser)
        elif args.command == "demo":
            _run_demo(tool, main)
        elif args.command == "groups":
            _run_groups(tool)
        elif args.command == "consume":
            tool.guarded(lambda: run_consume(tool, args._parser))
    except SystemExit as e:  # a usage error found after parsing (--config)
        return e.code if isinstance(e.code, int) else 2
    return tool.status


def _run_tool(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """Run a tool command; a usage error it finds after parsing (``--config``) goes to ``err``."""
    with contextlib.redirect_stderr(err):
        return _dispatch(args, out, err)


def _unknown_command(argv: list[str], err: IO[str]) -> int | None:
    """Exit status 2 and one line when the first argument is neither an option nor a command
    (argparse would list every choice; a near miss gets a suggestion), or an option the program
    does not take (argparse would only ask for a command); 1 when it is a path but
    not every argument an existing file (the summary mode's arguments)."""
    if argv and argv[0].startswith("-") and argv[0] != "-":
        options = ("-h", "--help", "--version")
        name = argv[0].split("=", 1)[0]
        if any(o.startswith(name) for o in options):
            return None  # argparse's (abbreviations included)
        close = difflib.get_close_matches(name, options[1:], n=1, cutoff=0.75)
        hint = f" (did you mean '{close[0]}'?)" if close else " (options go after the command: kafkalog COMMAND --help)"
        err.write(_build_parser().format_usage())
        err.write(f"kafkalog: unknown option '{argv[0]}'{hint}\n")
        return 2
    if not argv or argv[0].startswith("-") or argv[0] in _COMMANDS:
        return None
    if os.path.exists(argv[0]) or os.sep in argv[0] or argv[0].endswith(".log"):
        # A path: the summary mode (`kafkalog FILE.log ...`) with an argument that is not a file.
        missing = next((a for a in argv if not os.path.isfile(a)), argv[0])
        err.write(f"kafkalog: {missing}: not an existing file (kafkalog FILE.log ... summarises segment files)\n")
        return 1
    close = difflib.get_close_matches(argv[0], _COMMANDS, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else f" (commands: {', '.join(_COMMANDS)})"
    err.write(_build_parser().format_usage())
    err.write(f"kafkalog: unknown command '{argv[0]}'{hint}\n")
    return 2


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the reader went away (``| head``), and the interpreter's
    final flush must not complain about it."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation, AttributeError):
        pass


def main(argv: Sequence[str] | None = None, *, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Run a subcommand (``dump``, ``consume``, ``verify``, ``salvage``, ``rebuild-index``,
    ``retention``, ``convert``, ``stat``, ``compact``, ``demo``, ``groups``, ``broker``,
    ``cluster``), or summarise segment
    files (``kafkalog FILE.log ...``: every argument an existing file); return the exit status.

    Usage errors and an unknown command exit 2; Ctrl-C ends a command with one line
    (``kafkalog CMD: interrupted``) and 130, a closed stdout (``| head``) quietly with 141;
    the writing commands leave no half-written file either way.

    Args:
        argv: the arguments after the program name, starting with the subcommand.
        stdout, stderr: where to write (default: the process's streams).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if _summary_mode(argv):
        return _guarded("kafkalog", lambda out, err: _summaries(argv, out, err), stdout, stderr)
    unknown = _unknown_command(argv, stderr or sys.stderr)
    if unknown is not None:
        return unknown
    if argv and argv[0] == "broker":
        from ..broker import main as broker_main

        return broker_main(argv[1:])
    if argv and argv[0] == "cluster":
        from ._cluster_up import main as cluster_main

        return cluster_main(argv[1:])
    if argv and argv[0] == "consume":
        argv = ["consume", *getopt_values(argv[1:])]
    parser = _build_parser()
    try:
        # argparse writes usage, errors and --help to the process's streams: send them to ours.
        with contextlib.redirect_stdout(stdout or sys.stdout), contextlib.redirect_stderr(stderr or sys.stderr):
            args, extras = parser.parse_known_args(argv)
            if extras:
                _unrecognized(args._parser, extras)
            options = _options(args._parser, args) if args.command == "dump" else None
    except SystemExit as e:  # usage errors (2), --help and --version (0)
        return e.code if isinstance(e.code, int) else 2

    def run(out: IO[str], err: IO[str]) -> int:
        if options is None:
            return _run_tool(args, out, err)
        output = (_JsonOutput if args.json else _TextOutput)(out, err)
        return _Dump(options, output).run()  # type: ignore[arg-type]

    return _guarded(f"kafkalog {args.command}", run, stdout, stderr)


def _unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> None:
    """A usage error for arguments the command does not take, in the command's own usage (not
    the top level's), with the closest option of the command for each option typo.

    Raises:
        SystemExit: always (status 2), after argparse's usage and error lines.
    """
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    hints = []
    for arg in extras:
        name = arg.split("=", 1)[0]
        close = difflib.get_close_matches(name, options, n=1) if name.startswith("-") else []
        if close:
            hints.append(f"did you mean {close[0]}?" if len(extras) == 1 else f"{arg}: did you mean {close[0]}?")
    hint = f" ({'; '.join(hints)})" if hints else ""
    parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")


def _summary_mode(argv: list[str]) -> bool:
    """``kafkalog FILE ...``: every argument names an existing file (not an option or a command)."""
    return bool(argv) and argv[0] not in _COMMANDS and all(not a.startswith("-") and os.path.isfile(a) for a in argv)


def _summaries(paths: list[str], out: IO[str], err: IO[str]) -> int:
    """The summary mode: one summary per segment file; 1 when one is not clean or unreadable."""
    try:
        return 0 if all([summarise(p, out) for p in paths]) else 1
    except BrokenPipeError:
        raise  # an OSError, but the reader's going away: _guarded ends quietly
    except (KafkalogError, OSError) as e:
        err.write(f"kafkalog: {e}\n")
        return 1


def _guarded(label: str, run: Callable[[IO[str], IO[str]], int], stdout: IO[str] | None, stderr: IO[str] | None) -> int:
    """``run(out, err)`` over UTF-8 streams, ending as a Unix tool does: a closed stdout quietly
    with 141, Ctrl-C with one line (``LABEL: interrupted``) and 130."""
    out_stream, out_wrapped = _utf8(stdout or sys.stdout)
    err_stream, err_wrapped = _utf8(stderr or sys.stderr)
    try:
        status = run(out_stream, err_stream)
        out_stream.flush()  # here, not at exit, where a closed pipe could no longer be told apart
        return status
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as a process killed by SIGPIPE would.
        if stdout is None:
            _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        # Ctrl-C: the commands' writes clean up their temporary files on the way out.
        try:
            err_stream.write(f"{label}: interrupted\n")
            err_stream.flush()
        except (OSError, ValueError):
            pass
        return EXIT_INTERRUPTED
    finally:
        for stream, wrapped in ((out_stream, out_wrapped), (err_stream, err_wrapped)):
            if wrapped:
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
                stream.detach()  # type: ignore[attr-defined]  # leave the process's stream open
