#!/usr/bin/env python3
"""kafkalog columnar decode benchmark: Arrow columns next to the Record iterator, peers and memcpy.

For each case -- values of 100 B and 1 KiB (half random bytes, half text, ~10-byte keys, no
headers), codecs none, lz4 and zstd -- one run builds --size bytes (default 64 MiB) of ~16 KiB
v2 batches with consecutive offsets and measures, all with CRC validation on, records/s and
MB/s of batch bytes, every decoder on the same --peer-size prefix (default 8 MiB):

  * kafkalog  decode_columns(MemoryRecords(buf)).to_arrow()   (the Arrow record batch)
  * kafkalog  decode_columns(...) alone                       (numpy columns)
  * kafkalog  Record iterator: batches(validate=True), every record's offset, timestamp, key,
              value and headers touched
  * kafka-python and aiokafka (when installed), the same touching loop
  * memcpy of the whole --size buffer into a reused one: the raw hardware line

and once more the Arrow decode over the whole --size (one output of that size: this line also
pays for faulting in fresh memory, which is slow on some VMs).

Before anything is timed, the columns are checked against the Record iterator (and the Arrow
batch against the columns) on the prefix, and every offset of the whole buffer is checked.

Timing: time.perf_counter, best of --repeats single runs, garbage collector off while timing.

Run:   /tmp/kv/bin/python benchmarks/bench_columnar.py [--quick] [--size 64M] [--json out.json]
kafkalog is imported from the environment, or else from ../src next to this script.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import random
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import cpu_facts, parse_size, table  # noqa: E402

REPO_SRC = Path(__file__).resolve().parent.parent / "src"
if importlib.util.find_spec("kafkalog") is None:
    sys.path.insert(0, str(REPO_SRC))

import numpy as np  # noqa: E402

from kafkalog import Compression, MemoryRecords, RecordBatchBuilder  # noqa: E402
from kafkalog import native  # noqa: E402
from kafkalog.columnar.decode import decode_columns  # noqa: E402

perf_counter = time.perf_counter
NOTES: list[str] = []

try:
    import pyarrow as pa

    PA_VERSION = pa.__version__
except ImportError as e:  # pragma: no cover - environment dependent
    pa = None
    PA_VERSION = f"unavailable ({e!r})"

try:
    import kafka as _kafka
    from kafka.record import MemoryRecords as KPMemoryRecords

    KP_VERSION = getattr(_kafka, "__version__", "?")
except Exception as e:  # pragma: no cover
    KPMemoryRecords = None
    KP_VERSION = f"unavailable ({e!r})"

AIO_LABEL = "aiokafka"
try:
    import aiokafka as _aiokafka

    AIO_VERSION = getattr(_aiokafka, "__version__", "?")
    try:
        from aiokafka.record import _crecords as _aio_c

        AIOMemoryRecords = _aio_c.MemoryRecords
        AIO_LABEL = "aiokafka[C]"
    except ImportError:
        from aiokafka.record.memory_records import _MemoryRecordsPy as AIOMemoryRecords

        AIO_LABEL = "aiokafka[py]"
except Exception as e:  # pragma: no cover
    AIOMemoryRecords = None
    AIO_VERSION = f"unavailable ({e!r})"


def note(msg: str) -> None:
    NOTES.append(msg)
    print(f"  note: {msg}", file=sys.stderr, flush=True)


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def best_of(fn, repeats: int) -> float:
    """Best seconds of one call of ``fn`` over ``repeats`` calls, GC off while timing."""
    fn()  # warm up (imports, caches)
    gc_was = gc.isenabled()
    gc.disable()
    try:
        best = float("inf")
        for _ in range(repeats):
            t0 = perf_counter()
            fn()
            best = min(best, perf_counter() - t0)
        return best
    finally:
        if gc_was:
            gc.enable()
        gc.collect()


# --------------------------------------------------------------------------
# Data: a few MiB of distinct batches, tiled to the size with rewritten base offsets
# --------------------------------------------------------------------------

WORDS = (
    b"kafka log segment offset broker partition topic replica leader epoch "
    b"producer consumer fetch index timestamp record batch header value key"
).split()
BASE_TS = 1_700_000_000_000
TARGET_BATCH = 16 * 1024
TEMPLATE_BYTES = 4 << 20
CODECS = {"none": Compression.NONE, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


def make_value(rng: random.Random, size: int) -> bytes:
    """Half random bytes, half text (compresses about 2x)."""
    parts, n = [rng.randbytes(size // 2)], size // 2
    while n < size:
        w = rng.choice(WORDS) + b" "
        parts.append(w)
        n += len(w)
    return b"".join(parts)[:size]


def build_buffer(value_size: int, codec: Compression, size: int, seed: int) -> tuple[bytes, int, int]:
    """(buffer, records, batches): ~16 KiB v2 batches, offsets 0.. consecutive."""
    rng = random.Random(seed)
    per_batch = max(1, (TARGET_BATCH - 61) // (value_size + 21))
    template, starts, offset = [], [], 0
    while sum(map(len, template)) < min(size, TEMPLATE_BYTES):
        b = RecordBatchBuilder(2, codec, base_offset=offset)
        for i in range(per_batch):
            b.append(b"user-%05d" % rng.randrange(100_000), make_value(rng, value_size),
                     timestamp=BASE_TS + (offset + i) * 3)
        template.append(bytes(b.build().buffer))
        offset += per_batch
    tpl = bytearray(b"".join(template))
    pos = 0
    for part in template:
        starts.append(pos)
        pos += len(part)
    copies = max(1, size // len(tpl))
    out = bytearray()
    next_base = 0
    for _ in range(copies):
        for p in starts:  # the base offset is outside the CRC: rewrite it in place
            struct.pack_into(">q", tpl, p, next_base)
            next_base += per_batch
        out += tpl
    return bytes(out), next_base, copies * len(template)


def prefix(buf: bytes, limit: int) -> bytes:
    """Whole batches from the start of ``buf`` up to about ``limit`` bytes."""
    pos = 0
    while pos < len(buf) and pos < limit:
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        pos += 12 + length
    return buf[:pos]


# --------------------------------------------------------------------------
# Decoders
# --------------------------------------------------------------------------


def _len(x) -> int:
    return 0 if x is None else len(x)


def kl_arrow(buf):
    return decode_columns(MemoryRecords(buf)).to_arrow()


def kl_columns(buf):
    return decode_columns(MemoryRecords(buf))


def kl_iterate(buf) -> int:
    acc = 0
    for batch in MemoryRecords(buf).batches(validate=True):
        for r in batch:
            acc += r.offset + r.timestamp + _len(r.key) + _len(r.value) + len(r.headers)
    return acc


def kp_iterate(buf) -> int:
    acc = 0
    mr = KPMemoryRecords(buf)
    while mr.has_next():
        batch = mr.next_batch()
        if not batch.validate_crc():
            raise ValueError("kafka-python: CRC mismatch")
        for r in batch:
            acc += r.offset + r.timestamp + _len(r.key) + _len(r.value) + len(r.headers)
    return acc


def aio_iterate(buf) -> int:
    acc = 0
    mr = AIOMemoryRecords(buf)
    while mr.has_next():
        batch = mr.next_batch()
        if not batch.validate_crc():
            raise ValueError("aiokafka: CRC mismatch")
        for r in batch:
            acc += r.offset + r.timestamp + _len(r.key) + _len(r.value) + len(r.headers)
    return acc


_DEST = bytearray()


def memcpy(buf) -> None:
    """Copy ``buf`` into a buffer kept from call to call (bandwidth, not allocation)."""
    global _DEST
    if len(_DEST) != len(buf):
        _DEST = bytearray(len(buf))
    memoryview(_DEST)[:] = buf


def check(buf: bytes, small: bytes, records: int) -> bool:
    """Columns vs the Record iterator on ``small``; every offset of ``buf``; Arrow vs columns."""
    cols = decode_columns(MemoryRecords(small))
    recs = list(MemoryRecords(small).records())
    if len(cols) != len(recs):
        note(f"columns hold {len(cols)} records, the iterator {len(recs)}")
        return False
    ko, kd, vo, vd = cols.key_offsets, cols.key_data.tobytes(), cols.value_offsets, cols.value_data.tobytes()
    for i, r in enumerate(recs):
        row = (int(cols.offset[i]), int(cols.timestamp[i]), kd[ko[i] : ko[i + 1]], vd[vo[i] : vo[i + 1]])
        if row != (r.offset, r.timestamp, r.key, r.value) or cols.headers_valid[i]:
            note(f"record {i} differs: {str(row)[:100]} vs {r!r}")
            return False
    if pa is not None:
        rb = cols.to_arrow()
        if rb.column("value").to_pylist()[:50] != [r.value for r in recs[:50]]:
            note("Arrow values differ from the columns")
            return False
    whole = decode_columns(MemoryRecords(buf))
    if len(whole) != records or not np.array_equal(whole.offset, np.arange(records)):
        note(f"whole buffer: {len(whole)} records, offsets not 0..{records - 1}")
        return False
    return True


# --------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------


def run_cases(args) -> list[dict]:
    rows = []
    for value_size in (100, 1024):
        for codec_name, codec in CODECS.items():
            progress(f"value={value_size} B codec={codec_name}: building {args.size >> 20} MiB")
            buf, records, batches = build_buffer(value_size, codec, args.size, seed=value_size)
            small = prefix(buf, args.peer_size)
            small_records = sum(b.count for b in MemoryRecords(small).batches())
            row = {"value_size": value_size, "codec": codec_name, "bytes": len(buf), "records": records,
                   "batches": batches, "peer_bytes": len(small), "peer_records": small_records}
            if not check(buf, small, records):
                note(f"{value_size} B {codec_name}: check failed; case not timed")
                continue

            # Every decoder on the prefix is timed in turns (one run each per round, best of
            # --repeats rounds kept), so load from elsewhere falls on all of them alike.
            pure = native.use(pure=True) if native.available() else None
            turns = [("columns", kl_columns, None), ("iterator", kl_iterate, None)]
            if pa is not None:
                turns.insert(0, ("arrow", kl_arrow, None))
            if pure is not None:
                if pa is not None:
                    turns.append(("arrow[py]", kl_arrow, True))
                turns.append(("iterator[py]", kl_iterate, True))
            if KPMemoryRecords is not None:
                turns.append(("kafka-python", kp_iterate, None))
            if AIOMemoryRecords is not None:
                turns.append((AIO_LABEL, aio_iterate, None))
            progress("  " + ", ".join(name for name, _, _ in turns) + " in turns; memcpy; Arrow over all")
            best = {name: float("inf") for name, _, _ in turns}
            for _ in range(args.repeats):
                for name, fn, on_pure in turns:
                    if on_pure:
                        with native.use(pure=True):
                            best[name] = min(best[name], best_of(lambda: fn(small), 1))
                    else:
                        best[name] = min(best[name], best_of(lambda: fn(small), 1))
            for name, t in best.items():
                row[name] = {"records_per_s": small_records / t, "MB_per_s": len(small) / t / 1e6, "seconds": t}

            def rate(fn, data, n):
                t = best_of(lambda: fn(data), args.repeats)
                return {"records_per_s": n / t, "MB_per_s": len(data) / t / 1e6, "seconds": t}

            row["memcpy"] = rate(memcpy, buf, records)
            if pa is not None:
                row["arrow_whole"] = rate(kl_arrow, buf, records)
            rows.append(row)
    return rows


def si(x: float | None) -> str:
    if x is None:
        return "-"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suf}"
    return f"{x:.3g}"


def report(args, rows: list[dict]) -> None:
    cpu, flags = cpu_facts()
    p = print
    p("=" * 100)
    p("kafkalog columnar decode benchmark" + ("  (--quick)" if args.quick else ""))
    p("=" * 100)
    p(f"CPU        : {cpu}  ({os.cpu_count()} logical cores; flags: {flags or '?'})")
    p(f"Python     : {platform.python_implementation()} {platform.python_version()}  [{platform.platform()}]")
    p(f"numpy      : {np.__version__}; pyarrow {PA_VERSION}; kafka-python {KP_VERSION}; aiokafka {AIO_VERSION}")
    p(f"data       : {args.size >> 20} MiB of ~16 KiB v2 batches per case; every decoder on the same "
      f"{args.peer_size >> 20} MiB prefix, Arrow also on all of it; CRC validated by every decoder")
    p(f"timing     : best of {args.repeats} runs, time.perf_counter, GC off while timing")
    names = ["arrow", "columns", "iterator", "arrow[py]", "iterator[py]", "kafka-python", AIO_LABEL, "arrow_whole"]
    labels = ["kafkalog Arrow", "kafkalog numpy", "kafkalog Record iter", "[py] Arrow", "[py] Record iter",
              "kafka-python", AIO_LABEL, f"Arrow, all {args.size >> 20} MiB"]
    p(f"cores      : kafkalog = the {native.core_name()} core; [py] = the pure-Python core")
    p()
    p("records/s (MB/s of batch bytes)")
    hdr = ["value", "codec", "rec/batch"] + labels + ["memcpy GB/s", "Arrow/iter", "Arrow/kafka-python",
                                                     "[py] Arrow/kafka-python"]
    out = []
    for r in rows:
        def cell(k):
            return "-" if k not in r else f"{si(r[k]['records_per_s'])} ({r[k]['MB_per_s']:.0f})"

        def ratio(a, b):
            if a not in r or b not in r:
                return "-"
            return f"{r[a]['records_per_s'] / r[b]['records_per_s']:.1f}x"

        memcpy_gbs = f"{r['memcpy']['MB_per_s'] / 1e3:.1f}"
        out.append([f"{r['value_size']} B", r["codec"], f"{r['records'] // r['batches']}"]
                   + [cell(k) for k in names]
                   + [memcpy_gbs, ratio("arrow", "iterator"), ratio("arrow", "kafka-python"),
                      ratio("arrow[py]", "kafka-python")])
    p(table(hdr, out, ["<", "<"] + [">"] * (len(hdr) - 2)))
    if NOTES:
        p()
        p("Notes:")
        for n in NOTES:
            p(f"  - {n}")
    p()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="16 MiB per case, 2 repeats")
    ap.add_argument("--size", type=parse_size, default=None, help="bytes per case (default 64M; 16M with --quick)")
    ap.add_argument("--peer-size", type=parse_size, default=None,
                    help="prefix the peers and the Record iterator decode (default 8M; 4M with --quick)")
    ap.add_argument("--repeats", type=int, default=None, help="runs per measurement, best kept (default 5; 2 quick)")
    ap.add_argument("--json", metavar="OUT.json", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    args.size = args.size or ((16 << 20) if args.quick else (64 << 20))
    args.peer_size = min(args.size, args.peer_size or ((4 << 20) if args.quick else (8 << 20)))
    args.repeats = args.repeats or (2 if args.quick else 5)
    if pa is None:
        note(f"pyarrow {PA_VERSION}: the Arrow column is skipped")
    if KPMemoryRecords is None:
        note(f"kafka-python {KP_VERSION}: skipped")
    t0 = perf_counter()
    rows = run_cases(args)
    report(args, rows)
    print(f"total time {perf_counter() - t0:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": {k: v for k, v in vars(args).items()}, "cases": rows, "notes": NOTES}, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
