"""``kafkalog consume -f '%s\\n'`` on a partition directory against kcat consuming the same
partition from ``kafkalog broker``: records/s, one run each (issue 28).

A partition of ``--records`` records (``--value-size`` random base64 text each, keys ``key-<i>``, v2
batches of ``--batch-records``, ``--codec``) is written once through ``Log``; then, output to
/dev/null, from a warm page cache:

- ``kafkalog consume DIR/bench-0 -f '%s\\n'`` as a process (interpreter start included);
- ``kcat -C -b <broker> -t bench -p 0 -o beginning -e -f '%s\\n'`` against ``kafkalog broker``
  serving a copy of the directory (the broker runs in this process' thread; its start is not
  timed, kcat's connection is);
- ``-J`` for both, and ``consume``'s ``%o %k %s\\n`` (three tokens, still without a Python
  object per record).

    python benchmarks/bench_consume.py                 # 1 M records of 100 B
    python benchmarks/bench_consume.py --quick         # 200 k
    python benchmarks/bench_consume.py --records 5M --value-size 1K --codec lz4
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import cpu_facts, git_describe, import_kafkalog, parse_size, table

kafkalog, error = import_kafkalog("broker", "tools")
if kafkalog is None:
    sys.exit(f"kafkalog does not import: {error}")

from kafkalog import Compression, Log, LogConfig, RecordBatchBuilder
from kafkalog.broker import Broker

T0 = 1_700_000_000_000


def write_partition(directory: Path, records: int, value_size: int, per_batch: int, codec: Compression) -> int:
    """The benchmark's partition; its size in bytes."""
    log = Log.open(directory, LogConfig(segment_bytes=256 << 20))
    try:
        payload = base64.b64encode(os.urandom(value_size * per_batch))  # text: JSON copies it as it is
        for start in range(0, records, per_batch):
            b = RecordBatchBuilder(2, codec)
            for i in range(start, min(records, start + per_batch)):
                at = (i - start) * value_size
                b.append(b"key-%d" % i, payload[at:at + value_size], timestamp=T0 + i)
            log.append(b.build())
    finally:
        log.close()
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    """Seconds a process took with stdout counted (not kept), and the lines it printed."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    lines = 0
    while chunk := proc.stdout.read(1 << 20):
        lines += chunk.count(b"\n")
    err = proc.stderr.read() if proc.stderr else b""
    if proc.wait() != 0:
        sys.exit(f"{argv[0]} failed: {err.decode(errors='replace')}")
    return time.perf_counter() - t, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=parse_size, default=1_000_000)
    ap.add_argument("--value-size", type=parse_size, default=100)
    ap.add_argument("--batch-records", type=int, default=500)
    ap.add_argument("--codec", choices=[c.kafka_name for c in Compression], default="none")
    ap.add_argument("--quick", action="store_true", help="200 k records")
    a = ap.parse_args()
    records = 200_000 if a.quick else a.records
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    codec = next(c for c in Compression if c.kafka_name == a.codec)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(kafkalog.__file__).parents[1]), *sys.path]))
    with tempfile.TemporaryDirectory(prefix="bench-consume-") as tmp:
        logs = Path(tmp) / "logs"
        size = write_partition(logs / "bench-0", records, a.value_size, a.batch_records, codec)
        served = Path(tmp) / "served"
        shutil.copytree(logs, served)
        rows = []
        consume = [sys.executable, "-m", "kafkalog", "consume", str(logs / "bench-0")]
        cases = [("consume -f '%s\\n'", consume + ["-f", "%s\\n"]), ("consume -J", consume + ["-J"]),
                 ("consume -f '%o %k %s\\n'", consume + ["-f", "%o %k %s\\n"])]
        timed(consume + ["-c", "1"], env)  # warm the page cache and the interpreter's imports
        for name, argv in cases:
            seconds, lines = timed(argv, env)
            rows.append([name, f"{lines:,}", f"{seconds:.2f}", f"{lines / seconds:,.0f}"])
        if kcat is None:
            rows.append(["kcat (not installed)", "-", "-", "-"])
        else:
            with Broker(served, config={"log.cleaner.enable": "false"}) as broker:
                base = [kcat, "-C", "-b", broker.bootstrap, "-t", "bench", "-p", "0", "-o", "beginning", "-e", "-q"]
                timed(base + ["-c", "1"])
                for name, extra in (("kcat -f '%s\\n' (broker)", ["-f", "%s\\n"]), ("kcat -J (broker)", ["-J"])):
                    seconds, lines = timed(base + extra)
                    rows.append([name, f"{lines:,}", f"{seconds:.2f}", f"{lines / seconds:,.0f}"])
    cpu, _ = cpu_facts()
    print(f"kafkalog {git_describe(Path(kafkalog.__file__).parent)} on {cpu}; {records:,} records of {a.value_size} B, {a.batch_records} per batch, "
          f"codec {a.codec}, {size / 1e6:.0f} MB; one run each, page cache warm")
    print(table(["reader", "records", "seconds", "records/s"], rows))


if __name__ == "__main__":
    main()
