"""``kafkalog compact``: LogCleaner.clean over a partition directory (or each of a log directory)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import NamedTuple

from .. import CleanerStats, Log, LogCleaner, LogConfig
from ..cleaner_manager import LogToClean, cleanable_offsets
from ..cleaner_stats import REASONS, CleanerProgress
from ..log_loader import LoadedLog
from ._commands import _cli_properties, _config_from
from ._progress import _ProgressBar
from ._tool import _now_ms, _table, _Tool, _ts
from ._topic_config import NEVER_COMPACTED, SettingsReader, TopicSettings

# ------------------------------------------------------------------------------------------------
# compact: LogCleaner.clean over a partition directory (or each of a log directory)


class _CleanerBars:
    """Progress bars for a cleaning: one per phase of each pass (``compact map``, then
    ``compact clean``), fed the cleaner's :class:`CleanerProgress` (cumulative byte counts)."""

    def __init__(self, tool: _Tool) -> None:
        self._tool = tool
        self._bar: _ProgressBar | None = None
        self._phase: tuple[str, int] | None = None
        self._done = 0

    def __call__(self, p: CleanerProgress) -> None:
        if (p.phase, p.total) != self._phase or p.done < self._done:  # a new phase or pass
            self.close()
            self._bar = self._tool.progress(p.total, f"compact {p.log} {p.phase}")
            self._phase, self._done = (p.phase, p.total), 0
        assert self._bar is not None
        self._bar(p.done - self._done)
        self._done = p.done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._phase, self._done = None, 0


class _LibraryWarnings(logging.Handler):
    """Collects the library's warnings (``kafkalog.*`` loggers: a rebuilt index, a corrupt
    checkpoint ignored) while it is entered, so a command reports them in its output instead of
    Python's last-resort handler printing them on stderr."""

    def __init__(self, sink: list[str] | None = None) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = [] if sink is None else sink
        self._logger = logging.getLogger("kafkalog")

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> list[str]:
        self._logger.addHandler(self)
        return self.messages

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)


def _compact_config(tool: _Tool, parser: argparse.ArgumentParser) -> LogConfig:
    """The topic settings from ``--config``, with ``cleanup.policy=compact`` implied: compacting
    is what was asked. A policy given without compact contradicts the command (a usage error)."""
    config = _config_from(tool, parser)
    given = any(item.partition("=")[0].strip() == "cleanup.policy" for item in tool.args.config or [])
    if not given:
        return config.replace(cleanup_policy=("compact",))
    if not config.compact:
        parser.error(
            f"--config cleanup.policy={','.join(config.cleanup_policy)} does not include compact: Kafka compacts only "
            "topics whose cleanup.policy is compact (or compact,delete); leave it out (compact is implied) or add compact"
        )
    return config


def _key_text(key: bytes) -> str | None:
    """A key as text when it is printable UTF-8, else None."""
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


def _key_label(key: bytes, width: int = 80) -> str:
    """A key for a text line: itself when printable UTF-8, else escaped as a bytes literal's
    body (``\\x00\\x01my-group...``); a long one keeps its start and its end."""
    if not key:
        return "(the empty key)"
    text = _key_text(key)
    if text is None:
        text = repr(key)[2:-1]
    if len(text) > width:
        head = (width - 3) * 2 // 3
        text = text[:head] + "..." + text[len(text) - (width - 3 - head) :]
    return text


def _top_keys(stats: CleanerStats, n: int) -> list[tuple[bytes, int]]:
    """The ``n`` keys with the most records removed (ties by key bytes), from ``removed_by_key``."""
    by_key = stats.removed_by_key or {}
    return sorted(by_key.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def _segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def _passes(stats: CleanerStats) -> list[int]:
    """The pass each of ``stats.segments`` belongs to (each pass rewrites from the log start, so
    a base offset that does not increase starts the next one)."""
    passes, n, previous = [], 1, None
    for s in stats.segments:
        if previous is not None and s.base_offset <= previous:
            n += 1
        passes.append(n)
        previous = s.base_offset
    return passes


def _compact_lines(stats: CleanerStats, keys: int) -> list[str]:
    """The per-segment table, the totals and the top keys of one cleaning (text output)."""
    multi = stats.rounds > 1
    head = (["pass"] if multi else []) + ["segment", "records", "kept", *REASONS, "bytes", "kept bytes"]
    rows = [head]
    for n, s in zip(_passes(stats), stats.segments):
        rows.append(
            ([str(n)] if multi else [])
            + [_segment_name(s.base_offset), str(s.records_read), str(s.records_kept)]
            + [str(s.removed.get(r, 0)) for r in REASONS]
            + [str(s.size), str(s.bytes_kept)]
        )
    rows.append(
        ([""] if multi else [])
        + ["total", str(sum(s.records_read for s in stats.segments)), str(sum(s.records_kept for s in stats.segments))]
        + [str(stats.removed.get(r, 0)) for r in REASONS]
        + [str(sum(s.size for s in stats.segments)), str(sum(s.bytes_kept for s in stats.segments))]
    )
    first_number = 2 if multi else 1
    lines = ["  " + line for line in _table(rows, set(range(first_number, len(head))))]
    removed = sum(stats.removed.values())
    verb = "would remove" if stats.dry_run else "removed"
    reasons = ", ".join(f"{stats.removed[r]} {r}" for r in REASONS if stats.removed.get(r))
    if multi:
        lines.append(
            f"  {verb} {removed} records ({reasons or 'none'}) in {stats.rounds} passes; each pass rereads the log from "
            f"its start: {stats.records_read} records ({stats.bytes_read} bytes) read, {stats.records_written} records "
            f"({stats.bytes_written} bytes) written"
        )
    else:
        # Of the records in the table: the cleaner's records_read leaves out the records of
        # batches it drops whole (aborted transactions), which the table counts.
        in_table = sum(s.records_read for s in stats.segments)
        lines.append(
            f"  {verb} {removed} of {in_table} records ({reasons or 'none'}); "
            f"{stats.bytes_read - stats.bytes_written} of {stats.bytes_read} bytes"
        )
    if keys and stats.removed_by_key is not None:
        top = _top_keys(stats, keys)
        total = len(stats.removed_by_key)
        if not top:
            lines.append("  records removed per key: none")
        else:
            lines.append(f"  records removed per key (top {len(top)} of {total} key{'s' * (total != 1)}):")
            width = max(len(str(c)) for _, c in top)
            lines.extend(f"    {c:>{width}}  {_key_label(k)}" for k, c in top)
    return lines


def _run_compact(tool: _Tool, parser: argparse.ArgumentParser) -> None:
    a = tool.args
    if a.roll and a.dry_run:
        parser.error("--roll changes the log (it starts a new active segment); it cannot be used with --dry-run")
    _compact_config(tool, parser)  # --config itself checked up front (a usage error)
    cli = _cli_properties(tool, parser)
    now = _now_ms(a.now)

    # The topic's recorded settings (KRaft ConfigRecords, the internal topics' creation
    # settings), then compaction itself, then --config, as retention reads them. The guard that
    # keeps retention off compacted topics does not apply: compaction deletes nothing by age
    # or size, so --config's policy stands as given.
    settings_of = SettingsReader(cli, a.metadata_log, implied=_COMPACT_IMPLIED, allow_compacted=True)

    def run() -> None:
        for directory in tool.writable_partitions(a.path, topic_rules=NEVER_COMPACTED):
            tool.guarded(lambda directory=directory: _compact_one(tool, directory, settings_of(directory), now))

    tool.guarded(run)


#: What the command itself implies: compacting is what was asked.
_COMPACT_IMPLIED = {"cleanup.policy": ("compact", "the compact command")}


class _Compaction(NamedTuple):
    """One partition's compaction, as the reports need it: the log before cleaning (its load,
    offsets and dirty section), the pass's statistics and the checkpoint after it."""

    pending: list[str]
    loaded: LoadedLog
    start: int
    end: int
    segments: int
    active: int
    lso: int
    ltc: LogToClean
    stats: CleanerStats | None
    checkpoint: int | None
    warnings: list[str]

    @property
    def complete(self) -> bool:
        """The pass reached the first uncleanable offset (the offset map did not fill first)."""
        return self.stats is None or self.stats.end_offset >= self.ltc.first_uncleanable_offset


def _compact_one(tool: _Tool, directory: Path, settings: TopicSettings, now: int) -> None:
    done = _compact(tool, directory, settings.config, now)
    if tool.args.json:
        _report_json(tool, directory, settings, now, done)
    else:
        _report_text(tool, directory, settings.config, now, done)


def _compact(tool: _Tool, directory: Path, config: LogConfig, now: int) -> _Compaction:
    """Open the partition (read-only for a dry run) and run one cleaning pass over it."""
    a = tool.args
    bars = _CleanerBars(tool)
    cleaner = LogCleaner(dedupe_buffer_size=a.dedupe_buffer_size, clock=lambda: now, progress=bars)
    with _LibraryWarnings() as warnings:
        # The lock, and recovery if unclean, as a broker's load; a dry run recovers in memory
        # and changes nothing on disk (it lists what the load would change instead).
        log = Log.open(directory, config, read_only=a.dry_run)
    try:
        pending = log.pending_changes
        loaded = log.load_stats
        if a.roll and log.active_segment.size > 0:
            log.roll()
        first_dirty, uncleanable, _ = cleanable_offsets(log, log.cleaner_checkpoint, now)
        ltc = LogToClean.of(log, first_dirty, uncleanable)
        start, end, segments = log.log_start_offset, log.log_end_offset, len(log.segments)
        active, lso = log.active_segment.base_offset, log.last_stable_offset
        try:
            with _LibraryWarnings(warnings):
                stats = cleaner.clean(log, now_ms=now, dry_run=a.dry_run, count_keys=a.keys > 0)
        finally:
            bars.close()
        checkpoint = log.cleaner_checkpoint
    finally:
        with _LibraryWarnings(warnings):
            log.close()  # runs the delayed deletions of replaced segments now
    return _Compaction(pending, loaded, start, end, segments, active, lso, ltc, stats, checkpoint, warnings)


def _report_json(tool: _Tool, directory: Path, settings: TopicSettings, now: int, done: _Compaction) -> None:
    a, loaded, stats, ltc = tool.args, done.loaded, done.stats, done.ltc
    out = {
        "partition": str(directory),
        "dry_run": a.dry_run,
        "now": now,
        "log_start_offset": done.start,
        "log_end_offset": done.end,
        "first_dirty_offset": ltc.first_dirty_offset,
        "first_uncleanable_offset": ltc.first_uncleanable_offset,
        "recovery": {
            "recovered_segments": loaded.recovered_segments,
            "truncated_bytes": loaded.truncated_bytes,
            "deleted_segments": loaded.deleted_segments,
        },
        "pending_changes": done.pending,
        "settings": settings.to_dict(),
        "warnings": done.warnings,
        "cleaned": stats is not None,
        "complete": done.complete,
        "cleaner_checkpoint": done.checkpoint,
        "stats": None,
        "top_keys": None,
    }
    if stats is not None:
        d = stats.to_dict()
        d.pop("removed_by_key", None)
        out["stats"] = d
        if a.keys:
            out["top_keys"] = [
                {"key_hex": k.hex(), "key": _key_text(k), "removed": n} for k, n in _top_keys(stats, a.keys)
            ]
    tool.json(out)


def _report_text(tool: _Tool, directory: Path, config: LogConfig, now: int, done: _Compaction) -> None:
    a, loaded, stats, ltc = tool.args, done.loaded, done.stats, done.ltc
    tool.print(
        f"{directory}: log [{done.start}, {done.end}), {done.segments} segments; "
        f"cleanup.policy={','.join(config.cleanup_policy)} "
        f"delete.retention.ms={config.delete_retention_ms} min.compaction.lag.ms={config.min_compaction_lag_ms}; "
        f"now={now} ({_ts(now)})"
    )
    if a.dry_run and (loaded.recovered_segments or loaded.truncated_bytes or loaded.deleted_segments):
        tool.print(
            f"  opening would recover the log as a broker's load does (recovered in memory, nothing changed on "
            f"disk): {loaded.truncated_bytes} bytes truncated, {loaded.deleted_segments} segments deleted; "
            f"{len(done.pending)} changes to the files in all (--json lists them)"
        )
    elif loaded.recovered_segments or loaded.truncated_bytes or loaded.deleted_segments:
        tool.print(
            f"  opening recovered the log as a broker's load would (indexes rebuilt from the log): "
            f"{loaded.truncated_bytes} bytes truncated, {loaded.deleted_segments} segments deleted"
        )
    for message in done.warnings:
        tool.print(f"  warning: {message}")
    lag = " or the first segment within min.compaction.lag.ms" if config.min_compaction_lag_ms > 0 else ""
    active = done.active
    tool.print(
        f"  dirty section [{ltc.first_dirty_offset}, {ltc.first_uncleanable_offset}), {ltc.cleanable_bytes} bytes "
        f"(cleaning stops at the active segment, base offset {active}, or the last stable offset, {done.lso}{lag})"
    )
    if stats is None:
        hint = (
            "; --roll makes the active segment cleanable"
            if ltc.first_uncleanable_offset == active and active < done.end else ""
        )
        tool.print(f"  nothing to clean{hint}")
        return
    for line in _compact_lines(stats, a.keys):
        tool.print(line)
    if a.dry_run and not done.complete:
        tool.print(
            f"  the offset map ({a.dedupe_buffer_size} bytes) filled at offset {stats.end_offset}: a real run goes on in "
            f"more passes up to {ltc.first_uncleanable_offset} (a larger --dedupe-buffer-size shows them in one)"
        )
    elif not a.dry_run:
        tool.print(f"  cleaner-offset-checkpoint: {done.checkpoint}")
