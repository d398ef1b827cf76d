"""Operator tools: how fast verify, rebuild-index, salvage and stat read a segment, next to
reading the same file raw (``readinto``, and read + CRC-32C of every byte) in the same run.

A temporary segment of v2 batches is written once (``--batch-size`` per batch, random values so
codecs cannot shrink it), its indexes built by ``rebuild_indexes``; then, each from a warm page
cache and best of ``--repeat`` runs:

- ``readinto`` of the whole file in 1 MiB chunks (what ``cat`` costs), and the same plus
  CRC-32C of every byte (a lower bound for anything that checks CRCs);
- ``verify_segment`` (CRC, headers, offsets, index checks), and with ``deep`` (every record
  decoded) on the first 64 MiB;
- ``rebuild_indexes`` with ``--dry-run`` semantics (the indexes are built and compared);
- ``salvage_segment`` of the clean segment into a second file (read, check, write);
- ``next_valid_batch`` scanning random bytes (the resync after corruption).

    python benchmarks/bench_tools.py                 # 512 MiB segment, 16 KiB batches
    python benchmarks/bench_tools.py --quick         # 64 MiB
    python benchmarks/bench_tools.py --size 2G --batch-size 1K
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

from _harness import cpu_facts, git_describe, import_kafkalog, parse_size, progress, table

kafkalog, error = import_kafkalog("verify", "salvage", "index_rebuild", "resync")
if kafkalog is None:
    sys.exit(f"kafkalog does not import: {error}")

from kafkalog import RecordBatchBuilder  # noqa: E402
from kafkalog import crc as kcrc  # noqa: E402
from kafkalog import rebuild_indexes  # noqa: E402
from kafkalog.file_records import FileRecords  # noqa: E402
from kafkalog import salvage_segment  # noqa: E402
from kafkalog.resync import next_valid_batch  # noqa: E402
from kafkalog import verify_segment  # noqa: E402

T0 = 1_700_000_000_000


def write_segment(path: Path, size: int, batch_size: int) -> tuple[int, int]:
    """Batches of ~``batch_size`` bytes up to ``size``; (batches, records)."""
    value = 200 if batch_size >= 4096 else 50
    per = max(1, batch_size // (value + 12))
    b = RecordBatchBuilder(2)
    for i in range(per):
        b.append(b"key-%d" % i, os.urandom(value), timestamp=T0 + i)
    proto = bytearray(b.build().buffer)
    n = max(1, size // len(proto))
    with open(path, "wb") as f:
        for i in range(n):
            struct.pack_into(">q", proto, 0, i * per)  # offsets: outside the CRC
            f.write(proto)
    return n, n * per


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def raw_read(path: Path, crc: bool) -> None:
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            if crc:
                kcrc.crc32c(view[:n])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="512M", help="segment size (512M)")
    parser.add_argument("--batch-size", default="16K", help="bytes per batch (16K)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a 64 MiB segment, 2 repeats")
    args = parser.parse_args()
    size = parse_size("64M" if args.quick else args.size)
    batch_size = parse_size(args.batch_size)
    repeat = 2 if args.quick else args.repeat
    cpu, flags = cpu_facts()
    print(f"kafkalog {git_describe(Path(__file__))}; {cpu} ({flags}); Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="bench-tools-") as tmp:
        directory = Path(tmp)
        log = directory / "00000000000000000000.log"
        progress(f"writing a {size >> 20} MiB segment of {batch_size}-byte batches ...")
        batches, records = write_segment(log, size, batch_size)
        rebuild_indexes(log)
        actual = log.stat().st_size
        mb = actual / 1e6
        raw_read(log, False)  # warm the page cache
        rows = []

        def add(name: str, seconds: float, megabytes: float = mb) -> None:
            rows.append([name, f"{megabytes / seconds:,.0f}", f"{seconds * 1000:,.0f}"])

        progress("raw reads ...")
        add("readinto, 1 MiB chunks (cat)", best(lambda: raw_read(log, False), repeat))
        add("readinto + CRC-32C of every byte", best(lambda: raw_read(log, True), repeat))
        progress("verify ...")
        report = verify_segment(log)
        assert report.ok and report.problems == [], report.problems
        add("verify_segment (CRC, headers, offsets, indexes)", best(lambda: verify_segment(log), repeat))
        add("verify_segment, no index checks", best(lambda: verify_segment(log, check_indexes=False), repeat))
        deep_log = directory / "00000000000000000001.log"
        with FileRecords.open(log) as fr:
            head = fr.read(0, min(actual, 64 << 20))
        cut = 0
        with FileRecords.open(log) as fr:
            for batch in fr.batches():
                if batch.position + batch.size_in_bytes > len(head):
                    break
                cut = batch.position + batch.size_in_bytes
        deep_log.write_bytes(head[:cut])
        add("verify_segment(deep=True) (first 64 MiB)", best(lambda: verify_segment(deep_log, deep=True, check_indexes=False), 1), cut / 1e6)
        progress("rebuild-index ...")
        add("rebuild_indexes (dry run)", best(lambda: rebuild_indexes(log, dry_run=True), repeat))
        progress("salvage ...")
        out = directory / "copy"
        out.mkdir()

        def salvage() -> None:
            salvage_segment(log, out, overwrite=True, write_indexes=False)

        add("salvage_segment (clean input: read, check, write)", best(salvage, repeat))
        progress("resync scan ...")
        noise = directory / "noise.log"
        noise.write_bytes(os.urandom(min(actual, 32 << 20)))
        with FileRecords.open(noise) as fr:
            add("next_valid_batch over random bytes", best(lambda: next_valid_batch(fr, 0), 1), noise.stat().st_size / 1e6)
        print(f"segment: {mb:,.0f} MB, {batches:,} batches of {actual // batches:,} bytes, {records:,} records")
        print(table(["", "MB/s", "ms"], rows))


if __name__ == "__main__":
    main()
