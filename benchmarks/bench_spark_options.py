#!/usr/bin/env python3
"""kafkalog Spark options benchmark: what ``includeMetadata=true`` and ``minPartitions`` cost on
the read path, measured without Spark (planning and every slice converted to the Arrow batches
the executors hand Spark, in this process, single-threaded), beside the raw hardware in the
same run.

One run measures, on --records records (default 2,000,000) of ~100-byte values in ~16 KiB
uncompressed v2 batches written as one partition log (64 MiB segments), best of --repeats:

  hardware          reading the segment files' bytes (page cache warm): the memory bandwidth
                    the read path starts from
  Spark's columns   plan + every slice to Arrow, the default schema
  + metadata        the same with includeMetadata=true (six more columns from batch headers)
  minPartitions=64  the default schema, offset ranges split into 64+ parts (more slices, each
                    seeking through the offset index)

Ratios are taken within the run (the machine may be loaded by other work: read them, not the
absolute figures). Temporary files are deleted at the end.

Run:   python benchmarks/bench_spark_options.py [--records 2M] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import cpu_facts, git_describe, parse_size, table

from kafkalog import Log, LogConfig, RecordBatchBuilder
from kafkalog.spark._arrow import _arrow_batches
from kafkalog.spark._discovery import _discover
from kafkalog.spark._options import _ReadOptions
from kafkalog.spark._partition import _PartitionLog
from kafkalog.spark._plan import _plan, _resolve_bounds


def build(directory: Path, records: int) -> None:
    per_batch = 140  # ~16 KiB of ~115-byte records
    rnd = os.urandom(1 << 16)
    with Log.open(directory, LogConfig(segment_bytes=64 << 20)) as log:
        n = 0
        while n < records:
            b = RecordBatchBuilder()
            for _ in range(min(per_batch, records - n)):
                at = (n * 37) % (len(rnd) - 50)
                b.append(f"key-{n % 1000:05d}".encode(), rnd[at:at + 50] + f"value {n:012d} ".encode() * 2,
                         timestamp=1_700_000_000_000 + n)
                n += 1
            log.append(b.build(), leader_epoch=0)


def read_all(root: Path, **options: str) -> int:
    o = _ReadOptions.parse({"path": str(root), **options})
    plogs = [_PartitionLog(d, o) for d in _discover(o)]
    rows = 0
    for s in _plan(plogs, _resolve_bounds(plogs, o), o):
        for batch in _arrow_batches(s, o):
            rows += batch.num_rows
    return rows


def raw_bytes(root: Path) -> int:
    total = 0
    for p in sorted(root.rglob("*.log")):
        with open(p, "rb") as f:
            while chunk := f.read(8 << 20):
                total += len(chunk)
    return total


def best(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--records", type=lambda s: parse_size(s.replace("M", "000000").replace("k", "000")), default=2_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="kafkalog-bench-opts-"))
    try:
        root = tmp / "logs"
        build(root / "bench-0", args.records)
        size = raw_bytes(root)  # warm the page cache
        cpu, flags = cpu_facts()
        print(f"kafkalog {git_describe(Path(__file__).resolve().parent)}; {cpu} ({flags}); {os.cpu_count()} cores; "
              f"{args.records:,} records, {size / 1e6:.0f} MB of segments; best of {args.repeats}")
        hw, _ = best(lambda: raw_bytes(root), args.repeats)
        cases = [
            ("Spark's columns", {}),
            ("+ metadata", {"includeMetadata": "true"}),
            ("minPartitions=64", {"minPartitions": "64"}),
        ]
        rows = [["hardware: read the segment bytes", f"{size / hw / 1e9:.2f} GB/s", "", ""]]
        base = None
        for name, options in cases:
            seconds, n = best(lambda options=options: read_all(root, **options), args.repeats)
            assert n == args.records, (name, n)
            rate = args.records / seconds
            base = base or rate
            rows.append([name, f"{size / seconds / 1e9:.2f} GB/s", f"{rate / 1e6:.2f} M records/s", f"{rate / base:.2f}x"])
        print(table(["read path (one thread, no Spark)", "bytes", "records", "vs Spark's columns"], rows))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
