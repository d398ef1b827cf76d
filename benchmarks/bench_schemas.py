#!/usr/bin/env python3
"""kafkalog schema-decoding benchmark: Avro values decoded by the Spark source (valueFormat=avro)
against the same values read by Spark from Parquet, in the same run.

One run:

  1. writes --records (default 1,000,000) Avro records in Schema Registry's wire format (magic
     byte, schema id, Avro binary; fastavro's schemaless writer, as the registry's serializers
     write them) with an ``orders`` schema of 6 fields (long, string, double, timestamp-millis,
     array<string>, nullable string) into a kafkalog partition log (~16 KiB v2 batches), and the
     schema into ``_schemas-0`` in the registry's record format;
  2. writes the very same values, decoded, to Parquet (snappy) with pyarrow;
  3. on a local[N] Spark session (N = all cores), times one pass over every value for:
        kafkalog valueFormat=avro  -- decoded to a struct column (count, sum(value.amount))
        kafkalog binary            -- the same rows undecoded (sum(length(value))): the read alone
        Parquet                    -- the decoded values from Parquet (count, sum(amount))
     and, without Spark, read_arrow(value_format="avro") in this process (one core).

Figures are records/s of the timed action (collect of one row), one run after a warm-up run of
the same query (page cache warm). Correctness: the sums of ``amount`` agree between the sources.

Run:   python benchmarks/bench_schemas.py [--records 1M] [--quick] [--json out.json]
Needs pyspark (and Java 17), pyarrow, fastavro (``pip install -e '.[spark,schemas]'``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import NOTES, cpu_facts, git_describe, import_kafkalog, note, parse_size, progress, table  # noqa: E402

KL, KL_IMPORT_ERROR = import_kafkalog("log", "spark", "schema_registry")

ORDER = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
SCHEMA_ID = 1
TS = 1_700_000_000_000
BATCH_BYTES = 16 * 1024


def _values(n: int):
    import datetime as dt

    utc = dt.timezone.utc
    for i in range(n):
        yield {"id": i, "customer": f"customer-{i % 1000}", "amount": (i % 10_000) / 100.0,
               "ts": dt.datetime.fromtimestamp((TS + i) / 1000, utc), "tags": ["a", "b"][: i % 3],
               "note": None if i % 2 else f"note {i}"}


def write_inputs(root: Path, n: int) -> tuple[Path, Path, float]:
    """The kafkalog log directory, the Parquet file, and the exact sum of ``amount``."""
    import fastavro
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kafkalog import Log, LogConfig, RecordBatchBuilder

    parsed = fastavro.parse_schema(ORDER)
    header = b"\x00" + SCHEMA_ID.to_bytes(4, "big")
    log_dir = root / "kafka-logs"
    rows, total = [], 0.0
    with Log.open(log_dir / "orders-0", LogConfig(retention_ms=-1, segment_bytes=256 << 20)) as log:
        builder, size = RecordBatchBuilder(), 0
        for i, value in enumerate(_values(n)):
            buf = io.BytesIO()
            buf.write(header)
            fastavro.schemaless_writer(buf, parsed, value)
            payload = buf.getvalue()
            builder.append(b"%d" % i, payload, timestamp=TS + i)
            size += len(payload) + 16
            rows.append(value)
            total += value["amount"]
            if size >= BATCH_BYTES:
                log.append(builder.build())
                builder, size = RecordBatchBuilder(), 0
        if size:
            log.append(builder.build())
    key = json.dumps({"keytype": "SCHEMA", "subject": "orders-value", "version": 1, "magic": 1}).encode()
    value = json.dumps({"subject": "orders-value", "version": 1, "id": SCHEMA_ID, "schema": json.dumps(ORDER),
                        "deleted": False}).encode()
    with Log.open(log_dir / "_schemas-0", LogConfig(retention_ms=-1)) as log:
        b = RecordBatchBuilder()
        b.append(key, value, timestamp=TS)
        log.append(b.build())
    parquet = root / "orders.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet, compression="snappy")
    return log_dir, parquet, total


def _session():
    from pyspark.sql import SparkSession

    import kafkalog.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (SparkSession.builder.master(f"local[{os.cpu_count()}]").appName("kafkalog-bench-schemas")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    kafkalog.spark.register(session)
    return session


def _timed(action) -> tuple[float, object]:
    action()  # warm-up: page cache, Python workers, the schema store
    t0 = time.perf_counter()
    result = action()
    return time.perf_counter() - t0, result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=parse_size, default=1_000_000)
    p.add_argument("--quick", action="store_true", help="100,000 records")
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args(argv)
    if KL is None:
        print(f"kafkalog does not import: {KL_IMPORT_ERROR}", file=sys.stderr)
        return 1
    n = 100_000 if args.quick else args.records
    cpu, flags = cpu_facts()
    print(f"kafkalog {git_describe(Path(__file__).parent)} | {platform.python_implementation()} "
          f"{platform.python_version()} | {cpu} ({os.cpu_count()} cores) | {n:,} records")
    root = Path(tempfile.mkdtemp(prefix="kafkalog-bench-schemas-"))
    figures: dict[str, float] = {}
    try:
        progress(f"writing {n:,} Avro records and the Parquet file ...")
        log_dir, parquet, total = write_inputs(root, n)
        from pyspark.sql import functions as F

        from kafkalog.spark import read_arrow

        spark = _session()
        def kl():  # a new reader each time: a DataFrameReader keeps the options set on it
            return spark.read.format("kafkalog").option("subscribe", "orders")

        cases = {
            "Spark: kafkalog valueFormat=avro": lambda: kl().option("valueFormat", "avro").load(str(log_dir)).agg(F.count("*"), F.sum("value.amount")).collect()[0],
            "Spark: kafkalog binary (no decoding)": lambda: kl().load(str(log_dir))
            .agg(F.count("*"), F.sum(F.length("value"))).collect()[0],
            "Spark: Parquet": lambda: spark.read.parquet(str(parquet)).agg(F.count("*"), F.sum("amount")).collect()[0],
        }
        rows = []
        for name, action in cases.items():
            progress(f"timing {name} ...")
            seconds, result = _timed(action)
            figures[name] = n / seconds
            rows.append((name, f"{seconds:.2f}", f"{n / seconds:,.0f}"))
            if "binary" not in name and abs(result[1] - total) > 1e-6 * max(1.0, abs(total)):
                note(f"{name}: sum(amount) {result[1]} != {total}")
            if result[0] != n:
                note(f"{name}: {result[0]} rows, not {n}")

        def in_process():
            count = 0
            for batch in read_arrow(log_dir, topics=["orders"], value_format="avro"):
                count += batch.num_rows
            return count, None

        progress("timing read_arrow(value_format='avro') in this process ...")
        seconds, _ = _timed(in_process)
        figures["read_arrow, one process"] = n / seconds
        rows.append(("read_arrow(value_format='avro'), one process", f"{seconds:.2f}", f"{n / seconds:,.0f}"))
        print(table(["case", "seconds", "records/s"], rows))
        if args.json:
            Path(args.json).write_text(json.dumps({"records": n, "figures": figures, "notes": NOTES}, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for msg in NOTES:
        print(f"note: {msg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
