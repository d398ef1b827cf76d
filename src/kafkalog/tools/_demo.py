"""``kafkalog demo``: the whole library in one run."""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from .. import (
    Compression,
    ControlRecordType,
    Log,
    LogCleaner,
    LogConfig,
    RecordBatchBuilder,
    TimestampType,
    verify_path,
)
from ..producer_state.manager import AppendOrigin
from ..errors import KafkalogError
from ._compact import _compact_lines
from ._tool import _problem_lines, _table, _Tool

# ------------------------------------------------------------------------------------------------
# demo: the whole library in one run

#: The partition the demo (and ``python -m kafkalog``) writes in its log directory.
SAMPLE_PARTITION = "sample-0"
_SAMPLE_TS = 1_700_000_000_000
_SAMPLE_NOW = _SAMPLE_TS + 3_600_000  # the demo's clock: an hour after its records
_SHARED_KEYS = (b"user-0", b"user-1")
_SAMPLE_SEGMENT_BYTES = 1200  # small, so the sample has several segments


def _sample_config() -> LogConfig:
    return LogConfig(segment_bytes=_SAMPLE_SEGMENT_BYTES, cleanup_policy=("compact",))


def _sample_codecs() -> list[tuple[int, Compression]]:
    return [(m, c) for m in (0, 1, 2) for c in Compression if not (c is Compression.ZSTD and m < 2)]


def build_sample(directory: str | os.PathLike, *, clock: Callable[[], int] | None = None) -> int:
    """Write the sample partition ``directory/sample-0`` through :class:`~kafkalog.log.Log`
    (offsets assigned, every batch validated, 1200-byte segments, ``cleanup.policy=compact``): a
    batch of five records for every (magic, codec) pair Kafka allows, then a transactional
    batch and its COMMIT marker -- 69 offsets. Two keys recur in every batch and the last
    batch deletes one of them with a tombstone, so compaction has work; the other keys are
    unique, so every format survives it. Return the batches appended.

    Raises:
        KafkalogError: ``directory/sample-0`` already holds files.
    """
    partition = Path(directory) / SAMPLE_PARTITION
    if partition.exists() and any(partition.iterdir()):
        raise KafkalogError("already holds files; the sample is written to a new partition directory", file=str(partition))
    config = _sample_config()
    batches = 0
    pairs = _sample_codecs()
    log = Log.open(partition, config, clock=clock or (lambda: _SAMPLE_NOW))
    try:
        for n, (magic, codec) in enumerate(pairs):
            builder = RecordBatchBuilder(magic, codec)
            offset = log.log_end_offset
            for i in range(5):
                key = _SHARED_KEYS[i] if i < 2 else f"v{magic}-{codec.kafka_name}-{i}".encode()
                value: bytes | None = f"value {i} of a v{magic} {codec.kafka_name} batch".encode()
                if n == len(pairs) - 1 and key == _SHARED_KEYS[1]:
                    value = None  # a tombstone: user-1 is deleted
                headers = [("source", b"kafkalog-sample")] if magic == 2 else []
                builder.append(key, value, timestamp=_SAMPLE_TS + offset + i, headers=headers)
            log.append(builder.build())
            batches += 1
        txn = RecordBatchBuilder(
            2, Compression.LZ4, producer_id=4242, producer_epoch=0, base_sequence=0,
            is_transactional=True, timestamp_type=TimestampType.CREATE_TIME,
        )  # fmt: skip
        for i in range(3):
            txn.append(b"txn-key", f"transactional {i}".encode(), timestamp=_SAMPLE_TS + log.log_end_offset + i)
        log.append(txn.build())
        marker = RecordBatchBuilder.end_transaction_marker(
            ControlRecordType.COMMIT, producer_id=4242, producer_epoch=0, coordinator_epoch=7,
            timestamp=_SAMPLE_TS + log.log_end_offset,
        )  # fmt: skip
        log.append(marker, origin=AppendOrigin.COORDINATOR)
    finally:
        log.close()
    return batches + 2


#: ``main(argv, stdout=..., stderr=...) -> status``: the command line the demo dumps with (handed
#: in by the command line itself, which dispatches to the demo).
_Main = Callable[..., int]


class _DumpBlock(NamedTuple):
    file: str
    magic: int
    lines: list[str]  # the batch line, then its record lines


def _dump_blocks(paths: Sequence[Path], main: _Main) -> tuple[dict[str, list[str]], list[_DumpBlock]]:
    """``kafkalog dump --deep-iteration --print-data-log`` of each segment, split into each
    file's header lines and one block per batch."""
    headers: dict[str, list[str]] = {}
    blocks: list[_DumpBlock] = []
    for path in paths:
        out, err = io.StringIO(), io.StringIO()
        if main(["dump", "--files", str(path), "--deep-iteration", "--print-data-log"], stdout=out, stderr=err) != 0:
            raise KafkalogError(f"kafkalog dump failed: {err.getvalue().strip()}", file=str(path))
        head: list[str] = []
        for line in out.getvalue().splitlines():
            if line.startswith("| ") and blocks and blocks[-1].file == str(path):
                blocks[-1].lines.append(line)
            elif line.startswith(("baseOffset:", "offset:")):
                found = re.search(r" magic: (\d+) ", line)
                magic = int(found[1]) if found else -1
                blocks.append(_DumpBlock(str(path), magic, [line]))
            else:
                head.append(line)
        headers[str(path)] = head
    return headers, blocks


def _dump_slice(paths: Sequence[Path], last: int, main: _Main) -> list[str]:
    """The first batch of each magic and the last ``last`` batches of the segments at
    ``paths``, as ``kafkalog dump --deep-iteration --print-data-log`` prints them (``...`` where
    batches are left out)."""
    headers, blocks = _dump_blocks(paths, main)
    chosen = {len(blocks) - i - 1 for i in range(min(last, len(blocks)))}
    for magic in sorted({b.magic for b in blocks}):
        chosen.add(next(i for i, b in enumerate(blocks) if b.magic == magic))
    lines: list[str] = []
    shown_file, previous = None, -1
    for i in sorted(chosen):
        block = blocks[i]
        if block.file != shown_file:
            lines.extend(headers[block.file])
            shown_file = block.file
        elif i != previous + 1:
            lines.append("...")
        lines.extend(block.lines)
        previous = i
    return lines


def _run_demo(tool: _Tool, main: _Main) -> None:
    """``kafkalog demo [DIR]``; ``main`` is the command line, for the dump of step 4."""
    a = tool.args

    def run() -> None:
        if a.dir is None:
            with tempfile.TemporaryDirectory(prefix="kafkalog-demo-") as tmp:
                tool.print(f"kafkalog demo in {tmp} (a temporary directory, removed at the end; kafkalog demo DIR keeps it)")
                _demo(tool, Path(tmp), main)
        else:
            log_dir = Path(a.dir)
            tool.refuse_left_alone(log_dir)
            if log_dir.exists() and not log_dir.is_dir():
                raise NotADirectoryError(20, "Not a directory", a.dir)
            log_dir.mkdir(parents=True, exist_ok=True)
            tool.print(f"kafkalog demo in {log_dir} (kept)")
            _demo(tool, log_dir, main)

    tool.guarded(run)


def _demo(tool: _Tool, log_dir: Path, main: _Main) -> None:
    """Build, summarise, compact, verify and dump the sample partition in ``log_dir``."""
    partition = log_dir / SAMPLE_PARTITION
    now = _SAMPLE_NOW
    build_sample(log_dir, clock=lambda: now)

    tool.print()
    tool.print("1. Write: every magic x codec, keyed records, a tombstone and a transaction, through Log.append")
    before = verify_path(partition, deep=True)
    p = before.partitions[0]
    tool.print(
        f"{partition}: offsets [{p.log_start_offset}, {p.log_end_offset}), {p.segments} segments, {p.size} bytes"
    )
    rows = [["segment", "offsets", "batches", "records", "tombstones", "bytes", "magics", "codecs"]]
    for s in before.segments:
        offsets = "-" if s.first_offset is None else f"{s.first_offset}..{s.last_offset}"
        rows.append([
            Path(s.path).name, offsets, str(s.batches), str(s.records), str(s.tombstones or 0), str(s.size),
            ",".join(map(str, s.magics)), ",".join(s.codecs),
        ])  # fmt: skip
    for line in _table(rows, {2, 3, 4, 5}):
        tool.print("  " + line)
    formats = "  ".join(
        f"v{m} " + ",".join(c.kafka_name for mm, c in _sample_codecs() if mm == m) for m in (0, 1, 2)
    )
    tool.print(f"  formats: {formats}; keys {', '.join(k.decode() for k in _SHARED_KEYS)} in every batch")

    tool.print()
    tool.print("2. Compact: roll the active segment, then LogCleaner.clean (as kafkalog compact --roll --keys 3)")
    config = _sample_config()
    cleaner = LogCleaner(dedupe_buffer_size=1 << 20, clock=lambda: now)
    log = Log.open(partition, config, clock=lambda: now)
    try:
        log.roll()  # Kafka never cleans the active segment
        stats = cleaner.clean(log, now_ms=now, count_keys=True)
        if stats is None:
            raise KafkalogError("the cleaner found nothing to clean in the sample", file=str(partition))
        for line in _compact_lines(stats, 3):
            tool.print(line)
        # The pass stamped the tombstone's batch with a delete horizon: now + delete.retention.ms.
        later = now + config.delete_retention_ms
        again = cleaner.clean(log, now_ms=later)
        gone = 0 if again is None else again.removed.get("tombstone", 0)
        tool.print(
            f"  {_SHARED_KEYS[1].decode()}'s tombstone stays until its delete horizon, now + delete.retention.ms "
            f"({config.delete_retention_ms} ms); a pass then (--now-ms {later}) removed {gone} tombstone{'s' * (gone != 1)}"
        )
    finally:
        log.close()

    tool.print()
    tool.print("3. Verify: kafkalog.verify_path (CRCs, offsets, indexes, snapshots, checkpoints)")
    report = verify_path(partition)
    if not report.ok:
        tool.status = 1
        for line in _problem_lines([q for q in report.problems if q.severity == "error"], str(partition)):
            tool.print("  " + line)
    tool.print(
        f"{partition}: {'OK' if report.ok else 'PROBLEMS FOUND'}: {len(report.segments)} segments, "
        f"{report.errors} errors, {report.warnings} warnings"
    )

    tool.print()
    tool.print(
        "4. Dump: kafkalog dump --files SEGMENT --deep-iteration --print-data-log (Kafka's kafka-dump-log.sh "
        "output): the first batch of each magic and the last three batches"
    )
    for line in _dump_slice([Path(s.path) for s in report.segments if s.records], 3, main):
        tool.print(line)
    tool.print()
    where = str(partition) if tool.args.dir else "PARTITION_DIR"
    tool.print(
        f"Next: kafkalog stat {where}; kafkalog verify {where}; kafkalog compact {where} --dry-run --keys 10; "
        "kafkalog dump --files SEGMENT.log (docs/cli.md)"
    )
