"""The operator tools' commands: verify, stat, salvage, rebuild-index, retention, convert.

Each ``_run_*`` adapts the parsed arguments to one library call and renders its report as
text or JSON (see :mod:`._tool` for the shared plumbing).
"""

from __future__ import annotations

import argparse
import os
import posixpath
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import Log, LogConfig
from ..offline_retention import plan_partition_retention
from ..errors import KafkalogError
from ..filenames import find_partition_dirs, segment_logs
from ..index_rebuild import RebuildReport, rebuild_path
from ..location import Location
from ..salvage import salvage_segment
from ..verify import MAX_PROBLEMS_PER_KIND, VerifyReport, total_log_bytes, verify_path
from ..verify import SegmentReport as VerifySegmentReport
from ._convert import convert_path
from ._jvm import _CODEC_NAMES
from ._tool import _display, _now_ms, _problem_lines, _table, _Tool, _ts
from ._topic_config import SettingsReader, TopicSettings


def _named(path: str, where: Location) -> str:
    """How a run names the path it was given: a URL normalised (as its reports name the files),
    a local path as typed."""
    return str(where) if where.is_remote or path.startswith("file://") else path


def _verify_each(tool: _Tool, label: str, deep: bool, show: Callable[[str, bool, VerifyReport], None]) -> None:
    """Verify every PATH of ``verify`` or ``stat`` (a URL read in place) with a progress bar and
    hand each report to ``show(name, is_dir, report)``: ``name`` as the run names the PATH,
    ``is_dir`` how reports name files (relative to a directory, or a file's own). An error of one
    PATH is reported (status 1) and the next goes on."""
    for path in tool.args.paths:

        def one(path: str = path) -> None:
            where = Location.of(path)  # a URL's listings serve every call below
            is_dir = where.is_dir()
            bar = tool.progress(total_log_bytes(where), label)
            try:
                report = verify_path(where, deep=deep, progress=bar)
            finally:
                bar.close()
            show(_named(path, where), is_dir, report)

        tool.guarded(one)


def _run_verify(tool: _Tool) -> None:
    a = tool.args

    def shown(path: str, is_dir: bool, report: VerifyReport) -> None:
        bad = not report.ok or (a.strict and report.warnings > 0)
        if bad:
            tool.status = 1
        if a.json:
            tool.json(report.to_dict())
            return
        if report.segments and not a.quiet:
            rows = [["segment", "batches", "records", "offsets", "bytes", "valid", "status"]]
            for s in report.segments:
                errors, warnings = s.errors, s.warnings
                status = "ok" if not errors and not warnings else ", ".join(
                    part for part in (
                        f"{errors} error{'s' * (errors != 1)}" if errors else "",
                        f"{warnings} warning{'s' * (warnings != 1)}" if warnings else "",
                    ) if part
                )
                offsets = "-" if s.first_offset is None else f"{s.first_offset}..{s.last_offset}"
                rows.append([
                    _display(s.path, path, is_dir), str(s.batches), str(s.records), offsets, str(s.size),
                    str(s.valid_bytes), status,
                ])
            for line in _table(rows, {1, 2, 4, 5}):
                tool.print(line)
        problems = [p for p in report.problems if a.warnings or p.severity == "error" or a.strict]
        if problems:
            if report.segments and not a.quiet:
                tool.print()
            for line in _problem_lines(problems, path, is_dir):
                tool.print(line)
        hidden = "" if a.warnings or a.strict or not report.warnings else " (--warnings lists them)"
        capped = f" (first {MAX_PROBLEMS_PER_KIND} of each kind listed)" if report.capped else ""
        tool.print(
            f"{path}: {'OK' if not bad else 'PROBLEMS FOUND'}: {len(report.segments)} segments, "
            f"{len(report.partitions)} partitions, {report.errors} errors, {report.warnings} warnings"
            f"{capped}{hidden}"
        )

    _verify_each(tool, "verify", a.deep, shown)


def _run_stat(tool: _Tool) -> None:
    a = tool.args

    def shown(path: str, is_dir: bool, report: VerifyReport) -> None:
        if not report.segments:
            raise KafkalogError("no log segments to describe", file=path)
        if not report.ok:
            tool.fail(
                f"{path}: {report.errors} problems found; the figures cover the valid data only "
                f"(kafkalog verify {path} lists them)"
            )
        # Offsets of unrelated partitions make no one range: each partition gets its own totals
        # row, and the grand total only counts (records, bytes, ...).
        groups = _by_partition(report.segments)
        totals = _stat_totals(report.segments, not a.shallow, single_partition=len(groups) == 1)
        if a.json:
            out = report.to_dict()
            out["totals"] = totals
            if len(groups) > 1:
                out["partition_totals"] = [
                    {"partition": _display(d, path, is_dir), **_stat_totals(segs, not a.shallow)}
                    for d, segs in groups.items()
                ]
            tool.json(out)
            return
        rows = [[
            "segment", "offsets", "records", "tombstones", "batches", "bytes", "first timestamp",
            "last timestamp", "magic", "codecs", "producers",
        ]]
        for d, segments in groups.items():
            for s in segments:
                rows.append(_stat_row(
                    _display(s.path, path, is_dir), s.first_offset, s.last_offset, s.records, s.tombstones, s.batches,
                    s.size, s.min_timestamp, s.max_timestamp, s.magics, s.codecs, len(s.producer_ids),
                ))
            if len(groups) > 1:
                rows.append(_totals_row(f"{_display(d, path, is_dir)} total", _stat_totals(segments, not a.shallow)))
        rows.append(_totals_row("total", totals))
        for line in _table(rows, {2, 3, 4, 5, 10}):
            tool.print(line)
        for p in report.partitions:
            tool.print(
                f"partition {p.topic}-{p.partition}: {p.segments} segments, log start offset {p.log_start_offset}, "
                f"log end offset {p.log_end_offset}, {p.size} bytes"
            )

    _verify_each(tool, "stat", not a.shallow, shown)


def _stat_row(name, first, last, records, tombstones, batches, size, lo, hi, magics, codecs, producers) -> list[str]:
    return [
        name,
        "-" if first is None else f"{first}..{last}",
        str(records),
        "-" if tombstones is None else str(tombstones),
        str(batches),
        str(size),
        _ts(lo),
        _ts(hi),
        ",".join(map(str, magics)) or "-",
        ",".join(codecs) or "-",
        str(producers),
    ]


def _by_partition(segments: Sequence[VerifySegmentReport]) -> dict[str, list[VerifySegmentReport]]:
    """The segments grouped by the directory (partition) holding them, in report order."""
    groups: dict[str, list[VerifySegmentReport]] = {}
    for s in segments:
        groups.setdefault(posixpath.dirname(s.path), []).append(s)
    return groups


def _totals_row(name: str, totals: dict) -> list[str]:
    return _stat_row(
        name, totals["first_offset"], totals["last_offset"], totals["records"], totals["tombstones"],
        totals["batches"], totals["bytes"], totals["min_timestamp"], totals["max_timestamp"],
        tuple(totals["magics"]), tuple(totals["codecs"]), totals["producers"],
    )


def _stat_totals(segments: Sequence[VerifySegmentReport], deep: bool, *, single_partition: bool = True) -> dict:
    """The totals of ``segments``; offsets only when they are of one partition (else None)."""
    firsts = [s.first_offset for s in segments if s.first_offset is not None]
    lasts = [s.last_offset for s in segments if s.last_offset is not None]
    los = [s.min_timestamp for s in segments if s.min_timestamp is not None]
    his = [s.max_timestamp for s in segments if s.max_timestamp is not None]
    codecs = {c for s in segments for c in s.codecs}
    return {
        "segments": len(segments),
        "first_offset": min(firsts) if firsts and single_partition else None,
        "last_offset": max(lasts) if lasts and single_partition else None,
        "records": sum(s.records for s in segments),
        "tombstones": sum(s.tombstones or 0 for s in segments) if deep else None,
        "batches": sum(s.batches for s in segments),
        "bytes": sum(s.size for s in segments),
        "min_timestamp": min(los) if los else None,
        "max_timestamp": max(his) if his else None,
        "magics": sorted({m for s in segments for m in s.magics}),
        "codecs": [c for c in _CODEC_NAMES if c in codecs],
        "producers": len({p for s in segments for p in s.producer_ids}),
        "control_batches": sum(s.control_batches for s in segments),
        "transactional_batches": sum(s.transactional_batches for s in segments),
    }


def _run_salvage(tool: _Tool) -> None:
    a = tool.args

    def run() -> None:
        tool.refuse_left_alone(a.dst)  # SRC is only read: a damaged metadata log may be copied out
        size = os.path.getsize(a.src)
        bar = tool.progress(size, "salvage")
        try:
            report = salvage_segment(
                a.src, a.dst, progress=bar, write_indexes=not a.no_indexes,
                index_interval_bytes=a.index_interval_bytes, overwrite=a.force,
            )
        finally:
            bar.close()
        if a.json:
            tool.json(report.to_dict())
            return
        span = "" if report.first_offset is None else f", offsets {report.first_offset}..{report.last_offset}"
        tool.print(
            f"copied {report.kept_batches} batches ({report.kept_bytes} of {report.source_size} bytes{span}) "
            f"from {report.source} to {report.destination}"
        )
        if report.skipped:
            tool.print(f"skipped {len(report.skipped)} regions, {report.skipped_bytes} bytes:")
            for r in report.skipped:
                tool.print(f"  position {r.position}, {r.length} bytes: {r.reason}")
        else:
            tool.print("nothing skipped: every byte of the source is a valid batch")
        if report.repaired:
            tool.print(f"repaired {len(report.repaired)} batches (their offset field is outside the CRC):")
            for r in report.repaired:
                tool.print(f"  position {r.position}: offset {r.stored_offset} written as {r.offset}")
        if report.indexes is not None:
            i = report.indexes
            tool.print(
                f"indexes written: {i.offset_entries} offset entries, {i.time_entries} time entries, "
                f"{i.aborted_txns} aborted transactions"
            )

    tool.guarded(run)


def _rebuild_line(r: RebuildReport, root: str) -> str:
    changed = (
        ("would rewrite " if r.dry_run else "rewrote ") + ", ".join(r.changed) if r.changed else "unchanged"
    )
    line = (
        f"{_display(r.path, root)}: {r.batches} batches, {r.offset_entries} offset entries, {r.time_entries} time "
        f"entries, {r.aborted_txns} aborted transactions; {changed}"
    )
    if r.stopped:
        line += (
            f"\n  warning: the indexes cover the first {r.valid_bytes} of {r.size} bytes: {r.stopped} "
            f"(Kafka's recovery would truncate the rest; kafkalog salvage copies out what is valid)"
        )
    return line


def _rebuild_targets(tool: _Tool, path: str) -> list[str | Path]:
    """What ``rebuild-index PATH`` rebuilds: PATH itself (a segment file, a partition directory,
    or a log directory none of whose partitions is left alone), else each partition of the log
    directory with segments, those left alone skipped (:meth:`_Tool.skip_left_alone`).

    Raises:
        KafkalogError: PATH is, or lies in, a directory left alone.
    """
    tool.refuse_left_alone(path)
    where = Path(path)
    if not where.is_dir() or segment_logs(where):
        return [path]
    partitions = find_partition_dirs(where)
    kept = list(tool.skip_left_alone(partitions))
    if len(kept) == len(partitions):
        return [path]  # rebuild_path walks them itself, and says when there is nothing to rebuild
    return [d for d in kept if segment_logs(d)]


def _run_rebuild(tool: _Tool) -> None:
    a = tool.args
    for path in a.paths:

        def one(path: str = path) -> None:
            targets = _rebuild_targets(tool, path)
            bar = tool.progress(sum(total_log_bytes(t) for t in targets), "rebuild-index")
            try:
                reports = [
                    r for t in targets
                    for r in rebuild_path(t, index_interval_bytes=a.index_interval_bytes, dry_run=a.dry_run, progress=bar)
                ]  # fmt: skip
            finally:
                bar.close()
            for r in reports:
                if a.json:
                    tool.json(r.to_dict())
                else:
                    tool.print(_rebuild_line(r, path))

        tool.guarded(one)


def _cli_properties(tool: _Tool, parser: argparse.ArgumentParser) -> dict[str, str]:
    """The ``--config KEY=VALUE`` properties, each checked to be a topic property kafkalog knows
    (a usage error otherwise)."""
    known = LogConfig().to_properties()
    props: dict[str, str] = {}
    for item in tool.args.config or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            parser.error(f"--config takes KEY=VALUE (a Kafka topic property), not {item!r}")
        if key not in known:
            parser.error(f"--config {key}: not a topic property kafkalog knows ({', '.join(sorted(known))})")
        props[key] = value.strip()
    return props


def _config_from(tool: _Tool, parser: argparse.ArgumentParser) -> LogConfig:
    props = _cli_properties(tool, parser)
    try:
        return LogConfig.from_properties(props)
    except KafkalogError as e:
        parser.error(f"--config: {e}")
    raise AssertionError  # pragma: no cover


def _run_retention(tool: _Tool, parser: argparse.ArgumentParser) -> None:
    a = tool.args
    _config_from(tool, parser)  # --config itself checked up front (a usage error)
    cli = _cli_properties(tool, parser)
    now = _now_ms(a.now)

    settings_of = SettingsReader(cli, a.metadata_log, allow_compacted=a.allow_compacted)

    def run() -> None:
        for directory in tool.writable_partitions(a.path):
            tool.guarded(lambda directory=directory: _retention_one(tool, directory, settings_of(directory), now))

    tool.guarded(run)


#: The settings a retention report names, with where each came from.
_RETENTION_SETTINGS = ("cleanup.policy", "retention.ms", "retention.bytes")


def _retention_one(tool: _Tool, directory: Path, settings: TopicSettings, now: int) -> None:
    a = tool.args
    config = settings.config
    offline = plan_partition_retention(directory, config, now)  # what the files say, read-only
    plan = offline.plan
    if plan.deletions:
        # What the log decides after loading it as a broker would (recovery may cut segments);
        # a dry run loads it read-only, changing nothing on disk.
        log = Log.open(directory, config, read_only=a.dry_run)
        try:
            plan = log.delete_old_segments(now_ms=now, dry_run=a.dry_run)
        finally:
            log.close()  # runs the delayed file deletions now
    doomed = {d.base_offset: d for d in plan.deletions}
    if a.json:
        tool.json({
            "partition": str(directory),
            "dryRun": a.dry_run,
            "now": now,
            "logStartOffset": offline.log_start_offset,
            "logEndOffset": offline.log_end_offset,
            "newLogStartOffset": plan.new_log_start_offset,
            "needsRoll": plan.needs_roll,
            "settings": {k: v for k, v in settings.to_dict().items() if k in _RETENTION_SETTINGS},
            "refused": settings.refused,
            "segments": [
                {
                    "file": s.path,
                    "baseOffset": s.base_offset,
                    "lastOffset": s.last_offset,
                    "size": s.size,
                    "largestTimestamp": s.largest_timestamp,
                    "delete": s.base_offset in doomed,
                    "reason": doomed[s.base_offset].reason if s.base_offset in doomed else None,
                    "detail": doomed[s.base_offset].detail if s.base_offset in doomed else None,
                }
                for s in offline.segments
            ],
        })
        return
    tool.print(
        f"{directory}: log start offset {offline.log_start_offset}, log end offset {offline.log_end_offset}, "
        f"{len(offline.segments)} segments; now={now} ({_ts(now)})"
    )
    tool.print(f"  settings: {settings.describe(_RETENTION_SETTINGS)}")
    if settings.refused:
        tool.print(f"  refused: {settings.refused}")
    verb = "would delete" if a.dry_run else "deleted"
    for s in offline.segments:
        offsets = "empty" if s.last_offset is None else f"offsets {s.base_offset}..{s.last_offset}"
        d = doomed.get(s.base_offset)
        what = f"{verb:<12}" if d else f"{'keep':<12}"
        why = f": {d.reason}: {d.detail}" if d else ""
        tool.print(f"  {what} {Path(s.path).name} ({offsets}, {s.size} bytes, largest timestamp {_ts(s.largest_timestamp)}){why}")
    if plan.deletions:
        roll = "; the log rolls a new empty segment first (every segment goes)" if plan.needs_roll else ""
        tool.print(f"  new log start offset: {plan.new_log_start_offset}{roll}")
    else:
        tool.print("  nothing to delete")


def _run_convert(tool: _Tool) -> None:
    a = tool.args

    def run() -> None:
        tool.refuse_left_alone(a.src)
        tool.refuse_left_alone(a.dst)
        bar = tool.progress(total_log_bytes(a.src), "convert")
        try:
            report = convert_path(
                a.src, a.dst, magic=a.magic, compression=a.compression, compression_level=a.compression_level,
                drop_timestamps=a.drop_timestamps, drop_producer_state=a.drop_producer_state,
                index_interval_bytes=a.index_interval_bytes, overwrite=a.force, progress=bar,
            )
        finally:
            bar.close()
        if a.json:
            tool.json(report.to_dict())
            return
        segments = f" in {len(report.segments)} segments" if report.segments else ""
        tool.print(
            f"converted {report.batches_in} batches, {report.records} records{segments} ({report.bytes_in} bytes) "
            f"to magic {report.magic} {report.compression}: {report.batches_out} batches, {report.bytes_out} bytes "
            f"in {report.destination}"
        )
        for kind, n in sorted(report.dropped.items()):
            tool.print(f"  dropped the {kind.replace('_', ' ')} of {n} batches")

    tool.guarded(run)
