"""The driver program of the Spark standalone cluster test (tests/spark/test_cluster.py), run
as its own process (a SparkContext per process) with the working directory the test chose.

Usage: ``python cluster_driver.py <master url> <kafkalog src dir> <relative logs path>
<JVM flags>``; prints one JSON object (the results, and the seconds since the start at which
each phase ended) as its last line. Everything is read and written under the working
directory; the executors run in the worker's work directory, elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

STARTED = time.monotonic()


def main() -> None:
    master, src_dir, relative, jvm_flags = sys.argv[1:5]
    from pyspark.sql import SparkSession

    import kafkalog.spark
    from kafkalog import Log, LogConfig, RecordBatchBuilder

    spark = (
        SparkSession.builder.master(master)
        .appName("kafkalog-cluster-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.cores.max", "2")
        .config("spark.executor.cores", "2")
        .config("spark.executor.memory", "512m")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.task.maxFailures", "1")  # the relative-path read fails at once, not 4 times
        # kafkalog must be importable by the executors' Python workers (docs/spark.md,
        # "Cluster deployment"): here the interpreter and the source tree the test runs.
        .config("spark.pyspark.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", src_dir)
        .config("spark.driver.extraJavaOptions", jvm_flags)
        .config("spark.executor.extraJavaOptions", jvm_flags)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    gateway = spark.sparkContext._gateway  # its ``proc`` is the driver JVM (pyspark's launch_gateway)
    out: dict = {"driver_cwd": os.getcwd(), "seconds": {}}

    def lap(name: str) -> None:
        out["seconds"][name] = round(time.monotonic() - STARTED, 1)

    lap("session")
    kafkalog.spark.register(spark)
    absolute = os.path.abspath(relative)

    def values(df) -> list:
        return sorted(
            [r.topic, r.partition, r.offset, None if r.value is None else bytes(r.value).hex()]
            for r in df.select("topic", "partition", "offset", "value").collect()
        )

    def read_and_verify():
        """The executors' working directory; the logs read (absolute and relative path) and
        verified. Returns the DataFrame read."""
        out["executor_cwd"] = spark.sparkContext.parallelize([0], 1).map(lambda _: os.getcwd()).first()
        lap("first task")
        df = spark.read.format("kafkalog").load(absolute)
        out["batch"] = values(df)
        lap("batch")
        try:
            out["relative"] = values(spark.read.format("kafkalog").load(relative))
        except Exception as e:  # noqa: BLE001 - reported to the test, which asserts on it
            out["relative_error"] = str(e)[:2000]
        lap("relative")
        report = kafkalog.spark.verify(spark, absolute)
        out["verify"] = [[r.path, r.ok] for r in report.select("path", "ok").collect()]
        lap("verify")
        return df

    def write(df) -> None:
        """A copy written by the cluster and read back."""
        copy = os.path.abspath("copy")
        (df.selectExpr("key", "value", "timestamp", "topic", "partition")
         .write.format("kafkalog").mode("append").save(copy))
        out["copy"] = values(spark.read.format("kafkalog").load(copy))
        lap("write")

    def stream() -> None:
        """A stream into the kafkalog sink, stopped, new data appended, restarted."""
        stream_src, sink, checkpoint = os.path.abspath("stream-src"), os.path.abspath("sink"), os.path.abspath("ckpt")

        def append(values_: list[bytes]) -> None:
            with Log.open(os.path.join(stream_src, "events-0"), LogConfig(segment_bytes=1024)) as log:
                for v in values_:
                    b = RecordBatchBuilder()
                    b.append(None, v, timestamp=1_700_000_000_000)
                    log.append(b.build())

        def run() -> None:
            query = (
                spark.readStream.format("kafkalog").option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "40").load(stream_src)
                .selectExpr("value", "'events-copy' AS topic", "partition")
                .writeStream.format("kafkalog").option("checkpointLocation", checkpoint)
                .trigger(availableNow=True).start(sink)
            )
            try:
                query.awaitTermination()
                if query.exception() is not None:
                    raise query.exception()
            finally:
                query.stop()

        append([f"first-{i}".encode() for i in range(60)])
        run()
        append([f"second-{i}".encode() for i in range(40)])
        run()
        run()  # nothing new
        lap("stream")
        out["stream"] = [bytes.fromhex(v[3]).decode() for v in sorted(values(spark.read.format("kafkalog").load(sink)),
                                                                        key=lambda v: v[2])]
        lap("sink read")

    # The reads run beside the stream, as concurrent jobs of the one SparkContext (they only read
    # the logs; the stream has its own directories): each part's Python processes on the driver
    # and on the executor start while the other part waits. The writes stay on this thread: Spark
    # finds a Python data source for ``write`` and ``writeStream`` through the calling thread's
    # active session, which only the thread that made the session has (reads are handed theirs).
    errors = []
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            reading = pool.submit(read_and_verify)
            try:
                stream()
            except Exception:  # noqa: BLE001 - reported to the test, which asserts on it
                errors.append(traceback.format_exc()[-4000:])
            try:
                write(reading.result())
            except Exception:  # noqa: BLE001
                errors.append(traceback.format_exc()[-4000:])
        if errors:
            out["error"] = "\n".join(errors)
    finally:
        spark.stop()
        # The driver JVM exits when its standard input closes; waited for, so that nothing the
        # test started outlives it.
        jvm = getattr(gateway, "proc", None)
        if jvm is not None and jvm.stdin is not None:
            jvm.stdin.close()
            try:
                jvm.wait(timeout=120)
            except subprocess.TimeoutExpired:
                jvm.kill()
                jvm.wait()
        lap("stopped")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
