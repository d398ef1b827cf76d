#!/usr/bin/env python3
"""kafkalog beside Kafka's own JVM code: leader append and copying decode, on the same files, in one run.

The anchor for issue-level speed targets: Kafka 3.8's classes, timed by benchmarks/jvm/KafkaLogBench.java
(our driver, compiled by benchmarks/jvm/build.sh from Kafka's source or against a Kafka
installation's jars), run beside kafkalog on the very files this script generates:

  * ~15.5 KiB uncompressed v2 batches as a producer sends them (base offset 0), 4,000 of them
    (--batches), with 1 KiB values (15 records a batch) and with 100 B values (134 a batch).
  * APPEND, one batch per call. Kafka: UnifiedLog.analyzeAndValidateRecords' checks +
    LogValidator.validateMessagesAndAssignOffsets + LogSegment.append into a fresh segment
    (offset/time index entries every 4096 bytes); kafkalog: Log.append into a fresh log
    (segment.bytes 1 GiB: no roll, as the JVM side has one segment). Beside each, the raw
    write of the same buffers in the same process: FileChannel.write / os.write. Per-batch
    microseconds over all batches and from the 3rd batch on (the first calls of a fresh log or
    segment pay for opening indexes).
  * APPEND WITH PRODUCER IDS: the same, on files whose batches carry an idempotent producer's
    id, epoch and in-order sequences (as every idempotent or transactional client sends them).
    Kafka adds UnifiedLog.analyzeAndValidateProducerState (duplicate check, ProducerAppendInfo)
    and ProducerStateManager.update; kafkalog its producer-state checks and update.
  * COMPRESSED APPEND: 100 B values (134 a batch, half of each value random, half from a
    9-letter alphabet), each batch compressed with lz4 and with zstd (--codecs), appended one batch
    per call as above with the topic's compression.type=producer (the default: the producer's codec
    is kept, so both sides decompress to validate and rewrite only the batch header: Kafka's
    in-place assignment).
  * DECODE. Kafka: MemoryRecords iteration with every batch's CRC checked, every key and value
    copied into a byte[]; kafkalog: decode_columns(MemoryRecords(buf)) with validate=True
    (CRC-32C of every batch), keys and values copied into their columns.

The JVM runs with Kafka's broker flags (kafka-run-class.sh: -server -XX:+UseG1GC
-XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent,
kafka-server-start.sh's -Xmx1G -Xms1G) and warms up (--jvm-warmup rounds of the same work,
untimed) before timing. Every figure is the best of --rounds; kafkalog's garbage collector is off
while timing. Without a JDK or the built classes the JVM column is skipped with a note: a
benchmark, never a test.

Run:   benchmarks/jvm/build.sh --kafka-git /path/to/apache-kafka.git   (once; or --kafka-home DIR)
       python benchmarks/bench_vs_kafka.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import NOTES, cpu_facts, git_describe, import_kafkalog, note, progress, table  # noqa: E402

KL, _IMPORT_ERROR = import_kafkalog("log", "log_config", "memory_records", "memory_records_builder", "columnar.decode")
HERE = Path(__file__).resolve().parent
JVM_FLAGS = ["-server", "-Xmx1G", "-Xms1G", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
             "-Djava.awt.headless=true"]
#: (value size, records a batch): ~15.5 KiB batches.
SHAPES = ((1024, 15), (100, 134))
#: The shape of the compressed files (100 B values, 134 a batch).
COMPRESSED_SHAPE = (100, 134)


#: The idempotent producer of the producer-id files.
PRODUCER_ID, PRODUCER_EPOCH = 4242, 0


def make_file(path: Path, value_size: int, per_batch: int, batches: int, seed: int, producer: bool = False,
              codec: str = "NONE") -> int:
    """Write ``batches`` v2 batches (base offset 0, as a producer sends them), with an idempotent
    producer's id and in-order sequences when ``producer``, compressed with ``codec`` (then each
    value is half random, half from a 9-letter alphabet, so that it compresses); returns records."""
    rng = random.Random(seed)
    Builder = KL.memory_records_builder.RecordBatchBuilder
    compression = KL.Compression[codec]
    half = value_size // 2
    with open(path, "wb") as f:
        for b in range(batches):
            ids = dict(producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH, base_sequence=b * per_batch) if producer else {}
            builder = Builder(magic=2, compression=compression, base_offset=0, **ids)
            for i in range(per_batch):
                if codec == "NONE":
                    value = rng.randbytes(value_size)
                else:
                    value = bytes(rng.choices(b"abcdefgh ", k=half)) + rng.randbytes(value_size - half)
                builder.append(b"k%07d" % (b * per_batch + i), value, timestamp=1_700_000_000_000 + b)
            f.write(bytes(builder.build().buffer))
    return batches * per_batch


def frame(buf: bytes) -> list[tuple[int, int]]:
    out, pos = [], 0
    while pos + 12 <= len(buf):
        size = 12 + int.from_bytes(buf[pos + 8:pos + 12], "big")
        out.append((pos, size))
        pos += size
    return out


def per_batch(ns: list[int]) -> tuple[float, float, float]:
    """Microseconds a batch over all batches and from the 3rd on (wall clock), and the thread's
    CPU time a batch (``ns``'s last slot: the round's ``time.thread_time_ns``)."""
    cpu, ns = ns[-1], ns[:-1]
    return sum(ns) / 1e3 / len(ns), sum(ns[2:]) / 1e3 / max(1, len(ns) - 2), cpu / 1e3 / len(ns)


def best(rounds: list[list[int]]) -> tuple[float, float, float]:
    figures = [per_batch(ns) for ns in rounds]
    return min(f[0] for f in figures), min(f[1] for f in figures), min(f[2] for f in figures)


def kafkalog_append_round(buf: bytes, batches: list[tuple[int, int]], root: Path) -> list[int]:
    Log, LogConfig = KL.log.Log, KL.log_config.LogConfig
    d = root / "bench-0"
    shutil.rmtree(d, ignore_errors=True)
    log = Log.open(d, config=LogConfig(segment_bytes=1 << 30))
    items = [bytearray(buf[p:p + n]) for p, n in batches]  # fresh copies, before the clock
    ns = [0] * len(items)
    pc = time.perf_counter_ns
    append = log.append
    try:
        gc.disable()
        cpu0 = time.thread_time_ns()
        for i, item in enumerate(items):
            t0 = pc()
            append(item)
            ns[i] = pc() - t0
        ns.append(time.thread_time_ns() - cpu0)
    finally:
        gc.enable()
        log.close()
        shutil.rmtree(d, ignore_errors=True)
    return ns


def os_write_round(buf: bytes, batches: list[tuple[int, int]], root: Path) -> list[int]:
    path = root / "raw.log"
    view = memoryview(buf)
    items = [view[p:p + n] for p, n in batches]
    ns = [0] * len(items)
    pc = time.perf_counter_ns
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        cpu0 = time.thread_time_ns()
        for i, item in enumerate(items):
            t0 = pc()
            os.write(fd, item)
            ns[i] = pc() - t0
        ns.append(time.thread_time_ns() - cpu0)
    finally:
        os.close(fd)
        os.unlink(path)
    return ns


def kafkalog_decode(buf: bytes, rounds: int) -> tuple[float, int]:
    decode = KL.columnar.decode.decode_columns
    MemoryRecords = KL.memory_records.MemoryRecords
    times, n = [], 0
    for _ in range(rounds + 1):  # the first round warms caches, untimed
        gc.disable()
        t0 = time.perf_counter()
        cols = decode(MemoryRecords(buf), validate=True)
        times.append(time.perf_counter() - t0)
        gc.enable()
        n = len(cols)
        del cols
    return min(times[1:]), n


def jvm_classpath(args) -> str | None:
    if shutil.which("java") is None:
        note("JVM column skipped: no `java` on PATH")
        return None
    cp_file = Path(args.jvm_build) / "classpath"
    if not cp_file.exists():
        note(f"JVM column skipped: {cp_file} not found (run benchmarks/jvm/build.sh first)")
        return None
    return cp_file.read_text().strip()


def jvm(cp: str, *argv: str) -> dict | None:
    proc = subprocess.run(["java", *JVM_FLAGS, "-cp", cp, "KafkaLogBench", *argv],
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        note(f"JVM run failed ({' '.join(argv[:1])}): {proc.stderr.strip()[-400:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ratio(kafka: float | None, ours: float | None) -> str:
    return "-" if not kafka or not ours else f"{kafka / ours:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds; best counts (default 3)")
    ap.add_argument("--jvm-warmup", type=int, default=5, help="untimed JVM rounds first (default 5)")
    ap.add_argument("--jvm-build", default=str(HERE / "jvm" / "build"), help="benchmarks/jvm/build.sh's output")
    ap.add_argument("--quick", action="store_true", help="1,000 batches, 2 rounds")
    ap.add_argument("--codecs", default="LZ4,ZSTD", help="codecs of the compressed append (default LZ4,ZSTD; '' for none)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if args.quick:
        args.batches, args.rounds = min(args.batches, 1000), min(args.rounds, 2)
    if KL is None:
        sys.exit(f"kafkalog does not import: {_IMPORT_ERROR}")
    cpu, flags = cpu_facts()
    print(f"# kafkalog {git_describe(HERE.parent)} ({KL.core_name()}) beside Kafka's JVM code")
    print(f"# {cpu}; {flags}; Python {sys.version.split()[0]}")
    cp = jvm_classpath(args)
    out: dict = {"batches": args.batches, "rounds": args.rounds, "shapes": {}}
    rows = []
    with tempfile.TemporaryDirectory(prefix="kafkalog-vs-kafka-") as tmp:
        root = Path(tmp)
        codecs = [c.strip().upper() for c in args.codecs.split(",") if c.strip()]
        cases = [(shape, p, "NONE") for p in (False, True) for shape in SHAPES]
        cases += [(COMPRESSED_SHAPE, False, codec) for codec in codecs]
        for (value_size, records), producer, codec in cases:
            compressed = codec != "NONE"
            key = f"{value_size}{'-pid' if producer else ''}{'-' + codec.lower() if compressed else ''}"
            data = root / f"batches-{key}.bin"
            n_records = make_file(data, value_size, records, args.batches, seed=value_size, producer=producer,
                                  codec=codec)
            buf = data.read_bytes()
            batches = frame(buf)
            label = f"{value_size} B values" + (", producer ids" if producer else "") + (f", {codec.lower()}" if compressed else "")
            progress(f"{label}: kafkalog append")
            appends, writes = [], []
            kafkalog_append_round(buf, batches, root)  # warm-up
            for _ in range(args.rounds):
                appends.append(kafkalog_append_round(buf, batches, root))
                writes.append(os_write_round(buf, batches, root))
            ours, raw = best(appends), best(writes)
            dec_s = dec_n = None
            if not producer and not compressed:
                progress(f"{label}: kafkalog decode")
                dec_s, dec_n = kafkalog_decode(buf, args.rounds)
                assert dec_n == n_records, (dec_n, n_records)
            k_app = k_dec = None
            if cp:
                progress(f"{label}: Kafka (JVM)")
                k_app = jvm(cp, "append-pid" if producer else "append", str(data), str(root / "jvm-segment"),
                            str(args.jvm_warmup), str(args.rounds))
                if not producer and not compressed:
                    k_dec = jvm(cp, "decode", str(data), str(args.jvm_warmup), str(args.rounds))
            shape = out["shapes"][key if producer or compressed else value_size] = {
                "kafkalog_append_us": ours, "os_write_us": raw, "kafkalog_decode_records_per_s": dec_n / dec_s if dec_s else None,
                "kafka_append": k_app, "kafka_decode": k_dec}
            ka = k_app["kafka_append"] if k_app else None
            jw = k_app["jvm_write"] if k_app else None
            for i, when in ((0, "all batches"), (1, "from the 3rd"), (2, "CPU time")):
                key = ("us_per_batch", "us_per_batch_from_3rd", "cpu_us_per_batch")[i]
                # a driver built before the CPU-time figure (rebuild with benchmarks/jvm/build.sh) has no such key
                known = ka is not None and key in ka and key in jw
                rows.append([f"append, {label}, {when}",
                             f"{ka[key]:.1f} µs ({jw[key] / ka[key]:.2f} of raw)" if known else "-",
                             f"{ours[i]:.1f} µs ({raw[i] / ours[i]:.2f} of raw)",
                             ratio(ka[key] if known else None, ours[i])])
            if producer or compressed:
                continue
            kd = k_dec["records_per_s"] if k_dec else None
            rows.append([f"decode with CRC, {label}", f"{kd / 1e6:.2f} M rec/s" if kd else "-",
                         f"{shape['kafkalog_decode_records_per_s'] / 1e6:.2f} M rec/s",
                         ratio(1 / kd if kd else None, 1 / shape["kafkalog_decode_records_per_s"])])
    print()
    print(table(["path", "Kafka 3.8 (JVM)", "kafkalog", "kafkalog / Kafka"], rows))
    print("\n(append: µs a batch, with the raw write of the same buffers in the same process as a "
          "fraction of it; ratio > 1 means kafkalog is faster; 'CPU time': the appending thread's user + "
          "system time a batch, which other processes on a loaded machine do not inflate)")
    for msg in NOTES:
        print(f"note: {msg}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
