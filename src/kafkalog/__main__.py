"""``python -m kafkalog``: build a sample partition log with every magic and codec, or summarise
existing ``.log`` files.

    python -m kafkalog                     # write a sample partition log to a temp dir, reopen it, summarise it
    python -m kafkalog --out DIR           # ... keeping it in DIR (DIR/sample-0)
    python -m kafkalog FILE.log [...]      # summarise segments Kafka (or kafkalog) wrote
    python -m kafkalog dump --files F,...  # Kafka's kafka-dump-log.sh (kafkalog.cli)

A thin surface over the public API; the full inspector CLI grows here.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence

from . import Compression, ControlRecordType, FileRecords, KafkalogError, Log, LogConfig, RecordBatchBuilder, TimestampType, cli
from .producer_state import AppendOrigin

_PARTITION = "sample-0"


def build_sample(directory: str) -> int:
    """Write a sample partition through :class:`~kafkalog.log.Log` (offsets assigned, every
    batch validated, segments rolled at 4 KiB): a batch of every (magic, codec) pair Kafka
    allows, then a transactional batch and its COMMIT marker. Return the batches appended."""
    base_ts = 1_700_000_000_000
    batches = 0
    log = Log.open(os.path.join(directory, _PARTITION), LogConfig(segment_bytes=4096))
    try:
        for magic in (0, 1, 2):
            for codec in Compression:
                if codec is Compression.ZSTD and magic < 2:
                    continue
                builder = RecordBatchBuilder(magic, codec)
                offset = log.log_end_offset
                for i in range(5):
                    headers = [("source", b"kafkalog-sample")] if magic == 2 else []
                    builder.append(
                        f"key-{offset + i}".encode(),
                        f"value {i} of a v{magic} {codec.kafka_name} batch ".encode() * 4,
                        timestamp=base_ts + offset + i,
                        headers=headers,
                    )
                log.append(builder.build())
                batches += 1
        txn = RecordBatchBuilder(
            2, Compression.LZ4, producer_id=4242, producer_epoch=0, base_sequence=0,
            is_transactional=True, timestamp_type=TimestampType.CREATE_TIME,
        )
        for i in range(3):
            txn.append(b"txn-key", f"transactional {i}".encode(), timestamp=base_ts + log.log_end_offset + i)
        log.append(txn.build())
        marker = RecordBatchBuilder.end_transaction_marker(
            ControlRecordType.COMMIT, producer_id=4242, producer_epoch=0, coordinator_epoch=7,
            timestamp=base_ts + log.log_end_offset,
        )
        log.append(marker, origin=AppendOrigin.COORDINATOR)
    finally:
        log.close()
    return batches + 2


def summarise_partition(directory: str, out=None) -> bool:
    """Reopen the partition log in ``directory`` (recovering it if needed) and summarise each
    segment; False if anything is not clean."""
    out = out or sys.stdout
    ok = True
    log = Log.open(directory)
    try:
        print(
            f"{directory}: offsets [{log.log_start_offset}, {log.log_end_offset}), {len(log.segments)} segments, "
            f"last stable offset {log.last_stable_offset}",
            file=out,
        )
        for segment in log.segments:
            ok = summarise(segment.log.path, out) and ok
    finally:
        log.close()
    return ok


def summarise(path: str, out=None) -> bool:
    """Print one line per batch of the segment at ``path`` and a total; False if it is not clean."""
    out = out or sys.stdout
    ok = True
    records = batches = 0
    print(f"{path}", file=out)
    print(f"{'position':>9} {'offsets':>13} {'magic':>5} {'codec':>6} {'count':>5} {'size':>6} {'timestamp type':>15}  flags", file=out)
    with FileRecords.open(path) as fr:
        try:
            for batch in fr.batches(validate=True, strict=True):
                n = len(batch.records())
                records += n
                batches += 1
                flags = ",".join(
                    name for name, on in (("transactional", batch.is_transactional), ("control", batch.is_control)) if on
                )
                print(
                    f"{batch.position:>9} {f'{batch.base_offset}..{batch.last_offset}':>13} {batch.magic:>5} "
                    f"{batch.compression.kafka_name:>6} {n:>5} {batch.size_in_bytes:>6} "
                    f"{batch.timestamp_type.kafka_name:>15}  {flags}",
                    file=out,
                )
        except KafkalogError as e:
            print(f"error: {e}", file=out)
            ok = False
        print(f"{batches} batches, {records} records, {fr.size_in_bytes} bytes, all CRCs {'valid' if ok else 'NOT valid'}", file=out)
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in cli.SUBCOMMANDS:  # `kafkalog dump ...`: see kafkalog.cli
        return cli.main(argv)
    parser = argparse.ArgumentParser(prog="kafkalog", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help=".log segment files to summarise (default: build a sample)")
    parser.add_argument("--out", help="log directory to write the sample partition to (default: a temp dir)")
    args = parser.parse_args(argv)
    try:
        if args.files:
            return 0 if all([summarise(f) for f in args.files]) else 1
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            build_sample(args.out)
            return 0 if summarise_partition(os.path.join(args.out, _PARTITION)) else 1
        with tempfile.TemporaryDirectory(prefix="kafkalog-sample-") as tmp:
            build_sample(tmp)
            return 0 if summarise_partition(os.path.join(tmp, _PARTITION)) else 1
    except (KafkalogError, OSError) as e:
        print(f"kafkalog: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
