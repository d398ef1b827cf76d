#!/usr/bin/env python3
"""kafkalog on object storage: the same reading engine the ``kafkalog`` Spark data source uses
(planning with the indexes, one slice per input partition, columnar decode to Arrow), reading a
partition log from local disk and from an S3 server on the loopback, in one run.

One run measures:

  [1] FULL READ: --size (default 1 GiB) of segments (--segment-size, default 128 MiB; ~16 KiB v2
      batches of ~100-byte values; indexes by Kafka's rule, written through Log) read whole:
        local disk   -- kafkalog.spark.read_arrow(<dir>), page cache warm
        S3           -- kafkalog.spark.read_arrow("s3://bench/logs", storage_options=...)
      and beside them what bounds the S3 figure: the raw GET throughput of the same server
      (every segment fetched in 16 MiB ranged GETs, nothing decoded) and the raw local read
      (every segment read in 16 MiB preads). The server is moto's standalone S3 server (a
      single Python process, started here on 127.0.0.1 on a free port, stopped at the end).
  [2] BOUNDED READ: 5% of the offsets (a window in the middle of the log) from S3: bytes fetched
      from .log objects (counted by the server, per request) against the bytes of the batches
      that hold the offsets selected, and the index bytes fetched.

Timing: time.perf_counter around the whole read, best of --repeats. Temporary files are deleted.

Run:   python benchmarks/bench_cloud.py [--size 1G] [--repeats 2] [--json out.json]
  [1b] with --spark: the same full read through Spark (local[N], the kafkalog data source,
      sum(length(value))), local disk vs S3.

Needs fsspec, s3fs, moto[server], pyarrow (and pyspark with Java for --spark).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import NOTES, cpu_facts, git_describe, import_kafkalog, parse_size, progress, table  # noqa: E402

KL, KL_IMPORT_ERROR = import_kafkalog("log", "spark")
perf_counter = time.perf_counter
_BLOCK = 16 << 20

# The server: moto's WSGI app behind a counter of the body bytes sent per object suffix;
# GET /__counters__ returns them as JSON, POST /__counters__ clears them.
_SERVER = textwrap.dedent('''
    import json, sys, threading, logging
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = DomainDispatcherApplication(create_backend_app)
    counts, lock = {}, threading.Lock()
    def counted(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/__counters__":
            if environ["REQUEST_METHOD"] == "POST":
                with lock: counts.clear()
            with lock: body = json.dumps(counts).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        suffix = path.rsplit(".", 1)[-1] if environ["REQUEST_METHOD"] == "GET" and "." in path.rsplit("/", 1)[-1] else None
        def gen():
            n = 0
            for chunk in app(environ, start_response):
                n += len(chunk)
                yield chunk
            if suffix:
                with lock:
                    c = counts.setdefault(suffix, [0, 0]); c[0] += 1; c[1] += n
        return gen()
    make_server("127.0.0.1", int(sys.argv[1]), counted, threaded=True, request_handler=MotoRequestHandler).serve_forever()
''')


class Server:
    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench")
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(self.port)], env=env)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        # the region from the environment: s3fs's mkdir would send it as a location constraint,
        # which S3 refuses for us-east-1
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        self.options = {"endpoint_url": self.endpoint, "key": "bench", "secret": "bench"}
        for _ in range(600):  # bounded: 60 s
            try:
                self.counters()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the S3 server did not start")

    def counters(self) -> dict:
        with urllib.request.urlopen(self.endpoint + "/__counters__", timeout=30) as r:
            return json.loads(r.read())

    def clear(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.endpoint + "/__counters__", method="POST"), timeout=30).read()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


def build(directory: str, size: int, segment_size: int) -> int:
    """A partition log of about ``size`` bytes; returns its record count."""
    import random

    rnd = random.Random(17)
    config = KL.LogConfig(segment_bytes=segment_size)
    n = 0
    written = 0
    with KL.Log.open(directory, config) as log:
        while written < size:
            b = KL.RecordBatchBuilder()
            for _ in range(140):  # ~16 KiB
                b.append(b"key-%06d" % (n % 100000), rnd.randbytes(50) + b"x" * 50, timestamp=1_700_000_000_000 + n)
                n += 1
            records = b.build()
            log.append(records)
            written += records.size_in_bytes
    return n


def read_all(path: str, **kwargs) -> int:
    rows = 0
    for batch in KL.spark.read_arrow(path, **kwargs):
        rows += batch.num_rows
    return rows


def best(repeats: int, fn) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        t = perf_counter()
        result = fn()
        times.append(perf_counter() - t)
    return min(times), result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G")
    ap.add_argument("--segment-size", default="128M")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--spark", action="store_true",
                    help="also time Spark (local[N]) reading both: sum(length(value)) through the data source")
    ap.add_argument("--json")
    a = ap.parse_args()
    if KL is None:
        print(f"kafkalog not importable: {KL_IMPORT_ERROR}", file=sys.stderr)
        return 1
    import s3fs

    size, segment_size = parse_size(a.size), parse_size(a.segment_size)
    cpu, _ = cpu_facts()
    print(f"kafkalog {git_describe(Path(__file__).resolve().parent)}, "
          f"core {KL.core_name()}, {os.cpu_count()} cores ({cpu}), load {os.getloadavg()[0]:.1f}")
    work = tempfile.mkdtemp(prefix="kafkalog-bench-cloud-")
    server = None
    out: dict = {}
    try:
        part = os.path.join(work, "logs", "bench-0")
        progress(f"building {size >> 20} MiB of segments ...")
        records = build(part, size, segment_size)
        logs = sorted(f for f in os.listdir(part) if f.endswith(".log"))
        total = sum(os.path.getsize(os.path.join(part, f)) for f in logs)
        progress("starting the S3 server and uploading ...")
        server = Server()
        fs = s3fs.S3FileSystem(**server.options)
        fs.mkdir("bench")
        for f in sorted(os.listdir(part)):
            fs.put_file(os.path.join(part, f), f"bench/logs/bench-0/{f}")
        url = "s3://bench/logs"
        rows = []

        def raw_local() -> int:
            n = 0
            for f in logs:
                with open(os.path.join(part, f), "rb") as fh:
                    while chunk := fh.read(_BLOCK):
                        n += len(chunk)
            return n

        def raw_s3() -> int:
            n = 0
            for f in logs:
                key = f"bench/logs/bench-0/{f}"
                length = fs.info(key)["size"]
                for start in range(0, length, _BLOCK):
                    n += len(fs.cat_file(key, start=start, end=min(length, start + _BLOCK)))
            return n

        progress("[1] full reads ...")
        raw_local()  # warm the page cache
        t_raw_local, _ = best(a.repeats, raw_local)
        t_local, n_local = best(a.repeats, lambda: read_all(os.path.join(work, "logs")))
        t_raw_s3, _ = best(a.repeats, raw_s3)
        server.clear()
        t_s3, n_s3 = best(a.repeats, lambda: read_all(url, storage_options=server.options))
        fetched_full = server.counters().get("log", [0, 0])
        assert n_local == n_s3 == records, (n_local, n_s3, records)
        mib = total / (1 << 20)
        rows.append(["raw local read (16 MiB preads)", f"{mib / t_raw_local:,.0f}", f"{t_raw_local:.2f}", ""])
        rows.append(["kafkalog read_arrow, local disk", f"{mib / t_local:,.0f}", f"{t_local:.2f}", "1.00x"])
        rows.append(["raw S3 GETs (16 MiB ranges)", f"{mib / t_raw_s3:,.0f}", f"{t_raw_s3:.2f}", ""])
        rows.append(["kafkalog read_arrow, S3", f"{mib / t_s3:,.0f}", f"{t_s3:.2f}", f"{t_local / t_s3:.2f}x"])
        print(f"\n[1] full read of {mib:,.0f} MiB ({records:,} records, {len(logs)} segments), best of {a.repeats}")
        print(table(["path", "MiB/s", "s", "vs local"], rows))
        print(f"S3 .log bytes fetched per full read: {fetched_full[1] / a.repeats / total:.3f}x the segments "
              f"({fetched_full[0] // a.repeats} requests)")

        if a.spark:
            progress("[1b] Spark ...")
            from pyspark.sql import SparkSession

            session = (SparkSession.builder.master(f"local[{os.cpu_count()}]").config("spark.ui.enabled", "false")
                       .config("spark.sql.session.timeZone", "UTC").getOrCreate())
            session.sparkContext.setLogLevel("ERROR")
            KL.spark.register(session)

            def spark_sum(path: str, **opts: str) -> int:
                r = session.read.format("kafkalog")
                for k, v in opts.items():
                    r = r.option(k, v)
                return r.load(path).selectExpr("sum(length(value)) AS n").collect()[0].n

            spark_sum(os.path.join(work, "logs"))  # warm-up (JVM, workers)
            t_spark_local, v_local = best(a.repeats, lambda: spark_sum(os.path.join(work, "logs")))
            so = json.dumps(server.options)
            t_spark_s3, v_s3 = best(a.repeats, lambda: spark_sum(url, storageOptions=so))
            session.stop()
            assert v_local == v_s3, (v_local, v_s3)
            print(f"\n[1b] Spark local[{os.cpu_count()}], sum(length(value)) over the same segments, best of {a.repeats}")
            print(table(["path", "MiB/s", "s", "vs local"], [
                ["Spark + kafkalog, local disk", f"{mib / t_spark_local:,.0f}", f"{t_spark_local:.2f}", "1.00x"],
                ["Spark + kafkalog, S3", f"{mib / t_spark_s3:,.0f}", f"{t_spark_s3:.2f}", f"{t_spark_local / t_spark_s3:.2f}x"],
            ]))
            out_spark = {"t_spark_local": t_spark_local, "t_spark_s3": t_spark_s3}
        else:
            out_spark = {}

        progress("[2] bounded read ...")
        start = records // 2
        end = start + records // 20
        server.clear()
        n_bounded = read_all(url, storage_options=server.options, start_offsets=start, end_offsets=end)
        assert n_bounded == end - start, n_bounded
        counters = server.counters()
        log_fetched = counters.get("log", [0, 0])
        index_fetched = sum(counters.get(s, [0, 0])[1] for s in ("index", "timeindex"))
        selected = 0
        for f in logs:
            with KL.FileRecords.open(os.path.join(part, f)) as fr:
                selected += sum(b.size_in_bytes for b in fr.batches() if b.last_offset >= start and b.base_offset < end)
        print(f"\n[2] bounded read: offsets [{start:,}, {end:,}) = 5% of {records:,}")
        print(table(["what", "bytes", "ratio"], [
            ["selected (batches holding the offsets)", f"{selected:,}", "1.00x"],
            [f".log bytes fetched ({log_fetched[0]} requests)", f"{log_fetched[1]:,}", f"{log_fetched[1] / selected:.3f}x"],
            ["index bytes fetched (.index, .timeindex)", f"{index_fetched:,}", ""],
        ]))
        out = {"mib": mib, "records": records, "t_raw_local": t_raw_local, "t_local": t_local, "t_raw_s3": t_raw_s3,
               "t_s3": t_s3, "ratio": t_local / t_s3, "bounded_selected": selected,
               "bounded_log_fetched": log_fetched[1], "bounded_requests": log_fetched[0],
               "bounded_index_fetched": index_fetched, "load": os.getloadavg()[0], **out_spark}
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    for n in NOTES:
        print(f"note: {n}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
