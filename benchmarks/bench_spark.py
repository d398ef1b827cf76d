#!/usr/bin/env python3
"""kafkalog Spark benchmark: the columnar decoder against kafka-python and aiokafka, and Spark
reading kafkalog segments against Spark reading the same rows from Parquet.

One run measures:

  [1] DECODE: bench_columnar.py's cases (values of 100 B and 1 KiB, codecs none/lz4/zstd,
      ~16 KiB v2 batches, CRC validated by every decoder): records/s of
      decode_columns(...).to_arrow() next to kafka-python's and aiokafka's record iterators
      (and kafkalog's own Record iterator and a memcpy line). Its functions are imported, not
      copied; --skip decode leaves it out.
  [2] SPARK: --records (default 10,000,000) records of ~100-byte values (half random bytes,
      half text) and ~10-byte keys, in ~16 KiB uncompressed v2 batches, written as a kafkalog
      partition log (follower appends through Log: the bytes a broker would hold, indexes by
      Kafka's rule) in --segment-size segments (default 256 MiB); the same rows written by Spark
      to Parquet (snappy). Then, best of --repeats after a warm-up run, on a local[N] session
      (N = all cores), records/s of:
        count()                          -- kafkalog vs Parquet
        sum(crc32(value)), sum(length)   -- an aggregation over every value byte
      for the kafkalog source with CRC checks on (the default) and off, and Parquet. Beside
      them, what bounds the figures: a "floor" Python data source that serves the very same
      Arrow batches from memory (decoded once per Python worker) -- Spark's own cost of taking
      rows from any Python source -- and the kafkalog read path without Spark (planning plus
      every slice decoded to Arrow in this process, single-threaded).
      Correctness: every query's answer is compared between the two sources.

Timing: time.perf_counter around the action (collect of one row), best of --repeats, page cache
warm (the files are read once before timing). Temporary files are deleted at the end.

Run:   /tmp/kv/bin/python benchmarks/bench_spark.py [--quick] [--records 10M] [--json out.json]
Needs pyspark (and Java 17), pyarrow, and for [1] the bench extra (kafka-python, aiokafka).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import NOTES, cpu_facts, git_describe, import_kafkalog, note, parse_size, progress, table  # noqa: E402

KL, KL_IMPORT_ERROR = import_kafkalog("log", "columnar", "spark")

perf_counter = time.perf_counter


# --------------------------------------------------------------------------
# [1] decode: bench_columnar's cases
# --------------------------------------------------------------------------


def run_decode(args) -> list[dict]:
    import bench_columnar as bc

    decode_args = argparse.Namespace(
        quick=args.quick,
        size=(16 << 20) if args.quick else (64 << 20),
        peer_size=(4 << 20) if args.quick else (8 << 20),
        repeats=2 if args.quick else 5,
    )
    rows = bc.run_cases(decode_args)
    bc.report(decode_args, rows)
    for msg in bc.NOTES:
        note(f"[1] {msg}")
    return rows


def decode_summary(rows: list[dict]) -> list[list[str]]:
    out = []
    for r in rows:
        arrow = r.get("arrow", {}).get("records_per_s")
        kp = r.get("kafka-python", {}).get("records_per_s")
        aio_key = next((k for k in r if k.startswith("aiokafka")), None)
        aio = r.get(aio_key, {}).get("records_per_s") if aio_key else None
        out.append([
            f"{r['value_size']} B", r["codec"], _si(arrow), _si(kp), _si(aio),
            f"{arrow / kp:.1f}x" if arrow and kp else "-", f"{arrow / aio:.2f}x" if arrow and aio else "-",
        ])
    return out


# --------------------------------------------------------------------------
# [2] Spark
# --------------------------------------------------------------------------

WORDS = (b"kafka log segment offset broker partition topic replica leader epoch producer consumer "
         b"fetch index timestamp record batch header value key").split()
BASE_TS = 1_700_000_000_000
TARGET_BATCH = 16 * 1024


def make_value(rng: random.Random, size: int) -> bytes:
    parts, n = [rng.randbytes(size // 2)], size // 2
    while n < size:
        w = rng.choice(WORDS) + b" "
        parts.append(w)
        n += len(w)
    return b"".join(parts)[:size]


def build_log(directory: Path, records: int, segment_size: int, seed: int = 7) -> tuple[int, int]:
    """A partition log of ``records`` records; returns (bytes, segments). Distinct batches are
    built for the first 4 MiB and tiled with rewritten base offsets (outside the CRC)."""
    from kafkalog import Log, LogConfig, RecordBatchBuilder

    rng = random.Random(seed)
    per_batch = (TARGET_BATCH - 61) // (100 + 22)
    template, offset = [], 0
    while sum(map(len, template)) < (4 << 20) and offset < records:
        b = RecordBatchBuilder()
        for i in range(per_batch):
            b.append(b"user-%05d" % rng.randrange(100_000), make_value(rng, 100), timestamp=BASE_TS + offset + i)
        template.append(bytearray(b.build().buffer))
        offset += per_batch
    config = LogConfig(segment_bytes=segment_size, retention_ms=-1)
    written = 0
    with Log.open(directory, config) as log:
        base = 0
        while base < records:
            chunk = bytearray()
            for batch in template:
                if base >= records:
                    break
                n = min(per_batch, records - base)
                if n < per_batch:  # the last, partial batch: build it for real
                    b = RecordBatchBuilder(base_offset=base)
                    for i in range(n):
                        b.append(b"user-%05d" % i, make_value(rng, 100), timestamp=BASE_TS + base + i)
                    chunk += b.build().buffer
                else:
                    struct.pack_into(">q", batch, 0, base)
                    chunk += batch
                base += n
                if len(chunk) >= 1 << 20:
                    log.append(bytes(chunk), assign_offsets=False)
                    written += len(chunk)
                    chunk = bytearray()
            if chunk:
                log.append(bytes(chunk), assign_offsets=False)
                written += len(chunk)
        segments = len(log.segments)
    return written, segments


def timed(fn, repeats: int) -> tuple[float, object]:
    result = fn()  # warm-up: page cache, Python workers, JIT
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = perf_counter()
        result = fn()
        best = min(best, perf_counter() - t0)
    return best, result


def in_process_read(path: str, check_crcs: bool) -> int:
    """Plan and read every slice in this process (no Spark): the per-core bound of the read path."""
    from kafkalog.spark._arrow import _arrow_batches
    from kafkalog.spark._discovery import _discover
    from kafkalog.spark._options import _ReadOptions
    from kafkalog.spark._partition import _PartitionLog
    from kafkalog.spark._plan import _plan, _resolve_bounds

    options = _ReadOptions(path=path, check_crcs=check_crcs)
    plogs = [_PartitionLog(d, options) for d in _discover(options)]
    slices = _plan(plogs, _resolve_bounds(plogs, options), options)
    n = 0
    for s in slices:
        for batch in _arrow_batches(s, options):
            n += batch.num_rows
    return n


def floor_source():
    """A Python data source yielding the kafkalog source's Arrow batches, decoded once per Python
    worker and then served from memory: what Spark costs for any Python source of these rows."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafkalog.spark import SCHEMA_DDL
    from kafkalog.spark._arrow import _arrow_batches
    from kafkalog.spark._discovery import _discover
    from kafkalog.spark._options import _ReadOptions
    from kafkalog.spark._partition import _PartitionLog
    from kafkalog.spark._plan import _plan, _resolve_bounds

    class FloorReader(DataSourceReader):
        def __init__(self, path: str) -> None:
            self.path = path

        def partitions(self):
            options = _ReadOptions(path=self.path)
            plogs = [_PartitionLog(d, options) for d in _discover(options)]
            return [InputPartition(s) for s in _plan(plogs, _resolve_bounds(plogs, options), options)]

        def read(self, partition):
            cache = sys.__dict__.setdefault("_kafkalog_bench_floor", {})
            s = partition.value
            key = (s.path, s.start_position)
            if key not in cache:
                cache[key] = list(_arrow_batches(s, _ReadOptions(path=self.path)))
            yield from cache[key]

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kafkalog_bench_floor"

        def schema(self) -> str:
            return SCHEMA_DDL

        def reader(self, schema):
            return FloorReader(self.options["path"])

    return FloorSource


def run_spark(args) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kafkalog.spark

    work = Path(tempfile.mkdtemp(prefix="kafkalog-bench-spark-", dir=args.tmpdir))
    out: dict = {"records": args.records}
    spark = None
    try:
        logs = work / "logs"
        progress(f"[2] writing {args.records:,} records as kafkalog segments")
        t0 = perf_counter()
        size, segments = build_log(logs / "bench-0", args.records, args.segment_size)
        out.update(kafkalog_bytes=size, segments=segments, build_seconds=perf_counter() - t0)
        spark = (
            SparkSession.builder.master(f"local[{os.cpu_count()}]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", args.driver_memory)
            .config("spark.sql.shuffle.partitions", str(os.cpu_count()))
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        kafkalog.spark.register(spark)
        spark.dataSource.register(floor_source())
        out["spark"] = spark.version
        kl = spark.read.format("kafkalog").load(str(logs))
        progress("[2] writing the same rows to Parquet with Spark")
        t0 = perf_counter()
        kl.write.parquet(str(work / "parquet"))
        out["parquet_write_seconds"] = perf_counter() - t0
        out["parquet_bytes"] = sum(p.stat().st_size for p in (work / "parquet").glob("*.parquet"))

        def sources():
            return {
                "kafkalog": lambda: spark.read.format("kafkalog").load(str(logs)),
                "kafkalog, checkCrcs=false": lambda: spark.read.format("kafkalog").option("checkCrcs", "false").load(str(logs)),
                "Parquet": lambda: spark.read.parquet(str(work / "parquet")),
                "floor: pre-decoded Arrow batches from a Python source": lambda: spark.read.format(
                    "kafkalog_bench_floor").load(str(logs)),
            }

        queries = {
            "count()": lambda df: df.count(),
            "sum(crc32(value)), sum(length(value))": lambda df: tuple(
                df.agg(F.sum(F.crc32("value")), F.sum(F.length("value"))).collect()[0]
            ),
        }
        results: dict = {}
        for qname, query in queries.items():
            for sname, make in sources().items():
                progress(f"[2] {qname} on {sname}")
                # A fresh DataFrame per run: what a new query would plan.
                repeats = args.repeats + (1 if sname.startswith("floor") else 0)  # the first runs fill its cache
                seconds, answer = timed(lambda: query(make()), repeats)
                results[(qname, sname)] = {"seconds": seconds, "records_per_s": args.records / seconds, "answer": answer}
            answers = {results[(qname, s)]["answer"] for s in sources()}
            if len(answers) != 1:
                note(f"[2] {qname}: the sources disagree: {answers}")
        out["results"] = {f"{q} | {s}": v for (q, s), v in results.items()}
        for check in (True, False):
            progress(f"[2] in-process read, checkCrcs={str(check).lower()}")
            seconds, n = timed(lambda: in_process_read(str(logs), check), max(1, args.repeats - 1))
            if n != args.records:
                note(f"[2] in-process read gave {n} records, expected {args.records}")
            out[f"in_process_checkCrcs_{str(check).lower()}"] = {"seconds": seconds, "records_per_s": n / seconds}
        out["partitions"] = spark.read.format("kafkalog").load(str(logs)).rdd.getNumPartitions()
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return out


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def _si(x: float | None) -> str:
    if x is None:
        return "-"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {suf}"
    return f"{x:.3g}"


def report(args, decode: list[dict] | None, sp: dict | None) -> None:
    cpu, flags = cpu_facts()
    p = print
    p("=" * 100)
    p("kafkalog Spark benchmark" + ("  (--quick)" if args.quick else ""))
    p("=" * 100)
    p(f"CPU        : {cpu}  ({os.cpu_count()} logical cores; flags: {flags or '?'})")
    p(f"Python     : {platform.python_implementation()} {platform.python_version()}")
    p(f"kafkalog   : {git_describe(Path(getattr(KL, '__file__', '.')).resolve().parent)}")
    if decode:
        p()
        p("[1] columnar decode to Arrow vs peers, records/s, CRC checked by all (bench_columnar cases)")
        p(table(["value", "codec", "kafkalog Arrow", "kafka-python", "aiokafka", "vs kafka-python", "vs aiokafka"],
                decode_summary(decode), ["<", "<"] + [">"] * 5))
    if sp:
        p()
        p(f"[2] Spark {sp.get('spark')}, local[{os.cpu_count()}]: {sp['records']:,} records of ~100 B values; "
          f"kafkalog {sp['kafkalog_bytes'] / 1e9:.2f} GB in {sp['segments']} segments "
          f"({sp.get('partitions')} input partitions), Parquet {sp['parquet_bytes'] / 1e9:.2f} GB (snappy)")
        rows = []
        res = sp["results"]
        for q in ("count()", "sum(crc32(value)), sum(length(value))"):
            pq = res[f"{q} | Parquet"]["records_per_s"]
            for s in ("kafkalog", "kafkalog, checkCrcs=false", "Parquet", "floor: pre-decoded Arrow batches from a Python source"):
                r = res[f"{q} | {s}"]
                rows.append([q, s, f"{r['seconds']:.2f}", _si(r["records_per_s"]), f"{r['records_per_s'] / pq:.2f}x"])
        p(table(["query", "source", "best s", "records/s", "vs Parquet"], rows, ["<", "<", ">", ">", ">"],
                left_columns=2))
        for check in ("true", "false"):
            r = sp[f"in_process_checkCrcs_{check}"]
            p(f"    without Spark, one core (plan + decode every slice to Arrow), checkCrcs={check}: "
              f"{_si(r['records_per_s'])} records/s")
    if NOTES:
        p()
        p("Notes:")
        for n in NOTES:
            p(f"  - {n}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1M records, smaller decode cases, 2 repeats")
    ap.add_argument("--records", type=lambda s: parse_size(s.replace("M", "000000").replace("k", "000")), default=None,
                    help="records for [2] (default 10M; 1M with --quick)")
    ap.add_argument("--segment-size", type=parse_size, default=256 << 20, help="kafkalog segment size (256M)")
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per figure, best kept (3; 2 quick)")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--tmpdir", default=None)
    ap.add_argument("--skip", default="", help="sections to leave out: decode,spark")
    ap.add_argument("--json", metavar="OUT.json")
    args = ap.parse_args(argv)
    args.records = args.records or (1_000_000 if args.quick else 10_000_000)
    args.repeats = args.repeats or (2 if args.quick else 3)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if KL is None:
        print(f"kafkalog does not import: {KL_IMPORT_ERROR!r}", file=sys.stderr)
        return 1
    t0 = perf_counter()
    decode = None if "decode" in skip else run_decode(args)
    sp = None if "spark" in skip else run_spark(args)
    report(args, decode, sp)
    print(f"total time {perf_counter() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "decode": decode, "spark": sp, "notes": NOTES}, f, indent=2, default=str)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
